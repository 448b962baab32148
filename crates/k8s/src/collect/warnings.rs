//! The Warning event watcher: each event's occurrences within the case, counted as the API
//! counts them.

use super::{stopped, t_s, Collector};
use crate::cluster::Cluster;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Event;
use kube::api::Api;
use kube::runtime::watcher::{self, watcher};
use kube::runtime::WatchStreamExt;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Instant;

/// A Warning event of the watched namespace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WarningEvent {
    /// Seconds since the case's origin when the watch delivered it.
    pub t_s: f64,
    /// The object it is about (`Pod/web-1`).
    pub object: String,
    /// The event's reason (`BackOff`, `Unhealthy`, `FailedScheduling`...).
    pub reason: String,
    /// The event's message.
    pub message: String,
    /// How many times it happened so far (the event's count, from before the case too).
    pub count: i32,
    /// The event's UID: the rows of one event share it.
    pub uid: String,
    /// The occurrences this row adds within the case: the increase of `count` since the watch
    /// last saw the event, or since the case began (see [`WarningTally`]).
    pub added: i32,
}

/// What a Warning event watch knows of each event it saw, to count each one's occurrences
/// within the case as the API counts them: the increase of its `count`, never the sum of the
/// counts seen (an event seen at counts 1 to 5 is 5 occurrences, not 15) and never what it
/// counted before the case.
#[derive(Debug, Default)]
pub struct WarningTally {
    /// Per event UID, the count last seen (or the count before the case began).
    last: BTreeMap<String, i32>,
}

impl WarningTally {
    /// Event `e`, seen at `t` (seconds since the origin): the row it makes when its count grew
    /// since the last sighting, else `None`. `listed` is true for the events of the watch's
    /// first listing (those there when the case began); `since` is when the case began, on the
    /// API's clock. A listed event whose last occurrence came before `since` counted all of it
    /// before the case: its count is where its increase starts from, and it makes no row. A
    /// listed event whose last occurrence is at or after `since` (times have one-second
    /// resolution: `since` is a second before the watch began) counts that occurrence as the
    /// case's and the ones before it as not. An event first seen after the listing began in
    /// the case: all of its count is the case's.
    pub fn see(
        &mut self,
        e: &Event,
        t: f64,
        listed: bool,
        since: jiff::Timestamp,
    ) -> Option<WarningEvent> {
        let uid = e.metadata.uid.clone().unwrap_or_default();
        let count = e
            .count
            .or(e.series.as_ref().and_then(|s| s.count))
            .unwrap_or(1)
            .max(1);
        let when = e
            .last_timestamp
            .as_ref()
            .map(|t| t.0)
            .or(e.event_time.as_ref().map(|t| t.0))
            .or(e.metadata.creation_timestamp.as_ref().map(|t| t.0));
        let from = match self.last.get(&uid) {
            Some(b) => *b,
            None if listed && when.is_some_and(|w| w < since) => {
                self.last.insert(uid, count);
                return None;
            }
            None if listed => count - 1,
            None => 0,
        };
        if count <= from {
            return None;
        }
        self.last.insert(uid.clone(), count);
        let o = &e.involved_object;
        Some(WarningEvent {
            t_s: t,
            object: format!(
                "{}/{}",
                o.kind.clone().unwrap_or_default(),
                o.name.clone().unwrap_or_default()
            ),
            reason: e.reason.clone().unwrap_or_default(),
            message: e.message.clone().unwrap_or_default(),
            count,
            uid,
            added: count - from,
        })
    }
}

