//! `shoal.Map`: a named map of a store, with `dict` semantics.

use crate::codec::Codec;
use crate::errors::{closed, ResultExt};
pub use crate::handle::MapCore;
use crate::handle::{Handles, InUse};
use crate::ops::{self, absent};
use crate::store::Store;
use pyo3::exceptions::{PyKeyError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pyclass::CompareOp;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyTuple, PyType};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// Items fetched from the engine per GIL release while iterating.
const ITER_BATCH: usize = 1024;

/// A named map in a shoal store, shared by every process that opens the store: a
/// `collections.abc.MutableMapping` with `dict` semantics (`m[k]`, `m[k] = v`, `del m[k]`,
/// `in`, `len`, `get`, `pop`, `popitem`, `setdefault`, `update`, `clear`, `keys()`,
/// `values()`, `items()`, iteration, `==`).
///
/// Created by `Store.map(name, key=..., value=...)`. Each single-key operation is atomic
/// across processes; `setdefault` and `pop` are too (insert-if-absent, take). Iteration is
/// weakly consistent: every key present for the whole iteration is seen exactly once;
/// keys added or removed meanwhile may or may not be; changing the map while iterating
/// never raises. A key of the wrong type for the key codec raises `TypeError` (also for
/// `in` and `get`). Pickles to (path, name, codecs), so it can be passed to child
/// processes under any multiprocessing start method.
///
/// Single-key calls keep the GIL unless they find a lock or a bucket busy beyond a short
/// spin (held by another thread or process), or write more than 4 KiB: then they release
/// it while they wait. Batch calls and iteration release it.
#[pyclass(module = "shoal", name = "Map", frozen, mapping, weakref)]
pub struct Map {
    pub core: Arc<MapCore>,
    pub store: Py<Store>,
    pub name: String,
    pub kc: Codec,
    pub vc: Codec,
}

static VIEWS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static MAPPING_ABC: PyOnceLock<Py<PyType>> = PyOnceLock::new();

fn views(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    Ok(VIEWS
        .get_or_try_init(py, || -> PyResult<Py<PyAny>> {
            Ok(py.import("shoal._views")?.into_any().unbind())
        })?
        .bind(py))
}

#[derive(Clone, Copy)]
enum Kind {
    Keys,
    Values,
    Items,
}

impl Map {
    #[inline]
    fn m(&self, py: Python<'_>) -> PyResult<InUse<'_, shoal::Map>> {
        self.core.enter().ok_or_else(|| closed(py))
    }

    /// The decoded value of `k`, or None. Values that fit a stack buffer (the usual
    /// ones) are copied there and decoded from it: no heap allocation per lookup, which
    /// was a fifth of a `m[k]` (callgrind). A larger value is read again into a Vec.
    /// The GIL is released only if the read has to wait (see `Handles::quick`).
    #[inline(always)]
    fn get_decoded<'py>(
        &self,
        py: Python<'py>,
        h: &Handles<shoal::Map>,
        k: &[u8],
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let mut buf = [0u8; 256];
        match h.quick(py, |m| m.get_to_slice(k, &mut buf)).py_err(py)? {
            None => Ok(None),
            Some(n) if n <= buf.len() => self.vc.decode(py, &buf[..n]).map(Some),
            // Too long for the buffer (or replaced by a longer value since): copy it whole.
            Some(_) => self.get_long(py, h, k),
        }
    }

