//! What a case records: the collectors it starts, the cluster record it returns at `down`, the
//! readiness probe note, and the pods' logs split into access and error lines.

use super::{KubeStage, ENDPOINT_ROLE, PROXY};
use crate::error::StackError;
use k8s::collect::{
    Collected, Collector, EndpointChange, PodTimeline, PodUsage, ProbeCounts, Scrape, WarningEvent,
};
use k8s::LogFollowers;
use model::ClusterRecord;
use proxy::logs::Parse as _;
use proxy::LogFiles;
use scenario::PlatformSpec;
use std::collections::BTreeSet;
use std::time::Duration;

impl KubeStage {
    /// What the collectors gathered, as the case's cluster record.
    pub(super) fn record(&mut self) -> ClusterRecord {
        let mut rec = self.record_header();
        let pods: Vec<Collected<PodTimeline>> = self.pods.drain(..).map(Collector::stop).collect();
        let warnings: Vec<_> = self.warnings.drain(..).map(Collector::stop).collect();
        let metrics: Vec<(String, Collected<Vec<PodUsage>>)> = self
            .metrics
            .drain(..)
            .map(|m| (m.what().to_string(), m.stop()))
            .collect();
        let scrape = self.scrape.take().map(Collector::stop);
        let endpoints = self.endpoints.take().map(Collector::stop);
        if let Some(p) = self.probes.take().map(Collector::stop) {
            self.notes.push(probe_note(&p));
        }
        let stopped = Stopped {
            pods: &pods,
            warnings: &warnings,
            metrics: &metrics,
            scrape: scrape.as_ref(),
            endpoints: endpoints.as_ref(),
        };
        stopped.absences(&mut rec.absent, &mut self.notes);
        // The case's own pods by their names (`proxy-<run id>-...`, `backend-GROUP-<run id>-...`);
        // any other pod of the namespace is a watched one.
        let own = (
            format!("{}-", self.name(PROXY)),
            format!("-{}-", self.run_id),
        );
        pod_rows(&mut rec, pods, &own);
        for w in warnings.into_iter().flat_map(|w| w.data) {
            rec.warnings.push(model::ClusterEvent {
                t_s: w.t_s,
                object: w.object,
                reason: w.reason,
                message: w.message,
                count: w.count.max(0) as u32,
                added: Some(w.added.max(0) as u32),
            });
        }
        for m in metrics.into_iter().flat_map(|(_, m)| m.data) {
            rec.metrics.push(model::PodMetric {
                t_s: m.t_s,
                pod: m.pod,
                cpu_millicores: m.cpu_cores * 1e3,
                memory_bytes: m.memory_bytes as u64,
            });
        }
        rec.scrapes = scrape_rows(scrape.map(|s| s.data).unwrap_or_default());
        rec.absent.extend(self.absent.iter().cloned());
        // The Service's endpoints beside the pods: an endpoint enters, changes (ready,
        // terminating) and leaves ("Deleted") as the EndpointSlice controller saw its pod.
        for e in endpoints.map(|e| e.data).unwrap_or_default() {
            rec.pods.push(model::PodChange {
                t_s: e.t_s,
                pod: e.endpoint,
                role: ENDPOINT_ROLE.into(),
                phase: if e.gone { "Deleted" } else { "Endpoint" }.into(),
                ready: e.ready,
                terminating: e.terminating,
            });
        }
        // The collectors count from the stage's start; the case's clock from when it served.
        let shift = self
            .served
            .origin
            .saturating_duration_since(self.stage_origin)
            .as_secs_f64();
        on_case_clock(&mut rec, shift);
        rec
    }

    /// The cluster record's header: the namespace, the cluster, the proxy's stop, and where
    /// each load aimed (with the proxy's Service when it has a ClusterIP).
    fn record_header(&mut self) -> ClusterRecord {
        let info = self.cluster.info();
        let mut load_targets =
            std::mem::take(&mut *self.load_targets.lock().unwrap_or_else(|p| p.into_inner()));
        if let Some((kind, Some(ip))) = self.service {
            load_targets.insert(
                String::new(),
                format!(
                    "Service `{}` ({kind}) at its ClusterIP {ip}",
                    self.name(PROXY)
                ),
            );
        }
        ClusterRecord {
            namespace: self.namespace.clone(),
            context: info.context.clone(),
            server_version: info.version.clone(),
            proxy_grace_s: self.proxy_stop.map(|s| s.0),
            proxy_pre_stop_s: self.proxy_stop.map(|s| s.1),
            pod_path: self.pod_path.map(|p| p.as_str().to_string()),
            load_targets,
            ..ClusterRecord::default()
        }
    }

