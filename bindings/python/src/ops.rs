//! The operations `Map` and `FixedMap` share, written once over `shoal::KvMap`, on
//! encoded keys and values: `Map` encodes with its codecs and decodes what comes back;
//! `_FixedMap` passes bytes through.
//!
//! One GIL policy for both kinds: a single-key read or removal keeps the GIL unless it
//! has to wait (`Handles::quick`); a single-key write of a value also releases it at once
//! when it writes more than `QUICK_BYTES` (`Handles::quick_write`: a fixed map's writes
//! are far smaller); batches and `clear` release it for the whole call.

use crate::errors::{to_py, ResultExt};
use crate::handle::Handles;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use shoal::KvMap;
use std::time::{Duration, Instant};

static ABSENT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// `shoal.ABSENT`, the "no value" marker.
pub fn absent(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    Ok(ABSENT
        .get_or_try_init(py, || -> PyResult<Py<PyAny>> {
            Ok(py.import("shoal._absent")?.getattr("ABSENT")?.unbind())
        })?
        .bind(py))
}

/// Warns, with `message`, that the method called is a former name (a
/// `DeprecationWarning` pointing at the caller's line).
pub fn renamed(py: Python<'_>, message: &std::ffi::CStr) -> PyResult<()> {
    let category = py.get_type::<pyo3::exceptions::PyDeprecationWarning>();
    PyErr::warn(py, category.as_any(), message, 1)
}

#[inline]
pub fn contains<H: KvMap>(h: &Handles<H>, py: Python<'_>, k: &[u8]) -> PyResult<bool> {
    h.quick(py, |m| m.contains(k)).py_err(py)
}

/// Returns whether the key was present (its value replaced).
#[inline]
pub fn put<H: KvMap>(h: &Handles<H>, py: Python<'_>, k: &[u8], v: &[u8]) -> PyResult<bool> {
    let o = h
        .quick_write(py, k.len() + v.len(), |m| m.put(k, v))
        .py_err(py)?;
    Ok(o == shoal::PutOutcome::Replaced)
}

pub fn put_if_absent<H: KvMap>(
    h: &Handles<H>,
    py: Python<'_>,
    k: &[u8],
    v: &[u8],
) -> PyResult<bool> {
    h.quick_write(py, k.len() + v.len(), |m| m.put_if_absent(k, v))
        .py_err(py)
}

pub fn put_if_present<H: KvMap>(
    h: &Handles<H>,
    py: Python<'_>,
    k: &[u8],
    v: &[u8],
) -> PyResult<bool> {
    h.quick_write(py, k.len() + v.len(), |m| m.put_if_present(k, v))
        .py_err(py)
}

#[inline]
pub fn remove<H: KvMap>(h: &Handles<H>, py: Python<'_>, k: &[u8]) -> PyResult<bool> {
    h.quick(py, |m| m.remove(k)).py_err(py)
}

pub fn swap<H: KvMap>(
    h: &Handles<H>,
    py: Python<'_>,
    k: &[u8],
    v: &[u8],
) -> PyResult<Option<Vec<u8>>> {
    h.quick_write(py, k.len() + v.len(), |m| m.swap(k, v))
        .py_err(py)
}

pub fn take<H: KvMap>(h: &Handles<H>, py: Python<'_>, k: &[u8]) -> PyResult<Option<Vec<u8>>> {
    h.quick(py, |m| m.take(k)).py_err(py)
}

pub fn get_or_insert<H: KvMap>(
    h: &Handles<H>,
    py: Python<'_>,
    k: &[u8],
    default: &[u8],
) -> PyResult<Vec<u8>> {
    h.quick_write(py, k.len() + default.len(), |m| m.get_or_insert(k, default))
        .py_err(py)
}

pub fn compare_and_swap<H: KvMap>(
    h: &Handles<H>,
    py: Python<'_>,
    k: &[u8],
    expected: Option<&[u8]>,
    new: Option<&[u8]>,
) -> PyResult<bool> {
    let bytes = k.len() + expected.map_or(0, <[u8]>::len) + new.map_or(0, <[u8]>::len);
    h.quick_write(py, bytes, |m| m.compare_and_swap(k, expected, new))
        .py_err(py)
}

pub fn add<H: KvMap>(h: &Handles<H>, py: Python<'_>, k: &[u8], delta: i64) -> PyResult<i64> {
    h.quick(py, |m| m.add(k, delta)).py_err(py)
}

/// The values of `keys`, in order, copied into one buffer with the GIL released once:
/// the buffer and, per key, where its value is in it (None: absent).
pub type Spans = (Vec<u8>, Vec<Option<(usize, usize)>>);

pub fn get_many<H: KvMap>(h: &Handles<H>, py: Python<'_>, keys: &[&[u8]]) -> PyResult<Spans> {
    let m = &h.map;
    py.detach(|| {
        let mut buf = Vec::new();
        let mut spans: Vec<Option<(usize, usize)>> = vec![None; keys.len()];
        m.get_many_with(keys, |i, v| {
            if let Some(v) = v {
                spans[i] = Some((buf.len(), v.len()));
                buf.extend_from_slice(v);
            }
        })
        .map(|()| (buf, spans))
    })
    .py_err(py)
}

pub fn put_many<H: KvMap>(
    h: &Handles<H>,
    py: Python<'_>,
    items: &[(&[u8], &[u8])],
) -> PyResult<()> {
    let m = &h.map;
    py.detach(|| m.put_many(items)).py_err(py)
}

pub fn remove_many<H: KvMap>(h: &Handles<H>, py: Python<'_>, keys: &[&[u8]]) -> PyResult<u64> {
    let m = &h.map;
    py.detach(|| m.remove_many(keys)).py_err(py)
}

pub fn len<H: KvMap>(h: &Handles<H>, py: Python<'_>) -> PyResult<u64> {
    h.map.len().py_err(py)
}

pub fn clear<H: KvMap>(h: &Handles<H>, py: Python<'_>) -> PyResult<()> {
    let m = &h.map;
    py.detach(|| m.clear()).py_err(py)
}

/// The read-modify-write loop of `modify`: the engine's `update` loop, but the function
/// is Python's and may raise (then nothing is written and the exception propagates).
/// `step` gets the current value (None: absent) and returns what the function returned
/// and its encoding (None: `shoal.ABSENT`, remove). Gives up with `shoal.Timeout` when the
/// key keeps changing for longer than the handle's lock timeout.
pub fn modify<'py, H: KvMap>(
    h: &Handles<H>,
    py: Python<'py>,
    k: &[u8],
    mut step: impl FnMut(Option<&[u8]>) -> PyResult<(Bound<'py, PyAny>, Option<Vec<u8>>)>,
) -> PyResult<Bound<'py, PyAny>> {
    let timeout = h.map.timeout();
    let start = Instant::now();
    let mut tries = 0u32;
    loop {
        let cur = h.quick(py, |m| m.get(k)).py_err(py)?;
        let (out, new) = step(cur.as_deref())?;
        let (cr, nr) = (cur.as_deref(), new.as_deref());
        let done = if cr.is_none() && nr.is_none() {
            // Absent stays absent: nothing to write, but make sure it still is absent.
            !contains(h, py, k)?
        } else {
            compare_and_swap(h, py, k, cr, nr)?
        };
        if done {
            return Ok(out);
        }
        tries += 1;
        if start.elapsed() > timeout {
            return Err(to_py(py, shoal::Error::Timeout(start.elapsed())));
        }
        if tries > 4 {
            let d = Duration::from_micros(10 << tries.min(10));
            py.detach(|| std::thread::sleep(d));
        }
    }
}
