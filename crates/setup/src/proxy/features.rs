//! What the neutral model can say, feature by feature, and how far each proxy can say it: the
//! capability table. A model lists the features it uses ([`ProxyConfig::features`]) with the
//! item that uses each; a driver answers [`Support`] for each feature. The run refuses a scenario
//! that uses a feature its proxy cannot express, naming the proxy, the feature and the item, and
//! reports every feature a proxy expresses differently.

use crate::proxy::{Lb, ProxyConfig};

/// One thing the model can ask of a proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Feature {
    /// A listener serving HTTPS with the run's certificate.
    Tls,
    /// Listeners split by server name (virtual hosts).
    ServerNames,
    /// Round-robin balancing.
    LbRoundRobin,
    /// Least-connections balancing.
    LbLeastConn,
    /// Random balancing.
    LbRandom,
    /// Two random choices, the one with fewer connections.
    LbRandomTwoLeastConn,
    /// Balancing by client address.
    LbIpHash,
    /// Balancing by a hash of a request key.
    LbHash,
    /// Consistent (ketama) hashing.
    LbHashConsistent,
    /// Idle keep-alive connections to the upstream servers.
    UpstreamKeepalive,
    /// Marking a failing server unavailable (`max_fails`, `fail_timeout`).
    PassiveHealth,
    /// Passing a request to the next server on the listed conditions.
    NextUpstream,
    /// A bound on the attempts a request gets.
    NextUpstreamTries,
    /// A time bound on passing a request on.
    NextUpstreamTimeout,
    /// Upstream connect, read and send timeouts.
    UpstreamTimeouts,
    /// Balancing state shared by all workers (`zone`).
    UpstreamZone,
    /// HTTP/2 (h2c) to the upstream servers.
    UpstreamHttp2,
    /// Routes on an exact path.
    RouteExact,
    /// Routes conditioned on request headers.
    RouteHeaders,
    /// Routes conditioned on query arguments.
    RouteQuery,
    /// Routes conditioned on the method.
    RouteMethod,
    /// Routes the proxy answers itself (`return`).
    RouteReturn,
    /// A request-rate limit per key.
    RateLimit,
    /// Requests queued beyond the rate (`burst`).
    RateLimitBurst,
    /// Queued requests served at once (`nodelay`) or in two stages (`delay`).
    RateLimitNodelay,
    /// A rate-limit key other than the client address.
    RateLimitKey,
    /// More than one worker process per replica.
    WorkerProcesses,
    /// A bound on how long old workers finish after a reload or graceful stop.
    WorkerShutdownTimeout,
    /// An idle timeout for upgraded connections and gRPC streams.
    TunnelTimeout,
    /// Keeping the old configuration's upgraded connections open a while after a reload.
    StreamCloseDelay,
    /// Routes that carry WebSocket upgrades.
    RouteWebSocket,
    /// Routes that carry gRPC (HTTP/2 end to end, trailers passed on).
    RouteGrpc,
    /// Requests per client keep-alive connection.
    KeepaliveRequests,
    /// Idle time of a client keep-alive connection.
    KeepaliveTimeout,
    /// Running without an access log.
    AccessLogOff,
    /// Error-log verbosity.
    ErrorLogLevel,
    /// Verbatim config snippets (`[proxy.raw]`), in the proxy's own language.
    Raw,
}

