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
    // SAFETY: `ts` is a live timespec the kernel (or vDSO) writes, of exactly the type it
    // expects; the clock ids used here always exist on Linux, so it is always written.
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
    // SAFETY: socket(2) takes no pointers; the fd it returns is wrapped in an OwnedFd just
    // below, before any early return, so it is closed exactly once.
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
    // SAFETY: `fd` is a fresh, open socket that nothing else owns or will close.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    let (storage, len) = sockaddr(addr);
    // SAFETY: `storage` holds an initialised sockaddr of the socket's family and `len` is its
    // size (within the storage); the kernel only reads it. `owned` keeps `fd` open.
    if unsafe { libc::bind(fd, &storage as *const _ as *const libc::sockaddr, len) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: listen(2) takes no pointers; `owned` keeps `fd` open.
    if unsafe { libc::listen(fd, 4096) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(std::net::TcpListener::from(owned))
}

fn setsockopt_int(fd: RawFd, level: i32, name: i32, v: i32) -> io::Result<()> {
    // SAFETY: the value pointer and length describe `v`, a live i32 the kernel only reads.
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
    // SAFETY: sockaddr_storage is plain integers and byte arrays, for which all-zero is valid.
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
            // SAFETY: sockaddr_storage is, by definition, large enough and aligned for every
            // sockaddr type, so the write stays inside `storage` and is aligned.
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
            // SAFETY: as above, sockaddr_storage is large enough and aligned for sockaddr_in6.
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
    // SAFETY: the value pointer and length describe `l`, a live linger the kernel only reads.
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
        // SAFETY: timerfd_create(2) takes no pointers; the fd is wrapped in an OwnedFd below
        // before any other use, so it is closed exactly once.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh, open timer fd that nothing else owns or will close.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(TimerFd { fd })
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
        // SAFETY: `spec` is a live itimerspec the kernel only reads; a null old-value pointer
        // is allowed and means the previous setting is not returned. `self.fd` is open.
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
        // SAFETY: the kernel writes at most 8 bytes, the size of `buf`, which is a live local.
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

/// SO_TIMESTAMPNS (asm-generic and x86; the cmsg type SCM_TIMESTAMPNS has the same value).
const SO_TIMESTAMPNS: i32 = 35;

/// Asks the kernel to stamp received data with its arrival time (inherited by accepted sockets
/// when set on a listener), so emulated latency can start when a request arrived rather than
/// when the loop woke up to read it.
pub(crate) fn enable_rx_timestamps(fd: RawFd) -> io::Result<()> {
    setsockopt_int(fd, libc::SOL_SOCKET, SO_TIMESTAMPNS, 1)
}

/// `read` that also returns how long ago (ns) the data read arrived, when the kernel said.
pub(crate) fn read_stamped(fd: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<u64>)> {
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
    let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
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
                age = Some(clock(libc::CLOCK_REALTIME).saturating_sub(stamped));
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, age))
}
