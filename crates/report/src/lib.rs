//! Reporters: every one reads recorded data ([`model`]) and nothing else, the way vegeta's
//! reporters all read one result stream. A results directory holds data.json (the whole
//! [`model::RunResults`]), CSV exports, report.md and charts; [`rebuild`] and [`compare`] work from
//! such a directory alone.
#![warn(missing_docs)]

mod charts;
mod compare;
pub mod comparison;
mod csv;
mod error;
mod files;
mod fmt;
pub mod gate;
mod hdr;
pub mod html;
pub mod junit;
mod markdown;
mod streams;
mod terminal;
pub mod text;

pub use compare::{compare_runs, render_compare, Compared};
pub use csv::load_timeline as load_timeline_csv;
pub use error::Error;
pub use terminal::summary_text;

use model::RunResults;
use std::path::{Path, PathBuf};

/// Writes a complete results directory for `r`: data.json (pretty, versioned), timeline.csv,
/// events.csv, disruptions.csv, samples.csv, reloads.csv, series.csv, env.json (when absent),
/// report.md, report.html and charts/*.png + *.svg. Creates `dir` if needed.
pub fn write_results(dir: &Path, r: &RunResults) -> Result<(), Error> {
    files::write_results(dir, r)
}

/// Renders report.md. Deterministic: the same input gives byte-identical output (no clock, no
/// hash-map ordering), which is what lets [`rebuild`] reproduce a report exactly.
pub fn render_markdown(r: &RunResults) -> String {
    markdown::render(r)
}

/// Draws every chart of `r` into `charts_dir` (created if needed) and returns the files written.
pub fn render_charts(r: &RunResults, charts_dir: &Path) -> Result<Vec<PathBuf>, Error> {
    charts::render_all(r, charts_dir)
}

/// Writes a comparison directory's own files (`run --proxy a,b`): comparison.json (what
/// [`rebuild`] reads back), comparison.md and comparison.html, into `dir`.
pub fn write_comparison(dir: &Path, c: &comparison::Comparison) -> Result<(), Error> {
    files::write_comparison(dir, c)
}

/// `proxybench report DIR`: reads DIR/data.json and rewrites report.md, report.html and charts/
/// from it; in a comparison directory (`run --proxy a,b`), rewrites comparison.md and
/// comparison.html from comparison.json.
pub fn rebuild(dir: &Path) -> Result<(), Error> {
    files::rebuild(dir)
}

/// `proxybench compare A B`: reads both results directories, renders the side-by-side table with
/// deltas, writes it to `B/compare.md` (B being the newer run by convention) and returns it.
pub fn compare(a: &Path, b: &Path) -> Result<String, Error> {
    compare::compare_dirs(a, b)
}

/// Writes `xml` (from [`junit`]) to `path` through a temporary file, so CI never reads half a
/// file.
pub fn write_junit(path: &Path, xml: &str) -> Result<(), Error> {
    files::write_atomic(path, xml.as_bytes())
}

/// Reads DIR/data.json, with a one-line error for a missing file, another schema version, or
/// malformed content.
pub fn read_results(dir: &Path) -> Result<RunResults, Error> {
    files::read_results(dir)
}
