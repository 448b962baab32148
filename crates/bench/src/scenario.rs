//! The scenario file: backends, the proxy's config, loads, timed actions and checks, resolved into
//! one or more cases. Every problem is reported as `file:line: reason` before anything starts.
//!
//! ```toml
//! name = "default"
//! description = "Three backends behind one proxy; one is killed and the config reloaded under load"
//!
//! [[backends]]
//! name = "cafe"
//! count = 3
//! profile = "latency=fixed(1ms)"
//!
//! [proxy]                      # proxy::config::ProxyConfig
//! [[proxy.listeners]]
//! name = "http"
//! server_names = ["cafe.example.com"]
//! [[proxy.upstreams]]
//! name = "cafe"
//! backends = "cafe"
//! [[proxy.routes]]
//! path = "/"
//! upstream = "cafe"
//!
//! [[loads]]
//! name = "coffee"
//! url = "http://cafe.example.com/coffee"   # the port comes from the listener (`via`)
//! connections = 10
//! duration = "30s"
//!
//! [[actions]]
//! at = "10s"
//! kill_backend = "cafe-2"
//!
//! checks = ["coffee.failure_rate <= 1%"]    # (top-level key, before any table)
//! ```
//!
//! `[quick]` is merged over the document under `--quick`; each `[[cases]]` entry (with its own
//! `name` and `description`, and optionally its own `quick`) is merged over the base to make one
//! case; `[configs.NAME]` tables are merged over `[proxy]` to make configs that `swap_config`
//! actions switch to. Merging is deep, and arrays of named tables merge by `name`.

use crate::checks::Check;
use crate::layers::{self, ScenarioError, Source, Table};
use backend::Profile;
use proxy::config::ProxyConfig;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;
use toml::Spanned;
use units::{Dur, Rate};

/// A scenario resolved into runnable cases.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The file it was read from, as errors name it.
    pub file: String,
    /// Scenario name (results go under `results/<name>/`).
    pub name: String,
    /// One-line description.
    pub description: String,
    /// The built-in analysis that turns measurements into theory checks (catalogue scenarios),
    /// by name: one of [`ParseOptions::analyses`], checked when the file was parsed.
    pub analysis: Option<String>,
    /// The cases, in the order they run.
    pub cases: Vec<Case>,
    /// Whether the quick layers were applied.
    pub quick: bool,
    /// The file's text as parsed: the run writes it to scenario.toml, so `proxybench analyse`
    /// parses exactly what ran.
    pub source: String,
    /// Where the cases run (`[platform]`): processes on this machine unless it says otherwise.
    pub platform: PlatformSpec,
}

/// Which platform runs a scenario's backends and proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PlatformKind {
    /// Processes on this machine.
    #[default]
    Local,
    /// A Kubernetes cluster, through its API.
    Kubernetes,
}

impl PlatformKind {
    /// The name as written in scenario files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            PlatformKind::Local => "local",
            PlatformKind::Kubernetes => "kubernetes",
        }
    }

    /// Parses a name as written in scenario files and on the command line.
    pub fn parse(s: &str) -> Option<PlatformKind> {
        match s {
            "local" => Some(PlatformKind::Local),
            "kubernetes" | "k8s" => Some(PlatformKind::Kubernetes),
            _ => None,
        }
    }
}

/// A scenario's `[platform]` table, with the command line's overrides applied.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlatformSpec {
    /// Where the cases run.
    pub kind: PlatformKind,
    /// Kubeconfig file (default: `KUBECONFIG`, then `~/.kube/config`).
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context (default: its current context).
    pub context: Option<String>,
    /// Namespace to run in (default: a new `proxybench-<stamp>` per run, deleted at the end).
    pub namespace: Option<String>,
    /// Keep the namespace and its objects after the run.
    pub keep: bool,
    /// The proxybench image the backend pods run.
    pub image: Option<String>,
    /// The proxy image the proxy pods run.
    pub proxy_image: Option<String>,
    /// Namespaces whose pods and events the collectors watch besides the run's own (the user's
    /// gateway).
    pub watch_namespaces: Vec<String>,
    /// Label selectors of the user's pods to watch (`app=gateway`); their logs are read too.
    pub watch_selectors: Vec<String>,
    /// How the watched pods write their access lines (`combined`, `nginx-json`...): their logs
    /// are then counted as a proxy's are; without it they are kept, not counted.
    pub watch_log_format: Option<proxy::logs::LogFormat>,
    /// The optional Prometheus scrape of a pod port.
    pub prometheus: Option<ScrapeSpec>,
    /// The proxy pods' termination grace period: how long a graceful stop may take before the
    /// kubelet kills the pod (Kubernetes' default, 30 s, when absent).
    pub proxy_grace: Option<Duration>,
    /// How long a proxy pod's preStop hook sleeps before its stop signal, so that it leaves the
    /// endpoints before it stops accepting (1 s when absent).
    pub proxy_pre_stop: Option<Duration>,
    /// The `[platform]` table's line, for errors (0 when it came from the command line).
    pub line: usize,
}

/// A Prometheus text endpoint scraped on the watched or proxy pods.
#[derive(Debug, Clone, PartialEq)]
pub struct ScrapeSpec {
    /// Label selector of the pods to scrape.
    pub selector: String,
    /// Pod port.
    pub port: u16,
    /// Path (`/metrics`).
    pub path: String,
    /// Metric names kept (every metric when empty).
    pub metrics: Vec<String>,
    /// Time between scrapes.
    pub every: Duration,
}

/// The command line's overrides of a scenario's `[platform]` (`--platform`, `--context`...),
/// also read back from a run's record so `proxybench analyse` parses the scenario as it ran.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlatformOverride {
    /// `--platform`.
    pub kind: Option<PlatformKind>,
    /// `--kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// `--context`.
    pub context: Option<String>,
    /// `--namespace`.
    pub namespace: Option<String>,
    /// `--keep`.
    pub keep: bool,
    /// `--image`.
    pub image: Option<String>,
    /// `--proxy-image`.
    pub proxy_image: Option<String>,
}

impl PlatformOverride {
    /// True when no flag was given.
    pub fn is_empty(&self) -> bool {
        *self == PlatformOverride::default()
    }

    /// Checks each flag's value on its own: one line naming the flag, for exit 2.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(c) = &self.context {
            if c.trim().is_empty() {
                return Err("--context: the context name is empty".into());
            }
        }
        if let Some(n) = &self.namespace {
            dns_label(n).map_err(|e| format!("--namespace {n}: {e}"))?;
        }
        for (flag, v) in [
            ("--image", &self.image),
            ("--proxy-image", &self.proxy_image),
        ] {
            if let Some(i) = v {
                image_ref(i).map_err(|e| format!("{flag} {i}: {e}"))?;
            }
        }
        if let Some(k) = &self.kubeconfig {
            if k.as_os_str().is_empty() {
                return Err("--kubeconfig: the path is empty".into());
            }
        }
        if self.kind == Some(PlatformKind::Local) {
            if let Some(flag) = self.cluster_flag() {
                return Err(format!("{flag} needs --platform kubernetes, not local"));
            }
        }
        Ok(())
    }

    /// The first flag given that only means something on Kubernetes.
    pub fn cluster_flag(&self) -> Option<&'static str> {
        [
            ("--kubeconfig", self.kubeconfig.is_some()),
            ("--context", self.context.is_some()),
            ("--namespace", self.namespace.is_some()),
            ("--keep", self.keep),
            ("--image", self.image.is_some()),
            ("--proxy-image", self.proxy_image.is_some()),
        ]
        .into_iter()
        .find(|(_, given)| *given)
        .map(|(f, _)| f)
    }

    /// `spec` with these flags applied; `--platform local` drops the file's cluster settings.
    pub fn apply(&self, spec: &mut PlatformSpec) {
        if let Some(kind) = self.kind {
            if kind == PlatformKind::Local && spec.kind != PlatformKind::Local {
                *spec = PlatformSpec {
                    line: spec.line,
                    ..PlatformSpec::default()
                };
            }
            spec.kind = kind;
        }
        let set = |slot: &mut Option<String>, v: &Option<String>| {
            if v.is_some() {
                slot.clone_from(v);
            }
        };
        if self.kubeconfig.is_some() {
            spec.kubeconfig.clone_from(&self.kubeconfig);
        }
        set(&mut spec.context, &self.context);
        set(&mut spec.namespace, &self.namespace);
        set(&mut spec.image, &self.image);
        set(&mut spec.proxy_image, &self.proxy_image);
        spec.keep |= self.keep;
    }
}

/// How a scenario is parsed beyond its text.
#[derive(Debug, Clone, Default)]
pub struct ParseOptions {
    /// The command line's (or the record's) overrides of `[platform]`.
    pub platform: PlatformOverride,
    /// Don't require the manifests that `apply` and `delete` name to exist: a recorded run is
    /// analysed where its manifests may no longer be.
    pub skip_file_checks: bool,
    /// The analyses a scenario may name with `analysis = "NAME"` (the analysis registry's
    /// names); any other name is an error at its line. Empty: a scenario may name none.
    pub analyses: Vec<&'static str>,
}

/// `[platform]` as written, with the spans of its values for errors.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlatformDoc {
    #[serde(default)]
    kind: Option<Spanned<String>>,
    #[serde(default)]
    kubeconfig: Option<Spanned<String>>,
    #[serde(default)]
    context: Option<Spanned<String>>,
    #[serde(default)]
    namespace: Option<Spanned<String>>,
    #[serde(default)]
    keep: Option<Spanned<bool>>,
    #[serde(default)]
    image: Option<Spanned<String>>,
    #[serde(default)]
    proxy_image: Option<Spanned<String>>,
    #[serde(default)]
    watch: Option<Spanned<WatchDoc>>,
    #[serde(default)]
    prometheus: Option<Spanned<PrometheusDoc>>,
    #[serde(default)]
    proxy_grace: Option<Spanned<Dur>>,
    #[serde(default)]
    proxy_pre_stop: Option<Spanned<Dur>>,
}

/// `watch = { namespaces = [...], selectors = [...] }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WatchDoc {
    #[serde(default)]
    namespaces: Vec<Spanned<String>>,
    #[serde(default)]
    selectors: Vec<Spanned<String>>,
    #[serde(default)]
    log_format: Option<proxy::logs::LogFormat>,
}

/// `prometheus = { selector, port, path = "/metrics", metrics = [...], every = "1s" }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PrometheusDoc {
    selector: String,
    port: u16,
    #[serde(default = "metrics_path")]
    path: String,
    #[serde(default)]
    metrics: Vec<String>,
    #[serde(default = "one_second")]
    every: Dur,
}

fn metrics_path() -> String {
    "/metrics".into()
}
fn one_second() -> Dur {
    Dur(Duration::from_secs(1))
}

