//! CSV exports of a run for spreadsheets and scripts: one row per load per second, per event, per
//! disruption window, per sample, per reload, per series point. Times are seconds since the run
//! origin; every file names its case so cases with equal load names stay apart.

use model::results_dir::{
    DISRUPTIONS_CSV, EVENTS_CSV, RELOADS_CSV, SAMPLES_CSV, SERIES_CSV, TIMELINE_CSV,
};
use model::{ErrorKind, RunResults};

/// Every CSV file of a run as (file name, contents).
pub fn all(r: &RunResults) -> Vec<(&'static str, String)> {
    vec![
        (TIMELINE_CSV, timeline(r)),
        (EVENTS_CSV, events(r)),
        (DISRUPTIONS_CSV, disruptions(r)),
        (SAMPLES_CSV, samples(r)),
        (RELOADS_CSV, reloads(r)),
        (SERIES_CSV, series(r)),
    ]
}

/// One CSV file being written through the `csv` crate: fields quoted only when they hold a
/// comma, a quote or a line break, rows ended by `\n`.
struct Table(::csv::Writer<Vec<u8>>);

impl Table {
    /// A table with its header row.
    fn new(header: &[&str]) -> Table {
        let mut t = Table(::csv::WriterBuilder::new().from_writer(Vec::new()));
        t.row(header);
        t
    }

    /// One row; a `String`'s or `&str`'s fields are written as they are.
    fn row<I, F>(&mut self, fields: I)
    where
        I: IntoIterator<Item = F>,
        F: AsRef<[u8]>,
    {
        self.0
            .write_record(fields)
            .expect("a CSV row written to memory");
    }

    /// The file's text.
    fn finish(self) -> String {
        let bytes = self.0.into_inner().expect("a CSV table flushed to memory");
        String::from_utf8(bytes).expect("CSV fields are UTF-8 strings")
    }
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// The columns of one timeline second after the case and load: `t` and counts, failures below
/// HTTP by kind, percentiles (timeline.csv, and `proxybench load --csv`).
fn timeline_header() -> Vec<&'static str> {
    let mut h = vec![
        "t",
        "requests",
        "status_1xx",
        "status_2xx",
        "status_3xx",
        "status_4xx",
        "status_5xx",
        "errors",
    ];
    h.extend(ErrorKind::ALL.iter().map(|k| k.name()));
    h.extend(["p50_us", "p90_us", "p99_us", "max_us", "bytes"]);
    h
}

/// One timeline second's fields, in [`timeline_header`]'s order.
fn timeline_fields(s: &model::Second) -> Vec<String> {
    let mut f = vec![s.t.to_string(), s.requests.to_string()];
    f.extend(s.status_class.iter().map(|c| c.to_string()));
    f.push(s.error_total().to_string());
    f.extend(
        ErrorKind::ALL
            .iter()
            .map(|k| s.errors.get(k).copied().unwrap_or(0).to_string()),
    );
    f.extend(
        [s.p50_us, s.p90_us, s.p99_us, s.max_us, s.bytes]
            .iter()
            .map(|v| v.to_string()),
    );
    f
}

/// One load's per-second timeline as CSV, without the case and load columns (`proxybench load
/// --csv`).
pub fn load_timeline(l: &model::LoadSummary) -> String {
    let mut t = Table::new(&timeline_header());
    for s in &l.timeline {
        t.row(timeline_fields(s));
    }
    t.finish()
}

/// timeline.csv: one row per load per second, failures below HTTP by kind as columns.
pub fn timeline(r: &RunResults) -> String {
    let mut header = vec!["case", "load"];
    header.extend(timeline_header());
    let mut t = Table::new(&header);
    for case in &r.cases {
        for load in &case.loads {
            for s in &load.timeline {
                let mut f = vec![case.name.clone(), load.name.clone()];
                f.extend(timeline_fields(s));
                t.row(f);
            }
        }
    }
    t.finish()
}

/// events.csv: the actions fired.
pub fn events(r: &RunResults) -> String {
    let mut t = Table::new(&[
        "case",
        "n",
        "t_s",
        "action",
        "detail",
        "duration_ms",
        "error",
    ]);
    for case in &r.cases {
        for (i, e) in case.events.iter().enumerate() {
            t.row([
                case.name.clone(),
                (i + 1).to_string(),
                e.t_s.to_string(),
                e.action.clone(),
                e.detail.clone(),
                e.duration_ms.to_string(),
                e.error.clone().unwrap_or_default(),
            ]);
        }
    }
    t.finish()
}

