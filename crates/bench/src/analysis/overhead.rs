//! The `overhead` analysis (scenario `proxy-overhead`): what a reverse proxy costs a closed-loop
//! client, and what upstream keepalive and retries buy back (after the "learning nginx" notes).
//!
//! Each case is one setup (direct, nginx without upstream keepalive, with keepalive, with
//! keepalive plus retries under tight timeouts) against one backend style (cheap, or spiky: a
//! share of requests takes far longer). Requests are followed from the client to the backends
//! with exact counts: client responses, nginx's access-log lines, upstream attempts
//! (`$upstream_addr` lists one address per attempt), backend responses and accepted connections,
//! and the TIME_WAIT sockets that connection churn leaves behind. The checks are about mechanism,
//! never raw speed: Little's law for a closed loop, one upstream connection per request without
//! keepalive and few with it, no request lost to a retry (the backends' extra answers are the
//! retries nginx logged), and the tail (the spike shows in p99 without retries and is cut near
//! the read timeout with them).

use super::Records;
use crate::scenario::{Case, Scenario};
use crate::theory::limit_req::nginx_clock_tick_us;
use model::{CaseResult, CheckResult, ErrorKind, LoadSummary, RunResults, Table};
use proxy::config::NextUpstream;
use std::collections::BTreeMap;

/// Closed loop: measured req/s may differ from connections / mean latency by this share (the
/// requests still in flight when the load stops are the difference).
const LITTLE_TOLERANCE: f64 = 0.15;
/// With upstream keepalive, at most this share of upstream connections per request, relative to
/// the setup without keepalive (where it is one per request).
const KEEPALIVE_SHARE: f64 = 0.10;
/// Spikes must cover at least this share of requests for p99 to be sure to land among them.
const SPIKE_SHARE_FOR_P99: f64 = 0.015;
/// Share of the spiked attempts that must show up as retries (a binomial count's low side).
const RETRIED_SPIKES: f64 = 0.7;
/// Title of the per-case table (the cross-case tables read TIME_WAIT back from it).
const FLOW: &str = "where the requests went";
/// Row label of the TIME_WAIT count in the per-case table.
const TIME_WAIT_ROW: &str = "TIME_WAIT sockets at the backends' ports (after the case)";

/// The four setups of the notes, told apart by the case's proxy config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Setup {
    /// No proxy: the load talks to a backend.
    Direct,
    /// nginx with no upstream keepalive.
    NoKeepalive,
    /// nginx reusing upstream connections.
    Keepalive,
    /// Keepalive plus a tight read timeout that passes slow requests to the next server.
    Retry,
}

impl Setup {
    fn of(case: &Case) -> Setup {
        let Some(u) = case.proxy.as_ref().and_then(|p| p.upstreams.first()) else {
            return Setup::Direct;
        };
        // nginx's default proxy_next_upstream is `error timeout`: retries on timeout are on
        // unless turned off, and matter only when the read timeout is tight enough to fire.
        let on_timeout = u
            .next_upstream
            .as_ref()
            .is_none_or(|v| v.contains(&NextUpstream::Timeout));
        if u.keepalive == 0 {
            Setup::NoKeepalive
        } else if u.read_timeout.is_some() && on_timeout {
            Setup::Retry
        } else {
            Setup::Keepalive
        }
    }

    fn label(self) -> &'static str {
        match self {
            Setup::Direct => "direct",
            Setup::NoKeepalive => "nginx, no upstream keepalive",
            Setup::Keepalive => "nginx + upstream keepalive",
            Setup::Retry => "nginx + keepalive + retries",
        }
    }
}

/// The spike mix of the backends' profile.
#[derive(Debug, Clone, Copy)]
struct Spikes {
    /// The shortest spiked answer, in microseconds.
    floor_us: f64,
    /// Share of requests that spike.
    share: f64,
}

fn spikes(case: &Case) -> Option<Spikes> {
    let list = case.backends.first()?.profile.base.spikes.as_ref()?;
    if list.is_empty() {
        return None;
    }
    let floor_ns = list
        .iter()
        .map(|s| s.latency.quantile(0.0))
        .filter(|v| v.is_finite())
        .fold(f64::INFINITY, f64::min);
    Some(Spikes {
        floor_us: if floor_ns.is_finite() {
            floor_ns.max(0.0) / 1e3
        } else {
            0.0
        },
        share: list.iter().map(|s| s.share.fraction()).sum(),
    })
}

