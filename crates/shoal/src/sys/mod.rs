//! Thin wrappers over the system calls the engine needs: file space, the shared mapping,
//! open-file-description (OFD) byte locks for process liveness, shared futexes and fork.
//!
//! Why OFD locks (see docs/DESIGN.md, "Liveness"): the kernel drops them the instant the
//! process dies (SIGKILL included), they are immune to PID reuse and PID namespaces, and
//! unlike classic `F_SETLK` locks they do not vanish when the process closes some *other*
//! descriptor of the same file. They are inherited across `fork()`, which is why every
//! liveness descriptor is `O_CLOEXEC` and closed in the child by an `atfork` handler.

pub(crate) mod pretouch;

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Once;
use std::time::Duration;

/// First byte of the range in which process slot `p` holds its liveness lock at `LIVENESS_BASE + p`.
/// Far beyond any data offset (locks past EOF are allowed and touch no data).
pub const LIVENESS_BASE: u64 = 1 << 60;

/// The "seize" byte: every attached process holds a shared lock on it; the first opener
/// holds it exclusively while it verifies a store that was not closed cleanly, and the
/// last one to close can take it exclusively (libmdbx's scheme).
pub const SEIZE_BYTE: u64 = LIVENESS_BASE - 1;

fn last_err() -> io::Error {
    io::Error::last_os_error()
}

/// Makes `[off, off+len)` of `file` backed by real storage, so that writing it through the
/// mapping can never raise `SIGBUS`; fails with `ENOSPC` instead when there is no room.
pub fn allocate(file: &File, off: u64, len: u64) -> io::Result<()> {
    loop {
        // SAFETY: plain syscall on a valid descriptor.
        let r = unsafe { libc::fallocate(file.as_raw_fd(), 0, off as i64, len as i64) };
        if r == 0 {
            return Ok(());
        }
        let e = last_err();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            // Filesystems without fallocate: write zeros, which reserves the blocks the
            // same way (and reports ENOSPC the same way).
            Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => return write_zeros(file, off, len),
            _ => return Err(e),
        }
    }
}

/// Allocates storage for `[off, off+len)` without changing the file's size
/// (`FALLOC_FL_KEEP_SIZE`): space past the end, which a later [`allocate`] of the same
/// range then finds already there. Only a speed hint: `Ok(false)` when the filesystem
/// cannot do it.
pub fn allocate_ahead(file: &File, off: u64, len: u64) -> io::Result<bool> {
    fallocate_if_supported(file, libc::FALLOC_FL_KEEP_SIZE, off, len)
}

/// Returns the storage of `[off, off+len)` to the filesystem (`FALLOC_FL_PUNCH_HOLE`):
/// on tmpfs, the memory. The range then reads as zeros, and writing it needs a new
/// [`allocate`] first. `Ok(false)` when the filesystem cannot do it.
pub fn release(file: &File, off: u64, len: u64) -> io::Result<bool> {
    fallocate_if_supported(
        file,
        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
        off,
        len,
    )
}

/// `fallocate(2)` with `mode`, retried on EINTR; `Ok(false)` when the filesystem does not
/// support it.
fn fallocate_if_supported(file: &File, mode: i32, off: u64, len: u64) -> io::Result<bool> {
    loop {
        // SAFETY: plain syscall on a valid descriptor.
        let r = unsafe { libc::fallocate(file.as_raw_fd(), mode, off as i64, len as i64) };
        if r == 0 {
            return Ok(true);
        }
        let e = last_err();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => return Ok(false),
            _ => return Err(e),
        }
    }
}

fn write_zeros(file: &File, off: u64, len: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let zeros = vec![0u8; 1 << 16];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(zeros.len() as u64) as usize;
        file.write_all_at(&zeros[..n], off + done)?;
        done += n as u64;
    }
    Ok(())
}

