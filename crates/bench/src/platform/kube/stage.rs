//! One case on a cluster, up: the backend and proxy Deployments, the proxy Service, how this
//! machine reaches the pods, and the [`Stage`] the runner drives.

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

    /// The case's collectors that watch from the start: the watched namespaces' pods and logs,
    /// the pods' metrics (the run's and the watched namespaces'), and Prometheus scrapes.
    fn start_watching(&mut self, spec: &PlatformSpec) -> Result<(), StackError> {
        let (c, ns, origin) = (
            &self.cluster.clone(),
            self.namespace.clone(),
            self.stage_origin,
        );
        self.watch(spec)?;
        self.metrics
            .push(c.sample_metrics(&ns, "", origin, Duration::from_secs(1)));
        // The watched pods of other namespaces (a gateway's own), by the watch's selectors.
        for other in spec.watch_namespaces.iter().filter(|n| **n != ns) {
            self.metrics.push(c.sample_metrics_of(
                other,
                &spec.watch_selectors,
                origin,
                Duration::from_secs(1),
            ));
        }
        if let Some(p) = &spec.prometheus {
            let target = PromTarget {
                port: p.port,
                path: p.path.clone(),
                keep: p.metrics.clone(),
            };
            let namespaces = if p.namespaces.is_empty() {
                vec![ns.clone()]
            } else {
                p.namespaces.clone()
            };
            self.scrape =
                Some(c.scrape_prometheus_in(&namespaces, &p.selectors, &target, origin, p.every));
        }
        Ok(())
    }

    /// Each backend group's Deployment and headless Service, once the images are known to be
    /// there to pull, then every group's pods Ready.
    fn deploy_backends(&mut self, case: &Case, spec: &PlatformSpec) -> Result<(), StackError> {
        let (c, ns) = (&self.cluster.clone(), self.namespace.clone());
        let image = spec.image.clone().unwrap_or_else(|| DEFAULT_IMAGE.into());
        // An image the cluster can neither pull nor find on its nodes: one line, before any
        // pod could stick in ErrImagePull.
        let mut images = vec![(image.as_str(), self.pulling.policy(&image))];
        let proxy_image = spec.proxy_image.clone();
        if let Some(p) = proxy_image.as_deref().filter(|_| {
            self.served
                .config
                .as_ref()
                .is_some_and(|c| c.kind != proxy::ProxyKind::External)
        }) {
            images.push((p, self.pulling.policy(p)));
        }
        c.check_images(&images)?;
        for g in &case.backends {
            self.groups.push(g.name.clone());
            let name = backends::deployment_name(&g.name, &self.run_id);
            let l = labels(
                &self.run_id,
                &[(ROLE, "backend"), ("proxybench/group", &g.name)],
            );
            let pod = self.pulling.apply(backends::pod_spec(
                &image,
                &g.name,
                &g.profile,
                &self.backends.token_secret(),
            ));
            c.apply_owned(&ns, &deployment(&name, &l, g.count, pod), &self.run_id)?;
            let svc = Service {
                metadata: meta(&name, &l),
                spec: Some(ServiceSpec {
                    cluster_ip: Some("None".into()),
                    selector: Some(l.clone()),
                    ports: Some(vec![ServicePort {
                        name: Some("http".into()),
                        port: BACKEND_PORT.into(),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
                ..Default::default()
            };
            c.apply_owned(&ns, &svc, &self.run_id)?;
        }
        // Ready pods, and their addresses in the EndpointSlices the config is rendered from.
        for g in &case.backends {
            backends::wait_group(
                c,
                &ns,
                (&g.name, &self.run_id),
                (g.count as i32, spec.ready_timeout),
            )?;
        }
        Ok(())
    }

    /// A user's own gateway: nothing to deploy; its config checked, then attached to its
    /// reload command and log files, as a local run does.
    fn attach_external(
        &mut self,
        cfg: &ProxyConfig,
        stack: &StackSpec<'_>,
    ) -> Result<(), StackError> {
        // The user's own gateway: nothing to deploy; attach to its reload command and log
        // files, as a local run does.
        let ctx = RenderContext {
            prefix: stack.work.join("external"),
            generation: self.served.generation,
            ..RenderContext::default()
        };
        let rendered = self.driver.render(cfg, &ctx)?;
        if let Err(refusal) = self.driver.check(&rendered, &stack.work)? {
            return Err(platform(refusal.message));
        }
        self.attached = Some(self.driver.start("external", &ctx, &rendered)?);
        Ok(())
    }

    /// The run's proxy: its ports, its config rendered and checked in a pod of its image, the
    /// TLS Secret and config map, its Service, its Deployment, and every replica Ready and
    /// reached.
    fn deploy_proxy(
        &mut self,
        cfg: &ProxyConfig,
        spec: &PlatformSpec,
        stack: &StackSpec<'_>,
    ) -> Result<(), StackError> {
        let (c, ns, origin) = (
            &self.cluster.clone(),
            self.namespace.clone(),
            self.stage_origin,
        );
        let logs_dir = self.logs_dir.clone();
        // Ports fixed per pod: the scenario's, else the next unused ones.
        let mut used: BTreeSet<u16> = cfg.listeners.iter().filter_map(|l| l.port).collect();
        for l in &cfg.listeners {
            let port = l.port.unwrap_or_else(|| next_port(&used, LISTENER_BASE));
            used.insert(port);
            self.served.ports.insert(l.name.clone(), port);
        }
        self.admin_port = next_port(&used, ADMIN_BASE);
        used.insert(self.admin_port);
        self.control_port = next_port(&used, ADMIN_BASE);
        let rendered = self.render(cfg)?;
        let scripts = PodScripts::of(self.driver, rendered.file, stack.tls.is_some())?;
        let entry = scripts.entry.clone();
        let pre_stop_cmd = scripts.pre_stop.clone();
        let check = scripts.check.clone();
        let proxy_image = spec
            .proxy_image
            .clone()
            .unwrap_or_else(|| scripts.image.into());
        self.scripts = Some(scripts);
        let pl = labels(&self.run_id, &[(ROLE, "proxy")]);
        let proxy_name = self.name(PROXY);
        let tls_secret = self.name(TLS_SECRET);
        if let Some(t) = &stack.tls {
            let read = |p: &PathBuf| {
                std::fs::read_to_string(p).map_err(|source| StackError::Io {
                    path: p.clone(),
                    source,
                })
            };
            let mut sd = BTreeMap::new();
            sd.insert("cert.pem".to_string(), read(&t.cert)?);
            sd.insert("key.pem".to_string(), read(&t.key)?);
            c.apply_owned(
                &ns,
                &Secret {
                    metadata: meta(&tls_secret, &pl),
                    string_data: Some(sd),
                    ..Default::default()
                },
                &self.run_id,
            )?;
        }
        // The proxy's own checker, in a pod of its image, before any replica gets the config.
        if let Err(e) = check_in_pod(self, &rendered, &proxy_image, &check) {
            if self.served.tls.is_some() {
                let _ = c.delete_object::<Secret>(&ns, &tls_secret, BOUND);
            }
            return Err(e);
        }
        c.apply_owned(&ns, &config_map(&proxy_name, &pl, &rendered), &self.run_id)?;
        let pod = self.proxy_pod(
            spec,
            stack.tls.is_some(),
            (&proxy_name, &tls_secret),
            &pl,
            (&proxy_image, &entry, pre_stop_cmd.as_deref()),
        );
        self.followers = Some(c.follow_logs(&ns, &self.role_selector(PROXY), &logs_dir, origin)?);
        let kind = match spec.service_type {
            scenario::ServiceKind::ClusterIp => ServiceType::ClusterIp,
            scenario::ServiceKind::NodePort => ServiceType::NodePort,
            scenario::ServiceKind::LoadBalancer => ServiceType::LoadBalancer,
        };
        self.service = Some((kind, None));
        self.endpoints = Some(c.watch_endpoints(&ns, &proxy_name, origin));
        self.apply_service()?;
        let pod = self.pulling.apply(pod);
        c.apply_owned(
            &ns,
            &deployment(&proxy_name, &pl, cfg.replicas, pod),
            &self.run_id,
        )?;
        self.probes = Some(c.sample_probes(
            &ns,
            &self.role_selector(PROXY),
            origin,
            Duration::from_secs(1),
        ));
        c.wait_deployment_ready(&ns, &proxy_name, cfg.replicas as i32, self.ready_bound)?;
        self.find_paths(cfg.replicas)?;
        Ok(())
    }

    /// The proxy's pod template: one replica per node before a second on any, its config (and
    /// certificate) mounted, its listeners' and admin ports, readiness asked of the admin
    /// listener, and its stop (grace period and preStop), which it also records.
    fn proxy_pod(
        &mut self,
        spec: &PlatformSpec,
        tls: bool,
        (proxy_name, tls_secret): (&str, &str),
        pl: &BTreeMap<String, String>,
        (image, entry, pre_stop_cmd): (&str, &str, Option<&str>),
    ) -> PodSpec {
        let mut volumes = vec![config_volume(proxy_name)];
        let mut mounts = vec![VolumeMount {
            name: "config".into(),
            mount_path: "/config".into(),
            ..Default::default()
        }];
        if tls {
            volumes.push(tls_volume(tls_secret));
            mounts.push(tls_mount());
        }
        let (grace, pre_stop) = proxy_stop(spec);
        self.proxy_stop = Some((grace as u32, pre_stop as u32));
        let pod_ports: BTreeSet<u16> = self.served.ports.values().copied().collect();
        let mut container_ports: Vec<ContainerPort> = pod_ports
            .iter()
            .map(|p| ContainerPort {
                container_port: i32::from(*p),
                protocol: Some("TCP".into()),
                ..Default::default()
            })
            .collect();
        container_ports.push(ContainerPort {
            name: Some("admin".into()),
            container_port: i32::from(self.admin_port),
            protocol: Some("TCP".into()),
            ..Default::default()
        });
        PodSpec {
            // One replica per node before a second on any (tainted nodes, such as a lost one,
            // are left out of the count).
            topology_spread_constraints: Some(vec![TopologySpreadConstraint {
                max_skew: 1,
                topology_key: "kubernetes.io/hostname".into(),
                when_unsatisfiable: "DoNotSchedule".into(),
                label_selector: Some(LabelSelector {
                    match_labels: Some(pl.clone()),
                    ..Default::default()
                }),
                node_taints_policy: Some("Honor".into()),
                ..Default::default()
            }]),
            termination_grace_period_seconds: Some(grace),
            volumes: Some(volumes),
            containers: vec![Container {
                name: "proxy".into(),
                image: Some(image.to_string()),
                image_pull_policy: Some(PullPolicy::for_image(image).to_string()),
                command: Some(sh(entry)),
                ports: Some(container_ports),
                volume_mounts: Some(mounts),
                // The kubelet asks the admin listener: its results gate the Service's
                // endpoints, and the kubelet counts them (the report's probe results).
                readiness_probe: Some(Probe {
                    http_get: Some(HTTPGetAction {
                        path: Some("/generation".into()),
                        port: IntOrString::Int(i32::from(self.admin_port)),
                        ..Default::default()
                    }),
                    period_seconds: Some(1),
                    failure_threshold: Some(1),
                    ..Default::default()
                }),
                // Keep serving until no node routes new connections here any more (the
                // sleep), then the driver's own preStop command (Caddy's drain), then the
                // image's stop signal (graceful).
                lifecycle: Some(Lifecycle {
                    pre_stop: pre_stop_command(pre_stop, pre_stop_cmd).map(|command| {
                        LifecycleHandler {
                            exec: Some(ExecAction {
                                command: Some(command),
                            }),
                            ..Default::default()
                        }
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    /// Makes [`NO_LINGER`] in every running proxy pod, all at once, so that their preStop hooks
    /// skip the sleep. A pod that cannot be reached (a lost node) keeps its sleep, within its
    /// grace period.
    fn cut_linger(&self) {
        let Ok(pods) = self
            .cluster
            .pods(&self.namespace, Some(&self.role_selector(PROXY)))
        else {
            return;
        };
        let touch = format!("touch {NO_LINGER}");
        let (cluster, ns, touch) = (&self.cluster, self.namespace.as_str(), touch.as_str());
        std::thread::scope(|s| {
            for p in pods.iter().filter(|p| !p.deleting) {
                s.spawn(move || {
                    let _ = cluster.exec(
                        ns,
                        &p.name,
                        None,
                        &["/bin/sh", "-c", touch],
                        None,
                        Duration::from_secs(5),
                    );
                });
            }
        });
    }

    /// The run's pods on a node that is not Ready (a lost node: its kubelet cannot confirm that
    /// anything stopped, so their deletion would wait for it forever, and with them the
    /// Deployments' and the namespace's): force-deleted, as `kubectl delete --force` does, each
    /// said in the case's notes. The kubelet kills their containers if the node comes back.
    fn let_go_of_lost_nodes(&mut self) {
        let Ok(nodes) = self.cluster.nodes_ready() else {
            return;
        };
        let lost: BTreeSet<String> = nodes
            .into_iter()
            .filter(|(_, ready)| !ready)
            .map(|(n, _)| n)
            .collect();
        if lost.is_empty() {
            return;
        }
        let Ok(pods) = self
            .cluster
            .pods(&self.namespace, Some(&run_selector(&self.run_id, ROLE)))
        else {
            return;
        };
        for p in pods {
            let Some(node) = p.node.as_ref().filter(|n| lost.contains(*n)) else {
                continue;
            };
            let done = match self
                .cluster
                .delete_pod(&self.namespace, &p.name, Some(Duration::ZERO))
            {
                Ok(()) => "force-deleted".to_string(),
                Err(e) => format!("its force deletion failed: {e}"),
            };
            self.notes.push(format!(
                "pod {} ran on node {node}, which is not Ready (lost): the API cannot confirm \
                 that it stopped, so it was {done} at teardown; its log and counters end \
                 where the node was lost",
                p.name
            ));
        }
    }

    /// Applies the proxy's Service: one port per listener port, each to the same pod port.
    pub(super) fn apply_service(&self) -> Result<(), StackError> {
        let Some((kind, _)) = self.service else {
            return Ok(());
        };
        let l = labels(&self.run_id, &[(ROLE, "proxy")]);
        let ports: BTreeSet<u16> = self.served.ports.values().copied().collect();
        let ports: Vec<(String, u16)> = ports.into_iter().map(|p| (format!("p{p}"), p)).collect();
        self.cluster
            .apply_owned(
                &self.namespace,
                &k8s::service(&self.name(PROXY), &l, &l, kind, &ports),
                &self.run_id,
            )
            .map(|_| ())
            .map_err(StackError::Api)
    }

    /// Once the proxy pods are Ready: how this machine reaches them (pod IP or port-forward),
    /// and the Service's ClusterIP, once its endpoints hold every replica and it answers from
    /// here. What was found goes into the notes.
    fn find_paths(&mut self, replicas: u32) -> Result<(), StackError> {
        let (c, ns) = (self.cluster.clone(), self.namespace.clone());
        let first = self
            .proxy_pods()?
            .into_iter()
            .find_map(|p| p.ip)
            .ok_or_else(|| platform("no Running proxy pod has an IP"))?;
        let forced = std::env::var(POD_PATH_ENV).is_ok_and(|v| v == "port-forward");
        let path = if forced {
            PodPath::PortForward
        } else {
            c.detect_pod_path(first, self.admin_port, Duration::from_secs(2))
        };
        self.pod_path = Some(path);
        self.notes.push(match path {
            PodPath::PodIp => "Reload timing, generation checks and grow probes reached each \
                               proxy pod at its pod IP (this machine routes the pod network)."
                .to_string(),
            PodPath::PortForward if forced => format!(
                "Reload timing, generation checks and grow probes reached each proxy pod \
                 through a port-forward of its own ({POD_PATH_ENV}=port-forward)."
            ),
            PodPath::PortForward => "Reload timing, generation checks and grow probes reached \
                                     each proxy pod through a port-forward of its own (this \
                                     machine does not reach the pod network)."
                .to_string(),
        });
        let Some((kind, _)) = self.service else {
            return Ok(());
        };
        let svc = self.name(PROXY);
        let addr = c.service_address(&ns, &svc)?;
        let Some(ip) = addr.cluster_ip else {
            return Err(platform("the proxy's Service has no ClusterIP"));
        };
        // Every replica in the endpoints, then the address answers from here.
        let t = Instant::now();
        loop {
            let eps = c.endpoints(&ns, &svc)?;
            if eps.iter().filter(|e| e.ready).count() >= replicas as usize {
                break;
            }
            if t.elapsed() > BOUND {
                return Err(platform(format!(
                    "the proxy's Service had {} ready endpoints of {replicas} after {BOUND:?}",
                    eps.iter().filter(|e| e.ready).count()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let ports: Vec<String> = addr.ports.iter().map(|p| p.port.to_string()).collect();
        let port = addr.ports.first().map_or(0, |p| p.port);
        let t = Instant::now();
        let answered = loop {
            if k8s::reaches(ip, port, Duration::from_secs(1)) {
                break true;
            }
            if t.elapsed() > SERVICE_BOUND {
                break false;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        self.service = Some((kind, Some(ip)));
        if !answered {
            self.unreached
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(ip);
        }
        self.notes.push(if answered {
            format!(
                "The loads aimed at the proxy's Service `{svc}` ({kind}) at its \
                 ClusterIP {ip} (port {}), from this machine or, for a load with agents, from \
                 their pods: kube-proxy spread their connections over the Service's ready \
                 endpoints, as users' traffic is.",
                ports.join(", ")
            )
        } else {
            format!(
                "The proxy's Service `{svc}` ({kind}) at its ClusterIP {ip} did not \
                 answer from this machine within {SERVICE_BOUND:?} (a cluster whose Service \
                 network it does not route): every load aimed there ran from agents in the \
                 cluster, one each unless it asked for more (agents = N)."
            )
        });
        Ok(())
    }

    /// Where this machine reaches port `port` of proxy pod `p`: its pod IP, or the local end of
    /// a port-forward kept open for it.
    pub(super) fn reach_port(
        &mut self,
        p: &k8s::PodInfo,
        port: u16,
    ) -> Result<SocketAddr, StackError> {
        let ip =
            p.ip.ok_or_else(|| platform(format!("pod {} has no IP yet", p.name)))?;
        let key = (p.name.clone(), port);
        if let Some(pp) = self.reach.get(&key) {
            if pp.ip == ip && pp.forward_error().is_none() {
                return Ok(pp.addr());
            }
        }
        let path = self.pod_path.unwrap_or(PodPath::PodIp);
        let pp = self
            .cluster
            .pod_port(&self.namespace, &p.name, ip, port, path)?;
        let a = pp.addr();
        self.reach.insert(key, pp);
        Ok(a)
    }

    /// The port-forward kept for port `port` of pod `pod`, when it is reached through one: a
    /// reload's wait watches it for its death.
    pub(super) fn forward(&self, pod: &str, port: u16) -> Option<&k8s::PodPort> {
        self.reach
            .get(&(pod.to_string(), port))
            .filter(|p| p.path == k8s::PodPath::PortForward)
    }

    /// The backend groups' addresses from their Services' EndpointSlices (ready endpoints).
    fn group_addrs(&mut self) -> Result<BTreeMap<String, Vec<SocketAddr>>, StackError> {
        // New pods get their names, and their group's profile before they enter the upstreams.
        self.backends.sync(&self.cluster, &self.namespace)?;
        let mut out = BTreeMap::new();
        for g in &self.groups {
            let eps = self.cluster.endpoints(
                &self.namespace,
                &named(&format!("backend-{g}"), &self.run_id),
            )?;
            let addrs: Vec<SocketAddr> = eps
                .iter()
                .filter(|e| e.ready && !self.backends.is_leaving(e.pod.as_deref()))
                .map(|e| SocketAddr::new(e.ip, BACKEND_PORT))
                .collect();
            if let Some(a) = addrs.first() {
                self.first_backend.insert(g.clone(), *a);
            }
            out.insert(g.clone(), addrs);
        }
        Ok(out)
    }

    /// Renders `cfg` as the current generation with the pod-side paths and the cluster's
    /// upstreams, and keeps a copy in the case's configs directory.
    pub(super) fn render(&mut self, cfg: &ProxyConfig) -> Result<proxy::Rendered, StackError> {
        let groups = self.group_addrs()?;
        let ctx = self.context(groups);
        let r = self.driver.render(cfg, &ctx)?;
        let _ = std::fs::write(
            self.configs_out
                .join(format!("pod.gen{}.conf", self.served.generation)),
            &r.text,
        );
        Ok(r)
    }

    fn context(&self, groups: BTreeMap<String, Vec<SocketAddr>>) -> RenderContext {
        RenderContext {
            prefix: PathBuf::from(POD_PREFIX),
            generation: self.served.generation,
            groups,
            ports: self.served.ports.clone(),
            admin_port: self.admin_port,
            control_port: self.control_port,
            tls: self.served.tls.as_ref().map(|_| proxy::TlsFiles {
                cert: "/tls/cert.pem".into(),
                key: "/tls/key.pem".into(),
                ca: "/tls/ca.pem".into(),
            }),
            stdio_logs: true,
            // Every address of the pod's own network namespace: its Service, its kubelet's
            // probes and this machine reach it at its pod IP. The control API (Caddy's) stays
            // on the pod's loopback.
            bind: Some(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
            cluster_upstreams: true,
            remote: true,
            ..RenderContext::default()
        }
    }

    /// The proxy pods that run and are not terminating.
    pub(super) fn proxy_pods(&self) -> Result<Vec<k8s::PodInfo>, StackError> {
        let pods = self
            .cluster
            .pods(&self.namespace, Some(&self.role_selector(PROXY)))?;
        Ok(pods
            .into_iter()
            .filter(|p| !p.deleting && p.phase == "Running")
            .collect())
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

impl KubeStage {
    /// An action that is one event: played, with its detail, its result and the reloads it
    /// made (the user's gateway's reload command, or each proxy pod's).
    fn act(
        &mut self,
        action: &Action,
        keep_going: &dyn Fn() -> bool,
    ) -> (String, Result<(), StackError>, Vec<model::ReloadRecord>) {
        let mut reloads = Vec::new();
        let (detail, result): (String, Result<(), StackError>) = match action {
            Action::ScaleReplicas { to, stop } => match self.scale_replicas(*to, *stop) {
                Ok(d) => (d, Ok(())),
                Err(e) => (format!("-> {to}"), Err(e)),
            },
            Action::StopReplica { replica, mode } => {
                match self.stop_replica(replica.as_deref(), *mode) {
                    Ok(d) => (d, Ok(())),
                    Err(e) => (replica.clone().unwrap_or_else(|| "newest".into()), Err(e)),
                }
            }
            Action::Reload if self.attached.is_some() => {
                // The user's gateway: its reload command, timed to its exit.
                self.served.generation += 1;
                let r = self.reload_attached();
                let err = r.error.clone();
                reloads = vec![r];
                (
                    format!("generation {}", self.served.generation),
                    err.map_or(Ok(()), |e| Err(StackError::Reload(e))),
                )
            }
            Action::Reload => {
                let (rel, err) = self.reload_all();
                reloads = rel;
                (
                    format!("generation {}", self.served.generation),
                    err.map_or(Ok(()), Err),
                )
            }
            Action::SwapConfig(name) => match self.configs.get(name).cloned() {
                Some(cfg) => {
                    self.served.config = Some(cfg);
                    let (rel, err) = self.reload_all();
                    reloads = rel;
                    (
                        format!("{name} (generation {})", self.served.generation),
                        err.map_or(Ok(()), Err),
                    )
                }
                None => (name.clone(), Err(StackError::NoConfig(name.clone()))),
            },
            Action::KillBackend(b) | Action::DrainBackend(b) => {
                let kill = matches!(action, Action::KillBackend(_));
                match self.delete_backend(b, kill) {
                    Ok(d) => (d, Ok(())),
                    Err(e) => (b.clone(), Err(e)),
                }
            }
            Action::ScaleBackends { group, to, remove } => {
                let (r, rel) = self.scale_backends(group, *to, *remove);
                reloads = rel;
                match r {
                    Ok(d) => (d, Ok(())),
                    Err(e) => (group.clone(), Err(e)),
                }
            }
            Action::Exec {
                argv,
                timeout,
                allow_fail,
            } => {
                self.execs += 1;
                crate::platform::local::run_exec(
                    &self.exec_out,
                    self.execs,
                    argv,
                    *timeout,
                    *allow_fail,
                )
            }
            Action::Apply { .. }
            | Action::Delete { .. }
            | Action::RolloutRestart { .. }
            | Action::DeletePod { .. }
            | Action::Scale { .. } => {
                super::run::cluster_action(&self.cluster, &self.namespace, action, keep_going)
            }
            Action::SetProfile {
                group,
                backend,
                profile,
            } => match self.backends.set_profile(
                &self.cluster,
                &self.namespace,
                group.as_deref(),
                backend.as_deref(),
                profile,
            ) {
                Ok(d) => (d, Ok(())),
                Err(e) => (
                    group.clone().or(backend.clone()).unwrap_or_default(),
                    Err(e),
                ),
            },
            Action::RestartBackend(b) => {
                let (d, r, rel) = self.restart_backend(b);
                reloads = rel;
                (d, r)
            }
            Action::Grow(_) => {
                unreachable!("a growth is played by grow_template, grow_upstreams or grow")
            }
        };
        (detail, result, reloads)
    }

    /// A backend pod restarted: its replacement has a new address, which the proxy meets
    /// after a reload of every proxy pod.
    fn restart_backend(
        &mut self,
        b: &str,
    ) -> (String, Result<(), StackError>, Vec<model::ReloadRecord>) {
        match self.backends.restart(&self.cluster, &self.namespace, b) {
            Ok(d) => {
                let (rel, err) = self.reload_all();
                (
                    format!("{d}; generation {}", self.served.generation),
                    err.map_or(Ok(()), Err),
                    rel,
                )
            }
            Err(e) => (b.to_string(), Err(e), Vec::new()),
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
