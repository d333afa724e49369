//! Values (and long keys) kept out of line: a chain of overflow pages that an entry
//! references.
//!
//! A value too large to share a leaf (key and value over [`INLINE_MAX`]) goes into pages
//! of its own, linked first to last; the leaf keeps a 16-byte reference (first page,
//! length). Overflow pages are copy-on-write like every other page: a new value writes new
//! pages, and the pages of the value it replaces are freed for later snapshots, so a
//! reader of an older snapshot reads the old value whole. A write transaction writes a new
//! value's pages straight into the file: they are free in every committed state until its
//! commit, so no reader can reach them, and a writer killed meanwhile leaves them free.

use super::page::{PageBuf, PageRead, OVERFLOW, OVERFLOW_HDR, PAGE, VALUE_REF};
use super::tree::{PageSource, Pages};
use crate::error::Result;

/// The most bytes of key and value a leaf keeps inline (a quarter page, so that a split
/// always makes room for the entry that caused it).
pub const INLINE_MAX: usize = 1000;

pub use super::page::MAX_TREE_KEY;

/// Bytes of a value an overflow page holds.
pub const PER_PAGE: usize = PAGE - OVERFLOW_HDR;

/// Whether an entry of `klen` and `vlen` bytes keeps its value out of line.
pub fn goes_out_of_line(klen: usize, vlen: usize) -> bool {
    klen + vlen > INLINE_MAX
}

/// The reference a leaf keeps for a value at `first` of `len` bytes.
pub fn reference(first: u64, len: u64) -> [u8; VALUE_REF] {
    let mut r = [0u8; VALUE_REF];
    r[..8].copy_from_slice(&first.to_le_bytes());
    r[8..].copy_from_slice(&len.to_le_bytes());
    r
}

/// Writes `value` into new pages of `s`; returns its first page and every page, in order.
pub fn write<S: Pages>(s: &mut S, value: &[u8]) -> Result<(u64, Vec<u64>)> {
    let n = value.len().div_ceil(PER_PAGE).max(1);
    let mut pages = Vec::with_capacity(n);
    for _ in 0..n {
        match s.alloc() {
            Ok(p) => pages.push(p),
            Err(e) => {
                for p in pages {
                    s.recycle(p);
                }
                return Err(e);
            }
        }
    }
    for (i, part) in value.chunks(PER_PAGE).enumerate() {
        let mut p = PageBuf::new(OVERFLOW);
        p.set_overflow(part, pages.get(i + 1).copied().unwrap_or(0));
        s.write_direct(pages[i], &p);
    }
    if value.is_empty() {
        let mut p = PageBuf::new(OVERFLOW);
        p.set_overflow(&[], 0);
        s.write_direct(pages[0], &p);
    }
    Ok((pages[0], pages))
}

/// Follows the chain of a value at `first` of `len` bytes, calling `each` with every page
/// and its share of the value; what is wrong with the chain if it is not one (a page of
/// another kind, shares that do not add up, a chain longer than its length allows).
pub fn walk<S: PageSource>(
    s: &S,
    first: u64,
    len: u64,
    mut each: impl FnMut(u64, &S::Page<'_>, usize, usize),
) -> std::result::Result<(), String> {
    let most = len.div_ceil(PER_PAGE as u64).max(1);
    let (mut off, mut got, mut hops) = (first, 0u64, 0u64);
    loop {
        hops += 1;
        if hops > most {
            return Err(format!(
                "a value of {len} bytes at {first:#x} has more than {most} pages"
            ));
        }
        let p = s.page(off);
        if p.kind() != OVERFLOW {
            return Err(format!(
                "page {off:#x} of a value at {first:#x} has kind {}",
                p.kind()
            ));
        }
        let n = p.u32_at(4) as usize;
        if n > PER_PAGE || got + n as u64 > len {
            return Err(format!(
                "page {off:#x} of a value at {first:#x} holds {n} bytes, past its length {len}"
            ));
        }
        each(off, &p, OVERFLOW_HDR, n);
        got += n as u64;
        let next = p.u64_at(8);
        if next == 0 {
            break;
        }
        off = next;
    }
    if got != len {
        return Err(format!(
            "a value at {first:#x} holds {got} bytes, its reference says {len}"
        ));
    }
    Ok(())
}

/// Reads the value at `first` of `len` bytes.
pub fn read<S: PageSource>(s: &S, first: u64, len: u64) -> std::result::Result<Vec<u8>, String> {
    // The length comes from the file: grow as the pages prove it, not up front.
    let mut out = Vec::with_capacity((len as usize).min(1 << 20));
    walk(s, first, len, |_, p, at, n| {
        let start = out.len();
        out.resize(start + n, 0);
        p.copy_out(at, &mut out[start..]);
    })?;
    Ok(out)
}

/// Reads the key kept out of line at `first` of `len` bytes; `None` if its chain is not
/// one, or longer than any key can be.
pub fn read_key<S: PageSource>(s: &S, first: u64, len: u64) -> Option<Vec<u8>> {
    if len > MAX_TREE_KEY as u64 {
        return None;
    }
    read(s, first, len).ok()
}

/// The pages of the value at `first` of `len` bytes.
pub fn pages<S: PageSource>(s: &S, first: u64, len: u64) -> std::result::Result<Vec<u64>, String> {
    let mut out = Vec::new();
    walk(s, first, len, |off, _, _, _| out.push(off))?;
    Ok(out)
}
