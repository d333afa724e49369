//! The page of an ordered map's B+tree: a slotted page of 4 KiB, leaf or branch.
//!
//! Layout (all integers little-endian):
//!
//! ```text
//!  0  u16 kind        1 = leaf, 2 = branch
//!  2  u16 n           entries
//!  4  u16 heap_lo     the entries' bytes occupy [heap_lo, PAGE)
//!  6  u16 dead        bytes of the heap no entry uses (reclaimed by compaction)
//!  8  u16 plen        bytes every key of the page begins with (0 to PLEN_MAX)
//! 10  u16, u32        0
//! 16  u64 child0      branch: the leftmost child (keys below the first separator)
//! 24  u64 count0      branch: the number of entries under child0
//! 32  slots           n x 8 bytes, sorted by key: u16 off, u16 klen, u32 head
//! ```
//!
//! `head` is the four bytes of the key that follow the page's common prefix (its first
//! `plen` bytes, the same in every key of the page), read big-endian (zero-padded), so a
//! binary search compares integers in the slot array, which is contiguous, and reads a
//! key's bytes only when heads tie: most of a search's compares touch one or two cache
//! lines. Without the prefix, keys that share their first bytes (`user:…`, a counter
//! printed with leading zeros) tie on every head, and every compare of a search would
//! read a key from the heap, a cache miss of its own. A leaf entry
//! at `off` is `u32 vlen, key, value` (with bit 31 of `vlen` set, [`OUT_OF_LINE`], the
//! value is a 16-byte reference to overflow pages: u64 first page, u64 length); a branch
//! entry is `key, u64 child, u64 count`, the
//! child holding the keys from its separator up to the next one, and `count` the entries
//! under it (a counted B+tree: `count_range` is exact in O(log n)).
//!
//! A key longer than [`KEY_INLINE_MAX`] is kept out of line: bit 15 of its slot's `klen`
//! ([`KEY_OUT`]) is set, and the entry's key bytes are its first [`KEY_PREFIX`] bytes and
//! a 16-byte reference (u64 first page, u64 length) to overflow pages that hold the whole
//! key. A compare reads the prefix first and follows the reference only on a tie, through
//! a [`KeyRest`] (the pages are the tree's business, not the page's).
//!
//! The writer edits pages in its own buffers ([`PageBuf`]) and copies them into the file
//! at commit; readers search pages in the file through [`PageRead`], since a committed page
//! never changes until no snapshot can reach it.

use std::cmp::Ordering;

/// The size of a page.
pub const PAGE: usize = 4096;
/// Bytes before the slot array.
pub const HDR: usize = 32;
/// Bytes of one slot.
pub const SLOT: usize = 8;
/// The longest common prefix a page records: a key kept out of line keeps its first
/// [`KEY_PREFIX`] bytes in the page, and its head (the four bytes past the prefix) must
/// come from them.
pub const PLEN_MAX: usize = KEY_PREFIX - 4;

/// Page kinds (header word 0).
pub const LEAF: u16 = 1;
/// See [`LEAF`].
pub const BRANCH: u16 = 2;
/// A page of a value kept out of line: u16 kind, u16 0, u32 bytes of the value in this
/// page, u64 the next page of the value (0 for the last), then the bytes, from
/// [`OVERFLOW_HDR`].
pub const OVERFLOW: u16 = 3;
/// Bytes before an overflow page's share of its value.
pub const OVERFLOW_HDR: usize = 16;
/// Bit of a leaf entry's `vlen`: its value is a reference to overflow pages.
pub const OUT_OF_LINE: u32 = 1 << 31;
/// Bytes of such a reference: u64 first page, u64 the value's length.
pub const VALUE_REF: usize = 16;
/// Bit of a slot's `klen`: the entry's key is kept out of line.
pub const KEY_OUT: u16 = 1 << 15;
/// The longest key a page keeps whole (with a reference to a value kept out of line, an
/// entry of the most bytes a leaf keeps inline).
pub const KEY_INLINE_MAX: usize = 984;
/// Bytes of an out-of-line key that its entry keeps, to settle most compares in the page.
pub const KEY_PREFIX: usize = 64;
/// The key bytes of an entry whose key is out of line: the prefix and the reference.
pub const KEY_REF: usize = KEY_PREFIX + 16;
/// The longest key a tree may hold (a multimap's pair of the longest key, escaped, and
/// the longest value is below it): a key reference to more is corrupt, and is not
/// followed.
pub const MAX_TREE_KEY: usize = 64 * 1024;

/// Reads the whole of a key kept out of line: (first page, length) to its bytes; `None`
/// if they cannot be read (a corrupt chain, or a reader that must not follow it), and
/// then the compare's answer is unspecified (the caller knows to distrust it).
pub trait KeyRest {
    /// The key at `first` of `len` bytes.
    fn whole_key(&self, first: u64, len: u64) -> Option<Vec<u8>>;
}

impl<F: Fn(u64, u64) -> Option<Vec<u8>>> KeyRest for F {
    fn whole_key(&self, first: u64, len: u64) -> Option<Vec<u8>> {
        self(first, len)
    }
}

/// The head of a key: its first four bytes, big-endian, zero-padded.
#[inline]
pub fn head(key: &[u8]) -> u32 {
    // One branch on the length, no loop and no copy of a variable length (a call to
    // `memcpy`): a page's check takes the head of every key it holds, and past a page's
    // prefix many keys have fewer than four bytes left.
    match *key {
        [a, b, c, d, ..] => u32::from_be_bytes([a, b, c, d]),
        [a, b, c] => u32::from_be_bytes([a, b, c, 0]),
        [a, b] => u32::from_be_bytes([a, b, 0, 0]),
        [a] => u32::from_be_bytes([a, 0, 0, 0]),
        [] => 0,
    }
}

