//! The log as a [`Kind`] of object: its check, its rebuild in repair, its figures and its
//! drop. It keeps no records in data chunks: its records live in its own ring.

use super::read::parse_fields;
use super::LogRef;
use crate::error::Result;
use crate::format::*;
use crate::object::{CheckCtx, Kind, ObjectStats, RepairCtx};
use crate::shared::Shared;
use crate::txn::Txn;
use std::sync::atomic::Ordering::*;
use std::time::Duration;

impl LogRef {
    /// Every invariant of the log, each violation reported through `bad`; returns the
    /// records it holds published.
    pub fn check_log(&self, sh: &Shared, bad: &mut dyn FnMut(String)) -> u64 {
        let h = |o: u64| sh.w(self.hdr + o).load(Acquire);
        let tail = h(LH_TAIL);
        if tail >= W_SEQ_MASK {
            bad(format!("tail {tail:#x} out of range"));
            return 0;
        }
        if h(LH_FLOOR) > tail {
            bad(format!("floor {} is past the tail {tail}", h(LH_FLOOR)));
        }
        let mut names = std::collections::HashSet::new();
        for i in 0..self.readers {
            let e = self.reader(i);
            let st = sh.w(e + R_STATE).load(Acquire) & 0xff;
            if st == 0 {
                continue;
            }
            let name = self.reader_name(sh, i);
            let n = sh.w(e + R_NAME_LEN).load(Acquire);
            let cursor = sh.w(e + R_CURSOR).load(Acquire);
            if st != 1 {
                bad(format!("reader entry {i}: state {st:#x}"));
                continue;
            }
            if n == 0 || n > MAX_READER_NAME as u64 || !names.insert(name.clone()) {
                bad(format!(
                    "reader {i}: name {name:?} (length {n}) empty, too long or given twice"
                ));
            }
            if cursor > tail {
                bad(format!(
                    "reader {name:?}: cursor {cursor} is past the tail {tail}"
                ));
            } else if self.policy != LP_OVERWRITE && tail - cursor > self.slots {
                bad(format!(
                    "reader {name:?}: cursor {cursor} is more than a ring ({}) behind the \
                     tail {tail}, which its policy never lets writers do",
                    self.slots
                ));
            }
        }
        for t in 0..sh.g.n_txn {
            let e = self.writer(t);
            let (owner, st) = (
                sh.w(e + W_OWNER).load(Acquire),
                sh.w(e + W_STATE).load(Acquire),
            );
            if owner != 0 && owner & 1 == 0 {
                bad(format!(
                    "writer entry {t}: owner {owner:#x} is not an owner word"
                ));
            }
            let seq = st & W_SEQ_MASK;
            let ok = match st & !W_SEQ_MASK {
                W_IDLE | W_INSIDE => seq == 0,
                W_RESERVING => seq <= tail,
                _ => seq < tail,
            };
            if !ok {
                bad(format!(
                    "writer entry {t}: state {st:#x} (the tail is {tail})"
                ));
            }
        }
        let mut published = 0;
        let mut payload = Vec::new();
        for i in 0..self.slots {
            let so = self.slot_tab + i * self.stride;
            let st = sh.w(so + S_STATE).load(Acquire);
            if st == 0 {
                continue;
            }
            let (s, status) = (st >> 2, st & 3);
            if s % self.slots != i || s >= tail || status == RS_EMPTY {
                bad(format!(
                    "slot {i}: state {st:#x} names sequence number {s} (status {status}); \
                     the ring has {} slots and its tail is {tail}",
                    self.slots
                ));
                continue;
            }
            if status != RS_PUBLISHED {
                continue;
            }
            let w = |o: u64| sh.w(so + o).load(Acquire);
            let (lv, ml, pl) = (w(S_LEVEL), w(S_MSG_LEN), w(S_PAYLOAD_LEN));
            sh.r.read_to_vec(
                so + SLOT_HDR,
                pl.min(self.max_record) as usize,
                &mut payload,
            );
            let fields = (lv >> 8) & 0xffff;
            if let Err(why) = parse_fields(&payload, ml, fields, pl, lv, self.max_record) {
                bad(format!("record {s} (slot {i}): {why}"));
                continue;
            }
            published += 1;
        }
        published
    }
}

impl Kind for LogRef {
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
        let name = crate::object::object_name(ck.sh, self.id);
        let prefix = format!("log {name:?}: ");
        if !ck.in_index(self.hdr - CHUNK_HDR, self.end - (self.hdr - CHUNK_HDR)) {
            ck.bad(format!(
                "{prefix}its tables and slots lie outside its index run"
            ));
            return;
        }
        let sh = ck.sh;
        let mut problems = Vec::new();
        let n = self.check_log(sh, &mut |p| problems.push(format!("{prefix}{p}")));
        for p in problems {
            ck.bad(p);
        }
        ck.lock_ok(self.hdr + LH_READERS_LOCK, &prefix, "readers");
        ck.entries += n;
    }

    fn drop_untrusted(&self, _: &Shared, _: &mut RepairCtx) -> Result<()> {
        Ok(()) // no records in data chunks to distrust
    }

    fn rebuild(&self, sh: &Shared, rep: &mut RepairCtx) -> Result<()> {
        // Repair runs alone: every writer is dead. A slot one of them was writing will
        // never be published; its readers pass it as a hole.
        let mut holes = 0;
        for i in 0..self.slots {
            let so = self.slot_tab + i * self.stride;
            let st = sh.w(so + S_STATE).load(Relaxed);
            if st != 0 && st & 3 == RS_WRITING {
                sh.w(so + S_STATE)
                    .store(slot_state(st >> 2, RS_HOLE), Relaxed);
                holes += 1;
            }
        }
        for t in 0..sh.g.n_txn {
            sh.w(self.writer(t) + W_STATE).store(W_IDLE, Relaxed);
        }
        for o in [LH_READERS_LOCK, LH_SLEEPERS, LH_ROOM_WAITERS] {
            sh.w(self.hdr + o).store(0, Relaxed);
        }
        rep.rebuilt.push(format!(
            "log {:?}: writer table, reader lock, sleepers; {holes} records left unpublished \
             by dead writers became holes",
            rep.name
        ));
        Ok(())
    }

    fn drop_barrier(&self, tx: &Txn) -> Result<()> {
        tx.lock(self.hdr + LH_READERS_LOCK)?;
        tx.unlock(self.hdr + LH_READERS_LOCK);
        self.wait_out(tx.sh, tx.timeout)
    }

    fn stats(&self, sh: &Shared) -> Result<ObjectStats> {
        let tail = sh.w(self.hdr + LH_TAIL).load(Acquire);
        Ok(ObjectStats {
            entries: tail.min(self.slots),
            live_bytes: self.slots * self.stride,
            index_bytes: self.end - (self.hdr - CHUNK_HDR),
            ..ObjectStats::default()
        })
    }
}
