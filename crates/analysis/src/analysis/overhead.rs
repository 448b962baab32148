//! The `overhead` analysis (scenario `proxy-overhead`): what a reverse proxy costs a closed-loop
//! client, and what upstream keepalive and retries buy back (after the "learning nginx" notes).
//!
//! Each case is one setup (direct, the proxy without upstream keepalive, with keepalive, with
//! keepalive plus retries under tight timeouts) against one backend style (cheap, or spiky: a
//! share of requests takes far longer). Requests are followed from the client to the backends
//! with exact counts: client responses, the proxy's access-log lines, upstream attempts
//! (`$upstream_addr` lists one address per attempt), backend responses and accepted connections,
//! and the TIME_WAIT sockets that connection churn leaves behind. The checks are about mechanism,
//! never raw speed: Little's law for a closed loop, one upstream connection per request without
//! keepalive and few with it, no request lost to a retry (the backends' extra answers are the
//! retries the proxy logged), and the tail (the spike shows in p99 without retries and is cut near
//! the read timeout with them). The prose explains by nginx's directives, as the notes do; for
//! another kind a finding says so.

mod checks;
mod tables;

use super::common::{
    self, check, count, lat, measured_check, or_dash, pct, ratio, times, us, Texts,
};
use super::Records;
use checks::{checks, keepalive_check};
use model::{
    CaseResult, Cell, CheckResult, Collector, ErrorKind, LoadSummary, Measured, RunResults, Table,
};
use scenario::{Case, Scenario};
use setup::proxy::NextUpstream;
use std::collections::BTreeMap;
use std::sync::LazyLock;
use tables::{comparison, finding, flow_table, origin_table, retry_table};

/// Tolerances of the checks (see `crates/analysis/data/overhead.toml`).
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Tolerances {
    /// Closed loop: measured req/s may differ from connections / mean latency by this share.
    little: f64,
    /// With upstream keepalive, at most this share of upstream connections per request.
    keepalive_share: f64,
    /// Spikes must cover at least this share of requests for p99 to be sure to land among them.
    spike_share_for_p99: f64,
    /// Share of the spiked attempts that must show up as retries.
    retried_spikes: f64,
}

/// The setups' names as the tables print them.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Labels {
    direct: String,
    no_keepalive: String,
    keepalive: String,
    retry: String,
}

/// The analysis' data file: tolerances, labels and prose.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Data {
    tolerances: Tolerances,
    labels: Labels,
    text: Texts,
}

static DATA: LazyLock<Data> =
    LazyLock::new(|| common::parse("overhead", include_str!("../../data/overhead.toml")));

/// Title of the per-case table.
const FLOW: &str = "where the requests went";

/// What a latency reads when no request was answered: there is no latency to show.
const NO_ANSWER: &str = "no request was answered";

/// A latency percentile, or [`NO_ANSWER`] when there is none.
fn olat(p: Option<u64>) -> Cell {
    p.map_or_else(|| Cell::Missing(NO_ANSWER.into()), lat)
}

/// `a / b` of two percentiles as a multiplier, `-` when either has no answer.
fn otimes(a: Option<u64>, b: Option<u64>) -> Cell {
    match (a, b) {
        (Some(a), Some(b)) => times(a as f64, b as f64),
        _ => Cell::dash(),
    }
}
/// Row label of the TIME_WAIT count in the per-case table.
const TIME_WAIT_ROW: &str = "TIME_WAIT sockets at the backends' ports (after the case)";

/// A prose template of this analysis.
fn text(key: &str) -> &'static str {
    DATA.text.get(key)
}

/// The four setups of the notes, told apart by the case's proxy config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Setup {
    /// No proxy: the load talks to a backend.
    Direct,
    /// The proxy with no upstream keepalive.
    NoKeepalive,
    /// The proxy reusing upstream connections.
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
        let l = &DATA.labels;
        match self {
            Setup::Direct => &l.direct,
            Setup::NoKeepalive => &l.no_keepalive,
            Setup::Keepalive => &l.keepalive,
            Setup::Retry => &l.retry,
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
    /// Every replica of the proxy under test.
    proxy: f64,
    backends: f64,
    /// The whole proxybench process (load generator, backends, collectors).
    process: f64,
}

