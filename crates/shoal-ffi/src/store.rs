//! Store handles: open, close, destroy, list and drop maps, stats, check, compact.

use crate::*;
use std::ffi::{c_char, c_void, CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

/// An open store: one file holding named maps, shared by every process that opens it.
///
/// Thread safety: a store handle may be used from any number of threads at once (every
/// call on it is thread-safe), except `shoal_store_close`, which must not run while
/// another call uses the same handle. Map handles opened from it stay valid after it is
/// closed (they keep the file mapped). Opening the same file twice in one process shares
/// one mapping. After `fork()`, the child may keep using the handles it inherited.
pub struct shoal_store {
    pub(crate) store: shoal::Store,
}

/// How `shoal_store_open` treats an existing or missing file (`shoal_options.open_mode`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum shoal_open_mode {
    /// Open the store, creating it if it does not exist (the default).
    SHOAL_OPEN_OR_CREATE = 0,
    /// Open an existing store; `SHOAL_NOT_FOUND` if there is none.
    SHOAL_OPEN_EXISTING = 1,
    /// Create a new store; `SHOAL_EXISTS` if the file exists.
    SHOAL_CREATE_NEW = 2,
    /// Open an existing store for reading only; needs no write access to the file. Reads,
    /// iteration, stats and check work; every call that writes returns
    /// `SHOAL_READ_ONLY`, and so does a read that meets a bucket a writer that died left
    /// half written (only a process with write access can recover it), at its timeout.
    SHOAL_OPEN_READ_ONLY = 3,
}

/// Options of `shoal_store_open`. Zero-initialise it, set `struct_size`, then set what
/// you need: every field left 0 takes its default.
///
/// ```c
/// shoal_options o = { .struct_size = sizeof o, .max_size = 1 << 30 };
/// ```
///
/// The size and table options apply when the store is created and are then fixed in
/// its file; `lock_timeout_ms` applies to this process only.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct shoal_options {
    /// `sizeof(shoal_options)` as the caller was compiled with. Required.
    pub struct_size: usize,
    /// A `shoal_open_mode` value. Default `SHOAL_OPEN_OR_CREATE`.
    pub open_mode: u32,
    /// Permission bits of a new file (at most 07777). Default 0600.
    pub file_mode: u32,
    /// Largest size the file may grow to, in bytes; reserved as address space (not
    /// memory) when the store is opened. Default 1 TiB; at most 2^48.
    pub max_size: u64,
    /// Bytes allocated when the store is created. Default: just the tables.
    pub initial_size: u64,
    /// Unit of file growth: a power of two from 64 KiB to 64 MiB. Default 256 KiB.
    pub chunk_size: u64,
    /// How long a call waits for a lock held by a live process before it fails with
    /// `SHOAL_TIMEOUT`, in milliseconds. Default 5000. (Locks of dead processes are
    /// recovered within milliseconds whatever this is.)
    pub lock_timeout_ms: u32,
    /// Processes that may have the store open at once (1..=65535). Default 1024.
    pub max_processes: u32,
    /// Threads, over all processes, that may use the store at once (1..=2^20).
    /// Default 1024.
    pub max_threads: u32,
    /// Named maps the store can hold (1..=65536). Default 1024.
    pub max_maps: u32,
    /// Whether records end with a CRC32C, so that a value torn by an OS crash is
    /// detected, never returned: 0 (default) on for files on disk and off on tmpfs,
    /// 1 on, 2 off. Fixed at creation.
    pub checksums: u32,
    /// 1: flush (msync + fsync) after every write call, so that each acknowledged write
    /// survives an OS crash. Default 0: call `shoal_store_flush` when needed. Only
    /// meaningful for files on disk; applies to this process.
    pub sync_writes: u32,
    /// Whether a background thread of this process faults in the pages of space the
    /// store takes before the writers reach them, so that a write does not take the
    /// page faults (tmpfs only): 0 (default) and 1 on, 2 off. The first open of a file
    /// in a process decides.
    pub pretouch: u32,
    /// Must be 0.
    pub reserved: u32,
}