    /// Starts the collectors of the user's pods (`[platform] watch`): pods and Warning events of
    /// each watched namespace, and the logs of the pods each selector picks (in each watched
    /// namespace, or the run's own when none is named), followed from their start.
    pub(super) fn watch(&mut self, spec: &PlatformSpec) -> Result<(), StackError> {
        let c = self.cluster.clone();
        let others: Vec<&String> = spec
            .watch_namespaces
            .iter()
            .filter(|n| **n != self.namespace)
            .collect();
        for ns in &others {
            if spec.watch_selectors.is_empty() {
                self.pods.push(c.watch_pods(ns, "", self.served.origin));
            }
            for sel in &spec.watch_selectors {
                self.pods.push(c.watch_pods(ns, sel, self.served.origin));
            }
            self.warnings.push(c.watch_warnings(ns, self.served.origin));
        }
        let log_namespaces: Vec<&String> = if spec.watch_namespaces.is_empty() {
            vec![&self.namespace]
        } else {
            spec.watch_namespaces.iter().collect()
        };
        if spec.watch_log_format.is_none() && !spec.watch_log_levels {
            if !spec.watch_selectors.is_empty() {
                self.absent.push(
                    "watched pods' logs: not read (platform.watch.log_format names how their \
                     access lines are written)"
                        .into(),
                );
            }
            return Ok(());
        }
        for ns in log_namespaces {
            for sel in &spec.watch_selectors {
                let dir = self.logs_dir.join("watched").join(ns);
                self.watched_logs
                    .push(c.follow_logs(ns, sel, &dir, self.served.origin)?);
            }
        }
        Ok(())
    }
}

