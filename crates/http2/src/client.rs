//! One client HTTP/2 connection as a state machine without I/O: the caller opens streams (each
//! tagged with a `slot` of its own choosing), feeds it whatever bytes the socket returned in any
//! split, sends what it queued in [`ClientConn::out`], and takes the [`Event`]s it produced.
//!
//! The framing, SETTINGS, flow control, PING and connection errors are the shared core's
//! ([`crate::conn::Connection`]); the [`Client`] role adds the rest: the streams it opens (ids,
//! request bodies that wait for send window, reported as stalls), its receive windows given back
//! with WINDOW_UPDATE as DATA is consumed, the responses and their `:status`, the request's
//! HPACK state (its first block on the connection fills the server's dynamic table, later ones
//! name the entries, see [`hpack::RequestHeaders`]), RST_STREAM and GOAWAY. A violation of the
//! protocol by the peer is a connection error: [`ClientConn::feed`] returns it, queues a GOAWAY
//! with its code, and the connection is dead from then on.

pub use crate::conn::PeerSettings;
use crate::conn::{Connection, Flow, Peer, Pending, StreamWindow};
pub use crate::frame::ConnError;
use crate::frame::{self, code, err, Head};
use crate::grpc;
use crate::hpack::{self, Blocks, RequestHeaders};
use std::sync::Arc;

/// Our receive window, per stream (SETTINGS_INITIAL_WINDOW_SIZE) and for the connection: large,
/// as h2load's default, so the server never waits for a WINDOW_UPDATE on ordinary responses.
pub const RECV_WINDOW: u32 = (1 << 30) - 1;
/// The largest header block (all its CONTINUATIONs) accepted before calling the peer abusive.
pub const MAX_HEADER_BLOCK: usize = 256 * 1024;

/// Something that happened on the connection, for the caller to account.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Event {
    /// A response completed (END_STREAM after a final status).
    Response {
        /// The caller's tag of the stream.
        slot: u32,
        /// The final status code.
        status: u16,
        /// Body bytes (DATA payload, padding excluded).
        bytes: u64,
    },
    /// The server reset the stream (RST_STREAM) with this error code.
    Reset {
        /// The caller's tag of the stream.
        slot: u32,
        /// The RST_STREAM error code.
        code: u32,
    },
    /// The stream's id is above a GOAWAY's last-stream-id: the server did not and will not
    /// process it.
    Refused {
        /// The caller's tag of the stream.
        slot: u32,
    },
    /// The stream's response broke HTTP semantics (no or bad `:status`, DATA before HEADERS);
    /// the stream was reset with PROTOCOL_ERROR.
    Malformed {
        /// The caller's tag of the stream.
        slot: u32,
        /// What was wrong.
        reason: &'static str,
    },
    /// A GOAWAY frame arrived.
    GoAway {
        /// Its last-stream-id.
        last_stream: u32,
        /// Its error code (NO_ERROR for a graceful shutdown).
        code: u32,
    },
    /// A request body had to wait for flow-control window.
    Stalled {
        /// The caller's tag of the stream.
        slot: u32,
    },
    /// The server acknowledged our SETTINGS.
    SettingsAcked,
    /// gRPC mode ([`ClientConn::set_grpc`]): one length-prefixed message of a response
    /// arrived whole.
    Message {
        /// The caller's tag of the stream.
        slot: u32,
        /// Its payload length.
        len: u32,
    },
    /// gRPC mode: the response's trailers (or its Trailers-Only head) carried this
    /// `grpc-status`; the stream's [`Event::Response`] follows at once. A response that ends
    /// without one has no such event.
    GrpcStatus {
        /// The caller's tag of the stream.
        slot: u32,
        /// The status code.
        code: u16,
    },
}

/// One client stream.
#[derive(Debug)]
pub struct Stream {
    flow: Flow,
    slot: u32,
    /// Final status once its HEADERS arrived (0 before).
    status: u16,
    bytes: u64,
    /// Body bytes sent so far; the stream waits for window while below the body length.
    body_sent: usize,
    stalled: bool,
    /// gRPC mode: the response body's messages.
    deframer: grpc::Deframer,
}

