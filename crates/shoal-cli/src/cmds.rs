//! The small subcommands: stat, ls, get, put, del, check, repair, compact, rm.

use crate::codec::{self, Encoding};
use crate::fail::Fail;
use crate::human;
use shoal::{Map, Store};
use std::ffi::OsStr;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// Opens an existing store, with a clear message if there is none.
pub fn open_existing(store: &Path) -> Result<Store, Fail> {
    let path = shoal::resolve_path(store);
    Store::open_existing(&path).map_err(|e| open_error(&path, e))
}

/// Opens an existing store for a command that only reads it: read-write when this user
/// may write the file (so that what a writer that died left half done is recovered on
/// the way), else read-only, which needs no write access.
pub fn open_for_reading(store: &Path) -> Result<Store, Fail> {
    let path = shoal::resolve_path(store);
    match Store::open_existing(&path) {
        Err(shoal::Error::Permission { .. }) => {
            Store::open_with(&path, &shoal::Options::default(), shoal::OpenMode::ReadOnly)
                .map_err(|e| open_error(&path, e))
        }
        r => r.map_err(|e| open_error(&path, e)),
    }
}

/// Opens a store, creating it if there is none.
pub fn open_or_create(store: &Path) -> Result<Store, Fail> {
    let path = shoal::resolve_path(store);
    Store::open(&path).map_err(|e| match e {
        shoal::Error::NotFound(_) => Fail::err(format!(
            "cannot create a store at {}: its directory does not exist",
            path.display()
        )),
        e => e.into(),
    })
}

/// The message for a failed open of an existing store.
pub fn open_error(path: &Path, e: shoal::Error) -> Fail {
    match e {
        shoal::Error::NotFound(_) => {
            // A bare name that is also a file here is a likely slip: say so.
            let here = path
                .strip_prefix("/dev/shm")
                .ok()
                .and_then(|p| p.to_str())
                .and_then(|p| p.strip_suffix(".shoal"))
                .filter(|p| !p.contains('/') && Path::new(p).is_file());
            match here {
                Some(name) => Fail::err(format!(
                    "no store at {} (a bare name means /dev/shm/NAME.shoal; for the file here, say ./{name})",
                    path.display()
                )),
                None => Fail::err(format!(
                    "no store at {} (a bare name means /dev/shm/NAME.shoal)",
                    path.display()
                )),
            }
        }
        e => e.into(),
    }
}

/// Opens an existing map, with a clear message if there is none.
pub fn open_map(store: &Store, name: &str) -> Result<Map, Fail> {
    store.open_map(name).map_err(|e| match e {
        shoal::Error::NotFound(_) => Fail::err(format!(
            "no map named {name:?} in {}",
            store.path().display()
        )),
        e => e.into(),
    })
}

/// Header facts that the API does not expose, read from the file (see docs/FORMAT.md).
#[derive(Debug, Clone)]
pub struct Header {
    /// Format version of the file.
    pub version: u32,
    /// Chunk size in bytes.
    pub chunk_size: u64,
    /// Process slots.
    pub n_proc: u32,
    /// Thread (txn) slots.
    pub n_txn: u32,
    /// Catalog entries (maps the store can hold).
    pub n_cat: u32,
    /// Creation time, Unix nanoseconds.
    pub created_ns: u64,
    /// The hot backup's epoch word (FORMAT.md, "Hot backup"): 0 while none runs.
    pub backup_epoch: u64,
}

/// Reads the header of a store that was opened (so validated) already.
pub fn read_header(path: &Path) -> Result<Header, Fail> {
    let mut h = vec![0u8; 4096];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut h))
        .map_err(|e| Fail::err(format!("{}: reading the header: {e}", path.display())))?;
    let u32_at = |o: usize| u32::from_le_bytes(h[o..o + 4].try_into().unwrap_or_default());
    let u64_at = |o: usize| u64::from_le_bytes(h[o..o + 8].try_into().unwrap_or_default());
    Ok(Header {
        version: u32_at(8),
        chunk_size: 1u64 << u32_at(24).min(63),
        n_proc: u32_at(56),
        n_txn: u32_at(60),
        n_cat: u32_at(64),
        created_ns: u64_at(104),
        backup_epoch: u64_at(120),
    })
}

