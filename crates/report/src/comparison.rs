//! comparison.md and comparison.json: one scenario run once per proxy kind (`proxybench run
//! SCENARIO --proxy a,b,c`), side by side. Per case and load: req/s, latency p50 / p99 / p99.9
//! and failures; per case: the proxy's CPU per request, its peak memory and its reload times.
//! Above them, how each proxy expresses every feature the scenario uses, so that a difference in
//! behaviour is never silent, and each proxy's version and own report.
//!
//! Everything here is computed from each proxy's [`RunResults`] and the rows the caller gives;
//! the output is deterministic (no clock, no hash-map order), so the same input gives the same
//! bytes.

use crate::fmt::{self, count, Table};
use crate::hdr;
use model::results_dir::COMPARISON_VERSION;
use model::{CaseResult, LoadSummary, RunResults};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// Process groups the runner samples that are not the proxy's (the load generator, the
/// backends, proxybench as a whole): every other group is a proxy replica.
const NOT_PROXY_GROUPS: [&str; 3] = ["load", "backends", "proxybench"];

/// How one proxy's run went, as the caller hands it in.
#[derive(Debug, Clone)]
pub enum Outcome<'a> {
    /// The run happened (completely or not): its analysed results and its exit code.
    Ran {
        /// The run's data.json.
        results: &'a RunResults,
        /// The exit code the run alone would have had.
        exit_code: u8,
    },
    /// The run could not be done; the message says why.
    Failed(String),
    /// The run was not started (the comparison was interrupted before it).
    NotRun(String),
}

/// One proxy of a comparison, as the caller hands it in.
#[derive(Debug, Clone)]
pub struct ProxyInput<'a> {
    /// The kind's name (`nginx`).
    pub kind: String,
    /// Its results directory, relative to the comparison directory.
    pub dir: String,
    /// How its run went.
    pub outcome: Outcome<'a>,
}

/// How far one proxy expresses one feature, as the capability table says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SupportCell {
    /// The kind's name.
    pub kind: String,
    /// `yes`, `differs` or `no`.
    pub level: String,
    /// How the behaviour differs, or why it cannot be expressed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One feature the scenario uses: where, and each proxy's support for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeatureRow {
    /// The model key that asks for it (`upstreams.keepalive`).
    pub feature: String,
    /// The items using it, `case: item` (`keepalive-cheap: upstream.app`).
    pub used_by: Vec<String>,
    /// Each proxy's support, in the comparison's proxy order.
    pub support: Vec<SupportCell>,
}

/// One proxy's line in comparison.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProxyEntry {
    /// The kind's name.
    pub kind: String,
    /// Its results directory, relative to the comparison directory.
    pub dir: String,
    /// `complete`, `partial`, `failed` or `not run`.
    pub status: String,
    /// Why the run is partial, failed or did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The exit code its run alone would have had (absent when it did not run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<u8>,
    /// The first line of the proxy's version output, from its env.
    pub version: String,
    /// When its run started (UTC).
    pub started_at: String,
    /// Checks passed and evaluated.
    pub checks: (u64, u64),
    /// What the proxy ran on (processes or threads, the CPUs it was pinned to), each distinct
    /// description of its cases once: equal resources are what make the comparison fair.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
}

/// One load's measurements under one proxy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadMetrics {
    /// The kind's name.
    pub kind: String,
    /// Complete responses, of any status (as the proxy's data.json counts them).
    pub requests: u64,
    /// Responses plus attempts that got none.
    pub attempts: u64,
    /// Attempts with no HTTP answer or a status outside 2xx/3xx.
    pub failures: u64,
    /// Failures as a percentage of attempts.
    pub failures_pct: Option<f64>,
    /// Responses per second over the load's length.
    pub req_per_sec: f64,
    /// Latency percentiles in microseconds.
    pub p50_us: Option<u64>,
    /// 99th percentile.
    pub p99_us: Option<u64>,
    /// 99.9th percentile.
    pub p999_us: Option<u64>,
}

