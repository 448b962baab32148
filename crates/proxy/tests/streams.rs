//! Long-lived connections end to end: the load engine's WebSocket, gRPC and SSE clients against
//! the emulated backend, directly and through each real proxy (nginx, HAProxy, Caddy) rendered
//! from the neutral model's `websocket` and `grpc` routes. Counts are exact: what the client
//! sent is what the backend counted, and every connection ended once, the way it was ended.
//! Then the drain knob under a reload: the old generation's WebSockets are cut when its drain
//! timeout ends (nginx's `worker_shutdown_timeout`, HAProxy's `hard-stop-after`), not before,
//! and Caddy 2.6's reload is measured for what it does.

mod common;

use backend::{Fleet, FleetConfig, InstanceConfig};
use common::{context, parse, scratch};
use model::stream::{ClosedBy, EndKind, Reconnect, StreamProtocol, StreamSummary};
use proxybench_proxy::driver::{self, RenderContext, Replica};
use proxybench_proxy::{ProxyConfig, ProxyKind};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// A fleet of one backend instance with `profile`.
fn fleet(profile: &str) -> (Fleet, SocketAddr) {
    let f = Fleet::start(FleetConfig {
        instances: vec![InstanceConfig {
            name: "app-0".into(),
            addr: "127.0.0.1:0".parse().unwrap(),
            profile: profile.parse().unwrap(),
        }],
        threads: 1,
        seed: 1,
    })
    .unwrap();
    let addr = f.addrs()[0].1;
    (f, addr)
}

/// The model: a plain listener whose `/` carries WebSockets (and SSE, plain HTTP), an h2c
/// listener whose `/` carries gRPC, both to the one backend; `extra` is added at the top.
fn model(kind: &str, extra: &str) -> ProxyConfig {
    parse(&format!(
        r#"
[proxy]
kind = "{kind}"
{extra}
[[proxy.listeners]]
name = "web"
[[proxy.listeners]]
name = "grpc"
http2 = true
[[proxy.upstreams]]
name = "app"
backends = "app"
[[proxy.upstreams]]
name = "app-h2"
backends = "app"
http2 = true
[[proxy.routes]]
path = "/"
listener = "web"
upstream = "app"
websocket = true
[[proxy.routes]]
path = "/"
listener = "grpc"
upstream = "app-h2"
grpc = true
"#
    ))
}

/// A proxy replica of `kind` for `cfg` in front of `addr`, with its context (ports) and
/// scratch directory.
struct Proxy {
    replica: Box<dyn Replica>,
    ctx: RenderContext,
    cfg: ProxyConfig,
    _dir: tempfile::TempDir,
}

fn proxy(kind: ProxyKind, cfg: ProxyConfig, addr: SocketAddr) -> Proxy {
    let dir = scratch(&format!("streams-{}", kind.name()));
    let mut ctx = context(&cfg, dir.path(), &[("app", vec![addr])]);
    let taken: Vec<u16> = ctx
        .ports
        .values()
        .copied()
        .chain([ctx.admin_port])
        .collect();
    ctx.control_port = testkit::free_ports(4)
        .into_iter()
        .find(|p| !taken.contains(p))
        .unwrap();
    ctx.prefix = dir.path().join(format!("{}-0", kind.name()));
    let d = proxybench_proxy::driver(kind);
    let rendered = d.render(&cfg, &ctx).unwrap();
    let replica = d
        .start(&format!("{}-0", kind.name()), &ctx, &rendered)
        .unwrap();
    Proxy {
        replica,
        ctx,
        cfg,
        _dir: dir,
    }
}

impl Proxy {
    fn port(&self, listener: &str) -> u16 {
        self.ctx.ports[listener]
    }

