//! Queue sets: [`QueueSet`], its [`Queue`]s and the [`Element`]s they pass by reference.

use crate::error::{Error, Result};
use crate::format::*;
use crate::kinds::queue::{self as kq, sweep, wait, QueueRef};
use crate::shared::Shared;
use crate::txn::Txn;
use std::sync::atomic::{AtomicU64, Ordering::*};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often, at most, a pull that finds its queue empty looks for dead holders whose
/// elements should go back.
const SWEEP_EVERY: Duration = Duration::from_millis(10);

/// How many empty pulls (not sleeping ones) pass between two looks at the clock for
/// [`SWEEP_EVERY`].
const EMPTY_PULLS_PER_LOOK: u64 = 64;

/// How a new queue set is made ([`Store::queue_set`](crate::Store::queue_set)): its
/// element size and count, its queues, where its elements start, and where the elements
/// of a process that dies holding them go.
///
/// ```
/// let o = shoal::QueueSetOptions::new(64, 1024)
///     .queue("a2b")
///     .queue_with_limit("b2a", 100);
/// # let _ = o;
/// ```
#[derive(Clone, Debug)]
pub struct QueueSetOptions {
    element_size: usize,
    elements: u64,
    queues: Vec<(String, u64)>,
    initial: String,
    redeliver: bool,
}

impl QueueSetOptions {
    /// `elements` elements of `element_size` bytes each (zeroed at creation), all in one
    /// queue named `free`.
    pub fn new(element_size: usize, elements: u64) -> QueueSetOptions {
        QueueSetOptions {
            element_size,
            elements,
            queues: vec![("free".into(), 0)],
            initial: "free".into(),
            redeliver: false,
        }
    }

    /// Adds a queue without a depth limit.
    pub fn queue(self, name: &str) -> QueueSetOptions {
        self.queue_with_limit(name, 0)
    }

    /// Adds a queue that takes at most `limit` elements (0: no limit): a push that would
    /// pass it fails with [`Error::QueueFull`]. Elements handed back after their holder
    /// died, or by a dropped [`Element`], always go in, past the limit if need be.
    pub fn queue_with_limit(mut self, name: &str, limit: u64) -> QueueSetOptions {
        if let Some(q) = self.queues.iter_mut().find(|(n, _)| n == name) {
            q.1 = limit;
        } else {
            self.queues.push((name.into(), limit));
        }
        self
    }

    /// The queue every element starts in (default `free`, which exists unless another
    /// initial queue is named). It is also the queue where the elements of a process that
    /// dies holding them go, unless [`redeliver`](Self::redeliver) is set.
    pub fn initial(mut self, name: &str) -> QueueSetOptions {
        if self.initial == "free" && name != "free" {
            self.queues.retain(|(n, l)| n != "free" || *l != 0);
        }
        if !self.queues.iter().any(|(n, _)| n == name) {
            self.queues.insert(0, (name.into(), 0));
        }
        self.initial = name.into();
        self
    }

    /// Whether the elements of a process that dies holding them go back to the queue each
    /// was pulled from, marked [`Element::redelivered`], instead of to the initial queue.
    pub fn redeliver(mut self, yes: bool) -> QueueSetOptions {
        self.redeliver = yes;
        self
    }

