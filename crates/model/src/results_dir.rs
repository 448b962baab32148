//! The results directory's layout, named in one place: every file and folder a run leaves, the
//! rule for the names a scenario puts into it, and the versions of its two JSON files. The
//! record stage (the runner, through `analysis::record`) writes the raw part, the analysis
//! stage (`report`) writes the rest from it; both, and every reader (cli, compare, gate,
//! agent), take their names from here, so no crate spells a file of it on its own.
//!
//! ```text
//! <results>/<scenario>/<stamp>/
//!   record.json                 what the run measured, raw (RunRecord, RECORD_VERSION)
//!   scenario.toml               the scenario's text as it ran
//!   requests/<case>/<load>.bin  every request of one load (crate::records)
//!   streams/<case>/<load>.csv   every connection's life of one long-lived load
//!   agents/<case>/<load>/agent-N.json   a distributed load's per-agent results
//!   configs/<case>/             the proxy configurations as they were applied
//!   exec/<case>/                the output of the case's exec actions
//!   logs/<case>/                the proxy's logs, as collected (access.log, error.log, ...)
//!   tls/                        the run's certificates, when it serves TLS
//!   data.json                   the analysed result (RunResults, SCHEMA_VERSION)
//!   env.json                    the machine and tools the run used
//!   report.md, report.html      the report
//!   charts/                     the report's charts
//!   timeline.csv, events.csv, disruptions.csv, samples.csv, reloads.csv, series.csv
//! ```
//!
//! A load whose name cannot be a file name (it holds a `/`, say) goes under `by-index/<i>`
//! instead, with `i` its place in the case: see [`requests_path`].

use std::path::{Component, Path, PathBuf};

/// Version of the JSON schema written to `data.json` and by `proxybench load --format json`.
pub const SCHEMA_VERSION: u32 = 3;

/// Version of `record.json`'s layout ([`crate::RunRecord`]). 2: the cases are
/// [`crate::CaseRecord`]s, without the analysed fields that version 1 wrote empty; a reader of
/// 2 reads 1 as well, and refuses a newer one.
pub const RECORD_VERSION: u32 = 2;

/// Layout version of comparison.json.
pub const COMPARISON_VERSION: u32 = 1;

/// The raw measurements of a run, the file the analysis starts from.
pub const RECORD_JSON: &str = "record.json";
/// The scenario's text as it ran.
pub const SCENARIO_TOML: &str = "scenario.toml";
/// The folder of per-request records.
pub const REQUESTS_DIR: &str = "requests";
/// The folder of long-lived loads' connection lives.
pub const STREAMS_DIR: &str = "streams";
/// The folder of distributed loads' per-agent results.
pub const AGENTS_DIR: &str = "agents";
/// The folder of the proxy configurations each case applied.
pub const CONFIGS_DIR: &str = "configs";
/// The folder of each case's exec actions' output.
pub const EXEC_DIR: &str = "exec";
/// The folder of each case's collected proxy logs.
pub const LOGS_DIR: &str = "logs";
/// The folder of the run's certificates.
pub const TLS_DIR: &str = "tls";
/// The folder of the run's scratch files, removed when the run ends.
pub const WORK_DIR: &str = ".work";
/// A collected access log, in a case's logs folder.
pub const ACCESS_LOG: &str = "access.log";
/// A collected error log, in a case's logs folder.
pub const ERROR_LOG: &str = "error.log";

/// The analysed result, the file every other file of the analysis stage is derived from.
pub const DATA_JSON: &str = "data.json";
/// The machine and tools the run used.
pub const ENV_JSON: &str = "env.json";
/// The report.
pub const REPORT_MD: &str = "report.md";
/// The report as one self-contained page.
pub const REPORT_HTML: &str = "report.html";
/// The report's charts.
pub const CHARTS_DIR: &str = "charts";
/// The tables a spreadsheet or a plotting script reads, one file each.
pub const TIMELINE_CSV: &str = "timeline.csv";
/// See [`TIMELINE_CSV`].
pub const EVENTS_CSV: &str = "events.csv";
/// See [`TIMELINE_CSV`].
pub const DISRUPTIONS_CSV: &str = "disruptions.csv";
/// See [`TIMELINE_CSV`].
pub const SAMPLES_CSV: &str = "samples.csv";
/// See [`TIMELINE_CSV`].
pub const RELOADS_CSV: &str = "reloads.csv";
/// See [`TIMELINE_CSV`].
pub const SERIES_CSV: &str = "series.csv";