// SAFETY: repr(C), starts with struct_size: usize, no padding (8+4+4+8*3+4*8 = 72 bytes,
// every field at its natural alignment), any bit pattern is a valid value.
unsafe impl Versioned for shoal_options {}

/// Figures about a whole store (`shoal_store_get_stats`). Set `struct_size` before the call.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct shoal_store_stats {
    /// In: `sizeof(shoal_store_stats)` as the caller was compiled with. Out: the number
    /// of bytes the library filled in.
    pub struct_size: usize,
    /// Size of the file in use.
    pub file_size: u64,
    /// Largest size the file may grow to.
    pub max_size: u64,
    /// Bytes in data chunks (live and dead records).
    pub data_bytes: u64,
    /// Bytes of live records, over all maps.
    pub live_bytes: u64,
    /// Bytes of dead records not yet reclaimed.
    pub dead_bytes: u64,
    /// Bytes in free chunks.
    pub free_bytes: u64,
    /// Chunks reclaimed by the cleaner so far.
    pub chunks_cleaned: u64,
    /// Named maps.
    pub maps: u64,
    /// Processes attached now.
    pub processes: u64,
    /// 1 if records carry checksums, else 0.
    pub checksums: u32,
    /// 1 if the file is on disk (not tmpfs): flushed and marked clean on the last close,
    /// verified when opened after an unclean shutdown. Else 0.
    pub on_disk: u32,
}

// SAFETY: repr(C), starts with struct_size: usize, then u64s and two u32 at the end: no
// padding, any bit pattern valid.
unsafe impl Versioned for shoal_store_stats {}

/// What `shoal_store_repair` did. Set `struct_size` before the call.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct shoal_repair_report {
    /// In: `sizeof(shoal_repair_report)` as the caller was compiled with. Out: the number
    /// of bytes the library filled in.
    pub struct_size: usize,
    /// Problems the check found before anything was repaired.
    pub found: u64,
    /// Entries dropped because their records could not be trusted.
    pub dropped: u64,
    /// Structures rebuilt.
    pub rebuilt: u64,
}

// SAFETY: repr(C), starts with struct_size: usize, then u64s only.
unsafe impl Versioned for shoal_repair_report {}

/// What `shoal_store_check` found. Set `struct_size` before the call.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct shoal_check_report {
    /// In: `sizeof(shoal_check_report)` as the caller was compiled with. Out: the number
    /// of bytes the library filled in.
    pub struct_size: usize,
    /// Problems found (0 for a sound store); each is passed to the callback.
    pub problems: u64,
    /// Maps checked.
    pub maps: u64,
    /// Entries checked, over all maps.
    pub entries: u64,
    /// Index segments checked.
    pub segments: u64,
    /// Chunks walked.
    pub chunks: u64,
}

// SAFETY: repr(C), starts with struct_size: usize, then u64s only.
unsafe impl Versioned for shoal_check_report {}

