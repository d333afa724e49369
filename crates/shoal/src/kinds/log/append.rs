//! Appends: reserve a sequence number, claim its slot, write, publish.

use super::LogRef;
use crate::error::{Error, Result};
use crate::format::*;
use crate::shared::Shared;
use std::sync::atomic::Ordering::*;
use std::time::Duration;

/// A record to append: its level, its message and its fields (key, value).
pub(crate) struct Draft<'a> {
    pub level: u8,
    pub message: &'a [u8],
    pub fields: &'a [(&'a [u8], &'a [u8])],
}

impl Draft<'_> {
    /// Bytes of the payload: the message, then each field's two lengths, key and value.
    pub fn payload_len(&self) -> u64 {
        self.message.len() as u64
            + self
                .fields
                .iter()
                .map(|(k, v)| FIELD_HDR + k.len() as u64 + v.len() as u64)
                .sum::<u64>()
    }
}

/// How long a writer spins on a slot or on a full ring before it sleeps.
const SPINS: u32 = 100;
/// The longest a writer waiting for room sleeps before it looks again: a reader that
/// dies leaves no wake-up behind.
const ROOM_NAP: Duration = Duration::from_millis(10);

/// Appends `d` to the log through txn slot `t`: the sequence number it was given, or None
/// when the log was full and its policy drops. The caller checked the record's size.
/// Waits (for room under the wait policy; for a live writer still in the slot under the
/// overwrite policy) at most `timeout`.
pub(crate) fn append(
    sh: &Shared,
    lg: &LogRef,
    t: u64,
    section: &crate::txn::Section<'_>,
    d: &Draft<'_>,
    timeout: Duration,
) -> Result<Option<u64>> {
    let we = lg.writer(t);
    let me = sh.owner_word.load(Relaxed);
    if sh.w(we + W_OWNER).load(Relaxed) != me {
        // A state left by a thread of a process that used this txn slot before: cleared
        // before the entry names us, so that no reader takes it for ours.
        sh.w(we + W_STATE).store(W_IDLE, SeqCst);
        sh.w(we + W_OWNER).store(me, SeqCst);
    }
    let tail = sh.w(lg.hdr + LH_TAIL);
    sh.w(we + W_STATE)
        .store(W_RESERVING | tail.load(SeqCst), SeqCst);
    let r = reserve_and_write(sh, lg, we, section, d, timeout);
    sh.w(we + W_STATE).store(W_IDLE, Release);
    if let Ok(Some(_)) = r {
        lg.wake_readers(sh);
    }
    r
}

fn reserve_and_write(
    sh: &Shared,
    lg: &LogRef,
    we: u64,
    section: &crate::txn::Section<'_>,
    d: &Draft<'_>,
    timeout: Duration,
) -> Result<Option<u64>> {
    // After announcing ourselves (SeqCst, as a drop reads it after marking the entry).
    if !lg.alive(sh) {
        return Err(lg.dropped());
    }
    crate::rt::failpoint!("log.reserving");
    let Some(seq) = reserve(sh, lg, section, timeout)? else {
        return Ok(None);
    };
    sh.w(we + W_STATE).store(W_WRITING | seq, SeqCst);
    crate::rt::failpoint!("log.reserved");
    let so = lg.slot(seq);
    if !claim(sh, lg, so, seq, timeout)? {
        // Overwritten before we claimed it (overwrite policy): readers count it missed.
        return Ok(Some(seq));
    }
    crate::rt::failpoint!("log.claimed");
    let (pid, tid) = crate::sys::pid_tid();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    sh.w(so + S_TIME).store(now, Relaxed);
    sh.w(so + S_PID_TID)
        .store(pid as u64 | (tid as u64) << 32, Relaxed);
    sh.w(so + S_LEVEL)
        .store(d.level as u64 | (d.fields.len() as u64) << 8, Relaxed);
    sh.w(so + S_MSG_LEN).store(d.message.len() as u64, Relaxed);
    sh.w(so + S_PAYLOAD_LEN).store(d.payload_len(), Relaxed);
    let mut o = so + SLOT_HDR;
    sh.r.write_bytes(o, d.message);
    o += d.message.len() as u64;
    crate::rt::failpoint!("log.half_written");
    for (k, v) in d.fields {
        let mut lens = [0u8; 8];
        lens[..4].copy_from_slice(&(k.len() as u32).to_le_bytes());
        lens[4..].copy_from_slice(&(v.len() as u32).to_le_bytes());
        sh.r.write_bytes(o, &lens);
        sh.r.write_bytes(o + 8, k);
        sh.r.write_bytes(o + 8 + k.len() as u64, v);
        o += FIELD_HDR + k.len() as u64 + v.len() as u64;
    }
    crate::rt::failpoint!("log.written");
    sh.w(so + S_STATE)
        .store(slot_state(seq, RS_PUBLISHED), SeqCst);
    crate::rt::failpoint!("log.published");
    Ok(Some(seq))
}

