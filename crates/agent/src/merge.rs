//! The exact merge of result files: histograms added bucket by bucket, counts added, timelines
//! aligned on wall-clock time. A pure function of its inputs and their order, so merging the
//! saved files of a distributed run reproduces the run's own merged result byte for byte.

use crate::Error;
use hdrhistogram::Histogram;
pub use model::hdr::new_hist;
use model::{
    AgentRow, Latency, LoadMode, LoadResult, LoadSummary, Percentile, RateStats, ResultExt,
    Schedule, Second, SecondHdr,
};
use std::collections::BTreeMap;

/// Decodes a histogram as the engine writes it, into the engine's bounds.
pub fn decode(s: &str) -> Result<Histogram<u64>, Error> {
    model::hdr::decode(s).map_err(|e| Error::Merge(e.to_string()))
}

/// The value at percentile `p` (0-100), never above the exact maximum (as the engine reports it).
pub fn percentile(h: &Histogram<u64>, p: f64, max: u64) -> u64 {
    if h.is_empty() {
        return 0;
    }
    h.value_at_quantile(p / 100.0).min(max)
}

/// A latency summary of a merged histogram with its exact count, min, max and the merged mean
/// and stdev.
fn latency_of(
    h: &Histogram<u64>,
    count: u64,
    mean: f64,
    stdev: f64,
    min: u64,
    max: u64,
) -> Latency {
    let within = if count == 0 {
        0.0
    } else {
        let (lo, hi) = (mean - stdev, mean + stdev);
        let n: u64 = h
            .iter_recorded()
            .filter(|v| {
                let x = h.median_equivalent(v.value_iterated_to()) as f64;
                x >= lo && x <= hi
            })
            .map(|v| v.count_at_value())
            .sum();
        n as f64 * 100.0 / count as f64
    };
    Latency {
        count,
        mean_us: mean,
        stdev_us: stdev,
        min_us: min,
        max_us: max,
        within_stdev_pct: within,
        percentiles: load::PERCENTILES
            .iter()
            .map(|&p| Percentile {
                p,
                us: percentile(h, p, max),
            })
            .collect(),
        hdr: load::encode_hdr(h),
    }
}

/// Adds latency summaries: histograms exactly, count/min/max exactly, mean and stdev from each
/// part's count, mean and stdev (the pooled formulas).
fn merge_latency(parts: &[&Latency]) -> Result<Latency, Error> {
    let mut h = new_hist();
    let (mut count, mut sum, mut sumsq) = (0u64, 0f64, 0f64);
    let (mut min, mut max) = (u64::MAX, 0u64);
    for l in parts {
        if !l.hdr.is_empty() {
            h.add(decode(&l.hdr)?)
                .map_err(|e| Error::Merge(format!("histogram bounds differ: {e:?}")))?;
        }
        if l.count == 0 {
            continue;
        }
        let n = l.count as f64;
        count += l.count;
        sum += l.mean_us * n;
        sumsq += l.stdev_us * l.stdev_us * (n - 1.0) + n * l.mean_us * l.mean_us;
        min = min.min(l.min_us);
        max = max.max(l.max_us);
    }
    let mean = if count > 0 { sum / count as f64 } else { 0.0 };
    let stdev = if count > 1 {
        let n = count as f64;
        ((sumsq - n * mean * mean) / (n - 1.0)).max(0.0).sqrt()
    } else {
        0.0
    };
    Ok(latency_of(
        &h,
        count,
        mean,
        stdev,
        if count > 0 { min } else { 0 },
        max,
    ))
}

