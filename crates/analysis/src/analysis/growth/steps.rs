//! A growth as the records tell it: one [`Step`] per config generation the `grow` action made,
//! joined from the case's grow events, reloads and time-to-ready records, plus the small
//! statistics the scale tables need (nearest-rank percentiles, quarters, the proxy's samples).

use model::{CaseResult, ProcSample, ReadyRecord};
use scenario::{Action, Case, GrowSpec, GrowWhat};

/// One step of a growth: a new config generation with `count` items.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Seconds from the case origin when the step started (render, the proxy's config check,
    /// reload).
    pub t_s: f64,
    /// Seconds from the case origin when the step ended (reloads done, item ready or given up).
    pub end_s: f64,
    /// Items the config holds (or would have held) after the step.
    pub count: u32,
    /// Why the step failed: the proxy's own message when it refused the config.
    pub error: Option<String>,
    /// From the step's start to the first reload signal: rendering, writing and the config check.
    pub pre_ms: Option<f64>,
    /// The proxy's config check (`nginx -t`, `haproxy -c`...), mean over the replicas.
    pub validate_ms: Option<f64>,
    /// SIGHUP to the new config answering, slowest replica.
    pub served_ms: Option<f64>,
    /// SIGHUP to the last old worker gone, slowest replica.
    pub old_gone_ms: Option<f64>,
    /// Reload records of the step (one per replica).
    pub reloads: usize,
    /// Reload records that carry an error.
    pub reload_errors: usize,
    /// Whether the newest item was probed (everything but upstream servers).
    pub probed: bool,
    /// Time to ready of the newest item.
    pub ttr_ms: Option<f64>,
    /// Why the newest item never became ready.
    pub ready_error: Option<String>,
}

impl Step {
    /// True when the proxy took the step's config (every replica reloaded without error).
    pub fn ok(&self) -> bool {
        self.error.is_none()
    }
}

/// The growth of one case: what was asked for and every step taken.
#[derive(Debug, Clone)]
pub struct Growth<'a> {
    /// The action as written.
    pub spec: &'a GrowSpec,
    /// Items the config held before the first step.
    pub initial: u32,
    /// Steps needed to go from `initial` to `spec.to`.
    pub planned: u32,
    /// The reloads each step runs: one per proxy replica; for a templated growth on a gateway
    /// the run did not deploy, one when `[proxy.external] reload` names a command (run once a
    /// step), none when the gateway's own controller reloads it.
    pub replicas: u32,
    /// The steps taken, in order.
    pub steps: Vec<Step>,
    /// Whether the reloads timed the proxy's config check (not on Kubernetes, where it runs
    /// inside the pod's reload command and every record says 0).
    pub check_timed: bool,
}