/// What the kubelets counted of the proxy pods' readiness probes, as one sentence: only what was
/// read from them (never a probe result that was not measured). When a node's kubelet could not
/// be read at the end, the counts are those of the other nodes (and of that one up to its last
/// good read), and the sentence says so, naming the node and why.
fn probe_note(p: &Collected<ProbeCounts>) -> String {
    let missing = p.data.missing_nodes();
    if p.data.tallies.is_empty() {
        return format!(
            "The proxy pods' readiness probes were not counted: {}.",
            p.absent
                .as_deref()
                .or(missing.first().and_then(|(_, r)| r.last_error.as_deref()))
                .or(p.errors.first().map(String::as_str))
                .unwrap_or("the kubelets gave no counter")
                .trim_end_matches('.')
        );
    }
    let (mut ok, mut failed, mut unknown) = (0u64, 0u64, 0u64);
    let (mut sum, mut n) = (0.0, 0u64);
    let mut failing: BTreeSet<&str> = BTreeSet::new();
    for t in &p.data.tallies {
        ok += t.successes;
        failed += t.failures;
        unknown += t.unknown;
        if let Some(m) = t.mean_success_s {
            sum += m * t.successes as f64;
            n += t.successes;
        }
        if t.failures > 0 {
            failing.insert(&t.pod);
        }
    }
    let mean = if n > 0 {
        format!(
            "; a successful probe took {:.2} ms on average (the kubelets' histogram)",
            sum / n as f64 * 1e3
        )
    } else {
        String::new()
    };
    let who = if failing.is_empty() {
        String::new()
    } else {
        format!(
            " (failed: {})",
            failing.into_iter().collect::<Vec<_>>().join(", ")
        )
    };
    let counts = format!("{ok} succeeded, {failed} failed{who}, {unknown} unknown{mean}");
    if missing.is_empty() {
        return format!(
            "The kubelets counted the proxy pods' readiness probes (an httpGet of the admin \
             listener every second): {counts}."
        );
    }
    let nodes = p.data.nodes.len();
    let why = missing
        .iter()
        .map(|(node, r)| {
            format!(
                "{node}: {}{}",
                r.last_error
                    .as_deref()
                    .unwrap_or_default()
                    .trim_end_matches('.'),
                if r.ok > 0 {
                    " (its pods counted up to its last good read only)"
                } else {
                    " (never read)"
                }
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    format!(
        "The proxy pods' readiness probes were counted in part: on {} of {nodes} nodes; {why}. \
         What the kubelets read counted (an httpGet of the admin listener every second; partial, \
         not the proxy pods' totals): {counts}.",
        nodes - missing.len()
    )
}

/// Stops log followers and splits each container's log into its access and error lines (by
/// `format`) in `dir`, as the proxy's log files the run summarizes, one replica per pod (`POD`)
/// or, for a pod of several containers, per container (`POD.CONTAINER`), so that no container's
/// log overwrites another's. A log its follower could not read whole goes to `short` (its name
/// and why): the case's logs are partial, and the run records it so; a log file that cannot be
/// read at all goes to `err`.
pub(super) fn split_logs(
    followers: LogFollowers,
    format: proxy::logs::LogFormat,
    dir: &std::path::Path,
    logs: &mut Vec<(String, LogFiles)>,
    short: &mut Vec<(String, String)>,
    err: &mut Option<StackError>,
) {
    let followed = followers.stop(Duration::from_secs(30));
    split_followed(followed, format, dir, logs, short, err);
}

/// Each followed container's log counted by the level of its JSON lines, as the case's record
/// keeps it (`watch.log_levels`).
pub(super) fn log_levels(followed: &[k8s::FollowedLog]) -> Vec<model::LogLevels> {
    followed
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f.path);
            let c = k8s::follow::count_levels(text.as_deref().unwrap_or(""));
            let namespace = f
                .path
                .parent()
                .and_then(|d| d.file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            model::LogLevels {
                pod: format!("{namespace}/{}", f.pod),
                container: f.container.clone(),
                lines: c.lines,
                leveled: c.leveled,
                errors: c
                    .levels
                    .iter()
                    .filter(|(l, _)| k8s::follow::ERROR_LEVELS.contains(&l.as_str()))
                    .map(|(_, n)| n)
                    .sum(),
                levels: c.levels,
                first_errors: c.first_errors,
                // A log not read whole is never counted as if it were: a read that failed
                // (no line counted), a follower that failed or never reached the log's end.
                incomplete: match (text, &f.error) {
                    (Err(e), _) => Some(format!("not read: {}: {e}", f.path.display())),
                    (Ok(_), Some(e)) => Some(e.clone()),
                    (Ok(_), None) if !f.complete => Some("its end was never read".into()),
                    (Ok(_), None) => None,
                },
            }
        })
        .collect()
}

/// [`split_logs`] of logs already followed to their end.
pub(super) fn split_followed(
    followed: Vec<k8s::FollowedLog>,
    format: proxy::logs::LogFormat,
    dir: &std::path::Path,
    logs: &mut Vec<(String, LogFiles)>,
    short: &mut Vec<(String, String)>,
    err: &mut Option<StackError>,
) {
    let mut per_pod: std::collections::BTreeMap<&str, usize> = Default::default();
    for f in &followed {
        *per_pod.entry(f.pod.as_str()).or_default() += 1;
    }
    let names: Vec<String> = followed
        .iter()
        .map(|f| match per_pod.get(f.pod.as_str()) {
            Some(n) if *n > 1 => format!("{}.{}", f.pod, f.container),
            _ => f.pod.clone(),
        })
        .collect();
    for (f, name) in followed.iter().zip(names) {
        let access = dir.join(format!("{name}.access.log"));
        let error = dir.join(format!("{name}.error.log"));
        match std::fs::read_to_string(&f.path) {
            Ok(text) => {
                let (mut a, mut e) = (String::new(), String::new());
                for line in text.lines() {
                    let to = if format.access(line).is_some() {
                        &mut a
                    } else {
                        &mut e
                    };
                    to.push_str(line);
                    to.push('\n');
                }
                let _ = std::fs::write(&access, a);
                let _ = std::fs::write(&error, e);
            }
            Err(source) => {
                err.get_or_insert(StackError::Io {
                    path: f.path.clone(),
                    source,
                });
            }
        }
        // Read in part: its lines are summarised with the others', and the case says that
        // this log is short (the checks on the proxy's logs are then not measurable).
        if let Some(e) = &f.error {
            short.push((name.clone(), format!("container {}: {e}", f.container)));
        }
        logs.push((
            name,
            LogFiles {
                access: Some(access),
                error: Some(error),
                format,
                ..LogFiles::default()
            },
        ));
    }
}

/// The case's collectors, stopped: what [`Stopped::absences`] reads.
struct Stopped<'a> {
    pods: &'a [Collected<PodTimeline>],
    warnings: &'a [Collected<Vec<WarningEvent>>],
    metrics: &'a [(String, Collected<Vec<PodUsage>>)],
    scrape: Option<&'a Collected<Vec<Scrape>>>,
    endpoints: Option<&'a Collected<Vec<EndpointChange>>>,
}

