//! A log's drainer: a thread of the calling process that reads a log through a named
//! reader and writes its records to a file rotated by size, to stderr, or to a callback
//! (`shoal_log_drainer_start`, `shoal_log_drainer_stop`). The engine of it is the
//! shoal-log crate's `Drainer`.

use crate::*;
use std::ffi::c_char;

/// `shoal_log_drain_options.format`: text lines (`seq time pid tid level message
/// key=value...`, as `shoal log tail` prints).
pub const SHOAL_LOG_FORMAT_TEXT: u32 = 0;
/// `shoal_log_drain_options.format`: one JSON object a line.
pub const SHOAL_LOG_FORMAT_JSON: u32 = 1;

/// Options of a drainer (`shoal_log_drainer_start`). Zero-initialise and set
/// `struct_size`; every other field left 0 takes its default.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct shoal_log_drain_options {
    /// `sizeof(shoal_log_drain_options)` as the caller was compiled with. Required.
    pub struct_size: usize,
    /// The name of the reader to read as, NUL-terminated (NULL: `"drain"`). Its cursor is
    /// kept in the store: a drainer started again under the same name resumes there.
    pub cursor: *const c_char,
    /// The file to write, NUL-terminated (created, or appended to), or NULL: the callback
    /// given to `shoal_log_drainer_start`, or stderr without one.
    pub path: *const c_char,
    /// Rotate the file before a line would take it past this many bytes (0: never): it is
    /// renamed `path.1` (`path.1` becoming `path.2`, and so on up to `path.keep`).
    pub rotate_bytes: u64,
    /// How many rotated files to keep (0: a full file is started again).
    pub keep: u32,
    /// `SHOAL_LOG_FORMAT_TEXT` (0) or `SHOAL_LOG_FORMAT_JSON`, for the file and stderr.
    pub format: u32,
}

// SAFETY: repr(C), starts with struct_size: usize; pointers and integers, every bit
// pattern a valid value (the pointers are only read as the contract of
// `shoal_log_drainer_start` says).
unsafe impl Versioned for shoal_log_drain_options {}

impl Default for shoal_log_drain_options {
    fn default() -> Self {
        shoal_log_drain_options {
            struct_size: 0,
            cursor: std::ptr::null(),
            path: std::ptr::null(),
            rotate_bytes: 0,
            keep: 0,
            format: 0,
        }
    }
}

/// A running drainer (`shoal_log_drainer_start`); `shoal_log_drainer_stop` stops and
/// frees it.
pub struct shoal_log_drainer {
    d: ::shoal_log::Drainer,
}

/// The callback sink: the caller's function and context, called on the drainer's thread.
struct CSink {
    f: unsafe extern "C" fn(ctx: *mut c_void, record: *const shoal_log_record),
    ctx: *mut c_void,
    fields: Vec<shoal_log_field>,
}

// SAFETY: `shoal_log_drainer_start`'s contract: `f` and `ctx` may be used from the
// drainer's thread until `shoal_log_drainer_stop` returns.
unsafe impl Send for CSink {}

impl ::shoal_log::Sink for CSink {
    fn write(&mut self, batch: &shoal::RecordBatch) -> std::io::Result<()> {
        for r in batch {
            self.fields.clear();
            self.fields.extend(r.fields().map(|(k, v)| shoal_log_field {
                key: k.as_ptr().cast(),
                key_len: k.len(),
                value: v.as_ptr().cast(),
                value_len: v.len(),
            }));
            let c = shoal_log_record {
                seq: r.seq(),
                time_ns: r.time_ns(),
                pid: r.pid(),
                tid: r.tid(),
                level: r.level(),
                message: r.message().as_ptr().cast(),
                message_len: r.message().len(),
                fields: self.fields.as_ptr(),
                n_fields: self.fields.len(),
            };
            // SAFETY: the caller's callback (contract); `c` and what it points to live
            // until it returns.
            unsafe { (self.f)(self.ctx, &c) };
        }
        Ok(())
    }
}

fn drain_fail(e: ::shoal_log::DrainError) -> Fail {
    match e {
        ::shoal_log::DrainError::Log(e) => e.into(),
        ::shoal_log::DrainError::Panicked(m) => Fail::new(SHOAL_PANIC, m),
        e => Fail::new(SHOAL_IO, e.to_string()),
    }
}

