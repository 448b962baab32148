//! The checks of an action's parts against the case: a probe, a backend group, a growth and its
//! upstream servers.

use super::*;

/// Checks a `probe` table of `action`: a selector (else `proxy`, the run's own deployed proxy,
/// whose pods are the default targets), the namespace, the scheme, the status and the numbers.
pub(super) fn check_probe(
    action: &str,
    p: &ProbeSpec,
    proxy: Option<&ProxyConfig>,
) -> Result<(), Invalid> {
    match &p.selector {
        Some(s) => {
            label_selector(s).map_err(|e| format!("{action}: probe.selector '{s}': {e}"))?;
            if p.port.is_none() {
                return Err(Invalid::from(format!(
                    "{action}: probe.port is needed with probe.selector (the pods' port)"
                )));
            }
        }
        None if proxy.is_some_and(|c| c.external.is_none()) => {}
        None => {
            return Err(Invalid::from(format!(
                "{action}: probe.selector is needed: the run deploys no proxy whose pods it \
                 would probe (selector = \"app=gw\", port = 8080)"
            )))
        }
    }
    if let Some(n) = &p.namespace {
        dns_label(n).map_err(|e| format!("{action}: probe.namespace '{n}' {e}"))?;
    }
    if p.port == Some(0) {
        return Err(Invalid::from(format!(
            "{action}: probe.port must be 1 to 65535"
        )));
    }
    if !["http", "https", "grpc", "grpcs"].contains(&p.scheme.as_str()) {
        return Err(Invalid::from(format!(
            "{action}: probe.scheme '{}' is not http, https, grpc or grpcs",
            p.scheme
        )));
    }
    match p.status {
        Some(s) if p.grpc() && s > 16 => {
            return Err(Invalid::from(format!(
                "{action}: probe.status {s} is not a gRPC status code (0 to 16) for a {} probe",
                p.scheme
            )))
        }
        Some(s) if !p.grpc() && !(100..=599).contains(&s) => {
            return Err(Invalid::from(format!(
                "{action}: probe.status {s} is not an HTTP status (100 to 599)"
            )))
        }
        _ => {}
    }
    // A growth's path is a template (checked again once rendered, item by item).
    let templated = action == "grow" && p.path.starts_with("{{");
    if !templated && !p.path.starts_with('/') {
        return Err(Invalid::from(format!(
            "{action}: probe.path '{}' does not start with '/'",
            p.path
        )));
    }
    if p.consecutive == 0 {
        return Err(Invalid::from(format!(
            "{action}: probe.consecutive must be at least 1"
        )));
    }
    if p.every.0.is_zero() || p.timeout.0.is_zero() {
        return Err(Invalid::from(format!(
            "{action}: probe.every and probe.timeout must be more than 0"
        )));
    }
    if p.every.0 > p.timeout.0 {
        return Err(Invalid::from(format!(
            "{action}: probe.every ({}) is longer than probe.timeout ({})",
            p.every, p.timeout
        )));
    }
    Ok(())
}

/// Refuses a backend name that is not `GROUP-INDEX` of a known group. Instances added by scaling
/// may not exist at the start; only the group must.
pub(super) fn backend_exists(groups: &BTreeMap<String, u32>, n: &str) -> Result<(), Invalid> {
    let (g, i) = n
        .rsplit_once('-')
        .ok_or_else(|| format!("backend '{n}' is not GROUP-INDEX"))?;
    i.parse::<u32>()
        .map_err(|_| format!("backend '{n}' is not GROUP-INDEX"))?;
    if groups.contains_key(g) {
        Ok(())
    } else {
        Err(Invalid::from(format!(
            "backend '{n}': no backend group '{g}'"
        )))
    }
}

pub(super) fn check_grow(g: &GrowSpec, p: &ProxyConfig) -> Result<(), Invalid> {
    if g.by == 0 {
        return Err(Invalid::from("grow: `by` must be at least 1"));
    }
    let up = match &g.upstream {
        Some(u) => p
            .upstream(u)
            .ok_or_else(|| format!("grow: no upstream '{u}'"))?,
        None => p
            .upstreams
            .first()
            .ok_or("grow: the proxy has no upstream to send new routes to")?,
    };
    let _ = up;
    match g.what {
        GrowWhat::Routes | GrowWhat::Matches => {
            match &g.listener {
                Some(l) => {
                    let lis = p
                        .listener(l)
                        .ok_or_else(|| format!("grow: no listener '{l}'"))?;
                    if lis.tls {
                        return Err(Invalid::from(format!("grow: listener '{l}' is HTTPS; routes and matches grow on a plain HTTP listener")));
                    }
                }
                None => {
                    if !p.listeners.iter().any(|l| !l.tls) {
                        return Err(Invalid::from(
                            "grow: routes and matches need a plain HTTP listener",
                        ));
                    }
                }
            }
            if g.what == GrowWhat::Matches && (!g.path.starts_with('/') || g.header.is_empty()) {
                return Err(Invalid::from(
                    "grow: matches need a `path` starting with '/' and a `header`",
                ));
            }
        }
        GrowWhat::Listeners | GrowWhat::HttpsListeners | GrowWhat::UpstreamServers => {}
        GrowWhat::GrpcRoutes => {
            return Err(Invalid::from(
                "grow: grpc_routes are GRPCRoutes: they grow on an external Gateway API gateway \
                 on Kubernetes ([proxy] kind = \"external\", `gateway`, `backend`, `probe`); the \
                 run's own proxy grows `routes`",
            ))
        }
    }
    if g.to > 20_000 && g.what != GrowWhat::Matches {
        return Err(Invalid::from(format!(
            "grow: {} {} is beyond what one machine can hold (open files are limited to 20000)",
            g.to,
            g.what.name()
        )));
    }
    Ok(())
}

/// `upstream_servers` behind an external gateway: `backend` names a group of the run, and no
/// key of a generator, a template or a probe is there (the new pods' own request counters time
/// the step).
pub(super) fn check_upstream_servers(
    g: &GrowSpec,
    groups: &BTreeMap<String, u32>,
) -> Result<(), Invalid> {
    match &g.backend {
        None => {
            return Err(Invalid::from(
                "grow: upstream_servers behind an external gateway needs `backend` (the run's \
                 backend group whose Deployment grows)",
            ))
        }
        Some(b) if !groups.contains_key(b) => {
            return Err(Invalid::from(format!(
                "grow: backend '{b}' is not a backend group of the run ([[backends]] name)"
            )))
        }
        Some(_) => {}
    }
    if g.by == 0 {
        return Err(Invalid::from("grow: `by` must be at least 1"));
    }
    let stray = crate::generators::keys(g)
        .into_iter()
        .filter(|(k, _)| *k != "backend")
        .chain([
            ("upstream", g.upstream.is_some()),
            ("namespace", g.namespace.is_some()),
            ("wait", g.wait.is_some()),
            ("probe", g.probe.is_some()),
        ])
        .find_map(|(k, set)| set.then_some(k));
    if let Some(k) = stray {
        return Err(Invalid::from(format!(
            "grow: `{k}` does not belong to upstream_servers behind an external gateway (it \
             grows `backend` and times each new pod's first request by its own counters)"
        )));
    }
    Ok(())
}
