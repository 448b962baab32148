//! docs/architecture.md's rule, checked on the source: no library function returns
//! `Result<_, String>`, public or not. A library error is a typed `thiserror` error, so a caller
//! can match on it and follow its `source()`, and the binary decides the exit code in one place.
//!
//! The check reads every library crate's `src/` (all crates but `cli`, the binary, and `fuzz`,
//! whose library is the fuzz targets' harness and whose binaries are the engines): each `pub fn`
//! (not `pub(crate)` or `pub(super)`), each method declared in a `pub trait`, and each `pub type`.
//! A signature may span lines; it is read up to its body, `where` or `;`. It fails naming
//! `file:line` of each signature whose return type (or, for a `pub type`, whose definition) holds
//! a `Result` whose error is `String`.

use std::fs;
use std::path::PathBuf;

/// Crates that are not libraries with a public API of their own.
const EXCLUDED: &[&str] = &["cli", "fuzz"];

#[test]
fn no_public_signature_returns_result_string() {
    check_libraries(Scope::Public);
}

/// The same rule for every function and type alias of the library crates' product code, private
/// ones too (a crate's own tests, after `#[cfg(test)]`, are left out).
#[test]
fn no_library_function_returns_result_string() {
    check_libraries(Scope::All);
}

/// Which signatures a check reads.
#[derive(Clone, Copy, PartialEq)]
enum Scope {
    /// `pub` items, and the methods of `pub` traits.
    Public,
    /// Every function, method and type alias.
    All,
}

/// Fails naming `file:line` of each signature in `scope` of the library crates that returns
/// `Result<_, String>`.
fn check_libraries(scope: Scope) {
    let crates = proxybench_testkit::crates_dir();
    let mut checked = 0;
    let mut found = Vec::new();
    let mut names: Vec<PathBuf> = fs::read_dir(&crates)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("src").join("lib.rs").is_file())
        .collect();
    names.sort();
    for dir in names {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        if EXCLUDED.contains(&name.as_str()) {
            continue;
        }
        for file in proxybench_testkit::rust_files(&dir.join("src")) {
            let text = fs::read_to_string(&file).unwrap();
            let text = match scope {
                Scope::Public => text.as_str(),
                Scope::All => product(&text),
            };
            let shown = file.strip_prefix(&crates).unwrap().display().to_string();
            for (line, sig) in offenders(text, scope) {
                found.push(format!("crates/{shown}:{line}: {sig}"));
            }
            checked += 1;
        }
    }
    proxybench_testkit::assert_none_found(
        checked,
        &found,
        match scope {
            Scope::Public => {
                "public signatures returning Result<_, String> (use the crate's typed error)"
            }
            Scope::All => "library functions returning Result<_, String> (use a typed error)",
        },
    );
}

/// A source file's product code: all of it up to its `#[cfg(test)]` items (the tree puts a
/// file's tests at its foot).
fn product(text: &str) -> &str {
    text.find("#[cfg(test)]").map_or(text, |i| &text[..i])
}

/// The checker itself, on signatures written the ways the tree writes them.
#[test]
fn the_checker_finds_multi_line_and_trait_signatures() {
    let src = r#"
pub fn a() -> Result<u32, String> { todo!() }
pub(crate) fn b() -> Result<u32, String> { todo!() }
fn c() -> Result<u32, String> { todo!() }
pub fn d(
    x: u32,
) -> Result<
    Vec<(String, u16)>,
    String,
> {
    todo!()
}
pub fn e() -> Result<String, Error> { todo!() }
pub fn f() -> std::result::Result<(), std::string::String> { todo!() }
pub trait T {
    fn g(&self) -> Result<Box<dyn T>, String>;
    fn h(&self) -> Result<(), Error> {
        let k = |x: u32| -> Result<(), String> { Ok(()) };
        Ok(())
    }
}
trait U {
    fn i(&self) -> Result<(), String>;
}
pub type J = Arc<dyn Fn(&[String]) -> Result<Config, String> + Send>;
pub type K = Result<u32, Error>;
pub fn l<F: Fn() -> Result<(), String>>(f: F) {}
pub fn m() -> Result<u32, String>
where
    u32: Copy,
{
    todo!()
}
// pub fn n() -> Result<u32, String>
pub async fn o() -> Result<u32, String> { todo!() }
pub const fn p() -> Option<Result<u32, String>> { None }
"#;
    let lines: Vec<usize> = offenders(src, Scope::Public)
        .into_iter()
        .map(|(l, _)| l)
        .collect();
    assert_eq!(lines, vec![2, 5, 14, 16, 25, 28, 35, 36]);
    let all: Vec<usize> = offenders(src, Scope::All)
        .into_iter()
        .map(|(l, _)| l)
        .collect();
    assert_eq!(all, vec![2, 3, 4, 5, 14, 16, 23, 25, 28, 35, 36]);
}

