//! What a load of long-lived connections recorded (WebSocket, gRPC unary and server-streaming
//! calls, server-sent events): exact message counts, round trips and gaps as HDR summaries, and
//! the life of every connection, from its connect to how it ended (a close frame and its code, a
//! FIN without one, a reset, a timeout, a `grpc-status`), with the messages in flight at that
//! moment and when its slot connected again. The backend's side of the same connections
//! ([`BackendStreams`]) counts what it saw, so the two ends can be held against each other.
//!
//! An analysis that attributes drops to actions reads [`StreamSummary::lives`]: each
//! [`ConnLife`] says when (`end_us`, on the run's shared clock) and how ([`EndKind`]) a
//! connection ended, and whether the server said goodbye first (a close frame, a GOAWAY, a
//! `grpc-status`) or just went away.

use crate::load::{ErrorKind, Latency};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Which long-lived protocol a stream load speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum StreamProtocol {
    /// WebSocket (RFC 6455) over HTTP/1.1, `ws://` or `wss://`: messages sent at a set rate
    /// on each connection, each echoed message's round trip timed.
    #[serde(rename = "ws")]
    WebSocket,
    /// gRPC unary calls over HTTP/2 (h2 by ALPN, or h2c): calls at a set rate on each
    /// connection, each call's latency timed.
    #[serde(rename = "grpc-unary")]
    GrpcUnary,
    /// One gRPC server-streaming call per connection, held open: the server's messages counted
    /// and the gaps between them timed.
    #[serde(rename = "grpc-stream")]
    GrpcStream,
    /// Server-sent events (a long `text/event-stream` response over HTTP/1.1): events counted
    /// and the gaps between them timed.
    #[serde(rename = "sse")]
    Sse,
}

impl StreamProtocol {
    /// Every protocol, in the order reports list them.
    pub const ALL: [StreamProtocol; 4] = [
        StreamProtocol::WebSocket,
        StreamProtocol::GrpcUnary,
        StreamProtocol::GrpcStream,
        StreamProtocol::Sse,
    ];

    /// The name flags, JSON and reports use (`ws`, `grpc-unary`, `grpc-stream`, `sse`).
    pub fn name(self) -> &'static str {
        match self {
            StreamProtocol::WebSocket => "ws",
            StreamProtocol::GrpcUnary => "grpc-unary",
            StreamProtocol::GrpcStream => "grpc-stream",
            StreamProtocol::Sse => "sse",
        }
    }

    /// The protocol called `name` ([`StreamProtocol::name`]).
    pub fn parse(name: &str) -> Option<StreamProtocol> {
        StreamProtocol::ALL.into_iter().find(|p| p.name() == name)
    }

    /// True for the two gRPC modes (HTTP/2).
    pub fn is_grpc(self) -> bool {
        matches!(self, StreamProtocol::GrpcUnary | StreamProtocol::GrpcStream)
    }
}

/// What a connection slot does when its connection ends before the run does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reconnect {
    /// The slot stays closed: the load ends with fewer connections.
    None,
    /// A new connection at once after one that had opened; after one that did not (a refused
    /// connect, a refused upgrade), the backoff's wait, so a dead target is not hammered.
    Immediate,
    /// A new connection after a wait that doubles with each failure in a row, from the
    /// configured initial wait up to its maximum, and starts again after a connection that
    /// opened.
    #[default]
    Backoff,
}

impl Reconnect {
    /// The name flags and reports use.
    pub fn name(self) -> &'static str {
        match self {
            Reconnect::None => "none",
            Reconnect::Immediate => "immediate",
            Reconnect::Backoff => "backoff",
        }
    }
}

