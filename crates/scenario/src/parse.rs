//! Parsing: a scenario file's layers resolved ([`crate::layers::resolve`]) into cases, each case
//! built and validated (backends, proxy, loads, the action plan, checks), every problem a
//! `file:line: reason` before anything starts.

use crate::action::{expand_action, ActionSpec, Sizes, Where, MAX_BACKENDS, MAX_REPLICAS};
use crate::checks::Check;
use crate::error::Invalid;
use crate::layers::{self, Source, Table};
use crate::platform::{parse_platform, PlatformKind, PlatformOverride, ServiceKind};
use crate::spec::{ArrivalsSpec, BackendGroup, Case, ItemLines, LoadSpec, Scenario, Via};
use crate::{ScenarioError, Step};
use model::stream::{Reconnect, StreamProtocol};
use serde::Deserialize;
use setup::proxy::ProxyConfig;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::time::Duration;
use toml::Spanned;
use units::Dur;

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
    /// The engine that renders the manifest templates a scenario names, every item at parse
    /// (`proxybench-manifests`); none: templates are read as names only.
    pub templates: Option<&'static dyn crate::Templates>,
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
    /// Hosts beyond loopback that loads with `via = "url"` may connect to (names or IP
    /// addresses), each named on purpose: the reach rule's explicit part.
    #[serde(default)]
    reach: Vec<Spanned<String>>,
}

