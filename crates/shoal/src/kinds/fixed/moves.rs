//! Growth by moving directory groups between segments (format version 7), and its recovery.

use super::*;
use crate::error::{Error, Result};
use crate::hashmap::{self};
use crate::mem::fence;
use crate::shared::Shared;
use crate::txn::{Redo, Txn};

/// The directory is doubled when it has fewer entries than this per segment, so that a
/// full segment always has groups to give and each holds a small share of it (~1/8 to
/// 1/16: a move copies that share, and leaves the segment that much room).
pub(crate) const MIN_GROUPS_PER_SEGMENT: u64 = 8;

/// A segment's [`S_GROUPS`] word: `n` entries of a directory of depth `g`.
pub(crate) fn group_count(n: u64, g: u64) -> u64 {
    n | g << 48
}

/// How many entries of a directory of depth `g` name `seg`, from its [`S_GROUPS`] word;
/// None if the word cannot be one (it comes from the file).
pub(crate) fn groups_of(sh: &Shared, seg: u64, g: u64) -> Option<u64> {
    let w = sh.w(seg + S_GROUPS).load(Acquire);
    let (n, tg) = (w & OFF_MASK, w >> 48);
    if n == 0 || tg > g || g > MAX_DEPTH || n > (1u64 << tg) {
        return None;
    }
    Some(n << (g - tg))
}

/// Makes room in full segment `seg` (locked by the caller, adders drained) for the key
/// of hash `h`: moves the key's group (its directory entry, with every key of it) to the
/// map's open segment, or to a new segment that becomes the open one. The directory is
/// doubled first when `seg` is named by one entry only, or the map has fewer than
/// [`MIN_GROUPS_PER_SEGMENT`] entries per segment.
pub(crate) fn move_group(tx: &Txn, f: &FixedRef, seg: u64, h: u64) -> Result<()> {
    let dir_lock = f.m.hdr + M_DIR_LOCK;
    tx.lock(dir_lock)?;
    let r = move_locked(tx, f, seg, h);
    tx.unlock(dir_lock);
    r
}

pub(crate) fn move_locked(tx: &Txn, f: &FixedRef, seg: u64, h: u64) -> Result<()> {
    let sh = tx.sh;
    let m = &f.m;
    let root = sh.w(m.hdr + M_ROOT).load(Acquire);
    let g = root >> 48;
    let nsegs = sh.w(m.hdr + M_N_SEGS).load(Acquire);
    if sh.w(seg + S_MARK).load(Acquire) != group_segment_mark(m.id) {
        return Err(m.bad(
            sh,
            format!(
                "map {}: segment {seg:#x} has not the map's segment mark",
                m.id
            ),
        ));
    }
    let owned = groups_of(sh, seg, g);
    let (Some(owned), true) = (owned, nsegs >= 1 && g <= MAX_DEPTH && nsegs <= 1 << g) else {
        return Err(m.bad(
            sh,
            format!(
                "map {}: segment {seg:#x} group count {:#x} or segment count {nsegs} \
                 does not fit a directory of depth {g}",
                m.id,
                sh.w(seg + S_GROUPS).load(Acquire)
            ),
        ));
    };
    let root = if (owned < 2 || 1u64 << g < MIN_GROUPS_PER_SEGMENT * nsegs) && g < MAX_DEPTH {
        hashmap::double_directory(tx, m, root)?;
        sh.w(m.hdr + M_ROOT).load(Acquire)
    } else {
        root
    };
    let g = root >> 48;
    if groups_of(sh, seg, g).unwrap_or(0) < 2 {
        return Err(Error::StoreFull(format!(
            "map {}: segment {seg:#x} is full with the keys of one group of {MAX_DEPTH} hash bits",
            m.id
        )));
    }
    let j = h & ((1u64 << g) - 1);
    let dir = root & OFF_MASK;
    if entry_seg(sh.w(dir + 8 * j).load(Acquire)) != seg {
        return Err(m.bad(
            sh,
            format!(
                "map {}: directory entry {j} does not name locked segment {seg:#x}",
                m.id
            ),
        ));
    }
    // The open segment, if nobody holds it right now (waiting could deadlock: its
    // holder may be waiting for the directory lock, to move a group of its own).
    let open = sh.w(m.hdr + M_OPEN_SEG).load(Acquire);
    if open != 0 && open != seg {
        let fits = open >= sh.g.chunks_off
            && open % BUCKET == 0
            && open
                .checked_add(m.seg_size)
                .is_some_and(|e| e <= sh.file_end())
            && (open + m.seg_size <= seg || seg + m.seg_size <= open)
            && sh.w(open + S_MARK).load(Acquire) == group_segment_mark(m.id);
        if !fits {
            return Err(m.bad(
                sh,
                format!(
                    "map {}: open segment {open:#x} is not a segment of the map in the file",
                    m.id
                ),
            ));
        }
        if tx.try_lock(open + S_LOCK) {
            let r =
                wait_adders(tx, open, m.timeout).and_then(|_| move_to(tx, f, seg, open, j, false));
            tx.unlock(open + S_LOCK);
            if r? {
                return Ok(());
            }
        }
    }
    hashmap::ensure_spares(tx, m, None)?;
    let s1 = hashmap::spare_segment(sh, m, seg)?;
    tx.held_note(s1 + S_LOCK)?;
    hashmap::init_segment(sh, m, s1, tx.idx + 1, 0, group_segment_mark(m.id));
    let r = move_to(tx, f, seg, s1, j, true);
    tx.unlock(s1 + S_LOCK);
    if !r? {
        return Err(sh.corrupt(format!(
            "map {}: group {j} of segment {seg:#x} does not fit an empty segment",
            m.id
        )));
    }
    Ok(())
}