    /// Checks the options against the format's limits; returns the initial queue's index.
    pub(crate) fn validate(&self) -> Result<u64> {
        let bad = |m: String| Err(Error::InvalidArgument(m));
        if !(1..=MAX_ELEMENT_SIZE).contains(&(self.element_size as u64)) {
            return bad(format!(
                "element size {} out of range (1 to {MAX_ELEMENT_SIZE} bytes)",
                self.element_size
            ));
        }
        if !(1..=MAX_ELEMENTS).contains(&self.elements) {
            return bad(format!(
                "element count {} out of range (1 to {MAX_ELEMENTS})",
                self.elements
            ));
        }
        if self.queues.len() as u64 > MAX_QUEUES {
            return bad(format!(
                "{} queues; a set has at most {MAX_QUEUES}",
                self.queues.len()
            ));
        }
        for (i, (n, _)) in self.queues.iter().enumerate() {
            if self.queues[..i].iter().any(|(m, _)| m == n) {
                return bad(format!("queue name {n:?} given twice"));
            }
            if n.is_empty() || n.len() > MAX_QUEUE_NAME {
                return bad(format!(
                    "queue name {n:?}: 1 to {MAX_QUEUE_NAME} bytes of UTF-8"
                ));
            }
        }
        Ok(self
            .queues
            .iter()
            .position(|(n, _)| *n == self.initial)
            .expect("the initial queue is always listed") as u64)
    }

    /// Options with exactly these queues, in this order (repair's copy of a set).
    pub(crate) fn exact(
        element_size: usize,
        elements: u64,
        queues: Vec<(String, u64)>,
        initial: String,
        redeliver: bool,
    ) -> QueueSetOptions {
        QueueSetOptions {
            element_size,
            elements,
            queues,
            initial,
            redeliver,
        }
    }

    pub(crate) fn parts(&self) -> (u64, u64, &[(String, u64)], bool) {
        (
            self.element_size as u64,
            self.elements,
            &self.queues,
            self.redeliver,
        )
    }
}

/// A queue of a [`QueueSet`], by index: from [`QueueSet::queue`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Queue(u8);

impl Queue {
    /// The queue's index in its set (the order of creation).
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// An element this process holds, known by its index alone ([`Element::into_held`]): what
/// a binding keeps where an [`Element`], which borrows its handle, cannot live (a C
/// handle, a Python object). [`QueueSet::adopt`] makes it an `Element` again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Held {
    /// The element's index in its set.
    pub index: u64,
    /// The queue it was pulled from (where it goes back when dropped).
    pub from: Queue,
    /// Whether it came back to its queue because a holder died.
    pub redelivered: bool,
}

/// Figures of one queue ([`QueueSet::stats`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueStats {
    /// The queue's name.
    pub name: String,
    /// Elements in it now.
    pub len: u64,
    /// Its depth limit (0: none).
    pub limit: u64,
    /// Elements pushed into it so far (moved in and handed back included).
    pub pushes: u64,
    /// Elements pulled from it so far (moved out included).
    pub pulls: u64,
    /// Times a pull slept waiting for it.
    pub waits: u64,
}

/// Elements held by one process ([`QueueSet::held`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holder {
    /// The process's id.
    pub pid: u32,
    /// Elements it holds.
    pub elements: u64,
}

struct Inner {
    sh: Arc<Shared>,
    q: QueueRef,
    name: String,
    names: Vec<String>,
    timeout: Duration,
    /// The owner word this process was registered with as a holder (0: not yet).
    registered: AtomicU64,
    /// When this handle last looked for dead holders (ms since `born`).
    swept: AtomicU64,
    /// Pulls through this handle that found their queue empty.
    empty_pulls: AtomicU64,
    born: Instant,
}