/// Reads `[platform]` (already removed from the document) into a spec, applies the overrides,
/// and checks the result: bad values and cluster settings on the local platform are refused at
/// their line.
fn parse_platform(
    src: &Source,
    table: Option<Spanned<Table<'_>>>,
    over: &PlatformOverride,
) -> Result<PlatformSpec, ScenarioError> {
    let mut spec = PlatformSpec::default();
    // Where each cluster-only setting was written, to refuse it on the local platform.
    let mut cluster_keys: Vec<(&str, std::ops::Range<usize>)> = Vec::new();
    if let Some(t) = table {
        let span = t.span();
        spec.line = layers::line_of(&src.text, span.start);
        let mut root = Table::new();
        root.insert(
            Spanned::new(span.clone(), "platform".into()),
            Spanned::new(span.clone(), toml::de::DeValue::Table(t.into_inner())),
        );
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Only {
            platform: PlatformDoc,
        }
        let doc = src.deserialize::<Only>(root)?.platform;
        let at = |s: std::ops::Range<usize>, m: String| src.error(Some(s), m);
        if let Some(k) = &doc.kind {
            spec.kind = PlatformKind::parse(k.get_ref()).ok_or_else(|| {
                at(
                    k.span(),
                    format!(
                        "platform kind '{}' is not one of local, kubernetes",
                        k.get_ref()
                    ),
                )
            })?;
        }
        if let Some(k) = &doc.kubeconfig {
            if k.get_ref().is_empty() {
                return Err(at(k.span(), "platform.kubeconfig is empty".into()));
            }
            spec.kubeconfig = Some(relative_to_file(src, k.get_ref()));
            cluster_keys.push(("kubeconfig", k.span()));
        }
        if let Some(c) = &doc.context {
            if c.get_ref().trim().is_empty() {
                return Err(at(c.span(), "platform.context is empty".into()));
            }
            spec.context = Some(c.get_ref().clone());
            cluster_keys.push(("context", c.span()));
        }
        if let Some(n) = &doc.namespace {
            dns_label(n.get_ref()).map_err(|e| {
                at(
                    n.span(),
                    format!("platform.namespace '{}': {e}", n.get_ref()),
                )
            })?;
            spec.namespace = Some(n.get_ref().clone());
            cluster_keys.push(("namespace", n.span()));
        }
        if let Some(k) = &doc.keep {
            spec.keep = *k.get_ref();
            cluster_keys.push(("keep", k.span()));
        }
        for (key, v, slot) in [
            ("image", &doc.image, &mut spec.image),
            ("proxy_image", &doc.proxy_image, &mut spec.proxy_image),
        ] {
            if let Some(i) = v {
                image_ref(i.get_ref())
                    .map_err(|e| at(i.span(), format!("platform.{key} '{}': {e}", i.get_ref())))?;
                *slot = Some(i.get_ref().clone());
                cluster_keys.push((key, i.span()));
            }
        }
        if let Some(w) = &doc.watch {
            for n in &w.get_ref().namespaces {
                dns_label(n.get_ref()).map_err(|e| {
                    at(
                        n.span(),
                        format!("platform.watch.namespaces: '{}': {e}", n.get_ref()),
                    )
                })?;
                spec.watch_namespaces.push(n.get_ref().clone());
            }
            for s in &w.get_ref().selectors {
                label_selector(s.get_ref()).map_err(|e| {
                    at(
                        s.span(),
                        format!("platform.watch.selectors: '{}': {e}", s.get_ref()),
                    )
                })?;
                spec.watch_selectors.push(s.get_ref().clone());
            }
            spec.watch_log_format = w.get_ref().log_format;
            cluster_keys.push(("watch", w.span()));
        }
        if let Some(p) = &doc.prometheus {
            let d = p.get_ref();
            let bad = |m: String| at(p.span(), format!("platform.prometheus: {m}"));
            label_selector(&d.selector)
                .map_err(|e| bad(format!("selector '{}': {e}", d.selector)))?;
            if d.port == 0 {
                return Err(bad("port must be 1-65535".into()));
            }
            if !d.path.starts_with('/') {
                return Err(bad(format!("path '{}' must start with '/'", d.path)));
            }
            if d.every.0.is_zero() {
                return Err(bad("`every` must be more than 0".into()));
            }
            if let Some(m) = d.metrics.iter().find(|m| !prometheus_name(m)) {
                return Err(bad(format!("'{m}' is not a Prometheus metric name")));
            }
            spec.prometheus = Some(ScrapeSpec {
                selector: d.selector.clone(),
                port: d.port,
                path: d.path.clone(),
                metrics: d.metrics.clone(),
                every: d.every.0,
            });
            cluster_keys.push(("prometheus", p.span()));
        }
        for (key, v, slot) in [
            ("proxy_grace", &doc.proxy_grace, &mut spec.proxy_grace),
            (
                "proxy_pre_stop",
                &doc.proxy_pre_stop,
                &mut spec.proxy_pre_stop,
            ),
        ] {
            if let Some(d) = v {
                if d.get_ref().0.subsec_nanos() != 0 {
                    return Err(at(
                        d.span(),
                        format!(
                            "platform.{key} '{}': Kubernetes counts it in whole seconds",
                            d.get_ref()
                        ),
                    ));
                }
                *slot = Some(d.get_ref().0);
                cluster_keys.push((key, d.span()));
            }
        }
        if let (Some(g), Some(p)) = (&doc.proxy_grace, &doc.proxy_pre_stop) {
            if p.get_ref().0 >= g.get_ref().0 {
                return Err(at(
                    p.span(),
                    format!(
                        "platform.proxy_pre_stop ({}) must be shorter than proxy_grace ({}): \
                         the grace period includes the preStop sleep",
                        p.get_ref(),
                        g.get_ref()
                    ),
                ));
            }
        }
    }
    let file_kind = spec.kind;
    over.apply(&mut spec);
    if spec.kind == PlatformKind::Local && file_kind == PlatformKind::Local {
        if let Some((key, span)) = cluster_keys.first() {
            return Err(src.error(
                Some(span.clone()),
                format!("platform.{key} needs [platform] kind = \"kubernetes\""),
            ));
        }
    }
    Ok(spec)
}

/// `path` as written in the scenario, relative to the scenario file's directory (a built-in
/// scenario's to the working directory).
fn relative_to_file(src: &Source, path: &str) -> PathBuf {
    let p = PathBuf::from(path);
    if p.is_absolute() || src.file.starts_with("<builtin>") {
        return p;
    }
    match std::path::Path::new(&src.file).parent() {
        Some(dir) => dir.join(p),
        None => p,
    }
}

/// Checks a Kubernetes object name of the DNS-1123 label form (namespaces, most names).
pub fn dns_label(s: &str) -> Result<(), String> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err("must be 1-63 lowercase letters, digits or '-', starting and ending with a letter or digit".into())
    }
}

/// Checks a DNS-1123 subdomain (Deployment names and the like).
fn dns_subdomain(s: &str) -> Result<(), String> {
    if s.is_empty() || s.len() > 253 {
        return Err("must be 1-253 characters".into());
    }
    s.split('.')
        .try_for_each(dns_label)
        .map_err(|_| "must be lowercase letters, digits, '-' and '.'".to_string())
}

/// Checks an image reference: no spaces, not empty.
fn image_ref(s: &str) -> Result<(), String> {
    if s.is_empty() || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Err("an image reference has no spaces and is not empty".into())
    } else {
        Ok(())
    }
}

/// Checks a label selector in the API's string form: comma-separated `key=value`, `key==value`,
/// `key!=value`, `key`, `!key`, `key in (a,b)`, `key notin (a,b)`.
pub fn label_selector(s: &str) -> Result<(), String> {
    if s.trim().is_empty() {
        return Err("the selector is empty".into());
    }
    // Split on commas outside parentheses.
    let mut terms = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                terms.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if depth < 0 {
            return Err("unbalanced ')'".into());
        }
    }
    if depth != 0 {
        return Err("unbalanced '('".into());
    }
    terms.push(&s[start..]);
    for t in terms {
        let t = t.trim();
        let bad = || format!("'{t}' is not key=value, key!=value, key, !key or key in (...)");
        let (key, value) = if let Some((k, v)) = t.split_once("!=") {
            (k, Some(v))
        } else if let Some((k, v)) = t.split_once("==") {
            (k, Some(v))
        } else if let Some((k, v)) = t.split_once('=') {
            (k, Some(v))
        } else if let Some((k, rest)) = t.split_once(" in ").or_else(|| t.split_once(" notin ")) {
            let rest = rest.trim();
            let inner = rest
                .strip_prefix('(')
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(bad)?;
            for v in inner.split(',') {
                label_value(v.trim()).map_err(|_| bad())?;
            }
            (k, None)
        } else {
            (t.strip_prefix('!').unwrap_or(t), None)
        };
        label_key(key.trim()).map_err(|_| bad())?;
        if let Some(v) = value {
            label_value(v.trim()).map_err(|_| bad())?;
        }
    }
    Ok(())
}

fn label_key(k: &str) -> Result<(), ()> {
    let name = match k.rsplit_once('/') {
        Some((prefix, name)) => {
            dns_subdomain(prefix).map_err(|_| ())?;
            name
        }
        None => k,
    };
    if name.is_empty() || name.len() > 63 {
        return Err(());
    }
    label_value(name)
}

fn label_value(v: &str) -> Result<(), ()> {
    let ok = v.len() <= 63
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && v.bytes().next().is_none_or(|b| b.is_ascii_alphanumeric())
        && v.bytes().last().is_none_or(|b| b.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(())
    }
}

fn prometheus_name(m: &str) -> bool {
    let mut b = m.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_' || c == b':')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b':')
}

/// Workload kinds a `rollout_restart` or `scale` may name.
const WORKLOAD_KINDS: [&str; 3] = ["deployment", "statefulset", "daemonset"];

/// Checks `KIND/NAME` of a workload; `scalable` refuses daemonsets.
fn workload(action: &str, s: &str, scalable: bool) -> Result<(), String> {
    let (kind, name) = s
        .split_once('/')
        .ok_or_else(|| format!("{action}: '{s}' is not KIND/NAME (deployment/NAME)"))?;
    let kinds: &[&str] = if scalable {
        &WORKLOAD_KINDS[..2]
    } else {
        &WORKLOAD_KINDS
    };
    if !kinds.contains(&kind) {
        return Err(format!(
            "{action}: kind '{kind}' is not one of {}",
            kinds.join(", ")
        ));
    }
    dns_subdomain(name).map_err(|e| format!("{action}: name '{name}' {e}"))
}

