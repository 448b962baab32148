//! The analyse stage: a results directory's record ([`record`]: record.json, scenario.toml,
//! requests/) read back and turned into typed results ([`analyse()`]) by the scenario's checks and
//! its named analysis ([`analysis`]: the registry and the built-in analyses), with the theory they
//! check against ([`theory`]). The runner writes the record through [`record`] too.
//!
//! Nothing here reads the machine: no clock, no /proc, no environment variable. What the analyses
//! need of the machine was recorded when the run happened. Scenarios name an analysis; the
//! registry's names reach the scenario parser through [`parse_options`].
#![warn(missing_docs)]

pub mod analyse;
pub mod analysis;
pub mod record;
pub mod streams;
pub mod theory;

pub use analyse::{analyse, AnalyseError};
pub use analysis::{find, names, parse_options, Analysis, CaseInput, Lives, Records, ALL};

#[cfg(test)]
mod catalogue_tests {
    //! The built-in catalogue parses with the registry's analyses, on both platforms.
    use scenario::catalogue::{builtin, BUILTIN};
    use scenario::{ParseOptions, Scenario};

    #[test]
    fn every_builtin_parses_in_both_forms() {
        for (name, _) in BUILTIN {
            let src = builtin(name).unwrap();
            for quick in [false, true] {
                let s = Scenario::parse_with(&src, quick, &crate::parse_options())
                    .unwrap_or_else(|e| panic!("{name} (quick={quick}): {e}"));
                assert_eq!(&s.name, name);
                assert!(!s.description.is_empty());
            }
        }
    }

    /// The same files run on both platforms: each parses with `--platform kubernetes` too.
    #[test]
    fn every_builtin_parses_on_kubernetes() {
        use scenario::{PlatformKind, PlatformOverride};
        let opts = ParseOptions {
            platform: PlatformOverride {
                kind: Some(PlatformKind::Kubernetes),
                ..PlatformOverride::default()
            },
            ..crate::parse_options()
        };
        for (name, _) in BUILTIN {
            let src = builtin(name).unwrap();
            for quick in [false, true] {
                let s = Scenario::parse_with(&src, quick, &opts)
                    .unwrap_or_else(|e| panic!("{name} (quick={quick}): {e}"));
                assert_eq!(s.platform.kind, PlatformKind::Kubernetes);
            }
        }
    }
}
