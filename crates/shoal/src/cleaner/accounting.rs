//! How much space is dead, and when it is worth cleaning.

use super::*;
use crate::kinds::AnyKind;
use crate::object::Kind;
use crate::shared::Shared;

/// Live record bytes of every object in the store (exact when no write is in flight).
pub(crate) fn total_live_bytes(sh: &Shared) -> u64 {
    let mut total: u64 = 0;
    for id in 0..sh.g.n_catalog {
        if let Ok(Some(k)) = AnyKind::open(sh, id) {
            total = total.wrapping_add(k.live_record_bytes(sh));
        }
    }
    total
}

/// Dead bytes the cleaner can reclaim: data bytes minus live records minus the unwritten
/// ends of the chunks threads are filling (those are not garbage; counting them made a
/// small store clean forever without gaining anything) minus the ends of large records'
/// runs past their records (`H_LARGE_SLACK`: freed with the record, never by cleaning; a
/// store of values just over a chunk counted nearly half its data dead, and every write
/// ran a cleaning step that found nothing to clean).
pub(crate) fn reclaimable_dead(sh: &Shared) -> u64 {
    let cs = sh.g.chunk_size();
    let mut tails = 0u64;
    for t in 0..sh.g.n_txn {
        let b = sh.g.txn_slot(t);
        let c = sh.w(b + T_DATA_CHUNK).load(Relaxed);
        if c != 0 {
            let bump = sh.w(b + T_BUMP).load(Relaxed);
            // Both come from the file: no overflow whatever they hold.
            tails = tails.saturating_add(c.saturating_add(cs).saturating_sub(bump).min(cs));
        }
    }
    sh.w(H_DATA_BYTES)
        .load(Acquire)
        .saturating_sub(total_live_bytes(sh))
        .saturating_sub(tails)
        .saturating_sub(sh.w(H_LARGE_SLACK).load(Acquire))
}

/// Whether enough space is dead for a cleaning step to be worth it: a seventh of the
/// data (a tenth when the store is close to its maximum size: less room left to grow than
/// a quarter of its data).
///
/// Why a seventh: the engine's promise is dead space at most a fifth of the live data
/// under steady overwrite ("at most 20% of the data"; a fifth of the live data
/// is a sixth of the data bytes, the stricter reading), and the cleaner trails the
/// threshold by a point or two. A step moves the live records of its victim to reclaim
/// the dead ones, so the less dead space is tolerated, the more live records move per
/// overwrite. This was a quarter, for speed, which broke the bound (dead space at 25% of
/// the data, 34% of the live data). The cost fell when the step began to prefetch ahead of
/// its liveness lookups ([`Lookahead`]). Overwriting 1 M keys of 16-byte values in a new
/// random order each pass (`cargo run --release -p shoal --example overwrite`), passes
/// 3-4: a quarter without prefetching ran 0.31-0.33 M puts per CPU-second, a seventh with
/// it 0.28-0.32 M, dead space at most 17.8% of the live data.
pub(crate) fn worth_cleaning(sh: &Shared, dead: u64) -> bool {
    let data = sh.w(H_DATA_BYTES).load(Relaxed);
    if data < 4 * sh.g.chunk_size() {
        return false;
    }
    dead.saturating_mul(dead_divisor(sh, data)) > data
}

/// Whether the store has less room left to grow (up to its maximum size, plus its free
/// runs) than a quarter of its `data` bytes.
pub(crate) fn near_cap(sh: &Shared, data: u64) -> bool {
    let limit = sh.g.max_size.min(sh.reserve);
    let room = limit
        .saturating_sub(sh.file_end())
        .saturating_add(sh.w(H_FREE_BYTES).load(Relaxed));
    room < data / 4
}

/// The threshold of [`worth_cleaning`]: dead space is worth cleaning above `data / n`.
pub(crate) fn dead_divisor(sh: &Shared, data: u64) -> u64 {
    if near_cap(sh, data) {
        10
    } else {
        7
    }
}
