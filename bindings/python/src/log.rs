//! `shoal.Log`, `shoal.LogReader` and `shoal.LogRecord`: the store's shared logs from
//! Python. `shoal.LogHandler` (a `logging.Handler` writing to a log) is Python, in
//! `shoal/_log.py`.
//!
//! Messages and fields are copied into owned bytes before an append, so that the GIL can
//! be released around it (an append under the wait policy may wait for room); a reader's
//! waits release the GIL too, in steps of 100 ms so that Ctrl-C is honoured.

use crate::errors::ResultExt;
use pyo3::exceptions::{PyStopIteration, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The longest a waiting call keeps the GIL released before it checks for signals.
const STEP: Duration = Duration::from_millis(100);

/// `obj` (str, encoded as UTF-8, or a bytes-like object) as bytes.
fn bytes_of(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u8>> {
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(s.to_cow()?.into_owned().into_bytes());
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if obj.is_instance_of::<pyo3::types::PyByteArray>()
        || obj.is_instance_of::<pyo3::types::PyMemoryView>()
    {
        let b = obj.py().get_type::<PyBytes>().call1((obj,))?;
        return Ok(b.cast::<PyBytes>()?.as_bytes().to_vec());
    }
    Err(PyTypeError::new_err(format!(
        "{what} must be str or bytes, not {}",
        obj.get_type().name()?
    )))
}

/// The fields argument of an append: a mapping, or an iterable of (key, value) pairs
/// (which may repeat a key); keys and values str or bytes.
fn fields_of(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<(Vec<u8>, Vec<u8>)>> {
    let Some(obj) = obj else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    if let Ok(d) = obj.cast::<PyDict>() {
        for (k, v) in d.iter() {
            out.push((bytes_of(&k, "a field key")?, bytes_of(&v, "a field value")?));
        }
        return Ok(out);
    }
    let items = if obj.hasattr("items")? {
        obj.call_method0("items")?
    } else {
        obj.clone()
    };
    for pair in items.try_iter()? {
        let pair = pair?;
        let (k, v): (Bound<'_, PyAny>, Bound<'_, PyAny>) = pair.extract().map_err(|_| {
            PyTypeError::new_err("fields must be a mapping or an iterable of (key, value) pairs")
        })?;
        out.push((bytes_of(&k, "a field key")?, bytes_of(&v, "a field value")?));
    }
    Ok(out)
}

fn policy_name(p: shoal::FullPolicy) -> &'static str {
    match p {
        shoal::FullPolicy::Overwrite => "overwrite",
        shoal::FullPolicy::Wait => "wait",
        shoal::FullPolicy::Drop => "drop",
    }
}

/// Seconds as a Duration: `what` must be a non-negative number.
fn secs(what: &str, v: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(v).map_err(|_| {
        crate::errors::invalid(&format!(
            "{what} must be a non-negative number of seconds, not {v}"
        ))
    })
}

/// A shared log of the store (`store.log(...)`): a ring of records that every thread of
/// every process may append to without a lock, drained in order by named readers.
/// Safe to share between threads.
#[pyclass(module = "shoal", name = "Log", frozen)]
pub struct Log {
    log: shoal::Log,
    path: PathBuf,
    lock_timeout: f64,
}

/// Opens the log `name` of `store`, creating it when `slots` and `max_record` are given
/// and there is none.
#[allow(clippy::too_many_arguments)]
pub fn open(
    py: Python<'_>,
    store: &shoal::Store,
    lock_timeout: f64,
    name: &str,
    slots: Option<u64>,
    max_record: Option<usize>,
    policy: &str,
    readers: usize,
) -> PyResult<Log> {
    let log = match (slots, max_record) {
        (Some(slots), Some(max_record)) => {
            let policy = match policy {
                "overwrite" => shoal::FullPolicy::Overwrite,
                "wait" => shoal::FullPolicy::Wait,
                "drop" => shoal::FullPolicy::Drop,
                p => {
                    return Err(crate::errors::invalid(&format!(
                        "policy {p:?}: \"overwrite\", \"wait\" or \"drop\""
                    )))
                }
            };
            let o = shoal::LogOptions::new(slots, max_record)
                .policy(policy)
                .readers(readers);
            py.detach(|| store.log(name, &o))
        }
        (None, None) => py.detach(|| store.open_log(name)),
        _ => {
            return Err(crate::errors::invalid(
                "give both slots and max_record (to create the log), or neither",
            ))
        }
    }
    .py_err(py)?;
    Ok(Log {
        log,
        path: store.path().to_owned(),
        lock_timeout,
    })
}

#[pymethods]
impl Log {
    /// The log's name.
    #[getter]
    fn name(&self) -> &str {
        self.log.name()
    }

    /// Records the ring holds.
    #[getter]
    fn slots(&self) -> u64 {
        self.log.slots()
    }

    /// The largest record in bytes: its message, and per field its key, its value and 8
    /// bytes.
    #[getter]
    fn max_record(&self) -> usize {
        self.log.max_record()
    }

    /// What an append does when the ring is full: "overwrite", "wait" or "drop".
    #[getter]
    fn policy(&self) -> &'static str {
        policy_name(self.log.policy())
    }

    /// append(message, level=6, fields=None, timeout=None) -> int | None
    ///
    /// Appends a record: `message` (str, stored as UTF-8, or bytes), `level` (0 to 255;
    /// see `shoal.LogLevel`), `fields` (a mapping or an iterable of (key, value) pairs,
    /// keys and values str or bytes). Returns its sequence number, or None if the ring was
    /// full and the log drops. Under the wait policy it waits up to `timeout` seconds
    /// (None: the store's lock timeout) for room, with the GIL released, then raises
    /// `shoal.Timeout`. A record larger than `max_record` raises `shoal.InvalidArgument`
    /// and appends nothing.
    #[pyo3(signature = (message, level = 6, fields = None, timeout = None))]
    fn append(
        &self,
        py: Python<'_>,
        message: &Bound<'_, PyAny>,
        level: u8,
        fields: Option<&Bound<'_, PyAny>>,
        timeout: Option<f64>,
    ) -> PyResult<Option<u64>> {
        let msg = bytes_of(message, "message")?;
        let fs = fields_of(fields)?;
        let timeout = secs("timeout", timeout.unwrap_or(self.lock_timeout))?;
        py.detach(|| {
            let refs: Vec<(&[u8], &[u8])> = fs
                .iter()
                .map(|(k, v)| (k.as_slice(), v.as_slice()))
                .collect();
            self.log.append_timeout(level, &msg, &refs, timeout)
        })
        .py_err(py)
    }

    /// reader(name) -> LogReader
    ///
    /// The reader `name`, created if the log has none by that name: a cursor kept in the
    /// store file, so a reader opened again under the same name (by a restarted process)
    /// resumes where the last one stopped. A new reader starts at the oldest record the
    /// ring holds. Handles on one reader (in any process) share its cursor: each record
    /// goes to one of them. `shoal.StoreFull` if the log has its maximum of readers.
    fn reader(&self, py: Python<'_>, name: &str) -> PyResult<LogReader> {
        let r = py.detach(|| self.log.reader(name)).py_err(py)?;
        Ok(LogReader {
            name: name.to_owned(),
            r: Mutex::new(r),
        })
    }

    /// remove_reader(name) -> bool
    ///
    /// Forgets the reader `name` and its cursor (writers under the wait and drop policies
    /// no longer wait for it); returns whether it existed.
    fn remove_reader(&self, py: Python<'_>, name: &str) -> PyResult<bool> {
        py.detach(|| self.log.remove_reader(name)).py_err(py)
    }

    /// stats() -> dict
    ///
    /// Figures of the log: "appended" (sequence numbers given out), "dropped" (records the
    /// drop policy dropped), "holes" (records whose writer died before publishing them),
    /// and "readers": a list of dicts, one per reader, with "name", "position" (the next
    /// sequence number it reads), "missed" (records overwritten before it read them) and
    /// "skipped" (holes it passed).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.log.stats().py_err(py)?;
        let d = PyDict::new(py);
        d.set_item("appended", s.appended)?;
        d.set_item("dropped", s.dropped)?;
        d.set_item("holes", s.holes)?;
        let rs = PyList::empty(py);
        for r in s.readers {
            let e = PyDict::new(py);
            e.set_item("name", r.name)?;
            e.set_item("position", r.position)?;
            e.set_item("missed", r.missed)?;
            e.set_item("skipped", r.skipped)?;
            rs.append(e)?;
        }
        d.set_item("readers", rs)?;
        Ok(d)
    }

    /// Pickles to (store path, name): unpickling opens the existing log again, so a Log
    /// can be passed to spawn and forkserver children.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let f = py.import("shoal")?.getattr("_reopen_log")?;
        let args = (
            self.path.display().to_string(),
            self.log.name().to_owned(),
            self.lock_timeout,
        )
            .into_pyobject(py)?;
        PyTuple::new(py, [f, args.into_any()])
    }

    fn __repr__(&self) -> String {
        format!(
            "<shoal.Log {:?}: {} slots of {} bytes, {}>",
            self.log.name(),
            self.log.slots(),
            self.log.max_record(),
            self.policy()
        )
    }
}

