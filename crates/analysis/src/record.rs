//! The record stage's files in a results directory: what a run measured, raw, and nothing
//! analysed. The runner writes them; [`crate::analyse()`] reads them back. Their names and
//! places are [`model::results_dir`]'s: record.json (a [`model::RunRecord`]: measurements in
//! data.json's schema), scenario.toml, requests/, streams/ and agents/ (a distributed load's
//! per-agent results: agents keep no per-request records, and the load's summary in
//! record.json is their exact merge, `proxybench merge` of these).

use crate::analysis::{Lives, Records};
use model::results_dir::{agents_dir, lives_path, requests_path, RECORD_JSON, SCENARIO_TOML};
use model::{records, CaseRecord, RunRecord, RECORD_VERSION, SCHEMA_VERSION};
use scenario::layers::Source;
use scenario::{ParseOptions, PlatformKind, Scenario};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// Why a results directory's record could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// The directory does not exist.
    #[error("{}: no such directory", dir.display())]
    NoDir {
        /// The directory given.
        dir: PathBuf,
    },
    /// No record.json: not a results directory, or one written before the record stage existed.
    #[error("{}: no record.json here; is this a proxybench results directory (a run older than `proxybench analyse` has only data.json: use `proxybench report`)?", dir.display())]
    MissingRecord {
        /// The directory given.
        dir: PathBuf,
    },
    /// record.json of a newer layout, or of another schema version.
    #[error("{}: record version {found}, but this proxybench reads record versions 1 to {RECORD_VERSION} (schema {SCHEMA_VERSION})", path.display())]
    Version {
        /// The file.
        path: PathBuf,
        /// The version found (`none` when absent).
        found: String,
    },
    /// record.json is not valid.
    #[error("{}: not a valid record: {msg}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        msg: String,
    },
    /// scenario.toml no longer parses (or does not hold the cases that ran).
    #[error("{}: {msg}", path.display())]
    Scenario {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        msg: String,
    },
    /// A lives file is damaged.
    #[error("{}: {source}", path.display())]
    Lives {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        source: model::stream::LivesCsvError,
    },
    /// A request-records file is damaged.
    #[error("{}: {source}", path.display())]
    Requests {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        source: records::RecordsError,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RecordError + '_ {
    move |source| RecordError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes `contents` through a temporary file and a rename, so no reader sees half a file.
fn write_atomic(path: &Path, contents: &[u8]) -> Result<(), RecordError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    fs::write(&tmp, contents).map_err(io(&tmp))?;
    fs::rename(&tmp, path).map_err(io(path))
}

/// Writes each distributed load's per-agent results as `agent-N.json` (N in agent order), the
/// files `proxybench merge` reads; merging them gives the load's summary in record.json.
pub fn write_agents(
    dir: &Path,
    case: &CaseRecord,
    parts: &BTreeMap<String, Vec<model::LoadResult>>,
) -> Result<(), RecordError> {
    for (i, load) in case.loads.iter().enumerate() {
        let Some(results) = parts.get(&load.name) else {
            continue;
        };
        let d = agents_dir(dir, &case.name, i, &load.name);
        fs::create_dir_all(&d).map_err(io(&d))?;
        for (n, r) in results.iter().enumerate() {
            write_atomic(
                &d.join(format!("agent-{n}.json")),
                r.to_json_pretty().as_bytes(),
            )?;
        }
    }
    Ok(())
}

/// Writes the records of every load of `case` (`records` by load name; a load without records
/// gets none).
pub fn write_requests(dir: &Path, case: &CaseRecord, records: &Records) -> Result<(), RecordError> {
    for (i, load) in case.loads.iter().enumerate() {
        let Some(recs) = records.get(&load.name) else {
            continue;
        };
        let path = requests_path(dir, &case.name, i, &load.name);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(io(parent))?;
        }
        write_atomic(&path, &records::encode(recs))?;
    }
    Ok(())
}

