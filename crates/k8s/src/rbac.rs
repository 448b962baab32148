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

/// One rule a scenario's run needs beyond the run's own Role (`k8s rbac --scenario`): a group,
/// its resources and verbs, and why, naming the scenario's action or table that needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The API group (`""` for the core group).
    pub group: String,
    /// The resources (plurals, subresources as `pods/log`).
    pub resources: Vec<String>,
    /// The verbs.
    pub verbs: Vec<String>,
    /// Why: the action or table of the scenario that needs it.
    pub why: String,
}

impl Grant {
    /// A grant of `verbs` on `resources` of `group`, for `why`.
    pub fn new(group: &str, resources: &[&str], verbs: &[&str], why: impl Into<String>) -> Grant {
        Grant {
            group: group.to_string(),
            resources: resources.iter().map(|r| r.to_string()).collect(),
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
            why: why.into(),
        }
    }
}

/// What a scenario's run needs, per namespace, beyond [`rbac`]'s Role: what `k8s rbac
/// --scenario` derives from a parsed scenario (`bench::rbac::needs`) and prints.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Needs {
    /// The run's namespace (`--namespace`); `None` when the run makes its own.
    pub run_namespace: Option<String>,
    /// Grants in the run's own namespace (the kinds its manifests name there).
    pub run: Vec<Grant>,
    /// Grants in each other namespace the scenario names.
    pub others: std::collections::BTreeMap<String, Vec<Grant>>,
    /// Grants on cluster-scoped kinds a manifest names (GatewayClass, CRDs...).
    pub cluster: Vec<Grant>,
}

impl Needs {
    /// No grants yet, for a run in `run_namespace` (`None`: a namespace the run makes).
    pub fn new(run_namespace: Option<&str>) -> Needs {
        Needs {
            run_namespace: run_namespace.map(str::to_string),
            ..Needs::default()
        }
    }

    /// Adds `g` in namespace `ns` (`None`: the run's own; the run's own by name counts as it).
    pub fn add(&mut self, ns: Option<&str>, g: Grant) {
        match ns {
            Some(n) if self.run_namespace.as_deref() != Some(n) => {
                push_merged(self.others.entry(n.to_string()).or_default(), g)
            }
            _ => push_merged(&mut self.run, g),
        }
    }

    /// Adds `g` on a cluster-scoped kind.
    pub fn add_cluster(&mut self, g: Grant) {
        push_merged(&mut self.cluster, g);
    }
}

/// Pushes `g`, or adds its reason to an equal rule already there.
fn push_merged(list: &mut Vec<Grant>, g: Grant) {
    match list
        .iter_mut()
        .find(|x| x.group == g.group && x.resources == g.resources && x.verbs == g.verbs)
    {
        Some(x) => {
            if !x.why.split("; ").any(|w| w == g.why) {
                x.why = format!("{}; {}", x.why, g.why);
            }
        }
        None => list.push(g),
    }
}

/// Whether the run's own rules already allow every verb of `g` on every resource.
fn covered(base: &[&Rule], g: &Grant) -> bool {
    g.resources.iter().all(|r| {
        g.verbs.iter().all(|v| {
            base.iter().any(|b| {
                b.group == g.group
                    && b.resources.contains(&r.as_str())
                    && b.verbs.contains(&v.as_str())
            })
        })
    })
}

/// The API group and resource (plural) of a manifest object's `apiVersion` and `kind`, as the
/// client names it (kube-rs's `ApiResource::from_gvk`, whose plural is `to_plural`'s).
pub fn resource_of(api_version: &str, kind: &str) -> (String, String) {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let ar = kube::discovery::ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(
        group, version, kind,
    ));
    (ar.group, ar.plural)
}

/// Whether a kind is cluster-scoped, for the kinds a cluster serves out of the box and the
/// Gateway API's; any other kind (a CRD's) is taken as namespaced.
pub fn cluster_scoped(group: &str, kind: &str) -> bool {
    const KINDS: &[(&str, &str)] = &[
        ("", "Namespace"),
        ("", "Node"),
        ("", "PersistentVolume"),
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
        ("apiregistration.k8s.io", "APIService"),
        ("rbac.authorization.k8s.io", "ClusterRole"),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
        ("storage.k8s.io", "StorageClass"),
        ("storage.k8s.io", "CSIDriver"),
        ("storage.k8s.io", "VolumeAttachment"),
        ("networking.k8s.io", "IngressClass"),
        ("scheduling.k8s.io", "PriorityClass"),
        ("node.k8s.io", "RuntimeClass"),
        (
            "admissionregistration.k8s.io",
            "ValidatingWebhookConfiguration",
        ),
        (
            "admissionregistration.k8s.io",
            "MutatingWebhookConfiguration",
        ),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
        (
            "admissionregistration.k8s.io",
            "ValidatingAdmissionPolicyBinding",
        ),
        ("gateway.networking.k8s.io", "GatewayClass"),
    ];
    KINDS.iter().any(|(g, k)| *g == group && *k == kind)
}

