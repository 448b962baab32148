//! `proxybench check FILE|NAME [--platform kubernetes] [--proxy KINDS]`: every shipped scenario is
//! valid on both platforms, each kind named by --proxy checks it with its own checker, a bad one
//! is refused at its `file:line` with exit 2, and nothing is started or written (no results
//! directory, no process left behind).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

/// Runs `proxybench check ARGS` in `cwd`.
fn check(cwd: &Path, args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_proxybench"))
        .arg("check")
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap()
}

/// The repository's scenarios/ directory.
fn shipped_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios")
}

/// Every `scenarios/*.toml`, sorted.
fn shipped() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(shipped_dir())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    files
}

/// The number of `[[cases]]` a scenario file holds (1 when it has none: the file is its case).
fn cases_in(text: &str) -> usize {
    text.lines()
        .filter(|l| l.trim() == "[[cases]]")
        .count()
        .max(1)
}

#[test]
fn every_shipped_scenario_passes_on_both_platforms() {
    let cwd = tempfile::tempdir().unwrap();
    let files = shipped();
    // The catalogue's six and the external example at least: a glob that found nothing would
    // pass vacuously.
    assert!(files.len() >= 7, "{files:?}");
    for file in &files {
        let text = fs::read_to_string(file).unwrap();
        let stem = file.file_stem().unwrap().to_str().unwrap();
        let builtin = scenario::catalogue::builtin(stem).is_some();
        let mut targets = vec![file.to_str().unwrap().to_string()];
        if builtin {
            targets.push(stem.to_string());
        }
        // A recipe for a gateway on a cluster (its [platform] is Kubernetes, its loads go
        // through the gateway's Gateway) has no local form to check.
        let cluster_only = text.contains("\nkind = \"kubernetes\"");
        let platforms: &[Option<&str>] = if cluster_only {
            &[None, Some("kubernetes")]
        } else {
            &[None, Some("kubernetes"), Some("local")]
        };
        for target in &targets {
            for &platform in platforms {
                let mut args = vec![target.as_str()];
                if let Some(p) = platform {
                    args.extend(["--platform", p]);
                }
                let out = check(cwd.path(), &args);
                let stdout = String::from_utf8_lossy(&out.stdout);
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert_eq!(out.status.code(), Some(0), "{args:?}: {stdout}{stderr}");
                assert!(stderr.is_empty(), "{args:?}: {stderr}");
                assert_eq!(stdout.lines().count(), 1, "{args:?}: {stdout}");
                let n = cases_in(&text);
                let shown = if builtin && target == stem {
                    format!("<builtin>/{stem}.toml")
                } else {
                    target.clone()
                };
                let want = format!(
                    "ok: {shown}: scenario '{stem}', {n} case{} (full and --quick forms), \
                     platform {}; ",
                    if n == 1 { "" } else { "s" },
                    platform.unwrap_or(if cluster_only { "kubernetes" } else { "local" }),
                );
                assert!(stdout.starts_with(&want), "{args:?}: {stdout}\nwant {want}");
            }
        }
    }
    // Nothing was written where it ran: no results directory, no scratch left behind.
    assert_eq!(fs::read_dir(cwd.path()).unwrap().count(), 0);
}

