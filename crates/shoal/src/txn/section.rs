//! Write sections: the part of a call that writes the store, announced in the caller's
//! txn slot so that a hot backup can choose an instant at which no write is half done
//! (docs/DESIGN.md, "Hot backup").
//!
//! A thread counts its open sections in the high half of its slot's `T_KIND` word (a word
//! of its own slot's first line, which it writes anyway; only the owner writes it while it
//! lives). Entering the outermost section stores the count and then reads the header's
//! backup epoch ([`H_BACKUP`]) with sequentially consistent order; a backup stores its
//! epoch and then reads every slot's count in the same order. Of two such pairs, at least
//! one sees the other's store: either the backup sees the section and waits for it to end,
//! or the section sees the backup and waits for it to choose its instant.
//!
//! While an epoch is **preparing**, a thread entering its outermost section leaves again
//! (count back to what it was) and waits, holding nothing, until the epoch becomes active,
//! ends, or is found dead. A section never waits for a call that has not begun: a call that
//! sleeps until another call acts (a pull waiting for a push) leaves its section while it
//! sleeps ([`Section::pause`]).

use crate::backup::{self, epoch};
use crate::format::*;
use crate::shared::Shared;
use std::sync::atomic::Ordering::*;
use std::time::{Duration, Instant};

/// How long a writer waits at a section's entry for a preparing backup before it cancels
/// that backup's epoch itself: far longer than a live backup prepares (it gives up on its
/// own after 2 s, docs/DESIGN.md "Hot backup"), so only a stopped backup process reaches it.
const ENTRY_LIMIT: Duration = Duration::from_secs(10);

/// One open write section of a thread's txn slot; closed when dropped.
pub(crate) struct Section<'a> {
    sh: &'a Shared,
    base: u64,
}

impl<'a> Section<'a> {
    /// Opens a section on txn slot `t`, which must be the calling thread's. The outermost
    /// one waits while a backup prepares; nested ones never wait.
    #[inline]
    pub fn enter(sh: &'a Shared, t: u64) -> Section<'a> {
        #[cfg(feature = "failpoints")]
        crate::mem::copy::audit::section(true);
        let base = sh.g.txn_slot(t);
        if sh.g.backup {
            let w = sh.w(base + T_KIND);
            let cur = w.load(Relaxed);
            if cur >= SECTION_ONE {
                w.store(cur + SECTION_ONE, Relaxed);
            } else {
                enter_outermost(sh, base, cur);
            }
        }
        Section { sh, base }
    }

    /// Runs `f`, a sleep until another call acts, outside this section if it is the
    /// thread's outermost one (a nested section stays open: its caller chose to wait in
    /// it), and enters again after.
    pub fn pause<R>(&self, f: impl FnOnce() -> R) -> R {
        if !self.sh.g.backup {
            return f();
        }
        let w = self.sh.w(self.base + T_KIND);
        let cur = w.load(Relaxed);
        if cur >> 32 != 1 {
            return f();
        }
        w.store(cur & KIND_MASK, Release);
        let r = f();
        enter_outermost(self.sh, self.base, cur & KIND_MASK);
        r
    }
}

impl Drop for Section<'_> {
    #[inline]
    fn drop(&mut self) {
        if self.sh.g.backup {
            let w = self.sh.w(self.base + T_KIND);
            let cur = w.load(Relaxed);
            w.store(cur.saturating_sub(SECTION_ONE), Release);
        }
        #[cfg(feature = "failpoints")]
        crate::mem::copy::audit::section(false);
    }
}

/// Opens the thread's outermost section (`kind`: the slot's intent kind, kept).
#[cold]
fn enter_outermost(sh: &Shared, base: u64, kind: u64) {
    let w = sh.w(base + T_KIND);
    admit(
        sh,
        || {
            w.swap(kind | SECTION_ONE, SeqCst);
        },
        || w.store(kind, SeqCst),
    );
}

/// The entry protocol of a section (see the module comment): `announce` counts the
/// section in (sequentially consistent), `withdraw` counts it out again while a backup
/// prepares.
fn admit(sh: &Shared, announce: impl Fn(), withdraw: impl Fn()) {
    let mut since: Option<Instant> = None;
    loop {
        announce();
        let e = sh.w(H_BACKUP).load(SeqCst);
        match e & 3 {
            0 => {
                if sh.backup_joined.load(Relaxed) != 0 {
                    backup::leave(sh);
                }
                return;
            }
            EPOCH_PREPARING => {
                withdraw();
                let first = *since.get_or_insert_with(Instant::now);
                if !epoch::owner_alive(sh, e) || first.elapsed() > ENTRY_LIMIT {
                    epoch::end(sh, e);
                    continue;
                }
                epoch::wait(sh, e, Duration::from_millis(2));
            }
            _ => {
                // Active: this process copies blocks before writing them from now on. A
                // process that cannot must not write uncopied blocks: it ends the epoch
                // (the backup then fails) before it writes.
                if sh.backup_joined.load(Acquire) == e {
                    // A backup killed after its walk leaves an epoch that no copy ends:
                    // its joiners look at its owner now and then, and end it.
                    if !backup::check_due(sh) || epoch::owner_alive(sh, e) {
                        return;
                    }
                } else if backup::join(sh, e) {
                    return;
                }
                epoch::end(sh, e);
            }
        }
    }
}

