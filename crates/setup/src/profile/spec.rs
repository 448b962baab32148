//! The profile spec language: parsing (errors name the bad part) and canonical printing.

use super::{Behaviour, Dist, PathRule, Profile, Share, SpecError, Spike, StatusShare};
use std::fmt;
use std::time::Duration;

const KEYS: &str = "latency, spike, cpu, size, status, close_after, slow_start, push, push_size, push_count, ping, or path /PREFIX { ... }";
/// The keys that apply to a whole instance, never to a path.
const INSTANCE_KEYS: [&str; 6] = [
    "close_after",
    "slow_start",
    "push",
    "push_size",
    "push_count",
    "ping",
];
const DISTS: &str = "fixed, uniform, normal, lognormal, exponential";
/// Latency and CPU above an hour are refused (a typo, not an experiment).
const MAX_TIME_NS: u64 = 3_600_000_000_000;
/// Bodies above 1 GiB are refused.
const MAX_SIZE: u64 = 1 << 30;

#[derive(Clone, Copy, PartialEq)]
enum Unit {
    Time,
    Size,
}

fn err<T>(msg: impl Into<String>) -> Result<T, SpecError> {
    Err(SpecError(msg.into()))
}

/// Parses a whole spec.
pub(crate) fn parse(s: &str) -> Result<Profile, SpecError> {
    let mut p = Profile::default();
    let mut seen: Vec<&str> = Vec::new();
    for item in split_top(s, &[';', '\n'], "")? {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        if let Some(rest) = strip_word(item, "path") {
            let rule = parse_path_block(rest)?;
            if p.paths.iter().any(|r| r.prefix == rule.prefix) {
                return err(format!("path {}: set twice", rule.prefix));
            }
            p.paths.push(rule);
            continue;
        }
        let (key, value) = split_setting(item, "")?;
        if seen.contains(&key) {
            return err(format!("{key}: set twice"));
        }
        seen.push(key);
        match key {
            "close_after" => {
                let n: u64 = value.parse().map_err(|_| {
                    SpecError(format!(
                        "close_after: '{value}' is not a whole number of requests"
                    ))
                })?;
                if n == 0 {
                    return err("close_after: must be at least 1");
                }
                p.close_after = Some(n);
            }
            "slow_start" => {
                let ns = parse_value(value, Unit::Time)
                    .map_err(|e| SpecError(format!("slow_start: {e}")))?;
                p.slow_start = Some(Duration::from_nanos(ns));
            }
            "push" => {
                let r =
                    units::parse_rate(value).map_err(|e| SpecError(format!("push: {}", e.0)))?;
                if r > 100_000.0 {
                    return err("push: at most 100000 messages a second per connection");
                }
                p.streams.push = Some(r);
            }
            "push_size" => {
                let n = parse_value(value, Unit::Size)
                    .map_err(|e| SpecError(format!("push_size: {e}")))?;
                if n > 16 << 20 {
                    return err("push_size: at most 16m");
                }
                p.streams.push_size = Some(n);
            }
            "push_count" => {
                let n: u64 = value.parse().map_err(|_| {
                    SpecError(format!(
                        "push_count: '{value}' is not a whole number of messages"
                    ))
                })?;
                if n == 0 {
                    return err("push_count: must be at least 1");
                }
                p.streams.push_count = Some(n);
            }
            "ping" => {
                let ns =
                    parse_value(value, Unit::Time).map_err(|e| SpecError(format!("ping: {e}")))?;
                if ns < 1_000_000 {
                    return err("ping: at least 1ms");
                }
                p.streams.ping = Some(Duration::from_nanos(ns));
            }
            _ => set_behaviour(&mut p.base, key, value, "")?,
        }
    }
    Ok(p)
}

