//! The live line on stderr while a case runs: case, elapsed vs planned, each load's last second
//! (req/s, errors, p99) and the last action fired. Silent unless stderr is a terminal.

use model::{Event, Second};
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Shared by the load threads (one update per second each) and the action executor.
pub struct Progress {
    label: String,
    planned: Duration,
    origin: Instant,
    enabled: bool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    loads: BTreeMap<String, Second>,
    last_action: Option<String>,
}

impl Progress {
    /// A progress line for one case; `enabled` false makes every call a no-op.
    pub fn new(label: String, planned: Duration, origin: Instant, enabled: bool) -> Progress {
        Progress {
            label,
            planned,
            origin,
            enabled,
            state: Mutex::new(State::default()),
        }
    }

    /// A load finished a second.
    pub fn second(&self, load: &str, s: &Second) {
        if !self.enabled {
            return;
        }
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.loads.insert(load.to_string(), s.clone());
        self.print(&st);
    }

    /// An action fired.
    pub fn action(&self, ev: &Event) {
        if !self.enabled {
            return;
        }
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mark = if ev.error.is_some() { " FAILED" } else { "" };
        st.last_action = Some(format!("{} {} @{:.1}s{mark}", ev.action, ev.detail, ev.t_s));
        self.print(&st);
    }

    /// Clears the line.
    pub fn finish(&self) {
        if self.enabled {
            eprint!("\r\x1b[2K");
            let _ = std::io::stderr().flush();
        }
    }

    fn print(&self, st: &State) {
        let mut line = format!(
            "{} {:.0}s/{:.0}s",
            self.label,
            self.origin.elapsed().as_secs_f64(),
            self.planned.as_secs_f64()
        );
        for (name, s) in &st.loads {
            line.push_str(&format!(
                " | {name} {}/s err {} p99 {}",
                s.requests,
                s.error_total(),
                units::fmt_us(s.p99_us as f64)
            ));
        }
        if let Some(a) = &st.last_action {
            line.push_str(&format!(" | last: {a}"));
        }
        eprint!("\r\x1b[2K{line}");
        let _ = std::io::stderr().flush();
    }
}
