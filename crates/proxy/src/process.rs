//! Processes of a proxy replica: spawning children that die with proxybench, signalling them,
//! reading /proc for a master's workers, and [`Supervised`], the process group every driver runs
//! its replicas in (so a crash of proxybench or a killed master leaves nothing behind).

use crate::config::Cpus;
use crate::Error;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

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

/// The pid and signal of a kill(2): `None` for a pid that is no process's (0, or past
/// `i32::MAX`) or a number that names no signal.
fn target(pid: u32, sig: i32) -> Option<(rustix::process::Pid, rustix::process::Signal)> {
    let pid = rustix::process::Pid::from_raw(i32::try_from(pid).ok()?)?;
    Some((pid, rustix::process::Signal::from_named_raw(sig)?))
}

/// Sends `sig` (a `libc::SIG*` number) to one process; false when it does not exist.
pub(crate) fn signal(pid: u32, sig: i32) -> bool {
    target(pid, sig).is_some_and(|(p, s)| rustix::process::kill_process(p, s).is_ok())
}

/// Sends `sig` to every process of group `pgid`.
pub(crate) fn signal_group(pgid: u32, sig: i32) -> bool {
    target(pgid, sig).is_some_and(|(p, s)| rustix::process::kill_process_group(p, s).is_ok())
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

/// (pid, ppid) of every live process, by scanning /proc once (empty when it cannot be read).
fn live() -> Vec<(u32, u32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| match stat(pid) {
            Some((s, pp)) if s != b'Z' && s != b'X' => Some((pid, pp)),
            _ => None,
        })
        .collect()
}

/// Every live descendant of `root` (workers of a master, their helpers), by scanning /proc once.
pub(crate) fn descendants(root: u32) -> Vec<u32> {
    let table = live();
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for &(pid, pp) in &table {
            if pp == p && !out.contains(&pid) {
                out.push(pid);
                frontier.push(pid);
            }
        }
    }
    out.sort_unstable();
    out
}

/// The name a process runs under (`/proc/PID/comm`).
pub(crate) fn comm(pid: u32) -> Option<String> {
    let c = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(c.trim_end_matches('\n').to_string())
}

/// Every live process named `name` (`/proc/PID/comm`) and every descendant of one: the roots
/// (those whose parent is not named `name`) first, by pid, then the rest by pid.
pub(crate) fn by_comm(name: &str) -> Vec<u32> {
    let table = live();
    let named: Vec<u32> = table
        .iter()
        .filter(|(pid, _)| comm(*pid).as_deref() == Some(name))
        .map(|(pid, _)| *pid)
        .collect();
    let mut roots: Vec<u32> = table
        .iter()
        .filter(|(pid, pp)| named.contains(pid) && !named.contains(pp))
        .map(|(pid, _)| *pid)
        .collect();
    roots.sort_unstable();
    let mut rest = Vec::new();
    let mut frontier = roots.clone();
    while let Some(p) = frontier.pop() {
        for &(pid, pp) in &table {
            if pp == p && !roots.contains(&pid) && !rest.contains(&pid) {
                rest.push(pid);
                frontier.push(pid);
            }
        }
    }
    rest.sort_unstable();
    roots.extend(rest);
    roots
}

/// How a bounded command ended: its exit status (`None` when it ran past its bound and was
/// killed) and how long it ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ran {
    /// The exit status; `None` when the command was killed at its time bound.
    pub status: Option<std::process::ExitStatus>,
    /// From the spawn to the exit (or the kill).
    pub took: Duration,
}

/// Runs `argv` (no shell; stdin null, stdout and stderr to the two files) in a process group of
/// its own and waits up to `timeout`; past it the whole group is killed. For the user's commands:
/// an external target's reload, a scenario's `exec` action.
pub fn run_bounded(
    argv: &[String],
    timeout: Duration,
    stdout: &Path,
    stderr: &Path,
) -> Result<Ran, Error> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| Error::Invalid("an empty command".into()))?;
    let file = |p: &Path| {
        std::fs::File::create(p).map_err(|e| Error::io(format!("cannot create {}", p.display()), e))
    };
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(file(stdout)?)
        .stderr(file(stderr)?)
        .process_group(0);
    let t0 = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| Error::io(format!("cannot run {program}"), e))?;
    let deadline = t0 + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                return Ok(Ran {
                    status: Some(status),
                    took: t0.elapsed(),
                })
            }
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
            _ => {
                let took = t0.elapsed();
                signal_group(child.id(), libc::SIGKILL);
                let _ = child.wait();
                return Ok(Ran { status: None, took });
            }
        }
    }
}

/// What `program args...` prints (stdout, then stderr, trimmed): a proxy's version for
/// env.json, whichever stream it prints it on (nginx -V writes to stderr, caddy to stdout).
pub(crate) fn output_text(program: &Path, args: &[&str]) -> Result<String, Error> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            Error::io(
                format!("cannot run {} {}", program.display(), args.join(" ")),
                e,
            )
        })?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    Ok(text.trim_end().to_string())
}

