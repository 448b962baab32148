//! Log followers: every container of every pod matching a selector, followed through the log
//! API from the container's start into a file, so that no line goes away with a deleted pod
//! (the stream ends when the container exits, after its last line). A reconnect (the API
//! server ended the stream, the container restarted) resumes after the last line written, by
//! the kubelet's timestamps.

use crate::cluster::Cluster;
use crate::error::{split, Error};
use futures::{AsyncBufReadExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams};
use kube::runtime::watcher::{self, watcher};
use kube::runtime::WatchStreamExt;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch as signal;

/// One followed container log and what became of it.
#[derive(Debug, Clone, PartialEq)]
pub struct FollowedLog {
    /// The pod's name.
    pub pod: String,
    /// The pod's UID.
    pub uid: String,
    /// The container's name.
    pub container: String,
    /// The file its lines went to (`DIR/POD_CONTAINER.log`), without the kubelet's timestamps.
    pub path: PathBuf,
    /// Lines written.
    pub lines: u64,
    /// Seconds since the origin when the first line arrived.
    pub first_t_s: Option<f64>,
    /// Seconds since the origin when the last line arrived.
    pub last_t_s: Option<f64>,
    /// True when the log was read to its end: the container exited and its stream ended, a
    /// final read at stop caught up with a container still running, or the pod went away before
    /// any of its containers started (no line was ever written).
    pub complete: bool,
    /// Why the log may be incomplete (the pod was deleted before its log could be read...).
    pub error: Option<String>,
}

/// The followers of one selector; [`LogFollowers::stop`] ends them and returns every log,
/// those of deleted pods included.
pub struct LogFollowers {
    state: Arc<Mutex<Vec<Arc<Mutex<FollowedLog>>>>>,
    tasks: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
    stop: signal::Sender<bool>,
    manager: Option<tokio::task::JoinHandle<()>>,
    cluster: Cluster,
}

impl Cluster {
    /// Follows the logs of every container of every pod of `namespace` matching `selector`,
    /// present or future, into files under `dir` (created if missing), stamping arrivals
    /// against `origin`.
    pub fn follow_logs(
        &self,
        namespace: &str,
        selector: &str,
        dir: &Path,
        origin: Instant,
    ) -> Result<LogFollowers, Error> {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
        let api: Api<Pod> = Api::namespaced(self.client(), namespace);
        let state: Arc<Mutex<Vec<Arc<Mutex<FollowedLog>>>>> = Arc::default();
        let tasks: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>> = Arc::default();
        let (tx, rx) = signal::channel(false);
        let mut cfg = watcher::Config::default();
        if !selector.is_empty() {
            cfg = cfg.labels(selector);
        }
        let (st, ts, dir) = (state.clone(), tasks.clone(), dir.to_path_buf());
        let handle = self.handle().clone();
        let manager = self.handle().spawn(async move {
            let mut stop = rx.clone();
            let mut stream = watcher(api.clone(), cfg).default_backoff().boxed();
            // Per pod UID: whether any of its containers has started (so that a pod deleted
            // before its log was read is a loss only if it ever ran).
            let mut started: BTreeMap<String, Arc<AtomicBool>> = BTreeMap::new();
            loop {
                let ev = tokio::select! {
                    _ = stop.wait_for(|s| *s) => break,
                    ev = stream.next() => ev,
                };
                let p = match ev {
                    Some(Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p))) => p,
                    Some(_) => continue,
                    None => break,
                };
                let uid = p.metadata.uid.clone().unwrap_or_default();
                let ran = p
                    .status
                    .as_ref()
                    .and_then(|s| s.container_statuses.as_ref())
                    .is_some_and(|cs| {
                        cs.iter().any(|c| {
                            c.state.as_ref().is_some_and(|s| {
                                s.running.is_some()
                                    || s.terminated
                                        .as_ref()
                                        .is_some_and(|t| t.started_at.is_some())
                            })
                        })
                    });
                if let Some(flag) = started.get(&uid) {
                    if ran {
                        flag.store(true, Ordering::SeqCst);
                    }
                    continue;
                }
                let flag = Arc::new(AtomicBool::new(ran));
                started.insert(uid.clone(), flag.clone());
                let pod = p.metadata.name.clone().unwrap_or_default();
                let containers: Vec<String> = p
                    .spec
                    .as_ref()
                    .map(|s| s.containers.iter().map(|c| c.name.clone()).collect())
                    .unwrap_or_default();
                for container in containers {
                    let path = dir.join(format!("{pod}_{container}.log"));
                    let log = Arc::new(Mutex::new(FollowedLog {
                        pod: pod.clone(),
                        uid: uid.clone(),
                        container: container.clone(),
                        path,
                        lines: 0,
                        first_t_s: None,
                        last_t_s: None,
                        complete: false,
                        error: None,
                    }));
                    st.lock().expect("followers").push(log.clone());
                    let task =
                        handle.spawn(follow(api.clone(), log, flag.clone(), origin, rx.clone()));
                    ts.lock().expect("followers").push(task);
                }
            }
        });
        Ok(LogFollowers {
            state,
            tasks,
            stop: tx,
            manager: Some(manager),
            cluster: self.clone(),
        })
    }
}

