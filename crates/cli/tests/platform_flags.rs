//! `proxybench run`'s platform flags: a bad value, or a cluster flag on the local platform, is
//! one line naming the flag, exit 2, before anything is written; a cluster action in a scenario
//! run locally is refused at its line.

use std::path::Path;
use std::process::{Command, Output};

/// Runs `proxybench run ARGS --results ROOT`.
fn run(root: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_proxybench"))
        .args(["run", "--no-progress", "--quick", "--results"])
        .arg(root)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn bad_platform_flags_are_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r");
    let cases: &[(&[&str], &str)] = &[
        (
            &["--platform", "nomad"],
            "--platform nomad: not one of local, kubernetes",
        ),
        (
            &["--platform", "local", "--namespace", "x"],
            "--namespace needs --platform kubernetes, not local",
        ),
        (
            &["--platform", "kubernetes", "--namespace", "Not_A_Label"],
            "--namespace Not_A_Label: must be 1-63 lowercase letters",
        ),
        (
            &["--context", "lab"],
            "--context needs --platform kubernetes (scenario 'default' runs on local)",
        ),
        (
            &["--keep"],
            "--keep needs --platform kubernetes (scenario 'default' runs on local)",
        ),
        (
            &["--platform", "kubernetes", "--proxy-image", "a b"],
            "--proxy-image a b: an image reference has no spaces",
        ),
        (
            &["--platform", "kubernetes", "--nginx-image", ""],
            "--proxy-image : an image reference has no spaces",
        ),
        (
            &["--platform", "kubernetes", "--image", "x y"],
            "--image x y: an image reference has no spaces",
        ),
        (
            &["--platform", "kubernetes", "--context", ""],
            "--context: the context name is empty",
        ),
    ];
    for (args, want) in cases {
        let mut all = args.to_vec();
        all.push("default");
        let out = run(&root, &all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with(&format!("proxybench: {want}")),
            "{args:?}: {err}"
        );
    }
    assert!(!root.exists(), "{} was created", root.display());
}

