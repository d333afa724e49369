//! Txn slots: locks, intents and the recovery of threads that died holding them.
//!
//! Every multi-word change to the file follows one protocol, so that a process killed at
//! any instant leaves a state that the next process can finish in O(1):
//!
//! 1. Before taking a lock, a thread writes the lock word's offset into its slot's *held*
//!    list; after releasing, it clears it. (A recoverer releases only locks whose word
//!    still names the dead txn, so a stale entry is harmless.)
//! 2. With its locks held, the thread computes every word it is going to write and the
//!    value it will have, writes that *redo list* into its slot, then marks the intent
//!    committed (one release store). Only then does it touch shared words.
//! 3. It applies the list, clears the intent, releases the locks.
//!
//! A thread waiting on a lock whose owner is dead steals the dead txn's locks, applies its
//! committed redo list again (every entry is an absolute value, so replay is idempotent),
//! or runs the structural recovery of a split, and releases everything. An uncommitted
//! intent means nothing shared was changed yet. Counters that many threads would update
//! with `fetch_add` (entries and bytes per map) are instead split per txn slot, so that
//! they too are single-writer words with absolute values in the redo list.

mod plan;
mod recover;
mod redo;
mod section;
mod slots;

pub(crate) use plan::{too_large, Plan};
pub(crate) use recover::{reclaim_dead, recover_txn};
use redo::apply_entry;
pub(crate) use redo::Redo;
pub(crate) use section::Section;
pub(crate) use slots::thread_txn;

use crate::deadline::Wait;
use crate::error::{Error, Result};
use crate::format::*;
use crate::shared::Shared;
use std::sync::atomic::Ordering::*;
use std::time::{Duration, Instant};

/// A call's txn slot and its write section (see `section`): what a write operation
/// holds from its first shared write to its last. Dereferences to the [`Txn`].
pub(crate) struct Op<'a> {
    pub tx: Txn<'a>,
    pub section: Section<'a>,
}

impl<'a> Op<'a> {
    /// Opens a write section on the calling thread's txn slot `t` and its [`Txn`].
    #[inline]
    pub fn new(sh: &'a Shared, t: u64) -> Op<'a> {
        Op {
            section: Section::enter(sh, t),
            tx: Txn::new(sh, t),
        }
    }
}

impl<'a> std::ops::Deref for Op<'a> {
    type Target = Txn<'a>;
    fn deref(&self) -> &Txn<'a> {
        &self.tx
    }
}

impl<'a> std::ops::DerefMut for Op<'a> {
    fn deref_mut(&mut self) -> &mut Txn<'a> {
        &mut self.tx
    }
}

/// A thread's txn slot in one store.
#[derive(Clone, Copy)]
pub(crate) struct Txn<'a> {
    pub sh: &'a Shared,
    pub idx: u64,
    pub base: u64,
    /// How long the call's waits may last in all before `Error::Timeout`, counted from
    /// the call's first wait (see `deadline`), and how long any one of them may last:
    /// the handle's lock timeout, or a short one for the housekeeping a write does for
    /// others (cleaning), which must not hold the write up behind a stopped process.
    pub timeout: Duration,
}

/// How long housekeeping waits in all (see [`Txn::housekeeping`]): long enough to
/// recover a dead holder (liveness is checked every 10 ms).
pub const HOUSEKEEPING_WAIT: Duration = Duration::from_millis(20);

/// What limits a lock wait.
#[derive(Clone, Copy)]
enum Limit {
    /// The call's deadline (see [`Txn::lock`]).
    Call,
    /// This long, outside the call's deadline (the cleaner's pacing).
    Pace(Duration),
}

impl<'a> Txn<'a> {
    pub fn new(sh: &'a Shared, idx: u64) -> Txn<'a> {
        Txn {
            sh,
            idx,
            base: sh.g.txn_slot(idx),
            timeout: sh.lock_timeout,
        }
    }

    #[inline]
    fn me(&self) -> u64 {
        self.idx + 1
    }

    fn held_push(&self, lock: u64) -> Result<()> {
        for i in 0..T_NHELD {
            let w = self.sh.w(self.base + T_HELD + 8 * i);
            if w.load(Relaxed) == 0 {
                w.store(lock, Release);
                return Ok(());
            }
        }
        // No operation takes more than T_NHELD locks, and claiming a slot empties the
        // list: a full list means the file was corrupted under us.
        Err(self
            .sh
            .corrupt(format!("txn slot {}: held-lock list full", self.idx)))
    }

    fn held_remove(&self, lock: u64) {
        for i in 0..T_NHELD {
            let w = self.sh.w(self.base + T_HELD + 8 * i);
            if w.load(Relaxed) == lock {
                w.store(0, Release);
                return;
            }
        }
    }

    /// Whether this txn holds any lock now (its held-lock list is not empty).
    pub fn holds_locks(&self) -> bool {
        (0..T_NHELD).any(|i| self.sh.w(self.base + T_HELD + 8 * i).load(Relaxed) != 0)
    }

    /// Notes a lock word this thread is about to own by other means than `lock` (a new
    /// segment it creates already locked).
    pub fn held_note(&self, lock: u64) -> Result<()> {
        self.held_push(lock)
    }

    /// Forgets a lock word noted with `held_note` after storing 0 in it.
    pub fn held_forget(&self, lock: u64) {
        self.held_remove(lock);
    }

    /// This txn for housekeeping a call does for everyone (a cleaning step, spare index
    /// space made ahead of a split): its waits last at most [`HOUSEKEEPING_WAIT`] in
    /// all, so that a stopped process holding what it needs costs the call that long,
    /// not its timeout. Housekeeping that cannot finish is left for later.
    pub fn housekeeping(&self) -> Txn<'a> {
        Txn {
            timeout: self.timeout.min(HOUSEKEEPING_WAIT),
            ..*self
        }
    }

