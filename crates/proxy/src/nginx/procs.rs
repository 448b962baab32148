//! Processes: spawning children that die with proxybench, signalling them, and reading /proc
//! for a master's workers.

use std::io;
use std::process::{Child, Command};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Mutex, OnceLock};

type Job = (Command, Sender<io::Result<Child>>);

/// Spawns `cmd` from one long-lived thread. PR_SET_PDEATHSIG fires when the *thread* that forked
/// the child exits, so spawning from a short-lived action thread would kill the child with it;
/// this thread lives as long as the process.
pub(crate) fn spawn(cmd: Command) -> io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<Sender<Job>>> = OnceLock::new();
    let tx = SPAWNER.get_or_init(|| {
        let (tx, rx) = channel::<Job>();
        std::thread::Builder::new()
            .name("pb-proxy-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("spawn the process-spawner thread");
        Mutex::new(tx)
    });
    let (reply_tx, reply_rx) = channel();
    tx.lock()
        .unwrap_or_else(|p| p.into_inner())
        .send((cmd, reply_tx))
        .map_err(|_| io::Error::other("spawner thread is gone"))?;
    reply_rx
        .recv()
        .map_err(|_| io::Error::other("spawner thread is gone"))?
}

/// Sends `sig` to one process; false when it does not exist.
pub(crate) fn signal(pid: u32, sig: i32) -> bool {
    // SAFETY: kill(2) takes no pointers; a stale pid can at worst signal the wrong process,
    // which is not memory unsafety (and the caller's pids are its own children).
    unsafe { libc::kill(pid as i32, sig) == 0 }
}

/// Sends `sig` to every process of group `pgid`.
pub(crate) fn signal_group(pgid: u32, sig: i32) -> bool {
    // SAFETY: kill(2) takes no pointers; the negative pid names a process group, as meant.
    unsafe { libc::kill(-(pgid as i32), sig) == 0 }
}

/// (state, ppid) of a process from /proc/PID/stat.
fn stat(pid: u32) -> Option<(u8, u32)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) S ppid ..."; comm may hold spaces and parentheses, so cut at the last ')'.
    let rest = &s[s.rfind(')')? + 1..];
    let mut it = rest.split_whitespace();
    let state = it.next()?.bytes().next()?;
    let ppid = it.next()?.parse().ok()?;
    Some((state, ppid))
}

/// True while `pid` exists and is not a zombie.
pub(crate) fn alive(pid: u32) -> bool {
    matches!(stat(pid), Some((s, _)) if s != b'Z' && s != b'X')
}

/// Live children of `parent` (nginx workers of a master), by scanning /proc.
pub(crate) fn children(parent: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out: Vec<u32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| matches!(stat(pid), Some((s, pp)) if pp == parent && s != b'Z' && s != b'X'))
        .collect();
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_and_liveness_of_a_real_child() {
        let me = std::process::id();
        let mut c = spawn({
            let mut c = Command::new("sleep");
            c.arg("30");
            c
        })
        .unwrap();
        assert!(alive(c.id()));
        assert!(children(me).contains(&c.id()));
        assert!(signal(c.id(), libc::SIGKILL));
        c.wait().unwrap();
        assert!(!alive(c.id()));
        assert!(!children(me).contains(&c.id()));
    }
}