impl<'a> Growth<'a> {
    /// The case's first growth and its steps; `None` when the case grows nothing.
    pub fn of(case: &'a Case, result: &CaseResult) -> Option<Growth<'a>> {
        let spec = case.steps.iter().find_map(|s| match &s.action {
            Action::Grow(g) => Some(g),
            _ => None,
        })?;
        let initial = initial_count(case, spec);
        let planned = if spec.to > initial {
            (spec.to - initial).div_ceil(spec.by.max(1))
        } else {
            0
        };
        let check_timed =
            result.cluster.is_none() || result.reloads.iter().any(|r| r.validate_ms > 0.0);
        let mut steps = Vec::new();
        let mut n = initial;
        for ev in result.events.iter().filter(|e| e.action == "grow") {
            let end_s = ev.t_s + ev.duration_ms / 1e3;
            let rel: Vec<_> = result
                .reloads
                .iter()
                .filter(|r| r.t_s >= ev.t_s - 1e-9 && r.t_s <= end_s + 1e-9)
                .collect();
            let ready: Option<&ReadyRecord> = result.ready.iter().find(|r| r.t_s == ev.t_s);
            let count = ready.map_or((n + spec.by).min(spec.to), |r| r.count);
            let ok = ev.error.is_none();
            let served = |f: fn(&model::ReloadRecord) -> Option<f64>| {
                let v: Vec<f64> = rel.iter().filter_map(|r| f(r)).collect();
                (ok && v.len() == rel.len() && !v.is_empty())
                    .then(|| v.iter().copied().fold(f64::MIN, f64::max))
            };
            steps.push(Step {
                t_s: ev.t_s,
                end_s,
                count,
                error: ev.error.clone(),
                pre_ms: rel.first().filter(|_| ok).map(|r| (r.t_s - ev.t_s) * 1e3),
                validate_ms: (ok && !rel.is_empty() && check_timed)
                    .then(|| rel.iter().map(|r| r.validate_ms).sum::<f64>() / rel.len() as f64),
                served_ms: served(|r| r.served_ms),
                old_gone_ms: served(|r| r.old_workers_exited_ms),
                reloads: rel.len(),
                reload_errors: rel.iter().filter(|r| r.error.is_some()).count(),
                probed: ready.is_some(),
                ttr_ms: ready.and_then(|r| r.ready_ms),
                ready_error: ready.and_then(|r| r.error.clone()),
            });
            if ok {
                n = count;
            }
        }
        Some(Growth {
            spec,
            initial,
            planned,
            replicas: match case.proxy.as_ref() {
                Some(p) if p.external.is_some() => {
                    u32::from(p.external.as_ref().is_some_and(|e| !e.reload.is_empty()))
                }
                _ => case.proxy.as_ref().map_or(1, |p| p.replicas),
            },
            steps,
            check_timed,
        })
    }

    /// Whether the growth is of a gateway proxybench does not run (a template, a built-in
    /// generator, or upstream servers behind it): each step runs its reload command once, or
    /// none when its controller follows the change.
    pub fn external(&self) -> bool {
        self.spec.template.is_some() || self.spec.backend.is_some()
    }

    /// Items the config held after the last step the proxy took.
    pub fn reached(&self) -> u32 {
        self.steps
            .iter()
            .rev()
            .find(|s| s.ok())
            .map_or(self.initial, |s| s.count)
    }

    /// True when the growth got all the way to `to`.
    pub fn finished(&self) -> bool {
        self.reached() >= self.spec.to
    }

    /// The step the proxy refused (a reload error), which stopped the growth: the limit hit.
    pub fn limit(&self) -> Option<&Step> {
        self.steps.iter().find(|s| s.reload_errors > 0)
    }

    /// The first step that failed before any reload (proxybench could not build it).
    pub fn broken(&self) -> Option<&Step> {
        self.steps.iter().find(|s| !s.ok() && s.reloads == 0)
    }

    /// When the first step started and the last ended.
    pub fn span(&self) -> Option<(f64, f64)> {
        Some((self.steps.first()?.t_s, self.steps.last()?.end_s))
    }

    /// The steps the proxy took, in order.
    pub fn ok_steps(&self) -> Vec<&Step> {
        self.steps.iter().filter(|s| s.ok()).collect()
    }

    /// What grows, as people say it (`HTTPS listeners`).
    pub fn noun(&self) -> &'static str {
        match self.spec.what {
            GrowWhat::Listeners => "listeners",
            GrowWhat::HttpsListeners => "HTTPS listeners",
            GrowWhat::Routes => "routes",
            GrowWhat::GrpcRoutes => "GRPCRoutes",
            GrowWhat::Matches => "header matches",
            GrowWhat::UpstreamServers => "upstream servers",
        }
    }
}

/// How many of what `g` grows the case's config holds at the start (the runner counts the same).
fn initial_count(case: &Case, g: &GrowSpec) -> u32 {
    let Some(p) = &case.proxy else { return 0 };
    // A template's items are numbered from 0: the growth starts from none.
    if g.template.is_some() {
        return 0;
    }
    // Upstream servers behind an external gateway: the backend group's pods.
    if let (GrowWhat::UpstreamServers, Some(b)) = (g.what, &g.backend) {
        return case
            .backends
            .iter()
            .find(|x| &x.name == b)
            .map_or(0, |x| x.count);
    }
    let n = match g.what {
        GrowWhat::Listeners => p.listeners.iter().filter(|l| !l.tls).count(),
        GrowWhat::HttpsListeners => p.listeners.iter().filter(|l| l.tls).count(),
        GrowWhat::Routes => p.routes.len(),
        // Only through an external gateway, from a generator: counted from 0 above.
        GrowWhat::GrpcRoutes => 0,
        GrowWhat::Matches => p
            .routes
            .iter()
            .filter(|r| r.path == g.path && r.headers.contains_key(&g.header))
            .count(),
        GrowWhat::UpstreamServers => {
            let up = match &g.upstream {
                Some(u) => p.upstream(u),
                None => p.upstreams.first(),
            };
            up.and_then(|u| case.backends.iter().find(|b| b.name == u.backends))
                .map_or(0, |b| b.count as usize)
        }
    };
    n as u32
}

/// Mean, p50, p99 and max of `v` (nearest rank); `None` when empty.
pub fn summary(v: &[f64]) -> Option<(f64, f64, f64, f64)> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let mean = s.iter().sum::<f64>() / s.len() as f64;
    Some((mean, rank(&s, 50.0), rank(&s, 99.0), s[s.len() - 1]))
}

/// Nearest-rank percentile of sorted values.
fn rank(sorted: &[f64], p: f64) -> f64 {
    let k = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[k.clamp(1, sorted.len()) - 1]
}

/// `items` split into at most four contiguous, nearly equal parts, in order.
pub fn quarters<T: Copy>(items: &[T]) -> Vec<Vec<T>> {
    let parts = items.len().min(4);
    (0..parts)
        .map(|i| items[i * items.len() / parts..(i + 1) * items.len() / parts].to_vec())
        .collect()
}

/// One round of the proxy's samples: every replica's CPU and memory summed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProxySample {
    /// Seconds from the case origin.
    pub t_s: f64,
    /// CPU since the previous round, % of one core, all replicas.
    pub cpu_pct: f64,
    /// Resident memory of masters and workers, bytes.
    pub rss: u64,
}

