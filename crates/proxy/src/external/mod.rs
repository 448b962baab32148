//! `kind = "external"`: a proxy the user already runs, configured by hand. proxybench renders,
//! starts and stops nothing of it. A replica attaches: it notes the log files' sizes at the run's
//! start (the run reads them from there), finds the processes named by `processes` for CPU and
//! memory, and runs the user's `reload` command when a reload is asked for, timed from the
//! command's start to its exit (there is no admin listener to show the new generation).

mod replica;

pub use replica::Replica;

use crate::config::{External as ExternalCfg, ProxyConfig};
use crate::driver::{self, Checked, Refusal, RenderContext, Rendered};
use crate::features::Support;
use crate::{process, Error, Feature};
use std::path::Path;
use std::time::Duration;

/// The file name the attach settings are "rendered" under (a copy lands in the results' configs).
pub const FILE: &str = "external.json";

/// Why every feature of the model is refused for an external target.
const NOT_RENDERED: &str =
    "an external target runs its own config; proxybench renders nothing for it";

/// The external driver, as the run sees it through [`driver::Driver`].
#[derive(Debug, Clone, Copy, Default)]
pub struct External;

/// The driver as the registry names it ([`crate::driver()`] hands it out).
pub static DRIVER: External = External;

impl driver::Driver for External {
    fn kind(&self) -> crate::ProxyKind {
        crate::ProxyKind::External
    }

    fn version(&self) -> Result<String, Error> {
        Ok(describe(&ExternalCfg::default()))
    }

    fn checker(&self) -> &'static str {
        "the external target's files and reload program"
    }

    fn workers(&self, _n: u32) -> Option<String> {
        None
    }

    fn support(&self, _feature: Feature) -> Support {
        Support::No(NOT_RENDERED)
    }

    fn render(&self, cfg: &ProxyConfig, _ctx: &RenderContext) -> Result<Rendered, Error> {
        let ext = cfg.external.as_ref().ok_or_else(|| {
            Error::Invalid("kind = \"external\" needs a [proxy.external] table".into())
        })?;
        let text = serde_json::to_string_pretty(ext)
            .map_err(|e| Error::Invalid(format!("[proxy.external]: {e}")))?;
        Ok(Rendered { text, file: FILE })
    }

    fn check(&self, rendered: &Rendered, _dir: &Path) -> Result<Result<Checked, Refusal>, Error> {
        let ext = parse(rendered)?;
        let refuse = |message: String| {
            Ok(Err(Refusal {
                message,
                item: None,
            }))
        };
        for (what, log) in [
            ("access_log", &ext.access_log),
            ("error_log", &ext.error_log),
        ] {
            if let Some(l) = log {
                if let Err(e) = readable(&l.path) {
                    return Ok(Err(Refusal {
                        message: format!("{what} {}: {e}", l.path.display()),
                        item: Some(format!("external.{what}")),
                    }));
                }
            }
        }
        if let Some(program) = ext.reload.first() {
            if !runnable(program) {
                return refuse(format!(
                    "reload: no program '{program}' (not a file, nor found in PATH)"
                ));
            }
        }
        Ok(Ok(Checked {
            took: Duration::ZERO,
            warnings: Vec::new(),
        }))
    }

    fn start(
        &self,
        name: &str,
        ctx: &RenderContext,
        rendered: &Rendered,
    ) -> Result<Box<dyn driver::Replica>, Error> {
        Ok(Box::new(Replica::attach(
            name,
            &ctx.prefix,
            parse(rendered)?,
            ctx.generation,
        )?))
    }
}

/// The attach settings back from their rendered form.
fn parse(rendered: &Rendered) -> Result<ExternalCfg, Error> {
    serde_json::from_str(&rendered.text)
        .map_err(|e| Error::Invalid(format!("external: not an attach record: {e}")))
}

/// Whether the run can read a log of the user's: a file that opens, or one that does not exist
/// yet in a directory that does (Caddy creates a site's log file at its first request, so a
/// Caddy started just before the run has none; the run then reads it whole once it appears).
fn readable(path: &Path) -> std::io::Result<()> {
    use std::io::{Error, ErrorKind};
    match std::fs::File::open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => {
            let dir = path.parent().unwrap_or(Path::new("/"));
            match std::fs::metadata(dir) {
                Ok(m) if m.is_dir() => Ok(()),
                Ok(_) => Err(Error::new(
                    ErrorKind::NotADirectory,
                    format!("{} is not a directory", dir.display()),
                )),
                Err(e) => Err(Error::new(
                    e.kind(),
                    format!("its directory {}: {e}", dir.display()),
                )),
            }
        }
        Err(e) => Err(e),
    }
}