/// How one connection (for gRPC streaming: one call) ended. Every connection ends exactly once.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum EndKind {
    /// The client ended it at the run's end or on a stop (Ctrl-C): a close handshake
    /// (WebSocket), RST_STREAM CANCEL (gRPC), or closing the socket (SSE). Not a drop.
    #[default]
    Client,
    /// The server sent a WebSocket close frame ([`ConnLife::close_code`] has its code).
    CloseFrame,
    /// The server closed the connection without saying goodbye first: a FIN without a close
    /// frame (WebSocket), before the end of the response (SSE), or under open streams without
    /// a GOAWAY or a `grpc-status` (gRPC).
    Fin,
    /// The connection was reset (ECONNRESET), or the TLS layer failed under it.
    Reset,
    /// Nothing arrived within the timeout: the connect, the handshake, or (with an idle
    /// timeout) the next message.
    Timeout,
    /// A gRPC call ended with a `grpc-status` ([`ConnLife::grpc_status`]; OK included).
    GrpcStatus,
    /// HTTP/2: the server reset the stream (RST_STREAM), or refused it above a GOAWAY's
    /// last-stream-id.
    StreamReset,
    /// HTTP/2: the server's GOAWAY ended the connection, its open streams finished.
    #[serde(rename = "goaway")]
    GoAway,
    /// SSE: the server finished the response (the end of a chunked body or of its length).
    Complete,
    /// The handshake was answered, and not with what the protocol needs: a WebSocket upgrade
    /// answered other than 101, an SSE or gRPC request answered other than 200 (the status is
    /// in [`ConnLife::status`]), or without the right content type.
    Refused,
    /// The connection could not be made ([`ConnLife::error`] says how: refused, timed out,
    /// the TLS handshake).
    ConnectFailed,
    /// The server broke the protocol: a malformed frame, a response that is not HTTP/2 to
    /// an h2c preface (a server that speaks HTTP/1.1 only), bytes that are not HTTP.
    Protocol,
}

impl EndKind {
    /// Every kind, in the order reports list them.
    pub const ALL: [EndKind; 12] = [
        EndKind::Client,
        EndKind::CloseFrame,
        EndKind::Fin,
        EndKind::Reset,
        EndKind::Timeout,
        EndKind::GrpcStatus,
        EndKind::StreamReset,
        EndKind::GoAway,
        EndKind::Complete,
        EndKind::Refused,
        EndKind::ConnectFailed,
        EndKind::Protocol,
    ];

    /// The snake_case name JSON and reports use.
    pub fn name(self) -> &'static str {
        match self {
            EndKind::Client => "client",
            EndKind::CloseFrame => "close_frame",
            EndKind::Fin => "fin",
            EndKind::Reset => "reset",
            EndKind::Timeout => "timeout",
            EndKind::GrpcStatus => "grpc_status",
            EndKind::StreamReset => "stream_reset",
            EndKind::GoAway => "goaway",
            EndKind::Complete => "complete",
            EndKind::Refused => "refused",
            EndKind::ConnectFailed => "connect_failed",
            EndKind::Protocol => "protocol",
        }
    }

    /// True when this end, for a connection that had opened, can be a drop: the server (or
    /// the path to it) ended the connection. The client's own ends are not, nor a refusal, a
    /// failed connect, or an event stream the server finished; whether a close frame or a
    /// `grpc-status` is one depends on its code ([`ConnLife::dropped`]).
    pub fn is_drop(self) -> bool {
        !matches!(
            self,
            EndKind::Client | EndKind::Refused | EndKind::ConnectFailed | EndKind::Complete
        )
    }

    /// True when the server said goodbye in the protocol before the connection ended (a close
    /// frame, a `grpc-status`, a GOAWAY, the end of an SSE response), as opposed to a FIN, a
    /// reset or a timeout that cut it.
    pub fn announced(self) -> bool {
        matches!(
            self,
            EndKind::CloseFrame | EndKind::GrpcStatus | EndKind::GoAway | EndKind::Complete
        )
    }
}

/// The gRPC status codes (grpc/doc/statuscodes.md), by number.
pub const GRPC_CODES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// The name of gRPC status `code` (`UNAVAILABLE`), or `CODE_n` for a code outside the table.
pub fn grpc_code_name(code: u16) -> String {
    match GRPC_CODES.get(code as usize) {
        Some(n) => (*n).to_string(),
        None => format!("CODE_{code}"),
    }
}