#[test]
fn the_summary_counts_the_configs_and_names_their_checkers() {
    let cwd = tempfile::tempdir().unwrap();
    // default: one case, one [proxy], no [configs]; both forms checked, so 2 configs.
    let out = check(cwd.path(), &["default"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim_end(),
        "ok: <builtin>/default.toml: scenario 'default', 1 case (full and --quick forms), \
         platform local; 2 proxy configs checked by nginx -t"
    );
}

#[test]
fn with_proxy_each_kind_checks_the_scenario_as_run_proxy_would_run_it() {
    let cwd = tempfile::tempdir().unwrap();
    // Both forms once per kind, each config by its kind's own checker.
    let out = check(cwd.path(), &["default", "--proxy", "haproxy,caddy"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim_end(),
        "ok: <builtin>/default.toml: scenario 'default', 1 case (full and --quick forms), \
         platform local; 4 proxy configs checked by haproxy -c, caddy validate",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A rate limit Caddy cannot express (nginx's limit_req): refused before anything starts,
    // in one line that names the kind, as `run --proxy caddy` refuses it.
    let out = check(cwd.path(), &["burst-handling", "--proxy", "caddy"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("caddy"), "{err}");
    assert!(out.stdout.is_empty());
    // Bad --proxy values are usage errors.
    for (arg, want) in [
        ("bogus", "--proxy bogus: unknown proxy kind 'bogus'"),
        ("nginx,nginx", "--proxy nginx,nginx: nginx is named twice"),
    ] {
        let out = check(cwd.path(), &["default", "--proxy", arg]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{arg}: {err}");
        assert!(err.contains(want), "{arg}: {err}");
    }
    assert_eq!(fs::read_dir(cwd.path()).unwrap().count(), 0);
}

/// Writes `text` as `bad.toml` in `dir` and returns its path.
fn write(dir: &Path, text: &str) -> PathBuf {
    let file = dir.join("bad.toml");
    fs::write(&file, text).unwrap();
    file
}

/// The default scenario's text with one action appended, and the appended action's line.
fn default_with(action: &str) -> (String, usize) {
    let mut text = fs::read_to_string(shipped_dir().join("default.toml")).unwrap();
    let line = text.lines().count() + 2;
    text.push_str(&format!("\n[[actions]]\nat = \"1s\"\n{action}\n"));
    (text, line)
}

#[test]
fn a_bad_scenario_is_one_line_at_its_file_and_line_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().join("cwd");
    fs::create_dir(&cwd).unwrap();
    let expect = |args: &[&str], want: &str| {
        let out = check(&cwd, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with(want), "{args:?}: {err}\nwant {want}");
    };
    // An unknown key, at its line.
    let file = write(dir.path(), "name = \"x\"\nbogus = 1\n");
    let f = file.to_str().unwrap();
    expect(&[f], &format!("proxybench: {f}:2: "));
    // A cluster action on the local platform: refused at its line; accepted on kubernetes.
    let (text, line) = default_with("rollout_restart = \"deployment/web\"");
    let file = write(dir.path(), &text);
    let f = file.to_str().unwrap();
    expect(
        &[f],
        &format!(
            "proxybench: {f}:{line}: rollout_restart needs [platform] kind = \
             \"kubernetes\""
        ),
    );
    let out = check(&cwd, &[f, "--platform", "kubernetes"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A manifest that is not there, on Kubernetes: the path at its line.
    let (text, line) = default_with("apply = \"routes.yaml\"");
    let file = write(dir.path(), &text);
    let f = file.to_str().unwrap();
    expect(
        &[f, "--platform", "kubernetes"],
        &format!(
            "proxybench: {f}:{line}: apply: {}: ",
            dir.path().join("routes.yaml").display()
        ),
    );
    // A config nginx refuses: nginx -t's own message, traced to the scenario line of the item.
    let text = fs::read_to_string(shipped_dir().join("default.toml"))
        .unwrap()
        .replace(
            "worker_processes = 1\n",
            "worker_processes = 1\n[proxy.raw]\nhttp = \"no_such_directive on;\"\n",
        );
    let line = text
        .lines()
        .position(|l| l.starts_with("http = \"no_such"))
        .unwrap()
        + 1;
    let file = write(dir.path(), &text);
    let f = file.to_str().unwrap();
    let out = check(&cwd, &[f]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with(&format!(
            "proxybench: {f}:{line}: case 'main', [proxy] raw.http: nginx refused the config: \
             nginx: [emerg] unknown directive \"no_such_directive\" in "
        )),
        "{err}"
    );
    // The refused config is kept for its message to point into; this test removes it.
    let kept = err
        .split(" in ")
        .last()
        .and_then(|p| Path::new(p.trim()).parent().map(Path::to_path_buf))
        .unwrap();
    assert!(kept.join("nginx-test.conf").is_file(), "{}", kept.display());
    fs::remove_dir_all(&kept).unwrap();
    // Neither a built-in name nor a file; a platform that is not one.
    expect(
        &["no-such-scenario"],
        "proxybench: 'no-such-scenario' is neither a built-in scenario (default, ",
    );
    expect(
        &["default", "--platform", "nomad"],
        "proxybench: --platform nomad: not one of local, kubernetes",
    );
    // Nothing was written where it ran.
    assert_eq!(fs::read_dir(&cwd).unwrap().count(), 0);
}

#[test]
fn a_template_that_does_not_render_is_refused_at_the_grow_with_its_line_and_item_exit_2() {
    // A templated growth on an external gateway: every item is rendered by `check` (and by
    // `run` before its case starts); item 3 renders a variable that does not exist at the
    // template's line 4.
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("route.yaml.j2"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {% if i == 3 %}{{ nope }}{% else \
         %}{{ name }}{% endif %}\n",
    )
    .unwrap();
    let text = "name = \"gw\"\n[platform]\nkind = \"kubernetes\"\n[proxy]\nkind = \
                \"external\"\n[proxy.external]\nreload = [\"true\"]\n[[loads]]\nname = \"l\"\nurl \
                = \"http://127.0.0.1:8080/\"\nduration = \"60s\"\n[[actions]]\nat = \"1s\"\ngrow \
                = { what = \"routes\", template = \"route.yaml.j2\", to = 5, probe = { selector \
                = \"app=gw\", port = 8080 } }\n";
    let file = write(dir.path(), text);
    let f = file.to_str().unwrap();
    let out = check(dir.path(), &[f]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let t = dir.path().join("route.yaml.j2");
    assert!(
        err.starts_with(&format!(
            "proxybench: {f}:12: grow: template {}:4: item 3: undefined value",
            t.display()
        )),
        "{err}"
    );
    // The same template without the mistake passes.
    fs::write(
        &t,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ name }}\n",
    )
    .unwrap();
    let out = check(dir.path(), &[f]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A long-lived load with a setting its protocol does not take, a bad value, or no listener that
/// speaks its protocol: refused by name at its file and line, exit 2, nothing started.
#[test]
fn a_bad_long_lived_load_is_refused_by_name_at_its_line_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().join("cwd");
    fs::create_dir(&cwd).unwrap();
    let head = "name = \"x\"\n[[backends]]\nname = \"app\"\n[proxy]\n[[proxy.listeners]]\n\
                name = \"web\"\n[[proxy.upstreams]]\nname = \"app\"\nbackends = \"app\"\n\
                [[proxy.routes]]\npath = \"/\"\nupstream = \"app\"\nwebsocket = true\n\
                [[loads]]\nname = \"s\"\nduration = \"5s\"\n";
    // The line of the [[loads]] table, where a load's errors point.
    let loads_line = head.lines().position(|l| l == "[[loads]]").unwrap() + 1;
    for (load, want) in [
        (
            "url = \"http://localhost/events\"\nprotocol = \"sse\"\nping = \"1s\"\n",
            "load 's': ping is for WebSocket loads; a sse load does not take it",
        ),
        (
            "url = \"http://localhost/events\"\nprotocol = \"sse\"\nmessage_rate = 2\n",
            "load 's': a sse load only listens",
        ),
        (
            "url = \"ws://localhost/chat\"\ngrpc_deadline = \"1s\"\n",
            "load 's': grpc_deadline is for gRPC loads; a ws load does not take it",
        ),
        (
            "url = \"ws://localhost/chat\"\nrate = \"10/s\"\n",
            "load 's': rate (the message rate is `message_rate`) is for HTTP loads",
        ),
        (
            "url = \"ws://localhost/chat\"\nmessage_size = 8\n",
            "load 's': a WebSocket message carries a 16-byte stamp",
        ),
        (
            "url = \"ws://localhost/chat\"\nreconnect = \"none\"\nbackoff = \"1s\"\n",
            "load 's': backoff and backoff_max are waits between reconnects",
        ),
        (
            "url = \"http://localhost/\"\nprotocol = \"grpc-stream\"\n",
            "a gRPC load needs a listener with `http2 = true`",
        ),
    ] {
        let file = write(dir.path(), &format!("{head}{load}"));
        let f = file.to_str().unwrap();
        let out = check(&cwd, &[f]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{load}: {err}");
        assert_eq!(err.lines().count(), 1, "{load}: {err}");
        assert!(
            err.starts_with(&format!("proxybench: {f}:")),
            "{load}: {err}"
        );
        assert!(err.contains(want), "{load}: {err}\nwant {want}");
        let line: usize = err[format!("proxybench: {f}:").len()..]
            .split(':')
            .next()
            .unwrap()
            .parse()
            .unwrap_or_else(|_| panic!("{load}: no line in {err}"));
        assert!(
            line >= loads_line,
            "{load}: line {line} before the load's table: {err}"
        );
    }
    // A protocol that is not one: serde's refusal at the value's line.
    let file = write(
        dir.path(),
        &format!("{head}url = \"http://localhost/\"\nprotocol = \"mqtt\"\n"),
    );
    let f = file.to_str().unwrap();
    let out = check(&cwd, &[f]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with(&format!("proxybench: {f}:{}: ", loads_line + 4)),
        "{err}"
    );
    assert_eq!(fs::read_dir(&cwd).unwrap().count(), 0);
}
