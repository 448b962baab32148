//! A load's `via` that aims at an address found through the Kubernetes API, checked against
//! the run's proxy and platform.

use super::*;

/// The Service proxybench puts in front of the proxy pods on Kubernetes.
const PROXY_SERVICE: &str = "proxy";

/// A load's `via` that aims at an address found through the Kubernetes API: only on that
/// platform; the proxy's Service (`service:proxy`, `node-port:`, `load-balancer:`) needs a
/// proxy of the run, a port that is one of its listeners (by name or number) of the url's
/// scheme, and a `service_type` that has the address asked for. Another Service's name and
/// port can only be checked on the cluster, before the load starts.
pub(super) fn check_cluster_via(
    on: &Where<'_>,
    l: &LoadSpec,
    via: &Via,
    proxy: Option<&ProxyConfig>,
) -> Result<(), Invalid> {
    let name = &l.name;
    if on.kind != PlatformKind::Kubernetes {
        return Err(Invalid::from(format!(
            "load '{name}' goes via '{via}', an address the Kubernetes API gives: run it with \
             --platform kubernetes (or [platform] kind = \"kubernetes\")"
        )));
    }
    if let Via::Gateway {
        namespace,
        name: gw,
        port,
    } = via
    {
        crate::platform::dns_subdomain(gw)
            .map_err(|e| format!("load '{name}': via '{via}': Gateway name '{gw}' {e}"))?;
        if let Some(n) = namespace {
            crate::platform::dns_label(n)
                .map_err(|e| format!("load '{name}': via '{via}': namespace '{n}' {e}"))?;
        }
        if port.as_deref() == Some("") {
            return Err(Invalid::from(format!(
                "load '{name}': via '{via}' names no port (a listener name or a port number)"
            )));
        }
        return Ok(());
    }
    let (service, port) = match via {
        Via::Service(n, p) => (n.as_str(), p.as_deref()),
        Via::NodePort(p) | Via::LoadBalancer(p) => (PROXY_SERVICE, Some(p.as_str())),
        _ => return Ok(()),
    };
    if service.is_empty() {
        return Err(Invalid::from(format!(
            "load '{name}': via '{via}' names no Service (service:NAME[:PORT])"
        )));
    }
    if port == Some("") {
        return Err(Invalid::from(format!(
            "load '{name}': via '{via}' names no port (a listener name or a port number)"
        )));
    }
    let need = match via {
        Via::NodePort(_) => Some(&[ServiceKind::NodePort, ServiceKind::LoadBalancer][..]),
        Via::LoadBalancer(_) => Some(&[ServiceKind::LoadBalancer][..]),
        _ => None,
    };
    if let Some(need) = need {
        if !need.contains(&on.service_type) {
            return Err(Invalid::from(format!(
                "load '{name}' goes via '{via}', but the proxy's Service is of type {} \
                 ([platform] service_type); it needs {}",
                on.service_type.name(),
                need.iter()
                    .map(|k| k.name())
                    .collect::<Vec<_>>()
                    .join(" or ")
            )));
        }
    }
    if service != PROXY_SERVICE {
        return Ok(());
    }
    let p = match proxy {
        Some(p) if p.external.is_none() => p,
        _ => {
            return Err(Invalid::from(format!(
                "load '{name}' goes via '{via}', the proxy's Service, but the run has no \
                 [proxy] of its own"
            )))
        }
    };
    let https = l.target_url().starts_with("https://");
    // A port number is checked against the Service on the cluster (listener ports without
    // a `port` are given there); a name must be a listener's.
    if let Some(port) = port.filter(|p| p.parse::<u16>().is_err()) {
        let Some(lis) = p.listeners.iter().find(|x| x.name == port) else {
            return Err(Invalid::from(format!(
                "load '{name}' goes via '{via}': the proxy's Service has no port '{port}' (its \
                 ports are its listeners: {})",
                p.listeners
                    .iter()
                    .map(|x| match x.port {
                        Some(n) => format!("{} ({n})", x.name),
                        None => x.name.clone(),
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        if lis.tls != https {
            return Err(Invalid::from(format!(
                "load '{name}': listener '{}' is {} but the url is {}",
                lis.name,
                if lis.tls { "HTTPS" } else { "HTTP" },
                if https { "https" } else { "http" }
            )));
        }
    }
    Ok(())
}
