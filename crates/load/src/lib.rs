//! The load engine: a wrk-class HTTP/1.1 generator, closed and open loop, whose latency goes into
//! HDR histograms from a monotonic clock and whose counts are exact.
//!
//! [`run`] starts one event-loop thread per [`Config::threads`] (each owning its connections),
//! merges their per-second recordings as the run goes (one [`model::Second`] per second, handed to
//! [`Control::on_second`]), and returns a [`model::LoadSummary`]. The pieces, one file each:
//! `codec` (response framing, no I/O), `fds` (the open-files budget), `sys` (sockets and epoll), `uring` (an io_uring with
//! provided buffers), `conn` (one connection's I/O steps), `tls`, `worker` (the loop, over epoll
//! or io_uring), `pacer` (open-loop schedules), `stats`, `aggregate`, `summary`, and [`probe`]
//! (a blocking one-shot request for the bench).
//!
//! Long-lived connections (WebSocket, gRPC, server-sent events) have an event loop of their own,
//! [`run_streams`] in [`stream`], beside the request loop rather than in it: their sockets,
//! TLS, target and histograms are the same, their hot path is not.

#![warn(missing_docs)]

mod aggregate;
pub mod codec;
mod config;
mod conn;
pub mod fds;
mod interrupt;
mod pacer;
pub mod probe;
mod stats;
pub mod stream;
mod summary;
mod sys;
pub mod target;
mod tls;
mod uring;
mod worker;

pub use config::{
    parse_header_line, replayable, Config, Error, IoMode, Resolve, SecondHdrSink,
    DEFAULT_SEND_WINDOW,
};
pub use interrupt::stop_on_interrupt;
pub use model::Arrivals;
pub use pacer::{even_arrivals, Pacer, Rng};
pub use stats::encode as encode_hdr;
pub use stream::{run_streams, StreamConfig};
pub use summary::PERCENTILES;
pub use worker::LATE_THRESHOLD_NS;

use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

/// A listener for timeline rows, called from the aggregating thread.
pub type OnSecond = Box<dyn Fn(&model::Second) + Send + Sync>;

/// How the caller steers a run and listens to it.
pub struct Control {
    /// Set it (Ctrl-C, scenario end) to end the run early; what was recorded is still returned.
    /// Requests in flight get up to the timeout to finish.
    pub stop: Arc<AtomicBool>,
    /// The time base: [`model::Second::t`], [`model::RequestRecord::t_us`] and
    /// [`model::LoadSummary::start_s`] count from it, so several loads and a bench's actions
    /// share one clock.
    pub origin: Instant,
    /// Called once per completed second with the merged (all threads) timeline row.
    pub on_second: Option<OnSecond>,
}

impl Default for Control {
    fn default() -> Self {
        Control::new()
    }
}

impl Control {
    /// A control with its origin now, no stop requested and no listener.
    pub fn new() -> Control {
        Control {
            stop: Arc::new(AtomicBool::new(false)),
            origin: Instant::now(),
            on_second: None,
        }
    }
}

/// What a run returns.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Everything recorded, in the shared schema.
    pub summary: model::LoadSummary,
    /// One record per attempt sorted by time, when [`Config::record_requests`] was set.
    pub records: Option<Vec<model::RequestRecord>>,
    /// Every timeline second's histograms, serialized, so results merge exactly per second.
    pub seconds_hdr: Vec<model::SecondHdr>,
    /// Wall-clock time of [`Control::origin`] in ns since the Unix epoch, so results from
    /// several machines line up.
    pub origin_unix_ns: u64,
}

/// Runs one load to its end (duration, request count, or [`Control::stop`]). Errors are setup
/// problems only; everything that goes wrong during the run is counted in the summary.
pub fn run(cfg: &Config, ctl: &Control) -> Result<Outcome, Error> {
    cfg.validate()?;
    let target = target::Target::new(cfg)?;
    let tls = match &target.server_name {
        Some(name) => Some((tls::client_config(cfg)?, tls::server_name(name)?)),
        None => None,
    };
    let threads = thread_count(cfg);
    // HTTP/2 runs on epoll (its writes are frames of many streams, not one request's bytes).
    let backend = io_backend(cfg.io, tls.is_some() || cfg.http2)?;
    // Every socket must fit under the open-files limit, or the run does not start.
    fds::ensure(cfg.connections as u64, threads as u64)?;
    let hdr_log = hdr_log(cfg, ctl)?;
    // Each worker's I/O is set up before the schedule starts, so that setting it up makes no
    // send late.
    let prepared = (0..threads)
        .map(|i| {
            let conns = share(cfg.connections as u64, threads as u64, i as u64) as usize;
            worker::prepare(backend, conns)
        })
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(|e| Error::Io(format!("cannot set up a load thread's I/O: {e}")))?;

    let start_ns = match cfg.start_at {
        Some(at) => {
            // Sleep to the asked instant (unless stopped first); the schedule counts from it.
            while ctl.origin.elapsed() < at && !ctl.stop.load(std::sync::atomic::Ordering::Relaxed)
            {
                std::thread::sleep(
                    (at.saturating_sub(ctl.origin.elapsed()))
                        .min(std::time::Duration::from_millis(20)),
                );
            }
            at.as_nanos() as u64
        }
        None => ctl.origin.elapsed().as_nanos() as u64,
    };
    let shared = worker::Shared {
        target,
        tls,
        origin: ctl.origin,
        start_ns,
        end_ns: cfg.duration.map(|d| start_ns + d.as_nanos() as u64),
        timeout_ns: cfg.timeout.as_nanos() as u64,
        backoff_ns: cfg.reconnect_backoff.as_nanos() as u64,
        open: cfg.rate.map(|r| (r, cfg.arrivals, cfg.seed)),
        send_window_ns: cfg.send_window.as_nanos() as u64,
        limit: cfg.requests,
        threads,
        connections: cfg.connections as usize,
        record: cfg.record_requests,
        stop: ctl.stop.clone(),
        backend,
        streams: if cfg.http2 { Some(cfg.streams) } else { None },
        retry_idle_closed: cfg.retry_idle_closed,
    };
    let agg = run_threads(cfg, ctl, &shared, hdr_log, prepared)?;
    Ok(outcome(cfg, ctl, agg, threads, start_ns))
}

