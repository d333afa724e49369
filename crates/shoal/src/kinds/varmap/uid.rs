//! Stable per-key handles (UIDs), for maps created with `MapOptions::uids`.
//!
//! A UID names a *table entry*, not a record: records move (an update appends a new one,
//! the cleaner copies live ones out of a chunk it reclaims), and every mover rewrites the
//! entry in the same redo list that moves the record, so the handle stays valid while the
//! key exists. Each entry is three words:
//!
//! * location: `gen << 48 | record offset`, or `gen << 48 | E_FREE | next free index`;
//! * version: bumped (before the location) by every change, so an optimistic reader that
//!   sees the same version and location before and after its copy read a record that was
//!   live the whole time (no ABA, even if the same offset came back);
//! * the key's hash: a write by UID locks the key's segment without hashing the key.
//!
//! Freeing an entry increments its generation, and a 64-bit UID
//! (`gen << 48 | check << 32 | index`) also carries 15 bits of its key's hash (`check`), so
//! a UID of a deleted key does not reach the key that reuses the entry: it is reported
//! stale. The generation alone (16 bits) would wrap after 65,536 reuses of one entry, which
//! heavy churn reaches in minutes; with the check bits a stale handle can name another key
//! only if the entry's generation has wrapped *and* that key's hash agrees in 15 bits (one
//! chance in 32,768 per wrap). After a wrap it may name its own key again, re-inserted:
//! never another key's value but that one. The 32-bit form is the bare index (for
//! embedding in other keys and values): it detects a deleted key, but not an entry reused
//! by a later key (see `Uid::from_u32`).
//!
//! Every record of a UID map ends its value with the 8-byte index, so the cleaner and the
//! checker can go from a record to its entry. Taking and freeing indexes happen under the
//! key's segment lock and the map's `M_UID_LOCK`, inside the write's own redo list: a
//! process killed at any point leaves the free list and the table exactly as before or
//! exactly as after.

use crate::error::{Error, Result};
use crate::format::*;
use crate::kinds::varmap::{arena_alloc, commit_apply, MapRef};
use crate::shared::Shared;
use crate::txn::{Plan, Redo, Txn};
use std::sync::atomic::Ordering::*;

/// A stable handle on one key of a map with UIDs (see [`Map::uid`](crate::Map::uid)).
///
/// Its 64-bit form ([`Uid::to_u64`]) carries a generation, so a handle kept after its key
/// was removed is reported as [`Error::StaleUid`] even when the table entry has been
/// reused by another key. The 32-bit form ([`Uid::to_u32`], [`Uid::from_u32`]) is the
/// bare index, as SharedHashFile's: it detects a removed key, but once the entry is
/// reused it names the new key. Keep 32-bit handles only where keys are not removed
/// while handles on them live, or use the 64-bit form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Uid {
    index: u64,
    /// None for a handle made from the 32-bit form.
    gen: Option<u16>,
    /// 15 bits of the key's hash ([`check_of`]); not checked without `gen`.
    check: u16,
}

/// Bits 32..47 of a 64-bit UID: 15 bits of the key's hash, then bit 47, which the
/// library never sets (indexes stay below 2^27, so bits 27..32 are 0 as well). The C ABI
/// uses bit 47 to mark a handle made from the 32-bit form.
const CHECK_SHIFT: u32 = 32;
const CHECK_MASK: u64 = 0x7fff;
/// Bits of a 64-bit UID that hold the index; bit 47 is kept in it, so that a value with
/// bit 47 set names no entry (an index past every table) instead of aliasing one.
const INDEX_MASK: u64 = 0x8000_ffff_ffff;

/// The check bits a UID of a key with hash `hash` carries.
pub(crate) fn check_of(hash: u64) -> u16 {
    ((hash >> 32) & CHECK_MASK) as u16
}

