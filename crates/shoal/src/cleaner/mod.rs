//! The cleaner: reclaims the space of overwritten and deleted records, a little at a time.
//!
//! Records are appended, never updated in place, so every overwrite or delete leaves dead
//! bytes in some sealed data chunk. When dead bytes pass a seventh of the data bytes (a
//! tenth near the store's maximum size; see `worth_cleaning`), the writes that consume
//! space pay for bounded cleaning steps (at most `STEP_RECORDS` records, at most
//! `SCAN_CHUNKS` chunk headers) after its own work: the step walks the current victim
//! chunk, moves each record that the index still references to the cleaner's own data
//! chunk (through the ordinary locked write path, which checks under the segment lock that
//! the slot still points at the old copy), and when the victim is empty frees it.
//! Victims are taken round robin over the file, which in steady overwrite is oldest-first;
//! dead large-record runs met on the way are freed at once.
//!
//! Liveness is decided only by the index, so a record some crashed writer appended and
//! never published is simply not moved. Up to 8 threads clean at once, each in its own
//! lane (`step_paced`; format version 9), whose victim and position live in the store
//! header under the lane's lock; a cleaner killed mid-step leaves at most one record moved
//! twice (the second copy is dead and cleaned later).

use crate::error::Result;
use crate::format::*;
use crate::txn::Txn;
use std::sync::atomic::Ordering::*;

mod accounting;
mod pacing;
mod step;

pub(crate) use accounting::*;
pub(crate) use pacing::*;
pub(crate) use step::*;

const STEP_RECORDS: usize = 64;
/// How long the cleaner waits for one liveness lookup (see `step_locked`).
const LOOKUP_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(20);
const SCAN_CHUNKS: usize = 64;
/// Reclaims dead space until less than one chunk of it is left, or `max_steps`
/// steps ran. Returns the number of chunks freed.
///
/// At most one pass over the file, too: slack that no cleaning removes (chunk tails too
/// short for the next record, the unused ends of active chunks and of large-record runs)
/// can exceed a chunk, and moving the same live records round and round would never
/// bring it below (this looped forever). A finished victim counts one chunk of the pass,
/// a step that found no victim `SCAN_CHUNKS`.
pub(crate) fn compact(tx: &Txn, max_steps: usize) -> Result<u64> {
    let sh = tx.sh;
    let before = sh.w(H_CLEANED).load(Acquire);
    let mut budget =
        (sh.file_end().saturating_sub(sh.g.chunks_off) >> sh.g.chunk_shift) + SCAN_CHUNKS as u64;
    for _ in 0..max_steps {
        let dead = reclaimable_dead(sh);
        sh.w(H_DEAD_HINT).store(dead, Relaxed);
        if dead < sh.g.chunk_size() || budget == 0 {
            break;
        }
        // A free lane, else this thread's own, waited for.
        let own = tx.idx % sh.g.clean_lanes;
        let i = match try_lock_lane(tx, own) {
            Some(i) => i,
            None => {
                tx.lock(lane(own).0)?;
                own
            }
        };
        let (victim0, cleaned0) = (sh.w(lane(i).1).load(Acquire), sh.w(H_CLEANED).load(Acquire));
        let r = step_locked(tx, i, true);
        tx.unlock(lane(i).0);
        if !r? {
            break;
        }
        // (Other lanes' frees count too: the pass only ends sooner.)
        let cleaned = sh.w(H_CLEANED).load(Acquire).wrapping_sub(cleaned0);
        let idle = victim0 == 0 && cleaned == 0 && sh.w(lane(i).1).load(Acquire) == 0;
        budget = budget.saturating_sub(if idle { SCAN_CHUNKS as u64 } else { cleaned });
    }
    let freed = sh.w(H_CLEANED).load(Acquire) - before;
    if freed > 0 {
        // On a full filesystem the steps grew into the reserve: take it back now, while
        // the chunks just freed can pay for it.
        crate::alloc::restore_reserve(tx)?;
    }
    Ok(freed)
}

#[cfg(all(test, not(shuttle)))]
mod tests {
    use super::*;
    use crate::alloc::record::read_record_header;

