//! Load agents for a distributed load (`agents = N` on a scenario's load, `proxybench load
//! --agents N --platform kubernetes`): `proxybench agent` processes on this machine (the local
//! platform), or the pods of an Indexed Job (Kubernetes). Either way the coordinator reaches
//! each agent on an address of this machine and drives it with the agent protocol
//! ([`agent::coordinator`]); a platform only starts its agents and cleans up after them.
//!
//! On Kubernetes the coordinator reaches every agent pod through a port-forward of the API
//! server ([`k8s::PortForward`]), the one path that works wherever the API server does: pod IPs
//! are routable from the client only on some clusters, and node addresses (hostNetwork) are
//! often private. Only the control stream (the job, the clock pings, each second's counts and
//! histograms) goes that way; the load goes from the pods to its target directly.

use crate::error::PlatformError;
use agent::coordinator::{self, Distributed, Plan, Progress};
use k8s::k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s::k8s_openapi::api::core::v1::{
    Affinity, Container, PodAffinityTerm, PodAntiAffinity, PodSpec, PodTemplateSpec, Secret,
    SecretVolumeSource, Volume, VolumeMount, WeightedPodAffinityTerm,
};
use k8s::k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s::k8s_openapi::ByteString;
use k8s::PullPolicy;
use k8s::{Cluster, PodInfo, PortForward};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the agents print first, on stdout, once they listen (`proxybench agent`).
const LISTENING: &str = "proxybench agent listening on ";
/// Where an agent pod finds the token and the load's files (a Secret volume).
const POD_DIR: &str = "/var/run/proxybench";
/// How long deleting the Job (its pods first) may take.
const DELETE_BOUND: Duration = Duration::from_secs(60);
/// How often the pods are looked at, while waiting for them and while they run.
const POLL: Duration = Duration::from_millis(250);

/// What a distributed load asks its platform for.
pub struct AgentsSpec<'a> {
    /// How many agents.
    pub count: u32,
    /// The load's engine config: what the agents run (split by the coordinator), and where it
    /// goes (a loopback target puts Kubernetes agents on their node's network).
    pub cfg: &'a load::Config,
    /// How long the agents may take to be ready to take the load.
    pub ready_timeout: Duration,
    /// A directory of this machine for the token and the load's files (local agents).
    pub work: &'a Path,
    /// Set by Ctrl-C: stop waiting for the agents.
    pub stop: &'a AtomicBool,
}

/// Agents that are running and ready: where the coordinator reaches them and with what.
/// Dropping them stops them (on Kubernetes: deletes the Job and its Secret).
pub trait Agents: Send {
    /// Each agent's address on this machine, `127.0.0.1:PORT`.
    fn hosts(&self) -> &[String];
    /// What each agent is called in messages and tables: a pod's name, or `agent-I`.
    fn names(&self) -> &[String];
    /// The token the agents were started with.
    fn token(&self) -> &str;
    /// The directory where the agents find the load's files ([`agent::files`]).
    fn files_dir(&self) -> &str;
    /// Where they run, in a few words for reports (`3 agent processes on this machine`).
    fn place(&self) -> &str;
    /// Stops them; what could not be cleaned up, one sentence each.
    fn close(&mut self) -> Vec<String>;
}

/// Runs `cfg` on `agents` through the coordinator: the split, one start, live progress, the
/// merge. `origin`: the time base (wall clock, ns) and the earliest start after it, as
/// [`Plan::origin`]; `stop` ends the run early with what was measured.
pub fn run_load(
    agents: &dyn Agents,
    cfg: &load::Config,
    origin: Option<(u64, Duration)>,
    stop: Option<Arc<AtomicBool>>,
    progress: Option<Progress<'_>>,
) -> Result<Distributed, agent::Error> {
    let sent = agent::files::config_at(cfg, agents.files_dir());
    let plan = Plan {
        hosts: agents.hosts(),
        names: agents.names(),
        token: agents.token(),
        cfg: &sent,
        origin,
        stop,
    };
    coordinator::run(&plan, progress)
}

