//! A word of the store file, and the hook that every write to one runs first.
//!
//! A hot backup (docs/DESIGN.md, "Backup") needs to copy a block of the file before any
//! byte of it changes. A hook that some write sites call and others forget would give a
//! silently torn copy, so the hook is in the type: [`Region::word`](super::Region::word)
//! hands out [`SharedWord`]s, whose loads are plain atomic loads and whose every store,
//! swap, read-modify-write and compare-and-swap first calls [`before_write`]. Outside a
//! backup that is one load of a process-wide flag and a branch predicted not taken.
//!
//! What does not go through a `SharedWord`, and why that is sound for a copy:
//! * `futex(2)` words ([`Region::futex_word`](super::Region::futex_word)) only count
//!   wake-ups; no reader of a store takes meaning from their values;
//! * a queue element's words, written in place by the process that holds the element
//!   (`QueueElement::words`): an element being filled is held, and a copy of the file has
//!   no live holder, so its first opener gives the element back as it does a dead
//!   holder's, contents unread.

#[cfg(shuttle)]
use shuttle::sync::atomic::AtomicU64;
#[cfg(not(shuttle))]
use std::sync::atomic::AtomicU64;
use std::sync::atomic::{AtomicUsize, Ordering};

/// How many reasons this process has to run the hook: stores under a hot backup
/// (`copy::register`), and the test below. 0: writes skip it.
static HOOK_ON: AtomicUsize = AtomicUsize::new(0);