impl StreamWindow for Stream {
    fn flow(&self) -> &Flow {
        &self.flow
    }
    fn flow_mut(&mut self) -> &mut Flow {
        &mut self.flow
    }
}

/// The client's side of a connection (see the module documentation).
#[derive(Debug)]
pub struct Client {
    next_id: u32,
    goaway: Option<(u32, u32)>,
    body: Option<Arc<[u8]>>,
    /// The request [`ClientConn::open`] sends.
    request: Arc<RequestHeaders>,
    /// Its blocks for a server that set SETTINGS_HEADER_TABLE_SIZE below the default.
    small_table: Option<Box<Blocks>>,
    /// The request's first block went out: the server's table holds its entries.
    indexed: bool,
    /// The dynamic table size our encoder uses (the server's setting, at most the default).
    table_size: usize,
    /// Dynamic table size updates owed at the start of the next header block (RFC 7541 6.3).
    size_update: Vec<u8>,
    /// gRPC mode: response messages and `grpc-status` are reported.
    grpc: bool,
}

/// One HTTP/2 client connection (see the module documentation).
pub type ClientConn = Connection<Client>;

impl Connection<Client> {
    /// A new connection whose [`ClientConn::open`] sends `request`, with `body` when it has one
    /// (both shared, e.g. by every connection of a load). The preface, our SETTINGS and a
    /// connection WINDOW_UPDATE are queued in [`ClientConn::out`] already.
    pub fn new(request: Arc<RequestHeaders>, body: Option<Arc<[u8]>>) -> ClientConn {
        let mut out = Vec::with_capacity(1024);
        out.extend_from_slice(frame::PREFACE);
        frame::settings(
            &mut out,
            &[
                (frame::SETTINGS_ENABLE_PUSH, 0),
                (frame::SETTINGS_INITIAL_WINDOW_SIZE, RECV_WINDOW),
            ],
        );
        frame::window_update(&mut out, 0, RECV_WINDOW - frame::DEFAULT_WINDOW);
        let role = Client {
            next_id: 1,
            goaway: None,
            body,
            request,
            small_table: None,
            indexed: false,
            table_size: hpack::TABLE_SIZE,
            size_update: Vec::new(),
            grpc: false,
        };
        Connection::with_role(role, out, false, RECV_WINDOW)
    }

    /// Reports what a gRPC client needs beside the responses: each whole length-prefixed
    /// message of a response body ([`Event::Message`]) and the `grpc-status` of its trailers
    /// ([`Event::GrpcStatus`]). A 200's body that is not a sequence of uncompressed gRPC
    /// messages resets its stream as malformed; another status's body is not read as messages.
    pub fn set_grpc(&mut self) {
        self.role.grpc = true;
    }

    /// The last GOAWAY received: (last-stream-id, code).
    pub fn goaway(&self) -> Option<(u32, u32)> {
        self.role.goaway
    }

    /// True when a stream can be opened now: no GOAWAY, under the server's concurrency limit,
    /// stream ids left.
    #[inline]
    pub fn can_open(&self) -> bool {
        !self.dead
            && self.role.goaway.is_none()
            && (self.streams.len() as u64) < self.peer.max_concurrent as u64
            && self.role.next_id <= frame::MAX_STREAM_ID
    }

    /// True when the connection has nothing more to give: dead, or going away (GOAWAY received,
    /// or stream ids exhausted) with no stream left open.
    pub fn finished(&self) -> bool {
        self.dead
            || ((self.role.goaway.is_some() || self.role.next_id > frame::MAX_STREAM_ID)
                && self.streams.is_empty())
    }