/// One load of one case, under each proxy that ran it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadComparison {
    /// The load's name.
    pub name: String,
    /// One entry per proxy that ran it, in the comparison's proxy order.
    pub by_proxy: Vec<LoadMetrics>,
}

/// What the proxy itself cost and did in one case, under one kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProxyMetrics {
    /// The kind's name.
    pub kind: String,
    /// CPU seconds of the proxy's processes over the case (absent when no proxy ran).
    pub cpu_s: Option<f64>,
    /// `cpu_s` per response of the case's loads, in microseconds.
    pub cpu_us_per_request: Option<f64>,
    /// Largest resident memory of all the proxy's processes at one sample, in bytes.
    pub peak_rss_bytes: Option<u64>,
    /// Reloads (one per replica per reload).
    pub reloads: u64,
    /// Reloads that reported an error.
    pub reload_errors: u64,
    /// Median time until a reload's new generation served, in milliseconds.
    pub reload_served_p50_ms: Option<f64>,
    /// Longest such time, in milliseconds.
    pub reload_served_max_ms: Option<f64>,
    /// The most old generations draining at once (absent: not sampled, or a proxy that
    /// reloads inside one process).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draining_generations_max: Option<u32>,
    /// The most memory they held at once, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draining_rss_max: Option<u64>,
}

/// One long-lived load's connections under one proxy: what dropped them and how long they
/// lived.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamMetrics {
    /// The kind's name.
    pub kind: String,
    /// Connections that opened.
    pub opened: u64,
    /// Of those, dropped.
    pub dropped: u64,
    /// Drops with a close frame (a GOAWAY, a grpc-status).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub with_close: Option<u64>,
    /// Drops cut without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub without_close: Option<u64>,
    /// Drops placed on a reload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by_reload: Option<u64>,
    /// From the reload to the drop: median and longest, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reload_to_drop_p50_s: Option<f64>,
    /// The longest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reload_to_drop_max_s: Option<f64>,
    /// How long a dropped connection had lived, median, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lived_p50_s: Option<f64>,
    /// Connections that lasted to the load's end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lasted: Option<u64>,
}

/// One long-lived load of one case, under each proxy that ran it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamComparison {
    /// The load's name.
    pub name: String,
    /// Its protocol.
    pub protocol: String,
    /// One entry per proxy that ran it.
    pub by_proxy: Vec<StreamMetrics>,
}

/// One case under each proxy that ran it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseComparison {
    /// The case's name.
    pub name: String,
    /// Its loads, in the order the first proxy ran them.
    pub loads: Vec<LoadComparison>,
    /// Its long-lived loads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub streams: Vec<StreamComparison>,
    /// The proxy's own cost per kind that ran the case.
    pub proxy: Vec<ProxyMetrics>,
}

/// comparison.json: everything comparison.md shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// [`model::results_dir::COMPARISON_VERSION`].
    pub comparison_version: u32,
    /// The scenario's name.
    pub scenario: String,
    /// The scenario ran in its `--quick` form.
    pub quick: bool,
    /// True when a run stopped early or a proxy did not run.
    pub partial: bool,
    /// The proxies, in the order they ran.
    pub proxies: Vec<ProxyEntry>,
    /// The features the scenario uses and each proxy's support.
    pub features: Vec<FeatureRow>,
    /// The cases, in the order they ran.
    pub cases: Vec<CaseComparison>,
}