/// A fresh random token, 64 hex digits from the kernel's generator.
fn random_token() -> Result<String, PlatformError> {
    use std::io::Read;
    let mut b = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|source| PlatformError::AgentsIo {
            what: "cannot read /dev/urandom for the agents' token".into(),
            source,
        })?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// The address an agent's first line names.
fn listening(line: &str) -> Option<SocketAddr> {
    line.trim().strip_prefix(LISTENING)?.parse().ok()
}

/// `proxybench agent` processes on this machine, each in its own process group and never left
/// behind ([`proxy::Supervised`]), listening on 127.0.0.1 ports the OS picked.
pub(crate) struct LocalAgents {
    procs: Vec<proxy::Supervised>,
    hosts: Vec<String>,
    names: Vec<String>,
    token: String,
    /// The agents' directory (the token, the load's files).
    dir: String,
    place: String,
}

impl LocalAgents {
    /// Starts `spec.count` agents of this very binary and waits until each one listens.
    pub(crate) fn start(spec: &AgentsSpec<'_>) -> Result<LocalAgents, PlatformError> {
        let exe = std::env::current_exe().map_err(|source| PlatformError::AgentsIo {
            what: "cannot find the proxybench binary to start agents".into(),
            source,
        })?;
        let dir = unique_dir(spec.work, "agents")?;
        let token = random_token()?;
        let token_file = dir.join("token");
        write_private(&token_file, token.as_bytes())?;
        let files = agent::files::agent_files(spec.cfg)?;
        for (name, bytes) in &files {
            write_private(&dir.join(name), bytes)?;
        }
        let mut procs = Vec::new();
        let mut outs = Vec::new();
        for i in 0..spec.count {
            let mut cmd = Command::new(&exe);
            cmd.args(["agent", "--listen", "127.0.0.1:0", "--token-file"])
                .arg(&token_file);
            let (out, err) = (
                dir.join(format!("agent-{i}.out")),
                dir.join(format!("agent-{i}.err")),
            );
            let p = proxy::Supervised::spawn_with_stdout(&format!("agent-{i}"), cmd, &out, &err)
                .map_err(PlatformError::AgentProcess)?;
            procs.push(p);
            outs.push(out);
        }
        let deadline = Instant::now() + spec.ready_timeout;
        let mut hosts = Vec::new();
        for (i, out) in outs.iter().enumerate() {
            let addr = loop {
                let text = std::fs::read_to_string(out).unwrap_or_default();
                if let Some(a) = text.lines().next().and_then(listening) {
                    break a;
                }
                if let Some(status) = procs[i].exited() {
                    return Err(PlatformError::Agents(format!(
                        "agent-{i} exited ({status}) before it listened: {}",
                        procs[i].stderr_text().trim()
                    )));
                }
                if spec.stop.load(Ordering::Relaxed) {
                    return Err(PlatformError::Agents(
                        "interrupted while the agents started".into(),
                    ));
                }
                if Instant::now() >= deadline {
                    return Err(PlatformError::Agents(format!(
                        "agent-{i} did not listen within {}",
                        units::fmt_secs_short(spec.ready_timeout.as_secs_f64())
                    )));
                }
                std::thread::sleep(Duration::from_millis(10));
            };
            hosts.push(addr.to_string());
        }
        Ok(LocalAgents {
            procs,
            names: (0..spec.count).map(|i| format!("agent-{i}")).collect(),
            hosts,
            token,
            dir: dir.to_string_lossy().into_owned(),
            place: format!(
                "{} agent process{} on this machine",
                spec.count,
                if spec.count == 1 { "" } else { "es" }
            ),
        })
    }
}

impl Agents for LocalAgents {
    fn hosts(&self) -> &[String] {
        &self.hosts
    }
    fn names(&self) -> &[String] {
        &self.names
    }
    fn token(&self) -> &str {
        &self.token
    }
    fn files_dir(&self) -> &str {
        &self.dir
    }
    fn place(&self) -> &str {
        &self.place
    }
    fn close(&mut self) -> Vec<String> {
        self.procs
            .drain(..)
            .filter_map(|mut p| {
                p.stop(libc::SIGTERM, true, Duration::from_secs(5), "SIGTERM")
                    .err()
                    .map(|e| e.to_string())
            })
            .collect()
    }
}

