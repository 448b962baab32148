//! Fixtures for tests that need real parts: a free port on loopback, and a real nginx (the
//! distribution's package) running in a scratch prefix that is killed when the fixture drops;
//! and scenario texts more than one crate's tests parse.
//! Only 127.0.0.0/8 is ever used.

#![warn(missing_docs)]

use std::fs;
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A port on 127.0.0.1 that was free a moment ago, never one this test process had before.
pub fn free_port() -> u16 {
    free_ports(1)[0]
}

/// `n` distinct free ports on 127.0.0.1, all held open until every one has been chosen, none
/// handed out before in this test process. A port is free again once released, until the
/// test's server binds it, so two tests on parallel threads (or one test picking twice) could
/// otherwise both get it.
pub fn free_ports(n: usize) -> Vec<u16> {
    static GIVEN: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    for _ in 0..100 {
        let held: Vec<TcpListener> = (0..n)
            .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0"))
            .collect();
        let ports: Vec<u16> = held
            .iter()
            .map(|l| l.local_addr().unwrap().port())
            .collect();
        if ports.iter().all(|p| !given.contains(p)) {
            given.extend(ports.iter().copied());
            return ports;
        }
    }
    panic!("100 tries at {n} free port(s) on 127.0.0.1 all returned one handed out before");
}

/// Path of the nginx binary: `$NGINX` if set, else the Debian package's `/usr/sbin/nginx`.
pub fn nginx_bin() -> PathBuf {
    std::env::var_os("NGINX")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/sbin/nginx"))
}

/// Waits until something accepts TCP connections on `addr`, or panics after `timeout`.
pub fn wait_listening(addr: SocketAddr, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("nothing listening on {addr} after {timeout:?}");
}

/// A real nginx master (foreground, its own process group) in a scratch prefix. Dropping it
/// stops nginx with SIGTERM, then SIGKILL, and removes the prefix.
pub struct Nginx {
    child: Child,
    dir: tempfile::TempDir,
    /// The port of the first server block (`{port}` in the config template).
    pub port: u16,
}

impl Nginx {
    /// Starts nginx with `worker_processes` workers and the given `http {}` body. `{port}` and
    /// `{prefix}` in the body are replaced by a free port and the scratch directory. The access
    /// log is written to `{prefix}/access.log` (one line per request) unless the body says
    /// otherwise.
    pub fn start(workers: u32, http_body: &str) -> Nginx {
        let port = free_port();
        let dir = tempfile::Builder::new()
            .prefix("pb-nginx-")
            .tempdir()
            .expect("tempdir");
        let prefix = dir.path().to_str().unwrap().to_string();
        let body = http_body
            .replace("{port}", &port.to_string())
            .replace("{prefix}", &prefix);
        // nginx refuses to start workers as `nobody` in a 0700 scratch dir; as root run them as root.
        // SAFETY: geteuid(2) takes no arguments and cannot fail.
        let user = if unsafe { libc::geteuid() } == 0 {
            "user root;"
        } else {
            ""
        };
        let conf = format!(
            "{user}\nworker_processes {workers};\npid {prefix}/nginx.pid;\n\
             error_log {prefix}/error.log warn;\nevents {{ worker_connections 16384; }}\n\
             http {{\n  access_log {prefix}/access.log;\n  client_body_temp_path {prefix}/body;\n\
             proxy_temp_path {prefix}/proxy;\n  fastcgi_temp_path {prefix}/fastcgi;\n\
             uwsgi_temp_path {prefix}/uwsgi;\n  scgi_temp_path {prefix}/scgi;\n{body}\n}}\n"
        );
        fs::write(dir.path().join("nginx.conf"), conf).unwrap();
        let child = spawn_nginx(dir.path());
        let ng = Nginx { child, dir, port };
        ng.wait_ready();
        ng
    }

    /// nginx with `return 200 "hello\n"` on every path, `keepalive_requests` effectively unlimited,
    /// and an access log line per request.
    pub fn return_200(workers: u32) -> Nginx {
        Nginx::start(
            workers,
            "  keepalive_requests 100000000;\n  server {\n    listen 127.0.0.1:{port} reuseport;\n\
             location / { return 200 \"hello\\n\"; }\n    location = /stub { stub_status; }\n  }\n",
        )
    }

