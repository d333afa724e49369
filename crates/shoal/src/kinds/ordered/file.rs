//! Pages in the store file, read in place.
//!
//! A committed page does not change while a pinned snapshot can reach it, so a reader
//! searches it where it lies. The file may still be corrupt (or written by a buggy
//! process): every offset read from it is checked before it is followed (a child page
//! must be a page inside the file), and every read inside a page is clamped to the page,
//! so a bad page gives wrong answers that `check` reports, never a read outside the file.

use super::page::{PageRead, HDR, PAGE, SLOT};
use super::tree::PageSource;
use crate::format::*;
use crate::shared::Shared;
use std::cmp::Ordering;

/// A committed page of the file.
#[derive(Clone, Copy)]
pub(crate) struct FilePage<'a> {
    pub sh: &'a Shared,
    pub off: u64,
}

impl FilePage<'_> {
    /// Replaces `dst`'s contents with the `len` bytes at `at`, clamped to the page as
    /// `copy_out` is, reusing `dst`'s allocation: a scan copies every entry into the same
    /// two buffers.
    #[inline]
    pub fn read_into(&self, at: usize, len: usize, dst: &mut Vec<u8>) {
        let at = at.min(PAGE);
        let len = len.min(PAGE - at);
        self.sh.r.read_to_vec(self.off + at as u64, len, dst);
    }

    /// Clamps `[at, at + n)` into the page: the offset to read.
    #[inline]
    fn at(&self, at: usize, n: usize) -> u64 {
        self.off + at.min(PAGE - n) as u64
    }
}

impl PageRead for FilePage<'_> {
    #[inline]
    fn u16_at(&self, at: usize) -> u16 {
        self.sh.r.window(self.at(at, 2), 2) as u16
    }
    #[inline]
    fn u32_at(&self, at: usize) -> u32 {
        self.sh.r.window(self.at(at, 4), 4) as u32
    }
    #[inline]
    fn u64_at(&self, at: usize) -> u64 {
        self.sh.r.window(self.at(at, 8), 8)
    }
    fn cmp_bytes(&self, at: usize, len: usize, key: &[u8]) -> Ordering {
        let len = len.min(PAGE.saturating_sub(at));
        let base = self.off + at.min(PAGE) as u64;
        let n = len.min(key.len());
        let mut i = 0;
        // Eight bytes at a time as big-endian integers: one integer compare per word
        // instead of a call to `memcmp` on 8-byte slices. Keys that share their first
        // bytes (and so their slots' heads) make every compare of a search reach here.
        while i < n {
            let take = (n - i).min(8);
            // The window's bytes, in file order, are its little-endian bytes: swapped,
            // the first byte is the most significant, as in a bytewise compare.
            let a = self.sh.r.window(base + i as u64, take).swap_bytes();
            let b = if take == 8 {
                u64::from_be_bytes(key[i..i + 8].try_into().expect("8 bytes"))
            } else {
                let mut w = [0u8; 8];
                w[..take].copy_from_slice(&key[i..i + take]);
                u64::from_be_bytes(w)
            };
            // Only the `take` high bytes count (the window's bytes above `take` are
            // unspecified).
            let mask = !0u64 << (8 * (8 - take));
            match (a & mask).cmp(&(b & mask)) {
                Ordering::Equal => i += take,
                o => return o,
            }
        }
        len.cmp(&key.len())
    }
    fn copy_out(&self, at: usize, dst: &mut [u8]) {
        let n = dst.len().min(PAGE.saturating_sub(at));
        let src = self.off + at.min(PAGE) as u64;
        // A key takes word loads; a page's share (a writer's copy-on-write) one block copy.
        if n >= 64 {
            self.sh.r.read_block(src, &mut dst[..n]);
        } else {
            self.sh.r.read_bytes(src, &mut dst[..n]);
        }
        dst[n..].fill(0);
    }
}

/// Whether `off` may be a page of this store (a page boundary inside the file's chunks).
pub(crate) fn is_page(sh: &Shared, off: u64) -> bool {
    off % PAGE_BYTES == 0
        && off >= sh.g.chunks_off
        && off.saturating_add(PAGE_BYTES) <= sh.file_end()
}

/// Lines of a page a binary search reads without knowing its entry count: the header and
/// the slots of up to 88 entries (a leaf of 16-byte keys and values holds about 90).
const SEARCH_LINES: u64 = 12;

/// Asks for the lines of page `off` that a binary search reads (its header and slot
/// array) all at once, before the search reads them one after another: in a page no cache
/// holds, each probe would otherwise wait for its own line. `n`: the page's entry count if
/// known (then the whole slot array), else the first [`SEARCH_LINES`].
pub(crate) fn prefetch_search(sh: &Shared, off: u64, n: Option<usize>) {
    if !is_page(sh, off) {
        return;
    }
    let (from, to) = match n {
        None => (0, SEARCH_LINES),
        Some(n) => (SEARCH_LINES, ((HDR + SLOT * n) as u64).div_ceil(64).min(64)),
    };
    for line in from..to {
        sh.r.prefetch(off + 64 * line);
    }
}

/// The committed pages of a store.
#[derive(Clone, Copy)]
pub(crate) struct FilePages<'a> {
    pub sh: &'a Shared,
}

impl PageSource for FilePages<'_> {
    type Page<'b>
        = FilePage<'b>
    where
        Self: 'b;
    fn page(&self, off: u64) -> FilePage<'_> {
        // An offset that is no page of the file reads as the store's first chunk
        // header's page, which holds no entries a search can follow far (its kind is
        // not a page kind): callers check kinds, so the answer is "corrupt", never a read
        // past the file.
        let off = if is_page(self.sh, off) {
            off
        } else {
            self.sh.g.chunks_off
        };
        FilePage { sh: self.sh, off }
    }
    fn prefetch_search(&self, off: u64, n: Option<usize>) {
        prefetch_search(self.sh, off, n);
    }
}
