//! One server HTTP/2 connection as a state machine without I/O, the counterpart of
//! [`crate::client`]: the caller feeds it whatever bytes the socket returned in any split
//! (the client's connection preface first), takes the [`ServerEvent`]s it produced, answers each
//! complete request with [`ServerConn::respond`] whenever it likes (so a slow stream never holds
//! up a fast one), lets [`ServerConn::pump`] write response bodies as the client's flow-control
//! windows allow, and sends what was queued in [`ServerConn::out`].
//!
//! The framing, SETTINGS, flow control, PING and connection errors are the shared core's
//! ([`crate::conn::Connection`]); the [`Server`] role adds the rest: the client's header table
//! size, request bodies taken as they come (their stream windows given back with WINDOW_UPDATE),
//! response bodies that wait for window, the open streams with their request heads, and GOAWAY
//! both ways. Streams above
//! SETTINGS_MAX_CONCURRENT_STREAMS are refused (RST_STREAM REFUSED_STREAM); a malformed request
//! (RFC 9113 8.1.1, 8.2, 8.3) is a stream error (RST_STREAM PROTOCOL_ERROR); a violation of the
//! framing or of the connection's state is a connection error: [`ServerConn::feed`] returns it,
//! queues a GOAWAY with its code and the last stream id it processed, and the connection is dead
//! from then on. [`ServerConn::goaway`] starts a graceful shutdown: streams already opened are
//! finished, later ones ignored (the client sees them above the GOAWAY's last-stream-id).
//!
//! The response's header block is the caller's (see [`crate::hpack::status`] and
//! [`crate::hpack::field`]); its body is described by a length and a tag of the caller's type
//! `T`, and produced piece by piece by the closure given to [`ServerConn::pump`], so a large body
//! never has to exist in memory.

mod decode;

use crate::conn::{Connection, Flow, Peer, Pending, StreamWindow};
use crate::frame::{self, code, err, ConnError, Head};
use crate::hpack;
use decode::decode;

/// What a server connection advertises and accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerSettings {
    /// SETTINGS_MAX_CONCURRENT_STREAMS: streams opened beyond it are refused.
    pub max_concurrent: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE: each stream's receive window for its request body.
    pub stream_window: u32,
    /// The connection's receive window (raised from 65,535 by a WINDOW_UPDATE sent with our
    /// SETTINGS).
    pub conn_window: u32,
    /// The largest header block (a HEADERS frame and its CONTINUATIONs) accepted before the
    /// client is called abusive (ENHANCE_YOUR_CALM).
    pub max_header_block: usize,
    /// SETTINGS_MAX_HEADER_LIST_SIZE: a request whose decoded fields (names, values and 32
    /// bytes each, 6.5.2) exceed it is reset, so a small block that names a large table entry
    /// many times cannot make the connection hold megabytes.
    pub max_header_list: u32,
}

impl Default for ServerSettings {
    /// nginx's concurrency (128 streams), the protocol's default stream window, a 1 MiB
    /// connection window, 64 KiB header blocks and header lists.
    fn default() -> ServerSettings {
        ServerSettings {
            max_concurrent: 128,
            stream_window: frame::DEFAULT_WINDOW,
            conn_window: 1 << 20,
            max_header_block: 64 * 1024,
            max_header_list: 64 * 1024,
        }
    }
}

/// Something that happened on the connection, for the caller to act on or account.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServerEvent {
    /// A request arrived in full (END_STREAM): its head is [`ServerConn::head`]; answer it
    /// with [`ServerConn::respond`]. If the same bytes also reset the stream, a `Reset` (or
    /// `StreamError`) for it follows and it has no head any more.
    Request {
        /// The stream id.
        stream: u32,
    },
    /// The client reset a stream (RST_STREAM) before its response was complete; it is gone.
    Reset {
        /// The stream id.
        stream: u32,
        /// The RST_STREAM error code.
        code: u32,
    },
    /// A stream opened beyond SETTINGS_MAX_CONCURRENT_STREAMS was refused (RST_STREAM
    /// REFUSED_STREAM): the client may retry it, nothing of it was processed.
    Refused {
        /// The stream id.
        stream: u32,
    },
    /// A stream broke the protocol (a malformed request, a frame its state forbids, its flow
    /// control) and was reset with the code; if a request was pending on it, it is gone.
    StreamError {
        /// The stream id.
        stream: u32,
        /// The RST_STREAM error code sent.
        code: u32,
        /// What was wrong.
        reason: &'static str,
    },
    /// The client sent GOAWAY: it opens no more streams.
    GoAway {
        /// Its error code (NO_ERROR for a graceful close).
        code: u32,
    },
}

