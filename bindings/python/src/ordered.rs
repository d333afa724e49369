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
use shoal::{
    CursorMoves, CursorPlace, MultiWriteTxn, Nested, OrderedCursor, OrderedMap, OrderedOptions,
    Snapshot, WriteCursor,
};
use std::mem::ManuallyDrop;
use std::rc::Rc;
use std::sync::Arc;
use std::thread::ThreadId;

/// The key codecs whose bytes sort as the map sorts them: "bytes" or "str" (UTF-8 keeps
/// code point order) in a map of byte keys, "uint" (8 little-endian bytes, the form the
/// engine takes) in a map of integer keys. `None`: the map's natural one.
fn key_codec(name: Option<&str>, u64_keys: bool) -> PyResult<Codec> {
    let Some(name) = name else {
        return Ok(if u64_keys { Codec::Uint } else { Codec::Bytes });
    };
    let c = Codec::parse(name)?;
    if u64_keys && c != Codec::Uint {
        return Err(invalid(&format!(
            "an ordered map with u64_keys=True sorts its keys as unsigned 64-bit integers, so \
             their codec must be \"uint\", not {name:?}"
        )));
    }
    if !u64_keys && !matches!(c, Codec::Bytes | Codec::Str) {
        return Err(invalid(&format!(
            "an ordered map's keys are sorted bytewise, so their codec must be \"bytes\" \
             or \"str\" (whose bytes sort as the strings do), not {name:?} (integer keys: \
             create the map with u64_keys=True and key=\"uint\")"
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

/// What the native objects share: the store (to refuse calls once it is closed), the
/// codecs and the map's form.
#[derive(Clone)]
struct Ctx {
    store: Arc<StoreCore>,
    kc: Codec,
    vc: Codec,
    opts: OrderedOptions,
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

    /// `v` encoded, or `None` for `shoal.ABSENT` (compare-and-swap's "no value").
    fn value_or_absent(&self, v: &Bound<'_, PyAny>, what: &str) -> PyResult<Option<Vec<u8>>> {
        if v.is(crate::ops::absent(v.py())?) {
            return Ok(None);
        }
        Ok(Some(self.vc.encode(v, what)?.into_vec()))
    }

    /// The smallest key greater than the encoded key `k`: `k` and a zero byte for byte
    /// keys, `k + 1` for integer keys; `None` above the largest integer.
    fn successor(&self, mut k: Vec<u8>) -> Option<Vec<u8>> {
        if !self.opts.u64_keys {
            k.push(0);
            return Some(k);
        }
        // An integer key is 8 bytes (the codec made it).
        let n = u64::from_le_bytes(k.as_slice().try_into().ok()?);
        n.checked_add(1).map(|n| n.to_le_bytes().to_vec())
    }

    /// A range's bounds as the engine takes them (`lo <= key < hi`): an exclusive lower
    /// bound or an inclusive upper one becomes the next key up. `None`: the range is
    /// empty (an exclusive lower bound at the largest integer key).
    fn bounds(
        &self,
        lo: Option<&Bound<'_, PyAny>>,
        hi: Option<&Bound<'_, PyAny>>,
        lo_incl: bool,
        hi_incl: bool,
    ) -> PyResult<Option<Bounds>> {
        let enc = |b: Option<&Bound<'_, PyAny>>| -> PyResult<Option<Vec<u8>>> {
            match b {
                Some(b) if !b.is_none() => Ok(Some(self.key(b)?)),
                _ => Ok(None),
            }
        };
        let lo = match enc(lo)? {
            Some(k) if !lo_incl => match self.successor(k) {
                Some(k) => Some(k),
                None => return Ok(None),
            },
            lo => lo,
        };
        // Past the largest integer key, an inclusive upper bound is no bound.
        let hi = match enc(hi)? {
            Some(k) if hi_incl => self.successor(k),
            hi => hi,
        };
        Ok(Some((lo, hi)))
    }

    /// `f` over the engine bounds of a range (see [`Ctx::bounds`]); 0, with no call, when
    /// the range is empty.
    fn in_bounds(
        &self,
        lo: Option<&Bound<'_, PyAny>>,
        hi: Option<&Bound<'_, PyAny>>,
        lo_incl: bool,
        hi_incl: bool,
        f: impl FnOnce(Option<&[u8]>, Option<&[u8]>) -> PyResult<u64>,
    ) -> PyResult<u64> {
        match self.bounds(lo, hi, lo_incl, hi_incl)? {
            Some((lo, hi)) => f(lo.as_deref(), hi.as_deref()),
            None => Ok(0),
        }
    }

    /// A value read (or `None`), decoded.
    fn decode_opt<'py>(
        &self,
        py: Python<'py>,
        v: Option<Vec<u8>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        v.map(|v| self.vc.decode(py, &v)).transpose()
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

impl SnapHold {
    /// The snapshot, for a cursor or iterator kept beside the `Rc` that holds it.
    ///
    /// # Safety
    /// The reference must not outlive the `Rc<SnapHold>` it came from (whose contents
    /// never move): keep that `Rc` in the same struct, after the borrower.
    unsafe fn pinned(self: &Rc<Self>) -> &'static Snapshot<'static> {
        // SAFETY: the caller's contract.
        unsafe { &*(&self.snap as *const Snapshot<'static>) }
    }
}

/// Clones of `maps`, each boxed, and `'static` references to them, for an engine object
/// (transaction, snapshots) that borrows them.
///
/// # Safety
/// The references must not outlive the boxes: the borrower is declared (so dropped)
/// before them.
#[allow(clippy::vec_box)] // each map boxed: the borrows never depend on the vector
unsafe fn boxed_maps(
    maps: &[PyRef<'_, OrderedNative>],
) -> (Vec<Box<OrderedMap>>, Vec<&'static OrderedMap>) {
    let boxes: Vec<Box<OrderedMap>> = maps.iter().map(|m| Box::new(m.map.clone())).collect();
    // SAFETY: a Box's contents never move; the caller keeps the boxes alive longer.
    let refs = boxes
        .iter()
        .map(|b| unsafe { &*(&**b as *const OrderedMap) })
        .collect();
    (boxes, refs)
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
    /// Opens (or creates) the ordered map `name` of a store, of the form `opts`.
    #[allow(clippy::too_many_arguments)]
    pub fn open(
        py: Python<'_>,
        core: &Arc<StoreCore>,
        st: &shoal::Store,
        name: &str,
        key: Option<&str>,
        value: &str,
        opts: OrderedOptions,
        create: bool,
    ) -> PyResult<OrderedNative> {
        let kc = key_codec(key, opts.u64_keys)?;
        let vc = Codec::parse(value)?;
        let name_owned = name.to_owned();
        let map = py
            .detach(|| -> shoal::Result<Option<OrderedMap>> {
                if !create && st.map_kind(&name_owned)?.is_none() {
                    return Ok(None);
                }
                st.ordered_map_with(&name_owned, &opts).map(Some)
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
                opts,
            },
        })
    }

    fn m(&self, py: Python<'_>) -> PyResult<&OrderedMap> {
        self.cx.live(py)?;
        Ok(&self.map)
    }
}

/// The values of a list, decoded.
fn values<'py>(py: Python<'py>, vc: Codec, vs: Vec<Vec<u8>>) -> PyResult<Vec<Bound<'py, PyAny>>> {
    vs.iter().map(|v| vc.decode(py, v)).collect()
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

    /// Whether the map's keys are unsigned 64-bit integers.
    #[getter]
    fn u64_keys(&self) -> bool {
        self.cx.opts.u64_keys
    }

    /// Whether the map is a multimap.
    #[getter]
    fn duplicates(&self) -> bool {
        self.cx.opts.duplicates
    }

    /// The value of `key`, or None.
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let k = self.cx.key(key)?;
        let v = self.m(py)?.get(&k).py_err(py)?;
        self.cx.decode_opt(py, v)
    }

    /// put(key, value, mode) -> bool: mode 0 sets (returns True; adds the pair in a
    /// multimap), 1 only if absent, 2 only if present (returns whether it did). Waits for
    /// the map's writer lock with the GIL released.
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

    /// Removes `key` (every value of it in a multimap); whether it was there.
    fn remove(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let k = self.cx.key(key)?;
        let m = self.m(py)?;
        py.detach(|| m.remove(&k)).py_err(py)
    }

    /// Removes the pair (`key`, `value`); whether it was there.
    fn remove_value(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let (k, v) = (self.cx.key(key)?, self.cx.value(value)?);
        let m = self.m(py)?;
        py.detach(|| m.remove_value(&k, &v)).py_err(py)
    }

    /// Every value of `key`, sorted by their bytes.
    fn get_all<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let k = self.cx.key(key)?;
        let vs = self.m(py)?.get_all(&k).py_err(py)?;
        values(py, self.cx.vc, vs)
    }

    /// The number of values of `key`.
    fn count_values(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<u64> {
        let k = self.cx.key(key)?;
        self.m(py)?.count_values(&k).py_err(py)
    }

    /// compare_and_swap(key, expected, new) -> bool (ABSENT: no value), in a transaction
    /// of its own.
    fn compare_and_swap(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        expected: &Bound<'_, PyAny>,
        new: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let k = self.cx.key(key)?;
        let e = self.cx.value_or_absent(expected, "expected value")?;
        let n = self.cx.value_or_absent(new, "value")?;
        let m = self.m(py)?;
        py.detach(|| m.compare_and_swap(&k, e.as_deref(), n.as_deref()))
            .py_err(py)
    }

    /// remove_range(lo, hi, lo_incl, hi_incl) -> int removed, in a transaction of its own.
    fn remove_range(
        &self,
        py: Python<'_>,
        lo: Option<&Bound<'_, PyAny>>,
        hi: Option<&Bound<'_, PyAny>>,
        lo_incl: bool,
        hi_incl: bool,
    ) -> PyResult<u64> {
        self.cx.in_bounds(lo, hi, lo_incl, hi_incl, |lo, hi| {
            let m = self.m(py)?;
            py.detach(|| m.remove_range(lo, hi)).py_err(py)
        })
    }

    /// The map's sequence as of the latest commit.
    #[getter]
    fn sequence(&self, py: Python<'_>) -> PyResult<u64> {
        self.m(py)?.map_sequence().py_err(py)
    }

    /// next_sequence(n) -> int: the sequence before adding `n`, in a transaction of its
    /// own.
    fn next_sequence(&self, py: Python<'_>, n: u64) -> PyResult<u64> {
        let m = self.m(py)?;
        py.detach(|| m.next_sequence(n)).py_err(py)
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
        self.cx.in_bounds(lo, hi, lo_incl, hi_incl, |lo, hi| {
            self.m(py)?.count_range(lo, hi).py_err(py)
        })
    }

    /// A snapshot of the map as of its latest commit.
    fn snapshot(&self, py: Python<'_>) -> PyResult<OrderedSnapshotNative> {
        let h = hold(self.m(py)?).py_err(py)?;
        Ok(OrderedSnapshotNative {
            hold: Owned::new(Some(h)),
            cx: self.cx.clone(),
        })
    }

    /// A cursor over a snapshot of its own, taken now.
    fn cursor(&self, py: Python<'_>) -> PyResult<OrderedCursorNative> {
        let h = hold(self.m(py)?).py_err(py)?;
        Ok(OrderedCursorNative::new(h, self.cx.clone()))
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
        let b = self.cx.bounds(lo, hi, lo_incl, hi_incl)?;
        let h = hold(self.m(py)?).py_err(py)?;
        OrderedIter::new(py, h, self.cx.clone(), b, reverse, what)
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
        let v = self.h(py)?.snap.get(&k).py_err(py)?;
        self.cx.decode_opt(py, v)
    }

    /// Every value of `key` in the snapshot, sorted by their bytes.
    fn get_all<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let k = self.cx.key(key)?;
        let vs = self.h(py)?.snap.get_all(&k).py_err(py)?;
        values(py, self.cx.vc, vs)
    }

    /// The number of values of `key` in the snapshot.
    fn count_values(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<u64> {
        let k = self.cx.key(key)?;
        self.h(py)?.snap.count_values(&k).py_err(py)
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.h(py)?.snap.len() as usize)
    }

    /// The number of the commit the snapshot shows.
    #[getter]
    fn sequence(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.h(py)?.snap.sequence())
    }

    /// The map's sequence (its persistent counter) in the snapshot.
    #[getter]
    fn map_sequence(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.h(py)?.snap.map_sequence())
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
        self.cx.in_bounds(lo, hi, lo_incl, hi_incl, |lo, hi| {
            self.h(py)?.snap.count_range(lo, hi).py_err(py)
        })
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
        let b = self.cx.bounds(lo, hi, lo_incl, hi_incl)?;
        let h = self.h(py)?.clone();
        OrderedIter::new(py, h, self.cx.clone(), b, reverse, what)
    }

    /// A cursor over the snapshot (it keeps the snapshot's view after a close).
    fn cursor(&self, py: Python<'_>) -> PyResult<OrderedCursorNative> {
        let h = self.h(py)?.clone();
        Ok(OrderedCursorNative::new(h, self.cx.clone()))
    }

    /// Ends the snapshot (iterators and cursors opened on it keep its view until they
    /// end).
    fn close(&mut self) -> PyResult<()> {
        *self.hold.get_mut("snapshot")? = None;
        Ok(())
    }

    #[getter]
    fn closed(&self) -> PyResult<bool> {
        Ok(self.hold.get("snapshot")?.is_none())
    }
}

/// An engine iterator and the snapshot it reads; fields drop in order, the iterator
/// before the snapshot it borrows.
struct IterState {
    it: shoal::OrderedIter<'static>,
    _hold: Rc<SnapHold>,
}

/// An iterator over a range of a snapshot. It walks the engine's iterator (a cursor at
/// each end), which keeps a multimap's values of one key together and steps integer
/// keys as numbers.
#[pyclass(module = "shoal._shoal", name = "OrderedIterator")]
pub struct OrderedIter {
    /// None once exhausted (its snapshot is released then).
    st: Owned<Option<IterState>>,
    cx: Ctx,
    rev: bool,
    what: u8,
}

impl OrderedIter {
    fn new(
        py: Python<'_>,
        hold: Rc<SnapHold>,
        cx: Ctx,
        bounds: Option<Bounds>,
        rev: bool,
        what: u8,
    ) -> PyResult<OrderedIter> {
        let st = match bounds {
            None => None,
            Some((lo, hi)) => {
                // SAFETY: the iterator is kept beside `hold`, declared before it.
                let snap = unsafe { hold.pinned() };
                let it = snap.iter(lo.as_deref(), hi.as_deref()).py_err(py)?;
                Some(IterState { it, _hold: hold })
            }
        };
        Ok(OrderedIter {
            st: Owned::new(st),
            cx,
            rev,
            what,
        })
    }
}

#[pymethods]
impl OrderedIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.cx.live(py)?;
        let st = self.st.get_mut("iterator")?;
        let Some(s) = st.as_mut() else {
            return Ok(None);
        };
        let next = if self.rev {
            s.it.next_back()
        } else {
            s.it.next()
        };
        match next {
            Some(Ok((k, v))) => Ok(Some(self.cx.entry(py, &k, &v, self.what)?)),
            Some(Err(e)) => {
                *st = None;
                Err(e).py_err(py)
            }
            None => {
                *st = None;
                Ok(None)
            }
        }
    }
}