impl Uid {
    /// The handle of table entry `index` at generation `gen`, for a key of hash `hash`.
    pub(crate) fn new(index: u64, gen: u64, hash: u64) -> Uid {
        Uid {
            index,
            gen: Some(gen as u16),
            check: check_of(hash),
        }
    }

    /// The 64-bit form: `generation << 48 | check << 32 | index`, where `check` is 15
    /// bits of the key's hash. Never 0. Its low 32 bits are the 32-bit form.
    pub fn to_u64(self) -> u64 {
        ((self.gen.unwrap_or(0) as u64) << 48)
            | ((self.check as u64 & CHECK_MASK) << CHECK_SHIFT)
            | self.index
    }

    /// A handle from its 64-bit form.
    pub fn from_u64(v: u64) -> Uid {
        Uid {
            index: v & INDEX_MASK,
            gen: Some((v >> 48) as u16),
            check: ((v >> CHECK_SHIFT) & CHECK_MASK) as u16,
        }
    }

    /// The 32-bit form (the bare index), or None if the index does not fit (it always
    /// fits: a map holds at most 134 M keys with UIDs).
    pub fn to_u32(self) -> Option<u32> {
        u32::try_from(self.index).ok()
    }

    /// A handle from its 32-bit form: no generation check (see the type's docs).
    pub fn from_u32(v: u32) -> Uid {
        Uid {
            index: v as u64,
            gen: None,
            check: 0,
        }
    }

    /// The table index this handle names.
    pub fn index(self) -> u64 {
        self.index
    }
}

impl std::fmt::Display for Uid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.gen {
            Some(g) => write!(f, "{}.{}", self.index, g),
            None => write!(f, "{}", self.index),
        }
    }
}

const LOC_OFF: u64 = E_FREE - 1;

fn loc_gen(loc: u64) -> u64 {
    loc >> 48
}
fn live_loc(gen: u64, off: u64) -> u64 {
    ((gen & 0xffff) << 48) | off
}

/// What a UID names right now.
#[derive(Clone, Copy)]
pub(crate) struct Entry {
    /// Offset of the table entry.
    pub e: u64,
    pub loc: u64,
    pub ver: u64,
    pub hash: u64,
}

impl Entry {
    pub fn off(&self) -> u64 {
        self.loc & LOC_OFF
    }
}

/// The stale-handle error.
pub(crate) fn stale(uid: Uid) -> Error {
    Error::StaleUid(uid.to_u64())
}

/// The UID directory's offset, checked (it comes from the file): inside the file and
/// word-aligned.
fn dir_of(sh: &Shared, m: &MapRef) -> Result<u64> {
    let dir = sh.w(m.hdr + M_UID_DIR).load(Acquire);
    if dir < sh.g.chunks_off || dir % 8 != 0 || dir + 8 * UID_DIR_N > sh.file_end() {
        return Err(sh.corrupt(format!(
            "map {}: UID directory {dir:#x} out of the file",
            m.id
        )));
    }
    Ok(dir)
}

/// Offset of the table entry of `index`, if it was ever handed out.
pub(crate) fn entry_off(sh: &Shared, m: &MapRef, index: u64) -> Result<Option<u64>> {
    let next = sh.w(m.hdr + M_UID_NEXT).load(Acquire);
    if index == 0 || index >= next {
        return Ok(None);
    }
    let end = sh.file_end();
    let dir = dir_of(sh, m)?;
    let b = index / UID_BLOCK;
    if b >= UID_DIR_N {
        return Err(sh.corrupt(format!("map {}: UID {index} past the table", m.id)));
    }
    let block = sh.w(dir + 8 * b).load(Acquire);
    if block < sh.g.chunks_off || block + UID_ENTRY * UID_BLOCK > end || block % 8 != 0 {
        return Err(sh.corrupt(format!(
            "map {}: UID block {b} at {block:#x} out of the file",
            m.id
        )));
    }
    Ok(Some(block + UID_ENTRY * (index % UID_BLOCK)))
}

