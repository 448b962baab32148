//! Latency percentiles: from the summary when it has them, otherwise recomputed exactly from the
//! recorded HDR histogram, so a report can ask for any percentile of any run.

use model::Latency;

/// The latency at percentile `p` (e.g. 99.9) in microseconds, or `None` when the run recorded no
/// latencies or its histogram cannot be decoded.
pub fn percentile_us(lat: &Latency, p: f64) -> Option<u64> {
    if lat.count == 0 {
        return None;
    }
    lat.percentile(p)
        .or_else(|| decode(&lat.hdr).map(|h| h.value_at_quantile(p / 100.0)))
}

/// The recorded histogram, or `None` when there is none or it does not decode.
fn decode(s: &str) -> Option<hdrhistogram::Histogram<u64>> {
    model::hdr::decode(s).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn falls_back_to_the_histogram() {
        let mut h = model::hdr::new_hist();
        for v in 1..=1000u64 {
            h.record(v * 10).unwrap();
        }
        let lat = Latency {
            count: 1000,
            percentiles: vec![model::Percentile { p: 50.0, us: 4242 }],
            hdr: model::hdr::encode(&h),
            ..Latency::default()
        };
        // A summarised percentile is taken as written; a missing one comes from the histogram.
        assert_eq!(percentile_us(&lat, 50.0), Some(4242));
        let p95 = percentile_us(&lat, 95.0).unwrap();
        assert!((9490..=9510).contains(&p95), "p95 {p95}");
        assert_eq!(percentile_us(&Latency::default(), 50.0), None);
    }
}