fn one_usize() -> usize {
    1
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
        if scn.platform.kind == PlatformKind::Local && layers::has_platform_layer(src, "kubernetes")
        {
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
        let (platform, mut cases_layered) = layers::resolve(src, quick, |table| {
            let spec = parse_platform(src, table, &opts.platform)?;
            let layer = spec.kind.name();
            Ok((spec, layer))
        })?;
        let on = Where {
            src,
            kind: platform.kind,
            service_type: platform.service_type,
            check_files: !opts.skip_file_checks,
            templates: opts.templates,
        };
        let configs = cases_layered.configs.take();
        let mut cases = Vec::new();
        let mut meta: Option<(Spanned<String>, String, Option<Spanned<String>>)> = None;
        for layered in cases_layered {
            let layers::CaseLayers {
                name: case_name,
                description: case_desc,
                span: case_span,
                doc,
            } = layered?;
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

impl ItemLines {
    /// Reads the item lines of a proxy table as written (before deserialization).
    pub(crate) fn of(src: &Source, proxy: &Spanned<toml::de::DeValue<'_>>) -> ItemLines {
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
        for table in ["raw", "external"] {
            if let Some(DeValue::Table(items)) = t.get(table).map(|v| v.get_ref()) {
                for (k, v) in items.iter() {
                    out.items
                        .insert(format!("{table}.{}", k.get_ref()), line(v.span()));
                }
            }
        }
        out
    }
}

/// One case from its document: backend groups, proxy, configs, loads, actions expanded into
/// steps, and checks, each refused at its line when it is wrong or refers to what is not there.
fn build_case(
    on: &Where<'_>,
    doc: CaseDoc,
    name: String,
    description: String,
    case_span: Option<Range<usize>>,
    spanned_configs: BTreeMap<String, (Spanned<ProxyConfig>, ItemLines)>,
) -> Result<Case, ScenarioError> {
    let src = on.src;
    let err = |span: Range<usize>, msg: String| src.error(Some(span), msg);
    let groups = backend_groups(src, &doc.backends)?;
    let proxy = match doc.proxy {
        Some(p) => Some(case_proxy(on, p, &groups)?),
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
    let mut reach = Vec::new();
    for h in &doc.reach {
        let host = crate::reach::reach_entry(h.get_ref()).map_err(|m| err(h.span(), m.into()))?;
        reach.push(host);
    }
    let (loads, load_lines) = case_loads(on, doc.loads, proxy.as_ref(), &groups, &reach)?;
    if loads.is_empty() {
        // Point at the case, or at the scenario's name for a scenario without cases.
        let at = case_span.clone().unwrap_or(doc.name.span());
        return Err(err(at, format!("case '{name}' has no `[[loads]]`")));
    }
    let mut sizes = Sizes {
        groups: groups.clone(),
        replicas: proxy.as_ref().map_or(0, |p| p.replicas),
    };
    let steps = case_steps(
        on,
        doc.actions,
        &loads,
        &mut sizes,
        proxy.as_ref(),
        &configs,
    )?;
    let checks = case_checks(src, doc.checks, &loads)?;
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

/// The case's backend groups and their sizes: names that are valid and not repeated, counts one
/// machine can hold, listen settings that agree.
fn backend_groups(
    src: &Source,
    backends: &[Spanned<BackendGroup>],
) -> Result<BTreeMap<String, u32>, ScenarioError> {
    let err = |span: Range<usize>, msg: String| src.error(Some(span), msg);
    let mut groups = BTreeMap::new();
    for g in backends {
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
        check_listen(g.get_ref(), backends).map_err(|m| err(g.span(), m.into()))?;
        if groups.insert(gname.clone(), g.get_ref().count).is_some() {
            return Err(err(
                g.span(),
                format!("backend group '{gname}' is defined twice"),
            ));
        }
    }
    Ok(groups)
}

/// The case's `[proxy]`: valid in itself, fit for the platform, within one machine's replicas,
/// and with every upstream's backend group defined.
fn case_proxy(
    on: &Where<'_>,
    p: Spanned<ProxyConfig>,
    groups: &BTreeMap<String, u32>,
) -> Result<ProxyConfig, ScenarioError> {
    let span = p.span();
    let err = |msg: String| on.src.error(Some(span.clone()), msg);
    let cfg = p.into_inner();
    cfg.validate().map_err(|e| err(e.to_string()))?;
    if cfg.cpus.is_some() && on.kind == PlatformKind::Kubernetes {
        return Err(err(
            "proxy.cpus pins the proxy's processes on this machine; on kubernetes the \
             pods' CPU requests and limits decide where they run"
                .into(),
        ));
    }
    if cfg.replicas > MAX_REPLICAS {
        return Err(err(format!(
            "proxy.replicas = {} is beyond what one machine can run (at most {MAX_REPLICAS})",
            cfg.replicas
        )));
    }
    for u in &cfg.upstreams {
        if !groups.contains_key(&u.backends) {
            return Err(err(format!(
                "upstream '{}' uses backend group '{}', which is not defined",
                u.name, u.backends
            )));
        }
    }
    Ok(cfg)
}

/// The case's loads, each checked against the proxy, the backend groups and the reach rule
/// (its CA file made relative to the scenario's file), with each load's line.
fn case_loads(
    on: &Where<'_>,
    docs: Vec<Spanned<LoadSpec>>,
    proxy: Option<&ProxyConfig>,
    groups: &BTreeMap<String, u32>,
    reach: &[String],
) -> Result<(Vec<LoadSpec>, BTreeMap<String, usize>), ScenarioError> {
    let src = on.src;
    let err = |span: Range<usize>, msg: String| src.error(Some(span), msg);
    let mut loads = Vec::new();
    let mut load_lines = BTreeMap::new();
    for l in docs {
        let span = l.span();
        let mut spec = l.into_inner();
        check_load(&spec, proxy, groups).map_err(|m| err(span.clone(), m.into()))?;
        if spec.via == Some(Via::Url) {
            crate::reach::check_url_reach(&spec.target_url(), spec.resolve, reach)
                .map_err(|e| err(span.clone(), format!("load '{}': {e}", spec.name)))?;
        }
        if let Some(c) = &spec.cacert {
            let path = crate::platform::relative_to_file(src, &c.to_string_lossy());
            if on.check_files && !path.is_file() {
                return Err(err(
                    span,
                    format!(
                        "load '{}': cacert {} is not a readable file",
                        spec.name,
                        path.display()
                    ),
                ));
            }
            spec.cacert = Some(path);
        }
        if let Some(v) = spec.via.as_ref().filter(|v| v.is_cluster_address()) {
            check_cluster_via(on, &spec, v, proxy).map_err(|m| err(span.clone(), m.into()))?;
        }
        if let Some(a) = &spec.agents {
            check_agents(&spec, *a.get_ref()).map_err(|m| err(a.span(), m.into()))?;
        }
        if load_lines.contains_key(&spec.name) {
            return Err(err(span, format!("load '{}' is defined twice", spec.name)));
        }
        load_lines.insert(spec.name.clone(), layers::line_of(&src.text, span.start));
        loads.push(spec);
    }
    Ok((loads, load_lines))
}

/// The case's actions in time order, each expanded into the steps it fires, none of them after
/// every load has ended.
fn case_steps(
    on: &Where<'_>,
    mut actions: Vec<Spanned<ActionSpec>>,
    loads: &[LoadSpec],
    sizes: &mut Sizes,
    proxy: Option<&ProxyConfig>,
    configs: &BTreeMap<String, ProxyConfig>,
) -> Result<Vec<Step>, ScenarioError> {
    let err = |span: Range<usize>, msg: String| on.src.error(Some(span), msg);
    // When every load has a duration, the last one's end is known: an action after it would
    // never fire.
    let loads_end = loads
        .iter()
        .map(|l| l.duration.map(|d| l.start.0 + d.0))
        .collect::<Option<Vec<Duration>>>()
        .and_then(|ends| ends.into_iter().max());
    let mut steps = Vec::new();
    actions.sort_by_key(|a| a.get_ref().at);
    for a in actions {
        let span = a.span();
        let spec = a.into_inner();
        let first = steps.len();
        expand_action(on, &spec, sizes, proxy, configs, &mut steps)
            .map_err(|m| err(span.clone(), m.into()))?;
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
    Ok(steps)
}

/// The case's checks, each naming loads the case has (or the case's own subjects) and fitting
/// the kind of those loads.
fn case_checks(
    src: &Source,
    docs: Vec<Spanned<String>>,
    loads: &[LoadSpec],
) -> Result<Vec<Check>, ScenarioError> {
    let err = |span: Range<usize>, msg: String| src.error(Some(span), msg);
    let mut checks = Vec::new();
    for c in docs {
        let span = c.span();
        let check = Check::parse(c.get_ref()).map_err(|m| err(span.clone(), m.to_string()))?;
        for s in check.subjects() {
            if !(loads.iter().any(|l| l.name == s) || crate::checks::SUBJECTS.contains(&s)) {
                let names: BTreeSet<&str> = loads.iter().map(|l| l.name.as_str()).collect();
                return Err(err(
                    span,
                    format!(
                        "check '{}' names '{s}', which is not a load (loads: {})",
                        c.get_ref(),
                        names.into_iter().collect::<Vec<_>>().join(", ")
                    ),
                ));
            }
        }
        check_fits_loads(&check, loads).map_err(|m| err(span.clone(), m.into()))?;
        checks.push(check);
    }
    Ok(checks)
}

/// A check's load metrics against what its loads are: a long-lived load's metrics
/// (`dropped`...) on long-lived loads, an HTTP load's (`p99`...) on HTTP loads, `all` over the
/// kind of load its metric belongs to, and `streams_failed` on gRPC loads.
fn check_fits_loads(check: &Check, loads: &[LoadSpec]) -> Result<(), Invalid> {
    use crate::checks::{subject_kind, SubjectKind};
    for (subject, metric) in check.operands() {
        if subject_kind(subject) != SubjectKind::Load {
            continue;
        }
        let stream_metric = model::metric::stream_metric_kind(metric).is_some();
        let http_metric = model::metric::load_metric_kind(metric, None).is_ok();
        if subject == "all" {
            let want_stream = stream_metric && !http_metric;
            if !loads
                .iter()
                .any(|l| l.stream_protocol().is_some() == want_stream)
            {
                return Err(Invalid::from(format!(
                    "check '{}': 'all.{metric}' sums the case's {} loads, and it has none",
                    check.text,
                    if want_stream { "long-lived" } else { "HTTP" }
                )));
            }
            continue;
        }
        let Some(load) = loads.iter().find(|l| l.name == subject) else {
            continue;
        };
        match load.stream_protocol() {
            Some(p) if !stream_metric => {
                return Err(Invalid::from(format!(
                    "check '{}': '{metric}' is a metric of HTTP loads; '{subject}' is a {} load \
                     (its metrics: {})",
                    check.text,
                    p.name(),
                    model::metric::STREAM
                        .iter()
                        .map(|(m, _)| *m)
                        .collect::<Vec<_>>()
                        .join(", ")
                )))
            }
            Some(p) if metric == "streams_failed" && !p.is_grpc() => {
                return Err(Invalid::from(format!(
                    "check '{}': streams_failed counts gRPC calls; '{subject}' is a {} load \
                     (use dropped)",
                    check.text,
                    p.name()
                )))
            }
            None if !http_metric => {
                return Err(Invalid::from(format!(
                    "check '{}': '{metric}' is a metric of long-lived loads; '{subject}' is an \
                     HTTP load",
                    check.text
                )))
            }
            _ => {}
        }
    }
    Ok(())
}

/// A group's fixed `listen` address: 127.0.0.0/8, a port, room for every member, and no
/// overlap with another group's ports.
fn check_listen(g: &BackendGroup, all: &[Spanned<BackendGroup>]) -> Result<(), Invalid> {
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
        return Err(Invalid::from(format!(
            "backend group '{}': listen = \"{a}\": backends listen on 127.0.0.0/8 only",
            g.name
        )));
    }
    if a.port() == 0 {
        return Err(Invalid::from(format!(
            "backend group '{}': listen = \"{a}\" needs a port (member i listens on port + i)",
            g.name
        )));
    }
    let (lo, hi) = range(g, a);
    if hi > u32::from(u16::MAX) {
        return Err(Invalid::from(format!(
            "backend group '{}': {} members from port {lo} go past port 65535",
            g.name, g.count
        )));
    }
    for o in all.iter().map(|o| o.get_ref()) {
        if o.name == g.name {
            continue;
        }
        if let Some(b) = o.listen {
            let (olo, ohi) = range(o, b);
            if b.ip() == a.ip() && lo <= ohi && olo <= hi {
                return Err(Invalid::from(format!(
                    "backend group '{}': ports {lo}-{hi} overlap group '{}' ({olo}-{ohi})",
                    g.name, o.name
                )));
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

/// The Service proxybench puts in front of the proxy pods on Kubernetes.
const PROXY_SERVICE: &str = "proxy";

/// A load's `via` that aims at an address found through the Kubernetes API: only on that
/// platform; the proxy's Service (`service:proxy`, `node-port:`, `load-balancer:`) needs a
/// proxy of the run, a port that is one of its listeners (by name or number) of the url's
/// scheme, and a `service_type` that has the address asked for. Another Service's name and
/// port can only be checked on the cluster, before the load starts.
fn check_cluster_via(
    on: &Where<'_>,
    l: &LoadSpec,
    via: &Via,
    proxy: Option<&ProxyConfig>,
) -> Result<(), Invalid> {
    let name = &l.name;
    if on.kind != PlatformKind::Kubernetes {
        return Err(Invalid::from(format!(
            "load '{name}' goes via '{via}', an address the Kubernetes API gives: run it with \
             --platform kubernetes (or [platform] kind = \"kubernetes\")"
        )));
    }
    if let Via::Gateway {
        namespace,
        name: gw,
        port,
    } = via
    {
        crate::platform::dns_subdomain(gw)
            .map_err(|e| format!("load '{name}': via '{via}': Gateway name '{gw}' {e}"))?;
        if let Some(n) = namespace {
            crate::platform::dns_label(n)
                .map_err(|e| format!("load '{name}': via '{via}': namespace '{n}' {e}"))?;
        }
        if port.as_deref() == Some("") {
            return Err(Invalid::from(format!(
                "load '{name}': via '{via}' names no port (a listener name or a port number)"
            )));
        }
        return Ok(());
    }
    let (service, port) = match via {
        Via::Service(n, p) => (n.as_str(), p.as_deref()),
        Via::NodePort(p) | Via::LoadBalancer(p) => (PROXY_SERVICE, Some(p.as_str())),
        _ => return Ok(()),
    };
    if service.is_empty() {
        return Err(Invalid::from(format!(
            "load '{name}': via '{via}' names no Service (service:NAME[:PORT])"
        )));
    }
    if port == Some("") {
        return Err(Invalid::from(format!(
            "load '{name}': via '{via}' names no port (a listener name or a port number)"
        )));
    }
    let need = match via {
        Via::NodePort(_) => Some(&[ServiceKind::NodePort, ServiceKind::LoadBalancer][..]),
        Via::LoadBalancer(_) => Some(&[ServiceKind::LoadBalancer][..]),
        _ => None,
    };
    if let Some(need) = need {
        if !need.contains(&on.service_type) {
            return Err(Invalid::from(format!(
                "load '{name}' goes via '{via}', but the proxy's Service is of type {} \
                 ([platform] service_type); it needs {}",
                on.service_type.name(),
                need.iter()
                    .map(|k| k.name())
                    .collect::<Vec<_>>()
                    .join(" or ")
            )));
        }
    }
    if service != PROXY_SERVICE {
        return Ok(());
    }
    let p = match proxy {
        Some(p) if p.external.is_none() => p,
        _ => {
            return Err(Invalid::from(format!(
                "load '{name}' goes via '{via}', the proxy's Service, but the run has no \
                 [proxy] of its own"
            )))
        }
    };
    let https = l.target_url().starts_with("https://");
    // A port number is checked against the Service on the cluster (listener ports without
    // a `port` are given there); a name must be a listener's.
    if let Some(port) = port.filter(|p| p.parse::<u16>().is_err()) {
        let Some(lis) = p.listeners.iter().find(|x| x.name == port) else {
            return Err(Invalid::from(format!(
                "load '{name}' goes via '{via}': the proxy's Service has no port '{port}' (its \
                 ports are its listeners: {})",
                p.listeners
                    .iter()
                    .map(|x| match x.port {
                        Some(n) => format!("{} ({n})", x.name),
                        None => x.name.clone(),
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        if lis.tls != https {
            return Err(Invalid::from(format!(
                "load '{name}': listener '{}' is {} but the url is {}",
                lis.name,
                if lis.tls { "HTTPS" } else { "HTTP" },
                if https { "https" } else { "http" }
            )));
        }
    }
    Ok(())
}

/// Most agents one load may run on.
pub const MAX_AGENTS: u32 = 256;

/// `agents = N` on a load: at least one, at most [`MAX_AGENTS`], and enough of the load to give
/// each agent a share (connections, requests, an even schedule's arrivals).
fn check_agents(l: &LoadSpec, n: u32) -> Result<(), Invalid> {
    let name = &l.name;
    if n == 0 {
        return Err(Invalid::from(format!(
            "load '{name}': agents must be at least 1"
        )));
    }
    if n > MAX_AGENTS {
        return Err(Invalid::from(format!(
            "load '{name}': agents = {n} is more than {MAX_AGENTS}"
        )));
    }
    if l.connections < n {
        return Err(Invalid::from(format!(
            "load '{name}': agents = {n} needs at least {n} connections (it has {})",
            l.connections
        )));
    }
    if let Some(r) = l.requests.filter(|&r| r < u64::from(n)) {
        return Err(Invalid::from(format!(
            "load '{name}': agents = {n} needs at least {n} requests (it has {r})"
        )));
    }
    if let (Some(rate), ArrivalsSpec::Even, Some(d)) = (l.rate, l.arrivals, l.duration) {
        let within = model::schedule::even_arrivals(rate.0, d.0.as_nanos() as u64);
        if within < u64::from(n) {
            return Err(Invalid::from(format!(
                "load '{name}': agents = {n} would share only {within} requests (rate {}/s for {d})",
                rate.0
            )));
        }
    }
    Ok(())
}

/// The long-lived settings a load sets, by their scenario keys.
fn stream_keys(l: &LoadSpec) -> Vec<&'static str> {
    [
        (l.protocol.is_some(), "protocol"),
        (l.message_rate.is_some(), "message_rate"),
        (l.message_size.is_some(), "message_size"),
        (l.ramp.is_some(), "ramp"),
        (l.reconnect.is_some(), "reconnect"),
        (l.backoff.is_some(), "backoff"),
        (l.backoff_max.is_some(), "backoff_max"),
        (l.idle_timeout.is_some(), "idle_timeout"),
        (l.ping.is_some(), "ping"),
        (l.grpc_deadline.is_some(), "grpc_deadline"),
        (l.grpc_path.is_some(), "grpc_path"),
    ]
    .into_iter()
    .filter(|(set, _)| *set)
    .map(|(_, k)| k)
    .collect()
}

/// The smallest WebSocket message: its sequence number and send time, which time its echo
/// (the load engine's `WS_STAMP`).
const WS_STAMP: u64 = 16;

/// A long-lived load's settings: what its protocol takes, in range; the HTTP-only keys and the
/// settings of other protocols are refused by name.
fn check_stream(l: &LoadSpec, p: StreamProtocol) -> Result<(), Invalid> {
    let name = &l.name;
    let proto = p.name();
    let http_only = [
        (
            l.requests.is_some(),
            "requests (a long-lived load runs for a `duration`)",
        ),
        (
            l.rate.is_some(),
            "rate (the message rate is `message_rate`)",
        ),
        (l.arrivals != ArrivalsSpec::Even, "arrivals"),
        (l.seed != 1, "seed"),
        (!l.method.eq_ignore_ascii_case("GET"), "method"),
        (l.body.is_some(), "body"),
        (l.http.is_some(), "http"),
        (l.streams.is_some(), "streams"),
        (l.retry_idle_closed, "retry_idle_closed"),
        (
            l.agents.is_some(),
            "agents (agents run HTTP loads; a long-lived load runs in proxybench itself)",
        ),
    ];
    if let Some((_, key)) = http_only.iter().find(|(set, _)| *set) {
        return Err(Invalid::from(format!(
            "load '{name}': {key} is for HTTP loads; a {proto} load does not take it"
        )));
    }
    if l.duration.is_none() {
        return Err(Invalid::from(format!(
            "load '{name}': a {proto} load needs a `duration` (it holds connections open)"
        )));
    }
    let grpc = p.is_grpc();
    let only = |set: bool, key: &str, who: &str| -> Result<(), Invalid> {
        if set {
            Err(Invalid::from(format!(
                "load '{name}': {key} is for {who}; a {proto} load does not take it"
            )))
        } else {
            Ok(())
        }
    };
    only(
        l.ping.is_some() && p != StreamProtocol::WebSocket,
        "ping",
        "WebSocket loads",
    )?;
    only(
        l.grpc_deadline.is_some() && !grpc,
        "grpc_deadline",
        "gRPC loads",
    )?;
    only(l.grpc_path.is_some() && !grpc, "grpc_path", "gRPC loads")?;
    only(
        l.message_size.is_some() && p == StreamProtocol::Sse,
        "message_size",
        "loads that send messages (ws, grpc-unary, grpc-stream's request)",
    )?;
    stream_numbers(l, p)
}

/// A long-lived load's numbers in range: its message rate and size, its positive waits, its
/// backoff, and its gRPC path.
fn stream_numbers(l: &LoadSpec, p: StreamProtocol) -> Result<(), Invalid> {
    let name = &l.name;
    let proto = p.name();
    if let Some(r) = l.message_rate.filter(|r| r.0 > 0.0) {
        if matches!(p, StreamProtocol::Sse | StreamProtocol::GrpcStream) {
            return Err(Invalid::from(format!(
                "load '{name}': a {proto} load only listens: the backend sets the message rate \
                 (its push= profile key); leave message_rate out"
            )));
        }
        if r.0 > 100_000.0 {
            return Err(Invalid::from(format!(
                "load '{name}': message_rate must be at most 100000 per second per connection"
            )));
        }
    }
    if let Some(sz) = l.message_size {
        if p == StreamProtocol::WebSocket && sz.0 < WS_STAMP {
            return Err(Invalid::from(format!(
                "load '{name}': a WebSocket message carries a {WS_STAMP}-byte stamp to time its \
                 echo: message_size must be at least {WS_STAMP} bytes"
            )));
        }
        if sz.0 > 16 << 20 {
            return Err(Invalid::from(format!(
                "load '{name}': message_size must be at most 16 MiB"
            )));
        }
    }
    for (d, key) in [
        (l.ramp, "ramp"),
        (l.idle_timeout, "idle_timeout"),
        (l.ping, "ping"),
        (l.grpc_deadline, "grpc_deadline"),
        (l.backoff, "backoff"),
        (l.backoff_max, "backoff_max"),
    ] {
        if d.is_some_and(|d| d.0.is_zero()) && key != "ramp" {
            return Err(Invalid::from(format!(
                "load '{name}': {key} must be positive"
            )));
        }
    }
    let backoff = l.backoff.map_or(Duration::from_millis(100), |d| d.0);
    let backoff_max = l.backoff_max.map_or(Duration::from_secs(5), |d| d.0);
    if backoff_max < backoff {
        return Err(Invalid::from(format!(
            "load '{name}': backoff_max ({}) must be at least backoff ({})",
            Dur(backoff_max),
            Dur(backoff)
        )));
    }
    if (l.backoff.is_some() || l.backoff_max.is_some())
        && l.reconnect.is_some_and(|r| r == Reconnect::None)
    {
        return Err(Invalid::from(format!(
            "load '{name}': backoff and backoff_max are waits between reconnects; \
             reconnect = \"none\" makes none"
        )));
    }
    if let Some(path) = &l.grpc_path {
        if !path.starts_with('/') || path.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err(Invalid::from(format!(
                "load '{name}': grpc_path '{path}' must start with '/' and hold no spaces"
            )));
        }
    }
    Ok(())
}

/// Whether a long-lived load of protocol `p` can go through listener `lis`: gRPC needs HTTP/2
/// from the client (`http2`); WebSocket and SSE need HTTP/1.1, which a plain `http2`
/// listener does not speak (h2c only), while a TLS one offers both by ALPN.
fn stream_fits(p: StreamProtocol, lis: &setup::proxy::Listener) -> bool {
    if p.is_grpc() {
        lis.http2
    } else {
        lis.tls || !lis.http2
    }
}

/// Why a listener does not fit a long-lived load of protocol `p`.
fn stream_misfit(p: StreamProtocol) -> &'static str {
    if p.is_grpc() {
        "a gRPC load needs a listener with `http2 = true` (h2c, or h2 by ALPN with tls)"
    } else {
        "a WebSocket or SSE load needs HTTP/1.1, which a plain `http2 = true` listener does \
         not speak (h2c only)"
    }
}

/// One load in itself (its url and scheme, its stream settings, TLS, size, HTTP version,
/// retries, streams) and against where it goes (see [`check_load_target`]).
fn check_load(
    l: &LoadSpec,
    proxy: Option<&ProxyConfig>,
    groups: &BTreeMap<String, u32>,
) -> Result<(), Invalid> {
    let stream = l.stream_protocol();
    let https = url_is_https(l, stream)?;
    match stream {
        Some(p) => check_stream(l, p)?,
        None => {
            if let Some(key) = stream_keys(l).first() {
                return Err(Invalid::from(format!(
                    "load '{}': {key} is for long-lived loads (a ws:// url, or protocol = \
                     \"grpc-unary\", \"grpc-stream\" or \"sse\")",
                    l.name
                )));
            }
        }
    }
    // A url load connects where its url points (the reach list decides); every other load
    // connects where the stack says, so its url may only name a host.
    if l.via != Some(Via::Url) {
        crate::reach::check_url_host(&l.target_url())
            .map_err(|e| format!("load '{}': {e}", l.name))?;
        if let Some(ip) = l.resolve {
            return Err(Invalid::from(format!(
                "load '{}': resolve = \"{ip}\" needs via = \"url\": other loads connect \
                 where the run's stack listens",
                l.name
            )));
        }
    }
    if let Some(n) = &l.sni {
        if !https || n.is_empty() || n.parse::<std::net::IpAddr>().is_ok() {
            return Err(Invalid::from(format!(
                "load '{}': sni = \"{n}\" needs an https url and a host name",
                l.name
            )));
        }
    }
    if (l.insecure || l.cacert.is_some()) && !https {
        return Err(Invalid::from(format!(
            "load '{}': cacert and insecure are for https urls",
            l.name
        )));
    }
    if l.duration.is_none() && l.requests.is_none() {
        return Err(Invalid::from(format!(
            "load '{}' needs a `duration` or `requests`",
            l.name
        )));
    }
    if l.connections == 0 || l.threads == 0 {
        return Err(Invalid::from(format!(
            "load '{}': connections and threads must be at least 1",
            l.name
        )));
    }
    match l.http.as_deref() {
        None | Some("1.1") | Some("2") => {}
        Some(v) => {
            return Err(Invalid::from(format!(
                "load '{}': http = \"{v}\" is not a version; use \"1.1\" or \"2\"",
                l.name
            )))
        }
    }
    if l.retry_idle_closed
        && (l.http2() || !model::schedule::replayable(&l.method) || l.body.is_some())
    {
        return Err(Invalid::from(format!(
            "load '{}': retry_idle_closed sends a request twice, so it is for HTTP/1.1 GET, \
             HEAD, OPTIONS or TRACE without a body",
            l.name
        )));
    }
    if let Some(m) = l.streams {
        if !l.http2() {
            return Err(Invalid::from(format!(
                "load '{}': streams = {m} needs http = \"2\"",
                l.name
            )));
        }
        if m == 0 || m > 65_536 {
            return Err(Invalid::from(format!(
                "load '{}': streams must be 1 to 65536, not {m}",
                l.name
            )));
        }
    }
    check_load_target(l, https, stream, proxy, groups)
}

/// Whether a load's url is https (or wss), refusing a scheme that does not fit its protocol.
fn url_is_https(l: &LoadSpec, stream: Option<StreamProtocol>) -> Result<bool, Invalid> {
    let scheme = l
        .url
        .split_once("://")
        .map(|(s, _)| s.to_ascii_lowercase())
        .unwrap_or_default();
    match (scheme.as_str(), stream) {
        ("https", Some(StreamProtocol::WebSocket)) | ("http", Some(StreamProtocol::WebSocket)) => {
            Err(Invalid::from(format!(
                "load '{}': protocol = \"ws\" needs a ws:// or wss:// url",
                l.name
            )))
        }
        ("ws" | "wss", Some(p)) if p != StreamProtocol::WebSocket => Err(Invalid::from(format!(
            "load '{}': a ws:// url is WebSocket; a {} load needs an http:// or https:// url",
            l.name,
            p.name()
        ))),
        ("https" | "wss", _) => Ok(true),
        ("http" | "ws", _) => Ok(false),
        _ => Err(Invalid::from(format!(
            "load '{}': url '{}' must start with http:// or https:// (ws:// or wss:// for \
             a WebSocket load)",
            l.name, l.url
        ))),
    }
}

/// Where a load goes: a backend group that exists (plain HTTP), a listener of the run's proxy
/// that fits its scheme and protocol, or, without `via`, a listener that fits; cluster
/// addresses and urls are checked elsewhere.
fn check_load_target(
    l: &LoadSpec,
    https: bool,
    stream: Option<StreamProtocol>,
    proxy: Option<&ProxyConfig>,
    groups: &BTreeMap<String, u32>,
) -> Result<(), Invalid> {
    match &l.via {
        Some(Via::Backend(g)) => {
            if !groups.contains_key(g) {
                return Err(Invalid::from(format!(
                    "load '{}' goes via backend group '{g}', which is not defined",
                    l.name
                )));
            }
            if https {
                return Err(Invalid::from(format!(
                    "load '{}': backends speak plain HTTP, use an http:// url",
                    l.name
                )));
            }
        }
        Some(Via::Listener(v)) if proxy.is_some_and(|p| p.external.is_some()) => {
            return Err(Invalid::from(format!(
                "load '{}' goes via listener '{v}', but an external target has no listeners: \
                 its url is used as written, port included",
                l.name
            )));
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
                return Err(Invalid::from(format!(
                    "load '{}': listener '{v}' is {} but the url is {}",
                    l.name,
                    if lis.tls { "HTTPS" } else { "HTTP" },
                    if https { "https" } else { "http" }
                )));
            }
            if let Some(p) = stream {
                if !stream_fits(p, lis) {
                    return Err(Invalid::from(format!(
                        "load '{}': listener '{v}' {}",
                        l.name,
                        stream_misfit(p)
                    )));
                }
            }
        }
        // Checked by check_cluster_via, which knows the platform.
        Some(Via::Service(..) | Via::NodePort(_) | Via::LoadBalancer(_) | Via::Gateway { .. }) => {}
        // Checked against the scenario's reach list by the caller.
        Some(Via::Url) => {}
        None => match proxy {
            // An external target's loads go where their urls say (checked by the runner).
            Some(p) if p.external.is_some() => {}
            Some(p) => {
                if !p.listeners.iter().any(|x| x.tls == https) {
                    return Err(Invalid::from(format!(
                        "load '{}': no {} listener to send it to",
                        l.name,
                        if https { "HTTPS" } else { "HTTP" }
                    )));
                }
                if let Some(sp) = stream {
                    if !p
                        .listeners
                        .iter()
                        .any(|x| x.tls == https && stream_fits(sp, x))
                    {
                        return Err(Invalid::from(format!(
                            "load '{}': no {} listener fits it: each {}; name one with `via`",
                            l.name,
                            if https { "HTTPS" } else { "HTTP" },
                            stream_misfit(sp)
                        )));
                    }
                }
            }
            None => {
                return Err(Invalid::from(format!(
                    "load '{}': without a [proxy], say `via = \"backend:GROUP\"`",
                    l.name
                )));
            }
        },
    }
    Ok(())
}
