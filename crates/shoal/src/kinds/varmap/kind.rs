//! The variable-size map as a [`Kind`] of object: what the cleaner, the checker, repair
//! and a drop ask of it.

use super::*;
use crate::alloc::record::read_record_header_in;
use crate::error::Result;
use crate::object::{CheckCtx, Kind, ObjectStats, RepairCtx};
use crate::shared::Shared;
use crate::txn::Txn;
use std::collections::HashSet;
use std::time::Duration;

/// A variable-size map, as a kind of object.
#[derive(Clone, Copy, Debug)]
pub(crate) struct VarMap(pub MapRef);

impl Kind for VarMap {
    fn has_records(&self) -> bool {
        true
    }

    fn is_live(&self, sh: &Shared, key: &[u8], off: u64, timeout: Duration) -> Result<bool> {
        let mut m = self.0;
        m.timeout = m.timeout.min(timeout);
        m.references(sh, key, off)
    }

    fn prefetch_live(&self, sh: &Shared, key: &[u8], end: u64) {
        self.0.prefetch_hash(sh, hash(sh.g.seed, key), end);
    }

    fn relocate(&self, tx: &Txn, key: &[u8], old: u64, new: (u64, u64)) -> Result<bool> {
        self.0.relocate(tx, key, old, new)
    }

    fn live_record_bytes(&self, sh: &Shared) -> u64 {
        let mut total: u64 = 0;
        for t in 0..sh.g.n_txn {
            total = total.wrapping_add(
                sh.w(self.0.hdr + M_COUNTERS + MC_SIZE * t + MC_BYTES)
                    .load(Relaxed),
            );
        }
        total
    }

    fn for_each_record(&self, sh: &Shared, f: &mut dyn FnMut(u64)) -> Result<()> {
        let m = &self.0;
        for (seg, _) in segments(sh, m)? {
            for b in 0..m.n_main + m.n_stash {
                for i in 0..SLOTS {
                    let s = sh.w(slot_off(seg, b, i)).load(Acquire);
                    if s != 0 {
                        f(slot_off_of(s));
                    }
                }
            }
        }
        Ok(())
    }

