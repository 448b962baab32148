//! Collectors that run in the background during a case, each stoppable, each stamping what it
//! saw with seconds since the case's `Instant` origin (`t_s`): pod phase/readiness/deletion
//! changes and container restarts ([`Cluster::watch_pods`]), Warning events
//! ([`Cluster::watch_warnings`]), CPU and memory from the metrics API
//! ([`Cluster::sample_metrics`]) and a Prometheus scrape through the API server's pod proxy
//! ([`Cluster::scrape_prometheus`]). A collector that got no data says why (`absent`); it never
//! makes up zeros.

use crate::cluster::Cluster;
use crate::error::{split, Error};
use crate::pods::PodInfo;
use crate::prom::{parse_prometheus, Sample};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DynamicObject, ListParams};
use kube::runtime::watcher::{self, watcher};
use kube::runtime::WatchStreamExt;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch as signal;

/// What a collector gathered, and why it has nothing when it has nothing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Collected<T> {
    /// The data.
    pub data: T,
    /// Why there is no data (the API is not served, the watch was refused...), when there is none.
    pub absent: Option<String>,
    /// Errors met along the way (a watch restarted, one scrape failed), each once, in order.
    pub errors: Vec<String>,
}

impl<T> Collected<T> {
    fn error(&mut self, e: String) {
        if !self.errors.contains(&e) {
            self.errors.push(e);
        }
    }
}

/// A background collector on the cluster's runtime; [`Collector::stop`] ends it and hands back
/// what it gathered. Dropping it stops it too (and loses the data).
pub struct Collector<T> {
    what: String,
    state: Arc<Mutex<Collected<T>>>,
    stop: signal::Sender<bool>,
    task: Option<tokio::task::JoinHandle<()>>,
    cluster: Cluster,
}

impl<T: Clone + Send + 'static> Collector<T> {
    fn spawn<F, Fut>(cluster: &Cluster, what: String, init: T, f: F) -> Collector<T>
    where
        F: FnOnce(Arc<Mutex<Collected<T>>>, signal::Receiver<bool>) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let state = Arc::new(Mutex::new(Collected {
            data: init,
            absent: None,
            errors: Vec::new(),
        }));
        let (tx, rx) = signal::channel(false);
        let task = cluster.handle().spawn(f(state.clone(), rx));
        Collector {
            what,
            state,
            stop: tx,
            task: Some(task),
            cluster: cluster.clone(),
        }
    }

    /// What it collects, for messages (`pods app=web in ns`).
    pub fn what(&self) -> &str {
        &self.what
    }

    /// A copy of what it gathered so far.
    pub fn snapshot(&self) -> Collected<T> {
        self.state.lock().expect("collector state").clone()
    }

    /// Stops it (waiting at most 5 s for it to finish its current request) and returns what it
    /// gathered.
    pub fn stop(mut self) -> Collected<T> {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let abort = task.abort_handle();
            let done = self
                .cluster
                .block_on(async { tokio::time::timeout(Duration::from_secs(5), task).await });
            if done.is_err() {
                abort.abort();
                self.state.lock().expect("collector state").error(format!(
                    "{}: did not stop within 5 s; stopped abruptly",
                    self.what
                ));
            }
        }
        self.snapshot()
    }
}

impl<T> Drop for Collector<T> {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

/// Resolves when `rx` says stop (or its sender is gone).
async fn stopped(rx: &mut signal::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

/// One pod's state changed, as a pod watcher saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PodChange {
    /// Seconds since the case's origin when the watch delivered it.
    pub t_s: f64,
    /// The watched selector (`app=web`; empty for every pod of the namespace).
    pub selector: String,
    /// The pod's name.
    pub pod: String,
    /// `status.phase`.
    pub phase: String,
    /// The pod's Ready condition is True.
    pub ready: bool,
    /// The pod is terminating (deletion requested).
    pub deleting: bool,
    /// The pod object is gone.
    pub gone: bool,
    /// The pod IP, once assigned.
    pub ip: Option<String>,
    /// Part of the state found when the watch started, not a change seen happening.
    pub initial: bool,
    /// After this change: pods of the selector that are Ready and not terminating.
    pub ready_pods: u32,
    /// After this change: pods of the selector that exist (terminating ones included).
    pub pods: u32,
}

/// A container's restart count went up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RestartChange {
    /// Seconds since the case's origin when the watch delivered it.
    pub t_s: f64,
    /// The pod's name.
    pub pod: String,
    /// The container's name.
    pub container: String,
    /// Its restart count now.
    pub restarts: i32,
    /// The restarts this change adds: the jump since the count the watch last saw (from 0 for a
    /// pod that came after the watch began), so that 0 -> 3 seen at once is 3.
    pub added: i32,
    /// Why the previous instance ended (`lastState.terminated.reason`: `OOMKilled`, `Error`...).
    pub reason: Option<String>,
    /// The previous instance's exit code.
    pub exit_code: Option<i32>,
}

/// What a pod watcher saw: every phase/readiness/deletion change, and every restart.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PodTimeline {
    /// Pod state changes, in the order seen.
    pub changes: Vec<PodChange>,
    /// Container restarts, in the order seen.
    pub restarts: Vec<RestartChange>,
}

/// A Warning event of the watched namespace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WarningEvent {
    /// Seconds since the case's origin when the watch delivered it.
    pub t_s: f64,
    /// The object it is about (`Pod/web-1`).
    pub object: String,
    /// The event's reason (`BackOff`, `Unhealthy`, `FailedScheduling`...).
    pub reason: String,
    /// The event's message.
    pub message: String,
    /// How many times it happened so far (the event's count, from before the case too).
    pub count: i32,
    /// The event's UID: the rows of one event share it.
    pub uid: String,
    /// The occurrences this row adds within the case: the increase of `count` since the watch
    /// last saw the event, or since the case began (see [`WarningTally`]).
    pub added: i32,
}