/// A comparison's folder (`proxybench proxies`, `compare --out`): its data.
pub const COMPARISON_JSON: &str = "comparison.json";
/// A comparison's report.
pub const COMPARISON_MD: &str = "comparison.md";
/// A comparison's report as one page.
pub const COMPARISON_HTML: &str = "comparison.html";
/// `proxybench compare`'s report of two runs, written into the newer run's directory.
pub const COMPARE_MD: &str = "compare.md";

/// The folder a load whose name cannot be a file name goes under, by its place in the case.
const BY_INDEX: &str = "by-index";

/// The longest name accepted as one path component (file systems allow 255 bytes; the runner
/// adds suffixes such as `.gen12.conf`).
pub const MAX_NAME: usize = 100;

/// Why `name` cannot be one directory name under a results directory; `None` if it can.
pub fn plain_name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("is empty".into());
    }
    if name == "." || name == ".." {
        return Some("is not a name (it means this or the parent directory)".into());
    }
    if let Some(c) = name
        .chars()
        .find(|c| matches!(c, '/' | '\\') || c.is_control())
    {
        return Some(format!(
            "must not contain {c:?} (it becomes a directory name under the results)"
        ));
    }
    if name.len() > MAX_NAME {
        return Some(format!("is longer than {MAX_NAME} bytes"));
    }
    // What the OS will make of it: exactly one ordinary component, the name itself.
    let mut parts = Path::new(name).components();
    match (parts.next(), parts.next()) {
        (Some(Component::Normal(p)), None) if p == name => None,
        _ => Some("is not a plain directory name".into()),
    }
}

/// `<folder>/<case>/<load><ext>`, or `<folder>/<case>/by-index/<i><ext>` when `<load><ext>`
/// cannot be a file name (a plain name holds no `/`, so the two forms never meet).
fn per_load(dir: &Path, folder: &str, case: &str, index: usize, load: &str, ext: &str) -> PathBuf {
    let case_dir = dir.join(folder).join(case);
    let file = format!("{load}{ext}");
    match plain_name_problem(&file) {
        None => case_dir.join(file),
        Some(_) => case_dir.join(BY_INDEX).join(format!("{index}{ext}")),
    }
}

/// The file one load's requests go to: `requests/<case>/<load>.bin`, or
/// `requests/<case>/by-index/<i>.bin` with `i` the load's place in the case's loads.
pub fn requests_path(dir: &Path, case: &str, index: usize, load: &str) -> PathBuf {
    per_load(dir, REQUESTS_DIR, case, index, load, ".bin")
}

/// The file one long-lived load's connection lives go to: `streams/<case>/<load>.csv`, or
/// `streams/<case>/by-index/<i>.csv` with `i` its place among the case's long-lived loads.
pub fn lives_path(dir: &Path, case: &str, index: usize, load: &str) -> PathBuf {
    per_load(dir, STREAMS_DIR, case, index, load, ".csv")
}

/// The folder of one distributed load's per-agent results: `agents/<case>/<load>/`, or
/// `agents/<case>/by-index/<i>/` (as [`requests_path`]).
pub fn agents_dir(dir: &Path, case: &str, index: usize, load: &str) -> PathBuf {
    per_load(dir, AGENTS_DIR, case, index, load, "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_load_whose_name_is_no_file_name_goes_by_its_index() {
        let d = Path::new("/r");
        assert_eq!(
            requests_path(d, "main", 0, "coffee"),
            d.join("requests/main/coffee.bin")
        );
        assert_eq!(
            requests_path(d, "main", 2, "a/b"),
            d.join("requests/main/by-index/2.bin")
        );
        assert_eq!(
            lives_path(d, "c", 1, ".."),
            d.join("streams/c/...csv"),
            "'...csv' is a plain file name"
        );
        assert_eq!(
            lives_path(d, "c", 1, "x\\y"),
            d.join("streams/c/by-index/1.csv")
        );
        assert_eq!(agents_dir(d, "c", 0, "ws"), d.join("agents/c/ws"));
        assert_eq!(agents_dir(d, "c", 3, ".."), d.join("agents/c/by-index/3"));
        let long = "x".repeat(MAX_NAME);
        assert_eq!(
            requests_path(d, "c", 4, &long),
            d.join("requests/c/by-index/4.bin"),
            "{MAX_NAME} bytes and '.bin' are too long"
        );
    }
}