    #[cold]
    #[inline(never)]
    fn get_long<'py>(
        &self,
        py: Python<'py>,
        h: &Handles<shoal::Map>,
        k: &[u8],
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        match h.quick(py, |m| m.get(k)).py_err(py)? {
            Some(v) => self.vc.decode(py, &v).map(Some),
            None => Ok(None),
        }
    }

    /// `add`, its errors naming the method called as `name`.
    fn add_as(&self, name: &str, key: &Bound<'_, PyAny>, delta: i64) -> PyResult<i64> {
        let py = key.py();
        if self.vc != Codec::Int {
            return Err(PyTypeError::new_err(format!(
                "{name} needs a map with value codec 'int', not {:?}",
                self.vc.name()
            )));
        }
        let k = self.kc.encode(key, "key")?;
        let g = self.m(py)?;
        ops::add(&g, py, &k, delta)
    }

    fn key_error(key: &Bound<'_, PyAny>) -> PyErr {
        PyKeyError::new_err(key.clone().unbind())
    }

    fn iter_kind(&self, py: Python<'_>, kind: Kind) -> PyResult<MapIter> {
        let g = self.m(py)?;
        let m = &g.map;
        let it = match kind {
            Kind::Keys => RawIter::Keys(m.keys()),
            Kind::Values | Kind::Items => RawIter::Items(m.iter()),
        };
        Ok(MapIter {
            core: self.core.clone(),
            kind,
            kc: self.kc,
            vc: self.vc,
            st: Mutex::new(IterState {
                it: Some(it),
                buf: VecDeque::new(),
            }),
        })
    }

    /// The (key, value) pairs of dict.update's arguments, encoded.
    fn collect_pairs(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        if args.len() > 1 {
            return Err(PyTypeError::new_err(format!(
                "update expected at most 1 positional argument, got {}",
                args.len()
            )));
        }
        let mut push = |k: &Bound<'_, PyAny>, v: &Bound<'_, PyAny>| -> PyResult<()> {
            out.push((
                self.kc.encode(k, "key")?.into_vec(),
                self.vc.encode(v, "value")?.into_vec(),
            ));
            Ok(())
        };
        if let Some(other) = args.iter().next() {
            if let Ok(d) = other.cast::<PyDict>() {
                for (k, v) in d.iter() {
                    push(&k, &v)?;
                }
            } else if other.hasattr("keys")? {
                for k in other.call_method0("keys")?.try_iter()? {
                    let k = k?;
                    let v = other.get_item(&k)?;
                    push(&k, &v)?;
                }
            } else {
                for (i, pair) in other.try_iter()?.enumerate() {
                    let pair = pair?;
                    let t: Vec<Bound<'_, PyAny>> = pair
                        .try_iter()
                        .map_err(|_| {
                            PyTypeError::new_err(format!(
                                "cannot convert update sequence element #{i} to a sequence"
                            ))
                        })?
                        .collect::<PyResult<_>>()?;
                    if t.len() != 2 {
                        return Err(PyValueError::new_err(format!(
                            "update sequence element #{i} has length {}; 2 is required",
                            t.len()
                        )));
                    }
                    push(&t[0], &t[1])?;
                }
            }
        }
        if let Some(kw) = kwargs {
            for (k, v) in kw.iter() {
                push(&k, &v)?;
            }
        }
        let _ = py;
        Ok(out)
    }

    /// Writes encoded pairs with the engine's put_many, the GIL released.
    fn put_pairs(&self, py: Python<'_>, pairs: &[(Vec<u8>, Vec<u8>)]) -> PyResult<()> {
        let g = self.m(py)?;
        let refs: Vec<(&[u8], &[u8])> = pairs.iter().map(|(k, v)| (&k[..], &v[..])).collect();
        ops::put_many(&g, py, &refs)
    }

    /// Encodes every key of an iterable (the objects are kept, the encodings borrow them).
    fn encode_keys<'py>(&self, keys: &Bound<'py, PyAny>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        if keys.is_instance_of::<pyo3::types::PyString>()
            || keys.is_instance_of::<pyo3::types::PyBytes>()
        {
            return Err(PyTypeError::new_err(
                "expected an iterable of keys, not a single str or bytes",
            ));
        }
        keys.try_iter()?.collect()
    }

    fn to_dict_inner<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let it = self.iter_kind(py, Kind::Items)?;
        loop {
            let batch = it.fetch(py)?;
            if batch.is_empty() {
                break;
            }
            for (k, v) in batch {
                d.set_item(self.kc.decode(py, &k)?, self.vc.decode(py, &v)?)?;
            }
        }
        Ok(d)
    }
}

