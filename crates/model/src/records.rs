//! The binary file of one load's per-request records (`requests/<case>/<load>.bin` in a results
//! directory): a 24-byte header, then one fixed-size little-endian record per request, in the
//! order the load returned them (completion time).
//!
//! ```text
//! header  magic "PBREQ\0\0\0" (8) | format version u16 | record size u16 | reserved u32 (0)
//!         | record count u64
//! record  t_us u64 | latency_us u32 | conn u32 | bytes u32 | status u16 | error u8 | reserved u8
//! ```
//!
//! 24 bytes a record, so a million requests take 24 MB. The intended send time is
//! `t_us - latency_us` ([`RequestRecord::intended_us`]); `error` is 0 for none, else the code
//! [`error_code`] gives the kind.

use crate::{ErrorKind, RequestRecord};
use std::io::{self, Read, Write};

/// The first bytes of every records file.
pub const MAGIC: [u8; 8] = *b"PBREQ\0\0\0";
/// The layout version this build writes and reads.
pub const FORMAT_VERSION: u16 = 1;
/// Bytes of one record on disk.
pub const RECORD_SIZE: usize = 24;
/// Bytes of the header.
pub const HEADER_SIZE: usize = 24;

/// Why a records file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RecordsError {
    /// Reading failed.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The file does not start with [`MAGIC`]: it is not a records file.
    #[error("not a proxybench request-records file (bad magic)")]
    BadMagic,
    /// Another layout version.
    #[error("request-records format version {found} (record size {size}), but this proxybench reads version {FORMAT_VERSION} (record size {RECORD_SIZE})")]
    Version {
        /// The version in the header.
        found: u16,
        /// The record size in the header.
        size: u16,
    },
    /// Fewer bytes than the header announces (a cut-off copy or an interrupted write).
    #[error("truncated: the header announces {count} records ({expected} bytes), the file has {found} bytes")]
    Truncated {
        /// Records announced.
        count: u64,
        /// Bytes the file should have.
        expected: u64,
        /// Bytes it has.
        found: u64,
    },
    /// More bytes than the header announces.
    #[error("{extra} bytes after the {count} records the header announces")]
    Trailing {
        /// Records announced.
        count: u64,
        /// Bytes past their end.
        extra: u64,
    },
    /// A record holds an error code no kind has.
    #[error("record {index}: unknown error code {code}")]
    BadError {
        /// The record's position.
        index: u64,
        /// The code found.
        code: u8,
    },
}

/// The stable on-disk code of an error kind (0 is reserved for "no error"). Fixed here, apart
/// from [`ErrorKind::ALL`]'s print order, so reordering that list cannot change old files.
pub fn error_code(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::ConnectRefused => 1,
        ErrorKind::ConnectTimeout => 2,
        ErrorKind::ConnectOther => 3,
        ErrorKind::Tls => 4,
        ErrorKind::Write => 5,
        ErrorKind::ReadIdleClosed => 6,
        ErrorKind::ReadReset => 7,
        ErrorKind::Timeout => 8,
        ErrorKind::Malformed => 9,
    }
}

fn kind_of(code: u8) -> Option<ErrorKind> {
    ErrorKind::ALL.into_iter().find(|k| error_code(*k) == code)
}

/// The whole file for `records`, in memory.
pub fn encode(records: &[RequestRecord]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_SIZE + records.len() * RECORD_SIZE);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(RECORD_SIZE as u16).to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&(records.len() as u64).to_le_bytes());
    for r in records {
        out.extend_from_slice(&r.t_us.to_le_bytes());
        out.extend_from_slice(&r.latency_us.to_le_bytes());
        out.extend_from_slice(&r.conn.to_le_bytes());
        out.extend_from_slice(&r.bytes.to_le_bytes());
        out.extend_from_slice(&r.status.to_le_bytes());
        out.push(r.error.map_or(0, error_code));
        out.push(0);
    }
    out
}

/// Writes the file for `records` to `w`.
pub fn write(mut w: impl Write, records: &[RequestRecord]) -> io::Result<()> {
    w.write_all(&encode(records))
}

/// Reads a whole file from `r`.
pub fn read(mut r: impl Read) -> Result<Vec<RequestRecord>, RecordsError> {
    let mut bytes = Vec::new();
    r.read_to_end(&mut bytes)?;
    decode(&bytes)
}