/// The gRPC status a client takes from an HTTP status when a response carries no
/// `grpc-status` (grpc/doc/http-grpc-status-mapping.md): what a proxy's own error page means
/// to a gRPC client.
pub fn grpc_code_of_http(status: u16) -> u16 {
    match status {
        400 => 13,
        401 => 16,
        403 => 7,
        404 => 12,
        429 | 502 | 503 | 504 => 14,
        _ => 2,
    }
}

/// The life of one connection of a stream load (for gRPC streaming, of one call). Times are
/// microseconds since the run's origin, the clock the load's actions share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ConnLife {
    /// The connection slot (0 to connections - 1 across the load's threads).
    pub conn: u32,
    /// Which connection of the slot this was: 0 for the first, then one more per reconnect.
    pub attempt: u32,
    /// When the connect (or, for a gRPC call on an open connection, the call) started.
    pub start_us: u64,
    /// When the handshake finished and the connection was usable (absent if it never was).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_us: Option<u64>,
    /// When it ended.
    pub end_us: u64,
    /// How it ended.
    pub end: EndKind,
    /// The code of the server's WebSocket close frame (or of ours, for [`EndKind::Client`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub close_code: Option<u16>,
    /// The `grpc-status` the call ended with: from the trailers, or mapped from the HTTP
    /// status of a response without one ([`grpc_code_of_http`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc_status: Option<u16>,
    /// The HTTP status of the handshake's answer, when one came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// For [`EndKind::ConnectFailed`]: how the connect failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorKind>,
    /// Messages sent on it (WebSocket messages, gRPC calls).
    pub sent: u64,
    /// Messages received on it (echoes and the server's own messages, events, gRPC messages).
    pub received: u64,
    /// Messages in flight when it ended: sent and not yet echoed (WebSocket), calls not yet
    /// answered (gRPC unary).
    pub in_flight: u64,
    /// When the slot's next connection started, if it reconnected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_us: Option<u64>,
}

impl ConnLife {
    /// True when the connection had opened and was then dropped: cut by the server or the path
    /// to it (a FIN, a reset, a timeout, a stream reset, a GOAWAY, a protocol error), or ended
    /// by the server other than normally (a close frame other than 1000, a `grpc-status` other
    /// than OK). What a drop ledger counts.
    pub fn dropped(&self) -> bool {
        self.open_us.is_some()
            && self.end.is_drop()
            && match self.end {
                EndKind::CloseFrame => self.close_code != Some(1000),
                EndKind::GrpcStatus => self.grpc_status != Some(0),
                _ => true,
            }
    }
}

/// Message counts of a stream load, exact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct MessageCounts {
    /// Messages the client sent (WebSocket data frames, gRPC calls).
    pub sent: u64,
    /// Of those, the ones answered: echoes received back (WebSocket), calls that ended with a
    /// status (gRPC unary).
    pub answered: u64,
    /// Messages the server sent on its own: WebSocket text frames it pushed, SSE events, the
    /// messages of gRPC server streams (and of unary answers).
    pub pushed: u64,
    /// Sent and never answered, because the connection ended first.
    pub lost: u64,
    /// Sent and still unanswered when the run ended (the client closed under them).
    pub unanswered_at_end: u64,
    /// WebSocket pings the client sent.
    pub pings_sent: u64,
    /// WebSocket pongs the client received.
    pub pongs: u64,
    /// WebSocket pings the server sent (each answered with a pong).
    pub server_pings: u64,
    /// Payload bytes sent in messages.
    pub bytes_sent: u64,
    /// Payload bytes received in messages.
    pub bytes_received: u64,
}

impl MessageCounts {
    /// Adds another thread's (or agent's) counts to these: every count is a sum.
    pub fn add(&mut self, n: &MessageCounts) {
        self.sent += n.sent;
        self.answered += n.answered;
        self.pushed += n.pushed;
        self.lost += n.lost;
        self.unanswered_at_end += n.unanswered_at_end;
        self.pings_sent += n.pings_sent;
        self.pongs += n.pongs;
        self.server_pings += n.server_pings;
        self.bytes_sent += n.bytes_sent;
        self.bytes_received += n.bytes_received;
    }
}