/// An engine cursor and the snapshot it reads (the cursor drops first).
struct CurState {
    c: OrderedCursor<'static>,
    _hold: Rc<SnapHold>,
}

/// A native cursor over a snapshot (`shoal.OrderedCursor` wraps it). Bound to its
/// thread.
#[pyclass(module = "shoal._shoal", name = "_OrderedCursor")]
pub struct OrderedCursorNative {
    /// None once closed.
    st: Owned<Option<CurState>>,
    cx: Ctx,
}

impl OrderedCursorNative {
    fn new(hold: Rc<SnapHold>, cx: Ctx) -> OrderedCursorNative {
        // SAFETY: the cursor is kept beside `hold`, declared before it.
        let snap = unsafe { hold.pinned() };
        OrderedCursorNative {
            st: Owned::new(Some(CurState {
                c: snap.cursor(),
                _hold: hold,
            })),
            cx,
        }
    }

    fn c(&mut self, py: Python<'_>) -> PyResult<&mut OrderedCursor<'static>> {
        self.cx.live(py)?;
        match self.st.get_mut("cursor")? {
            Some(s) => Ok(&mut s.c),
            None => Err(exc(py, "Closed", "the cursor was closed")),
        }
    }
}

#[pymethods]
impl OrderedCursorNative {
    /// step(how) -> bool: 0 first, 1 last, 2 next, 3 prev, 4 next_key, 5 prev_key,
    /// 6 next_value, 7 prev_value; whether the cursor stands on an entry (for the value
    /// moves: whether it moved).
    fn step(&mut self, py: Python<'_>, how: u8) -> PyResult<bool> {
        step(self.c(py)?, how).py_err(py)
    }

