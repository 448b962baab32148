//! Parsing: a scenario file's layers resolved ([`crate::layers::resolve`]) into cases, each case
//! built and validated (backends, proxy, loads, the action plan, checks), every problem a
//! `file:line: reason` before anything starts.

mod cluster;
mod loads;

use crate::action::{expand_action, ActionSpec, Sizes, Where, MAX_BACKENDS, MAX_REPLICAS};
use crate::checks::Check;
use crate::error::Invalid;
use crate::layers::{self, Source, Table};
use crate::platform::{parse_platform, PlatformKind, PlatformOverride, ServiceKind};
use crate::spec::{ArrivalsSpec, BackendGroup, Case, ItemLines, LoadSpec, Scenario, Via};
use crate::{ScenarioError, Step};
use cluster::check_cluster_via;
use loads::{check_agents, check_load};
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

/// Most agents one load may run on.
pub const MAX_AGENTS: u32 = 256;
