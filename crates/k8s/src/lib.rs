//! The Kubernetes API as proxybench uses it, through kube-rs, behind a small synchronous facade:
//! a [`Cluster`] owns a one-worker tokio runtime, so that proxybench's plain threads call
//! blocking methods and never see async. It connects with a kubeconfig and context, makes and
//! deletes namespaces, applies and deletes any manifest through discovery and server-side apply,
//! applies proxybench's own objects, scales Deployments and waits for them, deletes pods,
//! execs commands in them, reads their logs and forwards local ports to them; in the background it watches pods, restarts and
//! Warning events, follows container logs into files, samples the metrics API and scrapes
//! Prometheus endpoints through the API server's pod proxy ([`collect`], [`follow`]).
//! It never shells out to kubectl.

#![warn(missing_docs)]

mod clean;
mod cluster;
pub mod collect;
mod error;
pub mod follow;
mod forward;
mod images;
pub mod manifest;
mod pods;
pub mod prom;
mod rbac;
mod reach;
mod service;
mod workload;

pub use clean::CleanScope;
pub use cluster::{
    namespace_name, Cluster, ClusterInfo, FIELD_MANAGER, INSTANCE, MANAGED_BY, POD_SECURITY,
};
pub use collect::{
    Collected, Collector, EndpointChange, PodChange, PodTimeline, PodUsage, ProbeTally, PromTarget,
    RestartChange, Scrape, WarningEvent,
};
pub use error::Error;
pub use follow::{FollowedLog, LogFollowers};
pub use forward::PortForward;
pub use images::{pull_secrets, PullPolicy, REGISTRY_ANNOTATION};
pub use manifest::{Document, Outcome, WaitFor};
pub use pods::{Endpoint, ExecOutput, PodCapacity, PodInfo, PodRun, HOSTNAME_LABEL};
pub use prom::Sample;
pub use rbac::{cluster_scoped, rbac, rbac_for, resource_of, Grant, Needs};
pub use reach::{reaches, PodPath, PodPort};
pub use service::{service, GatewayAddress, ServiceAddress, ServicePortInfo, ServiceType};
pub use workload::{Replicas, WorkloadKind};

/// The Kubernetes object types (k8s-openapi, API v1.34), for building proxybench's own specs.
pub use k8s_openapi;
