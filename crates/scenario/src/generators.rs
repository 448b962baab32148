//! The keys of a growth by a built-in Gateway API generator: `grow = { what = "routes",
//! gateway = "gw", backend = "cafe", ... }` on an external gateway on Kubernetes, with no
//! `template`. The language checks the keys here; the generators' templates and their
//! rendering live with the manifests (`proxybench-manifests`), which the parser asks to render
//! every item through [`crate::Templates`].

use crate::error::Invalid;
use crate::platform::dns_label;
use crate::spec::{GrowSpec, GrowWhat};
use std::collections::BTreeMap;

/// How a parsed growth names a built-in generator in its `template`: `builtin:WHAT`.
pub const BUILTIN: &str = "builtin:";

/// The `template` a built-in generator of `what` goes by (`builtin:routes`); none for
/// `upstream_servers`, which adds pods, not objects.
pub fn builtin_name(what: GrowWhat) -> Option<String> {
    (what != GrowWhat::UpstreamServers).then(|| format!("{BUILTIN}{}", what.name()))
}

/// A Gateway API hostname: lowercase DNS labels, the first of which may be `*`.
pub fn is_hostname(h: &str) -> bool {
    let rest = h.strip_prefix("*.").unwrap_or(h);
    !rest.is_empty() && h.len() <= 253 && rest.split('.').all(|l| dns_label(l).is_ok())
}

