//! End to end: `proxybench run` on `kind = "external"` against an nginx this test starts itself
//! from a config written by hand (proxybench starts, renders and stops nothing of it), with a
//! reload by the user's command, an `exec` action, access-log counts read from the log's size at
//! the run's start, and CPU sampled by process name; and against a Caddy started just before the
//! run, whose access log appears only at its first request.

use model::RunResults;
use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_proxybench")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Two consecutive free ports on 127.0.0.1 (the backends' `listen` base and the next).
fn two_consecutive_ports() -> u16 {
    for _ in 0..100 {
        let a = testkit::free_port();
        if a < u16::MAX
            && TcpListener::bind(("127.0.0.1", a)).is_ok()
            && TcpListener::bind(("127.0.0.1", a + 1)).is_ok()
        {
            return a;
        }
    }
    panic!("no two consecutive free ports on 127.0.0.1");
}

/// An nginx the user runs: a config written by hand, a combined-format access log with the
/// upstream tail, two upstream servers at the backends' fixed ports, one listener.
struct UserNginx {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
    backends: u16,
}

impl UserNginx {
    fn start() -> UserNginx {
        let dir = tempfile::Builder::new()
            .prefix("pb-user-nginx-")
            .tempdir()
            .unwrap();
        let p = dir.path().display().to_string();
        let port = testkit::free_port();
        let backends = two_consecutive_ports();
        // SAFETY: geteuid(2) takes no arguments and cannot fail.
        let user = if unsafe { libc::geteuid() } == 0 {
            "user root;"
        } else {
            ""
        };
        let conf = format!(
            r#"{user}
worker_processes 1;
pid {p}/nginx.pid;
error_log {p}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    log_format pbc '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" rt=$request_time ua="$upstream_addr" us="$upstream_status"';
    access_log {p}/access.log pbc;
    client_body_temp_path {p}/body;
    proxy_temp_path {p}/proxy;
    fastcgi_temp_path {p}/fastcgi;
    uwsgi_temp_path {p}/uwsgi;
    scgi_temp_path {p}/scgi;
    upstream app {{
        server 127.0.0.1:{b0};
        server 127.0.0.1:{b1};
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{ proxy_pass http://app; }}
        location = /own {{ return 200 "own\n"; }}
    }}
}}
"#,
            b0 = backends,
            b1 = backends + 1,
        );
        fs::write(dir.path().join("nginx.conf"), conf).unwrap();
        let mut cmd = Command::new(testkit::nginx_bin());
        cmd.args(nginx_args(dir.path()))
            .arg("-g")
            .arg("daemon off;");
        let child = spawn_users_proxy(&mut cmd, "nginx");
        let ng = UserNginx {
            child,
            dir,
            port,
            backends,
        };
        testkit::wait_listening(
            std::net::SocketAddr::from(([127, 0, 0, 1], port)),
            Duration::from_secs(10),
        );
        ng
    }

    fn path(&self, f: &str) -> String {
        self.dir.path().join(f).display().to_string()
    }

    fn access_lines(&self) -> usize {
        fs::read_to_string(self.dir.path().join("access.log"))
            .unwrap_or_default()
            .lines()
            .count()
    }
}

/// `-p DIR -c DIR/nginx.conf -e DIR/error.log`.
fn nginx_args(dir: &Path) -> Vec<String> {
    vec![
        "-p".into(),
        dir.display().to_string(),
        "-c".into(),
        dir.join("nginx.conf").display().to_string(),
        "-e".into(),
        dir.join("error.log").display().to_string(),
    ]
}

impl Drop for UserNginx {
    fn drop(&mut self) {
        testkit::stop_child(&mut self.child);
    }
}