/// CPU seconds spent during a case, per process group.
#[derive(Debug, Clone, Copy, Default)]
struct Cpu {
    nginx: f64,
    backends: f64,
    /// The whole proxybench process (load generator, backends, collectors).
    process: f64,
}

fn cpu(r: &CaseResult) -> Cpu {
    let mut by_group: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
    for s in &r.proc_samples {
        by_group
            .entry(s.group.as_str())
            .or_default()
            .push((s.t_s, s.cpu_pct));
    }
    let mut out = Cpu::default();
    for (g, mut v) in by_group {
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        let secs: f64 = v
            .windows(2)
            .map(|w| w[1].1 / 100.0 * (w[1].0 - w[0].0).max(0.0))
            .sum();
        if g.starts_with("nginx") {
            out.nginx += secs;
        } else if g == "backends" {
            out.backends += secs;
        } else if g == "proxybench" {
            out.process += secs;
        }
    }
    out
}

/// Everything the analysis reads from one case, counted exactly.
#[derive(Debug, Clone)]
struct Facts {
    setup: Setup,
    spikes: Option<Spikes>,
    read_timeout_us: Option<f64>,
    keepalive: u32,
    connections: u32,
    /// Closed loop (wrk's model), where Little's law ties req/s to latency.
    closed: bool,
    requests: u64,
    rps: f64,
    mean_us: f64,
    p50: u64,
    p90: u64,
    p99: u64,
    max: u64,
    non_2xx: u64,
    errors: u64,
    connect_errors: u64,
    other_errors: BTreeMap<&'static str, u64>,
    status_origin: BTreeMap<String, u64>,
    /// Access-log lines nginx wrote (JSON lines it could parse).
    lines: u64,
    /// Lines whose request reached an upstream.
    lines_up: u64,
    /// Upstream attempts: one per address in `$upstream_addr`.
    attempts: u64,
    timeouts_logged: u64,
    backend_requests: u64,
    backend_connections: u64,
    cpu: Cpu,
}

impl Facts {
    fn new(case: &Case, r: &CaseResult) -> Option<Facts> {
        let l: &LoadSummary = r.loads.first()?;
        let p = |q: f64| l.latency.percentile(q).unwrap_or(0);
        let connect = [
            ErrorKind::ConnectRefused,
            ErrorKind::ConnectTimeout,
            ErrorKind::ConnectOther,
        ];
        let logs = &r.logs;
        let lines: u64 = logs.access_status.values().sum();
        let no_upstream = logs.upstream_addr.get("-").copied().unwrap_or(0);
        let upstream = case.proxy.as_ref().and_then(|p| p.upstreams.first());
        Some(Facts {
            setup: Setup::of(case),
            spikes: spikes(case),
            read_timeout_us: upstream
                .and_then(|u| u.read_timeout)
                .map(|d| d.0.as_secs_f64() * 1e6),
            keepalive: upstream.map_or(0, |u| u.keepalive),
            connections: l.connections,
            closed: l.mode == model::LoadMode::Closed,
            requests: l.requests,
            rps: l.req_per_sec_total(),
            mean_us: l.latency.mean_us,
            p50: p(50.0),
            p90: p(90.0),
            p99: p(99.0),
            max: l.latency.max_us,
            non_2xx: l.non_2xx_3xx(),
            errors: l.error_total(),
            connect_errors: connect
                .iter()
                .map(|k| l.errors.get(k).copied().unwrap_or(0))
                .sum(),
            other_errors: l
                .errors
                .iter()
                .filter(|(k, n)| !connect.contains(k) && **n > 0)
                .map(|(k, n)| (k.name(), *n))
                .collect(),
            status_origin: logs.status_origin.clone(),
            lines,
            lines_up: lines.saturating_sub(no_upstream),
            attempts: logs
                .upstream_addr
                .iter()
                .filter(|(a, _)| a.as_str() != "-")
                .map(|(_, n)| n)
                .sum(),
            timeouts_logged: logs
                .error_groups
                .iter()
                .filter(|g| g.message.contains("timed out"))
                .map(|g| g.count)
                .sum(),
            backend_requests: r.backends.iter().map(|b| b.requests).sum(),
            backend_connections: r.backends.iter().map(|b| b.connections).sum(),
            cpu: cpu(r),
        })
    }

