//! The aggregator: merges the threads' per-second blocks as each second completes on every
//! thread, emits one timeline row per second (to `on_second`, the `--hdr-log` file and the
//! timeline), folds it into the run's totals, and sends the cleared blocks back for reuse.

use crate::config::Error;
use crate::stats::{Msg, Recorder, SecondBlock, ThreadFinal, KINDS};
use hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder;
use hdrhistogram::serialization::V2DeflateSerializer;
use model::{ErrorKind, Second};
use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, SystemTime};

/// Everything the threads recorded, merged.
#[derive(Debug)]
pub struct Aggregated {
    /// One row per second.
    pub timeline: Vec<Second>,
    /// All latency (corrected in open loop).
    pub latency: Recorder,
    /// Open loop: latency from the actual send.
    pub uncorrected: Option<Recorder>,
    /// Failed attempts by kind (indexed like [`ErrorKind::ALL`]).
    pub errors: [u64; KINDS],
    /// Responses.
    pub requests: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Requests resent after an idle close.
    pub retried: u64,
    /// Responses per thread per second: (second, count), for wrk's Req/Sec row.
    pub thread_seconds: Vec<(u32, u64)>,
    /// Each thread's final totals.
    pub finals: Vec<ThreadFinal>,
    /// Each timeline second's histograms, serialized (for exact merging across results).
    pub seconds_hdr: Vec<model::SecondHdr>,
}

/// Where the per-second histograms go in the HdrHistogram interval-log format.
pub struct HdrLog {
    /// The open file.
    pub file: std::fs::File,
    /// Wall-clock time of the origin (the log's BaseTime).
    pub base: SystemTime,
    /// Tag written with every interval (the load's name).
    pub tag: String,
}

/// Receives until every thread is done. `recycle[i]` returns cleared blocks to thread `i`;
/// every thread's first block is for `first_second`.
pub fn collect(
    rx: Receiver<Msg>,
    recycle: Vec<Sender<Box<SecondBlock>>>,
    first_second: u32,
    open_loop: bool,
    on_second: Option<&(dyn Fn(&Second) + Send + Sync)>,
    hdr_log: Option<HdrLog>,
    on_hdr: Option<&crate::config::SecondHdrSink>,
) -> Result<Aggregated, Error> {
    let threads = recycle.len();
    let io_err = |e: &dyn std::fmt::Display| Error::Io(format!("hdr log: {e}"));
    let mut serializer = V2DeflateSerializer::new();
    let mut file = hdr_log.as_ref().map(|h| std::io::BufWriter::new(&h.file));
    let mut log = match (&mut file, &hdr_log) {
        (Some(f), Some(h)) => Some(
            IntervalLogWriterBuilder::new()
                .add_comment("proxybench load: per-second latency histograms in microseconds")
                .with_start_time(SystemTime::now())
                .with_base_time(h.base)
                .begin_log_with(f, &mut serializer)
                .map_err(|e| io_err(&e))?,
        ),
        _ => None,
    };
    let tag = hdr_log.as_ref().map(|h| h.tag.clone()).unwrap_or_default();

    let mut agg = Aggregated::new(open_loop);
    let mut pending: VecDeque<Box<SecondBlock>> = VecDeque::new();
    let mut spare: Vec<Box<SecondBlock>> = Vec::new();
    let mut last: Vec<Option<u32>> = vec![None; threads];
    let mut done = vec![false; threads];
    let mut next_emit = first_second;

    loop {
        let msg = rx.recv();
        match msg {
            Ok(Msg::Second(mut b)) => {
                let th = b.thread;
                agg.thread_seconds.push((b.t, b.requests));
                last[th] = Some(last[th].map_or(b.t, |l| l.max(b.t)));
                if b.t < next_emit {
                    // Threads send their seconds in order starting at the run's first second,
                    // so this cannot happen; if it did, the counts still go into the totals.
                    fold(&mut agg, &b);
                } else {
                    slot(&mut pending, &mut spare, next_emit, b.t, open_loop).merge(&b);
                }
                b.reset();
                let _ = recycle[th].send(b);
            }
            Ok(Msg::Done(f)) => {
                done[f.thread] = true;
                agg.finals.push(*f);
            }
            Err(_) => {
                // Every sender is gone (a thread died): what arrived is all there is.
                done.iter_mut().for_each(|d| *d = true);
            }
        }
        while let Some(front) = pending.front() {
            let t = front.t;
            let complete = (0..threads).all(|th| done[th] || last[th].is_some_and(|l| l >= t));
            if !complete {
                break;
            }
            let acc = pending.pop_front().expect("front exists");
            let row = row_of(&acc);
            if let Some(f) = on_second {
                f(&row);
            }
            if let Some(w) = &mut log {
                w.write_histogram(
                    &acc.latency.hist,
                    Duration::from_secs(t as u64),
                    Duration::from_secs(1),
                    hdrhistogram::serialization::interval_log::Tag::new(&tag),
                )
                .map_err(|e| io_err(&e))?;
            }
            fold(&mut agg, &acc);
            let hdr = second_hdr(&acc);
            if let Some(f) = on_hdr {
                (f.0)(&row, &hdr);
            }
            agg.seconds_hdr.push(hdr);
            agg.timeline.push(row);
            next_emit = t + 1;
            spare.push(acc);
        }
        if done.iter().all(|&d| d) && pending.is_empty() {
            break;
        }
    }
    drop(log);
    if let Some(mut f) = file {
        f.flush().map_err(|e| io_err(&e))?;
    }
    Ok(agg)
}

