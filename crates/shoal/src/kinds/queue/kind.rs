//! The queue set as a [`Kind`] of object: its check (every element accounted for exactly
//! once), its rebuild in repair, its figures and its drop. It keeps no records.

use super::QueueRef;
use crate::error::Result;
use crate::format::*;
use crate::object::{CheckCtx, Kind, ObjectStats, RepairCtx};
use crate::shared::Shared;
use crate::txn::Txn;
use std::sync::atomic::Ordering::*;
use std::time::Duration;

/// What a walk of one queue found: its elements in order, and the first problem that
/// stopped it (None: the queue is sound).
struct Walk {
    elems: Vec<u64>,
    problem: Option<String>,
}

/// Walks queue `qi` from its head, taking each element that is in range, not seen before
/// (`seen`, which it updates) and in state "in queue `qi`", up to its length.
fn walk(sh: &Shared, q: &QueueRef, qi: u64, seen: &mut [bool]) -> Walk {
    let qe = q.queue(qi);
    let (head, tail, len) = (
        sh.w(qe + Q_HEAD).load(Acquire),
        sh.w(qe + Q_TAIL).load(Acquire),
        sh.w(qe + Q_LEN).load(Acquire),
    );
    let mut elems = Vec::new();
    let mut e = head;
    let stop = |elems: Vec<u64>, what: String| Walk {
        elems,
        problem: Some(what),
    };
    while elems.len() as u64 != len.min(q.elems + 1) {
        if e == NO_ELEMENT {
            let what = format!(
                "its links end after {} elements; its length is {len}",
                elems.len()
            );
            return stop(elems, what);
        }
        if e >= q.elems {
            return stop(elems, format!("a link names element {e}, out of range"));
        }
        if seen[e as usize] {
            return stop(
                elems,
                format!("element {e} is linked twice (here, or in another queue)"),
            );
        }
        let st = sh.w(q.link(e) + L_STATE).load(Acquire);
        if st & 3 != QS_IN_QUEUE || qs_queue(st) != qi {
            return stop(
                elems,
                format!("element {e} is linked here, its state is {st:#x}"),
            );
        }
        seen[e as usize] = true;
        elems.push(e);
        e = sh.w(q.link(e) + L_NEXT).load(Acquire);
    }
    let n = elems.len();
    let problem = if len > q.elems {
        Some(format!(
            "length {len} exceeds the set's {} elements",
            q.elems
        ))
    } else if n == 0 && (head, tail) != (NO_ELEMENT, NO_ELEMENT) {
        Some(format!(
            "empty, yet its head is {head:#x} and tail {tail:#x}"
        ))
    } else if n > 0 && (tail != elems[n - 1] || e != NO_ELEMENT) {
        Some(format!(
            "its last element is {} (whose next is {e:#x}), its tail {tail:#x}",
            elems[n - 1]
        ))
    } else {
        None
    };
    Walk { elems, problem }
}

impl QueueRef {
    /// Every invariant of the set, each violation reported through `bad`; returns the
    /// elements found accounted for.
    fn check_set(&self, sh: &Shared, bad: &mut dyn FnMut(String)) -> u64 {
        let mut seen = vec![false; self.elems as usize];
        let mut names = std::collections::HashSet::new();
        for qi in 0..self.nq {
            let name = self.queue_name(sh, qi);
            let qe = self.queue(qi);
            let n = sh.w(qe + Q_NAME_LEN).load(Acquire);
            if n == 0 || n > MAX_QUEUE_NAME as u64 || !names.insert(name.clone()) {
                bad(format!(
                    "queue {qi}: name {name:?} (length {n}) empty, too long or given twice"
                ));
            }
            let w = walk(sh, self, qi, &mut seen);
            if let Some(p) = w.problem {
                bad(format!("queue {qi} ({name:?}): {p}"));
            }
        }
        let mut accounted = seen.iter().filter(|s| **s).count() as u64;
        for e in 0..self.elems {
            if seen[e as usize] {
                continue;
            }
            let st = sh.w(self.link(e) + L_STATE).load(Acquire);
            if st & 3 == QS_IN_QUEUE {
                bad(format!(
                    "element {e}: in queue {} by its state, but not linked there",
                    qs_queue(st)
                ));
                continue;
            }
            let (p, gen) = qs_holder(st);
            let holder = if p < sh.g.n_proc {
                sh.w(self.hdr + QH_HOLDERS + 8 * p).load(Acquire)
            } else {
                0
            };
            if st & 3 != QS_HELD
                || qs_queue(st) >= self.nq
                || holder == 0
                || txn_owner_parts(holder).0 != p
                || txn_owner_parts(holder).1 & 0xffff_ffff != gen
            {
                bad(format!(
                    "element {e}: state {st:#x} is neither a queue's nor a holder's of record \
                     (lost)"
                ));
                continue;
            }
            accounted += 1;
        }
        for p in 0..sh.g.n_proc {
            let h = sh.w(self.hdr + QH_HOLDERS + 8 * p).load(Acquire);
            if h != 0 && (h & 1 == 0 || txn_owner_parts(h).0 != p) {
                bad(format!(
                    "holders word {p}: {h:#x} is not an owner at slot {p}"
                ));
            }
        }
        accounted
    }

