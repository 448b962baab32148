//! The `balance` analysis (scenario `load-balancing`): how nginx's balancing methods split
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
//! Shares come from the backend counters, and from nginx's `$upstream_addr` for comparison.

use super::Records;
use crate::scenario::{Action, Case, LoadSpec, Scenario};
use backend::Profile;
use model::{CaseResult, CheckResult, RequestRecord, RunResults, Series, Table};
use proxy::config::Lb;
use std::collections::BTreeMap;

/// Round robin's split may deviate from even by this share (nginx alternates exactly; the last
/// requests in flight make the difference).
const RR_SPREAD: f64 = 0.01;
/// least_conn and random two over identical backends: largest deviation from even.
const EVEN_SPREAD: f64 = 0.10;
/// Slack on the least_conn bound for the slow backend's rate (timing of the load's edges).
const BOUND_SLACK: f64 = 1.10;
/// least_conn must send at most this share of round robin's share to the slow backend.
const CLEARLY_LESS: f64 = 0.5;
/// A backend counts as slow when its latency is this many times the fastest one's.
const SLOW_FACTOR: f64 = 2.0;
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
    attempts: u64,
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
        let attempts = &r.logs.upstream_addr;
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
                    attempts: attempts.get(&b.addr).copied().unwrap_or(0),
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
            .filter(|(_, i)| i.latency_us > 0.0 && i.latency_us >= SLOW_FACTOR * fastest.max(1.0))
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

    fn total_attempts(&self) -> u64 {
        self.instances.iter().map(|i| i.attempts).sum()
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

fn pct(v: f64) -> String {
    format!("{:.2}%", v * 100.0)
}

fn lat(us: u64) -> String {
    units::fmt_us(us as f64)
}

fn path_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.find('/').map_or("/", |i| &rest[i..])
}

