//! The analysis' prose, loaded from `crates/analysis/data/zero_downtime.toml`.

use crate::analysis::common::{self, Texts};
use std::fmt::Display;
use std::sync::LazyLock;

/// The analysis' data file.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Data {
    text: Texts,
}

static DATA: LazyLock<Data> = LazyLock::new(|| {
    common::parse(
        "zero_downtime",
        include_str!("../../../data/zero_downtime.toml"),
    )
});

/// A prose template of this analysis.
pub fn text(key: &str) -> &'static str {
    DATA.text.get(key)
}

/// A prose template filled from the run.
pub fn fill(key: &str, args: &[(&str, &dyn Display)]) -> String {
    DATA.text.fill(key, args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_file_parses_and_has_every_text_the_code_uses() {
        common::assert_keys(
            "zero_downtime",
            &DATA.text,
            &[
                include_str!("checks.rs"),
                include_str!("tables.rs"),
                include_str!("replicas.rs"),
                include_str!("summary.rs"),
                include_str!("../zero_downtime.rs"),
            ],
        );
    }
}
