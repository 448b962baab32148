//! Proxy logs in one record shape, summarised. Each access-log format ([`LogFormat`]: nginx's
//! JSON, the combined format, HAProxy's and Caddy's) is parsed by its driver into an
//! [`AccessRecord`] (time, status, upstream address and status, request time, bytes, rate-limit
//! outcome), each error-log line into an [`ErrorRecord`] (level, message); the [`Summarizer`]
//! counts access records by status, upstream status, rate-limit outcome and upstream address,
//! and error records by level, grouped by message once times, pids, connection ids, addresses and
//! numbers are taken out. Files are streamed line by line, so size does not matter, and can be
//! read incrementally from a byte offset.

use model::{LimitReqLine, LogGroup, LogSummary};
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Most error-message groups kept (largest first); level counts stay exact beyond it.
pub const MAX_GROUPS: usize = 200;

/// 499 lines kept verbatim as examples.
pub const MAX_499_EXAMPLES: usize = 5;

/// Most rate-limited access-log lines kept verbatim in [`LogSummary::limit_req_lines`] (the
/// counts stay exact beyond it; an analysis that needs every line compares the two).
pub const MAX_LIMIT_REQ_LINES: usize = 200_000;

pub use crate::driver::Parse;
pub use crate::records::{AccessRecord, ErrorRecord};
pub use setup::proxy::{LogFormat, LIFECYCLE};

/// Summarises whole access and error logs written in `format` (missing files count as empty).
pub fn summarize(
    format: LogFormat,
    access_logs: &[PathBuf],
    error_logs: &[PathBuf],
) -> io::Result<LogSummary> {
    let mut s = Summarizer::new(format);
    for p in access_logs {
        s.add_access_file(p, 0)?;
    }
    for p in error_logs {
        s.add_error_file(p, 0)?;
    }
    Ok(s.finish())
}

/// Accumulates log lines into a [`LogSummary`]; feed it files (from an offset) or lines.
#[derive(Debug, Default)]
pub struct Summarizer {
    format: LogFormat,
    summary: LogSummary,
    groups: HashMap<(String, String), (u64, String, usize)>,
}

/// Who produced a non-2xx/3xx answer: `upstream` when the last upstream attempt returned this
/// very status (and it is not one a proxy makes up for a failed attempt, 502 or 504), else
/// `proxy` (the proxy answered without, or instead of, the backend).
fn origin(status: u16, upstream_status: &str) -> &'static str {
    let last = upstream_status
        .rsplit([',', ':'])
        .next()
        .map(str::trim)
        .unwrap_or("");
    let passed_through = last.parse::<u16>().ok() == Some(status);
    if passed_through && status != 502 && status != 504 {
        "upstream"
    } else {
        "proxy"
    }
}

impl Summarizer {
    /// A summarizer of logs written in `format`.
    pub fn new(format: LogFormat) -> Summarizer {
        Summarizer {
            format,
            ..Summarizer::default()
        }
    }

    /// Adds the complete lines of an access log from byte `from`; returns the offset after the
    /// last complete line (pass it next time to read only what is new).
    pub fn add_access_file(&mut self, path: &Path, from: u64) -> io::Result<u64> {
        each_line(path, from, |l| self.access_line(l))
    }

    /// Adds the complete lines of an error log from byte `from`; returns the offset after the
    /// last complete line.
    pub fn add_error_file(&mut self, path: &Path, from: u64) -> io::Result<u64> {
        each_line(path, from, |l| self.error_line(l))
    }

    /// Adds one access-log line. Lines not in the format count in `access_lines` only.
    pub fn access_line(&mut self, line: &str) {
        let line = line.trim_end();
        if line.is_empty() || self.format.not_a_request(line) {
            return;
        }
        self.summary.access_lines += 1;
        if let Some(a) = self.format.access(line) {
            self.access(&a, line);
        }
    }

    /// Adds one parsed access record; `line` is kept verbatim when it is an example.
    pub fn access(&mut self, a: &AccessRecord<'_>, line: &str) {
        let s = &mut self.summary;
        *s.access_status.entry(a.status).or_insert(0) += 1;
        *s.upstream_status
            .entry(or_dash(&a.upstream_status))
            .or_insert(0) += 1;
        *s.limit_req_status.entry(or_dash(&a.limit)).or_insert(0) += 1;
        if let (false, Some(t)) = (a.limit.trim().is_empty(), a.time_ms) {
            if s.limit_req_lines.len() < MAX_LIMIT_REQ_LINES {
                // Logged times have millisecond resolution; round away the float's representation.
                let end_ms = t.round() as u64;
                let took_ms = (a.request_time_s.unwrap_or(0.0) * 1000.0).round() as u64;
                s.limit_req_lines.push(LimitReqLine {
                    start_ms: end_ms.saturating_sub(took_ms),
                    end_ms,
                    status: a.status,
                    limit: a.limit.trim().to_string(),
                });
            }
        }
        if a.upstream_addr.trim().is_empty() || a.upstream_addr.trim() == "-" {
            *s.upstream_addr.entry("-".into()).or_insert(0) += 1;
        } else {
            // One entry per attempt: "a, b" after a retry, "a : b" across an internal redirect.
            for addr in a
                .upstream_addr
                .split([',', ' '])
                .filter(|p| !p.is_empty() && *p != ":")
            {
                *s.upstream_addr.entry(addr.to_string()).or_insert(0) += 1;
            }
        }
        if !(200..400).contains(&a.status) {
            let origin = origin(a.status, &a.upstream_status);
            *s.status_origin
                .entry(format!("{} {origin}", a.status))
                .or_insert(0) += 1;
        }
        if a.status == 499 && s.examples_499.len() < MAX_499_EXAMPLES {
            s.examples_499.push(line.to_string());
        }
    }

