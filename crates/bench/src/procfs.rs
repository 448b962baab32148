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

/// A process's parent and start time, as /proc/PID/stat gives them: its ppid, and when it
/// started in clock ticks since boot.
pub fn stat_parent_start(text: &str) -> Option<(u32, u64)> {
    let rest = &text[text.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state): ppid is field 4, starttime field 22.
    Some((f.get(1)?.parse().ok()?, f.get(19)?.parse().ok()?))
}

/// Turns /proc's start times (clock ticks since boot) into seconds from a case's origin: the
/// boot clock and the monotonic clock (which `Instant` reads) differ by the time the machine
/// slept, read when the clock is made.
#[derive(Debug, Clone, Copy)]
pub struct StartClock {
    tick_hz: f64,
    /// The origin on CLOCK_BOOTTIME, seconds.
    origin_boot_s: f64,
}

impl StartClock {
    /// The clock of a case whose origin is `origin`.
    pub fn new(origin: Instant) -> StartClock {
        use rustix::time::{clock_gettime, ClockId};
        let secs = |t: rustix::time::Timespec| t.tv_sec as f64 + t.tv_nsec as f64 / 1e9;
        let boot = secs(clock_gettime(ClockId::Boottime));
        let hz = rustix::param::clock_ticks_per_second();
        StartClock {
            tick_hz: if hz > 0 { hz as f64 } else { 100.0 },
            origin_boot_s: boot - origin.elapsed().as_secs_f64(),
        }
    }

    /// Seconds from the origin at which a process that started `ticks` after boot started.
    pub fn since_origin(&self, ticks: u64) -> f64 {
        ticks as f64 / self.tick_hz - self.origin_boot_s
    }
}

/// The processes among `pids` (a replica's root and its descendants) other than the roots
/// (those whose parent is not among them): each with when it started, its resident memory and
/// whether its title says it is shutting down (nginx's old workers). A process gone meanwhile is
/// left out.
pub fn generation_procs(pids: &[u32], clock: &StartClock) -> Vec<model::generation::ProcGen> {
    let page = rustix::param::page_size().max(1) as u64;
    let read: Vec<(u32, String)> = pids
        .iter()
        .filter_map(|&p| Some((p, fs::read_to_string(format!("/proc/{p}/stat")).ok()?)))
        .collect();
    read.iter()
        .filter_map(|(pid, text)| {
            let (ppid, start) = stat_parent_start(text)?;
            if !read.iter().any(|(p, _)| *p == ppid) {
                return None;
            }
            let rss = parse_stat(text, false)?.rss_pages * page;
            let title = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let title = String::from_utf8_lossy(&title).replace('\0', " ");
            Some(model::generation::ProcGen {
                pid: *pid,
                started_s: clock.since_origin(start),
                rss_bytes: rss,
                shutting_down: title.contains("shutting down"),
            })
        })
        .collect()
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
    fn parent_and_start_time_come_from_fields_4_and_22() {
        let line = "1234 (nginx: worker (x)) S 77 1234 1234 0 -1 4194560 100 0 0 0 \
                    250 50 7 3 20 0 1 0 4242 12345678 512 18446744073709551615";
        assert_eq!(stat_parent_start(line), Some((77, 4242)));
    }

    /// A child's start is placed between the moments before and after it was spawned, on the
    /// case's clock, to the tick /proc counts in (10 ms).
    #[test]
    fn a_child_starts_between_the_moments_around_its_spawn() {
        let origin = Instant::now();
        std::thread::sleep(std::time::Duration::from_millis(200));
        let clock = StartClock::new(origin);
        let before = origin.elapsed().as_secs_f64();
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let after = origin.elapsed().as_secs_f64();
        // Sampled once the program has settled: read at the instant of its exec, /proc can
        // show a resident size of 0 (seen once on a loaded machine); the start stays bounded
        // by the moments around the spawn.
        std::thread::sleep(std::time::Duration::from_millis(100));
        let me = std::process::id();
        let procs = generation_procs(&[me, child.id()], &clock);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(
            procs.len(),
            1,
            "the root (this process) is left out: {procs:?}"
        );
        let p = &procs[0];
        assert_eq!(p.pid, child.id());
        let tick = 1.0 / rustix::param::clock_ticks_per_second() as f64;
        assert!(
            p.started_s >= before - tick - 1e-3 && p.started_s <= after + 1e-3,
            "{before} {after} {p:?}"
        );
        assert!(p.rss_bytes > 0 && !p.shutting_down, "{p:?}");
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
