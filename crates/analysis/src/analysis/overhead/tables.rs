//! The overhead analysis's tables and prose: where each case's requests went, its notes and
//! finding, and the comparisons across setups.

use super::*;

pub(super) fn flow_table(case: &str, f: &Facts, tw: Option<(u64, u64)>) -> Table {
    let per = |n: u64| Cell::num(ratio(n, f.requests), 3);
    // A count from a collector: "not sampled" in both cells when it gathered nothing, and
    // with its coverage when it gathered part.
    let measured = |label: &str, n: Measured<u64>| {
        vec![
            Cell::text(label),
            Cell::measured(&n, |n| count(*n)),
            Cell::measured(&n, |n| per(*n)),
        ]
    };
    let log = |g: fn(&LogFacts) -> u64| f.log.as_ref().map(g);
    let mut t = Table::new(
        format!("{case}: {FLOW}"),
        &["Quantity", "Count", "Per client response"],
    );
    t.rows.push(vec![
        Cell::text("Client responses (the load)"),
        count(f.requests),
        Cell::Int(1),
    ]);
    t.rows.push(vec![
        Cell::text("Client errors below HTTP (connect / other)"),
        Cell::list(
            [count(f.connect_errors), count(f.errors - f.connect_errors)],
            " / ",
        ),
        per(f.errors),
    ]);
    if f.proxied() {
        t.rows
            .push(measured("Proxy access-log lines", log(|l| l.lines)));
        t.rows.push(measured(
            "Upstream attempts (addresses in $upstream_addr)",
            log(|l| l.attempts),
        ));
        t.rows.push(measured(
            "Retries (attempts beyond each request's first)",
            f.retries(),
        ));
        t.rows.push(measured(
            "Upstream timeouts in the proxy's error log",
            log(|l| l.timeouts_logged),
        ));
    }
    t.rows.push(measured(
        "Backend responses (backend counters)",
        f.counters.as_ref().map(|c| c.requests),
    ));
    t.rows.push(measured(
        "Backend connections accepted",
        f.counters.as_ref().map(|c| c.connections),
    ));
    let tw_row = |label: &str, n: Option<u64>| {
        vec![
            Cell::text(label),
            n.map(count).unwrap_or_else(|| Cell::Missing("n/a".into())),
            or_dash(n.map(per)),
        ]
    };
    t.rows.push(tw_row(TIME_WAIT_ROW, tw.map(|(l, _)| l)));
    t.rows.push(tw_row(
        "TIME_WAIT sockets on the connecting side (after the case)",
        tw.map(|(_, r)| r),
    ));
    let cpu_row = |what: &str, secs: f64| {
        vec![
            Cell::text(format!("CPU, {what} (µs per client response)")),
            Cell::num_unit(secs, 2, " s"),
            Cell::num(f.cpu_us(secs), 1),
        ]
    };
    if f.proxied() {
        t.rows.push(cpu_row("proxy", f.cpu.proxy));
    }
    t.rows.push(cpu_row("backends", f.cpu.backends));
    t.rows.push(cpu_row("load generator", f.load_cpu()));
    t.notes = notes(f, tw);
    t
}

fn notes(f: &Facts, tw: Option<(u64, u64)>) -> Vec<String> {
    let mut n = Vec::new();
    let cpu = |secs: f64| Cell::num(f.cpu_us(secs), 1);
    if f.closed {
        n.push(fill(
            "little",
            &[
                ("connections", &f.connections),
                ("mean", &us(f.mean_us)),
                (
                    "predicted",
                    &Cell::num(f.connections as f64 / (f.mean_us / 1e6).max(1e-9), 0),
                ),
                ("rps", &Cell::num(f.rps, 0)),
            ],
        ));
    }
    let tw_text = match tw {
        Some((backend, proxy)) => fill(
            if backend >= proxy {
                "tw_backend_first"
            } else {
                "tw_proxy_first"
            },
            &[("backend", &count(backend)), ("proxy", &count(proxy))],
        ),
        None => text("tw_unread").into(),
    };
    let Measured::Complete(c) = f.counters else {
        // Every note below reads the backends' counters, whole.
        return n;
    };
    let conns = count(c.connections);
    let responses = count(c.requests);
    match f.setup {
        Setup::Direct => n.push(fill(
            "direct",
            &[
                ("connections", &conns),
                ("responses", &responses),
                ("load_cpu", &cpu(f.load_cpu())),
                ("backend_cpu", &cpu(f.cpu.backends)),
            ],
        )),
        Setup::NoKeepalive => n.push(fill(
            "no_keepalive",
            &[
                ("connections", &conns),
                ("responses", &responses),
                ("per", &Cell::num(c.conns_per_request(), 3)),
                ("time_wait", &tw_text),
                ("proxy_cpu", &cpu(f.cpu.proxy)),
                ("backend_cpu", &cpu(f.cpu.backends)),
            ],
        )),
        Setup::Keepalive | Setup::Retry => n.push(fill(
            "keepalive",
            &[
                ("keepalive", &f.keepalive),
                ("connections", &conns),
                ("responses", &responses),
                ("per", &Cell::num(c.conns_per_request(), 4)),
                ("proxy_cpu", &cpu(f.cpu.proxy)),
            ],
        )),
    }
    if f.setup == Setup::Retry {
        n.push(common::finding("The retries", f.log.clone(), |l| {
            fill(
                "retry",
                &[
                    ("read_timeout", &or_dash(f.read_timeout_us.map(us))),
                    ("timeouts", &count(l.timeouts_logged)),
                    ("retries", &count(l.retries())),
                    ("backend", &responses),
                    ("client", &count(f.requests)),
                    ("extra", &count(c.requests.saturating_sub(f.requests))),
                ],
            )
        }));
    }
    if let Some(s) = f.spikes {
        n.push(fill(
            "spikes",
            &[
                ("share", &pct(s.share)),
                ("floor", &us(s.floor_us)),
                ("p99", &olat(f.p99)),
                ("max", &lat(f.max)),
            ],
        ));
    }
    n
}

