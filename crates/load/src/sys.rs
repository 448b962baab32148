//! The thin layer over the kernel (wrk's `net.c`): non-blocking TCP sockets and an epoll set
//! with nanosecond waits. Everything here is a direct system call; nothing allocates.

use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// A non-blocking TCP socket, closed on drop.
#[derive(Debug)]
pub struct Socket(RawFd);

impl Socket {
    /// Starts a non-blocking connect with TCP_NODELAY set. Returns the socket and whether the
    /// connection is already established (otherwise wait for writability, then [`Socket::take_error`]).
    pub fn connect(addr: &SocketAddr) -> io::Result<(Socket, bool)> {
        let domain = match addr {
            SocketAddr::V4(_) => libc::AF_INET,
            SocketAddr::V6(_) => libc::AF_INET6,
        };
        // SAFETY: socket(2) takes no pointers; the new fd is owned by `Socket` at once, so it is
        // closed exactly once.
        let fd = cvt(unsafe {
            libc::socket(
                domain,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        })?;
        let sock = Socket(fd);
        let one: libc::c_int = 1;
        // SAFETY: `fd` is the socket owned by `sock`; the value pointer and length describe
        // `one`, a live c_int, which the kernel only reads.
        unsafe {
            libc::setsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_NODELAY,
                &one as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
        let (storage, len) = sockaddr(addr);
        // SAFETY: `storage` holds an initialised sockaddr of the socket's family and `len` is
        // that sockaddr's size (at most the storage's); the kernel only reads it.
        let r = unsafe { libc::connect(fd, &storage as *const _ as *const libc::sockaddr, len) };
        if r == 0 {
            return Ok((sock, true));
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EINPROGRESS) {
            Ok((sock, false))
        } else {
            Err(err)
        }
    }

    /// The pending error of a connect that was in progress (`Ok` once it is established).
    pub fn take_error(&self) -> io::Result<()> {
        let mut err: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `err` is a live, writable c_int and `len` says exactly its size, so the kernel
        // writes no more than that.
        cvt(unsafe {
            libc::getsockopt(
                self.0,
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                &mut err as *mut _ as *mut libc::c_void,
                &mut len,
            )
        })?;
        if err == 0 {
            Ok(())
        } else {
            Err(io::Error::from_raw_os_error(err))
        }
    }

    /// One `read(2)`, as a raw system call: glibc's wrapper is a thread-cancellation point
    /// whose bookkeeping costs more than a percent of the client's CPU at full rate.
    #[inline]
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`, which is borrowed
        // mutably for the call, so nothing else reads or writes it meanwhile.
        let n = unsafe {
            libc::syscall(
                libc::SYS_read,
                self.0,
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
            )
        };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// One `send(2)` without SIGPIPE (a raw system call, as for [`Socket::read`]).
    #[inline]
    pub fn write(&self, buf: &[u8]) -> io::Result<usize> {
        // SAFETY: the kernel reads at most `buf.len()` bytes from `buf`, borrowed for the call;
        // the null address with length 0 is how send(2) is spelt as sendto(2).
        let n = unsafe {
            libc::syscall(
                libc::SYS_sendto,
                self.0,
                buf.as_ptr() as *const libc::c_void,
                buf.len(),
                libc::MSG_NOSIGNAL,
                std::ptr::null::<libc::sockaddr>(),
                0 as libc::socklen_t,
            )
        };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// Shuts both directions down (sends FIN; wakes anything waiting on the socket).
    pub fn shutdown(&self) {
        // SAFETY: no pointers; `self.0` is the fd this socket owns (not yet closed: that happens
        // only in drop).
        unsafe {
            libc::shutdown(self.0, libc::SHUT_RDWR);
        }
    }

    /// The file descriptor.
    pub fn fd(&self) -> RawFd {
        self.0
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        // SAFETY: `Socket` owns the fd and this is its only close; nothing uses it after drop.
        unsafe {
            libc::close(self.0);
        }
    }
}

fn sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain integers and byte arrays, for which all-zero is valid.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is, by its definition, at least as large as and aligned
            // for every sockaddr type, sockaddr_in included; the write stays inside `storage`.
            unsafe { std::ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in, sin) };
            std::mem::size_of::<libc::sockaddr_in>()
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
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

/// An epoll set. Sockets are registered once, edge-triggered for both directions, so the hot
/// path never calls `epoll_ctl` (wrk re-arms EPOLLOUT twice per request).
#[derive(Debug)]
pub struct Epoll {
    fd: RawFd,
    pwait2: bool,
}

/// One readiness event.
pub type Event = libc::epoll_event;

/// Readable, or the peer closed / reset (read to learn which).
pub const IN: u32 = (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32;
/// The peer closed its side, or the connection failed: a short read no longer means drained.
pub const HUP: u32 = (libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32;
/// Writable, or an error is pending.
pub const OUT: u32 = (libc::EPOLLOUT | libc::EPOLLHUP | libc::EPOLLERR) as u32;

impl Epoll {
    /// A new epoll set.
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: no pointers; the new fd is owned by `Epoll` at once and closed in its drop.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        Ok(Epoll { fd, pwait2: true })
    }

    /// Registers `fd` for edge-triggered input and output readiness with `token`.
    pub fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
            u64: token,
        };
        // SAFETY: `ev` is a live epoll_event the kernel only reads; the token is data, never
        // dereferenced.
        cvt(unsafe { libc::epoll_ctl(self.fd, libc::EPOLL_CTL_ADD, fd, &mut ev) })?;
        Ok(())
    }

    /// Waits up to `timeout_ns` nanoseconds (0 polls) for events.
    pub fn wait(&mut self, events: &mut [Event], timeout_ns: u64) -> io::Result<usize> {
        let max = events.len().min(i32::MAX as usize) as libc::c_int;
        if self.pwait2 {
            let ts = libc::timespec {
                tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
            };
            // SAFETY: the kernel writes at most `max` (<= `events.len()`) events into `events`,
            // borrowed mutably for the call; `ts` is a live timespec it only reads; a null
            // sigmask (size 0) means the mask is left alone.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_epoll_pwait2,
                    self.fd,
                    events.as_mut_ptr(),
                    max,
                    &ts as *const libc::timespec,
                    std::ptr::null::<libc::sigset_t>(),
                    0usize,
                )
            };
            if r >= 0 {
                return Ok(r as usize);
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => return Ok(0),
                Some(libc::ENOSYS) => self.pwait2 = false,
                _ => return Err(err),
            }
        }
        let ms = timeout_ns.div_ceil(1_000_000).min(i32::MAX as u64) as libc::c_int;
        // SAFETY: the kernel writes at most `max` (<= `events.len()`) events into `events`,
        // borrowed mutably for the call.
        let r = unsafe { libc::epoll_wait(self.fd, events.as_mut_ptr(), max, ms) };
        if r < 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EINTR) {
                return Ok(0);
            }
            return Err(err);
        }
        Ok(r as usize)
    }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        // SAFETY: `Epoll` owns the fd and this is its only close.
        unsafe {
            libc::close(self.fd);
        }
    }
}

/// Makes this thread's timers fire within 1 µs of when they were asked for, instead of the
/// default 50 µs slack, so open-loop sends leave on time.
pub fn tight_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer and changes only this thread's slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong);
    }
}

/// A zeroed event array.
pub fn events(n: usize) -> Vec<Event> {
    vec![libc::epoll_event { events: 0, u64: 0 }; n]
}
