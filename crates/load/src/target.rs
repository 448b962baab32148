//! The target of a load: the URL taken apart, the address to connect to, and the request
//! serialized once so that every send is a plain copy of the same bytes.

use crate::config::{resolve_addr, Config, Error};
use std::net::SocketAddr;
use std::sync::Arc;

/// An `http://` or `https://` URL taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    /// True for `https`.
    pub tls: bool,
    /// Host as written, without IPv6 brackets.
    pub host: String,
    /// Port (80 or 443 when absent).
    pub port: u16,
    /// Whether the port was written in the URL.
    pub explicit_port: bool,
    /// Path and query (`/` when absent); the fragment is dropped.
    pub path: String,
}

impl Url {
    /// Parses `http[s]://host[:port][/path][?query][#fragment]`.
    pub fn parse(s: &str) -> Result<Url, Error> {
        let bad = |why: &str| Error::Url(s.to_string(), why.to_string());
        let (scheme, rest) = s
            .split_once("://")
            .ok_or_else(|| bad("expected http://host[:port]/path or https://..."))?;
        let tls = match scheme.to_ascii_lowercase().as_str() {
            "http" => false,
            "https" => true,
            _ => return Err(bad("the scheme must be http or https")),
        };
        let rest = rest.split('#').next().unwrap_or_default();
        let split = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(split);
        if authority.contains('@') {
            return Err(bad(
                "user info in URLs is not supported; use -H Authorization",
            ));
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6
                .split_once(']')
                .ok_or_else(|| bad("unclosed '[' in host"))?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or_else(|| bad("junk after ']'"))?),
            };
            (h, port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return Err(bad("missing host"));
        }
        if host.bytes().any(|b| b <= b' ' || b == b'/' || b == 0x7f) {
            return Err(bad("bad character in host"));
        }
        let explicit_port = port.is_some();
        let port = match port {
            None => {
                if tls {
                    443
                } else {
                    80
                }
            }
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| bad("the port must be 1-65535"))?,
        };
        let path = if path.is_empty() {
            "/".to_string()
        } else if path.starts_with('?') {
            format!("/{path}")
        } else {
            path.to_string()
        };
        if path.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err(bad(
                "spaces or control characters in the path (percent-encode them)",
            ));
        }
        Ok(Url {
            tls,
            host: host.to_string(),
            port,
            explicit_port,
            path,
        })
    }

    /// The host as it goes in a Host header: IPv6 in brackets, the port when not the default.
    pub fn authority(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let default = if self.tls { 443 } else { 80 };
        if self.port != default {
            format!("{host}:{}", self.port)
        } else {
            host
        }
    }
}

/// Everything a connection needs to reach the target and send the request.
#[derive(Debug, Clone)]
pub struct Target {
    /// The parsed URL.
    pub url: Url,
    /// Address connections go to.
    pub addr: SocketAddr,
    /// TLS server name (SNI and certificate check), for https.
    pub server_name: Option<String>,
    /// The request, serialized once.
    pub request: Arc<[u8]>,
    /// The method is HEAD: responses have no body.
    pub head: bool,
    /// HTTP/2: the request's header fields with their HPACK blocks (a connection's first
    /// request indexes them, every later one names them by index).
    pub h2_request: Option<Arc<http2::hpack::RequestHeaders>>,
    /// HTTP/2: the request body, sent in DATA frames.
    pub h2_body: Option<Arc<[u8]>>,
}

impl Target {
    /// Parses and resolves the config's URL and serializes its request.
    pub fn new(cfg: &Config) -> Result<Target, Error> {
        let url = Url::parse(&cfg.url)?;
        let addr = resolve_addr(&url, &cfg.resolve)?;
        let host_is_ip = url.host.parse::<std::net::IpAddr>().is_ok();
        let server_name = url.tls.then(|| match (&cfg.host, host_is_ip) {
            (Some(h), true) => h.split(':').next().unwrap_or(h).to_string(),
            _ => url.host.clone(),
        });
        let request = serialize_request(cfg, &url);
        let h2_request = cfg.http2.then(|| Arc::new(h2_request(cfg, &url)));
        let h2_body = cfg
            .body
            .as_ref()
            .filter(|_| cfg.http2)
            .map(|b| Arc::from(b.as_slice()));
        Ok(Target {
            h2_request,
            h2_body,
            head: cfg.method == "HEAD",
            url,
            addr,
            server_name,
            request: request.into(),
        })
    }
}

