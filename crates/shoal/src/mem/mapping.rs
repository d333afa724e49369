//! A store file's mapping: made, flushed and unmapped here, so that no other module needs
//! `unsafe` for it. The rest of the engine reaches it as a [`Region`] (`Deref`).

use super::Region;
use std::fs::File;
use std::io;

/// How a store file is mapped.
#[derive(Clone, Copy, Debug)]
pub(crate) enum How {
    /// Shared, read-write: the ordinary open.
    Shared,
    /// Shared, read-only: a store opened read-only (any store through it would fault, so
    /// the engine makes none).
    ReadOnly,
    /// Private and copy-on-write, with the first `file_len` bytes the file's and zeros
    /// past them (a repair's dry run, the salvage of a truncated file): writes never
    /// reach the file.
    Private {
        /// The file's length.
        file_len: u64,
    },
}

/// The mapping of `reserve` bytes of a store file (the whole maximum size is reserved as
/// address space at open, so the file grows without remapping). Unmapped when dropped.
pub(crate) struct Mapping {
    region: Region,
    reserve: u64,
}

#[cfg(not(shuttle))]
impl Mapping {
    /// Maps `reserve` bytes of `file`.
    pub fn map(file: &File, reserve: u64, how: How) -> io::Result<Mapping> {
        let base = match how {
            How::Shared => crate::sys::map_shared(file, reserve),
            How::ReadOnly => crate::sys::map_shared_read_only(file, reserve),
            How::Private { file_len } => crate::sys::map_private(file, reserve, file_len),
        }?;
        // SAFETY: a fresh mapping of `reserve` bytes, page-aligned, unmapped only when
        // this Mapping drops, after every user of the region (the region's copies live
        // in the functions of the store that owns this mapping, and the pretouch thread
        // is kept off it by the store's guard before the store is dropped); all access
        // goes through atomics (see the module comment of `mem`).
        let region = unsafe { Region::from_raw(base, reserve) }.checking_file_end();
        Ok(Mapping { region, reserve })
    }

    /// Writes every byte of the first `len` through to stable storage (`msync` of the
    /// mapping, then `fsync` of `file`).
    pub fn flush(&self, len: u64, file: &File) -> io::Result<()> {
        assert!(len <= self.reserve, "flush of {len} bytes past the mapping");
        // SAFETY: [base, base + len) lies inside this mapping (checked above).
        unsafe { crate::sys::flush(self.region.base_ptr(), len, file) }
    }

    /// Writes the pages holding `[off, off + len)` through to stable storage (`msync`).
    pub fn persist(&self, off: u64, len: u64) -> io::Result<()> {
        assert!(
            off.checked_add(len).is_some_and(|e| e <= self.reserve),
            "persist of {len} bytes at {off:#x} past the mapping"
        );
        // SAFETY: the range lies inside this mapping (checked above), whose base is
        // page-aligned.
        unsafe { crate::sys::msync_pages(self.region.base_ptr(), off, len) }
    }
}

#[cfg(shuttle)]
impl Mapping {
    /// A zeroed heap region of `len` bytes for the model checker (no file).
    pub fn heap(len: u64) -> Mapping {
        Mapping {
            region: Region::new_heap(len),
            reserve: len,
        }
    }
}

impl std::ops::Deref for Mapping {
    type Target = Region;
    #[inline(always)]
    fn deref(&self) -> &Region {
        &self.region
    }
}

#[cfg(not(shuttle))]
impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once; its users are gone (see there).
        unsafe { crate::sys::unmap(self.region.base_ptr(), self.reserve) };
    }
}
