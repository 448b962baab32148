//! The coordinator: connects to every agent with the token, measures each one's clock offset,
//! splits the load exactly, gives all of them the same start instant, relays live progress, and
//! merges their results. An agent that goes away mid-run is reported as lost with the seconds it
//! sent; it is never dropped silently.

use crate::merge;
use crate::proto::{self, FromAgent, Job, ToAgent};
use model::{AgentInfo, Arrivals, LoadResult, Second, SecondHdr};
use std::collections::BTreeMap;
use std::io::BufReader;
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::mpsc;
use std::time::Duration;

/// Pings per agent; the one with the shortest round trip gives the offset.
const PINGS: usize = 16;
/// How long an agent may take to connect and answer.
const READY_TIMEOUT: Duration = Duration::from_secs(5);

/// What a distributed run asks for.
pub struct Plan<'a> {
    /// Agent addresses, `host:port`.
    pub hosts: &'a [String],
    /// The shared token.
    pub token: &'a str,
    /// The user's `load` arguments, forwarded to every agent.
    pub argv: &'a [String],
    /// The totals to split (from the same arguments, parsed by the coordinator).
    pub cfg: &'a load::Config,
}

/// Per second: the aggregate requests, and each agent's (None once an agent is gone).
pub type Progress<'a> = &'a dyn Fn(u32, u64, &[Option<u64>]);

/// What a distributed run returns.
pub struct Distributed {
    /// Each agent's result in host order (a lost agent's rebuilt from its seconds), with its
    /// [`AgentInfo`] and its origin on the coordinator's clock.
    pub parts: Vec<LoadResult>,
    /// Their merge.
    pub merged: LoadResult,
    /// Agents lost mid-run, with why.
    pub lost: Vec<String>,
}

/// Thread `i`'s share of `total` split over `n` (the first ones take the remainder).
pub fn share(total: u64, n: u64, i: u64) -> u64 {
    total / n + u64::from(i < total % n)
}

/// The jobs for `n` agents: connections and `-n` split exactly; open loop at rate/n each, even
/// arrivals phased by i/rate so the aggregate stays evenly spaced, Poisson seeded per agent so
/// the sum stays Poisson.
pub fn split(cfg: &load::Config, argv: &[String], n: usize) -> Result<Vec<Job>, String> {
    let n64 = n as u64;
    if (cfg.connections as u64) < n64 {
        return Err(format!(
            "-c/--connections ({}) must be at least the number of agents ({n})",
            cfg.connections
        ));
    }
    if let Some(r) = cfg.requests {
        if r < n64 {
            return Err(format!(
                "-n/--requests ({r}) must be at least the number of agents ({n})"
            ));
        }
    }
    Ok((0..n64)
        .map(|i| {
            let connections = share(cfg.connections as u64, n64, i) as u32;
            let phase_ns = match (cfg.rate, cfg.arrivals) {
                (Some(rate), Arrivals::Even) => (i as f64 * 1e9 / rate).round() as u64,
                _ => 0,
            };
            Job {
                argv: argv.to_vec(),
                start_unix_ns: 0,
                phase_ns,
                connections,
                threads: cfg.threads.min(connections).max(1),
                rate: cfg.rate.map(|r| r / n as f64),
                requests: cfg.requests.map(|r| share(r, n64, i)),
                seed: match cfg.arrivals {
                    Arrivals::Poisson => cfg.seed.wrapping_add(i),
                    Arrivals::Even => cfg.seed,
                },
            }
        })
        .collect())
}

struct Link {
    host: String,
    stream: TcpStream,
    reader: BufReader<TcpStream>,
    offset_ns: i64,
    uncertainty_ns: u64,
}

