//! Pods: list by selector, delete with a grace period, exec a command (stdin in, exit status and
//! output back), read logs, and the addresses a headless Service's EndpointSlices give.

use crate::cluster::Cluster;
use crate::error::{split, Error};
use crate::images::image_problem;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, AttachParams, DeleteParams, ListParams, LogParams, Patch, PatchParams};
use std::net::IpAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What a run needs to know of a pod at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodInfo {
    /// The pod's name.
    pub name: String,
    /// Its UID (a re-created pod of the same name differs).
    pub uid: String,
    /// `status.phase` (`Pending`, `Running`, `Succeeded`, `Failed`, `Unknown`).
    pub phase: String,
    /// The `Ready` condition is True.
    pub ready: bool,
    /// A deletion was requested (`metadata.deletionTimestamp` set): terminating.
    pub deleting: bool,
    /// `status.podIP` once assigned.
    pub ip: Option<IpAddr>,
    /// The node it is bound to (`spec.nodeName`) once scheduled: on a cluster of several nodes,
    /// where it runs.
    pub node: Option<String>,
    /// The sum of its containers' restart counts.
    pub restarts: i32,
    /// Its containers' names, in spec order.
    pub containers: Vec<String>,
    /// `metadata.creationTimestamp` (RFC 3339), for ordering.
    pub created: String,
    /// Why it is not (or no longer) running, when its status says: a container's waiting or
    /// terminated reason with its message (`ErrImageNeverPull: Container image ... is not
    /// present with pull policy of Never`), or an unscheduled pod's condition (`Unschedulable:
    /// 0/1 nodes are available: ...`).
    pub why: Option<String>,
}

impl PodInfo {
    /// The facts of a pod object.
    pub fn of(p: &Pod) -> PodInfo {
        let st = p.status.clone().unwrap_or_default();
        PodInfo {
            name: p.metadata.name.clone().unwrap_or_default(),
            uid: p.metadata.uid.clone().unwrap_or_default(),
            phase: st.phase.clone().unwrap_or_else(|| "Unknown".into()),
            ready: st
                .conditions
                .as_ref()
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True")),
            deleting: p.metadata.deletion_timestamp.is_some(),
            ip: st.pod_ip.as_deref().and_then(|s| s.parse().ok()),
            node: p.spec.as_ref().and_then(|s| s.node_name.clone()),
            restarts: st
                .container_statuses
                .as_ref()
                .map(|cs| cs.iter().map(|c| c.restart_count).sum())
                .unwrap_or(0),
            containers: p
                .spec
                .as_ref()
                .map(|s| s.containers.iter().map(|c| c.name.clone()).collect())
                .unwrap_or_default(),
            created: p
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.to_string())
                .unwrap_or_default(),
            why: why_not_running(&st),
        }
    }
}

/// The first reason a pod's status gives for not running: a container waiting or terminated
/// (with its message), else a PodScheduled or Ready condition that is False with a reason.
fn why_not_running(st: &k8s_openapi::api::core::v1::PodStatus) -> Option<String> {
    let join = |reason: Option<&String>, message: Option<&String>| -> Option<String> {
        match (reason, message.map(|m| m.trim()).filter(|m| !m.is_empty())) {
            (Some(r), Some(m)) => Some(format!("{r}: {}", one_line(m))),
            (Some(r), None) => Some(r.clone()),
            (None, Some(m)) => Some(one_line(m)),
            (None, None) => None,
        }
    };
    let containers = st
        .init_container_statuses
        .iter()
        .flatten()
        .chain(st.container_statuses.iter().flatten());
    for c in containers {
        let Some(state) = &c.state else { continue };
        if let Some(w) = &state.waiting {
            if let Some(r) = join(w.reason.as_ref(), w.message.as_ref()) {
                return Some(r);
            }
        }
        if let Some(t) = &state.terminated {
            let code = format!("exit code {}", t.exit_code);
            return Some(match join(t.reason.as_ref(), t.message.as_ref()) {
                Some(r) => format!("terminated ({code}): {r}"),
                None => format!("terminated ({code})"),
            });
        }
    }
    st.conditions
        .iter()
        .flatten()
        .filter(|c| c.status == "False" && (c.type_ == "PodScheduled" || c.reason.is_some()))
        .find_map(|c| join(c.reason.as_ref(), c.message.as_ref()))
}

