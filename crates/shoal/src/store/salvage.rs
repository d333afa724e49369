//! Salvage of a truncated store file: one shorter than the file end its header records
//! (a copy cut short, a disk that filled up while the file was copied or restored).
//!
//! [`Store::repair`](crate::Store::repair) of such a file copies every entry that can be
//! read whole from what is left into a new store, which then replaces the file; the
//! truncated original is kept beside it. Why a copy and not a repair in place (extending
//! the file back to its end with zeros, and dropping what refers to the lost range): a
//! truncation can cut through anything, not only records. The lost part may hold index
//! segments, a directory, a map's header or its index arena, UID blocks, spare segments,
//! free runs or the middle of a large record's run, and every pointer into it would have
//! to be found and each structure rebuilt in place by code of its own, on a file that is
//! already damaged. A copy needs none of that: it reads defensively (nothing at or past
//! the real end of the file, every record bounded and checksummed where the store has
//! checksums, every key where its slot says it is), and writes through the ordinary API,
//! so the new store is sound by construction (and `check` says so). The original is only
//! read, through a private mapping whose missing part reads as zeros, and stays as it was
//! until the new store is complete. The price: the store briefly needs room for both
//! files, and maps with UIDs get new UIDs (handles made before do not name their keys).

use crate::error::{Error, Result};
use crate::format::*;
use crate::repair::RepairReport;
use crate::store::Store;
use std::fs::File;
use std::path::{Path, PathBuf};

/// Salvages the truncated store at `path` (its `file`, whose header was read as `g`:
/// `size` bytes where the header says `end`) into a new store that takes its place.
/// Returns the new store and the report.
#[cfg(shuttle)]
pub(crate) fn salvage(
    path: &Path,
    _file: File,
    _g: Geometry,
    _size: u64,
    _end: u64,
) -> Result<(Store, RepairReport)> {
    Err(unmappable(path))
}

/// What [`salvage`] would do, without writing or creating any file.
#[cfg(shuttle)]
pub(crate) fn salvage_dry_run(
    path: &Path,
    _file: File,
    _g: Geometry,
    _size: u64,
    _end: u64,
) -> Result<RepairReport> {
    Err(unmappable(path))
}

#[cfg(shuttle)]
fn unmappable(path: &Path) -> Error {
    Error::InvalidArgument(format!(
        "{}: files cannot be mapped under cfg(shuttle)",
        path.display()
    ))
}

/// The first line of a salvage's report.
fn found(size: u64, end: u64) -> RepairReport {
    RepairReport {
        found: vec![format!(
            "truncated: the file has {size} bytes, its header says {end} ({} bytes missing)",
            end - size
        )],
        ..Default::default()
    }
}

/// What [`salvage`] would do, without writing or creating any file.
#[cfg(not(shuttle))]
pub(crate) fn salvage_dry_run(
    path: &Path,
    file: File,
    g: Geometry,
    size: u64,
    end: u64,
) -> Result<RepairReport> {
    let sh = crate::store::private_shared(path, file, g, size)?;
    let mut rep = found(size, end);
    let (maps, entries) = copy_maps(&sh, size, None, &mut rep)?;
    rep.rebuilt.push(format!(
        "would salvage {entries} entries of {maps} map(s) into a new store at {} (the \
         truncated original kept at {})",
        path.display(),
        kept_path(path).display()
    ));
    Ok(rep)
}

/// Salvages the truncated store at `path` (its `file`, whose header was read as `g`:
/// `size` bytes where the header says `end`) into a new store that takes its place.
/// Returns the new store and the report.
#[cfg(not(shuttle))]
pub(crate) fn salvage(
    path: &Path,
    file: File,
    g: Geometry,
    size: u64,
    end: u64,
) -> Result<(Store, RepairReport)> {
    use std::os::unix::fs::PermissionsExt;
    let mode = file
        .metadata()
        .map_err(|e| Error::io(path, e))?
        .permissions()
        .mode()
        & 0o777;
    let sh = crate::store::private_shared(path, file, g, size)?;
    let mut rep = found(size, end);
    let tmp = sibling(path, &format!(".salvage.{}.tmp", std::process::id()), true);
    let o = crate::Options {
        max_size: g.max_size,
        mode,
        max_processes: g.n_proc as u32,
        max_threads: g.n_txn as u32,
        max_maps: g.n_catalog as u32,
        chunk_size: g.chunk_size(),
        checksums: Some(g.trailer != 0),
        pretouch: false,
        ..Default::default()
    };
    // A leftover of a salvage by a process of the same pid that was killed.
    let _ = std::fs::remove_file(&tmp);
    let target = Store::open_with(&tmp, &o, crate::OpenMode::CreateNew)?;
    let placed = (|| {
        let (maps, entries) = copy_maps(&sh, size, Some(&target), &mut rep)?;
        target.flush()?;
        // Closed cleanly. The original is kept under another name first, then the new
        // store takes its place in one rename: at every moment `path` is one whole file
        // or the other.
        drop(target);
        let kept = keep_original(path)?;
        std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            // The renames are durable once the directory is (a failure only delays that).
            let _ = File::open(dir).and_then(|d| d.sync_all());
        }
        Ok::<_, Error>((maps, entries, kept))
    })();
    let (maps, entries, kept) = match placed {
        Ok(p) => p,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    drop(sh);
    rep.rebuilt.push(format!(
        "salvaged {entries} entries of {maps} map(s) into a new store, now at {}; the \
         truncated original is kept at {}",
        path.display(),
        kept.display()
    ));
    let s = Store::open_with(path, &crate::Options::default(), crate::OpenMode::Open)?;
    Ok((s, rep))
}

