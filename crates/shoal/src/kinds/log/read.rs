//! Reads: a named reader's cursor walks the ring in sequence order, stopping at the first
//! record not yet published by a live writer.

use super::LogRef;
use crate::error::{Error, Result};
use crate::format::*;
use crate::shared::Shared;
use std::sync::atomic::{fence, Ordering::*};

/// The words of one record copied out of its slot; its payload is a range of the
/// [`RawBatch`]'s bytes.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RawHead {
    pub seq: u64,
    pub time: u64,
    pub pid: u32,
    pub tid: u32,
    pub level: u8,
    pub fields: u64,
    pub msg_len: u64,
    /// Where its payload (the message, then the fields, each: key length and value length
    /// as u32, key, value; checked to parse) starts in the batch's bytes, and its length.
    pub start: usize,
    pub len: usize,
}

/// Records copied out of consecutive slots: their words, and their payloads back to back
/// in one buffer, so a reader that keeps its batch allocates nothing per record.
#[derive(Clone, Debug, Default)]
pub(crate) struct RawBatch {
    pub heads: Vec<RawHead>,
    pub bytes: Vec<u8>,
}

impl RawBatch {
    pub fn clear(&mut self) {
        self.heads.clear();
        self.bytes.clear();
    }

    /// The payload of record `i`.
    pub fn payload(&self, i: usize) -> &[u8] {
        let h = &self.heads[i];
        &self.bytes[h.start..h.start + h.len]
    }
}

/// What a read found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Records (at least one), copied into the caller's batch; the cursor moved past them.
    Record,
    /// Every reserved record was read.
    Empty,
    /// The next record is reserved by a live writer that has not published it yet.
    Pending,
}

/// How many times a read looks again at a slot being written before it asks whether its
/// writer is alive (a writer usually publishes within a few hundred nanoseconds).
const SPINS: u32 = 64;

/// Reads the next records of the reader whose entry is `re` (state word `rstate`), at most
/// `max` (at least 1), into `out` (cleared first), through txn slot `t`.
pub(crate) fn read_next(
    sh: &Shared,
    lg: &LogRef,
    t: u64,
    re: u64,
    rstate: u64,
    max: usize,
    out: &mut RawBatch,
) -> Result<Next> {
    out.clear();
    let we = lg.writer(t);
    let me = sh.owner_word.load(Relaxed);
    if sh.w(we + W_OWNER).load(Relaxed) != me {
        sh.w(we + W_STATE).store(W_IDLE, SeqCst);
        sh.w(we + W_OWNER).store(me, SeqCst);
    }
    // Inside the log: a drop waits for us to leave before its space is reused.
    sh.w(we + W_STATE).store(W_INSIDE, SeqCst);
    let r = if !lg.alive(sh) {
        Err(lg.dropped())
    } else if sh.w(re + R_STATE).load(Acquire) != rstate {
        Err(Error::NotFound(format!(
            "the reader of log {} was removed",
            lg.id
        )))
    } else {
        next(sh, lg, re, max.max(1) as u64, out)
    };
    sh.w(we + W_STATE).store(W_IDLE, Release);
    r
}

