//! One bounded cleaning step: a victim's live records moved, the victim freed.

use super::*;
use crate::alloc::record::{read_record_header, read_record_header_in};
use crate::error::{Error, Result};
use crate::kinds::AnyKind;
use crate::object::Kind;
use crate::shared::Shared;
use crate::txn::{Redo, Txn};

thread_local! {
    /// The buffer of a step's moved records, kept from one step to the next.
    static STEP_BYTES: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// This thread's step buffer, given back (emptied) when dropped. A buffer of hundreds of
/// KiB allocated and freed at every step made the allocator grow and trim its heap each
/// time, and the pages it got back were fresh: zeroed, and on a virtual machine whose host
/// takes freed memory back, sometimes milliseconds each to fault in, inside a writer's put.
struct StepBytes(Vec<u8>);

impl StepBytes {
    /// Past this the buffer is freed after the step, not kept (a step of rare large
    /// records must not pin its size for good).
    const KEEP: usize = 4 << 20;

    fn take() -> StepBytes {
        // A nested step (none today) would find it taken and start empty.
        StepBytes(STEP_BYTES.try_with(|b| b.take()).unwrap_or_default())
    }
}

impl Drop for StepBytes {
    fn drop(&mut self) {
        let mut v = std::mem::take(&mut self.0);
        if v.capacity() <= Self::KEEP {
            v.clear();
            let _ = STEP_BYTES.try_with(|b| b.set(v));
        }
    }
}

impl std::ops::Deref for StepBytes {
    type Target = Vec<u8>;
    fn deref(&self) -> &Vec<u8> {
        &self.0
    }
}

impl std::ops::DerefMut for StepBytes {
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        &mut self.0
    }
}