/// `path /slow { latency=100ms; status=500:1% }` without the leading word.
fn parse_path_block(rest: &str) -> Result<PathRule, SpecError> {
    let rest = rest.trim();
    let Some(open) = rest.find('{') else {
        return err(format!(
            "path: expected 'path /PREFIX {{ settings }}', got 'path {rest}'"
        ));
    };
    let prefix = rest[..open].trim();
    if !prefix.starts_with('/') || prefix.contains(char::is_whitespace) {
        return err(format!(
            "path: prefix '{prefix}' must start with '/' and contain no spaces"
        ));
    }
    let body = rest[open + 1..].trim_end();
    let Some(inner) = body.strip_suffix('}') else {
        return err(format!("path {prefix}: missing closing '}}'"));
    };
    let ctx = format!("path {prefix}: ");
    let mut b = Behaviour::default();
    let mut seen: Vec<&str> = Vec::new();
    for item in split_top(inner, &[';', '\n'], &ctx)? {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        if strip_word(item, "path").is_some() {
            return err(format!("{ctx}path blocks do not nest"));
        }
        let (key, value) = split_setting(item, &ctx)?;
        if seen.contains(&key) {
            return err(format!("{ctx}{key}: set twice"));
        }
        seen.push(key);
        if INSTANCE_KEYS.contains(&key) {
            return err(format!(
                "{ctx}{key} applies to a whole instance and cannot be set per path"
            ));
        }
        set_behaviour(&mut b, key, value, &ctx)?;
    }
    Ok(PathRule {
        prefix: prefix.to_string(),
        behaviour: b,
    })
}

fn split_setting<'a>(item: &'a str, ctx: &str) -> Result<(&'a str, &'a str), SpecError> {
    match item.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim(), v.trim())),
        _ => err(format!("{ctx}'{item}' is not key=value (keys: {KEYS})")),
    }
}

fn set_behaviour(b: &mut Behaviour, key: &str, value: &str, ctx: &str) -> Result<(), SpecError> {
    let wrap = |e: SpecError| SpecError(format!("{ctx}{key}: {e}"));
    match key {
        "latency" => b.latency = Some(parse_dist(value, Unit::Time).map_err(wrap)?),
        "cpu" => b.cpu = Some(parse_dist(value, Unit::Time).map_err(wrap)?),
        "size" => b.size = Some(parse_dist(value, Unit::Size).map_err(wrap)?),
        "spike" | "spikes" => b.spikes = Some(parse_spikes(value).map_err(wrap)?),
        "status" => b.status = Some(parse_status(value).map_err(wrap)?),
        _ => return err(format!("{ctx}unknown key '{key}' (use {KEYS})")),
    }
    Ok(())
}

