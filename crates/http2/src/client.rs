//! One client HTTP/2 connection as a state machine without I/O: the caller opens streams (each
//! tagged with a `slot` of its own choosing), feeds it whatever bytes the socket returned in any
//! split, sends what it queued in [`ClientConn::out`], and takes the [`Event`]s it produced.
//!
//! What it keeps: the peer's SETTINGS, both directions' flow-control windows (receive windows
//! are replenished with WINDOW_UPDATE as DATA is consumed; request bodies wait for send window
//! and such waits are reported as stalls), the HPACK decoder, the request's HPACK state (its
//! first block on the connection fills the server's dynamic table, later ones name the entries,
//! see [`hpack::RequestHeaders`]), the open streams, and GOAWAY. A
//! violation of the protocol by the peer is a connection error: [`ClientConn::feed`] returns
//! it, queues a GOAWAY with its code, and the connection is dead from then on.

pub use crate::frame::ConnError;
use crate::frame::{self, code, err, unpad, Head, HEAD_LEN};
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
}

/// The peer's settings that matter to a client.
#[derive(Debug, Clone, Copy)]
pub struct PeerSettings {
    /// SETTINGS_MAX_CONCURRENT_STREAMS (unlimited until the server says).
    pub max_concurrent: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE: send window of new streams.
    pub initial_window: u32,
    /// SETTINGS_MAX_FRAME_SIZE: largest frame we may send.
    pub max_frame: u32,
}

#[derive(Debug)]
struct Stream {
    id: u32,
    slot: u32,
    /// Final status once its HEADERS arrived (0 before).
    status: u16,
    bytes: u64,
    /// Receive window consumed and not yet given back.
    recv_unacked: u32,
    recv_window: i64,
    send_window: i64,
    /// Body bytes sent so far; the stream waits for window while below the body length.
    body_sent: usize,
    stalled: bool,
}

/// A header block being collected across CONTINUATION frames.
#[derive(Debug)]
struct Pending {
    stream: u32,
    end_stream: bool,
}

/// One HTTP/2 client connection (see the module documentation).
#[derive(Debug)]
pub struct ClientConn {
    /// Bytes to write to the socket, in order; the caller removes what it sent.
    pub out: Vec<u8>,
    /// What happened since the caller last drained it.
    pub events: Vec<Event>,
    /// The peer's settings.
    pub peer: PeerSettings,
    rbuf: Vec<u8>,
    decoder: hpack::Decoder,
    block: Vec<u8>,
    pending: Option<Pending>,
    streams: Vec<Stream>,
    next_id: u32,
    got_settings: bool,
    settings_acked: bool,
    conn_send_window: i64,
    conn_recv_window: i64,
    conn_recv_unacked: u32,
    goaway: Option<(u32, u32)>,
    dead: bool,
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
}

