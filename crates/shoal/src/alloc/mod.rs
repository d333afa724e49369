//! Space: chunks, the free-run list, file growth, per-thread data chunks, large records.
//!
//! The file after the tables is a sequence of fixed-size chunks (256 KiB by default).
//! Free chunks form runs on one list guarded by the store's alloc lock. The file grows
//! only under that lock, and only after `fallocate` has made the new range real, so a
//! full filesystem is an `ENOSPC` error, never a `SIGBUS`; the new end is published in the
//! header after that, and no process ever remaps (the whole maximum size is reserved as
//! address space when the store is opened).
//!
//! Records are appended to the calling thread's own data chunk with no lock at all; the
//! alloc lock is taken once per chunk. A record too big for a chunk gets a run of its own.

pub(crate) mod record;

use crate::error::Result;
use crate::format::*;
use crate::txn::{Redo, Txn};
use std::sync::atomic::Ordering::*;

mod data;
mod dead;
mod growth;
mod large;
mod merge;
mod release;
mod runs;
mod upgrade;

pub(crate) use data::*;
pub(crate) use dead::*;
pub(crate) use growth::*;
pub(crate) use large::*;
pub(crate) use merge::*;
pub(crate) use release::*;
pub(crate) use runs::*;
pub(crate) use upgrade::*;

/// Who is asking for space. The cleaner needs a chunk to move a victim's live records
/// into before it can free the victim, so a store whose dead records fill it can always
/// be reclaimed only if a chunk is kept for the cleaner. Two limits can fill a store:
/// - its maximum size: ordinary callers leave the last chunk of room below it;
/// - the filesystem: ordinary growth keeps the **reserve**, one chunk allocated past the
///   file's end (`FALLOC_FL_KEEP_SIZE`: the filesystem holds it for the file, and the
///   file's size does not cover it), and fails with `NoSpace` rather than grow without
///   it. The cleaner grows into it, which needs no new space from the filesystem, and
///   [`restore_reserve`] takes it back after a compaction.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    Normal,
    Cleaner,
}

/// Runs `f` with the alloc lock held; `f` builds a redo list, which is then committed and
/// applied. Returns what `f` returned.
pub(crate) fn with_alloc_lock<T>(tx: &Txn, f: impl FnOnce(&mut Redo) -> Result<T>) -> Result<T> {
    tx.lock(H_ALLOC_LOCK)?;
    let mut redo = Redo::new();
    let r = f(&mut redo);
    if r.is_ok() && redo.n > 0 {
        tx.commit(I_REDO, &[], &redo);
        crate::rt::failpoint!("alloc.committed");
        tx.apply(&redo);
        crate::rt::failpoint!("alloc.applied");
        tx.done();
    }
    tx.unlock(H_ALLOC_LOCK);
    r
}

#[cfg(all(test, not(shuttle)))]
pub(crate) mod tests {
    use super::*;
    use crate::error::Error;
    use crate::shared::Shared;

    /// Whoever decided that a large run is dead (the cleaner, or a writer that has just
    /// replaced the record in it) frees it a little later, under the alloc lock. Meanwhile
    /// the run may have been freed by the other one and handed out again (the free list
    /// gives the run freed last first) for a record that is live now: that incarnation
    /// must not be freed.
    #[test]
    fn a_late_free_of_a_dead_large_run_spares_its_new_incarnation() {
        // In memory (/dev/shm): on disk, frees wait for a flush instead.
        let d = tempfile::tempdir_in("/dev/shm").unwrap();
        let opts = crate::Options {
            chunk_size: 1 << 16,
            ..crate::Options::default()
        };
        let s =
            crate::Store::open_with(d.path().join("a.shoal"), &opts, crate::OpenMode::CreateNew)
                .unwrap();
        let m = s.map("m").unwrap();
        let (va, vb) = (vec![1u8; 100_000], vec![2u8; 100_000]);
        m.put(b"a", &va).unwrap();
        let off = m.m.record_of(&s.sh, b"a").unwrap();
        let serial = large_serial(&s.sh, off);
        assert_ne!(serial, 0);
        m.remove(b"a").unwrap(); // a's run is freed
        m.put(b"b", &vb).unwrap(); // and handed out again for b
        assert_eq!(
            m.m.record_of(&s.sh, b"b"),
            Some(off),
            "precondition: the run is reused"
        );
        // The late free of "a's dead record".
        let tx = crate::txn::Op::new(&s.sh, crate::txn::thread_txn(&s.sh).unwrap());
        free_large(&tx, off, serial);
        assert_eq!(m.get(b"b").unwrap(), Some(vb.clone()));
        // Even naming the run's current serial, a free finds b live and keeps it.
        free_large(&tx, off, large_serial(&s.sh, off));
        assert_eq!(m.get(b"b").unwrap(), Some(vb));
        let r = s.check().unwrap();
        assert!(r.is_ok(), "{r}");
    }

