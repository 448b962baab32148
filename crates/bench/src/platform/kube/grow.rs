//! `grow` on Kubernetes: the same steps, probe and records as locally ([`crate::grow`]), with
//! the cluster's parts. Each step renders the next generation and writes it into every proxy
//! pod (the stage's reload), new listeners take the next port no listener of the pods has (and
//! a port on the proxy's Service), upstream servers are pods of the group's Deployment, and the
//! newest item is probed every 100 ms as NGF's scale tests do ([`crate::grow::NGF_POLL`]), on
//! the oldest proxy pod at its pod IP (or through its port-forward).
//!
//! Upstream servers are pods, and nodes hold a limited number of them (the kubelet's max-pods,
//! 110 by default): a growth that needs more pods than the schedulable nodes have room for is
//! refused before its first step, naming the limit and the largest growth that fits.

use super::{KubeStage, Served};
use crate::error::StackError;
use crate::grow::{Grower, NGF_POLL};
use model::{Event, ReadyRecord, ReloadRecord};
use scenario::{GrowSpec, GrowWhat};
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

impl Grower for KubeStage {
    fn served(&self) -> &Served {
        &self.served
    }

    fn served_mut(&mut self) -> &mut Served {
        &mut self.served
    }

    fn reload_all(&mut self) -> (Vec<ReloadRecord>, Option<StackError>) {
        KubeStage::reload_all(self)
    }

    fn add_listener_port(&mut self, name: &str) -> Result<u16, StackError> {
        let mut used: BTreeSet<u16> = self.served.ports.values().copied().collect();
        used.extend([self.admin_port, self.control_port]);
        let port = super::next_port(&used, super::LISTENER_BASE);
        self.served.ports.insert(name.to_string(), port);
        self.apply_service()?;
        Ok(port)
    }

    fn probe_addr(&mut self, port: u16) -> Result<SocketAddr, StackError> {
        let mut pods = self.proxy_pods()?;
        pods.sort_by(|a, b| a.created.cmp(&b.created));
        let p = pods.into_iter().next().ok_or(StackError::NoReplica)?;
        self.reach_port(&p, port)
    }

    fn group_size(&self, group: &str) -> u32 {
        self.cluster
            .deployment_replicas(&self.namespace, &self.backends.deployment_of(group))
            .map_or(0, |r| r.desired.max(0) as u32)
    }

    fn add_backends(&mut self, group: &str, n: u32) -> Result<(), StackError> {
        let to = self.group_size(group) + n;
        self.backends
            .scale(&self.cluster, &self.namespace, group, to)
    }

    fn ready_poll(&self) -> Duration {
        NGF_POLL
    }

    fn can_grow(&self, g: &GrowSpec, from: u32) -> Result<(), StackError> {
        if g.what != GrowWhat::UpstreamServers || g.to <= from {
            return Ok(());
        }
        // A cluster that does not let us count (no cluster-wide read access) is tried as is:
        // its scheduler then says why pods stay Pending.
        let Ok(cap) = self.cluster.pod_capacity() else {
            return Ok(());
        };
        let need = u64::from(g.to - from);
        if need <= cap.free() {
            return Ok(());
        }
        Err(StackError::Grow(format!(
            "upstream_servers to {} needs {need} more backend pods, but the cluster's {} \
             schedulable node(s) hold at most {} pods (the kubelet's max-pods) and {} run \
             already: at most {} upstream servers fit (lower `to`, or add nodes)",
            g.to,
            cap.nodes,
            cap.allocatable,
            cap.used,
            u64::from(from) + cap.free()
        )))
    }
}

impl KubeStage {
    /// `upstream_servers` behind an external gateway (`backend = "GROUP"`): each step scales
    /// the group's Deployment by `by`, waits until the new pods are Ready and in its
    /// EndpointSlices, runs the external proxy's reload command when it has one (the gateway's
    /// controller), then reads each new pod's request counter until it has answered one request
    /// through the gateway. Each step is one `grow` event and one [`ReadyRecord`] whose time to
    /// ready is the last new pod's first request, from the step's start (the scale analysis
    /// reads it as a local growth's).
    pub(super) fn grow_upstreams(
        &mut self,
        g: &GrowSpec,
        keep_going: &dyn Fn() -> bool,
    ) -> crate::platform::Applied {
        let mut out = crate::platform::Applied::default();
        let origin = self.served.origin;
        let group = g.backend.clone().unwrap_or_default();
        let mut n = self.group_size(&group);
        if let Err(e) = self.can_grow(g, n) {
            out.events.push(Event {
                t_s: origin.elapsed().as_secs_f64(),
                action: "grow".into(),
                detail: format!("upstream_servers {n} -> {}", g.to),
                duration_ms: 0.0,
                error: Some(e.to_string()),
                limit: false,
            });
            return out;
        }
        let reload = self.reloads_gateway();
        while n < g.to && keep_going() {
            let add = g.by.min(g.to - n);
            if !self.upstreams_step(g, &group, (n, add), reload, keep_going, &mut out) {
                break;
            }
            n += add;
            crate::grow::pause(g, keep_going);
        }
        out
    }

