//! Keys and values of `shoal bench`, made from their index on the fly: no array of keys is
//! read in the timed loops, so a run in random order pays only the store's cache misses,
//! not the tool's. The same functions, with the same test vectors, are in the peers'
//! harness (`bench/mdkv/`), so every system gets the same keys.

/// How a key is made from its index `i` (0 ≤ i < keys).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum KeysPattern {
    /// `file.mdtest.{i / 10000}.{i}`: mem_meta_kv_benchmark's sequential keys
    Seq,
    /// `file.mdtest.{a}.{b}`: two pseudo-random integers below `keys` (`a` a permutation of
    /// the indexes, so keys stay distinct), as its random keys
    Rand,
    /// `key:%0Nd`: the index zero-padded to --key-size bytes
    Padded,
}

/// The type of the values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueType {
    /// 4 bytes: the index as a little-endian `i32` (wrapping; the same in every phase)
    I32,
    /// N bytes: a 4-byte tag and the index in decimal, zero-padded
    Bytes(usize),
}

impl ValueType {
    /// Bytes per value.
    pub fn size(self) -> usize {
        match self {
            ValueType::I32 => 4,
            ValueType::Bytes(n) => n,
        }
    }
}

/// `i32` or `bytes:N`.
pub fn parse_value_type(s: &str) -> Result<ValueType, String> {
    if s == "i32" {
        return Ok(ValueType::I32);
    }
    s.strip_prefix("bytes:")
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|&n| n <= 1 << 30)
        .map(ValueType::Bytes)
        .ok_or_else(|| format!("{s:?} is not a value type (i32, or bytes:N with N ≤ 2^30)"))
}

const M1: u64 = 0x9e37_79b9_7f4a_7c15;
const M2: u64 = 0xbf58_476d_1ce4_e5b9;

/// A permutation of `0..n` that is cheap to compute for any index: a bijection of the
/// smallest power of two ≥ n (odd multiplications and xor-shifts, each invertible), walked
/// until it lands below n.
#[derive(Clone, Copy, Debug)]
pub struct Perm {
    n: u64,
    mask: u64,
    shift: u32,
    seed: u64,
}

impl Perm {
    /// A permutation of `0..n`; `seed` picks which one.
    pub fn new(n: u64, seed: u64) -> Perm {
        let mask = n.max(1).next_power_of_two() - 1;
        Perm {
            n,
            mask,
            shift: mask.count_ones().div_ceil(2).max(1),
            seed,
        }
    }

    fn round(&self, mut x: u64) -> u64 {
        x = x.wrapping_mul(M1).wrapping_add(self.seed) & self.mask;
        x ^= x >> self.shift;
        x = x.wrapping_mul(M2) & self.mask;
        x ^= x >> self.shift;
        x.wrapping_mul(M1) & self.mask
    }

    /// The image of `x` (< n).
    #[inline]
    pub fn get(&self, mut x: u64) -> u64 {
        loop {
            x = self.round(x);
            if x < self.n {
                return x;
            }
        }
    }
}

/// splitmix64's finalizer.
pub fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(M2);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Seeds of the key permutation (`rand`) and of the random read order (GET_RAND).
pub const KEY_SEED: u64 = 0x5348_4f41_4c4b_4559;
/// See [`KEY_SEED`].
pub const ORDER_SEED: u64 = 0x4f52_4445_5221_2121;

