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

    /// The golden vectors of tests/vectors/golden.tsv (computed independently with Python's
    /// `xxhash` package; every language of the cross-language matrix checks the same file,
    /// and docs/FORMAT.md quotes them). Each line: seed, key in hex ('-' for none), hash, tag,
    /// cell tag, home bucket of 59, first stash of 4, directory index at depth 4.
    #[test]
    fn golden_vectors() {
        let text = include_str!("../../../../tests/vectors/golden.tsv");
        let format_md = include_str!("../../../../docs/FORMAT.md");
        let num = |s: &str| match s.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16).unwrap(),
            None => s.parse().unwrap(),
        };
        let mut n = 0;
        for line in text
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            let f: Vec<&str> = line.split('\t').collect();
            assert_eq!(f.len(), 8, "golden.tsv line {line:?}");
            let key: Vec<u8> = match f[1] {
                "-" => Vec::new(),
                h => (0..h.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
                    .collect(),
            };
            let (seed, want) = (num(f[0]), num(f[2]));
            let h = hash(seed, &key);
            let k = String::from_utf8_lossy(&key);
            assert_eq!(h, want, "hash of {k:?} with seed {seed:#x}: {h:#018x}");
            assert_eq!(hash_tag(h), num(f[3]), "tag of {k:?}");
            assert_eq!(cell_tag(h), num(f[4]), "cell tag of {k:?}");
            // A fixed map's cell tag is the top byte: the slot tag's high half.
            assert_eq!(cell_tag(h), hash_tag(h) >> 8, "cell tag of {k:?}");
            assert_eq!(home_bucket(h, 59), num(f[5]), "home bucket of {k:?}");
            assert_eq!(first_stash(h, 4), num(f[6]), "stash of {k:?}");
            assert_eq!(h & 15, num(f[7]), "directory index of {k:?}");
            // FORMAT.md's table quotes the same vectors: it must not drift from the file.
            assert!(
                format_md.contains(&format!("| {want:#018x} |")),
                "docs/FORMAT.md's golden vectors lack {want:#018x}"
            );
            n += 1;
        }
        assert_eq!(n, 5, "golden.tsv holds 5 vectors");
    }
}
