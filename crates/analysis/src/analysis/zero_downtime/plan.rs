//! What a case's actions were, matched to the events the runner recorded: scaling direction,
//! sizes before and after, how removed replicas or backends left, the reloads each action
//! caused, and which replica was running when (for readiness probes and the size charts).

use model::{CaseResult, Event, ReloadRecord};
use scenario::{Action, Case, RemoveMode, StopSpec};
use std::collections::BTreeMap;

/// Seconds after an action ends within which its failures still count as its own: a client
/// notices a closed connection on its next use, well within a second on loopback, and a
/// second more covers a client stalled by a busy machine.
pub const SLACK_S: f64 = 2.0;

/// The kind of one fired action, as far as the theory cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum What {
    /// More proxy replicas joined the shared port.
    ReplicasUp,
    /// Replicas left, stopped this way.
    ReplicasDown(StopSpec),
    /// Backends added (the proxy reloaded with the longer list).
    BackendsUp,
    /// Backends removed this way (the proxy reloaded with the shorter list).
    BackendsDown(RemoveMode),
    /// A plain reload.
    Reload,
    /// Anything else (not modelled here).
    Other,
}

impl What {
    /// True when the proxy reloads as part of the action.
    pub fn reloads(self) -> bool {
        matches!(
            self,
            What::BackendsUp | What::BackendsDown(_) | What::Reload
        )
    }

    /// True when the only disruption the action can cause is the reload's (old workers closing
    /// keep-alive connections): nothing is killed.
    pub fn reload_only(self) -> bool {
        matches!(
            self,
            What::BackendsUp | What::BackendsDown(RemoveMode::Drain) | What::Reload
        )
    }
}

/// One action that fired, with its event.
#[derive(Debug, Clone)]
pub struct Fired {
    /// Index into the case's events.
    pub index: usize,
    /// The event as recorded.
    pub event: Event,
    /// What it was.
    pub what: What,
    /// Size before (replicas or group members).
    pub from: u32,
    /// Size after.
    pub to: u32,
    /// Replicas the action stopped, newest first (the stack stops the newest).
    pub stopped: Vec<String>,
    /// SIGHUPs the action sent, seconds from the origin.
    pub sighups: Vec<f64>,
}

impl Fired {
    /// When the action started, seconds from the origin.
    pub fn t(&self) -> f64 {
        self.event.t_s
    }

    /// The end of the span in which the action's failures are expected.
    pub fn radius_end(&self) -> f64 {
        self.event.t_s + self.event.duration_ms / 1e3 + SLACK_S
    }

    /// A short label, e.g. `scale_replicas 3 -> 1 (kill)`.
    pub fn label(&self) -> String {
        format!("{} {}", self.event.action, self.event.detail)
    }
}

/// The actions of a case as they fired, and replica lifetimes.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Fired actions in order.
    pub fired: Vec<Fired>,
    /// Replica name to (started, stopped) in seconds from the origin; `None` means from the
    /// start of the case or until its end.
    pub lifetimes: BTreeMap<String, (Option<f64>, Option<f64>)>,
    /// Replicas at the start.
    pub replicas_at_start: u32,
    /// Backend group sizes at the start.
    pub backends_at_start: u32,
    /// True when events and planned steps disagree (an action failed or was skipped).
    pub mismatch: bool,
}

impl Plan {
    /// Matches the case's planned steps with the events that fired; `kind` is the proxy kind's
    /// name, which names its replicas (`KIND-0`, `KIND-1`...) as the stack does.
    pub fn new(case: &Case, result: &CaseResult, kind: &str) -> Plan {
        let replicas = case.proxy.as_ref().map_or(0, |p| p.replicas);
        let mut sizes: BTreeMap<String, u32> = case
            .backends
            .iter()
            .map(|g| (g.name.clone(), g.count))
            .collect();
        let mut plan = Plan {
            replicas_at_start: replicas,
            backends_at_start: sizes.values().sum(),
            ..Plan::default()
        };
        let mut running: Vec<String> = (0..replicas).map(|i| format!("{kind}-{i}")).collect();
        for name in &running {
            plan.lifetimes.insert(name.clone(), (None, None));
        }
        let mut next = replicas;
        for (index, (step, event)) in case.steps.iter().zip(&result.events).enumerate() {
            let mut f = Fired {
                index,
                event: event.clone(),
                what: What::Other,
                from: 0,
                to: 0,
                stopped: Vec::new(),
                sighups: sighups(event, &result.reloads),
            };
            match &step.action {
                Action::ScaleReplicas { to, stop } => {
                    f.from = running.len() as u32;
                    f.to = *to;
                    f.what = if *to >= f.from {
                        What::ReplicasUp
                    } else {
                        What::ReplicasDown(*stop)
                    };
                    while (running.len() as u32) < *to {
                        let name = format!("{kind}-{next}");
                        next += 1;
                        plan.lifetimes.insert(name.clone(), (Some(event.t_s), None));
                        running.push(name);
                    }
                    while (running.len() as u32) > *to {
                        if let Some(name) = running.pop() {
                            if let Some(l) = plan.lifetimes.get_mut(&name) {
                                l.1 = Some(event.t_s);
                            }
                            f.stopped.push(name);
                        }
                    }
                }
                Action::ScaleBackends { group, to, remove } => {
                    let size = sizes.entry(group.clone()).or_insert(0);
                    f.from = *size;
                    f.to = *to;
                    f.what = if *to >= *size {
                        What::BackendsUp
                    } else {
                        What::BackendsDown(*remove)
                    };
                    *size = *to;
                }
                Action::Reload => f.what = What::Reload,
                _ => {}
            }
            let renamed = action_name(&step.action).is_some_and(|n| n != event.action);
            if renamed || event.error.is_some() {
                plan.mismatch = true;
            }
            plan.fired.push(f);
        }
        plan
    }