    /// seek(key, how) -> bool: 0 exactly `key`, 1 the first key >= it, 2 the last key
    /// <= it.
    fn seek(&mut self, py: Python<'_>, key: &Bound<'_, PyAny>, how: u8) -> PyResult<bool> {
        let k = self.cx.key(key)?;
        seek(self.c(py)?, &k, how).py_err(py)
    }

    /// seek_value(key, value, ge) -> bool: the pair (key, value), or with `ge` the first
    /// value of `key` at least `value`.
    fn seek_value(
        &mut self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        ge: bool,
    ) -> PyResult<bool> {
        let (k, v) = (self.cx.key(key)?, self.cx.value(value)?);
        seek_value(self.c(py)?, &k, &v, ge).py_err(py)
    }

    /// entry(what) -> the key (0), value (1) or (key, value) (2) the cursor stands on, or
    /// None.
    fn entry<'py>(&mut self, py: Python<'py>, what: u8) -> PyResult<Option<Bound<'py, PyAny>>> {
        let cx = self.cx.clone();
        match self.c(py)?.entry() {
            Some((k, v)) => Ok(Some(cx.entry(py, k, v, what)?)),
            None => Ok(None),
        }
    }

    /// The number of entries before the cursor's, or None on no entry.
    fn position(&mut self, py: Python<'_>) -> PyResult<Option<u64>> {
        self.c(py)?.position().py_err(py)
    }

    /// The number of values of the key the cursor stands on (0 on no entry).
    fn count_values(&mut self, py: Python<'_>) -> PyResult<u64> {
        self.c(py)?.count_values().py_err(py)
    }

    /// Ends the cursor (and its hold on the snapshot).
    fn close(&mut self) -> PyResult<()> {
        *self.st.get_mut("cursor")? = None;
        Ok(())
    }

    #[getter]
    fn closed(&self) -> PyResult<bool> {
        Ok(self.st.get("cursor")?.is_none())
    }
}

