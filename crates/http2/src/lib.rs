//! proxybench's HTTP/2 client codec, kept apart from any I/O as the HTTP/1.1 one is, so it can be
//! tested and fuzzed without sockets: `frame` (the frame layer, RFC 9113), `hpack` (RFC 7541,
//! with its `tables`) and `client` (one connection's state:
//! SETTINGS, flow control, streams, GOAWAY and RST_STREAM).

#![warn(missing_docs)]

pub mod client;
pub mod frame;
pub mod hpack;
pub mod tables;

pub use client::{ClientConn, ConnError, Event};

#[cfg(test)]
mod tests;
