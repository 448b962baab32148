//! Kernel receive timestamps for the test client (SO_TIMESTAMPNS), so a response's arrival time
//! does not include the client's own wake-up delay.

use std::io;
use std::os::fd::RawFd;

const SO_TIMESTAMPNS: i32 = 35;

/// CLOCK_MONOTONIC (the clock `Instant` uses) in nanoseconds.
pub fn mono_ns() -> u64 {
    clock(libc::CLOCK_MONOTONIC)
}

fn clock(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live timespec the kernel writes, of exactly the type it expects.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Turns receive timestamps on for `fd`.
pub fn enable(fd: RawFd) {
    let one: i32 = 1;
    // SAFETY: the value pointer and length (4) describe `one`, a live i32 the kernel only reads.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_TIMESTAMPNS,
            &one as *const i32 as *const libc::c_void,
            4,
        )
    };
    assert_eq!(r, 0, "SO_TIMESTAMPNS: {}", io::Error::last_os_error());
}

/// Reads into `buf`; returns the byte count and when (CLOCK_MONOTONIC ns) the data arrived.
pub fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<u64>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let mut cbuf = [0u64; 8];
    // SAFETY: msghdr is integers and pointers, for which all-zero (null, empty) is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(&cbuf) as _;
    // SAFETY: `msg` points at `iov` (covering exactly `buf`) and at `cbuf` with its true length,
    // all live for the call; the kernel writes only within them.
    let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut at = None;
    // SAFETY: CMSG_FIRSTHDR/NXTHDR return only headers wholly inside the control bytes the
    // kernel filled (or null), per cmsg(3); the timespec is read unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == SO_TIMESTAMPNS {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                let stamped = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
                let age = clock(libc::CLOCK_REALTIME).saturating_sub(stamped);
                at = Some(mono_ns().saturating_sub(age));
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, at))
}