/// What the engine cost: memory per open connection, CPU per message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct StreamCost {
    /// Resident memory of the process before the first connect, KiB.
    pub rss_before_kib: u64,
    /// Resident memory when the ramp ended and the most connections were open, KiB.
    pub rss_open_kib: u64,
    /// Connections open at that moment.
    pub open_at_sample: u64,
    /// (rss_open - rss_before) / open connections, bytes; absent when none was open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_per_connection: Option<u64>,
    /// CPU time of the engine's threads (user and system), seconds.
    pub cpu_s: f64,
    /// That CPU time over the messages sent and received, µs; absent without messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_per_message_us: Option<f64>,
}

/// One second of a stream load's timeline, on the run's shared clock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct StreamSecond {
    /// Seconds since the origin: the row covers `[t, t+1)`.
    pub t: u32,
    /// Connections open at the end of the second.
    pub open: u64,
    /// Connections that opened (handshake done) in it.
    pub opened: u64,
    /// Connections that ended in it, the client's own ends included.
    pub ended: u64,
    /// Of those, the drops ([`EndKind::is_drop`]).
    pub dropped: u64,
    /// Messages sent in it.
    pub sent: u64,
    /// Messages received in it.
    pub received: u64,
    /// 99th percentile of the round trips (or call latencies) that completed in it, µs.
    pub rtt_p99_us: u64,
}

/// Everything one stream load recorded: `proxybench load --format json` for ws://, gRPC and
/// SSE loads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamSummary {
    /// Schema version ([`crate::SCHEMA_VERSION`]).
    pub schema: u32,
    /// The load's name.
    pub name: String,
    /// Target URL as given.
    pub url: String,
    /// The protocol.
    pub protocol: StreamProtocol,
    /// Generator threads.
    pub threads: u32,
    /// Connections asked for.
    pub connections: u32,
    /// Seconds from the origin at which the load started.
    pub start_s: f64,
    /// Length asked for, seconds (absent: until stopped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planned_s: Option<f64>,
    /// Length it took, seconds.
    pub elapsed_s: f64,
    /// Over how long the connections were opened, seconds (0: all at once).
    pub ramp_s: f64,
    /// Messages (gRPC unary: calls) each connection sends per second; 0 sends none.
    pub rate: f64,
    /// Payload size of each message, bytes.
    pub size: u32,
    /// Handshake and round-trip timeout, ms.
    pub timeout_ms: u64,
    /// What a slot did when its connection ended.
    pub reconnect: Reconnect,
    /// Connections started (first connects and reconnects).
    pub attempts: u64,
    /// Connections that opened (handshake done).
    pub opened: u64,
    /// Reconnects: connections started after the slot's previous one ended.
    pub reconnects: u64,
    /// Connections that had opened and were then dropped ([`ConnLife::dropped`]): what a
    /// reload or a kill costs.
    pub dropped: u64,
    /// The most connections open at once.
    pub open_max: u64,
    /// Connections open when the load ended (the client then closed them: [`EndKind::Client`]).
    pub open_at_end: u64,
    /// How connections ended, by kind.
    pub ended: BTreeMap<EndKind, u64>,
    /// Close frames received from the server, by code.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub close_codes: BTreeMap<u16, u64>,
    /// gRPC calls ended, by `grpc-status` code.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub grpc_status: BTreeMap<u16, u64>,
    /// Handshakes refused, by the HTTP status of the answer.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub refused_status: BTreeMap<u16, u64>,
    /// Connects that failed, by kind.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub connect_errors: BTreeMap<ErrorKind, u64>,
    /// The first message seen for each way of ending other than the client's (a reason for
    /// every count).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub end_messages: BTreeMap<EndKind, String>,
    /// Message counts.
    pub messages: MessageCounts,
    /// Round trips of echoed WebSocket messages, latencies of gRPC unary calls.
    pub rtt: Latency,
    /// Gaps between the server's consecutive messages on a connection (SSE events, gRPC stream
    /// messages, WebSocket pushes).
    pub gap: Latency,
    /// From the connect's start to a usable connection (TCP, TLS, the upgrade or the response
    /// head, the HTTP/2 SETTINGS).
    pub handshake: Latency,
    /// Memory and CPU the engine spent.
    pub cost: StreamCost,
    /// The per-second timeline.
    pub timeline: Vec<StreamSecond>,
    /// Every connection's life, in order of start (empty when not kept), at most
    /// [`StreamSummary::LIVES_MAX`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lives: Vec<ConnLife>,
    /// Lives left out past [`StreamSummary::LIVES_MAX`] (a target that refuses connections as
    /// fast as they are made); they are counted in every total all the same.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lives_left_out: u64,
}

