//! Where each check's metric is read in a case's results: its loads, streams, backends, proxy,
//! cluster and reloads, or why it cannot be (a [`Gap`]).

use super::*;

fn loads<'a>(subject: &str, case: &'a CaseResult) -> Result<Vec<&'a LoadSummary>, CheckError> {
    if subject == "all" {
        if case.loads.is_empty() {
            return Err("no load ran".into());
        }
        return Ok(case.loads.iter().collect());
    }
    case.loads
        .iter()
        .find(|l| l.name == subject)
        .map(|l| vec![l])
        .ok_or_else(|| CheckError(format!("load '{subject}' did not run")))
}

pub(super) fn metric_value(subject: &str, metric: &str, case: &CaseResult) -> Result<f64, Gap> {
    match subject {
        "backends" => backend_metric(metric, case),
        s if is_proxy(s) => proxy_metric(metric, case),
        "reloads" => reload_metric(metric, case),
        CLUSTER_SUBJECT => cluster_metric(metric, case),
        _ if is_stream_metric(subject, metric, case) => stream_metric(subject, metric, case),
        _ => Ok(load_metric(&loads(subject, case)?, metric)?),
    }
}

/// Whether `subject.metric` reads a long-lived load: the subject is one, or the metric is only
/// theirs (`all.dropped`).
fn is_stream_metric(subject: &str, metric: &str, case: &CaseResult) -> bool {
    let stream_only = metric::stream_metric_kind(metric).is_some()
        && metric::load_metric_kind(metric, None).is_err();
    stream_only || case.streams.iter().any(|s| s.name == subject)
}

/// Whether a metric of a long-lived load reads which ends the server announced: the
/// connections' lives, not only their counts.
fn reads_lives(metric: &str) -> bool {
    metric.starts_with("dropped_") || metric.starts_with("reload_to_drop_")
}

/// Whether a metric of a long-lived load places each drop on its cause: the lives, the
/// proxy's generations (when the case reloaded), and the backends' counters on this clock.
fn reads_causes(metric: &str) -> bool {
    matches!(
        metric,
        "dropped_by_reload" | "dropped_by_backend" | "dropped_unattributed"
    ) || metric.starts_with("reload_to_drop_")
}

/// A long-lived load's metric (`ws.dropped`, `grpc.streams_failed`), or of every long-lived
/// load summed (`all.dropped`). Counts come from the loads' summaries (exact); the split of the
/// drops by what the server said and by cause from the case's ledger, which needs every
/// connection's life, and, to place a drop on a cause, the proxy's generations and the
/// backends' counters: a check passes only when all of it is complete.
fn stream_metric(subject: &str, metric: &str, case: &CaseResult) -> Result<f64, Gap> {
    let loads: Vec<&model::stream::StreamSummary> = if subject == "all" {
        case.streams.iter().collect()
    } else {
        case.streams.iter().filter(|s| s.name == subject).collect()
    };
    if loads.is_empty() {
        return Err(if subject == "all" {
            "no long-lived load ran".into()
        } else {
            format!("long-lived load '{subject}' did not run").into()
        });
    }
    let sum = |f: &dyn Fn(&model::stream::StreamSummary) -> u64| {
        loads.iter().map(|l| f(l)).sum::<u64>() as f64
    };
    if metric == "attempts" {
        return Ok(sum(&|l| l.attempts));
    }
    if sum(&|l| l.attempts) == 0.0 {
        return Err("no connection was attempted".into());
    }
    let ended =
        |l: &model::stream::StreamSummary, k: EndKind| l.ended.get(&k).copied().unwrap_or(0);
    match metric {
        "opened" => return Ok(sum(&|l| l.opened)),
        "reconnects" => return Ok(sum(&|l| l.reconnects)),
        "refused" => return Ok(sum(&|l| ended(l, EndKind::Refused))),
        "connect_failed" => return Ok(sum(&|l| ended(l, EndKind::ConnectFailed))),
        "dropped" => return Ok(sum(&|l| l.dropped)),
        "messages_lost" => return Ok(sum(&|l| l.messages.lost)),
        "streams_failed" => {
            if let Some(l) = loads.iter().find(|l| !l.protocol.is_grpc()) {
                return Err(format!(
                    "'{}' is a {} load: streams_failed counts gRPC calls",
                    l.name,
                    l.protocol.name()
                )
                .into());
            }
            return Ok(sum(&streams_failed));
        }
        _ => {}
    }
    if !reads_lives(metric) {
        return Err(format!("'{metric}' is not a long-lived load's metric").into());
    }
    evidence(case, Collector::StreamLives, |why| {
        Gap::NoData(CheckError(why))
    })?;
    if reads_causes(metric) {
        if !case.reloads.is_empty() {
            evidence(case, Collector::Generations, |why| {
                Gap::NotMeasurable(format!(
                    "the proxy's processes by generation were not sampled ({why}), so a drop \
                     cannot be placed on a reload's old generation"
                ))
            })?;
        }
        evidence(case, Collector::BackendCounters, |why| {
            Gap::NotMeasurable(format!("the backends' counters were not read ({why})"))
        })?;
        if case.monotonic_origin_ns.is_none() {
            return Err(Gap::NotMeasurable(
                "the backends ran on another machine's clock, so their connections' ends \
                 cannot be set beside the loads'"
                    .into(),
            ));
        }
    }
    let ledger = case
        .stream_ledger
        .as_ref()
        .ok_or_else(|| Gap::from("the long-lived connections' ledger was not computed"))?;
    let books: Vec<&model::ledger::LoadLedger> =
        loads.iter().filter_map(|l| ledger.load(&l.name)).collect();
    if books.len() != loads.len() {
        return Err("a long-lived load has no ledger".into());
    }
    if let Some(why) = books.iter().find_map(|b| b.incomplete.as_ref()) {
        return Err(Gap::Partial(why.clone()));
    }
    let total = |f: &dyn Fn(&model::ledger::LoadLedger) -> u64| {
        books.iter().map(|b| f(b)).sum::<u64>() as f64
    };
    Ok(match metric {
        "dropped_with_close" => total(&|b| b.with_close),
        "dropped_without_close" => total(&|b| b.without_close),
        "dropped_by_reload" => total(&|b| b.by_reload),
        "dropped_by_backend" => total(&|b| b.by_backend + b.by_backend_action),
        "dropped_unattributed" => total(&|b| b.unattributed),
        "reload_to_drop_p50" | "reload_to_drop_max" => {
            let s = &books[0].reload_to_drop;
            let v = if metric.ends_with("p50") {
                s.p50_s
            } else {
                s.max_s
            };
            v.map(|s| s * 1e6)
                .ok_or_else(|| Gap::from("no drop was attributed to a reload"))?
        }
        other => return Err(format!("'{other}' is not a long-lived load's metric").into()),
    })
}

