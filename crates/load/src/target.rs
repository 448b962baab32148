//! The target of a load: the URL taken apart, the address to connect to, and the request
//! serialized once so that every send is a plain copy of the same bytes.

use crate::config::{resolve_addr, Config, Error};
use std::net::SocketAddr;
use std::sync::Arc;

/// An `http://` or `https://` URL taken apart (it lives in the system-free model crate, so the
/// scenario language and the analyses read URLs without the engine).
pub use model::url::Url;

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
        let server_name = url.tls.then(|| match (&cfg.sni, &cfg.host, host_is_ip) {
            (Some(n), _, _) => n.clone(),
            (None, Some(h), true) => h.split(':').next().unwrap_or(h).to_string(),
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
        // --sni names the server alone; Host stays the url's.
        let mut c = Config::new("https://gw.example.com/").unwrap();
        c.resolve
            .push(Resolve::parse("gw.example.com:443:127.0.0.1").unwrap());
        c.sni = Some("cafe.example.com".into());
        let t = Target::new(&c).unwrap();
        assert_eq!(t.server_name.as_deref(), Some("cafe.example.com"));
        assert!(t
            .request
            .starts_with(b"GET / HTTP/1.1\r\nHost: gw.example.com\r\n\r\n"));
        c.add_header_line("host: other").unwrap();
        let t = Target::new(&c).unwrap();
        assert_eq!(&t.request[..], b"GET / HTTP/1.1\r\nhost: other\r\n\r\n");
    }
}
