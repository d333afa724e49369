//! How a map's flags turn the keys and values its users see into the keys the tree sorts.
//!
//! - **Integer keys** ([`OF_U64_KEYS`]): a user's key is a u64 in the conventions'
//!   encoding (8 bytes, little-endian); the tree keeps it big-endian, so that bytewise
//!   order is numeric order.
//! - **Duplicates** ([`OF_DUPS`]): each (key, value) pair is one tree entry whose key is
//!   the user's key escaped (every 0x00 becomes 0x00 0xFF) and terminated by 0x00 0x00,
//!   then the value, and whose value is empty. The escape keeps the pairs sorted by key
//!   first and value second: a key's terminator sorts below any longer key's next byte
//!   (0x01 and up, or the 0xFF of an escaped 0x00), so no key's pairs interleave another's.

use crate::error::{Error, Result};
use crate::format::{OF_DUPS, OF_U64_KEYS};
use std::borrow::Cow;

/// Flags a map may carry.
pub(crate) const KNOWN_FLAGS: u64 = OF_U64_KEYS | OF_DUPS;

/// The tree's form of the user key `key` of a map with `flags`, before any duplicate
/// encoding.
pub(crate) fn tree_key(flags: u64, key: &[u8]) -> Result<Cow<'_, [u8]>> {
    if flags & OF_U64_KEYS == 0 {
        return Ok(Cow::Borrowed(key));
    }
    let k: [u8; 8] = key.try_into().map_err(|_| {
        Error::InvalidArgument(format!(
            "this ordered map has integer keys: 8 bytes (a little-endian u64), not {}",
            key.len()
        ))
    })?;
    Ok(Cow::Owned(u64::from_le_bytes(k).to_be_bytes().to_vec()))
}

/// The user's form of the tree key `k` (the inverse of [`tree_key`]); what is wrong with
/// it if the file holds a key the map cannot have.
pub(crate) fn user_key(flags: u64, k: &[u8]) -> std::result::Result<Vec<u8>, String> {
    if flags & OF_U64_KEYS == 0 {
        return Ok(k.to_vec());
    }
    let b: [u8; 8] = k.try_into().map_err(|_| {
        format!(
            "ordered map with integer keys holds a key of {} bytes",
            k.len()
        )
    })?;
    Ok(u64::from_be_bytes(b).to_le_bytes().to_vec())
}

/// The escaped, terminated form of `key`: the prefix of every pair of `key`.
pub(crate) fn dup_prefix(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + 2);
    for &b in key {
        out.push(b);
        if b == 0 {
            out.push(0xff);
        }
    }
    out.extend_from_slice(&[0, 0]);
    out
}

/// The smallest tree key above every pair of the key whose prefix is `prefix` (its
/// terminator 0x00 0x00 made 0x00 0x01), and below every pair of any greater key.
pub(crate) fn dup_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    *end.last_mut().expect("a prefix ends with its terminator") = 1;
    end
}

/// The tree entry of the pair (`key`, `value`).
pub(crate) fn dup_entry(key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut e = dup_prefix(key);
    e.extend_from_slice(value);
    e
}

/// Splits a pair's tree entry into its key (unescaped) and value; what is wrong with it
/// if it is no pair's entry.
pub(crate) fn split_dup(e: &[u8]) -> std::result::Result<(Vec<u8>, &[u8]), String> {
    let mut key = Vec::with_capacity(e.len());
    let mut i = 0;
    while i + 1 < e.len() {
        match (e[i], e[i + 1]) {
            (0, 0) => return Ok((key, &e[i + 2..])),
            (0, 0xff) => {
                key.push(0);
                i += 2;
            }
            (0, b) => {
                return Err(format!(
                    "ordered multimap entry: byte {b:#04x} after a 0x00 at {i}"
                ))
            }
            (b, _) => {
                key.push(b);
                i += 1;
            }
        }
    }
    Err("ordered multimap entry without a key terminator".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_sort_by_key_then_value() {
        let keys: &[&[u8]] = &[
            b"", b"\0", b"\0\0", b"\0\x01", b"a", b"a\0", b"a\0b", b"a\x01", b"b",
        ];
        let vals: &[&[u8]] = &[b"", b"\0", b"\xff", b"x"];
        let mut pairs = Vec::new();
        for k in keys {
            for v in vals {
                pairs.push((k.to_vec(), v.to_vec()));
            }
        }
        let mut enc: Vec<Vec<u8>> = pairs.iter().map(|(k, v)| dup_entry(k, v)).collect();
        enc.sort();
        pairs.sort();
        for (e, (k, v)) in enc.iter().zip(&pairs) {
            let (dk, dv) = split_dup(e).unwrap();
            assert_eq!((&dk, dv), (k, v.as_slice()));
        }
        // Every pair of a key lies in [prefix, end), and nothing else does.
        for k in keys {
            let (p, end) = (dup_prefix(k), dup_end(&dup_prefix(k)));
            for e in &enc {
                let inside = e.as_slice() >= p.as_slice() && e.as_slice() < end.as_slice();
                assert_eq!(
                    inside,
                    split_dup(e).unwrap().0 == *k,
                    "key {k:?} entry {e:?}"
                );
            }
        }
    }

    #[test]
    fn integer_keys_sort_as_numbers() {
        let mut ns = [0u64, 1, 255, 256, 1 << 32, u64::MAX - 1, u64::MAX];
        let mut ks: Vec<Vec<u8>> = ns
            .iter()
            .map(|n| {
                tree_key(OF_U64_KEYS, &n.to_le_bytes())
                    .unwrap()
                    .into_owned()
            })
            .collect();
        ks.sort();
        ns.sort();
        for (k, n) in ks.iter().zip(ns) {
            assert_eq!(user_key(OF_U64_KEYS, k).unwrap(), n.to_le_bytes());
        }
        assert!(tree_key(OF_U64_KEYS, b"short").is_err());
    }

    #[test]
    fn bad_pair_entries_are_corrupt() {
        assert!(split_dup(b"abc").is_err());
        assert!(split_dup(b"a\0\x05").is_err());
        assert!(split_dup(b"a\0").is_err());
    }
}
