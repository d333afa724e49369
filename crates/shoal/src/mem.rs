//! The shared mapping, and the only way the rest of the engine touches it.
//!
//! Every byte of a store file may be written by another process at any moment, so Rust
//! must never hold a plain `&[u8]` or `&mut` into it: that would be a data race (UB), and
//! the compiler could assume bytes do not change under it. Instead:
//!
//! * every shared *word* (locks, sequence numbers, slots, counters, offsets) is a naturally
//!   aligned `AtomicU64` reached through [`Region::word`];
//! * record *bytes* (keys and values) are read and written with atomic copies
//!   ([`Region::read_bytes`], [`Region::write_bytes`]), the technique of C++ P1478 and of
//!   the `atomic-memcpy` crate (which only handles fixed-size `T`, hence this version for
//!   runtime lengths). Every access, even to a single byte, is an aligned `AtomicU64` of
//!   the word that holds it, so no location is ever accessed with two atomic sizes; a
//!   writer merges the bytes of its edge words it does not own (immutable older records
//!   of the same chunk, or free space only it will fill). Readers validate what they
//!   copied with a sequence number afterwards, so a torn copy is discarded, never used.
//!
//! Soundness rests on two invariants that the callers keep:
//! 1. an offset passed here lies below the store's published `file_end` (callers check
//!    offsets read from the file against it; see `format::Limits`), and the file never
//!    shrinks while mapped, so the page is backed and no `SIGBUS` can occur;
//! 2. the mapping outlives every reference handed out (references borrow `&self`).
//!
//! Under `cfg(shuttle)` the region is a heap array of shuttle's atomics, so the lock, the
//! optimistic read and the split protocols run unchanged under the randomized scheduler.

#[cfg(shuttle)]
pub use shuttle::sync::atomic::{fence, AtomicU64};
#[cfg(not(shuttle))]
pub use std::sync::atomic::{fence, AtomicU32, AtomicU64};

use std::sync::atomic::Ordering;

/// A contiguous range of shared memory addressed by byte offsets.
pub struct Region {
    #[cfg(not(shuttle))]
    base: *mut u8,
    #[cfg(shuttle)]
    cells: Vec<AtomicU64>,
    len: u64,
}

// SAFETY: the region is only ever accessed through atomics (see the module comment), so
// sharing it between threads is exactly as safe as sharing the atomics themselves.
#[cfg(not(shuttle))]
unsafe impl Send for Region {}
#[cfg(not(shuttle))]
unsafe impl Sync for Region {}

#[cfg(not(shuttle))]
impl Region {
    /// Wraps a mapping of `len` bytes at `base`.
    ///
    /// # Safety
    /// `base` must be 4096-aligned, valid for reads and writes of `len` bytes for the
    /// lifetime of the `Region` (until the owner unmaps it, after dropping the region),
    /// and only ever accessed through atomics by every party.
    pub unsafe fn from_raw(base: *mut u8, len: u64) -> Region {
        Region { base, len }
    }

    /// Base address, for unmapping.
    pub fn base_ptr(&self) -> *mut u8 {
        self.base
    }

    /// The shared word at `off` (8-aligned, inside the region).
    #[inline(always)]
    pub fn word(&self, off: u64) -> &AtomicU64 {
        debug_assert!(
            off % 8 == 0 && off + 8 <= self.len,
            "word {off:#x} out of region"
        );
        // SAFETY: in bounds and aligned (asserted by every caller's layout arithmetic,
        // checked in debug builds), backed per invariant 1, and accessed only atomically.
        unsafe { &*(self.base.add(off as usize) as *const AtomicU64) }
    }

    /// The low half of the word at `off`, for `futex(2)` (which works on 32-bit words).
    #[inline]
    pub fn futex_word(&self, off: u64) -> &AtomicU32 {
        debug_assert!(off % 8 == 0 && off + 8 <= self.len);
        // SAFETY: as for `word`; little-endian, so the low half starts at `off`.
        unsafe { &*(self.base.add(off as usize) as *const AtomicU32) }
    }

    #[inline(always)]
    fn load_word(&self, a: usize) -> u64 {
        // SAFETY: `a` is 8-aligned and inside the region: it is the aligned word holding a
        // byte of a range the caller bounds-checked (invariant 1); the file end is
        // chunk-aligned, so a whole word around an in-bounds byte is in bounds too.
        unsafe { (*(self.base.add(a) as *const AtomicU64)).load(Ordering::Relaxed) }
    }

    #[inline(always)]
    fn store_word(&self, a: usize, w: u64) {
        // SAFETY: as for `load_word`.
        unsafe { (*(self.base.add(a) as *const AtomicU64)).store(w, Ordering::Relaxed) }
    }