#[test]
fn a_cluster_action_run_locally_is_refused_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let default = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/default.toml"),
    )
    .unwrap();
    let mut text = default.replace("name = \"default\"", "name = \"k\"");
    let line = text.lines().count() + 2;
    text.push_str("\n[[actions]]\nat = \"1s\"\nrollout_restart = \"deployment/web\"\n");
    let file = dir.path().join("k.toml");
    std::fs::write(&file, &text).unwrap();
    let root = dir.path().join("r");
    let out = run(&root, &[file.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    // (default's `[quick]` replaces its actions, so the full form is the one refused.)
    assert_eq!(
        err.trim_end(),
        format!(
            "proxybench: {}:{line}: in the full form: rollout_restart needs [platform] kind = \"kubernetes\" (or `run --platform kubernetes`)",
            file.display()
        )
    );
    // The same file with a manifest that is not there, on Kubernetes: the path at its line.
    let text = text.replace(
        "rollout_restart = \"deployment/web\"",
        "apply = \"routes.yaml\"",
    );
    std::fs::write(&file, &text).unwrap();
    let out = run(&root, &["--platform", "kubernetes", file.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let want = format!(
        "proxybench: {}:{line}: in the full form: apply: {}: ",
        file.display(),
        dir.path().join("routes.yaml").display()
    );
    assert!(err.starts_with(&want), "{err}");
    assert!(!root.exists(), "{} was created", root.display());
}

#[test]
fn a_cluster_that_cannot_be_reached_leaves_no_results_directory() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r");
    let kubeconfig = dir.path().join("missing.kubeconfig");
    let out = run(
        &root,
        &[
            "--platform",
            "kubernetes",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "default",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("proxybench: ") && err.contains("missing.kubeconfig"),
        "the error names the kubeconfig: {err}"
    );
    assert!(!root.exists(), "{} was created", root.display());
}

#[test]
fn load_agents_flags_are_checked_in_one_line_before_any_cluster_is_asked() {
    let url = "http://127.0.0.1:9/";
    let cases: &[(&[&str], &str)] = &[
        (
            &["--agents", "3"],
            "--agents needs --platform kubernetes (agents you started yourself: --agent-hosts)",
        ),
        (
            &["--agents", "3", "--platform", "local"],
            "--agents needs --platform kubernetes",
        ),
        (
            &["--platform", "kubernetes"],
            "--platform kubernetes needs --agents N (without agents the load runs on this machine)",
        ),
        (
            &["--namespace", "x"],
            "--namespace goes with --agents N --platform kubernetes",
        ),
        (
            &["--keep"],
            "--keep goes with --agents N --platform kubernetes",
        ),
        (
            &["--agents-timeout", "5s"],
            "--agents-timeout goes with --agents",
        ),
        (
            &["--agents", "3", "--agent-hosts", "127.0.0.1:1"],
            "the argument '--agents <N>' cannot be used with '--agent-hosts <H:P,...>'",
        ),
        (
            &["--agents", "0", "--platform", "kubernetes"],
            "--agents must be at least 1",
        ),
        (
            &[
                "--agents",
                "2",
                "--platform",
                "kubernetes",
                "--token-file",
                "t",
            ],
            "--token-file goes with --agent-hosts (--agents makes its own token)",
        ),
        (
            &[
                "--agents",
                "2",
                "--platform",
                "kubernetes",
                "--agents-timeout",
                "0s",
            ],
            "--agents-timeout must be positive",
        ),
        (
            &["--agents", "11", "--platform", "kubernetes"],
            "-c/--connections (10) must be at least the number of agents (11)",
        ),
        (
            &[
                "--agents",
                "3",
                "--platform",
                "kubernetes",
                "-R",
                "2",
                "-d",
                "1s",
            ],
            "the load has only 2 requests (-R 2 for 1s) for 3 agents",
        ),
        (
            &[
                "--agents",
                "2",
                "--platform",
                "kubernetes",
                "--image",
                "a b",
            ],
            "--image a b: an image reference has no spaces",
        ),
        (
            &[
                "--agents",
                "2",
                "--platform",
                "kubernetes",
                "--timeline",
                "t.csv",
            ],
            "--timeline and --hdr-log are for a local run; with --agents use --save-agents",
        ),
    ];
    for (args, want) in cases {
        // A kubeconfig that does not exist: none of these may get as far as reading it.
        let out = Command::new(env!("CARGO_BIN_EXE_proxybench"))
            .arg("load")
            .args(*args)
            .arg(url)
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with(&format!("proxybench: {want}")),
            "{args:?}: {err}"
        );
    }
}

/// `proxybench k8s rbac ARGS`.
fn rbac(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_proxybench"))
        .args(["k8s", "rbac", "--service-account", "bench"])
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn k8s_rbac_scenario_adds_what_the_scenario_does_elsewhere_and_refuses_a_bad_file_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("route.yaml"),
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: r\n",
    )
    .unwrap();
    let good = "name = \"r\"\n\n[platform]\nkind = \"kubernetes\"\n\n[[backends]]\nname = \
                \"cafe\"\n\n[proxy]\n\n[[proxy.listeners]]\nname = \"http\"\n\n\
                [[proxy.upstreams]]\nname = \"cafe\"\nbackends = \"cafe\"\n\n\
                [[proxy.routes]]\npath = \"/\"\nupstream = \"cafe\"\n\n[[loads]]\nname = \
                \"l\"\nurl = \"http://x.example/\"\nduration = \"10s\"\n\n[[actions]]\nat = \
                \"1s\"\nrollout_restart = \"deployment/gw\"\nnamespace = \"gw\"\n\n\
                [[actions]]\nat = \"2s\"\napply = \"route.yaml\"\n";
    let s = dir.path().join("s.toml");
    std::fs::write(&s, good).unwrap();
    let out = rbac(&["--namespace", "team", "--scenario", s.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The run's Role gains the route's kind; namespace gw gets a Role of its own with the
    // restart's rules, bound to the same ServiceAccount.
    assert!(
        text.contains(
            "# case main: apply route.yaml at 2s\n- apiGroups: [\"gateway.networking.k8s.io\"]\n  \
             resources: [\"httproutes\"]"
        ),
        "{text}"
    );
    assert!(
        text.contains("kind: Role\nmetadata:\n  name: proxybench-run-team\n  namespace: gw\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "# case main: rollout_restart deployment/gw at 1s\n- apiGroups: [\"apps\"]\n  \
             resources: [\"deployments\"]\n  verbs: [\"get\", \"list\", \"watch\", \"patch\"]"
        ),
        "{text}"
    );
    // Without --scenario: today's Role, no other namespace.
    let plain = rbac(&["--namespace", "team"]);
    assert!(!String::from_utf8_lossy(&plain.stdout).contains("namespace: gw"));
    // A bad scenario: its file and line, one line, exit 2.
    std::fs::write(
        &s,
        good.replace("namespace = \"gw\"", "namespace = \"Not_A_Label\""),
    )
    .unwrap();
    let out = rbac(&["--namespace", "team", "--scenario", s.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("s.toml:27:"), "{err}");
    assert!(err.contains("namespace 'Not_A_Label'"), "{err}");
}