/// What `shoal stat` says of a hot backup in progress: its phase (bits 0..1 of the
/// epoch word: 1 preparing, 2 copying) and the txn slot of the thread that runs it (bits
/// 2..21); `None` while no backup runs.
pub fn backup_running(epoch: u64) -> Option<(&'static str, u64)> {
    let phase = match epoch & 3 {
        0 => return None,
        1 => "preparing",
        2 => "copying",
        _ => "unknown",
    };
    Some((phase, (epoch >> 2) & 0xf_ffff))
}

/// One map's line in `shoal stat`, whatever its kind.
struct MapRow {
    kind: String,
    types: (Option<shoal::DataType>, Option<shoal::DataType>),
    kind_json: serde_json::Value,
    entries: u64,
    live_bytes: u64,
    segments: u64,
    splits: u64,
    directory_depth: u64,
}

fn map_row(s: &shoal::Store, name: &str) -> shoal::Result<Option<MapRow>> {
    let (Some(kind), Some(st)) = (s.map_kind(name)?, s.object_stats(name)?) else {
        return Ok(None); // absent, or dropped meanwhile
    };
    let (kind, kind_json) = match kind {
        shoal::MapKind::Variable { uids } => (
            if uids { "variable, UIDs" } else { "variable" }.to_string(),
            serde_json::json!({"variable": {"uids": uids}}),
        ),
        shoal::MapKind::Fixed {
            key_size,
            value_size,
        } => (
            format!("fixed {key_size}+{value_size}"),
            serde_json::json!({"fixed": {"key_size": key_size, "value_size": value_size}}),
        ),
        // A kind of object this build of the tool does not know by name: its figures
        // still come through `object_stats`.
        other => (
            other.to_string(),
            serde_json::json!({"other": other.to_string()}),
        ),
    };
    Ok(Some(MapRow {
        types: crate::typed::of(s, name).unwrap_or((None, None)),
        kind,
        kind_json,
        entries: st.entries,
        live_bytes: st.live_bytes,
        segments: st.segments,
        splits: st.splits,
        directory_depth: st.directory_depth,
    }))
}

