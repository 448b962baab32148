//! The io_uring side of a worker (plain HTTP): one ring per thread, set up for a single issuer
//! with deferred task work so completions are only processed when the loop asks for them.
//! Each connection has one multishot receive drawing from a shared ring of provided buffers,
//! and a send per request; every loop turn submits all queued sends and reaps all completions
//! in one `io_uring_enter`, where epoll needs a `read` and a `send` per request.

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU16, Ordering};

/// What a completion is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Bytes (or the end) from a connection's multishot receive.
    Recv = 1,
    /// A send finished.
    Send = 2,
    /// A connect in progress became writable (or failed).
    Connect = 3,
}

/// Packs an operation, a connection's generation and its index into `user_data`.
pub fn token(op: Op, gen: u32, idx: usize) -> u64 {
    ((op as u64) << 56) | (((gen & 0xff_ffff) as u64) << 32) | idx as u64
}

/// Unpacks `user_data`: (op, generation (24 bits), index).
pub fn untoken(ud: u64) -> (u8, u32, usize) {
    (
        (ud >> 56) as u8,
        ((ud >> 32) & 0xff_ffff) as u32,
        (ud & 0xffff_ffff) as usize,
    )
}

/// One reaped completion.
#[derive(Debug, Clone, Copy)]
pub struct Done {
    /// The packed token.
    pub user_data: u64,
    /// The result (bytes, or a negated errno).
    pub res: i32,
    /// Completion flags (buffer id, more-to-come).
    pub flags: u32,
}

impl Done {
    /// The provided buffer holding this completion's bytes, if any.
    pub fn buffer(&self) -> Option<u16> {
        cqueue::buffer_select(self.flags)
    }
    /// The multishot receive stays armed.
    pub fn more(&self) -> bool {
        cqueue::more(self.flags)
    }
}

const BGID: u16 = 1;
const BUF_SIZE: usize = 16 * 1024;

/// A ring plus its provided-buffer ring.
pub struct Uring {
    ring: Option<IoUring>,
    entries: *mut types::BufRingEntry,
    entries_layout: Layout,
    bufs: *mut u8,
    bufs_layout: Layout,
    nbuf: u16,
    tail: u16,
}

// The raw pointers are owned by this struct and only touched by the thread that owns it.
unsafe impl Send for Uring {}

impl Uring {
    /// A ring sized for `conns` connections.
    pub fn new(conns: usize) -> io::Result<Uring> {
        let sq = (conns * 2).next_power_of_two().clamp(64, 8192) as u32;
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_cqsize(sq * 4)
            .build(sq)?;
        // Buffers only need to cover the bytes that arrive between two reaps; when they run
        // out a receive stops with ENOBUFS and is re-armed. 1024 x 16 KiB bounds the memory.
        // PROXYBENCH_URING_BUFFERS (a power of two, at least 2) overrides the count, so a
        // test can make the buffers run out.
        let nbuf = std::env::var("PROXYBENCH_URING_BUFFERS")
            .ok()
            .and_then(|v| v.parse::<u16>().ok())
            .filter(|n| n.is_power_of_two() && *n >= 2)
            .unwrap_or_else(|| conns.next_power_of_two().clamp(64, 1024) as u16);
        let entries_layout = Layout::from_size_align(
            nbuf as usize * std::mem::size_of::<types::BufRingEntry>(),
            4096,
        )
        .map_err(io::Error::other)?;
        let bufs_layout =
            Layout::from_size_align(nbuf as usize * BUF_SIZE, 4096).map_err(io::Error::other)?;
        let entries = unsafe { alloc_zeroed(entries_layout) } as *mut types::BufRingEntry;
        let bufs = unsafe { alloc_zeroed(bufs_layout) };
        if entries.is_null() || bufs.is_null() {
            return Err(io::ErrorKind::OutOfMemory.into());
        }
        let mut u = Uring {
            ring: Some(ring),
            entries,
            entries_layout,
            bufs,
            bufs_layout,
            nbuf,
            tail: 0,
        };
        unsafe {
            u.ring()
                .submitter()
                .register_buf_ring_with_flags(entries as u64, nbuf, BGID, 0)?;
        }
        for bid in 0..nbuf {
            u.put(bid);
        }
        u.publish();
        Ok(u)
    }

