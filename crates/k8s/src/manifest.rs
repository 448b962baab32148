//! Any multi-document YAML manifest, applied or deleted through API discovery and server-side
//! apply, like `kubectl apply --server-side`: the kinds need not be known to this crate (Gateway
//! API routes, CRDs and their objects). Errors name the file, the document and the API server's
//! message.

use crate::cluster::{Cluster, FIELD_MANAGER};
use crate::error::{split, Error};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiCapabilities, ApiResource, Scope};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One document of a manifest file.
#[derive(Debug, Clone)]
pub struct Document {
    /// 1-based index among the file's documents (empty documents count).
    pub index: usize,
    /// The line the document starts on (1-based).
    pub line: usize,
    /// The object, as the file gives it.
    pub object: serde_json::Value,
}

impl Document {
    /// `Kind/name` of the object, for messages.
    pub fn describe(&self) -> String {
        format!(
            "{}/{}",
            self.object["kind"].as_str().unwrap_or("?"),
            self.object["metadata"]["name"].as_str().unwrap_or("?")
        )
    }
}

/// What happened to one object of a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The object's kind.
    pub kind: String,
    /// The object's name.
    pub name: String,
    /// Its namespace; `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// `applied`, `deleted`, or `absent` (a delete of an object that did not exist).
    pub action: &'static str,
}

/// Splits and parses a manifest file into its non-empty documents (`kind: List` documents are
/// expanded into their items); each must have `apiVersion`, `kind` and `metadata.name`.
pub fn parse_manifest(file: &Path) -> Result<Vec<Document>, Error> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| Error::io(format!("manifest {}", file.display()), e))?;
    parse_text(file, &text)
}

/// [`parse_manifest`] on text already read; `file` names it in errors.
pub fn parse_text(file: &Path, text: &str) -> Result<Vec<Document>, Error> {
    let mut docs = Vec::new();
    for (index, (line, body)) in split_documents(text).into_iter().enumerate() {
        let index = index + 1;
        let err = |object: String, message: String| Error::Manifest {
            file: file.to_path_buf(),
            doc: index,
            line,
            object,
            message,
        };
        if body.lines().all(|l| {
            let t = l.trim();
            t.is_empty() || t.starts_with('#')
        }) {
            continue;
        }
        let value: serde_json::Value = serde_saphyr::from_str(&body).map_err(|e| {
            err(
                String::new(),
                format!("not valid YAML: {}", crate::error::one_line(&e.to_string())),
            )
        })?;
        if value.is_null() {
            continue;
        }
        let items = if value["kind"].as_str().is_some_and(|k| k.ends_with("List"))
            && value["items"].is_array()
        {
            value["items"].as_array().cloned().unwrap_or_default()
        } else {
            vec![value]
        };
        for object in items {
            let d = Document {
                index,
                line,
                object,
            };
            if !d.object.is_object() {
                return Err(err(
                    String::new(),
                    "not a Kubernetes object (a mapping)".into(),
                ));
            }
            for (field, v) in [
                ("apiVersion", &d.object["apiVersion"]),
                ("kind", &d.object["kind"]),
                ("metadata.name", &d.object["metadata"]["name"]),
            ] {
                if !v.is_string() {
                    return Err(err(d.describe(), format!("{field} is missing")));
                }
            }
            docs.push(d);
        }
    }
    Ok(docs)
}

/// The documents of a YAML stream with the line each starts on: split at `---` lines.
fn split_documents(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut start = 1;
    for (i, l) in text.lines().enumerate() {
        if l == "---" || l.starts_with("--- ") || l.trim_end() == "---" {
            if !cur.is_empty() || i > 0 {
                out.push((start, std::mem::take(&mut cur)));
            }
            start = i + 2;
            let rest = l.trim_start_matches("---").trim();
            if !rest.is_empty() && !rest.starts_with('#') {
                cur.push_str(rest);
                cur.push('\n');
                start = i + 1;
            }
            continue;
        }
        if l == "..." {
            continue;
        }
        cur.push_str(l);
        cur.push('\n');
    }
    out.push((start, cur));
    out
}

