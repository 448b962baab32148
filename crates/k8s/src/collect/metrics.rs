//! CPU and memory from the metrics API, and Prometheus scrapes through the API server's pod
//! proxy.

use super::{shown_selectors, stopped, t_s, Collector};
use crate::cluster::Cluster;
use crate::error::{split, Error};
use crate::pods::PodInfo;
use crate::prom::{parse_prometheus, Sample};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// One metrics-API sample of one pod.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PodUsage {
    /// Seconds since the case's origin when the sample was read.
    pub t_s: f64,
    /// The pod's name.
    pub pod: String,
    /// CPU in cores, summed over its containers.
    pub cpu_cores: f64,
    /// Memory (working set) in bytes, summed over its containers.
    pub memory_bytes: f64,
}

/// What to scrape on each pod: a port, a path, and the metrics worth keeping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromTarget {
    /// The pod's port.
    pub port: u16,
    /// The path (`/metrics`).
    pub path: String,
    /// Metric name prefixes to keep; every metric when empty.
    pub keep: Vec<String>,
}

/// One Prometheus scrape of one pod.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scrape {
    /// Seconds since the case's origin when the scrape answered.
    pub t_s: f64,
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// Its samples (only the metrics asked for, when a filter was given).
    pub samples: Vec<Sample>,
}