impl LogFollowers {
    /// The logs followed so far, as they stand.
    pub fn snapshot(&self) -> Vec<FollowedLog> {
        self.state
            .lock()
            .expect("followers")
            .iter()
            .map(|l| l.lock().expect("log").clone())
            .collect()
    }

    /// Stops following: streams of containers still running get a final read up to now; waits
    /// at most `bound` for that, then returns every log (those not finished say so).
    pub fn stop(mut self, bound: Duration) -> Vec<FollowedLog> {
        let _ = self.stop.send(true);
        let tasks: Vec<_> = std::mem::take(&mut *self.tasks.lock().expect("followers"));
        let manager = self.manager.take();
        let aborts: Vec<_> = tasks.iter().map(|t| t.abort_handle()).collect();
        let finished = self.cluster.block_on(async {
            if let Some(m) = manager {
                let _ = m.await;
            }
            tokio::time::timeout(bound, futures::future::join_all(tasks))
                .await
                .is_ok()
        });
        if !finished {
            for a in aborts {
                a.abort();
            }
        }
        let mut v = self.snapshot();
        for l in &mut v {
            if !l.complete && l.error.is_none() {
                l.error = Some(format!("the final read did not end within {bound:?}"));
            }
        }
        v
    }
}

impl Drop for LogFollowers {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(m) = self.manager.take() {
            m.abort();
        }
        for t in self.tasks.lock().expect("followers").drain(..) {
            t.abort();
        }
    }
}

/// Where a follower is in its log: the latest kubelet timestamp written and how many lines
/// carried exactly it, so that a re-read from that timestamp skips what was written already.
///
/// Timestamps are not in file order: the runtime stamps stdout and stderr lines as it reads each
/// stream, so a stdout line written after a stderr line may carry the earlier time. The first
/// stream therefore keeps every line; only a re-read (asked from the latest timestamp, which the
/// API may round down to its second) has lines to skip: those stamped before that timestamp, and
/// as many stamped exactly it as were written.
#[derive(Default)]
struct Position {
    last: Option<jiff::Timestamp>,
    at_last: u32,
    /// The current stream re-reads from this timestamp...
    from: Option<jiff::Timestamp>,
    /// ...and has this many lines stamped exactly it still to skip.
    skip: u32,
}

impl Position {
    /// A new stream begins (a re-read when anything was written before).
    fn restart(&mut self) {
        self.from = self.last;
        self.skip = self.at_last;
    }

    /// Whether the line stamped `ts` is new (then it counts as written).
    fn admit(&mut self, ts: jiff::Timestamp) -> bool {
        if let Some(from) = self.from {
            if ts < from {
                return false;
            }
            if ts == from && self.skip > 0 {
                self.skip -= 1;
                return false;
            }
        }
        match self.last {
            Some(last) if ts < last => {}
            Some(last) if ts == last => self.at_last += 1,
            _ => {
                self.last = Some(ts);
                self.at_last = 1;
            }
        }
        true
    }
}

/// `t` rounded down to its second: the re-read's `sinceTime` must not be later than any line
/// not yet written.
fn floor_to_second(t: jiff::Timestamp) -> jiff::Timestamp {
    t.round(
        jiff::TimestampRound::new()
            .smallest(jiff::Unit::Second)
            .mode(jiff::RoundMode::Floor),
    )
    .unwrap_or(t)
}