/// Takes the next sequence number: a fetch-add under the overwrite policy; under the
/// others a compare-and-swap that never passes the slowest reader by a whole ring (a
/// fetch-add past the room would own a number with no slot to write it in). None: the
/// ring is full and the policy drops.
fn reserve(
    sh: &Shared,
    lg: &LogRef,
    section: &crate::txn::Section<'_>,
    timeout: Duration,
) -> Result<Option<u64>> {
    let tail = sh.w(lg.hdr + LH_TAIL);
    if lg.policy == LP_OVERWRITE {
        let s = tail.fetch_add(1, SeqCst);
        if s >= W_SEQ_MASK {
            return Err(sh.corrupt(format!("log {}: tail {s:#x} out of range", lg.id)));
        }
        return Ok(Some(s));
    }
    let floor = sh.w(lg.hdr + LH_FLOOR);
    let mut wait: Option<crate::deadline::Wait> = None;
    let mut spins = 0u32;
    loop {
        let t0 = tail.load(SeqCst);
        if t0 >= W_SEQ_MASK {
            return Err(sh.corrupt(format!("log {}: tail {t0:#x} out of range", lg.id)));
        }
        if t0 - floor.load(SeqCst).min(t0) < lg.slots || room(sh, lg, t0) {
            if tail.compare_exchange(t0, t0 + 1, SeqCst, Relaxed).is_ok() {
                return Ok(Some(t0));
            }
            continue;
        }
        if lg.policy == LP_DROP {
            sh.w(lg.hdr + LH_DROPPED).fetch_add(1, Relaxed);
            return Ok(None);
        }
        let w = *wait.get_or_insert_with(|| crate::deadline::Wait::begin(timeout, Duration::MAX));
        if w.expired() {
            return Err(w.timeout());
        }
        if !lg.alive(sh) {
            return Err(lg.dropped());
        }
        spins += 1;
        if spins < SPINS {
            crate::rt::yield_now();
            continue;
        }
        let rw = sh.w(lg.hdr + LH_ROOM_WAITERS);
        let seen = super::futex_seen(sh, lg.hdr + LH_ROOM);
        rw.fetch_add(1, SeqCst);
        if !room(sh, lg, tail.load(SeqCst)) {
            // Room comes from a reader's call, which must not wait for this one: out of
            // the write section while asleep (`txn::section`).
            section.pause(|| super::sleep_on(sh, lg.hdr + LH_ROOM, seen, ROOM_NAP));
        }
        let _ = rw.fetch_update(SeqCst, Relaxed, |v| v.checked_sub(1));
    }
}

/// Whether sequence number `t0` has room under the wait and drop policies: it is less
/// than a ring past every reader's cursor (past nothing, with no readers). Raises the
/// floor to what it found.
fn room(sh: &Shared, lg: &LogRef, t0: u64) -> bool {
    let f = match lg.min_cursor(sh) {
        Some(c) => c,
        None => (t0 + 1).saturating_sub(lg.slots),
    };
    sh.w(lg.hdr + LH_FLOOR).fetch_max(f, SeqCst);
    t0 - f.min(t0) < lg.slots
}

/// Claims the slot `so` for sequence number `seq`: compare-and-swaps its state to
/// "writing `seq`" from that of an older sequence number, once no live writer is still
/// writing that one. False when a newer number holds it already (overwrite policy: ours
/// was overwritten before we wrote it).
fn claim(sh: &Shared, lg: &LogRef, so: u64, seq: u64, timeout: Duration) -> Result<bool> {
    let state = sh.w(so + S_STATE);
    let mut wait: Option<crate::deadline::Wait> = None;
    let mut spins = 0u32;
    loop {
        let st = state.load(SeqCst);
        let (s, status) = (st >> 2, st & 3);
        if st != 0 && s >= seq {
            if s == seq {
                return Err(sh.corrupt(format!(
                    "log {}: the slot of sequence number {seq} already holds it ({st:#x})",
                    lg.id
                )));
            }
            return Ok(false);
        }
        if status == RS_WRITING && lg.seq_owner_alive(sh, s) {
            // A live writer is still in the slot (overwrite policy, a ring behind): its
            // bytes must not mix with ours.
            let w =
                *wait.get_or_insert_with(|| crate::deadline::Wait::begin(timeout, Duration::MAX));
            if w.expired() {
                return Err(w.timeout());
            }
            spins += 1;
            if spins < SPINS {
                crate::rt::yield_now();
            } else {
                crate::rt::sleep(Duration::from_micros(50));
            }
            continue;
        }
        if state
            .compare_exchange(st, slot_state(seq, RS_WRITING), SeqCst, Relaxed)
            .is_ok()
        {
            return Ok(true);
        }
    }
}

/// The error for a record that does not fit the log's slots.
pub(crate) fn too_large(lg: &LogRef, name: &str, len: u64) -> Error {
    Error::InvalidArgument(format!(
        "a record of {len} bytes (message and fields) does not fit log {name:?}, whose \
         records take at most {} bytes",
        lg.max_record
    ))
}
