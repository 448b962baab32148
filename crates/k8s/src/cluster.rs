//! [`Cluster`]: a connected API client and the tokio runtime that drives it, behind blocking
//! methods, so that proxybench's threads never see async. Namespaces live here too.

use crate::error::{chain, Error};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::discovery::Discovery;
use kube::{Client, Config};
use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The label every namespace proxybench creates carries, so that leftovers are findable
/// (`kubectl get ns -l app.kubernetes.io/managed-by=proxybench`).
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "proxybench");
/// Kubernetes' recommended label for the instance an object belongs to: the run's id on every
/// object a run makes, so that its teardown deletes what it made and nothing else.
pub const INSTANCE: &str = "app.kubernetes.io/instance";

/// The Pod Security label every namespace a run creates carries: the API server's PodSecurity
/// admission (on by default) then refuses any pod the `baseline` standard forbids (host
/// network, privileged, host paths...), and proxybench's own pods pass it.
pub const POD_SECURITY: (&str, &str) = ("pod-security.kubernetes.io/enforce", "baseline");

/// The field manager of every server-side apply proxybench makes.
pub const FIELD_MANAGER: &str = "proxybench";

/// How long connecting may take before the cluster is called unreachable.
const CONNECT_BOUND: Duration = Duration::from_secs(10);

/// Where the client configuration came from and what the server said it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterInfo {
    /// The kubeconfig source: a path, or `KUBECONFIG=...`.
    pub kubeconfig: String,
    /// The context used.
    pub context: String,
    /// The API server's URL.
    pub server: String,
    /// The API server's `gitVersion` (`v1.34.4`).
    pub version: String,
    /// The context's default namespace (`default` when it names none).
    pub default_namespace: String,
}

/// A connection to one cluster: cheap to clone, usable from any thread. Every method blocks
/// until the API server answered (or its bound ran out); background work (watchers, log
/// followers, samplers) runs on the cluster's own runtime thread.
#[derive(Clone)]
pub struct Cluster {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    rt: Option<tokio::runtime::Runtime>,
    pub(crate) client: Client,
    pub(crate) info: ClusterInfo,
    discovery: Mutex<Option<Arc<Discovery>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Tasks still running (a follower of a pod that never ends) must not hold the caller.
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("info", &self.inner.info)
            .finish()
    }
}