/// Builds the comparison of the runs in `proxies` (in the order they ran) of scenario
/// `scenario`, with the feature rows the caller computed from the scenario.
pub fn build(
    scenario: &str,
    quick: bool,
    proxies: &[ProxyInput<'_>],
    features: Vec<FeatureRow>,
) -> Comparison {
    let mut entries = Vec::new();
    let mut partial = false;
    for p in proxies {
        entries.push(proxy_entry(p, &mut partial));
    }
    let ran: Vec<(&str, &RunResults)> = proxies
        .iter()
        .filter_map(|p| match &p.outcome {
            Outcome::Ran { results, .. } => Some((p.kind.as_str(), *results)),
            _ => None,
        })
        .collect();
    let case_names = union(
        ran.iter()
            .map(|(_, r)| r.cases.iter().map(|c| c.name.as_str())),
    );
    let cases = case_names
        .into_iter()
        .map(|name| case_comparison(name, &ran))
        .collect();
    Comparison {
        comparison_version: COMPARISON_VERSION,
        scenario: scenario.to_string(),
        quick,
        partial,
        proxies: entries,
        features,
        cases,
    }
}

/// One proxy's entry: how its run went, its version, checks and resources; sets `partial`
/// when the run was partial or did not happen.
fn proxy_entry(p: &ProxyInput<'_>, partial: &mut bool) -> ProxyEntry {
    let (status, detail, exit_code, version, started_at, checks) = match &p.outcome {
        Outcome::Ran { results, exit_code } => {
            *partial |= results.partial;
            (
                if results.partial {
                    "partial"
                } else {
                    "complete"
                },
                results.abort_reason.clone(),
                Some(*exit_code),
                results.env.proxy.lines().next().unwrap_or("").to_string(),
                results.started_at.clone(),
                (
                    results.checks.iter().filter(|c| c.pass).count() as u64,
                    results.checks.len() as u64,
                ),
            )
        }
        Outcome::Failed(m) => {
            *partial = true;
            (
                "failed",
                Some(m.clone()),
                None,
                String::new(),
                String::new(),
                (0, 0),
            )
        }
        Outcome::NotRun(m) => {
            *partial = true;
            (
                "not run",
                Some(m.clone()),
                None,
                String::new(),
                String::new(),
                (0, 0),
            )
        }
    };
    ProxyEntry {
        kind: p.kind.clone(),
        dir: p.dir.clone(),
        status: status.into(),
        detail,
        exit_code,
        version,
        started_at,
        checks,
        resources: match &p.outcome {
            Outcome::Ran { results, .. } => {
                let mut r: Vec<String> = Vec::new();
                for v in results.env.proxy_resources.values() {
                    if !r.contains(v) {
                        r.push(v.clone());
                    }
                }
                r
            }
            _ => Vec::new(),
        },
    }
}

/// Case `name` under each proxy in `ran` that ran it: its loads, long-lived loads and the
/// proxy's own cost.
fn case_comparison(name: &str, ran: &[(&str, &RunResults)]) -> CaseComparison {
    let per: Vec<(&str, &CaseResult)> = ran
        .iter()
        .filter_map(|(k, r)| r.cases.iter().find(|c| c.name == name).map(|c| (*k, c)))
        .collect();
    CaseComparison {
        name: name.to_string(),
        loads: load_comparisons(&per),
        streams: stream_comparisons(&per),
        proxy: per.iter().map(|(k, c)| proxy_metrics(k, c)).collect(),
    }
}

/// The case's loads (in first-seen order), each under every proxy that ran it.
fn load_comparisons(per: &[(&str, &CaseResult)]) -> Vec<LoadComparison> {
    let load_names = union(
        per.iter()
            .map(|(_, c)| c.loads.iter().map(|l| l.name.as_str())),
    );
    load_names
        .into_iter()
        .map(|lname| LoadComparison {
            name: lname.to_string(),
            by_proxy: per
                .iter()
                .filter_map(|(k, c)| c.loads.iter().find(|l| l.name == lname).map(|l| load(k, l)))
                .collect(),
        })
        .collect()
}

/// The case's long-lived loads (in first-seen order), each under every proxy that ran it.
fn stream_comparisons(per: &[(&str, &CaseResult)]) -> Vec<StreamComparison> {
    let stream_names = union(
        per.iter()
            .map(|(_, c)| c.streams.iter().map(|l| l.name.as_str())),
    );
    stream_names
        .into_iter()
        .map(|lname| StreamComparison {
            name: lname.to_string(),
            protocol: per
                .iter()
                .find_map(|(_, c)| c.streams.iter().find(|s| s.name == lname))
                .map_or_else(String::new, |s| s.protocol.name().to_string()),
            by_proxy: per
                .iter()
                .filter_map(|(k, c)| {
                    let st = c.streams.iter().find(|s| s.name == lname)?;
                    Some(stream(k, st, c))
                })
                .collect(),
        })
        .collect()
}

/// Names in first-seen order across the lists.
fn union<'a, I, J>(lists: I) -> Vec<&'a str>
where
    I: Iterator<Item = J>,
    J: Iterator<Item = &'a str>,
{
    let mut seen = BTreeSet::new();
    lists.flatten().filter(|n| seen.insert(*n)).collect()
}

fn load(kind: &str, l: &LoadSummary) -> LoadMetrics {
    let attempts = l.attempts();
    let failures = l.failures();
    LoadMetrics {
        kind: kind.to_string(),
        requests: l.requests,
        attempts,
        failures,
        failures_pct: (attempts > 0).then(|| failures as f64 * 100.0 / attempts as f64),
        req_per_sec: l.req_per_sec_total(),
        p50_us: hdr::percentile_us(&l.latency, 50.0),
        p99_us: hdr::percentile_us(&l.latency, 99.0),
        p999_us: hdr::percentile_us(&l.latency, 99.9),
    }
}

fn stream(kind: &str, st: &model::stream::StreamSummary, c: &CaseResult) -> StreamMetrics {
    let b = c.stream_ledger.as_ref().and_then(|l| l.load(&st.name));
    StreamMetrics {
        kind: kind.to_string(),
        opened: st.opened,
        dropped: st.dropped,
        with_close: b.map(|b| b.with_close),
        without_close: b.map(|b| b.without_close),
        by_reload: b.map(|b| b.by_reload),
        reload_to_drop_p50_s: b.and_then(|b| b.reload_to_drop.p50_s),
        reload_to_drop_max_s: b.and_then(|b| b.reload_to_drop.max_s),
        lived_p50_s: b.and_then(|b| b.lifetime.p50_s),
        lasted: b.map(|b| b.survived),
    }
}

/// The proxy's CPU over the case (each sample's percentage covers the time since the group's
/// previous sample), its peak memory (all its groups at one sample time), and its reloads.
fn proxy_metrics(kind: &str, c: &CaseResult) -> ProxyMetrics {
    let mut by_group: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
    let mut rss_at: BTreeMap<u64, u64> = BTreeMap::new();
    for s in &c.proc_samples {
        if NOT_PROXY_GROUPS.contains(&s.group.as_str()) {
            continue;
        }
        by_group
            .entry(s.group.as_str())
            .or_default()
            .push((s.t_s, s.cpu_pct));
        *rss_at.entry(s.t_s.to_bits()).or_default() += s.rss_bytes;
    }
    let cpu_s = (!by_group.is_empty()).then(|| {
        by_group
            .values_mut()
            .map(|v| {
                v.sort_by(|a, b| a.0.total_cmp(&b.0));
                v.windows(2)
                    .map(|w| w[1].1 / 100.0 * (w[1].0 - w[0].0).max(0.0))
                    .sum::<f64>()
            })
            .sum::<f64>()
    });
    let requests: u64 = c.loads.iter().map(|l| l.requests).sum();
    let mut served: Vec<f64> = c.reloads.iter().filter_map(|r| r.served_ms).collect();
    served.sort_by(f64::total_cmp);
    ProxyMetrics {
        kind: kind.to_string(),
        cpu_s,
        cpu_us_per_request: cpu_s
            .filter(|_| requests > 0)
            .map(|s| s * 1e6 / requests as f64),
        peak_rss_bytes: rss_at.values().copied().max(),
        reloads: c.reloads.len() as u64,
        reload_errors: c.reloads.iter().filter(|r| r.error.is_some()).count() as u64,
        reload_served_p50_ms: median(&served),
        reload_served_max_ms: served.last().copied(),
        draining_generations_max: c
            .stream_ledger
            .as_ref()
            .filter(|l| !l.draining.is_empty() && l.in_place.is_empty())
            .map(|l| l.draining_generations_max()),
        draining_rss_max: c
            .stream_ledger
            .as_ref()
            .filter(|l| !l.draining.is_empty() && l.in_place.is_empty())
            .map(|l| l.draining_rss_max()),
    }
}

/// The median of sorted values (the mean of the middle two for an even count).
fn median(sorted: &[f64]) -> Option<f64> {
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

fn ms(us: Option<u64>) -> String {
    us.map_or_else(|| "-".into(), |v| format!("{:.3}", v as f64 / 1000.0))
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.digits$}"))
}

fn support_text(s: &SupportCell) -> String {
    match &s.note {
        Some(n) => format!("{}: {n}", s.level),
        None => s.level.clone(),
    }
}

/// Renders comparison.md.
pub fn render_markdown(c: &Comparison) -> String {
    let kinds: Vec<&str> = c.proxies.iter().map(|p| p.kind.as_str()).collect();
    let mut out = format!("# proxybench: `{}` on each proxy\n\n", c.scenario);
    let _ = writeln!(
        out,
        "The scenario ran {}once per proxy, one after another, with the same backends and the same \
         loads. Each proxy's own results directory holds its full report.{}\n",
        if c.quick { "in its quick form " } else { "" },
        if c.partial {
            " **PARTIAL**: a run stopped early or a proxy did not run."
        } else {
            ""
        }
    );
    out.push_str(&overview(c, &kinds));
    out.push_str(&features(c, &kinds));
    out.push_str(
        "\nLatencies are in milliseconds. A failure is an attempt with no HTTP answer or a status \
         outside 2xx/3xx. Proxy CPU is the CPU time of the proxy's processes over the case \
         (sampled once a second) divided by the responses of all the case's loads; peak RSS is \
         the largest resident memory of all its processes at one sample; a reload's time is until \
         its new generation served.\n",
    );

    for case in &c.cases {
        out.push_str(&case_section(case, &kinds));
    }
    out
}

/// The table of each proxy's run: its report, version, start, resources, outcome and checks.
fn overview(c: &Comparison, kinds: &[&str]) -> String {
    let mut head = vec![""];
    head.extend(kinds.iter().copied());
    let mut t = Table::new(&head);
    let row = |t: &mut Table, name: &str, f: &dyn Fn(&ProxyEntry) -> String| {
        let mut r = vec![name.to_string()];
        r.extend(c.proxies.iter().map(f));
        t.row(r);
    };
    row(&mut t, "Report", &|p| {
        if p.status == "complete" || p.status == "partial" {
            format!("[{0}/report.md]({0}/report.md)", p.dir)
        } else {
            "-".into()
        }
    });
    row(&mut t, "Version", &|p| p.version.clone());
    row(&mut t, "Started (UTC)", &|p| p.started_at.clone());
    if c.proxies.iter().any(|p| !p.resources.is_empty()) {
        row(&mut t, "Resources", &|p| {
            if p.resources.is_empty() {
                "-".into()
            } else {
                p.resources.join("; ")
            }
        });
    }
    row(&mut t, "Outcome", &|p| match &p.detail {
        Some(d) => format!("{} ({d})", p.status),
        None => p.status.clone(),
    });
    row(&mut t, "Checks", &|p| {
        format!("{} of {} passed", p.checks.0, p.checks.1)
    });
    row(&mut t, "Exit code", &|p| {
        p.exit_code.map_or_else(|| "-".into(), |c| c.to_string())
    });
    t.render()
}

/// How each proxy expresses the features the scenario uses.
fn features(c: &Comparison, kinds: &[&str]) -> String {
    let mut out = String::new();
    out.push_str("\n## Features the scenario uses\n\n");
    if c.features.is_empty() {
        out.push_str("None beyond the defaults every proxy has.\n");
    } else {
        out.push_str(
            "How each proxy expresses them: `yes` as the model means it, `differs` with another \
             behaviour (the note says how), `no` not at all.\n\n",
        );
        let mut head = vec!["Feature", "Used by"];
        head.extend(kinds.iter().copied());
        let mut t = Table::new(&head);
        for f in &c.features {
            let mut r = vec![format!("`{}`", f.feature), f.used_by.join(", ")];
            r.extend(kinds.iter().map(|k| {
                f.support
                    .iter()
                    .find(|s| s.kind == *k)
                    .map_or_else(|| "-".into(), support_text)
            }));
            t.row(r);
        }
        out.push_str(&t.render());
    }
    out
}

/// One case's table: each load's and long-lived load's numbers per proxy, then the proxies' own.
fn case_section(case: &CaseComparison, kinds: &[&str]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\n## Case `{}`\n", case.name);
    let present = |k: &str| case.proxy.iter().any(|p| p.kind == k);
    let cols: Vec<&str> = kinds.iter().copied().filter(|k| present(k)).collect();
    let mut head = vec!["Metric".to_string()];
    head.extend(cols.iter().map(|k| format!(">{k}")));
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    let mut t = Table::new(&head);
    for l in &case.loads {
        load_rows(&mut t, l, &cols);
    }
    for l in &case.streams {
        stream_rows(&mut t, l, &cols);
    }
    let no_proxy = case
        .proxy
        .iter()
        .all(|m| m.cpu_s.is_none() && m.peak_rss_bytes.is_none() && m.reloads == 0);
    if no_proxy {
        out.push_str(&t.render());
        out.push_str("\nNo proxy process ran in this case (the loads went to the backends).\n");
        return out;
    }
    proxy_rows(&mut t, case, &cols);
    out.push_str(&t.render());
    out
}

/// A load's rows: requests, rate, latency and failures on each proxy (`cols`).
fn load_rows(t: &mut Table, l: &LoadComparison, cols: &[&str]) {
    let cell = |k: &str, f: &dyn Fn(&LoadMetrics) -> String| {
        l.by_proxy
            .iter()
            .find(|m| m.kind == k)
            .map_or_else(|| "-".into(), f)
    };
    let mut add = |name: &str, f: &dyn Fn(&LoadMetrics) -> String| {
        let mut r = vec![format!("`{}` {name}", l.name)];
        r.extend(cols.iter().map(|k| cell(k, f)));
        t.row(r);
    };
    add("requests", &|m| count(m.requests));
    add("req/s", &|m| fmt::f2(m.req_per_sec));
    add("latency p50", &|m| ms(m.p50_us));
    add("latency p99", &|m| ms(m.p99_us));
    add("latency p99.9", &|m| ms(m.p999_us));
    add("failures", &|m| {
        format!(
            "{} ({})",
            count(m.failures),
            fmt::pct(m.failures, m.attempts)
        )
    });
}

/// A long-lived load's rows: connections opened, dropped and why, and how long they lived.
fn stream_rows(t: &mut Table, l: &StreamComparison, cols: &[&str]) {
    let cell = |k: &str, f: &dyn Fn(&StreamMetrics) -> String| {
        l.by_proxy
            .iter()
            .find(|m| m.kind == k)
            .map_or_else(|| "-".into(), f)
    };
    let mut add = |name: &str, f: &dyn Fn(&StreamMetrics) -> String| {
        let mut r = vec![format!("`{}` ({}) {name}", l.name, l.protocol)];
        r.extend(cols.iter().map(|k| cell(k, f)));
        t.row(r);
    };
    let n = |v: Option<u64>| v.map_or_else(|| "-".into(), count);
    add("connections opened", &|m| count(m.opened));
    add("dropped (with close / without)", &|m| {
        format!(
            "{} ({} / {})",
            count(m.dropped),
            n(m.with_close),
            n(m.without_close)
        )
    });
    add("dropped by reloads", &|m| n(m.by_reload));
    add("reload to drop p50 / max (s)", &|m| {
        format!(
            "{} / {}",
            opt(m.reload_to_drop_p50_s, 2),
            opt(m.reload_to_drop_max_s, 2)
        )
    });
    add("a dropped one lived, p50 (s)", &|m| opt(m.lived_p50_s, 2));
    add("lasted to the end", &|m| n(m.lasted));
}

/// The proxies' own rows: CPU per request, peak memory, reloads and draining generations.
fn proxy_rows(t: &mut Table, case: &CaseComparison, cols: &[&str]) {
    let cell = |k: &str, f: &dyn Fn(&ProxyMetrics) -> String| {
        case.proxy
            .iter()
            .find(|m| m.kind == k)
            .map_or_else(|| "-".into(), f)
    };
    let mut add = |name: &str, f: &dyn Fn(&ProxyMetrics) -> String| {
        let mut r = vec![name.to_string()];
        r.extend(cols.iter().map(|k| cell(k, f)));
        t.row(r);
    };
    add("proxy CPU per request (µs)", &|m| {
        opt(m.cpu_us_per_request, 1)
    });
    add("proxy peak RSS (MiB)", &|m| {
        opt(m.peak_rss_bytes.map(|b| b as f64 / 1048576.0), 1)
    });
    if case.proxy.iter().any(|m| m.reloads > 0) {
        add("reloads (errors)", &|m| {
            format!("{} ({})", count(m.reloads), count(m.reload_errors))
        });
        add("reload served p50 / max (ms)", &|m| {
            format!(
                "{} / {}",
                opt(m.reload_served_p50_ms, 1),
                opt(m.reload_served_max_ms, 1)
            )
        });
    }
    if case
        .proxy
        .iter()
        .any(|m| m.draining_generations_max.is_some())
    {
        add("old generations draining at most", &|m| {
            m.draining_generations_max
                .map_or_else(|| "-".into(), |g| g.to_string())
        });
        add("their RSS at most (MiB)", &|m| {
            opt(m.draining_rss_max.map(|b| b as f64 / 1048576.0), 1)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::{ProcSample, ReloadRecord};

    fn sample(t_s: f64, group: &str, cpu_pct: f64, rss_bytes: u64) -> ProcSample {
        ProcSample {
            t_s,
            group: group.into(),
            cpu_pct,
            rss_bytes,
            procs: 2,
        }
    }

    fn results() -> RunResults {
        let load: LoadSummary = serde_json::from_str(
            r#"{"schema":1,"name":"ping","url":"","method":"GET","mode":{"kind":"closed"},
            "threads":1,"connections":1,"start_s":0,"planned_s":null,"elapsed_s":2,
            "timeout_ms":1,"requests":1000,"bytes_read":0,"bytes_written":0,"status":{"200":990,"502":10},
            "errors":{},"connects":0,"latency":{"count":0,"mean_us":0,"stdev_us":0,"min_us":0,
            "max_us":0,"within_stdev_pct":0,"percentiles":[],"hdr":""},
            "latency_uncorrected":null,"req_per_sec":{"mean":0,"stdev":0,"max":0,
            "within_stdev_pct":0},"schedule":null,"timeline":[]}"#,
        )
        .unwrap();
        let reload = |ms| ReloadRecord {
            replica: "p-0".into(),
            generation: 2,
            t_s: 1.0,
            served_ms: Some(ms),
            command_ms: None,
            old_workers_exited_ms: None,
            validate_ms: 1.0,
            error: None,
        };
        RunResults {
            schema: model::SCHEMA_VERSION,
            scenario: "s".into(),
            description: String::new(),
            started_at: "2026-01-01T00:00:00Z".into(),
            quick: true,
            partial: false,
            abort_reason: None,
            env: model::Env::default(),
            findings: Vec::new(),
            checks: Vec::new(),
            cases: vec![CaseResult {
                name: "main".into(),
                loads: vec![load],
                reloads: vec![reload(30.0), reload(10.0), reload(20.0)],
                proc_samples: vec![
                    sample(0.0, "p-0", 0.0, 1000),
                    sample(0.0, "p-1", 0.0, 500),
                    sample(0.0, "backends", 0.0, 9999),
                    sample(1.0, "p-0", 50.0, 3000),
                    sample(1.0, "p-1", 10.0, 4000),
                    sample(1.0, "backends", 90.0, 99999),
                    sample(3.0, "p-0", 25.0, 2000),
                ],
                ..Default::default()
            }],
        }
    }

    #[test]
    fn proxy_cpu_memory_and_reloads_come_from_the_proxy_groups_only() {
        let r = results();
        let c = build(
            "s",
            true,
            &[ProxyInput {
                kind: "p".into(),
                dir: "p".into(),
                outcome: Outcome::Ran {
                    results: &r,
                    exit_code: 0,
                },
            }],
            Vec::new(),
        );
        let m = &c.cases[0].proxy[0];
        // p-0: 0.5 s over [0, 1] plus 0.5 s over [1, 3]; p-1: 0.1 s. Backends do not count.
        assert!((m.cpu_s.unwrap() - 1.1).abs() < 1e-9, "{m:?}");
        assert!((m.cpu_us_per_request.unwrap() - 1100.0).abs() < 1e-6);
        assert_eq!(m.peak_rss_bytes, Some(7000));
        assert_eq!(m.reload_served_p50_ms, Some(20.0));
        assert_eq!(m.reload_served_max_ms, Some(30.0));
        let l = &c.cases[0].loads[0].by_proxy[0];
        assert_eq!((l.requests, l.failures, l.attempts), (1000, 10, 1000));
        assert!(!c.partial);
    }

    #[test]
    fn each_proxy_s_resources_are_shown_once_per_distinct_description() {
        let mut r = results();
        r.env.proxy_resources = [
            ("a", "1 worker process, pinned to CPUs 1"),
            ("b", "1 worker process, pinned to CPUs 1"),
            ("c", "2 worker processes, not pinned"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let plain = results();
        let c = build(
            "s",
            false,
            &[
                ProxyInput {
                    kind: "nginx".into(),
                    dir: "nginx".into(),
                    outcome: Outcome::Ran {
                        results: &r,
                        exit_code: 0,
                    },
                },
                ProxyInput {
                    kind: "old".into(),
                    dir: "old".into(),
                    outcome: Outcome::Ran {
                        results: &plain,
                        exit_code: 0,
                    },
                },
            ],
            Vec::new(),
        );
        assert_eq!(
            c.proxies[0].resources,
            [
                "1 worker process, pinned to CPUs 1",
                "2 worker processes, not pinned"
            ]
        );
        assert!(c.proxies[1].resources.is_empty());
        let md = render_markdown(&c);
        let row = md.lines().find(|l| l.starts_with("| Resources")).unwrap();
        assert!(
            row.contains("1 worker process, pinned to CPUs 1; 2 worker processes, not pinned"),
            "{row}"
        );
        // A record from before resources were kept says nothing rather than "not pinned".
        assert!(row.trim_end().ends_with("| - |"), "{row}");
    }

    #[test]
    fn the_report_is_the_same_bytes_for_the_same_runs_and_says_what_did_not_run() {
        let r = results();
        let make = || {
            build(
                "s",
                false,
                &[
                    ProxyInput {
                        kind: "a".into(),
                        dir: "a".into(),
                        outcome: Outcome::Ran {
                            results: &r,
                            exit_code: 1,
                        },
                    },
                    ProxyInput {
                        kind: "b".into(),
                        dir: "b".into(),
                        outcome: Outcome::NotRun("interrupted before it started".into()),
                    },
                ],
                vec![FeatureRow {
                    feature: "rate_limits".into(),
                    used_by: vec!["main: rate_limit.rl".into()],
                    support: vec![
                        SupportCell {
                            kind: "a".into(),
                            level: "yes".into(),
                            note: None,
                        },
                        SupportCell {
                            kind: "b".into(),
                            level: "differs".into(),
                            note: Some("a sliding window".into()),
                        },
                    ],
                }],
            )
        };
        let (c1, c2) = (make(), make());
        assert_eq!(render_markdown(&c1), render_markdown(&c2));
        assert!(c1.partial);
        let md = render_markdown(&c1);
        assert!(md.contains("| Outcome | complete | not run (interrupted before it started) |"));
        assert!(md
            .contains("| `rate_limits` | main: rate_limit.rl | yes | differs: a sliding window |"));
        assert!(md.contains("| `ping` failures | 10 (1.00%) |"), "{md}");
        let back: Comparison = serde_json::from_str(&serde_json::to_string(&c1).unwrap()).unwrap();
        assert_eq!(back, c1);
    }
}