    fn check(&self, ck: &mut CheckCtx<'_>) {
        let (sh, m) = (ck.sh, &self.0);
        let (g, id, end) = (sh.g, m.id, sh.file_end());
        ck.lock_ok(m.hdr + M_DIR_LOCK, "", "directory");
        let root = sh.w(m.hdr + M_ROOT).load(Acquire);
        let (gd, dir) = (root >> 48, root & OFF_MASK);
        if gd > MAX_DEPTH || dir < g.chunks_off || dir % 8 != 0 || dir + (8 << gd) > end {
            ck.bad(format!("map {id}: directory {root:#x} out of the file"));
            return;
        }
        crate::hashmap::check_index_space(ck, m);
        if !ck.in_index(dir, 8 << gd) {
            ck.bad(format!(
                "map {id}: directory {dir:#x} is not inside an index chunk"
            ));
        }
        let (mut count, mut bytes) = (0u64, 0u64);
        let mut keys: HashSet<Vec<u8>> = HashSet::new();
        // (record, UID index) of every live record of a map with UIDs.
        let mut uids: Vec<(u64, u64)> = Vec::new();
        for j in 0..(1u64 << gd) {
            let e = sh.w(dir + 8 * j).load(Acquire);
            let (seg, d) = (entry_seg(e), entry_depth(e));
            if d > gd {
                ck.bad(format!("map {id}: directory entry {j} depth {d} > {gd}"));
                continue;
            }
            let first = j & ((1 << d) - 1);
            if j != first {
                let e0 = sh.w(dir + 8 * first).load(Acquire);
                if e0 != e {
                    ck.bad(format!(
                        "map {id}: directory entries {first} and {j} disagree ({e0:#x} vs {e:#x})"
                    ));
                }
                continue;
            }
            ck.segments += 1;
            if seg % BUCKET != 0 || !ck.in_index(seg, m.seg_size) {
                ck.bad(format!(
                    "map {id}: segment {seg:#x} is not inside an index chunk"
                ));
                continue;
            }
            ck.lock_ok(seg + S_LOCK, "", "segment");
            if sh.w(seg + S_DEPTH).load(Acquire) != d || sh.w(seg + S_PREFIX).load(Acquire) != first
            {
                ck.bad(format!(
                    "map {id}: segment {seg:#x} has depth {} prefix {:#x}, directory says {d} / {first:#x}",
                    sh.w(seg + S_DEPTH).load(Acquire),
                    sh.w(seg + S_PREFIX).load(Acquire)
                ));
            }
            let mut overflow = vec![0u64; m.n_main as usize];
            for b in 0..m.n_main + m.n_stash {
                let bo = bucket_off(seg, b);
                let hw = sh.w(bo).load(Acquire);
                if hdr_seq(hw) & 1 == 1 {
                    ck.bad(format!("map {id}: bucket {bo:#x} left mid-write (odd seq)"));
                }
                for i in 0..SLOTS {
                    let so = slot_off(seg, b, i);
                    let s = sh.w(so).load(Acquire);
                    if s == 0 {
                        continue;
                    }
                    let off = slot_off_of(s);
                    let Some(limit) = ck.used_end(off) else {
                        ck.bad(format!(
                            "map {id}: slot {so:#x} points at {off:#x}, outside every data chunk"
                        ));
                        continue;
                    };
                    let Some((mid, k, v, hl)) = read_record_header_in(sh, off, limit) else {
                        ck.bad(format!("map {id}: slot {so:#x} points at {off:#x}: no complete record below {limit:#x}"));
                        continue;
                    };
                    // The cleaner finds a chunk's live records by walking its records from
                    // the first: one it cannot reach that way (a corrupt dead record
                    // before it derails the walk) would be freed with the chunk.
                    let c = g.chunk_of(off);
                    if !ck.walk_reaches(c, limit, off) {
                        ck.bad(format!(
                            "map {id}: slot {so:#x} points at {off:#x}, which a walk of chunk {c:#x}'s records from its start does not reach (a corrupt record before it: cleaning the chunk would lose it)"
                        ));
                    }
                    if mid != id {
                        ck.bad(format!(
                            "map {id}: slot {so:#x}: record at {off:#x} belongs to map {mid}"
                        ));
                    }
                    if !ck.first_reference(off) {
                        ck.bad(format!("map {id}: record {off:#x} referenced twice"));
                    }
                    let mut key = vec![0u8; k as usize];
                    sh.r.read_bytes(off + hl, &mut key);
                    let h = hash(g.seed, &key);
                    if h & ((1 << d) - 1) != first {
                        ck.bad(format!(
                            "map {id}: key at {off:#x} hashes outside segment {seg:#x}"
                        ));
                    }
                    if slot_tag(s) != hash_tag(h) {
                        ck.bad(format!("map {id}: slot {so:#x} tag does not match its key"));
                    }
                    let home = home_bucket(h, m.n_main);
                    if b < m.n_main && b != home {
                        ck.bad(format!(
                            "map {id}: key at {off:#x} in bucket {b}, its home is {home}"
                        ));
                    }
                    if b >= m.n_main {
                        overflow[home as usize] += 1;
                    }
                    if !keys.insert(key) {
                        ck.bad(format!(
                            "map {id}: a key is present twice (second at {off:#x})"
                        ));
                    }
                    count += 1;
                    if m.vtrail != 0 {
                        if v < m.vtrail {
                            ck.bad(format!("map {id}: record {off:#x} has no room for its UID"));
                        } else {
                            let rec_len = hl + k + v + g.trailer;
                            uids.push((
                                off,
                                crate::kinds::varmap::uid::record_index(sh, off, rec_len),
                            ));
                        }
                    }
                    if g.trailer == 4 {
                        let mut rec = vec![0u8; (hl + k + v) as usize];
                        sh.r.read_bytes(off, &mut rec);
                        let mut crc = [0u8; 4];
                        sh.r.read_bytes(off + hl + k + v, &mut crc);
                        if record_crc(&[&rec]) != u32::from_le_bytes(crc) {
                            ck.bad(format!(
                                "map {id}: record {off:#x} fails its checksum (torn or corrupt)"
                            ));
                        }
                    }
                    bytes += hl + k + v + g.trailer;
                }
            }
            for b in 0..m.n_main {
                let ov = hdr_overflow(sh.w(bucket_off(seg, b)).load(Acquire));
                if ov != overflow[b as usize] {
                    ck.bad(format!(
                        "map {id}: bucket {b} of {seg:#x} has overflow {ov}, stash holds {}",
                        overflow[b as usize]
                    ));
                }
            }
        }
        let (mut c_count, mut c_bytes) = (0u64, 0u64);
        for t in 0..g.n_txn {
            c_count = c_count.wrapping_add(
                sh.w(m.hdr + M_COUNTERS + MC_SIZE * t + MC_COUNT)
                    .load(Acquire),
            );
            c_bytes = c_bytes.wrapping_add(
                sh.w(m.hdr + M_COUNTERS + MC_SIZE * t + MC_BYTES)
                    .load(Acquire),
            );
        }
        if c_count != count {
            ck.bad(format!(
                "map {id}: counters say {} entries, the index holds {count}",
                c_count as i64
            ));
        }
        if c_bytes != bytes {
            ck.bad(format!(
                "map {id}: counters say {} live bytes, the index holds {bytes}",
                c_bytes as i64
            ));
        }
        if m.vtrail != 0 {
            if let Err(why) = uid::check(sh, m, &uids) {
                ck.bad(format!("map {id}: {why}"));
            }
            ck.lock_ok(m.hdr + M_UID_LOCK, "", "UID");
        }
        ck.entries += count;
    }

