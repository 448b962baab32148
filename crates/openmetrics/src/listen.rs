//! The `--metrics-listen` address: a port alone or `HOST:PORT` with an IP address (or
//! `localhost`), loopback unless the caller allows remote scrapers, bound before the run starts
//! so a port in use stops the command at once.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};

/// Why a metrics address cannot be used. Each is bad input (one line, exit 2 in the CLI).
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// The text is not a port, nor an IP address with a port.
    #[error("--metrics-listen {addr}: {why}")]
    Bad {
        /// The address as given.
        addr: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// Not a loopback address, and remote scrapers were not allowed.
    #[error(
        "--metrics-listen {addr}: {ip} is not a loopback address; the metrics would be open to \
         other machines: add --metrics-allow-remote to allow that"
    )]
    Remote {
        /// The address as given.
        addr: String,
        /// The IP it names.
        ip: IpAddr,
    },
    /// The port is taken (or the address is not this machine's).
    #[error("--metrics-listen {addr}: cannot listen: {source}")]
    Bind {
        /// The address as given.
        addr: String,
        /// The system's answer.
        source: std::io::Error,
    },
}

/// Parses `ADDR`: `PORT` (on 127.0.0.1), `IP:PORT`, `[IPv6]:PORT`, `localhost:PORT`, or `:PORT`
/// (every interface, as Go servers read it). A non-loopback address needs `allow_remote`.
pub fn parse_listen(addr: &str, allow_remote: bool) -> Result<SocketAddr, ListenError> {
    let bad = |why| ListenError::Bad {
        addr: addr.to_string(),
        why,
    };
    let port = |p: &str| -> Result<u16, ListenError> {
        p.parse::<u16>()
            .map_err(|_| bad("the port must be a number from 0 to 65535"))
    };
    let sa = if addr.bytes().all(|b| b.is_ascii_digit()) && !addr.is_empty() {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port(addr)?)
    } else if let Ok(sa) = addr.parse::<SocketAddr>() {
        sa
    } else {
        let (host, p) = addr
            .rsplit_once(':')
            .ok_or_else(|| bad("expected PORT or HOST:PORT, e.g. 127.0.0.1:9464"))?;
        let ip = match host {
            "" => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            "localhost" => IpAddr::V4(Ipv4Addr::LOCALHOST),
            _ => {
                return Err(bad(
                    "the host must be an IP address or localhost, e.g. 127.0.0.1:9464",
                ))
            }
        };
        SocketAddr::new(ip, port(p)?)
    };
    if !allow_remote && !is_loopback(sa.ip()) {
        return Err(ListenError::Remote {
            addr: addr.to_string(),
            ip: sa.ip(),
        });
    }
    Ok(sa)
}

/// 127.0.0.0/8, ::1, and IPv4-mapped loopback.
fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// [`parse_listen`], then binds: the listener the server will take, made before anything else
/// starts so that a port in use is refused up front.
pub fn bind(addr: &str, allow_remote: bool) -> Result<TcpListener, ListenError> {
    let sa = parse_listen(addr, allow_remote)?;
    TcpListener::bind(sa).map_err(|source| ListenError::Bind {
        addr: addr.to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_and_remote_ones_need_consent() {
        let ok = |a: &str, remote| parse_listen(a, remote).unwrap().to_string();
        assert_eq!(ok("9464", false), "127.0.0.1:9464");
        assert_eq!(ok("127.0.0.2:9464", false), "127.0.0.2:9464");
        assert_eq!(ok("[::1]:0", false), "[::1]:0");
        assert_eq!(ok("localhost:9464", false), "127.0.0.1:9464");
        assert_eq!(ok("0.0.0.0:9464", true), "0.0.0.0:9464");
        assert_eq!(ok(":9464", true), "0.0.0.0:9464");
        for remote in ["0.0.0.0:9464", ":9464", "192.0.2.1:80", "[::]:9464"] {
            let e = parse_listen(remote, false).unwrap_err();
            assert!(matches!(e, ListenError::Remote { .. }), "{remote}: {e}");
            assert!(e.to_string().contains("--metrics-allow-remote"), "{e}");
        }
        for bad in [
            "",
            "host.example:80",
            "127.0.0.1",
            "127.0.0.1:99999",
            "x:y",
            "70000",
        ] {
            let e = parse_listen(bad, true).unwrap_err();
            assert!(matches!(e, ListenError::Bad { .. }), "{bad}: {e}");
        }
    }

    #[test]
    fn a_port_in_use_is_refused_at_bind() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap().to_string();
        let e = bind(&addr, false).unwrap_err();
        assert!(matches!(e, ListenError::Bind { .. }), "{e}");
        assert!(e.to_string().contains("cannot listen"), "{e}");
        assert!(!e.to_string().contains('\n'));
    }
}
