//! `proxybench agent`: listens, and for each coordinator that presents the token runs the share
//! of the load it is given, streaming each second and then its result.

use crate::proto::{self, FromAgent, Job, ToAgent};
use std::io::BufReader;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Serves coordinators forever, one thread per connection. With `metrics`, every job's seconds
/// are also added to the agent's live metrics (counting on across jobs, as counters do).
pub fn serve(
    listener: TcpListener,
    token: String,
    metrics: Option<Arc<openmetrics::Registry>>,
) -> std::io::Result<()> {
    for stream in listener.incoming() {
        let stream = match stream {
            Ok(s) => s,
            Err(_) => continue,
        };
        let (token, metrics) = (token.clone(), metrics.clone());
        std::thread::spawn(move || {
            let _ = session(stream, &token, metrics.as_ref());
        });
    }
    Ok(())
}

/// One coordinator's session: hello, pings, one run.
fn session(
    stream: TcpStream,
    token: &str,
    metrics: Option<&Arc<openmetrics::Registry>>,
) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut r = BufReader::new(stream.try_clone()?);
    let w = Arc::new(Mutex::new(stream.try_clone()?));
    let say = |m: &FromAgent| proto::send(&mut *w.lock().expect("writer"), m);
    match proto::recv::<ToAgent>(&mut r)? {
        Some(ToAgent::Hello { token: t }) if proto::token_eq(&t, token) => say(&FromAgent::Ready)?,
        _ => {
            say(&FromAgent::Denied {
                reason: "bad token".to_string(),
            })?;
            return Ok(());
        }
    }
    let job = loop {
        match proto::recv::<ToAgent>(&mut r)? {
            Some(ToAgent::Ping { t0_ns }) => say(&FromAgent::Pong {
                t0_ns,
                agent_ns: proto::now_ns(),
            })?,
            Some(ToAgent::Run(job)) => break job,
            Some(ToAgent::Hello { .. }) | Some(ToAgent::Stop) => {}
            None => return Ok(()),
        }
    };
    let cfg = match configure(&job) {
        Ok(c) => c,
        Err(e) => {
            return say(&FromAgent::Failed {
                reason: e.to_string(),
            })
        }
    };
    let (start, origin) = local_start(&job);
    let stop = Arc::new(AtomicBool::new(false));
    watch_stop(r, stop.clone());
    let mut cfg = cfg;
    let w2 = w.clone();
    let stop2 = stop.clone();
    let name = if job.load.is_empty() {
        "load"
    } else {
        &job.load
    };
    let feed = metrics.map(|m| m.load(&openmetrics::Scope::default(), name, cfg.rate));
    let feed2 = feed.clone();
    cfg.on_second_hdr = Some(load::SecondHdrSink(Arc::new(move |row, hdr| {
        if let Some(f) = &feed2 {
            f.second(row, hdr);
        }
        let m = FromAgent::Second {
            row: row.clone(),
            hdr: hdr.clone(),
        };
        if proto::send(&mut *w2.lock().expect("writer"), &m).is_err() {
            stop2.store(true, Ordering::Relaxed);
        }
    })));
    while Instant::now() < start && !stop.load(Ordering::Relaxed) {
        std::thread::sleep((start - Instant::now()).min(Duration::from_millis(20)));
    }
    say(&FromAgent::Started {
        at_unix_ns: proto::now_ns(),
    })?;
    let ctl = load::Control {
        stop,
        origin,
        on_second: None,
    };
    let ran = load::run(&cfg, &ctl);
    if let Some(f) = &feed {
        f.end();
    }
    match ran {
        Ok(o) => say(&FromAgent::Result {
            json: result_json(o),
        }),
        Err(e) => say(&FromAgent::Failed {
            reason: e.to_string(),
        }),
    }
}

/// The job's common start as a local Instant, and the load's origin before it, so every
/// agent's seconds line up.
fn local_start(job: &Job) -> (Instant, Instant) {
    let (now_i, now_u) = (Instant::now(), proto::now_ns());
    let start = if job.start_unix_ns >= now_u {
        now_i + Duration::from_nanos(job.start_unix_ns - now_u)
    } else {
        now_i
            .checked_sub(Duration::from_nanos(now_u - job.start_unix_ns))
            .unwrap_or(now_i)
    };
    let origin = start
        .checked_sub(Duration::from_nanos(job.origin_ahead_ns))
        .unwrap_or(start);
    (start, origin)
}

/// Sets `stop` when the coordinator sends Stop or goes away, read on a thread of its own.
fn watch_stop(mut r: BufReader<TcpStream>, stop: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        while let Ok(Some(m)) = proto::recv::<ToAgent>(&mut r) {
            if matches!(m, ToAgent::Stop) {
                stop.store(true, Ordering::Relaxed);
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
}

/// The run's result as the coordinator reads it: the summary and what the merge needs (its
/// origin and each second's histogram).
fn result_json(o: load::Outcome) -> String {
    model::LoadResult {
        summary: o.summary,
        ext: model::ResultExt {
            result_version: model::RESULT_VERSION,
            origin_unix_ns: o.origin_unix_ns,
            seconds_hdr: o.seconds_hdr,
            agent: None,
            agents: Vec::new(),
        },
    }
    .to_json_pretty()
}

/// The engine config of a job: the load's config as the coordinator holds it, then this
/// agent's share.
fn configure(job: &Job) -> Result<load::Config, crate::Error> {
    let mut cfg = job.config.clone();
    cfg.connections = job.connections;
    cfg.threads = job.threads.clamp(1, job.connections.max(1));
    cfg.rate = job.rate;
    cfg.requests = job.requests;
    cfg.seed = job.seed;
    cfg.hdr_log = None;
    cfg.record_requests = false;
    cfg.start_at = Some(Duration::from_nanos(job.origin_ahead_ns + job.phase_ns));
    cfg.validate()
        .map_err(|e| crate::Error::Config(e.to_string()))?;
    Ok(cfg)
}
