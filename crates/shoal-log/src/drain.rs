//! The drainer: a thread of this process that reads a log through a named reader and
//! writes its records to a [`Sink`] (a file rotated by size, stderr, or a callback).

use crate::format::Format;
use shoal::{Log, LogReader, RecordBatch, RecordRef};
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Why a drainer could not start, or stopped.
#[derive(Debug)]
#[non_exhaustive]
pub enum DrainError {
    /// The log failed: its reader could not be opened, or a read failed (the log was
    /// dropped, the store is damaged, ...).
    Log(shoal::Error),
    /// The sink failed: its file could not be opened, written or rotated.
    Io(io::Error),
    /// The sink panicked (a callback); the drainer thread stopped there.
    Panicked(String),
}

impl std::fmt::Display for DrainError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DrainError::Log(e) => write!(f, "reading the log: {e}"),
            DrainError::Io(e) => write!(f, "writing the records: {e}"),
            DrainError::Panicked(m) => write!(f, "the sink panicked: {m}"),
        }
    }
}

impl std::error::Error for DrainError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DrainError::Log(e) => Some(e),
            DrainError::Io(e) => Some(e),
            DrainError::Panicked(_) => None,
        }
    }
}

impl From<shoal::Error> for DrainError {
    fn from(e: shoal::Error) -> DrainError {
        DrainError::Log(e)
    }
}

impl From<io::Error> for DrainError {
    fn from(e: io::Error) -> DrainError {
        DrainError::Io(e)
    }
}

/// Where a drainer writes the records it reads.
///
/// The drainer calls [`Sink::write`] with each batch it read, in sequence order, and
/// [`Sink::flush`] whenever it has caught up with the log (and when it stops), so that a
/// sink may buffer while the log is busy. An error stops the drainer.
pub trait Sink: Send + 'static {
    /// Writes a batch of records (at least one).
    fn write(&mut self, batch: &RecordBatch) -> io::Result<()>;
    /// Writes out what is buffered.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A file, one line a record, rotated by size: before a line would take the file past
/// `rotate_bytes`, the file is renamed `NAME.1` (an older `NAME.1` becoming `NAME.2`, and
/// so on up to `NAME.KEEP`, the oldest beyond it deleted) and a new `NAME` is started. A
/// line is never split between files, so a single line longer than `rotate_bytes` makes
/// a file of its own.
///
/// An existing file is appended to (its size counts). One drainer per file: two sinks
/// rotating the same file would rename it under each other.
#[derive(Debug)]
pub struct FileSink {
    path: PathBuf,
    format: Format,
    rotate_bytes: u64,
    keep: usize,
    file: BufWriter<File>,
    size: u64,
    rotations: u64,
    line: String,
}

impl FileSink {
    /// Opens (creates, or appends to) `path` for lines of `format`, rotated past
    /// `rotate_bytes` (0: never) keeping `keep` rotated files (0: a full file is
    /// truncated and started again).
    pub fn open(
        path: impl AsRef<Path>,
        format: Format,
        rotate_bytes: u64,
        keep: usize,
    ) -> io::Result<FileSink> {
        let path = path.as_ref().to_path_buf();
        let file = open_append(&path)?;
        let size = file.metadata()?.len();
        Ok(FileSink {
            path,
            format,
            rotate_bytes,
            keep,
            file: BufWriter::with_capacity(64 << 10, file),
            size,
            rotations: 0,
            line: String::new(),
        })
    }

    /// The path of rotated file `i` (1 is the newest): the file's name with `.i` added.
    pub fn rotated_path(&self, i: usize) -> PathBuf {
        rotated(&self.path, i)
    }

    /// How many times this sink rotated its file.
    pub fn rotations(&self) -> u64 {
        self.rotations
    }

    fn rotate(&mut self) -> io::Result<()> {
        self.file.flush()?;
        if self.keep == 0 {
            self.file = BufWriter::with_capacity(64 << 10, File::create(&self.path)?);
        } else {
            for i in (1..self.keep).rev() {
                match std::fs::rename(rotated(&self.path, i), rotated(&self.path, i + 1)) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                    _ => {}
                }
            }
            std::fs::rename(&self.path, rotated(&self.path, 1))?;
            self.file = BufWriter::with_capacity(64 << 10, open_append(&self.path)?);
        }
        self.size = 0;
        self.rotations += 1;
        Ok(())
    }
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

fn rotated(path: &Path, i: usize) -> PathBuf {
    let mut s = path.as_os_str().to_os_string();
    s.push(format!(".{i}"));
    PathBuf::from(s)
}

