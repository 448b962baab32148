//! Changes to a running case: reloads, scaling and stopping proxy replicas, deleting and scaling
//! backends.

use super::backends::{self};
use super::{platform, KubeStage, BOUND, PROXY};
use crate::error::StackError;
use model::ReloadRecord;
use proxy::RenderContext;
use scenario::{RemoveMode, StopSpec};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// How long a drained scale-down waits for the proxy pods' old workers to exit after the reload
/// that took the leaving backends out: until then a request could still reach one, so past it
/// the step fails.
const OLD_WORKERS_BOUND: Duration = Duration::from_secs(10);

/// The same wait in a case that holds long-lived connections, whose old workers live as long as
/// those do: the short requests in flight at the reload are through by then, and the backends'
/// drain ends the connections the old workers still hold (with a close frame or `grpc-status`).
const OLD_WORKERS_WITH_STREAMS: Duration = Duration::from_secs(2);

/// `GET /generation` of a pod's admin listener, at `sa` (its pod IP, or its port-forward). The
/// answer is read to its Content-Length, not to the connection's close: through a port-forward
/// the close reaches here about a second after the pod's, longer than `timeout`.
fn generation_at(sa: SocketAddr, timeout: Duration) -> std::io::Result<u64> {
    use std::io::{Error, ErrorKind};
    let at = |e: Error| Error::new(e.kind(), format!("{sa}: {e}"));
    let mut s = TcpStream::connect_timeout(&sa, timeout).map_err(at)?;
    s.set_read_timeout(Some(timeout)).map_err(at)?;
    s.write_all(b"GET /generation HTTP/1.0\r\nHost: admin\r\n\r\n")
        .map_err(at)?;
    let mut raw = Vec::new();
    let mut chunk = [0u8; 512];
    loop {
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok());
            if length.is_some_and(|n| raw.len() >= end + 4 + n) {
                break;
            }
        }
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(at(e)),
        }
    }
    let buf = String::from_utf8_lossy(&raw);
    let body = buf.split("\r\n\r\n").nth(1).unwrap_or_default();
    body.trim().parse().map_err(|_| {
        Error::new(
            ErrorKind::InvalidData,
            format!("{sa}: no generation in {body:?}"),
        )
    })
}

/// How one pod's wait for a new generation ended.
enum Served {
    /// Its admin listener served the generation this long (ms) after the reload began.
    At(f64),
    /// It did not within 30 s of the reload's start.
    TimedOut(String),
    /// Its reload failed, or its admin listener could not be reached: the whole reason.
    Failed(String),
    /// The port-forward it is asked through died, with this reason.
    ForwardDied(String),
}

/// The new configuration (`text`) given to proxy pod `pod`'s reload script by exec; why not
/// when the exec fails or the script exits non-zero.
fn exec_reload(
    cluster: &k8s::Cluster,
    ns: &str,
    pod: &str,
    reload: &str,
    text: &[u8],
) -> Result<(), StackError> {
    let r = cluster.exec(
        ns,
        pod,
        None,
        &["/bin/sh", "-c", reload],
        Some(text),
        Duration::from_secs(30),
    );
    match r {
        Ok(o) if o.code == 0 => Ok(()),
        Ok(o) => Err(StackError::Reload(format!(
            "{pod}: reload exited {}: {}",
            o.code,
            o.text().trim()
        ))),
        Err(e) => Err(StackError::Api(e)),
    }
}

