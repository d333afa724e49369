//! Logs: a ring of fixed-size record slots in the store file that any thread of any
//! process appends to without a lock, and named readers drain in reservation order
//! (FORMAT.md, "Logs").
//!
//! A writer announces itself in its entry of the writer table (one per txn slot), takes a
//! sequence number from the tail (a fetch-add; a compare-and-swap when the ring must not
//! pass its slowest reader), claims the slot of that number, writes the record and
//! publishes it by storing the slot's state last. A reader stops at the first slot not
//! yet published; if no live writer can hold that sequence number (the writer table says
//! who may), the writer died between reserving and publishing, and the reader turns the
//! slot into a hole and goes on. Nothing in an append waits on another writer, and
//! nothing is recovered through a txn intent: every step is one atomic word.

pub(crate) mod append;
mod kind;
pub(crate) mod read;

pub(crate) use append::{append, Draft};
pub(crate) use read::{read_next, Next, RawBatch, RawHead};

use crate::error::{Error, Result};
use crate::format::*;
use crate::shared::Shared;
use std::sync::atomic::Ordering::*;
use std::time::Duration;

/// An open log: its geometry, read from its header and checked against the file once, at
/// open.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LogRef {
    /// Catalog id.
    pub id: u64,
    /// The catalog state word when opened: a different one means the log was dropped.
    pub cat_word: u64,
    /// Header offset; the log's one run starts `CHUNK_HDR` before it.
    pub hdr: u64,
    /// End of the log's slots.
    pub end: u64,
    /// Slots in the ring.
    pub slots: u64,
    /// Most payload bytes of a record.
    pub max_record: u64,
    pub stride: u64,
    /// Reader entries.
    pub readers: u64,
    pub reader_tab: u64,
    pub writer_tab: u64,
    pub slot_tab: u64,
    /// `LP_OVERWRITE`, `LP_WAIT` or `LP_DROP`.
    pub policy: u64,
}

/// A slot's stride: its header and payload rounded up to a cache line.
pub(crate) fn stride_of(max_record: u64) -> u64 {
    (SLOT_HDR + max_record).next_multiple_of(64)
}

/// How a new log is laid out: (reader table, writer table, slots, end) offsets relative
/// to the header, in a store of `n_txn` txn slots.
pub(crate) fn layout(
    n_txn: u64,
    slots: u64,
    max_record: u64,
    readers: u64,
) -> (u64, u64, u64, u64) {
    let stride = stride_of(max_record);
    let rt = LOG_HEADER;
    let wt = rt + readers * READER_ENTRY;
    // Slots of a page or more start on a page, so that each covers whole pages.
    let align = if stride >= 4096 { 4096 } else { 64 };
    let st = (CHUNK_HDR + wt + n_txn * WRITER_ENTRY).next_multiple_of(align) - CHUNK_HDR;
    (rt, wt, st, st + slots * stride)
}

/// Bytes a new log's run needs (from the run's start).
pub(crate) fn run_need(n_txn: u64, slots: u64, max_record: u64, readers: u64) -> u64 {
    CHUNK_HDR + layout(n_txn, slots, max_record, readers).3
}

/// Writes a new log into the run at `c` (taken, not yet published): its header and
/// zeroed tables and slots.
pub(crate) fn init_log(
    sh: &Shared,
    c: u64,
    id: u64,
    slots: u64,
    max_record: u64,
    readers: u64,
    policy: u64,
) -> LogRef {
    let hdr = c + CHUNK_HDR;
    let (rt, wt, st, end) = layout(sh.g.n_txn, slots, max_record, readers);
    let zeros = vec![0u8; 1 << 16];
    let mut o = hdr;
    while o < hdr + end {
        let n = (hdr + end - o).min(zeros.len() as u64);
        sh.r.write_bytes(o, &zeros[..n as usize]);
        o += n;
    }
    let lg = LogRef {
        id,
        cat_word: 0,
        hdr,
        end: hdr + end,
        slots,
        max_record,
        stride: stride_of(max_record),
        readers,
        reader_tab: hdr + rt,
        writer_tab: hdr + wt,
        slot_tab: hdr + st,
        policy,
    };
    sh.w(hdr + LH_FLAGS).store(policy, Relaxed);
    sh.w(hdr + LH_CHAIN).store(c, Relaxed);
    sh.w(hdr + LH_SLOTS).store(slots, Relaxed);
    sh.w(hdr + LH_MAX_RECORD).store(max_record, Relaxed);
    sh.w(hdr + LH_STRIDE).store(lg.stride, Relaxed);
    sh.w(hdr + LH_READERS).store(readers, Relaxed);
    sh.w(hdr + LH_READER_TAB).store(lg.reader_tab, Relaxed);
    sh.w(hdr + LH_WRITER_TAB).store(lg.writer_tab, Relaxed);
    sh.w(hdr + LH_SLOT_TAB).store(lg.slot_tab, Release);
    lg
}

