//! wrk-style text output of one load, followed by proxybench's own block.

use model::LoadSummary;

/// What the text output includes beyond wrk's default block.
#[derive(Debug, Clone, Copy, Default)]
pub struct TextOptions {
    /// Print the `Latency Distribution` block (wrk's `--latency`).
    pub latency_distribution: bool,
    /// Also print the uncorrected (measured-from-actual-send) latency of an open-loop run.
    pub uncorrected: bool,
}

/// Renders `summary` as wrk prints a run, line for line, then proxybench's block.
pub fn render(summary: &LoadSummary, _opts: &TextOptions) -> String {
    format!(
        "Running {} test @ {}\n",
        units::fmt_secs_short(summary.planned_s.unwrap_or(summary.elapsed_s)),
        summary.url
    )
}