    /// Acquires the lock word at `lock`, waiting at most what is left of the call's
    /// lock timeout (`timeout`, counted from the call's first wait), and at most
    /// `timeout` from now.
    pub fn lock(&self, lock: u64) -> Result<()> {
        self.lock_limited(lock, Limit::Call)
    }

    /// [`Txn::lock`], waiting at most `wait`, which is not counted against the call's
    /// timeout: the cleaner's pacing, documented as an allowance beyond it.
    pub fn lock_paced(&self, lock: u64, wait: Duration) -> Result<()> {
        self.lock_limited(lock, Limit::Pace(wait))
    }

    fn lock_limited(&self, lock: u64, limit: Limit) -> Result<()> {
        self.held_push(lock)?;
        let w = self.sh.w(lock);
        if w.compare_exchange(0, self.me(), Acquire, Relaxed).is_ok() {
            return Ok(());
        }
        match self.lock_slow(lock, limit) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.held_remove(lock);
                Err(e)
            }
        }
    }

    /// Takes the lock only if nobody owns it right now. The word's other bits are kept:
    /// the waiters bit, and a segment lock's count of lock-free adders (which a fixed map's
    /// writer then waits out, as after `lock`).
    pub fn try_lock(&self, lock: u64) -> bool {
        if self.held_push(lock).is_err() {
            return false;
        }
        let w = self.sh.w(lock);
        let cur = w.load(Relaxed);
        if cur & OWNER_MASK == 0
            && w.compare_exchange(cur, cur | self.me(), Acquire, Relaxed)
                .is_ok()
        {
            return true;
        }
        self.held_remove(lock);
        false
    }

    #[cold]
    fn lock_slow(&self, lock: u64, limit: Limit) -> Result<()> {
        let w = self.sh.w(lock);
        let start = Instant::now();
        let wait = match limit {
            Limit::Call => Wait::begin(self.timeout, self.timeout),
            Limit::Pace(d) => Wait::outside_call(d),
        };
        let mut spins = 0u32;
        let mut next_check = Duration::from_millis(10);
        loop {
            let cur = w.load(Relaxed);
            if cur & OWNER_MASK == 0 {
                // Once contended, take it with WAITERS set: others may still sleep on it.
                let want = if spins < 64 {
                    self.me()
                } else {
                    self.me() | WAITERS
                } | (cur & LOCK_HIGH);
                if w.compare_exchange(cur, want, Acquire, Relaxed).is_ok() {
                    return Ok(());
                }
                continue;
            }
            if (cur & OWNER_MASK) == self.me() {
                return Err(Error::InvalidArgument(
                    "lock already held by this thread (re-entrant call)".into(),
                ));
            }
            if spins < 64 {
                spins += 1;
                std::hint::spin_loop();
                continue;
            }
            // The holder's liveness every 10 ms, and the deadline before every wait: a
            // deadline shorter than a wait (zero: "only if free now", which the Python
            // binding tries first with the GIL held) gives up after the spins, where it
            // waited a first 10 ms.
            let waited = start.elapsed();
            let expired = wait.expired();
            if waited >= next_check || expired {
                next_check = waited + Duration::from_millis(10);
                let owner = (w.load(Relaxed) & OWNER_MASK).wrapping_sub(1);
                if owner != u64::MAX && !self.sh.txn_alive(owner) {
                    recover_txn(self.sh, owner)?;
                    // Retry at once if that freed the lock; else (another recoverer, alive
                    // but perhaps stopped, is at work) the timeout still applies.
                    if (w.load(Relaxed) & OWNER_MASK) != owner + 1 || !expired {
                        continue;
                    }
                }
                if expired {
                    return Err(wait.timeout());
                }
            }
            if cur & WAITERS == 0
                && w.compare_exchange(cur, cur | WAITERS, Relaxed, Relaxed)
                    .is_err()
            {
                continue;
            }
            spins += 1;
            wait_on(
                self.sh,
                lock,
                (cur | WAITERS) as u32,
                Duration::from_millis(5),
            );
        }
    }

    /// Releases a lock taken by [`Txn::lock`].
    pub fn unlock(&self, lock: u64) {
        let prev = self.sh.w(lock).fetch_and(LOCK_HIGH, Release);
        if prev & WAITERS != 0 {
            wake(self.sh, lock, 1);
        }
        self.held_remove(lock);
    }

    /// Writes and commits a redo list (step 2 of the protocol), with an intent kind.
    pub fn commit(&self, kind: u64, args: &[u64], redo: &Redo) {
        let sh = self.sh;
        for (i, a) in args.iter().enumerate() {
            sh.w(self.base + T_ARGS + 8 * i as u64).store(*a, Relaxed);
        }
        for (i, (off, val)) in redo.e[..redo.n].iter().enumerate() {
            sh.w(self.base + T_REDO + 16 * i as u64)
                .store(*off, Relaxed);
            sh.w(self.base + T_REDO + 16 * i as u64 + 8)
                .store(*val, Relaxed);
        }
        sh.w(self.base + T_REDO_N).store(redo.n as u64, Relaxed);
        // The high half counts this thread's write sections (`section`): kept.
        let k = sh.w(self.base + T_KIND);
        k.store(kind | (k.load(Relaxed) & !KIND_MASK), Relaxed);
        sh.w(self.base + T_INTENT).store(1, Release);
    }

    /// Applies the committed redo list (step 3).
    pub fn apply(&self, redo: &Redo) {
        self.apply_range(redo, 0, redo.n);
    }

    /// Applies entries `from..to` of the committed redo list (a crash test stops between
    /// two halves).
    #[inline]
    pub fn apply_range(&self, redo: &Redo, from: usize, to: usize) {
        if redo.masked {
            self.apply_masked(redo, from, to);
            return;
        }
        // Every other write: whole words (the loop the hot paths had before masks).
        for (off, val) in &redo.e[from..to] {
            self.sh.w(*off).store(*val, Release);
        }
    }

    /// [`Txn::apply_range`] of a list with masked entries (an in-place value).
    #[inline(never)]
    fn apply_masked(&self, redo: &Redo, from: usize, to: usize) {
        for (at, val) in &redo.e[from..to] {
            apply_entry(self.sh, *at, *val);
        }
    }

    /// Clears the intent once every change it names is in place.
    pub fn done(&self) {
        self.sh.w(self.base + T_INTENT).store(0, Release);
    }

    /// Updates an argument of the committed intent (split phases).
    pub fn set_arg(&self, i: u64, v: u64) {
        self.sh.w(self.base + T_ARGS + 8 * i).store(v, Release);
    }
}