fn engine_options(o: &shoal_options) -> Res<(shoal::Options, shoal::OpenMode)> {
    let mode = match o.open_mode {
        0 => shoal::OpenMode::OpenOrCreate,
        1 => shoal::OpenMode::Open,
        2 => shoal::OpenMode::CreateNew,
        3 => shoal::OpenMode::ReadOnly,
        m => {
            return Err(Fail::new(
                SHOAL_INVALID,
                format!("open_mode {m} is not a shoal_open_mode"),
            ))
        }
    };
    if o.file_mode > 0o7777 {
        return Err(Fail::new(
            SHOAL_INVALID,
            format!("file_mode {:#o} has bits beyond 07777", o.file_mode),
        ));
    }
    let checksums = match o.checksums {
        0 => None,
        1 => Some(true),
        2 => Some(false),
        c => {
            return Err(Fail::new(
                SHOAL_INVALID,
                format!("checksums {c}: use 0 (default), 1 (on) or 2 (off)"),
            ))
        }
    };
    if o.sync_writes > 1 {
        return Err(Fail::new(
            SHOAL_INVALID,
            format!("sync_writes {}: use 0 or 1", o.sync_writes),
        ));
    }
    let pretouch = match o.pretouch {
        0 | 1 => true,
        2 => false,
        p => {
            return Err(Fail::new(
                SHOAL_INVALID,
                format!("pretouch {p}: use 0 (default), 1 (on) or 2 (off)"),
            ))
        }
    };
    if o.reserved != 0 {
        return Err(Fail::new(SHOAL_INVALID, "reserved must be 0"));
    }
    let d = shoal::Options::default();
    let or = |v: u64, def: u64| if v == 0 { def } else { v };
    let or32 = |v: u32, def: u32| if v == 0 { def } else { v };
    // Fields the engine adds later take their defaults until the ABI exposes them.
    #[allow(clippy::needless_update)]
    let options = shoal::Options {
        max_size: or(o.max_size, d.max_size),
        initial_size: o.initial_size,
        mode: or32(o.file_mode, d.mode),
        lock_timeout: if o.lock_timeout_ms == 0 {
            d.lock_timeout
        } else {
            Duration::from_millis(o.lock_timeout_ms as u64)
        },
        max_processes: or32(o.max_processes, d.max_processes),
        max_threads: or32(o.max_threads, d.max_threads),
        max_maps: or32(o.max_maps, d.max_maps),
        chunk_size: or(o.chunk_size, d.chunk_size),
        checksums,
        sync_writes: o.sync_writes == 1,
        pretouch,
        ..shoal::Options::default()
    };
    Ok((options, mode))
}

/// The store handle behind a pointer.
///
/// # Safety
/// `p` is NULL or a live handle from `shoal_store_open`.
pub(crate) unsafe fn store_ref<'a>(p: *const shoal_store) -> Res<&'a shoal::Store> {
    if p.is_null() {
        return Err(null("store"));
    }
    // SAFETY: a live handle (caller's contract); handles are only read through & refs.
    Ok(unsafe { &(*p).store })
}

/// Opens (or creates) a store file and returns a handle on it.
///
/// * `path`: NUL-terminated file path; a bare name without `/` means
///   `/dev/shm/NAME.shoal`. Any bytes but NUL (need not be UTF-8).
/// * `opts`: options, or NULL for all defaults (open or create).
/// * `out`: receives the new handle (NULL on failure). Free it with `shoal_store_close`.
///
/// Errors: `SHOAL_NOT_FOUND` (`SHOAL_OPEN_EXISTING` or `SHOAL_OPEN_READ_ONLY` and no
/// file), `SHOAL_READ_ONLY` (`SHOAL_OPEN_READ_ONLY` of a store that must be upgraded
/// first), `SHOAL_EXISTS`
/// (`SHOAL_CREATE_NEW` and a file), `SHOAL_NOT_A_STORE`, `SHOAL_CORRUPT`,
/// `SHOAL_VERSION`, `SHOAL_PERMISSION`, `SHOAL_NO_SPACE`, `SHOAL_TOO_MANY` (every
/// process slot taken), `SHOAL_INVALID` (bad options, a directory), `SHOAL_IO`,
/// `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `path` is NULL or NUL-terminated; `opts` is NULL or a `shoal_options` whose
/// `struct_size` bytes are readable; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_store_open(
    path: *const c_char,
    opts: *const shoal_options,
    out: *mut *mut shoal_store,
) -> shoal_status {
    ffi(|| {
        let out = out_ptr(out, "out")?;
        // SAFETY: non-NULL, writable by contract.
        unsafe { out.write(std::ptr::null_mut()) };
        // SAFETY: forwarded contract.
        let path = OsStr::from_bytes(unsafe { c_bytes(path, "path") }?);
        let o = if opts.is_null() {
            shoal_options::default()
        } else {
            // SAFETY: forwarded contract.
            unsafe { read_versioned(opts, "opts") }?
        };
        let (options, mode) = engine_options(&o)?;
        let store = shoal::Store::open_with(path, &options, mode)?;
        let h = Box::into_raw(Box::new(shoal_store { store }));
        // SAFETY: as above.
        unsafe { out.write(h) };
        Ok(SHOAL_OK)
    })
}

