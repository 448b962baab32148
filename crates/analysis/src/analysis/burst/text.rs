//! Small formatting helpers shared by the tables, findings and checks.

/// How many arrivals separate consecutive accepted requests, as `length: count` pairs.
pub(super) fn cycles(accepted: &[bool]) -> String {
    let mut counts = std::collections::BTreeMap::new();
    let mut last = None;
    for (i, _) in accepted.iter().enumerate().filter(|(_, &a)| a) {
        if let Some(l) = last {
            *counts.entry(i - l).or_insert(0u64) += 1;
        }
        last = Some(i);
    }
    if counts.is_empty() {
        return "-".into();
    }
    counts
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Access-log lines with this `$limit_req_status`.
pub(super) fn log_count(logs: &model::LogSummary, key: &str) -> u64 {
    logs.limit_req_status.get(key).copied().unwrap_or(0)
}

/// `part` as a percentage of `whole` (0 when `whole` is 0).
pub(super) fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// Seconds with two decimals, `93.00s`.
pub(super) fn secs(s: f64) -> String {
    format!("{s:.2}s")
}

/// A rate without decimals when it is whole (`3`, `2.50`).
pub(super) fn fmt_rate(r: f64) -> String {
    if (r - r.round()).abs() < 1e-9 {
        format!("{}", r.round() as i64)
    } else {
        format!("{r:.2}")
    }
}

/// Microseconds as milliseconds, without decimals when whole (`4`, `4.009`).
pub(super) fn fmt_ms(us: u64) -> String {
    if us % 1000 == 0 {
        (us / 1000).to_string()
    } else {
        format!("{:.3}", us as f64 / 1000.0)
    }
}

/// `3rd`, `4th`, `21st`.
pub(super) fn ordinal(n: u64) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, x) if x != 11 => "st",
        (2, x) if x != 12 => "nd",
        (3, x) if x != 13 => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinals_read_as_english() {
        let v: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21].map(ordinal).to_vec();
        assert_eq!(
            v,
            ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st"]
        );
    }
}