    /// A dead-bytes hint that lost the reports of dead data (here: zeroed) is set right
    /// by the exact refresh every few MiB a thread appends, and the cleaner starts, though
    /// the writes that follow (inserts) report no dead bytes of their own.
    #[test]
    fn a_hint_that_lost_its_reports_is_refreshed_and_the_cleaner_starts() {
        let d = tempfile::tempdir_in("/dev/shm").unwrap();
        let s = crate::Store::open(d.path().join("a.shoal")).unwrap();
        let sh = &*s.sh;
        let m = s.map("m").unwrap();
        let v = [1u8; 1000];
        for k in 0..4_000u32 {
            m.put(&k.to_le_bytes(), &v).unwrap();
        }
        for k in 0..4_000u32 {
            m.remove(&k.to_le_bytes()).unwrap();
        }
        // The reports are lost: the hint and every thread's unflushed batch.
        sh.w(H_DEAD_HINT).store(0, Relaxed);
        for t in 0..sh.g.n_txn {
            sh.w(sh.g.txn_slot(t) + T_DEAD_PEND).store(0, Relaxed);
        }
        assert!(reclaimable_dead(sh) > 3 << 20, "precondition: dead data");
        for k in 10_000..16_000u32 {
            m.put(&k.to_le_bytes(), &v).unwrap();
        }
        let st = s.stats().unwrap();
        assert!(st.chunks_cleaned > 0, "the cleaner never started: {st:?}");
    }

    /// A value written in place between the cleaner's copy of its record and the move
    /// (`MapRef::relocate`) is not lost: the move refreshes the copy first, every piece of
    /// it (records are compared 64 bytes at a time; this one is about three pieces).
    /// `threads::in_place_overwrites_survive_the_cleaner_moving_their_records` races the
    /// same thing; this is the interleaving it looks for, made to happen.
    #[test]
    fn a_move_publishes_a_value_written_in_place_after_the_copy() {
        let d = tempfile::tempdir_in("/dev/shm").unwrap();
        let s = crate::Store::open(d.path().join("a.shoal")).unwrap();
        let m = s.map("m").unwrap();
        let sh = &*s.sh;
        let (v0, v1): (Vec<u8>, Vec<u8>) = ((0..130).collect(), (100..230).collect());
        m.put(b"key", &v0).unwrap();
        let old = m.m.record_of(sh, b"key").unwrap();
        let (_, k, v, hl) = read_record_header(sh, old, sh.file_end()).unwrap();
        let len = hl + k + v + sh.g.trailer;
        assert!(
            len > 128,
            "precondition: a record of three pieces, not {len} bytes"
        );
        let mut copy = vec![0u8; len as usize];
        sh.r.read_bytes(old, &mut copy);
        let tx = crate::txn::Op::new(&s.sh, crate::txn::thread_txn(&s.sh).unwrap());
        let new = crate::alloc::append(&tx, &[&copy], crate::alloc::Purpose::Cleaner).unwrap();
        m.put(b"key", &v1).unwrap();
        assert_eq!(
            m.m.record_of(sh, b"key"),
            Some(old),
            "precondition: written in place"
        );
        assert!(m.m.relocate(&tx, b"key", old, (new, len)).unwrap());
        assert_eq!(m.m.record_of(sh, b"key"), Some(new));
        assert_eq!(m.get(b"key").unwrap(), Some(v1));
        let r = s.check().unwrap();
        assert!(r.is_ok(), "{r}");
    }

