//! The matches case's comparison: a closed-loop load on the first header match and one on the
//! last, on the finished config, with the proxy's CPU per request for each.

use super::steps::{Growth, ProxySample};
use super::{f1, f2, fill, text, Records, FIRST, LAST};
use model::{CaseResult, Cell, LoadSummary, Table};
use scenario::Case;

/// One of the two loads on a header match after the growth.
#[derive(Debug, Clone)]
pub(super) struct MatchLoad {
    pub(super) name: &'static str,
    pub(super) value: String,
    /// 1-based position of its value in the rendered map (`vK` is entry K+1).
    pub(super) position: Option<u32>,
    pub(super) summary: LoadSummary,
    pub(super) start_s: f64,
    /// The proxy's CPU per request while it ran (all loads' requests in the same seconds).
    pub(super) cpu_us: Option<f64>,
}

/// The first-match and last-match loads of the matches case.
pub(super) struct MatchLoads {
    pub(super) first: MatchLoad,
    pub(super) last: MatchLoad,
}

impl MatchLoads {
    pub(super) fn of(
        case: &Case,
        result: &CaseResult,
        g: &Growth<'_>,
        samples: &[ProxySample],
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
                cpu_us: cpu_per_request(samples, records, from, to),
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
    pub(super) fn ran_after_growth(&self, g: &Growth<'_>) -> (String, String, String, bool) {
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
    pub(super) fn per_entry_ns(&self) -> Option<f64> {
        let (f, l) = (self.first.cpu_us?, self.last.cpu_us?);
        let (pf, pl) = (self.first.position?, self.last.position?);
        (pl > pf).then(|| (l - f) * 1e3 / f64::from(pl - pf))
    }

    pub(super) fn table(&self, case: &str) -> Table {
        let row = |m: &MatchLoad| {
            let s = &m.summary;
            let ms = |us: u64| f2(us as f64 / 1e3);
            let p = |q: f64| s.latency.percentile(q).map_or_else(Cell::dash, ms);
            vec![
                Cell::text(m.name),
                Cell::text(format!(
                    "{} (entry {})",
                    m.value,
                    m.position.map_or("-".into(), |p| p.to_string())
                )),
                Cell::Int(s.requests as i64),
                Cell::num(s.requests as f64 / s.elapsed_s.max(1e-9), 2),
                Cell::Int(s.failures() as i64),
                f2(s.latency.mean_us / 1e3),
                p(50.0),
                p(99.0),
                ms(s.latency.max_us),
                m.cpu_us.map_or_else(Cell::dash, f1),
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
                "Proxy CPU per request (us)",
            ]
            .map(String::from)
            .to_vec(),
            rows: vec![row(&self.first), row(&self.last)],
            notes: Vec::new(),
        };
        let (f, l) = (&self.first.summary, &self.last.summary);
        let ratio = |a: f64, b: f64| {
            if b > 0.0 {
                Cell::list([Cell::text("x"), Cell::num(a / b, 2)], "")
            } else {
                Cell::dash()
            }
        };
        let rps = |s: &LoadSummary| s.requests as f64 / s.elapsed_s.max(1e-9);
        let pct = |s: &LoadSummary, q: f64| s.latency.percentile(q).unwrap_or(0) as f64;
        t.rows.push(vec![
            Cell::text("last / first"),
            Cell::text(""),
            Cell::text(""),
            ratio(rps(l), rps(f)),
            Cell::text(""),
            ratio(l.latency.mean_us, f.latency.mean_us),
            ratio(pct(l, 50.0), pct(f, 50.0)),
            ratio(pct(l, 99.0), pct(f, 99.0)),
            ratio(l.latency.max_us as f64, f.latency.max_us as f64),
            match (self.last.cpu_us, self.first.cpu_us) {
                (Some(a), Some(b)) => ratio(a, b),
                _ => Cell::dash(),
            },
        ]);
        let per_entry = match self.per_entry_ns() {
            Some(ns) => fill("matches_per_entry", &[("ns", &f1(ns))]),
            None => String::new(),
        };
        t.notes
            .push(fill("matches_order", &[("per_entry", &per_entry)]));
        t.notes.push(text("matches_ngf").into());
        t
    }

    pub(super) fn finding(&self) -> String {
        let rps = |s: &LoadSummary| s.requests as f64 / s.elapsed_s.max(1e-9);
        let p50 = |s: &LoadSummary| s.latency.percentile(50.0).unwrap_or(0) as f64 / 1e3;
        format!(
            "First match ({}) vs last match ({}): {:.0} vs {:.0} requests/s, p50 {} vs {} ms, \
             proxy CPU {} vs {} us per request{}.",
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

/// The proxy's CPU microseconds per request answered, over the whole sample intervals inside
/// `[from_s, to_s]` (every load's requests count: they share the worker).
pub(super) fn cpu_per_request(
    samples: &[ProxySample],
    records: &Records,
    from_s: f64,
    to_s: f64,
) -> Option<f64> {
    let (mut cpu_s, mut n) = (0.0, 0u64);
    for w in samples.windows(2) {
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