/// Read access to a page, wherever it is.
pub trait PageRead {
    /// The `u16` at byte `at` of the page.
    fn u16_at(&self, at: usize) -> u16;
    /// The `u32` at byte `at`.
    fn u32_at(&self, at: usize) -> u32;
    /// The `u64` at byte `at`.
    fn u64_at(&self, at: usize) -> u64;
    /// Compares the `len` bytes at `at` with `key`.
    fn cmp_bytes(&self, at: usize, len: usize, key: &[u8]) -> Ordering;
    /// Copies the `dst.len()` bytes at `at` into `dst`.
    fn copy_out(&self, at: usize, dst: &mut [u8]);

    /// The page's kind.
    fn kind(&self) -> u16 {
        self.u16_at(0)
    }
    /// The number of entries.
    fn n(&self) -> usize {
        self.u16_at(2) as usize
    }
    /// The bytes every key of the page begins with (clamped to [`PLEN_MAX`], so that a
    /// corrupt page cannot send a read past a key).
    #[inline]
    fn plen(&self) -> usize {
        (self.u16_at(8) as usize).min(PLEN_MAX)
    }
    /// The head a slot of this page has for `key`: the four bytes past the page's
    /// prefix (meaningful in a compare only if `key` begins with the prefix).
    #[inline]
    fn head_of(&self, key: &[u8]) -> u32 {
        head(key.get(self.plen()..).unwrap_or_default())
    }
    /// Entry `i`'s key bytes in the page: (offset, length), never past the page (a page
    /// of a corrupt file may say otherwise; a valid one never does). For a key kept out
    /// of line, its prefix and reference.
    #[inline]
    fn key_at(&self, i: usize) -> (usize, usize) {
        let (at, len, _) = self.key_at_out(i);
        (at, len)
    }
    /// [`PageRead::key_at`], and whether the key is kept out of line, from one read of
    /// the slot's `klen`.
    #[inline]
    fn key_at_out(&self, i: usize) -> (usize, usize, bool) {
        let s = HDR + SLOT * i;
        let off = self.u16_at(s) as usize;
        let raw = self.u16_at(s + 2);
        let klen = (raw & !KEY_OUT) as usize;
        let data = (if self.kind() == LEAF { off + 4 } else { off }).min(PAGE);
        (data, klen.min(PAGE - data), raw & KEY_OUT != 0)
    }
    /// Whether entry `i`'s key is kept out of line.
    fn key_out(&self, i: usize) -> bool {
        self.u16_at(HDR + SLOT * i + 2) & KEY_OUT != 0
    }
    /// Entry `i`'s reference to the overflow pages of its key (first page, length), if
    /// its key is kept out of line.
    fn key_ref(&self, i: usize) -> Option<(u64, u64)> {
        if !self.key_out(i) {
            return None;
        }
        let (at, len) = self.key_at(i);
        (len == KEY_REF).then(|| {
            (
                self.u64_at(at + KEY_PREFIX),
                self.u64_at(at + KEY_PREFIX + 8),
            )
        })
    }
    /// Entry `i`'s whole key, read through `rest` if it is kept out of line (`None` if
    /// `rest` cannot read it, or the entry's reference is malformed).
    fn key_of(&self, i: usize, rest: &impl KeyRest) -> Option<Vec<u8>> {
        if self.key_out(i) {
            let (first, len) = self.key_ref(i)?;
            return rest.whole_key(first, len);
        }
        let (at, len) = self.key_at(i);
        let mut k = vec![0u8; len];
        self.copy_out(at, &mut k);
        Some(k)
    }
    /// Compares entry `i`'s key with `key` (whose head is `h`).
    #[inline]
    fn cmp_entry(&self, i: usize, key: &[u8], h: u32, rest: &impl KeyRest) -> Ordering {
        let s = HDR + SLOT * i;
        let eh = self.u32_at(s + 4);
        if eh != h {
            return eh.cmp(&h);
        }
        let (at, len, out) = self.key_at_out(i);
        if out {
            return self.cmp_out_of_line(i, at, key, rest);
        }
        // Equal heads: both keys' first min(4, len) bytes are equal (zero padding can
        // only tie a shorter key with one that has zero bytes there, so compare fully).
        self.cmp_bytes(at, len, key)
    }
    /// [`PageRead::cmp_entry`] for an entry whose key is out of line, its bytes at `at`.
    #[cold]
    fn cmp_out_of_line(&self, i: usize, at: usize, key: &[u8], rest: &impl KeyRest) -> Ordering {
        let pre = &key[..key.len().min(KEY_PREFIX)];
        match self.cmp_bytes(at, KEY_PREFIX, pre) {
            // The entry's key is longer than its prefix, so above `key` if `key` ends
            // within it; past the prefix only the whole key settles it.
            Ordering::Equal if key.len() > KEY_PREFIX => match self.key_of(i, rest) {
                Some(k) => k.as_slice().cmp(key),
                None => Ordering::Less,
            },
            Ordering::Equal => Ordering::Greater,
            o => o,
        }
    }
    /// Binary search: `Ok(i)` where entry `i` has `key`, else `Err(i)` where it would go.
    /// `rest` reads keys kept out of line.
    #[inline]
    fn search(&self, key: &[u8], rest: &impl KeyRest) -> Result<usize, usize> {
        let (n, p) = (self.n(), self.plen());
        let h = head(key.get(p..).unwrap_or_default());
        let (mut lo, mut hi) = (0usize, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.cmp_entry(mid, key, h, rest) {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return Ok(mid),
            }
        }
        // The heads ordered `key` right only if it begins with the page's prefix; if it
        // does not, it sorts below or above every key of the page. An `Ok` came from a
        // whole compare, so only a miss asks, and it reads the key of the entry where the
        // search ended, whose line a tie has most often brought into the cache already.
        if p > 0 && n > 0 {
            let (at, len) = self.key_at(lo.min(n - 1));
            match self.cmp_bytes(at, p.min(len), &key[..p.min(key.len())]) {
                Ordering::Greater => return Err(0),
                Ordering::Less => return Err(n),
                Ordering::Equal => {}
            }
        }
        Err(lo)
    }
    /// Leaf entry `i`'s value bytes in the page: (offset, length), never past the page,
    /// as for [`PageRead::key_at`]. For a value kept out of line, its reference.
    fn value_at(&self, i: usize) -> (usize, usize) {
        let s = HDR + SLOT * i;
        let off = self.u16_at(s) as usize;
        let klen = (self.u16_at(s + 2) & !KEY_OUT) as usize;
        let at = (off + 4 + klen).min(PAGE);
        (
            at,
            ((self.u32_at(off) & !OUT_OF_LINE) as usize).min(PAGE - at),
        )
    }
    /// Whether leaf entry `i`'s value is kept out of line.
    fn out_of_line(&self, i: usize) -> bool {
        let off = self.u16_at(HDR + SLOT * i) as usize;
        off + 4 <= PAGE && self.u32_at(off) & OUT_OF_LINE != 0
    }
    /// Leaf entry `i`'s reference to its overflow pages (first page, length), if its
    /// value is kept out of line.
    fn value_ref(&self, i: usize) -> Option<(u64, u64)> {
        if !self.out_of_line(i) {
            return None;
        }
        let (at, len) = self.value_at(i);
        (len == VALUE_REF).then(|| (self.u64_at(at), self.u64_at(at + 8)))
    }
    /// Branch: the child index that holds `key` (0 = child0, i + 1 = entry i's child).
    #[inline]
    fn child_index(&self, key: &[u8], rest: &impl KeyRest) -> usize {
        match self.search(key, rest) {
            Ok(i) => i + 1,
            Err(i) => i,
        }
    }
    /// Copies the bytes the page uses into `dst`: its header and slots, and its heap
    /// (from `heap_lo`, clamped into the page); the free bytes between are left as `dst`
    /// has them. A page of a tree one level above the leaves is mostly free, and copying
    /// only what is used costs a copy-on-write a fraction of the page.
    fn copy_used(&self, dst: &mut [u8; PAGE]) {
        let slots = (HDR + SLOT * self.n()).min(PAGE);
        let lo = (self.u16_at(4) as usize).clamp(slots, PAGE);
        self.copy_out(0, &mut dst[..slots]);
        self.copy_out(lo, &mut dst[lo..]);
    }
    /// Branch: child `c` (0 = child0) and the entries under it.
    fn child(&self, c: usize) -> (u64, u64) {
        if c == 0 {
            return (self.u64_at(16), self.u64_at(24));
        }
        let (at, len) = self.key_at(c - 1);
        (self.u64_at(at + len), self.u64_at(at + len + 8))
    }
}

