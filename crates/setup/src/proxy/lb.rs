//! The load-balancing method of an upstream, written as a word (`lb = "least_conn"`) or, for
//! hashing, as a table (`lb = { hash = "$request_uri", consistent = true }`).

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// How nginx picks a server of an upstream for each request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Lb {
    /// Weighted round robin (nginx's default).
    #[default]
    RoundRobin,
    /// The server with the fewest active connections.
    LeastConn,
    /// A server at random.
    Random,
    /// Two servers at random, then the one with fewer connections (`random two least_conn`).
    RandomTwoLeastConn,
    /// By the first three octets of the client's IPv4 address (every loopback client is the same).
    IpHash,
    /// By a key built from nginx variables; `consistent` uses ketama hashing.
    Hash {
        /// The key expression, e.g. `$request_uri`.
        key: String,
        /// Ketama consistent hashing (fewer keys move when servers change).
        consistent: bool,
    },
}

const WORDS: &str = "round_robin, least_conn, random, random_two_least_conn, ip_hash, or { hash = \"$request_uri\", consistent = true }";

impl Lb {
    /// The word of a method without parameters.
    fn word(&self) -> Option<&'static str> {
        Some(match self {
            Lb::RoundRobin => "round_robin",
            Lb::LeastConn => "least_conn",
            Lb::Random => "random",
            Lb::RandomTwoLeastConn => "random_two_least_conn",
            Lb::IpHash => "ip_hash",
            Lb::Hash { .. } => return None,
        })
    }
}

impl Serialize for Lb {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            Lb::Hash { key, consistent } => {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("hash", key)?;
                m.serialize_entry("consistent", consistent)?;
                m.end()
            }
            other => s.serialize_str(other.word().unwrap_or_default()),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HashSpec {
    hash: String,
    #[serde(default)]
    consistent: bool,
}

struct LbVisitor;

impl<'de> Visitor<'de> for LbVisitor {
    type Value = Lb;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a load-balancing method: {WORDS}")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Lb, E> {
        Ok(match v {
            "round_robin" => Lb::RoundRobin,
            "least_conn" => Lb::LeastConn,
            "random" => Lb::Random,
            "random_two_least_conn" => Lb::RandomTwoLeastConn,
            "ip_hash" => Lb::IpHash,
            other => {
                return Err(E::custom(format!(
                    "unknown load-balancing method '{other}' (use {WORDS})"
                )))
            }
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Lb, A::Error> {
        let spec = HashSpec::deserialize(de::value::MapAccessDeserializer::new(map))?;
        if spec.hash.trim().is_empty() {
            return Err(de::Error::custom("lb hash key is empty"));
        }
        Ok(Lb::Hash {
            key: spec.hash,
            consistent: spec.consistent,
        })
    }
}

impl<'de> Deserialize<'de> for Lb {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Lb, D::Error> {
        d.deserialize_any(LbVisitor)
    }
}
