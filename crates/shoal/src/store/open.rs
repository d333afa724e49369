//! Opening a store file: validating it, mapping it, attaching to it (read-write, read-only, or privately for a repair's dry run or a salvage).

use super::*;
use crate::error::{Error, Result};
use crate::mem::{How, Mapping};
use crate::shared::Shared;
use crate::sys;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Arc;

pub(crate) fn validate_options(o: &Options) -> Result<()> {
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
/// `store::salvage`), which still needs the whole header and tables.
pub(crate) fn read_geometry(
    path: &Path,
    file: &File,
    short_ok: bool,
) -> Result<(Geometry, u64, u64)> {
    let mut h = [0u8; HEADER_SIZE as usize];
    let n = file.read_at(&mut h, 0).map_err(|e| Error::io(path, e))?;
    // The size only after the header: another process may be growing the file, and it
    // publishes a new file end only once the file has that size, so a size read after
    // the header is at least the header's file end (read before, it may be less).
    let size = file.metadata().map_err(|e| Error::io(path, e))?.len();
    parse_header(path, &h, n, size, short_ok)
}

pub(crate) fn open_file(path: &Path, o: &Options) -> Result<Store> {
    open_file_mode(path, o, false).map(|(s, _)| s)
}

/// Opens the store file at `path` for the engine: read-write, a regular file. Returns it
/// with its (device, inode), the key of [`open_stores`].
pub(crate) fn open_store_file(path: &Path) -> Result<(File, (u64, u64, bool))> {
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
pub(crate) fn map_region(
    path: &Path,
    file: &File,
    reserve: u64,
    private: Option<u64>,
) -> Result<Mapping> {
    let how = match private {
        None => How::Shared,
        Some(file_len) => How::Private { file_len },
    };
    Mapping::map(file, reserve, how).map_err(|e| Error::io(path, e))
}

/// The error of a repair that found the store open `what` ("in this process", "in
/// another process"): a repair needs the store alone.
pub(crate) fn repair_refused(path: &Path, what: &str) -> Error {
    Error::TooManyUsers(format!(
        "{} is open {what}; a repair needs the store to itself (close it there first)",
        path.display()
    ))
}

/// Opens a store; with `repair`, the store is verified in full whatever its clean flag
/// says (every record's checksum included) and repaired (dropping what cannot be
/// trusted) instead of refused, and the repair report is returned. A repair needs the
/// store alone; a truncated file is salvaged into a new one (`store::salvage`).
pub(crate) fn open_file_mode(
    path: &Path,
    o: &Options,
    repair: bool,
) -> Result<(Store, Option<crate::repair::RepairReport>)> {
    #[cfg(feature = "failpoints")]
    crate::mem::copy::audit::from_env();
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
        return crate::store::salvage::salvage(path, file, g, size, end).map(|(s, r)| (s, Some(r)));
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
pub(crate) fn dry_run_repair(path: &Path) -> Result<crate::repair::RepairReport> {
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
        return crate::store::salvage::salvage_dry_run(path, file, g, size, end);
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
pub(crate) fn open_read_only(path: &Path, o: &Options) -> Result<Store> {
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
pub(crate) fn file_version(sh: &Shared) -> u32 {
    sh.w(H_VERSION).load(SeqCst) as u32
}
