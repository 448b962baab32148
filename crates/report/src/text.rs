//! wrk-style text output of one load, followed by proxybench's own block.
//!
//! The first block is wrk's, line for line and column for column (wrk's `print_stats`,
//! `print_units` and `format_units`, including its habit of switching unit at 85% of the next
//! one, so 900 µs prints as `0.90ms`), so people and scripts used to wrk read it unchanged. The
//! second block is lossless: status codes, every error kind, the failure rate as an exact count
//! with a ppm figure, and for open loop how well the schedule was kept.

use model::{ErrorKind, Latency, LoadMode, LoadSummary, WrkBucket};
use std::fmt::Write;

/// What the text output includes beyond wrk's default block.
#[derive(Debug, Clone, Copy, Default)]
pub struct TextOptions {
    /// Print the `Latency Distribution` block (wrk's `--latency`).
    pub latency_distribution: bool,
    /// Also print the uncorrected (measured-from-actual-send) latency of an open-loop run.
    pub uncorrected: bool,
}

/// Renders `summary` as wrk prints a run, line for line, then proxybench's block.
pub fn render(summary: &LoadSummary, opts: &TextOptions) -> String {
    let mut out = String::new();
    wrk_block(&mut out, summary, opts);
    proxybench_block(&mut out, summary, opts);
    out
}

fn wrk_block(out: &mut String, s: &LoadSummary, opts: &TextOptions) {
    match s.planned_s {
        Some(d) => {
            let _ = writeln!(out, "Running {} test @ {}", wrk_time_s(d), s.url);
        }
        None => {
            let _ = writeln!(out, "Running {} requests @ {}", s.attempts(), s.url);
        }
    }
    let _ = writeln!(
        out,
        "  {} threads and {} connections",
        s.threads, s.connections
    );
    if let Some(h) = &s.http2 {
        http2_lines(out, h);
    }
    let _ = writeln!(
        out,
        "  Thread Stats{:>6}{:>11}{:>8}{:>12}",
        "Avg", "Stdev", "Max", "+/- Stdev"
    );
    let l = &s.latency;
    stats_row(
        out,
        "Latency",
        [
            wrk_time_us(l.mean_us),
            wrk_time_us(l.stdev_us),
            wrk_time_us(l.max_us as f64),
        ],
        l.within_stdev_pct,
    );
    let r = &s.req_per_sec;
    stats_row(
        out,
        "Req/Sec",
        [wrk_metric(r.mean), wrk_metric(r.stdev), wrk_metric(r.max)],
        r.within_stdev_pct,
    );
    if opts.latency_distribution {
        out.push_str("  Latency Distribution\n");
        for p in [50.0, 75.0, 90.0, 99.0] {
            let v = l.percentile(p).unwrap_or(0);
            let _ = write!(out, "{p:>7.0}%");
            units_col(out, &wrk_time_us(v as f64), 10);
            out.push('\n');
        }
    }
    let _ = writeln!(
        out,
        "  {} requests in {}, {}B read",
        s.requests,
        wrk_time_us(s.elapsed_s * 1e6),
        wrk_binary(s.bytes_read as f64)
    );
    let (mut connect, mut read, mut write, mut timeout) = (0u64, 0u64, 0u64, 0u64);
    for (k, n) in &s.errors {
        match k.wrk_bucket() {
            WrkBucket::Connect => connect += n,
            WrkBucket::Read => read += n,
            WrkBucket::Write => write += n,
            WrkBucket::Timeout => timeout += n,
        }
    }
    if connect + read + write + timeout > 0 {
        let _ = writeln!(
            out,
            "  Socket errors: connect {connect}, read {read}, write {write}, timeout {timeout}"
        );
    }
    let non = s.non_2xx_3xx();
    if non > 0 {
        let _ = writeln!(out, "  Non-2xx or 3xx responses: {non}");
    }
    let secs = s.elapsed_s.max(1e-9);
    let _ = writeln!(out, "Requests/sec: {:>9.2}", s.requests as f64 / secs);
    let _ = writeln!(
        out,
        "Transfer/sec: {:>10}B",
        wrk_binary(s.bytes_read as f64 / secs)
    );
}