/// The external scenario against `ng`: `requests` requests at 200/s, a reload by nginx's own
/// `-s reload` at 0.5 s, and `exec` at 1 s with `exec_extra` appended to its action.
fn scenario(ng: &UserNginx, requests: u64, exec: &str) -> String {
    let mut reload: Vec<String> = vec![testkit::nginx_bin().display().to_string()];
    reload.extend(nginx_args(ng.dir.path()));
    reload.extend(["-s".into(), "reload".into()]);
    let reload: Vec<String> = reload.iter().map(|a| format!("{a:?}")).collect();
    format!(
        r#"name = "external"
description = "an nginx proxybench did not start"

[[backends]]
name = "app"
count = 2
listen = "127.0.0.1:{b}"

[proxy]
kind = "external"
[proxy.external]
resolve = "127.0.0.1"
reload = [{reload}]
access_log = {{ path = "{access}", format = "combined" }}
error_log = {{ path = "{error}" }}
processes = "nginx"

[[loads]]
name = "l"
url = "http://cafe.example.com:{port}/coffee"
requests = {requests}
rate = "200r/s"
connections = 2

[[actions]]
at = "500ms"
reload = true

[[actions]]
at = "1s"
{exec}
"#,
        b = ng.backends,
        reload = reload.join(", "),
        access = ng.path("access.log"),
        error = ng.path("error.log"),
        port = ng.port,
    )
}

/// Runs `toml` and returns the output and the run's results directory.
fn run(dir: &Path, toml: &str) -> (Output, PathBuf) {
    let file = dir.join("external.toml");
    fs::write(&file, toml).unwrap();
    let root = dir.join("results");
    let _ = fs::remove_dir_all(&root);
    let out = Command::new(bin())
        .arg("run")
        .arg(&file)
        .arg("--results")
        .arg(&root)
        .arg("--no-progress")
        .output()
        .unwrap();
    let runs = root.join("external");
    let run = fs::read_dir(&runs)
        .unwrap_or_else(|e| panic!("{e}: {}{}", text(&out.stdout), text(&out.stderr)))
        .flatten()
        .next()
        .unwrap()
        .path();
    (out, run)
}

fn read(dir: &Path) -> RunResults {
    serde_json::from_str(&fs::read_to_string(dir.join("data.json")).unwrap()).unwrap()
}