/// What a Warning event watch knows of each event it saw, to count each one's occurrences
/// within the case as the API counts them: the increase of its `count`, never the sum of the
/// counts seen (an event seen at counts 1 to 5 is 5 occurrences, not 15) and never what it
/// counted before the case.
#[derive(Debug, Default)]
pub struct WarningTally {
    /// Per event UID, the count last seen (or the count before the case began).
    last: BTreeMap<String, i32>,
}

impl WarningTally {
    /// Event `e`, seen at `t` (seconds since the origin): the row it makes when its count grew
    /// since the last sighting, else `None`. `listed` is true for the events of the watch's
    /// first listing (those there when the case began); `since` is when the case began, on the
    /// API's clock. A listed event whose last occurrence came before `since` counted all of it
    /// before the case: its count is where its increase starts from, and it makes no row. A
    /// listed event whose last occurrence is at or after `since` (times have one-second
    /// resolution: `since` is a second before the watch began) counts that occurrence as the
    /// case's and the ones before it as not. An event first seen after the listing began in
    /// the case: all of its count is the case's.
    pub fn see(
        &mut self,
        e: &Event,
        t: f64,
        listed: bool,
        since: jiff::Timestamp,
    ) -> Option<WarningEvent> {
        let uid = e.metadata.uid.clone().unwrap_or_default();
        let count = e
            .count
            .or(e.series.as_ref().and_then(|s| s.count))
            .unwrap_or(1)
            .max(1);
        let when = e
            .last_timestamp
            .as_ref()
            .map(|t| t.0)
            .or(e.event_time.as_ref().map(|t| t.0))
            .or(e.metadata.creation_timestamp.as_ref().map(|t| t.0));
        let from = match self.last.get(&uid) {
            Some(b) => *b,
            None if listed && when.is_some_and(|w| w < since) => {
                self.last.insert(uid, count);
                return None;
            }
            None if listed => count - 1,
            None => 0,
        };
        if count <= from {
            return None;
        }
        self.last.insert(uid.clone(), count);
        let o = &e.involved_object;
        Some(WarningEvent {
            t_s: t,
            object: format!(
                "{}/{}",
                o.kind.clone().unwrap_or_default(),
                o.name.clone().unwrap_or_default()
            ),
            reason: e.reason.clone().unwrap_or_default(),
            message: e.message.clone().unwrap_or_default(),
            count,
            uid,
            added: count - from,
        })
    }
}

/// One metrics-API sample of one pod.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PodUsage {
    /// Seconds since the case's origin when the sample was read.
    pub t_s: f64,
    /// The pod's name.
    pub pod: String,
    /// CPU in cores, summed over its containers.
    pub cpu_cores: f64,
    /// Memory (working set) in bytes, summed over its containers.
    pub memory_bytes: f64,
}

/// What to scrape on each pod: a port, a path, and the metrics worth keeping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromTarget {
    /// The pod's port.
    pub port: u16,
    /// The path (`/metrics`).
    pub path: String,
    /// Metric name prefixes to keep; every metric when empty.
    pub keep: Vec<String>,
}

/// One Prometheus scrape of one pod.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scrape {
    /// Seconds since the case's origin when the scrape answered.
    pub t_s: f64,
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// Its samples (only the metrics asked for, when a filter was given).
    pub samples: Vec<Sample>,
}

fn t_s(origin: Instant) -> f64 {
    origin.elapsed().as_secs_f64()
}

/// The per-pod state a pod watcher compares against.
#[derive(Clone, PartialEq)]
struct Seen {
    name: String,
    phase: String,
    ready: bool,
    deleting: bool,
    ip: Option<String>,
}

/// A pod watcher's memory: each pod's last state and each container's restart count.
struct PodState {
    selector: String,
    pods: BTreeMap<String, Seen>,
    restarts: BTreeMap<(String, String), i32>,
}

impl PodState {
    /// Records pod `p` as seen at `t` if its state changed, and any restart of its containers.
    fn record(
        &mut self,
        p: &Pod,
        t: f64,
        initial: bool,
        gone: bool,
        st: &mut Collected<PodTimeline>,
    ) {
        let i = PodInfo::of(p);
        let seen = Seen {
            name: i.name.clone(),
            phase: i.phase.clone(),
            ready: i.ready,
            deleting: i.deleting,
            ip: i.ip.map(|ip| ip.to_string()),
        };
        let changed = if gone {
            self.pods.remove(&i.uid).is_some()
        } else {
            self.pods.insert(i.uid.clone(), seen.clone()).as_ref() != Some(&seen)
        };
        if changed {
            let ready_pods = self
                .pods
                .values()
                .filter(|s| s.ready && !s.deleting)
                .count() as u32;
            st.data.changes.push(PodChange {
                t_s: t,
                selector: self.selector.clone(),
                pod: i.name.clone(),
                phase: i.phase.clone(),
                ready: i.ready && !gone,
                deleting: i.deleting,
                gone,
                ip: seen.ip,
                initial,
                ready_pods,
                pods: self.pods.len() as u32,
            });
        }
        let statuses = p
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref());
        for cs in statuses.into_iter().flatten() {
            let before = self
                .restarts
                .insert((i.uid.clone(), cs.name.clone()), cs.restart_count);
            // The count before: the last one seen; for a pod found when the watch started, its
            // count then (restarts before the case are not the case's); for a pod that came
            // later, 0 (all of its restarts are the case's).
            let from = match before {
                Some(b) => b,
                None if initial => cs.restart_count,
                None => 0,
            };
            if cs.restart_count > from {
                let term = cs.last_state.as_ref().and_then(|l| l.terminated.as_ref());
                st.data.restarts.push(RestartChange {
                    t_s: t,
                    pod: i.name.clone(),
                    container: cs.name.clone(),
                    restarts: cs.restart_count,
                    added: cs.restart_count - from,
                    reason: term.and_then(|t| t.reason.clone()),
                    exit_code: term.map(|t| t.exit_code),
                });
            }
        }
        if gone {
            self.restarts.retain(|(uid, _), _| *uid != i.uid);
        }
    }
}

