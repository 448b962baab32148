//! The proxy's logs in report.md: error-log levels and grouped messages with one example each,
//! access-log statuses, non-2xx and 499 counts, upstream spread and rate-limit outcomes.

use crate::fmt::{self, code_block, count, Table};
use model::LogSummary;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Error-log groups shown with an example; the rest are summed in one line.
const GROUPS_SHOWN: usize = 20;

/// Writes the logs section (omitted when the case recorded no log at all).
/// `proxy` is the proxy kind's name, for the heading; `short` is the case's shortfall of the
/// logs, when some replicas' logs were read only in part.
pub fn render(out: &mut String, proxy: &str, logs: &LogSummary, short: Option<&model::Shortfall>) {
    if *logs == LogSummary::default() {
        return;
    }
    let _ = writeln!(out, "### {proxy} logs\n");
    if let Some(why) = &logs.missing {
        let _ = writeln!(out, "No log summary: {why}.\n");
        return;
    }
    // Some replicas' logs read in part: every count below is of what was read.
    if let Some(s) = short {
        let _ = writeln!(
            out,
            "**Partial:** these counts are of {} only; missing: {}. No check on them passes.\n",
            s.coverage(),
            s.detail()
        );
    }
    error_log(out, logs);
    access_log(out, logs);
}

fn error_log(out: &mut String, logs: &LogSummary) {
    let lines: u64 = logs.error_levels.values().sum();
    if lines == 0 {
        out.push_str("**Error log:** no lines.\n\n");
        return;
    }
    let levels: Vec<String> = logs
        .error_levels
        .iter()
        .map(|(l, n)| format!("{l} {}", count(*n)))
        .collect();
    let _ = writeln!(
        out,
        "**Error log:** {} lines ({}).\n",
        count(lines),
        levels.join(", ")
    );
    if logs.error_groups.is_empty() {
        return;
    }
    let mut t = Table::new(&["Level", ">Lines", "Message"]);
    for g in &logs.error_groups {
        t.row([g.level.clone(), count(g.count), g.message.clone()]);
    }
    out.push_str(&t.render());
    out.push('\n');
    out.push_str("One line of each group, verbatim:\n\n");
    for g in logs.error_groups.iter().take(GROUPS_SHOWN) {
        let _ = writeln!(
            out,
            "- `{}` {}, {} lines:\n",
            g.level,
            g.message.trim(),
            count(g.count)
        );
        let block = code_block("text", &g.example);
        for line in block.lines() {
            let _ = writeln!(out, "  {line}");
        }
        out.push('\n');
    }
    if logs.error_groups.len() > GROUPS_SHOWN {
        let rest: u64 = logs.error_groups[GROUPS_SHOWN..]
            .iter()
            .map(|g| g.count)
            .sum();
        let _ = writeln!(
            out,
            "{} more groups ({} lines) are in the table above without examples.\n",
            logs.error_groups.len() - GROUPS_SHOWN,
            count(rest)
        );
    }
}

fn spread<K: ToString>(title: &str, what: &str, m: &BTreeMap<K, u64>) -> String {
    let total: u64 = m.values().sum();
    let mut t = Table::new(&[what, ">Lines", ">Share"]);
    for (k, n) in m {
        t.row([k.to_string(), count(*n), fmt::pct(*n, total)]);
    }
    format!("{title}\n\n{}\n", t.render())
}

fn access_log(out: &mut String, logs: &LogSummary) {
    if logs.access_lines == 0 {
        out.push_str("**Access log:** no lines.\n\n");
        return;
    }
    let _ = writeln!(out, "**Access log:** {} lines.\n", count(logs.access_lines));
    if !logs.access_status.is_empty() {
        out.push_str(&spread(
            "Status of every logged request:",
            "Status",
            &logs.access_status,
        ));
    }
    let non_2xx: BTreeMap<u16, u64> = logs
        .access_status
        .iter()
        .filter(|(s, _)| !(200..300).contains(*s))
        .map(|(s, n)| (*s, *n))
        .collect();
    if non_2xx.is_empty() {
        out.push_str("Every logged request got a 2xx.\n\n");
    } else {
        let parts: Vec<String> = non_2xx
            .iter()
            .map(|(s, n)| format!("{s}: {}", count(*n)))
            .collect();
        let _ = writeln!(
            out,
            "Non-2xx in the access log: {} ({} in all).\n",
            parts.join(", "),
            count(non_2xx.values().sum())
        );
    }
    if !logs.status_origin.is_empty() {
        out.push_str(&spread(
            "Non-2xx/3xx by origin (`proxy`: the proxy answered itself, e.g. a failed upstream connect, a timeout or a limit; `upstream`: the backend's own status):",
            "Status and origin",
            &logs.status_origin,
        ));
    }
    let n499 = logs.access_status.get(&499).copied().unwrap_or(0);
    let _ = writeln!(
        out,
        "499 (the client closed the connection before the proxy answered): {}.\n",
        count(n499)
    );
    if !logs.examples_499.is_empty() {
        out.push_str(&code_block("text", &logs.examples_499.join("\n")));
        out.push('\n');
    }
    if !logs.upstream_status.is_empty() {
        out.push_str(&spread(
            "Upstream status (`-` when no upstream answered):",
            "Upstream status",
            &logs.upstream_status,
        ));
    }
    if !logs.upstream_addr.is_empty() {
        out.push_str(&spread(
            "Requests per upstream address:",
            "Upstream address",
            &logs.upstream_addr,
        ));
    }
    if !logs.limit_req_status.is_empty() {
        out.push_str(&spread(
            "Rate limiter outcome (`$limit_req_status`):",
            "limit_req_status",
            &logs.limit_req_status,
        ));
    }
}