#[cfg(not(shuttle))]
fn wait_on(sh: &Shared, lock: u64, expected: u32, t: Duration) {
    crate::sys::futex_wait(sh.r.futex_word(lock), expected, t);
}
#[cfg(not(shuttle))]
pub(super) fn wake(sh: &Shared, lock: u64, n: u32) {
    crate::sys::futex_wake(sh.r.futex_word(lock), n);
}
#[cfg(shuttle)]
fn wait_on(_: &Shared, _: u64, _: u32, _: Duration) {
    shuttle::thread::yield_now();
}
#[cfg(shuttle)]
pub(super) fn wake(_: &Shared, _: u64, _: u32) {}

#[cfg(all(test, not(shuttle)))]
mod tests {
    use super::*;

    /// A txn slot of a process that is not attached (so dead), holding `lock`, with the
    /// committed redo list `redo`.
    fn plant_dead_txn(sh: &Shared, t: u64, lock: u64, redo: &[(u64, u64)]) {
        let base = sh.g.txn_slot(t);
        sh.w(base + T_OWNER)
            .store(txn_owner(sh.g.n_proc - 1, 77), SeqCst);
        sh.w(lock).store(t + 1, SeqCst);
        sh.w(base + T_HELD).store(lock, SeqCst);
        for (i, (off, val)) in redo.iter().enumerate() {
            sh.w(base + T_REDO + 16 * i as u64).store(*off, SeqCst);
            sh.w(base + T_REDO + 16 * i as u64 + 8).store(*val, SeqCst);
        }
        sh.w(base + T_REDO_N).store(redo.len() as u64, SeqCst);
        sh.w(base + T_KIND).store(I_REDO, SeqCst);
        sh.w(base + T_INTENT).store(1, SeqCst);
    }

