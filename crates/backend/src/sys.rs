//! The few Linux calls std and mio do not offer: clocks, a precise timer fd, listener options
//! and SO_LINGER 0 for resets, through rustix. Two are ours, because rustix has no call for
//! them: SO_TIMESTAMPNS, and the `recvmsg` that reads its timestamp.

use rustix::net::{AddressFamily, SocketFlags, SocketType};
use rustix::time::{timerfd_create, timerfd_settime, Timespec};
use rustix::time::{ClockId, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};

fn clock(id: ClockId) -> u64 {
    let ts = rustix::time::clock_gettime(id);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC in nanoseconds: the clock `Instant` uses and `TimerFd` is armed with.
#[inline]
pub(crate) fn mono_ns() -> u64 {
    clock(ClockId::Monotonic)
}

/// CPU time this thread has used, in nanoseconds.
fn thread_cpu_ns() -> u64 {
    clock(ClockId::ThreadCPUTime)
}

/// Burns `ns` of this thread's CPU time. It counts CPU the thread actually got, so on a busy or
/// stolen core the emulated cost stays the same and the wall time stretches, as it would for
/// real work.
pub(crate) fn spin_cpu(ns: u64) {
    let end = thread_cpu_ns() + ns;
    while thread_cpu_ns() < end {
        std::hint::spin_loop();
    }
}

/// A non-blocking listening socket with SO_REUSEADDR (so a restart can rebind at once) and a
/// deep backlog (so bursts of connects are not refused).
pub(crate) fn bind_listener(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    let family = if addr.is_ipv4() {
        AddressFamily::INET
    } else {
        AddressFamily::INET6
    };
    let fd = rustix::net::socket_with(
        family,
        SocketType::STREAM,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )?;
    rustix::net::sockopt::set_socket_reuseaddr(&fd, true)?;
    rustix::net::bind(&fd, &addr)?;
    rustix::net::listen(&fd, 4096)?;
    Ok(std::net::TcpListener::from(fd))
}

/// SO_LINGER with a zero timeout: the next close sends RST instead of FIN.
pub(crate) fn set_linger_zero(fd: impl AsFd) {
    let _ = rustix::net::sockopt::set_socket_linger(fd, Some(std::time::Duration::ZERO));
}

/// A CLOCK_MONOTONIC timerfd armed at absolute deadlines with nanosecond precision (epoll's own
/// timeout only has milliseconds).
pub(crate) struct TimerFd {
    fd: OwnedFd,
}

impl TimerFd {
    /// A new, disarmed, non-blocking timer.
    pub(crate) fn new() -> io::Result<TimerFd> {
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        Ok(TimerFd { fd })
    }

    /// Fires once at `deadline_ns` on CLOCK_MONOTONIC (at once if that has passed).
    pub(crate) fn arm(&self, deadline_ns: u64) {
        let deadline_ns = deadline_ns.max(1);
        let spec = Itimerspec {
            it_interval: Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: Timespec {
                tv_sec: (deadline_ns / 1_000_000_000) as i64,
                tv_nsec: (deadline_ns % 1_000_000_000) as i64,
            },
        };
        let _ = timerfd_settime(&self.fd, TimerfdTimerFlags::ABSTIME, &spec);
    }

    /// Clears the expiration count so the next expiry raises a new edge.
    pub(crate) fn clear(&self) {
        let mut buf = [0u8; 8];
        let _ = rustix::io::read(&self.fd, &mut buf);
    }

    /// The raw fd, to register with the poller.
    pub(crate) fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// SO_TIMESTAMPNS (asm-generic and x86; the cmsg type SCM_TIMESTAMPNS has the same value).
const SO_TIMESTAMPNS: i32 = 35;

/// Asks the kernel to stamp received data with its arrival time (inherited by accepted sockets
/// when set on a listener), so emulated latency can start when a request arrived rather than
/// when the loop woke up to read it.
pub(crate) fn enable_rx_timestamps(fd: impl AsFd) -> io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: `fd` is borrowed, so it stays open for the call; the value pointer and length
    // describe `one`, a live c_int the kernel only reads.
    let r = unsafe {
        libc::setsockopt(
            fd.as_fd().as_raw_fd(),
            libc::SOL_SOCKET,
            SO_TIMESTAMPNS,
            &one as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `read` that also returns how long ago (ns) the data read arrived, when the kernel said.
pub(crate) fn read_stamped(fd: impl AsFd, buf: &mut [u8]) -> io::Result<(usize, Option<u64>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // Room for one cmsg carrying a timespec, 8-byte aligned.
    let mut cbuf = [0u64; 8];
    // SAFETY: msghdr is integers and pointers, for which all-zero (null, empty) is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(&cbuf) as _;
    // SAFETY: `msg` points at `iov` (which covers exactly `buf`) and at `cbuf` with its true
    // length; all three are live locals borrowed for the call, and the kernel writes within them.
    // `fd` is borrowed, so it is open.
    let n = unsafe { libc::recvmsg(fd.as_fd().as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut age = None;
    // SAFETY: CMSG_FIRSTHDR/NXTHDR only return headers that lie wholly inside `cbuf`'s
    // `msg_controllen` bytes the kernel filled (or null), per cmsg(3); the timespec is read
    // unaligned because CMSG_DATA need not be aligned for it.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == SO_TIMESTAMPNS {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                let stamped = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
                age = Some(clock(ClockId::Realtime).saturating_sub(stamped));
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, age))
}
