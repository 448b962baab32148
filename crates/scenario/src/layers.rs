//! Scenario files are TOML read with spans kept, so that every error points at `file:line`. A
//! scenario is built from layers merged over its base document: a `[quick]` table (for `--quick`),
//! a `[platforms.NAME]` table for the platform it runs on, one table per `[[cases]]` entry, and
//! `[configs.NAME]` alternatives of the proxy config. [`resolve`] is the one place that knows the
//! order they merge in.
//!
//! Merging is deep: tables merge key by key; arrays of tables whose entries all carry a `name`
//! merge entry by entry on that name (new names are appended); anything else is replaced.

pub use crate::error::ScenarioError;
use serde::de::DeserializeOwned;
use std::collections::BTreeSet;
use std::ops::Range;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// A spanned TOML table that borrows the scenario text.
pub type Table<'i> = DeTable<'i>;

/// A scenario's source text and the name errors are reported under.
#[derive(Debug, Clone)]
pub struct Source {
    /// File name for messages.
    pub file: String,
    /// The TOML text.
    pub text: String,
}

impl Source {
    /// An error at the start of `span` (or without a place).
    pub fn error(&self, span: Option<Range<usize>>, message: impl Into<String>) -> ScenarioError {
        let line = span.map(|s| line_of(&self.text, s.start));
        ScenarioError {
            file: self.file.clone(),
            line,
            message: one_line(&message.into()),
        }
    }

    /// Parses the whole text into a spanned table.
    pub fn parse(&self) -> Result<Table<'_>, ScenarioError> {
        DeTable::parse(&self.text)
            .map(|t| t.into_inner())
            .map_err(|e| self.error(e.span(), e.message()))
    }

    /// Deserializes a (merged) table into `T`, mapping errors to the line of the offending value.
    pub fn deserialize<T: DeserializeOwned>(&self, table: Table<'_>) -> Result<T, ScenarioError> {
        let span = 0..self.text.len();
        let de = toml::de::Deserializer::from(Spanned::new(span, table));
        T::deserialize(de).map_err(|e| self.error(e.span(), e.message()))
    }
}

/// 1-based line number of byte offset `at`. An offset at the very end (an unterminated string,
/// a missing value) is on the last line, not on the empty one after a final line break.
pub fn line_of(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    if at == text.len() && text.ends_with('\n') {
        at -= 1;
    }
    text.as_bytes()[..at]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Removes `key` from `table` and returns it with its span.
pub fn take<'i>(table: &mut Table<'i>, key: &str) -> Option<Spanned<DeValue<'i>>> {
    table.remove(key)
}

/// Merges `over` into `base` (see the module doc for the rules).
pub fn merge<'i>(base: &mut Table<'i>, over: Table<'i>) {
    for (k, v) in over {
        match base.get_mut(k.get_ref().as_ref()) {
            Some(existing) => merge_value(existing, v),
            None => {
                base.insert(k, v);
            }
        }
    }
}

fn merge_value<'i>(base: &mut Spanned<DeValue<'i>>, over: Spanned<DeValue<'i>>) {
    let base_is_named_tables = matches!(base.get_ref(), DeValue::Array(a) if named_tables(a));
    match (base.get_mut(), over.get_ref()) {
        (DeValue::Table(b), DeValue::Table(_)) => {
            if let DeValue::Table(o) = over.into_inner() {
                merge(b, o);
            }
        }
        (DeValue::Array(b), DeValue::Array(o)) if base_is_named_tables && named_tables(o) => {
            let DeValue::Array(o) = over.into_inner() else {
                unreachable!("matched as an array above")
            };
            for item in o {
                let name = name_of(&item).map(str::to_string);
                let slot = b
                    .iter_mut()
                    .find(|x| name.is_some() && name_of(x) == name.as_deref());
                match slot {
                    Some(existing) => merge_value(existing, item),
                    None => b.push(item),
                }
            }
        }
        _ => *base = over,
    }
}

