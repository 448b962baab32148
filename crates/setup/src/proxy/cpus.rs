//! The CPU set a proxy's processes are pinned to (`[proxy] cpus = "1"`): a comparison of proxies
//! is fair only when each gets the same cores, and a load generator sharing a core with the proxy
//! measures the two together.

use super::Invalid;
use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// A CPU list as `taskset -c` and `/sys/devices/system/cpu/online` write it: `"1"`, `"0-1"`,
/// `"0,2-3"`. Sorted, without duplicates, never empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cpus(Vec<usize>);

/// The largest CPU number a list may name: the kernel's `cpu_set_t` holds 1024.
pub const MAX_CPU: usize = 1023;

impl Cpus {
    /// Parses a CPU list; the message names the part that is wrong.
    pub fn parse(s: &str) -> Result<Cpus, Invalid> {
        let mut v = Vec::new();
        for part in s.split(',').map(str::trim) {
            let num = |x: &str| {
                x.trim()
                    .parse::<usize>()
                    .ok()
                    .filter(|n| *n <= MAX_CPU)
                    .ok_or_else(|| {
                        Invalid(format!(
                            "'{x}' in CPU list '{s}' is not a CPU number (0 to {MAX_CPU})"
                        ))
                    })
            };
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (num(a)?, num(b)?);
                    if a > b {
                        return Err(Invalid(format!(
                            "range '{part}' in CPU list '{s}' runs backwards"
                        )));
                    }
                    v.extend(a..=b);
                }
                None if part.is_empty() => {
                    return Err(Invalid(format!(
                        "empty entry in CPU list '{s}' (write \"1\" or \"0-1\")"
                    )))
                }
                None => v.push(num(part)?),
            }
        }
        v.sort_unstable();
        v.dedup();
        Ok(Cpus(v))
    }

    /// The CPU numbers, ascending.
    pub fn list(&self) -> &[usize] {
        &self.0
    }
}

impl fmt::Display for Cpus {
    /// The compact form (`0-2,5`), as taskset prints it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut i = 0;
        let mut first = true;
        while i < self.0.len() {
            let start = self.0[i];
            let mut end = start;
            while i + 1 < self.0.len() && self.0[i + 1] == end + 1 {
                i += 1;
                end = self.0[i];
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
            i += 1;
        }
        Ok(())
    }
}

impl Serialize for Cpus {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Cpus {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Cpus, D::Error> {
        let s = String::deserialize(d)?;
        Cpus::parse(&s).map_err(de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_as_taskset_writes_them() {
        assert_eq!(Cpus::parse("1").unwrap().list(), &[1]);
        assert_eq!(Cpus::parse("0-1").unwrap().list(), &[0, 1]);
        assert_eq!(Cpus::parse("3, 0-1,1").unwrap().list(), &[0, 1, 3]);
        assert_eq!(Cpus::parse("0-2,5").unwrap().to_string(), "0-2,5");
        assert_eq!(Cpus::parse("4,2").unwrap().to_string(), "2,4");
    }

    #[test]
    fn bad_lists_name_the_bad_part() {
        assert!(Cpus::parse("").unwrap_err().0.contains("empty entry"));
        assert!(Cpus::parse("1,,2").unwrap_err().0.contains("empty entry"));
        assert!(Cpus::parse("x").unwrap_err().0.contains("'x'"));
        assert!(Cpus::parse("3-1").unwrap_err().0.contains("backwards"));
        assert!(Cpus::parse("2000").unwrap_err().0.contains("0 to 1023"));
    }
}
