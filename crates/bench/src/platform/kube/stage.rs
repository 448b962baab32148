//! One case on a cluster, up: the [`Stage`] the runner drives, and its way down. What it
//! deploys is in `deploy`, how it reaches the pods in `paths`, its actions in `act`.

use super::backends::{self, BackendPods, BACKEND_PORT};
use super::manifests::{
    check_in_pod, config_map, config_volume, deployment, labels, meta, pre_stop_command,
    proxy_stop, sh, tls_mount, tls_volume, PodScripts, NO_LINGER, TLS_SECRET,
};
use super::records::{log_levels, split_followed, split_logs};
use super::{
    named, next_port, platform, run_selector, KubeStage, Pulling, ADMIN_BASE, BOUND, DEFAULT_IMAGE,
    LISTENER_BASE, POD_PATH_ENV, POD_PREFIX, PROXY, ROLE, SERVICE_BOUND,
};
use crate::error::StackError;
use crate::platform::{Applied, Served, StackSpec};
use crate::platform::{Down, Missed, Stage};
use k8s::collect::PromTarget;
use k8s::k8s_openapi::api::apps::v1::Deployment;
use k8s::k8s_openapi::api::core::v1::{
    ConfigMap, Container, ContainerPort, ExecAction, HTTPGetAction, Lifecycle, LifecycleHandler,
    Pod, PodSpec, Probe, Secret, Service, ServicePort, ServiceSpec, TopologySpreadConstraint,
    VolumeMount,
};
use k8s::k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s::{Cluster, PodPath, PullPolicy, ServiceType};
use model::Event;
use proxy::config::ProxyConfig;
use proxy::{RenderContext, ReplicaHandle};
use scenario::{Action, Case, PlatformSpec};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod act;
mod deploy;
mod paths;

impl KubeStage {
    /// Stands up one case in `namespace`: backend Deployments and their headless Services, then
    /// the proxy Deployment (config checked by the proxy's own checker first), the collectors
    /// and the log followers; returns once every pod is Ready. A case that cannot come up (a
    /// pod never Ready, a refused config) deletes what it made before it returns the error,
    /// also in a namespace the run did not make. Everything it makes carries `run_id` in its
    /// name and as its `app.kubernetes.io/instance` label.
    pub(crate) fn up(
        cluster: Cluster,
        (namespace, run_id): (&str, &str),
        spec: &PlatformSpec,
        case: &Case,
        stack: StackSpec<'_>,
    ) -> Result<KubeStage, StackError> {
        let mut made = None;
        let at = (namespace, run_id);
        match Self::up_into(&mut made, cluster, at, spec, case, stack) {
            Ok(()) => made.ok_or_else(|| platform("the stage was not made")),
            Err(e) => {
                if let Some(mut st) = made {
                    let _ = st.down();
                }
                Err(e)
            }
        }
    }

    /// [`KubeStage::up`]'s work, the stage in `made` as soon as it exists: names checked, the
    /// stage made with its watches, the backends deployed and Ready, then the proxy deployed
    /// (or a user's gateway attached).
    fn up_into(
        made: &mut Option<KubeStage>,
        cluster: Cluster,
        (namespace, run_id): (&str, &str),
        spec: &PlatformSpec,
        case: &Case,
        stack: StackSpec<'_>,
    ) -> Result<(), StackError> {
        check_names(case, run_id)?;
        for d in [&stack.work, &stack.configs_out] {
            std::fs::create_dir_all(d).map_err(|source| StackError::Io {
                path: d.clone(),
                source,
            })?;
        }
        let st = made.insert(KubeStage::blank(
            cluster,
            (namespace, run_id),
            spec,
            case,
            &stack,
        )?);
        st.start_watching(spec)?;
        st.deploy_backends(case, spec)?;
        let Some(cfg) = st.served.config.clone() else {
            return Ok(());
        };
        if cfg.kind == proxy::ProxyKind::External {
            return st.attach_external(&cfg, &stack);
        }
        st.deploy_proxy(&cfg, spec, &stack)
    }

