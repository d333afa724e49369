//! The native half of `shoal.FixedMap` (`shoal._shoal._FixedMap`): a fixed-size map of
//! raw bytes. The public class is `shoal._fixed.FixedMap`, a
//! `collections.abc.MutableMapping` written in Python over this one (it gets the
//! mapping mixins — `get`, `pop`, `setdefault`, `update`, views, `==` — for free).

use crate::errors::{closed, ResultExt};
pub use crate::handle::FixedCore;
use crate::handle::InUse;
use crate::ops::{self, absent};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};
use std::sync::{Arc, Mutex};

/// The engine's largest value size (`shoal::FixedMap`, FORMAT.md "Fixed-size maps"): a
/// `get` copies the value into a stack buffer of this size, no heap allocation per
/// lookup.
const MAX_VALUE: usize = 128;

/// Native fixed-size map: bytes keys of exactly `key_size` bytes, bytes values of exactly
/// `value_size` bytes (other lengths raise `shoal.InvalidArgument`, a `ValueError`).
///
/// The operations it shares with `Map` are `ops`'s. Single-key calls keep the GIL unless
/// they find the segment lock or a bucket busy beyond a short spin: then they release it
/// while they wait (`Handles::quick`). Keys and values are at most 640 bytes together, so
/// no write is large enough to release it at once (`QUICK_BYTES`). Batch calls, `clear`
/// and iteration release it. A writer that finds lock-free adders counted in its segment
/// also gives up after a spin when its deadline is zero (engine: `wait_adders` of the
/// fixed maps).
#[pyclass(module = "shoal._shoal", name = "_FixedMap", frozen)]
pub struct FixedMapNative {
    pub core: Arc<FixedCore>,
    pub name: String,
    pub key_size: usize,
    pub value_size: usize,
}

impl FixedMapNative {
    #[inline]
    fn m(&self, py: Python<'_>) -> PyResult<InUse<'_, shoal::FixedMap>> {
        self.core.enter().ok_or_else(|| closed(py))
    }
}

#[pymethods]
impl FixedMapNative {
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    #[getter]
    fn key_size(&self) -> usize {
        self.key_size
    }

    #[getter]
    fn value_size(&self) -> usize {
        self.value_size
    }

    #[getter]
    fn key_type(&self, py: Python<'_>) -> PyResult<Option<String>> {
        Ok(self.m(py)?.map.key_type().map(|t| t.name()))
    }

    #[getter]
    fn value_type(&self, py: Python<'_>) -> PyResult<Option<String>> {
        Ok(self.m(py)?.map.value_type().map(|t| t.name()))
    }

    #[getter]
    fn closed(&self) -> bool {
        self.core.is_closed()
    }

