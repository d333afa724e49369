//! Logs: a ring of records in the store file that any thread of any process appends to
//! without a lock, drained in order by named readers whose cursors live in the file.
//! Open (create or open existing), close, append (with fields; `shoal_log_printf` in the
//! header formats first), readers (open, close, read now or waiting, one record or a
//! batch), remove a reader.

use crate::*;
use std::ffi::c_char;
use std::time::Duration;

/// `shoal_log_options.policy`: overwrite the oldest records when the ring is full (the
/// default); readers count what they missed.
pub const SHOAL_LOG_OVERWRITE: u32 = 0;
/// `shoal_log_options.policy`: an append waits for room, at most its timeout.
pub const SHOAL_LOG_WAIT: u32 = 1;
/// `shoal_log_options.policy`: an append to a full ring drops its record and counts it.
pub const SHOAL_LOG_DROP: u32 = 2;
/// The sequence number `shoal_log_append` reports for a record the drop policy dropped.
pub const SHOAL_LOG_DROPPED: u64 = u64::MAX;

/// Options for creating a log (`shoal_log_open`). Zero-initialise, set `struct_size`,
/// `slots` and `max_record`; every other field left 0 takes its default.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct shoal_log_options {
    /// `sizeof(shoal_log_options)` as the caller was compiled with. Required.
    pub struct_size: usize,
    /// Records the ring holds, 2 to 2^32.
    pub slots: u64,
    /// The largest record in bytes (its message, and per field its key, value and 8
    /// bytes), 1 to 2^20.
    pub max_record: usize,
    /// `SHOAL_LOG_OVERWRITE` (0), `SHOAL_LOG_WAIT` or `SHOAL_LOG_DROP`.
    pub policy: u32,
    /// How many named readers it can have, 1 to 256 (0: 8).
    pub readers: u32,
}

// SAFETY: repr(C), starts with struct_size: usize; integers only, every bit pattern a
// valid value.
unsafe impl Versioned for shoal_log_options {}

/// A key/value field of a log record: `key_len` bytes at `key`, `value_len` at `value`
/// (either pointer may be NULL when its length is 0).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct shoal_log_field {
    /// The key's bytes.
    pub key: *const c_void,
    /// The key's length.
    pub key_len: usize,
    /// The value's bytes.
    pub value: *const c_void,
    /// The value's length.
    pub value_len: usize,
}

/// A record as `shoal_log_read` hands it to its callback (every pointer valid only during
/// the call) or as `shoal_log_read_batch` writes it (valid until the reader's next batch
/// read or its close).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct shoal_log_record {
    /// Its sequence number: the order writers reserved records in, which is the order
    /// readers read them.
    pub seq: u64,
    /// When it was appended, nanoseconds since the Unix epoch.
    pub time_ns: u64,
    /// Its writer's process id.
    pub pid: u32,
    /// Its writer's thread id (`gettid`).
    pub tid: u32,
    /// Its level, as the writer gave it.
    pub level: u8,
    /// Its message (NULL when `message_len` is 0).
    pub message: *const c_char,
    /// The message's length in bytes (the message is not NUL-terminated).
    pub message_len: usize,
    /// Its fields (NULL when `n_fields` is 0).
    pub fields: *const shoal_log_field,
    /// How many fields.
    pub n_fields: usize,
}

/// Receives a record (`shoal_log_read`). The record and what it points to are valid only
/// during the call. The callback must not unwind out of itself.
pub type shoal_log_record_fn =
    Option<unsafe extern "C" fn(ctx: *mut c_void, record: *const shoal_log_record)>;

/// A named reader of a log (`shoal_log_reader_open`): a cursor kept in the store file.
///
/// Thread safety: one thread at a time. Several handles on the same reader (in any
/// process) share its cursor: each record goes to one of them.
pub struct shoal_log_reader {
    pub(crate) r: shoal::LogReader,
    /// The records of the last `shoal_log_read_batch`, which its callers' records point
    /// into until the next one.
    batch: shoal::RecordBatch,
    /// Their fields, for the same.
    fields: Vec<shoal_log_field>,
}

/// The log handle behind a pointer.
///
/// # Safety
/// `p` is NULL or a live handle from `shoal_log_open`.
unsafe fn log_ref<'a>(p: *const shoal_log) -> Res<&'a shoal::Log> {
    if p.is_null() {
        return Err(null("log"));
    }
    // SAFETY: a live handle (caller's contract), only read through & refs.
    Ok(unsafe { &(*p).log })
}