/// `500ms:1%, uniform(1s,2s):0.1%` or `none`.
fn parse_spikes(v: &str) -> Result<Vec<Spike>, SpecError> {
    if v == "none" {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    let mut total = 0u64;
    for part in split_top(v, &[','], "")? {
        let part = part.trim();
        let Some(colon) = last_top_colon(part) else {
            return err(format!(
                "'{part}' needs a share, e.g. 500ms:1% (a latency, a colon, a share)"
            ));
        };
        let latency = parse_dist(part[..colon].trim(), Unit::Time)?;
        let share = parse_share(part[colon + 1..].trim())?;
        total += share.0 as u64;
        out.push(Spike { latency, share });
    }
    if total > Share::ALL.0 as u64 {
        return err(format!("shares add up to more than 100% in '{v}'"));
    }
    Ok(out)
}

/// `503:1%, 500:0.1%` or a lone `204`.
fn parse_status(v: &str) -> Result<Vec<StatusShare>, SpecError> {
    let parts = split_top(v, &[','], "")?;
    let mut out = Vec::new();
    let mut total = 0u64;
    for part in &parts {
        let part = part.trim();
        let (code, share) = match part.split_once(':') {
            Some((c, s)) => (c.trim(), parse_share(s.trim())?),
            None if parts.len() == 1 => (part, Share::ALL),
            None => return err(format!("'{part}' needs a share, e.g. {part}:1%")),
        };
        let code: u16 = code
            .parse()
            .map_err(|_| SpecError(format!("'{code}' is not a status code")))?;
        if !(200..=599).contains(&code) {
            return err(format!("status code {code} is outside 200..599"));
        }
        if out.iter().any(|s: &StatusShare| s.code == code) {
            return err(format!("status {code} is listed twice"));
        }
        total += share.0 as u64;
        out.push(StatusShare { code, share });
    }
    if total > Share::ALL.0 as u64 {
        return err(format!("shares add up to more than 100% in '{v}'"));
    }
    Ok(out)
}

fn parse_share(s: &str) -> Result<Share, SpecError> {
    units::parse_fraction(s)
        .map(Share::from_fraction)
        .map_err(|e| SpecError(e.0))
}

fn parse_dist(v: &str, unit: Unit) -> Result<Dist, SpecError> {
    let v = v.trim();
    if v.is_empty() {
        return err("missing value");
    }
    let Some(open) = v.find('(') else {
        return Ok(Dist::Fixed(parse_value(v, unit)?));
    };
    let name = v[..open].trim();
    let Some(inner) = v[open + 1..].trim_end().strip_suffix(')') else {
        return err(format!("'{v}' is missing its closing ')'"));
    };
    let params: &[&str] = match name {
        "fixed" => &["value"],
        "uniform" => &["min", "max"],
        "normal" => &["mean", "sd"],
        "lognormal" => &["median", "sigma"],
        "exponential" => &["mean"],
        _ => return err(format!("unknown distribution '{name}' (use {DISTS})")),
    };
    let mut vals: Vec<Option<&str>> = vec![None; params.len()];
    let args: Vec<&str> = inner.split(',').map(str::trim).collect();
    if args.len() != params.len() || args.iter().any(|a| a.is_empty()) {
        return err(format!(
            "{name} takes {} ({})",
            if params.len() == 1 {
                "one value".to_string()
            } else {
                format!("{} values", params.len())
            },
            params.join(", ")
        ));
    }
    for (i, arg) in args.iter().enumerate() {
        let (slot, val) = match arg.split_once('=') {
            Some((k, val)) => {
                let k = k.trim();
                match params.iter().position(|p| *p == k) {
                    Some(j) => (j, val.trim()),
                    None => {
                        return err(format!(
                            "{name} has no parameter '{k}' (it takes {})",
                            params.join(", ")
                        ))
                    }
                }
            }
            None => (i, *arg),
        };
        if vals[slot].is_some() {
            return err(format!("{name}: {} given twice", params[slot]));
        }
        vals[slot] = Some(val);
    }
    let get = |i: usize| {
        parse_value(vals[i].unwrap_or(""), unit)
            .map_err(|e| SpecError(format!("{name}: {}: {e}", params[i])))
    };
    let d = match name {
        "fixed" => Dist::Fixed(get(0)?),
        "uniform" => {
            let (min, max) = (get(0)?, get(1)?);
            if min > max {
                return err(format!("uniform: min is above max in '{v}'"));
            }
            Dist::Uniform { min, max }
        }
        "normal" => Dist::Normal {
            mean: get(0)?,
            sd: get(1)?,
        },
        "lognormal" => {
            let median = get(0)?;
            let s = vals[1].unwrap_or("");
            let sigma: f64 = s
                .parse()
                .map_err(|_| SpecError(format!("lognormal: sigma '{s}' is not a number")))?;
            if !(0.0..=5.0).contains(&sigma) {
                return err(format!("lognormal: sigma {s} must lie between 0 and 5"));
            }
            if median == 0 {
                return err("lognormal: median must be above zero");
            }
            Dist::LogNormal { median, sigma }
        }
        _ => {
            let mean = get(0)?;
            if mean == 0 {
                return err("exponential: mean must be above zero");
            }
            Dist::Exponential { mean }
        }
    };
    Ok(d)
}

fn parse_value(s: &str, unit: Unit) -> Result<u64, SpecError> {
    let s = s.trim();
    match unit {
        Unit::Time => {
            let d = units::parse_duration(s).map_err(|e| SpecError(e.0))?;
            let ns = d.as_nanos();
            if ns > MAX_TIME_NS as u128 {
                return err(format!("'{s}' is above the 1h limit"));
            }
            Ok(ns as u64)
        }
        Unit::Size => {
            let b = units::parse_size(s).map_err(|e| SpecError(e.0))?;
            if b > MAX_SIZE {
                return err(format!("'{s}' is above the 1g limit"));
            }
            Ok(b)
        }
    }
}

/// Splits at `seps` outside parentheses and braces; unbalanced brackets are an error.
fn split_top<'a>(s: &'a str, seps: &[char], ctx: &str) -> Result<Vec<&'a str>, SpecError> {
    let mut out = Vec::new();
    let mut depth: Vec<char> = Vec::new();
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' | '{' => depth.push(c),
            ')' | '}' => {
                let want = if c == ')' { '(' } else { '{' };
                if depth.pop() != Some(want) {
                    return err(format!("{ctx}unbalanced '{c}' in '{}'", s.trim()));
                }
            }
            _ if depth.is_empty() && seps.contains(&c) => {
                out.push(&s[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    if let Some(open) = depth.last() {
        return err(format!("{ctx}unclosed '{open}' in '{}'", s.trim()));
    }
    out.push(&s[start..]);
    Ok(out)
}

fn last_top_colon(s: &str) -> Option<usize> {
    let mut depth = 0i32;
    let mut found = None;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ':' if depth == 0 => found = Some(i),
            _ => {}
        }
    }
    found
}

/// `path /x {` → `Some("/x {")` when `item` starts with the word `word`.
fn strip_word<'a>(item: &'a str, word: &str) -> Option<&'a str> {
    let rest = item.strip_prefix(word)?;
    rest.starts_with(char::is_whitespace).then_some(rest)
}