/// gRPC calls of a load that did not end OK: with a `grpc-status` other than OK, cut without
/// one, refused, or never connected. A streaming load's lives are its calls; a unary load's
/// calls are its messages (those lost with their connection count too).
fn streams_failed(l: &model::stream::StreamSummary) -> u64 {
    let not_ok: u64 = l
        .grpc_status
        .iter()
        .filter(|(k, _)| **k != 0)
        .map(|(_, n)| n)
        .sum();
    let ended = |k: EndKind| l.ended.get(&k).copied().unwrap_or(0);
    match l.protocol {
        model::stream::StreamProtocol::GrpcStream => {
            let all: u64 = l
                .ended
                .iter()
                .filter(|(k, _)| **k != EndKind::Client)
                .map(|(_, n)| n)
                .sum();
            all - l.grpc_status.get(&0).copied().unwrap_or(0).min(all)
        }
        _ => {
            not_ok
                + l.messages.lost
                + ended(EndKind::Refused)
                + ended(EndKind::ConnectFailed)
                + ended(EndKind::Protocol)
        }
    }
}

/// The collector a `cluster.*` metric reads.
fn cluster_collector(metric: &str) -> Collector {
    match metric {
        "restarts" => Collector::Restarts,
        "warnings" => Collector::Events,
        "log_errors" | "log_warnings" => Collector::LogLevels,
        _ => Collector::PodWatch,
    }
}