/// `shoal stat`.
pub fn stat(store: &Path, json: bool) -> Result<(), Fail> {
    let s = open_for_reading(store)?;
    let path = s.path().to_owned();
    let h = read_header(&path)?;
    let st = s.stats()?;
    // Opening the store attached this process too.
    let others = st.processes.saturating_sub(1);
    let mut maps = Vec::new();
    for name in s.maps()? {
        match map_row(&s, &name) {
            Ok(Some(row)) => maps.push((name, row)),
            Ok(None) | Err(shoal::Error::NotFound(_)) => {} // dropped meanwhile
            Err(e) => return Err(e.into()),
        }
    }
    let sets = crate::queues::sets(&s)?;
    let ordered = crate::ordered::rows(&s)?;
    let logs = crate::logstat::logs(&s)?;
    let mut out = BufWriter::new(std::io::stdout().lock());
    if json {
        let maps_json: Vec<serde_json::Value> = maps
            .iter()
            .map(|(name, m)| {
                serde_json::json!({
                    "name": name,
                    "kind": m.kind_json,
                    "key_type": m.types.0.map(|t| t.name()),
                    "value_type": m.types.1.map(|t| t.name()),
                    "entries": m.entries,
                    "live_bytes": m.live_bytes,
                    "segments": m.segments,
                    "splits": m.splits,
                    "directory_depth": m.directory_depth,
                })
            })
            .collect();
        let v = serde_json::json!({
            "path": path.display().to_string(),
            "format_version": h.version,
            "file_size": st.file_size,
            "max_size": st.max_size,
            "chunk_size": h.chunk_size,
            "created_unix_ns": h.created_ns,
            "process_slots": h.n_proc,
            "thread_slots": h.n_txn,
            "map_slots": h.n_cat,
            "other_processes_attached": others,
            "data_bytes": st.data_bytes,
            "live_bytes": st.live_bytes,
            "dead_bytes": st.dead_bytes,
            "free_bytes": st.free_bytes,
            "chunks_cleaned": st.chunks_cleaned,
            "backup": backup_running(h.backup_epoch)
                .map(|(phase, slot)| serde_json::json!({"phase": phase, "txn_slot": slot})),
            "maps": maps_json,
            "ordered_maps": ordered.iter().map(crate::ordered::Row::json).collect::<Vec<_>>(),
            "queue_sets": crate::queues::json(&sets),
            "logs": crate::logstat::json(&logs),
        });
        writeln!(out, "{v}")?;
        out.flush()?;
        return Ok(());
    }
    let size_line = |b: u64| format!("{} ({} bytes)", human::size(b), human::count(b));
    let rows: Vec<(&str, String)> = vec![
        ("store", path.display().to_string()),
        (
            "format",
            format!(
                "version {} (this tool reads up to {})",
                h.version,
                shoal::FORMAT_VERSION
            ),
        ),
        ("file size", size_line(st.file_size)),
        ("max size", size_line(st.max_size)),
        ("chunk size", human::size(h.chunk_size)),
        ("created", human::utc(h.created_ns)),
        (
            "slots",
            format!(
                "{} processes, {} threads, {} maps",
                human::count(h.n_proc.into()),
                human::count(h.n_txn.into()),
                human::count(h.n_cat.into())
            ),
        ),
        (
            "attached",
            format!("{others} other process(es) now (not counting this one)"),
        ),
        ("data bytes", size_line(st.data_bytes)),
        ("live bytes", size_line(st.live_bytes)),
        (
            "dead bytes",
            format!(
                "{} ({} of data; includes the unwritten ends of active chunks)",
                size_line(st.dead_bytes),
                human::percent(st.dead_bytes, st.data_bytes)
            ),
        ),
        ("free bytes", size_line(st.free_bytes)),
        (
            "cleaned",
            format!("{} chunks", human::count(st.chunks_cleaned)),
        ),
        (
            "backup",
            match backup_running(h.backup_epoch) {
                None => "none running".to_string(),
                Some(("preparing", slot)) => {
                    format!("starting (writers pause until it begins), run by txn slot {slot}")
                }
                Some((phase, slot)) => format!("{phase}, run by txn slot {slot}"),
            },
        ),
        ("maps", st.maps.to_string()),
    ];
    for (k, v) in rows {
        writeln!(out, "{k:<11} {v}")?;
    }
    if !maps.is_empty() {
        writeln!(out)?;
        let rows: Vec<Vec<String>> = maps
            .iter()
            .map(|(name, m)| {
                vec![
                    name.clone(),
                    m.kind.clone(),
                    crate::typed::label(m.types.0, m.types.1),
                    human::count(m.entries),
                    human::size(m.live_bytes),
                    human::count(m.segments),
                    human::count(m.splits),
                    m.directory_depth.to_string(),
                ]
            })
            .collect();
        out.write_all(
            human::table(
                &[
                    "MAP", "KIND", "TYPES", "ENTRIES", "LIVE", "SEGMENTS", "SPLITS", "DEPTH",
                ],
                &rows,
                &[0, 1, 2],
            )
            .as_bytes(),
        )?;
    }
    if !ordered.is_empty() {
        writeln!(out)?;
        out.write_all(crate::ordered::table(&ordered).as_bytes())?;
    }
    if !sets.is_empty() {
        writeln!(out)?;
        out.write_all(crate::queues::table(&sets, None).as_bytes())?;
    }
    if !logs.is_empty() {
        writeln!(out)?;
        out.write_all(crate::logstat::table(&logs).as_bytes())?;
    }
    out.flush()?;
    Ok(())
}

