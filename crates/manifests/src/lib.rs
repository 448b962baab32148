//! The manifests a scenario names as templates, rendered: a templated growth's items, a built-in
//! Gateway API generator's ([`generators`]), and an `apply` or `delete` of a `.j2` file
//! ([`template`]). The scenario language names templates and asks for them to be rendered at
//! parse through [`scenario::Templates`], which [`CHECK`] implements; the Kubernetes platform
//! renders the same items with the run's own values. The language and its readers (the
//! analysis) carry no template engine.
#![warn(missing_docs)]

pub mod generators;
pub mod template;

use generators::{params, source, stand_in_certificate, BackendRef};
use scenario::generators::{backend_ref, BUILTIN};
use scenario::{GrowSpec, TemplateRefusal, Templates};
use std::collections::BTreeMap;
use std::path::Path;
use template::{check_item, render_item, stand_in_backends, ItemVars, Params};

/// The parse-time renderer: what `scenario::ParseOptions::templates` is given by a run, a
/// check and a cluster's `k8s` commands.
pub static CHECK: Check = Check;

/// Renders a scenario's templates at parse with stand-in values (run `check`, Services
/// `backend-GROUP-check`, a certificate that only looks like PEM).
#[derive(Debug, Clone, Copy)]
pub struct Check;

impl Templates for Check {
    fn check_manifest(
        &self,
        path: &Path,
        namespace: &str,
        groups: &BTreeMap<String, u32>,
    ) -> Result<(), TemplateRefusal> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| TemplateRefusal(format!("{}: {e}", path.display())))?;
        let backends = stand_in_backends(groups.keys());
        let vars = ItemVars {
            i: 0,
            namespace,
            run: "check",
            params: None,
            backends: Some(&backends),
        };
        check_item(path, &text, vars).map_err(|e| TemplateRefusal(format!("template {e}")))?;
        Ok(())
    }

    fn check_growth(
        &self,
        g: &GrowSpec,
        namespace: &str,
        groups: &BTreeMap<String, u32>,
    ) -> Result<(), TemplateRefusal> {
        let refuse = |m: String| TemplateRefusal(m);
        let t = g.template.as_deref().unwrap_or_default();
        let text = source(t).map_err(|e| refuse(format!("template {t}: {e}")))?;
        let params = match t.starts_with(BUILTIN) {
            true => Some(stand_in_params(g, namespace)?),
            false => None,
        };
        let backends = stand_in_backends(groups.keys());
        for i in 0..g.to {
            let vars = ItemVars {
                i,
                namespace,
                run: "check",
                params: params.as_ref(),
                backends: Some(&backends),
            };
            check_item(Path::new(t), &text, vars).map_err(|e| refuse(format!("template {e}")))?;
            let Some(probe) = &g.probe else { continue };
            for (what, s) in [("path", Some(&probe.path)), ("host", probe.host.as_ref())] {
                let Some(s) = s else { continue };
                let r = render_item(Path::new(&format!("probe.{what}")), s, vars)
                    .map_err(|e| refuse(e.to_string()))?;
                if what == "path" && !r.starts_with('/') {
                    return Err(refuse(format!(
                        "probe.path renders '{r}' for item {i}: a path starts with '/'"
                    )));
                }
            }
        }
        Ok(())
    }
}

/// A built-in generator's parameters at parse: the backend group's Service is given the
/// stand-in name `backend-GROUP` on port 8080 (the platform names the real one), or the
/// growth's `backend_ref`.
fn stand_in_params(g: &GrowSpec, namespace: &str) -> Result<Params, TemplateRefusal> {
    let stand_in = g.backend.as_ref().map(|b| format!("backend-{b}"));
    let backend = match (&stand_in, &g.backend_ref) {
        (Some(service), _) => BackendRef {
            service,
            port: 8080,
        },
        (None, Some(r)) => {
            let (service, port) = backend_ref(r)
                .ok_or_else(|| TemplateRefusal(format!("backend_ref '{r}' is not SERVICE:PORT")))?;
            BackendRef { service, port }
        }
        (None, None) => {
            return Err(TemplateRefusal(
                "a built-in generator needs a backend".into(),
            ))
        }
    };
    params(g, namespace, "check", backend, &stand_in_certificate)
        .map_err(|e| TemplateRefusal(e.to_string()))
}
