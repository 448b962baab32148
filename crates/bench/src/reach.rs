//! Where a scenario's loads may send: only to the run's own listeners and backends. A load's
//! url names a host for the Host header and SNI; the connection itself always goes to the
//! address the stack gave it (`--resolve`-style). A url whose host is an IP address, or that
//! the load engine would parse to another host than the runner did, would connect somewhere
//! else: the parser refuses the first ([`check_url_host`]), the runner refuses both before any
//! load starts ([`own_target`]).

use crate::error::ReachError;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// The address every listener and backend of a run binds.
pub const RUN_IP: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// Parse-time check of a load's url: the host, as the load engine reads it, is a name or
/// 127.0.0.1, and the url has no user info, so it can only reach this run's processes.
pub fn check_url_host(url: &str) -> Result<(), ReachError> {
    let u = load::target::Url::parse(url)?;
    match u.host.parse::<IpAddr>() {
        Ok(ip) if ip != RUN_IP => Err(ReachError::ForeignHost(ip)),
        _ => Ok(()),
    }
}

/// Where a load configured by `cfg` will connect, read the way the load engine reads it, if it
/// can be known without DNS (an IP host or a matching resolve entry); `None` if DNS would decide.
pub fn connect_addr(cfg: &load::Config) -> Result<Option<SocketAddr>, ReachError> {
    let u = load::target::Url::parse(&cfg.url)?;
    if let Ok(ip) = u.host.parse::<IpAddr>() {
        return Ok(Some(SocketAddr::new(ip, u.port)));
    }
    let host = u.host.to_ascii_lowercase();
    Ok(cfg
        .resolve
        .iter()
        .find(|r| r.host == host && r.port == u.port)
        .map(|r| SocketAddr::new(r.addr, u.port)))
}

/// Refuses a load config that would connect anywhere but `own` (the listener or backend the
/// stack chose for it), including through DNS.
pub fn own_target(cfg: &load::Config, own: SocketAddr) -> Result<(), ReachError> {
    let url = cfg.url.clone();
    match connect_addr(cfg)? {
        Some(a) if a == own => Ok(()),
        Some(to) => Err(ReachError::Elsewhere { url, to, own }),
        None => Err(ReachError::Dns { url, own }),
    }
}

/// Where a load aimed at an external target connects: the url's port (80 or 443 when absent)
/// and its host's address: the host itself when it is an IP, `resolve` when set, else the
/// system's resolver's first answer. Anything outside 127.0.0.0/8 is refused.
pub fn external_target(url: &str, resolve: Option<IpAddr>) -> Result<(u16, IpAddr), ReachError> {
    use std::net::ToSocketAddrs;
    let u = load::target::Url::parse(url)?;
    let ip = match (u.host.parse::<IpAddr>(), resolve) {
        (Ok(ip), _) => ip,
        (Err(_), Some(ip)) => ip,
        (Err(_), None) => (u.host.as_str(), u.port)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .map(|a| a.ip())
            .ok_or_else(|| ReachError::Unresolved(url.to_string()))?,
    };
    if !(ip.is_ipv4() && ip.is_loopback()) {
        return Err(ReachError::NotLoopback {
            url: url.to_string(),
            to: SocketAddr::new(ip, u.port),
        });
    }
    Ok((u.port, ip))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(url: &str, resolve: &[&str]) -> load::Config {
        let mut c = load::Config::new(url).unwrap();
        c.resolve = resolve
            .iter()
            .map(|r| load::Resolve::parse(r).unwrap())
            .collect();
        c
    }

    #[test]
    fn only_the_runs_own_address_is_a_target() {
        let own: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert_eq!(
            own_target(
                &cfg(
                    "http://cafe.example.com:8080/tea",
                    &["cafe.example.com:8080:127.0.0.1"]
                ),
                own
            ),
            Ok(())
        );
        assert_eq!(own_target(&cfg("http://127.0.0.1:8080/", &[]), own), Ok(()));
        assert_eq!(
            own_target(&cfg("http://127.0.0.2:8080/", &[]), own)
                .unwrap_err()
                .to_string(),
            "url 'http://127.0.0.2:8080/' would connect to 127.0.0.2:8080, not to this run's 127.0.0.1:8080"
        );
        // The runner once split at '/' only: host "cafe.example.com?x" got the resolve entry
        // while the engine, splitting at '?', looked up cafe.example.com:80 in DNS.
        assert_eq!(
            own_target(
                &cfg(
                    "http://cafe.example.com?x:8080/",
                    &["cafe.example.com?x:8080:127.0.0.1"]
                ),
                own
            )
            .unwrap_err()
            .to_string(),
            "url 'http://cafe.example.com?x:8080/' would be resolved through DNS instead of connecting to this run's 127.0.0.1:8080"
        );
        assert!(own_target(
            &cfg(
                "http://cafe.example.com:8080/",
                &["cafe.example.com:8081:127.0.0.1"]
            ),
            own
        )
        .is_err());
    }

    #[test]
    fn an_external_target_is_reached_on_loopback_only() {
        let at = |url: &str, r: Option<&str>| {
            external_target(url, r.map(|r| r.parse().unwrap())).map_err(|e| e.to_string())
        };
        assert_eq!(
            at("http://cafe.example.com:8080/", Some("127.0.0.1")),
            Ok((8080, "127.0.0.1".parse().unwrap()))
        );
        assert_eq!(
            at("http://127.0.0.1/", None),
            Ok((80, "127.0.0.1".parse().unwrap()))
        );
        assert_eq!(
            at("http://localhost:81/", None).map(|(p, ip)| (p, ip.is_loopback())),
            Ok((81, true))
        );
        assert!(at("http://cafe.example.com/", Some("192.0.2.1"))
            .unwrap_err()
            .contains("outside 127.0.0.0/8"));
    }

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

    const ONE_LOAD: &str = r#"name = "reach"
[[backends]]
name = "b"
count = 1

[proxy]
[[proxy.listeners]]
name = "http"
[[proxy.upstreams]]
name = "b"
backends = "b"
[[proxy.routes]]
path = "/"
upstream = "b"

[[loads]]
name = "l"
url = "{url}"
requests = 5
"#;

    fn parse(url: &str) -> Result<crate::scenario::Scenario, crate::layers::ScenarioError> {
        let src = crate::layers::Source {
            file: "reach.toml".into(),
            text: ONE_LOAD.replace("{url}", url),
        };
        crate::scenario::Scenario::parse(&src, false)
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

    #[test]
    fn the_runner_refuses_a_url_the_engine_would_resolve_elsewhere() {
        // The parser lets this through (its host is a name), but the engine reads the host as
        // cafe.example.com and would have asked DNS for it: the runner stops the case first.
        let scn = parse("http://cafe.example.com?x").unwrap();
        let root = tempfile::tempdir().unwrap();
        let opts = crate::runner::RunOptions {
            results_root: root.path().to_path_buf(),
            stop: Default::default(),
            progress: false,
            metrics: None,
        };
        let out = crate::runner::run(&scn, &opts).unwrap();
        assert!(out.results.partial);
        let why = out.results.abort_reason.unwrap();
        assert!(
            why.starts_with("case 'main': load 'l': url 'http://cafe.example.com?x:")
                && why.contains(
                    "would be resolved through DNS instead of connecting to this run's 127.0.0.1:"
                ),
            "{why}"
        );
        assert!(out.results.cases.is_empty() || out.results.cases[0].loads.is_empty());
    }
}