/// Opens the log `name` of a store, creating it with `opts` if `opts` is not NULL and
/// there is none; returns a handle on it. An existing log keeps its geometry.
///
/// Errors: `SHOAL_NOT_FOUND` (no such log and `opts` NULL), `SHOAL_INVALID` (bad name or
/// options, an object of another kind by that name, a store of a format that predates
/// logs), `SHOAL_FULL`, `SHOAL_NO_SPACE`, `SHOAL_TIMEOUT`, `SHOAL_CORRUPT`,
/// `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `store` is NULL or a live handle; `name` is NULL or NUL-terminated; `opts` is NULL or
/// has `opts->struct_size` readable bytes; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_log_open(
    store: *const shoal_store,
    name: *const c_char,
    opts: *const shoal_log_options,
    out: *mut *mut shoal_log,
) -> shoal_status {
    ffi(|| {
        let out = out_ptr(out, "out")?;
        // SAFETY: non-NULL, writable by contract.
        unsafe { out.write(std::ptr::null_mut()) };
        // SAFETY: forwarded contract.
        let s = unsafe { store_ref(store) }?;
        // SAFETY: forwarded contract.
        let name = unsafe { c_str(name, "name") }?;
        let log = if opts.is_null() {
            s.open_log(name)?
        } else {
            // SAFETY: forwarded contract.
            let o: shoal_log_options = unsafe { read_versioned(opts, "opts") }?;
            let policy = match o.policy {
                SHOAL_LOG_OVERWRITE => shoal::FullPolicy::Overwrite,
                SHOAL_LOG_WAIT => shoal::FullPolicy::Wait,
                SHOAL_LOG_DROP => shoal::FullPolicy::Drop,
                p => {
                    return Err(Fail::new(
                        SHOAL_INVALID,
                        format!("opts.policy {p}: 0 (overwrite), 1 (wait) or 2 (drop)"),
                    ))
                }
            };
            let readers = if o.readers == 0 {
                8
            } else {
                o.readers as usize
            };
            s.log(
                name,
                &shoal::LogOptions::new(o.slots, o.max_record)
                    .policy(policy)
                    .readers(readers),
            )?
        };
        let h = Box::into_raw(Box::new(shoal_log { log }));
        // SAFETY: as above.
        unsafe { out.write(h) };
        Ok(SHOAL_OK)
    })
}

/// Closes a log handle. NULL is allowed.
///
/// Errors: none (always `SHOAL_OK`).
///
/// # Safety
/// `log` is NULL or a live handle, not used again after this call and not in use by
/// another thread during it; readers opened through it stay usable.
#[no_mangle]
pub unsafe extern "C" fn shoal_log_close(log: *mut shoal_log) -> shoal_status {
    ffi(|| {
        if !log.is_null() {
            // SAFETY: a live handle from Box::into_raw, not used again (contract).
            drop(unsafe { Box::from_raw(log) });
        }
        Ok(SHOAL_OK)
    })
}

/// Appends a record of `level` and the `len` bytes of `message`, with `n_fields` fields
/// (`fields` may be NULL when `n_fields` is 0). Under the wait policy it waits up to
/// `timeout_ms` milliseconds for room (0: the store's lock timeout). Stores the record's
/// sequence number in `*seq` if `seq` is not NULL, `SHOAL_LOG_DROPPED` if the drop
/// policy dropped it. No system call, no lock (a futex wake when a reader sleeps).
///
/// Errors: `SHOAL_INVALID` (a record larger than the log's `max_record`: nothing
/// appended), `SHOAL_TIMEOUT` (wait policy, no room came), `SHOAL_NOT_FOUND` (the log was
/// dropped), `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `log` is NULL or a live handle; `message` points to `len` readable bytes (or is NULL
/// with `len` 0); `fields` is NULL or points to `n_fields` readable fields, each pointing
/// to its readable bytes; `seq` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_log_append(
    log: *const shoal_log,
    level: u8,
    message: *const c_void,
    len: usize,
    fields: *const shoal_log_field,
    n_fields: usize,
    timeout_ms: u64,
    seq: *mut u64,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let l = unsafe { log_ref(log) }?;
        // SAFETY: forwarded contract.
        let msg = unsafe { bytes(message, len, "message") }?;
        let mut fs: Vec<(&[u8], &[u8])> = Vec::new();
        if n_fields > 0 {
            if fields.is_null() {
                return Err(null("fields"));
            }
            for i in 0..n_fields {
                // SAFETY: `fields` holds `n_fields` readable fields (contract).
                let f = unsafe { *fields.add(i) };
                // SAFETY: each field's pointers are readable for their lengths (contract).
                let k = unsafe { bytes(f.key, f.key_len, "fields[i].key") }?;
                // SAFETY: as above.
                let v = unsafe { bytes(f.value, f.value_len, "fields[i].value") }?;
                fs.push((k, v));
            }
        }
        let got = if timeout_ms == 0 {
            if fs.is_empty() {
                l.append(level, msg)?
            } else {
                l.append_fields(level, msg, &fs)?
            }
        } else {
            l.append_timeout(level, msg, &fs, Duration::from_millis(timeout_ms))?
        };
        // SAFETY: NULL or writable (contract).
        unsafe { write_opt(seq, got.unwrap_or(SHOAL_LOG_DROPPED)) };
        Ok(SHOAL_OK)
    })
}

