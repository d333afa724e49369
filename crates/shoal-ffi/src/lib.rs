//! The C ABI of Shoal.
//!
//! Every exported symbol starts with `shoal_`; `include/shoal.h` declares them all and is
//! generated from this crate by cbindgen (the test `tests/header.rs` fails when the
//! committed header is out of date; `SHOAL_BLESS=1 cargo test -p shoal-ffi --test header`
//! rewrites it). `include/shoal.hpp` is a header-only C++17 wrapper over it.
//!
//! Conventions of the whole API (repeated in the header's preamble):
//! * Every call returns a `shoal_status`; results come back through out-parameters.
//!   No call aborts, exits or unwinds into the caller: a panic inside the library is
//!   caught and reported as `SHOAL_PANIC`.
//! * A pointer the call needs that is NULL gives `SHOAL_NULL_POINTER`. A key or value
//!   pointer may be NULL when its length is 0.
//! * After a status other than `SHOAL_OK`, `shoal_last_error_message()` says what went
//!   wrong (per thread).
//! * Structs passed in or out start with `struct_size`, which the caller sets to
//!   `sizeof` the struct it was compiled with: fields are only ever appended, so a
//!   program built against an older or newer header keeps working with this library.
//!   In input structs every field left 0 means "the default".

#![allow(non_camel_case_types)]

// In header order (cbindgen emits the modules in the order they are declared).
mod store;

mod map;

mod atomic;

mod uid;

mod iter;

mod fixed;

mod queue;

mod log;
mod log_drain;
mod txn;

mod ordered;
mod ordered_cursor;
mod ordered_ops;

// The calls both kinds of map share (no exported items of its own).
mod kv;

mod types;

pub use atomic::*;
pub use fixed::*;
pub use iter::*;
pub use log::*;
pub use log_drain::*;
pub use map::*;
pub use ordered::*;
pub use ordered_cursor::*;
pub use queue::*;
pub use store::*;
pub use txn::*;
pub use types::*;
pub use uid::*;

use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The status every call returns. `SHOAL_OK` is 0; every other value is a failure or an
/// expected negative outcome (a missing key, the end of an iteration). New codes are only
/// ever appended; treat an unknown code as a failure.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum shoal_status {
    /// Success.
    SHOAL_OK = 0,
    /// The store file, the map or the key does not exist.
    SHOAL_NOT_FOUND = 1,
    /// The store file (create-new) or the key (`shoal_map_put_if_absent`) already exists.
    SHOAL_EXISTS = 2,
    /// The store reached its maximum size or its maximum number of maps.
    SHOAL_FULL = 3,
    /// The filesystem has no room left (for example a full /dev/shm).
    SHOAL_NO_SPACE = 4,
    /// The file is not a consistent Shoal store (the message says what and where), or
    /// `shoal_store_check` found problems. Also a store on disk not closed cleanly (an OS
    /// crash) that holds entries it cannot trust: `shoal_store_repair` opens it, dropping
    /// them.
    SHOAL_CORRUPT = 5,
    /// The file was written by a newer format version than this library reads, or has an
    /// older one that can be upgraded only while no other process has it open.
    SHOAL_VERSION = 6,
    /// The operation is not permitted on the file.
    SHOAL_PERMISSION = 7,
    /// An argument is out of range: a key, value or name too large, a name that is not
    /// UTF-8, unknown flags, a bad options struct, a path that is a directory. Also a map
    /// of the other kind (`shoal_map_open` on a fixed-size map, `shoal_fixed_open` on a
    /// variable-size one or with other sizes) and a by-UID call on a map without UIDs.
    SHOAL_INVALID = 8,
    /// A lock held by a live but stuck process (for example one stopped with SIGSTOP)
    /// was not released before the store's lock timeout.
    SHOAL_TIMEOUT = 9,
    /// More processes or threads use the store at once than it has slots for.
    SHOAL_TOO_MANY = 10,
    /// Any other I/O error.
    SHOAL_IO = 11,
    /// A caller's buffer is too small; the needed length was stored in the length
    /// out-parameter and nothing was consumed, so the call can be repeated.
    SHOAL_BUFFER_TOO_SMALL = 12,
    /// A pointer argument that must not be NULL was NULL.
    SHOAL_NULL_POINTER = 13,
    /// A bug: the library panicked. The message says where. The handles stay usable.
    SHOAL_PANIC = 14,
    /// The file is not a Shoal store at all (wrong magic).
    SHOAL_NOT_A_STORE = 15,
    /// `shoal_iter_next`: the iteration is over.
    SHOAL_DONE = 16,
    /// An error of a kind this version of the C ABI does not know yet.
    SHOAL_ERROR = 17,
    /// `shoal_map_compare_and_swap`: the current value is not the expected one.
    SHOAL_MISMATCH = 18,
    /// A by-UID call (`shoal_map_get_by_uid`, ...): the handle's key was removed, so the
    /// handle names nothing (a 64-bit handle stays stale even after its table entry is
    /// reused by another key).
    SHOAL_STALE_UID = 19,
    /// The store was opened read-only (`SHOAL_OPEN_READ_ONLY`) and the call needs to write
    /// (the message says what), or to recover what a writer that died left half done.
    SHOAL_READ_ONLY = 20,
    /// `shoal_queue_pull`: the queue is empty (and stayed empty for the timeout);
    /// `shoal_log_read`: no record came.
    SHOAL_EMPTY = 21,
    /// `shoal_queue_push`, `shoal_queue_push_many`: the queue is at its depth limit; the
    /// elements stay held.
    SHOAL_QUEUE_FULL = 22,
}