/// Reads back the records of every load of `case` (each load that finished has a file, except
/// the distributed ones, whose agents keep none).
/// A load's file that is not there leaves that load without records (the run was cut before it
/// was written, or it was removed since): it is recorded in the case as a shortfall of
/// [`model::Collector::Records`] with why, so that what reads that load's records is not
/// measurable and what reads several loads says its coverage, while the other loads' records
/// are read as usual. A file that is there but damaged is bad input, named.
pub fn read_requests(dir: &Path, case: &mut CaseRecord) -> Result<Records, RecordError> {
    let mut out = Records::new();
    let kept: Vec<(usize, String)> = case
        .loads
        .iter()
        .enumerate()
        .filter(|(_, l)| !case.distributed.iter().any(|d| d.load == l.name))
        .map(|(i, l)| (i, l.name.clone()))
        .collect();
    for (i, name) in &kept {
        let path = requests_path(dir, &case.name, *i, name);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                case.add_missing(
                    model::Collector::Records,
                    "loads",
                    kept.len(),
                    name,
                    &format!("{} is not there", path.display()),
                );
                continue;
            }
            Err(e) => return Err(io(&path)(e)),
        };
        let recs = records::decode(&bytes).map_err(|source| RecordError::Requests {
            path: path.clone(),
            source,
        })?;
        out.insert(name.clone(), recs);
    }
    Ok(out)
}

/// Writes the connection lives of every long-lived load of `case` (`lives` by load name), one
/// CSV file each. They stay out of record.json and data.json: a load of a thousand connections
/// under a reload every few seconds ends tens of thousands of them, a few megabytes of JSON
/// that every reader of those files would load for nothing; a file per load is read only by
/// what needs the lives (the ledger), and opens in any spreadsheet.
pub fn write_lives(dir: &Path, case: &CaseRecord, lives: &Lives) -> Result<(), RecordError> {
    for (i, st) in case.streams.iter().enumerate() {
        let Some(l) = lives.get(&st.name) else {
            continue;
        };
        let path = lives_path(dir, &case.name, i, &st.name);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(io(parent))?;
        }
        write_atomic(&path, model::stream::lives_csv(l).as_bytes())?;
    }
    Ok(())
}

/// Reads back the connection lives of every long-lived load of `case`. A load's file that is
/// not there leaves that load without lives: a shortfall of [`model::Collector::StreamLives`]
/// with why, so that what reads them is not measurable; a damaged file is bad input, named.
pub fn read_lives(dir: &Path, case: &mut CaseRecord) -> Result<Lives, RecordError> {
    let mut out = Lives::new();
    let names: Vec<String> = case.streams.iter().map(|s| s.name.clone()).collect();
    for (i, name) in names.iter().enumerate() {
        let path = lives_path(dir, &case.name, i, name);
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                case.add_missing(
                    model::Collector::StreamLives,
                    "loads",
                    names.len(),
                    name,
                    &format!("{} is not there", path.display()),
                );
                continue;
            }
            Err(e) => return Err(io(&path)(e)),
        };
        let lives = model::stream::parse_lives_csv(&text).map_err(|source| RecordError::Lives {
            path: path.clone(),
            source,
        })?;
        out.insert(name.clone(), lives);
    }
    Ok(out)
}

/// Writes scenario.toml: the scenario's text as it runs.
pub fn write_scenario(dir: &Path, scn: &Scenario) -> Result<(), RecordError> {
    write_atomic(&dir.join(SCENARIO_TOML), scn.source.as_bytes())
}

/// Writes record.json.
pub fn write_record(dir: &Path, rec: &RunRecord) -> Result<(), RecordError> {
    let path = dir.join(RECORD_JSON);
    let mut json = serde_json::to_string_pretty(rec).map_err(|e| RecordError::Parse {
        path: path.clone(),
        msg: e.to_string(),
    })?;
    json.push('\n');
    write_atomic(&path, json.as_bytes())
}

/// The fields read before the rest, so another version's file gets a version message.
#[derive(serde::Deserialize)]
struct Head {
    record_version: Option<serde_json::Value>,
    run: Option<RunHead>,
}

#[derive(serde::Deserialize)]
struct RunHead {
    schema: Option<serde_json::Value>,
}

