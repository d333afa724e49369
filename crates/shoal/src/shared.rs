//! One open store in this process: the mapping, the process's registration (its process
//! slot and liveness lock), and the per-thread txn slots.
//!
//! Liveness. Process slot `p` is alive exactly while some open file description holds the
//! OFD write lock on byte `LIVENESS_BASE + p` of the store file. A registering process
//! takes a slot by taking that byte lock (the kernel arbitrates races), bumps the slot's
//! generation, and from then on every txn slot it claims carries `(p, generation)`. A txn
//! slot is therefore alive iff its process slot still has that generation and the byte is
//! locked. The kernel drops the lock the instant the process dies; no PID is trusted.

use crate::error::{Error, Result};
use crate::format::*;
use crate::mem::Mapping;
use crate::sys;
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::Mutex;
use std::time::Duration;

static NEXT_STORE_ID: AtomicU64 = AtomicU64::new(1);

pub(crate) struct Registration {
    pub proc_idx: u64,
    pub proc_gen: u64,
    pub lock_fd: Option<OwnedFd>,
    pub fd_in_fork_table: bool,
}

/// An interrupted intent of a dead txn, copied out of its slot for the recovery of its
/// kind (see [`Hooks::intents`]).
pub(crate) struct Intent {
    /// The intent's arguments (`T_ARGS`).
    pub args: [u64; T_NARGS as usize],
    /// The intent's redo list (`T_REDO`, `T_REDO_N` entries).
    pub redo: Vec<(u64, u64)>,
}

/// Finishes or undoes an interrupted intent of one kind, idempotently (a recoverer killed
/// halfway is followed by another), with every lock the dead txn held still naming it.
pub(crate) type IntentHandler = fn(sh: &Shared, intent: &Intent) -> Result<()>;

/// How the layers below the kinds of objects reach them without naming them: the kinds
/// register here (`kinds::HOOKS`), and every open store carries the table.
pub(crate) struct Hooks {
    /// The recovery of each intent kind (`T_KIND`), by kind number. Kind 1 (`I_REDO`, a
    /// plain redo list) is the txn layer's own; a kind nobody registered is corruption.
    pub intents: [Option<IntentHandler>; INTENT_KINDS as usize],
    /// Whether no object references the record at this offset (the allocator's free of
    /// a large run: it must not free a record some object still names).
    pub record_unreferenced: fn(&Shared, u64) -> bool,
    /// The paranoid build's scan: every (object, referencing word, record) whose record
    /// lies in `[lo, hi)`.
    #[cfg(feature = "paranoid")]
    pub refs_into: RefsInto,
}

/// The paranoid scan's signature (see [`Hooks::refs_into`]): (object, referencing word,
/// record) of every record in `[lo, hi)`.
#[cfg(feature = "paranoid")]
pub(crate) type RefsInto = fn(&Shared, u64, u64) -> Vec<(u64, u64, u64)>;

/// Intent kinds are below this.
pub(crate) const INTENT_KINDS: u64 = 8;

/// State shared by every handle on one open store in this process.
pub(crate) struct Shared {
    /// The mapping of the file (a [`crate::mem::Region`] through `Deref`).
    pub r: Mapping,
    pub g: Geometry,
    pub path: PathBuf,
    pub file: File,
    pub id: u64,
    pub reserve: u64,
    pub lock_timeout: Duration,
    reg: Mutex<Registration>,
    /// `(fork generation << 32) | registration count`: changes whenever this process's
    /// identity in the store changes, invalidating cached txn slots.
    pub epoch: AtomicU64,
    /// The owner word of this process's txn slots.
    pub owner_word: AtomicU64,
    pub proc_idx: AtomicU64,
    /// The file is on disk (not tmpfs): an OS crash can interrupt it, so it is flushed
    /// and marked clean on the last close, and verified on open when not clean.
    pub durable: bool,
    /// Flush after every write call (`Options::sync_writes`).
    pub sync_writes: bool,
    /// This process found the store sound when it attached: only then may it mark the
    /// store clean when it is the last to close.
    pub verified: AtomicBool,
    /// End of the space this process has allocated past the file's end
    /// ([`crate::alloc::allocate_ahead`]); `u64::MAX` when the filesystem cannot.
    pub ahead: AtomicU64,
    /// End of the space past the file's end that this process *has* allocated: every
    /// byte from the file's end up to it is backed (`ahead` is claimed before its
    /// `fallocate` runs, and may be ahead of this). See `alloc::grow_file`.
    pub ahead_done: AtomicU64,
    /// Pretouching (`Options::pretouch`, on tmpfs only): the guard that keeps the
    /// background thread off the mapping once the store is closing. `None`: off.
    pub pretouch: Option<std::sync::Arc<crate::sys::pretouch::Guard>>,
    /// Opened read-only (`OpenMode::ReadOnly`): mapped without write access, never
    /// registered, and nothing here writes to the file (see [`Shared::read_only_error`]).
    pub read_only: bool,
    /// The kinds of objects' hooks (intent recovery).
    pub hooks: &'static Hooks,
    /// The hot backup epoch whose block copies this process makes before its writes to
    /// this mapping (`backup::join`), 0 none.
    pub backup_joined: AtomicU64,
    /// Held while joining or leaving an epoch, so that threads join it once.
    pub backup_join: Mutex<()>,
    /// When (ms, `backup::check_due`'s clock) a joiner last looked whether the backup
    /// of the joined epoch is alive.
    pub backup_checked: AtomicU64,
}