pub use shoal_status::*;

/// `shoal_map_open` and `shoal_fixed_open[_with]` flag: create the map if it does not exist.
pub const SHOAL_MAP_CREATE: u32 = 1;
/// `shoal_iter_open` flag: return keys only (the value buffers of `shoal_iter_next` are
/// ignored and may be NULL).
pub const SHOAL_ITER_KEYS_ONLY: u32 = 1;
/// The largest key, in bytes.
pub const SHOAL_MAX_KEY_LEN: usize = 65536;
/// The largest value, in bytes.
pub const SHOAL_MAX_VALUE_LEN: u64 = 4294967295;
/// The longest map name, in bytes (UTF-8, not counting the terminating NUL).
pub const SHOAL_MAX_NAME_LEN: usize = 224;

/// A queue set of a store (`shoal_queue_open`): a pool of fixed-size elements and named
/// queues that pass them between processes by reference.
///
/// Thread safety: any number of threads may use one handle at once, except
/// `shoal_queue_close`. The handle keeps its store mapped.
pub struct shoal_queue {
    pub(crate) set: shoal::QueueSet,
}

/// A log of a store (`shoal_log_open`): a ring of records that any thread of any
/// process appends to without a lock, drained in order by named readers.
///
/// Thread safety: any number of threads may use one handle at once, except
/// `shoal_log_close`. The handle keeps its store mapped.
pub struct shoal_log {
    pub(crate) log: shoal::Log,
}

/// Receives a string: a map name (`shoal_store_maps`) or a problem found by
/// `shoal_store_check`. `text` is NUL-terminated, `len` excludes the NUL; both are
/// valid only during the call. Return 0 to go on, anything else to stop.
/// The callback must not unwind (throw a C++ exception, longjmp) out of itself.
pub type shoal_text_fn =
    Option<unsafe extern "C" fn(ctx: *mut c_void, text: *const c_char, len: usize) -> c_int>;

/// Receives a value (`shoal_map_get_cb`). `value` (NULL when `len` is 0) is valid only
/// during the call. The callback must not unwind out of itself.
pub type shoal_value_fn =
    Option<unsafe extern "C" fn(ctx: *mut c_void, value: *const c_void, len: usize)>;

/// Receives one entry (`shoal_map_for_each`). The pointers (NULL when their length is 0)
/// are valid only during the call. Return 0 to go on, anything else to stop. The callback
/// must not unwind out of itself.
pub type shoal_entry_fn = Option<
    unsafe extern "C" fn(
        ctx: *mut c_void,
        key: *const c_void,
        key_len: usize,
        value: *const c_void,
        value_len: usize,
    ) -> c_int,
