//! `proxybench load`: flags and dispatch. wrk's flags mean what they mean in wrk; the rest
//! (open loop, `-n`, TLS, `--resolve`, output files) follow curl, hey and wrk2.

use crate::CliError;
use model::{Arrivals, LoadSummary};
use scenario::{PlatformKind, PlatformOverride, PlatformSpec};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Flags of `proxybench load`.
#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
    proxybench load -t1 -c50 -d10s --latency http://127.0.0.1:8080/\n  \
    proxybench load -R 2000 --arrivals poisson --seed 7 -d30s http://127.0.0.1:8080/\n  \
    proxybench load --resolve cafe.example.com:8443:127.0.0.1 --cacert ca.pem https://cafe.example.com:8443/tea\n  \
    proxybench load --http2 -c50 -m10 -d10s http://127.0.0.1:8080/\n  \
    proxybench load --agents 3 --platform kubernetes -R 3000 -c 12 -d 10s http://127.0.0.1:8080/\n  \
    proxybench load -c 1000 --ramp 5s --message-rate 2 -d 60s ws://127.0.0.1:8080/chat\n  \
    proxybench load --protocol grpc-stream -c 100 -d 30s http://127.0.0.1:8080/\n  \
    proxybench load --protocol sse -c 100 --idle-timeout 5s -d 30s http://127.0.0.1:8080/events\n\n\
Exit status:\n  \
    0  the load ran and at least one request got a 2xx or 3xx response\n  \
    1  the load could not run to its end (a thread or file failed, an agent was lost, agents\n     \
       could not start)\n  \
    2  bad input: a flag, the URL, the CA file, or more connections than the open-files limit allows\n  \
    3  the target was unusable: every request failed (an error below HTTP or a status other than\n     \
       2xx/3xx), or none was answered; for long-lived loads, no connection ever opened (a gRPC\n     \
       target that speaks HTTP/1.1 only, an upgrade refused); the results are printed all the same")]
