//! Scenario files with mistakes: each is refused when parsed, before anything starts, with the
//! file and the line of the mistake, whichever form (`--quick` or full) it sits in.

use proxybench_scenario::layers::{ScenarioError, Source};
use proxybench_scenario::{
    Action, ParseOptions, PlatformKind, PlatformOverride, Scenario, Wait, WaitFor, Workload,
    WorkloadKind,
};

/// A valid scenario: one backend group, one nginx listener, one 10 s load. Lines 1-20.
const BASE: &str = r#"name = "t"
checks = ["coffee.failure_rate <= 1%"]

[[backends]]
name = "cafe"
count = 2

[proxy]
[[proxy.listeners]]
name = "http"
[[proxy.upstreams]]
name = "cafe"
backends = "cafe"
[[proxy.routes]]
path = "/"
upstream = "cafe"

[[loads]]
name = "coffee"
url = "http://cafe.example.com/"
duration = "10s"
"#;

fn parse(text: &str, quick: bool) -> Result<Scenario, ScenarioError> {
    Scenario::parse(
        &Source {
            file: "t.toml".into(),
            text: text.into(),
        },
        quick,
    )
}

/// The error of `BASE` with `extra` appended, in both forms; asserts that both name the line.
fn error(extra: &str) -> ScenarioError {
    let text = format!("{BASE}{extra}");
    let full = parse(&text, false).expect_err("the full form should be refused");
    let quick = parse(&text, true).expect_err("the quick form should be refused");
    assert_eq!(full.line, quick.line, "{full} / {quick}");
    assert!(full.line.is_some(), "no line: {full}");
    full
}

/// The line of the `n`th (1-based) line after BASE.
fn after_base(n: usize) -> usize {
    BASE.lines().count() + n
}

#[test]
fn the_base_is_valid() {
    parse(BASE, false).unwrap();
    parse(BASE, true).unwrap();
}

#[test]
fn an_action_after_every_load_has_ended_is_refused() {
    let e = error("\n[[actions]]\nat = \"10s\"\nreload = true\n");
    assert_eq!(e.line, Some(after_base(2)), "{e}");
    assert!(
        e.message
            .contains("reload at 10s fires after every load has ended (10s)"),
        "{e}"
    );
    // A gradual scale whose last step lands after the end is refused too.
    let e = error(
        "\n[[actions]]\nat = \"5s\"\nscale_backends = { group = \"cafe\", to = 8, step = \"1s\" }\n",
    );
    assert!(
        e.message.contains("scale_backends at 10s fires after"),
        "{e}"
    );
    // Repeats: the last one counts.
    let e = error("\n[[actions]]\nat = \"1s\"\nevery = \"3s\"\ntimes = 4\nreload = true\n");
    assert!(e.message.contains("reload at 10s"), "{e}");
    // Just before the end is fine, and so is anything when a load ends by count.
    parse(
        &format!("{BASE}\n[[actions]]\nat = \"9s\"\nreload = true\n"),
        false,
    )
    .unwrap();
    let by_count = BASE.replace("duration = \"10s\"", "requests = 1000");
    parse(
        &format!("{by_count}\n[[actions]]\nat = \"60s\"\nreload = true\n"),
        false,
    )
    .unwrap();
}

#[test]
fn unknown_check_metrics_are_refused_with_their_line() {
    let text = BASE.replace(
        "checks = [\"coffee.failure_rate <= 1%\"]",
        "checks = [\n  \"coffee.failure_rate <= 1%\",\n  \"nginx.p99 < 10ms\",\n]",
    );
    let e = parse(&text, false).unwrap_err();
    assert_eq!(e.line, Some(4), "{e}");
    assert!(
        e.message.contains("unknown metric 'p99' for 'nginx'"),
        "{e}"
    );
}

#[test]
fn a_mistake_in_the_quick_form_is_found_in_a_full_run() {
    let text = format!("{BASE}\n[quick]\n[[quick.loads]]\nname = \"coffee\"\nduraton = \"1s\"\n");
    let e = parse(&text, false).unwrap_err();
    assert_eq!(e.line, Some(after_base(5)), "{e}");
    assert!(e.message.starts_with("in the --quick form: "), "{e}");
    assert!(e.message.contains("duraton"), "{e}");
    // And a mistake in the full form is found in a quick run: the quick form fixes a load the
    // full form breaks.
    let broken = BASE.replace("duration = \"10s\"", "duration = \"10s\"\nrate = \"fast\"");
    let text = format!("{broken}\n[quick]\n[[quick.loads]]\nname = \"coffee\"\nrate = \"5\"\n");
    let e = parse(&text, true).unwrap_err();
    assert!(e.message.starts_with("in the full form: "), "{e}");
    assert_eq!(e.line, Some(22), "{e}");
}

#[test]
fn a_mistake_in_a_case_override_is_found_whichever_case_runs() {
    let text = format!(
        "{BASE}\n[[cases]]\nname = \"a\"\n\n[[cases]]\nname = \"b\"\n[cases.quick]\nsettle = \"soon\"\n"
    );
    let e = parse(&text, false).unwrap_err();
    assert_eq!(e.line, Some(after_base(8)), "{e}");
}

#[test]
fn errors_without_a_natural_place_still_have_a_line() {
    // No loads at all: the scenario's name.
    let no_loads = BASE.split("[[loads]]").next().unwrap().to_string();
    let e = parse(&no_loads, false).unwrap_err();
    assert_eq!(e.line, Some(1), "{e}");
    // A case without loads points at the case.
    let e = error("\n[[cases]]\nname = \"x\"\nloads = []\n");
    assert_eq!(e.line, Some(after_base(2)), "{e}");
    // An unknown analysis, a bad scenario name.
    let e = parse(&format!("analysis = \"nope\"\n{BASE}"), false).unwrap_err();
    assert_eq!(e.line, Some(1), "{e}");
    assert!(e.message.contains("unknown analysis 'nope'"), "{e}");
    let e = parse(&BASE.replace("name = \"t\"", "name = \"../t\""), false).unwrap_err();
    assert_eq!(e.line, Some(1), "{e}");
    // An alternative config that names a group that does not exist.
    let e = error(
        "\n[configs.other]\n[[configs.other.upstreams]]\nname = \"x\"\nbackends = \"nope\"\n",
    );
    assert!(e.message.contains("nope"), "{e}");
    assert_eq!(e.line, Some(after_base(2)), "{e}");
    // A case name that could not be a directory.
    let e = error("\n[[cases]]\nname = \"../up\"\n");
    assert_eq!(e.line, Some(after_base(2)), "{e}");
}

#[test]
fn sizes_beyond_one_machine_are_refused_before_expanding() {
    let e =
        error("\n[[actions]]\nat = \"1s\"\nscale_replicas = { to = 4294967295, step = \"1s\" }\n");
    assert!(e.message.contains("at most 64"), "{e}");
    let e = error(
        "\n[[actions]]\nat = \"1s\"\nscale_backends = { group = \"cafe\", to = 4294967295, step = \"1ms\" }\n",
    );
    assert!(e.message.contains("at most 10000"), "{e}");
    let e =
        error("\n[[actions]]\nat = \"1s\"\nevery = \"1us\"\ntimes = 4294967295\nreload = true\n");
    assert!(e.message.contains("more than 100000 steps"), "{e}");
    let e = parse(&BASE.replace("count = 2", "count = 100000"), false).unwrap_err();
    assert_eq!(e.line, Some(4), "{e}");
}

