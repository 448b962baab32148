//! The connection core both ends share, generic over the peer (hyper's h2 `proto::Connection`
//! in miniature): the read buffer and the frame loop, the ordering rules, SETTINGS and their
//! acknowledgement, both directions' connection windows and the streams' send windows,
//! WINDOW_UPDATE, PING, header blocks assembled across CONTINUATION frames, DATA's flow control
//! before it reaches a stream, and connection errors (GOAWAY, then dead). What differs between
//! a client and a server (which streams may exist, what a header block or DATA means on one,
//! RST_STREAM, GOAWAY, the settings only one side uses) is the [`Peer`]'s. The core names
//! no peer: the client's and the server's roles (client.rs, server.rs) implement [`Peer`] and
//! use the core, never the other way round.

use crate::frame::{self, code, err, unpad, ConnError, Head, HEAD_LEN};
use crate::hpack;

/// The peer's SETTINGS that either end acts on.
#[derive(Debug, Clone, Copy)]
pub struct PeerSettings {
    /// SETTINGS_MAX_CONCURRENT_STREAMS (unlimited until the peer says).
    pub max_concurrent: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE: the send window of new streams.
    pub initial_window: u32,
    /// SETTINGS_MAX_FRAME_SIZE: the largest frame we may send.
    pub max_frame: u32,
}

impl Default for PeerSettings {
    /// The protocol's defaults, which hold until the peer's SETTINGS arrive.
    fn default() -> PeerSettings {
        PeerSettings {
            max_concurrent: u32::MAX,
            initial_window: frame::DEFAULT_WINDOW,
            max_frame: frame::DEFAULT_MAX_FRAME,
        }
    }
}

/// A header block being collected across CONTINUATION frames, or complete.
#[derive(Debug, Clone, Copy)]
pub struct Pending {
    /// Its stream.
    pub stream: u32,
    /// Its HEADERS frame carried END_STREAM.
    pub end_stream: bool,
    /// Its HEADERS frame made the stream depend on itself (RFC 9113 5.3.1).
    pub self_dependent: bool,
}

/// A stream's id and flow-control windows, kept by the core whatever the role.
#[derive(Debug, Clone, Copy)]
pub struct Flow {
    /// The stream id.
    pub id: u32,
    /// What we may still send (SETTINGS_INITIAL_WINDOW_SIZE and WINDOW_UPDATE move it).
    pub send: i64,
    /// What the peer may still send.
    pub recv: i64,
    /// Received and consumed, not yet given back with WINDOW_UPDATE.
    pub recv_unacked: u32,
}

impl Flow {
    /// Stream `id` with a send window of `send` and a receive window of `recv`.
    pub fn new(id: u32, send: u32, recv: u32) -> Flow {
        Flow {
            id,
            send: send as i64,
            recv: recv as i64,
            recv_unacked: 0,
        }
    }
}

/// What the core asks of a role's stream: its [`Flow`].
pub trait StreamWindow {
    /// The stream's id and windows.
    fn flow(&self) -> &Flow;
    /// The same, to change.
    fn flow_mut(&mut self) -> &mut Flow;
}

/// Seals `Peer`: the trait is public (the connection types name it), its implementations are
/// this crate's roles alone, each of which implements `Sealed` beside its `Peer` impl.
pub(crate) mod sealed {
    /// Only this crate's roles are peers.
    pub trait Sealed {}
}

/// One end of the protocol: what it does with the frames the core has checked. Sealed: the
/// roles are this crate's client and server.
pub trait Peer: sealed::Sealed + Sized {
    /// What the role reports to its caller.
    type Event;
    /// The role's per-stream state.
    type Stream: StreamWindow;
    /// The error when the peer's first frame is not SETTINGS.
    const NOT_SETTINGS_FIRST: &'static str;
    /// The error when the peer sends PUSH_PROMISE.
    const PUSH_PROMISE: &'static str;

