//! Codecs: how Python keys and values become the bytes the engine stores.
//!
//! | codec    | Python type                       | bytes in the store                          |
//! |----------|-----------------------------------|---------------------------------------------|
//! | `bytes`  | bytes (bytearray, memoryview in)   | as is                                       |
//! | `str`    | str                               | UTF-8                                       |
//! | `int`    | int in [-2^63, 2^63)              | 8 bytes, two's complement, little-endian    |
//! | `float`  | float (int accepted on input)     | 8 bytes, IEEE 754 binary64, little-endian   |
//! | `json`   | JSON-serializable objects         | compact UTF-8 JSON, keys sorted, no NaN     |
//! | `pickle` | any picklable object (opt-in)     | pickle protocol 5                           |
//! | `uint`   | int in [0, 2^64)                  | 8 bytes, little-endian                      |
//!
//! The fixed layouts of `int` and `float` let programs in other languages read the values.

use crate::errors::exc;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyByteArray, PyBytes, PyFloat, PyInt, PyMemoryView, PyString};
use std::ops::Deref;

/// A key or value codec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    Bytes,
    Str,
    Int,
    Float,
    Json,
    Pickle,
    Uint,
}

/// The codec names, in the order of `Codec`.
pub const NAMES: [&str; 7] = ["bytes", "str", "int", "float", "json", "pickle", "uint"];

/// Encoded bytes: borrowed from a Python `bytes` object, owned, or an 8-byte word.
pub enum Enc<'a> {
    Borrowed(&'a [u8]),
    Owned(Vec<u8>),
    Word([u8; 8]),
}

impl Deref for Enc<'_> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        match self {
            Enc::Borrowed(b) => b,
            Enc::Owned(v) => v,
            Enc::Word(w) => w,
        }
    }
}

impl Enc<'_> {
    /// An owned copy (for batches that outlive the borrowed Python objects' scope).
    pub fn into_vec(self) -> Vec<u8> {
        match self {
            Enc::Borrowed(b) => b.to_vec(),
            Enc::Owned(v) => v,
            Enc::Word(w) => w.to_vec(),
        }
    }
}

static JSON_ENCODE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static JSON_LOADS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static PICKLE_DUMPS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static PICKLE_LOADS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

fn json_encode(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    Ok(JSON_ENCODE
        .get_or_try_init(py, || -> PyResult<Py<PyAny>> {
            // Canonical form, so that equal JSON keys are equal bytes: sorted object keys,
            // no whitespace, UTF-8 (not \u escapes), and strict JSON (NaN/inf refused).
            let kw = pyo3::types::PyDict::new(py);
            kw.set_item("sort_keys", true)?;
            kw.set_item("separators", (",", ":"))?;
            kw.set_item("ensure_ascii", false)?;
            kw.set_item("allow_nan", false)?;
            let enc = py
                .import("json")?
                .getattr("JSONEncoder")?
                .call((), Some(&kw))?;
            Ok(enc.getattr("encode")?.unbind())
        })?
        .bind(py))
}

fn cached<'py>(
    py: Python<'py>,
    cell: &'static PyOnceLock<Py<PyAny>>,
    module: &str,
    attr: &str,
) -> PyResult<&'static Py<PyAny>> {
    cell.get_or_try_init(py, || -> PyResult<Py<PyAny>> {
        Ok(py.import(module)?.getattr(attr)?.unbind())
    })
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

impl Codec {
    /// Parses a codec name; `ValueError` for an unknown one.
    pub fn parse(s: &str) -> PyResult<Codec> {
        Ok(match s {
            "bytes" => Codec::Bytes,
            "str" => Codec::Str,
            "int" => Codec::Int,
            "float" => Codec::Float,
            "json" => Codec::Json,
            "pickle" => Codec::Pickle,
            "uint" => Codec::Uint,
            _ => {
                return Err(PyValueError::new_err(format!(
                    "unknown codec {s:?}; the codecs are {}",
                    NAMES.join(", ")
                )))
            }
        })
    }