    /// One step of an upstream servers' growth: `group` scaled from `n` by `add`, the
    /// gateway reloaded, each new pod's first request awaited, with its records added to
    /// `out`; false when the growth ends here.
    fn upstreams_step(
        &mut self,
        g: &GrowSpec,
        group: &str,
        (n, add): (u32, u32),
        reload: bool,
        keep_going: &dyn Fn() -> bool,
        out: &mut crate::platform::Applied,
    ) -> bool {
        let origin = self.served.origin;
        let t0 = Instant::now();
        let t_s = t0.duration_since(origin).as_secs_f64();
        let step = format!("upstream_servers {n} -> {} (backend {group})", n + add);
        let cluster = self.cluster.clone();
        let ns = self.namespace.clone();
        // Every pod there now is named, so the ones the step adds are the new names.
        let synced = self.backends.sync(&cluster, &ns);
        let before = self.backends.pods_of(group);
        let scaled = self.backends.scale(&cluster, &ns, group, n + add);
        let in_slices_ms = t0.elapsed().as_secs_f64() * 1e3;
        let mut new: Vec<String> = self
            .backends
            .pods_of(group)
            .difference(&before)
            .cloned()
            .collect();
        new.sort();
        let mut error = synced.and(scaled).err().map(|e| e.to_string());
        let rel = (reload && error.is_none()).then(|| {
            self.served.generation += 1;
            self.reload_attached()
        });
        if let Some(e) = rel.as_ref().and_then(|r| r.error.clone()) {
            error.get_or_insert(format!("the gateway's reload command: {e}"));
        }
        let firsts = if error.is_none() {
            self.backends
                .first_traffic(&cluster, &ns, &new, (t0, g.ready_timeout.0), keep_going)
        } else {
            Vec::new()
        };
        let mut ready_ms: Option<f64> = (!firsts.is_empty()).then_some(0.0);
        let mut seen = Vec::new();
        for (pod, r) in &firsts {
            match r {
                Ok(ms) => {
                    ready_ms = ready_ms.map(|m| m.max(*ms));
                    seen.push(format!("{pod} {ms:.0} ms"));
                }
                Err(e) => {
                    ready_ms = None;
                    error.get_or_insert(format!("pod {pod} got no traffic: {e}"));
                }
            }
        }
        if error.is_none() && new.len() != add as usize {
            error = Some(format!(
                "{} new pods of backend {group}, not {add}: {}",
                new.len(),
                new.join(", ")
            ));
        }
        out.ready.push(ReadyRecord {
            t_s,
            what: g.what.name().into(),
            count: n + add,
            item: format!("backend {group}: {}", new.join(", ")),
            generation: self.served.generation,
            ready_ms: if error.is_none() { ready_ms } else { None },
            error: error.clone(),
        });
        out.reloads.extend(rel);
        out.events.push(Event {
            t_s,
            action: "grow".into(),
            detail: format!(
                "{step}: Ready and in its EndpointSlices at {in_slices_ms:.0} ms; first \
                 request: {}",
                if seen.is_empty() {
                    "none".to_string()
                } else {
                    seen.join(", ")
                }
            ),
            duration_ms: t0.elapsed().as_secs_f64() * 1e3,
            error: error.clone(),
            limit: false,
        });
        !(error.is_some() && g.stop_on_error)
    }

    /// Whether each growth step runs the user's gateway's reload command (its controller):
    /// the run is attached to an external proxy that has one.
    fn reloads_gateway(&self) -> bool {
        self.served
            .config
            .as_ref()
            .and_then(|c| c.external.as_ref())
            .is_some_and(|e| !e.reload.is_empty())
            && self.attached.is_some()
    }