impl Stopped<'_> {
    /// What each collector could not gather, as the record's `absent` lines; a metrics
    /// sampler that got nothing beside others that did (a watched namespace's selector
    /// picked no pod) is a note instead.
    fn absences(&self, absent: &mut Vec<String>, notes: &mut Vec<String>) {
        let mut push = |what: &str, a: &Option<String>| {
            if let Some(a) = a {
                absent.push(format!("{what}: {a}"));
            }
        };
        if let Some(e) = self.endpoints {
            push("EndpointSlice watch", &e.absent);
        }
        for p in self.pods {
            push("pod watch", &p.absent);
        }
        for w in self.warnings {
            push("events", &w.absent);
        }
        if self.metrics.iter().all(|(_, m)| m.absent.is_some()) {
            if let Some((_, m)) = self.metrics.first() {
                push("metrics API", &m.absent);
            }
        } else {
            for (what, m) in self.metrics {
                if let Some(a) = &m.absent {
                    notes.push(format!("The metrics API gave nothing for the {what}: {a}."));
                }
            }
        }
        if let Some(s) = self.scrape {
            push("Prometheus scrape", &s.absent);
        }
    }
}

/// The pods' changes and restarts into the record, each pod's role from its name: `own` is
/// the prefix of the run's proxy pods and the run's id as backend pods carry it.
fn pod_rows(rec: &mut ClusterRecord, pods: Vec<Collected<PodTimeline>>, own: &(String, String)) {
    let (own_proxy, own_run) = own;
    for p in pods {
        for c in p.data.changes {
            let role = if c.pod.starts_with(own_proxy.as_str()) {
                "proxy"
            } else if c.pod.starts_with("backend-") && c.pod.contains(own_run.as_str()) {
                "backend"
            } else {
                "watched"
            };
            rec.pods.push(model::PodChange {
                t_s: c.t_s,
                pod: c.pod,
                role: role.into(),
                phase: if c.gone { "Deleted".into() } else { c.phase },
                ready: c.ready,
                terminating: c.deleting,
            });
        }
        for r in p.data.restarts {
            rec.restarts.push(model::RestartRecord {
                t_s: r.t_s,
                pod: r.pod,
                container: r.container,
                count: r.restarts.max(0) as u32,
                reason: r.reason.unwrap_or_default(),
                added: Some(r.added.max(0) as u32),
            });
        }
    }
}

/// A Prometheus scrape's samples as the record keeps them, labels as `k="v"` joined by commas.
fn scrape_rows(scrapes: Vec<Scrape>) -> Vec<model::ScrapeSample> {
    let mut rows = Vec::new();
    for s in scrapes {
        for x in s.samples {
            let labels = x
                .labels
                .iter()
                .map(|(k, v)| format!("{k}={v:?}"))
                .collect::<Vec<_>>()
                .join(",");
            rows.push(model::ScrapeSample {
                t_s: s.t_s,
                namespace: s.namespace.clone(),
                pod: s.pod.clone(),
                metric: x.metric,
                labels,
                value: x.value,
                kind: x.kind,
            });
        }
    }
    rows
}