/// `cluster.*`: what the cluster showed during the case. Off Kubernetes there is no cluster,
/// and the check says so rather than reading zeros.
fn cluster_metric(metric: &str, case: &CaseResult) -> Result<f64, Gap> {
    let Some(k) = &case.cluster else {
        return Err(Gap::OffPlatform(
            "the case ran on no Kubernetes cluster (cluster.* needs --platform kubernetes)".into(),
        ));
    };
    // A collector that failed gathered nothing: its zero restarts or warnings mean nothing;
    // one that gathered part (a log read in part, lines whose level it cannot read) is no
    // evidence either.
    evidence(case, cluster_collector(metric), |why| {
        Gap::NoData(CheckError(why))
    })?;
    match metric {
        // As the API counts them: the sum of the jumps in each container's restartCount (0 -> 3
        // is 3), and the increase of each Warning event's count within the case (an event seen
        // at counts 1 to 5 is 5; what it counted before the case is not the case's). A record
        // that kept only the counts after each change cannot say either.
        "restarts" => k.restarts_in_case().map(|n| n as f64).ok_or_else(|| {
            Gap::NoData(CheckError(
                "the record keeps each restart's count after it, not the jump (recorded \
                 before the jumps were kept): run the case again"
                    .into(),
            ))
        }),
        "warnings" => k.warnings_in_case().map(|n| n as f64).ok_or_else(|| {
            Gap::NoData(CheckError(
                "the record keeps each Warning event's cumulative count, not its increase \
                 within the case (recorded before it was kept): run the case again"
                    .into(),
            ))
        }),
        // The watched pods' JSON log lines at an error level or worse, and at warn.
        "log_errors" => Ok(k.log_levels.iter().map(|l| l.errors as f64).sum()),
        "log_warnings" => Ok(k
            .log_levels
            .iter()
            .flat_map(|l| &l.levels)
            .filter(|(level, _)| matches!(level.as_str(), "warn" | "warning"))
            .map(|(_, n)| *n as f64)
            .sum()),
        "pods_deleted" => Ok(k
            .pods
            .iter()
            .filter(|p| p.role == "proxy" && p.phase == "Deleted")
            .count() as f64),
        "ready_pods_min" | "ready_pods_max" => {
            let mut ready: std::collections::BTreeMap<&str, bool> = Default::default();
            let (mut min, mut max) = (None::<usize>, 0usize);
            for p in k.pods.iter().filter(|p| p.role == "proxy") {
                ready.insert(&p.pod, p.ready && p.phase != "Deleted");
                let n = ready.values().filter(|r| **r).count();
                max = max.max(n);
                // The fewest counts from the first time a proxy pod was Ready.
                if max > 0 {
                    min = Some(min.map_or(n, |m| m.min(n)));
                }
            }
            if metric == "ready_pods_max" {
                return Ok(max as f64);
            }
            min.map(|m| m as f64)
                .ok_or_else(|| Gap::NoData(CheckError("no proxy pod was ever Ready".to_string())))
        }
        _ => Err(Gap::NoData(CheckError(format!(
            "unknown metric '{metric}'"
        )))),
    }
}

/// A load metric's value, as gates read it too (`model::metric`).
fn load_metric(ls: &[&LoadSummary], m: &str) -> Result<f64, CheckError> {
    Ok(metric::load_metric(ls, m)?)
}

fn backend_metric(metric: &str, case: &CaseResult) -> Result<f64, Gap> {
    evidence(case, Collector::BackendCounters, |why| {
        Gap::NoData(CheckError(why))
    })?;
    let b = &case.backends;
    let total: u64 = b.iter().map(|x| x.requests).sum();
    Ok(match metric {
        "requests" => total as f64,
        "count" => b.len() as f64,
        "spread" => {
            // Largest relative deviation from an even share among backends that were running.
            if total == 0 {
                return Err("no backend served a request".into());
            }
            let even = total as f64 / b.len() as f64;
            b.iter()
                .map(|x| (x.requests as f64 - even).abs() / even)
                .fold(0.0, f64::max)
        }
        m if m.starts_with("status_") => {
            let code = status_code(m)?;
            b.iter()
                .map(|x| x.by_status.get(&code).copied().unwrap_or(0))
                .sum::<u64>() as f64
        }
        other => return Err(format!("'{other}' is not a backends metric").into()),
    })
}

/// The proxy's metrics: `active_max` and `served` from its status page, the rest from its logs.
fn proxy_metric(metric: &str, case: &CaseResult) -> Result<f64, Gap> {
    if matches!(metric, "active_max" | "served") {
        return status_page_metric(metric, case);
    }
    if metric.starts_with("draining_") {
        return draining_metric(metric, case);
    }
    let logs = &case.logs;
    evidence(case, Collector::Logs, |why| {
        Gap::NotMeasurable(format!("the proxy's logs could not be read ({why})"))
    })?;
    let level = |names: &[&str]| {
        names
            .iter()
            .map(|n| logs.error_levels.get(*n).copied().unwrap_or(0))
            .sum::<u64>() as f64
    };
    Ok(match metric {
        "errors" => level(&["error", "crit", "alert", "emerg"]),
        "warns" => level(&["warn"]),
        "access_lines" | "requests" => logs.access_lines as f64,
        m if m.starts_with("status_") => {
            let code = status_code(m)?;
            logs.access_status.get(&code).copied().unwrap_or(0) as f64
        }
        other => return Err(format!("'{other}' is not a proxy metric").into()),
    })
}

