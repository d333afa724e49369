//! The ordered map as the rest of the engine sees every kind ([`Kind`]).

use super::area;
use super::file::FilePages;
use super::map::{owner_word, OrderedRef};
use super::page::{PageRead, BRANCH, LEAF};
use super::tree::PageSource;
use crate::error::{Error, Result};
use crate::format::*;
use crate::object::{CheckCtx, Kind, ObjectStats, RepairCtx};
use crate::shared::Shared;
use crate::txn::Txn;
use std::time::{Duration, Instant};

impl Kind for OrderedRef {
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
        let sh = ck.sh;
        let name = format!("ordered map {}: ", self.id);
        ck.lock_ok(self.hdr + MO_WLOCK, &name, "writer");
        ck.lock_ok(self.area + OA_LOCK, &name, "commit");
        let en = match area::current_entry(sh, self.area, self.e) {
            Ok(en) => en,
            Err(e) => return ck.bad(format!("{name}{e}")),
        };
        if en.owner != owner_word(self.id, self.cat_word) {
            // A crash between the map's creation and its first commit: its next opener
            // finishes it. Nothing is lost (it held nothing).
            return;
        }
        let src = FilePages { sh };
        let mut seen = std::collections::HashSet::new();
        let mut stack = Vec::new();
        if en.root != 0 {
            stack.push((en.root, en.depth, None::<Vec<u8>>, None::<Vec<u8>>));
        }
        let mut total = 0u64;
        let mut problems = Vec::new();
        while let Some((off, level, lo, hi)) = stack.pop() {
            if !super::file::is_page(sh, off) || !seen.insert(off) {
                problems.push(format!(
                    "{name}page {off:#x} is not a page, or is reached twice"
                ));
                continue;
            }
            let p = src.page(off);
            let want = if level == 0 { LEAF } else { BRANCH };
            if p.kind() != want {
                problems.push(format!(
                    "{name}page {off:#x} has kind {} at level {level}",
                    p.kind()
                ));
                continue;
            }
            let key = |i: usize| {
                let (a, l) = p.key_at(i);
                let mut k = vec![0u8; l];
                p.copy_out(a, &mut k);
                k
            };
            let mut prev: Option<Vec<u8>> = None;
            for i in 0..p.n() {
                let k = key(i);
                if prev.as_ref().is_some_and(|pk| pk >= &k)
                    || lo.as_ref().is_some_and(|l| &k < l)
                    || hi.as_ref().is_some_and(|h| &k >= h)
                {
                    problems.push(format!("{name}page {off:#x}: key {i} is out of order"));
                }
                prev = Some(k);
            }
            if level == 0 {
                total += p.n() as u64;
                continue;
            }
            for c in 0..=p.n() {
                let clo = if c == 0 { lo.clone() } else { Some(key(c - 1)) };
                let chi = if c == p.n() { hi.clone() } else { Some(key(c)) };
                stack.push((p.child(c).0, level - 1, clo, chi));
            }
        }
        if problems.is_empty() && total != en.count {
            problems.push(format!(
                "{name}holds {total} entries, its root table says {}",
                en.count
            ));
        }
        ck.entries += total;
        for p in problems {
            ck.bad(p);
        }
    }

    fn drop_untrusted(&self, _: &Shared, _: &mut RepairCtx) -> Result<()> {
        Ok(())
    }
    fn rebuild(&self, _: &Shared, _: &mut RepairCtx) -> Result<()> {
        Ok(())
    }

    fn drop_barrier(&self, tx: &Txn) -> Result<()> {
        let sh = tx.sh;
        tx.lock(self.hdr + MO_WLOCK)?;
        let r = (|| {
            let en = area::current_entry(sh, self.area, self.e)?;
            let seq = if en.owner == owner_word(self.id, self.cat_word) {
                let used = area::used_entries(sh, self.area)? & !(1 << self.e);
                area::commit(tx, self.area, &[], Some(used), |_| {})?
            } else {
                sh.w(self.area + OA_SEQ)
                    .load(std::sync::atomic::Ordering::Acquire)
            };
            // Readers of older snapshots may still read its pages: they are freed with
            // its runs once none does (snapshots last as long as their readers want,
            // so the wait is bounded by the lock timeout, and the drop finishes later).
            let until = Instant::now() + tx.timeout.max(Duration::from_millis(100));
            while area::oldest_read(sh, self.area) < seq {
                if Instant::now() > until {
                    return Err(Error::Timeout(tx.timeout));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(())
        })();
        tx.unlock(self.hdr + MO_WLOCK);
        r
    }

    fn stats(&self, sh: &Shared) -> Result<ObjectStats> {
        let en = area::current_entry(sh, self.area, self.e)?;
        Ok(ObjectStats {
            entries: en.count,
            index_bytes: super::pool::pages_taken(sh, en.pool) * PAGE_BYTES,
            ..Default::default()
        })
    }
}
