//! Objects proxybench makes from its own specs (Deployments, Services, ConfigMaps, Secrets,
//! Jobs) and their deletion with their dependents, and what it does to workloads during a run
//! (Deployments, StatefulSets, DaemonSets, in any namespace): scale, wait for Ready, rollout
//! restart, wait for the rollout.

use crate::cluster::{Cluster, FIELD_MANAGER};
use crate::error::{split, Error};
use crate::images::image_problem;
use crate::pods::PodInfo;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::NamespaceResourceScope;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::Resource;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;
use std::time::{Duration, Instant};

/// How often bounded waits look at the object again.
const POLL: Duration = Duration::from_millis(100);

pub use model::WorkloadKind;

/// A workload's replica counts as its status says, for waits and messages (a DaemonSet's
/// "desired" is the number of nodes it should run on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Replicas {
    /// `spec.replicas`.
    pub desired: i32,
    /// `status.replicas`: pods of the Deployment that are not terminating.
    pub current: i32,
    /// `status.updatedReplicas`: pods of the newest template.
    pub updated: i32,
    /// `status.readyReplicas`.
    pub ready: i32,
    /// `status.availableReplicas`.
    pub available: i32,
    /// True when the controller has seen the newest spec (`observedGeneration >= generation`).
    pub observed: bool,
}

impl std::fmt::Display for Replicas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "desired {}, current {}, updated {}, ready {}, available {}{}",
            self.desired,
            self.current,
            self.updated,
            self.ready,
            self.available,
            if self.observed {
                ""
            } else {
                ", newest spec not yet observed"
            }
        )
    }
}

impl Replicas {
    /// The counts of a Deployment object.
    pub fn of(d: &Deployment) -> Replicas {
        let st = d.status.clone().unwrap_or_default();
        Replicas {
            desired: d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
            current: st.replicas.unwrap_or(0),
            updated: st.updated_replicas.unwrap_or(0),
            ready: st.ready_replicas.unwrap_or(0),
            available: st.available_replicas.unwrap_or(0),
            observed: st.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0),
        }
    }

    /// The counts of a StatefulSet object (`current` is `status.replicas`, the pods it has
    /// created, of any revision).
    pub fn of_statefulset(s: &StatefulSet) -> Replicas {
        let st = s.status.clone().unwrap_or_default();
        Replicas {
            desired: s.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
            current: st.replicas,
            updated: st.updated_replicas.unwrap_or(0),
            ready: st.ready_replicas.unwrap_or(0),
            available: st.available_replicas.unwrap_or(0),
            observed: st.observed_generation.unwrap_or(0) >= s.metadata.generation.unwrap_or(0),
        }
    }

    /// The counts of a DaemonSet object: desired, current, updated, ready and available are
    /// its `desiredNumberScheduled`, `currentNumberScheduled`, `updatedNumberScheduled`,
    /// `numberReady` and `numberAvailable`.
    pub fn of_daemonset(d: &DaemonSet) -> Replicas {
        let st = d.status.clone().unwrap_or_default();
        Replicas {
            desired: st.desired_number_scheduled,
            current: st.current_number_scheduled,
            updated: st.updated_number_scheduled.unwrap_or(0),
            ready: st.number_ready,
            available: st.number_available.unwrap_or(0),
            observed: st.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0),
        }
    }

    /// True when `n` replicas of the newest template are Ready and no other pod counts.
    pub fn ready_at(&self, n: i32) -> bool {
        self.observed
            && self.desired == n
            && self.current == n
            && self.updated == n
            && self.ready == n
    }

    /// True when a rollout is complete: every replica is of the newest template and available.
    pub fn rolled_out(&self) -> bool {
        self.observed
            && self.updated == self.desired
            && self.current == self.desired
            && self.available == self.desired
    }
}

impl Cluster {
    /// Creates or updates a namespaced object from proxybench's own spec (server-side apply,
    /// field manager `proxybench`), returning it as the server stored it.
    pub fn apply_object<K>(&self, namespace: &str, obj: &K) -> Result<K, Error>
    where
        K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
            + Serialize
            + DeserializeOwned
            + Clone
            + Debug,
    {
        let name = obj.meta().name.clone().unwrap_or_default();
        let api: Api<K> = Api::namespaced(self.client(), namespace);
        let pp = PatchParams::apply(FIELD_MANAGER).force();
        self.block_on(api.patch(&name, &pp, &Patch::Apply(obj)))
            .map_err(|e| Error::api(format!("apply {}/{name} in {namespace}", K::kind(&())), e))
    }