/// `draining_generations_max` (the most old generations alive at once, replicas summed) and
/// `draining_rss_max` (the most resident memory they held at once), from the proxy's processes
/// sampled by generation. A proxy that reloads inside one process has no process per
/// generation: not measurable, never zero.
fn draining_metric(metric: &str, case: &CaseResult) -> Result<f64, Gap> {
    evidence(case, Collector::Generations, Gap::NotMeasurable)?;
    let in_place = model::generation::in_place(&case.generations, &case.reloads);
    if !in_place.is_empty() {
        return Err(Gap::NotMeasurable(format!(
            "{} reload(s) inside one process, so its old generations cannot be told apart in \
             /proc",
            in_place.join(", ")
        )));
    }
    let d = model::generation::draining(&case.generations, &case.reloads);
    Ok(match metric {
        "draining_generations_max" => d.iter().map(|p| p.generations).max().unwrap_or(0) as f64,
        _ => d.iter().map(|p| p.rss_bytes).max().unwrap_or(0) as f64,
    })
}

/// `active_max` (the most active client connections one replica's status page reported) and
/// `served` (requests each replica's page counted last, summed).
fn status_page_metric(metric: &str, case: &CaseResult) -> Result<f64, Gap> {
    evidence(case, Collector::StatusPages, Gap::NotMeasurable)?;
    let s = &case.stub_samples;
    Ok(match metric {
        "active_max" => s.iter().map(|x| x.active).max().unwrap_or(0) as f64,
        _ => {
            let mut last: std::collections::BTreeMap<&str, u64> = Default::default();
            for x in s {
                let v = last.entry(&x.replica).or_default();
                *v = (*v).max(x.requests);
            }
            last.values().sum::<u64>() as f64
        }
    })
}

/// `reloads.*`. The timed metrics (`avg_ms`, `max_ms`, `within_*`) read the time until the new
/// generation served, and need it for every reload: a failed reload never served (so
/// `avg_ms`/`max_ms` have no value; `within_*` counts it as not within), and a successful one
/// the target did not time makes the evidence partial. `command_ms` is the slowest reload
/// command, start to exit, of a target reloaded by a command whose serving cannot be seen.
fn reload_metric(metric: &str, case: &CaseResult) -> Result<f64, Gap> {
    let r = &case.reloads;
    if metric == "count" {
        return Ok(r.len() as f64);
    }
    if r.is_empty() {
        return Err("no reload happened".into());
    }
    if metric == "errors" {
        return Ok(r.iter().filter(|x| x.error.is_some()).count() as f64);
    }
    let ok: Vec<&model::ReloadRecord> = r.iter().filter(|x| x.error.is_none()).collect();
    if metric == "command_ms" {
        let timed: Vec<f64> = ok.iter().filter_map(|x| x.command_ms).collect();
        if timed.is_empty() {
            return Err(if ok.is_empty() {
                "every reload failed".into()
            } else {
                Gap::NotMeasurable("its reloads are not run by a command of the user's".into())
            });
        }
        return Ok(timed.into_iter().fold(0.0, f64::max));
    }
    if !matches!(
        metric,
        "avg_ms" | "max_ms" | "within_500ms" | "within_1000ms"
    ) {
        return Err(format!("'{metric}' is not a reloads metric").into());
    }
    let untimed: Vec<&&model::ReloadRecord> = ok.iter().filter(|x| x.served_ms.is_none()).collect();
    if !ok.is_empty() && untimed.len() == ok.len() {
        let why = if ok.iter().any(|x| x.command_ms.is_some()) {
            "its reloads report no time at which the new generation served, only their \
             command's exit (reloads.command_ms)"
        } else {
            "its reloads report no time at which the new generation served"
        };
        return Err(Gap::NotMeasurable(why.into()));
    }
    if !untimed.is_empty() {
        let names: Vec<String> = untimed
            .iter()
            .map(|x| format!("{} generation {}", x.replica, x.generation))
            .collect();
        return Err(Gap::Partial(format!(
            "{} of {} successful reloads report no time at which the new generation served \
             ({})",
            untimed.len(),
            ok.len(),
            names.join(", ")
        )));
    }
    let served: Vec<f64> = ok.iter().filter_map(|x| x.served_ms).collect();
    let failed = r.len() - ok.len();
    let share = |limit: f64| served.iter().filter(|&&v| v <= limit).count() as f64 / r.len() as f64;
    Ok(match metric {
        "avg_ms" | "max_ms" if failed > 0 => {
            return Err(format!(
                "{failed} of {} reloads failed and never served (reloads.errors)",
                r.len()
            )
            .into());
        }
        "avg_ms" => served.iter().sum::<f64>() / served.len() as f64,
        "max_ms" => served.iter().copied().fold(0.0, f64::max),
        "within_500ms" => share(500.0),
        _ => share(1000.0),
    })
}