/// The proxy's samples of a case: its replicas' /proc samples ([`proxy_samples`]); on
/// Kubernetes, where there are none, the metrics API's samples of the proxy pods
/// ([`pod_samples`]).
pub fn case_samples(r: &CaseResult, kind: &str) -> Vec<ProxySample> {
    let local = proxy_samples(&r.proc_samples, kind);
    if !local.is_empty() {
        return local;
    }
    match (&r.cluster, r.gap(model::Collector::MetricsApi)) {
        (Some(k), None) => pod_samples(k),
        _ => Vec::new(),
    }
}

/// The proxy pods' samples from the metrics API (pods `proxy-...`), summed over pods per round:
/// CPU in % of a core, the working set as the memory.
pub fn pod_samples(k: &model::ClusterRecord) -> Vec<ProxySample> {
    let mut out: Vec<ProxySample> = Vec::new();
    for m in k.metrics.iter().filter(|m| m.pod.starts_with("proxy-")) {
        let cpu_pct = m.cpu_millicores / 10.0;
        match out.last_mut() {
            Some(last) if last.t_s == m.t_s => {
                last.cpu_pct += cpu_pct;
                last.rss += m.memory_bytes;
            }
            _ => out.push(ProxySample {
                t_s: m.t_s,
                cpu_pct,
                rss: m.memory_bytes,
            }),
        }
    }
    out
}

/// The samples of the replicas of kind `kind` (groups `KIND-0`, `KIND-1`...), summed over
/// replicas per round (a round shares one timestamp).
pub fn proxy_samples(samples: &[ProcSample], kind: &str) -> Vec<ProxySample> {
    let prefix = format!("{kind}-");
    let mut out: Vec<ProxySample> = Vec::new();
    for s in samples.iter().filter(|s| s.group.starts_with(&prefix)) {
        match out.last_mut() {
            Some(last) if last.t_s == s.t_s => {
                last.cpu_pct += s.cpu_pct;
                last.rss += s.rss_bytes;
            }
            _ => out.push(ProxySample {
                t_s: s.t_s,
                cpu_pct: s.cpu_pct,
                rss: s.rss_bytes,
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_summary() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(summary(&v), Some((50.5, 50.0, 99.0, 100.0)));
        assert_eq!(summary(&[7.0]), Some((7.0, 7.0, 7.0, 7.0)));
        assert_eq!(summary(&[]), None);
    }

    #[test]
    fn quarters_cover_everything_in_order() {
        let v: Vec<u32> = (0..10).collect();
        let q = quarters(&v);
        assert_eq!(q.len(), 4);
        assert_eq!(q.concat(), v);
        assert_eq!(quarters(&[1, 2]), vec![vec![1], vec![2]]);
    }

    #[test]
    fn replica_rounds_sum_replicas() {
        let s = |t: f64, g: &str, cpu: f64, rss: u64| ProcSample {
            t_s: t,
            group: g.into(),
            cpu_pct: cpu,
            rss_bytes: rss,
            procs: 2,
        };
        let out = proxy_samples(
            &[
                s(1.0, "haproxy-0", 10.0, 100),
                s(1.0, "haproxy-1", 5.0, 50),
                s(1.0, "load", 99.0, 999),
                s(1.0, "backends", 9.0, 99),
                s(2.0, "haproxy-0", 1.0, 120),
            ],
            "haproxy",
        );
        assert_eq!(out.len(), 2);
        assert_eq!((out[0].cpu_pct, out[0].rss), (15.0, 150));
        assert_eq!((out[1].cpu_pct, out[1].rss), (1.0, 120));
    }

    #[test]
    fn on_kubernetes_the_proxy_pods_metrics_stand_in() {
        let m = |t: f64, pod: &str, mc: f64, mem: u64| model::PodMetric {
            t_s: t,
            pod: pod.into(),
            cpu_millicores: mc,
            memory_bytes: mem,
        };
        let r = CaseResult {
            cluster: Some(model::ClusterRecord {
                metrics: vec![
                    m(1.0, "proxy-6d8-a", 120.0, 10 << 20),
                    m(1.0, "proxy-6d8-b", 30.0, 5 << 20),
                    m(1.0, "backend-cafe-7f-x", 500.0, 99 << 20),
                    m(2.0, "proxy-6d8-a", 10.0, 11 << 20),
                ],
                ..Default::default()
            }),
            ..CaseResult::default()
        };
        let out = case_samples(&r, "nginx");
        assert_eq!(out.len(), 2);
        assert_eq!(
            (out[0].t_s, out[0].cpu_pct, out[0].rss),
            (1.0, 15.0, 15 << 20)
        );
        assert_eq!((out[1].cpu_pct, out[1].rss), (1.0, 11 << 20));
        assert!(case_samples(&CaseResult::default(), "nginx").is_empty());
    }
}
