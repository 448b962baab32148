//! The emulated upstream fleet that stands behind every proxy under test: N instances, each a
//! listener with a behaviour [`Profile`] (latency distributions, CPU cost, response sizes,
//! status mixes, close-after-N, slow start, per-path overrides), served by hand-written
//! event loops fast enough never to be the bottleneck, and operated live through a Rust API
//! ([`Fleet`]) or an HTTP + JSON endpoint ([`control`]).
//!
//! What every instance answers:
//! - any method and path, with `X-Backend: <name>` on every response; the body is the name and
//!   a newline unless the profile sets `size` (then a repeating printable pattern);
//! - `/healthz`: 200 while the instance is up (liveness); `/readyz`: 503 during slow start and
//!   while draining, else 200. Probes follow no profile and are not counted;
//! - during slow start, every other request gets 503 `not ready` (counted);
//! - request bodies are read and discarded (Content-Length or chunked; `Expect: 100-continue`
//!   is honoured); an unparsable request gets 400 and a head over 8 KiB 431, then a close;
//! - keep-alive (HTTP/1.1 default; HTTP/1.0 with `Connection: keep-alive`) and pipelining:
//!   requests on one connection are answered in order, each latency starting when its request
//!   has arrived and the response before it has been produced;
//! - h2c (HTTP/2 with prior knowledge) on the same listener: a connection that opens with the
//!   HTTP/2 preface speaks HTTP/2 on the same event loop (`http2::ServerConn`), each stream
//!   decided as an HTTP/1.1 request and answered on its own; `close_after`, drain and graceful
//!   stop send GOAWAY.
//!
//! Emulated latency starts when the request arrived (the kernel's receive timestamp of its last
//! bytes), not when the event loop got round to reading it, and is waited on the loop's timers
//! (a heap and a timerfd with nanosecond deadlines), never by blocking. A request carrying an
//! `X-Backend-Debug` header gets `X-Backend-Delay-Ns: <drawn latency>` in its response, so a
//! client can check the draws against what it measured.
//!
//! Counters ([`Fleet::counters`]) count a request when its response is produced (`requests`,
//! `by_status`; probes excluded), bytes when the kernel accepts them (everything written on the
//! instance's connections, probes included), connections when accepted; what came over h2c is
//! also counted apart (`h2`).
//!
//! # Example
//! ```
//! use proxybench_backend::{Fleet, FleetConfig, InstanceConfig};
//! let fleet = Fleet::start(FleetConfig {
//!     instances: vec![InstanceConfig {
//!         name: "backend-0".into(),
//!         addr: "127.0.0.1:0".parse().unwrap(),
//!         profile: "latency=1ms; status=503:1%".parse().unwrap(),
//!     }],
//!     ..FleetConfig::default()
//! })
//! .unwrap();
//! let (name, addr) = fleet.addrs()[0].clone();
//! assert_eq!(name, "backend-0");
//! assert_ne!(addr.port(), 0);
//! fleet.shutdown();
//! ```

#![warn(missing_docs)]

mod compiled;
mod conn;
pub mod control;
mod counters;
mod dist;
mod error;
mod fleet;
/// Request framing (head parser, body decoder), public so the fuzzer (crates/fuzz) can drive it.
pub mod http;
mod response;
mod sys;
mod timer;
mod worker;

pub use counters::{counters_line, parse_counters_line};
pub use error::Error;
pub use fleet::{DrainHandle, Fleet, FleetConfig, InstanceConfig};
/// The profiles as data (spec syntax, distributions) live in the sys-free setup crate, so the
/// scenario language and the analyses read them without this engine; re-exported here.
pub use setup::profile::{
    Behaviour, Dist, PathRule, Profile, Share, SpecError, Spike, StatusShare,
};
