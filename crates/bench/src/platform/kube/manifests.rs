//! The objects the stage makes: Deployments, ConfigMaps, volumes, the proxy pods' scripts, and
//! the config check in a pod of the proxy's image.

use super::{platform, KubeStage, BOUND, CHECK_BOUND, POD_PREFIX, PROXY, ROLE};
use crate::error::StackError;
use k8s::k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s::k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, Pod, PodSpec, PodTemplateSpec, SecretVolumeSource,
    Volume, VolumeMount,
};
use k8s::k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s::PullPolicy;
use proxy::Driver;
use scenario::PlatformSpec;
use std::collections::BTreeMap;

/// The labels of an object run `run` makes: `pairs`, plus Kubernetes' recommended
/// `app.kubernetes.io/managed-by=proxybench` (what `proxybench k8s clean` finds a killed run's
/// objects by), `app.kubernetes.io/instance=<run id>` (what the case's `down` deletes by) and
/// `app.kubernetes.io/component` (the role: proxy, backend, proxy-check).
pub(super) fn labels(run: &str, pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut l: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    l.insert(k8s::MANAGED_BY.0.into(), k8s::MANAGED_BY.1.into());
    l.insert(k8s::INSTANCE.into(), run.into());
    if let Some(role) = l.get(ROLE).cloned() {
        l.insert(COMPONENT.into(), role);
    }
    l
}

/// The base name of the proxy's certificate Secret (`proxy-tls-<run id>`).
pub(super) const TLS_SECRET: &str = "proxy-tls";

/// Kubernetes' recommended label for an object's part in the whole.
pub(crate) const COMPONENT: &str = "app.kubernetes.io/component";

pub(super) fn meta(name: &str, l: &BTreeMap<String, String>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        labels: Some(l.clone()),
        ..Default::default()
    }
}

