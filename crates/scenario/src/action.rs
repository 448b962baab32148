//! `[[actions]]`: an entry's deserialisation (a time, an optional repeat and exactly one action
//! key) and the action plan's validation, which expands each entry into the [`Step`]s it fires
//! and checks each against the case as the earlier actions leave it.

mod checks;

use crate::error::Invalid;
use crate::layers::Source;
use crate::platform::{dns_label, dns_subdomain, label_selector, relative_to_file, PlatformKind};
use crate::spec::{
    Action, DeletePods, GrowSpec, GrowWhat, ProbeSpec, ScaleBackends, ScaleReplicas, ScaleWorkload,
    SetProfile, Step, StopReplica, Wait, WaitFor, Workload, WorkloadKind,
};
use checks::{backend_exists, check_grow, check_probe, check_upstream_servers};
use serde::Deserialize;
use setup::proxy::ProxyConfig;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;
use units::Dur;

/// One `[[actions]]` entry: a time, an optional repeat, and exactly one action, written as a key
/// of the same table (`at = "10s"` next to `kill_backend = "cafe-2"`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ActionSpec {
    pub(crate) at: Dur,
    every: Option<Dur>,
    times: Option<u32>,
    action: ActionKind,
    /// `exec` only: how long the command may run.
    timeout: Option<Dur>,
    /// `exec` only: a non-zero exit or a timeout does not fail the run.
    allow_fail: Option<bool>,
    /// Cluster actions only: the namespace they act in (the run's when absent).
    namespace: Option<String>,
    /// `apply` and `delete` only: what to wait for on each object (`condition=TYPE`, `delete`).
    wait: Option<String>,
    /// `apply` and `delete` only: the data-plane probe whose per-replica times are the record.
    probe: Option<ProbeSpec>,
}

/// The action of an `[[actions]]` entry as written: the key names it, the value is its argument.
/// Externally tagged, so each variant reads its own value with the spans (and lines) kept.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum ActionKind {
    ScaleBackends(ScaleBackends),
    ScaleReplicas(ScaleReplicas),
    Reload(bool),
    SwapConfig(String),
    SetProfile(SetProfile),
    DrainBackend(String),
    KillBackend(String),
    RestartBackend(String),
    StopReplica(StopReplica),
    Grow(Box<GrowSpec>),
    Exec(Vec<String>),
    Apply(String),
    Delete(String),
    RolloutRestart(String),
    DeletePod(DeletePods),
    Scale(ScaleWorkload),
}

/// The action keys, in the order messages list them (the variants of [`ActionKind`]).
const ACTION_KEYS: [&str; 16] = [
    "scale_backends",
    "scale_replicas",
    "reload",
    "swap_config",
    "set_profile",
    "drain_backend",
    "kill_backend",
    "restart_backend",
    "stop_replica",
    "grow",
    "exec",
    "apply",
    "delete",
    "rollout_restart",
    "delete_pod",
    "scale",
];

/// Every key an `[[actions]]` entry may hold: the timing keys, `exec`'s options, the cluster
/// actions' `namespace`, then the action keys.
const ACTION_FIELDS: [&str; 24] = [
    "at",
    "every",
    "times",
    "timeout",
    "allow_fail",
    "namespace",
    "wait",
    "probe",
    ACTION_KEYS[0],
    ACTION_KEYS[1],
    ACTION_KEYS[2],
    ACTION_KEYS[3],
    ACTION_KEYS[4],
    ACTION_KEYS[5],
    ACTION_KEYS[6],
    ACTION_KEYS[7],
    ACTION_KEYS[8],
    ACTION_KEYS[9],
    ACTION_KEYS[10],
    ACTION_KEYS[11],
    ACTION_KEYS[12],
    ACTION_KEYS[13],
    ACTION_KEYS[14],
    ACTION_KEYS[15],
];

impl<'de> Deserialize<'de> for ActionSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ActionSpec, D::Error> {
        d.deserialize_struct("ActionSpec", &ACTION_FIELDS, action_de::EntryVisitor)
    }
}

