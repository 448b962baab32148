//! The Kubernetes platform for a whole run: the API connection, the run's namespace (made at
//! the start, deleted at the end unless kept, also after Ctrl-C or a failed case), and the
//! actions that act on any cluster object: `apply`, `delete`, `rollout_restart`, `delete_pod`
//! and `scale`. Each case's backends and proxy are the [`super::KubeStage`].

use crate::error::{PlatformError, StackError};
use crate::platform::StackSpec;
use crate::platform::{Platform, Stage};
use scenario::{Action, Case, PlatformKind, PlatformSpec, Workload};
use std::time::{Duration, Instant};

/// How long the run's namespace may take to go (its pods' grace periods included).
const NAMESPACE_BOUND: Duration = Duration::from_secs(120);

/// How long a workload may take to be ready after a `scale` or `rollout_restart`.
const WORKLOAD_BOUND: Duration = Duration::from_secs(180);

/// A run on a Kubernetes cluster.
pub(crate) struct Kubernetes {
    cluster: k8s::Cluster,
    namespace: String,
    /// The run made the namespace (so it deletes it).
    created: bool,
    spec: PlatformSpec,
    closed: bool,
    /// The run id of the case that runs (`pb-<stamp>`, new for each case): in the names and
    /// `app.kubernetes.io/instance` label of what the case and its agents make.
    run_id: std::sync::Mutex<String>,
}

impl Kubernetes {
    /// Connects and finds or makes the run's namespace: `spec.namespace` when given, which must
    /// exist (the run never creates nor deletes a namespace it is given: a missing one is
    /// [`PlatformError::NoNamespace`], before anything is made), else a new
    /// `proxybench-<stamp>` the run makes and deletes. A namespace it makes carries the Pod
    /// Security `baseline` label ([`k8s::POD_SECURITY`]).
    pub(crate) fn open(spec: &PlatformSpec) -> Result<Kubernetes, PlatformError> {
        let cluster = k8s::Cluster::connect(spec.kubeconfig.as_deref(), spec.context.as_deref())?;
        let (namespace, created) = match &spec.namespace {
            Some(ns) => match cluster.namespace_exists(ns) {
                Ok(true) => (ns.clone(), false),
                // A user who may not read namespaces (a Role in that one only) runs there; a
                // namespace that is not there then fails at the first object, naming it.
                Err(k8s::Error::Api { code: 403, .. }) => (ns.clone(), false),
                Ok(false) => {
                    return Err(PlatformError::NoNamespace(format!(
                        "namespace {ns} does not exist: a run given a namespace (--namespace, \
                         [platform] namespace) neither creates nor deletes it; create it with \
                         `kubectl create namespace {ns}`, or leave --namespace out for a \
                         namespace the run makes and deletes"
                    )))
                }
                Err(e) => return Err(PlatformError::Open(e)),
            },
            None => {
                let ns = k8s::namespace_name("proxybench");
                cluster.create_namespace(&ns, &[k8s::POD_SECURITY])?;
                (ns, true)
            }
        };
        Ok(Kubernetes {
            cluster,
            namespace,
            created,
            spec: spec.clone(),
            closed: false,
            run_id: std::sync::Mutex::new(k8s::namespace_name("pb")),
        })
    }

    /// Deletes the namespace the run made, unless it is kept; what could not be done.
    fn clean_up(&mut self) -> Vec<String> {
        if self.closed {
            return Vec::new();
        }
        self.closed = true;
        if !self.created {
            return Vec::new();
        }
        if self.spec.keep {
            return vec![format!(
                "namespace {} was kept (--keep): delete it with `kubectl delete namespace {}`",
                self.namespace, self.namespace
            )];
        }
        match self
            .cluster
            .delete_namespace(&self.namespace, NAMESPACE_BOUND)
        {
            Ok(_) => Vec::new(),
            Err(e) => vec![format!("the run's namespace is left behind: {e}")],
        }
    }
}