    /// The largest header block accepted before the peer is called abusive.
    fn max_header_block(c: &Connection<Self>) -> usize;
    /// True when `id` names a stream neither end has opened yet (a frame on it is a
    /// connection error), false when it was opened and has closed (late frames are ignored).
    fn idle(c: &Connection<Self>, id: u32) -> bool;
    /// HEADERS arrived on `id` (not 0): a connection error if this end cannot receive them.
    fn check_headers(c: &Connection<Self>, id: u32) -> Result<(), ConnError>;
    /// A complete header block.
    fn header_block(c: &mut Connection<Self>, p: Pending, block: &[u8]) -> Result<(), ConnError>;
    /// Our receive window per stream (what SETTINGS_INITIAL_WINDOW_SIZE told the peer).
    fn stream_recv_window(c: &Connection<Self>) -> u32;
    /// Why open stream `k` cannot take DATA at all (a stream error), if it cannot.
    fn refuse_data(c: &Connection<Self>, k: usize) -> Option<(u32, &'static str)>;
    /// DATA on open stream `k` with its `body` (padding excluded), both windows already
    /// charged. Returns true while the stream stays open for more DATA.
    fn data(c: &mut Connection<Self>, k: usize, h: Head, body: &[u8]) -> Result<bool, ConnError>;
    /// DATA on stream `id` that is not open and not idle.
    fn data_closed(c: &mut Connection<Self>, id: u32);
    /// The peer reset open stream `k` with `code`.
    fn reset_by_peer(c: &mut Connection<Self>, k: usize, code: u32);
    /// A GOAWAY arrived.
    fn goaway(c: &mut Connection<Self>, last: u32, code: u32);
    /// A setting the core does not keep (SETTINGS_HEADER_TABLE_SIZE...).
    fn setting(c: &mut Connection<Self>, id: u16, value: u32);
    /// The peer's SETTINGS were applied and acknowledged, or a window grew: bodies that waited
    /// for window may go on.
    fn window_opened(c: &mut Connection<Self>);
    /// The peer acknowledged our SETTINGS (the first time).
    fn settings_acked(c: &mut Connection<Self>);
    /// Stream `k` broke the protocol: reset it with `code` and report it.
    fn stream_error(c: &mut Connection<Self>, k: usize, code: u32, reason: &'static str);
    /// The last-stream-id of the GOAWAY that a connection error of ours sends.
    fn last_stream_for_goaway(c: &mut Connection<Self>) -> u32;
}

/// One HTTP/2 connection of either end (see the module documentation): the client's is
/// `ClientConn`, the server's `ServerConn`.
#[derive(Debug)]
pub struct Connection<P: Peer> {
    /// Bytes to write to the socket, in order; the caller removes what it sent.
    pub out: Vec<u8>,
    /// What happened since the caller last drained it.
    pub events: Vec<P::Event>,
    /// The peer's settings.
    pub peer: PeerSettings,
    pub(crate) streams: Vec<P::Stream>,
    pub(crate) decoder: hpack::Decoder,
    pub(crate) got_settings: bool,
    pub(crate) settings_acked: bool,
    pub(crate) conn_send_window: i64,
    pub(crate) dead: bool,
    pub(crate) role: P,
    /// Bytes of the client's connection preface still to come (a server's; 0 for a client).
    preface_left: usize,
    rbuf: Vec<u8>,
    block: Vec<u8>,
    pending: Option<Pending>,
    /// Our connection receive window: the size, what is left, and what was consumed and not
    /// yet given back.
    recv_window_size: u32,
    conn_recv_window: i64,
    conn_recv_unacked: u32,
}

impl<P: Peer> Connection<P> {
    /// A connection of `role` whose `out` already holds what it sends first; `preface` says
    /// whether the client's connection preface is expected first (a server); `recv_window` is
    /// our connection receive window (raised from the default by a WINDOW_UPDATE in `out`).
    pub(crate) fn with_role(role: P, out: Vec<u8>, preface: bool, recv_window: u32) -> Self {
        Connection {
            out,
            events: Vec::with_capacity(64),
            peer: PeerSettings::default(),
            streams: Vec::new(),
            decoder: hpack::Decoder::new(),
            got_settings: false,
            settings_acked: false,
            conn_send_window: frame::DEFAULT_WINDOW as i64,
            dead: false,
            role,
            preface_left: if preface { frame::PREFACE.len() } else { 0 },
            rbuf: Vec::new(),
            block: Vec::new(),
            pending: None,
            recv_window_size: recv_window,
            conn_recv_window: recv_window as i64,
            conn_recv_unacked: 0,
        }
    }

    /// Streams open now.
    #[inline]
    pub fn active(&self) -> usize {
        self.streams.len()
    }

    /// The peer's SETTINGS arrived (its preface).
    pub fn got_settings(&self) -> bool {
        self.got_settings
    }

    /// The peer acknowledged our SETTINGS.
    pub fn settings_acked(&self) -> bool {
        self.settings_acked
    }

    /// A connection error happened (ours or the caller's `fail`): nothing more can be done
    /// on it.
    pub fn is_dead(&self) -> bool {
        self.dead
    }

    /// The largest frame the peer accepts (its SETTINGS_MAX_FRAME_SIZE).
    pub fn peer_max_frame(&self) -> u32 {
        self.peer.max_frame
    }

    /// Bytes of an incomplete frame held over (a peer that stops mid-frame leaves some).
    pub fn buffered(&self) -> usize {
        self.rbuf.len()
    }

    /// Ends the connection with a connection error of ours (a SETTINGS timeout, a server
    /// shutting down): a GOAWAY with `code` is queued, unless one with an error went out
    /// already, and nothing more is accepted.
    pub fn fail(&mut self, code: u32) {
        if !self.dead {
            self.dead = true;
            let last = P::last_stream_for_goaway(self);
            frame::goaway(&mut self.out, last, code);
        }
    }

    /// Takes in bytes read from the socket, in any split. Complete frames are handled at once;
    /// a partial one is kept for the next call. On a connection error the GOAWAY is queued and
    /// the error returned; the open streams are then the caller's to fail.
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
        if self.conn_recv_unacked >= self.recv_window_size / 2 {
            // What was consumed goes back in one WINDOW_UPDATE once half the window is used,
            // after the whole read: a peer that sent beyond the window it had been given is
            // caught within one read.
            frame::window_update(&mut self.out, 0, self.conn_recv_unacked);
            self.conn_recv_window += self.conn_recv_unacked as i64;
            self.conn_recv_unacked = 0;
        }
        Ok(())
    }

    /// The index of open stream `id`.
    #[inline]
    pub(crate) fn stream_index(&self, id: u32) -> Option<usize> {
        self.streams.iter().position(|s| s.flow().id == id)
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

    fn frame(&mut self, h: Head, p: &[u8]) -> Result<(), ConnError> {
        frame::order(
            h,
            self.got_settings,
            self.pending.as_ref().map(|p| p.stream),
            P::NOT_SETTINGS_FIRST,
        )?;
        match h.kind {
            frame::DATA => self.data(h, p),
            frame::HEADERS => self.headers(h, p),
            frame::CONTINUATION => self.continuation(h, p),
            frame::PRIORITY => self.priority(h, p),
            frame::RST_STREAM => self.rst_stream(h, p),
            frame::SETTINGS => self.settings(h, p),
            frame::PUSH_PROMISE => Err(err(code::PROTOCOL_ERROR, P::PUSH_PROMISE)),
            frame::PING => frame::ping(&mut self.out, h, p),
            frame::GOAWAY => {
                let (last, c) = frame::goaway_fields(h, p)?;
                P::goaway(self, last, c);
                Ok(())
            }
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
                P::settings_acked(self);
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
                        let f = s.flow_mut();
                        f.send += delta;
                        if f.send > frame::MAX_WINDOW as i64 {
                            return Err(err(
                                code::FLOW_CONTROL_ERROR,
                                "a stream window above 2^31-1",
                            ));
                        }
                    }
                }
                frame::SETTINGS_MAX_FRAME_SIZE => self.peer.max_frame = v,
                _ => P::setting(self, id, v),
            }
            Ok(())
        })?;
        self.got_settings = true;
        frame::settings_ack(&mut self.out);
        P::window_opened(self);
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
        } else {
            match self.stream_index(h.stream) {
                Some(k) if inc == 0 => {
                    P::stream_error(self, k, code::PROTOCOL_ERROR, "WINDOW_UPDATE of 0")
                }
                Some(k) => {
                    let f = self.streams[k].flow_mut();
                    f.send += inc as i64;
                    if f.send > frame::MAX_WINDOW as i64 {
                        P::stream_error(
                            self,
                            k,
                            code::FLOW_CONTROL_ERROR,
                            "stream window above 2^31-1",
                        );
                    }
                }
                None if P::idle(self, h.stream) => {
                    return Err(err(code::PROTOCOL_ERROR, "WINDOW_UPDATE on an idle stream"));
                }
                // A closed stream: the update crossed our END_STREAM or RST_STREAM.
                None => {}
            }
        }
        P::window_opened(self);
        Ok(())
    }

    fn rst_stream(&mut self, h: Head, p: &[u8]) -> Result<(), ConnError> {
        let c = frame::rst_code(h, p)?;
        match self.stream_index(h.stream) {
            Some(k) => {
                P::reset_by_peer(self, k, c);
                Ok(())
            }
            None if P::idle(self, h.stream) => {
                Err(err(code::PROTOCOL_ERROR, "RST_STREAM on an idle stream"))
            }
            None => Ok(()),
        }
    }

    fn priority(&mut self, h: Head, p: &[u8]) -> Result<(), ConnError> {
        if h.stream == 0 {
            return Err(err(code::PROTOCOL_ERROR, "PRIORITY on stream 0"));
        }
        let (c, reason) = if p.len() != 5 {
            (code::FRAME_SIZE_ERROR, "PRIORITY not 5 bytes")
        } else if u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & frame::MAX_STREAM_ID == h.stream {
            (code::PROTOCOL_ERROR, "a stream depending on itself")
        } else {
            // Priorities are advice; both ends send as they are ready.
            return Ok(());
        };
        match self.stream_index(h.stream) {
            Some(k) => {
                P::stream_error(self, k, c, reason);
                Ok(())
            }
            // A stream error must not name a stream that is not open: the connection pays.
            None => Err(err(c, reason)),
        }
    }

    fn data(&mut self, h: Head, p: &[u8]) -> Result<(), ConnError> {
        if h.stream == 0 {
            return Err(err(code::PROTOCOL_ERROR, "DATA on stream 0"));
        }
        let body = unpad(h, p)?;
        // Flow control counts the whole payload, padding included (RFC 9113 6.9.1), and the
        // connection's window whatever becomes of the stream.
        let n = p.len() as u32;
        self.conn_recv_window -= n as i64;
        if self.conn_recv_window < 0 {
            return Err(err(
                code::FLOW_CONTROL_ERROR,
                "DATA beyond the connection window",
            ));
        }
        self.conn_recv_unacked += n;
        match self.stream_index(h.stream) {
            Some(k) => {
                if let Some((c, reason)) = P::refuse_data(self, k) {
                    P::stream_error(self, k, c, reason);
                    return Ok(());
                }
                let f = self.streams[k].flow_mut();
                f.recv -= n as i64;
                if f.recv < 0 {
                    P::stream_error(
                        self,
                        k,
                        code::FLOW_CONTROL_ERROR,
                        "DATA beyond the stream window",
                    );
                    return Ok(());
                }
                if !P::data(self, k, h, body)? {
                    return Ok(());
                }
                // Given back in one WINDOW_UPDATE once half the stream's window is consumed.
                let size = P::stream_recv_window(self);
                let f = self.streams[k].flow_mut();
                f.recv_unacked += n;
                if f.recv_unacked >= size / 2 {
                    frame::window_update(&mut self.out, f.id, f.recv_unacked);
                    f.recv += f.recv_unacked as i64;
                    f.recv_unacked = 0;
                }
                Ok(())
            }
            None if P::idle(self, h.stream) => {
                Err(err(code::PROTOCOL_ERROR, "DATA on an idle stream"))
            }
            None => {
                P::data_closed(self, h.stream);
                Ok(())
            }
        }
    }

    fn headers(&mut self, h: Head, p: &[u8]) -> Result<(), ConnError> {
        if h.stream == 0 {
            return Err(err(code::PROTOCOL_ERROR, "HEADERS on stream 0"));
        }
        P::check_headers(self, h.stream)?;
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
            return P::header_block(self, pend, frag);
        }
        if frag.len() > P::max_header_block(self) {
            return Err(err(code::ENHANCE_YOUR_CALM, "a header block too large"));
        }
        self.block.clear();
        self.block.extend_from_slice(frag);
        self.pending = Some(pend);
        Ok(())
    }

    fn continuation(&mut self, h: Head, p: &[u8]) -> Result<(), ConnError> {
        let Some(pend) = self.pending else {
            return Err(err(
                code::PROTOCOL_ERROR,
                "CONTINUATION without a header block",
            ));
        };
        if self.block.len() + p.len() > P::max_header_block(self) {
            return Err(err(code::ENHANCE_YOUR_CALM, "a header block too large"));
        }
        self.block.extend_from_slice(p);
        if h.flags & frame::END_HEADERS != 0 {
            self.pending = None;
            let block = std::mem::take(&mut self.block);
            let r = P::header_block(self, pend, &block);
            self.block = block;
            return r;
        }
        Ok(())
    }
}
