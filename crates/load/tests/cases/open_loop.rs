// Included by tests/open_loop.rs once per I/O backend (`IO`).

use model::Arrivals;
use proxybench_load as load;
use std::time::Duration;

fn open(url: &str, rate: f64, arrivals: Arrivals, seed: u64, threads: u32) -> load::Config {
    let mut cfg = load::Config::new(url).unwrap();
    cfg.io = IO;
    cfg.connections = 8;
    cfg.threads = threads;
    cfg.rate = Some(rate);
    cfg.arrivals = arrivals;
    cfg.seed = seed;
    cfg.duration = Some(Duration::from_secs(2));
    cfg
}

/// Even pacing: the counts are exact in every run; the rate achieved and each whole second's
/// count are timed (a stall of 30-40 ms of the client's or nginx's thread near a second's edge
/// or at the last send moves them past their bounds), so they pass in one of three runs.
#[test]
fn even_pacing_holds_its_rate() {
    let ng = testkit::Nginx::return_200(1);
    let cfg = open(&ng.url("/"), 2000.0, Arrivals::Even, 1, 2);
    testkit::in_one_of(3, || {
        let o = load::run(&cfg, &load::Control::new()).unwrap();
        let s = &o.summary;
        let sch = s.schedule.as_ref().unwrap();
        assert_eq!(sch.intended, 4000, "2 s at 2000/s");
        assert_eq!(sch.sent, 4000);
        assert_eq!(s.requests, 4000);
        assert_eq!(sch.late_threshold_us, 1000);
        assert!(s.latency_uncorrected.is_some());
        let mut misses = Vec::new();
        if (sch.achieved_rate - 2000.0).abs() >= 40.0 {
            misses.push(format!("achieved {}", sch.achieved_rate));
        }
        // Whole seconds inside the run each hold 2000 arrivals; completions may shift across a
        // boundary by a few milliseconds on a busy machine.
        let start = s.start_s;
        let end = s.start_s + s.elapsed_s;
        for row in &s.timeline {
            let (a, b) = (row.t as f64, row.t as f64 + 1.0);
            if a >= start + 0.05 && b <= end - 0.05 && (row.requests as f64 - 2000.0).abs() > 60.0 {
                misses.push(format!("second {}: {} requests", row.t, row.requests));
            }
        }
        if misses.is_empty() {
            Ok(())
        } else {
            Err(misses.join(", "))
        }
    });
}

#[test]
fn poisson_repeats_with_a_seed_and_has_the_right_mean() {
    let ng = testkit::Nginx::return_200(1);
    let run = |seed, threads| {
        let mut cfg = open(&ng.url("/"), 3000.0, Arrivals::Poisson, seed, threads);
        cfg.io = IO;
        // Poisson arrivals come in bursts: enough connections that none has to wait.
        cfg.connections = 32;
        let o = load::run(&cfg, &load::Control::new()).unwrap();
        o.summary.schedule.unwrap()
    };
    let a = run(7, 1);
    let b = run(7, 2);
    let c = run(8, 2);
    // The same seed gives the same arrivals, so the same number of them fell in the 2 s.
    assert_eq!(a.intended, b.intended);
    assert_ne!(a.intended, c.intended);
    for s in [&a, &b, &c] {
        // Mean 6000 arrivals, standard deviation about 77: a 5% band is over 3.8 sigma.
        assert!(
            (s.intended as f64 - 6000.0).abs() < 300.0,
            "intended {}",
            s.intended
        );
        assert_eq!(s.sent, s.intended);
    }
}
