//! A case torn down and written up: the loads joined, the collectors stopped, the logs read and
//! moved, the platform's records taken, and what could not be collected said by name.

use super::case::{
    AgentParts, CaseCtx, CaseOutcome, Distributed, Fired, LoadOut, LoadRun, Running,
};
use super::collectors::{page_shortfall, Samples};
use crate::platform;
use analysis::analyse::panic_text;
use analysis::analysis::{Lives, Records};
use model::{results_dir, CaseRecord};
use scenario::{Case, Via};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::thread;

/// Everything the case measured once its loads ended and its stack came down.
pub(super) struct Collected {
    pub(super) summaries: Vec<model::LoadSummary>,
    pub(super) records: Records,
    /// The long-lived loads' summaries (without their lives).
    pub(super) streams: Vec<model::stream::StreamSummary>,
    /// Their connection lives, by load name.
    pub(super) lives: Lives,
    /// The case's origin on CLOCK_MONOTONIC, ns.
    pub(super) monotonic_origin_ns: u64,
    /// The distributed loads: where and how their agents ran.
    pub(super) distributed: Vec<model::DistributedLoad>,
    pub(super) agent_parts: AgentParts,
    /// What the agents' platform could not clean up.
    pub(super) left_behind: Vec<String>,
    /// What the stage said of how the case ran (the path its loads took).
    pub(super) notes: Vec<String>,
    /// The first load failure.
    pub(super) abort: Option<String>,
    pub(super) samples: Samples,
    pub(super) logs: model::LogSummary,
    pub(super) backends: Vec<model::BackendCounters>,
    pub(super) time_wait: Option<model::TimeWait>,
    pub(super) elapsed_s: f64,
    /// Seconds the stage took before the case's clock started.
    pub(super) stage_s: f64,
    pub(super) down_err: Option<crate::error::StackError>,
    /// What the cluster showed (Kubernetes only).
    pub(super) cluster: Option<model::ClusterRecord>,
    /// Items the stage's collectors covered in part (a pod's log read in part).
    pub(super) missed: Vec<platform::Missed>,
}

/// Joins the loads, lets the case settle, stops the collector, takes the stack down, moves the
/// proxy's logs into the results and reads them, and counts TIME_WAIT at the backends' ports.
pub(super) fn collect(case: &Case, ctx: &CaseCtx<'_>, mut run: Running) -> Collected {
    let joined = join_loads(case, std::mem::take(&mut run.loads));
    run.progress.finish();
    if let Some(m) = &run.metrics {
        m.end();
    }
    if !ctx.opts.stop.load(Ordering::SeqCst) {
        thread::sleep(case.settle);
    }
    run.collecting.store(false, Ordering::SeqCst);
    let samples = run.collector.join().unwrap_or_default();
    let platform::Down {
        logs,
        backends,
        cluster,
        err: down_err,
        mut notes,
        missed,
    } = run.stack.down();
    notes.extend(run.notes);
    drop(run.stack);
    let elapsed_s = run.origin.elapsed().as_secs_f64();
    let logs = take_logs(&run.logs_dir, &logs);
    let ports: Vec<u16> = backends
        .iter()
        .filter_map(|b| b.addr.rsplit_once(':').and_then(|(_, p)| p.parse().ok()))
        .collect();
    Collected {
        summaries: joined.summaries,
        records: joined.records,
        streams: joined.streams,
        lives: joined.lives,
        monotonic_origin_ns: run.monotonic_origin_ns,
        distributed: joined.distributed,
        agent_parts: joined.agent_parts,
        left_behind: joined.left_behind,
        notes,
        abort: joined.abort,
        samples,
        logs,
        backends,
        time_wait: crate::procfs::time_wait(&ports),
        elapsed_s,
        stage_s: run.stage_s,
        down_err,
        cluster,
        missed,
    }
}

/// What the case's loads gave when joined ([`join_loads`]).
#[derive(Default)]
struct Joined {
    summaries: Vec<model::LoadSummary>,
    records: Records,
    streams: Vec<model::stream::StreamSummary>,
    lives: Lives,
    distributed: Vec<model::DistributedLoad>,
    agent_parts: AgentParts,
    left_behind: Vec<String>,
    /// The first load failure (or lost agent, or panic).
    abort: Option<String>,
}

