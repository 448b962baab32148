//! CPU and memory per process group, read from /proc once a second: proxy replicas by pid (a
//! root process's reaped children count through its cutime/cstime, so CPU of workers retired by
//! a reload is not lost), and proxybench's own threads grouped by name prefix (`pb-load-`, `pb-backend-`).

use model::ProcSample;
use std::collections::HashMap;
use std::fs;
use std::time::Instant;

/// CPU ticks (user + system) and resident pages of one process or thread.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// utime + stime (+ cutime + cstime when asked) in clock ticks.
    pub ticks: u64,
    /// Resident set size in pages.
    pub rss_pages: u64,
}

/// Parses `/proc/<pid>/stat` text; `children` adds the reaped children's time.
pub fn parse_stat(text: &str, children: bool) -> Option<Usage> {
    // The command name may contain spaces and parentheses: fields start after the last ')'.
    let rest = &text[text.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state); utime is field 14 -> index 11.
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    let mut ticks = num(11)? + num(12)?;
    if children {
        ticks += num(13)? + num(14)?;
    }
    Some(Usage {
        ticks,
        rss_pages: num(21)?,
    })
}

/// The thread name (comm) in a stat line.
pub fn stat_comm(text: &str) -> Option<&str> {
    Some(&text[text.find('(')? + 1..text.rfind(')')?])
}

fn read_usage(path: &str, children: bool) -> Option<Usage> {
    parse_stat(&fs::read_to_string(path).ok()?, children)
}

/// A named set of processes to sample.
#[derive(Debug, Clone)]
pub enum Group {
    /// A proxy replica: its root process, a master say (children's time included), and its
    /// current descendants (workers).
    Master {
        /// Group name, the replica's (`KIND-N`: `nginx-0`, `haproxy-1`...).
        name: String,
        /// Master pid.
        master: u32,
        /// Worker pids at the time of sampling.
        workers: Vec<u32>,
    },
    /// Threads of this process whose name starts with `prefix` (RSS is not split per thread).
    Threads {
        /// Group name, e.g. `load`.
        name: String,
        /// Thread-name prefix, e.g. `pb-load-`.
        prefix: String,
    },
    /// This whole process (its RSS, all its threads' CPU).
    SelfProcess {
        /// Group name, e.g. `proxybench`.
        name: String,
    },
}

impl Group {
    fn name(&self) -> &str {
        match self {
            Group::Master { name, .. }
            | Group::Threads { name, .. }
            | Group::SelfProcess { name } => name,
        }
    }
}

/// Turns cumulative tick counts into per-interval CPU percentages.
pub struct Sampler {
    tick_hz: f64,
    page: u64,
    prev: HashMap<String, (u64, Instant)>,
}

impl Default for Sampler {
    fn default() -> Self {
        Self::new()
    }
}

impl Sampler {
    /// A sampler with no history (the first sample of each group reports 0% CPU).
    pub fn new() -> Sampler {
        // Both come from the auxiliary vector the kernel gave the process, as sysconf's do.
        let hz = rustix::param::clock_ticks_per_second();
        let page = rustix::param::page_size();
        Sampler {
            tick_hz: if hz > 0 { hz as f64 } else { 100.0 },
            page: if page > 0 { page as u64 } else { 4096 },
            prev: HashMap::new(),
        }
    }

    /// Samples every group now; `t_s` is the time since the run origin.
    pub fn sample(&mut self, groups: &[Group], t_s: f64) -> Vec<ProcSample> {
        let now = Instant::now();
        groups
            .iter()
            .filter_map(|g| {
                let (usage, procs) = measure(g)?;
                let cpu_pct = match self.prev.get(g.name()) {
                    Some(&(ticks, at)) if usage.ticks >= ticks => {
                        let dt = now.duration_since(at).as_secs_f64();
                        if dt > 0.0 {
                            (usage.ticks - ticks) as f64 / self.tick_hz / dt * 100.0
                        } else {
                            0.0
                        }
                    }
                    _ => 0.0,
                };
                self.prev.insert(g.name().to_string(), (usage.ticks, now));
                Some(ProcSample {
                    t_s,
                    group: g.name().to_string(),
                    cpu_pct,
                    rss_bytes: usage.rss_pages * self.page,
                    procs,
                })
            })
            .collect()
    }
}

