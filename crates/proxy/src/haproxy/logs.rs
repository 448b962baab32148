//! HAProxy's logs in the one record shape: the access `log-format` the driver renders (one
//! `pb k=v ...` line per request, written on stdout) and HAProxy's diagnostic lines on stderr
//! (`[NOTICE]   (pid) : message`, `[WARNING]`, `[ALERT]`).
//!
//! What HAProxy cannot log: it names only the server of the last attempt (`%si:%sp`), not every
//! server a retried request went to, and it logs one status, so the upstream status is that
//! status whenever a server was chosen (502/503/504 included when HAProxy made them up after a
//! failed attempt), and empty when HAProxy answered itself (`<NOSRV>`: a return route, a 404,
//! a rate-limit rejection, an empty backend). A request the client abandoned before any response
//! (status `-1`, termination state `C...`) is recorded as 499, nginx's word for it.

use crate::logs::{AccessRecord, ErrorRecord};
use std::borrow::Cow;

/// Parses one access line (`pb t=1764043810123 st=200 ua=127.0.0.1:9101 sv=s0 rc=0 ta=1 by=97
/// ts=---- rl=- g=1 fe=fe_http m=GET u="/"`).
pub fn access(line: &str) -> Option<AccessRecord<'_>> {
    let rest = line.strip_prefix("pb ")?;
    // The URI is last and quoted; the fields before it hold no spaces.
    let head = rest.split(" u=").next()?;
    let mut rec = AccessRecord::default();
    let mut status = None;
    let mut server = "";
    let mut addr = "";
    let mut term = "";
    for kv in head.split(' ') {
        let Some((k, v)) = kv.split_once('=') else {
            continue;
        };
        match k {
            "t" => rec.time_ms = v.parse().ok(),
            "st" => status = v.parse().ok(),
            "ua" => addr = v,
            "sv" => server = v,
            "ts" => term = v,
            "ta" => {
                rec.request_time_s = v.parse::<f64>().ok().filter(|t| *t >= 0.0).map(|t| t / 1e3)
            }
            "by" => rec.bytes = v.parse().ok(),
            "rl" if v != "-" => rec.limit = Cow::Borrowed(v),
            _ => {}
        }
    }
    // No status (-1): the client went away before a response; nginx logs that as 499.
    rec.status = match status {
        Some(s) => s,
        None if head.contains(" st=-1 ") && term.starts_with('C') => 499,
        None => return None,
    };
    let chosen = !server.is_empty() && server != "<NOSRV>" && server != "-";
    if chosen && addr != "-:-" && !addr.is_empty() {
        rec.upstream_addr = Cow::Borrowed(addr);
        rec.upstream_status = Cow::Owned(rec.status.to_string());
    }
    Some(rec)
}

/// Parses one diagnostic line into its level (`notice`, `warn`, `alert`) and message.
pub fn error(line: &str) -> Option<ErrorRecord<'_>> {
    let rest = line.strip_prefix('[')?;
    let (tag, rest) = rest.split_once(']')?;
    let level = match tag {
        "NOTICE" => "notice",
        "WARNING" => "warn",
        "ALERT" => "alert",
        "DEBUG" => "debug",
        _ => return None,
    };
    // "   (1234) : message"
    let message = rest
        .split_once(") : ")
        .map_or(rest.trim(), |(_, m)| m.trim());
    Some(ErrorRecord {
        level: Cow::Borrowed(level),
        message: Cow::Borrowed(message),
        lifecycle: LIFECYCLE.iter().any(|p| message.starts_with(p)),
    })
}

/// Beginnings of the messages HAProxy's master and workers print at every start, reload and
/// stop (several at WARNING level): the process's life, not the traffic's.
const LIFECYCLE: &[&str] = &[
    "Proxy ",
    "Former worker",
    "Current worker",
    "All workers exited",
    "Exiting Master process",
    "Reexecuting Master process",
    "Loading success",
    "New worker",
    "haproxy version is",
    "path to executable is",
    "Stopping ",
    "Pausing ",
    "Resuming ",
    "Enabling ",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_lines_parse_into_the_one_record() {
        let l = r#"pb t=1795602867183 st=200 ua=127.0.0.1:18081 sv=s0 rc=0 ta=12 by=237 ts=---- rl=PASSED g=3 fe=fe_http m=GET u="/a b""#;
        let r = access(l).unwrap();
        assert_eq!(r.time_ms, Some(1_795_602_867_183.0));
        assert_eq!(r.status, 200);
        assert_eq!(r.upstream_addr, "127.0.0.1:18081");
        assert_eq!(r.upstream_status, "200");
        assert_eq!(r.request_time_s, Some(0.012));
        assert_eq!(r.bytes, Some(237));
        assert_eq!(r.limit, "PASSED");
        // HAProxy answered itself: no server, no upstream status, no limit.
        let own = access(r#"pb t=1 st=404 ua=-:- sv=<NOSRV> rc=0 ta=0 by=97 ts=LR-- rl=- g=1 fe=fe_http m=GET u="/x""#).unwrap();
        assert_eq!(
            (
                own.status,
                own.upstream_addr.as_ref(),
                own.upstream_status.as_ref(),
                own.limit.as_ref()
            ),
            (404, "", "", "")
        );
        // A request the client gave up on: no status, no active time; counted as nginx's 499.
        let ab = access(r#"pb t=1 st=-1 ua=127.0.0.1:9 sv=s0 rc=0 ta=-1 by=0 ts=CD-- rl=- g=1 fe=fe_http m=GET u="/slow""#).unwrap();
        assert_eq!((ab.status, ab.request_time_s), (499, None));
        assert_eq!(access("not a log line"), None);
    }

    #[test]
    fn diagnostic_lines_parse_with_their_levels() {
        let e = error("[WARNING]  (20035) : Paused frontend fe_http.").unwrap();
        assert_eq!(
            (e.level.as_ref(), e.message.as_ref()),
            ("warn", "Paused frontend fe_http.")
        );
        let e = error("[NOTICE]   (20031) : New worker (20206) forked").unwrap();
        assert_eq!(
            (e.level.as_ref(), e.message.as_ref()),
            ("notice", "New worker (20206) forked")
        );
        let e = error("[ALERT]    (1) : config : parsing [h.cfg:9] : bad").unwrap();
        assert_eq!(
            (e.level.as_ref(), e.message.as_ref()),
            ("alert", "config : parsing [h.cfg:9] : bad")
        );
        assert_eq!(error("random text"), None);
    }

    #[test]
    fn reload_notices_are_lifecycle_not_warnings_about_traffic() {
        let stopped =
            error("[WARNING]  (4242) : Proxy fe_http stopped (cumulated conns: FE: 12, BE: 0).")
                .unwrap();
        assert_eq!((stopped.level.as_ref(), stopped.lifecycle), ("warn", true));
        let down = error(
            "[WARNING]  (4243) : Server be_cafe/s1 is DOWN, reason: Layer4 connection problem.",
        )
        .unwrap();
        assert_eq!((down.level.as_ref(), down.lifecycle), ("warn", false));
        let mut s = crate::logs::Summarizer::new(crate::logs::LogFormat::Haproxy);
        s.error_line("[WARNING]  (4242) : Former worker (4100) exited with code 0 (Exit)");
        s.error_line("[WARNING]  (4243) : Server be_cafe/s1 is DOWN, reason: x.");
        let sum = s.finish();
        assert_eq!(sum.error_levels.get("warn"), Some(&1));
        assert_eq!(sum.error_levels.get(crate::logs::LIFECYCLE), Some(&1));
    }
}