    /// The stage of a case before anything of it is deployed: its watches of the namespace's
    /// pods and Warning events, and its backends' control.
    fn blank(
        cluster: Cluster,
        (namespace, run_id): (&str, &str),
        spec: &PlatformSpec,
        case: &Case,
        stack: &StackSpec<'_>,
    ) -> Result<KubeStage, StackError> {
        let origin = stack.origin;
        let ns = namespace.to_string();
        let c = &cluster;
        let run_id = run_id.to_string();
        let logs_dir = stack.work.join("pod-logs");
        Ok(KubeStage {
            long_lived: case.loads.iter().any(|l| l.stream_protocol().is_some()),
            cluster: cluster.clone(),
            namespace: ns.clone(),
            driver: proxy::driver(stack.proxy.map(|p| p.kind).unwrap_or_default()),
            served: Served {
                config: stack.proxy.cloned(),
                generation: 1,
                ports: BTreeMap::new(),
                tls: stack.tls.clone(),
                origin,
            },
            stage_origin: origin,
            configs: stack.configs.clone(),
            admin_port: 0,
            control_port: 0,
            groups: Vec::new(),
            configs_out: stack.configs_out.clone(),
            exec_out: stack.exec_out.clone(),
            execs: 0,
            logs_dir: logs_dir.clone(),
            handles: Arc::new(Mutex::new(Vec::new())),
            pods: vec![c.watch_pods(&ns, "", origin)],
            warnings: vec![c.watch_warnings(&ns, origin)],
            metrics: Vec::new(),
            scrape: None,
            followers: None,
            watched_logs: Vec::new(),
            watched_format: spec.watch_log_format,
            watched_levels: spec.watch_log_levels,
            attached: None,
            absent: Vec::new(),
            first_backend: BTreeMap::new(),
            scripts: None,
            proxy_stop: None,
            service: None,
            pod_path: None,
            load_targets: Mutex::default(),
            unreached: Mutex::default(),
            pulling: Pulling::of(spec),
            ready_bound: spec.ready_timeout.unwrap_or(BOUND),
            reach: BTreeMap::new(),
            notes: Vec::new(),
            endpoints: None,
            probes: None,
            backends: BackendPods::new(
                c,
                &ns,
                &run_id,
                case.backends.iter().map(|g| g.name.clone()).collect(),
                &stack.work.join("backend-logs"),
                origin,
            )?,
            run_id,
        })
    }
}

impl Stage for KubeStage {
    fn ports(&self) -> &BTreeMap<String, u16> {
        &self.served.ports
    }

    fn aim(&self, via: &scenario::Via, tls: bool) -> Result<SocketAddr, StackError> {
        self.aim_at(via, tls).map(|(a, _)| a)
    }

