//! The shared mapping, and the only way the rest of the engine touches it.
//!
//! Every byte of a store file may be written by another process at any moment, so Rust
//! must never hold a plain `&[u8]` or `&mut` into it: that would be a data race (UB), and
//! the compiler could assume bytes do not change under it. Instead:
//!
//! * every shared *word* (locks, sequence numbers, slots, counters, offsets) is a naturally
//!   aligned `AtomicU64` reached through [`Region::word`];
//! * record *bytes* (keys and values) are read and written with byte-wise atomic copies
//!   ([`Region::read_bytes`], [`Region::write_bytes`]), the technique of C++ P1478 and of
//!   the `atomic-memcpy` crate (which only handles fixed-size `T`, hence this version for
//!   runtime lengths). Readers validate what they copied with a sequence number
//!   afterwards, so a torn copy is discarded, never used.
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
pub use std::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicU8};

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

    /// Copies `dst.len()` bytes starting at `off` out of the region, byte-wise atomically.
    #[inline]
    pub fn read_bytes(&self, off: u64, dst: &mut [u8]) {
        debug_assert!(off + dst.len() as u64 <= self.len);
        let mut p = off as usize;
        let mut i = 0;
        let n = dst.len();
        // SAFETY: every address below is in `[off, off+n)`, inside the region (invariant 1),
        // and read through an atomic of its natural alignment.
        unsafe {
            while i < n && (p % 8 != 0 || n - i < 8) {
                dst[i] = (*(self.base.add(p) as *const AtomicU8)).load(Ordering::Relaxed);
                i += 1;
                p += 1;
            }
            while n - i >= 8 {
                let w = (*(self.base.add(p) as *const AtomicU64)).load(Ordering::Relaxed);
                dst[i..i + 8].copy_from_slice(&w.to_le_bytes());
                i += 8;
                p += 8;
            }
            while i < n {
                dst[i] = (*(self.base.add(p) as *const AtomicU8)).load(Ordering::Relaxed);
                i += 1;
                p += 1;
            }
        }
    }

    /// Compares the bytes at `off` with `other`, reading byte-wise atomically.
    #[inline]
    pub fn bytes_eq(&self, off: u64, other: &[u8]) -> bool {
        let mut buf = [0u8; 64];
        let mut done = 0;
        while done < other.len() {
            let n = (other.len() - done).min(64);
            self.read_bytes(off + done as u64, &mut buf[..n]);
            if buf[..n] != other[done..done + n] {
                return false;
            }
            done += n;
        }
        true
    }

    /// Writes `src` at `off`, byte-wise atomically (release is given by the publishing
    /// store that follows, never by these writes).
    #[inline]
    pub fn write_bytes(&self, off: u64, src: &[u8]) {
        debug_assert!(off + src.len() as u64 <= self.len);
        let mut p = off as usize;
        let mut i = 0;
        let n = src.len();
        // SAFETY: as in `read_bytes`.
        unsafe {
            while i < n && (p % 8 != 0 || n - i < 8) {
                (*(self.base.add(p) as *const AtomicU8)).store(src[i], Ordering::Relaxed);
                i += 1;
                p += 1;
            }
            while n - i >= 8 {
                let w = u64::from_le_bytes(src[i..i + 8].try_into().unwrap());
                (*(self.base.add(p) as *const AtomicU64)).store(w, Ordering::Relaxed);
                i += 8;
                p += 8;
            }
            while i < n {
                (*(self.base.add(p) as *const AtomicU8)).store(src[i], Ordering::Relaxed);
                i += 1;
                p += 1;
            }
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

impl Region {
    /// Reserved length of the region in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }
}
