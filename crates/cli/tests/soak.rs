//! The 60-second form of `bench/soak.sh`: open-loop load through a real nginx reloaded every 10 s
//! to a real `proxybench backend`. Memory stays flat after warm-up, every request is accounted
//! for on all three sides, and nothing the script started outlives it, even when interrupted.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The bound the script applies to last RSS / RSS after warm-up (see bench/soak.sh).
const RSS_BOUND: f64 = 1.10;

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench/soak.sh")
}

fn soak(env: &[(&str, &str)]) -> Command {
    let mut c = Command::new("bash");
    c.arg(script())
        .env("PROXYBENCH", env!("CARGO_BIN_EXE_proxybench"))
        .envs(env.iter().copied());
    c
}

/// `key=value` pairs of every `soak: ` line, later lines overriding earlier ones; a key is
/// prefixed by the last word before it that has no `=` (e.g. `counts.sent`,
/// `fds_load.max`).
fn fields(text: &str) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("soak: ") else {
            continue;
        };
        let mut prefix = String::new();
        for w in rest.split_whitespace() {
            match w.split_once('=') {
                Some((k, v)) => {
                    m.insert(format!("{prefix}{k}"), v.to_string());
                }
                None => prefix = format!("{w}."),
            }
        }
    }
    m
}

fn num(m: &BTreeMap<String, String>, k: &str) -> f64 {
    m.get(k)
        .unwrap_or_else(|| panic!("no {k} in {m:?}"))
        .parse()
        .unwrap_or_else(|_| panic!("{k}={} is not a number", m[k]))
}

/// Whether `pid` is still a process of ours (nginx or proxybench; a reused pid is not).
fn alive(pid: &str) -> bool {
    let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let cmd = String::from_utf8_lossy(&cmd);
    // A zombie has an empty cmdline: it holds no socket or memory.
    cmd.contains("nginx") || cmd.contains("proxybench")
}

fn pids(m: &BTreeMap<String, String>, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    for k in ["load", "backend", "nginx", "workers"] {
        let v = m
            .get(&format!("{prefix}.{k}"))
            .unwrap_or_else(|| panic!("no {prefix}.{k} in {m:?}"));
        out.extend(v.split(',').filter(|p| !p.is_empty()).map(String::from));
    }
    out
}

#[test]
fn a_minute_of_load_and_reloads_keeps_memory_flat_and_counts_exact() {
    let rate = 1000u64;
    let out = soak(&[
        ("SOAK_SECONDS", "60"),
        ("RELOAD_EVERY", "10"),
        ("SOAK_RATE", &rate.to_string()),
    ])
    .output()
    .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
    let m = fields(&text);

    // Memory: flat after warm-up (15 s of 60), for the load generator and the backend.
    assert_eq!(num(&m, "warmup_s"), 15.0, "{text}");
    for who in ["load", "backend"] {
        let ratio = num(&m, &format!("rss_ratio_{who}"));
        let warm = num(&m, &format!("rss_kb_{who}.warm"));
        let last = num(&m, &format!("rss_kb_{who}.last"));
        assert!(
            warm > 1000.0,
            "{who}: RSS after warm-up {warm} kB: not sampled"
        );
        assert!(
            (ratio - last / warm).abs() < 0.001,
            "{who}: ratio {ratio} is not last/warm"
        );
        assert!(ratio <= RSS_BOUND, "{who}: RSS grew {ratio}x\n{text}");
        // fds: every connection is counted, and none piles up.
        assert!(num(&m, &format!("fds_{who}.max")) < 200.0, "{text}");
    }
    // The load keeps its 50 connections open, give or take the ones a reload just closed.
    assert!(num(&m, "fds_load.last") >= 50.0, "{text}");

    // Counts: every attempt ends as a response or an error; every response went through nginx
    // (its access log) to the backend (its counter), one for one.
    let sent = num(&m, "counts.sent");
    let responses = num(&m, "counts.responses");
    let errors = num(&m, "counts.errors");
    assert_eq!(sent, responses + errors, "{text}");
    assert_eq!(
        sent,
        (60 * rate) as f64,
        "open loop sends every request\n{text}"
    );
    // A reload closes idle keep-alive connections: a request or two per reload may race it.
    assert!(errors <= 5.0 * 10.0, "{text}");
    assert_eq!(num(&m, "counts.status_other"), 0.0, "{text}");
    assert_eq!(num(&m, "counts.status_200"), responses, "{text}");
    assert_eq!(num(&m, "counts.backend"), responses, "{text}");
    assert_eq!(num(&m, "counts.nginx_logged"), responses, "{text}");
    assert_eq!(m["counts.exact"], "yes");

    // Reloads: one every 10 s, all done by nginx.
    assert_eq!(num(&m, "reloads"), 5.0, "{text}");
    assert_eq!(num(&m, "reconfigured"), 5.0, "{text}");

    // Nothing left running: load, backend, nginx master and every worker it ever had.
    let ps = pids(&m, "pids");
    assert!(
        ps.len() >= 3 + 6,
        "{ps:?}: a worker per reload plus the first"
    );
    let left: Vec<_> = ps.iter().filter(|p| alive(p)).collect();
    assert!(left.is_empty(), "still running: {left:?}");
}