    fn reaches_from_here(&self, to: SocketAddr) -> bool {
        !self
            .unreached
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&to.ip())
    }

    fn listener_ip(&self) -> IpAddr {
        match self.service {
            Some((_, Some(ip))) => ip,
            _ => crate::reach::RUN_IP,
        }
    }

    fn listener_port(&self, tls: bool) -> Option<u16> {
        let cfg = self.served.config.as_ref()?;
        let l = cfg.listeners.iter().find(|l| l.tls == tls)?;
        self.served.ports.get(&l.name).copied()
    }

    fn first_backend(&self, group: &str) -> Option<SocketAddr> {
        self.first_backend.get(group).copied()
    }

    fn external(&self) -> Option<&proxy::config::External> {
        self.served
            .config
            .as_ref()
            .and_then(|c| c.external.as_ref())
    }

    fn serving(&mut self, origin: Instant) {
        self.served.origin = origin;
    }

    fn handles(&self) -> Arc<Mutex<Vec<ReplicaHandle>>> {
        self.handles.clone()
    }

    fn apply(&mut self, action: &Action, keep_going: &dyn Fn() -> bool) -> Applied {
        if let Some(rendered) = self.rendered_manifest(action) {
            return match rendered {
                Ok(a) => self.apply(&a, keep_going),
                Err(e) => Applied {
                    events: vec![Event {
                        t_s: Instant::now()
                            .duration_since(self.served.origin)
                            .as_secs_f64(),
                        action: action.kind().to_string(),
                        detail: String::new(),
                        duration_ms: 0.0,
                        error: Some(e.to_string()),
                        limit: false,
                    }],
                    ..Applied::default()
                },
            };
        }
        if let Action::Grow(g) = action {
            // A growth is many steps, each its own event.
            if g.template.is_some() {
                return self.grow_template(g, keep_going);
            }
            if g.what == scenario::GrowWhat::UpstreamServers && g.backend.is_some() {
                return self.grow_upstreams(g, keep_going);
            }
            return crate::grow::grow(self, g, keep_going);
        }
        if let Action::Apply { probe: Some(p), .. }
        | Action::Delete { probe: Some(p), .. }
        | Action::RolloutRestart { probe: Some(p), .. }
        | Action::Scale { probe: Some(p), .. } = action
        {
            return self.probed_action(action, p, keep_going);
        }
        let t0 = Instant::now();
        let (detail, result, reloads) = self.act(action, keep_going);
        Applied {
            events: vec![Event {
                t_s: t0.duration_since(self.served.origin).as_secs_f64(),
                action: action.kind().to_string(),
                detail,
                duration_ms: t0.elapsed().as_secs_f64() * 1e3,
                error: result.err().map(|e| e.to_string()),
                limit: false,
            }],
            reloads,
            ready: Vec::new(),
            probes: Vec::new(),
        }
    }

    fn down(&mut self) -> Down {
        let mut err = None;
        // What the case made, found by its labels (managed-by and its run id), never by a name a
        // user's object could share.
        let (c, ns) = (self.cluster.clone(), self.namespace.clone());
        let mine = run_selector(&self.run_id, "");
        // The loads are over: the proxy pods skip their preStop sleep, which only keeps them
        // serving until the nodes stop routing new connections to them.
        self.cut_linger();
        // Our Deployments to zero, so that the proxy pods end (their logs end with them).
        match c.names_labelled::<Deployment>(&ns, &mine) {
            Ok(names) => {
                for n in &names {
                    if let Err(e) = c.scale_deployment(&ns, n, 0) {
                        if !e.is_not_found() {
                            err.get_or_insert(StackError::from(e));
                        }
                    }
                }
            }
            Err(e) => {
                err.get_or_insert(StackError::from(e));
            }
        }
        self.let_go_of_lost_nodes();
        let t = Instant::now();
        let proxies = self.role_selector(PROXY);
        while t.elapsed() < BOUND {
            match c.pods(&ns, Some(&proxies)) {
                Ok(p) if p.is_empty() => break,
                _ => std::thread::sleep(Duration::from_millis(100)),
            }
        }
        let format = self
            .scripts
            .as_ref()
            .map_or(proxy::logs::LogFormat::NginxJson, |s| s.log_format);
        let mut logs = Vec::new();
        let mut short = Vec::new();
        if let Some(f) = self.followers.take() {
            split_logs(f, format, &self.logs_dir, &mut logs, &mut short, &mut err);
        }
        let mut levels = Vec::new();
        for f in std::mem::take(&mut self.watched_logs) {
            let followed = f.stop(Duration::from_secs(30));
            if self.watched_levels {
                levels.extend(log_levels(&followed));
            }
            if let Some(format) = self.watched_format {
                split_followed(
                    followed,
                    format,
                    &self.logs_dir,
                    &mut logs,
                    &mut short,
                    &mut err,
                );
            }
        }
        if let Some(a) = &self.attached {
            logs.push((a.name().to_string(), a.logs()));
        }
        logs.sort_by(|a, b| a.0.cmp(&b.0));
        let missed = logs_missed(&short, logs.len());
        if !missed.is_empty() {
            self.notes.push(logs_note(&missed));
        }
        let (backends, missing, e) = self.backends.finish(&self.cluster, &self.namespace);
        if let Some(e) = e {
            err.get_or_insert(e);
        }
        // What the case made goes with it, also from a namespace the run did not make (the
        // user's, with `--namespace`), where nothing of ours may stay behind.
        let mut gone = |r: Result<usize, k8s::Error>| {
            if let Err(e) = r {
                err.get_or_insert(StackError::from(e));
            }
        };
        gone(c.delete_labelled::<Deployment>(&ns, &mine, BOUND));
        gone(c.delete_labelled::<Service>(&ns, &mine, BOUND));
        gone(c.delete_labelled::<ConfigMap>(&ns, &mine, BOUND));
        gone(c.delete_labelled::<Secret>(&ns, &mine, BOUND));
        // A config check's pod that outlived its wait.
        gone(c.delete_labelled::<Pod>(
            &ns,
            &run_selector(&self.run_id, &format!("{ROLE}=proxy-check")),
            BOUND,
        ));
        self.reach.clear();
        let mut rec = self.record();
        rec.counters_missing = missing;
        if self.watched_levels {
            if levels.is_empty() {
                rec.absent.push(
                    "log levels: no watched pod's log was read (watch.selectors picked no pod)"
                        .into(),
                );
            }
            rec.log_levels = levels;
        }
        Down {
            logs,
            backends,
            cluster: Some(rec),
            err,
            notes: std::mem::take(&mut self.notes),
            missed,
        }
    }
}

