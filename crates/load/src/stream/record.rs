//! What one stream worker records: exact counts, round trips, gaps and handshakes into HDR
//! histograms, a row per second, and every connection's life. The rows and totals of all
//! threads are added up once the run ends (`merge`).

use crate::stats::Recorder;
use hdrhistogram::Histogram;
use model::stream::{ConnLife, EndKind, MessageCounts};
use model::ErrorKind;
use std::collections::BTreeMap;

/// The per-second round-trip histogram: 1 µs to 60 s at 2 significant digits, a few KiB, so a
/// long run's rows stay small.
fn second_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 2).expect("static histogram bounds")
}

/// One second of one thread.
#[derive(Debug, Default)]
pub(crate) struct Row {
    pub open: u64,
    pub opened: u64,
    pub ended: u64,
    pub dropped: u64,
    pub sent: u64,
    pub received: u64,
    pub rtt: Option<Histogram<u64>>,
}

/// One thread's recording.
#[derive(Debug)]
pub(crate) struct Rec {
    /// The first row's second.
    pub t0: u32,
    pub rows: Vec<Row>,
    pub msgs: MessageCounts,
    pub rtt: Recorder,
    pub gap: Recorder,
    pub handshake: Recorder,
    pub attempts: u64,
    pub opened: u64,
    pub reconnects: u64,
    pub dropped: u64,
    /// Connections open now on this thread.
    pub open: u64,
    pub open_at_end: u64,
    pub ended: BTreeMap<EndKind, u64>,
    pub close_codes: BTreeMap<u16, u64>,
    pub grpc_status: BTreeMap<u16, u64>,
    pub refused_status: BTreeMap<u16, u64>,
    pub connect_errors: BTreeMap<ErrorKind, u64>,
    /// The first message of each end kind: when (ns since the origin) and what.
    pub first: BTreeMap<EndKind, (u64, String)>,
    pub lives: Vec<ConnLife>,
    pub keep_lives: bool,
    /// Lives not kept past the bound.
    pub lives_left_out: u64,
}

impl Rec {
    /// An empty recording whose rows start at second `t0`.
    pub fn new(t0: u32, keep_lives: bool) -> Rec {
        Rec {
            t0,
            rows: Vec::new(),
            msgs: MessageCounts::default(),
            rtt: Recorder::default(),
            gap: Recorder::default(),
            handshake: Recorder::default(),
            attempts: 0,
            opened: 0,
            reconnects: 0,
            dropped: 0,
            open: 0,
            open_at_end: 0,
            ended: BTreeMap::new(),
            close_codes: BTreeMap::new(),
            grpc_status: BTreeMap::new(),
            refused_status: BTreeMap::new(),
            connect_errors: BTreeMap::new(),
            first: BTreeMap::new(),
            lives: Vec::new(),
            keep_lives,
            lives_left_out: 0,
        }
    }

    /// The row of the second `now` (ns since the origin) falls in; rows skipped over carry
    /// the open gauge.
    pub fn row(&mut self, now: u64) -> &mut Row {
        let t = ((now / 1_000_000_000) as u32).saturating_sub(self.t0) as usize;
        while self.rows.len() <= t {
            let open = self.open;
            self.rows.push(Row {
                open,
                ..Row::default()
            });
        }
        &mut self.rows[t]
    }

    /// A data message of `bytes` payload bytes arrived.
    pub fn received(&mut self, now: u64, bytes: usize) {
        self.msgs.bytes_received += bytes as u64;
        self.row(now).received += 1;
    }

    /// A data message of `bytes` payload bytes left.
    pub fn sent(&mut self, now: u64, bytes: usize) {
        self.msgs.sent += 1;
        self.msgs.bytes_sent += bytes as u64;
        self.row(now).sent += 1;
    }

    /// An echo (or a unary call's answer) of a message sent at `sent`.
    pub fn echo(&mut self, now: u64, sent: u64) {
        let us = now.saturating_sub(sent) / 1000;
        self.msgs.answered += 1;
        self.rtt.record(us);
        self.row(now)
            .rtt
            .get_or_insert_with(second_hist)
            .saturating_record(us.max(1));
    }

    /// A gap of `ns` between two of the server's messages on one connection.
    pub fn gap(&mut self, ns: u64) {
        self.gap.record(ns / 1000);
    }

    /// A connection opened `took` ns after its connect started.
    pub fn opened(&mut self, now: u64, took: u64) {
        self.opened += 1;
        self.open += 1;
        self.handshake.record(took / 1000);
        let open = self.open;
        let row = self.row(now);
        row.opened += 1;
        row.open = open;
    }

    /// A connection ended as `kind`; `was_open` when it had opened, `dropped` when that end
    /// is a drop ([`model::stream::ConnLife::dropped`]).
    pub fn ended(
        &mut self,
        now: u64,
        kind: EndKind,
        was_open: bool,
        dropped: bool,
        why: Option<String>,
    ) {
        *self.ended.entry(kind).or_insert(0) += 1;
        if was_open {
            self.open -= 1;
        }
        if dropped {
            self.dropped += 1;
        }
        if let Some(why) = why {
            self.first.entry(kind).or_insert((now, why));
        }
        let open = self.open;
        let row = self.row(now);
        row.ended += 1;
        row.dropped += u64::from(dropped);
        row.open = open;
    }
}

impl Rec {
    /// Adds another thread's totals to these: counts, histograms, end kinds, the earliest
    /// message of each kind and the kept lives (its rows are merged apart, by second).
    pub fn merge(&mut self, r: Rec) {
        self.rtt.merge(&r.rtt);
        self.gap.merge(&r.gap);
        self.handshake.merge(&r.handshake);
        self.attempts += r.attempts;
        self.opened += r.opened;
        self.reconnects += r.reconnects;
        self.dropped += r.dropped;
        self.open_at_end += r.open_at_end;
        self.msgs.add(&r.msgs);
        add_counts(&mut self.ended, r.ended);
        add_counts(&mut self.close_codes, r.close_codes);
        add_counts(&mut self.grpc_status, r.grpc_status);
        add_counts(&mut self.refused_status, r.refused_status);
        add_counts(&mut self.connect_errors, r.connect_errors);
        for (k, (t, m)) in r.first {
            match self.first.get(&k) {
                Some((t0, _)) if *t0 <= t => {}
                _ => {
                    self.first.insert(k, (t, m));
                }
            }
        }
        self.lives.extend(r.lives);
        self.lives_left_out += r.lives_left_out;
    }
}

/// Adds counts by key into `into`.
fn add_counts<K: Ord>(into: &mut BTreeMap<K, u64>, from: BTreeMap<K, u64>) {
    for (k, v) in from {
        *into.entry(k).or_insert(0) += v;
    }
}