/// Copies every live map of the truncated store `sh` (its real size `size`) into
/// `target` (nothing is written without one): (maps, entries) copied.
#[cfg(not(shuttle))]
fn copy_maps(
    sh: &crate::shared::Shared,
    size: u64,
    target: Option<&Store>,
    rep: &mut RepairReport,
) -> Result<(u64, u64)> {
    use std::sync::atomic::Ordering::Acquire;
    let g = &sh.g;
    let (mut maps, mut entries) = (0u64, 0u64);
    for id in 0..g.n_catalog {
        let ce = g.cat_entry(id);
        if sh.w(ce + C_STATE).load(Acquire) & 0xff != CAT_LIVE {
            continue; // free, or being dropped
        }
        let name = crate::object::object_name(sh, id);
        let mut lost_here = Vec::new();
        let n = copy_map(
            sh,
            id,
            &name,
            size,
            target,
            &mut lost_here,
            &mut rep.rebuilt,
        );
        rep.dropped
            .extend(lost_here.into_iter().map(|what| (name.clone(), what)));
        if let Some(n) = n? {
            maps += 1;
            entries += n;
        }
    }
    Ok((maps, entries))
}

/// [`copy_maps`] for map `id`, named `name`: the entries copied, or None when the whole
/// map was lost. What could not be copied goes to `lost_here`, notes to `notes`.
#[cfg(not(shuttle))]
fn copy_map(
    sh: &crate::shared::Shared,
    id: u64,
    name: &str,
    size: u64,
    target: Option<&Store>,
    lost_here: &mut Vec<String>,
    notes: &mut Vec<String>,
) -> Result<Option<u64>> {
    use std::sync::atomic::Ordering::Acquire;
    let g = &sh.g;
    let ce = g.cat_entry(id);
    let mut lost = |what: String| lost_here.push(what);
    let name_len = sh.w(ce + C_NAME_LEN).load(Acquire);
    if name_len == 0 || name_len > MAX_NAME as u64 || name.contains('\u{fffd}') {
        lost(format!(
            "the whole map (catalog entry {id}): its name is damaged"
        ));
        return Ok(None);
    }
    if crate::kinds::queue::is_queue_set(sh, id) {
        return copy_queue_set(sh, id, name, size, target, &mut lost);
    }
    if crate::kinds::log::is_log(sh, id) {
        // A log holds a ring of recent records and its readers' cursors; salvage keeps
        // the data of maps and queue sets, and reports a log as lost rather than
        // recreate it with cursors that no longer match its records.
        lost("the whole log: logs are not salvaged".into());
        return Ok(None);
    }
    let hdr = sh.w(ce + C_HDR).load(Acquire);
    if !g.map_header_fits(hdr, size) {
        lost(format!(
            "the whole map: its header at {hdr:#x} lies in the missing part of the file"
        ));
        return Ok(None);
    }
    // The directory, which both kinds of map have at the same place.
    let root = sh.w(hdr + M_ROOT).load(Acquire);
    let (gd, dir) = (root >> 48, root & OFF_MASK);
    if gd > MAX_DEPTH || dir < g.chunks_off || dir % 8 != 0 || dir + (8 << gd) > size {
        lost(format!(
            "the whole map: its directory ({root:#x}) lies in the missing part of the file, or is damaged"
        ));
        return Ok(None);
    }
    // The types go with the entries (a damaged header's that cannot fit are left out).
    let (kt, vt) = super::recorded_types(sh, hdr);
    let n = if crate::kinds::fixed::is_fixed(sh, id) {
        let f = match crate::kinds::fixed::fixed_ref_unchecked(sh, id) {
            Ok(f) => f,
            Err(e) => {
                lost(format!("the whole map: {e}"));
                return Ok(None);
            }
        };
        let out = match target {
            // Maps of a version-6 file split instead of moving groups: their bucket
            // counts were chosen for that; the new map takes the defaults.
            Some(s) => Some(s.fixed_map_with(
                name,
                f.geo.key_size as usize,
                f.geo.value_size as usize,
                &crate::FixedOptions {
                    segment_buckets: if f.m.groups { f.m.n_main as u32 } else { 0 },
                    stash_buckets: if f.m.groups { f.m.n_stash as u32 } else { 0 },
                    key_type:
                        kt.filter(|t| t.fixed_size().is_none_or(|n| n as u64 == f.geo.key_size)),
                    value_type:
                        vt.filter(|t| t.fixed_size().is_none_or(|n| n as u64 == f.geo.value_size)),
                },
                true,
            )?),
            None => None,
        };
        let mut n = 0u64;
        crate::kinds::fixed::salvage_cells(
            sh,
            &f,
            size,
            |k, v| {
                if let Some(m) = &out {
                    m.put(k, v)?;
                }
                n += 1;
                Ok(())
            },
            &mut lost,
        )?;
        n
    } else {
        let m = match crate::kinds::varmap::map_ref_unchecked(sh, id) {
            Ok(m) => m,
            Err(e) => {
                lost(format!("the whole map: {e}"));
                return Ok(None);
            }
        };
        let out = match target {
            Some(s) => Some(s.map_with(
                name,
                &crate::MapOptions {
                    segment_buckets: m.n_main as u32,
                    stash_buckets: m.n_stash as u32,
                    uids: m.vtrail != 0,
                    key_type: kt,
                    value_type: vt,
                },
                true,
            )?),
            None => None,
        };
        if m.vtrail != 0 {
            notes.push(format!(
                "map {name:?}: its entries get new UIDs (handles made before do not name them)"
            ));
        }
        let mut n = 0u64;
        salvage_records(sh, &m, dir, gd, size, &mut lost, |k, v| {
            if let Some(m) = &out {
                m.put(k, v)?;
            }
            n += 1;
            Ok(())
        })?;
        n
    };
    Ok(Some(n))
}

