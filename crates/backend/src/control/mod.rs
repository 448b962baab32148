//! The fleet's live control over HTTP + JSON, on a port of its own, for external tools and for
//! `proxybench backend --control ADDR`.
//!
//! Security: the endpoint binds loopback only (127.0.0.0/8 or ::1; [`serve`] refuses other
//! addresses) and every request must carry `Authorization: Bearer <token>`, else 401. The
//! token ([`Token`]) is 32 random bytes in hex, fresh per start; `proxybench backend` writes it
//! to a file created with mode 0600 (`--token-file PATH`, default
//! `./proxybench-control-PORT.token`), prints that path next to `control ADDR`, and removes it
//! on exit. [`Client`] sends it.
//!
//! | request | body | answer |
//! |---|---|---|
//! | `GET /counters` | | `[BackendCounters, ...]` |
//! | `GET /instances` | | `[{"name","addr","profile"}, ...]` |
//! | `POST /instances` | `{"name":"backend-3","addr":"127.0.0.1:0","profile":"latency=5ms"}` | `201 {"name","addr"}` |
//! | `PUT /instances/NAME/profile` | `{"profile":"latency=10ms; status=503:1%"}` | `{"ok":true}` |
//! | `POST /instances/NAME/drain` | | `{"ok":true}` once drained (`?wait=false`: at once, 202) |
//! | `POST /instances/NAME/kill` | | `{"ok":true}` |
//! | `POST /instances/NAME/restart` | | `{"ok":true}` |
//!
//! Errors answer `{"error":"..."}` with 400 (bad spec or body), 401 (no or wrong token), 404 (unknown instance or
//! endpoint), 409 (wrong state, duplicate name) or 500.

mod client;
mod server;
mod token;
mod wire;

pub use client::Client;
pub use server::{serve, Server};
pub use token::Token;
