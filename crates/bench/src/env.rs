//! The versions and machine a run happened on, and UTC timestamps without a date library.

use model::Env;
use std::fs;
use std::time::{SystemTime, UNIX_EPOCH};

/// Reads kernel, CPU, cores, OS and [`SYSCTLS`] from /proc and /etc; `kind` is the proxy kind's
/// name (`None` when no proxy runs) and `proxy_v` its driver's version text, verbatim.
pub fn capture(kind: Option<&str>, proxy_v: String) -> Env {
    let cpu = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_default();
    let os = fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_string())
        })
        .unwrap_or_default();
    Env {
        proxybench: env!("CARGO_PKG_VERSION").to_string(),
        proxy: proxy_v.trim_end().to_string(),
        proxy_kind: kind.map(str::to_string),
        kernel: fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        cpu,
        cores: std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1),
        os,
        sysctls: sysctls(),
        coarse_clock_us: Some(coarse_clock_tick_us()),
        platform: None,
        proxy_resources: Default::default(),
    }
}

/// The resolution of CLOCK_MONOTONIC_COARSE in microseconds (1000 if unknown): the clock nginx
/// caches once per event-loop turn, which limit_req reads;
/// recorded in [`Env::coarse_clock_us`] so the analyses never read it themselves.
pub fn coarse_clock_tick_us() -> u64 {
    let ts = rustix::time::clock_getres(rustix::time::ClockId::MonotonicCoarse);
    if ts.tv_sec < 0 || ts.tv_nsec < 0 {
        // Not a resolution: treat it as unknown.
        return 1000;
    }
    let us = ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1000;
    us.clamp(1, 100_000)
}

/// The kernel settings the analyses explain results with ([`Env::sysctls`]).
pub const SYSCTLS: &[&str] = &["net.ipv4.tcp_migrate_req"];

/// Reads every setting of [`SYSCTLS`] from /proc/sys; one that cannot be read is left out.
fn sysctls() -> std::collections::BTreeMap<String, String> {
    SYSCTLS
        .iter()
        .filter_map(|name| {
            let path = format!("/proc/sys/{}", name.replace('.', "/"));
            let v = fs::read_to_string(path).ok()?;
            Some((name.to_string(), v.trim().to_string()))
        })
        .collect()
}

/// Seconds since the Unix epoch written with `strftime` directives, in UTC.
fn utc(secs: u64, format: &str) -> String {
    let t = i64::try_from(secs)
        .ok()
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    t.strftime(format).to_string()
}

/// Now as RFC 3339 UTC, e.g. `2026-11-22T10:04:05Z`.
pub fn now_rfc3339() -> String {
    utc(now_secs(), "%Y-%m-%dT%H:%M:%SZ")
}

/// Now as a directory-safe UTC stamp, e.g. `20261122T100405Z`.
pub fn now_dir_stamp() -> String {
    utc(now_secs(), "%Y%m%dT%H%M%SZ")
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        let rfc = |s| utc(s, "%Y-%m-%dT%H:%M:%SZ");
        assert_eq!(rfc(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc(1_795_341_845), "2026-11-22T10:04:05Z");
        assert_eq!(utc(1_795_341_845, "%Y%m%dT%H%M%SZ"), "20261122T100405Z");
    }

    #[test]
    fn captures_this_machine() {
        let e = capture(Some("nginx"), "nginx version: nginx/1.22.1\n".into());
        assert!(e.cores >= 1);
        assert!(!e.kernel.is_empty());
        assert_eq!(e.proxy, "nginx version: nginx/1.22.1");
        assert_eq!(e.proxy_kind.as_deref(), Some("nginx"));
        let tick = e.coarse_clock_us.unwrap();
        assert!((1..=100_000).contains(&tick), "{tick}");
    }
}