/// Stops the script (its trap cleans up) if the test fails while it runs.
struct Guard(std::process::Child);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            // SAFETY: a signal to our own child.
            unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
            let _ = self.0.wait();
        }
    }
}

#[test]
fn interrupted_it_leaves_nothing_running() {
    let mut cmd = soak(&[
        ("SOAK_SECONDS", "60"),
        ("RELOAD_EVERY", "2"),
        ("SOAK_RATE", "500"),
    ]);
    // Its own process group, so SIGINT reaches the whole group as a terminal's Ctrl-C does.
    cmd.process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SIGINT and SIGQUIT at their defaults, as a terminal's shell starts a command: a suite run
    // as a background job of a non-interactive shell (`bash .ci/run &`) inherits them ignored,
    // and bash can neither trap nor reset a signal ignored on entry.
    // SAFETY: only sigaction-level calls between fork and exec, which are async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGQUIT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut g = Guard(cmd.spawn().unwrap());
    let child = &mut g.0;
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut started = String::new();
    let mut line = String::new();
    // Wait for the pids of load, backend, nginx and its first worker.
    while err.read_line(&mut line).unwrap() > 0 {
        if line.starts_with("soak: started ") {
            started = line.clone();
            break;
        }
        line.clear();
    }
    let m = fields(&started);
    let mut ps = pids(&m, "started");
    assert_eq!(ps.len(), 4, "{started}");
    std::thread::sleep(Duration::from_secs(5));
    // The workers of now (the reloads replaced the first one).
    let nginx = &m["started.nginx"];
    let children =
        std::fs::read_to_string(format!("/proc/{nginx}/task/{nginx}/children")).unwrap_or_default();
    let now: Vec<String> = children.split_whitespace().map(String::from).collect();
    assert_eq!(now.len(), 1, "one worker at a time: {now:?}");
    assert_ne!(now[0], ps[3], "the reloads replaced the first worker");
    ps.extend(now);
    // The first worker has exited (replaced); the others are running.
    for p in ps.iter().filter(|p| **p != ps[3]) {
        assert!(
            alive(p),
            "{p} of {ps:?} is not running before the interrupt"
        );
    }
    // The script's signal dispositions, for the message should it not react: an inherited
    // ignored SIGINT cannot be trapped by bash.
    let dispositions: String = std::fs::read_to_string(format!("/proc/{}/status", child.id()))
        .unwrap_or_default()
        .lines()
        .filter(|l| {
            l.starts_with("SigIgn:") || l.starts_with("SigCgt:") || l.starts_with("SigBlk:")
        })
        .collect::<Vec<_>>()
        .join(" ");
    // SAFETY: a signal to the process group we created.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > Duration::from_secs(30) {
            // SAFETY: as above: no pointers, and the group is the one we created. The script's
            // children run in sessions of their own: they are killed by pid, so that a failing
            // test leaves nothing running either.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            for p in &ps {
                if let Ok(pid) = p.parse::<i32>() {
                    // SAFETY: a signal to a pid the script reported as its own child.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
            panic!("the script did not exit within 30 s of SIGINT ({dispositions})");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(130), "{status}");
    drop(err);
    let left: Vec<_> = ps.iter().filter(|p| alive(p)).collect();
    assert!(left.is_empty(), "still running after SIGINT: {left:?}");
}

#[test]
fn bad_knobs_exit_2_with_one_line() {
    for (k, v, want) in [
        (
            "SOAK_SECONDS",
            "1m",
            "soak: SOAK_SECONDS must be a positive whole number, not '1m'",
        ),
        (
            "SOAK_RSS_BOUND",
            "x",
            "soak: SOAK_RSS_BOUND must be a number like 1.10, not 'x'",
        ),
    ] {
        let out = soak(&[(k, v)]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{k}={v}: {err}");
        assert_eq!(err.trim_end(), want);
    }
}