/// One case: a complete stack and what happens to it.
#[derive(Debug, Clone)]
pub struct Case {
    /// Case name (`main` when the scenario has no `[[cases]]`).
    pub name: String,
    /// One-line description of the case.
    pub description: String,
    /// Backend groups.
    pub backends: Vec<BackendGroup>,
    /// The proxy under test; `None` sends loads straight to the backends.
    pub proxy: Option<ProxyConfig>,
    /// Alternative proxy configs for `swap_config`.
    pub configs: BTreeMap<String, ProxyConfig>,
    /// Where the proxy config's items were written, for errors the proxy finds later.
    pub proxy_lines: ItemLines,
    /// Where each alternative config's items were written.
    pub config_lines: BTreeMap<String, ItemLines>,
    /// Loads, which run concurrently (each from its own `start`).
    pub loads: Vec<LoadSpec>,
    /// The scenario line of each load, by name, for errors found before the run starts.
    pub load_lines: BTreeMap<String, usize>,
    /// Actions, expanded into single steps and sorted by time.
    pub steps: Vec<Step>,
    /// Checks evaluated after the case.
    pub checks: Vec<Check>,
    /// Backend event-loop threads.
    pub backend_threads: usize,
    /// Pause after the loads end before the stack is torn down (lets logs settle).
    pub settle: Duration,
}

/// The scenario lines of a proxy config's items (`listener.NAME`, `route.N`, `upstream.NAME`,
/// `rate_limit.NAME`, `raw.http`...), so that a config the proxy refuses is reported at the
/// line that wrote the offending item.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ItemLines {
    /// The line of the config's own table (`[proxy]` or `[configs.NAME]`).
    pub table: usize,
    /// The line of each item, by key.
    pub items: BTreeMap<String, usize>,
}

impl ItemLines {
    /// The line of item `key`, or of the config's table when the item is unknown.
    pub fn line_of(&self, key: Option<&str>) -> usize {
        key.and_then(|k| self.items.get(k))
            .copied()
            .unwrap_or(self.table)
    }

    /// Reads the item lines of a proxy table as written (before deserialization).
    fn of(src: &Source, proxy: &Spanned<toml::de::DeValue<'_>>) -> ItemLines {
        use toml::de::DeValue;
        let line = |span: std::ops::Range<usize>| layers::line_of(&src.text, span.start);
        let mut out = ItemLines {
            table: line(proxy.span()),
            items: BTreeMap::new(),
        };
        let DeValue::Table(t) = proxy.get_ref() else {
            return out;
        };
        for (key, prefix) in [
            ("listeners", "listener"),
            ("upstreams", "upstream"),
            ("rate_limits", "rate_limit"),
            ("routes", "route"),
        ] {
            let Some(DeValue::Array(items)) = t.get(key).map(|v| v.get_ref()) else {
                continue;
            };
            for (i, item) in items.iter().enumerate() {
                let name = match item.get_ref() {
                    DeValue::Table(it) if prefix != "route" => it
                        .get("name")
                        .and_then(|n| n.get_ref().as_str())
                        .map(str::to_string),
                    _ => Some(i.to_string()),
                };
                if let Some(n) = name {
                    out.items.insert(format!("{prefix}.{n}"), line(item.span()));
                }
            }
        }
        if let Some(DeValue::Table(raw)) = t.get("raw").map(|v| v.get_ref()) {
            for (k, v) in raw.iter() {
                out.items
                    .insert(format!("raw.{}", k.get_ref()), line(v.span()));
            }
        }
        out
    }
}

impl Case {
    /// When the last load is planned to end.
    pub fn planned_length(&self) -> Duration {
        self.loads
            .iter()
            .map(|l| l.start.0 + l.duration.map(|d| d.0).unwrap_or_default())
            .max()
            .unwrap_or_default()
    }
}

/// A group of identical backends, named `<group>-0`, `<group>-1`...
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendGroup {
    /// Group name, referred to by upstreams and actions.
    pub name: String,
    /// Instances at the start.
    #[serde(default = "one")]
    pub count: u32,
    /// Behaviour profile (the backend spec syntax); empty answers 200 at once.
    #[serde(default)]
    pub profile: Profile,
    /// Fixed addresses: member i listens on this port + i (127.0.0.0/8 only), so that a proxy
    /// configured by hand (an external target) can point at them; unset: ports the OS picks.
    #[serde(default)]
    pub listen: Option<std::net::SocketAddr>,
}

/// Arrival spacing as written in a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArrivalsSpec {
    /// Evenly spaced.
    #[default]
    Even,
    /// Poisson (exponential gaps, seeded).
    Poisson,
}

/// One load as written in a scenario.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadSpec {
    /// Name, used in reports and checks.
    pub name: String,
    /// URL as clients see it, e.g. `https://cafe.example.com/tea`; the port is the listener's.
    pub url: String,
    /// Where to aim: a listener name (default: the first listener of the URL's scheme), or
    /// `backend:GROUP` to go straight to a group's first backend.
    #[serde(default)]
    pub via: Option<Via>,
    /// Connections.
    #[serde(default = "ten")]
    pub connections: u32,
    /// Generator threads.
    #[serde(default = "one")]
    pub threads: u32,
    /// When to start, from the case's start.
    #[serde(default)]
    pub start: Dur,
    /// How long to run.
    #[serde(default)]
    pub duration: Option<Dur>,
    /// Stop after this many requests.
    #[serde(default)]
    pub requests: Option<u64>,
    /// Open loop at this rate; closed loop when absent.
    #[serde(default)]
    pub rate: Option<Rate>,
    /// Arrival spacing for open loop.
    #[serde(default)]
    pub arrivals: ArrivalsSpec,
    /// Seed of Poisson arrivals.
    #[serde(default = "one64")]
    pub seed: u64,
    /// Request timeout.
    #[serde(default = "two_seconds")]
    pub timeout: Dur,
    /// Request method.
    #[serde(default = "get")]
    pub method: String,
    /// Extra request headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Request body.
    #[serde(default)]
    pub body: Option<String>,
    /// HTTP version: `"1.1"` (the default) or `"2"` (h2 by ALPN over https, h2c with prior
    /// knowledge over http).
    #[serde(default)]
    pub http: Option<String>,
    /// HTTP/2: concurrent streams on each connection (h2load's `-m`); needs `http = "2"`.
    #[serde(default)]
    pub streams: Option<u32>,
    /// Run this load from N agents, each an exact share started at one instant, their results
    /// merged exactly: `proxybench agent` processes on this machine (local platform), the pods
    /// of an Indexed Job (Kubernetes). Absent: the load runs in proxybench itself.
    #[serde(default)]
    pub agents: Option<Spanned<u32>>,
    /// Send a request once more on a new connection when the server closed the reused
    /// keep-alive connection under it before answering (the race of a graceful stop), as Go's
    /// net/http does; counted as retried, not as an error. HTTP/1.1 GET, HEAD, OPTIONS, TRACE.
    #[serde(default)]
    pub retry_idle_closed: bool,
}

impl LoadSpec {
    /// Whether this load speaks HTTP/2 (`http = "2"`).
    pub fn http2(&self) -> bool {
        self.http.as_deref() == Some("2")
    }

    /// How many agents run this load (`agents = N`); `None` when it runs in proxybench itself.
    pub fn agent_count(&self) -> Option<u32> {
        self.agents.as_ref().map(|a| *a.get_ref())
    }
}

/// A load's `via`: `"LISTENER"` aims at a proxy listener, `"backend:GROUP"` straight at a
/// group's first backend.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "String")]
pub enum Via {
    /// A listener of the proxy, by name.
    Listener(String),
    /// A backend group, by name (its first current instance).
    Backend(String),
}

impl From<String> for Via {
    fn from(s: String) -> Via {
        match s.strip_prefix("backend:") {
            Some(group) => Via::Backend(group.to_string()),
            None => Via::Listener(s),
        }
    }
}

impl std::fmt::Display for Via {
    /// As written in the scenario file.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Via::Listener(l) => f.write_str(l),
            Via::Backend(g) => write!(f, "backend:{g}"),
        }
    }
}

/// How a removed backend leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RemoveMode {
    /// Reload the proxy without it first, then drain it (no request lost).
    #[default]
    Drain,
    /// Kill it first, then reload the proxy without it (a crash the control plane catches up on).
    Kill,
}

/// How a proxy replica is stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StopSpec {
    /// SIGQUIT: finish in-flight requests.
    #[default]
    Graceful,
    /// SIGTERM.
    Fast,
    /// SIGKILL.
    Kill,
}

/// `scale_backends = { group = "cafe", to = 5, step = "1s", remove = "drain" }`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScaleBackends {
    /// Group to scale.
    pub group: String,
    /// Target count.
    pub to: u32,
    /// Gradual: one instance per `step`; absent: all at once.
    #[serde(default)]
    pub step: Option<Dur>,
    /// How removed instances leave.
    #[serde(default)]
    pub remove: RemoveMode,
}

/// `scale_replicas = { to = 3, step = "5s", stop = "graceful" }`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScaleReplicas {
    /// Target count.
    pub to: u32,
    /// Gradual: one replica per `step`; absent: all at once.
    #[serde(default)]
    pub step: Option<Dur>,
    /// How removed replicas stop.
    #[serde(default)]
    pub stop: StopSpec,
}

/// `set_profile = { group = "cafe", profile = "latency=fixed(50ms)" }` (or `backend = "cafe-1"`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetProfile {
    /// Every instance of this group...
    #[serde(default)]
    pub group: Option<String>,
    /// ...or this one instance.
    #[serde(default)]
    pub backend: Option<String>,
    /// The new profile.
    pub profile: Profile,
}

/// `stop_replica = { replica = "nginx-1", mode = "kill" }` (replicas are named `KIND-N`;
/// default: the newest replica).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StopReplica {
    /// Replica name; the newest running one when absent.
    #[serde(default)]
    pub replica: Option<String>,
    /// How it stops.
    #[serde(default)]
    pub mode: StopSpec,
}

/// What a `grow` action adds, one step at a time, each step a new config generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrowWhat {
    /// Plain HTTP listeners (a port each), each with a `/` route to the upstream.
    Listeners,
    /// HTTPS listeners (a port each, the run's certificate), each with a `/` route.
    HttpsListeners,
    /// Exact-path routes `/route-N` on one listener.
    Routes,
    /// Routes on one path that differ by a header value (`x-match: vN`).
    Matches,
    /// Servers of an upstream: backend instances added to its group.
    UpstreamServers,
}

impl GrowWhat {
    /// The snake_case name used in files and reports.
    pub fn name(self) -> &'static str {
        match self {
            GrowWhat::Listeners => "listeners",
            GrowWhat::HttpsListeners => "https_listeners",
            GrowWhat::Routes => "routes",
            GrowWhat::Matches => "matches",
            GrowWhat::UpstreamServers => "upstream_servers",
        }
    }
}

