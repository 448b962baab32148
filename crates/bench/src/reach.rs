//! Where a scenario's loads may send: only to the run's own listeners and backends. A load's
//! url names a host for the Host header and SNI; the connection itself always goes to the
//! address the stack gave it (`--resolve`-style). The runner reads the url with the engine's
//! own parser ([`load::target::Url`]), so both see one host. A url whose host is an IP address
//! would connect somewhere else: the parser refuses it ([`scenario::reach::check_url_host`]), and
//! the runner refuses any config that would connect elsewhere before any load starts
//! ([`own_target`]).

use scenario::ReachError;
use std::net::{IpAddr, SocketAddr};

/// The address every listener and backend of a run binds (the scenario parser checks load urls
/// against it, so it is defined there).
pub use scenario::reach::RUN_IP;

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

/// Where a `via = "url"` load connects: the url's port and its host's address (`resolve` when
/// set, the host itself when it is an IP, else the system resolver's first answer). The parser
/// has already held that host, or `resolve`, to loopback and the scenario's reach list.
pub fn url_target(url: &str, resolve: Option<IpAddr>) -> Result<(u16, IpAddr), ReachError> {
    use std::net::ToSocketAddrs;
    let u = load::target::Url::parse(url)?;
    let ip = match (resolve, u.host.parse::<IpAddr>()) {
        (Some(ip), _) | (None, Ok(ip)) => ip,
        (None, Err(_)) => (u.host.as_str(), u.port)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .map(|a| a.ip())
            .ok_or_else(|| ReachError::Unresolved(url.to_string()))?,
    };
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

    fn parse(url: &str) -> Result<scenario::Scenario, scenario::layers::ScenarioError> {
        let src = scenario::layers::Source {
            file: "reach.toml".into(),
            text: testkit::one_load_scenario(url),
        };
        scenario::Scenario::parse(&src, false)
    }

    #[test]
    fn the_runner_reads_a_url_as_the_engine_does() {
        // The engine reads `http://cafe.example.com?x` as host cafe.example.com, path `/?x`.
        // The runner once split it by hand into host `cafe.example.com?x` and had to stop the
        // case before DNS was asked; it now reads it with the engine's own parser
        // (`load::target::Url`), so the load goes to this run's listener under that name. (A
        // config that would still connect elsewhere is refused by `own_target`, tested above.)
        let scn = parse("http://cafe.example.com?x").unwrap();
        let root = tempfile::tempdir().unwrap();
        let opts = crate::runner::RunOptions {
            results_root: root.path().to_path_buf(),
            stop: Default::default(),
            progress: false,
            metrics: None,
        };
        let out = crate::runner::run(&scn, &opts).unwrap();
        assert!(!out.results.partial, "{:?}", out.results.abort_reason);
        let l = &out.results.cases[0].loads[0];
        // The scenario's `requests = 5`, each answered by the backend through the proxy.
        assert_eq!(l.requests, 5);
        assert_eq!(l.status.get(&200), Some(&5), "{:?}", l.status);
    }
}