impl Shared {
    pub fn new(
        r: Mapping,
        g: Geometry,
        path: PathBuf,
        file: File,
        reserve: u64,
        lock_timeout: Duration,
        hooks: &'static Hooks,
    ) -> Shared {
        Shared {
            r,
            g,
            path,
            file,
            id: NEXT_STORE_ID.fetch_add(1, Relaxed),
            reserve,
            lock_timeout,
            reg: Mutex::new(Registration {
                proc_idx: u64::MAX,
                proc_gen: 0,
                lock_fd: None,
                fd_in_fork_table: false,
            }),
            epoch: AtomicU64::new(0),
            owner_word: AtomicU64::new(0),
            proc_idx: AtomicU64::new(u64::MAX),
            durable: false,
            sync_writes: false,
            verified: AtomicBool::new(false),
            ahead: AtomicU64::new(0),
            ahead_done: AtomicU64::new(0),
            pretouch: None,
            read_only: false,
            hooks,
            backup_joined: AtomicU64::new(0),
            backup_join: Mutex::new(()),
            backup_checked: AtomicU64::new(0),
        }
    }

    /// Asks this process's pretouch thread (if the store has pretouching on) to fault in
    /// `[off, off + len)` ahead of the writers: see `sys::pretouch`.
    pub fn pretouch(&self, off: u64, len: u64) {
        if let Some(g) = &self.pretouch {
            #[cfg(not(shuttle))]
            let addr = self.r.base_ptr() as usize + off as usize;
            #[cfg(shuttle)]
            let addr = off as usize;
            crate::sys::pretouch::request(g, addr, len);
        }
    }

    /// The error for what a read-only store cannot do.
    pub fn read_only_error(&self, what: impl Into<String>) -> Error {
        Error::ReadOnly {
            path: self.path.clone(),
            what: what.into(),
        }
    }

