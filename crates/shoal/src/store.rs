//! `Store`: opening, creating and destroying store files; the catalog of named maps.

use crate::api::fixed::{FixedMap, FixedOptions};
use crate::api::map::Map;
use crate::error::{Error, Result};
use crate::format::*;
use crate::kinds::varmap::{self, MapRef};
use crate::kinds::AnyKind;
use crate::mem::{How, Mapping};
use crate::object::Kind;
use crate::shared::Shared;
use crate::sys;
use crate::txn::thread_txn;
use crate::txn::Txn;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::*;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

/// How [`Store::open_with`] treats an existing or missing file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OpenMode {
    /// Open the store, creating it if it does not exist.
    #[default]
    OpenOrCreate,
    /// Open an existing store; `NotFound` if there is none.
    Open,
    /// Create a new store; `AlreadyExists` if the file exists.
    CreateNew,
    /// Open an existing store for reading only, which needs no write access to the file
    /// (libmdbx's `MDBX_RDONLY`): reads, iteration, `stats` and `check` work; anything
    /// that writes fails with [`Error::ReadOnly`](crate::Error::ReadOnly). The process
    /// takes no slot in the store and never writes a byte of it, so it cannot recover
    /// what a writer that died left half done: a read that meets that waits for a
    /// process with write access to recover it, and fails with `ReadOnly` at its
    /// timeout. A disk store not closed cleanly must first be opened by such a process
    /// (or repaired).
    ReadOnly,
}

/// Options for opening or creating a store. Size and table options apply when the
/// store is created and are then fixed in its header.
#[derive(Clone, Debug)]
pub struct Options {
    /// Largest size the file may grow to. The whole range is reserved as address space
    /// (not memory) when the store is opened. Default 1 TiB.
    pub max_size: u64,
    /// Bytes allocated when the store is created (rounded up to whole chunks). Default:
    /// just the tables.
    pub initial_size: u64,
    /// Permission bits of a new file. Default 0o600.
    pub mode: u32,
    /// How long an operation waits for locks held by a live process (for example one
    /// stopped with SIGSTOP) before failing with [`Error::Timeout`]: all its waits
    /// together (see [`Map::with_timeout`](crate::Map::with_timeout)). Default 5 s. Locks
    /// of dead processes are recovered within milliseconds whatever this is.
    pub lock_timeout: Duration,
    /// Processes that may have the store open at once. Default 1,024.
    pub max_processes: u32,
    /// Threads (across all processes) that may use the store at once. Default 1,024.
    pub max_threads: u32,
    /// Named maps the store can hold. Default 1,024.
    pub max_maps: u32,
    /// Size of a chunk, the unit of file growth: a power of two from 64 KiB to 64 MiB.
    /// Default 256 KiB.
    pub chunk_size: u64,
    /// End every record with a CRC32C, so that a value torn by an OS crash is detected,
    /// never returned. `None` (the default): on for files on disk, off on tmpfs (where
    /// nothing survives an OS crash anyway). Fixed at creation.
    pub checksums: Option<bool>,
    /// Flush (msync + fsync) after every write call, so that each acknowledged write
    /// survives an OS crash. Default false: call [`Store::flush`] when you need it.
    /// Only meaningful for files on disk.
    pub sync_writes: bool,
    /// Fault in, from a background thread, the pages of space the store takes (a data
    /// chunk, an index arena), before the writers reach them, so that a put does not
    /// take the page faults itself. Default true. Only on tmpfs (`/dev/shm`): on disk, a
    /// write fault would dirty pages that `fallocate` left unwritten. One thread per
    /// process serves every store; within a process, the first open of a file decides.
    /// See DESIGN.md, "Pretouching".
    pub pretouch: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            max_size: 1 << 40,
            initial_size: 0,
            mode: 0o600,
            lock_timeout: Duration::from_secs(5),
            max_processes: 1024,
            max_threads: 1024,
            max_maps: 1024,
            chunk_size: 256 * 1024,
            checksums: None,
            sync_writes: false,
            pretouch: true,
        }
    }
}

/// Options for creating a map.
#[derive(Clone, Debug)]
pub struct MapOptions {
    /// Main buckets per index segment (15 slots each). Default 59, which with the stash
    /// makes an 8 KiB segment. Smaller segments split more often (useful in tests).
    pub segment_buckets: u32,
    /// Stash buckets per segment, for keys whose home bucket is full. Default 4.
    pub stash_buckets: u32,
    /// Keep a stable [`Uid`](crate::Uid) per key (see [`Map::uid`](crate::Map::uid)):
    /// 24 bytes per key in a UID table plus 8 per record. Default false.
    pub uids: bool,
}

impl Default for MapOptions {
    fn default() -> MapOptions {
        MapOptions {
            segment_buckets: DEFAULT_MAIN_BUCKETS as u32,
            stash_buckets: DEFAULT_STASH_BUCKETS as u32,
            uids: false,
        }
    }
}

/// An open store: one file holding named maps, shared by every process that opens it.
///
/// `Store` is `Send + Sync` and cheap to clone; opening the same file twice in one
/// process returns handles on the same mapping.
#[derive(Clone)]
pub struct Store {
    pub(crate) sh: Arc<Shared>,
}

/// Figures about a whole store.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Size of the file in use.
    pub file_size: u64,
    /// Largest size the file may grow to.
    pub max_size: u64,
    /// Bytes in data chunks and large records' runs: live records + dead records + the
    /// unwritten ends of the chunks threads are filling and of large records' runs.
    pub data_bytes: u64,
    /// Bytes of live records, over all maps.
    pub live_bytes: u64,
    /// Bytes of dead records (overwritten or deleted) not yet reclaimed.
    pub dead_bytes: u64,
    /// Unwritten ends of the data chunks threads are filling (at most one chunk per
    /// thread that writes: space reserved for the next records) and of large records'
    /// runs (less than a chunk per large record, freed with it). Not garbage: no cleaning
    /// reclaims them.
    pub unfilled_bytes: u64,
    /// Bytes in free chunks.
    pub free_bytes: u64,
    /// Chunks reclaimed by the cleaner so far.
    pub chunks_cleaned: u64,
    /// Named maps.
    pub maps: u64,
    /// Processes attached now (live ones only).
    pub processes: u64,
    /// Records carry checksums (stores on disk, by default).
    pub checksums: bool,
    /// The file is on disk (not tmpfs): it is flushed and marked clean on the last close,
    /// and verified when opened after an unclean shutdown.
    pub on_disk: bool,
}

