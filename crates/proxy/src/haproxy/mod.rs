//! The HAProxy driver: render a [`ProxyConfig`](crate::ProxyConfig) into haproxy.cfg, check it
//! with `haproxy -c`, run replicas in master-worker mode (`-W -db`) that share listener ports
//! through SO_REUSEPORT (HAProxy sets it on every listener by default on Linux), reload them with
//! SIGUSR2 (the master re-executes itself and hands the listening sockets to the new worker over
//! its socket pair, `-x sockpair@`, so no connection is refused) and time it, stop them, and parse
//! their logs. Nothing outside this module names HAProxy's binary, its config language or its
//! signals.
//!
//! The capability table ([`support`]) says, feature by feature, how far HAProxy expresses the
//! model, which was written in nginx's words.

pub mod logs;
mod render;
mod replica;
mod status;

pub use render::render;
pub use replica::Replica;
pub use status::{parse_stats_csv, STATS_PATH};

use crate::driver::{self, Checked, RenderContext, Rendered};
use crate::features::Support;
use crate::logs::{AccessRecord, ErrorRecord, LogFormat};
use crate::{Error, Feature};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The HAProxy driver, as the run sees it through [`driver::Driver`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Haproxy;

/// The driver as the registry names it ([`crate::driver()`] hands it out).
pub static DRIVER: Haproxy = Haproxy;

impl driver::Driver for Haproxy {
    fn kind(&self) -> crate::ProxyKind {
        crate::ProxyKind::Haproxy
    }

    /// `haproxy -v`, verbatim, for env.json.
    fn version(&self) -> Result<String, Error> {
        crate::process::output_text(&binary(), &["-v"])
    }

    fn checker(&self) -> &'static str {
        "haproxy -c"
    }

    fn workers(&self, n: u32) -> Option<String> {
        Some(format!(
            "1 process of {n} thread{} (nbthread)",
            if n == 1 { "" } else { "s" }
        ))
    }

    /// How far HAProxy 2.6 expresses each feature of the model, with the reason wherever it is not
    /// exactly the model's (nginx's) meaning.
    // Over 120 lines on purpose: a table, one arm per feature, which the compiler holds complete
    // against `Feature`; split, a reader would lose the one place that says what HAProxy differs in.
    fn support(&self, feature: Feature) -> Support {
        use Feature as F;
        use Support::{Differs, No, Yes};
        match feature {
            F::Tls => Yes,
            F::ServerNames => Differs(
                "server names are matched on the Host header (port stripped, case-insensitive); \
                 HAProxy serves one certificate per listener and does not pick a server by SNI",
            ),
            F::LbRoundRobin => Yes,
            F::LbLeastConn => Yes,
            F::LbRandom => Yes,
            F::LbRandomTwoLeastConn => Yes,
            F::LbIpHash => Differs(
                "balance source hashes the whole client address, where nginx's ip_hash takes the \
                 first three octets of an IPv4 address",
            ),
            F::LbHash => Differs(
                "the key is translated from nginx variables ($request_uri, $uri, $host, $http_NAME, \
                 $arg_NAME, $remote_addr) into an HAProxy sample for balance hash (others are \
                 refused at render), and HAProxy's map-based hash places keys differently from \
                 nginx's",
            ),
            F::LbHashConsistent => Differs(
                "hash-type consistent is HAProxy's own ring, not nginx's ketama: keys land on other \
                 servers than under nginx, with the same property that few move when servers change",
            ),
            F::UpstreamKeepalive => Differs(
                "idle server connections are bounded per server (pool-max-conn = keepalive) rather \
                 than per worker over the whole upstream; keepalive_requests becomes max-reuse and \
                 keepalive_timeout pool-purge-delay",
            ),
            F::PassiveHealth => Differs(
                "HAProxy marks a server down after max_fails consecutive connection errors (observe \
                 layer4, error-limit, on-error mark-down) and brings it back when an active health \
                 check every fail_timeout succeeds, not after fail_timeout as nginx",
            ),
            F::NextUpstream => Differs(
                "conditions map to retry-on (error: conn-failure empty-response, timeout: \
                 response-timeout, invalid_header: junk-response, http_NNN: NNN) with option \
                 redispatch 1; HAProxy retries requests of any method (as nginx's non_idempotent) \
                 and has no retry-on for http_429, which is refused at render",
            ),
            F::NextUpstreamTries => Yes,
            F::NextUpstreamTimeout => No(
                "HAProxy 2.6 has no time budget over all attempts of a request (timeout connect and \
                 timeout server bound each attempt)",
            ),
            F::UpstreamTimeouts => Differs(
                "read_timeout and send_timeout both become HAProxy's one `timeout server` (the larger \
                 of the two), an inactivity timeout in either direction",
            ),
            F::UpstreamHttp2 => Differs(
                "HAProxy multiplexes requests on its HTTP/2 server connections (proto h2) and keeps \
                 them open even with keepalive = 0, never one connection per request as nginx's \
                 HTTP/1.x: 800 requests from 6 client connections used 16",
            ),
            F::UpstreamZone => Differs(
                "HAProxy's threads always share balancing and failure state; the zone size means \
                 nothing and is not rendered",
            ),
            F::RouteExact => Yes,
            F::RouteHeaders => Yes,
            F::RouteQuery => Yes,
            F::RouteMethod => Yes,
            F::RouteReturn => Differs(
                "the body is sent verbatim (nginx variables do not expand); a 3xx with a body \
                 becomes http-request redirect, which takes 301, 302, 303, 307 and 308 only, and \
                 HAProxy refuses statuses below 200",
            ),
            F::RateLimit => Differs(
                "a stick table counts accepted requests per key in a sliding window of one second \
                 (one minute for rates below 1 r/s) and rejects a request once rate x window were \
                 accepted in it; nginx's leaky bucket spaces requests 1/rate apart, so HAProxy lets a \
                 whole window's worth through back to back",
            ),
            F::RateLimitBurst => Differs(
                "burst is added to the requests a window accepts; excess requests are rejected at \
                 once, never queued and paced as nginx does without nodelay",
            ),
            F::RateLimitNodelay => Differs(
                "HAProxy never delays a request for a rate limit: every accepted request is served \
                 at once (nginx's nodelay), and delay=N has no equivalent",
            ),
            F::RateLimitKey => Differs(
                "the key is translated from nginx variables ($binary_remote_addr, $remote_addr, \
                 $host, $uri, $request_uri, $http_NAME, $arg_NAME) into an HAProxy sample; other \
                 expressions are refused at render",
            ),
            F::WorkerProcesses => Differs(
                "HAProxy runs one worker process with worker_processes threads (nbthread), not \
                 several processes",
            ),
            F::WorkerShutdownTimeout => Differs(
                "it becomes hard-stop-after, a bound on how long the old process may live after a \
                 reload or a soft stop: when it ends, the process exits and every connection it still \
                 holds (a WebSocket, a stream) is closed under it",
            ),
            F::TunnelTimeout => Differs(
                "it becomes timeout tunnel, which covers upgraded connections (WebSockets); a gRPC \
                 stream is an HTTP/2 stream to HAProxy, whose idle time stays under timeout client \
                 and timeout server",
            ),
            F::StreamCloseDelay => No(
                "HAProxy 2.6 closes nothing of its own accord after a reload; only hard-stop-after \
                 bounds how long the old process keeps its tunnels",
            ),
            F::RouteWebSocket => Yes,
            F::RouteGrpc => Yes,
            F::KeepaliveRequests => {
                No("HAProxy 2.6 has no bound on the requests of one client keep-alive connection")
            }
            F::KeepaliveTimeout => Yes,
            F::AccessLogOff => Yes,
            F::ErrorLogLevel => Differs(
                "HAProxy always prints its own diagnostics ([NOTICE], [WARNING], [ALERT]) on stderr; \
                 the level is not rendered",
            ),
            F::Raw => No("raw snippets are written in nginx's config language"),
        }
    }

    fn render(&self, cfg: &crate::ProxyConfig, ctx: &RenderContext) -> Result<Rendered, Error> {
        Ok(Rendered {
            text: render(cfg, ctx)?,
            file: "haproxy.cfg",
        })
    }

    /// Checks `conf_text` with `haproxy -c`, written to `dir/haproxy-test.cfg` (the directory is
    /// created). On refusal the error carries HAProxy's own `[ALERT]` lines, verbatim (`[ALERT]
    /// (123) : config : parsing [/dir/haproxy-test.cfg:12] : ...`).
    fn validate(&self, conf_text: &str, dir: &Path) -> Result<Checked, Error> {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
        let conf = dir.join("haproxy-test.cfg");
        std::fs::write(&conf, conf_text)
            .map_err(|e| Error::io(format!("cannot write {}", conf.display()), e))?;
        test_file(&conf)
    }

    /// The model item (`listener.NAME`, `route.N`, `upstream.NAME`, `rate_limit.NAME`) whose
    /// rendered lines hold the first line HAProxy's message `msg` names (`parsing
    /// [/path/haproxy.cfg:12]`), so a refused config is traced back to the scenario line that made
    /// it. `None` when the message names no line, or the line is not from an item.
    fn item_at(&self, conf_text: &str, msg: &str) -> Option<String> {
        let at = msg.find(".cfg:")? + ".cfg:".len();
        driver::item_of_line(conf_text, &msg[at..], render::ITEM_MARK)
    }

    fn start(
        &self,
        name: &str,
        ctx: &RenderContext,
        rendered: &Rendered,
    ) -> Result<Box<dyn driver::Replica>, Error> {
        Ok(Box::new(Replica::start(
            name,
            &ctx.prefix,
            &rendered.text,
            ctx.admin_port,
            ctx.generation,
        )?))
    }

    fn access_line<'a>(&self, _format: LogFormat, line: &'a str) -> Option<AccessRecord<'a>> {
        logs::access(line)
    }

    fn error_line<'a>(&self, _format: LogFormat, line: &'a str) -> Option<ErrorRecord<'a>> {
        logs::error(line)
    }

    /// HAProxy also writes its proxies' notices (`Proxy fe_http stopped ...`, also on its
    /// stderr) to the stream its access log goes to; they are not access-log lines.
    fn not_a_request(&self, _format: LogFormat, line: &str) -> bool {
        !line.starts_with("pb ")
    }

    fn container(&self) -> Option<driver::ContainerCommands> {
        Some(container())
    }
}