/// One container's follow: the API and log it reads, what it told of itself, and what its reads
/// have met so far; the pieces of [`follow`] share it.
struct Follower {
    api: Api<Pod>,
    log: Arc<Mutex<FollowedLog>>,
    ran: Arc<AtomicBool>,
    origin: Instant,
    stop: signal::Receiver<bool>,
    pod: String,
    uid: String,
    container: String,
    path: PathBuf,
    pos: Position,
    stopping: bool,
    // The follow was still streaming when it was told to stop (the container had not ended, so
    // the final read is what reads its log's end), or its last read failed for another reason
    // than a container not started (the API server could not reach the kubelet): when the pod is
    // then gone, the end of its log was never read.
    cut: bool,
    last_failure: Option<String>,
    last_refusal: Option<String>,
}

/// What [`Follower::refused`] leaves the follow to do.
enum Next {
    /// The log is done with (complete or failed): stop following.
    Stop,
    /// Ask for the stream again.
    Retry,
}

/// Whether a container's log is over after its stream ended by itself ([`Follower::ended_for_good`]).
enum Over {
    /// The pod is gone or replaced: nothing more can be read.
    Gone,
    /// The container terminated for good in a pod still there: its finished log can be read once more.
    Terminated,
    /// Not over: the connection ended, or the container will restart; follow again.
    No,
}

/// How one stream's reading ended, for [`follow`] to go on from.
enum StreamEnd {
    /// The stream ended by itself (or with a read error, recorded).
    Ended,
    /// `stop` said so while the stream was still open.
    Stopped,
    /// A line could not be written to the file (recorded): the follow is over.
    Unwritable,
}