    /// Adds one error-log line; a line without a level this format knows counts as `unknown`.
    pub fn error_line(&mut self, line: &str) {
        let line = line.trim_end();
        if line.is_empty() {
            return;
        }
        let (level, msg) = match self.format.error(line) {
            Some(r) if r.lifecycle => (LIFECYCLE.to_string(), r.message.into_owned()),
            Some(r) => (r.level.into_owned(), r.message.into_owned()),
            None => ("unknown".to_string(), line.to_string()),
        };
        *self.summary.error_levels.entry(level.clone()).or_insert(0) += 1;
        let order = self.groups.len();
        let g = self
            .groups
            .entry((level, normalize(&msg)))
            .or_insert_with(|| (0, line.to_string(), order));
        g.0 += 1;
    }

    /// The summary, error groups largest first (ties in order of first appearance).
    pub fn finish(mut self) -> LogSummary {
        let mut groups: Vec<_> = self.groups.into_iter().collect();
        groups.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.1 .2.cmp(&b.1 .2)));
        self.summary.error_groups = groups
            .into_iter()
            .take(MAX_GROUPS)
            .map(|((level, message), (count, example, _))| LogGroup {
                level,
                message,
                count,
                example,
            })
            .collect();
        self.summary
    }
}

fn or_dash(s: &str) -> String {
    if s.trim().is_empty() {
        "-".to_string()
    } else {
        s.to_string()
    }
}

/// Calls `f` on each complete line from byte `from`; returns the offset after the last one.
fn each_line(path: &Path, from: u64, mut f: impl FnMut(&str)) -> io::Result<u64> {
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(from),
        Err(e) => return Err(e),
    };
    file.seek(SeekFrom::Start(from))?;
    let mut r = BufReader::with_capacity(256 * 1024, file);
    let mut buf = Vec::with_capacity(1024);
    let mut offset = from;
    loop {
        buf.clear();
        let n = r.read_until(b'\n', &mut buf)?;
        if n == 0 || buf.last() != Some(&b'\n') {
            // End, or a line nginx is still writing: leave it for the next call.
            return Ok(offset);
        }
        offset += n as u64;
        f(&String::from_utf8_lossy(&buf));
    }
}