impl Platform for Kubernetes {
    fn name(&self) -> &'static str {
        PlatformKind::Kubernetes.name()
    }

    fn stage(&self, case: &Case, spec: StackSpec<'_>) -> Result<Box<dyn Stage>, StackError> {
        let run_id = k8s::namespace_name("pb");
        *self.run_id.lock().unwrap_or_else(|p| p.into_inner()) = run_id.clone();
        let stage = super::KubeStage::up(
            self.cluster.clone(),
            (&self.namespace, &run_id),
            &self.spec,
            case,
            spec,
        )?;
        Ok(Box::new(stage))
    }

    fn close(&mut self) -> Vec<String> {
        self.clean_up()
    }

    fn agents(
        &self,
        spec: &crate::platform::AgentsSpec<'_>,
    ) -> Result<Box<dyn crate::platform::Agents>, crate::error::PlatformError> {
        let image = self
            .spec
            .image
            .clone()
            .unwrap_or_else(|| super::DEFAULT_IMAGE.into());
        // Agents aimed at loopback share the node's network, which the Pod Security
        // `baseline` the run's own namespace enforces forbids: that namespace is relaxed to
        // `privileged` for them (a user's namespace is left as it is: its policy decides).
        let loopback = load::target::Target::new(spec.cfg).is_ok_and(|t| t.addr.ip().is_loopback());
        if loopback && self.created {
            self.cluster
                .label_namespace(&self.namespace, k8s::POD_SECURITY.0, "privileged")
                .map_err(|e| PlatformError::Agents(e.to_string()))?;
        }
        let run_id = self
            .run_id
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let a = crate::platform::agents::KubeAgents::start(
            self.cluster.clone(),
            (&self.namespace, &run_id),
            (&image, &super::Pulling::of(&self.spec)),
            spec,
        )?;
        Ok(Box::new(a))
    }
}

impl Drop for Kubernetes {
    /// A run that unwinds before `close` still deletes its namespace.
    fn drop(&mut self) {
        let _ = self.clean_up();
    }
}

/// An `apply`'s or `delete`'s `wait`: when each object of the manifest reached the state, from
/// the action's start, appended to the event's detail (`; Deployment/web condition=Available
/// after 2.314 s`), and when the last one did (ms); the action fails at the wait's timeout with
/// the object's last conditions.
pub(super) fn wait_for(
    cluster: &k8s::Cluster,
    ns: &str,
    file: &std::path::Path,
    w: &scenario::Wait,
    since: Instant,
    detail: String,
) -> (String, Result<Option<f64>, StackError>) {
    let until = match &w.until {
        scenario::WaitFor::Condition { kind, status } => k8s::WaitFor::Condition {
            kind: kind.clone(),
            status: status.clone(),
        },
        scenario::WaitFor::Deleted => k8s::WaitFor::Deleted,
    };
    match cluster.wait_manifest(file, ns, &until, since, w.timeout) {
        Ok(reached) => {
            let times: Vec<String> = reached
                .iter()
                .map(|(what, t)| format!("{what} {} after {:.3} s", w.until, t.as_secs_f64()))
                .collect();
            let last = reached
                .iter()
                .map(|(_, t)| t.as_secs_f64() * 1e3)
                .reduce(f64::max);
            (format!("{detail}; {}", times.join(", ")), Ok(last))
        }
        Err(e) => (detail, Err(StackError::Api(e))),
    }
}

/// Applies (or deletes) the objects of `file` in `ns` and waits for `wait`, all timed from
/// `since`: the event's detail, and when the wait's state held (ms), when there was one.
pub(super) fn manifest_action(
    cluster: &k8s::Cluster,
    ns: &str,
    (file, apply, wait): (&std::path::Path, bool, Option<&scenario::Wait>),
    since: Instant,
    name: String,
) -> (String, Result<Option<f64>, StackError>) {
    let done = if apply {
        cluster.apply(file, ns)
    } else {
        cluster.delete(file, ns)
    };
    match done {
        Ok(outcomes) => {
            let what: Vec<String> = outcomes
                .iter()
                .map(|o| format!("{}/{} {}", o.kind, o.name, o.action))
                .collect();
            let detail = format!("{name}: {}", what.join(", "));
            match wait {
                None => (detail, Ok(None)),
                Some(w) => wait_for(cluster, ns, file, w, since, detail),
            }
        }
        Err(e) => (name, Err(StackError::Api(e))),
    }
}

