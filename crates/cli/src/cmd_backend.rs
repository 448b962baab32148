//! `proxybench backend`: flags and dispatch. Runs a fleet of emulated backends in the
//! foreground until SIGINT or SIGTERM, then drains it, prints every instance's final counters
//! (one JSON line on stdout, a readable summary on stderr) and exits. Every listener answers
//! HTTP/1.x and h2c (HTTP/2 with prior knowledge), told apart per connection by its first bytes,
//! and long-lived connections on the same port: WebSocket upgrades (echo), event streams
//! (`Accept: text/event-stream`) and gRPC over h2c (`/proxybench.Bench/Unary` and `/Stream`),
//! shaped by the profile's `push`, `push_size`, `push_count` and `ping`.

use crate::CliError;
use backend::{Fleet, FleetConfig, InstanceConfig, Profile};
use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

/// Flags of `proxybench backend`.
#[derive(clap::Args)]
pub struct Args {
    /// Number of instances, on consecutive ports from --listen's port.
    #[arg(long, short = 'n', value_name = "N")]
    count: Option<usize>,
    /// Address of the first instance (port 0: the OS picks every port).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8081")]
    listen: String,
    /// Explicit ports, comma-separated, on --listen's host (instead of consecutive ports).
    #[arg(long, value_name = "LIST")]
    ports: Option<String>,
    /// Behaviour profile of every instance, e.g. "latency=lognormal(median=10ms,sigma=0.5); status=503:1%".
    #[arg(long, value_name = "SPEC", default_value = "")]
    profile: String,
    /// Override for paths starting with PATH, e.g. "/slow=latency=100ms" (repeatable).
    #[arg(long = "path-profile", value_name = "PATH=SPEC")]
    path_profile: Vec<String>,
    /// A whole profile for one instance instead of --profile, e.g. "backend-1=status=503" (repeatable).
    #[arg(long = "instance-profile", value_name = "NAME=SPEC")]
    instance_profile: Vec<String>,
    /// Event-loop threads shared by all instances.
    #[arg(long, short = 't', value_name = "T", default_value_t = 1)]
    threads: usize,
    /// Serve the HTTP + JSON control endpoint on this loopback address; requests need
    /// `Authorization: Bearer <token>`, the token being in --token-file.
    #[arg(long, value_name = "ADDR")]
    control: Option<String>,
    /// Where --control writes its random token (created mode 0600, removed on exit); default
    /// ./proxybench-control-PORT.token (PORT: the control port).
    #[arg(
        long = "token-file",
        value_name = "PATH",
        conflicts_with = "token_from"
    )]
    token_file: Option<std::path::PathBuf>,
    /// Take --control's token from this file instead of drawing one (a mounted Kubernetes
    /// Secret, say); the file is read once and left in place.
    #[arg(long = "token-from", value_name = "PATH")]
    token_from: Option<std::path::PathBuf>,
    /// How long the drain at SIGTERM may take before the connections left are reset; keep it
    /// under a pod's grace period so that the final counters are always printed.
    #[arg(long = "drain-timeout", value_name = "DURATION", default_value = "10s")]
    drain_timeout: String,
    /// Instance names are NAME-0, NAME-1, ...
    #[arg(long, value_name = "NAME", default_value = "backend")]
    name: String,
    /// Seed of the latency, status and size draws.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn parse_addr(flag: &str, s: &str) -> Result<SocketAddr, CliError> {
    s.parse().map_err(|_| {
        CliError::usage(format!(
            "{flag}: '{s}' is not an address like 127.0.0.1:8081"
        ))
    })
}