/// The (1-based line, signature) of each signature in `scope` in `text` that returns
/// `Result<_, String>`.
fn offenders(text: &str, scope: Scope) -> Vec<(usize, String)> {
    let code = strip_comments(text);
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    // The brace depth at which an open `pub trait` block's items sit.
    let mut traits: Vec<usize> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'{' => {
                depth += 1;
                i += 1;
                continue;
            }
            b'}' => {
                if traits.last() == Some(&depth) {
                    traits.pop();
                }
                depth = depth.saturating_sub(1);
                i += 1;
                continue;
            }
            _ => {}
        }
        if !starts_word(bytes, i) {
            i += 1;
            continue;
        }
        let rest = &code[i..];
        let in_pub_trait = traits.last() == Some(&depth);
        if let Some(after) = item(rest, "trait") {
            if after.0 {
                // The trait's items sit one brace deeper than here.
                if let Some(open) = rest.find('{') {
                    traits.push(depth + 1);
                    depth += 1;
                    i += open + 1;
                    continue;
                }
            }
        }
        let fn_item = item(rest, "fn");
        let type_item = item(rest, "type");
        let all = scope == Scope::All;
        let (public, is_fn) = match (fn_item, type_item) {
            (Some((p, _)), _) => (p || in_pub_trait || all, true),
            (_, Some((p, _))) => (p || all, false),
            _ => {
                i += word_len(rest).max(1);
                continue;
            }
        };
        let len = signature_len(rest, is_fn);
        let sig = &rest[..len];
        if public && returns_result_string(sig, is_fn) {
            let line = code[..i].matches('\n').count() + 1;
            out.push((line, sig.split_whitespace().collect::<Vec<_>>().join(" ")));
        }
        // Step over the signature (not its body: braces there still count).
        i += len;
    }
    out
}

/// If `rest` starts an item of kind `kw` (`fn`, `trait`, `type`), possibly after a visibility and
/// qualifiers: `Some((public, offset of kw))`.
fn item(rest: &str, kw: &str) -> Option<(bool, usize)> {
    let mut public = false;
    let mut s = rest;
    loop {
        let w = first_word(s);
        if w == kw {
            return Some((public, rest.len() - s.len()));
        }
        match w {
            "pub" => {
                let after = s[3..].trim_start();
                if after.starts_with('(') {
                    // pub(crate), pub(super), pub(in path): not the public API.
                    let close = after.find(')')?;
                    s = after[close + 1..].trim_start();
                } else {
                    public = true;
                    s = after;
                }
            }
            "const" | "async" | "unsafe" | "extern" | "default" => {
                s = s[w.len()..].trim_start();
                if s.starts_with('"') {
                    let close = s[1..].find('"')?;
                    s = s[close + 2..].trim_start();
                }
            }
            _ => return None,
        }
    }
}

/// The length of the signature that starts `rest`: up to its body's `{`, or `;`, at bracket
/// depth 0 (a `pub type`'s definition is read to its `;`).
fn signature_len(rest: &str, is_fn: bool) -> usize {
    let mut angle = 0i32;
    let mut paren = 0i32;
    let b = rest.as_bytes();
    for (k, &c) in b.iter().enumerate() {
        match c {
            b'(' | b'[' => paren += 1,
            b')' | b']' => paren -= 1,
            b'<' => angle += 1,
            b'>' if k > 0 && b[k - 1] == b'-' => {}
            b'>' => angle -= 1,
            b'{' if is_fn && paren == 0 && angle <= 0 => return k,
            b';' if paren == 0 && angle <= 0 => return k,
            _ => {}
        }
    }
    rest.len()
}

/// Whether a signature's return type (a `fn`'s part after `->`, before `where`; a `type`'s
/// definition) holds a `Result<_, String>`.
fn returns_result_string(sig: &str, is_fn: bool) -> bool {
    let ret = if is_fn {
        // The first `->` at parenthesis depth 0, after the parameters.
        let mut paren = 0i32;
        let mut angle = 0i32;
        let b = sig.as_bytes();
        let mut at = None;
        for k in 0..b.len() {
            match b[k] {
                b'(' => paren += 1,
                b')' => paren -= 1,
                b'<' => angle += 1,
                b'>' if k > 0 && b[k - 1] == b'-' && paren == 0 && angle == 0 => {
                    at = Some(k + 1);
                    break;
                }
                b'>' if k > 0 && b[k - 1] == b'-' => {}
                b'>' => angle -= 1,
                _ => {}
            }
        }
        let Some(at) = at else { return false };
        let r = &sig[at..];
        match r.find(" where") {
            Some(w) => r[..w].to_string(),
            None => match r.find("\nwhere") {
                Some(w) => r[..w].to_string(),
                None => r.to_string(),
            },
        }
    } else {
        sig.to_string()
    };
    let ret: String = ret.split_whitespace().collect();
    let mut from = 0;
    while let Some(k) = ret[from..].find("Result<") {
        let start = from + k;
        from = start + "Result<".len();
        // A Result, not a FooResult.
        if start > 0 {
            let prev = ret.as_bytes()[start - 1];
            if prev.is_ascii_alphanumeric() || prev == b'_' {
                continue;
            }
        }
        if let Some(args) = generic_args(&ret[from..]) {
            if args.len() == 2 && matches!(args[1], "String" | "std::string::String") {
                return true;
            }
        }
    }
    false
}