/// Closes a store handle. The file stays; other handles on it (map handles included)
/// stay valid. NULL is allowed and does nothing.
///
/// Errors: none (always `SHOAL_OK`).
///
/// # Safety
/// `store` is NULL or a live handle from `shoal_store_open`, not used again after this
/// call and not in use by another thread during it.
#[no_mangle]
pub unsafe extern "C" fn shoal_store_close(store: *mut shoal_store) -> shoal_status {
    ffi(|| {
        if !store.is_null() {
            // SAFETY: a live handle made by Box::into_raw in shoal_store_open, given back
            // exactly once (caller's contract).
            drop(unsafe { Box::from_raw(store) });
        }
        Ok(SHOAL_OK)
    })
}

/// Deletes a store file. Processes that have it open keep working on their mapping
/// until they close it; new opens create a new, empty store.
///
/// * `path`: as for `shoal_store_open`.
///
/// Errors: `SHOAL_NOT_FOUND`, `SHOAL_PERMISSION`, `SHOAL_IO`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `path` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn shoal_store_destroy(path: *const c_char) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let path = OsStr::from_bytes(unsafe { c_bytes(path, "path") }?);
        shoal::Store::destroy(path)?;
        Ok(SHOAL_OK)
    })
}

/// Writes a consistent copy of the store at `path` into the new file `file`, while no
/// process has the store open (`Store::backup_idle`): every map of every kind; the copy
/// passes `shoal_store_check`, and restoring it is a file copy. Processes that open the
/// store during the copy wait until it is done. Not a hot backup: close the store first.
///
/// * `path`: as for `shoal_store_open`. `file`: must not exist; it appears whole or not
///   at all.
/// * `bytes`: NULL, or receives the number of bytes copied.
///
/// Errors: `SHOAL_TOO_MANY` (the store is open in this process or another),
/// `SHOAL_EXISTS` (`file` exists), `SHOAL_NOT_FOUND`, `SHOAL_PERMISSION` (no write access
/// to the store: the lock that keeps openers out is a write lock), `SHOAL_INVALID` (not a
/// store), `SHOAL_IO`, `SHOAL_NO_SPACE`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `path` and `file` are NULL or NUL-terminated; `bytes` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_store_backup_idle(
    path: *const c_char,
    file: *const c_char,
    bytes: *mut u64,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let path = OsStr::from_bytes(unsafe { c_bytes(path, "path") }?);
        // SAFETY: forwarded contract.
        let file = OsStr::from_bytes(unsafe { c_bytes(file, "file") }?);
        let n = shoal::Store::backup_idle(path, file)?;
        if !bytes.is_null() {
            // SAFETY: non-NULL, writable by the caller's contract.
            unsafe { bytes.write(n) };
        }
        Ok(SHOAL_OK)
    })
}

