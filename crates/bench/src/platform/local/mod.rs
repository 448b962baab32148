//! The local platform: each case's backends and proxy replicas are processes on this machine
//! (the stage, [`Stack`], in `stage.rs`); agents are local processes too.

mod stage;

pub use stage::{free_ports, run_exec, Stack};

use super::{agents, Agents, AgentsSpec, Platform, StackSpec, Stage};
use crate::error::{PlatformError, StackError};
use scenario::{Case, PlatformKind};

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
        Ok(Box::new(
            agents::LocalAgents::start(spec).map_err(PlatformError::Agents)?,
        ))
    }
}
