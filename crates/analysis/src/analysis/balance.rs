//! The `balance` analysis (scenario `load-balancing`): how the proxy's balancing methods (the
//! model's `lb`: round robin, least_conn, random two least_conn, as nginx names them) split
//! traffic when backends differ.
//!
//! Part one puts a fast and a slow backend behind one upstream. Round robin alternates, so it
//! splits 50/50 whatever the latency. least_conn sends each request to the peer with fewer
//! requests in flight; in a closed loop of `c` connections that keeps the slow peer's count at
//! most (c + 1) / 2, so by Little's law the slow peer serves at most (c + 1) / 2 / latency
//! requests per second. `random two least_conn` draws two distinct peers and takes the one with
//! fewer in flight: with two backends it compares both every time, as least_conn does, and
//! breaks ties by the draw instead of by round robin.
//!
//! Part two is one service with different costs: identical backends, a free path and a
//! CPU-heavy one, loaded at once. No method can tell a heavy request from a cheap one; shares
//! stay even and the cheap path's tail is the time spent waiting behind heavy requests.
//!
//! Shares come from the backend counters, and from the proxy's access log (the upstream address
//! of each attempt) for comparison.

use super::common::{self, check, count, join, lat, or_dash, pct, ratio, us, Texts};
use super::Records;
use model::{
    CaseResult, Cell, CheckResult, Collector, Measured, RequestRecord, RunResults, Series, Table,
};
use scenario::{Action, Case, LoadSpec, Scenario};
use setup::profile::Profile;
use setup::proxy::Lb;
use std::collections::BTreeMap;
use std::fmt::Display;
use std::sync::LazyLock;

/// Tolerances of the checks (see `crates/analysis/data/balance.toml`).
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Tolerances {
    /// Round robin's split may deviate from even by this share.
    rr_spread: f64,
    /// least_conn and random two over identical backends: largest deviation from even.
    even_spread: f64,
    /// Slack on the least_conn bound for the slow backend's rate.
    bound_slack: f64,
    /// least_conn must send at most this share of round robin's share to the slow backend.
    clearly_less: f64,
    /// A backend counts as slow when its latency is this many times the fastest one's.
    slow_factor: f64,
}

/// The analysis' data file: tolerances and prose.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Data {
    tolerances: Tolerances,
    text: Texts,
}

static DATA: LazyLock<Data> =
    LazyLock::new(|| common::parse("balance", include_str!("../../data/balance.toml")));

/// A prose template of this analysis.
fn text(key: &str) -> &'static str {
    DATA.text.get(key)
}

/// A prose template filled from the run.
fn fill(key: &str, args: &[(&str, &dyn Display)]) -> String {
    DATA.text.fill(key, args)
}

/// Title suffix of the per-case share table.
const SHARES: &str = "per-backend share";
/// Title suffix of the per-case latency-per-path table (different costs).
const PATHS: &str = "latency per path";
/// Row label of the cheap-path wait share in the per-path table.
const WAITED: &str = "cheap requests slower than half a heavy request";

/// What a case compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    /// Backends with different latencies.
    FastSlow,
    /// Identical backends, paths with different CPU costs.
    Costs,
    /// Anything else: shares only.
    Other,
}

/// One backend as the case ran it.
#[derive(Debug, Clone)]
struct Instance {
    name: String,
    profile: Profile,
    /// Mean base latency of the profile, in microseconds.
    latency_us: f64,
    requests: u64,
    /// Upstream attempts the proxy logged for it (`$upstream_addr`), when its logs were read.
    attempts: Measured<u64>,
    connections: u64,
}

/// The analysis' view of one case.
#[derive(Debug, Clone)]
struct Facts {
    part: Part,
    method: String,
    instances: Vec<Instance>,
    /// Closed-loop connections of the first load.
    connections: u32,
    /// Length of the longest load, in seconds.
    elapsed_s: f64,
    /// Index of the slowest instance (fast/slow part).
    slow: Option<usize>,
}