/// Loads the entry a handle names, checking it is live, of the handle's generation and of
/// a key whose hash has the handle's check bits.
/// Optimistic: callers that read the record validate with [`Entry::unchanged`].
pub(crate) fn load(sh: &Shared, m: &MapRef, uid: Uid) -> Result<Entry> {
    let e = entry_off(sh, m, uid.index)?.ok_or_else(|| stale(uid))?;
    load_at(sh, e, uid)
}

/// [`load`] of the entry at `e`, the offset [`load`] found for `uid` before: an index's
/// entry never moves (table blocks are allocated once and never freed while the map
/// lives), so a second look needs no directory walk.
pub(crate) fn load_at(sh: &Shared, e: u64, uid: Uid) -> Result<Entry> {
    let ver = sh.w(e + E_VER).load(Acquire);
    let loc = sh.w(e + E_LOC).load(Acquire);
    let hash = sh.w(e + E_HASH).load(Acquire);
    if loc & E_FREE != 0
        || loc & LOC_OFF == 0
        || uid
            .gen
            .is_some_and(|g| g as u64 != loc_gen(loc) || uid.check != check_of(hash))
    {
        return Err(stale(uid));
    }
    Ok(Entry { e, loc, ver, hash })
}

impl Entry {
    /// Whether the entry still reads as it did (after an optimistic copy).
    pub fn unchanged(&self, sh: &Shared) -> bool {
        std::sync::atomic::fence(Acquire);
        // The hash changes only together with the location, and every change bumps the
        // version: two words tell. A busy version (a value being overwritten in place)
        // never validates: the bytes may change under the copy with the words unchanged.
        self.ver & E_VER_BUSY == 0
            && sh.w(self.e + E_VER).load(Relaxed) == self.ver
            && sh.w(self.e + E_LOC).load(Relaxed) == self.loc
    }

    /// Whether this entry's busy version (see [`E_VER_BUSY`]) has no writer: the key's
    /// segment was seen unlocked while the version stayed the same busy value. An
    /// in-place writer holds that lock from before it marks the version busy until after
    /// its redo list has cleared the bit (with the version moved on), so a busy version
    /// outliving an unlocked moment was not left by a writer that is alive, nor by a dead
    /// one (whose lock stays held until it is recovered): the file is corrupt.
    pub fn busy_without_writer(&self, sh: &Shared, m: &MapRef) -> Result<bool> {
        if self.ver & E_VER_BUSY == 0 || m.segment_locked(sh, self.hash)? {
            return Ok(false);
        }
        Ok(sh.w(self.e + E_VER).load(Acquire) == self.ver)
    }
}

/// The UID index stored at the end of the value of the record at `off` (`rec_len` bytes).
pub(crate) fn record_index(sh: &Shared, off: u64, rec_len: u64) -> u64 {
    let mut b = [0u8; 8];
    sh.r.read_bytes(off + rec_len - sh.g.trailer - UID_TRAILER, &mut b);
    u64::from_le_bytes(b)
}

/// Writes `index` into the UID trailer of an unpublished record this thread appended
/// (and recomputes its checksum): the index of a new key is only known under the locks.
pub(crate) fn patch_record(sh: &Shared, off: u64, rec_len: u64, index: u64) {
    if record_index(sh, off, rec_len) == index {
        return;
    }
    let body = rec_len - sh.g.trailer;
    sh.r.write_bytes(off + body - UID_TRAILER, &index.to_le_bytes());
    if sh.g.trailer == 4 {
        let mut rec = vec![0u8; body as usize];
        sh.r.read_bytes(off, &mut rec);
        sh.r.write_bytes(off + body, &record_crc(&[&rec]).to_le_bytes());
    }
}

/// Redo entries that point a live entry at a new record (same key, same generation).
/// Returns the key's handle.
pub(crate) fn push_move(sh: &Shared, redo: &mut Redo, e: u64, index: u64, new_off: u64) -> Uid {
    let loc = sh.w(e + E_LOC).load(Relaxed);
    redo.push(e + E_VER, sh.w(e + E_VER).load(Relaxed).wrapping_add(1));
    redo.push(e + E_LOC, live_loc(loc_gen(loc), new_off));
    Uid::new(index, loc_gen(loc), sh.w(e + E_HASH).load(Acquire))
}

