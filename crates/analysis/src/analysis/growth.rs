//! The `scale` analysis (config growth; module `growth`) (scenario `scale`, after the NGF v1.0.0 scale tests): a config grown step
//! by step under a light load, one reload per step.
//!
//! Per case it reads the growth back from the records ([`steps::Growth`]: grow events, reloads,
//! time-to-ready probes) and reports NGF's numbers in proxybench's words: time to ready (mean,
//! p50, p99, max, never ready, <= 500 ms / <= 1000 ms), reload time against config size (render +
//! the proxy's config check, the check alone, signal to served, signal to old workers gone, per
//! quarter of the growth), the proxy's CPU and memory before, during and after, what the light
//! load lost, and for header matches the cost of the first match against the last and any limit
//! the proxy hit. The checks hold the mechanism: every step reloads every replica (or a refused
//! config stopped the growth with the proxy's message), every grown item answers, the light load
//! loses nothing but idle keep-alive connections closed by reloads. Two checks model nginx and
//! are made only when nginx is the kind (for another, a finding says the model is nginx's and
//! does not apply as-is): `nginx -t` time grows with the config, and the last header match (a
//! `map` regex tried in order) costs more CPU than the first.

mod matches;
mod steps;
mod tables;

use super::common::{self, Texts};
use super::Records;
use matches::MatchLoads;
use model::{
    CaseResult, Cell, CheckResult, Collector, ErrorKind, RunResults, Series, SeriesX, Table,
};
use scenario::{Case, GrowWhat, Scenario};
use std::sync::LazyLock;
use steps::{case_samples, quarters, summary, Growth, ProxySample, Step};
use tables::{limit_table, resources_table, rss_start_end, size_table, ttr_table, LightLoss};

/// The light load every case runs during its growth.
const LIGHT: &str = "light";
/// The closed-loop load on the first header match (matches case).
const FIRST: &str = "first-match";
/// The closed-loop load on the last header match (matches case).
const LAST: &str = "last-match";
/// Title of the cross-case summary table.
const SUMMARY: &str = "All cases: scale at a glance";
/// How long after a reload's old workers are gone a failed light-load request still counts as
/// "around the reload" (the load sends on each connection every 80 ms).
const AROUND_RELOAD_S: f64 = 0.25;

/// Runs the analysis on one case: tables, series, findings and checks of its growth.
fn case(
    _scn: &Scenario,
    case: &Case,
    result: &mut CaseResult,
    records: &Records,
    env: &model::Env,
) -> Vec<CheckResult> {
    let kind = common::replica_kind(env, Some(case));
    let model_applies = common::model_applies(env);
    let no_data = |why: &str| {
        vec![CheckResult {
            name: "the case grows its config (scale analysis)".into(),
            case: Some(case.name.clone()),
            expected: "at least one growth step".into(),
            actual: format!("no data: {why}"),
            pass: false,
        }]
    };
    let Some(g) = Growth::of(case, result) else {
        return no_data("the case has no `grow` action");
    };
    if g.steps.is_empty() {
        return no_data("no growth step ran (the loads ended, or the run stopped, before it)");
    }
    let samples = case_samples(result, &kind);
    let mut checks = Vec::new();
    let mut check = |name: String, expected: String, actual: String, pass: bool| {
        checks.push(CheckResult {
            name,
            case: Some(case.name.clone()),
            expected,
            actual,
            pass,
        })
    };

    // Every step reloaded every replica; a short growth must carry the proxy's reason.
    // The growth's reloads: those from its first step on (a reload action before it, such as
    // the one that tells an external gateway its first backends, is not the growth's).
    let from = g.steps.first().map_or(f64::NEG_INFINITY, |s| s.t_s - 1e-6);
    let reloads = result.reloads.iter().filter(|r| r.t_s >= from).count();
    let (name, expected, actual, pass) = reload_check(&g, reloads);
    check(name, expected, actual, pass);

    if let Some((name, expected, actual, pass)) = ready_check(&g) {
        check(name, expected, actual, pass);
    }

    let mut light_table = None;
    if let Some(((name, expected, actual, pass), table)) = light_check(case, result, records) {
        check(name, expected, actual, pass);
        light_table = Some(table);
    }

    if let Some((name, expected, actual, pass)) = trend_check(&g, result, &kind, model_applies) {
        check(name, expected, actual, pass);
    }

    if let Some(t) = ttr_table(&case.name, &g) {
        result.tables.push(t);
    }
    result.tables.push(size_table(&case.name, &g));
    result
        .tables
        .push(resources_table(&case.name, &kind, &g, &samples));
    result.tables.extend(light_table);
    if g.spec.what == GrowWhat::Matches || g.limit().is_some() {
        result.tables.push(limit_table(&case.name, &g));
    }
    if g.spec.what == GrowWhat::Matches {
        let input = MatchInput {
            case,
            records,
            g: &g,
            samples: &samples,
            kind: &kind,
            model_applies,
        };
        for (name, expected, actual, pass) in match_checks(&input, result) {
            check(name, expected, actual, pass);
        }
    }
    result.series.extend(series(&g, result));
    result
        .findings
        .extend(findings(&g, result, &samples, &kind));
    cluster_findings(result, &samples);
    checks
}