#[test]
fn an_action_entry_names_exactly_one_known_action() {
    let list = "scale_backends, scale_replicas, reload, swap_config, set_profile, drain_backend, \
                kill_backend, restart_backend, stop_replica, grow, exec, apply, delete, \
                rollout_restart, delete_pod, scale";
    // Two actions in one entry: refused at the entry's line.
    let e = error("\n[[actions]]\nat = \"1s\"\nreload = true\nkill_backend = \"cafe-1\"\n");
    assert_eq!(e.line, Some(after_base(2)), "{e}");
    assert_eq!(
        e.message,
        format!("an action needs exactly one of {list} (found 2)")
    );
    // None.
    let e = error("\n[[actions]]\nat = \"1s\"\n");
    assert_eq!(e.line, Some(after_base(2)), "{e}");
    assert_eq!(
        e.message,
        format!("an action needs exactly one of {list} (found 0)")
    );
    // An unknown key: refused at its own line, with the keys an entry may hold.
    let e = error("\n[[actions]]\nat = \"1s\"\nrelaod = true\n");
    assert_eq!(e.line, Some(after_base(4)), "{e}");
    assert!(
        e.message.starts_with(
            "unknown field `relaod`, expected one of `at`, `every`, `times`, `timeout`, \
             `allow_fail`, `namespace`, `wait`, `probe`, `scale_backends`"
        ),
        "{e}"
    );
    // A bad value: refused at the value's line, by the action's own type.
    let e = error("\n[[actions]]\nat = \"1s\"\nreload = \"yes\"\n");
    assert_eq!(e.line, Some(after_base(4)), "{e}");
    assert!(e.message.contains("expected a boolean"), "{e}");
    let e = error(
        "\n[[actions]]\nat = \"1s\"\nscale_backends = { group = \"cafe\", to = 3, bogus = 1 }\n",
    );
    assert_eq!(e.line, Some(after_base(4)), "{e}");
    assert!(e.message.contains("unknown field `bogus`"), "{e}");
    // No time.
    let e = error("\n[[actions]]\nreload = true\n");
    assert_eq!(e.line, Some(after_base(2)), "{e}");
    assert_eq!(e.message, "missing field `at`");
}

#[test]
fn via_names_a_listener_or_a_backend_group() {
    let load = |via: &str, url: &str| {
        format!("\n[[loads]]\nname = \"b\"\nurl = \"{url}\"\nduration = \"1s\"\nvia = \"{via}\"\n")
    };
    for (via, url, want) in [
        (
            "backend:nope",
            "http://x/",
            "load 'b' goes via backend group 'nope', which is not defined",
        ),
        (
            "backend:cafe",
            "https://x/",
            "load 'b': backends speak plain HTTP, use an http:// url",
        ),
        (
            "nope",
            "http://x/",
            "load 'b' goes via listener 'nope', which is not defined",
        ),
    ] {
        let e = error(&load(via, url));
        assert_eq!(e.line, Some(after_base(2)), "{e}");
        assert_eq!(e.message, want);
    }
    use proxybench_scenario::Via;
    let scn = parse(
        &format!(
            "{BASE}{}{}",
            load("backend:cafe", "http://x/"),
            load("http", "http://y/").replace("\"b\"", "\"c\"")
        ),
        false,
    )
    .unwrap();
    let vias: Vec<_> = scn.cases[0].loads.iter().map(|l| l.via.clone()).collect();
    assert_eq!(
        vias,
        [
            None,
            Some(Via::Backend("cafe".into())),
            Some(Via::Listener("http".into()))
        ]
    );
}

/// A valid external scenario: a proxy the user runs, backends on fixed ports. Lines 1-16.
const EXTERNAL: &str = r#"name = "x"

[[backends]]
name = "app"
count = 2
listen = "127.0.0.1:9101"

[proxy]
kind = "external"
[proxy.external]
processes = "nginx"

[[loads]]
name = "l"
url = "http://127.0.0.1:8080/"
duration = "10s"
"#;

fn external_error(text: &str) -> ScenarioError {
    let e = parse(text, false).expect_err("should be refused");
    assert!(e.line.is_some(), "no line: {e}");
    assert_eq!(e.to_string().lines().count(), 1, "{e}");
    e
}

#[test]
fn external_targets_are_refused_what_proxybench_cannot_do_to_them() {
    parse(EXTERNAL, false).unwrap();
    let e = external_error(&EXTERNAL.replace(
        "processes = \"nginx\"\n",
        "processes = \"nginx\"\n[[proxy.listeners]]\nname = \"http\"\n",
    ));
    assert_eq!(e.line, Some(8), "{e}");
    assert!(e.message.contains("must not carry listeners"), "{e}");
    let e = external_error(&EXTERNAL.replace("[proxy.external]\nprocesses = \"nginx\"\n", ""));
    assert_eq!(e.line, Some(8), "{e}");
    assert!(e.message.contains("needs a [proxy.external] table"), "{e}");
    let e = external_error(&format!(
        "{EXTERNAL}\n[[actions]]\nat = \"1s\"\nscale_replicas = {{ to = 2 }}\n"
    ));
    assert_eq!(e.line, Some(18), "{e}");
    assert!(
        e.message
            .contains("scale_replicas on an external target: proxybench does not start, stop"),
        "{e}"
    );
    let e = external_error(&format!(
        "{EXTERNAL}\n[[actions]]\nat = \"1s\"\nreload = true\n"
    ));
    assert_eq!(e.line, Some(18), "{e}");
    assert!(e.message.contains("proxy.external.reload"), "{e}");
    let e = external_error(&EXTERNAL.replace("127.0.0.1:9101", "10.0.0.1:9101"));
    assert_eq!(e.line, Some(3), "{e}");
    assert!(e.message.contains("127.0.0.0/8 only"), "{e}");
    let e = external_error(&EXTERNAL.replace("127.0.0.1:9101", "127.0.0.1:65535"));
    assert!(e.message.contains("go past port 65535"), "{e}");
}

#[test]
fn bad_exec_actions_are_refused_at_their_line() {
    let exec = |a: &str| format!("{BASE}\n[[actions]]\nat = \"1s\"\n{a}\n");
    let e = error("\n[[actions]]\nat = \"1s\"\nexec = []\n");
    assert_eq!(e.line, Some(after_base(2)), "{e}");
    assert!(e.message.contains("exec: the command is empty"), "{e}");
    let e = error("\n[[actions]]\nat = \"1s\"\nexec = [\"\"]\n");
    assert!(e.message.contains("exec: the command is empty"), "{e}");
    let e = error("\n[[actions]]\nat = \"1s\"\nexec = [\"true\"]\ntimeout = \"soon\"\n");
    assert!(e.line.is_some(), "{e}");
    let e = error("\n[[actions]]\nat = \"1s\"\nexec = [\"true\"]\ntimeout = \"0s\"\n");
    assert!(e.message.contains("`timeout` must be more than 0"), "{e}");
    let e = error("\n[[actions]]\nat = \"1s\"\nreload = true\nallow_fail = true\n");
    assert!(
        e.message
            .contains("`allow_fail` belongs to an `exec` action"),
        "{e}"
    );
    parse(
        &exec("exec = [\"true\"]\ntimeout = \"5s\"\nallow_fail = true"),
        false,
    )
    .unwrap();
}

#[test]
fn grpc_routes_grow_only_through_an_external_gateway() {
    let e = error("\n[[actions]]\nat = \"1s\"\ngrow = { what = \"grpc_routes\", to = 3 }\n");
    assert_eq!(e.line, Some(after_base(2)), "{e}");
    assert!(
        e.message
            .contains("grpc_routes are GRPCRoutes: they grow on an external Gateway API gateway"),
        "{e}"
    );
}

/// `BASE` on Kubernetes, with `extra` appended.
fn kube(extra: &str) -> String {
    format!("{BASE}{extra}\n[platform]\nkind = \"kubernetes\"\n")
}

