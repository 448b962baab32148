//! Where a scenario's loads may send: only to the run's own listeners and backends. A load's
//! url names a host for the Host header and SNI; the connection itself always goes to the
//! address the stack gave it (`--resolve`-style). A url whose host is an IP address would
//! connect somewhere else: the parser refuses it ([`check_url_host`]); the runner's own check,
//! before any load starts, is in the bench crate. Both report a [`ReachError`].

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

    fn parse(url: &str) -> Result<crate::Scenario, crate::layers::ScenarioError> {
        let src = crate::layers::Source {
            file: "reach.toml".into(),
            text: testkit::one_load_scenario(url),
        };
        crate::Scenario::parse(&src, false)
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
