//! Checks: SLOs and predictions written as one-line expressions, e.g. `coffee.failure_rate <= 0.5%`,
//! `tea.p99 <= 250ms`, `backends.spread <= 1%`, `backends.requests == all.requests`,
//! `nginx.errors == 0`, `reloads.avg_ms < 500`. A breached check makes the run's exit code non-zero.
//!
//! Subjects: a load's name, `all` (every load summed), `backends`, `nginx`, `reloads`.
//! Values may carry units: `%`, `ppm`, durations (`250ms`), `r/s`; or be another `subject.metric`.

use model::{CaseResult, CheckResult, ErrorKind, LoadSummary};
use std::fmt;

/// A parsed check.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// The expression as written.
    pub text: String,
    lhs: Operand,
    op: Op,
    rhs: Operand,
}

#[derive(Debug, Clone, PartialEq)]
enum Operand {
    Metric { subject: String, metric: String },
    Value(f64),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Le,
    Lt,
    Ge,
    Gt,
    Eq,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Le => "<=",
            Op::Lt => "<",
            Op::Ge => ">=",
            Op::Gt => ">",
            Op::Eq => "==",
        })
    }
}

/// How a metric's value is printed.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Count,
    Fraction,
    Micros,
    Millis,
    PerSec,
}

impl Check {
    /// Parses `subject.metric OP value`; the error names the bad part.
    pub fn parse(text: &str) -> Result<Check, String> {
        let t = text.trim();
        let (pos, op, len) = ["<=", ">=", "==", "<", ">"]
            .iter()
            .find_map(|o| t.find(o).map(|p| (p, *o, o.len())))
            .ok_or_else(|| format!("check '{t}' has no comparison (<=, <, >=, >, ==)"))?;
        let op = match op {
            "<=" => Op::Le,
            ">=" => Op::Ge,
            "==" => Op::Eq,
            "<" => Op::Lt,
            _ => Op::Gt,
        };
        let lhs = parse_metric(t[..pos].trim(), t)?;
        let rhs_text = t[pos + len..].trim();
        let rhs = if rhs_text.starts_with(|c: char| c.is_ascii_alphabetic()) {
            parse_metric(rhs_text, t)?
        } else {
            let Operand::Metric { metric, .. } = &lhs else {
                unreachable!("lhs is always a metric")
            };
            Operand::Value(parse_value(rhs_text, kind_of(metric)?, t)?)
        };
        Ok(Check {
            text: t.to_string(),
            lhs,
            op,
            rhs,
        })
    }

    /// The subjects (load names, `backends`...) the check refers to, for validation.
    pub fn subjects(&self) -> Vec<&str> {
        [&self.lhs, &self.rhs]
            .iter()
            .filter_map(|o| match o {
                Operand::Metric { subject, .. } => Some(subject.as_str()),
                Operand::Value(_) => None,
            })
            .collect()
    }

    /// Evaluates the check against a finished (or partial) case.
    pub fn eval(&self, case: &CaseResult) -> CheckResult {
        let l = self.operand(&self.lhs, case);
        let r = self.operand(&self.rhs, case);
        let kind = match &self.lhs {
            Operand::Metric { metric, .. } => kind_of(metric).unwrap_or(Kind::Count),
            Operand::Value(_) => Kind::Count,
        };
        let (pass, actual, expected) = match (l, r) {
            (Ok(a), Ok(b)) => {
                let pass = match self.op {
                    Op::Le => a <= b,
                    Op::Lt => a < b,
                    Op::Ge => a >= b,
                    Op::Gt => a > b,
                    Op::Eq => (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0),
                };
                (
                    pass,
                    show(a, kind),
                    format!("{} {}", self.op, show(b, kind)),
                )
            }
            (Err(e), _) | (_, Err(e)) => (false, format!("n/a ({e})"), self.text.clone()),
        };
        CheckResult {
            name: self.text.clone(),
            case: Some(case.name.clone()),
            expected,
            actual,
            pass,
        }
    }

    fn operand(&self, o: &Operand, case: &CaseResult) -> Result<f64, String> {
        match o {
            Operand::Value(v) => Ok(*v),
            Operand::Metric { subject, metric } => metric_value(subject, metric, case),
        }
    }
}