#[pymethods]
impl Map {
    /// The map's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The name of the key codec.
    #[getter]
    fn key_codec(&self) -> &'static str {
        self.kc.name()
    }

    /// The name of the value codec.
    #[getter]
    fn value_codec(&self) -> &'static str {
        self.vc.name()
    }

    /// The key type the map recorded when it was created (FORMAT.md, "Key and value
    /// types": "utf8", "i64", "user:0x..."), or None.
    #[getter]
    fn key_type(&self, py: Python<'_>) -> PyResult<Option<String>> {
        Ok(self.m(py)?.map.key_type().map(|t| t.name()))
    }

    /// The value type the map recorded when it was created, or None.
    #[getter]
    fn value_type(&self, py: Python<'_>) -> PyResult<Option<String>> {
        Ok(self.m(py)?.map.value_type().map(|t| t.name()))
    }

    /// The Store this map was opened from.
    #[getter]
    fn store(&self, py: Python<'_>) -> Py<Store> {
        self.store.clone_ref(py)
    }

    fn __getitem__<'py>(&self, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = key.py();
        let k = self.kc.encode(key, "key")?;
        let g = self.m(py)?;
        match self.get_decoded(py, &g, &k)? {
            Some(v) => Ok(v),
            None => Err(Self::key_error(key)),
        }
    }

    fn __setitem__(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = key.py();
        let k = self.kc.encode(key, "key")?;
        let v = self.vc.encode(value, "value")?;
        let g = self.m(py)?;
        ops::put(&g, py, &k, &v)?;
        Ok(())
    }

    fn __delitem__(&self, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = key.py();
        let k = self.kc.encode(key, "key")?;
        let g = self.m(py)?;
        if ops::remove(&g, py, &k)? {
            Ok(())
        } else {
            Err(Self::key_error(key))
        }
    }

    fn __contains__(&self, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let py = key.py();
        let k = self.kc.encode(key, "key")?;
        let g = self.m(py)?;
        ops::contains(&g, py, &k)
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        let g = self.m(py)?;
        Ok(ops::len(&g, py)? as usize)
    }

    fn __iter__(&self, py: Python<'_>) -> PyResult<MapIter> {
        self.iter_kind(py, Kind::Keys)
    }

    /// An iterator over the keys (what `iter(m)` returns; used by `keys()`).
    fn _iter_keys(&self, py: Python<'_>) -> PyResult<MapIter> {
        self.iter_kind(py, Kind::Keys)
    }

    /// An iterator over the values (used by `values()`).
    fn _iter_values(&self, py: Python<'_>) -> PyResult<MapIter> {
        self.iter_kind(py, Kind::Values)
    }

    /// An iterator over (key, value) pairs (used by `items()`).
    fn _iter_items(&self, py: Python<'_>) -> PyResult<MapIter> {
        self.iter_kind(py, Kind::Items)
    }

    /// keys() -> KeysView: a live, set-like view of the keys.
    fn keys<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        views(slf.py())?.getattr("KeysView")?.call1((slf,))
    }

    /// values() -> ValuesView: a live view of the values.
    fn values<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        views(slf.py())?.getattr("ValuesView")?.call1((slf,))
    }

    /// items() -> ItemsView: a live, set-like view of the (key, value) pairs.
    fn items<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        views(slf.py())?.getattr("ItemsView")?.call1((slf,))
    }

    /// get(key, default=None): the value of `key`, or `default` if it is absent.
    #[pyo3(signature = (key, default = None))]
    fn get<'py>(
        &self,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = key.py();
        let k = self.kc.encode(key, "key")?;
        let g = self.m(py)?;
        match self.get_decoded(py, &g, &k)? {
            Some(v) => Ok(v),
            None => Ok(default.unwrap_or_else(|| py.None().into_bound(py))),
        }
    }

    /// pop(key[, default]): removes `key` and returns its value, atomically (one engine
    /// `take`: of several processes popping the same key, exactly one gets the value).
    /// If the key is absent, returns `default` or raises KeyError.
    #[pyo3(signature = (key, *default))]
    fn pop<'py>(
        &self,
        key: &Bound<'py, PyAny>,
        default: &Bound<'py, PyTuple>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = key.py();
        if default.len() > 1 {
            return Err(PyTypeError::new_err(format!(
                "pop expected at most 2 arguments, got {}",
                default.len() + 1
            )));
        }
        let k = self.kc.encode(key, "key")?;
        let g = self.m(py)?;
        match ops::take(&g, py, &k)? {
            Some(v) => self.vc.decode(py, &v),
            None => match default.iter().next() {
                Some(d) => Ok(d),
                None => Err(Self::key_error(key)),
            },
        }
    }

    /// popitem() -> (key, value): removes and returns some item, atomically (no two
    /// processes get the same item). The order is the map's hash order, not LIFO.
    /// Raises KeyError if the map is empty.
    fn popitem<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let g = self.m(py)?;
        let m: &shoal::Map = &g.map;
        let got = py
            .detach(|| -> shoal::Result<Option<(Vec<u8>, Vec<u8>)>> {
                for k in m.keys() {
                    let k = k?;
                    if let Some(v) = m.take(&k)? {
                        return Ok(Some((k, v)));
                    }
                }
                Ok(None)
            })
            .py_err(py)?;
        match got {
            Some((k, v)) => PyTuple::new(py, [self.kc.decode(py, &k)?, self.vc.decode(py, &v)?]),
            None => Err(PyKeyError::new_err("popitem(): shoal map is empty")),
        }
    }

    /// setdefault(key, default=None): the value of `key`; if it is absent, inserts
    /// `default` and returns it. Atomic: when several processes race, exactly one value
    /// is stored and all of them return it.
    #[pyo3(signature = (key, default = None))]
    fn setdefault<'py>(
        &self,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = key.py();
        let default = default.unwrap_or_else(|| py.None().into_bound(py));
        let k = self.kc.encode(key, "key")?;
        let g = self.m(py)?;
        let kr: &[u8] = &k;
        if let Some(v) = g.quick(py, |m| m.get(kr)).py_err(py)? {
            return self.vc.decode(py, &v);
        }
        let dv = self.vc.encode(&default, "value")?;
        let v = ops::get_or_insert(&g, py, kr, &dv)?;
        if v[..] == dv[..] {
            Ok(default) // ours, or an equal one: dict returns the very object
        } else {
            self.vc.decode(py, &v)
        }
    }

    /// update([other], **kwargs): sets every pair of `other` (a mapping, or an iterable
    /// of (key, value) pairs) and of `kwargs`. Everything is encoded first (a bad type
    /// writes nothing); each pair is then written atomically, the whole is not.
    #[pyo3(signature = (*args, **kwargs))]
    fn update(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<()> {
        let pairs = self.collect_pairs(py, args, kwargs)?;
        self.put_pairs(py, &pairs)
    }

    /// clear(): removes every entry (one index segment at a time; other processes'
    /// operations go on meanwhile).
    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        let g = self.m(py)?;
        ops::clear(&g, py)
    }

    /// put_if_absent(key, value) -> bool: sets `key` only if it is absent; returns whether
    /// it did.
    fn put_if_absent(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<bool> {
        let py = key.py();
        let k = self.kc.encode(key, "key")?;
        let v = self.vc.encode(value, "value")?;
        let g = self.m(py)?;
        ops::put_if_absent(&g, py, &k, &v)
    }

    /// put_if_present(key, value) -> bool: sets `key` only if it is present; returns
    /// whether it did.
    fn put_if_present(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<bool> {
        let py = key.py();
        let k = self.kc.encode(key, "key")?;
        let v = self.vc.encode(value, "value")?;
        let g = self.m(py)?;
        ops::put_if_present(&g, py, &k, &v)
    }

    /// insert(key, value) -> bool: the former name of put_if_absent (a DeprecationWarning).
    fn insert(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<bool> {
        ops::renamed(key.py(), c"Map.insert is renamed put_if_absent")?;
        self.put_if_absent(key, value)
    }

    /// replace(key, value) -> bool: the former name of put_if_present (a
    /// DeprecationWarning).
    fn replace(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<bool> {
        ops::renamed(key.py(), c"Map.replace is renamed put_if_present")?;
        self.put_if_present(key, value)
    }

    /// swap(key, value): sets `key` and returns its previous value (None if it was
    /// absent), atomically.
    fn swap<'py>(
        &self,
        key: &Bound<'py, PyAny>,
        value: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = key.py();
        let k = self.kc.encode(key, "key")?;
        let v = self.vc.encode(value, "value")?;
        let g = self.m(py)?;
        match ops::swap(&g, py, &k, &v)? {
            Some(old) => self.vc.decode(py, &old),
            None => Ok(py.None().into_bound(py)),
        }
    }

    /// add(key, delta=1) -> int: atomically adds `delta` to the integer value of `key`
    /// (an absent key counts as 0 and is created) and returns the new value. Needs the
    /// "int" value codec (TypeError otherwise). 64-bit two's complement: the sum wraps
    /// around at 2**63 like a C int64 (it does not raise). Never loses an update, however
    /// many processes add at once.
    #[pyo3(signature = (key, delta = 1))]
    fn add(&self, key: &Bound<'_, PyAny>, delta: i64) -> PyResult<i64> {
        self.add_as("add", key, delta)
    }

    /// incr(key, delta=1) -> int: the former name of add (a DeprecationWarning).
    #[pyo3(signature = (key, delta = 1))]
    fn incr(&self, key: &Bound<'_, PyAny>, delta: i64) -> PyResult<i64> {
        ops::renamed(key.py(), c"Map.incr is renamed add")?;
        self.add_as("incr", key, delta)
    }

    /// compare_and_swap(key, expected, new) -> bool: atomically, if the value of `key`
    /// equals `expected`, sets it to `new` and returns True; otherwise changes nothing and
    /// returns False. `shoal.ABSENT` as `expected` means "the key is absent" (so
    /// insert-if-absent is compare_and_swap(k, ABSENT, v)); as `new` it removes the key.
    /// Values are compared by their encoded bytes (exact for bytes/str/int, bit pattern
    /// for float, canonical JSON for json; pickle bytes are not canonical).
    fn compare_and_swap(
        &self,
        key: &Bound<'_, PyAny>,
        expected: &Bound<'_, PyAny>,
        new: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let py = key.py();
        let absent = absent(py)?;
        let k = self.kc.encode(key, "key")?;
        let e = if expected.is(absent) {
            None
        } else {
            Some(self.vc.encode(expected, "expected value")?)
        };
        let n = if new.is(absent) {
            None
        } else {
            Some(self.vc.encode(new, "value")?)
        };
        let g = self.m(py)?;
        ops::compare_and_swap(&g, py, &k, e.as_deref(), n.as_deref())
    }

    /// modify(key, fn, /): atomic read-modify-write. Calls `fn(current)` with the current
    /// value (or `shoal.ABSENT` if the key is absent) and stores what it returns
    /// (returning `shoal.ABSENT` removes the key); returns the stored value. No other
    /// write to the key comes in between: if one does, `fn` is called again on the new
    /// value, so `fn` may run several times and should have no side effects. `fn` runs
    /// without any lock held; an exception from it propagates and changes nothing.
    /// Raises `shoal.Timeout` if the key keeps changing for longer than the lock timeout.
    /// (Not named `update`: `MutableMapping.update` merges another mapping in.)
    #[pyo3(signature = (key, func, /))]
    fn modify<'py>(
        &self,
        key: &Bound<'py, PyAny>,
        func: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = key.py();
        let absent = absent(py)?.clone();
        let k = self.kc.encode(key, "key")?;
        let g = self.m(py)?;
        ops::modify(&g, py, &k, |cur| {
            let arg = match cur {
                Some(v) => self.vc.decode(py, v)?,
                None => absent.clone(),
            };
            let out = func.call1((arg,))?;
            let new = if out.is(&absent) {
                None
            } else {
                Some(self.vc.encode(&out, "value")?.into_vec())
            };
            Ok((out, new))
        })
    }

    /// Whether the map keeps a stable UID per key (created with `Store.map(..., uids=True)`).
    #[getter]
    fn uids(&self, py: Python<'_>) -> PyResult<bool> {
        let g = self.m(py)?;
        Ok(g.map.has_uids())
    }

    /// uid(key) -> int | None: the stable UID of `key` (a positive 64-bit int), or None if
    /// the key is absent. It stays valid while the key exists, however often its value is
    /// replaced; once the key is removed the `*_by_uid` methods raise
    /// `shoal.StaleUidError` for it, even after its table entry is reused by a later key.
    /// `shoal.InvalidArgument` on a map without UIDs.
    fn uid(&self, key: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
        let py = key.py();
        let k = self.kc.encode(key, "key")?;
        let g = self.m(py)?;
        let kr: &[u8] = &k;
        Ok(g.quick(py, |m| m.uid(kr)).py_err(py)?.map(|u| u.to_u64()))
    }

    /// version(key) -> int | None: the version of `key`'s UID entry, or None if the key
    /// is absent. Every change to the key moves it, so `Transaction.when_version` can
    /// require that nothing changed the key since it was read. `shoal.InvalidArgument` on a
    /// map without UIDs.
    fn version(&self, key: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
        let py = key.py();
        let k = self.kc.encode(key, "key")?;
        let g = self.m(py)?;
        let kr: &[u8] = &k;
        g.quick(py, |m| m.version(kr)).py_err(py)
    }

    /// put_uid(key, value) -> int: `m[key] = value`, returning the key's UID (a new one
    /// for an inserted key, the one it had for a replaced key).
    fn put_uid(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<u64> {
        let py = key.py();
        let k = self.kc.encode(key, "key")?;
        let v = self.vc.encode(value, "value")?;
        let g = self.m(py)?;
        let (kr, vr): (&[u8], &[u8]) = (&k, &v);
        let (_, u) = g
            .quick_write(py, kr.len() + vr.len(), |m| m.put_with_uid(kr, vr))
            .py_err(py)?;
        Ok(u.to_u64())
    }

    /// get_by_uid(uid) -> value: the value of the key `uid` names (no hashing, no key
    /// comparison). `shoal.StaleUidError` (a KeyError) if the key was removed.
    fn get_by_uid<'py>(&self, py: Python<'py>, uid: u64) -> PyResult<Bound<'py, PyAny>> {
        let g = self.m(py)?;
        let v = g
            .quick(py, |m| m.get_by_uid(shoal::Uid::from_u64(uid)))
            .py_err(py)?;
        self.vc.decode(py, &v)
    }

    /// key_by_uid(uid) -> key: the key `uid` names.
    fn key_by_uid<'py>(&self, py: Python<'py>, uid: u64) -> PyResult<Bound<'py, PyAny>> {
        let g = self.m(py)?;
        let k = g
            .quick(py, |m| m.key_by_uid(shoal::Uid::from_u64(uid)))
            .py_err(py)?;
        self.kc.decode(py, &k)
    }

    /// put_by_uid(uid, value): replaces the value of the key `uid` names (its UID stays).
    fn put_by_uid(&self, uid: u64, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = value.py();
        let v = self.vc.encode(value, "value")?;
        let g = self.m(py)?;
        let vr: &[u8] = &v;
        g.quick_write(py, vr.len(), |m| {
            m.put_by_uid(shoal::Uid::from_u64(uid), vr)
        })
        .py_err(py)
    }

    /// remove_by_uid(uid) -> value: removes the key `uid` names and returns its value; the
    /// UID becomes stale.
    fn remove_by_uid<'py>(&self, py: Python<'py>, uid: u64) -> PyResult<Bound<'py, PyAny>> {
        let g = self.m(py)?;
        let v = g
            .quick(py, |m| m.remove_by_uid(shoal::Uid::from_u64(uid)))
            .py_err(py)?;
        self.vc.decode(py, &v)
    }

    /// add_by_uid(uid, delta=1) -> int: `add` on the key `uid` names (needs the "int"
    /// value codec); returns the new value.
    #[pyo3(signature = (uid, delta = 1))]
    fn add_by_uid(&self, py: Python<'_>, uid: u64, delta: i64) -> PyResult<i64> {
        if self.vc != Codec::Int {
            return Err(PyTypeError::new_err(format!(
                "add_by_uid needs a map with value codec 'int', not {:?}",
                self.vc.name()
            )));
        }
        let g = self.m(py)?;
        g.quick(py, |m| m.add_by_uid(shoal::Uid::from_u64(uid), delta))
            .py_err(py)
    }

    /// update_by_uid(uid, fn, /) -> value: `modify` on the key `uid` names: stores
    /// `fn(current)` (returning `shoal.ABSENT` removes the key, and the UID becomes stale)
    /// and returns it. `fn` may run several times (when another write comes in between)
    /// and runs with no lock held; an exception from it propagates and changes nothing.
    #[pyo3(signature = (uid, func, /))]
    fn update_by_uid<'py>(
        &self,
        py: Python<'py>,
        uid: u64,
        func: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let absent = absent(py)?.clone();
        let g = self.m(py)?;
        let m: &shoal::Map = &g.map;
        let mut failed: Option<PyErr> = None;
        let mut last: Option<Bound<'py, PyAny>> = None;
        m.update_by_uid(shoal::Uid::from_u64(uid), |cur| {
            if failed.is_some() {
                return Some(cur.to_vec()); // cancelled: keep what is there
            }
            let r = (|| -> PyResult<Option<Vec<u8>>> {
                let out = func.call1((self.vc.decode(py, cur)?,))?;
                let new = if out.is(&absent) {
                    None
                } else {
                    Some(self.vc.encode(&out, "value")?.to_vec())
                };
                last = Some(out);
                Ok(new)
            })();
            match r {
                Ok(new) => new,
                Err(e) => {
                    failed = Some(e);
                    Some(cur.to_vec())
                }
            }
        })
        .py_err(py)?;
        if let Some(e) = failed {
            return Err(e);
        }
        Ok(last.unwrap_or(absent))
    }

    /// get_many(keys, default=None) -> list: the values of many keys at once (`default`
    /// for absent ones), in order. Faster per key than single gets: the engine overlaps
    /// the memory misses of a batch, and the GIL is released once for the whole batch.
    /// Each lookup is atomic on its own; the batch is not a snapshot.
    #[pyo3(signature = (keys, default = None))]
    fn get_many<'py>(
        &self,
        keys: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let py = keys.py();
        let objs = self.encode_keys(keys)?;
        let encs = objs
            .iter()
            .map(|o| self.kc.encode(o, "key"))
            .collect::<PyResult<Vec<_>>>()?;
        let refs: Vec<&[u8]> = encs.iter().map(|e| &**e).collect();
        let g = self.m(py)?;
        let (buf, spans) = ops::get_many(&g, py, &refs)?;
        let default = default.unwrap_or_else(|| py.None().into_bound(py));
        let out = PyList::empty(py);
        for s in spans {
            match s {
                Some((at, n)) => out.append(self.vc.decode(py, &buf[at..at + n])?)?,
                None => out.append(&default)?,
            }
        }
        Ok(out)
    }

    /// put_many(items): sets many pairs (a mapping, or an iterable of (key, value)
    /// pairs) with the GIL released once. Everything is encoded first (a bad type writes
    /// nothing); each put is atomic on its own, the batch is not.
    fn put_many(&self, items: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = items.py();
        let args = PyTuple::new(py, [items])?;
        let pairs = self.collect_pairs(py, &args, None)?;
        self.put_pairs(py, &pairs)
    }

    /// remove_many(keys) -> int: removes many keys (each removal atomic on its own);
    /// returns how many were present. Absent keys are not an error.
    fn remove_many(&self, keys: &Bound<'_, PyAny>) -> PyResult<u64> {
        let py = keys.py();
        let objs = self.encode_keys(keys)?;
        let encs = objs
            .iter()
            .map(|o| self.kc.encode(o, "key"))
            .collect::<PyResult<Vec<_>>>()?;
        let refs: Vec<&[u8]> = encs.iter().map(|e| &**e).collect();
        let g = self.m(py)?;
        ops::remove_many(&g, py, &refs)
    }

    /// to_dict() -> dict: a copy of the whole map as a plain dict.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.to_dict_inner(py)
    }

    /// copy() -> dict: same as to_dict() (a plain, process-local copy).
    fn copy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.to_dict_inner(py)
    }

    /// stats() -> dict: entries, live_bytes, segments, splits, directory_depth,
    /// store_dead_bytes, store_data_bytes, file_size.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let g = self.m(py)?;
        let s = g.map.stats().py_err(py)?;
        let d = PyDict::new(py);
        for (k, v) in [
            ("entries", s.entries),
            ("live_bytes", s.live_bytes),
            ("segments", s.segments),
            ("splits", s.splits),
            ("directory_depth", s.directory_depth),
            ("store_dead_bytes", s.store_dead_bytes),
            ("store_data_bytes", s.store_data_bytes),
            ("file_size", s.file_size),
        ] {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    fn __richcmp__<'py>(
        &self,
        other: &Bound<'py, PyAny>,
        op: CompareOp,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = other.py();
        let not_impl = || py.NotImplemented().into_bound(py);
        let eq = match op {
            CompareOp::Eq => true,
            CompareOp::Ne => false,
            _ => return Ok(not_impl()),
        };
        let abc = MAPPING_ABC.import(py, "collections.abc", "Mapping")?;
        if !other.is_instance(abc)? {
            return Ok(not_impl());
        }
        let mine = self.to_dict_inner(py)?;
        let theirs = if let Ok(d) = other.cast::<PyDict>() {
            d.clone()
        } else {
            let d = PyDict::new(py);
            for item in other.call_method0("items")?.try_iter()? {
                let item = item?;
                d.set_item(item.get_item(0)?, item.get_item(1)?)?;
            }
            d
        };
        let same = mine.eq(&theirs)?;
        Ok(pyo3::types::PyBool::new(py, same == eq)
            .to_owned()
            .into_any())
    }

    /// Pickles to (path, name, key codec, value codec): the unpickled Map reopens the same
    /// store and map (in any process).
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        self.m(py)?;
        let st = self.store.bind(py).get();
        let f = py.import("shoal")?.getattr("_reopen_map")?;
        let args = (
            st.core.path.display().to_string(),
            self.name.clone(),
            self.kc.name(),
            self.vc.name(),
            st.core.lock_timeout,
        )
            .into_pyobject(py)?;
        PyTuple::new(py, [f, args.into_any()])
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let st = self.store.bind(py).get();
        format!(
            "<shoal.Map {:?} in {:?} key={} value={}{}>",
            self.name,
            st.core.path.display().to_string(),
            self.kc.name(),
            self.vc.name(),
            if self.core.is_closed() {
                " (closed)"
            } else {
                ""
            }
        )
    }
}

