//! `proxybench k8s clean`: what runs left behind (a run killed with SIGKILL, one kept with
//! `--keep`), found by the label every object a run makes carries ([`MANAGED_BY`]) and deleted:
//! the namespaces runs made, whole, and the run's objects in namespaces it did not make. Never
//! an object without the label.

use crate::cluster::{Cluster, MANAGED_BY};
use crate::error::Error;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams};
use kube::Resource;
use std::time::Duration;

/// What `clean` looks at.
#[derive(Debug, Clone, Default)]
pub struct CleanScope {
    /// Only this namespace (a user limited to one); every namespace when `None`.
    pub namespace: Option<String>,
    /// Only what was created at least this long ago (so that a run still going keeps its
    /// objects).
    pub older_than: Duration,
    /// List what would be deleted, delete nothing.
    pub dry_run: bool,
}

impl Cluster {
    /// Deletes (or, dry, lists) what proxybench runs left in `scope`: each namespace a run made
    /// (`namespace/NAME`), and in the others each labelled Deployment, Job, Service, Pod,
    /// ConfigMap and Secret (`deployment NS/NAME`...). Deletions are not waited for.
    pub fn clean(&self, scope: &CleanScope) -> Result<Vec<String>, Error> {
        let lp = ListParams::default().labels(&format!("{}={}", MANAGED_BY.0, MANAGED_BY.1));
        let now = jiff::Timestamp::now();
        let old = |m: &ObjectMeta| {
            m.creation_timestamp
                .as_ref()
                .is_some_and(|t| now.duration_since(t.0).unsigned_abs() >= scope.older_than)
        };
        let dp = DeleteParams::background();
        self.block_on(async {
            let mut out = Vec::new();
            // The namespaces runs made go whole, with whatever is in them.
            let nss: Api<Namespace> = Api::all(self.client());
            // In one namespace, that namespace alone is read (a Role there may get it, never
            // list them all); else every namespace a run made.
            let made = match &scope.namespace {
                Some(ns) => nss
                    .get_opt(ns)
                    .await
                    .map_err(|e| Error::api(format!("get namespace {ns}"), e))?
                    .filter(|n| {
                        n.metadata
                            .labels
                            .as_ref()
                            .and_then(|l| l.get(MANAGED_BY.0))
                            .is_some_and(|v| v == MANAGED_BY.1)
                    })
                    .into_iter()
                    .collect(),
                None => {
                    nss.list(&lp)
                        .await
                        .map_err(|e| Error::api("list namespaces", e))?
                        .items
                }
            };
            let mut whole = Vec::new();
            for n in made {
                let Some(name) = n.metadata.name.clone() else {
                    continue;
                };
                if scope.namespace.as_ref().is_some_and(|s| *s != name) {
                    continue;
                }
                whole.push(name.clone());
                if !old(&n.metadata) || n.metadata.deletion_timestamp.is_some() {
                    continue;
                }
                if !scope.dry_run {
                    match nss.delete(&name, &dp).await {
                        Ok(_) => {}
                        Err(kube::Error::Api(s)) if s.code == 404 => continue,
                        Err(e) => return Err(Error::api(format!("delete namespace {name}"), e)),
                    }
                }
                out.push(format!("namespace/{name}"));
            }
            // Elsewhere, the run's own objects.
            macro_rules! each {
                ($kind:ty, $what:expr) => {{
                    let api: Api<$kind> = match &scope.namespace {
                        Some(ns) => Api::namespaced(self.client(), ns),
                        None => Api::all(self.client()),
                    };
                    let list = api
                        .list(&lp)
                        .await
                        .map_err(|e| Error::api(format!("list {}s", $what), e))?;
                    for o in list.items {
                        let m = o.meta();
                        let (Some(name), Some(ns)) = (m.name.clone(), m.namespace.clone()) else {
                            continue;
                        };
                        if whole.contains(&ns) || !old(m) || m.deletion_timestamp.is_some() {
                            continue;
                        }
                        if !scope.dry_run {
                            let api: Api<$kind> = Api::namespaced(self.client(), &ns);
                            match api.delete(&name, &dp).await {
                                Ok(_) => {}
                                Err(kube::Error::Api(s)) if s.code == 404 => continue,
                                Err(e) => {
                                    return Err(Error::api(
                                        format!("delete {} {ns}/{name}", $what),
                                        e,
                                    ))
                                }
                            }
                        }
                        out.push(format!("{} {ns}/{name}", $what));
                    }
                }};
            }
            each!(Deployment, "deployment");
            each!(Job, "job");
            each!(Service, "service");
            each!(Pod, "pod");
            each!(ConfigMap, "configmap");
            each!(Secret, "secret");
            Ok(out)
        })
    }
}
