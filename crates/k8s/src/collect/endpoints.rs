//! The EndpointSlice watcher: each endpoint of a Service arriving, leaving or changing its
//! conditions.

use super::{stopped, t_s, Collector};
use crate::cluster::Cluster;
use futures::StreamExt;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::Api;
use kube::runtime::watcher::{self, watcher};
use kube::runtime::WatchStreamExt;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Instant;

/// One endpoint of a Service changed, as an EndpointSlice watch saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EndpointChange {
    /// Seconds since the case's origin when the watch delivered it.
    pub t_s: f64,
    /// The Service.
    pub service: String,
    /// The pod the endpoint belongs to (its `targetRef`), else its address.
    pub endpoint: String,
    /// Its address.
    pub ip: String,
    /// The `ready` condition (traffic goes to it).
    pub ready: bool,
    /// The `serving` condition (it would serve; true for a terminating pod still answering).
    pub serving: bool,
    /// The `terminating` condition.
    pub terminating: bool,
    /// It left the Service's EndpointSlices.
    pub gone: bool,
    /// Part of the state found when the watch started, not a change seen happening.
    pub initial: bool,
    /// After this change: the Service's ready endpoints.
    pub ready_endpoints: u32,
}

/// One endpoint's conditions, as compared between events.
#[derive(Debug, Clone, PartialEq)]
struct EndpointSeen {
    endpoint: String,
    ready: bool,
    serving: bool,
    terminating: bool,
}

/// Every endpoint of one EndpointSlice, by address.
fn slice_endpoints(s: &EndpointSlice) -> BTreeMap<String, EndpointSeen> {
    let mut out = BTreeMap::new();
    for e in &s.endpoints {
        let c = e.conditions.clone().unwrap_or_default();
        // Absent conditions mean ready and serving, not terminating (the API's defaults).
        let ready = c.ready.unwrap_or(true);
        for a in &e.addresses {
            out.insert(
                a.clone(),
                EndpointSeen {
                    endpoint: e
                        .target_ref
                        .as_ref()
                        .and_then(|t| t.name.clone())
                        .unwrap_or_else(|| a.clone()),
                    ready,
                    serving: c.serving.unwrap_or(ready),
                    terminating: c.terminating.unwrap_or(false),
                },
            );
        }
    }
    out
}

/// The merge of every slice's endpoints (an address in two slices, as during a slice's
/// replacement, counts once: ready if either says so).
fn merged(
    slices: &BTreeMap<String, BTreeMap<String, EndpointSeen>>,
) -> BTreeMap<String, EndpointSeen> {
    let mut out: BTreeMap<String, EndpointSeen> = BTreeMap::new();
    for eps in slices.values() {
        for (ip, e) in eps {
            match out.get_mut(ip) {
                Some(o) => {
                    o.ready |= e.ready;
                    o.serving |= e.serving;
                    o.terminating &= e.terminating;
                }
                None => {
                    out.insert(ip.clone(), e.clone());
                }
            }
        }
    }
    out
}

impl Cluster {
    /// Watches the EndpointSlices of Service `service` in `namespace`: each endpoint's arrival,
    /// departure and condition change (ready, serving, terminating), stamped against `origin`.
    pub fn watch_endpoints(
        &self,
        namespace: &str,
        service: &str,
        origin: Instant,
    ) -> Collector<Vec<EndpointChange>> {
        let api: Api<EndpointSlice> = Api::namespaced(self.client(), namespace);
        let what = format!("EndpointSlices of service {service} in {namespace}");
        let cfg =
            watcher::Config::default().labels(&format!("kubernetes.io/service-name={service}"));
        let w = what.clone();
        let service = service.to_string();
        Collector::spawn(self, what, Vec::new(), move |state, mut stop| async move {
            let mut stream = watcher(api, cfg).default_backoff().boxed();
            let mut slices: BTreeMap<String, BTreeMap<String, EndpointSeen>> = BTreeMap::new();
            let mut listing: Option<BTreeMap<String, BTreeMap<String, EndpointSeen>>> = None;
            let mut before: BTreeMap<String, EndpointSeen> = BTreeMap::new();
            let mut first_listing = true;
            let mut got_any = false;
            loop {
                let ev = tokio::select! {
                    _ = stopped(&mut stop) => break,
                    ev = stream.next() => ev,
                };
                let Some(ev) = ev else { break };
                let t = t_s(origin);
                let mut st = state.lock().expect("collector state");
                let ev = match ev {
                    Ok(ev) => ev,
                    Err(e) => {
                        st.error(format!("{w}: watch: {}", crate::error::chain(&e)));
                        continue;
                    }
                };
                got_any = true;
                let name = |s: &EndpointSlice| s.metadata.name.clone().unwrap_or_default();
                let initial = match ev {
                    watcher::Event::Init => {
                        listing = Some(BTreeMap::new());
                        continue;
                    }
                    watcher::Event::InitApply(s) => {
                        if let Some(l) = listing.as_mut() {
                            l.insert(name(&s), slice_endpoints(&s));
                        }
                        continue;
                    }
                    watcher::Event::InitDone => {
                        slices = listing.take().unwrap_or_default();
                        let was = first_listing;
                        first_listing = false;
                        was
                    }
                    watcher::Event::Apply(s) => {
                        slices.insert(name(&s), slice_endpoints(&s));
                        false
                    }
                    watcher::Event::Delete(s) => {
                        slices.remove(&name(&s));
                        false
                    }
                };
                let now = merged(&slices);
                let ready_endpoints = now.values().filter(|e| e.ready).count() as u32;
                let mut push = |ip: &str, e: &EndpointSeen, gone: bool| {
                    st.data.push(EndpointChange {
                        t_s: t,
                        service: service.clone(),
                        endpoint: e.endpoint.clone(),
                        ip: ip.to_string(),
                        ready: e.ready && !gone,
                        serving: e.serving && !gone,
                        terminating: e.terminating,
                        gone,
                        initial,
                        ready_endpoints,
                    });
                };
                for (ip, e) in &now {
                    if before.get(ip) != Some(e) {
                        push(ip, e, false);
                    }
                }
                for (ip, e) in &before {
                    if !now.contains_key(ip) {
                        push(ip, e, true);
                    }
                }
                before = now;
            }
            let mut st = state.lock().expect("collector state");
            if !got_any {
                st.absent = Some(match st.errors.first() {
                    Some(e) => format!("EndpointSlice watch got no data: {e}"),
                    None => "EndpointSlice watch got no data before it was stopped".into(),
                });
            }
        })
    }
}
