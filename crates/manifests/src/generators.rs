//! Built-in Gateway API generators: `grow = { what = "routes", gateway = "gw", backend = "cafe",
//! ... }` on an external gateway on Kubernetes, with no `template`, grows from a template shipped
//! in the binary (`generators/*.yaml.j2`). It is rendered exactly as a user's template is
//! ([`crate::template`]): every item at parse, errors at the template's line and the item, and
//! again by the platform with the run's values; the grow table's keys become the template's
//! parameters ([`params`]), so one mechanism serves both. The language checks the keys
//! (`scenario::generators`).

use crate::template::{render_item, ItemVars, Params, TemplateError};
use scenario::generators::{builtin_name, is_hostname, BUILTIN};
use scenario::{GrowSpec, GrowWhat};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;

const ROUTES: &str = include_str!("generators/routes.yaml.j2");
const GRPC_ROUTES: &str = include_str!("generators/grpc_routes.yaml.j2");
const MATCHES: &str = include_str!("generators/matches.yaml.j2");
const LISTENERS: &str = include_str!("generators/listeners.yaml.j2");

/// The generator of `what` (its `template` name and text); none for `upstream_servers`, which
/// adds pods, not objects.
pub fn builtin(what: GrowWhat) -> Option<(String, &'static str)> {
    let text = match what {
        GrowWhat::Routes => ROUTES,
        GrowWhat::GrpcRoutes => GRPC_ROUTES,
        GrowWhat::Matches => MATCHES,
        GrowWhat::Listeners | GrowWhat::HttpsListeners => LISTENERS,
        GrowWhat::UpstreamServers => return None,
    };
    Some((builtin_name(what)?, text))
}

/// The text of a growth's `template`: a built-in generator's, or the file's.
pub fn source(template: &str) -> std::io::Result<Cow<'static, str>> {
    if let Some(what) = template.strip_prefix(BUILTIN) {
        let w = [
            GrowWhat::Routes,
            GrowWhat::GrpcRoutes,
            GrowWhat::Matches,
            GrowWhat::Listeners,
            GrowWhat::HttpsListeners,
        ]
        .into_iter()
        .find(|w| w.name() == what);
        return match w.and_then(builtin) {
            Some((_, text)) => Ok(Cow::Borrowed(text)),
            None => Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("no built-in generator '{what}'"),
            )),
        };
    }
    std::fs::read_to_string(template).map(Cow::Owned)
}

/// Why a generator's parameters could not be made.
#[derive(Debug, thiserror::Error)]
pub enum GeneratorError {
    /// The `hostname` template did not render for an item.
    #[error("hostname {0}")]
    Hostname(TemplateError),
    /// A rendered hostname is not one a Gateway API listener or route takes.
    #[error("hostname '{host}' of item {item} is not a DNS name (a leading '*.' allowed)")]
    BadHostname {
        /// The rendered hostname.
        host: String,
        /// The item.
        item: u32,
    },
    /// The HTTPS listeners' certificate could not be made.
    #[error("certificate: {0}")]
    Certificate(String),
}

/// Where a built-in generator's routes send requests: a Service's name and port (the run's
/// backend group's Service, as the platform names it, or the growth's `backend_ref`).
#[derive(Debug, Clone, Copy)]
pub struct BackendRef<'a> {
    /// The Service.
    pub service: &'a str,
    /// Its port.
    pub port: u16,
}

/// The hostname template of a growth: its `hostname`, else the generator's default.
pub fn hostname_template(g: &GrowSpec) -> String {
    g.hostname.clone().unwrap_or_else(|| {
        match g.what {
            GrowWhat::Listeners | GrowWhat::HttpsListeners => "listener-{{ i }}.example.com",
            GrowWhat::Matches => "matches.example.com",
            _ => "{{ i }}.example.com",
        }
        .to_string()
    })
}

/// Makes a certificate (PEM) and its key for a list of hostnames: the platform's is real
/// (`proxy::tls::self_signed_pem`); a check gives [`stand_in_certificate`], so that the
/// scenario language needs no cryptography (its readers, such as the analysis, stay free of
/// anything that touches the machine).
pub type MakeCertificate<'a> = &'a dyn Fn(&[String]) -> Result<(String, String), CertificateError>;

/// Why a certificate maker could not make one (its own words).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CertificateError(pub String);