/// The keys only a built-in generator takes, as written in a grow table, with whether `g` has
/// each.
pub(crate) fn keys(g: &GrowSpec) -> [(&'static str, bool); 7] {
    [
        ("gateway", g.gateway.is_some()),
        ("gateway_class", g.gateway_class.is_some()),
        ("hostname", g.hostname.is_some()),
        ("backend", g.backend.is_some()),
        ("backend_ref", g.backend_ref.is_some()),
        ("secret", g.secret.is_some()),
        ("port", g.port.is_some()),
    ]
}

/// `SERVICE:PORT` of a `backend_ref`.
pub fn backend_ref(s: &str) -> Option<(&str, u16)> {
    let (svc, port) = s.rsplit_once(':')?;
    let port: u16 = port.parse().ok().filter(|p| *p > 0)?;
    dns_label(svc).ok()?;
    Some((svc, port))
}

/// Checks a built-in growth's keys at parse: the ones its generator needs are there, the ones it
/// would ignore are not, and `backend` names a group of the run (`groups`).
pub(crate) fn check(g: &GrowSpec, groups: &BTreeMap<String, u32>) -> Result<(), Invalid> {
    let what = g.what.name();
    let listeners = matches!(g.what, GrowWhat::Listeners | GrowWhat::HttpsListeners);
    let gw = g.gateway.as_deref().ok_or_else(|| {
        format!(
            "grow: the built-in {what} generator needs `gateway` (the Gateway {}, NAME{})",
            if listeners {
                "it makes and grows"
            } else {
                "the routes attach to"
            },
            if listeners { "" } else { " or NAMESPACE/NAME" }
        )
    })?;
    let (ns, name) = match gw.split_once('/') {
        Some((_, _)) if listeners => {
            return Err(Invalid::from(format!(
                "grow: gateway '{gw}': the {what} generator makes its Gateway in the growth's \
                 namespace; name it NAME (and set the growth's `namespace`)"
            )))
        }
        Some((ns, name)) => (Some(ns), name),
        None => (None, gw),
    };
    if let Some(ns) = ns {
        dns_label(ns).map_err(|e| format!("grow: gateway '{gw}': namespace '{ns}' {e}"))?;
    }
    dns_label(name).map_err(|e| format!("grow: gateway '{gw}': name '{name}' {e}"))?;
    match (&g.backend, &g.backend_ref) {
        (Some(b), None) if groups.contains_key(b) => {}
        (Some(b), None) => {
            return Err(Invalid::from(format!(
                "grow: backend '{b}' is not a backend group of the run ([[backends]] name)"
            )))
        }
        (None, Some(r)) if backend_ref(r).is_some() => {}
        (None, Some(r)) => {
            return Err(Invalid::from(format!(
                "grow: backend_ref '{r}' is not SERVICE:PORT (a Service's name and port)"
            )))
        }
        _ => {
            return Err(Invalid::from(format!(
                "grow: the built-in {what} generator needs exactly one of `backend` (a backend \
                 group of the run) or `backend_ref` (\"SERVICE:PORT\")"
            )))
        }
    }
    let refuse = |key: &str, why: &str| Err(Invalid::from(format!("grow: `{key}` {why}")));
    if listeners {
        match &g.gateway_class {
            None => {
                return Err(Invalid::from(format!(
                    "grow: the built-in {what} generator needs `gateway_class` (the \
                     gatewayClassName of the Gateway it makes)"
                )))
            }
            Some(c) => crate::platform::dns_subdomain(c)
                .map_err(|e| format!("grow: gateway_class '{c}' {e}"))?,
        }
        if g.listener.is_some() {
            return refuse(
                "listener",
                "belongs to a route growth: the listeners generator names its listeners \
                 listener-0, listener-1, ...",
            );
        }
        if g.port == Some(0) {
            return refuse("port", "must be 1 to 65535");
        }
        if g.to > 64 {
            return Err(Invalid::from(format!(
                "grow: {} listeners on one Gateway is more than the Gateway API allows (64)",
                g.to
            )));
        }
    } else {
        for (key, set) in [
            ("gateway_class", g.gateway_class.is_some()),
            ("port", g.port.is_some()),
        ] {
            if set {
                return refuse(key, "belongs to a listeners growth (the Gateway it makes)");
            }
        }
        if let Some(l) = &g.listener {
            dns_label(l).map_err(|e| format!("grow: listener '{l}' {e}"))?;
        }
    }
    if g.secret.is_some() && g.what != GrowWhat::HttpsListeners {
        return refuse("secret", "belongs to an https_listeners growth");
    }
    if let Some(s) = &g.secret {
        crate::platform::dns_subdomain(s).map_err(|e| format!("grow: secret '{s}' {e}"))?;
    }
    if g.upstream.is_some() {
        return refuse(
            "upstream",
            "names an upstream of the run's own proxy; a built-in generator sends to `backend` \
             or `backend_ref`",
        );
    }
    if g.what == GrowWhat::Matches && !g.path.starts_with('/') {
        return Err(Invalid::from(format!(
            "grow: path '{}' does not start with '/' (matches are PATH0, PATH1, ...)",
            g.path
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grow(toml_text: &str) -> GrowSpec {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn missing_and_misplaced_keys_are_refused() {
        let groups: BTreeMap<String, u32> = [("cafe".to_string(), 2)].into();
        let bad = [
            ("what = \"routes\"\nto = 1\nbackend = \"cafe\"", "needs `gateway`"),
            ("what = \"routes\"\nto = 1\ngateway = \"g\"", "exactly one of `backend`"),
            (
                "what = \"routes\"\nto = 1\ngateway = \"g\"\nbackend = \"tea\"",
                "backend 'tea' is not a backend group",
            ),
            (
                "what = \"routes\"\nto = 1\ngateway = \"g\"\nbackend_ref = \"svc\"",
                "not SERVICE:PORT",
            ),
            (
                "what = \"routes\"\nto = 1\ngateway = \"g\"\nbackend = \"cafe\"\nsecret = \"s\"",
                "`secret` belongs to an https_listeners growth",
            ),
            (
                "what = \"listeners\"\nto = 1\ngateway = \"g\"\nbackend = \"cafe\"",
                "needs `gateway_class`",
            ),
            (
                "what = \"listeners\"\nto = 1\ngateway = \"ns/g\"\ngateway_class = \"c\"\nbackend = \"cafe\"",
                "name it NAME",
            ),
            (
                "what = \"listeners\"\nto = 65\ngateway = \"g\"\ngateway_class = \"c\"\nbackend = \"cafe\"",
                "(64)",
            ),
            (
                "what = \"routes\"\nto = 1\ngateway = \"g\"\nbackend = \"cafe\"\nport = 80",
                "`port` belongs to a listeners growth",
            ),
        ];
        for (t, want) in bad {
            let e = check(&grow(t), &groups).unwrap_err();
            assert!(e.0.contains(want), "{t}: {e}");
        }
        let g = grow("what = \"routes\"\nto = 2\ngateway = \"g\"\nbackend = \"cafe\"\nhostname = \"A_{{ i }}\"");
        check(&g, &groups).unwrap();
    }
}
