//! The vocabulary of a load's metrics, shared by the scenario checks (`coffee.p99 <= 250ms`)
//! and `proxybench compare --gate` (`coffee.p99 <= +10%`), so the two read the same names, the
//! same value units and the same numbers: `requests`, `attempts`, `rps`, `throughput`,
//! `failures`, `failure_rate`, `success_ratio`, `errors`, `error_KIND`, `non_2xx`,
//! `status_CODE`, `late_sends`, and for one load `p50`..`p99.999`, `mean`, `max`, `late_max`.
//!
//! Values may carry units: `%`, `ppm` (fractions), durations (`250ms`, for latencies), `r/s`.

use crate::{ErrorKind, LoadSummary};

/// Why a metric name or value is not understood, or why a metric has no value; the text names
/// the bad part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MetricError(pub String);

impl From<&str> for MetricError {
    fn from(s: &str) -> MetricError {
        MetricError(s.to_string())
    }
}

impl From<String> for MetricError {
    fn from(s: String) -> MetricError {
        MetricError(s)
    }
}

/// What a metric's number is, which decides how a value is read and printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    /// An exact count.
    Count,
    /// A fraction (printed as a percentage, or ppm when small).
    Fraction,
    /// Microseconds (latencies), printed with a unit.
    Micros,
    /// Milliseconds.
    Millis,
    /// A rate per second.
    PerSec,
    /// Bytes (memory), read with a size unit (`200MB`, `1.5g`) and printed with one.
    Bytes,
}

/// Every metric a load (or `all`, every load summed) offers, with how its value reads: the one
/// list that scenario checks and compare gates share. `status_CODE`, `error_KIND` and `pNN`
/// stand for families (`status_503`, `error_read_reset`, `p99.9`).
pub const LOAD: &[(&str, MetricKind)] = &[
    ("requests", MetricKind::Count),
    ("attempts", MetricKind::Count),
    ("rps", MetricKind::PerSec),
    ("throughput", MetricKind::PerSec),
    ("failures", MetricKind::Count),
    ("failure_rate", MetricKind::Fraction),
    ("success_ratio", MetricKind::Fraction),
    ("errors", MetricKind::Count),
    ("error_KIND", MetricKind::Count),
    ("non_2xx", MetricKind::Count),
    ("status_CODE", MetricKind::Count),
    ("late_sends", MetricKind::Count),
    ("pNN", MetricKind::Micros),
    ("mean", MetricKind::Micros),
    ("max", MetricKind::Micros),
    ("late_max", MetricKind::Micros),
];

/// Every metric a long-lived load (WebSocket, gRPC, SSE: a `[[loads]]` entry with a `ws://` url
/// or a `protocol`) offers, with how its value reads. The counts come from the load's summary;
/// the `dropped_by_*` split and the times from reload to drop from the case's ledger of
/// connection lives ([`crate::ledger::StreamLedger`]). `streams_failed` is a gRPC load's.
pub const STREAM: &[(&str, MetricKind)] = &[
    ("attempts", MetricKind::Count),
    ("opened", MetricKind::Count),
    ("reconnects", MetricKind::Count),
    ("refused", MetricKind::Count),
    ("connect_failed", MetricKind::Count),
    ("dropped", MetricKind::Count),
    ("dropped_with_close", MetricKind::Count),
    ("dropped_without_close", MetricKind::Count),
    ("dropped_by_reload", MetricKind::Count),
    ("dropped_by_backend", MetricKind::Count),
    ("dropped_unattributed", MetricKind::Count),
    ("messages_lost", MetricKind::Count),
    ("streams_failed", MetricKind::Count),
    ("reload_to_drop_p50", MetricKind::Micros),
    ("reload_to_drop_max", MetricKind::Micros),
];

/// The kind of a long-lived load's metric, or `None` when it is not one.
pub fn stream_metric_kind(metric: &str) -> Option<MetricKind> {
    STREAM.iter().find(|(m, _)| *m == metric).map(|(_, k)| *k)
}

/// True for the long-lived metrics that read one load's distribution, which `all` cannot sum.
pub fn stream_single_load_only(metric: &str) -> bool {
    metric.starts_with("reload_to_drop_")
}

/// The family `metric` belongs to in [`LOAD`] (`status_503` is `status_CODE`), checking the
/// family's argument; the name itself for plain metrics.
pub fn family(metric: &str) -> Result<&str, MetricError> {
    Ok(if metric.starts_with("status_") {
        status_code(metric)?;
        "status_CODE"
    } else if metric.starts_with("error_") {
        error_kind(metric)?;
        "error_KIND"
    } else if metric.starts_with('p') && metric.len() > 1 && metric != "p" {
        percentile(metric)?;
        "pNN"
    } else {
        metric
    })
}

