//! `[platform]`: where a scenario's cases run (processes on this machine, or a Kubernetes
//! cluster), the command line's overrides of it, and the validators of the Kubernetes names,
//! selectors and images a scenario writes.

mod names;

mod doc;

use crate::error::Invalid;
use crate::layers::{self, Source, Table};
use crate::ScenarioError;
use doc::{PlatformDoc, PrometheusDoc, TolerationDoc};
pub use names::PULL_POLICIES;
pub(crate) use names::{dns_label, dns_subdomain, label_selector};
use names::{image_ref, label_key, label_value, prometheus_name, pull_policy, quantity};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;
use toml::Spanned;
use units::Dur;

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

/// The type of the Service that fronts the proxy pods on Kubernetes (`service_type` in
/// `[platform]`): how users' traffic reaches a gateway, so the loads go the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ServiceKind {
    /// A virtual address inside the cluster (the default).
    #[default]
    ClusterIp,
    /// A ClusterIP plus a port on every node.
    NodePort,
    /// A NodePort plus an address from the cluster's load balancer.
    LoadBalancer,
}

impl ServiceKind {
    /// Every kind, in the order messages list them.
    pub const ALL: [ServiceKind; 3] = [
        ServiceKind::ClusterIp,
        ServiceKind::NodePort,
        ServiceKind::LoadBalancer,
    ];

    /// The API's spelling (`ClusterIP`), as scenario files write it.
    pub fn name(self) -> &'static str {
        match self {
            ServiceKind::ClusterIp => "ClusterIP",
            ServiceKind::NodePort => "NodePort",
            ServiceKind::LoadBalancer => "LoadBalancer",
        }
    }

    /// Parses the API's spelling; `None` for anything else.
    pub fn parse(s: &str) -> Option<ServiceKind> {
        ServiceKind::ALL.into_iter().find(|k| k.name() == s)
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
    pub watch_log_format: Option<setup::proxy::LogFormat>,
    /// Read the watched pods' logs and count their JSON lines by level (`{"level":"error",...}`,
    /// a control plane's), for `cluster.log_errors`.
    pub watch_log_levels: bool,
    /// The optional Prometheus scrape of a pod port.
    pub prometheus: Option<ScrapeSpec>,
    /// The proxy pods' termination grace period: how long a graceful stop may take before the
    /// kubelet kills the pod (Kubernetes' default, 30 s, when absent).
    pub proxy_grace: Option<Duration>,
    /// How long a proxy pod's preStop hook sleeps before its stop signal, so that every node's
    /// kube-proxy stops routing to it before it stops accepting (5 s when absent, at most the
    /// grace less 1 s).
    pub proxy_pre_stop: Option<Duration>,
    /// The type of the proxy pods' Service (`ClusterIP` when absent).
    pub service_type: ServiceKind,
    /// Secrets of the run's namespace that every pod pulls its image with
    /// (`imagePullSecrets`), for a private registry.
    pub image_pull_secrets: Vec<String>,
    /// Every container's `imagePullPolicy` (`Always`, `IfNotPresent` or `Never`); absent:
    /// `Never` for `localhost/` images (loaded onto the nodes), `IfNotPresent` for the rest.
    pub image_pull_policy: Option<String>,
    /// How long a case's backend pods, then its proxy pods, may take to be Ready before the
    /// case stops (3 min and 2 min when absent).
    pub ready_timeout: Option<Duration>,
    /// Node labels every pod of the run must match (`nodeSelector`): a shared cluster's nodes
    /// set aside for benchmarks.
    pub node_selector: BTreeMap<String, String>,
    /// Taints every pod of the run tolerates (the nodes set aside are often tainted).
    pub tolerations: Vec<Toleration>,
    /// Resource requests per pod role (`proxy`, `backend`, `agent`, `check`) over the
    /// platform's defaults, so that a shared cluster's scheduler counts what the run takes.
    pub requests: BTreeMap<String, Requests>,
    /// The `[platform]` table's line, for errors (0 when it came from the command line).
    pub line: usize,
}

