//! What a case sets up, as data: the neutral proxy config model that scenarios embed as their
//! `[proxy]` table ([`proxy`]) and the behaviour profiles of the emulated backends
//! ([`profile`]). Parsing, printing and checking only: no I/O, no system call, no random draw, so
//! the scenario language and the analyse stage, which read these, depend on no proxy driver and
//! no backend engine (the `proxy` and `backend` crates re-export them where they always were).

#![warn(missing_docs)]

pub mod profile;
pub mod proxy;
