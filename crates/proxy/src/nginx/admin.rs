//! nginx's status page on the replica's admin server: the `stub_status` reader the collectors
//! call through the replica handle, and its parser.

use crate::driver::ReplicaHandle;
use crate::Error;
use std::time::Instant;

/// Admin-server path of `stub_status`.
pub const STUB_STATUS_PATH: &str = "/stub_status";

/// One stub_status sample of a replica, stamped with seconds since `origin`.
pub(crate) fn stub_status(h: &ReplicaHandle, origin: Instant) -> Result<model::StubSample, Error> {
    crate::admin::status_sample(
        h,
        origin,
        STUB_STATUS_PATH,
        "stub_status",
        parse_stub_status,
    )
}

/// Parses nginx's stub_status page into [active, accepts, handled, requests, reading, writing,
/// waiting].
pub fn parse_stub_status(body: &str) -> Option<[u64; 7]> {
    // Active connections: 1
    // server accepts handled requests
    //  5 5 9
    // Reading: 0 Writing: 1 Waiting: 0
    let mut lines = body.lines();
    let active = lines
        .next()?
        .strip_prefix("Active connections:")?
        .trim()
        .parse()
        .ok()?;
    lines.next()?;
    let mut counts = lines.next()?.split_whitespace().map(|n| n.parse::<u64>());
    let (accepts, handled, requests) = (
        counts.next()?.ok()?,
        counts.next()?.ok()?,
        counts.next()?.ok()?,
    );
    let rw: Vec<u64> = lines
        .next()?
        .split_whitespace()
        .skip(1)
        .step_by(2)
        .map(|n| n.parse().ok())
        .collect::<Option<_>>()?;
    if rw.len() != 3 {
        return None;
    }
    Some([active, accepts, handled, requests, rw[0], rw[1], rw[2]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stub_status_page_parses() {
        let page = "Active connections: 3 \nserver accepts handled requests\n 5 5 9 \nReading: 0 Writing: 1 Waiting: 2 \n";
        assert_eq!(parse_stub_status(page), Some([3, 5, 5, 9, 0, 1, 2]));
        assert_eq!(parse_stub_status("garbage"), None);
    }
}
