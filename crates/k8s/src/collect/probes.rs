//! Readiness probe tallies read from each node's kubelet (`/metrics/probes`).

use super::{stopped, t_s, Collector};
use crate::cluster::Cluster;
use crate::error::{split, Error};
use crate::pods::PodInfo;
use crate::prom::{parse_prometheus, Sample};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// One readiness probe tally of one pod, as its kubelet counted it between two samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeTally {
    /// Seconds since the case's origin when the kubelet's counters were read (the probes ran
    /// in the interval before).
    pub t_s: f64,
    /// The pod's name.
    pub pod: String,
    /// The node whose kubelet probed it.
    pub node: String,
    /// Probes that succeeded in the interval.
    pub successes: u64,
    /// Probes that failed in the interval.
    pub failures: u64,
    /// Probes whose result was unknown (the prober could not run them) in the interval.
    pub unknown: u64,
    /// The mean duration of the interval's successful probes, in seconds (the kubelet keeps a
    /// histogram of them: its sum over its count); `None` when none succeeded.
    pub mean_success_s: Option<f64>,
}

/// What a readiness probe sampler gathered: the tallies, and how each node's kubelet reads
/// went, so that counts from some nodes are never shown as all of them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeCounts {
    /// Each pod's tally per interval, in the order read.
    pub tallies: Vec<ProbeTally>,
    /// Per node that ran (or ran) a selected pod: its kubelet's reads.
    pub nodes: BTreeMap<String, NodeReads>,
}

/// How the reads of one node's kubelet counters went.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeReads {
    /// Reads that answered.
    pub ok: u64,
    /// Reads that failed.
    pub failed: u64,
    /// Why its last read failed, when it did: the kubelet's counters are cumulative, so a read
    /// that answers catches up with every failed one before it, and only a node whose last read
    /// failed has counts missing (everything since its last good read).
    pub last_error: Option<String>,
}

impl ProbeCounts {
    /// The nodes whose counts are missing in part or whole (their last read failed), each with
    /// why, beside how many nodes there were: what a sentence on the counts must say.
    pub fn missing_nodes(&self) -> Vec<(&str, &NodeReads)> {
        self.nodes
            .iter()
            .filter(|(_, r)| r.last_error.is_some())
            .map(|(n, r)| (n.as_str(), r))
            .collect()
    }
}

/// The readiness probe counters of one pod, as last read.
#[derive(Debug, Clone, Copy, Default)]
struct ProbeCounters {
    successes: f64,
    failures: f64,
    unknown: f64,
    duration_sum: f64,
    duration_count: f64,
}