/// Reads record.json, with a one-line error for a missing directory or file, another version,
/// or content that does not parse.
pub fn read_record(dir: &Path) -> Result<RunRecord, RecordError> {
    if !dir.is_dir() {
        return Err(RecordError::NoDir {
            dir: dir.to_path_buf(),
        });
    }
    let path = dir.join(RECORD_JSON);
    if !path.is_file() {
        return Err(RecordError::MissingRecord {
            dir: dir.to_path_buf(),
        });
    }
    let text = fs::read_to_string(&path).map_err(io(&path))?;
    let parse = |e: serde_json::Error| RecordError::Parse {
        path: path.clone(),
        msg: e.to_string(),
    };
    let head: Head = serde_json::from_str(&text).map_err(parse)?;
    let version = head.record_version.as_ref().and_then(|v| v.as_u64());
    let schema = head
        .run
        .as_ref()
        .and_then(|r| r.schema.as_ref())
        .and_then(|v| v.as_u64());
    // Version 1 differs from 2 only by analysed fields it wrote empty, which 2 ignores.
    let readable = version.is_some_and(|v| (1..=u64::from(RECORD_VERSION)).contains(&v));
    if !readable || schema != Some(u64::from(SCHEMA_VERSION)) {
        let found = match (&head.record_version, schema) {
            (Some(v), Some(s)) => format!("{v} (schema {s})"),
            (Some(v), None) => v.to_string(),
            (None, _) => "none".into(),
        };
        return Err(RecordError::Version { path, found });
    }
    serde_json::from_str(&text).map_err(parse)
}

/// How scenario.toml is parsed again: on the platform the run used (so its cluster actions
/// parse), without requiring its manifests to be where they were.
fn parse_options(rec: &RunRecord, path: &Path) -> Result<ParseOptions, RecordError> {
    let mut opts = ParseOptions {
        skip_file_checks: true,
        ..crate::analysis::parse_options()
    };
    if let Some(p) = &rec.run.env.platform {
        let kind = PlatformKind::parse(&p.kind).ok_or_else(|| RecordError::Scenario {
            path: path.to_path_buf(),
            msg: format!(
                "the record ran on platform '{}', which this proxybench does not know",
                p.kind
            ),
        })?;
        opts.platform.kind = Some(kind);
    }
    Ok(opts)
}