/// One bounded step of cleaning lane `ln`, whose lock the caller holds. (A compaction
/// waits for a lane: it gave up when another thread held the only one, and a compaction
/// among busy writers, whose paced steps held it much of the time, reclaimed next to
/// nothing.) Returns false if there was nothing to do.
pub(crate) fn step_locked(tx: &Txn, ln: u64, force: bool) -> Result<bool> {
    let sh = tx.sh;
    let cs = sh.g.chunk_size();
    let (_, victim_w, pos_w) = lane(ln);
    let mut victim = sh.w(victim_w).load(Acquire);
    let mut pos = sh.w(pos_w).load(Acquire);
    // The cursor is read from the file: a victim that is not a sealed chunk of it (a
    // corrupt header) is forgotten, and a position outside the victim restarts it.
    let fend = sh.file_end();
    if victim != 0
        && (victim < sh.g.chunks_off
            || victim >= fend
            || (victim - sh.g.chunks_off) % cs != 0
            || sh.w(victim + K_KIND).load(Acquire) != CK_SEALED)
    {
        victim = 0;
    }
    if victim != 0 && !(victim + CHUNK_HDR..=victim + cs).contains(&pos) {
        pos = victim + CHUNK_HDR;
    }
    if victim == 0 {
        // Start of a new victim: refresh the hint with the exact figure.
        let dead = reclaimable_dead(sh);
        sh.w(H_DEAD_HINT).store(dead, Relaxed);
        if !force && !worth_cleaning(sh, dead) {
            return Ok(false);
        }
        // The walk reads chunk headers at run starts, so it runs under the alloc lock:
        // merging free runs (`alloc::merge`, `coalesce`) turns run starts into inner chunks,
        // and moves the cursor back when it would point into one. The new cursor is
        // stored in the same locked section for the same reason.
        let mut large: Vec<(u64, u64)> = Vec::new(); // (run, serial): maybe dead
        let chosen = crate::alloc::with_alloc_lock(tx, |redo| {
            let end = sh.file_end();
            let mut c = sh.w(H_CLEAN_SCAN).load(Acquire);
            if c < sh.g.chunks_off || c >= end || (c - sh.g.chunks_off) % cs != 0 {
                c = sh.g.chunks_off;
            }
            // Greedy over a window: of the next SCAN_CHUNKS chunks (round robin over the
            // file), the sealed one with the most dead bytes by its `K_DEAD` hint, so that
            // a step moves as few live records as it can per byte reclaimed (round robin
            // alone moved ~9 live records per dead one under uniform overwrites).
            let mut best: Option<(u64, u64, u64)> = None; // (dead, chunk, next)

            // Other lanes' victims are theirs: two lanes cleaning one chunk would both
            // free it. Every lane sets its victim under this lock, so none is missed (one
            // cleared since without it is only skipped once more).
            let mut taken = [0u64; CLEAN_LANES as usize];
            for (i, t) in taken.iter_mut().enumerate().take(sh.g.clean_lanes as usize) {
                if i as u64 != ln {
                    *t = sh.w(lane(i as u64).1).load(Acquire);
                }
            }
            for _ in 0..SCAN_CHUNKS {
                let kind = sh.w(c + K_KIND).load(Acquire);
                let run = sh.w(c + K_RUN).load(Acquire).max(1);
                // `run` comes from the file: compare without overflowing.
                let next = if run >= (end - c) / cs {
                    sh.g.chunks_off
                } else {
                    c + run * cs
                };
                match kind {
                    CK_SEALED if !taken.contains(&c) => {
                        let dead = sh.w(c + K_DEAD).load(Relaxed);
                        if best.is_none_or(|(d, ..)| dead > d) {
                            best = Some((dead, c, next));
                        }
                    }
                    CK_LARGE => large.push((c, sh.w(c + K_SERIAL).load(Acquire))),
                    _ => {}
                }
                c = next;
                if c == sh.g.chunks_off {
                    break; // one lap at most per window
                }
            }
            let (scan, victim) = match best {
                Some((_, v, next)) => (next, v),
                None => (c, 0),
            };
            redo.push(H_CLEAN_SCAN, scan);
            redo.push(victim_w, victim);
            redo.push(pos_w, if victim == 0 { 0 } else { victim + CHUNK_HDR });
            Ok(victim)
        })?;
        // Dead large runs met on the way are freed now, each checked again (by its
        // serial, under the alloc lock) before it is.
        for (run, serial) in large {
            free_large_if_dead(tx, run, serial)?;
        }
        if chosen == 0 {
            return Ok(true);
        }
        victim = chosen;
        pos = victim + CHUNK_HDR;
        crate::rt::failpoint!("clean.victim");
    }
    let used = sh.w(victim + K_USED).load(Acquire).min(victim + cs);
    // Copy this step's live records first, make the copies durable (on disk: one msync
    // for the step, not one per record), then repoint their slots (`publish_moves`).
    let mut examined = 0;
    // The moved records' bytes go back to back into one buffer: an allocation per moved
    // record (and the frees after) were a seventh of an overwrite loop's instructions.
    let mut moves: Vec<Move> = Vec::with_capacity(STEP_RECORDS);
    let mut bytes = StepBytes::take();
    let mut scratch = Vec::new();
    let mut abandon = false;
    // The object of the record examined last (records of one object come in runs).
    let mut cached: Option<(u64, Option<AnyKind>)> = None;
    let mut ahead = Lookahead::new(pos);
    while pos < used && examined < STEP_RECORDS {
        ahead.run(sh, used, examined + LOOKAHEAD);
        let Some((mid, k, v, hl)) = read_record_header_in(sh, pos, used) else {
            // Unparseable bytes in a sealed chunk: nothing after them can be trusted to
            // be a record boundary, and nothing live can be there (live slots are checked
            // records). Stop here; the rest of the chunk is reclaimed with it.
            pos = used;
            break;
        };
        let len = hl + k + v + sh.g.trailer;
        examined += 1;
        if cached.as_ref().is_none_or(|(id, _)| *id != mid) {
            cached = Some((mid, AnyKind::open(sh, mid).ok().flatten()));
        }
        if let Some((_, Some(m))) = cached {
            if m.has_records() {
                // Most examined records of a good victim are dead: copy only the key to
                // ask the index, and the whole record only when it is live.
                sh.r.read_to_vec(pos + hl, k as usize, &mut scratch);
                // A lookup that cannot finish (its bucket left mid-write by a stopped
                // process) must not read as "dead": that freed a chunk holding a live
                // record (the lookup this replaced read every error so). It gives up
                // after LOOKUP_TIMEOUT, not the lock timeout, since writers run the
                // cleaner: the victim is dropped for this round, and found again later.
                let live = match m.is_live(sh, &scratch, pos, LOOKUP_TIMEOUT) {
                    Ok(live) => live,
                    Err(Error::Timeout(_)) => {
                        abandon = true;
                        break;
                    }
                    Err(e) => return Err(e),
                };
                if live {
                    // A copy that does not fit in this thread's data chunk makes the
                    // append seal it, and another lane may pick a sealed chunk as its
                    // victim at once: one holding copies not yet published there would be
                    // read as dead (liveness is the index's word) and freed under them.
                    // So the copies made so far are published first. (With one cleaner
                    // this could not happen: only it cleaned, and it was busy here.)
                    if !moves.is_empty() && !fits_data_chunk(tx, len) {
                        publish_moves(tx, &moves, &bytes)?;
                        moves.clear();
                        bytes.clear();
                    }
                    let at = bytes.len();
                    bytes.resize(at + len as usize, 0);
                    sh.r.read_bytes(pos, &mut bytes[at..]);
                    let key = at + hl as usize..at + (hl + k) as usize;
                    let new =
                        crate::alloc::append(tx, &[&bytes[at..]], crate::alloc::Purpose::Cleaner)?;
                    moves.push((pos, new, len, key, m));
                }
            }
        }
        pos += len;
    }
    publish_moves(tx, &moves, &bytes)?;
    if abandon {
        // The records copied so far are moved; the victim is left for a later round.
        // (The scan cursor is not rewritten: it may move under the alloc lock only.)
        let mut redo = Redo::new();
        redo.push(victim_w, 0);
        redo.push(pos_w, 0);
        tx.commit(I_REDO, &[], &redo);
        tx.apply(&redo);
        tx.done();
        return Ok(true);
    }
    if pos >= used {
        // On disk, every slot moved away from the victim must be durable before the
        // victim can be reused.
        if sh.durable {
            sh.flush()?;
        }
        crate::rt::failpoint!("clean.freeing");
        crate::alloc::with_alloc_lock(tx, |redo| {
            crate::rt::trace!("cleaner frees {victim:#x}");
            crate::paranoid::unreferenced!(
                sh,
                victim,
                victim + cs,
                "cleaner's free of {victim:#x}"
            );
            crate::alloc::free_run_redo(sh, victim, 1, redo);
            redo.push(
                H_DATA_BYTES,
                sh.w(H_DATA_BYTES).load(Acquire).saturating_sub(cs),
            );
            redo.push(H_CLEANED, sh.w(H_CLEANED).load(Acquire) + 1);
            redo.push(victim_w, 0);
            redo.push(pos_w, 0);
            Ok(())
        })?;
        // Once per chunk: the exact figure (the moved records are live, not reclaimed).
        let dead = reclaimable_dead(sh);
        sh.w(H_DEAD_HINT).store(dead, Relaxed);
    } else {
        let mut redo = Redo::new();
        redo.push(pos_w, pos);
        tx.commit(I_REDO, &[], &redo);
        tx.apply(&redo);
        tx.done();
    }
    Ok(true)
}

