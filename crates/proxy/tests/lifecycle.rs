//! Replicas as processes: start after `nginx -t`, reload timed by generation and old-worker exit,
//! refused reloads leave the running config alone, two replicas share a port with reuseport,
//! every stop mode ends every process, and nothing outlives the test process.

mod common;

use common::{context, get, parse, scratch, start, wait_gone, Backend};
use proxybench_proxy::driver::Replica as _;
use proxybench_proxy::nginx::{self, Replica, StopMode};
use proxybench_proxy::{Error, ProxyConfig};
use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

fn one_route(workers: u32) -> ProxyConfig {
    parse(&format!(
        r#"
[proxy]
worker_processes = {workers}
[[proxy.listeners]]
name = "http"
[[proxy.upstreams]]
name = "a"
backends = "a"
keepalive = 4
[[proxy.routes]]
path = "/"
upstream = "a"
"#
    ))
}

fn group(b: &Backend) -> Vec<(&'static str, Vec<SocketAddr>)> {
    vec![("a", vec![b.addr])]
}

#[test]
fn reload_serves_the_new_generation_and_times_it() {
    let a = Backend::start("a");
    let b = Backend::start("b");
    let cfg = one_route(2);
    let dir = scratch("reload");
    let mut ctx = context(&cfg, dir.path(), &group(&a));
    let mut r = start("nginx-0", &cfg, &mut ctx, dir.path());
    let port = ctx.ports["http"];
    assert_eq!(get(port, "/", "x").body, "a");
    let before = r.pids();
    assert_eq!(before.len(), 3, "master and two workers: {before:?}");
    let origin = Instant::now();
    for generation in 2..=4u64 {
        ctx.generation = generation;
        let target = if generation % 2 == 0 { &b } else { &a };
        ctx.groups.insert("a".into(), vec![target.addr]);
        let old = r.pids();
        let conf = nginx::render(&cfg, &ctx).unwrap();
        let call = Instant::now();
        let mut rec = r.reload(&conf, generation, origin);
        let call_ms = call.elapsed().as_secs_f64() * 1e3;
        // The old workers may still be finishing when the new generation serves; their exit is
        // timed by a watcher and settled into the record.
        proxybench_proxy::driver::settle_reloads(std::slice::from_mut(&mut rec));
        let settled_ms = call.elapsed().as_secs_f64() * 1e3;
        assert_eq!(rec.error, None);
        assert_eq!(rec.replica, "nginx-0");
        assert_eq!(rec.generation, generation);
        assert!(rec.validate_ms > 0.0 && rec.validate_ms < call_ms);
        assert!(rec.t_s >= 0.0 && rec.t_s < origin.elapsed().as_secs_f64());
        // Both times run from the signal, which came after nginx -t: serving within the call,
        // the old workers' exit by the time it is settled.
        let served = rec.served_ms.expect("served");
        let exited = rec.old_workers_exited_ms.expect("old workers exited");
        let after_check = call_ms - rec.validate_ms;
        assert!(
            served > 0.0 && served <= after_check,
            "served_ms {served} of {after_check}"
        );
        assert!(
            exited > 0.0 && exited <= settled_ms - rec.validate_ms,
            "exited_ms {exited} of {settled_ms}"
        );
        let resp = get(port, "/", "x");
        assert_eq!(resp.body, target.name);
        assert_eq!(
            resp.header("X-Config-Generation"),
            Some(generation.to_string().as_str())
        );
        assert_eq!(r.generation(), generation);
        // The old workers are gone and new ones serve; the master stays.
        let now = r.pids();
        assert_eq!(now[0], old[0]);
        assert!(
            old[1..].iter().all(|p| !now.contains(p)),
            "old {old:?} now {now:?}"
        );
        assert_eq!(now.len(), 3);
    }
}