/// A request's header fields, pseudo-headers first, as decoded; its buffers are reused from
/// stream to stream.
#[derive(Debug, Default, Clone)]
pub struct RequestHead {
    bytes: Vec<u8>,
    /// Per field: where its name starts, where its value starts, where it ends.
    fields: Vec<(u32, u32, u32)>,
}

impl RequestHead {
    fn clear(&mut self) {
        self.bytes.clear();
        self.fields.clear();
    }

    fn push(&mut self, name: &[u8], value: &[u8]) {
        let start = self.bytes.len() as u32;
        self.bytes.extend_from_slice(name);
        let mid = self.bytes.len() as u32;
        self.bytes.extend_from_slice(value);
        self.fields.push((start, mid, self.bytes.len() as u32));
    }

    /// Every field as (name, value), in the order received.
    pub fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.fields.iter().map(|&(a, b, c)| {
            (
                &self.bytes[a as usize..b as usize],
                &self.bytes[b as usize..c as usize],
            )
        })
    }

    /// The value of the first field called `name` (lower case), if any.
    pub fn get(&self, name: &[u8]) -> Option<&[u8]> {
        self.fields().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// `:method`.
    pub fn method(&self) -> &[u8] {
        self.get(b":method").unwrap_or_default()
    }

    /// `:path` (empty for CONNECT).
    pub fn path(&self) -> &[u8] {
        self.get(b":path").unwrap_or_default()
    }

    /// `:authority` (empty when the client sent none).
    pub fn authority(&self) -> &[u8] {
        self.get(b":authority").unwrap_or_default()
    }
}

/// One server stream.
#[derive(Debug)]
pub struct Stream<T> {
    flow: Flow,
    /// END_STREAM received: the request is complete (half-closed remote).
    ended: bool,
    /// Response HEADERS sent; the body is being sent.
    responding: bool,
    /// The request's content-length, checked against its DATA (8.1.1).
    content_length: Option<u64>,
    received: u64,
    head: RequestHead,
    body_len: u64,
    body_sent: u64,
    tag: Option<T>,
    /// An open-ended response ([`ServerConn::respond_open`]): its queued bytes and trailers.
    open: Option<Box<OpenBody>>,
}

/// The body of an open-ended response: bytes queued by [`ServerConn::send_data`] and not yet
/// sent, and the trailers that end it once they are.
#[derive(Debug, Default)]
struct OpenBody {
    buf: Vec<u8>,
    sent: usize,
    trailers: Option<Vec<u8>>,
}

impl<T> StreamWindow for Stream<T> {
    fn flow(&self) -> &Flow {
        &self.flow
    }
    fn flow_mut(&mut self) -> &mut Flow {
        &mut self.flow
    }
}

/// Streams we reset lately, whose late frames are ignored rather than called errors.
const RECENT: usize = 16;

/// The server's side of a connection (see the module documentation). `T` is the caller's
/// description of a response body, handed back to [`ServerConn::pump`]'s closure.
#[derive(Debug)]
pub struct Server<T: Copy> {
    settings: ServerSettings,
    spare: Vec<RequestHead>,
    /// Responses with body bytes left to send.
    sending: usize,
    /// Open-ended responses ([`ServerConn::respond_open`]) not finished yet.
    open_bodies: usize,
    /// The highest stream id the client opened.
    last_id: u32,
    recent: [u32; RECENT],
    recent_at: usize,
    /// A dynamic table size update owed at the start of the next header block.
    table_update: Option<usize>,
    table_max: usize,
    /// Our GOAWAY's last-stream-id once sent.
    goaway_last: Option<u32>,
    peer_goaway: Option<u32>,
    _body: std::marker::PhantomData<T>,
}

