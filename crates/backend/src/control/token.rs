//! The control endpoint's bearer token: random per start, kept in a file only its owner can
//! read, so another local user (or a web page's fetch to 127.0.0.1) cannot drive the fleet.

use std::io::{self, Read, Write};
use std::path::Path;

/// The secret every control request carries as `Authorization: Bearer <token>`.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// A fresh token: 32 bytes from /dev/urandom, as 64 lowercase hex digits.
    pub fn random() -> io::Result<Token> {
        let mut b = [0u8; 32];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
        Ok(Token(b.iter().map(|x| format!("{x:02x}")).collect()))
    }

    /// A token given as text (tests, tools that got it another way); surrounding blanks are
    /// dropped. `None` if empty or not one visible-ASCII word (it must fit in a header).
    pub fn new(text: &str) -> Option<Token> {
        let t = text.trim();
        (!t.is_empty() && t.bytes().all(|b| b.is_ascii_graphic())).then(|| Token(t.to_string()))
    }

    /// Reads the token a `proxybench backend --control` wrote to `path`.
    pub fn read(path: &Path) -> io::Result<Token> {
        let text = std::fs::read_to_string(path)?;
        Token::new(&text).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} holds no token", path.display()),
            )
        })
    }

    /// Writes the token to `path`, created with mode 0600 (never readable by others, not even
    /// for an instant). A file already there (an earlier run's) is removed first: an existing
    /// file would keep its mode, and a symlink planted there is not followed.
    pub fn write(&self, path: &Path) -> io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)?;
        writeln!(f, "{}", self.0)?;
        f.sync_all()
    }

    /// The token's text, for the `Authorization` header.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether an `Authorization` header value is `Bearer <this token>`; compares in time
    /// independent of where the first difference is.
    pub(crate) fn admits(&self, authorization: Option<&str>) -> bool {
        let Some(v) = authorization else {
            return false;
        };
        let Some((scheme, given)) = v.split_once(' ') else {
            return false;
        };
        if !scheme.eq_ignore_ascii_case("bearer") {
            return false;
        }
        let (a, b) = (given.trim().as_bytes(), self.0.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

/// Never prints the secret itself.
impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn tokens_are_random_hex_and_admit_only_their_bearer() {
        let a = Token::random().unwrap();
        let b = Token::random().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), 64);
        assert!(a.as_str().bytes().all(|c| c.is_ascii_hexdigit()));
        let good = format!("Bearer {}", a.as_str());
        assert!(a.admits(Some(&good)));
        assert!(a.admits(Some(&format!("bearer {}", a.as_str()))));
        assert!(!a.admits(None));
        assert!(!a.admits(Some(&format!("Bearer {}", b.as_str()))));
        assert!(!a.admits(Some(&format!("Basic {}", a.as_str()))));
        assert!(!a.admits(Some(&good[..good.len() - 1])));
        assert!(!a.admits(Some(a.as_str())));
        assert_eq!(format!("{a:?}"), "Token(..)");
        assert_eq!(Token::new(" x y "), None);
        assert_eq!(Token::new("\n"), None);
    }

    #[test]
    fn the_token_file_is_created_owner_only_and_reads_back() {
        let dir = std::env::temp_dir().join(format!("pb-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("control.token");
        // An earlier file, world-readable: replaced, not reused with its mode.
        std::fs::write(&p, "old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let t = Token::random().unwrap();
        t.write(&p).unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(Token::read(&p).unwrap(), t);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