/// A page in the writer's own memory.
#[derive(Clone)]
pub struct PageBuf {
    b: Box<[u8; PAGE]>,
}

impl std::fmt::Debug for PageBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageBuf")
            .field("kind", &self.kind())
            .field("n", &self.n())
            .finish()
    }
}

impl PageRead for PageBuf {
    fn u16_at(&self, at: usize) -> u16 {
        u16::from_le_bytes([self.b[at], self.b[at + 1]])
    }
    fn u32_at(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.b[at..at + 4].try_into().unwrap())
    }
    fn u64_at(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.b[at..at + 8].try_into().unwrap())
    }
    fn cmp_bytes(&self, at: usize, len: usize, key: &[u8]) -> Ordering {
        let a = &self.b[at..at + len];
        let n = len.min(key.len());
        let mut i = 0;
        // Eight bytes at a time as big-endian integers, as the file's pages compare: keys
        // that share their heads make every compare of a search reach here, and a call to
        // `memcmp` for a 16-byte key costs more than the compare itself.
        while i + 8 <= n {
            let x = u64::from_be_bytes(a[i..i + 8].try_into().expect("8 bytes"));
            let y = u64::from_be_bytes(key[i..i + 8].try_into().expect("8 bytes"));
            if x != y {
                return x.cmp(&y);
            }
            i += 8;
        }
        while i < n {
            if a[i] != key[i] {
                return a[i].cmp(&key[i]);
            }
            i += 1;
        }
        len.cmp(&key.len())
    }
    fn copy_out(&self, at: usize, dst: &mut [u8]) {
        dst.copy_from_slice(&self.b[at..at + dst.len()]);
    }
}

/// A copy of a file page in private memory, read as the file's pages are: every read
/// clamped to the page, so a copy of a corrupt page gives wrong answers (which `check`
/// reports), never a panic. A walk copies each leaf once and reads its entries here, with
/// plain loads, instead of with an atomic copy per key and per value.
#[derive(Clone, Copy)]
pub struct PageCopy<'a>(pub &'a [u8; PAGE]);

impl PageCopy<'_> {
    fn bytes_at<const N: usize>(&self, at: usize) -> [u8; N] {
        let at = at.min(PAGE - N);
        self.0[at..at + N].try_into().expect("N bytes")
    }

    /// The `len` bytes at `at` (as `key_at` and `value_at` give them: inside the page).
    pub fn slice(&self, at: usize, len: usize) -> &[u8] {
        let at = at.min(PAGE);
        &self.0[at..at + len.min(PAGE - at)]
    }
}

/// A leaf entry's bytes in a page copy, as [`PageCopy::leaf_entry`] reads them.
pub struct LeafEntry<'a> {
    /// The key's bytes in the page (its prefix and reference if `key_out`).
    pub key: &'a [u8],
    /// Whether the key is kept out of line.
    pub key_out: bool,
    /// The value's bytes in the page (its reference if `value_out`).
    pub value: &'a [u8],
    /// Whether the value is kept out of line.
    pub value_out: bool,
}

