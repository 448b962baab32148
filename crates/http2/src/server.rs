//! One server HTTP/2 connection as a state machine without I/O, the counterpart of
//! [`crate::client`]: the caller feeds it whatever bytes the socket returned in any split
//! (the client's connection preface first), takes the [`ServerEvent`]s it produced, answers each
//! complete request with [`ServerConn::respond`] whenever it likes (so a slow stream never holds
//! up a fast one), lets [`ServerConn::pump`] write response bodies as the client's flow-control
//! windows allow, and sends what was queued in [`ServerConn::out`].
//!
//! What it keeps: the client's SETTINGS (frame size, initial window, header table size), both
//! directions' flow-control windows (request bodies are taken as they come and their windows
//! given back with WINDOW_UPDATE; response bodies wait for window), the HPACK decoder, the open
//! streams with their request heads, and GOAWAY both ways. Streams above
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

use crate::frame::{self, code, err, unpad, ConnError, Head, HEAD_LEN};
use crate::hpack;

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

#[derive(Debug)]
struct Stream<T> {
    id: u32,
    /// END_STREAM received: the request is complete (half-closed remote).
    ended: bool,
    /// Response HEADERS sent; the body is being sent.
    responding: bool,
    recv_window: i64,
    recv_unacked: u32,
    send_window: i64,
    /// The request's content-length, checked against its DATA (8.1.1).
    content_length: Option<u64>,
    received: u64,
    head: RequestHead,
    body_len: u64,
    body_sent: u64,
    tag: Option<T>,
}

/// A header block being collected across CONTINUATION frames.
#[derive(Debug)]
struct Pending {
    stream: u32,
    end_stream: bool,
    /// The HEADERS frame made the stream depend on itself (5.3.1).
    self_dependent: bool,
}

/// Streams we reset lately, whose late frames are ignored rather than called errors.
const RECENT: usize = 16;

/// One HTTP/2 server connection (see the module documentation). `T` is the caller's
/// description of a response body, handed back to [`ServerConn::pump`]'s closure.
#[derive(Debug)]
pub struct ServerConn<T: Copy> {
    /// Bytes to write to the socket, in order; the caller removes what it sent.
    pub out: Vec<u8>,
    /// What happened since the caller last drained it.
    pub events: Vec<ServerEvent>,
    settings: ServerSettings,
    preface_left: usize,
    rbuf: Vec<u8>,
    decoder: hpack::Decoder,
    block: Vec<u8>,
    pending: Option<Pending>,
    streams: Vec<Stream<T>>,
    spare: Vec<RequestHead>,
    /// Responses with body bytes left to send.
    sending: usize,
    /// The highest stream id the client opened.
    last_id: u32,
    recent: [u32; RECENT],
    recent_at: usize,
    got_settings: bool,
    settings_acked: bool,
    peer_max_frame: u32,
    peer_initial_window: u32,
    /// A dynamic table size update owed at the start of the next header block.
    table_update: Option<usize>,
    table_max: usize,
    conn_send_window: i64,
    conn_recv_window: i64,
    conn_recv_unacked: u32,
    /// Our GOAWAY's last-stream-id once sent.
    goaway_last: Option<u32>,
    peer_goaway: Option<u32>,
    dead: bool,
}