fn named_tables(a: &[Spanned<DeValue<'_>>]) -> bool {
    !a.is_empty() && a.iter().all(|x| name_of(x).is_some())
}

fn name_of<'a>(v: &'a Spanned<DeValue<'_>>) -> Option<&'a str> {
    match v.get_ref() {
        DeValue::Table(t) => t.get("name").and_then(|n| n.get_ref().as_str()),
        _ => None,
    }
}

/// Reads an optional array of tables under `key`, removing it from `table`.
pub fn take_tables<'i>(
    src: &Source,
    table: &mut Table<'i>,
    key: &str,
) -> Result<Vec<Spanned<Table<'i>>>, ScenarioError> {
    let Some(v) = take(table, key) else {
        return Ok(Vec::new());
    };
    let span = v.span();
    match v.into_inner() {
        DeValue::Array(a) => a
            .into_iter()
            .map(|item| {
                let span = item.span();
                match item.into_inner() {
                    DeValue::Table(t) => Ok(Spanned::new(span, t)),
                    other => Err(src.error(
                        Some(span),
                        format!("`{key}` entries must be tables, found {}", other.type_str()),
                    )),
                }
            })
            .collect(),
        other => Err(src.error(
            Some(span),
            format!(
                "`{key}` must be an array of tables, found {}",
                other.type_str()
            ),
        )),
    }
}

/// Reads an optional table under `key`, removing it from `table`.
pub fn take_table<'i>(
    src: &Source,
    table: &mut Table<'i>,
    key: &str,
) -> Result<Option<Spanned<Table<'i>>>, ScenarioError> {
    let Some(v) = take(table, key) else {
        return Ok(None);
    };
    let span = v.span();
    match v.into_inner() {
        DeValue::Table(t) => Ok(Some(Spanned::new(span, t))),
        other => Err(src.error(
            Some(span),
            format!("`{key}` must be a table, found {}", other.type_str()),
        )),
    }
}

/// Takes a `platforms` table out of `table` and returns the layer for the platform named
/// `platform` (`platforms.<platform>`, with its own `quick` merged in when `quick`), to merge over
/// the document. Another platform's layer is dropped; an unknown platform name is an error at
/// its line.
pub fn take_platform_layer<'i>(
    src: &Source,
    table: &mut Table<'i>,
    platform: &str,
    quick: bool,
) -> Result<Option<Table<'i>>, ScenarioError> {
    let Some(platforms) = take_table(src, table, "platforms")? else {
        return Ok(None);
    };
    let mut platforms = platforms.into_inner();
    for (name, _) in platforms.iter() {
        if !PLATFORM_LAYERS.contains(&name.get_ref().as_ref()) {
            return Err(src.error(
                Some(name.span()),
                format!(
                    "platforms.{}: not a platform (known: {})",
                    name.get_ref(),
                    PLATFORM_LAYERS.join(", ")
                ),
            ));
        }
    }
    let Some(mut layer) = take_table(src, &mut platforms, platform)? else {
        // The other platforms' layers must still be tables.
        for p in PLATFORM_LAYERS {
            take_table(src, &mut platforms, p)?;
        }
        return Ok(None);
    };
    for p in PLATFORM_LAYERS.iter().filter(|p| **p != platform) {
        take_table(src, &mut platforms, p)?;
    }
    let layer_quick = take_table(src, layer.get_mut(), "quick")?;
    let mut layer = layer.into_inner();
    if let (true, Some(q)) = (quick, layer_quick) {
        merge(&mut layer, q.into_inner());
    }
    Ok(Some(layer))
}

/// The platforms a `platforms.<name>` layer may name.
pub const PLATFORM_LAYERS: [&str; 2] = ["local", "kubernetes"];

/// Parses `src` and merges the layers that apply to the whole document, in this order:
/// `[quick]` (when `quick`); then `[platform]`, taken out and handed to `platform`, which reads
/// it and names the platform layer to apply; then that `platforms.<name>` layer (with its own
/// `quick`). Each case's layers are merged as the returned [`Layers`] is iterated, and the
/// `[configs]` alternatives are left in [`Layers::configs`] for the caller to merge over each
/// case's `[proxy]`.
pub fn resolve<'i, P>(
    src: &'i Source,
    quick: bool,
    platform: impl FnOnce(Option<Spanned<Table<'i>>>) -> Result<(P, &'static str), ScenarioError>,
) -> Result<(P, Layers<'i>), ScenarioError> {
    let mut root = src.parse()?;
    let top_quick = take_table(src, &mut root, "quick")?;
    if quick {
        if let Some(q) = top_quick {
            merge(&mut root, q.into_inner());
        }
    }
    let platform_table = take_table(src, &mut root, "platform")?;
    let (spec, layer) = platform(platform_table)?;
    if let Some(l) = take_platform_layer(src, &mut root, layer, quick)? {
        merge(&mut root, l);
    }
    let case_tables = take_tables(src, &mut root, "cases")?;
    let configs = take_table(src, &mut root, "configs")?;
    let cases: Vec<Option<Spanned<Table<'i>>>> = if case_tables.is_empty() {
        vec![None]
    } else {
        case_tables.into_iter().map(Some).collect()
    };
    let layers = Layers {
        src,
        quick,
        platform: layer,
        root,
        cases: cases.into_iter(),
        seen: BTreeSet::new(),
        configs,
    };
    Ok((spec, layers))
}