    /// A store in /dev/shm with 64 KiB chunks and a map "m": (its directory, the store, the
    /// map, the chunk size).
    /// A new store in /dev/shm with 64 KiB chunks and its map "m" (also used by the
    /// cleaner's tests).
    pub(crate) fn store_with_64k_chunks() -> (tempfile::TempDir, crate::Store, crate::Map, u64) {
        let d = tempfile::tempdir_in("/dev/shm").unwrap();
        let cs = 1u64 << 16;
        let opts = crate::Options {
            chunk_size: cs,
            ..crate::Options::default()
        };
        let s =
            crate::Store::open_with(d.path().join("a.shoal"), &opts, crate::OpenMode::CreateNew)
                .unwrap();
        let m = s.map("m").unwrap();
        (d, s, m, cs)
    }

    /// Puts keys "a" and "b" with records of `chunks` chunks each, side by side at the end
    /// of the file; returns their runs.
    fn adjacent_large_records(s: &crate::Store, m: &crate::Map, chunks: u64) -> (u64, u64) {
        let (sh, cs) = (&*s.sh, s.sh.g.chunk_size());
        let v = vec![1u8; ((chunks - 1) * cs + cs / 2) as usize];
        m.put(b"a", &v).unwrap();
        m.put(b"b", &v).unwrap();
        let ra = m.m.record_of(sh, b"a").unwrap() - CHUNK_HDR;
        let rb = m.m.record_of(sh, b"b").unwrap() - CHUNK_HDR;
        assert_eq!(rb, ra + chunks * cs, "precondition: adjacent runs");
        (ra, rb)
    }

    /// Two adjacent free runs are merged for a record longer than either. A late free
    /// aimed at the second run's old start (now inside the new record, whose bytes there
    /// repeat a large run's header and a dead record's) frees nothing: it names the old
    /// run's serial, which those bytes do not hold. The cleaner's cursor, left at the old
    /// start, is moved back to the merged run's start.
    #[test]
    fn a_late_free_into_a_merged_run_frees_nothing() {
        let (_d, s, m, cs) = store_with_64k_chunks();
        let sh = &*s.sh;
        // Two records of two chunks each, one after the other at the end of the file.
        let (ra, rb) = adjacent_large_records(&s, &m, 2);
        let serial_b = large_serial(sh, rb + CHUNK_HDR);
        assert_ne!(serial_b, 0);
        m.remove(b"a").unwrap();
        m.remove(b"b").unwrap();
        sh.w(H_CLEAN_SCAN).store(rb, Release);
        // A record of four chunks: no free run is that long until the two merge. Its
        // bytes at b's old header forge a large run's header (without b's serial), and
        // after it a record of a key nobody holds (so the run would read as dead).
        let key = b"c";
        let hl = record_header(m.m.id, key.len() as u64, 3 * cs, sh.g.short_records).len() as u64;
        let mut v = vec![2u8; 3 * cs as usize];
        let at = (rb - (ra + CHUNK_HDR + hl + key.len() as u64)) as usize;
        v[at..at + 8].copy_from_slice(&CK_LARGE.to_le_bytes());
        v[at + 8..at + 16].copy_from_slice(&2u64.to_le_bytes());
        let forged = record_header(m.m.id, 2, 10, sh.g.short_records);
        let rec = at + CHUNK_HDR as usize;
        v[rec..rec + forged.len()].copy_from_slice(&forged);
        v[rec + forged.len()..rec + forged.len() + 2].copy_from_slice(b"zz");
        let before = s.stats().unwrap().file_size;
        // The cleaner is kept out: the new run's unused end counts as dead space, so the
        // put would end with a cleaning step, whose walk moves the cursor on (to another
        // run start) and hides where the merge left it. Another thread holds every lane
        // (this one's txn has room for the put's locks only).
        let (hold_tx, hold_rx) = std::sync::mpsc::channel::<()>();
        let (held_tx, held_rx) = std::sync::mpsc::channel::<()>();
        let holder = {
            let sh = s.sh.clone();
            std::thread::spawn(move || {
                let tx = crate::txn::Op::new(&sh, crate::txn::thread_txn(&sh).unwrap());
                for i in 0..sh.g.clean_lanes {
                    assert!(tx.try_lock(lane(i).0));
                }
                held_tx.send(()).unwrap();
                let _ = hold_rx.recv();
                for i in 0..sh.g.clean_lanes {
                    tx.unlock(lane(i).0);
                }
            })
        };
        held_rx.recv().unwrap();
        m.put(key, &v).unwrap();
        hold_tx.send(()).unwrap();
        holder.join().unwrap();
        let tx = crate::txn::Op::new(sh, crate::txn::thread_txn(&s.sh).unwrap());
        assert_eq!(
            s.stats().unwrap().file_size,
            before,
            "the merged runs were not reused"
        );
        assert_eq!(m.m.record_of(sh, key), Some(ra + CHUNK_HDR));
        assert_eq!(
            sh.w(H_CLEAN_SCAN).load(Acquire),
            ra,
            "the cursor was left inside"
        );
        free_large(&tx, rb + CHUNK_HDR, serial_b);
        // Without the serial, the late free took the forged header and record for a dead
        // run and freed the second half of c's.
        let r = s.check().unwrap();
        assert!(r.is_ok(), "{r}");
        assert!(m.get(key).unwrap() == Some(v), "c's value changed");
    }

