//! The local platform: each case's backends and proxy replicas are processes on this machine
//! (the stage, [`Stack`], in `stage.rs`); agents are local processes too.

mod stage;

pub use stage::{free_ports, run_exec, Stack};

use super::{agents, Agents, AgentsSpec, Platform, StackSpec, Stage};
use crate::error::{PlatformError, StackError};
use scenario::{Case, PlatformKind, Scenario};
use std::collections::BTreeMap;

/// Processes on this machine.
pub struct Local;

impl Platform for Local {
    fn name(&self) -> &'static str {
        PlatformKind::Local.name()
    }

    fn stage(&self, _case: &Case, spec: StackSpec<'_>) -> Result<Box<dyn Stage>, StackError> {
        Ok(Box::new(Stack::up(spec)?))
    }

    fn close(&mut self) -> Vec<String> {
        Vec::new()
    }

    fn agents(&self, spec: &AgentsSpec<'_>) -> Result<Box<dyn Agents>, PlatformError> {
        Ok(Box::new(agents::LocalAgents::start(spec)?))
    }

    fn on_this_machine(&self) -> bool {
        true
    }

    /// The process or thread count the kind makes of `worker_processes` and the CPUs it is
    /// pinned to (not for an external proxy, which this machine may not run).
    fn proxy_resources(&self, scn: &Scenario) -> BTreeMap<String, String> {
        scn.cases
            .iter()
            .filter_map(|c| {
                let cfg = c.proxy.as_ref()?;
                let n = cfg.worker_processes;
                let workers = proxy::driver(cfg.kind).workers(n)?;
                let pinned = match &cfg.cpus {
                    Some(c) => format!("pinned to CPUs {c}"),
                    None => "not pinned".to_string(),
                };
                let replicas = if cfg.replicas == 1 {
                    String::new()
                } else {
                    format!("{} replicas of ", cfg.replicas)
                };
                Some((c.name.clone(), format!("{replicas}{workers}, {pinned}")))
            })
            .collect()
    }
}