impl Cluster {
    /// Watches the pods of `namespace` matching `selector` (every pod when empty): each
    /// phase, readiness or deletion change, and each container restart, stamped against
    /// `origin`.
    pub fn watch_pods(
        &self,
        namespace: &str,
        selector: &str,
        origin: Instant,
    ) -> Collector<PodTimeline> {
        let api: Api<Pod> = Api::namespaced(self.client(), namespace);
        let what = format!(
            "pods {} in {namespace}",
            if selector.is_empty() {
                "(all)"
            } else {
                selector
            }
        );
        let mut cfg = watcher::Config::default();
        if !selector.is_empty() {
            cfg = cfg.labels(selector);
        }
        let selector = selector.to_string();
        let w = what.clone();
        Collector::spawn(
            self,
            what,
            PodTimeline::default(),
            move |state, mut stop| async move {
                let mut stream = watcher(api, cfg).default_backoff().boxed();
                let mut ps = PodState {
                    selector,
                    pods: BTreeMap::new(),
                    restarts: BTreeMap::new(),
                };
                let mut listing: Option<BTreeSet<String>> = None;
                let mut first_listing = true;
                let mut got_any = false;
                loop {
                    let ev = tokio::select! {
                        _ = stopped(&mut stop) => break,
                        ev = stream.next() => ev,
                    };
                    let Some(ev) = ev else { break };
                    let t = t_s(origin);
                    let mut st = state.lock().expect("collector state");
                    let ev = match ev {
                        Ok(ev) => ev,
                        Err(e) => {
                            st.error(format!("{w}: watch: {}", crate::error::chain(&e)));
                            continue;
                        }
                    };
                    got_any = true;
                    match ev {
                        watcher::Event::Init => listing = Some(BTreeSet::new()),
                        watcher::Event::InitApply(p) => {
                            if let Some(l) = listing.as_mut() {
                                l.insert(p.metadata.uid.clone().unwrap_or_default());
                            }
                            ps.record(&p, t, first_listing, false, &mut st);
                        }
                        watcher::Event::InitDone => {
                            // Pods that went away while the watch was down.
                            let listed = listing.take().unwrap_or_default();
                            let vanished: Vec<(String, Seen)> = ps
                                .pods
                                .iter()
                                .filter(|(uid, _)| !listed.contains(*uid))
                                .map(|(u, s)| (u.clone(), s.clone()))
                                .collect();
                            for (uid, s) in vanished {
                                let mut p = Pod::default();
                                p.metadata.uid = Some(uid);
                                p.metadata.name = Some(s.name);
                                p.status = Some(k8s_openapi::api::core::v1::PodStatus {
                                    phase: Some(s.phase),
                                    ..Default::default()
                                });
                                ps.record(&p, t, false, true, &mut st);
                            }
                            first_listing = false;
                        }
                        watcher::Event::Apply(p) => ps.record(&p, t, false, false, &mut st),
                        watcher::Event::Delete(p) => ps.record(&p, t, false, true, &mut st),
                    }
                }
                let mut st = state.lock().expect("collector state");
                if !got_any {
                    st.absent = Some(match st.errors.first() {
                        Some(e) => format!("pod watch got no data: {e}"),
                        None => "pod watch got no data before it was stopped".into(),
                    });
                }
            },
        )
    }

    /// Watches the Warning events of `namespace` that happen from now on (older ones are
    /// skipped), stamped against `origin`.
    pub fn watch_warnings(&self, namespace: &str, origin: Instant) -> Collector<Vec<WarningEvent>> {
        let api: Api<Event> = Api::namespaced(self.client(), namespace);
        let what = format!("Warning events in {namespace}");
        let w = what.clone();
        // Event times have one-second resolution: keep what happened in the second before.
        let since = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(1);
        Collector::spawn(self, what, Vec::new(), move |state, mut stop| async move {
            let cfg = watcher::Config::default().fields("type=Warning");
            let mut stream = watcher(api, cfg).default_backoff().boxed();
            let mut tally = WarningTally::default();
            // The events of the first listing are those there when the case began.
            let mut first_listing = true;
            let mut got_any = false;
            loop {
                let ev = tokio::select! {
                    _ = stopped(&mut stop) => break,
                    ev = stream.next() => ev,
                };
                let Some(ev) = ev else { break };
                let t = t_s(origin);
                let mut st = state.lock().expect("collector state");
                let (e, listed) = match ev {
                    Ok(watcher::Event::InitApply(e)) => (e, first_listing),
                    Ok(watcher::Event::Apply(e)) => (e, false),
                    Ok(watcher::Event::InitDone) => {
                        first_listing = false;
                        got_any = true;
                        continue;
                    }
                    Ok(_) => {
                        got_any = true;
                        continue;
                    }
                    Err(e) => {
                        st.error(format!("{w}: watch: {}", crate::error::chain(&e)));
                        continue;
                    }
                };
                got_any = true;
                if let Some(row) = tally.see(&e, t, listed, since) {
                    st.data.push(row);
                }
            }
            let mut st = state.lock().expect("collector state");
            if !got_any {
                st.absent = Some(match st.errors.first() {
                    Some(e) => format!("event watch got no data: {e}"),
                    None => "event watch got no data before it was stopped".into(),
                });
            }
        })
    }

    /// Samples CPU and memory of the pods of `namespace` matching `selector` from the metrics
    /// API (`metrics.k8s.io` PodMetrics) every `every`. When the cluster does not serve that API
    /// the collector holds no data and says so.
    pub fn sample_metrics(
        &self,
        namespace: &str,
        selector: &str,
        origin: Instant,
        every: Duration,
    ) -> Collector<Vec<PodUsage>> {
        self.sample_pod_metrics(namespace, &[selector.to_string()], origin, every, false)
    }

    /// [`Cluster::sample_metrics`] of the pods that any of `selectors` picks in `namespace`
    /// (every pod when one is empty), each pod sampled once a round even when two selectors
    /// pick it: a gateway's pods in their own namespace, by their own labels. Its samples name
    /// their pods `namespace/pod`, as the watched pods' logs do.
    pub fn sample_metrics_of(
        &self,
        namespace: &str,
        selectors: &[String],
        origin: Instant,
        every: Duration,
    ) -> Collector<Vec<PodUsage>> {
        self.sample_pod_metrics(namespace, selectors, origin, every, true)
    }

