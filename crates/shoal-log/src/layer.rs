//! A `tracing_subscriber` layer that appends every event to a log.

use crate::append::append_fitted;
use crate::level;
use shoal::Log;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tracing_core::field::{Field, Visit};
use tracing_core::{Event, Level, LevelFilter, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

/// A [`tracing_subscriber::Layer`] that appends each event to a log: its level (as
/// [`crate::level`] numbers them: ERROR 3, WARN 4, INFO 6, DEBUG 7, TRACE 8), its
/// `message` field as the record's message, and as fields `target` (the event's target)
/// then the event's other fields in their order (strings and byte slices as they are,
/// numbers and booleans in decimal, other values as `Debug` prints them). A record too
/// large for the log is cut to fit, with a field `truncated` giving how many bytes were
/// cut.
///
/// Spans are not recorded: an event is written with its own fields. An append that fails
/// (a log of the wait policy full past the timeout, a dropped log) is counted
/// ([`ShoalLayer::failed`]); tracing has nobody to return it to. Clones share the count:
/// keep one to read it after handing the layer to a subscriber.
///
/// ```
/// use tracing_subscriber::layer::SubscriberExt;
/// # let d = tempfile::tempdir().unwrap();
/// let store = shoal::Store::open(d.path().join("l.shoal"))?;
/// let log = store.log("app", &shoal::LogOptions::new(1024, 512))?;
/// let subscriber = tracing_subscriber::registry().with(shoal_log::ShoalLayer::new(log.clone()));
/// tracing::subscriber::with_default(subscriber, || {
///     tracing::info!(user = "ann", n = 3, "logged in");
/// });
/// let r = log.reader("doc")?.read()?.expect("a record");
/// assert_eq!((r.level(), r.message()), (shoal_log::level::INFO, &b"logged in"[..]));
/// assert_eq!(r.fields()[1], (b"user".to_vec(), b"ann".to_vec()));
/// assert_eq!(r.fields()[2], (b"n".to_vec(), b"3".to_vec()));
/// # Ok::<(), shoal::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct ShoalLayer {
    log: Log,
    max_level: LevelFilter,
    timeout: Option<Duration>,
    failed: Arc<AtomicU64>,
}

impl ShoalLayer {
    /// A layer appending to `log` every event that reaches it, waiting for room (under
    /// the wait policy) at most the store's lock timeout.
    pub fn new(log: Log) -> ShoalLayer {
        ShoalLayer {
            log,
            max_level: LevelFilter::TRACE,
            timeout: None,
            failed: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Writes only events of `max_level` and more severe ones. This filters what this
    /// layer writes, not what other layers of the subscriber see.
    pub fn with_max_level(mut self, max_level: impl Into<LevelFilter>) -> ShoalLayer {
        self.max_level = max_level.into();
        self
    }

    /// How long an append to a log of the wait policy waits for room.
    pub fn with_timeout(mut self, timeout: Duration) -> ShoalLayer {
        self.timeout = Some(timeout);
        self
    }

    /// Events whose append failed (by this layer and its clones).
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    /// The log it appends to.
    pub fn log(&self) -> &Log {
        &self.log
    }
}

/// The log level of a tracing level.
pub fn level_of(l: &Level) -> u8 {
    match *l {
        Level::ERROR => level::ERROR,
        Level::WARN => level::WARNING,
        Level::INFO => level::INFO,
        Level::DEBUG => level::DEBUG,
        _ => level::TRACE,
    }
}

#[derive(Default)]
struct Fields {
    message: Vec<u8>,
    fields: Vec<(&'static str, Vec<u8>)>,
}

impl Fields {
    fn put(&mut self, field: &Field, value: Vec<u8>) {
        if field.name() == "message" {
            self.message = value;
        } else {
            self.fields.push((field.name(), value));
        }
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, value.as_bytes().to_vec());
    }
    fn record_bytes(&mut self, field: &Field, value: &[u8]) {
        self.put(field, value.to_vec());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, value.to_string().into_bytes());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, value.to_string().into_bytes());
    }
    fn record_i128(&mut self, field: &Field, value: i128) {
        self.put(field, value.to_string().into_bytes());
    }
    fn record_u128(&mut self, field: &Field, value: u128) {
        self.put(field, value.to_string().into_bytes());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, value.to_string().into_bytes());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, value.to_string().into_bytes());
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, value.to_string().into_bytes());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let mut s = String::new();
        let _ = write!(s, "{value:?}");
        self.put(field, s.into_bytes());
    }
}

impl<S: Subscriber> Layer<S> for ShoalLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        if *meta.level() > self.max_level {
            return;
        }
        let mut v = Fields::default();
        event.record(&mut v);
        let mut fields: Vec<(&[u8], &[u8])> = Vec::with_capacity(v.fields.len() + 1);
        fields.push((b"target", meta.target().as_bytes()));
        fields.extend(v.fields.iter().map(|(k, val)| (k.as_bytes(), &val[..])));
        let lvl = level_of(meta.level());
        if append_fitted(&self.log, lvl, &v.message, &fields, self.timeout).is_err() {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
    }
}