/// Parses a whole file held in memory.
pub fn decode(bytes: &[u8]) -> Result<Vec<RequestRecord>, RecordsError> {
    if bytes.len() < MAGIC.len() || bytes[..MAGIC.len()] != MAGIC {
        return Err(RecordsError::BadMagic);
    }
    if bytes.len() < HEADER_SIZE {
        return Err(RecordsError::Truncated {
            count: 0,
            expected: HEADER_SIZE as u64,
            found: bytes.len() as u64,
        });
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    let size = u16::from_le_bytes([bytes[10], bytes[11]]);
    if version != FORMAT_VERSION || usize::from(size) != RECORD_SIZE {
        return Err(RecordsError::Version {
            found: version,
            size,
        });
    }
    let count = u64::from_le_bytes(le8(&bytes[16..24]));
    let expected = count
        .checked_mul(RECORD_SIZE as u64)
        .and_then(|n| n.checked_add(HEADER_SIZE as u64))
        .unwrap_or(u64::MAX);
    let found = bytes.len() as u64;
    if found < expected {
        return Err(RecordsError::Truncated {
            count,
            expected,
            found,
        });
    }
    if found > expected {
        return Err(RecordsError::Trailing {
            count,
            extra: found - expected,
        });
    }
    bytes[HEADER_SIZE..]
        .chunks_exact(RECORD_SIZE)
        .enumerate()
        .map(|(i, b)| {
            let code = b[22];
            let error = match code {
                0 => None,
                c => Some(kind_of(c).ok_or(RecordsError::BadError {
                    index: i as u64,
                    code: c,
                })?),
            };
            Ok(RequestRecord {
                t_us: u64::from_le_bytes(le8(&b[0..8])),
                latency_us: u32::from_le_bytes(le4(&b[8..12])),
                conn: u32::from_le_bytes(le4(&b[12..16])),
                bytes: u32::from_le_bytes(le4(&b[16..20])),
                status: u16::from_le_bytes([b[20], b[21]]),
                error,
            })
        })
        .collect()
}

fn le8(b: &[u8]) -> [u8; 8] {
    b.try_into().expect("an 8-byte slice")
}

fn le4(b: &[u8]) -> [u8; 4] {
    b.try_into().expect("a 4-byte slice")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<RequestRecord> {
        let mut v: Vec<RequestRecord> = ErrorKind::ALL
            .iter()
            .enumerate()
            .map(|(i, k)| RequestRecord {
                t_us: 1_000 + i as u64,
                latency_us: 7 * i as u32,
                conn: i as u32,
                bytes: 0,
                status: 0,
                error: Some(*k),
            })
            .collect();
        v.push(RequestRecord {
            t_us: u64::MAX,
            latency_us: u32::MAX,
            conn: u32::MAX,
            bytes: u32::MAX,
            status: 503,
            error: None,
        });
        v.push(RequestRecord {
            t_us: 2_500_000,
            latency_us: 650,
            conn: 3,
            bytes: 178,
            status: 200,
            error: None,
        });
        v
    }

    #[test]
    fn round_trip_keeps_every_field() {
        let recs = sample();
        let bytes = encode(&recs);
        assert_eq!(bytes.len(), HEADER_SIZE + recs.len() * RECORD_SIZE);
        assert_eq!(decode(&bytes).unwrap(), recs);
        let mut file = Vec::new();
        write(&mut file, &recs).unwrap();
        assert_eq!(read(file.as_slice()).unwrap(), recs);
        assert_eq!(decode(&encode(&[])).unwrap(), Vec::new());
    }

    #[test]
    fn record_is_24_bytes_in_memory_too() {
        assert_eq!(std::mem::size_of::<RequestRecord>(), RECORD_SIZE);
    }

    #[test]
    fn truncated_file_says_how_much_is_missing() {
        let bytes = encode(&sample());
        let cut = &bytes[..bytes.len() - 5];
        let e = decode(cut).unwrap_err();
        assert!(
            matches!(e, RecordsError::Truncated { count: 11, .. }),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            format!(
                "truncated: the header announces 11 records ({} bytes), the file has {} bytes",
                bytes.len(),
                bytes.len() - 5
            )
        );
        assert!(matches!(
            decode(&bytes[..12]).unwrap_err(),
            RecordsError::Truncated { .. }
        ));
        let mut long = bytes.clone();
        long.push(0);
        assert!(matches!(
            decode(&long).unwrap_err(),
            RecordsError::Trailing { extra: 1, .. }
        ));
    }

    #[test]
    fn wrong_magic_or_version_is_refused() {
        let mut bytes = encode(&sample());
        bytes[0] = b'X';
        assert!(matches!(decode(&bytes), Err(RecordsError::BadMagic)));
        assert!(matches!(decode(b"{}"), Err(RecordsError::BadMagic)));
        let mut bytes = encode(&sample());
        bytes[8] = 9;
        let e = decode(&bytes).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("request-records format version 9"),
            "{e}"
        );
    }

    #[test]
    fn unknown_error_code_is_refused() {
        let mut bytes = encode(&sample());
        bytes[HEADER_SIZE + 22] = 200;
        assert!(matches!(
            decode(&bytes),
            Err(RecordsError::BadError {
                index: 0,
                code: 200
            })
        ));
    }

    #[test]
    fn codes_are_distinct_and_nonzero() {
        for k in ErrorKind::ALL {
            assert_ne!(error_code(k), 0);
            assert_eq!(kind_of(error_code(k)), Some(k));
        }
    }
}
