//! One Caddy replica: `caddy run` in its own directory, run as a [`Supervised`] process group
//! (never left behind), started after `caddy validate`, reloaded by loading the new config
//! through its admin API and timed, stopped by signal.

use super::render::{DRAIN_FILE, PROCS_ID};
use super::{command, Caddy, CONFIG_FILE};
use crate::driver::{await_reload, Driver as _, RenderContext, StatusReader, StopMode};
use crate::logs::LogFormat;
use crate::process::Supervised;
use crate::replica::{self, Core, Proxied, Running, Stops};
use crate::Error;
use std::fs;
use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long keep-alive connections drain (every answer says `Connection: close`) before a
/// graceful stop. Go's `http.Server.Shutdown`, which Caddy calls on SIGTERM (and on the old
/// servers of a reload), closes every connection idle at that moment, even one on which the
/// client has just sent its next request (golang/go#65802): without the drain, a closed-loop
/// keep-alive load loses a few requests per stopped replica. A connection that got a
/// `Connection: close` answer is closed by the server after it, so during the drain no
/// connection sits idle, and the clients reconnect to the replicas that stay. Only a config of
/// several replicas renders the drain (it costs a file lookup per request).
pub const DRAIN: Duration = Duration::from_millis(100);

/// A running Caddy in `dir` (caddy.json, caddy.log, access.log, caddy-data...). The config must
/// have been rendered with `RenderContext.prefix = dir`.
pub type Replica = Running<Caddy>;

