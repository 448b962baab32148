//! CSV exports of a run for spreadsheets and scripts: one row per load per second, per event, per
//! disruption window, per sample, per reload, per series point. Times are seconds since the run
//! origin; every file names its case so cases with equal load names stay apart.

use model::{ErrorKind, RunResults};
use std::fmt::Write;

/// Every CSV file of a run as (file name, contents).
pub fn all(r: &RunResults) -> Vec<(&'static str, String)> {
    vec![
        ("timeline.csv", timeline(r)),
        ("events.csv", events(r)),
        ("disruptions.csv", disruptions(r)),
        ("samples.csv", samples(r)),
        ("reloads.csv", reloads(r)),
        ("series.csv", series(r)),
    ]
}

/// Quotes a field when it holds a comma, a quote or a line break.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// timeline.csv: one row per load per second, failures below HTTP by kind as columns.
pub fn timeline(r: &RunResults) -> String {
    let mut out = String::from(
        "case,load,t,requests,status_1xx,status_2xx,status_3xx,status_4xx,status_5xx,errors",
    );
    for k in ErrorKind::ALL {
        out.push(',');
        out.push_str(k.name());
    }
    out.push_str(",p50_us,p90_us,p99_us,max_us,bytes\n");
    for case in &r.cases {
        for load in &case.loads {
            for s in &load.timeline {
                let _ = write!(
                    out,
                    "{},{},{},{}",
                    field(&case.name),
                    field(&load.name),
                    s.t,
                    s.requests
                );
                for c in s.status_class {
                    let _ = write!(out, ",{c}");
                }
                let _ = write!(out, ",{}", s.error_total());
                for k in ErrorKind::ALL {
                    let _ = write!(out, ",{}", s.errors.get(&k).copied().unwrap_or(0));
                }
                let _ = writeln!(
                    out,
                    ",{},{},{},{},{}",
                    s.p50_us, s.p90_us, s.p99_us, s.max_us, s.bytes
                );
            }
        }
    }
    out
}

/// events.csv: the actions fired.
pub fn events(r: &RunResults) -> String {
    let mut out = String::from("case,n,t_s,action,detail,duration_ms,error\n");
    for case in &r.cases {
        for (i, e) in case.events.iter().enumerate() {
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{}",
                field(&case.name),
                i + 1,
                e.t_s,
                field(&e.action),
                field(&e.detail),
                e.duration_ms,
                field(e.error.as_deref().unwrap_or(""))
            );
        }
    }
    out
}

/// disruptions.csv: each action's window per load, causes as `cause=count` joined by `;`.
pub fn disruptions(r: &RunResults) -> String {
    let mut out = String::from(
        "case,load,event,action,window_start_s,window_end_s,attempts,failed,first_failure_s,last_failure_s,longest_failure_run,causes\n",
    );
    for case in &r.cases {
        for d in &case.disruptions {
            let action = case
                .events
                .get(d.event)
                .map(|e| e.action.as_str())
                .unwrap_or("");
            let causes: Vec<String> = d.by_cause.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{},{},{}",
                field(&case.name),
                field(&d.load),
                d.event + 1,
                field(action),
                d.window_s.0,
                d.window_s.1,
                d.attempts,
                d.failed,
                opt(d.first_failure_s),
                opt(d.last_failure_s),
                d.longest_failure_run,
                field(&causes.join(";"))
            );
        }
    }
    out
}

/// samples.csv: process samples (`kind=proc`) and the proxy's status-page samples (`kind=stub`)
/// in one file; columns that do not apply to a kind are empty.
pub fn samples(r: &RunResults) -> String {
    let mut out = String::from(
        "case,kind,t_s,name,cpu_pct,rss_bytes,procs,active,accepts,handled,requests,reading,writing,waiting\n",
    );
    for case in &r.cases {
        let c = field(&case.name);
        for s in &case.proc_samples {
            let _ = writeln!(
                out,
                "{c},proc,{},{},{},{},{},,,,,,,",
                s.t_s,
                field(&s.group),
                s.cpu_pct,
                s.rss_bytes,
                s.procs
            );
        }
        for s in &case.stub_samples {
            let _ = writeln!(
                out,
                "{c},stub,{},{},,,,{},{},{},{},{},{},{}",
                s.t_s,
                field(&s.replica),
                s.active,
                s.accepts,
                s.handled,
                s.requests,
                s.reading,
                s.writing,
                s.waiting
            );
        }
    }
    out
}

/// reloads.csv: one row per replica per reload.
pub fn reloads(r: &RunResults) -> String {
    let mut out = String::from(
        "case,replica,generation,t_s,served_ms,old_workers_exited_ms,validate_ms,error\n",
    );
    for case in &r.cases {
        for x in &case.reloads {
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{}",
                field(&case.name),
                field(&x.replica),
                x.generation,
                x.t_s,
                opt(x.served_ms),
                opt(x.old_workers_exited_ms),
                x.validate_ms,
                field(x.error.as_deref().unwrap_or(""))
            );
        }
    }
    out
}

/// series.csv: every point of every scenario series. `x_axis` says what `x` is: `t_s` (seconds
/// from the case origin) for a series against time, or what grew (`routes`, `listeners`...) for
/// a series against a count.
pub fn series(r: &RunResults) -> String {
    let mut out = String::from("case,series,unit,x_axis,x,value\n");
    for case in &r.cases {
        for s in &case.series {
            let axis = match &s.x {
                model::SeriesX::Time => "t_s",
                model::SeriesX::Count(what) => what.as_str(),
            };
            for (x, v) in &s.points {
                let _ = writeln!(
                    out,
                    "{},{},{},{},{x},{v}",
                    field(&case.name),
                    field(&s.name),
                    field(&s.unit),
                    field(axis)
                );
            }
        }
    }
    out
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
        assert_eq!(field("plain"), "plain");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
