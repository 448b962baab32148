//! HPACK (RFC 7541): a decoder (dynamic table, Huffman with a four-bit state machine), and the
//! encoding of a request, done once per load ([`RequestHeaders`]): the static table's indices
//! for the fields it has; the others are added to the server's dynamic table by a connection's
//! first request and named by their index (one byte each) in every later one, as h2load and
//! browsers do, so a repeated request costs the server a few bytes to read and nothing to copy.
//! [`request_block`] is the stateless form (literals without indexing), for tests and fuzzing.

use crate::tables;

/// A header block HPACK cannot decode: the compression context is lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HpackError;

/// The dynamic table size a client has by default (SETTINGS_HEADER_TABLE_SIZE).
pub const TABLE_SIZE: usize = 4096;

/// A dynamic table entry: name and value.
type Entry = (Box<[u8]>, Box<[u8]>);

/// A response header block decoder with its dynamic table (one per connection). Values are
/// decoded only when asked for (or when the table keeps them): a load needs `:status`, not the
/// Date header, so the Huffman decoding of most values is skipped.
#[derive(Debug)]
pub struct Decoder {
    /// Newest entry first.
    table: std::collections::VecDeque<Entry>,
    size: usize,
    max: usize,
    name: Vec<u8>,
    value: Vec<u8>,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new()
    }
}

/// Where a field's name is.
#[derive(Clone, Copy)]
enum Name {
    Static(usize),
    Dynamic(usize),
    Scratch,
}

impl Decoder {
    /// A decoder with the default 4096-byte dynamic table.
    pub fn new() -> Decoder {
        Decoder {
            table: std::collections::VecDeque::new(),
            size: 0,
            max: TABLE_SIZE,
            name: Vec::with_capacity(64),
            value: Vec::with_capacity(256),
        }
    }

    /// Decodes one complete header block, calling `cb(name, value)` for each field in order,
    /// with every value decoded.
    pub fn decode(
        &mut self,
        block: &[u8],
        mut cb: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), HpackError> {
        self.decode_some(block, |_| true, |n, v| cb(n, v.unwrap_or_default()))
    }

    /// Decodes one complete header block, calling `cb(name, value)` for each field; `value` is
    /// `None` when `want(name)` is false and the field's value did not have to be decoded.
    pub fn decode_some(
        &mut self,
        block: &[u8],
        want: impl Fn(&[u8]) -> bool,
        mut cb: impl FnMut(&[u8], Option<&[u8]>),
    ) -> Result<(), HpackError> {
        let mut p = 0;
        let mut fields = 0;
        while p < block.len() {
            let b = block[p];
            if b & 0x80 != 0 {
                let (i, n) = integer_at(&block[p..], 7)?;
                p += n;
                let (name, value) = self.entry(i)?;
                cb(name, Some(value));
            } else if b & 0xc0 == 0x40 {
                let (i, n) = integer_at(&block[p..], 6)?;
                p += n;
                let name = self.name_at(i, block, &mut p)?;
                p += string_at(&block[p..], &mut self.value)?;
                let name: Box<[u8]> = self.name_of(name).into();
                let value: Box<[u8]> = self.value.as_slice().into();
                cb(&name, Some(&value));
                self.insert(name, value);
            } else if b & 0xe0 == 0x20 {
                if fields > 0 {
                    return Err(HpackError);
                }
                let (size, n) = integer_at(&block[p..], 5)?;
                p += n;
                if size > TABLE_SIZE {
                    return Err(HpackError);
                }
                self.max = size;
                self.evict(0);
                continue;
            } else {
                // Without indexing (0000) or never indexed (0001): a 4-bit name index.
                let (i, n) = integer_at(&block[p..], 4)?;
                p += n;
                let name = self.name_at(i, block, &mut p)?;
                if want(self.name_of(name)) {
                    p += string_at(&block[p..], &mut self.value)?;
                    cb(self.name_of(name), Some(&self.value));
                } else {
                    p += skip_string(&block[p..])?;
                    cb(self.name_of(name), None);
                }
            }
            fields += 1;
        }
        Ok(())
    }

