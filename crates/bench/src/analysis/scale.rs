//! The `scale` analysis (scenario `scale`, after the NGF v1.0.0 scale tests): a config grown step
//! by step under a light load, one reload per step.
//!
//! Per case it reads the growth back from the records ([`steps::Growth`]: grow events, reloads,
//! time-to-ready probes) and reports NGF's numbers in proxybench's words: time to ready (mean,
//! p50, p99, max, never ready, <= 500 ms / <= 1000 ms), reload time against config size (render +
//! `nginx -t`, `nginx -t` alone, signal to served, signal to old workers gone, per quarter of the
//! growth), nginx CPU and memory before, during and after, what the light load lost, and for
//! header matches the cost of the first match against the last and any limit nginx hit. The
//! checks hold the mechanism: every step reloads every replica (or a refused config stopped the
//! growth with nginx's message), every grown item answers, the light load loses nothing but idle
//! keep-alive connections closed by reloads, and `nginx -t` time grows with the config.

mod steps;

use super::Records;
use crate::scenario::{Case, GrowWhat, Scenario};
use model::{CaseResult, CheckResult, ErrorKind, LoadSummary, RunResults, Series, Table};
use steps::{nginx_samples, quarters, summary, Growth, NginxSample, Step};

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
pub fn case(
    _scn: &Scenario,
    case: &Case,
    result: &mut CaseResult,
    records: &Records,
) -> Vec<CheckResult> {
    let Some(g) = Growth::of(case, result) else {
        result
            .findings
            .push("scale analysis: this case grows nothing; nothing to analyse.".into());
        return Vec::new();
    };
    let nginx = nginx_samples(&result.proc_samples);
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

    // Every step reloaded every replica; a short growth must carry nginx's reason.
    let (name, expected, actual, pass) = reload_check(&g, result.reloads.len());
    check(name, expected, actual, pass);

    // Every grown item answered 3 times in a row.
    let probed: Vec<&Step> = g.steps.iter().filter(|s| s.probed && s.ok()).collect();
    if !probed.is_empty() {
        let never: Vec<&&Step> = probed.iter().filter(|s| s.ttr_ms.is_none()).collect();
        check(
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
        );
    }

    // The light load lost nothing but idle keep-alive connections that reloads closed.
    let mut light_table = None;
    if let Some(light) = result.loads.iter().find(|l| l.name == LIGHT) {
        let lost = LightLoss::of(light, result, records);
        let bound = result.reloads.len() as u64 * u64::from(light.connections);
        check(
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
        light_table = Some(lost.table(&case.name, light, bound));
    }

    // nginx -t time grows with the config (routes and matches make the config bigger per step).
    if matches!(g.spec.what, GrowWhat::Routes | GrowWhat::Matches) {
        if let Some((first, last)) = trend(&g) {
            check(
                format!("nginx -t time grows with the number of {}", g.noun()),
                format!(
                    "lowest of the last quarter of steps >= lowest of the first ({} ms)",
                    f1(first)
                ),
                format!("{} ms", f1(last)),
                last >= first,
            );
        }
    }

    if let Some(t) = ttr_table(&case.name, &g) {
        result.tables.push(t);
    }
    result.tables.push(size_table(&case.name, &g));
    result.tables.push(resources_table(&case.name, &g, &nginx));
    result.tables.extend(light_table);
    if g.spec.what == GrowWhat::Matches || g.limit().is_some() {
        result.tables.push(limit_table(&case.name, &g));
    }
    if g.spec.what == GrowWhat::Matches {
        let m = MatchLoads::of(case, result, &g, &nginx, records);
        if let Some(m) = m {
            let (name, expected, actual, pass) = m.ran_after_growth(&g);
            check(name, expected, actual, pass);
            if let (Some(f), Some(l)) = (m.first.cpu_us, m.last.cpu_us) {
                check(
                    "the last header match costs nginx more CPU per request than the first (map regexes are tried in order)".into(),
                    format!("last > first ({} us per request)", f1(f)),
                    format!("{} us per request", f1(l)),
                    l > f,
                );
            }
            result.findings.push(m.finding());
            result.tables.push(m.table(&case.name));
        }
    }
    result.series.extend(series(&g, result));
    result.findings.extend(findings(&g, result, &nginx));
    checks
}

/// Adds the cross-case summary (NGF's reload columns, time to ready, memory, and NGF's published
/// numbers beside ours) to the last case, and the run's findings.
pub fn finish(scn: &Scenario, results: &mut RunResults) {
    let mut t = Table {
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
            "nginx -t first -> last (ms)",
            "TTR mean / p99 (ms)",
            "Never ready",
            "nginx RSS start -> end (MiB)",
            "Light load failed (idle closes)",
            "NGF v1.0.0 published",
        ]
        .map(String::from)
        .to_vec(),
        rows: Vec::new(),
        notes: Vec::new(),
    };
    for c in &results.cases {
        let Some(spec) = scn.cases.iter().find(|s| s.name == c.name) else {
            continue;
        };
        let Some(g) = Growth::of(spec, c) else {
            continue;
        };
        let r = report::ReloadStats::of(&c.reloads);
        let ok = g.ok_steps();
        let ttr: Vec<f64> = ok.iter().filter_map(|s| s.ttr_ms).collect();
        let never = ok.iter().filter(|s| s.probed && s.ttr_ms.is_none()).count();
        let nginx = nginx_samples(&c.proc_samples);
        let (rss0, rss1) = rss_start_end(&g, &nginx);
        let light = c.loads.iter().find(|l| l.name == LIGHT);
        t.rows.push(vec![
            c.name.clone(),
            format!("{} {} -> {}", g.noun(), g.initial, g.reached()),
            g.steps.len().to_string(),
            r.total.to_string(),
            r.errors.to_string(),
            r.served_avg_ms.map_or("-".into(), f1),
            share(r.within_500, r.total),
            share(r.within_1000, r.total),
            r.old_exit_avg_ms.map_or("-".into(), f1),
            match (
                ok.first().and_then(|s| s.validate_ms),
                ok.last().and_then(|s| s.validate_ms),
            ) {
                (Some(a), Some(b)) => format!("{} -> {}", f1(a), f1(b)),
                _ => "-".into(),
            },
            match summary(&ttr) {
                Some((mean, _, p99, _)) => format!("{} / {}", f1(mean), f1(p99)),
                None => "- (not addressable)".into(),
            },
            if ok.iter().any(|s| s.probed) {
                never.to_string()
            } else {
                "-".into()
            },
            match (rss0, rss1) {
                (Some(a), Some(b)) => format!("{} -> {}", mib(a), mib(b)),
                _ => "-".into(),
            },
            light.map_or("-".into(), |l| {
                format!(
                    "{} ({})",
                    l.failures(),
                    l.errors
                        .get(&ErrorKind::ReadIdleClosed)
                        .copied()
                        .unwrap_or(0)
                )
            }),
            published(&g).into(),
        ]);
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
                "{}: nginx refused the config at {} {}: {}",
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
    t.notes.push(
        "Ave reload, <= 500ms, <= 1000ms: from SIGHUP until a request is served under the new \
         config, per replica (report.md's reload table). Old workers gone: from SIGHUP until every \
         worker of the previous generation has exited; the nginx master starts the new workers, \
         waits about 100 ms, then tells the old ones to quit, so it is never much under 100 ms. \
         NGF's published reload times (125-155 ms for listeners and upstream servers, 340-370 ms \
         at 1000 routes) sit on the same ~100 ms floor. TTR: from the start of a step (render, \
         nginx -t, reload) until the newest item answered 200 three times in a row; upstream \
         servers are not addressed by clients, so they have none (NGF reports none either). \
         Light load failed: every failed request of the 50 r/s load; in brackets those that were \
         idle keep-alive connections closed by a reload."
            .into(),
    );
    if let Some(last) = results.cases.last_mut() {
        last.tables.push(t);
    }
}

/// NGF v1.0.0's published result for the same growth (tests/scale/results/1.0.0).
fn published(g: &Growth<'_>) -> &'static str {
    match g.spec.what {
        GrowWhat::Listeners => "128 reloads, 0 errors, 134.7 ms, 100% <= 500ms",
        GrowWhat::HttpsListeners => "128 reloads, 0 errors, 153.7 ms, 100% <= 500ms",
        GrowWhat::Routes if !g.spec.pause.0.is_zero() => {
            "2 s delay: 1001 reloads, 0 errors, 341.7 ms, 83.32% <= 500ms, 100% <= 1000ms"
        }
        GrowWhat::Routes => {
            "no delay: 1001 reloads, 0 errors, 369.3 ms, 75.72% <= 500ms, 100% <= 1000ms"
        }
        GrowWhat::UpstreamServers => "116 reloads, 0 errors, 125.4 ms, 100% <= 500ms",
        GrowWhat::Matches => {
            "reload failed one match past the test's count: the http_matches variable was too long"
        }
    }
}

/// Every step reloads every replica; a growth that stopped early must have hit a refused config.
fn reload_check(g: &Growth<'_>, reloads: usize) -> (String, String, String, bool) {
    let taken = g.steps.len();
    let want_reloads = taken * g.replicas as usize;
    let name = format!(
        "every step of the growth reloaded every replica ({} -> {} {}, {} per step)",
        g.initial,
        g.spec.to,
        g.noun(),
        g.spec.by
    );
    let expected = format!(
        "{} steps x {} replica(s) = {} reloads, or a refused config that stopped the growth with nginx's message",
        g.planned,
        g.replicas,
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
            "; nginx refused {} {}: {}",
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

/// Lowest `nginx -t` time of the first and of the last quarter of the steps nginx took.
fn trend(g: &Growth<'_>) -> Option<(f64, f64)> {
    let v: Vec<f64> = g.ok_steps().iter().filter_map(|s| s.validate_ms).collect();
    if v.len() < 4 {
        return None;
    }
    let q = quarters(&v);
    let low = |x: &[f64]| x.iter().copied().fold(f64::INFINITY, f64::min);
    Some((low(&q[0]), low(&q[q.len() - 1])))
}

/// NGF's time-to-ready numbers for one case.
fn ttr_table(case: &str, g: &Growth<'_>) -> Option<Table> {
    let probed: Vec<&Step> = g.steps.iter().filter(|s| s.probed && s.ok()).collect();
    if probed.is_empty() {
        return None;
    }
    let v: Vec<f64> = probed.iter().filter_map(|s| s.ttr_ms).collect();
    let n = probed.len() as u64;
    let within = |ms: f64| v.iter().filter(|&&x| x <= ms).count() as u64;
    let (mean, p50, p99, max) = summary(&v).unwrap_or((f64::NAN, f64::NAN, f64::NAN, f64::NAN));
    let mut t = Table {
        title: format!("{case}: time to ready"),
        columns: [
            "Grown",
            "Probed",
            "Never ready",
            "Mean (ms)",
            "p50 (ms)",
            "p99 (ms)",
            "Max (ms)",
            "<= 500ms",
            "<= 1000ms",
        ]
        .map(String::from)
        .to_vec(),
        rows: vec![vec![
            format!("{} {} -> {}", g.noun(), g.initial, g.reached()),
            n.to_string(),
            (n - v.len() as u64).to_string(),
            f1(mean),
            f1(p50),
            f1(p99),
            f1(max),
            share(within(500.0), n),
            share(within(1000.0), n),
        ]],
        notes: Vec::new(),
    };
    t.notes.push(
        "Time to ready: from the start of a step (render, nginx -t, SIGHUP) until the newest item \
         answered 200 three times in a row. Shares are of every probed item, so one that never \
         answered counts against them."
            .into(),
    );
    t.notes.push(ttr_mechanism(g.spec.what).into());
    Some(t)
}

/// Why time to ready looks the way it does, per kind of growth.
fn ttr_mechanism(what: GrowWhat) -> &'static str {
    match what {
        GrowWhat::Listeners => {
            "A new listener is a new port. The master opens it when it reads the new config and \
             only the new workers inherit it, so the port answers as soon as a new worker runs \
             (connections are refused until then): time to ready is about render + nginx -t + the \
             master's own read of the config + a worker start, with no overlap of generations."
        }
        GrowWhat::HttpsListeners => {
            "A new HTTPS listener is a new port, answered as soon as a new worker runs, as for \
             plain listeners. Each one is a TLS server block: nginx loads its certificate and key \
             and builds an SSL context for it, in nginx -t and again in the master on reload, so \
             both grow with the number of HTTPS listeners, and every probe pays a TLS handshake."
        }
        GrowWhat::Routes | GrowWhat::Matches => {
            "A new route (or match) lives on a port the old workers listen on too. For about \
             100 ms after SIGHUP the master runs both generations (it starts the new workers, \
             waits, then tells the old ones to quit), and a probe connection accepted by an old \
             worker still gets 404. Ready needs 3 answers in a row, so time to ready lands between \
             'new config served' and 'old workers gone', depending on which worker each probe \
             connection reaches."
        }
        GrowWhat::UpstreamServers => {
            "Upstream servers are not addressed by clients; a new one gets its round-robin share \
             once the new workers run."
        }
    }
}

/// Reload work against config size: the steps nginx took, in four quarters.
fn size_table(case: &str, g: &Growth<'_>) -> Table {
    let ok = g.ok_steps();
    let mean = |v: Vec<f64>| {
        if v.is_empty() {
            "-".to_string()
        } else {
            f1(v.iter().sum::<f64>() / v.len() as f64)
        }
    };
    let row = |label: String, s: &[&Step]| {
        let col = |f: fn(&Step) -> Option<f64>| s.iter().filter_map(|x| f(x)).collect::<Vec<_>>();
        let low = col(|x| x.validate_ms)
            .into_iter()
            .fold(f64::INFINITY, f64::min);
        vec![
            label,
            s.len().to_string(),
            mean(col(|x| x.pre_ms)),
            mean(col(|x| x.validate_ms)),
            if low.is_finite() { f1(low) } else { "-".into() },
            mean(col(|x| x.served_ms)),
            mean(col(|x| x.old_gone_ms)),
            mean(col(|x| x.ttr_ms)),
        ]
    };
    let mut t = Table {
        title: format!("{case}: reload time against config size"),
        columns: [
            "Items after the step",
            "Steps",
            "Render + nginx -t (ms)",
            "nginx -t (ms)",
            "nginx -t lowest (ms)",
            "SIGHUP -> served (ms)",
            "SIGHUP -> old workers gone (ms)",
            "Time to ready (ms)",
        ]
        .map(String::from)
        .to_vec(),
        rows: Vec::new(),
        notes: Vec::new(),
    };
    for q in quarters(&ok) {
        let (a, b) = (q[0].count, q[q.len() - 1].count);
        let label = if a == b {
            a.to_string()
        } else {
            format!("{a} - {b}")
        };
        t.rows.push(row(label, &q));
    }
    if !ok.is_empty() {
        t.rows.push(row("all".into(), &ok));
    }
    t.notes.push(
        "Means per quarter of the growth, largest configs last. Render + nginx -t runs before the \
         signal (proxybench's own rendering and nginx parsing the whole file): the part a control \
         plane does, like NGF's event batch processing. nginx -t builds the whole config, and the \
         master builds it again on SIGHUP, so both it and 'SIGHUP -> served' grow with the config; \
         'old workers gone' adds the master's ~100 ms wait before it retires the old generation."
            .into(),
    );
    if let Some((first, last)) = trend(g) {
        t.notes.push(format!(
            "Trend: the lowest nginx -t time of the first quarter is {} ms and of the last {} ms \
             ({}). The lowest value of a quarter tracks the work itself: on a shared machine, \
             scheduling noise only ever adds time.",
            f1(first),
            f1(last),
            if first > 0.0 {
                format!("x{:.2}", last / first)
            } else {
                "-".into()
            }
        ));
    }
    t
}

/// nginx CPU and memory before, during and after the growth.
fn resources_table(case: &str, g: &Growth<'_>, nginx: &[NginxSample]) -> Table {
    let (start, end) = g.span().unwrap_or((f64::INFINITY, f64::INFINITY));
    // Each phase is the samples with lo < t <= hi.
    let phases = [
        ("before the growth", f64::NEG_INFINITY, start),
        ("during the growth", start, end + 1.0),
        ("after the growth", end + 1.0, f64::INFINITY),
    ];
    let mut t = Table {
        title: format!("{case}: nginx CPU and memory"),
        columns: [
            "Phase",
            "Samples",
            "CPU mean (% of a core)",
            "CPU peak",
            "RSS at the end of the phase (MiB)",
            "RSS peak (MiB)",
        ]
        .map(String::from)
        .to_vec(),
        rows: Vec::new(),
        notes: Vec::new(),
    };
    for (label, lo, hi) in phases {
        let s: Vec<&NginxSample> = nginx.iter().filter(|x| x.t_s > lo && x.t_s <= hi).collect();
        if s.is_empty() {
            continue;
        }
        let cpu: Vec<f64> = s.iter().map(|x| x.cpu_pct).collect();
        t.rows.push(vec![
            label.to_string(),
            s.len().to_string(),
            f1(cpu.iter().sum::<f64>() / cpu.len() as f64),
            f1(cpu.iter().copied().fold(0.0, f64::max)),
            mib(s[s.len() - 1].rss),
            mib(s.iter().map(|x| x.rss).max().unwrap_or(0)),
        ]);
    }
    let (a, b) = rss_start_end(g, nginx);
    if let (Some(a), Some(b)) = (a, b) {
        t.notes.push(format!(
            "nginx resident memory (master and workers summed, sampled every second) went from \
             {} MiB before the growth to {} MiB at the end ({}{} MiB). Peaks during the growth \
             include the old workers that are still finishing while the new ones already run.",
            mib(a),
            mib(b),
            if b >= a { "+" } else { "-" },
            mib(a.abs_diff(b))
        ));
    }
    t
}

/// nginx RSS at the last sample before the growth and at the last sample of the case.
fn rss_start_end(g: &Growth<'_>, nginx: &[NginxSample]) -> (Option<u64>, Option<u64>) {
    let start = g.span().map_or(f64::INFINITY, |s| s.0);
    let before = nginx
        .iter()
        .rev()
        .find(|s| s.t_s <= start)
        .or(nginx.first())
        .map(|s| s.rss);
    (before, nginx.last().map(|s| s.rss))
}

/// What nginx said when it refused the config, or that it never did.
fn limit_table(case: &str, g: &Growth<'_>) -> Table {
    let largest = g.ok_steps().last().copied();
    let mut t = Table {
        title: format!("{case}: limits"),
        columns: [
            "Largest config nginx took",
            "nginx -t there (ms)",
            "Refused at",
            "nginx's message",
        ]
        .map(String::from)
        .to_vec(),
        rows: Vec::new(),
        notes: Vec::new(),
    };
    let took = format!("{} {}", g.reached(), g.noun());
    let val = largest.and_then(|s| s.validate_ms).map_or("-".into(), f1);
    match g.limit() {
        Some(l) => {
            t.rows.push(vec![
                took,
                val,
                format!("{} {}", l.count, g.noun()),
                one_line(&l.error),
            ]);
            t.notes.push(
                "nginx kept serving the last config it took (a failed nginx -t or master reload \
                 changes nothing), and the growth stopped there."
                    .into(),
            );
        }
        None => t.rows.push(vec![
            took,
            val,
            "-".into(),
            format!("none: nginx took every step up to {}", g.spec.to),
        ]),
    }
    if g.spec.what == GrowWhat::Matches {
        t.notes.push(
            "NGF v1.0.0 put every match of a path into one variable, a single config parameter, \
             and one match past its test's count made nginx refuse it as too long. proxybench \
             renders one map entry per match, so the config grows in lines rather than in one \
             token; nginx's ~4 KB limit on a single parameter ('too long parameter') only bites a \
             single header value that long."
                .into(),
        );
    }
    t
}

/// The light load's losses, split by mechanism.
struct LightLoss {
    non_2xx: u64,
    idle_closed: u64,
    other: u64,
    idle_near_reload: u64,
}

impl LightLoss {
    fn of(l: &LoadSummary, result: &CaseResult, records: &Records) -> LightLoss {
        let idle_closed = l
            .errors
            .get(&ErrorKind::ReadIdleClosed)
            .copied()
            .unwrap_or(0);
        let near = |t: f64| {
            result.reloads.iter().any(|r| {
                let gone = r.old_workers_exited_ms.unwrap_or(0.0) / 1e3;
                t >= r.t_s && t <= r.t_s + gone + AROUND_RELOAD_S
            })
        };
        let idle_near_reload = records.get(&l.name).map_or(0, |recs| {
            recs.iter()
                .filter(|r| r.error == Some(ErrorKind::ReadIdleClosed))
                .filter(|r| near(r.t_us as f64 / 1e6))
                .count() as u64
        });
        LightLoss {
            non_2xx: l.non_2xx_3xx(),
            idle_closed,
            other: l.error_total() - idle_closed,
            idle_near_reload,
        }
    }

    fn table(&self, case: &str, l: &LoadSummary, bound: u64) -> Table {
        let p = |q: f64| {
            l.latency
                .percentile(q)
                .map_or("-".into(), |us| f2(us as f64 / 1e3))
        };
        Table {
            title: format!("{case}: the light load during the growth"),
            columns: [
                "Requests",
                "Non-2xx",
                "read_idle_closed",
                "of them around a reload",
                "Bound (reloads x connections)",
                "Other errors",
                "Latency p50 (ms)",
                "p99 (ms)",
                "Max (ms)",
            ]
            .map(String::from)
            .to_vec(),
            rows: vec![vec![
                l.attempts().to_string(),
                self.non_2xx.to_string(),
                self.idle_closed.to_string(),
                self.idle_near_reload.to_string(),
                bound.to_string(),
                self.other.to_string(),
                p(50.0),
                p(99.0),
                f2(l.latency.max_us as f64 / 1e3),
            ]],
            notes: vec![format!(
                "On SIGHUP the old workers finish what they are doing and close their idle \
                 keep-alive client connections. A request the client sends on such a connection \
                 as it closes fails before any byte of the answer (read_idle_closed): NGF issue \
                 1147, a known mechanism of nginx reloads, not a lost route. Each reload can close \
                 each of the load's {} connections at most once, hence the bound; 'around a \
                 reload' counts those that failed between a SIGHUP and {} ms after its old \
                 workers were gone. Anything else (non-2xx, resets mid-answer, timeouts) would \
                 be a real loss.",
                l.connections,
                (AROUND_RELOAD_S * 1e3) as u64
            )],
        }
    }
}

/// One of the two loads on a header match after the growth.
#[derive(Debug, Clone)]
struct MatchLoad {
    name: &'static str,
    value: String,
    /// 1-based position of its value in the rendered map (`vK` is entry K+1).
    position: Option<u32>,
    summary: LoadSummary,
    start_s: f64,
    /// nginx CPU per request while it ran (all loads' requests in the same seconds).
    cpu_us: Option<f64>,
}

/// The first-match and last-match loads of the matches case.
struct MatchLoads {
    first: MatchLoad,
    last: MatchLoad,
}

impl MatchLoads {
    fn of(
        case: &Case,
        result: &CaseResult,
        g: &Growth<'_>,
        nginx: &[NginxSample],
        records: &Records,
    ) -> Option<MatchLoads> {
        let one = |name: &'static str| -> Option<MatchLoad> {
            let spec = case.loads.iter().find(|l| l.name == name)?;
            let summary = result.loads.iter().find(|l| l.name == name)?.clone();
            let value = spec
                .headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(&g.spec.header))
                .map(|(_, v)| v.clone())
                .unwrap_or_default();
            let position = value
                .strip_prefix('v')
                .and_then(|k| k.parse::<u32>().ok())
                .map(|k| k + 1);
            let (from, to) = (summary.start_s, summary.start_s + summary.elapsed_s);
            Some(MatchLoad {
                name,
                value,
                position,
                cpu_us: cpu_per_request(nginx, records, from, to),
                start_s: spec.start.0.as_secs_f64(),
                summary,
            })
        };
        Some(MatchLoads {
            first: one(FIRST)?,
            last: one(LAST)?,
        })
    }

    /// The comparison is only fair when both loads ran on the finished config and got answers.
    fn ran_after_growth(&self, g: &Growth<'_>) -> (String, String, String, bool) {
        let end = g.span().map_or(0.0, |s| s.1);
        let begin = self.first.start_s.min(self.last.start_s);
        let want_last = format!("v{}", g.reached().saturating_sub(1));
        let bad: u64 = self.first.summary.failures() + self.last.summary.failures();
        let mut actual = format!(
            "growth ended at {} s, loads began at {} s; last-match asks for {}, the last match grown is {}; {} failed requests",
            f1(end),
            f1(begin),
            self.last.value,
            want_last,
            bad
        );
        let pass = end <= begin && self.last.value == want_last && g.finished() && bad == 0;
        if end > begin {
            actual.push_str(
                " (the growth did not finish in time: start the two loads later in the scenario)",
            );
        }
        (
            "the first-match and last-match loads ran on the finished config and got only 200s".into(),
            "growth ends before the loads begin, last-match asks for the last match grown, 0 failed".into(),
            actual,
            pass,
        )
    }

    /// Extra CPU per entry of the map the last match walks past.
    fn per_entry_ns(&self) -> Option<f64> {
        let (f, l) = (self.first.cpu_us?, self.last.cpu_us?);
        let (pf, pl) = (self.first.position?, self.last.position?);
        (pl > pf).then(|| (l - f) * 1e3 / f64::from(pl - pf))
    }

    fn table(&self, case: &str) -> Table {
        let row = |m: &MatchLoad| {
            let s = &m.summary;
            let ms = |us: u64| f2(us as f64 / 1e3);
            let p = |q: f64| s.latency.percentile(q).map_or("-".into(), ms);
            vec![
                m.name.to_string(),
                format!(
                    "{} (entry {})",
                    m.value,
                    m.position.map_or("-".into(), |p| p.to_string())
                ),
                s.requests.to_string(),
                format!("{:.2}", s.requests as f64 / s.elapsed_s.max(1e-9)),
                s.failures().to_string(),
                f2(s.latency.mean_us / 1e3),
                p(50.0),
                p(99.0),
                ms(s.latency.max_us),
                m.cpu_us.map_or("-".into(), f1),
            ]
        };
        let mut t = Table {
            title: format!("{case}: first match vs last match"),
            columns: [
                "Load",
                "x-match",
                "Requests",
                "Requests/sec",
                "Failed",
                "Latency mean (ms)",
                "p50 (ms)",
                "p99 (ms)",
                "Max (ms)",
                "nginx CPU per request (us)",
            ]
            .map(String::from)
            .to_vec(),
            rows: vec![row(&self.first), row(&self.last)],
            notes: Vec::new(),
        };
        let (f, l) = (&self.first.summary, &self.last.summary);
        let ratio = |a: f64, b: f64| {
            if b > 0.0 {
                format!("x{:.2}", a / b)
            } else {
                "-".into()
            }
        };
        let rps = |s: &LoadSummary| s.requests as f64 / s.elapsed_s.max(1e-9);
        let pct = |s: &LoadSummary, q: f64| s.latency.percentile(q).unwrap_or(0) as f64;
        t.rows.push(vec![
            "last / first".into(),
            String::new(),
            String::new(),
            ratio(rps(l), rps(f)),
            String::new(),
            ratio(l.latency.mean_us, f.latency.mean_us),
            ratio(pct(l, 50.0), pct(f, 50.0)),
            ratio(pct(l, 99.0), pct(f, 99.0)),
            ratio(l.latency.max_us as f64, f.latency.max_us as f64),
            match (self.last.cpu_us, self.first.cpu_us) {
                (Some(a), Some(b)) => ratio(a, b),
                _ => "-".into(),
            },
        ]);
        t.notes.push(format!(
            "Closed loop, as NGF's wrk runs, one after the other on the finished config. nginx \
             tests a map's regular expressions in the order they are written and stops at the \
             first that matches; proxybench renders each header match as one regex entry of one \
             map, so the first match costs one test and the last costs one per entry.{} nginx CPU \
             per request is nginx's CPU time over the seconds the load ran, divided by every \
             request answered in them (the light load's too).",
            match self.per_entry_ns() {
                Some(ns) => format!(
                    " The extra CPU of the last match over the first, spread over the entries \
                     between them, is {} ns per entry.",
                    f1(ns)
                ),
                None => String::new(),
            }
        ));
        t.notes.push(
            "NGF v1.0.0 saw no noticeable difference between its first and last match (about \
             47 ms either way, measured across a cloud network, where the network dominates). On \
             loopback nginx's own work is what a request costs, so the position of the match \
             shows. A map keyed by exact strings (a hash lookup) would cost the same for every \
             match; regexes let one key combine several conditions."
                .into(),
        );
        t
    }

    fn finding(&self) -> String {
        let rps = |s: &LoadSummary| s.requests as f64 / s.elapsed_s.max(1e-9);
        let p50 = |s: &LoadSummary| s.latency.percentile(50.0).unwrap_or(0) as f64 / 1e3;
        format!(
            "First match ({}) vs last match ({}): {:.0} vs {:.0} requests/s, p50 {} vs {} ms, \
             nginx CPU {} vs {} us per request{}.",
            self.first.value,
            self.last.value,
            rps(&self.first.summary),
            rps(&self.last.summary),
            f2(p50(&self.first.summary)),
            f2(p50(&self.last.summary)),
            self.first.cpu_us.map_or("-".into(), f1),
            self.last.cpu_us.map_or("-".into(), f1),
            self.per_entry_ns().map_or(String::new(), |ns| format!(
                ": the map's regexes are tried in order, about {} ns each",
                f1(ns)
            ))
        )
    }
}

/// nginx CPU microseconds per request answered, over the whole sample intervals inside
/// `[from_s, to_s]` (every load's requests count: they share the worker).
fn cpu_per_request(
    nginx: &[NginxSample],
    records: &Records,
    from_s: f64,
    to_s: f64,
) -> Option<f64> {
    let (mut cpu_s, mut n) = (0.0, 0u64);
    for w in nginx.windows(2) {
        let (a, b) = (w[0].t_s, w[1].t_s);
        if a < from_s || b > to_s {
            continue;
        }
        cpu_s += w[1].cpu_pct / 100.0 * (b - a);
        let (lo, hi) = ((a * 1e6) as u64, (b * 1e6) as u64);
        n += records
            .values()
            .map(|r| {
                (r.partition_point(|x| x.t_us < hi) - r.partition_point(|x| x.t_us < lo)) as u64
            })
            .sum::<u64>();
    }
    (n > 0).then(|| cpu_s * 1e6 / n as f64)
}

/// Series to chart against time: items in the config, time to ready, render + nginx -t, nginx -t.
fn series(g: &Growth<'_>, result: &CaseResult) -> Vec<Series> {
    let ok = g.ok_steps();
    let mut out = vec![Series {
        name: format!("{} in the config", g.noun()),
        unit: "items".into(),
        points: std::iter::once((g.span().map_or(0.0, |s| s.0), f64::from(g.initial)))
            .chain(ok.iter().map(|s| (s.end_s, f64::from(s.count))))
            .collect(),
    }];
    if ok.iter().any(|s| s.ttr_ms.is_some()) {
        out.push(Series {
            name: "time to ready".into(),
            unit: "ms".into(),
            points: ok.iter().filter_map(|s| Some((s.t_s, s.ttr_ms?))).collect(),
        });
    }
    out.push(Series {
        name: "render + nginx -t before each reload".into(),
        unit: "ms".into(),
        points: ok.iter().filter_map(|s| Some((s.t_s, s.pre_ms?))).collect(),
    });
    out.push(Series {
        name: "nginx -t".into(),
        unit: "ms".into(),
        points: result
            .reloads
            .iter()
            .filter(|r| r.error.is_none())
            .map(|r| (r.t_s, r.validate_ms))
            .collect(),
    });
    out
}

/// One sentence each: the growth, its reload and ready times, memory.
fn findings(g: &Growth<'_>, result: &CaseResult, nginx: &[NginxSample]) -> Vec<String> {
    let mut out = Vec::new();
    let ok = g.ok_steps();
    let r = report::ReloadStats::of(&result.reloads);
    out.push(format!(
        "Grew {} from {} to {} in {} steps of {}{}: {} reloads, {} failed, average {} ms from SIGHUP to the new config served.",
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
                "nginx -t took {} ms at {} {} and {} ms at {}.",
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
    if let (Some(a), Some(b)) = rss_start_end(g, nginx) {
        out.push(format!(
            "nginx resident memory {} MiB before the growth, {} MiB at the end.",
            mib(a),
            mib(b)
        ));
    }
    if let Some(l) = g.limit() {
        out.push(format!(
            "nginx refused the config at {} {}: {}",
            l.count,
            g.noun(),
            one_line(&l.error)
        ));
    }
    out
}

/// nginx's message (several lines when it prints several) on one line.
fn one_line(e: &Option<String>) -> String {
    e.as_deref().unwrap_or("").trim().replace('\n', " / ")
}

fn f1(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.1}")
    } else {
        "-".into()
    }
}

fn f2(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.2}")
    } else {
        "-".into()
    }
}

fn mib(b: u64) -> String {
    format!("{:.1}", b as f64 / (1024.0 * 1024.0))
}

fn share(k: u64, n: u64) -> String {
    if n == 0 {
        "-".into()
    } else {
        format!("{:.2}%", k as f64 * 100.0 / n as f64)
    }
}
