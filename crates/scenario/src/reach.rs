//! Where a scenario's loads may send. Most loads go only to the run's own listeners and
//! backends (or, on Kubernetes, to addresses the run discovers through the API): their url
//! names a host for the Host header and SNI, and the connection goes to the address the stack
//! gave it (`--resolve`-style). A url whose host is an IP address would connect somewhere else:
//! the parser refuses it ([`check_url_host`]). A load with `via = "url"` connects where its url
//! points, so its address must be loopback or a host the scenario names in its `reach` list
//! ([`check_url_reach`]). The runner's own check, before any load starts, is in the bench crate.
//! Both report a [`ReachError`].

use crate::error::Invalid;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// The address every listener and backend of a run binds.
pub const RUN_IP: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// A load url or config that could send traffic somewhere other than this run's processes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReachError {
    /// The load engine cannot read the url.
    #[error("{0}")]
    Url(#[from] model::url::UrlError),
    /// The url's host is an IP address other than the run's.
    #[error(
        "url host {0} is not this run's address: loads go to the run's own listeners and \
         backends (on {run}); write a name (sent as Host and SNI) or {run}",
        run = RUN_IP
    )]
    ForeignHost(IpAddr),
    /// The config would connect to another address than the one the stack chose.
    #[error("url '{url}' would connect to {to}, not to this run's {own}")]
    Elsewhere {
        /// The load's url.
        url: String,
        /// Where it would connect.
        to: SocketAddr,
        /// Where it should.
        own: SocketAddr,
    },
    /// An external target's host resolves outside loopback.
    #[error(
        "url '{url}' would connect to {to}, outside 127.0.0.0/8: loads go only to loopback \
         (set proxy.external.resolve to a 127.0.0.0/8 address)"
    )]
    NotLoopback {
        /// The load's url.
        url: String,
        /// Where it would connect.
        to: SocketAddr,
    },
    /// An external target's host name did not resolve.
    #[error("url '{0}': its host does not resolve (set proxy.external.resolve)")]
    Unresolved(String),
    /// A `via = "url"` load would connect to a host the scenario does not name.
    #[error(
        "via = \"url\" would connect to {host}, which is neither loopback nor in the \
         scenario's reach list: add `reach = [\"{host}\"]` to send load there on purpose"
    )]
    Unnamed {
        /// The host or address it would connect to.
        host: String,
    },
    /// The host would be looked up in DNS.
    #[error("url '{url}' would be resolved through DNS instead of connecting to this run's {own}")]
    Dns {
        /// The load's url.
        url: String,
        /// Where it should connect.
        own: SocketAddr,
    },
}

/// Parse-time check of a load's url: the host, as the load engine reads it, is a name or
/// 127.0.0.1, and the url has no user info, so it can only reach this run's processes.
pub fn check_url_host(url: &str) -> Result<(), ReachError> {
    let u = model::url::Url::parse(url)?;
    match u.host.parse::<IpAddr>() {
        Ok(ip) if ip != RUN_IP => Err(ReachError::ForeignHost(ip)),
        _ => Ok(()),
    }
}

/// Reads one entry of a scenario's `reach` list: a host name or an IP address, nothing else
/// (no scheme, port or path), lower-cased as hosts compare.
pub(crate) fn reach_entry(entry: &str) -> Result<String, Invalid> {
    let e = entry.trim().trim_start_matches('[').trim_end_matches(']');
    if e.parse::<IpAddr>().is_ok() {
        return Ok(e.to_string());
    }
    let name_ok = !e.is_empty()
        && e.len() <= 253
        && e.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    if !name_ok {
        return Err(Invalid::from(format!(
            "reach entry '{entry}' is not a host name or an IP address (write it without \
             scheme, port or path)"
        )));
    }
    Ok(e.to_ascii_lowercase())
}

