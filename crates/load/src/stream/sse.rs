//! A server-sent events client connection (the WHATWG `text/event-stream` format over one long
//! HTTP/1.1 response): the request, the response head (200 and the event-stream type, else a
//! refusal counted by its status), then the body, de-chunked when chunked, cut into lines and
//! events. An event is dispatched at a blank line after at least one `data` field, as a browser
//! dispatches it; comments (`:` lines) keep a connection alive and are not events. The last
//! `id` seen goes back as `Last-Event-ID` when the slot reconnects.

use super::io::Transport;
use super::record::Rec;
use super::ws::end_io;
use super::{Shared, Step};
use http1::ChunkedDecoder;
use model::stream::EndKind;
use std::io::{self, Read, Write};

/// The longest line kept whole for its field name and an `id` value; longer lines (large
/// `data`) are only scanned for their end.
const LINE_KEEP: usize = 256;

/// How the response body is framed.
enum Body {
    /// Before the head is whole.
    Head,
    /// `Transfer-Encoding: chunked`.
    Chunked(Box<ChunkedDecoder>),
    /// `Content-Length`: bytes left.
    Length(u64),
    /// Until the server closes.
    UntilClose,
}

/// One SSE connection.
pub(super) struct Sse {
    out: Vec<u8>,
    out_pos: usize,
    head: Vec<u8>,
    body: Body,
    events: Events,
    /// When the last event arrived (0: none yet), for the gaps between them.
    last_event: u64,
}

/// The event-stream parser's state, and what it found.
#[derive(Default)]
struct Events {
    line: Vec<u8>,
    /// The line is longer than [`LINE_KEEP`]: its start was kept, the rest skipped.
    long: bool,
    /// The previous byte was a CR (a CRLF's LF ends no second line).
    after_cr: bool,
    /// The event being read has a `data` field.
    has_data: bool,
    /// The last `id` field.
    last_id: Option<Vec<u8>>,
    /// Events dispatched by the last feed.
    dispatched: u64,
}

impl Events {
    fn feed(&mut self, data: &[u8]) {
        for &b in data {
            if b == b'\n' && self.after_cr {
                self.after_cr = false;
                continue;
            }
            self.after_cr = b == b'\r';
            if b == b'\n' || b == b'\r' {
                self.line_end();
            } else if self.line.len() < LINE_KEEP {
                self.line.push(b);
            } else {
                self.long = true;
            }
        }
    }

    fn line_end(&mut self) {
        let line = std::mem::take(&mut self.line);
        let long = std::mem::take(&mut self.long);
        if line.is_empty() && !long {
            if std::mem::take(&mut self.has_data) {
                self.dispatched += 1;
            }
        } else if line.first() != Some(&b':') {
            let (name, value) = match line.iter().position(|&b| b == b':') {
                Some(i) => {
                    let v = &line[i + 1..];
                    (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
                }
                None => (&line[..], &b""[..]),
            };
            match name {
                b"data" => self.has_data = true,
                b"id" if !long && !value.contains(&0) => self.last_id = Some(value.to_vec()),
                _ => {}
            }
        }
        self.line = line;
        self.line.clear();
    }
}

/// What the response head said beside its framing.
#[derive(Default)]
struct Head {
    event_stream: bool,
}

impl http1::Sink for Head {
    fn header(&mut self, name: &[u8], value: &[u8]) {
        if name.eq_ignore_ascii_case(b"content-type") {
            let mime = value.split(|&b| b == b';').next().unwrap_or_default();
            self.event_stream = http1::head::trim(mime).eq_ignore_ascii_case(b"text/event-stream");
        }
    }
}

/// Body bytes into the event parser.
struct Into<'a>(&'a mut Events);

impl http1::Sink for Into<'_> {
    fn body(&mut self, data: &[u8]) {
        self.0.feed(data);
    }
}