/// A new directory under `base` named `PREFIX-N`.
fn unique_dir(base: &Path, prefix: &str) -> Result<PathBuf, PlatformError> {
    std::fs::create_dir_all(base).map_err(|source| PlatformError::AgentsIo {
        what: format!("cannot create {}", base.display()),
        source,
    })?;
    for n in 0.. {
        let d = base.join(format!("{prefix}-{n}"));
        match std::fs::create_dir(&d) {
            Ok(()) => return Ok(d),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(source) => {
                return Err(PlatformError::AgentsIo {
                    what: format!("cannot create {}", d.display()),
                    source,
                })
            }
        }
    }
    unreachable!("an unbounded range ends only by returning")
}

/// Writes a file only its owner can read (the token, the load's files).
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), PlatformError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(bytes))
        .map_err(|source| PlatformError::AgentsIo {
            what: format!("cannot write {}", path.display()),
            source,
        })
}

/// The agents of a distributed load as the pods of an Indexed Job (completions = parallelism =
/// N, one pod per index, none replaced: a pod that dies is a lost agent), spread over the nodes
/// by a preferred anti-affinity, with the token and the load's files in a Secret. Each agent
/// listens on a port its pod picks (several hostNetwork agents can share a node), says which in
/// its log, and is reached through a port-forward. The Job and the Secret are deleted when the
/// agents close, also on an error and on drop.
pub(crate) struct KubeAgents {
    cluster: Cluster,
    namespace: String,
    job: String,
    /// The labels the Job and its Secret are found by at the end: [`AGENTS_LABEL`] and the
    /// run's id.
    selector: String,
    forwards: Vec<Arc<PortForward>>,
    monitor: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
    hosts: Vec<String>,
    names: Vec<String>,
    token: String,
    place: String,
    closed: bool,
}

/// The label every object of one agents Job carries (its value is the Job's name).
const AGENTS_LABEL: &str = "proxybench/agents";

