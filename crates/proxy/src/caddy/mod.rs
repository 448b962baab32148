//! The Caddy driver: render a [`ProxyConfig`](crate::ProxyConfig) into Caddy's native JSON
//! config, check it with `caddy validate`, run replicas (`caddy run`) that share listener ports
//! (Caddy 2.6 sets SO_REUSEPORT on its Linux listeners), reload them gracefully by loading the
//! new config through Caddy's admin API (`POST /load` on the replica's control port) and time
//! it, stop them by signal, and parse their JSON logs. Automatic HTTPS, ACME and OCSP stapling
//! stay off, and Caddy's home, data and config directories point into the replica directory.
//! Nothing outside this module names Caddy's binary, its config or its signals.

pub mod logs;
mod render;
mod replica;

pub use crate::driver::{Checked, RenderContext, StopMode};
pub use render::render;
pub use replica::{Replica, DRAIN};

use crate::driver::{self, Rendered};
use crate::features::Support;
use crate::logs::{AccessRecord, ErrorRecord, LogFormat};
use crate::{Error, Feature};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The Caddy driver, as the run sees it through [`driver::Driver`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Caddy;

/// The driver as the registry names it ([`crate::driver()`] hands it out).
pub static DRIVER: Caddy = Caddy;

/// The config file's name in a replica directory.
pub const CONFIG_FILE: &str = "caddy.json";

impl driver::Driver for Caddy {
    fn kind(&self) -> crate::ProxyKind {
        crate::ProxyKind::Caddy
    }

    /// `caddy version`, verbatim, for env.json.
    fn version(&self) -> Result<String, Error> {
        crate::process::output_text(&binary(), &["version"])
    }

    fn checker(&self) -> &'static str {
        "caddy validate"
    }

    fn workers(&self, n: u32) -> Option<String> {
        Some(format!("1 process, GOMAXPROCS={n}"))
    }

    /// How far Caddy 2.6 expresses each feature of the model (the capability table).
    fn support(&self, feature: Feature) -> Support {
        use Feature as F;
        const NO_LIMITER: &str = "Caddy 2.6's standard build has no rate limiter (rate_limit is a \
                                  third-party plugin Debian's package does not include)";
        match feature {
            F::Tls | F::ServerNames | F::LbRoundRobin | F::LbRandom | F::LbRandomTwoLeastConn => {
                Support::Yes
            }
            F::RouteExact | F::RouteHeaders | F::RouteMethod => Support::Yes,
            F::RouteWebSocket | F::RouteGrpc => Support::Yes,
            F::TunnelTimeout => Support::No(
                "Caddy 2.6 has no idle timeout for upgraded connections (stream_timeout came in \
                 2.7), and its transport's read_timeout would cut idle WebSockets",
            ),
            F::StreamCloseDelay => Support::No(
                "stream_close_delay came in Caddy 2.7; Debian ships 2.6, which closes the old \
                 configuration's upgraded connections (close frame 1001) the moment a reload \
                 unloads it",
            ),
            F::NextUpstreamTimeout | F::UpstreamTimeouts => Support::Yes,
            F::KeepaliveTimeout | F::AccessLogOff => Support::Yes,
            F::WorkerShutdownTimeout => Support::Differs(
                "it becomes the http app's grace_period, which bounds a graceful stop and the old \
                 servers' requests at a reload; upgraded connections are not held for it: a reload \
                 closes every WebSocket at once with a close frame 1001 (Caddy 2.6.2, measured)",
            ),
            F::LbLeastConn => Support::Differs(
                "Caddy breaks ties between the least-loaded servers at random; nginx goes round \
                 robin among them",
            ),
            F::LbIpHash => Support::Differs(
                "Caddy hashes the whole client address (rendezvous hashing); nginx hashes the first \
                 three octets of an IPv4 address",
            ),
            F::LbHash => Support::Differs(
                "Caddy hashes with rendezvous hashing (few keys move when servers change, unlike \
                 nginx's plain hash) and only $request_uri or one request header ($http_NAME, random \
                 when the header is absent); other keys are refused",
            ),
            F::LbHashConsistent => Support::Differs(
                "Caddy's rendezvous hashing is consistent but not ketama: keys land on other servers \
                 than with nginx; only $request_uri or one request header ($http_NAME)",
            ),
            F::UpstreamKeepalive => Support::Differs(
                "keepalive bounds Caddy's idle connections per backend server (not per worker); \
                 keepalive_requests has no equivalent in Go's transport and is not applied",
            ),
            F::PassiveHealth => Support::Differs(
                "Caddy remembers each failure for fail_timeout and keeps a server out while max_fails \
                 are remembered; nginx counts failures within fail_timeout, then keeps the server out \
                 for fail_timeout; with every server out Caddy answers 503, nginx 502",
            ),
            F::NextUpstream => Support::Differs(
                "Caddy passes a request on after a connection error, and after a failed round trip \
                 only for GET; it never passes on because of the upstream's status (http_5xx, \
                 http_4xx) or an invalid header",
            ),
            F::NextUpstreamTries => Support::Differs(
                "Caddy picks each retry's server with the balancing policy again, so a retry may go \
                 to a server already tried",
            ),
            F::UpstreamHttp2 => Support::Differs(
                "Go's HTTP/2 transport multiplexes requests on its h2c connections and keeps them \
                 open whatever keepalive says (keepalive and its idle timeout do not apply to them): \
                 800 requests from 6 client connections used 4 with keepalive = 0",
            ),
            F::UpstreamZone => Support::Differs(
                "Caddy runs one process, so balancing and failure state are always shared; the zone \
                 size has no meaning",
            ),
            F::RouteQuery => Support::Differs(
                "Caddy compares query values after URL-decoding them (and `*` matches any value); \
                 nginx compares the raw text",
            ),
            F::RouteReturn => Support::Differs(
                "Caddy sends the body (the Location of a 3xx) as written: nginx variables in it are \
                 not expanded",
            ),
            F::RateLimit | F::RateLimitBurst | F::RateLimitNodelay | F::RateLimitKey => {
                Support::No(NO_LIMITER)
            }
            F::WorkerProcesses => Support::Differs(
                "Caddy is one process: worker_processes sets GOMAXPROCS (threads running Go code at \
                 once), not processes",
            ),
            F::KeepaliveRequests => Support::No(
                "Go's HTTP server, which Caddy uses, has no bound on requests per client connection \
                 (nor the default 1000 of nginx: Caddy never closes a busy keep-alive connection)",
            ),
            F::ErrorLogLevel => Support::Differs(
                "Caddy's levels are debug, info, warn and error: notice logs as info, crit as error",
            ),
            F::Raw => Support::No("raw snippets are written in nginx's config language"),
        }
    }

    fn render(&self, cfg: &crate::ProxyConfig, ctx: &RenderContext) -> Result<Rendered, Error> {
        Ok(Rendered {
            text: render(cfg, ctx)?,
            file: CONFIG_FILE,
        })
    }

    /// Checks `json` with `caddy validate`, written to `dir/caddy-test.json` (the directory is
    /// created). Its log writers are pointed at stderr for the check, so that validating never
    /// writes into a running replica's logs. On refusal the error carries Caddy's message, verbatim
    /// (`loading http app module: ... server http: ... route 0: ...`).
    fn validate(&self, json: &str, dir: &Path) -> Result<Checked, Error> {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
        let file = dir.join("caddy-test.json");
        let text = for_validation(json);
        std::fs::write(&file, text)
            .map_err(|e| Error::io(format!("cannot write {}", file.display()), e))?;
        validate_file(dir, &file)
    }

    /// The model item (`listener.NAME`, `route.N`, `upstream.NAME`) that Caddy's message `msg`
    /// leads to: the message names a path through the config (`server NAME: ... route 1: ...
    /// position 0: ... route 3: ...`), which is followed through the rendered JSON; the deepest
    /// object on it that carries an `@id` names the item. `None` when the message names no
    /// rendered object, or none rendered from an item.
    fn item_at(&self, json: &str, msg: &str) -> Option<String> {
        let doc: Value = serde_json::from_str(json).ok()?;
        let mut cur: Option<&Value> = None;
        let mut item = None;
        for seg in msg.split(": ") {
            let seg = seg.trim().trim_start_matches("Error: ");
            let next = if let Some(name) = seg.strip_prefix("server ") {
                doc.pointer("/apps/http/servers")
                    .and_then(|s| s.get(name.trim()))
            } else if seg.starts_with("loading tls app module") {
                doc.pointer("/apps/tls")
            } else if let Some(n) = seg.strip_prefix("route ") {
                let n: usize = match n.trim().parse() {
                    Ok(n) => n,
                    Err(_) => continue,
                };
                cur.and_then(|c| {
                    c.get("routes").or_else(|| {
                        c.get("handle")?
                            .as_array()?
                            .iter()
                            .find_map(|h| h.get("routes"))
                    })
                })
                .and_then(|r| r.get(n))
            } else if let Some(n) = seg.strip_prefix("position ") {
                let n: usize = match n.trim().parse() {
                    Ok(n) => n,
                    Err(_) => continue,
                };
                cur.and_then(|c| c.get("handle")).and_then(|h| h.get(n))
            } else {
                continue;
            };
            let Some(v) = next else { break };
            cur = Some(v);
            if let Some(id) = v.get("@id").and_then(Value::as_str) {
                if let Some((_, it)) = id.split_once(':') {
                    item = Some(it.to_string());
                }
            }
        }
        item
    }

    fn start(
        &self,
        name: &str,
        ctx: &RenderContext,
        rendered: &Rendered,
    ) -> Result<Box<dyn driver::Replica>, Error> {
        Ok(Box::new(Replica::start(name, ctx, &rendered.text)?))
    }

    fn access_line<'a>(&self, _format: LogFormat, line: &'a str) -> Option<AccessRecord<'a>> {
        logs::access(line)
    }

    fn error_line<'a>(&self, _format: LogFormat, line: &'a str) -> Option<ErrorRecord<'a>> {
        logs::error(line)
    }

    fn container(&self) -> Option<driver::ContainerCommands> {
        Some(container())
    }
}