/// A queue set: `elements()` elements of `element_size()` bytes in the store file, and
/// named queues that pass them between processes and threads by reference.
///
/// A producer pulls a free element, writes it in place and pushes it to a queue; a
/// consumer pulls it from there, reads it in place, and pushes it on, or back to `free`.
/// No byte is copied. Every element is at every instant in exactly one queue or held by
/// one live process; the elements of a process that dies holding them go back to the
/// initial queue (or, with [`QueueSetOptions::redeliver`], to the queue each came from)
/// as soon as a pull that finds a queue empty, or a sleeping one, notices (within
/// milliseconds), or at [`QueueSet::reclaim`].
///
/// ```
/// # let d = tempfile::tempdir().unwrap();
/// let store = shoal::Store::open(d.path().join("q.shoal"))?;
/// let set = store.queue_set("jobs", &shoal::QueueSetOptions::new(64, 16).queue("todo"))?;
/// let (free, todo) = (set.queue("free")?, set.queue("todo")?);
/// let mut e = set.pull(free)?.expect("16 free elements");
/// e.write(0, b"job 1");
/// set.push(todo, e)?;
/// let job = set.pull(todo)?.unwrap();
/// assert_eq!(&job.to_vec()[..5], b"job 1");
/// drop(job); // back to where it came from: `todo`
/// assert_eq!(set.len(todo)?, 1);
/// # Ok::<(), shoal::Error>(())
/// ```
#[derive(Clone)]
pub struct QueueSet {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for QueueSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueSet")
            .field("name", &self.inner.name)
            .field("element_size", &self.inner.q.elem_size)
            .field("elements", &self.inner.q.elems)
            .field("queues", &self.inner.names)
            .finish()
    }
}

impl QueueSet {
    pub(crate) fn new(sh: Arc<Shared>, q: QueueRef, name: &str) -> QueueSet {
        let names = (0..q.nq).map(|i| q.queue_name(&sh, i)).collect();
        let timeout = sh.lock_timeout;
        QueueSet {
            inner: Arc::new(Inner {
                sh,
                q,
                name: name.into(),
                names,
                timeout,
                registered: AtomicU64::new(0),
                swept: AtomicU64::new(0),
                empty_pulls: AtomicU64::new(0),
                born: Instant::now(),
            }),
        }
    }