impl<'a> PageCopy<'a> {
    /// Leaf entry `i`, from one read of its slot and one of its `vlen`, each range
    /// clamped into the page as [`PageRead::key_at`] and [`PageRead::value_at`] clamp
    /// theirs: a walk reads every entry of a leaf this way, where the reads one by one
    /// took the slot three times.
    #[inline]
    pub fn leaf_entry(&self, i: usize) -> LeafEntry<'a> {
        let slot = u64::from_le_bytes(self.bytes_at(HDR + SLOT * i));
        let off = (slot & 0xffff) as usize;
        let raw = (slot >> 16) as u16;
        let vlen = u32::from_le_bytes(self.bytes_at(off));
        let kat = (off + 4).min(PAGE);
        let klen = ((raw & !KEY_OUT) as usize).min(PAGE - kat);
        let vat = kat + klen;
        let page: &'a [u8; PAGE] = self.0;
        LeafEntry {
            key: &page[kat..vat],
            key_out: raw & KEY_OUT != 0,
            value: &page[vat..vat + ((vlen & !OUT_OF_LINE) as usize).min(PAGE - vat)],
            value_out: off + 4 <= PAGE && vlen & OUT_OF_LINE != 0,
        }
    }
}

impl PageRead for PageCopy<'_> {
    fn u16_at(&self, at: usize) -> u16 {
        u16::from_le_bytes(self.bytes_at(at))
    }
    fn u32_at(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.bytes_at(at))
    }
    fn u64_at(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.bytes_at(at))
    }
    fn cmp_bytes(&self, at: usize, len: usize, key: &[u8]) -> Ordering {
        self.slice(at, len).cmp(key)
    }
    fn copy_out(&self, at: usize, dst: &mut [u8]) {
        let src = self.slice(at, dst.len());
        dst[..src.len()].copy_from_slice(src);
    }
}

/// The number of bytes `a` and `b` begin with alike.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Key bytes for a page, kept out of line if `.1` (then a prefix and a reference).
pub type Key<'a> = (&'a [u8], bool);

/// A [`KeyRest`] that reads nothing: for pages that hold no key kept out of line.
#[cfg(test)]
pub fn no_rest(_: u64, _: u64) -> Option<Vec<u8>> {
    None
}

/// Why an edit did not fit.
#[derive(Debug, PartialEq, Eq)]
pub struct Full;

/// Buffers a thread keeps for its next pages at most (16 MiB).
const SPARE_MAX: usize = 4096;

