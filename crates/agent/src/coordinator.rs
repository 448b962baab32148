//! The coordinator: connects to every agent with the token, measures each one's clock offset,
//! splits the load exactly, gives all of them the same start instant, relays live progress, and
//! merges their results. An agent that goes away mid-run is reported as lost with the seconds it
//! sent; it is never dropped silently.

use crate::merge;
use crate::proto::{self, FromAgent, Job, ToAgent};
use crate::Error;
use hdrhistogram::Histogram;
use model::{AgentInfo, Arrivals, LoadResult, Second, SecondHdr};
use std::collections::BTreeMap;
use std::io::BufReader;
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// Pings per agent; the one with the shortest round trip gives the offset.
const PINGS: usize = 16;
/// How long an agent may take to connect and answer.
const READY_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the coordinator looks at its stop flag while the agents run.
const STOP_POLL: Duration = Duration::from_millis(100);

/// What a distributed run asks for.
pub struct Plan<'a> {
    /// Agent addresses, `host:port`.
    pub hosts: &'a [String],
    /// What to call each agent in messages and in the per-agent table (a pod's name); the
    /// address when empty.
    pub names: &'a [String],
    /// The shared token.
    pub token: &'a str,
    /// The load's engine config: the totals to split, and what every agent runs (sent as
    /// is, so files it names must be where the agents find them).
    pub cfg: &'a load::Config,
    /// The time base on the coordinator's wall clock (ns since the epoch) and how long after
    /// it the load begins at the earliest: the agents' seconds then count from it, as a
    /// scenario's loads count from the case's start. `None`: from the common start instant.
    pub origin: Option<(u64, Duration)>,
    /// Set it to end the run early (Ctrl-C): the agents are told to stop, and what they
    /// measured is still merged.
    pub stop: Option<Arc<AtomicBool>>,
}

/// Live progress, once per second that every agent still running has reported: the merged
/// row of that second, its merged histograms, and each agent's request count in it (None for an
/// agent that is gone).
pub type Progress<'a> = &'a dyn Fn(&Second, &SecondHdr, &[Option<u64>]);

/// What a distributed run returns.
pub struct Distributed {
    /// Each agent's result in host order (a lost agent's rebuilt from its seconds), with its
    /// [`AgentInfo`] and its origin on the coordinator's clock.
    pub parts: Vec<LoadResult>,
    /// Their merge.
    pub merged: LoadResult,
    /// Agents lost mid-run, with why.
    pub lost: Vec<String>,
    /// The run was told to stop early.
    pub stopped: bool,
}

/// Thread `i`'s share of `total` split over `n` (the first ones take the remainder).
pub fn share(total: u64, n: u64, i: u64) -> u64 {
    total / n + u64::from(i < total % n)
}