/// Joins each load's thread: its summary and records, its agents' record and parts, a
/// long-lived load's summary and lives, and the first failure.
fn join_loads(
    case: &Case,
    loads: Vec<thread::JoinHandle<Result<LoadRun, crate::error::LoadError>>>,
) -> Joined {
    let mut j = Joined::default();
    for (li, h) in loads.into_iter().enumerate() {
        match h.join() {
            Ok(Ok(LoadRun::Stream(mut st))) => {
                j.lives
                    .insert(st.name.clone(), std::mem::take(&mut st.lives));
                j.streams.push(st);
            }
            Ok(Ok(LoadRun::Http(LoadOut {
                outcome: out,
                distributed: d,
            }))) => {
                if let Some(r) = out.records {
                    j.records.insert(out.summary.name.clone(), r);
                }
                if let Some(Distributed {
                    record: rec,
                    parts,
                    left,
                }) = d
                {
                    // A lost agent fails the run, as it fails `load`: its partial counts are
                    // kept, never dropped.
                    if let Some(first) = rec.lost.first() {
                        j.abort
                            .get_or_insert(format!("load '{}': {first}", rec.load));
                    }
                    j.left_behind.extend(left);
                    let mut rec = rec;
                    rec.files =
                        model::results_dir::agents_dir(Path::new(""), &case.name, li, &rec.load)
                            .display()
                            .to_string();
                    j.agent_parts.insert(rec.load.clone(), parts);
                    j.distributed.push(rec);
                }
                j.summaries.push(out.summary);
            }
            Ok(Err(e)) => {
                j.abort.get_or_insert(e.to_string());
            }
            Err(p) => {
                j.abort
                    .get_or_insert(format!("a load panicked: {}", panic_text(&p)));
            }
        }
    }
    j
}

/// Moves each replica's logs into the results (`logs_dir`/REPLICA; a user's own files are
/// copied from where the case began), reads them, and says what is missing: no access log
/// from an external target, or a user's access log that never appeared.
fn take_logs(logs_dir: &Path, logs: &[(String, proxy::LogFiles)]) -> model::LogSummary {
    let mut access = Vec::new();
    let mut errors = Vec::new();
    let mut format = None;
    let mut borrowed_without_access = false;
    // A user's access log that was not there when the case began and never appeared.
    let mut never_appeared = None;
    for (replica, files) in logs {
        let to = logs_dir.join(replica);
        let _ = fs::create_dir_all(&to);
        // The user's own files stay where they are: the run's part is copied.
        let take = |from: &Path, offset: u64, to: &Path| {
            if files.borrowed {
                copy_from(from, offset, to);
            } else {
                move_file(from, to);
            }
        };
        if let Some(a) = &files.access {
            if files.borrowed && !a.exists() {
                never_appeared.get_or_insert_with(|| a.clone());
            }
            let a2 = to.join(results_dir::ACCESS_LOG);
            take(a, files.access_offset, &a2);
            access.push(a2);
        }
        if let Some(e) = &files.error {
            let e2 = to.join(results_dir::ERROR_LOG);
            take(e, files.error_offset, &e2);
            // A user's error log still not there: nothing was logged to it.
            if files.borrowed && !e.exists() {
                let _ = fs::File::create(&e2);
            }
            errors.push(e2);
        }
        borrowed_without_access |= files.borrowed && files.access.is_none();
        format = Some(files.format);
    }
    let mut summary = read_logs(format, logs.len(), &access, &errors);
    if borrowed_without_access {
        summary.missing =
            Some("the external target gives no access log (proxy.external.access_log)".to_string());
    }
    if let Some(p) = never_appeared {
        summary.missing = Some(format!(
            "proxy.external.access_log {} did not appear during the case: the proxy logged no \
             request there (is it the file the proxy writes?)",
            p.display()
        ));
    }
    summary
}

