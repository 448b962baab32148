//! The kube stage's actions during load: scaling, reloads, node loss and backend restarts.

use super::*;

impl KubeStage {
    /// An action that is one event: played, with its detail, its result and the reloads it
    /// made (the user's gateway's reload command, or each proxy pod's).
    pub(super) fn act(
        &mut self,
        action: &Action,
        keep_going: &dyn Fn() -> bool,
    ) -> (String, Result<(), StackError>, Vec<model::ReloadRecord>) {
        let mut reloads = Vec::new();
        let (detail, result): (String, Result<(), StackError>) = match action {
            Action::ScaleReplicas { to, stop } => match self.scale_replicas(*to, *stop) {
                Ok(d) => (d, Ok(())),
                Err(e) => (format!("-> {to}"), Err(e)),
            },
            Action::StopReplica { replica, mode } => {
                match self.stop_replica(replica.as_deref(), *mode) {
                    Ok(d) => (d, Ok(())),
                    Err(e) => (replica.clone().unwrap_or_else(|| "newest".into()), Err(e)),
                }
            }
            Action::Reload if self.attached.is_some() => {
                // The user's gateway: its reload command, timed to its exit.
                self.served.generation += 1;
                let r = self.reload_attached();
                let err = r.error.clone();
                reloads = vec![r];
                (
                    format!("generation {}", self.served.generation),
                    err.map_or(Ok(()), |e| Err(StackError::Reload(e))),
                )
            }
            Action::Reload => {
                let (rel, err) = self.reload_all();
                reloads = rel;
                (
                    format!("generation {}", self.served.generation),
                    err.map_or(Ok(()), Err),
                )
            }
            Action::SwapConfig(name) => match self.configs.get(name).cloned() {
                Some(cfg) => {
                    self.served.config = Some(cfg);
                    let (rel, err) = self.reload_all();
                    reloads = rel;
                    (
                        format!("{name} (generation {})", self.served.generation),
                        err.map_or(Ok(()), Err),
                    )
                }
                None => (name.clone(), Err(StackError::NoConfig(name.clone()))),
            },
            Action::KillBackend(b) | Action::DrainBackend(b) => {
                let kill = matches!(action, Action::KillBackend(_));
                match self.delete_backend(b, kill) {
                    Ok(d) => (d, Ok(())),
                    Err(e) => (b.clone(), Err(e)),
                }
            }
            Action::ScaleBackends { group, to, remove } => {
                let (r, rel) = self.scale_backends(group, *to, *remove);
                reloads = rel;
                match r {
                    Ok(d) => (d, Ok(())),
                    Err(e) => (group.clone(), Err(e)),
                }
            }
            Action::Exec {
                argv,
                timeout,
                allow_fail,
            } => {
                self.execs += 1;
                crate::platform::local::run_exec(
                    &self.exec_out,
                    self.execs,
                    argv,
                    *timeout,
                    *allow_fail,
                )
            }
            Action::Apply { .. }
            | Action::Delete { .. }
            | Action::RolloutRestart { .. }
            | Action::DeletePod { .. }
            | Action::Scale { .. } => super::super::run::cluster_action(
                &self.cluster,
                &self.namespace,
                action,
                keep_going,
            ),
            Action::SetProfile {
                group,
                backend,
                profile,
            } => match self.backends.set_profile(
                &self.cluster,
                &self.namespace,
                group.as_deref(),
                backend.as_deref(),
                profile,
            ) {
                Ok(d) => (d, Ok(())),
                Err(e) => (
                    group.clone().or(backend.clone()).unwrap_or_default(),
                    Err(e),
                ),
            },
            Action::RestartBackend(b) => {
                let (d, r, rel) = self.restart_backend(b);
                reloads = rel;
                (d, r)
            }
            Action::Grow(_) => {
                unreachable!("a growth is played by grow_template, grow_upstreams or grow")
            }
        };
        (detail, result, reloads)
    }

    /// A backend pod restarted: its replacement has a new address, which the proxy meets
    /// after a reload of every proxy pod.
    fn restart_backend(
        &mut self,
        b: &str,
    ) -> (String, Result<(), StackError>, Vec<model::ReloadRecord>) {
        match self.backends.restart(&self.cluster, &self.namespace, b) {
            Ok(d) => {
                let (rel, err) = self.reload_all();
                (
                    format!("{d}; generation {}", self.served.generation),
                    err.map_or(Ok(()), Err),
                    rel,
                )
            }
            Err(e) => (b.to_string(), Err(e), Vec::new()),
        }
    }
}