impl Cluster {
    /// Connects with `kubeconfig` (else `KUBECONFIG`, else `~/.kube/config`) and `context` (else
    /// the file's current context), and asks the server its version: a cluster that does not
    /// answer is an error naming the server, context and file.
    pub fn connect(kubeconfig: Option<&Path>, context: Option<&str>) -> Result<Cluster, Error> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("proxybench-k8s")
            .enable_all()
            .build()
            .map_err(|e| Error::io("starting the Kubernetes client runtime", e))?;
        let (kc, source) = read_kubeconfig(kubeconfig)?;
        let ctx = match context {
            Some(c) => c.to_string(),
            None => kc.current_context.clone().ok_or_else(|| {
                Error::Config(format!(
                    "{source}: no current-context set; name one with --context"
                ))
            })?,
        };
        if !kc.contexts.iter().any(|c| c.name == ctx) {
            let names: Vec<&str> = kc.contexts.iter().map(|c| c.name.as_str()).collect();
            return Err(Error::Config(format!(
                "{source}: no context {ctx:?} (it has: {})",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            )));
        }
        let opts = KubeConfigOptions {
            context: Some(ctx.clone()),
            cluster: None,
            user: None,
        };
        let (client, server, default_namespace, version) = rt.block_on(async {
            let mut config = Config::from_custom_kubeconfig(kc, &opts).await.map_err(|e| {
                Error::Config(format!("{source}: context {ctx:?}: {}", chain(&e)))
            })?;
            config.connect_timeout = Some(Duration::from_secs(5));
            // kube's default retries a 503 fifteen times with backoff up to minutes: a pod proxy
            // to a closed port (503) would hold a scrape for about 5 minutes. Each caller here
            // has its own bound and retry.
            config.default_retry = false;
            let server = config.cluster_url.to_string();
            let ns = config.default_namespace.clone();
            let client = Client::try_from(config).map_err(|e| {
                Error::Config(format!("{source}: context {ctx:?}: {}", chain(&e)))
            })?;
            let unreachable = |m: String| {
                Error::Unreachable(format!(
                    "cannot reach the Kubernetes API at {server} (context {ctx:?} from {source}): {m}"
                ))
            };
            let v = match tokio::time::timeout(CONNECT_BOUND, client.apiserver_version()).await {
                Ok(Ok(v)) => v,
                Ok(Err(e)) => return Err(unreachable(crate::error::split(e).0)),
                Err(_) => return Err(unreachable(format!("no answer in {CONNECT_BOUND:?}"))),
            };
            Ok((client, server, ns, v.git_version))
        })?;
        let info = ClusterInfo {
            kubeconfig: source,
            context: ctx,
            server,
            version,
            default_namespace,
        };
        Ok(Cluster {
            inner: Arc::new(Inner {
                rt: Some(rt),
                client,
                info,
                discovery: Mutex::new(None),
            }),
        })
    }

    /// What this connection is: kubeconfig, context, server, version.
    pub fn info(&self) -> &ClusterInfo {
        &self.inner.info
    }

    /// The kube-rs client, for calls this facade does not wrap (use it inside [`Cluster::block_on`]).
    pub fn client(&self) -> Client {
        self.inner.client.clone()
    }

    /// Runs a future on the cluster's runtime and waits for it; panics if called from inside
    /// an async task (this crate's callers are plain threads).
    pub fn block_on<F: Future>(&self, f: F) -> F::Output {
        self.handle().block_on(f)
    }

    pub(crate) fn handle(&self) -> &tokio::runtime::Handle {
        self.inner
            .rt
            .as_ref()
            .expect("runtime lives as long as the cluster")
            .handle()
    }

    /// The API discovery, run once and cached; `refresh` runs it again (after a CRD was applied).
    pub(crate) async fn discovery(&self, refresh: bool) -> Result<Arc<Discovery>, Error> {
        if !refresh {
            if let Some(d) = self.inner.discovery.lock().expect("discovery lock").clone() {
                return Ok(d);
            }
        }
        let client = self.client();
        let d = match Discovery::new(client.clone()).run_aggregated().await {
            Ok(d) => d,
            Err(_) => Discovery::new(client)
                .run()
                .await
                .map_err(|e| Error::api("API discovery", e))?,
        };
        let d = Arc::new(d);
        *self.inner.discovery.lock().expect("discovery lock") = Some(d.clone());
        Ok(d)
    }

    /// True when the API server serves the API group `group` (e.g. `metrics.k8s.io`).
    pub fn serves_group(&self, group: &str) -> Result<bool, Error> {
        self.block_on(async { Ok(self.discovery(false).await?.has_group(group)) })
    }

    /// Creates namespace `name` labelled [`MANAGED_BY`] (plus `labels`) and waits (at most 30 s)
    /// for its `default` ServiceAccount, without which no pod is admitted; an existing namespace
    /// of that name is an error, so two runs never share one.
    pub fn create_namespace(&self, name: &str, labels: &[(&str, &str)]) -> Result<(), Error> {
        let mut l = BTreeMap::new();
        l.insert(MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string());
        for (k, v) in labels {
            l.insert(k.to_string(), v.to_string());
        }
        let ns = Namespace {
            metadata: kube::api::ObjectMeta {
                name: Some(name.to_string()),
                labels: Some(l),
                ..Default::default()
            },
            ..Default::default()
        };
        let api: Api<Namespace> = Api::all(self.client());
        self.block_on(api.create(&PostParams::default(), &ns))
            .map_err(|e| Error::api(format!("create namespace {name}"), e))?;
        let sa: Api<ServiceAccount> = Api::namespaced(self.client(), name);
        let bound = Duration::from_secs(30);
        let t0 = Instant::now();
        self.block_on(async {
            loop {
                let state = match sa.get_opt("default").await {
                    Ok(Some(_)) => return Ok(()),
                    Ok(None) => "no default ServiceAccount yet (kube-controller-manager makes it)"
                        .to_string(),
                    Err(e) => crate::error::split(e).0,
                };
                if t0.elapsed() >= bound {
                    return Err(Error::Timeout {
                        what: format!("namespace {name} ready"),
                        after: bound,
                        state,
                    });
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    }

    /// Whether namespace `name` exists (a 403 is an error: the caller may not read it).
    pub fn namespace_exists(&self, name: &str) -> Result<bool, Error> {
        let api: Api<Namespace> = Api::all(self.client());
        self.block_on(api.get_opt(name))
            .map(|n| n.is_some())
            .map_err(|e| Error::api(format!("get namespace {name}"), e))
    }

    /// Sets label `key` of namespace `name` to `value` (a merge patch of its labels).
    pub fn label_namespace(&self, name: &str, key: &str, value: &str) -> Result<(), Error> {
        let api: Api<Namespace> = Api::all(self.client());
        let patch = serde_json::json!({ "metadata": { "labels": { key: value } } });
        self.block_on(api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)))
            .map(|_| ())
            .map_err(|e| Error::api(format!("label namespace {name}"), e))
    }

    /// Deletes namespace `name` and waits until it is gone (its pods' grace periods included),
    /// at most `bound`; returns how long it took. A namespace already gone is not an error.
    pub fn delete_namespace(&self, name: &str, bound: Duration) -> Result<Duration, Error> {
        let t0 = Instant::now();
        let api: Api<Namespace> = Api::all(self.client());
        self.block_on(async {
            match api.delete(name, &DeleteParams::background()).await {
                Ok(_) => {}
                Err(e) => {
                    let e = Error::api(format!("delete namespace {name}"), e);
                    if e.is_not_found() {
                        return Ok(t0.elapsed());
                    }
                    return Err(e);
                }
            }
            let mut state = String::from("Terminating");
            while t0.elapsed() < bound {
                match api.get_opt(name).await {
                    Ok(None) => return Ok(t0.elapsed()),
                    Ok(Some(ns)) => {
                        state = ns
                            .status
                            .and_then(|s| s.conditions)
                            .unwrap_or_default()
                            .into_iter()
                            .filter(|c| c.status == "True")
                            .filter_map(|c| c.message)
                            .next()
                            .unwrap_or_else(|| "Terminating".into());
                    }
                    Err(e) => state = crate::error::split(e).0,
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(Error::Timeout {
                what: format!("delete namespace {name}"),
                after: bound,
                state,
            })
        })
    }

    /// Names of the namespaces labelled [`MANAGED_BY`] that still exist (leftovers of runs that
    /// were kept or killed), optionally only those whose name starts with `prefix`.
    pub fn managed_namespaces(&self, prefix: Option<&str>) -> Result<Vec<String>, Error> {
        let api: Api<Namespace> = Api::all(self.client());
        let lp = ListParams::default().labels(&format!("{}={}", MANAGED_BY.0, MANAGED_BY.1));
        let list = self
            .block_on(api.list(&lp))
            .map_err(|e| Error::api("list namespaces", e))?;
        Ok(list
            .items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .filter(|n| prefix.is_none_or(|p| n.starts_with(p)))
            .collect())
    }
}

/// A fresh namespace name `PREFIX-YYYYMMDD-HHMMSS-XXXX` (UTC; four hex digits so that two runs
/// started in the same second differ), valid as a DNS-1123 label.
pub fn namespace_name(prefix: &str) -> String {
    let now = jiff::Timestamp::now();
    let salt = (now.subsec_nanosecond() as u32 ^ std::process::id().rotate_left(16)) & 0xffff;
    format!("{prefix}-{}-{salt:04x}", now.strftime("%Y%m%d-%H%M%S"))
}

/// The kubeconfig and a description of where it came from, or a one-line error naming it.
fn read_kubeconfig(path: Option<&Path>) -> Result<(Kubeconfig, String), Error> {
    if let Some(p) = path {
        let kc = Kubeconfig::read_from(p)
            .map_err(|e| Error::Config(format!("kubeconfig {}: {}", p.display(), chain(&e))))?;
        return Ok((kc, p.display().to_string()));
    }
    if let Some(v) = std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
        let source = format!("KUBECONFIG={}", v.to_string_lossy());
        for p in std::env::split_paths(&v).filter(|p| !p.as_os_str().is_empty()) {
            if !p.exists() {
                return Err(Error::Config(format!(
                    "{source}: {} does not exist",
                    p.display()
                )));
            }
        }
        let kc = Kubeconfig::from_env()
            .map_err(|e| Error::Config(format!("{source}: {}", chain(&e))))?
            .unwrap_or_default();
        return Ok((kc, source));
    }
    let home = std::env::home_dir().unwrap_or_else(|| PathBuf::from("~"));
    let p = home.join(".kube").join("config");
    if !p.exists() {
        return Err(Error::Config(format!(
            "no kubeconfig: KUBECONFIG is unset and {} does not exist",
            p.display()
        )));
    }
    let kc = Kubeconfig::read_from(&p)
        .map_err(|e| Error::Config(format!("kubeconfig {}: {}", p.display(), chain(&e))))?;
    Ok((kc, p.display().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_names_are_dns_labels() {
        let n = namespace_name("proxybench");
        assert!(n.len() <= 63, "{n}");
        assert!(n.starts_with("proxybench-2"), "{n}");
        assert!(
            n.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
            "{n}"
        );
    }

    #[test]
    fn a_missing_kubeconfig_names_the_file() {
        let e = read_kubeconfig(Some(Path::new("/nonexistent/kubeconfig"))).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("kubeconfig /nonexistent/kubeconfig: "),
            "{e}"
        );
    }
}