/// Moves group `j` of `src` into `dst` (both locked, adders drained; the directory lock
/// held). Returns false, having changed nothing, if `dst` has no room for it. `fresh`:
/// `dst` is the map's spare segment, just initialised, which becomes the open segment.
pub(crate) fn move_to(
    tx: &Txn,
    f: &FixedRef,
    src: u64,
    dst: u64,
    j: u64,
    fresh: bool,
) -> Result<bool> {
    let sh = tx.sh;
    let m = &f.m;
    let root = sh.w(m.hdr + M_ROOT).load(Acquire);
    let (g, dir) = (root >> 48, root & OFF_MASK);
    let nsegs = sh.w(m.hdr + M_N_SEGS).load(Acquire);
    let src_n = groups_of(sh, src, g).unwrap_or(0);
    let dst_n = if fresh {
        0
    } else {
        groups_of(sh, dst, g).ok_or_else(|| {
            m.bad(
                sh,
                format!("map {}: open segment {dst:#x} has no group count", m.id),
            )
        })?
    };
    // What the move changes besides cells, applied at once when the copies are in place.
    let mut redo = Redo::new();
    redo.push(dir + 8 * j, dir_entry(dst, 0));
    redo.push(src + S_GROUPS, group_count(src_n - 1, g));
    redo.push(dst + S_GROUPS, group_count(dst_n + 1, g));
    if fresh {
        redo.push(m.hdr + M_OPEN_SEG, dst);
        redo.push(m.hdr + M_SPARE_SEG, 0);
        redo.push(m.hdr + M_N_SEGS, nsegs + 1);
    }
    let mut args = [0u64; T_NARGS as usize];
    args[V_MAP] = m.id;
    args[V_SRC] = src;
    args[V_DST] = dst;
    args[V_GROUP] = j;
    args[V_PHASE] = (fresh as u64) << 1;
    args[V_DEPTH] = g;
    tx.commit(I_FMOVE, &args, &redo);
    let r = (|| -> Result<bool> {
        let mask = (1u64 << g) - 1;
        let Some(moved) = copy_group(sh, f, src, dst, j, mask, fresh) else {
            remove_group(sh, f, dst, j, mask);
            return Ok(false);
        };
        sh.persist(dst, m.seg_size)?;
        crate::rt::failpoint!("fixed.move.copied");
        tx.set_arg(V_PHASE as u64, 1 | (fresh as u64) << 1);
        tx.apply(&redo);
        sh.persist(dir + 8 * j, 8)?;
        sh.persist(src, BUCKET)?;
        sh.persist(dst, BUCKET)?;
        sh.persist(m.hdr, BUCKET)?;
        crate::rt::failpoint!("fixed.move.published");
        remove_cells(sh, f, src, &moved);
        crate::rt::failpoint!("fixed.move.done");
        let so = m.hdr + M_COUNTERS + MC_SIZE * tx.idx + MC_SPLITS;
        sh.w(so).store(sh.w(so).load(Relaxed) + 1, Relaxed);
        Ok(true)
    })();
    tx.done();
    r
}

