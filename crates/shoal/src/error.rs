//! The one error type of the public API.

use crate::format::MapKind;
use std::io;
use std::path::PathBuf;

/// Everything that can go wrong in a Shoal call. No call panics on bad input or a bad file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The store file or the named map does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// The store file or the named map already exists (create-new), or the key is present
    /// (`put_if_absent`).
    #[error("already exists: {0}")]
    AlreadyExists(String),
    /// The store reached its maximum size (`Options::max_size`) or a fixed table is full.
    #[error("store full: {0}")]
    StoreFull(String),
    /// The filesystem has no room left (for example a full /dev/shm).
    #[error("no space left on device for {path} (the filesystem is full)")]
    NoSpace {
        /// The store file.
        path: PathBuf,
    },
    /// The file is not a consistent Shoal store; says what is wrong and where.
    #[error("corrupt store {path}: {what}")]
    Corrupt {
        /// The store file.
        path: PathBuf,
        /// What is wrong, and at which offset.
        what: String,
    },
    /// The file is not a Shoal store at all (wrong magic).
    #[error("{path} is not a Shoal store")]
    NotAStore {
        /// The file.
        path: PathBuf,
    },
    /// The file was written by a newer (or unknown) format version.
    #[error("{path} has format version {found}; this library reads up to {supported}")]
    VersionMismatch {
        /// The store file.
        path: PathBuf,
        /// Version in the file.
        found: u32,
        /// Newest version this library reads.
        supported: u32,
    },
    /// The file has an older format version, which this library upgrades when it opens
    /// the store alone; other processes have it open now (they may run an older library,
    /// which must not share the file with this one).
    #[error(
        "{path} has format version {found}, which is upgraded when a process opens it alone; \
         other processes have it open (close them, they may run an older library)"
    )]
    UpgradeBlocked {
        /// The store file.
        path: PathBuf,
        /// Version in the file.
        found: u32,
    },
    /// The operation is not permitted on the file.
    #[error("permission denied: {path}")]
    Permission {
        /// The file.
        path: PathBuf,
    },
    /// A key, value or name is too large, or an argument is out of range.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A wait for a lock did not end before the deadline (its holder is alive but stuck,
    /// for example stopped with SIGSTOP).
    #[error("timed out after {0:?} waiting for a lock")]
    Timeout(std::time::Duration),
    /// A [`Uid`](crate::Uid) whose key was removed (its 64-bit form, or the bare index of
    /// a 32-bit one): the handle no longer names anything.
    #[error("stale UID {0:#x}: its key was removed")]
    StaleUid(u64),
    /// A push would take a queue past its depth limit
    /// ([`QueueSetOptions::queue_with_limit`](crate::QueueSetOptions::queue_with_limit)).
    #[error("queue full: {0}")]
    QueueFull(String),
    /// More threads or processes use the store at once than it has slots for, or a
    /// repair ([`Store::repair`](crate::Store::repair)) found the store open elsewhere
    /// (it needs it alone).
    #[error("too many users: {0}")]
    TooManyUsers(String),
    /// The map exists but is of another kind than the call opens: a fixed-size map
    /// opened with [`Store::map`](crate::Store::map), or a variable-size map with
    /// [`Store::fixed_map`](crate::Store::fixed_map). The fields let each binding name
    /// its own call in its message.
    #[error(
        "{name:?} is a {found}: open it with {}",
        match found {
            MapKind::Fixed { .. } => "Store::fixed_map",
            MapKind::QueueSet { .. } => "Store::queue_set",
            MapKind::Log { .. } => "Store::log",
            _ => "Store::map",
        }
    )]
    WrongMapKind {
        /// The map's name.
        name: String,
        /// What the map is.
        found: MapKind,
        /// What the call asked for (for a variable-size map, `uids` as the call asked).
        wanted: MapKind,
    },
    /// A UID call on a map created without UIDs (they are chosen when a map is created,
    /// with [`MapOptions::uids`](crate::MapOptions::uids)).
    #[error("map {name:?} has no UIDs (create it with MapOptions::uids)")]
    NoUids {
        /// The map's name.
        name: String,
    },
    /// A store on disk that was not closed cleanly (an OS crash) and that the lossless
    /// repairs done when it is opened did not make consistent:
    /// [`Store::repair`](crate::Store::repair) opens it, dropping the entries that cannot
    /// be trusted.
    #[error(
        "corrupt store {path}: {what}; Store::repair drops the entries that cannot be trusted"
    )]
    NeedsRepair {
        /// The store file.
        path: PathBuf,
        /// What is wrong: the number of problems left and the first of them.
        what: String,
    },
    /// The store was opened read-only ([`OpenMode::ReadOnly`](crate::OpenMode::ReadOnly))
    /// and this needs to write: a write, creating a map, or recovering what a writer
    /// that died left half done (a process with write access recovers it).
    #[error("{path} is open read-only: {what}")]
    ReadOnly {
        /// The store file.
        path: PathBuf,
        /// What could not be done.
        what: String,
    },
    /// Any other I/O error.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// Shorthand for results of Shoal calls.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(path: &std::path::Path, source: io::Error) -> Error {
        match source.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) | Some(libc::EFBIG) => Error::NoSpace {
                path: path.to_owned(),
            },
            Some(libc::EACCES) | Some(libc::EPERM) | Some(libc::EROFS) => Error::Permission {
                path: path.to_owned(),
            },
            Some(libc::ENOENT) => Error::NotFound(path.display().to_string()),
            Some(libc::EEXIST) => Error::AlreadyExists(path.display().to_string()),
            // A bad path like any other (`open` of a directory for writing fails before a
            // regular-file check could say so): not an I/O fault of the store.
            Some(libc::EISDIR) => Error::InvalidArgument(format!(
                "{} is a directory, not a store file",
                path.display()
            )),
            _ => Error::Io {
                path: path.to_owned(),
                source,
            },
        }
    }

    pub(crate) fn corrupt(path: &std::path::Path, what: impl Into<String>) -> Error {
        Error::Corrupt {
            path: path.to_owned(),
            what: what.into(),
        }
    }
}