/// Whether catalog entry `id` is a log (live or not: its kind word says).
pub(crate) fn is_log(sh: &Shared, id: u64) -> bool {
    id < sh.g.n_catalog && sh.w(sh.g.cat_entry(id) + C_KIND).load(Acquire) == KIND_LOG
}

/// Opens the log of catalog entry `id` (whatever its state), checking every word of its
/// header against the file: from here on its offsets are trusted.
pub(crate) fn log_ref_unchecked(sh: &Shared, id: u64) -> Result<LogRef> {
    let ce = sh.g.cat_entry(id);
    let cat_word = sh.w(ce + C_STATE).load(Acquire);
    let hdr = sh.w(ce + C_HDR).load(Acquire);
    let bad = |what: String| sh.corrupt(format!("log {id}: {what}"));
    if !sh.g.logs {
        return Err(bad(
            "a catalog entry of kind 3 in a store without LOGS".into()
        ));
    }
    let (_, run_end) = crate::object::own_run(sh, id, hdr).map_err(bad)?;
    let word = |o: u64| sh.w(hdr + o).load(Acquire);
    let (flags, slots, max_record, readers) = (
        word(LH_FLAGS),
        word(LH_SLOTS),
        word(LH_MAX_RECORD),
        word(LH_READERS),
    );
    if flags > LP_DROP
        || !(2..=MAX_LOG_SLOTS).contains(&slots)
        || !(1..=MAX_LOG_RECORD).contains(&max_record)
        || !(1..=MAX_LOG_READERS).contains(&readers)
    {
        return Err(bad(format!(
            "header (flags {flags:#x}, {slots} slots of {max_record} bytes, {readers} \
             readers) out of range"
        )));
    }
    let (rt, wt, st, e) = layout(sh.g.n_txn, slots, max_record, readers);
    let lg = LogRef {
        id,
        cat_word,
        hdr,
        end: hdr + e,
        slots,
        max_record,
        stride: stride_of(max_record),
        readers,
        reader_tab: hdr + rt,
        writer_tab: hdr + wt,
        slot_tab: hdr + st,
        policy: flags,
    };
    if word(LH_STRIDE) != lg.stride
        || word(LH_READER_TAB) != lg.reader_tab
        || word(LH_WRITER_TAB) != lg.writer_tab
        || word(LH_SLOT_TAB) != lg.slot_tab
        || lg.end > run_end
    {
        return Err(bad(format!(
            "its layout words do not match its geometry, or its slots end past its run \
             ({:#x} > {run_end:#x})",
            lg.end
        )));
    }
    Ok(lg)
}

impl LogRef {
    /// The slot of sequence number `seq`.
    #[inline]
    pub fn slot(&self, seq: u64) -> u64 {
        self.slot_tab + (seq % self.slots) * self.stride
    }
    /// Txn slot `t`'s entry in the writer table.
    #[inline]
    pub fn writer(&self, t: u64) -> u64 {
        self.writer_tab + t * WRITER_ENTRY
    }
    /// Reader entry `i`.
    #[inline]
    pub fn reader(&self, i: u64) -> u64 {
        debug_assert!(i < self.readers);
        self.reader_tab + i * READER_ENTRY
    }

    /// Whether the log is still the one opened (not dropped, nor being dropped).
    #[inline]
    pub fn alive(&self, sh: &Shared) -> bool {
        sh.w(sh.g.cat_entry(self.id) + C_STATE).load(SeqCst) == self.cat_word
    }

    pub fn dropped(&self) -> Error {
        Error::NotFound(format!("log {} was dropped", self.id))
    }

