//! Records in data chunks: reading and checking their headers and checksums.

use crate::error::Error;
use crate::format::*;
use crate::shared::Shared;
use std::sync::atomic::Ordering::*;

/// Reads and parses the record header at `off`, checking it lies inside the file.
/// `(map, klen, vlen, header length)`.
///
/// `end` bounds the record. On the read paths it is a `file_end` loaded earlier, which may
/// be stale: the file only grows, so before rejecting an offset past it, look again
/// (`live_end`). A record published after growth is otherwise mistaken for garbage.
#[inline(always)]
pub(crate) fn read_record_header(sh: &Shared, off: u64, end: u64) -> Option<(u64, u64, u64, u64)> {
    // Fast paths, from one window: a short header (bit 7 of the first byte), or a
    // 3-byte one whose map id, key and value lengths take one byte each.
    if off >= sh.g.chunks_off && off + 8 <= end {
        let x = sh.r.window(off, 8);
        if sh.g.short_records && x & 0x80 != 0 {
            let (m, k, v) = ((x >> 4) & 7, (x & 15) << 2 | (x >> 14) & 3, (x >> 8) & 63);
            if off + 2 + k + v + sh.g.trailer <= end {
                return Some((m, k, v, 2));
            }
        } else {
            // A long header's map id has 6 bits in its first byte with short records
            // (bit 6 its continuation), 7 without.
            let (id_bits, more) = if sh.g.short_records {
                (0x3f, 0x80_80c0)
            } else {
                (0x7f, 0x80_8080)
            };
            let (m, k, v) = (x & id_bits, (x >> 8) & 0x7f, (x >> 16) & 0x7f);
            if x & more == 0 && off + 3 + k + v + sh.g.trailer <= end {
                return Some((m, k, v, 3));
            }
        }
    }
    read_record_header_slow(sh, off, end)
}

#[cold]
#[inline(never)]
pub(crate) fn read_record_header_slow(
    sh: &Shared,
    off: u64,
    end: u64,
) -> Option<(u64, u64, u64, u64)> {
    read_record_header_in(sh, off, end).or_else(|| {
        let fresh = sh.file_end();
        if fresh > end {
            read_record_header_in(sh, off, fresh)
        } else {
            None
        }
    })
}

/// Like [`read_record_header`] with a fixed bound (the checker's used marks).
pub(crate) fn read_record_header_in(
    sh: &Shared,
    off: u64,
    end: u64,
) -> Option<(u64, u64, u64, u64)> {
    if off < sh.g.chunks_off || off >= end {
        return None;
    }
    let avail = (end - off).min(16) as usize;
    let mut buf = [0u8; 16];
    sh.r.read_bytes(off, &mut buf[..avail]);
    let (m, k, v, hl) = parse_record_header(&buf[..avail], sh.g.short_records)?;
    if off + hl + k + v + sh.g.trailer > end {
        return None;
    }
    Some((m, k, v, hl))
}

/// Whether the record at `off`, whose 4-byte checksum is at `crc_at`, matches it (stores
/// with `FLAG_CHECKSUMS`; `[off, crc_at + 4)` must lie inside the file). Reads the bytes
/// from the mapping: on an optimistic read a mismatch means something only once the read
/// validated, since a concurrent write may have torn the copy.
pub(crate) fn record_crc_ok(sh: &Shared, off: u64, crc_at: u64) -> bool {
    sh.r.crc32c(off, crc_at - off) == sh.r.window(crc_at, 4) as u32
}

/// The error of a read that found its record failing its checksum.
pub(crate) fn checksum_failed(sh: &Shared, map: &str, off: u64) -> Error {
    sh.corrupt(format!(
        "map {map:?}: the record at {off:#x} fails its checksum (torn or corrupt; repair drops it)"
    ))
}

/// Walks data chunk `c`'s records as the cleaner walks them: from its first record (or
/// `from`, a record start) up to `used`, stopping at the first bytes that are no record. Calls `f` on each record's
/// offset and returns where the walk stopped (`used` exactly, in a sound chunk: its
/// records tile it).
pub(crate) fn walk_records(
    sh: &Shared,
    c: u64,
    from: u64,
    used: u64,
    mut f: impl FnMut(u64),
) -> u64 {
    let mut pos = from.max(c + CHUNK_HDR);
    let used = used.min(c + sh.g.chunk_size());
    while pos < used {
        let Some((_, k, v, hl)) = read_record_header_in(sh, pos, used) else {
            break;
        };
        f(pos);
        pos += hl + k + v + sh.g.trailer;
    }
    pos
}

/// The chunk-level used mark below which records of the chunk holding `off` are complete,
/// or None when `off` is not in a data chunk.
pub(crate) fn data_limit(sh: &Shared, off: u64) -> Option<u64> {
    let g = &sh.g;
    if off < g.chunks_off || off >= sh.file_end() {
        return None;
    }
    let c = g.chunk_of(off);
    let used = match sh.w(c + K_KIND).load(Acquire) {
        CK_SEALED | CK_LARGE => sh.w(c + K_USED).load(Acquire),
        CK_DATA => {
            let t = sh.w(c + K_OWNER).load(Acquire);
            if t < g.n_txn && sh.w(g.txn_slot(t) + T_DATA_CHUNK).load(Acquire) == c {
                sh.w(g.txn_slot(t) + T_BUMP).load(Acquire)
            } else {
                c + g.chunk_size()
            }
        }
        _ => return None,
    };
    // Records are read below the mark, which comes from the file: never past the file
    // end (as in the checker, where such a mark was a SIGBUS).
    Some(used.min(sh.file_end()))
}