/// Every grown item answered 3 times in a row (when the steps were probed).
fn ready_check(g: &Growth<'_>) -> Option<(String, String, String, bool)> {
    let probed: Vec<&Step> = g.steps.iter().filter(|s| s.probed && s.ok()).collect();
    if probed.is_empty() {
        return None;
    }
    let never: Vec<&&Step> = probed.iter().filter(|s| s.ttr_ms.is_none()).collect();
    Some((
        format!(
            "every new item ({}) answered 200 three times in a row",
            g.noun()
        ),
        format!("0 of {} never ready", probed.len()),
        match never.first() {
            None => format!("0 of {} never ready", probed.len()),
            Some(s) => format!(
                "{} of {} never ready; first at {} items: {}",
                never.len(),
                probed.len(),
                s.count,
                s.ready_error.as_deref().unwrap_or("no answer")
            ),
        },
        never.is_empty(),
    ))
}

/// The light load lost nothing but idle keep-alive connections that reloads closed: the check
/// and the table of its losses (when the case ran the light load).
fn light_check(
    case: &Case,
    result: &CaseResult,
    records: &Records,
) -> Option<((String, String, String, bool), Table)> {
    let light = result.loads.iter().find(|l| l.name == LIGHT)?;
    let lost = LightLoss::of(light, result, records);
    let bound = result.reloads.len() as u64 * u64::from(light.connections);
    let check = (
        "the light load lost only idle keep-alive connections closed by reloads".into(),
        format!(
            "0 non-2xx, 0 other errors, read_idle_closed <= {} reloads x {} connections = {bound}",
            result.reloads.len(),
            light.connections
        ),
        format!(
            "{} non-2xx, {} other errors, read_idle_closed {}",
            lost.non_2xx, lost.other, lost.idle_closed
        ),
        lost.non_2xx == 0 && lost.other == 0 && lost.idle_closed <= bound,
    );
    Some((check, lost.table(&case.name, light, bound)))
}

/// nginx -t time grows with the config (routes and matches make the config bigger per step):
/// nginx's model, judged only when nginx is the kind; a finding says why it is not judged.
fn trend_check(
    g: &Growth<'_>,
    result: &mut CaseResult,
    kind: &str,
    model_applies: bool,
) -> Option<(String, String, String, bool)> {
    if matches!(g.spec.what, GrowWhat::Routes | GrowWhat::Matches) && !g.check_timed {
        result.findings.push(fill("untimed_check", &[]));
    } else if matches!(g.spec.what, GrowWhat::Routes | GrowWhat::Matches) && !model_applies {
        result.findings.push(fill(
            "other_kind_trend",
            &[("kind", &kind), ("model", &common::MODELLED_KIND)],
        ));
    } else if matches!(g.spec.what, GrowWhat::Routes | GrowWhat::Matches) {
        if let Some((first, last)) = trend(g) {
            return Some((
                format!("nginx -t time grows with the number of {}", g.noun()),
                format!(
                    "lowest of the last quarter of steps >= lowest of the first ({} ms)",
                    f1(first)
                ),
                format!("{} ms", f1(last)),
                last >= first,
            ));
        }
    }
    None
}

/// What the header-match checks read of the case beside its result.
struct MatchInput<'a> {
    case: &'a Case,
    records: &'a Records,
    g: &'a Growth<'a>,
    samples: &'a [ProxySample],
    kind: &'a str,
    model_applies: bool,
}

