//! How the kube stage reaches what it deployed: the Service, the paths to each pod from this
//! machine, the backend groups' addresses and the proxy config rendered against them.

use super::*;

impl KubeStage {
    /// Applies the proxy's Service: one port per listener port, each to the same pod port.
    pub(in crate::platform::kube) fn apply_service(&self) -> Result<(), StackError> {
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
    pub(super) fn find_paths(&mut self, replicas: u32) -> Result<(), StackError> {
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
    pub(in crate::platform::kube) fn reach_port(
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
    pub(in crate::platform::kube) fn forward(&self, pod: &str, port: u16) -> Option<&k8s::PodPort> {
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
    pub(in crate::platform::kube) fn render(
        &mut self,
        cfg: &ProxyConfig,
    ) -> Result<proxy::Rendered, StackError> {
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
    pub(in crate::platform::kube) fn proxy_pods(&self) -> Result<Vec<k8s::PodInfo>, StackError> {
        let pods = self
            .cluster
            .pods(&self.namespace, Some(&self.role_selector(PROXY)))?;
        Ok(pods
            .into_iter()
            .filter(|p| !p.deleting && p.phase == "Running")
            .collect())
    }
}
