//! A profile compiled for one instance: samplers built once, status lines and headers
//! pre-rendered with the instance's name, path rules ready for a byte-prefix match.

use crate::dist::Sampler;
use rand::rngs::SmallRng;
use rand::RngExt;
use setup::profile::{path_matches, Behaviour, Profile};

/// Index of the 200 head in [`Compiled::heads`].
pub(crate) const H200: u16 = 0;
/// Index of the 503 head (slow start, `/readyz` when not ready).
pub(crate) const H503: u16 = 1;
/// Index of the 400 head (unparsable request).
pub(crate) const H400: u16 = 2;
/// Index of the 431 head (request head larger than the read buffer).
pub(crate) const H431: u16 = 3;

/// Latency and CPU draws are capped at an hour, sizes at 1 GiB.
const TIME_CAP: u64 = 3_600_000_000_000;
const SIZE_CAP: u64 = 1 << 30;
const BILLION: u32 = 1_000_000_000;

/// The start of a response up to (not including) `Content-Length`.
#[derive(Clone)]
pub(crate) struct Head {
    pub code: u16,
    pub prefix: Box<[u8]>,
    /// The same fields as an HTTP/2 header block (HPACK, no dynamic table).
    pub h2: Box<[u8]>,
    /// 204 and 304 carry no body and no Content-Length.
    pub bodyless: bool,
}

/// One behaviour, ready to draw from.
pub(crate) struct Rules {
    latency: Option<Sampler>,
    spikes: Vec<(u32, Sampler)>,
    cpu: Option<Sampler>,
    size: Option<Sampler>,
    status: Vec<(u32, u16)>,
}

/// A profile compiled for one instance.
pub(crate) struct Compiled {
    /// `rules[0]` is the base; then one per path rule.
    pub rules: Vec<Rules>,
    /// (prefix, index into `rules`), longest prefix first.
    paths: Vec<(Box<[u8]>, usize)>,
    /// Responses per connection before closing it (0: never).
    pub close_after: u64,
    /// Not ready for this long after a (re)start.
    pub slow_start_ns: u64,
    pub heads: Vec<Head>,
    /// The default body: the instance's name and a newline.
    pub name_body: Box<[u8]>,
    /// The instance's name (`X-Backend`).
    pub name: Box<str>,
    /// Long-lived connections: pushes per second on a WebSocket and on an event or gRPC
    /// stream, bytes per push, pushes before the end (0: no end), ping interval (0: none).
    pub push_ws: f64,
    pub push_stream: f64,
    pub push_size: u64,
    pub push_count: u64,
    pub ping_ns: u64,
    /// Some request can get a latency: reads take the kernel's arrival stamps.
    pub timed: bool,
}

impl Compiled {
    /// Compiles `p` for the instance called `name`. Heads of `prev` (the profile being replaced)
    /// keep their indices, so responses decided under it can still be written.
    pub(crate) fn new(name: &str, p: &Profile, prev: Option<&Compiled>) -> Compiled {
        let mut heads = prev.map(|c| c.heads.clone()).unwrap_or_default();
        for code in [200, 503, 400, 431] {
            head_index(&mut heads, name, code);
        }
        let mut rules = vec![Rules::new(&p.base, name, &mut heads)];
        let mut paths = Vec::new();
        for r in &p.paths {
            let merged = p.base.overridden_by(&r.behaviour);
            rules.push(Rules::new(&merged, name, &mut heads));
            paths.push((r.prefix.as_bytes().into(), rules.len() - 1));
        }
        // Longest first; a stable sort keeps the written order among equal lengths.
        paths.sort_by_key(|(pre, _): &(Box<[u8]>, usize)| std::cmp::Reverse(pre.len()));
        let timed = rules
            .iter()
            .any(|r| r.latency.is_some() || !r.spikes.is_empty());
        Compiled {
            rules,
            paths,
            close_after: p.close_after.unwrap_or(0),
            slow_start_ns: p.slow_start.map(|d| d.as_nanos() as u64).unwrap_or(0),
            heads,
            name_body: format!("{name}\n").into_bytes().into(),
            name: name.into(),
            push_ws: p.streams.push_rate(true),
            push_stream: p.streams.push_rate(false),
            push_size: p.streams.push_bytes(),
            push_count: p.streams.push_count.unwrap_or(0),
            ping_ns: p.streams.ping.map(|d| d.as_nanos() as u64).unwrap_or(0),
            timed,
        }
    }

    /// The rules index for a request path (query included or not).
    #[inline]
    pub(crate) fn route(&self, path: &[u8]) -> usize {
        if self.paths.is_empty() {
            return 0;
        }
        let end = path.iter().position(|&c| c == b'?').unwrap_or(path.len());
        let path = &path[..end];
        self.paths
            .iter()
            .find(|(pre, _)| path_matches(path, pre))
            .map(|(_, i)| *i)
            .unwrap_or(0)
    }
}