>;

/// A static, NUL-terminated description of a status code ("unknown status" for a code
/// this library does not know). Never NULL; never free it.
#[no_mangle]
pub extern "C" fn shoal_strerror(code: i32) -> *const c_char {
    let s: &'static CStr = match code {
        0 => c"success",
        1 => c"not found",
        2 => c"already exists",
        3 => c"store full",
        4 => c"no space left on device",
        5 => c"corrupt store",
        6 => c"unsupported format version",
        7 => c"permission denied",
        8 => c"invalid argument",
        9 => c"timed out waiting for a lock",
        10 => c"too many processes or threads",
        11 => c"I/O error",
        12 => c"buffer too small",
        13 => c"NULL pointer argument",
        14 => c"internal error (panic)",
        15 => c"not a Shoal store",
        16 => c"end of iteration",
        17 => c"error",
        18 => c"value mismatch",
        19 => c"stale UID: its key was removed",
        20 => c"the store is open read-only",
        21 => c"the queue is empty",
        22 => c"the queue is full",
        _ => c"unknown status",
    };
    s.as_ptr()
}

/// The detail message of the last call on this thread that returned a status other than
/// `SHOAL_OK` (for example "corrupt store /dev/shm/x.shoal: header: ..."), or "" if there
/// was none. NUL-terminated, never NULL. Owned by the library: valid until the next call
/// on this thread that fails; copy it to keep it.
#[no_mangle]
pub extern "C" fn shoal_last_error_message() -> *const c_char {
    static EMPTY: &CStr = c"";
    let r = catch_unwind(|| {
        LAST_ERROR
            .try_with(|b| {
                let b = b.borrow();
                if b.is_empty() {
                    EMPTY.as_ptr()
                } else {
                    // The buffer always ends with a NUL (see set_last_error); the pointer
                    // stays valid until the buffer is next written, by a failing call.
                    b.as_ptr() as *const c_char
                }
            })
            .unwrap_or(EMPTY.as_ptr())
    });
    r.unwrap_or(EMPTY.as_ptr())
}

/// The library's version, for example "0.1.0". Static, NUL-terminated; never free it.
#[no_mangle]
pub extern "C" fn shoal_version() -> *const c_char {
    const V: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");
    V.as_ptr() as *const c_char
}

/// Panics inside the library and returns what every call returns then: `SHOAL_PANIC`,
/// with the panic message in `shoal_last_error_message()`. For tests of bindings: it
/// shows that no panic crosses the boundary.
#[no_mangle]
pub extern "C" fn shoal_test_panic() -> shoal_status {
    ffi(|| {
        let v: Vec<u8> = Vec::new();
        // An index out of bounds that the compiler cannot see through.
        let i = std::hint::black_box(3usize);
        Ok(if v[i] == 0 { SHOAL_OK } else { SHOAL_ERROR })
    })
}

// ---------------------------------------------------------------------------------------
// Internals: errors, the panic barrier, argument checking.