impl<T: Copy> ServerConn<T> {
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
        ServerConn {
            out,
            events: Vec::with_capacity(64),
            settings: ServerSettings {
                conn_window,
                ..settings
            },
            preface_left: frame::PREFACE.len(),
            rbuf: Vec::new(),
            decoder: hpack::Decoder::new(),
            block: Vec::new(),
            pending: None,
            streams: Vec::new(),
            spare: Vec::new(),
            sending: 0,
            last_id: 0,
            recent: [0; RECENT],
            recent_at: 0,
            got_settings: false,
            settings_acked: false,
            peer_max_frame: frame::DEFAULT_MAX_FRAME,
            peer_initial_window: frame::DEFAULT_WINDOW,
            table_update: None,
            table_max: hpack::TABLE_SIZE,
            conn_send_window: frame::DEFAULT_WINDOW as i64,
            conn_recv_window: conn_window as i64,
            conn_recv_unacked: 0,
            goaway_last: None,
            peer_goaway: None,
            dead: false,
        }
    }

    /// The output buffer, for the caller's pool.
    pub fn into_buffer(self) -> Vec<u8> {
        self.out
    }

    /// Streams open now: requests being received, awaiting their response, or sending it.
    #[inline]
    pub fn active(&self) -> usize {
        self.streams.len()
    }

    /// The highest stream id the client opened (0 before the first).
    pub fn last_stream(&self) -> u32 {
        self.last_id
    }

    /// The largest frame the client accepts (its SETTINGS_MAX_FRAME_SIZE).
    pub fn peer_max_frame(&self) -> u32 {
        self.peer_max_frame
    }

    /// The client acknowledged our SETTINGS.
    pub fn settings_acked(&self) -> bool {
        self.settings_acked
    }

    /// A connection error happened (ours or the caller's [`ServerConn::fail`]).
    pub fn is_dead(&self) -> bool {
        self.dead
    }

    /// Our GOAWAY went out (graceful or not).
    pub fn goaway_sent(&self) -> bool {
        self.goaway_last.is_some()
    }

    /// The client's GOAWAY code, once it sent one.
    pub fn peer_goaway(&self) -> Option<u32> {
        self.peer_goaway
    }

    /// True when nothing more will happen on the connection: dead, or going away (our GOAWAY
    /// or the client's) with every stream finished. The caller closes it once `out` is sent.
    pub fn finished(&self) -> bool {
        self.dead
            || ((self.goaway_last.is_some() || self.peer_goaway.is_some())
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
        if self.goaway_last.is_some() {
            return false;
        }
        self.goaway_last = Some(self.last_id);
        frame::goaway(&mut self.out, self.last_id, code::NO_ERROR);
        true
    }

    /// Ends the connection with an error of ours: GOAWAY with `code` is queued (unless one
    /// with an error went out already) and nothing more is accepted or sent.
    pub fn fail(&mut self, code: u32) {
        if !self.dead {
            self.dead = true;
            // The last-stream-id never grows from one GOAWAY to the next (6.8).
            let last = self.goaway_last.unwrap_or(self.last_id);
            self.goaway_last = Some(last);
            frame::goaway(&mut self.out, last, code);
        }
    }

    /// Takes in bytes read from the socket. Complete frames are handled at once; a partial one
    /// is kept for the next call. On a connection error the GOAWAY is queued and the error
    /// returned; requests still open then get no response.
    pub fn feed(&mut self, mut data: &[u8]) -> Result<(), ConnError> {
        if self.dead {
            return Ok(());
        }
        if self.preface_left > 0 {
            let at = frame::PREFACE.len() - self.preface_left;
            let n = self.preface_left.min(data.len());
            if data[..n] != frame::PREFACE[at..at + n] {
                let e = err(code::PROTOCOL_ERROR, "not the HTTP/2 connection preface");
                self.fail(e.code);
                return Err(e);
            }
            self.preface_left -= n;
            data = &data[n..];
        }
        let r = if self.rbuf.is_empty() {
            self.frames(data).map(|used| {
                self.rbuf.extend_from_slice(&data[used..]);
            })
        } else {
            let mut buf = std::mem::take(&mut self.rbuf);
            buf.extend_from_slice(data);
            let r = self.frames(&buf);
            if let Ok(used) = r {
                buf.drain(..used);
                self.rbuf = buf;
            }
            r.map(|_| ())
        };
        if let Err(e) = r {
            self.fail(e.code);
            self.rbuf = Vec::new();
            return Err(e);
        }
        if self.conn_recv_unacked >= self.settings.conn_window / 2 {
            frame::window_update(&mut self.out, 0, self.conn_recv_unacked);
            self.conn_recv_window += self.conn_recv_unacked as i64;
            self.conn_recv_unacked = 0;
        }
        Ok(())
    }

    /// Bytes of an incomplete frame held over (a client that stops mid-frame leaves some).
    pub fn buffered(&self) -> usize {
        self.rbuf.len()
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
        match self.table_update.take() {
            None => frame::header_frames(&mut self.out, stream, block, end, self.peer_max_frame),
            Some(size) => {
                let mut b = Vec::with_capacity(block.len() + 4);
                hpack::size_update(&mut b, size);
                b.extend_from_slice(block);
                frame::header_frames(&mut self.out, stream, &b, end, self.peer_max_frame);
            }
        }
        if end {
            self.close(k);
        } else {
            let s = &mut self.streams[k];
            s.responding = true;
            s.body_len = body_len;
            s.body_sent = 0;
            s.tag = Some(tag);
            self.sending += 1;
        }
        true
    }

    /// True while some response body waits to be sent (for window, or for [`ServerConn::pump`]).
    pub fn sending(&self) -> bool {
        self.sending > 0
    }

    /// Writes response bodies as DATA frames while the windows allow and `out` is shorter than
    /// `limit`; `fill(tag, offset, n, out)` must append exactly `n` body bytes from `offset`.
    /// A stream whose body is all sent is closed.
    pub fn pump(&mut self, limit: usize, mut fill: impl FnMut(T, u64, usize, &mut Vec<u8>)) {
        if self.dead || self.sending == 0 {
            return;
        }
        let mut k = 0;
        while k < self.streams.len() && self.out.len() < limit && self.conn_send_window > 0 {
            let s = &mut self.streams[k];
            let Some(tag) = s.tag.filter(|_| s.responding) else {
                k += 1;
                continue;
            };
            while s.body_sent < s.body_len && self.out.len() < limit {
                let window = s.send_window.min(self.conn_send_window);
                if window <= 0 {
                    break;
                }
                let n = (s.body_len - s.body_sent)
                    .min(window as u64)
                    .min(self.peer_max_frame as u64)
                    .min((limit - self.out.len()) as u64) as usize;
                let end = s.body_sent + n as u64 == s.body_len;
                frame::head(
                    &mut self.out,
                    n,
                    frame::DATA,
                    if end { frame::END_STREAM } else { 0 },
                    s.id,
                );
                let before = self.out.len();
                fill(tag, s.body_sent, n, &mut self.out);
                debug_assert_eq!(self.out.len() - before, n, "fill wrote the wrong length");
                self.out.resize(before + n, 0);
                s.body_sent += n as u64;
                s.send_window -= n as i64;
                self.conn_send_window -= n as i64;
            }
            if s.body_sent == s.body_len {
                self.sending -= 1;
                self.close(k);
            } else {
                k += 1;
            }
        }
    }

    /// Removes stream `k` (its request head goes back to the pool).
    fn close(&mut self, k: usize) {
        let mut s = self.streams.swap_remove(k);
        if s.responding && s.body_sent < s.body_len {
            self.sending -= 1;
        }
        s.head.clear();
        self.spare.push(s.head);
    }

    /// Resets stream `k` with `c` (a stream error of ours) and reports it.
    fn stream_error(&mut self, k: usize, c: u32, reason: &'static str) {
        let id = self.streams[k].id;
        self.close(k);
        self.reset(id, c);
        self.events.push(ServerEvent::StreamError {
            stream: id,
            code: c,
            reason,
        });
    }

    /// Queues RST_STREAM and remembers the id, so the client's frames already on their way
    /// are ignored.
    fn reset(&mut self, id: u32, c: u32) {
        frame::rst_stream(&mut self.out, id, c);
        self.remember(id);
    }

    /// Notes a stream we dropped, whose late frames are to be ignored.
    fn remember(&mut self, id: u32) {
        self.recent[self.recent_at] = id;
        self.recent_at = (self.recent_at + 1) % RECENT;
    }

    fn recently_reset(&self, id: u32) -> bool {
        self.recent.contains(&id)
    }

    fn stream_index(&self, id: u32) -> Option<usize> {
        self.streams.iter().position(|s| s.id == id)
    }

    /// Handles every complete frame in `buf`; returns the bytes used.
    fn frames(&mut self, buf: &[u8]) -> Result<usize, ConnError> {
        let mut pos = 0;
        while let Some(h) = Head::parse(&buf[pos..]) {
            if h.len > frame::DEFAULT_MAX_FRAME {
                return Err(err(
                    code::FRAME_SIZE_ERROR,
                    "a frame larger than SETTINGS_MAX_FRAME_SIZE",
                ));
            }
            let end = pos + HEAD_LEN + h.len as usize;
            if buf.len() < end {
                break;
            }
            self.frame(h, &buf[pos + HEAD_LEN..end])?;
            pos = end;
        }
        Ok(pos)
    }

    fn frame(&mut self, h: Head, p: &[u8]) -> Result<(), ConnError> {
        frame::order(
            h,
            self.got_settings,
            self.pending.as_ref().map(|p| p.stream),
            "the client's first frame was not SETTINGS",
        )?;
        match h.kind {
            frame::DATA => self.data(h, p),
            frame::HEADERS => self.headers(h, p),
            frame::CONTINUATION => self.continuation(h, p),
            frame::PRIORITY => self.priority(h, p),
            frame::RST_STREAM => self.rst_stream(h, p),
            frame::SETTINGS => self.settings(h, p),
            frame::PUSH_PROMISE => Err(err(code::PROTOCOL_ERROR, "PUSH_PROMISE from a client")),
            frame::PING => frame::ping(&mut self.out, h, p),
            frame::GOAWAY => {
                let (_, c) = frame::goaway_fields(h, p)?;
                if self.peer_goaway.is_none() {
                    self.events.push(ServerEvent::GoAway { code: c });
                }
                self.peer_goaway = Some(c);
                Ok(())
            }
            frame::WINDOW_UPDATE => self.window_update(h, p),
            // Unknown frame types are ignored (4.1).
            _ => Ok(()),
        }
    }

    fn settings(&mut self, h: Head, p: &[u8]) -> Result<(), ConnError> {
        if h.flags & frame::ACK != 0 {
            frame::settings_ack_ok(h, p)?;
            self.settings_acked = true;
            return Ok(());
        }
        frame::settings_each(h, p, |id, v| {
            match id {
                frame::SETTINGS_HEADER_TABLE_SIZE if (v as usize) < self.table_max => {
                    // Our encoder never inserts, but the client's decoder is owed the news.
                    self.table_max = v as usize;
                    self.table_update = Some(v as usize);
                }
                frame::SETTINGS_INITIAL_WINDOW_SIZE => {
                    let delta = v as i64 - self.peer_initial_window as i64;
                    self.peer_initial_window = v;
                    for s in &mut self.streams {
                        s.send_window += delta;
                        if s.send_window > frame::MAX_WINDOW as i64 {
                            return Err(err(
                                code::FLOW_CONTROL_ERROR,
                                "a stream window above 2^31-1",
                            ));
                        }
                    }
                }
                frame::SETTINGS_MAX_FRAME_SIZE => self.peer_max_frame = v,
                _ => {}
            }
            Ok(())
        })?;
        self.got_settings = true;
        frame::settings_ack(&mut self.out);
        Ok(())
    }

    fn window_update(&mut self, h: Head, p: &[u8]) -> Result<(), ConnError> {
        let inc = frame::window_increment(p)?;
        if h.stream == 0 {
            if inc == 0 {
                return Err(err(code::PROTOCOL_ERROR, "WINDOW_UPDATE of 0"));
            }
            self.conn_send_window += inc as i64;
            if self.conn_send_window > frame::MAX_WINDOW as i64 {
                return Err(err(
                    code::FLOW_CONTROL_ERROR,
                    "connection window above 2^31-1",
                ));
            }
            return Ok(());
        }
        match self.stream_index(h.stream) {
            Some(k) if inc == 0 => {
                self.stream_error(k, code::PROTOCOL_ERROR, "WINDOW_UPDATE of 0");
            }
            Some(k) => {
                self.streams[k].send_window += inc as i64;
                if self.streams[k].send_window > frame::MAX_WINDOW as i64 {
                    self.stream_error(k, code::FLOW_CONTROL_ERROR, "stream window above 2^31-1");
                }
            }
            None if h.stream > self.last_id => {
                return Err(err(code::PROTOCOL_ERROR, "WINDOW_UPDATE on an idle stream"));
            }
            // A closed stream: the update crossed our END_STREAM or RST_STREAM.
            None => {}
        }
        Ok(())
    }

    fn rst_stream(&mut self, h: Head, p: &[u8]) -> Result<(), ConnError> {
        let c = frame::rst_code(h, p)?;
        match self.stream_index(h.stream) {
            Some(k) => {
                self.close(k);
                self.events.push(ServerEvent::Reset {
                    stream: h.stream,
                    code: c,
                });
                Ok(())
            }
            None if h.stream > self.last_id => {
                Err(err(code::PROTOCOL_ERROR, "RST_STREAM on an idle stream"))
            }
            None => Ok(()),
        }
    }

    fn priority(&mut self, h: Head, p: &[u8]) -> Result<(), ConnError> {
        if h.stream == 0 {
            return Err(err(code::PROTOCOL_ERROR, "PRIORITY on stream 0"));
        }
        let k = self.stream_index(h.stream);
        let (c, reason) = if p.len() != 5 {
            (code::FRAME_SIZE_ERROR, "PRIORITY not 5 bytes")
        } else if u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & frame::MAX_STREAM_ID == h.stream {
            (code::PROTOCOL_ERROR, "a stream depending on itself")
        } else {
            // Priorities are advice; responses go out as they are ready.
            return Ok(());
        };
        match k {
            Some(k) => {
                self.stream_error(k, c, reason);
                Ok(())
            }
            // RST_STREAM must not name an idle stream: the whole connection pays.
            None => Err(err(c, reason)),
        }
    }

    fn data(&mut self, h: Head, p: &[u8]) -> Result<(), ConnError> {
        if h.stream == 0 {
            return Err(err(code::PROTOCOL_ERROR, "DATA on stream 0"));
        }
        let body = unpad(h, p)?.len() as u64;
        // Flow control counts the whole payload, padding included (6.9.1); the bytes are
        // discarded at once, so the connection's window is given back whatever the stream.
        let n = p.len() as u32;
        self.conn_recv_window -= n as i64;
        if self.conn_recv_window < 0 {
            return Err(err(
                code::FLOW_CONTROL_ERROR,
                "DATA beyond the connection window",
            ));
        }
        self.conn_recv_unacked += n;
        let Some(k) = self.stream_index(h.stream) else {
            if h.stream > self.last_id {
                return Err(err(code::PROTOCOL_ERROR, "DATA on an idle stream"));
            }
            if !self.recently_reset(h.stream) {
                self.reset(h.stream, code::STREAM_CLOSED);
            }
            return Ok(());
        };
        let window = self.settings.stream_window;
        let s = &mut self.streams[k];
        if s.ended {
            self.stream_error(k, code::STREAM_CLOSED, "DATA after END_STREAM");
            return Ok(());
        }
        s.recv_window -= n as i64;
        if s.recv_window < 0 {
            self.stream_error(k, code::FLOW_CONTROL_ERROR, "DATA beyond the stream window");
            return Ok(());
        }
        s.received += body;
        if s.content_length.is_some_and(|cl| s.received > cl) {
            self.stream_error(k, code::PROTOCOL_ERROR, "DATA beyond the content-length");
            return Ok(());
        }
        if h.flags & frame::END_STREAM != 0 {
            return self.end_request(k);
        }
        s.recv_unacked += n;
        if s.recv_unacked >= window / 2 {
            frame::window_update(&mut self.out, s.id, s.recv_unacked);
            s.recv_window += s.recv_unacked as i64;
            s.recv_unacked = 0;
        }
        Ok(())
    }

    /// The request on stream `k` ended (END_STREAM): it is complete unless its body fell short
    /// of its content-length.
    fn end_request(&mut self, k: usize) -> Result<(), ConnError> {
        let s = &mut self.streams[k];
        s.ended = true;
        if s.content_length.is_some_and(|cl| s.received != cl) {
            self.stream_error(
                k,
                code::PROTOCOL_ERROR,
                "a body shorter than its content-length",
            );
            return Ok(());
        }
        self.events.push(ServerEvent::Request { stream: s.id });
        Ok(())
    }

    fn headers(&mut self, h: Head, p: &[u8]) -> Result<(), ConnError> {
        if h.stream == 0 {
            return Err(err(code::PROTOCOL_ERROR, "HEADERS on stream 0"));
        }
        if h.stream % 2 == 0 {
            return Err(err(code::PROTOCOL_ERROR, "HEADERS on an even stream id"));
        }
        let mut frag = unpad(h, p)?;
        let mut self_dependent = false;
        if h.flags & frame::PRIORITY_FLAG != 0 {
            if frag.len() < 5 {
                return Err(err(code::FRAME_SIZE_ERROR, "HEADERS priority truncated"));
            }
            self_dependent = u32::from_be_bytes([frag[0], frag[1], frag[2], frag[3]])
                & frame::MAX_STREAM_ID
                == h.stream;
            frag = &frag[5..];
        }
        let pend = Pending {
            stream: h.stream,
            end_stream: h.flags & frame::END_STREAM != 0,
            self_dependent,
        };
        if h.flags & frame::END_HEADERS != 0 {
            return self.header_block(pend, frag);
        }
        if frag.len() > self.settings.max_header_block {
            return Err(err(code::ENHANCE_YOUR_CALM, "a header block too large"));
        }
        self.block.clear();
        self.block.extend_from_slice(frag);
        self.pending = Some(pend);
        Ok(())
    }

    fn continuation(&mut self, h: Head, p: &[u8]) -> Result<(), ConnError> {
        if self.pending.is_none() {
            return Err(err(
                code::PROTOCOL_ERROR,
                "CONTINUATION without a header block",
            ));
        }
        if self.block.len() + p.len() > self.settings.max_header_block {
            return Err(err(code::ENHANCE_YOUR_CALM, "a header block too large"));
        }
        self.block.extend_from_slice(p);
        if h.flags & frame::END_HEADERS != 0 {
            let Some(pend) = self.pending.take() else {
                return Ok(());
            };
            let block = std::mem::take(&mut self.block);
            let r = self.header_block(pend, &block);
            self.block = block;
            return r;
        }
        Ok(())
    }

    /// A complete header block: decoded always (the HPACK context is the connection's), then
    /// a new request, a request's trailers, or a frame on a stream that cannot take one.
    fn header_block(&mut self, pend: Pending, block: &[u8]) -> Result<(), ConnError> {
        let id = pend.stream;
        if let Some(k) = self.stream_index(id) {
            // Trailers: decoded, checked, and dropped.
            let mut scratch = self.spare.pop().unwrap_or_default();
            let limit = self.settings.max_header_list;
            let r = decode(&mut self.decoder, block, &mut scratch, true, limit);
            scratch.clear();
            self.spare.push(scratch);
            let bad = r?;
            if self.streams[k].ended {
                self.stream_error(k, code::STREAM_CLOSED, "HEADERS after END_STREAM");
            } else if let Some(reason) = bad.reason {
                self.stream_error(k, code::PROTOCOL_ERROR, reason);
            } else if !pend.end_stream {
                self.stream_error(k, code::PROTOCOL_ERROR, "trailers without END_STREAM");
            } else if pend.self_dependent {
                self.stream_error(k, code::PROTOCOL_ERROR, "a stream depending on itself");
            } else {
                return self.end_request(k);
            }
            return Ok(());
        }
        let mut head = self.spare.pop().unwrap_or_default();
        let limit = self.settings.max_header_list;
        let r = decode(&mut self.decoder, block, &mut head, false, limit);
        let fields = match r {
            Ok(f) => f,
            Err(e) => {
                head.clear();
                self.spare.push(head);
                return Err(e);
            }
        };
        if id <= self.last_id {
            head.clear();
            self.spare.push(head);
            if self.recently_reset(id) {
                return Ok(());
            }
            return Err(err(code::STREAM_CLOSED, "HEADERS on a closed stream"));
        }
        self.last_id = id;
        let refuse = if self.goaway_last.is_some_and(|last| id > last) {
            // After our GOAWAY: ignored, the client knows from the last-stream-id (6.8).
            None
        } else if self.streams.len() >= self.settings.max_concurrent as usize {
            Some((code::REFUSED_STREAM, ""))
        } else if let Some(reason) = fields.reason {
            Some((code::PROTOCOL_ERROR, reason))
        } else if pend.self_dependent {
            Some((code::PROTOCOL_ERROR, "a stream depending on itself"))
        } else {
            self.streams.push(Stream {
                id,
                ended: false,
                responding: false,
                recv_window: self.settings.stream_window as i64,
                recv_unacked: 0,
                send_window: self.peer_initial_window as i64,
                content_length: fields.content_length,
                received: 0,
                head,
                body_len: 0,
                body_sent: 0,
                tag: None,
            });
            if pend.end_stream {
                let k = self.streams.len() - 1;
                return self.end_request(k);
            }
            return Ok(());
        };
        head.clear();
        self.spare.push(head);
        match refuse {
            None => self.remember(id),
            Some((code::REFUSED_STREAM, _)) => {
                self.reset(id, code::REFUSED_STREAM);
                self.events.push(ServerEvent::Refused { stream: id });
            }
            Some((c, reason)) => {
                self.reset(id, c);
                self.events.push(ServerEvent::StreamError {
                    stream: id,
                    code: c,
                    reason,
                });
            }
        }
        Ok(())
    }
}