/// `shoal ls`.
pub fn ls(
    store: &Path,
    map: Option<&str>,
    limit: Option<u64>,
    long: bool,
    enc: Encoding,
) -> Result<(), Fail> {
    let s = open_for_reading(store)?;
    let limit = limit.unwrap_or(u64::MAX);
    let mut out = BufWriter::new(std::io::stdout().lock());
    match map {
        None => {
            for name in s.maps()?.into_iter().take(limit as usize) {
                if long {
                    match s.object_stats(&name)? {
                        Some(st) => writeln!(
                            out,
                            "{:>12}  {:>10}  {name}",
                            human::count(st.entries),
                            human::size(st.live_bytes)
                        )?,
                        None => continue, // dropped meanwhile
                    }
                } else {
                    writeln!(out, "{name}")?;
                }
            }
            let left = limit.saturating_sub(s.maps()?.len() as u64);
            for r in crate::ordered::rows(&s)?.into_iter().take(left as usize) {
                if long {
                    writeln!(
                        out,
                        "{:>12}  {:>10}  {}",
                        human::count(r.entries),
                        human::size(r.bytes()),
                        r.name
                    )?;
                } else {
                    writeln!(out, "{}", r.name)?;
                }
            }
            let left = left.saturating_sub(crate::ordered::rows(&s)?.len() as u64);
            if long {
                for v in crate::logstat::logs(&s)?.iter().take(left as usize) {
                    writeln!(out, "{}", crate::logstat::long_line(v))?;
                }
            } else {
                for name in s.logs()?.into_iter().take(left as usize) {
                    writeln!(out, "{name}")?;
                }
            }
        }
        Some(name) if crate::ordered::is_ordered(&s, name)? => {
            let m = crate::ordered::open(&s, name)?;
            let snap = m.snapshot()?;
            let mut err = None;
            let mut n = 0u64;
            snap.for_each(None, None, false, |k, v| {
                if n >= limit {
                    return false;
                }
                n += 1;
                let line = codec::encode_line(k, enc);
                let r = if long {
                    writeln!(out, "{:>10}  {line}", v.len())
                } else {
                    writeln!(out, "{line}")
                };
                r.map_err(|e| err = Some(e)).is_ok()
            })?;
            if let Some(e) = err {
                return Err(e.into());
            }
        }
        Some(name) => {
            let m = open_map(&s, name)?;
            let kt = m.key_type();
            let line = |k: &[u8]| match enc {
                Encoding::Text => {
                    crate::typed::show(k, kt).unwrap_or_else(|| codec::encode_line(k, enc))
                }
                e => codec::encode_line(k, e),
            };
            if long {
                for item in m.iter().take(limit as usize) {
                    let (k, v) = item?;
                    writeln!(out, "{:>10}  {}", v.len(), line(&k))?;
                }
            } else {
                for k in m.keys().take(limit as usize) {
                    writeln!(out, "{}", line(&k?))?;
                }
            }
        }
    }
    out.flush()?;
    Ok(())
}

/// A key or value from the command line: in `enc`, or as the map's type `t` says when
/// it is plain text.
fn arg(a: &OsStr, enc: Encoding, t: Option<shoal::DataType>, what: &str) -> Result<Vec<u8>, Fail> {
    match enc {
        Encoding::Text => {
            use std::os::unix::ffi::OsStrExt;
            crate::typed::parse(a.as_bytes(), t, what)
        }
        e => codec::decode_arg(a, e, what),
    }
}

fn not_found(key: &[u8], map: &str) -> Fail {
    Fail::No(format!(
        "key \"{}\" not found in map {map:?}",
        codec::escape(key)
    ))
}

/// `shoal get`.
pub fn get(
    store: &Path,
    map: &str,
    key: &OsStr,
    enc: Encoding,
    raw: bool,
    no_newline: bool,
) -> Result<(), Fail> {
    let s = open_for_reading(store)?;
    let (v, vt) = if crate::ordered::is_ordered(&s, map)? {
        let key = arg(key, enc, None, "key")?;
        match crate::ordered::open(&s, map)?.get(&key)? {
            Some(v) => (v, None),
            None => return Err(not_found(&key, map)),
        }
    } else {
        let m = open_map(&s, map)?;
        let key = arg(key, enc, m.key_type(), "key")?;
        let Some(v) = m.get(&key)? else {
            return Err(not_found(&key, map));
        };
        (v, m.value_type())
    };
    let mut out = std::io::stdout().lock();
    if raw {
        out.write_all(&v)?;
    } else {
        let typed = (enc == Encoding::Text)
            .then(|| crate::typed::show(&v, vt))
            .flatten();
        match enc {
            Encoding::Text if typed.is_some() => {
                out.write_all(typed.unwrap_or_default().as_bytes())?
            }
            Encoding::Text => match std::str::from_utf8(&v) {
                Ok(t) => out.write_all(t.as_bytes())?,
                Err(_) => {
                    return Err(Fail::err(format!(
                        "the value ({} bytes) is not UTF-8 text; use --hex, --base64 or --raw",
                        v.len()
                    )))
                }
            },
            e => out.write_all(codec::encode_line(&v, e).as_bytes())?,
        }
        if !no_newline {
            out.write_all(b"\n")?;
        }
    }
    out.flush()?;
    Ok(())
}