/// Follows one container's log until its stream ends for good or `stop` says so (then a final
/// non-following read catches up).
async fn follow(
    api: Api<Pod>,
    log: Arc<Mutex<FollowedLog>>,
    ran: Arc<AtomicBool>,
    origin: Instant,
    stop: signal::Receiver<bool>,
) {
    let mut f = Follower::new(api, log, ran, origin, stop);
    let file = match std::fs::File::create(&f.path) {
        Ok(file) => file,
        Err(e) => return f.fail(format!("create {}: {e}", f.path.display())),
    };
    let mut out = std::io::BufWriter::new(file);
    loop {
        if !f.stopping && *f.stop.borrow() {
            f.stopping = true;
        }
        let lp = LogParams {
            container: Some(f.container.clone()),
            follow: !f.stopping,
            timestamps: true,
            // kube sends sinceTime rounded to the *nearest* second (jiff's default mode), so
            // x.6 s would ask for lines from x+1 s and lose those stamped in between: round
            // down here (a whole second is left alone), and `pos` skips what was written.
            since_time: f.pos.last.map(floor_to_second),
            ..Default::default()
        };
        let reader = match f.api.log_stream(&f.pod, &lp).await {
            Ok(r) => r,
            Err(e) => match f.refused(e).await {
                Next::Stop => break,
                Next::Retry => continue,
            },
        };
        let end = f.read_lines(reader, &mut out).await;
        if let StreamEnd::Unwritable = end {
            return;
        }
        let _ = out.flush();
        if let StreamEnd::Stopped = end {
            f.stopping = true;
            f.cut = true;
            continue;
        }
        if f.stopping {
            f.log.lock().expect("log").complete = true;
            break;
        }
        // The stream ended by itself: the container exited, or the connection did.
        match f.ended_for_good().await {
            Over::Gone => {
                f.log.lock().expect("log").complete = true;
                break;
            }
            // A follow can end at the container's exit before the kubelet has sent the last
            // lines the container wrote: one non-following read of the finished log (what was
            // written already is skipped) reads its end before the log is called complete.
            Over::Terminated => {
                f.stopping = true;
                continue;
            }
            Over::No => {}
        }
        tokio::select! {
            _ = f.stop.wait_for(|s| *s) => {}
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
    }
    let _ = out.flush();
}

impl Follower {
    /// A follow of `log`'s container, nothing read yet.
    fn new(
        api: Api<Pod>,
        log: Arc<Mutex<FollowedLog>>,
        ran: Arc<AtomicBool>,
        origin: Instant,
        stop: signal::Receiver<bool>,
    ) -> Follower {
        let (pod, uid, container, path) = {
            let l = log.lock().expect("log");
            (
                l.pod.clone(),
                l.uid.clone(),
                l.container.clone(),
                l.path.clone(),
            )
        };
        Follower {
            api,
            log,
            ran,
            origin,
            stop,
            pod,
            uid,
            container,
            path,
            pos: Position::default(),
            stopping: false,
            cut: false,
            last_failure: None,
            last_refusal: None,
        }
    }

    /// Records why the log may be incomplete.
    fn fail(&self, m: String) {
        self.log.lock().expect("log").error = Some(m);
    }

    /// The log API refused the stream: the pod is gone, the final read failed, or the stream is
    /// asked again after a wait.
    async fn refused(&mut self, e: kube::Error) -> Next {
        let (m, code) = split(e);
        // The log API answers 404 for a pod not yet bound to a node, too.
        let gone = code == 404
            && match self.api.get_opt(&self.pod).await {
                Ok(Some(p)) => p.metadata.uid.as_deref() != Some(self.uid.as_str()),
                Ok(None) => true,
                Err(_) => false,
            };
        if gone {
            self.on_gone(&m);
            return Next::Stop;
        }
        // 400 "is waiting to start": not started yet (or already ended with no log).
        if self.stopping {
            let mut l = self.log.lock().expect("log");
            if (code == 400 || code == 404) && l.lines == 0 {
                l.complete = true;
            } else {
                l.error = Some(format!(
                    "final read of {}/{}: {m}",
                    self.pod, self.container
                ));
            }
            return Next::Stop;
        }
        if code != 400 && code != 404 {
            self.last_failure = Some(m.clone());
        }
        self.last_refusal = Some(m);
        tokio::select! {
            _ = self.stop.wait_for(|s| *s) => {}
            _ = tokio::time::sleep(Duration::from_millis(if code == 400 || code == 404 { 100 } else { 500 })) => {}
        }
        Next::Retry
    }

    /// The pod went away (refused with `m`): its log is complete, or says what was not read.
    fn on_gone(&self, m: &str) {
        let pod = &self.pod;
        let mut l = self.log.lock().expect("log");
        if l.lines == 0 && self.ran.load(Ordering::SeqCst) {
            l.error = Some(format!(
                "pod {pod} was gone before its log could be read: {m}{}",
                self.last_refusal
                    .as_deref()
                    .map(|r| format!(" (before that: {r})"))
                    .unwrap_or_default()
            ));
        } else if self.cut || self.last_failure.is_some() {
            // Deleted while its container still ran, or while its log could not be
            // read (force-deleted on a lost node): what it wrote after the last line
            // read is not known.
            l.error = Some(format!(
                "pod {pod} was gone before the end of its log could be read ({} \
                 line(s) read; {}): {m}",
                l.lines,
                match &self.last_failure {
                    Some(f) => format!("the read before failed: {f}"),
                    None => "its stream was still open when the case ended".into(),
                }
            ));
        } else {
            l.complete = true;
        }
    }

    /// Reads one stream's lines into `out`, without the kubelet's timestamps and without those
    /// written already, until it ends or (while following) `stop` says so.
    async fn read_lines<R: futures::AsyncBufRead>(
        &mut self,
        reader: R,
        out: &mut std::io::BufWriter<std::fs::File>,
    ) -> StreamEnd {
        let mut reader = Box::pin(reader);
        self.last_failure = None;
        self.pos.restart();
        let mut unflushed = 0u32;
        let mut buf = Vec::with_capacity(512);
        loop {
            buf.clear();
            let n = if self.stopping {
                reader.read_until(b'\n', &mut buf).await
            } else {
                tokio::select! {
                    _ = self.stop.wait_for(|s| *s) => return StreamEnd::Stopped,
                    n = reader.read_until(b'\n', &mut buf) => n,
                }
            };
            match n {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    self.fail(format!("reading {}/{}: {e}", self.pod, self.container));
                    break;
                }
            }
            let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
            let Some(sp) = line.iter().position(|b| *b == b' ') else {
                continue;
            };
            let Some(ts) = std::str::from_utf8(&line[..sp])
                .ok()
                .and_then(|s| s.parse::<jiff::Timestamp>().ok())
            else {
                continue;
            };
            if !self.pos.admit(ts) {
                continue;
            }
            let t = self.origin.elapsed().as_secs_f64();
            if let Err(e) = out
                .write_all(&line[sp + 1..])
                .and_then(|_| out.write_all(b"\n"))
            {
                self.fail(format!("write {}: {e}", self.path.display()));
                return StreamEnd::Unwritable;
            }
            unflushed += 1;
            if unflushed >= 256 {
                let _ = out.flush();
                unflushed = 0;
            }
            let mut l = self.log.lock().expect("log");
            l.lines += 1;
            l.first_t_s.get_or_insert(t);
            l.last_t_s = Some(t);
        }
        StreamEnd::Ended
    }

    /// After a stream ended by itself: whether the log is over for good (the pod is gone or
    /// replaced, or this container terminated in a pod that will not restart it).
    async fn ended_for_good(&self) -> Over {
        match self.api.get_opt(&self.pod).await {
            Ok(None) => Over::Gone,
            Ok(Some(p)) if p.metadata.uid.as_deref() != Some(self.uid.as_str()) => Over::Gone,
            Ok(Some(p)) => {
                let st = p.status.clone().unwrap_or_default();
                let terminated = st
                    .container_statuses
                    .iter()
                    .flatten()
                    .find(|c| c.name == self.container)
                    .is_some_and(|c| c.state.as_ref().is_some_and(|s| s.terminated.is_some()));
                let done_for_good = p.metadata.deletion_timestamp.is_some()
                    || matches!(st.phase.as_deref(), Some("Succeeded" | "Failed"));
                if terminated && done_for_good {
                    Over::Terminated
                } else {
                    Over::No
                }
            }
            Err(_) => Over::No,
        }
    }
}