// ---------------------------------------------------------------------------------------------
// Printing

/// Writes the canonical spec of `p`.
pub(crate) fn write(p: &Profile, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let mut parts = behaviour_parts(&p.base);
    if let Some(n) = p.close_after {
        parts.push(format!("close_after={n}"));
    }
    if let Some(d) = p.slow_start {
        parts.push(format!(
            "slow_start={}",
            fmt_value(d.as_nanos() as u64, Unit::Time)
        ));
    }
    let st = &p.streams;
    if let Some(r) = st.push {
        parts.push(format!("push={r}"));
    }
    if let Some(n) = st.push_size {
        parts.push(format!("push_size={}", fmt_value(n, Unit::Size)));
    }
    if let Some(n) = st.push_count {
        parts.push(format!("push_count={n}"));
    }
    if let Some(d) = st.ping {
        parts.push(format!(
            "ping={}",
            fmt_value(d.as_nanos() as u64, Unit::Time)
        ));
    }
    for r in &p.paths {
        let inner = behaviour_parts(&r.behaviour);
        if inner.is_empty() {
            parts.push(format!("path {} {{ }}", r.prefix));
        } else {
            parts.push(format!("path {} {{ {} }}", r.prefix, inner.join("; ")));
        }
    }
    f.write_str(&parts.join("; "))
}

fn behaviour_parts(b: &Behaviour) -> Vec<String> {
    let mut parts = Vec::new();
    if let Some(d) = &b.latency {
        parts.push(format!("latency={}", fmt_dist(d, Unit::Time)));
    }
    if let Some(s) = &b.spikes {
        if s.is_empty() {
            parts.push("spike=none".into());
        } else {
            let list: Vec<String> = s
                .iter()
                .map(|x| format!("{}:{}", fmt_dist(&x.latency, Unit::Time), x.share))
                .collect();
            parts.push(format!("spike={}", list.join(",")));
        }
    }
    if let Some(d) = &b.cpu {
        parts.push(format!("cpu={}", fmt_dist(d, Unit::Time)));
    }
    if let Some(d) = &b.size {
        parts.push(format!("size={}", fmt_dist(d, Unit::Size)));
    }
    if let Some(s) = &b.status {
        let list: Vec<String> = s
            .iter()
            .map(|x| format!("{}:{}", x.code, x.share))
            .collect();
        parts.push(format!("status={}", list.join(",")));
    }
    parts
}

fn fmt_dist(d: &Dist, u: Unit) -> String {
    let v = |x: u64| fmt_value(x, u);
    match *d {
        Dist::Fixed(x) => v(x),
        Dist::Uniform { min, max } => format!("uniform(min={},max={})", v(min), v(max)),
        Dist::Normal { mean, sd } => format!("normal(mean={},sd={})", v(mean), v(sd)),
        Dist::LogNormal { median, sigma } => {
            format!("lognormal(median={},sigma={sigma})", v(median))
        }
        Dist::Exponential { mean } => format!("exponential(mean={})", v(mean)),
    }
}