/// The serde plumbing of [`ActionSpec`] (action/action_de.rs).
mod action_de;

/// What a case's actions are checked against besides the case: the file (for manifest paths)
/// and the platform.
pub(crate) struct Where<'a> {
    pub(crate) src: &'a Source,
    pub(crate) kind: PlatformKind,
    /// The type of the proxy's Service on Kubernetes (`[platform] service_type`).
    pub(crate) service_type: crate::platform::ServiceKind,
    pub(crate) check_files: bool,
    /// What renders the scenario's templates at parse (none: they are not rendered).
    pub(crate) templates: Option<&'static dyn crate::Templates>,
}

/// How long an `exec` command may run when its action says no `timeout`.
const EXEC_TIMEOUT: Duration = Duration::from_secs(60);

/// Most steps the actions of one case may expand into (every repeat and every gradual step).
const MAX_STEPS: usize = 100_000;
/// Most backend instances of one group: each holds a listening socket and its connections, and
/// the open-files limit here is 20000.
pub(crate) const MAX_BACKENDS: u32 = 10_000;
/// Most proxy replicas: each is a process tree (a master and its workers, say) on this machine.
pub(crate) const MAX_REPLICAS: u32 = 64;

/// Group sizes and replica count as the plan stands after the actions expanded so far, so that a
/// later scaling action starts from where an earlier one left off.
pub(crate) struct Sizes {
    pub(crate) groups: BTreeMap<String, u32>,
    pub(crate) replicas: u32,
}

/// Expands one `[[actions]]` entry into its steps (every repeat, every gradual step), checking
/// it against the plan as it stands; `sizes` moves on to where the entry leaves the case.
pub(crate) fn expand_action(
    on: &Where<'_>,
    a: &ActionSpec,
    sizes: &mut Sizes,
    proxy: Option<&ProxyConfig>,
    configs: &BTreeMap<String, ProxyConfig>,
    out: &mut Vec<Step>,
) -> Result<(), Invalid> {
    let times = repeats(a)?;
    check_bounds(&a.action)?;
    let every = a.every.map(|d| d.0).unwrap_or_default();
    let plan = Plan { proxy, configs, on };
    for k in 0..times {
        if out.len() > MAX_STEPS {
            return Err(Invalid::from(format!(
                "the actions expand to more than {MAX_STEPS} steps; use fewer `times` or larger steps"
            )));
        }
        let at = every
            .checked_mul(k)
            .and_then(|d| a.at.0.checked_add(d))
            .ok_or("`at` + `every` x `times` is beyond any run's length")?;
        plan.expand_once(a, at, sizes, out)?;
    }
    Ok(())
}

/// How many times an entry fires: once, or `times` times `every` apart.
fn repeats(a: &ActionSpec) -> Result<u32, Invalid> {
    match (a.every, a.times) {
        (None, None) => Ok(1),
        (Some(_), Some(n)) if n >= 1 => Ok(n),
        (Some(_), None) => Err(Invalid::from("`every` needs `times`")),
        (None, Some(_)) => Err(Invalid::from("`times` needs `every`")),
        _ => Err(Invalid::from("`times` must be at least 1")),
    }
}

/// Refuses sizes beyond this machine before anything is expanded (a gradual scaling to millions
/// would otherwise expand millions of steps first).
fn check_bounds(action: &ActionKind) -> Result<(), Invalid> {
    match action {
        ActionKind::ScaleBackends(s) if s.to > MAX_BACKENDS => Err(Invalid::from(format!(
            "scale_backends: {} instances is beyond what one machine can hold (at most {MAX_BACKENDS})",
            s.to
        ))),
        ActionKind::ScaleReplicas(s) if s.to > MAX_REPLICAS => Err(Invalid::from(format!(
            "scale_replicas: {} replicas is beyond what one machine can run (at most {MAX_REPLICAS})",
            s.to
        ))),
        _ => Ok(()),
    }
}

/// What the actions of a case are checked against: its proxy and its alternative configs.
struct Plan<'a> {
    proxy: Option<&'a ProxyConfig>,
    configs: &'a BTreeMap<String, ProxyConfig>,
    on: &'a Where<'a>,
}