/// `grow = { what = "routes", to = 1000, by = 1, pause = "2s" }`: grows the config step by step,
/// reloading at each step and timing how long the new item takes to answer (time to ready). The
/// whole growth is one action; later actions wait for it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrowSpec {
    /// What to add.
    pub what: GrowWhat,
    /// How many there are after the last step (counting those the config already had).
    pub to: u32,
    /// How many each step adds.
    #[serde(default = "one")]
    pub by: u32,
    /// Pause between steps (none: the next step starts as soon as the previous one is ready).
    #[serde(default)]
    pub pause: Dur,
    /// Upstream the new routes go to (default: the first upstream); for `upstream_servers`, the
    /// upstream whose backend group grows.
    #[serde(default)]
    pub upstream: Option<String>,
    /// Listener the new routes and matches live on (default: the first plain HTTP listener).
    #[serde(default)]
    pub listener: Option<String>,
    /// Path of `matches` (default `/match`).
    #[serde(default = "match_path")]
    pub path: String,
    /// Header of `matches` (default `x-match`, values `v0`, `v1`...).
    #[serde(default = "match_header")]
    pub header: String,
    /// Stop growing at the first failed reload (and report the proxy's message as the limit hit).
    #[serde(default = "yes")]
    pub stop_on_error: bool,
    /// How long to wait for a new item to answer before calling it never ready.
    #[serde(default = "ready_timeout")]
    pub ready_timeout: Dur,
}

/// `delete_pod = { selector = "app=x", count = 1, grace = "0s" }` (Kubernetes only).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeletePods {
    /// Label selector of the pods.
    pub selector: String,
    /// How many of the matching pods.
    #[serde(default = "one")]
    pub count: u32,
    /// Grace period (`0s` kills); Kubernetes' default of 30 s when absent.
    #[serde(default = "thirty_seconds")]
    pub grace: Dur,
}

/// `scale = { target = "deployment/NAME", to = N, step = "10s" }` (Kubernetes only).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScaleWorkload {
    /// The workload, `KIND/NAME`.
    pub target: String,
    /// Replicas after the action.
    pub to: u32,
    /// One replica every `step` (gradual); absent: all at once.
    #[serde(default)]
    pub step: Option<Dur>,
}

fn thirty_seconds() -> Dur {
    Dur(Duration::from_secs(30))
}

fn match_path() -> String {
    "/match".to_string()
}
fn match_header() -> String {
    "x-match".to_string()
}
fn yes() -> bool {
    true
}
fn ready_timeout() -> Dur {
    Dur(Duration::from_secs(30))
}

/// One `[[actions]]` entry: a time, an optional repeat, and exactly one action, written as a key
/// of the same table (`at = "10s"` next to `kill_backend = "cafe-2"`).
#[derive(Debug, Clone, PartialEq)]
struct ActionSpec {
    at: Dur,
    every: Option<Dur>,
    times: Option<u32>,
    action: ActionKind,
    /// `exec` only: how long the command may run.
    timeout: Option<Dur>,
    /// `exec` only: a non-zero exit or a timeout does not fail the run.
    allow_fail: Option<bool>,
}

/// The action of an `[[actions]]` entry as written: the key names it, the value is its argument.
/// Externally tagged, so each variant reads its own value with the spans (and lines) kept.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum ActionKind {
    ScaleBackends(ScaleBackends),
    ScaleReplicas(ScaleReplicas),
    Reload(bool),
    SwapConfig(String),
    SetProfile(SetProfile),
    DrainBackend(String),
    KillBackend(String),
    RestartBackend(String),
    StopReplica(StopReplica),
    Grow(GrowSpec),
    Exec(Vec<String>),
    Apply(String),
    Delete(String),
    RolloutRestart(String),
    DeletePod(DeletePods),
    Scale(ScaleWorkload),
}

/// The action keys, in the order messages list them (the variants of [`ActionKind`]).
const ACTION_KEYS: [&str; 16] = [
    "scale_backends",
    "scale_replicas",
    "reload",
    "swap_config",
    "set_profile",
    "drain_backend",
    "kill_backend",
    "restart_backend",
    "stop_replica",
    "grow",
    "exec",
    "apply",
    "delete",
    "rollout_restart",
    "delete_pod",
    "scale",
];

/// Every key an `[[actions]]` entry may hold: the timing keys, `exec`'s options, then the
/// action keys.
const ACTION_FIELDS: [&str; 21] = [
    "at",
    "every",
    "times",
    "timeout",
    "allow_fail",
    ACTION_KEYS[0],
    ACTION_KEYS[1],
    ACTION_KEYS[2],
    ACTION_KEYS[3],
    ACTION_KEYS[4],
    ACTION_KEYS[5],
    ACTION_KEYS[6],
    ACTION_KEYS[7],
    ACTION_KEYS[8],
    ACTION_KEYS[9],
    ACTION_KEYS[10],
    ACTION_KEYS[11],
    ACTION_KEYS[12],
    ACTION_KEYS[13],
    ACTION_KEYS[14],
    ACTION_KEYS[15],
];

impl<'de> Deserialize<'de> for ActionSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ActionSpec, D::Error> {
        d.deserialize_struct("ActionSpec", &ACTION_FIELDS, action_de::EntryVisitor)
    }
}

/// The serde plumbing of [`ActionSpec`]: the entry's keys are read one by one, and an action key
/// and its value are handed to [`ActionKind`]'s derived (externally tagged) deserializer as if
/// they were a one-entry table of their own.
mod action_de {
    use super::{ActionKind, ActionSpec, ACTION_FIELDS, ACTION_KEYS};
    use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, VariantAccess};
    use serde::Deserialize;
    use std::fmt;

    /// Reads an `[[actions]]` table.
    pub(super) struct EntryVisitor;

    impl<'de> de::Visitor<'de> for EntryVisitor {
        type Value = ActionSpec;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an action table")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ActionSpec, A::Error> {
            let (mut at, mut every, mut times) = (None, None, None);
            let (mut timeout, mut allow_fail) = (None, None);
            let mut actions = Vec::new();
            while let Some(key) = map.next_key_seed(Key)? {
                match key {
                    "at" => at = Some(map.next_value()?),
                    "every" => every = Some(map.next_value()?),
                    "times" => times = Some(map.next_value()?),
                    "timeout" => timeout = Some(map.next_value()?),
                    "allow_fail" => allow_fail = Some(map.next_value()?),
                    action => actions.push(map.next_value_seed(Tagged(action))?),
                }
            }
            let at = at.ok_or_else(|| de::Error::missing_field("at"))?;
            if actions.len() != 1 {
                return Err(de::Error::custom(format!(
                    "an action needs exactly one of {} (found {})",
                    ACTION_KEYS.join(", "),
                    actions.len()
                )));
            }
            let action = actions.remove(0);
            if !matches!(action, ActionKind::Exec(_)) && (timeout.is_some() || allow_fail.is_some())
            {
                return Err(de::Error::custom(
                    "`timeout` and `allow_fail` belong to an `exec` action",
                ));
            }
            Ok(ActionSpec {
                at,
                every,
                times,
                action,
                timeout,
                allow_fail,
            })
        }
    }

    /// A key of an action table; an unknown one is refused at its own line.
    struct Key;

    impl<'de> DeserializeSeed<'de> for Key {
        type Value = &'static str;

        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<&'static str, D::Error> {
            let k = String::deserialize(d)?;
            ACTION_FIELDS
                .iter()
                .find(|f| **f == k)
                .copied()
                .ok_or_else(|| de::Error::unknown_field(&k, &ACTION_FIELDS))
        }
    }

    /// The value of action key `.0`, read as the [`ActionKind`] variant of that name.
    struct Tagged(&'static str);

    impl<'de> DeserializeSeed<'de> for Tagged {
        type Value = ActionKind;

        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<ActionKind, D::Error> {
            ActionKind::deserialize(OneEntry {
                tag: self.0,
                value: d,
            })
        }
    }

    /// A tag and the deserializer of its value, seen as an externally tagged enum.
    struct OneEntry<D> {
        tag: &'static str,
        value: D,
    }

    impl<'de, D: Deserializer<'de>> Deserializer<'de> for OneEntry<D> {
        type Error = D::Error;

        fn deserialize_any<V: de::Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
            v.visit_enum(self)
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum
            identifier ignored_any
        }
    }

    impl<'de, D: Deserializer<'de>> EnumAccess<'de> for OneEntry<D> {
        type Error = D::Error;
        type Variant = Value<D>;

        fn variant_seed<S: DeserializeSeed<'de>>(
            self,
            seed: S,
        ) -> Result<(S::Value, Value<D>), D::Error> {
            let tag = seed.deserialize(de::value::StrDeserializer::<D::Error>::new(self.tag))?;
            Ok((tag, Value(self.value)))
        }
    }

    /// The value of a variant: every [`ActionKind`] variant holds exactly one.
    struct Value<D>(D);

    impl<'de, D: Deserializer<'de>> VariantAccess<'de> for Value<D> {
        type Error = D::Error;

        fn unit_variant(self) -> Result<(), D::Error> {
            <()>::deserialize(self.0)
        }

        fn newtype_variant_seed<T: DeserializeSeed<'de>>(
            self,
            seed: T,
        ) -> Result<T::Value, D::Error> {
            seed.deserialize(self.0)
        }

        fn tuple_variant<V: de::Visitor<'de>>(
            self,
            len: usize,
            v: V,
        ) -> Result<V::Value, D::Error> {
            self.0.deserialize_tuple(len, v)
        }

        fn struct_variant<V: de::Visitor<'de>>(
            self,
            fields: &'static [&'static str],
            v: V,
        ) -> Result<V::Value, D::Error> {
            self.0.deserialize_struct("", fields, v)
        }
    }
}

/// A single step of an action, at a time from the case's start.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// When it fires.
    pub at: Duration,
    /// What it does.
    pub action: Action,
}