/// `shoal put`.
pub fn put(
    store: &Path,
    map: &str,
    key: &OsStr,
    value: Option<&OsStr>,
    enc: Encoding,
) -> Result<(), Fail> {
    // A map that exists may record its types: its key and value are written as them.
    let (kt, vt) = match open_existing(store) {
        Ok(s) => crate::typed::of(&s, map).unwrap_or((None, None)),
        Err(_) => (None, None),
    };
    let key = arg(key, enc, kt, "key")?;
    let value = match value {
        Some(v) => arg(v, enc, vt, "value")?,
        None => {
            let mut b = Vec::new();
            std::io::stdin()
                .lock()
                .read_to_end(&mut b)
                .map_err(|e| Fail::err(format!("reading the value from stdin: {e}")))?;
            match enc {
                Encoding::Text => crate::typed::parse(&b, vt, "value")?,
                e => codec::decode(&b, e, "value")?,
            }
        }
    };
    // Checked here too, not only by the engine, so that a refused put creates nothing.
    if key.len() > shoal::MAX_KEY_LEN {
        return Err(Fail::err(format!(
            "key of {} bytes; the limit is {}",
            key.len(),
            shoal::MAX_KEY_LEN
        )));
    }
    if value.len() as u64 > shoal::MAX_VALUE_LEN {
        return Err(Fail::err(format!(
            "value of {} bytes; the limit is {}",
            value.len(),
            shoal::MAX_VALUE_LEN
        )));
    }
    let s = open_or_create(store)?;
    if crate::ordered::is_ordered(&s, map)? {
        crate::ordered::open(&s, map)?.put(&key, &value)?;
    } else {
        s.map(map)?.put(&key, &value)?;
    }
    Ok(())
}

/// `shoal del`.
pub fn del(store: &Path, map: &str, key: &OsStr, enc: Encoding) -> Result<(), Fail> {
    let s = open_existing(store)?;
    if crate::ordered::is_ordered(&s, map)? {
        let key = arg(key, enc, None, "key")?;
        return if crate::ordered::open(&s, map)?.remove(&key)? {
            Ok(())
        } else {
            Err(not_found(&key, map))
        };
    }
    let m = open_map(&s, map)?;
    let key = arg(key, enc, m.key_type(), "key")?;
    if m.remove(&key)? {
        Ok(())
    } else {
        Err(not_found(&key, map))
    }
}

/// `shoal check`: exit 0 only for a sound store.
pub fn check(store: &Path) -> Result<(), Fail> {
    let path = shoal::resolve_path(store);
    let damaged = |e: shoal::Error| {
        println!("problem: {}", crate::fail::message(&e));
        println!("1 problems");
        Fail::NoQuiet
    };
    let opened = match Store::open_existing(&path) {
        Err(shoal::Error::Permission { .. }) => {
            Store::open_with(&path, &shoal::Options::default(), shoal::OpenMode::ReadOnly)
        }
        r => r,
    };
    let s = match opened {
        Ok(s) => s,
        Err(e @ (shoal::Error::Corrupt { .. } | shoal::Error::NeedsRepair { .. })) => {
            return Err(damaged(e))
        }
        Err(e) => return Err(open_error(&path, e)),
    };
    let report = match s.check() {
        Ok(r) => r,
        Err(e @ shoal::Error::Corrupt { .. }) => return Err(damaged(e)),
        Err(e) => return Err(e.into()),
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "{report}")?;
    out.flush()?;
    if report.is_ok() {
        Ok(())
    } else {
        Err(Fail::NoQuiet)
    }
}