#[test]
fn a_refused_reload_keeps_the_running_config() {
    let a = Backend::start("a");
    let cfg = one_route(1);
    let dir = scratch("refused");
    let mut ctx = context(&cfg, dir.path(), &group(&a));
    let mut r = start("nginx-0", &cfg, &mut ctx, dir.path());
    let port = ctx.ports["http"];
    let on_disk = std::fs::read_to_string(r.dir().join("nginx.conf")).unwrap();
    let pids = r.pids();
    let mut bad = cfg.clone();
    bad.raw.http = "bogus_directive on;".into();
    ctx.generation = 2;
    let conf = nginx::render(&bad, &ctx).unwrap();
    let rec = r.reload(&conf, 2, Instant::now());
    let err = rec.error.expect("refused");
    assert!(
        err.starts_with("nginx: [emerg] unknown directive \"bogus_directive\" in "),
        "{err}"
    );
    assert_eq!((rec.served_ms, rec.old_workers_exited_ms), (None, None));
    assert_eq!(
        std::fs::read_to_string(r.dir().join("nginx.conf")).unwrap(),
        on_disk
    );
    assert_eq!(r.pids(), pids, "no signal was sent");
    let resp = get(port, "/", "x");
    assert_eq!(
        (resp.status, resp.header("X-Config-Generation")),
        (200, Some("1"))
    );
    assert_eq!(r.generation(), 1);
    // Reloading to the generation already served would time nothing: refused.
    let rec = r.reload(
        &nginx::render(&cfg, &ctx_gen(&ctx, 1)).unwrap(),
        1,
        Instant::now(),
    );
    assert!(rec
        .error
        .unwrap()
        .contains("generation 1 is already served"));
}

fn ctx_gen(ctx: &nginx::RenderContext, generation: u64) -> nginx::RenderContext {
    nginx::RenderContext {
        generation,
        ..ctx.clone()
    }
}

#[test]
fn a_reload_the_master_cannot_apply_is_recorded_with_its_emerg() {
    let a = Backend::start("a");
    let cfg = one_route(1);
    let dir = scratch("emerg");
    let mut ctx = context(&cfg, dir.path(), &group(&a));
    let mut r = start("nginx-0", &cfg, &mut ctx, dir.path());
    // A port held by a socket without SO_REUSEPORT: `nginx -t` ignores EADDRINUSE, the master
    // does not, and keeps the old config.
    let squatter = TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = squatter.local_addr().unwrap().port();
    let mut grown = cfg.clone();
    grown.listeners.push(proxybench_proxy::config::Listener {
        name: "extra".into(),
        port: Some(taken),
        ..Default::default()
    });
    ctx.generation = 2;
    let conf = nginx::render(&grown, &ctx).unwrap();
    let on_disk = std::fs::read_to_string(r.dir().join("nginx.conf")).unwrap();
    let rec = r.reload(&conf, 2, Instant::now());
    assert_eq!(
        std::fs::read_to_string(r.dir().join("nginx.conf")).unwrap(),
        on_disk
    );
    let err = rec.error.expect("master refused");
    assert!(
        err.contains(&format!(
            "bind() to 127.0.0.1:{taken} failed (98: Address already in use)"
        )),
        "{err}"
    );
    assert_eq!(rec.served_ms, None);
    let resp = get(ctx.ports["http"], "/", "x");
    assert_eq!(resp.header("X-Config-Generation"), Some("1"));
}

