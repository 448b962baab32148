//! Reload arithmetic shared by report.md, compare.md and the analyses: the seed write-ups' table
//! (Total | Total Errors | Ave Time (ms) | <= 500ms | <= 1000ms) plus old-worker exit times.

use crate::ReloadRecord;

/// Aggregates over a case's reloads. Shares are of all reloads, so a reload that never served
/// under its new config counts against the `<= 500ms` and `<= 1000ms` columns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReloadStats {
    /// Reloads (one per replica per reload).
    pub total: u64,
    /// Reloads that reported an error.
    pub errors: u64,
    /// Reloads with a measured time to serve under the new config.
    pub served: u64,
    /// Mean of the measured times to serve, in milliseconds.
    pub served_avg_ms: Option<f64>,
    /// Largest measured time to serve, in milliseconds.
    pub served_max_ms: Option<f64>,
    /// Reloads that served within 500 ms.
    pub within_500: u64,
    /// Reloads that served within 1000 ms.
    pub within_1000: u64,
    /// Reloads with a measured time until the old workers exited.
    pub old_exited: u64,
    /// Mean time until the old workers exited, in milliseconds.
    pub old_exit_avg_ms: Option<f64>,
    /// Largest time until the old workers exited, in milliseconds.
    pub old_exit_max_ms: Option<f64>,
}

impl ReloadStats {
    /// Computes the aggregates of `reloads`.
    pub fn of(reloads: &[ReloadRecord]) -> ReloadStats {
        let mut s = ReloadStats {
            total: reloads.len() as u64,
            ..ReloadStats::default()
        };
        let (mut served_sum, mut old_sum) = (0.0, 0.0);
        for r in reloads {
            if r.error.is_some() {
                s.errors += 1;
            }
            if let Some(ms) = r.served_ms {
                s.served += 1;
                served_sum += ms;
                s.served_max_ms = Some(s.served_max_ms.map_or(ms, |m: f64| m.max(ms)));
                if ms <= 500.0 {
                    s.within_500 += 1;
                }
                if ms <= 1000.0 {
                    s.within_1000 += 1;
                }
            }
            if let Some(ms) = r.old_workers_exited_ms {
                s.old_exited += 1;
                old_sum += ms;
                s.old_exit_max_ms = Some(s.old_exit_max_ms.map_or(ms, |m: f64| m.max(ms)));
            }
        }
        if s.served > 0 {
            s.served_avg_ms = Some(served_sum / s.served as f64);
        }
        if s.old_exited > 0 {
            s.old_exit_avg_ms = Some(old_sum / s.old_exited as f64);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(served: Option<f64>, old: Option<f64>, error: Option<&str>) -> ReloadRecord {
        ReloadRecord {
            replica: "nginx-0".into(),
            generation: 2,
            t_s: 1.0,
            served_ms: served,
            command_ms: None,
            old_workers_exited_ms: old,
            validate_ms: 5.0,
            error: error.map(String::from),
        }
    }

    #[test]
    fn seed_table_arithmetic() {
        let s = ReloadStats::of(&[
            rel(Some(100.0), Some(1000.0), None),
            rel(Some(400.0), Some(2000.0), None),
            rel(Some(900.0), None, None),
        ]);
        assert_eq!(s.total, 3);
        assert_eq!(s.errors, 0);
        assert!((s.served_avg_ms.unwrap() - 466.666_666).abs() < 1e-3);
        assert_eq!((s.within_500, s.within_1000), (2, 3));
        assert_eq!(s.old_exit_avg_ms, Some(1500.0));
        assert_eq!(s.old_exit_max_ms, Some(2000.0));
    }

    #[test]
    fn failed_reload_counts_against_the_shares() {
        let s = ReloadStats::of(&[
            rel(Some(100.0), None, None),
            rel(None, None, Some("nginx -t failed")),
        ]);
        assert_eq!((s.total, s.errors, s.served, s.within_500), (2, 1, 1, 1));
        assert_eq!(s.served_avg_ms, Some(100.0));
        assert_eq!(ReloadStats::of(&[]).served_avg_ms, None);
    }
}
