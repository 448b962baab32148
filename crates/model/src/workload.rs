//! The kinds of Kubernetes workload a scenario's cluster actions name, shared by the scenario
//! language (what parses) and the Kubernetes client (what runs), so the two cannot drift.

/// The kinds of workload a run's cluster actions scale and restart: the kinds that parse in a
/// scenario are the kinds that run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WorkloadKind {
    /// `apps/v1` Deployment.
    Deployment,
    /// `apps/v1` StatefulSet.
    StatefulSet,
    /// `apps/v1` DaemonSet: one pod per eligible node, so it has no replica count to scale.
    DaemonSet,
}

impl WorkloadKind {
    /// Every kind, in the order messages list them.
    pub const ALL: [WorkloadKind; 3] = [
        WorkloadKind::Deployment,
        WorkloadKind::StatefulSet,
        WorkloadKind::DaemonSet,
    ];

    /// The lowercase name of `kubectl` and scenario files (`statefulset/NAME`).
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Deployment => "deployment",
            WorkloadKind::StatefulSet => "statefulset",
            WorkloadKind::DaemonSet => "daemonset",
        }
    }

    /// The kind of that lowercase name.
    pub fn parse(name: &str) -> Option<WorkloadKind> {
        WorkloadKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Whether it has a replica count to scale (a DaemonSet has none).
    pub fn scalable(self) -> bool {
        self != WorkloadKind::DaemonSet
    }
}

impl std::fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
