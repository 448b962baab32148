//! What `/metrics` serves: per load, the counts of the engine's timeline rows added up as each
//! second completes, the gauges of the last second and the latency histogram in the fixed
//! buckets; per case (on `run`), the steps and the reloads. Every update takes one lock once a
//! second per load, or once per step; rendering takes it for the length of one scrape.

use crate::text::{self, family, sample};
use crate::{BUCKETS_S, BUCKETS_US};
use hdrhistogram::Histogram;
use model::{ErrorKind, Event, ReloadRecord, Second, SecondHdr};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Who serves the metrics: labels every series of the process carries.
#[derive(Debug, Clone, Default)]
pub struct Info {
    /// The subcommand (`run`, `load`, `agent`), on `proxybench_build_info`.
    pub command: String,
    /// The scenario a `run` plays, on `proxybench_build_info`.
    pub scenario: Option<String>,
    /// The `agent` label every load series of an agent carries (its host name and port), so
    /// Prometheus can tell agents apart and add them up.
    pub agent: Option<String>,
}

/// The live state behind `/metrics`, shared by the feeds and the server.
#[derive(Debug)]
pub struct Registry {
    info: Info,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    loads: BTreeMap<LoadKey, LoadState>,
    cases: BTreeMap<CaseKey, CaseState>,
    /// Histograms that did not decode (never expected: the engine encoded them).
    decode_errors: u64,
    /// The run is over: what is served now is final.
    finished: bool,
    /// A scrape rendered the final values.
    final_served: bool,
}

/// Where a load or a case sits in a `run`: the proxy kind it ran as (when the command line
/// chose one: `--proxy KIND`, or each kind of a comparison) and its case.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Scope {
    /// The `proxy` label.
    pub proxy: Option<String>,
    /// The `case` label.
    pub case: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct LoadKey {
    scope: Scope,
    load: String,
}

type CaseKey = Scope;

#[derive(Debug, Default)]
struct LoadState {
    running: bool,
    requests: u64,
    responses: [u64; 5],
    failures: [u64; ErrorKind::ALL.len()],
    sent: u64,
    retried: u64,
    bytes: u64,
    in_flight: u64,
    target_rate: Option<f64>,
    achieved_rate: f64,
    /// Non-cumulative counts per bucket of [`BUCKETS_US`], the last one above every bound.
    buckets: [u64; BUCKETS_US.len() + 1],
    latency_count: u64,
    latency_sum_us: u64,
    seconds: u64,
}

#[derive(Debug, Default)]
struct CaseState {
    running: bool,
    steps: u64,
    origin_unix_s: f64,
    /// The latest step started: (its number from 1, its action kind).
    current: Option<(u64, String)>,
    action_running: bool,
    actions: BTreeMap<String, u64>,
    action_errors: BTreeMap<String, u64>,
    reloads: u64,
    reload_errors: u64,
    reloads_untimed: u64,
    reload_buckets: [u64; BUCKETS_US.len() + 1],
    reload_count: u64,
    reload_sum_s: f64,
    last_reload_s: Option<f64>,
    last_reload_at_unix_s: Option<f64>,
}

