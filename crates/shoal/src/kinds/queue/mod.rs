//! Queue sets: a pool of fixed-size elements in the store file and named queues that
//! pass elements between processes by reference (FORMAT.md, "Queue sets").
//!
//! Every element is, at every instant, in exactly one queue or held by exactly one
//! process, and its link entry's state word says which. A queue is a singly linked list
//! of elements under one lock word; a push or a pull moves a whole chain of elements
//! with one intent (kind `I_QMOVE`: the chain, the state its elements take, and a redo
//! list for the queue's words), so a process killed at any step leaves a move that the
//! next locker finishes. A process that dies holding elements is found by the holders
//! table ([`sweep`]), and its elements go back to a queue.

mod kind;
mod moves;
pub(crate) mod sweep;
pub(crate) mod wait;

pub(crate) use moves::{move_between, pull_chain, push_chain, recover_move};

use crate::error::{Error, Result};
use crate::format::*;
use crate::shared::Shared;
use std::sync::atomic::Ordering::*;

/// An open queue set: its geometry, read from its header and checked against the file
/// once, at open.
#[derive(Clone, Copy, Debug)]
pub(crate) struct QueueRef {
    /// Catalog id.
    pub id: u64,
    /// The catalog state word when opened: a different one means the set was dropped.
    pub cat_word: u64,
    /// Header offset; the set's one run starts `CHUNK_HDR` before it.
    pub hdr: u64,
    /// End of the set's run.
    pub end: u64,
    pub elems: u64,
    pub elem_size: u64,
    pub stride: u64,
    pub nq: u64,
    pub queues: u64,
    pub links: u64,
    pub data: u64,
    /// Where a dead holder's elements go (without redelivery).
    pub ret: u64,
    pub redeliver: bool,
}

/// How a new set is laid out: (queue table, link table, data, end) offsets relative to the
/// header, for `n_proc` process slots.
pub(crate) fn layout(n_proc: u64, nq: u64, elems: u64, elem_size: u64) -> (u64, u64, u64, u64) {
    let stride = stride_of(elem_size);
    let queues = queue_header_size(n_proc);
    let links = queues + nq * QUEUE_ENTRY;
    // Elements of a page or more start on a page, so that each covers whole pages.
    let align = if stride >= 4096 { 4096 } else { 64 };
    let data = (CHUNK_HDR + links + elems * LINK_ENTRY).next_multiple_of(align) - CHUNK_HDR;
    (queues, links, data, data + elems * stride)
}

/// An element's stride: its size rounded up to a cache line.
pub(crate) fn stride_of(elem_size: u64) -> u64 {
    elem_size.max(1).next_multiple_of(64)
}

/// Bytes a new set's run needs (from the run's start).
pub(crate) fn run_need(n_proc: u64, nq: u64, elems: u64, elem_size: u64) -> u64 {
    CHUNK_HDR + layout(n_proc, nq, elems, elem_size).3
}