    /// A writer waits for the cleaner lock once dead space is high (`step_paced`), but a
    /// holder that is alive and not running (stopped) costs it one bounded wait, not one
    /// per write: without the give-up, every write here waited 200 ms.
    #[test]
    fn a_stopped_cleaner_costs_writers_one_wait_not_one_per_write() {
        let (_d, s, m, _) = crate::alloc::tests::store_with_64k_chunks();
        // The "stopped" cleaners: another thread of this (live) process holds every lane.
        let (hold_tx, hold_rx) = std::sync::mpsc::channel::<()>();
        let (held_tx, held_rx) = std::sync::mpsc::channel::<()>();
        let sh = s.sh.clone();
        let holder = std::thread::spawn(move || {
            let tx = crate::txn::Op::new(&sh, crate::txn::thread_txn(&sh).unwrap());
            for i in 0..sh.g.clean_lanes {
                tx.lock(lane(i).0).unwrap();
            }
            held_tx.send(()).unwrap();
            let _ = hold_rx.recv();
            for i in 0..sh.g.clean_lanes {
                tx.unlock(lane(i).0);
            }
        });
        held_rx.recv().unwrap();
        // Overwrites with changing lengths: dead space soon passes the threshold, and
        // from then on steps fall due and find the cleaner behind. Checked as it goes, so
        // that a wait per write fails in seconds, not after an hour.
        let v = [5u8; 300];
        let start = std::time::Instant::now();
        for i in 0..10_000u32 {
            m.put(&(i % 2_000).to_le_bytes(), &v[..100 + (i as usize % 200)])
                .unwrap();
            let took = start.elapsed();
            assert!(
                took < std::time::Duration::from_secs(20),
                "{i} writes took {took:?} while the cleaner lock's holder was stopped"
            );
        }
        let sh = &*s.sh;
        let data = sh.w(H_DATA_BYTES).load(Relaxed);
        assert!(
            reclaimable_dead(sh) * 7 > data * 9 / 8 && data >= 4 * sh.g.chunk_size(),
            "precondition: the cleaner is behind (dead {} of {data} data bytes)",
            reclaimable_dead(sh)
        );
        hold_tx.send(()).unwrap();
        holder.join().unwrap();
        // Free again: the next due step runs, and cleaning catches up.
        for i in 0..40_000u32 {
            m.put(&(i % 2_000).to_le_bytes(), &v[..100 + (i as usize % 200)])
                .unwrap();
        }
        let dead = reclaimable_dead(sh);
        let data = sh.w(H_DATA_BYTES).load(Relaxed);
        // A seventh is the threshold; a store this small swings by a chunk above it.
        assert!(
            dead * 4 < data,
            "the cleaner did not catch up: dead {dead} of {data}"
        );
        let r = s.check().unwrap();
        assert!(r.is_ok(), "{r}");
    }

    /// A victim half cleaned by a lane that nobody takes any more (its threads stopped
    /// writing) is finished by whoever cleans next: here `compact`, from a thread whose
    /// own lane is another.
    #[test]
    fn a_victim_left_on_an_idle_lane_is_finished() {
        let (_d, s, m, _) = crate::alloc::tests::store_with_64k_chunks();
        let sh = &*s.sh;
        let v = [9u8; 200];
        // About twenty chunks of records, then all but every tenth key removed: sealed
        // chunks, mostly dead.
        for i in 0..5_000u32 {
            m.put(&i.to_le_bytes(), &v).unwrap();
        }
        for i in (0..5_000u32).filter(|i| i % 10 != 0) {
            m.remove(&i.to_le_bytes()).unwrap();
        }
        let tx = crate::txn::Op::new(&s.sh, crate::txn::thread_txn(&s.sh).unwrap());
        let own = tx.idx % sh.g.clean_lanes;
        let idle = (own + 3) % sh.g.clean_lanes;
        assert_ne!(own, idle, "precondition: eight lanes");
        // The idle lane's victim, as a step left it: the first sealed chunk.
        let mut c = sh.g.chunks_off;
        while sh.w(c + K_KIND).load(Acquire) != CK_SEALED {
            c += sh.w(c + K_RUN).load(Acquire).max(1) * sh.g.chunk_size();
        }
        let (_, victim_w, pos_w) = lane(idle);
        sh.w(victim_w).store(c, Release);
        sh.w(pos_w).store(c + CHUNK_HDR, Release);
        s.compact().unwrap();
        assert_eq!(
            sh.w(victim_w).load(Acquire),
            0,
            "the idle lane's victim was left half cleaned"
        );
        assert_ne!(
            sh.w(c + K_KIND).load(Acquire),
            CK_SEALED,
            "{c:#x} not freed"
        );
        for i in (0..5_000u32).step_by(10) {
            assert_eq!(m.get(&i.to_le_bytes()).unwrap().as_deref(), Some(&v[..]));
        }
        let r = s.check().unwrap();
        assert!(r.is_ok(), "{r}");
    }
}