/// The proxy's logs read in part (`short`: each log's name and why) among `of` logs, as the
/// case's coverage of the logs.
fn logs_missed(short: &[(String, String)], of: usize) -> Vec<Missed> {
    short
        .iter()
        .map(|(item, why)| Missed {
            collector: model::Collector::Logs,
            unit: "logs".into(),
            of,
            item: item.clone(),
            why: why.clone(),
        })
        .collect()
}

/// One sentence for the case's findings on the proxy's logs read in part.
fn logs_note(missed: &[Missed]) -> String {
    let of = missed.first().map_or(0, |m| m.of);
    format!(
        "The proxy's logs were read whole for {} of {of} logs: {}. What the logs show (access \
         lines, statuses, errors) covers only what was read, and checks on them are not \
         measurable.",
        of.saturating_sub(missed.len()),
        missed
            .iter()
            .map(|m| format!("{}: {}", m.item, m.why.trim_end_matches('.')))
            .collect::<Vec<_>>()
            .join("; ")
    )
}

/// Refuses, before anything is made, a backend group whose Deployment and Service name would
/// be over the 63 characters of a DNS-1035 label.
fn check_names(case: &Case, run_id: &str) -> Result<(), StackError> {
    // is made.
    for g in &case.backends {
        let name = backends::deployment_name(&g.name, run_id);
        if name.len() > 63 {
            return Err(platform(format!(
                "backend group '{}': its Deployment and Service `{name}` would have {} \
                 characters, over Kubernetes' 63: on Kubernetes a group's name has at most \
                 {} characters",
                g.name,
                name.len(),
                63 - (name.len() - g.name.len())
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The stage against the shared test cluster (`PROXYBENCH_TEST_KUBECONFIG`), without the
    //! runner: up, requests through the proxy pods, scale, reload, kill, down.

    use super::*;
    use scenario::layers::Source;
    use scenario::Scenario;
    use scenario::StopSpec;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    const SCENARIO: &str = r#"
name = "kube-stage"
[[backends]]
name = "cafe"
count = 2
[proxy]
replicas = 1
worker_processes = 1
[[proxy.listeners]]
name = "http"
[[proxy.upstreams]]
name = "cafe"
backends = "cafe"
[[proxy.routes]]
path = "/"
upstream = "cafe"
[[loads]]
name = "l"
url = "http://localhost/"
connections = 1
duration = "1s"
"#;

    /// One GET through the proxy at `ip`; true on a 200.
    fn get(ip: IpAddr, port: u16) -> bool {
        let Ok(mut s) = TcpStream::connect((ip, port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        if s.write_all(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
            .is_err()
        {
            return false;
        }
        let mut b = String::new();
        let _ = s.read_to_string(&mut b);
        b.starts_with("HTTP/1.1 200")
    }

    #[test]
    #[ignore = "needs the test cluster (make test-k8s)"]
    fn k8s_stage_serves_scales_reloads_and_keeps_every_pods_log() {
        let kc = std::env::var_os("PROXYBENCH_TEST_KUBECONFIG")
            .expect("PROXYBENCH_TEST_KUBECONFIG is unset: these tests need the test cluster");
        let cluster = Cluster::connect(Some(std::path::Path::new(&kc)), None).unwrap();
        let ns = k8s::namespace_name("kube-stage");
        cluster.create_namespace(&ns, &[]).unwrap();
        let scn = Scenario::parse(
            &Source {
                file: "s.toml".into(),
                text: SCENARIO.into(),
            },
            false,
        )
        .unwrap();
        let case = &scn.cases[0];
        let dir = tempfile::tempdir().unwrap();
        let spec = StackSpec {
            backends: &case.backends,
            backend_threads: 1,
            proxy: case.proxy.as_ref(),
            configs: &case.configs,
            tls: None,
            work: dir.path().join("work"),
            configs_out: dir.path().join("configs"),
            exec_out: dir.path().join("exec"),
            origin: Instant::now(),
            seed: 1,
        };
        let pspec = PlatformSpec {
            image: std::env::var("PROXYBENCH_TEST_IMAGE").ok(),
            ..PlatformSpec::default()
        };
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let run = k8s::namespace_name("pb");
            let mut st = KubeStage::up(cluster.clone(), (&ns, &run), &pspec, case, spec)
                .unwrap_or_else(|e| panic!("{e}"));
            let port = st.listener_port(false).unwrap();
            let ip = st.listener_ip();
            assert!(
                !ip.is_loopback(),
                "the loads go to the proxy's Service: {ip}"
            );
            let mut ok = 0u64;
            let mut sent = 0u64;
            let burst = |n: u32, ok: &mut u64, sent: &mut u64| {
                for _ in 0..n {
                    *sent += 1;
                    *ok += u64::from(get(ip, port));
                }
            };
            burst(50, &mut ok, &mut sent);
            let noop = || true;
            for a in [
                Action::ScaleReplicas {
                    to: 2,
                    stop: StopSpec::Graceful,
                },
                Action::Reload,
                Action::StopReplica {
                    replica: None,
                    mode: StopSpec::Kill,
                },
                Action::ScaleReplicas {
                    to: 1,
                    stop: StopSpec::Graceful,
                },
            ] {
                let applied = st.apply(&a, &noop);
                eprintln!("{:?}", applied.events);
                assert!(
                    applied.events.iter().all(|e| e.error.is_none()),
                    "{:?}",
                    applied.events
                );
                if matches!(a, Action::Reload) {
                    assert_eq!(applied.reloads.len(), 2);
                    assert!(
                        applied.reloads.iter().all(|r| r.served_ms.is_some()),
                        "{:?}",
                        applied.reloads
                    );
                }
                burst(50, &mut ok, &mut sent);
            }
            let down = st.down();
            for p in &down.cluster.as_ref().unwrap().pods {
                eprintln!(
                    "{:7.3} {} {} {} ready={} terminating={}",
                    p.t_s, p.role, p.pod, p.phase, p.ready, p.terminating
                );
            }
            assert!(down.err.is_none(), "{:?}", down.err);
            let mut access = 0u64;
            for (pod, files) in &down.logs {
                let n = std::fs::read_to_string(files.access.as_ref().unwrap())
                    .unwrap()
                    .lines()
                    .count() as u64;
                eprintln!("{pod}: {n} access lines");
                access += n;
            }
            let rec = down.cluster.unwrap();
            eprintln!("{} pod changes, absent: {:?}", rec.pods.len(), rec.absent);
            assert!(
                down.logs.len() >= 3,
                "every proxy pod that ran: {:?}",
                down.logs
            );
            assert_eq!(ok, sent, "no failed request outside the kill");
            assert_eq!(access, ok, "every request is an access line of some pod");
            assert!(rec.pods.iter().any(|p| p.role == "proxy" && p.ready));
        }));
        let _ = cluster.delete_namespace(&ns, Duration::from_secs(120));
        if let Err(p) = result {
            std::panic::resume_unwind(p);
        }
    }
}
