//! The scale analysis' per-case tables: time to ready, reload time against config size, proxy
//! CPU and memory by phase, limits hit, and what the light load lost.

use super::steps::{quarters, summary, Growth, ProxySample, Step};
use super::{f1, f2, fill, mib, one_line, share, text, trend, Records, AROUND_RELOAD_S};
use crate::analysis::common;
use model::{CaseResult, Cell, ErrorKind, LoadSummary, Table};
use scenario::GrowWhat;

/// NGF's time-to-ready numbers for one case.
pub(super) fn ttr_table(case: &str, g: &Growth<'_>) -> Option<Table> {
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
            Cell::text(format!("{} {} -> {}", g.noun(), g.initial, g.reached())),
            Cell::Int(n as i64),
            Cell::Int((n - v.len() as u64) as i64),
            f1(mean),
            f1(p50),
            f1(p99),
            f1(max),
            share(within(500.0), n),
            share(within(1000.0), n),
        ]],
        notes: Vec::new(),
    };
    t.notes.push(text("ttr_note").into());
    t.notes.push(ttr_mechanism(g.spec.what).into());
    Some(t)
}

/// Why time to ready looks the way it does, per kind of growth.
pub(super) fn ttr_mechanism(what: GrowWhat) -> &'static str {
    text(match what {
        GrowWhat::Listeners => "ttr_listeners",
        GrowWhat::HttpsListeners => "ttr_https_listeners",
        GrowWhat::Routes | GrowWhat::GrpcRoutes | GrowWhat::Matches => "ttr_routes",
        GrowWhat::UpstreamServers => "ttr_upstream_servers",
    })
}

/// Reload work against config size: the steps the proxy took, in four quarters.
pub(super) fn size_table(case: &str, g: &Growth<'_>) -> Table {
    let ok = g.ok_steps();
    let mean = |v: Vec<f64>| {
        if v.is_empty() {
            Cell::dash()
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
            Cell::text(label),
            Cell::Int(s.len() as i64),
            mean(col(|x| x.pre_ms)),
            mean(col(|x| x.validate_ms)),
            if low.is_finite() {
                f1(low)
            } else {
                Cell::dash()
            },
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
            "Render + config check (ms)",
            "Config check (ms)",
            "Config check lowest (ms)",
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
    t.notes.push(text("size_note").into());
    if let Some((first, last)) = trend(g) {
        t.notes.push(fill(
            "trend",
            &[
                ("first", &f1(first)),
                ("last", &f1(last)),
                (
                    "ratio",
                    &if first > 0.0 {
                        format!("x{:.2}", last / first)
                    } else {
                        "-".into()
                    },
                ),
            ],
        ));
    }
    t
}

/// The proxy's CPU and memory before, during and after the growth; `kind` names it.
pub(super) fn resources_table(
    case: &str,
    kind: &str,
    g: &Growth<'_>,
    samples: &[ProxySample],
) -> Table {
    let (start, end) = g.span().unwrap_or((f64::INFINITY, f64::INFINITY));
    // Each phase is the samples with lo < t <= hi.
    let phases = [
        ("before the growth", f64::NEG_INFINITY, start),
        ("during the growth", start, end + 1.0),
        ("after the growth", end + 1.0, f64::INFINITY),
    ];
    let mut t = Table {
        title: format!("{case}: {kind} CPU and memory"),
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
        let s: Vec<&ProxySample> = samples
            .iter()
            .filter(|x| x.t_s > lo && x.t_s <= hi)
            .collect();
        if s.is_empty() {
            continue;
        }
        let cpu: Vec<f64> = s.iter().map(|x| x.cpu_pct).collect();
        t.rows.push(vec![
            Cell::text(label),
            Cell::Int(s.len() as i64),
            f1(cpu.iter().sum::<f64>() / cpu.len() as f64),
            f1(cpu.iter().copied().fold(0.0, f64::max)),
            mib(s[s.len() - 1].rss),
            mib(s.iter().map(|x| x.rss).max().unwrap_or(0)),
        ]);
    }
    if t.rows.is_empty() {
        t.notes.push(fill("no_samples", &[]));
    }
    let (a, b) = rss_start_end(g, samples);
    if let (Some(a), Some(b)) = (a, b) {
        t.notes.push(fill(
            "memory",
            &[
                ("before", &mib(a)),
                ("after", &mib(b)),
                ("sign", &if b >= a { "+" } else { "-" }),
                ("change", &mib(a.abs_diff(b))),
            ],
        ));
    }
    t
}

/// The proxy's RSS at the last sample before the growth and at the last sample of the case.
pub(super) fn rss_start_end(g: &Growth<'_>, samples: &[ProxySample]) -> (Option<u64>, Option<u64>) {
    let start = g.span().map_or(f64::INFINITY, |s| s.0);
    let before = samples
        .iter()
        .rev()
        .find(|s| s.t_s <= start)
        .or(samples.first())
        .map(|s| s.rss);
    (before, samples.last().map(|s| s.rss))
}

/// What the proxy said when it refused the config, or that it never did.
pub(super) fn limit_table(case: &str, g: &Growth<'_>) -> Table {
    let largest = g.ok_steps().last().copied();
    let mut t = Table {
        title: format!("{case}: limits"),
        columns: [
            "Largest config the proxy took",
            "Config check there (ms)",
            "Refused at",
            "The proxy's message",
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
                Cell::text(took),
                val,
                Cell::text(format!("{} {}", l.count, g.noun())),
                Cell::text(one_line(&l.error)),
            ]);
            t.notes.push(text("refused").into());
        }
        None => t.rows.push(vec![
            Cell::text(took),
            val,
            Cell::dash(),
            Cell::text(format!(
                "none: the proxy took every step up to {}",
                g.spec.to
            )),
        ]),
    }
    if g.spec.what == GrowWhat::Matches {
        t.notes.push(text("matches_limit").into());
    }
    t
}

/// The light load's losses, split by mechanism.
pub(super) struct LightLoss {
    pub(super) non_2xx: u64,
    pub(super) idle_closed: u64,
    pub(super) other: u64,
    pub(super) idle_near_reload: model::Measured<u64>,
}

impl LightLoss {
    pub(super) fn of(l: &LoadSummary, result: &CaseResult, records: &Records) -> LightLoss {
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
        let idle_near_reload = common::load_records(result, records, &l.name).map(|recs| {
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

    pub(super) fn table(&self, case: &str, l: &LoadSummary, bound: u64) -> Table {
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
                Cell::Int(l.attempts() as i64),
                Cell::Int(self.non_2xx as i64),
                Cell::Int(self.idle_closed as i64),
                Cell::measured(&self.idle_near_reload, |n| Cell::Int(*n as i64)),
                Cell::Int(bound as i64),
                Cell::Int(self.other as i64),
                p(50.0),
                p(99.0),
                f2(l.latency.max_us as f64 / 1e3),
            ]],
            notes: vec![fill(
                "light_1147",
                &[
                    ("connections", &l.connections),
                    ("around_ms", &((AROUND_RELOAD_S * 1e3) as u64)),
                ],
            )],
        }
    }
}