thread_local! {
    /// The last error message, NUL-terminated (empty before the first error).
    static LAST_ERROR: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// A reusable value buffer for gets (taken out while in use, so calls can nest).
    static VALUE_BUF: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// A failed call's status. Its message is recorded (for `shoal_last_error_message`) when
/// the `Fail` is made, so that a `Result<_, Fail>` stays one register wide on the hot
/// paths.
#[derive(Debug)]
pub(crate) struct Fail {
    pub(crate) code: shoal_status,
}

impl Fail {
    /// A failure with `code`, recording `msg` as this thread's last error message.
    #[cold]
    pub(crate) fn new(code: shoal_status, msg: impl AsRef<str>) -> Fail {
        set_last_error(msg.as_ref());
        Fail { code }
    }
}

pub(crate) type Res<T> = Result<T, Fail>;

/// The status of an engine error.
pub(crate) fn status_of(e: &shoal::Error) -> shoal_status {
    use shoal::Error as E;
    match e {
        E::NotFound(_) => SHOAL_NOT_FOUND,
        E::AlreadyExists(_) => SHOAL_EXISTS,
        E::StoreFull(_) => SHOAL_FULL,
        E::NoSpace { .. } => SHOAL_NO_SPACE,
        E::Corrupt { .. } | E::NeedsRepair { .. } => SHOAL_CORRUPT,
        E::NotAStore { .. } => SHOAL_NOT_A_STORE,
        E::VersionMismatch { .. } | E::UpgradeBlocked { .. } => SHOAL_VERSION,
        E::Permission { .. } => SHOAL_PERMISSION,
        E::InvalidArgument(_) | E::WrongMapKind { .. } | E::NoUids { .. } => SHOAL_INVALID,
        E::Timeout(_) => SHOAL_TIMEOUT,
        E::TooManyUsers(_) => SHOAL_TOO_MANY,
        E::Io { .. } => SHOAL_IO,
        E::StaleUid(_) => SHOAL_STALE_UID,
        E::ReadOnly { .. } => SHOAL_READ_ONLY,
        E::QueueFull(_) => SHOAL_QUEUE_FULL,
        _ => SHOAL_ERROR,
    }
}

/// The message of an engine error in this API's words: where the engine's own text names
/// a Rust call (`Store::fixed_map`, `MapOptions::uids`, `Store::repair`), the C call that
/// does it instead.
pub(crate) fn message_of(e: &shoal::Error) -> String {
    use shoal::{Error as E, MapKind};
    match e {
        E::WrongMapKind { name, found, .. } => match found {
            MapKind::Fixed {
                key_size,
                value_size,
            } => format!(
                "map {name:?} is a {found}: open it with shoal_fixed_open \
                 (key_size {key_size}, value_size {value_size})"
            ),
            MapKind::Variable { .. } => {
                format!("map {name:?} is a {found}: open it with shoal_map_open")
            }
            MapKind::QueueSet { .. } => {
                format!("{name:?} is a {found}: open it with shoal_queue_open")
            }
            MapKind::Log { .. } => {
                format!("{name:?} is a {found}: open it with shoal_log_open")
            }
            MapKind::Ordered { .. } => {
                format!("{name:?} is a {found}: open it with shoal_ordered_open")
            }
            _ => e.to_string(),
        },
        E::NoUids { name } => format!(
            "map {name:?} has no UIDs (they are chosen when a map is created: \
             shoal_map_open with shoal_map_options.uids = 1)"
        ),
        E::NeedsRepair { path, what } => format!(
            "corrupt store {}: {what}; shoal_store_repair drops the entries that cannot be \
             trusted",
            path.display()
        ),
        e => e.to_string(),
    }
}

impl From<shoal::Error> for Fail {
    #[cold]
    fn from(e: shoal::Error) -> Fail {
        Fail::new(status_of(&e), message_of(&e))
    }
}

fn set_last_error(msg: &str) {
    let _ = LAST_ERROR.try_with(|b| {
        if let Ok(mut b) = b.try_borrow_mut() {
            b.clear();
            b.extend(msg.bytes().map(|c| if c == 0 { b'?' } else { c }));
            b.push(0);
        }
    });
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        format!("panic in libshoal: {s}")
    } else if let Some(s) = p.downcast_ref::<String>() {
        format!("panic in libshoal: {s}")
    } else {
        "panic in libshoal".to_string()
    }
}

/// The barrier every exported call goes through: runs `f`, records a failure's message,
/// and turns a panic into `SHOAL_PANIC`.
#[inline(always)]
pub(crate) fn ffi(f: impl FnOnce() -> Res<shoal_status>) -> shoal_status {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(s)) => s,
        Ok(Err(fail)) => fail.code,
        Err(p) => {
            // Formatting the message could itself panic (an allocation failure); keep
            // the barrier tight.
            let _ = catch_unwind(AssertUnwindSafe(|| set_last_error(&panic_message(&*p))));
            SHOAL_PANIC
        }
    }
}

#[cold]
pub(crate) fn null(what: &'static str) -> Fail {
    Fail::new(SHOAL_NULL_POINTER, format!("{what} is NULL"))
}

