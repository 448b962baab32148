//! Proxies under test: a neutral config model ([`config`]) that scenarios embed as their `[proxy]`
//! table, and one driver per proxy ([`nginx`] first) that renders the model, checks it with the
//! proxy's own validator, runs replicas as child processes, reloads them, stops them and reads their
//! logs. Nothing here knows about load generation.

#![warn(missing_docs)]

pub mod config;
mod error;
pub mod nginx;

pub use config::ProxyConfig;
pub use error::Error;