pub struct Args {
    /// Target URL: http:// or https://; ws:// or wss:// for WebSocket.
    url: String,
    /// Connections to keep open across all threads.
    #[arg(short = 'c', long, default_value_t = 10)]
    connections: u32,
    /// Threads, each with its own event loop [default: number of cores, at most -c].
    #[arg(short = 't', long)]
    threads: Option<u32>,
    /// Test duration, e.g. 10s, 5m, 1h [default: 10s, or until -n requests are done].
    #[arg(short = 'd', long)]
    duration: Option<String>,
    /// Send exactly N requests across all connections, then stop.
    #[arg(short = 'n', long)]
    requests: Option<u64>,
    /// Open loop: N requests per second across all connections (latency counts from each
    /// request's intended send time).
    #[arg(short = 'R', long)]
    rate: Option<String>,
    /// Open-loop arrivals: even spacing or a Poisson process.
    #[arg(long, value_enum, default_value_t = ArrivalsArg::Even)]
    arrivals: ArrivalsArg,
    /// Seed of the Poisson arrivals (same seed, same arrival times).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Open loop: sends due within this window leave together (one submission), none more
    /// than the window after its intended time; latency still counts from each intended
    /// time. 0 sends each at its own time [default: 200us].
    #[arg(long = "send-window", value_name = "DURATION")]
    send_window: Option<String>,
    /// Print the latency distribution (50/75/90/99%).
    #[arg(long)]
    latency: bool,
    /// Open loop: also print latency measured from the actual send (uncorrected).
    #[arg(long = "u-latency")]
    u_latency: bool,
    /// No complete response within this long counts as a timeout, e.g. 2s, 500ms.
    #[arg(long, default_value = "2s")]
    timeout: String,
    /// Request method.
    #[arg(short = 'X', long, default_value = "GET")]
    method: String,
    /// Speak HTTP/2: over TLS negotiated by ALPN (h2), over http:// with prior knowledge (h2c).
    #[arg(long)]
    http2: bool,
    /// HTTP/2: concurrent streams on each connection (as h2load's -m).
    #[arg(short = 'm', long, default_value_t = 1)]
    streams: u32,
    /// Request header 'Name: value' (repeatable).
    #[arg(short = 'H', long = "header")]
    headers: Vec<String>,
    /// Request body: a string, or @FILE to read it from a file.
    #[arg(long)]
    body: Option<String>,
    /// Host header (also the TLS name when the URL's host is an IP address).
    #[arg(long)]
    host: Option<String>,
    /// Send connections for HOST:PORT to ADDR instead, keeping Host and SNI (repeatable).
    #[arg(long, value_name = "HOST:PORT:ADDR")]
    resolve: Vec<String>,
    /// Skip TLS certificate verification.
    #[arg(short = 'k', long)]
    insecure: bool,
    /// Send this TLS server name (SNI) instead of the URL's host.
    #[arg(long, value_name = "NAME")]
    sni: Option<String>,
    /// Send a request once more on a new connection when the server closed the reused
    /// keep-alive connection under it before answering (as Go's net/http does); counted as
    /// retried, not as a read_idle_closed error. HTTP/1.1 GET, HEAD, OPTIONS, TRACE only.
    #[arg(long = "retry-idle-closed")]
    retry_idle_closed: bool,
    /// Trust the certificates in this PEM file: CAs, and server certificates listed as they are
    /// (self-signed ones too), as curl --cacert does.
    #[arg(long, value_name = "FILE")]
    cacert: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Write the per-second timeline to this CSV file.
    #[arg(long, value_name = "FILE.csv")]
    timeline: Option<PathBuf>,
    /// Write per-second latency histograms to this file (HdrHistogram interval log).
    #[arg(long = "hdr-log", value_name = "FILE")]
    hdr_log: Option<PathBuf>,
    /// Kernel interface: io_uring (plain http) when available, else epoll; or force one.
    #[arg(long, value_enum, default_value_t = IoArg::Auto)]
    io: IoArg,
    /// Run the load from these `proxybench agent`s (comma-separated host:port), each doing an
    /// exact share, started at one instant; their results are merged.
    #[arg(long = "agent-hosts", value_name = "H:P,...", value_delimiter = ',')]
    agent_hosts: Vec<String>,
    /// The token the agents were started with (--agent-hosts).
    #[arg(long = "token-file", value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// With --agent-hosts or --agents: also write each agent's result to DIR/agent-N.json (N
    /// from 0, in agent order), the files `proxybench merge` reads.
    #[arg(long = "save-agents", value_name = "DIR")]
    save_agents: Option<PathBuf>,
    /// Run the load from N agent pods on Kubernetes (an Indexed Job; needs --platform
    /// kubernetes), each doing an exact share, started at one instant; their results are merged.
    #[arg(long, value_name = "N", conflicts_with = "agent_hosts")]
    agents: Option<u32>,
    /// With --agents: how long the agent pods may take to be ready [default: 60s].
    #[arg(long = "agents-timeout", value_name = "DURATION")]
    agents_timeout: Option<String>,
    #[command(flatten)]
    platform: crate::cmd_run::PlatformFlags,
    #[command(flatten)]
    metrics: crate::metrics::MetricsFlags,
    #[command(flatten)]
    linger: crate::metrics::LingerFlag,
    #[command(flatten)]
    stream: crate::cmd_load_stream::StreamFlags,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum IoArg {
    Auto,
    Epoll,
    Uring,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ArrivalsArg {
    Even,
    Poisson,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Text,
    Json,
}

/// Runs `proxybench load`.
pub fn main(args: Args) -> Result<ExitCode, CliError> {
    if let Some(p) = crate::cmd_load_stream::protocol(&args.url, &args.stream)? {
        return stream(&args, p);
    }
    if let Some(flag) = crate::cmd_load_stream::any_set(&args.stream) {
        return Err(CliError::usage(format!(
            "{flag} is for long-lived loads (a ws:// URL, or --protocol grpc-unary, grpc-stream or sse)"
        )));
    }
    let cfg = config(&args)?;
    let flags = args.platform.to_override(None)?;
    // Bound before anything starts: a taken port is bad input, not a failed run.
    let live = args.metrics.start(
        openmetrics::Info {
            command: "load".to_string(),
            ..openmetrics::Info::default()
        },
        Some(&args.linger),
    )?;
    let linger_stop = match &live {
        Some(_) => Some(crate::metrics::linger_flag()?),
        None => None,
    };
    let code = dispatch(&args, cfg, &flags, live.as_ref());
    if let (Some(l), Some(stop), Ok(_)) = (&live, &linger_stop, &code) {
        l.finish(stop);
    }
    code
}

/// A long-lived load (WebSocket, gRPC, SSE): on this machine only, with the flags it shares
/// with HTTP loads; the HTTP-only ones are refused by name.
fn stream(a: &Args, p: model::stream::StreamProtocol) -> Result<ExitCode, CliError> {
    let http_only = [
        (a.requests.is_some(), "-n/--requests"),
        (
            a.rate.is_some(),
            "-R/--rate (the message rate is --message-rate)",
        ),
        (!matches!(a.arrivals, ArrivalsArg::Even), "--arrivals"),
        (a.send_window.is_some(), "--send-window"),
        (a.latency, "--latency"),
        (a.u_latency, "--u-latency"),
        (a.method != "GET", "-X/--method"),
        (a.http2, "--http2"),
        (a.streams != 1, "-m/--streams"),
        (a.body.is_some(), "--body"),
        (a.retry_idle_closed, "--retry-idle-closed"),
        (a.timeline.is_some(), "--timeline"),
        (a.hdr_log.is_some(), "--hdr-log"),
        (!matches!(a.io, IoArg::Auto), "--io"),
        (!a.agent_hosts.is_empty(), "--agent-hosts"),
        (a.token_file.is_some(), "--token-file"),
        (a.save_agents.is_some(), "--save-agents"),
        (a.agents.is_some(), "--agents"),
        (a.agents_timeout.is_some(), "--agents-timeout"),
        (a.metrics.is_set(), "--metrics-listen"),
    ];
    if let Some((_, flag)) = http_only.iter().find(|(set, _)| *set) {
        return Err(CliError::usage(format!(
            "{flag} is for HTTP loads; a {} load does not take it",
            p.name()
        )));
    }
    let flags = a.platform.to_override(None)?;
    if flags.kind.is_some() || flags.cluster_flag().is_some() {
        return Err(CliError::usage(format!(
            "a {} load runs on this machine; the platform flags go with HTTP loads' --agents",
            p.name()
        )));
    }
    let common = crate::cmd_load_stream::Common {
        url: &a.url,
        connections: a.connections,
        threads: a.threads,
        duration: a.duration.as_deref(),
        timeout: &a.timeout,
        headers: &a.headers,
        host: a.host.clone(),
        resolve: &a.resolve,
        insecure: a.insecure,
        sni: a.sni.clone(),
        cacert: a.cacert.clone(),
        json: a.format == Format::Json,
    };
    let cfg = crate::cmd_load_stream::config(p, &common, &a.stream)?;
    crate::cmd_load_stream::run(&cfg, common.json, a.stream.lives_path())
}

/// Runs the load where the flags say: here, on the agents given, or on agent pods.
fn dispatch(
    args: &Args,
    mut cfg: load::Config,
    flags: &PlatformOverride,
    live: Option<&crate::metrics::Live>,
) -> Result<ExitCode, CliError> {
    let kubernetes = flags.kind == Some(PlatformKind::Kubernetes);
    if let Some(n) = args.agents {
        if !kubernetes {
            return Err(CliError::usage(
                "--agents needs --platform kubernetes (agents you started yourself: --agent-hosts)",
            ));
        }
        return on_kubernetes(args, &cfg, n, flags, live);
    }
    if kubernetes {
        return Err(CliError::usage(
            "--platform kubernetes needs --agents N (without agents the load runs on this machine)",
        ));
    }
    if let Some(flag) = flags.cluster_flag() {
        return Err(CliError::usage(format!(
            "{flag} goes with --agents N --platform kubernetes"
        )));
    }
    if args.agents_timeout.is_some() {
        return Err(CliError::usage("--agents-timeout goes with --agents"));
    }
    if !args.agent_hosts.is_empty() {
        return distributed(args, &cfg, live);
    }
    if args.token_file.is_some() || args.save_agents.is_some() {
        return Err(CliError::usage(
            "--token-file and --save-agents go with --agent-hosts",
        ));
    }
    let ctl = load::Control::new();
    load::stop_on_interrupt(&ctl.stop).map_err(|e| CliError::runtime(e.to_string()))?;
    let feed = live.map(|l| {
        l.registry
            .load(&openmetrics::Scope::default(), &cfg.name, cfg.rate)
    });
    if let Some(f) = feed.clone() {
        cfg.on_second_hdr = Some(load::SecondHdrSink(Arc::new(move |row, hdr| {
            f.second(row, hdr)
        })));
    }
    let live = std::io::stderr().is_terminal();
    let ctl = if live {
        let start_t = ctl.origin.elapsed().as_secs() as u32;
        // The row after the last planned second only holds the drain of in-flight requests.
        let last = cfg.duration.map(|d| d.as_secs_f64().ceil() as u32);
        load::Control {
            on_second: Some(Box::new(move |s: &model::Second| {
                let elapsed = s.t.saturating_sub(start_t) + 1;
                if last.is_none_or(|l| elapsed <= l) {
                    progress(s, elapsed)
                }
            })),
            ..ctl
        }
    } else {
        ctl
    };
    let stopped = ctl.stop.clone();
    let outcome = load::run(&cfg, &ctl).map_err(CliError::from);
    if live {
        eprint!("\r\x1b[K");
    }
    if let Some(f) = &feed {
        f.end();
    }
    let outcome = outcome?;
    if stopped.load(Ordering::Relaxed) {
        eprintln!("proxybench: interrupted; results so far");
    }
    let summary = &outcome.summary;
    if let Some(path) = &args.timeline {
        std::fs::write(path, report::load_timeline_csv(summary))
            .map_err(|e| CliError::runtime(format!("cannot write {}: {e}", path.display())))?;
    }
    let text = match args.format {
        Format::Text => report::text::render(
            summary,
            &report::text::TextOptions {
                latency_distribution: args.latency,
                uncorrected: args.u_latency,
            },
        ),
        Format::Json => result_of(&outcome).to_json_pretty(),
    };
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    match unusable(summary) {
        Some(why) => {
            eprintln!("proxybench: the target was unusable: {why}");
            Ok(ExitCode::from(3))
        }
        None => Ok(ExitCode::SUCCESS),
    }
}

/// The result file of a local run: the summary, its wall-clock origin and per-second histograms.
pub fn result_of(o: &load::Outcome) -> model::LoadResult {
    model::LoadResult {
        summary: o.summary.clone(),
        ext: model::ResultExt {
            result_version: model::RESULT_VERSION,
            origin_unix_ns: o.origin_unix_ns,
            seconds_hdr: o.seconds_hdr.clone(),
            agent: None,
            agents: Vec::new(),
        },
    }
}

/// `load --agent-hosts`: the coordinator's side of a distributed run on agents the user
/// started.
fn distributed(
    args: &Args,
    cfg: &load::Config,
    metrics: Option<&crate::metrics::Live>,
) -> Result<ExitCode, CliError> {
    let token_file = args
        .token_file
        .as_ref()
        .ok_or_else(|| CliError::usage("--agent-hosts needs --token-file"))?;
    local_files_only(args, "--agent-hosts")?;
    let token = agent::proto::read_token(token_file).map_err(|e| CliError::usage(e.to_string()))?;
    let stop = interrupt_flag()?;
    let plan = agent::coordinator::Plan {
        hosts: &args.agent_hosts,
        names: &[],
        token: &token,
        cfg,
        origin: None,
        stop: Some(stop),
    };
    let live = LiveAgents::new(cfg, metrics);
    let show =
        |row: &model::Second, hdr: &model::SecondHdr, per: &[Option<u64>]| live.show(row, hdr, per);
    let run = agent::coordinator::run(&plan, live.wanted().then_some(&show));
    live.clear();
    report_distributed(args, run)
}

/// `load --agents N --platform kubernetes`: the agents are the pods of an Indexed Job in the
/// run's namespace (made and deleted as `run --platform kubernetes` does), reached through
/// port-forwards; the Job and its Secret are deleted at the end, whatever happened.
fn on_kubernetes(
    args: &Args,
    cfg: &load::Config,
    n: u32,
    flags: &PlatformOverride,
    metrics: Option<&crate::metrics::Live>,
) -> Result<ExitCode, CliError> {
    if n == 0 {
        return Err(CliError::usage("--agents must be at least 1"));
    }
    if args.token_file.is_some() {
        return Err(CliError::usage(
            "--token-file goes with --agent-hosts (--agents makes its own token)",
        ));
    }
    local_files_only(args, "--agents")?;
    let ready_timeout = match &args.agents_timeout {
        None => std::time::Duration::from_secs(60),
        Some(t) => match units::parse_duration(t) {
            Ok(d) if !d.is_zero() => d,
            Ok(_) => return Err(CliError::usage("--agents-timeout must be positive")),
            Err(e) => return Err(CliError::usage(format!("--agents-timeout: {e}"))),
        },
    };
    // The split is checked before anything is made on the cluster.
    agent::coordinator::split(cfg, n as usize).map_err(|e| CliError::usage(e.to_string()))?;
    let mut spec = PlatformSpec::default();
    flags.apply(&mut spec);
    let stop = interrupt_flag()?;
    let mut platform =
        bench::platform::registry::open(&spec).map_err(|e| CliError::runtime(e.to_string()))?;
    let work = std::env::temp_dir();
    let started = platform.agents(&bench::platform::AgentsSpec {
        count: n,
        cfg,
        ready_timeout,
        work: &work,
        stop: &stop,
    });
    let mut agents = match started {
        Ok(a) => a,
        Err(e) => {
            for l in platform.close() {
                eprintln!("proxybench: {l}");
            }
            return Err(CliError::runtime(e.to_string()));
        }
    };
    eprintln!("proxybench: {n} agents ready: {}", agents.place());
    let live = LiveAgents::new(cfg, metrics);
    let show =
        |row: &model::Second, hdr: &model::SecondHdr, per: &[Option<u64>]| live.show(row, hdr, per);
    let run = bench::platform::agents::run_load(
        agents.as_ref(),
        cfg,
        None,
        Some(stop),
        live.wanted().then_some(&show),
    );
    live.clear();
    // The results first; then the Job, its Secret and the namespace go (what could not be
    // deleted is said after them).
    let code = report_distributed(args, run);
    let mut left = agents.close();
    left.extend(platform.close());
    for l in &left {
        eprintln!("proxybench: {l}");
    }
    code
}

/// `--timeline` and `--hdr-log` write what one local engine saw; agents' results are saved
/// whole with `--save-agents` instead.
fn local_files_only(args: &Args, mode: &str) -> Result<(), CliError> {
    if args.timeline.is_some() || args.hdr_log.is_some() {
        return Err(CliError::usage(format!(
            "--timeline and --hdr-log are for a local run; with {mode} use --save-agents"
        )));
    }
    Ok(())
}

/// A flag Ctrl-C (or SIGTERM) sets, so that a distributed run stops its agents and keeps what
/// they measured; a second signal exits at once.
fn interrupt_flag() -> Result<Arc<AtomicBool>, CliError> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, stop.clone())
            .and_then(|_| signal_hook::flag::register(sig, stop.clone()))
            .map_err(|e| CliError::runtime(format!("cannot install signal handlers: {e}")))?;
    }
    Ok(stop)
}

