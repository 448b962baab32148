//! `proxybench k8s rbac`: the permissions a run needs, as RBAC objects to apply. The rules are
//! read off what this crate calls (each says which call needs it), so a run under exactly them
//! works; `crates/cli/tests/k8s_safe.rs` runs a scenario as a ServiceAccount bound to them.

/// One RBAC rule: API group, resources, verbs, and why proxybench asks for it.
struct Rule {
    group: &'static str,
    resources: &'static [&'static str],
    verbs: &'static [&'static str],
    why: &'static str,
}

/// Read, create and delete, for what a run makes (server-side apply is `patch`, and `create`
/// when the object is new).
const MAKE: &[&str] = &[
    "get", "list", "watch", "create", "patch", "update", "delete",
];

/// What a run calls in its namespace (`Role`), or in every namespace (`ClusterRole`).
const NAMESPACED: &[Rule] = &[
    Rule {
        group: "",
        resources: &["pods"],
        verbs: MAKE,
        why: "the config check's pod (Cluster::run_pod), pod watches and lists (collect, pods), \
              delete_pod, force deletion on a lost node",
    },
    Rule {
        group: "",
        resources: &["pods/log"],
        verbs: &["get"],
        why: "every proxy and backend pod's log (follow)",
    },
    Rule {
        group: "",
        resources: &["pods/exec"],
        verbs: &["get", "create"],
        why: "reloads: the next config written into each proxy pod (Cluster::exec)",
    },
    Rule {
        group: "",
        resources: &["pods/portforward"],
        verbs: &["get", "create"],
        why: "backend control ports, agents, proxy pods off the pod network (forward)",
    },
    Rule {
        group: "",
        resources: &["pods/proxy"],
        verbs: &["get"],
        why: "the Prometheus scrape through the API server (Cluster::scrape_prometheus)",
    },
    Rule {
        group: "",
        resources: &["services", "configmaps", "secrets"],
        verbs: MAKE,
        why: "the proxy's and backends' Services, the config ConfigMaps, token and TLS Secrets",
    },
    Rule {
        group: "",
        resources: &["events"],
        verbs: &["get", "list", "watch"],
        why: "Warning events (Cluster::watch_warnings), a pod's failure reason",
    },
    Rule {
        group: "discovery.k8s.io",
        resources: &["endpointslices"],
        verbs: &["get", "list", "watch"],
        why: "the backends' addresses and the proxy Service's endpoints",
    },
    Rule {
        group: "apps",
        resources: &["deployments", "statefulsets", "daemonsets"],
        verbs: MAKE,
        why: "the proxy and backend Deployments; scale and rollout_restart of any workload",
    },
    Rule {
        group: "apps",
        resources: &["deployments/scale", "statefulsets/scale"],
        verbs: &["get", "patch", "update"],
        why: "scaling (Cluster::scale_workload)",
    },
    Rule {
        group: "batch",
        resources: &["jobs"],
        verbs: MAKE,
        why: "agent pods, an Indexed Job (load on agents)",
    },
    Rule {
        group: "metrics.k8s.io",
        resources: &["pods"],
        verbs: &["get", "list"],
        why: "CPU and memory per pod (Cluster::sample_metrics)",
    },
    Rule {
        group: "gateway.networking.k8s.io",
        resources: &["gateways"],
        verbs: &["get", "list"],
        why: "a load's `via = gateway:NAME` address (Cluster::wait_gateway)",
    },
];

/// Cluster-scoped reads that make a run's record fuller; without them the collector says why it
/// has nothing, and the run goes on.
const NODES: Rule = Rule {
    group: "",
    resources: &["nodes", "nodes/proxy"],
    verbs: &["get", "list"],
    why: "optional: which node is this machine, the nodes' free pods before a grow, the \
          kubelets' probe counters (nodes/proxy)",
};

/// What only a run that makes its own namespace needs.
const NAMESPACES: Rule = Rule {
    group: "",
    resources: &["namespaces"],
    verbs: &["get", "list", "create", "patch", "delete"],
    why: "the run's own namespace: made, labelled, deleted; `k8s clean` lists and deletes them",
};

const SERVICE_ACCOUNTS: Rule = Rule {
    group: "",
    resources: &["serviceaccounts"],
    verbs: &["get"],
    why: "a new namespace's default ServiceAccount, awaited before any pod",
};

fn rules_yaml(out: &mut String, rules: &[&Rule]) {
    out.push_str("rules:\n");
    for r in rules {
        out.push_str(&format!("# {}\n", r.why));
        out.push_str(&format!("- apiGroups: [\"{}\"]\n", r.group));
        out.push_str(&format!("  resources: [{}]\n", quoted(r.resources)));
        out.push_str(&format!("  verbs: [{}]\n", quoted(r.verbs)));
    }
}