/// How long the stage took, as the case's finding: its clock (actions' `at`, loads' `start`,
/// every time in the record) starts when the stack serves, not when the stage began.
fn stage_note(stage_s: f64) -> String {
    format!(
        "The stage took {stage_s:.2} s (backends and proxy up, the loads' targets answering); \
         the case's times count from when it served."
    )
}

/// The case's measurements as the record holds them; a teardown failure is a finding of the
/// run itself.
pub(super) fn record(case: &Case, ctx: &CaseCtx<'_>, fired: Fired, c: Collected) -> CaseOutcome {
    let (proc_samples, stub_samples, readiness, pages, generations) = c.samples;
    let on_cluster = c.cluster.is_some();
    let mut partial = BTreeMap::new();
    if let Some(s) = page_shortfall(&pages) {
        partial.insert(model::Collector::StatusPages, s);
    }
    let mut result = CaseRecord {
        name: case.name.clone(),
        description: case.description.clone(),
        start_s: ctx.start_s + c.stage_s,
        elapsed_s: c.elapsed_s,
        loads: c.summaries,
        events: fired.events,
        reloads: fired.reloads,
        logs: c.logs,
        proc_samples,
        stub_samples,
        readiness,
        ready: fired.ready,
        probes: fired.probes,
        backends: c.backends,
        time_wait: c.time_wait,
        findings: Vec::new(),
        absent: absent(case, on_cluster),
        partial,
        cluster: c.cluster,
        distributed: c.distributed,
        streams: c.streams,
        generations,
        // The backends run in this process only off a cluster: their clock is this one.
        monotonic_origin_ns: (!on_cluster).then_some(c.monotonic_origin_ns),
    };
    for m in &c.missed {
        result.add_missing(m.collector, &m.unit, m.of, &m.item, &m.why);
    }
    if c.abort.is_none() {
        if let Some(e) = c.down_err {
            result.findings.push(format!("teardown: {e}"));
        }
    }
    if let Some(ext) = case.proxy.as_ref().and_then(|p| p.external.as_ref()) {
        result.findings.extend(external_gaps(ext));
    }
    result.findings.push(stage_note(c.stage_s));
    result.findings.extend(c.notes);
    result.findings.extend(c.left_behind);
    CaseOutcome {
        result: Some(result),
        records: c.records,
        lives: c.lives,
        agent_parts: c.agent_parts,
        abort: c.abort,
    }
}

/// The collectors this machine cannot run for the case's proxy, each with why: a proxy in pods
/// (its probes are the kubelet's, its status pages are not reached from here) or an external
/// target (no admin listener, no status page). Collectors left out here are absent only when
/// they gathered nothing ([`model::CaseResult::gap`]).
pub(super) fn absent(case: &Case, on_cluster: bool) -> BTreeMap<model::Collector, String> {
    use model::Collector;
    let mut out = BTreeMap::new();
    let external = case.proxy.as_ref().and_then(|p| p.external.as_ref());
    if case.proxy.is_none() {
        out.insert(
            Collector::Generations,
            "no proxy ran in this case".to_string(),
        );
    }
    if let Some(ext) = external {
        let why = "an external target has no admin listener and no status page";
        out.insert(Collector::Readiness, why.to_string());
        out.insert(Collector::StatusPages, why.to_string());
        if ext.processes.is_none() {
            out.insert(
                Collector::Generations,
                "an external target without `processes` names no process to sample".to_string(),
            );
        }
    } else if on_cluster {
        out.insert(
            Collector::Generations,
            "the proxy runs in pods, whose processes are not sampled from this machine".to_string(),
        );
        out.insert(
            Collector::Readiness,
            "the proxy runs in pods, whose readiness probes the kubelet runs (the Cluster \
             section has every pod's Ready changes)"
                .to_string(),
        );
        out.insert(
            Collector::StatusPages,
            "the proxy runs in pods, whose status pages are not sampled from this machine"
                .to_string(),
        );
    }
    out
}