/// Checks an out-parameter for NULL.
#[inline(always)]
pub(crate) fn out_ptr<T>(p: *mut T, what: &'static str) -> Res<*mut T> {
    if p.is_null() {
        Err(null(what))
    } else {
        Ok(p)
    }
}

/// Writes `v` through `p` if `p` is not NULL (an optional out-parameter).
///
/// # Safety
/// `p` is NULL or valid for a write of `T`.
pub(crate) unsafe fn write_opt<T>(p: *mut T, v: T) {
    if !p.is_null() {
        // SAFETY: non-NULL, and the caller guarantees it is writable.
        unsafe { p.write(v) }
    }
}

/// A byte string argument: `len` bytes at `p`, which may be NULL when `len` is 0.
///
/// # Safety
/// When `len > 0` and `p` is not NULL, `p` points to `len` readable bytes that stay
/// unchanged for `'a`.
#[inline(always)]
pub(crate) unsafe fn bytes<'a>(p: *const c_void, len: usize, what: &'static str) -> Res<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(null(what));
    }
    if len > isize::MAX as usize {
        return Err(Fail::new(
            SHOAL_INVALID,
            format!("{what}: length {len} is too large"),
        ));
    }
    // SAFETY: non-NULL, len checked against isize::MAX; readability is the caller's
    // contract (documented on every function taking bytes).
    Ok(unsafe { std::slice::from_raw_parts(p as *const u8, len) })
}

/// A key and a value given as pointers and lengths (see [`bytes`]).
///
/// # Safety
/// `key` and `value` are NULL or readable for their lengths, for `'a`.
pub(crate) unsafe fn key_value<'a>(
    key: *const c_void,
    key_len: usize,
    value: *const c_void,
    value_len: usize,
) -> Res<(&'a [u8], &'a [u8])> {
    // SAFETY: forwarded contract.
    unsafe {
        Ok((
            bytes(key, key_len, "key")?,
            bytes(value, value_len, "value")?,
        ))
    }
}

/// A NUL-terminated string argument.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that stays unchanged for `'a`.
pub(crate) unsafe fn c_bytes<'a>(p: *const c_char, what: &'static str) -> Res<&'a [u8]> {
    if p.is_null() {
        return Err(null(what));
    }
    // SAFETY: non-NULL and NUL-terminated by the caller's contract.
    Ok(unsafe { CStr::from_ptr(p) }.to_bytes())
}

/// A NUL-terminated UTF-8 string argument (a map name).
///
/// # Safety
/// As [`c_bytes`].
pub(crate) unsafe fn c_str<'a>(p: *const c_char, what: &'static str) -> Res<&'a str> {
    // SAFETY: forwarded contract.
    let b = unsafe { c_bytes(p, what) }?;
    std::str::from_utf8(b).map_err(|_| Fail::new(SHOAL_INVALID, format!("{what} is not UTF-8")))
}

/// Copies `src` into the caller's buffer `(buf, cap)` if it fits, with the needed-length
/// protocol: `*len` is always set to `src.len()`; `SHOAL_BUFFER_TOO_SMALL` when it does
/// not fit (nothing is written to `buf` then). With `nul`, a terminating NUL is written
/// too and must fit (`*len` still excludes it).
///
/// # Safety
/// `buf` is NULL or valid for `cap` bytes of writes; `len` is valid for a write.
#[inline(always)]
pub(crate) unsafe fn copy_out(
    src: &[u8],
    buf: *mut c_void,
    cap: usize,
    len: *mut usize,
    nul: bool,
    what: &'static str,
) -> Res<()> {
    // SAFETY: `len` was checked non-NULL by the caller of copy_out and is writable.
    unsafe { len.write(src.len()) };
    let need = src.len() + nul as usize;
    if need > cap {
        return Err(Fail::new(
            SHOAL_BUFFER_TOO_SMALL,
            format!("{what}: {need} bytes needed, the buffer has {cap}"),
        ));
    }
    if buf.is_null() {
        // need <= cap, so cap > 0 or there is nothing to write.
        return if need == 0 { Ok(()) } else { Err(null(what)) };
    }
    // SAFETY: buf is valid for cap >= need bytes and does not overlap `src` (a buffer of
    // the library's or a store's copy); the regions are disjoint by ownership.
    unsafe {
        std::ptr::copy_nonoverlapping(src.as_ptr(), buf as *mut u8, src.len());
        if nul {
            *(buf as *mut u8).add(src.len()) = 0;
        }
    }
    Ok(())
}

