//! The two sides of a gated comparison, each one or more runs: what makes a run fit to be
//! gated (complete, its target usable, its loads run for the time they were planned), and what
//! makes runs comparable (the same scenario, form, cases, loads and proxy).

use crate::Error;
use model::RunResults;
use std::path::Path;

/// One run of a side: its results directory and its data.json.
pub type Run<'a> = (&'a Path, &'a RunResults);

/// A load that ran less than this share of its planned time did not run what was planned.
pub const SHORT_SHARE: f64 = 0.9;

/// How a run is named in messages: `A` when its side has one run, `A run 2` otherwise.
pub fn who(side: &str, run: usize, runs: usize) -> String {
    if runs == 1 {
        side.to_string()
    } else {
        format!("{side} run {}", run + 1)
    }
}

/// Why a run cannot be gated, when it cannot: cut short (interrupted, a case aborted, a
/// partial outcome) or its target unusable (every request of a load failed: exit 3).
pub fn unfit(r: &RunResults) -> Option<String> {
    if r.partial {
        return Some(format!(
            "the run is partial ({}): a run cut short is not comparable",
            r.abort_reason.as_deref().unwrap_or("it stopped early")
        ));
    }
    let unusable = r.unusable_loads();
    if !unusable.is_empty() {
        return Some(format!(
            "every request failed in {} (the target was unusable: exit 3)",
            unusable.join(", ")
        ));
    }
    None
}

/// The first run with a load that ran far less than its planned time (under [`SHORT_SHARE`]
/// of it): a dead run that was not marked partial. A load given a number of requests as well
/// as a time ends early by design; it is recognised by every run ending early after the same
/// number of attempts, which a load cut short in one run does not. Returns the run's index and
/// why.
fn short_run(runs: &[&RunResults]) -> Option<(usize, String)> {
    let first = runs.first()?;
    let short = |l: &model::LoadSummary| {
        l.planned_s
            .is_some_and(|p| p > 0.0 && l.elapsed_s < SHORT_SHARE * p)
    };
    for (ci, case) in first.cases.iter().enumerate() {
        for (li, load) in case.loads.iter().enumerate() {
            let of = |r: &RunResults| r.cases.get(ci).and_then(|c| c.loads.get(li)).cloned();
            let loads: Vec<model::LoadSummary> = runs.iter().filter_map(|r| of(r)).collect();
            let by_count = loads
                .iter()
                .all(|l| short(l) && l.attempts() == load.attempts());
            for (k, l) in loads.iter().enumerate() {
                let Some(planned) = l.planned_s else {
                    continue;
                };
                if short(l) && !by_count {
                    return Some((
                        k,
                        format!(
                            "load '{}' of case '{}' ran {:.1} s of its planned {planned} s",
                            l.name, case.name, l.elapsed_s
                        ),
                    ));
                }
            }
        }
    }
    None
}