/// A proxy replica's main process, run in its own process group and never left behind:
/// PR_SET_PDEATHSIG takes it down with proxybench, a watchdog shell in the same group takes the
/// rest of the group down too (it reads a pipe whose writer is proxybench and kills the group at
/// end of file), and [`Supervised::kill_group`] (also run on drop) kills what is left.
#[derive(Debug)]
pub struct Supervised {
    name: String,
    main: Child,
    watchdog: Option<Child>,
    running: bool,
    stderr: PathBuf,
}

thread_local! {
    /// The CPUs that processes this thread spawns are pinned to, while a [`PinSpawns`] lives.
    static PIN: std::cell::RefCell<Option<Cpus>> = const { std::cell::RefCell::new(None) };
}

/// Pins every proxy process this thread starts while it lives to a CPU set (`[proxy] cpus`):
/// the master and the workers it forks inherit the set, so a replica runs on exactly those cores
/// however many processes it has. Dropping it restores what was pinned before.
#[must_use = "the pin holds only while the guard lives"]
pub struct PinSpawns {
    before: Option<Cpus>,
}

impl PinSpawns {
    /// Pins this thread's spawns to `cpus`; `None` leaves them on the run's own CPUs.
    pub fn new(cpus: Option<&Cpus>) -> PinSpawns {
        let before = PIN.with(|p| p.replace(cpus.cloned()));
        PinSpawns { before }
    }
}

impl Drop for PinSpawns {
    fn drop(&mut self) {
        let before = self.before.take();
        PIN.with(|p| *p.borrow_mut() = before);
    }
}

/// The kernel's form of a CPU list, for `sched_setaffinity(2)`.
fn cpu_set(cpus: &Cpus) -> rustix::thread::CpuSet {
    let mut set = rustix::thread::CpuSet::new();
    for &c in cpus.list() {
        set.set(c);
    }
    set
}

impl Supervised {
    /// Starts `cmd` (stdin and stdout null, stderr to `stderr_file`) in a new process group with
    /// its watchdog. `name` names the replica in messages.
    pub fn spawn(name: &str, cmd: Command, stderr_file: &Path) -> Result<Supervised, Error> {
        Supervised::start(name, cmd, Stdio::null(), stderr_file)
    }

    /// [`spawn`](Self::spawn), with stdout appended to `stdout_file` too: for proxies that can
    /// write their access log only to a stream (HAProxy's `log stdout`).
    pub fn spawn_with_stdout(
        name: &str,
        cmd: Command,
        stdout_file: &Path,
        stderr_file: &Path,
    ) -> Result<Supervised, Error> {
        let stdout = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(stdout_file)
            .map_err(|e| Error::io(format!("cannot create {}", stdout_file.display()), e))?;
        Supervised::start(name, cmd, Stdio::from(stdout), stderr_file)
    }

    fn start(
        name: &str,
        mut cmd: Command,
        stdout: Stdio,
        stderr_file: &Path,
    ) -> Result<Supervised, Error> {
        let stderr = std::fs::File::create(stderr_file)
            .map_err(|e| Error::io(format!("cannot create {}", stderr_file.display()), e))?;
        let program = cmd.get_program().to_string_lossy().into_owned();
        cmd.stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .process_group(0);
        // The CPU set is built here, in the parent: the child only hands it to the kernel.
        let cpus = PIN.with(|p| p.borrow().clone()).map(|c| cpu_set(&c));
        // SAFETY: the closure runs in the forked child before exec, where only
        // async-signal-safe calls are allowed; it makes raw system calls only, prctl(2) and
        // sched_setaffinity(2) on a set built before the fork, which neither allocate nor take a
        // lock (they set this child's parent-death signal and the CPUs it may run on).
        unsafe {
            cmd.pre_exec(move || {
                rustix::process::set_parent_process_death_signal(Some(
                    rustix::process::Signal::KILL,
                ))?;
                if let Some(set) = &cpus {
                    rustix::thread::sched_setaffinity(None, set)?;
                }
                Ok(())
            });
        }
        let main =
            spawn(cmd).map_err(|e| Error::io(format!("{name}: cannot start {program}"), e))?;
        let pgid = main.id();
        let mut s = Supervised {
            name: name.to_string(),
            main,
            watchdog: None,
            running: true,
            stderr: stderr_file.to_path_buf(),
        };
        // Joins the group and waits for proxybench to go; then kills the group.
        let mut wd = Command::new("/bin/sh");
        wd.arg("-c")
            .arg("read x; kill -9 -$1")
            .arg("pb-proxy-watchdog")
            .arg(pgid.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(pgid as i32);
        s.watchdog = Some(
            spawn(wd).map_err(|e| Error::io(format!("{name}: cannot start the watchdog"), e))?,
        );
        Ok(s)
    }

    /// The main process's pid (also the process group id).
    pub fn pid(&self) -> u32 {
        self.main.id()
    }

    /// What the process wrote on stderr so far.
    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// True while the main process runs.
    pub fn is_running(&mut self) -> bool {
        if self.running {
            if let Ok(Some(_)) = self.main.try_wait() {
                self.running = false;
            }
        }
        self.running
    }

    /// The exit status, if the main process has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        let st = self.main.try_wait().ok().flatten();
        if st.is_some() {
            self.running = false;
        }
        st
    }

