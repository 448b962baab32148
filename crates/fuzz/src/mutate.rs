//! Byte-level mutations in the style of libFuzzer's: bit flips, byte insertions and deletions,
//! copies within the input, splices with another corpus entry, dictionary tokens and
//! "interesting" numbers written over digit runs. Several are stacked per new input.

use crate::Rng;

/// Tokens useful to every HTTP target: line ends, framing headers, sizes at the edges.
pub const HTTP_TOKENS: &[&[u8]] = &[
    b"\r\n",
    b"\n",
    b"\r",
    b"\r\n\r\n",
    b": ",
    b":",
    b" ",
    b"\t",
    b";",
    b",",
    b"HTTP/1.1 ",
    b"HTTP/1.0 ",
    b"HTTP/1.1 200 OK\r\n",
    b"HTTP/1.1 100 Continue\r\n\r\n",
    b"HTTP/1.1 101 Switching Protocols\r\n",
    b"HTTP/1.1 204 No Content\r\n",
    b"HTTP/1.1 304 Not Modified\r\n",
    b"Content-Length: ",
    b"Content-Length: 0\r\n",
    b"content-length:",
    b"Transfer-Encoding: chunked\r\n",
    b"Transfer-Encoding: gzip, chunked\r\n",
    b"Transfer-Encoding: gzip\r\n",
    b"transfer-encoding:",
    b"Connection: close\r\n",
    b"Connection: keep-alive\r\n",
    b"Expect: 100-continue\r\n",
    b"X-Backend-Debug: 1\r\n",
    b"Host: a\r\n",
    b"GET / HTTP/1.1\r\n",
    b"HEAD / HTTP/1.0\r\n",
    b"POST /p HTTP/1.1\r\n",
    b"0\r\n\r\n",
    b"0\r\n",
    b";ext=1",
    b"X-Trailer: t\r\n",
    b"fffffffffffffff",
    b"ffffffffffffffff",
    b"999999999999999999",
    b"18446744073709551615",
    b"1a",
    b"FF",
    b"-1",
    b"\x00",
    b"\xff",
];

/// Tokens of scenario files: TOML syntax and the scenario format's keys and values.
pub const TOML_TOKENS: &[&[u8]] = &[
    b"\n",
    b" = ",
    b"=",
    b"\"",
    b"'",
    b"\"\"\"",
    b"[",
    b"]",
    b"[[",
    b"]]",
    b"{",
    b"}",
    b",",
    b".",
    b"#",
    b"\\u0000",
    b"\\",
    b"[quick]\n",
    b"[[cases]]\n",
    b"[configs.alt]\n",
    b"[[backends]]\n",
    b"[[loads]]\n",
    b"[[actions]]\n",
    b"[proxy]\n",
    b"[[checks]]\n",
    b"name = \"x\"\n",
    b"name",
    b"description",
    b"analysis",
    b"duration",
    b"settle",
    b"at",
    b"count",
    b"profile",
    b"rate",
    b"connections",
    b"arrivals",
    b"config",
    b"replicas",
    b"\"1s\"",
    b"\"0s\"",
    b"\"10ms\"",
    b"\"999999999h\"",
    b"\"-1s\"",
    b"0",
    b"-1",
    b"1e400",
    b"nan",
    b"inf",
    b"true",
    b"18446744073709551615",
    b"9223372036854775808",
    b"4294967296",
    b"1979-05-27T07:32:00Z",
];

/// Numbers written over digit runs: the edges of every integer width a parser might use.
const NUMBERS: &[&[u8]] = &[
    b"0",
    b"1",
    b"00",
    b"9",
    b"10",
    b"255",
    b"65535",
    b"65536",
    b"4294967295",
    b"4294967296",
    b"9223372036854775807",
    b"999999999999999999",
    b"1000000000000000000",
    b"18446744073709551616",
];

/// Mutates `data` in place with 1 to 8 stacked operations; `other` supplies splices and
/// `dict` the target's tokens. The result is capped at `max_len` bytes.
pub fn mutate(rng: &mut Rng, data: &mut Vec<u8>, other: &[u8], dict: &[&[u8]], max_len: usize) {
    let ops = 1 << rng.below(4);
    for _ in 0..ops {
        one(rng, data, other, dict);
    }
    data.truncate(max_len);
}

fn one(rng: &mut Rng, data: &mut Vec<u8>, other: &[u8], dict: &[&[u8]]) {
    let len = data.len();
    match rng.below(12) {
        // Flip one bit.
        0 if len > 0 => {
            let i = rng.below(len);
            data[i] ^= 1 << rng.below(8);
        }
        // Set one byte to anything.
        1 if len > 0 => {
            let i = rng.below(len);
            data[i] = rng.next_u64() as u8;
        }
        // Insert a few random bytes.
        2 => {
            let at = rng.below(len + 1);
            let n = 1 + rng.below(4);
            for _ in 0..n {
                data.insert(at, rng.next_u64() as u8);
            }
        }
        // Delete a range.
        3 if len > 0 => {
            let at = rng.below(len);
            let n = 1 + rng.below((len - at).min(16));
            data.drain(at..at + n);
        }
        // Copy a range to elsewhere (repeats headers, chunks, whole responses).
        4 if len > 0 => {
            let from = rng.below(len);
            let n = 1 + rng.below((len - from).min(64));
            let piece = data[from..from + n].to_vec();
            let at = rng.below(len + 1);
            data.splice(at..at, piece);
        }
        // Insert a dictionary token.
        5 | 6 => {
            let t = dict[rng.below(dict.len())];
            let at = rng.below(len + 1);
            data.splice(at..at, t.iter().copied());
        }
        // Overwrite with a dictionary token.
        7 if len > 0 => {
            let t = dict[rng.below(dict.len())];
            let at = rng.below(len);
            let end = (at + t.len()).min(len);
            data.splice(at..end, t.iter().copied());
        }
        // Splice: this input's head, another's tail.
        8 if !other.is_empty() => {
            let keep = rng.below(len + 1);
            let from = rng.below(other.len());
            data.truncate(keep);
            data.extend_from_slice(&other[from..]);
        }
        // Replace a digit (or hex digit) run with an interesting number.
        9 if len > 0 => {
            let start = rng.below(len);
            if let Some(s) = (start..len).find(|&i| data[i].is_ascii_hexdigit()) {
                let e = (s..len)
                    .find(|&i| !data[i].is_ascii_hexdigit())
                    .unwrap_or(len);
                let n = NUMBERS[rng.below(NUMBERS.len())];
                data.splice(s..e, n.iter().copied());
            }
        }
        // Truncate.
        10 if len > 0 => {
            data.truncate(rng.below(len));
        }
        // Swap two bytes (reorders CR and LF, digits).
        11 if len > 1 => {
            let i = rng.below(len - 1);
            data.swap(i, i + 1);
        }
        _ => {
            let t = dict[rng.below(dict.len())];
            data.extend_from_slice(t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_change_inputs_and_respect_the_cap() {
        let mut rng = Rng::new(7);
        let base = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec();
        let mut changed = 0;
        for _ in 0..1000 {
            let mut d = base.clone();
            mutate(&mut rng, &mut d, b"other input", HTTP_TOKENS, 48);
            assert!(d.len() <= 48);
            changed += usize::from(d != base);
        }
        // Some stacks cancel out (a swap of equal bytes), but nearly all change the input.
        assert!(changed > 950, "{changed}");
    }
}