    /// Applies `obj`, as [`Cluster::apply_object`], only when no object of its name exists or
    /// the one there carries `app.kubernetes.io/instance=<instance>` ([`crate::INSTANCE`]): a run
    /// never takes over (force-applies over) an object it did not make; [`Error::NotOurs`]
    /// names the object then.
    pub fn apply_owned<K>(&self, namespace: &str, obj: &K, instance: &str) -> Result<K, Error>
    where
        K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
            + Serialize
            + DeserializeOwned
            + Clone
            + Debug,
    {
        let name = obj.meta().name.clone().unwrap_or_default();
        let api: Api<K> = Api::namespaced(self.client(), namespace);
        let kind = K::kind(&());
        let there = self
            .block_on(api.get_opt(&name))
            .map_err(|e| Error::api(format!("get {kind}/{name} in {namespace}"), e))?;
        if let Some(o) = there {
            let theirs = o
                .meta()
                .labels
                .as_ref()
                .and_then(|l| l.get(crate::INSTANCE))
                .cloned();
            if theirs.as_deref() != Some(instance) {
                let whose = match theirs {
                    Some(t) => format!("labelled {}={t}, another run's", crate::INSTANCE),
                    None => format!("without the label {}", crate::INSTANCE),
                };
                return Err(Error::NotOurs(format!(
                    "{kind}/{name} in {namespace} exists and was not made by this run \
                     ({whose}): proxybench leaves it alone; rename or delete it, or run in \
                     another namespace"
                )));
            }
        }
        self.apply_object(namespace, obj)
    }

    /// The names of the objects of kind `K` in `namespace` that match the label `selector`.
    pub fn names_labelled<K>(&self, namespace: &str, selector: &str) -> Result<Vec<String>, Error>
    where
        K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
            + DeserializeOwned
            + Clone
            + Debug,
    {
        let api: Api<K> = Api::namespaced(self.client(), namespace);
        let list = self
            .block_on(api.list(&ListParams::default().labels(selector)))
            .map_err(|e| {
                Error::api(
                    format!("list {}s {selector} in {namespace}", K::kind(&())),
                    e,
                )
            })?;
        Ok(list
            .items
            .iter()
            .filter_map(|o| o.meta().name.clone())
            .collect())
    }

    /// Deletes every object of kind `K` in `namespace` that matches the label `selector` (in
    /// the foreground, as [`Cluster::delete_object`]) and waits until none is left, at most
    /// `bound`; returns how many there were. What a run made goes this way, by its labels,
    /// never by a name a user's object could share.
    pub fn delete_labelled<K>(
        &self,
        namespace: &str,
        selector: &str,
        bound: Duration,
    ) -> Result<usize, Error>
    where
        K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
            + DeserializeOwned
            + Clone
            + Debug,
    {
        let t0 = Instant::now();
        let kind = K::kind(&());
        let what = format!("delete {kind}s {selector} in {namespace}");
        let api: Api<K> = Api::namespaced(self.client(), namespace);
        let lp = ListParams::default().labels(selector);
        self.block_on(async {
            let list = api.list(&lp).await.map_err(|e| Error::api(&what, e))?;
            let n = list.items.len();
            for o in &list.items {
                let Some(name) = o.meta().name.clone() else {
                    continue;
                };
                if let Err(e) = api.delete(&name, &DeleteParams::foreground()).await {
                    let (message, code) = split(e);
                    if code != 404 {
                        return Err(Error::Api {
                            what: format!("delete {kind}/{name} in {namespace}"),
                            message,
                            code,
                        });
                    }
                }
            }
            loop {
                let state = match api.list(&lp).await {
                    Ok(l) if l.items.is_empty() => return Ok(n),
                    Ok(l) => format!("{} still there", l.items.len()),
                    Err(e) => split(e).0,
                };
                if t0.elapsed() >= bound {
                    return Err(Error::Timeout {
                        what,
                        after: bound,
                        state,
                    });
                }
                tokio::time::sleep(POLL).await;
            }
        })
    }

