//! A map's pages: runs it owns, and a queue of pages freed by its commits.
//!
//! Everything that says which pages are in use is part of the map's entry in the root
//! table (the pool cursor and the free-page queue's ends), so it changes only with a
//! commit: a writer that dies before committing has taken nothing, and nothing leaks.
//! Runs are the exception, since they come from the store's allocator: each is recorded
//! in the map header, in the same redo list that takes it, before any page of it is used.
//!
//! The free-page queue is a FIFO of (page, commit) pairs in queue pages. A writer takes
//! from its head by moving the head position (no write: the committed queue stays
//! whole), and appends past the committed tail count (bytes no committed state reads).
//! A page freed by commit `c` is reused once every live reader reads a snapshot at or
//! after `c`.

use super::area::{self, Entry};
use super::tree::{give_back_list, spare_list};
use crate::error::{Error, Result};
use crate::format::*;
use crate::shared::Shared;
use crate::txn::Txn;
use std::cell::Cell;
use std::sync::atomic::Ordering::*;

/// Pages of run `r`: all of its chunks' pages but the first (the run header's).
pub(crate) fn run_pages(sh: &Shared, r: u64) -> u64 {
    run_chunks(r) * sh.g.chunk_size() / PAGE_BYTES - 1
}

/// Chunks of run `r` (doubling up to [`MAX_RUN_CHUNKS`]).
pub(crate) fn run_chunks(r: u64) -> u64 {
    (1u64 << r.min(6)).min(MAX_RUN_CHUNKS)
}

/// Pages the map has ever taken from its runs, as the pool cursor `pool` says.
pub(crate) fn pages_taken(sh: &Shared, pool: u64) -> u64 {
    let (r, i) = (pool >> 32, pool & 0xffff_ffff);
    (0..r).map(|q| run_pages(sh, q)).sum::<u64>() + i
}

thread_local! {
    /// The oldest snapshot read, as this thread last computed it: (store id, ordered
    /// area, commit). It only grows (a reader pins the current commit, never an older one:
    /// `area::pin`), so the next transaction starts from it and scans the pins only when
    /// the queue's head was freed after it, not once per transaction.
    static SAFE: Cell<(u64, u64, u64)> = const { Cell::new((u64::MAX, 0, 0)) };
}

/// A pool's state at a savepoint.
pub(crate) struct PoolMark {
    entry: Entry,
    recycled: Vec<u64>,
    freed: usize,
}

/// A write transaction's view of its map's pages.
pub(crate) struct Pool<'a> {
    pub tx: Txn<'a>,
    /// The map header.
    pub hdr: u64,
    /// The map's catalog id (its runs' owner).
    pub id: u64,
    /// The ordered area.
    pub area: u64,
    /// The entry as this transaction has changed it.
    pub entry: Entry,
    /// Pages taken and then dropped by this transaction: reusable at once.
    recycled: Vec<u64>,
    /// Pages this transaction frees for readers of older snapshots: queued at commit.
    freed: Vec<u64>,
    /// Queue entries written past the committed tail, whose commit number is stamped at
    /// commit: (page offset of the entry).
    unstamped: Vec<u64>,
    /// The oldest snapshot read, as last computed (pages freed at or below it are free).
    safe: u64,
}

impl<'a> Pool<'a> {
    /// The pool of the map at `hdr`, from its committed entry.
    pub fn new(tx: Txn<'a>, id: u64, hdr: u64, area: u64, entry: Entry) -> Pool<'a> {
        let (store, a, seq) = SAFE.get();
        let safe = if (store, a) == (tx.sh.id, area) {
            seq
        } else {
            0
        };
        Pool {
            tx,
            hdr,
            id,
            area,
            entry,
            recycled: spare_list(),
            freed: spare_list(),
            unstamped: spare_list(),
            safe,
        }
    }

    fn sh(&self) -> &'a Shared {
        self.tx.sh
    }