/// One HTTP/2 server connection (see the module documentation). `T` is the caller's
/// description of a response body, handed back to [`ServerConn::pump`]'s closure.
pub type ServerConn<T> = Connection<Server<T>>;

impl<T: Copy> Connection<Server<T>> {
    /// A new connection with these settings; our SETTINGS (and the WINDOW_UPDATE that raises
    /// the connection window) are queued in [`ServerConn::out`] already.
    pub fn new(settings: ServerSettings) -> ServerConn<T> {
        ServerConn::with_buffer(settings, Vec::with_capacity(4096))
    }

    /// [`ServerConn::new`] writing into `out` (cleared), a buffer the caller keeps in a pool;
    /// [`ServerConn::into_buffer`] gives it back.
    pub fn with_buffer(settings: ServerSettings, mut out: Vec<u8>) -> ServerConn<T> {
        out.clear();
        let mut pairs = vec![
            (
                frame::SETTINGS_MAX_CONCURRENT_STREAMS,
                settings.max_concurrent,
            ),
            (
                frame::SETTINGS_MAX_HEADER_LIST_SIZE,
                settings.max_header_list,
            ),
        ];
        if settings.stream_window != frame::DEFAULT_WINDOW {
            pairs.push((frame::SETTINGS_INITIAL_WINDOW_SIZE, settings.stream_window));
        }
        frame::settings(&mut out, &pairs);
        let conn_window = settings
            .conn_window
            .clamp(frame::DEFAULT_WINDOW, frame::MAX_WINDOW);
        if conn_window > frame::DEFAULT_WINDOW {
            frame::window_update(&mut out, 0, conn_window - frame::DEFAULT_WINDOW);
        }
        let role = Server {
            settings: ServerSettings {
                conn_window,
                ..settings
            },
            spare: Vec::new(),
            sending: 0,
            open_bodies: 0,
            last_id: 0,
            recent: [0; RECENT],
            recent_at: 0,
            table_update: None,
            table_max: hpack::TABLE_SIZE,
            goaway_last: None,
            peer_goaway: None,
            _body: std::marker::PhantomData,
        };
        Connection::with_role(role, out, true, conn_window)
    }

    /// The output buffer, for the caller's pool.
    pub fn into_buffer(self) -> Vec<u8> {
        self.out
    }

    /// The highest stream id the client opened (0 before the first).
    pub fn last_stream(&self) -> u32 {
        self.role.last_id
    }

    /// Our GOAWAY went out (graceful or not).
    pub fn goaway_sent(&self) -> bool {
        self.role.goaway_last.is_some()
    }

    /// The client's GOAWAY code, once it sent one.
    pub fn peer_goaway(&self) -> Option<u32> {
        self.role.peer_goaway
    }

    /// True when nothing more will happen on the connection: dead, or going away (our GOAWAY
    /// or the client's) with every stream finished. The caller closes it once `out` is sent.
    pub fn finished(&self) -> bool {
        self.dead
            || ((self.role.goaway_last.is_some() || self.role.peer_goaway.is_some())
                && self.streams.is_empty())
    }

    /// The head of the request on `stream`, while the stream is open.
    pub fn head(&self, stream: u32) -> Option<&RequestHead> {
        self.stream_index(stream).map(|k| &self.streams[k].head)
    }

    /// Starts a graceful shutdown (6.8): GOAWAY(NO_ERROR) with the last stream id opened so
    /// far; those streams are still answered, later ones are ignored. False if a GOAWAY was
    /// already sent.
    pub fn goaway(&mut self) -> bool {
        if self.role.goaway_last.is_some() {
            return false;
        }
        self.role.goaway_last = Some(self.role.last_id);
        frame::goaway(&mut self.out, self.role.last_id, code::NO_ERROR);
        true
    }

