//! The fixed-size map as a [`Kind`] of object: what the cleaner, the checker, repair and
//! a drop ask of it. It keeps no records (its cells are in its buckets), so the cleaner
//! and repair's record work have nothing to ask it.

use super::*;
use crate::error::Result;
use crate::object::{CheckCtx, Kind, ObjectStats, RepairCtx};
use crate::shared::Shared;
use crate::txn::Txn;
use std::time::Duration;

impl Kind for FixedRef {
    fn has_records(&self) -> bool {
        false
    }

    fn is_live(&self, _: &Shared, _: &[u8], _: u64, _: Duration) -> Result<bool> {
        Ok(false)
    }

    fn prefetch_live(&self, _: &Shared, _: &[u8], _: u64) {}

    fn relocate(&self, _: &Txn, _: &[u8], _: u64, _: (u64, u64)) -> Result<bool> {
        Ok(false)
    }

    fn live_record_bytes(&self, _: &Shared) -> u64 {
        0
    }

    fn for_each_record(&self, _: &Shared, _: &mut dyn FnMut(u64)) -> Result<()> {
        Ok(())
    }

    fn check(&self, ck: &mut CheckCtx<'_>) {
        let mut problems = Vec::new();
        let (n, segs) = check_map(ck.sh, self.m.id, &|o, l| ck.in_index(o, l), &mut problems);
        for p in problems {
            ck.bad(p);
        }
        crate::hashmap::check_index_space(ck, &self.m);
        ck.entries += n;
        ck.segments += segs;
    }

    fn drop_untrusted(&self, _: &Shared, _: &mut RepairCtx) -> Result<()> {
        Ok(()) // no records to distrust
    }

    fn rebuild(&self, sh: &Shared, rep: &mut RepairCtx) -> Result<()> {
        rebuild(sh, self.m.id)?;
        rep.rebuilt.push(format!(
            "fixed map {:?}: locks, sequence numbers, overflow counts, counters",
            rep.name
        ));
        Ok(())
    }

    fn stats(&self, sh: &Shared) -> Result<ObjectStats> {
        let st = self.m.stats(sh)?;
        Ok(ObjectStats {
            live_bytes: st.entries * (self.geo.key_size + self.geo.value_size),
            ..st
        })
    }

    fn drop_barrier(&self, tx: &Txn) -> Result<()> {
        // Any writer that saw the map alive holds a segment or the directory lock (and a
        // lock-free adder counts itself in a segment's lock word).
        tx.lock(self.m.hdr + M_DIR_LOCK)?;
        tx.unlock(self.m.hdr + M_DIR_LOCK);
        drop_barrier(tx, self)
    }
}