/// CPU seconds of the case's process groups; the proxy's are the groups of the replicas of kind
/// `kind` (`KIND-0`, `KIND-1`...).
fn cpu(r: &CaseResult, kind: &str) -> Cpu {
    let replica = format!("{kind}-");
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
        if g.starts_with(&replica) {
            out.proxy += secs;
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
    /// Latency percentiles of the answered requests; `None` when none was answered (no
    /// latency is no latency, never 0 µs).
    p50: Option<u64>,
    p90: Option<u64>,
    p99: Option<u64>,
    max: u64,
    non_2xx: u64,
    errors: u64,
    connect_errors: u64,
    other_errors: BTreeMap<&'static str, u64>,
    /// What the proxy's logs counted, when they were read.
    log: Measured<LogFacts>,
    /// The backends' final counters, when they were read.
    counters: Measured<Counters>,
    cpu: Cpu,
}

/// What the proxy's logs counted in one case.
#[derive(Debug, Clone, Default)]
struct LogFacts {
    /// Non-2xx answers by who produced them (the proxy or a backend).
    status_origin: BTreeMap<String, u64>,
    /// Access-log lines the proxy wrote (lines its driver could parse).
    lines: u64,
    /// Lines whose request reached an upstream.
    lines_up: u64,
    /// Upstream attempts: one per address in `$upstream_addr`.
    attempts: u64,
    /// Upstream timeouts in the error log.
    timeouts_logged: u64,
}

impl LogFacts {
    /// Attempts beyond the first of each request.
    fn retries(&self) -> u64 {
        self.attempts.saturating_sub(self.lines_up)
    }
}

/// The backends' final counters summed over a case.
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    /// Responses the backends completed.
    requests: u64,
    /// Connections the backends accepted.
    connections: u64,
}

impl Counters {
    /// Upstream (backend) connections accepted per backend response.
    fn conns_per_request(&self) -> f64 {
        ratio(self.connections, self.requests)
    }
}