/// Makes a step's copies durable (on disk: one msync for them all, not one per record),
/// then repoints their slots. The copies all lie in this thread's data chunk, back to
/// back (see the step: it publishes before an append that would seal the chunk).
pub(crate) fn publish_moves(tx: &Txn, moves: &[Move], bytes: &[u8]) -> Result<()> {
    let sh = tx.sh;
    if sh.durable && !moves.is_empty() {
        let mut start = moves[0].1;
        let mut end = start;
        for (_, new, len, ..) in moves {
            if *new != end {
                sh.persist(start, end - start)?;
                start = *new;
            }
            end = new + len;
        }
        sh.persist(start, end - start)?;
    }
    for (old, new, len, key, m) in moves {
        if !m.relocate(tx, &bytes[key.clone()], *old, (*new, *len))? {
            crate::alloc::note_dead_at(tx, *new, *len);
        }
        crate::rt::failpoint!("clean.moved");
    }
    Ok(())
}

/// Whether a record of `len` bytes fits in this thread's data chunk as it is (the
/// condition under which `alloc::append` does not refill).
pub(crate) fn fits_data_chunk(tx: &Txn, len: u64) -> bool {
    let sh = tx.sh;
    let chunk = sh.w(tx.base + T_DATA_CHUNK).load(Acquire);
    let bump = sh.w(tx.base + T_BUMP).load(Acquire);
    chunk != 0 && bump.saturating_add(len) <= chunk.saturating_add(sh.g.chunk_size())
}