    /// Figures of the set's queues: (name, length, limit, pushes, pulls, sleeps) each.
    pub fn queue_figures(&self, sh: &Shared) -> Vec<(String, [u64; 5])> {
        (0..self.nq)
            .map(|qi| {
                let qe = self.queue(qi);
                let f = |o| sh.w(qe + o).load(Acquire);
                (
                    self.queue_name(sh, qi),
                    [f(Q_LEN), f(Q_LIMIT), f(Q_PUSHES), f(Q_PULLS), f(Q_WAITS)],
                )
            })
            .collect()
    }

    /// Elements held now, per holder of record: (process slot, pid, count).
    pub fn held_by(&self, sh: &Shared) -> Vec<(u64, u64, u64)> {
        let mut count = vec![0u64; sh.g.n_proc as usize];
        for e in 0..self.elems {
            let st = sh.w(self.link(e) + L_STATE).load(Acquire);
            let (p, _) = qs_holder(st);
            if st & 3 == QS_HELD && p < sh.g.n_proc {
                count[p as usize] += 1;
            }
        }
        count
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(p, n)| {
                let pid = sh.w(sh.g.proc_slot(p as u64) + P_PID).load(Acquire);
                (p as u64, pid, *n)
            })
            .collect()
    }

    /// Repair's rebuild (alone in the store): every queue relinked from its head as far as
    /// its links are sound, every other element (held by a process, all dead now, or
    /// lost) appended to its queue (the return queue, or with redelivery the queue it came
    /// from), locks and sleepers cleared. Returns how many elements were handed back.
    fn rebuild_set(&self, sh: &Shared) -> u64 {
        let (lists, back) = self.placement(sh);
        self.relink(sh, &lists);
        back
    }

    /// Where every element belongs: each queue's sound prefix (walked from its head),
    /// then the elements found in no queue (held, by processes that are all dead, or
    /// lost) appended to the queue a dead holder's elements go to. Returns the lists and
    /// how many were appended.
    pub fn placement(&self, sh: &Shared) -> (Vec<Vec<u64>>, u64) {
        let mut seen = vec![false; self.elems as usize];
        let mut lists: Vec<Vec<u64>> = (0..self.nq)
            .map(|qi| walk(sh, self, qi, &mut seen).elems)
            .collect();
        let mut back = 0;
        for e in 0..self.elems {
            if seen[e as usize] {
                continue;
            }
            let st = sh.w(self.link(e) + L_STATE).load(Acquire);
            let to = if st & 3 == QS_HELD && self.redeliver && qs_queue(st) < self.nq {
                qs_queue(st)
            } else {
                self.ret
            };
            lists[to as usize].push(e);
            back += 1;
        }
        (lists, back)
    }

    /// Relinks every queue as `lists` says (repair, alone in the store).
    fn relink(&self, sh: &Shared, lists: &[Vec<u64>]) {
        for (qi, list) in lists.iter().enumerate() {
            let qe = self.queue(qi as u64);
            for (i, &e) in list.iter().enumerate() {
                let next = list.get(i + 1).copied().unwrap_or(NO_ELEMENT);
                sh.w(self.link(e) + L_NEXT).store(next, Relaxed);
                let st = sh.w(self.link(e) + L_STATE).load(Relaxed);
                let kept = st & 3 == QS_IN_QUEUE && qs_queue(st) == qi as u64;
                let redelivered = if kept {
                    st & QS_REDELIVERED != 0
                } else {
                    self.redeliver && st & 3 == QS_HELD
                };
                sh.w(self.link(e) + L_STATE)
                    .store(qs_in_queue(qi as u64, redelivered), Relaxed);
            }
            let (head, tail) = match (list.first(), list.last()) {
                (Some(h), Some(t)) => (*h, *t),
                _ => (NO_ELEMENT, NO_ELEMENT),
            };
            sh.w(qe + Q_HEAD).store(head, Relaxed);
            sh.w(qe + Q_TAIL).store(tail, Relaxed);
            sh.w(qe + Q_LEN).store(list.len() as u64, Relaxed);
            sh.w(qe + Q_LOCK).store(0, Relaxed);
            sh.w(qe + Q_SLEEPERS).store(0, Relaxed);
        }
        sh.w(self.hdr + QH_SWEEP_LOCK).store(0, Relaxed);
        for p in 0..sh.g.n_proc {
            sh.w(self.hdr + QH_HOLDERS + 8 * p).store(0, Release);
        }
    }
}