/// Resolves a store path: a bare name (no `/`) means `/dev/shm/NAME.shoal`.
pub fn resolve_path(p: impl AsRef<Path>) -> PathBuf {
    let p = p.as_ref();
    let s = p.as_os_str().to_string_lossy();
    if !s.contains('/') && !s.is_empty() && s != "." && s != ".." {
        PathBuf::from(format!("/dev/shm/{s}.shoal"))
    } else {
        p.to_owned()
    }
}

/// Stores open in this process, by (device, inode, read-only): opening one twice shares
/// the mapping (a read-only open has a mapping of its own).
type OpenStores = Mutex<HashMap<(u64, u64, bool), Weak<Shared>>>;

fn open_stores() -> &'static OpenStores {
    static M: OnceLock<OpenStores> = OnceLock::new();
    M.get_or_init(|| Mutex::new(HashMap::new()))
}

impl Store {
    /// Opens the store at `path`, creating it if needed, with default options.
    /// A bare name means `/dev/shm/NAME.shoal`.
    pub fn open(path: impl AsRef<Path>) -> Result<Store> {
        Store::open_with(path, &Options::default(), OpenMode::OpenOrCreate)
    }

    /// Opens an existing store.
    pub fn open_existing(path: impl AsRef<Path>) -> Result<Store> {
        Store::open_with(path, &Options::default(), OpenMode::Open)
    }

    /// Creates a new store; fails with `AlreadyExists` if the file exists.
    pub fn create(path: impl AsRef<Path>) -> Result<Store> {
        Store::open_with(path, &Options::default(), OpenMode::CreateNew)
    }

    /// Opens or creates a store with explicit options.
    pub fn open_with(path: impl AsRef<Path>, opts: &Options, mode: OpenMode) -> Result<Store> {
        let path = resolve_path(path);
        validate_options(opts)?;
        let mut created = false;
        let mut tries = 0;
        let s = loop {
            match mode {
                OpenMode::Open => break open_file(&path, opts)?,
                OpenMode::ReadOnly => break open_read_only(&path, opts)?,
                OpenMode::CreateNew => {
                    create_file(&path, opts)?;
                    created = true;
                    break open_file(&path, opts)?;
                }
                OpenMode::OpenOrCreate => match open_file(&path, opts) {
                    Err(Error::NotFound(_)) => match create_file(&path, opts) {
                        Ok(()) => created = true,
                        // Created by another process since our open: open it (again).
                        Err(Error::AlreadyExists(_)) if tries < OPEN_OR_CREATE_TRIES => tries += 1,
                        Err(Error::AlreadyExists(_)) => {
                            return Err(Error::Io {
                                path: path.clone(),
                                source: std::io::Error::other(format!(
                                    "gave up after {tries} tries: the file vanished every \
                                     time between a create that found it and an open"
                                )),
                            })
                        }
                        Err(e) => return Err(e),
                    },
                    r => break r?,
                },
            }
        };
        if created {
            // The initial free run (`Options::initial_size`) is new space like any growth.
            let first = s.sh.g.chunks_off;
            s.sh.pretouch(first, s.sh.file_end().saturating_sub(first));
        }
        Ok(s)
    }