/// A native write transaction over one or several ordered maps
/// (`shoal.OrderedTransaction` wraps it). Bound to its thread.
#[pyclass(module = "shoal._shoal", name = "_OrderedTxn")]
pub struct OrderedTxnNative {
    st: Owned<TxnState>,
    store: Arc<StoreCore>,
}

/// A transaction, its open nested transactions and the map handles it borrows.
struct TxnState {
    /// The open nested transactions, innermost last, each with its number. Each borrows
    /// the one before (the first, `txn`): they are dropped innermost first (`Drop`), and
    /// every write goes through the innermost.
    nested: Vec<(u64, Nested<'static, MultiWriteTxn<'static>>)>,
    /// The number of the next nested transaction (numbers are never reused, so that a
    /// nested transaction that ended cannot be mistaken for a later one).
    next_nested: u64,
    /// Boxed, so that the nested transactions' borrows never depend on where this state
    /// lives; declared before `_maps`, which it borrows. None once over.
    txn: Option<Box<MultiWriteTxn<'static>>>,
    #[allow(clippy::vec_box)] // each map boxed: the borrows never depend on the vector
    _maps: Vec<Box<OrderedMap>>,
}

impl TxnState {
    /// The innermost open level: the transaction itself or its innermost nested one.
    fn top(&mut self) -> Option<&mut MultiWriteTxn<'static>> {
        if let Some((_, n)) = self.nested.last_mut() {
            return Some(&mut **n);
        }
        self.txn.as_deref_mut()
    }

    /// Ends every nested transaction, innermost first, undoing their writes.
    fn drop_nested(&mut self) {
        while self.nested.pop().is_some() {}
    }
}

