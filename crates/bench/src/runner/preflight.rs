//! What is checked before a run creates anything: the certificate a TLS case needs, every
//! proxy's own validator and the features its driver can express, CPUs to pin to, the open-files
//! budget, and the long-lived loads' settings.

use super::loads::stream_settings;
use super::RunError;
use crate::error::one_line;
use proxy::{ProxyConfig, RenderContext, TlsFiles};
use scenario::{Case, Scenario};
use std::collections::BTreeMap;
use std::fs;
use std::net::SocketAddr;
use std::path::Path;

/// One certificate for every TLS listener of every case and config.
pub(super) fn certificate(scn: &Scenario, dir: &Path) -> Result<Option<TlsFiles>, RunError> {
    let mut names: Vec<String> = Vec::new();
    for case in &scn.cases {
        let grows_https = case.steps.iter().any(|s| {
            matches!(&s.action, scenario::Action::Grow(g) if g.what == scenario::GrowWhat::HttpsListeners)
        });
        if grows_https {
            let first = case
                .proxy
                .as_ref()
                .and_then(|p| p.listeners.first())
                .and_then(|l| l.server_names.first().cloned())
                .unwrap_or_else(|| "localhost".into());
            if !names.contains(&first) {
                names.push(first);
            }
        }
        for cfg in case.proxy.iter().chain(case.configs.values()) {
            for n in cfg.tls_names() {
                if !names.contains(&n) {
                    names.push(n);
                }
            }
        }
    }
    if names.is_empty() {
        return Ok(None);
    }
    proxy::tls::self_signed(&names, dir)
        .map(Some)
        .map_err(RunError::Certificate)
}

/// Renders every config of every case against placeholder addresses and runs the proxy's own
/// checker on it, so a config the proxy refuses, or a feature it cannot express, stops the run
/// before anything starts, naming the scenario line.
pub(super) fn preflight(
    scn: &Scenario,
    tls: Option<&TlsFiles>,
    scratch: &Path,
) -> Result<(), RunError> {
    for case in &scn.cases {
        let groups: BTreeMap<String, Vec<SocketAddr>> = case
            .backends
            .iter()
            .map(|g| {
                let addrs = (0..g.count.max(1))
                    .map(|i| SocketAddr::from(([127, 0, 0, 1], 10000 + i as u16)))
                    .collect();
                (g.name.clone(), addrs)
            })
            .collect();
        let no_lines = scenario::ItemLines::default();
        let named = case
            .proxy
            .iter()
            .map(|c| ("[proxy]".to_string(), c, &case.proxy_lines));
        let alts = case.configs.iter().map(|(n, c)| {
            let lines = case.config_lines.get(n).unwrap_or(&no_lines);
            (format!("[configs.{n}]"), c, lines)
        });
        for (what, cfg, lines) in named.chain(alts) {
            let ports = cfg
                .listeners
                .iter()
                .enumerate()
                .map(|(i, l)| (l.name.clone(), l.port.unwrap_or(20000 + i as u16)))
                .collect();
            let ctx = RenderContext {
                prefix: scratch.to_path_buf(),
                generation: 1,
                groups: groups.clone(),
                ports,
                admin_port: 30000,
                control_port: 30001,
                tls: tls.cloned(),
                ..RenderContext::default()
            };
            let where_ = format!("case '{}', {what}", case.name);
            expressible(cfg, case, &where_, lines, &scn.file)?;
            if let Some(cpus) = &cfg.cpus {
                pinnable(cpus).map_err(|m| {
                    RunError::Invalid(format!(
                        "{}:{}: {where_}: {m}",
                        scn.file,
                        lines.line_of(None)
                    ))
                })?;
            }
            let driver = proxy::driver(cfg.kind);
            let rendered = driver.render(cfg, &ctx).map_err(|e| {
                RunError::Invalid(format!(
                    "{}:{}: {where_}: {e}",
                    scn.file,
                    lines.line_of(None)
                ))
            })?;
            let checked = driver
                .check(&rendered, scratch)
                .map_err(|source| RunError::Checker {
                    place: where_.clone(),
                    kind: cfg.kind,
                    source,
                })?;
            if let Err(refusal) = checked {
                // The proxy names a line of the rendered file; the item that line came from
                // names the scenario line.
                let line = lines.line_of(refusal.item.as_deref());
                let item = refusal.item.map(|i| format!(" {i}")).unwrap_or_default();
                return Err(RunError::Invalid(format!(
                    "{}:{line}: {where_}{item}: {} refused the config: {}",
                    scn.file,
                    cfg.kind,
                    one_line(&refusal.message)
                )));
            }
        }
    }
    Ok(())
}