#[test]
fn the_platform_table_is_read_and_its_mistakes_are_refused_at_their_line() {
    let scn = parse(
        &BASE.replacen(
            "\n[[backends]]",
            "\n[platform]\nkind = \"kubernetes\"\ncontext = \"lab\"\nnamespace = \"bench-1\"\n\
             keep = true\nimage = \"localhost/proxybench:0.1.0\"\nproxy_image = \"nginx:1.27\"\n\
             watch = { namespaces = [\"gw\"], selectors = [\"app=gateway\"] }\n\
             prometheus = { namespaces = [\"nginx-gateway\", \"gw\"], selectors = [\"app=gateway\", \"app=ngf\"], port = 9113, metrics = [\"nginx_up\"], le = [1000, 500, 500] }\n\
             image_pull_secrets = [\"regcred\"]\nimage_pull_policy = \"Always\"\n\
             ready_timeout = \"30s\"\n\
             \n[[backends]]",
            1,
        ),
        true,
    )
    .unwrap();
    let p = &scn.platform;
    assert_eq!(p.kind, PlatformKind::Kubernetes);
    assert_eq!(p.context.as_deref(), Some("lab"));
    assert_eq!(p.namespace.as_deref(), Some("bench-1"));
    assert!(p.keep);
    assert_eq!(p.image.as_deref(), Some("localhost/proxybench:0.1.0"));
    assert_eq!(p.proxy_image.as_deref(), Some("nginx:1.27"));
    assert_eq!(p.watch_namespaces, ["gw"]);
    assert_eq!(p.watch_selectors, ["app=gateway"]);
    assert_eq!(p.image_pull_secrets, ["regcred"]);
    assert_eq!(p.image_pull_policy.as_deref(), Some("Always"));
    assert_eq!(p.ready_timeout, Some(std::time::Duration::from_secs(30)));
    let prom = p.prometheus.as_ref().unwrap();
    assert_eq!(prom.namespaces, ["nginx-gateway", "gw"]);
    assert_eq!(prom.selectors, ["app=gateway", "app=ngf"]);
    assert_eq!(prom.le, [500.0, 1000.0]);
    assert_eq!(
        (prom.port, prom.path.as_str(), prom.every),
        (9113, "/metrics", std::time::Duration::from_secs(1))
    );
    assert_eq!(p.line, 4);
    // No [platform]: local.
    assert_eq!(
        parse(BASE, false).unwrap().platform.kind,
        PlatformKind::Local
    );

    let bad = |table: &str, line: usize, needle: &str| {
        let e = error(&format!("\n[platform]\n{table}\n"));
        assert_eq!(e.line, Some(after_base(line)), "{table}: {e}");
        assert!(e.message.contains(needle), "{table}: {e}");
        assert_eq!(e.to_string().lines().count(), 1, "{e}");
    };
    bad(
        "kind = \"nomad\"",
        3,
        "platform kind 'nomad' is not one of local, kubernetes",
    );
    bad(
        "kind = \"kubernetes\"\nflavour = 1",
        4,
        "unknown field `flavour`",
    );
    bad(
        "kind = \"kubernetes\"\nnamespace = \"Bench_1\"",
        4,
        "platform.namespace 'Bench_1'",
    );
    bad(
        "kind = \"kubernetes\"\ncontext = \"\"",
        4,
        "platform.context is empty",
    );
    bad("kind = \"kubernetes\"\nkeep = \"yes\"", 4, "invalid type");
    bad(
        "kind = \"kubernetes\"\nimage_pull_policy = \"Sometimes\"",
        4,
        "platform.image_pull_policy 'Sometimes': not one of Always, IfNotPresent, Never",
    );
    bad(
        "kind = \"kubernetes\"\nimage_pull_secrets = [\"Reg_Cred\"]",
        4,
        "platform.image_pull_secrets: Secret name 'Reg_Cred'",
    );
    bad(
        "kind = \"kubernetes\"\nready_timeout = \"0s\"",
        4,
        "platform.ready_timeout must be more than 0s",
    );
    bad(
        "image_pull_policy = \"Always\"",
        3,
        "platform.image_pull_policy needs [platform] kind = \"kubernetes\"",
    );
    bad(
        "kind = \"kubernetes\"\nimage = \"a b\"",
        4,
        "platform.image 'a b'",
    );
    bad(
        "kind = \"kubernetes\"\nwatch = { selectors = [\"app=(x\"] }",
        4,
        "platform.watch.selectors",
    );
    bad(
        "kind = \"kubernetes\"\nwatch = { namespaces = [\"gw\"], log_levels = true }",
        4,
        "platform.watch.log_levels needs watch.selectors",
    );
    bad(
        "kind = \"kubernetes\"\nwatch = { pods = [] }",
        4,
        "unknown field `pods`",
    );
    bad(
        "kind = \"kubernetes\"\nprometheus = { selector = \"app=x\", port = 0 }",
        4,
        "platform.prometheus: port must be 1-65535",
    );
    bad(
        "kind = \"kubernetes\"\nprometheus = { selector = \"app=x\", port = 80, path = \"metrics\" }",
        4,
        "path 'metrics' must start with '/'",
    );
    bad(
        "kind = \"kubernetes\"\nprometheus = { selector = \"app=x\", port = 80, every = \"0s\" }",
        4,
        "`every` must be more than 0",
    );
    bad(
        "kind = \"kubernetes\"\nprometheus = { port = 80 }",
        4,
        "platform.prometheus: no pods to scrape: name them with `selector`",
    );
    bad(
        "kind = \"kubernetes\"\nprometheus = { port = 80, selector = \"a=b\", le = [0.5, inf] }",
        4,
        "platform.prometheus: le inf: a bucket bound is a finite number",
    );
    bad(
        "kind = \"kubernetes\"\nprometheus = { port = 80, selector = \"a=b\", selectors = [\"c=d\"] }",
        4,
        "`selector` or `selectors`, not both",
    );
    bad(
        "kind = \"kubernetes\"\nprometheus = { port = 80, selectors = [\"app=x\",\n  \"app=(x\"] }",
        5,
        "platform.prometheus: selector 'app=(x'",
    );
    bad(
        "kind = \"kubernetes\"\nprometheus = { port = 80, selector = \"app=x\", namespaces = [\"gw\",\n  \"Gateway\"] }",
        5,
        "platform.prometheus.namespaces: 'Gateway': must be 1-63 lowercase",
    );
    // Cluster settings on the local platform mean nothing: refused at their line.
    bad(
        "namespace = \"x\"",
        3,
        "platform.namespace needs [platform] kind = \"kubernetes\"",
    );
    bad(
        "kind = \"local\"\nkeep = true",
        4,
        "platform.keep needs [platform] kind",
    );
    bad(
        "kind = \"kubernetes\"\nproxy_grace = \"2.5s\"",
        4,
        "platform.proxy_grace '2500ms': Kubernetes counts it in whole seconds",
    );
    bad(
        "kind = \"kubernetes\"\nproxy_grace = \"5s\"\nproxy_pre_stop = \"5s\"",
        5,
        "platform.proxy_pre_stop (5s) must be shorter than proxy_grace (5s)",
    );
    bad(
        "kind = \"kubernetes\"\nservice_type = \"clusterip\"",
        4,
        "platform.service_type 'clusterip' is not one of ClusterIP, NodePort, LoadBalancer",
    );
    bad(
        "service_type = \"NodePort\"",
        3,
        "platform.service_type needs [platform] kind = \"kubernetes\"",
    );
    bad(
        "proxy_grace = \"5s\"",
        3,
        "platform.proxy_grace needs [platform] kind = \"kubernetes\"",
    );
    // [platform] belongs to the whole scenario, not to a case.
    let e = error("\n[[cases]]\nname = \"a\"\n[cases.platform]\nkind = \"kubernetes\"\n");
    assert!(e.message.contains("unknown field `platform`"), "{e}");
}

#[test]
fn cluster_actions_are_refused_on_the_local_platform() {
    for (action, key) in [
        ("apply = \"m.yaml\"", "apply"),
        ("delete = \"m.yaml\"", "delete"),
        ("rollout_restart = \"deployment/web\"", "rollout_restart"),
        ("delete_pod = { selector = \"app=x\" }", "delete_pod"),
        ("scale = { target = \"deployment/web\", to = 3 }", "scale"),
    ] {
        let e = error(&format!("\n[[actions]]\nat = \"1s\"\n{action}\n"));
        assert_eq!(e.line, Some(after_base(2)), "{e}");
        assert!(
            e.message
                .contains(&format!("{key} needs [platform] kind = \"kubernetes\"")),
            "{e}"
        );
    }
}