/// Connects, checks the token and measures the clock of one agent.
fn connect(host: &str, token: &str) -> Result<Link, String> {
    let addr = host
        .to_socket_addrs()
        .map_err(|e| format!("agent {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("agent {host}: no address"))?;
    let stream = TcpStream::connect_timeout(&addr, READY_TIMEOUT)
        .map_err(|e| format!("agent {host}: cannot connect: {e}"))?;
    let io = |e: std::io::Error| format!("agent {host}: {e}");
    stream.set_nodelay(true).map_err(io)?;
    stream.set_read_timeout(Some(READY_TIMEOUT)).map_err(io)?;
    let mut w = stream.try_clone().map_err(io)?;
    let mut reader = BufReader::new(stream.try_clone().map_err(io)?);
    proto::send(
        &mut w,
        &ToAgent::Hello {
            token: token.to_string(),
        },
    )
    .map_err(io)?;
    match proto::recv::<FromAgent>(&mut reader)
        .map_err(|e| format!("agent {host} not ready: {e}"))?
    {
        Some(FromAgent::Ready) => {}
        Some(FromAgent::Denied { reason }) => {
            return Err(format!("agent {host} refused: {reason}"))
        }
        other => return Err(format!("agent {host} not ready: answered {other:?}")),
    }
    let mut best: Option<(u64, i64)> = None;
    for _ in 0..PINGS {
        let t0 = proto::now_ns();
        proto::send(&mut w, &ToAgent::Ping { t0_ns: t0 }).map_err(io)?;
        match proto::recv::<FromAgent>(&mut reader).map_err(io)? {
            Some(FromAgent::Pong { t0_ns, agent_ns }) if t0_ns == t0 => {
                let t3 = proto::now_ns();
                let rtt = t3.saturating_sub(t0);
                let offset = agent_ns as i64 - ((t0 as i128 + t3 as i128) / 2) as i64;
                if best.is_none_or(|(r, _)| rtt < r) {
                    best = Some((rtt, offset));
                }
            }
            other => {
                return Err(format!(
                    "agent {host}: unexpected answer to a ping: {other:?}"
                ))
            }
        }
    }
    let (rtt, offset_ns) = best.expect("at least one ping");
    stream.set_read_timeout(None).map_err(io)?;
    Ok(Link {
        host: host.to_string(),
        stream,
        reader,
        offset_ns,
        uncertainty_ns: rtt / 2,
    })
}

enum Event {
    Started(usize, u64),
    Second(usize, Box<(Second, SecondHdr)>),
    Result(usize, Box<LoadResult>),
    Gone(usize, String),
}

/// Runs the plan to its end: every agent's result, the merge, and who was lost.
pub fn run(plan: &Plan<'_>, progress: Option<Progress<'_>>) -> Result<Distributed, String> {
    let n = plan.hosts.len();
    if n == 0 {
        return Err("--agent-hosts names no agent".to_string());
    }
    let mut jobs = split(plan.cfg, plan.argv, n)?;
    let mut links = Vec::with_capacity(n);
    for h in plan.hosts {
        links.push(connect(h, plan.token)?);
    }
    // Everyone starts at the same instant, far enough ahead for every Run to arrive.
    let start = proto::now_ns() + 500_000_000 + 50_000_000 * n as u64;
    for (link, job) in links.iter_mut().zip(jobs.iter_mut()) {
        job.start_unix_ns = (start as i64 + link.offset_ns) as u64;
        proto::send(&mut link.stream, &ToAgent::Run(job.clone()))
            .map_err(|e| format!("agent {}: {e}", link.host))?;
    }
    let (tx, rx) = mpsc::channel();
    for (i, link) in links.iter_mut().enumerate() {
        let mut reader = BufReader::new(
            link.reader
                .get_ref()
                .try_clone()
                .map_err(|e| format!("agent {}: {e}", link.host))?,
        );
        let tx = tx.clone();
        std::thread::spawn(move || loop {
            let ev = match proto::recv::<FromAgent>(&mut reader) {
                Ok(Some(FromAgent::Started { at_unix_ns })) => Event::Started(i, at_unix_ns),
                Ok(Some(FromAgent::Second { row, hdr })) => Event::Second(i, Box::new((row, hdr))),
                Ok(Some(FromAgent::Result { json })) => match LoadResult::from_json(&json) {
                    Ok(r) => Event::Result(i, Box::new(r)),
                    Err(e) => Event::Gone(i, format!("its result does not parse: {e}")),
                },
                Ok(Some(FromAgent::Failed { reason })) => Event::Gone(i, reason),
                Ok(Some(other)) => Event::Gone(i, format!("unexpected message {other:?}")),
                Ok(None) => Event::Gone(i, "connection closed mid-run".to_string()),
                Err(e) => Event::Gone(i, format!("connection lost: {e}")),
            };
            let end = matches!(ev, Event::Result(..) | Event::Gone(..));
            if tx.send(ev).is_err() || end {
                return;
            }
        });
    }
    drop(tx);

    let mut started: Vec<Option<u64>> = vec![None; n];
    let mut seconds: Vec<Vec<(Second, SecondHdr)>> = vec![Vec::new(); n];
    let mut results: Vec<Option<LoadResult>> = vec![None; n];
    let mut gone: Vec<Option<String>> = vec![None; n];
    let mut per_t: BTreeMap<u32, Vec<Option<u64>>> = BTreeMap::new();
    let mut shown = 0u32;
    for ev in rx {
        match ev {
            Event::Started(i, at) => started[i] = Some(at),
            Event::Second(i, b) => {
                if progress.is_some() {
                    per_t.entry(b.0.t).or_insert_with(|| vec![None; n])[i] = Some(b.0.requests);
                }
                seconds[i].push(*b);
            }
            Event::Result(i, r) => results[i] = Some(*r),
            Event::Gone(i, why) => gone[i] = Some(why),
        }
        // A second is shown once every agent still running has reported it.
        if let Some(p) = progress {
            while let Some((&t, counts)) = per_t.iter().next() {
                let complete = (0..n)
                    .all(|i| counts[i].is_some() || results[i].is_some() || gone[i].is_some());
                if !complete {
                    break;
                }
                if t >= shown {
                    p(t, counts.iter().flatten().sum(), counts);
                    shown = t + 1;
                }
                per_t.remove(&t);
            }
        }
    }

    let mut parts = Vec::with_capacity(n);
    let mut lost = Vec::new();
    for i in 0..n {
        let link = &links[i];
        let skew_ns = started[i]
            .map(|at| at as i64 - link.offset_ns - start as i64)
            .unwrap_or(0);
        let was_lost = results[i].is_none();
        let mut r = match results[i].take() {
            Some(r) => r,
            None => {
                let why = gone[i].clone().unwrap_or_else(|| "no result".to_string());
                lost.push(format!("agent {} lost: {why}", link.host));
                let template = model_template(plan.cfg, &jobs[i]);
                let origin_agent = (start as i64 + link.offset_ns) as u64;
                merge::partial(&template, &seconds[i], origin_agent)?
            }
        };
        // Put its origin on the coordinator's clock, so the merge aligns on one clock.
        r.ext.origin_unix_ns = (r.ext.origin_unix_ns as i64 - link.offset_ns) as u64;
        r.ext.agent = Some(AgentInfo {
            host: link.host.clone(),
            clock_offset_us: link.offset_ns / 1000,
            clock_uncertainty_us: link.uncertainty_ns / 1000,
            start_skew_us: skew_ns / 1000,
            lost: was_lost,
        });
        parts.push(r);
    }
    let merged = merge::merge(&parts)?;
    Ok(Distributed {
        parts,
        merged,
        lost,
    })
}

/// The summary fields a lost agent's rebuilt result takes from the plan.
fn model_template(cfg: &load::Config, job: &Job) -> model::LoadSummary {
    model::LoadSummary {
        schema: model::SCHEMA_VERSION,
        name: cfg.name.clone(),
        url: cfg.url.clone(),
        method: cfg.method.clone(),
        mode: match job.rate {
            Some(rate) => model::LoadMode::Open {
                rate,
                arrivals: cfg.arrivals,
                seed: job.seed,
            },
            None => model::LoadMode::Closed,
        },
        threads: job.threads,
        connections: job.connections,
        start_s: 0.0,
        planned_s: cfg.duration.map(|d| d.as_secs_f64()),
        elapsed_s: 0.0,
        timeout_ms: cfg.timeout.as_millis() as u64,
        requests: 0,
        bytes_read: 0,
        bytes_written: 0,
        status: BTreeMap::new(),
        errors: BTreeMap::new(),
        error_messages: BTreeMap::new(),
        connects: 0,
        latency: model::Latency::default(),
        latency_uncorrected: None,
        req_per_sec: model::RateStats::default(),
        schedule: None,
        timeline: Vec::new(),
        http2: None,
    }
}
