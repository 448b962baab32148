//! A case's kube stage deployed: its watches, the backends, the proxy (or a user's gateway)
//! and its pods, and what is let go of when a node is lost.

use super::*;

impl KubeStage {
    /// The case's collectors that watch from the start: the watched namespaces' pods and logs,
    /// the pods' metrics (the run's and the watched namespaces'), and Prometheus scrapes.
    pub(super) fn start_watching(&mut self, spec: &PlatformSpec) -> Result<(), StackError> {
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
    pub(super) fn deploy_backends(
        &mut self,
        case: &Case,
        spec: &PlatformSpec,
    ) -> Result<(), StackError> {
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
    pub(super) fn attach_external(
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
    pub(super) fn deploy_proxy(
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
    pub(super) fn cut_linger(&self) {
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
    pub(super) fn let_go_of_lost_nodes(&mut self) {
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
}
