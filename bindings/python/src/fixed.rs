//! The native half of `shoal.FixedMap` (`shoal._shoal._FixedMap`): a fixed-size map of
//! raw bytes. The public class is `shoal._fixed.FixedMap`, a
//! `collections.abc.MutableMapping` written in Python over this one (it gets the
//! mapping mixins — `get`, `pop`, `setdefault`, `update`, views, `==` — for free).

use crate::errors::{closed, ResultExt};
use arc_swap::ArcSwapOption;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};
use std::sync::{Arc, Mutex};

/// A fixed map's engine handle, emptied by `Store.close()`.
pub struct FixedCore {
    pub map: ArcSwapOption<shoal::FixedMap>,
}

/// Native fixed-size map: bytes keys of exactly `key_size` bytes, bytes values of exactly
/// `value_size` bytes (other lengths raise `shoal.InvalidArgument`, a `ValueError`).
#[pyclass(module = "shoal._shoal", name = "_FixedMap", frozen)]
pub struct FixedMapNative {
    pub core: Arc<FixedCore>,
    pub name: String,
    pub key_size: usize,
    pub value_size: usize,
}

impl FixedMapNative {
    #[inline]
    fn m(&self, py: Python<'_>) -> PyResult<Arc<shoal::FixedMap>> {
        self.core.map.load_full().ok_or_else(|| closed(py))
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
        self.core.map.load().is_none()
    }

    fn get<'py>(&self, py: Python<'py>, key: &[u8]) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let m = self.m(py)?;
        let mut buf = vec![0u8; self.value_size];
        if m.get_into(key, &mut buf).py_err(py)? {
            Ok(Some(PyBytes::new(py, &buf)))
        } else {
            Ok(None)
        }
    }

    fn contains(&self, py: Python<'_>, key: &[u8]) -> PyResult<bool> {
        self.m(py)?.contains(key).py_err(py)
    }

    /// Returns True if the key was present (replaced).
    fn put(&self, py: Python<'_>, key: &[u8], value: &[u8]) -> PyResult<bool> {
        let m = self.m(py)?;
        let o = py.detach(|| m.put(key, value)).py_err(py)?;
        Ok(o == shoal::PutOutcome::Replaced)
    }

    fn insert(&self, py: Python<'_>, key: &[u8], value: &[u8]) -> PyResult<bool> {
        let m = self.m(py)?;
        py.detach(|| m.insert(key, value)).py_err(py)
    }

    fn replace(&self, py: Python<'_>, key: &[u8], value: &[u8]) -> PyResult<bool> {
        let m = self.m(py)?;
        py.detach(|| m.replace(key, value)).py_err(py)
    }

    fn remove(&self, py: Python<'_>, key: &[u8]) -> PyResult<bool> {
        let m = self.m(py)?;
        py.detach(|| m.remove(key)).py_err(py)
    }

    #[pyo3(signature = (key, expected, new))]
    fn compare_and_swap(
        &self,
        py: Python<'_>,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> PyResult<bool> {
        let m = self.m(py)?;
        py.detach(|| m.compare_and_swap(key, expected, new))
            .py_err(py)
    }

    fn add(&self, py: Python<'_>, key: &[u8], delta: i64) -> PyResult<i64> {
        let m = self.m(py)?;
        py.detach(|| m.add(key, delta)).py_err(py)
    }

    /// The values of `keys` in their order (None for an absent key): one call, the GIL
    /// released, the batch's memory misses overlapped by the engine's prefetch.
    fn get_many<'py>(
        &self,
        py: Python<'py>,
        keys: Vec<Vec<u8>>,
    ) -> PyResult<Vec<Option<Bound<'py, PyBytes>>>> {
        let m = self.m(py)?;
        let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
        let vals = py.detach(|| m.get_many(&refs)).py_err(py)?;
        Ok(vals
            .into_iter()
            .map(|v| v.map(|v| PyBytes::new(py, &v)))
            .collect())
    }

    fn len(&self, py: Python<'_>) -> PyResult<u64> {
        self.m(py)?.len().py_err(py)
    }

    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        let m = self.m(py)?;
        py.detach(|| m.clear()).py_err(py)
    }

    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.m(py)?.stats().py_err(py)?;
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
        let m = self.m(py)?;
        Ok(FixedIterNative {
            core: self.core.clone(),
            kind,
            it: Mutex::new(Some(m.iter())),
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
        if self.core.map.load().is_none() {
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