    fn ring(&mut self) -> &mut IoUring {
        self.ring.as_mut().expect("ring lives until drop")
    }

    fn put(&mut self, bid: u16) {
        let mask = self.nbuf - 1;
        unsafe {
            let e = &mut *self.entries.add((self.tail & mask) as usize);
            e.set_addr(self.bufs.add(bid as usize * BUF_SIZE) as u64);
            e.set_len(BUF_SIZE as u32);
            e.set_bid(bid);
        }
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&mut self) {
        unsafe {
            let tail = types::BufRingEntry::tail(self.entries) as *const AtomicU16;
            (*tail).store(self.tail, Ordering::Release);
        }
    }

    /// Gives buffer `bid` back to the kernel once its bytes have been parsed.
    pub fn recycle(&mut self, bid: u16) {
        self.put(bid);
        self.publish();
    }

    /// The bytes of buffer `bid`.
    ///
    /// # Safety
    /// The slice is valid until `bid` is recycled; the caller must not hold it past that.
    pub unsafe fn bytes<'a>(&self, bid: u16, len: usize) -> &'a [u8] {
        std::slice::from_raw_parts(self.bufs.add(bid as usize * BUF_SIZE), len.min(BUF_SIZE))
    }

    fn push(&mut self, sqe: squeue::Entry) -> io::Result<()> {
        loop {
            let ring = self.ring();
            // Safety: every buffer an entry points at (the request bytes, the provided buffers)
            // outlives the ring.
            if unsafe { ring.submission().push(&sqe) }.is_ok() {
                return Ok(());
            }
            ring.submit()?;
        }
    }

    /// Arms the multishot receive of a connection.
    pub fn recv(&mut self, fd: RawFd, user_data: u64) -> io::Result<()> {
        self.push(
            opcode::RecvMulti::new(types::Fd(fd), BGID)
                .build()
                .user_data(user_data),
        )
    }

    /// Queues a send of `len` bytes at `ptr` (which must stay valid until it completes).
    pub fn send(
        &mut self,
        fd: RawFd,
        ptr: *const u8,
        len: usize,
        user_data: u64,
    ) -> io::Result<()> {
        self.push(
            opcode::Send::new(types::Fd(fd), ptr, len as u32)
                .flags(libc::MSG_NOSIGNAL)
                .build()
                .user_data(user_data),
        )
    }

    /// Asks to be told when a connect in progress finishes (the socket turns writable).
    pub fn connect_done(&mut self, fd: RawFd, user_data: u64) -> io::Result<()> {
        self.push(
            opcode::PollAdd::new(types::Fd(fd), libc::POLLOUT as u32)
                .build()
                .user_data(user_data),
        )
    }

    /// Submits everything queued and waits up to `timeout_ns` for at least one completion,
    /// then moves every completion into `out`.
    pub fn wait(&mut self, timeout_ns: u64, out: &mut Vec<Done>) -> io::Result<()> {
        let ts = types::Timespec::new()
            .sec(timeout_ns / 1_000_000_000)
            .nsec((timeout_ns % 1_000_000_000) as u32);
        let args = types::SubmitArgs::new().timespec(&ts);
        match self.ring().submitter().submit_with_args(1, &args) {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY)
                ) => {}
            Err(e) => return Err(e),
        }
        out.clear();
        out.extend(self.ring().completion().map(|c| Done {
            user_data: c.user_data(),
            res: c.result(),
            flags: c.flags(),
        }));
        Ok(())
    }
}

impl Drop for Uring {
    fn drop(&mut self) {
        // The kernel lets go of the buffer ring with the ring itself.
        drop(self.ring.take());
        unsafe {
            dealloc(self.entries as *mut u8, self.entries_layout);
            dealloc(self.bufs, self.bufs_layout);
        }
    }
}

/// True when this kernel (and sandbox) allows the rings a worker needs.
pub fn available() -> bool {
    Uring::new(1).is_ok()
}
