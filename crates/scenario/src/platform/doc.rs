//! The `[platform]` table as serde reads it, before its values are checked.

use super::*;

/// `[platform]` as written, with the spans of its values for errors.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PlatformDoc {
    #[serde(default)]
    pub(super) kind: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) kubeconfig: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) context: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) namespace: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) keep: Option<Spanned<bool>>,
    #[serde(default)]
    pub(super) image: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) proxy_image: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) watch: Option<Spanned<WatchDoc>>,
    #[serde(default)]
    pub(super) prometheus: Option<Spanned<PrometheusDoc>>,
    #[serde(default)]
    pub(super) proxy_grace: Option<Spanned<Dur>>,
    #[serde(default)]
    pub(super) proxy_pre_stop: Option<Spanned<Dur>>,
    #[serde(default)]
    pub(super) service_type: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) image_pull_secrets: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    pub(super) image_pull_policy: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) ready_timeout: Option<Spanned<Dur>>,
    #[serde(default)]
    pub(super) node_selector: Option<Spanned<BTreeMap<String, String>>>,
    #[serde(default)]
    pub(super) tolerations: Option<Spanned<Vec<TolerationDoc>>>,
    #[serde(default)]
    pub(super) requests: Option<Spanned<BTreeMap<String, RequestsDoc>>>,
}

/// One entry of `tolerations = [{ key, operator, value, effect, toleration_seconds }]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TolerationDoc {
    #[serde(default)]
    pub(super) key: Option<String>,
    #[serde(default)]
    pub(super) operator: Option<String>,
    #[serde(default)]
    pub(super) value: Option<String>,
    #[serde(default)]
    pub(super) effect: Option<String>,
    #[serde(default)]
    pub(super) toleration_seconds: Option<i64>,
}

/// `requests = { proxy = { cpu, memory }, ... }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RequestsDoc {
    #[serde(default)]
    pub(super) cpu: Option<String>,
    #[serde(default)]
    pub(super) memory: Option<String>,
}

/// `watch = { namespaces = [...], selectors = [...] }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WatchDoc {
    #[serde(default)]
    pub(super) namespaces: Vec<Spanned<String>>,
    #[serde(default)]
    pub(super) selectors: Vec<Spanned<String>>,
    #[serde(default)]
    pub(super) log_format: Option<setup::proxy::LogFormat>,
    #[serde(default)]
    pub(super) log_levels: bool,
}

/// `prometheus = { namespaces = [...], selector | selectors = [...], port, path = "/metrics",
/// metrics = [...], every = "1s" }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PrometheusDoc {
    #[serde(default)]
    pub(super) namespaces: Vec<Spanned<String>>,
    #[serde(default)]
    pub(super) selector: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) selectors: Vec<Spanned<String>>,
    pub(super) port: u16,
    #[serde(default = "metrics_path")]
    pub(super) path: String,
    #[serde(default)]
    pub(super) metrics: Vec<String>,
    #[serde(default)]
    pub(super) le: Vec<f64>,
    #[serde(default = "one_second")]
    pub(super) every: Dur,
}

pub(super) fn metrics_path() -> String {
    "/metrics".into()
}
fn one_second() -> Dur {
    Dur(Duration::from_secs(1))
}