/// What a step does.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Set a backend group's size (one instance at a time when gradual), reloading the proxy.
    ScaleBackends {
        /// Group.
        group: String,
        /// Size after this step.
        to: u32,
        /// How removed instances leave.
        remove: RemoveMode,
    },
    /// Set the number of proxy replicas.
    ScaleReplicas {
        /// Replicas after this step.
        to: u32,
        /// How removed replicas stop.
        stop: StopSpec,
    },
    /// Reload every replica with the current config (a new generation).
    Reload,
    /// Switch every replica to a named alternative config.
    SwapConfig(String),
    /// Change backend behaviour now: a whole group (its current members, and instances added to
    /// it later) or one instance.
    SetProfile {
        /// The group, when the action names one.
        group: Option<String>,
        /// The instance, when the action names one.
        backend: Option<String>,
        /// The new profile.
        profile: Profile,
    },
    /// Drain a backend (no reload).
    DrainBackend(String),
    /// Kill a backend abruptly (no reload).
    KillBackend(String),
    /// Bring a drained or killed backend back.
    RestartBackend(String),
    /// Grow the config step by step (one action, many reloads).
    Grow(GrowSpec),
    /// Stop one proxy replica.
    StopReplica {
        /// Replica name, or the newest when `None`.
        replica: Option<String>,
        /// How.
        mode: StopSpec,
    },
    /// Run a command of the user's (no shell), bounded in time; its output is kept.
    Exec {
        /// Program and arguments.
        argv: Vec<String>,
        /// Killed past this.
        timeout: Duration,
        /// A non-zero exit or a timeout is recorded but does not fail the run.
        allow_fail: bool,
    },
    /// Kubernetes: apply a manifest file (any objects, server-side apply).
    Apply(PathBuf),
    /// Kubernetes: delete the objects a manifest file names.
    Delete(PathBuf),
    /// Kubernetes: restart a workload's pods as `kubectl rollout restart` does
    /// (`deployment/NAME`).
    RolloutRestart(String),
    /// Kubernetes: delete pods chosen by a label selector.
    DeletePod {
        /// Label selector (`app=x`).
        selector: String,
        /// How many of the matching pods (the oldest first).
        count: u32,
        /// Grace period; zero kills.
        grace: Duration,
    },
    /// Kubernetes: scale a workload (`deployment/NAME`) to `to` replicas, one replica every
    /// `step` (all at once when `step` is zero).
    Scale {
        /// The workload, `KIND/NAME`.
        target: String,
        /// Replicas after this step.
        to: u32,
        /// Time between one-replica steps; zero scales at once.
        step: Duration,
    },
}

impl Action {
    /// The action's name as written in a scenario file (and in events.csv).
    pub fn kind(&self) -> &'static str {
        match self {
            Action::ScaleBackends { .. } => "scale_backends",
            Action::ScaleReplicas { .. } => "scale_replicas",
            Action::Reload => "reload",
            Action::SwapConfig(_) => "swap_config",
            Action::SetProfile { .. } => "set_profile",
            Action::DrainBackend(_) => "drain_backend",
            Action::KillBackend(_) => "kill_backend",
            Action::RestartBackend(_) => "restart_backend",
            Action::Grow(_) => "grow",
            Action::StopReplica { .. } => "stop_replica",
            Action::Exec { .. } => "exec",
            Action::Apply(_) => "apply",
            Action::Delete(_) => "delete",
            Action::RolloutRestart(_) => "rollout_restart",
            Action::DeletePod { .. } => "delete_pod",
            Action::Scale { .. } => "scale",
        }
    }

    /// Whether the action exists only on the Kubernetes platform.
    pub fn needs_cluster(&self) -> bool {
        matches!(
            self,
            Action::Apply(_)
                | Action::Delete(_)
                | Action::RolloutRestart(_)
                | Action::DeletePod { .. }
                | Action::Scale { .. }
        )
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseDoc {
    name: Spanned<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    analysis: Option<Spanned<String>>,
    #[serde(default)]
    checks: Vec<Spanned<String>>,
    #[serde(default = "one_usize")]
    backend_threads: usize,
    #[serde(default)]
    settle: Option<Dur>,
    #[serde(default)]
    backends: Vec<Spanned<BackendGroup>>,
    #[serde(default)]
    proxy: Option<Spanned<ProxyConfig>>,
    #[serde(default)]
    loads: Vec<Spanned<LoadSpec>>,
    #[serde(default)]
    actions: Vec<Spanned<ActionSpec>>,
}

fn one() -> u32 {
    1
}
fn one64() -> u64 {
    1
}
fn one_usize() -> usize {
    1
}
fn ten() -> u32 {
    10
}
fn two_seconds() -> Dur {
    Dur(Duration::from_secs(2))
}
fn get() -> String {
    "GET".to_string()
}

impl Scenario {
    /// Parses and validates a scenario; `quick` applies the `[quick]` layers. The other form is
    /// validated too, so a mistake in `[quick]` (or in the full form) is found in every run.
    pub fn parse(src: &Source, quick: bool) -> Result<Scenario, ScenarioError> {
        Scenario::parse_with(src, quick, &ParseOptions::default())
    }

    /// [`Scenario::parse`] with the command line's platform overrides applied before the
    /// actions are checked against the platform.
    pub fn parse_with(
        src: &Source,
        quick: bool,
        opts: &ParseOptions,
    ) -> Result<Scenario, ScenarioError> {
        let scn = Scenario::parse_form(src, quick, opts)?;
        Scenario::parse_form(src, !quick, opts).map_err(|mut e| {
            let form = if quick { "full" } else { "--quick" };
            e.message = format!("in the {form} form: {}", e.message);
            e
        })?;
        // A local run still checks the file's Kubernetes layers, so a mistake there is found
        // before anyone takes the scenario to a cluster.
        if scn.platform.kind == PlatformKind::Local && has_layer(src, "kubernetes") {
            let mut on_cluster = opts.clone();
            on_cluster.platform.kind = Some(PlatformKind::Kubernetes);
            for q in [quick, !quick] {
                Scenario::parse_form(src, q, &on_cluster).map_err(|mut e| {
                    let form = if q { "--quick" } else { "full" };
                    e.message = format!("in the {form} form on kubernetes: {}", e.message);
                    e
                })?;
            }
        }
        Ok(scn)
    }

    /// Parses one form of the scenario (the full form, or the `--quick` one).
    fn parse_form(
        src: &Source,
        quick: bool,
        opts: &ParseOptions,
    ) -> Result<Scenario, ScenarioError> {
        let mut root = src.parse()?;
        let top_quick = layers::take_table(src, &mut root, "quick")?;
        if quick {
            if let Some(q) = top_quick {
                layers::merge(&mut root, q.into_inner());
            }
        }
        let platform_table = layers::take_table(src, &mut root, "platform")?;
        let platform = parse_platform(src, platform_table, &opts.platform)?;
        if let Some(l) = layers::take_platform_layer(src, &mut root, platform.kind.name(), quick)? {
            layers::merge(&mut root, l);
        }
        let on = Where {
            src,
            kind: platform.kind,
            check_files: !opts.skip_file_checks,
        };
        let case_tables = layers::take_tables(src, &mut root, "cases")?;
        let configs = layers::take_table(src, &mut root, "configs")?;
        let mut cases = Vec::new();
        let mut meta: Option<(Spanned<String>, String, Option<Spanned<String>>)> = None;
        let case_list: Vec<Option<Spanned<Table<'_>>>> = if case_tables.is_empty() {
            vec![None]
        } else {
            case_tables.into_iter().map(Some).collect()
        };
        let mut seen = BTreeSet::new();
        for case in case_list {
            let mut doc = root.clone();
            let (mut case_name, mut case_desc) = ("main".to_string(), String::new());
            let mut case_span = None;
            if let Some(c) = case {
                let span = c.span();
                let mut t = c.into_inner();
                case_name = take_str(src, &mut t, "name")?
                    .ok_or_else(|| src.error(Some(span.clone()), "a case needs a `name`"))?;
                if let Some(why) = crate::paths::plain_name_problem(&case_name) {
                    let msg = format!("case name '{}' {why}", case_name.escape_debug());
                    return Err(src.error(Some(span), msg));
                }
                case_desc = take_str(src, &mut t, "description")?.unwrap_or_default();
                let q = layers::take_table(src, &mut t, "quick")?;
                let on_platform =
                    layers::take_platform_layer(src, &mut t, platform.kind.name(), quick)?;
                layers::merge(&mut doc, t);
                if let (true, Some(q)) = (quick, q) {
                    layers::merge(&mut doc, q.into_inner());
                }
                if let Some(l) = on_platform {
                    layers::merge(&mut doc, l);
                }
                if !seen.insert(case_name.clone()) {
                    return Err(
                        src.error(Some(span), format!("case '{case_name}' is defined twice"))
                    );
                }
                case_span = Some(span);
            }
            let alt = resolve_configs(src, &doc, configs.as_ref())?;
            let proxy_lines = doc
                .get("proxy")
                .map(|p| ItemLines::of(src, p))
                .unwrap_or_default();
            let parsed: CaseDoc = src.deserialize(doc)?;
            meta.get_or_insert_with(|| {
                (
                    parsed.name.clone(),
                    parsed.description.clone(),
                    parsed.analysis.clone(),
                )
            });
            let mut case = build_case(&on, parsed, case_name, case_desc, case_span, alt)?;
            case.proxy_lines = proxy_lines;
            cases.push(case);
        }
        let (name, description, analysis) = meta.expect("at least one case is always built");
        let analysis = match analysis {
            None => None,
            Some(a) if opts.analyses.contains(&a.get_ref().as_str()) => Some(a.into_inner()),
            Some(a) => {
                let known = if opts.analyses.is_empty() {
                    "none".to_string()
                } else {
                    opts.analyses.join(", ")
                };
                return Err(src.error(
                    Some(a.span()),
                    format!("unknown analysis '{}' (known: {known})", a.get_ref()),
                ));
            }
        };
        let name_ok = !name.get_ref().is_empty()
            && !name.get_ref().chars().all(|c| c == '.')
            && name
                .get_ref()
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        if !name_ok {
            return Err(src.error(
                Some(name.span()),
                format!(
                    "scenario name '{}' must be letters, digits, '-', '_' or '.', and not only dots",
                    name.get_ref()
                ),
            ));
        }
        Ok(Scenario {
            file: src.file.clone(),
            name: name.into_inner(),
            description,
            analysis,
            cases,
            quick,
            source: src.text.clone(),
            platform,
        })
    }
}

impl Scenario {
    /// This scenario with every proxy config (each case's `[proxy]` and its `[configs.*]`
    /// alternatives) set to `kind`: what `--proxy KIND` runs, and what `analyse` re-parses a
    /// record of such a run into.
    pub fn with_proxy_kind(&self, kind: proxy::ProxyKind) -> Scenario {
        let mut out = self.clone();
        for case in &mut out.cases {
            for cfg in case.proxy.iter_mut().chain(case.configs.values_mut()) {
                cfg.kind = kind;
            }
        }
        out
    }
}

/// Whether the scenario has a `platforms.<platform>` layer, at the top or in a case.
fn has_layer(src: &Source, platform: &str) -> bool {
    let Ok(root) = src.parse() else {
        return false;
    };
    let in_table = |t: &Table<'_>| {
        t.get("platforms")
            .and_then(|p| p.get_ref().as_table())
            .is_some_and(|p| p.contains_key(platform))
    };
    let in_cases = root
        .get("cases")
        .and_then(|c| c.get_ref().as_array())
        .is_some_and(|a| {
            a.iter()
                .any(|c| c.get_ref().as_table().is_some_and(in_table))
        });
    in_table(&root) || in_cases
}

