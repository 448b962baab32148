//! The backend pods of a case on Kubernetes: their pod spec, their names, their live control,
//! and their final counters.
//!
//! - **Names.** Every backend pod gets the name its instance would have locally, `GROUP-I`, I
//!   counting the group's pods in order of creation over the whole case (never reused), so that
//!   `kill_backend = "cafe-1"`, `set_profile = { backend = "cafe-1" }` and the counters in the
//!   record name the same backend on both platforms.
//! - **Control.** Each pod runs `proxybench backend --control 127.0.0.1:9090` with the case's
//!   token from a Secret mounted as a file (`--token-from`); the stage reaches the port through
//!   the API server's port-forward ([`k8s::Cluster::port_forward`]), which works on any cluster
//!   whether or not its pod network is reachable from here, and talks to it with the backend's
//!   own control client. A group's new profile also goes to every pod the group gets later (a
//!   scale-up, a replacement), before that pod enters the proxy's upstreams.
//! - **Counters.** A backend prints its final counters as its last line when it exits (after
//!   its drain, bounded below the pod's grace period); every backend pod's log is followed from
//!   its start, so the counters of pods deleted mid-run (`kill_backend`, a scale-down) are read
//!   too. A pod whose log has no such line (killed before its drain ended, its log lost) is
//!   named in the record's `counters_missing` with the reason, never counted as zero.

use super::manifests::labels;
use super::{named, platform, run_selector, ROLE};
use crate::error::StackError;
use backend::control::{Client, Token};
use backend::Profile;
use k8s::k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, EnvVarSource, ObjectFieldSelector, PodSpec, Probe, Secret,
    SecretVolumeSource, TCPSocketAction, Volume, VolumeMount,
};
use k8s::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s::PullPolicy;
use k8s::{Cluster, LogFollowers, PodInfo};
use model::BackendCounters;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

/// The backends' port in their pods.
pub(super) const BACKEND_PORT: u16 = 8080;
/// The label naming a backend pod's group.
pub(super) const GROUP: &str = "proxybench/group";
/// The control port in a backend pod (its loopback only).
const CONTROL_PORT: u16 = 9090;
/// The base name of the Secret holding the case's control token (`backend-control-<run id>`),
/// and where pods mount it.
const TOKEN_SECRET: &str = "backend-control";
const TOKEN_DIR: &str = "/control";
/// A backend pod's grace period, and the drain bound inside it (shorter, so that the final
/// counters are printed before the kubelet's SIGKILL).
const GRACE_S: i64 = 5;
const DRAIN: &str = "3s";
/// How long a backend pod may take to stop at the end of the case.
const GONE_BOUND: Duration = Duration::from_secs(60);
/// How long a group may take to have its pods Ready and in its EndpointSlices.
const READY_BOUND: Duration = Duration::from_secs(180);

/// A backend pod the case has named.
#[derive(Debug, Clone)]
struct Named {
    /// The instance name, `GROUP-I`.
    name: String,
    group: String,
}

/// The case's backend pods, as the stage drives and reads them.
pub(super) struct BackendPods {
    token: Token,
    /// The case's run id: in its objects' names and labels.
    run: String,
    /// The case's backend groups.
    groups: Vec<String>,
    /// Pod name to its instance name, for every pod of the case seen so far.
    named: BTreeMap<String, Named>,
    /// The next index of each group.
    next: BTreeMap<String, u32>,
    /// Each group's profile as `set_profile` last set it (absent: the pod template's).
    profiles: BTreeMap<String, Profile>,
    /// Pods that run their group's current profile.
    current: BTreeSet<String>,
    /// Pods chosen to leave their group (a scale-down): out of the upstreams from the next
    /// render on.
    leaving: BTreeSet<String>,
    followers: Option<LogFollowers>,
}