/// disruptions.csv: each action's window per load, causes as `cause=count` joined by `;`.
pub fn disruptions(r: &RunResults) -> String {
    let mut t = Table::new(&[
        "case",
        "load",
        "event",
        "action",
        "window_start_s",
        "window_end_s",
        "attempts",
        "failed",
        "first_failure_s",
        "last_failure_s",
        "longest_failure_run",
        "causes",
    ]);
    for case in &r.cases {
        for d in &case.disruptions {
            let action = case
                .events
                .get(d.event)
                .map(|e| e.action.as_str())
                .unwrap_or("");
            let causes: Vec<String> = d.by_cause.iter().map(|(k, v)| format!("{k}={v}")).collect();
            t.row([
                case.name.clone(),
                d.load.clone(),
                (d.event + 1).to_string(),
                action.to_string(),
                d.window_s.0.to_string(),
                d.window_s.1.to_string(),
                d.attempts.to_string(),
                d.failed.to_string(),
                opt(d.first_failure_s),
                opt(d.last_failure_s),
                d.longest_failure_run.to_string(),
                causes.join(";"),
            ]);
        }
    }
    t.finish()
}

/// samples.csv: process samples (`kind=proc`) and the proxy's status-page samples (`kind=stub`)
/// in one file; columns that do not apply to a kind are empty.
pub fn samples(r: &RunResults) -> String {
    let mut t = Table::new(&[
        "case",
        "kind",
        "t_s",
        "name",
        "cpu_pct",
        "rss_bytes",
        "procs",
        "active",
        "accepts",
        "handled",
        "requests",
        "reading",
        "writing",
        "waiting",
    ]);
    let empty = String::new;
    for case in &r.cases {
        for s in &case.proc_samples {
            t.row([
                case.name.clone(),
                "proc".to_string(),
                s.t_s.to_string(),
                s.group.clone(),
                s.cpu_pct.to_string(),
                s.rss_bytes.to_string(),
                s.procs.to_string(),
                empty(),
                empty(),
                empty(),
                empty(),
                empty(),
                empty(),
                empty(),
            ]);
        }
        for s in &case.stub_samples {
            t.row([
                case.name.clone(),
                "stub".to_string(),
                s.t_s.to_string(),
                s.replica.clone(),
                empty(),
                empty(),
                empty(),
                s.active.to_string(),
                s.accepts.to_string(),
                s.handled.to_string(),
                s.requests.to_string(),
                s.reading.to_string(),
                s.writing.to_string(),
                s.waiting.to_string(),
            ]);
        }
    }
    t.finish()
}

/// reloads.csv: one row per replica per reload.
pub fn reloads(r: &RunResults) -> String {
    let mut t = Table::new(&[
        "case",
        "replica",
        "generation",
        "t_s",
        "served_ms",
        "old_workers_exited_ms",
        "validate_ms",
        "error",
    ]);
    for case in &r.cases {
        for x in &case.reloads {
            t.row([
                case.name.clone(),
                x.replica.clone(),
                x.generation.to_string(),
                x.t_s.to_string(),
                opt(x.served_ms),
                opt(x.old_workers_exited_ms),
                x.validate_ms.to_string(),
                x.error.clone().unwrap_or_default(),
            ]);
        }
    }
    t.finish()
}

/// series.csv: every point of every scenario series. `x_axis` says what `x` is: `t_s` (seconds
/// from the case origin) for a series against time, or what grew (`routes`, `listeners`...) for
/// a series against a count.
pub fn series(r: &RunResults) -> String {
    let mut t = Table::new(&["case", "series", "unit", "x_axis", "x", "value"]);
    for case in &r.cases {
        for s in &case.series {
            let axis = match &s.x {
                model::SeriesX::Time => "t_s",
                model::SeriesX::Count(what) => what.as_str(),
            };
            for (x, v) in &s.points {
                t.row([
                    case.name.clone(),
                    s.name.clone(),
                    s.unit.clone(),
                    axis.to_string(),
                    x.to_string(),
                    v.to_string(),
                ]);
            }
        }
    }
    t.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_name_their_x_axis() {
        let mut r = RunResults {
            schema: model::SCHEMA_VERSION,
            scenario: "s".into(),
            description: String::new(),
            started_at: String::new(),
            quick: false,
            partial: false,
            abort_reason: None,
            env: Default::default(),
            cases: vec![Default::default()],
            findings: Vec::new(),
            checks: Vec::new(),
        };
        r.cases[0].name = "main".into();
        r.cases[0].series = vec![
            model::Series {
                name: "queue".into(),
                unit: "requests".into(),
                points: vec![(1.5, 2.0)],
                ..Default::default()
            },
            model::Series {
                name: "time to ready".into(),
                unit: "ms".into(),
                points: vec![(10.0, 7.25)],
                x: model::SeriesX::Count("routes".into()),
                ..Default::default()
            },
        ];
        assert_eq!(
            series(&r),
            "case,series,unit,x_axis,x,value\n\
             main,queue,requests,t_s,1.5,2\n\
             main,time to ready,ms,routes,10,7.25\n"
        );
    }

    #[test]
    fn fields_are_quoted_only_when_needed() {
        let mut t = Table::new(&["a", "b"]);
        t.row(["plain", "a,b"]);
        t.row(["say \"hi\"", "two\nlines"]);
        t.row(["", "cr\r"]);
        assert_eq!(
            t.finish(),
            "a,b\nplain,\"a,b\"\n\"say \"\"hi\"\"\",\"two\nlines\"\n,\"cr\r\"\n"
        );
    }
}
