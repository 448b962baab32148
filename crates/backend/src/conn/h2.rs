//! h2c on the same event loop: a connection whose first bytes are the HTTP/2 preface hands its
//! bytes to an `http2::ServerConn` from then on. Each complete request (stream) is decided as an
//! HTTP/1.1 one is (route, CPU, latency, status, size, slow start, probes) and answered on its
//! own: a delayed stream waits in the connection's list, under one loop timer armed for the
//! earliest deadline, while the others are answered. Bodies go out as the client's windows
//! allow, cut from the same pattern.
//!
//! What HTTP/1.1 faults become: `close_after=N` sends GOAWAY after the Nth request (streams
//! already open are still answered); a drain or graceful stop sends GOAWAY and closes once the
//! open streams are answered; a kill resets the TCP connection as for HTTP/1.1; a malformed
//! request is reset (RST_STREAM PROTOCOL_ERROR) where HTTP/1.1 would answer 400; a client that
//! breaks the framing gets GOAWAY with the error's code, then a close.

use super::{classify, Body, Conn, Cx, Pending, Phase, Req, WBUF_HIGH};
use crate::compiled::Compiled;
use crate::counters::{H2Count, Life, Slot, StreamEnd};
use crate::http::LongLived;
use crate::response::{body_chunk, put_decimal};
use crate::sys::mono_ns;
use http2::{ServerConn, ServerEvent, ServerSettings};
use model::stream::{ClosedBy, StreamProtocol};

pub(super) use http2::frame::PREFACE;

/// One connection's HTTP/2 state.
pub(crate) struct H2 {
    pub(super) conn: ServerConn<Body>,
    /// Decided responses waiting for their latency: (deadline, stream, response).
    waiting: Vec<(u64, u32, Pending)>,
    /// The deadline the connection's loop timer is armed for (0: none).
    armed: u64,
    /// Scratch for a response's header block.
    block: Vec<u8>,
    /// Open streams as last told to the counters.
    open: u64,
    /// gRPC server-streaming calls under way.
    grpc: Vec<GrpcStream>,
}

/// One gRPC server-streaming call: its stream, its next push, the pushes so far, its
/// deadline (`grpc-timeout`; 0: none) and its counts.
struct GrpcStream {
    stream: u32,
    next: u64,
    pushed: u64,
    deadline: u64,
    life: Life,
}

/// The backend's unary method.
pub(crate) const GRPC_UNARY: &[u8] = b"/proxybench.Bench/Unary";
/// The backend's server-streaming method.
pub(crate) const GRPC_STREAM: &[u8] = b"/proxybench.Bench/Stream";
/// gRPC's OK, DEADLINE_EXCEEDED and UNIMPLEMENTED.
const GRPC_OK: u16 = 0;
const GRPC_DEADLINE: u16 = 4;
const GRPC_UNIMPLEMENTED: u16 = 12;
/// Pushes wait while a stream has this much unsent (a client that does not read).
const GRPC_BACKLOG: usize = 1 << 20;

impl H2 {
    /// Gives back the output buffer and the count of counted requests left unanswered; the
    /// streams left open leave the counters' gauge.
    pub(super) fn into_parts(self, ctr: &Slot) -> (Vec<u8>, u64) {
        ctr.h2_streams(self.open, 0);
        for g in &self.grpc {
            ctr.stream_closed(g.life, mono_ns(), ClosedBy::Dropped, StreamEnd::default());
        }
        let abandoned = self.waiting.iter().filter(|w| w.2.counted).count() as u64;
        (self.conn.into_buffer(), abandoned)
    }
}

impl Conn {
    /// The connection opened with the preface: from now on it speaks HTTP/2. Our SETTINGS go
    /// into the (empty) write buffer; the bytes read so far are fed by `run_h2`.
    pub(super) fn start_h2(&mut self, cx: &mut Cx) {
        let out = std::mem::take(&mut self.wbuf);
        self.h2 = Some(Box::new(H2 {
            conn: ServerConn::with_buffer(ServerSettings::default(), out),
            waiting: Vec::new(),
            armed: 0,
            block: Vec::with_capacity(128),
            open: 0,
            grpc: Vec::new(),
        }));
        cx.ctr.h2(H2Count::Connection);
        if self.draining || cx.draining {
            self.h2_goaway(cx);
        }
    }