/// The message of an error-log line with what varies between occurrences taken out: the
/// trailing context (`, client: ..., server: ..., request: ...`), IPv4 addresses (`ADDR`) and
/// numbers (`N`), but not errno codes such as `(110: ...)`.
pub fn normalize(msg: &str) -> String {
    let cut = [
        ", client: ",
        ", server: ",
        ", upstream: ",
        ", request: ",
        ", host: ",
    ]
    .iter()
    .filter_map(|m| msg.find(m))
    .min()
    .unwrap_or(msg.len());
    let core = &msg[..cut];
    let b = core.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut out = String::with_capacity(core.len());
    let mut i = 0;
    let mut copied = 0;
    while i < b.len() {
        if !(b[i].is_ascii_digit() && (i == 0 || !word(b[i - 1]))) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
            i += 1;
        }
        let tok = core[start..i].trim_end_matches('.');
        let end = start + tok.len();
        let replacement = if tok.matches('.').count() == 3 {
            // An IPv4 address, with its port if any.
            let mut j = end;
            if j + 1 < b.len() && b[j] == b':' && b[j + 1].is_ascii_digit() {
                j += 1;
                while j < b.len() && b[j].is_ascii_digit() {
                    j += 1;
                }
            }
            i = j;
            Some("ADDR")
        } else if (start > 0 && b[start - 1] == b'(' && b.get(end) == Some(&b':'))
            || b.get(end).is_some_and(|&c| word(c))
        {
            None // an errno such as "(110:", or part of a word such as "2nd"
        } else {
            i = end;
            Some("N")
        };
        if let Some(r) = replacement {
            out.push_str(&core[copied..start]);
            out.push_str(r);
            copied = i;
        } else {
            i = i.max(end);
        }
    }
    out.push_str(&core[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_normalise() {
        assert_eq!(
            normalize("upstream server temporarily disabled while connecting to upstream, client: 10.X.X.X:, server: cafe.example.com"),
            "upstream server temporarily disabled while connecting to upstream"
        );
        assert_eq!(
            normalize("upstream timed out (110: Operation timed out) while connecting to upstream, client: 10.168.0.14, server: x"),
            "upstream timed out (110: Operation timed out) while connecting to upstream"
        );
        assert_eq!(
            normalize("limiting requests, excess: 0.960 by zone \"rl_ingress\", client: 127.0.0.1"),
            "limiting requests, excess: N by zone \"rl_ingress\""
        );
        assert_eq!(
            normalize("connect() to 127.0.0.1:9001 failed (111: Connection refused)"),
            "connect() to ADDR failed (111: Connection refused)"
        );
        assert_eq!(
            normalize("start worker process 1234"),
            "start worker process N"
        );
        assert_eq!(
            normalize("worker process 77 exited on signal 9"),
            "worker process N exited on signal N"
        );
        assert_eq!(
            normalize("http_502 and the 2nd try"),
            "http_502 and the 2nd try"
        );
    }

    #[test]
    fn non_2xx_answers_are_attributed_to_their_origin() {
        let mut s = Summarizer::default();
        for line in [
            r#"{"status":503,"upstream_addr":"127.0.0.1:1","upstream_status":"503"}"#,
            r#"{"status":503,"upstream_addr":"","upstream_status":"","limit_req_status":"REJECTED"}"#,
            r#"{"status":502,"upstream_addr":"127.0.0.1:1, 127.0.0.1:2","upstream_status":"502, 502"}"#,
            r#"{"status":504,"upstream_addr":"127.0.0.1:1","upstream_status":"504"}"#,
            r#"{"status":500,"upstream_addr":"127.0.0.1:1, 127.0.0.1:2","upstream_status":"502, 500"}"#,
            r#"{"status":200,"upstream_addr":"127.0.0.1:1","upstream_status":"200"}"#,
        ] {
            s.access_line(line);
        }
        let sum = s.finish();
        let got: Vec<(&str, u64)> = sum
            .status_origin
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .collect();
        assert_eq!(
            got,
            vec![
                ("500 upstream", 1),
                ("502 proxy", 1),
                ("503 proxy", 1),
                ("503 upstream", 1),
                ("504 proxy", 1)
            ]
        );
    }

    #[test]
    fn access_lines_count_by_field() {
        let mut s = Summarizer::default();
        s.access_line(r#"{"status":200,"upstream_addr":"127.0.0.1:1","upstream_status":"200","limit_req_status":"PASSED"}"#);
        s.access_line(r#"{"status":502,"upstream_addr":"127.0.0.1:1, 127.0.0.1:2","upstream_status":"502, 502","limit_req_status":""}"#);
        s.access_line(
            r#"{"status":499,"upstream_addr":"","upstream_status":"","limit_req_status":""}"#,
        );
        s.access_line("not json");
        let sum = s.finish();
        assert_eq!(sum.access_lines, 4);
        assert_eq!(sum.access_status.values().sum::<u64>(), 3);
        assert_eq!(sum.upstream_addr.get("127.0.0.1:1"), Some(&2));
        assert_eq!(sum.upstream_addr.get("127.0.0.1:2"), Some(&1));
        assert_eq!(sum.upstream_addr.get("-"), Some(&1));
        assert_eq!(sum.upstream_status.get("502, 502"), Some(&1));
        assert_eq!(sum.upstream_status.get("-"), Some(&1));
        assert_eq!(sum.limit_req_status.get("PASSED"), Some(&1));
        assert_eq!(sum.limit_req_status.get("-"), Some(&2));
        assert_eq!(sum.examples_499.len(), 1);
        // Only the rate-limited line is kept, and it has no $msec here.
        assert!(sum.limit_req_lines.is_empty());
    }

    #[test]
    fn rate_limited_lines_keep_their_start_on_nginx_clock() {
        let mut s = Summarizer::default();
        // A request delayed 1.234 s in the queue, one refused at once, one not rate limited.
        s.access_line(r#"{"msec":1764043810.123,"status":200,"request_time":1.234,"limit_req_status":"DELAYED"}"#);
        s.access_line(r#"{"msec":1764043809.001,"status":503,"request_time":0.000,"limit_req_status":"REJECTED"}"#);
        s.access_line(
            r#"{"msec":1764043809.002,"status":200,"request_time":0.001,"limit_req_status":""}"#,
        );
        let sum = s.finish();
        let got: Vec<(u64, u64, u16, &str, bool)> = sum
            .limit_req_lines
            .iter()
            .map(|l| {
                (
                    l.start_ms,
                    l.end_ms,
                    l.status,
                    l.limit.as_str(),
                    l.accepted(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (1_764_043_808_889, 1_764_043_810_123, 200, "DELAYED", true),
                (1_764_043_809_001, 1_764_043_809_001, 503, "REJECTED", false),
            ]
        );
    }
}
