//! The native half of ordered maps (`shoal._ordered` holds the public classes): a map
//! handle, snapshots, range iterators and write transactions over the engine's
//! `OrderedMap`, with keys and values through codecs.
//!
//! Snapshots, their iterators and transactions belong to the thread that made them (the
//! engine keeps a snapshot's pin and a transaction's locks in that thread's slot): their
//! engine state is kept in an `Owned`, which raises `RuntimeError` when another thread
//! uses it, rather than letting it read without a pin or write under locks it does not
//! hold. (pyo3's `unsendable` classes would panic instead.)

use crate::codec::Codec;
use crate::errors::{closed, exc, invalid, ResultExt};
use crate::store::StoreCore;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use shoal::{MultiWriteTxn, OrderedMap, Snapshot};
use std::collections::VecDeque;
use std::mem::ManuallyDrop;
use std::rc::Rc;
use std::sync::Arc;
use std::thread::ThreadId;

/// Entries copied out of a snapshot per batch of an iterator: enough that the descent
/// starting each batch costs little per entry, few enough that a loop that stops early
/// copies little for nothing.
const BATCH: usize = 128;

/// The key codecs whose bytes sort as their values do ("str": UTF-8 keeps code point
/// order).
fn key_codec(name: &str) -> PyResult<Codec> {
    let c = Codec::parse(name)?;
    if !matches!(c, Codec::Bytes | Codec::Str) {
        return Err(invalid(&format!(
            "an ordered map's keys are sorted bytewise, so their codec must be \"bytes\" \
             or \"str\" (whose bytes sort as the strings do), not {name:?}"
        )));
    }
    Ok(c)
}

/// A value that `Python::detach` carries in or out of its closure although it is not
/// `Send`: `detach` runs the closure on the calling thread, so the value never changes
/// threads (the engine's snapshots and transactions must not).
struct SameThread<T>(T);
// SAFETY: only ever moved into and out of a `detach` closure, which runs on the thread
// that calls it.
unsafe impl<T> Send for SameThread<T> {}

/// State that only the thread that made it may touch. Another thread's use raises
/// `RuntimeError`; dropped on another thread (the last reference released there), it is
/// leaked rather than released from the wrong thread's slot: the pin or locks stay with
/// the owner thread until it exits, when the engine ignores them (a dead thread's slot
/// holds nothing).
pub struct Owned<T> {
    thread: ThreadId,
    v: ManuallyDrop<T>,
}

// SAFETY: the value is reached only through `get`/`get_mut`, which check that the caller
// is the owner thread, and dropped only there.
unsafe impl<T> Send for Owned<T> {}
// SAFETY: as above: a shared reference gives nothing to another thread.
unsafe impl<T> Sync for Owned<T> {}

impl<T> Owned<T> {
    fn new(v: T) -> Owned<T> {
        Owned {
            thread: std::thread::current().id(),
            v: ManuallyDrop::new(v),
        }
    }

    fn check(&self, what: &str) -> PyResult<()> {
        if std::thread::current().id() != self.thread {
            return Err(PyRuntimeError::new_err(format!(
                "this {what} belongs to the thread that made it; use it only there"
            )));
        }
        Ok(())
    }

    fn get(&self, what: &str) -> PyResult<&T> {
        self.check(what)?;
        Ok(&self.v)
    }

    fn get_mut(&mut self, what: &str) -> PyResult<&mut T> {
        self.check(what)?;
        Ok(&mut self.v)
    }
}

impl<T> Drop for Owned<T> {
    fn drop(&mut self) {
        if std::thread::current().id() == self.thread {
            // SAFETY: dropped once, here, and never used again.
            unsafe { ManuallyDrop::drop(&mut self.v) }
        }
    }
}

/// A range's encoded bounds, `lo <= key < hi` (None: unbounded).
type Bounds = (Option<Vec<u8>>, Option<Vec<u8>>);

/// What the native objects share: the store (to refuse calls once it is closed) and the
/// codecs.
#[derive(Clone)]
struct Ctx {
    store: Arc<StoreCore>,
    kc: Codec,
    vc: Codec,
}

impl Ctx {
    fn live(&self, py: Python<'_>) -> PyResult<()> {
        if self.store.store.load().is_none() {
            return Err(closed(py));
        }
        Ok(())
    }

    fn key(&self, k: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
        Ok(self.kc.encode(k, "key")?.into_vec())
    }

    fn value(&self, v: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
        Ok(self.vc.encode(v, "value")?.into_vec())
    }

