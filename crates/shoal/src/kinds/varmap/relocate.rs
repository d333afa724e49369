//! The cleaner's move of a live record to a new copy.

use super::*;
use crate::error::Result;
use crate::shared::Shared;
use crate::txn::Txn;

impl MapRef {
    /// Moves a live record to `new` (offset, length), a copy the cleaner made without a
    /// lock, if the key still points at `old`. Used by the cleaner; returns whether it
    /// moved.
    ///
    /// With values overwritten in place (`FLAG_IN_PLACE`), "still points at `old`" no
    /// longer means "unchanged since the copy": a value written in place keeps the
    /// record's offset. So under the lock the copy is compared with the record and, if
    /// they differ (or the copy was torn by such a write), made again from the record;
    /// publishing the stale copy lost that acknowledged write (the kill storm found it).
    pub fn relocate(&self, tx: &Txn, key: &[u8], old: u64, new: (u64, u64)) -> Result<bool> {
        let r = self.write(tx, key, &mut |tx, hit| {
            if hit.is_none_or(|h| h.off != old) {
                return Ok(Action::Keep);
            }
            if tx.sh.g.in_place {
                refresh_copy(tx.sh, old, new)?;
            }
            Ok(Action::Put(new.0, new.1))
        })?;
        Ok(r.applied)
    }
}

/// Under the key's lock: makes the unpublished copy `new` (offset, length) of the live
/// record at `old` equal to it again, if a value overwritten in place changed the record
/// after the copy was made (see [`MapRef::relocate`]).
///
/// Compared a piece at a time through buffers on the stack: the cleaner calls this for
/// every record it moves, and two heap buffers per call were most of a move's cost
/// (~540 of its ~730 instructions, callgrind, an overwrite loop whose values change
/// length).
pub(crate) fn refresh_copy(sh: &Shared, old: u64, new: (u64, u64)) -> Result<()> {
    pub(crate) const PIECE: u64 = 64;
    let (off, len) = new;
    let (mut cur, mut copy) = ([0u8; PIECE as usize], [0u8; PIECE as usize]);
    let mut changed = false;
    let mut at = 0;
    while at < len {
        let n = (len - at).min(PIECE) as usize;
        sh.r.read_bytes(old + at, &mut cur[..n]);
        sh.r.read_bytes(off + at, &mut copy[..n]);
        if cur[..n] != copy[..n] {
            sh.r.write_bytes(off + at, &cur[..n]);
            changed = true;
        }
        at += n as u64;
    }
    if changed {
        // On disk the copy must be durable before a slot names it, as the cleaner's
        // first copy was made durable before any repointing.
        sh.persist(off, len)?;
    }
    Ok(())
}