/// Maps `reserve` bytes of `file` shared, read-write. The file may be much shorter: pages
/// past its end are never touched until the file has grown over them (see `mem`).
pub fn map_shared(file: &File, reserve: u64) -> io::Result<*mut u8> {
    // SAFETY: a fresh mapping chosen by the kernel; nothing else aliases it yet.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            reserve as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(last_err());
    }
    Ok(p as *mut u8)
}

/// Maps `reserve` bytes of `file` shared, read-only (a store opened read-only: any write
/// through it would fault, so the engine makes none).
pub fn map_shared_read_only(file: &File, reserve: u64) -> io::Result<*mut u8> {
    // SAFETY: a fresh mapping chosen by the kernel; nothing else aliases it yet.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            reserve as usize,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(last_err());
    }
    Ok(p as *mut u8)
}

/// Maps `reserve` bytes of `file` private and copy-on-write (`MAP_PRIVATE`): writes
/// through the mapping stay in this process and never reach the file, which a dry run of
/// a repair relies on. The first `file_len` bytes are the file's (the rest of its last
/// page reads as zeros); past them, anonymous zero pages, so that the part of a truncated
/// file that its header still claims reads as zeros instead of raising `SIGBUS`. No swap
/// is reserved (`MAP_NORESERVE`): only the pages written are ever copied.
pub fn map_private(file: &File, reserve: u64, file_len: u64) -> io::Result<*mut u8> {
    let flags = libc::MAP_PRIVATE | libc::MAP_NORESERVE;
    // SAFETY: a fresh anonymous mapping chosen by the kernel; nothing aliases it yet.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            reserve as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            flags | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(last_err());
    }
    let n = file_len.next_multiple_of(4096).min(reserve);
    if n > 0 {
        // SAFETY: replaces the first `n` bytes of the anonymous mapping made just above
        // (ours alone, not yet handed out) with the file's pages.
        let q = unsafe {
            libc::mmap(
                p,
                n as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                flags | libc::MAP_FIXED,
                file.as_raw_fd(),
                0,
            )
        };
        if q == libc::MAP_FAILED {
            let e = last_err();
            // SAFETY: the mapping made above, not handed out.
            unsafe { libc::munmap(p, reserve as usize) };
            return Err(e);
        }
    }
    Ok(p as *mut u8)
}

/// Faults in `[addr, addr + len)` of a shared mapping for writing, without writing
/// (`MADV_POPULATE_WRITE`, Linux 5.14): see `pretouch`.
///
/// Safe whatever the range: the kernel only fills page tables and changes no byte of
/// memory, and an address outside a suitable mapping is an error (`EFAULT`, `ENOMEM`,
/// `EINVAL`), never a signal. Pages past the end of a file fail the same way.
pub fn populate_write(addr: usize, len: usize) -> io::Result<()> {
    // SAFETY: MADV_POPULATE_WRITE does not change memory contents or mappings (see above).
    unsafe {
        rustix::mm::madvise(
            addr as *mut std::ffi::c_void,
            len,
            rustix::mm::Advice::LinuxPopulateWrite,
        )
    }
    .map_err(io::Error::from)
}

/// Unmaps a mapping made by [`map_shared`] or [`map_private`].
///
/// # Safety
/// No reference into the mapping may be used afterwards.
pub unsafe fn unmap(p: *mut u8, len: u64) {
    // SAFETY: per the caller's contract.
    unsafe {
        libc::munmap(p as *mut libc::c_void, len as usize);
    }
}

fn flock_struct(kind: i16, start: u64) -> libc::flock {
    // SAFETY: flock is plain old data; all-zero is a valid value.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind;
    fl.l_whence = libc::SEEK_SET as i16;
    fl.l_start = start as i64;
    fl.l_len = 1;
    fl.l_pid = 0; // required to be 0 for OFD locks
    fl
}