#[test]
fn cluster_actions_are_parsed_and_checked_on_kubernetes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("route.yaml"), "kind: ConfigMap\n").unwrap();
    let file = dir.path().join("s.toml");
    let on = |extra: &str| Source {
        file: file.display().to_string(),
        text: kube(&format!("\n[[actions]]\nat = \"1s\"\n{extra}\n")),
    };
    // The blank line, then [[actions]].
    let line = after_base(2);
    let ok = |extra: &str| {
        let s = Scenario::parse(&on(extra), false).unwrap_or_else(|e| panic!("{extra}: {e}"));
        s.cases[0].steps[0].action.clone()
    };
    let route = || dir.path().join("route.yaml");
    let w = |kind, name: &str| Workload {
        kind,
        name: name.into(),
    };
    assert_eq!(
        ok("apply = \"route.yaml\""),
        Action::Apply {
            file: route(),
            namespace: None,
            wait: None,
            probe: None
        }
    );
    assert_eq!(
        ok("delete = \"route.yaml\""),
        Action::Delete {
            file: route(),
            namespace: None,
            wait: None,
            probe: None
        }
    );
    assert_eq!(
        ok("rollout_restart = \"deployment/web\""),
        Action::RolloutRestart {
            target: w(WorkloadKind::Deployment, "web"),
            namespace: None,
            probe: None
        }
    );
    assert_eq!(
        ok("delete_pod = { selector = \"app=x\", count = 2, grace = \"0s\" }"),
        Action::DeletePod {
            selector: "app=x".into(),
            count: 2,
            grace: std::time::Duration::ZERO,
            namespace: None
        }
    );
    assert_eq!(
        ok("scale = { target = \"deployment/web\", to = 3, step = \"2s\" }"),
        Action::Scale {
            target: w(WorkloadKind::Deployment, "web"),
            to: 3,
            step: std::time::Duration::from_secs(2),
            namespace: None,
            probe: None
        }
    );
    // Each of the five takes a `namespace`; every kind that runs the verb parses.
    let ns = Some("data".to_string());
    assert_eq!(
        ok("apply = \"route.yaml\"\nnamespace = \"data\""),
        Action::Apply {
            file: route(),
            namespace: ns.clone(),
            wait: None,
            probe: None
        }
    );
    assert_eq!(
        ok("delete = \"route.yaml\"\nnamespace = \"data\""),
        Action::Delete {
            file: route(),
            namespace: ns.clone(),
            wait: None,
            probe: None
        }
    );
    for kind in WorkloadKind::ALL {
        let name = kind.name();
        assert_eq!(
            ok(&format!(
                "rollout_restart = \"{name}/db\"\nnamespace = \"data\""
            )),
            Action::RolloutRestart {
                target: w(kind, "db"),
                namespace: ns.clone(),
                probe: None
            }
        );
        if kind.scalable() {
            assert_eq!(
                ok(&format!(
                    "scale = {{ target = \"{name}/db\", to = 0 }}\nnamespace = \"data\""
                )),
                Action::Scale {
                    target: w(kind, "db"),
                    to: 0,
                    step: std::time::Duration::ZERO,
                    namespace: ns.clone(),
                    probe: None
                }
            );
        }
    }
    assert_eq!(
        ok("delete_pod = { selector = \"app=db\" }\nnamespace = \"data\""),
        Action::DeletePod {
            selector: "app=db".into(),
            count: 1,
            grace: std::time::Duration::from_secs(30),
            namespace: ns.clone()
        }
    );
    assert_eq!(
        ok("scale = { target = \"statefulset/db\", to = 2 }\nnamespace = \"data\"").namespace(),
        Some("data")
    );
    let bad = |extra: &str, needle: &str| {
        let e = Scenario::parse(&on(extra), false).expect_err(extra);
        // The entry's line, or the line of the action's own value (serde's errors).
        assert!(
            e.line == Some(line) || e.line == Some(line + 2),
            "{extra}: {e}"
        );
        assert!(e.message.contains(needle), "{extra}: {e}");
        assert_eq!(e.to_string().lines().count(), 1, "{e}");
    };
    // `wait`: a condition after an apply, the objects gone after a delete, each with a bound.
    let secs = std::time::Duration::from_secs;
    assert_eq!(
        ok("apply = \"route.yaml\"\nwait = \"condition=Programmed\""),
        Action::Apply {
            file: route(),
            namespace: None,
            wait: Some(Wait {
                until: WaitFor::Condition {
                    kind: "Programmed".into(),
                    status: "True".into()
                },
                timeout: secs(60)
            }),
            probe: None,
        }
    );
    assert_eq!(
        ok("apply = \"route.yaml\"\nwait = \"condition=Ready=False\"\ntimeout = \"5s\""),
        Action::Apply {
            file: route(),
            namespace: None,
            wait: Some(Wait {
                until: WaitFor::Condition {
                    kind: "Ready".into(),
                    status: "False".into()
                },
                timeout: secs(5)
            }),
            probe: None,
        }
    );
    assert_eq!(
        ok("delete = \"route.yaml\"\nwait = \"delete\""),
        Action::Delete {
            file: route(),
            namespace: None,
            wait: Some(Wait {
                until: WaitFor::Deleted,
                timeout: secs(60)
            }),
            probe: None,
        }
    );
    bad(
        "apply = \"route.yaml\"\nwait = \"Available\"",
        "apply: wait = \"Available\" is not condition=TYPE[=STATUS]",
    );
    bad(
        "apply = \"route.yaml\"\nwait = \"condition=\"",
        "a condition is condition=TYPE",
    );
    bad(
        "delete = \"route.yaml\"\nwait = \"condition=Available\"",
        "delete: wait = \"condition=Available\": a delete waits for \"delete\"",
    );
    bad(
        "rollout_restart = \"deployment/web\"\nwait = \"delete\"",
        "`wait` belongs to an `apply` or `delete` action",
    );
    bad(
        "apply = \"route.yaml\"\ntimeout = \"5s\"",
        "`timeout` belongs to an `exec` action, or to an `apply` or `delete` with `wait`",
    );
    bad("apply = \"missing.yaml\"", "apply: ");
    bad("apply = \"missing.yaml\"", "missing.yaml");
    bad("delete = \"\"", "delete: the manifest path is empty");
    bad(
        "rollout_restart = \"web\"",
        "rollout_restart: 'web' is not KIND/NAME",
    );
    bad(
        "rollout_restart = \"pod/web\"",
        "rollout_restart: kind 'pod' is not one of",
    );
    bad(
        "rollout_restart = \"deployment/Web\"",
        "rollout_restart: name 'Web'",
    );
    bad(
        "delete_pod = { selector = \"app=x\", count = 0 }",
        "`count` must be at least 1",
    );
    bad(
        "delete_pod = { selector = \"a b\" }",
        "delete_pod: selector 'a b'",
    );
    bad(
        "delete_pod = { selector = \"app=x\", force = true }",
        "unknown field `force`",
    );
    bad(
        "delete_pod = { selector = \"app=x\", grace = \"soon\" }",
        "",
    );
    bad(
        "scale = { target = \"daemonset/x\", to = 2 }",
        "scale: kind 'daemonset' is not one of deployment, statefulset (a daemonset runs one pod \
         per node: it has no replica count)",
    );
    bad(
        "rollout_restart = \"replicaset/web\"",
        "rollout_restart: kind 'replicaset' is not one of deployment, statefulset, daemonset",
    );
    bad(
        "rollout_restart = \"Deployment/web\"",
        "rollout_restart: kind 'Deployment' is not one of",
    );
    bad(
        "scale = { target = \"job/x\", to = 2 }",
        "scale: kind 'job' is not one of deployment, statefulset",
    );
    // A namespace that is not a namespace's name, for each of the five.
    for (action, key) in [
        ("apply = \"route.yaml\"", "apply"),
        ("delete = \"route.yaml\"", "delete"),
        ("rollout_restart = \"statefulset/db\"", "rollout_restart"),
        ("delete_pod = { selector = \"app=db\" }", "delete_pod"),
        ("scale = { target = \"statefulset/db\", to = 2 }", "scale"),
    ] {
        bad(
            &format!("{action}\nnamespace = \"Data_1\""),
            &format!("{key}: namespace 'Data_1' must be 1-63 lowercase letters"),
        );
        bad(
            &format!("{action}\nnamespace = \"\""),
            "namespace '' must be",
        );
    }
    // `namespace` belongs to the cluster actions only, and inside one's table it is unknown.
    bad(
        "reload = true\nnamespace = \"data\"",
        "`namespace` belongs to a cluster action (apply, delete, rollout_restart, delete_pod, \
         scale)",
    );
    bad(
        "exec = [\"true\"]\nnamespace = \"data\"",
        "`namespace` belongs to a cluster action",
    );
    bad(
        "scale = { target = \"deployment/x\", to = 2, namespace = \"data\" }",
        "unknown field `namespace`",
    );
    bad(
        "scale = { target = \"deployment/x\" }",
        "missing field `to`",
    );
    bad(
        "scale = { target = \"deployment/x\", to = 2, step = \"0s\" }",
        "`step` must be more than 0",
    );
    // A record is analysed where its manifests may be gone.
    let gone = on("apply = \"gone.yaml\"");
    let opts = ParseOptions {
        skip_file_checks: true,
        ..ParseOptions::default()
    };
    Scenario::parse_with(&gone, false, &opts).unwrap();
}

