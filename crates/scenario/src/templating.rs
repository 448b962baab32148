//! The seam between the language and a template engine. A scenario names manifest templates:
//! an `apply` or `delete` of a `.j2` file, a templated growth, a built-in generator's growth.
//! The parser has every item of each rendered before anything starts, so a template that does
//! not render is refused at its action's line. The rendering lives with the manifests
//! (`proxybench-manifests`), and the parser asks for it through [`Templates`], given in
//! [`crate::ParseOptions::templates`]. Without one, templates are not rendered at parse: that
//! is how the analysis re-reads a recorded run without a template engine.

use crate::spec::GrowSpec;
use std::collections::BTreeMap;
use std::path::Path;

/// Why a template did not render, in the template engine's words (its file, line and item);
/// the parser places it at the action's line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TemplateRefusal(pub String);

/// What the parser asks of the template engine that renders a run's manifests.
pub trait Templates: std::fmt::Debug + Sync {
    /// Renders the `apply` or `delete` template at `path` once (item 0) as the run will, with
    /// stand-ins for the run's id and for the Services of its backend `groups`; refused when
    /// it does not make Kubernetes objects.
    fn check_manifest(
        &self,
        path: &Path,
        namespace: &str,
        groups: &BTreeMap<String, u32>,
    ) -> Result<(), TemplateRefusal>;

    /// Renders every item of growth `g` (its `template` a resolved path or a built-in
    /// generator's `builtin:WHAT`), and its probe's path and host for each item, in
    /// `namespace`, with stand-ins for the Services of the run's backend `groups`.
    fn check_growth(
        &self,
        g: &GrowSpec,
        namespace: &str,
        groups: &BTreeMap<String, u32>,
    ) -> Result<(), TemplateRefusal>;
}