/// The kind of load metric `metric` asked of `subject` (a load's name, `all` for every load
/// summed, or none), or why no load has it. Metrics of one load's distribution (percentiles,
/// `mean`, `max`, `late_max`) cannot be asked of `all`.
pub fn load_metric_kind(metric: &str, subject: Option<&str>) -> Result<MetricKind, MetricError> {
    let of = subject.map_or(String::new(), |s| format!(" for '{s}'"));
    let family = family(metric)?;
    let Some((_, kind)) = LOAD.iter().find(|(m, _)| *m == family) else {
        let names: Vec<&str> = LOAD.iter().map(|(m, _)| *m).collect();
        return Err(MetricError(format!(
            "unknown metric '{metric}'{of} ({})",
            names.join(", ")
        )));
    };
    if subject == Some("all") && single_load_only(metric) {
        return Err(MetricError(format!(
            "'{metric}' is a metric of one load; name the load instead of 'all'"
        )));
    }
    Ok(*kind)
}

/// Metrics of one load's distribution, which cannot be summed over loads.
pub fn single_load_only(metric: &str) -> bool {
    matches!(metric, "mean" | "max" | "late_max")
        || (metric.starts_with('p') && percentile(metric).is_ok())
}

/// The status code of `status_CODE`.
pub fn status_code(m: &str) -> Result<u16, MetricError> {
    m.strip_prefix("status_")
        .and_then(|c| c.parse::<u16>().ok())
        .filter(|c| (100..=599).contains(c))
        .ok_or_else(|| {
            MetricError(format!(
                "'{m}': the status must be a code from 100 to 599, e.g. status_503"
            ))
        })
}

/// The error kind of `error_KIND`.
pub fn error_kind(m: &str) -> Result<ErrorKind, MetricError> {
    let name = m.strip_prefix("error_").unwrap_or(m);
    ErrorKind::ALL
        .iter()
        .copied()
        .find(|k| k.name() == name)
        .ok_or_else(|| {
            let known: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.name()).collect();
            MetricError(format!(
                "'{m}': unknown error kind '{name}' ({})",
                known.join(", ")
            ))
        })
}

/// The percentile of `pNN` (0 < NN <= 100).
pub fn percentile(m: &str) -> Result<f64, MetricError> {
    m.get(1..)
        .and_then(|p| p.parse::<f64>().ok())
        .filter(|p| *p > 0.0 && *p <= 100.0)
        .ok_or_else(|| {
            MetricError(format!(
                "'{m}': a percentile is p followed by a number up to 100, e.g. p99.9"
            ))
        })
}

/// Reads a value written for a metric of kind `kind`: `0.5%` and `50ppm` are fractions, a
/// latency takes a duration (`250ms`; a bare number is microseconds), a rate `r/s` forms, the
/// rest plain numbers. The error says what is wrong with the value (the caller names where).
pub fn parse_value(s: &str, kind: MetricKind) -> Result<f64, MetricError> {
    let s = s.trim();
    if let Some(p) = s.strip_suffix('%') {
        let v: f64 = p.trim().parse().map_err(|_| "is not a number")?;
        return Ok(v / 100.0);
    }
    if let Some(p) = s.strip_suffix("ppm") {
        let v: f64 = p.trim().parse().map_err(|_| "is not a number")?;
        return Ok(v / 1e6);
    }
    match kind {
        MetricKind::Micros => {
            if let Ok(v) = s.parse::<f64>() {
                return Ok(v);
            }
            units::parse_duration(s)
                .map(|d| d.as_secs_f64() * 1e6)
                .map_err(|e| MetricError(format!("is not a duration ({e})")))
        }
        MetricKind::PerSec => units::parse_rate(s).map_err(|e| MetricError(e.to_string())),
        MetricKind::Bytes => units::parse_size(s)
            .map(|b| b as f64)
            .map_err(|e| MetricError(e.to_string())),
        _ => s
            .parse::<f64>()
            .map_err(|_| MetricError("is not a number".into())),
    }
}

/// Prints a metric's value the way checks and gates show it.
pub fn show(v: f64, kind: MetricKind) -> String {
    match kind {
        MetricKind::Count => {
            if v.fract() == 0.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.3}")
            }
        }
        MetricKind::Fraction => {
            if v != 0.0 && v.abs() < 0.001 {
                format!("{:.1} ppm", v * 1e6)
            } else {
                format!("{:.3}%", v * 100.0)
            }
        }
        MetricKind::Micros => units::fmt_us(v),
        MetricKind::Millis => format!("{v:.1}ms"),
        MetricKind::PerSec => format!("{v:.2}/s"),
        MetricKind::Bytes => units::fmt_bytes(v),
    }
}