/// Writes a copy of the whole store (every map of every kind) as of one instant into the
/// new file `file`, while readers and writers of every process keep going (the hot
/// backup, `Store::backup`). The copy passes `shoal_store_check`; restoring it is a file
/// copy, and its first opener recovers it as after a crash at that instant (every
/// transaction committed by then, none after). Writers are held up briefly: each saves a
/// 64 KiB block before its first write to it. A store nobody else has open can also be
/// copied byte for byte, without a handle, by `shoal_store_backup_idle`.
///
/// * `file`: must not exist; it appears whole or not at all.
/// * `bytes`: NULL, or receives the number of bytes the copy spans.
///
/// Errors: `SHOAL_EXISTS` (`file` exists), `SHOAL_TIMEOUT` (another backup of the store
/// held it past the lock timeout, or ordered-map write transactions stayed open through
/// the backup's three 2 s waits for them), `SHOAL_INVALID` (a store made by an older
/// version, which only `shoal_store_backup_idle` copies; or the calling thread holds an
/// ordered write transaction of this store open), `SHOAL_NOT_FOUND` (`file`'s directory
/// does not exist), `SHOAL_READ_ONLY` (a handle opened read-only), `SHOAL_PERMISSION`,
/// `SHOAL_TOO_MANY`, `SHOAL_IO`, `SHOAL_NO_SPACE`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `store` is NULL or a live handle; `file` is NULL or NUL-terminated; `bytes` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_store_backup(
    store: *const shoal_store,
    file: *const c_char,
    bytes: *mut u64,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { store_ref(store) }?;
        // SAFETY: forwarded contract.
        let file = OsStr::from_bytes(unsafe { c_bytes(file, "file") }?);
        let n = s.backup(file)?;
        // SAFETY: forwarded contract.
        unsafe { write_opt(bytes, n) };
        Ok(SHOAL_OK)
    })
}

/// Copies the store file's path (NUL-terminated) into `buf`.
///
/// * `buf`, `cap`: the caller's buffer and its size; `buf` may be NULL when `cap` is 0.
/// * `len`: receives the path's length, not counting the NUL, whatever the outcome.
///
/// Errors: `SHOAL_BUFFER_TOO_SMALL` when `cap < *len + 1` (nothing written to `buf`),
/// `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `store` is NULL or a live handle; `buf` is NULL or has `cap` writable bytes; `len` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_store_path(
    store: *const shoal_store,
    buf: *mut c_char,
    cap: usize,
    len: *mut usize,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { store_ref(store) }?;
        let len = out_ptr(len, "len")?;
        let p = s.path().as_os_str().as_bytes();
        // SAFETY: forwarded contract.
        unsafe { copy_out(p, buf as *mut c_void, cap, len, true, "buf") }?;
        Ok(SHOAL_OK)
    })
}

/// Calls `cb` once for each map in the store with its name (in no particular order),
/// until `cb` returns non-zero.
///
/// * `cb`: receives `ctx` and each name (NUL-terminated, valid during the call).
///
/// Errors: `SHOAL_CORRUPT`, `SHOAL_TOO_MANY`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `store` is NULL or a live handle; `cb` does not unwind.
#[no_mangle]
pub unsafe extern "C" fn shoal_store_maps(
    store: *const shoal_store,
    cb: shoal_text_fn,
    ctx: *mut c_void,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { store_ref(store) }?;
        let cb = cb.ok_or_else(|| null("cb"))?;
        for name in s.maps()? {
            let len = name.len();
            // Map names never hold NUL (the catalog stores them from C strings or &str
            // checked by the engine); be safe anyway.
            let c =
                CString::new(name).map_err(|_| Fail::new(SHOAL_CORRUPT, "map name with NUL"))?;
            // SAFETY: a C function pointer of the declared type; `c` outlives the call.
            if unsafe { cb(ctx, c.as_ptr(), len) } != 0 {
                break;
            }
        }
        Ok(SHOAL_OK)
    })
}