    /// Entry `i` of the static and dynamic tables (2.3.3).
    fn entry(&self, i: usize) -> Result<(&[u8], &[u8]), HpackError> {
        match i {
            0 => Err(HpackError),
            1..=61 => Ok(tables::STATIC[i - 1]),
            _ => self
                .table
                .get(i - 62)
                .map(|(n, v)| (&n[..], &v[..]))
                .ok_or(HpackError),
        }
    }

    /// The name of a literal field: indexed (`i` > 0) or a string that follows.
    fn name_at(&mut self, i: usize, block: &[u8], p: &mut usize) -> Result<Name, HpackError> {
        match i {
            0 => {
                *p += string_at(&block[*p..], &mut self.name)?;
                Ok(Name::Scratch)
            }
            1..=61 => Ok(Name::Static(i - 1)),
            _ if i - 62 < self.table.len() => Ok(Name::Dynamic(i - 62)),
            _ => Err(HpackError),
        }
    }

    fn name_of(&self, n: Name) -> &[u8] {
        match n {
            Name::Static(k) => tables::STATIC[k].0,
            Name::Dynamic(k) => &self.table[k].0,
            Name::Scratch => &self.name,
        }
    }

    /// Adds an entry, evicting the oldest ones to make room (4.4).
    fn insert(&mut self, name: Box<[u8]>, value: Box<[u8]>) {
        let size = name.len() + value.len() + 32;
        self.evict(size);
        if size <= self.max {
            self.size += size;
            self.table.push_front((name, value));
        }
    }

    /// Evicts until `room` more bytes fit (everything when they cannot).
    fn evict(&mut self, room: usize) {
        while self.size + room > self.max {
            match self.table.pop_back() {
                Some((n, v)) => self.size -= n.len() + v.len() + 32,
                None => break,
            }
        }
    }
}

/// Decodes an integer with an `n`-bit prefix at the start of `b`: (value, bytes used) (5.1).
fn integer_at(b: &[u8], n: u8) -> Result<(usize, usize), HpackError> {
    let max = (1usize << n) - 1;
    let first = *b.first().ok_or(HpackError)? as usize & max;
    if first < max {
        return Ok((first, 1));
    }
    let mut v = max;
    let mut shift = 0;
    for (k, &byte) in b.iter().enumerate().skip(1) {
        v += ((byte & 0x7f) as usize) << shift;
        if byte & 0x80 == 0 {
            return Ok((v, k + 1));
        }
        shift += 7;
        if shift > 21 {
            // Nothing in a header block is 2^28 or more.
            return Err(HpackError);
        }
    }
    Err(HpackError)
}

/// The string literal at the start of `b` (5.2), decoded into `out`; returns the bytes used.
fn string_at(b: &[u8], out: &mut Vec<u8>) -> Result<usize, HpackError> {
    let huffman = b.first().ok_or(HpackError)? & 0x80 != 0;
    let (len, n) = integer_at(b, 7)?;
    let raw = b.get(n..n + len).ok_or(HpackError)?;
    out.clear();
    if huffman {
        huffman_decode(raw, out)?;
    } else {
        out.extend_from_slice(raw);
    }
    Ok(n + len)
}

/// The length of the string literal at the start of `b`, without decoding it.
fn skip_string(b: &[u8]) -> Result<usize, HpackError> {
    let (len, n) = integer_at(b, 7)?;
    if b.len() < n + len {
        return Err(HpackError);
    }
    Ok(n + len)
}

/// One step of the Huffman decoder: from a tree node, four more bits.
#[derive(Clone, Copy, Default)]
struct Step {
    /// The node reached.
    next: u8,
    /// The symbol completed on the way (256: none).
    sym: u16,
    /// The bits reached EOS (an error inside a string).
    fail: bool,
}

/// The decoder's tables: per internal node, the 16 four-bit steps and whether ending there is
/// valid padding (at most 7 bits, all ones).
struct Huffman {
    steps: Vec<[Step; 16]>,
    accept: Vec<bool>,
}