    /// A graceful GOAWAY (drain, graceful stop, close_after), once, on an HTTP/2 connection.
    pub(super) fn h2_goaway(&mut self, cx: &mut Cx) {
        if let Some(h) = &mut self.h2 {
            if h.conn.goaway() {
                cx.ctr.h2(H2Count::GoAway);
            }
        }
    }

    /// `run` for an HTTP/2 connection: read and feed frames, answer, write.
    pub(super) fn run_h2(&mut self, cx: &mut Cx) -> super::Step {
        use super::Step;
        loop {
            if self.fill(cx.prof.timed).is_err() {
                return Step::Close;
            }
            if self.phase == Phase::Lingering {
                self.rpos = 0;
                self.rlen = 0;
                if self.peer_eof {
                    return Step::Close;
                }
                if self.read_ready {
                    continue;
                }
                return Step::Keep;
            }
            if self.rpos < self.rlen {
                // Once closing, what the client sends is discarded.
                let r = match self.h2.as_mut() {
                    Some(h) if self.phase == Phase::Open => {
                        h.conn.feed(&self.rbuf[self.rpos..self.rlen])
                    }
                    _ => Ok(()),
                };
                self.rpos = 0;
                self.rlen = 0;
                self.h2_events(cx);
                if r.is_err() {
                    cx.ctr.h2(H2Count::ConnectionError);
                    self.h2_drop_waiting(cx);
                }
            }
            self.h2_pump(cx);
            if self.flush(cx).is_err() {
                return Step::Close;
            }
            let finished = self
                .h2
                .as_ref()
                .is_none_or(|h| h.conn.finished() && h.waiting.is_empty());
            if self.phase == Phase::Open && finished && self.output_done() {
                self.phase = Phase::Closing;
            }
            if self.phase == Phase::Closing && self.output_done() {
                let _ = self.sock.shutdown(std::net::Shutdown::Write);
                self.phase = Phase::Lingering;
                self.arm(cx, mono_ns() + super::LINGER_NS);
                continue;
            }
            if !(self.read_ready && self.can_read()) {
                break;
            }
        }
        let idle = self
            .h2
            .as_ref()
            .is_none_or(|h| h.waiting.is_empty() && !h.conn.sending());
        if self.phase == Phase::Open && self.peer_eof && idle && self.output_done() {
            // The client stopped sending: whatever is open can no longer complete.
            return Step::Close;
        }
        Step::Keep
    }

    /// Acts on what the frames just fed produced.
    fn h2_events(&mut self, cx: &mut Cx) {
        let Some(h) = self.h2.as_mut() else {
            return;
        };
        let mut events = std::mem::take(&mut h.conn.events);
        for e in events.drain(..) {
            match e {
                ServerEvent::Request { stream } => self.h2_serve(stream, cx),
                ServerEvent::Reset { stream, .. } => {
                    cx.ctr.h2(H2Count::ClientReset);
                    self.h2_forget(stream, cx);
                    self.grpc_gone(stream, ClosedBy::Client, cx);
                }
                ServerEvent::StreamError { stream, .. } => {
                    cx.ctr.h2(H2Count::StreamError);
                    self.h2_forget(stream, cx);
                    self.grpc_gone(stream, ClosedBy::Dropped, cx);
                }
                ServerEvent::Refused { .. } => cx.ctr.h2(H2Count::Refused),
                ServerEvent::GoAway { .. } => {}
            }
        }
        if let Some(h) = self.h2.as_mut() {
            h.conn.events = events;
        }
        self.h2_count_streams(cx);
    }

    /// A stream that ended without its response: a response waiting for it is dropped.
    fn h2_forget(&mut self, stream: u32, cx: &mut Cx) {
        let Some(h) = self.h2.as_mut() else {
            return;
        };
        if let Some(i) = h.waiting.iter().position(|w| w.1 == stream) {
            if h.waiting.swap_remove(i).2.counted {
                cx.ctr.abandoned();
            }
        }
    }

    /// A connection error: no waiting response will be sent.
    fn h2_drop_waiting(&mut self, cx: &mut Cx) {
        if let Some(h) = self.h2.as_mut() {
            for (_, _, p) in h.waiting.drain(..) {
                if p.counted {
                    cx.ctr.abandoned();
                }
            }
        }
        self.phase = Phase::Closing;
    }