    /// The slots of the streams still open, which the caller fails when the connection ends.
    pub fn open_slots(&self) -> impl Iterator<Item = u32> + '_ {
        self.streams.iter().map(|s| s.slot)
    }

    /// Opens a stream tagged `slot` for the connection's request and queues its HEADERS (split
    /// into CONTINUATIONs if the block exceeds the peer's frame size), then as much of the body
    /// as the windows allow. The first request's block adds its fields to the server's dynamic
    /// table, every later one names them by index. Returns the stream id, or `None` when
    /// [`ClientConn::can_open`] is false.
    pub fn open(&mut self, slot: u32) -> Option<u32> {
        self.start(slot, None)
    }

    /// Opens a stream tagged `slot` for a request other than the connection's own, with a
    /// header block of the caller's that names no dynamic table entry (such as
    /// [`hpack::request_block`]'s); otherwise as [`ClientConn::open`].
    pub fn open_block(&mut self, slot: u32, block: &[u8]) -> Option<u32> {
        self.start(slot, Some(block))
    }

    /// Opens a stream with the caller's block, or the connection's request when `None`.
    fn start(&mut self, slot: u32, theirs: Option<&[u8]>) -> Option<u32> {
        if !self.can_open() {
            return None;
        }
        let r = &mut self.role;
        let block = match theirs {
            Some(b) => b,
            None => {
                let blocks = match &r.small_table {
                    Some(b) => b,
                    None => r.request.default_blocks(),
                };
                let first = !r.indexed;
                r.indexed = true;
                if first {
                    &blocks.first
                } else {
                    &blocks.repeat
                }
            }
        };
        let id = r.next_id;
        r.next_id += 2;
        let has_body = r.body.as_ref().is_some_and(|b| !b.is_empty());
        if r.size_update.is_empty() {
            frame::header_frames(&mut self.out, id, block, !has_body, self.peer.max_frame);
        } else {
            let mut b = std::mem::take(&mut r.size_update);
            b.extend_from_slice(block);
            frame::header_frames(&mut self.out, id, &b, !has_body, self.peer.max_frame);
        }
        self.streams.push(Stream {
            flow: Flow::new(id, self.peer.initial_window, RECV_WINDOW),
            slot,
            status: 0,
            bytes: 0,
            body_sent: 0,
            stalled: false,
            deframer: grpc::Deframer::new(),
        });
        if has_body {
            let k = self.streams.len() - 1;
            self.send_body(k);
        }
        Some(id)
    }

    /// Sends as much of stream `k`'s body as the windows allow.
    fn send_body(&mut self, k: usize) {
        let Some(body) = self.role.body.clone() else {
            return;
        };
        let s = &mut self.streams[k];
        while s.body_sent < body.len() {
            let window = s.flow.send.min(self.conn_send_window);
            if window <= 0 {
                if !s.stalled {
                    s.stalled = true;
                    self.events.push(Event::Stalled { slot: s.slot });
                }
                return;
            }
            let n = (body.len() - s.body_sent)
                .min(window as usize)
                .min(self.peer.max_frame as usize);
            let end = s.body_sent + n == body.len();
            frame::head(
                &mut self.out,
                n,
                frame::DATA,
                if end { frame::END_STREAM } else { 0 },
                s.flow.id,
            );
            self.out
                .extend_from_slice(&body[s.body_sent..s.body_sent + n]);
            s.body_sent += n;
            s.flow.send -= n as i64;
            self.conn_send_window -= n as i64;
        }
        s.stalled = false;
    }

    /// Gives up on the stream tagged `slot` (a timeout): RST_STREAM(CANCEL) is queued and the
    /// stream forgotten. Returns false when no such stream is open.
    pub fn cancel(&mut self, slot: u32) -> bool {
        let Some(k) = self.streams.iter().position(|s| s.slot == slot) else {
            return false;
        };
        let s = self.streams.swap_remove(k);
        if !self.dead {
            frame::rst_stream(&mut self.out, s.flow.id, code::CANCEL);
        }
        true
    }

    /// Stream `k`'s response is complete: it is forgotten and reported.
    fn respond(&mut self, k: usize) {
        let s = self.streams.swap_remove(k);
        self.events.push(Event::Response {
            slot: s.slot,
            status: s.status,
            bytes: s.bytes,
        });
    }
}