/// [`copy_map`] for a queue set: a new set of the same geometry whose queues hold the same
/// elements, with the same bytes, in the same order (elements held by a process, all dead
/// now, go where a dead holder's elements go). None when the set lies partly in the
/// missing part of the file.
#[cfg(not(shuttle))]
fn copy_queue_set(
    sh: &crate::shared::Shared,
    id: u64,
    name: &str,
    size: u64,
    target: Option<&Store>,
    lost: &mut dyn FnMut(String),
) -> Result<Option<u64>> {
    let q = match crate::kinds::queue::queue_ref_unchecked(sh, id) {
        Ok(q) if q.end <= size => q,
        Ok(q) => {
            lost(format!(
                "the whole queue set: it ends at {:#x}, in the missing part of the file",
                q.end
            ));
            return Ok(None);
        }
        Err(e) => {
            lost(format!("the whole queue set: {e}"));
            return Ok(None);
        }
    };
    let Some(s) = target else {
        return Ok(Some(q.elems));
    };
    let names: Vec<String> = (0..q.nq).map(|i| q.queue_name(sh, i)).collect();
    let queues = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let limit = sh
                .w(q.queue(i as u64) + Q_LIMIT)
                .load(std::sync::atomic::Ordering::Acquire);
            (n.clone(), limit)
        })
        .collect();
    let opts = crate::QueueSetOptions::exact(
        q.elem_size as usize,
        q.elems,
        queues,
        names[q.ret as usize].clone(),
        q.redeliver,
    );
    let set = match s.queue_set(name, &opts) {
        Ok(set) => set,
        Err(e @ Error::InvalidArgument(_)) => {
            lost(format!(
                "the whole queue set: its geometry is damaged ({e})"
            ));
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    // A new set holds every element in its initial queue, in index order.
    let mut elems: Vec<Option<crate::Element>> = set
        .pull_many(set.queue(&names[q.ret as usize])?, q.elems as usize)?
        .into_iter()
        .map(Some)
        .collect();
    let mut buf = vec![0u8; q.elem_size as usize];
    for (i, e) in elems.iter_mut().enumerate() {
        sh.r.read_bytes(q.element(i as u64), &mut buf);
        e.as_mut().expect("every element").write(0, &buf);
    }
    let (lists, _) = q.placement(sh);
    for (qi, list) in lists.iter().enumerate() {
        let batch = list
            .iter()
            .map(|&e| elems[e as usize].take().expect("placed once"))
            .collect();
        set.push_past_limit(set.queue(&names[qi])?, batch)?;
    }
    Ok(Some(q.elems))
}

/// [`copy_maps`] for a map of records: `each(key, value)` on every entry whose slot
/// survived and whose record can be trusted wholly below `bound` (see
/// `kinds::varmap::slot_entry`), each key once; `lost` on the rest (counted by reason: a missing
/// data chunk loses thousands of entries, which need not be listed one by one).
#[cfg(not(shuttle))]
fn salvage_records(
    sh: &crate::shared::Shared,
    m: &crate::hashmap::MapRef,
    dir: u64,
    gd: u64,
    bound: u64,
    lost: &mut impl FnMut(String),
    mut each: impl FnMut(&[u8], &[u8]) -> Result<()>,
) -> Result<()> {
    use std::sync::atomic::Ordering::Acquire;
    let mut keys = std::collections::HashSet::new();
    // Entries dropped, by reason: (how many, the first slot).
    let mut dropped: Vec<(&'static str, u64, String)> = Vec::new();
    for j in 0..(1u64 << gd) {
        let e = sh.w(dir + 8 * j).load(Acquire);
        let (seg, d) = (entry_seg(e), entry_depth(e));
        if d > gd {
            lost(format!(
                "directory entry {j} is damaged (depth {d}): its keys are lost"
            ));
            continue;
        }
        if j >= 1 << d {
            continue; // the segment of entry `j` mod 2^d, visited there
        }
        if seg < sh.g.chunks_off || seg % BUCKET != 0 {
            lost(format!(
                "directory entry {j} names {seg:#x}, which is no segment: its keys are lost"
            ));
            continue;
        }
        if seg >= bound {
            lost(format!(
                "segment {seg:#x} lies in the missing part of the file: its entries are lost"
            ));
            continue;
        }
        if seg + m.seg_size > bound {
            lost(format!(
                "segment {seg:#x} runs into the missing part of the file: the entries there are lost"
            ));
        }
        for b in 0..m.n_main + m.n_stash {
            for i in 0..SLOTS {
                let so = slot_off(seg, b, i);
                if so + 8 > bound {
                    break;
                }
                let s = sh.w(so).load(Acquire);
                if s == 0 {
                    continue;
                }
                let off = slot_off_of(s);
                let why = match crate::kinds::varmap::slot_entry(sh, m, (j, d), b, s, bound) {
                    Ok((k, v)) => {
                        if keys.insert(k.clone()) {
                            each(&k, &v)?;
                        }
                        continue;
                    }
                    Err(why) => cut_short(sh, off, bound).unwrap_or(why),
                };
                match dropped.iter_mut().find(|(w, _, _)| *w == why) {
                    Some((_, n, _)) => *n += 1,
                    None => dropped.push((why, 1, format!("slot {so:#x} -> record {off:#x}"))),
                }
            }
        }
    }
    for (why, n, first) in dropped {
        lost(format!(
            "{n} entr{}: {why} (first: {first})",
            if n == 1 { "y" } else { "ies" }
        ));
    }
    Ok(())
}

/// Why the record at `off` is gone if the truncation took it (it lies, or runs, at or
/// past `bound`); None when it is not that (it is damaged before the cut, or its header
/// was cut and cannot be read: the repair's reason says so then).
#[cfg(not(shuttle))]
fn cut_short(sh: &crate::shared::Shared, off: u64, bound: u64) -> Option<&'static str> {
    if off >= bound {
        return Some("the record lies in the missing part of the file");
    }
    let limit = crate::alloc::record::data_limit(sh, off)?;
    let (_, k, v, hl) = crate::alloc::record::read_record_header_in(sh, off, limit)?;
    (off + hl + k + v + sh.g.trailer > bound)
        .then_some("the record runs into the missing part of the file")
}

/// `path` with `suffix` appended to its file name (`hidden`: and a dot before it).
fn sibling(path: &Path, suffix: &str, hidden: bool) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = if hidden {
        format!(".{name}{suffix}")
    } else {
        format!("{name}{suffix}")
    };
    path.with_file_name(name)
}

/// Where the truncated original will be kept: `PATH.truncated`, or `PATH.truncated.N`
/// for the first N free (an earlier salvage may have left one).
fn kept_path(path: &Path) -> PathBuf {
    (0..1000)
        .map(|n| match n {
            0 => sibling(path, ".truncated", false),
            n => sibling(path, &format!(".truncated.{n}"), false),
        })
        .find(|p| !p.exists())
        .unwrap_or_else(|| sibling(path, ".truncated", false))
}

/// Links the original to a free [`kept_path`] name (never replacing a file): that name.
fn keep_original(path: &Path) -> Result<PathBuf> {
    for _ in 0..1000 {
        let kept = kept_path(path);
        match std::fs::hard_link(path, &kept) {
            Ok(()) => return Ok(kept),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(Error::io(&kept, e)),
        }
    }
    Err(Error::AlreadyExists(format!(
        "{}.truncated: a thousand earlier ones",
        path.display()
    )))
}
