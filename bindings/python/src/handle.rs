//! The engine handles of a Map or a FixedMap, which `Store.close()` may close while other
//! threads are in calls that use them. Generic over the kind of map (`shoal::KvMap`) so
//! that both kinds share one closing protocol and one GIL policy; each instance is
//! monomorphized, so a Map call costs what it would written for Map alone.
//!
//! This was an `ArcSwapOption<shoal::Map>`, whose `load()` (a thread-local debt slot, a
//! SeqCst fence, a compare-and-swap to pay the debt back) cost ~75 instructions of a
//! ~1,180-instruction `m[k]` (callgrind, bench/hotpath.sh). Here a call costs one atomic add and one atomic
//! subtract on a counter of calls in flight. `close()` never waits: it marks the handles
//! closed, and whoever finishes last (close itself when nothing is in flight) drops them.
//! No lock is taken anywhere, so a thread that released the GIL inside an engine call
//! cannot deadlock a thread that calls `close()`, nor the reverse.

use pyo3::Python;
use shoal::KvMap;
use std::cell::UnsafeCell;
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering::*};
use std::time::Duration;

/// Bit 0 of `Core::state`; the bits above count the calls in flight.
const CLOSED: usize = 1;
const ONE: usize = 2;

/// The engine handles of one map.
pub struct Handles<H> {
    /// Waits up to the store's lock timeout for a lock (or a bucket) that a live process
    /// holds.
    pub map: H,
    /// The same map with a lock timeout of zero: fails with `Error::Timeout` (changing
    /// nothing) instead of waiting, so that a call can run with the GIL held and release
    /// it only when it has to wait (see `Handles::quick`).
    pub fast: H,
}

/// Writes of more key and value bytes than this release the GIL at once instead of trying
/// `Handles::fast` first: releasing and taking back the GIL costs about as much as
/// copying 4 KiB, so for larger records it is a small part of the work, and other
/// threads run meanwhile.
pub const QUICK_BYTES: usize = 4096;

impl<H: KvMap> Handles<H> {
    /// Runs a single-key engine call (`f`, on one of the two handles) with the GIL held
    /// as long as it does not have to wait: first on `fast`, and only if that times out,
    /// with the GIL released, on `map`, which waits up to the lock timeout. Keeping the
    /// GIL saves a release and reacquire (~450 instructions, a sixth of an `m[k] = v`;
    /// callgrind, bench/hotpath.sh), and a call that has to wait (a lock or a bucket held
    /// by another thread or a stopped process) still lets other threads run.
    ///
    /// Retrying is sound because an engine call that fails with `Error::Timeout` has
    /// changed nothing the map shows (a record it appended is left dead, for the cleaner):
    /// callers of the normal handle rely on that too, and a zero timeout changes only when
    /// the error comes, not where. The wait on `fast` is bounded, and cannot deadlock:
    /// no thread waits for the GIL while it holds an engine lock. With a zero deadline the
    /// engine gives up after its spins and yields (well under a millisecond; index.rs
    /// `backoff`, txn.rs `lock_slow`: it used to first look at the deadline after 10 ms,
    /// which held the GIL that long behind a stuck holder).
    #[inline(always)]
    pub fn quick<T: Send>(
        &self,
        py: Python<'_>,
        mut f: impl FnMut(&H) -> shoal::Result<T> + Send,
    ) -> shoal::Result<T> {
        match f(&self.fast) {
            Err(shoal::Error::Timeout(_)) => self.wait(py, f),
            r => r,
        }
    }

    /// `quick` for a write of `bytes` key and value bytes; a larger one releases the GIL
    /// at once (see `QUICK_BYTES`).
    #[inline(always)]
    pub fn quick_write<T: Send>(
        &self,
        py: Python<'_>,
        bytes: usize,
        f: impl FnMut(&H) -> shoal::Result<T> + Send,
    ) -> shoal::Result<T> {
        if bytes <= QUICK_BYTES {
            self.quick(py, f)
        } else {
            self.wait(py, f)
        }
    }