    /// Tells the counters how many streams are open now.
    fn h2_count_streams(&mut self, cx: &mut Cx) {
        if let Some(h) = self.h2.as_mut() {
            let now = h.conn.active() as u64;
            if now != h.open {
                cx.ctr.h2_streams(h.open, now);
                h.open = now;
            }
        }
    }

    /// A request arrived in full on `stream`: decide it as an HTTP/1.1 one, answer now or
    /// when its latency has passed.
    fn h2_serve(&mut self, stream: u32, cx: &mut Cx) {
        let Some(h) = self.h2.as_ref() else {
            return;
        };
        let Some(head) = h.conn.head(stream) else {
            return;
        };
        let grpc = head
            .get(b"content-type")
            .is_some_and(|v| v.starts_with(http2::grpc::CONTENT_TYPE.as_bytes()));
        if grpc && head.path() != GRPC_UNARY {
            let deadline = head
                .get(b"grpc-timeout")
                .and_then(http2::grpc::parse_timeout);
            let streaming = head.path() == GRPC_STREAM;
            self.served += 1;
            if streaming {
                self.grpc_stream(stream, deadline, cx);
            } else {
                self.grpc_trailers_only(stream, GRPC_UNIMPLEMENTED, cx);
            }
            return;
        }
        let req = Req {
            kind: classify(head.path(), cx.prof),
            head_only: head.method() == b"HEAD",
            keep_alive: true,
            ka_header: false,
            debug: head.get(b"x-backend-debug").is_some(),
            long: LongLived::No,
            grpc,
        };
        self.served += 1;
        let (p, at) = self.decide(req, 0, cx);
        if at == 0 {
            self.h2_respond(stream, p, cx);
        } else if let Some(h) = self.h2.as_mut() {
            h.waiting.push((at, stream, p));
            if h.armed == 0 || at < h.armed {
                h.armed = at;
                self.arm(cx, at);
            }
        }
        let close_after = cx.prof.close_after;
        if close_after > 0 && self.served >= close_after {
            self.h2_goaway(cx);
        }
    }

    /// The connection's timer came due: answer every stream whose deadline has passed, and
    /// arm the timer for the next.
    pub(super) fn h2_timer(&mut self, cx: &mut Cx) {
        let now = mono_ns();
        let mut next = self.grpc_timer(now, cx);
        let mut i = 0;
        loop {
            let Some(h) = self.h2.as_mut() else {
                return;
            };
            let Some(&(at, stream, p)) = h.waiting.get(i) else {
                h.armed = next;
                break;
            };
            if at <= now {
                h.waiting.swap_remove(i);
                self.h2_respond(stream, p, cx);
            } else {
                if next == 0 || at < next {
                    next = at;
                }
                i += 1;
            }
        }
        if next != 0 {
            self.arm(cx, next);
        }
    }

    /// Arms the connection's timer for `at` if that is sooner than what it waits for.
    fn h2_arm(&mut self, at: u64, cx: &mut Cx) {
        let Some(h) = self.h2.as_mut() else {
            return;
        };
        if h.armed == 0 || at < h.armed {
            h.armed = at;
            self.arm(cx, at);
        }
    }

    /// The gRPC streams' pushes and deadlines that are due; returns the earliest left (0:
    /// none).
    fn grpc_timer(&mut self, now: u64, cx: &mut Cx) -> u64 {
        let prof = cx.prof;
        let Some(h) = self.h2.as_mut() else {
            return 0;
        };
        let rate = prof.push_stream;
        let mut next = 0;
        let mut k = 0;
        while k < h.grpc.len() {
            let g = &mut h.grpc[k];
            let mut status = None;
            if g.deadline != 0 && now >= g.deadline {
                status = Some(GRPC_DEADLINE);
            } else {
                let mut n = 0;
                while g.next != 0 && now >= g.next && n < 100 {
                    if h.conn.queued(g.stream).is_some_and(|q| q > GRPC_BACKLOG) {
                        break;
                    }
                    n += 1;
                    g.next += (1e9 / rate) as u64;
                    let mut m = Vec::with_capacity(prof.push_size as usize + 5);
                    http2::grpc::message(&mut m, prof.push_size as u32, |o| {
                        o.resize(o.len() + prof.push_size as usize, b'x')
                    });
                    if !h.conn.send_data(g.stream, &m) {
                        break;
                    }
                    g.pushed += 1;
                    cx.ctr.stream_out(&mut g.life, false);
                    if prof.push_count > 0 && g.pushed >= prof.push_count {
                        status = Some(GRPC_OK);
                        break;
                    }
                }
                if g.next != 0 && now >= g.next {
                    g.next = now + (1e9 / rate) as u64;
                }
            }
            if let Some(st) = status {
                let g = h.grpc.swap_remove(k);
                grpc_end(&mut h.conn, &mut h.block, g, st, cx.ctr);
                continue;
            }
            for t in [g.next, g.deadline] {
                if t != 0 && (next == 0 || t < next) {
                    next = t;
                }
            }
            k += 1;
        }
        next
    }

