//! nginx's logs in the one record shape: the JSON access log the driver renders
//! (`log_format pb_json`) and nginx's error-log lines.

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
}
