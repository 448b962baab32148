//! Caddy's logs in the one record shape: the JSON access log the driver renders (one
//! `handled request` object a line, with the upstream address in the response header
//! [`UPSTREAM_HEADER`]) and Caddy's own JSON log lines (`level`, `msg`).

use crate::logs::{AccessRecord, ErrorRecord};
use serde::Deserialize;
use std::borrow::Cow;
use std::collections::HashMap;

/// The response header the driver sets from `{http.reverse_proxy.upstream.hostport}` so that
/// the access log (`resp_headers`) names the upstream that answered. Caddy 2.6 has no other way
/// to put it into the access log; clients see the header too.
pub const UPSTREAM_HEADER: &str = "X-Proxybench-Upstream";

#[derive(Deserialize)]
struct AccessLine {
    status: u16,
    #[serde(default)]
    ts: Option<f64>,
    #[serde(default)]
    duration: Option<f64>,
    #[serde(default)]
    size: Option<u64>,
    #[serde(default)]
    resp_headers: HashMap<String, Vec<String>>,
}

/// Parses one line of the access log (`{"level":..,"ts":..,"logger":"http.log.access..",
/// "msg":"handled request",...,"duration":..,"size":..,"status":..,"resp_headers":{..}}`).
/// The upstream status is the status itself when an upstream answered (Caddy passes it through
/// and sets the upstream header only then); Caddy 2.6 logs only the last attempt's upstream.
pub fn access(line: &str) -> Option<AccessRecord<'static>> {
    let a: AccessLine = serde_json::from_str(line).ok()?;
    let upstream = a
        .resp_headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(UPSTREAM_HEADER))
        .and_then(|(_, v)| v.first())
        .filter(|v| !v.is_empty())
        .cloned()
        .unwrap_or_default();
    let upstream_status = if upstream.is_empty() {
        String::new()
    } else {
        a.status.to_string()
    };
    Some(AccessRecord {
        time_ms: a.ts.map(|s| s * 1000.0),
        status: a.status,
        upstream_addr: Cow::Owned(upstream),
        upstream_status: Cow::Owned(upstream_status),
        request_time_s: a.duration,
        bytes: a.size,
        limit: Cow::Borrowed(""),
    })
}

#[derive(Deserialize)]
struct LogLine<'a> {
    #[serde(borrow)]
    level: Cow<'a, str>,
    #[serde(default, borrow)]
    msg: Cow<'a, str>,
}

/// Parses one of Caddy's own log lines (`{"level":"warn","ts":..,"logger":..,"msg":..}`) into
/// its level (`debug`, `info`, `warn`, `error`, `panic`, `fatal`) and message.
pub fn error(line: &str) -> Option<ErrorRecord<'_>> {
    let l: LogLine = serde_json::from_str(line).ok()?;
    if l.level.is_empty() {
        return None;
    }
    let lifecycle = LIFECYCLE.iter().any(|p| l.msg.starts_with(p));
    Some(ErrorRecord {
        level: Cow::Owned(l.level.to_ascii_lowercase()),
        message: l.msg,
        lifecycle,
    })
}

