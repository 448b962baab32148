//! The builders every analysis shares (ratios, counts, latencies, shares, multipliers, checks)
//! and the loader of the data files (`crates/analysis/data/*.toml`) that hold each analysis'
//! reference numbers, tolerances and prose, so that none of it sits in Rust literals.

use super::Records;
use model::{
    Absent, CaseResult, Cell, CheckResult, Collector, Incomplete, Measured, RequestRecord,
};
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::fmt::Display;

/// `a / b`, 0 when `b` is 0.
pub fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// An exact count (prints with thousands separators).
pub fn count(n: u64) -> Cell {
    Cell::Count(n)
}

/// A latency in whole microseconds (prints as wrk does).
pub fn lat(us: u64) -> Cell {
    Cell::Us(us as f64)
}

/// A duration in microseconds (prints as wrk does).
pub fn us(us: f64) -> Cell {
    Cell::Us(us)
}

/// A fraction as a percentage with two decimals.
pub fn pct(v: f64) -> Cell {
    Cell::pct(v)
}

/// `a / b` as a multiplier (`0.14× (÷7.1)`), `-` when either side is not positive.
pub fn times(a: f64, b: f64) -> Cell {
    if a <= 0.0 || b <= 0.0 {
        Cell::dash()
    } else {
        Cell::Times(a / b)
    }
}

/// The cell, or `-` when there is no value.
pub fn or_dash(c: Option<Cell>) -> Cell {
    c.unwrap_or_else(Cell::dash)
}

/// Text items joined by `sep`.
pub fn join<T: Display>(items: impl IntoIterator<Item = T>, sep: &str) -> String {
    items
        .into_iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(sep)
}

/// The proxy kind whose own mechanisms the built-in theory models where it is not generic
/// (limit_req's leaky bucket, the master's reload sequence, the config checker's cost): nginx,
/// the kind proxybench began with. Analyses compare another kind against these models only
/// after saying that the model is this kind's.
pub const MODELLED_KIND: &str = "nginx";

/// The run's proxy kind, as it recorded it (`proxy` for records that did not keep it).
pub fn proxy_kind(env: &model::Env) -> &str {
    env.proxy_kind.as_deref().unwrap_or("proxy")
}

/// The proxy kind's name as its replicas and their process groups are named (`KIND-0`...): the
/// run's recorded kind, else the case's (records that did not keep the kind).
pub fn replica_kind(env: &model::Env, case: Option<&scenario::Case>) -> String {
    env.proxy_kind.clone().unwrap_or_else(|| {
        case.and_then(|c| c.proxy.as_ref())
            .map_or_else(String::new, |p| p.kind.name().to_string())
    })
}

/// True when the run's proxy is the kind the theory models ([`MODELLED_KIND`]); records that
/// did not keep their kind were made when it was the only kind.
pub fn model_applies(env: &model::Env) -> bool {
    env.proxy_kind.as_deref().is_none_or(|k| k == MODELLED_KIND)
}

/// `c` failed because the run's proxy kind cannot give its data: the same name and expectation,
/// "not measurable for KIND: why" as its actual value. It never passes.
pub fn not_measurable(c: CheckResult, kind: &str, why: &str) -> CheckResult {
    CheckResult {
        actual: format!("not measurable for {kind}: {why}"),
        pass: false,
        ..c
    }
}

/// One check of a case.
pub fn check(
    case: &str,
    name: impl Into<String>,
    expected: impl Into<String>,
    actual: impl Display,
    pass: bool,
) -> CheckResult {
    CheckResult {
        name: name.into(),
        case: Some(case.to_string()),
        expected: expected.into(),
        actual: actual.to_string(),
        pass,
    }
}

/// One check of a case whose actual value comes from collectors: `judge` gives the actual value
/// and the verdict when they gathered all of it; otherwise the check fails as "not measurable:
/// <collector> not sampled: why" or "not measurable: <collector> covered 2 of 3 replicas (...)".
/// No check passes on an absent collector's zeros, nor on part of what it claims.
pub fn measured_check<T>(
    case: &str,
    name: impl Into<String>,
    expected: impl Into<String>,
    m: Measured<T>,
    judge: impl FnOnce(T) -> (String, bool),
) -> CheckResult {
    match m.complete() {
        Ok(v) => {
            let (actual, pass) = judge(v);
            check(case, name, expected, actual, pass)
        }
        Err(a) => unmeasured(case, name, expected, &a),
    }
}