/// The fleet the flags describe.
fn config(a: &Args) -> Result<FleetConfig, CliError> {
    let listen = parse_addr("--listen", &a.listen)?;
    if a.threads == 0 || a.threads > 256 {
        return Err(CliError::usage(format!(
            "--threads: {} is outside 1..256",
            a.threads
        )));
    }
    let ports: Vec<u16> = match &a.ports {
        Some(list) => {
            let ports = list
                .split(',')
                .map(|p| {
                    p.trim().parse::<u16>().map_err(|_| {
                        CliError::usage(format!("--ports: '{}' is not a port", p.trim()))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            if let Some(n) = a.count {
                if n != ports.len() {
                    return Err(CliError::usage(format!(
                        "--count {n} disagrees with the {} ports of --ports",
                        ports.len()
                    )));
                }
            }
            ports
        }
        None => {
            let n = a.count.unwrap_or(1);
            if n == 0 || n > 10_000 {
                return Err(CliError::usage(format!("--count: {n} is outside 1..10000")));
            }
            if listen.port() == 0 {
                vec![0; n]
            } else {
                let first = listen.port() as usize;
                if first + n - 1 > 65535 {
                    return Err(CliError::usage(format!(
                        "--count: {n} ports from {first} run past 65535"
                    )));
                }
                (first..first + n).map(|p| p as u16).collect()
            }
        }
    };
    if ports.is_empty() {
        return Err(CliError::usage("--ports: the list is empty"));
    }
    let mut profile: Profile = a
        .profile
        .parse()
        .map_err(|e| CliError::usage(format!("--profile: {e}")))?;
    for pp in &a.path_profile {
        let Some((path, spec)) = pp.split_once('=') else {
            return Err(CliError::usage(format!(
                "--path-profile: '{pp}' is not PATH=SPEC (e.g. /slow=latency=100ms)"
            )));
        };
        let p: Profile = format!("path {} {{ {spec} }}", path.trim())
            .parse()
            .map_err(|e| CliError::usage(format!("--path-profile: {e}")))?;
        let rule = p.paths.into_iter().next().expect("one path block");
        if profile.paths.iter().any(|r| r.prefix == rule.prefix) {
            return Err(CliError::usage(format!(
                "--path-profile: path {} is already set by --profile",
                rule.prefix
            )));
        }
        profile.paths.push(rule);
    }
    let names: Vec<String> = (0..ports.len())
        .map(|i| format!("{}-{i}", a.name))
        .collect();
    let mut per_instance: Vec<Option<Profile>> = vec![None; ports.len()];
    for ip in &a.instance_profile {
        let Some((name, spec)) = ip.split_once('=') else {
            return Err(CliError::usage(format!(
                "--instance-profile: '{ip}' is not NAME=SPEC (e.g. {}=status=503)",
                names[0]
            )));
        };
        let Some(i) = names.iter().position(|n| n == name.trim()) else {
            return Err(CliError::usage(format!(
                "--instance-profile: no instance named '{}' (they are {}..{})",
                name.trim(),
                names[0],
                names[names.len() - 1]
            )));
        };
        let p: Profile = spec
            .parse()
            .map_err(|e| CliError::usage(format!("--instance-profile {}: {e}", name.trim())))?;
        per_instance[i] = Some(p);
    }
    let instances = names
        .into_iter()
        .zip(ports)
        .zip(per_instance)
        .map(|((name, port), p)| InstanceConfig {
            name,
            addr: SocketAddr::new(listen.ip(), port),
            profile: p.unwrap_or_else(|| profile.clone()),
        })
        .collect();
    Ok(FleetConfig {
        instances,
        threads: a.threads,
        seed: a.seed,
    })
}

/// The control address from --control: loopback only, so no other host can reach the fleet.
fn control_addr(a: &Args) -> Result<Option<SocketAddr>, CliError> {
    let Some(c) = a.control.as_deref() else {
        if a.token_file.is_some() {
            return Err(CliError::usage("--token-file needs --control"));
        }
        if a.token_from.is_some() {
            return Err(CliError::usage("--token-from needs --control"));
        }
        return Ok(None);
    };
    let addr = parse_addr("--control", c)?;
    if !addr.ip().is_loopback() {
        return Err(CliError::usage(format!(
            "--control: {addr} is not a loopback address (the control port binds 127.0.0.0/8 or [::1] only)"
        )));
    }
    Ok(Some(addr))
}

/// The control token's file, removed when the backend exits if the backend wrote it.
struct TokenFile {
    path: std::path::PathBuf,
    ours: bool,
}

impl Drop for TokenFile {
    fn drop(&mut self) {
        if self.ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The control token: read from --token-from, else drawn at random.
fn token(a: &Args) -> Result<backend::control::Token, CliError> {
    match &a.token_from {
        Some(p) => backend::control::Token::read(p).map_err(|e| {
            CliError::usage(format!("--token-from: cannot read {}: {e}", p.display()))
        }),
        None => backend::control::Token::random()
            .map_err(|e| CliError::runtime(format!("--control: cannot draw a token: {e}"))),
    }
}

/// Writes `token` where --token-file (or the default, named after the bound `port`) says;
/// returns the absolute path.
fn write_token(
    a: &Args,
    port: u16,
    token: &backend::control::Token,
) -> Result<TokenFile, CliError> {
    if let Some(p) = &a.token_from {
        return Ok(TokenFile {
            path: std::path::absolute(p).unwrap_or_else(|_| p.clone()),
            ours: false,
        });
    }
    let path = a
        .token_file
        .clone()
        .unwrap_or_else(|| format!("proxybench-control-{port}.token").into());
    let path = std::path::absolute(&path).unwrap_or(path);
    token.write(&path).map_err(|e| {
        CliError::usage(format!(
            "--token-file: cannot create {}: {e}",
            path.display()
        ))
    })?;
    Ok(TokenFile { path, ours: true })
}

/// Runs `proxybench backend`.
pub fn main(args: Args) -> Result<ExitCode, CliError> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let cfg = config(&args)?;
    let control = control_addr(&args)?;
    let drain = units::parse_duration(&args.drain_timeout)
        .map_err(|e| CliError::usage(format!("--drain-timeout: {e}")))?;
    let token = control.map(|_| token(&args)).transpose()?;
    // Register before starting so an early signal is not lost.
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
        .map_err(|e| CliError::runtime(format!("cannot install signal handlers: {e}")))?;
    let fleet = Arc::new(Fleet::start(cfg).map_err(|e| CliError::runtime(e.to_string()))?);
    let (server, token_file) = match control.zip(token) {
        Some((addr, token)) => {
            let server =
                backend::control::serve(fleet.clone(), addr, token.clone()).map_err(|e| {
                    CliError::runtime(format!("--control: cannot listen on {addr}: {e}"))
                })?;
            let file = write_token(&args, server.addr().port(), &token)?;
            (Some(server), Some(file))
        }
        None => (None, None),
    };
    {
        let mut out = std::io::stdout().lock();
        for (name, addr) in fleet.addrs() {
            let _ = writeln!(out, "{name} {addr}");
        }
        if let (Some(s), Some(f)) = (&server, &token_file) {
            let _ = writeln!(out, "control {} {}", s.addr(), f.path.display());
        }
        let _ = out.flush();
    }
    let sig = signals.forever().next().unwrap_or(SIGTERM);
    // A second signal while draining ends the process at once.
    let token_path = token_file
        .as_ref()
        .filter(|f| f.ours)
        .map(|f| f.path.clone());
    std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            if let Some(p) = token_path {
                let _ = std::fs::remove_file(p);
            }
            eprintln!("proxybench: second signal, exiting without draining");
            std::process::exit(1);
        }
    });
    eprintln!(
        "proxybench: {}, draining the fleet",
        if sig == SIGINT { "SIGINT" } else { "SIGTERM" }
    );
    if let Some(s) = server {
        s.stop();
    }
    fleet.close(drain);
    let counters = fleet.counters();
    {
        // The final counters on stdout, one line, for whoever keeps this process's output.
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", backend::counters_line(&counters));
        let _ = out.flush();
    }
    for c in counters {
        let by: Vec<String> = c
            .by_status
            .iter()
            .map(|(s, n)| format!("{s}: {n}"))
            .collect();
        let h2 = match &c.h2 {
            Some(h) => format!(
                "; over h2c: {} requests on {} connections, at most {} streams at once",
                h.requests, h.connections, h.max_streams
            ),
            None => String::new(),
        };
        let streams = match &c.streams {
            Some(s) => format!(
                "; long-lived: {} WebSockets, {} event streams, {} gRPC calls ({} by the client, {} by us, {} dropped), {} messages in, {} out",
                s.ws_opened,
                s.sse_opened,
                s.grpc_calls,
                s.closed_by_client,
                s.closed_by_server,
                s.dropped,
                s.messages_in,
                s.messages_out
            ),
            None => String::new(),
        };
        eprintln!(
            "{} {}: {} requests ({}), {} connections, {} bytes{h2}{streams}",
            c.name,
            c.addr,
            c.requests,
            if by.is_empty() {
                "none".to_string()
            } else {
                by.join(", ")
            },
            c.connections,
            c.bytes
        );
    }
    drop(token_file);
    Ok(ExitCode::SUCCESS)
}