/// The top-level arguments of the generic list that `s` opens (just after its `<`).
fn generic_args(s: &str) -> Option<Vec<&str>> {
    let b = s.as_bytes();
    let mut depth = 0i32;
    let mut start = 0;
    let mut args = Vec::new();
    for k in 0..b.len() {
        match b[k] {
            b'<' | b'(' | b'[' => depth += 1,
            b'>' if k > 0 && b[k - 1] == b'-' => {}
            b'>' if depth == 0 => {
                let last = s[start..k].trim_end_matches(',');
                if !last.is_empty() {
                    args.push(last);
                }
                return Some(args);
            }
            b'>' | b')' | b']' => depth -= 1,
            b',' if depth == 0 => {
                args.push(&s[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    None
}

/// `text` with comments, string and char literals blanked (newlines kept, so lines still count).
fn strip_comments(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut k = 0;
    let blank = |c: u8| if c == b'\n' { b'\n' } else { b' ' };
    while k < b.len() {
        if b[k..].starts_with(b"//") {
            while k < b.len() && b[k] != b'\n' {
                out.push(b' ');
                k += 1;
            }
        } else if b[k..].starts_with(b"/*") {
            let mut nest = 0;
            while k < b.len() {
                if b[k..].starts_with(b"/*") {
                    nest += 1;
                    out.extend_from_slice(b"  ");
                    k += 2;
                } else if b[k..].starts_with(b"*/") {
                    nest -= 1;
                    out.extend_from_slice(b"  ");
                    k += 2;
                    if nest == 0 {
                        break;
                    }
                } else {
                    out.push(blank(b[k]));
                    k += 1;
                }
            }
        } else if b[k] == b'r'
            && (b[k..].starts_with(b"r#\"") || b[k..].starts_with(b"r\""))
            && (k == 0 || !(b[k - 1].is_ascii_alphanumeric() || b[k - 1] == b'_'))
        {
            // A raw string: r"..." or r#"..."#.
            let hashes = b[k + 1..].iter().take_while(|&&c| c == b'#').count();
            let mut end = b"\"".to_vec();
            end.extend(std::iter::repeat_n(b'#', hashes));
            out.extend(std::iter::repeat_n(b' ', 2 + hashes));
            k += 2 + hashes;
            while k < b.len() && !b[k..].starts_with(&end) {
                out.push(blank(b[k]));
                k += 1;
            }
            out.extend(std::iter::repeat_n(b' ', end.len()));
            k += end.len();
        } else if b[k] == b'"' {
            out.push(b' ');
            k += 1;
            while k < b.len() && b[k] != b'"' {
                if b[k] == b'\\' && k + 1 < b.len() {
                    out.push(b' ');
                    k += 1;
                }
                out.push(blank(b[k]));
                k += 1;
            }
            out.push(b' ');
            k += 1;
        } else if b[k] == b'\'' {
            // A char literal ('x', '\n', '\u{..}'), not a lifetime ('a).
            let lit = if b.get(k + 1) == Some(&b'\\') {
                b.get(k + 3..)
                    .and_then(|r| r.iter().position(|&c| c == b'\''))
                    .map(|p| p + 4)
            } else if b.get(k + 2) == Some(&b'\'') {
                Some(3)
            } else {
                // A multi-byte char: up to 4 bytes then the quote.
                (2..=5)
                    .find(|&n| b.get(k + n) == Some(&b'\'') && !b[k + 1].is_ascii())
                    .map(|n| n + 1)
            };
            match lit {
                Some(n) => {
                    out.extend(std::iter::repeat_n(b' ', n.min(b.len() - k)));
                    k += n;
                }
                None => {
                    out.push(b'\'');
                    k += 1;
                }
            }
        } else {
            out.push(b[k]);
            k += 1;
        }
    }
    out.truncate(b.len());
    String::from_utf8(out).unwrap_or_default()
}

/// Whether a word starts at `i` (not inside an identifier).
fn starts_word(b: &[u8], i: usize) -> bool {
    (b[i].is_ascii_alphabetic() || b[i] == b'_')
        && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
}

/// The identifier `s` starts with.
fn first_word(s: &str) -> &str {
    let n = word_len(s);
    &s[..n]
}

/// The length of the identifier `s` starts with.
fn word_len(s: &str) -> usize {
    s.bytes()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == b'_')
        .count()
}
