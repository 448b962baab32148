//! The results directory on disk: writing every file of a run, reading data.json back, and
//! rebuilding report.md and charts from it.

use crate::{charts, comparison, csv, html, markdown, Error};
use model::results_dir::{
    CHARTS_DIR, COMPARISON_HTML, COMPARISON_JSON, COMPARISON_MD, DATA_JSON, ENV_JSON, REPORT_HTML,
    REPORT_MD,
};
use model::{RunResults, SCHEMA_VERSION};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Writes `contents` to `path` through a temporary file and a rename, so a reader (or a crash)
/// never sees half a file.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<(), Error> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, contents).map_err(|e| Error::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
}

/// See [`crate::write_results`].
pub fn write_results(dir: &Path, r: &RunResults) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let data_path = dir.join(DATA_JSON);
    let mut json = serde_json::to_string_pretty(r).map_err(|e| Error::Parse {
        path: data_path.clone(),
        msg: e.to_string(),
    })?;
    json.push('\n');
    write_atomic(&data_path, json.as_bytes())?;

    for (name, body) in csv::all(r) {
        write_atomic(&dir.join(name), body.as_bytes())?;
    }
    let env_path = dir.join(ENV_JSON);
    if !env_path.exists() {
        let mut env = serde_json::to_string_pretty(&r.env).map_err(|e| Error::Parse {
            path: env_path.clone(),
            msg: e.to_string(),
        })?;
        env.push('\n');
        write_atomic(&env_path, env.as_bytes())?;
    }
    write_atomic(&dir.join(REPORT_MD), markdown::render(r).as_bytes())?;
    write_atomic(&dir.join(REPORT_HTML), html::render(r).as_bytes())?;
    charts::render_all(r, &dir.join(CHARTS_DIR))?;

    // A value JSON cannot carry (NaN, infinity) is written as null and would make the directory
    // unreadable later; say so now, while the run's output is still on screen.
    serde_json::from_str::<RunResults>(&json).map_err(|e| Error::Parse {
        path: data_path,
        msg: format!("written, but it does not read back ({e}); a number was not finite"),
    })?;
    Ok(())
}

/// See [`crate::write_comparison`].
pub fn write_comparison(dir: &Path, c: &comparison::Comparison) -> Result<(), Error> {
    let mut json = serde_json::to_string_pretty(c).map_err(|e| Error::Parse {
        path: dir.join(COMPARISON_JSON),
        msg: e.to_string(),
    })?;
    json.push('\n');
    write_atomic(&dir.join(COMPARISON_JSON), json.as_bytes())?;
    write_atomic(
        &dir.join(COMPARISON_MD),
        comparison::render_markdown(c).as_bytes(),
    )?;
    write_atomic(
        &dir.join(COMPARISON_HTML),
        html::render_comparison(c).as_bytes(),
    )
}

/// The one field read before the rest, so another version's file gets a version message rather
/// than a parse error about some field.
#[derive(Deserialize)]
struct Head {
    schema: Option<serde_json::Value>,
}

/// See [`crate::read_results`].
pub fn read_results(dir: &Path) -> Result<RunResults, Error> {
    let path = dir.join(DATA_JSON);
    if !dir.is_dir() {
        return Err(Error::io(
            dir,
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such directory"),
        ));
    }
    if !path.is_file() {
        return Err(Error::MissingData {
            dir: dir.to_path_buf(),
        });
    }
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    let head: Head = serde_json::from_str(&text).map_err(|e| Error::Parse {
        path: path.clone(),
        msg: e.to_string(),
    })?;
    match head.schema.as_ref().and_then(|v| v.as_u64()) {
        Some(v) if v == SCHEMA_VERSION as u64 => {}
        _ => {
            return Err(Error::Schema {
                path,
                found: head
                    .schema
                    .map(|v| v.to_string())
                    .unwrap_or_else(|| "none".into()),
                expected: SCHEMA_VERSION,
            })
        }
    }
    serde_json::from_str(&text).map_err(|e| Error::Parse {
        path,
        msg: e.to_string(),
    })
}

/// See [`crate::rebuild`].
pub fn rebuild(dir: &Path) -> Result<(), Error> {
    if !dir.join(DATA_JSON).is_file() && dir.join(COMPARISON_JSON).is_file() {
        return rebuild_comparison(dir);
    }
    let r = read_results(dir)?;
    write_atomic(&dir.join(REPORT_MD), markdown::render(&r).as_bytes())?;
    write_atomic(&dir.join(REPORT_HTML), html::render(&r).as_bytes())?;
    charts::render_all(&r, &dir.join(CHARTS_DIR))?;
    Ok(())
}

/// A comparison directory (`run --proxy a,b`): comparison.md and comparison.html again from
/// comparison.json.
fn rebuild_comparison(dir: &Path) -> Result<(), Error> {
    let path = dir.join(COMPARISON_JSON);
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    let c: comparison::Comparison = serde_json::from_str(&text).map_err(|e| Error::Parse {
        path: path.clone(),
        msg: e.to_string(),
    })?;
    write_comparison(dir, &c)
}
