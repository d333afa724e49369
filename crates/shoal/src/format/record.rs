//! Records: the header, key, value (and checksum) a variable-size map appends.

// ---- Records ----
/// Largest key, in bytes.
pub const MAX_KEY: usize = 64 * 1024;
/// Largest value, in bytes (4 GiB - 1).
pub const MAX_VALUE: u64 = u32::MAX as u64;

/// An encoded record header (no allocation: it is built on every write).
#[derive(Clone, Copy)]
pub struct RecordHeader {
    buf: [u8; 30],
    len: u8,
}

impl std::ops::Deref for RecordHeader {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[..self.len as usize]
    }
}

/// Short record headers (`FLAG_SHORT_RECORDS`): a record of map id below 8, key and
/// value lengths below 64 (the value length counting a UID trailer) has the 2-byte header
/// `0x80 | map << 4 | klen >> 2`, `(klen & 3) << 6 | vlen`.
///
/// Why: a small record's header was 3 of its ~35 bytes, and small records (counters, ids,
/// short strings) are where a byte per entry shows: at 10 M entries of 16-byte keys and
/// values it is 1 of the 16.8 bytes of overhead per entry. The bounds keep the common case
/// (a store's first maps; keys and values up to 63 bytes) in 15 bits, with bit 7 of the
/// first byte telling the forms apart.
pub const SHORT_MAX_MAP: u64 = 8;
/// Key and value lengths of a short header are below this (see [`SHORT_MAX_MAP`]).
pub const SHORT_MAX_LEN: u64 = 64;

/// Record header. With `short` (the store's `FLAG_SHORT_RECORDS`): the 2-byte form of
/// [`SHORT_MAX_MAP`] when it fits, else `map id, key length, value length` as LEB128
/// varints whose map id's first group has 6 bits (bit 6 the continuation, bit 7 clear).
/// Without `short` (version 3 files): three plain LEB128 varints.
pub fn record_header(map: u64, klen: u64, vlen: u64, short: bool) -> RecordHeader {
    let mut h = RecordHeader {
        buf: [0; 30],
        len: 0,
    };
    if short {
        if map < SHORT_MAX_MAP && klen < SHORT_MAX_LEN && vlen < SHORT_MAX_LEN {
            h.buf[0] = 0x80 | (map << 4 | klen >> 2) as u8;
            h.buf[1] = ((klen & 3) << 6 | vlen) as u8;
            h.len = 2;
            return h;
        }
        h.buf[0] = (map & 0x3f) as u8;
        h.len = 1;
        if map >= 0x40 {
            h.buf[0] |= 0x40;
            h.push_varint(map >> 6);
        }
    } else {
        h.push_varint(map);
    }
    h.push_varint(klen);
    h.push_varint(vlen);
    h
}

impl RecordHeader {
    fn push_varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf[self.len as usize] = (v as u8) | 0x80;
            self.len += 1;
            v >>= 7;
        }
        self.buf[self.len as usize] = v as u8;
        self.len += 1;
    }
}

/// The CRC32C a checksummed record ends with: over its header, key and value.
pub fn record_crc(parts: &[&[u8]]) -> u32 {
    parts.iter().fold(0, |c, p| crc32c::crc32c_append(c, p))
}

/// Decodes a record header from the first bytes of `buf` (at most 16), written with
/// `short` as [`record_header`] says: (map, klen, vlen, header length), or None if
/// malformed.
pub fn parse_record_header(buf: &[u8], short: bool) -> Option<(u64, u64, u64, u64)> {
    let mut pos = 0usize;
    let mut vals = [0u64; 3];
    let mut first = 0;
    if short {
        let b0 = *buf.first()? as u64;
        if b0 & 0x80 != 0 {
            let b1 = *buf.get(1)? as u64;
            return Some(((b0 >> 4) & 7, (b0 & 15) << 2 | b1 >> 6, b1 & 63, 2));
        }
        vals[0] = b0 & 0x3f;
        pos = 1;
        first = 1;
        if b0 & 0x40 != 0 {
            vals[0] |= read_varint(buf, &mut pos)? << 6;
        }
    }
    for v in vals[first..].iter_mut() {
        *v = read_varint(buf, &mut pos)?;
    }
    if vals[1] > MAX_KEY as u64 || vals[2] > MAX_VALUE {
        return None;
    }
    Some((vals[0], vals[1], vals[2], pos as u64))
}