    /// Bytes of storage the file holds (tmpfs: memory), from its block count.
    fn allocated(sh: &Shared) -> u64 {
        use std::os::unix::fs::MetadataExt;
        sh.file.metadata().unwrap().blocks() * 512
    }

    /// Pages are released a slice per hold of the alloc lock, so a marked run may be taken
    /// between two holds: then nothing more of it is released (its start is no longer on
    /// the free list), and the record written there keeps its bytes. A run still free is
    /// released whole, slice by slice.
    #[test]
    fn a_marked_run_taken_between_slices_keeps_its_pages() {
        let (_d, s, m, cs) = store_with_64k_chunks();
        let sh = &*s.sh;
        let (ra, rb) = adjacent_large_records(&s, &m, 3);
        m.remove(b"a").unwrap();
        let tx = crate::txn::Op::new(sh, crate::txn::thread_txn(&s.sh).unwrap());
        let mark = || {
            tx.lock(H_ALLOC_LOCK).unwrap();
            let marked = mark_released(&tx).unwrap();
            tx.unlock(H_ALLOC_LOCK);
            marked
        };
        let marked = mark();
        assert!(marked.contains(&(ra, 3)), "{marked:?}");
        // Between marking and releasing: a record of three chunks takes a's run.
        let v = vec![5u8; (2 * cs + cs / 2) as usize];
        m.put(b"c", &v).unwrap();
        assert_eq!(m.m.record_of(sh, b"c"), Some(ra + CHUNK_HDR));
        assert_eq!(release_run(&tx, ra, 3).unwrap(), Some(0));
        assert!(m.get(b"c").unwrap() == Some(v), "c's bytes were released");
        // b's run, freed and still free: released whole.
        m.remove(b"b").unwrap();
        let marked = mark();
        assert!(marked.contains(&(rb, 3)), "{marked:?}");
        let before = allocated(sh);
        assert_eq!(release_run(&tx, rb, 3).unwrap(), Some(3 * cs - HEADER_PAGE));
        assert!(allocated(sh) + 2 * cs <= before, "nothing released");
        let r = s.check().unwrap();
        assert!(r.is_ok(), "{r}");
    }

    /// Free runs released to the filesystem are holes; taking one (merged into the run
    /// before it, which then carries the mark, and split, whose rest keeps it too)
    /// allocates what is taken before anything is written there.
    #[test]
    fn a_released_run_is_allocated_again_before_it_is_used() {
        let (_d, s, m, cs) = store_with_64k_chunks();
        let sh = &*s.sh;
        let (ra, rb) = adjacent_large_records(&s, &m, 3);
        // b's run is released while a is live; then a's run is freed, not released.
        m.remove(b"b").unwrap();
        let tx = crate::txn::Op::new(sh, crate::txn::thread_txn(&s.sh).unwrap());
        let before = allocated(sh);
        let released = release_free(&tx).unwrap();
        assert!(released >= 3 * cs - HEADER_PAGE, "released {released}");
        assert!(
            allocated(sh) + released <= before,
            "the file still holds {} of {before} bytes after releasing {released}",
            allocated(sh)
        );
        assert_eq!(sh.w(rb + K_USED).load(Acquire), RELEASED);
        m.remove(b"a").unwrap();
        assert_ne!(sh.w(ra + K_USED).load(Acquire), RELEASED);
        // Five chunks: only the two runs merged hold them; the sixth chunk stays free.
        let held = allocated(sh);
        let taken: Result<()> = with_alloc_lock(&tx, |redo| {
            let r = take_run(&tx, 5, redo, Purpose::Normal)?;
            // Before the caller writes anything: the pages taken are there again (a's
            // three chunks never left; b's first two but its header page did), with the
            // page where the rest's header goes.
            assert!(
                allocated(sh) >= held + 2 * cs,
                "taken before its pages were allocated: {} -> {}",
                held,
                allocated(sh)
            );
            assert_eq!(r, ra, "the merged runs were not taken");
            assert!(
                redo.e[..redo.n].contains(&(r + 5 * cs + K_USED, RELEASED)),
                "the rest lost its mark"
            );
            // Not committed: only the merge stays.
            Err(Error::InvalidArgument("rolled back".into()))
        });
        assert!(taken.is_err());
        assert_eq!(
            sh.w(ra + K_USED).load(Acquire),
            RELEASED,
            "the merged run lost its mark"
        );
        let r = s.check().unwrap();
        assert!(r.is_ok(), "{r}");
        // And for real: a record of five chunks takes the merged run.
        let five = vec![2u8; (4 * cs + cs / 2) as usize];
        m.put(b"c", &five).unwrap();
        assert_eq!(m.m.record_of(sh, b"c"), Some(ra + CHUNK_HDR));
        assert!(m.get(b"c").unwrap() == Some(five));
        let r = s.check().unwrap();
        assert!(r.is_ok(), "{r}");
    }
}