    /// The sampler behind both: `qualified` names each pod with its namespace.
    fn sample_pod_metrics(
        &self,
        namespace: &str,
        selectors: &[String],
        origin: Instant,
        every: Duration,
        qualified: bool,
    ) -> Collector<Vec<PodUsage>> {
        let shown = shown_selectors(selectors);
        let what = format!("metrics of pods {} in {namespace}", shown.join(" or "));
        let resource = self.block_on(async {
            let d = self.discovery(false).await?;
            Ok::<_, Error>(
                d.get("metrics.k8s.io")
                    .and_then(|g| g.recommended_kind("PodMetrics")),
            )
        });
        let client = self.client();
        let namespace = namespace.to_string();
        let selectors: Vec<String> =
            if selectors.is_empty() || selectors.iter().any(String::is_empty) {
                vec![String::new()]
            } else {
                selectors.to_vec()
            };
        let w = what.clone();
        Collector::spawn(self, what, Vec::new(), move |state, mut stop| async move {
            let ar = match resource {
                Ok(Some((ar, _))) => ar,
                Ok(None) => {
                    state.lock().expect("collector state").absent = Some(
                        "metrics API not served: the API server has no metrics.k8s.io group (no metrics-server)"
                            .into(),
                    );
                    return;
                }
                Err(e) => {
                    state.lock().expect("collector state").absent =
                        Some(format!("metrics API not known: {e}"));
                    return;
                }
            };
            let api: Api<DynamicObject> = Api::namespaced_with(client, &namespace, &ar);
            let lps: Vec<ListParams> = selectors
                .iter()
                .map(|sel| {
                    let lp = ListParams::default();
                    if sel.is_empty() {
                        lp
                    } else {
                        lp.labels(sel)
                    }
                })
                .collect();
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stopped(&mut stop) => break,
                    _ = tick.tick() => {}
                }
                let mut sampled: BTreeSet<String> = BTreeSet::new();
                for lp in &lps {
                    let r = api.list(lp).await;
                    let t = t_s(origin);
                    let mut st = state.lock().expect("collector state");
                    match r {
                        Ok(list) => {
                            for m in list.items {
                                if !sampled.insert(m.metadata.name.clone().unwrap_or_default()) {
                                    continue;
                                }
                                let mut cpu = 0.0;
                                let mut mem = 0.0;
                                for c in m.data["containers"].as_array().into_iter().flatten() {
                                    cpu += c["usage"]["cpu"]
                                        .as_str()
                                        .and_then(parse_quantity)
                                        .unwrap_or(0.0);
                                    mem += c["usage"]["memory"]
                                        .as_str()
                                        .and_then(parse_quantity)
                                        .unwrap_or(0.0);
                                }
                                let pod = m.metadata.name.clone().unwrap_or_default();
                                st.data.push(PodUsage {
                                    t_s: t,
                                    pod: if qualified {
                                        format!("{namespace}/{pod}")
                                    } else {
                                        pod
                                    },
                                    cpu_cores: cpu,
                                    memory_bytes: mem,
                                });
                            }
                        }
                        Err(e) => {
                            let (m, _) = split(e);
                            st.error(format!("{w}: {m}"));
                        }
                    }
                }
            }
            let mut st = state.lock().expect("collector state");
            if st.data.is_empty() {
                st.absent = Some(match st.errors.first() {
                    Some(e) => format!("metrics API gave no sample: {e}"),
                    None => "metrics API gave no sample before the collector stopped".into(),
                });
            }
        })
    }

    /// Scrapes `target` on every running pod of `namespace` matching `selector` every `every`,
    /// through the API server's pod proxy. The API server proxies only to routable pod IPs, not
    /// to hostNetwork pods on loopback: those scrapes fail, and the collector says so.
    pub fn scrape_prometheus(
        &self,
        namespace: &str,
        selector: &str,
        target: &PromTarget,
        origin: Instant,
        every: Duration,
    ) -> Collector<Vec<Scrape>> {
        self.scrape_prometheus_in(
            &[namespace.to_string()],
            &[selector.to_string()],
            target,
            origin,
            every,
        )
    }

    /// [`Cluster::scrape_prometheus`] of the running pods that any of `selectors` (every pod
    /// when one is empty) picks in any of `namespaces`, each pod scraped once a round: a
    /// gateway's data plane and control plane, each in a namespace of its own.
    pub fn scrape_prometheus_in(
        &self,
        namespaces: &[String],
        selectors: &[String],
        target: &PromTarget,
        origin: Instant,
        every: Duration,
    ) -> Collector<Vec<Scrape>> {
        let PromTarget { port, path, keep } = target.clone();
        let shown = shown_selectors(selectors);
        let what = format!(
            "Prometheus scrape of :{port}/{} of pods {} in {}",
            path.trim_start_matches('/'),
            shown.join(" or "),
            namespaces.join(", ")
        );
        let cluster = self.clone();
        let namespaces = namespaces.to_vec();
        let selectors: Vec<String> =
            if selectors.is_empty() || selectors.iter().any(String::is_empty) {
                vec![String::new()]
            } else {
                selectors.to_vec()
            };
        let w = what.clone();
        Collector::spawn(self, what, Vec::new(), move |state, mut stop| async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stopped(&mut stop) => break,
                    _ = tick.tick() => {}
                }
                // (namespace, pod) of every running pod picked, once each.
                let mut names: BTreeSet<(String, String)> = BTreeSet::new();
                for ns in &namespaces {
                    let pods: Api<Pod> = Api::namespaced(cluster.client(), ns);
                    for sel in &selectors {
                        let mut lp = ListParams::default();
                        if !sel.is_empty() {
                            lp = lp.labels(sel);
                        }
                        match pods.list(&lp).await {
                            Ok(l) => names.extend(
                                l.items
                                    .iter()
                                    .map(PodInfo::of)
                                    .filter(|p| p.phase == "Running" && !p.deleting)
                                    .map(|p| (ns.clone(), p.name)),
                            ),
                            Err(e) => state
                                .lock()
                                .expect("collector state")
                                .error(format!("{w}: {}", split(e).0)),
                        }
                    }
                }
                for (namespace, pod) in names {
                    let r = cluster.scrape_async(&namespace, &pod, port, &path).await;
                    let t = t_s(origin);
                    let mut st = state.lock().expect("collector state");
                    match r {
                        Ok(mut samples) => {
                            if !keep.is_empty() {
                                samples.retain(|s| {
                                    keep.iter().any(|k| s.metric.starts_with(k.as_str()))
                                });
                            }
                            st.data.push(Scrape {
                                t_s: t,
                                namespace,
                                pod,
                                samples,
                            });
                        }
                        Err(e) => st.error(e.to_string()),
                    }
                }
            }
            let mut st = state.lock().expect("collector state");
            if st.data.is_empty() {
                st.absent = Some(match st.errors.first() {
                    Some(e) => format!("no scrape answered: {e}"),
                    None => "no running pod to scrape before the collector stopped".into(),
                });
            }
        })
    }

    /// One Prometheus scrape of `path` on `port` of pod `name`, through the API server's pod
    /// proxy (`/api/v1/namespaces/NS/pods/NAME:PORT/proxy/PATH`), parsed.
    pub fn scrape(
        &self,
        namespace: &str,
        name: &str,
        port: u16,
        path: &str,
    ) -> Result<Vec<Sample>, Error> {
        self.block_on(self.scrape_async(namespace, name, port, path))
    }

    async fn scrape_async(
        &self,
        namespace: &str,
        name: &str,
        port: u16,
        path: &str,
    ) -> Result<Vec<Sample>, Error> {
        let uri = format!(
            "/api/v1/namespaces/{namespace}/pods/{name}:{port}/proxy/{}",
            path.trim_start_matches('/')
        );
        let what = format!("scrape {uri}");
        let req = http::Request::get(&uri)
            .body(Vec::new())
            .map_err(|e| Error::Api {
                what: what.clone(),
                message: e.to_string(),
                code: 0,
            })?;
        let text = self
            .client()
            .request_text(req)
            .await
            .map_err(|e| Error::api(&what, e))?;
        Ok(parse_prometheus(&text))
    }
}

