//! The local stack's actions during load: scale backends or replicas, swap the config, set a
//! backend profile, run a command.

use super::*;

impl Stack {
    /// Performs one step. `keep_going` is asked between the steps of a long action (a growth) so
    /// a stop request or the end of the loads cuts it short.
    pub fn apply(&mut self, action: &Action, keep_going: &dyn Fn() -> bool) -> Applied {
        let t0 = Instant::now();
        let done = match action {
            // A growth is many steps, each its own event: it has a path of its own.
            Action::Grow(g) => return crate::grow::grow(self, g, keep_going),
            Action::ScaleBackends { group, to, remove } => {
                self.apply_scale_backends(group, *to, *remove)
            }
            Action::ScaleReplicas { to, stop } => self.apply_scale_replicas(*to, *stop),
            Action::Reload => {
                let (reloads, err) = self.reload_all();
                Done::new(
                    format!("generation {}", self.served.generation),
                    err.map_or(Ok(()), Err),
                )
                .with_reloads(reloads)
            }
            Action::SwapConfig(c) => self.swap_config(c),
            Action::SetProfile {
                group,
                backend,
                profile,
            } => self.apply_set_profile(group.as_deref(), backend.as_deref(), profile),
            Action::DrainBackend(b) => {
                let r = self.fleet.drain_async(b);
                let r = r.map(|h| self.drains.push((b.clone(), h)));
                Done::new(b.clone(), r.map_err(StackError::from))
            }
            Action::KillBackend(b) => Done::new(b.clone(), self.fleet.kill(b).map_err(Into::into)),
            Action::RestartBackend(b) => {
                Done::new(b.clone(), self.fleet.restart(b).map_err(Into::into))
            }
            Action::StopReplica { replica, mode } => {
                let r = self.stop_replica(replica.as_deref(), *mode);
                let detail = match (&r, replica) {
                    (Ok(n), _) => format!("{n} ({mode:?})").to_lowercase(),
                    (Err(_), Some(n)) => n.clone(),
                    (Err(_), None) => "newest".into(),
                };
                Done::new(detail, r.map(|_| ()))
            }
            Action::Exec {
                argv,
                timeout,
                allow_fail,
            } => self.exec(argv, *timeout, *allow_fail),
            // The parser refuses them off Kubernetes; a scenario built in code may still hold one.
            Action::Apply { .. }
            | Action::Delete { .. }
            | Action::RolloutRestart { .. }
            | Action::DeletePod { .. }
            | Action::Scale { .. } => Done::new(
                String::new(),
                Err(StackError::Platform(format!(
                    "{} needs the kubernetes platform",
                    action.kind()
                ))),
            ),
        };
        Applied {
            events: vec![done.event(action.kind(), t0, self.served.origin)],
            reloads: done.reloads,
            ready: Vec::new(),
            probes: Vec::new(),
        }
    }

    /// Runs an `exec` action's command (see [`run_exec`]).
    pub(super) fn exec(&mut self, argv: &[String], timeout: Duration, allow_fail: bool) -> Done {
        self.execs += 1;
        let (detail, result) = run_exec(&self.exec_out, self.execs, argv, timeout, allow_fail);
        Done::new(detail, result)
    }

    fn apply_scale_backends(&mut self, group: &str, to: u32, remove: RemoveMode) -> Done {
        let from = self.members.get(group).map_or(0, |m| m.len() as u32);
        let (r, reloads) = self.scale_backends(group, to, remove);
        let how = if to < from {
            format!(" ({remove:?})").to_lowercase()
        } else {
            String::new()
        };
        Done::new(format!("{group}: {from} -> {to}{how}"), r).with_reloads(reloads)
    }

    fn apply_scale_replicas(&mut self, to: u32, stop: StopSpec) -> Done {
        let from = self.replicas.len() as u32;
        let r = self.scale_replicas(to, stop);
        let how = if to < from {
            format!(" ({stop:?})").to_lowercase()
        } else {
            String::new()
        };
        Done::new(format!("{from} -> {to}{how}"), r)
    }

    pub(super) fn swap_config(&mut self, c: &str) -> Done {
        let Some(cfg) = self.configs.get(c).cloned() else {
            return Done::new(c.to_string(), Err(StackError::NoConfig(c.to_string())));
        };
        self.served.config = Some(cfg);
        let (reloads, err) = self.reload_all();
        Done::new(
            format!("{c} (generation {})", self.served.generation),
            err.map_or(Ok(()), Err),
        )
        .with_reloads(reloads)
    }

    /// Sets the profile of a whole group (its members now, and instances added later) or of one
    /// instance; the last refusal, if any, is the step's error.
    fn apply_set_profile(
        &mut self,
        group: Option<&str>,
        backend: Option<&str>,
        profile: &Profile,
    ) -> Done {
        let targets = match (group, backend) {
            (Some(g), _) => {
                self.group_profiles.insert(g.to_string(), profile.clone());
                self.members.get(g).cloned().unwrap_or_default()
            }
            (None, Some(b)) => vec![b.to_string()],
            (None, None) => Vec::new(),
        };
        let mut r = Ok(());
        for t in &targets {
            if let Err(e) = self.fleet.set_profile(t, profile.clone()) {
                r = Err(e.into());
            }
        }
        let who = group.or(backend).unwrap_or_default();
        Done::new(format!("{who}: {profile}"), r)
    }
}