/// The record's times moved from the stage's clock to the case's (`shift` seconds later),
/// pods, restarts and warnings in time order.
fn on_case_clock(rec: &mut ClusterRecord, shift: f64) {
    rec.pods.iter_mut().for_each(|p| p.t_s -= shift);
    rec.restarts.iter_mut().for_each(|r| r.t_s -= shift);
    rec.warnings.iter_mut().for_each(|w| w.t_s -= shift);
    rec.metrics.iter_mut().for_each(|m| m.t_s -= shift);
    rec.scrapes.iter_mut().for_each(|s| s.t_s -= shift);
    rec.pods.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    rec.restarts.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    rec.warnings.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s::collect::{NodeReads, ProbeTally};

    fn tally(pod: &str, node: &str, ok: u64, failed: u64) -> ProbeTally {
        ProbeTally {
            t_s: 1.0,
            pod: pod.into(),
            node: node.into(),
            successes: ok,
            failures: failed,
            unknown: 0,
            mean_success_s: Some(0.002),
        }
    }

    /// One node's kubelet read whole, the other's last read failed: the sentence says the
    /// counts are partial, on how many nodes, naming the node and why, never "the proxy pods'
    /// readiness probes: N succeeded" as if they were the totals.
    #[test]
    fn counts_from_some_nodes_are_said_to_be_partial() {
        let mut p = Collected::<ProbeCounts>::default();
        p.data.tallies = vec![
            tally("proxy-a", "proxybench", 20, 0),
            tally("proxy-b", "proxybench-2", 3, 0),
        ];
        p.data.nodes.insert(
            "proxybench".into(),
            NodeReads {
                ok: 20,
                failed: 0,
                last_error: None,
            },
        );
        let whole = probe_note(&p);
        assert!(
            whole.starts_with("The kubelets counted the proxy pods' readiness probes")
                && whole.contains("23 succeeded"),
            "{whole}"
        );
        p.data.nodes.insert(
            "proxybench-2".into(),
            NodeReads {
                ok: 3,
                failed: 17,
                last_error: Some(
                    "read /api/v1/nodes/proxybench-2/proxy/metrics/probes: no answer after 5s"
                        .into(),
                ),
            },
        );
        let note = probe_note(&p);
        assert!(
            note.starts_with(
                "The proxy pods' readiness probes were counted in part: on 1 of 2 nodes; \
                 proxybench-2: read /api/v1/nodes/proxybench-2/proxy/metrics/probes: no answer \
                 after 5s (its pods counted up to its last good read only)."
            ),
            "{note}"
        );
        assert!(
            note.contains("partial, not the proxy pods' totals): 23 succeeded"),
            "{note}"
        );
        assert!(!note.contains("The kubelets counted"), "{note}");
        // Nothing counted at all: not counted, with the node's reason.
        let mut none = Collected::<ProbeCounts>::default();
        none.data.nodes.insert(
            "proxybench-2".into(),
            NodeReads {
                ok: 0,
                failed: 4,
                last_error: Some("forbidden".into()),
            },
        );
        assert_eq!(
            probe_note(&none),
            "The proxy pods' readiness probes were not counted: forbidden."
        );
    }

    fn followed(
        dir: &std::path::Path,
        pod: &str,
        text: Option<&str>,
        error: Option<&str>,
    ) -> k8s::FollowedLog {
        let path = dir.join(format!("{pod}_c.log"));
        if let Some(t) = text {
            std::fs::write(&path, t).unwrap();
        }
        k8s::FollowedLog {
            pod: pod.into(),
            uid: format!("uid-{pod}"),
            container: "c".into(),
            path,
            lines: text.map_or(0, |t| t.lines().count() as u64),
            first_t_s: None,
            last_t_s: None,
            complete: error.is_none(),
            error: error.map(str::to_string),
        }
    }

    /// A proxy pod's log whose follower failed is split as the others (what was read is kept)
    /// and named as short, with why: the case's logs are partial, not a teardown footnote.
    #[test]
    fn a_log_read_in_part_is_named_as_short() {
        let dir = tempfile::tempdir().unwrap();
        let line = r#"{"time":"t","status":200,"request_time":0.001}"#;
        let logs_in = vec![
            followed(dir.path(), "proxy-a", Some(line), None),
            followed(
                dir.path(),
                "proxy-b",
                Some(line),
                Some("the final read did not end within 30s"),
            ),
        ];
        let (mut logs, mut short, mut err) = (Vec::new(), Vec::new(), None);
        split_followed(
            logs_in,
            proxy::logs::LogFormat::NginxJson,
            dir.path(),
            &mut logs,
            &mut short,
            &mut err,
        );
        assert_eq!(logs.len(), 2);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(
            short,
            [(
                "proxy-b".to_string(),
                "container c: the final read did not end within 30s".to_string()
            )]
        );
    }

    /// A watched log that could not be read, or whose follower failed, is never counted as a
    /// whole log with no error in it: its row says it is incomplete (the check is then not
    /// measurable).
    #[test]
    fn a_failed_log_read_is_never_zero_errors() {
        let dir = tempfile::tempdir().unwrap();
        let ns = dir.path().join("gw");
        std::fs::create_dir_all(&ns).unwrap();
        let rows = log_levels(&[
            followed(
                &ns,
                "ctl-a",
                Some("{\"level\":\"error\",\"msg\":\"x\"}\n"),
                None,
            ),
            followed(&ns, "ctl-b", None, None),
            followed(
                &ns,
                "ctl-c",
                Some("{\"level\":\"info\",\"msg\":\"y\"}\n"),
                Some("reading ctl-c/c: reset"),
            ),
        ]);
        assert_eq!(rows[0].incomplete, None);
        assert_eq!((rows[0].errors, rows[0].pod.as_str()), (1, "gw/ctl-a"));
        assert!(
            rows[1]
                .incomplete
                .as_deref()
                .unwrap()
                .starts_with("not read: "),
            "{:?}",
            rows[1]
        );
        assert_eq!(
            rows[2].incomplete.as_deref(),
            Some("reading ctl-c/c: reset")
        );
        let case = model::CaseResult {
            cluster: Some(model::ClusterRecord {
                log_levels: rows,
                ..Default::default()
            }),
            ..Default::default()
        };
        let s = case.shortfall(model::Collector::LogLevels).unwrap();
        assert_eq!(s.coverage(), "1 of 3 logs");
        assert!(case.incomplete(model::Collector::LogLevels).is_some());
    }
}