    fn drop_untrusted(&self, sh: &Shared, rep: &mut RepairCtx) -> Result<()> {
        let m = &self.0;
        let mut keys = HashSet::new();
        for (seg, d) in segments(sh, m)? {
            let prefix = sh.w(seg + S_PREFIX).load(Acquire) & ((1 << d) - 1);
            for b in 0..m.n_main + m.n_stash {
                for i in 0..SLOTS {
                    let so = slot_off(seg, b, i);
                    let s = sh.w(so).load(Acquire);
                    if s == 0 {
                        continue;
                    }
                    let why = match slot_entry(sh, m, (prefix, d), b, s, sh.file_end()) {
                        Err(why) => why,
                        Ok((k, _)) => {
                            if !keys.insert(k) {
                                "its key is present twice"
                            } else if !rep.seen_records.insert(slot_off_of(s)) {
                                "the record is another slot's"
                            } else {
                                continue;
                            }
                        }
                    };
                    sh.w(so).store(0, Release);
                    rep.dropped.push((
                        rep.name.clone(),
                        format!("slot {so:#x} -> record {:#x}: {why}", slot_off_of(s)),
                    ));
                }
            }
        }
        Ok(())
    }

    fn rebuild(&self, sh: &Shared, rep: &mut RepairCtx) -> Result<()> {
        let m = &self.0;
        let (g, end) = (sh.g, sh.file_end());
        sh.w(m.hdr + M_DIR_LOCK).store(0, Release);
        sh.w(m.hdr + M_UID_LOCK).store(0, Release);
        crate::hashmap::repair_type_words(sh, m.hdr);
        let (mut count, mut bytes) = (0u64, 0u64);
        let mut uids: Vec<(u64, u64)> = Vec::new();
        for (seg, _) in segments(sh, m)? {
            sh.w(seg + S_LOCK).store(0, Release);
            for b in 0..m.n_main + m.n_stash {
                let bo = bucket_off(seg, b);
                let h = sh.w(bo).load(Acquire);
                if hdr_seq(h) & 1 == 1 {
                    sh.w(bo).store(
                        make_hdr(hdr_seq(h).wrapping_add(1), hdr_overflow(h)),
                        Release,
                    );
                }
                for i in 0..SLOTS {
                    let s = sh.w(slot_off(seg, b, i)).load(Acquire);
                    if s == 0 {
                        continue;
                    }
                    let off = slot_off_of(s);
                    let limit = data_limit(sh, off).unwrap_or(off);
                    if let Some((_, k, v, hl)) = read_record_header_in(sh, off, limit) {
                        count += 1;
                        bytes += hl + k + v + g.trailer;
                        if m.vtrail != 0 && v >= m.vtrail {
                            let len = hl + k + v + g.trailer;
                            uids.push((off, uid::record_index(sh, off, len)));
                        }
                    }
                }
            }
            recount_overflow(sh, m, seg, end)?;
        }
        for t in 0..g.n_txn {
            let c = m.hdr + M_COUNTERS + MC_SIZE * t;
            sh.w(c + MC_COUNT)
                .store(if t == 0 { count } else { 0 }, Release);
            sh.w(c + MC_BYTES)
                .store(if t == 0 { bytes } else { 0 }, Release);
        }
        if m.vtrail != 0 {
            uid::rebuild(sh, m, &uids)?;
        }
        rep.rebuilt.push(format!(
            "map {:?}: locks, sequence numbers, overflow counts, counters{}",
            rep.name,
            if m.vtrail != 0 { ", UID table" } else { "" }
        ));
        Ok(())
    }