/// What decoding a request's header block found besides its fields.
struct Decoded {
    /// Why the request is malformed (8.1.1, 8.2, 8.3), if it is.
    reason: Option<&'static str>,
    content_length: Option<u64>,
}

/// Decodes a request header block (or its trailers) into `head`, checking the rules of RFC 9113
/// 8.2 and 8.3 and the header list `limit`. An HPACK failure is a connection error
/// (COMPRESSION_ERROR); a malformed request is reported in [`Decoded::reason`], and nothing more
/// of it is kept.
fn decode(
    decoder: &mut hpack::Decoder,
    block: &[u8],
    head: &mut RequestHead,
    trailers: bool,
    limit: u32,
) -> Result<Decoded, ConnError> {
    let mut bad: Option<&'static str> = None;
    let mut size = 0usize;
    let mut seen = 0u8;
    let mut regular = false;
    let mut content_length: Option<u64> = None;
    let mut connect = false;
    decoder
        .decode(block, |n, v| {
            if bad.is_some() {
                return;
            }
            size += n.len() + v.len() + 32;
            if size > limit as usize {
                bad = Some("a header list above SETTINGS_MAX_HEADER_LIST_SIZE");
                head.clear();
                return;
            }
            if v.iter().any(|&c| c == 0 || c == b'\r' || c == b'\n') {
                bad = Some("a header value with NUL, CR or LF");
                return;
            }
            if let Some(pseudo) = n.strip_prefix(b":") {
                let bit = match pseudo {
                    b"method" => 1,
                    b"scheme" => 2,
                    b"authority" => 4,
                    b"path" => 8,
                    _ => {
                        bad = Some("a pseudo-header a request cannot have");
                        return;
                    }
                };
                if trailers {
                    bad = Some("a pseudo-header in trailers");
                } else if regular {
                    bad = Some("a pseudo-header after a regular header");
                } else if seen & bit != 0 {
                    bad = Some("a pseudo-header twice");
                } else if bit == 8 && v.is_empty() {
                    bad = Some("an empty :path");
                } else if bit == 1 && (v.is_empty() || !v.iter().all(|&c| tchar(c))) {
                    bad = Some("a :method that is not a token");
                }
                seen |= bit;
                connect |= bit == 1 && v == b"CONNECT";
            } else {
                regular = true;
                if n.is_empty() || !n.iter().all(|&c| token_lower(c)) {
                    bad = Some("a header name that is empty, upper case or not a token");
                } else if matches!(
                    n,
                    b"connection"
                        | b"proxy-connection"
                        | b"keep-alive"
                        | b"transfer-encoding"
                        | b"upgrade"
                ) || (n == b"te" && v != b"trailers")
                {
                    bad = Some("a connection-specific header");
                } else if n == b"content-length" {
                    match parse_decimal(v) {
                        Some(cl) if content_length.is_none_or(|c| c == cl) => {
                            content_length = Some(cl)
                        }
                        _ => bad = Some("an invalid content-length"),
                    }
                }
            }
            if bad.is_none() {
                head.push(n, v);
            }
        })
        .map_err(|_| {
            err(
                code::COMPRESSION_ERROR,
                "a header block HPACK cannot decode",
            )
        })?;
    if bad.is_none() && !trailers {
        let need = if connect { 1 | 4 } else { 1 | 2 | 8 };
        if seen & need != need {
            bad = Some("a request without :method, :scheme or :path");
        } else if connect && seen & (2 | 8) != 0 {
            bad = Some("CONNECT with :scheme or :path");
        }
    }
    Ok(Decoded {
        reason: bad,
        content_length,
    })
}

/// A token character (RFC 9110 5.6.2).
fn tchar(c: u8) -> bool {
    c.is_ascii_alphanumeric()
        || matches!(
            c,
            b'!' | b'#'
                | b'$'
                | b'%'
                | b'&'
                | b'\''
                | b'*'
                | b'+'
                | b'-'
                | b'.'
                | b'^'
                | b'_'
                | b'`'
                | b'|'
                | b'~'
        )
}

/// A character an HTTP/2 field name may hold: a token character, not upper case (8.2.1).
fn token_lower(c: u8) -> bool {
    tchar(c) && !c.is_ascii_uppercase()
}

/// A decimal number of at most 18 digits.
fn parse_decimal(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 18 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0u64, |a, &d| a * 10 + (d - b'0') as u64))
}