/// Opens the reader `name` of a log, creating it if there is none: a cursor kept in the
/// store file, so that a reader opened again (by a restarted process) resumes where the
/// last one stopped. A new reader starts at the oldest record the ring holds.
///
/// Errors: `SHOAL_INVALID` (a name of 0 or more than 88 bytes, not UTF-8), `SHOAL_FULL`
/// (the log has its maximum of readers), `SHOAL_NOT_FOUND` (the log was dropped),
/// `SHOAL_TIMEOUT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `log` is NULL or a live handle; `name` is NULL or NUL-terminated; `out` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_log_reader_open(
    log: *const shoal_log,
    name: *const c_char,
    out: *mut *mut shoal_log_reader,
) -> shoal_status {
    ffi(|| {
        let out = out_ptr(out, "out")?;
        // SAFETY: non-NULL, writable by contract.
        unsafe { out.write(std::ptr::null_mut()) };
        // SAFETY: forwarded contract.
        let l = unsafe { log_ref(log) }?;
        // SAFETY: forwarded contract.
        let name = unsafe { c_str(name, "name") }?;
        let r = l.reader(name)?;
        let h = Box::into_raw(Box::new(shoal_log_reader {
            r,
            batch: shoal::RecordBatch::new(),
            fields: Vec::new(),
        }));
        // SAFETY: as above.
        unsafe { out.write(h) };
        Ok(SHOAL_OK)
    })
}

/// Closes a reader handle; its cursor stays in the file. NULL is allowed.
///
/// Errors: none (always `SHOAL_OK`).
///
/// # Safety
/// `reader` is NULL or a live handle, not used again after this call.
#[no_mangle]
pub unsafe extern "C" fn shoal_log_reader_close(reader: *mut shoal_log_reader) -> shoal_status {
    ffi(|| {
        if !reader.is_null() {
            // SAFETY: a live handle from Box::into_raw, not used again (contract).
            drop(unsafe { Box::from_raw(reader) });
        }
        Ok(SHOAL_OK)
    })
}

/// A field's C view.
fn c_field(k: &[u8], v: &[u8]) -> shoal_log_field {
    shoal_log_field {
        key: k.as_ptr().cast(),
        key_len: k.len(),
        value: v.as_ptr().cast(),
        value_len: v.len(),
    }
}

/// A record's C view: its sequence number, time, pid, tid and level, its message and its
/// fields (NULL for an empty message and for no fields, as `shoal_log_record` says).
fn c_record(
    (seq, time_ns, pid, tid, level): (u64, u64, u32, u32, u8),
    message: &[u8],
    fields: &[shoal_log_field],
) -> shoal_log_record {
    shoal_log_record {
        seq,
        time_ns,
        pid,
        tid,
        level,
        message: if message.is_empty() {
            std::ptr::null()
        } else {
            message.as_ptr().cast()
        },
        message_len: message.len(),
        fields: if fields.is_empty() {
            std::ptr::null()
        } else {
            fields.as_ptr()
        },
        n_fields: fields.len(),
    }
}

/// Reads the reader's next record, waiting up to `timeout_ms` milliseconds for one to be
/// published (0: not at all), and hands it to `f` (with `ctx`). Records come in sequence
/// order, each once per reader; the cursor moves as the record is handed over.
///
/// Errors: `SHOAL_EMPTY` (no record came; `f` not called), `SHOAL_NOT_FOUND` (the log or
/// the reader was removed), `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER` (`reader` or `f`).
///
/// # Safety
/// `reader` is NULL or a live handle used by no other thread during the call; `f`, if
/// set, is safe to call with `ctx` and must not unwind.
#[no_mangle]
pub unsafe extern "C" fn shoal_log_read(
    reader: *mut shoal_log_reader,
    timeout_ms: u64,
    f: shoal_log_record_fn,
    ctx: *mut c_void,
) -> shoal_status {
    ffi(|| {
        if reader.is_null() {
            return Err(null("reader"));
        }
        let f = f.ok_or_else(|| null("f"))?;
        // SAFETY: a live handle used by this thread alone (contract).
        let r = unsafe { &mut (*reader).r };
        let got = if timeout_ms == 0 {
            r.read()?
        } else {
            r.read_wait(Duration::from_millis(timeout_ms))?
        };
        let Some(rec) = got else {
            return Ok(SHOAL_EMPTY);
        };
        let fields: Vec<shoal_log_field> =
            rec.fields().iter().map(|(k, v)| c_field(k, v)).collect();
        let head = (rec.seq(), rec.time_ns(), rec.pid(), rec.tid(), rec.level());
        let c = c_record(head, rec.message(), &fields);
        // SAFETY: the caller's callback (contract); `c` and what it points to live
        // until it returns.
        unsafe { f(ctx, &c) };
        Ok(SHOAL_OK)
    })
}

