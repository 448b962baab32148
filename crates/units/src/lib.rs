//! Durations, byte sizes and rates as people write them (`250ms`, `5m`, `4KiB`, `3r/s`), parsed
//! strictly and printed the way wrk prints them. Every crate that reads a flag or a scenario value
//! goes through here, so `10s` means the same thing everywhere.

#![warn(missing_docs)]

use std::fmt;
use std::time::Duration;

/// A value that could not be parsed; the message names the bad part and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub String);

fn split_number(s: &str) -> (&str, &str) {
    let end = s
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_digit() || c == '.'))
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    (&s[..end], s[end..].trim())
}

fn parse_number(num: &str, whole: &str, what: &str) -> Result<f64, ParseError> {
    if num.is_empty() {
        return Err(ParseError(format!(
            "{what} '{whole}' does not start with a number"
        )));
    }
    num.parse::<f64>()
        .map_err(|_| ParseError(format!("{what} '{whole}' has a malformed number '{num}'")))
}

/// Parses a duration such as `10s`, `250ms`, `1.5s`, `5m`, `1h`, `100us` or `2d`.
/// A bare number is refused: the unit is always explicit so `-d 10` cannot mean two things.
pub fn parse_duration(s: &str) -> Result<Duration, ParseError> {
    let t = s.trim();
    let (num, unit) = split_number(t);
    let n = parse_number(num, t, "duration")?;
    let secs_per_unit = match unit {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" | "sec" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        "" => {
            return Err(ParseError(format!(
                "duration '{t}' needs a unit (ns, us, ms, s, m, h, d)"
            )))
        }
        other => {
            return Err(ParseError(format!(
                "duration '{t}' has unknown unit '{other}' (use ns, us, ms, s, m, h, d)"
            )))
        }
    };
    let secs = n * secs_per_unit;
    if !secs.is_finite() || secs > 1e9 {
        return Err(ParseError(format!("duration '{t}' is out of range")));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parses a byte size such as `512`, `1k`, `4KiB`, `1.5MB` or `2g`. Suffixes are binary
/// (k = 1024) whether or not the `i` is written, as in wrk and nginx.
pub fn parse_size(s: &str) -> Result<u64, ParseError> {
    let t = s.trim();
    let (num, unit) = split_number(t);
    let n = parse_number(num, t, "size")?;
    let mult: f64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        _ => {
            return Err(ParseError(format!(
                "size '{t}' has unknown unit '{unit}' (use b, k, m, g)"
            )))
        }
    };
    let v = n * mult;
    if !v.is_finite() || v > 1e15 {
        return Err(ParseError(format!("size '{t}' is out of range")));
    }
    Ok(v.round() as u64)
}

/// Parses a request rate such as `2000`, `3r/s`, `180r/m` or `20k` into requests per second.
pub fn parse_rate(s: &str) -> Result<f64, ParseError> {
    let t = s.trim();
    let (num, unit) = split_number(t);
    let n = parse_number(num, t, "rate")?;
    let v = match unit {
        "" | "r/s" | "/s" | "rps" => n,
        "k" => n * 1000.0,
        "r/m" | "/m" | "rpm" => n / 60.0,
        other => {
            return Err(ParseError(format!(
                "rate '{t}' has unknown unit '{other}' (use r/s, r/m or k)"
            )))
        }
    };
    if v.is_nan() || v <= 0.0 || !v.is_finite() {
        return Err(ParseError(format!("rate '{t}' must be a positive number")));
    }
    Ok(v)
}

/// Parses a percentage such as `1%`, `0.5%` or a bare fraction `0.01` into a fraction in [0, 1].
pub fn parse_fraction(s: &str) -> Result<f64, ParseError> {
    let t = s.trim();
    let v = if let Some(p) = t.strip_suffix('%') {
        parse_number(p.trim(), t, "percentage")? / 100.0
    } else {
        parse_number(t, t, "fraction")?
    };
    if !(0.0..=1.0).contains(&v) {
        return Err(ParseError(format!("'{t}' must lie between 0% and 100%")));
    }
    Ok(v)
}