impl Feature {
    /// Every feature, in table order.
    pub const ALL: [Feature; 37] = [
        Feature::Tls,
        Feature::ServerNames,
        Feature::LbRoundRobin,
        Feature::LbLeastConn,
        Feature::LbRandom,
        Feature::LbRandomTwoLeastConn,
        Feature::LbIpHash,
        Feature::LbHash,
        Feature::LbHashConsistent,
        Feature::UpstreamKeepalive,
        Feature::PassiveHealth,
        Feature::NextUpstream,
        Feature::NextUpstreamTries,
        Feature::NextUpstreamTimeout,
        Feature::UpstreamTimeouts,
        Feature::UpstreamZone,
        Feature::UpstreamHttp2,
        Feature::RouteExact,
        Feature::RouteHeaders,
        Feature::RouteQuery,
        Feature::RouteMethod,
        Feature::RouteReturn,
        Feature::RateLimit,
        Feature::RateLimitBurst,
        Feature::RateLimitNodelay,
        Feature::RateLimitKey,
        Feature::WorkerProcesses,
        Feature::WorkerShutdownTimeout,
        Feature::TunnelTimeout,
        Feature::StreamCloseDelay,
        Feature::RouteWebSocket,
        Feature::RouteGrpc,
        Feature::KeepaliveRequests,
        Feature::KeepaliveTimeout,
        Feature::AccessLogOff,
        Feature::ErrorLogLevel,
        Feature::Raw,
    ];

    /// The model key that asks for it, as a scenario writes it.
    pub fn key(self) -> &'static str {
        match self {
            Feature::Tls => "listeners.tls",
            Feature::ServerNames => "listeners.server_names",
            Feature::LbRoundRobin => "lb = \"round_robin\"",
            Feature::LbLeastConn => "lb = \"least_conn\"",
            Feature::LbRandom => "lb = \"random\"",
            Feature::LbRandomTwoLeastConn => "lb = \"random_two_least_conn\"",
            Feature::LbIpHash => "lb = \"ip_hash\"",
            Feature::LbHash => "lb = { hash }",
            Feature::LbHashConsistent => "lb = { hash, consistent = true }",
            Feature::UpstreamKeepalive => "upstreams.keepalive",
            Feature::PassiveHealth => "upstreams.max_fails / fail_timeout",
            Feature::NextUpstream => "upstreams.next_upstream",
            Feature::NextUpstreamTries => "upstreams.next_upstream_tries",
            Feature::NextUpstreamTimeout => "upstreams.next_upstream_timeout",
            Feature::UpstreamTimeouts => "upstreams.connect/read/send_timeout",
            Feature::UpstreamZone => "upstreams.zone",
            Feature::UpstreamHttp2 => "upstreams.http2",
            Feature::RouteExact => "routes.match = \"exact\"",
            Feature::RouteHeaders => "routes.headers",
            Feature::RouteQuery => "routes.query",
            Feature::RouteMethod => "routes.method",
            Feature::RouteReturn => "routes.return",
            Feature::RateLimit => "rate_limits",
            Feature::RateLimitBurst => "rate_limits.burst",
            Feature::RateLimitNodelay => "rate_limits.nodelay / delay",
            Feature::RateLimitKey => "rate_limits.key",
            Feature::WorkerProcesses => "worker_processes",
            Feature::WorkerShutdownTimeout => "worker_shutdown_timeout",
            Feature::TunnelTimeout => "tunnel_timeout",
            Feature::StreamCloseDelay => "stream_close_delay",
            Feature::RouteWebSocket => "routes.websocket",
            Feature::RouteGrpc => "routes.grpc",
            Feature::KeepaliveRequests => "keepalive_requests",
            Feature::KeepaliveTimeout => "keepalive_timeout",
            Feature::AccessLogOff => "access_log = false",
            Feature::ErrorLogLevel => "error_log_level",
            Feature::Raw => "raw",
        }
    }
}

impl std::fmt::Display for Feature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.key())
    }
}

/// How far a proxy expresses a feature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    /// As the model means it.
    Yes,
    /// Expressed, but its behaviour differs from the model's meaning; the text says how, and the
    /// report repeats it wherever the feature is used.
    Differs(&'static str),
    /// Not expressible; the text says why. A scenario using it is refused before anything starts.
    No(&'static str),
}

/// One use of a feature by a model: the feature and the item (`upstream.app`, `route.3`...) that
/// uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Use {
    /// The feature.
    pub feature: Feature,
    /// The item key, as the scenario's item lines name it.
    pub item: String,
}