impl Cluster {
    /// Reads, every `every`, the readiness probe counters that the kubelets running the pods of
    /// `selector` in `namespace` keep (`prober_probe_total` and
    /// `prober_probe_duration_seconds` on each kubelet's `/metrics/probes`, through the API
    /// server's node proxy): each pod's successes, failures and the mean time of its successful
    /// probes since the previous read. Needs `nodes/proxy`; without it the collector says why.
    pub fn sample_probes(
        &self,
        namespace: &str,
        selector: &str,
        origin: Instant,
        every: Duration,
    ) -> Collector<ProbeCounts> {
        let what = format!("readiness probes of pods {selector} in {namespace}");
        let cluster = self.clone();
        let (namespace, selector) = (namespace.to_string(), selector.to_string());
        let w = what.clone();
        let init = ProbeCounts::default();
        Collector::spawn(self, what, init, move |state, mut stop| async move {
            let pods: Api<Pod> = Api::namespaced(cluster.client(), &namespace);
            let lp = ListParams::default().labels(&selector);
            let mut last: BTreeMap<String, ProbeCounters> = BTreeMap::new();
            let mut read_any = false;
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stopped(&mut stop) => break,
                    _ = tick.tick() => {}
                }
                // The nodes that run (or ran) the selected pods, and which pods are ours.
                let mut nodes: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
                match pods.list(&lp).await {
                    Ok(l) => {
                        for p in l.items.iter().map(PodInfo::of) {
                            if let Some(n) = p.node {
                                nodes.entry(n).or_default().insert(p.name);
                            }
                        }
                    }
                    Err(e) => {
                        state
                            .lock()
                            .expect("collector state")
                            .error(format!("{w}: {}", split(e).0));
                        continue;
                    }
                }
                for (node, ours) in nodes {
                    let r = cluster.node_metrics(&node, "metrics/probes").await;
                    let t = t_s(origin);
                    let mut st = state.lock().expect("collector state");
                    let reads = st.data.nodes.entry(node.clone()).or_default();
                    let samples = match r {
                        Ok(s) => {
                            reads.ok += 1;
                            reads.last_error = None;
                            s
                        }
                        Err(e) => {
                            reads.failed += 1;
                            reads.last_error = Some(e.to_string());
                            st.error(e.to_string());
                            continue;
                        }
                    };
                    read_any = true;
                    let mut now: BTreeMap<String, ProbeCounters> = BTreeMap::new();
                    for x in &samples {
                        if x.label("probe_type") != Some("Readiness")
                            || x.label("namespace") != Some(namespace.as_str())
                        {
                            continue;
                        }
                        let Some(pod) = x.label("pod").filter(|p| ours.contains(*p)) else {
                            continue;
                        };
                        let c = now.entry(pod.to_string()).or_default();
                        match (x.metric.as_str(), x.label("result")) {
                            ("prober_probe_total", Some("successful")) => c.successes += x.value,
                            ("prober_probe_total", Some("failed")) => c.failures += x.value,
                            ("prober_probe_total", Some("unknown")) => c.unknown += x.value,
                            ("prober_probe_duration_seconds_sum", _) => c.duration_sum += x.value,
                            ("prober_probe_duration_seconds_count", _) => {
                                c.duration_count += x.value
                            }
                            _ => {}
                        }
                    }
                    for (pod, c) in now {
                        // A pod first seen starts from zero: its kubelet counts from its start.
                        let b = last.get(&pod).copied().unwrap_or_default();
                        let d = |a: f64, b: f64| (a - b).max(0.0).round() as u64;
                        let (ok, failed, unknown) = (
                            d(c.successes, b.successes),
                            d(c.failures, b.failures),
                            d(c.unknown, b.unknown),
                        );
                        let timed = c.duration_count - b.duration_count;
                        if ok + failed + unknown > 0 {
                            st.data.tallies.push(ProbeTally {
                                t_s: t,
                                pod: pod.clone(),
                                node: node.clone(),
                                successes: ok,
                                failures: failed,
                                unknown,
                                mean_success_s: (ok > 0 && timed > 0.0)
                                    .then(|| (c.duration_sum - b.duration_sum) / timed),
                            });
                        }
                        last.insert(pod, c);
                    }
                }
            }
            let mut st = state.lock().expect("collector state");
            if !read_any {
                st.absent = Some(match st.errors.first() {
                    Some(e) => format!("the kubelets' probe counters could not be read: {e}"),
                    None => "no probed pod ran before the collector stopped".into(),
                });
            }
        })
    }

    /// One of a node's kubelet metrics endpoints (`metrics/probes`, `metrics/cadvisor`), through
    /// the API server's node proxy, parsed.
    async fn node_metrics(&self, node: &str, path: &str) -> Result<Vec<Sample>, Error> {
        let uri = format!("/api/v1/nodes/{node}/proxy/{path}");
        let what = format!("read {uri}");
        let req = http::Request::get(&uri)
            .body(Vec::new())
            .map_err(|e| Error::Api {
                what: what.clone(),
                message: e.to_string(),
                code: 0,
            })?;
        let text = tokio::time::timeout(Duration::from_secs(5), self.client().request_text(req))
            .await
            .map_err(|_| Error::Timeout {
                what: what.clone(),
                after: Duration::from_secs(5),
                state: "no answer".into(),
            })?
            .map_err(|e| Error::api(&what, e))?;
        Ok(parse_prometheus(&text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The nodes whose counts are missing are those whose last read failed; a node whose failed
    /// read was followed by one that answered is whole (the counters are cumulative).
    #[test]
    fn only_a_node_whose_last_read_failed_is_missing() {
        let mut c = ProbeCounts::default();
        c.nodes.insert(
            "proxybench".into(),
            NodeReads {
                ok: 9,
                failed: 1,
                last_error: None,
            },
        );
        c.nodes.insert(
            "proxybench-2".into(),
            NodeReads {
                ok: 3,
                failed: 6,
                last_error: Some("no answer after 5s".into()),
            },
        );
        let m = c.missing_nodes();
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].0, "proxybench-2");
    }
}