    fn style(&self) -> &'static str {
        if self.spikes.is_some() {
            "spiky"
        } else {
            "cheap"
        }
    }

    fn proxied(&self) -> bool {
        self.setup != Setup::Direct
    }

    /// Attempts beyond the first of each request.
    fn retries(&self) -> u64 {
        self.attempts.saturating_sub(self.lines_up)
    }

    /// Upstream (backend) connections accepted per backend response.
    fn conns_per_request(&self) -> f64 {
        ratio(self.backend_connections, self.backend_requests)
    }

    /// Microseconds of CPU per client response.
    fn cpu_us(&self, secs: f64) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            secs * 1e6 / self.requests as f64
        }
    }

    /// The load generator's share: the process minus the backends' threads.
    fn load_cpu(&self) -> f64 {
        (self.cpu.process - self.cpu.backends).max(0.0)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

fn count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn lat(us: u64) -> String {
    units::fmt_us(us as f64)
}

fn pct(v: f64) -> String {
    format!("{:.2}%", v * 100.0)
}

/// The non-2xx answers by who produced them, as one cell.
fn origins(f: &Facts) -> String {
    if f.status_origin.is_empty() {
        return if f.proxied() {
            "none".into()
        } else {
            "no proxy log".into()
        };
    }
    f.status_origin
        .iter()
        .map(|(k, n)| format!("{k}: {}", count(*n)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn check(case: &str, name: String, expected: String, actual: String, pass: bool) -> CheckResult {
    CheckResult {
        name,
        case: Some(case.to_string()),
        expected,
        actual,
        pass,
    }
}

/// Runs the analysis on one case: the request-flow table, its explanation, and the checks.
fn case(
    _scn: &Scenario,
    case: &Case,
    result: &mut CaseResult,
    _records: &Records,
) -> Vec<CheckResult> {
    let Some(f) = Facts::new(case, result) else {
        result
            .findings
            .push("overhead analysis: the case ran no load; nothing to analyse.".into());
        return Vec::new();
    };
    let tw = result.time_wait.map(|t| (t.backend_side, t.peer_side));
    result.tables.push(flow_table(&case.name, &f, tw));
    result.findings.push(finding(&f));
    checks(&case.name, &f)
}

fn flow_table(case: &str, f: &Facts, tw: Option<(u64, u64)>) -> Table {
    let per = |n: u64| format!("{:.3}", ratio(n, f.requests));
    let mut rows = vec![vec![
        "Client responses (the load)".to_string(),
        count(f.requests),
        "1".into(),
    ]];
    rows.push(vec![
        "Client errors below HTTP (connect / other)".into(),
        format!(
            "{} / {}",
            count(f.connect_errors),
            count(f.errors - f.connect_errors)
        ),
        per(f.errors),
    ]);
    if f.proxied() {
        rows.push(vec![
            "nginx access-log lines".into(),
            count(f.lines),
            per(f.lines),
        ]);
        rows.push(vec![
            "Upstream attempts (addresses in $upstream_addr)".into(),
            count(f.attempts),
            per(f.attempts),
        ]);
        rows.push(vec![
            "Retries (attempts beyond each request's first)".into(),
            count(f.retries()),
            per(f.retries()),
        ]);
        rows.push(vec![
            "Upstream timeouts in nginx's error log".into(),
            count(f.timeouts_logged),
            per(f.timeouts_logged),
        ]);
    }
    rows.push(vec![
        "Backend responses (backend counters)".into(),
        count(f.backend_requests),
        per(f.backend_requests),
    ]);
    rows.push(vec![
        "Backend connections accepted".into(),
        count(f.backend_connections),
        per(f.backend_connections),
    ]);
    rows.push(vec![
        TIME_WAIT_ROW.into(),
        tw.map(|(l, _)| count(l)).unwrap_or_else(|| "n/a".into()),
        tw.map(|(l, _)| per(l)).unwrap_or_else(|| "-".into()),
    ]);
    rows.push(vec![
        "TIME_WAIT sockets on the connecting side (after the case)".into(),
        tw.map(|(_, r)| count(r)).unwrap_or_else(|| "n/a".into()),
        tw.map(|(_, r)| per(r)).unwrap_or_else(|| "-".into()),
    ]);
    let cpu_row = |what: &str, secs: f64| {
        vec![
            format!("CPU, {what} (µs per client response)"),
            format!("{:.2} s", secs),
            format!("{:.1}", f.cpu_us(secs)),
        ]
    };
    if f.proxied() {
        rows.push(cpu_row("nginx", f.cpu.nginx));
    }
    rows.push(cpu_row("backends", f.cpu.backends));
    rows.push(cpu_row("load generator", f.load_cpu()));
    Table {
        title: format!("{case}: {FLOW}"),
        columns: ["Quantity", "Count", "Per client response"]
            .map(String::from)
            .to_vec(),
        rows,
        notes: notes(f, tw),
    }
}

fn notes(f: &Facts, tw: Option<(u64, u64)>) -> Vec<String> {
    let mut n = Vec::new();
    if f.closed {
        n.push(format!(
            "Closed loop (wrk's model): {} connections each send the next request when the \
             answer arrives, so req/s = connections / mean latency (Little's law): {} / {} = \
             {:.0} req/s predicted, {:.0} measured. Every millisecond the path adds is req/s \
             lost.",
            f.connections,
            f.connections,
            units::fmt_us(f.mean_us),
            f.connections as f64 / (f.mean_us / 1e6).max(1e-9),
            f.rps
        ));
    }
    let tw_text = match tw {
        Some((backend, proxy)) if backend >= proxy => format!(
            "the backend closes first, so TIME_WAIT lands on its side: {} sockets at the \
             backends' ports right after the case, {} on nginx's side. On loopback the kernel \
             reuses such pairs for new connections (tcp_tw_reuse), so ephemeral ports are not \
             what runs out here: the churn is CPU",
            count(backend),
            count(proxy)
        ),
        Some((backend, proxy)) => format!(
            "nginx closes first, so TIME_WAIT lands on its side, one ephemeral port each: {} \
             sockets on nginx's side right after the case, {} at the backends' ports",
            count(proxy),
            count(backend)
        ),
        None => "TIME_WAIT could not be read from /proc/net/tcp".into(),
    };
    match f.setup {
        Setup::Direct => n.push(format!(
            "Nothing stands between the load and the backend: {} connections opened once and \
             reused for {} requests. The generator ({:.1} µs of CPU per response) and the backend \
             ({:.1} µs) share this machine's cores, and that alone sets the pace.",
            count(f.backend_connections),
            count(f.backend_requests),
            f.cpu_us(f.load_cpu()),
            f.cpu_us(f.cpu.backends)
        )),
        Setup::NoKeepalive => n.push(format!(
            "Without upstream keepalive nginx speaks HTTP/1.0 to the backend and closes after every \
             answer: the backends accepted {} connections for {} responses ({:.3} per response), a \
             TCP handshake, an accept and a close at both ends for every request. Here {tw_text}. \
             nginx spent {:.1} µs of CPU per response and the backends {:.1} µs, on the same two \
             cores the load uses.",
            count(f.backend_connections),
            count(f.backend_requests),
            f.conns_per_request(),
            f.cpu_us(f.cpu.nginx),
            f.cpu_us(f.cpu.backends)
        )),
        Setup::Keepalive | Setup::Retry => n.push(format!(
            "nginx keeps up to {} idle upstream connections per worker (HTTP/1.1, empty Connection \
             header) and reuses them: {} connections for {} backend responses ({:.4} per response). \
             What remains is nginx's own work per request (parse, route, log, two socket hops): \
             {:.1} µs of CPU per response, taken from the cores the load and the backends use.",
            f.keepalive,
            count(f.backend_connections),
            count(f.backend_requests),
            f.conns_per_request(),
            f.cpu_us(f.cpu.nginx)
        )),
    }
    if f.setup == Setup::Retry {
        n.push(format!(
            "A read past the {} read timeout is cut and the request passed to the next backend \
             (proxy_next_upstream error timeout). nginx logged {} timeouts and {} extra attempts; \
             the backends answered {} requests for {} client responses, {} more: a timed-out \
             attempt is still answered by its backend, to a connection nginx has closed, so the \
             retries cost the backends work but no client request is lost. A timed-out connection \
             cannot be reused, which adds to the connection count. max_fails=0 keeps a backend in \
             rotation after a timeout; nginx's default (max_fails=1, fail_timeout=10s) would take \
             it out for 10 s at every spike.",
            f.read_timeout_us
                .map(units::fmt_us)
                .unwrap_or_else(|| "-".into()),
            count(f.timeouts_logged),
            count(f.retries()),
            count(f.backend_requests),
            count(f.requests),
            count(f.backend_requests.saturating_sub(f.requests))
        ));
    }
    if let Some(s) = f.spikes {
        n.push(format!(
            "{} of requests take at least {} at the backend. In a closed loop each one holds a \
             connection that long, so p99 lands inside the spike unless something cuts it: here \
             p99 {} and max {}.",
            pct(s.share),
            units::fmt_us(s.floor_us),
            lat(f.p99),
            lat(f.max)
        ));
    }
    n
}

fn finding(f: &Facts) -> String {
    let mut s = format!(
        "{} ({} backend): {:.0} req/s, p50 {}, p99 {}, max {}",
        f.setup.label(),
        f.style(),
        f.rps,
        lat(f.p50),
        lat(f.p99),
        lat(f.max)
    );
    if f.proxied() {
        s.push_str(&format!(
            "; {:.3} upstream connections and {:.3} upstream attempts per request",
            f.conns_per_request(),
            ratio(f.attempts, f.lines_up)
        ));
    }
    s.push('.');
    s
}

fn checks(case: &str, f: &Facts) -> Vec<CheckResult> {
    let mut out = Vec::new();
    if f.closed && f.mean_us > 0.0 && f.rps > 0.0 {
        let predicted = f.connections as f64 / (f.mean_us / 1e6);
        let off = (f.rps - predicted).abs() / predicted;
        out.push(check(
            case,
            "closed loop obeys Little's law: req/s = connections / mean latency".into(),
            format!(
                "{:.0} req/s within {:.0}%",
                predicted,
                LITTLE_TOLERANCE * 100.0
            ),
            format!("{:.0} req/s ({:.1}% off)", f.rps, off * 100.0),
            off <= LITTLE_TOLERANCE,
        ));
    }
    match f.setup {
        Setup::NoKeepalive => {
            let extra = f.backend_connections as i64 - f.backend_requests as i64;
            out.push(check(
                case,
                "without upstream keepalive every request opens its own upstream connection".into(),
                format!(
                    "connections - responses in [0, {}] (requests in flight at the end)",
                    f.connections
                ),
                format!(
                    "{} connections for {} responses",
                    count(f.backend_connections),
                    count(f.backend_requests)
                ),
                (0..=i64::from(f.connections)).contains(&extra),
            ));
        }
        Setup::Retry => out.extend(retry_checks(case, f)),
        _ => {}
    }
    if let (Some(s), false) = (f.spikes, f.setup == Setup::Retry) {
        if s.share >= SPIKE_SHARE_FOR_P99 {
            out.push(check(
                case,
                "without retries the spike shows in p99".into(),
                format!(
                    ">= {} ({} of requests spike)",
                    units::fmt_us(s.floor_us),
                    pct(s.share)
                ),
                lat(f.p99),
                f.p99 as f64 >= s.floor_us,
            ));
        }
    }
    out
}

fn retry_checks(case: &str, f: &Facts) -> Vec<CheckResult> {
    let mut out = Vec::new();
    out.push(check(
        case,
        "retries lose no request: backend responses >= client responses".into(),
        format!(">= {}", count(f.requests)),
        count(f.backend_requests),
        f.backend_requests >= f.requests,
    ));
    // The backends' excess over the client is the retries, give or take the requests in flight
    // when the load stopped (logged by nginx, answered by a backend, never read by the client).
    let excess = f.backend_requests as i64 - f.requests as i64;
    let slack = i64::from(f.connections) + (f.requests / 1000) as i64;
    out.push(check(
        case,
        "the backends' extra responses are the retries nginx logged".into(),
        format!(
            "{} (attempts - lines in $upstream_addr) +/- {}",
            count(f.retries()),
            slack
        ),
        format!("{} extra responses", excess),
        (excess - f.retries() as i64).abs() <= slack,
    ));
    out.push(check(
        case,
        "with keepalive few upstream connections are opened".into(),
        format!("<= {:.0}% of backend responses", KEEPALIVE_SHARE * 100.0),
        format!(
            "{} for {} ({})",
            count(f.backend_connections),
            count(f.backend_requests),
            pct(f.conns_per_request())
        ),
        f.conns_per_request() <= KEEPALIVE_SHARE,
    ));
    if let (Some(s), Some(rt)) = (f.spikes, f.read_timeout_us) {
        let spiked = s.share * f.lines_up as f64;
        out.push(check(
            case,
            "every spike is cut by the read timeout and retried".into(),
            format!(
                ">= {:.0} retries ({:.0}% of the {} expected spikes)",
                RETRIED_SPIKES * spiked,
                RETRIED_SPIKES * 100.0,
                pct(s.share)
            ),
            count(f.retries()),
            f.retries() as f64 >= RETRIED_SPIKES * spiked,
        ));
        // A retried request costs the read timeout (on nginx's coarse clock) plus one ordinary
        // answer; p90 stands for an ordinary answer under whatever load the machine is under.
        let bound = rt + nginx_clock_tick_us() as f64 + 2.0 * f.p90 as f64;
        out.push(check(
            case,
            "retries cut the tail: p99 <= read timeout + tick + 2 x p90".into(),
            format!(
                "<= {} (spikes take >= {})",
                units::fmt_us(bound),
                units::fmt_us(s.floor_us)
            ),
            lat(f.p99),
            (f.p99 as f64) <= bound,
        ));
    }
    out
}

/// Adds the cross-case tables (setups side by side with ratios against direct; non-2xx by
/// origin; retries) to the last case, the run's findings, and the keepalive comparison checks.
fn finish(scn: &Scenario, results: &mut RunResults) {
    let mut all: Vec<(String, Facts, String)> = Vec::new();
    for c in &results.cases {
        let Some(spec) = scn.cases.iter().find(|s| s.name == c.name) else {
            continue;
        };
        if let Some(f) = Facts::new(spec, c) {
            let tw = cell(c, TIME_WAIT_ROW).unwrap_or_else(|| "-".into());
            all.push((c.name.clone(), f, tw));
        }
    }
    if all.is_empty() {
        return;
    }
    all.sort_by(|a, b| (a.1.style(), a.1.setup).cmp(&(b.1.style(), b.1.setup)));
    let direct = |style: &str| {
        all.iter()
            .find(|(_, f, _)| f.setup == Setup::Direct && f.style() == style)
            .map(|(_, f, _)| f.clone())
    };
    let tables = vec![
        comparison(&all, &direct),
        origin_table(&all),
        retry_table(&all),
    ];
    let mut findings = Vec::new();
    let mut checks = Vec::new();
    for style in ["cheap", "spiky"] {
        let of = |s: Setup| {
            all.iter()
                .find(|(_, f, _)| f.setup == s && f.style() == style)
                .map(|(_, f, _)| f)
        };
        if let (Some(d), Some(nk)) = (direct(style), of(Setup::NoKeepalive)) {
            let mut s = format!(
                "{style} backend: nginx without upstream keepalive served {} of direct's req/s at {} \
                 its p50",
                times(nk.rps, d.rps),
                times(nk.p50 as f64, d.p50 as f64)
            );
            for (setup, what) in [
                (Setup::Keepalive, "with keepalive"),
                (Setup::Retry, "with keepalive + retries"),
            ] {
                if let Some(k) = of(setup) {
                    s.push_str(&format!(
                        "; {what} {} and {}",
                        times(k.rps, d.rps),
                        times(k.p50 as f64, d.p50 as f64)
                    ));
                }
            }
            s.push('.');
            findings.push(s);
        }
        if let Some(nk) = of(Setup::NoKeepalive) {
            for setup in [Setup::Keepalive, Setup::Retry] {
                if let Some(k) = of(setup) {
                    let bound = KEEPALIVE_SHARE * nk.conns_per_request();
                    checks.push(CheckResult {
                        name: format!(
                            "{style}: {} opens far fewer upstream connections than no keepalive",
                            setup.label()
                        ),
                        case: None,
                        expected: format!(
                            "<= {:.4} per request ({:.0}% of no keepalive's {:.3})",
                            bound,
                            KEEPALIVE_SHARE * 100.0,
                            nk.conns_per_request()
                        ),
                        actual: format!("{:.4} per request", k.conns_per_request()),
                        pass: k.conns_per_request() <= bound,
                    });
                }
            }
        }
        if style == "spiky" {
            let p99 = |s: Setup| of(s).map(|f| lat(f.p99)).unwrap_or_else(|| "-".into());
            if let Some(r) = of(Setup::Retry) {
                findings.push(format!(
                    "spiky backend: p99 direct {}, nginx + keepalive {}, + retries with a {} read \
                     timeout {}: the timeout cuts each spike and the retry lands on a backend that \
                     answers in milliseconds, at the cost of {} extra upstream attempts.",
                    p99(Setup::Direct),
                    p99(Setup::Keepalive),
                    r.read_timeout_us
                        .map(units::fmt_us)
                        .unwrap_or_else(|| "-".into()),
                    lat(r.p99),
                    count(r.retries())
                ));
            }
        }
    }
    if let Some(last) = results.cases.last_mut() {
        last.tables.extend(tables);
    }
    findings.push(
        "proxy-overhead: the side-by-side tables (ratios against direct, non-2xx by origin, \
         retries) are at the end of the last case's section."
            .into(),
    );
    results.findings.extend(findings);
    results.checks.extend(checks);
}

/// `a / b` as a multiplier, with the inverse when it is a drop: `0.14× (÷7.1)`.
fn times(a: f64, b: f64) -> String {
    if a <= 0.0 || b <= 0.0 {
        return "-".into();
    }
    let r = a / b;
    if r < 1.0 {
        format!("{r:.2}× (÷{:.1})", 1.0 / r)
    } else {
        format!("{r:.2}×")
    }
}

/// The value cell of the row labelled `row` in the case's flow table.
fn cell(c: &CaseResult, row: &str) -> Option<String> {
    c.tables
        .iter()
        .find(|t| t.title.ends_with(FLOW))?
        .rows
        .iter()
        .find(|r| r.first().map(String::as_str) == Some(row))?
        .get(1)
        .cloned()
}

type Direct<'a> = dyn Fn(&str) -> Option<Facts> + 'a;

fn comparison(all: &[(String, Facts, String)], direct: &Direct<'_>) -> Table {
    let mut rows = Vec::new();
    for (name, f, tw) in all {
        let d = direct(f.style());
        let vs = |a: f64, pick: fn(&Facts) -> f64| {
            d.as_ref()
                .map(|d| times(a, pick(d)))
                .unwrap_or_else(|| "-".into())
        };
        rows.push(vec![
            f.setup.label().to_string(),
            f.style().to_string(),
            name.clone(),
            format!("{:.0}", f.rps),
            vs(f.rps, |d| d.rps),
            lat(f.p50),
            vs(f.p50 as f64, |d| d.p50 as f64),
            lat(f.p99),
            vs(f.p99 as f64, |d| d.p99 as f64),
            lat(f.max),
            count(f.non_2xx),
            count(f.errors),
            format!("{:.4}", f.conns_per_request()),
            tw.clone(),
            if f.proxied() {
                format!("{:.1}", f.cpu_us(f.cpu.nginx))
            } else {
                "-".into()
            },
        ]);
    }
    Table {
        title: "All cases: setups side by side (ratios against direct with the same backends)"
            .into(),
        columns: [
            "Setup",
            "Backends",
            "Case",
            "Req/s",
            "Req/s vs direct",
            "p50",
            "p50 vs direct",
            "p99",
            "p99 vs direct",
            "Max",
            "Non-2xx",
            "Errors",
            "Backend conns / response",
            "TIME_WAIT at backends",
            "nginx CPU µs / response",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        notes: vec![
            "Ratios are against the direct case with the same backend style: a req/s of 0.20× \
             (÷5.0) is the notes' \"RPS dropped 5×\", a p50 of 5.00× their \"latency went 5×\". \
             The numbers come from one shared 2-core machine where nginx, the backends and the load \
             generator take turns on the same cores, so nginx's CPU per request is itself a cut in \
             req/s; other runs on the machine add noise, which is why no check here is about speed."
                .into(),
            "Without keepalive every request pays a new upstream TCP connection (one per response \
             in the connections column): handshake, accept, close, and a TIME_WAIT socket (its \
             column). Keepalive removes that per-request work and most of the drop; what remains \
             is the proxy's own per-request CPU. `keepalive N` is a cache of N idle connections per \
             worker, not a pool size: with fewer slots than requests in flight (the notes' 64 \
             against 200 connections) the connections beyond it close after use and part of the \
             churn returns, so this scenario gives it more slots than the load has connections. Retries with a tight read timeout leave the cheap \
             backend's numbers alone and cut the spiky backend's tail to about the timeout plus one \
             ordinary answer."
                .into(),
        ],
    }
}

fn origin_table(all: &[(String, Facts, String)]) -> Table {
    let rows = all
        .iter()
        .map(|(name, f, _)| {
            vec![
                name.clone(),
                count(f.non_2xx),
                origins(f),
                count(f.connect_errors),
                if f.other_errors.is_empty() {
                    "0".into()
                } else {
                    f.other_errors
                        .iter()
                        .map(|(k, n)| format!("{k}: {}", count(*n)))
                        .collect::<Vec<_>>()
                        .join(", ")
                },
            ]
        })
        .collect();
    Table {
        title: "All cases: non-2xx by origin and client-side failures".into(),
        columns: [
            "Case",
            "Non-2xx at the client",
            "By origin (nginx access log)",
            "Client connect failures",
            "Other client errors",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        notes: vec![
            "Origin: \"proxy\" when nginx answered itself (502 when the upstream connection failed, \
             504 when it timed out on every attempt, 503 when no upstream was live), \"upstream\" \
             when the backend's own status passed through. Client connect failures are the load's \
             connect errors (refused, timed out, or no address or file descriptor left), which in \
             the notes were accept queues overflowing; they never reach nginx's log."
                .into(),
        ],
    }
}

fn retry_table(all: &[(String, Facts, String)]) -> Table {
    let rows = all
        .iter()
        .filter(|(_, f, _)| f.proxied())
        .map(|(name, f, _)| {
            vec![
                name.clone(),
                count(f.requests),
                count(f.lines),
                count(f.attempts),
                count(f.retries()),
                count(f.timeouts_logged),
                count(f.backend_requests),
                format!("{:+}", f.backend_requests as i64 - f.requests as i64),
            ]
        })
        .collect();
    Table {
        title: "All cases: requests, attempts and retries".into(),
        columns: [
            "Case",
            "Client responses",
            "nginx lines",
            "Upstream attempts",
            "Retries",
            "Timeouts logged",
            "Backend responses",
            "Backend - client",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        notes: vec![
            "Every attempt is one address in $upstream_addr (\"a, b\" for a request retried once). \
             A retry is paid by the backends, not lost: the timed-out attempt is still answered, to \
             a closed connection, so backend responses exceed client responses by the retries (and \
             by the few requests in flight when the load stopped)."
                .into(),
        ],
    }
}

/// The `overhead` analysis, registered in [`super::ALL`].
pub struct Overhead;

impl super::Analysis for Overhead {
    fn name(&self) -> &'static str {
        "overhead"
    }

    fn case(&self, input: &super::CaseInput<'_>, result: &mut CaseResult) -> Vec<CheckResult> {
        case(input.scenario, input.case, result, input.records)
    }

    fn finish(&self, scenario: &Scenario, results: &mut RunResults) {
        finish(scenario, results)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setups_and_styles_come_from_the_config() {
        let src = crate::catalogue::builtin("proxy-overhead").unwrap();
        let scn = Scenario::parse(&src, true).unwrap();
        let got: Vec<(String, Setup, bool)> = scn
            .cases
            .iter()
            .map(|c| (c.name.clone(), Setup::of(c), spikes(c).is_some()))
            .collect();
        let want = [
            ("direct-cheap", Setup::Direct, false),
            ("dumb-cheap", Setup::NoKeepalive, false),
            ("keepalive-cheap", Setup::Keepalive, false),
            ("retry-cheap", Setup::Retry, false),
            ("direct-spiky", Setup::Direct, true),
            ("dumb-spiky", Setup::NoKeepalive, true),
            ("keepalive-spiky", Setup::Keepalive, true),
            ("retry-spiky", Setup::Retry, true),
        ];
        assert_eq!(got.len(), want.len());
        for ((n, s, sp), (wn, ws, wsp)) in got.iter().zip(want) {
            assert_eq!((n.as_str(), *s, *sp), (wn, ws, wsp));
        }
        let s = spikes(&scn.cases[4]).unwrap();
        assert_eq!(s.floor_us, 200_000.0);
        assert!((s.share - 0.02).abs() < 1e-12);
    }

    #[test]
    fn ratios_print_drops_with_their_inverse() {
        assert_eq!(times(20.0, 100.0), "0.20× (÷5.0)");
        assert_eq!(times(500.0, 100.0), "5.00×");
        assert_eq!(times(0.0, 100.0), "-");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(count(999), "999");
    }

    #[test]
    fn cpu_seconds_integrate_percent_over_sample_gaps() {
        let s = |t_s: f64, group: &str, cpu_pct: f64| model::ProcSample {
            t_s,
            group: group.into(),
            cpu_pct,
            rss_bytes: 0,
            procs: 1,
        };
        let r = CaseResult {
            proc_samples: vec![
                s(0.0, "nginx-0", 0.0),
                s(1.0, "nginx-0", 50.0),
                s(3.0, "nginx-0", 25.0),
                s(0.0, "backends", 0.0),
                s(2.0, "backends", 100.0),
                s(2.0, "proxybench", 150.0),
            ],
            ..Default::default()
        };
        let c = cpu(&r);
        assert!((c.nginx - 1.0).abs() < 1e-9, "{c:?}");
        assert!((c.backends - 2.0).abs() < 1e-9, "{c:?}");
        assert_eq!(c.process, 0.0, "a single sample has no interval");
    }
}