/// A certificate and key that only look like PEM: what a checked (not run) growth renders.
pub fn stand_in_certificate(_hosts: &[String]) -> Result<(String, String), CertificateError> {
    Ok((
        "-----BEGIN CERTIFICATE-----\nstand-in\n-----END CERTIFICATE-----\n".into(),
        "-----BEGIN PRIVATE KEY-----\nstand-in\n-----END PRIVATE KEY-----\n".into(),
    ))
}

/// The parameters of a built-in growth `g` in `namespace` for run `run`: the grow table's keys,
/// every item's rendered hostname (`hostnames`), and, for HTTPS listeners without a named
/// `secret`, a certificate from `certificate` for all of them (`tls_crt`, `tls_key`, made once
/// per call: every item of a growth carries the same one).
pub fn params(
    g: &GrowSpec,
    namespace: &str,
    run: &str,
    backend: BackendRef<'_>,
    certificate: MakeCertificate<'_>,
) -> Result<Params, GeneratorError> {
    let (gw_ns, gw) = match g.gateway.as_deref().unwrap_or_default().split_once('/') {
        Some((ns, name)) => (ns.to_string(), name.to_string()),
        None => (String::new(), g.gateway.clone().unwrap_or_default()),
    };
    let host = hostname_template(g);
    let mut hostnames = Vec::new();
    for i in 0..g.to {
        let vars = ItemVars {
            i,
            namespace,
            run,
            params: None,
            backends: None,
        };
        let h =
            render_item(Path::new("hostname"), &host, vars).map_err(GeneratorError::Hostname)?;
        if !is_hostname(&h) {
            return Err(GeneratorError::BadHostname { host: h, item: i });
        }
        hostnames.push(h);
    }
    let https = g.what == GrowWhat::HttpsListeners;
    let (secret, crt, key) = match (&g.secret, https) {
        (Some(s), _) => (s.clone(), String::new(), String::new()),
        (None, true) => {
            let mut hosts = hostnames.clone();
            hosts.sort();
            hosts.dedup();
            let (crt, key) = certificate(&hosts).map_err(|e| GeneratorError::Certificate(e.0))?;
            (format!("{gw}-grow-tls"), crt, key)
        }
        (None, false) => (String::new(), String::new(), String::new()),
    };
    let port = g.port.unwrap_or(if https { 443 } else { 80 });
    let s = |v: &str| serde_json::Value::String(v.to_string());
    let mut p: Params = BTreeMap::new();
    p.insert("gateway".into(), s(&gw));
    p.insert("gateway_namespace".into(), s(&gw_ns));
    p.insert(
        "gateway_class".into(),
        s(g.gateway_class.as_deref().unwrap_or_default()),
    );
    p.insert(
        "listener".into(),
        s(g.listener.as_deref().unwrap_or_default()),
    );
    p.insert("hostnames".into(), serde_json::json!(hostnames));
    p.insert("backend_name".into(), s(backend.service));
    p.insert("backend_port".into(), backend.port.into());
    p.insert("path".into(), s(&g.path));
    p.insert("port".into(), port.into());
    p.insert("https".into(), https.into());
    p.insert("secret".into(), s(&secret));
    p.insert("tls_crt".into(), s(&crt));
    p.insert("tls_key".into(), s(&key));
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::template::check_item;

    fn grow(toml_text: &str) -> GrowSpec {
        toml::from_str(toml_text).unwrap()
    }

    fn items(g: &GrowSpec) -> Vec<Vec<serde_json::Value>> {
        let (name, text) = builtin(g.what).unwrap();
        let p = params(
            g,
            "ns",
            "run1",
            BackendRef {
                service: "backend-cafe",
                port: 8080,
            },
            &stand_in_certificate,
        )
        .unwrap();
        (0..g.to)
            .map(|i| {
                let vars = ItemVars {
                    i,
                    namespace: "ns",
                    run: "run1",
                    params: Some(&p),
                    backends: None,
                };
                let out = check_item(Path::new(&name), text, vars).unwrap();
                out.split("\n---\n")
                    .map(|d| serde_saphyr::from_str::<serde_json::Value>(d).unwrap())
                    .collect()
            })
            .collect()
    }

    /// The fields the Gateway API's standard channel requires of an HTTPRoute (and that the
    /// generator sets): a parent Gateway, hostnames, one rule with a backend.
    fn is_route(r: &serde_json::Value, gateway: &str, host: &str) {
        assert_eq!(r["apiVersion"], "gateway.networking.k8s.io/v1", "{r}");
        assert_eq!(r["kind"], "HTTPRoute", "{r}");
        assert!(r["metadata"]["name"].is_string(), "{r}");
        assert_eq!(
            r["metadata"]["labels"]["app.kubernetes.io/managed-by"], "proxybench",
            "{r}"
        );
        let parent = &r["spec"]["parentRefs"][0];
        assert_eq!(parent["name"], gateway, "{r}");
        assert_eq!(
            (&parent["group"], &parent["kind"]),
            (
                &serde_json::json!("gateway.networking.k8s.io"),
                &serde_json::json!("Gateway")
            ),
            "{r}"
        );
        assert_eq!(r["spec"]["hostnames"], serde_json::json!([host]), "{r}");
        let backend = &r["spec"]["rules"][0]["backendRefs"][0];
        assert_eq!(
            (&backend["name"], &backend["port"]),
            (&serde_json::json!("backend-cafe"), &serde_json::json!(8080)),
            "{r}"
        );
        for m in r["spec"]["rules"][0]["matches"].as_array().unwrap() {
            let t = m["path"]["type"].as_str().unwrap();
            assert!(["Exact", "PathPrefix"].contains(&t), "{r}");
            assert!(m["path"]["value"].as_str().unwrap().starts_with('/'), "{r}");
        }
    }

    #[test]
    fn the_routes_generator_makes_one_httproute_per_item() {
        let g = grow(
            r#"what = "routes"
to = 3
gateway = "infra/gw"
listener = "http"
backend = "cafe""#,
        );
        let all = items(&g);
        let names: Vec<&str> = all
            .iter()
            .map(|docs| {
                assert_eq!(docs.len(), 1, "{docs:?}");
                docs[0]["metadata"]["name"].as_str().unwrap()
            })
            .collect();
        assert_eq!(names, ["run1-0", "run1-1", "run1-2"]);
        for (i, docs) in all.iter().enumerate() {
            let r = &docs[0];
            is_route(r, "gw", &format!("{i}.example.com"));
            let parent = &r["spec"]["parentRefs"][0];
            assert_eq!(
                (&parent["namespace"], &parent["sectionName"]),
                (&serde_json::json!("infra"), &serde_json::json!("http")),
                "{r}"
            );
        }
        // Without a namespace or a listener, the parent names neither.
        let g = grow("what = \"routes\"\nto = 1\ngateway = \"gw\"\nbackend = \"cafe\"\nhostname = \"r{{ i }}.example\"");
        let r = &items(&g)[0][0];
        is_route(r, "gw", "r0.example");
        let parent = r["spec"]["parentRefs"][0].as_object().unwrap();
        assert!(
            !parent.contains_key("namespace") && !parent.contains_key("sectionName"),
            "{r}"
        );
    }

    #[test]
    fn the_grpc_routes_generator_makes_one_grpcroute_per_item_for_every_method() {
        let g = grow(
            "what = \"grpc_routes\"\nto = 2\ngateway = \"infra/gw\"\nbackend = \"cafe\"\n\
             hostname = \"g{{ i }}.example\"",
        );
        for (i, docs) in items(&g).iter().enumerate() {
            assert_eq!(docs.len(), 1, "{docs:?}");
            let r = &docs[0];
            assert_eq!(r["apiVersion"], "gateway.networking.k8s.io/v1", "{r}");
            assert_eq!(r["kind"], "GRPCRoute", "{r}");
            assert_eq!(r["metadata"]["name"], format!("run1-{i}"), "{r}");
            assert_eq!(
                r["metadata"]["labels"]["app.kubernetes.io/managed-by"], "proxybench",
                "{r}"
            );
            let parent = &r["spec"]["parentRefs"][0];
            assert_eq!(
                (&parent["name"], &parent["namespace"], &parent["kind"]),
                (
                    &serde_json::json!("gw"),
                    &serde_json::json!("infra"),
                    &serde_json::json!("Gateway")
                ),
                "{r}"
            );
            assert_eq!(
                r["spec"]["hostnames"],
                serde_json::json!([format!("g{i}.example")]),
                "{r}"
            );
            // One rule without matches: every service and method of the backend.
            let rule = &r["spec"]["rules"][0];
            assert!(rule.get("matches").is_none(), "{r}");
            assert_eq!(
                rule["backendRefs"][0],
                serde_json::json!({"name": "backend-cafe", "port": 8080}),
                "{r}"
            );
        }
    }

    #[test]
    fn the_matches_generator_grows_one_rule_of_one_route() {
        let g =
            grow("what = \"matches\"\nto = 4\ngateway = \"gw\"\nbackend = \"cafe\"\npath = \"/m\"");
        for (i, docs) in items(&g).iter().enumerate() {
            let r = &docs[0];
            is_route(r, "gw", "matches.example.com");
            assert_eq!(r["metadata"]["name"], "run1-matches");
            let paths: Vec<&str> = r["spec"]["rules"][0]["matches"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["path"]["value"].as_str().unwrap())
                .collect();
            let want: Vec<String> = (0..=i).map(|n| format!("/m{n}")).collect();
            assert_eq!(paths, want);
        }
    }

    #[test]
    fn the_listeners_generators_grow_a_gateway_and_route_each_listener() {
        for (what, https) in [("listeners", false), ("https_listeners", true)] {
            let g = grow(&format!(
                "what = \"{what}\"\nto = 3\ngateway = \"grown\"\ngateway_class = \"nginx\"\n\
                 backend_ref = \"backend-cafe:8080\""
            ));
            for (i, docs) in items(&g).iter().enumerate() {
                let (secret, rest) = if https {
                    (Some(&docs[0]), &docs[1..])
                } else {
                    (None, &docs[..])
                };
                assert_eq!(rest.len(), 2, "{docs:?}");
                let gw = &rest[0];
                assert_eq!(gw["kind"], "Gateway");
                assert_eq!(gw["apiVersion"], "gateway.networking.k8s.io/v1");
                assert_eq!(gw["metadata"]["name"], "grown");
                assert_eq!(gw["spec"]["gatewayClassName"], "nginx");
                let ls = gw["spec"]["listeners"].as_array().unwrap();
                assert_eq!(ls.len(), i + 1, "{gw}");
                for (n, l) in ls.iter().enumerate() {
                    assert_eq!(l["name"], format!("listener-{n}"));
                    assert_eq!(l["hostname"], format!("listener-{n}.example.com"));
                    assert_eq!(l["port"], if https { 443 } else { 80 });
                    assert_eq!(l["protocol"], if https { "HTTPS" } else { "HTTP" });
                    if https {
                        assert_eq!(l["tls"]["mode"], "Terminate");
                        assert_eq!(l["tls"]["certificateRefs"][0]["kind"], "Secret");
                        assert_eq!(l["tls"]["certificateRefs"][0]["name"], "grown-grow-tls");
                    }
                }
                let r = &rest[1];
                is_route(r, "grown", &format!("listener-{i}.example.com"));
                assert_eq!(
                    r["spec"]["parentRefs"][0]["sectionName"],
                    format!("listener-{i}")
                );
                if let Some(s) = secret {
                    assert_eq!(s["kind"], "Secret");
                    assert_eq!(s["type"], "kubernetes.io/tls");
                    assert_eq!(s["metadata"]["name"], "grown-grow-tls");
                    let crt = s["stringData"]["tls.crt"].as_str().unwrap();
                    let key = s["stringData"]["tls.key"].as_str().unwrap();
                    assert!(
                        crt.starts_with("-----BEGIN CERTIFICATE-----\n")
                            && crt.trim_end().ends_with("-----END CERTIFICATE-----"),
                        "{crt}"
                    );
                    assert!(key.starts_with("-----BEGIN PRIVATE KEY-----\n"), "{key}");
                }
            }
        }
        // A named Secret: no Secret made, the listeners terminate with it.
        let g = grow(
            "what = \"https_listeners\"\nto = 1\ngateway = \"g\"\ngateway_class = \"c\"\n\
             backend_ref = \"s:80\"\nsecret = \"cafe-secret\"",
        );
        let docs = &items(&g)[0];
        assert_eq!(docs.len(), 2, "{docs:?}");
        assert_eq!(
            docs[0]["spec"]["listeners"][0]["tls"]["certificateRefs"][0]["name"],
            "cafe-secret"
        );
    }

    #[test]
    fn a_hostname_that_is_not_a_dns_name_is_refused() {
        let g = grow("what = \"routes\"\nto = 2\ngateway = \"g\"\nbackend = \"cafe\"\nhostname = \"A_{{ i }}\"");
        let e = params(
            &g,
            "ns",
            "r",
            BackendRef {
                service: "s",
                port: 1,
            },
            &stand_in_certificate,
        )
        .unwrap_err();
        assert!(e.to_string().contains("'A_0' of item 0"), "{e}");
    }
}
