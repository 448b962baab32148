//! Distributed load on loopback: real `proxybench agent` processes driven by a real coordinator
//! against the real proxybench backend, whose own request count is the reference. The merge is
//! checked against histograms rebuilt from every input's samples, and `proxybench merge` of the
//! saved files must reproduce the run's merged result byte for byte.

mod common;

use hdrhistogram::Histogram;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

fn pb() -> Command {
    Command::new(env!("CARGO_BIN_EXE_proxybench"))
}

/// Kills the child when the test ends, however it ends.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A backend instance on an OS-picked port: its guard and address.
fn backend() -> (Guard, String) {
    let mut child = pb()
        .args(["backend", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line.trim().split_once(' ').unwrap().1.to_string();
    (Guard(child), addr)
}

/// The backend's own count of requests it answered, from its SIGTERM summary.
fn served(mut g: Guard, addr: &str) -> u64 {
    let ok = Command::new("kill")
        .args(["-TERM", &g.0.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    g.0.wait().unwrap();
    let mut err = String::new();
    g.0.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let key = format!("backend-0 {addr}: ");
    let line = err
        .lines()
        .find_map(|l| l.trim().strip_prefix(&key))
        .unwrap_or_else(|| panic!("no count for {addr} in {err}"));
    line.split(' ').next().unwrap().parse().unwrap()
}

/// `n` agents on OS-picked ports with the token in `token`: their guards and addresses.
fn agents(n: usize, token: &Path) -> (Vec<Guard>, Vec<String>) {
    let mut guards = Vec::new();
    let mut addrs = Vec::new();
    for _ in 0..n {
        let mut child = pb()
            .args(["agent", "--listen", "127.0.0.1:0", "--token-file"])
            .arg(token)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("proxybench agent listening on ")
            .unwrap_or_else(|| panic!("{line}"))
            .to_string();
        guards.push(Guard(child));
        addrs.push(addr);
    }
    (guards, addrs)
}

fn read(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn decode(s: &str) -> Histogram<u64> {
    agent::merge::decode(s).unwrap()
}

/// The merged result's percentiles equal those of one histogram holding every input's samples
/// (rebuilt here from the inputs' per-second histograms), overall and second by second.
fn assert_identity(merged: &serde_json::Value, parts: &[serde_json::Value]) {
    let mut all = agent::merge::new_hist();
    let mut per_second: std::collections::BTreeMap<u64, Histogram<u64>> = Default::default();
    let base = parts
        .iter()
        .map(|p| p["origin_unix_ns"].as_u64().unwrap())
        .min()
        .unwrap();
    assert_eq!(merged["origin_unix_ns"].as_u64().unwrap(), base);
    for p in parts {
        let shift = ((p["origin_unix_ns"].as_u64().unwrap() - base) as f64 / 1e9).round() as u64;
        for s in p["seconds_hdr"].as_array().unwrap() {
            let h = decode(s["hdr"].as_str().unwrap());
            all.add(&h).unwrap();
            per_second
                .entry(s["t"].as_u64().unwrap() + shift)
                .or_insert_with(agent::merge::new_hist)
                .add(&h)
                .unwrap();
        }
    }
    let lat = &merged["latency"];
    let max = lat["max_us"].as_u64().unwrap();
    assert_eq!(lat["count"].as_u64().unwrap(), all.len());
    assert_eq!(all.highest_equivalent(max), all.max());
    assert_eq!(decode(lat["hdr"].as_str().unwrap()), all);
    for p in lat["percentiles"].as_array().unwrap() {
        let q = p["p"].as_f64().unwrap();
        let want = all.value_at_quantile(q / 100.0).min(max);
        assert_eq!(p["us"].as_u64().unwrap(), want, "p{q}");
    }
    let timeline = merged["timeline"].as_array().unwrap();
    assert_eq!(timeline.len(), per_second.len());
    for row in timeline {
        let t = row["t"].as_u64().unwrap();
        let h = &per_second[&t];
        assert_eq!(row["requests"].as_u64().unwrap(), h.len(), "second {t}");
        let m = row["max_us"].as_u64().unwrap();
        for (k, q) in [("p50_us", 0.5), ("p90_us", 0.9), ("p99_us", 0.99)] {
            let want = if h.is_empty() {
                0
            } else {
                h.value_at_quantile(q).min(m)
            };
            assert_eq!(row[k].as_u64().unwrap(), want, "second {t} {k}");
        }
    }
}

/// `proxybench merge` of `files` into `out`.
fn merge(files: &[std::path::PathBuf], out: &Path) -> Output {
    pb().arg("merge")
        .args(files)
        .arg("-o")
        .arg(out)
        .output()
        .unwrap()
}

#[test]
fn three_agents_count_exactly_what_the_server_answered_and_merge_reproduces_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret-for-the-agents\n").unwrap();
    let (b, target) = backend();
    let (_agents, hosts) = agents(3, &token);
    let saved = dir.path().join("saved");
    // 700 r/s for 2 s: 1400 requests, which 3 agents cannot share evenly.
    let out = pb()
        .args([
            "load", "-R", "700", "-d", "2s", "-c", "6", "--format", "json",
        ])
        .args(["--agent-hosts", &hosts.join(",")])
        .arg("--token-file")
        .arg(&token)
        .arg("--save-agents")
        .arg(&saved)
        .arg(format!("http://{target}/"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    for h in &hosts {
        assert!(
            stderr.contains(&format!("agent {h} clock offset")),
            "{stderr}"
        );
    }
    let run_json = String::from_utf8(out.stdout).unwrap();
    let merged: serde_json::Value = serde_json::from_str(&run_json).unwrap();
    let answered = served(b, &target);
    // Every request is counted once: the merge equals the server's count and the schedule.
    assert_eq!(merged["requests"].as_u64().unwrap(), answered);
    assert_eq!(merged["schedule"]["intended"].as_u64().unwrap(), 1400);
    assert_eq!(merged["requests"].as_u64().unwrap(), 1400);
    assert_eq!(merged["connections"].as_u64().unwrap(), 6);
    assert_eq!(merged["mode"]["rate"].as_f64().unwrap(), 700.0);
    // Each agent's schedule is its exact share, so the rates add up to the whole's.
    let achieved = merged["schedule"]["achieved_rate"].as_f64().unwrap();
    assert!((achieved - 700.0).abs() < 0.5, "achieved {achieved}");
    let files: Vec<_> = (0..3)
        .map(|i| saved.join(format!("agent-{i}.json")))
        .collect();
    let parts: Vec<_> = files.iter().map(|f| read(f)).collect();
    let rows = merged["agents"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    for (i, p) in parts.iter().enumerate() {
        let share = [467, 467, 466][i];
        assert_eq!(p["requests"].as_u64().unwrap(), share, "agent {i}");
        assert_eq!(p["agent"]["host"].as_str().unwrap(), hosts[i]);
        assert!(!p["agent"]["lost"].as_bool().unwrap());
        assert_eq!(rows[i]["requests"].as_u64().unwrap(), share);
    }
    assert_identity(&merged, &parts);
    // merge of the saved files is the run's own merged result, byte for byte.
    let again = dir.path().join("merged.json");
    let m = merge(&files, &again);
    assert!(m.status.success(), "{}", String::from_utf8_lossy(&m.stderr));
    assert_eq!(std::fs::read_to_string(&again).unwrap(), run_json);
    let table = String::from_utf8(m.stdout).unwrap();
    assert!(table.contains("1400 requests in"), "{table}");
    for h in &hosts {
        assert!(table.contains(h.as_str()), "{table}");
    }
}

#[test]
fn a_request_count_is_split_exactly_in_closed_loop() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "another-token").unwrap();
    let (b, target) = backend();
    let (_agents, hosts) = agents(3, &token);
    let saved = dir.path().join("saved");
    let out = pb()
        .args(["load", "-n", "1000", "-c", "5", "--format", "json"])
        .args(["--agent-hosts", &hosts.join(",")])
        .arg("--token-file")
        .arg(&token)
        .arg("--save-agents")
        .arg(&saved)
        .arg(format!("http://{target}/"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let merged: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(merged["requests"].as_u64().unwrap(), 1000);
    assert_eq!(served(b, &target), 1000);
    let shares: Vec<(u64, u64)> = (0..3)
        .map(|i| {
            let p = read(&saved.join(format!("agent-{i}.json")));
            (
                p["requests"].as_u64().unwrap(),
                p["connections"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(shares, vec![(334, 2), (333, 2), (333, 1)]);
}

#[test]
fn a_killed_agent_is_reported_lost_with_its_partial_counts() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "tok").unwrap();
    let (_b, target) = backend();
    let (mut agents, hosts) = agents(3, &token);
    let saved = dir.path().join("saved");
    let coord = pb()
        .args([
            "load", "-R", "300", "-d", "8s", "-c", "3", "--format", "json",
        ])
        .args(["--agent-hosts", &hosts.join(",")])
        .arg("--token-file")
        .arg(&token)
        .arg("--save-agents")
        .arg(&saved)
        .arg(format!("http://{target}/"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let coord = Guard(coord);
    // Mid-run: the start is about a second after the connect, the run lasts eight.
    std::thread::sleep(std::time::Duration::from_secs(4));
    let victim = agents.remove(1);
    drop(victim);
    let mut coord = coord;
    let status = coord.0.wait().unwrap();
    let mut stdout = String::new();
    coord
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let mut stderr = String::new();
    coord
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("proxybench: agent {} lost: ", hosts[1])),
        "{stderr}"
    );
    let merged: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let lost = read(&saved.join("agent-1.json"));
    assert!(lost["agent"]["lost"].as_bool().unwrap());
    let partial = lost["requests"].as_u64().unwrap();
    assert!(partial > 0, "the lost agent sent seconds before it died");
    let rows = merged["agents"].as_array().unwrap();
    assert!(rows[1]["lost"].as_bool().unwrap());
    assert!(!rows[0]["lost"].as_bool().unwrap() && !rows[2]["lost"].as_bool().unwrap());
    // Its partial counts are in the total, never dropped.
    let sum: u64 = rows.iter().map(|r| r["requests"].as_u64().unwrap()).sum();
    assert_eq!(merged["requests"].as_u64().unwrap(), sum);
    assert_eq!(rows[1]["requests"].as_u64().unwrap(), partial);
}

#[test]
fn a_wrong_token_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "right").unwrap();
    let wrong = dir.path().join("wrong");
    std::fs::write(&wrong, "wrong").unwrap();
    let (_b, target) = backend();
    let (_agents, hosts) = agents(1, &token);
    let out = pb()
        .args([
            "load",
            "-n",
            "10",
            "--agent-hosts",
            &hosts[0],
            "--token-file",
        ])
        .arg(&wrong)
        .arg(format!("http://{target}/"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        format!("proxybench: agent {} refused: bad token", hosts[0])
    );
}

#[test]
fn merge_of_local_results_is_exact_and_reproducible() {
    let dir = tempfile::tempdir().unwrap();
    let (_b, target) = backend();
    let mut files = Vec::new();
    for (i, args) in [["-R", "400", "-d", "2s"], ["-c", "2", "-n", "700"]]
        .iter()
        .enumerate()
    {
        let out = pb()
            .arg("load")
            .args(args.iter())
            .args(["--format", "json"])
            .arg(format!("http://{target}/"))
            .output()
            .unwrap();
        assert!(out.status.success());
        let f = dir.path().join(format!("r{i}.json"));
        std::fs::write(&f, &out.stdout).unwrap();
        files.push(f);
    }
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    assert!(merge(&files, &a).status.success());
    assert!(merge(&files, &b).status.success());
    let text = std::fs::read_to_string(&a).unwrap();
    assert_eq!(text, std::fs::read_to_string(&b).unwrap());
    let merged: serde_json::Value = serde_json::from_str(&text).unwrap();
    let parts: Vec<_> = files.iter().map(|f| read(f)).collect();
    let sum = |k: &str| -> u64 { parts.iter().map(|p| p[k].as_u64().unwrap()).sum() };
    for k in ["requests", "bytes_read", "bytes_written", "connects"] {
        assert_eq!(merged[k].as_u64().unwrap(), sum(k), "{k}");
    }
    assert_eq!(merged["requests"].as_u64().unwrap(), 800 + 700);
    // The runs were one after the other: the timeline spans both on the wall clock.
    assert_identity(&merged, &parts);
    // A file that is not a result is bad input, named with its line.
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"requests\": 1,\n oops}").unwrap();
    let out = merge(&[files[0].clone(), bad.clone()], &dir.path().join("x.json"));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with(&format!("proxybench: {}:2: ", bad.display())) && err.lines().count() == 1,
        "{err}"
    );
}

/// Runs `proxybench ARGS` on a pseudo-terminal (util-linux `script`), as a person at a
/// terminal does: what the terminal showed.
fn on_a_terminal(args: &[String]) -> String {
    let cmd = std::iter::once(env!("CARGO_BIN_EXE_proxybench").to_string())
        .chain(args.iter().cloned())
        .map(|a| format!("'{a}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let out = Command::new("script")
        .args(["-q", "-e", "-c", &cmd, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}");
    text
}

/// The request count a live line shows (`... 200 req/s ...`).
fn req_per_s(line: &str) -> u64 {
    let before = line.split(" req/s").next().unwrap_or("");
    before
        .split_whitespace()
        .last()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no req/s in {line:?}"))
}

/// The live lines a terminal showed: each starts with `\r\x1b[K[` and names its second.
fn live_lines(screen: &str) -> Vec<String> {
    screen
        .split("\r\x1b[K")
        .filter(|l| l.starts_with('['))
        .map(|l| l.lines().next().unwrap_or("").to_string())
        .collect()
}

#[test]
fn live_progress_shows_every_second_on_a_terminal_for_a_local_and_a_distributed_load() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "live").unwrap();
    let (_b, target) = backend();
    let url = format!("http://{target}/");
    let local =
        on_a_terminal(&["load", "-R", "200", "-d", "3s", "-c", "2", &url].map(String::from));
    let lines = live_lines(&local);
    for s in ["[   1s]", "[   2s]"] {
        assert!(
            lines.iter().any(|l| l.starts_with(s) && req_per_s(l) > 0),
            "{s} in {lines:?}"
        );
    }
    assert!(local.contains("600 requests in"), "{local}");
    // Two agents: the merged second and each agent's share of it.
    let (_agents, hosts) = agents(2, &token);
    let args = [
        "load",
        "-R",
        "200",
        "-d",
        "3s",
        "-c",
        "2",
        "--agent-hosts",
        &hosts.join(","),
        "--token-file",
        token.to_str().unwrap(),
        &url,
    ]
    .map(String::from);
    let screen = on_a_terminal(&args);
    let lines = live_lines(&screen);
    for s in ["[   1s]", "[   2s]"] {
        let l = lines
            .iter()
            .find(|l| l.starts_with(s))
            .unwrap_or_else(|| panic!("{s} in {lines:?}"));
        // The second's total is the sum of what each agent answered in it.
        let per: Vec<u64> = l
            .rsplit_once("agents ")
            .unwrap_or_else(|| panic!("{l}"))
            .1
            .split_whitespace()
            .map(|n| n.parse().unwrap())
            .collect();
        assert_eq!(per.len(), 2, "{l}");
        assert!(per.iter().all(|&n| n > 0), "{l}");
        assert_eq!(per.iter().sum::<u64>(), req_per_s(l), "{l}");
    }
    assert!(screen.contains("600 requests in"), "{screen}");
    // Off a terminal nothing but the results is printed.
    let out = pb()
        .args(["load", "-R", "200", "-d", "1s", "-c", "2", &url])
        .output()
        .unwrap();
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A scenario whose load runs on 3 agents on the local platform: loopback `proxybench agent`
/// processes the runner starts, behind nginx with one backend group.
const ON_AGENTS: &str = r#"name = "on-agents"
description = "one open-loop load on three loopback agents"
checks = [
  "coffee.requests == 700",
  "coffee.failures == 0",
  "proxy.requests == coffee.requests",
  "backends.requests == coffee.requests",
]

[[backends]]
name = "cafe"
count = 2

[proxy]
[[proxy.listeners]]
name = "http"
server_names = ["cafe.example.com"]
[[proxy.upstreams]]
name = "cafe"
backends = "cafe"
keepalive = 8
[[proxy.routes]]
path = "/"
upstream = "cafe"

[[loads]]
name = "coffee"
url = "http://cafe.example.com/coffee"
rate = 350
connections = 6
duration = "2s"
agents = 3
"#;

#[test]
fn a_scenario_load_on_three_local_agents_is_recorded_as_their_exact_merge() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("on-agents.toml");
    std::fs::write(&file, ON_AGENTS).unwrap();
    let root = dir.path().join("results");
    let q = common::run(file.to_str().unwrap(), false, &root);
    // The checks hold: 700 requests, none failed, each in nginx's log and at a backend.
    assert_eq!(q.code, Some(0), "{}", q.text);
    let case = &q.r.cases[0];
    let load = &case.loads[0];
    assert_eq!(load.requests, 700);
    assert_eq!(load.schedule.as_ref().unwrap().intended, 700);
    assert_eq!(case.logs.access_lines, 700, "nginx's access log");
    // Where the numbers came from: three agents, each an exact share, with their clocks.
    assert_eq!(case.distributed.len(), 1);
    let d = &case.distributed[0];
    assert_eq!(d.load, "coffee");
    assert_eq!(d.place, "3 agent processes on this machine");
    assert_eq!(d.files, "agents/main/coffee");
    let shares: Vec<u64> = d.agents.iter().map(|a| a.requests).collect();
    assert_eq!(shares, vec![234, 233, 233]);
    assert!(d.lost.is_empty() && d.agents.iter().all(|a| !a.lost));
    assert_eq!(d.clock_uncertainty_us.len(), 3);
    // The load counts from the case's start, as a local load does (its agents began once the
    // stack and they were up): its seconds line up with the case's.
    assert!(load.start_s >= 0.5, "start {}", load.start_s);
    assert_eq!(load.timeline[0].t as f64, load.start_s.floor());
    assert_eq!(
        load.timeline.iter().map(|s| s.requests).sum::<u64>(),
        700,
        "{:?}",
        load.timeline
    );
    // The record keeps the agents' results, not per-request records; merging them gives the
    // load's summary.
    let parts: Vec<_> = (0..3)
        .map(|i| q.dir.join(format!("agents/main/coffee/agent-{i}.json")))
        .collect();
    assert!(!q.dir.join("requests/main/coffee.bin").exists());
    let merged = q.dir.join("merged.json");
    let m = merge(&parts, &merged);
    assert!(m.status.success(), "{}", String::from_utf8_lossy(&m.stderr));
    let again = model::LoadResult::from_json(&std::fs::read_to_string(&merged).unwrap()).unwrap();
    let mut summary = again.summary;
    summary.name = "coffee".into();
    assert_eq!(
        &summary, load,
        "the merge of the saved parts is the recorded load"
    );
    // The report says where its numbers came from.
    let report = std::fs::read_to_string(q.dir.join("report.md")).unwrap();
    assert!(
        report.contains("Ran on 3 agents (3 agent processes on this machine)"),
        "{report}"
    );
    assert!(
        report.contains("`agents/main/coffee/agent-N.json`"),
        "{report}"
    );
    // `proxybench analyse` reads the record again without per-request records for the load.
    let data = std::fs::read_to_string(q.dir.join("data.json")).unwrap();
    let a = pb().arg("analyse").arg(&q.dir).output().unwrap();
    assert_eq!(
        a.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&a.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(q.dir.join("data.json")).unwrap(),
        data
    );
}
