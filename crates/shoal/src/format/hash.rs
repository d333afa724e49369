//! The hash and where a key is placed by it.

// ---- Hash ----
/// The format's hash: XXH3-64 of the key with the file's seed.
#[inline(always)]
pub fn hash(seed: u64, key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(key, seed)
}
/// Tag stored in a slot: the top 16 bits.
#[inline]
pub fn hash_tag(h: u64) -> u64 {
    h >> 48
}
/// Home bucket: bits 32..48 scaled onto the main buckets (fast range reduction).
#[inline]
pub fn home_bucket(h: u64, n_main: u64) -> u64 {
    (((h >> 32) & 0xffff) * n_main) >> 16
}
/// The tag of a key with hash `h` in a tagged fixed map's bucket ([`MF_TAGS`]): the
/// hash's top byte (the directory takes the low bits, the home bucket bits 32-47 and
/// the first stash bucket bits 16-31).
#[inline]
pub fn cell_tag(h: u64) -> u64 {
    h >> 56
}
/// Stash bucket a key overflowing from its home tries first.
#[inline]
pub fn first_stash(h: u64, n_stash: u64) -> u64 {
    (h >> 16 & 0xffff) % n_stash
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Golden vectors, computed independently with Python's `xxhash` package
    /// (`xxh3_64_intdigest(key, seed=...)`); docs/FORMAT.md quotes them. Each row: seed,
    /// key, hash, tag, home bucket of 59, first stash of 4, directory index at depth 4.
    #[test]
    fn golden_vectors() {
        for (seed, key, want, tag, home, stash, dir4) in GOLDEN {
            let h = hash(seed, key);
            let k = String::from_utf8_lossy(key);
            assert_eq!(h, want, "hash of {k:?} with seed {seed:#x}: {h:#018x}");
            assert_eq!(hash_tag(h), tag, "tag of {k:?}");
            // A fixed map's cell tag is the top byte: the slot tag's high half.
            assert_eq!(cell_tag(h), tag >> 8, "cell tag of {k:?}");
            assert_eq!(home_bucket(h, 59), home, "home bucket of {k:?}");
            assert_eq!(first_stash(h, 4), stash, "stash of {k:?}");
            assert_eq!(h & 15, dir4, "directory index of {k:?}");
        }
    }

    #[allow(clippy::type_complexity)]
    pub(crate) const GOLDEN: [(u64, &[u8], u64, u64, u64, u64, u64); 5] = [
        (
            0x0123_4567_89ab_cdef,
            b"key:000000000042",
            0xf564_e0bd_50e2_ded8,
            0xf564,
            51,
            2,
            8,
        ),
        (0, b"", 0x2d06_8005_38d3_94c2, 0x2d06, 29, 3, 2),
        (0, b"a", 0xe6c6_32b6_1e96_4e1f, 0xe6c6, 11, 2, 15),
        (
            0x0123_4567_89ab_cdef,
            b"file.mdtest.1.2",
            0x6fc2_48ad_7ba3_279d,
            0x6fc2,
            16,
            3,
            13,
        ),
        (
            0x0123_4567_89ab_cdef,
            &[b'x'; 100],
            0xa365_3f03_0569_6928,
            0xa365,
            14,
            1,
            8,
        ),
    ];
}