fn take_str(src: &Source, t: &mut Table<'_>, key: &str) -> Result<Option<String>, ScenarioError> {
    match layers::take(t, key) {
        None => Ok(None),
        Some(v) => {
            let span = v.span();
            v.get_ref()
                .as_str()
                .map(|s| Some(s.to_string()))
                .ok_or_else(|| src.error(Some(span), format!("`{key}` must be a string")))
        }
    }
}

fn resolve_configs(
    src: &Source,
    doc: &Table<'_>,
    configs: Option<&Spanned<Table<'_>>>,
) -> Result<BTreeMap<String, (Spanned<ProxyConfig>, ItemLines)>, ScenarioError> {
    let mut out = BTreeMap::new();
    let Some(configs) = configs else {
        return Ok(out);
    };
    let base = doc.get("proxy").ok_or_else(|| {
        src.error(
            Some(configs.span()),
            "`[configs.*]` alternatives need a `[proxy]` table to start from",
        )
    })?;
    for (name, over) in configs.get_ref().iter() {
        let mut merged = Table::new();
        merged.insert(Spanned::new(name.span(), "proxy".into()), base.clone());
        let mut over_doc = Table::new();
        over_doc.insert(Spanned::new(name.span(), "proxy".into()), over.clone());
        layers::merge(&mut merged, over_doc);
        let mut lines = merged
            .get("proxy")
            .map(|p| ItemLines::of(src, p))
            .unwrap_or_default();
        lines.table = layers::line_of(&src.text, name.span().start);
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Only {
            proxy: Spanned<ProxyConfig>,
        }
        let only: Only = src.deserialize(merged)?;
        let span = name.span();
        let cfg = only.proxy.into_inner();
        cfg.validate().map_err(|e| {
            src.error(
                Some(span.clone()),
                format!("configs.{}: {e}", name.get_ref()),
            )
        })?;
        out.insert(name.get_ref().to_string(), (Spanned::new(span, cfg), lines));
    }
    Ok(out)
}

/// What a case's actions are checked against besides the case: the file (for manifest paths)
/// and the platform.
struct Where<'a> {
    src: &'a Source,
    kind: PlatformKind,
    check_files: bool,
}

fn build_case(
    on: &Where<'_>,
    doc: CaseDoc,
    name: String,
    description: String,
    case_span: Option<std::ops::Range<usize>>,
    spanned_configs: BTreeMap<String, (Spanned<ProxyConfig>, ItemLines)>,
) -> Result<Case, ScenarioError> {
    let src = on.src;
    let err = |span: std::ops::Range<usize>, msg: String| src.error(Some(span), msg);
    let mut groups = BTreeMap::new();
    for g in &doc.backends {
        let gname = &g.get_ref().name;
        if !valid_name(gname) {
            return Err(err(
                g.span(),
                format!("backend group name '{gname}' must be letters, digits, '-' or '_'"),
            ));
        }
        if g.get_ref().count > MAX_BACKENDS {
            return Err(err(
                g.span(),
                format!(
                    "backend group '{gname}': {} instances is beyond what one machine can hold \
                     (at most {MAX_BACKENDS})",
                    g.get_ref().count
                ),
            ));
        }
        check_listen(g.get_ref(), &doc.backends).map_err(|m| err(g.span(), m))?;
        if groups.insert(gname.clone(), g.get_ref().count).is_some() {
            return Err(err(
                g.span(),
                format!("backend group '{gname}' is defined twice"),
            ));
        }
    }
    let proxy = match doc.proxy {
        Some(p) => {
            let span = p.span();
            let cfg = p.into_inner();
            cfg.validate()
                .map_err(|e| err(span.clone(), e.to_string()))?;
            if cfg.replicas > MAX_REPLICAS {
                return Err(err(
                    span.clone(),
                    format!(
                        "proxy.replicas = {} is beyond what one machine can run (at most {MAX_REPLICAS})",
                        cfg.replicas
                    ),
                ));
            }
            for u in &cfg.upstreams {
                if !groups.contains_key(&u.backends) {
                    return Err(err(
                        span.clone(),
                        format!(
                            "upstream '{}' uses backend group '{}', which is not defined",
                            u.name, u.backends
                        ),
                    ));
                }
            }
            Some(cfg)
        }
        None => None,
    };
    for (cname, (c, _)) in &spanned_configs {
        for u in &c.get_ref().upstreams {
            if !groups.contains_key(&u.backends) {
                return Err(err(
                    c.span(),
                    format!(
                        "configs.{cname}: upstream '{}' uses unknown backend group '{}'",
                        u.name, u.backends
                    ),
                ));
            }
        }
    }
    let mut configs = BTreeMap::new();
    let mut config_lines = BTreeMap::new();
    for (n, (c, lines)) in spanned_configs {
        configs.insert(n.clone(), c.into_inner());
        config_lines.insert(n, lines);
    }
    let mut loads = Vec::new();
    let mut load_lines = BTreeMap::new();
    let mut load_names = BTreeSet::new();
    for l in doc.loads {
        let span = l.span();
        let spec = l.into_inner();
        check_load(&spec, proxy.as_ref(), &groups).map_err(|m| err(span.clone(), m))?;
        if let Some(a) = &spec.agents {
            check_agents(&spec, *a.get_ref()).map_err(|m| err(a.span(), m))?;
        }
        if !load_names.insert(spec.name.clone()) {
            return Err(err(span, format!("load '{}' is defined twice", spec.name)));
        }
        load_lines.insert(spec.name.clone(), layers::line_of(&src.text, span.start));
        loads.push(spec);
    }
    if loads.is_empty() {
        // Point at the case, or at the scenario's name for a scenario without cases.
        let at = case_span.clone().unwrap_or(doc.name.span());
        return Err(err(at, format!("case '{name}' has no `[[loads]]`")));
    }
    // When every load has a duration, the last one's end is known: an action after it would
    // never fire.
    let loads_end = loads
        .iter()
        .map(|l| l.duration.map(|d| l.start.0 + d.0))
        .collect::<Option<Vec<Duration>>>()
        .and_then(|ends| ends.into_iter().max());
    let mut steps = Vec::new();
    let mut actions = doc.actions;
    actions.sort_by_key(|a| a.get_ref().at);
    let mut sizes = Sizes {
        groups: groups.clone(),
        replicas: proxy.as_ref().map_or(0, |p| p.replicas),
    };
    for a in actions {
        let span = a.span();
        let spec = a.into_inner();
        let first = steps.len();
        expand_action(on, &spec, &mut sizes, proxy.as_ref(), &configs, &mut steps)
            .map_err(|m| err(span.clone(), m))?;
        if let (Some(end), Some(late)) = (loads_end, steps[first..].iter().map(|s| s.at).max()) {
            if late >= end {
                return Err(err(
                    span,
                    format!(
                        "{} at {} fires after every load has ended ({}); move it earlier or \
                         make a load longer",
                        steps[first].action.kind(),
                        Dur(late),
                        Dur(end)
                    ),
                ));
            }
        }
    }
    steps.sort_by_key(|s| s.at);
    let mut checks = Vec::new();
    for c in doc.checks {
        let span = c.span();
        let check = Check::parse(c.get_ref()).map_err(|m| err(span.clone(), m.to_string()))?;
        for s in check.subjects() {
            if !(load_names.contains(s) || crate::checks::SUBJECTS.contains(&s)) {
                return Err(err(
                    span,
                    format!(
                        "check '{}' names '{s}', which is not a load (loads: {})",
                        c.get_ref(),
                        load_names.iter().cloned().collect::<Vec<_>>().join(", ")
                    ),
                ));
            }
        }
        checks.push(check);
    }
    Ok(Case {
        name,
        description,
        backends: doc.backends.into_iter().map(|b| b.into_inner()).collect(),
        proxy,
        configs,
        proxy_lines: ItemLines::default(),
        config_lines,
        loads,
        load_lines,
        steps,
        checks,
        backend_threads: doc.backend_threads.max(1),
        settle: doc
            .settle
            .map(|d| d.0)
            .unwrap_or(Duration::from_millis(500)),
    })
}