/// One record of a log, as a reader read it.
#[pyclass(module = "shoal", name = "LogRecord", frozen)]
pub struct LogRecord {
    rec: shoal::Record,
}

#[pymethods]
impl LogRecord {
    /// Its sequence number: records are numbered from 0 in the order their writers
    /// reserved them, the order readers read them in.
    #[getter]
    fn seq(&self) -> u64 {
        self.rec.seq()
    }

    /// When it was appended, in nanoseconds since the Unix epoch.
    #[getter]
    fn time_ns(&self) -> u64 {
        self.rec.time_ns()
    }

    /// When it was appended, in seconds since the Unix epoch (as `time.time()`).
    #[getter]
    fn time(&self) -> f64 {
        self.rec.time_ns() as f64 / 1e9
    }

    /// Its writer's process id.
    #[getter]
    fn pid(&self) -> u32 {
        self.rec.pid()
    }

    /// Its writer's thread id (Linux `gettid`, as `threading.get_native_id()`).
    #[getter]
    fn tid(&self) -> u32 {
        self.rec.tid()
    }

    /// Its level, as its writer gave it.
    #[getter]
    fn level(&self) -> u8 {
        self.rec.level()
    }

    /// Its message, as bytes.
    #[getter]
    fn message<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.rec.message())
    }

    /// Its message decoded as UTF-8 (bytes that are not UTF-8 replaced by U+FFFD).
    #[getter]
    fn text(&self) -> String {
        String::from_utf8_lossy(self.rec.message()).into_owned()
    }

    /// Its fields: (key, value) pairs of bytes, in the writer's order.
    #[getter]
    fn fields<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let l = PyList::empty(py);
        for (k, v) in self.rec.fields() {
            l.append((PyBytes::new(py, k), PyBytes::new(py, v)))?;
        }
        Ok(l)
    }

    /// field(key, default=None) -> bytes | None
    ///
    /// The value of the first field named `key` (str or bytes), or `default`.
    #[pyo3(signature = (key, default = None))]
    fn field<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let k = bytes_of(key, "key")?;
        Ok(match self.rec.fields().iter().find(|(fk, _)| *fk == k) {
            Some((_, v)) => Some(PyBytes::new(py, v).into_any()),
            None => default,
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "<shoal.LogRecord {} level {} pid {} tid {}: {:?}>",
            self.rec.seq(),
            self.rec.level(),
            self.rec.pid(),
            self.rec.tid(),
            String::from_utf8_lossy(self.rec.message())
        )
    }
}

