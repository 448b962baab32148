//! The results directory end to end: every file written, data.json round-trips, `report DIR`
//! rebuilds an identical report.md, compare shows the right deltas, charts are real PNG/SVG
//! files, and bad directories give clear one-line errors.

mod fixture;

use proxybench_report as report;
use std::path::Path;

fn written(r: &model::RunResults) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    report::write_results(dir.path(), r).unwrap();
    dir
}

/// The chart files report.md links to, in order.
fn linked_charts(md: &str) -> Vec<String> {
    md.split("](charts/")
        .skip(1)
        .map(|rest| rest[..rest.find(')').unwrap()].to_string())
        .collect()
}

fn check_png(path: &Path) {
    let bytes = std::fs::read(path).unwrap();
    assert!(
        bytes.len() > 5_000,
        "{} is only {} bytes",
        path.display(),
        bytes.len()
    );
    assert_eq!(
        &bytes[..8],
        b"\x89PNG\r\n\x1a\n",
        "{} is not a PNG",
        path.display()
    );
    assert_eq!(&bytes[12..16], b"IHDR");
    let w = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
    let h = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
    assert_eq!((w, h), (1200, 520));
    assert_eq!(
        &bytes[bytes.len() - 8..bytes.len() - 4],
        b"IEND",
        "{} is truncated",
        path.display()
    );
}

fn check_svg(path: &Path, title: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(
        text.trim_start().starts_with("<svg"),
        "{} is not an SVG",
        path.display()
    );
    assert!(
        text.trim_end().ends_with("</svg>"),
        "{} is truncated",
        path.display()
    );
    assert!(text.contains("<text"), "{} has no text", path.display());
    let escaped = title
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    assert!(
        text.contains(&escaped),
        "{} lacks its title {title:?}",
        path.display()
    );
}

#[test]
fn write_results_creates_every_file() {
    let r = fixture::run();
    let dir = written(&r);
    for f in [
        "data.json",
        "timeline.csv",
        "events.csv",
        "disruptions.csv",
        "samples.csv",
        "reloads.csv",
        "series.csv",
        "env.json",
        "report.md",
        "report.html",
    ] {
        let p = dir.path().join(f);
        assert!(
            p.is_file() && p.metadata().unwrap().len() > 0,
            "{f} missing or empty"
        );
    }
    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    // Each error kind carries the first message the load saw.
    assert!(
        md.contains("| connect to 127.0.0.1:8080: Connection refused (os error 111) |"),
        "{md}"
    );
    let links = linked_charts(&md);
    // 3 per closed-loop load with failures (2), 3 for the limiter load, cpu, memory, stub,
    // reloads, one series.
    assert_eq!(links.len(), 3 + 3 + 3 + 4 + 1, "{links:?}");
    let on_disk = std::fs::read_dir(dir.path().join("charts"))
        .unwrap()
        .count();
    assert_eq!(
        on_disk,
        links.len() * 2,
        "every chart as PNG and SVG, nothing else"
    );
    for png in &links {
        assert!(png.ends_with(".png"));
        check_png(&dir.path().join("charts").join(png));
        assert!(dir
            .path()
            .join("charts")
            .join(png.replace(".png", ".svg"))
            .is_file());
    }
}

#[test]
fn charts_are_valid_png_and_svg_with_titles() {
    let r = fixture::run();
    let dir = tempfile::tempdir().unwrap();
    let files = report::render_charts(&r, dir.path()).unwrap();
    assert_eq!(files.len(), 28);
    for f in &files {
        match f.extension().and_then(|e| e.to_str()) {
            Some("png") => check_png(f),
            Some("svg") => {
                let stem = f.file_stem().unwrap().to_str().unwrap();
                let title = if stem.ends_with("coffee-throughput") {
                    "coffee: responses per second by status class"
                } else if stem.ends_with("-cpu") {
                    "scale-up-gradual: CPU per process group"
                } else if stem.ends_with("queue-depth") {
                    "burst 0 at 9 r/s (Poisson): queue depth"
                } else {
                    "time since start (s)"
                };
                check_svg(f, title);
            }
            other => panic!("unexpected chart file {f:?} ({other:?})"),
        }
    }
    // Every action is a marker with its number and kind on the time axis.
    let svg =
        std::fs::read_to_string(dir.path().join("1-scale-up-gradual-coffee-latency.svg")).unwrap();
    for label in [
        "1 scale_replicas",
        "3 kill_backend",
        "4 reload",
        "5 stop_replica",
    ] {
        assert!(svg.contains(label), "marker label {label:?} missing");
    }
    // Series that share a chart title are two lines of one chart.
    let queue = files
        .iter()
        .find(|f| f.to_string_lossy().ends_with("series-queue-depth.svg"))
        .expect("one queue depth chart");
    let svg = std::fs::read_to_string(queue).unwrap();
    assert!(svg.contains("measured") && svg.contains("predicted"));
}