/// `METHOD path HTTP/1.1`, Host (the override, a `-H Host:`, or the URL's), the headers, a
/// Content-Length when there is a body, then the body.
pub fn serialize_request(cfg: &Config, url: &Url) -> Vec<u8> {
    let has = |name: &str| {
        cfg.headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(name))
    };
    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(format!("{} {} HTTP/1.1\r\n", cfg.method, url.path).as_bytes());
    if !has("host") {
        let host = cfg.host.clone().unwrap_or_else(|| url.authority());
        out.extend_from_slice(format!("Host: {host}\r\n").as_bytes());
    }
    for (n, v) in &cfg.headers {
        out.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
    }
    if let Some(body) = &cfg.body {
        if !has("content-length") {
            out.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
        }
    }
    out.extend_from_slice(b"\r\n");
    if let Some(body) = &cfg.body {
        out.extend_from_slice(body);
    }
    out
}

/// The HTTP/2 request's fields: `:authority` is the Host override, a `-H Host:`, or the URL's;
/// a Content-Length goes with a body.
pub fn h2_request(cfg: &Config, url: &Url) -> http2::hpack::RequestHeaders {
    let authority = cfg
        .headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("host"))
        .map(|(_, v)| v.clone())
        .or_else(|| cfg.host.clone())
        .unwrap_or_else(|| url.authority());
    let mut headers = cfg.headers.clone();
    if let Some(body) = &cfg.body {
        if !headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        {
            headers.push(("content-length".to_string(), body.len().to_string()));
        }
    }
    let scheme = if url.tls { "https" } else { "http" };
    http2::hpack::RequestHeaders::new(&cfg.method, scheme, &authority, &url.path, &headers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Resolve;

    #[test]
    fn urls() {
        let u = Url::parse("https://cafe.example.com:8443/tea?x=1#frag").unwrap();
        assert!(u.tls);
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("cafe.example.com", 8443, "/tea?x=1")
        );
        assert_eq!(u.authority(), "cafe.example.com:8443");
        let u = Url::parse("http://127.0.0.1").unwrap();
        assert_eq!(
            (u.port, u.path.as_str(), u.authority().as_str()),
            (80, "/", "127.0.0.1")
        );
        let u = Url::parse("http://[::1]:8080?q").unwrap();
        assert_eq!((u.host.as_str(), u.path.as_str()), ("::1", "/?q"));
        assert_eq!(u.authority(), "[::1]:8080");
        for bad in [
            "127.0.0.1:80/",
            "ftp://x/",
            "http://",
            "http://:80/",
            "http://h:0/",
            "http://h:99999/",
            "http://u@h/",
            "http://h/a b",
            "http://[::1/",
        ] {
            assert!(Url::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn request_bytes() {
        let mut c = Config::new("https://cafe.example.com:8443/tea").unwrap();
        c.resolve
            .push(Resolve::parse("cafe.example.com:8443:127.0.0.1").unwrap());
        c.method = "POST".into();
        c.body = Some(b"hi".to_vec());
        c.add_header_line("X-A: 1").unwrap();
        let t = Target::new(&c).unwrap();
        assert_eq!(t.addr, "127.0.0.1:8443".parse().unwrap());
        assert_eq!(t.server_name.as_deref(), Some("cafe.example.com"));
        assert_eq!(
            &t.request[..],
            b"POST /tea HTTP/1.1\r\nHost: cafe.example.com:8443\r\nX-A: 1\r\nContent-Length: 2\r\n\r\nhi"
        );
        let mut c = Config::new("https://127.0.0.1:8443/").unwrap();
        c.host = Some("cafe.example.com".into());
        let t = Target::new(&c).unwrap();
        assert_eq!(t.server_name.as_deref(), Some("cafe.example.com"));
        assert!(t
            .request
            .starts_with(b"GET / HTTP/1.1\r\nHost: cafe.example.com\r\n\r\n"));
        c.add_header_line("host: other").unwrap();
        let t = Target::new(&c).unwrap();
        assert_eq!(&t.request[..], b"GET / HTTP/1.1\r\nhost: other\r\n\r\n");
    }
}