/// The HTTP/2 lines under wrk's "threads and connections": sessions, streams, GOAWAYs, and
/// the frames and errors by code when any occurred.
fn http2_lines(out: &mut String, h: &model::Http2Stats) {
    let _ = writeln!(
        out,
        "  HTTP/2: {} sessions, {} streams ({} per connection asked, at most {} open at once)",
        h.connections, h.streams, h.streams_per_connection, h.max_concurrent_streams
    );
    let _ = writeln!(
        out,
        "  GOAWAY: {} graceful, {} with errors; {} streams refused above last-stream-id",
        h.goaways_graceful, h.goaways_error, h.refused
    );
    let codes = |m: &std::collections::BTreeMap<String, u64>| {
        m.iter()
            .map(|(c, n)| format!("{c}={n}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    if !h.goaway_codes.is_empty() {
        let _ = writeln!(out, "  GOAWAY codes: {}", codes(&h.goaway_codes));
    }
    if !h.rst_stream.is_empty() {
        let _ = writeln!(out, "  RST_STREAM: {}", codes(&h.rst_stream));
    }
    if !h.connection_errors.is_empty() {
        let _ = writeln!(out, "  Connection errors: {}", codes(&h.connection_errors));
    }
    if h.settings_timeouts + h.flow_control_stalls > 0 {
        let _ = writeln!(
            out,
            "  SETTINGS timeouts: {}, flow-control stalls: {}",
            h.settings_timeouts, h.flow_control_stalls
        );
    }
}

fn proxybench_block(out: &mut String, s: &LoadSummary, opts: &TextOptions) {
    out.push_str("proxybench:\n");
    let codes: Vec<String> = s.status.iter().map(|(c, n)| format!("{c}={n}")).collect();
    let _ = writeln!(
        out,
        "  Status codes: {}",
        if codes.is_empty() {
            "none".to_string()
        } else {
            codes.join(" ")
        }
    );
    let kinds: Vec<String> = ErrorKind::ALL
        .iter()
        .map(|k| format!("{}={}", k.name(), s.errors.get(k).copied().unwrap_or(0)))
        .collect();
    let _ = writeln!(out, "  Errors: {}", kinds.join(" "));
    // Every kind that occurred, with the first message seen: `    tls 20 (invalid peer ...)`.
    for k in ErrorKind::ALL {
        let n = s.errors.get(&k).copied().unwrap_or(0);
        if n == 0 {
            continue;
        }
        match s.error_messages.get(&k) {
            Some(m) => {
                let _ = writeln!(out, "    {} {n} ({m})", k.name());
            }
            None => {
                let _ = writeln!(out, "    {} {n}", k.name());
            }
        }
    }
    let _ = writeln!(
        out,
        "  Failures: {} of {} attempts ({})",
        s.failures(),
        s.attempts(),
        units::fmt_ppm(s.failures(), s.attempts())
    );
    if s.retried > 0 {
        let _ = writeln!(
            out,
            "  Retried: {} (sent again on a new connection after an idle close cut them off)",
            s.retried
        );
    }
    latency_tail(out, s);
    let _ = writeln!(
        out,
        "  Connections opened: {}, bytes written: {}",
        s.connects,
        units::fmt_bytes(s.bytes_written as f64)
    );
    schedule(out, s);
    if opts.uncorrected {
        if let Some(u) = &s.latency_uncorrected {
            let _ = writeln!(
                out,
                "  Uncorrected latency (from actual send): {}",
                brief(u)
            );
        }
    }
}

/// The percentiles beyond wrk's 99th, which is where a stall or a reload shows.
fn latency_tail(out: &mut String, s: &LoadSummary) {
    if s.latency.count == 0 {
        out.push_str("  Latency tail: none (no responses)\n");
        return;
    }
    let tail: Vec<String> = [99.9, 99.99, 99.999]
        .iter()
        .filter_map(|&p| {
            s.latency
                .percentile(p)
                .map(|v| format!("p{p}={}", units::fmt_us(v as f64)))
        })
        .collect();
    let _ = writeln!(
        out,
        "  Latency tail: {} max={}{}",
        tail.join(" "),
        units::fmt_us(s.latency.max_us as f64),
        if matches!(s.mode, LoadMode::Open { .. }) {
            " (from intended send times)"
        } else {
            ""
        }
    );
}

/// Open loop: the rate asked for and achieved, and the late sends (never hidden).
fn schedule(out: &mut String, s: &LoadSummary) {
    if let (LoadMode::Open { rate, arrivals, .. }, Some(sch)) = (&s.mode, &s.schedule) {
        let arrivals = match arrivals {
            model::Arrivals::Even => "even",
            model::Arrivals::Poisson => "poisson",
        };
        let window = match sch.send_window_us {
            0 => String::new(),
            w => format!(", sends batched within {}", units::fmt_us(w as f64)),
        };
        let _ = writeln!(
            out,
            "  Schedule: target {rate:.2}/s ({arrivals}), achieved {:.2}/s, intended {}, sent {}{window}",
            sch.achieved_rate, sch.intended, sch.sent
        );
        let _ = writeln!(
            out,
            "  Late sends (> {}): {} of {}, lateness p99={} max={} mean={}",
            units::fmt_us(sch.late_threshold_us as f64),
            sch.late,
            sch.sent,
            units::fmt_us(sch.late_p99_us as f64),
            units::fmt_us(sch.late_max_us as f64),
            units::fmt_us(sch.late_mean_us)
        );
    }
}

fn brief(l: &Latency) -> String {
    let mut parts = vec![
        format!("avg={}", units::fmt_us(l.mean_us)),
        format!("stdev={}", units::fmt_us(l.stdev_us)),
    ];
    for p in [50.0, 90.0, 99.0, 99.9] {
        if let Some(v) = l.percentile(p) {
            parts.push(format!("p{p}={}", units::fmt_us(v as f64)));
        }
    }
    parts.push(format!("max={}", units::fmt_us(l.max_us as f64)));
    parts.join(" ")
}

/// wrk's `print_stats`: `    %-10s`, three values in widths 8, 10, 9, then `%8.2f%%`.
fn stats_row(out: &mut String, name: &str, vals: [String; 3], within: f64) {
    let _ = write!(out, "    {name:<10}");
    units_col(out, &vals[0], 8);
    units_col(out, &vals[1], 10);
    units_col(out, &vals[2], 9);
    let _ = writeln!(out, "{within:>8.2}%");
}

/// wrk's `print_units`: right-aligns the number so that the digits line up whatever the unit's
/// length (a unit of two letters takes the two padding columns, one letter takes one).
fn units_col(out: &mut String, msg: &str, width: usize) {
    let b = msg.as_bytes();
    let mut pad = 2;
    if b.last().is_some_and(|c| c.is_ascii_alphabetic()) {
        pad -= 1;
    }
    if b.len() >= 2 && b[b.len() - 2].is_ascii_alphabetic() {
        pad -= 1;
    }
    let w = width - pad;
    let _ = write!(out, "{msg:>w$}{}", &"  "[..pad]);
}

/// wrk's `format_units`: divide by `scale` while the value is at least 85% of it, naming the
/// unit from `units` (whose last entry is never reached, as in wrk).
fn format_units(n: f64, scale: f64, base: &str, units: &[&str], prec: usize) -> String {
    let mut amt = n;
    let mut unit = base;
    let mut i = 0;
    while i + 1 < units.len() && amt >= scale * 0.85 {
        amt /= scale;
        unit = units[i];
        i += 1;
    }
    format!("{amt:.prec$}{unit}")
}

fn wrk_time_us(us: f64) -> String {
    if us >= 1e6 {
        format_units(us / 1e6, 60.0, "s", &["m", "h"], 2)
    } else {
        format_units(us, 1000.0, "us", &["ms", "s"], 2)
    }
}

fn wrk_time_s(s: f64) -> String {
    format_units(s, 60.0, "s", &["m", "h"], 0)
}

fn wrk_binary(n: f64) -> String {
    format_units(n, 1024.0, "", &["K", "M", "G", "T", "P"], 2)
}

fn wrk_metric(n: f64) -> String {
    format_units(n, 1000.0, "", &["k", "M", "G", "T", "P"], 2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::{Percentile, RateStats};
    use std::collections::BTreeMap;

    fn summary() -> LoadSummary {
        // The numbers of the first wrk block in the reference write-up (000_*.txt).
        let mut status = BTreeMap::new();
        status.insert(200, 788_635);
        let mut errors = BTreeMap::new();
        errors.insert(ErrorKind::ReadIdleClosed, 17);
        errors.insert(ErrorKind::Timeout, 1);
        LoadSummary {
            schema: model::SCHEMA_VERSION,
            name: "load".into(),
            url: "http://cafe.example.com/coffee".into(),
            method: "GET".into(),
            mode: LoadMode::Closed,
            threads: 2,
            connections: 2,
            start_s: 0.0,
            planned_s: Some(300.0),
            elapsed_s: 300.097,
            timeout_ms: 2000,
            requests: 788_635,
            bytes_read: (281.73 * 1024.0 * 1024.0) as u64,
            bytes_written: 0,
            status,
            errors,
            error_messages: BTreeMap::new(),
            connects: 2,
            retried: 0,
            latency: Latency {
                count: 788_635,
                mean_us: 5880.0,
                stdev_us: 59690.0,
                min_us: 300,
                max_us: 1_070_000,
                within_stdev_pct: 99.05,
                percentiles: [(50.0, 632), (75.0, 704), (90.0, 796), (99.0, 15020)]
                    .iter()
                    .map(|&(p, us)| Percentile { p, us })
                    .collect(),
                hdr: String::new(),
            },
            latency_uncorrected: None,
            req_per_sec: RateStats {
                mean: 1530.0,
                stdev: 143.30,
                max: 1810.0,
                within_stdev_pct: 74.47,
            },
            schedule: None,
            timeline: vec![],
            http2: None,
        }
    }

    #[test]
    fn wrk_block_matches_wrk_line_for_line() {
        let text = render(
            &summary(),
            &TextOptions {
                latency_distribution: true,
                uncorrected: false,
            },
        );
        let want = "\
Running 5m test @ http://cafe.example.com/coffee
  2 threads and 2 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     5.88ms   59.69ms   1.07s    99.05%
    Req/Sec     1.53k   143.30     1.81k    74.47%
  Latency Distribution
     50%  632.00us
     75%  704.00us
     90%  796.00us
     99%   15.02ms
  788635 requests in 5.00m, 281.73MB read
  Socket errors: connect 0, read 17, write 0, timeout 1
Requests/sec:   2627.93
Transfer/sec:      0.94MB
";
        assert_eq!(&text[..want.len()], want, "\n{text}");
    }

    #[test]
    fn wrk_units_switch_at_85_percent() {
        assert_eq!(wrk_time_us(900.0), "0.90ms");
        assert_eq!(wrk_time_us(849.0), "849.00us");
        assert_eq!(wrk_time_us(10_000_000.0), "10.00s");
        assert_eq!(wrk_time_us(17.44 * 60e6), "17.44m");
        assert_eq!(wrk_metric(850.0), "0.85k");
        assert_eq!(wrk_metric(808.97), "808.97");
        assert_eq!(wrk_binary(3.63 * 1024.0 * 1024.0), "3.63M");
        assert_eq!(wrk_time_s(10.0), "10s");
        assert_eq!(wrk_time_s(60.0), "1m");
        assert_eq!(wrk_time_s(1200.0), "20m");
    }

    #[test]
    fn proxybench_block_is_lossless() {
        let mut s = summary();
        s.status.insert(503, 3);
        let text = render(&s, &TextOptions::default());
        assert!(text.contains("  Non-2xx or 3xx responses: 3\n"), "{text}");
        assert!(
            text.contains("  Status codes: 200=788635 503=3\n"),
            "{text}"
        );
        assert!(text.contains(
            "  Errors: connect_refused=0 connect_timeout=0 connect_other=0 tls=0 write=0 \
             read_idle_closed=17 read_reset=0 timeout=1 malformed=0\n"
        ));
        assert!(
            text.contains("  Failures: 21 of 788653 attempts (26.63 ppm)\n"),
            "{text}"
        );
        assert!(!text.contains("Latency Distribution"));
        // Each kind that occurred gets a line; without a recorded message (old data) just
        // the count.
        assert!(
            text.contains("    read_idle_closed 17\n    timeout 1\n  Failures:"),
            "{text}"
        );
    }

    #[test]
    fn every_error_kind_line_carries_its_first_message() {
        let mut s = summary();
        s.errors.insert(ErrorKind::Tls, 20);
        s.error_messages.insert(
            ErrorKind::Tls,
            "invalid peer certificate: UnknownIssuer".into(),
        );
        s.error_messages.insert(
            ErrorKind::Timeout,
            "no complete response within the timeout (2s)".into(),
        );
        let text = render(&s, &TextOptions::default());
        let want =
            "    tls 20 (invalid peer certificate: UnknownIssuer)\n    read_idle_closed 17\n    \
                    timeout 1 (no complete response within the timeout (2s))\n  Failures: 38 of";
        assert!(text.contains(want), "{text}");
    }

    #[test]
    fn old_data_without_messages_still_loads() {
        let mut v = serde_json::to_value(summary()).unwrap();
        v.as_object_mut().unwrap().remove("error_messages");
        let back: LoadSummary = serde_json::from_value(v).unwrap();
        assert!(back.error_messages.is_empty());
        assert_eq!(back.errors.get(&ErrorKind::ReadIdleClosed), Some(&17));
    }
}