    /// The codec's name.
    pub fn name(self) -> &'static str {
        NAMES[self as usize]
    }

    /// The type a map records for this codec (FORMAT.md, "Key and value types").
    pub fn data_type(self) -> shoal::DataType {
        match self {
            Codec::Bytes => shoal::DataType::Bytes,
            Codec::Str => shoal::DataType::Utf8,
            Codec::Int => shoal::DataType::I64,
            Codec::Uint => shoal::DataType::U64,
            Codec::Float => shoal::DataType::F64,
            Codec::Json => shoal::DataType::Json,
            Codec::Pickle => shoal::DataType::User(shoal::USER_TAG_PYTHON_PICKLE),
        }
    }

    /// The codec of a recorded type, for a map opened without one: bytes when none is
    /// recorded, or the type is another program's own. Never pickle, which runs code when
    /// it decodes: its caller must ask for it.
    pub fn for_type(t: Option<shoal::DataType>, map: &str, what: &str) -> PyResult<Codec> {
        use shoal::DataType as T;
        Ok(match t {
            Some(T::Utf8) => Codec::Str,
            Some(T::I64) => Codec::Int,
            Some(T::U64) => Codec::Uint,
            Some(T::F64) => Codec::Float,
            Some(T::Json) => Codec::Json,
            Some(T::User(shoal::USER_TAG_PYTHON_PICKLE)) => {
                return Err(crate::errors::invalid(&format!(
                    "map {map:?} records its {what}s as Python pickles: pass {what}=\"pickle\" \
                     to decode them (only in a store that no untrusted process writes: \
                     unpickling runs code)"
                )))
            }
            _ => Codec::Bytes,
        })
    }

    /// Encodes `obj`; `TypeError` if it is not of the codec's type, `OverflowError` for an
    /// int out of the 64-bit range, `ValueError` for JSON it refuses (NaN), and
    /// `UnicodeEncodeError` for a str with lone surrogates. `what` is "key" or "value".
    #[inline(always)]
    pub fn encode<'a>(self, obj: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Enc<'a>> {
        // The usual case inline: a `bytes` object with the "bytes" codec. Under the
        // stable ABI, cast + as_bytes are three calls into Python (type flags, pointer,
        // length; ~45 instructions), this a pointer compare and one call.
        if self == Codec::Bytes && obj.is_exact_instance_of::<PyBytes>() {
            let mut p: *mut std::os::raw::c_char = std::ptr::null_mut();
            let mut n: pyo3::ffi::Py_ssize_t = 0;
            // SAFETY: `obj` is a bytes object (this cannot fail), and its buffer is
            // immutable and lives as long as `obj`, which the slice borrows.
            unsafe {
                if pyo3::ffi::PyBytes_AsStringAndSize(obj.as_ptr(), &mut p, &mut n) == 0 {
                    return Ok(Enc::Borrowed(std::slice::from_raw_parts(
                        p as *const u8,
                        n as usize,
                    )));
                }
            }
        }
        self.encode_any(obj, what)
    }

    fn encode_any<'a>(self, obj: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Enc<'a>> {
        let py = obj.py();
        match self {
            Codec::Bytes => {
                if let Ok(b) = obj.cast::<PyBytes>() {
                    Ok(Enc::Borrowed(b.as_bytes()))
                } else if let Ok(b) = obj.cast::<PyByteArray>() {
                    Ok(Enc::Owned(b.to_vec()))
                } else if obj.is_instance_of::<PyMemoryView>() {
                    let b = obj.call_method0("tobytes")?;
                    Ok(Enc::Owned(b.cast::<PyBytes>()?.as_bytes().to_vec()))
                } else {
                    Err(PyTypeError::new_err(format!(
                        "{what} must be bytes, bytearray or memoryview for codec 'bytes', not {}",
                        type_name(obj)
                    )))
                }
            }
            Codec::Str => match obj.cast::<PyString>() {
                Ok(s) => Ok(match s.to_cow()? {
                    std::borrow::Cow::Borrowed(s) => Enc::Borrowed(s.as_bytes()),
                    std::borrow::Cow::Owned(s) => Enc::Owned(s.into_bytes()),
                }),
                Err(_) => Err(PyTypeError::new_err(format!(
                    "{what} must be str for codec 'str', not {}",
                    type_name(obj)
                ))),
            },
            Codec::Int => {
                // Exact ints (and bool, an int); objects with __index__ too (numpy ints), but
                // not floats or str.
                if !obj.is_instance_of::<PyInt>() && !obj.hasattr("__index__")? {
                    return Err(PyTypeError::new_err(format!(
                        "{what} must be int for codec 'int', not {}",
                        type_name(obj)
                    )));
                }
                let v: i64 = obj.extract().map_err(|e: PyErr| {
                    if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(py) {
                        pyo3::exceptions::PyOverflowError::new_err(format!(
                            "{what} out of range for codec 'int' (64-bit signed): {}",
                            obj.repr().map(|r| r.to_string()).unwrap_or_default()
                        ))
                    } else {
                        e
                    }
                })?;
                Ok(Enc::Word(v.to_le_bytes()))
            }
            Codec::Uint => {
                if !obj.is_instance_of::<PyInt>() && !obj.hasattr("__index__")? {
                    return Err(PyTypeError::new_err(format!(
                        "{what} must be int for codec 'uint', not {}",
                        type_name(obj)
                    )));
                }
                let v: u64 = obj.extract().map_err(|e: PyErr| {
                    if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(py) {
                        pyo3::exceptions::PyOverflowError::new_err(format!(
                            "{what} out of range for codec 'uint' (64-bit unsigned): {}",
                            obj.repr().map(|r| r.to_string()).unwrap_or_default()
                        ))
                    } else {
                        e
                    }
                })?;
                Ok(Enc::Word(v.to_le_bytes()))
            }
            Codec::Float => {
                if !(obj.is_instance_of::<PyFloat>()
                    || obj.is_instance_of::<PyInt>()
                    || obj.hasattr("__float__")?)
                {
                    return Err(PyTypeError::new_err(format!(
                        "{what} must be float for codec 'float', not {}",
                        type_name(obj)
                    )));
                }
                let v: f64 = obj.extract()?;
                Ok(Enc::Word(v.to_le_bytes()))
            }
            Codec::Json => {
                let s = json_encode(py)?.call1((obj,))?;
                let s = s.cast_into::<PyString>()?;
                Ok(Enc::Owned(s.to_cow()?.into_owned().into_bytes()))
            }
            Codec::Pickle => {
                let dumps = cached(py, &PICKLE_DUMPS, "pickle", "dumps")?;
                let b = dumps.bind(py).call1((obj, 5))?;
                Ok(Enc::Owned(b.cast::<PyBytes>()?.as_bytes().to_vec()))
            }
        }
    }

    /// Decodes stored bytes; `shoal.DecodeError` when they are not valid for the codec.
    #[inline(always)]
    pub fn decode<'py>(self, py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyAny>> {
        if self == Codec::Bytes {
            return Ok(PyBytes::new(py, data).into_any());
        }
        self.decode_any(py, data)
    }

    fn decode_any<'py>(self, py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Codec::Bytes => Ok(PyBytes::new(py, data).into_any()),
            Codec::Str => match std::str::from_utf8(data) {
                Ok(s) => Ok(PyString::new(py, s).into_any()),
                Err(e) => Err(exc(
                    py,
                    "DecodeError",
                    format!("stored bytes are not UTF-8 (codec 'str'): {e}"),
                )),
            },
            Codec::Int => match <[u8; 8]>::try_from(data) {
                Ok(w) => Ok(i64::from_le_bytes(w).into_pyobject(py)?.into_any()),
                Err(_) => Err(exc(
                    py,
                    "DecodeError",
                    format!(
                        "stored value has {} bytes; codec 'int' needs exactly 8",
                        data.len()
                    ),
                )),
            },
            Codec::Uint => match <[u8; 8]>::try_from(data) {
                Ok(w) => Ok(u64::from_le_bytes(w).into_pyobject(py)?.into_any()),
                Err(_) => Err(exc(
                    py,
                    "DecodeError",
                    format!(
                        "stored value has {} bytes; codec 'uint' needs exactly 8",
                        data.len()
                    ),
                )),
            },
            Codec::Float => match <[u8; 8]>::try_from(data) {
                Ok(w) => Ok(PyFloat::new(py, f64::from_le_bytes(w)).into_any()),
                Err(_) => Err(exc(
                    py,
                    "DecodeError",
                    format!(
                        "stored value has {} bytes; codec 'float' needs exactly 8",
                        data.len()
                    ),
                )),
            },
            Codec::Json => {
                let loads = cached(py, &JSON_LOADS, "json", "loads")?;
                loads
                    .bind(py)
                    .call1((PyBytes::new(py, data),))
                    .map_err(|e| exc(py, "DecodeError", format!("stored bytes are not JSON: {e}")))
            }
            Codec::Pickle => {
                let loads = cached(py, &PICKLE_LOADS, "pickle", "loads")?;
                loads.bind(py).call1((PyBytes::new(py, data),))
            }
        }
    }
}

/// A type by its name ("bytes", "utf8", "i64", "u64", "f64", "json", "user:0xTAG"), as
/// `Map.key_type` gives it; `ValueError` for another.
pub fn data_type_named(s: &str) -> PyResult<shoal::DataType> {
    s.parse().map_err(PyValueError::new_err)
}