impl StreamSummary {
    /// The most connection lives a load keeps.
    pub const LIVES_MAX: usize = 1_000_000;

    /// True when the target was unusable: no connection ever opened.
    pub fn unusable(&self) -> bool {
        self.opened == 0
    }

    /// The summary as pretty JSON with a final newline.
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).expect("a StreamSummary holds only finite numbers")
            + "\n"
    }
}

/// What one backend instance saw of long-lived connections (WebSocket, SSE, gRPC server
/// streams; unary calls are counted, not kept one by one), beside its request counters.
/// Counts are exact; `lives` keeps one entry per ended connection, up to
/// [`BackendStreams::LIVES_MAX`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct BackendStreams {
    /// WebSocket upgrades accepted (101 sent).
    pub ws_opened: u64,
    /// SSE responses started.
    pub sse_opened: u64,
    /// gRPC calls started (request complete, HEADERS sent), both methods.
    pub grpc_calls: u64,
    /// Long-lived connections (and gRPC calls) open now.
    pub open: u64,
    /// Closed after the client's WebSocket close frame.
    pub closed_by_client: u64,
    /// Closed after our close frame (a `close` control order, `push_count` reached, a drain),
    /// or our end of an SSE response or a gRPC call.
    pub closed_by_server: u64,
    /// Ended by the client going away without a close frame (FIN or reset), or by a kill.
    pub dropped: u64,
    /// Data messages received from clients (WebSocket frames, gRPC request messages).
    pub messages_in: u64,
    /// Data messages sent to clients (echoes, pushes, SSE events, gRPC response messages).
    pub messages_out: u64,
    /// Of `messages_out`, the echoes of WebSocket messages.
    pub echoes: u64,
    /// WebSocket pings sent.
    pub pings: u64,
    /// WebSocket pongs received.
    pub pongs: u64,
    /// gRPC calls ended, by the `grpc-status` we sent.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub grpc_status: BTreeMap<u16, u64>,
    /// Close codes of the frames we sent.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub close_codes_sent: BTreeMap<u16, u64>,
    /// Close codes of the frames clients sent.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub close_codes_received: BTreeMap<u16, u64>,
    /// Per-connection counters, oldest first, at most [`BackendStreams::LIVES_MAX`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lives: Vec<BackendLife>,
    /// Entries left out of `lives` past the bound.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lives_dropped: u64,
}

impl BackendStreams {
    /// The most per-connection entries kept per instance.
    pub const LIVES_MAX: usize = 100_000;

    /// True when nothing long-lived ever happened.
    pub fn is_empty(&self) -> bool {
        self.ws_opened == 0 && self.sse_opened == 0 && self.grpc_calls == 0
    }
}

/// Who ended a long-lived connection at the backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClosedBy {
    /// Still open when sampled.
    Open,
    /// The client, with a close frame (WebSocket) or by ending the call (gRPC RST_STREAM).
    Client,
    /// We did: our close frame, the end of our SSE response, our `grpc-status`.
    Server,
    /// The client went away without saying so (FIN or reset), or a kill reset it.
    Dropped,
}