/// Counts a reason to run the hook on (`true`) or off (`false`). The first "on" is
/// ordered before any write that needs a copy by whoever turns it on (the section that
/// joins a backup's epoch).
pub(crate) fn write_hook_on(on: bool) {
    if on {
        HOOK_ON.fetch_add(1, Ordering::SeqCst);
    } else {
        HOOK_ON.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Runs the write hook for the shared address `addr` if it is on.
#[inline(always)]
pub fn before_write(addr: usize) {
    if HOOK_ON.load(Ordering::Relaxed) != 0 {
        run_hook(addr);
    }
}

#[cold]
#[inline(never)]
fn run_hook(addr: usize) {
    #[cfg(test)]
    tests::record(addr);
    super::copy::before_write(addr);
}

/// A shared 64-bit word of the store file: an `AtomicU64` whose writes run
/// [`before_write`] first. Same methods, same orderings.
#[repr(transparent)]
pub struct SharedWord(AtomicU64);

impl std::fmt::Debug for SharedWord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl SharedWord {
    /// Views an atomic word of a mapping as a shared word (the type is transparent).
    #[inline(always)]
    pub(crate) fn from_atomic(a: &AtomicU64) -> &SharedWord {
        // SAFETY: `SharedWord` is `repr(transparent)` over `AtomicU64`, so the two
        // references have the same layout and validity.
        unsafe { &*(a as *const AtomicU64 as *const SharedWord) }
    }

    /// Views shared words as atomic words (the type is transparent), for writers that
    /// the hook need not see: see the module comment.
    #[inline(always)]
    pub(crate) fn as_atomics(w: &[SharedWord]) -> &[AtomicU64] {
        // SAFETY: as for `from_atomic`; a slice of a transparent wrapper has the layout
        // of a slice of what it wraps.
        unsafe { &*(w as *const [SharedWord] as *const [AtomicU64]) }
    }

    #[inline(always)]
    fn hook(&self) {
        before_write(self as *const SharedWord as usize);
    }

    /// [`AtomicU64::load`].
    #[inline(always)]
    pub fn load(&self, order: Ordering) -> u64 {
        self.0.load(order)
    }

    /// [`AtomicU64::store`].
    #[inline(always)]
    pub fn store(&self, v: u64, order: Ordering) {
        self.hook();
        self.0.store(v, order)
    }

    /// [`AtomicU64::swap`].
    #[inline(always)]
    pub fn swap(&self, v: u64, order: Ordering) -> u64 {
        self.hook();
        self.0.swap(v, order)
    }

    /// [`AtomicU64::compare_exchange`].
    #[inline(always)]
    pub fn compare_exchange(
        &self,
        current: u64,
        new: u64,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u64, u64> {
        self.hook();
        self.0.compare_exchange(current, new, success, failure)
    }

    /// [`AtomicU64::fetch_add`].
    #[inline(always)]
    pub fn fetch_add(&self, v: u64, order: Ordering) -> u64 {
        self.hook();
        self.0.fetch_add(v, order)
    }

    /// [`AtomicU64::fetch_sub`].
    #[inline(always)]
    pub fn fetch_sub(&self, v: u64, order: Ordering) -> u64 {
        self.hook();
        self.0.fetch_sub(v, order)
    }

    /// [`AtomicU64::fetch_and`].
    #[inline(always)]
    pub fn fetch_and(&self, v: u64, order: Ordering) -> u64 {
        self.hook();
        self.0.fetch_and(v, order)
    }

    /// [`AtomicU64::fetch_xor`].
    #[inline(always)]
    pub fn fetch_xor(&self, v: u64, order: Ordering) -> u64 {
        self.hook();
        self.0.fetch_xor(v, order)
    }

    /// [`AtomicU64::fetch_max`].
    #[inline(always)]
    pub fn fetch_max(&self, v: u64, order: Ordering) -> u64 {
        self.hook();
        self.0.fetch_max(v, order)
    }

    /// [`AtomicU64::fetch_update`].
    #[inline(always)]
    pub fn fetch_update<F: FnMut(u64) -> Option<u64>>(
        &self,
        set_order: Ordering,
        fetch_order: Ordering,
        f: F,
    ) -> Result<u64, u64> {
        self.hook();
        self.0.fetch_update(set_order, fetch_order, f)
    }
}

#[cfg(all(test, not(shuttle)))]
mod tests {
    use super::*;
    use crate::mem::Region;
    use std::cell::RefCell;
    use std::sync::atomic::Ordering::*;

    thread_local! {
        static SEEN: RefCell<Option<Vec<usize>>> = const { RefCell::new(None) };
    }

    // Other tests' threads write while the hook is on, some from their thread-local
    // destructors (a txn slot released as its thread exits): the hook must not touch a
    // thread-local that is gone, nor record theirs.
    pub(super) fn record(addr: usize) {
        let _ = SEEN.try_with(|s| {
            if let Some(v) = s.borrow_mut().as_mut() {
                v.push(addr);
            }
        });
    }

    /// Every way of writing a shared word or byte runs the hook first with an address
    /// inside what it writes, and no load does.
    #[test]
    fn every_write_runs_the_hook_and_no_read_does() {
        write_hook_on(true);
        let mut buf = vec![0u64; 64];
        // SAFETY: a heap buffer of 512 bytes, 8-aligned, accessed only through the
        // region for the rest of the test. (`from_raw` asks 4096-alignment for mappings;
        // nothing here depends on it.)
        let r = unsafe { Region::from_raw(buf.as_mut_ptr() as *mut u8, 512) };
        let base = buf.as_ptr() as usize;
        SEEN.with(|s| *s.borrow_mut() = Some(Vec::new()));
        let w = r.word(64);
        let at = base + 64;
        type Op<'a> = Box<dyn Fn() + 'a>;
        let writes: Vec<(&str, Op)> = vec![
            ("store", Box::new(|| w.store(1, SeqCst))),
            ("swap", Box::new(|| _ = w.swap(2, SeqCst))),
            (
                "cas",
                Box::new(|| _ = w.compare_exchange(2, 3, SeqCst, SeqCst)),
            ),
            (
                "failed cas",
                Box::new(|| _ = w.compare_exchange(9, 3, SeqCst, SeqCst)),
            ),
            ("add", Box::new(|| _ = w.fetch_add(1, SeqCst))),
            ("sub", Box::new(|| _ = w.fetch_sub(1, SeqCst))),
            ("and", Box::new(|| _ = w.fetch_and(7, SeqCst))),
            ("xor", Box::new(|| _ = w.fetch_xor(1, SeqCst))),
            ("max", Box::new(|| _ = w.fetch_max(5, SeqCst))),
            (
                "update",
                Box::new(|| _ = w.fetch_update(SeqCst, SeqCst, |v| Some(v + 1))),
            ),
            ("words", Box::new(|| r.words(64, 2)[1].store(4, SeqCst))),
            ("merge", Box::new(|| r.merge_word(64, 0xab00, 0xff00))),
            ("bytes", Box::new(|| r.write_bytes(67, &[1; 20]))),
            ("block", Box::new(|| r.write_block(67, &[2; 20]))),
        ];
        for (what, op) in &writes {
            SEEN.with(|s| s.borrow_mut().as_mut().unwrap().clear());
            op();
            let seen = SEEN.with(|s| s.borrow().clone().unwrap());
            assert!(!seen.is_empty(), "{what}: no hook");
            assert!(
                seen.iter().all(|a| (at..at + 24 + 8).contains(a)),
                "{what}: hooked {seen:x?}, wrote near {at:#x}"
            );
        }
        SEEN.with(|s| s.borrow_mut().as_mut().unwrap().clear());
        let mut out = [0u8; 20];
        let _ = (w.load(SeqCst), r.window(64, 8));
        r.read_bytes(67, &mut out);
        r.read_block(67, &mut out);
        assert!(
            SEEN.with(|s| s.borrow().clone().unwrap()).is_empty(),
            "a read hooked"
        );
        SEEN.with(|s| *s.borrow_mut() = None);
        write_hook_on(false);
        drop(writes);
        // `r` points into `buf`: it is not used past here.
        drop(buf);
    }

    /// A write of many words runs the hook for every page it touches (a backup copies
    /// blocks of whole pages, so each block a write reaches is copied before it changes),
    /// and not once a word.
    #[test]
    fn a_long_write_runs_the_hook_once_for_each_page_it_touches() {
        write_hook_on(true);
        let mut buf = vec![0u64; 4 * 4096 / 8];
        // SAFETY: a heap buffer of 16 KiB, 8-aligned, accessed only through the region for
        // the rest of the test.
        let r = unsafe { Region::from_raw(buf.as_mut_ptr() as *mut u8, 4 * 4096) };
        let base = buf.as_ptr() as usize;
        let page = |a: usize| (a - base) / 4096;
        SEEN.with(|s| *s.borrow_mut() = Some(Vec::new()));
        for (off, n) in [(4000u64, 5000usize), (4096, 4096), (100, 8), (8190, 4)] {
            for block in [false, true] {
                SEEN.with(|s| s.borrow_mut().as_mut().unwrap().clear());
                let src = vec![7u8; n];
                if block {
                    r.write_block(off, &src);
                } else {
                    r.write_bytes(off, &src);
                }
                let seen = SEEN.with(|s| s.borrow().clone().unwrap());
                let first = off as usize / 4096;
                let last = (off as usize + n - 1) / 4096;
                let mut pages: Vec<usize> = seen.iter().map(|&a| page(a)).collect();
                pages.sort_unstable();
                pages.dedup();
                assert_eq!(
                    pages,
                    (first..=last).collect::<Vec<_>>(),
                    "{n} bytes at {off} (block: {block}): hooked {seen:x?}"
                );
                assert!(
                    seen.len() <= 3 * (last - first + 1),
                    "{n} bytes at {off}: {} hooks",
                    seen.len()
                );
            }
        }
        SEEN.with(|s| *s.borrow_mut() = None);
        write_hook_on(false);
        // `r` points into `buf`: it is not used past here.
        drop(buf);
    }
}