impl Kind for QueueRef {
    fn has_records(&self) -> bool {
        false
    }

    fn is_live(&self, _: &Shared, _: &[u8], _: u64, _: Duration) -> Result<bool> {
        Ok(false)
    }

    fn prefetch_live(&self, _: &Shared, _: &[u8], _: u64) {}

    fn relocate(&self, _: &Txn, _: &[u8], _: u64, _: (u64, u64)) -> Result<bool> {
        Ok(false)
    }

    fn live_record_bytes(&self, _: &Shared) -> u64 {
        0
    }

    fn for_each_record(&self, _: &Shared, _: &mut dyn FnMut(u64)) -> Result<()> {
        Ok(())
    }

    fn check(&self, ck: &mut CheckCtx<'_>) {
        let name = crate::object::object_name(ck.sh, self.id);
        let prefix = format!("queue set {name:?}: ");
        if !ck.in_index(self.hdr - CHUNK_HDR, self.end - (self.hdr - CHUNK_HDR)) {
            ck.bad(format!(
                "{prefix}its tables and elements lie outside its index run"
            ));
            return;
        }
        let sh = ck.sh;
        let mut problems = Vec::new();
        let n = self.check_set(sh, &mut |p| problems.push(format!("{prefix}{p}")));
        for p in problems {
            ck.bad(p);
        }
        for qi in 0..self.nq {
            ck.lock_ok(self.queue(qi) + Q_LOCK, &prefix, &format!("queue {qi}"));
        }
        ck.lock_ok(self.hdr + QH_SWEEP_LOCK, &prefix, "sweep");
        ck.entries += n;
    }

    fn drop_untrusted(&self, _: &Shared, _: &mut RepairCtx) -> Result<()> {
        Ok(()) // no records to distrust
    }

    fn rebuild(&self, sh: &Shared, rep: &mut RepairCtx) -> Result<()> {
        let back = self.rebuild_set(sh);
        rep.rebuilt.push(format!(
            "queue set {:?}: links, lengths, locks; {back} elements held by dead processes or \
             unaccounted for went back to a queue",
            rep.name
        ));
        Ok(())
    }

    fn drop_barrier(&self, tx: &Txn) -> Result<()> {
        // Every move holds a queue lock, and a sweep the sweep lock.
        for qi in 0..self.nq {
            let l = self.queue(qi) + Q_LOCK;
            tx.lock(l)?;
            tx.unlock(l);
        }
        tx.lock(self.hdr + QH_SWEEP_LOCK)?;
        tx.unlock(self.hdr + QH_SWEEP_LOCK);
        Ok(())
    }

    fn stats(&self, _: &Shared) -> Result<ObjectStats> {
        Ok(ObjectStats {
            entries: self.elems,
            live_bytes: self.elems * self.elem_size,
            index_bytes: self.end - (self.hdr - CHUNK_HDR),
            ..ObjectStats::default()
        })
    }
}