impl Running<Caddy> {
    /// Writes `dir/caddy.json`, checks it with `caddy validate` (Caddy's message on failure),
    /// starts `caddy run` and waits until the admin listener answers `ctx.generation`.
    pub fn start(name: &str, ctx: &RenderContext, json: &str) -> Result<Replica, Error> {
        let dir = &ctx.prefix;
        let log = dir.join(LOG);
        // The JSON config holds the log's path as a JSON string.
        let marker = serde_json::to_string(&*log.to_string_lossy()).unwrap_or_default();
        let subdirs = ["caddy-home", "caddy-data", "caddy-config"];
        replica::prepare_dir(name, dir, json, &marker, &subdirs)?;
        let _ = fs::remove_file(dir.join(DRAIN_FILE));
        Caddy.validate(json, dir)?;
        let conf = replica::write_config(dir, CONFIG_FILE, json)?;
        let mut cmd = command(dir);
        cmd.arg("run")
            .arg("--config")
            .arg(&conf)
            .arg("--adapter")
            .arg("")
            .env("GOMAXPROCS", gomaxprocs(json).to_string());
        let main = Supervised::spawn(name, cmd, &dir.join("caddy.stderr"))?;
        let mut core = Core::new(
            name,
            dir,
            ctx.admin_port,
            ctx.generation,
            main,
            Caddy::STOPS,
        );
        core.control_port = ctx.control_port;
        let bound = Duration::from_secs(15);
        let exit_words = |main: &mut Supervised| {
            let status = main.exited()?;
            let mut msg = error_lines(&main.stderr_text());
            if msg.is_empty() {
                msg = error_lines(&fs::read_to_string(&log).unwrap_or_default());
            }
            Some(format!("caddy exited ({status}): {msg}"))
        };
        core.await_start(bound, &mut |main| exit_words(main))?;
        // The admin listener answers as soon as its own server is up; Caddy starts the others
        // after it, in Go's map order, and exits when one cannot bind. Its control API holds the
        // config lock through the whole load, so a GET of the config answers once the load is
        // over: 200 when it took, nothing when Caddy exited.
        let answer = config_get(ctx.control_port, bound);
        // A control connection closed without an answer is Caddy on its way out: its process is
        // reaped a moment later (longer on a loaded machine), so wait for the exit, up to a
        // bound, to give Caddy's own words rather than the closed socket.
        let settle = Instant::now() + Duration::from_secs(if answer.is_err() { 5 } else { 0 });
        let confirmed = loop {
            if let Some(msg) = exit_words(&mut core.process) {
                break Err(Error::Refused(format!("{name}: exited at start: {msg}")));
            }
            if Instant::now() >= settle {
                break answer.map_err(|e| {
                    Error::Refused(format!(
                        "{name}: Caddy's control API did not confirm the start: {e}"
                    ))
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        core.or_kill(confirmed)?;
        Ok(Running::new(core))
    }
}

/// Caddy's own log in a replica directory.
const LOG: &str = "caddy.log";

impl Proxied for Caddy {
    /// Caddy has no stub_status page.
    const STATUS: Option<StatusReader> = None;
    /// SIGTERM shuts the apps down gracefully (bounded by the http app's `grace_period`),
    /// SIGQUIT exits at once.
    const STOPS: Stops = Stops {
        graceful: (libc::SIGTERM, "SIGTERM"),
        fast: (libc::SIGQUIT, "SIGQUIT"),
    };
    /// Caddy's own log: JSON lines with `level` and `msg`.
    const ERROR_LOG: &'static str = LOG;
    const LOG_FORMAT: LogFormat = LogFormat::Caddy;

    /// Reloads with `json`: `caddy validate` first (a refusal leaves the running config and the
    /// file on disk alone and is recorded with Caddy's message), then `POST /load` on the
    /// control port. Caddy starts the new config in the same process, on the same listeners,
    /// then shuts the old servers down gracefully; `served_ms` counts from the POST until the
    /// admin listener answers the new generation. A config Caddy's load refuses is recorded with
    /// its message (Caddy keeps the old one).
    fn reload(
        core: &mut Core,
        json: &str,
        generation: u64,
        origin: Instant,
    ) -> model::ReloadRecord {
        let mut rec = match core.begin_reload(generation, origin) {
            Ok(rec) => rec,
            Err(refused) => return refused,
        };
        let t0 = Instant::now();
        let checked = Caddy.validate(json, &core.dir);
        rec.validate_ms = t0.elapsed().as_secs_f64() * 1e3;
        if let Err(e) = checked {
            rec.error = Some(e.to_string());
            return rec;
        }
        let (tx, rx) = mpsc::channel();
        let body = json.as_bytes().to_vec();
        let port = core.control_port;
        let bound = core.wait_bound;
        // No drain here (see DRAIN): during a reload Caddy binds new sockets beside the old
        // ones (SO_REUSEPORT) and closes the old ones, resetting the connections still in their
        // accept queues, so churning connections first loses as many requests as it saves.
        let t_sig = Instant::now();
        rec.t_s = t_sig.saturating_duration_since(origin).as_secs_f64();
        let poster = std::thread::Builder::new()
            .name(format!("{}-load", core.name))
            .spawn(move || {
                let _ = tx.send(load(port, &body, bound));
            });
        if let Err(e) = poster {
            rec.error = Some(format!("{}: cannot start the load request: {e}", core.name));
            return rec;
        }
        let mut answer: Option<Result<(), Error>> = None;
        let main = &mut core.process;
        await_reload(
            &mut rec,
            &core.name,
            t_sig,
            core.admin_port,
            None,
            bound,
            &mut || {
                if answer.is_none() {
                    answer = rx.try_recv().ok();
                }
                match &answer {
                    Some(Err(e)) => Some(e.to_string()),
                    _ => None,
                }
            },
            &mut || main.is_running(),
        );
        // The load returns once the old servers are shut down; wait for it so that reloads do
        // not overlap, and record what it said.
        if answer.is_none() {
            answer = rx.recv_timeout(bound).ok();
        }
        match answer {
            Some(Ok(())) => {}
            Some(Err(e)) => {
                // Caddy starts the new config's servers one at a time and rolls back when one
                // fails (a port in use), but leaves the servers it had started open and
                // serving the refused config. The admin listener may have been one of them:
                // a refused load is never counted as served; what still serves it is said.
                rec.served_ms = None;
                if rec.error.is_none() {
                    let ports = still_serving(json, generation);
                    rec.error = Some(if ports.is_empty() {
                        e.to_string()
                    } else {
                        format!(
                            "{e}; the refused generation {generation} still answers on port(s) \
                             {ports:?} beside the running one: Caddy 2.6 leaves the listeners a \
                             failed load had bound open (caddyserver/caddy#7175)"
                        )
                    });
                }
            }
            None => {
                if rec.error.is_none() {
                    rec.error = Some(format!(
                        "{}: the load request did not return within {bound:?}",
                        core.name
                    ));
                }
            }
        }
        if rec.served_ms.is_some() {
            core.generation = generation;
            let conf = core.dir.join(CONFIG_FILE);
            if let Err(e) = fs::write(&conf, json) {
                rec.error
                    .get_or_insert_with(|| format!("cannot write {}: {e}", conf.display()));
            }
        }
        rec
    }

    /// A graceful stop drains keep-alive connections for [`DRAIN`] first.
    fn stop_within(core: &mut Core, mode: StopMode, bound: Duration) -> Result<(), Error> {
        let drain = core.dir.join(DRAIN_FILE);
        // Every answer closes its connection while the file is there (see [`DRAIN`]).
        if mode == StopMode::Graceful && core.process.is_running() && fs::write(&drain, b"").is_ok()
        {
            std::thread::sleep(DRAIN);
        }
        let r = core.stop_within(mode, bound);
        let _ = fs::remove_file(&drain);
        r
    }
}

/// `POST /load` of `body` to Caddy's admin API on 127.0.0.1:`port`; `Err` carries Caddy's
/// answer when it refuses the config (it then keeps the old one).
fn load(port: u16, body: &[u8], timeout: Duration) -> Result<(), Error> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    // Caddy's admin API accepts only its own address as Host.
    let host = format!("127.0.0.1:{port}");
    let req = http1::client::Request {
        method: "POST",
        path: "/load",
        headers: &[("Host", &host), ("Content-Type", "application/json")],
        body,
    };
    match http1::client::request(addr, &req, timeout) {
        Ok(r) if r.status == 200 => Ok(()),
        Ok(r) => Err(Error::Refused(format!(
            "caddy load: {} {}",
            r.status,
            r.text().trim_end()
        ))),
        Err(e) => Err(Error::io("caddy load", e)),
    }
}

/// GOMAXPROCS the rendered config asks for (its top-level `@id`), 1 when it says nothing.
fn gomaxprocs(json: &str) -> u32 {
    serde_json::from_str::<serde_json::Value>(json)
        .ok()
        .and_then(|v| v.get("@id")?.as_str()?.strip_prefix(PROCS_ID)?.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(1)
}

/// Caddy's `Error: ...` lines and error-level JSON lines of a text, joined, verbatim.
fn error_lines(text: &str) -> String {
    text.lines()
        .filter(|l| {
            l.starts_with("Error: ")
                || super::logs::error(l).is_some_and(|r| r.level == "error" || r.level == "fatal")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `GET /config/` from Caddy's control API on 127.0.0.1:`port`: `Ok` once Caddy answers 200.
/// The API takes the config lock a load holds, so the answer waits for a load in progress.
fn config_get(port: u16, timeout: Duration) -> Result<(), Error> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let host = format!("127.0.0.1:{port}");
    let req = http1::client::Request {
        headers: &[("Host", &host)],
        ..http1::client::Request::get("/config/")
    };
    match http1::client::request(addr, &req, timeout) {
        Ok(r) if r.status == 200 => Ok(()),
        Ok(r) => Err(Error::Refused(format!("{} {}", r.status, r.text().trim()))),
        Err(e) => Err(Error::io("GET /config/", e)),
    }
}

/// The ports of `json`'s HTTP servers on which `generation` answers a plain GET. After a
/// failed load Caddy 2.6 keeps serving the refused config on the listeners it had already
/// bound (caddyserver/caddy#7175); which ones depends on Go's map order, so a refused reload
/// can leave a port split between two generations. With SO_REUSEPORT the kernel spreads new
/// connections over both sockets by a hash of each connection's addresses, so each port is
/// asked up to 32 times on new connections: at an even split 8 tries miss a split port once
/// in 256 (a CI run of caddy.rs met such a miss), 32 tries once in 4 billion.
fn still_serving(json: &str, generation: u64) -> Vec<u16> {
    let Ok(doc) = serde_json::from_str::<serde_json::Value>(json) else {
        return Vec::new();
    };
    let want = generation.to_string();
    let req = http1::client::Request {
        headers: &[("Host", "proxybench-admin")],
        ..http1::client::Request::get("/")
    };
    let mut ports: Vec<u16> = doc
        .pointer("/apps/http/servers")
        .and_then(|s| s.as_object())
        .into_iter()
        .flat_map(|servers| servers.values())
        .flat_map(|s| s["listen"].as_array().into_iter().flatten())
        .filter_map(|l| l.as_str()?.rsplit(':').next()?.parse::<u16>().ok())
        .filter(|&port| {
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            (0..32).any(|_| {
                http1::client::request(addr, &req, Duration::from_millis(200))
                    .is_ok_and(|r| r.header("X-Config-Generation") == Some(want.as_str()))
            })
        })
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gomaxprocs_comes_from_the_rendered_id() {
        assert_eq!(gomaxprocs(r#"{"@id":"pb:gomaxprocs=4","apps":{}}"#), 4);
        assert_eq!(gomaxprocs(r#"{"apps":{}}"#), 1);
        assert_eq!(gomaxprocs("not json"), 1);
    }
}
