//! Creating a store file: built unnamed, then linked into place whole.

use super::*;
use crate::error::{Error, Result};
use crate::sys;
use std::fs::OpenOptions;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

/// How many times open-or-create starts over when the file vanishes between a failed
/// create (it existed) and the next open (it is gone): another process destroying and
/// creating it at that very moment. Past this, something else is going on.
pub(crate) const OPEN_OR_CREATE_TRIES: u32 = 100;

/// Creates and initialises a store file, then links it into place atomically, so no
/// process ever opens a half-written store.
///
/// The file is built unnamed (`O_TMPFILE`) where the filesystem allows, so a creator
/// killed halfway leaves nothing behind; elsewhere under a hidden temporary name
/// `.NAME.PID.RAND.tmp`, which the next creator in the directory removes once its
/// process is gone. The name is never created through a symbolic link: a link there,
/// even a dangling one, makes the create fail.
pub(crate) fn create_file(path: &Path, o: &Options) -> Result<()> {
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
pub(crate) fn dangling_link_error(path: &Path) -> Option<Error> {
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
pub(crate) fn remove_stale_temporaries(dir: &Path, fname: &str) {
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