/// Prints a duration given in microseconds the way wrk does: `632.00us`, `15.02ms`, `1.07s`, `5.00m`.
pub fn fmt_us(us: f64) -> String {
    if us < 1000.0 {
        format!("{us:.2}us")
    } else if us < 1_000_000.0 {
        format!("{:.2}ms", us / 1e3)
    } else if us < 60_000_000.0 {
        format!("{:.2}s", us / 1e6)
    } else if us < 3_600_000_000.0 {
        format!("{:.2}m", us / 6e7)
    } else {
        format!("{:.2}h", us / 3.6e9)
    }
}

/// Prints a wall-clock length in seconds as wrk's headline does: `10s`, `5m`, `1.5m`, `2h`.
pub fn fmt_secs_short(secs: f64) -> String {
    let trim = |v: f64| {
        let s = format!("{v:.2}");
        let s = s.trim_end_matches('0').trim_end_matches('.').to_string();
        s
    };
    if secs < 60.0 {
        format!("{}s", trim(secs))
    } else if secs < 3600.0 {
        format!("{}m", trim(secs / 60.0))
    } else {
        format!("{}h", trim(secs / 3600.0))
    }
}

/// Prints a byte count with binary units as wrk does: `281.73MB`, `0.94MB`, `692.50KB`, `120.00B`.
pub fn fmt_bytes(bytes: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut v = bytes;
    let mut i = 0;
    while v >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    format!("{v:.2}{}", UNITS[i])
}

/// Prints a plain quantity with a metric suffix as wrk does for Req/Sec: `1.53k`, `143.30`, `2.10M`.
pub fn fmt_metric(v: f64) -> String {
    if v >= 1e9 {
        format!("{:.2}G", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.2}k", v / 1e3)
    } else {
        format!("{v:.2}")
    }
}

/// Prints parts per million with enough digits that a single failure in a billion requests shows.
pub fn fmt_ppm(failures: u64, total: u64) -> String {
    if total == 0 {
        return "n/a".to_string();
    }
    let ppm = failures as f64 * 1e6 / total as f64;
    if ppm == 0.0 {
        "0 ppm".to_string()
    } else if ppm >= 100.0 {
        format!("{ppm:.0} ppm")
    } else if ppm >= 1.0 {
        format!("{ppm:.2} ppm")
    } else {
        format!("{ppm:.4} ppm")
    }
}

/// A duration in a config file or scenario: written as a string (`"10s"`, `"250ms"`), parsed with
/// [`parse_duration`], so a bad value is reported at its line by the file's parser.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Dur(pub Duration);

impl std::str::FromStr for Dur {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Dur, ParseError> {
        parse_duration(s).map(Dur)
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        if d.subsec_nanos() == 0 {
            write!(f, "{}s", d.as_secs())
        } else if d.as_nanos() % 1_000_000 == 0 {
            write!(f, "{}ms", d.as_millis())
        } else if d.as_nanos() % 1000 == 0 {
            write!(f, "{}us", d.as_micros())
        } else {
            write!(f, "{}ns", d.as_nanos())
        }
    }
}