/// Refuses a `[proxy] cpus` list naming a CPU this machine does not have online: the kernel
/// would pin the proxy to the rest of the list without a word, and the comparison would not be
/// the one asked for. (The list may lie outside the CPUs proxybench itself was started on: a
/// benchmark pins the load to one core and the proxy to another.)
fn pinnable(cpus: &proxy::config::Cpus) -> Result<(), proxy::config::Invalid> {
    use proxy::config::Invalid;
    let path = "/sys/devices/system/cpu/online";
    let unread =
        |e: &dyn std::fmt::Display| Invalid(format!("proxy.cpus: cannot read {path}: {e}"));
    let online = fs::read_to_string(path).map_err(|e| unread(&e))?;
    let online = proxy::config::Cpus::parse(online.trim()).map_err(|e| unread(&e))?;
    match cpus.list().iter().find(|c| !online.list().contains(c)) {
        Some(c) => Err(Invalid(format!(
            "proxy.cpus = \"{cpus}\" names CPU {c}, but this machine has CPUs {online} online"
        ))),
        None => Ok(()),
    }
}

/// Refuses a config that uses a feature its proxy cannot express, or that changes the proxy
/// kind within a case (a `swap_config` cannot turn nginx into HAProxy), naming the proxy, the
/// feature and the scenario line of the item using it.
fn expressible(
    cfg: &ProxyConfig,
    case: &Case,
    where_: &str,
    lines: &scenario::ItemLines,
    file: &str,
) -> Result<(), RunError> {
    if let Some(first) = &case.proxy {
        if first.kind != cfg.kind {
            return Err(RunError::Invalid(format!(
                "{file}:{}: {where_}: kind {} differs from the case's [proxy] kind {}; one case \
                 runs one proxy",
                lines.line_of(None),
                cfg.kind,
                first.kind
            )));
        }
    }
    if let Some((u, why)) = proxy::unsupported(cfg.kind, cfg).into_iter().next() {
        return Err(RunError::Invalid(format!(
            "{file}:{}: {where_} {}: {} cannot express {}: {why}",
            lines.line_of(Some(&u.item)),
            u.item,
            cfg.kind,
            u.feature
        )));
    }
    Ok(())
}

/// Checks, before anything starts, that each case's sockets fit under the open-files limit
/// (raising the soft limit toward the hard one if needed). The loads and the backends live in
/// this process, so every connection counts twice: the load's end and, through the proxy or
/// directly, a backend's end.
pub(super) fn fd_budget(scn: &Scenario) -> Result<(), RunError> {
    use load::fds;
    for case in &scn.cases {
        let conns: u64 = case.loads.iter().map(|l| u64::from(l.connections)).sum();
        let threads: u64 = case
            .loads
            .iter()
            .map(|l| u64::from(l.threads.min(l.connections)))
            .sum();
        let listeners: u64 = case.backends.iter().map(|g| u64::from(g.count)).sum();
        let open = fds::open_now();
        let need = fds::needed(2 * conns + listeners, threads, open);
        let soft = fds::raise_for(need).map_err(RunError::Fds)?;
        if need > soft {
            let biggest = case.loads.iter().max_by_key(|l| l.connections);
            let line = biggest
                .and_then(|l| case.load_lines.get(&l.name))
                .copied()
                .unwrap_or(1);
            return Err(RunError::Invalid(format!(
                "{}:{line}: case '{}': its loads' {conns} connections need {need} open files \
                 (2 x {conns} sockets: the loads' and the backends' ends, {listeners} backend \
                 listeners, {} for {threads} load threads, {open} already open, {} spare), but \
                 the open-files limit (ulimit -n) is {soft}",
                scn.file,
                case.name,
                threads * fds::PER_THREAD,
                fds::SLACK
            )));
        }
    }
    Ok(())
}

/// Checks each long-lived load's settings as the engine reads them, before anything starts
/// (the parser checked what it can; this is the engine's own word), naming the scenario line.
pub(super) fn stream_preflight(scn: &Scenario) -> Result<(), RunError> {
    for case in &scn.cases {
        for l in &case.loads {
            let Some(p) = l.stream_protocol() else {
                continue;
            };
            let line = case.load_lines.get(&l.name).copied().unwrap_or(1);
            let refuse = |m: String| {
                RunError::Invalid(format!("{}:{line}: case '{}': {m}", scn.file, case.name))
            };
            let target = l.target_url();
            let u = load::target::Url::parse(&target)
                .map_err(|e| refuse(format!("load '{}': {e}", l.name)))?;
            let scheme = match (p, u.tls) {
                (model::stream::StreamProtocol::WebSocket, false) => "ws",
                (model::stream::StreamProtocol::WebSocket, true) => "wss",
                (_, false) => "http",
                (_, true) => "https",
            };
            let url = format!("{scheme}://127.0.0.1:9{}", u.path);
            let mut cfg = load::StreamConfig::new(&url, p)
                .map_err(|e| refuse(format!("load '{}': {e}", l.name)))?;
            stream_settings(&mut cfg, l, false, None).map_err(|e| refuse(e.to_string()))?;
            cfg.validate()
                .map_err(|e| refuse(format!("load '{}': {e}", l.name)))?;
        }
    }
    Ok(())
}
