//! The one place that names every platform: [`open`] turns a run's `[platform]` into the
//! implementation that runs it. The seam's own types (crates/bench/src/platform/mod.rs) name
//! none, so each platform depends on the seam and the seam on no platform; a new platform is
//! its folder beside `local/` and `kube/` plus one arm here.

use super::kube::Kubernetes;
use super::{Local, Platform};
use crate::error::PlatformError;
use scenario::{PlatformKind, PlatformSpec};

/// Opens the platform a run's spec names (on Kubernetes: connects and makes the namespace).
pub fn open(spec: &PlatformSpec) -> Result<Box<dyn Platform>, PlatformError> {
    match spec.kind {
        PlatformKind::Local => Ok(Box::new(Local)),
        PlatformKind::Kubernetes => Ok(Box::new(Kubernetes::open(spec)?)),
    }
}