    /// Queues the response to the complete request on `stream`: `block` is its header block
    /// (without a dynamic table size update: one owed is prepended here), split into
    /// CONTINUATIONs if the client's frame size needs it; `body_len` bytes of body follow,
    /// described by `tag` and written by [`ServerConn::pump`]. False when the stream is not
    /// awaiting a response (reset meanwhile, or the connection is dead).
    pub fn respond(&mut self, stream: u32, block: &[u8], body_len: u64, tag: T) -> bool {
        if self.dead {
            return false;
        }
        let Some(k) = self.stream_index(stream) else {
            return false;
        };
        if !self.streams[k].ended || self.streams[k].responding {
            return false;
        }
        let end = body_len == 0;
        self.header_block_out(stream, block, end);
        if end {
            self.close(k);
        } else {
            let s = &mut self.streams[k];
            s.responding = true;
            s.body_len = body_len;
            s.body_sent = 0;
            s.tag = Some(tag);
            self.role.sending += 1;
        }
        true
    }

    /// True while some response body waits to be sent (for window, or for [`ServerConn::pump`]),
    /// an open-ended one's queued bytes and trailers included.
    pub fn sending(&self) -> bool {
        self.role.sending > 0
            || (self.role.open_bodies > 0
                && self.streams.iter().any(|s| {
                    s.open
                        .as_ref()
                        .is_some_and(|o| o.sent < o.buf.len() || o.trailers.is_some())
                }))
    }

    /// Starts an open-ended response to the complete request on `stream` (gRPC's shape): its
    /// HEADERS without END_STREAM now, its body in pieces given to [`ServerConn::send_data`],
    /// and trailers that end it given to [`ServerConn::send_trailers`]; the pieces go out as
    /// [`ServerConn::pump`] and the client's windows allow. False when the stream is not
    /// awaiting a response.
    pub fn respond_open(&mut self, stream: u32, block: &[u8]) -> bool {
        if self.dead {
            return false;
        }
        let Some(k) = self.stream_index(stream) else {
            return false;
        };
        if !self.streams[k].ended || self.streams[k].responding {
            return false;
        }
        self.header_block_out(stream, block, false);
        let s = &mut self.streams[k];
        s.responding = true;
        s.open = Some(Box::default());
        self.role.open_bodies += 1;
        true
    }

    /// Queues `data` on the open-ended response of `stream`. False when the stream is gone
    /// (the client reset it, the connection died) or was not opened with
    /// [`ServerConn::respond_open`], or its trailers are already queued.
    pub fn send_data(&mut self, stream: u32, data: &[u8]) -> bool {
        let Some(o) = self.open_body(stream) else {
            return false;
        };
        if o.trailers.is_some() {
            return false;
        }
        if o.sent == o.buf.len() {
            o.buf.clear();
            o.sent = 0;
        }
        o.buf.extend_from_slice(data);
        true
    }

    /// Ends the open-ended response of `stream` with the trailer block `block` (HEADERS with
    /// END_STREAM), sent once its queued data are. False as for [`ServerConn::send_data`].
    pub fn send_trailers(&mut self, stream: u32, block: &[u8]) -> bool {
        let Some(o) = self.open_body(stream) else {
            return false;
        };
        if o.trailers.is_some() {
            return false;
        }
        o.trailers = Some(block.to_vec());
        true
    }

    /// Bytes queued on the open-ended response of `stream` and not yet sent (a client that
    /// does not read, or a window that stays shut, makes them grow).
    pub fn queued(&self, stream: u32) -> Option<usize> {
        let k = self.stream_index(stream)?;
        let o = self.streams[k].open.as_ref()?;
        Some(o.buf.len() - o.sent)
    }

    /// The open-ended body of `stream`, while the connection lives.
    fn open_body(&mut self, stream: u32) -> Option<&mut OpenBody> {
        if self.dead {
            return None;
        }
        let k = self.stream_index(stream)?;
        self.streams[k].open.as_deref_mut()
    }

    /// Queues a response header block on `stream` (a dynamic table size update owed goes
    /// first), with END_STREAM when `end`.
    fn header_block_out(&mut self, stream: u32, block: &[u8], end: bool) {
        match self.role.table_update.take() {
            None => frame::header_frames(&mut self.out, stream, block, end, self.peer.max_frame),
            Some(size) => {
                let mut b = Vec::with_capacity(block.len() + 4);
                hpack::size_update(&mut b, size);
                b.extend_from_slice(block);
                frame::header_frames(&mut self.out, stream, &b, end, self.peer.max_frame);
            }
        }
    }