impl Registry {
    /// An empty registry for one process.
    pub fn new(info: Info) -> Arc<Registry> {
        Arc::new(Registry {
            info,
            state: Mutex::new(State::default()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a load (its series appear at once, at zero, so rates start from its start) and
    /// returns the feed its seconds go to. `scope` places it in a `run` (empty otherwise);
    /// `target_rate` is the open-loop rate. A load registered again (an agent's next job) keeps
    /// counting on.
    pub fn load(
        self: &Arc<Registry>,
        scope: &Scope,
        load: &str,
        target_rate: Option<f64>,
    ) -> LoadFeed {
        let key = LoadKey {
            scope: scope.clone(),
            load: load.to_string(),
        };
        let mut st = self.lock();
        let l = st.loads.entry(key.clone()).or_default();
        l.running = true;
        l.target_rate = target_rate;
        l.achieved_rate = 0.0;
        l.in_flight = 0;
        LoadFeed {
            registry: self.clone(),
            key,
        }
    }

    /// Registers a case (`scope` names it) of `steps` planned steps whose origin (its `t = 0`)
    /// was at `origin_unix_s` on the wall clock.
    pub fn case(self: &Arc<Registry>, scope: &Scope, steps: usize, origin_unix_s: f64) -> CaseFeed {
        let mut st = self.lock();
        let c = st.cases.entry(scope.clone()).or_default();
        c.running = true;
        c.steps = steps as u64;
        c.origin_unix_s = origin_unix_s;
        CaseFeed {
            registry: self.clone(),
            case: scope.clone(),
        }
    }

    /// The run is over: every value is final. [`Registry::final_served`] turns true once a
    /// scrape has read them.
    pub fn finish(&self) {
        let mut st = self.lock();
        st.finished = true;
        for l in st.loads.values_mut() {
            l.running = false;
            l.achieved_rate = 0.0;
        }
        for c in st.cases.values_mut() {
            c.running = false;
            c.action_running = false;
        }
    }

    /// True once a scrape rendered the values after [`Registry::finish`].
    pub fn final_served(&self) -> bool {
        self.lock().final_served
    }

    /// The OpenMetrics text exposition of everything, ending in `# EOF`.
    pub fn render(&self) -> String {
        let mut st = self.lock();
        let out = render(&self.info, &st);
        if st.finished {
            st.final_served = true;
        }
        out
    }
}

/// Where one load's seconds go.
#[derive(Debug, Clone)]
pub struct LoadFeed {
    registry: Arc<Registry>,
    key: LoadKey,
}

impl LoadFeed {
    /// Adds one completed second: its row (all threads, or all agents, merged) and its latency
    /// histogram, whose counts are spread over the fixed buckets. Called from the engine's
    /// aggregating thread, once a second.
    pub fn second(&self, row: &Second, hdr: &SecondHdr) {
        let hist = decode(&hdr.hdr);
        let mut st = self.registry.lock();
        if hist.is_none() {
            st.decode_errors += 1;
        }
        let l = st.loads.entry(self.key.clone()).or_default();
        l.requests += row.requests;
        for (a, b) in l.responses.iter_mut().zip(row.status_class) {
            *a += b;
        }
        for (i, k) in ErrorKind::ALL.iter().enumerate() {
            l.failures[i] += row.errors.get(k).copied().unwrap_or(0);
        }
        l.sent += row.sent;
        l.retried += row.retried;
        l.bytes += row.bytes;
        l.in_flight = row.in_flight;
        l.achieved_rate = row.sent as f64;
        l.latency_sum_us += row.latency_sum_us;
        l.seconds += 1;
        if let Some(h) = hist {
            for v in h.iter_recorded() {
                let n = v.count_at_value();
                l.buckets[bucket_of(v.value_iterated_to())] += n;
                l.latency_count += n;
            }
        }
    }

    /// The load has ended (its last second is in): it stops counting as running.
    pub fn end(&self) {
        let mut st = self.registry.lock();
        if let Some(l) = st.loads.get_mut(&self.key) {
            l.running = false;
            l.achieved_rate = 0.0;
        }
    }
}

/// Where one case's steps go.
#[derive(Debug, Clone)]
pub struct CaseFeed {
    registry: Arc<Registry>,
    case: CaseKey,
}

impl CaseFeed {
    /// Step number `step` (from 1) begins: its action is the case's current one.
    pub fn action_started(&self, step: usize, action: &str) {
        let mut st = self.registry.lock();
        let c = st.cases.entry(self.case.clone()).or_default();
        c.current = Some((step as u64, action.to_string()));
        c.action_running = true;
    }

    /// The step's action is done: what it recorded (its events, and the reloads it made).
    pub fn action_done(&self, events: &[Event], reloads: &[ReloadRecord]) {
        let mut st = self.registry.lock();
        let c = st.cases.entry(self.case.clone()).or_default();
        c.action_running = false;
        for e in events {
            *c.actions.entry(e.action.clone()).or_insert(0) += 1;
            let errs = c.action_errors.entry(e.action.clone()).or_insert(0);
            if e.error.is_some() && !e.limit {
                *errs += 1;
            }
        }
        for r in reloads {
            c.reloads += 1;
            c.last_reload_at_unix_s = Some(c.origin_unix_s + r.t_s);
            match (r.served_ms, &r.error) {
                (Some(ms), None) => {
                    let s = ms / 1e3;
                    c.reload_buckets[bucket_of((ms * 1e3) as u64)] += 1;
                    c.reload_count += 1;
                    c.reload_sum_s += s;
                    c.last_reload_s = Some(s);
                }
                // Done, but not seen serving (an external target's command exited): no time
                // for the histogram, and no failure either.
                (None, None) => c.reloads_untimed += 1,
                _ => c.reload_errors += 1,
            }
        }
    }

    /// The case's loads have ended and its stack is coming down.
    pub fn end(&self) {
        let mut st = self.registry.lock();
        if let Some(c) = st.cases.get_mut(&self.case) {
            c.running = false;
            c.action_running = false;
        }
    }
}

/// The bucket a latency of `us` whole microseconds falls in: the first bound it is below (a
/// value of exactly a bound's microseconds is a latency of at least that bound, so it goes
/// up one).
fn bucket_of(us: u64) -> usize {
    BUCKETS_US.partition_point(|&b| b <= us)
}

/// A second's histogram as the engine encodes it, or `None` when it does not decode.
fn decode(s: &str) -> Option<Histogram<u64>> {
    model::hdr::decode(s).ok()
}

/// The status classes, as `class` labels.
const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

fn render(info: &Info, st: &State) -> String {
    let mut out = String::with_capacity(4096 + st.loads.len() * 4096);
    let o = &mut out;
    family(
        o,
        "proxybench_build_info",
        "gauge",
        None,
        "The proxybench serving these metrics: version, subcommand, scenario.",
    );
    let version = env!("CARGO_PKG_VERSION");
    let mut labels = vec![("version", version), ("command", info.command.as_str())];
    if let Some(s) = &info.scenario {
        labels.push(("scenario", s));
    }
    sample(o, "proxybench_build_info", &labels, 1u64);
    family(
        o,
        "proxybench_exporter_decode_errors",
        "counter",
        None,
        "Per-second histograms that did not decode (their latency is missing from the buckets).",
    );
    sample(
        o,
        "proxybench_exporter_decode_errors_total",
        &[],
        st.decode_errors,
    );
    render_loads(o, info, st);
    render_cases(o, st);
    o.push_str("# EOF\n");
    out
}

/// Each family once, with one sample (or one set) per load.
fn render_loads(o: &mut String, info: &Info, st: &State) {
    let f = LoadFamilies { info, st };
    f.counters(o);
    f.gauges(o);
    f.latency(o);
}

/// The per-load families' writer: each sample carries the load's labels (agent, proxy, case,
/// load).
struct LoadFamilies<'a> {
    info: &'a Info,
    st: &'a State,
}

impl LoadFamilies<'_> {
    /// One sample of `name` for load `k`, with `extra` labels after the load's.
    fn one(
        &self,
        o: &mut String,
        name: &str,
        k: &LoadKey,
        extra: &[(&'static str, &str)],
        v: &dyn text::Value,
    ) {
        let mut ls: Vec<(&str, &str)> = Vec::with_capacity(4 + extra.len());
        if let Some(a) = &self.info.agent {
            ls.push(("agent", a));
        }
        if let Some(p) = &k.scope.proxy {
            ls.push(("proxy", p));
        }
        if let Some(c) = &k.scope.case {
            ls.push(("case", c));
        }
        ls.push(("load", &k.load));
        ls.extend_from_slice(extra);
        sample(o, name, &ls, v);
    }

    /// A counter family with one `_total` sample per load.
    fn counter(
        &self,
        o: &mut String,
        name: &str,
        unit: Option<&str>,
        help: &str,
        get: &dyn Fn(&LoadState) -> u64,
    ) {
        family(o, name, "counter", unit, help);
        let sample_name = format!("{name}_total");
        for (k, l) in &self.st.loads {
            self.one(o, &sample_name, k, &[], &get(l));
        }
    }

    /// A gauge family with one sample per load that has a value.
    fn gauge(
        &self,
        o: &mut String,
        name: &str,
        help: &str,
        get: &dyn Fn(&LoadState) -> Option<f64>,
    ) {
        family(o, name, "gauge", None, help);
        for (k, l) in &self.st.loads {
            if let Some(v) = get(l) {
                self.one(o, name, k, &[], &v);
            }
        }
    }

    /// What the loads counted: responses, by class; failures, by kind; sends, retries, bytes.
    fn counters(&self, o: &mut String) {
        self.counter(
            o,
            "proxybench_load_requests",
            None,
            "Complete responses received, any status (the run's requests count).",
            &|l| l.requests,
        );
        family(
            o,
            "proxybench_load_responses",
            "counter",
            None,
            "Complete responses by status class.",
        );
        for (k, l) in &self.st.loads {
            for (class, n) in CLASSES.iter().zip(l.responses) {
                self.one(
                    o,
                    "proxybench_load_responses_total",
                    k,
                    &[("class", class)],
                    &n,
                );
            }
        }
        family(
            o,
            "proxybench_load_failures",
            "counter",
            None,
            "Failed attempts below HTTP (no response), by error kind.",
        );
        for (k, l) in &self.st.loads {
            for (kind, n) in ErrorKind::ALL.iter().zip(l.failures) {
                self.one(
                    o,
                    "proxybench_load_failures_total",
                    k,
                    &[("kind", kind.name())],
                    &n,
                );
            }
        }
        self.counter(
            o,
            "proxybench_load_sent",
            None,
            "Requests sent (each once, whatever became of it).",
            &|l| l.sent,
        );
        self.counter(
            o,
            "proxybench_load_retried",
            None,
            "Requests sent again on a new connection after an idle keep-alive close cut them off (--retry-idle-closed).",
            &|l| l.retried,
        );
        self.counter(
            o,
            "proxybench_load_read_bytes",
            Some("bytes"),
            "Bytes read from the target (heads and bodies).",
            &|l| l.bytes,
        );
    }

    /// Where the loads stand: in flight, target and achieved rate, running.
    fn gauges(&self, o: &mut String) {
        self.gauge(
            o,
            "proxybench_load_in_flight",
            "Requests sent and not yet answered nor failed, at the end of the last complete second.",
            &|l| Some(l.in_flight as f64),
        );
        self.gauge(
            o,
            "proxybench_load_target_rate",
            "Open loop: the requests per second the schedule asks for (absent in closed loop).",
            &|l| l.target_rate,
        );
        self.gauge(
            o,
            "proxybench_load_achieved_rate",
            "Requests sent in the last complete second (0 once the load has ended).",
            &|l| Some(l.achieved_rate),
        );
        self.gauge(
            o,
            "proxybench_load_running",
            "1 while the load runs, 0 once its last second is in.",
            &|l| Some(if l.running { 1.0 } else { 0.0 }),
        );
    }

    /// The latency histogram, in fixed buckets.
    fn latency(&self, o: &mut String) {
        family(
            o,
            "proxybench_load_latency_seconds",
            "histogram",
            Some("seconds"),
            "Latency of complete responses (in open loop from the intended send time), in fixed buckets.",
        );
        for (k, l) in &self.st.loads {
            let mut cum = 0;
            for (i, n) in l.buckets.iter().enumerate() {
                cum += n;
                let le = BUCKETS_S
                    .get(i)
                    .map_or("+Inf".to_string(), |b| text::le(*b));
                self.one(
                    o,
                    "proxybench_load_latency_seconds_bucket",
                    k,
                    &[("le", &le)],
                    &cum,
                );
            }
            self.one(
                o,
                "proxybench_load_latency_seconds_count",
                k,
                &[],
                &l.latency_count,
            );
            self.one(
                o,
                "proxybench_load_latency_seconds_sum",
                k,
                &[],
                &(l.latency_sum_us as f64 / 1e6),
            );
        }
    }
}

/// A case's labels (`proxy` when set, `case`), then `extra`.
fn case_labels<'a>(
    k: &'a CaseKey,
    extra: &[(&'static str, &'a str)],
) -> Vec<(&'static str, &'a str)> {
    let mut v = Vec::with_capacity(2 + extra.len());
    if let Some(p) = &k.proxy {
        v.push(("proxy", p.as_str()));
    }
    if let Some(c) = &k.case {
        v.push(("case", c.as_str()));
    }
    v.extend_from_slice(extra);
    v
}

/// The cases' families: steps, actions, reloads.
fn render_cases(o: &mut String, st: &State) {
    if st.cases.is_empty() {
        return;
    }
    case_steps(o, st);
    case_reloads(o, st);
}

/// Where each case stands: running, its steps, the step it is at, its actions and their errors.
fn case_steps(o: &mut String, st: &State) {
    case_gauge(
        o,
        st,
        ("proxybench_case_running", None),
        "1 while the case runs, 0 once its loads have ended.",
        &|c| Some(if c.running { 1.0 } else { 0.0 }),
    );
    case_gauge(
        o,
        st,
        ("proxybench_case_steps", None),
        "Steps (timed actions) the case plans.",
        &|c| Some(c.steps as f64),
    );
    family(
        o,
        "proxybench_case_current_action",
        "gauge",
        None,
        "The latest step started: its number and action kind (1 while that step runs, 0 once it is done).",
    );
    for (case, c) in &st.cases {
        if let Some((step, action)) = &c.current {
            let step = step.to_string();
            let v = if c.action_running { 1u64 } else { 0 };
            sample(
                o,
                "proxybench_case_current_action",
                &case_labels(case, &[("step", &step), ("action", action)]),
                v,
            );
        }
    }
    case_by_action(
        o,
        st,
        "proxybench_case_actions",
        "Actions done, by kind (a step can record several, e.g. one per replica).",
        &|c| &c.actions,
    );
    case_by_action(
        o,
        st,
        "proxybench_case_action_errors",
        "Actions that failed, by kind.",
        &|c| &c.action_errors,
    );
}

/// Each case's reloads: how many, how many failed or were not timed, their times and the latest.
fn case_reloads(o: &mut String, st: &State) {
    case_counter(
        o,
        st,
        "proxybench_case_reloads",
        "Proxy reloads signalled (counted when their step is done).",
        &|c| c.reloads,
    );
    case_counter(
        o,
        st,
        "proxybench_case_reload_errors",
        "Reloads that failed or never served the new config.",
        &|c| c.reload_errors,
    );
    case_counter(
        o,
        st,
        "proxybench_case_reloads_untimed",
        "Reloads that succeeded but whose serving of the new config proxybench cannot see (an \
         external target's reload command): in no reload time.",
        &|c| c.reloads_untimed,
    );
    family(
        o,
        "proxybench_case_reload_seconds",
        "histogram",
        Some("seconds"),
        "Time from a reload's signal until the new config served a request.",
    );
    for (case, c) in &st.cases {
        let mut cum = 0;
        for (i, n) in c.reload_buckets.iter().enumerate() {
            cum += n;
            let le = BUCKETS_S
                .get(i)
                .map_or("+Inf".to_string(), |b| text::le(*b));
            sample(
                o,
                "proxybench_case_reload_seconds_bucket",
                &case_labels(case, &[("le", &le)]),
                cum,
            );
        }
        sample(
            o,
            "proxybench_case_reload_seconds_count",
            &case_labels(case, &[]),
            c.reload_count,
        );
        sample(
            o,
            "proxybench_case_reload_seconds_sum",
            &case_labels(case, &[]),
            c.reload_sum_s,
        );
    }
    case_gauge(
        o,
        st,
        ("proxybench_case_last_reload_seconds", Some("seconds")),
        "The latest reload that served: time from its signal until the new config served.",
        &|c| c.last_reload_s,
    );
    case_gauge(
        o,
        st,
        (
            "proxybench_case_last_reload_timestamp_seconds",
            Some("seconds"),
        ),
        "When the latest reload was signalled, in seconds since the Unix epoch.",
        &|c| c.last_reload_at_unix_s,
    );
}

/// A gauge family (name, unit) with one sample per case that has a value.
fn case_gauge(
    o: &mut String,
    st: &State,
    (name, unit): (&str, Option<&str>),
    help: &str,
    get: &dyn Fn(&CaseState) -> Option<f64>,
) {
    family(o, name, "gauge", unit, help);
    for (case, c) in &st.cases {
        if let Some(v) = get(c) {
            sample(o, name, &case_labels(case, &[]), v);
        }
    }
}

/// A counter family with one `_total` sample per case.
fn case_counter(
    o: &mut String,
    st: &State,
    name: &str,
    help: &str,
    get: &dyn Fn(&CaseState) -> u64,
) {
    family(o, name, "counter", None, help);
    let s = format!("{name}_total");
    for (case, c) in &st.cases {
        sample(o, &s, &case_labels(case, &[]), get(c));
    }
}

/// A counter family with one `_total` sample per case and action kind.
fn case_by_action(
    o: &mut String,
    st: &State,
    name: &str,
    help: &str,
    get: &dyn Fn(&CaseState) -> &BTreeMap<String, u64>,
) {
    family(o, name, "counter", None, help);
    let s = format!("{name}_total");
    for (case, c) in &st.cases {
        for (action, n) in get(c) {
            sample(o, &s, &case_labels(case, &[("action", action)]), *n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use model::hdr::encode;

    fn row_and_hdr(t: u32, lat_us: &[u64], status: u16) -> (Second, SecondHdr) {
        let mut h = model::hdr::new_hist();
        for &v in lat_us {
            h.record(v).unwrap();
        }
        let mut row = Second {
            t,
            requests: lat_us.len() as u64,
            sent: lat_us.len() as u64 + 1,
            in_flight: 1,
            latency_sum_us: lat_us.iter().sum(),
            ..Second::default()
        };
        row.status_class[(status / 100 - 1) as usize] = lat_us.len() as u64;
        row.errors.insert(ErrorKind::Timeout, 2);
        let hdr = SecondHdr {
            t,
            hdr: encode(&h),
            hdr_uncorrected: None,
        };
        (row, hdr)
    }

    fn value(text: &str, series: &str) -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series).and_then(|r| r.strip_prefix(' ')))
            .unwrap_or_else(|| panic!("no {series} in\n{text}"))
            .parse()
            .unwrap()
    }

    #[test]
    fn buckets_take_a_latency_below_their_bound() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(24), 0);
        assert_eq!(bucket_of(25), 1);
        assert_eq!(bucket_of(999), 5);
        assert_eq!(bucket_of(1000), 6);
        assert_eq!(bucket_of(60_000_000), BUCKETS_US.len());
    }

    #[test]
    fn seconds_add_up_exactly_and_render_as_openmetrics() {
        let reg = Registry::new(Info {
            command: "load".into(),
            scenario: None,
            agent: Some("host-a:7070".into()),
        });
        let feed = reg.load(&Scope::default(), "load", Some(100.0));
        let (r1, h1) = row_and_hdr(0, &[10, 30, 30, 700, 1500], 200);
        let (r2, h2) = row_and_hdr(1, &[40, 2_000_000], 500);
        feed.second(&r1, &h1);
        feed.second(&r2, &h2);
        let text = reg.render();
        let l = "{agent=\"host-a:7070\",load=\"load\"}";
        assert_eq!(
            value(&text, &format!("proxybench_load_requests_total{l}")),
            7.0
        );
        assert_eq!(value(&text, &format!("proxybench_load_sent_total{l}")), 9.0);
        assert_eq!(value(&text, &format!("proxybench_load_in_flight{l}")), 1.0);
        assert_eq!(
            value(&text, &format!("proxybench_load_target_rate{l}")),
            100.0
        );
        assert_eq!(
            value(&text, &format!("proxybench_load_achieved_rate{l}")),
            3.0
        );
        let with = |extra: &str| format!("{}{extra}}}", &l[..l.len() - 1]);
        assert_eq!(
            value(
                &text,
                &format!("proxybench_load_responses_total{}", with(",class=\"2xx\""))
            ),
            5.0
        );
        assert_eq!(
            value(
                &text,
                &format!("proxybench_load_responses_total{}", with(",class=\"5xx\""))
            ),
            2.0
        );
        assert_eq!(
            value(
                &text,
                &format!(
                    "proxybench_load_failures_total{}",
                    with(",kind=\"timeout\"")
                )
            ),
            4.0
        );
        let bucket = |le: &str| {
            value(
                &text,
                &format!(
                    "proxybench_load_latency_seconds_bucket{}",
                    with(&format!(",le=\"{le}\""))
                ),
            )
        };
        assert_eq!(bucket("2.5e-05"), 1.0);
        assert_eq!(bucket("5e-05"), 4.0);
        assert_eq!(bucket("0.001"), 5.0);
        assert_eq!(bucket("0.0025"), 6.0);
        assert_eq!(bucket("2.5"), 7.0);
        assert_eq!(bucket("+Inf"), 7.0);
        assert_eq!(
            value(&text, &format!("proxybench_load_latency_seconds_count{l}")),
            7.0
        );
        assert_eq!(
            value(&text, &format!("proxybench_load_latency_seconds_sum{l}")),
            2.00231
        );
        assert!(text.ends_with("# EOF\n"));
        assert_eq!(text.matches("# EOF").count(), 1);
        // Each family's samples sit together under its TYPE line.
        let mut seen = std::collections::BTreeSet::new();
        let mut current = String::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                current = rest.split(' ').next().unwrap().to_string();
                assert!(seen.insert(current.clone()), "{current} twice");
            } else if !line.starts_with('#') {
                assert!(line.starts_with(&current), "{line} outside {current}");
            }
        }
        assert!(!reg.final_served());
        feed.end();
        reg.finish();
        assert!(!reg.final_served());
        let text = reg.render();
        assert!(reg.final_served());
        assert_eq!(value(&text, &format!("proxybench_load_running{l}")), 0.0);
    }

    #[test]
    fn cases_count_steps_actions_and_reloads() {
        let reg = Registry::new(Info {
            command: "run".into(),
            scenario: Some("s".into()),
            agent: None,
        });
        let case = reg.case(
            &Scope {
                proxy: None,
                case: Some("c1".into()),
            },
            2,
            1000.0,
        );
        case.action_started(1, "reload");
        let text = reg.render();
        assert!(
            text.contains(
                "proxybench_case_current_action{case=\"c1\",step=\"1\",action=\"reload\"} 1\n"
            ),
            "{text}"
        );
        let ev = Event {
            t_s: 2.0,
            action: "reload".into(),
            detail: String::new(),
            duration_ms: 12.0,
            error: None,
            limit: false,
        };
        let ok = ReloadRecord {
            replica: "r0".into(),
            generation: 2,
            t_s: 2.0,
            served_ms: Some(12.0),
            command_ms: None,
            old_workers_exited_ms: None,
            validate_ms: 3.0,
            error: None,
        };
        let bad = ReloadRecord {
            served_ms: None,
            command_ms: None,
            error: Some("refused".into()),
            ..ok.clone()
        };
        // An external target's reload: its command's time is no time to serve.
        let untimed = ReloadRecord {
            served_ms: None,
            command_ms: Some(4.7),
            error: None,
            ..ok.clone()
        };
        case.action_done(&[ev], &[ok, bad, untimed]);
        let text = reg.render();
        assert!(text.contains(
            "proxybench_case_current_action{case=\"c1\",step=\"1\",action=\"reload\"} 0\n"
        ));
        assert_eq!(
            value(
                &text,
                "proxybench_case_actions_total{case=\"c1\",action=\"reload\"}"
            ),
            1.0
        );
        assert_eq!(
            value(&text, "proxybench_case_reloads_total{case=\"c1\"}"),
            3.0
        );
        assert_eq!(
            value(&text, "proxybench_case_reload_errors_total{case=\"c1\"}"),
            1.0
        );
        assert_eq!(
            value(&text, "proxybench_case_reloads_untimed_total{case=\"c1\"}"),
            1.0
        );
        assert_eq!(
            value(
                &text,
                "proxybench_case_reload_seconds_bucket{case=\"c1\",le=\"0.01\"}"
            ),
            0.0
        );
        assert_eq!(
            value(
                &text,
                "proxybench_case_reload_seconds_bucket{case=\"c1\",le=\"0.025\"}"
            ),
            1.0
        );
        assert_eq!(
            value(&text, "proxybench_case_last_reload_seconds{case=\"c1\"}"),
            0.012
        );
        assert_eq!(
            value(
                &text,
                "proxybench_case_last_reload_timestamp_seconds{case=\"c1\"}"
            ),
            1002.0
        );
        assert!(text.contains("proxybench_build_info{version=\""));
    }
}