impl KubeAgents {
    /// Makes the Secret and the Job in `namespace`, waits (at most `spec.ready_timeout`) until
    /// every agent listens, and opens a forward to each.
    pub(crate) fn start(
        cluster: Cluster,
        (namespace, run_id): (&str, &str),
        (image, pulling): (&str, &super::kube::Pulling),
        spec: &AgentsSpec<'_>,
    ) -> Result<KubeAgents, PlatformError> {
        let n = spec.count as usize;
        let salt = u16::from_str_radix(&random_token()?[..4], 16).unwrap_or(0);
        let job = format!("agents-{salt:04x}-{run_id}");
        let token = random_token()?;
        let files = agent::files::agent_files(spec.cfg)?;
        // The load's target on loopback is the node's loopback (the test cluster's proxy pods
        // listen there): only pods on the node's network reach it.
        let host_network = load::target::Target::new(spec.cfg)
            .map(|t| t.addr.ip().is_loopback())
            .unwrap_or(false);
        let mut st = KubeAgents {
            cluster,
            namespace: namespace.to_string(),
            job: job.clone(),
            selector: format!(
                "{AGENTS_LABEL}={job},{}={},{}={run_id}",
                k8s::MANAGED_BY.0,
                k8s::MANAGED_BY.1,
                k8s::INSTANCE
            ),
            forwards: Vec::new(),
            monitor: None,
            hosts: Vec::new(),
            names: Vec::new(),
            token: token.clone(),
            place: format!(
                "{n} {} of Job {job} in namespace {namespace}{}",
                if n == 1 { "pod" } else { "pods" },
                if host_network {
                    " (host network: the target is on loopback)"
                } else {
                    ""
                }
            ),
            closed: false,
        };
        let labels: BTreeMap<String, String> = [
            ("proxybench/role".to_string(), "agent".to_string()),
            (AGENTS_LABEL.to_string(), job.clone()),
            (k8s::MANAGED_BY.0.to_string(), k8s::MANAGED_BY.1.to_string()),
            (k8s::INSTANCE.to_string(), run_id.to_string()),
            (
                "app.kubernetes.io/component".to_string(),
                "agent".to_string(),
            ),
        ]
        .into();
        let meta = ObjectMeta {
            name: Some(job.clone()),
            labels: Some(labels.clone()),
            ..Default::default()
        };
        let mut data = BTreeMap::new();
        data.insert("token".to_string(), ByteString(token.into_bytes()));
        for (name, bytes) in files {
            data.insert(name, ByteString(bytes));
        }
        let api = PlatformError::AgentsApi;
        // From here on, dropping `st` deletes what was made.
        st.cluster
            .apply_owned(
                namespace,
                &Secret {
                    metadata: meta.clone(),
                    data: Some(data),
                    ..Default::default()
                },
                run_id,
            )
            .map_err(api)?;
        // A loopback target is this machine's: agents on the node's network run on the node
        // that is this machine.
        let node_selector = host_network
            .then(|| st.cluster.local_node_selector())
            .flatten();
        let pod = agent_pod(&job, image, host_network, node_selector);
        // A bound on the pods' life should the coordinator die without deleting them.
        let deadline = spec.ready_timeout
            + spec.cfg.duration.unwrap_or(Duration::from_secs(86_400))
            + Duration::from_secs(600);
        let job_object = agents_job(meta, labels, n, deadline, pulling.apply(pod));
        st.cluster
            .apply_owned(namespace, &job_object, run_id)
            .map_err(api)?;
        let pods = st.wait_listening(n, spec)?;
        for (p, port) in &pods {
            let f = st
                .cluster
                .port_forward(namespace, p, *port)
                .map_err(PlatformError::AgentsApi)?;
            st.hosts.push(f.addr().to_string());
            st.names.push(p.clone());
            st.forwards.push(Arc::new(f));
        }
        st.monitor = Some(st.watch(pods.into_iter().map(|(p, _)| p).collect()));
        Ok(st)
    }

    /// The Job's pods by completion index (the newest of an index), from their names
    /// (`JOB-INDEX-RANDOM`).
    fn pods_by_index(&self) -> Result<BTreeMap<usize, PodInfo>, PlatformError> {
        let pods = self
            .cluster
            .pods(
                &self.namespace,
                Some(&format!("{AGENTS_LABEL}={}", self.job)),
            )
            .map_err(PlatformError::AgentsApi)?;
        let prefix = format!("{}-", self.job);
        let mut out: BTreeMap<usize, PodInfo> = BTreeMap::new();
        for p in pods {
            let Some(i) = p
                .name
                .strip_prefix(&prefix)
                .and_then(|r| r.split_once('-'))
                .and_then(|(i, _)| i.parse().ok())
            else {
                continue;
            };
            if out.get(&i).is_none_or(|q| q.created <= p.created) {
                out.insert(i, p);
            }
        }
        Ok(out)
    }