pub(super) fn finding(f: &Facts) -> String {
    let mut s = fill(
        "finding",
        &[
            ("setup", &f.setup.label()),
            ("style", &f.style()),
            ("rps", &Cell::num(f.rps, 0)),
            ("p50", &olat(f.p50)),
            ("p99", &olat(f.p99)),
            ("max", &lat(f.max)),
        ],
    );
    if !f.proxied() {
        s.push('.');
        return s;
    }
    let proxied = |(c, l): (&Counters, &LogFacts)| {
        fill(
            "finding_proxied",
            &[
                ("conns", &Cell::num(c.conns_per_request(), 3)),
                ("attempts", &Cell::num(ratio(l.attempts, l.lines_up), 3)),
            ],
        )
    };
    // The proxy's side needs its logs and the backends' counters: drawn from part of them, the
    // sentence says so; without them it says nothing of it.
    match f.counters.as_ref().zip(f.log.as_ref()) {
        Measured::Complete(both) => {
            s.push_str(&proxied(both));
            s.push('.');
        }
        Measured::Partial(both, p) => {
            s.push_str(&proxied(both));
            s = common::partial_finding(s, &p);
        }
        Measured::Absent(_) => s.push('.'),
    }
    s
}

/// The setups side by side, each with its ratios against going direct.
pub(super) fn comparison(all: &[Summary]) -> Table {
    let mut t = Table::new(
        text("comparison_title"),
        &[
            "Setup",
            "Backends",
            "Case",
            "Req/s",
            "Req/s vs direct",
            "p50",
            "p50 vs direct",
            "p99",
            "p99 vs direct",
            "Max",
            "Non-2xx",
            "Errors",
            "Backend conns / response",
            "TIME_WAIT at backends",
            "Proxy CPU µs / response",
        ],
    );
    for x in all {
        let f = &x.f;
        let d = all
            .iter()
            .find(|d| d.f.setup == Setup::Direct && d.f.style() == f.style())
            .map(|d| &d.f);
        let vs = |a: f64, pick: fn(&Facts) -> f64| or_dash(d.map(|d| times(a, pick(d))));
        let ovs = |a: Option<u64>, pick: fn(&Facts) -> Option<u64>| {
            or_dash(d.map(|d| otimes(a, pick(d))))
        };
        t.rows.push(vec![
            Cell::text(f.setup.label()),
            Cell::text(f.style()),
            Cell::text(&x.name),
            Cell::num(f.rps, 0),
            vs(f.rps, |d| d.rps),
            olat(f.p50),
            ovs(f.p50, |d| d.p50),
            olat(f.p99),
            ovs(f.p99, |d| d.p99),
            lat(f.max),
            count(f.non_2xx),
            count(f.errors),
            Cell::measured(&f.conns_per_request(), |c| Cell::num(*c, 4)),
            x.time_wait.clone(),
            if f.proxied() {
                Cell::num(f.cpu_us(f.cpu.proxy), 1)
            } else {
                Cell::dash()
            },
        ]);
    }
    t.notes = vec![
        text("comparison_ratios").into(),
        text("comparison_keepalive").into(),
    ];
    t
}

pub(super) fn origin_table(all: &[Summary]) -> Table {
    let mut t = Table::new(
        text("origin_title"),
        &[
            "Case",
            "Non-2xx at the client",
            "By origin (proxy access log)",
            "Client connect failures",
            "Other client errors",
        ],
    );
    for x in all {
        let f = &x.f;
        t.rows.push(vec![
            Cell::text(&x.name),
            count(f.non_2xx),
            origins(f),
            count(f.connect_errors),
            if f.other_errors.is_empty() {
                Cell::Count(0)
            } else {
                Cell::list(
                    f.other_errors
                        .iter()
                        .map(|(k, n)| Cell::labelled(&format!("{k}:"), count(*n))),
                    ", ",
                )
            },
        ]);
    }
    t.notes = vec![text("origin_note").into()];
    t
}

pub(super) fn retry_table(all: &[Summary]) -> Table {
    let mut t = Table::new(
        text("retry_title"),
        &[
            "Case",
            "Client responses",
            "Proxy lines",
            "Upstream attempts",
            "Retries",
            "Timeouts logged",
            "Backend responses",
            "Backend - client",
        ],
    );
    for x in all.iter().filter(|x| x.f.proxied()) {
        let f = &x.f;
        t.rows.push(vec![
            Cell::text(&x.name),
            count(f.requests),
            Cell::measured(&f.log, |l| count(l.lines)),
            Cell::measured(&f.log, |l| count(l.attempts)),
            Cell::measured(&f.log, |l| count(l.retries())),
            Cell::measured(&f.log, |l| count(l.timeouts_logged)),
            Cell::measured(&f.counters, |c| count(c.requests)),
            Cell::measured(&f.counters, |c| {
                Cell::Signed(c.requests as i64 - f.requests as i64)
            }),
        ]);
    }
    t.notes = vec![text("retry_note").into()];
    t
}