/// A data.json written when the proxy could only be nginx names its version `nginx`; it reads
/// as the neutral `proxy` field, with no kind recorded.
#[test]
fn env_written_as_nginx_reads_as_the_proxy() {
    let r = fixture::run();
    let dir = written(&r);
    let path = dir.path().join("data.json");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains("\"proxy\": \"nginx version: nginx/1.22.1"),
        "{text}"
    );
    assert!(text.contains("\"proxy_kind\": \"nginx\""));
    let old = text
        .replace("\"proxy\": \"nginx version", "\"nginx\": \"nginx version")
        .replace("\"proxy_kind\": \"nginx\",", "");
    std::fs::write(&path, old).unwrap();
    let back = report::read_results(dir.path()).unwrap();
    assert_eq!(back.env.proxy, r.env.proxy);
    assert_eq!(back.env.proxy_kind, None);
}

#[test]
fn data_json_round_trips_exactly() {
    for r in [fixture::run(), fixture::partial()] {
        let dir = written(&r);
        let back = report::read_results(dir.path()).unwrap();
        assert_eq!(back, r);
        let text = std::fs::read_to_string(dir.path().join("data.json")).unwrap();
        assert!(
            text.starts_with(&format!("{{\n  \"schema\": {},", model::SCHEMA_VERSION)),
            "pretty and versioned: {}",
            &text[..40]
        );
    }
}

#[test]
fn rebuild_gives_a_byte_identical_report() {
    let r = fixture::run();
    let dir = written(&r);
    let original = std::fs::read(dir.path().join("report.md")).unwrap();
    let html = std::fs::read(dir.path().join("report.html")).unwrap();
    std::fs::remove_file(dir.path().join("report.md")).unwrap();
    std::fs::remove_file(dir.path().join("report.html")).unwrap();
    std::fs::remove_dir_all(dir.path().join("charts")).unwrap();
    report::rebuild(dir.path()).unwrap();
    let rebuilt = std::fs::read(dir.path().join("report.md")).unwrap();
    assert!(original == rebuilt, "rebuilt report.md differs");
    assert!(
        html == std::fs::read(dir.path().join("report.html")).unwrap(),
        "rebuilt report.html differs"
    );
    for png in linked_charts(&String::from_utf8(rebuilt).unwrap()) {
        check_png(&dir.path().join("charts").join(png));
    }
}

#[test]
fn reload_table_arithmetic() {
    let md = report::render_markdown(&fixture::run());
    // 100, 400 and 900 ms: mean 466.67, two of three within 500 ms, all within 1000 ms.
    assert!(md.contains(
        "| Total | Total Errors | Ave Time (ms) | <= 500ms | <= 1000ms |\n|---:|---:|---:|---:|---:|\n| 3 | 0 | 466.67 | 66.67% | 100% |\n"
    ));
    // Old workers: 1200 and 1350.5 ms measured, the third not.
    assert!(md.contains("Old workers exited 1275.25 ms after the signal on average (slowest 1350.50 ms; measured for 2 of 3 reloads)"));
}