    /// Deletes the store file. Processes that have it open keep working on their mapping
    /// until they close it; new opens create a new, empty store.
    pub fn destroy(path: impl AsRef<Path>) -> Result<()> {
        let path = resolve_path(path);
        std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))
    }

    /// The store file's path.
    pub fn path(&self) -> &Path {
        &self.sh.path
    }

    fn txn(&self) -> Result<Txn<'_>> {
        let t = thread_txn(&self.sh)?;
        Ok(Txn::new(&self.sh, t))
    }

    /// Opens the map `name`, creating it (with default options) if it does not exist.
    pub fn map(&self, name: &str) -> Result<Map> {
        self.map_with(name, &MapOptions::default(), true)
    }

    /// Opens an existing map; `NotFound` if there is none.
    pub fn open_map(&self, name: &str) -> Result<Map> {
        self.map_with(name, &MapOptions::default(), false)
    }

    /// Opens the map `name`, creating it with `opts` if it does not exist and `create`.
    /// The options of an existing map are those it was created with. A fixed-size map of
    /// that name is [`Error::WrongMapKind`].
    pub fn map_with(&self, name: &str, opts: &MapOptions, create: bool) -> Result<Map> {
        let _call = crate::deadline::call();
        validate_name(name)?;
        if !(1..=4096).contains(&opts.segment_buckets) || !(1..=1024).contains(&opts.stash_buckets)
        {
            return Err(Error::InvalidArgument(
                "segment_buckets must be 1..=4096 and stash_buckets 1..=1024".into(),
            ));
        }
        if let Some(m) = self.find_map(name, opts.uids)? {
            if opts.uids && !m.has_uids() {
                return Err(Error::InvalidArgument(format!(
                    "map {name:?} exists without UIDs; UIDs are chosen when a map is created"
                )));
            }
            return Ok(m);
        }
        if !create {
            return Err(Error::NotFound(format!("map {name:?}")));
        }
        let tx = self.txn()?;
        tx.lock(H_CATALOG_LOCK)?;
        let r = self.create_map_locked(&tx, name, opts);
        tx.unlock(H_CATALOG_LOCK);
        let m = r?;
        if opts.uids && !m.has_uids() {
            // Another process created it first, without UIDs.
            return Err(Error::InvalidArgument(format!(
                "map {name:?} exists without UIDs; UIDs are chosen when a map is created"
            )));
        }
        Ok(m)
    }

    /// The live variable-size map `name`; a fixed-size one is `WrongMapKind` (`uids`:
    /// what the caller asked for, for the error).
    fn find_map(&self, name: &str, uids: bool) -> Result<Option<Map>> {
        let sh = &*self.sh;
        sh.ensure_registered()?;
        for id in 0..sh.g.n_catalog {
            let ce = sh.g.cat_entry(id);
            let st = sh.w(ce + C_STATE).load(Acquire);
            if st & 0xff != CAT_LIVE
                || sh.w(ce + C_KIND).load(Acquire) != KIND_MAP
                || !name_is(sh, ce, name)
            {
                continue;
            }
            if crate::kinds::fixed::is_fixed(sh, id) {
                return Err(Error::WrongMapKind {
                    name: name.into(),
                    found: self.kind_at(id)?,
                    wanted: MapKind::Variable { uids },
                });
            }
            let mut m = varmap::map_ref_unchecked(sh, id)?;
            m.cat_word = st;
            if sh.w(ce + C_STATE).load(Acquire) != st {
                continue; // dropped while we looked
            }
            return Ok(Some(Map {
                sh: self.sh.clone(),
                m,
                name: name.into(),
            }));
        }
        Ok(None)
    }

    fn create_map_locked(&self, tx: &Txn, name: &str, opts: &MapOptions) -> Result<Map> {
        let sh = &*self.sh;
        self.finish_drops(tx)?;
        if let Some(m) = self.find_map(name, opts.uids)? {
            return Ok(m);
        }
        let id = (0..sh.g.n_catalog)
            .find(|id| sh.w(sh.g.cat_entry(*id) + C_STATE).load(Acquire) & 0xff == CAT_FREE)
            .ok_or_else(|| {
                Error::StoreFull(format!(
                    "the store already holds its maximum of {} maps",
                    sh.g.n_catalog
                ))
            })?;
        let ce = sh.g.cat_entry(id);
        let (n_main, n_stash) = (opts.segment_buckets as u64, opts.stash_buckets as u64);
        let cs = sh.g.chunk_size();
        let k = varmap::first_chunk_need(sh, n_main, n_stash).div_ceil(cs);
        let inc = (sh.w(ce + C_STATE).load(Acquire) >> 8) + 1;
        let word = CAT_LIVE | (inc << 8);
        let mref = crate::alloc::with_alloc_lock(tx, |redo| {
            let c = crate::alloc::take_run(tx, k, redo, crate::alloc::Purpose::Normal)?;
            // The run is ours (alloc lock held); its content is written now, published by
            // the redo list below together with the catalog entry.
            let flags = if opts.uids { MF_UIDS } else { 0 };
            let mut m: MapRef = varmap::init_map(sh, c, id, n_main, n_stash, flags);
            m.cat_word = word;
            sh.r.write_bytes(ce + C_NAME, name.as_bytes());
            redo.push(c + K_KIND, CK_INDEX);
            redo.push(c + K_RUN, k);
            redo.push(c + K_NEXT, 0);
            redo.push(c + K_OWNER, id);
            redo.push(ce + C_KIND, KIND_MAP);
            redo.push(ce + C_HDR, m.hdr);
            redo.push(ce + C_NAME_LEN, name.len() as u64);
            redo.push(ce + C_STATE, word);
            Ok(m)
        })?;
        Ok(Map {
            sh: self.sh.clone(),
            m: mref,
            name: name.into(),
        })
    }

    /// Opens the fixed-size map `name` (every key `key_size` bytes, every value
    /// `value_size` bytes), creating it with default options if it does not exist. An
    /// existing map with other sizes is `InvalidArgument`, a variable-size map of that
    /// name [`Error::WrongMapKind`]. Keys are 1 to 512 bytes, values 0 to 128; see [`FixedMap`].
    pub fn fixed_map(&self, name: &str, key_size: usize, value_size: usize) -> Result<FixedMap> {
        self.fixed_map_with(name, key_size, value_size, &FixedOptions::default(), true)
    }

    /// [`Store::fixed_map`] with options, applied if the map is created; `create = false`
    /// makes a missing map `NotFound`.
    pub fn fixed_map_with(
        &self,
        name: &str,
        key_size: usize,
        value_size: usize,
        opts: &FixedOptions,
        create: bool,
    ) -> Result<FixedMap> {
        let _call = crate::deadline::call();
        validate_name(name)?;
        let (ks, vs) = (key_size as u64, value_size as u64);
        if !(1..=MAX_KEY_SIZE).contains(&ks) || vs > MAX_VALUE_SIZE {
            return Err(Error::InvalidArgument(format!(
                "fixed-size maps have keys of 1 to {} bytes and values of 0 to {} bytes",
                MAX_KEY_SIZE, MAX_VALUE_SIZE
            )));
        }
        if opts.segment_buckets > 4096 || opts.stash_buckets > 1024 {
            return Err(Error::InvalidArgument(
                "segment_buckets must be 0..=4096 and stash_buckets 0..=1024".into(),
            ));
        }
        if let Some(m) = self.find_fixed(name, ks, vs)? {
            return Ok(m);
        }
        if !create {
            return Err(Error::NotFound(format!("map {name:?}")));
        }
        let tx = self.txn()?;
        tx.lock(H_CATALOG_LOCK)?;
        let r = self.create_fixed_locked(&tx, name, ks, vs, opts);
        tx.unlock(H_CATALOG_LOCK);
        r
    }

    /// The live catalog entry named `name`: (id, state word).
    fn find_entry(&self, name: &str) -> Result<Option<(u64, u64)>> {
        let sh = &*self.sh;
        sh.ensure_registered()?;
        for id in 0..sh.g.n_catalog {
            let ce = sh.g.cat_entry(id);
            let st = sh.w(ce + C_STATE).load(Acquire);
            if st & 0xff == CAT_LIVE
                && sh.w(ce + C_KIND).load(Acquire) == KIND_MAP
                && name_is(sh, ce, name)
            {
                return Ok(Some((id, st)));
            }
        }
        Ok(None)
    }

    fn find_fixed(&self, name: &str, ks: u64, vs: u64) -> Result<Option<FixedMap>> {
        let sh = &*self.sh;
        let Some((id, st)) = self.find_entry(name)? else {
            return Ok(None);
        };
        if !crate::kinds::fixed::is_fixed(sh, id) {
            return Err(Error::WrongMapKind {
                name: name.into(),
                found: self.kind_at(id)?,
                wanted: MapKind::Fixed {
                    key_size: ks as usize,
                    value_size: vs as usize,
                },
            });
        }
        let mut f = crate::kinds::fixed::fixed_ref_unchecked(sh, id)?;
        f.m.cat_word = st;
        if sh.w(sh.g.cat_entry(id) + C_STATE).load(Acquire) != st {
            return Ok(None); // dropped while we looked
        }
        if (f.geo.key_size, f.geo.value_size) != (ks, vs) {
            return Err(Error::InvalidArgument(format!(
                "map {name:?} has {}-byte keys and {}-byte values, not {ks} and {vs}",
                f.geo.key_size, f.geo.value_size
            )));
        }
        Ok(Some(FixedMap {
            sh: self.sh.clone(),
            f,
            name: name.into(),
        }))
    }

    fn create_fixed_locked(
        &self,
        tx: &Txn,
        name: &str,
        ks: u64,
        vs: u64,
        opts: &FixedOptions,
    ) -> Result<FixedMap> {
        let sh = &*self.sh;
        self.finish_drops(tx)?;
        if let Some(m) = self.find_fixed(name, ks, vs)? {
            return Ok(m);
        }
        if self.find_entry(name)?.is_some() {
            return Err(Error::InvalidArgument(format!(
                "map {name:?} exists and is not a fixed-size map"
            )));
        }
        let id = (0..sh.g.n_catalog)
            .find(|id| sh.w(sh.g.cat_entry(*id) + C_STATE).load(Acquire) & 0xff == CAT_FREE)
            .ok_or_else(|| {
                Error::StoreFull(format!(
                    "the store already holds its maximum of {} maps",
                    sh.g.n_catalog
                ))
            })?;
        let ce = sh.g.cat_entry(id);
        let geo = Geo::new(ks, vs, sh.g.fixed_groups, sh.g.fixed_tags);
        let (dm, ds) = geo.default_buckets();
        let n_main = if opts.segment_buckets == 0 {
            dm
        } else {
            opts.segment_buckets as u64
        };
        let n_stash = if opts.stash_buckets == 0 {
            ds
        } else {
            opts.stash_buckets as u64
        };
        let cs = sh.g.chunk_size();
        let k = crate::kinds::fixed::first_chunk_need(sh, &geo, n_main, n_stash).div_ceil(cs);
        let inc = (sh.w(ce + C_STATE).load(Acquire) >> 8) + 1;
        let word = CAT_LIVE | (inc << 8);
        let f = crate::alloc::with_alloc_lock(tx, |redo| {
            let c = crate::alloc::take_run(tx, k, redo, crate::alloc::Purpose::Normal)?;
            let mut f = crate::kinds::fixed::init_map(sh, c, id, geo, n_main, n_stash);
            f.m.cat_word = word;
            sh.r.write_bytes(ce + C_NAME, name.as_bytes());
            redo.push(c + K_KIND, CK_INDEX);
            redo.push(c + K_RUN, k);
            redo.push(c + K_NEXT, 0);
            redo.push(c + K_OWNER, id);
            redo.push(ce + C_KIND, KIND_MAP);
            redo.push(ce + C_HDR, f.m.hdr);
            redo.push(ce + C_NAME_LEN, name.len() as u64);
            redo.push(ce + C_STATE, word);
            Ok(f)
        })?;
        Ok(FixedMap {
            sh: self.sh.clone(),
            f,
            name: name.into(),
        })
    }

    /// Names of the maps in the store.
    pub fn maps(&self) -> Result<Vec<String>> {
        let sh = &*self.sh;
        sh.ensure_registered()?;
        let mut out = Vec::new();
        for id in 0..sh.g.n_catalog {
            let ce = sh.g.cat_entry(id);
            if sh.w(ce + C_STATE).load(Acquire) & 0xff == CAT_LIVE {
                out.push(read_name(sh, ce)?);
            }
        }
        Ok(out)
    }

    /// What kind of map `name` is (None if there is none), so that a tool can open any
    /// map without knowing how it was created.
    pub fn map_kind(&self, name: &str) -> Result<Option<MapKind>> {
        let Some((id, _)) = self.find_entry(name)? else {
            return Ok(None);
        };
        self.kind_at(id).map(Some)
    }

    /// The kind of the live map `id`.
    fn kind_at(&self, id: u64) -> Result<MapKind> {
        Ok(AnyKind::open_any(&self.sh, id)?.map_kind())
    }

    /// Drops the map `name` and everything in it; returns whether it existed. Handles on
    /// it (in any process) get `NotFound` from then on.
    pub fn drop_map(&self, name: &str) -> Result<bool> {
        let _call = crate::deadline::call();
        validate_name(name)?;
        let Some((id, cat_word)) = self.find_entry(name)? else {
            return Ok(false);
        };
        let object = AnyKind::open(&self.sh, id)?;
        let tx = self.txn()?;
        tx.lock(H_CATALOG_LOCK)?;
        let r = (|| {
            let sh = &*self.sh;
            let ce = sh.g.cat_entry(id);
            if sh.w(ce + C_STATE).load(Acquire) != cat_word {
                return Ok(false);
            }
            // Its records become dead data (a fixed map has none). Counted before the map
            // is marked dropping: after, its statistics fail ("dropped"), and counting
            // them as 0 left the cleaner asleep while dropped maps' records filled the file.
            let live = object.map_or(0, |k| k.live_record_bytes(sh));
            let mut redo = crate::txn::Redo::new();
            redo.push(ce + C_STATE, CAT_DROPPING | (cat_word & !0xff));
            tx.commit(I_REDO, &[], &redo);
            tx.apply(&redo);
            tx.done();
            crate::alloc::note_dead(&tx, live);
            self.finish_drops(&tx)?;
            Ok(true)
        })();
        tx.unlock(H_CATALOG_LOCK);
        r
    }

    /// Completes every drop in progress (called with the catalog lock held): waits out
    /// writers in the dropped maps, then frees their chunks one run at a time.
    fn finish_drops(&self, tx: &Txn) -> Result<()> {
        let sh = &*self.sh;
        for id in 0..sh.g.n_catalog {
            let ce = sh.g.cat_entry(id);
            let st = sh.w(ce + C_STATE).load(Acquire);
            if st & 0xff != CAT_DROPPING {
                continue;
            }
            // Barrier: no writer is left inside the object (later ones see it dropping).
            let object = AnyKind::open_any(sh, id)?;
            object.drop_barrier(tx)?;
            let hdr = object.header();
            // On disk, the drop must be durable before the map's chunks can be reused.
            if sh.durable {
                sh.flush()?;
            }
            let first = sh.g.chunk_of(hdr);
            loop {
                let run = sh.w(hdr + M_CHAIN).load(Acquire);
                crate::alloc::check_chunk(sh, run, "map chain")?;
                let k = sh.w(run + K_RUN).load(Acquire).max(1);
                let next = sh.w(run + K_NEXT).load(Acquire);
                let last = run == first;
                crate::alloc::with_alloc_lock(tx, |redo| {
                    crate::alloc::free_run_redo(sh, run, k, redo);
                    if last {
                        redo.push(ce + C_STATE, CAT_FREE | (st & !0xff));
                    } else {
                        redo.push(hdr + M_CHAIN, next);
                    }
                    Ok(())
                })?;
                if last {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Runs `f` in a batch of this store: the flushes that
    /// [`Options::sync_writes`](crate::Options::sync_writes) makes after every write call
    /// are deferred for the writes this thread makes to this store (to any of its maps),
    /// and made once when `f` returns: one `msync` + `fsync` for the group instead of one
    /// each. Each write stays atomic on its own; the group is not (other processes see each
    /// write as it is made, and an OS crash before the flush may keep any subset of them).
    /// Writes to other stores flush as usual. The flush happens also when `f` fails, before
    /// its error is returned; a failed flush is returned in place of `f`'s result. Batches
    /// nest (the outermost flushes). A plain call when `sync_writes` is off. `put_many` and
    /// `remove_many` run in one. [`Store::begin_batch`](crate::Store::begin_batch) opens
    /// one without a closure.
    ///
    /// ```no_run
    /// let opts = shoal::Options { sync_writes: true, ..Default::default() };
    /// let store = shoal::Store::open_with("/var/lib/app/data.shoal", &opts, shoal::OpenMode::OpenOrCreate)?;
    /// let orders = store.map("orders")?;
    /// store.batch(|| {                                 // one msync + fsync for the three puts
    ///     orders.put(b"1", b"a")?;
    ///     orders.put(b"2", b"b")?;
    ///     orders.put(b"3", b"c").map(|_| ())
    /// })?;
    /// # Ok::<(), shoal::Error>(())
    /// ```
    pub fn batch<T, E: From<Error>>(
        &self,
        f: impl FnOnce() -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        crate::api::batch::run(&self.sh, f)
    }

    /// Opens a batch of this store on this thread, as [`Store::batch`] does for a closure:
    /// until the returned [`Batch`](crate::Batch) ends, `sync_writes` does not flush this
    /// thread's writes to the store; [`Batch::end`](crate::Batch::end) flushes them once.
    /// For callers whose group of writes is not one closure (a binding's `with` block).
    pub fn begin_batch(&self) -> crate::Batch {
        crate::Batch::begin(self.sh.clone())
    }

    /// Writes everything in the store through to stable storage (`msync` + `fsync`): after
    /// it returns, an OS crash loses nothing written before the call. Needed only for
    /// stores on disk; see also [`Options::sync_writes`].
    pub fn flush(&self) -> Result<()> {
        self.sh.flush()
    }

    /// Verifies a store in full and repairs it: entries that cannot be trusted (their
    /// records incomplete, torn by an OS crash after the last flush, or failing their
    /// checksums, whatever the store's clean flag says) are dropped, and everything else
    /// is rebuilt from what remains. For a store that [`Store::open`] refused after an
    /// OS crash, and for one whose reads or [`Store::check`] report corruption. Returns
    /// the store and a report of what was dropped and fixed (empty for a sound store).
    ///
    /// A file shorter than its header says (truncated: a copy cut short, a full disk) is
    /// salvaged: every entry that can be read whole from what is left is copied into a
    /// new store, which replaces the file; the truncated original is kept beside it
    /// (`PATH.truncated`, the report says where). Maps with UIDs get new UIDs there.
    ///
    /// The repair needs the store to itself: [`Error::TooManyUsers`] while it is open in
    /// this process or another. [`Store::repair_dry_run`] reports what it would do.
    pub fn repair(path: impl AsRef<Path>) -> Result<(Store, crate::repair::RepairReport)> {
        let path = resolve_path(path);
        let (s, r) = open_file_mode(&path, &Options::default(), true)?;
        Ok((s, r.unwrap_or_default()))
    }

    /// What [`Store::repair`] would find, drop and rebuild, without changing the file
    /// (or creating any): the repair runs on a private copy-on-write mapping of it. The
    /// same refusals as `repair`.
    pub fn repair_dry_run(path: impl AsRef<Path>) -> Result<crate::repair::RepairReport> {
        dry_run_repair(&resolve_path(path))
    }

    /// Reclaims dead space now (normally done a little at a time by writers), merges
    /// neighbouring free chunks into longer runs, then returns the pages of the free
    /// chunks to the filesystem (for a store in `/dev/shm`, the memory they held; the
    /// file's size does not change). Returns the number of chunks freed.
    ///
    /// Writers that need a new chunk wait while the pages are released (it holds the
    /// allocation lock: 80-95 ms for 451 MiB of free chunks on a 2-core VM; a second
    /// compact with nothing new to release, under 0.1 ms).
    pub fn compact(&self) -> Result<u64> {
        let _call = crate::deadline::call();
        let tx = self.txn()?;
        let freed = crate::cleaner::compact(&tx, usize::MAX)?;
        crate::alloc::release_free(&tx)?;
        Ok(freed)
    }

    /// Figures about the whole store.
    pub fn stats(&self) -> Result<StoreStats> {
        let sh = &*self.sh;
        sh.ensure_registered()?;
        let data = sh.w(H_DATA_BYTES).load(Acquire);
        let live = crate::cleaner::total_live_bytes(sh);
        let dead = crate::cleaner::reclaimable_dead(sh);
        let mut procs = 0;
        for p in 0..sh.g.n_proc {
            if sh.w(sh.g.proc_slot(p) + P_STATE).load(Acquire) != 0
                && (p == sh.proc_idx.load(Acquire) || sh.proc_locked(p))
            {
                procs += 1;
            }
        }
        Ok(StoreStats {
            file_size: sh.file_end(),
            max_size: sh.g.max_size,
            data_bytes: data,
            live_bytes: live,
            dead_bytes: dead,
            unfilled_bytes: data.saturating_sub(live).saturating_sub(dead),
            free_bytes: sh.w(H_FREE_BYTES).load(Acquire),
            chunks_cleaned: sh.w(H_CLEANED).load(Acquire),
            maps: self.maps()?.len() as u64,
            processes: procs,
            checksums: sh.g.trailer == 4,
            on_disk: sh.durable,
        })
    }

    /// Verifies every invariant of the store; see [`crate::check`].
    pub fn check(&self) -> Result<crate::check::Report> {
        crate::check::check(&self.sh)
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.sh.path)
            .finish()
    }
}

fn validate_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(Error::InvalidArgument(format!(
            "map names are 1 to {MAX_NAME} bytes"
        )));
    }
    Ok(())
}

