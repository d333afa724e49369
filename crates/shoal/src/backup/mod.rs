//! Hot backup: a point-in-time copy of a store in use (docs/DESIGN.md, "Hot backup").
//!
//! * `epoch`: the header's epoch word, its phases, and who may end it;
//! * `state`: the state file every process of the store shares during a backup (one word
//!   per copy block, and the blocks that writers copied before their first writes), and
//!   this process's copier over it;
//! * `run`: the backup itself: preparation, the instant, the walk over the blocks.
//!
//! Write sections (`txn::section`) are what makes the instant exist: this module only
//! reads the sections' counts.

pub(crate) mod epoch;
#[cfg(not(shuttle))]
mod run;
#[cfg(not(shuttle))]
mod state;

#[cfg(not(shuttle))]
pub(crate) use run::run;

use crate::shared::Shared;
use std::sync::atomic::Ordering::*;

/// Makes this process copy blocks of the store mapped by `sh` before writing them, for
/// the active epoch `e`. False if it cannot (the backup is gone, or its state file cannot
/// be opened): the caller must then end the epoch before it writes.
pub(crate) fn join(sh: &Shared, e: u64) -> bool {
    #[cfg(not(shuttle))]
    {
        let _g = sh.backup_join.lock().unwrap_or_else(|x| x.into_inner());
        if sh.backup_joined.load(Acquire) == e {
            return true;
        }
        if !epoch::owner_alive(sh, e) {
            return false;
        }
        match state::Copier::open(sh, e) {
            Ok(c) => {
                let len = c.limit() as usize;
                crate::mem::copy::register(sh.r.base_ptr() as usize, len, std::sync::Arc::new(c));
                sh.backup_joined.store(e, Release);
                true
            }
            Err(_) => false,
        }
    }
    #[cfg(shuttle)]
    {
        let _ = (sh, e);
        false
    }
}

/// Stops copying before writes to `sh`'s mapping (its backup ended).
pub(crate) fn leave(sh: &Shared) {
    let _g = sh.backup_join.lock().unwrap_or_else(|x| x.into_inner());
    if sh.backup_joined.load(Acquire) != 0 {
        crate::mem::copy::forget(sh.r.base_ptr() as usize);
        sh.backup_joined.store(0, Release);
    }
}

/// Whether a joiner of `sh`'s epoch should look at the backup's liveness again: every 10 ms
/// at most, so that the look (a system call) costs the writers nothing measurable.
pub(crate) fn check_due(sh: &Shared) -> bool {
    static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let now = ORIGIN
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_millis() as u64;
    let last = sh.backup_checked.load(Relaxed);
    now >= last + 10
        && sh
            .backup_checked
            .compare_exchange(last, now, Relaxed, Relaxed)
            .is_ok()
}

#[cfg(all(test, feature = "failpoints", not(shuttle)))]
mod tests {
    use crate::mem::copy::audit;
    use crate::{LogOptions, QueueSetOptions, Store};

    /// Every write to a store is made inside a write section, but for the few kinds of
    /// write a copy takes as they come (docs/DESIGN.md, "Hot backup": attach and detach,
    /// txn slot claims and releases, snapshot pins): a workload of every kind runs with
    /// the audit on, and every write it finds outside a section must come from one of
    /// those.
    #[test]
    fn every_write_is_in_a_section_or_one_a_copy_may_take_as_it_comes() {
        let d = tempfile::tempdir().unwrap();
        audit::set(true);
        {
            let s = Store::open(d.path().join("a.shoal")).unwrap();
            let m = s.map("m").unwrap();
            let f = s.fixed_map("f", 8, 8).unwrap();
            let o = s.ordered_map("o").unwrap();
            let l = s.log("l", &LogOptions::new(64, 64)).unwrap();
            let q = s
                .queue_set("q", &crate::QueueSetOptions::new(16, 4).queue("a"))
                .unwrap();
            let _ = QueueSetOptions::new(16, 4);
            let mut rd = l.reader("r").unwrap();
            assert_eq!(audit::depth(), 0, "a section left open");
            for i in 0..3000u64 {
                let k = i.to_le_bytes();
                m.put(&k, &vec![i as u8; (i % 500) as usize]).unwrap();
                f.put(&k, &k).unwrap();
                f.add(&k, 1).unwrap();
                o.put(&k, &k).unwrap();
                l.append(1, &k).unwrap();
                if i % 3 == 0 {
                    m.remove(&k).unwrap();
                    let _ = rd.read().unwrap();
                }
            }
            let (free, a) = (q.queue("free").unwrap(), q.queue("a").unwrap());
            let e = q.pull(free).unwrap().unwrap();
            q.push(a, e).unwrap();
            let snap = o.snapshot().unwrap();
            let _ = snap.get(b"x");
            drop(snap);
            let mut w = o.write().unwrap();
            w.put(b"k", b"v").unwrap();
            w.commit().unwrap();
            s.transaction()
                .then(crate::TxnOp::add(&f, &1u64.to_le_bytes(), 5))
                .commit()
                .unwrap();
            std::thread::spawn({
                let m = m.clone();
                move || m.put(b"thread", b"x").unwrap()
            })
            .join()
            .unwrap();
        }
        let found = audit::set(false);
        // Attach and detach, a txn slot's claim (its scrub of a free slot's leftovers)
        // and release, snapshot pins: a copy's first opener clears them all (its
        // processes are dead). The clean flag at open: only by a process that has the
        // store alone (so no backup runs). The backup's own epoch word.
        let allowed = [
            "Shared::register",
            "Shared::unregister",
            "txn::slots::claim",
            "txn::slots::release",
            "ordered::map::OrderedRef::snapshot",
            "ordered::map::Snap",
            "store::open::open_file_mode",
            "shoal::backup::run::",
            "shoal::backup::epoch::",
        ];
        // Other tests of this binary write meanwhile (some to heap buffers): only this
        // test's writes count (those of its spawned thread name its closure).
        let bad: Vec<String> = found
            .iter()
            .filter(|bt| bt.contains("every_write_is_in_a_section_or_one_a_copy_may"))
            .filter(|bt| !allowed.iter().any(|a| bt.contains(a)))
            .map(|bt| {
                bt.lines()
                    .filter(|l| l.contains("shoal::") && !l.contains("shoal::mem::"))
                    .take(4)
                    .collect::<Vec<_>>()
                    .join(" <- ")
            })
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        assert!(
            bad.is_empty(),
            "{} kinds of write outside sections:\n{}",
            bad.len(),
            bad.join("\n")
        );
    }
}