    /// A range's bounds as the engine takes them (`lo <= key < hi`): an exclusive lower
    /// bound or an inclusive upper one becomes the next key up (the key and a zero byte,
    /// the smallest key greater than it).
    fn bounds(
        &self,
        lo: Option<&Bound<'_, PyAny>>,
        hi: Option<&Bound<'_, PyAny>>,
        lo_incl: bool,
        hi_incl: bool,
    ) -> PyResult<Bounds> {
        let f = |b: Option<&Bound<'_, PyAny>>, incl_moves: bool| -> PyResult<Option<Vec<u8>>> {
            match b {
                None => Ok(None),
                Some(b) if b.is_none() => Ok(None),
                Some(b) => {
                    let mut k = self.key(b)?;
                    if incl_moves {
                        k.push(0);
                    }
                    Ok(Some(k))
                }
            }
        };
        Ok((f(lo, !lo_incl)?, f(hi, hi_incl)?))
    }

    fn entry<'py>(
        &self,
        py: Python<'py>,
        k: &[u8],
        v: &[u8],
        what: u8,
    ) -> PyResult<Bound<'py, PyAny>> {
        Ok(match what {
            KEYS => self.kc.decode(py, k)?,
            VALUES => self.vc.decode(py, v)?,
            // 2: items.
            _ => PyTuple::new(py, [self.kc.decode(py, k)?, self.vc.decode(py, v)?])?.into_any(),
        })
    }
}

const KEYS: u8 = 0;
const VALUES: u8 = 1;

/// A snapshot and the map handle it borrows; fields drop in order, the snapshot (which
/// releases its pin) before the map.
struct SnapHold {
    snap: Snapshot<'static>,
    _map: Box<OrderedMap>,
}

fn hold(map: &OrderedMap) -> shoal::Result<Rc<SnapHold>> {
    let b = Box::new(map.clone());
    // SAFETY: the snapshot borrows the boxed map, which never moves and is dropped after
    // it (SnapHold's field order).
    let r: &'static OrderedMap = unsafe { &*(&*b as *const OrderedMap) };
    let snap = r.snapshot()?;
    Ok(Rc::new(SnapHold { snap, _map: b }))
}

/// Native ordered map (`shoal.OrderedMap` wraps it).
#[pyclass(module = "shoal._shoal", name = "_OrderedMap", frozen)]
pub struct OrderedNative {
    map: OrderedMap,
    cx: Ctx,
}

impl OrderedNative {
    /// Opens (or creates) the ordered map `name` of a store.
    pub fn open(
        py: Python<'_>,
        core: &Arc<StoreCore>,
        st: &shoal::Store,
        name: &str,
        key: &str,
        value: &str,
        create: bool,
    ) -> PyResult<OrderedNative> {
        let kc = key_codec(key)?;
        let vc = Codec::parse(value)?;
        let name_owned = name.to_owned();
        let map = py
            .detach(|| -> shoal::Result<Option<OrderedMap>> {
                if !create && st.map_kind(&name_owned)?.is_none() {
                    return Ok(None);
                }
                st.ordered_map(&name_owned).map(Some)
            })
            .py_err(py)?
            .ok_or_else(|| {
                exc(
                    py,
                    "NotFound",
                    format!("no ordered map {name:?} (create=True creates it)"),
                )
            })?;
        Ok(OrderedNative {
            map,
            cx: Ctx {
                store: core.clone(),
                kc,
                vc,
            },
        })
    }

    fn m(&self, py: Python<'_>) -> PyResult<&OrderedMap> {
        self.cx.live(py)?;
        Ok(&self.map)
    }
}

#[pymethods]
impl OrderedNative {
    #[getter]
    fn name(&self) -> &str {
        self.map.name()
    }