    /// A built-in generator's parameters for this run (none for a user's template): its routes
    /// send to the run's backend group's Service, as the stage names it, or to `backend_ref`.
    fn generator_params(
        &self,
        g: &GrowSpec,
        ns: &str,
        run: &str,
    ) -> Result<Option<manifests::template::Params>, StackError> {
        use manifests::generators::{params, BackendRef};
        use scenario::generators::{backend_ref, BUILTIN};
        if !g
            .template
            .as_deref()
            .is_some_and(|t| t.starts_with(BUILTIN))
        {
            return Ok(None);
        }
        let service = g.backend.as_deref().map(|b| self.backends.deployment_of(b));
        let backend = match (&service, &g.backend_ref) {
            (Some(s), _) => BackendRef {
                service: s,
                port: super::backends::BACKEND_PORT,
            },
            (None, Some(r)) => {
                let (service, port) = backend_ref(r).ok_or_else(|| {
                    StackError::Grow(format!("backend_ref '{r}' is not SERVICE:PORT"))
                })?;
                BackendRef { service, port }
            }
            (None, None) => {
                return Err(StackError::Grow(
                    "a built-in generator needs a backend".into(),
                ))
            }
        };
        params(g, ns, run, backend, &|hosts| {
            proxy::tls::self_signed_pem(hosts)
                .map_err(|e| manifests::generators::CertificateError(e.to_string()))
        })
        .map(Some)
        .map_err(StackError::from)
    }

    /// A templated `grow` on an external gateway: each step renders items n..n+by of the
    /// template (`{{ i }}`, `{{ namespace }}`, `{{ run }}`, `{{ name }}`), applies them, runs
    /// the external proxy's reload command when it has one, waits for the `wait` condition, and
    /// probes every data-plane replica meanwhile (the probe's `host` and `path` rendered for
    /// the step's last item). Each step is one `grow` event, one [`ReadyRecord`] (time to ready:
    /// the last replica's, so the scale analysis reads it as the local growth's) and one probe
    /// record with every replica's times.
    /// The Service of each of the run's backend groups, by group: `{{ backends.GROUP }}` in
    /// a template.
    pub(super) fn backend_services(&self) -> std::collections::BTreeMap<String, String> {
        self.groups
            .iter()
            .map(|g| (g.clone(), self.backends.deployment_of(g)))
            .collect()
    }

    /// An `apply` or `delete` of a template (a file ending in `.j2`): the same action on the
    /// template rendered with the run's values (item 0: `{{ namespace }}`, `{{ run }}`,
    /// `{{ name }}`, `{{ backends.GROUP }}`), written beside the case's configs; `None` for any
    /// other action.
    pub(super) fn rendered_manifest(
        &self,
        action: &scenario::Action,
    ) -> Option<Result<scenario::Action, StackError>> {
        use manifests::template::{check_item, ItemVars};
        let (scenario::Action::Apply { file, .. } | scenario::Action::Delete { file, .. }) = action
        else {
            return None;
        };
        let name = file.file_name()?.to_str()?.strip_suffix(".j2")?.to_string();
        let ns = action.namespace().unwrap_or(&self.namespace).to_string();
        let backends = self.backend_services();
        let out = self.configs_out.join("apply").join(&name);
        let r = std::fs::read_to_string(file)
            .map_err(|source| StackError::Io {
                path: file.clone(),
                source,
            })
            .and_then(|text| {
                let vars = ItemVars {
                    i: 0,
                    namespace: &ns,
                    run: &self.run_id,
                    params: None,
                    backends: Some(&backends),
                };
                Ok(check_item(file, &text, vars)?)
            })
            .and_then(|yaml| {
                std::fs::create_dir_all(out.parent().expect("a file in a folder"))
                    .and_then(|()| std::fs::write(&out, yaml))
                    .map_err(|source| StackError::Io {
                        path: out.clone(),
                        source,
                    })
            })
            .map(|()| {
                let mut a = action.clone();
                if let scenario::Action::Apply { file, .. }
                | scenario::Action::Delete { file, .. } = &mut a
                {
                    *file = out.clone();
                }
                a
            });
        Some(r)
    }