/// HAProxy in a container: Debian's binary at its usual path, master-worker in the foreground
/// as the container's main process (the image's stop signal, SIGUSR1, is its soft stop).
/// A reload checks `$CONF` with `haproxy -c`, waits until the master takes signals (its
/// wait-mode image with SIGUSR1 and SIGUSR2 caught and not blocked, as the local replica does)
/// and sends it SIGUSR2. The certificate PEM the config names is made from `$TLS_CERT` and
/// `$TLS_KEY` before the proxy or its checker reads the config.
fn container() -> driver::ContainerCommands {
    let haproxy = "/usr/sbin/haproxy";
    let pem = format!(
        "if [ -n \"$TLS_CERT\" ]; then umask 077; {{ cat \"$TLS_CERT\"; echo; cat \"$TLS_KEY\"; }} \
         > \"$PREFIX/{}\"; fi",
        render::TLS_PEM
    );
    // SIGUSR1 is bit 9 and SIGUSR2 bit 11 of the masks in /proc/PID/status (0xa00).
    let ready = "m=$(cat \"$PREFIX/haproxy.pid\" 2>/dev/null || echo 1); i=0; \
         until tr '\\0' '\\n' < /proc/$m/environ 2>/dev/null | grep -qx HAPROXY_MWORKER_WAIT_ONLY=1 \
         && c=$(sed -n 's/^SigCgt:[[:space:]]*//p' /proc/$m/status) \
         && b=$(sed -n 's/^SigBlk:[[:space:]]*//p' /proc/$m/status) \
         && [ $(( 0x$c & 0xa00 )) -eq $(( 0xa00 )) ] && [ $(( 0x$b & 0xa00 )) -eq 0 ]; do \
         i=$((i + 1)); if [ $i -gt 1500 ]; then \
         echo \"haproxy: the master (pid $m) did not take signals within 15 s\" >&2; exit 1; fi; \
         usleep 10000; done";
    driver::ContainerCommands {
        start: format!("{pem}; exec {haproxy} -W -db -f \"$CONF\""),
        reload: format!("{haproxy} -c -f \"$CONF\" >/dev/null && {ready} && kill -USR2 $m"),
        check: format!("{pem}; exec {haproxy} -c -f \"$CONF\""),
        pre_stop: None,
        log_format: crate::logs::LogFormat::Haproxy,
        image: "localhost/proxybench-haproxy:2.6.12",
    }
}

