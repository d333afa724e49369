//! The shared mapping, and the only way the rest of the engine touches it.
//!
//! Every byte of a store file may be written by another process at any moment, so Rust
//! must never hold a plain `&[u8]` or `&mut` into it: that would be a data race (UB), and
//! the compiler could assume bytes do not change under it. Instead:
//!
//! * every shared *word* (locks, sequence numbers, slots, counters, offsets) is a naturally
//!   aligned `AtomicU64` reached through [`Region::word`], as a [`SharedWord`], whose
//!   writes run the hot backup's copy-before-write hook first (`word.rs`);
//! * record *bytes* (keys and values) are read and written with atomic copies
//!   ([`Region::read_bytes`], [`Region::write_bytes`]), the technique of C++ P1478 and of
//!   the `atomic-memcpy` crate (which only handles fixed-size `T`, hence this version for
//!   runtime lengths). Every access, even to a single byte, is an aligned `AtomicU64` of
//!   the word that holds it, so no location is ever accessed with two atomic sizes; a
//!   writer merges its bytes into an edge word it shares with a neighbouring record by
//!   an atomic XOR ([`Region::merge_word`]), since that record's value may be being
//!   overwritten in place by another writer at the same moment. Readers validate what
//!   they copied with a sequence number afterwards, so a torn copy is discarded, never
//!   used;
//! * the hottest reads are loads in inline assembly, outside the Rust memory model (so no
//!   data race in its sense, whatever the writers do), as the hardware loads of the
//!   `atomic-memcpy` technique are: a bucket's sixteen words in eight vector loads
//!   ([`Region::bucket_tag_mask`]) and, on x86_64, every 8-byte window of a key compare,
//!   value copy or record header in one unaligned load ([`Region::window`]). Two aligned
//!   atomic words and the shifts that join them cost a get ~80 instructions more (of
//!   ~490), and a shorter get is a faster one at 10 M keys (docs/benchmarks/single-get.md).
//!   What such a load returns is validated like any other optimistic read. An ordered
//!   map's writer copies its pages in and out the same way, with block copies in assembly
//!   ([`Region::read_block`], [`Region::write_block`]);
//!
//! Soundness rests on two invariants that the callers keep:
//! 1. an offset passed here lies below the store's published `file_end`: every path that
//!    reads an offset from the file checks it against `Shared::file_end` before using it
//!    (debug builds, and the fuzz targets built with them, assert it on every read:
//!    [`Region::checking_file_end`]); the file end is validated against the maximum size
//!    at open and written only by growth; and the file never shrinks while mapped, so the
//!    page is backed and no `SIGBUS` can occur. Release builds do not check it again here
//!    (docs/DESIGN.md, "Known limits and open decisions", says what that would cost);
//! 2. the mapping outlives every reference handed out (references borrow `&self`).
//!
//! Under `cfg(shuttle)` the region is a heap array of shuttle's atomics, so the lock, the
//! optimistic read and the split protocols run unchanged under the randomized scheduler.

pub(crate) mod copy;
mod mapping;
mod word;
pub(crate) use mapping::{How, Mapping};
pub use word::SharedWord;

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
    /// Debug builds: whether byte reads are checked against the published file end
    /// (invariant 1). Set for store mappings ([`Region::checking_file_end`]), not for the
    /// plain buffers of this module's tests, which have no header.
    #[cfg(all(debug_assertions, not(shuttle)))]
    file_end_checked: bool,
}

