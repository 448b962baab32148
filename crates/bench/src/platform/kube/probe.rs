//! The data-plane probe of a cluster action (`apply`/`delete` with `probe`, each step of a
//! templated `grow`): while the action runs, every pod the probe's selector matches is asked on
//! its own (at its pod IP, or through a port-forward of its own when this machine does not
//! reach the pod network) every `every`, each request on a new connection as a new client's,
//! until `consecutive` answers in a row carry the expected status. Pods are listed again every
//! [`RELIST`]: one that appears (scaled up) is probed from then on, one that goes away before it
//! was stable is recorded as gone, not as a failure of the gateway.

mod ask;

use super::{platform, KubeStage, POD_PATH_ENV};
use crate::error::LoadProblem;
use crate::error::StackError;
use crate::platform::Applied;
use ask::{Asked, Asker};
use k8s::{Cluster, PodPath, PodPort};
use model::Event;
use model::{ProbeRecord, ReplicaProbe};
use scenario::ProbeSpec;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the probe lists the selector's pods again (new replicas, gone ones).
const RELIST: Duration = Duration::from_millis(100);

/// What one action's probe asks, resolved against the stage: the pods, the port, the request.
#[derive(Debug, Clone)]
pub(super) struct ProbePlan {
    namespace: String,
    selector: String,
    port: u16,
    scheme: String,
    host: Option<String>,
    path: String,
    status: u16,
    consecutive: u32,
    every: Duration,
    timeout: Duration,
    via: PodPath,
}

impl ProbePlan {
    /// The request as the record shows it (`http://r7.example:8080/r7 -> 200`).
    fn request(&self) -> String {
        format!(
            "{}://{}:{}{} -> {}",
            self.scheme,
            self.host.as_deref().unwrap_or("POD_IP"),
            self.port,
            self.path,
            self.status
        )
    }
}

impl KubeStage {
    /// Resolves `spec` (its `host` and `path` already rendered) for an action in `action_ns`:
    /// the selector (the run's proxy pods by default), the namespace (the probe's, else the
    /// action's, else the run's), the port (the proxy's first plain listener by default) and
    /// how this machine reaches the pods (found at the first pod when the run deployed no
    /// proxy).
    pub(super) fn probe_plan(
        &mut self,
        spec: &ProbeSpec,
        action_ns: Option<&str>,
    ) -> Result<ProbePlan, StackError> {
        let own = spec.selector.is_none();
        let selector = spec
            .selector
            .clone()
            .unwrap_or_else(|| self.role_selector(super::PROXY));
        let namespace = match (&spec.namespace, own) {
            (Some(n), _) => n.clone(),
            (None, true) => self.namespace.clone(),
            (None, false) => action_ns.unwrap_or(&self.namespace).to_string(),
        };
        let port = match spec.port {
            Some(p) => p,
            None => crate::platform::Stage::listener_port(self, false)
                .ok_or_else(|| platform("probe: the proxy has no plain HTTP listener"))?,
        };
        let via = match self.pod_path {
            Some(p) => p,
            None if std::env::var(POD_PATH_ENV).is_ok_and(|v| v == "port-forward") => {
                PodPath::PortForward
            }
            None => {
                let first = self
                    .cluster
                    .pods(&namespace, Some(&selector))?
                    .into_iter()
                    .filter(|p| !p.deleting && p.phase == "Running")
                    .find_map(|p| p.ip);
                let p = match first {
                    Some(ip) => self
                        .cluster
                        .detect_pod_path(ip, port, Duration::from_secs(2)),
                    None => PodPath::PodIp,
                };
                self.pod_path = Some(p);
                p
            }
        };
        Ok(ProbePlan {
            namespace,
            selector,
            port,
            scheme: spec.scheme.clone(),
            host: spec.host.clone(),
            path: spec.request_path().to_string(),
            status: spec.expected(),
            consecutive: spec.consecutive,
            every: spec.every.0,
            timeout: spec.timeout.0,
            via,
        })
    }
}