    fn stats(&self, sh: &Shared) -> Result<ObjectStats> {
        Ok(ObjectStats {
            live_bytes: self.0.counter_sum(sh, MC_BYTES),
            ..self.0.stats(sh)?
        })
    }

    fn drop_barrier(&self, tx: &Txn) -> Result<()> {
        // Any writer that saw the map alive holds a segment or the directory lock; once
        // we have had each, none is left (later ones see it dropping).
        let m = &self.0;
        tx.lock(m.hdr + M_DIR_LOCK)?;
        tx.unlock(m.hdr + M_DIR_LOCK);
        for (seg, _) in segments(tx.sh, m)? {
            tx.lock(seg + S_LOCK)?;
            tx.unlock(seg + S_LOCK);
        }
        Ok(())
    }
}

/// The key and the user's value (without a UID trailer) of the record that slot `s` of
/// bucket `b` points at, if it can be trusted: a complete record of map `m`, below what
/// its chunk says was written and below `bound`, that matches its checksum (in a store
/// with them) and whose key belongs exactly where the slot is (the segment's prefix bits
/// `seg_prefix` = (prefix, depth), the slot's tag, the home bucket). Otherwise why not.
pub(crate) fn slot_entry(
    sh: &Shared,
    m: &MapRef,
    seg_prefix: (u64, u64),
    b: u64,
    s: u64,
    bound: u64,
) -> std::result::Result<(Vec<u8>, Vec<u8>), &'static str> {
    let off = slot_off_of(s);
    let limit = data_limit(sh, off)
        .ok_or("the record lies outside every data chunk")?
        .min(bound);
    let (mid, k, v, hl) =
        read_record_header_in(sh, off, limit).ok_or("no complete record there")?;
    if mid != m.id {
        return Err("a record of another map");
    }
    if v < m.vtrail {
        return Err("the record has no room for its UID");
    }
    let mut rec = vec![0u8; (hl + k + v) as usize];
    sh.r.read_bytes(off, &mut rec);
    if sh.g.trailer == 4 {
        let mut crc = [0u8; 4];
        sh.r.read_bytes(off + hl + k + v, &mut crc);
        if record_crc(&[&rec]) != u32::from_le_bytes(crc) {
            return Err("the record fails its checksum");
        }
    }
    let key = rec[hl as usize..(hl + k) as usize].to_vec();
    let h = hash(sh.g.seed, &key);
    let (prefix, d) = seg_prefix;
    let home = home_bucket(h, m.n_main);
    if h & ((1 << d) - 1) != prefix || slot_tag(s) != hash_tag(h) || (b < m.n_main && b != home) {
        return Err("the record's key belongs elsewhere");
    }
    let value = rec[(hl + k) as usize..(hl + k + v - m.vtrail) as usize].to_vec();
    Ok((key, value))
}