fn parse_metric(s: &str, whole: &str) -> Result<Operand, String> {
    let (subject, metric) = s.split_once('.').ok_or_else(|| {
        format!("check '{whole}': '{s}' should be SUBJECT.METRIC, e.g. coffee.p99")
    })?;
    let metric = metric.trim().to_string();
    kind_of(&metric).map_err(|e| format!("check '{whole}': {e}"))?;
    Ok(Operand::Metric {
        subject: subject.trim().to_string(),
        metric,
    })
}

fn kind_of(metric: &str) -> Result<Kind, String> {
    Ok(match metric {
        "requests" | "failures" | "errors" | "non_2xx" | "late_sends" | "attempts" | "count"
        | "warns" | "access_lines" => Kind::Count,
        m if m.starts_with("status_") || m.starts_with("error_") => Kind::Count,
        "failure_rate" | "success_ratio" | "spread" | "within_500ms" | "within_1000ms" => {
            Kind::Fraction
        }
        "rps" | "throughput" => Kind::PerSec,
        "avg_ms" | "max_ms" => Kind::Millis,
        "mean" | "max" | "late_max" => Kind::Micros,
        m if m.starts_with('p') && m[1..].parse::<f64>().is_ok() => Kind::Micros,
        other => {
            return Err(format!(
                "unknown metric '{other}' (requests, rps, throughput, failures, failure_rate, \
                 success_ratio, errors, error_KIND, non_2xx, status_CODE, p50..p99.999, mean, max, \
                 late_sends, spread, avg_ms, max_ms, within_500ms, warns)"
            ))
        }
    })
}

fn parse_value(s: &str, kind: Kind, whole: &str) -> Result<f64, String> {
    let bad = |why: &str| format!("check '{whole}': value '{s}' {why}");
    if let Some(p) = s.strip_suffix('%') {
        let v: f64 = p.trim().parse().map_err(|_| bad("is not a number"))?;
        return Ok(v / 100.0);
    }
    if let Some(p) = s.strip_suffix("ppm") {
        let v: f64 = p.trim().parse().map_err(|_| bad("is not a number"))?;
        return Ok(v / 1e6);
    }
    match kind {
        Kind::Micros => {
            if let Ok(v) = s.parse::<f64>() {
                return Ok(v);
            }
            units::parse_duration(s)
                .map(|d| d.as_secs_f64() * 1e6)
                .map_err(|e| bad(&format!("is not a duration ({e})")))
        }
        Kind::PerSec => units::parse_rate(s).map_err(|e| bad(&e.to_string())),
        _ => s.parse::<f64>().map_err(|_| bad("is not a number")),
    }
}

fn show(v: f64, kind: Kind) -> String {
    match kind {
        Kind::Count => {
            if v.fract() == 0.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.3}")
            }
        }
        Kind::Fraction => {
            if v != 0.0 && v.abs() < 0.001 {
                format!("{:.1} ppm", v * 1e6)
            } else {
                format!("{:.3}%", v * 100.0)
            }
        }
        Kind::Micros => units::fmt_us(v),
        Kind::Millis => format!("{v:.1}ms"),
        Kind::PerSec => format!("{v:.2}/s"),
    }
}

fn loads<'a>(subject: &str, case: &'a CaseResult) -> Result<Vec<&'a LoadSummary>, String> {
    if subject == "all" {
        return Ok(case.loads.iter().collect());
    }
    case.loads
        .iter()
        .find(|l| l.name == subject)
        .map(|l| vec![l])
        .ok_or_else(|| format!("no load named '{subject}'"))
}

fn metric_value(subject: &str, metric: &str, case: &CaseResult) -> Result<f64, String> {
    match subject {
        "backends" => backend_metric(metric, case),
        "nginx" => nginx_metric(metric, case),
        "reloads" => reload_metric(metric, case),
        _ => load_metric(&loads(subject, case)?, metric),
    }
}