    /// Writes response bodies as DATA frames while the windows allow and `out` is shorter than
    /// `limit`; `fill(tag, offset, n, out)` must append exactly `n` body bytes from `offset`.
    /// A stream whose body is all sent is closed.
    pub fn pump(&mut self, limit: usize, mut fill: impl FnMut(T, u64, usize, &mut Vec<u8>)) {
        if self.dead || (self.role.sending == 0 && self.role.open_bodies == 0) {
            return;
        }
        let mut k = 0;
        while k < self.streams.len() && self.out.len() < limit {
            if self.streams[k].open.is_some() {
                if self.pump_open(k, limit) {
                    self.close(k);
                } else {
                    k += 1;
                }
                continue;
            }
            if self.conn_send_window <= 0 {
                k += 1;
                continue;
            }
            let s = &mut self.streams[k];
            let Some(tag) = s.tag.filter(|_| s.responding) else {
                k += 1;
                continue;
            };
            while s.body_sent < s.body_len && self.out.len() < limit {
                let window = s.flow.send.min(self.conn_send_window);
                if window <= 0 {
                    break;
                }
                let n = (s.body_len - s.body_sent)
                    .min(window as u64)
                    .min(self.peer.max_frame as u64)
                    .min((limit - self.out.len()) as u64) as usize;
                let end = s.body_sent + n as u64 == s.body_len;
                frame::head(
                    &mut self.out,
                    n,
                    frame::DATA,
                    if end { frame::END_STREAM } else { 0 },
                    s.flow.id,
                );
                let before = self.out.len();
                fill(tag, s.body_sent, n, &mut self.out);
                debug_assert_eq!(self.out.len() - before, n, "fill wrote the wrong length");
                self.out.resize(before + n, 0);
                s.body_sent += n as u64;
                s.flow.send -= n as i64;
                self.conn_send_window -= n as i64;
            }
            if s.body_sent == s.body_len {
                self.role.sending -= 1;
                self.close(k);
            } else {
                k += 1;
            }
        }
    }

    /// Writes what the open-ended response of stream `k` has queued, as far as the windows
    /// and `limit` allow, then its trailers once nothing is left; true when they went out
    /// (the stream is done).
    fn pump_open(&mut self, k: usize, limit: usize) -> bool {
        let max_frame = self.peer.max_frame as usize;
        let s = &mut self.streams[k];
        let id = s.flow.id;
        let Some(o) = s.open.as_deref_mut() else {
            return false;
        };
        while o.sent < o.buf.len() && self.out.len() < limit {
            let window = s.flow.send.min(self.conn_send_window);
            if window <= 0 {
                return false;
            }
            let n = (o.buf.len() - o.sent)
                .min(window as usize)
                .min(max_frame)
                .min(limit - self.out.len());
            frame::head(&mut self.out, n, frame::DATA, 0, id);
            self.out.extend_from_slice(&o.buf[o.sent..o.sent + n]);
            o.sent += n;
            s.flow.send -= n as i64;
            self.conn_send_window -= n as i64;
        }
        if o.sent < o.buf.len() {
            return false;
        }
        let Some(trailers) = o.trailers.take() else {
            return false;
        };
        self.header_block_out(id, &trailers, true);
        true
    }

    /// Removes stream `k` (its request head goes back to the pool).
    fn close(&mut self, k: usize) {
        let mut s = self.streams.swap_remove(k);
        if s.responding && s.body_sent < s.body_len {
            self.role.sending -= 1;
        }
        if s.open.take().is_some() {
            self.role.open_bodies -= 1;
        }
        s.head.clear();
        self.role.spare.push(s.head);
    }

    /// Queues RST_STREAM and remembers the id, so the client's frames already on their way
    /// are ignored.
    fn reset(&mut self, id: u32, c: u32) {
        frame::rst_stream(&mut self.out, id, c);
        self.role.remember(id);
    }