/// Parses scenario.toml in the form that ran (`--quick` or not) and keeps the cases that ran.
pub fn read_scenario(dir: &Path, rec: &RunRecord) -> Result<Scenario, RecordError> {
    let path = dir.join(SCENARIO_TOML);
    let text = fs::read_to_string(&path).map_err(io(&path))?;
    let src = Source {
        file: rec.scenario_file.clone(),
        text,
    };
    let bad = |msg: String| RecordError::Scenario {
        path: path.clone(),
        msg,
    };
    let mut scn = Scenario::parse_with(&src, rec.run.quick, &parse_options(rec, &path)?)
        .map_err(|e| bad(e.to_string()))?;
    if let Some(missing) = rec
        .selected_cases
        .iter()
        .find(|n| !scn.cases.iter().any(|c| &c.name == *n))
    {
        return Err(bad(format!(
            "the record names case '{missing}', which the scenario does not have"
        )));
    }
    scn.cases.retain(|c| rec.selected_cases.contains(&c.name));
    if let Some(name) = &rec.proxy {
        let kind = setup::proxy::ProxyKind::parse(name).ok_or_else(|| {
            bad(format!(
                "the record ran proxy kind '{name}', which this proxybench does not know"
            ))
        })?;
        scn = scn.with_proxy_kind(kind);
    }
    Ok(scn)
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::{LoadSummary, RequestRecord};

    fn load(name: &str) -> LoadSummary {
        let mut s: LoadSummary = serde_json::from_str(
            r#"{"schema":1,"name":"","url":"","method":"GET","mode":{"kind":"closed"},
            "threads":1,"connections":1,"start_s":0,"planned_s":null,"elapsed_s":1,
            "timeout_ms":1,"requests":0,"bytes_read":0,"bytes_written":0,"status":{},
            "errors":{},"connects":0,"latency":{"count":0,"mean_us":0,"stdev_us":0,"min_us":0,
            "max_us":0,"within_stdev_pct":0,"percentiles":[],"hdr":""},
            "latency_uncorrected":null,"req_per_sec":{"mean":0,"stdev":0,"max":0,
            "within_stdev_pct":0},"schedule":null,"timeline":[]}"#,
        )
        .unwrap();
        s.name = name.into();
        s
    }

    #[test]
    fn the_recorded_proxy_kind_applies_to_the_scenario_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let src = scenario::catalogue::builtin("default").unwrap();
        fs::write(dir.path().join(SCENARIO_TOML), &src.text).unwrap();
        let scn = Scenario::parse(&src, true).unwrap();
        let kind = *setup::proxy::ProxyKind::ALL.last().unwrap();
        let mut rec = RunRecord {
            record_version: RECORD_VERSION,
            scenario_file: src.file.clone(),
            selected_cases: scn.cases.iter().map(|c| c.name.clone()).collect(),
            aborted_case: None,
            proxy: Some(kind.name().into()),
            run: model::MeasuredRun {
                schema: SCHEMA_VERSION,
                scenario: scn.name.clone(),
                description: String::new(),
                started_at: String::new(),
                quick: true,
                partial: false,
                abort_reason: None,
                env: model::Env::default(),
                cases: Vec::new(),
                findings: Vec::new(),
            },
        };
        let back = read_scenario(dir.path(), &rec).unwrap();
        let kinds: Vec<setup::proxy::ProxyKind> = back
            .cases
            .iter()
            .flat_map(|c| c.proxy.iter().chain(c.configs.values()).map(|p| p.kind))
            .collect();
        assert!(!kinds.is_empty() && kinds.iter().all(|k| *k == kind));
        rec.proxy = Some("nosuch".into());
        let e = read_scenario(dir.path(), &rec).unwrap_err().to_string();
        assert!(e.contains("proxy kind 'nosuch'"), "{e}");
    }

    #[test]
    fn the_recorded_platform_applies_to_the_scenario_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut src = scenario::catalogue::builtin("default").unwrap();
        src.text
            .push_str("\n[[actions]]\nat = \"1s\"\napply = \"gone.yaml\"\n");
        fs::write(dir.path().join(SCENARIO_TOML), &src.text).unwrap();
        let mut rec = RunRecord {
            record_version: RECORD_VERSION,
            scenario_file: src.file.clone(),
            selected_cases: vec!["main".into()],
            aborted_case: None,
            proxy: None,
            run: model::MeasuredRun {
                schema: SCHEMA_VERSION,
                scenario: "default".into(),
                description: String::new(),
                started_at: String::new(),
                quick: false,
                partial: false,
                abort_reason: None,
                env: model::Env::default(),
                cases: Vec::new(),
                findings: Vec::new(),
            },
        };
        // Run locally, the cluster action does not parse; on the recorded platform it does,
        // though its manifest is not here.
        let e = read_scenario(dir.path(), &rec).unwrap_err().to_string();
        assert!(e.contains("apply needs [platform]"), "{e}");
        rec.run.env.platform = Some(model::PlatformInfo {
            kind: "kubernetes".into(),
            ..Default::default()
        });
        let back = read_scenario(dir.path(), &rec).unwrap();
        assert_eq!(back.platform.kind, PlatformKind::Kubernetes);
        rec.run.env.platform.as_mut().unwrap().kind = "mesos".into();
        let e = read_scenario(dir.path(), &rec).unwrap_err().to_string();
        assert!(e.contains("platform 'mesos'"), "{e}");
    }

    #[test]
    fn requests_round_trip_through_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let recorded = CaseRecord {
            name: "main".into(),
            loads: vec![load("coffee"), load("x/y")],
            ..Default::default()
        };
        let rec = |t_us| RequestRecord {
            t_us,
            latency_us: 5,
            conn: 1,
            bytes: 99,
            status: 200,
            error: None,
        };
        let mut all = Records::new();
        all.insert("coffee".into(), vec![rec(1), rec(2)]);
        all.insert("x/y".into(), vec![rec(3)]);
        let mut case = recorded;
        write_requests(dir.path(), &case, &all).unwrap();
        assert!(dir.path().join("requests/main/by-index/1.bin").is_file());
        assert_eq!(read_requests(dir.path(), &mut case).unwrap(), all);
        assert!(case.partial.is_empty());
        // One load's file gone: the other's records are read, and the gone one is a
        // shortfall of the records with why, not an error that loses the whole analysis.
        fs::remove_file(dir.path().join("requests/main/coffee.bin")).unwrap();
        let got = read_requests(dir.path(), &mut case).unwrap();
        assert_eq!(got.keys().collect::<Vec<_>>(), ["x/y"]);
        let s = model::CaseResult::from(case.clone())
            .shortfall(model::Collector::Records)
            .unwrap();
        assert_eq!(s.coverage(), "1 of 2 loads");
        assert!(s.lacks("coffee"));
        assert!(
            s.detail().contains("requests/main/coffee.bin is not there"),
            "{}",
            s.detail()
        );
    }
}
