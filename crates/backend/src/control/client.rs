//! A blocking client of the control endpoint with the fleet's own operations.

use super::token::Token;
use super::wire::{encode, Added, ErrorBody, ProfileBody};
use crate::error::Error;
use crate::fleet::InstanceConfig;
use http1::client::{Conn, Request};
use setup::profile::Profile;
use std::net::SocketAddr;
use std::time::Duration;

/// Talks to a fleet's control endpoint (`proxybench backend --control ADDR`) from another
/// process.
#[derive(Debug, Clone)]
pub struct Client {
    addr: SocketAddr,
    token: Token,
    timeout: Duration,
}

impl Client {
    /// A client of the endpoint at `addr` that authenticates with `token` (read it from the
    /// token file with [`Token::read`]); calls time out after 60 s (a drain can take a while).
    pub fn new(addr: SocketAddr, token: Token) -> Client {
        Client {
            addr,
            token,
            timeout: Duration::from_secs(60),
        }
    }

    /// The same client with another per-call timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Client {
        self.timeout = timeout;
        self
    }

    /// Every instance's counters.
    pub fn counters(&self) -> Result<Vec<model::BackendCounters>, Error> {
        let body = self.call("GET", "/counters", None)?;
        serde_json::from_str(&body).map_err(|e| Error::Control(format!("bad counters: {e}")))
    }

    /// Every instance's configuration.
    pub fn instances(&self) -> Result<Vec<InstanceConfig>, Error> {
        let body = self.call("GET", "/instances", None)?;
        serde_json::from_str(&body).map_err(|e| Error::Control(format!("bad instances: {e}")))
    }

    /// Adds an instance; returns its bound address.
    pub fn add(&self, inst: &InstanceConfig) -> Result<SocketAddr, Error> {
        let req = serde_json::to_string(inst).map_err(|e| Error::Control(e.to_string()))?;
        let body = self.call("POST", "/instances", Some(req))?;
        let a: Added =
            serde_json::from_str(&body).map_err(|e| Error::Control(format!("bad answer: {e}")))?;
        Ok(a.addr)
    }

    /// Replaces an instance's profile.
    pub fn set_profile(&self, name: &str, p: &Profile) -> Result<(), Error> {
        let req = serde_json::to_string(&ProfileBody { profile: p.clone() })
            .map_err(|e| Error::Control(e.to_string()))?;
        self.call(
            "PUT",
            &format!("/instances/{}/profile", encode(name)),
            Some(req),
        )
        .map(drop)
    }

    /// Drains an instance; returns when it has stopped.
    pub fn drain(&self, name: &str) -> Result<(), Error> {
        self.op(name, "drain")
    }

    /// Starts a drain and returns at once.
    pub fn drain_async(&self, name: &str) -> Result<(), Error> {
        self.call(
            "POST",
            &format!("/instances/{}/drain?wait=false", encode(name)),
            None,
        )
        .map(drop)
    }

    /// Kills an instance (listener closed, connections reset).
    pub fn kill(&self, name: &str) -> Result<(), Error> {
        self.op(name, "kill")
    }

    /// Restarts a drained or killed instance.
    pub fn restart(&self, name: &str) -> Result<(), Error> {
        self.op(name, "restart")
    }

    /// Ends every long-lived connection of an instance: WebSockets with a close frame of
    /// `code`, event streams with their end, gRPC streams with `grpc_status`.
    pub fn close_streams(&self, name: &str, code: u16, grpc_status: u16) -> Result<(), Error> {
        self.call(
            "POST",
            &format!(
                "/instances/{}/close?code={code}&grpc_status={grpc_status}",
                encode(name)
            ),
            None,
        )
        .map(drop)
    }

    fn op(&self, name: &str, op: &str) -> Result<(), Error> {
        self.call("POST", &format!("/instances/{}/{op}", encode(name)), None)
            .map(drop)
    }

    fn call(&self, method: &str, path: &str, body: Option<String>) -> Result<String, Error> {
        let fail =
            |e: std::io::Error| Error::Control(format!("{method} {path} at {}: {e}", self.addr));
        let body = body.unwrap_or_default();
        let auth = format!("Bearer {}", self.token.as_str());
        let req = Request {
            method,
            path,
            headers: &[
                ("Authorization", &auth),
                ("Content-Type", "application/json"),
            ],
            body: body.as_bytes(),
        };
        let conn = Conn::connect(self.addr, Duration::from_secs(5)).map_err(fail)?;
        conn.stream()
            .set_read_timeout(Some(self.timeout))
            .map_err(fail)?;
        let r = conn.request_once(&req).map_err(fail)?;
        let (status, reply) = (r.status, r.text());
        if (200..300).contains(&status) {
            return Ok(reply);
        }
        let msg = serde_json::from_str::<ErrorBody>(&reply)
            .map(|e| e.error)
            .unwrap_or(reply);
        Err(Error::Control(format!("{status}: {msg}")))
    }
}