impl Drop for TxnState {
    fn drop(&mut self) {
        self.drop_nested();
        self.txn = None;
    }
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
        // SAFETY: the transaction is dropped before the boxes (TxnState's Drop and field
        // order).
        let (boxes, refs) = unsafe { boxed_maps(&maps) };
        // Waiting for the writer locks with the GIL held would stall a thread of this
        // process that holds one and needs the GIL to finish its transaction.
        let txn = py
            .detach(|| SameThread(refs[0].write_with(&refs[1..])))
            .0
            .py_err(py)?;
        Ok(OrderedTxnNative {
            st: Owned::new(TxnState {
                nested: Vec::new(),
                next_nested: 1,
                txn: Some(Box::new(txn)),
                _maps: boxes,
            }),
            store,
        })
    }

    fn state(&mut self, py: Python<'_>) -> PyResult<&mut TxnState> {
        if self.store.store.load().is_none() {
            return Err(closed(py));
        }
        self.st.get_mut("transaction")
    }

    fn t(&mut self, py: Python<'_>) -> PyResult<&mut MultiWriteTxn<'static>> {
        self.state(py)?.top().ok_or_else(|| over(py))
    }

    /// Runs `f` on the innermost level with a range's encoded bounds; `empty` for a
    /// range with none (`Ctx::bounds`' `None`).
    fn in_range<R>(
        &mut self,
        py: Python<'_>,
        b: Option<Bounds>,
        empty: R,
        f: impl FnOnce(&mut MultiWriteTxn<'static>, Option<&[u8]>, Option<&[u8]>) -> shoal::Result<R>,
    ) -> PyResult<R> {
        let t = self.t(py)?;
        let Some((lo, hi)) = b else {
            return Ok(empty);
        };
        f(t, lo.as_deref(), hi.as_deref()).py_err(py)
    }
}

fn over(py: Python<'_>) -> PyErr {
    exc(
        py,
        "InvalidArgument",
        "the transaction is over (committed or aborted)",
    )
}

#[pymethods]
impl OrderedTxnNative {
    /// put(map, key, value, mode) -> bool: mode 0 sets (returns whether the key was new;
    /// in a multimap adds the pair and returns whether it was new), 1 only if absent, 2
    /// only if present (returns whether it did).
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

    /// Removes `key` (every value of it in a multimap) from `map`; whether it was there.
    fn remove(
        &mut self,
        py: Python<'_>,
        map: PyRef<'_, OrderedNative>,
        key: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let k = map.cx.key(key)?;
        self.t(py)?.remove(&map.map, &k).py_err(py)
    }

    /// Removes the pair (`key`, `value`) from `map`; whether it was there.
    fn remove_value(
        &mut self,
        py: Python<'_>,
        map: PyRef<'_, OrderedNative>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let (k, v) = (map.cx.key(key)?, map.cx.value(value)?);
        self.t(py)?.remove_value(&map.map, &k, &v).py_err(py)
    }

    /// The value of `key` in `map` as the transaction sees it, or None.
    fn get<'py>(
        &mut self,
        py: Python<'py>,
        map: PyRef<'py, OrderedNative>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let k = map.cx.key(key)?;
        let v = self.t(py)?.get(&map.map, &k).py_err(py)?;
        map.cx.decode_opt(py, v)
    }

    /// compare_and_swap(map, key, expected, new) -> bool (ABSENT: no value).
    fn compare_and_swap(
        &mut self,
        py: Python<'_>,
        map: PyRef<'_, OrderedNative>,
        key: &Bound<'_, PyAny>,
        expected: &Bound<'_, PyAny>,
        new: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let k = map.cx.key(key)?;
        let e = map.cx.value_or_absent(expected, "expected value")?;
        let n = map.cx.value_or_absent(new, "value")?;
        self.t(py)?
            .compare_and_swap(&map.map, &k, e.as_deref(), n.as_deref())
            .py_err(py)
    }

    /// remove_range(map, lo, hi, lo_incl, hi_incl) -> int removed.
    #[allow(clippy::too_many_arguments)]
    fn remove_range(
        &mut self,
        py: Python<'_>,
        map: PyRef<'_, OrderedNative>,
        lo: Option<&Bound<'_, PyAny>>,
        hi: Option<&Bound<'_, PyAny>>,
        lo_incl: bool,
        hi_incl: bool,
    ) -> PyResult<u64> {
        let b = map.cx.bounds(lo, hi, lo_incl, hi_incl)?;
        self.in_range(py, b, 0, |t, lo, hi| t.remove_range(&map.map, lo, hi))
    }

    /// append(map, key, value): adds past the map's largest key (pair, in a multimap).
    fn append(
        &mut self,
        py: Python<'_>,
        map: PyRef<'_, OrderedNative>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (k, v) = (map.cx.key(key)?, map.cx.value(value)?);
        self.t(py)?.append(&map.map, &k, &v).py_err(py)
    }

    /// next_sequence(map, n) -> int: `map`'s sequence, then adds `n` to it.
    fn next_sequence(
        &mut self,
        py: Python<'_>,
        map: PyRef<'_, OrderedNative>,
        n: u64,
    ) -> PyResult<u64> {
        self.t(py)?.next_sequence(&map.map, n).py_err(py)
    }

    /// set_marker(i, v): the store's marker `i` becomes `v` at the commit.
    fn set_marker(&mut self, py: Python<'_>, i: u64, v: u64) -> PyResult<()> {
        self.t(py)?.set_marker(i, v).py_err(py)
    }

    /// range(map, lo, hi, lo_incl, hi_incl, reverse, what) -> list of `map`'s entries
    /// as the transaction has them (what: 0 keys, 1 values, 2 items).
    #[allow(clippy::too_many_arguments)]
    fn range<'py>(
        &mut self,
        py: Python<'py>,
        map: PyRef<'py, OrderedNative>,
        lo: Option<&Bound<'py, PyAny>>,
        hi: Option<&Bound<'py, PyAny>>,
        lo_incl: bool,
        hi_incl: bool,
        reverse: bool,
        what: u8,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let b = map.cx.bounds(lo, hi, lo_incl, hi_incl)?;
        let es = self.in_range(py, b, Vec::new(), |t, lo, hi| {
            if reverse {
                t.range_rev(&map.map, lo, hi)
            } else {
                t.range(&map.map, lo, hi)
            }
        })?;
        es.iter()
            .map(|(k, v)| map.cx.entry(py, k, v, what))
            .collect()
    }

    /// count_range(map, lo, hi, lo_incl, hi_incl) -> int, exact, as the transaction has
    /// `map`.
    fn count_range(
        &mut self,
        py: Python<'_>,
        map: PyRef<'_, OrderedNative>,
        lo: Option<&Bound<'_, PyAny>>,
        hi: Option<&Bound<'_, PyAny>>,
        lo_incl: bool,
        hi_incl: bool,
    ) -> PyResult<u64> {
        let b = map.cx.bounds(lo, hi, lo_incl, hi_incl)?;
        self.in_range(py, b, 0, |t, lo, hi| t.count_range(&map.map, lo, hi))
    }

    /// The number of entries of `map` as the transaction has it.
    fn len(&mut self, py: Python<'_>, map: PyRef<'_, OrderedNative>) -> PyResult<u64> {
        self.t(py)?.len(&map.map).py_err(py)
    }

    /// Every value of `key` in `map` as the transaction has them, sorted.
    fn get_all<'py>(
        &mut self,
        py: Python<'py>,
        map: PyRef<'py, OrderedNative>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let k = map.cx.key(key)?;
        let vs = self.t(py)?.get_all(&map.map, &k).py_err(py)?;
        values(py, map.cx.vc, vs)
    }

    /// The number of values of `key` in `map` as the transaction has them.
    fn count_values(
        &mut self,
        py: Python<'_>,
        map: PyRef<'_, OrderedNative>,
        key: &Bound<'_, PyAny>,
    ) -> PyResult<u64> {
        let k = map.cx.key(key)?;
        self.t(py)?.count_values(&map.map, &k).py_err(py)
    }

    /// cursor(map) -> a cursor over `map` as the transaction has it.
    fn cursor(
        slf: Bound<'_, Self>,
        map: Bound<'_, OrderedNative>,
    ) -> PyResult<OrderedTxnCursorNative> {
        let py = slf.py();
        {
            let mut t = slf.borrow_mut();
            // A map outside the transaction is refused now rather than at the first move.
            t.t(py)?.cursor(&map.borrow().map).py_err(py)?;
        }
        let cx = map.borrow().cx.clone();
        Ok(OrderedTxnCursorNative {
            txn: slf.unbind(),
            map: map.unbind(),
            place: None,
            open: true,
            cx,
        })
    }

    /// nest() -> int: opens a nested transaction inside the innermost open level;
    /// returns its number.
    fn nest(&mut self, py: Python<'_>) -> PyResult<u64> {
        let st = self.state(py)?;
        let parent: *mut MultiWriteTxn<'static> = st.top().ok_or_else(|| over(py))?;
        // SAFETY: `parent` is the transaction (boxed: it never moves) or, through the
        // innermost nested guard, the same transaction; the new guard is dropped before
        // that guard and before the transaction (TxnState keeps the guards innermost
        // last and drops them innermost first), and every use of the transaction goes
        // through the innermost guard while it lives.
        let guard: Nested<'static, MultiWriteTxn<'static>> = unsafe { (*parent).nested() };
        let id = st.next_nested;
        st.next_nested += 1;
        st.nested.push((id, guard));
        Ok(id)
    }

    /// unnest(id, keep): ends nested transaction `id` (which must be the innermost
    /// open one), keeping its writes in its parent or undoing them.
    fn unnest(&mut self, py: Python<'_>, id: u64, keep: bool) -> PyResult<()> {
        let st = self.state(py)?;
        match st.nested.last() {
            Some((top, _)) if *top == id => {}
            _ if st.nested.iter().any(|(n, _)| *n == id) => {
                return Err(invalid(
                    "a nested transaction inside this one is still open: end it first",
                ))
            }
            _ => return Err(invalid("this nested transaction is over")),
        }
        let (_, guard) = st.nested.pop().expect("checked above");
        if keep {
            guard.commit();
        }
        Ok(())
    }

    /// Whether nested transaction `id` is still open.
    fn nested_active(&self, id: u64) -> PyResult<bool> {
        Ok(self
            .st
            .get("transaction")?
            .nested
            .iter()
            .any(|(n, _)| *n == id))
    }

    /// Commits every write at once; returns the commit's sequence number.
    fn commit(&mut self, py: Python<'_>) -> PyResult<u64> {
        let st = self.state(py)?;
        if st.txn.is_none() {
            return Err(over(py));
        }
        if !st.nested.is_empty() {
            return Err(invalid(
                "a nested transaction is still open: commit or abort it before its parent",
            ));
        }
        let t = SameThread(st.txn.take().expect("checked above"));
        // The commit may wait for the store's commit lock: without the GIL.
        py.detach(move || {
            let t = t; // the whole wrapper moves in, not its field
            let txn = *t.0;
            SameThread(txn.commit())
        })
        .0
        .py_err(py)
    }

    /// Drops every write, nested transactions' included (nothing if the transaction is
    /// over).
    fn abort(&mut self) -> PyResult<()> {
        let st = self.st.get_mut("transaction")?;
        st.drop_nested();
        st.txn = None;
        Ok(())
    }

    /// Whether the transaction is still open.
    #[getter]
    fn active(&self) -> PyResult<bool> {
        Ok(self.st.get("transaction")?.txn.is_some())
    }
}