impl Aggregated {
    /// Nothing recorded yet; `open_loop` keeps the latency from the actual send as well.
    fn new(open_loop: bool) -> Aggregated {
        Aggregated {
            timeline: Vec::new(),
            latency: Recorder::default(),
            uncorrected: open_loop.then(Recorder::default),
            errors: [0; KINDS],
            requests: 0,
            bytes: 0,
            retried: 0,
            thread_seconds: Vec::new(),
            finals: Vec::new(),
            seconds_hdr: Vec::new(),
        }
    }
}

/// The merged block of second `t` among the pending ones (whose first is `next_emit`), with
/// cleared blocks (reused from `spare`) added up to it.
// The blocks stay boxed: the boxes themselves travel back to the threads for reuse.
#[allow(clippy::vec_box)]
fn slot<'a>(
    pending: &'a mut VecDeque<Box<SecondBlock>>,
    spare: &mut Vec<Box<SecondBlock>>,
    next_emit: u32,
    t: u32,
    open_loop: bool,
) -> &'a mut SecondBlock {
    let idx = (t - next_emit) as usize;
    while pending.len() <= idx {
        let mut acc = spare
            .pop()
            .unwrap_or_else(|| Box::new(SecondBlock::new(usize::MAX, open_loop)));
        acc.reset();
        acc.t = next_emit + pending.len() as u32;
        pending.push_back(acc);
    }
    &mut pending[idx]
}

/// A completed second's histograms, serialized for exact merging across results.
fn second_hdr(acc: &SecondBlock) -> model::SecondHdr {
    model::SecondHdr {
        t: acc.t,
        hdr: crate::stats::encode(&acc.latency.hist),
        hdr_uncorrected: acc
            .uncorrected
            .as_ref()
            .map(|u| crate::stats::encode(&u.hist)),
    }
}

/// Adds one second's counts and latency to the run's totals.
fn fold(agg: &mut Aggregated, b: &SecondBlock) {
    agg.requests += b.requests;
    agg.bytes += b.bytes;
    agg.retried += b.retried;
    for (i, n) in b.errors.iter().enumerate() {
        agg.errors[i] += n;
    }
    agg.latency.merge(&b.latency);
    if let (Some(a), Some(u)) = (&mut agg.uncorrected, &b.uncorrected) {
        a.merge(u);
    }
}

fn row_of(b: &SecondBlock) -> Second {
    let errors: BTreeMap<ErrorKind, u64> = ErrorKind::ALL
        .iter()
        .zip(b.errors.iter())
        .filter(|(_, &n)| n > 0)
        .map(|(&k, &n)| (k, n))
        .collect();
    let l = &b.latency;
    Second {
        t: b.t,
        requests: b.requests,
        status_class: b.status_class,
        errors,
        p50_us: l.percentile(50.0),
        p90_us: l.percentile(90.0),
        p99_us: l.percentile(99.0),
        max_us: if l.count > 0 { l.max } else { 0 },
        bytes: b.bytes,
        retried: b.retried,
        sent: b.sent,
        in_flight: b.in_flight,
        latency_sum_us: l.sum,
    }
}