/// A Deployment of one container with our defaults: no service account token, no cluster DNS
/// (the test cluster has none), no service links.
pub(super) fn deployment(
    name: &str,
    l: &BTreeMap<String, String>,
    replicas: u32,
    mut pod: PodSpec,
) -> Deployment {
    pod.automount_service_account_token = Some(false);
    pod.enable_service_links = Some(false);
    pod.dns_policy = Some("Default".into());
    Deployment {
        metadata: meta(name, l),
        spec: Some(DeploymentSpec {
            replicas: Some(replicas as i32),
            selector: LabelSelector {
                match_labels: Some(l.clone()),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(meta(name, l)),
                spec: Some(pod),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub(super) fn sh(script: &str) -> Vec<String> {
    vec!["/bin/sh".into(), "-c".into(), script.into()]
}

/// The proxy pod's shell scripts, around the driver's container commands: the entry (copy the
/// config from its ConfigMap, start the proxy), the reload (the next config arrives on stdin,
/// and the driver's reload makes the proxy serve it), the driver's preStop command if any, and
/// the config check a pod of the proxy's image runs before any replica gets the config.
/// Each exports `$CONF`, `$PREFIX` and, with TLS, `$TLS_CERT` and `$TLS_KEY` for the driver.
pub(super) struct PodScripts {
    pub(super) entry: String,
    pub(super) reload: String,
    pub(super) pre_stop: Option<String>,
    pub(super) check: String,
    pub(super) log_format: proxy::logs::LogFormat,
    /// The image the proxy pods run when the platform names none: the driver's.
    pub(super) image: &'static str,
}

impl PodScripts {
    /// The scripts for `driver`'s proxy, whose config file is `file`; refused when the driver
    /// has no container form.
    pub(super) fn of(driver: &dyn Driver, file: &str, tls: bool) -> Result<PodScripts, StackError> {
        let Some(c) = driver.container() else {
            return Err(platform(format!(
                "the {} driver has no container form: the kubernetes platform cannot run it",
                driver.name()
            )));
        };
        // Under the prefix (/tmp, writable by the pods' non-root user), not /run.
        let conf = format!("{POD_PREFIX}/conf/{file}");
        let mut env = format!("export CONF={conf} PREFIX={POD_PREFIX}");
        if tls {
            env.push_str(" TLS_CERT=/tls/cert.pem TLS_KEY=/tls/key.pem");
        }
        Ok(PodScripts {
            entry: format!(
                "set -e; mkdir -p {POD_PREFIX}/conf; cat /config/{file} > {conf}; {env}; {}",
                c.start
            ),
            reload: format!("set -e; cat > {conf}; {env}; {}", c.reload),
            pre_stop: c.pre_stop.map(|p| format!("{env}; {p}")),
            check: format!(
                "set -e; mkdir -p {POD_PREFIX}/conf; cat /config/{file} > {conf}; {env}; {}",
                c.check
            ),
            log_format: c.log_format,
            image: c.image,
        })
    }
}

/// The proxy pods' preStop sleep when the platform names none, in seconds. A deleted pod leaves
/// a Service's routing only at kube-proxy's next sync after its EndpointSlice changed, and a sync
/// comes at most once per `minSyncPeriod` (1 s by default): a pod deleted within a second of
/// another endpoint change (a rollout, a scale-down of several) waits for it. Measured on the
/// test cluster: 0.01 to 1.75 s from the deletion to the node's DNAT rule gone; a stop signal
/// before that refused new connections (docs/kubernetes-reference.md, "Stopping a proxy pod"). 5 s leaves
/// room for a slower sync on a loaded node.
pub(super) const DEFAULT_PRE_STOP_S: i64 = 5;

/// The file whose presence cuts a proxy pod's preStop sleep out: the case's teardown makes it in
/// every proxy pod before scaling them away, when no load runs any more.
pub(super) const NO_LINGER: &str = "/tmp/pb/no-linger";

/// The proxy pods' termination grace period and preStop sleep in seconds: the platform's, else
/// Kubernetes' default grace (30 s) and [`DEFAULT_PRE_STOP_S`] (at most the grace less 1 s, so
/// that the stop signal keeps a second).
pub(super) fn proxy_stop(spec: &PlatformSpec) -> (i64, i64) {
    let grace = spec.proxy_grace.map_or(30, |d| d.as_secs() as i64);
    let pre_stop = spec
        .proxy_pre_stop
        .map_or(DEFAULT_PRE_STOP_S.min(grace - 1).max(0), |d| {
            d.as_secs() as i64
        });
    (grace, pre_stop)
}

/// The proxy container's preStop command: the sleep of `pre_stop` seconds (skipped once
/// [`NO_LINGER`] exists), then the driver's own command (`driver`: Caddy's drain); `None` when
/// there is neither.
pub(super) fn pre_stop_command(pre_stop: i64, driver: Option<&str>) -> Option<Vec<String>> {
    let linger = (pre_stop > 0).then(|| format!("[ -e {NO_LINGER} ] || sleep {pre_stop}"));
    match (linger, driver) {
        (Some(l), Some(d)) => Some(sh(&format!("{l}; {d}"))),
        (Some(l), None) => Some(sh(&l)),
        (None, Some(d)) => Some(sh(d)),
        (None, None) => None,
    }
}

/// A ConfigMap named `name` holding the rendered config under its file name.
pub(super) fn config_map(
    name: &str,
    l: &BTreeMap<String, String>,
    rendered: &proxy::Rendered,
) -> ConfigMap {
    let mut data = BTreeMap::new();
    data.insert(rendered.file.to_string(), rendered.text.clone());
    ConfigMap {
        metadata: meta(name, l),
        data: Some(data),
        ..Default::default()
    }
}

/// The volume of ConfigMap `name`, mounted at /config.
pub(super) fn config_volume(name: &str) -> Volume {
    Volume {
        name: "config".into(),
        config_map: Some(ConfigMapVolumeSource {
            name: name.into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The volume of the proxy's certificate Secret, `secret`.
pub(super) fn tls_volume(secret: &str) -> Volume {
    Volume {
        name: "tls".into(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret.into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Where the proxy's certificate Secret is mounted (`/tls`, as the render context names it).
pub(super) fn tls_mount() -> VolumeMount {
    VolumeMount {
        name: "tls".into(),
        mount_path: "/tls".into(),
        ..Default::default()
    }
}

/// Checks `rendered` with the proxy's own checker (`nginx -t`, `haproxy -c`, `caddy validate`)
/// in a pod of the proxy's image, before any replica gets it: the config as the replicas get it
/// (pod paths, the cluster's upstreams, the certificate Secret), not a copy rendered for this
/// machine. A refusal names the checker's message and the model item it leads back to; the
/// check's ConfigMap and pod are deleted either way.
pub(super) fn check_in_pod(
    st: &KubeStage,
    rendered: &proxy::Rendered,
    image: &str,
    script: &str,
) -> Result<(), StackError> {
    let (c, ns) = (&st.cluster, st.namespace.as_str());
    let name = format!("{}-check-gen{}", st.name(PROXY), st.served.generation);
    let l = labels(&st.run_id, &[(ROLE, "proxy-check")]);
    c.apply_owned(ns, &config_map(&name, &l, rendered), &st.run_id)?;
    let mut volumes = vec![config_volume(&name)];
    let mut mounts = vec![VolumeMount {
        name: "config".into(),
        mount_path: "/config".into(),
        ..Default::default()
    }];
    if st.served.tls.is_some() {
        volumes.push(tls_volume(&st.name(TLS_SECRET)));
        mounts.push(tls_mount());
    }
    let pod = Pod {
        metadata: meta(&name, &l),
        spec: Some(st.pulling.apply(PodSpec {
            restart_policy: Some("Never".into()),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            dns_policy: Some("Default".into()),
            termination_grace_period_seconds: Some(0),
            volumes: Some(volumes),
            containers: vec![Container {
                name: "check".into(),
                image: Some(image.into()),
                image_pull_policy: Some(PullPolicy::for_image(image).to_string()),
                command: Some(sh(script)),
                volume_mounts: Some(mounts),
                ..Default::default()
            }],
            ..Default::default()
        })),
        ..Default::default()
    };
    let ran = c.run_pod(ns, &pod, CHECK_BOUND);
    let _ = c.delete_object::<ConfigMap>(ns, &name, BOUND);
    let ran = ran.map_err(|e| {
        platform(format!(
            "cannot run the {} checker in a pod of {image}: {e}",
            st.driver.name()
        ))
    })?;
    // The log under the same name on every run (the pod's name has the run id).
    let _ = std::fs::write(
        st.configs_out
            .join(format!("proxy-check-gen{}.log", st.served.generation)),
        &ran.log,
    );
    if ran.code == 0 {
        return Ok(());
    }
    let message = ran.log.trim();
    let item = st
        .driver
        .trace(rendered, message)
        .map(|i| format!(" (model item {i})"))
        .unwrap_or_default();
    Err(platform(format!(
        "the proxy's checker refused the config in a pod of {image} (exit {}){item}: {}",
        ran.code,
        crate::error::one_line(message)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn spec(grace: Option<u64>, pre_stop: Option<u64>) -> PlatformSpec {
        PlatformSpec {
            proxy_grace: grace.map(Duration::from_secs),
            proxy_pre_stop: pre_stop.map(Duration::from_secs),
            ..PlatformSpec::default()
        }
    }

    /// The default sleep is 5 s within Kubernetes' default grace, shortened to leave the stop
    /// signal a second of a short grace, and the platform's own values win.
    #[test]
    fn the_default_pre_stop_outlasts_kube_proxys_sync_and_fits_the_grace() {
        assert_eq!(proxy_stop(&spec(None, None)), (30, DEFAULT_PRE_STOP_S));
        assert_eq!(proxy_stop(&spec(Some(4), None)), (4, 3));
        assert_eq!(proxy_stop(&spec(Some(1), None)), (1, 0));
        assert_eq!(proxy_stop(&spec(Some(0), None)), (0, 0));
        assert_eq!(proxy_stop(&spec(Some(60), Some(2))), (60, 2));
        assert_eq!(proxy_stop(&spec(None, Some(0))), (30, 0));
    }

    /// The sleep is skipped once the teardown's file is there, and the driver's command follows
    /// it; with neither there is no hook.
    #[test]
    fn the_pre_stop_command_sleeps_unless_told_not_to_then_runs_the_drivers() {
        assert!(NO_LINGER.starts_with(&format!("{POD_PREFIX}/")));
        let cmd = |p, d| pre_stop_command(p, d).map(|c| c[2].clone());
        assert_eq!(
            cmd(5, None).as_deref(),
            Some("[ -e /tmp/pb/no-linger ] || sleep 5")
        );
        assert_eq!(
            cmd(5, Some("drain")).as_deref(),
            Some("[ -e /tmp/pb/no-linger ] || sleep 5; drain")
        );
        assert_eq!(cmd(0, Some("drain")).as_deref(), Some("drain"));
        assert_eq!(cmd(0, None), None);
        assert_eq!(pre_stop_command(5, None).unwrap()[..2], ["/bin/sh", "-c"]);
    }
}