/// A cell of a group being moved, in its source segment: bucket, cell, home bucket.
pub(crate) type Moved = (u64, u64, u64);

/// Copies the cells of group `j` (hash & `mask` == `j`) of `src` into free cells of
/// `dst`, and sets their bits there (readers find them only once the directory names
/// `dst`); returns where they were in `src`. See [`copy_cells_where`].
pub(crate) fn copy_group(
    sh: &Shared,
    f: &FixedRef,
    src: u64,
    dst: u64,
    j: u64,
    mask: u64,
    fresh: bool,
) -> Option<Vec<Moved>> {
    copy_cells_where(
        sh,
        f,
        src,
        dst,
        || {
            crate::rt::failpoint!("fixed.move.copying");
        },
        |kh| kh & mask == j,
        fresh,
    )
}

/// Copies the cells of `src` whose key's hash `take` selects into `dst` and sets their
/// bits and overflow counts there; returns where they were in `src`. Into a `fresh`
/// (empty) segment they go to the positions they had, which always fits (a split's new
/// half, a move's new segment); otherwise each is placed as an insert would be, each
/// bucket word changed through an odd seq, and None is returned (with some of them
/// copied: the caller removes them) when one finds no room. `halfway` runs at the middle
/// bucket (a fail point).
pub(crate) fn copy_cells_where(
    sh: &Shared,
    f: &FixedRef,
    src: u64,
    dst: u64,
    halfway: impl Fn(),
    take: impl Fn(u64) -> bool,
    fresh: bool,
) -> Option<Vec<Moved>> {
    let mut moved = Vec::new();
    let m = &f.m;
    let nb = m.n_main + m.n_stash;
    let mut over = vec![0u64; m.n_main as usize];
    let mut bits_new = vec![0u64; nb as usize];
    let mut key = vec![0u8; f.geo.key_size as usize];
    let mut cell = vec![0u8; f.geo.cell as usize];
    for b in 0..nb {
        if b == nb / 2 {
            halfway();
        }
        let bo = f.bucket(src, b);
        let mut bits = fh_bits(sh.w(bo).load(Acquire)) & f.all_bits();
        while bits != 0 {
            let i = bits.trailing_zeros() as u64;
            bits &= bits - 1;
            let co = f.cell_off(bo, i);
            sh.r.read_bytes(co, &mut key);
            let kh = hash(sh.g.seed, &key);
            if !take(kh) {
                continue;
            }
            sh.r.read_bytes(co, &mut cell);
            let home = home_bucket(kh, m.n_main);
            moved.push((b, i, home));
            if fresh {
                f.set_tag(sh, f.bucket(dst, b), i, kh);
                sh.r.write_bytes(f.cell_off(f.bucket(dst, b), i), &cell);
                bits_new[b as usize] |= 1 << i;
                if b != home {
                    over[home as usize] += 1;
                }
                continue;
            }
            let c = f.free_cell(sh, dst, kh)?;
            let to = f.bucket(dst, c.b);
            f.set_tag(sh, to, c.i, kh);
            sh.r.write_bytes(f.cell_off(to, c.i), &cell);
            bump(sh, to, 0, 1 << c.i);
            if c.b != home {
                bump(sh, f.bucket(dst, home), 1, 0);
            }
        }
    }
    if fresh {
        for b in 0..nb {
            let ov = if b < m.n_main { over[b as usize] } else { 0 };
            let bn = bits_new[b as usize];
            if ov > 0 || bn != 0 {
                sh.w(f.bucket(dst, b)).store(fh(0, ov, bn), Relaxed);
            }
        }
    }
    Some(moved)
}

