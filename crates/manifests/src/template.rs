//! Manifest templates of a templated `grow` (minijinja): item i of a growth is the template
//! rendered with `{{ i }}`, `{{ namespace }}`, `{{ run }}`, `{{ name }}` and `{{ backends.GROUP }}`
//! (the Service of the run's backend group GROUP, whose name carries the run's id). An `apply`
//! or `delete` of a file ending in `.j2` is such a template too, rendered once as item 0. The parser renders
//! every item when it checks the file (so a template that does not render, or renders YAML that
//! is not Kubernetes objects, stops the run before its case starts), and the Kubernetes platform
//! renders the same items with the run's own values.

use std::collections::BTreeMap;
use std::path::Path;

/// A built-in generator's parameters ([`crate::generators`]), given to every item beside
/// `i`, `namespace`, `run` and `name`.
pub type Params = BTreeMap<String, serde_json::Value>;

/// What one item of a template is rendered with.
#[derive(Debug, Clone, Copy)]
pub struct ItemVars<'a> {
    /// The item's index, from 0.
    pub i: u32,
    /// The namespace the item's objects go to when they name none.
    pub namespace: &'a str,
    /// A short id of the run (`pb-20261129-153000-1a2b`; `check` when only checked).
    pub run: &'a str,
    /// A built-in generator's parameters (none for a user's template).
    pub params: Option<&'a Params>,
    /// The run's backend groups' Services by group (`{{ backends.cafe }}`): what a route
    /// template sends traffic to, named by the platform (a stand-in when only checked).
    pub backends: Option<&'a BTreeMap<String, String>>,
}

impl ItemVars<'_> {
    /// The name `{{ name }}` gives item i: the run's id and the index, unique per run and item.
    pub fn name(&self) -> String {
        format!("{}-{}", self.run, self.i)
    }
}

/// Why an item of a template could not be made: the template's line (when known) and the item.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}{}: item {item}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct TemplateError {
    /// The template file.
    pub file: String,
    /// The line of the template (of the rendered YAML for invalid YAML) the error is at.
    pub line: Option<usize>,
    /// The item index.
    pub item: u32,
    /// What is wrong.
    pub message: String,
}

/// What `{{ backends.GROUP }}` gives when a file is only checked: a stand-in Service name
/// per group (the platform names the real ones, with the run's id).
pub fn stand_in_backends<'a>(
    groups: impl IntoIterator<Item = &'a String>,
) -> BTreeMap<String, String> {
    groups
        .into_iter()
        .map(|g| (g.clone(), format!("backend-{g}-check")))
        .collect()
}

/// Renders item `vars.i` of template `text` (read from `file`); an undefined variable is an
/// error, not an empty string.
pub fn render_item(file: &Path, text: &str, vars: ItemVars<'_>) -> Result<String, TemplateError> {
    let mut env = minijinja::Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    env.set_keep_trailing_newline(true);
    let mut ctx: BTreeMap<String, minijinja::Value> = vars
        .params
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), minijinja::Value::from_serialize(v)))
        .collect();
    ctx.insert("i".into(), vars.i.into());
    ctx.insert("namespace".into(), vars.namespace.into());
    ctx.insert("run".into(), vars.run.into());
    ctx.insert("name".into(), vars.name().into());
    if let Some(b) = vars.backends {
        ctx.insert("backends".into(), minijinja::Value::from_serialize(b));
    }
    env.render_str(text, ctx).map_err(|e| TemplateError {
        file: file.display().to_string(),
        line: e.line(),
        item: vars.i,
        message: one_line(&match e.detail() {
            Some(d) => format!("{}: {d}", e.kind()),
            None => e.kind().to_string(),
        }),
    })
}