fn validate_options(o: &Options) -> Result<()> {
    if !o.chunk_size.is_power_of_two() || !(1 << 16..=1 << 26).contains(&o.chunk_size) {
        return Err(Error::InvalidArgument(
            "chunk_size must be a power of two from 64 KiB to 64 MiB".into(),
        ));
    }
    if !(1..=65535).contains(&o.max_processes)
        || !(1..=(1 << 20)).contains(&o.max_threads)
        || !(1..=65536).contains(&o.max_maps)
    {
        return Err(Error::InvalidArgument(
            "max_processes 1..=65535, max_threads 1..=2^20, max_maps 1..=65536".into(),
        ));
    }
    if o.max_size > 1 << 48 {
        return Err(Error::InvalidArgument(
            "max_size is at most 2^48 bytes".into(),
        ));
    }
    Ok(())
}

fn name_is(sh: &Shared, ce: u64, name: &str) -> bool {
    sh.w(ce + C_NAME_LEN).load(Acquire) == name.len() as u64
        && sh.r.bytes_eq(ce + C_NAME, name.as_bytes())
}

fn read_name(sh: &Shared, ce: u64) -> Result<String> {
    let n = sh.w(ce + C_NAME_LEN).load(Acquire);
    if n == 0 || n > MAX_NAME as u64 {
        return Err(sh.corrupt(format!("catalog entry at {ce:#x}: name length {n}")));
    }
    let mut b = vec![0u8; n as usize];
    sh.r.read_bytes(ce + C_NAME, &mut b);
    String::from_utf8(b)
        .map_err(|_| sh.corrupt(format!("catalog entry at {ce:#x}: name is not UTF-8")))
}