/// A group's fixed `listen` address: 127.0.0.0/8, a port, room for every member, and no
/// overlap with another group's ports.
fn check_listen(g: &BackendGroup, all: &[Spanned<BackendGroup>]) -> Result<(), String> {
    let Some(a) = g.listen else {
        return Ok(());
    };
    let range = |g: &BackendGroup, a: std::net::SocketAddr| {
        (
            u32::from(a.port()),
            u32::from(a.port()) + g.count.max(1) - 1,
        )
    };
    if !a.ip().is_ipv4() || !a.ip().is_loopback() {
        return Err(format!(
            "backend group '{}': listen = \"{a}\": backends listen on 127.0.0.0/8 only",
            g.name
        ));
    }
    if a.port() == 0 {
        return Err(format!(
            "backend group '{}': listen = \"{a}\" needs a port (member i listens on port + i)",
            g.name
        ));
    }
    let (lo, hi) = range(g, a);
    if hi > u32::from(u16::MAX) {
        return Err(format!(
            "backend group '{}': {} members from port {lo} go past port 65535",
            g.name, g.count
        ));
    }
    for o in all.iter().map(|o| o.get_ref()) {
        if o.name == g.name {
            continue;
        }
        if let Some(b) = o.listen {
            let (olo, ohi) = range(o, b);
            if b.ip() == a.ip() && lo <= ohi && olo <= hi {
                return Err(format!(
                    "backend group '{}': ports {lo}-{hi} overlap group '{}' ({olo}-{ohi})",
                    g.name, o.name
                ));
            }
        }
    }
    Ok(())
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Most agents one load may run on.
pub const MAX_AGENTS: u32 = 256;

/// `agents = N` on a load: at least one, at most [`MAX_AGENTS`], and enough of the load to give
/// each agent a share (connections, requests, an even schedule's arrivals).
fn check_agents(l: &LoadSpec, n: u32) -> Result<(), String> {
    let name = &l.name;
    if n == 0 {
        return Err(format!("load '{name}': agents must be at least 1"));
    }
    if n > MAX_AGENTS {
        return Err(format!(
            "load '{name}': agents = {n} is more than {MAX_AGENTS}"
        ));
    }
    if l.connections < n {
        return Err(format!(
            "load '{name}': agents = {n} needs at least {n} connections (it has {})",
            l.connections
        ));
    }
    if let Some(r) = l.requests.filter(|&r| r < u64::from(n)) {
        return Err(format!(
            "load '{name}': agents = {n} needs at least {n} requests (it has {r})"
        ));
    }
    if let (Some(rate), ArrivalsSpec::Even, Some(d)) = (l.rate, l.arrivals, l.duration) {
        let within = load::even_arrivals(rate.0, d.0.as_nanos() as u64);
        if within < u64::from(n) {
            return Err(format!(
                "load '{name}': agents = {n} would share only {within} requests (rate {}/s for {d})",
                rate.0
            ));
        }
    }
    Ok(())
}

fn check_load(
    l: &LoadSpec,
    proxy: Option<&ProxyConfig>,
    groups: &BTreeMap<String, u32>,
) -> Result<(), String> {
    let https = if let Some(rest) = l.url.strip_prefix("https://") {
        rest.len() < l.url.len()
    } else if l.url.starts_with("http://") {
        false
    } else {
        return Err(format!(
            "load '{}': url '{}' must start with http:// or https://",
            l.name, l.url
        ));
    };
    crate::reach::check_url_host(&l.url).map_err(|e| format!("load '{}': {e}", l.name))?;
    if l.duration.is_none() && l.requests.is_none() {
        return Err(format!(
            "load '{}' needs a `duration` or `requests`",
            l.name
        ));
    }
    if l.connections == 0 || l.threads == 0 {
        return Err(format!(
            "load '{}': connections and threads must be at least 1",
            l.name
        ));
    }
    match l.http.as_deref() {
        None | Some("1.1") | Some("2") => {}
        Some(v) => {
            return Err(format!(
                "load '{}': http = \"{v}\" is not a version; use \"1.1\" or \"2\"",
                l.name
            ))
        }
    }
    if l.retry_idle_closed && (l.http2() || !load::replayable(&l.method) || l.body.is_some()) {
        return Err(format!(
            "load '{}': retry_idle_closed sends a request twice, so it is for HTTP/1.1 GET, \
             HEAD, OPTIONS or TRACE without a body",
            l.name
        ));
    }
    if let Some(m) = l.streams {
        if !l.http2() {
            return Err(format!(
                "load '{}': streams = {m} needs http = \"2\"",
                l.name
            ));
        }
        if m == 0 || m > 65_536 {
            return Err(format!(
                "load '{}': streams must be 1 to 65536, not {m}",
                l.name
            ));
        }
    }
    match &l.via {
        Some(Via::Backend(g)) => {
            if !groups.contains_key(g) {
                return Err(format!(
                    "load '{}' goes via backend group '{g}', which is not defined",
                    l.name
                ));
            }
            if https {
                return Err(format!(
                    "load '{}': backends speak plain HTTP, use an http:// url",
                    l.name
                ));
            }
        }
        Some(Via::Listener(v)) if proxy.is_some_and(|p| p.external.is_some()) => {
            return Err(format!(
                "load '{}' goes via listener '{v}', but an external target has no listeners: \
                 its url is used as written, port included",
                l.name
            ));
        }
        Some(Via::Listener(v)) => {
            let p = proxy.ok_or_else(|| {
                format!(
                    "load '{}' goes via listener '{v}' but there is no [proxy]",
                    l.name
                )
            })?;
            let lis = p.listener(v).ok_or_else(|| {
                format!(
                    "load '{}' goes via listener '{v}', which is not defined",
                    l.name
                )
            })?;
            if lis.tls != https {
                return Err(format!(
                    "load '{}': listener '{v}' is {} but the url is {}",
                    l.name,
                    if lis.tls { "HTTPS" } else { "HTTP" },
                    if https { "https" } else { "http" }
                ));
            }
        }
        None => match proxy {
            // An external target's loads go where their urls say (checked by the runner).
            Some(p) if p.external.is_some() => {}
            Some(p) => {
                if !p.listeners.iter().any(|x| x.tls == https) {
                    return Err(format!(
                        "load '{}': no {} listener to send it to",
                        l.name,
                        if https { "HTTPS" } else { "HTTP" }
                    ));
                }
            }
            None => {
                return Err(format!(
                    "load '{}': without a [proxy], say `via = \"backend:GROUP\"`",
                    l.name
                ));
            }
        },
    }
    Ok(())
}

/// How long an `exec` command may run when its action says no `timeout`.
const EXEC_TIMEOUT: Duration = Duration::from_secs(60);

/// Most steps the actions of one case may expand into (every repeat and every gradual step).
const MAX_STEPS: usize = 100_000;
/// Most backend instances of one group: each holds a listening socket and its connections, and
/// the open-files limit here is 20000.
const MAX_BACKENDS: u32 = 10_000;
/// Most proxy replicas: each is a process tree (a master and its workers, say) on this machine.
const MAX_REPLICAS: u32 = 64;

/// Group sizes and replica count as the plan stands after the actions expanded so far, so that a
/// later scaling action starts from where an earlier one left off.
struct Sizes {
    groups: BTreeMap<String, u32>,
    replicas: u32,
}

/// Expands one `[[actions]]` entry into its steps (every repeat, every gradual step), checking
/// it against the plan as it stands; `sizes` moves on to where the entry leaves the case.
fn expand_action(
    on: &Where<'_>,
    a: &ActionSpec,
    sizes: &mut Sizes,
    proxy: Option<&ProxyConfig>,
    configs: &BTreeMap<String, ProxyConfig>,
    out: &mut Vec<Step>,
) -> Result<(), String> {
    let times = repeats(a)?;
    check_bounds(&a.action)?;
    let every = a.every.map(|d| d.0).unwrap_or_default();
    let plan = Plan { proxy, configs, on };
    for k in 0..times {
        if out.len() > MAX_STEPS {
            return Err(format!(
                "the actions expand to more than {MAX_STEPS} steps; use fewer `times` or larger steps"
            ));
        }
        let at = every
            .checked_mul(k)
            .and_then(|d| a.at.0.checked_add(d))
            .ok_or("`at` + `every` x `times` is beyond any run's length")?;
        plan.expand_once(a, at, sizes, out)?;
    }
    Ok(())
}

/// How many times an entry fires: once, or `times` times `every` apart.
fn repeats(a: &ActionSpec) -> Result<u32, String> {
    match (a.every, a.times) {
        (None, None) => Ok(1),
        (Some(_), Some(n)) if n >= 1 => Ok(n),
        (Some(_), None) => Err("`every` needs `times`".into()),
        (None, Some(_)) => Err("`times` needs `every`".into()),
        _ => Err("`times` must be at least 1".into()),
    }
}

/// Refuses sizes beyond this machine before anything is expanded (a gradual scaling to millions
/// would otherwise expand millions of steps first).
fn check_bounds(action: &ActionKind) -> Result<(), String> {
    match action {
        ActionKind::ScaleBackends(s) if s.to > MAX_BACKENDS => Err(format!(
            "scale_backends: {} instances is beyond what one machine can hold (at most {MAX_BACKENDS})",
            s.to
        )),
        ActionKind::ScaleReplicas(s) if s.to > MAX_REPLICAS => Err(format!(
            "scale_replicas: {} replicas is beyond what one machine can run (at most {MAX_REPLICAS})",
            s.to
        )),
        _ => Ok(()),
    }
}

/// What the actions of a case are checked against: its proxy and its alternative configs.
struct Plan<'a> {
    proxy: Option<&'a ProxyConfig>,
    configs: &'a BTreeMap<String, ProxyConfig>,
    on: &'a Where<'a>,
}