/// The jobs for `n` agents: connections and `-n` split exactly; open loop at rate/n each, even
/// arrivals phased by i/rate so the aggregate stays evenly spaced, Poisson seeded per agent so
/// the sum stays Poisson.
///
/// Even arrivals with a duration: the local schedule has `even_arrivals(rate, duration)`
/// arrivals, global arrival j at j/rate; agent i takes those with j ≡ i (mod n), which is an
/// exact request count for it. Without that count each agent would run its own full duration
/// from its phase and the shares would add up to n·⌈rate·d/n⌉, more than the local schedule
/// whenever n does not divide it.
pub fn split(cfg: &load::Config, n: usize) -> Result<Vec<Job>, Error> {
    let n64 = n as u64;
    if (cfg.connections as u64) < n64 {
        return Err(Error::Split(format!(
            "-c/--connections ({}) must be at least the number of agents ({n})",
            cfg.connections
        )));
    }
    if let Some(r) = cfg.requests {
        if r < n64 {
            return Err(Error::Split(format!(
                "-n/--requests ({r}) must be at least the number of agents ({n})"
            )));
        }
    }
    // The exact number of requests to split: `-n`, or the even schedule's arrivals within the
    // duration, whichever is smaller.
    let requests = match (cfg.rate, cfg.arrivals, cfg.duration) {
        (Some(rate), Arrivals::Even, Some(d)) => {
            let within = load::even_arrivals(rate, d.as_nanos() as u64);
            if within < n64 {
                return Err(Error::Split(format!(
                    "the load has only {within} requests (-R {rate} for {}) for {n} agents",
                    units::fmt_secs_short(d.as_secs_f64())
                )));
            }
            Some(cfg.requests.map_or(within, |r| r.min(within)))
        }
        _ => cfg.requests,
    };
    Ok((0..n64)
        .map(|i| {
            let connections = share(cfg.connections as u64, n64, i) as u32;
            let phase_ns = match (cfg.rate, cfg.arrivals) {
                (Some(rate), Arrivals::Even) => (i as f64 * 1e9 / rate).round() as u64,
                _ => 0,
            };
            Job {
                config: cfg.clone(),
                load: cfg.name.clone(),
                start_unix_ns: 0,
                origin_ahead_ns: 0,
                phase_ns,
                connections,
                threads: cfg.threads.min(connections).max(1),
                rate: cfg.rate.map(|r| r / n as f64),
                requests: requests.map(|r| share(r, n64, i)),
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
fn connect(host: &str, name: &str, token: &str) -> Result<Link, Error> {
    let addr = host
        .to_socket_addrs()
        .map_err(|e| Error::Agent(format!("agent {name}: {e}")))?
        .next()
        .ok_or_else(|| Error::Agent(format!("agent {name}: no address")))?;
    let stream = TcpStream::connect_timeout(&addr, READY_TIMEOUT)
        .map_err(|e| Error::Agent(format!("agent {name}: cannot connect: {e}")))?;
    let io = |e: std::io::Error| Error::Agent(format!("agent {name}: {e}"));
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
        .map_err(|e| Error::Agent(format!("agent {name} not ready: {e}")))?
    {
        Some(FromAgent::Ready) => {}
        Some(FromAgent::Denied { reason }) => {
            return Err(Error::Agent(format!("agent {name} refused: {reason}")))
        }
        other => {
            return Err(Error::Agent(format!(
                "agent {name} not ready: answered {other:?}"
            )))
        }
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
                return Err(Error::Agent(format!(
                    "agent {name}: unexpected answer to a ping: {other:?}"
                )))
            }
        }
    }
    let (rtt, offset_ns) = best.expect("at least one ping");
    stream.set_read_timeout(None).map_err(io)?;
    Ok(Link {
        host: name.to_string(),
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
pub fn run(plan: &Plan<'_>, progress: Option<Progress<'_>>) -> Result<Distributed, Error> {
    let n = plan.hosts.len();
    if n == 0 {
        return Err(Error::Agent("no agent to run the load on".to_string()));
    }
    let name = |i: usize| plan.names.get(i).unwrap_or(&plan.hosts[i]).clone();
    let mut jobs = split(plan.cfg, n)?;
    let mut links = Vec::with_capacity(n);
    for (i, h) in plan.hosts.iter().enumerate() {
        links.push(connect(h, &name(i), plan.token)?);
    }
    let (origin, start) = send_runs(plan, &mut links, &mut jobs)?;
    let rx = spawn_readers(&mut links)?;
    let (mut heard, stopped) = listen(plan, &mut links, rx, progress)?;
    let (parts, lost) = agent_parts(plan.cfg, &links, &jobs, &mut heard, origin, start)?;
    let merged = merge::merge(&parts)?;
    Ok(Distributed {
        parts,
        merged,
        lost,
        stopped,
    })
}

/// What the agents sent during the run, each field per agent in host order.
struct Heard {
    started: Vec<Option<u64>>,
    seconds: Vec<Vec<(Second, SecondHdr)>>,
    results: Vec<Option<LoadResult>>,
    gone: Vec<Option<String>>,
}

/// The live progress's state: the seconds not yet shown, the scratch histograms of their
/// merge, and the next second to show.
struct Pending {
    /// Per second not yet shown: where each agent's row of it is in `Heard::seconds`.
    per_t: BTreeMap<u32, Vec<Option<usize>>>,
    h: Histogram<u64>,
    u: Histogram<u64>,
    shown: u32,
}

/// Gives every agent its job with the common start instant on its own clock; returns the time
/// base and that instant on the coordinator's clock.
fn send_runs(plan: &Plan<'_>, links: &mut [Link], jobs: &mut [Job]) -> Result<(u64, u64), Error> {
    let n = plan.hosts.len();
    // Everyone starts at the same instant, far enough ahead for every Run to arrive (and not
    // before the time the plan asks for).
    let earliest = proto::now_ns() + 500_000_000 + 50_000_000 * n as u64;
    let (origin, start) = match plan.origin {
        Some((o, after)) => (o, earliest.max(o + after.as_nanos() as u64)),
        None => (earliest, earliest),
    };
    for (link, job) in links.iter_mut().zip(jobs.iter_mut()) {
        job.start_unix_ns = (start as i64 + link.offset_ns) as u64;
        job.origin_ahead_ns = start - origin;
        proto::send(&mut link.stream, &ToAgent::Run(Box::new(job.clone())))
            .map_err(|e| Error::Agent(format!("agent {}: {e}", link.host)))?;
    }
    Ok((origin, start))
}

/// A thread per agent turns its messages into [`Event`]s on one channel, until its result or
/// its loss.
fn spawn_readers(links: &mut [Link]) -> Result<mpsc::Receiver<Event>, Error> {
    let (tx, rx) = mpsc::channel();
    for (i, link) in links.iter_mut().enumerate() {
        let mut reader = BufReader::new(
            link.reader
                .get_ref()
                .try_clone()
                .map_err(|e| Error::Agent(format!("agent {}: {e}", link.host)))?,
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
    Ok(rx)
}

/// Collects the agents' events until every reader has ended, telling the agents to stop when
/// the plan's stop flag is set and showing each second once complete; returns what was heard
/// and whether the run was stopped.
fn listen(
    plan: &Plan<'_>,
    links: &mut [Link],
    rx: mpsc::Receiver<Event>,
    progress: Option<Progress<'_>>,
) -> Result<(Heard, bool), Error> {
    let n = plan.hosts.len();
    let open = plan.cfg.rate.is_some();
    let mut heard = Heard {
        started: vec![None; n],
        seconds: vec![Vec::new(); n],
        results: vec![None; n],
        gone: vec![None; n],
    };
    let mut pending = Pending {
        per_t: BTreeMap::new(),
        h: merge::new_hist(),
        u: merge::new_hist(),
        shown: 0,
    };
    let mut stopped = false;
    loop {
        if !stopped
            && plan
                .stop
                .as_ref()
                .is_some_and(|s| s.load(Ordering::Relaxed))
        {
            stopped = true;
            for link in links.iter_mut() {
                // An agent already gone cannot be told; it is reported as it ended.
                let _ = proto::send(&mut link.stream, &ToAgent::Stop);
            }
        }
        let ev = match rx.recv_timeout(STOP_POLL) {
            Ok(ev) => ev,
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        match ev {
            Event::Started(i, at) => heard.started[i] = Some(at),
            Event::Second(i, b) => {
                if progress.is_some() {
                    pending.per_t.entry(b.0.t).or_insert_with(|| vec![None; n])[i] =
                        Some(heard.seconds[i].len());
                }
                heard.seconds[i].push(*b);
            }
            Event::Result(i, r) => heard.results[i] = Some(*r),
            Event::Gone(i, why) => heard.gone[i] = Some(why),
        }
        // A second is shown once every agent still running has reported it.
        if let Some(p) = progress {
            pending.show(p, &heard, open)?;
        }
    }
    Ok((heard, stopped))
}

impl Pending {
    /// Shows, in order, each pending second that every agent still running has reported (a
    /// second older than one shown is dropped).
    fn show(&mut self, p: Progress<'_>, heard: &Heard, open: bool) -> Result<(), Error> {
        let n = heard.results.len();
        while let Some((&t, at)) = self.per_t.iter().next() {
            let complete = (0..n)
                .all(|i| at[i].is_some() || heard.results[i].is_some() || heard.gone[i].is_some());
            if !complete {
                break;
            }
            if t >= self.shown {
                let parts: Vec<(&Second, Option<&SecondHdr>)> = at
                    .iter()
                    .enumerate()
                    .filter_map(|(i, k)| {
                        k.map(|k| (&heard.seconds[i][k].0, Some(&heard.seconds[i][k].1)))
                    })
                    .collect();
                let (row, hdr) = merge::merge_second(t, &parts, open, &mut self.h, &mut self.u)?;
                let counts: Vec<Option<u64>> = at
                    .iter()
                    .enumerate()
                    .map(|(i, k)| k.map(|k| heard.seconds[i][k].0.requests))
                    .collect();
                p(&row, &hdr, &counts);
                self.shown = t + 1;
            }
            self.per_t.remove(&t);
        }
        Ok(())
    }
}

/// Each agent's result in host order (a lost agent's rebuilt from its seconds) with its
/// [`AgentInfo`] and its origin on the coordinator's clock; and a line per agent lost.
fn agent_parts(
    cfg: &load::Config,
    links: &[Link],
    jobs: &[Job],
    heard: &mut Heard,
    origin: u64,
    start: u64,
) -> Result<(Vec<LoadResult>, Vec<String>), Error> {
    let n = links.len();
    let mut parts = Vec::with_capacity(n);
    let mut lost = Vec::new();
    for i in 0..n {
        let link = &links[i];
        let skew_ns = heard.started[i]
            .map(|at| at as i64 - link.offset_ns - start as i64)
            .unwrap_or(0);
        let was_lost = heard.results[i].is_none();
        let mut r = match heard.results[i].take() {
            Some(r) => r,
            None => {
                let why = heard.gone[i]
                    .clone()
                    .unwrap_or_else(|| "no result".to_string());
                lost.push(format!("agent {} lost: {why}", link.host));
                let template = model_template(cfg, &jobs[i]);
                let origin_agent = (origin as i64 + link.offset_ns) as u64;
                merge::partial(&template, &heard.seconds[i], origin_agent)?
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
    Ok((parts, lost))
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
        retried: 0,
        latency: model::Latency::default(),
        latency_uncorrected: None,
        req_per_sec: model::RateStats::default(),
        schedule: None,
        timeline: Vec::new(),
        http2: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use load::{Arrivals, Pacer};
    use std::time::Duration;

    /// The intended send times (ns from the common start) of a job's schedule, as the engine
    /// follows it: from its phase, at its rate, up to its limit, before its own end.
    fn times(job: &Job, duration_ns: u64) -> Vec<u64> {
        let rate = job.rate.expect("open loop");
        let end = job.phase_ns + duration_ns;
        let mut p = Pacer::new(
            job.phase_ns,
            rate,
            Arrivals::Even,
            job.seed,
            0,
            1,
            job.requests,
        );
        let mut v = Vec::new();
        while let Some(t) = p.next() {
            if t >= end {
                break;
            }
            v.push(t);
            p.advance();
        }
        v
    }

    fn open(rate: f64, duration: Duration, requests: Option<u64>) -> load::Config {
        let mut cfg = load::Config::new("http://127.0.0.1:1/").unwrap();
        cfg.connections = 64;
        cfg.rate = Some(rate);
        cfg.duration = Some(duration);
        cfg.requests = requests;
        cfg
    }

    #[test]
    fn even_open_loop_shares_add_up_to_the_local_schedule() {
        // Rates not divisible by the agents, durations not whole seconds, and the bench's case.
        let durations = [
            Duration::from_secs(1),
            Duration::from_millis(1500),
            Duration::from_millis(2345),
            Duration::from_secs(30),
        ];
        for rate in [100.0, 700.0, 1000.0, 1333.3, 3000.0, 4000.0, 7.0] {
            for d in durations {
                let dur = d.as_nanos() as u64;
                let mut local = Pacer::new(0, rate, Arrivals::Even, 1, 0, 1, None);
                let want = local.drain_before(dur);
                for n in 1..=7usize {
                    let cfg = open(rate, d, None);
                    let jobs = match split(&cfg, n) {
                        Ok(j) => j,
                        Err(e) => {
                            assert!(want < n as u64, "{rate}/s {d:?} {n}: {e}");
                            continue;
                        }
                    };
                    let mut all: Vec<u64> = jobs.iter().flat_map(|j| times(j, dur)).collect();
                    assert_eq!(all.len() as u64, want, "{rate}/s for {d:?} over {n} agents");
                    // Together they are the local schedule, each arrival within a nanosecond.
                    all.sort_unstable();
                    let mut local = Pacer::new(0, rate, Arrivals::Even, 1, 0, 1, None);
                    for (k, t) in all.iter().enumerate() {
                        let l = local.next().unwrap();
                        local.advance();
                        assert!(
                            t.abs_diff(l) <= 1,
                            "{rate}/s {d:?} {n}: arrival {k} at {t}, not {l}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_request_count_in_open_loop_is_split_exactly() {
        let cfg = open(1000.0, Duration::from_secs(10), Some(1001));
        let jobs = split(&cfg, 3).unwrap();
        let counts: Vec<usize> = jobs
            .iter()
            .map(|j| times(j, 10_000_000_000).len())
            .collect();
        assert_eq!(counts, vec![334, 334, 333]);
        // A duration shorter than the count: the duration's arrivals are split.
        let cfg = open(1000.0, Duration::from_millis(500), Some(1001));
        let jobs = split(&cfg, 3).unwrap();
        let total: usize = jobs.iter().map(|j| times(j, 500_000_000).len()).sum();
        assert_eq!(total, 500);
    }

    #[test]
    fn too_few_requests_for_the_agents_is_refused() {
        let e = split(&open(2.0, Duration::from_secs(1), None), 3)
            .err()
            .unwrap();
        assert_eq!(
            e.to_string(),
            "the load has only 2 requests (-R 2 for 1s) for 3 agents"
        );
    }
}