fn load_metric(ls: &[&LoadSummary], metric: &str) -> Result<f64, String> {
    let sum = |f: &dyn Fn(&LoadSummary) -> u64| ls.iter().map(|l| f(l)).sum::<u64>() as f64;
    let attempts = sum(&|l| l.attempts());
    let elapsed = ls.iter().map(|l| l.elapsed_s).fold(0.0, f64::max);
    let single = || -> Result<&LoadSummary, String> {
        match ls {
            [one] => Ok(one),
            _ => Err(format!("'{metric}' needs a single load, not 'all'")),
        }
    };
    Ok(match metric {
        "requests" => sum(&|l| l.requests),
        "attempts" => attempts,
        "failures" => sum(&|l| l.failures()),
        "errors" => sum(&|l| l.error_total()),
        "non_2xx" => sum(&|l| l.non_2xx_3xx()),
        "failure_rate" | "success_ratio" => {
            if attempts == 0.0 {
                return Err("no attempts".into());
            }
            let f = sum(&|l| l.failures()) / attempts;
            if metric == "failure_rate" {
                f
            } else {
                1.0 - f
            }
        }
        "rps" => sum(&|l| l.requests) / elapsed.max(1e-9),
        "throughput" => (sum(&|l| l.requests) - sum(&|l| l.non_2xx_3xx())) / elapsed.max(1e-9),
        "late_sends" => sum(&|l| l.schedule.as_ref().map_or(0, |s| s.late)),
        "late_max" => single()?.schedule.as_ref().map_or(0, |s| s.late_max_us) as f64,
        "mean" => single()?.latency.mean_us,
        "max" => single()?.latency.max_us as f64,
        m if m.starts_with("status_") => {
            let code: u16 = m[7..].parse().map_err(|_| format!("bad status in '{m}'"))?;
            sum(&|l| l.status.get(&code).copied().unwrap_or(0))
        }
        m if m.starts_with("error_") => {
            let kind = ErrorKind::ALL
                .iter()
                .find(|k| k.name() == &m[6..])
                .ok_or_else(|| format!("unknown error kind in '{m}'"))?;
            sum(&|l| l.errors.get(kind).copied().unwrap_or(0))
        }
        m if m.starts_with('p') => {
            let p: f64 = m[1..]
                .parse()
                .map_err(|_| format!("bad percentile '{m}'"))?;
            let l = single()?;
            l.latency
                .percentile(p)
                .ok_or_else(|| format!("percentile {p} was not recorded"))? as f64
        }
        other => return Err(format!("'{other}' is not a load metric")),
    })
}

fn backend_metric(metric: &str, case: &CaseResult) -> Result<f64, String> {
    let b = &case.backends;
    let total: u64 = b.iter().map(|x| x.requests).sum();
    Ok(match metric {
        "requests" => total as f64,
        "count" => b.len() as f64,
        "spread" => {
            // Largest relative deviation from an even share among backends that were running.
            let live: Vec<u64> = b.iter().map(|x| x.requests).collect();
            if live.is_empty() || total == 0 {
                return Err("no backend served a request".into());
            }
            let even = total as f64 / live.len() as f64;
            live.iter()
                .map(|&n| (n as f64 - even).abs() / even)
                .fold(0.0, f64::max)
        }
        m if m.starts_with("status_") => {
            let code: u16 = m[7..].parse().map_err(|_| format!("bad status in '{m}'"))?;
            b.iter()
                .map(|x| x.by_status.get(&code).copied().unwrap_or(0))
                .sum::<u64>() as f64
        }
        other => return Err(format!("'{other}' is not a backends metric")),
    })
}

fn nginx_metric(metric: &str, case: &CaseResult) -> Result<f64, String> {
    let logs = &case.logs;
    let level = |names: &[&str]| {
        names
            .iter()
            .map(|n| logs.error_levels.get(*n).copied().unwrap_or(0))
            .sum::<u64>() as f64
    };
    Ok(match metric {
        "errors" => level(&["error", "crit", "alert", "emerg"]),
        "warns" => level(&["warn"]),
        "access_lines" | "requests" => logs.access_lines as f64,
        m if m.starts_with("status_") => {
            let code: u16 = m[7..].parse().map_err(|_| format!("bad status in '{m}'"))?;
            logs.access_status.get(&code).copied().unwrap_or(0) as f64
        }
        other => return Err(format!("'{other}' is not an nginx metric")),
    })
}