/// The value of load metric `metric` over `ls` (one load, or every load of a case summed), as
/// the load's summary holds it: exact counts, the histogram's percentiles.
pub fn load_metric(ls: &[&LoadSummary], metric: &str) -> Result<f64, MetricError> {
    let sum = |f: &dyn Fn(&LoadSummary) -> u64| ls.iter().map(|l| f(l)).sum::<u64>() as f64;
    let attempts = sum(&|l| l.attempts());
    // A load that never sent has no failures, statuses or rate to count: its zeros would pass
    // `failures == 0`. Only its attempts (none) are a fact about it.
    if attempts == 0.0 && metric != "attempts" {
        return Err("no request was attempted".into());
    }
    let elapsed = ls.iter().map(|l| l.elapsed_s).fold(0.0, f64::max);
    let single = || -> Result<&LoadSummary, MetricError> {
        match ls {
            [one] => Ok(one),
            _ => Err(MetricError(format!(
                "'{metric}' needs a single load, not 'all'"
            ))),
        }
    };
    let answered = |what: &str| -> Result<(), MetricError> {
        if sum(&|l| l.requests) == 0.0 {
            Err(MetricError(format!(
                "no response was received, so there is no {what}"
            )))
        } else {
            Ok(())
        }
    };
    Ok(match metric {
        "requests" => sum(&|l| l.requests),
        "attempts" => attempts,
        "failures" => sum(&|l| l.failures()),
        "errors" => sum(&|l| l.error_total()),
        "non_2xx" => sum(&|l| l.non_2xx_3xx()),
        "failure_rate" | "success_ratio" => {
            let f = sum(&|l| l.failures()) / attempts;
            if metric == "failure_rate" {
                f
            } else {
                1.0 - f
            }
        }
        "rps" => sum(&|l| l.requests) / elapsed.max(1e-9),
        "throughput" => (sum(&|l| l.requests) - sum(&|l| l.non_2xx_3xx())) / elapsed.max(1e-9),
        "late_sends" | "late_max" => {
            let schedules: Vec<_> = ls.iter().filter_map(|l| l.schedule.as_ref()).collect();
            if schedules.is_empty() {
                return Err(MetricError(format!(
                    "'{metric}' is kept only for open-loop loads (with a rate)"
                )));
            }
            if metric == "late_sends" {
                schedules.iter().map(|s| s.late).sum::<u64>() as f64
            } else {
                single()?;
                schedules[0].late_max_us as f64
            }
        }
        "mean" => {
            answered("latency")?;
            single()?.latency.mean_us
        }
        "max" => {
            answered("latency")?;
            single()?.latency.max_us as f64
        }
        m if m.starts_with("status_") => {
            let code = status_code(m)?;
            sum(&|l| l.status.get(&code).copied().unwrap_or(0))
        }
        m if m.starts_with("error_") => {
            let kind = error_kind(m)?;
            sum(&|l| l.errors.get(&kind).copied().unwrap_or(0))
        }
        m if m.starts_with('p') => {
            let p = percentile(m)?;
            answered("latency")?;
            let l = single()?;
            l.latency
                .percentile(p)
                .ok_or_else(|| format!("percentile {p} was not recorded"))? as f64
        }
        other => return Err(MetricError(format!("'{other}' is not a load metric"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_kinds_and_values() {
        let all = Some("all");
        assert_eq!(load_metric_kind("p99.9", None), Ok(MetricKind::Micros));
        assert_eq!(load_metric_kind("rps", all), Ok(MetricKind::PerSec));
        assert_eq!(load_metric_kind("status_503", all), Ok(MetricKind::Count));
        assert!(load_metric_kind("p99", all)
            .unwrap_err()
            .0
            .contains("name the load"));
        assert!(load_metric_kind("p999", None)
            .unwrap_err()
            .0
            .contains("e.g. p99.9"));
        assert!(load_metric_kind("error_nope", None)
            .unwrap_err()
            .0
            .contains("connect_refused"));
        assert!(load_metric_kind("speed", None)
            .unwrap_err()
            .0
            .starts_with("unknown metric 'speed' (requests"));
        assert!(load_metric_kind("speed", Some("tea"))
            .unwrap_err()
            .0
            .starts_with("unknown metric 'speed' for 'tea' (requests"));
        assert_eq!(parse_value("250ms", MetricKind::Micros), Ok(250_000.0));
        assert_eq!(parse_value("0.5%", MetricKind::Fraction), Ok(0.005));
        assert_eq!(parse_value("50ppm", MetricKind::Fraction), Ok(0.00005));
        assert_eq!(parse_value("3", MetricKind::Count), Ok(3.0));
        assert!(parse_value("x", MetricKind::Count).is_err());
        assert_eq!(show(0.00005, MetricKind::Fraction), "50.0 ppm");
        assert_eq!(show(12.0, MetricKind::Count), "12");
        assert_eq!(
            parse_value("200MB", MetricKind::Bytes),
            Ok(200.0 * 1024.0 * 1024.0)
        );
        assert!(parse_value("lots", MetricKind::Bytes).is_err());
        assert_eq!(
            stream_metric_kind("dropped_by_reload"),
            Some(MetricKind::Count)
        );
        assert_eq!(stream_metric_kind("p99"), None);
    }
}
