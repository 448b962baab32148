//! One replica asked until its answers are stable: the prepared request (HTTP or gRPC), the
//! asker, what it saw, and the rule for a stable run of answers.

use super::*;

/// A prepared request (or gRPC call) to one replica.
pub(super) enum Prepared {
    /// An HTTP request; its answer is the status.
    Http(load::probe::Probe),
    /// A gRPC unary call; its answer is the gRPC code.
    Grpc(load::probe::GrpcProbe),
}

impl Prepared {
    /// One request on a new connection: the answer (an HTTP status, or a gRPC code) and what
    /// the record says of one that is not expected.
    fn ask(&self) -> Result<(u16, String), load::probe::ProbeError> {
        match self {
            Prepared::Http(p) => p
                .fetch()
                .map(|r| (r.status, format!("status {}", r.status))),
            Prepared::Grpc(p) => p.call().map(|a| {
                let how = match a.grpc_status {
                    Some(_) => String::new(),
                    None => format!(", from HTTP {}", a.http_status),
                };
                (
                    a.code,
                    format!(
                        "grpc-status {} ({}{how})",
                        a.code,
                        model::stream::grpc_code_name(a.code)
                    ),
                )
            }),
        }
    }
}

/// A prepared request to one replica.
pub(super) struct Asker {
    probe: Prepared,
    status: u16,
    consecutive: u32,
    every: Duration,
}

/// What one replica's probe saw.
#[derive(Default)]
pub(super) struct Asked {
    pub(super) first: Option<Instant>,
    pub(super) ready: Option<Instant>,
    pub(super) stable: Option<Instant>,
    pub(super) requests: u64,
    /// Some request got an answer (any status): the pod's port was reached.
    pub(super) answered: bool,
    /// From the first request's start to the last one's.
    pub(super) span: Duration,
    pub(super) busy: Duration,
    pub(super) last: String,
}

impl Asked {
    pub(super) fn failed(why: String) -> Asked {
        Asked {
            last: why,
            ..Asked::default()
        }
    }

    pub(super) fn interval_us(&self) -> f64 {
        if self.requests < 2 {
            return 0.0;
        }
        self.span.as_secs_f64() * 1e6 / (self.requests - 1) as f64
    }

    pub(super) fn request_us(&self) -> f64 {
        if self.requests == 0 {
            return 0.0;
        }
        self.busy.as_secs_f64() * 1e6 / self.requests as f64
    }
}

impl Asker {
    /// The request of `plan` to `addr` (the url's host is sent as Host and SNI; TLS is not
    /// verified). Only the pod's address (or its port-forward's local end) is ever connected.
    pub(super) fn new(plan: &ProbePlan, addr: SocketAddr) -> Result<Asker, LoadProblem> {
        let host = plan.host.clone().unwrap_or_else(|| addr.ip().to_string());
        let grpc = plan.scheme.starts_with("grpc");
        // A gRPC call goes over h2c (grpc) or h2 over TLS (grpcs).
        let scheme = match plan.scheme.as_str() {
            "grpc" => "http",
            "grpcs" => "https",
            s => s,
        };
        let url = format!("{scheme}://{host}:{}{}", addr.port(), plan.path);
        let mut cfg = load::Config::new(&url)?;
        if host.parse::<std::net::IpAddr>().is_err() {
            let r = load::Resolve::parse(&format!("{host}:{}:{}", addr.port(), addr.ip()))?;
            cfg.resolve.push(r);
        }
        crate::reach::own_target(&cfg, addr)?;
        cfg.insecure = true;
        cfg.timeout = Duration::from_secs(1).min(plan.timeout);
        let probe = if grpc {
            Prepared::Grpc(load::probe::GrpcProbe::new(&cfg)?)
        } else {
            Prepared::Http(load::probe::Probe::new(&cfg)?)
        };
        Ok(Asker {
            probe,
            status: plan.status,
            consecutive: plan.consecutive,
            every: plan.every,
        })
    }

