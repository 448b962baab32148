//! The replica's admin server: a GET on it, the stub_status parser, and a cheap handle that
//! collectors can keep on another thread.

use super::{procs, GENERATION_PATH, STUB_STATUS_PATH};
use crate::Error;
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// What a collector needs of a replica, detached from the `Replica` that owns the process:
/// its name, master pid and admin port. Cloning it is cheap and it can move across threads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaHandle {
    /// Replica name (`nginx-0`...).
    pub name: String,
    /// The master's pid.
    pub master_pid: u32,
    /// The admin server's port on 127.0.0.1.
    pub admin_port: u16,
}

impl ReplicaHandle {
    /// The master and its current workers (old workers still finishing count too), for CPU
    /// and memory collectors. Empty once the master is gone.
    pub fn pids(&self) -> Vec<u32> {
        if !procs::alive(self.master_pid) {
            return Vec::new();
        }
        let mut v = vec![self.master_pid];
        v.extend(procs::children(self.master_pid));
        v
    }

    /// One stub_status sample, stamped with seconds since `origin`.
    pub fn stub_status(&self, origin: Instant) -> Result<model::StubSample, Error> {
        let t_s = origin.elapsed().as_secs_f64();
        let (status, body) = get(self.admin_port, STUB_STATUS_PATH, Duration::from_secs(2))
            .map_err(|e| Error::io(format!("{}: stub_status", self.name), e))?;
        let v = (status == 200)
            .then(|| parse_stub_status(&body))
            .flatten()
            .ok_or_else(|| {
                Error::Nginx(format!(
                    "{}: unexpected stub_status answer {status}: {body}",
                    self.name
                ))
            })?;
        Ok(model::StubSample {
            t_s,
            replica: self.name.clone(),
            active: v[0],
            accepts: v[1],
            handled: v[2],
            requests: v[3],
            reading: v[4],
            writing: v[5],
            waiting: v[6],
        })
    }

    /// A readiness probe: how long the admin server took to answer `/generation`, or the error
    /// when it did not answer within `timeout` (a Kubernetes probe's `timeoutSeconds`).
    pub fn probe(&self, timeout: Duration) -> Result<Duration, Error> {
        let t0 = std::time::Instant::now();
        generation(self.admin_port, timeout)
            .map(|_| t0.elapsed())
            .map_err(|e| Error::io(format!("{}: readiness", self.name), e))
    }

    /// The config generation the admin server answers now.
    pub fn generation(&self) -> Result<u64, Error> {
        generation(self.admin_port, Duration::from_secs(2))
            .map_err(|e| Error::io(format!("{}: generation", self.name), e))
    }
}

/// The generation answered on the admin port.
pub(crate) fn generation(port: u16, timeout: Duration) -> io::Result<u64> {
    let (status, body) = get(port, GENERATION_PATH, timeout)?;
    if status != 200 {
        return Err(io::Error::other(format!("generation answered {status}")));
    }
    body.trim()
        .parse()
        .map_err(|_| io::Error::other(format!("generation answered '{}'", body.trim())))
}

/// GET `path` from 127.0.0.1:`port` (`Connection: close`, with the workspace's one HTTP/1
/// client); returns (status, body).
pub(crate) fn get(port: u16, path: &str, timeout: Duration) -> io::Result<(u16, String)> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let req = http1::client::Request {
        headers: &[("Host", "proxybench-admin")],
        ..http1::client::Request::get(path)
    };
    let r = http1::client::request(addr, &req, timeout)?;
    Ok((r.status, r.text()))
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