    /// Starts a server-streaming call: its HEADERS now, its messages at the profile's push
    /// rate, its end at `push_count` (OK) or at its deadline (DEADLINE_EXCEEDED).
    fn grpc_stream(&mut self, stream: u32, deadline: Option<std::time::Duration>, cx: &mut Cx) {
        let prof = cx.prof;
        let Some(h) = self.h2.as_mut() else {
            return;
        };
        grpc_head(&mut h.block, prof);
        if !h.conn.respond_open(stream, &h.block) {
            return;
        }
        let now = mono_ns();
        let mut life = cx.ctr.stream_opened(StreamProtocol::GrpcStream, now);
        cx.ctr.stream_in(&mut life);
        let rate = prof.push_stream;
        let g = GrpcStream {
            stream,
            next: if rate > 0.0 {
                now + (1e9 / rate) as u64
            } else {
                0
            },
            pushed: 0,
            deadline: deadline.map_or(0, |d| now + d.as_nanos() as u64),
            life,
        };
        let at = [g.next, g.deadline].into_iter().filter(|&t| t != 0).min();
        h.grpc.push(g);
        if self.draining || cx.draining {
            self.h2_grpc_end_all(super::long::UNAVAILABLE, cx);
        } else if let Some(at) = at {
            self.h2_arm(at, cx);
        }
    }

    /// Answers a gRPC call at once with no message and `status` (Trailers-Only).
    fn grpc_trailers_only(&mut self, stream: u32, status: u16, cx: &mut Cx) {
        let prof = cx.prof;
        let Some(h) = self.h2.as_mut() else {
            return;
        };
        grpc_head(&mut h.block, prof);
        http2::hpack::field(&mut h.block, "grpc-status", &status.to_string());
        if h.conn.respond(stream, &h.block, 0, Body::Static(b"")) {
            cx.ctr.grpc_unary(status, false);
        }
    }

    /// Ends every gRPC stream of the connection with `status` (a drain, an operator's order).
    pub(super) fn h2_grpc_end_all(&mut self, status: u16, cx: &mut Cx) {
        let Some(h) = self.h2.as_mut() else {
            return;
        };
        for g in std::mem::take(&mut h.grpc) {
            grpc_end(&mut h.conn, &mut h.block, g, status, cx.ctr);
        }
    }

    /// A gRPC stream that ended without our trailers (the client reset it, or it broke the
    /// protocol): counted as ended `by`.
    fn grpc_gone(&mut self, stream: u32, by: ClosedBy, cx: &mut Cx) {
        let Some(h) = self.h2.as_mut() else {
            return;
        };
        if let Some(k) = h.grpc.iter().position(|g| g.stream == stream) {
            let g = h.grpc.swap_remove(k);
            cx.ctr
                .stream_closed(g.life, mono_ns(), by, StreamEnd::default());
        }
    }