/// How many times open-or-create starts over when the file vanishes between a failed
/// create (it existed) and the next open (it is gone): another process destroying and
/// creating it at that very moment. Past this, something else is going on.
const OPEN_OR_CREATE_TRIES: u32 = 100;

/// Creates and initialises a store file, then links it into place atomically, so no
/// process ever opens a half-written store.
///
/// The file is built unnamed (`O_TMPFILE`) where the filesystem allows, so a creator
/// killed halfway leaves nothing behind; elsewhere under a hidden temporary name
/// `.NAME.PID.RAND.tmp`, which the next creator in the directory removes once its
/// process is gone. The name is never created through a symbolic link: a link there,
/// even a dangling one, makes the create fail.
fn create_file(path: &Path, o: &Options) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let fname = path
        .file_name()
        .ok_or_else(|| Error::InvalidArgument(format!("{} is not a file path", path.display())))?
        .to_string_lossy()
        .into_owned();
    remove_stale_temporaries(dir, &fname);
    let (file, tmp) = match sys::create_unnamed(dir, o.mode).map_err(|e| Error::io(path, e))? {
        Some(f) => (f, None),
        None => {
            let tmp = dir.join(format!(
                ".{fname}.{}.{:x}.tmp",
                sys::pid(),
                sys::random_u64()
            ));
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(o.mode)
                .custom_flags(libc::O_CLOEXEC)
                .open(&tmp)
                .map_err(|e| Error::io(path, e))?;
            (f, Some(tmp))
        }
    };
    let r = (|| {
        let shift = o.chunk_size.trailing_zeros();
        let mut g = Geometry::layout(
            shift,
            sys::random_u64(),
            o.max_size,
            o.max_processes as u64,
            o.max_threads as u64,
            o.max_maps as u64,
        );
        if o.checksums.unwrap_or(!sys::on_tmpfs(&file)) {
            g.trailer = 4;
            // A value torn by an OS crash fails its record's checksum: overwritten in
            // place, the key would lose both values; appended, the old record is intact.
            g.in_place = false;
            g.in_place_uids = false;
        }
        let size = g
            .chunks_off
            .max(o.initial_size.next_multiple_of(o.chunk_size));
        if size > o.max_size {
            return Err(Error::InvalidArgument(format!(
                "max_size {} is below the {} bytes the tables need",
                o.max_size, size
            )));
        }
        sys::allocate(&file, 0, size).map_err(|e| Error::io(path, e))?;
        if size + o.chunk_size <= o.max_size {
            // The cleaner's reserve past the end (see `alloc::Purpose`); growth keeps it
            // from then on. Without it the store still works, so a failure is not one.
            let _ = sys::allocate_ahead(&file, size, o.chunk_size);
        }
        for (off, bytes) in initial_image(&g, size) {
            file.write_all_at(&bytes, off)
                .map_err(|e| Error::io(path, e))?;
        }
        crate::rt::failpoint!("create.written");
        let linked = match &tmp {
            None => sys::link_unnamed(&file, path),
            Some(tmp) => std::fs::hard_link(tmp, path),
        };
        linked.map_err(|e| match e.raw_os_error() {
            Some(libc::EEXIST) => dangling_link_error(path).unwrap_or_else(|| Error::io(path, e)),
            _ => Error::io(path, e),
        })
    })();
    if let Some(tmp) = tmp {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

/// The error for a store path that is a symbolic link to nothing, `None` if it is not
/// one. Following the link to create its target would let anyone who can write the
/// directory (`/dev/shm` is world-writable) choose where a store is created.
fn dangling_link_error(path: &Path) -> Option<Error> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.file_type().is_symlink() || std::fs::metadata(path).is_ok() {
        return None;
    }
    let target = std::fs::read_link(path)
        .map(|t| t.display().to_string())
        .unwrap_or_else(|_| "?".into());
    Some(Error::InvalidArgument(format!(
        "{} is a symbolic link to {target}, which does not exist; a store is never \
         created through a symbolic link (remove the link, or name the target itself)",
        path.display()
    )))
}