/// Merges result files (at least one) in the order given. Fails on a file without a wall-clock
/// origin or with histograms that do not decode.
pub fn merge(inputs: &[LoadResult]) -> Result<LoadResult, Error> {
    let first = inputs
        .first()
        .ok_or_else(|| Error::Merge("nothing to merge".to_string()))?;
    for (i, r) in inputs.iter().enumerate() {
        if r.ext.result_version == 0 || r.ext.origin_unix_ns == 0 {
            return Err(Error::Merge(format!(
                "input {} has no wall-clock origin (written before result_version 1)",
                i + 1
            )));
        }
    }
    let base = inputs
        .iter()
        .map(|r| r.ext.origin_unix_ns)
        .min()
        .unwrap_or(0);
    // Each input's origin relative to the merged one: exact in seconds for start_s, rounded to
    // whole seconds for the per-second rows (agents share one origin, so that is exact there).
    let off_s: Vec<f64> = inputs
        .iter()
        .map(|r| (r.ext.origin_unix_ns - base) as f64 / 1e9)
        .collect();
    let shift: Vec<u32> = off_s.iter().map(|o| o.round() as u32).collect();
    let sums: Vec<&LoadSummary> = inputs.iter().map(|r| &r.summary).collect();

    let start_s = sums
        .iter()
        .zip(&off_s)
        .map(|(s, o)| s.start_s + o)
        .fold(f64::INFINITY, f64::min);
    let end_s = sums
        .iter()
        .zip(&off_s)
        .map(|(s, o)| s.start_s + o + s.elapsed_s)
        .fold(0.0, f64::max);

    let mut status = BTreeMap::new();
    let mut errors = BTreeMap::new();
    let mut error_messages = BTreeMap::new();
    for s in &sums {
        for (k, n) in &s.status {
            *status.entry(*k).or_insert(0) += n;
        }
        for (k, n) in &s.errors {
            *errors.entry(*k).or_insert(0) += n;
        }
        for (k, m) in &s.error_messages {
            error_messages.entry(*k).or_insert_with(|| m.clone());
        }
    }
    let latency = merge_latency(&sums.iter().map(|s| &s.latency).collect::<Vec<_>>())?;
    let unc: Vec<&Latency> = sums
        .iter()
        .filter_map(|s| s.latency_uncorrected.as_ref())
        .collect();
    let latency_uncorrected = if unc.is_empty() {
        None
    } else {
        Some(merge_latency(&unc)?)
    };
    let mode = match &first.summary.mode {
        LoadMode::Closed => LoadMode::Closed,
        LoadMode::Open { arrivals, seed, .. } => LoadMode::Open {
            rate: sums
                .iter()
                .map(|s| match s.mode {
                    LoadMode::Open { rate, .. } => rate,
                    LoadMode::Closed => 0.0,
                })
                .sum(),
            arrivals: *arrivals,
            seed: *seed,
        },
    };
    let (timeline, seconds_hdr) = merge_timeline(inputs, &shift)?;
    let summary = LoadSummary {
        schema: first.summary.schema,
        name: first.summary.name.clone(),
        url: first.summary.url.clone(),
        method: first.summary.method.clone(),
        mode,
        threads: sums.iter().map(|s| s.threads).sum(),
        connections: sums.iter().map(|s| s.connections).sum(),
        start_s: if start_s.is_finite() { start_s } else { 0.0 },
        planned_s: first.summary.planned_s,
        elapsed_s: (end_s - start_s).max(0.0),
        timeout_ms: first.summary.timeout_ms,
        requests: sums.iter().map(|s| s.requests).sum(),
        bytes_read: sums.iter().map(|s| s.bytes_read).sum(),
        bytes_written: sums.iter().map(|s| s.bytes_written).sum(),
        status,
        errors,
        error_messages,
        connects: sums.iter().map(|s| s.connects).sum(),
        retried: sums.iter().map(|s| s.retried).sum(),
        latency,
        latency_uncorrected,
        req_per_sec: merge_rates(&sums),
        schedule: merge_schedules(&sums),
        timeline,
        http2: merge_http2(&sums),
    };
    let agents = inputs.iter().map(agent_row).collect();
    Ok(LoadResult {
        summary,
        ext: ResultExt {
            result_version: model::RESULT_VERSION,
            origin_unix_ns: base,
            seconds_hdr,
            agent: None,
            agents,
        },
    })
}

