//! Ctrl-C for a run: the first SIGINT or SIGTERM sets the stop flag (the run ends and reports
//! what it recorded); a second one exits at once in case the stop is stuck.

use crate::config::Error;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Makes SIGINT and SIGTERM set `stop`; a second signal exits the process with status 130.
pub fn stop_on_interrupt(stop: &Arc<AtomicBool>) -> Result<(), Error> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    for sig in [SIGINT, SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, stop.clone())
            .and_then(|_| signal_hook::flag::register(sig, stop.clone()))
            .map_err(|e| Error::Io(format!("cannot handle signals: {e}")))?;
    }
    Ok(())
}
