//! Draining and feeding Shoal's shared logs ([`shoal::Log`]).
//!
//! Every process of a family appends to one log in the store file, without a lock or a
//! system call; one of them drains it. This crate is the draining and the feeding:
//!
//! - [`Drainer`]: one call starts a thread in this process that reads the log through a
//!   named reader (its cursor kept in the store, so a restarted drainer resumes) and
//!   writes the records to a file rotated by size ([`Drainer::to_file`]), standard error
//!   ([`Drainer::to_stderr`]), a callback ([`Drainer::to_callback`]) or any [`Sink`].
//! - [`Format`]: records as text or JSON lines, the same as `shoal log tail --format` and
//!   `shoal log drain` print.
//! - `ShoalLayer`: a `tracing_subscriber` layer (feature `tracing`), and `ShoalLogger`:
//!   a `log` backend (feature `log`), both appending each event or record with its level
//!   ([`level`]), target and fields. Both features are on by default; a program that only
//!   drains (the C library) leaves them out.
//!
//! ```
//! # #[cfg(feature = "tracing")] {
//! use tracing_subscriber::layer::SubscriberExt;
//! # let d = tempfile::tempdir().unwrap();
//! # let path = d.path().join("app.log");
//! let store = shoal::Store::open(d.path().join("l.shoal"))?;
//! let log = store.log("app", &shoal::LogOptions::new(4096, 512))?;
//! // In the process that drains (any process may write):
//! let drainer = shoal_log::Drainer::to_file(&log, &path, 10 << 20, 5)?;
//! // In every process:
//! let subscriber = tracing_subscriber::registry().with(shoal_log::ShoalLayer::new(log.clone()));
//! tracing::subscriber::with_default(subscriber, || {
//!     tracing::warn!(disk = "sda", free_pct = 4, "disk almost full");
//! });
//! drainer.stop()?;
//! let text = std::fs::read_to_string(&path)?;
//! assert!(text.trim_end().ends_with(" 4 disk almost full target=rust_out disk=sda free_pct=4"), "{text}");
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

#[cfg(any(feature = "tracing", feature = "log"))]
mod append;
mod drain;
pub mod format;
#[cfg(feature = "tracing")]
mod layer;
pub mod level;
#[cfg(feature = "log")]
mod logger;

pub use drain::{
    Callback, DrainError, DrainOptions, DrainStats, Drainer, FileSink, Sink, StderrSink,
};
pub use format::Format;
#[cfg(feature = "tracing")]
pub use layer::ShoalLayer;
#[cfg(feature = "log")]
pub use logger::ShoalLogger;

/// The log level of a `tracing` level ([`level`]'s numbers).
#[cfg(feature = "tracing")]
pub use layer::level_of as tracing_level;
/// The log level of a `log` level ([`level`]'s numbers).
#[cfg(feature = "log")]
pub use logger::level_of as log_level;
