//! The Prometheus scrape's series by type, over the case and over each action's window:
//! histograms and counters as what they counted in the window (deltas), gauges as their
//! minimum, maximum and last value. Seed 002's tables ("reloads ≤ 500 ms: 98%") are the
//! histogram rows.
//!
//! A counter (or a histogram's count, sum and buckets) of one pod counts from its value at the
//! window's start (the last scrape at or before it; the pod's first scrape in the window when
//! it has none before) to its last scrape in the window. When a value goes down between two
//! scrapes, the counter was reset (its pod or process restarted and counts from zero again):
//! what it counted since the restart is the value after it, as Prometheus' `increase()` takes
//! it, and the row counts the reset. What the pod counted between the scrape before the reset
//! and the restart is lost, and a new pod's counts before its first scrape are not seen: both
//! are at most one scrape interval's worth. The pods' deltas are summed per series.

use crate::{Event, ScrapeSample};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The scrape's series over one window of the case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ScrapeWindow {
    /// What the window is: `case` (the whole case), or the action that opens it (`#2
    /// scale_replicas 3 -> 1`).
    pub window: String,
    /// The index of that action in the case's events (`None` for the whole case).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<usize>,
    /// Its start, seconds from the case origin.
    pub from_s: f64,
    /// Its end (the next action, or the case's end), seconds from the case origin.
    pub to_s: f64,
    /// Histograms' counts, sums and bucket shares in the window, summed over pods.
    pub histograms: Vec<HistogramDelta>,
    /// Counters' increases in the window, summed over pods.
    pub counters: Vec<CounterDelta>,
    /// Gauges (and series of unknown type) per pod: minimum, maximum and last in the window.
    pub gauges: Vec<GaugeRange>,
}

/// What one histogram (a family and its labels other than `le`) counted in a window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistogramDelta {
    /// The family's name (`nginx_gateway_fabric_nginx_reloads_milliseconds`).
    pub metric: String,
    /// Its labels other than `le`, as `k="v",...`.
    pub labels: String,
    /// Pods that reported it in the window.
    pub pods: u32,
    /// Observations in the window (`_count`'s increase).
    pub count: f64,
    /// Their sum (`_sum`'s increase), in the histogram's unit.
    pub sum: f64,
    /// `sum / count`; `None` when nothing was observed.
    pub mean: Option<f64>,
    /// The observations at or below each bound: the scenario's (`prometheus.le`), else every
    /// bound of the exposition but `+Inf`.
    pub buckets: Vec<BucketShare>,
    /// Counter resets seen in the window (a pod that restarted).
    pub resets: u32,
}

/// Observations at or below one bucket bound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BucketShare {
    /// The bound (`le`), in the histogram's unit.
    pub le: f64,
    /// Observations at or below it in the window; `None` when the exposition has no bucket
    /// with this bound (a share between two bounds is not known, so none is made up).
    pub count: Option<f64>,
    /// `count / HistogramDelta::count`; `None` when either is unknown or nothing was observed.
    pub share: Option<f64>,
}

/// What one counter (a sample name and its labels) counted in a window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterDelta {
    /// The sample's name (`nginx_gateway_fabric_nginx_reloads_total`).
    pub metric: String,
    /// Its labels, as `k="v",...`.
    pub labels: String,
    /// Pods that reported it in the window.
    pub pods: u32,
    /// Its increase, summed over pods.
    pub delta: f64,
    /// Counter resets seen in the window.
    pub resets: u32,
}

/// One gauge of one pod in a window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GaugeRange {
    /// The sample's name.
    pub metric: String,
    /// Its labels, as `k="v",...`.
    pub labels: String,
    /// The pod (`namespace/pod` when the namespace is known).
    pub pod: String,
    /// The type the exposition gave (`gauge`, or `untyped`/empty when it gave none).
    pub kind: String,
    /// Samples in the window.
    pub samples: u32,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
    /// The last value.
    pub last: f64,
}

/// The labels of `labels` (`k="v",...`) but `le`, and the value of `le`.
fn split_le(labels: &str) -> (String, Option<String>) {
    let mut le = None;
    let mut rest = Vec::new();
    for part in split_labels(labels) {
        match part.strip_prefix("le=") {
            Some(v) => le = Some(v.trim_matches('"').to_string()),
            None => rest.push(part),
        }
    }
    (rest.join(","), le)
}