/// Runs `act` (the action: apply, reload, wait) while `plan` probes every replica, from `t0`
/// (the action's start, taken just before the probes begin); returns what `act` returned and
/// the record. `keep_going` false (the loads ended) stops the probes early.
pub(super) fn probed<R>(
    cluster: &Cluster,
    plan: &ProbePlan,
    keep_going: &dyn Fn() -> bool,
    act: impl FnOnce(Instant) -> R,
) -> (R, Instant, Vec<ReplicaProbe>, Option<String>) {
    // The pods and their addresses (port-forwards opened) before the action starts, so the
    // first requests go out with it.
    let first = list(cluster, plan);
    let cancel = AtomicBool::new(false);
    let acted = AtomicBool::new(false);
    let t0 = Instant::now();
    let (cancel_r, acted_r) = (&cancel, &acted);
    std::thread::scope(|s| {
        let coord = s.spawn(move || coordinate(cluster, plan, t0, first, cancel_r, acted_r));
        let r = act(t0);
        acted.store(true, Ordering::SeqCst);
        while !coord.is_finished() {
            if !keep_going() {
                cancel.store(true, Ordering::SeqCst);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let (replicas, error) = coord
            .join()
            .unwrap_or_else(|_| (Vec::new(), Some("the probe panicked".into())));
        (r, t0, replicas, error)
    })
}

/// A running pod the probe could not reach at its port (no address to connect to could be
/// made: its port-forward could not be opened): its name, address and why.
#[derive(Debug, Clone)]
struct Unreached {
    pod: String,
    addr: String,
    why: String,
}

/// The running pods the plan's selector matches, with where this machine reaches their port
/// (a port-forward is opened here); a pod that cannot be reached is in the second list, with
/// why, and its record says so: it is never left out.
fn list(cluster: &Cluster, plan: &ProbePlan) -> Result<(Vec<PodPort>, Vec<Unreached>), k8s::Error> {
    let pods = cluster.pods(&plan.namespace, Some(&plan.selector))?;
    Ok(reach(cluster, plan, pods.iter().filter(|p| !p.deleting)))
}

/// Where this machine reaches each running pod of `pods` with an IP at the plan's port, and the
/// ones it cannot reach, with why.
fn reach<'a>(
    cluster: &Cluster,
    plan: &ProbePlan,
    pods: impl Iterator<Item = &'a k8s::PodInfo>,
) -> (Vec<PodPort>, Vec<Unreached>) {
    let (mut out, mut not) = (Vec::new(), Vec::new());
    for p in pods {
        let Some(ip) = p.ip.filter(|_| p.phase == "Running") else {
            continue;
        };
        match cluster.pod_port(&plan.namespace, &p.name, ip, plan.port, plan.via) {
            Ok(pp) => out.push(pp),
            Err(e) => not.push(Unreached {
                pod: p.name.clone(),
                addr: SocketAddr::new(ip, plan.port).to_string(),
                why: format!(
                    "its port could not be reached from here ({}): {e}",
                    plan.via
                ),
            }),
        }
    }
    (out, not)
}

/// One replica's probe thread, with its stop flag (set when the pod is gone).
struct Running {
    addr: SocketAddr,
    gone: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Asked>,
    port: PodPort,
}

/// Starts probes, lists the pods again every [`RELIST`] (probing new ones, stopping gone
/// ones), and ends when every probe has ended and the action is done, or at the timeout.
fn coordinate(
    cluster: &Cluster,
    plan: &ProbePlan,
    t0: Instant,
    first: Result<(Vec<PodPort>, Vec<Unreached>), k8s::Error>,
    cancel: &AtomicBool,
    acted: &AtomicBool,
) -> (Vec<ReplicaProbe>, Option<String>) {
    let mut p = Probes {
        plan,
        t0,
        deadline: t0 + plan.timeout,
        stop_all: Arc::new(AtomicBool::new(false)),
        running: BTreeMap::new(),
        unreached: BTreeMap::new(),
        unreached_gone: BTreeMap::new(),
        last_list_error: None,
    };
    match first {
        Ok((pods, not)) => {
            p.start(pods);
            p.unreached
                .extend(not.into_iter().map(|u| (u.pod.clone(), u)));
        }
        Err(e) => p.last_list_error = Some(e.to_string()),
    }
    let mut next_list = Instant::now() + RELIST;
    let mut listed_after = false;
    loop {
        let now = Instant::now();
        if cancel.load(Ordering::SeqCst) || now >= p.deadline {
            p.stop_all.store(true, Ordering::SeqCst);
        }
        let done = p.running.values().all(|r| r.handle.is_finished());
        // Once the action is done, the pods are listed once more (a replica that came at its
        // end is probed too) before the probe may end.
        let acted_now = acted.load(Ordering::SeqCst);
        if done && ((acted_now && listed_after) || p.stop_all.load(Ordering::SeqCst)) {
            break;
        }
        if (now >= next_list || (acted_now && !listed_after)) && !p.stop_all.load(Ordering::SeqCst)
        {
            listed_after = acted_now;
            next_list = now + RELIST;
            p.relist(cluster);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    p.finish()
}

/// What [`coordinate`] keeps while a probe runs: the replicas being asked, those it could not
/// reach (tried again at each listing) and those of them that went away before it could.
struct Probes<'a> {
    /// What is probed.
    plan: &'a ProbePlan,
    /// When the action started: the probes' times are from it.
    t0: Instant,
    /// When every probe stops (`t0` and the plan's timeout).
    deadline: Instant,
    /// Set to stop every probe (cancelled or past the deadline).
    stop_all: Arc<AtomicBool>,
    /// The replicas being asked, by pod.
    running: BTreeMap<String, Running>,
    /// Pods the probe could not reach yet.
    unreached: BTreeMap<String, Unreached>,
    /// Unreached pods that went away.
    unreached_gone: BTreeMap<String, Unreached>,
    /// The last listing's error, cleared by a listing that worked.
    last_list_error: Option<String>,
}

impl Probes<'_> {
    /// Starts a probe thread for each pod not probed yet.
    fn start(&mut self, pods: Vec<PodPort>) {
        let (t0, deadline) = (self.t0, self.deadline);
        for pp in pods {
            if self.running.contains_key(&pp.pod) {
                continue;
            }
            let gone = Arc::new(AtomicBool::new(false));
            let handle = match Asker::new(self.plan, pp.addr()) {
                Ok(asker) => {
                    let (g, all) = (gone.clone(), self.stop_all.clone());
                    std::thread::spawn(move || asker.until_stable(t0, deadline, &g, &all))
                }
                Err(e) => std::thread::spawn(move || Asked::failed(e.to_string())),
            };
            self.running.insert(
                pp.pod.clone(),
                Running {
                    addr: pp.addr(),
                    gone,
                    handle,
                    port: pp,
                },
            );
        }
    }

    /// Lists the pods again: the probes of pods gone are told so, and new replicas
    /// (scaled up, replacements) and ones not reached yet are probed from now on.
    fn relist(&mut self, cluster: &Cluster) {
        let plan = self.plan;
        let pods = match cluster.pods(&plan.namespace, Some(&plan.selector)) {
            Ok(pods) => pods,
            Err(e) => {
                self.last_list_error = Some(e.to_string());
                return;
            }
        };
        let here: BTreeMap<&str, &k8s::PodInfo> = pods
            .iter()
            .filter(|p| !p.deleting)
            .map(|p| (p.name.as_str(), p))
            .collect();
        for (name, r) in &self.running {
            if !here.contains_key(name.as_str()) {
                r.gone.store(true, Ordering::SeqCst);
            }
        }
        let went: Vec<String> = self
            .unreached
            .keys()
            .filter(|n| !here.contains_key(n.as_str()))
            .cloned()
            .collect();
        for n in went {
            if let Some(u) = self.unreached.remove(&n) {
                self.unreached_gone.insert(n, u);
            }
        }
        let (ports, not) = reach(
            cluster,
            plan,
            here.values()
                .filter(|p| !self.running.contains_key(&p.name))
                .copied(),
        );
        for p in &ports {
            self.unreached.remove(&p.pod);
        }
        self.unreached
            .extend(not.into_iter().map(|u| (u.pod.clone(), u)));
        self.start(ports);
        self.last_list_error = None;
    }

    /// Every replica's record, sorted by pod, and why the probe failed as a whole.
    fn finish(self) -> (Vec<ReplicaProbe>, Option<String>) {
        let plan = self.plan;
        let mut out = Vec::new();
        let mut unstable = None;
        for (pod, r) in self.running {
            let rec = asked(pod, r, self.t0);
            if let (Some(w), None, false) = (&rec.error, &unstable, rec.unreached) {
                unstable = Some(format!(
                    "pod {} was not stable within {:?} (last: {w})",
                    rec.pod, plan.timeout
                ));
            }
            out.push(rec);
        }
        // Pods that ran and could not be reached are recorded as such; those that went away
        // before they could be, as gone.
        for (gone, list) in [(false, self.unreached), (true, self.unreached_gone)] {
            for (pod, u) in list {
                out.push(ReplicaProbe {
                    pod,
                    addr: u.addr,
                    gone,
                    error: (!gone).then_some(u.why),
                    unreached: !gone,
                    ..ReplicaProbe::default()
                });
            }
        }
        out.sort_by(|a, b| a.pod.cmp(&b.pod));
        let mut error = probe_error(&out, unstable);
        if out.is_empty() {
            error = Some(match self.last_list_error {
                Some(e) => format!("listing {} in {}: {e}", plan.selector, plan.namespace),
                None => format!(
                    "no running pod matched {} in {} (or none could be reached)",
                    plan.selector, plan.namespace
                ),
            });
        }
        (out, error)
    }
}

/// A replica's record once its probe thread has ended: its times from `t0`, and why it was
/// not stable (not reached at all, or its last answer), with its port-forward's error.
fn asked(pod: String, r: Running, t0: Instant) -> ReplicaProbe {
    let forward = r.port.forward_error();
    let a = r
        .handle
        .join()
        .unwrap_or_else(|_| Asked::failed("the probe thread panicked".into()));
    let gone = a.stable.is_none() && r.gone.load(Ordering::SeqCst);
    // No request got an answer: the pod's port was never reached, and nothing is known of
    // what it serves (not a "not stable" of a replica that answered otherwise).
    let unreached = !gone && !a.answered;
    let why = (a.stable.is_none() && !gone).then(|| {
        let mut w = if unreached {
            match a.requests {
                0 => format!("no request could be sent: {}", a.last),
                n => format!(
                    "not reached: none of {n} request(s) answered (last: {})",
                    a.last
                ),
            }
        } else {
            a.last.clone()
        };
        if let Some(f) = forward {
            w = format!("{w} (port-forward: {f})");
        }
        w
    });
    ReplicaProbe {
        pod,
        addr: r.addr.to_string(),
        first_ms: a.first.map(|t| ms(t0, t)),
        ready_ms: a.ready.map(|t| ms(t0, t)),
        stable_ms: a.stable.map(|t| ms(t0, t)),
        requests: a.requests,
        interval_us: a.interval_us(),
        request_us: a.request_us(),
        gone,
        error: why,
        unreached,
    }
}

/// Why a probe failed as a whole, from its replicas: the ones it did not reach (its evidence
/// covers the others only), then the first one not stable (`unstable`).
fn probe_error(replicas: &[ReplicaProbe], unstable: Option<String>) -> Option<String> {
    let here = replicas.iter().filter(|r| !r.gone).count();
    let not: Vec<String> = replicas
        .iter()
        .filter(|r| r.unreached && !r.gone)
        .map(|r| format!("{}: {}", r.pod, r.error.as_deref().unwrap_or("not reached")))
        .collect();
    let partial = (!not.is_empty()).then(|| {
        format!(
            "not measurable: the probe reached {} of {here} replicas ({})",
            here - not.len(),
            not.join("; ")
        )
    });
    match (partial, unstable) {
        (Some(p), Some(u)) => Some(format!("{p}; {u}")),
        (p, u) => p.or(u),
    }
}

fn ms(t0: Instant, t: Instant) -> f64 {
    t.saturating_duration_since(t0).as_secs_f64() * 1e3
}

/// The mixed window of a record's replicas: from the first replica's first expected answer to
/// the last one's, when every replica still there answered as expected.
pub(super) fn mixed_ms(replicas: &[ReplicaProbe]) -> Option<f64> {
    let firsts: Vec<f64> = replicas
        .iter()
        .filter(|r| !r.gone)
        .map(|r| r.first_ms)
        .collect::<Option<Vec<f64>>>()?;
    let lo = firsts.iter().copied().reduce(f64::min)?;
    let hi = firsts.iter().copied().reduce(f64::max)?;
    Some(hi - lo)
}

/// Makes the record of a probed action.
pub(super) fn record(
    plan: &ProbePlan,
    (t_s, action, detail): (f64, &str, String),
    condition_ms: Option<f64>,
    replicas: Vec<ReplicaProbe>,
    error: Option<String>,
) -> ProbeRecord {
    ProbeRecord {
        t_s,
        action: action.to_string(),
        detail,
        request: plan.request(),
        path: plan.via.as_str().to_string(),
        every_us: plan.every.as_secs_f64() * 1e6,
        condition_ms,
        mixed_ms: mixed_ms(&replicas),
        replicas,
        error,
    }
}

impl KubeStage {
    /// An `apply` or `delete` with a `probe`: the manifest applied (or deleted) and its `wait`
    /// awaited while every data-plane replica is probed; one event (failed when the action or
    /// the probe failed) and the record.
    pub(super) fn probed_action(
        &mut self,
        action: &scenario::Action,
        spec: &ProbeSpec,
        keep_going: &dyn Fn() -> bool,
    ) -> Applied {
        let manifest = match action {
            scenario::Action::Apply { file, wait, .. } => Some((file, wait, true)),
            scenario::Action::Delete { file, wait, .. } => Some((file, wait, false)),
            _ => None,
        };
        let ns = action.namespace().unwrap_or(&self.namespace).to_string();
        let in_ns = action
            .namespace()
            .map(|n| format!(" in {n}"))
            .unwrap_or_default();
        let name = match (manifest, action) {
            (Some((file, _, _)), _) => format!("{}{in_ns}", file.display()),
            (None, scenario::Action::RolloutRestart { target, .. })
            | (None, scenario::Action::Scale { target, .. }) => format!("{target}{in_ns}"),
            _ => action.kind().to_string(),
        };
        let origin = self.served.origin;
        let event = |t0: Instant, detail: String, error: Option<String>| Event {
            t_s: t0.duration_since(origin).as_secs_f64(),
            action: action.kind().to_string(),
            detail,
            duration_ms: t0.elapsed().as_secs_f64() * 1e3,
            error,
            limit: false,
        };
        let plan = match self.probe_plan(spec, action.namespace()) {
            Ok(p) => p,
            Err(e) => {
                return Applied {
                    events: vec![event(Instant::now(), name, Some(e.to_string()))],
                    ..Applied::default()
                }
            }
        };
        let cluster = self.cluster.clone();
        let (run_ns, act_name) = (self.namespace.clone(), name.clone());
        let ((detail, r), t0, replicas, perr) = probed(&cluster, &plan, keep_going, |t0| {
            match manifest {
                Some((file, wait, apply)) => super::run::manifest_action(
                    &cluster,
                    &ns,
                    (file, apply, wait.as_ref()),
                    t0,
                    act_name,
                ),
                // A rollout or a scaling: the replicas that come are probed as they appear,
                // the ones that go are recorded as gone.
                None => {
                    let (d, r) = super::run::cluster_action(&cluster, &run_ns, action, keep_going);
                    (d, r.map(|()| None))
                }
            }
        });
        let t_s = t0.duration_since(origin).as_secs_f64();
        let (condition_ms, error) = match r {
            Ok(c) => (c, perr.clone()),
            Err(e) => (None, Some(e.to_string())),
        };
        let rec = record(
            &plan,
            (t_s, action.kind(), name),
            condition_ms,
            replicas,
            perr,
        );
        let detail = format!("{detail}; {}", summary(&rec));
        Applied {
            events: vec![event(t0, detail, error)],
            probes: vec![rec],
            ..Applied::default()
        }
    }
}

/// One line on a record for the event's detail: replicas stable, the slowest first answer
/// and stable time, the mixed window.
pub(super) fn summary(r: &ProbeRecord) -> String {
    let max = |f: fn(&ReplicaProbe) -> Option<f64>| {
        r.replicas
            .iter()
            .filter_map(f)
            .reduce(f64::max)
            .map_or("-".to_string(), |v| format!("{v:.1} ms"))
    };
    let stable = r.replicas.iter().filter(|x| x.stable_ms.is_some()).count();
    let gone = r.replicas.iter().filter(|x| x.gone).count();
    let not = match r.shortfall() {
        Some(s) => format!(
            "; {} not reached ({}); the times below are of the {} reached only",
            s.missing.len(),
            s.detail(),
            s.covered()
        ),
        None => String::new(),
    };
    format!(
        "probe ({}) {}: {stable} of {} replicas stable{}{not}, first answer max {}, stable max \
         {}, mixed window {}",
        r.path,
        r.request,
        r.replicas.len(),
        if gone > 0 {
            format!(" ({gone} gone)")
        } else {
            String::new()
        },
        max(|x| x.first_ms),
        max(|x| x.stable_ms),
        r.mixed_ms.map_or("-".to_string(), |v| format!("{v:.1} ms"))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica(first: Option<f64>, gone: bool) -> ReplicaProbe {
        ReplicaProbe {
            first_ms: first,
            gone,
            ..ReplicaProbe::default()
        }
    }

    /// A replica the probe never reached is in the record as such, with why: the action's
    /// error says the probe covered the others only, the event's line says how many were not
    /// reached, and the mixed window is unknown (never "2 of 2 stable" of the two it reached).
    #[test]
    fn a_replica_not_reached_is_recorded_and_makes_the_probe_partial() {
        let ok = |pod: &str, first: f64| ReplicaProbe {
            pod: pod.into(),
            first_ms: Some(first),
            ready_ms: Some(first),
            stable_ms: Some(first + 2.0),
            requests: 9,
            ..ReplicaProbe::default()
        };
        let not = ReplicaProbe {
            pod: "gw-c".into(),
            requests: 7,
            error: Some(
                "not reached: none of 7 request(s) answered (last: connect: connection refused)"
                    .into(),
            ),
            unreached: true,
            ..ReplicaProbe::default()
        };
        let replicas = vec![ok("gw-a", 4.0), ok("gw-b", 6.0), not];
        let err = probe_error(&replicas, None).unwrap();
        assert_eq!(
            err,
            "not measurable: the probe reached 2 of 3 replicas (gw-c: not reached: none of 7 \
             request(s) answered (last: connect: connection refused))"
        );
        assert_eq!(mixed_ms(&replicas), None);
        let rec = ProbeRecord {
            action: "apply".into(),
            request: "http://gw.example:8080/ -> 200".into(),
            path: "pod IP".into(),
            mixed_ms: mixed_ms(&replicas),
            replicas,
            error: Some(err),
            ..ProbeRecord::default()
        };
        let s = rec.shortfall().unwrap();
        assert_eq!(s.coverage(), "2 of 3 replicas");
        let line = summary(&rec);
        assert!(
            line.contains("2 of 3 replicas stable; 1 not reached (gw-c: not reached: none of 7"),
            "{line}"
        );
        assert!(line.contains("of the 2 reached only"), "{line}");
        // A gone replica is neither reached nor missing; every replica reached: no shortfall.
        let all = ProbeRecord {
            replicas: vec![ok("gw-a", 4.0), replica(None, true)],
            ..ProbeRecord::default()
        };
        assert_eq!(all.shortfall(), None);
        assert_eq!(probe_error(&all.replicas, None), None);
        assert!(!summary(&all).contains("not reached"));
    }

    /// The mixed window runs from the first replica's first expected answer to the last's; a
    /// gone replica does not count, and one that never answered leaves it unknown.
    #[test]
    fn the_mixed_window_spans_the_replicas_first_answers() {
        let r = [replica(Some(4.0), false), replica(Some(11.5), false)];
        assert_eq!(mixed_ms(&r), Some(7.5));
        let r = [
            replica(Some(4.0), false),
            replica(None, true),
            replica(Some(6.0), false),
        ];
        assert_eq!(mixed_ms(&r), Some(2.0));
        let r = [replica(Some(4.0), false), replica(None, false)];
        assert_eq!(mixed_ms(&r), None);
        assert_eq!(mixed_ms(&[]), None);
    }
}