impl Sink for FileSink {
    fn write(&mut self, batch: &RecordBatch) -> io::Result<()> {
        for r in batch {
            self.line.clear();
            self.format.push_ref(&r, &mut self.line);
            self.line.push('\n');
            let n = self.line.len() as u64;
            if self.rotate_bytes > 0 && self.size > 0 && self.size + n > self.rotate_bytes {
                self.rotate()?;
            }
            self.file.write_all(self.line.as_bytes())?;
            self.size += n;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// Standard error, one line a record.
#[derive(Debug, Default)]
pub struct StderrSink {
    format: Format,
    buf: String,
}

impl StderrSink {
    /// Lines of `format` on standard error.
    pub fn new(format: Format) -> StderrSink {
        StderrSink {
            format,
            buf: String::new(),
        }
    }
}

impl Sink for StderrSink {
    fn write(&mut self, batch: &RecordBatch) -> io::Result<()> {
        self.buf.clear();
        for r in batch {
            self.format.push_ref(&r, &mut self.buf);
            self.buf.push('\n');
        }
        // One write a batch: lines of other threads' eprintln! never land inside one.
        io::stderr().lock().write_all(self.buf.as_bytes())
    }
}

/// A function called with each record, in sequence order, on the drainer's thread.
pub struct Callback<F>(pub F);

impl<F> std::fmt::Debug for Callback<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Callback")
    }
}

impl<F: for<'a> FnMut(RecordRef<'a>) + Send + 'static> Sink for Callback<F> {
    fn write(&mut self, batch: &RecordBatch) -> io::Result<()> {
        for r in batch {
            (self.0)(r);
        }
        Ok(())
    }
}

/// How a drainer reads: the name of its reader, how many records it reads at once, and
/// how long it sleeps before it looks at its stop flag.
///
/// ```
/// let o = shoal_log::DrainOptions::new().cursor("archive").batch(1024);
/// # let _ = o;
/// ```
#[derive(Clone, Debug)]
pub struct DrainOptions {
    cursor: String,
    batch: usize,
    poll: Duration,
}

impl Default for DrainOptions {
    fn default() -> DrainOptions {
        DrainOptions::new()
    }
}

impl DrainOptions {
    /// The reader `drain`, batches of up to 512 records, a stop noticed within 100 ms.
    pub fn new() -> DrainOptions {
        DrainOptions {
            cursor: "drain".into(),
            batch: 512,
            poll: Duration::from_millis(100),
        }
    }

    /// The name of the reader ([`Log::reader`]): its cursor is kept in the store file,
    /// so a drainer started again under the same name resumes where the last one stopped.
    pub fn cursor(mut self, name: &str) -> DrainOptions {
        self.cursor = name.into();
        self
    }

    /// The most records read (and handed to the sink) at once; at least 1.
    pub fn batch(mut self, records: usize) -> DrainOptions {
        self.batch = records.max(1);
        self
    }

    /// The longest the drainer sleeps waiting for a record before it looks at its stop
    /// flag: how long [`Drainer::stop`] may wait for it (a writer's record wakes it at
    /// once).
    pub fn poll(mut self, poll: Duration) -> DrainOptions {
        self.poll = poll.max(Duration::from_millis(1));
        self
    }
}

/// What a drainer did ([`Drainer::stop`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DrainStats {
    /// Records handed to the sink by this drainer.
    pub records: u64,
    /// Records its reader (under its name, since it was created) missed: overwritten
    /// before it read them.
    pub missed: u64,
    /// Holes its reader (under its name, since it was created) passed: records whose
    /// writer died before publishing them.
    pub skipped: u64,
}

/// A thread of this process draining a log into a [`Sink`]: started by one call, the
/// way SharedHashFile's shared log works (one process drains, every process writes).
///
/// It reads through a named reader ([`DrainOptions::cursor`]) whose cursor lives in the
/// store file, sleeping on the log's futex while there is nothing to read (a writer's
/// record wakes it). [`Drainer::stop`], or dropping it, stops it cleanly: it writes every
/// record published by then, flushes its sink and returns; the cursor is past the last
/// record written, so a drainer started again under the same name resumes there.
///
/// The cursor moves as records are read, before they are written: a process killed
/// between the two loses those records (each record is written at most once).
///
/// ```
/// # let d = tempfile::tempdir().unwrap();
/// # let path = d.path().join("app.log");
/// let store = shoal::Store::open(d.path().join("l.shoal"))?;
/// let log = store.log("app", &shoal::LogOptions::new(1024, 200))?;
/// // Every process writes; this one also drains, into app.log rotated past 1 MiB.
/// let drainer = shoal_log::Drainer::to_file(&log, &path, 1 << 20, 5)?;
/// log.append_fields(6, b"started", &[(b"port", b"8080")])?;
/// let stats = drainer.stop()?;
/// assert_eq!(stats.records, 1);
/// assert!(std::fs::read_to_string(&path)?.trim_end().ends_with(" 6 started port=8080"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Drainer {
    stop: Arc<AtomicBool>,
    records: Arc<AtomicU64>,
    thread: Option<JoinHandle<Result<DrainStats, DrainError>>>,
    log: String,
}