/// A header-match growth's loads on the first and the last match: their checks (they ran after
/// the growth; the last costs nginx more CPU), their finding and table.
fn match_checks(
    input: &MatchInput<'_>,
    result: &mut CaseResult,
) -> Vec<(String, String, String, bool)> {
    let MatchInput {
        case,
        records,
        g,
        samples,
        kind,
        model_applies,
    } = *input;
    let mut checks = Vec::new();
    let m = MatchLoads::of(case, result, g, samples, records);
    if let Some(m) = m {
        checks.push(m.ran_after_growth(g));
        if !model_applies {
            result.findings.push(fill(
                "other_kind_matches",
                &[("kind", &kind), ("model", &common::MODELLED_KIND)],
            ));
        } else if let (Some(f), Some(l)) = (m.first.cpu_us, m.last.cpu_us) {
            checks.push((
                "the last header match costs nginx more CPU per request than the first (map regexes are tried in order)".into(),
                format!("last > first ({} us per request)", f1(f)),
                format!("{} us per request", f1(l)),
                l > f,
            ));
        }
        result.findings.push(m.finding());
        result.tables.push(m.table(&case.name));
    }
    checks
}

/// On a cluster: the cluster's finding, and where the proxy's CPU and memory came from.
fn cluster_findings(result: &mut CaseResult, samples: &[ProxySample]) {
    if let Some(s) = common::cluster_finding(result) {
        result.findings.push(s);
        result.findings.push(if samples.is_empty() {
            "The proxy's CPU and memory are absent on kubernetes: the proxy runs in pods, not \
             as processes of this machine, and the cluster's metrics API gave no sample of the \
             proxy pods (the Cluster section says why)."
                .to_string()
        } else {
            "The proxy's CPU and memory come from the cluster's metrics API (every proxy pod \
             summed, once a second; memory is the pods' working set, which stands in for RSS)."
                .to_string()
        });
    }
}

/// Adds the cross-case summary (NGF's reload columns, time to ready, memory, and NGF's published
/// numbers beside ours) to the last case, and the run's findings.
fn finish(scn: &Scenario, results: &mut RunResults) {
    let kind = common::replica_kind(&results.env, scn.cases.first());
    let mut t = summary_table();
    for c in &results.cases {
        let Some(spec) = scn.cases.iter().find(|s| s.name == c.name) else {
            continue;
        };
        let Some(g) = Growth::of(spec, c) else {
            continue;
        };
        let r = model::ReloadStats::of(&c.reloads);
        let ok = g.ok_steps();
        let ttr: Vec<f64> = ok.iter().filter_map(|s| s.ttr_ms).collect();
        t.rows.push(summary_row(c, &g, &r, &ok, &ttr, &kind));
        results.findings.push(format!(
            "{}: {} {} -> {} in {} steps, {} reloads ({} failed), average {} ms to serve the new config{}.",
            c.name,
            g.noun(),
            g.initial,
            g.reached(),
            g.steps.len(),
            r.total,
            r.errors,
            r.served_avg_ms.map_or("-".into(), f1),
            match summary(&ttr) {
                Some((mean, _, p99, _)) =>
                    format!("; time to ready mean {} ms, p99 {} ms", f1(mean), f1(p99)),
                None => String::new(),
            }
        ));
        if let Some(l) = g.limit() {
            results.findings.push(format!(
                "{}: {kind} refused the config at {} {}: {}",
                c.name,
                l.count,
                g.noun(),
                one_line(&l.error)
            ));
        }
    }
    if t.rows.is_empty() {
        return;
    }
    t.notes.push(text("summary_note").into());
    if let Some(last) = results.cases.last_mut() {
        last.tables.push(t);
    }
}

/// The cross-case summary table with its columns and no row yet.
fn summary_table() -> Table {
    Table {
        title: SUMMARY.into(),
        columns: [
            "Case",
            "Grew",
            "Steps",
            "Reloads",
            "Reload errors",
            "Ave reload (ms)",
            "<= 500ms",
            "<= 1000ms",
            "Old workers gone, mean (ms)",
            "Config check first -> last (ms)",
            "TTR mean / p99 (ms)",
            "Never ready",
            "Proxy RSS start -> end (MiB)",
            "Light load failed (idle closes)",
            "Proxy errors",
            "Growth took (s)",
            "NGF v1.0.0 published",
        ]
        .map(String::from)
        .to_vec(),
        rows: Vec::new(),
        notes: Vec::new(),
    }
}