/// `shoal repair`: the report of `Store::repair` (or of its dry run), one line per item.
pub fn repair(store: &Path, dry_run: bool) -> Result<(), Fail> {
    let path = shoal::resolve_path(store);
    let refused = |e: shoal::Error| match e {
        shoal::Error::NotFound(_) => open_error(&path, e),
        e => Fail::err(format!("cannot repair {}: {e}", path.display())),
    };
    let report = if dry_run {
        Store::repair_dry_run(&path).map_err(refused)?
    } else {
        let (s, report) = Store::repair(&path).map_err(refused)?;
        drop(s);
        report
    };
    let mut out = std::io::stdout().lock();
    for p in &report.found {
        writeln!(out, "found: {p}")?;
    }
    for (map, what) in &report.dropped {
        writeln!(out, "dropped: {map}: {what}")?;
    }
    for r in &report.rebuilt {
        writeln!(out, "rebuilt: {r}")?;
    }
    let clean = report.found.is_empty() && report.dropped.is_empty();
    let summary = match (dry_run, clean) {
        (_, true) => "sound: nothing to repair".to_string(),
        (true, false) => format!(
            "dry run: the repair would drop {} and rebuild {}; nothing was changed",
            counted(report.dropped.len(), "item"),
            counted(report.rebuilt.len(), "part")
        ),
        (false, false) => format!(
            "repaired: dropped {}, rebuilt {}",
            counted(report.dropped.len(), "item"),
            counted(report.rebuilt.len(), "part")
        ),
    };
    writeln!(out, "{summary}")?;
    out.flush()?;
    if dry_run && !clean {
        return Err(Fail::NoQuiet);
    }
    Ok(())
}

/// "1 item", "2 items".
fn counted(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// `shoal backup`: the idle copy when nobody has the store open (byte for byte, and no
/// attach, so it needs no free process slot and leaves the file untouched), else the hot
/// backup through a handle of this process.
pub fn backup(store: &Path, file: &Path) -> Result<(), Fail> {
    let t = std::time::Instant::now();
    let (n, how) = match shoal::Store::backup_idle(store, file) {
        Err(shoal::Error::TooManyUsers(_)) => {
            let s = open_existing(store)?;
            (s.backup(file)?, "hot backup of a store in use")
        }
        r => (r?, "idle store"),
    };
    writeln!(
        std::io::stdout().lock(),
        "copied {} bytes to {} in {:.3} s ({how})",
        human::count(n),
        file.display(),
        t.elapsed().as_secs_f64()
    )?;
    Ok(())
}

/// `shoal compact`.
pub fn compact(store: &Path) -> Result<(), Fail> {
    use std::os::unix::fs::MetadataExt;
    let s = open_existing(store)?;
    let path = shoal::resolve_path(store);
    // Storage the file holds (tmpfs: memory), which compact lowers by releasing the
    // pages of free chunks.
    let held = || std::fs::metadata(&path).map(|m| m.blocks() * 512).ok();
    let (before, held_before) = (s.stats()?, held());
    let t = std::time::Instant::now();
    let freed = s.compact()?;
    let secs = t.elapsed().as_secs_f64();
    let (after, held_after) = (s.stats()?, held());
    let mut out = std::io::stdout().lock();
    writeln!(out, "chunks freed  {}", human::count(freed))?;
    writeln!(
        out,
        "dead bytes    {} -> {}",
        human::size(before.dead_bytes),
        human::size(after.dead_bytes)
    )?;
    writeln!(
        out,
        "free bytes    {} -> {}",
        human::size(before.free_bytes),
        human::size(after.free_bytes)
    )?;
    if let (Some(b), Some(a)) = (held_before, held_after) {
        writeln!(
            out,
            "storage held  {} -> {} (free chunks' pages returned to the filesystem)",
            human::size(b),
            human::size(a)
        )?;
    }
    writeln!(
        out,
        "file size     {} (files never shrink; freed chunks are reused)",
        human::size(after.file_size)
    )?;
    writeln!(out, "took          {secs:.3} s")?;
    out.flush()?;
    Ok(())
}

/// `shoal rm`.
pub fn rm(store: &Path, force: bool) -> Result<(), Fail> {
    let path: PathBuf = shoal::resolve_path(store);
    match Store::open_existing(&path) {
        Ok(s) => {
            let others = s.stats()?.processes.saturating_sub(1);
            drop(s);
            if others > 0 && !force {
                return Err(Fail::err(format!(
                    "{} is in use by {others} other process(es); not removed (--force removes it anyway)",
                    path.display()
                )));
            }
        }
        Err(
            e @ (shoal::Error::Corrupt { .. }
            | shoal::Error::NeedsRepair { .. }
            | shoal::Error::VersionMismatch { .. }),
        ) => {
            if !force {
                return Err(Fail::err(format!(
                    "{}; not removed (--force removes it anyway)",
                    crate::fail::message(&e)
                )));
            }
        }
        Err(e) => return Err(open_error(&path, e)),
    }
    Store::destroy(&path)?;
    Ok(())
}
