//! Clearing a map, one segment at a time.

use super::*;
use crate::error::Result;
use crate::txn::{Redo, Txn};

/// Removes every entry, one segment at a time (each once its lock-free adders drained).
pub(crate) fn clear(tx: &Txn, f: &FixedRef) -> Result<()> {
    f.m.clear_segments(tx, |tx, seg| {
        wait_adders(tx, seg, f.m.timeout).and_then(|_| clear_segment(tx, f, seg))?;
        Ok(0)
    })?;
    Ok(())
}

pub(crate) fn clear_segment(tx: &Txn, f: &FixedRef, seg: u64) -> Result<()> {
    let sh = tx.sh;
    if !f.m.alive(sh) {
        return Err(f.m.dropped());
    }
    let cnt_off = f.counter(tx, MC_COUNT);
    for b in 0..f.m.n_main + f.m.n_stash {
        let bo = f.bucket(seg, b);
        let h0 = sh.w(bo).load(Acquire);
        let n = (fh_bits(h0) & f.all_bits()).count_ones() as u64;
        if n == 0 && fh_over(h0) == 0 {
            continue;
        }
        let mut redo = Redo::new();
        redo.push(bo, fh(fh_seq(h0) + 2, 0, 0));
        redo.push(cnt_off, sh.w(cnt_off).load(Relaxed).wrapping_sub(n));
        tx.commit(I_REDO, &[], &redo);
        sh.w(bo)
            .store(fh(fh_seq(h0) + 1, fh_over(h0), fh_bits(h0)), Relaxed);
        tx.apply(&redo);
        tx.done();
    }
    Ok(())
}