/// A backend pod's spec: `proxybench backend` for group `group` with `profile`, serving on the
/// pod IP, its control port on the pod's loopback with the case's token (Secret `secret`).
pub(super) fn pod_spec(image: &str, group: &str, profile: &Profile, secret: &str) -> PodSpec {
    let field = |name: &str, path: &str| EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    PodSpec {
        termination_grace_period_seconds: Some(GRACE_S),
        volumes: Some(vec![Volume {
            name: "control".into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret.into()),
                // Read by the pods' group (their non-root user is not the owner).
                default_mode: Some(0o440),
                ..Default::default()
            }),
            ..Default::default()
        }]),
        containers: vec![Container {
            name: "backend".into(),
            image: Some(image.into()),
            image_pull_policy: Some(PullPolicy::for_image(image).to_string()),
            env: Some(vec![field("POD_IP", "status.podIP")]),
            args: Some(vec![
                "backend".into(),
                "--listen".into(),
                format!("$(POD_IP):{BACKEND_PORT}"),
                "--name".into(),
                group.into(),
                "--profile".into(),
                profile.to_string(),
                "--control".into(),
                format!("127.0.0.1:{CONTROL_PORT}"),
                "--token-from".into(),
                format!("{TOKEN_DIR}/token"),
                "--drain-timeout".into(),
                DRAIN.into(),
            ]),
            ports: Some(vec![ContainerPort {
                container_port: BACKEND_PORT.into(),
                name: Some("http".into()),
                ..Default::default()
            }]),
            volume_mounts: Some(vec![VolumeMount {
                name: "control".into(),
                mount_path: TOKEN_DIR.into(),
                read_only: Some(true),
                ..Default::default()
            }]),
            readiness_probe: Some(Probe {
                tcp_socket: Some(TCPSocketAction {
                    port: IntOrString::Int(BACKEND_PORT.into()),
                    ..Default::default()
                }),
                period_seconds: Some(1),
                ..Default::default()
            }),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The Deployment (and Service) name of group `group` of run `run`: `backend-GROUP-<run id>`.
pub(super) fn deployment_name(group: &str, run: &str) -> String {
    named(&format!("backend-{group}"), run)
}

/// Why a backend pod's first request was not seen ([`BackendPods::first_traffic`]).
#[derive(Debug, thiserror::Error)]
pub(super) enum Unseen {
    /// No port-forward to its control endpoint could be opened.
    #[error("port-forward: {0}")]
    Forward(k8s::Error),
    /// It answered no request within the bound.
    #[error("no request within {0:?}")]
    Quiet(Duration),
    /// Its counters could not be read, with the forward's last error if it had one.
    #[error("its counters unread: {error}{}", forward.as_ref().map(|w| format!(" ({w})")).unwrap_or_default())]
    Unread {
        /// What the control client said.
        error: backend::Error,
        /// The port-forward's last error.
        forward: Option<String>,
    },
}

impl BackendPods {
    /// Makes the case's control token (a Secret) and starts following every backend pod's log
    /// into `logs_dir`: call before any backend pod exists.
    pub(super) fn new(
        cluster: &Cluster,
        namespace: &str,
        run: &str,
        groups: Vec<String>,
        logs_dir: &Path,
        origin: Instant,
    ) -> Result<BackendPods, StackError> {
        let token = Token::random().map_err(|e| platform(format!("control token: {e}")))?;
        let mut data = BTreeMap::new();
        data.insert("token".to_string(), token.as_str().to_string());
        cluster.apply_owned(
            namespace,
            &Secret {
                metadata: ObjectMeta {
                    name: Some(named(TOKEN_SECRET, run)),
                    labels: Some(labels(run, &[(ROLE, "backend")])),
                    ..Default::default()
                },
                string_data: Some(data),
                ..Default::default()
            },
            run,
        )?;
        let followers = cluster.follow_logs(
            namespace,
            &run_selector(run, &format!("{ROLE}=backend")),
            logs_dir,
            origin,
        )?;
        Ok(BackendPods {
            token,
            run: run.to_string(),
            groups,
            named: BTreeMap::new(),
            next: BTreeMap::new(),
            profiles: BTreeMap::new(),
            current: BTreeSet::new(),
            leaving: BTreeSet::new(),
            followers: Some(followers),
        })
    }

    /// The name of the Secret of the case's control token.
    pub(super) fn token_secret(&self) -> String {
        named(TOKEN_SECRET, &self.run)
    }

    /// The Deployment (and Service) name of group `group`.
    pub(super) fn deployment_of(&self, group: &str) -> String {
        deployment_name(group, &self.run)
    }

    /// The selector of the case's backend pods (`more`: one more `key=value`, or empty).
    fn selector(&self, more: &str) -> String {
        let mut s = run_selector(&self.run, &format!("{ROLE}=backend"));
        if !more.is_empty() {
            s.push(',');
            s.push_str(more);
        }
        s
    }

    /// Names the backend pods not named yet (in order of creation), and gives every ready pod
    /// of a group whose profile `set_profile` changed that profile: run before the proxy's
    /// upstreams are rendered, so that no pod enters them with a stale profile.
    pub(super) fn sync(&mut self, cluster: &Cluster, namespace: &str) -> Result<(), StackError> {
        let pods = self.pods(cluster, namespace)?;
        let mut push = Vec::new();
        for (group, p) in &pods {
            if !self.named.contains_key(&p.name) {
                let i = self.next.entry(group.clone()).or_insert(0);
                self.named.insert(
                    p.name.clone(),
                    Named {
                        name: format!("{group}-{i}"),
                        group: group.clone(),
                    },
                );
                *i += 1;
            }
            if p.ready && !p.deleting && !self.current.contains(&p.name) {
                if let Some(profile) = self.profiles.get(group) {
                    push.push((p.name.clone(), profile.clone()));
                }
            }
        }
        for (pod, profile) in push {
            self.set_pod_profile(cluster, namespace, &pod, &profile)?;
            self.current.insert(pod);
        }
        Ok(())
    }

    /// The case's backend pods with their group, oldest first.
    fn pods(
        &self,
        cluster: &Cluster,
        namespace: &str,
    ) -> Result<Vec<(String, PodInfo)>, StackError> {
        let mut pods: Vec<(String, PodInfo)> = Vec::new();
        for g in &self.groups {
            for p in cluster.pods(namespace, Some(&self.selector(&format!("{GROUP}={g}"))))? {
                pods.push((g.clone(), p));
            }
        }
        pods.sort_by(|a, b| a.1.created.cmp(&b.1.created).then(a.1.name.cmp(&b.1.name)));
        Ok(pods)
    }

    /// The pod of backend `b`: its instance name (`cafe-1`) or a pod name.
    pub(super) fn resolve(
        &mut self,
        cluster: &Cluster,
        namespace: &str,
        b: &str,
    ) -> Result<PodInfo, StackError> {
        self.sync(cluster, namespace)?;
        let pod = self
            .named
            .iter()
            .find(|(pod, n)| n.name == b || pod.as_str() == b)
            .map(|(pod, _)| pod.clone())
            .ok_or_else(|| platform(format!("no backend {b} (backends are named GROUP-I)")))?;
        cluster
            .pods(namespace, Some(&format!("{ROLE}=backend")))?
            .into_iter()
            .find(|p| p.name == pod)
            .ok_or_else(|| platform(format!("backend {b}: its pod {pod} is gone")))
    }

    /// The instance name of a pod, once named.
    pub(super) fn name_of(&self, pod: &str) -> Option<&str> {
        self.named.get(pod).map(|n| n.name.as_str())
    }

    /// Sets the profile of a whole group (its pods now, and the pods it gets later) or of one
    /// backend, through each pod's control port: the event's detail.
    pub(super) fn set_profile(
        &mut self,
        cluster: &Cluster,
        namespace: &str,
        group: Option<&str>,
        backend: Option<&str>,
        profile: &Profile,
    ) -> Result<String, StackError> {
        self.sync(cluster, namespace)?;
        let targets: Vec<(String, String)> = match (group, backend) {
            (Some(g), _) => {
                self.profiles.insert(g.to_string(), profile.clone());
                let gone: Vec<String> = self
                    .named
                    .iter()
                    .filter(|(_, n)| n.group == g)
                    .map(|(p, _)| p.clone())
                    .collect();
                for p in gone {
                    self.current.remove(&p);
                }
                self.pods(cluster, namespace)?
                    .into_iter()
                    .filter(|(pg, p)| pg == g && p.ready && !p.deleting)
                    .map(|(_, p)| (p.name, g.to_string()))
                    .collect()
            }
            (None, Some(b)) => {
                let p = self.resolve(cluster, namespace, b)?;
                let g = self.named[&p.name].group.clone();
                vec![(p.name, g)]
            }
            (None, None) => Vec::new(),
        };
        let mut names = Vec::new();
        for (pod, _) in &targets {
            self.set_pod_profile(cluster, namespace, pod, profile)?;
            if group.is_some() {
                self.current.insert(pod.clone());
            }
            names.push(self.name_of(pod).unwrap_or(pod).to_string());
        }
        let who = group.or(backend).unwrap_or_default();
        Ok(format!("{who}: {profile} ({})", names.join(", ")))
    }

    /// One pod's profile, through its control port.
    fn set_pod_profile(
        &self,
        cluster: &Cluster,
        namespace: &str,
        pod: &str,
        profile: &Profile,
    ) -> Result<(), StackError> {
        self.control(cluster, namespace, pod, |c, inst| {
            c.set_profile(inst, profile)
        })
    }

    /// One call to a pod's control endpoint, through a port-forward, on the pod's one instance
    /// (named after its group: `--name GROUP` makes `GROUP-0`).
    fn control(
        &self,
        cluster: &Cluster,
        namespace: &str,
        pod: &str,
        call: impl FnOnce(&Client, &str) -> Result<(), backend::Error>,
    ) -> Result<(), StackError> {
        let group = self
            .named
            .get(pod)
            .map(|n| n.group.clone())
            .or_else(|| group_of_pod(pod, &self.run))
            .ok_or_else(|| platform(format!("{pod} is not a backend pod")))?;
        let fwd = cluster.port_forward(namespace, pod, CONTROL_PORT)?;
        let client = Client::new(fwd.addr(), self.token.clone()).with_timeout(READY_BOUND);
        call(&client, &format!("{group}-0")).map_err(|e| {
            let why = fwd
                .last_error()
                .map(|w| format!(" ({w})"))
                .unwrap_or_default();
            platform(format!("control of pod {pod}: {e}{why}"))
        })
    }

    /// The pods of group `group` the case has named so far (gone ones included).
    pub(super) fn pods_of(&self, group: &str) -> BTreeSet<String> {
        self.named
            .iter()
            .filter(|(_, n)| n.group == group)
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// When each of `pods` answered its first request: its control endpoint's counters (the
    /// server-side truth), read through one port-forward per pod, every pod in turn about every
    /// 10 ms, until each has answered one or `bound` from `since` has passed. Each pod's time is
    /// in ms from `since`, an upper bound by at most one round of reads.
    pub(super) fn first_traffic(
        &self,
        cluster: &Cluster,
        namespace: &str,
        pods: &[String],
        (since, bound): (Instant, Duration),
        keep_going: &dyn Fn() -> bool,
    ) -> Vec<(String, Result<f64, Unseen>)> {
        let mut open = Vec::new();
        let mut out: Vec<(String, Result<f64, Unseen>)> = Vec::new();
        for pod in pods {
            match cluster.port_forward(namespace, pod, CONTROL_PORT) {
                Ok(f) => {
                    let c = Client::new(f.addr(), self.token.clone())
                        .with_timeout(Duration::from_secs(5));
                    open.push((pod.clone(), f, c));
                }
                Err(e) => out.push((pod.clone(), Err(Unseen::Forward(e)))),
            }
        }
        while !open.is_empty() {
            let mut i = 0;
            while i < open.len() {
                let served = open[i]
                    .2
                    .counters()
                    .map(|cs| cs.iter().map(|c| c.requests).sum::<u64>());
                match served {
                    Ok(n) if n > 0 => {
                        let (pod, _, _) = open.remove(i);
                        out.push((pod, Ok(since.elapsed().as_secs_f64() * 1e3)));
                        continue;
                    }
                    // A read that fails is retried until the bound: a pod's control endpoint
                    // may refuse a moment while its forward comes up.
                    _ => i += 1,
                }
            }
            if open.is_empty() {
                break;
            }
            if since.elapsed() > bound || !keep_going() {
                for (pod, f, c) in open.drain(..) {
                    let why = match c.counters() {
                        Ok(_) => Unseen::Quiet(bound),
                        Err(error) => Unseen::Unread {
                            error,
                            forward: f.last_error(),
                        },
                    };
                    out.push((pod, Err(why)));
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        out
    }

    /// `restart_backend`: brings back a backend that `kill_backend` or `drain_backend` took
    /// away. Locally the instance listens again on its address; here its pod is gone, so the
    /// group's Deployment has made a replacement: this waits for the group to be whole and Ready
    /// again and in its EndpointSlices, and names the replacement (the caller then reloads the
    /// proxy so the replacement is in its upstreams). A backend still running is refused, as
    /// locally.
    pub(super) fn restart(
        &mut self,
        cluster: &Cluster,
        namespace: &str,
        b: &str,
    ) -> Result<String, StackError> {
        self.sync(cluster, namespace)?;
        let (pod, n) = self
            .named
            .iter()
            .find(|(pod, n)| n.name == b || pod.as_str() == b)
            .map(|(p, n)| (p.clone(), n.clone()))
            .ok_or_else(|| platform(format!("no backend {b} (backends are named GROUP-I)")))?;
        let live = cluster
            .pods(namespace, Some(&self.selector("")))?
            .into_iter()
            .any(|p| p.name == pod && !p.deleting);
        if live {
            return Err(platform(format!(
                "{} is running (pod {pod}): restart_backend brings back a killed or drained backend",
                n.name
            )));
        }
        let t0 = Instant::now();
        let desired = cluster
            .deployment_replicas(namespace, &self.deployment_of(&n.group))?
            .desired;
        wait_group(cluster, namespace, (&n.group, &self.run), (desired, None))?;
        self.sync(cluster, namespace)?;
        let ready: Vec<String> = self
            .pods(cluster, namespace)?
            .into_iter()
            .filter(|(g, p)| *g == n.group && p.ready && !p.deleting)
            .filter_map(|(_, p)| self.name_of(&p.name).map(str::to_string))
            .collect();
        Ok(format!(
            "{} (pod {pod}) is gone; {}: {} ready again ({}) after {:.1}s",
            n.name,
            n.group,
            ready.len(),
            ready.join(", "),
            t0.elapsed().as_secs_f64()
        ))
    }

    /// Whether the pod of an EndpointSlice address is leaving its group (kept out of the
    /// upstreams).
    pub(super) fn is_leaving(&self, pod: Option<&str>) -> bool {
        pod.is_some_and(|p| self.leaving.contains(p))
    }

    /// Picks the `n` newest running pods of `group` to leave it, as the local stack removes the
    /// newest instances: they are kept out of the upstreams from the next render on, and marked
    /// with the lowest `pod-deletion-cost` so that the ReplicaSet removes exactly them when the
    /// Deployment scales down. With `kill`, each one's backend is killed through its control
    /// port first (listener closed, connections reset), as locally. Returns their names.
    pub(super) fn choose_leaving(
        &mut self,
        cluster: &Cluster,
        namespace: &str,
        group: &str,
        n: u32,
        kill: bool,
    ) -> Result<Vec<String>, StackError> {
        self.sync(cluster, namespace)?;
        let mut live: Vec<PodInfo> = self
            .pods(cluster, namespace)?
            .into_iter()
            .filter(|(g, p)| g == group && !p.deleting && !self.leaving.contains(&p.name))
            .map(|(_, p)| p)
            .collect();
        let keep = live.len().saturating_sub(n as usize);
        let going = live.split_off(keep);
        let mut names = Vec::new();
        for p in &going {
            cluster.annotate_pod(
                namespace,
                &p.name,
                "controller.kubernetes.io/pod-deletion-cost",
                "-1000000",
            )?;
            if kill {
                self.control(cluster, namespace, &p.name, |c, inst| c.kill(inst))?;
            }
            self.leaving.insert(p.name.clone());
            names.push(self.name_of(&p.name).unwrap_or(&p.name).to_string());
        }
        Ok(names)
    }

    /// Scales a group's Deployment to `to` and waits until that many pods are Ready and in its
    /// EndpointSlices; names the new pods (and gives them the group's profile).
    pub(super) fn scale(
        &mut self,
        cluster: &Cluster,
        namespace: &str,
        group: &str,
        to: u32,
    ) -> Result<(), StackError> {
        let to = i32::try_from(to).unwrap_or(i32::MAX);
        cluster.scale_deployment(namespace, &self.deployment_of(group), to)?;
        wait_group(cluster, namespace, (group, &self.run), (to, None))?;
        self.sync(cluster, namespace)
    }

    /// Waits for every backend pod to be gone (their Deployments are at 0), stops following
    /// their logs, and reads each pod's final counters, named as the case named the pod. Pods
    /// whose counters could not be read are listed with the reason.
    pub(super) fn finish(
        &mut self,
        cluster: &Cluster,
        namespace: &str,
    ) -> (Vec<BackendCounters>, Vec<String>, Option<StackError>) {
        let mut err = None;
        // Pods made since the last look get their names in creation order.
        if let Err(e) = self.sync(cluster, namespace) {
            err = Some(e);
        }
        let t = Instant::now();
        loop {
            match cluster.pods(namespace, Some(&self.selector(""))) {
                Ok(p) if p.is_empty() => break,
                Ok(p) if t.elapsed() > GONE_BOUND => {
                    let left: Vec<String> = p.into_iter().map(|p| p.name).collect();
                    err.get_or_insert(platform(format!(
                        "backend pods still there after {GONE_BOUND:?}: {}",
                        left.join(", ")
                    )));
                    break;
                }
                Err(e) if t.elapsed() > GONE_BOUND => {
                    err.get_or_insert(StackError::from(e));
                    break;
                }
                _ => std::thread::sleep(Duration::from_millis(100)),
            }
        }
        let mut logs = self
            .followers
            .take()
            .map(|f| f.stop(Duration::from_secs(30)))
            .unwrap_or_default();
        logs.sort_by(|a, b| {
            a.first_t_s
                .unwrap_or(f64::INFINITY)
                .total_cmp(&b.first_t_s.unwrap_or(f64::INFINITY))
        });
        let mut counters = Vec::new();
        let mut missing = Vec::new();
        for l in logs {
            let text = std::fs::read_to_string(&l.path).unwrap_or_default();
            let last = text.lines().rev().find_map(backend::parse_counters_line);
            let Some(mut cs) = last else {
                if l.lines == 0 && l.error.is_none() {
                    // Its container never started: it served nothing.
                    continue;
                }
                let why = l.error.clone().unwrap_or_else(|| {
                    "its log ends without the counters line (stopped before its drain ended?)"
                        .into()
                });
                let name = self.name_or_assign(&l.pod, None);
                missing.push(format!("{name} (pod {}): {why}", l.pod));
                continue;
            };
            let group = cs
                .first()
                .and_then(|c| c.name.strip_suffix("-0"))
                .map(str::to_string);
            let name = self.name_or_assign(&l.pod, group.as_deref());
            for c in &mut cs {
                c.name = name.clone();
            }
            counters.extend(cs);
        }
        counters.sort_by_key(|c| by_index(&c.name));
        (counters, missing, err)
    }

    /// A pod's name, or a new one in its group when the case never saw it (it came and went
    /// between two looks).
    fn name_or_assign(&mut self, pod: &str, group: Option<&str>) -> String {
        if let Some(n) = self.named.get(pod) {
            return n.name.clone();
        }
        let Some(group) = group
            .map(str::to_string)
            .or_else(|| group_of_pod(pod, &self.run))
        else {
            return pod.to_string();
        };
        let i = self.next.entry(group.clone()).or_insert(0);
        let name = format!("{group}-{i}");
        *i += 1;
        self.named.insert(
            pod.to_string(),
            Named {
                name: name.clone(),
                group,
            },
        );
        name
    }
}

/// Waits until no proxy pod of `pods` runs a worker of an older config generation (nginx's
/// `worker process is shutting down`, seen with `ps` in the pod), at most `bound` (asked every
/// 50 ms): after a reload that took backends out of the upstreams, no request can reach them
/// once these are gone. The first pod whose old workers outlived the bound, if any.
pub(super) fn wait_old_workers(
    cluster: &Cluster,
    namespace: &str,
    pods: &[String],
    bound: Duration,
) -> Result<Option<String>, StackError> {
    let polls = (bound.as_millis() / 50).max(1);
    let script = format!(
        "i=0; while ps | grep -v grep | grep -q 'shutting down'; do \
         i=$((i+1)); [ $i -ge {polls} ] && exit 1; sleep 0.05; done"
    );
    for pod in pods {
        let out = cluster.exec(
            namespace,
            pod,
            None,
            &["/bin/sh", "-c", &script],
            None,
            bound + Duration::from_secs(20),
        )?;
        if out.code != 0 {
            return Ok(Some(pod.clone()));
        }
    }
    Ok(None)
}

/// `GROUP-I` split for sorting: the group, then the index as a number.
fn by_index(name: &str) -> (String, u64) {
    match name.rsplit_once('-') {
        Some((g, i)) => (g.to_string(), i.parse().unwrap_or(u64::MAX)),
        None => (name.to_string(), u64::MAX),
    }
}

/// A backend pod's group from its name, `backend-GROUP-<run id>-<replicaset hash>-<suffix>`
/// (for a pod the case never listed and whose log has no counters line).
fn group_of_pod(pod: &str, run: &str) -> Option<String> {
    let rest = pod.strip_prefix("backend-")?;
    let mut parts: Vec<&str> = rest.rsplitn(3, '-').collect();
    if parts.len() != 3 {
        return None;
    }
    let group = parts.pop()?.strip_suffix(&format!("-{run}"))?;
    Some(group.to_string())
}

/// Waits until group `group` of run `run` has `n` Ready pods of its newest template (at most
/// `bound`, or [`READY_BOUND`]) and `n` ready addresses in its EndpointSlices.
pub(super) fn wait_group(
    cluster: &Cluster,
    namespace: &str,
    (group, run): (&str, &str),
    (n, bound): (i32, Option<Duration>),
) -> Result<(), StackError> {
    let name = deployment_name(group, run);
    cluster.wait_deployment_ready(namespace, &name, n, bound.unwrap_or(READY_BOUND))?;
    // The EndpointSlice controller follows the pods a moment later.
    let t = Instant::now();
    loop {
        let ready = cluster
            .endpoints(namespace, &name)?
            .iter()
            .filter(|e| e.ready)
            .count();
        if ready == n as usize {
            return Ok(());
        }
        if t.elapsed() > Duration::from_secs(30) {
            return Err(platform(format!(
                "{name}: {ready} ready addresses in its EndpointSlices after 30 s, not {n}"
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_come_from_pod_names_and_names_sort_by_index() {
        let run = "pb-20261129-184232-0a1b";
        assert_eq!(
            group_of_pod(&format!("backend-cafe-{run}-7d9f8b6c4-x2x9z"), run).as_deref(),
            Some("cafe")
        );
        assert_eq!(
            group_of_pod(&format!("backend-tea-shop-{run}-7d9f8b6c4-x2x9z"), run).as_deref(),
            Some("tea-shop")
        );
        assert_eq!(
            group_of_pod(&format!("proxy-{run}-7d9f8b6c4-x2x9z"), run),
            None
        );
        assert_eq!(
            group_of_pod("backend-cafe-7d9f8b6c4-x2x9z", run),
            None,
            "another run's pod"
        );
        let mut v = vec!["cafe-10", "cafe-2", "bar-1"];
        v.sort_by_key(|n| by_index(n));
        assert_eq!(v, vec!["bar-1", "cafe-2", "cafe-10"]);
    }

    #[test]
    fn the_pod_runs_the_backend_with_its_control_port_and_token_file() {
        let p: Profile = "latency=fixed(1ms)".parse().unwrap();
        let spec = pod_spec("img", "cafe", &p, "backend-control-pb-1");
        let c = &spec.containers[0];
        let args = c.args.clone().unwrap().join(" ");
        assert!(
            args.contains("--listen $(POD_IP):8080 --name cafe"),
            "{args}"
        );
        assert!(
            args.contains("--control 127.0.0.1:9090 --token-from /control/token"),
            "{args}"
        );
        let drain = units::parse_duration(DRAIN).unwrap();
        assert!(drain < Duration::from_secs(GRACE_S as u64), "{args}");
        assert_eq!(
            spec.volumes.unwrap()[0]
                .secret
                .as_ref()
                .unwrap()
                .default_mode,
            Some(0o440)
        );
    }
}