impl serde::Serialize for Dur {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Dur {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Dur, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A byte size in a config file: an integer of bytes or a string such as `"4KiB"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Size(pub u64);

impl serde::Serialize for Size {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

impl<'de> serde::Deserialize<'de> for Size {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Size, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => Ok(Size(n)),
            Raw::S(s) => parse_size(&s).map(Size).map_err(serde::de::Error::custom),
        }
    }
}

/// A request rate in a config file: a number of requests per second or a string such as `"3r/s"`.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
pub struct Rate(pub f64);

impl serde::Serialize for Rate {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.0)
    }
}

impl<'de> serde::Deserialize<'de> for Rate {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Rate, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(f64),
            S(String),
        }
        let v = match Raw::deserialize(d)? {
            Raw::N(n) => n,
            Raw::S(s) => parse_rate(&s).map_err(serde::de::Error::custom)?,
        };
        if v.is_nan() || v <= 0.0 {
            return Err(serde::de::Error::custom("rate must be a positive number"));
        }
        Ok(Rate(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("100us").unwrap(), Duration::from_micros(100));
        assert!(parse_duration("10").unwrap_err().0.contains("needs a unit"));
        assert!(parse_duration("10x")
            .unwrap_err()
            .0
            .contains("unknown unit 'x'"));
        assert!(parse_duration("s")
            .unwrap_err()
            .0
            .contains("does not start with a number"));
        assert!(parse_duration("1.2.3s")
            .unwrap_err()
            .0
            .contains("malformed"));
    }

    #[test]
    fn sizes_rates_fractions() {
        assert_eq!(parse_size("512").unwrap(), 512);
        assert_eq!(parse_size("1k").unwrap(), 1024);
        assert_eq!(parse_size("4KiB").unwrap(), 4096);
        assert_eq!(parse_size("1.5MB").unwrap(), 1_572_864);
        assert!(parse_size("1q").is_err());
        assert_eq!(parse_rate("3r/s").unwrap(), 3.0);
        assert_eq!(parse_rate("20k").unwrap(), 20000.0);
        assert_eq!(parse_rate("120r/m").unwrap(), 2.0);
        assert!(parse_rate("0").is_err());
        assert_eq!(parse_fraction("1%").unwrap(), 0.01);
        assert_eq!(parse_fraction("0.25").unwrap(), 0.25);
        assert!(parse_fraction("150%").is_err());
    }

    #[test]
    fn wrk_style_printing() {
        assert_eq!(fmt_us(632.0), "632.00us");
        assert_eq!(fmt_us(15020.0), "15.02ms");
        assert_eq!(fmt_us(1_070_000.0), "1.07s");
        assert_eq!(fmt_us(300_000_000.0), "5.00m");
        assert_eq!(fmt_bytes(281.73 * 1024.0 * 1024.0), "281.73MB");
        assert_eq!(fmt_bytes(120.0), "120.00B");
        assert_eq!(fmt_metric(1530.0), "1.53k");
        assert_eq!(fmt_metric(143.3), "143.30");
        assert_eq!(fmt_secs_short(10.0), "10s");
        assert_eq!(fmt_secs_short(300.0), "5m");
        assert_eq!(fmt_secs_short(64.8), "1.08m");
        assert_eq!(fmt_ppm(1, 1_000_000), "1.00 ppm");
        assert_eq!(fmt_ppm(32, 10_000), "3200 ppm");
        assert_eq!(fmt_ppm(0, 5), "0 ppm");
    }

    #[derive(serde::Deserialize, Debug)]
    struct Doc {
        d: Dur,
        s: Size,
        r: Rate,
    }

    #[test]
    fn serde_wrappers_read_strings_and_numbers() {
        let doc: Doc = toml::from_str("d = \"250ms\"\ns = \"4k\"\nr = \"3r/s\"\n").unwrap();
        assert_eq!(doc.d.0, Duration::from_millis(250));
        assert_eq!(doc.s.0, 4096);
        assert_eq!(doc.r.0, 3.0);
        let doc: Doc = toml::from_str("d = \"1s\"\ns = 100\nr = 2.5\n").unwrap();
        assert_eq!((doc.s.0, doc.r.0), (100, 2.5));
        let err = toml::from_str::<Doc>("d = \"1s\"\ns = 1\nr = 1\nd2 = 1\n");
        assert!(err.is_ok(), "unknown keys are the caller's policy");
        let err = toml::from_str::<Doc>("d = \"10\"\ns = 1\nr = 1\n").unwrap_err();
        assert!(err.to_string().contains("needs a unit"), "{err}");
        assert_eq!(Dur(Duration::from_millis(250)).to_string(), "250ms");
        assert_eq!(Dur(Duration::from_secs(5)).to_string(), "5s");
    }
}