/// Under the key's segment lock, for a value overwritten in place (`FLAG_IN_PLACE_UIDS`):
/// pushes the version's final value (one more, not busy) as the redo list's last entry and
/// returns the key's handle and the busy version to store before the first byte changes.
pub(crate) fn push_in_place(sh: &Shared, redo: &mut Redo, e: u64, index: u64) -> (Uid, u64) {
    let ver = sh.w(e + E_VER).load(Relaxed);
    redo.push(e + E_VER, ver.wrapping_add(1) & !E_VER_BUSY);
    (handle_at(sh, e, index), ver | E_VER_BUSY)
}

/// The handle of the live entry `e` (index `index`), read under its key's lock.
pub(crate) fn handle_at(sh: &Shared, e: u64, index: u64) -> Uid {
    let loc = sh.w(e + E_LOC).load(Relaxed);
    Uid::new(index, loc_gen(loc), sh.w(e + E_HASH).load(Acquire))
}

/// Under the segment lock and `M_UID_LOCK`: takes an index for a new key whose record is
/// at `off` with hash `h`, pushing every change (free list or high-water mark, the entry)
/// onto `redo`. Grows the table first if needed (its own committed steps, which leak
/// nothing if the process dies: the space is linked into the map's chain).
pub(crate) fn push_take(tx: &Txn, m: &MapRef, redo: &mut Redo, off: u64, h: u64) -> Result<Uid> {
    let sh = tx.sh;
    let head = sh.w(m.hdr + M_UID_FREE).load(Acquire);
    let (index, gen) = if head != 0 {
        let e = entry_off(sh, m, head)?
            .ok_or_else(|| sh.corrupt(format!("map {}: free UID {head} past the table", m.id)))?;
        let loc = sh.w(e + E_LOC).load(Acquire);
        if loc & E_FREE == 0 {
            return Err(sh.corrupt(format!(
                "map {}: UID {head} is on the free list but in use",
                m.id
            )));
        }
        redo.push(m.hdr + M_UID_FREE, loc & LOC_OFF);
        (head, loc_gen(loc))
    } else {
        let next = sh.w(m.hdr + M_UID_NEXT).load(Acquire).max(1);
        if next >= UID_BLOCK * UID_DIR_N {
            return Err(Error::StoreFull(format!(
                "map {}: all {} UIDs are in use",
                m.id,
                UID_BLOCK * UID_DIR_N - 1
            )));
        }
        grow(tx, m, next)?;
        redo.push(m.hdr + M_UID_NEXT, next + 1);
        (next, 0)
    };
    // `entry_off` bounds indexes by the high-water mark, which this redo list may only
    // be about to raise: compute the entry's place directly.
    let dir = dir_of(sh, m)?;
    let block = sh.w(dir + 8 * (index / UID_BLOCK)).load(Acquire);
    if block < sh.g.chunks_off || block % 8 != 0 || block + UID_ENTRY * UID_BLOCK > sh.file_end() {
        return Err(sh.corrupt(format!(
            "map {}: UID block {block:#x} out of the file",
            m.id
        )));
    }
    let e = block + UID_ENTRY * (index % UID_BLOCK);
    redo.push(e + E_HASH, h);
    redo.push(e + E_VER, sh.w(e + E_VER).load(Relaxed).wrapping_add(1));
    redo.push(e + E_LOC, live_loc(gen, off));
    Ok(Uid::new(index, gen, h))
}