    /// Reloads with the same model as generation 2; the record says when the signal went,
    /// in seconds since `origin`.
    fn reload(&mut self, origin: Instant) -> model::ReloadRecord {
        let kind = self.cfg.kind;
        self.ctx.generation = 2;
        self.ctx.prefix = self.replica.dir().to_path_buf();
        let rendered = proxybench_proxy::driver(kind)
            .render(&self.cfg, &self.ctx)
            .unwrap();
        let r = self.replica.reload(&rendered, 2, origin);
        assert_eq!(r.error, None, "{r:?}");
        r
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.replica.stop(driver::StopMode::Fast);
    }
}

/// A stream load's config: `n` connections for `secs` seconds, nothing reconnects.
fn load_cfg(url: &str, p: StreamProtocol, n: u32, secs: u64) -> load::StreamConfig {
    let mut c = load::StreamConfig::new(url, p).unwrap();
    c.connections = n;
    c.threads = 2.min(n);
    c.duration = Some(Duration::from_secs(secs));
    c.reconnect = Reconnect::None;
    c.timeout = Duration::from_secs(3);
    c
}

fn run(c: &load::StreamConfig) -> StreamSummary {
    load::run_streams(c, &load::Control::new()).unwrap()
}

/// The backend's long-lived counters once every connection it had has ended (the counts are
/// taken as each ends, a moment after the client saw it).
fn settled(f: &Fleet) -> model::stream::BackendStreams {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let s = f.counters()[0].streams.clone().unwrap_or_default();
        if s.open == 0 || Instant::now() > deadline {
            return s;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What the backend counted of one protocol, from its per-connection lives: (connections,
/// messages in, messages out, ended by whom).
fn per_protocol(
    s: &model::stream::BackendStreams,
    p: StreamProtocol,
) -> (u64, u64, u64, Vec<ClosedBy>) {
    let lives: Vec<_> = s.lives.iter().filter(|l| l.protocol == p).collect();
    (
        lives.len() as u64,
        lives.iter().map(|l| l.messages_in).sum(),
        lives.iter().map(|l| l.messages_out).sum(),
        lives.iter().map(|l| l.by).collect(),
    )
}

/// The four protocols through `base` (a ws:// and an http:// URL prefix per listener), each
/// count held against the backend's: WebSocket echoes, gRPC unary calls, gRPC streams and
/// event streams that the backend ends after ten messages.
fn exact_counts(ws_base: &str, sse_base: &str, grpc_base: &str, f: &Fleet, via: &str) {
    f.set_profile("app-0", "".parse().unwrap()).unwrap();
    let before = settled(f);
    // WebSocket: 10 connections, 10 messages a second each, for 2 s.
    let mut c = load_cfg(&format!("{ws_base}/chat"), StreamProtocol::WebSocket, 10, 2);
    c.rate = 10.0;
    let ws = run(&c);
    let after = settled(f);
    assert_eq!(ws.opened, 10, "{via}: {:?}", ws.end_messages);
    assert_eq!(
        ws.ended.get(&EndKind::Client),
        Some(&10),
        "{via}: {:?}",
        ws.ended
    );
    assert_eq!(ws.dropped, 0, "{via}");
    assert!(ws.messages.sent >= 150, "{via}: {:?}", ws.messages);
    assert_eq!(
        ws.messages.answered, ws.messages.sent,
        "{via}: every echo came back"
    );
    assert_eq!(ws.messages.unanswered_at_end + ws.messages.lost, 0, "{via}");
    assert_eq!(ws.rtt.count, ws.messages.sent, "{via}: every echo timed");
    let (conns, got, echoed, by) = per_protocol(&after, StreamProtocol::WebSocket);
    let (conns0, got0, echoed0, _) = per_protocol(&before, StreamProtocol::WebSocket);
    assert_eq!(conns - conns0, 10, "{via}");
    assert_eq!(
        got - got0,
        ws.messages.sent,
        "{via}: the backend got what was sent"
    );
    assert_eq!(
        echoed - echoed0,
        ws.messages.answered,
        "{via}: it echoed what came back"
    );
    assert!(
        by.iter()
            .skip(conns0 as usize)
            .all(|b| *b == ClosedBy::Client),
        "{via}: {by:?}"
    );
    assert_eq!(
        after.close_codes_received.get(&1000).copied().unwrap_or(0)
            - before.close_codes_received.get(&1000).copied().unwrap_or(0),
        10,
        "{via}: each client closed with 1000"
    );

    // gRPC unary: 5 connections, 20 calls a second each, for 2 s.
    let before = settled(f);
    let mut c = load_cfg(&format!("{grpc_base}/"), StreamProtocol::GrpcUnary, 5, 2);
    c.rate = 20.0;
    let unary = run(&c);
    let after = settled(f);
    assert_eq!(unary.opened, 5, "{via}: {:?}", unary.end_messages);
    assert!(unary.messages.sent >= 150, "{via}: {:?}", unary.messages);
    assert_eq!(unary.messages.answered, unary.messages.sent, "{via}");
    assert_eq!(
        unary.grpc_status.get(&0),
        Some(&unary.messages.sent),
        "{via}"
    );
    assert_eq!(
        unary.messages.pushed, unary.messages.sent,
        "{via}: one message per answer"
    );
    let ok = |s: &model::stream::BackendStreams| s.grpc_status.get(&0).copied().unwrap_or(0);
    assert_eq!(ok(&after) - ok(&before), unary.messages.sent, "{via}");

    // gRPC server streams: the backend ends each after 10 messages with OK.
    f.set_profile("app-0", TEN.parse().unwrap()).unwrap();
    let before = settled(f);
    let c = load_cfg(&format!("{grpc_base}/"), StreamProtocol::GrpcStream, 5, 3);
    let stream = run(&c);
    let after = settled(f);
    assert_eq!(
        stream.ended.get(&EndKind::GrpcStatus),
        Some(&5),
        "{via}: {:?} {:?}",
        stream.ended,
        stream.end_messages
    );
    assert_eq!(stream.messages.pushed, 50, "{via}");
    assert_eq!(
        stream.gap.count, 45,
        "{via}: a gap between each two messages"
    );
    let (conns, got, sent, by) = per_protocol(&after, StreamProtocol::GrpcStream);
    let (conns0, got0, sent0, _) = per_protocol(&before, StreamProtocol::GrpcStream);
    assert_eq!(
        (conns - conns0, got - got0, sent - sent0),
        (5, 5, 50),
        "{via}"
    );
    assert!(
        by.iter()
            .skip(conns0 as usize)
            .all(|b| *b == ClosedBy::Server),
        "{via}: {by:?}"
    );

    // Server-sent events: the backend ends each stream after 10 events.
    let before = settled(f);
    let c = load_cfg(&format!("{sse_base}/events"), StreamProtocol::Sse, 5, 3);
    let sse = run(&c);
    let after = settled(f);
    assert_eq!(
        sse.ended.get(&EndKind::Complete),
        Some(&5),
        "{via}: {:?} {:?}",
        sse.ended,
        sse.end_messages
    );
    assert_eq!(sse.messages.pushed, 50, "{via}");
    let (conns, _, sent, _) = per_protocol(&after, StreamProtocol::Sse);
    let (conns0, _, sent0, _) = per_protocol(&before, StreamProtocol::Sse);
    assert_eq!((conns - conns0, sent - sent0), (5, 50), "{via}");
}

/// The profile of the exact-count backend: ten pushes a second, ten per stream.
const TEN: &str = "push=10; push_count=10";

#[test]
fn counts_are_exact_against_the_backend_directly() {
    let (f, addr) = fleet(TEN);
    exact_counts(
        &format!("ws://{addr}"),
        &format!("http://{addr}"),
        &format!("http://{addr}"),
        &f,
        "direct",
    );
}

#[test]
fn counts_are_exact_through_nginx() {
    through(ProxyKind::Nginx);
}

#[test]
fn counts_are_exact_through_haproxy() {
    through(ProxyKind::Haproxy);
}

#[test]
fn counts_are_exact_through_caddy() {
    through(ProxyKind::Caddy);
}

fn through(kind: ProxyKind) {
    let (f, addr) = fleet(TEN);
    let p = proxy(kind, model(kind.name(), ""), addr);
    let web = p.port("web");
    let grpc = p.port("grpc");
    exact_counts(
        &format!("ws://127.0.0.1:{web}"),
        &format!("http://127.0.0.1:{web}"),
        &format!("http://127.0.0.1:{grpc}"),
        &f,
        kind.name(),
    );
}

#[test]
fn nginx_without_the_websocket_route_strips_the_upgrade_and_each_refusal_is_counted() {
    let (f, addr) = fleet("");
    let mut cfg = model("nginx", "");
    cfg.routes[0].websocket = false;
    let p = proxy(ProxyKind::Nginx, cfg, addr);
    let mut c = load_cfg(
        &format!("ws://127.0.0.1:{}/chat", p.port("web")),
        StreamProtocol::WebSocket,
        4,
        1,
    );
    c.reconnect = Reconnect::Backoff;
    c.backoff = Duration::from_millis(50);
    c.backoff_max = Duration::from_millis(50);
    let s = run(&c);
    // nginx drops Upgrade (a hop-by-hop header): the backend answers a plain GET with 200.
    assert_eq!(s.opened, 0);
    let refused = s.refused_status.get(&200).copied().unwrap_or(0);
    assert!(refused >= 8, "{:?}", s.refused_status);
    assert_eq!(s.ended.get(&EndKind::Refused), Some(&refused));
    assert_eq!(
        s.attempts,
        refused + s.ended.get(&EndKind::Client).copied().unwrap_or(0)
    );
    assert!(s.end_messages[&EndKind::Refused].contains("instead of 101"));
    assert_eq!(settled(&f).ws_opened, 0);
}

/// How each WebSocket held through a reload ended at the client (its end, its close code, and
/// seconds from the reload's signal), and what the backend saw of them.
struct Reloaded {
    ends: Vec<(EndKind, Option<u16>, f64)>,
    backend: model::stream::BackendStreams,
}

/// 20 WebSockets held through a reload of `kind` with a drain timeout of 3 s; nothing
/// reconnects.
fn reload_under_websockets(kind: ProxyKind) -> Reloaded {
    let (f, addr) = fleet("");
    let mut p = proxy(
        kind,
        model(kind.name(), "worker_shutdown_timeout = \"3s\""),
        addr,
    );
    let mut c = load_cfg(
        &format!("ws://127.0.0.1:{}/chat", p.port("web")),
        StreamProtocol::WebSocket,
        20,
        7,
    );
    c.rate = 5.0;
    let ctl = load::Control::new();
    let origin = ctl.origin;
    let (summary, reload) = std::thread::scope(|s| {
        let h = s.spawn(|| load::run_streams(&c, &ctl).unwrap());
        let deadline = Instant::now() + Duration::from_secs(10);
        while f.counters()[0].streams.as_ref().map_or(0, |s| s.open) < 20 {
            assert!(Instant::now() < deadline, "the 20 WebSockets never opened");
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(300));
        let r = p.reload(origin);
        (h.join().unwrap(), r)
    });
    assert_eq!(summary.opened, 20, "{:?}", summary.end_messages);
    assert_eq!(summary.lives.len(), 20, "nothing reconnects");
    Reloaded {
        ends: summary
            .lives
            .iter()
            .map(|l| (l.end, l.close_code, l.end_us as f64 / 1e6 - reload.t_s))
            .collect(),
        backend: settled(&f),
    }
}

/// The drain timeout's shape: every WebSocket is cut (a FIN, or a reset when the proxy had
/// unread bytes of it; no close frame) between 3 and 3.5 s after the reload, none before; the
/// backend sees each go without a close frame too.
fn cut_at_the_drain_timeout(kind: ProxyKind) {
    testkit::in_one_of(3, || {
        let r = reload_under_websockets(kind);
        let ends = &r.ends;
        // Hard: none ends before the drain timeout, and none with a close frame.
        for (end, _, t) in ends {
            assert!(
                *t >= 3.0,
                "a WebSocket ended {t:.3} s after the reload: {ends:?}"
            );
            // A FIN, or a reset when a message of the client's was still unread.
            assert!(
                matches!(end, EndKind::Fin | EndKind::Reset),
                "not cut without a close frame: {ends:?}"
            );
        }
        assert_eq!(r.backend.dropped, 20, "{:?}", r.backend);
        assert!(r.backend.close_codes_sent.is_empty() && r.backend.close_codes_received.is_empty());
        let late: Vec<_> = ends.iter().filter(|(_, _, t)| *t > 3.5).collect();
        if late.is_empty() {
            Ok(())
        } else {
            Err(format!("ended later than 3.5 s after the reload: {late:?}"))
        }
    });
}

#[test]
fn nginx_cuts_the_old_workers_websockets_when_worker_shutdown_timeout_ends() {
    cut_at_the_drain_timeout(ProxyKind::Nginx);
}

#[test]
fn haproxy_cuts_the_old_processs_websockets_when_hard_stop_after_ends() {
    cut_at_the_drain_timeout(ProxyKind::Haproxy);
}

/// Caddy 2.6 does not hold WebSockets through a reload for its grace period: unloading the old
/// configuration closes every upgraded connection at once, with a close frame 1001 (going
/// away) to the client; the backend's side is closed too, and now and then the backend reads
/// a 1001 frame of Caddy's before the close.
#[test]
fn caddy_2_6_closes_websockets_at_the_reload_with_1001_whatever_the_grace_period() {
    let r = reload_under_websockets(ProxyKind::Caddy);
    for (end, code, t) in &r.ends {
        assert!(
            (0.0..1.0).contains(t),
            "a WebSocket ended {t:.3} s after the reload: {:?}",
            r.ends
        );
        assert_eq!(
            (*end, *code),
            (EndKind::CloseFrame, Some(1001)),
            "{:?}",
            r.ends
        );
    }
    let b = &r.backend;
    assert_eq!(b.dropped + b.closed_by_client, 20, "{b:?}");
    assert_eq!(
        b.close_codes_received.get(&1001).copied().unwrap_or(0),
        b.closed_by_client,
        "{b:?}"
    );
}

#[test]
fn a_grpc_deadline_ends_each_stream_with_deadline_exceeded_from_the_backend() {
    let (f, addr) = fleet("push=20");
    let mut c = load_cfg(&format!("http://{addr}/"), StreamProtocol::GrpcStream, 4, 3);
    c.deadline = Some(Duration::from_millis(300));
    let s = run(&c);
    assert_eq!(
        s.ended.get(&EndKind::GrpcStatus),
        Some(&4),
        "{:?}",
        s.end_messages
    );
    assert_eq!(s.grpc_status.get(&4), Some(&4));
    assert!(s.messages.pushed >= 4 * 4, "{:?}", s.messages);
    for l in &s.lives {
        let took = l.end_us - l.start_us;
        assert!(took >= 300_000, "a call ended {took} us after it started");
        assert_eq!(l.grpc_status, Some(4));
    }
    let b = settled(&f);
    assert_eq!(b.grpc_status.get(&4), Some(&4));
    assert_eq!(b.closed_by_server, 4);
}

#[test]
fn reconnects_follow_the_policy_and_each_life_names_the_next() {
    let (_f, addr) = fleet("push=100; push_count=2");
    let mut c = load_cfg(&format!("http://{addr}/events"), StreamProtocol::Sse, 3, 1);
    c.reconnect = Reconnect::Immediate;
    let s = run(&c);
    assert!(s.reconnects >= 3, "{s:?}");
    assert_eq!(s.attempts, 3 + s.reconnects);
    assert_eq!(s.lives.len() as u64, s.attempts);
    for conn in 0..3 {
        let mine: Vec<_> = s.lives.iter().filter(|l| l.conn == conn).collect();
        for (k, l) in mine.iter().enumerate() {
            assert_eq!(l.attempt as usize, k);
            match mine.get(k + 1) {
                Some(next) => {
                    assert_eq!(l.end, EndKind::Complete);
                    assert_eq!(l.next_us, Some(next.start_us));
                    assert!(next.start_us >= l.end_us);
                }
                None => assert_eq!(l.next_us, None),
            }
        }
    }
    // Each stream of two events ended by the server: two events per completed life.
    let complete = s.ended[&EndKind::Complete];
    assert!(s.messages.pushed >= 2 * complete, "{:?}", s.messages);
}

#[test]
fn wss_and_grpc_over_tls_through_nginx() {
    let (f, addr) = fleet("");
    let cfg = parse(
        r#"
[proxy]
kind = "nginx"
[[proxy.listeners]]
name = "tls"
tls = true
http2 = true
server_names = ["cafe.example.com"]
[[proxy.upstreams]]
name = "app"
backends = "app"
[[proxy.upstreams]]
name = "app-h2"
backends = "app"
http2 = true
[[proxy.routes]]
path = "/"
upstream = "app"
websocket = true
[[proxy.routes]]
path = "/proxybench.Bench/"
upstream = "app-h2"
grpc = true
"#,
    );
    let p = proxy(ProxyKind::Nginx, cfg, addr);
    let port = p.port("tls");
    let ca = p.ctx.tls.as_ref().unwrap().ca.clone();
    let tls = |c: &mut load::StreamConfig| {
        c.cacert = Some(ca.clone());
        c.resolve
            .push(load::Resolve::parse(&format!("cafe.example.com:{port}:127.0.0.1")).unwrap());
    };
    let mut c = load_cfg(
        &format!("wss://cafe.example.com:{port}/chat"),
        StreamProtocol::WebSocket,
        4,
        1,
    );
    c.rate = 20.0;
    tls(&mut c);
    let ws = run(&c);
    assert_eq!(ws.opened, 4, "{:?}", ws.end_messages);
    assert_eq!(ws.messages.answered, ws.messages.sent);
    let mut c = load_cfg(
        &format!("https://cafe.example.com:{port}/"),
        StreamProtocol::GrpcUnary,
        2,
        1,
    );
    c.rate = 20.0;
    tls(&mut c);
    let unary = run(&c);
    assert_eq!(unary.opened, 2, "{:?}", unary.end_messages);
    assert_eq!(unary.grpc_status.get(&0), Some(&unary.messages.sent));
    let b = settled(&f);
    assert_eq!(b.messages_in, ws.messages.sent + unary.messages.sent);
}

#[test]
fn a_refused_target_is_not_hammered_even_with_immediate_reconnects() {
    let port = testkit::free_port();
    let mut c = load_cfg(
        &format!("ws://127.0.0.1:{port}/"),
        StreamProtocol::WebSocket,
        2,
        1,
    );
    c.reconnect = Reconnect::Immediate;
    c.backoff = Duration::from_millis(100);
    c.backoff_max = Duration::from_millis(200);
    let s = run(&c);
    assert_eq!(s.opened, 0);
    // Each slot waits the backoff after each refusal: 100, 200, 200... ms over 1 s.
    assert!(
        (2..=2 * 8).contains(&s.attempts),
        "{} attempts in 1 s",
        s.attempts
    );
    assert_eq!(
        s.connect_errors.get(&model::ErrorKind::ConnectRefused),
        Some(&s.attempts)
    );
    assert!(s
        .lives
        .iter()
        .all(|l| l.end == EndKind::ConnectFailed && l.open_us.is_none()));
}
