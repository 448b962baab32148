//! A target URL taken apart: what a load aims at, read the same way by the engine, the scenario
//! language and the analyses.

/// A URL that cannot be used, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad URL '{url}': {why}")]
pub struct UrlError {
    /// The URL as written.
    pub url: String,
    /// What is wrong with it.
    pub why: String,
}

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
    pub fn parse(s: &str) -> Result<Url, UrlError> {
        let bad = |why: &str| UrlError {
            url: s.to_string(),
            why: why.to_string(),
        };
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