/// A named reader of a log (`Log.reader`): reads its records in sequence order, each
/// once, from a cursor kept in the store file. Iterating over it yields the records
/// published so far and stops; `follow()` waits for more. Safe to share between
/// threads (one reads at a time).
#[pyclass(module = "shoal", name = "LogReader", frozen)]
pub struct LogReader {
    name: String,
    r: Mutex<shoal::LogReader>,
}

impl LogReader {
    fn lock(&self) -> std::sync::MutexGuard<'_, shoal::LogReader> {
        // A panic cannot leave the reader half changed: its state is in the file.
        self.r.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the reader: at once if no other thread has it, else with the GIL
    /// released while this thread waits for it (another thread's `read_wait` may hold it
    /// for up to a step, and the interpreter must not stall meanwhile).
    fn with<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut shoal::LogReader) -> R + Send,
    ) -> R {
        match self.r.try_lock() {
            Ok(mut r) => f(&mut r),
            Err(_) => py.detach(|| f(&mut self.lock())),
        }
    }

    /// The next record, waiting up to `timeout` (None: for ever) with the GIL released,
    /// in steps that let Ctrl-C through.
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<LogRecord>> {
        // A timeout past what an Instant can hold is for ever.
        let until = match timeout {
            Some(t) => Instant::now().checked_add(secs("timeout", t)?),
            None => None,
        };
        loop {
            let step = match until {
                Some(u) => u.saturating_duration_since(Instant::now()).min(STEP),
                None => STEP,
            };
            let got = py
                .detach(|| {
                    let mut r = self.lock();
                    if step.is_zero() {
                        r.read()
                    } else {
                        r.read_wait(step)
                    }
                })
                .py_err(py)?;
            if let Some(rec) = got {
                return Ok(Some(LogRecord { rec }));
            }
            if until.is_some_and(|u| Instant::now() >= u) {
                return Ok(None);
            }
            py.check_signals()?;
        }
    }
}