    /// Whether a live writer may hold sequence number `seq` (reserved and not published
    /// yet): some entry of the writer table says it is writing `seq`, or reserving at or
    /// below it, and its process is alive. A false answer is final only if the slot was
    /// looked at after it (see FORMAT.md, "A hole"). `cache` keeps the liveness of the
    /// owners looked at, for one scan.
    pub fn seq_owner_alive(&self, sh: &Shared, seq: u64) -> bool {
        let mut seen: Vec<(u64, bool)> = Vec::new();
        for t in 0..sh.g.n_txn {
            let e = self.writer(t);
            let st = sh.w(e + W_STATE).load(SeqCst);
            let covers = match st & !W_SEQ_MASK {
                W_RESERVING => st & W_SEQ_MASK <= seq,
                W_WRITING => st & W_SEQ_MASK == seq,
                _ => false,
            };
            if !covers {
                continue;
            }
            let owner = sh.w(e + W_OWNER).load(SeqCst);
            // The state must be the owner's: an entry taken over by another process
            // clears the state before it names itself (see `append`).
            if sh.w(e + W_STATE).load(SeqCst) != st {
                return true; // it changed under us: look again later
            }
            let alive = match seen.iter().find(|(o, _)| *o == owner) {
                Some((_, a)) => *a,
                None => {
                    let a = sh.owner_alive(owner);
                    seen.push((owner, a));
                    a
                }
            };
            if alive {
                return true;
            }
        }
        false
    }

    /// Waits until no live thread is inside the log (a drop, once the catalog entry is
    /// marked dropping: later calls see it and stay out), at most `timeout`.
    pub fn wait_out(&self, sh: &Shared, timeout: Duration) -> Result<()> {
        std::sync::atomic::fence(SeqCst);
        let w = crate::deadline::Wait::begin(timeout, Duration::MAX);
        for t in 0..sh.g.n_txn {
            let e = self.writer(t);
            let mut spins = 0u32;
            loop {
                let st = sh.w(e + W_STATE).load(SeqCst);
                if st == W_IDLE || !sh.owner_alive(sh.w(e + W_OWNER).load(SeqCst)) {
                    break;
                }
                if w.expired() {
                    return Err(w.timeout());
                }
                spins += 1;
                if spins < 100 {
                    crate::rt::yield_now();
                } else {
                    crate::rt::sleep(Duration::from_micros(100));
                }
            }
        }
        Ok(())
    }

    /// Wakes writers waiting for room, if any.
    #[inline]
    pub fn wake_room(&self, sh: &Shared) {
        std::sync::atomic::fence(SeqCst);
        if sh.w(self.hdr + LH_ROOM_WAITERS).load(Relaxed) != 0 {
            wake_all(sh, self.hdr + LH_ROOM);
        }
    }

    /// Wakes readers asleep waiting for a record, if any.
    #[inline]
    pub fn wake_readers(&self, sh: &Shared) {
        std::sync::atomic::fence(SeqCst);
        if sh.w(self.hdr + LH_SLEEPERS).load(Relaxed) != 0 {
            wake_all(sh, self.hdr + LH_WAKE);
        }
    }

    /// The name of reader entry `i`, as its bytes say (lossily decoded).
    pub fn reader_name(&self, sh: &Shared, i: u64) -> String {
        let e = self.reader(i);
        let n = (sh.w(e + R_NAME_LEN).load(Acquire) as usize).min(MAX_READER_NAME);
        let mut b = vec![0u8; n];
        sh.r.read_bytes(e + R_NAME, &mut b);
        String::from_utf8_lossy(&b).into_owned()
    }

    /// The smallest cursor of the log's readers, None when it has none.
    pub fn min_cursor(&self, sh: &Shared) -> Option<u64> {
        (0..self.readers)
            .filter(|i| sh.w(self.reader(*i) + R_STATE).load(SeqCst) & 0xff == 1)
            .map(|i| sh.w(self.reader(i) + R_CURSOR).load(SeqCst))
            .min()
    }
}

#[cold]
#[cfg(not(shuttle))]
fn wake_all(sh: &Shared, word: u64) {
    let w = sh.r.futex_word(word);
    w.fetch_add(1, Release);
    crate::sys::futex_wake(w, i32::MAX as u32);
}

#[cfg(shuttle)]
fn wake_all(_: &Shared, _: u64) {}

/// The value of the futex word at `word`, to sleep on with [`sleep_on`] (0 under the
/// model checker, whose sleepers only yield).
pub(crate) fn futex_seen(sh: &Shared, word: u64) -> u32 {
    #[cfg(not(shuttle))]
    return sh.r.futex_word(word).load(Acquire);
    #[cfg(shuttle)]
    {
        let _ = (sh, word);
        0
    }
}

/// Sleeps on the futex word at `word` while it holds `seen`, at most `timeout`.
pub(crate) fn sleep_on(sh: &Shared, word: u64, seen: u32, timeout: Duration) {
    #[cfg(not(shuttle))]
    crate::sys::futex_wait(sh.r.futex_word(word), seen, timeout);
    #[cfg(shuttle)]
    {
        let _ = (sh, word, seen, timeout);
        crate::rt::yield_now();
    }
}
