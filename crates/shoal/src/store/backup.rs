//! Backups: of a store in use (`Store::backup`, the hot backup: `crate::backup`), and of a
//! store that nobody has open (`Store::backup_idle`).
//!
//! An idle backup is consistent because nobody can change the store while it is made: it
//! holds the seize byte exclusively for the whole copy, which succeeds only when no
//! process is attached, and an opener that arrives meanwhile waits for it (it tries the
//! byte exclusively, then waits for a shared lock).

use super::{read_geometry, resolve_path, Store};
use crate::error::{Error, Result};
use crate::sys;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Copy unit: large enough that a copy runs at memory speed, small enough that the
/// unwritten parts of a sparse store (free chunks whose pages were released) stay holes.
const BLOCK: usize = 1 << 20;

impl Store {
    /// Writes a consistent copy of the store at `store` into a new file `file`, while no
    /// process has the store open, and returns the number of bytes copied. The copy is
    /// the whole store (every map of every kind) as the last process left it; it passes
    /// [`Store::check`], and restoring it is a file copy (or opening it where it lies).
    ///
    /// The store must be idle: [`Error::TooManyUsers`] while any process, this one
    /// included, has it open. Processes that open it during the copy wait until the copy
    /// is done. The caller needs write access to the store file (the exclusive lock that
    /// keeps openers out is a write lock), [`Error::Permission`] otherwise. `file` must
    /// not exist ([`Error::AlreadyExists`]); it appears whole or not at all. A copy of
    /// a store that a dead process left unclean is unclean too, and is verified (and
    /// recovered) by its first opener, as the store would be.
    ///
    /// Where the filesystem has no unnamed files, the copy is built under a hidden
    /// `.FILE.PID.RAND.tmp` that a killed backup leaves behind; the next backup (or create)
    /// into that directory removes it once its process is gone.
    ///
    /// This is not a hot backup: a store in use must be closed first. Blocks of zero
    /// bytes are left as holes in the copy, so it takes no more space than the store.
    pub fn backup_idle(store: impl AsRef<Path>, file: impl AsRef<Path>) -> Result<u64> {
        let src_path = resolve_path(store);
        let dst_path = file.as_ref().to_owned();
        let mut src = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(&src_path)
            .map_err(|e| Error::io(&src_path, e))?;
        if !src
            .metadata()
            .map_err(|e| Error::io(&src_path, e))?
            .is_file()
        {
            return Err(Error::InvalidArgument(format!(
                "{} is not a regular file",
                src_path.display()
            )));
        }
        if !sys::try_lock_byte(src.as_raw_fd(), sys::SEIZE_BYTE)
            .map_err(|e| Error::io(&src_path, e))?
        {
            return Err(Error::TooManyUsers(format!(
                "{} is open; a backup needs the store idle (close it everywhere first)",
                src_path.display()
            )));
        }
        // The lock is released when `src` is closed, on every return below.
        let (_g, size, _end) = read_geometry(&src_path, &src, false)?;
        let out = Output::create(&dst_path)?;
        copy_sparse(&mut src, &out.file, size).map_err(|e| Error::io(&dst_path, e))?;
        out.publish()?;
        Ok(size)
    }