/// Tries to take the OFD write lock on byte `at` through `fd`. `Ok(false)` if another
/// open file description holds it.
pub fn try_lock_byte(fd: RawFd, at: u64) -> io::Result<bool> {
    let mut fl = flock_struct(libc::F_WRLCK as i16, at);
    loop {
        // SAFETY: valid descriptor and a properly initialised flock.
        let r = unsafe { libc::fcntl(fd, libc::F_OFD_SETLK, &mut fl) };
        if r == 0 {
            return Ok(true);
        }
        let e = last_err();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) | Some(libc::EACCES) => return Ok(false),
            _ => return Err(e),
        }
    }
}

/// Takes (or converts to) a shared OFD lock on byte `at`, waiting while another open
/// file description holds it exclusively.
pub fn lock_byte_shared_wait(fd: RawFd, at: u64) -> io::Result<()> {
    let mut fl = flock_struct(libc::F_RDLCK as i16, at);
    loop {
        // SAFETY: valid descriptor and flock.
        let r = unsafe { libc::fcntl(fd, libc::F_OFD_SETLKW, &mut fl) };
        if r == 0 {
            return Ok(());
        }
        let e = last_err();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

/// Whether `file` lives on tmpfs (where only a process crash, never an OS crash,
/// can interrupt it: nothing survives a reboot there anyway).
pub fn on_tmpfs(file: &File) -> bool {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    // SAFETY: statfs is plain data filled in by the kernel.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor and out-pointer.
    let r = unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) };
    r == 0 && st.f_type as i64 == TMPFS_MAGIC
}