/// A message on one line (the API's messages sometimes hold newlines).
fn one_line(m: &str) -> String {
    m.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// What a command run in a container gave back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    /// The exit status (0 for success).
    pub code: i32,
    /// Everything it wrote to stdout.
    pub stdout: Vec<u8>,
    /// Everything it wrote to stderr.
    pub stderr: Vec<u8>,
}

impl ExecOutput {
    /// stdout and stderr as text, for messages.
    pub fn text(&self) -> String {
        let mut s = String::from_utf8_lossy(&self.stdout).into_owned();
        s.push_str(&String::from_utf8_lossy(&self.stderr));
        s
    }
}

/// One address of a Service's EndpointSlices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The pod IP.
    pub ip: IpAddr,
    /// The endpoint's `ready` condition (absent counts as ready, as the API says).
    pub ready: bool,
    /// The pod it belongs to (`targetRef`), when named.
    pub pod: Option<String>,
}

impl Cluster {
    /// The pods of `namespace` matching label `selector` (all of them when `None`), by name.
    pub fn pods(&self, namespace: &str, selector: Option<&str>) -> Result<Vec<PodInfo>, Error> {
        let api: Api<Pod> = Api::namespaced(self.client(), namespace);
        let mut lp = ListParams::default();
        if let Some(s) = selector {
            lp = lp.labels(s);
        }
        let list = self.block_on(api.list(&lp)).map_err(|e| {
            Error::api(
                format!("list pods {} in {namespace}", selector.unwrap_or("(all)")),
                e,
            )
        })?;
        let mut v: Vec<PodInfo> = list.items.iter().map(PodInfo::of).collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(v)
    }