/// One case's row of the summary table: its growth `g` with the steps the proxy took (`ok`),
/// their reload stats `r` and times to ready `ttr`.
fn summary_row(
    c: &CaseResult,
    g: &Growth<'_>,
    r: &model::ReloadStats,
    ok: &[&Step],
    ttr: &[f64],
    kind: &str,
) -> Vec<Cell> {
    let never = ok.iter().filter(|s| s.probed && s.ttr_ms.is_none()).count();
    let samples = case_samples(c, kind);
    let (rss0, rss1) = rss_start_end(g, &samples);
    let light = c.loads.iter().find(|l| l.name == LIGHT);
    vec![
        Cell::text(&c.name),
        Cell::text(format!("{} {} -> {}", g.noun(), g.initial, g.reached())),
        Cell::Int(g.steps.len() as i64),
        Cell::Int(r.total as i64),
        Cell::Int(r.errors as i64),
        r.served_avg_ms.map_or_else(Cell::dash, f1),
        share(r.within_500, r.total),
        share(r.within_1000, r.total),
        r.old_exit_avg_ms.map_or_else(Cell::dash, f1),
        match (
            ok.first().and_then(|s| s.validate_ms),
            ok.last().and_then(|s| s.validate_ms),
        ) {
            (Some(a), Some(b)) => Cell::list([f1(a), f1(b)], " -> "),
            _ => Cell::dash(),
        },
        match summary(ttr) {
            Some((mean, _, p99, _)) => Cell::list([f1(mean), f1(p99)], " / "),
            None => Cell::Missing("- (not addressable)".into()),
        },
        if ok.iter().any(|s| s.probed) {
            Cell::Int(never as i64)
        } else {
            Cell::dash()
        },
        match (rss0, rss1) {
            (Some(a), Some(b)) => Cell::list([mib(a), mib(b)], " -> "),
            _ => Cell::dash(),
        },
        light.map_or_else(Cell::dash, |l| {
            Cell::text(format!(
                "{} ({})",
                l.failures(),
                l.errors
                    .get(&ErrorKind::ReadIdleClosed)
                    .copied()
                    .unwrap_or(0)
            ))
        }),
        Cell::measured(&c.measured(Collector::Logs, |c| &c.logs), |logs| {
            Cell::Int(
                logs.error_levels
                    .iter()
                    .filter(|(l, _)| ["error", "crit", "alert", "emerg"].contains(&l.as_str()))
                    .map(|(_, n)| n)
                    .sum::<u64>() as i64,
            )
        }),
        g.span().map_or_else(Cell::dash, |(a, b)| f1(b - a)),
        published(g).into(),
    ]
}

/// NGF v1.0.0's published result for the same growth (tests/scale/results/1.0.0).
fn published(g: &Growth<'_>) -> &'static str {
    let p = &DATA.published;
    match g.spec.what {
        GrowWhat::Listeners => &p.listeners,
        GrowWhat::HttpsListeners => &p.https_listeners,
        GrowWhat::Routes if !g.spec.pause.0.is_zero() => &p.routes_with_delay,
        GrowWhat::Routes => &p.routes_no_delay,
        GrowWhat::UpstreamServers => &p.upstream_servers,
        GrowWhat::Matches => &p.matches,
        GrowWhat::GrpcRoutes => &p.grpc_routes,
    }
}

/// NGF v1.0.0's published results, one per kind of growth.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Published {
    listeners: String,
    https_listeners: String,
    routes_with_delay: String,
    routes_no_delay: String,
    upstream_servers: String,
    matches: String,
    grpc_routes: String,
}

/// The analysis' data file: NGF's published results and prose.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Data {
    published: Published,
    text: Texts,
}

static DATA: LazyLock<Data> =
    LazyLock::new(|| common::parse("growth", include_str!("../../data/growth.toml")));

/// A prose template of this analysis.
pub(super) fn text(key: &str) -> &'static str {
    DATA.text.get(key)
}

/// A prose template filled from the run.
pub(super) fn fill(key: &str, args: &[(&str, &dyn std::fmt::Display)]) -> String {
    DATA.text.fill(key, args)
}