/// One endpoint of a Service changed, as an EndpointSlice watch saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EndpointChange {
    /// Seconds since the case's origin when the watch delivered it.
    pub t_s: f64,
    /// The Service.
    pub service: String,
    /// The pod the endpoint belongs to (its `targetRef`), else its address.
    pub endpoint: String,
    /// Its address.
    pub ip: String,
    /// The `ready` condition (traffic goes to it).
    pub ready: bool,
    /// The `serving` condition (it would serve; true for a terminating pod still answering).
    pub serving: bool,
    /// The `terminating` condition.
    pub terminating: bool,
    /// It left the Service's EndpointSlices.
    pub gone: bool,
    /// Part of the state found when the watch started, not a change seen happening.
    pub initial: bool,
    /// After this change: the Service's ready endpoints.
    pub ready_endpoints: u32,
}

/// One endpoint's conditions, as compared between events.
#[derive(Debug, Clone, PartialEq)]
struct EndpointSeen {
    endpoint: String,
    ready: bool,
    serving: bool,
    terminating: bool,
}

/// Every endpoint of one EndpointSlice, by address.
fn slice_endpoints(s: &EndpointSlice) -> BTreeMap<String, EndpointSeen> {
    let mut out = BTreeMap::new();
    for e in &s.endpoints {
        let c = e.conditions.clone().unwrap_or_default();
        // Absent conditions mean ready and serving, not terminating (the API's defaults).
        let ready = c.ready.unwrap_or(true);
        for a in &e.addresses {
            out.insert(
                a.clone(),
                EndpointSeen {
                    endpoint: e
                        .target_ref
                        .as_ref()
                        .and_then(|t| t.name.clone())
                        .unwrap_or_else(|| a.clone()),
                    ready,
                    serving: c.serving.unwrap_or(ready),
                    terminating: c.terminating.unwrap_or(false),
                },
            );
        }
    }
    out
}

/// The merge of every slice's endpoints (an address in two slices, as during a slice's
/// replacement, counts once: ready if either says so).
fn merged(
    slices: &BTreeMap<String, BTreeMap<String, EndpointSeen>>,
) -> BTreeMap<String, EndpointSeen> {
    let mut out: BTreeMap<String, EndpointSeen> = BTreeMap::new();
    for eps in slices.values() {
        for (ip, e) in eps {
            match out.get_mut(ip) {
                Some(o) => {
                    o.ready |= e.ready;
                    o.serving |= e.serving;
                    o.terminating &= e.terminating;
                }
                None => {
                    out.insert(ip.clone(), e.clone());
                }
            }
        }
    }
    out
}

/// One readiness probe tally of one pod, as its kubelet counted it between two samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeTally {
    /// Seconds since the case's origin when the kubelet's counters were read (the probes ran
    /// in the interval before).
    pub t_s: f64,
    /// The pod's name.
    pub pod: String,
    /// The node whose kubelet probed it.
    pub node: String,
    /// Probes that succeeded in the interval.
    pub successes: u64,
    /// Probes that failed in the interval.
    pub failures: u64,
    /// Probes whose result was unknown (the prober could not run them) in the interval.
    pub unknown: u64,
    /// The mean duration of the interval's successful probes, in seconds (the kubelet keeps a
    /// histogram of them: its sum over its count); `None` when none succeeded.
    pub mean_success_s: Option<f64>,
}

/// What a readiness probe sampler gathered: the tallies, and how each node's kubelet reads
/// went, so that counts from some nodes are never shown as all of them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeCounts {
    /// Each pod's tally per interval, in the order read.
    pub tallies: Vec<ProbeTally>,
    /// Per node that ran (or ran) a selected pod: its kubelet's reads.
    pub nodes: BTreeMap<String, NodeReads>,
}