/// The live line of a distributed run on a terminal: the merged second and each agent's count;
/// and the merged seconds' live metrics, when they are served.
struct LiveAgents {
    on: bool,
    /// The row after the last planned second only holds the drain of in-flight requests.
    last: Option<u32>,
    feed: Option<openmetrics::LoadFeed>,
}

impl LiveAgents {
    fn new(cfg: &load::Config, metrics: Option<&crate::metrics::Live>) -> LiveAgents {
        LiveAgents {
            on: std::io::stderr().is_terminal(),
            last: cfg.duration.map(|d| d.as_secs_f64().ceil() as u32),
            feed: metrics.map(|m| {
                m.registry
                    .load(&openmetrics::Scope::default(), &cfg.name, cfg.rate)
            }),
        }
    }

    /// Whether the merged seconds are wanted at all.
    fn wanted(&self) -> bool {
        self.on || self.feed.is_some()
    }

    fn show(&self, row: &model::Second, hdr: &model::SecondHdr, per: &[Option<u64>]) {
        if let Some(f) = &self.feed {
            f.second(row, hdr);
        }
        if !self.on {
            return;
        }
        let elapsed = row.t + 1;
        if self.last.is_some_and(|l| elapsed > l) {
            return;
        }
        progress(row, elapsed);
        let each: Vec<String> = per
            .iter()
            .map(|c| c.map_or("-".to_string(), |n| n.to_string()))
            .collect();
        eprint!("  agents {}", each.join(" "));
    }