/// A check that cannot be made because a collector it reads gathered nothing, or only part:
/// it fails as "not measurable: <collector> not sampled: why" (or "... covered 2 of 3 ...").
pub fn unmeasured(
    case: &str,
    name: impl Into<String>,
    expected: impl Into<String>,
    a: &impl Display,
) -> CheckResult {
    check(case, name, expected, format!("not measurable: {a}"), false)
}

/// Every value of `items` with the narrowest coverage among them: absent when one is absent,
/// partial when one is partial.
pub fn all_measured<T>(items: impl IntoIterator<Item = Measured<T>>) -> Measured<Vec<T>> {
    items.into_iter().collect()
}

/// The values of named items (each load, each replica) as one partial value when some are
/// absent: the present ones, with the absent ones as the missing `unit` (`loads`) and why.
/// Absent only when every item is.
pub fn over_items<T>(
    unit: &str,
    items: impl IntoIterator<Item = (String, Measured<T>)>,
) -> Measured<Vec<T>> {
    let items: Vec<(String, Measured<T>)> = items.into_iter().collect();
    let of = items.len();
    let mut missing: Vec<model::MissingItem> = Vec::new();
    let mut first_absent = None;
    let mut present = Vec::new();
    for (name, m) in items {
        match m {
            Measured::Absent(a) => {
                missing.push(model::MissingItem {
                    item: name,
                    why: a.why.clone(),
                });
                first_absent.get_or_insert(a);
            }
            m => present.push(m),
        }
    }
    let all: Measured<Vec<T>> = present.into_iter().collect();
    match (first_absent, all) {
        (None, all) => all,
        (Some(a), _) if missing.len() == of => Measured::Absent(a),
        (Some(a), all) => {
            let own = model::Partial {
                collector: a.collector,
                shortfall: model::Shortfall::new(unit, of, missing),
            };
            match all {
                Measured::Complete(v) => Measured::Partial(v, own),
                Measured::Partial(v, p) => Measured::Partial(v, p),
                Measured::Absent(a) => Measured::Absent(a),
            }
        }
    }
}

/// The findings sentence that names every collector among `used` that gathered nothing in the
/// case, and why: the one sentence that stands in for every number they would have given.
pub fn not_sampled(r: &CaseResult, used: &[Collector]) -> Option<String> {
    let gaps: Vec<String> = used
        .iter()
        .filter_map(|c| r.gap(*c).map(|why| format!("{} ({why})", c.what())))
        .collect();
    (!gaps.is_empty()).then(|| {
        format!(
            "Not sampled in this case, so no number below is drawn from them: {}.",
            gaps.join("; ")
        )
    })
}

/// A finding that draws on collectors: `say` of their values; when they covered only part,
/// the same sentence followed by what it is drawn from and what is missing; or "WHAT: not
/// measurable (<collector> not sampled)" when one of them gathered nothing ([`not_sampled`]
/// says why once per case).
pub fn finding<T>(what: &str, m: Measured<T>, say: impl FnOnce(T) -> String) -> String {
    match m {
        Measured::Complete(v) => say(v),
        Measured::Partial(v, p) => partial_finding(say(v), &p),
        Measured::Absent(a) => unmeasured_finding(what, &Incomplete::Absent(a)),
    }
}

/// A sentence drawn from part of what it speaks of, saying so: `SENTENCE (drawn from 2 of 3
/// replicas' status pages; missing: nginx-2: never answered).`
pub fn partial_finding(sentence: String, p: &model::Partial) -> String {
    format!(
        "{} (drawn from {} only, by {}; missing: {}).",
        sentence.trim_end_matches('.'),
        p.shortfall.coverage(),
        p.collector.what(),
        p.shortfall.detail()
    )
}

