//! A `log` backend that appends every record to a log.

use crate::append::append_fitted;
use crate::level;
use shoal::Log;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A [`log::Log`] backend that appends each record to a log: its level (as
/// [`crate::level`] numbers them: Error 3, Warn 4, Info 6, Debug 7, Trace 8), its
/// formatted message, and as fields `target` (the record's target) then its key/values
/// (`log`'s `kv`) in their order, as their `Display` prints them. A record too large for
/// the log is cut to fit, with a field `truncated` giving how many bytes were cut.
///
/// An append that fails (a log of the wait policy full past the timeout, a dropped log)
/// is counted ([`ShoalLogger::failed`]).
///
/// ```
/// # let d = tempfile::tempdir().unwrap();
/// let store = shoal::Store::open(d.path().join("l.shoal"))?;
/// let log = store.log("app", &shoal::LogOptions::new(1024, 512))?;
/// let logger = shoal_log::ShoalLogger::new(log.clone(), log::LevelFilter::Info);
/// log::Log::log(
///     &logger,
///     &log::Record::builder()
///         .level(log::Level::Warn)
///         .target("app::db")
///         .args(format_args!("slow query: {} ms", 250))
///         .build(),
/// );
/// // Installed as the process's logger, `log::warn!(...)` goes the same way:
/// // logger.install().expect("no other logger");
/// let r = log.reader("doc")?.read()?.expect("a record");
/// assert_eq!((r.level(), r.message()), (shoal_log::level::WARNING, &b"slow query: 250 ms"[..]));
/// assert_eq!(r.fields()[0], (b"target".to_vec(), b"app::db".to_vec()));
/// # Ok::<(), shoal::Error>(())
/// ```
#[derive(Debug)]
pub struct ShoalLogger {
    log: Log,
    max_level: log::LevelFilter,
    timeout: Option<Duration>,
    failed: AtomicU64,
}

impl ShoalLogger {
    /// A backend appending to `log` the records of `max_level` and more severe ones,
    /// waiting for room (under the wait policy) at most the store's lock timeout.
    pub fn new(log: Log, max_level: log::LevelFilter) -> ShoalLogger {
        ShoalLogger {
            log,
            max_level,
            timeout: None,
            failed: AtomicU64::new(0),
        }
    }

    /// How long an append to a log of the wait policy waits for room.
    pub fn with_timeout(mut self, timeout: Duration) -> ShoalLogger {
        self.timeout = Some(timeout);
        self
    }

    /// Records whose append failed.
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    /// Makes this the process's logger (`log::set_logger`, for the rest of the process's
    /// life) and sets `log`'s maximum level to this one's; the logger it installed, for
    /// its [`ShoalLogger::failed`] count. Fails if a logger was installed already.
    pub fn install(self) -> Result<&'static ShoalLogger, log::SetLoggerError> {
        let max = self.max_level;
        let me: &'static ShoalLogger = Box::leak(Box::new(self));
        log::set_logger(me)?;
        log::set_max_level(max);
        Ok(me)
    }
}

/// The log level of a `log` level.
pub fn level_of(l: log::Level) -> u8 {
    match l {
        log::Level::Error => level::ERROR,
        log::Level::Warn => level::WARNING,
        log::Level::Info => level::INFO,
        log::Level::Debug => level::DEBUG,
        log::Level::Trace => level::TRACE,
    }
}

struct Pairs(Vec<(String, String)>);

impl<'kvs> log::kv::VisitSource<'kvs> for Pairs {
    fn visit_pair(
        &mut self,
        key: log::kv::Key<'kvs>,
        value: log::kv::Value<'kvs>,
    ) -> Result<(), log::kv::Error> {
        self.0.push((key.as_str().to_string(), value.to_string()));
        Ok(())
    }
}

impl log::Log for ShoalLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= self.max_level
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let mut owned = String::new();
        let message = match record.args().as_str() {
            Some(s) => s,
            None => {
                let _ = write!(owned, "{}", record.args());
                &owned
            }
        };
        let mut kv = Pairs(Vec::new());
        // Our visitor never fails; a source that does leaves the pairs it gave.
        let _ = record.key_values().visit(&mut kv);
        let mut fields: Vec<(&[u8], &[u8])> = Vec::with_capacity(kv.0.len() + 1);
        fields.push((b"target", record.target().as_bytes()));
        fields.extend(kv.0.iter().map(|(k, v)| (k.as_bytes(), v.as_bytes())));
        let lvl = level_of(record.level());
        if append_fitted(&self.log, lvl, message.as_bytes(), &fields, self.timeout).is_err() {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn flush(&self) {}
}