/// The cases of a scenario whose document-wide layers are merged ([`resolve`]): each item is one
/// case's document, its own layers merged in when it is reached, so errors come in file order.
pub struct Layers<'i> {
    src: &'i Source,
    quick: bool,
    platform: &'static str,
    root: Table<'i>,
    cases: std::vec::IntoIter<Option<Spanned<Table<'i>>>>,
    seen: BTreeSet<String>,
    /// The `[configs.NAME]` alternatives of the proxy config, taken out of the document.
    pub configs: Option<Spanned<Table<'i>>>,
}

/// One case's document with every layer merged over the base.
pub struct CaseLayers<'i> {
    /// The case's name (`main` when the scenario has no `[[cases]]`).
    pub name: String,
    /// The case's description (empty when it has none).
    pub description: String,
    /// Where its `[[cases]]` entry was written; `None` for the single case of a scenario
    /// without `[[cases]]`.
    pub span: Option<Range<usize>>,
    /// The merged document.
    pub doc: Table<'i>,
}

impl<'i> Iterator for Layers<'i> {
    type Item = Result<CaseLayers<'i>, ScenarioError>;

    fn next(&mut self) -> Option<Self::Item> {
        let case = self.cases.next()?;
        Some(self.case(case))
    }
}

impl<'i> Layers<'i> {
    /// A case's entry merged over the base document, then its `quick` (when quick), then its
    /// `platforms.<name>` layer. The name must be a plain directory name, used once.
    fn case(&mut self, case: Option<Spanned<Table<'i>>>) -> Result<CaseLayers<'i>, ScenarioError> {
        let src = self.src;
        let mut doc = self.root.clone();
        let Some(c) = case else {
            return Ok(CaseLayers {
                name: "main".to_string(),
                description: String::new(),
                span: None,
                doc,
            });
        };
        let span = c.span();
        let mut t = c.into_inner();
        let name = take_str(src, &mut t, "name")?
            .ok_or_else(|| src.error(Some(span.clone()), "a case needs a `name`"))?;
        if let Some(why) = crate::paths::plain_name_problem(&name) {
            let msg = format!("case name '{}' {why}", name.escape_debug());
            return Err(src.error(Some(span), msg));
        }
        let description = take_str(src, &mut t, "description")?.unwrap_or_default();
        let q = take_table(src, &mut t, "quick")?;
        let on_platform = take_platform_layer(src, &mut t, self.platform, self.quick)?;
        merge(&mut doc, t);
        if let (true, Some(q)) = (self.quick, q) {
            merge(&mut doc, q.into_inner());
        }
        if let Some(l) = on_platform {
            merge(&mut doc, l);
        }
        if !self.seen.insert(name.clone()) {
            return Err(src.error(Some(span), format!("case '{name}' is defined twice")));
        }
        Ok(CaseLayers {
            name,
            description,
            span: Some(span),
            doc,
        })
    }
}

/// Whether the scenario has a `platforms.<platform>` layer, at the top or in a case.
pub fn has_platform_layer(src: &Source, platform: &str) -> bool {
    let Ok(root) = src.parse() else {
        return false;
    };
    let in_table = |t: &Table<'_>| {
        t.get("platforms")
            .and_then(|p| p.get_ref().as_table())
            .is_some_and(|p| p.contains_key(platform))
    };
    let in_cases = root
        .get("cases")
        .and_then(|c| c.get_ref().as_array())
        .is_some_and(|a| {
            a.iter()
                .any(|c| c.get_ref().as_table().is_some_and(in_table))
        });
    in_table(&root) || in_cases
}

