//! HPACK (RFC 7541). Decoding (dynamic table, Huffman) is `loona-hpack`'s; encoding a request is
//! done here, once per load: the static table's indices for the pseudo-headers it has, and
//! literals "without indexing" for the rest, so the block is the same bytes on every request and
//! on every connection (no dynamic-table state on our side).

/// A header block HPACK cannot decode: the compression context is lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HpackError;

/// A response header block decoder with its dynamic table (one per connection).
pub struct Decoder(loona_hpack::Decoder<'static>);

impl std::fmt::Debug for Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("hpack::Decoder")
    }
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new()
    }
}

impl Decoder {
    /// A decoder with the default 4096-byte dynamic table (what a client advertises by default).
    pub fn new() -> Decoder {
        let mut d = loona_hpack::Decoder::new();
        d.set_max_allowed_table_size(4096);
        Decoder(d)
    }

    /// Decodes one complete header block, calling `cb(name, value)` for each field in order.
    /// An error means the compression context is lost (a connection error, COMPRESSION_ERROR).
    pub fn decode(
        &mut self,
        block: &[u8],
        mut cb: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), HpackError> {
        self.0
            .decode_with_cb(block, |n, v| cb(&n, &v))
            .map_err(|_| HpackError)
    }
}

/// Appends an HPACK integer with an `n`-bit prefix, `first` holding the bits above it (5.1).
pub fn integer(out: &mut Vec<u8>, first: u8, n: u8, mut v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        out.push(first | v as u8);
        return;
    }
    out.push(first | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.push(v as u8);
}

/// Appends a string literal without Huffman coding (5.2).
pub fn string(out: &mut Vec<u8>, s: &[u8]) {
    integer(out, 0, 7, s.len());
    out.extend_from_slice(s);
}

/// Static-table indices (Appendix A) used for request fields.
fn static_index(name: &str, value: &str) -> (usize, bool) {
    match (name, value) {
        (":authority", _) => (1, false),
        (":method", "GET") => (2, true),
        (":method", "POST") => (3, true),
        (":method", _) => (2, false),
        (":path", "/") => (4, true),
        (":path", "/index.html") => (5, true),
        (":path", _) => (4, false),
        (":scheme", "http") => (6, true),
        (":scheme", "https") => (7, true),
        ("accept-encoding", "gzip, deflate") => (16, true),
        ("content-length", _) => (28, false),
        ("content-type", _) => (31, false),
        ("user-agent", _) => (58, false),
        ("accept", _) => (19, false),
        ("authorization", _) => (23, false),
        ("cookie", _) => (32, false),
        _ => (0, false),
    }
}

/// Encodes one field: indexed when the static table has name and value, else a literal
/// without indexing (with the name indexed when the static table has it) (6.1, 6.2.2).
pub fn field(out: &mut Vec<u8>, name: &str, value: &str) {
    match static_index(name, value) {
        (i, true) => integer(out, 0x80, 7, i),
        (0, false) => {
            out.push(0);
            string(out, name.as_bytes());
            string(out, value.as_bytes());
        }
        (i, false) => {
            integer(out, 0, 4, i);
            string(out, value.as_bytes());
        }
    }
}

/// Header names HTTP/2 forbids (RFC 9113 8.2.2), dropped from requests; `host` becomes
/// `:authority`.
pub fn connection_specific(name: &str) -> bool {
    matches!(
        name,
        "connection" | "keep-alive" | "proxy-connection" | "transfer-encoding" | "upgrade" | "host"
    )
}

/// The header block of a request: the pseudo-headers, then `headers` with their names
/// lower-cased and the connection-specific ones dropped.
pub fn request_block(
    method: &str,
    scheme: &str,
    authority: &str,
    path: &str,
    headers: &[(String, String)],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    field(&mut out, ":method", method);
    field(&mut out, ":scheme", scheme);
    field(&mut out, ":authority", authority);
    field(&mut out, ":path", path);
    for (n, v) in headers {
        let n = n.to_ascii_lowercase();
        if connection_specific(&n) {
            continue;
        }
        field(&mut out, &n, v);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn integers_rfc7541_c1() {
        let mut out = Vec::new();
        integer(&mut out, 0, 5, 10); // C.1.1
        assert_eq!(out, [0b01010]);
        out.clear();
        integer(&mut out, 0, 5, 1337); // C.1.2
        assert_eq!(out, [0b11111, 0b1001_1010, 0b0000_1010]);
        out.clear();
        integer(&mut out, 0, 8, 42); // C.1.3
        assert_eq!(out, [42]);
    }

    #[test]
    fn literal_without_indexing_rfc7541_c2_2() {
        let mut out = Vec::new();
        field(&mut out, ":path", "/sample/path");
        assert_eq!(out, hex("040c 2f73 616d 706c 652f 7061 7468"));
    }

    #[test]
    fn indexed_field_rfc7541_c2_4() {
        let mut out = Vec::new();
        field(&mut out, ":method", "GET");
        assert_eq!(out, [0x82]);
    }

    #[test]
    fn decodes_rfc7541_c4_huffman_requests() {
        // C.4.1 to C.4.3: three requests with Huffman coding sharing one dynamic table.
        let mut d = Decoder::new();
        let blocks = [
            "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
            "8286 84be 5886 a8eb 1064 9cbf",
            "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
        ];
        let mut got = Vec::new();
        for b in blocks {
            let mut fields = Vec::new();
            d.decode(&hex(b), |n, v| {
                fields.push(format!(
                    "{}: {}",
                    String::from_utf8_lossy(n),
                    String::from_utf8_lossy(v)
                ))
            })
            .unwrap();
            got.push(fields);
        }
        assert_eq!(got[0][3], ":authority: www.example.com");
        assert_eq!(got[1][4], "cache-control: no-cache");
        assert_eq!(got[2][1], ":scheme: https");
        assert_eq!(got[2][4], "custom-key: custom-value");
    }

    #[test]
    fn decodes_rfc7541_c6_huffman_responses() {
        // C.6.1 with a 256-byte table: the first response.
        let mut d = Decoder::new();
        let block = hex(
            "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
             2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        );
        let mut fields = Vec::new();
        d.decode(&block, |n, v| fields.push((n.to_vec(), v.to_vec())))
            .unwrap();
        assert_eq!(fields[0], (b":status".to_vec(), b"302".to_vec()));
        assert_eq!(
            fields[3],
            (b"location".to_vec(), b"https://www.example.com".to_vec())
        );
        assert!(d
            .decode(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff], |_, _| {})
            .is_err());
    }

    #[test]
    fn request_blocks_decode_back() {
        let headers = vec![
            ("X-Trace".to_string(), "1".to_string()),
            ("Host".to_string(), "dropped".to_string()),
            ("User-Agent".to_string(), "pb".to_string()),
        ];
        let block = request_block("GET", "https", "a.example:8443", "/tea?x=1", &headers);
        let mut fields = Vec::new();
        Decoder::new()
            .decode(&block, |n, v| {
                fields.push((
                    String::from_utf8(n.to_vec()).unwrap(),
                    String::from_utf8(v.to_vec()).unwrap(),
                ))
            })
            .unwrap();
        let want = [
            (":method", "GET"),
            (":scheme", "https"),
            (":authority", "a.example:8443"),
            (":path", "/tea?x=1"),
            ("x-trace", "1"),
            ("user-agent", "pb"),
        ];
        assert_eq!(fields.len(), want.len());
        for (g, w) in fields.iter().zip(want) {
            assert_eq!((g.0.as_str(), g.1.as_str()), w);
        }
    }
}