/// Runs `f` with this thread's reusable value buffer (taken out of the thread-local while
/// `f` runs, so a nested call from a callback gets a buffer of its own).
#[inline(always)]
pub(crate) fn with_value_buf<R>(f: impl Fn(&mut Vec<u8>) -> R) -> R {
    VALUE_BUF
        .try_with(|c| {
            let mut buf = c.take();
            let r = f(&mut buf);
            // Do not keep a huge buffer alive for the thread's lifetime.
            if buf.capacity() <= 1 << 20 {
                c.set(buf);
            }
            r
        })
        // The thread-local is gone (the thread is exiting): a fresh buffer.
        .unwrap_or_else(|_| f(&mut Vec::new()))
}

/// Implemented by the versioned structs: all start with `struct_size: usize`, are
/// `repr(C)` and valid when all-zero.
///
/// # Safety
/// The implementor is `repr(C)`, starts with a `usize` field, has no padding and no
/// invalid bit patterns.
pub(crate) unsafe trait Versioned: Copy + Default {}

/// Reads an input struct written by a caller compiled against any version of the header:
/// fields past the caller's `struct_size` keep their zero (default) value; a newer
/// caller's extra fields must be zero (unsupported options are refused, not ignored).
///
/// # Safety
/// `p` is NULL or points to a struct of at least `struct_size` readable bytes, whose
/// first field `struct_size` is initialised.
pub(crate) unsafe fn read_versioned<T: Versioned>(p: *const T, what: &'static str) -> Res<T> {
    if p.is_null() {
        return Err(null(what));
    }
    // SAFETY: non-NULL; the first field is a usize by the Versioned contract.
    let given = unsafe { (p as *const usize).read_unaligned() };
    let ours = std::mem::size_of::<T>();
    if given < std::mem::size_of::<usize>() {
        return Err(Fail::new(
            SHOAL_INVALID,
            format!("{what}->struct_size is {given}; set it to sizeof the struct"),
        ));
    }
    let mut v = T::default();
    // SAFETY: `given` bytes are readable at p (caller's contract), we copy at most `ours`
    // bytes into a T, which has no padding and no invalid bit patterns (Versioned).
    unsafe {
        std::ptr::copy_nonoverlapping(p as *const u8, &mut v as *mut T as *mut u8, given.min(ours))
    };
    if given > ours {
        // SAFETY: the caller's struct has `given` readable bytes.
        let extra = unsafe { std::slice::from_raw_parts((p as *const u8).add(ours), given - ours) };
        if extra.iter().any(|b| *b != 0) {
            return Err(Fail::new(
                SHOAL_INVALID,
                format!(
                    "{what} sets options this library (version {}) does not know",
                    env!("CARGO_PKG_VERSION")
                ),
            ));
        }
    }
    Ok(v)
}