/// Renders item `vars.i` and checks that it is a YAML stream of Kubernetes objects (each a
/// mapping with `apiVersion`, `kind` and `metadata.name`), as `apply` will read it; at least one.
pub fn check_item(file: &Path, text: &str, vars: ItemVars<'_>) -> Result<String, TemplateError> {
    let out = render_item(file, text, vars)?;
    let err = |line: usize, message: String| TemplateError {
        file: file.display().to_string(),
        line: Some(line),
        item: vars.i,
        message,
    };
    let mut objects = 0;
    for (line, doc) in documents(&out) {
        if doc.lines().all(|l| {
            let t = l.trim();
            t.is_empty() || t.starts_with('#')
        }) {
            continue;
        }
        let v: serde_json::Value = serde_saphyr::from_str(&doc).map_err(|e| {
            err(
                line,
                format!("renders invalid YAML: {}", one_line(&e.to_string())),
            )
        })?;
        if v.is_null() {
            continue;
        }
        for (field, x) in [
            ("apiVersion", &v["apiVersion"]),
            ("kind", &v["kind"]),
            ("metadata.name", &v["metadata"]["name"]),
        ] {
            if !x.is_string() {
                return Err(err(
                    line,
                    format!("renders an object without {field} (a Kubernetes object needs it)"),
                ));
            }
        }
        objects += 1;
    }
    if objects == 0 {
        return Err(err(1, "renders no Kubernetes object".into()));
    }
    Ok(out)
}

/// The `---`-separated documents of a YAML stream, each with the line it starts on.
fn documents(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let (mut cur, mut start) = (String::new(), 1);
    for (n, l) in text.lines().enumerate() {
        if l.trim_end() == "---" {
            out.push((start, std::mem::take(&mut cur)));
            start = n + 2;
            continue;
        }
        cur.push_str(l);
        cur.push('\n');
    }
    out.push((start, cur));
    out
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(i: u32) -> ItemVars<'static> {
        ItemVars {
            i,
            namespace: "ns",
            run: "check",
            params: None,
            backends: None,
        }
    }

    #[test]
    fn a_template_routes_to_the_run_s_backend_services_by_group() {
        let groups = ["cafe".to_string(), "tea".to_string()];
        let stand_in = stand_in_backends(&groups);
        let t = "apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ backends.cafe }}\n";
        let mut v = vars(0);
        v.backends = Some(&stand_in);
        let out = check_item(Path::new("t.yaml.j2"), t, v).unwrap();
        assert!(out.contains("name: backend-cafe-check\n"), "{out}");
        let real: BTreeMap<String, String> =
            [("cafe".to_string(), "backend-cafe-pb-1a2b".to_string())].into();
        v.backends = Some(&real);
        let out = check_item(Path::new("t.yaml.j2"), t, v).unwrap();
        assert!(out.contains("name: backend-cafe-pb-1a2b\n"), "{out}");
        // A group the run does not have is an error, not an empty name.
        let e = check_item(Path::new("t.yaml.j2"), &t.replace("cafe", "milk"), v).unwrap_err();
        assert_eq!(e.line, Some(4), "{e}");
        // Without the map (a generator's hostname), `backends` is undefined.
        assert!(check_item(Path::new("t.yaml.j2"), t, vars(0)).is_err());
    }

    #[test]
    fn items_render_with_their_index_namespace_and_name() {
        let t = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ name }}\n  namespace: \
                 {{ namespace }}\ndata:\n  path: /r{{ i }}\n";
        let out = check_item(Path::new("t.yaml.j2"), t, vars(7)).unwrap();
        assert!(out.contains("name: check-7\n"), "{out}");
        assert!(
            out.contains("namespace: ns\n") && out.contains("path: /r7\n"),
            "{out}"
        );
    }

    #[test]
    fn a_template_that_does_not_render_names_its_line_and_the_item() {
        let t = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ nope }}\n";
        let e = check_item(Path::new("t.yaml.j2"), t, vars(3)).unwrap_err();
        assert_eq!((e.line, e.item), (Some(4), 3), "{e}");
        assert!(e.to_string().starts_with("t.yaml.j2:4: item 3: "), "{e}");
        let t = "apiVersion: v1\n{% if i %}\nkind: x\n";
        let e = check_item(Path::new("t.yaml.j2"), t, vars(0)).unwrap_err();
        assert!(e.line.is_some(), "{e}");
    }

    #[test]
    fn invalid_yaml_and_objects_without_a_name_are_refused() {
        let t = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [x\n";
        let e = check_item(Path::new("t"), t, vars(1)).unwrap_err();
        assert!(e.message.contains("invalid YAML"), "{e}");
        let t = "a: 1\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  labels: {}\n";
        let e = check_item(Path::new("t"), t, vars(2)).unwrap_err();
        assert_eq!(e.line, Some(1), "{e}");
        let e = check_item(Path::new("t"), "# nothing\n", vars(0)).unwrap_err();
        assert!(e.message.contains("no Kubernetes object"), "{e}");
    }
}