    /// Attaches a read-only opener: a shared lock on the seize byte (so that no process
    /// verifies or upgrades the store alone while we read it), through a descriptor of its
    /// own, which needs no write access. Refuses a disk store that was not closed cleanly
    /// and that nobody has open: it must be verified first, which writes.
    #[cfg(not(shuttle))]
    pub fn attach_read_only(&self) -> Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let lock_file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(&self.path)
            .map_err(|e| Error::io(&self.path, e))?;
        let fd: OwnedFd = lock_file.into();
        sys::lock_byte_shared_wait(fd.as_raw_fd(), sys::SEIZE_BYTE)
            .map_err(|e| Error::io(&self.path, e))?;
        let others = sys::byte_locked(fd.as_raw_fd(), sys::SEIZE_BYTE).unwrap_or(true);
        if self.durable && !others && self.w(H_CLEAN).load(SeqCst) == 0 {
            return Err(Error::NeedsRepair {
                path: self.path.clone(),
                what: "it was not closed cleanly (an OS crash?) and must be verified by a \
                       process that can write it before it is read"
                    .into(),
            });
        }
        self.reg.lock().unwrap_or_else(|e| e.into_inner()).lock_fd = Some(fd);
        Ok(())
    }

    /// Writes every byte of the store through to stable storage (see `Store::flush`).
    pub fn flush(&self) -> Result<()> {
        crate::rt::failpoint!("store.flush");
        #[cfg(not(shuttle))]
        self.r
            .flush(self.file_end(), &self.file)
            .map_err(|e| Error::io(&self.path, e))?;
        Ok(())
    }

    /// For stores on disk: writes `[off, off+len)` through to stable storage now. Used to
    /// order writes where an OS crash must not see a later one without an earlier one
    /// (a split's new segment before the old one loses its keys). No-op on tmpfs.
    pub fn persist(&self, off: u64, len: u64) -> Result<()> {
        #[cfg(not(shuttle))]
        if self.durable {
            self.r
                .persist(off, len)
                .map_err(|e| Error::io(&self.path, e))?;
        }
        #[cfg(shuttle)]
        let _ = (off, len);
        Ok(())
    }

    /// Takes the seize lock: exclusively if no other process has the store open (returns
    /// true: the caller is alone and may verify or repair), else shared, waiting while a
    /// first opener holds it exclusively.
    #[cfg(not(shuttle))]
    pub fn seize(&self) -> Result<bool> {
        let fd = self.lock_fd()?;
        if sys::try_lock_byte(fd, sys::SEIZE_BYTE).map_err(|e| Error::io(&self.path, e))? {
            return Ok(true);
        }
        sys::lock_byte_shared_wait(fd, sys::SEIZE_BYTE).map_err(|e| Error::io(&self.path, e))?;
        Ok(false)
    }

    /// The descriptor through which this process holds its liveness and seize locks.
    #[cfg(not(shuttle))]
    fn lock_fd(&self) -> Result<std::os::fd::RawFd> {
        let reg = self.reg.lock().unwrap_or_else(|e| e.into_inner());
        reg.lock_fd
            .as_ref()
            .map(|f| f.as_raw_fd())
            .ok_or_else(|| self.corrupt("not registered"))
    }

    /// Turns an exclusive seize lock into a shared one (others may now attach).
    #[cfg(not(shuttle))]
    pub fn share_seize(&self) -> Result<()> {
        let fd = self.lock_fd()?;
        sys::lock_byte_shared_wait(fd, sys::SEIZE_BYTE).map_err(|e| Error::io(&self.path, e))
    }

    #[inline]
    pub fn w(&self, off: u64) -> &crate::mem::SharedWord {
        self.r.word(off)
    }

    #[inline]
    pub fn file_end(&self) -> u64 {
        self.w(H_FILE_END).load(Acquire)
    }

    pub fn corrupt(&self, what: impl Into<String>) -> Error {
        Error::corrupt(&self.path, what)
    }

    /// Registers the model checker's one "process" in slot 0.
    #[cfg(shuttle)]
    pub fn register(&self) -> Result<()> {
        let mut reg = self.reg.lock().unwrap_or_else(|e| e.into_inner());
        reg.proc_idx = 0;
        reg.proc_gen = 1;
        self.w(self.g.proc_slot(0) + P_GEN).store(1, Release);
        self.w(self.g.proc_slot(0) + P_STATE).store(1, Release);
        self.proc_idx.store(0, SeqCst);
        self.owner_word.store(txn_owner(0, 1), SeqCst);
        self.epoch.store(1, SeqCst);
        Ok(())
    }

    /// Registers this process: takes a free (or dead) process slot and its liveness lock.
    #[cfg(not(shuttle))]
    pub fn register(&self) -> Result<()> {
        let mut reg = self.reg.lock().unwrap_or_else(|e| e.into_inner());
        let fork_gen = sys::FORK_GENERATION.load(SeqCst);
        if reg.proc_idx != u64::MAX && (self.epoch.load(SeqCst) >> 32) == fork_gen {
            return Ok(()); // another thread re-registered first
        }
        if reg.proc_idx != u64::MAX && (self.epoch.load(SeqCst) >> 32) != fork_gen {
            // We are a forked child: the descriptor we inherited was closed by the atfork
            // handler (if it was in the table); never close it again, its number may
            // have been reused.
            if let Some(fd) = reg.lock_fd.take() {
                if reg.fd_in_fork_table {
                    std::mem::forget(fd);
                }
            }
        }
        use std::os::unix::fs::OpenOptionsExt;
        // Read-write: an OFD write lock needs a descriptor open for writing.
        let lock_file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(&self.path)
            .map_err(|e| Error::io(&self.path, e))?;
        let lock_fd: OwnedFd = lock_file.into();
        let mut chosen = None;
        for p in 0..self.g.n_proc {
            let slot = self.g.proc_slot(p);
            // Cheap pre-filter: attached slots whose byte is locked are alive.
            if self.w(slot + P_STATE).load(Acquire) != 0 && self.proc_locked(p) {
                continue;
            }
            if sys::try_lock_byte(lock_fd.as_raw_fd(), sys::LIVENESS_BASE + p)
                .map_err(|e| Error::io(&self.path, e))?
            {
                chosen = Some(p);
                break;
            }
        }
        let Some(p) = chosen else {
            return Err(Error::TooManyUsers(format!(
                "all {} process slots are in use",
                self.g.n_proc
            )));
        };
        let slot = self.g.proc_slot(p);
        // The slot may have belonged to a dead process: its txn slots are reclaimed by
        // `reclaim_dead` (their owner words name the old generation, now dead).
        let gen = self.w(slot + P_GEN).load(Acquire).wrapping_add(1);
        self.w(slot + P_GEN).store(gen, Release);
        self.w(slot + P_PID).store(sys::pid() as u64, Relaxed);
        self.w(slot + P_SECTIONS).store(0, Relaxed);
        self.w(slot + P_STATE).store(1, Release);
        if reg.proc_idx != u64::MAX {
            // Re-registering after fork(): attached, so hold the seize byte shared too.
            sys::lock_byte_shared_wait(lock_fd.as_raw_fd(), sys::SEIZE_BYTE)
                .map_err(|e| Error::io(&self.path, e))?;
        }
        reg.fd_in_fork_table = sys::remember_liveness_fd(lock_fd.as_raw_fd());
        reg.lock_fd = Some(lock_fd);
        reg.proc_idx = p;
        reg.proc_gen = gen;
        self.proc_idx.store(p, SeqCst);
        self.owner_word.store(txn_owner(p, gen), SeqCst);
        let count = (self.epoch.load(SeqCst) & 0xffff_ffff) + 1;
        self.epoch.store((fork_gen << 32) | count, SeqCst);
        Ok(())
    }

    /// Re-registers after `fork()` if needed. One relaxed load on the fast path.
    #[inline]
    pub fn ensure_registered(&self) -> Result<()> {
        if sys::FORK_GENERATION.load(Relaxed) != self.epoch.load(Relaxed) >> 32 && !self.read_only {
            self.register()?;
        }
        Ok(())
    }

    /// Whether the txn whose owner word is `owner` belongs to a live process.
    pub fn owner_alive(&self, owner: u64) -> bool {
        owner_alive_in(
            &self.r,
            &self.g,
            &self.file,
            self.owner_word.load(Relaxed),
            owner,
        )
    }

    /// Whether process slot `p`'s liveness byte is locked (by anyone but this process's
    /// main descriptor). An error (it should not happen) counts as "alive": never steal
    /// on doubt.
    pub fn proc_locked(&self, p: u64) -> bool {
        proc_locked_in(&self.file, p)
    }

    /// Marks process slot `p` free (`state` 0) if its process is dead: only while this
    /// process holds the slot's liveness byte itself, so that no process can be attaching
    /// to it meanwhile.
    ///
    /// Why the lock: a process attaching to the slot takes its byte first and sets `state`
    /// = 1 after. Clearing on the strength of an earlier look ("unlocked") wiped the
    /// registration of a process that attached in between, and from then on every other
    /// process judged it dead (`owner_alive` reads `state`): they stole the locks it held
    /// mid-write, replayed its intents and gave its txn slots to other threads while it
    /// still used them (found by the soak: lost records, a chunk freed with live records
    /// in it, "lock already held by this thread").
    #[cfg(not(shuttle))]
    pub fn clear_dead_proc(&self, p: u64) {
        let reg = self.reg.lock().unwrap_or_else(|e| e.into_inner());
        let Some(fd) = reg.lock_fd.as_ref() else {
            return; // not attached (a forked child before it attaches again)
        };
        let byte = sys::LIVENESS_BASE + p;
        if sys::try_lock_byte(fd.as_raw_fd(), byte).unwrap_or(false) {
            crate::rt::trace!("process slot {p} marked free");
            self.w(self.g.proc_slot(p) + P_STATE).store(0, Release);
            sys::unlock_byte(fd.as_raw_fd(), byte);
        }
    }

    /// The model checker's one process never sees another's slot.
    #[cfg(shuttle)]
    pub fn clear_dead_proc(&self, _: u64) {}

    /// Whether txn slot `t` is owned by a live thread.
    pub fn txn_alive(&self, t: u64) -> bool {
        t < self.g.n_txn && self.owner_alive(self.w(self.g.txn_slot(t) + T_OWNER).load(Acquire))
    }

    /// Adds txn slot `t`'s batch of unreported dead bytes (`cleaner::note_dead`) to the
    /// store's hint, when the slot changes hands. Claiming a slot used to zero the batch,
    /// so short-lived threads, each reusing the slot of the one before, never reported
    /// anything: the cleaner never started and the file grew by every thread's overwrites.
    /// The batch comes from the file (a dead process's): never more than the data bytes,
    /// and the next cleaning step sets the hint to the exact figure anyway.
    pub fn flush_dead_pending(&self, t: u64) {
        let pend = self
            .w(self.g.txn_slot(t) + T_DEAD_PEND)
            .swap(0, Relaxed)
            .min(self.w(H_DATA_BYTES).load(Relaxed));
        if pend > 0 {
            self.w(H_DEAD_HINT).fetch_add(pend, Relaxed);
        }
    }

    /// Releases everything this process holds in the store (on close).
    pub fn unregister(&self) {
        let mut reg = self.reg.lock().unwrap_or_else(|e| e.into_inner());
        if reg.proc_idx == u64::MAX {
            return;
        }
        let forked = (self.epoch.load(SeqCst) >> 32) != sys::FORK_GENERATION.load(SeqCst);
        if !forked {
            let owner = self.owner_word.load(SeqCst);
            for t in 0..self.g.n_txn {
                let w = self.w(self.g.txn_slot(t) + T_OWNER);
                if w.load(Acquire) == owner {
                    // A thread of ours may still be inside an operation only if the store
                    // is being dropped while in use, which Arc ownership rules out.
                    self.flush_dead_pending(t);
                    w.store(0, Release);
                }
            }
            self.w(self.g.proc_slot(reg.proc_idx) + P_STATE)
                .store(0, Release);
            if let Some(fd) = reg.lock_fd.as_ref() {
                // The last process to close a disk store flushes it and marks it clean
                // (only if it found it sound: a refused store stays unclean).
                if self.durable
                    && self.verified.load(SeqCst)
                    && sys::try_lock_byte(fd.as_raw_fd(), sys::SEIZE_BYTE).unwrap_or(false)
                    && self.flush().is_ok()
                {
                    self.w(H_CLEAN).store(1, SeqCst);
                    let _ = self.flush();
                }
            }
            if let Some(fd) = reg.lock_fd.take() {
                sys::unlock_byte(fd.as_raw_fd(), sys::LIVENESS_BASE + reg.proc_idx);
                if reg.fd_in_fork_table {
                    sys::forget_liveness_fd(fd.as_raw_fd());
                }
                drop(fd);
            }
        } else if let Some(fd) = reg.lock_fd.take() {
            if reg.fd_in_fork_table {
                std::mem::forget(fd); // closed by the atfork handler already
            }
        }
        reg.proc_idx = u64::MAX;
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Before the mapping unmaps: its range must not stay under a backup's copier.
        crate::mem::copy::forget(self.r.base_ptr() as usize);
        self.unregister();
        if let Some(g) = &self.pretouch {
            g.close();
        }
        // The mapping is unmapped when its field drops, after this: the pretouch thread,
        // the one other user of its addresses, is kept off it by the guard closed above.
    }
}