/// Writes an output struct for a caller compiled against any version of the header:
/// at most the caller's `struct_size` bytes are written, and `struct_size` is set to the
/// number written.
///
/// # Safety
/// `p` is NULL or points to a struct of at least `struct_size` writable bytes, whose
/// first field `struct_size` is initialised.
pub(crate) unsafe fn write_versioned<T: Versioned>(p: *mut T, v: T, what: &'static str) -> Res<()> {
    if p.is_null() {
        return Err(null(what));
    }
    // SAFETY: non-NULL; the first field is a usize by the Versioned contract.
    let given = unsafe { (p as *const usize).read_unaligned() };
    if given < std::mem::size_of::<usize>() {
        return Err(Fail::new(
            SHOAL_INVALID,
            format!("{what}->struct_size is {given}; set it to sizeof the struct"),
        ));
    }
    let n = given.min(std::mem::size_of::<T>());
    // SAFETY: the caller's struct has `given >= n` writable bytes; `v` has n readable.
    unsafe {
        std::ptr::copy_nonoverlapping(&v as *const T as *const u8, p as *mut u8, n);
        (p as *mut usize).write_unaligned(n);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_match_the_engine() {
        assert_eq!(SHOAL_MAX_KEY_LEN, shoal::MAX_KEY_LEN);
        assert_eq!(SHOAL_MAX_VALUE_LEN, shoal::MAX_VALUE_LEN);
        assert_eq!(SHOAL_MAX_NAME_LEN, shoal::MAX_NAME_LEN);
    }

    #[test]
    fn every_engine_error_has_its_status() {
        use shoal::Error as E;
        use std::path::PathBuf;
        let p = || PathBuf::from("/x");
        let cases = [
            (E::NotFound("k".into()), SHOAL_NOT_FOUND),
            (E::AlreadyExists("k".into()), SHOAL_EXISTS),
            (E::StoreFull("f".into()), SHOAL_FULL),
            (E::NoSpace { path: p() }, SHOAL_NO_SPACE),
            (
                E::Corrupt {
                    path: p(),
                    what: "w".into(),
                },
                SHOAL_CORRUPT,
            ),
            (E::NotAStore { path: p() }, SHOAL_NOT_A_STORE),
            (
                E::VersionMismatch {
                    path: p(),
                    found: 9,
                    supported: 1,
                },
                SHOAL_VERSION,
            ),
            (E::Permission { path: p() }, SHOAL_PERMISSION),
            (E::InvalidArgument("a".into()), SHOAL_INVALID),
            (
                E::WrongMapKind {
                    name: "f".into(),
                    found: shoal::MapKind::Fixed {
                        key_size: 8,
                        value_size: 4,
                    },
                    wanted: shoal::MapKind::Variable { uids: false },
                },
                SHOAL_INVALID,
            ),
            (
                E::WrongMapKind {
                    name: "v".into(),
                    found: shoal::MapKind::Variable { uids: true },
                    wanted: shoal::MapKind::Fixed {
                        key_size: 8,
                        value_size: 4,
                    },
                },
                SHOAL_INVALID,
            ),
            (E::NoUids { name: "m".into() }, SHOAL_INVALID),
            (
                E::NeedsRepair {
                    path: p(),
                    what: "w".into(),
                },
                SHOAL_CORRUPT,
            ),
            (
                E::Timeout(std::time::Duration::from_millis(5)),
                SHOAL_TIMEOUT,
            ),
            (E::TooManyUsers("u".into()), SHOAL_TOO_MANY),
            (E::StaleUid(0x1_0000_0000_0005), SHOAL_STALE_UID),
            (
                E::ReadOnly {
                    path: p(),
                    what: "w".into(),
                },
                SHOAL_READ_ONLY,
            ),
            (
                E::Io {
                    path: p(),
                    source: std::io::Error::other("x"),
                },
                SHOAL_IO,
            ),
            (E::QueueFull("q".into()), SHOAL_QUEUE_FULL),
        ];
        for (e, want) in cases {
            let msg = message_of(&e);
            // The C messages name C calls, never the Rust API's.
            for rust in ["Store::", "MapOptions::", "Map::"] {
                assert!(!msg.contains(rust), "{msg}");
            }
            let f = Fail::from(e);
            assert_eq!(f.code, want, "{msg}");
            // SAFETY: the message is NUL-terminated and valid until the next failure.
            let last = unsafe { CStr::from_ptr(shoal_last_error_message()) };
            assert_eq!(last.to_str().unwrap(), msg);
            // And the status has a description of its own.
            // SAFETY: shoal_strerror returns a static NUL-terminated string.
            let s = unsafe { CStr::from_ptr(shoal_strerror(want as i32)) };
            assert_ne!(s.to_bytes(), b"unknown status");
        }
    }

    #[test]
    fn panics_become_a_status_and_a_message() {
        assert_eq!(shoal_test_panic(), SHOAL_PANIC);
        // SAFETY: the message is NUL-terminated and valid until the next failing call.
        let m = unsafe { CStr::from_ptr(shoal_last_error_message()) };
        assert!(m.to_string_lossy().contains("panic in libshoal"), "{m:?}");
    }
}