/// `k="v",...` split at the commas between pairs (not those inside quoted values).
fn split_labels(labels: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, c) in labels.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                out.push(&labels[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if start < labels.len() {
        out.push(&labels[start..]);
    }
    out
}

/// A `le` value as a number (`+Inf` included).
fn le_value(le: &str) -> Option<f64> {
    match le {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        v => v.parse().ok(),
    }
}

/// The increase of one pod's counter over its samples in time order, and the resets in it.
fn increase(values: &[f64]) -> (f64, u32) {
    let (mut d, mut resets) = (0.0, 0);
    for w in values.windows(2) {
        if w[1] >= w[0] {
            d += w[1] - w[0];
        } else {
            d += w[1];
            resets += 1;
        }
    }
    (d, resets)
}

/// One series of one pod: (namespace/pod, metric, labels).
type Key = (String, String, String);

/// Every series of every pod: its type and its (time, value) samples in time order.
type Series = BTreeMap<Key, (String, Vec<(f64, f64)>)>;

/// The scrape's series over the whole case (`0..elapsed_s`) and over each action's window (from
/// its start to the next action's, or the case's end), by type. `le` are the bucket bounds the
/// scenario asks shares for (the exposition's own when empty).
pub fn scrape_windows(
    scrapes: &[ScrapeSample],
    events: &[Event],
    elapsed_s: f64,
    le: &[f64],
) -> Vec<ScrapeWindow> {
    if scrapes.is_empty() {
        return Vec::new();
    }
    // Every series of every pod, its samples in time order.
    let mut series: Series = BTreeMap::new();
    for s in scrapes {
        let pod = if s.namespace.is_empty() {
            s.pod.clone()
        } else {
            format!("{}/{}", s.namespace, s.pod)
        };
        series
            .entry((pod, s.metric.clone(), s.labels.clone()))
            .or_insert_with(|| (s.kind.clone(), Vec::new()))
            .1
            .push((s.t_s, s.value));
    }
    for (_, v) in series.values_mut() {
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let end = elapsed_s.max(scrapes.iter().map(|s| s.t_s).fold(0.0, f64::max));
    let mut out = vec![window(
        &series,
        "case".into(),
        None,
        f64::NEG_INFINITY,
        f64::INFINITY,
        le,
    )];
    if let Some(w) = out.first_mut() {
        w.from_s = 0.0;
        w.to_s = end;
    }
    for (i, e) in events.iter().enumerate() {
        let to = events.get(i + 1).map_or(f64::INFINITY, |n| n.t_s);
        let name = format!("#{} {} {}", i + 1, e.action, e.detail)
            .trim()
            .to_string();
        let mut w = window(&series, name, Some(i), e.t_s, to, le);
        w.to_s = to.min(end);
        out.push(w);
    }
    out
}

/// The series over `from..to`: each pod's samples from the last at or before `from` (its first
/// after it when none) to its last before `to`.
fn window(
    series: &Series,
    name: String,
    event: Option<usize>,
    from: f64,
    to: f64,
    le: &[f64],
) -> ScrapeWindow {
    // Counters: (metric, labels) -> (pods, delta, resets).
    let mut counters: BTreeMap<(&str, &str), (u32, f64, u32)> = BTreeMap::new();
    let mut hists: BTreeMap<(String, String), HistogramSum> = BTreeMap::new();
    let mut gauges = Vec::new();
    for ((pod, metric, labels), (kind, v)) in series {
        let vals = in_window(v, from, to);
        if vals.is_empty() {
            continue;
        }
        match kind.as_str() {
            "counter" if metric.ends_with("_created") => {}
            "counter" => add_counter(&mut counters, (metric, labels), &vals),
            "histogram" => add_histogram(&mut hists, pod, metric, labels, &vals),
            // A summary's quantiles are not deltas; its count and sum are counters.
            "summary" => {
                if metric.ends_with("_count") || metric.ends_with("_sum") {
                    add_counter(&mut counters, (metric, labels), &vals);
                }
            }
            _ => gauges.extend(gauge_range((pod, metric, labels, kind), v, from, to)),
        }
    }
    ScrapeWindow {
        window: name,
        event,
        from_s: from,
        to_s: to,
        histograms: hists
            .into_iter()
            .map(|((metric, labels), h)| h.delta(metric, labels, le))
            .collect(),
        counters: counters
            .into_iter()
            .map(|((metric, labels), (pods, delta, resets))| CounterDelta {
                metric: metric.to_string(),
                labels: labels.to_string(),
                pods,
                delta,
                resets,
            })
            .collect(),
        gauges,
    }
}

/// Adds one pod's counter series in the window to its (metric, labels): one more pod, its
/// increase and its resets.
fn add_counter<'a>(
    counters: &mut BTreeMap<(&'a str, &'a str), (u32, f64, u32)>,
    key: (&'a str, &'a str),
    vals: &[f64],
) {
    let (d, r) = increase(vals);
    let c = counters.entry(key).or_default();
    c.0 += 1;
    c.1 += d;
    c.2 += r;
}

/// A series' values in `from..to`, from its last sample at or before `from` (its first when
/// none is): what an increase over the window is counted from.
fn in_window(v: &[(f64, f64)], from: f64, to: f64) -> Vec<f64> {
    let start = v.iter().rposition(|(t, _)| *t <= from).unwrap_or(0);
    v[start..]
        .iter()
        .filter(|(t, _)| *t < to || to.is_infinite())
        .map(|(_, x)| *x)
        .collect()
}

/// One histogram family (labels but `le`) summed over its pods in a window.
#[derive(Default)]
struct HistogramSum {
    pods: std::collections::BTreeSet<String>,
    count: f64,
    sum: f64,
    buckets: BTreeMap<String, f64>,
    resets: u32,
}

/// Adds one pod's histogram series (a bucket, the count or the sum) in the window to its
/// family's sum; a series of none of the three is left out.
fn add_histogram(
    hists: &mut BTreeMap<(String, String), HistogramSum>,
    pod: &str,
    metric: &str,
    labels: &str,
    vals: &[f64],
) {
    let (d, r) = increase(vals);
    let (family, part) = if let Some(f) = metric.strip_suffix("_bucket") {
        (f, "bucket")
    } else if let Some(f) = metric.strip_suffix("_count") {
        (f, "count")
    } else if let Some(f) = metric.strip_suffix("_sum") {
        (f, "sum")
    } else {
        return;
    };
    let (rest, le) = if part == "bucket" {
        split_le(labels)
    } else {
        (labels.to_string(), None)
    };
    let h = hists.entry((family.to_string(), rest)).or_default();
    h.pods.insert(pod.to_string());
    match (part, le) {
        ("bucket", Some(le)) => *h.buckets.entry(le).or_default() += d,
        ("count", _) => {
            h.count += d;
            h.resets += r;
        }
        ("sum", _) => h.sum += d,
        _ => {}
    }
}

impl HistogramSum {
    /// The family's delta over the window, its buckets at `le` (or at the bounds it was
    /// scraped with, when `le` is empty) with each one's share of the count.
    fn delta(self, metric: String, labels: String, le: &[f64]) -> HistogramDelta {
        let bounds: Vec<f64> = if le.is_empty() {
            let mut b: Vec<f64> = self
                .buckets
                .keys()
                .filter_map(|k| le_value(k))
                .filter(|b| b.is_finite())
                .collect();
            b.sort_by(f64::total_cmp);
            b
        } else {
            le.to_vec()
        };
        let buckets = bounds
            .into_iter()
            .map(|b| {
                let count = self
                    .buckets
                    .iter()
                    .find(|(k, _)| le_value(k) == Some(b))
                    .map(|(_, n)| *n);
                BucketShare {
                    le: b,
                    count,
                    share: count.filter(|_| self.count > 0.0).map(|n| n / self.count),
                }
            })
            .collect();
        HistogramDelta {
            metric,
            labels,
            pods: self.pods.len() as u32,
            count: self.count,
            sum: self.sum,
            mean: (self.count > 0.0).then(|| self.sum / self.count),
            buckets,
            resets: self.resets,
        }
    }
}

/// A gauge's (or an untyped series') range over the window: its own samples in it, not the
/// one at or before the window's start; none when it has no sample in the window.
fn gauge_range(
    (pod, metric, labels, kind): (&str, &str, &str, &str),
    v: &[(f64, f64)],
    from: f64,
    to: f64,
) -> Option<GaugeRange> {
    let first_in = v.iter().position(|(t, _)| *t >= from).unwrap_or(v.len());
    let own: Vec<f64> = v[first_in..]
        .iter()
        .filter(|(t, _)| *t < to || to.is_infinite())
        .map(|(_, x)| *x)
        .collect();
    Some(GaugeRange {
        metric: metric.to_string(),
        labels: labels.to_string(),
        pod: pod.to_string(),
        kind: kind.to_string(),
        samples: own.len() as u32,
        min: own.iter().copied().fold(f64::INFINITY, f64::min),
        max: own.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        last: *own.last()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t: f64, pod: &str, metric: &str, labels: &str, kind: &str, value: f64) -> ScrapeSample {
        ScrapeSample {
            t_s: t,
            namespace: "gw".into(),
            pod: pod.into(),
            metric: metric.into(),
            labels: labels.into(),
            value,
            kind: kind.into(),
        }
    }

    fn event(t: f64, action: &str) -> Event {
        Event {
            t_s: t,
            action: action.into(),
            detail: String::new(),
            duration_ms: 0.0,
            error: None,
            limit: false,
        }
    }

    #[test]
    fn counters_are_increases_summed_over_pods_across_a_reset() {
        let mut v = Vec::new();
        // Pod a: 10, 15, then restarted: 3, 7 -> 5 + 7 = 12, one reset.
        for (t, x) in [(0.0, 10.0), (1.0, 15.0), (2.0, 3.0), (3.0, 7.0)] {
            v.push(s(t, "a", "r_total", "code=\"200\"", "counter", x));
        }
        // Pod b: 0 -> 4.
        for (t, x) in [(0.0, 0.0), (3.0, 4.0)] {
            v.push(s(t, "b", "r_total", "code=\"200\"", "counter", x));
        }
        let w = scrape_windows(&v, &[event(1.5, "reload")], 3.0, &[]);
        assert_eq!(w.len(), 2);
        let c = &w[0].counters[0];
        assert_eq!((c.pods, c.delta, c.resets), (2, 16.0, 1));
        // From 1.5: pod a from its 15 at 1.0 -> 3 (reset) -> 7: 7; pod b from 0 -> 4: 4.
        let c = &w[1].counters[0];
        assert_eq!((c.delta, c.resets), (11.0, 1));
        assert_eq!(w[1].window, "#1 reload");
    }

    #[test]
    fn histograms_give_count_sum_mean_and_shares_at_their_bounds() {
        let mut v = Vec::new();
        let h = |t: f64, le: &str, x: f64| {
            s(
                t,
                "p",
                "rl_ms_bucket",
                &format!("class=\"x\",le=\"{le}\""),
                "histogram",
                x,
            )
        };
        for (t, k) in [(0.0, 0.0), (10.0, 1.0)] {
            v.push(h(t, "500", 2.0 + 49.0 * k));
            v.push(h(t, "1000", 2.0 + 50.0 * k));
            v.push(h(t, "+Inf", 2.0 + 50.0 * k));
            v.push(s(
                t,
                "p",
                "rl_ms_count",
                "class=\"x\"",
                "histogram",
                2.0 + 50.0 * k,
            ));
            v.push(s(
                t,
                "p",
                "rl_ms_sum",
                "class=\"x\"",
                "histogram",
                100.0 + 5000.0 * k,
            ));
        }
        let w = scrape_windows(&v, &[], 10.0, &[500.0, 250.0]);
        let h = &w[0].histograms[0];
        assert_eq!(
            (h.metric.as_str(), h.labels.as_str()),
            ("rl_ms", "class=\"x\"")
        );
        assert_eq!((h.count, h.sum, h.mean), (50.0, 5000.0, Some(100.0)));
        assert_eq!(h.buckets[0].count, Some(49.0));
        assert_eq!(h.buckets[0].share, Some(0.98));
        // No bucket at 250: unknown, not interpolated.
        assert_eq!((h.buckets[1].count, h.buckets[1].share), (None, None));
        // Without bounds asked: the exposition's, +Inf left out.
        let w = scrape_windows(&v, &[], 10.0, &[]);
        let les: Vec<f64> = w[0].histograms[0].buckets.iter().map(|b| b.le).collect();
        assert_eq!(les, [500.0, 1000.0]);
    }

    #[test]
    fn gauges_keep_min_max_last_per_pod() {
        let v = vec![
            s(0.0, "p", "up", "", "gauge", 1.0),
            s(1.0, "p", "up", "", "gauge", 0.0),
            s(2.0, "p", "up", "", "gauge", 1.0),
            s(2.0, "q", "conns", "", "", 5.0),
        ];
        let w = scrape_windows(&v, &[event(0.5, "kill")], 2.0, &[]);
        let g = &w[0].gauges;
        assert_eq!(g.len(), 2);
        let up = g.iter().find(|g| g.metric == "up").unwrap();
        assert_eq!(
            (up.pod.as_str(), up.samples, up.min, up.max, up.last),
            ("gw/p", 3, 0.0, 1.0, 1.0)
        );
        let up = w[1].gauges.iter().find(|g| g.metric == "up").unwrap();
        assert_eq!(up.samples, 2);
    }
}