/// Writes `n` in decimal at the start of `out`; returns the length.
#[inline]
fn put_dec(out: &mut [u8], mut n: u64) -> usize {
    let mut tmp = [0u8; 20];
    let mut k = tmp.len();
    loop {
        k -= 1;
        tmp[k] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let len = tmp.len() - k;
    out[..len].copy_from_slice(&tmp[k..]);
    len
}

/// Writes `n` in decimal, zero-padded (or cut to its low digits) to fill `buf`.
fn fill_dec(buf: &mut [u8], mut n: u64) {
    for b in buf.iter_mut().rev() {
        *b = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

fn digits(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// Makes keys and values.
#[derive(Clone, Copy, Debug)]
pub struct Gen {
    pattern: KeysPattern,
    keys: u64,
    /// Bytes of a padded key.
    ksize: usize,
    prefix: bool,
    vtype: ValueType,
    perm: Perm,
}

const MDTEST: &[u8] = b"file.mdtest.";

impl Gen {
    /// Keys for indexes `0..keys`; `ksize` is the length of a padded key.
    pub fn new(
        pattern: KeysPattern,
        keys: u64,
        ksize: usize,
        vtype: ValueType,
    ) -> Result<Gen, String> {
        let need = digits(keys.saturating_sub(1));
        if pattern == KeysPattern::Padded && ksize < need {
            return Err(format!(
                "--key-size {ksize} is too small for {keys} distinct keys (at least {need})"
            ));
        }
        Ok(Gen {
            pattern,
            keys,
            ksize,
            prefix: ksize >= need + 4,
            vtype,
            perm: Perm::new(keys, KEY_SEED),
        })
    }

    /// The size a key buffer needs.
    pub fn key_buf_len(&self) -> usize {
        match self.pattern {
            KeysPattern::Padded => self.ksize,
            _ => MDTEST.len() + 20 + 1 + 20,
        }
    }

    /// Bytes per value.
    pub fn value_size(&self) -> usize {
        self.vtype.size()
    }

    /// The type of the values.
    pub fn value_type(&self) -> ValueType {
        self.vtype
    }

    /// Writes key `i` at the start of `buf` (at least [`Gen::key_buf_len`] bytes); returns
    /// its length.
    #[inline]
    pub fn key(&self, i: u64, buf: &mut [u8]) -> usize {
        let (a, b) = match self.pattern {
            KeysPattern::Padded => {
                if self.prefix {
                    buf[..4].copy_from_slice(b"key:");
                    fill_dec(&mut buf[4..self.ksize], i);
                } else {
                    fill_dec(&mut buf[..self.ksize], i);
                }
                return self.ksize;
            }
            KeysPattern::Seq => (i / 10_000, i),
            KeysPattern::Rand => (self.perm.get(i), mix64(i ^ KEY_SEED) % self.keys.max(1)),
        };
        buf[..MDTEST.len()].copy_from_slice(MDTEST);
        let mut k = MDTEST.len();
        k += put_dec(&mut buf[k..], a);
        buf[k] = b'.';
        k += 1;
        k + put_dec(&mut buf[k..], b)
    }

    /// Writes value `i` (with `tag` in it for byte values) into `buf` (value_size bytes).
    #[inline]
    pub fn value(&self, tag: &[u8; 4], i: u64, buf: &mut [u8]) {
        match self.vtype {
            ValueType::I32 => buf[..4].copy_from_slice(&(i as u32).to_le_bytes()),
            ValueType::Bytes(n) => {
                let t = n.min(4);
                buf[..t].copy_from_slice(&tag[..t]);
                fill_dec(&mut buf[t..n], i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(g: &Gen, i: u64) -> String {
        let mut b = vec![0u8; g.key_buf_len()];
        let n = g.key(i, &mut b);
        String::from_utf8(b[..n].to_vec()).unwrap()
    }

    #[test]
    fn padded_keys_and_values() {
        let g = Gen::new(KeysPattern::Padded, 1_000_000, 16, ValueType::Bytes(16)).unwrap();
        assert_eq!(key(&g, 42), "key:000000000042");
        let mut v = [0u8; 16];
        g.value(b"val:", 7, &mut v);
        assert_eq!(&v, b"val:000000000007");
        let g = Gen::new(KeysPattern::Padded, 1000, 3, ValueType::Bytes(2)).unwrap();
        assert_eq!(key(&g, 999), "999");
        let mut v = [0u8; 2];
        g.value(b"val:", 7, &mut v);
        assert_eq!(&v, b"va");
        assert!(Gen::new(KeysPattern::Padded, 10_000, 3, ValueType::I32).is_err());
    }

    /// The same vectors are checked for bench/mdkv/maps.cc (`--selftest`, by
    /// bench/mdkv/run.sh) and crates/shoal-bench/src/bin/mdkv-maps.rs: all three must make
    /// the same keys.
    #[test]
    fn mdtest_keys_match_the_harness() {
        let g = Gen::new(KeysPattern::Seq, 20_000_000, 0, ValueType::I32).unwrap();
        assert_eq!(key(&g, 0), "file.mdtest.0.0");
        assert_eq!(key(&g, 123_456), "file.mdtest.12.123456");
        let g = Gen::new(KeysPattern::Rand, 20_000_000, 0, ValueType::I32).unwrap();
        let got: Vec<String> = [0, 1, 19_999_999].iter().map(|&i| key(&g, i)).collect();
        assert_eq!(
            got,
            [
                "file.mdtest.11068231.14131662",
                "file.mdtest.6611818.6180956",
                "file.mdtest.12126993.17484513"
            ]
        );
        let p = Perm::new(1000, ORDER_SEED);
        assert_eq!([p.get(0), p.get(1), p.get(999)], [636, 103, 389]);
        let mut v = [0u8; 4];
        g.value(b"val:", 5, &mut v);
        assert_eq!(i32::from_le_bytes(v), 5);
    }

    #[test]
    fn permutations_are_permutations() {
        for n in [1u64, 2, 3, 7, 1000, 4096, 5000] {
            for seed in [KEY_SEED, ORDER_SEED] {
                let p = Perm::new(n, seed);
                let mut seen = vec![false; n as usize];
                for x in 0..n {
                    let y = p.get(x);
                    assert!(y < n && !seen[y as usize], "n {n}");
                    seen[y as usize] = true;
                }
            }
        }
    }

    #[test]
    fn value_types() {
        assert_eq!(parse_value_type("i32"), Ok(ValueType::I32));
        assert_eq!(parse_value_type("bytes:16"), Ok(ValueType::Bytes(16)));
        assert!(parse_value_type("bytes:").is_err());
        assert!(parse_value_type("u64").is_err());
    }
}
