//! Proxies under test: a neutral config model ([`config`]) that scenarios embed as their `[proxy]`
//! table, the capability table of what each proxy can express of it ([`features`]), and one
//! driver per proxy behind one seam ([`driver`]): it renders the model, checks it with the proxy's
//! own validator, runs replicas as child processes, reloads them, stops them and says where their
//! logs are, which [`logs`] parses into one record shape. Nothing here knows about load
//! generation.

#![warn(missing_docs)]

mod admin;
pub mod caddy;
pub mod driver;
mod error;
pub mod external;
pub mod haproxy;
pub mod logs;
pub mod nginx;
mod process;
mod records;
mod replica;
pub mod tls;

/// The neutral config model, as data in the sys-free setup crate (the scenario language and the
/// analyses read it without the drivers), at the path it always had.
pub use setup::proxy as config;
/// The capability table's vocabulary, with the model it describes.
pub use setup::proxy::features;

pub use admin::{GENERATION_HEADER, GENERATION_PATH};
pub use config::{ProxyConfig, ProxyKind};
pub use driver::{
    Checked, ContainerCommands, Driver, LogFiles, Refusal, RenderContext, Rendered, Replica,
    ReplicaHandle, StopMode,
};
pub use error::Error;
pub use features::{Feature, Support};
pub use process::{run_bounded, PinSpawns, Ran, Supervised};
pub use tls::TlsFiles;

/// The driver of a proxy kind: every kind of the registry (`ProxyKind`) has one, in the folder
/// of its name.
pub fn driver(kind: ProxyKind) -> &'static dyn Driver {
    match kind {
        ProxyKind::Nginx => &nginx::DRIVER,
        ProxyKind::Haproxy => &haproxy::DRIVER,
        ProxyKind::Caddy => &caddy::DRIVER,
        ProxyKind::External => &external::DRIVER,
    }
}

/// The version of the proxy a config runs, for env.json: the driver's, or for an external
/// target what proxybench can say of a proxy it did not start.
pub fn version_of(cfg: &ProxyConfig) -> Result<String, Error> {
    match (cfg.kind, &cfg.external) {
        (ProxyKind::External, Some(ext)) => Ok(external::describe(ext)),
        (kind, _) => driver(kind).version(),
    }
}

/// Uses of features that the kind's driver cannot express, each with the driver's reason, in
/// model order: a scenario with any is refused before anything starts.
pub fn unsupported(kind: ProxyKind, cfg: &ProxyConfig) -> Vec<(features::Use, &'static str)> {
    let d = driver(kind);
    cfg.features()
        .into_iter()
        .filter_map(|u| match d.support(u.feature) {
            Support::No(why) => Some((u, why)),
            _ => None,
        })
        .collect()
}

/// Uses of features that the kind's driver expresses with a different behaviour, each with the
/// driver's note (deduplicated by feature): the report says so wherever they are used.
pub fn differences(kind: ProxyKind, cfg: &ProxyConfig) -> Vec<(Feature, &'static str)> {
    let d = driver(kind);
    let mut out: Vec<(Feature, &'static str)> = Vec::new();
    for u in cfg.features() {
        if let Support::Differs(note) = d.support(u.feature) {
            if !out.iter().any(|(f, _)| *f == u.feature) {
                out.push((u.feature, note));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logs::{LogFormat, Parse};

    /// The registry holds together: every kind's driver is of that kind and says its name, the
    /// name reads back as the kind, every log format is parsed by exactly one driver (the kind's
    /// that lists it), and a container's access lines are in one of its own driver's formats.
    #[test]
    fn the_registry_is_consistent() {
        for &k in ProxyKind::ALL {
            let d = driver(k);
            assert_eq!(d.kind(), k);
            assert_eq!(d.name(), k.name());
            assert_eq!(ProxyKind::parse(k.name()), Some(k));
            if let Some(c) = d.container() {
                assert!(d.log_formats().contains(&c.log_format), "{k}");
            }
        }
        for &f in LogFormat::ALL {
            let owners: Vec<ProxyKind> = ProxyKind::ALL
                .iter()
                .copied()
                .filter(|&k| driver(k).log_formats().contains(&f))
                .collect();
            assert_eq!(owners, vec![f.kind()], "{}", f.name());
            assert_eq!(f.driver().kind(), f.kind());
        }
        assert_eq!(ProxyKind::parse("squid"), None);
    }

    /// The driver folders of crates/proxy/src are the registry's kinds, one each by name: a
    /// folder without a kind (or a kind whose driver lives elsewhere) is caught here.
    #[test]
    fn the_driver_folders_are_the_kinds() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut folders: Vec<String> = std::fs::read_dir(&src)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.join("mod.rs").is_file())
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        folders.sort();
        let mut kinds: Vec<String> = ProxyKind::ALL
            .iter()
            .map(|k| k.name().to_string())
            .collect();
        kinds.sort();
        assert_eq!(folders, kinds);
        for &k in ProxyKind::ALL {
            let mod_rs = std::fs::read_to_string(src.join(k.name()).join("mod.rs")).unwrap();
            assert!(
                mod_rs.contains("pub static DRIVER"),
                "{k}: no DRIVER in its mod.rs"
            );
        }
    }
}