    #[getter]
    fn key_codec(&self) -> &'static str {
        self.cx.kc.name()
    }

    #[getter]
    fn value_codec(&self) -> &'static str {
        self.cx.vc.name()
    }

    /// The value of `key`, or None.
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let k = self.cx.key(key)?;
        let m = self.m(py)?;
        match m.get(&k).py_err(py)? {
            Some(v) => Ok(Some(self.cx.vc.decode(py, &v)?)),
            None => Ok(None),
        }
    }

    /// put(key, value, mode) -> bool: mode 0 sets (returns True), 1 only if absent, 2
    /// only if present (returns whether it did). Waits for the map's writer lock with
    /// the GIL released.
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        mode: u8,
    ) -> PyResult<bool> {
        let (k, v) = (self.cx.key(key)?, self.cx.value(value)?);
        let m = self.m(py)?;
        py.detach(|| match mode {
            0 => m.put(&k, &v).map(|_| true),
            1 => m.put_if_absent(&k, &v),
            _ => m.put_if_present(&k, &v),
        })
        .py_err(py)
    }

    /// Removes `key`; whether it was there.
    fn remove(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let k = self.cx.key(key)?;
        let m = self.m(py)?;
        py.detach(|| m.remove(&k)).py_err(py)
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.m(py)?.len().py_err(py)? as usize)
    }

    /// count_range(lo, hi, lo_incl, hi_incl) -> int, exact.
    fn count_range(
        &self,
        py: Python<'_>,
        lo: Option<&Bound<'_, PyAny>>,
        hi: Option<&Bound<'_, PyAny>>,
        lo_incl: bool,
        hi_incl: bool,
    ) -> PyResult<u64> {
        let (lo, hi) = self.cx.bounds(lo, hi, lo_incl, hi_incl)?;
        self.m(py)?
            .count_range(lo.as_deref(), hi.as_deref())
            .py_err(py)
    }

    /// A snapshot of the map as of its latest commit.
    fn snapshot(&self, py: Python<'_>) -> PyResult<OrderedSnapshotNative> {
        let h = hold(self.m(py)?).py_err(py)?;
        Ok(OrderedSnapshotNative {
            hold: Owned::new(Some(h)),
            cx: self.cx.clone(),
        })
    }

    /// range(lo, hi, lo_incl, hi_incl, reverse, what) -> iterator over a snapshot of its
    /// own (what: 0 keys, 1 values, 2 items).
    #[allow(clippy::too_many_arguments)]
    fn range(
        &self,
        py: Python<'_>,
        lo: Option<&Bound<'_, PyAny>>,
        hi: Option<&Bound<'_, PyAny>>,
        lo_incl: bool,
        hi_incl: bool,
        reverse: bool,
        what: u8,
    ) -> PyResult<OrderedIter> {
        let (lo, hi) = self.cx.bounds(lo, hi, lo_incl, hi_incl)?;
        let h = hold(self.m(py)?).py_err(py)?;
        Ok(OrderedIter::new(h, self.cx.clone(), lo, hi, reverse, what))
    }
}

/// A native snapshot (`shoal.OrderedSnapshot` wraps it). Bound to its thread.
#[pyclass(module = "shoal._shoal", name = "_OrderedSnapshot")]
pub struct OrderedSnapshotNative {
    /// None once closed.
    hold: Owned<Option<Rc<SnapHold>>>,
    cx: Ctx,
}

impl OrderedSnapshotNative {
    fn h(&self, py: Python<'_>) -> PyResult<&Rc<SnapHold>> {
        self.cx.live(py)?;
        self.hold
            .get("snapshot")?
            .as_ref()
            .ok_or_else(|| exc(py, "Closed", "the snapshot was closed"))
    }
}

#[pymethods]
impl OrderedSnapshotNative {
    /// The value of `key` in the snapshot, or None.
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let k = self.cx.key(key)?;
        match self.h(py)?.snap.get(&k).py_err(py)? {
            Some(v) => Ok(Some(self.cx.vc.decode(py, &v)?)),
            None => Ok(None),
        }
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.h(py)?.snap.len() as usize)
    }

    /// The number of the commit the snapshot shows.
    #[getter]
    fn sequence(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.h(py)?.snap.sequence())
    }

    /// count_range(lo, hi, lo_incl, hi_incl) -> int, exact.
    fn count_range(
        &self,
        py: Python<'_>,
        lo: Option<&Bound<'_, PyAny>>,
        hi: Option<&Bound<'_, PyAny>>,
        lo_incl: bool,
        hi_incl: bool,
    ) -> PyResult<u64> {
        let (lo, hi) = self.cx.bounds(lo, hi, lo_incl, hi_incl)?;
        self.h(py)?
            .snap
            .count_range(lo.as_deref(), hi.as_deref())
            .py_err(py)
    }

    /// range(lo, hi, lo_incl, hi_incl, reverse, what) -> iterator over the snapshot.
    #[allow(clippy::too_many_arguments)]
    fn range(
        &self,
        py: Python<'_>,
        lo: Option<&Bound<'_, PyAny>>,
        hi: Option<&Bound<'_, PyAny>>,
        lo_incl: bool,
        hi_incl: bool,
        reverse: bool,
        what: u8,
    ) -> PyResult<OrderedIter> {
        let (lo, hi) = self.cx.bounds(lo, hi, lo_incl, hi_incl)?;
        let h = self.h(py)?.clone();
        Ok(OrderedIter::new(h, self.cx.clone(), lo, hi, reverse, what))
    }

    /// Ends the snapshot (iterators opened on it keep its view until they end).
    fn close(&mut self) -> PyResult<()> {
        *self.hold.get_mut("snapshot")? = None;
        Ok(())
    }

    #[getter]
    fn closed(&self) -> PyResult<bool> {
        Ok(self.hold.get("snapshot")?.is_none())
    }
}