/// One LEB128 varint of at most 6 groups (42 bits) at `buf[*pos..]`.
fn read_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let b = *buf.get(*pos)?;
        *pos += 1;
        v |= ((b & 0x7f) as u64) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
        shift += 7;
        if shift > 35 {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_roundtrip() {
        for short in [false, true] {
            for (m, k, v) in [
                (0, 0, 0),
                (1, 16, 16),
                (7, 63, 63),
                (8, 63, 63),
                (7, 64, 0),
                (7, 0, 64),
                (63, 127, 127),
                (64, 1, 1),
                (1023, 65536, u32::MAX as u64),
                (65535, 128, 300),
                (127, 128, 300),
            ] {
                let h = record_header(m, k, v, short);
                assert_eq!(
                    parse_record_header(&h, short),
                    Some((m, k, v, h.len() as u64)),
                    "short {short}: {m} {k} {v} as {:x?}",
                    &h[..]
                );
            }
        }
        assert_eq!(parse_record_header(&[0x80, 0x80], false), None);
        assert_eq!(parse_record_header(&[0x80], true), None);
        assert_eq!(parse_record_header(&[0x40, 0x80], true), None);
    }

    proptest::proptest! {
        /// Every header decodes to what was encoded, in both codings, and the short form
        /// is used exactly when it fits.
        #[test]
        fn record_headers_round_trip(
            m in proptest::prop_oneof![0..16u64, 0..65536u64],
            k in proptest::prop_oneof![0..80u64, 0..=MAX_KEY as u64],
            v in proptest::prop_oneof![0..80u64, 0..=MAX_VALUE],
            short: bool,
        ) {
            let h = record_header(m, k, v, short);
            proptest::prop_assert_eq!(parse_record_header(&h, short), Some((m, k, v, h.len() as u64)));
            let fits = short && m < SHORT_MAX_MAP && k < SHORT_MAX_LEN && v < SHORT_MAX_LEN;
            proptest::prop_assert_eq!(h.len() == 2, fits);
        }

        /// Any bytes (a torn or reused record) decode to a header within the limits and
        /// the buffer, or to None; never a panic.
        #[test]
        fn record_headers_from_any_bytes(buf in proptest::collection::vec(proptest::num::u8::ANY, 0..16), short: bool) {
            if let Some((_, k, v, hl)) = parse_record_header(&buf, short) {
                proptest::prop_assert!(hl as usize <= buf.len());
                proptest::prop_assert!(k <= MAX_KEY as u64 && v <= MAX_VALUE);
            }
        }
    }

    /// The header bytes FORMAT.md gives as examples ("Records").
    #[test]
    fn record_header_bytes() {
        let cases: [(u64, u64, u64, bool, &[u8]); 6] = [
            (0, 16, 16, true, &[0x84, 0x10]),
            (3, 5, 40, true, &[0xb1, 0x68]),
            (0, 16, 100, true, &[0x00, 0x10, 0x64]),
            (200, 16, 16, true, &[0x48, 0x03, 0x10, 0x10]),
            (0, 16, 16, false, &[0x00, 0x10, 0x10]),
            (200, 16, 16, false, &[0xc8, 0x01, 0x10, 0x10]),
        ];
        for (m, k, v, short, want) in cases {
            assert_eq!(
                &record_header(m, k, v, short)[..],
                want,
                "{m} {k} {v} {short}"
            );
        }
    }
}
