//! The level numbers Shoal's adapters write (the log itself gives levels no meaning): the
//! syslog severities, most severe first, and [`TRACE`] below [`DEBUG`]. The Python
//! binding's `shoal.LogLevel` names the same numbers.

/// The system is unusable.
pub const EMERGENCY: u8 = 0;
/// Action must be taken at once.
pub const ALERT: u8 = 1;
/// A critical condition.
pub const CRITICAL: u8 = 2;
/// An error (`tracing` and `log`'s ERROR).
pub const ERROR: u8 = 3;
/// A warning (WARN).
pub const WARNING: u8 = 4;
/// Normal but significant.
pub const NOTICE: u8 = 5;
/// Information (INFO).
pub const INFO: u8 = 6;
/// Debugging (DEBUG).
pub const DEBUG: u8 = 7;
/// Finer than debugging (TRACE).
pub const TRACE: u8 = 8;