thread_local! {
    /// Page buffers that committed transactions of this thread no longer use. A
    /// transaction of a thousand puts copies as many pages: handing them back to the heap
    /// at each commit returns its top to the kernel, and the next transaction pays a page
    /// fault per buffer to get them back.
    static SPARE: std::cell::RefCell<Vec<Box<[u8; PAGE]>>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// A page buffer, its bytes unspecified (a spare one if the thread has one).
fn buffer() -> Box<[u8; PAGE]> {
    SPARE
        .with(|s| s.borrow_mut().pop())
        .unwrap_or_else(|| Box::new([0u8; PAGE]))
}

impl PageBuf {
    /// An empty page of `kind`.
    pub fn new(kind: u16) -> PageBuf {
        let mut b = buffer();
        b.fill(0);
        let mut p = PageBuf { b };
        p.put16(0, kind);
        p.set_heap_lo(PAGE);
        p
    }

    /// Hands the page's buffer to the thread's next pages.
    pub fn recycle(self) {
        SPARE.with(|s| {
            let mut s = s.borrow_mut();
            if s.len() < SPARE_MAX {
                s.push(self.b);
            }
        });
    }

    /// A copy of page `p`, read straight into the new buffer (no staging copy); of its
    /// free bytes, only what [`PageRead::copy_used`] copies (the rest is unspecified, and
    /// no edit reads it).
    pub fn copy_of(p: &impl PageRead) -> PageBuf {
        let mut b = buffer();
        p.copy_used(&mut b);
        PageBuf { b }
    }

    /// The byte ranges a leaf or branch page uses: its header and slots, and its heap
    /// (what a commit writes into the file; the free bytes between mean nothing).
    pub fn used_ranges(&self) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
        let slots = (HDR + SLOT * self.n()).min(PAGE);
        (0..slots, self.heap_lo().clamp(slots, PAGE)..PAGE)
    }

    /// The page's bytes.
    pub fn bytes(&self) -> &[u8; PAGE] {
        &self.b
    }

    fn put16(&mut self, at: usize, v: u16) {
        self.b[at..at + 2].copy_from_slice(&v.to_le_bytes());
    }
    fn put32(&mut self, at: usize, v: u32) {
        self.b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }
    fn put64(&mut self, at: usize, v: u64) {
        self.b[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }
    fn heap_lo(&self) -> usize {
        self.u16_at(4) as usize
    }
    fn set_heap_lo(&mut self, v: usize) {
        self.put16(4, v as u16);
    }
    fn set_n(&mut self, n: usize) {
        self.put16(2, n as u16);
    }
    fn dead(&self) -> usize {
        self.u16_at(6) as usize
    }
    fn set_dead(&mut self, d: usize) {
        self.put16(6, d as u16);
    }
    /// Overflow page: holds `part` of a value, followed by page `next` (0: none).
    pub fn set_overflow(&mut self, part: &[u8], next: u64) {
        debug_assert!(part.len() <= PAGE - OVERFLOW_HDR);
        self.put32(4, part.len() as u32);
        self.put64(8, next);
        self.b[OVERFLOW_HDR..OVERFLOW_HDR + part.len()].copy_from_slice(part);
    }

    /// Branch: sets child0 and its entry count.
    pub fn set_child0(&mut self, child: u64, count: u64) {
        self.put64(16, child);
        self.put64(24, count);
    }

    /// Free bytes between the slot array and the heap.
    fn gap(&self) -> usize {
        self.heap_lo() - (HDR + SLOT * self.n())
    }
    /// Bytes an entry would take, its slot included.
    pub fn entry_size(kind: u16, klen: usize, vlen: usize) -> usize {
        SLOT + klen + if kind == LEAF { 4 + vlen } else { 16 }
    }
    /// Bytes used by entries and slots.
    pub fn used(&self) -> usize {
        (PAGE - self.heap_lo() - self.dead()) + SLOT * self.n()
    }
    /// Bytes an entry may take at most in a page of its kind.
    pub fn room(&self) -> usize {
        PAGE - HDR - self.used()
    }

    /// Makes `need` contiguous bytes free, compacting the heap if that is enough.
    fn make_room(&mut self, need: usize) -> Result<(), Full> {
        if self.gap() >= need {
            return Ok(());
        }
        if self.gap() + self.dead() < need {
            return Err(Full);
        }
        self.compact();
        Ok(())
    }

    /// Rewrites the heap with no dead bytes, entries in slot order.
    pub fn compact(&mut self) {
        // The old heap on the stack: a copy of the page costs less than a buffer from the
        // heap, and compaction comes with most edits of a full page.
        let old: [u8; PAGE] = *self.b;
        let (n, leaf) = (self.n(), self.kind() == LEAF);
        let mut lo = PAGE;
        for i in 0..n {
            let s = HDR + SLOT * i;
            let off = self.u16_at(s) as usize;
            let klen = (self.u16_at(s + 2) & !KEY_OUT) as usize;
            // The entry's length from the old heap: the new one is being written over it.
            let len = if leaf {
                let w = u32::from_le_bytes(old[off..off + 4].try_into().expect("4 bytes"));
                4 + klen + (w & !OUT_OF_LINE) as usize
            } else {
                klen + 16
            };
            lo -= len;
            self.b[lo..lo + len].copy_from_slice(&old[off..off + len]);
            self.put16(s, lo as u16);
        }
        self.set_heap_lo(lo);
        self.set_dead(0);
        self.refresh_prefix();
    }

    /// The heap bytes of entry `i`.
    fn entry_len(&self, i: usize) -> usize {
        let s = HDR + SLOT * i;
        let off = self.u16_at(s) as usize;
        let klen = (self.u16_at(s + 2) & !KEY_OUT) as usize;
        if self.kind() == LEAF {
            4 + klen + (self.u32_at(off) & !OUT_OF_LINE) as usize
        } else {
            klen + 16
        }
    }

    /// Inserts a slot at `i` for an entry of `len` heap bytes and key bytes `key` (kept
    /// out of line if `key.1`); returns the entry's offset.
    fn insert_slot(&mut self, i: usize, key: Key<'_>, len: usize) -> Result<usize, Full> {
        let (key, out) = key;
        self.make_room(len + SLOT)?;
        let n = self.n();
        if n == 0 {
            self.put16(8, 0);
        } else if self.plen() > 0 {
            // A key that does not begin with the prefix shortens it to what they share.
            let (at, _) = self.key_at(0);
            let p = self.plen();
            let shared = common_prefix(&self.b[at..at + p], key);
            if shared < p {
                self.set_prefix(shared);
            }
        }
        let s = HDR + SLOT * i;
        self.b.copy_within(s..HDR + SLOT * n, s + SLOT);
        let off = self.heap_lo() - len;
        self.set_heap_lo(off);
        self.put16(s, off as u16);
        self.put16(s + 2, key.len() as u16 | if out { KEY_OUT } else { 0 });
        self.put32(s + 4, self.head_of(key));
        self.set_n(n + 1);
        Ok(off)
    }

    /// Sets the page's prefix to `p` bytes (which every key must begin with) and every
    /// slot's head to match.
    fn set_prefix(&mut self, p: usize) {
        debug_assert!(p <= PLEN_MAX);
        self.put16(8, p as u16);
        for i in 0..self.n() {
            let (at, len) = self.key_at(i);
            let h = head(&self.b[(at + p).min(at + len)..at + len]);
            self.put32(HDR + SLOT * i + 4, h);
        }
    }

    /// Makes the page's prefix the longest its keys share (up to [`PLEN_MAX`]); the first
    /// and last keys settle it, since every key sorts between them. Cheap when nothing
    /// changes: compaction and splits call it, and a commit for each page it writes
    /// that has no prefix yet.
    pub fn refresh_prefix(&mut self) {
        let n = self.n();
        if n < 2 || !matches!(self.kind(), LEAF | BRANCH) {
            return;
        }
        let ((a, al), (b, bl)) = (self.key_at(0), self.key_at(n - 1));
        let cap = PLEN_MAX.min(al).min(bl);
        let p = common_prefix(&self.b[a..a + cap], &self.b[b..b + cap]);
        if p != self.plen() {
            self.set_prefix(p);
        }
    }

    /// Leaf: inserts (key, value) at slot `i` (from a search's `Err(i)`).
    #[cfg(test)]
    pub fn leaf_insert(&mut self, i: usize, key: &[u8], value: &[u8]) -> Result<(), Full> {
        self.leaf_insert_as(i, (key, false), value, false)
    }

    /// Leaf: inserts (key, value) at slot `i`, `value` being a reference to overflow
    /// pages if `out_of_line`.
    pub fn leaf_insert_as(
        &mut self,
        i: usize,
        key: Key<'_>,
        value: &[u8],
        out_of_line: bool,
    ) -> Result<(), Full> {
        debug_assert_eq!(self.kind(), LEAF);
        debug_assert!(!out_of_line || value.len() == VALUE_REF);
        debug_assert!(!key.1 || key.0.len() == KEY_REF);
        let off = self.insert_slot(i, key, 4 + key.0.len() + value.len())?;
        let key = key.0;
        let flag = if out_of_line { OUT_OF_LINE } else { 0 };
        self.put32(off, value.len() as u32 | flag);
        self.b[off + 4..off + 4 + key.len()].copy_from_slice(key);
        self.b[off + 4 + key.len()..off + 4 + key.len() + value.len()].copy_from_slice(value);
        Ok(())
    }

    /// Removes entry `i` (its heap bytes become dead).
    pub fn remove(&mut self, i: usize) {
        let n = self.n();
        let len = self.entry_len(i);
        let s = HDR + SLOT * i;
        let off = self.u16_at(s) as usize;
        self.b.copy_within(s + SLOT..HDR + SLOT * n, s);
        self.set_n(n - 1);
        if off == self.heap_lo() {
            self.set_heap_lo(off + len);
        } else {
            self.set_dead(self.dead() + len);
        }
    }

    /// Leaf: replaces entry `i`'s value.
    #[cfg(test)]
    pub fn leaf_set_value(&mut self, i: usize, value: &[u8]) -> Result<(), Full> {
        self.leaf_set_as(i, value, false)
    }

    /// Leaf: replaces entry `i`'s value, by a reference to overflow pages if
    /// `out_of_line`.
    pub fn leaf_set_as(&mut self, i: usize, value: &[u8], out_of_line: bool) -> Result<(), Full> {
        let (vat, vlen) = self.value_at(i);
        if vlen == value.len() && self.out_of_line(i) == out_of_line {
            self.b[vat..vat + vlen].copy_from_slice(value);
            return Ok(());
        }
        let (kat, klen) = self.key_at(i);
        let key = self.b[kat..kat + klen].to_vec();
        let kout = self.key_out(i);
        // The room check counts the old entry's bytes as reclaimable.
        let old = self.entry_len(i) + SLOT;
        if self.room() + old < Self::entry_size(LEAF, klen, value.len()) {
            return Err(Full);
        }
        self.remove(i);
        self.leaf_insert_as(i, (&key, kout), value, out_of_line)
    }

    /// Branch: inserts separator `key` with `child` (holding `count` entries) at slot `i`.
    pub fn branch_insert(
        &mut self,
        i: usize,
        key: Key<'_>,
        child: u64,
        count: u64,
    ) -> Result<(), Full> {
        debug_assert_eq!(self.kind(), BRANCH);
        let off = self.insert_slot(i, key, key.0.len() + 16)?;
        let key = key.0;
        self.b[off..off + key.len()].copy_from_slice(key);
        self.put64(off + key.len(), child);
        self.put64(off + key.len() + 8, count);
        Ok(())
    }

    /// Branch: sets child `c` (0 = child0) and its entry count.
    pub fn set_child(&mut self, c: usize, child: u64, count: u64) {
        if c == 0 {
            return self.set_child0(child, count);
        }
        let (at, len) = self.key_at(c - 1);
        self.put64(at + len, child);
        self.put64(at + len + 8, count);
    }

    /// Splits the page at its middle by bytes: keeps the lower half, returns the upper
    /// half and the key bytes of its first entry, with whether that key is out of line (a
    /// branch moves that entry's child to the new page's child0 and drops the entry, whose
    /// key, and its overflow pages, become the separator above).
    pub fn split(&mut self) -> (PageBuf, (Vec<u8>, bool)) {
        let n = self.n();
        debug_assert!(n >= 2);
        let kind = self.kind();
        let total = self.used();
        // The first entry whose bytes cross half the page's use: the upper page starts
        // there (at least one entry on each side).
        let mut acc = 0;
        let mut at = n - 1;
        for i in 0..n {
            acc += self.entry_len(i) + SLOT;
            if acc * 2 >= total {
                at = (i + 1).min(n - 1).max(1);
                break;
            }
        }
        let mut right = PageBuf::new(kind);
        let (kat, klen) = self.key_at(at);
        let sep = (self.b[kat..kat + klen].to_vec(), self.key_out(at));
        let mut j = 0;
        for i in at..n {
            let (ka, kl) = self.key_at(i);
            let key = self.b[ka..ka + kl].to_vec();
            let kout = self.key_out(i);
            if kind == LEAF {
                let (va, vl) = self.value_at(i);
                let v = self.b[va..va + vl].to_vec();
                right
                    .leaf_insert_as(j, (&key, kout), &v, self.out_of_line(i))
                    .expect("half a page fits a page");
                j += 1;
            } else {
                let (c, cnt) = self.child(i + 1);
                if i == at {
                    right.set_child0(c, cnt);
                } else {
                    right
                        .branch_insert(j, (&key, kout), c, cnt)
                        .expect("half a page fits a page");
                    j += 1;
                }
            }
        }
        for i in (at..n).rev() {
            self.remove(i);
        }
        self.compact();
        right.refresh_prefix();
        (right, sep)
    }

    /// Checks that every offset and length the page holds stays inside it, so that the
    /// edits above cannot go out of bounds on a page from a corrupt file; says what is
    /// wrong otherwise. `kind` is what the page must be.
    pub fn validate(&self, kind: u16) -> std::result::Result<(), String> {
        if self.kind() != kind {
            return Err(format!("kind {} where {kind} belongs", self.kind()));
        }
        let (n, lo) = (self.n(), self.heap_lo());
        if HDR + SLOT * n > lo || lo > PAGE || self.dead() > PAGE - lo {
            return Err(format!("{n} entries and a heap from {lo} do not fit"));
        }
        let p = self.u16_at(8) as usize;
        if p > PLEN_MAX {
            return Err(format!("a prefix of {p} bytes (at most {PLEN_MAX})"));
        }
        // Entry 0's key holds the prefix; the loop below checks it stays in the page.
        let at0 = if n > 0 { self.key_at(0).0 } else { HDR };
        let mut total = 0;
        for i in 0..n {
            let s = HDR + SLOT * i;
            let off = self.u16_at(s) as usize;
            let raw = self.u16_at(s + 2);
            let klen = (raw & !KEY_OUT) as usize;
            if raw & KEY_OUT != 0 && klen != KEY_REF {
                return Err(format!("entry {i}'s key reference has {klen} bytes"));
            }
            let len = if kind == LEAF {
                if off < lo || off + 4 > PAGE {
                    return Err(format!("entry {i} at {off} is outside the heap"));
                }
                let w = self.u32_at(off);
                if w & OUT_OF_LINE != 0 && w & !OUT_OF_LINE != VALUE_REF as u32 {
                    return Err(format!(
                        "entry {i}'s value reference has {} bytes",
                        w & !OUT_OF_LINE
                    ));
                }
                4 + klen + (w & !OUT_OF_LINE) as usize
            } else {
                klen + 16
            };
            if off < lo || off + len > PAGE {
                return Err(format!("entry {i} ({len} bytes at {off}) leaves the page"));
            }
            // A writer frees a key's pages by walking them: a length no key has could
            // make that walk as long as the length allows.
            if let Some((_, len)) = self.key_ref(i) {
                if len <= KEY_INLINE_MAX as u64 || len > MAX_TREE_KEY as u64 {
                    return Err(format!(
                        "entry {i}'s key of {len} bytes is kept out of line"
                    ));
                }
            }
            // Searches compare heads first, and take every key to begin with the prefix:
            // a head that is not its key's, or a key without the prefix, would send an
            // insert to the wrong place, and the page out of order. The first and last
            // keys stand for all: keys between them share what they share, unless the
            // page is out of order, which `check` reports (comparing every key's prefix
            // here cost a fifth of a one-put commit).
            let (at, kl) = self.key_at(i);
            if kl < p || ((i == 0 || i == n - 1) && self.b[at..at + p] != self.b[at0..at0 + p]) {
                return Err(format!(
                    "entry {i}'s key does not begin with the page's prefix"
                ));
            }
            if self.u32_at(s + 4) != head(&self.b[at + p..at + kl]) {
                return Err(format!("entry {i}'s key head is not its key's"));
            }
            total += len;
        }
        // The edits' room arithmetic rests on this: the heap is the entries plus `dead`.
        if total + self.dead() != PAGE - lo {
            return Err(format!(
                "entries of {total} bytes and {} dead do not fill the heap of {}",
                self.dead(),
                PAGE - lo
            ));
        }
        Ok(())
    }

    /// Branch: the sum of every child's entry count.
    pub fn total_count(&self) -> u64 {
        (0..=self.n()).map(|c| self.child(c).1).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn rng(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    fn leaf_contents(p: &PageBuf) -> Vec<(Vec<u8>, Vec<u8>)> {
        (0..p.n())
            .map(|i| {
                let (ka, kl) = p.key_at(i);
                let (va, vl) = p.value_at(i);
                (
                    p.bytes()[ka..ka + kl].to_vec(),
                    p.bytes()[va..va + vl].to_vec(),
                )
            })
            .collect()
    }

    #[test]
    fn leaf_follows_a_btreemap_through_inserts_replaces_removes_and_splits() {
        for seed0 in 1..40u64 {
            let mut seed = seed0 * 0x9e37_79b9_7f4a_7c15;
            let mut model = BTreeMap::new();
            let mut p = PageBuf::new(LEAF);
            for _ in 0..2000 {
                let r = rng(&mut seed);
                // Short keys with shared heads and zero bytes, to exercise head ties.
                let klen = (r % 9) as usize;
                let key: Vec<u8> = (0..klen).map(|j| ((r >> (8 + j * 3)) & 3) as u8).collect();
                let vlen = ((r >> 40) % 40) as usize;
                let val = vec![(r >> 50) as u8; vlen];
                match (r >> 60) % 4 {
                    0 | 1 => match p.search(&key, &no_rest) {
                        Ok(i) => {
                            if p.leaf_set_value(i, &val).is_ok() {
                                model.insert(key, val);
                            }
                        }
                        Err(i) => {
                            if p.leaf_insert(i, &key, &val).is_ok() {
                                model.insert(key, val);
                            }
                        }
                    },
                    2 => {
                        if let Ok(i) = p.search(&key, &no_rest) {
                            p.remove(i);
                            model.remove(&key);
                        }
                    }
                    _ => {
                        if p.n() >= 2 && p.room() < 600 {
                            let (right, sep) = p.split();
                            assert_eq!(leaf_contents(&right)[0].0, sep.0, "seed {seed0}");
                            let upper: BTreeMap<_, _> = model.split_off(&sep.0);
                            assert_eq!(
                                leaf_contents(&right),
                                upper.into_iter().collect::<Vec<_>>(),
                                "seed {seed0}"
                            );
                        }
                    }
                }
                assert_eq!(
                    leaf_contents(&p),
                    model.clone().into_iter().collect::<Vec<_>>(),
                    "seed {seed0}"
                );
                p.validate(LEAF).unwrap();
            }
        }
    }

    #[test]
    fn searches_answer_as_a_btreemap_while_the_prefix_grows_and_shrinks() {
        // Keys of one family share 11 bytes; a few of other families (shorter, below,
        // above, a prefix of the family's) shorten the page's prefix when they come in.
        let family = |r: u64| {
            format!(
                "user:000000{:02}{}",
                r % 100,
                "x".repeat((r >> 8) as usize % 3)
            )
        };
        let odd = [
            &b""[..],
            b"a",
            b"user:",
            b"user:00000",
            b"user:0000009",
            b"zz",
            b"user:1",
        ];
        let mut grew = false;
        for seed0 in 1..30u64 {
            let mut seed = seed0 * 0x9e37_79b9_7f4a_7c15;
            let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
            let mut p = PageBuf::new(LEAF);
            for step in 0..600 {
                let r = rng(&mut seed);
                let key = if r % 23 == 0 {
                    odd[(r >> 5) as usize % odd.len()].to_vec()
                } else {
                    family(r >> 7).into_bytes()
                };
                match (r >> 60) % 5 {
                    0..=2 => match p.search(&key, &no_rest) {
                        Ok(i) => p.leaf_set_value(i, b"v").unwrap(),
                        Err(i) => {
                            if p.leaf_insert(i, &key, b"v").is_ok() {
                                model.insert(key.clone(), b"v".to_vec());
                            }
                        }
                    },
                    3 => {
                        if let Ok(i) = p.search(&key, &no_rest) {
                            p.remove(i);
                            model.remove(&key);
                        }
                    }
                    _ => {
                        if step % 3 == 0 {
                            p.compact();
                        } else {
                            p.refresh_prefix();
                        }
                    }
                }
                grew |= p.plen() > 5;
                p.validate(LEAF)
                    .unwrap_or_else(|e| panic!("seed {seed0}: {e}"));
                assert_eq!(leaf_contents(&p).len(), model.len(), "seed {seed0}");
                let probes = (0..8)
                    .map(|j| family(rng(&mut seed) >> j).into_bytes())
                    .chain(odd.iter().map(|k| k.to_vec()))
                    .chain([
                        b"user:000000".to_vec(),
                        b"user:0000010".to_vec(),
                        b"\xff".to_vec(),
                    ]);
                for k in probes {
                    let want = match model.range(..=k.clone()).next_back() {
                        Some((last, _)) if *last == k => Ok(model.range(..k.clone()).count()),
                        _ => Err(model.range(..k.clone()).count()),
                    };
                    assert_eq!(
                        p.search(&k, &no_rest),
                        want,
                        "seed {seed0}, key {k:?}, prefix {}",
                        p.plen()
                    );
                }
            }
        }
        assert!(grew, "no page got a prefix: the test does not test it");
    }

    #[test]
    fn branch_routes_keys_to_the_child_that_holds_them() {
        let mut p = PageBuf::new(BRANCH);
        p.set_child0(100, 5);
        for (i, k) in [b"b".as_slice(), b"d", b"f"].iter().enumerate() {
            p.branch_insert(i, (k, false), 101 + i as u64, 6 + i as u64)
                .unwrap();
        }
        let child_of = |k: &[u8]| p.child(p.child_index(k, &no_rest)).0;
        assert_eq!(child_of(b"a"), 100);
        assert_eq!(child_of(b""), 100);
        assert_eq!(child_of(b"b"), 101);
        assert_eq!(child_of(b"c"), 101);
        assert_eq!(child_of(b"d"), 102);
        assert_eq!(child_of(b"zz"), 103);
        assert_eq!(p.total_count(), 5 + 6 + 7 + 8);
        let (right, sep) = p.split();
        assert!(!sep.0.is_empty());
        assert_eq!(p.total_count() + right.total_count(), 26);
        assert_eq!(p.n() + right.n() + 1, 3);
    }

    #[test]
    fn a_key_kept_out_of_line_sorts_after_its_prefix_and_by_its_whole_bytes() {
        // Entry 0: a key of 2000 bytes whose first 64 are `x`s, kept out of line; `rest`
        // reads it from "page 7".
        let long: Vec<u8> = [vec![b'x'; 64], vec![b'm'; 1936]].concat();
        let mut stored = long[..KEY_PREFIX].to_vec();
        stored.extend_from_slice(&7u64.to_le_bytes());
        stored.extend_from_slice(&(long.len() as u64).to_le_bytes());
        let mut p = PageBuf::new(LEAF);
        p.leaf_insert_as(0, (&stored, true), b"v", false).unwrap();
        p.validate(LEAF).unwrap();
        let rest = |first, len| (first == 7 && len == 2000).then(|| long.clone());
        let at = |k: &[u8]| p.search(k, &rest);
        assert_eq!(at(&long), Ok(0));
        // Keys that are its prefix, the 64 bytes kept in the page included, sort below.
        assert_eq!(at(&long[..64]), Err(0));
        assert_eq!(at(&long[..63]), Err(0));
        assert_eq!(at(&long[..1999]), Err(0));
        assert_eq!(at(&[long.clone(), vec![0]].concat()), Err(1));
        assert_eq!(at(&[&long[..64], b"z".as_slice()].concat()), Err(1));
        assert_eq!(at(&[&long[..64], b"a".as_slice()].concat()), Err(0));
        assert_eq!(p.key_ref(0), Some((7, 2000)));
        assert_eq!(p.key_of(0, &rest), Some(long.clone()));
        // A reference to a length no key kept out of line has is refused.
        let (kat, _) = p.key_at(0);
        for bad in [10u64, 1 << 40] {
            let mut q = p.clone();
            q.put64(kat + KEY_PREFIX + 8, bad);
            assert!(q.validate(LEAF).is_err(), "{bad}");
        }
    }

    #[test]
    fn validate_refuses_pages_whose_offsets_or_counts_lie() {
        let mut p = PageBuf::new(LEAF);
        for i in 0..20u32 {
            p.leaf_insert(i as usize, &i.to_be_bytes(), &[1; 30])
                .unwrap();
        }
        p.remove(3);
        p.validate(LEAF).unwrap();
        assert!(p.validate(BRANCH).is_err(), "a leaf taken for a branch");
        let lies: [(usize, u16); 5] = [
            (2, 600),                // more entries than the slots hold
            (4, 10),                 // a heap that starts inside the slots
            (6, 3000),               // dead bytes that are not there
            (HDR + SLOT * 5, 4094),  // an entry that leaves the page
            (HDR + SLOT * 7 + 4, 9), // a key head that is not the key's
        ];
        let mut q = p.clone();
        q.put16(8, 2); // a prefix the keys do not share: theirs begin 0, 0
        q.refresh_prefix();
        assert_eq!(q.plen(), 3, "keys 0..20 as u32s share three bytes");
        q.validate(LEAF).unwrap();
        for (at, v) in [(8, 4), (8, PLEN_MAX as u16 + 1), (HDR + SLOT * 7 + 4, 9)] {
            let mut bad = q.clone();
            bad.put16(at, v);
            assert!(bad.validate(LEAF).is_err(), "{at}: {v}");
        }
        for (at, v) in lies {
            let mut bad = p.clone();
            bad.put16(at, v);
            assert!(bad.validate(LEAF).is_err(), "{at}: {v}");
        }
    }

    #[test]
    fn a_full_page_refuses_an_entry_and_is_unchanged() {
        let mut p = PageBuf::new(LEAF);
        let mut i = 0u32;
        while p
            .leaf_insert(i as usize, &i.to_be_bytes(), &[7; 100])
            .is_ok()
        {
            i += 1;
        }
        let before = leaf_contents(&p);
        assert_eq!(
            p.leaf_insert(i as usize, &i.to_be_bytes(), &[7; 100]),
            Err(Full)
        );
        assert_eq!(leaf_contents(&p), before);
        assert!(p.room() < 100 + 4 + 4 + SLOT);
    }
}