// SAFETY: the region is only ever accessed through atomics (see the module comment), so
// sharing it between threads is exactly as safe as sharing the atomics themselves.
#[cfg(not(shuttle))]
unsafe impl Send for Region {}
// SAFETY: as for Send: every access is atomic.
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
        Region {
            base,
            len,
            #[cfg(debug_assertions)]
            file_end_checked: false,
        }
    }

    /// In debug builds (tests; the fuzz targets built with `cargo fuzz build -a`), makes
    /// every byte read check invariant 1 against the file end in the store's header. A
    /// read past the file end is a `SIGBUS` only when it also passes the file's last
    /// page, so a fuzzer sees only some of them; with this check, all (a checksummed
    /// record read past the file in `check` was found as a `SIGBUS`). Release builds
    /// check nothing.
    pub fn checking_file_end(self) -> Region {
        #[cfg(debug_assertions)]
        return Region {
            file_end_checked: true,
            ..self
        };
        #[cfg(not(debug_assertions))]
        self
    }

    /// See [`Region::checking_file_end`].
    #[cfg(debug_assertions)]
    #[inline]
    fn debug_check_in_file(&self, off: u64, n: u64) {
        if self.file_end_checked {
            let end = self.word(crate::format::H_FILE_END).load(Ordering::Acquire);
            assert!(
                off.checked_add(n).is_some_and(|e| e <= end),
                "a read of {n} bytes at {off:#x} passes the file end {end:#x}"
            );
        }
    }

    /// A copy of this handle, to be kept in a hot path's locals and dropped before the
    /// path returns (it must not outlive `self`, which owns nothing but is outlived by
    /// the mapping). Why: the compiler cannot tell that a field of a struct with atomics
    /// in it never changes, so it reloads `base` from memory after every acquire load or
    /// fence; a local copy stays in a register.
    #[inline(always)]
    pub fn local(&self) -> Region {
        Region {
            base: self.base,
            len: self.len,
            #[cfg(debug_assertions)]
            file_end_checked: self.file_end_checked,
        }
    }

    /// Base address, for unmapping and for faulting pages in (`pretouch`).
    pub fn base_ptr(&self) -> *mut u8 {
        self.base
    }

    /// The shared word at `off` (8-aligned, inside the region).
    #[inline(always)]
    pub fn word(&self, off: u64) -> &SharedWord {
        debug_assert!(
            off % 8 == 0 && off + 8 <= self.len,
            "word {off:#x} out of region"
        );
        // SAFETY: in bounds and aligned (asserted by every caller's layout arithmetic,
        // checked in debug builds), backed per invariant 1, and accessed only atomically.
        SharedWord::from_atomic(unsafe { &*(self.base.add(off as usize) as *const AtomicU64) })
    }

    /// The `n` shared words from `off` (8-aligned, inside the region) as one slice: a
    /// queue set's element, read and written in place by its holder.
    #[inline]
    pub fn words(&self, off: u64, n: usize) -> &[SharedWord] {
        assert!(
            off % 8 == 0 && off + 8 * n as u64 <= self.len,
            "words {off:#x}+{n} out of region"
        );
        // SAFETY: in bounds and aligned (asserted above), backed per invariant 1, and
        // every word in it accessed only atomically, as `word`'s; `SharedWord` is a
        // transparent `AtomicU64`.
        unsafe { std::slice::from_raw_parts(self.base.add(off as usize) as *const SharedWord, n) }
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

    /// Stores word `a` without the write hook: the caller ran it for the word's page
    /// ([`Region::hook_pages`]).
    #[inline(always)]
    fn store_word_hooked(&self, a: usize, w: u64) {
        // SAFETY: as for `load_word`.
        unsafe { (*(self.base.add(a) as *const AtomicU64)).store(w, Ordering::Relaxed) }
    }

    /// Runs the hot backup's write hook once for every 4 KiB page that `[off, off + n)`
    /// touches: a backup copies blocks of whole pages, so that is at least once per block
    /// the write reaches, and a value of kilobytes costs a call or two, not one a word.
    #[inline(always)]
    fn hook_pages(&self, off: u64, n: u64) {
        let mut a = off;
        while a < off + n {
            word::before_write(self.base as usize + a as usize);
            a = (a & !4095) + 4096;
        }
    }

    /// The bytes `[off, off + n)` (1 <= n <= 8, any alignment) as a little-endian `u64`;
    /// the bytes above `n` are unspecified. Loads only the aligned words that hold the
    /// requested bytes, so a window that ends at the file end never touches the word past
    /// it. Branch-free: record offsets have random alignments, and a mispredicted branch
    /// on one would stall the lookups that follow it. (The branch on `n` below folds away:
    /// every caller passes a constant.) On x86_64 a window of 8 bytes is one unaligned
    /// load of exactly those bytes ([`Region::load_unaligned`]).
    #[inline(always)]
    pub fn window(&self, off: u64, n: usize) -> u64 {
        debug_assert!((1..=8).contains(&n) && off + n as u64 <= self.len);
        #[cfg(debug_assertions)]
        self.debug_check_in_file(off, n as u64);
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        if n == 8 {
            return self.load_unaligned(off);
        }
        let a0 = (off & !7) as usize;
        // The word holding the last byte: `a0`, or `a0 + 8` when the range crosses.
        let a1 = ((off + n as u64 - 1) & !7) as usize;
        let sh = 8 * (off & 7) as u32;
        let (w0, w1) = (self.load_word(a0), self.load_word(a1));
        // `(w1 << (63 - sh)) << 1` is `w1 << (64 - sh)` without the shift by 64 when
        // `sh` is 0; when `a1 == a0` it only puts garbage above byte `n`.
        (w0 >> sh) | ((w1 << (63 - sh)) << 1)
    }

    /// The 8 bytes at `off` (any alignment, `off + 8 <= len`) in one unaligned load.
    ///
    /// The hot paths' window: every key compare, value copy and record header takes
    /// 8-byte windows, and assembling one from two aligned words costs ten instructions
    /// more than this one load.
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    #[inline(always)]
    fn load_unaligned(&self, off: u64) -> u64 {
        let p = self.base.wrapping_add(off as usize);
        let w: u64;
        // SAFETY: `[off, off + 8)` is inside the mapping and below the file end (the
        // caller's bounds, invariant 1), so the load touches only backed bytes. It is in
        // assembly, like `bucket_tag_mask`'s: outside the Rust memory model, as the
        // hardware loads of the `atomic-memcpy` technique are, so a concurrent writer's
        // stores to these bytes (atomic words, perhaps of another size) are no data race
        // in Rust's sense. On x86 an unaligned load may tear across words or lines; like
        // every optimistic read, what it returns is validated by a sequence number before
        // it is used. `readonly`, not `pure`: two calls must both load.
        unsafe {
            core::arch::asm!(
                "mov {w}, qword ptr [{p}]",
                p = in(reg) p,
                w = lateout(reg) w,
                options(nostack, preserves_flags, readonly),
            );
        }
        w
    }

    /// Copies `dst.len()` bytes starting at `off` out of the region (aligned word loads).
    ///
    /// The hot read path copies short values: eight bytes at a time through
    /// [`Region::window`], the last eight overlapping the previous ones, so no length
    /// ever reaches a `memcpy` call.
    #[inline]
    pub fn read_bytes(&self, off: u64, dst: &mut [u8]) {
        let n = dst.len();
        if n < 8 {
            if n > 0 {
                let w = self.window(off, n).to_le_bytes();
                for (d, s) in dst.iter_mut().zip(w) {
                    *d = s;
                }
            }
            return;
        }
        debug_assert!(off + n as u64 <= self.len);
        let mut i = 0;
        while n - i > 8 {
            dst[i..i + 8].copy_from_slice(&self.window(off + i as u64, 8).to_le_bytes());
            i += 8;
        }
        dst[n - 8..].copy_from_slice(&self.window(off + (n - 8) as u64, 8).to_le_bytes());
    }

    /// Copies `dst.len()` bytes starting at `off` out of the region in one block copy
    /// (`rep movsb` on x86_64): an ordered map's writer copies the used bytes of each page
    /// it changes, up to a page, where [`Region::read_bytes`]'s load per word costs twice
    /// as much. An optimistic read like any other: the caller validates what it copied.
    #[inline]
    pub fn read_block(&self, off: u64, dst: &mut [u8]) {
        debug_assert!(off + dst.len() as u64 <= self.len);
        #[cfg(debug_assertions)]
        self.debug_check_in_file(off, dst.len() as u64);
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        {
            let src = self.base.wrapping_add(off as usize);
            // SAFETY: `[off, off + len)` is inside the mapping and below the file end (the
            // caller's bounds, invariant 1), and `dst` is the caller's own buffer of that
            // length. The copy is in assembly, outside the Rust memory model, as
            // `load_unaligned`'s load is: a concurrent writer of those bytes is no data
            // race in Rust's sense. The direction flag is clear (the ABI's guarantee).
            unsafe {
                core::arch::asm!(
                    "rep movsb",
                    inout("rcx") dst.len() => _,
                    inout("rsi") src => _,
                    inout("rdi") dst.as_mut_ptr() => _,
                    options(nostack, preserves_flags),
                );
            }
        }
        #[cfg(not(all(target_arch = "x86_64", not(miri))))]
        self.read_bytes(off, dst);
    }

    /// Writes `src` at `off` in one block copy (`rep movsb` on x86_64), after the hot
    /// backup's hook for every 4 KiB the range touches (a backup copies blocks of whole
    /// pages, so that is one call per block the write reaches). Only for bytes that no
    /// other writer touches and no reader trusts before a later publication: an ordered
    /// map's new page, which no committed tree reaches until the commit that follows.
    #[inline]
    pub fn write_block(&self, off: u64, src: &[u8]) {
        let n = src.len() as u64;
        if n == 0 {
            return;
        }
        debug_assert!(off + n <= self.len);
        self.hook_pages(off, n);
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        {
            let dst = self.base.wrapping_add(off as usize);
            // SAFETY: `[off, off + n)` is inside the mapping and below the file end (the
            // caller's bounds, invariant 1), and `src` is the caller's buffer of that
            // length. The copy is in assembly, outside the Rust memory model: its stores
            // race with no Rust access in Rust's sense, and the caller owns the bytes
            // (see above), so no other writer's store is lost. The direction flag is
            // clear (the ABI's guarantee).
            unsafe {
                core::arch::asm!(
                    "rep movsb",
                    inout("rcx") src.len() => _,
                    inout("rsi") src.as_ptr() => _,
                    inout("rdi") dst => _,
                    options(nostack, preserves_flags),
                );
            }
        }
        #[cfg(not(all(target_arch = "x86_64", not(miri))))]
        self.write_bytes(off, src);
    }

    /// Replaces the contents of `dst` with the `n` bytes at `off`, reusing its allocation
    /// (no zero-fill before the copy).
    #[inline]
    pub fn read_to_vec(&self, off: u64, n: usize, dst: &mut Vec<u8>) {
        dst.clear();
        dst.reserve(n);
        let p = dst.as_mut_ptr();
        if (8..=16).contains(&n) {
            // Two words, the second overlapping the first: no loop for short values.
            let (w0, w1) = (self.window(off, 8), self.window(off + (n - 8) as u64, 8));
            // SAFETY: `8 <= n <= capacity` (reserved above); unaligned stores into the
            // Vec's own buffer, at `0..8` and `n - 8..n`.
            unsafe {
                std::ptr::write_unaligned(p as *mut [u8; 8], w0.to_le_bytes());
                std::ptr::write_unaligned(p.add(n - 8) as *mut [u8; 8], w1.to_le_bytes());
            }
        } else if n >= 8 {
            // Whole words, the last one overlapping the one before (no tail loop).
            let mut i = 0;
            while n - i > 8 {
                let w = self.window(off + i as u64, 8).to_le_bytes();
                // SAFETY: `i + 8 < n <= capacity` (reserved above); unaligned store into
                // the Vec's own buffer.
                unsafe { std::ptr::write_unaligned(p.add(i) as *mut [u8; 8], w) };
                i += 8;
            }
            let w = self.window(off + (n - 8) as u64, 8).to_le_bytes();
            // SAFETY: `n - 8 + 8 = n <= capacity`.
            unsafe { std::ptr::write_unaligned(p.add(n - 8) as *mut [u8; 8], w) };
        } else if n > 0 {
            let w = self.window(off, n).to_le_bytes();
            for (j, b) in w.into_iter().take(n).enumerate() {
                // SAFETY: `j < n <= capacity`.
                unsafe { p.add(j).write(b) };
            }
        }
        // SAFETY: the stores above initialized exactly the first `n` bytes, and `n` is
        // within the capacity reserved above.
        unsafe { dst.set_len(n) };
    }

    /// Compares the bytes at `off` with `other` (aligned word loads, no copy).
    #[inline]
    pub fn bytes_eq(&self, off: u64, other: &[u8]) -> bool {
        let n = other.len();
        if n < 8 {
            if n == 0 {
                return true;
            }
            let mut v = 0u64;
            for (j, &b) in other.iter().enumerate() {
                v |= (b as u64) << (8 * j);
            }
            let mask = u64::MAX >> (64 - 8 * n);
            return (self.window(off, n) ^ v) & mask == 0;
        }
        debug_assert!(off + n as u64 <= self.len);
        let word = |i: usize| u64::from_le_bytes(other[i..i + 8].try_into().unwrap());
        if n <= 16 {
            // Two windows, the second overlapping the first: no loop for short keys.
            return (self.window(off, 8) ^ word(0))
                | (self.window(off + (n - 8) as u64, 8) ^ word(n - 8))
                == 0;
        }
        let mut i = 0;
        while n - i > 8 {
            if self.window(off + i as u64, 8) != word(i) {
                return false;
            }
            i += 8;
        }
        self.window(off + (n - 8) as u64, 8) == word(n - 8)
    }

    /// Writes `src` at `off` with aligned word stores, after the hot backup's hook for
    /// every page the range touches; an edge word that holds bytes outside
    /// `[off, off+len)` gets only its own bytes, merged in ([`Region::merge_word`]).
    /// Only the one thread that owns the bytes being written may call this (space it is
    /// filling, or a value it holds the lock of); publication (a release store of a slot,
    /// a sequence number) orders these stores for readers.
    #[inline]
    pub fn write_bytes(&self, off: u64, src: &[u8]) {
        let n = src.len();
        if n == 0 {
            return;
        }
        debug_assert!(off + n as u64 <= self.len);
        self.hook_pages(off, n as u64);
        let mut a = off & !7;
        let mut i = 0;
        let head = (off - a) as usize;
        if head != 0 {
            let take = (8 - head).min(n);
            let bits = le_bits(&src[..take]) << (8 * head);
            self.merge_word(a, bits, byte_mask(take) << (8 * head));
            i = take;
            a += 8;
        }
        while n - i >= 8 {
            self.store_word_hooked(
                a as usize,
                u64::from_le_bytes(src[i..i + 8].try_into().unwrap()),
            );
            i += 8;
            a += 8;
        }
        if i < n {
            let rest = n - i;
            self.merge_word(a, le_bits(&src[i..]), byte_mask(rest));
        }
    }

    /// Sets the bytes of the word at `off` (8-aligned, inside the region) that `mask`
    /// selects to those of `bits`, and leaves the others as they are at that instant.
    ///
    /// One atomic XOR of the difference, not a load and a store: the other bytes of an
    /// edge word belong to a neighbouring record, whose value another writer (holding that
    /// key's lock, not ours) may be overwriting in place at the same moment, and a plain
    /// store of the merged word would undo its change. The XOR is exact because the
    /// masked bytes are the caller's: nobody else writes them while it does. Release, like
    /// the plain stores of a redo list: a value overwritten in place must not be seen
    /// changing before the odd sequence number that announces it.
    #[inline]
    pub fn merge_word(&self, off: u64, bits: u64, mask: u64) {
        debug_assert!(off % 8 == 0 && off + 8 <= self.len);
        let w = self.word(off);
        let diff = (w.load(Ordering::Relaxed) ^ bits) & mask;
        if diff != 0 {
            w.fetch_xor(diff, Ordering::Release);
        }
    }

    /// Which of the 15 slots of the 128-byte bucket at `bo` (128-aligned, inside the
    /// region) hold `tag` in their top 16 bits: bit `i` for slot `i` (the bucket's words
    /// 1..16; word 0 is its header).
    ///
    /// A hint, not a read of the slots: the bucket is loaded with eight 16-byte vector
    /// loads, which a concurrent writer's stores may tear. Callers re-load every candidate
    /// slot atomically and validate the bucket's sequence number before trusting anything,
    /// so a torn load costs at most a wasted candidate or a retry. This replaces a loop of
    /// 15 word loads and compares (~180 instructions) by ~25: the lookup's hot spot.
    #[inline(always)]
    pub fn bucket_tag_mask(&self, bo: u64, tag: u64) -> u32 {
        debug_assert!(bo % 128 == 0 && bo + 128 <= self.len, "bucket {bo:#x}");
        #[cfg(debug_assertions)]
        self.debug_check_in_file(bo, 128);
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        {
            use core::arch::asm;
            use core::arch::x86_64::{
                __m128i, _mm_castps_si128, _mm_castsi128_ps, _mm_cmpeq_epi16, _mm_movemask_epi8,
                _mm_packs_epi16, _mm_packs_epi32, _mm_set1_epi16, _mm_shuffle_ps,
            };
            let p = self.base.wrapping_add(bo as usize);
            let (v0, v1, v2, v3, v4, v5, v6, v7): (
                __m128i,
                __m128i,
                __m128i,
                __m128i,
                __m128i,
                __m128i,
                __m128i,
                __m128i,
            );
            // SAFETY: `p..p + 128` is inside the mapping (a bucket of a segment the caller
            // bounds-checked against the published file end: invariant 1) and 16-aligned
            // (buckets are 128-aligned), as `movdqa` requires. The loads are in assembly,
            // not Rust: outside the Rust memory model, like the hardware loads of the
            // `atomic-memcpy` technique, so a concurrent writer is no data race in Rust's
            // sense; what they return is only a hint (see above). `readonly`: nothing is
            // written; not `pure`: two calls must both load.
            unsafe {
                asm!(
                    "movdqa {v0}, xmmword ptr [{p}]",
                    "movdqa {v1}, xmmword ptr [{p} + 16]",
                    "movdqa {v2}, xmmword ptr [{p} + 32]",
                    "movdqa {v3}, xmmword ptr [{p} + 48]",
                    "movdqa {v4}, xmmword ptr [{p} + 64]",
                    "movdqa {v5}, xmmword ptr [{p} + 80]",
                    "movdqa {v6}, xmmword ptr [{p} + 96]",
                    "movdqa {v7}, xmmword ptr [{p} + 112]",
                    p = in(reg) p,
                    v0 = out(xmm_reg) v0,
                    v1 = out(xmm_reg) v1,
                    v2 = out(xmm_reg) v2,
                    v3 = out(xmm_reg) v3,
                    v4 = out(xmm_reg) v4,
                    v5 = out(xmm_reg) v5,
                    v6 = out(xmm_reg) v6,
                    v7 = out(xmm_reg) v7,
                    options(nostack, preserves_flags, readonly),
                );
            }
            // Each word's tag is the top half of its high dword. `shufps` gathers the high
            // dwords of four words into one vector; equal 16-bit lanes become all ones.
            // Two signed packs then narrow each dword to a byte whose sign bit is its top
            // lane's (a dword whose top lane is all ones is negative, and saturation keeps
            // the sign; one whose top lane is zero saturates to a positive value), and
            // `pmovmskb` takes one bit per word. ~20 instructions for the bucket's 16 words.
            // SAFETY: SSE and SSE2 are part of the x86_64 baseline: always available.
            unsafe {
                let t = _mm_set1_epi16(tag as u16 as i16);
                let high = |a: __m128i, b: __m128i| {
                    let v = _mm_castps_si128(_mm_shuffle_ps::<0xdd>(
                        _mm_castsi128_ps(a),
                        _mm_castsi128_ps(b),
                    ));
                    _mm_cmpeq_epi16(v, t)
                };
                let lo = _mm_packs_epi32(high(v0, v1), high(v2, v3));
                let hi = _mm_packs_epi32(high(v4, v5), high(v6, v7));
                let words = _mm_movemask_epi8(_mm_packs_epi16(lo, hi)) as u32;
                words >> 1
            }
        }
        #[cfg(not(all(target_arch = "x86_64", not(miri))))]
        {
            let mut mask = 0u32;
            for i in 0..15 {
                let s = self.load_word((bo + 8 + 8 * i) as usize);
                mask |= (((s >> 48) == tag) as u32) << i;
            }
            mask
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

/// Hints the CPU to start loading the cache line holding `p`, which may point anywhere
/// (the caller's memory: a batch's keys). No effect on semantics.
#[inline(always)]
pub fn prefetch_ptr(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch never faults, whatever the address.
    unsafe {
        core::arch::x86_64::_mm_prefetch(p as *const i8, core::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// [`prefetch_ptr`] of the first byte of each key.
#[inline]
pub fn prefetch_keys(keys: &[&[u8]]) {
    for k in keys {
        prefetch_ptr(k.as_ptr());
    }
}

/// Bytes `0..n` of a word set (`n` <= 8).
#[cfg(not(shuttle))]
#[inline(always)]
fn byte_mask(n: usize) -> u64 {
    debug_assert!(n <= 8);
    if n >= 8 {
        u64::MAX
    } else {
        (1u64 << (8 * n)) - 1
    }
}

/// `b` (at most 8 bytes) as a little-endian integer, without a variable-length `memcpy`:
/// two overlapping loads of the largest power-of-two size that fits.
#[inline(always)]
pub(crate) fn le_bits(b: &[u8]) -> u64 {
    let n = b.len();
    debug_assert!(n <= 8);
    if n >= 4 {
        let lo = u32::from_le_bytes(b[..4].try_into().unwrap()) as u64;
        let hi = u32::from_le_bytes(b[n - 4..].try_into().unwrap()) as u64;
        lo | hi << (8 * (n - 4))
    } else if n >= 2 {
        let lo = u16::from_le_bytes(b[..2].try_into().unwrap()) as u64;
        let hi = u16::from_le_bytes(b[n - 2..].try_into().unwrap()) as u64;
        lo | hi << (8 * (n - 2))
    } else if n == 1 {
        b[0] as u64
    } else {
        0
    }
}

/// Records up to this many bytes have their checksum computed from 8-byte windows
/// ([`Region::crc32c`]); longer ones from copies, with the `crc32c` crate's three-way
/// interleaved loop, which is faster once there are a few hundred bytes.
const CRC_WINDOWED_MAX: u64 = 256;

impl Region {
    /// The CRC32C (Castagnoli) of the bytes `[off, off + n)`, as `crc32c::crc32c` of a
    /// copy of them would be. An optimistic read like any other: what it read must be
    /// validated before the result means anything.
    ///
    /// A short record's bytes go straight from 8-byte windows into SSE 4.2's `crc32`
    /// instruction (every x86_64 since 2008 has it; checked at run time): a copy into a
    /// buffer and the crate's setup cost a 34-byte record ~230 instructions, this ~80
    /// (callgrind).
    pub fn crc32c(&self, off: u64, n: u64) -> u32 {
        #[cfg(all(target_arch = "x86_64", not(miri), not(shuttle)))]
        if n <= CRC_WINDOWED_MAX && std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU has SSE 4.2 (checked just above).
            return unsafe { self.crc32c_sse42(off, n) };
        }
        let mut buf = [0u8; 4096];
        let (mut crc, mut done) = (0u32, 0u64);
        while done < n {
            let k = (n - done).min(buf.len() as u64) as usize;
            self.read_bytes(off + done, &mut buf[..k]);
            crc = crc32c::crc32c_append(crc, &buf[..k]);
            done += k as u64;
        }
        crc
    }
}

#[cfg(all(target_arch = "x86_64", not(miri), not(shuttle)))]
impl Region {
    /// [`Region::crc32c`] with the `crc32` instruction, 8 bytes at a time.
    ///
    /// # Safety
    /// The CPU must have SSE 4.2.
    // The intrinsics are unsafe to call up to Rust 1.86 (the workspace's rust-version is
    // 1.85) and safe here from 1.87 on, where the blocks below are then "unnecessary".
    #[allow(unused_unsafe)]
    #[target_feature(enable = "sse4.2")]
    unsafe fn crc32c_sse42(&self, off: u64, n: u64) -> u32 {
        use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};
        let mut c = u64::from(!0u32);
        let mut i = 0;
        while n - i >= 8 {
            // SAFETY: the caller guarantees SSE 4.2; the intrinsic has no other condition.
            c = unsafe { _mm_crc32_u64(c, self.window(off + i, 8)) };
            i += 8;
        }
        if i < n {
            // The last 1 to 7 bytes, from one window of exactly those bytes.
            let w = self.window(off + i, (n - i) as usize);
            for j in 0..n - i {
                // SAFETY: as above.
                c = u64::from(unsafe { _mm_crc32_u8(c as u32, (w >> (8 * j)) as u8) });
            }
        }
        !(c as u32)
    }
}

#[cfg(shuttle)]
impl Region {
    /// A zeroed in-memory region of `len` bytes for model checking.
    pub fn new_heap(len: u64) -> Region {
        let cells = (0..len / 8).map(|_| AtomicU64::new(0)).collect();
        Region { cells, len }
    }

    /// The region's first byte: what names it in the write hook's registry.
    pub fn base_ptr(&self) -> *mut u8 {
        self.cells.as_ptr() as *mut u8
    }

    pub fn word(&self, off: u64) -> &SharedWord {
        assert!(
            off % 8 == 0 && off + 8 <= self.len,
            "word {off:#x} out of region"
        );
        SharedWord::from_atomic(&self.cells[(off / 8) as usize])
    }

    pub fn words(&self, off: u64, n: usize) -> &[SharedWord] {
        assert!(off % 8 == 0 && off + 8 * n as u64 <= self.len);
        let cells = &self.cells[(off / 8) as usize..(off / 8) as usize + n];
        // SAFETY: `SharedWord` is a transparent `AtomicU64` (shuttle's, here).
        unsafe { &*(cells as *const [AtomicU64] as *const [SharedWord]) }
    }

    pub fn read_bytes(&self, off: u64, dst: &mut [u8]) {
        for (i, d) in dst.iter_mut().enumerate() {
            let a = off + i as u64;
            let w = self.cells[(a / 8) as usize].load(Ordering::Relaxed);
            *d = (w >> ((a % 8) * 8)) as u8;
        }
    }

    pub fn window(&self, off: u64, n: usize) -> u64 {
        let mut b = [0u8; 8];
        self.read_bytes(off, &mut b[..n]);
        u64::from_le_bytes(b)
    }

    pub fn read_to_vec(&self, off: u64, n: usize, dst: &mut Vec<u8>) {
        dst.clear();
        dst.resize(n, 0);
        self.read_bytes(off, dst);
    }

    pub fn bytes_eq(&self, off: u64, other: &[u8]) -> bool {
        let mut v = vec![0u8; other.len()];
        self.read_bytes(off, &mut v);
        v == other
    }

    pub fn write_bytes(&self, off: u64, src: &[u8]) {
        for (i, s) in src.iter().enumerate() {
            let a = off + i as u64;
            let sh = (a % 8) * 8;
            self.merge_word(a & !7, (*s as u64) << sh, 0xff << sh);
        }
    }

    pub fn read_block(&self, off: u64, dst: &mut [u8]) {
        self.read_bytes(off, dst);
    }

    pub fn write_block(&self, off: u64, src: &[u8]) {
        self.write_bytes(off, src);
    }

    pub fn merge_word(&self, off: u64, bits: u64, mask: u64) {
        let w = self.word(off);
        let diff = (w.load(Ordering::Relaxed) ^ bits) & mask;
        if diff != 0 {
            w.fetch_xor(diff, Ordering::Release);
        }
    }

    /// See the other [`Region::local`]: here the handle itself (a heap array).
    pub fn local(&self) -> &Region {
        self
    }

    pub fn bucket_tag_mask(&self, bo: u64, tag: u64) -> u32 {
        let mut mask = 0u32;
        for i in 0..15 {
            let s = self.word(bo + 8 + 8 * i).load(Ordering::Relaxed);
            mask |= (((s >> 48) == tag) as u32) << i;
        }
        mask
    }

    pub fn prefetch(&self, _off: u64) {}
}

#[cfg(all(test, not(shuttle)))]
mod tests {
    use super::Region;
    use std::alloc::{alloc_zeroed, dealloc, Layout};

    /// Every offset and length near both ends of a small region, against plain slices:
    /// the word-window copies must neither misplace a byte nor touch a word past the end
    /// (the region is exactly its allocation, so Miri or ASan would flag that).
    #[test]
    fn windows_copies_and_compares_match_plain_slices() {
        const LEN: usize = 64;
        let layout = Layout::from_size_align(LEN, 4096).unwrap();
        // SAFETY: a fresh zeroed allocation of LEN bytes, 4096-aligned, used only through
        // the region (atomics) until it is freed at the end of the test.
        let base = unsafe { alloc_zeroed(layout) };
        assert!(!base.is_null());
        // SAFETY: the allocation above outlives `r`, and is reached only through it.
        let r = unsafe { Region::from_raw(base, LEN as u64) };
        let reference: Vec<u8> = (0..LEN)
            .map(|i| (i as u8).wrapping_mul(37) ^ 0x5a)
            .collect();
        r.write_bytes(0, &reference);
        for off in 0..LEN {
            for n in 0..=(LEN - off).min(40) {
                let want = &reference[off..off + n];
                let mut got = vec![0xeeu8; n];
                r.read_bytes(off as u64, &mut got);
                assert_eq!(got, want, "read_bytes off {off} n {n}");
                let mut v = vec![1, 2, 3];
                r.read_to_vec(off as u64, n, &mut v);
                assert_eq!(v, want, "read_to_vec off {off} n {n}");
                assert!(r.bytes_eq(off as u64, want), "bytes_eq off {off} n {n}");
                if n > 0 {
                    let mut other = want.to_vec();
                    other[n - 1] ^= 1;
                    assert!(
                        !r.bytes_eq(off as u64, &other),
                        "bytes_eq last byte {off} {n}"
                    );
                    other[n - 1] ^= 1;
                    other[0] ^= 0x80;
                    assert!(
                        !r.bytes_eq(off as u64, &other),
                        "bytes_eq first byte {off} {n}"
                    );
                }
                // Short keys are compared as two overlapping words: a byte anywhere in
                // them must count.
                if n <= 16 {
                    for j in 0..n {
                        let mut other = want.to_vec();
                        other[j] ^= 0x10;
                        assert!(
                            !r.bytes_eq(off as u64, &other),
                            "bytes_eq byte {j} of {n} at {off}"
                        );
                    }
                }
                if (1..=8).contains(&n) {
                    let w = r.window(off as u64, n).to_le_bytes();
                    assert_eq!(&w[..n], want, "window off {off} n {n}");
                }
            }
        }
        // Writes that merge edge words leave the neighbours alone.
        r.write_bytes(13, b"abcdefghijk");
        let mut all = vec![0u8; LEN];
        r.read_bytes(0, &mut all);
        let mut expect = reference.clone();
        expect[13..24].copy_from_slice(b"abcdefghijk");
        assert_eq!(all, expect);
        // SAFETY: allocated above with this layout; the region is not used past here.
        unsafe { dealloc(base, layout) };
    }

    /// Block copies (a page's used bytes, in and out) move exactly their bytes, at any
    /// offset and length, across a page boundary too, and leave the bytes around alone.
    #[test]
    fn block_copies_move_exactly_their_bytes() {
        const LEN: usize = 3 * 4096;
        let layout = Layout::from_size_align(LEN, 4096).unwrap();
        // SAFETY: as in the test above.
        let base = unsafe { alloc_zeroed(layout) };
        assert!(!base.is_null());
        // SAFETY: the allocation above outlives `r`, and is reached only through it.
        let r = unsafe { Region::from_raw(base, LEN as u64) };
        let reference: Vec<u8> = (0..LEN).map(|i| (i % 251) as u8 ^ 0xa5).collect();
        r.write_bytes(0, &reference);
        let mut expect = reference.clone();
        let cases = [
            (0, 0),
            (0, 1),
            (3, 61),
            (64, 4096),
            (4000, 200),
            (4095, 4097),
            (8191, 1),
        ];
        for (k, (off, n)) in cases.into_iter().enumerate() {
            let mut got = vec![0xeeu8; n];
            r.read_block(off as u64, &mut got);
            assert_eq!(got, &expect[off..off + n], "read_block off {off} n {n}");
            let src: Vec<u8> = (0..n).map(|i| (i * 7 + k) as u8).collect();
            r.write_block(off as u64, &src);
            expect[off..off + n].copy_from_slice(&src);
            let mut all = vec![0u8; LEN];
            r.read_bytes(0, &mut all);
            assert!(all == expect, "write_block off {off} n {n}");
        }
        // SAFETY: allocated above with this layout; the region is not used past here.
        unsafe { dealloc(base, layout) };
    }

    /// The checksum of every range near the ends of a region, windowed (short) or copied
    /// (long), is the `crc32c` crate's of the same bytes.
    #[test]
    fn crc32c_matches_the_crate() {
        const LEN: usize = 640;
        let layout = Layout::from_size_align(LEN, 4096).unwrap();
        // SAFETY: as in the test above.
        let base = unsafe { alloc_zeroed(layout) };
        assert!(!base.is_null());
        // SAFETY: the allocation above outlives `r`, and is reached only through it.
        let r = unsafe { Region::from_raw(base, LEN as u64) };
        let reference: Vec<u8> = (0..LEN)
            .map(|i| (i as u8).wrapping_mul(73) ^ 0x3c)
            .collect();
        r.write_bytes(0, &reference);
        for off in (0..24).chain(LEN - 24..LEN) {
            for n in (0..=40).chain(250..=262).chain(600..=LEN) {
                if off + n > LEN {
                    continue;
                }
                assert_eq!(
                    r.crc32c(off as u64, n as u64),
                    crc32c::crc32c(&reference[off..off + n]),
                    "off {off} n {n}"
                );
            }
        }
        // SAFETY: allocated above with this layout; the region is not used past here.
        unsafe { dealloc(base, layout) };
    }

    /// Every offset and length of a write near the edges of words, against a plain
    /// slice: the merged edge words keep their other bytes.
    #[test]
    fn writes_keep_the_bytes_around_them() {
        const LEN: usize = 64;
        let layout = Layout::from_size_align(LEN, 4096).unwrap();
        // SAFETY: as in the test above.
        let base = unsafe { alloc_zeroed(layout) };
        assert!(!base.is_null());
        // SAFETY: the allocation above outlives `r`, and is reached only through it.
        let r = unsafe { Region::from_raw(base, LEN as u64) };
        let mut reference: Vec<u8> = (0..LEN)
            .map(|i| (i as u8).wrapping_mul(101) ^ 0xa5)
            .collect();
        r.write_bytes(0, &reference);
        for off in 0..24 {
            for n in 0..=(LEN - off).min(40) {
                let src: Vec<u8> = (0..n).map(|j| (off * 7 + j * 13 + n) as u8 | 1).collect();
                r.write_bytes(off as u64, &src);
                reference[off..off + n].copy_from_slice(&src);
                let mut all = vec![0u8; LEN];
                r.read_bytes(0, &mut all);
                assert_eq!(all, reference, "write_bytes off {off} n {n}");
            }
        }
        // SAFETY: allocated above with this layout; the region is not used past here.
        unsafe { dealloc(base, layout) };
    }

    /// The vector tag scan against a word-by-word one, on buckets full of near misses
    /// (tags differing in one bit, in either byte, and equal low halves).
    #[test]
    fn bucket_tag_mask_matches_word_by_word_compare() {
        const LEN: usize = 4096;
        let layout = Layout::from_size_align(LEN, 4096).unwrap();
        // SAFETY: as in the test above.
        let base = unsafe { alloc_zeroed(layout) };
        assert!(!base.is_null());
        // SAFETY: the allocation above outlives `r`, and is reached only through it.
        let r = unsafe { Region::from_raw(base, LEN as u64) };
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..2000 {
            let bo = 128 * (round % (LEN as u64 / 128));
            let tag = next() >> 48;
            for w in 0..16 {
                let low = next() & ((1 << 48) - 1);
                let t = match next() % 5 {
                    0 => tag,
                    1 => tag ^ (1 << (next() % 16)),
                    2 => 0,
                    3 => (low >> 32) & 0xffff, // the tag's value in the wrong lane
                    _ => next() >> 48,
                };
                let v = if next() % 7 == 0 {
                    tag << 32 | t << 48
                } else {
                    t << 48 | low
                };
                r.word(bo + 8 * w)
                    .store(v, std::sync::atomic::Ordering::Relaxed);
            }
            let mut want = 0u32;
            for i in 0..15 {
                let s = r
                    .word(bo + 8 + 8 * i)
                    .load(std::sync::atomic::Ordering::Relaxed);
                want |= (((s >> 48) == tag) as u32) << i;
            }
            assert_eq!(r.bucket_tag_mask(bo, tag), want, "round {round}");
        }
        // SAFETY: allocated above with this layout; the region is not used past here.
        unsafe { dealloc(base, layout) };
    }
}