/// Drops the map `name` and everything in it. Handles on it, in any process, get
/// `SHOAL_NOT_FOUND` from then on (close them as usual).
///
/// Errors: `SHOAL_NOT_FOUND` (no such map), `SHOAL_INVALID` (a name that is empty, longer
/// than `SHOAL_MAX_NAME_LEN` or not UTF-8), `SHOAL_TIMEOUT`, `SHOAL_TOO_MANY`,
/// `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `store` is NULL or a live handle; `name` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn shoal_store_drop_map(
    store: *const shoal_store,
    name: *const c_char,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { store_ref(store) }?;
        // SAFETY: forwarded contract.
        let name = unsafe { c_str(name, "name") }?;
        if s.drop_map(name)? {
            Ok(SHOAL_OK)
        } else {
            Err(Fail::new(SHOAL_NOT_FOUND, format!("no map {name:?}")))
        }
    })
}

/// Fills `out` with figures about the store.
///
/// * `out`: set `out->struct_size = sizeof *out` first.
///
/// Errors: `SHOAL_INVALID` (bad `struct_size`), `SHOAL_TOO_MANY`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `store` is NULL or a live handle; `out` is NULL or has `out->struct_size` writable
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn shoal_store_get_stats(
    store: *const shoal_store,
    out: *mut shoal_store_stats,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { store_ref(store) }?;
        if out.is_null() {
            return Err(null("out"));
        }
        let st = s.stats()?;
        let v = shoal_store_stats {
            struct_size: std::mem::size_of::<shoal_store_stats>(),
            file_size: st.file_size,
            max_size: st.max_size,
            data_bytes: st.data_bytes,
            live_bytes: st.live_bytes,
            dead_bytes: st.dead_bytes,
            free_bytes: st.free_bytes,
            chunks_cleaned: st.chunks_cleaned,
            maps: st.maps,
            processes: st.processes,
            checksums: st.checksums as u32,
            on_disk: st.on_disk as u32,
        };
        // SAFETY: forwarded contract.
        unsafe { write_versioned(out, v, "out") }?;
        Ok(SHOAL_OK)
    })
}

/// Verifies every invariant of the store file (run it on a quiet store: writes in flight
/// can look like problems). Returns `SHOAL_OK` for a sound store and `SHOAL_CORRUPT` when
/// problems were found; each problem is passed to `cb`.
///
/// * `report`: NULL, or receives the figures (set `report->struct_size` first).
/// * `cb`: NULL, or receives `ctx` and each problem's description, until it returns
///   non-zero.
///
/// Errors: `SHOAL_CORRUPT` (problems found, or a structure too damaged to walk),
/// `SHOAL_INVALID` (bad `struct_size`), `SHOAL_TIMEOUT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `store` is NULL or a live handle; `report` is NULL or has `report->struct_size`
/// writable bytes; `cb` does not unwind.
#[no_mangle]
pub unsafe extern "C" fn shoal_store_check(
    store: *const shoal_store,
    report: *mut shoal_check_report,
    cb: shoal_text_fn,
    ctx: *mut c_void,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { store_ref(store) }?;
        let r = s.check()?;
        let v = shoal_check_report {
            struct_size: std::mem::size_of::<shoal_check_report>(),
            problems: r.problems.len() as u64,
            maps: r.maps,
            entries: r.entries,
            segments: r.segments,
            chunks: r.chunks,
        };
        if !report.is_null() {
            // SAFETY: forwarded contract.
            unsafe { write_versioned(report, v, "report") }?;
        }
        if let Some(cb) = cb {
            for p in &r.problems {
                let c = CString::new(p.replace('\0', "?")).unwrap_or_default();
                // SAFETY: a C function pointer of the declared type; `c` outlives the call.
                if unsafe { cb(ctx, c.as_ptr(), c.as_bytes().len()) } != 0 {
                    break;
                }
            }
        }
        if r.is_ok() {
            Ok(SHOAL_OK)
        } else {
            Err(Fail::new(
                SHOAL_CORRUPT,
                format!(
                    "check found {} problems; the first: {}",
                    r.problems.len(),
                    r.problems[0]
                ),
            ))
        }
    })
}