/// A native cursor over a map as a write transaction has it (`shoal.OrderedCursor`
/// wraps it): it keeps only its place, taken up on the transaction's innermost open
/// level at each call, so that the transaction stays writable between calls; the
/// engine then finds its entry again as the writes left it, or the gap they left.
#[pyclass(module = "shoal._shoal", name = "_OrderedTxnCursor")]
pub struct OrderedTxnCursorNative {
    txn: Py<OrderedTxnNative>,
    map: Py<OrderedNative>,
    place: Option<CursorPlace>,
    open: bool,
    cx: Ctx,
}

impl OrderedTxnCursorNative {
    /// Runs `f` on the cursor taken up on the transaction.
    fn with<R>(
        &mut self,
        py: Python<'_>,
        f: impl FnOnce(&mut WriteCursor<'_, '_>) -> shoal::Result<R>,
    ) -> PyResult<R> {
        if !self.open {
            return Err(exc(py, "Closed", "the cursor was closed"));
        }
        let mut t = self.txn.borrow_mut(py);
        let map = self.map.borrow(py);
        let top = t.t(py)?;
        let mut c = match self.place.take() {
            Some(p) => top.cursor_at(&map.map, p),
            None => top.cursor(&map.map),
        }
        .py_err(py)?;
        let r = f(&mut c);
        self.place = Some(c.into_place());
        r.py_err(py)
    }
}

