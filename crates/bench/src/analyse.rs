//! The analyse stage as a run ends it: [`analysis::analyse()`] on a results directory, then the
//! report stage writes data.json, the CSVs, report.md and charts from the results. The runner
//! ends every run by calling [`analyse_dir`] on its own directory, and `proxybench analyse DIR`
//! calls the same function on an old one, so both give the same bytes.

use analysis::AnalyseError;
use model::RunResults;
use std::path::Path;

/// Why a results directory could not be analysed, or its outputs written.
#[derive(Debug, thiserror::Error)]
pub enum AnalyseDirError {
    /// The record could not be read, or an analysis failed on it.
    #[error(transparent)]
    Analyse(#[from] AnalyseError),
    /// The outputs could not be written.
    #[error(transparent)]
    Write(#[from] report::Error),
}

impl AnalyseDirError {
    /// True when the directory given is at fault (missing, not a results directory, another
    /// version, damaged), rather than this program or the disk.
    pub fn is_bad_input(&self) -> bool {
        matches!(self, AnalyseDirError::Analyse(e) if e.is_bad_input())
    }
}

/// [`analysis::analyse()`], then writes the analysis outputs into `dir` (data.json, CSVs,
/// report.md, charts/) and returns the results.
pub fn analyse_dir(dir: &Path) -> Result<RunResults, AnalyseDirError> {
    let results = analysis::analyse(dir)?;
    report::write_results(dir, &results)?;
    Ok(results)
}