/// A log's lines counted by level, as a "no errors in the logs" check reads them: the JSON
/// lines of Go control planes (zap, logrus, slog: `{"level":"error","msg":...}`), of Node's
/// pino and bunyan (`{"level":50,...}`), syslog-style and Google Cloud `severity` numbers,
/// log15's `lvl`, and klog's text lines (`E1205 12:00:00.000000 1 file.go:12] msg`). A line
/// whose level cannot be read is counted in `lines` only: the reader of the counts then knows
/// that the log was not read whole.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LevelCount {
    /// Lines in all.
    pub lines: u64,
    /// Lines whose level was read ([`line_level`]).
    pub leveled: u64,
    /// Those lines by level, lowercased (`error`, `info`...).
    pub levels: BTreeMap<String, u64>,
    /// The message of the first [`FIRST_ERRORS`] lines at an error level or worse.
    pub first_errors: Vec<String>,
}

/// How many error messages [`count_levels`] keeps.
pub const FIRST_ERRORS: usize = 5;

/// The levels at or above error, as zap, logrus, slog, syslog, java.util.logging and Google
/// Cloud name them.
pub const ERROR_LEVELS: [&str; 11] = [
    "error",
    "err",
    "severe",
    "dpanic",
    "panic",
    "fatal",
    "critical",
    "crit",
    "alert",
    "emerg",
    "emergency",
];

/// Level names [`line_level`] takes as written (lowercased): any other word is not a level it
/// can read, so the line stays unleveled rather than being guessed below error.
const NAMED_LEVELS: [&str; 23] = [
    "trace",
    "debug",
    "fine",
    "finer",
    "finest",
    "config",
    "verbose",
    "info",
    "notice",
    "warn",
    "warning",
    "error",
    "err",
    "severe",
    "dpanic",
    "panic",
    "fatal",
    "critical",
    "crit",
    "alert",
    "emerg",
    "emergency",
    "default",
];

/// Counts `text`'s lines by their level ([`line_level`]); lines without one it can read count
/// in `lines` only.
pub fn count_levels(text: &str) -> LevelCount {
    let mut c = LevelCount::default();
    for line in text.lines() {
        c.lines += 1;
        let Some((level, msg)) = line_level(line) else {
            continue;
        };
        c.leveled += 1;
        if ERROR_LEVELS.contains(&level.as_str()) && c.first_errors.len() < FIRST_ERRORS {
            c.first_errors.push(msg);
        }
        *c.levels.entry(level).or_default() += 1;
    }
    c
}