/// "WHAT: not measurable (<collector> not sampled).": the finding that stands where a sentence
/// would have drawn on a collector that gathered nothing (or, for a check's sake, only part).
pub fn unmeasured_finding(what: &str, a: &Incomplete) -> String {
    match a {
        Incomplete::Absent(a) => format!(
            "{what}: not measurable ({} not sampled).",
            a.collector.what()
        ),
        Incomplete::Partial(p) => format!("{what}: not measurable ({p})."),
    }
}

/// A load's per-request records, or why the run kept none for it.
pub fn load_records<'a>(
    r: &CaseResult,
    records: &'a Records,
    load: &str,
) -> Measured<&'a [RequestRecord]> {
    let absent = |why| Absent {
        collector: Collector::Records,
        why,
    };
    if let Some(why) = r.records_gap(load) {
        return Measured::Absent(absent(why));
    }
    if let Some(m) = r
        .shortfall(Collector::Records)
        .and_then(|s| s.missing.into_iter().find(|m| m.item == load))
    {
        return Measured::Absent(absent(m.why));
    }
    match records.get(load) {
        Some(v) => Measured::Complete(v.as_slice()),
        None => Measured::Absent(absent(format!(
            "no per-request records were found for load '{load}'"
        ))),
    }
}

/// Parses an analysis' data file (embedded with `include_str!`). Each analysis parses its file
/// in a unit test, so a broken file fails `cargo test`, not a user's run.
pub fn parse<T: DeserializeOwned>(name: &str, src: &str) -> T {
    toml::from_str(src).unwrap_or_else(|e| panic!("crates/analysis/data/{name}.toml: {e}"))
}

/// Prose templates of one analysis, by key: `{name}` placeholders are filled from the run.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(transparent)]
pub struct Texts(BTreeMap<String, String>);

impl Texts {
    /// The template `key` with no placeholders filled (panics on a missing key: every key the
    /// code uses is checked against the file by [`Texts::keys_used_in`] in a unit test).
    pub fn get(&self, key: &str) -> &str {
        self.0
            .get(key)
            .unwrap_or_else(|| panic!("no text '{key}' in the analysis' data file"))
    }

    /// The template `key` with its `{name}` placeholders replaced by `args`.
    pub fn fill(&self, key: &str, args: &[(&str, &dyn Display)]) -> String {
        fill(self.get(key), args)
    }

    #[cfg(test)]
    /// Keys that `src` (an analysis' source) looks up as `text("key"` or `fill("key"`: a
    /// test asserts each is in the file.
    pub fn keys_used_in(src: &str) -> Vec<String> {
        let mut out = Vec::new();
        for pat in ["text(\"", "fill(\""] {
            let mut from = 0;
            while let Some(i) = src[from..].find(pat) {
                let at = from + i;
                from = at + pat.len();
                // `Cell::text("...")` and other paths are not lookups.
                let before = src[..at].chars().next_back().unwrap_or(' ');
                if before == ':' || before == '_' || before.is_alphanumeric() {
                    continue;
                }
                if let Some(end) = src[from..].find('"') {
                    out.push(src[from..from + end].to_string());
                }
            }
        }
        out
    }

    #[cfg(test)]
    /// True when `key` is in the file.
    pub fn has(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }
}

