//! The error types of the bench library. Each message is one line written for the person at the
//! terminal; scenario files have their own, [`crate::layers::ScenarioError`], which adds
//! `file:line`.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

/// A name (a scenario's, a case's) that cannot be one directory under the results directory.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} '{}' {why}", name.escape_debug())]
pub struct PathError {
    /// What the name names, e.g. `case name`.
    pub what: String,
    /// The name as given.
    pub name: String,
    /// Why it cannot be a directory name (see [`crate::paths::plain_name_problem`]).
    pub why: String,
}

/// A check that does not parse (the message names the bad part), or a metric a case did not
/// record (the reason a check reports as `no data: ...`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CheckError(pub String);

impl From<String> for CheckError {
    fn from(s: String) -> CheckError {
        CheckError(s)
    }
}

impl From<&str> for CheckError {
    fn from(s: &str) -> CheckError {
        CheckError(s.to_string())
    }
}

/// A load metric's name, value or reading, in the vocabulary checks share with gates.
impl From<model::metric::MetricError> for CheckError {
    fn from(e: model::metric::MetricError) -> CheckError {
        CheckError(e.0)
    }
}

/// A load url or config that could send traffic somewhere other than this run's processes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReachError {
    /// The load engine cannot read the url.
    #[error("{0}")]
    Url(#[from] load::Error),
    /// The url's host is an IP address other than the run's.
    #[error(
        "url host {0} is not this run's address: loads go to the run's own listeners and \
         backends (on {run}); write a name (sent as Host and SNI) or {run}",
        run = crate::reach::RUN_IP
    )]
    ForeignHost(IpAddr),
    /// The config would connect to another address than the one the stack chose.
    #[error("url '{url}' would connect to {to}, not to this run's {own}")]
    Elsewhere {
        /// The load's url.
        url: String,
        /// Where it would connect.
        to: SocketAddr,
        /// Where it should.
        own: SocketAddr,
    },
    /// An external target's host resolves outside loopback.
    #[error(
        "url '{url}' would connect to {to}, outside 127.0.0.0/8: loads go only to loopback \
         (set proxy.external.resolve to a 127.0.0.0/8 address)"
    )]
    NotLoopback {
        /// The load's url.
        url: String,
        /// Where it would connect.
        to: SocketAddr,
    },
    /// An external target's host name did not resolve.
    #[error("url '{0}': its host does not resolve (set proxy.external.resolve)")]
    Unresolved(String),
    /// The host would be looked up in DNS.
    #[error("url '{url}' would be resolved through DNS instead of connecting to this run's {own}")]
    Dns {
        /// The load's url.
        url: String,
        /// Where it should connect.
        own: SocketAddr,
    },
}

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
    /// The platform (the Kubernetes API server) refused or failed an operation; its message.
    #[error("{0}")]
    Platform(String),
}