impl ProxyConfig {
    /// Every feature the model uses beyond the defaults every proxy has, with the item using it,
    /// in model order.
    pub fn features(&self) -> Vec<Use> {
        let mut out = Vec::new();
        let mut add = |feature: Feature, item: String| out.push(Use { feature, item });
        let top = || "proxy".to_string();
        if self.worker_processes > 1 {
            add(Feature::WorkerProcesses, top());
        }
        if self.worker_shutdown_timeout.is_some() {
            add(Feature::WorkerShutdownTimeout, top());
        }
        if self.tunnel_timeout.is_some() {
            add(Feature::TunnelTimeout, top());
        }
        if self.stream_close_delay.is_some() {
            add(Feature::StreamCloseDelay, top());
        }
        if self.keepalive_requests != ProxyConfig::default().keepalive_requests {
            add(Feature::KeepaliveRequests, top());
        }
        if self.keepalive_timeout != ProxyConfig::default().keepalive_timeout {
            add(Feature::KeepaliveTimeout, top());
        }
        if !self.access_log {
            add(Feature::AccessLogOff, top());
        }
        if self.error_log_level != ProxyConfig::default().error_log_level {
            add(Feature::ErrorLogLevel, top());
        }
        for l in &self.listeners {
            let item = format!("listener.{}", l.name);
            if l.tls {
                add(Feature::Tls, item.clone());
            }
            if !l.server_names.is_empty() {
                add(Feature::ServerNames, item);
            }
        }
        for u in &self.upstreams {
            self.upstream_uses(u, &mut add);
        }
        for (i, r) in self.routes.iter().enumerate() {
            let item = || format!("route.{i}");
            if r.path_match == crate::proxy::PathMatch::Exact {
                add(Feature::RouteExact, item());
            }
            if !r.headers.is_empty() {
                add(Feature::RouteHeaders, item());
            }
            if !r.query.is_empty() {
                add(Feature::RouteQuery, item());
            }
            if r.method.is_some() {
                add(Feature::RouteMethod, item());
            }
            if r.return_status.is_some() {
                add(Feature::RouteReturn, item());
            }
            if r.websocket {
                add(Feature::RouteWebSocket, item());
            }
            if r.grpc {
                add(Feature::RouteGrpc, item());
            }
        }
        let default_key = crate::proxy::RateLimit::new("x", 1.0).key;
        for r in &self.rate_limits {
            let item = || format!("rate_limit.{}", r.name);
            add(Feature::RateLimit, item());
            if r.burst > 0 {
                add(Feature::RateLimitBurst, item());
            }
            if r.nodelay || r.delay.is_some() {
                add(Feature::RateLimitNodelay, item());
            }
            if r.key != default_key {
                add(Feature::RateLimitKey, item());
            }
        }
        for (block, text) in [
            ("main", &self.raw.main),
            ("events", &self.raw.events),
            ("http", &self.raw.http),
            ("server", &self.raw.server),
            ("location", &self.raw.location),
        ] {
            if !text.trim().is_empty() {
                add(Feature::Raw, format!("raw.{block}"));
            }
        }
        out
    }