/// Under the segment lock and `M_UID_LOCK`: frees `index` (its key is being removed),
/// bumping its generation so that old handles read as stale.
pub(crate) fn push_free(tx: &Txn, m: &MapRef, redo: &mut Redo, index: u64) -> Result<()> {
    let sh = tx.sh;
    let e = entry_off(sh, m, index)?.ok_or_else(|| {
        sh.corrupt(format!(
            "map {}: record names UID {index} past the table",
            m.id
        ))
    })?;
    let loc = sh.w(e + E_LOC).load(Acquire);
    let head = sh.w(m.hdr + M_UID_FREE).load(Acquire);
    redo.push(e + E_VER, sh.w(e + E_VER).load(Relaxed).wrapping_add(1));
    redo.push(
        e + E_LOC,
        ((loc_gen(loc).wrapping_add(1) & 0xffff) << 48) | E_FREE | head,
    );
    redo.push(m.hdr + M_UID_FREE, index);
    Ok(())
}

/// A multi-key transaction's version change of entry `e`: entered as a plan's header
/// (`Plan::set_header`), so that the version reads busy ([`E_VER_BUSY`]) from the commit
/// until the apply's last step writes its final value. A reader by UID validates with the
/// version and never with a bucket header: without the busy mark it could see one key's
/// new entry and another's old one (the plan applies every entry before any header), nor
/// a value a transaction overwrites in place halfway.
pub(crate) fn plan_version(sh: &Shared, plan: &mut Plan, e: u64) -> Result<()> {
    let first = sh.w(e + E_VER).load(Relaxed) & !E_VER_BUSY;
    let cur = plan.word(sh, e + E_VER) & !E_VER_BUSY;
    plan.set_header(
        e + E_VER,
        first | E_VER_BUSY,
        cur.wrapping_add(1) & !E_VER_BUSY,
    )
}

/// [`push_move`] for a transaction's plan: entry `e` (live) follows its key to `new_off`.
pub(crate) fn plan_move(sh: &Shared, plan: &mut Plan, e: u64, new_off: u64) -> Result<()> {
    let loc = plan.word(sh, e + E_LOC);
    plan_version(sh, plan, e)?;
    plan.set(e + E_LOC, live_loc(loc_gen(loc), new_off))
}

/// [`push_take`] for a transaction's plan (under the segment lock and `M_UID_LOCK`): the
/// free list and high-water mark are read through the plan, so that several inserts, and
/// an insert after a remove, of one map compose. Returns the index taken.
pub(crate) fn plan_take(tx: &Txn, m: &MapRef, plan: &mut Plan, off: u64, h: u64) -> Result<u64> {
    let sh = tx.sh;
    let head = plan.word(sh, m.hdr + M_UID_FREE);
    let (index, gen, e) = if head != 0 {
        let e = entry_off(sh, m, head)?
            .ok_or_else(|| sh.corrupt(format!("map {}: free UID {head} past the table", m.id)))?;
        let loc = plan.word(sh, e + E_LOC);
        if loc & E_FREE == 0 {
            return Err(sh.corrupt(format!(
                "map {}: UID {head} is on the free list but in use",
                m.id
            )));
        }
        plan.set(m.hdr + M_UID_FREE, loc & LOC_OFF)?;
        (head, loc_gen(loc), e)
    } else {
        let next = plan.word(sh, m.hdr + M_UID_NEXT).max(1);
        if next >= UID_BLOCK * UID_DIR_N {
            return Err(Error::StoreFull(format!(
                "map {}: all {} UIDs are in use",
                m.id,
                UID_BLOCK * UID_DIR_N - 1
            )));
        }
        grow(tx, m, next)?;
        plan.set(m.hdr + M_UID_NEXT, next + 1)?;
        // `entry_off` bounds indexes by the high-water mark, which the plan may only be
        // about to raise: compute the entry's place directly.
        let dir = dir_of(sh, m)?;
        let block = sh.w(dir + 8 * (next / UID_BLOCK)).load(Acquire);
        if block < sh.g.chunks_off
            || block % 8 != 0
            || block + UID_ENTRY * UID_BLOCK > sh.file_end()
        {
            return Err(sh.corrupt(format!(
                "map {}: UID block {block:#x} out of the file",
                m.id
            )));
        }
        (next, 0, block + UID_ENTRY * (next % UID_BLOCK))
    };
    plan.set(e + E_HASH, h)?;
    plan_version(sh, plan, e)?;
    plan.set(e + E_LOC, live_loc(gen, off))?;
    Ok(index)
}