/// Clears the cells `moved` of `seg` and takes them out of their home buckets' overflow
/// counts: [`remove_group`] without hashing every key again, for the live move, which
/// knows them (recovery does not, and runs `remove_group`).
pub(crate) fn remove_cells(sh: &Shared, f: &FixedRef, seg: u64, moved: &[Moved]) {
    let nb = (f.m.n_main + f.m.n_stash) as usize;
    let mut clear = vec![0u64; nb];
    let mut less = vec![0u64; nb];
    for &(b, i, home) in moved {
        clear[b as usize] |= 1 << i;
        if b != home {
            less[home as usize] += 1;
        }
    }
    for b in 0..nb {
        if b == nb / 2 {
            crate::rt::failpoint!("fixed.move.removing");
        }
        if clear[b] == 0 && less[b] == 0 {
            continue;
        }
        let bo = f.bucket(seg, b as u64);
        let h0 = sh.w(bo).load(Acquire);
        let seq = fh_seq(h0) | 1;
        sh.w(bo).store(fh(seq, fh_over(h0), fh_bits(h0)), Relaxed);
        fence(Release);
        sh.w(bo).store(
            fh(
                seq + 1,
                fh_over(h0).saturating_sub(less[b]),
                fh_bits(h0) & !clear[b],
            ),
            Release,
        );
    }
}

/// Changes bucket word `bo` (adds `over_delta` to its overflow count, sets `bits`),
/// through an odd seq, as every change readers may see.
pub(crate) fn bump(sh: &Shared, bo: u64, over_delta: u64, bits: u64) {
    let h0 = sh.w(bo).load(Acquire);
    let seq = fh_seq(h0) | 1;
    sh.w(bo).store(fh(seq, fh_over(h0), fh_bits(h0)), Relaxed);
    fence(Release);
    sh.w(bo).store(
        fh(
            seq + 1,
            (fh_over(h0) + over_delta).min(0xff),
            fh_bits(h0) | bits,
        ),
        Release,
    );
}

/// Clears the bits of every cell of group `j` in `seg` and recounts its overflow counts
/// from the cells left; makes odd seqs even. Idempotent (recovery runs it again).
pub(crate) fn remove_group(sh: &Shared, f: &FixedRef, seg: u64, j: u64, mask: u64) {
    clear_cells_where(
        sh,
        f,
        seg,
        || {
            crate::rt::failpoint!("fixed.move.removing");
        },
        |kh| kh & mask == j,
    );
}

/// Clears the bits of the cells of `seg` whose key's hash `gone` selects and recounts the
/// overflow counts from the cells left, each changed bucket word through an odd seq;
/// makes odd seqs even. Idempotent. `halfway` runs at the middle bucket (a fail point).
/// The second half of a split, and of a move when its cells are not known (recovery).
pub(crate) fn clear_cells_where(
    sh: &Shared,
    f: &FixedRef,
    seg: u64,
    halfway: impl Fn(),
    gone: impl Fn(u64) -> bool,
) {
    let m = &f.m;
    let nb = m.n_main + m.n_stash;
    let mut key = vec![0u8; f.geo.key_size as usize];
    let mut counts = vec![0u64; m.n_main as usize];
    for b in 0..nb {
        if b == nb / 2 {
            halfway();
        }
        let bo = f.bucket(seg, b);
        let h0 = sh.w(bo).load(Acquire);
        let mut bits = fh_bits(h0) & f.all_bits();
        let mut moved = 0u64;
        while bits != 0 {
            let i = bits.trailing_zeros() as u64;
            bits &= bits - 1;
            sh.r.read_bytes(f.cell_off(bo, i), &mut key);
            let kh = hash(sh.g.seed, &key);
            let home = home_bucket(kh, m.n_main);
            if gone(kh) {
                moved |= 1 << i;
            } else if b != home {
                counts[home as usize] += 1;
            }
        }
        if moved != 0 || fh_seq(h0) & 1 == 1 || fh_bits(h0) & !f.all_bits() != 0 {
            let seq = fh_seq(h0) | 1;
            sh.w(bo).store(fh(seq, fh_over(h0), fh_bits(h0)), Relaxed);
            sh.w(bo).store(
                fh(seq + 1, fh_over(h0), fh_bits(h0) & !moved & f.all_bits()),
                Release,
            );
        }
    }
    set_overflow_counts(sh, f, seg, &counts);
}