impl Cluster {
    /// Applies every object of manifest `file` in order (server-side apply, field manager
    /// `proxybench`, strict field validation, conflicts forced), namespaced objects without a
    /// namespace going to `namespace`. Stops at the first refusal, whose error names the file, the
    /// document and the API server's message.
    pub fn apply(&self, file: &Path, namespace: &str) -> Result<Vec<Outcome>, Error> {
        let docs = parse_manifest(file)?;
        let pp = PatchParams::apply(FIELD_MANAGER)
            .force()
            .validation_strict();
        self.block_on(async {
            let mut out = Vec::new();
            for d in &docs {
                let (api, ns) = self.dynamic_api(file, d, namespace).await?;
                let name = d.object["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let mut obj = d.object.clone();
                if let Some(ns) = &ns {
                    obj["metadata"]["namespace"] = serde_json::Value::String(ns.clone());
                }
                api.patch(&name, &pp, &Patch::Apply(&obj))
                    .await
                    .map_err(|e| manifest_error(file, d, e))?;
                out.push(Outcome {
                    kind: d.object["kind"].as_str().unwrap_or_default().to_string(),
                    name,
                    namespace: ns,
                    action: "applied",
                });
            }
            Ok(out)
        })
    }

    /// Deletes every object of manifest `file`, last document first (so that a namespace or a
    /// CRD goes after what lives in it); objects already absent are reported, not refused.
    pub fn delete(&self, file: &Path, namespace: &str) -> Result<Vec<Outcome>, Error> {
        let docs = parse_manifest(file)?;
        self.block_on(async {
            let mut out = Vec::new();
            for d in docs.iter().rev() {
                let (api, ns) = self.dynamic_api(file, d, namespace).await?;
                let name = d.object["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let action = match api.delete(&name, &DeleteParams::background()).await {
                    Ok(_) => "deleted",
                    Err(kube::Error::Api(s)) if s.code == 404 => "absent",
                    Err(e) => return Err(manifest_error(file, d, e)),
                };
                out.push(Outcome {
                    kind: d.object["kind"].as_str().unwrap_or_default().to_string(),
                    name,
                    namespace: ns,
                    action,
                });
            }
            Ok(out)
        })
    }

    /// The dynamic API of a document's kind (discovery, refreshed once on a miss) and the
    /// namespace it goes to (`None` when cluster-scoped).
    async fn dynamic_api(
        &self,
        file: &Path,
        d: &Document,
        namespace: &str,
    ) -> Result<(Api<DynamicObject>, Option<String>), Error> {
        let (ar, caps) = self.resolve(file, d).await?;
        match caps.scope {
            Scope::Namespaced => {
                let ns = d.object["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or(namespace)
                    .to_string();
                Ok((Api::namespaced_with(self.client(), &ns, &ar), Some(ns)))
            }
            Scope::Cluster => Ok((Api::all_with(self.client(), &ar), None)),
        }
    }

    async fn resolve(
        &self,
        file: &Path,
        d: &Document,
    ) -> Result<(ApiResource, ApiCapabilities), Error> {
        let api_version = d.object["apiVersion"].as_str().unwrap_or_default();
        let kind = d.object["kind"].as_str().unwrap_or_default();
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let gvk = GroupVersionKind::gvk(group, version, kind);
        for refresh in [false, true] {
            let disc = self.discovery(refresh).await.map_err(|e| Error::Manifest {
                file: file.to_path_buf(),
                doc: d.index,
                line: d.line,
                object: d.describe(),
                message: e.to_string(),
            })?;
            if let Some(found) = disc.resolve_gvk(&gvk) {
                return Ok(found);
            }
        }
        Err(Error::Manifest {
            file: file.to_path_buf(),
            doc: d.index,
            line: d.line,
            object: d.describe(),
            message: format!("the API server serves no kind {kind} in {api_version}"),
        })
    }
}

/// What [`Cluster::wait_manifest`] waits for on each object of a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitFor {
    /// Status condition `kind` has `status`, for the object's current generation.
    Condition {
        /// The condition's type (`Available`, `Programmed`...).
        kind: String,
        /// The status it must have (`True`...).
        status: String,
    },
    /// The object is gone.
    Deleted,
}

/// How often a wait asks the API server.
const WAIT_POLL: Duration = Duration::from_millis(20);

impl Cluster {
    /// Waits until every object of manifest `file` is in state `until` (the objects asked in
    /// turn every 20 ms), at most `bound` after `since` (when the action began): each object's
    /// `Kind/name` and when it got there, from `since`. A timeout names the first object still
    /// waiting and quotes its last status conditions.
    pub fn wait_manifest(
        &self,
        file: &Path,
        namespace: &str,
        until: &WaitFor,
        since: Instant,
        bound: Duration,
    ) -> Result<Vec<(String, Duration)>, Error> {
        let docs = parse_manifest(file)?;
        self.block_on(async {
            let mut pending = Vec::new();
            for d in &docs {
                let (api, _) = self.dynamic_api(file, d, namespace).await?;
                let name = d.object["metadata"]["name"].as_str().unwrap_or_default();
                pending.push((api, name.to_string(), d.describe()));
            }
            let mut reached = Vec::new();
            loop {
                let mut still = Vec::new();
                let mut last = String::new();
                for (api, name, what) in pending {
                    let state = match api.get_opt(&name).await {
                        Ok(None) if *until == WaitFor::Deleted => None,
                        Ok(None) => Some(format!("{what} does not exist")),
                        Ok(Some(_)) if *until == WaitFor::Deleted => {
                            Some(format!("{what} still exists"))
                        }
                        Ok(Some(o)) => condition_state(&o.data, &o.metadata, until, &what),
                        Err(e) => Some(format!("{what}: {}", split(e).0)),
                    };
                    match state {
                        None => reached.push((what, since.elapsed())),
                        Some(s) => {
                            if last.is_empty() {
                                last = s;
                            }
                            still.push((api, name, what));
                        }
                    }
                }
                if still.is_empty() {
                    return Ok(reached);
                }
                if since.elapsed() >= bound {
                    return Err(Error::Timeout {
                        what: format!("{} of {}", wait_text(until), still[0].2),
                        after: bound,
                        state: last,
                    });
                }
                pending = still;
                tokio::time::sleep(WAIT_POLL).await;
            }
        })
    }
}

/// `condition=TYPE[=STATUS]` or `deletion`, for messages.
fn wait_text(until: &WaitFor) -> String {
    match until {
        WaitFor::Condition { kind, status } => format!("condition {kind}={status}"),
        WaitFor::Deleted => "deletion".into(),
    }
}

/// `None` when the object's condition holds for its current generation; else what it shows
/// instead: its conditions, quoted, or the generation they are for. The conditions are the
/// object's own (`status.conditions`: a Deployment, a Gateway) or, for a Gateway API route, those
/// each parent's controller writes (`status.parents[].conditions`: `Accepted`, `ResolvedRefs`):
/// a route's condition holds when every parent that reports it has it.
fn condition_state(
    data: &serde_json::Value,
    meta: &kube::core::ObjectMeta,
    until: &WaitFor,
    what: &str,
) -> Option<String> {
    let WaitFor::Condition { kind, status } = until else {
        return Some(format!("{what} still exists"));
    };
    let generation = meta.generation.unwrap_or(0);
    let observed = data["status"]["observedGeneration"].as_i64();
    let current = |c: &serde_json::Value| {
        let seen = c["observedGeneration"].as_i64().or(observed);
        seen.is_none_or(|g| g >= generation)
    };
    let holds = |conds: &[serde_json::Value]| {
        conds
            .iter()
            .any(|c| c["type"] == kind.as_str() && c["status"] == status.as_str() && current(c))
    };
    let own = data["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    // A route's parents, each with its controller's conditions (`gateway gateway`).
    let parents: Vec<(String, Vec<serde_json::Value>)> = data["status"]["parents"]
        .as_array()
        .map(|ps| {
            ps.iter()
                .map(|p| {
                    let r = &p["parentRef"];
                    let name = match r["namespace"].as_str() {
                        Some(ns) => format!("{ns}/{}", r["name"].as_str().unwrap_or("?")),
                        None => r["name"].as_str().unwrap_or("?").to_string(),
                    };
                    let kind = r["kind"].as_str().unwrap_or("Gateway").to_lowercase();
                    let conds = p["conditions"].as_array().cloned().unwrap_or_default();
                    (format!("{kind} {name}"), conds)
                })
                .collect()
        })
        .unwrap_or_default();
    if holds(&own) || (!parents.is_empty() && parents.iter().all(|(_, c)| holds(c))) {
        return None;
    }
    if own.is_empty() && parents.iter().all(|(_, c)| c.is_empty()) {
        return Some(format!("{what} has no status conditions yet"));
    }
    let quote = |conds: &[serde_json::Value]| -> Vec<String> {
        conds
            .iter()
            .map(|c| {
                let mut q = format!(
                    "{}={}",
                    c["type"].as_str().unwrap_or("?"),
                    c["status"].as_str().unwrap_or("?")
                );
                let (r, m) = (c["reason"].as_str(), c["message"].as_str());
                if r.is_some() || m.is_some() {
                    q.push_str(&format!(" ({}: {})", r.unwrap_or(""), m.unwrap_or("")));
                }
                if !current(c) {
                    q.push_str(&format!(
                        " [for generation {}, not {generation}]",
                        c["observedGeneration"].as_i64().or(observed).unwrap_or(0)
                    ));
                }
                q
            })
            .collect()
    };
    let mut parts = Vec::new();
    if !own.is_empty() {
        parts.push(format!("{what} conditions: {}", quote(&own).join(", ")));
    }
    for (parent, conds) in &parents {
        let shown = if conds.is_empty() {
            "none yet".to_string()
        } else {
            quote(conds).join(", ")
        };
        parts.push(format!("{what} conditions from {parent}: {shown}"));
    }
    Some(parts.join("; "))
}

fn manifest_error(file: &Path, d: &Document, e: kube::Error) -> Error {
    let (message, _) = split(e);
    Error::Manifest {
        file: PathBuf::from(file),
        doc: d.index,
        line: d.line,
        object: d.describe(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_keep_their_index_and_line() {
        let text = "# leading comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\n---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: b}\n";
        let docs = parse_text(Path::new("m.yaml"), text).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(
            (docs[0].index, docs[0].line, docs[0].describe().as_str()),
            (2, 3, "ConfigMap/a")
        );
        assert_eq!(
            (docs[1].index, docs[1].line, docs[1].describe().as_str()),
            (4, 9, "ConfigMap/b")
        );
    }

    #[test]
    fn a_document_without_a_name_is_refused_with_file_and_line() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: Pod\nmetadata: {}\n";
        let e = parse_text(Path::new("bad.yaml"), text)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "bad.yaml: document 2 (line 6, Pod/?): metadata.name is missing"
        );
    }

    #[test]
    fn broken_yaml_names_the_document() {
        let text = "apiVersion: v1\nkind: [unclosed\n";
        let e = parse_text(Path::new("x.yaml"), text)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("x.yaml: document 1 (line 1): not valid YAML: "),
            "{e}"
        );
    }

    /// A condition `TYPE=True` wanted of an object of generation 2.
    fn state(status: serde_json::Value, kind: &str) -> Option<String> {
        let data = serde_json::json!({ "status": status });
        let meta = kube::core::ObjectMeta {
            generation: Some(2),
            ..Default::default()
        };
        let until = WaitFor::Condition {
            kind: kind.into(),
            status: "True".into(),
        };
        condition_state(&data, &meta, &until, "HTTPRoute/r")
    }

    #[test]
    fn a_route_is_accepted_when_every_parent_says_so_for_its_generation() {
        let parent = |name: &str, st: &str, g: i64| {
            serde_json::json!({
                "parentRef": { "name": name },
                "controllerName": "example.com/gw",
                "conditions": [{ "type": "Accepted", "status": st, "reason": "R",
                                 "message": "m", "observedGeneration": g }]
            })
        };
        let both =
            serde_json::json!({ "parents": [parent("a", "True", 2), parent("b", "True", 2)] });
        assert_eq!(state(both, "Accepted"), None);
        // One parent not yet: the route waits, and the message names that parent.
        let one =
            serde_json::json!({ "parents": [parent("a", "True", 2), parent("b", "False", 2)] });
        let s = state(one, "Accepted").unwrap();
        assert!(s.contains("from gateway b: Accepted=False (R: m)"), "{s}");
        // Accepted for the previous generation does not count.
        let stale = serde_json::json!({ "parents": [parent("a", "True", 1)] });
        let s = state(stale, "Accepted").unwrap();
        assert!(s.contains("[for generation 1, not 2]"), "{s}");
        // No parent has written anything yet.
        let none = serde_json::json!({ "parents": [] });
        assert_eq!(
            state(none, "Accepted").unwrap(),
            "HTTPRoute/r has no status conditions yet"
        );
    }

    #[test]
    fn an_objects_own_conditions_still_decide_for_it() {
        let own = serde_json::json!({ "observedGeneration": 2,
            "conditions": [{ "type": "Available", "status": "True" }] });
        assert_eq!(state(own.clone(), "Available"), None);
        let s = state(own, "Progressing").unwrap();
        assert_eq!(s, "HTTPRoute/r conditions: Available=True");
    }
}
