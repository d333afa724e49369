//! Records in data chunks: reading and checking their headers and checksums.

use crate::error::Error;
use crate::format::*;
use crate::shared::Shared;

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
