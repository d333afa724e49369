//! Cleaning paid for by the writes that consume space: credits, lanes, back-pressure.

use super::*;
use crate::txn::Txn;

/// Cleaning credit (bytes of records a step may examine) one appended byte earns, while
/// dead space is above the threshold, and above 9/8 of it (the cleaner is behind).
pub(crate) const CREDIT_PER_BYTE: u64 = 16;
pub(crate) const CREDIT_PER_BYTE_HIGH: u64 = 64;
/// Credit a step costs: about what its `STEP_RECORDS` records of ordinary size span.
pub(crate) const STEP_CREDIT: u64 = 4096;

thread_local! {
    /// This thread's cleaning credit (see `maybe_clean`). Per thread, not shared: a
    /// pacing hint, lost harmlessly when the thread ends.
    pub(crate) static CREDIT: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// Bytes this thread appended since it last refreshed the dead-bytes hint.
    pub(crate) static APPENDED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// This thread's last wait for the cleaner lock timed out (its holder is alive but
    /// not running): no more waits until it finds the lock free (see `step_paced`).
    pub(crate) static PACE_GAVE_UP: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// How many bytes a thread appends between two exact refreshes of the dead-bytes hint
/// (`reclaimable_dead`: a load per txn slot of every live map, a few µs for one map).
pub(crate) const REFRESH_BYTES: u64 = 4 << 20;

/// After a write that appended `appended` bytes: a cleaning step when the thread has
/// earned one. Cleaning is charged to the writes that consume space, in proportion to the
/// space they consume: a remove appends nothing and cleans nothing (reclaiming space
/// nobody is asking for is wasted work: a step costs an index lookup per record it
/// examines), and an overwrite pays for a step every few writes instead of one each
/// (which made overwrites and removes ~10x the cost of an insert). Once dead space is
/// past 9/8 of the threshold, writes pay four times as much, so the cleaner catches up
/// (this was past half the data, and dead space overshot the threshold by 3 points while
/// the first generation of records was cleaned).
/// Never fails the caller's write.
#[inline]
pub(crate) fn maybe_clean(tx: &Txn, appended: u64) {
    let sh = tx.sh;
    if appended == 0 {
        return;
    }
    let mut dead = sh.w(H_DEAD_HINT).load(Relaxed);
    // The hint only grows by what writers report, and a report can go missing (a process
    // killed with its batch unflushed, dead bytes nobody counted): every REFRESH_BYTES a
    // thread appends, it is set to the exact figure. Without that, a hint stuck below the
    // threshold kept the cleaner from ever starting (and the exact figure is computed only
    // by a cleaning step).
    let refresh = APPENDED.with(|a| {
        let v = a.get().saturating_add(appended);
        a.set(if v >= REFRESH_BYTES { 0 } else { v });
        v >= REFRESH_BYTES
    });
    if refresh {
        dead = reclaimable_dead(sh);
        sh.w(H_DEAD_HINT).store(dead, Relaxed);
    }
    if !worth_cleaning(sh, dead) {
        return;
    }
    // Behind (dead space past 9/8 of the threshold): writes pay four times as much.
    let data = sh.w(H_DATA_BYTES).load(Relaxed);
    let high = dead.saturating_mul(dead_divisor(sh, data) * 8) > data.saturating_mul(9);
    let rate = if high {
        CREDIT_PER_BYTE_HIGH
    } else {
        CREDIT_PER_BYTE
    };
    let due = CREDIT.with(|c| {
        let v = c.get().saturating_add(appended.saturating_mul(rate));
        if v >= STEP_CREDIT {
            c.set((v - STEP_CREDIT).min(4 * STEP_CREDIT));
            true
        } else {
            c.set(v);
            false
        }
    });
    if due && !step_paced(tx, high) {
        // Another thread is cleaning: keep the credit for the next write.
        CREDIT.with(|c| c.set(c.get().saturating_add(STEP_CREDIT).min(4 * STEP_CREDIT)));
    }
}

/// The step a write has earned, on the first cleaning lane this thread finds free. Returns
/// false if every lane was busy and the step did not run.
///
/// A store of version 9 has [`CLEAN_LANES`] lanes, each a cleaner of its own with its own
/// victim, so that cleaning scales with the writers that pay for it. With one lane (one
/// thread cleaning at a time, as in stores of version 8 and before), writers on every core
/// made dead space faster than it was reclaimed: six threads overwriting on two cores,
/// each skipping its step while another held the lock, left dead space at 4-8x the live
/// data and the file growing without bound (`cargo run --release -p shoal --example
/// fragmentation`: 60-114 MB of file for 8 MB of live data). A writer starts at a lane of
/// its own (its txn slot's), so that writers rarely meet on one.
///
/// When every lane is busy and the cleaner is behind (`high`), the writer waits for its
/// own lane: writes then go no faster than the lanes reclaim, the back-pressure every
/// log-structured store applies. Two limits keep the wait from hurting more than it helps:
/// - not while the writer holds a lock of its own (a write made from a callback that runs
///   under a segment lock): a cleaner takes segment locks under its lane lock, so that
///   order could deadlock. It skips;
/// - at most `PACE_WAIT`. A holder that dies is recovered within it (its liveness is
///   checked every 10 ms); one that is stopped (SIGSTOP, a debugger) is not, and then
///   this thread stops waiting until it has found a lane free again, so that a stopped
///   process costs each writer one wait, not one per write.
///
/// The wait ignores the handle's lock timeout (`Map::with_timeout`), zero included: the
/// Python binding runs each call first on a zero-timeout handle with the GIL held, and
/// honouring it would exempt every Python writer from pacing, so that many Python
/// processes overwriting at once would pile up dead space again. The cost: a Python thread
/// may hold the GIL while another thread's step finishes (tens of µs), or once for
/// `PACE_WAIT` behind a stopped holder. A cleaner never waits for the GIL, so this cannot
/// deadlock.
pub(crate) fn step_paced(tx: &Txn, high: bool) -> bool {
    let own = tx.idx % tx.sh.g.clean_lanes;
    let locked = if let Some(i) = try_lock_lane(tx, own) {
        PACE_GAVE_UP.with(|g| g.set(false));
        Some(i)
    } else if high && !tx.holds_locks() && !PACE_GAVE_UP.with(|g| g.get()) {
        let ok = tx.lock_paced(lane(own).0, PACE_WAIT).is_ok();
        PACE_GAVE_UP.with(|g| g.set(!ok));
        ok.then_some(own)
    } else {
        None
    };
    if let Some(i) = locked {
        // The step is housekeeping for everyone: behind a stopped process it gives up
        // within milliseconds instead of holding this write up for its timeout.
        let _ = step_locked(&tx.housekeeping(), i, false);
        tx.unlock(lane(i).0);
    }
    locked.is_some()
}

/// Takes the lock of the first free cleaning lane, starting at lane `first`, without
/// waiting. Returns the lane.
///
/// Lanes with a victim half cleaned come first: a lane is mostly used by the threads whose
/// slot index leads to it, and once they stop writing, its victim would wait for them,
/// its dead space out of reach of every other cleaner and of `compact`.
pub(crate) fn try_lock_lane(tx: &Txn, first: u64) -> Option<u64> {
    let sh = tx.sh;
    let n = sh.g.clean_lanes;
    let order = move |j: u64| (first + j) % n;
    let busy = (0..n)
        .map(order)
        .filter(|&i| sh.w(lane(i).1).load(Relaxed) != 0);
    busy.chain((0..n).map(order))
        .find(|&i| tx.try_lock(lane(i).0))
}

/// How long a writer waits for the cleaner lock in [`step_paced`]: far longer than a step
/// (tens of µs, a few ms when its thread is preempted), long enough to recover a dead
/// holder (liveness is checked every 10 ms).
pub(crate) const PACE_WAIT: std::time::Duration = std::time::Duration::from_millis(200);
