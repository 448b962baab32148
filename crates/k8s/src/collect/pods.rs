//! The pod watcher: each pod's phase, readiness and deletion changes and each container restart,
//! stamped against the case's origin.

use super::{stopped, t_s, Collected, Collector};
use crate::cluster::Cluster;
use crate::pods::PodInfo;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::watcher::{self, watcher};
use kube::runtime::WatchStreamExt;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

/// One pod's state changed, as a pod watcher saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PodChange {
    /// Seconds since the case's origin when the watch delivered it.
    pub t_s: f64,
    /// The watched selector (`app=web`; empty for every pod of the namespace).
    pub selector: String,
    /// The pod's name.
    pub pod: String,
    /// `status.phase`.
    pub phase: String,
    /// The pod's Ready condition is True.
    pub ready: bool,
    /// The pod is terminating (deletion requested).
    pub deleting: bool,
    /// The pod object is gone.
    pub gone: bool,
    /// The pod IP, once assigned.
    pub ip: Option<String>,
    /// Part of the state found when the watch started, not a change seen happening.
    pub initial: bool,
    /// After this change: pods of the selector that are Ready and not terminating.
    pub ready_pods: u32,
    /// After this change: pods of the selector that exist (terminating ones included).
    pub pods: u32,
}

/// A container's restart count went up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RestartChange {
    /// Seconds since the case's origin when the watch delivered it.
    pub t_s: f64,
    /// The pod's name.
    pub pod: String,
    /// The container's name.
    pub container: String,
    /// Its restart count now.
    pub restarts: i32,
    /// The restarts this change adds: the jump since the count the watch last saw (from 0 for a
    /// pod that came after the watch began), so that 0 -> 3 seen at once is 3.
    pub added: i32,
    /// Why the previous instance ended (`lastState.terminated.reason`: `OOMKilled`, `Error`...).
    pub reason: Option<String>,
    /// The previous instance's exit code.
    pub exit_code: Option<i32>,
}

/// What a pod watcher saw: every phase/readiness/deletion change, and every restart.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PodTimeline {
    /// Pod state changes, in the order seen.
    pub changes: Vec<PodChange>,
    /// Container restarts, in the order seen.
    pub restarts: Vec<RestartChange>,
}

/// The per-pod state a pod watcher compares against.
#[derive(Clone, PartialEq)]
struct Seen {
    name: String,
    phase: String,
    ready: bool,
    deleting: bool,
    ip: Option<String>,
}

/// A pod watcher's memory: each pod's last state and each container's restart count.
struct PodState {
    selector: String,
    pods: BTreeMap<String, Seen>,
    restarts: BTreeMap<(String, String), i32>,
}

impl PodState {
    /// Records pod `p` as seen at `t` if its state changed, and any restart of its containers.
    fn record(
        &mut self,
        p: &Pod,
        t: f64,
        initial: bool,
        gone: bool,
        st: &mut Collected<PodTimeline>,
    ) {
        let i = PodInfo::of(p);
        let seen = Seen {
            name: i.name.clone(),
            phase: i.phase.clone(),
            ready: i.ready,
            deleting: i.deleting,
            ip: i.ip.map(|ip| ip.to_string()),
        };
        let changed = if gone {
            self.pods.remove(&i.uid).is_some()
        } else {
            self.pods.insert(i.uid.clone(), seen.clone()).as_ref() != Some(&seen)
        };
        if changed {
            let ready_pods = self
                .pods
                .values()
                .filter(|s| s.ready && !s.deleting)
                .count() as u32;
            st.data.changes.push(PodChange {
                t_s: t,
                selector: self.selector.clone(),
                pod: i.name.clone(),
                phase: i.phase.clone(),
                ready: i.ready && !gone,
                deleting: i.deleting,
                gone,
                ip: seen.ip,
                initial,
                ready_pods,
                pods: self.pods.len() as u32,
            });
        }
        let statuses = p
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref());
        for cs in statuses.into_iter().flatten() {
            let before = self
                .restarts
                .insert((i.uid.clone(), cs.name.clone()), cs.restart_count);
            // The count before: the last one seen; for a pod found when the watch started, its
            // count then (restarts before the case are not the case's); for a pod that came
            // later, 0 (all of its restarts are the case's).
            let from = match before {
                Some(b) => b,
                None if initial => cs.restart_count,
                None => 0,
            };
            if cs.restart_count > from {
                let term = cs.last_state.as_ref().and_then(|l| l.terminated.as_ref());
                st.data.restarts.push(RestartChange {
                    t_s: t,
                    pod: i.name.clone(),
                    container: cs.name.clone(),
                    restarts: cs.restart_count,
                    added: cs.restart_count - from,
                    reason: term.and_then(|t| t.reason.clone()),
                    exit_code: term.map(|t| t.exit_code),
                });
            }
        }
        if gone {
            self.restarts.retain(|(uid, _), _| *uid != i.uid);
        }
    }
}