impl Plan<'_> {
    /// The steps of one firing of `action` at `at`.
    fn expand_once(
        &self,
        spec: &ActionSpec,
        at: Duration,
        sizes: &mut Sizes,
        out: &mut Vec<Step>,
    ) -> Result<(), Invalid> {
        let action = &spec.action;
        self.external_allows(spec)?;
        self.platform_allows(action)?;
        let mut push = |at: Duration, action: Action| out.push(Step { at, action });
        match action {
            ActionKind::ScaleBackends(s) => {
                let from = *sizes
                    .groups
                    .get(&s.group)
                    .ok_or_else(|| format!("scale_backends: no backend group '{}'", s.group))?;
                self.need_proxy()?;
                gradual(from, s.to, s.step.map(|d| d.0), at, |at, to| {
                    let group = s.group.clone();
                    let remove = s.remove;
                    push(at, Action::ScaleBackends { group, to, remove })
                });
                sizes.groups.insert(s.group.clone(), s.to);
            }
            ActionKind::ScaleReplicas(s) => {
                self.need_proxy()?;
                if s.to == 0 {
                    return Err(Invalid::from("scale_replicas: `to` must be at least 1"));
                }
                gradual(sizes.replicas, s.to, s.step.map(|d| d.0), at, |at, to| {
                    push(at, Action::ScaleReplicas { to, stop: s.stop })
                });
                sizes.replicas = s.to;
            }
            ActionKind::Reload(r) => {
                self.need_proxy()?;
                if !r {
                    return Err(Invalid::from(
                        "`reload = false` does nothing; remove the action",
                    ));
                }
                push(at, Action::Reload);
            }
            ActionKind::SwapConfig(c) => {
                self.need_proxy()?;
                if !self.configs.contains_key(c) {
                    return Err(Invalid::from(format!(
                        "swap_config: no [configs.{c}] (defined: {})",
                        self.configs.keys().cloned().collect::<Vec<_>>().join(", ")
                    )));
                }
                push(at, Action::SwapConfig(c.clone()));
            }
            ActionKind::SetProfile(s) => {
                match (&s.group, &s.backend) {
                    (Some(g), None) if sizes.groups.contains_key(g) => {}
                    (Some(g), None) => {
                        return Err(Invalid::from(format!(
                            "set_profile: no backend group '{g}'"
                        )))
                    }
                    (None, Some(b)) => backend_exists(&sizes.groups, b)?,
                    _ => {
                        return Err(Invalid::from(
                            "set_profile needs exactly one of `group` or `backend`",
                        ))
                    }
                }
                push(
                    at,
                    Action::SetProfile {
                        group: s.group.clone(),
                        backend: s.backend.clone(),
                        profile: s.profile.clone(),
                    },
                );
            }
            ActionKind::DrainBackend(b) => {
                backend_exists(&sizes.groups, b)?;
                push(at, Action::DrainBackend(b.clone()));
            }
            ActionKind::KillBackend(b) => {
                backend_exists(&sizes.groups, b)?;
                push(at, Action::KillBackend(b.clone()));
            }
            ActionKind::RestartBackend(b) => {
                backend_exists(&sizes.groups, b)?;
                push(at, Action::RestartBackend(b.clone()));
            }
            ActionKind::Grow(g) => push(at, Action::Grow(self.grow(g, &sizes.groups)?)),
            ActionKind::StopReplica(s) => {
                self.need_proxy()?;
                push(
                    at,
                    Action::StopReplica {
                        replica: s.replica.clone(),
                        mode: s.mode,
                    },
                );
            }
            ActionKind::Exec(argv) => push(at, exec(spec, argv)?),
            ActionKind::Apply(_)
            | ActionKind::Delete(_)
            | ActionKind::RolloutRestart(_)
            | ActionKind::DeletePod(_)
            | ActionKind::Scale(_) => push(at, self.cluster_action(spec, sizes)?),
        }
        Ok(())
    }

    /// A `grow` action as it will run: a user's template checked, or a built-in generator's
    /// made into one for an external gateway (its probe made a gRPC call for GRPCRoutes), or
    /// the run's own proxy's growth checked.
    fn grow(&self, g: &GrowSpec, groups: &BTreeMap<String, u32>) -> Result<Box<GrowSpec>, Invalid> {
        let p = self.proxy.ok_or("grow needs a [proxy]")?;
        let mut g = g.clone();
        let generator_key = crate::generators::keys(&g)
            .into_iter()
            .find_map(|(k, set)| set.then_some(k));
        if g.template.is_some() {
            if let Some(k) = generator_key {
                return Err(Invalid::from(format!(
                    "grow: `{k}` belongs to a built-in generator (no `template`); a \
                     template of your own writes it in its manifests"
                )));
            }
            self.check_template(&mut g, p, false, groups)?;
        } else if p.external.is_some() && g.what == GrowWhat::UpstreamServers {
            // The run's backend group grows behind the gateway.
            check_upstream_servers(&g, groups)?;
        } else if p.external.is_some() {
            // A built-in generator: rendered as a user's template is.
            crate::generators::check(&g, groups)?;
            let name = crate::generators::builtin_name(g.what)
                .ok_or("grow: upstream_servers has no generator")?;
            g.template = Some(name);
            if let Some(probe) = g.probe.as_mut() {
                if probe.host.is_none() {
                    probe.host = Some("{{ hostnames[i] }}".into());
                }
                // A GRPCRoute serves gRPC: its probe is a call, over TLS when the
                // probe's scheme is https.
                if g.what == GrowWhat::GrpcRoutes && !probe.grpc() {
                    if probe.status.is_some() {
                        return Err(Invalid::from(format!(
                            "grow: grpc_routes are probed with a gRPC call, whose answer \
                             is a gRPC code: set probe.scheme = \"grpc\" (or \"grpcs\") \
                             with that status, not {}",
                            probe.scheme
                        )));
                    }
                    probe.scheme = format!("grpc{}", &probe.scheme[4..]);
                }
            }
            self.check_template(&mut g, p, true, groups)?;
        } else {
            if let Some(k) = generator_key {
                return Err(Invalid::from(format!(
                    "grow: `{k}` belongs to a built-in generator of an external \
                     gateway's growth ([proxy] kind = \"external\", Kubernetes)"
                )));
            }
            for (key, set) in [
                ("namespace", g.namespace.is_some()),
                ("wait", g.wait.is_some()),
                ("probe", g.probe.is_some()),
            ] {
                if set {
                    return Err(Invalid::from(format!(
                        "grow: `{key}` belongs to a templated growth (grow = {{ template \
                         = \"FILE\", ... }})"
                    )));
                }
            }
            check_grow(&g, p)?;
        }
        Ok(Box::new(g))
    }

    /// The Kubernetes actions (`apply`, `delete`, `rollout_restart`, `delete_pod`, `scale`):
    /// their manifests, namespaces, waits and probes checked.
    fn cluster_action(&self, spec: &ActionSpec, sizes: &Sizes) -> Result<Action, Invalid> {
        match &spec.action {
            ActionKind::Apply(f) => {
                let file = self.manifest("apply", f, &sizes.groups, spec)?;
                let namespace = namespace("apply", spec)?;
                let wait = wait_of("apply", spec)?;
                let probe = self.probe_of("apply", spec.probe.as_ref())?;
                Ok(Action::Apply {
                    file,
                    namespace,
                    wait,
                    probe,
                })
            }
            ActionKind::Delete(f) => {
                let file = self.manifest("delete", f, &sizes.groups, spec)?;
                let namespace = namespace("delete", spec)?;
                let wait = wait_of("delete", spec)?;
                let probe = self.probe_of("delete", spec.probe.as_ref())?;
                Ok(Action::Delete {
                    file,
                    namespace,
                    wait,
                    probe,
                })
            }
            ActionKind::RolloutRestart(w) => {
                let target = workload("rollout_restart", w, false)?;
                let namespace = namespace("rollout_restart", spec)?;
                let probe = self.probe_of("rollout_restart", spec.probe.as_ref())?;
                Ok(Action::RolloutRestart {
                    target,
                    namespace,
                    probe,
                })
            }
            ActionKind::DeletePod(d) => {
                label_selector(&d.selector)
                    .map_err(|e| format!("delete_pod: selector '{}': {e}", d.selector))?;
                if d.count == 0 {
                    return Err(Invalid::from("delete_pod: `count` must be at least 1"));
                }
                Ok(Action::DeletePod {
                    selector: d.selector.clone(),
                    count: d.count,
                    grace: d.grace.0,
                    namespace: namespace("delete_pod", spec)?,
                })
            }
            ActionKind::Scale(w) => {
                let target = workload("scale", &w.target, true)?;
                if w.step.is_some_and(|s| s.0.is_zero()) {
                    return Err(Invalid::from(
                        "scale: `step` must be more than 0 (leave it out to scale at once)",
                    ));
                }
                Ok(Action::Scale {
                    target,
                    to: w.to,
                    step: w.step.map(|d| d.0).unwrap_or_default(),
                    namespace: namespace("scale", spec)?,
                    probe: self.probe_of("scale", spec.probe.as_ref())?,
                })
            }
            _ => unreachable!("cluster_action is called for the Kubernetes actions only"),
        }
    }

    /// Refuses the Kubernetes-only actions on the local platform.
    fn platform_allows(&self, action: &ActionKind) -> Result<(), Invalid> {
        let key = match action {
            ActionKind::Apply(_) => "apply",
            ActionKind::Delete(_) => "delete",
            ActionKind::RolloutRestart(_) => "rollout_restart",
            ActionKind::DeletePod(_) => "delete_pod",
            ActionKind::Scale(_) => "scale",
            _ => return Ok(()),
        };
        if self.on.kind == PlatformKind::Kubernetes {
            return Ok(());
        }
        Err(Invalid::from(format!(
            "{key} needs [platform] kind = \"kubernetes\" (or `run --platform kubernetes`)"
        )))
    }

    /// The manifest an `apply` or `delete` names, relative to the scenario file, which must
    /// exist when the run starts.
    /// A manifest's path, resolved against the scenario file and checked to be a file; one
    /// ending in `.j2` is a template, rendered now (item 0, the run's backend Services as
    /// stand-ins) and refused at the action's line when it does not render into Kubernetes
    /// objects.
    fn manifest(
        &self,
        action: &str,
        f: &str,
        groups: &BTreeMap<String, u32>,
        spec: &ActionSpec,
    ) -> Result<PathBuf, Invalid> {
        if f.is_empty() {
            return Err(Invalid::from(format!(
                "{action}: the manifest path is empty"
            )));
        }
        let path = relative_to_file(self.on.src, f);
        if self.on.check_files {
            match std::fs::metadata(&path) {
                Ok(m) if m.is_file() => {}
                Ok(_) => {
                    return Err(Invalid::from(format!(
                        "{action}: {} is not a file",
                        path.display()
                    )))
                }
                Err(e) => return Err(Invalid::from(format!("{action}: {}: {e}", path.display()))),
            }
            if let (true, Some(t)) = (f.ends_with(".j2"), self.on.templates) {
                let ns = spec.namespace.as_deref().unwrap_or("check");
                t.check_manifest(&path, ns, groups)
                    .map_err(|e| format!("{action}: {e}"))?;
            }
        }
        Ok(path)
    }

    /// Refuses, on an external target, the actions that would start, stop or re-render a proxy
    /// proxybench did not start, and a reload without the command that does it.
    fn external_allows(&self, spec: &ActionSpec) -> Result<(), Invalid> {
        let Some(ext) = self.proxy.and_then(|p| p.external.as_ref()) else {
            return Ok(());
        };
        let what = match &spec.action {
            ActionKind::ScaleReplicas(_) => "scale_replicas",
            ActionKind::StopReplica(_) => "stop_replica",
            ActionKind::SwapConfig(_) => "swap_config",
            ActionKind::Grow(g)
                if g.template.is_none() && self.on.kind != PlatformKind::Kubernetes =>
            {
                return Err(Invalid::from(
                    "grow on an external target needs Kubernetes and a `template`, one of the \
                     built-in generators (what = routes, grpc_routes, matches, listeners, \
                     https_listeners), \
                     or upstream_servers of a backend group: proxybench does not re-render a \
                     proxy it did not start",
                ))
            }
            ActionKind::Reload(_) if ext.reload.is_empty() => {
                return Err(Invalid::from(
                    "reload on an external target needs the command that reloads it: \
                            proxy.external.reload = [\"program\", \"arg\", ...]",
                ))
            }
            _ => return Ok(()),
        };
        Err(Invalid::from(format!(
            "{what} on an external target: proxybench does not start, stop or re-render a \
             proxy it did not start"
        )))
    }

    /// Checks an action's `probe`: its selector, namespace, scheme and numbers; without a
    /// selector it probes the run's own proxy pods, so the run must deploy its proxy.
    fn probe_of(&self, action: &str, p: Option<&ProbeSpec>) -> Result<Option<ProbeSpec>, Invalid> {
        let Some(p) = p else {
            return Ok(None);
        };
        check_probe(action, p, self.proxy)?;
        Ok(Some(p.clone()))
    }

    /// A templated growth: on Kubernetes, against an external gateway, with a template that
    /// renders every item (0..`to`) into Kubernetes objects now, before the case starts (by
    /// the parse's [`crate::Templates`]); its path is resolved against the scenario file.
    /// `builtin`: the template is a built-in generator's (its parameters come from the grow
    /// table), rendered even when files are not checked.
    fn check_template(
        &self,
        g: &mut GrowSpec,
        p: &ProxyConfig,
        builtin: bool,
        groups: &BTreeMap<String, u32>,
    ) -> Result<(), Invalid> {
        let Some(t) = g.template.clone() else {
            return Ok(());
        };
        if self.on.kind != PlatformKind::Kubernetes {
            return Err(Invalid::from(
                "grow: a `template` needs [platform] kind = \"kubernetes\" (it applies \
                 manifests)",
            ));
        }
        if p.external.is_none() {
            return Err(Invalid::from(
                "grow: a `template` grows a gateway proxybench does not run ([proxy] kind = \
                 \"external\"); the run's own proxy grows with `what` alone",
            ));
        }
        if g.by == 0 {
            return Err(Invalid::from("grow: `by` must be at least 1"));
        }
        if g.to > 10_000 {
            return Err(Invalid::from(format!(
                "grow: {} items of a template is more than a run applies (at most 10000)",
                g.to
            )));
        }
        if let Some(ns) = &g.namespace {
            dns_label(ns).map_err(|e| format!("grow: namespace '{ns}' {e}"))?;
        }
        if let Some(w) = &g.wait {
            let ok = w.strip_prefix("condition=").is_some_and(|c| {
                !c.is_empty()
                    && c.split('=').count() <= 2
                    && c.chars()
                        .all(|ch| ch.is_ascii_alphanumeric() || "._-/=".contains(ch))
            });
            if !ok {
                return Err(Invalid::from(format!(
                    "grow: wait = \"{w}\" is not condition=TYPE[=STATUS] (condition=Accepted, \
                     condition=Programmed)"
                )));
            }
        }
        let path = if builtin {
            PathBuf::from(&t)
        } else {
            relative_to_file(self.on.src, &t)
        };
        g.template = Some(path.display().to_string());
        let probe = g.probe.as_ref().ok_or(
            "grow: a templated growth needs a `probe` (selector, port, host, path): its times \
             are the growth's time to ready",
        )?;
        check_probe("grow", probe, None)?;
        if self.on.check_files && !builtin {
            std::fs::metadata(&path)
                .map_err(|e| format!("grow: template {}: {e}", path.display()))?;
        }
        let Some(templates) = self.on.templates else {
            return Ok(());
        };
        if !self.on.check_files && !builtin {
            return Ok(());
        }
        let ns = g.namespace.as_deref().unwrap_or("check");
        templates
            .check_growth(g, ns, groups)
            .map_err(|e| format!("grow: {e}"))?;
        Ok(())
    }

    fn need_proxy(&self) -> Result<(), Invalid> {
        self.proxy
            .map(|_| ())
            .ok_or_else(|| Invalid::from("this action needs a [proxy]"))
    }
}