/// [`push_free`] for a transaction's plan (under the segment lock and `M_UID_LOCK`).
pub(crate) fn plan_free(sh: &Shared, m: &MapRef, plan: &mut Plan, index: u64) -> Result<()> {
    let e = entry_off(sh, m, index)?.ok_or_else(|| {
        sh.corrupt(format!(
            "map {}: record names UID {index} past the table",
            m.id
        ))
    })?;
    let loc = plan.word(sh, e + E_LOC);
    let head = plan.word(sh, m.hdr + M_UID_FREE);
    plan_version(sh, plan, e)?;
    plan.set(
        e + E_LOC,
        ((loc_gen(loc).wrapping_add(1) & 0xffff) << 48) | E_FREE | head,
    )?;
    plan.set(m.hdr + M_UID_FREE, index)
}

/// Makes sure the table block that will hold `index` exists (directory first).
fn grow(tx: &Txn, m: &MapRef, index: u64) -> Result<()> {
    let sh = tx.sh;
    let dir_lock = m.hdr + M_DIR_LOCK;
    let need_dir = sh.w(m.hdr + M_UID_DIR).load(Acquire) == 0;
    let b = index / UID_BLOCK;
    if !need_dir && sh.w(dir_of(sh, m)? + 8 * b).load(Acquire) != 0 {
        return Ok(());
    }
    // The map's index arena is shared with segments and directories, which the
    // directory lock serializes.
    tx.lock(dir_lock)?;
    let r = (|| {
        if need_dir {
            let (d, take) = arena_alloc(tx, m, 8 * UID_DIR_N)?;
            zero(sh, d, 8 * UID_DIR_N);
            sh.persist(d, 8 * UID_DIR_N)?;
            let mut redo = Redo::new();
            redo.push(m.hdr + M_UID_DIR, d);
            commit_apply(tx, &mut redo, &take);
            crate::rt::failpoint!("uid.dir_allocated");
        }
        let dir = dir_of(sh, m)?;
        if sh.w(dir + 8 * b).load(Acquire) == 0 {
            let (blk, take) = arena_alloc(tx, m, UID_ENTRY * UID_BLOCK)?;
            zero(sh, blk, UID_ENTRY * UID_BLOCK);
            sh.persist(blk, UID_ENTRY * UID_BLOCK)?;
            let mut redo = Redo::new();
            redo.push(dir + 8 * b, blk);
            commit_apply(tx, &mut redo, &take);
            crate::rt::failpoint!("uid.block_allocated");
        }
        Ok(())
    })();
    tx.unlock(dir_lock);
    r
}

fn zero(sh: &Shared, off: u64, len: u64) {
    let mut o = off;
    while o < off + len {
        sh.w(o).store(0, Relaxed);
        o += 8;
    }
}