impl Sse {
    /// A connection about to send its request; `last_id` is the slot's last event id, sent
    /// as `Last-Event-ID` on a reconnect.
    pub(super) fn new(sh: &Shared, last_id: Option<&[u8]>) -> Sse {
        let mut out = Vec::with_capacity(sh.head_template.len() + 96);
        out.extend_from_slice(&sh.head_template);
        out.extend_from_slice(b"Accept: text/event-stream\r\nCache-Control: no-cache\r\n");
        if let Some(id) = last_id {
            out.extend_from_slice(b"Last-Event-ID: ");
            out.extend_from_slice(id);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        Sse {
            out,
            out_pos: 0,
            head: Vec::new(),
            body: Body::Head,
            events: Events::default(),
            last_event: 0,
        }
    }

    /// The last event id seen (for the next connection of the slot).
    pub(super) fn last_id(&self) -> Option<&[u8]> {
        self.events.last_id.as_deref()
    }

    /// Writes the request.
    pub(super) fn flush(&mut self, io: &mut Transport) -> Step {
        while self.out_pos < self.out.len() {
            match io.write(&self.out[self.out_pos..]) {
                Ok(n) => self.out_pos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Step::Continue,
                Err(e) => return end_io(e),
            }
        }
        match io.flush() {
            Ok(()) => Step::Continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Step::Continue,
            Err(e) => end_io(e),
        }
    }

    /// The request is not all written yet.
    pub(super) fn wants_write(&self) -> bool {
        self.out_pos < self.out.len()
    }

    /// Reads what arrived: the head, then events, until the socket is drained.
    pub(super) fn readable(
        &mut self,
        io: &mut Transport,
        now: u64,
        rec: &mut Rec,
        buf: &mut [u8],
    ) -> Step {
        loop {
            let n = match io.read(buf) {
                Ok(0) => return match self.body {
                    Body::Head => Step::End(
                        EndKind::Fin,
                        Some("the server closed the connection before answering".into()),
                        None,
                    ),
                    Body::UntilClose => Step::End(
                        EndKind::Complete,
                        Some("the server ended the event stream (closed it)".into()),
                        None,
                    ),
                    _ => Step::End(
                        EndKind::Fin,
                        Some(
                            "the server closed the connection in the middle of the event stream"
                                .into(),
                        ),
                        None,
                    ),
                },
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Step::Continue,
                Err(e) => return end_io(e),
            };
            let data = &buf[..n];
            if let Body::Head = self.body {
                self.head.extend_from_slice(data);
                let mut h = Head::default();
                let head = match http1::parse_response(&self.head, &mut h) {
                    Ok(Some(head)) => head,
                    Ok(None) if self.head.len() > http1::MAX_HEAD => {
                        return Step::End(
                            EndKind::Protocol,
                            Some("a response head over 64 KiB".into()),
                            None,
                        )
                    }
                    Ok(None) => continue,
                    Err(m) => {
                        return Step::End(
                            EndKind::Protocol,
                            Some(format!("the response is not HTTP/1.1: {m}")),
                            None,
                        )
                    }
                };
                if head.is_interim() {
                    self.head.drain(..head.len);
                    continue;
                }
                if head.status != 200 || !h.event_stream {
                    return Step::Refused(
                        head.status,
                        if head.status == 200 {
                            "a 200 that is not text/event-stream".to_string()
                        } else {
                            format!("the event stream was answered {}", head.status)
                        },
                    );
                }
                self.body = if head.chunked {
                    Body::Chunked(Box::new(ChunkedDecoder::new(http1::MAX_HEAD)))
                } else if let Some(n) = head.content_length {
                    Body::Length(n)
                } else {
                    Body::UntilClose
                };
                let rest = self.head.split_off(head.len);
                self.head = Vec::new();
                let step = self.body_bytes(&rest, now, rec);
                if !matches!(step, Step::Continue) {
                    return step;
                }
                // The caller marks the connection open before more bytes are read.
                return Step::Opened;
            }
            let step = self.body_bytes(data, now, rec);
            if !matches!(step, Step::Continue) {
                return step;
            }
        }
    }

    /// Body bytes into events; `Step::End(Complete)` when the body ended.
    fn body_bytes(&mut self, data: &[u8], now: u64, rec: &mut Rec) -> Step {
        let ended = match &mut self.body {
            Body::Head => false,
            Body::Chunked(dec) => match dec.feed(data, &mut Into(&mut self.events)) {
                Ok((_, end)) => end,
                Err(e) => {
                    return Step::End(
                        EndKind::Protocol,
                        Some(format!("a bad chunked body: {}", e.message())),
                        None,
                    )
                }
            },
            Body::Length(left) => {
                let n = (*left).min(data.len() as u64) as usize;
                self.events.feed(&data[..n]);
                *left -= n as u64;
                *left == 0
            }
            Body::UntilClose => {
                self.events.feed(data);
                false
            }
        };
        for _ in 0..std::mem::take(&mut self.events.dispatched) {
            rec.received(now, 0);
            rec.msgs.pushed += 1;
            if self.last_event != 0 {
                rec.gap(now.saturating_sub(self.last_event));
            }
            self.last_event = now;
        }
        if ended {
            return Step::End(
                EndKind::Complete,
                Some("the server ended the event stream".into()),
                None,
            );
        }
        Step::Continue
    }
}

#[cfg(test)]
mod tests {
    use super::Events;

    #[test]
    fn events_are_dispatched_at_blank_lines_after_data() {
        let stream = b": hello\n\ndata: a\n\nid: 7\ndata: b\r\ndata: c\r\n\r\nevent: x\n\ndata\n\n";
        for cut in 0..stream.len() {
            let mut e = Events::default();
            e.feed(&stream[..cut]);
            e.feed(&stream[cut..]);
            // The comment and the event without data are not events.
            assert_eq!(e.dispatched, 3, "cut at {cut}");
            assert_eq!(e.last_id.as_deref(), Some(&b"7"[..]));
        }
        let mut e = Events::default();
        let long = format!("data: {}\n\n", "x".repeat(10_000));
        e.feed(long.as_bytes());
        assert_eq!(e.dispatched, 1);
    }
}