    /// The features upstream `u` uses (`add` takes each with its item), HTTP/2 to it by
    /// whether plain routes or only gRPC ones use it.
    fn upstream_uses(&self, u: &crate::proxy::Upstream, add: &mut impl FnMut(Feature, String)) {
        let item = || format!("upstream.{}", u.name);
        match &u.lb {
            Lb::RoundRobin => add(Feature::LbRoundRobin, item()),
            Lb::LeastConn => add(Feature::LbLeastConn, item()),
            Lb::Random => add(Feature::LbRandom, item()),
            Lb::RandomTwoLeastConn => add(Feature::LbRandomTwoLeastConn, item()),
            Lb::IpHash => add(Feature::LbIpHash, item()),
            Lb::Hash { consistent, .. } => add(
                if *consistent {
                    Feature::LbHashConsistent
                } else {
                    Feature::LbHash
                },
                item(),
            ),
        }
        if u.keepalive > 0 || u.keepalive_requests.is_some() || u.keepalive_timeout.is_some() {
            add(Feature::UpstreamKeepalive, item());
        }
        if u.max_fails.is_some() || u.fail_timeout.is_some() {
            add(Feature::PassiveHealth, item());
        }
        if u.next_upstream.is_some() {
            add(Feature::NextUpstream, item());
        }
        if u.next_upstream_tries.is_some() {
            add(Feature::NextUpstreamTries, item());
        }
        if u.next_upstream_timeout.is_some() {
            add(Feature::NextUpstreamTimeout, item());
        }
        if u.connect_timeout.is_some() || u.read_timeout.is_some() || u.send_timeout.is_some() {
            add(Feature::UpstreamTimeouts, item());
        }
        if u.zone.is_some() {
            add(Feature::UpstreamZone, item());
        }
        // HTTP/2 to an upstream only gRPC routes use is what `routes.grpc` asks for; it is
        // the general feature when a plain route proxies over it too (or none uses it).
        let users: Vec<&crate::proxy::Route> = self
            .routes
            .iter()
            .filter(|r| r.upstream.as_deref() == Some(u.name.as_str()))
            .collect();
        if u.http2 && (users.is_empty() || users.iter().any(|r| !r.grpc)) {
            add(Feature::UpstreamHttp2, item());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::{Listener, RateLimit, Route, Upstream};

    #[test]
    fn a_model_lists_the_features_it_uses_with_their_items() {
        let mut cfg = ProxyConfig::default();
        cfg.listeners.push(Listener {
            name: "https".into(),
            tls: true,
            ..Listener::default()
        });
        let mut u = Upstream::new("app", "app");
        u.lb = Lb::LeastConn;
        u.keepalive = 16;
        u.http2 = true;
        cfg.upstreams.push(u);
        let mut r = Route::to_upstream("/", "app");
        r.rate_limit = Some("rl".into());
        cfg.routes.push(r);
        let mut rl = RateLimit::new("rl", 3.0);
        rl.burst = 5;
        cfg.rate_limits.push(rl);
        let got: Vec<(Feature, String)> = cfg
            .features()
            .into_iter()
            .map(|u| (u.feature, u.item))
            .collect();
        assert_eq!(
            got,
            vec![
                (Feature::Tls, "listener.https".into()),
                (Feature::LbLeastConn, "upstream.app".into()),
                (Feature::UpstreamKeepalive, "upstream.app".into()),
                (Feature::UpstreamHttp2, "upstream.app".into()),
                (Feature::RateLimit, "rate_limit.rl".into()),
                (Feature::RateLimitBurst, "rate_limit.rl".into()),
            ]
        );
        // An upstream only gRPC routes use asks for gRPC, not for general HTTP/2.
        cfg.routes[0].grpc = true;
        let f: Vec<Feature> = cfg.features().into_iter().map(|u| u.feature).collect();
        assert!(f.contains(&Feature::RouteGrpc) && !f.contains(&Feature::UpstreamHttp2));
        cfg.routes[0].grpc = false;
        cfg.routes[0].websocket = true;
        cfg.tunnel_timeout = Some(units::Dur(std::time::Duration::from_secs(30)));
        let f: Vec<Feature> = cfg.features().into_iter().map(|u| u.feature).collect();
        assert!(f.contains(&Feature::RouteWebSocket) && f.contains(&Feature::TunnelTimeout));
        assert_eq!(Feature::ALL.len(), {
            let mut v = Feature::ALL.to_vec();
            v.sort();
            v.dedup();
            v.len()
        });
    }
}
