//! Engine errors as Python exceptions. The exception classes are defined in Python
//! (`shoal/_errors.py`) so that they can also derive from the matching built-in
//! (`shoal.NotFound` is a `FileNotFoundError`, `shoal.Timeout` a `TimeoutError`, ...).

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyModule, PyType};

static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

// Linux errno values given to the OSError subclasses, so that `e.errno` is meaningful.
const ENOENT: i32 = 2;
const EACCES: i32 = 13;
const EEXIST: i32 = 17;
const ENOSPC: i32 = 28;
const EROFS: i32 = 30;
const ETIMEDOUT: i32 = 110;

fn class<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyType>> {
    let m = ERRORS.get_or_try_init(py, || py.import("shoal._errors").map(Bound::unbind))?;
    Ok(m.bind(py).getattr(name)?.cast_into::<PyType>()?)
}

/// `shoal.InvalidArgument` (a `ValueError`) with `msg`.
pub fn invalid(msg: &str) -> PyErr {
    Python::attach(|py| exc(py, "InvalidArgument", msg))
}

/// An exception of class `shoal.<name>` with one message argument.
pub fn exc(py: Python<'_>, name: &str, msg: impl Into<String>) -> PyErr {
    match class(py, name) {
        Ok(t) => PyErr::from_type(t, msg.into()),
        Err(e) => e,
    }
}

/// An exception of an OSError subclass `shoal.<name>`, with `errno` set.
fn os_exc(py: Python<'_>, name: &str, errno: i32, msg: String) -> PyErr {
    match class(py, name) {
        Ok(t) => PyErr::from_type(t, (errno, msg)),
        Err(e) => e,
    }
}

/// The message of an engine error in Python's words: where the engine's own text names a
/// Rust call (`Store::fixed_map`, `MapOptions::uids`, `Store::repair`), the Python call
/// that does it instead.
fn message(e: &shoal::Error) -> String {
    use shoal::{Error as E, MapKind};
    match e {
        E::WrongMapKind { name, found, .. } => match found {
            MapKind::Fixed {
                key_size,
                value_size,
            } => format!(
                "map {name:?} is a {found}: open it with \
                 store.fixed_map({name:?}, {key_size}, {value_size})"
            ),
            MapKind::Variable { .. } => {
                format!("map {name:?} is a {found}: open it with store.map({name:?})")
            }
            MapKind::QueueSet { .. } => {
                format!("{name:?} is a {found}, not a map: the Python API opens maps only")
            }
            MapKind::Ordered { .. } => {
                format!("map {name:?} is a {found}: open it with store.ordered_map({name:?})")
            }
            _ => e.to_string(),
        },
        E::NoUids { name } => format!(
            "map {name:?} has no UIDs (they are chosen when a map is created: \
             store.map({name:?}, uids=True))"
        ),
        E::NeedsRepair { path, what } => format!(
            "corrupt store {}: {what}; shoal.repair({:?}) drops the entries that cannot be \
             trusted",
            path.display(),
            path.display().to_string()
        ),
        e => e.to_string(),
    }
}

/// Converts an engine error into the matching `shoal.*` exception.
pub fn to_py(py: Python<'_>, e: shoal::Error) -> PyErr {
    use shoal::Error as E;
    let msg = message(&e);
    match e {
        E::NotFound(_) => os_exc(py, "NotFound", ENOENT, msg),
        E::AlreadyExists(_) => os_exc(py, "AlreadyExists", EEXIST, msg),
        E::StoreFull(_) => exc(py, "StoreFull", msg),
        E::NoSpace { .. } => os_exc(py, "NoSpace", ENOSPC, msg),
        E::Corrupt { .. } | E::NeedsRepair { .. } => exc(py, "Corrupt", msg),
        E::NotAStore { .. } => exc(py, "NotAStore", msg),
        E::VersionMismatch { .. } | E::UpgradeBlocked { .. } => exc(py, "VersionMismatch", msg),
        E::Permission { .. } => os_exc(py, "PermissionDenied", EACCES, msg),
        E::InvalidArgument(_) | E::WrongMapKind { .. } | E::NoUids { .. } => {
            exc(py, "InvalidArgument", msg)
        }
        E::Timeout(_) => os_exc(py, "Timeout", ETIMEDOUT, msg),
        E::TooManyUsers(_) => exc(py, "TooManyUsers", msg),
        E::StaleUid(_) => exc(py, "StaleUidError", msg),
        E::QueueFull(_) => exc(py, "QueueFull", msg),
        E::ReadOnly { .. } => os_exc(py, "ReadOnly", EROFS, msg),
        E::Io { ref source, .. } => os_exc(py, "IOError", source.raw_os_error().unwrap_or(0), msg),
        _ => exc(py, "Error", msg),
    }
}

/// `.py_err(py)` on engine results.
pub trait ResultExt<T> {
    /// Converts the engine error, if any, into a Python exception.
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> ResultExt<T> for shoal::Result<T> {
    #[inline]
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}

/// The error for any use of a closed store or of a map of a closed store.
pub fn closed(py: Python<'_>) -> PyErr {
    exc(py, "Closed", "operation on a closed shoal store")
}
