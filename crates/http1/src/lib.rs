//! proxybench's one HTTP/1.1 module, shared by the load engine, the backend fleet and the tests,
//! kept apart from any event loop (hyper's lesson) so it can be tested and fuzzed without
//! sockets:
//!
//! - [`head`]: request and response heads, parsed with httparse;
//! - [`chunked`]: the one incremental chunked-body decoder (and a small encoder);
//! - [`response`]: response framing (heads, interims, Content-Length, chunked, close-delimited);
//! - [`request`]: request-body framing for a server;
//! - [`client`]: a small blocking client for tests and control traffic.
//!
//! Against the parsers it replaced (a hand-written response head parser and two chunked
//! decoders), what a peer can now see differ:
//! - response heads: header values with control characters and a CR not followed by LF are
//!   refused ("bad header value", "bad line ending"), as RFC 9112 asks; empty lines before a
//!   status line are skipped; a bad Content-Length is reported when the head is complete rather
//!   than at its line; a name-less line reads "bad header name";
//! - chunked bodies, one rule for both sides: a bare LF ends a line (the backend used to refuse
//!   it), trailer lines must be `name: value` (the backend took any bytes), the size line is at
//!   most 4 KiB and the trailers at most 64 KiB (the backend had no limits); a bad byte is
//!   refused as it arrives, so on a line both bad and too long the reason may differ.
#![warn(missing_docs)]

pub mod chunked;
pub mod client;
pub mod head;
pub mod request;
pub mod response;

pub use chunked::{ChunkedDecoder, ChunkedError};
pub use head::{
    parse_request, parse_response, BodyKind, Malformed, RequestError, RequestHead, ResponseHead,
    MAX_HEAD,
};
pub use response::{Eof, Progress, Response, ResponseParser};

/// Receives the parts of a message that the caller wants to keep.
pub trait Sink {
    /// A header line of the final response (or a trailer), name and trimmed value.
    fn header(&mut self, _name: &[u8], _value: &[u8]) {}
    /// A piece of the decoded body.
    fn body(&mut self, _data: &[u8]) {}
}

/// A sink that keeps nothing: what the load engine and the backend use.
pub struct Discard;
impl Sink for Discard {}