/// Reclaims dead space now (normally done a little at a time by writers), then returns
/// the pages of free chunks to the filesystem (the memory of a store in `/dev/shm`; the
/// file's size stays).
///
/// * `chunks_freed`: NULL, or receives the number of chunks freed.
///
/// Errors: `SHOAL_TIMEOUT`, `SHOAL_TOO_MANY`, `SHOAL_CORRUPT`, `SHOAL_IO`,
/// `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `store` is NULL or a live handle; `chunks_freed` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_store_compact(
    store: *const shoal_store,
    chunks_freed: *mut u64,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { store_ref(store) }?;
        let n = s.compact()?;
        // SAFETY: forwarded contract.
        unsafe { write_opt(chunks_freed, n) };
        Ok(SHOAL_OK)
    })
}

/// Writes everything in the store through to stable storage (msync + fsync): after it
/// returns, an OS crash loses nothing written before the call. Needed only for stores on
/// disk (on tmpfs it does nothing useful and costs little).
///
/// Errors: `SHOAL_IO`, `SHOAL_NO_SPACE`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `store` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn shoal_store_flush(store: *const shoal_store) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { store_ref(store) }?;
        s.flush()?;
        Ok(SHOAL_OK)
    })
}

/// A batch of writes to one store on one thread (`shoal_batch_begin`): until it ends,
/// `sync_writes` does not flush the writes this thread makes to the store, and
/// `shoal_batch_end` flushes them once: the group commit of a store opened with
/// `sync_writes`.
///
/// Thread safety: bound to the thread that began it; only that thread may end it.
pub struct shoal_batch {
    batch: Option<shoal::Batch>,
    store: shoal::Store,
    thread: std::thread::ThreadId,
}

/// Begins a batch of writes to `store` on the calling thread. With `sync_writes`, the
/// writes this thread makes to the store (any of its maps) are not flushed one by one
/// until the batch ends; `shoal_batch_end` then flushes once. Each write stays atomic on
/// its own; the group is not (other processes see each write as it is made, and an OS
/// crash before the end may keep any subset). Writes to other stores flush as usual.
/// Batches nest: the outermost end flushes. Without `sync_writes` nothing changes.
///
/// * `out`: receives the batch (NULL on failure). End it with `shoal_batch_end` on this
///   thread; until then this thread's writes to the store are not durable.
///
/// Errors: `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `store` is NULL or a live handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_batch_begin(
    store: *const shoal_store,
    out: *mut *mut shoal_batch,
) -> shoal_status {
    ffi(|| {
        let out = out_ptr(out, "out")?;
        // SAFETY: non-NULL, writable by contract.
        unsafe { out.write(std::ptr::null_mut()) };
        // SAFETY: forwarded contract.
        let s = unsafe { store_ref(store) }?;
        let b = Box::new(shoal_batch {
            batch: Some(s.begin_batch()),
            store: s.clone(),
            thread: std::thread::current().id(),
        });
        // SAFETY: non-NULL, writable by contract.
        unsafe { out.write(Box::into_raw(b)) };
        Ok(SHOAL_OK)
    })
}

/// Ends a batch and frees it; with `sync_writes`, flushes the store once (unless another
/// batch of it is still open on this thread: the outermost end flushes).
///
/// Errors: `SHOAL_INVALID` (called on another thread than the one that began the batch:
/// nothing is done and the batch stays open and valid), `SHOAL_IO`, `SHOAL_NO_SPACE` (the
/// flush failed; the batch is ended and freed all the same), `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `batch` is NULL or a live batch from `shoal_batch_begin`, not used again after a call
/// that ended it.
#[no_mangle]
pub unsafe extern "C" fn shoal_batch_end(batch: *mut shoal_batch) -> shoal_status {
    ffi(|| {
        if batch.is_null() {
            return Err(null("batch"));
        }
        // SAFETY: a live batch (caller's contract), read through a shared reference.
        if unsafe { &*batch }.thread != std::thread::current().id() {
            return Err(Fail::new(
                SHOAL_INVALID,
                "a batch must be ended on the thread that began it",
            ));
        }
        // SAFETY: made by Box::into_raw in shoal_batch_begin, given back exactly once.
        let mut b = unsafe { Box::from_raw(batch) };
        if let Some(open) = b.batch.take() {
            if open.end_without_flush() {
                b.store.flush()?;
            }
        }
        Ok(SHOAL_OK)
    })
}