#[test]
fn report_has_every_section_in_the_seeds_shape() {
    let r = fixture::run();
    let md = report::render_markdown(&r);
    let expect = [
        "# proxybench report: zero-downtime-scaling".to_string(),
        "## Versions".into(),
        "```text\nnginx version: nginx/1.22.1\n".into(),
        "| Cores | 2 |".into(),
        "## Summary".into(),
        "**1 of 3 checks failed:** `limiter throughput within prediction`.".into(),
        // Headline row, worked out by hand from the fixture: 74,277 responses over its 30 s
        // timeline (2,475.57/s), 27 failures, 363 ppm of 74,281 attempts.
        "| scale-up-gradual | coffee | 74,277 | 2475.57 | 27 |".into(),
        "363 ppm".into(),
        "## Case 1: scale-up-gradual".into(),
        "### Load `coffee`: GET http://cafe.example.com/coffee".into(),
        "```text\nRunning 30s test @ http://cafe.example.com/coffee".into(),
        "| connect_refused | 4 |".into(),
        "| 502 | 15 |".into(),
        "| 3 | kill_backend | 12.00 | 8.00 |".into(),
        "| # | Time (s) | Action | Detail | Duration (ms) | Error |".into(),
        "| 5 | 25.00 | stop_replica | nginx-2 (SIGQUIT) | 2400.00 | old workers still running after 2s |".into(),
        "**Error log:** 16 lines (error 4, warn 12).".into(),
        "  2026/11/22 10:04:17 [warn] 4242#4242: *35845 upstream server temporarily disabled".into(),
        "499 (the client closed the connection before the proxy answered): 2.".into(),
        "Non-2xx in the access log: 499: 2, 502: 23 (25 in all).".into(),
        "| 127.0.0.2:8080 |".into(),
        "| backend-2 | 127.0.0.3:8080 | stopped | 30,100 | 22.53% |".into(),
        "| PASSED | 66 | 36.67% |".into(),
        "### Replica start times".into(),
        "A flap is a readiness probe that failed after the replica was ready once.".into(),
        "### Replica readiness".into(),
        // The two failed probes have no answer time: the slowest answer is an answered one's
        // (the timeout once stood here as if it were one).
        "| nginx-1 | 30 | 2 | 1 | 0.80 |".into(),
        "| nginx-0 | 30 | 0 | 0 | 0.80 |".into(),
        "### queue depth".into(),
        "**Open-loop schedule:** 180 requests were due and 180 were sent".into(),
        "| PASS | coffee failure rate <= 0.5% |".into(),
        "| **FAIL** | limiter throughput within prediction |".into(),
    ];
    for e in &expect {
        assert!(md.contains(e.as_str()), "report.md lacks {e:?}");
    }
    assert!(
        !md.contains("PARTIAL"),
        "a complete run has no partial banner"
    );
    // Sections come in the seeds' order.
    let at = |s: &str| md.find(s).unwrap();
    assert!(at("## Versions") < at("## Summary"));
    assert!(at("## Summary") < at("## Case 1"));
    assert!(at("## Case 1") < at("## Case 2"));
    assert!(at("## Case 2") < at("## Checks"));
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[test]
fn partial_run_has_a_banner_with_the_reason() {
    let r = fixture::partial();
    let dir = written(&r);
    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    let banner = md
        .lines()
        .find(|l| l.starts_with("> **PARTIAL RESULTS.**"))
        .expect("banner");
    assert!(banner.contains("interrupted (SIGINT) at 38.2 s"));
    assert!(md.find("PARTIAL RESULTS").unwrap() < md.find("## Versions").unwrap());
    assert!(md.contains("| Outcome | PARTIAL |"));
}

#[test]
fn timeline_csv_has_one_row_per_load_second() {
    let r = fixture::run();
    let dir = written(&r);
    let csv = std::fs::read_to_string(dir.path().join("timeline.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    for k in model::ErrorKind::ALL {
        assert!(header.contains(&k.name()), "no column for {}", k.name());
    }
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let seconds: usize = r
        .cases
        .iter()
        .flat_map(|c| &c.loads)
        .map(|l| l.timeline.len())
        .sum();
    assert_eq!(rows.len(), seconds);
    assert!(rows.iter().all(|row| row.len() == header.len()));
    // Per-kind columns add up to the load's totals.
    let col = header.iter().position(|h| *h == "read_reset").unwrap();
    let coffee: u64 = rows
        .iter()
        .filter(|row| row[1] == "coffee")
        .map(|row| row[col].parse::<u64>().unwrap())
        .sum();
    assert_eq!(
        coffee,
        r.cases[0].loads[0].errors[&model::ErrorKind::ReadReset]
    );
    let events = std::fs::read_to_string(dir.path().join("events.csv")).unwrap();
    assert!(events.contains("scale-up-gradual,3,12,kill_backend,backend-2 (SIGKILL),1.2,\n"));
}

#[test]
fn compare_shows_deltas() {
    let a = fixture::run();
    let mut b = fixture::run();
    b.started_at = "2026-11-23T08:00:00Z".into();
    b.cases[0].loads[0].requests += 1000;
    *b.cases[0].loads[0].status.get_mut(&200).unwrap() += 1000;
    b.cases[0].reloads[0].served_ms = Some(200.0);
    b.cases[0].logs.error_levels.insert("warn".into(), 20);
    b.cases.truncate(1);
    let (da, db) = (written(&a), written(&b));
    let md = report::compare(da.path(), db.path()).unwrap();
    assert_eq!(
        std::fs::read_to_string(db.path().join("compare.md")).unwrap(),
        md
    );

    let req_a = a.cases[0].loads[0].requests;
    let expected_req = format!(
        "| requests | {} | {} | +1,000 | {:+.2}% |",
        thousands(req_a),
        thousands(req_a + 1000),
        1000.0 * 100.0 / req_a as f64
    );
    assert!(
        md.contains(&expected_req),
        "missing {expected_req:?} in\n{md}"
    );
    // 466.67 -> 500.00 ms.
    assert!(
        md.contains("| reload ave time (ms) | 466.67 | 500.00 | +33.33 | +7.14% |"),
        "{md}"
    );
    assert!(
        md.contains("| reloads <= 500ms | 66.67% | 66.67% | +0.00 pp | +0.00% |"),
        "{md}"
    );
    assert!(
        md.contains("| proxy error-log `warn` | 12 | 20 | +8 | +66.67% |"),
        "{md}"
    );
    assert!(md.contains("| latency p99.9 (ms) |"));
    assert!(md.contains("| errors `read_reset` |"));
    assert!(md.contains("| status 502 | 15 | 15 | 0 | +0.00% |"), "{md}");
    assert!(md.contains("## Case `burst 0 at 9 r/s (Poisson)`\n\nOnly in A."));
    assert!(md.contains(&format!(
        "| Directory | {} | {} |",
        da.path().display(),
        db.path().display()
    )));
}

#[test]
fn compare_shows_logs_not_sampled_when_they_were_not_read() {
    // B's proxy logs could not be read: its error-log and 499 counts are not zeros.
    let a = fixture::run();
    let mut b = fixture::run();
    b.cases[0].logs = model::LogSummary {
        missing: Some("the proxy runs elsewhere and its log files were not given".into()),
        ..Default::default()
    };
    let (da, db) = (written(&a), written(&b));
    let md = report::compare(da.path(), db.path()).unwrap();
    let lines: u64 = a.cases[0].logs.error_levels.values().sum();
    assert!(
        md.contains(&format!(
            "| proxy error-log lines | {lines} | not sampled | - | - |"
        )),
        "{md}"
    );
    assert!(
        md.contains("| proxy error-log `warn` | 12 | not sampled | - | - |"),
        "{md}"
    );
    assert!(
        md.contains("| access-log 499 | 2 | not sampled | - | - |"),
        "{md}"
    );
    assert!(
        md.contains(
            "B: the proxy's logs not sampled: the proxy runs elsewhere and its log files were \
             not given."
        ),
        "{md}"
    );
    // In the case where both were read, the counts and deltas are as before.
    assert!(md.contains("| access-log 499 | 0 | 0 | 0 | 0% |"), "{md}");
}

#[test]
fn bad_directories_give_clear_errors() {
    let empty = tempfile::tempdir().unwrap();
    let e = report::read_results(empty.path()).unwrap_err().to_string();
    assert!(
        e.contains("no data.json here") && e.contains(&empty.path().display().to_string()),
        "{e}"
    );
    assert!(!e.contains('\n'));
    let e = report::rebuild(empty.path()).unwrap_err().to_string();
    assert!(e.contains("no data.json here"), "{e}");
    let e = report::read_results(&empty.path().join("nope"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("no such directory"), "{e}");
    let e = report::compare(empty.path(), empty.path())
        .unwrap_err()
        .to_string();
    assert!(e.contains("no data.json here"), "{e}");

    std::fs::write(
        empty.path().join("data.json"),
        "{\"schema\": 99, \"scenario\": \"x\"}",
    )
    .unwrap();
    let e = report::read_results(empty.path()).unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "schema version 99, but this proxybench reads version {}",
            model::SCHEMA_VERSION
        )),
        "{e}"
    );
    std::fs::write(empty.path().join("data.json"), "{\"scenario\": \"x\"}").unwrap();
    let e = report::read_results(empty.path()).unwrap_err().to_string();
    assert!(e.contains("schema version none"), "{e}");
    std::fs::write(
        empty.path().join("data.json"),
        format!("{{\"schema\": {}, \"scenario\": ", model::SCHEMA_VERSION),
    )
    .unwrap();
    let e = report::read_results(empty.path()).unwrap_err().to_string();
    assert!(
        e.contains("not a valid results file") && e.contains("line 1"),
        "{e}"
    );
    std::fs::write(
        empty.path().join("data.json"),
        format!(
            "{{\"schema\": {}, \"scenario\": \"x\"}}",
            model::SCHEMA_VERSION
        ),
    )
    .unwrap();
    let e = report::read_results(empty.path()).unwrap_err().to_string();
    assert!(e.contains("missing field"), "{e}");
}