fn reload_metric(metric: &str, case: &CaseResult) -> Result<f64, String> {
    let r = &case.reloads;
    let served: Vec<f64> = r.iter().filter_map(|x| x.served_ms).collect();
    let share = |limit: f64| {
        if r.is_empty() {
            0.0
        } else {
            served.iter().filter(|&&v| v <= limit).count() as f64 / r.len() as f64
        }
    };
    Ok(match metric {
        "count" => r.len() as f64,
        "errors" => r.iter().filter(|x| x.error.is_some()).count() as f64,
        "avg_ms" => {
            if served.is_empty() {
                return Err("no reload was served".into());
            }
            served.iter().sum::<f64>() / served.len() as f64
        }
        "max_ms" => served.iter().copied().fold(0.0, f64::max),
        "within_500ms" => share(500.0),
        "within_1000ms" => share(1000.0),
        other => return Err(format!("'{other}' is not a reloads metric")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::{BackendCounters, Latency, LoadMode, Percentile, RateStats, ReloadRecord};
    use std::collections::BTreeMap;

    fn load(name: &str, ok: u64, e503: u64, resets: u64) -> LoadSummary {
        LoadSummary {
            schema: 1,
            name: name.into(),
            url: "http://x/".into(),
            method: "GET".into(),
            mode: LoadMode::Closed,
            threads: 1,
            connections: 2,
            start_s: 0.0,
            planned_s: Some(10.0),
            elapsed_s: 10.0,
            timeout_ms: 2000,
            requests: ok + e503,
            bytes_read: 0,
            bytes_written: 0,
            status: BTreeMap::from([(200, ok), (503, e503)]),
            errors: BTreeMap::from([(ErrorKind::ReadReset, resets)]),
            error_messages: BTreeMap::new(),
            connects: 2,
            latency: Latency {
                percentiles: vec![Percentile {
                    p: 99.0,
                    us: 12_000,
                }],
                ..Default::default()
            },
            latency_uncorrected: None,
            req_per_sec: RateStats::default(),
            schedule: None,
            timeline: vec![],
        }
    }

    fn case() -> CaseResult {
        CaseResult {
            name: "main".into(),
            loads: vec![load("coffee", 990, 5, 5), load("tea", 1000, 0, 0)],
            backends: vec![
                BackendCounters {
                    name: "b0".into(),
                    requests: 1000,
                    ..Default::default()
                },
                BackendCounters {
                    name: "b1".into(),
                    requests: 995,
                    ..Default::default()
                },
            ],
            reloads: vec![
                ReloadRecord {
                    replica: "nginx-0".into(),
                    generation: 2,
                    t_s: 1.0,
                    served_ms: Some(100.0),
                    old_workers_exited_ms: None,
                    validate_ms: 5.0,
                    error: None,
                },
                ReloadRecord {
                    replica: "nginx-0".into(),
                    generation: 3,
                    t_s: 2.0,
                    served_ms: Some(700.0),
                    old_workers_exited_ms: None,
                    validate_ms: 5.0,
                    error: None,
                },
            ],
            ..Default::default()
        }
    }

    fn eval(expr: &str) -> CheckResult {
        Check::parse(expr).unwrap().eval(&case())
    }

    #[test]
    fn load_metrics() {
        let r = eval("coffee.failure_rate <= 1%");
        assert!(r.pass, "{r:?}");
        assert_eq!(r.actual, "1.000%");
        assert!(!eval("coffee.failure_rate < 1%").pass);
        assert!(eval("coffee.failures == 10").pass);
        assert!(eval("coffee.status_503 == 5").pass);
        assert!(eval("coffee.error_read_reset == 5").pass);
        assert!(eval("coffee.p99 <= 12ms").pass);
        assert!(!eval("coffee.p99 < 12ms").pass);
        assert!(eval("tea.failure_rate == 0").pass);
        assert!(eval("all.requests == 1995").pass);
        assert!(eval("coffee.rps >= 99.5r/s").pass);
        assert!(eval("tea.success_ratio >= 99.99%").pass);
    }

    #[test]
    fn other_subjects_and_metric_comparisons() {
        assert!(eval("backends.requests == all.requests").pass);
        assert!(eval("backends.spread <= 0.3%").pass);
        assert!(!eval("backends.spread <= 0.2%").pass);
        assert!(eval("reloads.avg_ms == 400").pass);
        assert!(eval("reloads.within_500ms == 50%").pass);
        assert!(eval("nginx.errors == 0").pass);
    }

    #[test]
    fn bad_checks_are_named() {
        assert!(Check::parse("coffee.p99 250ms")
            .unwrap_err()
            .contains("no comparison"));
        assert!(Check::parse("coffee.bogus < 1")
            .unwrap_err()
            .contains("unknown metric 'bogus'"));
        assert!(Check::parse("p99 < 1ms")
            .unwrap_err()
            .contains("SUBJECT.METRIC"));
        assert!(Check::parse("coffee.p99 < 10").is_ok());
        assert!(Check::parse("coffee.p99 < 1x")
            .unwrap_err()
            .contains("not a duration"));
        let r = eval("nosuch.requests > 1");
        assert!(!r.pass && r.actual.contains("no load named 'nosuch'"));
    }
}