#[test]
fn an_external_nginx_is_measured_without_being_started() {
    let ng = UserNginx::start();
    // Traffic before the run: the run reads the log from its size at the start.
    for _ in 0..3 {
        let (status, _) = testkit::http_get(
            std::net::SocketAddr::from(([127, 0, 0, 1], ng.port)),
            "/own",
        )
        .unwrap();
        assert_eq!(status, 200);
    }
    // nginx writes the line once the response is out: wait for it.
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while ng.access_lines() < 3 && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(ng.access_lines(), 3);
    let tmp = tempfile::tempdir().unwrap();
    let n = 400;
    let (out, dir) = run(
        tmp.path(),
        &scenario(
            &ng,
            n,
            "exec = [\"echo\", \"hello from exec\"]\ntimeout = \"10s\"",
        ),
    );
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{said}");
    let r = read(&dir);
    let case = &r.cases[0];
    let load = &case.loads[0];
    assert_eq!(load.requests, n, "{said}");
    assert_eq!(load.status.get(&200).copied(), Some(n), "{:?}", load.status);
    // The user's log holds the 3 earlier lines too; the run counts only its own.
    assert_eq!(case.logs.access_lines, n, "{:?}", case.logs.missing);
    let served: u64 = case.backends.iter().map(|b| b.requests).sum();
    assert_eq!(served, n);
    assert!(case.backends.iter().all(|b| b.requests > 0));
    assert_eq!(ng.access_lines() as u64, 3 + n);
    assert_eq!(
        fs::read_to_string(dir.join("logs/main/external-0/access.log"))
            .unwrap()
            .lines()
            .count() as u64,
        n
    );
    // The reload ran the user's command and was timed to its exit: a time of its own, never
    // a time at which the new config served (nginx's `-s reload` exits once it has signalled).
    assert_eq!(case.reloads.len(), 1, "{:?}", case.reloads);
    let rel = &case.reloads[0];
    assert!(
        rel.error.is_none() && rel.command_ms.is_some() && rel.served_ms.is_none(),
        "{rel:?}"
    );
    assert!(case
        .findings
        .iter()
        .any(|f| f.contains("timed from its command's start to the command's exit")));
    // CPU and memory of the processes named `nginx`; no readiness probes (no admin listener).
    assert!(
        case.proc_samples
            .iter()
            .any(|s| s.group == "external-0" && s.rss_bytes > 0 && s.procs >= 2),
        "{:?}",
        case.proc_samples
    );
    assert!(case.readiness.is_empty() && case.stub_samples.is_empty());
    // The exec action: on the timeline with its exit code, its output kept.
    let exec = case.events.iter().find(|e| e.action == "exec").unwrap();
    assert!(
        exec.error.is_none() && exec.detail.contains("exit 0"),
        "{exec:?}"
    );
    assert!(exec.t_s >= 1.0, "{exec:?}");
    assert_eq!(
        fs::read_to_string(dir.join("exec/main/1-echo.stdout")).unwrap(),
        "hello from exec\n"
    );
    assert!(dir.join("exec/main/1-echo.stderr").is_file());
    assert!(fs::read_to_string(dir.join("events.csv"))
        .unwrap()
        .contains("exec"));
    assert!(r
        .env
        .proxy
        .starts_with("external (not started by proxybench)"));
    // proxybench left the user's nginx running.
    testkit::http_get(
        std::net::SocketAddr::from(([127, 0, 0, 1], ng.port)),
        "/own",
    )
    .unwrap();

    // A failing command fails the run (exit 1) unless the action allows it.
    let (out, dir) = run(
        tmp.path(),
        &scenario(&ng, 300, "exec = [\"sh\", \"-c\", \"exit 3\"]"),
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let exec = read(&dir).cases[0]
        .events
        .iter()
        .find(|e| e.action == "exec")
        .cloned()
        .unwrap();
    assert!(
        exec.detail.contains("exit 3") && exec.error.is_some(),
        "{exec:?}"
    );
    let (out, _) = run(
        tmp.path(),
        &scenario(
            &ng,
            300,
            "exec = [\"sh\", \"-c\", \"exit 3\"]\nallow_fail = true",
        ),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// An external scenario that parses: it needs nothing running.
const EXTERNAL: &str = r#"name = "external"

[[backends]]
name = "app"
count = 2
listen = "127.0.0.1:9101"

[proxy]
kind = "external"
[proxy.external]
resolve = "127.0.0.1"

[[loads]]
name = "l"
url = "http://cafe.example.com:8080/"
requests = 10
"#;

/// A reload of an external target is timed to its command's exit: a check on the time until
/// the new config served (`reloads.max_ms`) is not measurable, even one the command's few
/// milliseconds would pass, and `reloads.command_ms` is the command's time.
#[test]
fn an_external_reload_is_timed_to_its_command_not_to_serving() {
    let ng = UserNginx::start();
    let tmp = tempfile::tempdir().unwrap();
    let toml = scenario(&ng, 200, "exec = [\"true\"]").replacen(
        "\n\n[[backends]]",
        "\nchecks = [\"reloads.max_ms < 1000\", \"reloads.command_ms < 5000\"]\n\n[[backends]]",
        1,
    );
    let (out, dir) = run(tmp.path(), &toml);
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{said}");
    let r = read(&dir);
    let check = |name: &str| {
        r.checks
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no check {name}: {:?}", r.checks))
    };
    let max = check("reloads.max_ms < 1000");
    assert!(!max.pass, "{max:?}");
    assert_eq!(
        max.actual,
        "not measurable for external: its reloads report no time at which the new generation \
         served, only their command's exit (reloads.command_ms)"
    );
    let cmd = check("reloads.command_ms < 5000");
    assert!(cmd.pass, "{cmd:?}");
    assert!(said.contains("1 check(s) failed"), "{said}");
}

#[test]
fn mistakes_in_an_external_scenario_are_one_line_with_file_line_and_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("bad.toml");
    let cases = [
        (
            EXTERNAL.replace(
                "resolve = \"127.0.0.1\"\n",
                "resolve = \"127.0.0.1\"\n[[proxy.listeners]]\nname = \"http\"\n",
            ),
            ":8: ",
            "must not carry listeners",
        ),
        (
            EXTERNAL.replace("[proxy.external]\nresolve = \"127.0.0.1\"\n", ""),
            ":8: ",
            "needs a [proxy.external] table",
        ),
        (
            format!("{EXTERNAL}\n[[actions]]\nat = \"1s\"\nscale_replicas = {{ to = 2 }}\n"),
            ":18: ",
            "scale_replicas on an external target",
        ),
        (
            format!("{EXTERNAL}\n[[actions]]\nat = \"1s\"\nexec = []\n"),
            ":18: ",
            "exec: the command is empty",
        ),
    ];
    for (toml, line, what) in cases {
        fs::write(&file, &toml).unwrap();
        let out = Command::new(bin())
            .arg("run")
            .arg(&file)
            .arg("--results")
            .arg(tmp.path().join("results"))
            .arg("--no-progress")
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(
            err.contains(&format!("{}{line}", file.display())) && err.contains(what),
            "{err}"
        );
    }
    assert!(!tmp.path().join("results").exists());
}

#[test]
fn loads_via_url_connect_where_their_urls_point_and_only_to_named_hosts() {
    let ng = UserNginx::start();
    let tmp = tempfile::tempdir().unwrap();
    // No [proxy]: the run starts the backends, and the loads go to the user's nginx in front
    // of them, one by its address, one by a name sent there with `resolve`.
    let loads = |reach: &str, second_url: &str, resolve: &str| {
        format!(
            "name = \"external\"\n{reach}\n[[backends]]\nname = \"app\"\ncount = 2\n\
             listen = \"127.0.0.1:{b}\"\n\n\
             [[loads]]\nname = \"by-address\"\nurl = \"http://127.0.0.1:{port}/coffee\"\n\
             via = \"url\"\nrequests = 300\nconnections = 2\n\n\
             [[loads]]\nname = \"by-name\"\nurl = \"{second_url}\"\nvia = \"url\"\n\
             {resolve}requests = 200\nconnections = 2\n",
            b = ng.backends,
            port = ng.port,
        )
    };
    let named = format!("http://user-gw.test:{}/tea", ng.port);
    let (out, run) = run(tmp.path(), &loads("", &named, "resolve = \"127.0.0.1\"\n"));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let r = read(&run);
    let case = &r.cases[0];
    let sent: Vec<(String, u64, u64)> = case
        .loads
        .iter()
        .map(|l| (l.name.clone(), l.requests, l.errors.values().sum::<u64>()))
        .collect();
    assert_eq!(
        sent,
        vec![("by-address".into(), 300, 0), ("by-name".into(), 200, 0)]
    );
    // Server-side truth: the user's nginx logged every request, and its upstreams (the run's
    // backends) answered each one.
    assert_eq!(ng.access_lines(), 500);
    let served: u64 = case.backends.iter().map(|b| b.requests).sum();
    assert_eq!(served, 500);

    // The reach rule: a host outside loopback is refused at its load's line, exit 2, unless
    // the scenario names it in `reach`; then only the parse is checked here (no traffic leaves
    // 127.0.0.0/8 in tests).
    let far = "http://gw.example.com/tea";
    let file = tmp.path().join("far.toml");
    fs::write(&file, loads("", far, "")).unwrap();
    let out = Command::new(bin())
        .arg("check")
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert_eq!(
        text(&out.stderr).trim_end(),
        format!(
            "proxybench: {}:15: load 'by-name': via = \"url\" would connect to \
             gw.example.com, which is neither loopback nor in the scenario's reach list: add \
             `reach = [\"gw.example.com\"]` to send load there on purpose",
            file.display()
        )
    );
    fs::write(&file, loads("reach = [\"gw.example.com\"]", far, "")).unwrap();
    let out = Command::new(bin())
        .arg("check")
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    for (bad, line) in [
        ("reach = [\"https://gw.example.com\"]", "2"),
        ("reach = [\"gw.example.com:443\"]", "2"),
    ] {
        fs::write(&file, loads(bad, far, "")).unwrap();
        let out = Command::new(bin())
            .arg("check")
            .arg(&file)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = text(&out.stderr);
        assert!(
            err.starts_with(&format!(
                "proxybench: {}:{line}: reach entry",
                file.display()
            )),
            "{bad}: {err}"
        );
    }
}

#[test]
fn a_backend_port_already_taken_is_a_clear_error() {
    let held = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port();
    let tmp = tempfile::tempdir().unwrap();
    let scenario = format!(
        "name = \"external\"\n[[backends]]\nname = \"app\"\nlisten = \"127.0.0.1:{port}\"\n\
         [[loads]]\nname = \"l\"\nurl = \"http://127.0.0.1/\"\nvia = \"backend:app\"\n\
         requests = 10\n"
    );
    let (out, _) = run(tmp.path(), &scenario);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("app-0: cannot listen on 127.0.0.1:{port}")),
        "{err}"
    );
}