impl Facts {
    fn new(case: &Case, r: &CaseResult, kind: &str) -> Option<Facts> {
        let l: &LoadSummary = r.loads.first()?;
        let p = |q: f64| l.latency.percentile(q);
        let connect = [
            ErrorKind::ConnectRefused,
            ErrorKind::ConnectTimeout,
            ErrorKind::ConnectOther,
        ];
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
            log: r.measured(Collector::Logs, |r| {
                let logs = &r.logs;
                let lines: u64 = logs.access_status.values().sum();
                let no_upstream = logs.upstream_addr.get("-").copied().unwrap_or(0);
                LogFacts {
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
                }
            }),
            counters: r.measured(Collector::BackendCounters, |r| Counters {
                requests: r.backends.iter().map(|b| b.requests).sum(),
                connections: r.backends.iter().map(|b| b.connections).sum(),
            }),
            cpu: cpu(r, kind),
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

    /// Attempts beyond the first of each request, from the proxy's logs.
    fn retries(&self) -> Measured<u64> {
        self.log.as_ref().map(LogFacts::retries)
    }

    /// Upstream (backend) connections accepted per backend response.
    fn conns_per_request(&self) -> Measured<f64> {
        self.counters.clone().map(|c| c.conns_per_request())
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

/// The non-2xx answers by who produced them, as one cell.
fn origins(f: &Facts) -> Cell {
    if !f.proxied() {
        return Cell::Missing("no proxy".into());
    }
    Cell::measured(&f.log, |l| {
        if l.status_origin.is_empty() {
            return Cell::Missing("none".into());
        }
        Cell::list(
            l.status_origin
                .iter()
                .map(|(k, n)| Cell::labelled(&format!("{k}:"), count(*n))),
            ", ",
        )
    })
}

/// `template` filled from the run.
fn fill(key: &str, args: &[(&str, &dyn std::fmt::Display)]) -> String {
    DATA.text.fill(key, args)
}

/// Runs the analysis on one case: the request-flow table, its explanation, and the checks.
fn case(
    _scn: &Scenario,
    case: &Case,
    result: &mut CaseResult,
    _records: &Records,
    env: &model::Env,
) -> Vec<CheckResult> {
    let kind = common::replica_kind(env, Some(case));
    let Some(f) = Facts::new(case, result, &kind) else {
        result.findings.push(text("no_load").into());
        return Vec::new();
    };
    let tw = result.time_wait.map(|t| (t.backend_side, t.peer_side));
    result.tables.push(flow_table(&case.name, &f, tw));
    result.findings.push(finding(&f));
    if f.proxied() && !common::model_applies(env) {
        result.findings.push(fill(
            "other_kind",
            &[("kind", &kind), ("model", &common::MODELLED_KIND)],
        ));
    }
    let used: &[Collector] = if f.proxied() {
        &[Collector::Logs, Collector::BackendCounters]
    } else {
        &[Collector::BackendCounters]
    };
    result.findings.extend(common::not_sampled(result, used));
    checks(&case.name, &f, super::coarse_clock_us(env))
}

/// One case as the cross-case tables read it: its facts and the typed TIME_WAIT cell of its
/// flow table (read at the end of the case, so it cannot be recomputed here).
struct Summary {
    name: String,
    f: Facts,
    time_wait: Cell,
}

/// Adds the cross-case tables (setups side by side with ratios against direct; non-2xx by
/// origin; retries) to the last case, the run's findings, and the keepalive comparison checks.
fn finish(scn: &Scenario, results: &mut RunResults) {
    let kind = common::replica_kind(&results.env, scn.cases.first());
    let mut all: Vec<Summary> = Vec::new();
    for c in &results.cases {
        let Some(spec) = scn.cases.iter().find(|s| s.name == c.name) else {
            continue;
        };
        if let Some(f) = Facts::new(spec, c, &kind) {
            let time_wait = c
                .tables
                .iter()
                .find(|t| t.title.ends_with(FLOW))
                .and_then(|t| t.row(TIME_WAIT_ROW))
                .and_then(|r| r.get(1).cloned());
            all.push(Summary {
                name: c.name.clone(),
                f,
                time_wait: or_dash(time_wait),
            });
        }
    }
    if all.is_empty() {
        return;
    }
    all.sort_by(|a, b| (a.f.style(), a.f.setup).cmp(&(b.f.style(), b.f.setup)));
    let tables = vec![comparison(&all), origin_table(&all), retry_table(&all)];
    let mut findings = Vec::new();
    let mut checks = Vec::new();
    for style in ["cheap", "spiky"] {
        let of = |s: Setup| {
            all.iter()
                .find(|x| x.f.setup == s && x.f.style() == style)
                .map(|x| &x.f)
        };
        if let (Some(d), Some(nk)) = (of(Setup::Direct), of(Setup::NoKeepalive)) {
            let mut s = fill(
                "finding_ratios",
                &[
                    ("style", &style),
                    ("rps", &times(nk.rps, d.rps)),
                    ("p50", &otimes(nk.p50, d.p50)),
                ],
            );
            for (setup, what) in [
                (Setup::Keepalive, "with_keepalive"),
                (Setup::Retry, "with_retries"),
            ] {
                if let Some(k) = of(setup) {
                    s.push_str(&fill(
                        "finding_ratios_more",
                        &[
                            ("what", &text(what)),
                            ("rps", &times(k.rps, d.rps)),
                            ("p50", &otimes(k.p50, d.p50)),
                        ],
                    ));
                }
            }
            s.push('.');
            findings.push(s);
        }
        if let Some(nk) = of(Setup::NoKeepalive) {
            for setup in [Setup::Keepalive, Setup::Retry] {
                if let Some(k) = of(setup) {
                    checks.push(keepalive_check(style, setup, nk, k));
                }
            }
        }
        if style == "spiky" {
            let p99 = |s: Setup| or_dash(of(s).map(|f| olat(f.p99)));
            if let Some(r) = of(Setup::Retry) {
                findings.push(fill(
                    "finding_spiky_p99",
                    &[
                        ("direct", &p99(Setup::Direct)),
                        ("keepalive", &p99(Setup::Keepalive)),
                        ("read_timeout", &or_dash(r.read_timeout_us.map(us))),
                        ("retry", &olat(r.p99)),
                        ("retries", &Cell::measured(&r.retries(), |n| count(*n))),
                    ],
                ));
            }
        }
    }
    if let Some(last) = results.cases.last_mut() {
        last.tables.extend(tables);
    }
    findings.push(text("finding_where").into());
    results.findings.extend(findings);
    results.checks.extend(checks);
}

/// The `overhead` analysis, registered in [`super::ALL`].
pub struct Overhead;

impl super::Analysis for Overhead {
    fn name(&self) -> &'static str {
        "overhead"
    }

    fn case(&self, input: &super::CaseInput<'_>, result: &mut CaseResult) -> Vec<CheckResult> {
        case(input.scenario, input.case, result, input.records, input.env)
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
        let src = scenario::catalogue::builtin("proxy-overhead").unwrap();
        let scn = Scenario::parse_with(&src, true, &crate::analysis::parse_options()).unwrap();
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

    /// A retry case whose load got no answer has no latency: the tail-cut check fails as
    /// nothing answered, never "p99 0µs" under its bound, and the tables show no latency.
    #[test]
    fn with_nothing_answered_no_latency_check_passes() {
        let src = scenario::catalogue::builtin("proxy-overhead").unwrap();
        let scn = Scenario::parse_with(&src, true, &crate::analysis::parse_options()).unwrap();
        let spec = scn.cases.iter().find(|c| c.name == "retry-spiky").unwrap();
        let load = LoadSummary {
            schema: model::SCHEMA_VERSION,
            name: spec.loads[0].name.clone(),
            url: spec.loads[0].url.clone(),
            method: "GET".into(),
            mode: model::LoadMode::Closed,
            threads: 1,
            connections: 10,
            start_s: 0.0,
            planned_s: Some(2.0),
            elapsed_s: 2.0,
            timeout_ms: 2000,
            requests: 0,
            bytes_read: 0,
            bytes_written: 0,
            status: BTreeMap::new(),
            errors: BTreeMap::from([(model::ErrorKind::ConnectRefused, 40)]),
            error_messages: BTreeMap::new(),
            connects: 0,
            retried: 0,
            latency: model::Latency::default(),
            latency_uncorrected: None,
            req_per_sec: model::RateStats::default(),
            schedule: None,
            timeline: vec![],
            http2: None,
        };
        let r = CaseResult {
            name: spec.name.clone(),
            loads: vec![load],
            ..Default::default()
        };
        let f = Facts::new(spec, &r, "nginx").unwrap();
        assert_eq!((f.p50, f.p90, f.p99), (None, None, None));
        let cs = checks(&spec.name, &f, 4000);
        let tail = cs
            .iter()
            .find(|c| c.name.starts_with("retries cut the tail"))
            .unwrap_or_else(|| panic!("{cs:#?}"));
        assert!(!tail.pass, "{tail:?}");
        assert_eq!(tail.actual, NO_ANSWER);
        assert_eq!(olat(f.p99).to_string(), "no request was answered");
    }

    #[test]
    fn the_data_file_parses_and_has_every_text_the_code_uses() {
        assert!(DATA.tolerances.little > 0.0);
        common::assert_keys("overhead", &DATA.text, &[include_str!("overhead.rs")]);
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
                s(0.0, "caddy-0", 0.0),
                s(1.0, "caddy-0", 50.0),
                s(3.0, "caddy-0", 25.0),
                s(0.0, "nginx-0", 0.0),
                s(3.0, "nginx-0", 100.0),
                s(0.0, "backends", 0.0),
                s(2.0, "backends", 100.0),
                s(2.0, "proxybench", 150.0),
            ],
            ..Default::default()
        };
        let c = cpu(&r, "caddy");
        assert!((c.proxy - 1.0).abs() < 1e-9, "{c:?}");
        assert!((c.backends - 2.0).abs() < 1e-9, "{c:?}");
        assert_eq!(c.process, 0.0, "a single sample has no interval");
    }
}
