//! Images a cluster can pull: the pull policy each image gets, the pull secrets pods name, and
//! a refusal, before any pod is made, of an image the cluster's nodes can neither pull nor find
//! on themselves.

use crate::cluster::Cluster;
use crate::error::Error;
use k8s_openapi::api::core::v1::{LocalObjectReference, Node};
use kube::api::{Api, ListParams};

/// The node annotation with which a cluster's maker says that its nodes pull from no registry
/// (`none`): the test cluster's nodes have no route out of their network. An image such a node
/// does not hold can never start there.
pub const REGISTRY_ANNOTATION: &str = "proxybench.dev/registry";

/// A container's `imagePullPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullPolicy {
    /// Pull at every start.
    Always,
    /// Pull when the node does not hold the image.
    IfNotPresent,
    /// Never pull: the image must have been loaded into the node.
    Never,
}

impl PullPolicy {
    /// Every policy, in the API's spelling order.
    pub const ALL: [PullPolicy; 3] = [
        PullPolicy::Always,
        PullPolicy::IfNotPresent,
        PullPolicy::Never,
    ];

    /// The policy an image gets unless the user sets one: `Never` for an image loaded into the
    /// nodes by hand (`localhost/...`, which no registry serves), `IfNotPresent` otherwise.
    pub fn for_image(image: &str) -> PullPolicy {
        if image.starts_with("localhost/") {
            PullPolicy::Never
        } else {
            PullPolicy::IfNotPresent
        }
    }

    /// The API's spelling (`IfNotPresent`).
    pub fn as_str(self) -> &'static str {
        match self {
            PullPolicy::Always => "Always",
            PullPolicy::IfNotPresent => "IfNotPresent",
            PullPolicy::Never => "Never",
        }
    }

    /// Parses the API's spelling; `None` for anything else.
    pub fn parse(s: &str) -> Option<PullPolicy> {
        PullPolicy::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

impl std::fmt::Display for PullPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `imagePullSecrets` naming `secrets` (existing Secrets of the pod's namespace); `None` when
/// there are none, so that a spec without them stays as it was.
pub fn pull_secrets(secrets: &[String]) -> Option<Vec<LocalObjectReference>> {
    (!secrets.is_empty()).then(|| {
        secrets
            .iter()
            .map(|s| LocalObjectReference { name: s.clone() })
            .collect()
    })
}

/// The reasons a container waits with when its image cannot be had.
pub(crate) const IMAGE_REASONS: [&str; 5] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "ErrImageNeverPull",
    "InvalidImageName",
    "RegistryUnavailable",
];

/// True when a pod's [`crate::PodInfo::why`] says its image cannot be had.
pub(crate) fn image_problem(why: &str) -> bool {
    IMAGE_REASONS.iter().any(|r| {
        why.strip_prefix(r)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(':'))
    })
}

impl Cluster {
    /// Refuses, before anything is made, an image (with the policy it would run with) that the
    /// cluster cannot start: one that may be pulled while every node says it pulls from no
    /// registry ([`REGISTRY_ANNOTATION`]) and holds no image of that name. A cluster whose nodes
    /// cannot be listed (the permission is optional) is not refused here; a pod whose image
    /// cannot be had then fails its wait at once, with the kubelet's reason.
    pub fn check_images(&self, images: &[(&str, PullPolicy)]) -> Result<(), Error> {
        let nodes: Api<Node> = Api::all(self.client());
        let Ok(list) = self.block_on(nodes.list(&ListParams::default())) else {
            return Ok(());
        };
        if list.items.is_empty() {
            return Ok(());
        }
        let offline = list.items.iter().all(|n| {
            n.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(REGISTRY_ANNOTATION))
                .is_some_and(|v| v == "none")
        });
        if !offline {
            return Ok(());
        }
        let held = |image: &str| {
            list.items.iter().any(|n| {
                n.status
                    .as_ref()
                    .and_then(|s| s.images.as_ref())
                    .is_some_and(|imgs| {
                        imgs.iter()
                            .any(|i| i.names.iter().flatten().any(|name| same_image(name, image)))
                    })
            })
        };
        for (image, policy) in images {
            if *policy == PullPolicy::Never || held(image) {
                continue;
            }
            return Err(Error::Unstartable(format!(
                "image {image} (imagePullPolicy {policy}): this cluster's nodes pull from no \
                 registry (node annotation {REGISTRY_ANNOTATION}=none) and none of them holds \
                 it; load it into the nodes (`ctr -n k8s.io images import`, k8s/load-images.sh \
                 on the test cluster) or name a localhost/ image"
            )));
        }
        Ok(())
    }
}

/// True when a node's image name is `image`, allowing for the `docker.io/library/` and
/// `docker.io/` prefixes containerd adds to short names.
fn same_image(node_name: &str, image: &str) -> bool {
    let full = |s: &str| -> String {
        let first = s.split('/').next().unwrap_or_default();
        let has_registry =
            s.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
        if has_registry {
            s.to_string()
        } else if s.contains('/') {
            format!("docker.io/{s}")
        } else {
            format!("docker.io/library/{s}")
        }
    };
    let tagged = |s: String| {
        let last = s.rsplit('/').next().unwrap_or_default();
        if last.contains(':') || last.contains('@') {
            s
        } else {
            format!("{s}:latest")
        }
    };
    tagged(full(node_name)) == tagged(full(image))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_images_are_never_pulled_and_others_when_absent() {
        assert_eq!(
            PullPolicy::for_image("localhost/proxybench:0.1.0"),
            PullPolicy::Never
        );
        assert_eq!(
            PullPolicy::for_image("registry.example/proxybench:0.1.0"),
            PullPolicy::IfNotPresent
        );
        assert_eq!(PullPolicy::for_image("nginx"), PullPolicy::IfNotPresent);
        for p in PullPolicy::ALL {
            assert_eq!(PullPolicy::parse(p.as_str()), Some(p));
        }
        assert_eq!(PullPolicy::parse("never"), None);
    }

    #[test]
    fn image_names_match_as_containerd_writes_them() {
        assert!(same_image("docker.io/library/nginx:latest", "nginx"));
        assert!(same_image("docker.io/library/nginx:1.27", "nginx:1.27"));
        assert!(same_image("docker.io/foo/bar:1", "foo/bar:1"));
        assert!(same_image(
            "localhost/proxybench:0.1.0",
            "localhost/proxybench:0.1.0"
        ));
        assert!(!same_image(
            "localhost/proxybench:0.1.0",
            "registry.example/proxybench:0.1.0"
        ));
        assert!(same_image(
            "registry.example:5000/x",
            "registry.example:5000/x:latest"
        ));
    }

    #[test]
    fn image_reasons_are_told_apart_from_others() {
        assert!(image_problem(
            "ErrImagePull: failed to pull and unpack image \"registry.example/x:1\""
        ));
        assert!(image_problem("ImagePullBackOff"));
        assert!(image_problem(
            "ErrImageNeverPull: Container image ... is not present"
        ));
        assert!(!image_problem("CrashLoopBackOff: back-off 10s"));
        assert!(!image_problem("ErrImagePullish"));
    }

    #[test]
    fn pull_secrets_name_each_secret() {
        assert_eq!(pull_secrets(&[]), None);
        let s = pull_secrets(&["regcred".into()]).unwrap();
        assert_eq!(s[0].name, "regcred");
    }
}