    fn clear(&self) {
        if let Some(f) = &self.feed {
            f.end();
        }
        if self.on {
            eprint!("\r\x1b[K");
        }
    }
}

/// Prints a distributed run as a local one prints (wrk's block, or the JSON), then the
/// per-agent table; saves the agents' results; names lost agents (exit 1).
fn report_distributed(
    args: &Args,
    run: Result<agent::coordinator::Distributed, agent::Error>,
) -> Result<ExitCode, CliError> {
    let run = run.map_err(|e| match e {
        agent::Error::Split(m) => CliError::usage(m),
        e => CliError::runtime(e.to_string()),
    })?;
    if let Some(dir) = &args.save_agents {
        std::fs::create_dir_all(dir)
            .map_err(|e| CliError::runtime(format!("cannot create {}: {e}", dir.display())))?;
        for (i, p) in run.parts.iter().enumerate() {
            let path = dir.join(format!("agent-{i}.json"));
            std::fs::write(&path, p.to_json_pretty())
                .map_err(|e| CliError::runtime(format!("cannot write {}: {e}", path.display())))?;
        }
    }
    for a in &run.parts {
        if let Some(info) = &a.ext.agent {
            eprintln!(
                "proxybench: agent {} clock offset {} us (+/- {} us), start skew {} us",
                info.host, info.clock_offset_us, info.clock_uncertainty_us, info.start_skew_us
            );
        }
    }
    if run.stopped {
        eprintln!("proxybench: interrupted; results so far");
    }
    let summary = &run.merged.summary;
    let text = match args.format {
        Format::Text => {
            report::text::render(
                summary,
                &report::text::TextOptions {
                    latency_distribution: args.latency,
                    uncorrected: args.u_latency,
                },
            ) + &agent::merge::agent_table(&run.merged.ext.agents)
        }
        Format::Json => run.merged.to_json_pretty(),
    };
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    for l in &run.lost {
        eprintln!("proxybench: {l}");
    }
    if !run.lost.is_empty() {
        return Ok(ExitCode::from(1));
    }
    match unusable(summary) {
        Some(why) => {
            eprintln!("proxybench: the target was unusable: {why}");
            Ok(ExitCode::from(3))
        }
        None => Ok(ExitCode::SUCCESS),
    }
}