/// How many records ahead of its liveness lookups a step prefetches (see [`Lookahead`]):
/// about as many misses as the core keeps in flight.
pub(crate) const LOOKAHEAD: usize = 12;

/// Walks a victim's records ahead of the step that examines them and prefetches what the
/// liveness lookup (and, for a live record, the locked move) of each will touch: its key's
/// bucket and segment lock line. Each lookup was a chain of cache misses run one after
/// another, most of a cleaning step's time (a third of an overwrite loop's at 1 M keys).
/// Parses headers on its own and trusts nothing it reads: the step parses them again.
pub(crate) struct Lookahead {
    pos: u64,
    count: usize,
    map: Option<(u64, Option<AnyKind>)>,
    key: Vec<u8>,
}

impl Lookahead {
    pub(crate) fn new(pos: u64) -> Lookahead {
        Lookahead {
            pos,
            count: 0,
            map: None,
            key: Vec::new(),
        }
    }

    /// Prefetches for the records up to the `upto`-th of the step (at most `STEP_RECORDS`).
    pub(crate) fn run(&mut self, sh: &Shared, used: u64, upto: usize) {
        let end = sh.file_end();
        while self.count < upto.min(STEP_RECORDS) && self.pos < used {
            let Some((mid, k, v, hl)) = read_record_header_in(sh, self.pos, used) else {
                self.pos = used;
                return;
            };
            if k <= 256 {
                if self.map.as_ref().is_none_or(|(id, _)| *id != mid) {
                    self.map = Some((mid, AnyKind::open(sh, mid).ok().flatten()));
                }
                if let Some((_, Some(m))) = &self.map {
                    sh.r.read_to_vec(self.pos + hl, k as usize, &mut self.key);
                    m.prefetch_live(sh, &self.key, end);
                }
            }
            self.pos += hl + k + v + sh.g.trailer;
            self.count += 1;
        }
    }
}

/// A live record the cleaner copied: (old offset, new offset, length, where its key is in
/// the step's buffer of copied bytes, its map).
pub(crate) type Move = (u64, u64, u64, std::ops::Range<usize>, AnyKind);

/// Frees a large-record run whose record no map references (and that no live writer is
/// about to publish), if it is still the run of serial `serial` (seen under the alloc
/// lock; its header is read here without it, so it may be anything by now: `free_large`
/// checks the serial again before it frees anything).
pub(crate) fn free_large_if_dead(tx: &Txn, run: u64, serial: u64) -> Result<()> {
    let sh = tx.sh;
    let owner = sh.w(run + K_OWNER).load(Acquire);
    if owner != 0 {
        let t = owner - 1;
        if sh.txn_alive(t) && sh.w(sh.g.txn_slot(t) + T_LARGE).load(Acquire) == run {
            return Ok(()); // being written right now
        }
    }
    let off = run + CHUNK_HDR;
    let end = sh.file_end();
    let live = match read_record_header(sh, off, end) {
        Some((mid, k, _, hl)) => match AnyKind::open(sh, mid) {
            Ok(Some(m)) if m.has_records() => {
                let mut key = vec![0u8; k as usize];
                sh.r.read_bytes(off + hl, &mut key);
                // As for chunk victims (`step_locked`): a lookup that cannot finish is
                // not "dead"; after LOOKUP_TIMEOUT the run is kept for a later round
                // instead of stalling the writer that runs the cleaner.
                match m.is_live(sh, &key, off, LOOKUP_TIMEOUT) {
                    Ok(live) => live,
                    Err(Error::Timeout(_)) => true,
                    Err(e) => return Err(e),
                }
            }
            _ => false,
        },
        None => false,
    };
    if !live {
        if sh.durable {
            sh.flush()?;
        }
        crate::alloc::free_large(tx, off, serial);
    }
    Ok(())
}