/// Checker: every live record of the map names an entry that points back at it, and the
/// free list holds exactly the other handed-out entries. `live` = (record offset, index)
/// of every live record. Returns a description of the first problem.
pub(crate) fn check(
    sh: &Shared,
    m: &MapRef,
    live: &[(u64, u64)],
) -> std::result::Result<(), String> {
    let next = sh.w(m.hdr + M_UID_NEXT).load(Acquire);
    let mut seen = std::collections::HashSet::new();
    for &(off, index) in live {
        let e = match entry_off(sh, m, index) {
            Ok(Some(e)) => e,
            Ok(None) => {
                return Err(format!(
                    "record at {off:#x} names UID {index}, never handed out"
                ))
            }
            Err(e) => return Err(e.to_string()),
        };
        let loc = sh.w(e + E_LOC).load(Acquire);
        if loc & E_FREE != 0 || loc & LOC_OFF != off {
            return Err(format!(
                "record at {off:#x} names UID {index}, whose entry says {loc:#x}"
            ));
        }
        if sh.w(e + E_VER).load(Acquire) & E_VER_BUSY != 0 {
            return Err(format!(
                "UID {index} left mid-write (its version is marked busy)"
            ));
        }
        if !seen.insert(index) {
            return Err(format!("UID {index} named by two records"));
        }
    }
    let mut free = 0u64;
    let mut i = sh.w(m.hdr + M_UID_FREE).load(Acquire);
    while i != 0 {
        let e = match entry_off(sh, m, i) {
            Ok(Some(e)) => e,
            _ => return Err(format!("free UID list names {i}, past the table")),
        };
        let loc = sh.w(e + E_LOC).load(Acquire);
        if loc & E_FREE == 0 || seen.contains(&i) {
            return Err(format!("free UID list names {i}, which is in use"));
        }
        free += 1;
        if free > next {
            return Err("the free UID list loops".into());
        }
        i = loc & LOC_OFF;
    }
    let handed = next.saturating_sub(1);
    if seen.len() as u64 + free != handed {
        return Err(format!(
            "{} UIDs live and {free} free, but {handed} were handed out (a leak)",
            seen.len()
        ));
    }
    Ok(())
}

/// Repair (alone in the store): points the entry of every live record at it and chains
/// every other handed-out entry into the free list, with its generation bumped if it was
/// live (its key's record was dropped: old handles must read as stale).
pub(crate) fn rebuild(sh: &Shared, m: &MapRef, live: &[(u64, u64)]) -> Result<()> {
    let next = sh.w(m.hdr + M_UID_NEXT).load(Acquire);
    let mut owner = std::collections::HashMap::new();
    for &(off, index) in live {
        if index == 0 || index >= next {
            return Err(sh.corrupt(format!(
                "map {}: record {off:#x} names UID {index}, never handed out",
                m.id
            )));
        }
        if owner.insert(index, off).is_some() {
            return Err(sh.corrupt(format!("map {}: UID {index} named by two records", m.id)));
        }
    }
    let mut head = 0;
    for index in (1..next).rev() {
        let Some(e) = entry_off(sh, m, index)? else {
            continue;
        };
        let loc = sh.w(e + E_LOC).load(Acquire);
        let old_ver = sh.w(e + E_VER).load(Acquire);
        // A busy bit left by an in-place write the OS crash cut short goes with the bump.
        let ver = old_ver.wrapping_add(1) & !E_VER_BUSY;
        match owner.get(&index) {
            Some(&off) => {
                if old_ver & E_VER_BUSY != 0 {
                    sh.w(e + E_VER).store(ver, Release);
                }
                if loc & E_FREE != 0 || loc & LOC_OFF != off {
                    let key_hash = {
                        let end = sh.file_end();
                        let (_, k, _, hl) = crate::alloc::record::read_record_header(sh, off, end)
                            .ok_or_else(|| sh.corrupt(format!("record {off:#x} vanished")))?;
                        let mut key = vec![0u8; k as usize];
                        sh.r.read_bytes(off + hl, &mut key);
                        hash(sh.g.seed, &key)
                    };
                    sh.w(e + E_HASH).store(key_hash, Release);
                    sh.w(e + E_VER).store(ver, Release);
                    sh.w(e + E_LOC).store(live_loc(loc_gen(loc), off), Release);
                }
            }
            None => {
                let gen = if loc & E_FREE != 0 {
                    loc_gen(loc)
                } else {
                    loc_gen(loc).wrapping_add(1)
                };
                sh.w(e + E_VER).store(ver, Release);
                sh.w(e + E_LOC)
                    .store(((gen & 0xffff) << 48) | E_FREE | head, Release);
                head = index;
            }
        }
    }
    sh.w(m.hdr + M_UID_FREE).store(head, Release);
    Ok(())
}