#[test]
fn the_example_external_scenario_parses_in_both_forms() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/external-example.toml");
    let src = scenario::layers::Source {
        file: file.display().to_string(),
        text: fs::read_to_string(&file).unwrap(),
    };
    let scn = scenario::Scenario::parse(&src, false).unwrap();
    let ext = scn.cases[0]
        .proxy
        .as_ref()
        .unwrap()
        .external
        .as_ref()
        .unwrap();
    assert_eq!(ext.processes.as_deref(), Some("nginx"));
    assert_eq!(scn.cases[0].steps.len(), 2);
}

/// A Caddy the user runs from a Caddyfile: one site on a free port proxying to the backends'
/// fixed ports, its access log a file in `DIR/logs/` that Caddy creates at the first request.
struct UserCaddy {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
    backends: u16,
}

impl UserCaddy {
    fn start() -> UserCaddy {
        let dir = tempfile::Builder::new()
            .prefix("pb-user-caddy-")
            .tempdir()
            .unwrap();
        fs::create_dir(dir.path().join("logs")).unwrap();
        let port = testkit::free_port();
        let backends = two_consecutive_ports();
        let caddyfile = format!(
            "{{\n  admin off\n}}\nhttp://:{port} {{\n  bind 127.0.0.1\n  log {{\n    output file \
             {log}\n  }}\n  reverse_proxy 127.0.0.1:{b0} 127.0.0.1:{b1}\n}}\n",
            log = dir.path().join("logs/access.log").display(),
            b0 = backends,
            b1 = backends + 1,
        );
        let file = dir.path().join("Caddyfile");
        fs::write(&file, caddyfile).unwrap();
        let mut cmd = Command::new("caddy");
        cmd.args(["run", "--adapter", "caddyfile", "--config"])
            .arg(&file)
            // Caddy's own state (autosave, certificates) in the test's directory.
            .env("HOME", dir.path())
            .env("XDG_DATA_HOME", dir.path().join("data"))
            .env("XDG_CONFIG_HOME", dir.path().join("config"));
        let child = spawn_users_proxy(&mut cmd, "caddy");
        let caddy = UserCaddy {
            child,
            dir,
            port,
            backends,
        };
        testkit::wait_listening(
            std::net::SocketAddr::from(([127, 0, 0, 1], port)),
            Duration::from_secs(10),
        );
        caddy
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("logs/access.log")
    }
}