impl Facts {
    fn new(case: &Case, r: &CaseResult) -> Facts {
        let profiles = profiles(case);
        let attempts = r.measured(Collector::Logs, |r| &r.logs.upstream_addr);
        let instances: Vec<Instance> = r
            .backends
            .iter()
            .map(|b| {
                let profile = profiles.get(&b.name).cloned().unwrap_or_default();
                Instance {
                    latency_us: profile.base.latency.map_or(0.0, |d| d.mean() / 1e3),
                    profile,
                    name: b.name.clone(),
                    requests: b.requests,
                    attempts: attempts
                        .as_ref()
                        .map(|a| a.get(&b.addr).copied().unwrap_or(0)),
                    connections: b.connections,
                }
            })
            .collect();
        let fastest = instances
            .iter()
            .map(|i| i.latency_us)
            .fold(f64::INFINITY, f64::min);
        let slow = instances
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.latency_us.total_cmp(&b.1.latency_us))
            .filter(|(_, i)| {
                i.latency_us > 0.0 && i.latency_us >= DATA.tolerances.slow_factor * fastest.max(1.0)
            })
            .map(|(k, _)| k);
        let costly = instances
            .iter()
            .any(|i| i.profile.paths.iter().any(|p| p.behaviour.cpu.is_some()));
        let part = if slow.is_some() {
            Part::FastSlow
        } else if costly && case.loads.len() > 1 {
            Part::Costs
        } else {
            Part::Other
        };
        Facts {
            part,
            method: method(case),
            instances,
            connections: r.loads.first().map_or(0, |l| l.connections),
            elapsed_s: r.loads.iter().map(|l| l.elapsed_s).fold(0.0, f64::max),
            slow,
        }
    }

    fn total(&self) -> u64 {
        self.instances.iter().map(|i| i.requests).sum()
    }

    fn total_attempts(&self) -> Measured<u64> {
        common::all_measured(self.instances.iter().map(|i| i.attempts.clone()))
            .map(|v| v.iter().sum())
    }

    /// One backend's share of the upstream attempts the proxy logged.
    fn attempt_share(&self, i: &Instance) -> Cell {
        let both = i.attempts.clone().zip(self.total_attempts());
        Cell::measured(&both, |(a, t)| pct(ratio(*a, *t)))
    }

    fn share(&self, i: &Instance) -> f64 {
        ratio(i.requests, self.total())
    }

    /// Largest relative deviation from an even split of the backend counters.
    fn spread(&self) -> f64 {
        let n = self.instances.len() as f64;
        let total = self.total() as f64;
        if n == 0.0 || total == 0.0 {
            return 0.0;
        }
        let even = total / n;
        self.instances
            .iter()
            .map(|i| (i.requests as f64 - even).abs() / even)
            .fold(0.0, f64::max)
    }

    fn round_robin(&self) -> bool {
        self.method == "round robin"
    }

    /// Compares in-flight counts (least_conn, random two least_conn).
    fn counts_in_flight(&self) -> bool {
        self.method.contains("least_conn")
    }

    /// least_conn's bound on the slow backend's rate: at most (c + 1) / 2 of the closed loop's
    /// requests are in flight on it, each for at least its latency.
    fn slow_rate_bound(&self) -> Option<f64> {
        let s = &self.instances[self.slow?];
        (s.latency_us > 0.0)
            .then(|| (f64::from(self.connections) + 1.0) / 2.0 / (s.latency_us / 1e6))
    }

    fn slow_rate(&self) -> Option<f64> {
        let s = &self.instances[self.slow?];
        (self.elapsed_s > 0.0).then(|| s.requests as f64 / self.elapsed_s)
    }
}

/// Each instance's profile when the loads start: its group's, then any `set_profile` fired by
/// then (actions at the case's start set up the experiment).
fn profiles(case: &Case) -> BTreeMap<String, Profile> {
    let mut out = BTreeMap::new();
    let mut groups = BTreeMap::new();
    for g in &case.backends {
        groups.insert(g.name.clone(), g.profile.clone());
        for i in 0..g.count {
            out.insert(format!("{}-{i}", g.name), g.profile.clone());
        }
    }
    let start = case
        .loads
        .iter()
        .map(|l| l.start.0)
        .min()
        .unwrap_or_default();
    for s in case.steps.iter().filter(|s| s.at <= start) {
        if let Action::SetProfile {
            group,
            backend,
            profile,
        } = &s.action
        {
            for (name, p) in out.iter_mut() {
                let in_group = group
                    .as_ref()
                    .is_some_and(|g| name.rsplit_once('-').is_some_and(|(n, _)| n == g));
                if in_group || backend.as_deref() == Some(name.as_str()) {
                    *p = profile.clone();
                }
            }
        }
    }
    out
}