    fn get<'py>(&self, py: Python<'py>, key: &[u8]) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let g = self.m(py)?;
        let n = self.value_size;
        if n > MAX_VALUE {
            // The engine refuses such maps today; should that change, a copy beats a
            // panic on slicing out of bounds.
            return Ok(g
                .quick(py, |m| m.get(key))
                .py_err(py)?
                .map(|v| PyBytes::new(py, &v)));
        }
        let mut buf = [0u8; MAX_VALUE];
        let buf = &mut buf[..n];
        if g.quick(py, |m| m.get_into(key, buf)).py_err(py)? {
            Ok(Some(PyBytes::new(py, buf)))
        } else {
            Ok(None)
        }
    }

    fn contains(&self, py: Python<'_>, key: &[u8]) -> PyResult<bool> {
        ops::contains(&*self.m(py)?, py, key)
    }

    /// Returns True if the key was present (replaced).
    fn put(&self, py: Python<'_>, key: &[u8], value: &[u8]) -> PyResult<bool> {
        ops::put(&*self.m(py)?, py, key, value)
    }

    fn put_if_absent(&self, py: Python<'_>, key: &[u8], value: &[u8]) -> PyResult<bool> {
        ops::put_if_absent(&*self.m(py)?, py, key, value)
    }

    fn put_if_present(&self, py: Python<'_>, key: &[u8], value: &[u8]) -> PyResult<bool> {
        ops::put_if_present(&*self.m(py)?, py, key, value)
    }

    fn remove(&self, py: Python<'_>, key: &[u8]) -> PyResult<bool> {
        ops::remove(&*self.m(py)?, py, key)
    }

    /// Inserts or replaces; returns the previous value (None if the key was absent).
    fn swap<'py>(
        &self,
        py: Python<'py>,
        key: &[u8],
        value: &[u8],
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let old = ops::swap(&*self.m(py)?, py, key, value)?;
        Ok(old.map(|v| PyBytes::new(py, &v)))
    }

    /// Removes `key` and returns its value (None if it was absent).
    fn take<'py>(&self, py: Python<'py>, key: &[u8]) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let old = ops::take(&*self.m(py)?, py, key)?;
        Ok(old.map(|v| PyBytes::new(py, &v)))
    }

    /// The value of `key`, inserting `default` first if the key is absent (one locked
    /// step: of racing callers exactly one inserts).
    fn get_or_insert<'py>(
        &self,
        py: Python<'py>,
        key: &[u8],
        default: &[u8],
    ) -> PyResult<Bound<'py, PyBytes>> {
        let v = ops::get_or_insert(&*self.m(py)?, py, key, default)?;
        Ok(PyBytes::new(py, &v))
    }

    /// Puts many pairs with the GIL released once; each put atomic on its own.
    fn put_many(&self, py: Python<'_>, items: Vec<(Vec<u8>, Vec<u8>)>) -> PyResult<()> {
        let refs: Vec<(&[u8], &[u8])> = items.iter().map(|(k, v)| (&k[..], &v[..])).collect();
        ops::put_many(&*self.m(py)?, py, &refs)
    }

    /// Removes many keys with the GIL released once; returns how many were present.
    fn remove_many(&self, py: Python<'_>, keys: Vec<Vec<u8>>) -> PyResult<u64> {
        let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
        ops::remove_many(&*self.m(py)?, py, &refs)
    }

    #[pyo3(signature = (key, expected, new))]
    fn compare_and_swap(
        &self,
        py: Python<'_>,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> PyResult<bool> {
        ops::compare_and_swap(&*self.m(py)?, py, key, expected, new)
    }

    fn add(&self, py: Python<'_>, key: &[u8], delta: i64) -> PyResult<i64> {
        ops::add(&*self.m(py)?, py, key, delta)
    }

    /// Atomic read-modify-write (`FixedMap.modify`): stores `func(current)` (current is
    /// `shoal.ABSENT` for an absent key; returning it removes the key) and returns it.
    #[pyo3(signature = (key, func, /))]
    fn modify<'py>(
        &self,
        py: Python<'py>,
        key: &[u8],
        func: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let absent = absent(py)?.clone();
        ops::modify(&*self.m(py)?, py, key, |cur| {
            let arg = match cur {
                Some(v) => PyBytes::new(py, v).into_any(),
                None => absent.clone(),
            };
            let out = func.call1((arg,))?;
            let new = if out.is(&absent) {
                None
            } else {
                Some(out.cast::<PyBytes>()?.as_bytes().to_vec())
            };
            Ok((out, new))
        })
    }

    /// The values of `keys` in their order (None for an absent key): one call, the GIL
    /// released, the batch's memory misses overlapped by the engine's prefetch.
    fn get_many<'py>(
        &self,
        py: Python<'py>,
        keys: Vec<Vec<u8>>,
    ) -> PyResult<Vec<Option<Bound<'py, PyBytes>>>> {
        let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
        let (buf, spans) = ops::get_many(&*self.m(py)?, py, &refs)?;
        Ok(spans
            .into_iter()
            .map(|s| s.map(|(at, n)| PyBytes::new(py, &buf[at..at + n])))
            .collect())
    }

    fn len(&self, py: Python<'_>) -> PyResult<u64> {
        ops::len(&*self.m(py)?, py)
    }

    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        ops::clear(&*self.m(py)?, py)
    }

    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.m(py)?.map.stats().py_err(py)?;
        let d = PyDict::new(py);
        for (k, v) in [
            ("entries", s.entries),
            ("key_size", s.key_size),
            ("value_size", s.value_size),
            ("cell_bytes", s.cell_bytes),
            ("bucket_bytes", s.bucket_bytes),
            ("cells_per_bucket", s.cells_per_bucket),
            ("segments", s.segments),
            ("segment_bytes", s.segment_bytes),
            ("capacity", s.capacity),
            ("splits", s.splits),
            ("directory_depth", s.directory_depth),
            ("file_size", s.file_size),
        ] {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// An iterator: kind 0 = keys, 1 = values, 2 = (key, value) pairs.
    fn iter(&self, py: Python<'_>, kind: u8) -> PyResult<FixedIterNative> {
        let it = self.m(py)?.map.iter();
        Ok(FixedIterNative {
            core: self.core.clone(),
            kind,
            it: Mutex::new(Some(it)),
        })
    }
}

/// Native iterator over a fixed map (see `_FixedMap.iter`). Weakly consistent.
#[pyclass(module = "shoal._shoal", name = "_FixedMapIterator", frozen)]
pub struct FixedIterNative {
    core: Arc<FixedCore>,
    kind: u8,
    it: Mutex<Option<shoal::FixedIter>>,
}

#[pymethods]
impl FixedIterNative {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        if self.core.is_closed() {
            *self.it.lock().unwrap_or_else(|e| e.into_inner()) = None;
            return Err(closed(py));
        }
        let next = py.detach(|| {
            let mut g = self.it.lock().unwrap_or_else(|e| e.into_inner());
            let r = g.as_mut().and_then(|it| it.next());
            if !matches!(r, Some(Ok(_))) {
                *g = None; // finished or failed: let go of the engine handle
            }
            r
        });
        let Some(r) = next else { return Ok(None) };
        let (k, v) = r.py_err(py)?;
        Ok(Some(match self.kind {
            0 => PyBytes::new(py, &k).into_any(),
            1 => PyBytes::new(py, &v).into_any(),
            _ => PyTuple::new(py, [PyBytes::new(py, &k), PyBytes::new(py, &v)])?.into_any(),
        }))
    }
}