/// A write section of a thread that may have no txn slot of the store: the recovery of
/// dead threads when a process attaches (or when slots run out), which replays their
/// committed writes. On the thread's own slot if it has one (so it nests in the thread's
/// open section), else on its process's slot (`P_SECTIONS`, shared by the process's
/// slotless threads, hence counted with atomic adds).
pub(crate) enum AnySection<'a> {
    /// Open on the thread's own slot; closed when dropped.
    Slot { _held: Section<'a> },
    /// Counted in the process's slot word at this offset.
    Process(&'a Shared, u64),
    /// Not needed: a store without write sections, or a process not attached.
    Off,
}

impl<'a> AnySection<'a> {
    pub fn enter(sh: &'a Shared) -> AnySection<'a> {
        if !sh.g.backup || sh.read_only {
            return AnySection::Off;
        }
        if let Some(t) = super::slots::thread_slot(sh) {
            return AnySection::Slot {
                _held: Section::enter(sh, t),
            };
        }
        let p = sh.proc_idx.load(Relaxed);
        if p >= sh.g.n_proc {
            return AnySection::Off; // not attached: it writes nothing shared
        }
        let off = sh.g.proc_slot(p) + P_SECTIONS;
        let w = sh.w(off);
        // Nested in this thread's own slotless section of the same store: counted, not
        // checked (the backup is waiting for the outer one, or joined by it).
        let nested = PROCESS_DEPTH
            .try_with(|d| {
                let (id, n) = d.get();
                d.set((sh.id, if id == sh.id { n + 1 } else { 1 }));
                id == sh.id && n > 0
            })
            .unwrap_or(false);
        #[cfg(feature = "failpoints")]
        crate::mem::copy::audit::section(true);
        if nested {
            w.fetch_add(SECTION_ONE, SeqCst);
            return AnySection::Process(sh, off);
        }
        admit(
            sh,
            || {
                w.fetch_add(SECTION_ONE, SeqCst);
            },
            || {
                w.fetch_sub(SECTION_ONE, SeqCst);
            },
        );
        AnySection::Process(sh, off)
    }
}

impl Drop for AnySection<'_> {
    fn drop(&mut self) {
        if let AnySection::Process(sh, off) = *self {
            let _ = PROCESS_DEPTH.try_with(|d| {
                let (id, n) = d.get();
                d.set((id, n.saturating_sub(1)));
            });
            sh.w(off).fetch_sub(SECTION_ONE, Release);
            #[cfg(feature = "failpoints")]
            crate::mem::copy::audit::section(false);
        }
    }
}

#[cfg(not(shuttle))]
thread_local! {
    /// This thread's open slotless sections: (store id, depth), for the one store whose
    /// recovery it is doing.
    static PROCESS_DEPTH: std::cell::Cell<(u64, u32)> = const { std::cell::Cell::new((u64::MAX, 0)) };
}
#[cfg(shuttle)]
shuttle::thread_local! {
    static PROCESS_DEPTH: std::cell::Cell<(u64, u32)> = std::cell::Cell::new((u64::MAX, 0));
}

#[cfg(all(test, not(shuttle)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    /// A write section announces itself in the slot while it is open and not after; a
    /// writer entering while an epoch prepares waits until the epoch ends, and a preparing
    /// epoch whose backup is dead is ended by the first writer that meets it.
    #[test]
    fn sections_count_and_wait_for_a_preparing_epoch() {
        let d = tempfile::tempdir().unwrap();
        let s = crate::Store::open(d.path().join("s.shoal")).unwrap();
        let sh = &s.sh;
        let t = crate::txn::thread_txn(sh).unwrap();
        {
            let _a = Section::enter(sh, t);
            assert!(epoch::in_section(sh, t));
            assert_eq!(epoch::depth(sh, t), 1);
            let _b = Section::enter(sh, t);
            assert_eq!(epoch::depth(sh, t), 2);
        }
        assert!(!epoch::in_section(sh, t));
        let m = s.map("m").unwrap();
        m.put(b"k", b"v").unwrap();
        assert_eq!(epoch::depth(sh, t), 0, "a put left its section open");

        // An epoch owned by this thread's own slot and attachment: alive.
        let gen = txn_owner_parts(sh.owner_word.load(SeqCst)).1;
        let e = backup_epoch(EPOCH_PREPARING, t, gen, 7);
        sh.w(H_BACKUP).store(e, SeqCst);
        assert!(epoch::owner_alive(sh, e));
        let done = Arc::new(AtomicBool::new(false));
        let th = {
            let (m, done) = (m.clone(), done.clone());
            std::thread::spawn(move || {
                m.put(b"k", b"w").unwrap();
                done.store(true, Ordering::SeqCst);
            })
        };
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            !done.load(Ordering::SeqCst),
            "a put ran while a backup prepared"
        );
        epoch::end(sh, e);
        th.join().unwrap();
        assert_eq!(m.get(b"k").unwrap().as_deref(), Some(&b"w"[..]));

        // An epoch whose owner is gone (an attachment generation nobody has).
        let dead = backup_epoch(EPOCH_PREPARING, t, gen + 1, 7);
        sh.w(H_BACKUP).store(dead, SeqCst);
        assert!(!epoch::owner_alive(sh, dead));
        m.put(b"k", b"x").unwrap();
        assert_eq!(sh.w(H_BACKUP).load(SeqCst), 0, "a dead epoch stayed");
    }
}