/// Beginnings of the messages Caddy prints at every start, config load and stop (two at `warn`
/// level): the process's life, not the traffic's.
const LIFECYCLE: &[&str] = &[
    "automatic HTTPS is completely disabled",
    "exiting",
    "shutting down",
    "stopping now",
    "server running",
    "serving initial configuration",
    "load complete",
    "stopped previous server",
    "admin endpoint started",
    "started background certificate maintenance",
    "stopped background certificate maintenance",
    "redirected default logger",
    "autosaved config",
    "servers shutting down",
    "HTTP/2 skipped",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_lines_parse_into_the_record_shape() {
        // Lines as Caddy 2.6.2 writes them.
        let proxied = r#"{"level":"info","ts":1795602888.9848127,"logger":"http.log.access.pb_access","msg":"handled request","request":{"remote_ip":"127.0.0.1","remote_port":"46766","proto":"HTTP/1.1","method":"GET","host":"x","uri":"/a","headers":{"Accept":["*/*"]}},"user_id":"","duration":0.000815953,"size":12,"status":200,"resp_headers":{"Server":["Caddy"],"X-Config-Generation":["3"],"X-Proxybench-Upstream":["127.0.0.1:9101"]}}"#;
        let r = access(proxied).unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.upstream_addr, "127.0.0.1:9101");
        assert_eq!(r.upstream_status, "200");
        assert_eq!(r.bytes, Some(12));
        assert_eq!(r.request_time_s, Some(0.000815953));
        assert!((r.time_ms.unwrap() - 1_795_602_888_984.812_7).abs() < 0.01);
        assert_eq!(r.limit, "");
        let failed = r#"{"level":"error","ts":1795602893.6079543,"logger":"http.log.access.pb_access","msg":"handled request","request":{"uri":"/a"},"user_id":"","duration":0.501214728,"size":0,"status":502,"resp_headers":{"Server":["Caddy"],"X-Config-Generation":["3"]}}"#;
        let r = access(failed).unwrap();
        assert_eq!(
            (
                r.status,
                r.upstream_addr.as_ref(),
                r.upstream_status.as_ref()
            ),
            (502, "", "")
        );
        assert_eq!(access("not json"), None);
        // A Caddy log line is no access line.
        assert_eq!(
            access(r#"{"level":"info","ts":1,"msg":"serving initial configuration"}"#),
            None
        );
    }

    #[test]
    fn own_log_lines_parse_into_level_and_message() {
        let l = r#"{"level":"error","ts":1795602893.607911,"logger":"http.log.error.pb_access","msg":"dial tcp 127.0.0.1:27090: connect: connection refused","request":{"uri":"/a"},"duration":0.5,"status":502}"#;
        let r = error(l).unwrap();
        assert_eq!(r.level, "error");
        assert_eq!(
            r.message,
            "dial tcp 127.0.0.1:27090: connect: connection refused"
        );
        let w = error(r#"{"level":"warn","ts":1,"logger":"http","msg":"automatic HTTPS is completely disabled for server","server_name":"s"}"#).unwrap();
        assert_eq!(
            (w.level.as_ref(), w.message.as_ref()),
            ("warn", "automatic HTTPS is completely disabled for server")
        );
        assert_eq!(error("2026/11/25 10:00:00 plain text"), None);
    }

    #[test]
    fn the_summarizer_counts_caddy_lines() {
        let mut s = crate::logs::Summarizer::new(crate::logs::LogFormat::Caddy);
        s.access_line(r#"{"ts":1.5,"duration":0.001,"size":1,"status":200,"resp_headers":{"X-Proxybench-Upstream":["127.0.0.1:1"]}}"#);
        s.access_line(r#"{"ts":1.5,"duration":0.001,"size":0,"status":502,"resp_headers":{}}"#);
        s.error_line(
            r#"{"level":"error","ts":1,"msg":"dial tcp 127.0.0.1:1: connect: connection refused"}"#,
        );
        let sum = s.finish();
        assert_eq!(sum.access_lines, 2);
        assert_eq!(sum.upstream_addr.get("127.0.0.1:1"), Some(&1));
        assert_eq!(sum.upstream_addr.get("-"), Some(&1));
        assert_eq!(sum.status_origin.get("502 proxy"), Some(&1));
        assert_eq!(sum.error_levels.get("error"), Some(&1));
    }

    #[test]
    fn load_and_exit_messages_are_lifecycle() {
        let l = error(r#"{"level":"warn","ts":1795602888.98,"logger":"http","msg":"automatic HTTPS is completely disabled for server","server_name":"https"}"#).unwrap();
        assert!(l.lifecycle);
        let e = error(r#"{"level":"error","ts":1795602888.98,"logger":"http.log.error","msg":"dial tcp 127.0.0.1:9: connect: connection refused"}"#).unwrap();
        assert!(!e.lifecycle);
        assert_eq!(e.level, "error");
    }
}
