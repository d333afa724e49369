//! `Store`: opening, creating and destroying store files; the catalog of named maps.

use crate::error::{Error, Result};
use crate::format::*;
use crate::shared::Shared;
use crate::txn::thread_txn;

pub(crate) use maps::recorded_types;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::*;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

mod backup;
mod create;
mod logs;
mod maps;
mod open;
mod ordered;
mod queues;
pub(crate) mod salvage;

pub(crate) use create::*;
pub(crate) use open::*;

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
    /// The key type to record in the map when it is created, so that every process and
    /// language reads its keys alike (see [`DataType`](crate::DataType)); an existing map
    /// that recorded another is `InvalidArgument`, except that any map opens as `Bytes`
    /// (its raw bytes). Default none. The engine stores bytes whatever the type: the
    /// bindings encode and decode.
    pub key_type: Option<crate::DataType>,
    /// The value type to record, as `key_type`.
    pub value_type: Option<crate::DataType>,
}

impl Default for MapOptions {
    fn default() -> MapOptions {
        MapOptions {
            segment_buckets: DEFAULT_MAIN_BUCKETS as u32,
            stash_buckets: DEFAULT_STASH_BUCKETS as u32,
            uids: false,
            key_type: None,
            value_type: None,
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

    fn txn(&self) -> Result<crate::txn::Op<'_>> {
        let t = thread_txn(&self.sh)?;
        Ok(crate::txn::Op::new(&self.sh, t))
    }
}

impl Store {
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
