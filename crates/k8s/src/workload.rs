//! Objects proxybench makes from its own specs (Deployments, Services, ConfigMaps, Secrets,
//! Jobs) and their deletion with their dependents, and what it does to Deployments during a
//! run: scale, wait for Ready, rollout restart, wait for the rollout.

use crate::cluster::{Cluster, FIELD_MANAGER};
use crate::error::{split, Error};
use crate::images::image_problem;
use crate::pods::PodInfo;
use k8s_openapi::api::apps::v1::Deployment;
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

/// A Deployment's replica counts as its status says, for waits and messages.
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
        let api: Api<Deployment> = Api::namespaced(self.client(), namespace);
        let d = self
            .block_on(api.get(name))
            .map_err(|e| Error::api(format!("get deployment/{name} in {namespace}"), e))?;
        Ok(Replicas::of(&d))
    }

    /// Sets a Deployment's replica count through its scale subresource (returns at once).
    pub fn scale_deployment(
        &self,
        namespace: &str,
        name: &str,
        replicas: i32,
    ) -> Result<(), Error> {
        let api: Api<Deployment> = Api::namespaced(self.client(), namespace);
        let patch = serde_json::json!({ "spec": { "replicas": replicas } });
        self.block_on(api.patch_scale(name, &PatchParams::default(), &Patch::Merge(&patch)))
            .map_err(|e| {
                Error::api(
                    format!("scale deployment/{name} in {namespace} to {replicas}"),
                    e,
                )
            })?;
        Ok(())
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
        self.wait_deployment(namespace, name, bound, &format!("{n} ready"), |r| {
            r.ready_at(n)
        })
    }

    /// Restarts every pod of a Deployment the way `kubectl rollout restart` does: a new
    /// `kubectl.kubernetes.io/restartedAt` annotation on the pod template.
    pub fn rollout_restart(&self, namespace: &str, name: &str) -> Result<(), Error> {
        let api: Api<Deployment> = Api::namespaced(self.client(), namespace);
        let now = jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        let patch = serde_json::json!({ "spec": { "template": { "metadata": { "annotations": {
            "kubectl.kubernetes.io/restartedAt": now } } } } });
        self.block_on(api.patch(name, &PatchParams::default(), &Patch::Strategic(&patch)))
            .map_err(|e| {
                Error::api(
                    format!("rollout restart deployment/{name} in {namespace}"),
                    e,
                )
            })?;
        Ok(())
    }

    /// Waits until a Deployment's rollout is complete (`kubectl rollout status`): every replica
    /// of the newest template and available, no old one left, at most `bound`.
    pub fn wait_rollout(
        &self,
        namespace: &str,
        name: &str,
        bound: Duration,
    ) -> Result<Duration, Error> {
        self.wait_deployment(namespace, name, bound, "rolled out", Replicas::rolled_out)
    }

    fn wait_deployment(
        &self,
        namespace: &str,
        name: &str,
        bound: Duration,
        goal: &str,
        done: impl Fn(&Replicas) -> bool,
    ) -> Result<Duration, Error> {
        let t0 = Instant::now();
        let api: Api<Deployment> = Api::namespaced(self.client(), namespace);
        let pods: Api<Pod> = Api::namespaced(self.client(), namespace);
        let mut selector = None;
        let waited = self.block_on(async {
            loop {
                let last = match api.get(name).await {
                    Ok(d) => {
                        let r = Replicas::of(&d);
                        if done(&r) {
                            return Ok(t0.elapsed());
                        }
                        // A pod whose image cannot be had never gets Ready: say so at once.
                        selector = selector.take().or_else(|| match_labels(&d));
                        if let Some(sel) = &selector {
                            if let Ok(list) = pods.list(&ListParams::default().labels(sel)).await {
                                for p in list.items.iter().map(PodInfo::of) {
                                    if let Some(why) = p.why.as_deref().filter(|w| image_problem(w))
                                    {
                                        return Err(Error::Unstartable(format!(
                                            "deployment/{name} in {namespace}: pod {} cannot \
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
                                what: format!("wait for deployment/{name} in {namespace}"),
                                message,
                                code,
                            });
                        }
                        message
                    }
                };
                if t0.elapsed() >= bound {
                    return Err(Error::Timeout {
                        what: format!("deployment/{name} in {namespace} {goal}"),
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

/// A Deployment's `matchLabels` as a label selector (`a=b,c=d`).
fn match_labels(d: &Deployment) -> Option<String> {
    let l = d.spec.as_ref()?.selector.match_labels.as_ref()?;
    Some(
        l.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(","),
    )
}