/// Whether a `via = "url"` load may connect where it would: to `resolve` when set, else to the
/// url's host. Allowed: loopback (127.0.0.0/8, ::1, `localhost`) and the hosts in `reach`.
pub fn check_url_reach(
    url: &str,
    resolve: Option<IpAddr>,
    reach: &[String],
) -> Result<(), ReachError> {
    let u = model::url::Url::parse(url)?;
    let host = match resolve {
        Some(ip) => ip.to_string(),
        None => u.host.to_ascii_lowercase(),
    };
    let loopback = match host.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => host == "localhost",
    };
    if loopback || reach.contains(&host) {
        Ok(())
    } else {
        Err(ReachError::Unnamed { host })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_time_hosts() {
        assert_eq!(check_url_host("http://cafe.example.com/"), Ok(()));
        assert_eq!(check_url_host("https://127.0.0.1/x"), Ok(()));
        assert_eq!(
            check_url_host("http://10.1.2.3/").unwrap_err().to_string(),
            "url host 10.1.2.3 is not this run's address: loads go to the run's own listeners \
             and backends (on 127.0.0.1); write a name (sent as Host and SNI) or 127.0.0.1"
        );
        assert!(check_url_host("http://[::1]:80/").is_err());
        assert!(check_url_host("http://u@cafe.example.com/")
            .unwrap_err()
            .to_string()
            .contains("user info"));
    }

    #[test]
    fn url_loads_reach_loopback_and_the_named_hosts_only() {
        let reach = vec!["gw.example.com".to_string(), "203.0.113.7".to_string()];
        let ok = |u: &str, r: Option<&str>| {
            check_url_reach(u, r.map(|r| r.parse().unwrap()), &reach).map_err(|e| e.to_string())
        };
        assert_eq!(ok("http://127.0.0.2:8080/", None), Ok(()));
        assert_eq!(ok("http://localhost/", None), Ok(()));
        assert_eq!(ok("https://GW.example.com/tea", None), Ok(()));
        assert_eq!(ok("http://203.0.113.7/", None), Ok(()));
        // The address connected to decides: a named host sent elsewhere needs that address.
        assert_eq!(ok("http://gw.example.com/", Some("127.0.0.1")), Ok(()));
        assert_eq!(
            ok("http://gw.example.com/", Some("192.0.2.9")),
            Err(
                "via = \"url\" would connect to 192.0.2.9, which is neither loopback nor in \
                 the scenario's reach list: add `reach = [\"192.0.2.9\"]` to send load there \
                 on purpose"
                    .into()
            )
        );
        assert!(ok("http://other.example.com/", None).is_err());
        assert!(ok("http://10.0.0.1/", None).is_err());
        assert_eq!(reach_entry("GW.Example.com"), Ok("gw.example.com".into()));
        assert_eq!(reach_entry("[::1]"), Ok("::1".into()));
        for bad in [
            "http://gw.example.com",
            "gw.example.com:443",
            "gw/x",
            "",
            "-a.b",
        ] {
            assert!(reach_entry(bad).is_err(), "{bad}");
        }
    }

    fn parse(url: &str) -> Result<crate::Scenario, crate::layers::ScenarioError> {
        let src = crate::layers::Source {
            file: "reach.toml".into(),
            text: testkit::one_load_scenario(url),
        };
        crate::Scenario::parse(&src, false)
    }

    #[test]
    fn a_loads_tls_and_resolve_keys_are_checked_at_its_line() {
        let with = |url: &str, extra: &str| {
            let src = crate::layers::Source {
                file: "reach.toml".into(),
                text: format!("{}{extra}\n", testkit::one_load_scenario(url)),
            };
            crate::Scenario::parse(&src, false).map_err(|e| e.to_string())
        };
        // The run's listener is plain HTTP: its https loads go to the url's own (loopback) host.
        let url_tls = "via = \"url\"\n";
        assert!(with(
            "https://localhost/",
            &format!("{url_tls}sni = \"cafe.example.com\"")
        )
        .is_ok());
        assert!(with("https://localhost/", &format!("{url_tls}insecure = true")).is_ok());
        let refused = [
            (
                "http://gw.example.com/",
                "resolve = \"127.0.0.1\"",
                "resolve = \"127.0.0.1\" needs via = \"url\"",
            ),
            (
                "http://gw.example.com/",
                "sni = \"cafe.example.com\"",
                "sni = \"cafe.example.com\" needs an https url",
            ),
            (
                "https://localhost/",
                "via = \"url\"\nsni = \"10.0.0.1\"",
                "needs an https url and a host name",
            ),
            (
                "http://gw.example.com/",
                "insecure = true",
                "cacert and insecure are for https urls",
            ),
            (
                "https://localhost/",
                "via = \"url\"\ncacert = \"no-such-ca.pem\"",
                "cacert no-such-ca.pem is not a readable file",
            ),
        ];
        for (url, extra, want) in refused {
            let e = with(url, extra).unwrap_err();
            assert!(e.starts_with("reach.toml:16: load 'l': "), "{extra}: {e}");
            assert!(e.contains(want), "{extra}: {e}");
        }
    }

    #[test]
    fn a_scenario_cannot_aim_a_load_at_another_address() {
        assert!(parse("http://cafe.example.com/").is_ok());
        assert_eq!(
            parse("http://192.0.2.1:8080/").unwrap_err().to_string(),
            "reach.toml:16: load 'l': url host 192.0.2.1 is not this run's address: loads go to \
             the run's own listeners and backends (on 127.0.0.1); write a name (sent as Host and \
             SNI) or 127.0.0.1"
        );
    }
}