/// An iterator over a range of a snapshot, in batches.
#[pyclass(module = "shoal._shoal", name = "OrderedIterator")]
pub struct OrderedIter {
    /// None once exhausted (its snapshot is released then).
    hold: Owned<Option<Rc<SnapHold>>>,
    cx: Ctx,
    lo: Option<Vec<u8>>,
    hi: Option<Vec<u8>>,
    rev: bool,
    what: u8,
    /// The source has no entries past the batch.
    last_batch: bool,
    batch: VecDeque<(Vec<u8>, Vec<u8>)>,
}

impl OrderedIter {
    fn new(
        hold: Rc<SnapHold>,
        cx: Ctx,
        lo: Option<Vec<u8>>,
        hi: Option<Vec<u8>>,
        rev: bool,
        what: u8,
    ) -> OrderedIter {
        OrderedIter {
            hold: Owned::new(Some(hold)),
            cx,
            lo,
            hi,
            rev,
            what,
            last_batch: false,
            batch: VecDeque::new(),
        }
    }

    fn refill(&mut self, h: &SnapHold) -> shoal::Result<()> {
        let batch = &mut self.batch;
        h.snap
            .for_each(self.lo.as_deref(), self.hi.as_deref(), self.rev, |k, v| {
                batch.push_back((k.to_vec(), v.to_vec()));
                batch.len() < BATCH
            })?;
        if self.batch.len() < BATCH {
            self.last_batch = true;
        } else if let Some((k, _)) = self.batch.back() {
            // The next batch starts just past the last key: forwards at the smallest key
            // greater than it, backwards below it (the upper bound is exclusive).
            if self.rev {
                self.hi = Some(k.clone());
            } else {
                let mut n = k.clone();
                n.push(0);
                self.lo = Some(n);
            }
        }
        Ok(())
    }
}

#[pymethods]
impl OrderedIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.cx.live(py)?;
        if self.batch.is_empty() && !self.last_batch {
            let Some(h) = self.hold.get("iterator")?.clone() else {
                return Ok(None);
            };
            if let Err(e) = self.refill(&h) {
                *self.hold.get_mut("iterator")? = None;
                return Err(e).py_err(py);
            }
        }
        match self.batch.pop_front() {
            Some((k, v)) => Ok(Some(self.cx.entry(py, &k, &v, self.what)?)),
            None => {
                *self.hold.get_mut("iterator")? = None;
                Ok(None)
            }
        }
    }
}

/// A native write transaction over one or several ordered maps
/// (`shoal.OrderedTransaction` wraps it). Bound to its thread.
#[pyclass(module = "shoal._shoal", name = "_OrderedTxn")]
pub struct OrderedTxnNative {
    st: Owned<TxnState>,
    store: Arc<StoreCore>,
}

/// A transaction and the map handles it borrows.
struct TxnState {
    /// Declared before `_maps`, which it borrows: it drops first. None once over.
    txn: Option<MultiWriteTxn<'static>>,
    #[allow(clippy::vec_box)] // each map boxed: the borrows never depend on the vector
    _maps: Vec<Box<OrderedMap>>,
}

impl OrderedTxnNative {
    /// Begins a transaction over `maps` (waits for their writer locks with the GIL
    /// released).
    pub fn begin(py: Python<'_>, maps: Vec<PyRef<'_, OrderedNative>>) -> PyResult<Self> {
        let Some(first) = maps.first() else {
            return Err(invalid("a transaction needs at least one ordered map"));
        };
        first.cx.live(py)?;
        let store = first.cx.store.clone();
        let boxes: Vec<Box<OrderedMap>> = maps.iter().map(|m| Box::new(m.map.clone())).collect();
        // SAFETY: the transaction borrows the boxed maps, which never move and are dropped
        // after it (field order).
        let refs: Vec<&'static OrderedMap> = boxes
            .iter()
            .map(|b| unsafe { &*(&**b as *const OrderedMap) })
            .collect();
        // Waiting for the writer locks with the GIL held would stall a thread of this
        // process that holds one and needs the GIL to finish its transaction.
        let txn = py
            .detach(|| SameThread(refs[0].write_with(&refs[1..])))
            .0
            .py_err(py)?;
        Ok(OrderedTxnNative {
            st: Owned::new(TxnState {
                txn: Some(txn),
                _maps: boxes,
            }),
            store,
        })
    }