/// The haproxy binary: `$HAPROXY` when set, else the Debian package's `/usr/sbin/haproxy`.
pub fn binary() -> PathBuf {
    std::env::var_os("HAPROXY")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/sbin/haproxy"))
}

/// Runs `haproxy -c -f conf` on a file already on disk.
pub(crate) fn test_file(conf: &Path) -> Result<Checked, Error> {
    let t0 = Instant::now();
    let out = Command::new(binary())
        .arg("-c")
        .arg("-f")
        .arg(conf)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::io(format!("cannot run {} -c", binary().display()), e))?;
    let took = t0.elapsed();
    let text = String::from_utf8_lossy(&out.stderr);
    let with = |tag: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with(tag))
            .map(str::to_string)
            .collect()
    };
    if out.status.success() {
        Ok(Checked {
            took,
            warnings: with("[WARNING]"),
        })
    } else {
        let alerts = with("[ALERT]");
        let msg = if alerts.is_empty() {
            let all = text.trim_end();
            if all.is_empty() {
                format!("haproxy -c failed ({}) without a message", out.status)
            } else {
                all.to_string()
            }
        } else {
            alerts.join("\n")
        };
        Err(Error::Refused(msg))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::Driver as _;

    #[test]
    fn every_feature_has_an_answer_and_every_limit_a_sentence() {
        for f in Feature::ALL {
            match Haproxy.support(f) {
                Support::Yes => {}
                Support::Differs(s) | Support::No(s) => assert!(s.len() > 40, "{f}: {s}"),
            }
        }
        assert!(matches!(Haproxy.support(Feature::Raw), Support::No(_)));
        assert!(matches!(
            Haproxy.support(Feature::RateLimit),
            Support::Differs(_)
        ));
    }

    #[test]
    fn a_line_haproxy_names_leads_back_to_its_model_item() {
        let conf = "global\n# pb:item upstream.u\nbackend be_u\n    server s0 127.0.0.1:1\n\
                    # pb:item route.2\n    http-request return status 150\n";
        let at = |line: usize| {
            Haproxy.item_at(
                conf,
                &format!("[ALERT]    (1) : config : parsing [/x/haproxy-test.cfg:{line}] : bad"),
            )
        };
        assert_eq!(at(4).as_deref(), Some("upstream.u"));
        assert_eq!(at(6).as_deref(), Some("route.2"));
        assert_eq!(at(1), None);
        assert_eq!(Haproxy.item_at(conf, "[ALERT] no line here"), None);
    }
}