    /// The request on stream `k` ended (END_STREAM): it is complete unless its body fell short
    /// of its content-length.
    fn end_request(&mut self, k: usize) -> Result<(), ConnError> {
        let s = &mut self.streams[k];
        s.ended = true;
        if s.content_length.is_some_and(|cl| s.received != cl) {
            Server::stream_error(
                self,
                k,
                code::PROTOCOL_ERROR,
                "a body shorter than its content-length",
            );
            return Ok(());
        }
        self.events.push(ServerEvent::Request { stream: s.flow.id });
        Ok(())
    }
}

impl<T: Copy> Server<T> {
    /// Notes a stream we dropped, whose late frames are to be ignored.
    fn remember(&mut self, id: u32) {
        self.recent[self.recent_at] = id;
        self.recent_at = (self.recent_at + 1) % RECENT;
    }

    fn recently_reset(&self, id: u32) -> bool {
        self.recent.contains(&id)
    }
}

impl<T: Copy> crate::conn::sealed::Sealed for Server<T> {}

impl<T: Copy> Peer for Server<T> {
    type Event = ServerEvent;
    type Stream = Stream<T>;
    const NOT_SETTINGS_FIRST: &'static str = "the client's first frame was not SETTINGS";
    const PUSH_PROMISE: &'static str = "PUSH_PROMISE from a client";

    fn max_header_block(c: &ServerConn<T>) -> usize {
        c.role.settings.max_header_block
    }

    fn idle(c: &ServerConn<T>, id: u32) -> bool {
        id > c.role.last_id
    }

    fn check_headers(_: &ServerConn<T>, id: u32) -> Result<(), ConnError> {
        if id % 2 == 0 {
            return Err(err(code::PROTOCOL_ERROR, "HEADERS on an even stream id"));
        }
        Ok(())
    }

    /// A complete header block: decoded always (the HPACK context is the connection's), then
    /// a new request, a request's trailers, or a frame on a stream that cannot take one.
    fn header_block(c: &mut ServerConn<T>, pend: Pending, block: &[u8]) -> Result<(), ConnError> {
        let id = pend.stream;
        let limit = c.role.settings.max_header_list;
        if let Some(k) = c.stream_index(id) {
            // Trailers: decoded, checked, and dropped.
            let mut scratch = c.role.spare.pop().unwrap_or_default();
            let r = decode(&mut c.decoder, block, &mut scratch, true, limit);
            scratch.clear();
            c.role.spare.push(scratch);
            let bad = r?;
            if c.streams[k].ended {
                Self::stream_error(c, k, code::STREAM_CLOSED, "HEADERS after END_STREAM");
            } else if let Some(reason) = bad.reason {
                Self::stream_error(c, k, code::PROTOCOL_ERROR, reason);
            } else if !pend.end_stream {
                Self::stream_error(c, k, code::PROTOCOL_ERROR, "trailers without END_STREAM");
            } else if pend.self_dependent {
                Self::stream_error(c, k, code::PROTOCOL_ERROR, "a stream depending on itself");
            } else {
                return c.end_request(k);
            }
            return Ok(());
        }
        let mut head = c.role.spare.pop().unwrap_or_default();
        let fields = match decode(&mut c.decoder, block, &mut head, false, limit) {
            Ok(f) => f,
            Err(e) => {
                head.clear();
                c.role.spare.push(head);
                return Err(e);
            }
        };
        if id <= c.role.last_id {
            head.clear();
            c.role.spare.push(head);
            if c.role.recently_reset(id) {
                return Ok(());
            }
            return Err(err(code::STREAM_CLOSED, "HEADERS on a closed stream"));
        }
        c.role.last_id = id;
        let refuse = if c.role.goaway_last.is_some_and(|last| id > last) {
            // After our GOAWAY: ignored, the client knows from the last-stream-id (6.8).
            None
        } else if c.streams.len() >= c.role.settings.max_concurrent as usize {
            Some((code::REFUSED_STREAM, ""))
        } else if let Some(reason) = fields.reason {
            Some((code::PROTOCOL_ERROR, reason))
        } else if pend.self_dependent {
            Some((code::PROTOCOL_ERROR, "a stream depending on itself"))
        } else {
            c.streams.push(Stream {
                flow: Flow::new(id, c.peer.initial_window, c.role.settings.stream_window),
                ended: false,
                responding: false,
                content_length: fields.content_length,
                received: 0,
                head,
                body_len: 0,
                body_sent: 0,
                tag: None,
                open: None,
            });
            if pend.end_stream {
                let k = c.streams.len() - 1;
                return c.end_request(k);
            }
            return Ok(());
        };
        head.clear();
        c.role.spare.push(head);
        match refuse {
            None => c.role.remember(id),
            Some((code::REFUSED_STREAM, _)) => {
                c.reset(id, code::REFUSED_STREAM);
                c.events.push(ServerEvent::Refused { stream: id });
            }
            Some((code, reason)) => {
                c.reset(id, code);
                c.events.push(ServerEvent::StreamError {
                    stream: id,
                    code,
                    reason,
                });
            }
        }
        Ok(())
    }