impl crate::conn::sealed::Sealed for Client {}

impl Peer for Client {
    type Event = Event;
    type Stream = Stream;
    const NOT_SETTINGS_FIRST: &'static str = "the server's first frame was not SETTINGS";
    const PUSH_PROMISE: &'static str = "PUSH_PROMISE although push is disabled";

    fn max_header_block(_: &ClientConn) -> usize {
        MAX_HEADER_BLOCK
    }

    /// Ids we have not opened yet, and even ones (push is disabled).
    fn idle(c: &ClientConn, id: u32) -> bool {
        !(id % 2 == 1 && id < c.role.next_id)
    }

    fn check_headers(c: &ClientConn, id: u32) -> Result<(), ConnError> {
        if id % 2 == 0 || id >= c.role.next_id {
            return Err(err(
                code::PROTOCOL_ERROR,
                "HEADERS on a stream the client did not open",
            ));
        }
        Ok(())
    }

    /// A complete header block: decoded always (the HPACK context is shared), then applied
    /// to the stream if it is still open.
    fn header_block(c: &mut ClientConn, pend: Pending, block: &[u8]) -> Result<(), ConnError> {
        let mut status: Option<u16> = None;
        let mut grpc_status: Option<u16> = None;
        let mut first = true;
        let mut bad: Option<&'static str> = None;
        let grpc = c.role.grpc;
        c.decoder
            .decode_some(
                block,
                |n| n == b":status" || (grpc && n == b"grpc-status"),
                |n, v| {
                    if n == b"grpc-status" {
                        grpc_status = v.and_then(grpc::parse_status);
                    } else if n == b":status" {
                        if !first {
                            bad.get_or_insert(":status not the first field");
                        }
                        status = v.and_then(parse_status);
                        if status.is_none() {
                            bad.get_or_insert("a :status that is not 3 digits");
                        }
                    } else if n.first() == Some(&b':') {
                        bad.get_or_insert("a pseudo-header other than :status");
                    }
                    first = false;
                },
            )
            .map_err(|_| {
                err(
                    code::COMPRESSION_ERROR,
                    "a header block HPACK cannot decode",
                )
            })?;
        let Some(k) = c.stream_index(pend.stream) else {
            return Ok(());
        };
        let end_stream = pend.end_stream;
        let s = &mut c.streams[k];
        if s.status != 0 {
            // Trailers: they end the stream.
            if !end_stream {
                Self::stream_error(c, k, code::PROTOCOL_ERROR, "trailers without END_STREAM");
                return Ok(());
            }
        } else {
            if let Some(r) = bad {
                Self::stream_error(c, k, code::PROTOCOL_ERROR, r);
                return Ok(());
            }
            match status {
                None => {
                    Self::stream_error(c, k, code::PROTOCOL_ERROR, "a response without :status");
                    return Ok(());
                }
                Some(st) if (100..200).contains(&st) => {
                    // Informational: the final response follows.
                    if end_stream {
                        Self::stream_error(
                            c,
                            k,
                            code::PROTOCOL_ERROR,
                            "END_STREAM on an informational response",
                        );
                    }
                    return Ok(());
                }
                Some(st) => s.status = st,
            }
        }
        if end_stream {
            if let Some(code) = grpc_status.filter(|_| grpc) {
                let slot = c.streams[k].slot;
                c.events.push(Event::GrpcStatus { slot, code });
            }
            c.respond(k);
        }
        Ok(())
    }

    fn stream_recv_window(_: &ClientConn) -> u32 {
        RECV_WINDOW
    }

    fn refuse_data(_: &ClientConn, _: usize) -> Option<(u32, &'static str)> {
        None
    }