/// Writes a new set into the run at `c` (taken, not yet published): header, queues, and
/// every element in queue `initial`, in order, with zeroed bytes.
#[allow(clippy::too_many_arguments)]
pub(crate) fn init_set(
    sh: &Shared,
    c: u64,
    id: u64,
    elem_size: u64,
    elems: u64,
    queues: &[(String, u64)],
    initial: u64,
    ret: u64,
    redeliver: bool,
) -> QueueRef {
    let hdr = c + CHUNK_HDR;
    let nq = queues.len() as u64;
    let (qo, lo, d, end) = layout(sh.g.n_proc, nq, elems, elem_size);
    let mut o = hdr;
    while o < hdr + lo {
        sh.w(o).store(0, Relaxed);
        o += 8;
    }
    let q = QueueRef {
        id,
        cat_word: 0,
        hdr,
        end: hdr + end,
        elems,
        elem_size,
        stride: stride_of(elem_size),
        nq,
        queues: hdr + qo,
        links: hdr + lo,
        data: hdr + d,
        ret,
        redeliver,
    };
    for (i, (name, limit)) in queues.iter().enumerate() {
        let e = q.queue(i as u64);
        sh.w(e + Q_HEAD).store(NO_ELEMENT, Relaxed);
        sh.w(e + Q_TAIL).store(NO_ELEMENT, Relaxed);
        sh.w(e + Q_LIMIT).store(*limit, Relaxed);
        sh.w(e + Q_NAME_LEN).store(name.len() as u64, Relaxed);
        sh.r.write_bytes(e + Q_NAME, name.as_bytes());
    }
    for i in 0..elems {
        sh.w(q.link(i) + L_STATE)
            .store(qs_in_queue(initial, false), Relaxed);
        let next = if i + 1 < elems { i + 1 } else { NO_ELEMENT };
        sh.w(q.link(i) + L_NEXT).store(next, Relaxed);
    }
    let e = q.queue(initial);
    sh.w(e + Q_HEAD).store(0, Relaxed);
    sh.w(e + Q_TAIL).store(elems - 1, Relaxed);
    sh.w(e + Q_LEN).store(elems, Relaxed);
    let zeros = vec![0u8; 1 << 16];
    let mut o = q.data;
    while o < q.end {
        let n = (q.end - o).min(zeros.len() as u64);
        sh.r.write_bytes(o, &zeros[..n as usize]);
        o += n;
    }
    sh.w(hdr + QH_FLAGS)
        .store(if redeliver { QF_REDELIVER } else { 0 }, Relaxed);
    sh.w(hdr + QH_CHAIN).store(c, Relaxed);
    sh.w(hdr + QH_ELEM_SIZE).store(elem_size, Relaxed);
    sh.w(hdr + QH_ELEMS).store(elems, Relaxed);
    sh.w(hdr + QH_NQUEUES).store(nq, Relaxed);
    sh.w(hdr + QH_RETURN).store(ret, Relaxed);
    sh.w(hdr + QH_STRIDE).store(q.stride, Relaxed);
    sh.w(hdr + QH_QUEUES).store(q.queues, Relaxed);
    sh.w(hdr + QH_LINKS).store(q.links, Relaxed);
    sh.w(hdr + QH_DATA).store(q.data, Release);
    q
}

/// Whether catalog entry `id` is a queue set (live or not: its kind word says).
pub(crate) fn is_queue_set(sh: &Shared, id: u64) -> bool {
    id < sh.g.n_catalog && sh.w(sh.g.cat_entry(id) + C_KIND).load(Acquire) == KIND_QUEUES
}

/// Opens the queue set of catalog entry `id` (whatever its state), checking every word of
/// its header against the file: from here on its offsets are trusted.
pub(crate) fn queue_ref_unchecked(sh: &Shared, id: u64) -> Result<QueueRef> {
    let ce = sh.g.cat_entry(id);
    let cat_word = sh.w(ce + C_STATE).load(Acquire);
    let hdr = sh.w(ce + C_HDR).load(Acquire);
    let bad = |what: String| sh.corrupt(format!("queue set {id}: {what}"));
    if !sh.g.queues {
        return Err(bad(
            "a catalog entry of kind 2 in a store without QUEUES".into()
        ));
    }
    let (_, run_end) = crate::object::own_run(sh, id, hdr).map_err(bad)?;
    let word = |o: u64| sh.w(hdr + o).load(Acquire);
    let (flags, elem_size, elems, nq, ret) = (
        word(QH_FLAGS),
        word(QH_ELEM_SIZE),
        word(QH_ELEMS),
        word(QH_NQUEUES),
        word(QH_RETURN),
    );
    if flags & !QF_REDELIVER != 0
        || !(1..=MAX_ELEMENT_SIZE).contains(&elem_size)
        || !(1..=MAX_ELEMENTS).contains(&elems)
        || !(1..=MAX_QUEUES).contains(&nq)
        || ret >= nq
    {
        return Err(bad(format!(
            "header (flags {flags:#x}, {elems} elements of {elem_size} bytes, {nq} queues, \
             return queue {ret}) out of range"
        )));
    }
    let (qo, lo, d, e) = layout(sh.g.n_proc, nq, elems, elem_size);
    let q = QueueRef {
        id,
        cat_word,
        hdr,
        end: hdr + e,
        elems,
        elem_size,
        stride: stride_of(elem_size),
        nq,
        queues: hdr + qo,
        links: hdr + lo,
        data: hdr + d,
        ret,
        redeliver: flags & QF_REDELIVER != 0,
    };
    if word(QH_STRIDE) != q.stride
        || word(QH_QUEUES) != q.queues
        || word(QH_LINKS) != q.links
        || word(QH_DATA) != q.data
        || q.end > run_end
    {
        return Err(bad(format!(
            "its layout words do not match its geometry, or its elements end past its run \
             ({:#x} > {run_end:#x})",
            q.end
        )));
    }
    Ok(q)
}