/// A Kubernetes quantity (`250m`, `123456n`, `1.5`, `64Mi`, `1G`, `1e3`) as a number.
pub fn parse_quantity(s: &str) -> Option<f64> {
    let s = s.trim();
    // Sub-unit suffixes divide, so that `250m` is exactly 0.25 as written.
    let suffixes: [(&str, f64); 16] = [
        ("Ki", 1024.0),
        ("Mi", 1024.0 * 1024.0),
        ("Gi", 1024.0 * 1024.0 * 1024.0),
        ("Ti", 1024f64.powi(4)),
        ("Pi", 1024f64.powi(5)),
        ("Ei", 1024f64.powi(6)),
        ("n", -1e9),
        ("u", -1e6),
        ("m", -1e3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
        ("", 1.0),
    ];
    for (suf, mult) in suffixes {
        if let Some(num) = s.strip_suffix(suf) {
            if suf.is_empty() || !num.is_empty() {
                if let Ok(v) = num.parse::<f64>() {
                    return Some(if mult < 0.0 { v / -mult } else { v * mult });
                }
            }
        }
    }
    None
}

impl Cluster {
    /// Samples CPU and memory of the pods of `namespace` matching `selector` from the metrics
    /// API (`metrics.k8s.io` PodMetrics) every `every`. When the cluster does not serve that API
    /// the collector holds no data and says so.
    pub fn sample_metrics(
        &self,
        namespace: &str,
        selector: &str,
        origin: Instant,
        every: Duration,
    ) -> Collector<Vec<PodUsage>> {
        self.sample_pod_metrics(namespace, &[selector.to_string()], origin, every, false)
    }

    /// [`Cluster::sample_metrics`] of the pods that any of `selectors` picks in `namespace`
    /// (every pod when one is empty), each pod sampled once a round even when two selectors
    /// pick it: a gateway's pods in their own namespace, by their own labels. Its samples name
    /// their pods `namespace/pod`, as the watched pods' logs do.
    pub fn sample_metrics_of(
        &self,
        namespace: &str,
        selectors: &[String],
        origin: Instant,
        every: Duration,
    ) -> Collector<Vec<PodUsage>> {
        self.sample_pod_metrics(namespace, selectors, origin, every, true)
    }

    /// The sampler behind both: `qualified` names each pod with its namespace.
    fn sample_pod_metrics(
        &self,
        namespace: &str,
        selectors: &[String],
        origin: Instant,
        every: Duration,
        qualified: bool,
    ) -> Collector<Vec<PodUsage>> {
        let shown = shown_selectors(selectors);
        let what = format!("metrics of pods {} in {namespace}", shown.join(" or "));
        let resource = self.block_on(async {
            let d = self.discovery(false).await?;
            Ok::<_, Error>(
                d.get("metrics.k8s.io")
                    .and_then(|g| g.recommended_kind("PodMetrics")),
            )
        });
        let client = self.client();
        let namespace = namespace.to_string();
        let selectors: Vec<String> =
            if selectors.is_empty() || selectors.iter().any(String::is_empty) {
                vec![String::new()]
            } else {
                selectors.to_vec()
            };
        let w = what.clone();
        Collector::spawn(self, what, Vec::new(), move |state, mut stop| async move {
            let ar = match resource {
                Ok(Some((ar, _))) => ar,
                Ok(None) => {
                    state.lock().expect("collector state").absent = Some(
                        "metrics API not served: the API server has no metrics.k8s.io group (no metrics-server)"
                            .into(),
                    );
                    return;
                }
                Err(e) => {
                    state.lock().expect("collector state").absent =
                        Some(format!("metrics API not known: {e}"));
                    return;
                }
            };
            let api: Api<DynamicObject> = Api::namespaced_with(client, &namespace, &ar);
            let lps: Vec<ListParams> = selectors
                .iter()
                .map(|sel| {
                    let lp = ListParams::default();
                    if sel.is_empty() {
                        lp
                    } else {
                        lp.labels(sel)
                    }
                })
                .collect();
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stopped(&mut stop) => break,
                    _ = tick.tick() => {}
                }
                let mut sampled: BTreeSet<String> = BTreeSet::new();
                for lp in &lps {
                    let r = api.list(lp).await;
                    let t = t_s(origin);
                    let mut st = state.lock().expect("collector state");
                    match r {
                        Ok(list) => {
                            for m in list.items {
                                if !sampled.insert(m.metadata.name.clone().unwrap_or_default()) {
                                    continue;
                                }
                                let mut cpu = 0.0;
                                let mut mem = 0.0;
                                for c in m.data["containers"].as_array().into_iter().flatten() {
                                    cpu += c["usage"]["cpu"]
                                        .as_str()
                                        .and_then(parse_quantity)
                                        .unwrap_or(0.0);
                                    mem += c["usage"]["memory"]
                                        .as_str()
                                        .and_then(parse_quantity)
                                        .unwrap_or(0.0);
                                }
                                let pod = m.metadata.name.clone().unwrap_or_default();
                                st.data.push(PodUsage {
                                    t_s: t,
                                    pod: if qualified {
                                        format!("{namespace}/{pod}")
                                    } else {
                                        pod
                                    },
                                    cpu_cores: cpu,
                                    memory_bytes: mem,
                                });
                            }
                        }
                        Err(e) => {
                            let (m, _) = split(e);
                            st.error(format!("{w}: {m}"));
                        }
                    }
                }
            }
            let mut st = state.lock().expect("collector state");
            if st.data.is_empty() {
                st.absent = Some(match st.errors.first() {
                    Some(e) => format!("metrics API gave no sample: {e}"),
                    None => "metrics API gave no sample before the collector stopped".into(),
                });
            }
        })
    }

    /// Scrapes `target` on every running pod of `namespace` matching `selector` every `every`,
    /// through the API server's pod proxy. The API server proxies only to routable pod IPs, not
    /// to hostNetwork pods on loopback: those scrapes fail, and the collector says so.
    pub fn scrape_prometheus(
        &self,
        namespace: &str,
        selector: &str,
        target: &PromTarget,
        origin: Instant,
        every: Duration,
    ) -> Collector<Vec<Scrape>> {
        self.scrape_prometheus_in(
            &[namespace.to_string()],
            &[selector.to_string()],
            target,
            origin,
            every,
        )
    }

    /// [`Cluster::scrape_prometheus`] of the running pods that any of `selectors` (every pod
    /// when one is empty) picks in any of `namespaces`, each pod scraped once a round: a
    /// gateway's data plane and control plane, each in a namespace of its own.
    pub fn scrape_prometheus_in(
        &self,
        namespaces: &[String],
        selectors: &[String],
        target: &PromTarget,
        origin: Instant,
        every: Duration,
    ) -> Collector<Vec<Scrape>> {
        let PromTarget { port, path, keep } = target.clone();
        let shown = shown_selectors(selectors);
        let what = format!(
            "Prometheus scrape of :{port}/{} of pods {} in {}",
            path.trim_start_matches('/'),
            shown.join(" or "),
            namespaces.join(", ")
        );
        let cluster = self.clone();
        let namespaces = namespaces.to_vec();
        let selectors: Vec<String> =
            if selectors.is_empty() || selectors.iter().any(String::is_empty) {
                vec![String::new()]
            } else {
                selectors.to_vec()
            };
        let w = what.clone();
        Collector::spawn(self, what, Vec::new(), move |state, mut stop| async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stopped(&mut stop) => break,
                    _ = tick.tick() => {}
                }
                // (namespace, pod) of every running pod picked, once each.
                let mut names: BTreeSet<(String, String)> = BTreeSet::new();
                for ns in &namespaces {
                    let pods: Api<Pod> = Api::namespaced(cluster.client(), ns);
                    for sel in &selectors {
                        let mut lp = ListParams::default();
                        if !sel.is_empty() {
                            lp = lp.labels(sel);
                        }
                        match pods.list(&lp).await {
                            Ok(l) => names.extend(
                                l.items
                                    .iter()
                                    .map(PodInfo::of)
                                    .filter(|p| p.phase == "Running" && !p.deleting)
                                    .map(|p| (ns.clone(), p.name)),
                            ),
                            Err(e) => state
                                .lock()
                                .expect("collector state")
                                .error(format!("{w}: {}", split(e).0)),
                        }
                    }
                }
                for (namespace, pod) in names {
                    let r = cluster.scrape_async(&namespace, &pod, port, &path).await;
                    let t = t_s(origin);
                    let mut st = state.lock().expect("collector state");
                    match r {
                        Ok(mut samples) => {
                            if !keep.is_empty() {
                                samples.retain(|s| {
                                    keep.iter().any(|k| s.metric.starts_with(k.as_str()))
                                });
                            }
                            st.data.push(Scrape {
                                t_s: t,
                                namespace,
                                pod,
                                samples,
                            });
                        }
                        Err(e) => st.error(e.to_string()),
                    }
                }
            }
            let mut st = state.lock().expect("collector state");
            if st.data.is_empty() {
                st.absent = Some(match st.errors.first() {
                    Some(e) => format!("no scrape answered: {e}"),
                    None => "no running pod to scrape before the collector stopped".into(),
                });
            }
        })
    }

    /// One Prometheus scrape of `path` on `port` of pod `name`, through the API server's pod
    /// proxy (`/api/v1/namespaces/NS/pods/NAME:PORT/proxy/PATH`), parsed.
    pub fn scrape(
        &self,
        namespace: &str,
        name: &str,
        port: u16,
        path: &str,
    ) -> Result<Vec<Sample>, Error> {
        self.block_on(self.scrape_async(namespace, name, port, path))
    }

    async fn scrape_async(
        &self,
        namespace: &str,
        name: &str,
        port: u16,
        path: &str,
    ) -> Result<Vec<Sample>, Error> {
        let uri = format!(
            "/api/v1/namespaces/{namespace}/pods/{name}:{port}/proxy/{}",
            path.trim_start_matches('/')
        );
        let what = format!("scrape {uri}");
        let req = http::Request::get(&uri)
            .body(Vec::new())
            .map_err(|e| Error::Api {
                what: what.clone(),
                message: e.to_string(),
                code: 0,
            })?;
        let text = self
            .client()
            .request_text(req)
            .await
            .map_err(|e| Error::api(&what, e))?;
        Ok(parse_prometheus(&text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        assert_eq!(parse_quantity("250m"), Some(0.25));
        assert_eq!(parse_quantity("123456789n"), Some(0.123456789));
        assert_eq!(parse_quantity("2"), Some(2.0));
        assert_eq!(parse_quantity("64Mi"), Some(64.0 * 1048576.0));
        assert_eq!(parse_quantity("1k"), Some(1000.0));
        assert_eq!(parse_quantity("1e3"), Some(1000.0));
        assert_eq!(parse_quantity("x"), None);
        assert_eq!(parse_quantity("Mi"), None);
    }
}