    /// Waits until each of the `n` indexes has a running pod whose log names the port it
    /// listens on: (pod, port) by index. A pod that ends first, a timeout or Ctrl-C fails it,
    /// naming each pod and its state.
    fn wait_listening(
        &self,
        n: usize,
        spec: &AgentsSpec<'_>,
    ) -> Result<Vec<(String, u16)>, PlatformError> {
        let t0 = Instant::now();
        let mut found: BTreeMap<usize, (String, u16)> = BTreeMap::new();
        loop {
            if spec.stop.load(Ordering::Relaxed) {
                return Err(PlatformError::Agents(
                    "interrupted while the agent pods started".into(),
                ));
            }
            let pods = self.pods_by_index()?;
            for (&i, p) in &pods {
                if found.get(&i).is_some_and(|(name, _)| *name == p.name) {
                    continue;
                }
                if p.phase == "Failed" || p.phase == "Succeeded" {
                    let log = self.last_log_line(&p.name);
                    return Err(PlatformError::Agents(format!(
                        "agent pod {} ended before it was ready: {} ({}){log}",
                        p.name,
                        p.phase,
                        p.why.as_deref().unwrap_or("no reason given")
                    )));
                }
                if p.phase == "Running" && !p.deleting {
                    let text = self
                        .cluster
                        .logs(&self.namespace, &p.name, None, false)
                        .unwrap_or_default();
                    if let Some(a) = text.lines().find_map(listening) {
                        found.insert(i, (p.name.clone(), a.port()));
                    }
                }
            }
            if found.len() == n {
                return Ok(found.into_values().collect());
            }
            if t0.elapsed() >= spec.ready_timeout {
                let states: Vec<String> = (0..n)
                    .map(|i| match pods.get(&i) {
                        None => format!("index {i}: no pod yet"),
                        Some(p) if found.contains_key(&i) => format!("{} ready", p.name),
                        Some(p) => format!(
                            "{} {}{}",
                            p.name,
                            p.phase,
                            match (&p.why, p.phase.as_str()) {
                                (Some(w), _) => format!(" ({w})"),
                                (None, "Running") => " (not listening yet)".to_string(),
                                (None, _) => String::new(),
                            }
                        ),
                    })
                    .collect();
                return Err(PlatformError::Agents(format!(
                    "{n} agent pod{} of Job {} not ready after {}: {}",
                    if n == 1 { "" } else { "s" },
                    self.job,
                    units::fmt_secs_short(spec.ready_timeout.as_secs_f64()),
                    states.join("; ")
                )));
            }
            std::thread::sleep(POLL);
        }
    }

    /// `: LAST LOG LINE` of a pod, or nothing.
    fn last_log_line(&self, pod: &str) -> String {
        self.cluster
            .logs(&self.namespace, pod, None, false)
            .ok()
            .and_then(|t| {
                t.lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .map(str::to_string)
            })
            .map(|l| format!(": {}", l.trim()))
            .unwrap_or_default()
    }

    /// Watches the agent pods while they run: the forward of one that is gone, terminating or
    /// no longer running is closed, so the coordinator sees its agent end (and reports it
    /// lost) even when the API server keeps the forward's stream open.
    fn watch(&self, pods: Vec<String>) -> (Arc<AtomicBool>, JoinHandle<()>) {
        let done = Arc::new(AtomicBool::new(false));
        let (cluster, ns, sel) = (
            self.cluster.clone(),
            self.namespace.clone(),
            format!("{AGENTS_LABEL}={}", self.job),
        );
        let forwards = self.forwards.clone();
        let d2 = done.clone();
        let h = std::thread::spawn(move || {
            while !d2.load(Ordering::Relaxed) {
                if let Ok(now) = cluster.pods(&ns, Some(&sel)) {
                    for (name, f) in pods.iter().zip(&forwards) {
                        let alive = now
                            .iter()
                            .any(|p| p.name == *name && p.phase == "Running" && !p.deleting);
                        if !alive {
                            f.close();
                        }
                    }
                }
                std::thread::sleep(POLL);
            }
        });
        (done, h)
    }
}

impl Agents for KubeAgents {
    fn hosts(&self) -> &[String] {
        &self.hosts
    }
    fn names(&self) -> &[String] {
        &self.names
    }
    fn token(&self) -> &str {
        &self.token
    }
    fn files_dir(&self) -> &str {
        POD_DIR
    }
    fn place(&self) -> &str {
        &self.place
    }
    fn close(&mut self) -> Vec<String> {
        if self.closed {
            return Vec::new();
        }
        self.closed = true;
        if let Some((done, h)) = self.monitor.take() {
            done.store(true, Ordering::Relaxed);
            let _ = h.join();
        }
        self.forwards.clear();
        let mut left = Vec::new();
        // By their labels (this Job's and the run's), never by a name a user's object could
        // share.
        if let Err(e) =
            self.cluster
                .delete_labelled::<Job>(&self.namespace, &self.selector, DELETE_BOUND)
        {
            left.push(format!("the agents' Job is left behind: {e}"));
        }
        if let Err(e) =
            self.cluster
                .delete_labelled::<Secret>(&self.namespace, &self.selector, DELETE_BOUND)
        {
            left.push(format!("the agents' Secret is left behind: {e}"));
        }
        left
    }
}