/// Refuses sides that cannot be gated: an empty side, a run unfit for gating ([`unfit`]), runs
/// of a side that differ from its first run, sides that differ from each other
/// ([`check_comparable`], and the proxy kind), or a load that ran far less than planned. The
/// message names the first problem and the run.
pub fn check(a: &[Run<'_>], b: &[Run<'_>]) -> Result<(), Error> {
    for (name, side) in [("A", a), ("B", b)] {
        if side.is_empty() {
            return Err(Error::Mismatch(format!("side {name} has no run")));
        }
        for (i, (dir, r)) in side.iter().enumerate() {
            if let Some(why) = unfit(r) {
                return Err(Error::Unfit {
                    who: who(name, i, side.len()),
                    dir: dir.to_path_buf(),
                    why,
                });
            }
        }
        let first = side[0].1;
        for (i, (_, r)) in side.iter().enumerate().skip(1) {
            let (x, y) = (who(name, 0, side.len()), who(name, i, side.len()));
            check_comparable((&x, first), (&y, r))?;
            let version = |r: &RunResults| r.env.proxy.lines().next().unwrap_or("").to_string();
            if version(first) != version(r) {
                return Err(Error::Mismatch(format!(
                    "{x} ran {}, {y} ran {}: the runs of a side are runs of one build",
                    version(first),
                    version(r)
                )));
            }
        }
    }
    let all: Vec<&RunResults> = a.iter().chain(b).map(|(_, r)| *r).collect();
    if let Some((k, why)) = short_run(&all) {
        let (name, i, side) = if k < a.len() {
            ("A", k, a)
        } else {
            ("B", k - a.len(), b)
        };
        return Err(Error::Unfit {
            who: who(name, i, side.len()),
            dir: side[i].0.to_path_buf(),
            why,
        });
    }
    let (an, bn) = (who("A", 0, a.len()), who("B", 0, b.len()));
    check_comparable((&an, a[0].1), (&bn, b[0].1))?;
    let kind = |r: &RunResults| crate::fmt::proxy_name(&r.env).to_string();
    if kind(a[0].1) != kind(b[0].1) {
        return Err(Error::Mismatch(format!(
            "{an} ran proxy {}, {bn} ran {}",
            kind(a[0].1),
            kind(b[0].1)
        )));
    }
    Ok(())
}

/// Refuses to gate runs that are not of the same thing: another scenario, another form, other
/// cases, other loads, or loads run differently. `x` and `y` name the runs (`A`, `B run 2`);
/// the message names the first difference.
pub fn check_comparable(
    (x, a): (&str, &RunResults),
    (y, b): (&str, &RunResults),
) -> Result<(), Error> {
    let differ = |what: String| Err(Error::Mismatch(what));
    if a.scenario != b.scenario {
        return differ(format!(
            "{x} ran scenario '{}', {y} ran '{}'",
            a.scenario, b.scenario
        ));
    }
    if a.quick != b.quick {
        let form = |r: &RunResults| if r.quick { "--quick" } else { "full" };
        return differ(format!(
            "{x} ran the {} form, {y} the {} form",
            form(a),
            form(b)
        ));
    }
    let names = |r: &RunResults| r.cases.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
    if names(a) != names(b) {
        return differ(format!(
            "{x} ran cases {}, {y} ran {}",
            names(a).join(", "),
            names(b).join(", ")
        ));
    }
    for (ca, cb) in a.cases.iter().zip(&b.cases) {
        let loads =
            |c: &model::CaseResult| c.loads.iter().map(|l| l.name.clone()).collect::<Vec<_>>();
        if loads(ca) != loads(cb) {
            return differ(format!(
                "case '{}': {x} ran loads {}, {y} ran {}",
                ca.name,
                loads(ca).join(", "),
                loads(cb).join(", ")
            ));
        }
        for (la, lb) in ca.loads.iter().zip(&cb.loads) {
            let path =
                |u: &str| model::url::Url::parse(u).map_or_else(|_| "/".to_string(), |u| u.path);
            let mode = |l: &model::LoadSummary| match &l.mode {
                model::LoadMode::Closed => "closed loop".to_string(),
                model::LoadMode::Open { rate, .. } => format!("open loop at {rate}/s"),
            };
            let planned = |l: &model::LoadSummary| match l.planned_s {
                Some(s) => format!("{s}s"),
                None => "a request count".into(),
            };
            let facts: [(&str, String, String); 6] = [
                ("method", la.method.clone(), lb.method.clone()),
                ("path", path(&la.url), path(&lb.url)),
                ("mode", mode(la), mode(lb)),
                (
                    "connections",
                    la.connections.to_string(),
                    lb.connections.to_string(),
                ),
                ("threads", la.threads.to_string(), lb.threads.to_string()),
                ("length", planned(la), planned(lb)),
            ];
            for (what, v, w) in facts {
                if v != w {
                    return differ(format!(
                        "case '{}', load '{}': {what} {v} in {x}, {w} in {y}",
                        ca.name, la.name
                    ));
                }
            }
        }
    }
    Ok(())
}