/// Repair of a map of groups: clears the cells of `seg` whose directory entry names
/// another segment. A move cut short by an OS crash may have left copies on either side
/// (pages reach the disk in any order between two flushes); the directory says which
/// copy is the key's.
pub(crate) fn drop_strays(sh: &Shared, f: &FixedRef, seg: u64, root: u64) {
    let (g, dir) = (root >> 48, root & OFF_MASK);
    let mut key = vec![0u8; f.geo.key_size as usize];
    for b in 0..f.m.n_main + f.m.n_stash {
        let bo = f.bucket(seg, b);
        let h0 = sh.w(bo).load(Acquire);
        let mut bits = fh_bits(h0) & f.all_bits();
        let mut stray = 0u64;
        while bits != 0 {
            let i = bits.trailing_zeros() as u64;
            bits &= bits - 1;
            sh.r.read_bytes(f.cell_off(bo, i), &mut key);
            let j = hash(sh.g.seed, &key) & ((1u64 << g) - 1);
            if entry_seg(sh.w(dir + 8 * j).load(Acquire)) != seg {
                stray |= 1 << i;
            }
        }
        if stray != 0 {
            sh.w(bo)
                .store(fh(fh_seq(h0), fh_over(h0), fh_bits(h0) & !stray), Release);
        }
    }
}

/// Recovery of a move whose thread died (its locks, the directory's included, still name
/// it, so nothing has changed since). Before phase 1 the move is undone: cells of the
/// group copied into an existing segment are removed again (a new segment is still the
/// spare). From phase 1 on it is finished: its redo list (`redo`, the txn slot's) is
/// applied again and the group removed from the source.
pub(crate) fn recover_move(sh: &Shared, intent: &crate::shared::Intent) -> Result<()> {
    let (args, redo) = (&intent.args, &intent.redo[..]);
    let f = fixed_ref_unchecked(sh, args[V_MAP])?;
    let m = &f.m;
    let (src, dst, j, ph, g) = (
        args[V_SRC],
        args[V_DST],
        args[V_GROUP],
        args[V_PHASE],
        args[V_DEPTH],
    );
    let end = sh.file_end();
    let root = sh.w(m.hdr + M_ROOT).load(Acquire);
    let dir = root & OFF_MASK;
    let seg_ok = |s: u64| {
        s >= sh.g.chunks_off
            && s % BUCKET == 0
            && s.checked_add(m.seg_size).is_some_and(|e| e <= end)
    };
    let dir_ok = g <= MAX_DEPTH
        && root >> 48 == g
        && dir >= sh.g.chunks_off
        && dir % 8 == 0
        && dir.checked_add(8 << g).is_some_and(|e| e <= end);
    if !(m.groups && dir_ok && j < 1 << g && seg_ok(src) && seg_ok(dst) && src != dst && ph < 4) {
        return Err(sh.corrupt(format!(
            "map {}: a dead txn's move intent (segment {src:#x} to {dst:#x}, group {j} of \
             depth {g}) does not fit its directory (root {root:#x}) or the file",
            m.id
        )));
    }
    let mask = (1u64 << g) - 1;
    if ph & 1 == 0 {
        if ph & 2 == 0 {
            remove_group(sh, &f, dst, j, mask);
        }
        return Ok(());
    }
    let targets = [
        dir + 8 * j,
        src + S_GROUPS,
        dst + S_GROUPS,
        m.hdr + M_OPEN_SEG,
        m.hdr + M_SPARE_SEG,
        m.hdr + M_N_SEGS,
    ];
    for &(at, val) in redo {
        if !targets.contains(&at) {
            return Err(sh.corrupt(format!(
                "map {}: a dead txn's move intent writes {at:#x}, not one of its words",
                m.id
            )));
        }
        sh.w(at).store(val, Release);
    }
    remove_group(sh, &f, src, j, mask);
    Ok(())
}
