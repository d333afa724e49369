//! Pretouching: a background thread faults in the pages of space the allocator has just
//! taken, before the writers reach them.
//!
//! Why: on tmpfs a page that `fallocate` reserved is zeroed when it is first faulted in,
//! and on virtual machines whose host takes back memory the guest freed (free page
//! reporting), that first touch can make the host back the page again, which is usually
//! a few µs and sometimes 1-4 ms (DESIGN.md, "Pretouching"). Left to the writers, such a
//! fault lands inside one put. The allocator takes space a chunk (or an index arena) at a
//! time, long before the writers have filled it, so a thread that faults in the rest of
//! the range meanwhile takes those faults off the put path. Chronicle Queue's
//! "pretoucher" does the same for the same reason.
//!
//! One thread per process serves every store the process has open. It is started on the
//! first request (again in a child after `fork()`, which does not copy threads) and
//! sleeps on its channel when there is nothing to do. Requests are hints: a request that
//! cannot be queued (the thread could not start, the queue's lock is held) is dropped,
//! and an error of the fault-in itself is ignored; the writer then takes the fault as it
//! would without this module.
//!
//! Faulting in changes no byte of the file (`MADV_POPULATE_WRITE` only fills page tables,
//! "as if writing to each page, without the actual memory access"), so it may run while
//! any process reads or writes the range. The one effect on the file: a page of the range
//! that was released (a hole punched) after the request and before the fault-in is
//! allocated again. The store stays consistent (the page reads as zeros either way); only
//! that page's memory is held until the run is released again.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::*};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bytes faulted in per step: the thread checks between steps whether the store is
/// being closed, so that closing waits for one step at most.
const STEP: u64 = 1 << 20;

/// How long closing a store waits for a step in progress. A step is a few hundred µs;
/// the bound matters only in a child forked while its parent's thread was inside a step
/// (the child has no such thread, and the count it inherited never drops).
const CLOSE_WAIT: Duration = Duration::from_millis(100);

/// A store's side of pretouching: whether its mapping may still be touched, and how many
/// steps are touching it now.
#[derive(Debug, Default)]
pub(crate) struct Guard {
    closed: AtomicBool,
    busy: AtomicU32,
}