    /// `quick`'s rare second attempt (and `quick_write`'s large writes), out of line:
    /// inlined, it kept PyO3 from inlining `__getitem__` into its trampoline (+37
    /// instructions per `m[k]`).
    #[cold]
    #[inline(never)]
    fn wait<T: Send>(
        &self,
        py: Python<'_>,
        mut f: impl FnMut(&H) -> shoal::Result<T> + Send,
    ) -> shoal::Result<T> {
        py.detach(|| f(&self.map))
    }
}

/// A map's handles, shared by the map and its iterators.
pub struct Core<H> {
    /// `CLOSED` | calls in flight × `ONE`.
    state: AtomicUsize,
    /// Set by whoever drops `handles` (exactly once).
    dropped: AtomicBool,
    handles: UnsafeCell<ManuallyDrop<Handles<H>>>,
}

/// A Map's handles.
pub type MapCore = Core<shoal::Map>;
/// A FixedMap's handles.
pub type FixedCore = Core<shoal::FixedMap>;

// SAFETY: `handles` is read only through an `InUse` (which keeps it alive: see `enter`)
// and dropped once, by the one thread that wins `dropped`; `Handles<H>` is Send + Sync
// (`KvMap` requires it of `H`).
unsafe impl<H: KvMap> Sync for Core<H> {}
// SAFETY: as for Sync.
unsafe impl<H: KvMap> Send for Core<H> {}

impl<H: KvMap> Core<H> {
    pub fn new(map: H) -> Core<H> {
        let fast = map.with_timeout(Duration::ZERO);
        Core {
            state: AtomicUsize::new(0),
            dropped: AtomicBool::new(false),
            handles: UnsafeCell::new(ManuallyDrop::new(Handles { map, fast })),
        }
    }

    /// The handles, kept alive until the returned guard is dropped; None once closed.
    #[inline]
    pub fn enter(&self) -> Option<InUse<'_, H>> {
        // Acquire: pairs with the Release of close(), so a call that starts after close
        // sees CLOSED.
        let s = self.state.fetch_add(ONE, Acquire);
        let g = InUse { core: self };
        if s & CLOSED != 0 {
            return None; // dropping `g` leaves again (and drops the handles if last)
        }
        Some(g)
    }

    /// Whether `close()` was called.
    #[inline]
    pub fn is_closed(&self) -> bool {
        self.state.load(Acquire) & CLOSED != 0
    }

    /// Closes the handles: later `enter` calls get None. Calls in flight finish with
    /// them; the last to finish drops them. Never waits.
    pub fn close(&self) {
        let s = self.state.fetch_or(CLOSED, AcqRel);
        if s < ONE {
            self.drop_handles();
        }
    }

    #[inline]
    fn leave(&self) {
        // Release: this call's use of the handles happens before whoever drops them.
        let s = self.state.fetch_sub(ONE, Release);
        if s == CLOSED | ONE {
            fence(Acquire);
            self.drop_handles();
        }
    }

    /// Drops the handles unless done already. Called only with CLOSED set and no call in
    /// flight: every later `enter` sees CLOSED and never touches them. Both `close` and a
    /// late `leave` (or a call that entered after the close) can get here.
    #[cold]
    fn drop_handles(&self) {
        if !self.dropped.swap(true, AcqRel) {
            // SAFETY: no InUse can reach the handles any more (see above), and `dropped`
            // lets only one thread in.
            unsafe { ManuallyDrop::drop(&mut *self.handles.get()) }
        }
    }
}

impl<H> Drop for Core<H> {
    fn drop(&mut self) {
        if !*self.dropped.get_mut() {
            // SAFETY: `&mut self`: nobody else holds a reference.
            unsafe { ManuallyDrop::drop(self.handles.get_mut()) }
        }
    }
}

/// A call's use of a map's handles (see `Core::enter`).
pub struct InUse<'a, H: KvMap> {
    core: &'a Core<H>,
}

impl<H: KvMap> Deref for InUse<'_, H> {
    type Target = Handles<H>;
    #[inline]
    fn deref(&self) -> &Handles<H> {
        // SAFETY: an InUse exists only for a call that entered before CLOSED was set
        // (enter returns None otherwise), and the handles are dropped only once CLOSED is
        // set and every such call has left.
        unsafe { &*self.core.handles.get() }
    }
}

impl<H: KvMap> Drop for InUse<'_, H> {
    #[inline]
    fn drop(&mut self) {
        self.core.leave();
    }
}