fn measure(g: &Group) -> Option<(Usage, u32)> {
    match g {
        Group::Master {
            master, workers, ..
        } => {
            let mut u = read_usage(&format!("/proc/{master}/stat"), true)?;
            let mut n = 1;
            for w in workers {
                if let Some(wu) = read_usage(&format!("/proc/{w}/stat"), false) {
                    u.ticks += wu.ticks;
                    u.rss_pages += wu.rss_pages;
                    n += 1;
                }
            }
            Some((u, n))
        }
        Group::Threads { prefix, .. } => {
            let mut u = Usage::default();
            let mut n = 0;
            for e in fs::read_dir("/proc/self/task").ok()?.flatten() {
                let Ok(text) = fs::read_to_string(e.path().join("stat")) else {
                    continue;
                };
                if stat_comm(&text).is_some_and(|c| c.starts_with(prefix.as_str())) {
                    if let Some(tu) = parse_stat(&text, false) {
                        u.ticks += tu.ticks;
                        n += 1;
                    }
                }
            }
            Some((u, n))
        }
        Group::SelfProcess { .. } => Some((read_usage("/proc/self/stat", false)?, 1)),
    }
}

/// TIME_WAIT sockets whose local port (the backend's side) or remote port (the proxy's or the
/// load's side) is one of `ports`, read from `/proc/net/tcp` (the backends listen on IPv4).
pub fn time_wait(ports: &[u16]) -> Option<model::TimeWait> {
    Some(parse_time_wait(
        &fs::read_to_string("/proc/net/tcp").ok()?,
        ports,
    ))
}

/// [`time_wait`] on `/proc/net/tcp` text.
pub fn parse_time_wait(text: &str, ports: &[u16]) -> model::TimeWait {
    let port_of = |field: &str| {
        field
            .rsplit_once(':')
            .and_then(|(_, p)| u16::from_str_radix(p, 16).ok())
    };
    let mut tw = model::TimeWait {
        backend_side: 0,
        peer_side: 0,
    };
    for line in text.lines().skip(1) {
        let mut f = line.split_whitespace();
        let (Some(_), Some(l), Some(r), Some(state)) = (f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        if state != "06" {
            continue;
        }
        if port_of(l).is_some_and(|p| ports.contains(&p)) {
            tw.backend_side += 1;
        } else if port_of(r).is_some_and(|p| ports.contains(&p)) {
            tw.peer_side += 1;
        }
    }
    tw
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_lines_with_odd_names() {
        let line = "1234 (nginx: worker (x)) S 1 1234 1234 0 -1 4194560 100 0 0 0 \
                    250 50 7 3 20 0 1 0 100 12345678 512 18446744073709551615";
        let u = parse_stat(line, false).unwrap();
        assert_eq!(u.ticks, 300);
        assert_eq!(u.rss_pages, 512);
        assert_eq!(parse_stat(line, true).unwrap().ticks, 310);
        assert_eq!(stat_comm(line), Some("nginx: worker (x)"));
    }

    #[test]
    fn samples_own_threads_by_name() {
        // How much CPU the busy thread gets depends on the neighbours of a shared 2-core
        // machine: the share is a timing check (one of three attempts); the count and the
        // memory are not.
        testkit::in_one_of(3, || {
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let s2 = stop.clone();
            let h = std::thread::Builder::new()
                .name("pb-test-spin".into())
                .spawn(move || {
                    let mut x = 0u64;
                    while !s2.load(std::sync::atomic::Ordering::Relaxed) {
                        x = x.wrapping_add(1);
                        std::hint::black_box(x);
                    }
                })
                .unwrap();
            let groups = [
                Group::Threads {
                    name: "spin".into(),
                    prefix: "pb-test-".into(),
                },
                Group::SelfProcess {
                    name: "self".into(),
                },
            ];
            let mut s = Sampler::new();
            s.sample(&groups, 0.0);
            std::thread::sleep(std::time::Duration::from_millis(500));
            let out = s.sample(&groups, 0.5);
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            h.join().unwrap();
            let spin = out.iter().find(|x| x.group == "spin").unwrap();
            assert_eq!(spin.procs, 1);
            let me = out.iter().find(|x| x.group == "self").unwrap();
            assert!(me.rss_bytes > 0);
            // A busy thread uses most of a core; the machine is shared, so only demand a
            // clear signal.
            (spin.cpu_pct > 20.0)
                .then_some(())
                .ok_or_else(|| format!("{spin:?}"))
        });
    }

    #[test]
    fn time_wait_counts_by_side() {
        // Port 0x1F90 = 8080 is the backend's; state 06 is TIME_WAIT, 01 ESTABLISHED.
        let text = "  sl  local_address rem_address   st\n\
            0: 0100007F:1F90 0100007F:A000 06 x\n\
            1: 0100007F:1F90 0100007F:A001 06 x\n\
            2: 0100007F:A002 0100007F:1F90 06 x\n\
            3: 0100007F:1F90 0100007F:A003 01 x\n\
            4: 0100007F:0050 0100007F:A004 06 x\n";
        let tw = parse_time_wait(text, &[8080]);
        assert_eq!((tw.backend_side, tw.peer_side), (2, 1));
    }
}
