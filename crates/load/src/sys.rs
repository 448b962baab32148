//! The thin layer over the kernel (wrk's `net.c`): non-blocking TCP sockets and an epoll set
//! with nanosecond waits, through rustix's raw system calls (no libc wrapper, no cancellation
//! point, no allocation). One call is ours: `epoll_wait` for kernels older than 5.11, which
//! lack `epoll_pwait2` and the rustix build that asks for it.

use rustix::event::epoll::{self, EventData, EventFlags};
use rustix::event::Timespec;
use rustix::io::Errno;
use rustix::net::{AddressFamily, SendFlags, SocketFlags, SocketType};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};

/// A non-blocking TCP socket, closed on drop.
#[derive(Debug)]
pub struct Socket(OwnedFd);

impl Socket {
    /// Starts a non-blocking connect with TCP_NODELAY set. Returns the socket and whether the
    /// connection is already established (otherwise wait for writability, then [`Socket::take_error`]).
    pub fn connect(addr: &SocketAddr) -> io::Result<(Socket, bool)> {
        let family = match addr {
            SocketAddr::V4(_) => AddressFamily::INET,
            SocketAddr::V6(_) => AddressFamily::INET6,
        };
        let fd = rustix::net::socket_with(
            family,
            SocketType::STREAM,
            SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
            None,
        )?;
        // Best effort, as before: a socket without it still works, only slower.
        let _ = rustix::net::sockopt::set_tcp_nodelay(&fd, true);
        match rustix::net::connect(&fd, addr) {
            Ok(()) => Ok((Socket(fd), true)),
            Err(Errno::INPROGRESS) => Ok((Socket(fd), false)),
            Err(e) => Err(e.into()),
        }
    }

    /// The pending error of a connect that was in progress (`Ok` once it is established).
    pub fn take_error(&self) -> io::Result<()> {
        rustix::net::sockopt::socket_error(&self.0)?.map_err(io::Error::from)
    }

    /// One `read(2)`, as a raw system call: glibc's wrapper is a thread-cancellation point
    /// whose bookkeeping costs more than a percent of the client's CPU at full rate.
    #[inline]
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        Ok(rustix::io::read(&self.0, buf)?)
    }

    /// One `send(2)` without SIGPIPE (a raw system call, as for [`Socket::read`]).
    #[inline]
    pub fn write(&self, buf: &[u8]) -> io::Result<usize> {
        Ok(rustix::net::send(&self.0, buf, SendFlags::NOSIGNAL)?)
    }

    /// Shuts both directions down (sends FIN; wakes anything waiting on the socket).
    pub fn shutdown(&self) {
        let _ = rustix::net::shutdown(&self.0, rustix::net::Shutdown::Both);
    }

    /// The file descriptor.
    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// An epoll set. Sockets are registered once, edge-triggered for both directions, so the hot
/// path never calls `epoll_ctl` (wrk re-arms EPOLLOUT twice per request).
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
    pwait2: bool,
}

/// One readiness event.
pub type Event = epoll::Event;

/// Readable, or the peer closed / reset (read to learn which).
pub const IN: u32 = EventFlags::IN
    .union(EventFlags::RDHUP)
    .union(EventFlags::HUP)
    .union(EventFlags::ERR)
    .bits();
/// The peer closed its side, or the connection failed: a short read no longer means drained.
pub const HUP: u32 = EventFlags::RDHUP
    .union(EventFlags::HUP)
    .union(EventFlags::ERR)
    .bits();
/// Writable, or an error is pending.
pub const OUT: u32 = EventFlags::OUT
    .union(EventFlags::HUP)
    .union(EventFlags::ERR)
    .bits();

impl Epoll {
    /// A new epoll set.
    pub fn new() -> io::Result<Epoll> {
        let fd = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        Ok(Epoll { fd, pwait2: true })
    }

    /// Registers `sock` for edge-triggered input and output readiness with `token`.
    pub fn add(&self, sock: &Socket, token: u64) -> io::Result<()> {
        epoll::add(
            &self.fd,
            &sock.0,
            EventData::new_u64(token),
            EventFlags::IN | EventFlags::OUT | EventFlags::RDHUP | EventFlags::ET,
        )?;
        Ok(())
    }

    /// Waits up to `timeout_ns` nanoseconds (0 polls) for events.
    pub fn wait(&mut self, events: &mut [Event], timeout_ns: u64) -> io::Result<usize> {
        if self.pwait2 {
            let ts = Timespec {
                tv_sec: (timeout_ns / 1_000_000_000) as i64,
                tv_nsec: (timeout_ns % 1_000_000_000) as i64,
            };
            match epoll::wait(&self.fd, &mut *events, Some(&ts)) {
                Ok(n) => return Ok(n),
                Err(Errno::INTR) => return Ok(0),
                Err(Errno::NOSYS) => self.pwait2 = false,
                Err(e) => return Err(e.into()),
            }
        }
        // Before Linux 5.11 (no epoll_pwait2): millisecond waits, rounded up. rustix has no
        // call for this once it is built for epoll_pwait2, so it is libc's.
        let max = events.len().min(i32::MAX as usize) as libc::c_int;
        let ms = timeout_ns.div_ceil(1_000_000).min(i32::MAX as u64) as libc::c_int;
        // SAFETY: rustix's `Event` has the kernel's `struct epoll_event` layout (it is what
        // rustix hands to the same system call), and the kernel writes at most `max`
        // (<= `events.len()`) of them into `events`, borrowed mutably for the call.
        let r = unsafe {
            libc::epoll_wait(
                self.fd.as_fd().as_raw_fd(),
                events.as_mut_ptr().cast::<libc::epoll_event>(),
                max,
                ms,
            )
        };
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

/// Makes this thread's timers fire within 1 µs of when they were asked for, instead of the
/// default 50 µs slack, so open-loop sends leave on time.
pub fn tight_timer_slack() {
    let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1000));
}

/// A zeroed event array.
pub fn events(n: usize) -> Vec<Event> {
    vec![
        Event {
            flags: EventFlags::empty(),
            data: EventData::new_u64(0),
        };
        n
    ]
}