#[test]
fn empty_run_still_renders() {
    let mut r = fixture::partial();
    r.cases.clear();
    r.checks.clear();
    r.findings.clear();
    r.env = model::Env::default();
    let dir = written(&r);
    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(md.contains("No load ran."));
    assert!(md.contains("proxy version: not recorded"));
    assert!(md.contains("| Proxy kind | not recorded |"));
    assert!(md.contains("No checks were defined for this run."));
    assert_eq!(report::read_results(dir.path()).unwrap(), r);
}

#[test]
fn a_number_json_cannot_carry_is_reported_not_hidden() {
    let mut r = fixture::run();
    r.cases[0].loads[0].latency.mean_us = f64::NAN;
    r.cases[0].proc_samples[3].cpu_pct = f64::NAN;
    let dir = tempfile::tempdir().unwrap();
    let e = report::write_results(dir.path(), &r)
        .unwrap_err()
        .to_string();
    assert!(e.contains("data.json") && e.contains("not finite"), "{e}");
    // Everything else was still written, charts included.
    assert!(dir.path().join("report.md").is_file());
    assert!(dir
        .path()
        .join("charts/1-scale-up-gradual-cpu.png")
        .is_file());
}

#[test]
fn many_actions_are_summarised_not_listed() {
    let mut r = fixture::run();
    let c = &mut r.cases[0];
    c.events = (0..100)
        .map(|i| model::Event {
            t_s: 0.25 * i as f64,
            action: if i % 2 == 0 {
                "reload"
            } else {
                "scale_backends"
            }
            .into(),
            detail: format!("step {i}"),
            duration_ms: 10.0 + i as f64,
            error: (i == 7).then(|| "nginx -t failed: too long parameter".to_string()),
            limit: false,
        })
        .collect();
    c.disruptions = (0..100)
        .map(|i| model::Disruption {
            load: "coffee".into(),
            event: i,
            window_s: (0.25 * i as f64, 0.25 * (i + 1) as f64),
            attempts: 600,
            failed: if i == 50 { 9 } else { 0 },
            first_failure_s: (i == 50).then_some(12.6),
            last_failure_s: (i == 50).then_some(12.7),
            longest_failure_run: if i == 50 { 9 } else { 0 },
            by_cause: if i == 50 {
                [("502".to_string(), 9)].into()
            } else {
                Default::default()
            },
        })
        .collect();
    let md = report::render_markdown(&r);
    assert!(md.contains("100 actions, summarised per kind; each one is in events.csv."));
    // Reloads are events 1, 3, 5... (even indices): 50 of them, durations 10, 12, ... 108.
    assert!(
        md.contains("| reload | 50 | 0.00 | 24.50 | 59.00 | 0 |"),
        "{md}"
    );
    assert!(md.contains("| scale_backends | 50 | 0.25 | 24.75 | 60.00 | 1 |"));
    assert!(
        md.contains("| 8 | 1.75 | scale_backends | step 7 | nginx -t failed: too long parameter |")
    );
    assert!(md.contains("1 of 100 windows had failures; only those are listed"));
    assert!(
        md.contains(
            "| 51 | reload | 12.50 | 0.25 | 600 | 9 | 15000 ppm | 12.60 | 12.70 | 9 | 502 9 |"
        ),
        "{md}"
    );
    // The charts still draw with a hundred markers.
    let dir = tempfile::tempdir().unwrap();
    for f in report::render_charts(&r, dir.path()).unwrap() {
        if f.extension().unwrap() == "png" {
            check_png(&f);
        }
    }
}