/// Asks the admin listener at `sa` every 5 ms until it serves `generation` (at most 30 s from
/// `t0`, the reload's start), watching the port-forward `port` it is reached through, if any.
fn served_at(sa: SocketAddr, generation: u64, t0: Instant, port: Option<&k8s::PodPort>) -> Served {
    loop {
        if generation_at(sa, Duration::from_millis(500)).is_ok_and(|g| g >= generation) {
            return Served::At(t0.elapsed().as_secs_f64() * 1e3);
        }
        if let Some(why) = port.and_then(k8s::PodPort::forward_error) {
            return Served::ForwardDied(why);
        }
        if t0.elapsed() > Duration::from_secs(30) {
            return Served::TimedOut(format!("generation {generation} not served within 30 s"));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

impl KubeStage {
    /// Renders the next generation and writes it into every proxy pod at once, each reload timed
    /// to the moment that pod's admin listener answers the new generation. The pods are
    /// reloaded and watched side by side, so a pod that does not answer (its node lost) delays
    /// neither another pod's reload nor its timing.
    pub(super) fn reload_all(&mut self) -> (Vec<ReloadRecord>, Option<StackError>) {
        let Some(cfg) = self.served.config.clone() else {
            return (Vec::new(), Some(StackError::NoProxy));
        };
        self.served.generation += 1;
        let generation = self.served.generation;
        let rendered = match self.render(&cfg) {
            Ok(r) => r,
            Err(e) => return (Vec::new(), Some(e)),
        };
        let Some(reload) = self.scripts.as_ref().map(|s| s.reload.clone()) else {
            return (Vec::new(), Some(StackError::NoProxy));
        };
        let pods = match self.proxy_pods() {
            Ok(p) => p,
            Err(e) => return (Vec::new(), Some(e)),
        };
        // Forwards to pods that are gone are closed.
        self.reach
            .retain(|(pod, _), _| pods.iter().any(|p| &p.name == pod));
        let t0 = Instant::now();
        let t_s = t0.duration_since(self.served.origin).as_secs_f64();
        let mut out: Vec<ReloadRecord> = pods
            .iter()
            .map(|p| ReloadRecord::begun(&p.name, generation, t_s))
            .collect();
        // Every pod's admin listener, reached before the reload (a port-forward opens at once
        // and connects on first use); then each pod by its own thread: the new configuration by
        // exec, and its admin listener asked until it serves the new generation. A port-forward
        // that dies is opened once more and the pod asked again (no second exec); when that one
        // dies too, the reload fails with its reason.
        let mut pending: Vec<(usize, Result<SocketAddr, StackError>)> = pods
            .iter()
            .enumerate()
            .map(|(i, p)| (i, self.reach_port(p, self.admin_port)))
            .collect();
        for again in [false, true] {
            let waits: Vec<Served> = std::thread::scope(|s| {
                let (cluster, ns) = (&self.cluster, &self.namespace);
                let (reload, text) = (&reload, rendered.text.as_bytes());
                let running: Vec<_> = pending
                    .iter()
                    .map(|(i, admin)| {
                        let (p, port) = (&pods[*i], self.forward(&pods[*i].name, self.admin_port));
                        s.spawn(move || {
                            if !again {
                                if let Err(why) = exec_reload(cluster, ns, &p.name, reload, text) {
                                    return Served::Failed(why.to_string());
                                }
                            }
                            match admin {
                                Ok(a) => served_at(*a, generation, t0, port),
                                Err(e) => Served::Failed(e.to_string()),
                            }
                        })
                    })
                    .collect();
                running
                    .into_iter()
                    .map(|h| {
                        h.join()
                            .unwrap_or_else(|_| Served::Failed("the reload panicked".into()))
                    })
                    .collect()
            });
            let mut died = Vec::new();
            for ((i, _), w) in pending.iter().zip(waits) {
                let (i, name) = (*i, &pods[*i].name);
                match w {
                    Served::At(ms) => out[i].served_ms = Some(ms),
                    Served::Failed(why) => out[i].error = Some(why),
                    Served::TimedOut(why) => out[i].error = Some(format!("{name}: {why}")),
                    Served::ForwardDied(why) if again => {
                        out[i].error = Some(format!(
                            "{name}: its port-forward died again after one reconnect: {why}"
                        ));
                    }
                    Served::ForwardDied(why) => died.push((i, why)),
                }
            }
            pending = self.reopen(&pods, died);
            if pending.is_empty() {
                break;
            }
        }
        let err = out
            .iter()
            .find_map(|r| r.error.clone())
            .map(StackError::Reload);
        (out, err)
    }

    /// The admin listeners of the pods whose port-forward died (`died`: index and why),
    /// reached once more, or why not.
    fn reopen(
        &mut self,
        pods: &[k8s::PodInfo],
        died: Vec<(usize, String)>,
    ) -> Vec<(usize, Result<SocketAddr, StackError>)> {
        died.into_iter()
            .map(|(i, why)| {
                let admin = self.reach_port(&pods[i], self.admin_port);
                let admin = admin.map_err(|e| {
                    StackError::Reload(format!(
                        "{}: its port-forward died ({why}) and could not be reopened: {e}",
                        pods[i].name
                    ))
                });
                (i, admin)
            })
            .collect()
    }

    /// Scales the proxy Deployment to `to`, one replica per step waiting for Ready when growing;
    /// when shrinking, the pods the Deployment picks get their grace (graceful), 1 s (fast) or 0
    /// (kill).
    pub(super) fn scale_replicas(&mut self, to: u32, stop: StopSpec) -> Result<String, StackError> {
        let ns = self.namespace.clone();
        let proxy = self.name(PROXY);
        let r = self.cluster.deployment_replicas(&ns, &proxy)?;
        let from = r.desired as u32;
        if to >= from {
            for n in from + 1..=to {
                self.cluster.scale_deployment(&ns, &proxy, n as i32)?;
                self.cluster
                    .wait_deployment_ready(&ns, &proxy, n as i32, BOUND)?;
            }
            return Ok(format!("{from} -> {to}"));
        }
        let before: Vec<String> = self.proxy_pods()?.into_iter().map(|p| p.name).collect();
        self.cluster.scale_deployment(&ns, &proxy, to as i32)?;
        if stop != StopSpec::Graceful {
            let grace = Duration::from_secs(if stop == StopSpec::Kill { 0 } else { 1 });
            let t = Instant::now();
            let mut victims = Vec::new();
            while victims.len() < (from - to) as usize && t.elapsed() < BOUND {
                let all = self.cluster.pods(&ns, Some(&self.role_selector(PROXY)))?;
                victims = all
                    .into_iter()
                    .filter(|p| p.deleting && before.contains(&p.name))
                    .collect();
                std::thread::sleep(Duration::from_millis(20));
            }
            for v in &victims {
                self.cluster.delete_pod(&ns, &v.name, Some(grace))?;
            }
        }
        self.cluster
            .wait_deployment_ready(&ns, &proxy, to as i32, BOUND)?;
        // The action lasts until the removed pods have exited: their last requests (and any
        // failure of them) fall inside its span, as a local replica's stop does.
        let left: Vec<String> = self
            .proxy_pods()?
            .into_iter()
            .filter(|p| !p.deleting)
            .map(|p| p.name)
            .collect();
        let gone: Vec<String> = before.into_iter().filter(|n| !left.contains(n)).collect();
        for g in &gone {
            self.cluster.wait_pod_gone(&ns, g, None, BOUND)?;
        }
        self.wait_logs_ended(&gone)?;
        Ok(format!("{from} -> {to} ({stop:?})").to_lowercase())
    }

    /// Deletes one proxy pod (the named one, or the newest): its own grace period (graceful),
    /// 1 s (fast) or 0 (kill). The Deployment replaces it.
    pub(super) fn stop_replica(
        &mut self,
        name: Option<&str>,
        stop: StopSpec,
    ) -> Result<String, StackError> {
        let mut pods = self.proxy_pods()?;
        pods.sort_by(|a, b| a.created.cmp(&b.created));
        let p = match name {
            Some(n) => pods
                .into_iter()
                .find(|p| p.name == n)
                .ok_or_else(|| StackError::NoSuchReplica(n.into()))?,
            None => pods.pop().ok_or(StackError::NoReplica)?,
        };
        let grace = match stop {
            StopSpec::Graceful => None,
            StopSpec::Fast => Some(Duration::from_secs(1)),
            StopSpec::Kill => Some(Duration::ZERO),
        };
        self.cluster.delete_pod(&self.namespace, &p.name, grace)?;
        // As a local stop waits for the process: the action lasts until the pod's proxy exited.
        self.cluster
            .wait_pod_gone(&self.namespace, &p.name, None, BOUND)?;
        self.wait_logs_ended(std::slice::from_ref(&p.name))?;
        Ok(format!("{} ({stop:?})", p.name).to_lowercase())
    }

    /// Waits until the followed logs of `pods` have ended: their containers exited. A pod
    /// deleted with `gracePeriodSeconds=0` leaves the API at once, but the kubelet stops its
    /// container a second or more later, and that moment (its connections closing) is what
    /// the action's span must hold.
    fn wait_logs_ended(&self, pods: &[String]) -> Result<(), StackError> {
        let Some(f) = &self.followers else {
            return Ok(());
        };
        let t = Instant::now();
        loop {
            let running: Vec<String> = f
                .snapshot()
                .into_iter()
                .filter(|l| pods.contains(&l.pod) && !l.complete && l.error.is_none())
                .map(|l| l.pod)
                .collect();
            if running.is_empty() {
                return Ok(());
            }
            if t.elapsed() > BOUND {
                return Err(platform(format!(
                    "the logs of {} had not ended {BOUND:?} after their pods left the API \
                     (their containers still running?)",
                    running.join(", ")
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Deletes the pod of backend `b` (`GROUP-I`: the I-th pod the group had, in order of
    /// creation, or a pod name): at once (`kill`) or with its grace period (drain).
    pub(super) fn delete_backend(&mut self, b: &str, kill: bool) -> Result<String, StackError> {
        let p = self.backends.resolve(&self.cluster, &self.namespace, b)?;
        if p.deleting {
            return Err(platform(format!(
                "backend {b}: its pod {} is already going",
                p.name
            )));
        }
        let grace = kill.then_some(Duration::ZERO);
        self.cluster.delete_pod(&self.namespace, &p.name, grace)?;
        Ok(format!("{b}: pod {}", p.name))
    }

    /// Scales a backend group's Deployment, waits for its pods, and reloads the proxy with the
    /// EndpointSlices' addresses. A scale-down removes the newest pods as the local stack removes
    /// the newest instances: drained ones leave the upstreams first (reload, the old workers
    /// gone) and only then get SIGTERM and drain; killed ones are killed first (through their
    /// control port) and the reload follows.
    pub(super) fn scale_backends(
        &mut self,
        group: &str,
        to: u32,
        remove: RemoveMode,
    ) -> (Result<String, StackError>, Vec<ReloadRecord>) {
        let (c, ns) = (self.cluster.clone(), self.namespace.clone());
        let from = match c.deployment_replicas(&ns, &self.backends.deployment_of(group)) {
            Ok(r) => r.desired.max(0) as u32,
            Err(e) => return (Err(StackError::from(e)), Vec::new()),
        };
        if self.external() {
            return self.scale_backends_behind_gateway(group, (from, to), remove);
        }
        if to >= from {
            if let Err(e) = self.backends.scale(&c, &ns, group, to) {
                return (Err(e), Vec::new());
            }
            let (rel, err) = self.reload_all();
            return (err.map_or(Ok(format!("{group}: {from} -> {to}")), Err), rel);
        }
        let kill = remove == RemoveMode::Kill;
        let gone = match self
            .backends
            .choose_leaving(&c, &ns, group, from - to, kill)
        {
            Ok(g) => g,
            Err(e) => return (Err(e), Vec::new()),
        };
        let how = format!("{remove:?}").to_lowercase();
        let detail = format!("{group}: {from} -> {to} ({how}: {})", gone.join(", "));
        let mut rel = Vec::new();
        let mut held = None;
        if !kill {
            let (r, err) = self.reload_all();
            rel = r;
            if let Some(e) = err {
                return (Err(e), rel);
            }
            let pods: Vec<String> = match self.proxy_pods() {
                Ok(p) => p.into_iter().map(|p| p.name).collect(),
                Err(e) => return (Err(e), rel),
            };
            // Long-lived connections keep an old generation running for as long as they last
            // (or until the drain timeout): short requests are through it within the shorter
            // bound, and the backends' drain then ends what it still holds, with a close.
            let bound = if self.long_lived {
                OLD_WORKERS_WITH_STREAMS
            } else {
                OLD_WORKERS_BOUND
            };
            match backends::wait_old_workers(&c, &ns, &pods, bound) {
                Ok(None) => {}
                Ok(Some(pod)) if self.long_lived => {
                    held = Some(format!(
                        "; old workers of pod {pod} still held long-lived connections {bound:?} \
                         after the reload, which the drain ends"
                    ));
                }
                Ok(Some(pod)) => {
                    return (
                        Err(platform(format!(
                            "pod {pod}: old nginx workers still running {bound:?} after the reload"
                        ))),
                        rel,
                    )
                }
                Err(e) => return (Err(e), rel),
            }
        }
        if let Err(e) = self.backends.scale(&c, &ns, group, to) {
            return (Err(e), rel);
        }
        if kill {
            let (r, err) = self.reload_all();
            rel = r;
            if let Some(e) = err {
                return (Err(e), rel);
            }
        }
        (Ok(detail + held.as_deref().unwrap_or_default()), rel)
    }

    /// The case's proxy is a gateway proxybench did not deploy (`[proxy] kind = "external"`).
    fn external(&self) -> bool {
        self.served
            .config
            .as_ref()
            .is_some_and(|c| c.external.is_some())
    }

    /// `scale_backends` behind a gateway proxybench did not deploy: the group's Deployment is
    /// scaled as a user's endpoints change (the leaving pods chosen first, newest first, killed
    /// through their control port with `kill`, else drained by their own termination), and once
    /// the new pods are Ready and in the EndpointSlices, or the removed ones gone, the gateway's
    /// reload command runs when it has one (its controller; one that follows EndpointSlices by
    /// itself needs none). What the gateway does with its connections meanwhile is what is
    /// measured.
    fn scale_backends_behind_gateway(
        &mut self,
        group: &str,
        (from, to): (u32, u32),
        remove: RemoveMode,
    ) -> (Result<String, StackError>, Vec<ReloadRecord>) {
        let (c, ns) = (self.cluster.clone(), self.namespace.clone());
        let mut detail = format!("{group}: {from} -> {to}");
        if to < from {
            let kill = remove == RemoveMode::Kill;
            match self
                .backends
                .choose_leaving(&c, &ns, group, from - to, kill)
            {
                Ok(gone) => {
                    let how = format!("{remove:?}").to_lowercase();
                    detail = format!("{detail} ({how}: {})", gone.join(", "));
                }
                Err(e) => return (Err(e), Vec::new()),
            }
        }
        if let Err(e) = self.backends.scale(&c, &ns, group, to) {
            return (Err(e), Vec::new());
        }
        let controller = self
            .served
            .config
            .as_ref()
            .and_then(|c| c.external.as_ref())
            .is_some_and(|e| !e.reload.is_empty());
        if !controller || self.attached.is_none() {
            return (Ok(detail), Vec::new());
        }
        self.served.generation += 1;
        let r = self.reload_attached();
        let err = r.error.clone().map(StackError::Reload);
        (
            err.map_or(
                Ok(format!("{detail}; generation {}", self.served.generation)),
                Err,
            ),
            vec![r],
        )
    }

    /// Runs the attached gateway's reload command as the next generation.
    pub(super) fn reload_attached(&mut self) -> ReloadRecord {
        let (generation, origin) = (self.served.generation, self.served.origin);
        let cfg = self.served.config.clone();
        let rendered = cfg
            .as_ref()
            .ok_or(StackError::NoProxy)
            .and_then(|c| Ok(self.driver.render(c, &RenderContext::default())?));
        let a = self
            .attached
            .as_mut()
            .expect("called with an attached proxy");
        match rendered {
            Ok(r) => a.reload(&r, generation, origin),
            Err(e) => ReloadRecord {
                error: Some(e.to_string()),
                ..ReloadRecord::begun(a.name(), generation, origin.elapsed().as_secs_f64())
            },
        }
    }
}