    /// What the pool has handed out so far ([`Pool::rewind`]).
    pub fn mark(&self) -> PoolMark {
        PoolMark {
            entry: self.entry,
            recycled: self.recycled.clone(),
            freed: self.freed.len(),
        }
    }

    /// Makes every page handed out since `m` free again: the pool cursor and the queue's
    /// head go back (nothing committed was written: they are the transaction's copy of the
    /// map's entry), and so does the list of pages it recycled. Runs taken from the store
    /// meanwhile stay the map's, recorded in its header, their pages unused.
    pub fn rewind(&mut self, m: PoolMark) {
        debug_assert!(
            self.unstamped.is_empty(),
            "rewound after queueing for commit"
        );
        self.entry = m.entry;
        self.recycled = m.recycled;
        self.freed.truncate(m.freed);
    }

    /// A page for the transaction.
    pub fn alloc(&mut self) -> Result<u64> {
        if let Some(p) = self.recycled.pop() {
            return Ok(p);
        }
        if let Some(p) = self.take_queued()? {
            return Ok(p);
        }
        self.take_new()
    }

    /// A page the transaction took and no longer uses.
    pub fn recycle(&mut self, page: u64) {
        self.recycled.push(page);
    }

    /// The head of the free-page queue, if a reader no longer needs it.
    fn take_queued(&mut self) -> Result<Option<u64>> {
        let sh = self.sh();
        let e = self.entry;
        if e.fq_head == 0 || (e.fq_head == e.fq_tail && e.fq_pos >= e.fq_tail_n) {
            return Ok(None);
        }
        if e.fq_pos == FQ_N {
            // The head page is used up: its successor is the head (the old head page
            // is free once this commit is older than every snapshot).
            let next = sh.w(e.fq_head).load(Acquire);
            if next == 0 || !self.page_ok(next) {
                return Err(sh.corrupt(format!(
                    "ordered map at {:#x}: free-page queue page {:#x} links to {next:#x}",
                    self.hdr, e.fq_head
                )));
            }
            let old = e.fq_head;
            let e = &mut self.entry;
            e.fq_head = next;
            e.fq_pos = 0;
            self.freed.push(old);
            return self.take_queued();
        }
        let at = e.fq_head + FQ_HDR + 16 * e.fq_pos;
        let (page, freed_at) = (sh.w(at).load(Acquire), sh.w(at + 8).load(Acquire));
        if freed_at > self.safe {
            self.safe = area::oldest_read(sh, self.area);
            SAFE.set((sh.id, self.area, self.safe));
            if freed_at > self.safe {
                return Ok(None);
            }
        }
        if !self.page_ok(page) {
            return Err(sh.corrupt(format!(
                "ordered map at {:#x}: free-page queue holds {page:#x}, not a page",
                self.hdr
            )));
        }
        self.entry.fq_pos += 1;
        Ok(Some(page))
    }

    /// Whether `page` is a page of a run (a check on what the queue holds).
    fn page_ok(&self, page: u64) -> bool {
        let sh = self.sh();
        page % PAGE_BYTES == 0 && page >= sh.g.chunks_off && page + PAGE_BYTES <= sh.file_end()
    }

    /// A page never used before, from the pool cursor (growing the pool by a run).
    fn take_new(&mut self) -> Result<u64> {
        let sh = self.sh();
        let (r, i) = (self.entry.pool >> 32, self.entry.pool & 0xffff_ffff);
        let nruns = sh.w(self.hdr + MO_NRUNS).load(Acquire);
        if r < nruns && i < run_pages(sh, r) {
            let run = sh.w(self.hdr + MO_RUNS + 8 * r).load(Acquire);
            self.entry.pool = r << 32 | (i + 1);
            return Ok(run + PAGE_BYTES * (1 + i));
        }
        let next = if r < nruns { r + 1 } else { r };
        if next >= MAX_RUNS {
            return Err(Error::StoreFull(format!(
                "ordered map at {:#x} holds its maximum of {MAX_RUNS} runs of pages",
                self.hdr
            )));
        }
        if next >= nruns {
            self.grow(next)?;
        }
        self.entry.pool = next << 32;
        self.take_new()
    }