    /// The address of the first server block.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{}", self.port, path)
    }

    /// The scratch prefix (config, logs, pid).
    pub fn prefix(&self) -> &Path {
        self.dir.path()
    }

    /// Number of lines in the access log (nginx writes a line when a request completes).
    pub fn access_log_lines(&self) -> u64 {
        fs::read(self.dir.path().join("access.log"))
            .map(|b| b.iter().filter(|&&c| c == b'\n').count() as u64)
            .unwrap_or(0)
    }

    /// The error log's text.
    pub fn error_log(&self) -> String {
        fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }

    /// The master's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn wait_ready(&self) {
        wait_listening(self.addr(), Duration::from_secs(10));
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        stop_child(&mut self.child);
    }
}

/// Makes the process `cmd` starts die with the test process, even when the test is killed
/// without unwinding (a server in its own process group is otherwise left behind).
pub fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the forked child before exec, where only async-signal-safe
    // calls are allowed; prctl(2) is a plain system call that neither allocates nor locks.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

fn spawn_nginx(prefix: &Path) -> Child {
    use std::os::unix::process::CommandExt;
    let conf = prefix.join("nginx.conf");
    let err = prefix.join("error.log");
    let mut cmd = Command::new(nginx_bin());
    cmd.arg("-p")
        .arg(prefix)
        .arg("-c")
        .arg(&conf)
        .arg("-e")
        .arg(&err)
        .arg("-g")
        .arg("daemon off;")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0);
    die_with_parent(&mut cmd);
    let mut child = cmd.spawn().unwrap_or_else(|e| {
        panic!(
            "cannot start {} ({e}); install nginx (apt-get install -y nginx)",
            nginx_bin().display()
        )
    });
    std::thread::sleep(Duration::from_millis(20));
    if let Ok(Some(status)) = child.try_wait() {
        let mut msg = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_string(&mut msg);
        }
        let log = fs::read_to_string(&err).unwrap_or_default();
        panic!("nginx exited at start ({status}): {msg}{log}");
    }
    child
}

/// Sends SIGTERM to the child's process group, waits up to 5 s, then SIGKILLs it.
pub fn stop_child(child: &mut Child) {
    let pgid = child.id() as i32;
    // SAFETY: kill(2) takes no pointers; `-pgid` is the group this child leads (process_group(0)).
    unsafe {
        libc::kill(-pgid, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            // SAFETY: as above; the leader is gone, stragglers of its group are not.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: as above.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
    let _ = child.wait();
}

/// Fetches `path` from `addr` with a GET (the workspace's one HTTP/1 client, `Host: localhost`,
/// `Connection: close`) and returns (status, body). For fixture checks such as stub_status;
/// tests of the load engine use the engine itself.
pub fn http_get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let req = http1::client::Request {
        headers: &[("Host", "localhost")],
        ..http1::client::Request::get(path)
    };
    let r = http1::client::request(addr, &req, Duration::from_secs(5))?;
    Ok((r.status, r.text()))
}

/// Parses nginx's stub_status page and returns its `requests` counter.
pub fn stub_requests(body: &str) -> Option<u64> {
    // Active connections: 1\nserver accepts handled requests\n 1 1 1\nReading: ...
    let line = body.lines().nth(2)?;
    line.split_whitespace().nth(2)?.parse().ok()
}

/// Runs the current thread, and every thread it starts from now on, at real-time priority
/// (SCHED_FIFO) until dropped, so a timing test on a busy machine measures the engine and not
/// the scheduler. Without the privilege it changes nothing.
pub struct Realtime(bool);

impl Realtime {
    /// Raises the calling thread to SCHED_FIFO priority 1 if allowed.
    pub fn enter() -> Realtime {
        let p = libc::sched_param { sched_priority: 1 };
        // SAFETY: `p` is a live sched_param the kernel only reads; pid 0 is this thread.
        Realtime(unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) } == 0)
    }
}

impl Drop for Realtime {
    fn drop(&mut self) {
        if self.0 {
            let p = libc::sched_param { sched_priority: 0 };
            // SAFETY: as in `enter`: `p` is a live sched_param, read only; pid 0 is this thread.
            unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &p) };
        }
    }
}