/// Applies one of the actions that act on any cluster object, in the namespace the action
/// names, else in `namespace` (the run's; a manifest's object that names its own namespace goes
/// there): the event's detail and outcome. `keep_going` ends a stepped `scale` early.
pub(crate) fn cluster_action(
    cluster: &k8s::Cluster,
    namespace: &str,
    action: &Action,
    keep_going: &dyn Fn() -> bool,
) -> (String, Result<(), StackError>) {
    let ns = action.namespace().unwrap_or(namespace);
    // The detail names the namespace when the action chose one.
    let in_ns = action
        .namespace()
        .map(|n| format!(" in {n}"))
        .unwrap_or_default();
    match action {
        Action::Apply { file, wait, .. } | Action::Delete { file, wait, .. } => {
            let apply = matches!(action, Action::Apply { .. });
            let name = format!("{}{in_ns}", file.display());
            let (detail, r) = manifest_action(
                cluster,
                ns,
                (file, apply, wait.as_ref()),
                Instant::now(),
                name,
            );
            (detail, r.map(|_| ()))
        }
        Action::RolloutRestart { target, .. } => {
            let (kind, name) = (target.kind, target.name.as_str());
            let r = cluster
                .rollout_restart_workload(ns, kind, name)
                .and_then(|()| cluster.wait_workload_rollout(ns, kind, name, WORKLOAD_BOUND))
                .map_err(StackError::Api);
            match r {
                Ok(took) => (
                    format!("{target}{in_ns}: rolled out in {:.1}s", took.as_secs_f64()),
                    Ok(()),
                ),
                Err(e) => (format!("{target}{in_ns}"), Err(e)),
            }
        }
        Action::DeletePod {
            selector,
            count,
            grace,
            ..
        } => {
            let r = delete_pods(cluster, ns, selector, *count, *grace);
            match r {
                Ok(names) => (
                    format!(
                        "{selector}{in_ns}: {} (grace {}s)",
                        names.join(", "),
                        grace.as_secs()
                    ),
                    Ok(()),
                ),
                Err(e) => (format!("{selector}{in_ns}"), Err(e)),
            }
        }
        Action::Scale {
            target, to, step, ..
        } => match scale(cluster, ns, target, *to, *step, keep_going) {
            Ok(d) => (format!("{d}{in_ns}"), Ok(())),
            Err(e) => (format!("{target} -> {to}{in_ns}"), Err(e)),
        },
        other => (
            String::new(),
            Err(StackError::Platform(format!(
                "{} is not a cluster action",
                other.kind()
            ))),
        ),
    }
}

/// Deletes the `count` oldest running pods that match `selector` (terminating ones are skipped):
/// their names.
fn delete_pods(
    cluster: &k8s::Cluster,
    namespace: &str,
    selector: &str,
    count: u32,
    grace: Duration,
) -> Result<Vec<String>, StackError> {
    let mut pods: Vec<k8s::PodInfo> = cluster
        .pods(namespace, Some(selector))?
        .into_iter()
        .filter(|p| !p.deleting)
        .collect();
    pods.sort_by(|a, b| a.created.cmp(&b.created).then(a.name.cmp(&b.name)));
    if pods.is_empty() {
        return Err(StackError::Platform(format!(
            "no pod matches {selector} in {namespace}"
        )));
    }
    let mut names = Vec::new();
    for p in pods.iter().take(count as usize) {
        cluster.delete_pod(namespace, &p.name, Some(grace))?;
        names.push(p.name.clone());
    }
    if names.len() < count as usize {
        return Err(StackError::Platform(format!(
            "only {} of {count} pods match {selector} in {namespace}: deleted {}",
            names.len(),
            names.join(", ")
        )));
    }
    Ok(names)
}

/// Scales a Deployment or StatefulSet to `to`: at once when `step` is zero, else one replica
/// every `step`; then waits for `to` Ready replicas. The detail says how long that took.
fn scale(
    cluster: &k8s::Cluster,
    namespace: &str,
    target: &Workload,
    to: u32,
    step: Duration,
    keep_going: &dyn Fn() -> bool,
) -> Result<String, StackError> {
    let (kind, name) = (target.kind, target.name.as_str());
    let t0 = Instant::now();
    let from = cluster.workload_replicas(namespace, kind, name)?.desired;
    let to = i32::try_from(to).unwrap_or(i32::MAX);
    if step.is_zero() || from == to {
        cluster.scale_workload(namespace, kind, name, to)?;
    } else {
        let mut n = from;
        while n != to {
            n += if to > n { 1 } else { -1 };
            cluster.scale_workload(namespace, kind, name, n)?;
            if n != to {
                let until = Instant::now() + step;
                while Instant::now() < until {
                    if !keep_going() {
                        return Ok(format!(
                            "{target}: {from} -> {n} of {to} (stopped: the loads ended)"
                        ));
                    }
                    std::thread::sleep((until - Instant::now()).min(Duration::from_millis(50)));
                }
            }
        }
    }
    cluster.wait_workload_ready(namespace, kind, name, to, WORKLOAD_BOUND)?;
    Ok(format!(
        "{target}: {from} -> {to}, ready after {:.1}s",
        t0.elapsed().as_secs_f64()
    ))
}
