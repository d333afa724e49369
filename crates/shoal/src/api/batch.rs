//! Batches: groups of writes whose `sync_writes` flushes are deferred to one at the end.
//!
//! With [`Options::sync_writes`](crate::Options::sync_writes) every write call flushes
//! (`msync` + `fsync`) before it returns. A batch defers the flushes of the writes one
//! thread makes to one store until the batch ends, and then flushes once: the group commit
//! of a store without transactions. Each write is still atomic on its own and visible to
//! other processes as soon as it is made; what the batch changes is only when the writes
//! are made durable against an OS crash.
//!
//! The state is per thread and per store: a thread-local list of the stores with a batch
//! open on this thread, each with its nesting depth. A write to another store inside a
//! batch flushes as usual, so no write is ever left unflushed by a batch that does not
//! cover its store; nested batches of one store flush once, when the outermost ends.

use crate::error::{Error, Result};
use crate::shared::Shared;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::Arc;

thread_local! {
    /// (store, depth) for every store with a batch open on this thread. A store is named
    /// by the address of its `Shared`, which one process has one of per file and which a
    /// batch keeps alive while it is open.
    static OPEN: RefCell<Vec<(usize, u32)>> = const { RefCell::new(Vec::new()) };
}

fn key(sh: &Shared) -> usize {
    sh as *const Shared as usize
}

fn enter(sh: &Shared) {
    OPEN.with(|o| {
        let mut o = o.borrow_mut();
        match o.iter_mut().find(|e| e.0 == key(sh)) {
            Some(e) => e.1 += 1,
            None => o.push((key(sh), 1)),
        }
    });
}

fn leave(sh: &Shared) {
    OPEN.with(|o| {
        let mut o = o.borrow_mut();
        if let Some(i) = o.iter().position(|e| e.0 == key(sh)) {
            o[i].1 -= 1;
            if o[i].1 == 0 {
                o.swap_remove(i);
            }
        }
    });
}

fn open_here(sh: &Shared) -> bool {
    OPEN.with(|o| o.borrow().iter().any(|e| e.0 == key(sh)))
}

/// With `sync_writes`, flushes after a write call, unless a batch of this store is open
/// on this thread: that one flushes once, at its end.
pub(crate) fn flush_unless_batching(sh: &Shared) -> Result<()> {
    if sh.sync_writes && !open_here(sh) {
        sh.flush()?;
    }
    Ok(())
}

/// Runs `f` in a batch of the store `sh` ([`Store::batch`](crate::Store::batch)).
///
/// The flush happens also when `f` failed, so that what it wrote before the error is as
/// durable as a single write's; a failed flush is reported in place of `f`'s result (the
/// writes may then not be durable, which matters more). If `f` unwinds, the batch is
/// closed on the way out (left open, it would silently turn `sync_writes` off for this
/// thread) and nothing is flushed.
pub(crate) fn run<T, E: From<Error>>(
    sh: &Shared,
    f: impl FnOnce() -> std::result::Result<T, E>,
) -> std::result::Result<T, E> {
    struct Leave<'a>(&'a Shared);
    impl Drop for Leave<'_> {
        fn drop(&mut self) {
            leave(self.0);
        }
    }
    enter(sh);
    let guard = Leave(sh);
    let r = f();
    drop(guard);
    flush_unless_batching(sh)?;
    r
}

/// An open batch of one store on the thread that opened it
/// ([`Store::begin_batch`](crate::Store::begin_batch)): until it ends, `sync_writes` does
/// not flush this thread's writes to the store; ending it flushes them once.
///
/// End it with [`Batch::end`], which reports a failed flush. Dropping it ends it too, but
/// a failed flush is then lost. It cannot leave its thread (`!Send`): the deferral is the
/// opening thread's.
#[must_use = "a batch defers flushes until it ends; end it with `Batch::end`"]
pub struct Batch {
    sh: Arc<Shared>,
    open: bool,
    /// `!Send` and `!Sync`: the batch is registered in its thread's list.
    _thread: PhantomData<*const ()>,
}

impl Batch {
    pub(crate) fn begin(sh: Arc<Shared>) -> Batch {
        enter(&sh);
        Batch {
            sh,
            open: true,
            _thread: PhantomData,
        }
    }

    /// Ends the batch and, with `sync_writes`, flushes the store once (unless another
    /// batch of the same store is still open on this thread: the outermost flushes).
    pub fn end(mut self) -> Result<()> {
        self.open = false;
        leave(&self.sh);
        flush_unless_batching(&self.sh)
    }

    /// Ends the batch without flushing, and says whether a flush is owed: true when the
    /// store has `sync_writes` and no other batch of it is open on this thread. The caller
    /// must then call [`Store::flush`](crate::Store::flush) to keep `sync_writes`'
    /// promise. For callers that flush on their own terms (a binding that first releases
    /// its interpreter's lock, which it cannot do while holding this `!Send` value).
    pub fn end_without_flush(mut self) -> bool {
        self.open = false;
        leave(&self.sh);
        self.sh.sync_writes && !open_here(&self.sh)
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        if self.open {
            leave(&self.sh);
            let _ = flush_unless_batching(&self.sh);
        }
    }
}

impl std::fmt::Debug for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("store", &self.sh.path)
            .finish()
    }
}