impl Plan<'_> {
    /// The steps of one firing of `action` at `at`.
    fn expand_once(
        &self,
        spec: &ActionSpec,
        at: Duration,
        sizes: &mut Sizes,
        out: &mut Vec<Step>,
    ) -> Result<(), String> {
        let action = &spec.action;
        self.external_allows(spec)?;
        self.platform_allows(action)?;
        let mut push = |at: Duration, action: Action| out.push(Step { at, action });
        match action {
            ActionKind::ScaleBackends(s) => {
                let from = *sizes
                    .groups
                    .get(&s.group)
                    .ok_or_else(|| format!("scale_backends: no backend group '{}'", s.group))?;
                self.need_proxy()?;
                gradual(from, s.to, s.step.map(|d| d.0), at, |at, to| {
                    let group = s.group.clone();
                    let remove = s.remove;
                    push(at, Action::ScaleBackends { group, to, remove })
                });
                sizes.groups.insert(s.group.clone(), s.to);
            }
            ActionKind::ScaleReplicas(s) => {
                self.need_proxy()?;
                if s.to == 0 {
                    return Err("scale_replicas: `to` must be at least 1".into());
                }
                gradual(sizes.replicas, s.to, s.step.map(|d| d.0), at, |at, to| {
                    push(at, Action::ScaleReplicas { to, stop: s.stop })
                });
                sizes.replicas = s.to;
            }
            ActionKind::Reload(r) => {
                self.need_proxy()?;
                if !r {
                    return Err("`reload = false` does nothing; remove the action".into());
                }
                push(at, Action::Reload);
            }
            ActionKind::SwapConfig(c) => {
                self.need_proxy()?;
                if !self.configs.contains_key(c) {
                    return Err(format!(
                        "swap_config: no [configs.{c}] (defined: {})",
                        self.configs.keys().cloned().collect::<Vec<_>>().join(", ")
                    ));
                }
                push(at, Action::SwapConfig(c.clone()));
            }
            ActionKind::SetProfile(s) => {
                match (&s.group, &s.backend) {
                    (Some(g), None) if sizes.groups.contains_key(g) => {}
                    (Some(g), None) => return Err(format!("set_profile: no backend group '{g}'")),
                    (None, Some(b)) => backend_exists(&sizes.groups, b)?,
                    _ => return Err("set_profile needs exactly one of `group` or `backend`".into()),
                }
                push(
                    at,
                    Action::SetProfile {
                        group: s.group.clone(),
                        backend: s.backend.clone(),
                        profile: s.profile.clone(),
                    },
                );
            }
            ActionKind::DrainBackend(b) => {
                backend_exists(&sizes.groups, b)?;
                push(at, Action::DrainBackend(b.clone()));
            }
            ActionKind::KillBackend(b) => {
                backend_exists(&sizes.groups, b)?;
                push(at, Action::KillBackend(b.clone()));
            }
            ActionKind::RestartBackend(b) => {
                backend_exists(&sizes.groups, b)?;
                push(at, Action::RestartBackend(b.clone()));
            }
            ActionKind::Grow(g) => {
                let p = self.proxy.ok_or("grow needs a [proxy]")?;
                check_grow(g, p)?;
                push(at, Action::Grow(g.clone()));
            }
            ActionKind::StopReplica(s) => {
                self.need_proxy()?;
                push(
                    at,
                    Action::StopReplica {
                        replica: s.replica.clone(),
                        mode: s.mode,
                    },
                );
            }
            ActionKind::Exec(argv) => {
                if argv.first().is_none_or(|p| p.is_empty()) {
                    return Err(
                        "exec: the command is empty; write exec = [\"program\", \"arg\", ...]"
                            .into(),
                    );
                }
                let timeout = spec.timeout.map_or(EXEC_TIMEOUT, |d| d.0);
                if timeout.is_zero() {
                    return Err("exec: `timeout` must be more than 0".into());
                }
                push(
                    at,
                    Action::Exec {
                        argv: argv.clone(),
                        timeout,
                        allow_fail: spec.allow_fail.unwrap_or(false),
                    },
                );
            }
            ActionKind::Apply(f) => push(at, Action::Apply(self.manifest("apply", f)?)),
            ActionKind::Delete(f) => push(at, Action::Delete(self.manifest("delete", f)?)),
            ActionKind::RolloutRestart(w) => {
                workload("rollout_restart", w, false)?;
                push(at, Action::RolloutRestart(w.clone()));
            }
            ActionKind::DeletePod(d) => {
                label_selector(&d.selector)
                    .map_err(|e| format!("delete_pod: selector '{}': {e}", d.selector))?;
                if d.count == 0 {
                    return Err("delete_pod: `count` must be at least 1".into());
                }
                push(
                    at,
                    Action::DeletePod {
                        selector: d.selector.clone(),
                        count: d.count,
                        grace: d.grace.0,
                    },
                );
            }
            ActionKind::Scale(w) => {
                workload("scale", &w.target, true)?;
                if w.step.is_some_and(|s| s.0.is_zero()) {
                    return Err(
                        "scale: `step` must be more than 0 (leave it out to scale at once)".into(),
                    );
                }
                push(
                    at,
                    Action::Scale {
                        target: w.target.clone(),
                        to: w.to,
                        step: w.step.map(|d| d.0).unwrap_or_default(),
                    },
                );
            }
        }
        Ok(())
    }

    /// Refuses the Kubernetes-only actions on the local platform.
    fn platform_allows(&self, action: &ActionKind) -> Result<(), String> {
        let key = match action {
            ActionKind::Apply(_) => "apply",
            ActionKind::Delete(_) => "delete",
            ActionKind::RolloutRestart(_) => "rollout_restart",
            ActionKind::DeletePod(_) => "delete_pod",
            ActionKind::Scale(_) => "scale",
            _ => return Ok(()),
        };
        if self.on.kind == PlatformKind::Kubernetes {
            return Ok(());
        }
        Err(format!(
            "{key} needs [platform] kind = \"kubernetes\" (or `run --platform kubernetes`)"
        ))
    }

    /// The manifest an `apply` or `delete` names, relative to the scenario file, which must
    /// exist when the run starts.
    fn manifest(&self, action: &str, f: &str) -> Result<PathBuf, String> {
        if f.is_empty() {
            return Err(format!("{action}: the manifest path is empty"));
        }
        let path = relative_to_file(self.on.src, f);
        if self.on.check_files {
            match std::fs::metadata(&path) {
                Ok(m) if m.is_file() => {}
                Ok(_) => return Err(format!("{action}: {} is not a file", path.display())),
                Err(e) => return Err(format!("{action}: {}: {e}", path.display())),
            }
        }
        Ok(path)
    }

    /// Refuses, on an external target, the actions that would start, stop or re-render a proxy
    /// proxybench did not start, and a reload without the command that does it.
    fn external_allows(&self, spec: &ActionSpec) -> Result<(), String> {
        let Some(ext) = self.proxy.and_then(|p| p.external.as_ref()) else {
            return Ok(());
        };
        let what = match &spec.action {
            ActionKind::ScaleReplicas(_) => "scale_replicas",
            ActionKind::StopReplica(_) => "stop_replica",
            ActionKind::SwapConfig(_) => "swap_config",
            ActionKind::Grow(_) => "grow",
            ActionKind::Reload(_) if ext.reload.is_empty() => {
                return Err(
                    "reload on an external target needs the command that reloads it: \
                            proxy.external.reload = [\"program\", \"arg\", ...]"
                        .into(),
                )
            }
            _ => return Ok(()),
        };
        Err(format!(
            "{what} on an external target: proxybench does not start, stop or re-render a \
             proxy it did not start"
        ))
    }

    fn need_proxy(&self) -> Result<(), String> {
        self.proxy
            .map(|_| ())
            .ok_or_else(|| "this action needs a [proxy]".to_string())
    }
}

/// Refuses a backend name that is not `GROUP-INDEX` of a known group. Instances added by scaling
/// may not exist at the start; only the group must.
fn backend_exists(groups: &BTreeMap<String, u32>, n: &str) -> Result<(), String> {
    let (g, i) = n
        .rsplit_once('-')
        .ok_or_else(|| format!("backend '{n}' is not GROUP-INDEX"))?;
    i.parse::<u32>()
        .map_err(|_| format!("backend '{n}' is not GROUP-INDEX"))?;
    if groups.contains_key(g) {
        Ok(())
    } else {
        Err(format!("backend '{n}': no backend group '{g}'"))
    }
}

fn check_grow(g: &GrowSpec, p: &ProxyConfig) -> Result<(), String> {
    if g.by == 0 {
        return Err("grow: `by` must be at least 1".into());
    }
    let up = match &g.upstream {
        Some(u) => p
            .upstream(u)
            .ok_or_else(|| format!("grow: no upstream '{u}'"))?,
        None => p
            .upstreams
            .first()
            .ok_or("grow: the proxy has no upstream to send new routes to")?,
    };
    let _ = up;
    match g.what {
        GrowWhat::Routes | GrowWhat::Matches => {
            match &g.listener {
                Some(l) => {
                    let lis = p
                        .listener(l)
                        .ok_or_else(|| format!("grow: no listener '{l}'"))?;
                    if lis.tls {
                        return Err(format!("grow: listener '{l}' is HTTPS; routes and matches grow on a plain HTTP listener"));
                    }
                }
                None => {
                    if !p.listeners.iter().any(|l| !l.tls) {
                        return Err("grow: routes and matches need a plain HTTP listener".into());
                    }
                }
            }
            if g.what == GrowWhat::Matches && (!g.path.starts_with('/') || g.header.is_empty()) {
                return Err("grow: matches need a `path` starting with '/' and a `header`".into());
            }
        }
        GrowWhat::Listeners | GrowWhat::HttpsListeners | GrowWhat::UpstreamServers => {}
    }
    if g.to > 20_000 && g.what != GrowWhat::Matches {
        return Err(format!(
            "grow: {} {} is beyond what one machine can hold (open files are limited to 20000)",
            g.to,
            g.what.name()
        ));
    }
    Ok(())
}

/// Steps from `from` to `to`: one at a time every `step` when gradual, else one step at `at`.
fn gradual(
    from: u32,
    to: u32,
    step: Option<Duration>,
    at: Duration,
    mut push: impl FnMut(Duration, u32),
) {
    match step {
        Some(step) if from != to => {
            let mut n = from;
            let mut t = at;
            while n != to {
                n = if to > n { n + 1 } else { n - 1 };
                push(t, n);
                t = t.saturating_add(step);
            }
        }
        _ => push(at, to),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every action key reads into the variant of the same name, and `Action::kind` gives the
    /// key back, so files, messages and events.csv agree.
    #[test]
    fn every_action_key_names_its_variant() {
        let values = [
            "{ group = \"g\", to = 2 }",
            "{ to = 2 }",
            "true",
            "\"alt\"",
            "{ group = \"g\", profile = \"\" }",
            "\"g-0\"",
            "\"g-0\"",
            "\"g-0\"",
            "{}",
            "{ what = \"routes\", to = 2 }",
            "[\"true\"]",
            "\"m.yaml\"",
            "\"m.yaml\"",
            "\"deployment/x\"",
            "{ selector = \"app=x\" }",
            "{ target = \"deployment/x\", to = 2 }",
        ];
        for (key, value) in ACTION_KEYS.iter().zip(values) {
            let a: ActionSpec = toml::from_str(&format!("at = \"1s\"\n{key} = {value}")).unwrap();
            let camel: String = key
                .split('_')
                .map(|w| w[..1].to_uppercase() + &w[1..])
                .collect();
            assert!(format!("{:?}", a.action).starts_with(&camel), "{key}");
            assert_eq!(a.at, Dur(Duration::from_secs(1)));
        }
        let names = [
            Action::ScaleBackends {
                group: String::new(),
                to: 0,
                remove: RemoveMode::Drain,
            }
            .kind(),
            Action::ScaleReplicas {
                to: 0,
                stop: StopSpec::Graceful,
            }
            .kind(),
            Action::Reload.kind(),
            Action::SwapConfig(String::new()).kind(),
            Action::SetProfile {
                group: None,
                backend: None,
                profile: Profile::default(),
            }
            .kind(),
            Action::DrainBackend(String::new()).kind(),
            Action::KillBackend(String::new()).kind(),
            Action::RestartBackend(String::new()).kind(),
            Action::StopReplica {
                replica: None,
                mode: StopSpec::Graceful,
            }
            .kind(),
            "grow",
            Action::Exec {
                argv: Vec::new(),
                timeout: Duration::ZERO,
                allow_fail: false,
            }
            .kind(),
            Action::Apply(PathBuf::new()).kind(),
            Action::Delete(PathBuf::new()).kind(),
            Action::RolloutRestart(String::new()).kind(),
            Action::DeletePod {
                selector: String::new(),
                count: 1,
                grace: Duration::ZERO,
            }
            .kind(),
            Action::Scale {
                target: String::new(),
                to: 1,
                step: Duration::ZERO,
            }
            .kind(),
        ];
        assert_eq!(names, ACTION_KEYS);
    }

    #[test]
    fn label_selectors_in_the_api_string_form_are_accepted() {
        for ok in [
            "app=x",
            "app==x,tier!=db",
            "app.kubernetes.io/name=nginx",
            "!canary",
            "env in (a, b),app",
            "env notin (a)",
        ] {
            label_selector(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for bad in ["", "app=", "=x", "a b=c", "env in a", "app=(x", "app=x,"] {
            if bad == "app=" {
                // An empty value is allowed by the API (`app=` selects app with value "").
                label_selector(bad).unwrap();
                continue;
            }
            assert!(label_selector(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn via_reads_a_listener_or_a_backend_group() {
        assert_eq!(Via::from("http".to_string()), Via::Listener("http".into()));
        assert_eq!(
            Via::from("backend:cafe".to_string()),
            Via::Backend("cafe".into())
        );
        for text in ["http", "backend:cafe", "backend:"] {
            assert_eq!(Via::from(text.to_string()).to_string(), text);
        }
    }
}