/// Every step reloads every replica; a growth that stopped early must have hit a refused config.
fn reload_check(g: &Growth<'_>, reloads: usize) -> (String, String, String, bool) {
    let taken = g.steps.len();
    let want_reloads = taken * g.replicas as usize;
    let external = g.external();
    let what = match (external, g.replicas) {
        (false, _) => "reloaded every replica",
        (true, 0) => "was applied (the gateway's controller reloads it)",
        (true, _) => "was applied and ran the gateway's reload command",
    };
    let name = format!(
        "every step of the growth {what} ({} -> {} {}, {} per step)",
        g.initial,
        g.spec.to,
        g.noun(),
        g.spec.by
    );
    let expected = format!(
        "{} steps x {} {} = {} reloads, or a refused config that stopped the growth with the proxy's message",
        g.planned,
        g.replicas,
        if external {
            "reload command run(s) each"
        } else {
            "replica(s)"
        },
        g.planned as usize * g.replicas as usize
    );
    let mut actual = format!(
        "{taken} steps, {reloads} reloads, reached {} {}",
        g.reached(),
        g.noun()
    );
    let pass = if let Some(b) = g.broken() {
        actual.push_str(&format!(
            "; a step failed before reloading: {}",
            b.error.as_deref().unwrap_or("")
        ));
        false
    } else if let Some(l) = g.limit() {
        actual.push_str(&format!(
            "; the proxy refused {} {}: {}",
            l.count,
            g.noun(),
            one_line(&l.error)
        ));
        reloads == want_reloads && l.error.as_deref().is_some_and(|e| !e.trim().is_empty())
    } else if !g.finished() {
        actual.push_str(
            "; the loads ended before the growth did (lengthen the light load or start earlier)",
        );
        false
    } else {
        taken == g.planned as usize && reloads == want_reloads
    };
    (name, expected, actual.replace('\n', " / "), pass)
}

/// Lowest config-check time (`nginx -t` for nginx) of the first and of the last quarter of the
/// steps the proxy took.
fn trend(g: &Growth<'_>) -> Option<(f64, f64)> {
    let v: Vec<f64> = g.ok_steps().iter().filter_map(|s| s.validate_ms).collect();
    if v.len() < 4 {
        return None;
    }
    let q = quarters(&v);
    let low = |x: &[f64]| x.iter().copied().fold(f64::INFINITY, f64::min);
    Some((low(&q[0]), low(&q[q.len() - 1])))
}

/// Series to chart: items in the config, render + config check and the check against time; time to
/// ready against the number of items.
fn series(g: &Growth<'_>, result: &CaseResult) -> Vec<Series> {
    let ok = g.ok_steps();
    let mut out = vec![Series {
        name: format!("{} in the config", g.noun()),
        chart: None,
        unit: "items".into(),
        points: std::iter::once((g.span().map_or(0.0, |s| s.0), f64::from(g.initial)))
            .chain(ok.iter().map(|s| (s.end_s, f64::from(s.count))))
            .collect(),
        ..Default::default()
    }];
    if ok.iter().any(|s| s.ttr_ms.is_some()) {
        out.push(Series {
            name: "time to ready".into(),
            chart: None,
            unit: "ms".into(),
            // One point per step against how many there were, not against time: a thousand
            // steps joined by a line fill the chart solid.
            points: ok
                .iter()
                .filter_map(|s| Some((f64::from(s.count), s.ttr_ms?)))
                .collect(),
            x: SeriesX::Count(g.noun().into()),
        });
    }
    out.push(Series {
        name: "render + config check before each reload".into(),
        chart: Some("config checks before each reload".into()),
        unit: "ms".into(),
        points: ok.iter().filter_map(|s| Some((s.t_s, s.pre_ms?))).collect(),
        ..Default::default()
    });
    out.push(Series {
        name: "config check".into(),
        chart: Some("config checks before each reload".into()),
        unit: "ms".into(),
        points: result
            .reloads
            .iter()
            .filter(|r| r.error.is_none() && g.check_timed)
            .map(|r| (r.t_s, r.validate_ms))
            .collect(),
        ..Default::default()
    });
    out
}