    /// Sends `sig` to the main process (or, with `group`, to the whole process group).
    pub fn signal(&self, sig: i32, group: bool) -> bool {
        if group {
            signal_group(self.main.id(), sig)
        } else {
            signal(self.main.id(), sig)
        }
    }

    /// Sends `sig` and waits up to `bound` for the main process to exit; past the bound the
    /// group is killed and a Timeout error names `what` (the signal as the user knows it).
    pub fn stop(
        &mut self,
        sig: i32,
        group: bool,
        bound: Duration,
        what: &str,
    ) -> Result<(), Error> {
        if !self.running {
            return Ok(());
        }
        self.signal(sig, group);
        let deadline = Instant::now() + bound;
        let mut result = Ok(());
        loop {
            match self.main.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                _ => {
                    signal_group(self.main.id(), libc::SIGKILL);
                    let _ = self.main.wait();
                    result = Err(Error::Timeout(format!(
                        "{}: did not exit within {bound:?} after {what}; killed",
                        self.name
                    )));
                    break;
                }
            }
        }
        self.running = false;
        self.kill_group();
        result
    }

    /// Kills whatever is left in the process group (workers orphaned by a killed master, the
    /// watchdog) and reaps the main process and the watchdog.
    pub fn kill_group(&mut self) {
        // The group id is ours only while a member is unreaped; the watchdog is reaped last.
        if self.watchdog.is_some() {
            signal_group(self.main.id(), libc::SIGKILL);
        }
        if let Ok(None) = self.main.try_wait() {
            let _ = self.main.wait();
        }
        self.running = false;
        if let Some(mut w) = self.watchdog.take() {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        self.kill_group();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bounded_command_keeps_its_output_and_is_killed_past_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        let (out, err) = (dir.path().join("o"), dir.path().join("e"));
        let argv = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let ran = run_bounded(
            &argv(&["sh", "-c", "echo said; echo oops >&2; exit 3"]),
            Duration::from_secs(30),
            &out,
            &err,
        )
        .unwrap();
        assert_eq!(ran.status.and_then(|s| s.code()), Some(3));
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "said\n");
        assert_eq!(std::fs::read_to_string(&err).unwrap(), "oops\n");
        // A child of the command dies with it: the whole group is killed.
        let ran = run_bounded(
            &argv(&["sh", "-c", "sleep 30 & echo $!; wait"]),
            Duration::from_millis(200),
            &out,
            &err,
        )
        .unwrap();
        assert_eq!(ran.status, None);
        let child: u32 = std::fs::read_to_string(&out)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let until = Instant::now() + Duration::from_secs(10);
        while alive(child) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!alive(child));
        assert!(run_bounded(&[], Duration::from_secs(1), &out, &err).is_err());
        assert!(run_bounded(
            &argv(&["/no/such/program"]),
            Duration::from_secs(1),
            &out,
            &err
        )
        .is_err());
    }

    #[test]
    fn processes_are_found_by_name_with_their_descendants() {
        // A shell renamed by its script name (comm is the script's name) with a child.
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("pbcommtest");
        std::fs::write(&script, "#!/bin/sh\nsleep 30 &\nwait\n").unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let mut c = spawn(Command::new(&script)).unwrap();
        let until = Instant::now() + Duration::from_secs(10);
        let mut found = Vec::new();
        while found.len() < 2 && Instant::now() < until {
            found = by_comm("pbcommtest");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(found.first(), Some(&c.id()), "{found:?}");
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(comm(found[1]).as_deref(), Some("sleep"));
        assert!(signal_group(c.id(), libc::SIGKILL) || signal(c.id(), libc::SIGKILL));
        signal(found[1], libc::SIGKILL);
        c.wait().unwrap();
    }

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

    #[test]
    fn output_text_takes_both_streams() {
        let t = output_text(Path::new("/bin/sh"), &["-c", "echo out; echo err >&2"]).unwrap();
        assert_eq!(t, "out\nerr");
        let e = output_text(Path::new("/nonexistent/pb-proxy"), &["-v"]).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cannot run /nonexistent/pb-proxy -v"),
            "{e}"
        );
    }
}
