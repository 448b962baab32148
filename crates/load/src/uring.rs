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

// SAFETY: the two raw pointers are allocations this struct owns outright (freed only in its
// drop), so moving the struct to another thread moves that ownership with it; nothing is shared
// with other threads. The kernel side belongs to the `IoUring`, which is itself `Send`.
unsafe impl Send for Uring {}

impl Uring {
    /// A ring sized for `conns` connections. It is made disabled, so that it can be set up on
    /// one thread and driven from another: the thread that drives it calls [`Uring::enable`]
    /// first, and becomes its single issuer.
    pub fn new(conns: usize) -> io::Result<Uring> {
        let sq = (conns * 2).next_power_of_two().clamp(64, 8192) as u32;
        let ring = IoUring::builder()
            .setup_r_disabled()
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
        // SAFETY: both layouts have a non-zero size (`nbuf` >= 2) and a valid alignment, as
        // `alloc_zeroed` requires; null (out of memory) is checked below.
        let entries = unsafe { alloc_zeroed(entries_layout) } as *mut types::BufRingEntry;
        // SAFETY: as above.
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
        // SAFETY: `entries` is a page-aligned allocation of exactly `nbuf` entries, owned by `u`
        // and freed only in its drop, after the ring (and with it the registration) is gone.
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

    /// Enables the ring, making the calling thread its one submitter: call it on the thread
    /// that drives the ring, before anything is queued.
    pub fn enable(&mut self) -> io::Result<()> {
        self.ring().submitter().register_enable_rings()
    }

    fn ring(&mut self) -> &mut IoUring {
        self.ring.as_mut().expect("ring lives until drop")
    }

    fn put(&mut self, bid: u16) {
        // Out of range could only be a bug, but it would hand the kernel memory past `bufs`.
        assert!(bid < self.nbuf, "buffer id {bid} out of {}", self.nbuf);
        let mask = self.nbuf - 1;
        // SAFETY: `tail & mask` < `nbuf`, so the entry is inside the `entries` allocation, and
        // `bid` < `nbuf`, so the buffer address is inside `bufs`. The kernel reads only the
        // entries between its head and the published tail, which this slot (past the tail) is not.
        unsafe {
            let e = &mut *self.entries.add((self.tail & mask) as usize);
            e.set_addr(self.bufs.add(bid as usize * BUF_SIZE) as u64);
            e.set_len(BUF_SIZE as u32);
            e.set_bid(bid);
        }
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&mut self) {
        // SAFETY: `entries` is the base of the registered buffer ring, live and initialised
        // (zeroed) since `new`; its tail is a u16 at a 2-aligned offset that the kernel reads
        // concurrently, hence the atomic store with release ordering to publish the entries.
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

    /// Where the first `len` bytes of buffer `bid` are (at most one buffer's worth). A raw
    /// pointer and not a slice, because the slice's lifetime is the caller's to state: the
    /// bytes stay put only until `bid` is recycled, and the caller must go on using the worker
    /// (`&mut`) while it reads them. Dereference it only between the completion that named
    /// `bid` and [`Uring::recycle`] of `bid`.
    pub fn bytes(&self, bid: u16, len: usize) -> *const [u8] {
        assert!(bid < self.nbuf, "buffer id {bid} out of {}", self.nbuf);
        // `wrapping_add` makes computing the address safe; `bid` < `nbuf` keeps it inside `bufs`.
        std::ptr::slice_from_raw_parts(
            self.bufs.wrapping_add(bid as usize * BUF_SIZE),
            len.min(BUF_SIZE),
        )
    }

    /// Queues `sqe`, submitting first if the submission queue is full.
    ///
    /// # Safety
    /// Every buffer `sqe` points at must stay valid (and, for one the kernel reads, unchanged)
    /// until its completion is reaped or the ring is dropped.
    unsafe fn push(&mut self, sqe: squeue::Entry) -> io::Result<()> {
        loop {
            let ring = self.ring();
            // SAFETY: the caller promises the entry's buffers outlive the operation.
            if unsafe { ring.submission().push(&sqe) }.is_ok() {
                return Ok(());
            }
            ring.submit()?;
        }
    }

    /// Arms the multishot receive of a connection.
    pub fn recv(&mut self, fd: RawFd, user_data: u64) -> io::Result<()> {
        let sqe = opcode::RecvMulti::new(types::Fd(fd), BGID)
            .build()
            .user_data(user_data);
        // SAFETY: the receive writes only into provided buffers of group BGID, which this
        // struct owns and frees only after the ring is dropped.
        unsafe { self.push(sqe) }
    }

    /// Queues a send of `len` bytes at `ptr`.
    ///
    /// # Safety
    /// The `len` bytes at `ptr` must stay valid and unchanged until the completion tagged
    /// `user_data` is reaped or the ring is dropped: the kernel reads them asynchronously.
    pub unsafe fn send(
        &mut self,
        fd: RawFd,
        ptr: *const u8,
        len: usize,
        user_data: u64,
    ) -> io::Result<()> {
        let sqe = opcode::Send::new(types::Fd(fd), ptr, len as u32)
            .flags(libc::MSG_NOSIGNAL)
            .build()
            .user_data(user_data);
        // SAFETY: the bytes the send reads are the caller's to keep alive, as promised above.
        unsafe { self.push(sqe) }
    }

    /// Asks to be told when a connect in progress finishes (the socket turns writable).
    pub fn connect_done(&mut self, fd: RawFd, user_data: u64) -> io::Result<()> {
        let sqe = opcode::PollAdd::new(types::Fd(fd), libc::POLLOUT as u32)
            .build()
            .user_data(user_data);
        // SAFETY: a poll points at no memory.
        unsafe { self.push(sqe) }
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
        // SAFETY: both pointers came from `alloc_zeroed` with exactly these layouts and are
        // freed only here, once; the ring, the only other user of that memory, was closed just
        // above.
        unsafe {
            dealloc(self.entries as *mut u8, self.entries_layout);
            dealloc(self.bufs, self.bufs_layout);
        }
    }
}

/// True when this kernel (and sandbox) allows the rings a worker needs.
pub fn available() -> bool {
    Uring::new(1).and_then(|mut u| u.enable()).is_ok()
}
