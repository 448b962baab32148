//! `proxybench k8s rbac --scenario`: what a run of one scenario needs of the cluster beyond the
//! run's own Role, read off the parsed scenario (never re-parsed): its actions' namespaces
//! (`scale`, `rollout_restart`, `delete_pod`, `apply`, `delete` and their probes), the kinds
//! its manifests, `.j2` templates and growths name (rendered as the run renders them), its
//! collectors' namespaces (`[platform] watch`, `prometheus`) and its loads' Gateways. Each
//! grant says which case and action (or table) needs it.

use k8s::{Grant, Needs};
use scenario::{Action, Case, ProbeSpec, Scenario, Via, WorkloadKind};
use std::path::{Path, PathBuf};

/// Why a scenario's needs could not be read: a manifest or template that does not give
/// Kubernetes objects (the file and the reason).
#[derive(Debug, thiserror::Error)]
pub enum RbacError {
    /// A manifest file that does not parse into objects.
    #[error("{0}")]
    Manifest(#[from] k8s::Error),
    /// A template (a `.j2` manifest, a growth's template or generator) that does not render.
    #[error("{file}: {message}")]
    Template {
        /// The template.
        file: PathBuf,
        /// What went wrong.
        message: String,
    },
}

/// The verbs an `apply` or `delete` of an object needs: server-side apply (`patch`, `create`
/// when new), the `wait`'s reads, the deletion.
const MANIFEST_VERBS: &[&str] = &["get", "list", "watch", "create", "patch", "delete"];

/// What a run of `scn` in `run_ns` (`None`: a namespace the run makes) needs beyond the run's
/// own Role, per namespace.
pub fn needs(scn: &Scenario, run_ns: Option<&str>) -> Result<Needs, RbacError> {
    let mut n = Needs::new(run_ns);
    let p = &scn.platform;
    let table = |what: &str| format!("[platform] {what} (line {})", p.line);
    for ns in &p.watch_namespaces {
        let why = table("watch.namespaces");
        n.add(
            Some(ns),
            Grant::new("", &["pods"], &["get", "list", "watch"], &why),
        );
        n.add(Some(ns), Grant::new("", &["pods/log"], &["get"], &why));
        n.add(
            Some(ns),
            Grant::new("", &["events"], &["get", "list", "watch"], &why),
        );
        n.add(
            Some(ns),
            Grant::new(
                "metrics.k8s.io",
                &["pods"],
                &["get", "list"],
                format!("{why}: CPU and memory of the watched pods"),
            ),
        );
    }
    if let Some(prom) = &p.prometheus {
        for ns in &prom.namespaces {
            let why = table("prometheus.namespaces");
            n.add(Some(ns), Grant::new("", &["pods"], &["get", "list"], &why));
            n.add(Some(ns), Grant::new("", &["pods/proxy"], &["get"], &why));
        }
    }
    for case in &scn.cases {
        for load in &case.loads {
            if let Some(Via::Gateway {
                namespace: Some(ns),
                name,
                ..
            }) = &load.via
            {
                let line = case.load_lines.get(&load.name).copied().unwrap_or(0);
                n.add(
                    Some(ns),
                    Grant::new(
                        "gateway.networking.k8s.io",
                        &["gateways"],
                        &["get", "list"],
                        format!(
                            "case {}: load {} (line {line}) via gateway {ns}/{name}",
                            case.name, load.name
                        ),
                    ),
                );
            }
        }
        for step in &case.steps {
            action_needs(&mut n, case, &step.action, step.at, run_ns)?;
        }
    }
    Ok(n)
}

fn action_needs(
    n: &mut Needs,
    case: &Case,
    action: &Action,
    at: std::time::Duration,
    run_ns: Option<&str>,
) -> Result<(), RbacError> {
    let why = |what: String| format!("case {}: {} at {}", case.name, what, units::Dur(at));
    let ns = action.namespace();
    match action {
        Action::Scale { target, probe, .. } => {
            let w = why(format!("scale {target}"));
            let (plural, scale) = workload_resources(target.kind);
            n.add(
                ns,
                Grant::new("apps", &[plural], &["get", "list", "watch", "patch"], &w),
            );
            n.add(
                ns,
                Grant::new("apps", &[scale], &["get", "patch", "update"], &w),
            );
            n.add(ns, Grant::new("", &["pods"], &["get", "list", "watch"], &w));
            probe_needs(n, probe.as_ref(), ns, &w);
        }
        Action::RolloutRestart { target, probe, .. } => {
            let w = why(format!("rollout_restart {target}"));
            let (plural, _) = workload_resources(target.kind);
            n.add(
                ns,
                Grant::new("apps", &[plural], &["get", "list", "watch", "patch"], &w),
            );
            n.add(ns, Grant::new("", &["pods"], &["get", "list", "watch"], &w));
            probe_needs(n, probe.as_ref(), ns, &w);
        }
        Action::DeletePod { selector, .. } => {
            let w = why(format!("delete_pod {selector}"));
            n.add(
                ns,
                Grant::new("", &["pods"], &["get", "list", "watch", "delete"], &w),
            );
        }
        Action::Apply { file, probe, .. } | Action::Delete { file, probe, .. } => {
            let w = why(format!("{} {}", action.kind(), file_name(file)));
            let target = ns.or(run_ns).unwrap_or("rbac");
            let docs = if file.extension().is_some_and(|e| e == "j2") {
                let text = read(file)?;
                let rendered = render(case, file, &text, 0, target, None)?;
                k8s::manifest::parse_text(file, &rendered)?
            } else {
                k8s::manifest::parse_manifest(file)?
            };
            objects_needs(n, &docs, ns, &w);
            probe_needs(n, probe.as_ref(), ns, &w);
        }
        Action::Grow(g) if g.template.is_some() => {
            let t = g.template.clone().unwrap_or_default();
            let path = PathBuf::from(&t);
            let w = why(format!("grow {} ({})", g.what.name(), file_name(&path)));
            let gns = g.namespace.as_deref();
            let target = gns.or(run_ns).unwrap_or("rbac");
            let text = manifests::generators::source(&t).map_err(|e| RbacError::Template {
                file: path.clone(),
                message: e.to_string(),
            })?;
            let params = generator_params(g, target)?;
            for i in 0..g.to {
                let rendered = render(case, &path, &text, i, target, params.as_ref())?;
                let docs = k8s::manifest::parse_text(&path, &rendered)?;
                objects_needs(n, &docs, gns, &w);
            }
            probe_needs(n, g.probe.as_ref(), gns, &w);
        }
        _ => {}
    }
    Ok(())
}

/// A workload kind's resource and its scale subresource.
fn workload_resources(kind: WorkloadKind) -> (&'static str, &'static str) {
    match kind {
        WorkloadKind::Deployment => ("deployments", "deployments/scale"),
        WorkloadKind::StatefulSet => ("statefulsets", "statefulsets/scale"),
        WorkloadKind::DaemonSet => ("daemonsets", "daemonsets/scale"),
    }
}

/// A probe's pods: in the probe's namespace, else the action's, else the run's. They are
/// listed and watched, their EndpointSlices read, and reached by port-forward when the pod
/// network is not.
fn probe_needs(n: &mut Needs, probe: Option<&ProbeSpec>, action_ns: Option<&str>, why: &str) {
    let Some(p) = probe else {
        return;
    };
    let ns = p.namespace.as_deref().or(action_ns);
    let w = format!("{why}: its probe");
    n.add(ns, Grant::new("", &["pods"], &["get", "list", "watch"], &w));
    n.add(
        ns,
        Grant::new(
            "discovery.k8s.io",
            &["endpointslices"],
            &["get", "list", "watch"],
            &w,
        ),
    );
    n.add(
        ns,
        Grant::new("", &["pods/portforward"], &["get", "create"], &w),
    );
}

/// Every object of a manifest: its kind's resource, in its own namespace (else the action's,
/// else the run's), or cluster-wide for a cluster-scoped kind.
fn objects_needs(n: &mut Needs, docs: &[k8s::Document], ns: Option<&str>, why: &str) {
    for d in docs {
        let api_version = d.object["apiVersion"].as_str().unwrap_or_default();
        let kind = d.object["kind"].as_str().unwrap_or_default();
        let (group, plural) = k8s::resource_of(api_version, kind);
        let g = Grant::new(&group, &[&plural], MANIFEST_VERBS, why);
        if k8s::cluster_scoped(&group, kind) {
            n.add_cluster(g);
        } else {
            n.add(d.object["metadata"]["namespace"].as_str().or(ns), g);
        }
    }
}

fn file_name(p: &Path) -> String {
    p.file_name().map_or_else(
        || p.display().to_string(),
        |f| f.to_string_lossy().into_owned(),
    )
}

fn read(file: &Path) -> Result<String, RbacError> {
    std::fs::read_to_string(file).map_err(|e| RbacError::Template {
        file: file.to_path_buf(),
        message: e.to_string(),
    })
}

/// Item `i` of a template, rendered as the run renders it, with stand-ins for the run's id and
/// its backend Services (names, not kinds, differ).
fn render(
    case: &Case,
    file: &Path,
    text: &str,
    i: u32,
    namespace: &str,
    params: Option<&manifests::template::Params>,
) -> Result<String, RbacError> {
    let groups: Vec<String> = case.backends.iter().map(|b| b.name.clone()).collect();
    let backends = manifests::template::stand_in_backends(groups.iter());
    let vars = manifests::template::ItemVars {
        i,
        namespace,
        run: "rbac",
        params,
        backends: Some(&backends),
    };
    manifests::template::check_item(file, text, vars).map_err(|e| RbacError::Template {
        file: file.to_path_buf(),
        message: e.to_string(),
    })
}

/// A built-in generator's parameters, with a stand-in backend and certificate (they change
/// names and bytes, not kinds); `None` for a template of the user's.
fn generator_params(
    g: &scenario::GrowSpec,
    ns: &str,
) -> Result<Option<manifests::template::Params>, RbacError> {
    use manifests::generators::{params, stand_in_certificate, BackendRef};
    use scenario::generators::{backend_ref, BUILTIN};
    let Some(t) = g.template.as_deref().filter(|t| t.starts_with(BUILTIN)) else {
        return Ok(None);
    };
    let err = |message: String| RbacError::Template {
        file: PathBuf::from(t),
        message,
    };
    let stand_in = g.backend.as_ref().map(|b| format!("backend-{b}"));
    let backend = match (&stand_in, &g.backend_ref) {
        (Some(s), _) => BackendRef {
            service: s,
            port: 8080,
        },
        (None, Some(r)) => {
            let (service, port) = backend_ref(r)
                .ok_or_else(|| err(format!("backend_ref '{r}' is not SERVICE:PORT")))?;
            BackendRef { service, port }
        }
        (None, None) => return Err(err("a built-in generator needs a backend".into())),
    };
    params(g, ns, "rbac", backend, &stand_in_certificate)
        .map(Some)
        .map_err(|e| err(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use scenario::layers::Source;

    /// `(group, resources, verbs)` of each grant, in order.
    fn rules(gs: &[Grant]) -> Vec<(String, String, String)> {
        gs.iter()
            .map(|g| (g.group.clone(), g.resources.join(","), g.verbs.join(",")))
            .collect()
    }

    fn r(group: &str, resources: &str, verbs: &str) -> (String, String, String) {
        (group.into(), resources.into(), verbs.into())
    }

    const SCENARIO: &str = r#"name = "rbac"

[platform]
kind = "kubernetes"
namespace = "team"
watch = { namespaces = ["ctl"], selectors = ["app=ctl"], log_levels = true }
prometheus = { namespaces = ["ctl"], selector = "app=ctl", port = 9464 }

[proxy]
kind = "external"
[proxy.external]
reload = ["true"]

[[loads]]
name = "l"
url = "http://127.0.0.1:8080/"
duration = "60s"

[[actions]]
at = "1s"
scale = { target = "statefulset/web", to = 3 }
namespace = "data"

[[actions]]
at = "2s"
delete_pod = { selector = "app=web" }
namespace = "data"

[[actions]]
at = "3s"
rollout_restart = "deployment/api"
namespace = "apps"

[[actions]]
at = "4s"
apply = "class.yaml"

[[actions]]
at = "5s"
grow = { what = "routes", template = "route.yaml.j2", to = 2, namespace = "gw", probe = { selector = "app=gw", port = 8080 } }
"#;

    const TEMPLATE: &str = "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n\
        metadata:\n  name: r{{ i }}\nspec: {}\n---\napiVersion: gateway.networking.k8s.io/v1\n\
        kind: Gateway\nmetadata:\n  name: gw{{ i }}\n  namespace: {{ namespace }}\nspec: {}\n";

    #[test]
    fn a_scenarios_actions_collectors_and_manifests_give_the_rules_of_each_namespace() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("route.yaml.j2"), TEMPLATE).unwrap();
        std::fs::write(
            dir.path().join("class.yaml"),
            "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata:\n  \
             name: c\nspec: {}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: m\n\
             ---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: p\n",
        )
        .unwrap();
        let file = dir.path().join("s.toml");
        let scn = Scenario::parse(
            &Source {
                file: file.display().to_string(),
                text: SCENARIO.into(),
            },
            false,
        )
        .unwrap();
        let n = needs(&scn, Some("team")).unwrap();
        assert_eq!(n.run_namespace.as_deref(), Some("team"));
        // The run's own namespace: the manifest's namespaced kinds (the Role covers the
        // ConfigMap; the printed Role drops it).
        assert_eq!(
            rules(&n.run),
            [
                r("", "configmaps", "get,list,watch,create,patch,delete"),
                r(
                    "policy",
                    "poddisruptionbudgets",
                    "get,list,watch,create,patch,delete"
                ),
            ]
        );
        assert!(
            n.run[1].why.contains("case main: apply class.yaml at 4s"),
            "{:?}",
            n.run
        );
        let ns: Vec<&str> = n.others.keys().map(String::as_str).collect();
        assert_eq!(ns, ["apps", "ctl", "data", "gw"]);
        assert_eq!(
            rules(&n.others["data"]),
            [
                r("apps", "statefulsets", "get,list,watch,patch"),
                r("apps", "statefulsets/scale", "get,patch,update"),
                r("", "pods", "get,list,watch"),
                r("", "pods", "get,list,watch,delete"),
            ]
        );
        assert!(n.others["data"][0]
            .why
            .contains("scale statefulset/web at 1s"));
        assert!(n.others["data"][3].why.contains("delete_pod app=web at 2s"));
        assert_eq!(
            rules(&n.others["apps"]),
            [
                r("apps", "deployments", "get,list,watch,patch"),
                r("", "pods", "get,list,watch"),
            ]
        );
        assert_eq!(
            rules(&n.others["ctl"]),
            [
                r("", "pods", "get,list,watch"),
                r("", "pods/log", "get"),
                r("", "events", "get,list,watch"),
                r("metrics.k8s.io", "pods", "get,list"),
                r("", "pods", "get,list"),
                r("", "pods/proxy", "get"),
            ]
        );
        assert!(n.others["ctl"][0]
            .why
            .contains("[platform] watch.namespaces (line 3)"));
        assert!(n.others["ctl"][5].why.contains("prometheus.namespaces"));
        // The growth's two kinds, each item in the growth's namespace, and its probe there.
        assert_eq!(
            rules(&n.others["gw"]),
            [
                r(
                    "gateway.networking.k8s.io",
                    "httproutes",
                    "get,list,watch,create,patch,delete"
                ),
                r(
                    "gateway.networking.k8s.io",
                    "gateways",
                    "get,list,watch,create,patch,delete"
                ),
                r("", "pods", "get,list,watch"),
                r("discovery.k8s.io", "endpointslices", "get,list,watch"),
                r("", "pods/portforward", "get,create"),
            ]
        );
        assert!(n.others["gw"][0]
            .why
            .contains("grow routes (route.yaml.j2) at 5s"));
        assert!(n.others["gw"][2].why.contains("its probe"));
        // The cluster-scoped kind.
        assert_eq!(
            rules(&n.cluster),
            [r(
                "gateway.networking.k8s.io",
                "gatewayclasses",
                "get,list,watch,create,patch,delete"
            )]
        );

        // As YAML: the run's Role, a Role and binding in each other namespace, the cluster
        // kinds' ClusterRole, the nodes'.
        let y = k8s::rbac_for(&n, "team", "bench");
        let docs = k8s::manifest::parse_text(Path::new("rbac.yaml"), &y).unwrap();
        let objs: Vec<String> = docs
            .iter()
            .map(|d| {
                format!(
                    "{} {}",
                    d.describe(),
                    d.object["metadata"]["namespace"].as_str().unwrap_or("-")
                )
            })
            .collect();
        assert_eq!(
            objs,
            [
                "Role/proxybench-run team",
                "RoleBinding/proxybench-run team",
                "Role/proxybench-run-team apps",
                "RoleBinding/proxybench-run-team apps",
                "Role/proxybench-run-team ctl",
                "RoleBinding/proxybench-run-team ctl",
                "Role/proxybench-run-team data",
                "RoleBinding/proxybench-run-team data",
                "Role/proxybench-run-team gw",
                "RoleBinding/proxybench-run-team gw",
                "ClusterRole/proxybench-run-team -",
                "ClusterRoleBinding/proxybench-run-team-team-bench -",
                "ClusterRole/proxybench-nodes -",
                "ClusterRoleBinding/proxybench-nodes-team-bench -",
            ]
        );
        // The run's Role: today's rules and the one kind they lack, with its reason.
        let own = docs[0].object["rules"].as_array().unwrap();
        let last = own.last().unwrap();
        assert_eq!(last["resources"][0], "poddisruptionbudgets");
        assert!(!own.iter().any(|r| r["resources"][0] == "configmaps"));
        assert!(y.contains("# case main: apply class.yaml at 4s\n- apiGroups: [\"policy\"]"));
        // A run that makes its own namespace: everything in its one ClusterRole (what its
        // rules already allow in every namespace, as the StatefulSet's scale, left out).
        let mine = needs(&scn, None).unwrap();
        let y = k8s::rbac_for(&mine, "ci", "bench");
        let docs = k8s::manifest::parse_text(Path::new("rbac.yaml"), &y).unwrap();
        assert_eq!(docs.len(), 2);
        let all = docs[0].object["rules"].as_array().unwrap();
        assert_eq!(
            all.iter()
                .filter(|r| r["resources"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|x| x == "statefulsets/scale")))
                .count(),
            1
        );
        for res in ["gatewayclasses", "httproutes", "poddisruptionbudgets"] {
            assert!(all.iter().any(|r| r["resources"][0] == res), "{res}: {y}");
        }
    }
}
