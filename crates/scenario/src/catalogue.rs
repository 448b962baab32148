//! The built-in scenarios, embedded from `scenarios/*.toml` so the binary carries them.

use crate::layers::Source;
use crate::{ParseOptions, Scenario};

/// (name, file text) of every built-in scenario, in the order `proxybench scenarios` lists them.
pub const BUILTIN: &[(&str, &str)] = &[
    ("default", include_str!("../../../scenarios/default.toml")),
    (
        "burst-handling",
        include_str!("../../../scenarios/burst-handling.toml"),
    ),
    (
        "proxy-overhead",
        include_str!("../../../scenarios/proxy-overhead.toml"),
    ),
    (
        "load-balancing",
        include_str!("../../../scenarios/load-balancing.toml"),
    ),
    (
        "zero-downtime-scaling",
        include_str!("../../../scenarios/zero-downtime-scaling.toml"),
    ),
    ("scale", include_str!("../../../scenarios/scale.toml")),
    (
        "long-lived-under-churn",
        include_str!("../../../scenarios/long-lived-under-churn.toml"),
    ),
];

/// The built-in scenario called `name`, as a source named `<builtin>/NAME.toml`.
pub fn builtin(name: &str) -> Option<Source> {
    BUILTIN
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(n, t)| Source {
            file: format!("<builtin>/{n}.toml"),
            text: (*t).to_string(),
        })
}

/// Name and description of every built-in scenario, each parsed with `opts` (which name the
/// analyses the catalogue's scenarios may use).
pub fn list(opts: &ParseOptions) -> Vec<(String, String)> {
    BUILTIN
        .iter()
        .map(|(n, t)| {
            let src = Source {
                file: format!("<builtin>/{n}.toml"),
                text: (*t).to_string(),
            };
            let desc = Scenario::parse_with(&src, false, opts)
                .map(|s| s.description)
                .unwrap_or_else(|e| format!("(does not parse: {e})"));
            (n.to_string(), desc)
        })
        .collect()
}