/// Opens a store on disk that was not closed cleanly and that `shoal_store_open`
/// refused (`SHOAL_CORRUPT`), or any store whose reads or check report corruption, and
/// repairs it: every record's checksum is verified (whatever the clean flag says),
/// entries whose records cannot be trusted (torn by an OS crash after the last flush,
/// failing their checksums) are dropped, and everything else is rebuilt from what
/// remains. A sound store is returned with an empty report. A truncated file is
/// salvaged into a new store that replaces it (the original kept as PATH.truncated).
///
/// * `path`: as for `shoal_store_open` (default options).
/// * `out`: receives the handle (NULL on failure); close it with `shoal_store_close`.
/// * `report`: NULL, or receives the counts (set `report->struct_size` first).
/// * `cb`: NULL, or receives each line of the report ("found: ...", "dropped: MAP:
///   ...", "rebuilt: ..."), until it returns non-zero.
///
/// Errors: as `shoal_store_open`; `SHOAL_TOO_MANY` (the store is open in this process or
/// another: a repair needs it alone); `SHOAL_INVALID` (bad `struct_size`).
///
/// # Safety
/// `path` is NULL or NUL-terminated; `out` is NULL or writable; `report` is NULL or has
/// `report->struct_size` writable bytes; `cb` does not unwind.
#[no_mangle]
pub unsafe extern "C" fn shoal_store_repair(
    path: *const c_char,
    out: *mut *mut shoal_store,
    report: *mut shoal_repair_report,
    cb: shoal_text_fn,
    ctx: *mut c_void,
) -> shoal_status {
    ffi(|| {
        let out = out_ptr(out, "out")?;
        // SAFETY: non-NULL, writable by contract.
        unsafe { out.write(std::ptr::null_mut()) };
        // SAFETY: forwarded contract.
        let path = OsStr::from_bytes(unsafe { c_bytes(path, "path") }?);
        if !report.is_null() {
            // Validates struct_size before the repair runs (and zeroes the report; its
            // struct_size becomes min(the caller's, ours), which the write below keeps).
            // SAFETY: forwarded contract.
            unsafe { write_versioned(report, shoal_repair_report::default(), "report") }?;
        }
        let (store, r) = shoal::Store::repair(path)?;
        if !report.is_null() {
            let v = shoal_repair_report {
                struct_size: std::mem::size_of::<shoal_repair_report>(),
                found: r.found.len() as u64,
                dropped: r.dropped.len() as u64,
                rebuilt: r.rebuilt.len() as u64,
            };
            // SAFETY: forwarded contract; struct_size holds the caller's size or less.
            unsafe { write_versioned(report, v, "report") }?;
        }
        if let Some(cb) = cb {
            let lines = r
                .found
                .iter()
                .map(|p| format!("found: {p}"))
                .chain(r.dropped.iter().map(|(m, s)| format!("dropped: {m}: {s}")))
                .chain(r.rebuilt.iter().map(|p| format!("rebuilt: {p}")));
            for line in lines {
                let c = CString::new(line.replace('\0', "?")).unwrap_or_default();
                // SAFETY: a C function pointer of the declared type; `c` outlives the call.
                if unsafe { cb(ctx, c.as_ptr(), c.as_bytes().len()) } != 0 {
                    break;
                }
            }
        }
        let h = Box::into_raw(Box::new(shoal_store { store }));
        // SAFETY: as above.
        unsafe { out.write(h) };
        Ok(SHOAL_OK)
    })
}