fn huffman() -> &'static Huffman {
    static H: std::sync::OnceLock<Huffman> = std::sync::OnceLock::new();
    H.get_or_init(|| {
        // The code tree: internal nodes 0..256, children either a node or a symbol leaf.
        #[derive(Clone, Copy)]
        enum Child {
            None,
            Node(usize),
            Leaf(u16),
        }
        let mut kids: Vec<[Child; 2]> = vec![[Child::None; 2]];
        let mut depth = vec![0u8];
        let mut ones = vec![true];
        for (sym, &(code, len)) in tables::HUFFMAN.iter().enumerate() {
            let mut node = 0;
            for bit in (0..len).rev() {
                let b = ((code >> bit) & 1) as usize;
                if bit == 0 {
                    kids[node][b] = Child::Leaf(sym as u16);
                } else {
                    node = match kids[node][b] {
                        Child::Node(k) => k,
                        _ => {
                            kids.push([Child::None; 2]);
                            depth.push(depth[node] + 1);
                            ones.push(ones[node] && b == 1);
                            let k = kids.len() - 1;
                            kids[node][b] = Child::Node(k);
                            k
                        }
                    };
                }
            }
        }
        let steps = (0..kids.len())
            .map(|start| {
                let mut row = [Step::default(); 16];
                for (x, step) in row.iter_mut().enumerate() {
                    let (mut node, mut sym, mut fail) = (start, 256u16, false);
                    for bit in (0..4).rev() {
                        match kids[node][(x >> bit) & 1] {
                            Child::Node(k) => node = k,
                            Child::Leaf(256) | Child::None => {
                                fail = true;
                                node = 0;
                            }
                            Child::Leaf(s) => {
                                sym = s;
                                node = 0;
                            }
                        }
                    }
                    *step = Step {
                        next: node as u8,
                        sym,
                        fail,
                    };
                }
                row
            })
            .collect();
        let accept = (0..kids.len())
            .map(|k| k == 0 || (ones[k] && depth[k] <= 7))
            .collect();
        Huffman { steps, accept }
    })
}