/// Starts a thread in this process that drains `log`: it reads the records through the
/// named reader `opts->cursor`, sleeping while there are none (a writer's record wakes
/// it), and writes them to the file `opts->path` (rotated by size), or hands each to `f`
/// (with `ctx`) on its thread, or, with neither, writes them to stderr. `opts` may be
/// NULL (every default: the reader `drain`, stderr or `f`). Stores the drainer in `*out`.
///
/// The cursor moves as records are read, before they are written: a process killed in
/// between loses those records (each is written at most once).
///
/// Errors: `SHOAL_INVALID` (both `opts->path` and `f`, an unknown format, a bad reader
/// name, a bad options struct), `SHOAL_FULL` (the log has its maximum of readers),
/// `SHOAL_IO` (the file cannot be opened), `SHOAL_NOT_FOUND` (the log was dropped),
/// `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `log` is NULL or a live handle; `opts` is NULL or has `opts->struct_size` readable
/// bytes whose strings are NULL or NUL-terminated; `f`, if set, is safe to call with `ctx`
/// from another thread until `shoal_log_drainer_stop` returns, and must not unwind; `out`
/// is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_log_drainer_start(
    log: *const shoal_log,
    opts: *const shoal_log_drain_options,
    f: shoal_log_record_fn,
    ctx: *mut c_void,
    out: *mut *mut shoal_log_drainer,
) -> shoal_status {
    ffi(|| {
        let out = out_ptr(out, "out")?;
        // SAFETY: non-NULL, writable by contract.
        unsafe { out.write(std::ptr::null_mut()) };
        if log.is_null() {
            return Err(null("log"));
        }
        // SAFETY: a live handle (contract), only read.
        let l = unsafe { &(*log).log };
        let o = if opts.is_null() {
            shoal_log_drain_options::default()
        } else {
            // SAFETY: forwarded contract.
            unsafe { read_versioned(opts, "opts") }?
        };
        let cursor = if o.cursor.is_null() {
            "drain"
        } else {
            // SAFETY: NUL-terminated (contract).
            unsafe { c_str(o.cursor, "opts.cursor") }?
        };
        let format = match o.format {
            SHOAL_LOG_FORMAT_TEXT => ::shoal_log::Format::Text,
            SHOAL_LOG_FORMAT_JSON => ::shoal_log::Format::Json,
            x => {
                return Err(Fail::new(
                    SHOAL_INVALID,
                    format!("opts.format {x}: 0 (text) or 1 (json)"),
                ))
            }
        };
        let dopts = ::shoal_log::DrainOptions::new().cursor(cursor);
        let d = match (o.path.is_null(), f) {
            (false, Some(_)) => {
                return Err(Fail::new(
                    SHOAL_INVALID,
                    "opts.path and a callback: give one of them",
                ))
            }
            (false, None) => {
                // SAFETY: NUL-terminated (contract).
                let path = unsafe { c_str(o.path, "opts.path") }?;
                let sink =
                    ::shoal_log::FileSink::open(path, format, o.rotate_bytes, o.keep as usize)
                        .map_err(|e| Fail::new(SHOAL_IO, format!("cannot open {path}: {e}")))?;
                ::shoal_log::Drainer::start(l, &dopts, sink)
            }
            (true, Some(f)) => {
                let sink = CSink {
                    f,
                    ctx,
                    fields: Vec::new(),
                };
                ::shoal_log::Drainer::start(l, &dopts, sink)
            }
            (true, None) => {
                ::shoal_log::Drainer::start(l, &dopts, ::shoal_log::StderrSink::new(format))
            }
        }
        .map_err(drain_fail)?;
        let h = Box::into_raw(Box::new(shoal_log_drainer { d }));
        // SAFETY: as above.
        unsafe { out.write(h) };
        Ok(SHOAL_OK)
    })
}

/// Stops a drainer and frees it: it writes the records published by now, flushes its
/// file and ends. Stores in `*records` (if not NULL) how many records it wrote. NULL is
/// allowed (nothing to stop).
///
/// Errors: the error that stopped the drainer earlier, if one did (`SHOAL_IO`: the file
/// could not be written or rotated; `SHOAL_NOT_FOUND`: the log was dropped; ...); the
/// drainer is freed all the same.
///
/// # Safety
/// `drainer` is NULL or a live handle, not used again after this call; `records` is NULL
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_log_drainer_stop(
    drainer: *mut shoal_log_drainer,
    records: *mut u64,
) -> shoal_status {
    ffi(|| {
        if drainer.is_null() {
            return Ok(SHOAL_OK);
        }
        // SAFETY: a live handle from Box::into_raw, not used again (contract).
        let d = unsafe { Box::from_raw(drainer) };
        let st = d.d.stop().map_err(drain_fail)?;
        // SAFETY: NULL or writable (contract).
        unsafe { write_opt(records, st.records) };
        Ok(SHOAL_OK)
    })
}
