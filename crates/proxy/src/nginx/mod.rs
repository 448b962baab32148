//! The nginx driver: render a [`ProxyConfig`](crate::ProxyConfig) into nginx.conf, check it with
//! `nginx -t`, run replicas that share listener ports with `reuseport`, reload them with SIGHUP and
//! time it, stop them, and parse their logs. Nothing outside this module names nginx's binary,
//! its config language or its signals.

mod admin;
pub mod logs;
mod render;
mod replica;

pub use crate::admin::{GENERATION_HEADER, GENERATION_PATH};
pub use crate::driver::{Checked, RenderContext, StopMode};
pub use crate::tls::{self, TlsFiles};
pub use admin::{parse_stub_status, STUB_STATUS_PATH};
pub use render::render;
pub use replica::Replica;

use crate::driver::{self, Rendered};
use crate::features::Support;
use crate::logs::{AccessRecord, ErrorRecord, LogFormat};
use crate::{Error, Feature};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The nginx driver, as the run sees it through [`driver::Driver`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Nginx;

/// The driver as the registry names it ([`crate::driver()`] hands it out).
pub static DRIVER: Nginx = Nginx;

impl driver::Driver for Nginx {
    fn kind(&self) -> crate::ProxyKind {
        crate::ProxyKind::Nginx
    }

    /// `nginx -V`, verbatim (version, compiler, OpenSSL and configure arguments), for env.json.
    fn version(&self) -> Result<String, Error> {
        crate::process::output_text(&binary(), &["-V"])
    }

    fn checker(&self) -> &'static str {
        "nginx -t"
    }

    fn workers(&self, n: u32) -> Option<String> {
        Some(format!(
            "{n} worker process{}",
            if n == 1 { "" } else { "es" }
        ))
    }

    fn support(&self, feature: Feature) -> Support {
        // The model was made in nginx's words: every feature is nginx's own but one.
        match feature {
            Feature::UpstreamHttp2 => Support::No(
                "nginx 1.22 proxies to upstreams over HTTP/1.x only; its one HTTP/2 upstream, \
                 grpc_pass, speaks gRPC, not general HTTP (routes.grpc renders it)",
            ),
            Feature::TunnelTimeout => Support::Differs(
                "nginx has no timeout of its own for tunnels: on websocket routes it becomes \
                 proxy_read_timeout and proxy_send_timeout, on grpc routes grpc_read_timeout and \
                 grpc_send_timeout, each the idle time between two reads (or writes) in one \
                 direction, where HAProxy's timeout tunnel counts both",
            ),
            Feature::StreamCloseDelay => Support::No(
                "nginx 1.22 keeps an old worker's upgraded connections until \
                 worker_shutdown_timeout cuts them (without a close frame); it has no delay of \
                 its own before closing them",
            ),
            _ => Support::Yes,
        }
    }

    fn render(&self, cfg: &crate::ProxyConfig, ctx: &RenderContext) -> Result<Rendered, Error> {
        Ok(Rendered {
            text: render(cfg, ctx)?,
            file: "nginx.conf",
        })
    }

    /// Checks `conf_text` with `nginx -t`. The text is written to
    /// `prefix/nginx-test.conf` (the directory is created); render it with `RenderContext.prefix` set
    /// to `prefix` or to the replica directory it is meant for. On failure the error carries nginx's
    /// own output, verbatim (`nginx: [emerg] ... in /path/nginx-test.conf:12`).
    fn validate(&self, conf_text: &str, prefix: &Path) -> Result<Checked, Error> {
        std::fs::create_dir_all(prefix)
            .map_err(|e| Error::io(format!("cannot create {}", prefix.display()), e))?;
        let conf = prefix.join("nginx-test.conf");
        std::fs::write(&conf, conf_text)
            .map_err(|e| Error::io(format!("cannot write {}", conf.display()), e))?;
        test_file(prefix, &conf)
    }

    /// The model item (`listener.NAME`, `route.N`, `upstream.NAME`, `rate_limit.NAME`, `raw.http`...)
    /// whose rendered lines hold the line that nginx's message `msg` names (`... in
    /// /path/nginx-test.conf:12`), so that a refused config is traced back to the scenario line
    /// that produced it. `None` when the message names no line, or the line is not from an item.
    fn item_at(&self, conf_text: &str, msg: &str) -> Option<String> {
        let at = msg.rfind(".conf:")? + ".conf:".len();
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

    fn access_line<'a>(&self, format: LogFormat, line: &'a str) -> Option<AccessRecord<'a>> {
        match format {
            LogFormat::Combined => logs::combined(line),
            _ => logs::access(line),
        }
    }

    fn error_line<'a>(&self, _format: LogFormat, line: &'a str) -> Option<ErrorRecord<'a>> {
        logs::error(line)
    }

    fn container(&self) -> Option<driver::ContainerCommands> {
        // The image's nginx is Debian's at its usual path; `-t` first so that a refused
        // config leaves the running generation alone and says why.
        let nginx = "/usr/sbin/nginx";
        Some(driver::ContainerCommands {
            // `-e stderr`: the container's user (not root) cannot open the default error log
            // (/var/log/nginx/error.log), which nginx opens before it reads the config.
            start: format!("exec {nginx} -e stderr -c \"$CONF\" -g 'daemon off;'"),
            reload: format!(
                "{nginx} -e stderr -c \"$CONF\" -t -q && {nginx} -e stderr -c \"$CONF\" -s reload"
            ),
            // A file, not "stderr", as the local check: nginx prints its errors on stderr.
            check: format!("exec {nginx} -t -q -c \"$CONF\" -e /dev/null"),
            pre_stop: None,
            log_format: crate::logs::LogFormat::NginxJson,
            image: "localhost/proxybench-nginx:1.22.1",
        })
    }
}

