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