fn next(sh: &Shared, lg: &LogRef, re: u64, max: u64, out: &mut RawBatch) -> Result<Next> {
    let cursor = sh.w(re + R_CURSOR);
    let tail = sh.w(lg.hdr + LH_TAIL);
    let mut spins = 0u32;
    loop {
        let c = cursor.load(SeqCst);
        let tl = tail.load(SeqCst);
        if tl >= W_SEQ_MASK {
            return Err(sh.corrupt(format!("log {}: tail {tl:#x} out of range", lg.id)));
        }
        if c >= tl {
            return Ok(Next::Empty);
        }
        if tl - c > lg.slots {
            // Lapped (overwrite policy): the records below `tl - N` are gone.
            let to = tl - lg.slots;
            if advance(sh, lg, re, c, to) {
                sh.w(re + R_MISSED).fetch_add(to - c, Relaxed);
            }
            continue;
        }
        // The published records from `c` on, each copied and then checked not to have been
        // overwritten during its copy; the cursor moves past all of them at once.
        let mut k = c;
        while k < tl.min(c + max) {
            let so = lg.slot(k);
            let st = sh.w(so + S_STATE).load(SeqCst);
            if st != slot_state(k, RS_PUBLISHED) {
                break;
            }
            let (lv, pl) = copy(sh, lg, so, k, out);
            fence(Acquire);
            if sh.w(so + S_STATE).load(SeqCst) != st {
                // Overwritten during the copy: the next look counts it missed.
                let h = out.heads.pop().expect("just pushed");
                out.bytes.truncate(h.start);
                break;
            }
            let h = *out.heads.last().expect("just pushed");
            let payload = &out.bytes[h.start..];
            if let Err(why) = parse_fields(payload, h.msg_len, h.fields, pl, lv, lg.max_record) {
                return Err(sh.corrupt(format!("log {}: record {k} at {so:#x}: {why}", lg.id)));
            }
            k += 1;
        }
        if k > c {
            if advance(sh, lg, re, c, k) {
                return Ok(Next::Record);
            }
            out.clear();
            continue; // another handle of the same reader took them
        }
        let so = lg.slot(c);
        let st = sh.w(so + S_STATE).load(SeqCst);
        let (s, status) = (st >> 2, st & 3);
        if st != 0 && s > c {
            // Overwritten by a newer record while we looked.
            if advance(sh, lg, re, c, c + 1) {
                sh.w(re + R_MISSED).fetch_add(1, Relaxed);
            }
            continue;
        }
        if s == c && status == RS_PUBLISHED {
            continue; // published since the look above
        }
        if s == c && status == RS_HOLE {
            if advance(sh, lg, re, c, c + 1) {
                sh.w(re + R_SKIPPED).fetch_add(1, Relaxed);
            }
            continue;
        }
        // Reserved, not published: its writer is at work, or died.
        if spins < SPINS {
            spins += 1;
            std::hint::spin_loop();
            continue;
        }
        if lg.seq_owner_alive(sh, c) {
            return Ok(Next::Pending);
        }
        // No live writer holds `c`, and the slot was looked at again after the writer
        // table: if it still shows no record of `c`, none will ever come.
        crate::rt::failpoint!("log.hole");
        if sh
            .w(so + S_STATE)
            .compare_exchange(st, slot_state(c, RS_HOLE), SeqCst, Relaxed)
            .is_ok()
        {
            sh.w(lg.hdr + LH_HOLES).fetch_add(1, Relaxed);
        }
        spins = 0;
    }
}

/// Moves the reader's cursor from `from` to `to`; false if it had moved already (another
/// handle on the same reader). Wakes writers waiting for room.
fn advance(sh: &Shared, lg: &LogRef, re: u64, from: u64, to: u64) -> bool {
    let ok = sh
        .w(re + R_CURSOR)
        .compare_exchange(from, to, SeqCst, Relaxed)
        .is_ok();
    if ok && lg.policy == LP_WAIT {
        lg.wake_room(sh);
    }
    ok
}

/// Appends the record of slot `so` (sequence `seq`) to `out`; lengths are bounded by
/// the slot, so a torn copy reads no byte outside it. Returns its level and payload-length
/// words as the slot gave them, for [`parse_fields`].
fn copy(sh: &Shared, lg: &LogRef, so: u64, seq: u64, out: &mut RawBatch) -> (u64, u64) {
    let w = |o: u64| sh.w(so + o).load(Relaxed);
    let (time, pt, lv, ml, pl) = (
        w(S_TIME),
        w(S_PID_TID),
        w(S_LEVEL),
        w(S_MSG_LEN),
        w(S_PAYLOAD_LEN),
    );
    let n = pl.min(lg.max_record) as usize;
    let start = out.bytes.len();
    out.bytes.resize(start + n, 0);
    sh.r.read_bytes(so + SLOT_HDR, &mut out.bytes[start..]);
    out.heads.push(RawHead {
        seq,
        time,
        pid: pt as u32,
        tid: (pt >> 32) as u32,
        level: lv as u8,
        fields: (lv >> 8) & 0xffff,
        msg_len: ml,
        start,
        len: n,
    });
    (lv, pl)
}

/// Whether a record's words and payload agree: payload length `pl` within the slot,
/// level word `lv` with no stray bits, the message (`msg_len` bytes) within the payload,
/// and exactly its `fields` fields after it. The reason when not.
pub(crate) fn parse_fields(
    payload: &[u8],
    msg_len: u64,
    fields: u64,
    pl: u64,
    lv: u64,
    max: u64,
) -> std::result::Result<(), String> {
    if pl > max || msg_len > pl || lv >> 24 != 0 {
        return Err(format!(
            "payload of {pl} bytes (message {msg_len}, level word {lv:#x}) does not fit a slot of {max}"
        ));
    }
    let p = payload;
    let mut o = msg_len as usize;
    for i in 0..fields {
        if o + 8 > p.len() {
            return Err(format!("field {i} runs past the payload"));
        }
        let k = u32::from_le_bytes(p[o..o + 4].try_into().expect("4 bytes")) as usize;
        let v = u32::from_le_bytes(p[o + 4..o + 8].try_into().expect("4 bytes")) as usize;
        o = o
            .checked_add(8 + k)
            .and_then(|x| x.checked_add(v))
            .filter(|x| *x <= p.len())
            .ok_or_else(|| format!("field {i} runs past the payload"))?;
    }
    if o != p.len() {
        return Err(format!("{} bytes after the last field", p.len() - o));
    }
    Ok(())
}