fn method(case: &Case) -> String {
    let Some(u) = case.proxy.as_ref().and_then(|p| p.upstreams.first()) else {
        return "no proxy".into();
    };
    match &u.lb {
        Lb::RoundRobin => "round robin".into(),
        Lb::LeastConn => "least_conn".into(),
        Lb::RandomTwoLeastConn => "random two least_conn".into(),
        Lb::Random => "random".into(),
        Lb::IpHash => "ip_hash".into(),
        Lb::Hash { key, consistent } => {
            format!("hash {key}{}", if *consistent { " consistent" } else { "" })
        }
    }
}

/// The path (and query) a load's url asks for.
fn path_of(url: &str) -> String {
    model::url::Url::parse(url).map_or_else(|_| "/".to_string(), |u| u.path)
}

/// CPU cost of a load's path on the first instance, in microseconds.
fn cpu_us(f: &Facts, l: &LoadSpec) -> f64 {
    f.instances
        .first()
        .and_then(|i| i.profile.behaviour_for(&path_of(&l.url)).cpu)
        .map_or(0.0, |d| d.mean() / 1e3)
}

/// Runs the analysis on one case: shares, latency per path, a per-second series and checks.
fn case(
    _scn: &Scenario,
    case: &Case,
    result: &mut CaseResult,
    records: &Records,
) -> Vec<CheckResult> {
    let f = Facts::new(case, result);
    result.findings.extend(common::not_sampled(
        result,
        &[Collector::BackendCounters, Collector::Logs],
    ));
    // The shares are the backends' own counts: without them every check of the case is not
    // measurable (a partial count would show a false split).
    if let Some(a) = result.incomplete(Collector::BackendCounters) {
        return vec![common::unmeasured(
            &case.name,
            text("check_shares"),
            text("check_shares_expected"),
            &a,
        )];
    }
    if f.total() == 0 {
        result.findings.push(text("no_requests").into());
        return Vec::new();
    }
    result.tables.push(share_table(&case.name, &f));
    if f.part == Part::FastSlow {
        if let Some(s) = slow_series(&f, case, records) {
            result.series.push(s);
        }
    }
    if f.part == Part::Costs {
        result
            .tables
            .push(path_table(&case.name, &f, case, result, records));
    }
    result
        .findings
        .push(format!("{}: {}", f.method, shares(&f)));
    checks(&case.name, &f)
}

/// Each backend's share, `app-0 50.00%, app-1 50.00%`.
fn shares(f: &Facts) -> String {
    join(
        f.instances
            .iter()
            .map(|i| format!("{} {}", i.name, pct(f.share(i)))),
        ", ",
    )
}

fn share_table(case: &str, f: &Facts) -> Table {
    let mut t = Table::new(
        format!("{case}: {SHARES} ({})", f.method),
        &[
            "Backend",
            "Profile",
            "Responses (backend counters)",
            "Share",
            "Attempts ($upstream_addr)",
            "Share",
            "Connections",
        ],
    );
    for i in &f.instances {
        t.rows.push(vec![
            Cell::text(&i.name),
            Cell::text(i.profile.to_string()),
            count(i.requests),
            pct(f.share(i)),
            Cell::measured(&i.attempts, |a| count(*a)),
            f.attempt_share(i),
            count(i.connections),
        ]);
    }
    if f.round_robin() {
        t.notes.push(text("round_robin").into());
    }
    if f.method == "least_conn" {
        t.notes.push(text("least_conn").into());
    }
    if f.method == "random two least_conn" {
        t.notes.push(text("random_two").into());
    }
    if let (Part::FastSlow, Some(bound), Some(rate)) = (f.part, f.slow_rate_bound(), f.slow_rate())
    {
        let s = &f.instances[f.slow.unwrap_or(0)];
        if f.counts_in_flight() {
            t.notes.push(fill(
                "little_bound",
                &[
                    ("connections", &f.connections),
                    ("latency", &us(s.latency_us)),
                    ("bound", &Cell::num(bound, 0)),
                    ("rate", &Cell::num(rate, 0)),
                    ("share", &pct(f.share(s))),
                ],
            ));
        } else if f.round_robin() {
            t.notes.push(fill(
                "rr_pace",
                &[
                    ("latency", &us(s.latency_us)),
                    ("backend", &s.name),
                    ("rate", &Cell::num(rate, 0)),
                    ("share", &pct(f.share(s))),
                ],
            ));
        }
    }
    t
}