    /// The action a failure at `t` belongs to: the last one that started at or before it.
    pub fn owner(&self, t: f64) -> Option<&Fired> {
        self.fired.iter().rev().find(|f| f.t() <= t)
    }

    /// The reload that came last at or before `t`: (index of its action, the time of its first
    /// SIGHUP at or before `t`). An action reloading several replicas signals them one after
    /// another, and a record does not say which replica its connection reached, so a loss is
    /// timed from the earliest SIGHUP that could have caused it.
    pub fn last_sighup(&self, t: f64) -> Option<(usize, f64)> {
        let all = || {
            self.fired
                .iter()
                .flat_map(|f| f.sighups.iter().map(move |s| (f.index, *s)))
                .filter(|(_, s)| *s <= t)
        };
        let (index, _) = all().max_by(|a, b| a.1.total_cmp(&b.1))?;
        all()
            .filter(|(i, _)| *i == index)
            .min_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// True when `t` falls inside the action's expected span (start to end plus slack).
    pub fn inside(&self, t: f64) -> bool {
        self.fired.iter().any(|f| t >= f.t() && t <= f.radius_end())
    }

    /// True when a connection whose previous attempt ended at `prev` and that failed at `t`
    /// sat idle through an action's span: it was last used no later than the span's end and
    /// failed after the action began, so this is the first use that could find what the action
    /// did to it (an open-loop pool leaves some connections idle for seconds).
    pub fn idle_through(&self, prev: f64, t: f64) -> bool {
        self.fired
            .iter()
            .any(|f| t >= f.t() && prev <= f.radius_end())
    }

    /// True when some action of the case is of this kind.
    pub fn has(&self, pred: impl Fn(What) -> bool) -> bool {
        self.fired.iter().any(|f| pred(f.what))
    }

    /// Replicas stopped by actions of this stop mode.
    pub fn stopped(&self, mode: StopSpec) -> u32 {
        self.fired
            .iter()
            .filter(|f| f.what == What::ReplicasDown(mode))
            .map(|f| f.stopped.len() as u32)
            .sum()
    }

    /// SIGHUPs sent in the case.
    pub fn sighups(&self) -> u32 {
        self.fired.iter().map(|f| f.sighups.len() as u32).sum()
    }

    /// When `replica` was stopped, if it was.
    pub fn stopped_at(&self, replica: &str) -> Option<f64> {
        self.lifetimes.get(replica).and_then(|l| l.1)
    }

    /// Replicas serving over time, as a step series from 0 to `end_s`.
    pub fn replica_steps(&self, end_s: f64) -> Vec<(f64, f64)> {
        let mut pts = vec![(0.0, self.replicas_at_start as f64)];
        for f in &self.fired {
            if matches!(f.what, What::ReplicasUp | What::ReplicasDown(_)) {
                pts.push((f.t(), f.from as f64));
                pts.push((f.t(), f.to as f64));
            }
        }
        let last = pts.last().map_or(0.0, |p| p.1);
        pts.push((end_s, last));
        pts
    }

    /// Backends in the proxy's upstream over time (summed over groups), as a step series.
    pub fn backend_steps(&self, end_s: f64) -> Vec<(f64, f64)> {
        let mut now = self.backends_at_start as f64;
        let mut pts = vec![(0.0, now)];
        for f in &self.fired {
            if matches!(f.what, What::BackendsUp | What::BackendsDown(_)) {
                pts.push((f.t(), now));
                now += f.to as f64 - f.from as f64;
                pts.push((f.t(), now));
            }
        }
        pts.push((end_s, now));
        pts
    }
}

/// The event name the stack records for the actions this analysis models.
fn action_name(a: &Action) -> Option<&'static str> {
    match a {
        Action::ScaleBackends { .. } => Some("scale_backends"),
        Action::ScaleReplicas { .. } => Some("scale_replicas"),
        Action::Reload => Some("reload"),
        _ => None,
    }
}

/// SIGHUP times of the reloads an event caused (they happen while the action runs).
fn sighups(ev: &Event, reloads: &[ReloadRecord]) -> Vec<f64> {
    let end = ev.t_s + ev.duration_ms / 1e3 + 1e-3;
    reloads
        .iter()
        .filter(|r| r.t_s >= ev.t_s - 1e-3 && r.t_s <= end)
        .map(|r| r.t_s)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plan with one kill from 5.0 s lasting 300 ms (its span ends at 7.3 s with the slack).
    fn one_kill() -> Plan {
        Plan {
            fired: vec![Fired {
                index: 0,
                event: Event {
                    t_s: 5.0,
                    action: "scale_replicas".into(),
                    detail: "3 -> 1 (kill)".into(),
                    duration_ms: 300.0,
                    error: None,
                    limit: false,
                },
                what: What::ReplicasDown(StopSpec::Kill),
                from: 3,
                to: 1,
                stopped: Vec::new(),
                sighups: Vec::new(),
            }],
            ..Plan::default()
        }
    }

    #[test]
    fn a_connection_idle_through_an_action_owes_its_first_failure_to_it() {
        let p = one_kill();
        assert!(!p.inside(8.0), "8 s is past the span");
        // Last used at 4.9 s (before the kill), first failure at 8.0 s: the kill's.
        assert!(p.idle_through(4.9, 8.0));
        // Last used inside the span, failed after it: still the first use since.
        assert!(p.idle_through(7.0, 9.5));
        // Used successfully after the span, then failed: not the kill's.
        assert!(!p.idle_through(7.5, 8.0));
        // A failure before the action began cannot be its.
        assert!(!p.idle_through(1.0, 4.0));
    }
}