#[test]
fn the_command_line_platform_overrides_the_file() {
    let over = |o: PlatformOverride| ParseOptions {
        platform: o,
        ..ParseOptions::default()
    };
    let src = |text: String| Source {
        file: "t.toml".into(),
        text,
    };
    let restart = format!("{BASE}\n[[actions]]\nat = \"1s\"\nrollout_restart = \"deployment/x\"\n");
    // --platform kubernetes lets a file without [platform] use the cluster actions.
    let k = PlatformOverride {
        kind: Some(PlatformKind::Kubernetes),
        namespace: Some("mine".into()),
        keep: true,
        ..PlatformOverride::default()
    };
    let s = Scenario::parse_with(&src(restart.clone()), true, &over(k)).unwrap();
    assert_eq!(s.platform.kind, PlatformKind::Kubernetes);
    assert_eq!(s.platform.namespace.as_deref(), Some("mine"));
    assert!(s.platform.keep);
    // --platform local on a kubernetes file drops the file's cluster settings, and refuses its
    // cluster actions at their line.
    let local = PlatformOverride {
        kind: Some(PlatformKind::Local),
        ..PlatformOverride::default()
    };
    let text = format!("{restart}\n[platform]\nkind = \"kubernetes\"\nnamespace = \"n\"\n");
    let e = Scenario::parse_with(&src(text.clone()), false, &over(local.clone())).unwrap_err();
    assert!(
        e.message.contains("rollout_restart needs [platform]"),
        "{e}"
    );
    let plain = text.replace("rollout_restart = \"deployment/x\"", "reload = true");
    let s = Scenario::parse_with(&src(plain), false, &over(local)).unwrap();
    assert_eq!(s.platform.kind, PlatformKind::Local);
    assert_eq!(s.platform.namespace, None);
    // Flag values are checked on their own, one line naming the flag.
    let flag = |o: PlatformOverride| o.validate().unwrap_err().to_string();
    let e = flag(PlatformOverride {
        namespace: Some("Not_A_Label".into()),
        ..PlatformOverride::default()
    });
    assert!(e.starts_with("--namespace Not_A_Label: "), "{e}");
    let e = flag(PlatformOverride {
        kind: Some(PlatformKind::Local),
        context: Some("lab".into()),
        ..PlatformOverride::default()
    });
    assert_eq!(e, "--context needs --platform kubernetes, not local");
    let e = flag(PlatformOverride {
        proxy_image: Some("a b".into()),
        ..PlatformOverride::default()
    });
    assert!(e.starts_with("--proxy-image a b: "), "{e}");
    let e = flag(PlatformOverride {
        image_pull_policy: Some("never".into()),
        ..PlatformOverride::default()
    });
    assert_eq!(
        e,
        "--image-pull-policy never: not one of Always, IfNotPresent, Never"
    );
}

#[test]
fn a_load_http_version_and_streams_are_checked() {
    // BASE ends inside its [[loads]] table, so the keys appended belong to that load.
    let e = error("http = \"3\"\n");
    assert!(
        e.message
            .contains("load 'coffee': http = \"3\" is not a version; use \"1.1\" or \"2\""),
        "{e}"
    );
    let e = error("streams = 10\n");
    assert!(
        e.message
            .contains("load 'coffee': streams = 10 needs http = \"2\""),
        "{e}"
    );
    let e = error("http = \"2\"\nstreams = 0\n");
    assert!(
        e.message
            .contains("load 'coffee': streams must be 1 to 65536, not 0"),
        "{e}"
    );
    // A number is not a version string: refused by the parser, at its line.
    let e = error("http = 2\n");
    assert_eq!(e.line, Some(after_base(1)), "{e}");
    let ok = parse(&format!("{BASE}http = \"2\"\nstreams = 10\n"), false).unwrap();
    let l = &ok.cases[0].loads[0];
    assert!(l.http2());
    assert_eq!(l.streams, Some(10));
    parse(&format!("{BASE}http = \"1.1\"\n"), true).unwrap();
}

#[test]
fn a_load_retries_idle_closed_requests_only_when_safe() {
    let refused = "load 'coffee': retry_idle_closed sends a request twice, so it is for \
                   HTTP/1.1 GET, HEAD, OPTIONS or TRACE without a body";
    for extra in [
        "retry_idle_closed = true\nmethod = \"POST\"\n",
        "retry_idle_closed = true\nbody = \"x\"\n",
        "retry_idle_closed = true\nhttp = \"2\"\n",
    ] {
        let e = error(extra);
        assert!(e.message.contains(refused), "{extra}: {e}");
    }
    let e = error("retry_idle_closed = \"yes\"\n");
    assert_eq!(e.line, Some(after_base(1)), "{e}");
    let ok = parse(&format!("{BASE}retry_idle_closed = true\n"), false).unwrap();
    assert!(ok.cases[0].loads[0].retry_idle_closed);
    let ok = parse(BASE, false).unwrap();
    assert!(!ok.cases[0].loads[0].retry_idle_closed, "off by default");
}