/// The share of each second's responses that took at least the slow backend's latency: what
/// the client sees of the split.
fn slow_series(f: &Facts, case: &Case, records: &Records) -> Option<Series> {
    let s = &f.instances[f.slow?];
    let recs: &Vec<RequestRecord> = records.get(&case.loads.first()?.name)?;
    let floor = (s.latency_us * 0.9) as u64;
    let mut bins: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for r in recs.iter().filter(|r| r.error.is_none()) {
        let b = bins.entry(r.t_us / 1_000_000).or_default();
        b.0 += 1;
        if u64::from(r.latency_us) >= floor {
            b.1 += 1;
        }
    }
    let points = bins
        .into_iter()
        .filter(|(_, (n, _))| *n > 0)
        .map(|(t, (n, slow))| (t as f64, 100.0 * slow as f64 / n as f64))
        .collect();
    Some(Series {
        name: format!(
            "responses taking the slow backend's {} or more",
            units::fmt_us(s.latency_us)
        ),
        unit: "%".into(),
        points,
        chart: None,
        ..Default::default()
    })
}

fn path_table(
    case_name: &str,
    f: &Facts,
    case: &Case,
    result: &CaseResult,
    records: &Records,
) -> Table {
    let mut t = Table::new(
        format!("{case_name}: {PATHS} ({})", f.method),
        &[
            "Path", "Load", "CPU cost", "Req/s", "p50", "p90", "p99", "Max",
        ],
    );
    let heavy = case
        .loads
        .iter()
        .map(|l| (l, cpu_us(f, l)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    for l in &case.loads {
        let Some(s) = result.loads.iter().find(|x| x.name == l.name) else {
            continue;
        };
        let p = |q: f64| lat(s.latency.percentile(q).unwrap_or(0));
        t.rows.push(vec![
            Cell::text(path_of(&l.url)),
            Cell::text(&l.name),
            us(cpu_us(f, l)),
            Cell::num(s.req_per_sec_total(), 1),
            p(50.0),
            p(90.0),
            p(99.0),
            lat(s.latency.max_us),
        ]);
    }
    if let Some((h, cost)) = heavy.filter(|(_, c)| *c > 0.0) {
        let hs = result.loads.iter().find(|x| x.name == h.name);
        let rho = hs.map_or(0.0, |s| s.req_per_sec_total()) * cost / 1e6;
        let cheap = case.loads.iter().find(|l| cpu_us(f, l) == 0.0);
        let waited = cheap.and_then(|c| records.get(&c.name)).map(|recs| {
            let ok: Vec<&RequestRecord> = recs.iter().filter(|r| r.error.is_none()).collect();
            let slow = ok
                .iter()
                .filter(|r| f64::from(r.latency_us) >= cost / 2.0)
                .count() as u64;
            ratio(slow, ok.len() as u64)
        });
        let blank = || Cell::text("");
        t.rows.push(vec![
            Cell::text(WAITED),
            blank(),
            us(cost / 2.0),
            blank(),
            Cell::labelled("predicted >=", pct(rho / 2.0)),
            Cell::labelled("measured", or_dash(waited.map(pct))),
            blank(),
            blank(),
        ]);
        t.notes.push(fill(
            "busy_thread",
            &[
                ("path", &path_of(&h.url)),
                ("cost", &us(cost)),
                (
                    "rate",
                    &Cell::num(hs.map_or(0.0, |s| s.req_per_sec_total()), 1),
                ),
                ("busy", &pct(rho)),
                ("half", &pct(rho / 2.0)),
                ("waited", &or_dash(waited.map(pct))),
            ],
        ));
        if waited.is_some_and(|w| w > rho / 2.0) {
            t.notes.push(fill(
                "more_wait",
                &[
                    (
                        "p50",
                        &or_dash(hs.and_then(|s| s.latency.percentile(50.0)).map(lat)),
                    ),
                    ("cost", &us(cost)),
                ],
            ));
        }
    }
    let late: Vec<String> = result
        .loads
        .iter()
        .filter_map(|l| l.schedule.as_ref().map(|s| (l, s)))
        .filter(|(_, s)| s.late > 0)
        .map(|(l, s)| {
            fill(
                "late_one",
                &[
                    ("load", &l.name),
                    ("late", &count(s.late)),
                    ("sent", &count(s.sent)),
                    ("worst", &us(s.late_max_us as f64)),
                ],
            )
        })
        .collect();
    if !late.is_empty() {
        t.notes.push(fill("late", &[("late", &late.join("; "))]));
    }
    t.notes.push(text("no_method_knows").into());
    t
}

fn checks(case: &str, f: &Facts) -> Vec<CheckResult> {
    let tol = &DATA.tolerances;
    let even = |limit: f64| fill("within_even", &[("spread", &pct(limit))]);
    let deviation = || fill("largest_deviation", &[("spread", &pct(f.spread()))]);
    let mut out = Vec::new();
    if f.round_robin() {
        out.push(check(
            case,
            text("check_rr_even"),
            even(tol.rr_spread),
            deviation(),
            f.spread() <= tol.rr_spread,
        ));
    }
    if f.part == Part::FastSlow && f.counts_in_flight() {
        if let (Some(bound), Some(rate)) = (f.slow_rate_bound(), f.slow_rate()) {
            out.push(check(
                case,
                fill("check_half_connections", &[("method", &f.method)]),
                fill(
                    "check_half_connections_expected",
                    &[("bound", &Cell::num(bound * tol.bound_slack, 0))],
                ),
                Cell::num_unit(rate, 0, " req/s"),
                rate <= bound * tol.bound_slack,
            ));
        }
    }
    if f.part == Part::Costs && f.counts_in_flight() {
        out.push(check(
            case,
            fill("check_even", &[("method", &f.method)]),
            even(tol.even_spread),
            deviation(),
            f.spread() <= tol.even_spread,
        ));
    }
    out
}

/// One case of a part, as the cross-case tables read it: its result, its facts, and (for the
/// different-costs part) the typed wait-share cells of its per-path table, which came from
/// the per-request records.
struct Summary {
    c: CaseResult,
    f: Facts,
    waited: Option<(Cell, Cell)>,
}

impl Summary {
    fn new(c: &CaseResult, f: Facts) -> Summary {
        let waited = c
            .tables
            .iter()
            .find(|t| t.title.contains(PATHS))
            .and_then(|t| t.row(WAITED))
            .and_then(|r| Some((r.get(4)?.clone(), r.get(5)?.clone())));
        Summary {
            c: c.clone(),
            f,
            waited,
        }
    }
}

/// Adds the cross-case tables (each part's methods side by side) to the last case, the run's
/// findings, and the check that in-flight-counting methods move traffic off the slow backend.
fn finish(scn: &Scenario, results: &mut RunResults) {
    let mut fast_slow = Vec::new();
    let mut costs = Vec::new();
    // Shares are the backends' counts: a case without them has nothing to compare.
    let mut unshared = Vec::new();
    for c in &results.cases {
        let Some(spec) = scn.cases.iter().find(|s| s.name == c.name) else {
            continue;
        };
        // A partial count would show a false split: only whole counters are compared.
        if c.incomplete(Collector::BackendCounters).is_some() {
            unshared.push(c.name.as_str());
            continue;
        }
        let f = Facts::new(spec, c);
        match f.part {
            Part::FastSlow => fast_slow.push(Summary::new(c, f)),
            Part::Costs => costs.push(Summary::new(c, f)),
            Part::Other => {}
        }
    }
    if !unshared.is_empty() {
        results
            .findings
            .push(fill("unshared", &[("cases", &join(unshared.iter(), ", "))]));
    }
    let mut tables = Vec::new();
    if !fast_slow.is_empty() {
        tables.push(fast_slow_table(&fast_slow));
        let rr = fast_slow.iter().find(|x| x.f.round_robin());
        let slow_share = |f: &Facts| f.slow.map(|s| f.share(&f.instances[s]));
        let clearly_less = DATA.tolerances.clearly_less;
        if let Some(rr_share) = rr.and_then(|x| slow_share(&x.f)) {
            for x in fast_slow.iter().filter(|x| x.f.counts_in_flight()) {
                if let Some(s) = slow_share(&x.f) {
                    results.checks.push(check(
                        &x.c.name,
                        fill("check_clearly_less", &[("method", &x.f.method)]),
                        fill(
                            "check_clearly_less_expected",
                            &[
                                ("bound", &pct(clearly_less * rr_share)),
                                ("share", &pct(rr_share)),
                            ],
                        ),
                        pct(s),
                        s <= clearly_less * rr_share,
                    ));
                }
            }
        }
        let p = |c: &CaseResult, q: f64| {
            or_dash(
                c.loads
                    .first()
                    .and_then(|l| l.latency.percentile(q))
                    .map(lat),
            )
        };
        let each = fast_slow.iter().map(|x| {
            fill(
                "finding_fast_slow_one",
                &[
                    ("share", &or_dash(slow_share(&x.f).map(pct))),
                    ("method", &x.f.method),
                    ("p50", &p(&x.c, 50.0)),
                    ("p99", &p(&x.c, 99.0)),
                ],
            )
        });
        results
            .findings
            .push(fill("finding_fast_slow", &[("shares", &join(each, ", "))]));
    }
    if !costs.is_empty() {
        tables.push(costs_table(&costs));
        let spreads = costs
            .iter()
            .map(|x| format!("{} under {}", pct(x.f.spread()), x.f.method));
        results
            .findings
            .push(fill("finding_costs", &[("spreads", &join(spreads, ", "))]));
    }
    if tables.is_empty() {
        return;
    }
    if let Some(last) = results.cases.last_mut() {
        last.tables.extend(tables);
    }
    results.findings.push(text("finding_where").into());
}

fn fast_slow_table(cases: &[Summary]) -> Table {
    let mut t = Table::new(
        "Fast and slow backend: methods side by side",
        &[
            "Method",
            "Case",
            "Req/s",
            "p50",
            "p90",
            "p99",
            "Slow share (backend counters)",
            "Slow share ($upstream_addr)",
            "Bound on the slow backend",
            "Slow backend served",
        ],
    );
    for Summary { c, f, .. } in cases {
        let l = c.loads.first();
        let p = |q: f64| or_dash(l.and_then(|l| l.latency.percentile(q)).map(lat));
        let slow = f.slow.map(|s| &f.instances[s]);
        let rate = |r: f64| Cell::num_unit(r, 0, " req/s");
        t.rows.push(vec![
            Cell::text(&f.method),
            Cell::text(&c.name),
            or_dash(l.map(|l| Cell::num(l.req_per_sec_total(), 0))),
            p(50.0),
            p(90.0),
            p(99.0),
            or_dash(slow.map(|s| pct(f.share(s)))),
            or_dash(slow.map(|s| f.attempt_share(s))),
            if f.counts_in_flight() {
                or_dash(f.slow_rate_bound().map(rate))
            } else {
                Cell::Missing("none".into())
            },
            or_dash(f.slow_rate().map(rate)),
        ]);
    }
    t.notes = vec![text("fast_slow_note").into()];
    t
}

fn costs_table(cases: &[Summary]) -> Table {
    let loads = cases.first().map_or(0, |x| x.c.loads.len());
    let mut columns = vec!["Method".to_string(), "Case".to_string()];
    for i in 0..loads {
        let name = cases
            .first()
            .and_then(|x| x.c.loads.get(i))
            .map_or(String::new(), |l| l.name.clone());
        columns.push(format!("{name} p50 / p90 / p99"));
    }
    columns.push("Backend shares".into());
    columns.push(WAITED.into());
    let mut t = Table {
        title: "One service, different costs: methods side by side".into(),
        columns,
        ..Table::default()
    };
    for Summary { c, f, waited } in cases {
        let mut row = vec![Cell::text(&f.method), Cell::text(&c.name)];
        for l in &c.loads {
            let p = |q: f64| or_dash(l.latency.percentile(q).map(lat));
            row.push(Cell::list([p(50.0), p(90.0), p(99.0)], " / "));
        }
        row.push(Cell::text(shares(f)));
        row.push(match waited {
            Some((predicted, measured)) => Cell::list([predicted.clone(), measured.clone()], ", "),
            None => Cell::dash(),
        });
        t.rows.push(row);
    }
    t.notes = vec![text("costs_note").into()];
    t
}

/// The `balance` analysis, registered in [`super::ALL`].
pub struct Balance;

impl super::Analysis for Balance {
    fn name(&self) -> &'static str {
        "balance"
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
    use model::BackendCounters;

    fn scenario() -> Scenario {
        let src = scenario::catalogue::builtin("load-balancing").unwrap();
        Scenario::parse_with(&src, true, &crate::analysis::parse_options()).unwrap()
    }

    fn result(requests: [u64; 2]) -> CaseResult {
        CaseResult {
            backends: requests
                .iter()
                .enumerate()
                .map(|(i, &n)| BackendCounters {
                    name: format!("app-{i}"),
                    addr: format!("127.0.0.1:{}", 40000 + i),
                    requests: n,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn the_data_file_parses_and_has_every_text_the_code_uses() {
        assert!(DATA.tolerances.rr_spread > 0.0);
        common::assert_keys("balance", &DATA.text, &[include_str!("balance.rs")]);
    }

    #[test]
    fn the_starting_set_profile_makes_the_slow_backend() {
        let scn = scenario();
        let case = scn
            .cases
            .iter()
            .find(|c| c.name == "fast-slow-least-conn")
            .unwrap();
        let p = profiles(case);
        assert_eq!(p["app-0"].to_string(), "latency=1ms");
        assert_eq!(p["app-1"].to_string(), "latency=20ms");
        let f = Facts::new(case, &result([930, 70]));
        assert_eq!(f.part, Part::FastSlow);
        assert_eq!(f.method, "least_conn");
        assert_eq!(f.slow, Some(1));
        assert!(f.counts_in_flight() && !f.round_robin());
        assert!((f.share(&f.instances[1]) - 0.07).abs() < 1e-12);
    }

    #[test]
    fn least_conn_bound_is_half_the_connections_over_the_latency() {
        let scn = scenario();
        let case = &scn.cases[1];
        let f = Facts {
            connections: 32,
            elapsed_s: 4.0,
            ..Facts::new(case, &result([10_000, 3_000]))
        };
        assert!((f.slow_rate_bound().unwrap() - 825.0).abs() < 1e-6);
        assert!((f.slow_rate().unwrap() - 750.0).abs() < 1e-9);
    }

    #[test]
    fn costs_cases_compare_identical_backends() {
        let scn = scenario();
        for name in ["costs-round-robin", "costs-least-conn", "costs-random-two"] {
            let case = scn.cases.iter().find(|c| c.name == name).unwrap();
            let f = Facts::new(case, &result([510, 490]));
            assert_eq!(f.part, Part::Costs, "{name}");
            assert_eq!(f.slow, None, "{name}");
            assert!((f.spread() - 0.02).abs() < 1e-12, "{name}");
            let heavy = case.loads.iter().find(|l| l.name == "heavy").unwrap();
            assert_eq!(cpu_us(&f, heavy), 5000.0);
            let api = case.loads.iter().find(|l| l.name == "api").unwrap();
            assert_eq!(cpu_us(&f, api), 0.0);
        }
    }
}