/// Removes `key` from `t`: a string, or an error at its line.
fn take_str(src: &Source, t: &mut Table<'_>, key: &str) -> Result<Option<String>, ScenarioError> {
    match take(t, key) {
        None => Ok(None),
        Some(v) => {
            let span = v.span();
            v.get_ref()
                .as_str()
                .map(|s| Some(s.to_string()))
                .ok_or_else(|| src.error(Some(span), format!("`{key}` must be a string")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[test]
    fn an_error_reads_file_line_reason_or_file_reason() {
        let src = Source {
            file: "s.toml".into(),
            text: "a = 1\nb = 2\n".into(),
        };
        assert_eq!(
            src.error(Some(6..7), "bad b").to_string(),
            "s.toml:2: bad b"
        );
        assert_eq!(src.error(None, "no place").to_string(), "s.toml: no place");
    }

    #[derive(Deserialize, Debug, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Doc {
        name: String,
        #[serde(default)]
        loads: Vec<Load>,
        #[serde(default)]
        nested: Option<Nested>,
    }

    #[derive(Deserialize, Debug, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Load {
        name: String,
        rate: u32,
        #[serde(default)]
        duration: Option<units::Dur>,
    }

    #[derive(Deserialize, Debug, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Nested {
        a: u32,
        b: u32,
    }

    fn src(text: &str) -> Source {
        Source {
            file: "s.toml".into(),
            text: text.into(),
        }
    }

    #[test]
    fn merges_tables_and_named_arrays() {
        let s = src(
            "name = \"x\"\n[nested]\na = 1\nb = 2\n[[loads]]\nname = \"a\"\nrate = 1\n\
             [[loads]]\nname = \"b\"\nrate = 2\n\
             [quick]\nnested = { b = 20 }\n[[quick.loads]]\nname = \"b\"\nrate = 200\n\
             [[quick.loads]]\nname = \"c\"\nrate = 3\n",
        );
        let mut t = s.parse().unwrap();
        let quick = take_table(&s, &mut t, "quick").unwrap().unwrap();
        merge(&mut t, quick.into_inner());
        let d: Doc = s.deserialize(t).unwrap();
        assert_eq!(d.nested, Some(Nested { a: 1, b: 20 }));
        let rates: Vec<_> = d.loads.iter().map(|l| (l.name.as_str(), l.rate)).collect();
        assert_eq!(rates, vec![("a", 1), ("b", 200), ("c", 3)]);
    }

    #[test]
    fn errors_point_at_the_line() {
        let s = src("name = \"x\"\n\n[[loads]]\nname = \"a\"\nrate = 1\nbogus = 2\n");
        let t = s.parse().unwrap();
        let e = s.deserialize::<Doc>(t).unwrap_err();
        assert_eq!(e.line, Some(6), "{e}");
        assert!(e.message.contains("unknown field `bogus`"), "{e}");
        assert!(e.to_string().starts_with("s.toml:6: "));

        let s = src("name = \"x\"\n[[loads]]\nname = \"a\"\nrate = 1\nduration = \"10\"\n");
        let e = s.deserialize::<Doc>(s.parse().unwrap()).unwrap_err();
        assert_eq!(e.line, Some(5), "{e}");
        assert!(e.message.contains("needs a unit"), "{e}");

        let s = src("name = \"x\"\n[[loads]\n");
        let e = s.parse().unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
    }

    #[test]
    fn errors_at_the_end_point_at_the_last_line() {
        // Found by the fuzzer (crates/fuzz): an unterminated string reported at line 2 of a
        // 1-line file, because the error sits at the end, after the final line break.
        let s = src("name = \"\"\"x\n");
        let e = s.parse().unwrap_err();
        assert_eq!(e.line, Some(1), "{e}");
        let s = src("name = \"x\"\nd = '''\n\n\n");
        let e = s.parse().unwrap_err();
        assert_eq!(e.line, Some(4), "{e}");
        assert_eq!(line_of("a\nb", 3), 2);
        assert_eq!(line_of("a\nb\n", 4), 2);
        assert_eq!(line_of("", 0), 1);
    }

    #[test]
    fn override_values_keep_their_own_lines() {
        // An error inside a case override points at the override's line, not the base's.
        let s = src("name = \"x\"\n[[loads]]\nname = \"a\"\nrate = 1\n[quick]\nloads = [{ name = \"a\", rate = -1 }]\n");
        let mut t = s.parse().unwrap();
        let q = take_table(&s, &mut t, "quick").unwrap().unwrap();
        merge(&mut t, q.into_inner());
        let e = s.deserialize::<Doc>(t).unwrap_err();
        assert_eq!(e.line, Some(6), "{e}");
    }
}
