//! Turns the merged recordings into the schema every reporter reads ([`model::LoadSummary`]):
//! exact counts, latency summaries with the whole histogram attached, wrk's Req/Sec spread, and
//! how well an open-loop schedule was kept.

use crate::aggregate::Aggregated;
use crate::config::Config;
use crate::stats::{encode, Recorder};
use crate::worker::LATE_THRESHOLD_NS;
use model::{ErrorKind, Latency, LoadMode, LoadSummary, Percentile, RateStats, Schedule};
use std::collections::BTreeMap;

/// The percentiles every latency summary carries.
pub const PERCENTILES: [f64; 8] = [50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 99.99, 99.999];

/// What the run itself knew, beyond the recordings.
pub struct RunFacts {
    /// Threads used.
    pub threads: u32,
    /// Connections used.
    pub connections: u32,
    /// Start, ns since the origin.
    pub start_ns: u64,
    /// End (last thread finished), ns since the origin.
    pub end_ns: u64,
}

/// Builds the summary of a finished run.
pub fn build(cfg: &Config, agg: &Aggregated, facts: &RunFacts) -> LoadSummary {
    let elapsed_s = facts.end_ns.saturating_sub(facts.start_ns) as f64 / 1e9;
    let mut status = BTreeMap::new();
    for f in &agg.finals {
        for (code, &n) in f.status.iter().enumerate() {
            if n > 0 {
                *status.entry(code as u16).or_insert(0) += n;
            }
        }
    }
    let errors: BTreeMap<ErrorKind, u64> = ErrorKind::ALL
        .iter()
        .zip(agg.errors.iter())
        .filter(|(_, &n)| n > 0)
        .map(|(&k, &n)| (k, n))
        .collect();
    let mode = match cfg.rate {
        Some(rate) => LoadMode::Open {
            rate,
            arrivals: cfg.arrivals,
            seed: cfg.seed,
        },
        None => LoadMode::Closed,
    };
    let schedule = cfg.rate.map(|_| schedule(cfg, agg, facts));
    LoadSummary {
        schema: model::SCHEMA_VERSION,
        name: cfg.name.clone(),
        url: cfg.url.clone(),
        method: cfg.method.clone(),
        mode,
        threads: facts.threads,
        connections: facts.connections,
        start_s: facts.start_ns as f64 / 1e9,
        planned_s: cfg.duration.map(|d| d.as_secs_f64()),
        elapsed_s,
        timeout_ms: cfg.timeout.as_millis() as u64,
        requests: agg.requests,
        bytes_read: agg.bytes,
        bytes_written: agg.finals.iter().map(|f| f.bytes_written).sum(),
        status,
        errors,
        error_messages: first_errors(agg),
        connects: agg.finals.iter().map(|f| f.connects).sum(),
        retried: agg.retried,
        latency: latency(&agg.latency),
        latency_uncorrected: agg.uncorrected.as_ref().map(latency),
        req_per_sec: req_per_sec(agg, facts, elapsed_s),
        schedule,
        timeline: agg.timeline.clone(),
        http2: cfg.http2.then(|| http2_stats(cfg, agg)),
    }
}

/// The HTTP/2 counts of all threads, with error codes by name.
fn http2_stats(cfg: &Config, agg: &Aggregated) -> model::Http2Stats {
    let mut c = crate::stats::H2Counts::default();
    for f in &agg.finals {
        if let Some(h) = &f.h2 {
            c.merge(h);
        }
    }
    let by_name = |v: &[u64]| -> BTreeMap<String, u64> {
        v.iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(k, &n)| (http2::frame::code_name(k as u32).to_string(), n))
            .collect()
    };
    model::Http2Stats {
        streams_per_connection: cfg.streams,
        connections: c.connections,
        streams: c.streams,
        max_concurrent_streams: c.max_concurrent,
        goaways_graceful: c.goaways[0],
        goaways_error: c.goaways[1..].iter().sum(),
        goaway_codes: by_name(&c.goaways),
        refused: c.refused,
        rst_stream: by_name(&c.rst),
        connection_errors: by_name(&c.conn_errors),
        settings_timeouts: c.settings_timeouts,
        flow_control_stalls: c.stalls,
    }
}

