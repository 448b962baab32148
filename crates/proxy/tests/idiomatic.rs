//! The hand-written configs of bench/idiomatic/ (what bench/proxies-idiomatic.sh holds the rendered
//! configs against) are real configs: each proxy's own checker accepts them, and each proxy, started
//! with its config, passes requests to both backends. And `[proxy] cpus` pins every process of a
//! replica: the master and the workers it forks.

mod common;

use common::Backend;
use proxybench_proxy::config::Cpus;
use proxybench_proxy::{caddy, haproxy, nginx, PinSpawns, ProxyKind};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How many requests each proxy passes on: both backends get some under round robin.
const REQUESTS: u64 = 20;

/// The config file of `kind` in bench/idiomatic/, its placeholders filled in, written to `dir`;
/// with `stamps`, its lines ending in `# stamps` kept (the headers proxybench's rendered configs
/// add), else dropped, as bench/proxies-idiomatic.sh does.
fn idiomatic(
    kind: &str,
    dir: &Path,
    (port, admin): (u16, u16),
    backends: [u16; 2],
    stamps: bool,
) -> PathBuf {
    let file = match kind {
        "nginx" => "nginx.conf",
        "haproxy" => "haproxy.cfg",
        _ => "Caddyfile",
    };
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../bench/idiomatic")
        .join(file);
    let text = std::fs::read_to_string(&src).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
    let text: String = text
        .lines()
        .filter_map(|l| match l.strip_suffix("# stamps") {
            Some(kept) if stamps => Some(kept.trim_end()),
            Some(_) => None,
            None => Some(l),
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let text = text
        .replace("{PREFIX}", &dir.display().to_string())
        .replace("{PORT}", &port.to_string())
        .replace("{B1}", &backends[0].to_string())
        .replace("{B2}", &backends[1].to_string())
        .replace("{WORKERS}", "1")
        .replace("{ADMIN}", &admin.to_string());
    assert!(
        !text.contains("{PREFIX}") && !text.contains("{PORT}"),
        "{text}"
    );
    let path = dir.join(file);
    std::fs::write(&path, text).unwrap();
    path
}

/// A caddy command that writes its data and config only inside `dir`.
fn caddy_in(dir: &Path) -> Command {
    let mut c = Command::new(caddy::binary());
    c.env("HOME", dir)
        .env("XDG_DATA_HOME", dir.join("data"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("GOMAXPROCS", "1")
        .current_dir(dir);
    c
}

/// The proxy's own checker on the config: `nginx -t`, `haproxy -c`, `caddy validate`.
fn check(kind: &str, dir: &Path, conf: &Path) -> Output {
    let mut c = match kind {
        "nginx" => {
            let mut c = Command::new(nginx::binary());
            c.arg("-t").arg("-p").arg(dir).arg("-c").arg(conf);
            c.arg("-e").arg(dir.join("error.log"));
            c
        }
        "haproxy" => {
            let mut c = Command::new(haproxy::binary());
            c.arg("-c").arg("-f").arg(conf);
            c
        }
        _ => {
            let mut c = caddy_in(dir);
            c.args(["validate", "--adapter", "caddyfile", "--config"])
                .arg(conf);
            c
        }
    };
    c.output().unwrap()
}

/// Starts the proxy in the foreground on its config.
fn start(kind: &str, dir: &Path, conf: &Path) -> Child {
    let mut c = match kind {
        "nginx" => {
            let mut c = Command::new(nginx::binary());
            c.arg("-p").arg(dir).arg("-c").arg(conf);
            c.arg("-e")
                .arg(dir.join("error.log"))
                .args(["-g", "daemon off;"]);
            c
        }
        "haproxy" => {
            let mut c = Command::new(haproxy::binary());
            c.args(["-W", "-db", "-f"]).arg(conf);
            c
        }
        _ => {
            let mut c = caddy_in(dir);
            c.args(["run", "--adapter", "caddyfile", "--config"])
                .arg(conf);
            c
        }
    };
    // Its own process group, which testkit::stop_child signals as a whole.
    c.process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("stderr")).unwrap())
        .spawn()
        .unwrap()
}

fn each_idiomatic_config_is_checked_and_serves(kind: &str) {
    for stamps in [false, true] {
        idiomatic_config_is_checked_and_serves(kind, stamps);
    }
}

fn idiomatic_config_is_checked_and_serves(kind: &str, stamps: bool) {
    let tmp = common::scratch(&format!("idiomatic-{kind}"));
    let dir = tmp.path();
    let (b1, b2) = (Backend::start("b1"), Backend::start("b2"));
    let ports = testkit::free_ports(2);
    let conf = idiomatic(
        kind,
        dir,
        (ports[0], ports[1]),
        [b1.addr.port(), b2.addr.port()],
        stamps,
    );
    let out = check(kind, dir, &conf);
    assert!(
        out.status.success(),
        "{kind} refused bench/idiomatic's config:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let mut child = start(kind, dir, &conf);
    testkit::wait_listening(
        std::net::SocketAddr::from(([127, 0, 0, 1], ports[0])),
        Duration::from_secs(10),
    );
    for i in 0..REQUESTS {
        let r = common::get(ports[0], &format!("/ping/{i}"), "bench.example");
        assert_eq!(
            r.status,
            200,
            "{kind} request {i}: {:?}\n{}",
            r.body,
            std::fs::read_to_string(dir.join("stderr")).unwrap_or_default()
        );
        // The stamped form carries the generation header on every answer; the plain one none.
        assert_eq!(
            r.header("X-Config-Generation"),
            stamps.then_some("1"),
            "{kind} request {i}"
        );
    }
    testkit::stop_child(&mut child);
    // Every request reached a backend, and round robin gave each of the two a share.
    assert_eq!(b1.requests() + b2.requests(), REQUESTS, "{kind}");
    assert!(
        b1.requests() > 0 && b2.requests() > 0,
        "{kind}: {} and {}",
        b1.requests(),
        b2.requests()
    );
}

#[test]
fn nginx_idiomatic_config() {
    each_idiomatic_config_is_checked_and_serves("nginx");
}

#[test]
fn haproxy_idiomatic_config() {
    each_idiomatic_config_is_checked_and_serves("haproxy");
}

#[test]
fn caddy_idiomatic_config() {
    each_idiomatic_config_is_checked_and_serves("caddy");
}

/// The CPUs a process may run on, as /proc says (`Cpus_allowed_list`).
fn allowed(pid: u32) -> String {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string()
}

/// The pids of `pid`'s children (nginx's workers).
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let ppid: u32 = rest.split(' ').nth(1).unwrap().parse().unwrap();
        if ppid == pid {
            out.push(p);
        }
    }
    out
}

#[test]
fn pinned_replicas_run_every_process_on_their_cpus() {
    // The last online CPU, so the pin differs from "every CPU" on a machine with two or more.
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let last = *Cpus::parse(online.trim()).unwrap().list().last().unwrap();
    let cpus = Cpus::parse(&last.to_string()).unwrap();
    let tmp = common::scratch("pinned");
    let b = Backend::start("b");
    let cfg = common::parse(
        r#"
[proxy]
worker_processes = 2
listeners = [{ name = "http" }]
upstreams = [{ name = "app", backends = "app" }]
routes = [{ path = "/", upstream = "app" }]
"#,
    );
    assert_eq!(cfg.kind, ProxyKind::Nginx);
    let mut ctx = common::context(&cfg, tmp.path(), &[("app", vec![b.addr])]);
    let replica = {
        let _pin = PinSpawns::new(Some(&cpus));
        common::start("pinned", &cfg, &mut ctx, tmp.path())
    };
    let master = replica.master_pid();
    assert_eq!(allowed(master), last.to_string(), "the master");
    // The workers are forked by the master and inherit its set.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut workers = children(master);
    while workers.len() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        workers = children(master);
    }
    assert_eq!(workers.len(), 2, "nginx forked {workers:?}");
    for w in workers {
        assert_eq!(allowed(w), last.to_string(), "worker {w}");
    }
    // Outside the guard, spawns are not pinned: a second replica keeps this test's own set.
    let mut ctx2 = common::context(&cfg, tmp.path(), &[("app", vec![b.addr])]);
    let free = common::start("free", &cfg, &mut ctx2, tmp.path());
    assert_eq!(allowed(free.master_pid()), allowed(std::process::id()));
    drop(free);
    drop(replica);
}
