//! proxybench's HTTP/2 codec, kept apart from any I/O as the HTTP/1.1 one is, so it can be
//! tested and fuzzed without sockets: `frame` (the frame layer, RFC 9113), `hpack` (RFC 7541,
//! with its `tables`), `conn` (the connection core both ends share, generic over the peer:
//! framing, SETTINGS, flow control, PING, CONTINUATION, connection errors), and its two roles:
//! `client` (the load engine's: the streams it opens, responses, GOAWAY and RST_STREAM) and
//! `server` (the emulated backend's: requests and their heads, responses and their bodies);
//! and `grpc`, gRPC's length-prefixed messages, deadlines and statuses as both roles carry them
//! (the client counts a gRPC response's messages and reads its `grpc-status` trailers, the
//! server sends open-ended bodies that trailers end).

#![warn(missing_docs)]

pub mod client;
pub mod conn;
pub mod frame;
pub mod grpc;
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
