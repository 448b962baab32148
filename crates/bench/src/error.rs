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
    /// A built-in generator cannot make its parameters for this run.
    #[error(transparent)]
    Generator(#[from] manifests::generators::GeneratorError),
    /// A template does not render with the run's values.
    #[error("template {0}")]
    Template(#[from] manifests::template::TemplateError),
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
    /// The agents' directory, token or files could not be made on this machine.
    #[error("{what}: {source}")]
    AgentsIo {
        /// What was being done (`cannot write /path/token`).
        what: String,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// An agent process could not be started.
    #[error("{0}")]
    AgentProcess(#[source] proxy::Error),
    /// The cluster refused or failed a call for the agents (their Secret, Job, pods or
    /// forwards).
    #[error("{0}")]
    AgentsApi(#[source] k8s::Error),
}

/// Why a case could not be played: the case is recorded as aborted with this message, and the
/// run goes on with the next case.
#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    /// A directory of the case's results would not be a plain name.
    #[error(transparent)]
    Name(#[from] scenario::PathError),
    /// The case's stack did not come up.
    #[error(transparent)]
    Stack(#[from] StackError),
    /// A load cannot run as configured against this stack.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A load thread could not be started.
    #[error("cannot start a load thread: {0}")]
    Thread(#[source] std::io::Error),
}

/// One of a case's loads that cannot run, or failed: its name and why.
#[derive(Debug, thiserror::Error)]
#[error("load '{load}': {why}")]
pub struct LoadError {
    /// The load's name.
    pub load: String,
    /// What is wrong (boxed: a result's error stays small).
    #[source]
    pub why: Box<LoadProblem>,
}

/// What is wrong with a load, against the stack it aims at or while it runs.
#[derive(Debug, thiserror::Error)]
pub enum LoadProblem {
    /// Its url does not parse.
    #[error(transparent)]
    Url(#[from] model::url::UrlError),
    /// The engine refuses its url, a resolve entry or a setting, or failed while it ran.
    #[error(transparent)]
    Engine(#[from] load::Error),
    /// Its target is not one this run may send to.
    #[error(transparent)]
    Reach(#[from] scenario::ReachError),
    /// The platform has no address for its `via`.
    #[error(transparent)]
    Stack(#[from] StackError),
    /// Its `via` names a backend group with no instance.
    #[error("backend group backend:{0} has no instance")]
    NoBackend(String),
    /// Its `via` names a listener the proxy does not have.
    #[error("no listener '{0}'")]
    NoListener(String),
    /// The proxy has no listener of its url's scheme.
    #[error("no {0} listener")]
    NoSchemeListener(&'static str),
    /// Its message size does not fit the engine's 32 bits.
    #[error("message_size is too large")]
    MessageSize,
    /// Its agents could not start, or its distributed run failed; with what closing the agents
    /// left behind, one sentence each.
    #[error("{source}{}", left.iter().map(|l| format!("; {l}")).collect::<String>())]
    Agents {
        /// Why.
        #[source]
        source: AgentsFailure,
        /// What closing the agents could not undo.
        left: Vec<String>,
    },
}

/// How a load's agents failed: at their start on the platform, or in the coordinated run.
#[derive(Debug, thiserror::Error)]
pub enum AgentsFailure {
    /// The platform could not start them.
    #[error(transparent)]
    Start(#[from] PlatformError),
    /// The coordinated run failed.
    #[error(transparent)]
    Run(#[from] agent::Error),
}

impl LoadError {
    /// `why`, of the load named `load`.
    pub fn new(load: &str, why: impl Into<LoadProblem>) -> LoadError {
        LoadError {
            load: load.to_string(),
            why: Box::new(why.into()),
        }
    }
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