/// Whether the txn whose owner word is `owner` belongs to a live process, in the store
/// mapped at `r` with geometry `g` and opened as `file` (`mine`: this process's owner
/// word). For those who hold a store's parts but not its [`Shared`] (a hot backup's
/// copier).
pub fn owner_alive_in(
    r: &crate::mem::Region,
    g: &Geometry,
    file: &File,
    mine: u64,
    owner: u64,
) -> bool {
    if owner == 0 {
        return false;
    }
    if owner == mine {
        return true;
    }
    let (p, gen) = txn_owner_parts(owner);
    if p >= g.n_proc {
        return false;
    }
    let slot = g.proc_slot(p);
    if r.word(slot + P_STATE).load(Acquire) == 0
        || (r.word(slot + P_GEN).load(Acquire) & ((1 << 47) - 1)) != gen
    {
        return false;
    }
    proc_locked_in(file, p)
}

/// Whether process slot `p`'s liveness byte is locked (by anyone but the open file
/// description of `file`, this process's main descriptor). An error (it should not
/// happen) counts as "alive": never steal on doubt.
fn proc_locked_in(file: &File, p: u64) -> bool {
    #[cfg(not(shuttle))]
    return sys::byte_locked(file.as_raw_fd(), sys::LIVENESS_BASE + p).unwrap_or(true);
    #[cfg(shuttle)]
    {
        let _ = (file, p);
        true
    }
}
