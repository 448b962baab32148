//! nginx's logs in the one record shape: the JSON access log the driver renders
//! (`log_format pb_json`), the NCSA combined format (nginx's and Apache's default, which an
//! external target may write) and nginx's error-log lines.

use crate::logs::{AccessRecord, ErrorRecord};
use serde::Deserialize;
use std::borrow::Cow;

#[derive(Deserialize)]
struct AccessLine<'a> {
    status: u16,
    #[serde(default, borrow)]
    upstream_addr: Cow<'a, str>,
    #[serde(default, borrow)]
    upstream_status: Cow<'a, str>,
    #[serde(default, borrow)]
    limit_req_status: Cow<'a, str>,
    #[serde(default)]
    msec: Option<f64>,
    #[serde(default)]
    request_time: Option<f64>,
    #[serde(default)]
    bytes_sent: Option<u64>,
}

/// Parses one line of the `pb_json` access log.
pub fn access(line: &str) -> Option<AccessRecord<'_>> {
    let a: AccessLine = serde_json::from_str(line).ok()?;
    Some(AccessRecord {
        time_ms: a.msec.map(|s| s * 1000.0),
        status: a.status,
        upstream_addr: a.upstream_addr,
        upstream_status: a.upstream_status,
        request_time_s: a.request_time,
        bytes: a.bytes_sent,
        limit: a.limit_req_status,
    })
}

/// Parses one nginx error-log line into its level and message.
pub fn error(line: &str) -> Option<ErrorRecord<'_>> {
    parse_error_line(line).map(|(level, message)| ErrorRecord {
        level: Cow::Borrowed(level),
        message: Cow::Borrowed(message),
        // nginx logs its signals, starts and exits at notice: no line needs setting apart.
        lifecycle: false,
    })
}

/// Splits `2023/10/24 17:31:43 [warn] 176#176: *358453 message` into (`warn`, `message`).
/// Lines such as `nginx: [emerg] message` give their level too.
pub fn parse_error_line(line: &str) -> Option<(&str, &str)> {
    let open = line
        .find(" [")
        .map(|i| i + 2)
        .or_else(|| line.starts_with('[').then_some(1))?;
    let close = open + line[open..].find(']')?;
    let level = &line[open..close];
    if level.is_empty() || !level.bytes().all(|b| b.is_ascii_lowercase()) {
        return None;
    }
    let mut rest = line[close + 1..].trim_start();
    // "176#176: " (pid#tid) then "*358453 " (connection id), both optional.
    if let Some((head, tail)) = rest.split_once(": ") {
        if head.contains('#') && head.bytes().all(|b| b.is_ascii_digit() || b == b'#') {
            rest = tail;
        }
    }
    if let Some(tail) = rest.strip_prefix('*') {
        if let Some((id, tail)) = tail.split_once(' ') {
            if id.bytes().all(|b| b.is_ascii_digit()) {
                rest = tail;
            }
        }
    }
    Some((level, rest))
}

/// Parses a combined-format line: `addr - user [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1"
/// 200 2326 "referer" "agent"`, optionally followed by `rt=0.001 ua="127.0.0.1:9101"
/// us="200"` (request time, upstream address and status, as an nginx `log_format` can add).
pub fn combined(line: &str) -> Option<AccessRecord<'_>> {
    let open = line.find('[')?;
    let close = open + line[open..].find(']')?;
    let time_ms = clf_time(&line[open + 1..close]);
    let rest = &line[close + 1..];
    // The request line is quoted and may hold escaped quotes.
    let q1 = rest.find('"')?;
    let mut i = q1 + 1;
    let b = rest.as_bytes();
    while i < b.len() && b[i] != b'"' {
        i += if b[i] == b'\\' { 2 } else { 1 };
    }
    let after = rest.get(i + 1..)?;
    let mut it = after.split_whitespace();
    let status = it.next()?.parse().ok()?;
    let bytes = it.next().and_then(|b| b.parse().ok());
    let mut rec = AccessRecord {
        time_ms,
        status,
        bytes,
        ..AccessRecord::default()
    };
    for (key, val) in kv_pairs(after) {
        match key {
            "rt" | "request_time" => rec.request_time_s = val.parse().ok(),
            "ua" | "upstream_addr" => rec.upstream_addr = Cow::Borrowed(val),
            "us" | "upstream_status" => rec.upstream_status = Cow::Borrowed(val),
            _ => {}
        }
    }
    Some(rec)
}

/// `key=value` and `key="value"` pairs in a line's tail (outside quoted runs of their own).
fn kv_pairs(s: &str) -> Vec<(&str, &str)> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(eq) = rest.find('=') {
        let key_start = rest[..eq].rfind([' ', '"']).map_or(0, |i| i + 1);
        let key = &rest[key_start..eq];
        let tail = &rest[eq + 1..];
        let (val, next) = if let Some(t) = tail.strip_prefix('"') {
            match t.find('"') {
                Some(e) => (&t[..e], &t[e + 1..]),
                None => (t, ""),
            }
        } else {
            let e = tail.find(' ').unwrap_or(tail.len());
            (&tail[..e], &tail[e..])
        };
        if !key.is_empty() && key.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
            out.push((key, val));
        }
        rest = next;
    }
    out
}

