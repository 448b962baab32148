//! Writes the test fixtures as results directories, to look at a report and its charts:
//! `cargo run -p proxybench-report --release --example sample -- /tmp/report-sample`.

#[path = "../tests/fixture/mod.rs"]
mod fixture;

use proxybench_report as report;
use std::path::PathBuf;
use std::time::Instant;

fn main() {
    let out = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "/tmp/report-sample".into()),
    );
    for (name, r) in [
        ("full", fixture::run()),
        ("partial", fixture::partial()),
        ("large", fixture::large()),
        ("rerun", fixture::rerun()),
    ] {
        let dir = out.join(name);
        let t = Instant::now();
        if let Err(e) = report::write_results(&dir, &r) {
            eprintln!("sample: {e}");
            std::process::exit(1);
        }
        let charts = std::fs::read_dir(dir.join("charts"))
            .map(|d| d.count())
            .unwrap_or(0);
        println!(
            "{}: {charts} chart files in {:.0} ms",
            dir.display(),
            t.elapsed().as_secs_f64() * 1e3
        );
    }
    // Rebuild one directory from its data.json and compare the run with its rerun.
    let t = Instant::now();
    if let Err(e) = report::rebuild(&out.join("full")) {
        eprintln!("sample: {e}");
        std::process::exit(1);
    }
    println!("rebuild: {:.0} ms", t.elapsed().as_secs_f64() * 1e3);
    match report::compare(&out.join("full"), &out.join("rerun")) {
        Ok(md) => println!("{}", md.lines().take(36).collect::<Vec<_>>().join("\n")),
        Err(e) => {
            eprintln!("sample: {e}");
            std::process::exit(1);
        }
    }
}
