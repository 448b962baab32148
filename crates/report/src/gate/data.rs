//! What a gate's bootstrap resamples: a run's load cut into whole seconds, from its per-request
//! records (`requests/<case>/<load>.bin`) when every run has them, else from the per-second
//! values of data.json (runs from before records were kept, loads run on agents).

use super::bootstrap::Stat;
use crate::charts::plan::full_seconds;
use model::metric;
use model::{LoadSummary, RequestRecord, RunResults, Second};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A load's records as read: `Ok(None)` when the run has none for it, `Err` with why when the
/// file could not be read.
type Read = Result<Option<Vec<RequestRecord>>, Unmeasurable>;

/// One run and the request records read from its directory so far.
pub struct Loaded<'a> {
    dir: &'a Path,
    /// The run's data.json.
    pub run: &'a RunResults,
    /// Records by (case, load) index.
    records: BTreeMap<(usize, usize), Read>,
}

impl<'a> Loaded<'a> {
    /// A run read from `dir`, with no records read yet.
    pub fn new(dir: &'a Path, run: &'a RunResults) -> Loaded<'a> {
        Loaded {
            dir,
            run,
            records: BTreeMap::new(),
        }
    }

    /// The records of load `li` of case `ci`, read on first use.
    fn records(&mut self, ci: usize, li: usize) -> &Read {
        let (dir, run) = (self.dir, self.run);
        self.records
            .entry((ci, li))
            .or_insert_with(|| read_records(dir, run, ci, li))
    }
}

/// The records file of a load, where the recorder put it ([`model::results_dir::requests_path`]);
/// none for a distributed load (its agents keep no per-request records) or a run recorded
/// without them.
fn read_records(dir: &Path, run: &RunResults, ci: usize, li: usize) -> Read {
    let case = &run.cases[ci];
    let load = &case.loads[li];
    if case.distributed.iter().any(|d| d.load == load.name) {
        return Ok(None);
    }
    let path = model::results_dir::requests_path(dir, &case.name, li, &load.name);
    if !path.is_file() {
        return Ok(None);
    }
    let unread = |e: &dyn std::fmt::Display| Unmeasurable(format!("{}: {e}", path.display()));
    let bytes = std::fs::read(&path).map_err(|e| unread(&e))?;
    model::records::decode(&bytes)
        .map(Some)
        .map_err(|e| unread(&e))
}

/// Where a gate's numbers come from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// Both runs' per-request records.
    Requests,
    /// The per-second values, and why not the records.
    Seconds(String),
}

impl Source {
    /// The short name in the gates table.
    pub fn label(&self) -> &'static str {
        match self {
            Source::Requests => "requests",
            Source::Seconds(_) => "seconds",
        }
    }

    /// Why the per-second values were used.
    pub fn note(&self) -> Option<String> {
        match self {
            Source::Requests => None,
            Source::Seconds(why) => Some(format!("per-second values: {why}")),
        }
    }
}

/// Records when every load involved has them in every run of both sides, else the per-second
/// values with the first reason why not.
pub fn source(a: &mut [Loaded<'_>], b: &mut [Loaded<'_>], ci: usize, idx: &[usize]) -> Source {
    match side_gaps("A", a, ci, idx).or_else(|| side_gaps("B", b, ci, idx)) {
        Some(why) => Source::Seconds(why),
        None => Source::Requests,
    }
}