/// An `exec` action: a command that is not empty, and a timeout of more than 0.
fn exec(spec: &ActionSpec, argv: &[String]) -> Result<Action, Invalid> {
    if argv.first().is_none_or(|p| p.is_empty()) {
        return Err(Invalid::from(
            "exec: the command is empty; write exec = [\"program\", \"arg\", ...]",
        ));
    }
    let timeout = spec.timeout.map_or(EXEC_TIMEOUT, |d| d.0);
    if timeout.is_zero() {
        return Err(Invalid::from("exec: `timeout` must be more than 0"));
    }
    Ok(Action::Exec {
        argv: argv.to_vec(),
        timeout,
        allow_fail: spec.allow_fail.unwrap_or(false),
    })
}

/// The namespace a cluster action names, checked as Kubernetes checks a namespace's name.
fn namespace(action: &str, spec: &ActionSpec) -> Result<Option<String>, Invalid> {
    match &spec.namespace {
        None => Ok(None),
        Some(n) => {
            dns_label(n).map_err(|e| format!("{action}: namespace '{n}' {e}"))?;
            Ok(Some(n.clone()))
        }
    }
}

/// How long an `apply` or `delete` waits for its `wait` when it names no `timeout`.
pub const WAIT_TIMEOUT: Duration = Duration::from_secs(60);