    /// Copies `dst.len()` bytes starting at `off` out of the region (aligned word loads).
    #[inline]
    pub fn read_bytes(&self, off: u64, dst: &mut [u8]) {
        let n = dst.len();
        if n == 0 {
            return;
        }
        debug_assert!(off + n as u64 <= self.len);
        let off = off as usize;
        let mut a = off & !7;
        let mut i = 0; // bytes of dst filled
        let head = off - a;
        if head != 0 {
            let w = self.load_word(a).to_le_bytes();
            let take = (8 - head).min(n);
            dst[..take].copy_from_slice(&w[head..head + take]);
            i = take;
            a += 8;
        }
        while n - i >= 8 {
            dst[i..i + 8].copy_from_slice(&self.load_word(a).to_le_bytes());
            i += 8;
            a += 8;
        }
        if i < n {
            let w = self.load_word(a).to_le_bytes();
            dst[i..].copy_from_slice(&w[..n - i]);
        }
    }

    /// Compares the bytes at `off` with `other` (aligned word loads, no copy).
    #[inline]
    pub fn bytes_eq(&self, off: u64, other: &[u8]) -> bool {
        let n = other.len();
        if n == 0 {
            return true;
        }
        debug_assert!(off + n as u64 <= self.len);
        let off = off as usize;
        let mut a = off & !7;
        let mut i = 0;
        let head = off - a;
        if head != 0 {
            let w = self.load_word(a).to_le_bytes();
            let take = (8 - head).min(n);
            if w[head..head + take] != other[..take] {
                return false;
            }
            i = take;
            a += 8;
        }
        while n - i >= 8 {
            if self.load_word(a).to_le_bytes() != other[i..i + 8] {
                return false;
            }
            i += 8;
            a += 8;
        }
        if i < n {
            let w = self.load_word(a).to_le_bytes();
            return w[..n - i] == other[i..];
        }
        true
    }

    /// Writes `src` at `off` with aligned word stores, merging the bytes of the edge words
    /// that lie outside `[off, off+len)`. Only the one thread that owns the space being
    /// written may call this (the bytes it merges are immutable or its own); publication
    /// (a release store of a slot) orders these stores for readers.
    #[inline]
    pub fn write_bytes(&self, off: u64, src: &[u8]) {
        let n = src.len();
        if n == 0 {
            return;
        }
        debug_assert!(off + n as u64 <= self.len);
        let off = off as usize;
        let mut a = off & !7;
        let mut i = 0;
        let head = off - a;
        if head != 0 {
            let mut w = self.load_word(a).to_le_bytes();
            let take = (8 - head).min(n);
            w[head..head + take].copy_from_slice(&src[..take]);
            self.store_word(a, u64::from_le_bytes(w));
            i = take;
            a += 8;
        }
        while n - i >= 8 {
            self.store_word(a, u64::from_le_bytes(src[i..i + 8].try_into().unwrap()));
            i += 8;
            a += 8;
        }
        if i < n {
            let mut w = self.load_word(a).to_le_bytes();
            w[..n - i].copy_from_slice(&src[i..]);
            self.store_word(a, u64::from_le_bytes(w));
        }
    }

    /// Hints the CPU to start loading the cache line at `off` (no effect on semantics).
    #[inline(always)]
    pub fn prefetch(&self, off: u64) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: prefetch never faults, whatever the address.
        unsafe {
            core::arch::x86_64::_mm_prefetch(
                self.base.add(off as usize) as *const i8,
                core::arch::x86_64::_MM_HINT_T0,
            );
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = off;
    }
}

#[cfg(shuttle)]
impl Region {
    /// A zeroed in-memory region of `len` bytes for model checking.
    pub fn new_heap(len: u64) -> Region {
        let cells = (0..len / 8).map(|_| AtomicU64::new(0)).collect();
        Region { cells, len }
    }

    pub fn word(&self, off: u64) -> &AtomicU64 {
        assert!(
            off % 8 == 0 && off + 8 <= self.len,
            "word {off:#x} out of region"
        );
        &self.cells[(off / 8) as usize]
    }

    pub fn read_bytes(&self, off: u64, dst: &mut [u8]) {
        for (i, d) in dst.iter_mut().enumerate() {
            let a = off + i as u64;
            let w = self.cells[(a / 8) as usize].load(Ordering::Relaxed);
            *d = (w >> ((a % 8) * 8)) as u8;
        }
    }

    pub fn bytes_eq(&self, off: u64, other: &[u8]) -> bool {
        let mut v = vec![0u8; other.len()];
        self.read_bytes(off, &mut v);
        v == other
    }

    pub fn write_bytes(&self, off: u64, src: &[u8]) {
        for (i, s) in src.iter().enumerate() {
            let a = off + i as u64;
            let c = &self.cells[(a / 8) as usize];
            let sh = (a % 8) * 8;
            let old = c.load(Ordering::Relaxed);
            c.store(
                (old & !(0xff << sh)) | ((*s as u64) << sh),
                Ordering::Relaxed,
            );
        }
    }

    pub fn prefetch(&self, _off: u64) {}
}
