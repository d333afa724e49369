//! Copy before write: which address ranges of this process belong to stores under a hot
//! backup, and the dispatch from the write hook to the backup that copies a block before
//! its first write (docs/DESIGN.md, "Hot backup").
//!
//! The registry lives here, in the hook's own layer, so that the store's mapping leaves it
//! when the mapping's owner drops (`forget`): an address range that a later mapping reuses
//! is never taken for a store being copied.

use std::sync::{Arc, RwLock};

/// Copy unit of a hot backup: small enough that a writer's copy costs microseconds, large
/// enough that the block map of a 4 GiB store is 512 KiB.
pub(crate) const BLOCK: u64 = 64 << 10;

/// What copies block `b` (bytes `b × BLOCK ..` of a store) before it is first written.
pub(crate) trait BlockCopier: Send + Sync {
    /// Returns once block `b` may be written: copied (by this thread or another), or not
    /// part of the copy.
    fn before_write(&self, b: u64);
}

struct Range {
    base: usize,
    len: usize,
    copier: Arc<dyn BlockCopier>,
}

static RANGES: RwLock<Vec<Range>> = RwLock::new(Vec::new());

/// Starts copying before writes to `[base, base + len)` with `copier`, in place of any
/// copier the range had.
pub(crate) fn register(base: usize, len: usize, copier: Arc<dyn BlockCopier>) {
    let mut r = RANGES.write().unwrap_or_else(|e| e.into_inner());
    if let Some(i) = r.iter().position(|x| x.base == base) {
        r[i] = Range { base, len, copier };
        return;
    }
    r.push(Range { base, len, copier });
    super::word::write_hook_on(true);
}

/// Stops copying before writes to the range at `base` (nothing if it has no copier).
pub(crate) fn forget(base: usize) {
    let mut r = RANGES.write().unwrap_or_else(|e| e.into_inner());
    if let Some(i) = r.iter().position(|x| x.base == base) {
        r.swap_remove(i);
        super::word::write_hook_on(false);
    }
}

/// The hook: copies the block holding `addr` first if its range is under a backup. Runs
/// from thread-local destructors too, so it uses no thread-local and never panics.
pub(super) fn before_write(addr: usize) {
    let hit = {
        let r = RANGES.read().unwrap_or_else(|e| e.into_inner());
        r.iter()
            .find(|x| addr >= x.base && addr - x.base < x.len)
            .map(|x| (x.base, x.copier.clone()))
    };
    if let Some((base, c)) = hit {
        c.before_write((addr - base) as u64 / BLOCK);
    }
}