/// A thousand growth steps on one case: the actions become one labelled span (not a thousand
/// markers), and time to ready is a scatter against the number of routes.
#[test]
fn a_growth_charts_a_span_of_actions_and_ready_times_against_routes() {
    let mut r = fixture::run();
    let c = &mut r.cases[0];
    c.events = (0..999)
        .map(|i| model::Event {
            t_s: 1.0 + 0.01 * i as f64,
            action: "grow".into(),
            detail: format!("routes {i} -> {}", i + 1),
            duration_ms: 5.0,
            error: None,
            limit: false,
        })
        .collect();
    c.disruptions.clear();
    c.series = vec![model::Series {
        name: "time to ready".into(),
        unit: "ms".into(),
        points: (1..=999)
            .map(|n| (n as f64, 40.0 + (n % 90) as f64))
            .collect(),
        x: model::SeriesX::Count("routes".into()),
        ..Default::default()
    }];
    let dir = tempfile::tempdir().unwrap();
    let files = report::render_charts(&r, dir.path()).unwrap();
    let svg = |suffix: &str| {
        let f = files
            .iter()
            .find(|f| f.to_string_lossy().ends_with(suffix))
            .unwrap_or_else(|| panic!("no chart ending {suffix} in {files:?}"));
        std::fs::read_to_string(f).unwrap()
    };
    let throughput = svg("coffee-throughput.svg");
    assert!(
        throughput.contains("999 grow actions (#1–#999)"),
        "the span is labelled"
    );
    assert!(
        throughput.contains("actions close together"),
        "the span is in the legend"
    );
    let ttr = svg("series-time-to-ready.svg");
    assert!(ttr.contains("number of routes"), "x is the count");
    assert!(!ttr.contains("time since start"), "not against time");
    assert!(!ttr.contains("grow actions"), "no actions on a count axis");
    assert_eq!(
        ttr.matches("<circle").count(),
        999 + 1,
        "a dot per step, and the key"
    );
}