/// True when `program` is a file, or a name found in `PATH`.
fn runnable(program: &str) -> bool {
    if program.contains('/') {
        return Path::new(program).is_file();
    }
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
        .unwrap_or(false)
}

/// What env.json says of an external target: that proxybench did not start it, and the
/// executable of the processes named by `processes`, when some run.
pub fn describe(ext: &ExternalCfg) -> String {
    let mut s = String::from("external (not started by proxybench)");
    if let Some(name) = &ext.processes {
        let exe = process::by_comm(name)
            .first()
            .and_then(|p| std::fs::read_link(format!("/proc/{p}/exe")).ok());
        match exe {
            Some(exe) => s.push_str(&format!(": {}", exe.display())),
            None => s.push_str(&format!(": no process named '{name}' running")),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::Driver;

    fn cfg(text: &str) -> ProxyConfig {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn an_external_config_carries_no_model_and_needs_its_table() {
        let ok = cfg("kind = \"external\"\n[external]\nprocesses = \"nginx\"\n");
        ok.validate().unwrap();
        let msg = |t: &str| cfg(t).validate().unwrap_err().to_string();
        assert!(msg("kind = \"external\"\n").contains("needs a [proxy.external] table"));
        assert!(msg("[external]\n").contains("for kind = \"external\" only"));
        assert!(
            msg("kind = \"external\"\n[external]\n[[listeners]]\nname = \"h\"\n")
                .contains("must not carry listeners")
        );
        assert!(
            msg("kind = \"external\"\n[external]\nresolve = \"10.0.0.1\"\n")
                .contains("127.0.0.0/8")
        );
        assert!(
            msg("kind = \"external\"\n[external]\nprocesses = \"a-very-long-process-name\"\n")
                .contains("15 characters")
        );
        // Every model feature is refused: nothing is rendered for an external target.
        for f in Feature::ALL {
            assert!(matches!(External.support(f), Support::No(_)));
        }
    }

    #[test]
    fn the_attach_settings_round_trip_through_their_rendered_form() {
        let c = cfg(
            "kind = \"external\"\n[external]\nresolve = \"127.0.0.1\"\nreload = \
                     [\"true\"]\naccess_log = { path = \"/dev/null\", format = \"combined\" }\n",
        );
        let r = External.render(&c, &RenderContext::default()).unwrap();
        assert_eq!(r.file, FILE);
        assert_eq!(&parse(&r).unwrap(), c.external.as_ref().unwrap());
        let dir = tempfile::tempdir().unwrap();
        assert!(External.check(&r, dir.path()).unwrap().is_ok());
        // A log not there yet is awaited; one whose directory is not there is refused, naming
        // the item, so the refusal points at its scenario line.
        let log = |path: &Path| {
            let c = cfg(&format!(
                "kind = \"external\"\n[external]\naccess_log = {{ path = \"{}\", format = \
                 \"caddy\" }}\n",
                path.display()
            ));
            let r = External.render(&c, &RenderContext::default()).unwrap();
            External.check(&r, dir.path()).unwrap()
        };
        assert!(log(&dir.path().join("later.log")).is_ok());
        let refusal = log(&dir.path().join("no-dir/later.log")).unwrap_err();
        assert_eq!(refusal.item.as_deref(), Some("external.access_log"));
        assert_eq!(
            refusal.message,
            format!(
                "access_log {}: its directory {}: No such file or directory (os error 2)",
                dir.path().join("no-dir/later.log").display(),
                dir.path().join("no-dir").display()
            )
        );
        let missing = cfg("kind = \"external\"\n[external]\nreload = [\"/no/such/program\"]\n");
        let r = External
            .render(&missing, &RenderContext::default())
            .unwrap();
        let refusal = External.check(&r, dir.path()).unwrap().unwrap_err();
        assert!(refusal.message.contains("/no/such/program"), "{refusal:?}");
    }
}