/// The level of one log line (lowercased) and its message, when it has a level this can read:
/// - a JSON object's `level`, `severity` or `lvl`: a level name (`"error"`, `"WARNING"`, zap's
///   `"Level(-2)"` of a logr verbosity, log15's `"eror"` and `"dbug"`); a pino or bunyan number
///   (10 trace, 20 debug, 30 info, 40 warn, 50 error, 60 fatal; one between two is the lower
///   one's); a `severity` number as syslog's (0 emerg to 7 debug) or Google Cloud's (100 debug
///   to 800 emergency);
/// - klog's text prefix: `I`, `W`, `E` or `F`, then `MMDD hh:mm:ss.uuuuuu`, the thread id and
///   `file:line]`.
///
/// A small number in `level` (0 to 9) is not read: zap (2 = error), logr's verbosity (2 = more
/// verbose than info) and GELF's syslog severity (2 = critical) all write one there.
pub fn line_level(line: &str) -> Option<(String, String)> {
    let line = line.trim();
    if line.starts_with('{') {
        let Ok(serde_json::Value::Object(o)) = serde_json::from_str::<serde_json::Value>(line)
        else {
            return None;
        };
        let level = ["level", "severity", "lvl"]
            .iter()
            .find_map(|k| o.get(*k).and_then(|v| json_level(k, v)))?;
        let msg = ["msg", "message", "short_message"]
            .iter()
            .find_map(|k| o.get(*k).and_then(|m| m.as_str()))
            .unwrap_or(line);
        return Some((level.to_string(), msg.to_string()));
    }
    klog_level(line).map(|(l, m)| (l.to_string(), m.to_string()))
}

/// The level a JSON field `key` gives with value `v`, when this can read it.
fn json_level(key: &str, v: &serde_json::Value) -> Option<&'static str> {
    if let Some(s) = v.as_str() {
        let s = s.trim().to_ascii_lowercase();
        // zap writes a level it has no name for (logr's V(2) is zap's -2) as `Level(-2)`.
        if let Some(n) = s
            .strip_prefix("level(")
            .and_then(|r| r.strip_suffix(')'))
            .and_then(|n| n.parse::<i64>().ok())
        {
            return (n < 0).then_some("debug");
        }
        let s = match s.as_str() {
            "eror" => "error",
            "dbug" => "debug",
            s => s,
        };
        return NAMED_LEVELS.iter().find(|l| **l == s).copied();
    }
    let n = v.as_f64()?;
    if key == "severity" {
        return match n {
            n if (0.0..8.0).contains(&n) && n.fract() == 0.0 => Some(
                [
                    "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug",
                ][n as usize],
            ),
            n if (100.0..=900.0).contains(&n) => Some(
                [
                    "debug",
                    "info",
                    "notice",
                    "warning",
                    "error",
                    "critical",
                    "alert",
                    "emergency",
                ][((n / 100.0) as usize - 1).min(7)],
            ),
            _ => None,
        };
    }
    if key == "level" && n >= 10.0 {
        return Some(match n {
            n if n < 20.0 => "trace",
            n if n < 30.0 => "debug",
            n if n < 40.0 => "info",
            n if n < 50.0 => "warn",
            n if n < 60.0 => "error",
            _ => "fatal",
        });
    }
    None
}