    /// Deletes a namespaced object proxybench made (a Job, a Secret) in the foreground, so that
    /// what it owns (a Job's pods) goes first, and waits until it is gone, at most `bound`;
    /// returns how long that took. An object already gone is not an error.
    pub fn delete_object<K>(
        &self,
        namespace: &str,
        name: &str,
        bound: Duration,
    ) -> Result<Duration, Error>
    where
        K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
            + DeserializeOwned
            + Clone
            + Debug,
    {
        let t0 = Instant::now();
        let what = format!("delete {}/{name} in {namespace}", K::kind(&()));
        let api: Api<K> = Api::namespaced(self.client(), namespace);
        self.block_on(async {
            match api.delete(name, &DeleteParams::foreground()).await {
                Ok(_) => {}
                Err(e) => {
                    let (message, code) = split(e);
                    if code == 404 {
                        return Ok(t0.elapsed());
                    }
                    return Err(Error::Api {
                        what,
                        message,
                        code,
                    });
                }
            }
            loop {
                let state = match api.get_opt(name).await {
                    Ok(None) => return Ok(t0.elapsed()),
                    Ok(Some(_)) => "still there (its dependents are being deleted)".to_string(),
                    Err(e) => split(e).0,
                };
                if t0.elapsed() >= bound {
                    return Err(Error::Timeout {
                        what,
                        after: bound,
                        state,
                    });
                }
                tokio::time::sleep(POLL).await;
            }
        })
    }

    /// A Deployment's replica counts now.
    pub fn deployment_replicas(&self, namespace: &str, name: &str) -> Result<Replicas, Error> {
        self.workload_replicas(namespace, WorkloadKind::Deployment, name)
    }

    /// A workload's replica counts now.
    pub fn workload_replicas(
        &self,
        namespace: &str,
        kind: WorkloadKind,
        name: &str,
    ) -> Result<Replicas, Error> {
        self.block_on(fetch(self.client(), namespace, kind, name))
            .map(|(r, _)| r)
            .map_err(|e| Error::api(format!("get {kind}/{name} in {namespace}"), e))
    }

    /// Sets a Deployment's replica count through its scale subresource (returns at once).
    pub fn scale_deployment(
        &self,
        namespace: &str,
        name: &str,
        replicas: i32,
    ) -> Result<(), Error> {
        self.scale_workload(namespace, WorkloadKind::Deployment, name, replicas)
    }

    /// Sets a Deployment's or StatefulSet's replica count through its scale subresource
    /// (returns at once); a DaemonSet has none, and is refused before the API is asked.
    pub fn scale_workload(
        &self,
        namespace: &str,
        kind: WorkloadKind,
        name: &str,
        replicas: i32,
    ) -> Result<(), Error> {
        let what = format!("scale {kind}/{name} in {namespace} to {replicas}");
        let patch = serde_json::json!({ "spec": { "replicas": replicas } });
        let (pp, patch) = (PatchParams::default(), Patch::Merge(&patch));
        let client = self.client();
        let done = match kind {
            WorkloadKind::Deployment => self
                .block_on(
                    Api::<Deployment>::namespaced(client, namespace).patch_scale(name, &pp, &patch),
                )
                .map(|_| ()),
            WorkloadKind::StatefulSet => self
                .block_on(
                    Api::<StatefulSet>::namespaced(client, namespace)
                        .patch_scale(name, &pp, &patch),
                )
                .map(|_| ()),
            WorkloadKind::DaemonSet => {
                return Err(Error::Refused(format!(
                    "{what}: a daemonset runs one pod per node and has no replica count"
                )))
            }
        };
        done.map_err(|e| Error::api(what, e))
    }

    /// Waits until a Deployment has exactly `n` Ready replicas of its newest template and no
    /// other non-terminating pod, at most `bound`; returns how long it took.
    pub fn wait_deployment_ready(
        &self,
        namespace: &str,
        name: &str,
        n: i32,
        bound: Duration,
    ) -> Result<Duration, Error> {
        self.wait_workload_ready(namespace, WorkloadKind::Deployment, name, n, bound)
    }

    /// Waits until a workload has exactly `n` Ready replicas of its newest template and no
    /// other non-terminating pod, at most `bound`; returns how long it took.
    pub fn wait_workload_ready(
        &self,
        namespace: &str,
        kind: WorkloadKind,
        name: &str,
        n: i32,
        bound: Duration,
    ) -> Result<Duration, Error> {
        self.wait_workload(namespace, kind, name, bound, &format!("{n} ready"), |r| {
            r.ready_at(n)
        })
    }