impl Cluster {
    /// Watches the Warning events of `namespace` that happen from now on (older ones are
    /// skipped), stamped against `origin`.
    pub fn watch_warnings(&self, namespace: &str, origin: Instant) -> Collector<Vec<WarningEvent>> {
        let api: Api<Event> = Api::namespaced(self.client(), namespace);
        let what = format!("Warning events in {namespace}");
        let w = what.clone();
        // Event times have one-second resolution: keep what happened in the second before.
        let since = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(1);
        Collector::spawn(self, what, Vec::new(), move |state, mut stop| async move {
            let cfg = watcher::Config::default().fields("type=Warning");
            let mut stream = watcher(api, cfg).default_backoff().boxed();
            let mut tally = WarningTally::default();
            // The events of the first listing are those there when the case began.
            let mut first_listing = true;
            let mut got_any = false;
            loop {
                let ev = tokio::select! {
                    _ = stopped(&mut stop) => break,
                    ev = stream.next() => ev,
                };
                let Some(ev) = ev else { break };
                let t = t_s(origin);
                let mut st = state.lock().expect("collector state");
                let (e, listed) = match ev {
                    Ok(watcher::Event::InitApply(e)) => (e, first_listing),
                    Ok(watcher::Event::Apply(e)) => (e, false),
                    Ok(watcher::Event::InitDone) => {
                        first_listing = false;
                        got_any = true;
                        continue;
                    }
                    Ok(_) => {
                        got_any = true;
                        continue;
                    }
                    Err(e) => {
                        st.error(format!("{w}: watch: {}", crate::error::chain(&e)));
                        continue;
                    }
                };
                got_any = true;
                if let Some(row) = tally.see(&e, t, listed, since) {
                    st.data.push(row);
                }
            }
            let mut st = state.lock().expect("collector state");
            if !got_any {
                st.absent = Some(match st.errors.first() {
                    Some(e) => format!("event watch got no data: {e}"),
                    None => "event watch got no data before it was stopped".into(),
                });
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ObjectReference;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    /// A Warning event `uid` at `count`, last seen at `at`.
    fn event(uid: &str, count: i32, at: &str) -> Event {
        Event {
            metadata: kube::api::ObjectMeta {
                uid: Some(uid.into()),
                ..Default::default()
            },
            involved_object: ObjectReference {
                kind: Some("Pod".into()),
                name: Some("web-1".into()),
                ..Default::default()
            },
            reason: Some("Unhealthy".into()),
            message: Some("Readiness probe failed".into()),
            count: Some(count),
            last_timestamp: Some(Time(at.parse().unwrap())),
            ..Default::default()
        }
    }

    /// An event seen at counts 1 to 5 during the case is 5 occurrences, not 1 + 2 + 3 + 4 + 5;
    /// one that had counted 4 before the case and is seen at 5 and 7 is 3; one listed whose last
    /// occurrence was before the case is none.
    #[test]
    fn warnings_are_the_increase_of_each_events_count_within_the_case() {
        let since: jiff::Timestamp = "2026-12-01T10:00:00Z".parse().unwrap();
        let (before, during) = ("2026-12-01T09:59:00Z", "2026-12-01T10:00:05Z");
        let mut tally = WarningTally::default();
        let mut rows = Vec::new();
        // Listed when the case began: old at 4 (before), stale at 9 (before, never again).
        assert!(tally
            .see(&event("old", 4, before), 0.0, true, since)
            .is_none());
        assert!(tally
            .see(&event("stale", 9, before), 0.0, true, since)
            .is_none());
        for c in 1..=5 {
            rows.extend(tally.see(&event("new", c, during), f64::from(c), false, since));
            // The same count delivered again (another field changed) adds nothing.
            rows.extend(tally.see(&event("new", c, during), f64::from(c), false, since));
        }
        rows.extend(tally.see(&event("old", 5, during), 6.0, false, since));
        rows.extend(tally.see(&event("old", 7, during), 7.0, false, since));
        let new: i32 = rows
            .iter()
            .filter(|r| r.uid == "new")
            .map(|r| r.added)
            .sum();
        let old: i32 = rows
            .iter()
            .filter(|r| r.uid == "old")
            .map(|r| r.added)
            .sum();
        assert_eq!((new, old), (5, 3));
        assert_eq!(rows.len(), 7, "{rows:?}");
        assert_eq!(rows.iter().map(|r| r.count).max(), Some(7));
        // Listed with its last occurrence at the case's start (the one-second slack): that one
        // occurrence is the case's, the two before it are not.
        let r = tally
            .see(&event("edge", 3, "2026-12-01T10:00:00Z"), 0.0, true, since)
            .unwrap();
        assert_eq!((r.count, r.added), (3, 1));
        // An event first seen after the listing, already at 4: all four are the case's.
        let r = tally
            .see(&event("late", 4, during), 9.0, false, since)
            .unwrap();
        assert_eq!(r.added, 4);
    }
}