#[test]
fn two_replicas_share_a_port_through_reuseport() {
    let a = Backend::start("a");
    let cfg = one_route(1);
    let dir = scratch("share");
    let mut ctx = context(&cfg, dir.path(), &group(&a));
    let mut r0 = start("nginx-0", &cfg, &mut ctx, dir.path());
    ctx.admin_port = testkit::free_port();
    let r1 = start("nginx-1", &cfg, &mut ctx, dir.path());
    let port = ctx.ports["http"];
    let origin = Instant::now();
    let (b0, b1) = (r0.status(origin).unwrap(), r1.status(origin).unwrap());
    // Each request is a new connection; the kernel spreads them over both replicas' sockets.
    for _ in 0..200 {
        assert_eq!(get(port, "/", "x").status, 200);
    }
    let (s0, s1) = (r0.status(origin).unwrap(), r1.status(origin).unwrap());
    assert_eq!(
        (s0.replica.as_str(), s1.replica.as_str()),
        ("nginx-0", "nginx-1")
    );
    // stub_status counts the admin requests too: the sample itself.
    let (n0, n1) = (s0.requests - b0.requests - 1, s1.requests - b1.requests - 1);
    assert_eq!(n0 + n1, 200, "{s0:?} {s1:?}");
    assert!(n0 > 0 && n1 > 0, "both replicas served: {n0} / {n1}");
    assert_eq!(a.requests(), 200);
    // With one replica gone gracefully, the other takes every connection.
    r0.stop(StopMode::Graceful).unwrap();
    for _ in 0..50 {
        assert_eq!(get(port, "/", "x").status, 200);
    }
    assert_eq!(r1.status(origin).unwrap().requests, s1.requests + 1 + 50);
    let logs = proxybench_proxy::logs::summarize(
        proxybench_proxy::logs::LogFormat::NginxJson,
        &[r0.access_log_path(), r1.access_log_path()],
        &[r0.error_log_path(), r1.error_log_path()],
    )
    .unwrap();
    assert_eq!(logs.access_lines, 250);
    assert_eq!(logs.access_status.get(&200), Some(&250));
    assert_eq!(logs.upstream_addr.get(&a.addr.to_string()), Some(&250));
}

#[test]
fn every_stop_mode_ends_every_process() {
    let a = Backend::with_delay("a", Duration::from_millis(700));
    let cfg = one_route(2);
    for mode in [StopMode::Graceful, StopMode::Fast, StopMode::Kill] {
        let dir = scratch("stop");
        let mut ctx = context(&cfg, dir.path(), &group(&a));
        let mut r = start("nginx-0", &cfg, &mut ctx, dir.path());
        let pids = all_workers_up(&r);
        let port = ctx.ports["http"];
        // A request in flight when the stop arrives.
        let inflight = std::thread::spawn(move || {
            common::try_request(port, "GET", "/", "x", &[])
                .map(|r| r.status)
                .unwrap_or(0)
        });
        std::thread::sleep(Duration::from_millis(250));
        let t0 = Instant::now();
        r.stop(mode).unwrap();
        assert!(!r.is_running());
        assert!(r.pids().is_empty());
        assert_eq!(
            wait_gone(&pids, Duration::from_secs(2)),
            Vec::<u32>::new(),
            "{mode:?}"
        );
        let status = inflight.join().unwrap();
        match mode {
            // SIGQUIT lets the request finish first.
            StopMode::Graceful => {
                assert_eq!(status, 200);
                assert!(t0.elapsed() >= Duration::from_millis(200));
            }
            // SIGTERM and SIGKILL drop it.
            StopMode::Fast | StopMode::Kill => assert_ne!(status, 200, "{mode:?}"),
        }
        // Stopping twice is harmless.
        r.stop(StopMode::Kill).unwrap();
    }
}

#[test]
fn dropping_a_replica_leaves_no_process() {
    let a = Backend::start("a");
    let cfg = one_route(2);
    let dir = scratch("drop");
    let mut ctx = context(&cfg, dir.path(), &group(&a));
    let r = start("nginx-0", &cfg, &mut ctx, dir.path());
    let pids = all_workers_up(&r);
    let handle = r.handle();
    assert_eq!(handle.pids(), pids);
    drop(r);
    assert_eq!(wait_gone(&pids, Duration::from_secs(2)), Vec::<u32>::new());
    assert!(handle.pids().is_empty());
}