/// Event-loop threads: as asked, but never more than connections, nor than requests.
fn thread_count(cfg: &Config) -> usize {
    let mut threads = cfg.threads.min(cfg.connections) as usize;
    if let Some(n) = cfg.requests {
        threads = threads.min(n.min(u32::MAX as u64) as usize);
    }
    threads
}

/// The kernel interface that drives the sockets: io_uring for plain http when the kernel has it
/// (or when asked), epoll otherwise and always for https.
fn io_backend(io: IoMode, tls: bool) -> Result<worker::Backend, Error> {
    Ok(match (io, tls) {
        (IoMode::Epoll, _) | (IoMode::Auto, true) => worker::Backend::Epoll,
        (IoMode::Uring, true) => {
            return Err(Error::Invalid(
                "io_uring drives plain http only; https runs on epoll".to_string(),
            ))
        }
        (IoMode::Uring, false) => match uring::Uring::new(1).and_then(|mut u| u.enable()) {
            Ok(_) => worker::Backend::Uring,
            Err(e) => return Err(Error::Io(format!("io_uring is not available here: {e}"))),
        },
        (IoMode::Auto, false) => {
            if uring::available() {
                worker::Backend::Uring
            } else {
                worker::Backend::Epoll
            }
        }
    })
}

/// The HDR interval log, created before any thread starts, when one was asked for.
fn hdr_log(cfg: &Config, ctl: &Control) -> Result<Option<aggregate::HdrLog>, Error> {
    let Some(path) = &cfg.hdr_log else {
        return Ok(None);
    };
    let file = std::fs::File::create(path)
        .map_err(|e| Error::Io(format!("cannot create {}: {e}", path.display())))?;
    let base = SystemTime::now() - ctl.origin.elapsed();
    Ok(Some(aggregate::HdrLog {
        file,
        base,
        tag: cfg.name.clone(),
    }))
}

/// Thread `i`'s share of `total` split over `n` threads (the first ones take the remainder).
fn share(total: u64, n: u64, i: u64) -> u64 {
    total / n + u64::from(i < total % n)
}

/// Starts the event-loop threads, merges their seconds on this thread as they come, and returns
/// the merged recording once every thread has ended.
fn run_threads(
    cfg: &Config,
    ctl: &Control,
    shared: &worker::Shared,
    hdr_log: Option<aggregate::HdrLog>,
    prepared: Vec<worker::Prepared>,
) -> Result<aggregate::Aggregated, Error> {
    let threads = shared.threads;
    let (tx, rx) = mpsc::channel();
    let mut recycle = Vec::with_capacity(threads);
    std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(threads);
        for (i, io) in prepared.into_iter().enumerate() {
            let (back_tx, back_rx) = mpsc::channel();
            recycle.push(back_tx);
            let conns = share(cfg.connections as u64, threads as u64, i as u64) as usize;
            let quota = match (cfg.rate, cfg.requests) {
                (None, Some(n)) => Some(share(n, threads as u64, i as u64)),
                _ => None,
            };
            let links = worker::Links {
                tx: tx.clone(),
                recycled: back_rx,
            };
            let spawned = std::thread::Builder::new()
                .name(format!("pb-load-{i}"))
                .spawn_scoped(s, move || worker::run(i, conns, quota, shared, links, io));
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    shared
                        .stop
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                    drop(tx);
                    for h in handles {
                        let _ = h.join();
                    }
                    return Err(Error::Io(format!("cannot start a load thread: {e}")));
                }
            }
        }
        drop(tx);
        let agg = aggregate::collect(
            rx,
            std::mem::take(&mut recycle),
            (shared.start_ns / 1_000_000_000) as u32,
            cfg.rate.is_some(),
            ctl.on_second.as_deref(),
            hdr_log,
            cfg.on_second_hdr.as_ref(),
        );
        let mut failure = None;
        for h in handles {
            match h.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failure = Some(Error::Io(format!("load thread: {e}"))),
                Err(_) => failure = Some(Error::Io("a load thread panicked".to_string())),
            }
        }
        match failure {
            Some(e) => Err(e),
            None => agg,
        }
    })
}

/// The summary (and the per-request records, sorted by time) of a finished run.
fn outcome(
    cfg: &Config,
    ctl: &Control,
    agg: aggregate::Aggregated,
    threads: usize,
    start_ns: u64,
) -> Outcome {
    let end_ns = agg
        .finals
        .iter()
        .map(|f| f.end_ns)
        .max()
        .unwrap_or_else(|| ctl.origin.elapsed().as_nanos() as u64);
    let facts = summary::RunFacts {
        threads: threads as u32,
        connections: cfg.connections,
        start_ns,
        end_ns,
    };
    let summary = summary::build(cfg, &agg, &facts);
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let origin_unix_ns = now.saturating_sub(ctl.origin.elapsed().as_nanos() as u64);
    let seconds_hdr = agg.seconds_hdr.clone();
    let records = cfg.record_requests.then(|| {
        let mut all: Vec<model::RequestRecord> =
            agg.finals.into_iter().flat_map(|f| f.records).collect();
        all.sort_by_key(|r| r.t_us);
        all
    });
    Outcome {
        summary,
        records,
        seconds_hdr,
        origin_unix_ns,
    }
}