fn head_index(heads: &mut Vec<Head>, name: &str, code: u16) -> u16 {
    if let Some(i) = heads.iter().position(|h| h.code == code) {
        return i as u16;
    }
    let prefix = format!(
        "HTTP/1.1 {code} {}\r\nServer: proxybench\r\nX-Backend: {name}\r\nContent-Type: text/plain\r\n",
        reason(code)
    );
    let mut h2 = Vec::new();
    http2::hpack::status(&mut h2, code);
    http2::hpack::field(&mut h2, "server", "proxybench");
    http2::hpack::field(&mut h2, "x-backend", name);
    http2::hpack::field(&mut h2, "content-type", "text/plain");
    heads.push(Head {
        code,
        prefix: prefix.into_bytes().into(),
        h2: h2.into(),
        bodyless: code == 204 || code == 304,
    });
    (heads.len() - 1) as u16
}

impl Rules {
    fn new(b: &Behaviour, name: &str, heads: &mut Vec<Head>) -> Rules {
        let sampler =
            |d: &Option<crate::Dist>| d.filter(|d| !d.is_zero()).map(|d| Sampler::new(&d));
        let mut spikes = Vec::new();
        let mut cum = 0u32;
        for s in b.spikes.iter().flatten() {
            cum = cum.saturating_add(s.share.0).min(BILLION);
            spikes.push((cum, Sampler::new(&s.latency)));
        }
        let mut status = Vec::new();
        let mut cum = 0u32;
        for s in b.status.iter().flatten() {
            cum = cum.saturating_add(s.share.0).min(BILLION);
            status.push((cum, head_index(heads, name, s.code)));
        }
        Rules {
            latency: sampler(&b.latency),
            spikes,
            cpu: sampler(&b.cpu),
            size: b.size.map(|d| Sampler::new(&d)),
            status,
        }
    }

    /// Nanoseconds to wait before answering.
    #[inline]
    pub(crate) fn latency(&self, rng: &mut SmallRng) -> u64 {
        if !self.spikes.is_empty() {
            let x = rng.random_range(0..BILLION);
            if let Some((_, s)) = self.spikes.iter().find(|(c, _)| x < *c) {
                return s.sample(rng, TIME_CAP);
            }
        }
        match &self.latency {
            Some(s) => s.sample(rng, TIME_CAP),
            None => 0,
        }
    }

    /// Nanoseconds of CPU to burn.
    #[inline]
    pub(crate) fn cpu(&self, rng: &mut SmallRng) -> u64 {
        match &self.cpu {
            Some(s) => s.sample(rng, TIME_CAP),
            None => 0,
        }
    }

    /// Body size in bytes, or `None` for the default body.
    #[inline]
    pub(crate) fn size(&self, rng: &mut SmallRng) -> Option<u64> {
        self.size.as_ref().map(|s| s.sample(rng, SIZE_CAP))
    }

    /// The head index of this response's status.
    #[inline]
    pub(crate) fn status(&self, rng: &mut SmallRng) -> u16 {
        if self.status.is_empty() {
            return H200;
        }
        let x = rng.random_range(0..BILLION);
        self.status
            .iter()
            .find(|(c, _)| x < *c)
            .map(|(_, h)| *h)
            .unwrap_or(H200)
    }
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Content Too Large",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn routes_by_longest_prefix_and_ignores_the_query() {
        let p: Profile = "path /a { latency=1ms }; path /a/b { latency=2ms }"
            .parse()
            .unwrap();
        let c = Compiled::new("b0", &p, None);
        assert_eq!(c.route(b"/a/b/c"), 2);
        assert_eq!(c.route(b"/a/x"), 1);
        assert_eq!(c.route(b"/x?/a"), 0);
        assert_eq!(c.route(b"/a?x"), 1);
        assert_eq!(&*c.heads[H200 as usize].prefix, &b"HTTP/1.1 200 OK\r\nServer: proxybench\r\nX-Backend: b0\r\nContent-Type: text/plain\r\n"[..]);
    }

    #[test]
    fn status_shares_are_drawn_in_proportion() {
        let p: Profile = "status=503:10%,500:1%".parse().unwrap();
        let c = Compiled::new("b0", &p, None);
        let mut rng = SmallRng::seed_from_u64(1);
        let mut n = [0u32; 8];
        for _ in 0..100_000 {
            n[c.rules[0].status(&mut rng) as usize] += 1;
        }
        let i503 = H503 as usize;
        let i500 = c.heads.iter().position(|h| h.code == 500).unwrap();
        assert!((9_500..10_500).contains(&n[i503]), "{n:?}");
        assert!((850..1_150).contains(&n[i500]), "{n:?}");
    }
}