impl Drainer {
    /// Starts a drainer of `log` writing text lines to `path`, rotated past
    /// `rotate_bytes` (0: never) keeping `keep` rotated files ([`FileSink`]), through the
    /// reader `drain`.
    pub fn to_file(
        log: &Log,
        path: impl AsRef<Path>,
        rotate_bytes: u64,
        keep: usize,
    ) -> Result<Drainer, DrainError> {
        let sink = FileSink::open(path, Format::Text, rotate_bytes, keep)?;
        Drainer::start(log, &DrainOptions::new(), sink)
    }

    /// Starts a drainer of `log` writing text lines to standard error, through the reader
    /// `drain`.
    pub fn to_stderr(log: &Log) -> Result<Drainer, DrainError> {
        Drainer::start(log, &DrainOptions::new(), StderrSink::new(Format::Text))
    }

    /// Starts a drainer of `log` calling `f` with each record on its thread, through the
    /// reader `drain`.
    pub fn to_callback<F>(log: &Log, f: F) -> Result<Drainer, DrainError>
    where
        F: for<'a> FnMut(RecordRef<'a>) + Send + 'static,
    {
        Drainer::start(log, &DrainOptions::new(), Callback(f))
    }

    /// Starts a drainer of `log` into `sink`. The reader is opened (created if new) before
    /// this returns, so its errors (`StoreFull` when the log has its maximum of readers)
    /// come from here.
    pub fn start(log: &Log, opts: &DrainOptions, sink: impl Sink) -> Result<Drainer, DrainError> {
        let reader = log.reader(&opts.cursor)?;
        let stop = Arc::new(AtomicBool::new(false));
        let records = Arc::new(AtomicU64::new(0));
        let (s, n, o) = (stop.clone(), records.clone(), opts.clone());
        let thread = std::thread::Builder::new()
            .name(format!("shoal-drain-{}", log.name()))
            .spawn(move || run(reader, sink, &s, &n, &o))?;
        Ok(Drainer {
            stop,
            records,
            thread: Some(thread),
            log: log.name().to_string(),
        })
    }

    /// Records handed to the sink so far.
    pub fn records(&self) -> u64 {
        self.records.load(Ordering::Relaxed)
    }

    /// Whether the drainer thread has ended: only after an error (which [`Drainer::stop`]
    /// returns) while it was not asked to stop.
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Stops the drainer: it writes the records published by now, flushes its sink and
    /// ends; what it did, or the error that stopped it earlier.
    pub fn stop(mut self) -> Result<DrainStats, DrainError> {
        self.finish()
    }

    fn finish(&mut self) -> Result<DrainStats, DrainError> {
        self.stop.store(true, Ordering::Release);
        let Some(t) = self.thread.take() else {
            return Ok(DrainStats::default());
        };
        match t.join() {
            Ok(r) => r,
            Err(p) => {
                let m = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".into());
                Err(DrainError::Panicked(m))
            }
        }
    }
}

impl Drop for Drainer {
    fn drop(&mut self) {
        if let Err(e) = self.finish() {
            // Nobody is left to return the error to, and a drainer that stopped early
            // lost records: say so where a process's own troubles go.
            eprintln!("shoal-log: the drainer of log {:?} stopped: {e}", self.log);
        }
    }
}

fn run(
    mut reader: LogReader,
    mut sink: impl Sink,
    stop: &AtomicBool,
    records: &AtomicU64,
    o: &DrainOptions,
) -> Result<DrainStats, DrainError> {
    let mut batch = RecordBatch::new();
    let mut written = 0u64;
    while !stop.load(Ordering::Acquire) {
        let n = reader.read_batch_wait(&mut batch, o.batch, o.poll)?;
        if n > 0 {
            sink.write(&batch)?;
            written += n as u64;
            records.store(written, Ordering::Relaxed);
        }
        // Caught up: write out now, so readers of the sink see records within a wake of
        // their publication; while the log is busy the sink's buffer fills first.
        if n < o.batch {
            sink.flush()?;
        }
    }
    // What was published before the stop, and not more: busy writers must not keep a
    // stopping drainer going. A live writer's unpublished record ends it too (read
    // returns nothing then).
    let end = reader.log().stats()?.appended;
    while reader.position() < end {
        let n = reader.read_batch(&mut batch, o.batch)?;
        if n == 0 {
            break;
        }
        sink.write(&batch)?;
        written += n as u64;
        records.store(written, Ordering::Relaxed);
    }
    sink.flush()?;
    Ok(DrainStats {
        records: written,
        missed: reader.missed(),
        skipped: reader.skipped(),
    })
}