/// Why one of a side's runs cannot give request records for loads `idx`, if one cannot.
fn side_gaps(name: &str, side: &mut [Loaded<'_>], ci: usize, idx: &[usize]) -> Option<String> {
    let runs = side.len();
    side.iter_mut()
        .enumerate()
        .find_map(|(k, l)| side_gap(&super::sides::who(name, k, runs), l, ci, idx))
}

/// Why one side cannot give request records for loads `idx`, if it cannot.
fn side_gap(name: &str, l: &mut Loaded<'_>, ci: usize, idx: &[usize]) -> Option<String> {
    for &li in idx {
        let load = l.run.cases[ci].loads[li].name.clone();
        match l.records(ci, li) {
            Ok(Some(_)) => {}
            Ok(None) => {
                return Some(format!(
                    "{name} has no request records for load '{load}' (a run from before they \
                     were kept, or a load run on agents)"
                ))
            }
            Err(why) => {
                return Some(format!(
                    "{name}'s request records could not be read ({why})"
                ))
            }
        }
    }
    None
}

/// How a metric is read from the per-second values, when that is not plain.
pub fn how(metric: &str, source: &Source) -> Option<String> {
    match (source, metric) {
        (Source::Seconds(_), m) if matches!(m, "p50" | "p90" | "p99") => Some(format!(
            "{m} from per-second values is the mean of each second's {m}, weighted by its \
             responses"
        )),
        _ => None,
    }
}

/// A statistic with the number of blocks (seconds) it is over.
pub struct Blocked {
    /// The statistic.
    pub stat: Stat,
    /// Seconds.
    pub blocks: usize,
}

/// The seconds the loads cover (from their timelines and, with records, their records) in
/// order, and whether each is a whole second for every load that ran in it.
fn seconds(loads: &[&LoadSummary], recs: &[&[RequestRecord]]) -> (Vec<u32>, Vec<bool>) {
    let mut all: BTreeSet<u32> = BTreeSet::new();
    for l in loads {
        all.extend(l.timeline.iter().map(|s| s.t));
    }
    for r in recs {
        all.extend(r.iter().map(|x| (x.t_us / 1_000_000) as u32));
    }
    let ts: Vec<u32> = all.into_iter().collect();
    let fulls: Vec<BTreeSet<u32>> = loads
        .iter()
        .map(|l| full_seconds(l).map(|s| s.t).collect())
        .collect();
    let ran: Vec<BTreeSet<u32>> = loads
        .iter()
        .map(|l| l.timeline.iter().map(|s| s.t).collect())
        .collect();
    let full = ts
        .iter()
        .map(|t| {
            let mut any = false;
            for (f, r) in fulls.iter().zip(&ran) {
                if r.contains(t) {
                    any = true;
                    if !f.contains(t) {
                        return false;
                    }
                }
            }
            any
        })
        .collect();
    (ts, full)
}

/// Why a metric cannot be measured on a run (no per-second data, too few blocks, an unknown
/// metric...): the reason its gate's verdict is "not measurable".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Unmeasurable(pub(crate) String);

impl From<String> for Unmeasurable {
    fn from(s: String) -> Unmeasurable {
        Unmeasurable(s)
    }
}

impl From<&str> for Unmeasurable {
    fn from(s: &str) -> Unmeasurable {
        Unmeasurable(s.to_string())
    }
}

/// The statistic of `metric` over loads `idx` of case `ci` of one run, from `source`.
pub(crate) fn stat(
    l: &mut Loaded<'_>,
    ci: usize,
    idx: &[usize],
    m: &str,
    source: &Source,
) -> Result<Blocked, Unmeasurable> {
    if *source == Source::Requests {
        for &li in idx {
            // Read now, so the borrow below is shared only.
            let _ = l.records(ci, li);
        }
    }
    let run = l.run;
    let loads: Vec<&LoadSummary> = idx.iter().map(|&i| &run.cases[ci].loads[i]).collect();
    match source {
        Source::Requests => {
            let recs: Vec<&[RequestRecord]> = idx
                .iter()
                .map(|&li| match l.records.get(&(ci, li)) {
                    Some(Ok(Some(v))) => v.as_slice(),
                    _ => &[],
                })
                .collect();
            from_requests(&loads, &recs, m)
        }
        Source::Seconds(_) => from_seconds(&loads, m),
    }
}

/// Per-block sums of `f` over the records.
fn per_block(
    n: usize,
    pos: &impl Fn(u64) -> usize,
    recs: &[&[RequestRecord]],
    f: impl Fn(&RequestRecord) -> f64,
) -> Vec<f64> {
    let mut v = vec![0.0; n];
    for r in recs.iter().flat_map(|r| r.iter()) {
        v[pos(r.t_us)] += f(r);
    }
    v
}

fn from_requests(
    loads: &[&LoadSummary],
    recs: &[&[RequestRecord]],
    m: &str,
) -> Result<Blocked, Unmeasurable> {
    let (ts, full) = seconds(loads, recs);
    let n = ts.len();
    let pos = |t_us: u64| {
        let t = (t_us / 1_000_000) as u32;
        ts.binary_search(&t)
            .expect("every record's second is listed")
    };
    let answered = |r: &RequestRecord| r.error.is_none();
    let good = |r: &RequestRecord| answered(r) && (200..400).contains(&r.status);
    let one = |b: bool| if b { 1.0 } else { 0.0 };
    let sum = |f: &dyn Fn(&RequestRecord) -> f64| Stat::Ratio {
        num: per_block(n, &pos, recs, f),
        den: None,
    };
    let ratio =
        |f: &dyn Fn(&RequestRecord) -> f64, g: &dyn Fn(&RequestRecord) -> f64| Stat::Ratio {
            num: per_block(n, &pos, recs, f),
            den: Some(per_block(n, &pos, recs, g)),
        };
    let per_full_second = |f: &dyn Fn(&RequestRecord) -> f64| {
        let num = per_block(n, &pos, recs, f)
            .into_iter()
            .zip(&full)
            .map(|(x, &w)| if w { x } else { 0.0 })
            .collect();
        Stat::Ratio {
            num,
            den: Some(full.iter().map(|&w| one(w)).collect()),
        }
    };
    let stat = match m {
        "requests" => sum(&|r| one(answered(r))),
        "attempts" => sum(&|_| 1.0),
        "failures" => sum(&|r| one(r.failed())),
        "errors" => sum(&|r| one(r.error.is_some())),
        "non_2xx" => sum(&|r| one(answered(r) && !(200..400).contains(&r.status))),
        "failure_rate" => ratio(&|r| one(r.failed()), &|_| 1.0),
        "success_ratio" => ratio(&|r| one(!r.failed()), &|_| 1.0),
        "rps" => per_full_second(&|r| one(answered(r))),
        "throughput" => per_full_second(&|r| one(good(r))),
        "mean" => ratio(
            &|r| {
                if answered(r) {
                    f64::from(r.latency_us)
                } else {
                    0.0
                }
            },
            &|r| one(answered(r)),
        ),
        "max" => {
            let mut v = vec![f64::NEG_INFINITY; n];
            for r in recs.iter().flat_map(|r| r.iter()).filter(|r| answered(r)) {
                let b = pos(r.t_us);
                v[b] = v[b].max(f64::from(r.latency_us));
            }
            Stat::Max(v)
        }
        m if m.starts_with("status_") => {
            let code = metric::status_code(m).map_err(|e| e.0)?;
            sum(&|r| one(answered(r) && r.status == code))
        }
        m if m.starts_with("error_") => {
            let kind = metric::error_kind(m).map_err(|e| e.0)?;
            sum(&|r| one(r.error == Some(kind)))
        }
        m if m.starts_with('p') => {
            let p = metric::percentile(m).map_err(|e| e.0)?;
            let values: Vec<(u32, u32)> = recs
                .iter()
                .flat_map(|r| r.iter())
                .filter(|r| answered(r))
                .map(|r| (r.latency_us, pos(r.t_us) as u32))
                .collect();
            Stat::quantile(p / 100.0, values)
        }
        other => {
            return Err(Unmeasurable::from(format!(
                "'{other}' has no per-request values"
            )))
        }
    };
    Ok(Blocked { stat, blocks: n })
}

/// Responses outside 2xx/3xx in a second (1xx, 4xx, 5xx).
fn non_2xx(s: &Second) -> u64 {
    s.status_class[0] + s.status_class[3] + s.status_class[4]
}

fn from_seconds(loads: &[&LoadSummary], m: &str) -> Result<Blocked, Unmeasurable> {
    let (ts, full) = seconds(loads, &[]);
    let n = ts.len();
    let pos = |t: u32| ts.binary_search(&t).expect("every second is listed");
    let per = |f: &dyn Fn(&Second) -> f64| {
        let mut v = vec![0.0; n];
        for l in loads {
            for s in &l.timeline {
                v[pos(s.t)] += f(s);
            }
        }
        v
    };
    let sum = |f: &dyn Fn(&Second) -> f64| Stat::Ratio {
        num: per(f),
        den: None,
    };
    let ratio = |f: &dyn Fn(&Second) -> f64, g: &dyn Fn(&Second) -> f64| Stat::Ratio {
        num: per(f),
        den: Some(per(g)),
    };
    let per_full_second = |f: &dyn Fn(&Second) -> f64| Stat::Ratio {
        num: per(f)
            .into_iter()
            .zip(&full)
            .map(|(x, &w)| if w { x } else { 0.0 })
            .collect(),
        den: Some(full.iter().map(|&w| if w { 1.0 } else { 0.0 }).collect()),
    };
    let failures = |s: &Second| (s.error_total() + non_2xx(s)) as f64;
    let attempts = |s: &Second| (s.requests + s.error_total()) as f64;
    let stat = match m {
        "requests" => sum(&|s| s.requests as f64),
        "attempts" => sum(&attempts),
        "failures" => sum(&failures),
        "errors" => sum(&|s| s.error_total() as f64),
        "non_2xx" => sum(&|s| non_2xx(s) as f64),
        "failure_rate" => ratio(&failures, &attempts),
        "success_ratio" => ratio(&|s| attempts(s) - failures(s), &attempts),
        "rps" => per_full_second(&|s| s.requests as f64),
        "throughput" => per_full_second(&|s| (s.requests - non_2xx(s)) as f64),
        "max" => {
            let mut v = vec![f64::NEG_INFINITY; n];
            for l in loads {
                for s in l.timeline.iter().filter(|s| s.requests > 0) {
                    let b = pos(s.t);
                    v[b] = v[b].max(s.max_us as f64);
                }
            }
            Stat::Max(v)
        }
        "p50" | "p90" | "p99" => {
            let pick = |s: &Second| match m {
                "p50" => s.p50_us,
                "p90" => s.p90_us,
                _ => s.p99_us,
            };
            ratio(&|s| (pick(s) * s.requests) as f64, &|s| s.requests as f64)
        }
        m if m.starts_with("error_") => {
            let kind = metric::error_kind(m).map_err(|e| e.0)?;
            sum(&|s| s.errors.get(&kind).copied().unwrap_or(0) as f64)
        }
        m if m.starts_with("status_") => {
            return Err(Unmeasurable::from(format!(
                "'{m}' needs request records: the per-second values keep status classes, not codes"
            )))
        }
        "mean" => {
            return Err(Unmeasurable::from(
                "'mean' needs request records: the per-second values hold no mean",
            ))
        }
        m if m.starts_with('p') => {
            return Err(Unmeasurable::from(format!(
                "'{m}' needs request records: the per-second values hold p50, p90, p99 and max"
            )))
        }
        other => {
            return Err(Unmeasurable::from(format!(
                "'{other}' has no per-second values"
            )))
        }
    };
    Ok(Blocked { stat, blocks: n })
}