    fn txn(&self) -> Result<crate::txn::Op<'_>> {
        let t = crate::txn::thread_txn(&self.inner.sh)?;
        let mut tx = crate::txn::Op::new(&self.inner.sh, t);
        tx.timeout = self.inner.timeout;
        Ok(tx)
    }

    /// The set's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Bytes per element.
    pub fn element_size(&self) -> usize {
        self.inner.q.elem_size as usize
    }

    /// Elements in the set.
    pub fn elements(&self) -> u64 {
        self.inner.q.elems
    }

    /// The names of the set's queues, by index.
    pub fn queue_names(&self) -> &[String] {
        &self.inner.names
    }

    /// Queue number `index` (the order of creation); `InvalidArgument` past the last.
    pub fn queue_at(&self, index: usize) -> Result<Queue> {
        if index as u64 >= self.inner.q.nq {
            return Err(Error::InvalidArgument(format!(
                "queue {index} is not one of the {} queues of queue set {:?}",
                self.inner.q.nq, self.inner.name
            )));
        }
        Ok(Queue(index as u8))
    }

    /// The element `h` names as an [`Element`] again, checking that this process holds it
    /// (its state word says so; `InvalidArgument` otherwise, e.g. one pushed since).
    /// Adopting one element twice at once, from two threads, is the caller's error: both
    /// could push it.
    pub fn adopt(&self, h: Held) -> Result<Element<'_>> {
        let q = &self.inner.q;
        let sh = &*self.inner.sh;
        self.check_queue(h.from)?;
        if h.index >= q.elems {
            return Err(Error::InvalidArgument(format!(
                "element {} is not in queue set {:?}, which has {}",
                h.index, self.inner.name, q.elems
            )));
        }
        let (p, gen) = txn_owner_parts(sh.owner_word.load(Relaxed));
        let st = sh.w(q.link(h.index) + L_STATE).load(Acquire);
        if st & 3 != QS_HELD || qs_holder(st) != (p, gen & 0xffff_ffff) {
            return Err(Error::InvalidArgument(format!(
                "element {} of queue set {:?} is not held by this process",
                h.index, self.inner.name
            )));
        }
        Ok(Element {
            set: self,
            idx: h.index,
            from: h.from.0,
            redelivered: h.redelivered,
            on_drop: Some(h.from.0),
        })
    }

    /// The queue named `name`; `NotFound` if the set has none.
    pub fn queue(&self, name: &str) -> Result<Queue> {
        self.inner
            .names
            .iter()
            .position(|n| n == name)
            .map(|i| Queue(i as u8))
            .ok_or_else(|| {
                Error::NotFound(format!(
                    "queue {name:?} in queue set {:?} (its queues: {:?})",
                    self.inner.name, self.inner.names
                ))
            })
    }

    /// Whether `e` is an element of this set (through any handle on it in this process).
    fn same_set(&self, e: &Element<'_>) -> bool {
        let (a, b) = (&e.set.inner, &self.inner);
        Arc::ptr_eq(&a.sh, &b.sh) && (a.q.hdr, a.q.cat_word) == (b.q.hdr, b.q.cat_word)
    }

    fn check_queue(&self, q: Queue) -> Result<u64> {
        if (q.0 as u64) < self.inner.q.nq {
            Ok(q.0 as u64)
        } else {
            Err(Error::InvalidArgument(format!(
                "queue {} is not one of the {} queues of queue set {:?}",
                q.0, self.inner.q.nq, self.inner.name
            )))
        }
    }

    /// The state word of an element this process pulls from queue `qi`, after making it
    /// a holder of record.
    fn held_state(&self, tx: &Txn, qi: u64) -> Result<u64> {
        let sh = &*self.inner.sh;
        let me = sh.owner_word.load(Relaxed);
        if self.inner.registered.load(Relaxed) != me {
            sweep::register(tx, &self.inner.q)?;
            self.inner.registered.store(me, Relaxed);
        }
        let (p, gen) = txn_owner_parts(me);
        Ok(qs_held(qi, p, gen))
    }

    /// [`QueueSet::maybe_sweep`] at one empty pull in [`EMPTY_PULLS_PER_LOOK`]: a
    /// pull that spins on an empty queue must not pay a clock read each time.
    fn maybe_sweep_now_and_then(&self, tx: &Txn) -> Result<()> {
        if self.inner.empty_pulls.fetch_add(1, Relaxed) % EMPTY_PULLS_PER_LOOK == 0 {
            self.maybe_sweep(tx)?;
        }
        Ok(())
    }

    /// Looks for dead holders if it was not done in the last [`SWEEP_EVERY`].
    fn maybe_sweep(&self, tx: &Txn) -> Result<()> {
        let now = self.inner.born.elapsed().as_millis() as u64;
        let last = self.inner.swept.load(Relaxed);
        if now.saturating_sub(last) >= SWEEP_EVERY.as_millis() as u64
            && self
                .inner
                .swept
                .compare_exchange(last, now.max(1), Relaxed, Relaxed)
                .is_ok()
        {
            sweep::sweep_dead(tx, &self.inner.q)?;
        }
        Ok(())
    }

    fn element(&self, (idx, st): (u64, u64)) -> Element<'_> {
        Element {
            set: self,
            idx,
            from: qs_queue(st) as u8,
            redelivered: st & QS_REDELIVERED != 0,
            on_drop: Some(qs_queue(st) as u8),
        }
    }

    /// Pulls one element from queue `qi`.
    fn pull_one(&self, tx: &Txn, qi: u64) -> Result<Option<Element<'_>>> {
        let held = self.held_state(tx, qi)?;
        let mut got = [(0, 0)];
        let n = kq::pull_chain(tx, &self.inner.q, qi, &mut got, held)?;
        Ok((n == 1).then(|| self.element(got[0])))
    }

    /// Takes the element at the head of `q`, or None at once if `q` is empty.
    pub fn pull(&self, q: Queue) -> Result<Option<Element<'_>>> {
        let _call = crate::deadline::call();
        let qi = self.check_queue(q)?;
        let tx = self.txn()?;
        let got = self.pull_one(&tx, qi)?;
        if got.is_none() {
            self.maybe_sweep_now_and_then(&tx)?;
        }
        Ok(got)
    }

    /// Takes up to `max` elements from the head of `q` in one step (fewer if it holds
    /// fewer; none if it is empty).
    pub fn pull_many(&self, q: Queue, max: usize) -> Result<Vec<Element<'_>>> {
        let _call = crate::deadline::call();
        let qi = self.check_queue(q)?;
        let tx = self.txn()?;
        // Room for what the queue holds now (a hint read without its lock): `max` may be
        // far more than the set has.
        let hint = self
            .inner
            .sh
            .w(self.inner.q.queue(qi) + Q_LEN)
            .load(Acquire);
        let mut buf = vec![(0, 0); (max as u64).min(hint) as usize];
        let held = self.held_state(&tx, qi)?;
        let n = if buf.is_empty() {
            0
        } else {
            kq::pull_chain(&tx, &self.inner.q, qi, &mut buf, held)?
        };
        if n == 0 {
            self.maybe_sweep_now_and_then(&tx)?;
        }
        Ok(buf[..n].iter().map(|&x| self.element(x)).collect())
    }

    /// Takes the element at the head of `q`, waiting up to `timeout` for one to be pushed
    /// (by any process): a short spin, then a sleep that a push wakes. None if none came.
    pub fn pull_wait(&self, q: Queue, timeout: Duration) -> Result<Option<Element<'_>>> {
        self.pull_any(&[q], timeout)
    }

    /// Takes the element at the head of the first of `queues` that has one, waiting up to
    /// `timeout` for a push to any of them. [`Element::from`] says which queue it came
    /// from. None if none came.
    pub fn pull_any(&self, queues: &[Queue], timeout: Duration) -> Result<Option<Element<'_>>> {
        let _call = crate::deadline::call();
        let qis = queues
            .iter()
            .map(|q| self.check_queue(*q))
            .collect::<Result<Vec<_>>>()?;
        if qis.is_empty() {
            return Err(Error::InvalidArgument(
                "pull_any needs at least one queue".into(),
            ));
        }
        let sh = &*self.inner.sh;
        let qes: Vec<u64> = qis.iter().map(|&i| self.inner.q.queue(i)).collect();
        let tx = self.txn()?;
        let start = Instant::now();
        let mut spun = false;
        loop {
            for &qi in &qis {
                if let Some(e) = self.pull_one(&tx, qi)? {
                    return Ok(Some(e));
                }
            }
            self.maybe_sweep(&tx)?;
            let left = timeout.saturating_sub(start.elapsed());
            if left.is_zero() {
                return Ok(None);
            }
            if !spun {
                spun = true;
                if wait::spin(sh, &qes) {
                    continue;
                }
            }
            // Wake at least every SWEEP_EVERY to look for dead holders: an element a dead
            // process held comes back with no push to wake anyone.
            tx.section
                .pause(|| wait::sleep(sh, &qes, left.min(SWEEP_EVERY)));
        }
    }

    /// Puts `e` at the tail of `q`. If `q` is at its depth limit the push fails with
    /// [`Error::QueueFull`] and `e` is dropped, which sends it where it would have gone
    /// when dropped (see [`Element`]); [`QueueSet::try_push`] gives it back instead.
    pub fn push(&self, q: Queue, e: Element<'_>) -> Result<()> {
        self.try_push(q, e).map_err(|(err, _)| err)
    }

    /// [`QueueSet::push`] that gives the element back with the error.
    pub fn try_push<'a>(
        &self,
        q: Queue,
        mut e: Element<'a>,
    ) -> std::result::Result<(), (Error, Element<'a>)> {
        let _call = crate::deadline::call();
        if !self.same_set(&e) {
            return Err((
                Error::InvalidArgument(format!(
                    "an element of queue set {:?} pushed to another set ({:?})",
                    e.set.inner.name, self.inner.name
                )),
                e,
            ));
        }
        let r = self
            .check_queue(q)
            .and_then(|qi| Ok((qi, self.txn()?)))
            .and_then(|(qi, tx)| kq::push_chain(&tx, &self.inner.q, qi, &[e.idx], false, true));
        match r {
            Ok(()) => {
                e.on_drop = None;
                Ok(())
            }
            Err(err) => Err((err, e)),
        }
    }

    /// Puts every element of `elems` at the tail of `q`, in order, in one step: all of
    /// them or (at a depth limit, [`Error::QueueFull`]) none, in which case they are
    /// dropped as by [`QueueSet::push`].
    pub fn push_many(&self, q: Queue, elems: Vec<Element<'_>>) -> Result<()> {
        let _call = crate::deadline::call();
        let qi = self.check_queue(q)?;
        if let Some(e) = elems.iter().find(|e| !self.same_set(e)) {
            return Err(Error::InvalidArgument(format!(
                "an element of queue set {:?} pushed to another set ({:?})",
                e.set.inner.name, self.inner.name
            )));
        }
        // No two of them are the same element: an Element is the one guard of a held
        // element (pulls make one each, and nothing copies them).
        let idx: Vec<u64> = elems.iter().map(|e| e.idx).collect();
        let tx = self.txn()?;
        kq::push_chain(&tx, &self.inner.q, qi, &idx, false, true)?;
        for e in elems {
            e.keep();
        }
        Ok(())
    }

    /// Pushes `elems` onto `q` whatever its depth limit (repair's copy of a set).
    pub(crate) fn push_past_limit(&self, q: Queue, elems: Vec<Element<'_>>) -> Result<()> {
        let qi = self.check_queue(q)?;
        let idx: Vec<u64> = elems.iter().map(|e| e.idx).collect();
        let tx = self.txn()?;
        kq::push_chain(&tx, &self.inner.q, qi, &idx, false, false)?;
        for e in elems {
            e.keep();
        }
        Ok(())
    }

    /// [`QueueSet::push_many`] that gives the elements back with the error (they stay
    /// held).
    pub fn try_push_many<'a>(
        &self,
        q: Queue,
        elems: Vec<Element<'a>>,
    ) -> std::result::Result<(), (Error, Vec<Element<'a>>)> {
        let _call = crate::deadline::call();
        let r = (|| {
            let qi = self.check_queue(q)?;
            if let Some(e) = elems.iter().find(|e| !self.same_set(e)) {
                return Err(Error::InvalidArgument(format!(
                    "an element of queue set {:?} pushed to another set ({:?})",
                    e.set.inner.name, self.inner.name
                )));
            }
            let idx: Vec<u64> = elems.iter().map(|e| e.idx).collect();
            let tx = self.txn()?;
            kq::push_chain(&tx, &self.inner.q, qi, &idx, false, true)
        })();
        match r {
            Ok(()) => {
                for e in elems {
                    e.keep();
                }
                Ok(())
            }
            Err(err) => Err((err, elems)),
        }
    }

    /// Gives `e` back where it would go if dropped (the queue it came from, or where
    /// [`Element::return_to`] says), past that queue's depth limit if need be, and says
    /// if that failed (a drop cannot; the element then stays held).
    pub fn release(&self, mut e: Element<'_>) -> Result<()> {
        let _call = crate::deadline::call();
        let Some(q) = e.on_drop.take() else {
            return Ok(());
        };
        if !self.same_set(&e) {
            return Err(Error::InvalidArgument(format!(
                "an element of queue set {:?} released through another set ({:?})",
                e.set.inner.name, self.inner.name
            )));
        }
        let tx = self.txn()?;
        kq::push_chain(&tx, &self.inner.q, q as u64, &[e.idx], false, false)
    }

    /// Moves up to `max` elements from the head of `from` to the tail of `to` in one step,
    /// within `to`'s depth limit; no process holds them on the way. Returns how many moved.
    pub fn move_to(&self, from: Queue, to: Queue, max: usize) -> Result<usize> {
        let _call = crate::deadline::call();
        let (f, t) = (self.check_queue(from)?, self.check_queue(to)?);
        if f == t {
            return Err(Error::InvalidArgument(format!(
                "move_to from queue {:?} to itself",
                self.inner.names[f as usize]
            )));
        }
        let tx = self.txn()?;
        Ok(kq::move_between(&tx, &self.inner.q, f, t, max as u64)? as usize)
    }

    /// Elements in `q` now.
    pub fn len(&self, q: Queue) -> Result<u64> {
        let qi = self.check_queue(q)?;
        self.alive()?;
        Ok(self
            .inner
            .sh
            .w(self.inner.q.queue(qi) + Q_LEN)
            .load(Acquire))
    }

    /// Whether `q` is empty now.
    pub fn is_empty(&self, q: Queue) -> Result<bool> {
        Ok(self.len(q)? == 0)
    }

    fn alive(&self) -> Result<()> {
        if self.inner.q.alive(&self.inner.sh) {
            Ok(())
        } else {
            Err(Error::NotFound(format!(
                "queue set {:?} was dropped",
                self.inner.name
            )))
        }
    }

    /// Figures of queue `q`.
    pub fn stats(&self, q: Queue) -> Result<QueueStats> {
        let qi = self.check_queue(q)?;
        self.alive()?;
        let (name, [len, limit, pushes, pulls, waits]) = self
            .inner
            .q
            .queue_figures(&self.inner.sh)
            .swap_remove(qi as usize);
        Ok(QueueStats {
            name,
            len,
            limit,
            pushes,
            pulls,
            waits,
        })
    }

    /// The processes holding elements now, with how many each holds (a scan of every
    /// element's state).
    pub fn held(&self) -> Result<Vec<Holder>> {
        self.alive()?;
        Ok(self
            .inner
            .q
            .held_by(&self.inner.sh)
            .into_iter()
            .map(|(_, pid, n)| Holder {
                pid: pid as u32,
                elements: n,
            })
            .collect())
    }

    /// Hands back now the elements of every process that died holding some; returns how
    /// many went back. (Pulls do this on their own when they find a queue empty.)
    pub fn reclaim(&self) -> Result<u64> {
        let _call = crate::deadline::call();
        let tx = self.txn()?;
        sweep::sweep_dead(&tx, &self.inner.q)
    }
}