/// One input's row of the per-agent table.
pub fn agent_row(r: &LoadResult) -> AgentRow {
    let s = &r.summary;
    let info = r.ext.agent.clone().unwrap_or_default();
    AgentRow {
        agent: if info.host.is_empty() {
            s.name.clone()
        } else {
            info.host.clone()
        },
        requests: s.requests,
        errors: s.error_total(),
        req_per_sec: s.req_per_sec_total(),
        p50_us: s.latency.percentile(50.0).unwrap_or(0),
        p99_us: s.latency.percentile(99.0).unwrap_or(0),
        max_us: s.latency.max_us,
        clock_offset_us: info.clock_offset_us,
        start_skew_us: info.start_skew_us,
        lost: info.lost,
    }
}

/// The merged per-second rows and histograms, on the merged origin's seconds. Seconds are
/// merged one at a time into two reused histograms, so memory does not grow with run length.
fn merge_timeline(
    inputs: &[LoadResult],
    shift: &[u32],
) -> Result<(Vec<Second>, Vec<SecondHdr>), Error> {
    let open = inputs.iter().any(|r| {
        r.ext
            .seconds_hdr
            .iter()
            .any(|h| h.hdr_uncorrected.is_some())
    });
    // Per merged second, the (row, histograms) of every input that has it, in input order.
    let mut at: BTreeMap<u32, Vec<(&Second, Option<&SecondHdr>)>> = BTreeMap::new();
    for (r, &sh) in inputs.iter().zip(shift) {
        let hdrs: BTreeMap<u32, &SecondHdr> = r.ext.seconds_hdr.iter().map(|h| (h.t, h)).collect();
        for row in &r.summary.timeline {
            at.entry(row.t + sh)
                .or_default()
                .push((row, hdrs.get(&row.t).copied()));
        }
    }
    let mut h = new_hist();
    let mut u = new_hist();
    let mut timeline = Vec::with_capacity(at.len());
    let mut hdrs = Vec::with_capacity(at.len());
    for (t, parts) in at {
        let (row, hdr) = merge_second(t, &parts, open, &mut h, &mut u)?;
        timeline.push(row);
        hdrs.push(hdr);
    }
    Ok((timeline, hdrs))
}

/// One merged timeline second `t` from the inputs' rows of that second and their histograms:
/// counts added, percentiles from the added histograms (`h` and `u` are scratch space, reused
/// so memory does not grow with run length). `open`: keep uncorrected histograms too.
pub fn merge_second(
    t: u32,
    parts: &[(&Second, Option<&SecondHdr>)],
    open: bool,
    h: &mut Histogram<u64>,
    u: &mut Histogram<u64>,
) -> Result<(Second, SecondHdr), Error> {
    let add = |h: &mut Histogram<u64>, s: &str| -> Result<(), Error> {
        h.add(decode(s)?)
            .map_err(|e| Error::Merge(format!("histogram bounds differ: {e:?}")))
    };
    h.reset();
    u.reset();
    let mut row = Second {
        t,
        ..Second::default()
    };
    for (r, hdr) in parts {
        row.requests += r.requests;
        for i in 0..5 {
            row.status_class[i] += r.status_class[i];
        }
        for (k, n) in &r.errors {
            *row.errors.entry(*k).or_insert(0) += n;
        }
        row.bytes += r.bytes;
        row.retried += r.retried;
        row.sent += r.sent;
        row.in_flight += r.in_flight;
        row.latency_sum_us += r.latency_sum_us;
        row.max_us = row.max_us.max(r.max_us);
        if let Some(x) = hdr {
            add(h, &x.hdr)?;
            if let Some(y) = &x.hdr_uncorrected {
                add(u, y)?;
            }
        }
    }
    row.p50_us = percentile(h, 50.0, row.max_us);
    row.p90_us = percentile(h, 90.0, row.max_us);
    row.p99_us = percentile(h, 99.0, row.max_us);
    let hdr = SecondHdr {
        t,
        hdr: load::encode_hdr(h),
        hdr_uncorrected: open.then(|| load::encode_hdr(u)),
    };
    Ok((row, hdr))
}