    /// Response body bytes: counted (in gRPC mode, cut into messages), and the response ends
    /// with END_STREAM.
    fn data(c: &mut ClientConn, k: usize, h: Head, body: &[u8]) -> Result<bool, ConnError> {
        let s = &mut c.streams[k];
        if s.status == 0 {
            Self::stream_error(
                c,
                k,
                code::PROTOCOL_ERROR,
                "DATA before the response HEADERS",
            );
            return Ok(false);
        }
        s.bytes += body.len() as u64;
        // Only a 200's body is gRPC messages: any other status is the proxy's own page (an
        // nginx 404 in HTML), which a gRPC client reads by its status alone.
        if c.role.grpc && s.status == 200 {
            let slot = s.slot;
            let events = &mut c.events;
            if s.deframer
                .feed(body, |len| events.push(Event::Message { slot, len }))
                .is_err()
            {
                Self::stream_error(
                    c,
                    k,
                    code::PROTOCOL_ERROR,
                    "a gRPC body that is not uncompressed length-prefixed messages",
                );
                return Ok(false);
            }
        }
        if h.flags & frame::END_STREAM != 0 {
            c.respond(k);
            return Ok(false);
        }
        Ok(true)
    }

    /// Late DATA on a stream we closed: its bytes are already charged to the connection.
    fn data_closed(_: &mut ClientConn, _: u32) {}

    fn reset_by_peer(c: &mut ClientConn, k: usize, code: u32) {
        let s = c.streams.swap_remove(k);
        c.events.push(Event::Reset { slot: s.slot, code });
    }

    /// Streams above the last-stream-id were not processed and never will be: refused.
    fn goaway(c: &mut ClientConn, last: u32, code: u32) {
        c.events.push(Event::GoAway {
            last_stream: last,
            code,
        });
        let mut k = 0;
        while k < c.streams.len() {
            if c.streams[k].flow.id > last {
                let s = c.streams.swap_remove(k);
                c.events.push(Event::Refused { slot: s.slot });
            } else {
                k += 1;
            }
        }
        c.role.goaway = Some(match c.role.goaway {
            Some((l, _)) => (l.min(last), code),
            None => (last, code),
        });
    }

    /// The server's SETTINGS_HEADER_TABLE_SIZE: when the size our encoder may use changes,
    /// the next header block opens with size updates to 0 (which empties the server's table)
    /// and to the new size, and the request is indexed again from scratch.
    fn setting(c: &mut ClientConn, id: u16, v: u32) {
        if id != frame::SETTINGS_HEADER_TABLE_SIZE {
            return;
        }
        let r = &mut c.role;
        let size = (v as usize).min(hpack::TABLE_SIZE);
        if size == r.table_size {
            return;
        }
        r.table_size = size;
        r.size_update.clear();
        hpack::size_update(&mut r.size_update, 0);
        if size > 0 {
            hpack::size_update(&mut r.size_update, size);
        }
        r.small_table = (size < hpack::TABLE_SIZE).then(|| Box::new(r.request.blocks(size)));
        r.indexed = false;
    }

    /// Sends the bodies that waited for window.
    fn window_opened(c: &mut ClientConn) {
        let Some(len) = c.role.body.as_ref().map(|b| b.len()) else {
            return;
        };
        for k in 0..c.streams.len() {
            if c.streams[k].body_sent < len {
                c.send_body(k);
            }
        }
    }

    fn settings_acked(c: &mut ClientConn) {
        c.events.push(Event::SettingsAcked);
    }

    /// Resets stream `k` with `code` and reports it malformed.
    fn stream_error(c: &mut ClientConn, k: usize, code: u32, reason: &'static str) {
        let s = c.streams.swap_remove(k);
        frame::rst_stream(&mut c.out, s.flow.id, code);
        c.events.push(Event::Malformed {
            slot: s.slot,
            reason,
        });
    }

    /// The last stream id the server initiated: always 0, as push is disabled.
    fn last_stream_for_goaway(_: &mut ClientConn) -> u32 {
        0
    }
}

/// A 3-digit status code from 100 to 599.
fn parse_status(v: &[u8]) -> Option<u16> {
    if v.len() != 3 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = v.iter().fold(0u16, |a, &d| a * 10 + (d - b'0') as u16);
    (100..600).contains(&n).then_some(n)
}