impl Drop for KubeAgents {
    /// Agents that were never closed (an error, a panic) still go.
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// The agents' Indexed Job: `n` pods at once, each index run once (a pod that fails is a lost
/// agent), ended by the cluster at `deadline` should the coordinator die without deleting it.
fn agents_job(
    meta: ObjectMeta,
    labels: BTreeMap<String, String>,
    n: usize,
    deadline: Duration,
    pod: PodSpec,
) -> Job {
    Job {
        metadata: meta,
        spec: Some(JobSpec {
            completion_mode: Some("Indexed".into()),
            completions: Some(n as i32),
            parallelism: Some(n as i32),
            // A pod that fails is a lost agent: its index is not run again, and the
            // others go on.
            backoff_limit_per_index: Some(0),
            active_deadline_seconds: Some(deadline.as_secs() as i64),
            ttl_seconds_after_finished: Some(300),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..Default::default()
                }),
                spec: Some(pod),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The pod of every agent of Job `job`: the agent listening on the pod's loopback behind its
/// token, its files from the Job's Secret, spread over the nodes, on the node's network when
/// the target is on loopback (`node_selector`: this machine's node).
fn agent_pod(
    job: &str,
    image: &str,
    host_network: bool,
    node_selector: Option<BTreeMap<String, String>>,
) -> PodSpec {
    PodSpec {
        restart_policy: Some("Never".into()),
        host_network: Some(host_network),
        node_selector,
        dns_policy: Some(
            if host_network {
                "ClusterFirstWithHostNet"
            } else {
                "ClusterFirst"
            }
            .into(),
        ),
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        termination_grace_period_seconds: Some(2),
        affinity: Some(Affinity {
            pod_anti_affinity: Some(PodAntiAffinity {
                preferred_during_scheduling_ignored_during_execution: Some(vec![
                    WeightedPodAffinityTerm {
                        weight: 100,
                        pod_affinity_term: PodAffinityTerm {
                            label_selector: Some(LabelSelector {
                                match_labels: Some(
                                    [(AGENTS_LABEL.to_string(), job.to_string())].into(),
                                ),
                                ..Default::default()
                            }),
                            topology_key: "kubernetes.io/hostname".into(),
                            ..Default::default()
                        },
                    },
                ]),
                ..Default::default()
            }),
            ..Default::default()
        }),
        volumes: Some(vec![Volume {
            name: "agent".into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(job.to_string()),
                // Read by the pods' group (their non-root user is not the owner).
                default_mode: Some(0o440),
                ..Default::default()
            }),
            ..Default::default()
        }]),
        containers: vec![Container {
            name: "agent".into(),
            image: Some(image.to_string()),
            image_pull_policy: Some(PullPolicy::for_image(image).to_string()),
            args: Some(vec![
                "agent".into(),
                "--listen".into(),
                "127.0.0.1:0".into(),
                "--token-file".into(),
                format!("{POD_DIR}/token"),
            ]),
            volume_mounts: Some(vec![VolumeMount {
                name: "agent".into(),
                mount_path: POD_DIR.into(),
                read_only: Some(true),
                ..Default::default()
            }]),
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listening_line_names_the_address() {
        assert_eq!(
            listening("proxybench agent listening on 127.0.0.1:40123\n"),
            Some("127.0.0.1:40123".parse().unwrap())
        );
        assert_eq!(listening("something else"), None);
    }

    #[test]
    fn tokens_are_random_hex() {
        let (a, b) = (random_token().unwrap(), random_token().unwrap());
        assert_eq!(a.len(), 64);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