/// wrk's Req/Sec row across inputs: per-thread rates pooled, weighted by thread count.
fn merge_rates(sums: &[&LoadSummary]) -> RateStats {
    let w: f64 = sums.iter().map(|s| s.threads.max(1) as f64).sum();
    if w == 0.0 {
        return RateStats::default();
    }
    let mean = sums
        .iter()
        .map(|s| s.req_per_sec.mean * s.threads.max(1) as f64)
        .sum::<f64>()
        / w;
    let var = sums
        .iter()
        .map(|s| {
            let r = &s.req_per_sec;
            s.threads.max(1) as f64 * (r.stdev * r.stdev + (r.mean - mean).powi(2))
        })
        .sum::<f64>()
        / w;
    RateStats {
        mean,
        stdev: var.sqrt(),
        max: sums.iter().map(|s| s.req_per_sec.max).fold(0.0, f64::max),
        within_stdev_pct: sums
            .iter()
            .map(|s| s.req_per_sec.within_stdev_pct * s.threads.max(1) as f64)
            .sum::<f64>()
            / w,
    }
}

/// HTTP/2 counters added (maps key by key); the most concurrent streams is the largest.
fn merge_http2(sums: &[&LoadSummary]) -> Option<model::Http2Stats> {
    let all: Vec<&model::Http2Stats> = sums.iter().filter_map(|s| s.http2.as_ref()).collect();
    let first = all.first()?;
    let add = |m: &mut BTreeMap<String, u64>, o: &BTreeMap<String, u64>| {
        for (k, n) in o {
            *m.entry(k.clone()).or_insert(0) += n;
        }
    };
    let mut out = model::Http2Stats {
        streams_per_connection: first.streams_per_connection,
        ..model::Http2Stats::default()
    };
    for h in &all {
        out.connections += h.connections;
        out.streams += h.streams;
        out.max_concurrent_streams = out.max_concurrent_streams.max(h.max_concurrent_streams);
        out.goaways_graceful += h.goaways_graceful;
        out.goaways_error += h.goaways_error;
        add(&mut out.goaway_codes, &h.goaway_codes);
        out.refused += h.refused;
        add(&mut out.rst_stream, &h.rst_stream);
        add(&mut out.connection_errors, &h.connection_errors);
        out.settings_timeouts += h.settings_timeouts;
        out.flow_control_stalls += h.flow_control_stalls;
    }
    Some(out)
}

/// Open loop: counts added; the worst lateness kept; the mean weighted by sends; the p99 is the
/// largest of the inputs' (an upper bound: lateness histograms do not travel).
fn merge_schedules(sums: &[&LoadSummary]) -> Option<Schedule> {
    let all: Vec<&Schedule> = sums.iter().filter_map(|s| s.schedule.as_ref()).collect();
    let first = all.first()?;
    let sent: u64 = all.iter().map(|s| s.sent).sum();
    Some(Schedule {
        intended: all.iter().map(|s| s.intended).sum(),
        sent,
        late: all.iter().map(|s| s.late).sum(),
        late_threshold_us: first.late_threshold_us,
        late_max_us: all.iter().map(|s| s.late_max_us).max().unwrap_or(0),
        late_p99_us: all.iter().map(|s| s.late_p99_us).max().unwrap_or(0),
        late_mean_us: if sent > 0 {
            all.iter()
                .map(|s| s.late_mean_us * s.sent as f64)
                .sum::<f64>()
                / sent as f64
        } else {
            0.0
        },
        achieved_rate: all.iter().map(|s| s.achieved_rate).sum(),
        send_window_us: all.iter().map(|s| s.send_window_us).max().unwrap_or(0),
    })
}

