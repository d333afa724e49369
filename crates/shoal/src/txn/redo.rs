//! Redo lists: every word a change will write, with its final value, so that replaying
//! the list after a crash is idempotent.

use crate::format::*;
use crate::shared::Shared;
use std::sync::atomic::Ordering::*;

/// A redo list being built.
pub(crate) struct Redo {
    pub n: usize,
    pub e: [(u64, u64); T_NREDO as usize],
    /// Some entry writes only some bytes of its word ([`Redo::push_bytes`]).
    pub masked: bool,
}

impl Redo {
    pub fn new() -> Redo {
        Redo {
            n: 0,
            e: [(0, 0); T_NREDO as usize],
            masked: false,
        }
    }
    pub fn push(&mut self, off: u64, val: u64) {
        // Callers build lists of at most T_NREDO entries by construction.
        assert!(self.n < T_NREDO as usize, "redo list overflow");
        self.e[self.n] = (off, val);
        self.n += 1;
    }

    /// Pushes the entries that write `src` at byte offset `off` (any alignment): a plain
    /// entry for each word it covers whole, and for an edge word an entry whose offset
    /// carries the mask of its bytes ([`REDO_MASK_SHIFT`]), so that applying it, or
    /// replaying it after a crash, never writes the neighbour's bytes of that word.
    pub fn push_bytes(&mut self, off: u64, src: &[u8]) {
        let mut a = off & !7;
        let mut start = (off - a) as usize;
        let mut i = 0;
        while i < src.len() {
            let take = (8 - start).min(src.len() - i);
            let mut w = [0u8; 8];
            w[start..start + take].copy_from_slice(&src[i..i + take]);
            let mask8 = ((1u64 << take) - 1) << start;
            let at = if mask8 == 0xff {
                a
            } else {
                self.masked = true;
                a | mask8 << REDO_MASK_SHIFT
            };
            self.push(at, u64::from_le_bytes(w));
            i += take;
            a += 8;
            start = 0;
        }
    }
}

/// Applies one redo entry: a store of the whole word, or the merge of its masked bytes.
#[inline]
pub(super) fn apply_entry(sh: &Shared, at: u64, val: u64) {
    if at >> REDO_MASK_SHIFT == 0 {
        sh.w(at).store(val, Release);
    } else {
        let (off, mask) = redo_target(at);
        sh.r.merge_word(off, val, mask);
    }
}