    /// Deletes a pod with `grace` as its grace period (`Some(ZERO)` kills it at once: SIGKILL,
    /// as `gracePeriodSeconds=0`), or the pod's own `terminationGracePeriodSeconds` when `None`.
    /// Returns as soon as the API server accepted it; a pod already gone is not an error.
    pub fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        grace: Option<Duration>,
    ) -> Result<(), Error> {
        let api: Api<Pod> = Api::namespaced(self.client(), namespace);
        let mut dp = DeleteParams::default();
        if let Some(g) = grace {
            dp = dp.grace_period(g.as_secs().try_into().unwrap_or(u32::MAX));
        }
        match self.block_on(api.delete(name, &dp)) {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(Error::api(format!("delete pod {name} in {namespace}"), e)),
        }
    }

    /// Sets annotation `key` of pod `name` to `value` (a merge patch): for instance
    /// `controller.kubernetes.io/pod-deletion-cost`, which tells a ReplicaSet scaling down which
    /// pods to remove first.
    pub fn annotate_pod(
        &self,
        namespace: &str,
        name: &str,
        key: &str,
        value: &str,
    ) -> Result<(), Error> {
        let api: Api<Pod> = Api::namespaced(self.client(), namespace);
        let patch = serde_json::json!({ "metadata": { "annotations": { key: value } } });
        self.block_on(api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)))
            .map_err(|e| Error::api(format!("annotate pod {name} in {namespace}"), e))?;
        Ok(())
    }

    /// Waits until pod `name` (of UID `uid` when given: a re-created namesake does not count) no
    /// longer exists, at most `bound`; returns how long it took.
    pub fn wait_pod_gone(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
        bound: Duration,
    ) -> Result<Duration, Error> {
        let t0 = Instant::now();
        let api: Api<Pod> = Api::namespaced(self.client(), namespace);
        self.block_on(async {
            loop {
                let state = match api.get_opt(name).await {
                    Ok(None) => return Ok(t0.elapsed()),
                    Ok(Some(p)) if uid.is_some_and(|u| p.metadata.uid.as_deref() != Some(u)) => {
                        return Ok(t0.elapsed())
                    }
                    Ok(Some(p)) => {
                        let i = PodInfo::of(&p);
                        format!(
                            "{}{}",
                            i.phase,
                            if i.deleting { ", terminating" } else { "" }
                        )
                    }
                    Err(e) => split(e).0,
                };
                if t0.elapsed() >= bound {
                    return Err(Error::Timeout {
                        what: format!("pod {name} in {namespace} gone"),
                        after: bound,
                        state,
                    });
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    }

    /// Runs `command` in a container of pod `name` (its first container when `container` is
    /// `None`) with `stdin` fed to it and closed, at most `bound`; returns its exit status and
    /// output. A command that ran and failed is an `Ok` with a non-zero code.
    pub fn exec(
        &self,
        namespace: &str,
        name: &str,
        container: Option<&str>,
        command: &[&str],
        stdin: Option<&[u8]>,
        bound: Duration,
    ) -> Result<ExecOutput, Error> {
        let api: Api<Pod> = Api::namespaced(self.client(), namespace);
        let what = format!("exec {:?} in pod {name} in {namespace}", command.join(" "));
        let mut ap = AttachParams::default()
            .stdin(stdin.is_some())
            .stdout(true)
            .stderr(true);
        if let Some(c) = container {
            ap = ap.container(c);
        }
        let cmd: Vec<String> = command.iter().map(|s| s.to_string()).collect();
        let input = stdin.map(<[u8]>::to_vec);
        let run = async {
            let mut p = api
                .exec(name, cmd, &ap)
                .await
                .map_err(|e| Error::api(&what, e))?;
            let status = p.take_status().expect("status is taken once");
            let mut out = p.stdout().expect("stdout was asked for");
            let mut err = p.stderr().expect("stderr was asked for");
            let writer = async {
                if let (Some(data), Some(mut w)) = (input, p.stdin()) {
                    w.write_all(&data).await?;
                    w.shutdown().await?;
                }
                Ok::<(), std::io::Error>(())
            };
            let (mut o, mut e) = (Vec::new(), Vec::new());
            let (w, ro, re) =
                tokio::join!(writer, out.read_to_end(&mut o), err.read_to_end(&mut e));
            w.and(ro).and(re).map_err(|e| Error::io(&what, e))?;
            let status = status.await;
            let code = exit_code(status.as_ref(), &what)?;
            let _ = p.join().await;
            Ok(ExecOutput {
                code,
                stdout: o,
                stderr: e,
            })
        };
        self.block_on(async {
            match tokio::time::timeout(bound, run).await {
                Ok(r) => r,
                Err(_) => Err(Error::Timeout {
                    what: what.clone(),
                    after: bound,
                    state: "running".into(),
                }),
            }
        })
    }

    /// The whole log of a container of pod `name` (first container when `None`); `previous`
    /// reads the container instance before its last restart.
    pub fn logs(
        &self,
        namespace: &str,
        name: &str,
        container: Option<&str>,
        previous: bool,
    ) -> Result<String, Error> {
        let api: Api<Pod> = Api::namespaced(self.client(), namespace);
        let lp = LogParams {
            container: container.map(str::to_string),
            previous,
            ..Default::default()
        };
        self.block_on(api.logs(name, &lp))
            .map_err(|e| Error::api(format!("logs of pod {name} in {namespace}"), e))
    }

    /// The addresses of Service `service`'s EndpointSlices (label
    /// `kubernetes.io/service-name`), sorted and deduplicated: the pod IPs a headless Service
    /// selects, the way a gateway controller fills its upstreams.
    pub fn endpoints(&self, namespace: &str, service: &str) -> Result<Vec<Endpoint>, Error> {
        let api: Api<EndpointSlice> = Api::namespaced(self.client(), namespace);
        let lp = ListParams::default().labels(&format!("kubernetes.io/service-name={service}"));
        let list = self.block_on(api.list(&lp)).map_err(|e| {
            Error::api(
                format!("list endpointslices of service {service} in {namespace}"),
                e,
            )
        })?;
        let mut v = Vec::new();
        for s in list.items {
            for e in s.endpoints {
                let ready = e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true);
                let pod = e.target_ref.as_ref().and_then(|t| t.name.clone());
                for a in &e.addresses {
                    if let Ok(ip) = a.parse() {
                        v.push(Endpoint {
                            ip,
                            ready,
                            pod: pod.clone(),
                        });
                    }
                }
            }
        }
        v.sort_by_key(|a| a.ip);
        v.dedup_by(|a, b| a.ip == b.ip);
        Ok(v)
    }
}

/// What a pod run to completion ([`Cluster::run_pod`]) gave back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRun {
    /// Its container's exit code.
    pub code: i32,
    /// Its container's whole log (stdout and stderr, as the kubelet keeps them).
    pub log: String,
    /// From the pod's creation until its container had exited.
    pub took: Duration,
}

impl Cluster {
    /// Runs `pod` (one container, `restartPolicy: Never`) to completion in `namespace`: creates
    /// it, waits at most `bound` for its container to exit (failing at once when its image
    /// cannot be had, or when it cannot be scheduled once `bound` ran out), reads its log and
    /// deletes it. A command that ran and failed is an `Ok` with its code.
    pub fn run_pod(&self, namespace: &str, pod: &Pod, bound: Duration) -> Result<PodRun, Error> {
        let api: Api<Pod> = Api::namespaced(self.client(), namespace);
        let name = pod.metadata.name.clone().unwrap_or_default();
        let what = format!("pod {name} in {namespace}");
        let t0 = Instant::now();
        self.block_on(api.create(&kube::api::PostParams::default(), pod))
            .map_err(|e| Error::api(format!("create {what}"), e))?;
        let waited = self.block_on(async {
            loop {
                let state = match api.get_opt(&name).await {
                    Ok(Some(p)) => {
                        let code = p
                            .status
                            .as_ref()
                            .and_then(|s| s.container_statuses.as_ref())
                            .and_then(|cs| cs.first())
                            .and_then(|c| c.state.as_ref())
                            .and_then(|s| s.terminated.as_ref())
                            .map(|t| t.exit_code);
                        if let Some(code) = code {
                            return Ok((code, t0.elapsed()));
                        }
                        let i = PodInfo::of(&p);
                        if let Some(why) = i.why.as_deref().filter(|w| image_problem(w)) {
                            return Err(Error::Unstartable(format!("{what} cannot start: {why}")));
                        }
                        format!(
                            "{}{}",
                            i.phase,
                            i.why.map(|w| format!(": {w}")).unwrap_or_default()
                        )
                    }
                    Ok(None) => {
                        return Err(Error::Api {
                            what: what.clone(),
                            message: "deleted before it ended".into(),
                            code: 404,
                        })
                    }
                    Err(e) => split(e).0,
                };
                if t0.elapsed() >= bound {
                    return Err(Error::Timeout {
                        what: format!("{what} to end"),
                        after: bound,
                        state,
                    });
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        let result = waited.and_then(|(code, took)| {
            let log = self
                .block_on(api.logs(&name, &LogParams::default()))
                .map_err(|e| Error::api(format!("logs of {what}"), e))?;
            Ok(PodRun { code, log, took })
        });
        // It has ended (or will never run): no grace needed.
        let _ = self.delete_pod(namespace, &name, Some(Duration::ZERO));
        result
    }
}

/// How many events of a pod a diagnosis quotes.
const DIAGNOSIS_EVENTS: usize = 5;

/// How many of each container's last log lines a diagnosis quotes.
const DIAGNOSIS_LOG_LINES: usize = 20;

impl Cluster {
    /// Why the pods of `selector` in `namespace` that are not Ready are not: for each, its
    /// phase and reason, its latest events (Warnings first: failed probes, back-offs) and the
    /// last lines of its log, on one line (`pod web-1 (Running): events: Unhealthy: Readiness
    /// probe failed: ...; last log lines of proxy: ...`), each container's last 20 lines (a crash-looping
    /// one's previous run when it wrote nothing since). Empty when every pod is Ready or nothing can be read.
    pub fn diagnose_pods(&self, namespace: &str, selector: &str) -> String {
        let Ok(pods) = self.pods(namespace, Some(selector)) else {
            return String::new();
        };
        let events: Api<k8s_openapi::api::core::v1::Event> =
            Api::namespaced(self.client(), namespace);
        let mut out = Vec::new();
        for p in pods.iter().filter(|p| !p.ready && !p.deleting) {
            let mut s = format!("pod {} ({}", p.name, p.phase);
            if let Some(w) = &p.why {
                s.push_str(&format!(": {w}"));
            }
            s.push(')');
            let lp = ListParams::default().fields(&format!("involvedObject.name={}", p.name));
            if let Ok(list) = self.block_on(events.list(&lp)) {
                let mut evs = list.items;
                // Warnings first, then the newest.
                evs.sort_by_key(|e| {
                    (
                        e.type_.as_deref() != Some("Warning"),
                        std::cmp::Reverse(e.last_timestamp.as_ref().map(|t| t.0)),
                    )
                });
                let said: Vec<String> = evs
                    .iter()
                    .take(DIAGNOSIS_EVENTS)
                    .map(|e| {
                        format!(
                            "{}: {}{}",
                            e.reason.clone().unwrap_or_default(),
                            one_line(e.message.as_deref().unwrap_or_default()),
                            match e.count {
                                Some(n) if n > 1 => format!(" (x{n})"),
                                _ => String::new(),
                            }
                        )
                    })
                    .collect();
                if !said.is_empty() {
                    s.push_str(&format!("; events: {}", said.join(" | ")));
                }
            }
            // Each container's last lines; a container that restarted (a crash loop) and has
            // written nothing since says what its previous run wrote.
            let api: Api<Pod> = Api::namespaced(self.client(), namespace);
            for c in &p.containers {
                let tail = |previous: bool| {
                    let lp = LogParams {
                        container: Some(c.clone()),
                        tail_lines: Some(DIAGNOSIS_LOG_LINES as i64),
                        previous,
                        ..Default::default()
                    };
                    let log = self.block_on(api.logs(&p.name, &lp)).unwrap_or_default();
                    log.lines()
                        .filter(|l| !l.trim().is_empty())
                        .map(one_line)
                        .collect::<Vec<String>>()
                };
                let mut lines = tail(false);
                let mut which = "";
                if lines.is_empty() && p.restarts > 0 {
                    lines = tail(true);
                    which = " (its previous run)";
                }
                if !lines.is_empty() {
                    s.push_str(&format!(
                        "; last log lines of {}{which}: {}",
                        c,
                        lines.join(" | ")
                    ));
                }
            }
            out.push(s);
        }
        out.join("; ")
    }
}

/// How many pods a cluster's schedulable nodes hold: their limit and their pods now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodCapacity {
    /// Schedulable (not cordoned) nodes.
    pub nodes: u64,
    /// The sum of their `allocatable` pods (the kubelet's max-pods, 110 by default).
    pub allocatable: u64,
    /// Pods bound to them that have not ended (every namespace).
    pub used: u64,
}

impl PodCapacity {
    /// Pods that can still be scheduled.
    pub fn free(&self) -> u64 {
        self.allocatable.saturating_sub(self.used)
    }
}

impl Cluster {
    /// How many pods the schedulable nodes can hold and hold now (lists nodes and every
    /// namespace's pods: needs cluster-wide read access).
    pub fn pod_capacity(&self) -> Result<PodCapacity, Error> {
        let nodes: Api<Node> = Api::all(self.client());
        let pods: Api<Pod> = Api::all(self.client());
        let (nodes, pods) = self.block_on(async {
            let n = nodes
                .list(&ListParams::default())
                .await
                .map_err(|e| Error::api("list nodes", e))?;
            let p = pods
                .list(&ListParams::default())
                .await
                .map_err(|e| Error::api("list pods in every namespace", e))?;
            Ok::<_, Error>((n, p))
        })?;
        let mut cap = PodCapacity {
            nodes: 0,
            allocatable: 0,
            used: 0,
        };
        let mut names = Vec::new();
        for n in nodes.items {
            if n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
                continue;
            }
            cap.nodes += 1;
            cap.allocatable += n
                .status
                .as_ref()
                .and_then(|s| s.allocatable.as_ref())
                .and_then(|a| a.get("pods"))
                .and_then(|q| q.0.parse::<u64>().ok())
                .unwrap_or(0);
            names.extend(n.metadata.name);
        }
        cap.used = pods
            .items
            .iter()
            .filter(|p| {
                let on = p.spec.as_ref().and_then(|s| s.node_name.as_ref());
                let ended = p
                    .status
                    .as_ref()
                    .and_then(|s| s.phase.as_deref())
                    .is_some_and(|ph| ph == "Succeeded" || ph == "Failed");
                on.is_some_and(|n| names.contains(n)) && !ended
            })
            .count() as u64;
        Ok(cap)
    }
}

/// The node label a node selector pins a pod to one node with.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

impl Cluster {
    /// A node selector for the node that is this machine: the first node one of whose
    /// InternalIPs is an address of this host (a socket binds to it), by its
    /// `kubernetes.io/hostname` label. A hostNetwork pod that must share this machine's loopback
    /// (a proxy or an agent reached at 127.0.0.1) is pinned there on a cluster of several nodes.
    /// `None` when no node is this machine (a remote cluster) or the nodes cannot be listed (the
    /// permission is optional): the pod is then scheduled as usual.
    pub fn local_node_selector(&self) -> Option<std::collections::BTreeMap<String, String>> {
        let nodes: Api<Node> = Api::all(self.client());
        let list = self
            .block_on(async { nodes.list(&ListParams::default()).await })
            .ok()?;
        list.items.iter().find_map(|n| {
            let local = n
                .status
                .as_ref()?
                .addresses
                .as_ref()?
                .iter()
                .filter(|a| a.type_ == "InternalIP")
                .filter_map(|a| a.address.parse::<std::net::IpAddr>().ok())
                .any(|ip| std::net::TcpListener::bind((ip, 0)).is_ok());
            let host = n.metadata.labels.as_ref()?.get(HOSTNAME_LABEL)?;
            local.then(|| [(HOSTNAME_LABEL.to_string(), host.clone())].into())
        })
    }
}

/// The exit status a remote command's final `Status` carries: Success is 0, `NonZeroExitCode`
/// has the code as its `ExitCode` cause; anything else is the server's message, as an API error
/// of the request `what`.
fn exit_code(
    status: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>,
    what: &str,
) -> Result<i32, Error> {
    let failed = |message: String| Error::Api {
        what: what.to_string(),
        message,
        code: 0,
    };
    let Some(s) = status else {
        return Err(failed(
            "the exec stream ended without an exit status".into(),
        ));
    };
    if s.status.as_deref() == Some("Success") {
        return Ok(0);
    }
    let reason = s.reason.clone().unwrap_or_default();
    if reason == "NonZeroExitCode" {
        if let Some(code) = s
            .details
            .as_ref()
            .and_then(|d| d.causes.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.reason.as_deref() == Some("ExitCode")))
            .and_then(|c| c.message.as_deref())
            .and_then(|m| m.parse().ok())
        {
            return Ok(code);
        }
    }
    Err(failed(match s.message.as_deref() {
        Some(m) if !m.is_empty() => m.to_string(),
        _ => format!("exec failed: {reason}"),
    }))
}