    /// Asks every `every` on a fixed schedule from `t0` until `consecutive` answers in a row
    /// (in schedule order) have the status, the deadline passes, the pod is gone or every probe
    /// is stopped. [`WORKERS`] threads take the schedule's ticks in turn, so a request that
    /// takes longer than `every` (a new connection, a loaded machine) does not push the next
    /// ones back: requests overlap, and the resolution stays `every`.
    pub(super) fn until_stable(
        &self,
        t0: Instant,
        deadline: Instant,
        gone: &AtomicBool,
        all: &AtomicBool,
    ) -> Asked {
        let next = AtomicU64::new(0);
        let done = AtomicBool::new(false);
        let answers: Mutex<Vec<Answer>> = Mutex::new(Vec::new());
        let stop = || {
            Instant::now() >= deadline
                || gone.load(Ordering::SeqCst)
                || all.load(Ordering::SeqCst)
                || done.load(Ordering::SeqCst)
        };
        let mut verdict = None;
        let mut ordered: Vec<Answer> = Vec::new();
        let mut pending: std::collections::BTreeMap<u64, Answer> =
            std::collections::BTreeMap::new();
        std::thread::scope(|s| {
            for _ in 0..WORKERS {
                s.spawn(|| {
                    while !stop() {
                        let k = next.fetch_add(1, Ordering::SeqCst);
                        let due = t0
                            + self
                                .every
                                .saturating_mul(u32::try_from(k).unwrap_or(u32::MAX));
                        while Instant::now() < due && !stop() {
                            std::thread::sleep(
                                (due - Instant::now()).min(Duration::from_millis(5)),
                            );
                        }
                        if stop() {
                            break;
                        }
                        let at = Instant::now();
                        let got = self.probe.ask();
                        let end = Instant::now();
                        let answered = got.is_ok();
                        let (ok, last) = match got {
                            Ok((answer, _)) if answer == self.status => (true, String::new()),
                            Ok((_, why)) => (false, why),
                            Err((kind, msg)) => (false, format!("{}: {msg}", kind.name())),
                        };
                        answers
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push(Answer {
                                k,
                                at,
                                end,
                                ok,
                                answered,
                                last,
                            });
                    }
                });
            }
            // The answers in schedule order, as far as every earlier tick has answered, taken
            // in as they come (never copied again), the run of expected ones counted on.
            let mut run = 0u32;
            while !stop() {
                std::thread::sleep(Duration::from_micros(500));
                let new = std::mem::take(&mut *answers.lock().unwrap_or_else(|p| p.into_inner()));
                pending.extend(new.into_iter().map(|a| (a.k, a)));
                while let Some(a) = pending.remove(&(ordered.len() as u64)) {
                    run = if a.ok { run + 1 } else { 0 };
                    ordered.push(a);
                    if run >= self.consecutive && verdict.is_none() {
                        let n = ordered.len();
                        verdict =
                            stable_in(&ordered[n - self.consecutive as usize..], self.consecutive);
                        done.store(true, Ordering::SeqCst);
                    }
                }
            }
        });
        let rest = answers.into_inner().unwrap_or_else(|p| p.into_inner());
        pending.extend(rest.into_iter().map(|a| (a.k, a)));
        let mut a = ordered;
        a.extend(pending.into_values());
        let mut out = Asked {
            last: a
                .iter()
                .rev()
                .find(|x| !x.ok)
                .map_or_else(|| "no answer".to_string(), |x| x.last.clone()),
            requests: a.len() as u64,
            answered: a.iter().any(|x| x.answered),
            ..Asked::default()
        };
        if let (Some(f), Some(l)) = (a.iter().map(|x| x.at).min(), a.iter().map(|x| x.at).max()) {
            out.span = l - f;
        }
        out.busy = a.iter().map(|x| x.end - x.at).sum();
        out.first = a.iter().filter(|x| x.ok).map(|x| x.at).min();
        if let Some((ready, stable)) = verdict {
            out.ready = Some(ready);
            out.stable = Some(stable);
        }
        out
    }
}

/// How many threads take one replica's schedule in turn.
pub(super) const WORKERS: usize = 4;

/// One answer of a replica's probe: its tick, when it was sent and answered, and whether it
/// was the expected one (else what came).
#[derive(Clone)]
pub(super) struct Answer {
    k: u64,
    at: Instant,
    end: Instant,
    ok: bool,
    /// An answer came (any status), not a failure to connect, send or read.
    answered: bool,
    last: String,
}

/// In `a` (consecutive ticks from 0), the first run of `n` expected answers: its first
/// request's start and its last answer's arrival.
pub(super) fn stable_in(a: &[Answer], n: u32) -> Option<(Instant, Instant)> {
    let mut run = 0u32;
    for (i, x) in a.iter().enumerate() {
        if !x.ok {
            run = 0;
            continue;
        }
        run += 1;
        if run >= n {
            let from = i + 1 - n as usize;
            let s = &a[from..=i];
            let start = s.iter().map(|x| x.at).min()?;
            let end = s.iter().map(|x| x.end).max()?;
            return Some((start, end));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stability is the first run of `n` expected answers in schedule order: it starts at the
    /// run's earliest request and ends at its latest answer, however the requests overlapped.
    #[test]
    fn a_replica_is_stable_at_its_first_run_of_expected_answers() {
        let t0 = Instant::now();
        let ms = |m: u64| t0 + Duration::from_millis(m);
        let a = |k: u64, ok: bool, at: u64, end: u64| Answer {
            k,
            at: ms(at),
            end: ms(end),
            ok,
            answered: true,
            last: String::new(),
        };
        let seq = [
            a(0, false, 0, 2),
            a(1, true, 1, 5),
            a(2, false, 2, 3),
            a(3, true, 3, 6),
            a(4, true, 4, 9),
            a(5, true, 5, 7),
            a(6, true, 6, 8),
        ];
        assert_eq!(stable_in(&seq, 3), Some((ms(3), ms(9))));
        assert_eq!(stable_in(&seq, 1), Some((ms(1), ms(5))));
        assert_eq!(stable_in(&seq, 5), None);
        assert_eq!(stable_in(&seq[..4], 2), None);
    }
}