enum RawIter {
    Keys(shoal::Keys),
    Items(shoal::Iter),
}

struct IterState {
    it: Option<RawIter>,
    buf: VecDeque<(Vec<u8>, Vec<u8>)>,
}

/// An iterator over a shoal Map (keys, values or items). Fetches entries from the engine
/// in batches with the GIL released. Weakly consistent: see `Map`.
#[pyclass(module = "shoal", name = "MapIterator", frozen)]
pub struct MapIter {
    core: Arc<MapCore>,
    kind: Kind,
    kc: Codec,
    vc: Codec,
    st: Mutex<IterState>,
}

impl MapIter {
    /// The next batch of raw entries (empty at the end).
    fn fetch(&self, py: Python<'_>) -> PyResult<VecDeque<(Vec<u8>, Vec<u8>)>> {
        if self.core.is_closed() {
            self.st.lock().unwrap_or_else(|e| e.into_inner()).it = None;
            return Err(closed(py));
        }
        let r = py.detach(|| {
            let mut st = self.st.lock().unwrap_or_else(|e| e.into_inner());
            if !st.buf.is_empty() {
                return Ok(std::mem::take(&mut st.buf));
            }
            let mut out = VecDeque::with_capacity(ITER_BATCH);
            let res = match st.it.as_mut() {
                None => Ok(()),
                Some(RawIter::Keys(it)) => (|| {
                    for k in it.by_ref() {
                        out.push_back((k?, Vec::new()));
                        if out.len() >= ITER_BATCH {
                            break;
                        }
                    }
                    Ok(())
                })(),
                Some(RawIter::Items(it)) => (|| {
                    for kv in it.by_ref() {
                        out.push_back(kv?);
                        if out.len() >= ITER_BATCH {
                            break;
                        }
                    }
                    Ok(())
                })(),
            };
            if out.is_empty() || res.is_err() {
                st.it = None; // finished (or failed): let go of the engine handle
            }
            res.map(|()| out)
        });
        r.py_err(py)
    }
}

#[pymethods]
impl MapIter {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let next = self
            .st
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .buf
            .pop_front();
        let (k, v) = match next {
            Some(kv) => kv,
            None => {
                let mut batch = self.fetch(py)?;
                let Some(first) = batch.pop_front() else {
                    return Ok(None);
                };
                self.st.lock().unwrap_or_else(|e| e.into_inner()).buf = batch;
                first
            }
        };
        Ok(Some(match self.kind {
            Kind::Keys => self.kc.decode(py, &k)?,
            Kind::Values => self.vc.decode(py, &v)?,
            Kind::Items => {
                PyTuple::new(py, [self.kc.decode(py, &k)?, self.vc.decode(py, &v)?])?.into_any()
            }
        }))
    }
}