    /// Recovery applies a dead txn's whole redo list, the header words an allocation
    /// changes (file end, free list head, data and free byte totals, cleaner cursor)
    /// included: skipping them leaves a taken run on the free list and the totals wrong.
    #[test]
    fn recovery_applies_header_words_of_a_redo_list() {
        let d = tempfile::tempdir().unwrap();
        let s = crate::Store::open(d.path().join("r.shoal")).unwrap();
        let sh = &*s.sh;
        let t = 5;
        let data = sh.w(H_DATA_BYTES).load(SeqCst);
        let pend = sh.g.txn_slot(t) + T_DEAD_PEND; // a word outside the header
        plant_dead_txn(
            sh,
            t,
            H_ALLOC_LOCK,
            &[(H_DATA_BYTES, data + (1 << 16)), (H_CLEANED, 41), (pend, 9)],
        );
        assert!(!sh.txn_alive(t));
        recover_txn(sh, t).unwrap();
        assert_eq!(
            sh.w(H_ALLOC_LOCK).load(SeqCst),
            0,
            "the dead txn's lock is released"
        );
        assert_eq!(
            sh.w(sh.g.txn_slot(t) + T_INTENT).load(SeqCst),
            0,
            "the intent is cleared"
        );
        assert_eq!(sh.w(pend).load(SeqCst), 9);
        assert_eq!(
            sh.w(H_DATA_BYTES).load(SeqCst),
            data + (1 << 16),
            "header word of the redo list not applied"
        );
        assert_eq!(
            sh.w(H_CLEANED).load(SeqCst),
            41,
            "header word of the redo list not applied"
        );
    }
    /// A recoverer's verdict "txn t is dead" can go stale before it acts: meanwhile the
    /// slot may be recovered and freed by another process and claimed by a live thread.
    /// Recovery must then leave that live txn's locks and intent alone.
    #[test]
    fn recovery_leaves_a_live_txn_alone() {
        let d = tempfile::tempdir().unwrap();
        let s = crate::Store::open(d.path().join("r.shoal")).unwrap();
        let sh = &*s.sh;
        let t = 6;
        let pend = sh.g.txn_slot(t) + T_DEAD_PEND;
        plant_dead_txn(sh, t, H_ALLOC_LOCK, &[(pend, 9)]);
        // The slot now belongs to a live thread (of this process) with that lock and intent.
        sh.w(sh.g.txn_slot(t) + T_OWNER)
            .store(sh.owner_word.load(SeqCst), SeqCst);
        recover_txn(sh, t).unwrap();
        assert_eq!(
            sh.w(H_ALLOC_LOCK).load(SeqCst),
            t + 1,
            "a live txn's lock was released"
        );
        assert_eq!(
            sh.w(sh.g.txn_slot(t) + T_INTENT).load(SeqCst),
            1,
            "a live txn's intent was cleared"
        );
        assert_eq!(
            sh.w(pend).load(SeqCst),
            0,
            "a live txn's redo list was applied"
        );
        // Once really dead, it is recovered, and reclaiming frees its slot.
        sh.w(sh.g.txn_slot(t) + T_OWNER)
            .store(txn_owner(sh.g.n_proc - 1, 78), SeqCst);
        assert!(reclaim_dead(sh).unwrap() >= 1);
        assert_eq!(sh.w(H_ALLOC_LOCK).load(SeqCst), 0);
        assert_eq!(sh.w(pend).load(SeqCst), 9);
        assert_eq!(
            sh.w(sh.g.txn_slot(t) + T_OWNER).load(SeqCst),
            0,
            "the dead slot is freed"
        );
    }
    /// A waiter on a dead txn's lock whose recovery cannot proceed (another recoverer,
    /// alive but stopped, holds the claim) still gives up at its lock timeout.
    #[test]
    fn lock_wait_times_out_while_a_stopped_recoverer_holds_the_claim() {
        let d = tempfile::tempdir().unwrap();
        let s = crate::Store::open(d.path().join("r.shoal")).unwrap();
        let t = 7;
        plant_dead_txn(&s.sh, t, H_CATALOG_LOCK, &[]);
        // "Being recovered" by a live process (this one) that makes no progress.
        s.sh.w(s.sh.g.txn_slot(t) + T_RECOVERING)
            .store(s.sh.owner_word.load(SeqCst), SeqCst);
        let (tx_done, rx_done) = std::sync::mpsc::channel();
        let sh = s.sh.clone();
        std::thread::spawn(move || {
            let me = crate::txn::thread_txn(&sh).unwrap();
            let mut tx = Op::new(&sh, me);
            tx.timeout = Duration::from_millis(100);
            let _ = tx_done.send(tx.lock(H_CATALOG_LOCK));
        });
        match rx_done.recv_timeout(Duration::from_secs(20)) {
            Ok(Err(Error::Timeout(_))) => {}
            Ok(r) => panic!("expected a timeout, got {r:?}"),
            Err(_) => panic!("the lock wait ignored its 100 ms timeout (still waiting after 20 s)"),
        }
    }
}