/// klog's level and message: `E1205 12:00:00.000000    1 file.go:12] msg`.
fn klog_level(line: &str) -> Option<(&'static str, &str)> {
    let b = line.as_bytes();
    let level = match b.first()? {
        b'I' => "info",
        b'W' => "warning",
        b'E' => "error",
        b'F' => "fatal",
        _ => return None,
    };
    // MMDD hh:mm:ss.uuuuuu
    let head = line.get(1..21)?.as_bytes();
    let digits = |r: std::ops::Range<usize>| head[r].iter().all(u8::is_ascii_digit);
    let shape = digits(0..4)
        && head[4] == b' '
        && digits(5..7)
        && head[7] == b':'
        && digits(8..10)
        && head[10] == b':'
        && digits(11..13)
        && head[13] == b'.'
        && digits(14..20);
    if !shape {
        return None;
    }
    // Then the thread id and `file:line]`.
    let rest = &line[21..];
    let mut words = rest.split_whitespace();
    words
        .next()
        .filter(|t| t.bytes().all(|c| c.is_ascii_digit()))?;
    let close = rest
        .find("] ")
        .or_else(|| rest.strip_suffix(']').map(|r| r.len()))?;
    let loc = rest[..close].split_whitespace().last()?;
    if !loc.contains(':') {
        return None;
    }
    Some((level, rest.get(close + 2..).unwrap_or("").trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind of level it reads, each counted under its name; lines it cannot read count
    /// as lines only, never as a level below error.
    #[test]
    fn numeric_levels_severity_lvl_and_klog_lines_are_read() {
        let text = [
            r#"{"level":30,"time":1,"msg":"listening"}"#,
            r#"{"level":50,"msg":"upstream gone"}"#,
            r#"{"level":60,"msg":"out of memory"}"#,
            r#"{"level":55,"msg":"between error and fatal"}"#,
            r#"{"level":40,"msg":"slow"}"#,
            r#"{"severity":3,"message":"syslog err"}"#,
            r#"{"severity":6,"message":"syslog info"}"#,
            r#"{"severity":500,"message":"cloud error"}"#,
            r#"{"severity":200,"message":"cloud info"}"#,
            r#"{"lvl":"eror","msg":"log15 error"}"#,
            r#"{"lvl":"dbug","msg":"log15 debug"}"#,
            r#"{"level":"Level(-2)","msg":"logr V(2)"}"#,
            "E1205 12:00:00.123456       1 reconcile.go:42] failed to sync: boom",
            "I1205 12:00:01.000000 7 main.go:9] started",
            "W1205 12:00:02.000000 7 main.go:10] slow",
            "F1205 12:00:03.000000 7 main.go:11] dying",
            // Not read: an ambiguous small `level`, an unknown word, klog-like text that is not
            // klog's, plain text.
            r#"{"level":2,"msg":"zap error or logr V(2)?"}"#,
            r#"{"level":"banana","msg":"?"}"#,
            "Error: something without klog's prefix",
            "E1205 garbage",
            "starting",
        ]
        .join("\n");
        let c = count_levels(&text);
        assert_eq!((c.lines, c.leveled), (21, 16));
        let want: BTreeMap<String, u64> = [
            ("debug", 2),
            ("err", 1),
            ("error", 5),
            ("fatal", 2),
            ("info", 4),
            ("warn", 1),
            ("warning", 1),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        assert_eq!(c.levels, want);
        assert_eq!(
            c.first_errors,
            [
                "upstream gone",
                "out of memory",
                "between error and fatal",
                "syslog err",
                "cloud error"
            ]
        );
        let klog = count_levels("E1205 12:00:00.123456       1 reconcile.go:42] failed: boom");
        assert_eq!(klog.first_errors, ["failed: boom"]);
        assert_eq!(count_levels(""), LevelCount::default());
    }

    #[test]
    fn json_lines_are_counted_by_level() {
        let text = "{\"level\":\"info\",\"ts\":1,\"msg\":\"started\"}\n\
                    {\"level\":\"error\",\"msg\":\"reload failed\",\"error\":\"x\"}\n\
                    not json\n{\"severity\":\"WARNING\",\"message\":\"slow\"}\n\
                    {\"msg\":\"no level\"}\n{\"level\":\"fatal\",\"msg\":\"gone\"}\n{broken\n";
        let c = count_levels(text);
        assert_eq!((c.lines, c.leveled), (7, 4));
        let want: BTreeMap<String, u64> = [("error", 1), ("fatal", 1), ("info", 1), ("warning", 1)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        assert_eq!(c.levels, want);
        assert_eq!(c.first_errors, ["reload failed", "gone"]);
    }

    fn at(s: &str) -> jiff::Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn a_re_read_asks_from_the_second_before_the_last_line() {
        // Rounded to the nearest second, .6 would become the next second and the lines
        // stamped between would never be read.
        assert_eq!(
            floor_to_second(at("2026-11-29T05:00:07.6Z")),
            at("2026-11-29T05:00:07Z")
        );
        assert_eq!(
            floor_to_second(at("2026-11-29T05:00:07Z")),
            at("2026-11-29T05:00:07Z")
        );
    }

    #[test]
    fn lines_out_of_time_order_are_kept_and_a_reread_skips_only_what_was_written() {
        let (t0, t1, t2, t3) = (
            at("2026-01-01T00:00:00.5Z"),
            at("2026-01-01T00:00:01Z"),
            at("2026-01-01T00:00:02Z"),
            at("2026-01-01T00:00:03Z"),
        );
        let mut p = Position::default();
        p.restart();
        // stderr stamped t2 written before a stdout line stamped t1: every line of the first
        // stream is new.
        for ts in [t0, t1, t2, t1, t2] {
            assert!(p.admit(ts));
        }
        // The stream ends; the re-read (from t2, maybe rounded down) gives earlier lines and both
        // t2 lines again, then new ones.
        p.restart();
        for ts in [t1, t2, t2] {
            assert!(!p.admit(ts));
        }
        assert!(p.admit(t2));
        assert!(p.admit(t3));
        assert!(
            !p.admit(t1),
            "a re-read cannot tell an earlier line from a written one"
        );
        p.restart();
        assert!(!p.admit(t2));
        assert!(!p.admit(t3));
        assert!(p.admit(t3));
    }
}