/// A result rebuilt from the seconds an agent sent before it went away: counts and latency of
/// those seconds (status codes by class are not known per code, so `status` stays empty).
pub fn partial(
    template: &LoadSummary,
    rows: &[(Second, SecondHdr)],
    origin_unix_ns: u64,
) -> Result<LoadResult, Error> {
    let mut h = new_hist();
    let mut u: Option<Histogram<u64>> = None;
    let mut errors = BTreeMap::new();
    let (mut requests, mut bytes, mut max, mut retried) = (0, 0, 0, 0);
    for (row, hdr) in rows {
        requests += row.requests;
        bytes += row.bytes;
        retried += row.retried;
        max = max.max(row.max_us);
        for (k, n) in &row.errors {
            *errors.entry(*k).or_insert(0) += n;
        }
        h.add(decode(&hdr.hdr)?)
            .map_err(|e| Error::Merge(format!("histogram bounds differ: {e:?}")))?;
        if let Some(x) = &hdr.hdr_uncorrected {
            u.get_or_insert_with(new_hist)
                .add(decode(x)?)
                .map_err(|e| Error::Merge(format!("histogram bounds differ: {e:?}")))?;
        }
    }
    let lat = |h: &Histogram<u64>| {
        let min = if h.is_empty() { 0 } else { h.min() };
        let max = if h.is_empty() { 0 } else { h.max() };
        latency_of(h, h.len(), h.mean(), h.stdev(), min, max)
    };
    let first_t = rows.first().map(|r| r.0.t).unwrap_or(0);
    let last_t = rows.last().map(|r| r.0.t + 1).unwrap_or(first_t);
    let mut latency = lat(&h);
    latency.max_us = latency.max_us.max(max);
    let summary = LoadSummary {
        requests,
        bytes_read: bytes,
        bytes_written: 0,
        status: BTreeMap::new(),
        errors,
        error_messages: BTreeMap::new(),
        connects: 0,
        retried,
        latency,
        latency_uncorrected: u.as_ref().map(lat),
        req_per_sec: RateStats::default(),
        schedule: None,
        start_s: first_t as f64,
        elapsed_s: (last_t - first_t) as f64,
        timeline: rows.iter().map(|r| r.0.clone()).collect(),
        ..template.clone()
    };
    Ok(LoadResult {
        summary,
        ext: ResultExt {
            result_version: model::RESULT_VERSION,
            origin_unix_ns,
            seconds_hdr: rows.iter().map(|r| r.1.clone()).collect(),
            agent: None,
            agents: Vec::new(),
        },
    })
}

/// The per-agent table printed after the merged wrk-style block.
pub fn agent_table(rows: &[AgentRow]) -> String {
    use std::fmt::Write as _;
    let mut out = String::from(
        "  Agent                      Requests   Errors      Req/s       p50       p99       Max   Offset     Skew\n",
    );
    for r in rows {
        let _ = writeln!(
            out,
            "  {:<24} {:>10} {:>8} {:>10.1} {:>9} {:>9} {:>9} {:>7}us {:>6}us{}",
            r.agent,
            r.requests,
            r.errors,
            r.req_per_sec,
            fmt_us(r.p50_us),
            fmt_us(r.p99_us),
            fmt_us(r.max_us),
            r.clock_offset_us,
            r.start_skew_us,
            if r.lost { "  LOST" } else { "" }
        );
    }
    out
}

fn fmt_us(us: u64) -> String {
    if us >= 1_000_000 {
        format!("{:.2}s", us as f64 / 1e6)
    } else if us >= 1000 {
        format!("{:.2}ms", us as f64 / 1e3)
    } else {
        format!("{us}us")
    }
}
