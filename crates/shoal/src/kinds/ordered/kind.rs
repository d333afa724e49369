//! The ordered map as the rest of the engine sees every kind ([`Kind`]).

use super::area;
use super::file::FilePages;
use super::map::{owner_word, OrderedRef};
use super::page::{head, PageRead, BRANCH, HDR, LEAF, PLEN_MAX, SLOT};
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
        if en.depth > MAX_TREE_DEPTH {
            return ck.bad(format!("{name}a tree of {} levels", en.depth));
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
            let rest = |first, len| super::overflow::read_key(&src, first, len);
            let key = |i: usize| p.key_of(i, &rest);
            let mut prev: Option<Vec<u8>> = None;
            let mut first: Option<Vec<u8>> = None;
            for i in 0..p.n() {
                if let Err(what) = self.check_key_pages(&src, &p, i, &mut seen) {
                    problems.push(format!("{name}page {off:#x}: key {i}: {what}"));
                    continue;
                }
                let Some(k) = key(i) else {
                    problems.push(format!("{name}page {off:#x}: key {i} cannot be read"));
                    continue;
                };
                // Searches trust the prefix and the heads: a key without the one, or a
                // head that is not its key's, misleads them.
                let plen = p.u16_at(8) as usize;
                if plen > PLEN_MAX
                    || k.len() < plen
                    || first
                        .as_ref()
                        .is_some_and(|f: &Vec<u8>| f.get(..plen) != k.get(..plen))
                {
                    problems.push(format!(
                        "{name}page {off:#x}: key {i} does not begin with the page's prefix of {plen} bytes"
                    ));
                } else if p.u32_at(HDR + SLOT * i + 4) != head(&k[plen..]) {
                    problems.push(format!(
                        "{name}page {off:#x}: key {i}'s head is not the key's"
                    ));
                }
                if first.is_none() {
                    first = Some(k.clone());
                }
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
                for i in 0..p.n() {
                    let k = key(i).unwrap_or_default();
                    if let Err(what) = self.entry_form_ok(&k, p.value_at(i).1) {
                        problems.push(format!("{name}page {off:#x}: entry {i}: {what}"));
                    }
                    let Some((first, len)) = p.value_ref(i) else {
                        if p.out_of_line(i) {
                            problems.push(format!(
                                "{name}page {off:#x}: entry {i}'s value reference is not 16 bytes"
                            ));
                        }
                        continue;
                    };
                    // A value's pages are the map's like its tree's: each reached once.
                    match super::overflow::pages(&src, first, len) {
                        Ok(pages) => {
                            for v in pages {
                                if !super::file::is_page(sh, v) || !seen.insert(v) {
                                    problems.push(format!(
                                        "{name}page {v:#x} of a value is not a page, or is reached twice"
                                    ));
                                }
                            }
                        }
                        Err(what) => {
                            problems.push(format!("{name}page {off:#x}: entry {i}: {what}"))
                        }
                    }
                }
                continue;
            }
            for c in 0..=p.n() {
                // A separator that cannot be read bounds nothing (it is reported above).
                let clo = if c == 0 { lo.clone() } else { key(c - 1) };
                let chi = if c == p.n() { hi.clone() } else { key(c) };
                stack.push((p.child(c).0, level - 1, clo, chi));
            }
        }
        if problems.is_empty() && total != en.count {
            problems.push(format!(
                "{name}holds {total} entries, its root table says {}",
                en.count
            ));
        }
        if problems.is_empty() {
            self.check_pages(ck, &en, &seen, &mut problems);
        }
        ck.entries += total;
        for p in problems {
            ck.bad(p);
        }
    }

    fn drop_untrusted(&self, _: &Shared, _: &mut RepairCtx) -> Result<()> {
        // Nothing in an ordered map is untrusted on its own: its pages are checked as
        // they are read, and a page is never half written in a committed state.
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
                area::commit(tx, self.area, &[], Some(used), &[], |_| {})?
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

impl OrderedRef {
    /// Whether a leaf entry has the form the map's flags give every entry: an integer
    /// key of 8 bytes, a multimap's escaped pair with no value.
    /// Entry `i`'s key, if kept out of line: its chain is one, of a length only an
    /// out-of-line key has, starts with the entry's prefix, and its pages are reached
    /// once (`seen`).
    fn check_key_pages(
        &self,
        src: &FilePages<'_>,
        p: &super::file::FilePage<'_>,
        i: usize,
        seen: &mut std::collections::HashSet<u64>,
    ) -> std::result::Result<(), String> {
        use super::page::{KEY_INLINE_MAX, KEY_PREFIX};
        if !p.key_out(i) {
            return Ok(());
        }
        let Some((first, len)) = p.key_ref(i) else {
            return Err("a key reference of the wrong size".into());
        };
        if len <= KEY_INLINE_MAX as u64 || len > super::overflow::MAX_TREE_KEY as u64 {
            return Err(format!("a key of {len} bytes kept out of line"));
        }
        for v in super::overflow::pages(src, first, len)? {
            if !super::file::is_page(src.sh, v) || !seen.insert(v) {
                return Err(format!(
                    "page {v:#x} of a key is not a page, or is reached twice"
                ));
            }
        }
        let whole = super::overflow::read(src, first, len)?;
        let (at, _) = p.key_at(i);
        if p.cmp_bytes(at, KEY_PREFIX, &whole[..KEY_PREFIX]).is_ne() {
            return Err("a key's prefix is not its key's".into());
        }
        Ok(())
    }

    fn entry_form_ok(&self, k: &[u8], vlen: usize) -> std::result::Result<(), String> {
        if self.flags & OF_DUPS != 0 {
            if vlen != 0 {
                return Err("a multimap entry with a value".into());
            }
            let (key, _) = super::keys::split_dup(k)?;
            return super::keys::user_key(self.flags, &key).map(|_| ());
        }
        super::keys::user_key(self.flags, k).map(|_| ())
    }

    /// Every page of the map is in exactly one place: the tree (`tree`), the free-page
    /// queue (as a queue page or an entry), or past the pool's cursor; and the runs are
    /// the map's.
    fn check_pages(
        &self,
        ck: &CheckCtx<'_>,
        en: &area::Entry,
        tree: &std::collections::HashSet<u64>,
        problems: &mut Vec<String>,
    ) {
        let sh = ck.sh;
        let name = format!("ordered map {}: ", self.id);
        let nruns = sh
            .w(self.hdr + MO_NRUNS)
            .load(std::sync::atomic::Ordering::Acquire);
        if nruns == 0 || nruns > MAX_RUNS {
            problems.push(format!("{name}{nruns} runs"));
            return;
        }
        let mut runs = Vec::new();
        for r in 0..nruns {
            let run = sh
                .w(self.hdr + MO_RUNS + 8 * r)
                .load(std::sync::atomic::Ordering::Acquire);
            let k = super::pool::run_chunks(r);
            match ck.runs.get(&run) {
                Some(&(CK_INDEX, len)) if len == k => runs.push(run),
                other => {
                    problems.push(format!(
                        "{name}run {r} at {run:#x} is not an index run of {k} chunks ({other:?})"
                    ));
                    return;
                }
            }
        }
        // Page -> (run, index), for pages the pool has handed out.
        let (pr, pi) = (en.pool >> 32, en.pool & 0xffff_ffff);
        let taken = |p: u64| -> bool {
            runs.iter().enumerate().any(|(r, &run)| {
                let r = r as u64;
                p > run
                    && (p - run) % PAGE_BYTES == 0
                    && (p - run) / PAGE_BYTES - 1 < super::pool::run_pages(sh, r)
                    && (r < pr || (r == pr && (p - run) / PAGE_BYTES - 1 < pi))
            })
        };
        for &p in tree {
            if !taken(p) {
                problems.push(format!(
                    "{name}tree page {p:#x} is not a page the pool handed out"
                ));
            }
        }
        let mut free = std::collections::HashSet::new();
        let limit = super::pool::pages_taken(sh, en.pool) + 1;
        let mut q = en.fq_head;
        let mut pos = en.fq_pos;
        let mut steps = 0;
        while q != 0 {
            steps += 1;
            if steps > limit || !taken(q) || tree.contains(&q) || !free.insert(q) {
                problems.push(format!(
                    "{name}free-page queue page {q:#x} is not a free page"
                ));
                return;
            }
            let n = if q == en.fq_tail { en.fq_tail_n } else { FQ_N };
            if pos > n || n > FQ_N {
                problems.push(format!(
                    "{name}free-page queue page {q:#x}: entries {pos}..{n}"
                ));
                return;
            }
            for i in pos..n {
                let p = sh
                    .w(q + FQ_HDR + 16 * i)
                    .load(std::sync::atomic::Ordering::Acquire);
                if !taken(p) || tree.contains(&p) || !free.insert(p) {
                    problems.push(format!(
                        "{name}free-page queue entry {i} of page {q:#x}: {p:#x} is not a free page"
                    ));
                }
            }
            if q == en.fq_tail {
                break;
            }
            q = sh.w(q).load(std::sync::atomic::Ordering::Acquire);
            pos = 0;
        }
        let handed = limit - 1;
        let accounted = tree.len() as u64 + free.len() as u64;
        if accounted != handed {
            problems.push(format!(
                "{name}{handed} pages handed out, {} in the tree and {} free: {} lost",
                tree.len(),
                free.len(),
                handed as i64 - accounted as i64
            ));
        }
    }
}