#[test]
fn a_platform_layer_applies_on_its_platform_only() {
    // The top-level layer and a case's own, each with a quick form of its own.
    let text = format!(
        "{BASE}
[platforms.kubernetes]
loads = [{{ name = \"coffee\", rate = \"100/s\", connections = 10 }}]
quick = {{ loads = [{{ name = \"coffee\", duration = \"3s\" }}] }}

[[cases]]
name = \"plain\"

[[cases]]
name = \"busy\"
platforms = {{ kubernetes = {{ loads = [{{ name = \"coffee\", rate = \"500/s\" }}] }} }}
"
    );
    let src = Source {
        file: "t.toml".into(),
        text,
    };
    let on = |kind: Option<PlatformKind>, quick: bool| {
        let opts = ParseOptions {
            platform: PlatformOverride {
                kind,
                ..PlatformOverride::default()
            },
            ..ParseOptions::default()
        };
        Scenario::parse_with(&src, quick, &opts).unwrap()
    };
    let load = |s: &Scenario, case: usize| {
        let l = &s.cases[case].loads[0];
        (l.rate.map(|r| r.0), l.connections, l.duration.map(|d| d.0))
    };
    let secs = |s| Some(std::time::Duration::from_secs(s));
    let local = on(None, false);
    assert_eq!(load(&local, 0), (None, 10, secs(10)));
    assert_eq!(load(&local, 1), (None, 10, secs(10)));
    let kube = on(Some(PlatformKind::Kubernetes), false);
    assert_eq!(load(&kube, 0), (Some(100.0), 10, secs(10)));
    // The case's layer wins over the top-level one.
    assert_eq!(load(&kube, 1), (Some(500.0), 10, secs(10)));
    let kube_quick = on(Some(PlatformKind::Kubernetes), true);
    assert_eq!(load(&kube_quick, 0), (Some(100.0), 10, secs(3)));
    assert_eq!(
        on(None, true).cases[0].loads[0].duration.map(|d| d.0),
        secs(10)
    );
}

#[test]
fn a_mistake_in_a_platform_layer_is_found_on_every_platform() {
    // Found by a local run although the layer applies only on Kubernetes.
    let e = error("\n[platforms.kubernetes]\nloads = [{ name = \"coffee\", rate = \"fast\" }]\n");
    assert_eq!(e.line, Some(after_base(3)), "{e}");
    assert!(e.message.contains("on kubernetes"), "{e}");
    let e = error("\n[platforms.nomad]\nsettle = \"1s\"\n");
    assert_eq!(e.line, Some(after_base(2)), "{e}");
    assert!(
        e.message
            .contains("platforms.nomad: not a platform (known: local, kubernetes)"),
        "{e}"
    );
    let e = error("\n[[cases]]\nname = \"a\"\nplatforms = { kubernetes = 3 }\n");
    assert!(e.message.contains("`kubernetes` must be a table"), "{e}");
}

#[test]
fn a_load_on_agents_is_checked_at_its_agents_line() {
    // BASE's load has 10 connections and 10 s of closed loop; the key is its line 1 after BASE.
    for (extra, want) in [
        ("agents = 0\n", "load 'coffee': agents must be at least 1"),
        (
            "agents = 300\n",
            "load 'coffee': agents = 300 is more than 256",
        ),
        (
            "agents = 11\n",
            "load 'coffee': agents = 11 needs at least 11 connections (it has 10)",
        ),
        (
            "requests = 2\nagents = 3\n",
            "load 'coffee': agents = 3 needs at least 3 requests (it has 2)",
        ),
        (
            "rate = \"12r/m\"\nagents = 3\n",
            "load 'coffee': agents = 3 would share only 2 requests (rate 0.2/s for 10s)",
        ),
    ] {
        let e = error(extra);
        let line = after_base(extra.lines().count());
        assert_eq!(e.line, Some(line), "{extra}: {e}");
        assert!(e.message.contains(want), "{extra}: {e}");
        assert_eq!(e.to_string().lines().count(), 1, "{e}");
        assert!(
            e.to_string().starts_with(&format!("t.toml:{line}: ")),
            "{e}"
        );
    }
    // Not a number: refused by the parser at its line.
    let e = error("agents = \"three\"\n");
    assert_eq!(e.line, Some(after_base(1)), "{e}");
    // A --quick layer's value is checked too, at the line that wrote it.
    let text = format!(
        "{BASE}agents = 2\n\n[quick]\nloads = [\n  {{ name = \"coffee\", agents = 0 }},\n]\n"
    );
    let e = parse(&text, true).expect_err("the quick form sets agents = 0");
    assert_eq!(e.line, Some(after_base(5)), "{e}");
    assert!(e.message.contains("agents must be at least 1"), "{e}");
    // Valid: the load knows its agents, on either platform.
    let ok = parse(&format!("{BASE}agents = 3\n"), false).unwrap();
    assert_eq!(ok.cases[0].loads[0].agent_count(), Some(3));
    assert_eq!(
        parse(BASE, false).unwrap().cases[0].loads[0].agent_count(),
        None
    );
}

#[test]
fn proxy_cpus_are_a_cpu_list_for_this_machine_only() {
    let with = |v: &str| BASE.replacen("[proxy]\n", &format!("[proxy]\ncpus = \"{v}\"\n"), 1);
    let scn = parse(&with("1,0-1"), false).unwrap();
    let cpus = scn.cases[0].proxy.as_ref().unwrap().cpus.as_ref().unwrap();
    assert_eq!(cpus.list(), &[0, 1]);
    assert_eq!(cpus.to_string(), "0-1");

    // A list that is no list: refused at its own line, saying what is wrong.
    let text = with("3-1");
    let e = parse(&text, false).expect_err("a backwards range");
    assert_eq!(e.line, Some(9), "{e}");
    assert!(e.message.contains("runs backwards"), "{e}");
    assert_eq!(e.to_string().lines().count(), 1, "{e}");

    // On a cluster the pods' resources place the proxy, so pinning is refused, not ignored.
    let e = parse(
        &format!("{}\n[platform]\nkind = \"kubernetes\"\n", with("1")),
        false,
    )
    .expect_err("cpus on kubernetes");
    assert!(
        e.message.contains("proxy.cpus") && e.message.contains("kubernetes"),
        "{e}"
    );
    assert!(e.line.is_some(), "{e}");
}

#[test]
fn a_cluster_via_is_checked_against_the_platform_its_service_and_listeners() {
    use proxybench_scenario::Via;
    let load = |via: &str, url: &str| {
        format!("\n[[loads]]\nname = \"b\"\nurl = \"{url}\"\nduration = \"1s\"\nvia = \"{via}\"\n")
    };
    // Refused at the load's line: locally (no cluster gives the address), a port that is not
    // a listener, a Service type without a nodePort or a load balancer, no Service name.
    for (text, want) in [
        (
            format!("{BASE}{}", load("node-port:http", "http://x/")),
            "load 'b' goes via 'node-port:http', an address the Kubernetes API gives: run it \
             with --platform kubernetes (or [platform] kind = \"kubernetes\")",
        ),
        (
            kube(&load("service:proxy:nope", "http://x/")),
            "load 'b' goes via 'service:proxy:nope': the proxy's Service has no port 'nope' \
             (its ports are its listeners: http)",
        ),
        (
            kube(&load("node-port:http", "http://x/")),
            "load 'b' goes via 'node-port:http', but the proxy's Service is of type ClusterIP \
             ([platform] service_type); it needs NodePort or LoadBalancer",
        ),
        (
            kube(&load("load-balancer:http", "http://x/")).replace(
                "kind = \"kubernetes\"",
                "kind = \"kubernetes\"\nservice_type = \"NodePort\"",
            ),
            "load 'b' goes via 'load-balancer:http', but the proxy's Service is of type \
             NodePort ([platform] service_type); it needs LoadBalancer",
        ),
        (
            kube(&load("service:", "http://x/")),
            "load 'b': via 'service:' names no Service (service:NAME[:PORT])",
        ),
        (
            kube(&load("service:proxy:http", "https://x/")),
            "load 'b': listener 'http' is HTTP but the url is https",
        ),
    ] {
        let e = parse(&text, false).expect_err(want);
        assert_eq!(e.line, Some(after_base(2)), "{e}");
        assert_eq!(e.message, want);
    }
    // Accepted: another Service by name and port number (checked on the cluster), and the
    // proxy's NodePort when its Service has one.
    let text = kube(&format!(
        "{}{}",
        load("service:gateway:8443", "http://x/"),
        load("node-port:http", "http://y/").replace("\"b\"", "\"c\"")
    ))
    .replace(
        "kind = \"kubernetes\"",
        "kind = \"kubernetes\"\nservice_type = \"NodePort\"",
    );
    let scn = parse(&text, false).unwrap();
    let vias: Vec<_> = scn.cases[0].loads.iter().map(|l| l.via.clone()).collect();
    assert_eq!(
        vias,
        [
            None,
            Some(Via::Service("gateway".into(), Some("8443".into()))),
            Some(Via::NodePort("http".into()))
        ]
    );
    assert_eq!(
        vias[1].as_ref().unwrap().to_string(),
        "service:gateway:8443"
    );
}

#[test]
fn placement_tolerations_and_requests_are_read_and_their_mistakes_refused_at_their_line() {
    let scn = parse(
        &BASE.replacen(
            "\n[[backends]]",
            "\n[platform]\nkind = \"kubernetes\"\n\
             node_selector = { pool = \"bench\", \"kubernetes.io/os\" = \"linux\" }\n\
             tolerations = [{ key = \"dedicated\", value = \"bench\", effect = \"NoSchedule\" }, \
             { operator = \"Exists\" }, { key = \"gone\", operator = \"Exists\", effect = \
             \"NoExecute\", toleration_seconds = 30 }]\n\
             requests = { proxy = { cpu = \"500m\", memory = \"128Mi\" }, backend = { cpu = \"0.05\" } }\n\
             \n[[backends]]",
            1,
        ),
        true,
    )
    .unwrap();
    let p = &scn.platform;
    assert_eq!(p.node_selector.len(), 2);
    assert_eq!(p.node_selector["pool"], "bench");
    assert_eq!(p.tolerations.len(), 3);
    assert_eq!(p.tolerations[0].operator, "Equal", "the API's default");
    assert_eq!(p.tolerations[0].value.as_deref(), Some("bench"));
    assert_eq!(p.tolerations[1].key, None);
    assert_eq!(p.tolerations[2].toleration_seconds, Some(30));
    assert_eq!(p.requests["proxy"].cpu.as_deref(), Some("500m"));
    assert_eq!(p.requests["proxy"].memory.as_deref(), Some("128Mi"));
    assert_eq!(p.requests["backend"].memory, None);

    let bad = |table: &str, line: usize, needle: &str| {
        let e = error(&format!("\n[platform]\n{table}\n"));
        assert_eq!(e.line, Some(after_base(line)), "{table}: {e}");
        assert!(e.message.contains(needle), "{table}: {e}");
        assert_eq!(e.to_string().lines().count(), 1, "{e}");
    };
    bad(
        "kind = \"kubernetes\"\nnode_selector = { \"bad key\" = \"x\" }",
        4,
        "platform.node_selector: 'bad key' = 'x' is not a label key and value",
    );
    bad(
        "kind = \"kubernetes\"\ntolerations = [{ key = \"a\", operator = \"Maybe\" }]",
        4,
        "platform.tolerations: operator 'Maybe' is not one of Equal, Exists",
    );
    bad(
        "kind = \"kubernetes\"\ntolerations = [{ value = \"x\" }]",
        4,
        "operator Equal needs a key",
    );
    bad(
        "kind = \"kubernetes\"\ntolerations = [{ key = \"a\", operator = \"Exists\", value = \"x\" }]",
        4,
        "operator Exists takes no value",
    );
    bad(
        "kind = \"kubernetes\"\ntolerations = [{ key = \"a\", effect = \"NoRun\" }]",
        4,
        "effect 'NoRun' is not one of NoSchedule, PreferNoSchedule, NoExecute",
    );
    bad(
        "kind = \"kubernetes\"\ntolerations = [{ key = \"a\", toleration_seconds = 5 }]",
        4,
        "toleration_seconds goes with effect NoExecute only",
    );
    bad(
        "kind = \"kubernetes\"\ntolerations = [{ key = \"a\", colour = \"x\" }]",
        4,
        "unknown field `colour`",
    );
    bad(
        "kind = \"kubernetes\"\nrequests = { proxy = { cpu = \"lots\" } }",
        4,
        "platform.requests.proxy: cpu 'lots': not a Kubernetes quantity",
    );
    bad(
        "kind = \"kubernetes\"\nrequests = { gateway = { cpu = \"1\" } }",
        4,
        "platform.requests.gateway: not a pod role: one of proxy, backend, agent, check",
    );
    bad(
        "node_selector = { pool = \"bench\" }",
        3,
        "platform.node_selector needs [platform] kind = \"kubernetes\"",
    );
}

/// An external gateway on Kubernetes, for `probe` and templated growth: lines 1-15, then the
/// action at 16 (`[[actions]]`, `at`, then the action and its keys from line 18).
fn gateway(action: &str) -> String {
    format!(
        r#"name = "gw"

[platform]
kind = "kubernetes"

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
{action}
"#
    )
}

#[test]
fn probes_and_templated_growths_are_checked_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("route.yaml"), "kind: ConfigMap\n").unwrap();
    let good = "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: \
                {{ name }}\n  namespace: {{ namespace }}\nspec:\n  rules:\n  - matches:\n    - \
                path: { type: Exact, value: /r{{ i }} }\n";
    std::fs::write(dir.path().join("route.yaml.j2"), good).unwrap();
    // Item 7 renders an unknown variable at the template's line 4.
    std::fs::write(
        dir.path().join("bad.yaml.j2"),
        good.replace(
            "{{ name }}",
            "{% if i == 7 %}{{ nope }}{% else %}{{ name }}{% endif %}",
        ),
    )
    .unwrap();
    // Item 3 renders YAML that does not parse.
    std::fs::write(
        dir.path().join("yaml.yaml.j2"),
        good.replace("{{ name }}", "{{ name }}{% if i == 3 %}: [{% endif %}"),
    )
    .unwrap();
    let file = dir.path().join("s.toml");
    let parse = |action: &str| {
        Scenario::parse(
            &Source {
                file: file.display().to_string(),
                text: gateway(action),
            },
            false,
        )
    };
    let step = |action: &str| {
        parse(action)
            .unwrap_or_else(|e| panic!("{action}: {e}"))
            .cases[0]
            .steps[0]
            .action
            .clone()
    };
    let probe = "probe = { selector = \"app=gw\", namespace = \"gw\", port = 8080, host = \
                 \"r7.example\", path = \"/r7\", consecutive = 5, every = \"2ms\", timeout = \
                 \"20s\" }";
    match step(&format!(
        "apply = \"route.yaml\"\nwait = \"condition=Accepted\"\n{probe}"
    )) {
        Action::Apply {
            probe: Some(p),
            wait: Some(_),
            ..
        } => {
            assert_eq!(
                (p.selector.as_deref(), p.namespace.as_deref(), p.port),
                (Some("app=gw"), Some("gw"), Some(8080))
            );
            assert_eq!(
                (p.host.as_deref(), p.path.as_str()),
                (Some("r7.example"), "/r7")
            );
            assert_eq!(
                (p.scheme.as_str(), p.status, p.expected(), p.consecutive),
                ("http", None, 200, 5)
            );
            assert_eq!(
                (p.every.0, p.timeout.0),
                (
                    std::time::Duration::from_millis(2),
                    std::time::Duration::from_secs(20)
                )
            );
        }
        other => panic!("{other:?}"),
    }
    // The defaults: /, http, 200, 3 in a row, every 1 ms, 30 s.
    match step(
        "delete = \"route.yaml\"\nprobe = { selector = \"app=gw\", port = 80, status = 404 }",
    ) {
        Action::Delete { probe: Some(p), .. } => {
            assert_eq!((p.path.as_str(), p.scheme.as_str()), ("/", "http"));
            assert_eq!((p.expected(), p.consecutive), (404, 3));
            assert_eq!(p.request_path(), "/");
        }
        other => panic!("{other:?}"),
    }
    // A gRPC probe: a unary call whose answer is a gRPC code (OK by default), to the
    // backend's method when the path is `/`.
    match step(
        "apply = \"route.yaml\"\nprobe = { selector = \"app=gw\", port = 80, scheme = \"grpc\" }",
    ) {
        Action::Apply { probe: Some(p), .. } => {
            assert!(p.grpc());
            assert_eq!(
                (p.expected(), p.request_path()),
                (0, proxybench_scenario::GRPC_PROBE_METHOD)
            );
        }
        other => panic!("{other:?}"),
    }
    match step("delete = \"route.yaml\"\nprobe = { selector = \"app=gw\", port = 80, scheme = \"grpcs\", status = 12, path = \"/a.B/C\" }") {
        Action::Delete { probe: Some(p), .. } => {
            assert_eq!((p.expected(), p.request_path()), (12, "/a.B/C"));
            assert_eq!(p.every.0, std::time::Duration::from_millis(1));
            assert_eq!(p.timeout.0, std::time::Duration::from_secs(30));
        }
        other => panic!("{other:?}"),
    }
    let bad = |action: &str, line: usize, needle: &str| {
        let e = parse(action).expect_err(action);
        assert!(e.line == Some(line) || e.line == Some(18), "{action}: {e}");
        assert!(e.message.contains(needle), "{action}: {e}");
        assert_eq!(e.to_string().lines().count(), 1, "{e}");
        assert!(e.to_string().contains("s.toml:"), "{e}");
    };
    bad(
        "apply = \"route.yaml\"\nprobe = { port = 80 }",
        16,
        "apply: probe.selector is needed",
    );
    bad(
        "apply = \"route.yaml\"\nprobe = { selector = \"app=gw\" }",
        16,
        "probe.port is needed",
    );
    bad(
        "apply = \"route.yaml\"\nprobe = { selector = \"a b\", port = 1 }",
        16,
        "probe.selector 'a b'",
    );
    bad(
        "apply = \"route.yaml\"\nprobe = { selector = \"a\", port = 1, scheme = \"ftp\" }",
        16,
        "probe.scheme 'ftp' is not http, https, grpc or grpcs",
    );
    bad(
        "apply = \"route.yaml\"\nprobe = { selector = \"a\", port = 1, scheme = \"grpc\", status = 200 }",
        16,
        "probe.status 200 is not a gRPC status code (0 to 16) for a grpc probe",
    );
    bad(
        "apply = \"route.yaml\"\nprobe = { selector = \"a\", port = 1, status = 12 }",
        16,
        "probe.status 12 is not an HTTP status (100 to 599)",
    );
    bad(
        "apply = \"route.yaml\"\nprobe = { selector = \"a\", port = 1, consecutive = 0 }",
        16,
        "probe.consecutive must be at least 1",
    );
    bad(
        "apply = \"route.yaml\"\nprobe = { selector = \"a\", port = 1, path = \"x\" }",
        16,
        "does not start with '/'",
    );
    bad(
        "apply = \"route.yaml\"\nprobe = { selector = \"a\", port = 1, every = \"5s\", timeout = \"1s\" }",
        16,
        "probe.every (5s) is longer than probe.timeout (1s)",
    );
    bad(
        "apply = \"route.yaml\"\nprobe = { selector = \"a\", port = 1, colour = 1 }",
        19,
        "unknown field `colour`",
    );
    bad(
        "exec = [\"true\"]\nprobe = { selector = \"a\", port = 1 }",
        16,
        "`probe` belongs to an `apply`, `delete`, `rollout_restart` or `scale` action",
    );
    // A templated growth: every item rendered now, a probe required, the template's line and
    // the item named.
    let grow = |t: &str, more: &str| {
        format!(
            "grow = {{ what = \"routes\", template = \"{t}\", to = 50, wait = \
             \"condition=Accepted\", probe = {{ selector = \"app=gw\", port = 8080, path = \
             \"/r{{{{ i }}}}\" }}{more} }}"
        )
    };
    match step(&grow("route.yaml.j2", "")) {
        Action::Grow(g) => {
            assert_eq!(
                g.template.as_deref(),
                Some(dir.path().join("route.yaml.j2").to_str().unwrap())
            );
            assert_eq!(g.probe.unwrap().path, "/r{{ i }}");
        }
        other => panic!("{other:?}"),
    }
    // Without a template engine (ParseOptions::templates, proxybench-manifests) the items
    // are not rendered: a template that does not render is the engine's to refuse
    // (crates/manifests/tests/parse_templates.rs), a missing file the language's.
    for t in ["bad.yaml.j2", "yaml.yaml.j2"] {
        assert!(matches!(step(&grow(t, "")), Action::Grow(_)));
    }
    bad(&grow("none.yaml.j2", ""), 16, "none.yaml.j2");
    bad(
        &grow("route.yaml.j2", "").replace(
            ", probe = { selector = \"app=gw\", port = 8080, path = \"/r{{ i }}\" }",
            "",
        ),
        16,
        "a templated growth needs a `probe`",
    );
    bad(
        &grow("route.yaml.j2", "").replace("condition=Accepted", "Accepted"),
        16,
        "is not condition=TYPE[=STATUS]",
    );
    // A built-in generator: no `template`, its keys checked, every item rendered now.
    let builtin = "grow = { what = \"routes\", to = 5, gateway = \"infra/gw\", backend_ref = \
                   \"gw:8080\", hostname = \"r{{ i }}.example\", probe = { selector = \
                   \"app=gw\", port = 8080 } }";
    match step(builtin) {
        Action::Grow(g) => {
            assert_eq!(g.template.as_deref(), Some("builtin:routes"));
            assert_eq!(
                g.probe.unwrap().host.as_deref(),
                Some("{{ hostnames[i] }}"),
                "the probe asks each item's hostname"
            );
        }
        other => panic!("{other:?}"),
    }
    // GRPCRoutes: the same generator keys; the probe becomes a gRPC call (over TLS for an
    // https probe), answered OK by default, to the backend's method.
    let grpc = builtin.replace("\"routes\"", "\"grpc_routes\"");
    match step(&grpc) {
        Action::Grow(g) => {
            assert_eq!(g.template.as_deref(), Some("builtin:grpc_routes"));
            let p = g.probe.unwrap();
            assert_eq!(
                (p.scheme.as_str(), p.expected(), p.request_path()),
                ("grpc", 0, proxybench_scenario::GRPC_PROBE_METHOD)
            );
        }
        other => panic!("{other:?}"),
    }
    match step(&grpc.replace("port = 8080 }", "port = 8443, scheme = \"https\" }")) {
        Action::Grow(g) => assert_eq!(g.probe.unwrap().scheme, "grpcs"),
        other => panic!("{other:?}"),
    }
    bad(
        &grpc.replace("port = 8080 }", "port = 8080, status = 200 }"),
        16,
        "grpc_routes are probed with a gRPC call, whose answer is a gRPC code",
    );
    // The probe sees the generator's parameters: a matches growth probes its newest match.
    let matches = "grow = { what = \"matches\", to = 3, gateway = \"gw\", backend_ref = \
                   \"gw:8080\", path = \"/m\", probe = { selector = \"app=gw\", port = 8080, \
                   path = \"{{ path }}{{ i }}\" } }";
    match step(matches) {
        Action::Grow(g) => assert_eq!(g.template.as_deref(), Some("builtin:matches")),
        other => panic!("{other:?}"),
    }
    bad(
        "grow = { what = \"routes\", to = 5 }",
        16,
        "the built-in routes generator needs `gateway`",
    );
    bad(
        &builtin.replace("backend_ref", "backend"),
        16,
        "backend 'gw:8080' is not a backend group of the run",
    );
    bad(
        &builtin.replace("hostname =", "colour = 1, hostname ="),
        16,
        "unknown field `colour`",
    );
    bad(
        &grow("route.yaml.j2", ", gateway = \"gw\""),
        16,
        "`gateway` belongs to a built-in generator (no `template`)",
    );
    bad(
        "grow = { what = \"upstream_servers\", to = 5 }",
        16,
        "upstream_servers behind an external gateway needs `backend`",
    );
    bad(
        "grow = { what = \"upstream_servers\", to = 5, backend = \"tea\" }",
        16,
        "backend 'tea' is not a backend group of the run",
    );
    bad(
        "grow = { what = \"upstream_servers\", to = 5, group = \"tea\" }",
        16,
        "backend 'tea' is not a backend group of the run",
    );
    // An `apply` or `delete` of a `.j2` file is a template, rendered by the engine when
    // there is one; without, it is a manifest that must exist.
    std::fs::write(dir.path().join("svc.yaml.j2"), "kind: x\n").unwrap();
    match step("apply = \"svc.yaml.j2\"") {
        Action::Apply { file, .. } => assert!(file.ends_with("svc.yaml.j2"), "{file:?}"),
        other => panic!("{other:?}"),
    }
    bad("delete = \"gone.yaml.j2\"", 16, "gone.yaml.j2");
}