    /// A templated growth: each step renders its items, applies them, runs the gateway's
    /// reload command when it has one, waits for the condition and probes the newest item at
    /// every replica; a template, write or probe that fails ends the growth with its event.
    pub(super) fn grow_template(
        &mut self,
        g: &GrowSpec,
        keep_going: &dyn Fn() -> bool,
    ) -> crate::platform::Applied {
        let mut out = crate::platform::Applied::default();
        let growth = match self.growth(g) {
            Ok(x) => x,
            Err(e) => {
                let detail = format!("{} 0 -> {}", g.what.name(), g.to);
                out.events.push(grow_event(
                    self.served.origin,
                    Instant::now(),
                    detail,
                    Some(e.to_string()),
                ));
                return out;
            }
        };
        let mut n = 0;
        while n < g.to && keep_going() {
            let add = g.by.min(g.to - n);
            if !self.grow_step(&growth, n, add, keep_going, &mut out) {
                break;
            }
            n += add;
            crate::grow::pause(g, keep_going);
        }
        out
    }

    /// What every step of a templated growth uses, made once: the template's text, a built-in
    /// generator's parameters, the probe, where the items are written, and the wait.
    fn growth<'g>(&self, g: &'g GrowSpec) -> Result<Growth<'g>, StackError> {
        let path = PathBuf::from(g.template.clone().unwrap_or_default());
        let dir = self.configs_out.join("grow");
        let ns = g
            .namespace
            .clone()
            .unwrap_or_else(|| self.namespace.clone());
        let run = self.run_id.clone();
        let text = manifests::generators::source(&path.display().to_string())
            .map_err(|e| StackError::Grow(format!("template {}: {e}", path.display())))?
            .into_owned();
        let params = self.generator_params(g, &ns, &run)?;
        std::fs::create_dir_all(&dir).map_err(|source| StackError::Io {
            path: dir.clone(),
            source,
        })?;
        let probe = g
            .probe
            .clone()
            .ok_or_else(|| StackError::Grow("a templated growth needs a probe".into()))?;
        let wait = g.wait.as_deref().and_then(|w| {
            let c = w.strip_prefix("condition=")?;
            let (kind, status) = c.split_once('=').unwrap_or((c, "True"));
            Some(scenario::Wait {
                until: scenario::WaitFor::Condition {
                    kind: kind.to_string(),
                    status: status.to_string(),
                },
                timeout: g.ready_timeout.0,
            })
        });
        let reload = self.reloads_gateway();
        let tname = path.file_name().map_or_else(
            || path.display().to_string(),
            |f| f.to_string_lossy().into_owned(),
        );
        Ok(Growth {
            g,
            path,
            text,
            params,
            probe,
            ns,
            run,
            dir,
            tname,
            wait,
            reload,
        })
    }

    /// One step of a templated growth: items `n..n + add` rendered, written, applied and
    /// probed, with its records added to `out`; false when the growth ends here.
    fn grow_step(
        &mut self,
        growth: &Growth<'_>,
        n: u32,
        add: u32,
        keep_going: &dyn Fn() -> bool,
        out: &mut crate::platform::Applied,
    ) -> bool {
        let origin = self.served.origin;
        let g = growth.g;
        let last = n + add - 1;
        let step = format!("{} {n} -> {}", g.what.name(), n + add);
        let (file, plan) = match self.prepare_step(growth, n, last) {
            Ok(x) => x,
            Err(e) => {
                out.events.push(grow_event(
                    origin,
                    Instant::now(),
                    step,
                    Some(e.to_string()),
                ));
                return false;
            }
        };
        let items = if add == 1 {
            format!("{} item {last}", growth.tname)
        } else {
            format!("{} items {n}..={last}", growth.tname)
        };
        let ns = &growth.ns;
        let cluster = self.cluster.clone();
        let ((detail, r, rel), t0, replicas, perr) =
            super::probe::probed(&cluster, &plan, keep_going, |t0| {
                let (detail, r) = super::run::manifest_action(
                    &cluster,
                    ns,
                    (&file, true, None),
                    t0,
                    items.clone(),
                );
                if let Err(e) = r {
                    return (detail, Err(e), None);
                }
                // The gateway's controller: the external proxy's reload command.
                let rel = growth.reload.then(|| {
                    self.served.generation += 1;
                    self.reload_attached()
                });
                if let Some(e) = rel.as_ref().and_then(|r| r.error.clone()) {
                    return (detail, Err(StackError::Reload(e)), rel);
                }
                match &growth.wait {
                    Some(w) => {
                        let (d, r) = super::run::wait_for(&cluster, ns, &file, w, t0, detail);
                        (d, r, rel)
                    }
                    None => (detail, Ok(None), rel),
                }
            });
        let t_s = t0.duration_since(origin).as_secs_f64();
        let (condition_ms, error) = match r {
            Ok(c) => (c, perr.clone()),
            Err(e) => (None, Some(e.to_string())),
        };
        // Time to ready of the step: when the last replica still there was ready.
        let here: Vec<&model::ReplicaProbe> = replicas.iter().filter(|r| !r.gone).collect();
        let ready_ms = (!here.is_empty())
            .then(|| {
                here.iter()
                    .map(|r| r.ready_ms)
                    .collect::<Option<Vec<f64>>>()
            })
            .flatten()
            .and_then(|v| v.into_iter().reduce(f64::max));
        let rec = super::probe::record(&plan, (t_s, "grow", items), condition_ms, replicas, perr);
        out.ready.push(ReadyRecord {
            t_s,
            what: g.what.name().into(),
            count: n + add,
            item: rec.request.clone(),
            generation: self.served.generation,
            ready_ms,
            error: error.clone(),
        });
        let detail = format!("{step}: {detail}; {}", super::probe::summary(&rec));
        out.probes.push(rec);
        out.reloads.extend(rel);
        let failed = error.is_some();
        out.events.push(Event {
            t_s,
            ..grow_event(origin, t0, detail, error)
        });
        !(failed && g.stop_on_error)
    }

    /// Items `n..=last` of a step rendered and written (configs/grow/item-N.yaml) and its
    /// probe planned for the last of them.
    fn prepare_step(
        &mut self,
        growth: &Growth<'_>,
        n: u32,
        last: u32,
    ) -> Result<(PathBuf, super::probe::ProbePlan), StackError> {
        let backends = self.backend_services();
        let (docs, probe) = growth.render(n, last, &backends)?;
        let file = growth.dir.join(format!("item-{n}.yaml"));
        let body: String = docs
            .iter()
            .map(|d| format!("---\n{}{}", d, if d.ends_with('\n') { "" } else { "\n" }))
            .collect();
        std::fs::write(&file, body).map_err(|source| StackError::Io {
            path: file.clone(),
            source,
        })?;
        let plan = self.probe_plan(&probe, Some(&growth.ns))?;
        Ok((file, plan))
    }
}