    /// Takes run `r` from the store and records it in the map header.
    fn grow(&self, r: u64) -> Result<()> {
        let (tx, hdr, id) = (&self.tx, self.hdr, self.id);
        let k = run_chunks(r);
        crate::alloc::with_alloc_lock(tx, |redo| {
            let c = crate::alloc::take_run(tx, k, redo, crate::alloc::Purpose::Normal)?;
            redo.push(c + K_KIND, CK_INDEX);
            redo.push(c + K_RUN, k);
            redo.push(c + K_NEXT, tx.sh.w(hdr + MO_CHAIN).load(Acquire));
            redo.push(c + K_OWNER, id);
            redo.push(hdr + MO_CHAIN, c);
            redo.push(hdr + MO_RUNS + 8 * r, c);
            redo.push(hdr + MO_NRUNS, r + 1);
            Ok(())
        })
    }

    /// Writes the pages freed by this transaction into the queue (past the committed
    /// tail), ahead of the commit; their commit number is stamped by [`Pool::stamp`].
    pub fn queue_freed(&mut self) -> Result<()> {
        // Taking a queue page may free more (a used-up head): loop until settled.
        while let Some(page) = self.freed.pop() {
            self.append(page)?;
        }
        // Pages dropped unused go back as free at once (commit 0: always reusable).
        while let Some(page) = self.recycled.pop() {
            self.append_at(page, Some(0))?;
        }
        Ok(())
    }

    fn append(&mut self, page: u64) -> Result<()> {
        self.append_at(page, None)
    }

    fn append_at(&mut self, page: u64, seq: Option<u64>) -> Result<()> {
        let sh = self.sh();
        if self.entry.fq_tail == 0 || self.entry.fq_tail_n == FQ_N {
            // A queue page is any free page: from the queue itself if its head is free,
            // so that the queue's own pages circulate instead of growing the pool.
            let q = match self.recycled.pop() {
                Some(q) => q,
                None => match self.take_queued()? {
                    Some(q) => q,
                    None => self.take_new()?,
                },
            };
            sh.w(q).store(0, Release);
            if self.entry.fq_tail == 0 {
                self.entry.fq_head = q;
                self.entry.fq_pos = 0;
            } else {
                // The old tail's link: no committed state follows it (the committed tail
                // is that page, and a head stops at the tail).
                sh.w(self.entry.fq_tail).store(q, Release);
            }
            self.entry.fq_tail = q;
            self.entry.fq_tail_n = 0;
        }
        let at = self.entry.fq_tail + FQ_HDR + 16 * self.entry.fq_tail_n;
        sh.w(at).store(page, Release);
        match seq {
            Some(s) => sh.w(at + 8).store(s, Release),
            None => {
                // Never reusable until the commit stamps it: this transaction may itself
                // take pages from the queue's head (for a queue page) before it commits,
                // and the head may reach the entries it appended, whose pages a live
                // snapshot may still read. A stale word there would hand one out.
                sh.w(at + 8).store(u64::MAX, Release);
                self.unstamped.push(at + 8);
            }
        }
        self.entry.fq_tail_n += 1;
        Ok(())
    }

    /// Committed pages the transaction replaced: free for snapshots after this commit.
    pub fn free_all(&mut self, pages: &[u64]) {
        self.freed.extend_from_slice(pages);
    }

    /// Stamps the queue entries of this transaction with its commit number.
    pub fn stamp(&self, seq: u64) {
        for at in &self.unstamped {
            self.sh().w(*at).store(seq, Release);
        }
    }
}

impl Drop for Pool<'_> {
    fn drop(&mut self) {
        for v in [&mut self.recycled, &mut self.freed, &mut self.unstamped] {
            give_back_list(std::mem::take(v));
        }
    }
}
