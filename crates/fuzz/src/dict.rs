//! The targets' dictionaries: tokens the engine inserts into inputs (libFuzzer's `-dict`), since
//! a mutator rarely spells `Transfer-Encoding: chunked` or `[[actions]]` byte by byte. Each target
//! names its tokens ([`crate::Target::dictionary`]); [`libfuzzer_dict`] writes them in libFuzzer's
//! format.

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

/// The tokens in libFuzzer's dictionary format: one `"..."` line each, every byte outside
/// printable ASCII (and `"`, `\\`) written as `\xNN`.
pub fn libfuzzer_dict(tokens: &[&[u8]]) -> String {
    let mut out = String::new();
    for t in tokens {
        out.push('"');
        for &b in *t {
            if (0x20..=0x7e).contains(&b) && b != b'"' && b != b'\\' {
                out.push(b as char);
            } else {
                out.push_str(&format!("\\x{b:02x}"));
            }
        }
        out.push_str("\"\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dictionary_lines_escape_what_libfuzzer_cannot_read_raw() {
        let d = libfuzzer_dict(&[b"GET / HTTP/1.1\r\n", b"a\"b\\c", b"\x00\xff"]);
        assert_eq!(
            d,
            "\"GET / HTTP/1.1\\x0d\\x0a\"\n\"a\\x22b\\x5cc\"\n\"\\x00\\xff\"\n"
        );
    }

    #[test]
    fn every_token_list_is_non_empty_and_unique() {
        for list in [
            HTTP_TOKENS,
            TOML_TOKENS,
            crate::h2::H2_TOKENS,
            crate::h2::H2_SERVER_TOKENS,
        ] {
            assert!(!list.is_empty());
            let set: std::collections::HashSet<_> = list.iter().collect();
            assert_eq!(set.len(), list.len(), "a token is listed twice");
            assert!(list.iter().all(|t| !t.is_empty()), "an empty token");
        }
    }
}