/// Reads the reader's next records, at most `max`, into `records[0..*n]`, waiting up to
/// `timeout_ms` milliseconds for a first one to be published (0: not at all): as many as
/// were published in a row from the cursor, in one pass that moves the cursor past all
/// of them at once (the way to drain a busy log: no callback and no allocation per
/// record). The records' messages and fields live in the reader handle: valid until the
/// next `shoal_log_read_batch` or the close of `reader`.
///
/// Errors: `SHOAL_EMPTY` (no record came; `*n` is 0), `SHOAL_INVALID` (`max` is 0),
/// `SHOAL_NOT_FOUND` (the log or the reader was removed), `SHOAL_CORRUPT`,
/// `SHOAL_NULL_POINTER` (`reader`, `records` or `n`).
///
/// # Safety
/// `reader` is NULL or a live handle used by no other thread during the call; `records`
/// is NULL or writable for `max` records; `n` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_log_read_batch(
    reader: *mut shoal_log_reader,
    timeout_ms: u64,
    records: *mut shoal_log_record,
    max: usize,
    n: *mut usize,
) -> shoal_status {
    ffi(|| {
        let n = out_ptr(n, "n")?;
        // SAFETY: non-NULL, writable by contract.
        unsafe { n.write(0) };
        if reader.is_null() {
            return Err(null("reader"));
        }
        if max == 0 {
            return Err(Fail::new(SHOAL_INVALID, "max must be at least 1"));
        }
        if records.is_null() {
            return Err(null("records"));
        }
        // SAFETY: a live handle used by this thread alone (contract).
        let h = unsafe { &mut *reader };
        let got = if timeout_ms == 0 {
            h.r.read_batch(&mut h.batch, max)?
        } else {
            h.r.read_batch_wait(&mut h.batch, max, Duration::from_millis(timeout_ms))?
        };
        if got == 0 {
            return Ok(SHOAL_EMPTY);
        }
        // Every field first, so that the array no longer moves when the records point
        // into it.
        h.fields.clear();
        for rec in &h.batch {
            h.fields.extend(rec.fields().map(|(k, v)| c_field(k, v)));
        }
        let mut at = 0;
        for (i, rec) in h.batch.iter().enumerate() {
            let nf = rec.fields().count();
            let fields = &h.fields[at..at + nf];
            at += nf;
            let head = (rec.seq(), rec.time_ns(), rec.pid(), rec.tid(), rec.level());
            let c = c_record(head, rec.message(), fields);
            // SAFETY: `i < got <= max`, and `records` is writable for `max` (contract).
            unsafe { records.add(i).write(c) };
        }
        // SAFETY: as above.
        unsafe { n.write(got) };
        Ok(SHOAL_OK)
    })
}

/// The reader's figures: the next sequence number it reads, the records overwritten
/// before it read them, and the holes it passed (records whose writer died before
/// publishing them). Each out-parameter may be NULL.
///
/// Errors: `SHOAL_NULL_POINTER` (`reader`).
///
/// # Safety
/// `reader` is NULL or a live handle; each out-parameter is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_log_reader_stats(
    reader: *const shoal_log_reader,
    position: *mut u64,
    missed: *mut u64,
    skipped: *mut u64,
) -> shoal_status {
    ffi(|| {
        if reader.is_null() {
            return Err(null("reader"));
        }
        // SAFETY: a live handle (contract), only read.
        let r = unsafe { &(*reader).r };
        // SAFETY: NULL or writable (contract).
        unsafe {
            write_opt(position, r.position());
            write_opt(missed, r.missed());
            write_opt(skipped, r.skipped());
        }
        Ok(SHOAL_OK)
    })
}

/// Removes the reader `name` of a log (writers under the wait and drop policies no longer
/// wait for it); `*removed` (if not NULL) is 1 if it existed, else 0.
///
/// Errors: `SHOAL_TIMEOUT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `log` is NULL or a live handle; `name` is NULL or NUL-terminated; `removed` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_log_remove_reader(
    log: *const shoal_log,
    name: *const c_char,
    removed: *mut u32,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let l = unsafe { log_ref(log) }?;
        // SAFETY: forwarded contract.
        let name = unsafe { c_str(name, "name") }?;
        let r = l.remove_reader(name)?;
        // SAFETY: NULL or writable (contract).
        unsafe { write_opt(removed, r as u32) };
        Ok(SHOAL_OK)
    })
}