impl ClientConn {
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
        ClientConn {
            out,
            events: Vec::with_capacity(64),
            peer: PeerSettings {
                max_concurrent: u32::MAX,
                initial_window: frame::DEFAULT_WINDOW,
                max_frame: frame::DEFAULT_MAX_FRAME,
            },
            rbuf: Vec::new(),
            decoder: hpack::Decoder::new(),
            block: Vec::new(),
            pending: None,
            streams: Vec::new(),
            next_id: 1,
            got_settings: false,
            settings_acked: false,
            conn_send_window: frame::DEFAULT_WINDOW as i64,
            conn_recv_window: RECV_WINDOW as i64,
            conn_recv_unacked: 0,
            goaway: None,
            dead: false,
            body,
            request,
            small_table: None,
            indexed: false,
            table_size: hpack::TABLE_SIZE,
            size_update: Vec::new(),
        }
    }

    /// Streams open now.
    #[inline]
    pub fn active(&self) -> usize {
        self.streams.len()
    }

    /// The server's SETTINGS arrived (its preface).
    pub fn got_settings(&self) -> bool {
        self.got_settings
    }

    /// The server acknowledged our SETTINGS.
    pub fn settings_acked(&self) -> bool {
        self.settings_acked
    }

    /// The last GOAWAY received: (last-stream-id, code).
    pub fn goaway(&self) -> Option<(u32, u32)> {
        self.goaway
    }

    /// A connection error happened (ours or the caller's [`ClientConn::fail`]): nothing more
    /// can be done on it.
    pub fn is_dead(&self) -> bool {
        self.dead
    }

    /// True when a stream can be opened now: no GOAWAY, under the server's concurrency limit,
    /// stream ids left.
    #[inline]
    pub fn can_open(&self) -> bool {
        !self.dead
            && self.goaway.is_none()
            && (self.streams.len() as u64) < self.peer.max_concurrent as u64
            && self.next_id <= frame::MAX_STREAM_ID
    }

    /// True when the connection has nothing more to give: dead, or going away (GOAWAY received,
    /// or stream ids exhausted) with no stream left open.
    pub fn finished(&self) -> bool {
        self.dead
            || ((self.goaway.is_some() || self.next_id > frame::MAX_STREAM_ID)
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
        let block = match theirs {
            Some(b) => b,
            None => {
                let blocks = match &self.small_table {
                    Some(b) => b,
                    None => self.request.default_blocks(),
                };
                let first = !self.indexed;
                self.indexed = true;
                if first {
                    &blocks.first
                } else {
                    &blocks.repeat
                }
            }
        };
        let id = self.next_id;
        self.next_id += 2;
        let has_body = self.body.as_ref().is_some_and(|b| !b.is_empty());
        if self.size_update.is_empty() {
            frame::header_frames(&mut self.out, id, block, !has_body, self.peer.max_frame);
        } else {
            let mut b = std::mem::take(&mut self.size_update);
            b.extend_from_slice(block);
            frame::header_frames(&mut self.out, id, &b, !has_body, self.peer.max_frame);
        }
        self.opened(id, slot, has_body);
        Some(id)
    }

    /// Stream `id`'s HEADERS went out: it is open, and its body follows.
    fn opened(&mut self, id: u32, slot: u32, has_body: bool) {
        self.streams.push(Stream {
            id,
            slot,
            status: 0,
            bytes: 0,
            recv_unacked: 0,
            recv_window: RECV_WINDOW as i64,
            send_window: self.peer.initial_window as i64,
            body_sent: 0,
            stalled: false,
        });
        if has_body {
            let k = self.streams.len() - 1;
            self.send_body(k);
        }
    }

    /// Sends as much of stream `k`'s body as the windows allow.
    fn send_body(&mut self, k: usize) {
        let Some(body) = self.body.clone() else {
            return;
        };
        let s = &mut self.streams[k];
        while s.body_sent < body.len() {
            let window = s.send_window.min(self.conn_send_window);
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
                s.id,
            );
            self.out
                .extend_from_slice(&body[s.body_sent..s.body_sent + n]);
            s.body_sent += n;
            s.send_window -= n as i64;
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
            frame::rst_stream(&mut self.out, s.id, code::CANCEL);
        }
        true
    }

    /// Ends the connection with a connection error of ours (e.g. SETTINGS_TIMEOUT): a GOAWAY
    /// is queued and nothing more is accepted.
    pub fn fail(&mut self, code: u32) {
        if !self.dead {
            self.dead = true;
            let last = self.last_peer_stream();
            frame::goaway(&mut self.out, last, code);
        }
    }

    /// The last stream id the server initiated (always 0: push is disabled).
    fn last_peer_stream(&self) -> u32 {
        0
    }

    /// Takes in bytes read from the socket. Complete frames are handled at once; a partial one
    /// is kept for the next call. On a connection error the GOAWAY is queued and the error
    /// returned; the open streams are then the caller's to fail ([`ClientConn::open_slots`]).
    pub fn feed(&mut self, data: &[u8]) -> Result<(), ConnError> {
        if self.dead {
            return Ok(());
        }
        let r = if self.rbuf.is_empty() {
            match self.frames(data) {
                Ok(used) => {
                    self.rbuf.extend_from_slice(&data[used..]);
                    Ok(())
                }
                Err(e) => Err(e),
            }
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
        Ok(())
    }

    /// Bytes of an incomplete frame held over (a peer that stops mid-frame leaves some).
    pub fn buffered(&self) -> usize {
        self.rbuf.len()
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
            if self.dead {
                break;
            }
        }
        Ok(pos)
    }

    fn stream_index(&self, id: u32) -> Option<usize> {
        self.streams.iter().position(|s| s.id == id)
    }

    /// True for an id we opened and have since closed (frames on it are late, not wrong).
    fn closed_id(&self, id: u32) -> bool {
        id % 2 == 1 && id < self.next_id
    }

    fn frame(&mut self, h: Head, p: &[u8]) -> Result<(), ConnError> {
        frame::order(
            h,
            self.got_settings,
            self.pending.as_ref().map(|p| p.stream),
            "the server's first frame was not SETTINGS",
        )?;
        match h.kind {
            frame::DATA => self.data(h, p),
            frame::HEADERS => self.headers(h, p),
            frame::CONTINUATION => self.continuation(h, p),
            frame::PRIORITY => {
                if h.stream == 0 {
                    return Err(err(code::PROTOCOL_ERROR, "PRIORITY on stream 0"));
                }
                if p.len() != 5 {
                    return Err(err(code::FRAME_SIZE_ERROR, "PRIORITY not 5 bytes"));
                }
                Ok(())
            }
            frame::RST_STREAM => self.rst_stream(h, p),
            frame::SETTINGS => self.settings(h, p),
            frame::PUSH_PROMISE => Err(err(
                code::PROTOCOL_ERROR,
                "PUSH_PROMISE although push is disabled",
            )),
            frame::PING => frame::ping(&mut self.out, h, p),
            frame::GOAWAY => self.goaway_frame(h, p),
            frame::WINDOW_UPDATE => self.window_update(h, p),
            // Unknown frame types are ignored (RFC 9113 4.1).
            _ => Ok(()),
        }
    }

    fn settings(&mut self, h: Head, p: &[u8]) -> Result<(), ConnError> {
        if h.flags & frame::ACK != 0 {
            frame::settings_ack_ok(h, p)?;
            if !self.settings_acked {
                self.settings_acked = true;
                self.events.push(Event::SettingsAcked);
            }
            return Ok(());
        }
        frame::settings_each(h, p, |id, v| {
            match id {
                frame::SETTINGS_MAX_CONCURRENT_STREAMS => self.peer.max_concurrent = v,
                frame::SETTINGS_INITIAL_WINDOW_SIZE => {
                    let delta = v as i64 - self.peer.initial_window as i64;
                    self.peer.initial_window = v;
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
                frame::SETTINGS_MAX_FRAME_SIZE => self.peer.max_frame = v,
                frame::SETTINGS_HEADER_TABLE_SIZE => self.table_size_changed(v),
                _ => {}
            }
            Ok(())
        })?;
        self.got_settings = true;
        frame::settings_ack(&mut self.out);
        self.resume_bodies();
        Ok(())
    }

    /// The server's SETTINGS_HEADER_TABLE_SIZE is `v`. When the size our encoder may use
    /// changes, the next header block opens with size updates to 0 (which empties the
    /// server's table) and to the new size, and the request is indexed again from scratch.
    fn table_size_changed(&mut self, v: u32) {
        let size = (v as usize).min(hpack::TABLE_SIZE);
        if size == self.table_size {
            return;
        }
        self.table_size = size;
        self.size_update.clear();
        hpack::size_update(&mut self.size_update, 0);
        if size > 0 {
            hpack::size_update(&mut self.size_update, size);
        }
        self.small_table = (size < hpack::TABLE_SIZE).then(|| Box::new(self.request.blocks(size)));
        self.indexed = false;
    }

    /// Sends the bodies that waited for window.
    fn resume_bodies(&mut self) {
        if self.body.is_none() {
            return;
        }
        for k in 0..self.streams.len() {
            let len = self.body.as_ref().map_or(0, |b| b.len());
            if self.streams[k].body_sent < len {
                self.send_body(k);
            }
        }
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
        } else if let Some(k) = self.stream_index(h.stream) {
            if inc == 0 {
                self.stream_error(k, "WINDOW_UPDATE of 0");
                return Ok(());
            }
            self.streams[k].send_window += inc as i64;
            if self.streams[k].send_window > frame::MAX_WINDOW as i64 {
                self.stream_error(k, "stream window above 2^31-1");
                return Ok(());
            }
        } else if !self.closed_id(h.stream) {
            return Err(err(code::PROTOCOL_ERROR, "WINDOW_UPDATE on an idle stream"));
        }
        self.resume_bodies();
        Ok(())
    }

    fn rst_stream(&mut self, h: Head, p: &[u8]) -> Result<(), ConnError> {
        let c = frame::rst_code(h, p)?;
        match self.stream_index(h.stream) {
            Some(k) => {
                let s = self.streams.swap_remove(k);
                self.events.push(Event::Reset {
                    slot: s.slot,
                    code: c,
                });
                Ok(())
            }
            None if self.closed_id(h.stream) => Ok(()),
            None => Err(err(code::PROTOCOL_ERROR, "RST_STREAM on an idle stream")),
        }
    }

    fn goaway_frame(&mut self, h: Head, p: &[u8]) -> Result<(), ConnError> {
        let (last, c) = frame::goaway_fields(h, p)?;
        self.events.push(Event::GoAway {
            last_stream: last,
            code: c,
        });
        let mut k = 0;
        while k < self.streams.len() {
            if self.streams[k].id > last {
                let s = self.streams.swap_remove(k);
                self.events.push(Event::Refused { slot: s.slot });
            } else {
                k += 1;
            }
        }
        self.goaway = Some(match self.goaway {
            Some((l, _)) => (l.min(last), c),
            None => (last, c),
        });
        Ok(())
    }

    fn data(&mut self, h: Head, p: &[u8]) -> Result<(), ConnError> {
        if h.stream == 0 {
            return Err(err(code::PROTOCOL_ERROR, "DATA on stream 0"));
        }
        let body = unpad(h, p)?.len() as u64;
        // Flow control counts the whole payload, padding included (RFC 9113 6.9.1).
        let n = p.len() as u32;
        self.conn_recv_window -= n as i64;
        if self.conn_recv_window < 0 {
            return Err(err(
                code::FLOW_CONTROL_ERROR,
                "DATA beyond the connection window",
            ));
        }
        self.conn_recv_unacked += n;
        if self.conn_recv_unacked >= RECV_WINDOW / 2 {
            frame::window_update(&mut self.out, 0, self.conn_recv_unacked);
            self.conn_recv_window += self.conn_recv_unacked as i64;
            self.conn_recv_unacked = 0;
        }
        let Some(k) = self.stream_index(h.stream) else {
            if self.closed_id(h.stream) {
                return Ok(());
            }
            return Err(err(code::PROTOCOL_ERROR, "DATA on an idle stream"));
        };
        let s = &mut self.streams[k];
        s.recv_window -= n as i64;
        if s.recv_window < 0 {
            self.stream_error_code(k, code::FLOW_CONTROL_ERROR, "DATA beyond the stream window");
            return Ok(());
        }
        if s.status == 0 {
            self.stream_error(k, "DATA before the response HEADERS");
            return Ok(());
        }
        s.bytes += body;
        if h.flags & frame::END_STREAM != 0 {
            let s = self.streams.swap_remove(k);
            self.events.push(Event::Response {
                slot: s.slot,
                status: s.status,
                bytes: s.bytes,
            });
            return Ok(());
        }
        s.recv_unacked += n;
        if s.recv_unacked >= RECV_WINDOW / 2 {
            frame::window_update(&mut self.out, s.id, s.recv_unacked);
            s.recv_window += s.recv_unacked as i64;
            s.recv_unacked = 0;
        }
        Ok(())
    }

    fn headers(&mut self, h: Head, p: &[u8]) -> Result<(), ConnError> {
        if h.stream == 0 {
            return Err(err(code::PROTOCOL_ERROR, "HEADERS on stream 0"));
        }
        if h.stream % 2 == 0 || h.stream >= self.next_id {
            return Err(err(
                code::PROTOCOL_ERROR,
                "HEADERS on a stream the client did not open",
            ));
        }
        let mut frag = unpad(h, p)?;
        if h.flags & frame::PRIORITY_FLAG != 0 {
            if frag.len() < 5 {
                return Err(err(code::FRAME_SIZE_ERROR, "HEADERS priority truncated"));
            }
            frag = &frag[5..];
        }
        let end_stream = h.flags & frame::END_STREAM != 0;
        if h.flags & frame::END_HEADERS != 0 {
            return self.header_block(h.stream, end_stream, frag);
        }
        self.block.clear();
        self.block.extend_from_slice(frag);
        self.pending = Some(Pending {
            stream: h.stream,
            end_stream,
        });
        Ok(())
    }

    fn continuation(&mut self, h: Head, p: &[u8]) -> Result<(), ConnError> {
        let Some(pend) = &self.pending else {
            return Err(err(
                code::PROTOCOL_ERROR,
                "CONTINUATION without a header block",
            ));
        };
        let (stream, end_stream) = (pend.stream, pend.end_stream);
        if self.block.len() + p.len() > MAX_HEADER_BLOCK {
            return Err(err(code::ENHANCE_YOUR_CALM, "a header block above 256 KiB"));
        }
        self.block.extend_from_slice(p);
        if h.flags & frame::END_HEADERS != 0 {
            self.pending = None;
            let block = std::mem::take(&mut self.block);
            let r = self.header_block(stream, end_stream, &block);
            self.block = block;
            return r;
        }
        Ok(())
    }

    /// A complete header block for `stream`: decoded always (the HPACK context is shared), then
    /// applied to the stream if it is still open.
    fn header_block(
        &mut self,
        stream: u32,
        end_stream: bool,
        block: &[u8],
    ) -> Result<(), ConnError> {
        let mut status: Option<u16> = None;
        let mut first = true;
        let mut bad: Option<&'static str> = None;
        self.decoder
            .decode_some(
                block,
                |n| n == b":status",
                |n, v| {
                    if n == b":status" {
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
        let Some(k) = self.stream_index(stream) else {
            return Ok(());
        };
        let s = &mut self.streams[k];
        if s.status != 0 {
            // Trailers: they end the stream.
            if !end_stream {
                self.stream_error(k, "trailers without END_STREAM");
                return Ok(());
            }
        } else {
            if let Some(r) = bad {
                self.stream_error(k, r);
                return Ok(());
            }
            match status {
                None => {
                    self.stream_error(k, "a response without :status");
                    return Ok(());
                }
                Some(st) if (100..200).contains(&st) => {
                    // Informational: the final response follows.
                    if end_stream {
                        self.stream_error(k, "END_STREAM on an informational response");
                    }
                    return Ok(());
                }
                Some(st) => s.status = st,
            }
        }
        if end_stream {
            let s = self.streams.swap_remove(k);
            self.events.push(Event::Response {
                slot: s.slot,
                status: s.status,
                bytes: s.bytes,
            });
        }
        Ok(())
    }

    fn stream_error(&mut self, k: usize, reason: &'static str) {
        self.stream_error_code(k, code::PROTOCOL_ERROR, reason)
    }

    /// Resets stream `k` with `c` and reports it malformed.
    fn stream_error_code(&mut self, k: usize, c: u32, reason: &'static str) {
        let s = self.streams.swap_remove(k);
        frame::rst_stream(&mut self.out, s.id, c);
        self.events.push(Event::Malformed {
            slot: s.slot,
            reason,
        });
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
