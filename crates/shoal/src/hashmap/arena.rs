//! Index arenas: where a map carves its segments and directories from.
use super::*;
use crate::error::{Error, Result};
use crate::format::*;
use crate::shared::Shared;
use crate::txn::{Redo, Txn};
use std::sync::atomic::Ordering::*;

pub(crate) fn commit_apply(tx: &Txn, redo: &mut Redo, extra: &[(u64, u64)]) {
    for (o, v) in extra {
        redo.push(*o, *v);
    }
    tx.commit(I_REDO, &[], redo);
    tx.apply(redo);
    tx.done();
}

/// Carves `size` bytes (a multiple of 128) from the map's index arena, taking a new index
/// run (or, for a directory larger than a chunk, a run of its own) when needed.
/// Returns the offset and the redo entries that take the space; the caller commits them
/// together with the entry that records what the space is for, so a crash leaks nothing.
///
/// The arena is one run of 1 to `ARENA_MAX_CHUNKS` chunks, longer as the map grows: a
/// run's 128-byte header leaves room for 31 segments of 8 KiB in a 256 KiB chunk, and the
/// 8,064 bytes left over were 3% of the index of a large map (0.4 B per entry at 10 M
/// keys); a run of 8 chunks loses them once per 255 segments instead.
pub(crate) fn arena_alloc(tx: &Txn, m: &MapRef, size: u64) -> Result<(u64, Vec<(u64, u64)>)> {
    let sh = tx.sh;
    let cs = sh.g.chunk_size();
    // Everything in the arena is bucket-aligned (segments must be; directories may as well).
    let size = size.next_multiple_of(BUCKET);
    let arena = sh.w(m.hdr + M_ARENA).load(Acquire);
    let bump = sh.w(m.hdr + M_ARENA_BUMP).load(Acquire);
    if arena != 0 {
        // Both come from the file, and the space is written next: never carve it outside
        // an index run of this map (a fuzzed header's arena lay past the file).
        let end = sh.file_end();
        if arena < sh.g.chunks_off
            || arena >= end
            || (arena - sh.g.chunks_off) % cs != 0
            || sh.w(arena + K_KIND).load(Acquire) != CK_INDEX
            || sh.w(arena + K_OWNER).load(Acquire) != m.id
        {
            return Err(m.bad(
                sh,
                format!(
                    "map {}: index arena {arena:#x} is not an index run of the map",
                    m.id
                ),
            ));
        }
        // The run length comes from the file: a bad one only ends the arena early.
        let run = sh
            .w(arena + K_RUN)
            .load(Acquire)
            .clamp(1, arena_max_chunks(sh, m));
        let top = (arena + run * cs).min(end);
        if bump < arena + CHUNK_HDR || bump > top || bump % BUCKET != 0 {
            return Err(m.bad(
                sh,
                format!(
                    "map {}: index arena bump {bump:#x} is outside its arena {arena:#x}",
                    m.id
                ),
            ));
        }
        if bump + size <= top {
            return Ok((bump, vec![(m.hdr + M_ARENA_BUMP, bump + size)]));
        }
    }
    let need = (size + CHUNK_HDR).div_ceil(cs);
    // A new arena: longer for a bigger map (its directory depth says how big: about one
    // entry per segment), so that a small map never holds more than a chunk it does not
    // use. A map of groups (whose directory has 8 to 16 entries per segment) counts its
    // segments, and takes a chunk per 2,048 of them: its cells fill ~84 % of its segments,
    // and an arena's unused tail is a visible part of the rest (FORMAT.md's 8-byte
    // budget per entry of a fixed map).
    let arena_k = if m.groups {
        sh.w(m.hdr + M_N_SEGS)
            .load(Acquire)
            .min(1 << 16)
            .div_ceil(2048)
    } else {
        (1u64 << (sh.w(m.hdr + M_ROOT).load(Acquire) >> 48).min(16)).div_ceil(1024)
    }
    .clamp(1, ARENA_MAX_CHUNKS);
    let (k, is_arena) = if need == 1 {
        (arena_k, true)
    } else {
        (need, false)
    };
    // Taking chunks needs the alloc lock; its redo is committed on its own, with the new
    // run linked into the map's chain (so a drop frees it even if we die right after).
    let take = |k: u64| {
        crate::alloc::with_alloc_lock(tx, |redo| {
            let run = crate::alloc::take_run(tx, k, redo, crate::alloc::Purpose::Normal)?;
            redo.push(run + K_KIND, CK_INDEX);
            redo.push(run + K_RUN, k);
            redo.push(run + K_OWNER, m.id);
            redo.push(run + K_NEXT, sh.w(m.hdr + M_CHAIN).load(Acquire));
            redo.push(m.hdr + M_CHAIN, run);
            if is_arena {
                redo.push(m.hdr + M_ARENA, run);
                redo.push(m.hdr + M_ARENA_BUMP, run + CHUNK_HDR);
            }
            Ok(run)
        })
    };
    // A store near its maximum size, or a filesystem nearly full, may have room for one
    // chunk but not for a long arena.
    let run = match take(k) {
        Err(Error::StoreFull(_) | Error::NoSpace { .. }) if is_arena && k > 1 => take(1)?,
        r => r?,
    };
    if is_arena {
        Ok((
            run + CHUNK_HDR,
            vec![(m.hdr + M_ARENA_BUMP, run + CHUNK_HDR + size)],
        ))
    } else {
        Ok((run + CHUNK_HDR, vec![]))
    }
}

/// The longest run map `m`'s arena may be: [`ARENA_MAX_CHUNKS`], or its first run if that
/// is longer (a map created with segments of more than a chunk: its header, directory and
/// first segment are one run, whose tail is its first arena).
pub(crate) fn arena_max_chunks(sh: &Shared, m: &MapRef) -> u64 {
    let first = CHUNK_HDR + map_header_size(sh.g.n_txn) + BUCKET + m.seg_size;
    ARENA_MAX_CHUNKS.max(first.div_ceil(sh.g.chunk_size()))
}