#[pymethods]
impl LogReader {
    /// The reader's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// read() -> LogRecord | None
    ///
    /// The next record, or None at once if every record reserved so far was read (or the
    /// next one is still being written). The cursor moves past a record as it is returned.
    fn read(&self, py: Python<'_>) -> PyResult<Option<LogRecord>> {
        let got = self.with(py, |r| r.read()).py_err(py)?;
        Ok(got.map(|rec| LogRecord { rec }))
    }

    /// read_wait(timeout=None) -> LogRecord | None
    ///
    /// The next record, waiting up to `timeout` seconds (None: for ever) for a writer to
    /// publish one, with the GIL released while it waits; None if none came.
    #[pyo3(signature = (timeout = None))]
    fn read_wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<LogRecord>> {
        self.wait(py, timeout)
    }

    /// read_many(max=256) -> list[LogRecord]
    ///
    /// Up to `max` records published in a row from the cursor, read in one step; an
    /// empty list if there is none yet.
    #[pyo3(signature = (max = 256))]
    fn read_many(&self, py: Python<'_>, max: usize) -> PyResult<Vec<LogRecord>> {
        let mut batch = shoal::RecordBatch::new();
        self.with(py, |r| r.read_batch(&mut batch, max.max(1)))
            .py_err(py)?;
        Ok(batch
            .iter()
            .map(|r| LogRecord { rec: r.to_record() })
            .collect())
    }

    /// follow(timeout=None) -> iterator of LogRecord
    ///
    /// Reads for as long as records come, waiting up to `timeout` seconds for each (None:
    /// for ever), with the GIL released while it waits.
    #[pyo3(signature = (timeout = None))]
    fn follow(slf: Py<Self>, timeout: Option<f64>) -> LogFollow {
        LogFollow {
            reader: slf,
            timeout,
        }
    }

    /// The next sequence number this reader reads.
    #[getter]
    fn position(&self, py: Python<'_>) -> u64 {
        self.with(py, |r| r.position())
    }

    /// Records overwritten before this reader (under its name) read them.
    #[getter]
    fn missed(&self, py: Python<'_>) -> u64 {
        self.with(py, |r| r.missed())
    }

    /// Holes this reader (under its name) passed: records whose writer died before
    /// publishing them.
    #[getter]
    fn skipped(&self, py: Python<'_>) -> u64 {
        self.with(py, |r| r.skipped())
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<LogRecord> {
        match self.read(py)? {
            Some(r) => Ok(r),
            None => Err(PyStopIteration::new_err(())),
        }
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let (log, at) = self.with(py, |r| (r.log().name().to_owned(), r.position()));
        format!(
            "<shoal.LogReader {:?} of log {:?} at {}>",
            self.name, log, at
        )
    }
}

/// The iterator of `LogReader.follow`.
#[pyclass(module = "shoal", name = "LogFollow")]
pub struct LogFollow {
    reader: Py<LogReader>,
    timeout: Option<f64>,
}

#[pymethods]
impl LogFollow {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<LogRecord> {
        match self.reader.get().wait(py, self.timeout)? {
            Some(r) => Ok(r),
            None => Err(PyStopIteration::new_err(())),
        }
    }
}
