//! Prefetching a lookup's lines before it needs them (batched gets, the cleaner's lookahead).

use super::*;
use crate::shared::Shared;

impl MapRef {
    /// Prefetches the lines that a lookup of the key of hash `h`, and then a locked write
    /// to it, touch first: both lines of its home bucket and its segment's lock line. A
    /// hint only (reads nothing it relies on); the cleaner issues it for the records of a
    /// step ahead of their liveness lookups, whose misses otherwise came one by one.
    pub(crate) fn prefetch_hash(&self, sh: &Shared, h: u64, end: u64) {
        if let Ok((_, _, e)) = self.locate(sh, h, end) {
            self.prefetch_home(sh, entry_seg(e), h);
        }
    }

    /// [`MapRef::prefetch_hash`] for a key whose segment `seg` is known.
    #[inline]
    pub(crate) fn prefetch_home(&self, sh: &Shared, seg: u64, h: u64) {
        let bo = bucket_off(seg, home_bucket(h, self.n_main));
        sh.r.prefetch(bo);
        sh.r.prefetch(bo + 64);
        sh.r.prefetch(seg + S_LOCK);
    }
}

/// Bytes of a record that [`MapRef::prefetch_record`] loads: a 2-byte header, a 16-byte
/// key, a 16-byte value, a UID trailer and a checksum.
pub(crate) const RECORD_PREFETCH: u64 = 48;

impl MapRef {
    /// The first stage of a staged lookup (`Map::get_many_with`): hashes `key` and
    /// starts loading its home bucket (both lines). Returns the hash and the bucket's
    /// offset (0 if the directory could not be read: the lookup itself will say why).
    #[inline]
    pub(crate) fn prefetch_bucket(&self, sh: &Shared, key: &[u8], end: u64) -> (u64, u64) {
        let h = hash(sh.g.seed, key);
        match self.locate(sh, h, end) {
            Ok((_, _, e)) => {
                let bo = bucket_off(entry_seg(e), home_bucket(h, self.n_main));
                sh.r.prefetch(bo);
                sh.r.prefetch(bo + 64);
                (h, bo)
            }
            Err(_) => (h, 0),
        }
    }

    /// The second stage: once the bucket at `bo` is (nearly) in, starts loading the
    /// record of its first slot whose tag matches `h`'s. Reads the bucket without any
    /// validation: a hint only.
    #[inline]
    pub(crate) fn prefetch_record(&self, sh: &Shared, h: u64, bo: u64, end: u64) {
        if bo == 0 {
            return;
        }
        let m = sh.r.bucket_tag_mask(bo, hash_tag(h));
        if m != 0 {
            let s = sh
                .w(bo + B_SLOT0 + 8 * m.trailing_zeros() as u64)
                .load(Relaxed);
            let off = slot_off_of(s);
            // A record's first RECORD_PREFETCH bytes: header, key and a small value, which
            // straddle two lines as often as not (records are packed, not line-aligned).
            // The second line was a second miss in series: 6.5 against 8.4-8.7 M/s at
            // 10 M keys of 16+16 bytes.
            if s != 0 && off + 64 + RECORD_PREFETCH <= end {
                sh.r.prefetch(off);
                if (off & 63) + RECORD_PREFETCH > 64 {
                    sh.r.prefetch(off + 64);
                }
            }
        }
    }
}