/// CPU cost of a load's path on the first instance, in microseconds.
fn cpu_us(f: &Facts, l: &LoadSpec) -> f64 {
    f.instances
        .first()
        .and_then(|i| i.profile.behaviour_for(path_of(&l.url)).cpu)
        .map_or(0.0, |d| d.mean() / 1e3)
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

/// Runs the analysis on one case: shares, latency per path, a per-second series and checks.
fn case(
    _scn: &Scenario,
    case: &Case,
    result: &mut CaseResult,
    records: &Records,
) -> Vec<CheckResult> {
    let f = Facts::new(case, result);
    if f.total() == 0 {
        result
            .findings
            .push("balance analysis: no backend served a request; nothing to analyse.".into());
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
    result.findings.push(format!(
        "{}: {}",
        f.method,
        f.instances
            .iter()
            .map(|i| format!("{} {}", i.name, pct(f.share(i))))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    checks(&case.name, &f)
}

fn share_table(case: &str, f: &Facts) -> Table {
    let rows = f
        .instances
        .iter()
        .map(|i| {
            vec![
                i.name.clone(),
                i.profile.to_string(),
                count(i.requests),
                pct(f.share(i)),
                count(i.attempts),
                pct(ratio(i.attempts, f.total_attempts())),
                count(i.connections),
            ]
        })
        .collect();
    let mut notes = Vec::new();
    if f.round_robin() {
        notes.push(
            "Round robin gives each backend its turn in order, whatever it costs or how long it \
             takes: the split is even by construction (one nginx worker alternates exactly)."
                .to_string(),
        );
    }
    if f.method == "least_conn" {
        notes.push(
            "least_conn sends each request to the backend with the fewest requests in flight \
             (ties in round-robin order). It sees how long requests stay, not what they cost."
                .to_string(),
        );
    }
    if f.method == "random two least_conn" {
        notes.push(
            "random two least_conn draws two distinct backends and sends the request to the one \
             with fewer in flight (the second draw on a tie). With two backends both are drawn \
             every time, so it decides as least_conn does and differs only in tie-breaking."
                .to_string(),
        );
    }
    if let (Part::FastSlow, Some(bound), Some(rate)) = (f.part, f.slow_rate_bound(), f.slow_rate())
    {
        let s = &f.instances[f.slow.unwrap_or(0)];
        if f.counts_in_flight() {
            notes.push(format!(
                "Little's law bound: choosing the backend with fewer in flight keeps the slow \
                 one's count at most ({} + 1) / 2 of the {} connections, each request staying at \
                 least {}, so it can serve at most {:.0} req/s; it served {:.0} req/s, {} of all \
                 responses. The fast backend takes everything else, and the closed loop runs at \
                 the fast backend's pace.",
                f.connections,
                f.connections,
                units::fmt_us(s.latency_us),
                bound,
                rate,
                pct(f.share(s))
            ));
        } else if f.round_robin() {
            notes.push(format!(
                "Every other request waits {} at {}, and in a closed loop each connection spends \
                 most of its time on those: the loop runs at the slow backend's pace ({:.0} req/s \
                 there, {} of responses).",
                units::fmt_us(s.latency_us),
                s.name,
                rate,
                pct(f.share(s))
            ));
        }
    }
    Table {
        title: format!("{case}: {SHARES} ({})", f.method),
        columns: [
            "Backend",
            "Profile",
            "Responses (backend counters)",
            "Share",
            "Attempts ($upstream_addr)",
            "Share",
            "Connections",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        notes,
    }
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
    let mut rows = Vec::new();
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
        rows.push(vec![
            path_of(&l.url).to_string(),
            l.name.clone(),
            units::fmt_us(cpu_us(f, l)),
            format!("{:.1}", s.req_per_sec_total()),
            p(50.0),
            p(90.0),
            p(99.0),
            lat(s.latency.max_us),
        ]);
    }
    let mut notes = Vec::new();
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
        rows.push(vec![
            WAITED.into(),
            String::new(),
            units::fmt_us(cost / 2.0),
            String::new(),
            format!("predicted >= {}", pct(rho / 2.0)),
            format!("measured {}", waited.map(pct).unwrap_or_else(|| "-".into())),
            String::new(),
            String::new(),
        ]);
        notes.push(format!(
            "The backends share one event-loop thread, like two services on one core: {} burns \
             {} of CPU per request at {:.1} req/s, keeping that thread busy at least {} of the \
             time. Poisson arrivals find the thread busy as often as it is busy, and a cheap \
             request that arrives meanwhile waits for the rest of the spin, whichever backend \
             nginx chose; the rest is uniform over the spin, so at least {} of them wait half a \
             heavy request or more (busy share / 2; evenly paced loads would instead lock onto \
             one phase of the spin); measured {}.",
            path_of(&h.url),
            units::fmt_us(cost),
            hs.map_or(0.0, |s| s.req_per_sec_total()),
            pct(rho),
            pct(rho / 2.0),
            waited.map(pct).unwrap_or_else(|| "-".into()),
        ));
        if waited.is_some_and(|w| w > rho / 2.0) {
            notes.push(format!(
                "More wait than the bound: a spin takes longer than its CPU time when the thread \
                 shares a core with nginx and the load (heavy requests took {} at p50 for {} of \
                 CPU), and cheap requests also queue behind each other.",
                hs.and_then(|s| s.latency.percentile(50.0))
                    .map(lat)
                    .unwrap_or_else(|| "-".into()),
                units::fmt_us(cost)
            ));
        }
    }
    let late: Vec<String> = result
        .loads
        .iter()
        .filter_map(|l| l.schedule.as_ref().map(|s| (l, s)))
        .filter(|(_, s)| s.late > 0)
        .map(|(l, s)| {
            format!(
                "{} sent {} of {} requests late (worst {})",
                l.name,
                count(s.late),
                count(s.sent),
                units::fmt_us(s.late_max_us as f64)
            )
        })
        .collect();
    if !late.is_empty() {
        notes.push(format!(
            "The loads are open loop, so their latency counts from each request's intended send \
             time: {}. Lateness is time the whole machine spent elsewhere (other work on these \
             two cores); it lands in every latency above and in the measured wait share, whatever \
             the method.",
            late.join("; ")
        ));
    }
    notes.push(
        "No balancing method knows what a request costs. Round robin alternates; least_conn \
         counts requests in flight, which a heavy request raises only while it runs, and here both \
         backends slow down together because they share the CPU, so the counts stay level and \
         the split even. On separate machines least_conn would steer the next request away from \
         a backend busy with a heavy one, but it still could not keep heavy requests apart from \
         cheap ones: that takes routing by path to separate pools."
            .into(),
    );
    Table {
        title: format!("{case_name}: {PATHS} ({})", f.method),
        columns: [
            "Path", "Load", "CPU cost", "Req/s", "p50", "p90", "p99", "Max",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        notes,
    }
}

fn checks(case: &str, f: &Facts) -> Vec<CheckResult> {
    let mut out = Vec::new();
    if f.round_robin() {
        out.push(check(
            case,
            "round robin splits evenly whatever each backend costs".into(),
            format!("every backend within {} of an even share", pct(RR_SPREAD)),
            format!("largest deviation {}", pct(f.spread())),
            f.spread() <= RR_SPREAD,
        ));
    }
    if f.part == Part::FastSlow && f.counts_in_flight() {
        if let (Some(bound), Some(rate)) = (f.slow_rate_bound(), f.slow_rate()) {
            out.push(check(
                case,
                format!(
                    "{} holds at most half the connections on the slow backend (Little's law)",
                    f.method
                ),
                format!("<= {:.0} req/s to the slow backend", bound * BOUND_SLACK),
                format!("{rate:.0} req/s"),
                rate <= bound * BOUND_SLACK,
            ));
        }
    }
    if f.part == Part::Costs && f.counts_in_flight() {
        out.push(check(
            case,
            format!("{} splits identical backends evenly", f.method),
            format!("every backend within {} of an even share", pct(EVEN_SPREAD)),
            format!("largest deviation {}", pct(f.spread())),
            f.spread() <= EVEN_SPREAD,
        ));
    }
    out
}

/// Adds the cross-case tables (each part's methods side by side) to the last case, the run's
/// findings, and the check that in-flight-counting methods move traffic off the slow backend.
fn finish(scn: &Scenario, results: &mut RunResults) {
    let mut fast_slow = Vec::new();
    let mut costs = Vec::new();
    for c in &results.cases {
        let Some(spec) = scn.cases.iter().find(|s| s.name == c.name) else {
            continue;
        };
        let f = Facts::new(spec, c);
        match f.part {
            Part::FastSlow => fast_slow.push((c.clone(), f)),
            Part::Costs => costs.push((c.clone(), f)),
            Part::Other => {}
        }
    }
    let mut tables = Vec::new();
    if !fast_slow.is_empty() {
        tables.push(fast_slow_table(&fast_slow));
        let rr = fast_slow.iter().find(|(_, f)| f.round_robin());
        let slow_share = |f: &Facts| f.slow.map(|s| f.share(&f.instances[s]));
        if let Some(rr_share) = rr.and_then(|(_, f)| slow_share(f)) {
            for (c, f) in fast_slow.iter().filter(|(_, f)| f.counts_in_flight()) {
                if let Some(s) = slow_share(f) {
                    results.checks.push(CheckResult {
                        name: format!(
                            "{} sends clearly less to the slow backend than round robin",
                            f.method
                        ),
                        case: Some(c.name.clone()),
                        expected: format!(
                            "<= {} (half of round robin's {})",
                            pct(CLEARLY_LESS * rr_share),
                            pct(rr_share)
                        ),
                        actual: pct(s),
                        pass: s <= CLEARLY_LESS * rr_share,
                    });
                }
            }
        }
        results.findings.push(format!(
            "Fast and slow backend: the slow backend's share was {}.",
            fast_slow
                .iter()
                .map(|(c, f)| format!(
                    "{} under {} (p50 {}, p99 {})",
                    slow_share(f).map(pct).unwrap_or_else(|| "-".into()),
                    f.method,
                    c.loads
                        .first()
                        .and_then(|l| l.latency.percentile(50.0))
                        .map(lat)
                        .unwrap_or_else(|| "-".into()),
                    c.loads
                        .first()
                        .and_then(|l| l.latency.percentile(99.0))
                        .map(lat)
                        .unwrap_or_else(|| "-".into())
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !costs.is_empty() {
        tables.push(costs_table(&costs));
        results.findings.push(format!(
            "One service, different costs: the largest deviation from an even split was {}; no \
             method sees what a request costs, so the cheap path waits behind the heavy one under \
             all of them.",
            costs
                .iter()
                .map(|(_, f)| format!("{} under {}", pct(f.spread()), f.method))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if tables.is_empty() {
        return;
    }
    if let Some(last) = results.cases.last_mut() {
        last.tables.extend(tables);
    }
    results.findings.push(
        "load-balancing: the side-by-side tables are at the end of the last case's section.".into(),
    );
}

fn fast_slow_table(cases: &[(CaseResult, Facts)]) -> Table {
    let rows = cases
        .iter()
        .map(|(c, f)| {
            let l = c.loads.first();
            let p = |q: f64| {
                l.and_then(|l| l.latency.percentile(q))
                    .map(lat)
                    .unwrap_or_else(|| "-".into())
            };
            let slow = f.slow.map(|s| &f.instances[s]);
            vec![
                f.method.clone(),
                c.name.clone(),
                l.map(|l| format!("{:.0}", l.req_per_sec_total()))
                    .unwrap_or_else(|| "-".into()),
                p(50.0),
                p(90.0),
                p(99.0),
                slow.map(|s| pct(f.share(s))).unwrap_or_else(|| "-".into()),
                slow.map(|s| pct(ratio(s.attempts, f.total_attempts())))
                    .unwrap_or_else(|| "-".into()),
                if f.counts_in_flight() {
                    f.slow_rate_bound()
                        .map(|b| format!("{b:.0} req/s"))
                        .unwrap_or_else(|| "-".into())
                } else {
                    "none".into()
                },
                f.slow_rate()
                    .map(|r| format!("{r:.0} req/s"))
                    .unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    Table {
        title: "Fast and slow backend: methods side by side".into(),
        columns: [
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
        ]
        .map(String::from)
        .to_vec(),
        rows,
        notes: vec![
            "Latency = waiting time + service time. Round robin gives the slow backend half the \
             requests, so half the answers take the slow latency and the closed loop runs at its \
             pace. Counting requests in flight moves traffic to the fast backend until both hold \
             about as many; by Little's law the slow one then serves only its share of the \
             connections divided by its latency. p99 stays at the slow latency under every method \
             while more than 1% of requests still go there: what changes is p50, p90 and req/s."
                .into(),
        ],
    }
}

fn costs_table(cases: &[(CaseResult, Facts)]) -> Table {
    let mut rows = Vec::new();
    for (c, f) in cases {
        let lp = |name: &str, q: f64| {
            c.loads
                .iter()
                .find(|l| l.name == name)
                .and_then(|l| l.latency.percentile(q))
                .map(lat)
                .unwrap_or_else(|| "-".into())
        };
        let names: Vec<&str> = c.loads.iter().map(|l| l.name.as_str()).collect();
        let mut row = vec![f.method.clone(), c.name.clone()];
        for n in &names {
            row.push(format!(
                "{} / {} / {}",
                lp(n, 50.0),
                lp(n, 90.0),
                lp(n, 99.0)
            ));
        }
        row.push(
            f.instances
                .iter()
                .map(|i| format!("{} {}", i.name, pct(f.share(i))))
                .collect::<Vec<_>>()
                .join(", "),
        );
        row.push(
            c.tables
                .iter()
                .find(|t| t.title.contains(PATHS))
                .and_then(|t| {
                    t.rows
                        .iter()
                        .find(|r| r.first().map(String::as_str) == Some(WAITED))
                })
                .map(|r| {
                    format!(
                        "{}, {}",
                        r.get(4).cloned().unwrap_or_default(),
                        r.get(5).cloned().unwrap_or_default()
                    )
                })
                .unwrap_or_else(|| "-".into()),
        );
        rows.push(row);
    }
    let loads = cases.first().map_or(0, |(c, _)| c.loads.len());
    let mut columns = vec!["Method".to_string(), "Case".to_string()];
    for i in 0..loads {
        let name = cases
            .first()
            .and_then(|(c, _)| c.loads.get(i))
            .map_or(String::new(), |l| l.name.clone());
        columns.push(format!("{name} p50 / p90 / p99"));
    }
    columns.push("Backend shares".into());
    columns.push(WAITED.into());
    Table {
        title: "One service, different costs: methods side by side".into(),
        columns,
        rows,
        notes: vec![
            "Every backend serves both paths, so over time each gets the same mix and the same \
             cost under any method; what no method can do is keep a cheap request from landing \
             behind a heavy one. The cheap path's p90 and p99 are that wait."
                .into(),
        ],
    }
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
        let src = crate::catalogue::builtin("load-balancing").unwrap();
        Scenario::parse(&src, true).unwrap()
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