    /// Restarts every pod of a Deployment the way `kubectl rollout restart` does: a new
    /// `kubectl.kubernetes.io/restartedAt` annotation on the pod template.
    pub fn rollout_restart(&self, namespace: &str, name: &str) -> Result<(), Error> {
        self.rollout_restart_workload(namespace, WorkloadKind::Deployment, name)
    }

    /// Restarts every pod of a workload the way `kubectl rollout restart` does: a new
    /// `kubectl.kubernetes.io/restartedAt` annotation on the pod template.
    pub fn rollout_restart_workload(
        &self,
        namespace: &str,
        kind: WorkloadKind,
        name: &str,
    ) -> Result<(), Error> {
        let now = jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        let patch = serde_json::json!({ "spec": { "template": { "metadata": { "annotations": {
            "kubectl.kubernetes.io/restartedAt": now } } } } });
        let (pp, patch) = (PatchParams::default(), Patch::Strategic(&patch));
        let client = self.client();
        let done = match kind {
            WorkloadKind::Deployment => self
                .block_on(Api::<Deployment>::namespaced(client, namespace).patch(name, &pp, &patch))
                .map(|_| ()),
            WorkloadKind::StatefulSet => self
                .block_on(
                    Api::<StatefulSet>::namespaced(client, namespace).patch(name, &pp, &patch),
                )
                .map(|_| ()),
            WorkloadKind::DaemonSet => self
                .block_on(Api::<DaemonSet>::namespaced(client, namespace).patch(name, &pp, &patch))
                .map(|_| ()),
        };
        done.map_err(|e| Error::api(format!("rollout restart {kind}/{name} in {namespace}"), e))
    }

    /// Waits until a Deployment's rollout is complete (`kubectl rollout status`): every replica
    /// of the newest template and available, no old one left, at most `bound`.
    pub fn wait_rollout(
        &self,
        namespace: &str,
        name: &str,
        bound: Duration,
    ) -> Result<Duration, Error> {
        self.wait_workload_rollout(namespace, WorkloadKind::Deployment, name, bound)
    }

    /// Waits until a workload's rollout is complete (`kubectl rollout status`): every replica
    /// of the newest template and available, no old one left, at most `bound`.
    pub fn wait_workload_rollout(
        &self,
        namespace: &str,
        kind: WorkloadKind,
        name: &str,
        bound: Duration,
    ) -> Result<Duration, Error> {
        self.wait_workload(
            namespace,
            kind,
            name,
            bound,
            "rolled out",
            Replicas::rolled_out,
        )
    }

    fn wait_workload(
        &self,
        namespace: &str,
        kind: WorkloadKind,
        name: &str,
        bound: Duration,
        goal: &str,
        done: impl Fn(&Replicas) -> bool,
    ) -> Result<Duration, Error> {
        let t0 = Instant::now();
        let pods: Api<Pod> = Api::namespaced(self.client(), namespace);
        let mut selector = None;
        let waited = self.block_on(async {
            loop {
                let last = match fetch(self.client(), namespace, kind, name).await {
                    Ok((r, labels)) => {
                        if done(&r) {
                            return Ok(t0.elapsed());
                        }
                        // A pod whose image cannot be had never gets Ready: say so at once.
                        selector = selector.take().or(labels);
                        if let Some(sel) = &selector {
                            if let Ok(list) = pods.list(&ListParams::default().labels(sel)).await {
                                for p in list.items.iter().map(PodInfo::of) {
                                    if let Some(why) = p.why.as_deref().filter(|w| image_problem(w))
                                    {
                                        return Err(Error::Unstartable(format!(
                                            "{kind}/{name} in {namespace}: pod {} cannot \
                                             start: {why}",
                                            p.name
                                        )));
                                    }
                                }
                            }
                        }
                        r.to_string()
                    }
                    Err(e) => {
                        let (message, code) = split(e);
                        if code == 404 {
                            return Err(Error::Api {
                                what: format!("wait for {kind}/{name} in {namespace}"),
                                message,
                                code,
                            });
                        }
                        message
                    }
                };
                if t0.elapsed() >= bound {
                    return Err(Error::Timeout {
                        what: format!("{kind}/{name} in {namespace} {goal}"),
                        after: bound,
                        state: last,
                    });
                }
                tokio::time::sleep(POLL).await;
            }
        });
        // A wait that ran out says why each pod is not Ready: its reason, its events and the
        // last lines of its log.
        match waited {
            Err(Error::Timeout { what, after, state }) => {
                let why = selector
                    .as_deref()
                    .map(|s| self.diagnose_pods(namespace, s))
                    .unwrap_or_default();
                Err(Error::Timeout {
                    what,
                    after,
                    state: if why.is_empty() {
                        state
                    } else {
                        format!("{state}; {why}")
                    },
                })
            }
            other => other,
        }
    }
}