/// Caddy in a container: Debian's binary at its usual path, `caddy run` in the foreground as the
/// container's main process (SIGTERM, the image's stop signal, is its graceful stop), its home,
/// data and config directories in `$PREFIX` and GOMAXPROCS from the rendered config, as the local
/// replica. A reload is `caddy validate`, then `caddy reload`, which loads the file through the
/// admin API at the address the config names (the pod's own loopback). Before the stop signal,
/// keep-alive connections drain for [`DRAIN`] (every answer closes its connection; see there).
fn container() -> driver::ContainerCommands {
    let caddy = "/usr/bin/caddy";
    let env = format!(
        "export HOME=\"$PREFIX/caddy-home\" XDG_DATA_HOME=\"$PREFIX/caddy-data\" \
         XDG_CONFIG_HOME=\"$PREFIX/caddy-config\"; mkdir -p \"$HOME\" \"$XDG_DATA_HOME\" \
         \"$XDG_CONFIG_HOME\"; p=$(sed -n 's/.*\"{}\\([0-9]*\\)\".*/\\1/p' \"$CONF\" | head -n 1); \
         export GOMAXPROCS=${{p:-1}}",
        render::PROCS_ID
    );
    // Caddy logs JSON lines, then `Error: <message>`: the message alone, as the local check.
    let validate = format!(
        "out=$({caddy} validate --config \"$CONF\" --adapter '' 2>&1) || \
         {{ printf '%s\\n' \"$out\" | sed -n '/^Error: /,$p' >&2; exit 1; }}"
    );
    driver::ContainerCommands {
        start: format!(
            "{env}; rm -f \"$PREFIX/{}\"; exec {caddy} run --config \"$CONF\" --adapter ''",
            render::DRAIN_FILE
        ),
        reload: format!(
            "{env}; {validate}; {caddy} reload --config \"$CONF\" --adapter '' --force"
        ),
        check: format!("{env}; {validate}"),
        pre_stop: Some(format!(
            "touch \"$PREFIX/{}\"; usleep {}",
            render::DRAIN_FILE,
            DRAIN.as_micros()
        )),
        log_format: crate::logs::LogFormat::Caddy,
        image: "localhost/proxybench-caddy:2.6.2",
    }
}