/// One sentence each: the growth, its reload and ready times, memory.
fn findings(
    g: &Growth<'_>,
    result: &CaseResult,
    samples: &[ProxySample],
    kind: &str,
) -> Vec<String> {
    let mut out = Vec::new();
    let ok = g.ok_steps();
    let r = model::ReloadStats::of(&result.reloads);
    out.push(format!(
        "Grew {} from {} to {} in {} steps of {}{}: {} reloads, {} failed, average {} ms from the reload signal to the new config served.",
        g.noun(),
        g.initial,
        g.reached(),
        g.steps.len(),
        g.spec.by,
        if g.spec.pause.0.is_zero() {
            String::new()
        } else {
            format!(" with {} between them", g.spec.pause)
        },
        r.total,
        r.errors,
        r.served_avg_ms.map_or("-".into(), f1)
    ));
    if let (Some(a), Some(b)) = (ok.first(), ok.last()) {
        if let (Some(va), Some(vb)) = (a.validate_ms, b.validate_ms) {
            out.push(format!(
                "{kind}'s config check took {} ms at {} {} and {} ms at {}.",
                f1(va),
                a.count,
                g.noun(),
                f1(vb),
                b.count
            ));
        }
    }
    let ttr: Vec<f64> = ok.iter().filter_map(|s| s.ttr_ms).collect();
    if let Some((mean, p50, p99, max)) = summary(&ttr) {
        out.push(format!(
            "Time to ready: mean {} ms, p50 {} ms, p99 {} ms, max {} ms over {} items.",
            f1(mean),
            f1(p50),
            f1(p99),
            f1(max),
            ttr.len()
        ));
    }
    if let (Some(a), Some(b)) = rss_start_end(g, samples) {
        out.push(format!(
            "{kind} resident memory {} MiB before the growth, {} MiB at the end.",
            mib(a),
            mib(b)
        ));
    }
    if let Some(l) = g.limit() {
        out.push(format!(
            "{kind} refused the config at {} {}: {}",
            l.count,
            g.noun(),
            one_line(&l.error)
        ));
    }
    out
}

/// The proxy's message (several lines when it prints several) on one line.
fn one_line(e: &Option<String>) -> String {
    e.as_deref().unwrap_or("").trim().replace('\n', " / ")
}

/// One decimal, `-` when there is no finite value.
fn f1(x: f64) -> Cell {
    if x.is_finite() {
        Cell::num(x, 1)
    } else {
        Cell::dash()
    }
}

/// Two decimals, `-` when there is no finite value.
fn f2(x: f64) -> Cell {
    if x.is_finite() {
        Cell::num(x, 2)
    } else {
        Cell::dash()
    }
}

/// Bytes as MiB with one decimal.
fn mib(b: u64) -> Cell {
    Cell::num(b as f64 / (1024.0 * 1024.0), 1)
}

/// `k` of `n` as a percentage, `-` when `n` is 0.
fn share(k: u64, n: u64) -> Cell {
    if n == 0 {
        Cell::dash()
    } else {
        Cell::pct(k as f64 / n as f64)
    }
}

/// The `scale` analysis, registered in [`super::ALL`].
pub struct ConfigGrowth;

impl super::Analysis for ConfigGrowth {
    fn name(&self) -> &'static str {
        "scale"
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
    fn the_data_file_parses_and_has_every_text_the_code_uses() {
        assert!(DATA.published.matches.contains("too long"));
        common::assert_keys(
            "growth",
            &DATA.text,
            &[
                include_str!("growth.rs"),
                include_str!("growth/tables.rs"),
                include_str!("growth/matches.rs"),
            ],
        );
    }
    use scenario::layers::Source;

    fn scenario(actions: &str) -> Scenario {
        let text = format!(
            "name = \"s\"\nanalysis = \"scale\"\n[[backends]]\nname = \"b\"\n[proxy]\n\
             [[proxy.listeners]]\nname = \"http\"\n[[proxy.upstreams]]\nname = \"u\"\nbackends = \"b\"\n\
             [[proxy.routes]]\npath = \"/\"\nupstream = \"u\"\n[[loads]]\nname = \"light\"\n\
             url = \"http://x/\"\nduration = \"10s\"\n{actions}"
        );
        let src = Source {
            file: "s.toml".into(),
            text,
        };
        Scenario::parse_with(&src, false, &crate::analysis::parse_options()).unwrap()
    }

    #[test]
    fn a_case_without_growth_fails_its_check_instead_of_having_none() {
        let scn = scenario("");
        let mut result = CaseResult::default();
        let checks = case(
            &scn,
            &scn.cases[0],
            &mut result,
            &Records::new(),
            &model::Env::default(),
        );
        assert_eq!(checks.len(), 1, "{checks:?}");
        assert!(!checks[0].pass);
        assert!(checks[0].actual.starts_with("no data: "), "{checks:?}");

        // A grow action that never ran (no grow event recorded) is no data either.
        let scn = scenario("[[actions]]\nat = \"1s\"\ngrow = { what = \"routes\", to = 5 }\n");
        let checks = case(
            &scn,
            &scn.cases[0],
            &mut result,
            &Records::new(),
            &model::Env::default(),
        );
        assert_eq!(checks.len(), 1, "{checks:?}");
        assert!(!checks[0].pass && checks[0].actual.contains("no growth step ran"));
    }
}
