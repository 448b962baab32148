//! The per-second collector: /proc samples of every replica's processes, status pages and
//! readiness probes, and the replicas whose pages never answered as a shortfall.

use crate::procfs::{Group, Sampler};
use model::{ProcSample, ReadinessSample, StubSample};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// What the collector thread gathered: CPU and memory, status pages, readiness probes, and each
/// replica's status-page reads that failed.
pub(super) type Samples = (
    Vec<ProcSample>,
    Vec<StubSample>,
    Vec<ReadinessSample>,
    BTreeMap<String, PageMisses>,
    Vec<model::generation::GenerationSample>,
);

/// One replica's status-page reads: how many were tried, how many failed, and the last error.
#[derive(Debug, Default)]
pub(super) struct PageMisses {
    pub(super) tried: u64,
    pub(super) failed: u64,
    pub(super) last: String,
}

/// The replicas whose status pages failed a read while they served, as the case's shortfall of
/// status pages: a replica that never answered has no count, one that missed some reads has a
/// count short of its last ones. A read that failed because its replica was being stopped is
/// not a miss (it is no longer in the stage's list when checked again).
pub(super) fn page_shortfall(pages: &BTreeMap<String, PageMisses>) -> Option<model::Shortfall> {
    let missing: Vec<model::MissingItem> = pages
        .iter()
        .filter(|(_, m)| m.failed > 0)
        .map(|(name, m)| model::MissingItem {
            item: name.clone(),
            why: if m.failed == m.tried {
                format!(
                    "its status page never answered ({} reads; {})",
                    m.tried, m.last
                )
            } else {
                format!(
                    "{} of {} status-page reads failed ({})",
                    m.failed, m.tried, m.last
                )
            },
        })
        .collect();
    (!missing.is_empty()).then(|| model::Shortfall::new("replicas", pages.len(), missing))
}

/// A Kubernetes readiness probe's default timeout.
const READINESS_TIMEOUT: Duration = Duration::from_secs(1);

/// Samples CPU and memory of every group, and stub_status and readiness of every replica, once a
/// second.
pub(super) fn spawn_collector(
    handles: Arc<Mutex<Vec<proxy::ReplicaHandle>>>,
    origin: Instant,
    running: Arc<AtomicBool>,
) -> thread::JoinHandle<Samples> {
    thread::Builder::new()
        .name("pb-collector".into())
        .spawn(move || {
            let mut sampler = Sampler::new();
            let mut procs = Vec::new();
            let mut stubs = Vec::new();
            let mut ready = Vec::new();
            let mut pages: BTreeMap<String, PageMisses> = BTreeMap::new();
            let mut generations = Vec::new();
            let clock = crate::procfs::StartClock::new(origin);
            let mut next = origin;
            while running.load(Ordering::SeqCst) {
                let hs = handles.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let t = origin.elapsed().as_secs_f64();
                let pids: Vec<(String, Vec<u32>)> =
                    hs.iter().map(|h| (h.name.clone(), h.pids())).collect();
                // Which generation each process of each replica is: its start time.
                for (name, p) in pids.iter().filter(|(_, p)| !p.is_empty()) {
                    generations.push(model::generation::GenerationSample {
                        t_s: t,
                        replica: name.clone(),
                        procs: crate::procfs::generation_procs(p, &clock),
                    });
                }
                let mut groups: Vec<Group> = pids
                    .into_iter()
                    .filter(|(_, p)| !p.is_empty())
                    .map(|(name, p)| Group::Master {
                        name,
                        master: p[0],
                        workers: p[1..].to_vec(),
                    })
                    .collect();
                groups.push(Group::Threads {
                    name: "load".into(),
                    prefix: "pb-load".into(),
                });
                groups.push(Group::Threads {
                    name: "backends".into(),
                    prefix: "pb-backend".into(),
                });
                groups.push(Group::SelfProcess {
                    name: "proxybench".into(),
                });
                procs.extend(sampler.sample(&groups, t));
                for h in &hs {
                    match h.status(origin) {
                        Some(Ok(s)) => {
                            pages.entry(h.name.clone()).or_default().tried += 1;
                            stubs.push(s);
                        }
                        Some(Err(e)) => {
                            // A replica stopped meanwhile is gone from the list: its failed
                            // read is its stop, not a gap in what it served.
                            let listed = handles
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .iter()
                                .any(|x| x.name == h.name && x.pid == h.pid);
                            if listed {
                                let m = pages.entry(h.name.clone()).or_default();
                                m.tried += 1;
                                m.failed += 1;
                                m.last = e.to_string();
                            }
                        }
                        None => {}
                    }
                    if !h.has_admin() {
                        // Nothing to probe (an external target): absent, not failed.
                        continue;
                    }
                    let t_s = origin.elapsed().as_secs_f64();
                    let probe = h.probe(READINESS_TIMEOUT);
                    ready.push(ReadinessSample {
                        t_s,
                        replica: h.name.clone(),
                        ok: probe.is_ok(),
                        ms: probe.ok().map(|d| d.as_secs_f64() * 1e3),
                    });
                }
                next += Duration::from_secs(1);
                while Instant::now() < next && running.load(Ordering::SeqCst) {
                    thread::sleep((next - Instant::now()).min(Duration::from_millis(50)));
                }
            }
            (procs, stubs, ready, pages, generations)
        })
        .expect("spawn the collector thread")
}
