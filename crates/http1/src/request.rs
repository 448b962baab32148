//! Request-body framing for a server: reads past a body framed by Content-Length or chunked
//! coding without keeping it (the backend discards bodies).

use crate::chunked::ChunkedDecoder;
use crate::head::BodyKind;
use crate::Discard;

/// The most trailer bytes a chunked request body may carry.
pub const MAX_REQUEST_TRAILERS: usize = 64 * 1024;

/// Progress of a body decoder over some bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feed {
    /// All these bytes were body; more is needed.
    More(usize),
    /// The body ended after this many bytes.
    Done(usize),
    /// The chunked framing is broken.
    Invalid,
}

/// Reads past a request body without keeping it.
#[derive(Debug, Clone, Default)]
pub enum Decoder {
    /// No body (or it has ended).
    #[default]
    Done,
    /// This many bytes remain.
    Length(u64),
    /// Chunked.
    Chunked(ChunkedDecoder),
}

impl Decoder {
    /// A decoder for a body framed as `kind`.
    pub fn new(kind: BodyKind) -> Decoder {
        match kind {
            BodyKind::None => Decoder::Done,
            BodyKind::Length(n) => Decoder::Length(n),
            BodyKind::Chunked => Decoder::Chunked(ChunkedDecoder::new(MAX_REQUEST_TRAILERS)),
        }
    }

    /// Prepares for the next body, keeping a chunked decoder's buffer when there is one.
    pub fn start(&mut self, kind: BodyKind) {
        match (kind, &mut *self) {
            (BodyKind::Chunked, Decoder::Chunked(d)) => d.reset(MAX_REQUEST_TRAILERS),
            _ => *self = Decoder::new(kind),
        }
    }

    /// True when no body bytes are expected.
    pub fn is_done(&self) -> bool {
        matches!(self, Decoder::Done)
    }

    /// Consumes body bytes from the start of `data`.
    pub fn feed(&mut self, data: &[u8]) -> Feed {
        match self {
            Decoder::Done => Feed::Done(0),
            Decoder::Length(left) => {
                let take = (*left).min(data.len() as u64);
                *left -= take;
                if *left == 0 {
                    *self = Decoder::Done;
                    Feed::Done(take as usize)
                } else {
                    Feed::More(take as usize)
                }
            }
            Decoder::Chunked(d) => match d.feed(data, &mut Discard) {
                Ok((n, true)) => {
                    *self = Decoder::Done;
                    Feed::Done(n)
                }
                Ok((n, false)) => Feed::More(n),
                Err(_) => Feed::Invalid,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_bodies() {
        let mut d = Decoder::new(BodyKind::Length(10));
        assert_eq!(d.feed(b"12345"), Feed::More(5));
        assert_eq!(d.feed(b"67890GET"), Feed::Done(5));
        assert!(d.is_done());
        assert_eq!(d.feed(b"GET"), Feed::Done(0));
    }

    #[test]
    fn chunked_bodies_byte_by_byte_and_whole() {
        let body: &[u8] =
            b"5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nTrailer: x\r\n\r\nNEXT";
        let end = body.len() - 4;
        let mut d = Decoder::new(BodyKind::Chunked);
        assert_eq!(d.feed(body), Feed::Done(end));
        d.start(BodyKind::Chunked);
        for (i, b) in body.iter().enumerate() {
            match d.feed(std::slice::from_ref(b)) {
                Feed::More(1) => assert!(i < end - 1),
                Feed::Done(1) => {
                    assert_eq!(i, end - 1);
                    break;
                }
                other => panic!("byte {i}: {other:?}"),
            }
        }
        let mut d = Decoder::new(BodyKind::Chunked);
        assert_eq!(d.feed(b"0\r\n\r\n"), Feed::Done(5));
        for bad in [
            &b"x\r\n"[..],
            b"5\r\nhelloX",
            b"\r\n",
            b"fffffffffffffffff\r\n",
            b"0\r\nno colon\r\n",
        ] {
            let mut d = Decoder::new(BodyKind::Chunked);
            assert_eq!(
                d.feed(bad),
                Feed::Invalid,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