/// A case that ran on a cluster: report.md has its Cluster section (pod timeline, restarts,
/// Warning events, scrapes) with each absent collector's sentence verbatim and no table for
/// what was absent; every time chart carries the pods-Ready steps, and the pods-Ready chart
/// exists; the header names the platform.
#[test]
fn a_case_on_a_cluster_gets_its_cluster_section_and_pods_ready_lines() {
    let mut r = fixture::run();
    r.env.platform = Some(model::PlatformInfo {
        kind: "kubernetes".into(),
        context: "lab".into(),
        namespace: "proxybench-20261125t140000z".into(),
        kept: false,
        pod_path: "port-forward".into(),
        load_paths: vec![model::LoadPath {
            case: "main".into(),
            load: "coffee".into(),
            target: "Service `proxy` (ClusterIP) at its ClusterIP 198.18.128.7".into(),
            from: "this machine".into(),
        }],
    });
    let pod = |t: f64, pod: &str, role: &str, phase: &str, ready: bool| model::PodChange {
        t_s: t,
        pod: pod.into(),
        role: role.into(),
        phase: phase.into(),
        ready,
        terminating: false,
    };
    let c = &mut r.cases[0];
    c.events.push(model::Event {
        t_s: 18.0,
        action: "delete_pod".into(),
        detail: "app=proxy: nginx-7d9-x2 (grace 0s)".into(),
        duration_ms: 31.0,
        error: None,
        limit: false,
    });
    c.cluster = Some(model::ClusterRecord {
        namespace: "proxybench-20261125t140000z".into(),
        context: "lab".into(),
        server_version: "v1.34.4".into(),
        pods: vec![
            pod(0.2, "cafe-5f-a", "backend", "Running", true),
            pod(0.4, "nginx-7d9-x1", "proxy", "Running", true),
            pod(5.3, "nginx-7d9-x2", "proxy", "Pending", false),
            pod(6.1, "nginx-7d9-x2", "proxy", "Running", true),
            pod(18.0, "nginx-7d9-x2", "proxy", "Deleted", false),
        ],
        restarts: vec![model::RestartRecord {
            t_s: 12.5,
            pod: "cafe-5f-a".into(),
            container: "backend".into(),
            count: 1,
            reason: "Error".into(),
            added: Some(1),
        }],
        // The event had counted 2 before the case; it came 3 more times in it.
        warnings: vec![model::ClusterEvent {
            t_s: 17.9,
            object: "Pod/nginx-7d9-x2".into(),
            reason: "Unhealthy".into(),
            message: "Readiness probe failed: connection refused".into(),
            count: 5,
            added: Some(3),
        }],
        metrics: Vec::new(),
        scrapes: vec![model::ScrapeSample {
            t_s: 3.0,
            namespace: "gateway".into(),
            pod: "nginx-7d9-x1".into(),
            metric: "nginx_connections_active".into(),
            labels: String::new(),
            value: 7.0,
            kind: "gauge".into(),
        }],
        series: Vec::new(),
        log_levels: vec![model::LogLevels {
            pod: "nginx-gateway/ngf-0".into(),
            container: "nginx-gateway".into(),
            lines: 12,
            leveled: 11,
            levels: [("error".to_string(), 2), ("info".to_string(), 9)].into(),
            errors: 2,
            first_errors: vec!["failed to reload".into(), "no upstream".into()],
            incomplete: None,
        }],
        absent: vec![
            "metrics API: not served by this cluster (metrics.k8s.io has no endpoint)".into(),
        ],
        proxy_grace_s: Some(30),
        proxy_pre_stop_s: Some(1),
        counters_missing: vec![
            "cafe-1 (pod cafe-5f-b): its log ends without the counters line".into(),
        ],
        pod_path: Some("port-forward".into()),
        load_targets: [(
            String::new(),
            "Service `proxy` (ClusterIP) at its ClusterIP 198.18.128.7".to_string(),
        )]
        .into(),
    });
    // A reload histogram (milliseconds, as NGF's) and a counter, scraped at 1 s and 10 s: 50
    // reloads, 49 at or below 500 ms; the analysis's series by type.
    {
        let c = &mut r.cases[0];
        let k = c.cluster.as_mut().unwrap();
        let sample =
            |t: f64, metric: &str, labels: &str, kind: &str, value: f64| model::ScrapeSample {
                t_s: t,
                namespace: "nginx-gateway".into(),
                pod: "ngf-0".into(),
                metric: metric.into(),
                labels: labels.into(),
                value,
                kind: kind.into(),
            };
        for (t, k0) in [(1.0, 0.0), (10.0, 1.0)] {
            for (le, n) in [("500", 49.0), ("1000", 50.0), ("+Inf", 50.0)] {
                k.scrapes.push(sample(
                    t,
                    "ngf_reloads_milliseconds_bucket",
                    &format!("le=\"{le}\""),
                    "histogram",
                    3.0 + n * k0,
                ));
            }
            k.scrapes.push(sample(
                t,
                "ngf_reloads_milliseconds_count",
                "",
                "histogram",
                3.0 + 50.0 * k0,
            ));
            k.scrapes.push(sample(
                t,
                "ngf_reloads_milliseconds_sum",
                "",
                "histogram",
                300.0 + 6000.0 * k0,
            ));
            k.scrapes.push(sample(
                t,
                "ngf_reloads_total",
                "",
                "counter",
                3.0 + 50.0 * k0,
            ));
        }
        k.series = model::scrape::scrape_windows(&k.scrapes, &c.events, c.elapsed_s, &[500.0]);
    }
    let dir = written(&r);
    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(
        md.contains(
            "| Platform | kubernetes (context `lab`, namespace `proxybench-20261125t140000z`, \
             proxy pods reached by port-forward) |"
        ),
        "{md}"
    );
    // env.json keeps how the proxy pods were reached and the path each load took.
    let env: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("env.json")).unwrap())
            .unwrap();
    assert_eq!(env["platform"]["pod_path"], "port-forward", "{env}");
    assert_eq!(
        env["platform"]["load_paths"][0]["target"],
        "Service `proxy` (ClusterIP) at its ClusterIP 198.18.128.7",
        "{env}"
    );
    assert_eq!(
        env["platform"]["load_paths"][0]["from"], "this machine",
        "{env}"
    );
    let section = &md[md.find("### Cluster").expect("a Cluster section")..];
    let section = &section[..section[4..].find("\n## ").map_or(section.len(), |i| i + 4)];
    for want in [
        "Namespace `proxybench-20261125t140000z`, context `lab`, API server `v1.34.4`.",
        "sleeps 1 s in its preStop hook (still serving), then gets the image's stop signal",
        "the kubelet kills it 30 s after the deletion.",
        "- metrics API: not served by this cluster (metrics.k8s.io has no endpoint)",
        "| proxy | 2 | 1 | 2 |",
        "| 18.00 | nginx-7d9-x2 | proxy | Deleted | no | - |",
        "1 container restart(s) in the case: the sum of the jumps in each container's \
         restartCount",
        "| 12.50 | cafe-5f-a | backend | 1 | 1 | Error |",
        "3 Warning event(s) in the case: the increase of each event's count within the case",
        "| 17.90 | Pod/nginx-7d9-x2 | Unhealthy | +3 | 5 | Readiness probe failed: connection refused |",
        "Partial: the levels cover 0 of 1 logs whole (nginx-gateway/ngf-0/nginx-gateway: 1 of \
         12 line(s) carry no level it can read)",
        "| nginx_connections_active | - | gateway/nginx-7d9-x1 | 1 | 7.00 | 7.00 | 7.00 |",
        "| ngf_reloads_milliseconds | - | 1 | 50 | 6000.00 | 120.00 | ≤ 500: 98.00% | 0 |",
        "| ngf_reloads_total | - | 1 | 50 | 0 |",
        "| nginx-gateway/ngf-0 | nginx-gateway | 12 | 11 | error: 2, info: 9 | 2 | failed to reload; no upstream |",
    ] {
        assert!(section.contains(want), "missing {want:?} in:\n{section}");
    }
    assert!(
        !section.contains("metrics API)"),
        "no metrics table when the metrics API was absent:\n{section}"
    );
    // A backend pod whose counters were lost is named, never a row of zeros.
    assert!(
        md.contains("Backends whose final counters could not be read (left out below, never counted as zero):\n\n- cafe-1 (pod cafe-5f-b): its log ends without the counters line"),
        "{md}"
    );
    // The delete_pod action is on the timeline like any other.
    assert!(
        md.contains("| delete_pod | app=proxy: nginx-7d9-x2 (grace 0s) |"),
        "{md}"
    );
    let charts = linked_charts(&md);
    let pods = charts
        .iter()
        .find(|c| c.ends_with("pods-ready.png"))
        .expect("a pods-Ready chart");
    check_png(&dir.path().join("charts").join(pods));
    let ready_svg =
        std::fs::read_to_string(dir.path().join("charts").join(pods.replace(".png", ".svg")))
            .unwrap();
    assert!(ready_svg.contains("proxy pods Ready"), "{ready_svg}");
    assert!(ready_svg.contains("backend pods Ready"));
    let coffee = charts
        .iter()
        .find(|c| c.ends_with("coffee-throughput.png"))
        .expect("the throughput chart")
        .replace(".png", ".svg");
    let svg = std::fs::read_to_string(dir.path().join("charts").join(coffee)).unwrap();
    assert!(
        svg.contains("proxy pods Ready (right)"),
        "the steps are keyed"
    );
    assert!(svg.contains("delete_pod"), "the action is marked");
    if let Ok(keep) = std::env::var("PROXYBENCH_KEEP_CHARTS") {
        let _ = std::fs::create_dir_all(&keep);
        for f in std::fs::read_dir(dir.path().join("charts")).unwrap() {
            let f = f.unwrap();
            let _ = std::fs::copy(f.path(), Path::new(&keep).join(f.file_name()));
        }
    }
    // The other case ran without a cluster: no Cluster section, no steps.
    assert_eq!(md.matches("### Cluster").count(), 1);
    let back: model::RunResults =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("data.json")).unwrap())
            .unwrap();
    assert_eq!(back.cases[0].cluster, r.cases[0].cluster);
}

/// A run with no platform recorded ran on this machine, and says so.
#[test]
fn a_local_run_names_its_platform() {
    let dir = written(&fixture::run());
    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(md.contains("| Platform | local (processes on this machine) |"));
    assert!(!md.contains("### Cluster"));
}

#[test]
fn backends_that_spoke_h2c_get_a_column_for_it() {
    let mut r = fixture::run();
    assert!(!report::render_markdown(&r).contains("Over h2c"));
    for (i, b) in r.cases[0].backends.iter_mut().enumerate().take(2) {
        b.h2 = Some(model::BackendH2 {
            connections: 4,
            requests: 1_000 * (i as u64 + 1),
            ..Default::default()
        });
    }
    let md = report::render_markdown(&r);
    assert!(md.contains("| Statuses | Over h2c |"), "{md}");
    assert!(md.contains("| 200: 52,000 | 1,000 |"), "{md}");
    assert!(md.contains("| 200: 30,100 | 0 |"), "{md}");
    assert!(md.contains("|  | 3,000 |"), "{md}");
}