/// The nginx binary: `$NGINX` when set, else the Debian package's `/usr/sbin/nginx`.
pub fn binary() -> PathBuf {
    std::env::var_os("NGINX")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/sbin/nginx"))
}

/// Runs `nginx -t -q` on a config file already on disk, in prefix `prefix`.
pub(crate) fn test_file(prefix: &Path, conf: &Path) -> Result<Checked, Error> {
    let t0 = Instant::now();
    let out = Command::new(binary())
        .arg("-t")
        .arg("-q")
        .arg("-p")
        .arg(prefix)
        .arg("-c")
        .arg(conf)
        // A file, not "stderr": nginx then prints its errors as `nginx: [emerg] ...` on stderr.
        .arg("-e")
        .arg("/dev/null")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::io(format!("cannot run {} -t", binary().display()), e))?;
    let took = t0.elapsed();
    let text = String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        Ok(Checked {
            took,
            warnings: text.lines().map(str::to_string).collect(),
        })
    } else {
        let mut msg = text.trim_end().to_string();
        if msg.is_empty() {
            msg = format!("nginx -t failed ({}) without a message", out.status);
        }
        Err(Error::Refused(msg))
    }
}

/// Quotes a token for nginx.conf when it needs it (spaces, quotes, braces, `;`, `#`).
pub(crate) fn quote(s: &str) -> String {
    let plain = !s.is_empty()
        && !s
            .chars()
            .any(|c| c.is_whitespace() || "\"'{};#\\".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
    }
}

/// A rate in requests per second as nginx writes it (`3r/s`, `30r/m`), or `None` when nginx
/// cannot express it (it takes whole numbers of requests per second or per minute).
pub(crate) fn nginx_rate(r: f64) -> Option<String> {
    if !r.is_finite() || r <= 0.0 {
        return None;
    }
    if r >= 1.0 && (r - r.round()).abs() < 1e-9 {
        return Some(format!("{}r/s", r.round() as u64));
    }
    let m = r * 60.0;
    if m >= 1.0 && (m - m.round()).abs() < 1e-6 {
        return Some(format!("{}r/m", m.round() as u64));
    }
    None
}

/// A duration as an nginx time value (`10s`, `250ms`); nginx counts milliseconds, so anything
/// finer is rounded up.
pub(crate) fn nginx_time(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_nanos().div_ceil(1_000_000))
    }
}

/// A byte size as nginx writes it (`10m`, `256k`, `1000`).
pub(crate) fn nginx_size(b: u64) -> String {
    if b > 0 && b % (1024 * 1024) == 0 {
        format!("{}m", b / (1024 * 1024))
    } else if b > 0 && b % 1024 == 0 {
        format!("{}k", b / 1024)
    } else {
        b.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::Driver as _;

    #[test]
    fn values_render_as_nginx_writes_them() {
        assert_eq!(nginx_rate(3.0).as_deref(), Some("3r/s"));
        assert_eq!(nginx_rate(0.5).as_deref(), Some("30r/m"));
        assert_eq!(nginx_rate(2.5).as_deref(), Some("150r/m"));
        assert_eq!(nginx_rate(1.0 / 7.0), None);
        assert_eq!(nginx_time(Duration::from_secs(10)), "10s");
        assert_eq!(nginx_time(Duration::from_millis(1500)), "1500ms");
        assert_eq!(nginx_time(Duration::from_micros(100)), "1ms");
        assert_eq!(nginx_size(10 * 1024 * 1024), "10m");
        assert_eq!(nginx_size(256 * 1024), "256k");
        assert_eq!(nginx_size(1000), "1000");
        assert_eq!(quote("$request_uri"), "$request_uri");
        assert_eq!(quote("a b\"c"), "\"a b\\\"c\"");
        assert_eq!(quote(""), "\"\"");
    }

    #[test]
    fn a_line_nginx_names_leads_back_to_its_model_item() {
        let conf =
            "events {}\nhttp {\n    # pb:item raw.http\n    bad 1;\n    # pb:item upstream.u\n    \
                    upstream u {\n        server 127.0.0.1:1;\n    }\n}\n";
        let at = |line: usize| {
            Nginx.item_at(
                conf,
                &format!("nginx: [emerg] unknown directive \"bad\" in /x/nginx-test.conf:{line}"),
            )
        };
        assert_eq!(at(4).as_deref(), Some("raw.http"));
        assert_eq!(at(7).as_deref(), Some("upstream.u"));
        assert_eq!(at(1), None);
        assert_eq!(Nginx.item_at(conf, "nginx: [emerg] no line here"), None);
    }
}
