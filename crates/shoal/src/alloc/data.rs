//! Data chunks: each thread appends its records to its own, taking a fresh one when it is full.

use super::*;
use crate::error::Result;
use crate::shared::Shared;
use crate::txn::Txn;

/// Seals the thread's data chunk (if any) and gives it a fresh one.
pub(crate) fn refill(tx: &Txn, purpose: Purpose) -> Result<()> {
    let sh = tx.sh;
    let cs = sh.g.chunk_size();
    with_alloc_lock(tx, |redo| {
        let old = sh.w(tx.base + T_DATA_CHUNK).load(Acquire);
        if old != 0
            && (sh.w(old + K_KIND).load(Acquire) != CK_DATA
                || sh.w(old + K_OWNER).load(Acquire) != tx.idx)
        {
            // Sealing it would rewrite the header of some other chunk.
            return Err(sh.corrupt(format!(
                "txn slot {}: data chunk {old:#x} is not its data chunk",
                tx.idx
            )));
        }
        if old != 0 {
            redo.push(old + K_USED, sh.w(tx.base + T_BUMP).load(Acquire));
            redo.push(old + K_KIND, CK_SEALED);
        }
        let c = take_run(tx, 1, redo, purpose)?;
        crate::rt::trace!(
            "refill txn {}: seal {old:#x}, new data chunk {c:#x}",
            tx.idx
        );
        redo.push(c + K_KIND, CK_DATA);
        redo.push(c + K_RUN, 1);
        redo.push(c + K_NEXT, 0);
        redo.push(c + K_OWNER, tx.idx);
        redo.push(c + K_USED, c + CHUNK_HDR);
        redo.push(c + K_DEAD, 0);
        redo.push(tx.base + T_DATA_CHUNK, c);
        redo.push(tx.base + T_BUMP, c + CHUNK_HDR);
        redo.push(H_DATA_BYTES, sh.w(H_DATA_BYTES).load(Acquire) + cs);
        Ok(())
    })
}

/// Appends a record made of `parts` (header, key, value) and returns its offset. The
/// record is complete in memory before this returns, and unreferenced: the caller
/// publishes it (or leaves it as dead bytes for the cleaner).
pub(crate) fn append(tx: &Txn, parts: &[&[u8]], purpose: Purpose) -> Result<u64> {
    let sh = tx.sh;
    let len: u64 = parts.iter().map(|p| p.len() as u64).sum();
    let cs = sh.g.chunk_size();
    if len > cs - CHUNK_HDR {
        let off = alloc_large(tx, len)?;
        write_parts(sh, off, parts);
        return Ok(off);
    }
    let mut chunk = sh.w(tx.base + T_DATA_CHUNK).load(Acquire);
    let mut bump = sh.w(tx.base + T_BUMP).load(Acquire);
    // Both come from the file: never write a record where a corrupt slot points.
    if chunk != 0
        && (chunk < sh.g.chunks_off
            || chunk >= sh.file_end()
            || (chunk - sh.g.chunks_off) % cs != 0
            || bump < chunk + CHUNK_HDR
            || bump > chunk + cs
            || sh.w(chunk + K_KIND).load(Acquire) != CK_DATA
            || sh.w(chunk + K_OWNER).load(Acquire) != tx.idx)
    {
        return Err(sh.corrupt(format!(
            "txn slot {}: data chunk {chunk:#x} with bump {bump:#x} is not a chunk of this file",
            tx.idx
        )));
    }
    if chunk == 0 || bump + len > chunk + cs {
        refill(tx, purpose)?;
        chunk = sh.w(tx.base + T_DATA_CHUNK).load(Acquire);
        bump = sh.w(tx.base + T_BUMP).load(Acquire);
        debug_assert!(bump + len <= chunk + cs);
    }
    write_parts(sh, bump, parts);
    crate::rt::failpoint!("append.written");
    // Bytes below the bump are complete records; only then may the bump pass them.
    sh.w(tx.base + T_BUMP).store(bump + len, Release);
    crate::rt::failpoint!("append.bumped");
    Ok(bump)
}

pub(crate) fn write_parts(sh: &Shared, mut off: u64, parts: &[&[u8]]) {
    for p in parts {
        sh.r.write_bytes(off, p);
        off += p.len() as u64;
    }
}