fn quoted(items: &[&str]) -> String {
    items
        .iter()
        .map(|i| format!("\"{i}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The RBAC objects a run needs, as YAML to apply, bound to ServiceAccount `account` of
/// namespace `account_ns`:
/// - with `namespace`, a run there (`--namespace`): a `Role` with what a run calls there, its
///   own namespace readable (it is asked for, never made), and a `RoleBinding`; then the
///   optional node reads as a `ClusterRole` and `ClusterRoleBinding`;
/// - without, a run that makes its own namespace: one `ClusterRole` with all of that plus the
///   namespaces, and a `ClusterRoleBinding`.
///
/// Objects of kinds a scenario's `apply` names (Gateway API routes, CRDs) need rules of their
/// own, which it cannot know: the header says so.
pub fn rbac(namespace: Option<&str>, account_ns: &str, account: &str) -> String {
    let mut o = String::from(
        "# The permissions a proxybench run needs (proxybench k8s rbac). A scenario's `apply`\n\
         # and `delete` also need the verbs get, create, patch, delete on the kinds its manifests\n\
         # name, and `rollout_restart`/`scale` on workloads in other namespaces need this Role\n\
         # there too.\n",
    );
    let subject = format!(
        "subjects:\n- kind: ServiceAccount\n  name: {account}\n  namespace: {account_ns}\n"
    );
    match namespace {
        Some(ns) => {
            o.push_str(&format!(
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  \
                 name: proxybench-run\n  namespace: {ns}\n"
            ));
            let own = Rule {
                group: "",
                resources: &["namespaces"],
                verbs: &["get"],
                why: "the namespace itself, asked for before the run (never created)",
            };
            let mut rules: Vec<&Rule> = NAMESPACED.iter().collect();
            rules.push(&own);
            rules_yaml(&mut o, &rules);
            o.push_str(&format!(
                "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  \
                 name: proxybench-run\n  namespace: {ns}\nroleRef:\n  \
                 apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: proxybench-run\n\
                 {subject}"
            ));
            o.push_str(
                "---\n# Optional, cluster-wide reads of the nodes (without them the record says \
                 what it lacks).\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n\
                 metadata:\n  name: proxybench-nodes\n",
            );
            rules_yaml(&mut o, &[&NODES]);
            o.push_str(&format!(
                "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n\
                 metadata:\n  name: proxybench-nodes-{account_ns}-{account}\nroleRef:\n  \
                 apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  \
                 name: proxybench-nodes\n{subject}"
            ));
        }
        None => {
            o.push_str(
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  \
                 name: proxybench-run\n",
            );
            let mut rules: Vec<&Rule> = NAMESPACED.iter().collect();
            rules.extend([&NAMESPACES, &SERVICE_ACCOUNTS, &NODES]);
            rules_yaml(&mut o, &rules);
            o.push_str(&format!(
                "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n\
                 metadata:\n  name: proxybench-run-{account_ns}-{account}\nroleRef:\n  \
                 apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  \
                 name: proxybench-run\n{subject}"
            ));
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn the_role_and_its_binding_parse_as_the_objects_they_name() {
        let y = rbac(Some("team-a"), "team-a", "bench");
        let docs = crate::manifest::parse_text(Path::new("rbac.yaml"), &y).unwrap();
        let kinds: Vec<String> = docs.iter().map(|d| d.describe()).collect();
        assert_eq!(
            kinds,
            [
                "Role/proxybench-run",
                "RoleBinding/proxybench-run",
                "ClusterRole/proxybench-nodes",
                "ClusterRoleBinding/proxybench-nodes-team-a-bench"
            ]
        );
        let role = &docs[0].object;
        assert_eq!(role["metadata"]["namespace"], "team-a");
        let rules = role["rules"].as_array().unwrap();
        assert_eq!(rules.len(), NAMESPACED.len() + 1);
        assert!(rules.iter().any(|r| r["resources"][0] == "pods/exec"));
        // A namespaced run never creates namespaces.
        let ns = rules
            .iter()
            .find(|r| r["resources"][0] == "namespaces")
            .unwrap();
        assert_eq!(ns["verbs"], serde_json::json!(["get"]));
        assert_eq!(docs[1].object["subjects"][0]["name"], "bench");

        let y = rbac(None, "ci", "bench");
        let docs = crate::manifest::parse_text(Path::new("rbac.yaml"), &y).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0].object["kind"], "ClusterRole");
        let rules = docs[0].object["rules"].as_array().unwrap();
        let ns = rules
            .iter()
            .find(|r| r["resources"][0] == "namespaces")
            .unwrap();
        assert!(ns["verbs"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("create")));
    }
}