/// The `wait` of an `apply` (`condition=TYPE[=STATUS]`) or a `delete` (`delete`), with its
/// `timeout`.
fn wait_of(action: &str, spec: &ActionSpec) -> Result<Option<Wait>, Invalid> {
    let Some(w) = &spec.wait else {
        return Ok(None);
    };
    let until = match (action, w.split_once('=')) {
        ("apply", Some(("condition", c))) => {
            let (kind, status) = c.split_once('=').unwrap_or((c, "True"));
            let word = |x: &str| {
                !x.is_empty()
                    && x.chars()
                        .all(|ch| ch.is_ascii_alphanumeric() || "._-/".contains(ch))
            };
            if !word(kind) || !word(status) {
                return Err(Invalid::from(format!(
                    "apply: wait = \"{w}\": a condition is condition=TYPE or \
                     condition=TYPE=STATUS (condition=Available, condition=Programmed=True)"
                )));
            }
            WaitFor::Condition {
                kind: kind.to_string(),
                status: status.to_string(),
            }
        }
        ("delete", None) if w == "delete" => WaitFor::Deleted,
        ("apply", _) => {
            return Err(Invalid::from(format!(
                "apply: wait = \"{w}\" is not condition=TYPE[=STATUS] (condition=Available, \
                 condition=Programmed)"
            )))
        }
        _ => {
            return Err(Invalid::from(format!(
                "delete: wait = \"{w}\": a delete waits for \"delete\" (the objects gone)"
            )))
        }
    };
    let timeout = spec.timeout.map_or(WAIT_TIMEOUT, |t| t.0);
    if timeout.is_zero() {
        return Err(Invalid::from(format!(
            "{action}: the wait's `timeout` must be more than 0"
        )));
    }
    Ok(Some(Wait { until, timeout }))
}