/// `10/Oct/2000:13:55:36 -0700` (seconds may carry a fraction; no zone reads as UTC) as ms since
/// the Unix epoch.
pub fn clf_time(s: &str) -> Option<f64> {
    let s = s.trim();
    let zoned;
    let s = if s.contains(' ') {
        s
    } else {
        zoned = format!("{s} +0000");
        &zoned
    };
    let t = jiff::Timestamp::strptime("%d/%b/%Y:%H:%M:%S%.f %z", s).ok()?;
    // Whole milliseconds and the rest apart: nanoseconds since the epoch exceed an f64's 53 bits.
    let sub_ms = t.subsec_nanosecond() % 1_000_000;
    Some(t.as_millisecond() as f64 + f64::from(sub_ms) / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_lines_parse() {
        let l = "2023/10/24 17:31:43 [warn] 176#176: *358453 upstream server temporarily disabled while connecting to upstream, client: 10.X.X.X:";
        let (level, msg) = parse_error_line(l).unwrap();
        assert_eq!(level, "warn");
        assert!(msg.starts_with("upstream server temporarily disabled"));
        let (level, msg) =
            parse_error_line("nginx: [emerg] unknown directive \"x\" in /a/b.conf:3").unwrap();
        assert_eq!(level, "emerg");
        assert_eq!(msg, "unknown directive \"x\" in /a/b.conf:3");
        assert_eq!(parse_error_line("no level here"), None);
    }

    #[test]
    fn json_lines_parse_into_the_record_shape() {
        let r = access(r#"{"msec":1764043810.123,"status":200,"request_time":1.234,"upstream_addr":"127.0.0.1:1","upstream_status":"200","bytes_sent":12,"limit_req_status":"DELAYED"}"#).unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.bytes, Some(12));
        assert_eq!(r.limit, "DELAYED");
        assert!((r.time_ms.unwrap() - 1_764_043_810_123.0).abs() < 0.01);
        assert_eq!(access("not json"), None);
    }

    #[test]
    fn combined_lines_parse_with_their_optional_tail() {
        let l = r#"127.0.0.1 - - [25/Nov/2026:10:20:19 +0000] "GET /a?b=\"c\" HTTP/1.1" 502 157 "-" "proxybench" rt=0.003 ua="127.0.0.1:9101, 127.0.0.1:9102" us="502, 502""#;
        let r = combined(l).unwrap();
        assert_eq!(r.status, 502);
        assert_eq!(r.bytes, Some(157));
        assert_eq!(r.request_time_s, Some(0.003));
        assert_eq!(r.upstream_addr, "127.0.0.1:9101, 127.0.0.1:9102");
        assert_eq!(r.upstream_status, "502, 502");
        // 2026-11-25T10:20:19Z
        assert_eq!(r.time_ms, Some(1_795_602_019_000.0));
        let plain =
            combined(r#"::1 - - [01/Jan/1970:01:00:00 +0100] "GET / HTTP/1.0" 200 -"#).unwrap();
        assert_eq!(
            (plain.status, plain.bytes, plain.time_ms),
            (200, None, Some(0.0))
        );
        assert_eq!(combined("not a log line"), None);
    }

    /// Common-log times as ms since the epoch: the zone applied, a fraction kept, a missing zone
    /// read as UTC, and nonsense refused. 1,764,066,019 s is 2025-11-25 10:20:19 UTC.
    #[test]
    fn common_log_times() {
        assert_eq!(
            clf_time("25/Nov/2025:10:20:19 +0000"),
            Some(1_764_066_019_000.0)
        );
        assert_eq!(
            clf_time("25/Nov/2025:11:20:19 +0100"),
            Some(1_764_066_019_000.0)
        );
        assert_eq!(
            clf_time("25/Nov/2025:03:20:19 -0700"),
            Some(1_764_066_019_000.0)
        );
        assert_eq!(
            clf_time("25/Nov/2025:10:20:19.250 +0000"),
            Some(1_764_066_019_250.0)
        );
        assert_eq!(clf_time("25/Nov/2025:10:20:19"), Some(1_764_066_019_000.0));
        assert_eq!(
            clf_time("29/Feb/2024:00:00:00 +0000"),
            Some(1_709_164_800_000.0)
        );
        assert_eq!(clf_time("30/Feb/2024:00:00:00 +0000"), None);
        assert_eq!(clf_time("25/Foo/2025:10:20:19 +0000"), None);
        assert_eq!(clf_time(""), None);
    }
}
