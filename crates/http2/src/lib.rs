//! proxybench's HTTP/2 codec, kept apart from any I/O as the HTTP/1.1 one is, so it can be
//! tested and fuzzed without sockets: `frame` (the frame layer, RFC 9113), `hpack` (RFC 7541,
//! with its `tables`), `client` (one client connection's state: SETTINGS, flow control,
//! streams, GOAWAY and RST_STREAM; the load engine's) and `server` (one server connection's
//! state, sharing the frame layer and HPACK; the emulated backend's).

#![warn(missing_docs)]

pub mod client;
pub mod frame;
pub mod hpack;
pub mod server;
pub mod tables;

pub use client::{ClientConn, Event};
pub use frame::ConnError;
pub use server::{RequestHead, ServerConn, ServerEvent, ServerSettings};

#[cfg(test)]
mod server_tests;
#[cfg(test)]
mod tests;