/// How the reads of one node's kubelet counters went.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeReads {
    /// Reads that answered.
    pub ok: u64,
    /// Reads that failed.
    pub failed: u64,
    /// Why its last read failed, when it did: the kubelet's counters are cumulative, so a read
    /// that answers catches up with every failed one before it, and only a node whose last read
    /// failed has counts missing (everything since its last good read).
    pub last_error: Option<String>,
}

impl ProbeCounts {
    /// The nodes whose counts are missing in part or whole (their last read failed), each with
    /// why, beside how many nodes there were: what a sentence on the counts must say.
    pub fn missing_nodes(&self) -> Vec<(&str, &NodeReads)> {
        self.nodes
            .iter()
            .filter(|(_, r)| r.last_error.is_some())
            .map(|(n, r)| (n.as_str(), r))
            .collect()
    }
}

/// The readiness probe counters of one pod, as last read.
#[derive(Debug, Clone, Copy, Default)]
struct ProbeCounters {
    successes: f64,
    failures: f64,
    unknown: f64,
    duration_sum: f64,
    duration_count: f64,
}

impl Cluster {
    /// Watches the EndpointSlices of Service `service` in `namespace`: each endpoint's arrival,
    /// departure and condition change (ready, serving, terminating), stamped against `origin`.
    pub fn watch_endpoints(
        &self,
        namespace: &str,
        service: &str,
        origin: Instant,
    ) -> Collector<Vec<EndpointChange>> {
        let api: Api<EndpointSlice> = Api::namespaced(self.client(), namespace);
        let what = format!("EndpointSlices of service {service} in {namespace}");
        let cfg =
            watcher::Config::default().labels(&format!("kubernetes.io/service-name={service}"));
        let w = what.clone();
        let service = service.to_string();
        Collector::spawn(self, what, Vec::new(), move |state, mut stop| async move {
            let mut stream = watcher(api, cfg).default_backoff().boxed();
            let mut slices: BTreeMap<String, BTreeMap<String, EndpointSeen>> = BTreeMap::new();
            let mut listing: Option<BTreeMap<String, BTreeMap<String, EndpointSeen>>> = None;
            let mut before: BTreeMap<String, EndpointSeen> = BTreeMap::new();
            let mut first_listing = true;
            let mut got_any = false;
            loop {
                let ev = tokio::select! {
                    _ = stopped(&mut stop) => break,
                    ev = stream.next() => ev,
                };
                let Some(ev) = ev else { break };
                let t = t_s(origin);
                let mut st = state.lock().expect("collector state");
                let ev = match ev {
                    Ok(ev) => ev,
                    Err(e) => {
                        st.error(format!("{w}: watch: {}", crate::error::chain(&e)));
                        continue;
                    }
                };
                got_any = true;
                let name = |s: &EndpointSlice| s.metadata.name.clone().unwrap_or_default();
                let initial = match ev {
                    watcher::Event::Init => {
                        listing = Some(BTreeMap::new());
                        continue;
                    }
                    watcher::Event::InitApply(s) => {
                        if let Some(l) = listing.as_mut() {
                            l.insert(name(&s), slice_endpoints(&s));
                        }
                        continue;
                    }
                    watcher::Event::InitDone => {
                        slices = listing.take().unwrap_or_default();
                        let was = first_listing;
                        first_listing = false;
                        was
                    }
                    watcher::Event::Apply(s) => {
                        slices.insert(name(&s), slice_endpoints(&s));
                        false
                    }
                    watcher::Event::Delete(s) => {
                        slices.remove(&name(&s));
                        false
                    }
                };
                let now = merged(&slices);
                let ready_endpoints = now.values().filter(|e| e.ready).count() as u32;
                let mut push = |ip: &str, e: &EndpointSeen, gone: bool| {
                    st.data.push(EndpointChange {
                        t_s: t,
                        service: service.clone(),
                        endpoint: e.endpoint.clone(),
                        ip: ip.to_string(),
                        ready: e.ready && !gone,
                        serving: e.serving && !gone,
                        terminating: e.terminating,
                        gone,
                        initial,
                        ready_endpoints,
                    });
                };
                for (ip, e) in &now {
                    if before.get(ip) != Some(e) {
                        push(ip, e, false);
                    }
                }
                for (ip, e) in &before {
                    if !now.contains_key(ip) {
                        push(ip, e, true);
                    }
                }
                before = now;
            }
            let mut st = state.lock().expect("collector state");
            if !got_any {
                st.absent = Some(match st.errors.first() {
                    Some(e) => format!("EndpointSlice watch got no data: {e}"),
                    None => "EndpointSlice watch got no data before it was stopped".into(),
                });
            }
        })
    }