#[test]
fn start_refuses_bad_configs_with_nginx_words() {
    let a = Backend::start("a");
    let mut cfg = one_route(1);
    cfg.raw.server = "listen_harder on;".into();
    let dir = scratch("badstart");
    let mut ctx = context(&cfg, dir.path(), &group(&a));
    ctx.prefix = dir.path().join("nginx-0");
    let conf = nginx::render(&cfg, &ctx).unwrap();
    match Replica::start("nginx-0", &ctx.prefix, &conf, ctx.admin_port, 1) {
        Err(Error::Refused(m)) => assert!(
            m.starts_with("nginx: [emerg] unknown directive \"listen_harder\""),
            "{m}"
        ),
        other => panic!("{other:?}"),
    }
    // A config rendered for another directory is refused before nginx runs.
    match Replica::start(
        "nginx-0",
        &dir.path().join("elsewhere"),
        &conf,
        ctx.admin_port,
        1,
    ) {
        Err(Error::Invalid(m)) => assert!(m.contains("RenderContext.prefix"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn stub_status_counts_requests() {
    let a = Backend::start("a");
    let cfg = one_route(1);
    let dir = scratch("stub");
    let mut ctx = context(&cfg, dir.path(), &group(&a));
    let r = start("nginx-0", &cfg, &mut ctx, dir.path());
    let origin = Instant::now();
    let s0 = r.status(origin).unwrap();
    for _ in 0..7 {
        get(ctx.ports["http"], "/", "x");
    }
    let s1 = r.status(origin).unwrap();
    assert_eq!(
        s1.requests - s0.requests,
        8,
        "7 requests and the stub read itself"
    );
    assert_eq!(s1.accepts - s0.accepts, 8);
    assert!(s1.active >= 1 && s1.writing >= 1, "{s1:?}");
    assert!(s1.t_s >= s0.t_s);
}

/// Runs in two roles: the test starts itself again as a child that starts a replica and waits to
/// be killed; the test then SIGKILLs the child and checks that nginx went with it.
#[test]
fn killing_the_parent_takes_nginx_down() {
    const ROLE: &str = "PB_PROXY_ORPHAN_CHILD";
    if let Ok(out) = std::env::var(ROLE) {
        let a = Backend::start("a");
        let cfg = one_route(2);
        // Inside the parent's scratch directory, which the parent removes.
        let dir = std::path::Path::new(&out).parent().unwrap().to_path_buf();
        let mut ctx = context(&cfg, &dir, &group(&a));
        // Started from a short-lived thread, as an action thread of the bench would.
        let r = std::thread::spawn(move || start("nginx-0", &cfg, &mut ctx, &dir))
            .join()
            .unwrap();
        let pids: Vec<String> = r.pids().iter().map(u32::to_string).collect();
        std::fs::write(format!("{out}.tmp"), pids.join(" ")).unwrap();
        std::fs::rename(format!("{out}.tmp"), &out).unwrap();
        std::thread::sleep(Duration::from_secs(60));
        unreachable!("the parent kills this process");
    }
    let dir = scratch("orphan-parent");
    let out = dir.path().join("pids");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "killing_the_parent_takes_nginx_down",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, &out)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !out.exists() {
        assert!(Instant::now() < deadline, "the child never started nginx");
        assert!(
            child.try_wait().unwrap().is_none(),
            "the child exited early"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let pids: Vec<u32> = std::fs::read_to_string(&out)
        .unwrap()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 3, "master and two workers");
    assert!(
        pids.iter().all(|&p| common::alive(p)),
        "nginx outlived its starting thread"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let left = wait_gone(&pids, Duration::from_secs(5));
    for &p in &left {
        // SAFETY: kill(2) takes no pointers; at worst a reused pid gets the signal, which puts
        // no memory at stake.
        unsafe { libc::kill(p as i32, libc::SIGKILL) };
    }
    assert_eq!(
        left,
        Vec::<u32>::new(),
        "nginx processes outlived their parent"
    );
}

/// The master and its two workers, once both workers are forked: a replica counts as started when
/// its admin listener answers, which one worker is enough for, so the second may still be coming.
fn all_workers_up(r: &Replica) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let pids = r.pids();
        if pids.len() == 3 || Instant::now() >= deadline {
            assert_eq!(pids.len(), 3, "master and two workers: {pids:?}");
            return pids;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