fn grants_yaml(out: &mut String, rules: &[&Rule], grants: &[&Grant]) {
    rules_yaml(out, rules);
    for g in grants {
        let r: Vec<&str> = g.resources.iter().map(String::as_str).collect();
        let v: Vec<&str> = g.verbs.iter().map(String::as_str).collect();
        out.push_str(&format!("# {}\n", g.why));
        out.push_str(&format!("- apiGroups: [\"{}\"]\n", g.group));
        out.push_str(&format!("  resources: [{}]\n", quoted(&r)));
        out.push_str(&format!("  verbs: [{}]\n", quoted(&v)));
    }
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
/// own, which it cannot know: the header says so, and [`rbac_for`] adds them.
pub fn rbac(namespace: Option<&str>, account_ns: &str, account: &str) -> String {
    rbac_with(namespace, account_ns, account, None)
}

/// [`rbac`] with what one scenario needs besides (`k8s rbac --scenario`): its rules in the run's
/// namespace added to the run's Role; a `Role` and `RoleBinding` in each other namespace it
/// names, with only what it does there; a `ClusterRole` and `ClusterRoleBinding` for the
/// cluster-scoped kinds its manifests name. A run that makes its own namespace gets all of
/// them in its one `ClusterRole`.
pub fn rbac_for(needs: &Needs, account_ns: &str, account: &str) -> String {
    rbac_with(
        needs.run_namespace.as_deref(),
        account_ns,
        account,
        Some(needs),
    )
}

/// The YAML of the RBAC a run needs: a Role in the run's `namespace` (and what `needs` adds
/// elsewhere), or a ClusterRole when the run makes its own namespaces.
fn rbac_with(
    namespace: Option<&str>,
    account_ns: &str,
    account: &str,
    needs: Option<&Needs>,
) -> String {
    let mut o = match needs {
        None => String::from(
            "# The permissions a proxybench run needs (proxybench k8s rbac). A scenario's `apply`\n\
             # and `delete` also need the verbs get, create, patch, delete on the kinds its manifests\n\
             # name, and `rollout_restart`/`scale` on workloads in other namespaces need this Role\n\
             # there too: `proxybench k8s rbac --scenario FILE` adds them.\n",
        ),
        Some(_) => String::from(
            "# The permissions a run of this scenario needs (proxybench k8s rbac --scenario): the\n\
             # run's own Role, what its actions, collectors and manifests do in other namespaces,\n\
             # and the cluster-scoped kinds its manifests name. Each rule says why.\n",
        ),
    };
    let subject = format!(
        "subjects:\n- kind: ServiceAccount\n  name: {account}\n  namespace: {account_ns}\n"
    );
    let empty = Needs::default();
    let needs_or = needs.unwrap_or(&empty);
    match namespace {
        Some(ns) => roles_in(&mut o, ns, needs_or, &subject, (account_ns, account)),
        None => {
            o.push_str(
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  \
                 name: proxybench-run\n",
            );
            let mut rules: Vec<&Rule> = NAMESPACED.iter().collect();
            rules.extend([&NAMESPACES, &SERVICE_ACCOUNTS, &NODES]);
            // A ClusterRole's rules hold in every namespace: the scenario's, merged.
            let mut all = Vec::new();
            for g in needs_or
                .run
                .iter()
                .chain(needs_or.others.values().flatten())
                .chain(&needs_or.cluster)
            {
                if !covered(&rules, g) {
                    push_merged(&mut all, g.clone());
                }
            }
            let extra: Vec<&Grant> = all.iter().collect();
            grants_yaml(&mut o, &rules, &extra);
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

/// The YAML for a run in namespace `ns`: its Role and RoleBinding, a Role in each other
/// namespace it acts in, a ClusterRole for the cluster-scoped kinds its manifests name, and
/// the optional reads of the nodes, each bound to `subject` (`who`: its namespace and name).
fn roles_in(o: &mut String, ns: &str, needs: &Needs, subject: &str, who: (&str, &str)) {
    let (account_ns, account) = who;
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
    let extra: Vec<&Grant> = needs.run.iter().filter(|g| !covered(&rules, g)).collect();
    grants_yaml(o, &rules, &extra);
    o.push_str(&format!(
        "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  \
         name: proxybench-run\n  namespace: {ns}\nroleRef:\n  \
         apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: proxybench-run\n\
         {subject}"
    ));
    let name = format!("proxybench-run-{ns}");
    for (other, grants) in &needs.others {
        o.push_str(&format!(
            "---\n# What the run in {ns} does in {other}.\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  \
             name: {name}\n  namespace: {other}\n"
        ));
        let g: Vec<&Grant> = grants.iter().collect();
        grants_yaml(o, &[], &g);
        o.push_str(&format!(
            "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\n\
             metadata:\n  name: {name}\n  namespace: {other}\nroleRef:\n  \
             apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: {name}\n\
             {subject}"
        ));
    }
    if !needs.cluster.is_empty() {
        o.push_str(&format!(
            "---\n# The cluster-scoped kinds the run in {ns}'s manifests name.\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  \
             name: {name}\n"
        ));
        let g: Vec<&Grant> = needs.cluster.iter().collect();
        grants_yaml(o, &[], &g);
        o.push_str(&format!(
            "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n\
             metadata:\n  name: {name}-{account_ns}-{account}\nroleRef:\n  \
             apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  \
             name: {name}\n{subject}"
        ));
    }
    o.push_str(
        "---\n# Optional, cluster-wide reads of the nodes (without them the record says \
         what it lacks).\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n\
         metadata:\n  name: proxybench-nodes\n",
    );
    rules_yaml(o, &[&NODES]);
    o.push_str(&format!(
        "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n\
         metadata:\n  name: proxybench-nodes-{account_ns}-{account}\nroleRef:\n  \
         apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  \
         name: proxybench-nodes\n{subject}"
    ));
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