/// The caddy binary: `$CADDY` when set, else the Debian package's `/usr/bin/caddy`.
pub fn binary() -> PathBuf {
    std::env::var_os("CADDY")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/caddy"))
}

/// A caddy command whose home, data and config directories lie in `dir` (so it writes nothing
/// outside it), started in `dir`.
pub(crate) fn command(dir: &Path) -> Command {
    let mut cmd = Command::new(binary());
    cmd.current_dir(dir)
        .env("HOME", dir.join("caddy-home"))
        .env("XDG_DATA_HOME", dir.join("caddy-data"))
        .env("XDG_CONFIG_HOME", dir.join("caddy-config"));
    cmd
}

/// The config with every log writer on stderr (a copy; the text unchanged if it is no JSON,
/// which `caddy validate` then refuses itself).
fn for_validation(json: &str) -> String {
    let Ok(mut v) = serde_json::from_str::<Value>(json) else {
        return json.to_string();
    };
    if let Some(logs) = v
        .pointer_mut("/logging/logs")
        .and_then(Value::as_object_mut)
    {
        for l in logs.values_mut() {
            if l.get("writer").is_some() {
                l["writer"] = serde_json::json!({"output": "stderr"});
            }
        }
    }
    v.to_string()
}

/// Runs `caddy validate --adapter ''` on a config file already on disk.
fn validate_file(dir: &Path, file: &Path) -> Result<Checked, Error> {
    let t0 = Instant::now();
    let out = command(dir)
        .arg("validate")
        .arg("--config")
        .arg(file)
        .arg("--adapter")
        .arg("")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::io(format!("cannot run {} validate", binary().display()), e))?;
    let took = t0.elapsed();
    let text = String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        // Warnings, verbatim, but not the one the driver asks for (automatic HTTPS off).
        let warnings = text
            .lines()
            .filter(|l| {
                logs::error(l).is_some_and(|r| r.level == "warn")
                    && !l.contains("automatic HTTPS is completely disabled")
            })
            .map(str::to_string)
            .collect();
        Ok(Checked { took, warnings })
    } else {
        // Caddy logs JSON lines, then `Error: <message>` on its own lines.
        let msg: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("Error: "))
            .collect();
        let mut msg = msg.join("\n");
        if msg.is_empty() {
            msg = text.trim_end().to_string();
        }
        if msg.is_empty() {
            msg = format!("caddy validate failed ({}) without a message", out.status);
        }
        Err(Error::Refused(msg))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::Driver as _;

    #[test]
    fn every_feature_has_an_answer_with_a_reason_when_not_yes() {
        for f in Feature::ALL {
            match Caddy.support(f) {
                Support::Yes => {}
                Support::Differs(s) | Support::No(s) => assert!(s.len() > 20, "{f:?}"),
            }
        }
        assert!(matches!(Caddy.support(Feature::RateLimit), Support::No(_)));
        assert!(matches!(Caddy.support(Feature::Raw), Support::No(_)));
    }

    #[test]
    fn a_path_caddy_names_leads_back_to_its_model_item() {
        let json = r#"{"apps":{"tls":{"@id":"pb9:listener.https"},"http":{"servers":{"web":{"@id":"pb1:listener.web","routes":[
            {"handle":[{"handler":"headers"}]},
            {"@id":"pb2:listener.web","match":[{"host":["a","A"]}],"handle":[{"handler":"subroute","routes":[
                {"@id":"pb3:route.0","handle":[{"handler":"static_response"}]},
                {"@id":"pb4:route.2","handle":[{"@id":"pb5:upstream.app","handler":"reverse_proxy"}]}]}]}]}}}}}"#;
        let at = |m: &str| Caddy.item_at(json, m);
        assert_eq!(
            at("Error: loading http app module: provision http: server web: setting up route matchers: route 1: loading matcher modules: module name 'host': provision http.matchers.host: host at index 0 is repeated at index 1: a").as_deref(),
            Some("listener.web")
        );
        assert_eq!(
            at("loading http app module: provision http: server web: setting up route handlers: route 1: loading handler modules: position 0: loading module 'subroute': provision http.handlers.subroute: setting up subroutes: route 1: loading handler modules: position 0: loading module 'reverse_proxy': provision http.handlers.reverse_proxy: bad").as_deref(),
            Some("upstream.app")
        );
        assert_eq!(
            at("server web: setting up route handlers: route 1: loading handler modules: position 0: loading module 'subroute': provision http.handlers.subroute: setting up subroutes: route 0: x").as_deref(),
            Some("route.0")
        );
        assert_eq!(
            at("loading tls app module: provision tls: loading certificates: open /x: no such file").as_deref(),
            Some("listener.https")
        );
        assert_eq!(at("server nope: route 0: x"), None);
        assert_eq!(at("no path here"), None);
    }

    #[test]
    fn validation_copies_send_logs_to_stderr() {
        let json = r#"{"logging":{"logs":{"default":{"writer":{"output":"file","filename":"/x/caddy.log"}}}}}"#;
        let v: Value = serde_json::from_str(&for_validation(json)).unwrap();
        assert_eq!(
            v.pointer("/logging/logs/default/writer/output"),
            Some(&Value::String("stderr".into()))
        );
        assert_eq!(for_validation("not json"), "not json");
    }
}
