//! The overhead analysis's checks: Little's law, connections per request with and without
//! upstream keepalive, and what retries do to the counts and the tail.

use super::*;

pub(super) fn checks(case: &str, f: &Facts, tick_us: u64) -> Vec<CheckResult> {
    let tol = &DATA.tolerances;
    let mut out = Vec::new();
    if f.closed && f.mean_us > 0.0 && f.rps > 0.0 {
        let predicted = f.connections as f64 / (f.mean_us / 1e6);
        let off = (f.rps - predicted).abs() / predicted;
        out.push(check(
            case,
            text("check_little"),
            fill(
                "check_little_expected",
                &[
                    ("predicted", &Cell::num(predicted, 0)),
                    ("tolerance", &Cell::num(tol.little * 100.0, 0)),
                ],
            ),
            fill(
                "check_little_actual",
                &[
                    ("rps", &Cell::num(f.rps, 0)),
                    ("off", &Cell::num(off * 100.0, 1)),
                ],
            ),
            off <= tol.little,
        ));
    }
    match f.setup {
        Setup::NoKeepalive => {
            out.push(measured_check(
                case,
                text("check_no_keepalive"),
                fill(
                    "check_no_keepalive_expected",
                    &[("connections", &f.connections)],
                ),
                f.counters.clone(),
                |c| {
                    let extra = c.connections as i64 - c.requests as i64;
                    (
                        fill(
                            "check_no_keepalive_actual",
                            &[
                                ("connections", &count(c.connections)),
                                ("responses", &count(c.requests)),
                            ],
                        ),
                        c.requests > 0 && (0..=i64::from(f.connections)).contains(&extra),
                    )
                },
            ));
        }
        Setup::Retry => out.extend(retry_checks(case, f, tick_us)),
        _ => {}
    }
    if let (Some(s), false) = (f.spikes, f.setup == Setup::Retry) {
        if s.share >= tol.spike_share_for_p99 {
            out.push(check(
                case,
                text("check_spike_p99"),
                fill(
                    "check_spike_p99_expected",
                    &[("floor", &us(s.floor_us)), ("share", &pct(s.share))],
                ),
                olat(f.p99),
                f.p99.is_some_and(|p| p as f64 >= s.floor_us),
            ));
        }
    }
    out
}

fn retry_checks(case: &str, f: &Facts, tick_us: u64) -> Vec<CheckResult> {
    let tol = &DATA.tolerances;
    let mut out = Vec::new();
    // Losing none needs requests to lose: a load that got no response proves nothing.
    out.push(measured_check(
        case,
        text("check_retries_lose_none"),
        format!(">= {}", count(f.requests)),
        f.counters.clone(),
        |c| {
            if f.requests == 0 {
                ("no data: the load received no response".into(), false)
            } else {
                (count(c.requests).to_string(), c.requests >= f.requests)
            }
        },
    ));
    // The backends' excess over the client is the retries, give or take the requests in flight
    // when the load stopped (logged by the proxy, answered by a backend, never read by the client).
    let slack = i64::from(f.connections) + (f.requests / 1000) as i64;
    out.push(measured_check(
        case,
        text("check_extra_are_retries"),
        fill(
            "check_extra_are_retries_expected",
            &[
                ("retries", &Cell::measured(&f.retries(), |r| count(*r))),
                ("slack", &slack),
            ],
        ),
        f.counters.clone().zip(f.retries()),
        |(c, retries)| {
            let excess = c.requests as i64 - f.requests as i64;
            (
                fill("check_extra_are_retries_actual", &[("excess", &excess)]),
                (excess - retries as i64).abs() <= slack,
            )
        },
    ));
    out.push(measured_check(
        case,
        text("check_few_connections"),
        fill(
            "check_few_connections_expected",
            &[("share", &Cell::num(tol.keepalive_share * 100.0, 0))],
        ),
        f.counters.clone(),
        |c| {
            (
                fill(
                    "check_few_connections_actual",
                    &[
                        ("connections", &count(c.connections)),
                        ("responses", &count(c.requests)),
                        ("pct", &pct(c.conns_per_request())),
                    ],
                ),
                c.requests > 0 && c.conns_per_request() <= tol.keepalive_share,
            )
        },
    ));
    if let (Some(s), Some(rt)) = (f.spikes, f.read_timeout_us) {
        let spiked = f.log.value().map_or(0.0, |l| s.share * l.lines_up as f64);
        out.push(measured_check(
            case,
            text("check_spikes_retried"),
            fill(
                "check_spikes_retried_expected",
                &[
                    ("retries", &Cell::num(tol.retried_spikes * spiked, 0)),
                    ("share", &Cell::num(tol.retried_spikes * 100.0, 0)),
                    ("spikes", &pct(s.share)),
                ],
            ),
            f.retries(),
            |r| {
                (
                    count(r).to_string(),
                    spiked > 0.0 && r as f64 >= tol.retried_spikes * spiked,
                )
            },
        ));
        // A retried request costs the read timeout (on the proxy's coarse clock) plus one ordinary
        // answer; p90 stands for an ordinary answer under whatever load the machine is under.
        // With no request answered there is no tail to cut: not measurable, never "p99 0µs".
        match (f.p90, f.p99) {
            (Some(p90), Some(p99)) => {
                let bound = rt + tick_us as f64 + 2.0 * p90 as f64;
                out.push(check(
                    case,
                    text("check_tail_cut"),
                    fill(
                        "check_tail_cut_expected",
                        &[("bound", &us(bound)), ("floor", &us(s.floor_us))],
                    ),
                    lat(p99),
                    (p99 as f64) <= bound,
                ));
            }
            _ => out.push(check(
                case,
                text("check_tail_cut"),
                fill(
                    "check_tail_cut_expected",
                    &[("bound", &"-"), ("floor", &us(s.floor_us))],
                ),
                NO_ANSWER,
                false,
            )),
        }
    }
    out
}

/// The run's check that `setup` (keepalive to the backends, or retries with it) opens fewer
/// connections per request than no keepalive (`nk`) does, by the tolerance's share.
pub(super) fn keepalive_check(style: &str, setup: Setup, nk: &Facts, k: &Facts) -> CheckResult {
    let share = DATA.tolerances.keepalive_share;
    let name = fill(
        "check_keepalive_fewer",
        &[("style", &style), ("setup", &setup.label())],
    );
    let mut c = measured_check(
        "",
        name,
        "",
        nk.counters.clone().zip(k.counters.clone()),
        |(n, k)| {
            let bound = share * n.conns_per_request();
            (
                fill(
                    "check_keepalive_fewer_actual",
                    &[("conns", &Cell::num(k.conns_per_request(), 4))],
                ),
                n.requests > 0 && k.requests > 0 && k.conns_per_request() <= bound,
            )
        },
    );
    // A check over the whole run: it belongs to no case.
    c.case = None;
    c.expected = fill(
        "check_keepalive_fewer_expected",
        &[
            (
                "bound",
                &Cell::measured(&nk.conns_per_request(), |b| Cell::num(b * share, 4)),
            ),
            ("share", &Cell::num(share * 100.0, 0)),
            (
                "base",
                &Cell::measured(&nk.conns_per_request(), |b| Cell::num(*b, 3)),
            ),
        ],
    );
    c
}