/// What an external target cannot give, said once per case so that no absent measurement reads
/// as a zero.
fn external_gaps(ext: &proxy::config::External) -> Vec<String> {
    let mut out = vec![
        "external target: no status page and no admin listener, so no connection/request \
         samples and no readiness probes"
            .to_string(),
    ];
    if ext.reload.is_empty() {
        out.push("external target: no reload command (proxy.external.reload)".into());
    } else {
        out.push(
            "external target: a reload is timed from its command's start to the command's exit, \
             not to the new generation serving (no admin listener shows it), and old workers' \
             exit is not timed"
                .into(),
        );
    }
    if ext.access_log.is_none() {
        out.push(
            "external target: no access log (proxy.external.access_log), so no proxy-side \
             request counts, statuses or upstream spread"
                .into(),
        );
    }
    if ext.error_log.is_none() {
        out.push("external target: no error log (proxy.external.error_log)".into());
    }
    if ext.processes.is_none() {
        out.push(
            "external target: no `processes`, so the proxy's CPU and memory are not sampled".into(),
        );
    }
    out
}

/// The proxy's logs summarised, or an empty summary that says why there is none, so that checks
/// on the logs fail instead of reading zeros.
fn read_logs(
    format: Option<proxy::logs::LogFormat>,
    replicas: usize,
    access: &[PathBuf],
    errors: &[PathBuf],
) -> model::LogSummary {
    let missing = |why: String| model::LogSummary {
        missing: Some(why),
        ..Default::default()
    };
    let Some(format) = format.filter(|_| replicas > 0) else {
        return missing("no proxy replica ran in this case".into());
    };
    if access.is_empty() {
        return missing("the proxy wrote no access log in this case".into());
    }
    if let Some(p) = access.iter().chain(errors).find(|p| !p.is_file()) {
        return missing(format!("{} is missing", p.display()));
    }
    proxy::logs::summarize(format, access, errors)
        .unwrap_or_else(|e| missing(format!("cannot read the logs: {e}")))
}

/// Copies `from` beyond byte `offset` (the run's part of a log that is not proxybench's) to
/// `to`; a file that shrank meanwhile (rotated) is copied whole.
fn copy_from(from: &Path, offset: u64, to: &Path) {
    use std::io::{Seek, SeekFrom};
    let Ok(mut f) = fs::File::open(from) else {
        return;
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let at = if len < offset { 0 } else { offset };
    if f.seek(SeekFrom::Start(at)).is_err() {
        return;
    }
    if let Ok(mut out) = fs::File::create(to) {
        let _ = std::io::copy(&mut f, &mut out);
    }
}

fn move_file(from: &Path, to: &Path) {
    if fs::rename(from, to).is_err() {
        let _ = fs::copy(from, to);
    }
}

/// Adds what one case showed of the platform's paths to env.json's platform record: how the
/// proxy pods were reached (the first case that found it) and where each load aimed and ran
/// from (the cluster's record has the Service; a distributed load's record its agents' place).
pub(super) fn platform_paths(p: &mut model::PlatformInfo, case: &Case, r: &CaseRecord) {
    let Some(cluster) = &r.cluster else {
        return;
    };
    if p.pod_path.is_empty() {
        if let Some(path) = &cluster.pod_path {
            p.pod_path.clone_from(path);
        }
    }
    for l in &r.loads {
        let spec = case.loads.iter().find(|s| s.name == l.name);
        let target = match spec.map(|s| &s.via) {
            Some(Some(Via::Backend(g))) => format!("backend group `{g}` (its first pod)"),
            Some(Some(Via::Url)) => {
                spec.map_or_else(String::new, |s| format!("the url's own host ({})", s.url))
            }
            Some(Some(v)) if v.is_cluster_address() => cluster
                .load_targets
                .get(&v.to_string())
                .cloned()
                .unwrap_or_else(|| format!("via `{v}`")),
            _ => cluster
                .load_targets
                .get("")
                .cloned()
                .unwrap_or_else(|| "the proxy pods".to_string()),
        };
        let from = r
            .distributed
            .iter()
            .find(|d| d.load == l.name)
            .map_or_else(|| "this machine".to_string(), |d| d.place.clone());
        p.load_paths.push(model::LoadPath {
            case: r.name.clone(),
            load: l.name.clone(),
            target,
            from,
        });
    }
}
