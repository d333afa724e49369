//! The native half of `shoal.FixedMap` (`shoal._shoal._FixedMap`): a fixed-size map of
//! raw bytes. The public class is `shoal._fixed.FixedMap`, a
//! `collections.abc.MutableMapping` written in Python over this one (it gets the
//! mapping mixins — `get`, `pop`, `setdefault`, `update`, views, `==` — for free).

use crate::errors::{closed, ResultExt};
pub use crate::handle::FixedCore;
use crate::handle::InUse;
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
/// Single-key calls keep the GIL unless they find the segment lock or a bucket busy
/// beyond a short spin: then they release it while they wait (`Handles::quick`). Keys and
/// values are at most 640 bytes together, so no write is large enough to release it at
/// once (`QUICK_BYTES`). Batch calls, `clear` and iteration release it. A writer that
/// finds lock-free adders counted in its segment also gives up after a spin when its
/// deadline is zero (engine: fixed.rs `wait_adders`; it used to wait out 10 ms first).
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
        self.m(py)?.quick(py, |m| m.contains(key)).py_err(py)
    }

    /// Returns True if the key was present (replaced).
    fn put(&self, py: Python<'_>, key: &[u8], value: &[u8]) -> PyResult<bool> {
        let o = self.m(py)?.quick(py, |m| m.put(key, value)).py_err(py)?;
        Ok(o == shoal::PutOutcome::Replaced)
    }

    fn insert(&self, py: Python<'_>, key: &[u8], value: &[u8]) -> PyResult<bool> {
        self.m(py)?
            .quick(py, |m| m.put_if_absent(key, value))
            .py_err(py)
    }

    fn replace(&self, py: Python<'_>, key: &[u8], value: &[u8]) -> PyResult<bool> {
        self.m(py)?
            .quick(py, |m| m.put_if_present(key, value))
            .py_err(py)
    }

    fn remove(&self, py: Python<'_>, key: &[u8]) -> PyResult<bool> {
        self.m(py)?.quick(py, |m| m.remove(key)).py_err(py)
    }

    /// Inserts or replaces; returns the previous value (None if the key was absent).
    fn swap<'py>(
        &self,
        py: Python<'py>,
        key: &[u8],
        value: &[u8],
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let old = self.m(py)?.quick(py, |m| m.swap(key, value)).py_err(py)?;
        Ok(old.map(|v| PyBytes::new(py, &v)))
    }

    /// Removes `key` and returns its value (None if it was absent).
    fn take<'py>(&self, py: Python<'py>, key: &[u8]) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let old = self.m(py)?.quick(py, |m| m.take(key)).py_err(py)?;
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
        let v = self
            .m(py)?
            .quick(py, |m| m.get_or_insert(key, default))
            .py_err(py)?;
        Ok(PyBytes::new(py, &v))
    }

    /// Puts many pairs with the GIL released once; each put atomic on its own.
    fn put_many(&self, py: Python<'_>, items: Vec<(Vec<u8>, Vec<u8>)>) -> PyResult<()> {
        let g = self.m(py)?;
        let m: &shoal::FixedMap = &g.map;
        let refs: Vec<(&[u8], &[u8])> = items.iter().map(|(k, v)| (&k[..], &v[..])).collect();
        py.detach(|| m.put_many(&refs)).py_err(py)
    }

    /// Removes many keys with the GIL released once; returns how many were present.
    fn remove_many(&self, py: Python<'_>, keys: Vec<Vec<u8>>) -> PyResult<u64> {
        let g = self.m(py)?;
        let m: &shoal::FixedMap = &g.map;
        let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
        py.detach(|| m.remove_many(&refs)).py_err(py)
    }

    #[pyo3(signature = (key, expected, new))]
    fn compare_and_swap(
        &self,
        py: Python<'_>,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> PyResult<bool> {
        self.m(py)?
            .quick(py, |m| m.compare_and_swap(key, expected, new))
            .py_err(py)
    }

    fn add(&self, py: Python<'_>, key: &[u8], delta: i64) -> PyResult<i64> {
        self.m(py)?.quick(py, |m| m.add(key, delta)).py_err(py)
    }

    /// The values of `keys` in their order (None for an absent key): one call, the GIL
    /// released, the batch's memory misses overlapped by the engine's prefetch.
    fn get_many<'py>(
        &self,
        py: Python<'py>,
        keys: Vec<Vec<u8>>,
    ) -> PyResult<Vec<Option<Bound<'py, PyBytes>>>> {
        let g = self.m(py)?;
        let m: &shoal::FixedMap = &g.map;
        let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
        let vals = py.detach(|| m.get_many(&refs)).py_err(py)?;
        Ok(vals
            .into_iter()
            .map(|v| v.map(|v| PyBytes::new(py, &v)))
            .collect())
    }

    fn len(&self, py: Python<'_>) -> PyResult<u64> {
        self.m(py)?.map.len().py_err(py)
    }

    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        let g = self.m(py)?;
        let m: &shoal::FixedMap = &g.map;
        py.detach(|| m.clear()).py_err(py)
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