#[pymethods]
impl OrderedTxnCursorNative {
    /// step(how) -> bool: as the snapshot cursor's.
    fn step(&mut self, py: Python<'_>, how: u8) -> PyResult<bool> {
        self.with(py, |c| step(c, how))
    }

    /// seek(key, how) -> bool: as the snapshot cursor's.
    fn seek(&mut self, py: Python<'_>, key: &Bound<'_, PyAny>, how: u8) -> PyResult<bool> {
        let k = self.cx.key(key)?;
        self.with(py, |c| seek(c, &k, how))
    }

    /// seek_value(key, value, ge) -> bool: as the snapshot cursor's.
    fn seek_value(
        &mut self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        ge: bool,
    ) -> PyResult<bool> {
        let (k, v) = (self.cx.key(key)?, self.cx.value(value)?);
        self.with(py, |c| seek_value(c, &k, &v, ge))
    }

    /// entry(what) -> the entry the cursor stands on as the transaction has it now, or
    /// None.
    fn entry<'py>(&mut self, py: Python<'py>, what: u8) -> PyResult<Option<Bound<'py, PyAny>>> {
        let e = self.with(py, |c| Ok(c.entry().map(|(k, v)| (k.to_vec(), v.to_vec()))))?;
        match e {
            Some((k, v)) => Ok(Some(self.cx.entry(py, &k, &v, what)?)),
            None => Ok(None),
        }
    }

    /// The number of entries before the cursor's, or None on no entry.
    fn position(&mut self, py: Python<'_>) -> PyResult<Option<u64>> {
        self.with(py, |c| c.position())
    }

    /// The number of values of the key the cursor stands on (0 on no entry).
    fn count_values(&mut self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |c| c.count_values())
    }

    /// Sets the value of the entry the cursor stands on; whether it stood on one.
    fn put_current(&mut self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<bool> {
        let v = self.cx.value(value)?;
        self.with(py, |c| c.put_current(&v))
    }

    /// Removes the entry the cursor stands on; whether it stood on one.
    fn remove_current(&mut self, py: Python<'_>) -> PyResult<bool> {
        self.with(py, |c| c.remove_current())
    }

    /// Ends the cursor.
    fn close(&mut self) -> PyResult<()> {
        self.open = false;
        self.place = None;
        Ok(())
    }

    #[getter]
    fn closed(&self) -> PyResult<bool> {
        Ok(!self.open)
    }
}

/// A cursor's step, as `_OrderedCursor.step` numbers them.
fn step(c: &mut dyn CursorMoves, how: u8) -> shoal::Result<bool> {
    match how {
        0 => c.first(),
        1 => c.last(),
        2 => c.move_next(),
        3 => c.move_prev(),
        4 => c.next_key(),
        5 => c.prev_key(),
        6 => c.next_value(),
        _ => c.prev_value(),
    }
}

/// A cursor's seek, as `_OrderedCursor.seek` numbers them.
fn seek(c: &mut dyn CursorMoves, k: &[u8], how: u8) -> shoal::Result<bool> {
    match how {
        0 => c.seek(k),
        1 => c.seek_ge(k),
        _ => c.seek_le(k),
    }
}

/// A cursor's seek to a pair.
fn seek_value(c: &mut dyn CursorMoves, k: &[u8], v: &[u8], ge: bool) -> shoal::Result<bool> {
    if ge {
        c.seek_value_ge(k, v)
    } else {
        c.seek_value(k, v)
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
    // SAFETY: each snapshot borrows its own boxed map, and is dropped before it
    // (SnapHold's field order).
    let (boxes, refs) = unsafe { boxed_maps(&maps) };
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