/// An element of a [`QueueSet`], held by this process: read and write it in place. It
/// borrows the handle it was pulled through (no reference count per element).
///
/// Dropping it pushes it back to the queue it came from (or where
/// [`Element::return_to`] says), past that queue's depth limit if need be;
/// [`QueueSet::push`] sends it on instead, and [`Element::keep`] leaves it held.
///
/// The element's bytes live in the shared file. Only its holder may write them, and the
/// queues guarantee a single holder; [`Element::read`] and [`Element::write`] copy with
/// atomic word accesses (sound whatever other processes do), and [`Element::as_ptr`] is
/// the raw address for code that takes responsibility for the access itself.
pub struct Element<'a> {
    set: &'a QueueSet,
    idx: u64,
    from: u8,
    redelivered: bool,
    on_drop: Option<u8>,
}

impl std::fmt::Debug for Element<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Element")
            .field("set", &self.set.inner.name)
            .field("index", &self.idx)
            .field("from", &self.set.inner.names[self.from as usize])
            .field("redelivered", &self.redelivered)
            .finish()
    }
}

impl Element<'_> {
    /// The element's index in its set (0 to `elements() - 1`): the same in every process.
    #[inline]
    pub fn index(&self) -> u64 {
        self.idx
    }

    /// The queue it was pulled from.
    pub fn from(&self) -> Queue {
        Queue(self.from)
    }

    /// Whether it is back in its queue because a process died holding it (a set with
    /// [`QueueSetOptions::redeliver`]): its work may have been done in part.
    pub fn redelivered(&self) -> bool {
        self.redelivered
    }

    /// The element's size in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.set.inner.q.elem_size as usize
    }

    /// Whether the element has no bytes (never: elements have at least one).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn span(&self, offset: usize, n: usize) -> u64 {
        assert!(
            offset.checked_add(n).is_some_and(|e| e <= self.len()),
            "bytes {offset}..{} outside an element of {} bytes",
            offset.saturating_add(n),
            self.len()
        );
        self.set.inner.q.element(self.idx) + offset as u64
    }

    /// Copies `buf.len()` bytes from `offset` into `buf`. Panics if they pass the
    /// element's end.
    pub fn read(&self, offset: usize, buf: &mut [u8]) {
        let at = self.span(offset, buf.len());
        self.set.inner.sh.r.read_bytes(at, buf);
    }

    /// Writes `bytes` at `offset`. Panics if they pass the element's end.
    pub fn write(&mut self, offset: usize, bytes: &[u8]) {
        let at = self.span(offset, bytes.len());
        self.set.inner.sh.r.write_bytes(at, bytes);
    }

    /// The element's bytes in place, as little-endian words (the last one padded past the
    /// element's end with bytes nobody else uses): zero-copy access for code that reads
    /// or writes the element word by word, with atomic loads and stores (`Relaxed` is
    /// enough: the push that hands the element on orders everything before it).
    // Inlined into the caller's crate: a call per element was an eighth of a batch's time.
    #[inline]
    pub fn words(&self) -> &[crate::mem::AtomicU64] {
        let n = self.len().div_ceil(8);
        // The holder's own writes need no backup hook (see `mem::SharedWord`).
        crate::mem::SharedWord::as_atomics(
            self.set
                .inner
                .sh
                .r
                .words(self.set.inner.q.element(self.idx), n),
        )
    }

    /// The element's bytes, copied.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.len()];
        self.read(0, &mut v);
        v
    }

    /// The address of the element's first byte in this process (valid while the store is
    /// open; 64-byte aligned). Reading or writing through it is the caller's unsafe code:
    /// sound while this process holds the element, since no other holder exists.
    #[cfg(not(shuttle))]
    #[inline]
    pub fn as_ptr(&self) -> *mut u8 {
        self.set
            .inner
            .sh
            .r
            .base_ptr()
            .wrapping_add(self.set.inner.q.element(self.idx) as usize)
    }

    /// Where the element goes when dropped (default: the queue it came from).
    pub fn return_to(&mut self, q: Queue) -> Result<()> {
        self.on_drop = Some(self.set.check_queue(q)? as u8);
        Ok(())
    }

    /// Leaves the element held by this process when dropped: nobody else gets it until
    /// this process dies (then it goes back as if the process had died holding it).
    #[inline]
    pub fn keep(mut self) {
        self.on_drop = None;
    }

    /// Leaves the element held by this process and returns what names it, for
    /// [`QueueSet::adopt`].
    pub fn into_held(mut self) -> Held {
        self.on_drop = None;
        Held {
            index: self.idx,
            from: Queue(self.from),
            redelivered: self.redelivered,
        }
    }
}

impl Element<'_> {
    /// Pushes the element to queue `q` as its drop does.
    fn give_back(&self, q: u8) {
        // Nothing to report an error to: an element that cannot be pushed back stays
        // held by this process, and goes back when the process ends.
        if let Ok(tx) = self.set.txn() {
            let _ = kq::push_chain(&tx, &self.set.inner.q, q as u64, &[self.idx], false, false);
        }
    }
}

impl Drop for Element<'_> {
    // Inlined into the caller's crate: most drops are of elements pushed on, or kept
    // (every element of a `push_many`), for which a drop is a test of one byte.
    #[inline]
    fn drop(&mut self) {
        if let Some(q) = self.on_drop.take() {
            self.give_back(q);
        }
    }
}
