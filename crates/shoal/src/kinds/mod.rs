//! The kinds of objects a store holds, and their registry: what the layers below them
//! (recovery, and in time the cleaner, the checker and repair) reach them through.

pub(crate) mod fixed;
pub(crate) mod varmap;

use crate::format::*;
use crate::shared::Shared;
use crate::shared::{Hooks, IntentHandler, INTENT_KINDS};
use std::sync::atomic::Ordering::*;

/// The hooks every store opened by this library carries.
pub(crate) static HOOKS: Hooks = Hooks {
    intents: intent_table(&[
        (I_SPLIT, crate::kinds::varmap::recover_split),
        (I_FSPLIT, crate::kinds::fixed::recover_split),
        (I_FMOVE, crate::kinds::fixed::recover_move),
    ]),
    record_unreferenced,
    #[cfg(feature = "paranoid")]
    refs_into,
};

/// Whether no object references the record at `off` (the first record of a LARGE run),
/// for the allocator's free of a large run. On any doubt (a failed read, a lookup that
/// could not finish) it is referenced.
fn record_unreferenced(sh: &Shared, off: u64) -> bool {
    let Some((mid, k, _, hl)) = crate::alloc::record::read_record_header(sh, off, sh.file_end())
    else {
        return true; // no complete record: nothing can map to it
    };
    let map_live = mid < sh.g.n_catalog
        && sh.w(sh.g.cat_entry(mid) + C_STATE).load(Acquire) & 0xff == CAT_LIVE;
    if !map_live || crate::kinds::fixed::is_fixed(sh, mid) {
        return true; // its map is gone (its id may now name a fixed map: no records)
    }
    let Ok(m) = crate::kinds::varmap::map_ref_unchecked(sh, mid) else {
        return false;
    };
    let mut key = vec![0u8; k as usize];
    sh.r.read_bytes(off + hl, &mut key);
    matches!(m.read(sh, &key, |rec, _, _| rec), Ok(found) if found != Some(off))
}

/// The table of intent handlers, by kind; a kind out of range or given twice fails the
/// build.
const fn intent_table(
    list: &[(u64, IntentHandler)],
) -> [Option<IntentHandler>; INTENT_KINDS as usize] {
    let mut t: [Option<IntentHandler>; INTENT_KINDS as usize] = [None; INTENT_KINDS as usize];
    let mut i = 0;
    while i < list.len() {
        let (k, h) = list[i];
        assert!(k > I_REDO && k < INTENT_KINDS, "intent kind out of range");
        assert!(t[k as usize].is_none(), "intent kind registered twice");
        t[k as usize] = Some(h);
        i += 1;
    }
    t
}

#[cfg(feature = "paranoid")]
/// Slots of live variable-size maps that point into `[lo, hi)`: (map id, slot
/// offset, record offset). Read without locks: a caller that finds some looks again.
fn refs_into(sh: &Shared, lo: u64, hi: u64) -> Vec<(u64, u64, u64)> {
    let mut out = Vec::new();
    for id in 0..sh.g.n_catalog {
        let ce = sh.g.cat_entry(id);
        if sh.w(ce + C_STATE).load(Acquire) & 0xff != CAT_LIVE
            || crate::kinds::fixed::is_fixed(sh, id)
        {
            continue;
        }
        let Ok(m) = crate::kinds::varmap::map_ref_unchecked(sh, id) else {
            continue;
        };
        let Ok(segs) = crate::hashmap::segments(sh, &m) else {
            continue;
        };
        for (seg, _) in segs {
            for b in 0..m.n_main + m.n_stash {
                for i in 0..SLOTS {
                    let so = slot_off(seg, b, i);
                    let s = sh.w(so).load(Acquire);
                    let o = slot_off_of(s);
                    if s != 0 && o >= lo && o < hi {
                        out.push((id, so, o));
                    }
                }
            }
        }
    }
    out
}