/// One long-lived connection (or gRPC call) as a backend instance counted it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackendLife {
    /// Which protocol.
    pub protocol: StreamProtocol,
    /// When it opened, ns on the backend's monotonic clock (CLOCK_MONOTONIC, the clock a
    /// load on the same machine measures from).
    pub opened_ns: u64,
    /// When it ended (absent while open).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed_ns: Option<u64>,
    /// Who ended it.
    pub by: ClosedBy,
    /// Data messages received.
    pub messages_in: u64,
    /// Data messages sent.
    pub messages_out: u64,
}

/// The columns of a lives file, one [`ConnLife`] a row: what `proxybench load --lives FILE.csv`
/// writes, and what a run keeps per long-lived load under `streams/<case>/<load>.csv`.
pub const LIVES_CSV_HEADER: &str = "conn,attempt,start_us,open_us,end_us,end,close_code,grpc_status,status,error,sent,received,in_flight,next_us";

/// Every life as CSV under [`LIVES_CSV_HEADER`], an empty cell for an absent value.
pub fn lives_csv(lives: &[ConnLife]) -> String {
    use std::fmt::Write;
    let mut o = String::with_capacity(64 * (lives.len() + 1));
    o.push_str(LIVES_CSV_HEADER);
    o.push('\n');
    let opt = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
    for l in lives {
        let _ = writeln!(
            o,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            l.conn,
            l.attempt,
            l.start_us,
            opt(l.open_us),
            l.end_us,
            l.end.name(),
            opt(l.close_code.map(u64::from)),
            opt(l.grpc_status.map(u64::from)),
            opt(l.status.map(u64::from)),
            l.error.map(|e| e.name()).unwrap_or_default(),
            l.sent,
            l.received,
            l.in_flight,
            opt(l.next_us),
        );
    }
    o
}

/// Why a lives file could not be read: the line and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {why}")]
pub struct LivesCsvError {
    /// The line (1 is the header).
    pub line: usize,
    /// What is wrong.
    pub why: String,
}