/// Keeps every CPU busy with SCHED_IDLE spinners until dropped. A virtual CPU that goes idle
/// halts, and waking it costs the host a reschedule (about 100 µs here); spinners at the lowest
/// priority keep the CPUs awake and step aside at once for any real work.
pub struct KeepAwake {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl KeepAwake {
    /// Starts one spinner per CPU.
    pub fn start() -> KeepAwake {
        let stop = Arc::new(AtomicBool::new(false));
        let n = std::thread::available_parallelism().map_or(2, |n| n.get());
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let p = libc::sched_param { sched_priority: 0 };
                    // SAFETY: `p` is a live sched_param the kernel only reads; pid 0 is this
                    // spinner thread.
                    unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &p) };
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        KeepAwake { stop, threads }
    }
}

impl Drop for KeepAwake {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Runs a timing measurement up to `attempts` times and passes at the first attempt whose
/// check holds, panicking with every attempt's message otherwise. A bias in the code under
/// test shows in every attempt; a neighbour's burst on a shared 2-core VM (seen once in CI: a
/// 10 ms delay read as 10.42 ms at p50) shows in one. Hard invariants (counts, nothing early)
/// belong inside `measure` as plain asserts, which hold in every attempt.
pub fn in_one_of(attempts: usize, mut measure: impl FnMut() -> Result<(), String>) {
    let mut misses = Vec::new();
    for _ in 0..attempts {
        match measure() {
            Ok(()) => return,
            Err(e) => {
                eprintln!("timing attempt missed: {e}");
                misses.push(e);
            }
        }
    }
    panic!("all {attempts} attempts missed: {}", misses.join("; "));
}

/// The stack of the small test scenarios below, as lines 2 to 14 of their text: one backend
/// group `b` of one, and a proxy listener routing `/` to it. One copy, so the scenarios'
/// line numbers (which the tests' `file:line` messages name) move together.
const ONE_ROUTE_STACK: &str = r#"[[backends]]
name = "b"
count = 1

[proxy]
[[proxy.listeners]]
name = "http"
[[proxy.upstreams]]
name = "b"
backends = "b"
[[proxy.routes]]
path = "/"
upstream = "b"
"#;

/// The smallest scenario with one load aimed at `url` (one backend, one proxy route, five
/// requests), as a scenario file's text: the parse-time url check (crates/scenario) and the
/// runner's reading of the same url (crates/bench) test one and the same file. The load's
/// table starts on line 16, its `url` is on line 18.
pub fn one_load_scenario(url: &str) -> String {
    format!(
        r#"name = "reach"
{ONE_ROUTE_STACK}
[[loads]]
name = "l"
url = "{url}"
requests = 5
"#
    )
}

/// A runnable scenario named `name` with two cases, `first` and `second`, and one one-second
/// load, as a scenario file's text: the parser's refusal of names that would leave the results
/// directory (crates/scenario) and the runner's refusal of the same names (crates/bench) test
/// one and the same file. The name is on line 1, the second `[[cases]]` on line 24.
pub fn two_cases_scenario(name: &str, second: &str) -> String {
    format!(
        r#"name = "{name}"
{ONE_ROUTE_STACK}
[[loads]]
name = "l"
url = "http://localhost/"
duration = "1s"

[[cases]]
name = "first"

[[cases]]
name = "{second}"
"#
    )
}

/// The workspace's crates folder (`crates/`), for the tests that read the source itself.
pub fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `.rs` file under `dir`, sorted: what the tests that read the source walk.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Fails a source-reading test with what it found, one `file:line: text` a line, after making
/// sure it read the tree at all (`checked` files, more than a hundred).
pub fn assert_none_found(checked: usize, found: &[String], what: &str) {
    assert!(
        checked > 100,
        "read only {checked} files: is the crates directory where it was?"
    );
    assert!(found.is_empty(), "{what}:\n{}", found.join("\n"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nginx_fixture_serves_and_counts() {
        let ng = Nginx::return_200(1);
        let (status, body) = http_get(ng.addr(), "/x").unwrap();
        assert_eq!(status, 200);
        assert_eq!(body, "hello\n");
        let (status, stub) = http_get(ng.addr(), "/stub").unwrap();
        assert_eq!(status, 200);
        // stub_status counts the request that reads it.
        assert_eq!(stub_requests(&stub), Some(2));
        // nginx writes the access log line after the response; give it a moment.
        let deadline = Instant::now() + Duration::from_secs(2);
        while ng.access_log_lines() < 1 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(ng.access_log_lines() >= 1);
    }

    #[test]
    fn free_ports_are_distinct() {
        let p = free_ports(5);
        let mut q = p.clone();
        q.sort();
        q.dedup();
        assert_eq!(q.len(), 5);
    }
}
