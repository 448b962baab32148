//! HAProxy's stats page on the replica's admin listener, read as CSV and mapped onto the
//! stub_status sample every collector knows:
//!
//! | sample     | HAProxy (sum over the listeners' frontends `fe_*`, backends `be_*`)        |
//! |------------|-----------------------------------------------------------------------------|
//! | `active`   | frontends' `scur` (current client connections)                              |
//! | `accepts`  | frontends' `conn_tot` (connections accepted since start)                    |
//! | `handled`  | frontends' `stot` (sessions, i.e. connections handed to the HTTP layer)      |
//! | `requests` | frontends' `req_tot` (HTTP requests since start)                            |
//! | `reading`  | 0: HAProxy does not count connections reading a request                    |
//! | `writing`  | backends' `scur` (requests being served by a server), at most `active`      |
//! | `waiting`  | `active - writing` (idle keep-alive connections and requests not yet sent)  |
//!
//! The counters are the current worker's: a reload starts them at zero again (as nginx's
//! stub_status does not), so a collector sees them fall after a reload.

use crate::driver::ReplicaHandle;
use crate::Error;
use std::time::Instant;

/// Admin-listener path of the stats page (`;csv` appended for the CSV form).
pub const STATS_PATH: &str = "/stats";

/// One stats sample of a replica, stamped with seconds since `origin`.
pub(crate) fn read(h: &ReplicaHandle, origin: Instant) -> Result<model::StubSample, Error> {
    let path = format!("{STATS_PATH};csv");
    crate::admin::status_sample(h, origin, &path, "stats", parse_stats_csv)
}

/// Parses HAProxy's stats CSV into [active, accepts, handled, requests, reading, writing,
/// waiting] as the module documentation maps them; `None` when it is not the stats CSV.
pub fn parse_stats_csv(body: &str) -> Option<[u64; 7]> {
    let mut lines = body.lines();
    let head = lines.next()?.strip_prefix("# ")?;
    let cols: Vec<&str> = head.split(',').collect();
    let col = |name: &str| cols.iter().position(|c| *c == name);
    let (px, sv) = (col("pxname")?, col("svname")?);
    let (scur, conn_tot, stot, req_tot) = (
        col("scur")?,
        col("conn_tot")?,
        col("stot")?,
        col("req_tot")?,
    );
    let mut sums = [0u64; 4];
    let mut busy = 0u64;
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        let (Some(p), Some(s)) = (f.get(px), f.get(sv)) else {
            continue;
        };
        if p.starts_with("fe_") && *s == "FRONTEND" {
            for (k, i) in [scur, conn_tot, stot, req_tot].into_iter().enumerate() {
                sums[k] += num(i);
            }
        } else if p.starts_with("be_") && *s == "BACKEND" {
            busy += num(scur);
        }
    }
    let active = sums[0];
    let writing = busy.min(active);
    Some([
        active,
        sums[1],
        sums[2],
        sums[3],
        0,
        writing,
        active - writing,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_csv_maps_onto_a_stub_sample() {
        let csv = "# pxname,svname,qcur,qmax,scur,smax,stot,req_tot,conn_tot,\n\
                   pb_admin,FRONTEND,,,1,1,9,9,9,\n\
                   fe_http,FRONTEND,,,5,8,40,300,41,\n\
                   fe_https,FRONTEND,,,2,2,3,7,3,\n\
                   be_app,s0,0,0,2,3,100,,,\n\
                   be_app,BACKEND,0,0,3,3,100,,,\n";
        assert_eq!(parse_stats_csv(csv), Some([7, 44, 43, 307, 0, 3, 4]));
        assert_eq!(parse_stats_csv("<html>"), None);
    }
}
