//! Online checks of the allocator for soak runs (the `paranoid` feature; nothing at all in
//! normal builds).
//!
//! `Store::check` finds a chunk freed while a slot still named a record in it only at the
//! end of a run, long after the free, with nothing left to say who freed it or how. With
//! this feature every take, free, merge and page release of a run first scans the whole
//! index of every map for slots pointing into the run, and aborts the process (with a
//! backtrace, as the soak reports a worker that died unkilled) if one keeps pointing there:
//! the first bad step is stopped where it happens. Each step is also traced, one line per
//! step, to the file named by the `SHOAL_TRACE` environment variable (if set), so that a
//! chunk's history can be read back across processes.
//!
//! Why this exists: a chunk of live records freed under the soak (a live process judged
//! dead, docs/RELIABILITY.md) took hours to find without it. With the race's window widened, a soak with
//! these checks stopped within 30 seconds at the merge of a free run that a live record
//! lay in. Costly (a scan of the whole index per step): for soaks, never for benchmarks.
//!
//! `scripts/soak.sh --paranoid` builds the soak with it.

/// Aborts the process if a slot keeps pointing into `[lo, hi)` (see the module docs):
/// nothing without the feature. The message arguments say which step asks.
macro_rules! unreferenced {
    ($sh:expr, $lo:expr, $hi:expr, $($arg:tt)*) => {
        #[cfg(feature = "paranoid")]
        $crate::paranoid::assert_unreferenced($sh, $lo, $hi, format_args!($($arg)*));
    };
}
pub(crate) use unreferenced;

#[cfg(feature = "paranoid")]
pub(crate) use on::*;

#[cfg(feature = "paranoid")]
mod on {
    use crate::format::*;
    use crate::shared::Shared;
    use std::sync::atomic::Ordering::*;

    /// The free list as a growth sees it: its length, its bytes and its longest run (the
    /// soak's file grew while much of it was free).
    pub(crate) fn free_list_summary(sh: &Shared) -> String {
        let (mut n, mut chunks, mut longest) = (0u64, 0u64, 0u64);
        let mut cur = sh.w(H_FREE_HEAD).load(Acquire);
        while cur != 0 && n < 100_000 {
            let run = sh.w(cur + K_RUN).load(Acquire);
            n += 1;
            chunks += run;
            longest = longest.max(run);
            cur = sh.w(cur + K_NEXT).load(Acquire);
        }
        format!(
            "{n} runs, {chunks} chunks (free bytes {}), longest {longest}",
            sh.w(H_FREE_BYTES).load(Acquire)
        )
    }

    /// Aborts if a slot points into `[lo, hi)` at three looks 2 ms apart (a slot read
    /// mid-write may name a record that has just moved; one that stays is a live record in
    /// a run being taken, freed, merged or released).
    pub(crate) fn assert_unreferenced(sh: &Shared, lo: u64, hi: u64, what: std::fmt::Arguments) {
        let mut found = (sh.hooks.refs_into)(sh, lo, hi);
        for _ in 0..3 {
            if found.is_empty() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
            let again = (sh.hooks.refs_into)(sh, lo, hi);
            found.retain(|f| again.contains(f));
        }
        if found.is_empty() {
            return;
        }
        let msg = format!(
            "shoal paranoid check: {what}: [{lo:#x}, {hi:#x}) is still referenced by {} slots, e.g. (map, slot, record) {:x?}",
            found.len(),
            &found[..found.len().min(5)]
        );
        crate::rt::trace_line(format_args!("{msg}"));
        eprintln!("{msg}\n{}", std::backtrace::Backtrace::force_capture());
        std::process::abort();
    }

    #[cfg(all(test, not(shuttle)))]
    mod tests {
        /// The scan finds the slot of a live record in its chunk, and nothing in a range
        /// that holds no record (else the checks could never fire, or always would).
        #[test]
        fn the_scan_finds_the_slots_of_live_records_and_only_those() {
            let d = tempfile::tempdir_in("/dev/shm").unwrap();
            let s = crate::Store::open(d.path().join("p.shoal")).unwrap();
            let m = s.map("m").unwrap();
            for i in 0..100u32 {
                m.put(format!("k{i}").as_bytes(), b"value").unwrap();
            }
            let off = m.m.record_of(&s.sh, b"k7").unwrap();
            let c = s.sh.g.chunk_of(off);
            let found = (s.sh.hooks.refs_into)(&s.sh, c, c + s.sh.g.chunk_size());
            assert!(
                found.iter().any(|&(_, _, o)| o == off),
                "k7's record at {off:#x} not found: {found:x?}"
            );
            assert_eq!(found.len(), 100, "every key's record is in that chunk");
            assert!((s.sh.hooks.refs_into)(&s.sh, off + 1, off + 2).is_empty());
            // The header and tables before the first chunk hold no record.
            assert!((s.sh.hooks.refs_into)(&s.sh, 0, s.sh.g.chunks_off).is_empty());
        }
    }
}
