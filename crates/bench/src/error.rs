//! The error types of the bench library. Each message is one line written for the person at the
//! terminal; the scenario language's own errors are in [`scenario::error`].

use std::path::PathBuf;

/// Why standing a case's stack up, or changing it during the run, failed. Step errors end up in
/// the step's event (`events.csv`) as this message.
#[derive(Debug, thiserror::Error)]
pub enum StackError {
    /// The backend fleet did not start.
    #[error("cannot start the backends: {0}")]
    Backends(std::io::Error),
    /// A backend instance could not be added to the fleet.
    #[error("cannot add {name}: {source}")]
    AddBackend {
        /// The new instance's name.
        name: String,
        /// Why.
        source: std::io::Error,
    },
    /// The fleet refused an operation on an instance (unknown name, wrong state...).
    #[error("{0}")]
    Fleet(#[from] backend::Error),
    /// A directory could not be made.
    #[error("{}: {source}", path.display())]
    Io {
        /// The directory.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// The operating system handed out no port.
    #[error("no free port: {0}")]
    NoFreePort(std::io::Error),
    /// The proxy refused a config, or a replica did not start or stop (the proxy's text,
    /// verbatim).
    #[error("{0}")]
    Proxy(#[from] proxy::Error),
    /// A reload failed; the replica's own account of it.
    #[error("{0}")]
    Reload(String),
    /// The case has no proxy to act on.
    #[error("no proxy in this case")]
    NoProxy,
    /// `swap_config` named a config the case does not define.
    #[error("no config '{0}'")]
    NoConfig(String),
    /// `stop_replica` named a replica that is not running.
    #[error("no running replica '{0}'")]
    NoSuchReplica(String),
    /// No replica is running.
    #[error("no running replica")]
    NoReplica,
    /// An unnamed `stop_replica` would stop the last one.
    #[error("refusing to stop the last replica (name it to do so)")]
    LastReplica,
    /// A drained backend still had requests in flight when the stack came down.
    #[error("{0} did not finish draining within 10 s")]
    Drain(String),
    /// A growth step cannot be built on the config as it stands.
    #[error("{0}")]
    Grow(String),
    /// An `exec` action's command failed, timed out or could not run.
    #[error("{0}")]
    Exec(String),
    /// The Kubernetes API server refused or failed an operation.
    #[error(transparent)]
    Api(#[from] k8s::Error),
    /// The platform cannot do what was asked (no such backend, pod or Service, a listener or
    /// address it lacks...); its message, with what it was asked.
    #[error("{0}")]
    Platform(String),
}

/// Why a run's platform could not be opened, or a distributed load's agents not started.
#[derive(Debug, thiserror::Error)]
pub enum PlatformError {
    /// Opening the platform failed (on Kubernetes: the connection, the run's namespace).
    #[error(transparent)]
    Open(#[from] k8s::Error),
    /// The namespace the user named (`--namespace`, `[platform] namespace`) does not exist: bad
    /// input (the run neither creates nor deletes a namespace it was given); its message.
    #[error("{0}")]
    NoNamespace(String),
    /// The agents could not be started or did not become ready (processes on this machine, or
    /// an Indexed Job's pods); its message.
    #[error("{0}")]
    Agents(String),
    /// The agent library refused (a load file it cannot read...).
    #[error("{0}")]
    Agent(#[from] agent::Error),
}

/// The proxy's complaint on one line: its lines joined, without a closing "test failed" line
/// (the one nginx's checker ends with).
pub(crate) fn one_line(msg: &str) -> String {
    let lines: Vec<&str> = msg
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.ends_with("test failed"))
        .collect();
    if lines.is_empty() {
        msg.trim().to_string()
    } else {
        lines.join("; ")
    }
}