/// Why a load's target counts as unusable (exit 3): nothing was attempted or answered, or
/// every attempt failed. Names the most frequent failure with its first message.
fn unusable(s: &LoadSummary) -> Option<String> {
    let attempts = s.attempts();
    if attempts == 0 {
        return Some("no request was attempted".to_string());
    }
    if s.failures() < attempts {
        return None;
    }
    let mut worst: Option<(String, u64)> = None;
    for (k, &n) in &s.errors {
        if worst.as_ref().is_none_or(|(_, m)| n > *m) {
            let reason = match s.error_messages.get(k) {
                Some(m) => format!("{} {n} ({m})", k.name()),
                None => format!("{} {n}", k.name()),
            };
            worst = Some((reason, n));
        }
    }
    for (code, &n) in &s.status {
        if worst.as_ref().is_none_or(|(_, m)| n > *m) {
            worst = Some((format!("status {code} {n}"), n));
        }
    }
    let most = worst.map(|(r, _)| r).unwrap_or_default();
    Some(format!("all {attempts} attempts failed, most as {most}"))
}

/// Builds and checks the engine's config from the flags; every problem is a one-line usage error.
fn config(a: &Args) -> Result<load::Config, CliError> {
    let usage = |e: &dyn std::fmt::Display| CliError::usage(e.to_string());
    let mut cfg = load::Config::new(&a.url).map_err(|e| usage(&e))?;
    cfg.connections = a.connections;
    if a.connections == 0 {
        return Err(CliError::usage("-c/--connections must be at least 1"));
    }
    match a.threads {
        Some(0) => return Err(CliError::usage("-t/--threads must be at least 1")),
        Some(t) if t > a.connections => {
            return Err(CliError::usage(format!(
                "-t/--threads ({t}) must not exceed -c/--connections ({})",
                a.connections
            )))
        }
        Some(t) => cfg.threads = t,
        None => cfg.threads = cfg.threads.min(a.connections),
    }
    cfg.duration = match (&a.duration, a.requests) {
        (Some(d), _) => {
            let d = units::parse_duration(d).map_err(|e| usage(&format!("-d/--duration: {e}")))?;
            if d.is_zero() {
                return Err(CliError::usage("-d/--duration must be positive"));
            }
            Some(d)
        }
        (None, Some(_)) => None,
        (None, None) => Some(std::time::Duration::from_secs(10)),
    };
    if a.requests == Some(0) {
        return Err(CliError::usage("-n/--requests must be at least 1"));
    }
    cfg.requests = a.requests;
    if let Some(r) = &a.rate {
        cfg.rate = Some(units::parse_rate(r).map_err(|e| usage(&format!("-R/--rate: {e}")))?);
    }
    cfg.arrivals = match a.arrivals {
        ArrivalsArg::Even => Arrivals::Even,
        ArrivalsArg::Poisson => Arrivals::Poisson,
    };
    cfg.seed = a.seed;
    if let Some(w) = &a.send_window {
        if cfg.rate.is_none() {
            return Err(CliError::usage(
                "--send-window is for open loop: give -R/--rate too",
            ));
        }
        cfg.send_window =
            units::parse_duration(w).map_err(|e| usage(&format!("--send-window: {e}")))?;
    }
    cfg.timeout =
        units::parse_duration(&a.timeout).map_err(|e| usage(&format!("--timeout: {e}")))?;
    if cfg.timeout.is_zero() {
        return Err(CliError::usage("--timeout must be positive"));
    }
    cfg.method = a.method.clone();
    cfg.http2 = a.http2;
    cfg.streams = a.streams;
    for h in &a.headers {
        cfg.add_header_line(h).map_err(|e| usage(&e))?;
    }
    cfg.body = match &a.body {
        None => None,
        Some(b) => Some(match b.strip_prefix('@') {
            Some(path) => std::fs::read(path)
                .map_err(|e| CliError::usage(format!("--body: cannot read {path}: {e}")))?,
            None => b.as_bytes().to_vec(),
        }),
    };
    cfg.host = a.host.clone();
    for r in &a.resolve {
        cfg.resolve
            .push(load::Resolve::parse(r).map_err(|e| usage(&e))?);
    }
    cfg.insecure = a.insecure;
    cfg.sni = a.sni.clone();
    cfg.retry_idle_closed = a.retry_idle_closed;
    cfg.cacert = a.cacert.clone();
    cfg.hdr_log = a.hdr_log.clone();
    cfg.io = match a.io {
        IoArg::Auto => load::IoMode::Auto,
        IoArg::Epoll => load::IoMode::Epoll,
        IoArg::Uring => load::IoMode::Uring,
    };
    cfg.validate().map_err(|e| usage(&e))?;
    Ok(cfg)
}

/// The live line on a terminal: elapsed seconds, req/s, errors and p99 of the last second.
fn progress(s: &model::Second, elapsed: u32) {
    eprint!(
        "\r\x1b[K[{elapsed:>4}s] {:>9} req/s  errors {:>6}  p99 {:>9}",
        s.requests,
        s.error_total(),
        units::fmt_us(s.p99_us as f64)
    );
}
