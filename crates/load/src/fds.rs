//! File descriptors a run needs, checked before it starts: a socket per connection, a kernel
//! handle per thread (epoll set or io_uring), what the process already holds, and a little room
//! for the rest. When that exceeds the soft open-files limit, the soft limit is raised to the
//! hard one first (as wrk-like tools do); if it is still short, the run does not start, so the
//! shortfall reads as one clear error instead of a run full of `connect_other` (EMFILE) errors.

use crate::config::Error;

/// Descriptors each thread holds besides its sockets (its epoll set or ring, and one spare).
pub const PER_THREAD: u64 = 2;
/// Room for descriptors opened during the run besides the load's (a `--hdr-log` file, the
/// caller's log and /proc readers, a resolver socket).
pub const SLACK: u64 = 16;

/// What a run of `connections` over `threads` needs, given `open_now` descriptors already open.
pub fn needed(connections: u64, threads: u64, open_now: u64) -> u64 {
    connections + threads * PER_THREAD + open_now + SLACK
}

/// Descriptors this process holds now (the entries of /proc/self/fd, less the one reading it).
pub fn open_now() -> u64 {
    match std::fs::read_dir("/proc/self/fd") {
        Ok(dir) => (dir.count() as u64).saturating_sub(1),
        Err(_) => 0,
    }
}

/// The soft and hard RLIMIT_NOFILE.
/// Unlimited reads as `RLIM_INFINITY`, as getrlimit(2) reports it.
fn limits() -> Result<(u64, u64), Error> {
    let lim = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    let or_infinity = |v: Option<u64>| v.unwrap_or(libc::RLIM_INFINITY);
    Ok((or_infinity(lim.current), or_infinity(lim.maximum)))
}

/// Makes sure `connections` sockets over `threads` threads fit under the open-files limit,
/// raising the soft limit toward the hard one when that is enough. The error names both numbers.
pub fn ensure(connections: u64, threads: u64) -> Result<(), Error> {
    let open = open_now();
    let need = needed(connections, threads, open);
    let soft = raise_for(need)?;
    if need <= soft {
        return Ok(());
    }
    Err(Error::Invalid(format!(
        "{connections} connections need {need} open files ({connections} sockets, {} for {threads} \
         threads, {open} already open, {SLACK} spare), but the open-files limit (ulimit -n) is \
         {soft}: use at most {} connections",
        threads * PER_THREAD,
        soft.saturating_sub(need - connections)
    )))
}

/// The soft open-files limit after raising it toward the hard one when `need` exceeds it, for
/// callers that count descriptors their own way (a scenario run holds backends too).
pub fn raise_for(need: u64) -> Result<u64, Error> {
    let (soft, hard) = limits()?;
    if need <= soft {
        return Ok(soft);
    }
    if hard > soft {
        let target = if hard == libc::RLIM_INFINITY {
            need
        } else {
            hard
        };
        let finite = |v: u64| (v != libc::RLIM_INFINITY).then_some(v);
        let lim = rustix::process::Rlimit {
            current: finite(target),
            maximum: finite(hard),
        };
        // Failing to raise it is not an error in itself: the caller compares.
        let _ = rustix::process::setrlimit(rustix::process::Resource::Nofile, lim);
    }
    Ok(limits()?.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_follows_what_is_opened() {
        // Other test threads open and close files meanwhile, so one before/after pair can miss
        // the five; a quiet moment among a few tries shows them.
        let seen = (0..50).any(|_| {
            let before = open_now();
            let files: Vec<std::fs::File> = (0..5)
                .map(|_| std::fs::File::open("/proc/self/stat").unwrap())
                .collect();
            let after = open_now();
            drop(files);
            after >= before + 5
        });
        assert!(seen, "five files opened never showed in the count");
        assert_eq!(needed(100, 3, 7), 100 + 6 + 7 + SLACK);
    }

    #[test]
    fn more_than_the_hard_limit_is_refused_with_both_numbers() {
        let (_, hard) = limits().unwrap();
        if hard >= u32::MAX as u64 {
            return; // no finite limit to exceed on this machine
        }
        let asked = hard + 5000;
        let err = ensure(asked, 2).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("{asked} connections need ")),
            "{err}"
        );
        assert!(
            err.contains(&format!("the open-files limit (ulimit -n) is {hard}")),
            "{err}"
        );
        ensure(10, 1).unwrap();
    }
}
