//! HTTP/1.x response framing: the engine uses the workspace's one HTTP/1 module (`http1`), kept
//! apart from any I/O so it can be tested and fuzzed without sockets. The parser is fed whatever
//! bytes a read returned, in any split, and says when one response is complete; bodies are
//! counted, never copied. Every [`Malformed`] the parser returns is counted as
//! `ErrorKind::Malformed`, with its message as the reason.

pub use http1::response::{Eof, Malformed, Progress, Response, ResponseParser};
pub use http1::{Discard, Sink, MAX_HEAD};