/// `msync(MS_SYNC)` of the pages holding `[p, p+len)` of a mapping (no fsync).
///
/// # Safety
/// `[p, p+len)` must lie inside a live mapping, whose base is page-aligned.
pub unsafe fn msync_pages(base: *mut u8, off: u64, len: u64) -> io::Result<()> {
    let start = off & !4095;
    let end = (off + len).next_multiple_of(4096);
    // SAFETY: per the caller's contract; the rounded range stays inside the mapping
    // because mappings are whole pages.
    let r = unsafe {
        libc::msync(
            base.add(start as usize) as *mut libc::c_void,
            (end - start) as usize,
            libc::MS_SYNC,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(last_err())
    }
}

/// `msync(MS_SYNC)` of `[p, p+len)` of a mapping, then `fsync` of the file: every byte
/// written through the mapping (and the file's size) is on stable storage on return.
///
/// # Safety
/// `[p, p+len)` must lie inside a live mapping of `file`.
pub unsafe fn flush(p: *mut u8, len: u64, file: &File) -> io::Result<()> {
    // SAFETY: per the caller's contract.
    let r = unsafe { libc::msync(p as *mut libc::c_void, len as usize, libc::MS_SYNC) };
    if r != 0 {
        return Err(last_err());
    }
    file.sync_all()
}

/// Releases the OFD lock on byte `at` held through `fd`.
pub fn unlock_byte(fd: RawFd, at: u64) {
    let mut fl = flock_struct(libc::F_UNLCK as i16, at);
    // SAFETY: valid descriptor and flock.
    unsafe { libc::fcntl(fd, libc::F_OFD_SETLK, &mut fl) };
}

/// Whether some open file description other than `fd`'s holds a lock on byte `at`.
pub fn byte_locked(fd: RawFd, at: u64) -> io::Result<bool> {
    let mut fl = flock_struct(libc::F_WRLCK as i16, at);
    loop {
        // SAFETY: valid descriptor and flock.
        let r = unsafe { libc::fcntl(fd, libc::F_OFD_GETLK, &mut fl) };
        if r == 0 {
            return Ok(fl.l_type != libc::F_UNLCK as i16);
        }
        let e = last_err();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

/// Sleeps on the 32-bit word while it equals `expected`, at most `timeout`. Shared (no
/// `FUTEX_PRIVATE_FLAG`): the kernel keys the wait on the file page, so waiters in every
/// process that maps the file meet.
pub fn futex_wait(word: &std::sync::atomic::AtomicU32, expected: u32, timeout: Duration) {
    let ts = rustix::time::Timespec {
        tv_sec: timeout.as_secs() as i64,
        tv_nsec: timeout.subsec_nanos() as i64,
    };
    let _ = rustix::thread::futex::wait(
        word,
        rustix::thread::futex::Flags::empty(),
        expected,
        Some(&ts),
    );
}

/// Sleeps until one of `words` (each with the value it is expected to hold) changes or is
/// woken, at most `timeout` (`futex_waitv`, Linux 5.16; shared futexes, as
/// [`futex_wait`]). On an older kernel it sleeps a millisecond at most instead: the caller
/// looks again either way.
pub fn futex_wait_any(words: &[(&std::sync::atomic::AtomicU32, u32)], timeout: Duration) {
    use rustix::thread::futex::{Wait, WaitFlags, WaitPtr, WaitvFlags};
    if let [(w, v)] = words {
        return futex_wait(w, *v, timeout);
    }
    let waiters: Vec<Wait> = words
        .iter()
        .map(|(w, v)| {
            let mut x = Wait::new();
            x.val = *v as u64;
            x.uaddr = WaitPtr::new(w.as_ptr().cast());
            x.flags = WaitFlags::SIZE_U32;
            x
        })
        .collect();
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    let nanos = now.tv_nsec as u64 + timeout.subsec_nanos() as u64;
    let until = rustix::time::Timespec {
        tv_sec: now.tv_sec + timeout.as_secs() as i64 + (nanos / 1_000_000_000) as i64,
        tv_nsec: (nanos % 1_000_000_000) as i64,
    };
    let r = rustix::thread::futex::waitv(
        &waiters,
        WaitvFlags::empty(),
        Some(&until),
        rustix::time::ClockId::Monotonic,
    );
    if r == Err(rustix::io::Errno::NOSYS) {
        std::thread::sleep(timeout.min(Duration::from_millis(1)));
    }
}

/// Wakes up to `n` waiters on the word.
pub fn futex_wake(word: &std::sync::atomic::AtomicU32, n: u32) {
    let _ = rustix::thread::futex::wake(word, rustix::thread::futex::Flags::empty(), n);
}

/// Opens an unnamed regular file in directory `dir` (`O_TMPFILE`): a file that no other
/// process can see or open until [`link_unnamed`] gives it a name, and that the kernel
/// removes by itself if the process dies first. `Ok(None)` when the filesystem (or the
/// kernel) has no unnamed files, or `/proc` is not mounted to name one: the caller then
/// falls back to a named temporary file.
pub fn create_unnamed(dir: &std::path::Path, mode: u32) -> io::Result<Option<File>> {
    use rustix::fs::{Mode, OFlags, CWD};
    if !std::path::Path::new("/proc/self/fd").is_dir() {
        return Ok(None);
    }
    match rustix::fs::openat(
        CWD,
        dir,
        OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC,
        Mode::from_raw_mode(mode),
    ) {
        Ok(fd) => Ok(Some(File::from(fd))),
        // EISDIR and EOPNOTSUPP: kernels and filesystems without O_TMPFILE.
        Err(e) if e == rustix::io::Errno::ISDIR || e == rustix::io::Errno::OPNOTSUPP => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Gives a file from [`create_unnamed`] the name `path`, atomically; fails with
/// `EEXIST` if `path` exists (a dangling symbolic link included: it is never followed).
pub fn link_unnamed(file: &File, path: &std::path::Path) -> io::Result<()> {
    use rustix::fs::{AtFlags, CWD};
    let proc_path = format!("/proc/self/fd/{}", file.as_raw_fd());
    rustix::fs::linkat(CWD, proc_path.as_str(), CWD, path, AtFlags::SYMLINK_FOLLOW)
        .map_err(io::Error::from)
}

/// Whether process `pid` exists (in this PID namespace). A reused PID reads as alive.
pub fn process_exists(pid: u32) -> bool {
    match rustix::process::Pid::from_raw(pid as i32) {
        Some(p) => !matches!(
            rustix::process::test_kill_process(p),
            Err(rustix::io::Errno::SRCH)
        ),
        None => true,
    }
}

/// 64 random bits (`getrandom`), for a new store's hash seed and temporary names; the
/// clock and the pid where the kernel has no `getrandom`.
pub fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: getrandom writes at most the given length into the buffer.
    let n = unsafe { libc::getrandom(b.as_mut_ptr() as *mut libc::c_void, 8, 0) };
    if n == 8 {
        u64::from_le_bytes(b)
    } else {
        // No getrandom: the clock and pid still make seeds differ between files.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        xxhash_rust::xxh3::xxh3_64(&[t.to_le_bytes().as_slice(), &pid().to_le_bytes()].concat())
    }
}

/// The calling process's id.
pub fn pid() -> u32 {
    std::process::id()
}

/// Bumped in every child right after `fork()`: a store compares it with the value it
/// registered under and re-registers the child on first use.
pub static FORK_GENERATION: AtomicU64 = AtomicU64::new(0);

const MAX_LIVENESS_FDS: usize = 1024;
static LIVENESS_FDS: [AtomicI32; MAX_LIVENESS_FDS] =
    [const { AtomicI32::new(-1) }; MAX_LIVENESS_FDS];
static ATFORK: Once = Once::new();

extern "C" fn atfork_child() {
    // Only async-signal-safe work here: atomics and close(2). Closing our copy of each
    // liveness descriptor means the child does not keep its parent's lock (and so its
    // parent) alive; the parent still holds its own copy.
    FORK_GENERATION.fetch_add(1, Ordering::SeqCst);
    for slot in LIVENESS_FDS.iter() {
        let fd = slot.swap(-1, Ordering::SeqCst);
        if fd >= 0 {
            // SAFETY: the descriptor was registered by us and is closed only here or in
            // `forget_liveness_fd`, which removes it from the table first.
            unsafe { libc::close(fd) };
        }
    }
}

/// Records a liveness descriptor so that a forked child closes its copy. False if the
/// table is full (more than 1,024 stores open at once in one process).
pub fn remember_liveness_fd(fd: RawFd) -> bool {
    ATFORK.call_once(|| {
        // SAFETY: registering a plain extern "C" handler.
        unsafe { libc::pthread_atfork(None, None, Some(atfork_child)) };
    });
    for slot in LIVENESS_FDS.iter() {
        if slot
            .compare_exchange(-1, fd, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return true;
        }
    }
    false
}

/// Removes a descriptor from the fork table. Returns false if a fork already closed it.
pub fn forget_liveness_fd(fd: RawFd) -> bool {
    for slot in LIVENESS_FDS.iter() {
        if slot
            .compare_exchange(fd, -1, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return true;
        }
    }
    false
}

thread_local! {
    /// This thread's (fork generation, pid, tid), for [`pid_tid`].
    static PID_TID: std::cell::Cell<(u64, u32, u32)> = const { std::cell::Cell::new((u64::MAX, 0, 0)) };
}

/// The calling process's and thread's ids, without a system call after the first in each
/// thread (a log record carries both, and an append makes no system call): cached per
/// thread, and taken again in a child after `fork()`.
#[inline]
pub fn pid_tid() -> (u32, u32) {
    let fg = FORK_GENERATION.load(Ordering::Relaxed);
    PID_TID.with(|c| {
        let (g, p, t) = c.get();
        if g == fg {
            return (p, t);
        }
        let v = (
            std::process::id(),
            rustix::thread::gettid().as_raw_nonzero().get() as u32,
        );
        c.set((fg, v.0, v.1));
        v
    })
}