/// A workload's replica counts and its `matchLabels` as a label selector (`a=b,c=d`).
async fn fetch(
    client: kube::Client,
    namespace: &str,
    kind: WorkloadKind,
    name: &str,
) -> Result<(Replicas, Option<String>), kube::Error> {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    let labels = |s: &LabelSelector| {
        s.match_labels.as_ref().map(|l| {
            l.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        })
    };
    Ok(match kind {
        WorkloadKind::Deployment => {
            let d = Api::<Deployment>::namespaced(client, namespace)
                .get(name)
                .await?;
            let sel = d.spec.as_ref().and_then(|s| labels(&s.selector));
            (Replicas::of(&d), sel)
        }
        WorkloadKind::StatefulSet => {
            let s = Api::<StatefulSet>::namespaced(client, namespace)
                .get(name)
                .await?;
            let sel = s.spec.as_ref().and_then(|s| labels(&s.selector));
            (Replicas::of_statefulset(&s), sel)
        }
        WorkloadKind::DaemonSet => {
            let d = Api::<DaemonSet>::namespaced(client, namespace)
                .get(name)
                .await?;
            let sel = d.spec.as_ref().and_then(|s| labels(&s.selector));
            (Replicas::of_daemonset(&d), sel)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_kinds_round_trip_their_names_and_only_daemonsets_do_not_scale() {
        for k in WorkloadKind::ALL {
            assert_eq!(WorkloadKind::parse(k.name()), Some(k));
            assert_eq!(k.to_string(), k.name());
            assert_eq!(k.scalable(), k != WorkloadKind::DaemonSet);
        }
        assert_eq!(WorkloadKind::parse("Deployment"), None);
        assert_eq!(WorkloadKind::parse("replicaset"), None);
    }

    #[test]
    fn statefulset_and_daemonset_statuses_read_as_replica_counts() {
        // A StatefulSet mid-rollout: 3 wanted, 3 pods, 1 of the new revision, 2 ready.
        let s: StatefulSet = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "db", "generation": 4},
            "spec": {"replicas": 3, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                     "template": {}},
            "status": {"replicas": 3, "updatedReplicas": 1, "readyReplicas": 2,
                       "availableReplicas": 2, "observedGeneration": 4},
        }))
        .unwrap();
        let r = Replicas::of_statefulset(&s);
        assert_eq!(
            r,
            Replicas {
                desired: 3,
                current: 3,
                updated: 1,
                ready: 2,
                available: 2,
                observed: true
            }
        );
        assert!(!r.rolled_out() && !r.ready_at(3));
        // The same, rolled out; then a spec the controller has not seen yet.
        let mut done = s.clone();
        let st = done.status.as_mut().unwrap();
        (st.updated_replicas, st.ready_replicas) = (Some(3), Some(3));
        st.available_replicas = Some(3);
        assert!(Replicas::of_statefulset(&done).rolled_out());
        assert!(Replicas::of_statefulset(&done).ready_at(3));
        done.metadata.generation = Some(5);
        assert!(!Replicas::of_statefulset(&done).rolled_out());
        // A DaemonSet on 2 nodes, one pod of the new template, both ready.
        let d: DaemonSet = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "agent", "generation": 2},
            "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {}},
            "status": {"desiredNumberScheduled": 2, "currentNumberScheduled": 2,
                       "updatedNumberScheduled": 1, "numberReady": 2, "numberAvailable": 2,
                       "numberMisscheduled": 0, "observedGeneration": 2},
        }))
        .unwrap();
        let r = Replicas::of_daemonset(&d);
        assert_eq!((r.desired, r.current, r.updated, r.ready), (2, 2, 1, 2));
        assert!(r.observed && !r.rolled_out());
    }
}