    /// Queues the response's HEADERS (the head's fields, Content-Length, the debug delay) and
    /// its body, and counts it.
    fn h2_respond(&mut self, stream: u32, p: Pending, cx: &mut Cx) {
        let Some(h) = self.h2.as_mut() else {
            return;
        };
        let prof = cx.prof;
        let head = &prof.heads[p.head as usize];
        if p.req.grpc && head.code == 200 {
            // A unary call: one message of the profile's body, then OK.
            grpc_head(&mut h.block, prof);
            let len = body_len(p.body, prof);
            let mut m = Vec::with_capacity(len as usize + 5);
            http2::grpc::message(&mut m, len as u32, |o| {
                fill_body(prof, p.body, 0, len as usize, o)
            });
            let mut trailers = Vec::with_capacity(16);
            http2::hpack::field(&mut trailers, "grpc-status", "0");
            if h.conn.respond_open(stream, &h.block)
                && h.conn.send_data(stream, &m)
                && h.conn.send_trailers(stream, &trailers)
            {
                if p.counted {
                    cx.ctr.answered(200);
                    cx.ctr.h2(H2Count::Request);
                }
                cx.ctr.grpc_unary(GRPC_OK, true);
            } else if p.counted {
                cx.ctr.abandoned();
            }
            return;
        }
        if p.req.grpc {
            // Not 200: the status alone, as a proxy's error would come.
            cx.ctr
                .grpc_unary(model::stream::grpc_code_of_http(head.code), false);
        }
        let len = if head.bodyless {
            0
        } else {
            body_len(p.body, prof)
        };
        let b = &mut h.block;
        b.clear();
        b.extend_from_slice(&head.h2);
        if !head.bodyless {
            // content-length (static index 28), literal without indexing.
            http2::hpack::integer(b, 0, 4, 28);
            literal_decimal(b, len);
        }
        if p.req.debug {
            b.push(0);
            http2::hpack::string(b, b"x-backend-delay-ns");
            literal_decimal(b, p.delay);
        }
        let body = if p.req.head_only { 0 } else { len };
        if h.conn.respond(stream, &h.block, body, p.body) {
            if p.counted {
                cx.ctr.answered(head.code);
                cx.ctr.h2(H2Count::Request);
            }
        } else if p.counted {
            cx.ctr.abandoned();
        }
    }

    /// Writes response bodies while the client's windows allow and the output is not backing
    /// up.
    fn h2_pump(&mut self, cx: &mut Cx) {
        let limit = self.wpos + WBUF_HIGH;
        if let Some(h) = self.h2.as_mut() {
            let prof = cx.prof;
            h.conn.pump(limit, |body, off, n, out| {
                fill_body(prof, body, off, n, out)
            });
        }
        self.h2_count_streams(cx);
    }
}

/// A gRPC response's header block: 200, the gRPC content type, the instance's name.
fn grpc_head(b: &mut Vec<u8>, prof: &Compiled) {
    b.clear();
    http2::hpack::status(b, 200);
    http2::hpack::field(b, "content-type", http2::grpc::CONTENT_TYPE);
    http2::hpack::field(b, "server", "proxybench");
    http2::hpack::field(b, "x-backend", &prof.name);
}

/// Ends gRPC stream `g` with trailers carrying `status`, and counts its end as ours.
fn grpc_end(
    conn: &mut ServerConn<Body>,
    block: &mut Vec<u8>,
    g: GrpcStream,
    status: u16,
    ctr: &Slot,
) {
    block.clear();
    http2::hpack::field(block, "grpc-status", &status.to_string());
    let by = if conn.send_trailers(g.stream, block) {
        ClosedBy::Server
    } else {
        ClosedBy::Dropped
    };
    ctr.stream_closed(
        g.life,
        mono_ns(),
        by,
        StreamEnd {
            grpc_status: (by == ClosedBy::Server).then_some(status),
            ..StreamEnd::default()
        },
    );
}

/// A body's length in bytes.
fn body_len(b: Body, prof: &Compiled) -> u64 {
    match b {
        Body::Name => prof.name_body.len() as u64,
        Body::Pattern(n) => n,
        Body::Static(s) => s.len() as u64,
    }
}

/// Appends bytes `off..off + n` of a body.
fn fill_body(prof: &Compiled, b: Body, off: u64, n: usize, out: &mut Vec<u8>) {
    let whole: &[u8] = match b {
        Body::Name => &prof.name_body,
        Body::Static(s) => s,
        Body::Pattern(_) => {
            let (mut off, mut left) = (off, n as u64);
            while left > 0 {
                let c = body_chunk(off, left);
                out.extend_from_slice(c);
                off += c.len() as u64;
                left -= c.len() as u64;
            }
            return;
        }
    };
    let start = (off as usize).min(whole.len());
    let end = (start + n).min(whole.len());
    out.extend_from_slice(&whole[start..end]);
}

/// An HPACK string literal (no Huffman) of `n` in decimal: at most 20 digits, so one length
/// byte.
fn literal_decimal(out: &mut Vec<u8>, n: u64) {
    let at = out.len();
    out.push(0);
    put_decimal(out, n);
    out[at] = (out.len() - at - 1) as u8;
}
