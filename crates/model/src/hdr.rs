//! The latency histograms' one serialized form. Every HDR histogram in a record (a summary's
//! `hdr`, a second's `hdr`, an agent's row) is HdrHistogram's V2-deflate bytes in base64, which
//! HdrHistogram's own tools read. The engine encodes here and every reader (merge, report,
//! OpenMetrics) decodes here, so the form is written once.

use base64::Engine;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

/// Highest latency the engine's histograms track: one hour in microseconds. Longer values
/// saturate (the exact maximum is kept beside the histogram).
pub const MAX_US: u64 = 3_600_000_000;

/// Why a serialized histogram could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum HdrError {
    /// The text is not base64.
    #[error("histogram is not base64: {0}")]
    NotBase64(#[from] base64::DecodeError),
    /// The bytes are not an HdrHistogram V2 (or V2-deflate) histogram.
    #[error("histogram does not decode: {0}")]
    Corrupt(String),
    /// The histogram holds values outside the engine's bounds (1 µs to [`MAX_US`]).
    #[error("histogram bounds differ from the engine's: {0}")]
    Bounds(String),
}

/// An empty histogram with the engine's bounds: 1 µs to one hour at 3 significant digits.
pub fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_US, 3).expect("static histogram bounds")
}

/// The histogram as V2-deflate bytes in base64.
pub fn encode(h: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut bytes)
        .expect("serializing into memory");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Reads a histogram written by [`encode`] (or any V2 histogram in base64) into the engine's
/// bounds, so that histograms from different files add bucket by bucket.
pub fn decode(s: &str) -> Result<Histogram<u64>, HdrError> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(s)?;
    let h: Histogram<u64> = Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| HdrError::Corrupt(format!("{e:?}")))?;
    let mut out = new_hist();
    out.add(&h)
        .map_err(|e| HdrError::Bounds(format!("{e:?}")))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A histogram comes back from its text with the same count, extremes and quantiles, and
    /// in the engine's bounds even when written with others.
    #[test]
    fn a_histogram_reads_back_as_it_was_written() {
        let mut h = new_hist();
        for v in 1..=10_000u64 {
            h.record(v * 37).unwrap();
        }
        let back = decode(&encode(&h)).unwrap();
        assert_eq!(back.len(), h.len());
        assert_eq!(back.max(), h.max());
        assert_eq!(back.min(), h.min());
        assert_eq!(back.value_at_quantile(0.999), h.value_at_quantile(0.999));
        assert_eq!(back.high(), MAX_US);

        let mut narrow = Histogram::<u64>::new_with_bounds(1, 60_000_000, 2).unwrap();
        narrow.record(1234).unwrap();
        let wide = decode(&encode(&narrow)).unwrap();
        assert_eq!((wide.len(), wide.high()), (1, MAX_US));
    }

    /// Text that is not base64, and base64 that is not a histogram, are told apart; an empty
    /// text is not a histogram.
    #[test]
    fn bad_text_says_what_is_wrong() {
        assert!(matches!(decode("%%%"), Err(HdrError::NotBase64(_))));
        assert!(matches!(decode("aGVsbG8="), Err(HdrError::Corrupt(_))));
        assert!(matches!(decode(""), Err(HdrError::Corrupt(_))));
    }
}
