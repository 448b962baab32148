//! Collectors that run in the background during a case, each stoppable, each stamping what it
//! saw with seconds since the case's `Instant` origin (`t_s`): pod phase/readiness/deletion
//! changes and container restarts ([`Cluster::watch_pods`]), Warning events
//! ([`Cluster::watch_warnings`]), CPU and memory from the metrics API
//! ([`Cluster::sample_metrics`]) and a Prometheus scrape through the API server's pod proxy
//! ([`Cluster::scrape_prometheus`]). A collector that got no data says why (`absent`); it never
//! makes up zeros.

mod endpoints;
mod metrics;
mod pods;
mod probes;
mod warnings;

pub use endpoints::EndpointChange;
pub use metrics::{parse_quantity, PodUsage, PromTarget, Scrape};
pub use pods::{PodChange, PodTimeline, RestartChange};
pub use probes::{NodeReads, ProbeCounts, ProbeTally};
pub use warnings::{WarningEvent, WarningTally};

use crate::cluster::Cluster;
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch as signal;

/// What a collector gathered, and why it has nothing when it has nothing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Collected<T> {
    /// The data.
    pub data: T,
    /// Why there is no data (the API is not served, the watch was refused...), when there is none.
    pub absent: Option<String>,
    /// Errors met along the way (a watch restarted, one scrape failed), each once, in order.
    pub errors: Vec<String>,
}

impl<T> Collected<T> {
    fn error(&mut self, e: String) {
        if !self.errors.contains(&e) {
            self.errors.push(e);
        }
    }
}

/// A background collector on the cluster's runtime; [`Collector::stop`] ends it and hands back
/// what it gathered. Dropping it stops it too (and loses the data).
pub struct Collector<T> {
    what: String,
    state: Arc<Mutex<Collected<T>>>,
    stop: signal::Sender<bool>,
    task: Option<tokio::task::JoinHandle<()>>,
    cluster: Cluster,
}

impl<T: Clone + Send + 'static> Collector<T> {
    fn spawn<F, Fut>(cluster: &Cluster, what: String, init: T, f: F) -> Collector<T>
    where
        F: FnOnce(Arc<Mutex<Collected<T>>>, signal::Receiver<bool>) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let state = Arc::new(Mutex::new(Collected {
            data: init,
            absent: None,
            errors: Vec::new(),
        }));
        let (tx, rx) = signal::channel(false);
        let task = cluster.handle().spawn(f(state.clone(), rx));
        Collector {
            what,
            state,
            stop: tx,
            task: Some(task),
            cluster: cluster.clone(),
        }
    }

    /// What it collects, for messages (`pods app=web in ns`).
    pub fn what(&self) -> &str {
        &self.what
    }

    /// A copy of what it gathered so far.
    pub fn snapshot(&self) -> Collected<T> {
        self.state.lock().expect("collector state").clone()
    }

    /// Stops it (waiting at most 5 s for it to finish its current request) and returns what it
    /// gathered.
    pub fn stop(mut self) -> Collected<T> {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let abort = task.abort_handle();
            let done = self
                .cluster
                .block_on(async { tokio::time::timeout(Duration::from_secs(5), task).await });
            if done.is_err() {
                abort.abort();
                self.state.lock().expect("collector state").error(format!(
                    "{}: did not stop within 5 s; stopped abruptly",
                    self.what
                ));
            }
        }
        self.snapshot()
    }
}

impl<T> Drop for Collector<T> {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

/// Resolves when `rx` says stop (or its sender is gone).
async fn stopped(rx: &mut signal::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

fn t_s(origin: Instant) -> f64 {
    origin.elapsed().as_secs_f64()
}

/// How a collector's selectors are named in its messages: `(all)` for none or an empty one.
fn shown_selectors(selectors: &[String]) -> Vec<&str> {
    if selectors.is_empty() {
        return vec!["(all)"];
    }
    selectors
        .iter()
        .map(|s| if s.is_empty() { "(all)" } else { s.as_str() })
        .collect()
}
