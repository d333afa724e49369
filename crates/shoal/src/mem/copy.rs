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
    #[cfg(feature = "failpoints")]
    audit::check();
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

/// The audit of writes outside write sections (tests with fail points only): every shared
/// write this process makes while `audit(true)` is in force, from a thread with no open
/// section, is reported to `on_unsectioned` with a backtrace.
#[cfg(feature = "failpoints")]
pub(crate) mod audit {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicBool, Ordering::*};

    static ON: AtomicBool = AtomicBool::new(false);
    static SINK: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

    thread_local! {
        static DEPTH: Cell<u32> = const { Cell::new(0) };
        static BUSY: Cell<bool> = const { Cell::new(false) };
    }

    /// A section opened (`true`) or closed on this thread.
    pub(crate) fn section(open: bool) {
        let _ = DEPTH.try_with(|d| {
            d.set(if open {
                d.get() + 1
            } else {
                d.get().saturating_sub(1)
            })
        });
    }

    /// Sections open on this thread (every store).
    #[cfg(test)]
    pub(crate) fn depth() -> u32 {
        DEPTH.with(|d| d.get())
    }

    /// Starts or stops the audit; stopping returns the backtraces of the writes found.
    pub(crate) fn set(on: bool) -> Vec<String> {
        if on != ON.swap(on, SeqCst) {
            super::super::word::write_hook_on(on);
        }
        std::mem::take(&mut *SINK.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Turns the audit on for the whole process when `SHOAL_SECTION_AUDIT` is set (its
    /// findings then go to stderr, each kind once): for processes of multi-process tests.
    pub(crate) fn from_env() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            if std::env::var_os("SHOAL_SECTION_AUDIT").is_some() {
                PRINT.store(true, SeqCst);
                set(true);
            }
        });
    }

    static PRINT: AtomicBool = AtomicBool::new(false);

    pub(super) fn check() {
        if !ON.load(Relaxed) {
            return;
        }
        let outside = DEPTH.try_with(|d| d.get() == 0).unwrap_or(false);
        let reentered = BUSY.try_with(|b| b.replace(true)).unwrap_or(true);
        if outside && !reentered {
            let bt = std::backtrace::Backtrace::force_capture().to_string();
            let mut sink = SINK.lock().unwrap_or_else(|e| e.into_inner());
            if PRINT.load(Relaxed) {
                let key: String = bt
                    .lines()
                    .filter(|l| l.contains("shoal::") && !l.contains("shoal::mem::"))
                    .take(6)
                    .collect::<Vec<_>>()
                    .join(" <- ");
                if !sink.contains(&key) {
                    eprintln!("write outside a section: {key}");
                    sink.push(key);
                }
            } else {
                sink.push(bt);
            }
        }
        if !reentered {
            let _ = BUSY.try_with(|b| b.set(false));
        }
    }
}