    /// Writes a copy of the whole store (every map of every kind) as of one instant into a
    /// new file `file`, while readers and writers of every process keep going, and returns
    /// the number of bytes the copy spans. The copy passes [`Store::check`]; restoring it
    /// is a file copy (or opening it where it lies). Its first opener recovers it as it
    /// would the store after a crash at that instant, which leaves every transaction
    /// committed by then, and none that was not.
    ///
    /// Writers are held up only briefly: at the start, a writer that begins meanwhile
    /// waits until the writes in flight end (microseconds, or as long as the longest
    /// open ordered write transaction: the backup gives up waiting after 2 s, three
    /// times, with [`Error::Timeout`]); then each writer copies a block of 64 KiB before
    /// its first write to it. The copy's blocks go through a state file in `/dev/shm`,
    /// allocated as large as the store before the backup starts (so that a writer's
    /// copy takes no new memory) and given back as the walk passes: with the output, the
    /// backup takes about one store's memory (docs/DESIGN.md, "Hot backup").
    ///
    /// `file` must not exist ([`Error::AlreadyExists`]); it appears whole or not at all,
    /// built as [`Store::backup_idle`]'s is. One backup of a store runs at a time: another
    /// waits for it up to the store's lock timeout. A store made by an older version
    /// (without write sections) is refused: back it up with [`Store::backup_idle`]. The
    /// calling thread must not hold an open ordered write transaction of this store.
    #[cfg(not(shuttle))]
    pub fn backup(&self, file: impl AsRef<Path>) -> Result<u64> {
        let _call = crate::deadline::call();
        let t = crate::txn::thread_txn(&self.sh)?;
        let out = Output::create(file.as_ref())?;
        let size = crate::backup::run(&self.sh, t, &out.file)?;
        out.publish()?;
        Ok(size)
    }
}

/// Copies the first `size` bytes of `src` into `dst`, seeking over all-zero blocks.
fn copy_sparse(src: &mut File, mut dst: &File, size: u64) -> std::io::Result<()> {
    let mut buf = vec![0u8; BLOCK];
    src.seek(SeekFrom::Start(0))?;
    let mut at = 0u64;
    while at < size {
        let n = (size - at).min(BLOCK as u64) as usize;
        src.read_exact(&mut buf[..n])?;
        if buf[..n].iter().any(|&b| b != 0) {
            dst.seek(SeekFrom::Start(at))?;
            dst.write_all(&buf[..n])?;
        }
        at += n as u64;
    }
    dst.set_len(size)
}

/// A backup's output file: built unnamed (or under a hidden temporary name where the
/// filesystem has no unnamed files) and linked into place whole by [`Output::publish`].
struct Output {
    file: File,
    tmp: Option<std::path::PathBuf>,
    dst: std::path::PathBuf,
}

impl Output {
    /// Starts the output `dst`, which must not exist ([`Error::AlreadyExists`]).
    fn create(dst: &Path) -> Result<Output> {
        if dst.symlink_metadata().is_ok() {
            return Err(Error::AlreadyExists(dst.display().to_string()));
        }
        let dir = dst
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let mode = 0o600;
        let (file, tmp) = match sys::create_unnamed(dir, mode).map_err(|e| Error::io(dst, e))? {
            Some(f) => (f, None),
            None => {
                let name = dst
                    .file_name()
                    .ok_or_else(|| {
                        Error::InvalidArgument(format!("{} is not a file path", dst.display()))
                    })?
                    .to_string_lossy()
                    .into_owned();
                // A backup killed here before leaves its temporary behind, as a creator
                // does; the same sweep removes those whose process is gone.
                super::remove_stale_temporaries(dir, &name);
                let tmp = dir.join(format!(
                    ".{name}.{}.{:x}.tmp",
                    sys::pid(),
                    sys::random_u64()
                ));
                let f = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .mode(mode)
                    .custom_flags(libc::O_CLOEXEC)
                    .open(&tmp)
                    .map_err(|e| Error::io(dst, e))?;
                (f, Some(tmp))
            }
        };
        Ok(Output {
            file,
            tmp,
            dst: dst.to_owned(),
        })
    }

    /// Syncs the output and links it at its name.
    fn publish(&self) -> Result<()> {
        self.file.sync_all().map_err(|e| Error::io(&self.dst, e))?;
        match &self.tmp {
            None => sys::link_unnamed(&self.file, &self.dst),
            Some(t) => std::fs::hard_link(t, &self.dst),
        }
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => {
                Error::AlreadyExists(self.dst.display().to_string())
            }
            _ => Error::io(&self.dst, e),
        })
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if let Some(t) = &self.tmp {
            let _ = std::fs::remove_file(t);
        }
    }
}
