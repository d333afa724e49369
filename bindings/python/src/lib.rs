//! The native part of the `shoal` Python package (`shoal._shoal`). The package's
//! `__init__.py` re-exports everything public; see `python/shoal/__init__.pyi` for the API.

use pyo3::prelude::*;

mod codec;
mod errors;
mod fixed;
mod handle;
mod log;
mod map;
mod ops;
mod ordered;
mod queue;
mod store;

/// Native core of the `shoal` package: Store, Map, open(), remove().
#[pymodule]
fn _shoal(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<store::Store>()?;
    m.add_class::<store::CheckReport>()?;
    m.add_class::<store::Batch>()?;
    m.add_class::<map::Map>()?;
    m.add_class::<map::MapIter>()?;
    m.add_class::<fixed::FixedMapNative>()?;
    m.add_class::<fixed::FixedIterNative>()?;
    m.add_class::<ordered::OrderedNative>()?;
    m.add_class::<ordered::OrderedSnapshotNative>()?;
    m.add_class::<ordered::OrderedIter>()?;
    m.add_class::<ordered::OrderedCursorNative>()?;
    m.add_class::<ordered::OrderedTxnCursorNative>()?;
    m.add_class::<ordered::OrderedTxnNative>()?;
    m.add_class::<queue::QueueSet>()?;
    m.add_class::<queue::Element>()?;
    m.add_class::<queue::QueueIter>()?;
    m.add_class::<log::Log>()?;
    m.add_class::<log::LogReader>()?;
    m.add_class::<log::LogRecord>()?;
    m.add_class::<log::LogFollow>()?;
    m.add_function(wrap_pyfunction!(store::open, m)?)?;
    m.add_function(wrap_pyfunction!(store::remove, m)?)?;
    m.add_function(wrap_pyfunction!(store::backup_idle, m)?)?;
    m.add_function(wrap_pyfunction!(store::repair, m)?)?;
    m.add_function(wrap_pyfunction!(store::resolve_path, m)?)?;
    m.add("FORMAT_VERSION", shoal::FORMAT_VERSION)?;
    m.add("MAX_KEY_LEN", shoal::MAX_KEY_LEN)?;
    m.add("MAX_VALUE_LEN", shoal::MAX_VALUE_LEN)?;
    m.add("CODECS", codec::NAMES.to_vec())?;
    Ok(())
}