/// A templated growth's event at `t0` (its time from the case's `origin`), lasting until now.
fn grow_event(origin: Instant, t0: Instant, detail: String, error: Option<String>) -> Event {
    Event {
        t_s: t0.duration_since(origin).as_secs_f64(),
        action: "grow".into(),
        detail,
        duration_ms: t0.elapsed().as_secs_f64() * 1e3,
        error,
        limit: false,
    }
}

/// What every step of a templated growth uses ([`KubeStage::growth`]).
struct Growth<'g> {
    /// The growth as the scenario gives it.
    g: &'g GrowSpec,
    /// Its template (a file, or a built-in generator's `builtin:WHAT`).
    path: PathBuf,
    /// The template's text.
    text: String,
    /// A built-in generator's parameters (none for a user's template).
    params: Option<manifests::template::Params>,
    /// The probe, its path and host still templates.
    probe: scenario::ProbeSpec,
    /// The namespace the items go to when they name none.
    ns: String,
    /// The run's id, `{{ run }}`.
    run: String,
    /// Where each step's items are written (the case's configs/grow).
    dir: PathBuf,
    /// The template's file name, as events and probe records name it.
    tname: String,
    /// The condition each step's objects are waited on for.
    wait: Option<scenario::Wait>,
    /// Whether each step runs the external gateway's reload command.
    reload: bool,
}

impl Growth<'_> {
    /// Items `n..=last` rendered, and the probe with its host and path rendered for the last.
    fn render(
        &self,
        n: u32,
        last: u32,
        backends: &std::collections::BTreeMap<String, String>,
    ) -> Result<(Vec<String>, scenario::ProbeSpec), manifests::template::TemplateError> {
        use manifests::template::{check_item, render_item, ItemVars};
        let vars = |i| ItemVars {
            i,
            namespace: &self.ns,
            run: &self.run,
            params: self.params.as_ref(),
            backends: Some(backends),
        };
        let docs = (n..=last)
            .map(|i| check_item(&self.path, &self.text, vars(i)))
            .collect::<Result<Vec<String>, _>>()?;
        let mut p = self.probe.clone();
        p.path = render_item(
            std::path::Path::new("probe.path"),
            &self.probe.path,
            vars(last),
        )?;
        if let Some(h) = &self.probe.host {
            p.host = Some(render_item(
                std::path::Path::new("probe.host"),
                h,
                vars(last),
            )?);
        }
        Ok((docs, p))
    }
}
