//! The checks of an external target's config (`kind = "external"`, `[proxy.external]`): a proxy
//! the user runs, of which proxybench renders nothing.

use super::{Invalid, ProxyConfig, ProxyKind, Raw};

/// The longest name `/proc/PID/comm` holds.
const COMM_MAX: usize = 15;

/// The checks of a config that is (or says it is) external: `[proxy.external]` present iff the
/// kind is external, and nothing for proxybench to render.
pub(crate) fn check_config(cfg: &ProxyConfig) -> Result<(), Invalid> {
    let bad = |m: String| Err(Invalid(m));
    let ext = match (cfg.kind, &cfg.external) {
        (ProxyKind::External, Some(e)) => e,
        (ProxyKind::External, None) => {
            return bad(
                "kind = \"external\" needs a [proxy.external] table (resolve, reload, \
                        access_log, error_log, processes; each optional)"
                    .into(),
            )
        }
        (kind, Some(_)) => {
            return bad(format!(
                "[proxy.external] is for kind = \"external\" only (kind is {kind})"
            ))
        }
        (_, None) => return Ok(()),
    };
    let mut carried = Vec::new();
    for (n, what) in [
        (cfg.listeners.len(), "listeners"),
        (cfg.upstreams.len(), "upstreams"),
        (cfg.routes.len(), "routes"),
        (cfg.rate_limits.len(), "rate_limits"),
    ] {
        if n > 0 {
            carried.push(what);
        }
    }
    if cfg.raw != Raw::default() {
        carried.push("raw");
    }
    if !carried.is_empty() {
        return bad(format!(
            "an external target runs its own config: [proxy] must not carry {} (point the \
             loads' urls at your proxy and its config at the backends' `listen` ports)",
            carried.join(", ")
        ));
    }
    if cfg.replicas != 1 {
        return bad(
            "an external target is one proxy that proxybench did not start: proxy.replicas \
             must be 1"
                .into(),
        );
    }
    if let Some(ip) = ext.resolve {
        if !ip.is_loopback() || !ip.is_ipv4() {
            return bad(format!(
                "proxy.external.resolve = {ip}: loads go only to 127.0.0.0/8"
            ));
        }
    }
    if ext.reload.first().is_some_and(|p| p.is_empty()) {
        return bad("proxy.external.reload: the program name is empty".into());
    }
    for (what, log) in [
        ("access_log", &ext.access_log),
        ("error_log", &ext.error_log),
    ] {
        if let Some(l) = log {
            if !l.path.is_absolute() {
                return bad(format!(
                    "proxy.external.{what}: {} is not an absolute path",
                    l.path.display()
                ));
            }
        }
    }
    if let Some(p) = &ext.processes {
        if p.is_empty() || p.len() > COMM_MAX || p.contains('/') {
            return bad(format!(
                "proxy.external.processes = '{p}': a process name as /proc/PID/comm shows it \
                 (1 to {COMM_MAX} characters, no '/')"
            ));
        }
    }
    Ok(())
}