/// Summarises a recorder: exact count, mean, stdev, min and max; percentiles and the share
/// within one stdev from the histogram; the histogram itself, serialized.
pub fn latency(r: &Recorder) -> Latency {
    let mean = r.mean();
    let stdev = r.stdev();
    let within = if r.count == 0 {
        0.0
    } else {
        let (lo, hi) = (mean - stdev, mean + stdev);
        let n: u64 = r
            .hist
            .iter_recorded()
            .filter(|v| {
                let x = r.hist.median_equivalent(v.value_iterated_to()) as f64;
                x >= lo && x <= hi
            })
            .map(|v| v.count_at_value())
            .sum();
        n as f64 * 100.0 / r.count as f64
    };
    Latency {
        count: r.count,
        mean_us: mean,
        stdev_us: stdev,
        min_us: if r.count == 0 { 0 } else { r.min },
        max_us: r.max,
        within_stdev_pct: within,
        percentiles: PERCENTILES
            .iter()
            .map(|&p| Percentile {
                p,
                us: r.percentile(p),
            })
            .collect(),
        hdr: encode(&r.hist),
    }
}

/// The earliest message of each error kind across the threads.
fn first_errors(agg: &Aggregated) -> BTreeMap<ErrorKind, String> {
    let mut out = BTreeMap::new();
    for (k, kind) in ErrorKind::ALL.iter().enumerate() {
        let first = agg
            .finals
            .iter()
            .filter_map(|f| f.first_errors[k].as_ref())
            .min_by_key(|(t, _)| *t);
        if let Some((_, msg)) = first {
            out.insert(*kind, msg.clone());
        }
    }
    out
}

/// wrk's Req/Sec row over whole seconds inside the run (partial first and last seconds would
/// read as slow threads); a run shorter than that uses each thread's overall rate.
fn req_per_sec(agg: &Aggregated, facts: &RunFacts, elapsed_s: f64) -> RateStats {
    let full: Vec<f64> = agg
        .thread_seconds
        .iter()
        .filter(|(t, _)| {
            let (a, b) = (*t as u64 * 1_000_000_000, (*t as u64 + 1) * 1_000_000_000);
            a >= facts.start_ns && b <= facts.end_ns
        })
        .map(|&(_, n)| n as f64)
        .collect();
    let values = if full.is_empty() {
        let per_thread = if elapsed_s > 0.0 {
            agg.requests as f64 / elapsed_s / facts.threads.max(1) as f64
        } else {
            0.0
        };
        vec![per_thread; facts.threads.max(1) as usize]
    } else {
        full
    };
    spread(&values)
}

/// Mean, sample stdev, max and share within one stdev of a set of values.
pub fn spread(values: &[f64]) -> RateStats {
    if values.is_empty() {
        return RateStats::default();
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let stdev = if values.len() > 1 {
        (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    } else {
        0.0
    };
    let within = values
        .iter()
        .filter(|&&v| v >= mean - stdev && v <= mean + stdev)
        .count() as f64
        * 100.0
        / n;
    RateStats {
        mean,
        stdev,
        max: values.iter().cloned().fold(0.0, f64::max),
        within_stdev_pct: within,
    }
}

fn schedule(cfg: &Config, agg: &Aggregated, facts: &RunFacts) -> Schedule {
    let mut lateness = Recorder::default();
    for f in &agg.finals {
        if let Some(l) = &f.lateness {
            lateness.merge(l);
        }
    }
    let sent: u64 = agg.finals.iter().map(|f| f.sent).sum();
    let send_end = agg
        .finals
        .iter()
        .map(|f| f.send_end_ns)
        .max()
        .unwrap_or(facts.end_ns);
    let window_s = send_end.saturating_sub(facts.start_ns) as f64 / 1e9;
    Schedule {
        intended: agg.finals.iter().map(|f| f.intended).sum(),
        sent,
        late: agg.finals.iter().map(|f| f.late).sum(),
        late_threshold_us: LATE_THRESHOLD_NS / 1000,
        late_max_us: if lateness.count > 0 { lateness.max } else { 0 },
        late_p99_us: lateness.percentile(99.0),
        late_mean_us: lateness.mean(),
        achieved_rate: if window_s > 0.0 {
            sent as f64 / window_s
        } else {
            0.0
        },
        send_window_us: cfg.send_window.as_micros() as u64,
    }
}
