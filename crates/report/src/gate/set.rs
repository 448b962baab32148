//! A set of runs made by `proxybench run SCENARIO --repeat N` (and `--interleave OTHER`):
//! sibling results directories in one directory, with `runs.json` saying which are A's and which
//! B's, in the order they ran, so that `compare` takes the set as it is (`compare SET` for an
//! interleaved set, `compare SET1 -- SET2` for two sets, `compare --calibrate SET`).

use crate::files::write_atomic;
use crate::Error;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The manifest's file name in a set's directory.
pub const RUNS_JSON: &str = "runs.json";

/// The manifest's format version.
pub const SET_SCHEMA: u32 = 1;

/// What `runs.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSet {
    /// Format version ([`SET_SCHEMA`]).
    pub schema: u32,
    /// The scenario side A ran.
    pub scenario: String,
    /// Side A: the scenario as given.
    pub a: SetSide,
    /// Side B, for an interleaved set: what `--interleave` named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub b: Option<SetSide>,
    /// Every run's directory name in the order the runs were made (`a-1`, `b-1`, `a-2`...).
    pub order: Vec<String>,
}

/// One side of a set: what ran, and its runs' directory names (relative to the set).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SetSide {
    /// What ran: a scenario (`default`, `candidate.toml`) or a proxy kind of the scenario.
    pub label: String,
    /// The runs' directories, in the order they ran.
    pub runs: Vec<String>,
}

/// Writes `set` as `dir/runs.json`.
pub fn write(dir: &Path, set: &RunSet) -> Result<(), Error> {
    let text = serde_json::to_string_pretty(set).map_err(|e| Error::Parse {
        path: dir.join(RUNS_JSON),
        msg: e.to_string(),
    })?;
    write_atomic(&dir.join(RUNS_JSON), format!("{text}\n").as_bytes())
}

/// Reads `dir/runs.json`; `None` when there is none.
pub fn read(dir: &Path) -> Result<Option<RunSet>, Error> {
    let path = dir.join(RUNS_JSON);
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    let set: RunSet = serde_json::from_str(&text).map_err(|e| Error::Parse {
        path: path.clone(),
        msg: e.to_string(),
    })?;
    if set.schema != SET_SCHEMA {
        return Err(Error::Schema {
            path,
            found: set.schema.to_string(),
            expected: SET_SCHEMA,
        });
    }
    Ok(Some(set))
}

/// What a directory given to `compare` stands for.
#[derive(Debug, Clone, PartialEq)]
pub enum Given {
    /// A results directory: one run.
    Run(PathBuf),
    /// A set of runs: A's, and B's when the set was interleaved.
    Set {
        /// Side A's run directories.
        a: Vec<PathBuf>,
        /// Side B's, for an interleaved set.
        b: Option<Vec<PathBuf>>,
    },
}

/// A directory as `compare` reads it: a set when it holds `runs.json` (and no data.json), else
/// one run (whose data.json is read, and refused with its reason, later).
pub fn expand(dir: &Path) -> Result<Given, Error> {
    if dir.join(model::results_dir::DATA_JSON).is_file() {
        return Ok(Given::Run(dir.to_path_buf()));
    }
    match read(dir)? {
        None => Ok(Given::Run(dir.to_path_buf())),
        Some(set) => {
            let paths = |s: &SetSide| s.runs.iter().map(|r| dir.join(r)).collect::<Vec<_>>();
            Ok(Given::Set {
                a: paths(&set.a),
                b: set.b.as_ref().map(paths),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_reads_back_and_expands_to_its_runs() {
        let tmp = tempfile::tempdir().unwrap();
        let set = RunSet {
            schema: SET_SCHEMA,
            scenario: "default".into(),
            a: SetSide {
                label: "default".into(),
                runs: vec!["a-1".into(), "a-2".into()],
            },
            b: Some(SetSide {
                label: "slow.toml".into(),
                runs: vec!["b-1".into(), "b-2".into()],
            }),
            order: vec!["a-1".into(), "b-1".into(), "a-2".into(), "b-2".into()],
        };
        write(tmp.path(), &set).unwrap();
        assert_eq!(read(tmp.path()).unwrap(), Some(set));
        assert_eq!(
            expand(tmp.path()).unwrap(),
            Given::Set {
                a: vec![tmp.path().join("a-1"), tmp.path().join("a-2")],
                b: Some(vec![tmp.path().join("b-1"), tmp.path().join("b-2")]),
            }
        );
        let plain = tmp.path().join("a-1");
        std::fs::create_dir_all(&plain).unwrap();
        assert_eq!(expand(&plain).unwrap(), Given::Run(plain.clone()));
        std::fs::write(tmp.path().join(RUNS_JSON), "{\"schema\": 9}").unwrap();
        assert!(read(tmp.path()).is_err());
    }
}
