//! The admin listener every driver renders on a replica's own loopback port: `GET /generation`
//! answers the config generation as `N\n`, which is how a start or a reload is seen serving,
//! whatever the proxy. Drivers may add a status page on the same port.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

/// Name of the response header (and admin answer) that carries the config generation.
pub const GENERATION_HEADER: &str = "X-Config-Generation";

/// Admin-listener path answering the config generation as `N\n`.
pub const GENERATION_PATH: &str = "/generation";

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

/// One sample of a replica's status page at `path`, read by `parse` into [active, accepts,
/// handled, requests, reading, writing, waiting] and stamped with seconds since `origin`; `what`
/// names the page in errors.
pub(crate) fn status_sample(
    h: &crate::driver::ReplicaHandle,
    origin: std::time::Instant,
    path: &str,
    what: &str,
    parse: fn(&str) -> Option<[u64; 7]>,
) -> Result<model::StubSample, crate::Error> {
    let t_s = origin.elapsed().as_secs_f64();
    let (status, body) = get(h.admin_port, path, Duration::from_secs(2))
        .map_err(|e| crate::Error::io(format!("{}: {what}", h.name), e))?;
    let v = (status == 200)
        .then(|| parse(&body))
        .flatten()
        .ok_or_else(|| {
            crate::Error::Refused(format!(
                "{}: unexpected {what} answer {status}: {}",
                h.name,
                body.lines().next().unwrap_or("")
            ))
        })?;
    let [active, accepts, handled, requests, reading, writing, waiting] = v;
    Ok(model::StubSample {
        t_s,
        replica: h.name.clone(),
        active,
        accepts,
        handled,
        requests,
        reading,
        writing,
        waiting,
    })
}