impl Guard {
    /// Called before the store's mapping is unmapped: no step starts after this returns,
    /// and any in progress has ended (or `CLOSE_WAIT` has passed; see there).
    pub(crate) fn close(&self) {
        self.closed.store(true, SeqCst);
        let start = Instant::now();
        while self.busy.load(SeqCst) != 0 && start.elapsed() < CLOSE_WAIT {
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    /// Runs `f` unless the store is closed, with closing held off meanwhile. (SeqCst on
    /// both sides: either `close` sees the count raised and waits, or this sees `closed`.)
    fn enter(&self, f: impl FnOnce()) {
        self.busy.fetch_add(1, SeqCst);
        if !self.closed.load(SeqCst) {
            f();
        }
        self.busy.fetch_sub(1, SeqCst);
    }
}

/// One range to fault in: `len` bytes at address `addr` of the mapping that `guard`
/// protects.
struct Job {
    guard: Arc<Guard>,
    addr: usize,
    len: u64,
}

/// The thread of this process: its pid (a forked child must start its own) and its queue,
/// `None` when the thread could not be started or has ended (then requests are dropped,
/// rather than each one trying again under the caller's locks).
struct Worker {
    pid: u32,
    tx: Option<Sender<Job>>,
}

static WORKER: Mutex<Option<Worker>> = Mutex::new(None);

/// Requests queued and not yet finished, in this process (for the tests: [`wait_idle`]).
static PENDING: AtomicU64 = AtomicU64::new(0);

/// Asks for the `len` bytes at address `addr` of a store's mapping, whose guard is
/// `guard`, to be faulted in, in the background. The range must lie below the file's
/// size (past it a fault-in fails, harmlessly). Never blocks: may be called under the
/// store's locks.
pub(crate) fn request(guard: &Arc<Guard>, addr: usize, len: u64) {
    if len == 0 {
        return;
    }
    let job = Job {
        guard: guard.clone(),
        addr,
        len,
    };
    // `try_lock`: a thread of the parent may have held the lock when this process was
    // forked, and then it stays locked here forever. The request is a hint; drop it.
    let Ok(mut w) = WORKER.try_lock() else { return };
    let pid = super::pid();
    if w.as_ref().is_none_or(|w| w.pid != pid) {
        // Forget, not drop, a parent's worker: its thread is not in this process, and
        // dropping its sender could wait on a lock that thread held at the fork.
        std::mem::forget(w.take());
        *w = Some(spawn(pid));
    }
    let Some(worker) = w.as_mut() else { return };
    let Some(tx) = &worker.tx else { return };
    PENDING.fetch_add(1, SeqCst);
    if tx.send(job).is_err() {
        PENDING.fetch_sub(1, SeqCst);
        worker.tx = None;
    }
}

/// Starts this process's thread (see [`Worker`] for when it cannot).
fn spawn(pid: u32) -> Worker {
    let (tx, rx) = channel();
    let started = std::thread::Builder::new()
        .name("shoal-pretouch".into())
        .spawn(move || run(rx))
        .is_ok();
    Worker {
        pid,
        tx: started.then_some(tx),
    }
}

fn run(rx: Receiver<Job>) {
    while let Ok(job) = rx.recv() {
        let mut done = 0;
        while done < job.len && !job.guard.closed.load(Relaxed) {
            let n = STEP.min(job.len - done);
            job.guard.enter(|| {
                // An error (an old kernel without MADV_POPULATE_WRITE, a full filesystem
                // for a released page) leaves the faults to the writers.
                let _ = super::populate_write(job.addr + done as usize, n as usize);
            });
            done += n;
        }
        PENDING.fetch_sub(1, SeqCst);
    }
}

/// Waits until every request this process made has been served, at most `timeout`.
/// Whether it was.
#[cfg(test)]
pub(crate) fn wait_idle(timeout: Duration) -> bool {
    let start = Instant::now();
    while PENDING.load(SeqCst) != 0 {
        if start.elapsed() > timeout {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::HEADER_PAGE;
    use crate::shared::Shared;

    /// Page faults this thread has taken so far.
    fn thread_minor_faults() -> i64 {
        // SAFETY: an all-zero rusage is a valid value for getrusage to overwrite.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: getrusage writes one rusage into the pointer it is given.
        unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
        ru.ru_minflt
    }

    /// Writes to one word of every page of `[off, off + len)` past each chunk's header
    /// page (the word read and stored back: the bytes stay as they are; an atomic add of 0
    /// would be compiled to a load) and returns the page faults that took.
    fn faults_writing(sh: &Shared, off: u64, len: u64, cs: u64) -> (i64, u64) {
        let mut pages = 0;
        let f0 = thread_minor_faults();
        for p in (off..off + len).step_by(4096) {
            if (p - off) % cs >= HEADER_PAGE {
                let w = sh.w(p + 8);
                w.store(w.load(SeqCst), SeqCst);
                pages += 1;
            }
        }
        (thread_minor_faults() - f0, pages)
    }

    /// The free chunks of a new store, `pages` pages past their header pages, and the
    /// faults this thread took writing each of them once, after the pretouch thread (if
    /// any) has finished.
    fn faults_in_new_store(pretouch: bool) -> (i64, u64) {
        let d = tempfile::tempdir_in("/dev/shm").unwrap();
        let cs = 1u64 << 16;
        let opts = crate::Options {
            chunk_size: cs,
            initial_size: 64 * cs,
            pretouch,
            ..crate::Options::default()
        };
        let s =
            crate::Store::open_with(d.path().join("p.shoal"), &opts, crate::OpenMode::CreateNew)
                .unwrap();
        let sh = &s.sh;
        let (first, end) = (sh.g.chunks_off, sh.file_end());
        assert!(end >= first + 32 * cs, "precondition: 32 free chunks");
        assert!(
            wait_idle(Duration::from_secs(60)),
            "the pretouch thread did not finish in 60 s"
        );
        let r = faults_writing(sh, first, 32 * cs, cs);
        let c = s.check().unwrap();
        assert!(c.is_ok(), "{c}");
        r
    }

    /// The space a new store allocated is faulted in by the background thread, so writing
    /// it takes (almost) no fault; without pretouching, one per page. The second half is
    /// what makes the first mean something.
    #[test]
    fn new_space_is_faulted_in_before_the_writer_reaches_it() {
        let (f_off, pages) = faults_in_new_store(false);
        assert!(
            f_off >= pages as i64 / 2,
            "precondition: writing {pages} untouched pages took only {f_off} faults"
        );
        // A request is a hint, dropped when another thread holds the worker's lock at that
        // instant (the other tests of this binary open stores too): the best of three.
        let (f_on, pages) = (0..3)
            .map(|_| faults_in_new_store(true))
            .min()
            .expect("three runs");
        assert!(
            f_on <= pages as i64 / 8,
            "writing {pages} pretouched pages took {f_on} faults (without pretouching: {f_off})"
        );
    }

    /// Only tmpfs stores pretouch: on disk a write fault would dirty pages `fallocate`
    /// left unwritten. (Skipped, saying so, where the temporary directory is on tmpfs.)
    #[test]
    fn stores_on_disk_do_not_pretouch() {
        let d = tempfile::tempdir().unwrap();
        let s = crate::Store::open_with(
            d.path().join("d.shoal"),
            &crate::Options::default(),
            crate::OpenMode::CreateNew,
        )
        .unwrap();
        if crate::sys::on_tmpfs(&s.sh.file) {
            eprintln!("skipped: the temporary directory is on tmpfs here, not on disk");
            return;
        }
        assert!(s.sh.pretouch.is_none());
        let t = tempfile::tempdir_in("/dev/shm").unwrap();
        let m = crate::Store::open_with(
            t.path().join("m.shoal"),
            &crate::Options::default(),
            crate::OpenMode::CreateNew,
        )
        .unwrap();
        assert!(m.sh.pretouch.is_some());
    }

    /// A store closed while its range is being faulted in: closing waits for the step in
    /// progress, and the thread goes on serving other stores.
    #[test]
    fn closing_a_store_with_requests_pending_leaves_the_thread_serving() {
        let d = tempfile::tempdir_in("/dev/shm").unwrap();
        for i in 0..8 {
            let opts = crate::Options {
                initial_size: 32 << 20,
                ..crate::Options::default()
            };
            let s = crate::Store::open_with(
                d.path().join(format!("c{i}.shoal")),
                &opts,
                crate::OpenMode::CreateNew,
            )
            .unwrap();
            let (first, end) = (s.sh.g.chunks_off, s.sh.file_end());
            s.sh.pretouch(first, end - first);
            drop(s);
        }
        assert!(
            wait_idle(Duration::from_secs(60)),
            "the pretouch thread did not finish in 60 s"
        );
    }
}