/// `template` with each `{name}` replaced by the matching argument; an unknown placeholder
/// stays as written, so a test sees it.
pub fn fill(template: &str, args: &[(&str, &dyn Display)]) -> String {
    let mut out = String::with_capacity(template.len() + 64);
    let mut rest = template;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let name_end = after.find('}');
        match name_end
            .map(|e| &after[..e])
            .and_then(|n| args.iter().find(|(k, _)| *k == n))
        {
            Some((k, v)) => {
                out.push_str(&v.to_string());
                rest = &after[k.len() + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Asserts that every text key `src` uses exists in `texts`, and every placeholder-free render
/// works: the test each analysis runs on its data file.
#[cfg(test)]
pub fn assert_keys(name: &str, texts: &Texts, srcs: &[&str]) {
    for src in srcs {
        for k in Texts::keys_used_in(src) {
            assert!(texts.has(&k), "{name}.toml has no text '{k}'");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_fill_named_placeholders_and_leave_unknown_ones() {
        let n = 3u64;
        assert_eq!(
            fill("{n} of {m} ({n})", &[("n", &n), ("m", &"ten")]),
            "3 of ten (3)"
        );
        assert_eq!(fill("{x} and {", &[]), "{x} and {");
    }

    #[test]
    fn builders_print_as_the_tables_did() {
        assert_eq!(times(20.0, 100.0).to_string(), "0.20× (÷5.0)");
        assert_eq!(times(500.0, 100.0).to_string(), "5.00×");
        assert_eq!(times(0.0, 100.0).to_string(), "-");
        assert_eq!(count(1_234_567).to_string(), "1,234,567");
        assert_eq!(count(999).to_string(), "999");
        assert_eq!(lat(1500).to_string(), "1.50ms");
        assert_eq!(pct(0.5).to_string(), "50.00%");
        assert_eq!(ratio(1, 0), 0.0);
        let c = check("c", "n", "e", count(1000), true);
        assert_eq!((c.case.as_deref(), c.actual.as_str()), (Some("c"), "1,000"));
    }

    /// A check on an absent collector fails and says which and why, whatever its verdict
    /// would have been on a value.
    #[test]
    fn checks_on_absent_collectors_are_not_measurable() {
        let gone = Absent {
            collector: Collector::Logs,
            why: "no replica ran".into(),
        };
        let c = measured_check("c", "n", "e", Measured::<u64>::Absent(gone.clone()), |n| {
            (n.to_string(), true)
        });
        assert!(!c.pass);
        assert_eq!(
            c.actual,
            "not measurable: the proxy's logs not sampled: no replica ran"
        );
        let c = measured_check("c", "n", "e", Measured::Complete(3u64), |n| {
            (n.to_string(), n == 3)
        });
        assert!(c.pass && c.actual == "3");
        assert_eq!(
            finding("The retries", Measured::<()>::Absent(gone), |_| "said"
                .into()),
            "The retries: not measurable (the proxy's logs not sampled)."
        );
    }

    fn partial_pages() -> model::Partial {
        model::Partial {
            collector: Collector::StatusPages,
            shortfall: model::Shortfall::new(
                "replicas",
                3,
                vec![model::MissingItem {
                    item: "nginx-2".into(),
                    why: "its status page never answered".into(),
                }],
            ),
        }
    }

    /// A check whose evidence covers part of its claim fails as not measurable, naming what is
    /// missing, whatever its verdict on the part would have been; a cell shows the part with its
    /// coverage; a finding says what it is drawn from.
    #[test]
    fn partial_evidence_never_passes_and_says_its_coverage() {
        let m = Measured::Partial(12u64, partial_pages());
        let c = measured_check("c", "served", ">= 0", m.clone(), |n| (n.to_string(), true));
        assert!(!c.pass, "{c:?}");
        assert_eq!(
            c.actual,
            "not measurable: status pages covered 2 of 3 replicas (nginx-2: its status page \
             never answered)"
        );
        assert_eq!(
            Cell::measured(&m, |n| Cell::Int(*n as i64)).to_string(),
            "12 (2 of 3 replicas)"
        );
        assert_eq!(Cell::measured(&m, |n| Cell::Int(*n as i64)).as_f64(), None);
        assert_eq!(
            finding("Served", m, |n| format!(
                "The replicas served {n} requests."
            )),
            "The replicas served 12 requests (drawn from 2 of 3 replicas only, by status pages; \
             missing: nginx-2: its status page never answered)."
        );
    }

    /// Items absent one by one make the whole partial, naming them; all absent is absent.
    #[test]
    fn absent_items_make_the_whole_partial() {
        let gone = |load: &str| Absent {
            collector: Collector::Records,
            why: format!("no per-request records were found for load '{load}'"),
        };
        let m = over_items(
            "loads",
            [
                ("coffee".to_string(), Measured::Complete(3u64)),
                ("tea".to_string(), Measured::Absent(gone("tea"))),
            ],
        );
        let Measured::Partial(v, p) = &m else {
            panic!("{m:?}")
        };
        assert_eq!(
            (v.as_slice(), p.shortfall.coverage()),
            (&[3u64][..], "1 of 2 loads".into())
        );
        assert!(p.shortfall.lacks("tea") && !p.shortfall.lacks("coffee"));
        let m = over_items(
            "loads",
            [("tea".to_string(), Measured::<u64>::Absent(gone("tea")))],
        );
        assert!(matches!(m, Measured::Absent(_)));
        // A partial joined with a complete one stays partial; with an absent one, absent.
        let all: Measured<Vec<u64>> =
            [Measured::Complete(1), Measured::Partial(2, partial_pages())]
                .into_iter()
                .collect();
        assert!(matches!(all, Measured::Partial(ref v, _) if v == &[1, 2]));
        let all: Measured<Vec<u64>> = [
            Measured::Partial(2, partial_pages()),
            Measured::Absent(gone("tea")),
        ]
        .into_iter()
        .collect();
        assert!(matches!(all, Measured::Absent(_)));
    }

    #[test]
    fn used_keys_are_found_in_source() {
        let src = r#"text("c"); Cell::text("no"); x.fill("b", &[]); common::fill("{a}", &[])"#;
        assert_eq!(Texts::keys_used_in(src), ["c", "b"]);
    }
}

/// Ready pods of `role` against time, as steps (the count before and after each change), held
/// to `end`: the pods-Ready line the analyses chart on Kubernetes. Empty when the role had no
/// pod.
pub fn ready_steps(k: &model::ClusterRecord, role: &str, end: f64) -> Vec<(f64, f64)> {
    let mut ready: BTreeMap<&str, bool> = BTreeMap::new();
    let mut pts = Vec::new();
    let mut n = 0.0;
    let mut changes: Vec<&model::PodChange> = k.pods.iter().filter(|p| p.role == role).collect();
    changes.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    for p in changes {
        ready.insert(&p.pod, p.ready && p.phase != "Deleted");
        let m = ready.values().filter(|r| **r).count() as f64;
        pts.push((p.t_s, n));
        pts.push((p.t_s, m));
        n = m;
    }
    if let Some(&(t, _)) = pts.last() {
        pts.push((end.max(t), n));
    }
    pts
}

/// The fewest and most pods of `role` Ready at once, counted from the first time one was
/// Ready (`None` when none ever was).
pub fn ready_range(k: &model::ClusterRecord, role: &str) -> Option<(u64, u64)> {
    let pts = ready_steps(k, role, 0.0);
    let first = pts.iter().position(|p| p.1 > 0.0)?;
    let vals = pts[first..].iter().map(|p| p.1 as u64);
    Some((vals.clone().min()?, vals.max()?))
}

/// One sentence on what the cluster showed in a case, for the analyses' findings: the proxy
/// pods' Ready range, restarts and Warning events, each only when its collector gathered it,
/// and each absent collector's reason. `None` off Kubernetes.
pub fn cluster_finding(r: &CaseResult) -> Option<String> {
    let k = r.cluster.as_ref()?;
    let mut parts = Vec::new();
    if r.gap(Collector::PodWatch).is_none() {
        parts.push(match ready_range(k, "proxy") {
            Some((lo, hi)) => format!("between {lo} and {hi} proxy pods were Ready at once"),
            None => "no proxy pod was ever Ready".to_string(),
        });
        // The proxy Service's endpoints, when the platform watched its EndpointSlices.
        if k.pods.iter().any(|p| p.role == "endpoint") {
            parts.push(match ready_range(k, "endpoint") {
                Some((lo, hi)) => format!(
                    "between {lo} and {hi} of the proxy Service's endpoints were ready at once"
                ),
                None => "the proxy Service never had a ready endpoint".to_string(),
            });
        }
    }
    // As the API counts them (the jumps in restartCount, each event's count's increase within
    // the case); a record that kept only the counts says what it has.
    if r.gap(Collector::Restarts).is_none() {
        parts.push(match k.restarts_in_case() {
            Some(n) => format!("{n} container restart(s)"),
            None => format!(
                "{} restart count change(s) (how many restarts each was is not recorded)",
                k.restarts.len()
            ),
        });
    }
    if r.gap(Collector::Events).is_none() {
        parts.push(match k.warnings_in_case() {
            Some(n) => format!("{n} Warning event(s)"),
            None => format!(
                "{} Warning event count change(s) (their increase within the case is not \
                 recorded)",
                k.warnings.len()
            ),
        });
    }
    let mut s = format!(
        "On Kubernetes (namespace {})",
        if k.namespace.is_empty() {
            "not recorded"
        } else {
            &k.namespace
        },
    );
    if parts.is_empty() {
        s.push('.');
    } else {
        s.push_str(&format!(": {}.", parts.join("; ")));
    }
    for a in &k.absent {
        s.push_str(&format!(" Absent: {}", a.trim()));
        if !s.ends_with('.') {
            s.push('.');
        }
    }
    for m in &k.counters_missing {
        s.push_str(&format!(" Backend counters missing: {}", m.trim()));
        if !s.ends_with('.') {
            s.push('.');
        }
    }
    // A collector that gathered part: what it covered and what it missed, so no count above
    // reads as whole when it is not.
    for c in [
        Collector::PodWatch,
        Collector::Restarts,
        Collector::Events,
        Collector::MetricsApi,
        Collector::Scrape,
        Collector::LogLevels,
    ] {
        if let Some(p) = r
            .incomplete(c)
            .filter(|i| matches!(i, Incomplete::Partial(_)))
        {
            s.push_str(&format!(" Partial: {p}."));
        }
    }
    Some(s)
}

#[cfg(test)]
mod cluster_tests {
    use super::*;

    #[test]
    fn ready_steps_and_the_cluster_sentence_come_from_the_pod_changes() {
        let pod = |t: f64, pod: &str, phase: &str, ready: bool| model::PodChange {
            t_s: t,
            pod: pod.into(),
            role: "proxy".into(),
            phase: phase.into(),
            ready,
            terminating: false,
        };
        let k = model::ClusterRecord {
            namespace: "ns".into(),
            pods: vec![
                pod(1.0, "a", "Running", true),
                pod(2.0, "b", "Running", true),
                pod(3.0, "a", "Deleted", false),
            ],
            absent: vec!["metrics API: not served by this cluster".into()],
            ..Default::default()
        };
        assert_eq!(
            ready_steps(&k, "proxy", 4.0),
            [
                (1.0, 0.0),
                (1.0, 1.0),
                (2.0, 1.0),
                (2.0, 2.0),
                (3.0, 2.0),
                (3.0, 1.0),
                (4.0, 1.0)
            ]
        );
        assert!(ready_steps(&k, "backend", 4.0).is_empty());
        assert_eq!(ready_range(&k, "proxy"), Some((1, 2)));
        let r = CaseResult {
            cluster: Some(k.clone()),
            ..Default::default()
        };
        assert_eq!(
            cluster_finding(&r).unwrap(),
            "On Kubernetes (namespace ns): between 1 and 2 proxy pods were Ready at once; 0 \
             container restart(s); 0 Warning event(s). Absent: metrics API: not served by this \
             cluster."
        );
        // Counted as the API counts them: a restartCount seen going 0 -> 3 is 3 restarts; an
        // event seen at counts 1 to 5 is 5 Warning events.
        let mut counted = r.clone();
        if let Some(k) = &mut counted.cluster {
            k.restarts = vec![model::RestartRecord {
                t_s: 2.0,
                pod: "a".into(),
                container: "nginx".into(),
                count: 3,
                reason: "Error".into(),
                added: Some(3),
            }];
            k.warnings = (1..=5)
                .map(|n| model::ClusterEvent {
                    t_s: f64::from(n),
                    object: "Pod/a".into(),
                    reason: "Unhealthy".into(),
                    message: "probe".into(),
                    count: n,
                    added: Some(1),
                })
                .collect();
        }
        let s = cluster_finding(&counted).unwrap();
        assert!(
            s.contains("3 container restart(s); 5 Warning event(s)"),
            "{s}"
        );
        // A failed pod watch: no Ready range, no restart count.
        let mut r = r;
        if let Some(k) = &mut r.cluster {
            k.absent.push("pod watch: forbidden".into());
        }
        assert_eq!(
            cluster_finding(&r).unwrap(),
            "On Kubernetes (namespace ns): 0 Warning event(s). Absent: metrics API: not served \
             by this cluster. Absent: pod watch: forbidden."
        );
    }
}