    /// Reads, every `every`, the readiness probe counters that the kubelets running the pods of
    /// `selector` in `namespace` keep (`prober_probe_total` and
    /// `prober_probe_duration_seconds` on each kubelet's `/metrics/probes`, through the API
    /// server's node proxy): each pod's successes, failures and the mean time of its successful
    /// probes since the previous read. Needs `nodes/proxy`; without it the collector says why.
    pub fn sample_probes(
        &self,
        namespace: &str,
        selector: &str,
        origin: Instant,
        every: Duration,
    ) -> Collector<ProbeCounts> {
        let what = format!("readiness probes of pods {selector} in {namespace}");
        let cluster = self.clone();
        let (namespace, selector) = (namespace.to_string(), selector.to_string());
        let w = what.clone();
        let init = ProbeCounts::default();
        Collector::spawn(self, what, init, move |state, mut stop| async move {
            let pods: Api<Pod> = Api::namespaced(cluster.client(), &namespace);
            let lp = ListParams::default().labels(&selector);
            let mut last: BTreeMap<String, ProbeCounters> = BTreeMap::new();
            let mut read_any = false;
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stopped(&mut stop) => break,
                    _ = tick.tick() => {}
                }
                // The nodes that run (or ran) the selected pods, and which pods are ours.
                let mut nodes: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
                match pods.list(&lp).await {
                    Ok(l) => {
                        for p in l.items.iter().map(PodInfo::of) {
                            if let Some(n) = p.node {
                                nodes.entry(n).or_default().insert(p.name);
                            }
                        }
                    }
                    Err(e) => {
                        state
                            .lock()
                            .expect("collector state")
                            .error(format!("{w}: {}", split(e).0));
                        continue;
                    }
                }
                for (node, ours) in nodes {
                    let r = cluster.node_metrics(&node, "metrics/probes").await;
                    let t = t_s(origin);
                    let mut st = state.lock().expect("collector state");
                    let reads = st.data.nodes.entry(node.clone()).or_default();
                    let samples = match r {
                        Ok(s) => {
                            reads.ok += 1;
                            reads.last_error = None;
                            s
                        }
                        Err(e) => {
                            reads.failed += 1;
                            reads.last_error = Some(e.to_string());
                            st.error(e.to_string());
                            continue;
                        }
                    };
                    read_any = true;
                    let mut now: BTreeMap<String, ProbeCounters> = BTreeMap::new();
                    for x in &samples {
                        if x.label("probe_type") != Some("Readiness")
                            || x.label("namespace") != Some(namespace.as_str())
                        {
                            continue;
                        }
                        let Some(pod) = x.label("pod").filter(|p| ours.contains(*p)) else {
                            continue;
                        };
                        let c = now.entry(pod.to_string()).or_default();
                        match (x.metric.as_str(), x.label("result")) {
                            ("prober_probe_total", Some("successful")) => c.successes += x.value,
                            ("prober_probe_total", Some("failed")) => c.failures += x.value,
                            ("prober_probe_total", Some("unknown")) => c.unknown += x.value,
                            ("prober_probe_duration_seconds_sum", _) => c.duration_sum += x.value,
                            ("prober_probe_duration_seconds_count", _) => {
                                c.duration_count += x.value
                            }
                            _ => {}
                        }
                    }
                    for (pod, c) in now {
                        // A pod first seen starts from zero: its kubelet counts from its start.
                        let b = last.get(&pod).copied().unwrap_or_default();
                        let d = |a: f64, b: f64| (a - b).max(0.0).round() as u64;
                        let (ok, failed, unknown) = (
                            d(c.successes, b.successes),
                            d(c.failures, b.failures),
                            d(c.unknown, b.unknown),
                        );
                        let timed = c.duration_count - b.duration_count;
                        if ok + failed + unknown > 0 {
                            st.data.tallies.push(ProbeTally {
                                t_s: t,
                                pod: pod.clone(),
                                node: node.clone(),
                                successes: ok,
                                failures: failed,
                                unknown,
                                mean_success_s: (ok > 0 && timed > 0.0)
                                    .then(|| (c.duration_sum - b.duration_sum) / timed),
                            });
                        }
                        last.insert(pod, c);
                    }
                }
            }
            let mut st = state.lock().expect("collector state");
            if !read_any {
                st.absent = Some(match st.errors.first() {
                    Some(e) => format!("the kubelets' probe counters could not be read: {e}"),
                    None => "no probed pod ran before the collector stopped".into(),
                });
            }
        })
    }

    /// One of a node's kubelet metrics endpoints (`metrics/probes`, `metrics/cadvisor`), through
    /// the API server's node proxy, parsed.
    async fn node_metrics(&self, node: &str, path: &str) -> Result<Vec<Sample>, Error> {
        let uri = format!("/api/v1/nodes/{node}/proxy/{path}");
        let what = format!("read {uri}");
        let req = http::Request::get(&uri)
            .body(Vec::new())
            .map_err(|e| Error::Api {
                what: what.clone(),
                message: e.to_string(),
                code: 0,
            })?;
        let text = tokio::time::timeout(Duration::from_secs(5), self.client().request_text(req))
            .await
            .map_err(|_| Error::Timeout {
                what: what.clone(),
                after: Duration::from_secs(5),
                state: "no answer".into(),
            })?
            .map_err(|e| Error::api(&what, e))?;
        Ok(parse_prometheus(&text))
    }
}