fn fmt_value(x: u64, u: Unit) -> String {
    match u {
        Unit::Time => {
            if x == 0 {
                "0ms".into()
            } else if x % 1_000_000_000 == 0 {
                format!("{}s", x / 1_000_000_000)
            } else if x % 1_000_000 == 0 {
                format!("{}ms", x / 1_000_000)
            } else if x % 1000 == 0 {
                format!("{}us", x / 1000)
            } else {
                format!("{x}ns")
            }
        }
        Unit::Size => {
            if x != 0 && x % (1 << 30) == 0 {
                format!("{}g", x >> 30)
            } else if x != 0 && x % (1 << 20) == 0 {
                format!("{}m", x >> 20)
            } else if x != 0 && x % 1024 == 0 {
                format!("{}k", x >> 10)
            } else {
                format!("{x}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Profile {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn e(s: &str) -> String {
        s.parse::<Profile>().unwrap_err().0
    }

    #[test]
    fn full_example_parses_and_prints_back() {
        let src =
            "latency=lognormal(median=10ms,sigma=0.5); spike=500ms:1%, uniform(1s,2s):0.05%; \
                   cpu=200us; size=1k; status=503:1%,500:0.1%; close_after=100; slow_start=5s; \
                   path /slow { latency=fixed(100ms) }; path /fast { latency=0ms; status=200 }";
        let prof = p(src);
        assert_eq!(
            prof.base.latency,
            Some(Dist::LogNormal {
                median: 10_000_000,
                sigma: 0.5
            })
        );
        assert_eq!(prof.base.cpu, Some(Dist::Fixed(200_000)));
        assert_eq!(prof.base.size, Some(Dist::Fixed(1024)));
        let st = prof.base.status.as_ref().unwrap();
        assert_eq!(
            st[0],
            StatusShare {
                code: 503,
                share: Share(10_000_000)
            }
        );
        assert_eq!(
            st[1],
            StatusShare {
                code: 500,
                share: Share(1_000_000)
            }
        );
        assert_eq!(prof.close_after, Some(100));
        assert_eq!(prof.slow_start, Some(Duration::from_secs(5)));
        assert_eq!(prof.paths.len(), 2);
        assert_eq!(
            prof.paths[0].behaviour.latency,
            Some(Dist::Fixed(100_000_000))
        );
        let printed = prof.to_string();
        assert_eq!(
            printed,
            "latency=lognormal(median=10ms,sigma=0.5); spike=500ms:1%,uniform(min=1s,max=2s):0.05%; \
             cpu=200us; size=1k; status=503:1%,500:0.1%; close_after=100; slow_start=5s; \
             path /slow { latency=100ms }; path /fast { latency=0ms; status=200:100% }"
        );
        assert_eq!(p(&printed), prof);
    }

    #[test]
    fn round_trips_odd_values() {
        for s in [
            "",
            "latency=1500us",
            "latency=123456789ns; size=1000",
            "latency=normal(10ms,2ms)",
            "latency=uniform(max=3ms, min=1ms)",
            "latency=exponential(2.5ms)",
            "size=lognormal(4k,1.25)",
            "status=503:33.3333333%",
            "status=404:0.0000001%",
            "spike=none",
            "size=1.5m",
            "latency=10ms\ncpu=50us\n",
            "path /a { }",
        ] {
            let prof = p(s);
            assert_eq!(p(&prof.to_string()), prof, "{s} printed as {prof}");
        }
        assert_eq!(p(""), Profile::default());
    }

    #[test]
    fn errors_name_the_bad_part() {
        assert_eq!(
            e("latency=lognorml(median=10ms)"),
            "latency: unknown distribution 'lognorml' (use fixed, uniform, normal, lognormal, exponential)"
        );
        assert!(e("latncy=10ms").starts_with("unknown key 'latncy'"));
        assert_eq!(
            e("latency=10"),
            "latency: duration '10' needs a unit (ns, us, ms, s, m, h, d)"
        );
        assert_eq!(
            e("latency=uniform(5ms)"),
            "latency: uniform takes 2 values (min, max)"
        );
        assert_eq!(
            e("latency=normal(mean=1ms,sdev=1ms)"),
            "latency: normal has no parameter 'sdev' (it takes mean, sd)"
        );
        assert_eq!(
            e("latency=uniform(5ms,1ms)"),
            "latency: uniform: min is above max in 'uniform(5ms,1ms)'"
        );
        assert_eq!(
            e("latency=lognormal(10ms,x)"),
            "latency: lognormal: sigma 'x' is not a number"
        );
        assert_eq!(
            e("status=503:1%,500"),
            "status: '500' needs a share, e.g. 500:1%"
        );
        assert_eq!(
            e("status=99:1%"),
            "status: status code 99 is outside 200..599"
        );
        assert_eq!(
            e("status=503:60%,500:50%"),
            "status: shares add up to more than 100% in '503:60%,500:50%'"
        );
        assert_eq!(
            e("status=503:150%"),
            "status: '150%' must lie between 0% and 100%"
        );
        assert_eq!(
            e("spike=500ms"),
            "spike: '500ms' needs a share, e.g. 500ms:1% (a latency, a colon, a share)"
        );
        assert_eq!(e("close_after=0"), "close_after: must be at least 1");
        assert_eq!(
            e("close_after=ten"),
            "close_after: 'ten' is not a whole number of requests"
        );
        assert_eq!(
            e("slow_start=5"),
            "slow_start: duration '5' needs a unit (ns, us, ms, s, m, h, d)"
        );
        assert_eq!(
            e("size=1q"),
            "size: size '1q' has unknown unit 'q' (use b, k, m, g)"
        );
        assert_eq!(
            e("path /slow { latency=10x }"),
            "path /slow: latency: duration '10x' has unknown unit 'x' (use ns, us, ms, s, m, h, d)"
        );
        assert_eq!(
            e("path /slow { close_after=3 }"),
            "path /slow: close_after applies to a whole instance and cannot be set per path"
        );
        assert_eq!(
            e("path /slow { latency=1ms"),
            "unclosed '{' in 'path /slow { latency=1ms'"
        );
        assert_eq!(
            e("path slow { }"),
            "path: prefix 'slow' must start with '/' and contain no spaces"
        );
        assert_eq!(e("latency=1ms; latency=2ms"), "latency: set twice");
        assert_eq!(
            e("latency=fixed(1ms"),
            "unclosed '(' in 'latency=fixed(1ms'"
        );
        assert_eq!(e("latency"), "'latency' is not key=value (keys: latency, spike, cpu, size, status, close_after, slow_start, push, push_size, push_count, ping, or path /PREFIX { ... })");
        assert_eq!(e("latency=2h"), "latency: '2h' is above the 1h limit");
    }

    #[test]
    fn path_rules_inherit_and_longest_prefix_wins() {
        let prof = p("latency=1ms; status=503:1%; path /a { latency=5ms }; path /a/b { size=10 }");
        let b = prof.behaviour_for("/a/b/c?x=1");
        assert_eq!(b.latency, Some(Dist::Fixed(1_000_000)));
        assert_eq!(b.size, Some(Dist::Fixed(10)));
        assert_eq!(
            prof.behaviour_for("/a/x").latency,
            Some(Dist::Fixed(5_000_000))
        );
        assert_eq!(prof.behaviour_for("/z").status, prof.base.status);
    }

    #[derive(serde::Deserialize, serde::Serialize, Debug)]
    struct Doc {
        profile: Profile,
    }

    #[test]
    fn serde_reads_a_spec_string_and_reports_its_line() {
        let d: Doc = toml::from_str("profile = \"latency=10ms; status=503:1%\"\n").unwrap();
        assert_eq!(d.profile.base.latency, Some(Dist::Fixed(10_000_000)));
        let back = toml::to_string(&d).unwrap();
        assert_eq!(back.trim(), "profile = \"latency=10ms; status=503:1%\"");
        let e = toml::from_str::<Doc>("\n\nprofile = \"latency=lognorml(10ms,1)\"\n").unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("line 3"), "{msg}");
        assert!(msg.contains("unknown distribution 'lognorml'"), "{msg}");
    }
}

#[cfg(test)]
mod stream_keys {
    use super::*;

    #[test]
    fn stream_keys_parse_print_back_and_stay_at_the_top() {
        let prof: Profile = "push=2.5; push_size=1k; push_count=10; ping=500ms"
            .parse()
            .unwrap();
        assert_eq!(prof.streams.push, Some(2.5));
        assert_eq!(prof.streams.push_size, Some(1024));
        assert_eq!(prof.streams.push_count, Some(10));
        assert_eq!(prof.streams.ping, Some(Duration::from_millis(500)));
        assert_eq!(prof.to_string().parse::<Profile>().unwrap(), prof);
        assert_eq!(prof.streams.push_rate(true), 2.5);
        let none = Profile::default();
        assert_eq!(none.streams.push_rate(true), 0.0);
        assert_eq!(none.streams.push_rate(false), 1.0);
        assert_eq!(none.streams.push_bytes(), 32);
        let e = |s: &str| s.parse::<Profile>().unwrap_err().0;
        assert!(
            e("path /x { push=1 }").contains("whole instance"),
            "{}",
            e("path /x { push=1 }")
        );
        assert!(e("push=0").starts_with("push:"), "{}", e("push=0"));
        assert!(e("push_count=0").contains("at least 1"));
        assert!(e("ping=10us").contains("at least 1ms"));
        assert!(e("pushy=1").contains("unknown key"));
    }
}
