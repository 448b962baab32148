//! The few Linux calls std and mio do not offer: clocks, a precise timer fd, listener options
//! and SO_LINGER 0 for resets.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

fn clock(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer and the clock ids used here always exist on Linux.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC in nanoseconds: the clock `Instant` uses and `TimerFd` is armed with.
#[inline]
pub(crate) fn mono_ns() -> u64 {
    clock(libc::CLOCK_MONOTONIC)
}

/// CPU time this thread has used, in nanoseconds.
fn thread_cpu_ns() -> u64 {
    clock(libc::CLOCK_THREAD_CPUTIME_ID)
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
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: plain socket(2); the fd is owned right away.
    let fd = unsafe {
        libc::socket(
            family,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh socket nobody else owns.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    let (storage, len) = sockaddr(addr);
    // SAFETY: `storage` holds a sockaddr of `len` bytes for the socket's family.
    if unsafe { libc::bind(fd, &storage as *const _ as *const libc::sockaddr, len) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: listen(2) on a bound socket.
    if unsafe { libc::listen(fd, 4096) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(std::net::TcpListener::from(owned))
}

fn setsockopt_int(fd: RawFd, level: i32, name: i32, v: i32) -> io::Result<()> {
    // SAFETY: the option value is an int of the size given.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &v as *const i32 as *const libc::c_void,
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: an all-zero sockaddr_storage is valid.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in, sin) };
            (
                storage,
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { std::ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in6, sin6) };
            (
                storage,
                std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
            )
        }
    }
}

/// SO_LINGER with a zero timeout: the next close sends RST instead of FIN.
pub(crate) fn set_linger_zero(fd: RawFd) {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: the option value is a linger struct of the size given.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &l as *const libc::linger as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// A CLOCK_MONOTONIC timerfd armed at absolute deadlines with nanosecond precision (epoll's own
/// timeout only has milliseconds).
pub(crate) struct TimerFd {
    fd: OwnedFd,
}

impl TimerFd {
    /// A new, disarmed, non-blocking timer.
    pub(crate) fn new() -> io::Result<TimerFd> {
        // SAFETY: plain timerfd_create(2); the fd is owned right away.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is fresh and owned here.
        Ok(TimerFd {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Fires once at `deadline_ns` on CLOCK_MONOTONIC (at once if that has passed).
    pub(crate) fn arm(&self, deadline_ns: u64) {
        let deadline_ns = deadline_ns.max(1);
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: valid itimerspec; old value not requested.
        unsafe {
            libc::timerfd_settime(
                self.fd.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
    }

    /// Clears the expiration count so the next expiry raises a new edge.
    pub(crate) fn clear(&self) {
        let mut buf = [0u8; 8];
        // SAFETY: reading 8 bytes into an 8-byte buffer.
        unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                8,
            )
        };
    }

    /// The raw fd, to register with the poller.
    pub(crate) fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
