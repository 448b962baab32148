//! The parse-time renderer, through the language's seam: with `ParseOptions::templates` set to
//! [`proxybench_manifests::CHECK`], every item of a templated or built-in growth and every
//! `.j2` manifest is rendered when the scenario is parsed, and one that does not render stops
//! the run at its action's line, with the template's file, line and item.

use scenario::layers::{ScenarioError, Source};
use scenario::{Action, ParseOptions, Scenario};

/// An external gateway on Kubernetes with one backend group (`cafe`): lines 1-19, then the
/// action at 20 (`[[actions]]`, `at`, then the action from line 22).
fn gateway(action: &str) -> String {
    format!(
        r#"name = "gw"

[platform]
kind = "kubernetes"

[proxy]
kind = "external"
[proxy.external]
reload = ["true"]

[[backends]]
name = "cafe"

[[loads]]
name = "l"
url = "http://127.0.0.1:8080/"
duration = "60s"


[[actions]]
at = "1s"
{action}
"#
    )
}

/// A scenario beside its templates, parsed with the renderer.
struct Dir {
    dir: tempfile::TempDir,
}

impl Dir {
    fn new(files: &[(&str, &str)]) -> Dir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        Dir { dir }
    }

    fn parse(&self, action: &str) -> Result<Scenario, ScenarioError> {
        let opts = ParseOptions {
            templates: Some(&proxybench_manifests::CHECK),
            ..ParseOptions::default()
        };
        let src = Source {
            file: self.dir.path().join("s.toml").display().to_string(),
            text: gateway(action),
        };
        Scenario::parse_with(&src, false, &opts)
    }

    fn step(&self, action: &str) -> Action {
        self.parse(action)
            .unwrap_or_else(|e| panic!("{action}: {e}"))
            .cases[0]
            .steps[0]
            .action
            .clone()
    }

    /// Refused at the action's line (20) in one line that names the file and `needle`.
    fn bad(&self, action: &str, needle: &str) {
        let e = self.parse(action).expect_err(action);
        assert_eq!(e.line, Some(20), "{action}: {e}");
        assert!(e.message.contains(needle), "{action}: {e}");
        assert_eq!(e.to_string().lines().count(), 1, "{e}");
        assert!(e.to_string().contains("s.toml:20"), "{e}");
    }
}

const ROUTE: &str = "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  \
                     name: {{ name }}\n  namespace: {{ namespace }}\nspec:\n  rules:\n  - \
                     matches:\n    - path: { type: Exact, value: /r{{ i }} }\n";

/// A templated growth of `t` to 50 items, probed at `/r{{ i }}`.
fn grow(t: &str) -> String {
    format!(
        "grow = {{ what = \"routes\", template = \"{t}\", to = 50, wait = \
         \"condition=Accepted\", probe = {{ selector = \"app=gw\", port = 8080, path = \
         \"/r{{{{ i }}}}\" }} }}"
    )
}

#[test]
fn every_item_of_a_templated_growth_renders_at_parse() {
    // Item 7 renders an unknown variable at the template's line 4; item 3 renders YAML that
    // does not parse.
    let d = Dir::new(&[
        ("route.yaml.j2", ROUTE),
        (
            "bad.yaml.j2",
            &ROUTE.replace(
                "{{ name }}",
                "{% if i == 7 %}{{ nope }}{% else %}{{ name }}{% endif %}",
            ),
        ),
        (
            "yaml.yaml.j2",
            &ROUTE.replace("{{ name }}", "{{ name }}{% if i == 3 %}: [{% endif %}"),
        ),
    ]);
    match d.step(&grow("route.yaml.j2")) {
        Action::Grow(g) => assert_eq!(g.probe.unwrap().path, "/r{{ i }}"),
        other => panic!("{other:?}"),
    }
    d.bad(
        &grow("bad.yaml.j2"),
        "bad.yaml.j2:4: item 7: undefined value",
    );
    d.bad(
        &grow("yaml.yaml.j2"),
        "yaml.yaml.j2:1: item 3: renders invalid YAML",
    );
    d.bad(&grow("none.yaml.j2"), "none.yaml.j2");
    d.bad(
        &grow("route.yaml.j2").replace("/r{{ i }}", "/r{{ j }}"),
        "probe.path:1: item 0: undefined value",
    );
}

#[test]
fn a_built_in_generator_renders_every_item_with_its_parameters() {
    let d = Dir::new(&[]);
    let builtin = "grow = { what = \"routes\", to = 5, gateway = \"infra/gw\", backend_ref = \
                   \"gw:8080\", hostname = \"r{{ i }}.example\", probe = { selector = \
                   \"app=gw\", port = 8080 } }";
    match d.step(builtin) {
        Action::Grow(g) => assert_eq!(g.template.as_deref(), Some("builtin:routes")),
        other => panic!("{other:?}"),
    }
    // The run's backend group, by its stand-in Service.
    match d.step(&builtin.replace("backend_ref = \"gw:8080\"", "backend = \"cafe\"")) {
        Action::Grow(g) => assert_eq!(g.backend.as_deref(), Some("cafe")),
        other => panic!("{other:?}"),
    }
    d.bad(
        &builtin.replace("r{{ i }}.example", "r{{ k }}.example"),
        "hostname hostname:1: item 0: undefined value",
    );
    d.bad(
        &builtin.replace("r{{ i }}.example", "R_{{ i }}"),
        "hostname 'R_0' of item 0 is not a DNS name",
    );
    // The probe sees the generator's parameters: a matches growth probes its newest match.
    let matches = "grow = { what = \"matches\", to = 3, gateway = \"gw\", backend_ref = \
                   \"gw:8080\", path = \"/m\", probe = { selector = \"app=gw\", port = 8080, \
                   path = \"{{ path }}{{ i }}\" } }";
    match d.step(matches) {
        Action::Grow(g) => assert_eq!(g.template.as_deref(), Some("builtin:matches")),
        other => panic!("{other:?}"),
    }
    d.bad(
        &matches.replace("{{ path }}{{ i }}", "{{ i }}"),
        "probe.path renders '0' for item 0: a path starts with '/'",
    );
}

#[test]
fn a_j2_manifest_renders_once_with_the_run_s_backend_services() {
    let svc = "apiVersion: v1\nkind: Service\nmetadata:\n  name: r-{{ run }}\n  namespace: \
               {{ namespace }}\nspec:\n  externalName: {{ backends.cafe }}\n";
    let d = Dir::new(&[
        ("svc.yaml.j2", svc),
        ("tea.yaml.j2", &svc.replace("cafe", "tea")),
    ]);
    match d.step("apply = \"svc.yaml.j2\"") {
        Action::Apply { file, .. } => assert!(file.ends_with("svc.yaml.j2"), "{file:?}"),
        other => panic!("{other:?}"),
    }
    // A group the run does not have is refused at the template's line, with the item.
    d.bad("apply = \"tea.yaml.j2\"", "apply: template ");
    d.bad(
        "delete = \"tea.yaml.j2\"",
        "tea.yaml.j2:7: item 0: undefined value",
    );
}