    fn t(&mut self, py: Python<'_>) -> PyResult<&mut MultiWriteTxn<'static>> {
        if self.store.store.load().is_none() {
            return Err(closed(py));
        }
        self.st.get_mut("transaction")?.txn.as_mut().ok_or_else(|| {
            exc(
                py,
                "InvalidArgument",
                "the transaction is over (committed or aborted)",
            )
        })
    }
}

#[pymethods]
impl OrderedTxnNative {
    /// put(map, key, value, mode) -> bool: mode 0 sets (returns whether the key was new),
    /// 1 only if absent, 2 only if present (returns whether it did).
    fn put(
        &mut self,
        py: Python<'_>,
        map: PyRef<'_, OrderedNative>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        mode: u8,
    ) -> PyResult<bool> {
        let (k, v) = (map.cx.key(key)?, map.cx.value(value)?);
        let t = self.t(py)?;
        match mode {
            0 => t.put(&map.map, &k, &v),
            1 => t.put_if_absent(&map.map, &k, &v),
            _ => t.put_if_present(&map.map, &k, &v),
        }
        .py_err(py)
    }

    /// Removes `key` from `map`; whether it was there.
    fn remove(
        &mut self,
        py: Python<'_>,
        map: PyRef<'_, OrderedNative>,
        key: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let k = map.cx.key(key)?;
        self.t(py)?.remove(&map.map, &k).py_err(py)
    }

    /// The value of `key` in `map` as the transaction sees it, or None.
    fn get<'py>(
        &mut self,
        py: Python<'py>,
        map: PyRef<'py, OrderedNative>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let k = map.cx.key(key)?;
        match self.t(py)?.get(&map.map, &k).py_err(py)? {
            Some(v) => Ok(Some(map.cx.vc.decode(py, &v)?)),
            None => Ok(None),
        }
    }

    /// Commits every write at once; returns the commit's sequence number.
    fn commit(&mut self, py: Python<'_>) -> PyResult<u64> {
        self.t(py)?;
        let t = SameThread(
            self.st
                .get_mut("transaction")?
                .txn
                .take()
                .expect("checked above"),
        );
        // The commit may wait for the store's commit lock: without the GIL.
        py.detach(move || {
            let t = t; // the whole wrapper moves in, not its field
            SameThread(t.0.commit())
        })
        .0
        .py_err(py)
    }

    /// Drops every write (nothing if the transaction is over).
    fn abort(&mut self) -> PyResult<()> {
        self.st.get_mut("transaction")?.txn = None;
        Ok(())
    }

    /// Whether the transaction is still open.
    #[getter]
    fn active(&self) -> PyResult<bool> {
        Ok(self.st.get("transaction")?.txn.is_some())
    }
}

/// Snapshots of several ordered maps of one store as of one commit.
pub fn snapshot_many(
    py: Python<'_>,
    maps: Vec<PyRef<'_, OrderedNative>>,
) -> PyResult<Vec<OrderedSnapshotNative>> {
    let Some(first) = maps.first() else {
        return Err(invalid("snapshot_many needs at least one ordered map"));
    };
    first.cx.live(py)?;
    let boxes: Vec<Box<OrderedMap>> = maps.iter().map(|m| Box::new(m.map.clone())).collect();
    // SAFETY: each snapshot borrows its own boxed map, which never moves and is dropped
    // after it (SnapHold's field order).
    let refs: Vec<&'static OrderedMap> = boxes
        .iter()
        .map(|b| unsafe { &*(&**b as *const OrderedMap) })
        .collect();
    let snaps = refs[0].snapshot_with(&refs[1..]).py_err(py)?;
    Ok(snaps
        .into_iter()
        .zip(boxes)
        .zip(maps.iter())
        .map(|((snap, b), m)| OrderedSnapshotNative {
            hold: Owned::new(Some(Rc::new(SnapHold { snap, _map: b }))),
            cx: m.cx.clone(),
        })
        .collect())
}