/// A Kubernetes quantity (`250m`, `123456n`, `1.5`, `64Mi`, `1G`, `1e3`) as a number.
pub fn parse_quantity(s: &str) -> Option<f64> {
    let s = s.trim();
    // Sub-unit suffixes divide, so that `250m` is exactly 0.25 as written.
    let suffixes: [(&str, f64); 16] = [
        ("Ki", 1024.0),
        ("Mi", 1024.0 * 1024.0),
        ("Gi", 1024.0 * 1024.0 * 1024.0),
        ("Ti", 1024f64.powi(4)),
        ("Pi", 1024f64.powi(5)),
        ("Ei", 1024f64.powi(6)),
        ("n", -1e9),
        ("u", -1e6),
        ("m", -1e3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
        ("", 1.0),
    ];
    for (suf, mult) in suffixes {
        if let Some(num) = s.strip_suffix(suf) {
            if suf.is_empty() || !num.is_empty() {
                if let Ok(v) = num.parse::<f64>() {
                    return Some(if mult < 0.0 { v / -mult } else { v * mult });
                }
            }
        }
    }
    None
}

/// How a collector's selectors are named in its messages: `(all)` for none or an empty one.
fn shown_selectors(selectors: &[String]) -> Vec<&str> {
    if selectors.is_empty() {
        return vec!["(all)"];
    }
    selectors
        .iter()
        .map(|s| if s.is_empty() { "(all)" } else { s.as_str() })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateRunning, ContainerStatus, ObjectReference, PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    /// Pod `name` (UID `uid`) whose one container `c` has restarted `restarts` times.
    fn pod(name: &str, uid: &str, restarts: i32) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some(name.into());
        p.metadata.uid = Some(uid.into());
        p.status = Some(PodStatus {
            phase: Some("Running".into()),
            container_statuses: Some(vec![ContainerStatus {
                name: "c".into(),
                restart_count: restarts,
                state: Some(ContainerState {
                    running: Some(ContainerStateRunning::default()),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        });
        p
    }

    fn state() -> (PodState, Collected<PodTimeline>) {
        (
            PodState {
                selector: String::new(),
                pods: BTreeMap::new(),
                restarts: BTreeMap::new(),
            },
            Collected::default(),
        )
    }

    /// Restarts are the sum of the jumps in restartCount: a count seen going 0 -> 3 at once is
    /// 3 restarts, not one; what a pod there when the watch began had restarted before is not
    /// the case's; a pod that came later counts from 0.
    #[test]
    fn restarts_are_the_jumps_in_the_restart_count() {
        let (mut ps, mut st) = state();
        ps.record(&pod("a", "ua", 0), 0.0, true, false, &mut st);
        ps.record(&pod("a", "ua", 3), 1.0, false, false, &mut st);
        let added: Vec<i32> = st.data.restarts.iter().map(|r| r.added).collect();
        assert_eq!(added, [3]);
        assert_eq!(st.data.restarts[0].restarts, 3);
        // Then one more: 3 -> 4 adds 1; the same count again adds nothing.
        ps.record(&pod("a", "ua", 4), 2.0, false, false, &mut st);
        ps.record(&pod("a", "ua", 4), 2.5, false, false, &mut st);
        // Found at 2 when the watch began: those 2 are from before the case.
        ps.record(&pod("b", "ub", 2), 0.0, true, false, &mut st);
        ps.record(&pod("b", "ub", 5), 3.0, false, false, &mut st);
        // A pod that came during the case, first seen at 2: both are the case's.
        ps.record(&pod("c", "uc", 2), 4.0, false, false, &mut st);
        let added: Vec<(String, i32)> = st
            .data
            .restarts
            .iter()
            .map(|r| (r.pod.clone(), r.added))
            .collect();
        assert_eq!(
            added,
            [
                ("a".to_string(), 3),
                ("a".to_string(), 1),
                ("b".to_string(), 3),
                ("c".to_string(), 2)
            ]
        );
        assert_eq!(st.data.restarts.iter().map(|r| r.added).sum::<i32>(), 9);
    }

    /// A Warning event `uid` at `count`, last seen at `at`.
    fn event(uid: &str, count: i32, at: &str) -> Event {
        Event {
            metadata: kube::api::ObjectMeta {
                uid: Some(uid.into()),
                ..Default::default()
            },
            involved_object: ObjectReference {
                kind: Some("Pod".into()),
                name: Some("web-1".into()),
                ..Default::default()
            },
            reason: Some("Unhealthy".into()),
            message: Some("Readiness probe failed".into()),
            count: Some(count),
            last_timestamp: Some(Time(at.parse().unwrap())),
            ..Default::default()
        }
    }

    /// An event seen at counts 1 to 5 during the case is 5 occurrences, not 1 + 2 + 3 + 4 + 5;
    /// one that had counted 4 before the case and is seen at 5 and 7 is 3; one listed whose last
    /// occurrence was before the case is none.
    #[test]
    fn warnings_are_the_increase_of_each_events_count_within_the_case() {
        let since: jiff::Timestamp = "2026-12-01T10:00:00Z".parse().unwrap();
        let (before, during) = ("2026-12-01T09:59:00Z", "2026-12-01T10:00:05Z");
        let mut tally = WarningTally::default();
        let mut rows = Vec::new();
        // Listed when the case began: old at 4 (before), stale at 9 (before, never again).
        assert!(tally
            .see(&event("old", 4, before), 0.0, true, since)
            .is_none());
        assert!(tally
            .see(&event("stale", 9, before), 0.0, true, since)
            .is_none());
        for c in 1..=5 {
            rows.extend(tally.see(&event("new", c, during), f64::from(c), false, since));
            // The same count delivered again (another field changed) adds nothing.
            rows.extend(tally.see(&event("new", c, during), f64::from(c), false, since));
        }
        rows.extend(tally.see(&event("old", 5, during), 6.0, false, since));
        rows.extend(tally.see(&event("old", 7, during), 7.0, false, since));
        let new: i32 = rows
            .iter()
            .filter(|r| r.uid == "new")
            .map(|r| r.added)
            .sum();
        let old: i32 = rows
            .iter()
            .filter(|r| r.uid == "old")
            .map(|r| r.added)
            .sum();
        assert_eq!((new, old), (5, 3));
        assert_eq!(rows.len(), 7, "{rows:?}");
        assert_eq!(rows.iter().map(|r| r.count).max(), Some(7));
        // Listed with its last occurrence at the case's start (the one-second slack): that one
        // occurrence is the case's, the two before it are not.
        let r = tally
            .see(&event("edge", 3, "2026-12-01T10:00:00Z"), 0.0, true, since)
            .unwrap();
        assert_eq!((r.count, r.added), (3, 1));
        // An event first seen after the listing, already at 4: all four are the case's.
        let r = tally
            .see(&event("late", 4, during), 9.0, false, since)
            .unwrap();
        assert_eq!(r.added, 4);
    }

    /// The nodes whose counts are missing are those whose last read failed; a node whose failed
    /// read was followed by one that answered is whole (the counters are cumulative).
    #[test]
    fn only_a_node_whose_last_read_failed_is_missing() {
        let mut c = ProbeCounts::default();
        c.nodes.insert(
            "proxybench".into(),
            NodeReads {
                ok: 9,
                failed: 1,
                last_error: None,
            },
        );
        c.nodes.insert(
            "proxybench-2".into(),
            NodeReads {
                ok: 3,
                failed: 6,
                last_error: Some("no answer after 5s".into()),
            },
        );
        let m = c.missing_nodes();
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].0, "proxybench-2");
    }

    #[test]
    fn quantities() {
        assert_eq!(parse_quantity("250m"), Some(0.25));
        assert_eq!(parse_quantity("123456789n"), Some(0.123456789));
        assert_eq!(parse_quantity("2"), Some(2.0));
        assert_eq!(parse_quantity("64Mi"), Some(64.0 * 1048576.0));
        assert_eq!(parse_quantity("1k"), Some(1000.0));
        assert_eq!(parse_quantity("1e3"), Some(1000.0));
        assert_eq!(parse_quantity("x"), None);
        assert_eq!(parse_quantity("Mi"), None);
    }
}