impl Drop for UserCaddy {
    fn drop(&mut self) {
        testkit::stop_child(&mut self.child);
    }
}

/// The external scenario against `caddy`: `requests` requests at 200/s, its access log at
/// `log`; the access_log line is line 14.
fn caddy_scenario(caddy: &UserCaddy, log: &Path, requests: u64) -> String {
    format!(
        r#"name = "external"
description = "a Caddy proxybench did not start, whose log appears at the first request"

[[backends]]
name = "app"
count = 2
listen = "127.0.0.1:{b}"

[proxy]
kind = "external"

[proxy.external]
resolve = "127.0.0.1"
access_log = {{ path = "{log}", format = "caddy" }}

[[loads]]
name = "l"
url = "http://cafe.example.com:{port}/coffee"
requests = {requests}
rate = "200r/s"
connections = 2
"#,
        b = caddy.backends,
        log = log.display(),
        port = caddy.port,
    )
}

#[test]
fn an_access_log_that_appears_during_the_run_is_read_whole() {
    let caddy = UserCaddy::start();
    // The premise: Caddy listens, and has created no access log yet.
    assert!(!caddy.log().exists(), "{} exists", caddy.log().display());
    let tmp = tempfile::tempdir().unwrap();
    let toml = caddy_scenario(&caddy, &caddy.log(), 300);
    // `check` accepts it as `run` does: the log's directory is there.
    fs::write(tmp.path().join("external.toml"), &toml).unwrap();
    let out = Command::new(bin())
        .arg("check")
        .arg(tmp.path().join("external.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let n = 300;
    let (out, dir) = run(tmp.path(), &toml);
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{said}");
    let r = read(&dir);
    let case = &r.cases[0];
    let load = &case.loads[0];
    assert_eq!(load.requests, n, "{said}");
    assert_eq!(load.status.get(&200).copied(), Some(n), "{:?}", load.status);
    // Every request reached a backend once, and Caddy logged each one in the file it created
    // during the run: the counts agree exactly.
    let served: u64 = case.backends.iter().map(|b| b.requests).sum();
    assert_eq!(served, n);
    assert!(case.logs.missing.is_none(), "{:?}", case.logs.missing);
    assert_eq!(case.logs.access_lines, n);
    assert_eq!(case.logs.access_status.get(&200).copied(), Some(n));
    let lines = |p: &Path| fs::read_to_string(p).unwrap().lines().count() as u64;
    assert_eq!(lines(&caddy.log()), n);
    assert_eq!(lines(&dir.join("logs/main/external-0/access.log")), n);

    // A second run finds the log there: it reads from the log's size at its start.
    let (out, dir) = run(tmp.path(), &caddy_scenario(&caddy, &caddy.log(), 200));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(read(&dir).cases[0].logs.access_lines, 200);
    assert_eq!(lines(&caddy.log()), n + 200);

    // A log whose directory does not exist is refused at its line, before anything starts.
    let nowhere = caddy.dir.path().join("no-such-dir/access.log");
    let file = tmp.path().join("bad.toml");
    fs::write(&file, caddy_scenario(&caddy, &nowhere, 10)).unwrap();
    for cmd in ["check", "run"] {
        let mut c = Command::new(bin());
        c.arg(cmd).arg(&file);
        if cmd == "run" {
            c.arg("--no-progress")
                .arg("--results")
                .arg(tmp.path().join("bad-results"));
        }
        let out = c.output().unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{cmd}: {err}");
        assert!(
            err.starts_with(&format!("proxybench: {}:14: ", file.display()))
                && err.contains(&format!(
                    "access_log {}: its directory {}: No such file or directory",
                    nowhere.display(),
                    nowhere.parent().unwrap().display()
                )),
            "{cmd}: {err}"
        );
    }
    assert!(!tmp.path().join("bad-results").exists());
}

/// Starts `cmd` as a user's own proxy would run: in its own process group (a Ctrl-C to the
/// test's group does not reach it), without stdio, and killed if the test process dies.
fn spawn_users_proxy(cmd: &mut Command, what: &str) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    testkit::die_with_parent(cmd);
    cmd.spawn().unwrap_or_else(|e| panic!("start {what}: {e}"))
}