    fn stream_recv_window(c: &ServerConn<T>) -> u32 {
        c.role.settings.stream_window
    }

    fn refuse_data(c: &ServerConn<T>, k: usize) -> Option<(u32, &'static str)> {
        c.streams[k]
            .ended
            .then_some((code::STREAM_CLOSED, "DATA after END_STREAM"))
    }

    /// DATA of a request: taken as it comes (the bytes are discarded) and checked against its
    /// content-length; END_STREAM completes the request.
    fn data(c: &mut ServerConn<T>, k: usize, h: Head, body: &[u8]) -> Result<bool, ConnError> {
        let s = &mut c.streams[k];
        s.received += body.len() as u64;
        if s.content_length.is_some_and(|cl| s.received > cl) {
            Self::stream_error(c, k, code::PROTOCOL_ERROR, "DATA beyond the content-length");
            return Ok(false);
        }
        if h.flags & frame::END_STREAM != 0 {
            c.end_request(k)?;
            return Ok(false);
        }
        Ok(true)
    }

    /// DATA on a stream already closed: answered with RST_STREAM(STREAM_CLOSED) once, unless we
    /// reset it lately (its frames were on their way).
    fn data_closed(c: &mut ServerConn<T>, id: u32) {
        if !c.role.recently_reset(id) {
            c.reset(id, code::STREAM_CLOSED);
        }
    }

    fn reset_by_peer(c: &mut ServerConn<T>, k: usize, code: u32) {
        let stream = c.streams[k].flow.id;
        c.close(k);
        c.events.push(ServerEvent::Reset { stream, code });
    }

    /// The client opens no more streams; the open ones are still answered.
    fn goaway(c: &mut ServerConn<T>, _last: u32, code: u32) {
        if c.role.peer_goaway.is_none() {
            c.events.push(ServerEvent::GoAway { code });
        }
        c.role.peer_goaway = Some(code);
    }

    /// SETTINGS_HEADER_TABLE_SIZE lowered: our encoder never inserts, but the client's decoder
    /// is owed the news in the next response's block.
    fn setting(c: &mut ServerConn<T>, id: u16, v: u32) {
        if id == frame::SETTINGS_HEADER_TABLE_SIZE && (v as usize) < c.role.table_max {
            c.role.table_max = v as usize;
            c.role.table_update = Some(v as usize);
        }
    }

    /// Response bodies wait for [`ServerConn::pump`], which the caller drives.
    fn window_opened(_: &mut ServerConn<T>) {}

    fn settings_acked(_: &mut ServerConn<T>) {}

    /// Resets stream `k` with `code` (a stream error of ours) and reports it.
    fn stream_error(c: &mut ServerConn<T>, k: usize, code: u32, reason: &'static str) {
        let stream = c.streams[k].flow.id;
        c.close(k);
        c.reset(stream, code);
        c.events.push(ServerEvent::StreamError {
            stream,
            code,
            reason,
        });
    }

    /// The last stream opened, or the last-stream-id of a GOAWAY already sent (it never grows
    /// from one GOAWAY to the next, 6.8).
    fn last_stream_for_goaway(c: &mut ServerConn<T>) -> u32 {
        let last = c.role.goaway_last.unwrap_or(c.role.last_id);
        c.role.goaway_last = Some(last);
        last
    }
}
