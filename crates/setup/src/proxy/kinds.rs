//! The registry of proxy kinds: the list at the foot of this file names every kind on one line,
//! and [`ProxyKind`] and [`LogFormat`] are made of it. The proxy crate declares a driver module
//! per kind and matches every kind to its driver (a match the compiler checks is whole, and a test
//! checks against the driver folders). Adding a kind is one line here, one folder of
//! crates/proxy/src/ and one arm of `proxy::driver`.

use serde::{Deserialize, Serialize};

macro_rules! model {
    ($($(#[$doc:meta])* $kind:ident $name:tt [$($format:ident $fname:tt),*],)*) => {
        /// The proxy implementation a config is rendered for: one variant per line of the
        /// registry.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum ProxyKind {
            $($(#[$doc])* #[serde(rename = $name)] $kind,)*
        }

        impl ProxyKind {
            /// Every kind, in the order comparisons list them (the registry's).
            pub const ALL: &'static [ProxyKind] = &[$(ProxyKind::$kind),*];

            /// The kind as scenarios and the command line spell it.
            pub fn name(self) -> &'static str {
                match self {
                    $(ProxyKind::$kind => $name,)*
                }
            }

            /// The log formats this kind's proxy writes and its driver parses.
            pub fn log_formats(self) -> &'static [LogFormat] {
                match self {
                    $(ProxyKind::$kind => &[$(LogFormat::$format),*],)*
                }
            }
        }

        /// How an access log (and the error log beside it) is written: one variant per format
        /// in the registry's brackets. Each is parsed by the driver of the kind that writes it
        /// (crates/proxy/src/KIND/logs.rs says what its lines look like); an external target
        /// names the format its own proxy writes (`[proxy.external] log_format`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
        pub enum LogFormat {
            $($(
                #[doc = concat!("`", $fname, "`: written by ", $name, ", parsed by its driver.")]
                #[serde(rename = $fname)]
                $format,
            )*)*
        }

        impl LogFormat {
            /// Every format, in the registry's order.
            pub const ALL: &'static [LogFormat] = &[$($(LogFormat::$format,)*)*];

            /// The format as scenarios spell it.
            pub fn name(self) -> &'static str {
                match self {
                    $($(LogFormat::$format => $fname,)*)*
                }
            }

            /// The kind whose proxy writes this format, and whose driver parses it.
            pub fn kind(self) -> ProxyKind {
                match self {
                    $($(LogFormat::$format => ProxyKind::$kind,)*)*
                }
            }
        }
    };
}

// Every proxy kind, one line each: `Variant "name" [Format "format-name", ...]`. `Variant` is
// the [`ProxyKind`] variant (its doc comment goes above the line), `"name"` the kind as scenarios
// and the command line spell it (and its driver's folder in crates/proxy/src/), and the brackets
// the [`LogFormat`]s its proxy writes and its driver parses, with their names. The first line is
// the default kind and the first format of the first line the default format.
model! {
    /// nginx from the distribution's package.
    Nginx "nginx" [NginxJson "nginx-json", Combined "combined"],
    /// HAProxy from the distribution's package.
    Haproxy "haproxy" [Haproxy "haproxy"],
    /// Caddy from the distribution's package (JSON config loaded through its admin API).
    Caddy "caddy" [Caddy "caddy"],
    /// A proxy the user already runs: proxybench starts, renders and stops nothing of it.
    External "external" [],
}

impl Default for ProxyKind {
    /// The registry's first kind (nginx).
    fn default() -> ProxyKind {
        ProxyKind::ALL[0]
    }
}

impl Default for LogFormat {
    /// The registry's first format (nginx's JSON).
    fn default() -> LogFormat {
        LogFormat::ALL[0]
    }
}

impl ProxyKind {
    /// The kind spelled `s`, if any.
    pub fn parse(s: &str) -> Option<ProxyKind> {
        Self::ALL.iter().copied().find(|k| k.name() == s)
    }
}

impl std::fmt::Display for ProxyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `kind = ...` or `format = ...` line of a scenario.
    #[derive(Deserialize)]
    struct Line<T> {
        v: T,
    }

    fn read<T: for<'de> Deserialize<'de>>(name: &str) -> T {
        toml::from_str::<Line<T>>(&format!("v = \"{name}\""))
            .unwrap()
            .v
    }

    /// The names serde reads are the registry's, so a scenario's `kind = "caddy"` and the
    /// command line's `--proxy caddy` mean the same kind; every format belongs to the kind that
    /// lists it.
    #[test]
    fn serde_names_are_the_registry_names() {
        for &k in ProxyKind::ALL {
            assert_eq!(read::<ProxyKind>(k.name()), k);
            assert_eq!(ProxyKind::parse(k.name()), Some(k));
            for &f in k.log_formats() {
                assert_eq!(f.kind(), k);
            }
        }
        for &f in LogFormat::ALL {
            assert_eq!(read::<LogFormat>(f.name()), f);
            assert!(f.kind().log_formats().contains(&f));
        }
        assert_eq!(ProxyKind::default(), ProxyKind::Nginx);
        assert_eq!(LogFormat::default(), LogFormat::NginxJson);
    }
}