/// Reads a lives file written by [`lives_csv`].
pub fn parse_lives_csv(text: &str) -> Result<Vec<ConnLife>, LivesCsvError> {
    let mut lines = text.lines();
    let err = |line: usize, why: String| LivesCsvError { line, why };
    if lines.next().map(str::trim) != Some(LIVES_CSV_HEADER) {
        return Err(err(1, format!("the header is not '{LIVES_CSV_HEADER}'")));
    }
    let mut out = Vec::new();
    for (i, row) in lines.enumerate() {
        let line = i + 2;
        if row.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = row.split(',').collect();
        if f.len() != 14 {
            return Err(err(line, format!("{} fields, not 14", f.len())));
        }
        let num = |k: usize| -> Result<u64, LivesCsvError> {
            f[k].parse::<u64>()
                .map_err(|_| err(line, format!("field {} '{}' is not a number", k + 1, f[k])))
        };
        let opt = |k: usize| -> Result<Option<u64>, LivesCsvError> {
            if f[k].is_empty() {
                Ok(None)
            } else {
                num(k).map(Some)
            }
        };
        let small = |k: usize| -> Result<Option<u16>, LivesCsvError> {
            opt(k)?
                .map(|v| {
                    u16::try_from(v).map_err(|_| err(line, format!("field {} is too large", k + 1)))
                })
                .transpose()
        };
        let end = EndKind::ALL
            .into_iter()
            .find(|e| e.name() == f[5])
            .ok_or_else(|| err(line, format!("'{}' is not a way of ending", f[5])))?;
        let error = match f[9] {
            "" => None,
            name => Some(
                ErrorKind::ALL
                    .into_iter()
                    .find(|e| e.name() == name)
                    .ok_or_else(|| err(line, format!("'{name}' is not an error kind")))?,
            ),
        };
        let conn = u32::try_from(num(0)?).map_err(|_| err(line, "conn is too large".into()))?;
        let attempt =
            u32::try_from(num(1)?).map_err(|_| err(line, "attempt is too large".into()))?;
        out.push(ConnLife {
            conn,
            attempt,
            start_us: num(2)?,
            open_us: opt(3)?,
            end_us: num(4)?,
            end,
            close_code: small(6)?,
            grpc_status: small(7)?,
            status: small(8)?,
            error,
            sent: num(10)?,
            received: num(11)?,
            in_flight: num(12)?,
            next_us: opt(13)?,
        });
    }
    Ok(out)
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_back_and_the_taxonomy_is_complete() {
        for p in StreamProtocol::ALL {
            assert_eq!(StreamProtocol::parse(p.name()), Some(p));
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(json, format!("\"{}\"", p.name()));
        }
        for k in EndKind::ALL {
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(json, format!("\"{}\"", k.name()));
        }
        assert_eq!(grpc_code_name(14), "UNAVAILABLE");
        assert_eq!(grpc_code_name(99), "CODE_99");
        assert_eq!(grpc_code_of_http(503), 14);
        assert_eq!(grpc_code_of_http(404), 12);
        assert_eq!(grpc_code_of_http(200), 2);
        assert!(EndKind::Fin.is_drop() && !EndKind::Fin.announced());
        assert!(EndKind::CloseFrame.is_drop() && EndKind::CloseFrame.announced());
        assert!(!EndKind::Client.is_drop() && !EndKind::Refused.is_drop());
        let life = |end, close_code, grpc_status| ConnLife {
            open_us: Some(1),
            end,
            close_code,
            grpc_status,
            ..ConnLife::default()
        };
        assert!(life(EndKind::CloseFrame, Some(1001), None).dropped());
        assert!(!life(EndKind::CloseFrame, Some(1000), None).dropped());
        assert!(life(EndKind::GrpcStatus, None, Some(14)).dropped());
        assert!(!life(EndKind::GrpcStatus, None, Some(0)).dropped());
        assert!(!life(EndKind::Complete, None, None).dropped());
        assert!(life(EndKind::Fin, None, None).dropped());
        assert!(!ConnLife {
            open_us: None,
            ..life(EndKind::Fin, None, None)
        }
        .dropped());
    }

    #[test]
    fn lives_read_back_from_their_csv() {
        let lives = vec![
            ConnLife {
                conn: 1,
                attempt: 0,
                start_us: 5,
                open_us: Some(9),
                end_us: 4_000_000,
                end: EndKind::CloseFrame,
                close_code: Some(1001),
                sent: 3,
                received: 3,
                next_us: Some(4_100_000),
                ..ConnLife::default()
            },
            ConnLife {
                conn: 2,
                end: EndKind::ConnectFailed,
                error: Some(ErrorKind::ConnectRefused),
                ..ConnLife::default()
            },
            ConnLife {
                conn: 3,
                open_us: Some(1),
                end: EndKind::GrpcStatus,
                grpc_status: Some(14),
                status: Some(200),
                in_flight: 2,
                ..ConnLife::default()
            },
        ];
        let text = lives_csv(&lives);
        assert_eq!(parse_lives_csv(&text).unwrap(), lives);
        let e = parse_lives_csv("conn\n").unwrap_err();
        assert_eq!(e.line, 1);
        let bad = text.replace("close_frame", "bye");
        let e = parse_lives_csv(&bad).unwrap_err();
        assert_eq!(
            (e.line, e.why.as_str()),
            (2, "'bye' is not a way of ending")
        );
    }

    #[test]
    fn a_life_without_its_options_reads_back() {
        let l = ConnLife {
            conn: 3,
            attempt: 1,
            start_us: 10,
            open_us: Some(20),
            end_us: 30,
            end: EndKind::Fin,
            in_flight: 2,
            ..ConnLife::default()
        };
        let json = serde_json::to_string(&l).unwrap();
        assert!(!json.contains("close_code"), "{json}");
        assert_eq!(serde_json::from_str::<ConnLife>(&json).unwrap(), l);
    }
}