impl Cluster {
    /// Watches the pods of `namespace` matching `selector` (every pod when empty): each
    /// phase, readiness or deletion change, and each container restart, stamped against
    /// `origin`.
    pub fn watch_pods(
        &self,
        namespace: &str,
        selector: &str,
        origin: Instant,
    ) -> Collector<PodTimeline> {
        let api: Api<Pod> = Api::namespaced(self.client(), namespace);
        let what = format!(
            "pods {} in {namespace}",
            if selector.is_empty() {
                "(all)"
            } else {
                selector
            }
        );
        let mut cfg = watcher::Config::default();
        if !selector.is_empty() {
            cfg = cfg.labels(selector);
        }
        let selector = selector.to_string();
        let w = what.clone();
        Collector::spawn(
            self,
            what,
            PodTimeline::default(),
            move |state, mut stop| async move {
                let mut stream = watcher(api, cfg).default_backoff().boxed();
                let mut ps = PodState {
                    selector,
                    pods: BTreeMap::new(),
                    restarts: BTreeMap::new(),
                };
                let mut listing: Option<BTreeSet<String>> = None;
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
                    match ev {
                        watcher::Event::Init => listing = Some(BTreeSet::new()),
                        watcher::Event::InitApply(p) => {
                            if let Some(l) = listing.as_mut() {
                                l.insert(p.metadata.uid.clone().unwrap_or_default());
                            }
                            ps.record(&p, t, first_listing, false, &mut st);
                        }
                        watcher::Event::InitDone => {
                            // Pods that went away while the watch was down.
                            let listed = listing.take().unwrap_or_default();
                            let vanished: Vec<(String, Seen)> = ps
                                .pods
                                .iter()
                                .filter(|(uid, _)| !listed.contains(*uid))
                                .map(|(u, s)| (u.clone(), s.clone()))
                                .collect();
                            for (uid, s) in vanished {
                                let mut p = Pod::default();
                                p.metadata.uid = Some(uid);
                                p.metadata.name = Some(s.name);
                                p.status = Some(k8s_openapi::api::core::v1::PodStatus {
                                    phase: Some(s.phase),
                                    ..Default::default()
                                });
                                ps.record(&p, t, false, true, &mut st);
                            }
                            first_listing = false;
                        }
                        watcher::Event::Apply(p) => ps.record(&p, t, false, false, &mut st),
                        watcher::Event::Delete(p) => ps.record(&p, t, false, true, &mut st),
                    }
                }
                let mut st = state.lock().expect("collector state");
                if !got_any {
                    st.absent = Some(match st.errors.first() {
                        Some(e) => format!("pod watch got no data: {e}"),
                        None => "pod watch got no data before it was stopped".into(),
                    });
                }
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateRunning, ContainerStatus, PodStatus,
    };

    /// Pod `name` (UID `uid`) whose one container `c` has restarted `restarts` times.
    fn pod(name: &str, uid: &str, restarts: i32) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some(name.into());
        p.metadata.uid = Some(uid.into());
        p.status = Some(PodStatus {
            phase: Some("Running".into()),
            container_statuses: Some(vec![ContainerStatus {
                name: "c".into(),
                restart_count: restarts,
                state: Some(ContainerState {
                    running: Some(ContainerStateRunning::default()),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        });
        p
    }

    fn state() -> (PodState, Collected<PodTimeline>) {
        (
            PodState {
                selector: String::new(),
                pods: BTreeMap::new(),
                restarts: BTreeMap::new(),
            },
            Collected::default(),
        )
    }

    /// Restarts are the sum of the jumps in restartCount: a count seen going 0 -> 3 at once is
    /// 3 restarts, not one; what a pod there when the watch began had restarted before is not
    /// the case's; a pod that came later counts from 0.
    #[test]
    fn restarts_are_the_jumps_in_the_restart_count() {
        let (mut ps, mut st) = state();
        ps.record(&pod("a", "ua", 0), 0.0, true, false, &mut st);
        ps.record(&pod("a", "ua", 3), 1.0, false, false, &mut st);
        let added: Vec<i32> = st.data.restarts.iter().map(|r| r.added).collect();
        assert_eq!(added, [3]);
        assert_eq!(st.data.restarts[0].restarts, 3);
        // Then one more: 3 -> 4 adds 1; the same count again adds nothing.
        ps.record(&pod("a", "ua", 4), 2.0, false, false, &mut st);
        ps.record(&pod("a", "ua", 4), 2.5, false, false, &mut st);
        // Found at 2 when the watch began: those 2 are from before the case.
        ps.record(&pod("b", "ub", 2), 0.0, true, false, &mut st);
        ps.record(&pod("b", "ub", 5), 3.0, false, false, &mut st);
        // A pod that came during the case, first seen at 2: both are the case's.
        ps.record(&pod("c", "uc", 2), 4.0, false, false, &mut st);
        let added: Vec<(String, i32)> = st
            .data
            .restarts
            .iter()
            .map(|r| (r.pod.clone(), r.added))
            .collect();
        assert_eq!(
            added,
            [
                ("a".to_string(), 3),
                ("a".to_string(), 1),
                ("b".to_string(), 3),
                ("c".to_string(), 2)
            ]
        );
        assert_eq!(st.data.restarts.iter().map(|r| r.added).sum::<i32>(), 9);
    }
}