/// Decodes a Huffman-coded string (5.2, Appendix B) into `out`.
pub fn huffman_decode(raw: &[u8], out: &mut Vec<u8>) -> Result<(), HpackError> {
    let h = huffman();
    let mut state = 0usize;
    for &byte in raw {
        for nibble in [byte >> 4, byte & 0xf] {
            let s = h.steps[state][nibble as usize];
            if s.fail {
                return Err(HpackError);
            }
            if s.sym < 256 {
                out.push(s.sym as u8);
            }
            state = s.next as usize;
        }
    }
    if h.accept[state] {
        Ok(())
    } else {
        Err(HpackError)
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

/// Static-table indices (Appendix A) used for request and response fields.
fn static_index(name: &str, value: &str) -> (usize, bool) {
    match (name, value) {
        (":status", "200") => (8, true),
        (":status", "204") => (9, true),
        (":status", "206") => (10, true),
        (":status", "304") => (11, true),
        (":status", "400") => (12, true),
        (":status", "404") => (13, true),
        (":status", "500") => (14, true),
        (":status", _) => (8, false),
        ("server", _) => (54, false),
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

/// Appends a response's `:status` field: indexed when the static table has the code (200,
/// 204, 206, 304, 400, 404, 500), else a literal with the indexed name.
pub fn status(out: &mut Vec<u8>, code: u16) {
    let digits = [
        b'0' + (code / 100 % 10) as u8,
        b'0' + (code / 10 % 10) as u8,
        b'0' + (code % 10) as u8,
    ];
    field(
        out,
        ":status",
        std::str::from_utf8(&digits).unwrap_or("500"),
    );
}

/// Appends a dynamic table size update (6.3), which must open the first header block after
/// the peer lowered SETTINGS_HEADER_TABLE_SIZE below the size the encoder had.
pub fn size_update(out: &mut Vec<u8>, size: usize) {
    integer(out, 0x20, 5, size);
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

/// The blocks of one request for one size of the server's dynamic table: the first a
/// connection sends (adding the fields the static table lacks, as far as they fit), and the one
/// every later request sends (naming them by index).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocks {
    /// The first request's block on a connection (literals with incremental indexing, 6.2.1).
    pub first: Vec<u8>,
    /// Every later request's block (indexed fields, 6.1).
    pub repeat: Vec<u8>,
}

/// A request's header fields, lower-cased and without the connection-specific ones, with their
/// [`Blocks`] for the default dynamic table size (what nearly every server keeps). One per
/// load, shared by its connections; each connection remembers whether its first block went out.
#[derive(Debug, Clone)]
pub struct RequestHeaders {
    fields: Vec<(String, String)>,
    default: Blocks,
}

impl RequestHeaders {
    /// The pseudo-headers, then `headers` with their names lower-cased and the
    /// connection-specific ones dropped.
    pub fn new(
        method: &str,
        scheme: &str,
        authority: &str,
        path: &str,
        headers: &[(String, String)],
    ) -> RequestHeaders {
        let mut fields = vec![
            (":method".to_string(), method.to_string()),
            (":scheme".to_string(), scheme.to_string()),
            (":authority".to_string(), authority.to_string()),
            (":path".to_string(), path.to_string()),
        ];
        for (n, v) in headers {
            let n = n.to_ascii_lowercase();
            if !connection_specific(&n) {
                fields.push((n, v.clone()));
            }
        }
        let default = blocks(&fields, TABLE_SIZE);
        RequestHeaders { fields, default }
    }

    /// The blocks for the default table size ([`TABLE_SIZE`]).
    pub fn default_blocks(&self) -> &Blocks {
        &self.default
    }

    /// The blocks for a dynamic table of at most `table` bytes (a server that set
    /// SETTINGS_HEADER_TABLE_SIZE lower, or higher: we never use more than the default).
    pub fn blocks(&self, table: usize) -> Blocks {
        blocks(&self.fields, table.min(TABLE_SIZE))
    }
}

/// Encodes `fields` twice: the first block indexes each field the static table lacks while the
/// entries fit in `table` bytes (4.1: name, value and 32 each), the repeat block names those
/// by their dynamic index; fields that do not fit stay literals without indexing in both.
fn blocks(fields: &[(String, String)], table: usize) -> Blocks {
    let mut first = Vec::with_capacity(64);
    let mut used = 0;
    // Per field: Some(k) when it is the k-th entry added to the dynamic table.
    let mut added: Vec<Option<usize>> = Vec::with_capacity(fields.len());
    let mut n = 0;
    for (name, value) in fields {
        let (i, full) = static_index(name, value);
        let size = name.len() + value.len() + 32;
        if full || used + size > table {
            field(&mut first, name, value);
            added.push(None);
            continue;
        }
        if i == 0 {
            first.push(0x40);
            string(&mut first, name.as_bytes());
        } else {
            integer(&mut first, 0x40, 6, i);
        }
        string(&mut first, value.as_bytes());
        used += size;
        added.push(Some(n));
        n += 1;
    }
    let mut repeat = Vec::with_capacity(fields.len());
    for ((name, value), a) in fields.iter().zip(added) {
        match a {
            // The newest entry is index 62 (2.3.3); entries were added in field order.
            Some(k) => integer(&mut repeat, 0x80, 7, tables::STATIC.len() + n - k),
            None => field(&mut repeat, name, value),
        }
    }
    Blocks { first, repeat }
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

    /// Huffman-encodes `s` (for the tests).
    fn huffman_encode(s: &[u8]) -> Vec<u8> {
        let (mut acc, mut bits, mut out) = (0u64, 0u32, Vec::new());
        for &b in s {
            let (code, len) = tables::HUFFMAN[b as usize];
            acc = (acc << len) | code as u64;
            bits += len as u32;
            while bits >= 8 {
                bits -= 8;
                out.push((acc >> bits) as u8);
            }
        }
        if bits > 0 {
            out.push(((acc << (8 - bits)) as u8) | (0xff >> bits));
        }
        out
    }

    #[test]
    fn huffman_round_trips_every_symbol_and_refuses_bad_padding() {
        let all: Vec<u8> = (0..=255).collect();
        for chunk in all.chunks(7).chain([&b"www.example.com"[..], b""]) {
            let mut out = Vec::new();
            huffman_decode(&huffman_encode(chunk), &mut out).unwrap();
            assert_eq!(out, chunk);
        }
        let mut out = Vec::new();
        // 8 bits of padding, and a padding of zeros, are errors (5.2).
        assert!(huffman_decode(&[0xff], &mut out).is_err());
        assert!(huffman_decode(&[0x00], &mut out).is_err());
        // EOS inside a string is an error.
        assert!(huffman_decode(&[0xff, 0xff, 0xff, 0xff], &mut out).is_err());
    }

    #[test]
    fn agrees_with_loona_hpack_on_generated_blocks() {
        let mut seed = 0x1234_5678_9abc_def0u64;
        let mut rnd = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut ours = Decoder::new();
        let mut theirs = loona_hpack::Decoder::new();
        for _ in 0..300 {
            let mut block = Vec::new();
            for _ in 0..1 + rnd(6) {
                let name: Vec<u8> = (0..1 + rnd(12)).map(|_| b'a' + rnd(26) as u8).collect();
                let value: Vec<u8> = (0..rnd(40)).map(|_| rnd(256) as u8).collect();
                let lit = |out: &mut Vec<u8>, s: &[u8], huff: bool| {
                    if huff {
                        let h = huffman_encode(s);
                        integer(out, 0x80, 7, h.len());
                        out.extend_from_slice(&h);
                    } else {
                        string(out, s);
                    }
                };
                match rnd(4) {
                    0 => integer(&mut block, 0x80, 7, 1 + rnd(61) as usize),
                    1 => {
                        block.push(0x40);
                        lit(&mut block, &name, rnd(2) == 0);
                        lit(&mut block, &value, rnd(2) == 0);
                    }
                    2 => {
                        integer(&mut block, 0x00, 4, 1 + rnd(61) as usize);
                        lit(&mut block, &value, rnd(2) == 0);
                    }
                    _ => {
                        block.push(0x10);
                        lit(&mut block, &name, rnd(2) == 0);
                        lit(&mut block, &value, rnd(2) == 0);
                    }
                }
            }
            let mut a = Vec::new();
            ours.decode(&block, |n, v| a.push((n.to_vec(), v.to_vec())))
                .unwrap();
            let b = theirs.decode(&block).unwrap();
            assert_eq!(a, b);
        }
    }

    fn decoded(d: &mut Decoder, block: &[u8]) -> Vec<(String, String)> {
        let mut fields = Vec::new();
        d.decode(block, |n, v| {
            fields.push((
                String::from_utf8(n.to_vec()).unwrap(),
                String::from_utf8(v.to_vec()).unwrap(),
            ))
        })
        .unwrap();
        fields
    }

    #[test]
    fn indexed_request_blocks_decode_to_the_same_fields() {
        let headers = vec![
            ("User-Agent".to_string(), "proxybench".to_string()),
            ("Connection".to_string(), "dropped".to_string()),
            ("x-long".to_string(), "v".repeat(5000)),
            ("X-Trace".to_string(), "1".to_string()),
        ];
        let req = RequestHeaders::new("GET", "http", "127.0.0.1:8080", "/", &headers);
        let b = req.default_blocks();
        let mut d = Decoder::new();
        let first = decoded(&mut d, &b.first);
        assert_eq!(first.len(), 7);
        assert_eq!(first[2], (":authority".into(), "127.0.0.1:8080".into()));
        assert_eq!(first[4].0, "user-agent");
        // Every later request decodes to the same fields, from the table the first one filled.
        for _ in 0..3 {
            assert_eq!(decoded(&mut d, &b.repeat), first);
        }
        // :method, :scheme and :path are in the static table, :authority, user-agent and x-trace
        // are added (one byte each from then on), the 5,000-byte value does not fit in 4,096
        // bytes and stays a literal.
        let mut long = Vec::new();
        field(&mut long, "x-long", &"v".repeat(5000));
        assert_eq!(b.repeat.len(), 6 + long.len());
        assert_eq!(&b.repeat[..4], &[0x82, 0x86, 0x80 | 64, 0x84]);
        // Without the long header, every field of a repeated request is one byte.
        let short = RequestHeaders::new("GET", "https", "a.example", "/tea", &headers[..2]);
        assert_eq!(short.default_blocks().repeat.len(), 5);
        // A table of 0 bytes adds nothing: both blocks are the stateless encoding.
        let none = short.blocks(0);
        let stateless = request_block("GET", "https", "a.example", "/tea", &headers[..2]);
        assert_eq!((&none.first, &none.repeat), (&stateless, &stateless));
        // A table that holds only :authority (9 + 10 + 32 = 51 bytes).
        let one = short.blocks(60);
        let mut d = Decoder::new();
        let want = decoded(&mut Decoder::new(), &stateless);
        assert_eq!(decoded(&mut d, &one.first), want);
        assert_eq!(decoded(&mut d, &one.repeat), want);
        assert_eq!(one.repeat[2], 0x80 | 62);
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