impl QueueRef {
    /// Queue `i`'s entry.
    #[inline]
    pub fn queue(&self, i: u64) -> u64 {
        debug_assert!(i < self.nq);
        self.queues + i * QUEUE_ENTRY
    }
    /// Element `e`'s link entry.
    #[inline]
    pub fn link(&self, e: u64) -> u64 {
        debug_assert!(e < self.elems);
        self.links + e * LINK_ENTRY
    }
    /// Element `e`'s first byte.
    #[inline]
    pub fn element(&self, e: u64) -> u64 {
        debug_assert!(e < self.elems);
        self.data + e * self.stride
    }

    /// Whether the set is still the one opened (not dropped).
    pub fn alive(&self, sh: &Shared) -> bool {
        sh.w(sh.g.cat_entry(self.id) + C_STATE).load(Acquire) == self.cat_word
    }

    pub fn dropped(&self) -> Error {
        Error::NotFound(format!("queue set {} was dropped", self.id))
    }

    /// Whether elements may be pulled: the set is not dropped, nor being dropped by a
    /// live process.
    #[inline]
    pub fn check_open(&self, sh: &Shared) -> Result<()> {
        if !self.alive(sh) {
            return Err(self.dropped());
        }
        let c = sh.w(self.hdr + QH_CLOSING).load(Acquire);
        if c != 0 && sh.owner_alive(c) {
            return Err(Error::NotFound(format!(
                "queue set {} is being dropped",
                self.id
            )));
        }
        Ok(())
    }

    /// Before a drop (catalog lock held): stops pulls, waits out those in flight, and
    /// checks that no live process holds an element; if one does, the set stays open and
    /// the drop fails. Its space may then be freed: nobody will touch an element again.
    pub fn close_for_drop(&self, tx: &crate::txn::Txn) -> Result<()> {
        let sh = tx.sh;
        let closing = sh.w(self.hdr + QH_CLOSING);
        closing.store(sh.owner_word.load(Relaxed), SeqCst);
        let r = (|| {
            for qi in 0..self.nq {
                tx.lock(self.queue(qi) + Q_LOCK)?;
                tx.unlock(self.queue(qi) + Q_LOCK);
            }
            let held: u64 = self
                .held_by(sh)
                .iter()
                .filter(|(p, _, _)| {
                    let h = sh.w(self.hdr + QH_HOLDERS + 8 * p).load(Acquire);
                    sh.owner_alive(h)
                })
                .map(|(_, _, n)| n)
                .sum();
            if held > 0 {
                return Err(Error::InvalidArgument(format!(
                    "queue set {} is in use: live processes hold {held} of its elements \
                     (push them back before dropping it)",
                    self.id
                )));
            }
            Ok(())
        })();
        if r.is_err() {
            closing.store(0, SeqCst);
        }
        r
    }

    /// An element index read from the file (a head, a next link), checked.
    #[inline]
    pub fn elem_at(&self, sh: &Shared, e: u64, what: &str) -> Result<u64> {
        if e < self.elems {
            Ok(e)
        } else {
            Err(sh.corrupt(format!(
                "queue set {}: {what} names element {e}; the set has {}",
                self.id, self.elems
            )))
        }
    }

    /// Queue `i`'s name.
    pub fn queue_name(&self, sh: &Shared, i: u64) -> String {
        let e = self.queue(i);
        let n = (sh.w(e + Q_NAME_LEN).load(Acquire) as usize).min(MAX_QUEUE_NAME);
        let mut b = vec![0u8; n];
        sh.r.read_bytes(e + Q_NAME, &mut b);
        String::from_utf8_lossy(&b).into_owned()
    }
}