/// Removes the hidden temporary files (`.NAME.PID.RAND.tmp`) that creators of the store
/// `fname` in `dir` left when they were killed, where they could not build the file
/// unnamed. Only files of processes that no longer exist, and not changed for a minute
/// (a creator in another PID namespace looks dead from here), are removed.
fn remove_stale_temporaries(dir: &Path, fname: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let prefix = format!(".{fname}.");
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .and_then(|r| r.strip_suffix(".tmp"))
        else {
            continue;
        };
        let Some((pid, rand)) = rest.split_once('.') else {
            continue;
        };
        let (Ok(pid), true) = (
            pid.parse::<u32>(),
            !rand.is_empty() && rand.bytes().all(|b| b.is_ascii_hexdigit()),
        ) else {
            continue;
        };
        if pid == sys::pid() || sys::process_exists(pid) {
            continue;
        }
        let old = e
            .metadata()
            .ok()
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age >= std::time::Duration::from_secs(60));
        if old {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

#[cfg(shuttle)]
impl Store {
    /// A store in heap memory, for model checking under shuttle. `size` bytes are
    /// allocated up front (the file never grows past them).
    pub fn in_memory(o: &Options, size: u64) -> Result<Store> {
        validate_options(o)?;
        let shift = o.chunk_size.trailing_zeros();
        let g = Geometry::layout(
            shift,
            0x5eed,
            size,
            o.max_processes as u64,
            o.max_threads as u64,
            o.max_maps as u64,
        );
        let region = Mapping::heap(size);
        for (off, bytes) in initial_image(&g, g.chunks_off) {
            region.write_bytes(off, &bytes);
        }
        let file = File::open("/dev/null").map_err(|e| Error::io(Path::new("/dev/null"), e))?;
        let sh = Arc::new(Shared::new(
            region,
            g,
            PathBuf::from("<memory>"),
            file,
            size,
            o.lock_timeout,
            &crate::kinds::HOOKS,
        ));
        sh.register()?;
        Ok(Store { sh })
    }
}

/// Reads and validates a header (not yet mapped: a bad file must fail here, cleanly).
/// Returns the geometry, the file's size and its header's file end. A file shorter than
/// its file end is refused as truncated, unless `short_ok` (salvage, see
/// `salvage.rs`), which still needs the whole header and tables.
fn read_geometry(path: &Path, file: &File, short_ok: bool) -> Result<(Geometry, u64, u64)> {
    let mut h = [0u8; HEADER_SIZE as usize];
    let n = file.read_at(&mut h, 0).map_err(|e| Error::io(path, e))?;
    // The size only after the header: another process may be growing the file, and it
    // publishes a new file end only once the file has that size, so a size read after
    // the header is at least the header's file end (read before, it may be less).
    let size = file.metadata().map_err(|e| Error::io(path, e))?.len();
    parse_header(path, &h, n, size, short_ok)
}

fn open_file(path: &Path, o: &Options) -> Result<Store> {
    open_file_mode(path, o, false).map(|(s, _)| s)
}

/// Opens the store file at `path` for the engine: read-write, a regular file. Returns it
/// with its (device, inode), the key of [`open_stores`].
fn open_store_file(path: &Path) -> Result<(File, (u64, u64, bool))> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| Error::io(path, e))?;
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    if !meta.is_file() {
        return Err(Error::InvalidArgument(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    Ok((file, (meta.dev(), meta.ino(), false)))
}

/// Maps a store file's `reserve` bytes: shared, or (`private`: the file's length) private
/// and copy-on-write, for a dry run of a repair or the salvage of a truncated file, which
/// must not write to it (see `sys::map_private`).
#[cfg(not(shuttle))]
fn map_region(path: &Path, file: &File, reserve: u64, private: Option<u64>) -> Result<Mapping> {
    let how = match private {
        None => How::Shared,
        Some(file_len) => How::Private { file_len },
    };
    Mapping::map(file, reserve, how).map_err(|e| Error::io(path, e))
}

/// The error of a repair that found the store open `what` ("in this process", "in
/// another process"): a repair needs the store alone.
fn repair_refused(path: &Path, what: &str) -> Error {
    Error::TooManyUsers(format!(
        "{} is open {what}; a repair needs the store to itself (close it there first)",
        path.display()
    ))
}

/// Opens a store; with `repair`, the store is verified in full whatever its clean flag
/// says (every record's checksum included) and repaired (dropping what cannot be
/// trusted) instead of refused, and the repair report is returned. A repair needs the
/// store alone; a truncated file is salvaged into a new one (`salvage.rs`).
fn open_file_mode(
    path: &Path,
    o: &Options,
    repair: bool,
) -> Result<(Store, Option<crate::repair::RepairReport>)> {
    let (file, key) = open_store_file(path)?;
    let mut reg = open_stores().lock().unwrap_or_else(|e| e.into_inner());
    if repair
        && reg
            .get(&(key.0, key.1, true))
            .and_then(|w| w.upgrade())
            .is_some()
    {
        return Err(repair_refused(path, "read-only in this process"));
    }
    if let Some(sh) = reg.get(&key).and_then(|w| w.upgrade()) {
        if repair {
            return Err(repair_refused(path, "in this process"));
        }
        return Ok((Store { sh }, None));
    }
    let (g, size, end) = read_geometry(path, &file, repair)?;
    if size < end {
        drop(reg);
        return crate::salvage::salvage(path, file, g, size, end).map(|(s, r)| (s, Some(r)));
    }
    #[cfg(shuttle)]
    return Err(Error::InvalidArgument(format!(
        "{}: files cannot be mapped under cfg(shuttle)",
        path.display()
    )));
    #[cfg(not(shuttle))]
    {
        let reserve = g.max_size.next_multiple_of(4096);
        let region = map_region(path, &file, reserve, None)?;
        let durable = !sys::on_tmpfs(&file);
        let mut shared = Shared::new(
            region,
            g,
            path.to_owned(),
            file,
            reserve,
            o.lock_timeout,
            &crate::kinds::HOOKS,
        );
        shared.durable = durable;
        shared.sync_writes = o.sync_writes;
        if o.pretouch && !durable {
            shared.pretouch = Some(Arc::default());
        }
        let sh = Arc::new(shared);
        sh.register()?;
        let mut report = None;
        if sh.seize()? {
            // Alone: nobody else has the store open. A disk file not closed cleanly (an
            // OS crash) is verified before anyone uses it; others wait meanwhile. A repair
            // verifies any store: a record may fail its checksum in a store closed
            // cleanly (a disk's bad sector, a stray write), and `check` reports it.
            if repair || (durable && sh.w(H_CLEAN).load(SeqCst) == 0) {
                report = crate::repair::verify_unclean(&sh, repair)?;
            }
            if file_version(&sh) < UPGRADED_VERSION {
                crate::alloc::upgrade(&sh, file_version(&sh))?;
            }
            if durable {
                sh.w(H_CLEAN).store(0, SeqCst);
                sh.flush()?;
            }
            sh.share_seize()?;
        } else if repair {
            return Err(repair_refused(path, "in another process"));
        } else if file_version(&sh) < UPGRADED_VERSION {
            // Others have it open, perhaps with a library that knows only the old version
            // (whose cleaner would read merged runs' inner chunks as headers).
            return Err(Error::UpgradeBlocked {
                path: path.to_owned(),
                found: file_version(&sh),
            });
        }
        sh.verified.store(true, SeqCst);
        crate::txn::reclaim_dead(&sh)?;
        reg.insert(key, Arc::downgrade(&sh));
        Ok((Store { sh }, report))
    }
}

/// What [`Store::repair`] would do to the store at `path`, done to a private
/// copy-on-write mapping of it (see `sys::map_private`): the file is not written.
fn dry_run_repair(path: &Path) -> Result<crate::repair::RepairReport> {
    let (file, key) = open_store_file(path)?;
    {
        let reg = open_stores().lock().unwrap_or_else(|e| e.into_inner());
        if [key, (key.0, key.1, true)]
            .iter()
            .any(|k| reg.get(k).and_then(|w| w.upgrade()).is_some())
        {
            return Err(repair_refused(path, "in this process"));
        }
    }
    let (g, size, end) = read_geometry(path, &file, true)?;
    if size < end {
        return crate::salvage::salvage_dry_run(path, file, g, size, end);
    }
    #[cfg(shuttle)]
    return Err(Error::InvalidArgument(format!(
        "{}: files cannot be mapped under cfg(shuttle)",
        path.display()
    )));
    #[cfg(not(shuttle))]
    {
        let sh = private_shared(path, file, g, size)?;
        Ok(crate::repair::verify_unclean(&sh, true)?.unwrap_or_default())
    }
}

/// A store's file mapped privately (`map_region`), registered, and held alone (the
/// seize lock taken exclusively): for reading a store, and changing it in memory only,
/// with nobody else attached. Never in [`open_stores`]: a later ordinary open must not
/// find this mapping. It flushes nothing and never marks the store clean.
#[cfg(not(shuttle))]
pub(crate) fn private_shared(path: &Path, file: File, g: Geometry, size: u64) -> Result<Shared> {
    let reserve = g.max_size.next_multiple_of(4096);
    let region = map_region(path, &file, reserve, Some(size))?;
    let sh = Shared::new(
        region,
        g,
        path.to_owned(),
        file,
        reserve,
        Options::default().lock_timeout,
        &crate::kinds::HOOKS,
    );
    sh.register()?;
    if !sh.seize()? {
        return Err(repair_refused(path, "in another process"));
    }
    Ok(sh)
}

/// Opens a store read-only (`OpenMode::ReadOnly`): a read-only descriptor and mapping,
/// no process slot, no recovery, no verification and no upgrade (each would write).
fn open_read_only(path: &Path, o: &Options) -> Result<Store> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| Error::io(path, e))?;
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    if !meta.is_file() {
        return Err(Error::InvalidArgument(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    let key = (meta.dev(), meta.ino(), true);
    let mut reg = open_stores().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(sh) = reg.get(&key).and_then(|w| w.upgrade()) {
        return Ok(Store { sh });
    }
    let (g, _size, _end) = read_geometry(path, &file, false)?;
    #[cfg(shuttle)]
    return Err(Error::InvalidArgument(format!(
        "{}: files cannot be mapped under cfg(shuttle)",
        path.display()
    )));
    #[cfg(not(shuttle))]
    {
        let reserve = g.max_size.next_multiple_of(4096);
        // With `read_only` set, nothing stores through the mapping.
        let region = Mapping::map(&file, reserve, How::ReadOnly).map_err(|e| Error::io(path, e))?;
        let durable = !sys::on_tmpfs(&file);
        let mut shared = Shared::new(
            region,
            g,
            path.to_owned(),
            file,
            reserve,
            o.lock_timeout,
            &crate::kinds::HOOKS,
        );
        shared.durable = durable;
        shared.read_only = true;
        let sh = Arc::new(shared);
        sh.attach_read_only()?;
        if file_version(&sh) < UPGRADED_VERSION {
            return Err(sh.read_only_error(format!(
                "its format version {} must be upgraded first, by a process that can write it",
                file_version(&sh)
            )));
        }
        reg.insert(key, Arc::downgrade(&sh));
        Ok(Store { sh })
    }
}

/// The format version in the store's header (the low half of the word at `H_VERSION`).
fn file_version(sh: &Shared) -> u32 {
    sh.w(H_VERSION).load(SeqCst) as u32
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.unregister();
        if let Some(g) = &self.pretouch {
            g.close();
        }
        // The mapping is unmapped when its field drops, after this: the pretouch thread,
        // the one other user of its addresses, is kept off it by the guard closed above.
    }
}
