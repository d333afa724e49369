//! The kinds of objects a store holds, and their registry: what the layers below them
//! (recovery, and in time the cleaner, the checker and repair) reach them through.

pub(crate) mod fixed;
pub(crate) mod log;
pub(crate) mod ordered;
pub(crate) mod queue;
pub(crate) mod varmap;

use crate::error::Result;
use crate::format::*;
use crate::object::{CheckCtx, Kind, ObjectStats, RepairCtx};
use crate::shared::Shared;
use crate::shared::{Hooks, IntentHandler, INTENT_KINDS};
use crate::txn::Txn;
use std::sync::atomic::Ordering::*;
use std::time::Duration;

/// An object of any kind, opened from its catalog entry. The layers above the kinds (the
/// cleaner, the checker, repair, the store's catalog operations) reach every kind through
/// this, and through [`Kind`]: a new kind is one more variant and one more arm below.
#[derive(Clone, Copy, Debug)]
pub(crate) enum AnyKind {
    /// A variable-size map.
    Var(varmap::VarMap),
    /// A fixed-size map.
    Fixed(fixed::FixedRef),
    /// A queue set.
    Queues(queue::QueueRef),
    /// A log.
    Log(log::LogRef),
    /// An ordered map.
    Ordered(ordered::OrderedRef),
}

/// Calls the same expression on whichever kind `$x` is: one `match`, each arm a static
/// call.
macro_rules! each_kind {
    ($x:expr, $k:ident => $e:expr) => {
        match $x {
            AnyKind::Var($k) => $e,
            AnyKind::Fixed($k) => $e,
            AnyKind::Queues($k) => $e,
            AnyKind::Log($k) => $e,
            AnyKind::Ordered($k) => $e,
        }
    };
}

impl AnyKind {
    /// The live object of catalog entry `id` (None when the entry is free or being
    /// dropped), its header checked against the file.
    pub fn open(sh: &Shared, id: u64) -> Result<Option<AnyKind>> {
        if id >= sh.g.n_catalog
            || sh.w(sh.g.cat_entry(id) + C_STATE).load(Acquire) & 0xff != CAT_LIVE
        {
            return Ok(None);
        }
        Self::open_any(sh, id).map(Some)
    }

    /// The object of catalog entry `id` whatever its state (a drop in progress finishes
    /// with it).
    pub fn open_any(sh: &Shared, id: u64) -> Result<AnyKind> {
        Ok(if log::is_log(sh, id) {
            AnyKind::Log(log::log_ref_unchecked(sh, id)?)
        } else if queue::is_queue_set(sh, id) {
            AnyKind::Queues(queue::queue_ref_unchecked(sh, id)?)
        } else if ordered::is_ordered(sh, id) {
            AnyKind::Ordered(ordered::ordered_ref(sh, id)?)
        } else if fixed::is_fixed(sh, id) {
            AnyKind::Fixed(fixed::fixed_ref_unchecked(sh, id)?)
        } else {
            AnyKind::Var(varmap::VarMap(varmap::map_ref_unchecked(sh, id)?))
        })
    }

    /// The object's header (its first index run holds it; `M_CHAIN` links its runs).
    pub fn header(&self) -> u64 {
        match self {
            AnyKind::Var(v) => v.0.hdr,
            AnyKind::Fixed(f) => f.m.hdr,
            AnyKind::Queues(q) => q.hdr,
            AnyKind::Log(l) => l.hdr,
            AnyKind::Ordered(o) => o.hdr,
        }
    }

    /// What kind of object it is, for `Store::map_kind`.
    pub fn map_kind(&self) -> MapKind {
        match self {
            AnyKind::Var(v) => MapKind::Variable {
                uids: v.0.vtrail != 0,
            },
            AnyKind::Fixed(f) => MapKind::Fixed {
                key_size: f.geo.key_size as usize,
                value_size: f.geo.value_size as usize,
            },
            AnyKind::Queues(q) => MapKind::QueueSet {
                element_size: q.elem_size as usize,
                elements: q.elems,
                queues: q.nq as usize,
            },
            AnyKind::Log(l) => MapKind::Log {
                slots: l.slots,
                max_record: l.max_record as usize,
            },
            AnyKind::Ordered(o) => MapKind::Ordered {
                u64_keys: o.flags & OF_U64_KEYS != 0,
                duplicates: o.flags & OF_DUPS != 0,
            },
        }
    }
}

impl Kind for AnyKind {
    fn has_records(&self) -> bool {
        each_kind!(self, k => k.has_records())
    }
    fn is_live(&self, sh: &Shared, key: &[u8], off: u64, timeout: Duration) -> Result<bool> {
        each_kind!(self, k => k.is_live(sh, key, off, timeout))
    }
    fn prefetch_live(&self, sh: &Shared, key: &[u8], end: u64) {
        each_kind!(self, k => k.prefetch_live(sh, key, end))
    }
    fn relocate(&self, tx: &Txn, key: &[u8], old: u64, new: (u64, u64)) -> Result<bool> {
        each_kind!(self, k => k.relocate(tx, key, old, new))
    }
    fn live_record_bytes(&self, sh: &Shared) -> u64 {
        each_kind!(self, k => k.live_record_bytes(sh))
    }
    fn for_each_record(&self, sh: &Shared, f: &mut dyn FnMut(u64)) -> Result<()> {
        each_kind!(self, k => k.for_each_record(sh, f))
    }
    fn check(&self, ck: &mut CheckCtx<'_>) {
        each_kind!(self, k => k.check(ck))
    }
    fn drop_untrusted(&self, sh: &Shared, rep: &mut RepairCtx) -> Result<()> {
        each_kind!(self, k => k.drop_untrusted(sh, rep))
    }
    fn rebuild(&self, sh: &Shared, rep: &mut RepairCtx) -> Result<()> {
        each_kind!(self, k => k.rebuild(sh, rep))
    }
    fn drop_barrier(&self, tx: &Txn) -> Result<()> {
        each_kind!(self, k => k.drop_barrier(tx))
    }
    fn stats(&self, sh: &Shared) -> Result<ObjectStats> {
        each_kind!(self, k => k.stats(sh))
    }
}

/// The hooks every store opened by this library carries.
pub(crate) static HOOKS: Hooks = Hooks {
    intents: intent_table(&[
        (I_SPLIT, crate::kinds::varmap::recover_split),
        (I_FSPLIT, crate::kinds::fixed::recover_split),
        (I_FMOVE, crate::kinds::fixed::recover_move),
        (I_QMOVE, crate::kinds::queue::recover_move),
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
    if !map_live
        || crate::kinds::fixed::is_fixed(sh, mid)
        || queue::is_queue_set(sh, mid)
        || log::is_log(sh, mid)
        || ordered::is_ordered(sh, mid)
    {
        return true; // its map is gone (its id may now name an object without records)
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
            || queue::is_queue_set(sh, id)
            || log::is_log(sh, id)
            || ordered::is_ordered(sh, id)
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