/// One toleration of `[platform] tolerations`, in the API's terms (checked as the API would).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toleration {
    /// The taint's key; absent with `Exists` tolerates every taint.
    pub key: Option<String>,
    /// `Equal` (the default) or `Exists`.
    pub operator: String,
    /// The taint's value, with `Equal`.
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`; absent: every effect.
    pub effect: Option<String>,
    /// With `NoExecute`: how long the pod stays once the taint appears.
    pub toleration_seconds: Option<i64>,
}

/// The roles whose pods `[platform] requests` can set.
pub const POD_ROLES: [&str; 4] = ["proxy", "backend", "agent", "check"];

/// A pod role's resource requests (`cpu = "250m"`, `memory = "64Mi"`), each a Kubernetes
/// quantity; absent: the platform's default.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Requests {
    /// CPU, as a quantity (`100m`, `0.5`, `2`).
    pub cpu: Option<String>,
    /// Memory, as a quantity (`64Mi`, `1Gi`, `100M`).
    pub memory: Option<String>,
}

/// A Prometheus text endpoint scraped on the watched or proxy pods.
#[derive(Debug, Clone, PartialEq)]
pub struct ScrapeSpec {
    /// Namespaces whose pods are scraped (the run's own when empty): a gateway's data plane
    /// and control plane live in namespaces of their own.
    pub namespaces: Vec<String>,
    /// Label selectors of the pods to scrape, each looked up in each namespace (a pod that two
    /// selectors pick is scraped once).
    pub selectors: Vec<String>,
    /// Pod port.
    pub port: u16,
    /// Path (`/metrics`).
    pub path: String,
    /// Metric names kept (every metric when empty).
    pub metrics: Vec<String>,
    /// Bucket bounds (`le`, in each histogram's own unit) whose shares the report gives
    /// ("≤ 500: 98%"); every bound of the exposition when empty.
    pub le: Vec<f64>,
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
    /// `--image-pull-policy`.
    pub image_pull_policy: Option<String>,
}

impl PlatformOverride {
    /// True when no flag was given.
    pub fn is_empty(&self) -> bool {
        *self == PlatformOverride::default()
    }

    /// Checks each flag's value on its own: one line naming the flag, for exit 2.
    pub fn validate(&self) -> Result<(), crate::FlagError> {
        self.check_flags().map_err(|e| crate::FlagError(e.0))
    }

    fn check_flags(&self) -> Result<(), Invalid> {
        if let Some(c) = &self.context {
            if c.trim().is_empty() {
                return Err(Invalid::from("--context: the context name is empty"));
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
        if let Some(p) = &self.image_pull_policy {
            pull_policy(p).map_err(|e| format!("--image-pull-policy {p}: {e}"))?;
        }
        if let Some(k) = &self.kubeconfig {
            if k.as_os_str().is_empty() {
                return Err(Invalid::from("--kubeconfig: the path is empty"));
            }
        }
        if self.kind == Some(PlatformKind::Local) {
            if let Some(flag) = self.cluster_flag() {
                return Err(Invalid::from(format!(
                    "{flag} needs --platform kubernetes, not local"
                )));
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
            ("--image-pull-policy", self.image_pull_policy.is_some()),
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
        set(&mut spec.image_pull_policy, &self.image_pull_policy);
        spec.keep |= self.keep;
    }
}

/// Reads `[platform]` (already removed from the document) into a spec, applies the overrides,
/// and checks the result: bad values and cluster settings on the local platform are refused at
/// their line.
pub(crate) fn parse_platform(
    src: &Source,
    table: Option<Spanned<Table<'_>>>,
    over: &PlatformOverride,
) -> Result<PlatformSpec, ScenarioError> {
    let mut spec = PlatformSpec::default();
    let mut r = Reading {
        src,
        cluster_keys: Vec::new(),
    };
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
        r.cluster(&doc, &mut spec)?;
        r.watch(&doc, &mut spec)?;
        if let Some(p) = &doc.prometheus {
            spec.prometheus = Some(r.prometheus(p)?);
        }
        r.pods(&doc, &mut spec)?;
    }
    let file_kind = spec.kind;
    over.apply(&mut spec);
    if spec.kind == PlatformKind::Local && file_kind == PlatformKind::Local {
        if let Some((key, span)) = r.cluster_keys.first() {
            return Err(src.error(
                Some(span.clone()),
                format!("platform.{key} needs [platform] kind = \"kubernetes\""),
            ));
        }
    }
    Ok(spec)
}

/// What reading `[platform]` carries from one group of settings to the next: the file, for
/// errors at their line, and where each cluster-only setting was written, to refuse it on the
/// local platform once the command line's overrides are known.
struct Reading<'s> {
    src: &'s Source,
    cluster_keys: Vec<(&'static str, Range<usize>)>,
}

impl Reading<'_> {
    /// An error at `span`.
    fn at(&self, span: Range<usize>, m: String) -> ScenarioError {
        self.src.error(Some(span), m)
    }

    /// Notes a cluster-only setting written at `span`.
    fn wrote(&mut self, key: &'static str, span: Range<usize>) {
        self.cluster_keys.push((key, span));
    }

    /// Which platform, which cluster (kubeconfig, context), the namespace and whether it is
    /// kept, and the images.
    fn cluster(&mut self, doc: &PlatformDoc, spec: &mut PlatformSpec) -> Result<(), ScenarioError> {
        if let Some(k) = &doc.kind {
            spec.kind = PlatformKind::parse(k.get_ref()).ok_or_else(|| {
                self.at(
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
                return Err(self.at(k.span(), "platform.kubeconfig is empty".into()));
            }
            spec.kubeconfig = Some(relative_to_file(self.src, k.get_ref()));
            self.wrote("kubeconfig", k.span());
        }
        if let Some(c) = &doc.context {
            if c.get_ref().trim().is_empty() {
                return Err(self.at(c.span(), "platform.context is empty".into()));
            }
            spec.context = Some(c.get_ref().clone());
            self.wrote("context", c.span());
        }
        if let Some(n) = &doc.namespace {
            dns_label(n.get_ref()).map_err(|e| {
                self.at(
                    n.span(),
                    format!("platform.namespace '{}': {e}", n.get_ref()),
                )
            })?;
            spec.namespace = Some(n.get_ref().clone());
            self.wrote("namespace", n.span());
        }
        if let Some(k) = &doc.keep {
            spec.keep = *k.get_ref();
            self.wrote("keep", k.span());
        }
        for (key, v, slot) in [
            ("image", &doc.image, &mut spec.image),
            ("proxy_image", &doc.proxy_image, &mut spec.proxy_image),
        ] {
            if let Some(i) = v {
                image_ref(i.get_ref()).map_err(|e| {
                    self.at(i.span(), format!("platform.{key} '{}': {e}", i.get_ref()))
                })?;
                *slot = Some(i.get_ref().clone());
                self.wrote(key, i.span());
            }
        }
        Ok(())
    }

    /// `watch`: the namespaces and pods whose events and logs the run records.
    fn watch(&mut self, doc: &PlatformDoc, spec: &mut PlatformSpec) -> Result<(), ScenarioError> {
        let Some(w) = &doc.watch else {
            return Ok(());
        };
        for n in &w.get_ref().namespaces {
            dns_label(n.get_ref()).map_err(|e| {
                self.at(
                    n.span(),
                    format!("platform.watch.namespaces: '{}': {e}", n.get_ref()),
                )
            })?;
            spec.watch_namespaces.push(n.get_ref().clone());
        }
        for s in &w.get_ref().selectors {
            label_selector(s.get_ref()).map_err(|e| {
                self.at(
                    s.span(),
                    format!("platform.watch.selectors: '{}': {e}", s.get_ref()),
                )
            })?;
            spec.watch_selectors.push(s.get_ref().clone());
        }
        spec.watch_log_format = w.get_ref().log_format;
        spec.watch_log_levels = w.get_ref().log_levels;
        if spec.watch_log_levels && spec.watch_selectors.is_empty() {
            return Err(self.at(
                w.span(),
                "platform.watch.log_levels needs watch.selectors: the pods whose logs \
                 are counted"
                    .into(),
            ));
        }
        self.wrote("watch", w.span());
        Ok(())
    }

    /// `prometheus`: the pods to scrape, where, which metrics and how often.
    fn prometheus(&mut self, p: &Spanned<PrometheusDoc>) -> Result<ScrapeSpec, ScenarioError> {
        let d = p.get_ref();
        let bad = |m: String| self.at(p.span(), format!("platform.prometheus: {m}"));
        let mut namespaces = Vec::new();
        for n in &d.namespaces {
            dns_label(n.get_ref()).map_err(|e| {
                self.at(
                    n.span(),
                    format!("platform.prometheus.namespaces: '{}': {e}", n.get_ref()),
                )
            })?;
            if !namespaces.contains(n.get_ref()) {
                namespaces.push(n.get_ref().clone());
            }
        }
        if d.selector.is_some() && !d.selectors.is_empty() {
            return Err(bad(
                "`selector` or `selectors`, not both (selectors = [...] takes several)".into(),
            ));
        }
        let mut selectors = Vec::new();
        for s in d.selector.iter().chain(&d.selectors) {
            label_selector(s.get_ref()).map_err(|e| {
                self.at(
                    s.span(),
                    format!("platform.prometheus: selector '{}': {e}", s.get_ref()),
                )
            })?;
            if !selectors.contains(s.get_ref()) {
                selectors.push(s.get_ref().clone());
            }
        }
        if selectors.is_empty() {
            return Err(bad(
                "no pods to scrape: name them with `selector` (or `selectors = [...]`)".into(),
            ));
        }
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
        if let Some(b) = d.le.iter().find(|b| !b.is_finite()) {
            return Err(bad(format!(
                "le {b}: a bucket bound is a finite number (+Inf holds every observation)"
            )));
        }
        let mut le = d.le.clone();
        le.sort_by(f64::total_cmp);
        le.dedup();
        self.wrote("prometheus", p.span());
        Ok(ScrapeSpec {
            namespaces,
            selectors,
            le,
            port: d.port,
            path: d.path.clone(),
            metrics: d.metrics.clone(),
            every: d.every.0,
        })
    }

    /// How the run's pods are made: their stop, Service, image pulls, readiness wait,
    /// placement and requests.
    fn pods(&mut self, doc: &PlatformDoc, spec: &mut PlatformSpec) -> Result<(), ScenarioError> {
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
                    return Err(self.at(
                        d.span(),
                        format!(
                            "platform.{key} '{}': Kubernetes counts it in whole seconds",
                            d.get_ref()
                        ),
                    ));
                }
                *slot = Some(d.get_ref().0);
                self.wrote(key, d.span());
            }
        }
        if let (Some(g), Some(p)) = (&doc.proxy_grace, &doc.proxy_pre_stop) {
            if p.get_ref().0 >= g.get_ref().0 {
                return Err(self.at(
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
        if let Some(t) = &doc.service_type {
            spec.service_type = ServiceKind::parse(t.get_ref()).ok_or_else(|| {
                self.at(
                    t.span(),
                    format!(
                        "platform.service_type '{}' is not one of {}",
                        t.get_ref(),
                        ServiceKind::ALL.map(ServiceKind::name).join(", ")
                    ),
                )
            })?;
            self.wrote("service_type", t.span());
        }
        if let Some(v) = &doc.image_pull_secrets {
            for n in v.get_ref() {
                dns_subdomain(n).map_err(|e| {
                    self.at(
                        v.span(),
                        format!("platform.image_pull_secrets: Secret name '{n}': {e}"),
                    )
                })?;
            }
            spec.image_pull_secrets.clone_from(v.get_ref());
            self.wrote("image_pull_secrets", v.span());
        }
        if let Some(p) = &doc.image_pull_policy {
            pull_policy(p.get_ref()).map_err(|e| {
                self.at(
                    p.span(),
                    format!("platform.image_pull_policy '{}': {e}", p.get_ref()),
                )
            })?;
            spec.image_pull_policy = Some(p.get_ref().clone());
            self.wrote("image_pull_policy", p.span());
        }
        if let Some(t) = &doc.ready_timeout {
            if t.get_ref().0.is_zero() {
                return Err(self.at(
                    t.span(),
                    "platform.ready_timeout must be more than 0s".to_string(),
                ));
            }
            spec.ready_timeout = Some(t.get_ref().0);
            self.wrote("ready_timeout", t.span());
        }
        self.placement(doc, spec)
    }

    /// Where the run's pods go and what they ask for: node selector, tolerations, requests.
    fn placement(
        &mut self,
        doc: &PlatformDoc,
        spec: &mut PlatformSpec,
    ) -> Result<(), ScenarioError> {
        if let Some(n) = &doc.node_selector {
            for (k, v) in n.get_ref() {
                if label_key(k).is_err() || label_value(v).is_err() {
                    return Err(self.at(
                        n.span(),
                        format!(
                            "platform.node_selector: '{k}' = '{v}' is not a label key and value"
                        ),
                    ));
                }
            }
            spec.node_selector.clone_from(n.get_ref());
            self.wrote("node_selector", n.span());
        }
        if let Some(t) = &doc.tolerations {
            for d in t.get_ref() {
                let tol = toleration(d)
                    .map_err(|e| self.at(t.span(), format!("platform.tolerations: {e}")))?;
                spec.tolerations.push(tol);
            }
            self.wrote("tolerations", t.span());
        }
        if let Some(r) = &doc.requests {
            for (role, d) in r.get_ref() {
                let bad = |m: String| self.at(r.span(), format!("platform.requests.{role}: {m}"));
                if !POD_ROLES.contains(&role.as_str()) {
                    return Err(bad(format!(
                        "not a pod role: one of {}",
                        POD_ROLES.join(", ")
                    )));
                }
                for (what, q) in [("cpu", &d.cpu), ("memory", &d.memory)] {
                    if let Some(q) = q {
                        quantity(q).map_err(|e| bad(format!("{what} '{q}': {e}")))?;
                    }
                }
                spec.requests.insert(
                    role.clone(),
                    Requests {
                        cpu: d.cpu.clone(),
                        memory: d.memory.clone(),
                    },
                );
            }
            self.wrote("requests", r.span());
        }
        Ok(())
    }
}

/// A toleration as the API would take it: `Equal` (the default) needs a key, `Exists` takes no
/// value, a known effect, and `toleration_seconds` only with `NoExecute`.
fn toleration(d: &TolerationDoc) -> Result<Toleration, Invalid> {
    let operator = d.operator.clone().unwrap_or_else(|| "Equal".into());
    if let Some(k) = &d.key {
        label_key(k).map_err(|_| format!("key '{k}' is not a label key"))?;
    }
    if let Some(v) = &d.value {
        label_value(v).map_err(|_| format!("value '{v}' is not a label value"))?;
    }
    match operator.as_str() {
        "Equal" if d.key.is_none() => {
            return Err(Invalid::from(
                "operator Equal needs a key (Exists without a key tolerates all)",
            ))
        }
        "Equal" => {}
        "Exists" if d.value.is_some() => {
            return Err(Invalid::from("operator Exists takes no value"));
        }
        "Exists" => {}
        o => {
            return Err(Invalid::from(format!(
                "operator '{o}' is not one of Equal, Exists"
            )))
        }
    }
    if let Some(e) = &d.effect {
        if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&e.as_str()) {
            return Err(Invalid::from(format!(
                "effect '{e}' is not one of NoSchedule, PreferNoSchedule, NoExecute"
            )));
        }
    }
    if d.toleration_seconds.is_some() && d.effect.as_deref() != Some("NoExecute") {
        return Err(Invalid::from(
            "toleration_seconds goes with effect NoExecute only",
        ));
    }
    Ok(Toleration {
        key: d.key.clone(),
        operator,
        value: d.value.clone(),
        effect: d.effect.clone(),
        toleration_seconds: d.toleration_seconds,
    })
}

/// `path` as written in the scenario, relative to the scenario file's directory (a built-in
/// scenario's to the working directory).
pub(crate) fn relative_to_file(src: &Source, path: &str) -> PathBuf {
    let p = PathBuf::from(path);
    if p.is_absolute() || src.file.starts_with("<builtin>") {
        return p;
    }
    match std::path::Path::new(&src.file).parent() {
        Some(dir) => dir.join(p),
        None => p,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn quantities_in_the_api_form_are_accepted() {
        for ok in ["100m", "0.5", "2", "64Mi", "1Gi", "100M", "1e3", "1.5k"] {
            quantity(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for bad in ["", "m", "-1", "64MB", "1.2.3", "Mi", "1 Gi", "1e"] {
            assert!(quantity(bad).is_err(), "{bad}");
        }
    }
}