/// Steps from `from` to `to`: one at a time every `step` when gradual, else one step at `at`.
fn gradual(
    from: u32,
    to: u32,
    step: Option<Duration>,
    at: Duration,
    mut push: impl FnMut(Duration, u32),
) {
    match step {
        Some(step) if from != to => {
            let mut n = from;
            let mut t = at;
            while n != to {
                n = if to > n { n + 1 } else { n - 1 };
                push(t, n);
                t = t.saturating_add(step);
            }
        }
        _ => push(at, to),
    }
}

/// Reads `KIND/NAME` of a workload: a kind that runs the action (`scalable` refuses
/// daemonsets, which have no replica count) and a valid name.
fn workload(action: &str, s: &str, scalable: bool) -> Result<Workload, Invalid> {
    let (kind, name) = s
        .split_once('/')
        .ok_or_else(|| format!("{action}: '{s}' is not KIND/NAME (deployment/NAME)"))?;
    let kinds: Vec<WorkloadKind> = WorkloadKind::ALL
        .into_iter()
        .filter(|k| !scalable || k.scalable())
        .collect();
    let Some(kind) = kinds.iter().copied().find(|k| k.name() == kind) else {
        let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
        let why = if !scalable || WorkloadKind::DaemonSet.name() != kind {
            String::new()
        } else {
            " (a daemonset runs one pod per node: it has no replica count)".to_string()
        };
        return Err(Invalid::from(format!(
            "{action}: kind '{kind}' is not one of {}{why}",
            names.join(", ")
        )));
    };
    dns_subdomain(name).map_err(|e| format!("{action}: name '{name}' {e}"))?;
    Ok(Workload {
        kind,
        name: name.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{RemoveMode, StopSpec};
    use setup::profile::Profile;

    /// Every action key reads into the variant of the same name, and `Action::kind` gives the
    /// key back, so files, messages and events.csv agree.
    #[test]
    fn every_action_key_names_its_variant() {
        let values = [
            "{ group = \"g\", to = 2 }",
            "{ to = 2 }",
            "true",
            "\"alt\"",
            "{ group = \"g\", profile = \"\" }",
            "\"g-0\"",
            "\"g-0\"",
            "\"g-0\"",
            "{}",
            "{ what = \"routes\", to = 2 }",
            "[\"true\"]",
            "\"m.yaml\"",
            "\"m.yaml\"",
            "\"deployment/x\"",
            "{ selector = \"app=x\" }",
            "{ target = \"deployment/x\", to = 2 }",
        ];
        for (key, value) in ACTION_KEYS.iter().zip(values) {
            let a: ActionSpec = toml::from_str(&format!("at = \"1s\"\n{key} = {value}")).unwrap();
            let camel: String = key
                .split('_')
                .map(|w| w[..1].to_uppercase() + &w[1..])
                .collect();
            assert!(format!("{:?}", a.action).starts_with(&camel), "{key}");
            assert_eq!(a.at, Dur(Duration::from_secs(1)));
        }
        let names = [
            Action::ScaleBackends {
                group: String::new(),
                to: 0,
                remove: RemoveMode::Drain,
            }
            .kind(),
            Action::ScaleReplicas {
                to: 0,
                stop: StopSpec::Graceful,
            }
            .kind(),
            Action::Reload.kind(),
            Action::SwapConfig(String::new()).kind(),
            Action::SetProfile {
                group: None,
                backend: None,
                profile: Profile::default(),
            }
            .kind(),
            Action::DrainBackend(String::new()).kind(),
            Action::KillBackend(String::new()).kind(),
            Action::RestartBackend(String::new()).kind(),
            Action::StopReplica {
                replica: None,
                mode: StopSpec::Graceful,
            }
            .kind(),
            "grow",
            Action::Exec {
                argv: Vec::new(),
                timeout: Duration::ZERO,
                allow_fail: false,
            }
            .kind(),
            Action::Apply {
                file: PathBuf::new(),
                namespace: None,
                wait: None,
                probe: None,
            }
            .kind(),
            Action::Delete {
                file: PathBuf::new(),
                namespace: None,
                wait: None,
                probe: None,
            }
            .kind(),
            Action::RolloutRestart {
                target: workload("", "deployment/x", false).unwrap(),
                namespace: None,
                probe: None,
            }
            .kind(),
            Action::DeletePod {
                selector: String::new(),
                count: 1,
                grace: Duration::ZERO,
                namespace: None,
            }
            .kind(),
            Action::Scale {
                target: workload("", "deployment/x", true).unwrap(),
                to: 1,
                step: Duration::ZERO,
                namespace: None,
                probe: None,
            }
            .kind(),
        ];
        assert_eq!(names, ACTION_KEYS);
    }
}
