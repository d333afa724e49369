//! Logs: [`Log`], its [`LogReader`]s and the [`Record`]s they read.

use crate::error::{Error, Result};
use crate::format::*;
use crate::kinds::log::{self as kl, Draft, LogRef, Next, RawBatch, RawHead};
use crate::shared::Shared;
use std::sync::atomic::Ordering::*;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What an append does when the ring is full (the slowest reader is a whole ring
/// behind), chosen when the log is created.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FullPolicy {
    /// Overwrite the oldest records: appends never wait, and a reader that falls a ring
    /// behind learns how many it missed ([`LogReader::missed`]).
    #[default]
    Overwrite,
    /// Wait for room, at most the call's timeout ([`Log::append_timeout`], or the store's
    /// lock timeout), then fail with [`Error::Timeout`]. No record is lost while every
    /// reader keeps up.
    Wait,
    /// Drop the new record and count it ([`LogStats::dropped`]); `append` returns None.
    Drop,
}

impl FullPolicy {
    fn word(self) -> u64 {
        match self {
            FullPolicy::Overwrite => LP_OVERWRITE,
            FullPolicy::Wait => LP_WAIT,
            FullPolicy::Drop => LP_DROP,
        }
    }
    fn of(word: u64) -> FullPolicy {
        match word {
            LP_WAIT => FullPolicy::Wait,
            LP_DROP => FullPolicy::Drop,
            _ => FullPolicy::Overwrite,
        }
    }
}

/// How a new log is made ([`Store::log`](crate::Store::log)): how many records its ring
/// holds, how large a record may be, what an append does when the ring is full, and how
/// many named readers it can have.
///
/// ```
/// let o = shoal::LogOptions::new(4096, 256).policy(shoal::FullPolicy::Drop);
/// # let _ = o;
/// ```
#[derive(Clone, Debug)]
pub struct LogOptions {
    slots: u64,
    max_record: usize,
    policy: FullPolicy,
    readers: usize,
}

impl LogOptions {
    /// A ring of `slots` records of up to `max_record` bytes each (the message and its
    /// fields; each field takes 8 bytes more than its key and value), overwritten when
    /// full, with room for 8 readers.
    pub fn new(slots: u64, max_record: usize) -> LogOptions {
        LogOptions {
            slots,
            max_record,
            policy: FullPolicy::Overwrite,
            readers: 8,
        }
    }

    /// What an append does when the ring is full.
    pub fn policy(mut self, policy: FullPolicy) -> LogOptions {
        self.policy = policy;
        self
    }

    /// How many named readers the log can have at once (1 to 256).
    pub fn readers(mut self, readers: usize) -> LogOptions {
        self.readers = readers;
        self
    }

    pub(crate) fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidArgument(m));
        if !(2..=MAX_LOG_SLOTS).contains(&self.slots) {
            return bad(format!(
                "a log of {} slots: 2 to {MAX_LOG_SLOTS}",
                self.slots
            ));
        }
        if !(1..=MAX_LOG_RECORD).contains(&(self.max_record as u64)) {
            return bad(format!(
                "records of up to {} bytes: 1 to {MAX_LOG_RECORD}",
                self.max_record
            ));
        }
        if !(1..=MAX_LOG_READERS).contains(&(self.readers as u64)) {
            return bad(format!("{} readers: 1 to {MAX_LOG_READERS}", self.readers));
        }
        Ok(())
    }

    pub(crate) fn parts(&self) -> (u64, u64, u64, u64) {
        (
            self.slots,
            self.max_record as u64,
            self.readers as u64,
            self.policy.word(),
        )
    }
}

/// Figures of a log ([`Log::stats`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LogStats {
    /// Sequence numbers given out so far (the next record's).
    pub appended: u64,
    /// Records dropped because the ring was full ([`FullPolicy::Drop`]).
    pub dropped: u64,
    /// Records reserved by writers that died before publishing them, found so far.
    pub holes: u64,
    /// Every reader: its name, its cursor (the next sequence number it reads), the
    /// records it missed (overwritten before it read them) and the holes it passed.
    pub readers: Vec<ReaderStats>,
}

/// Figures of one reader of a log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReaderStats {
    /// The reader's name.
    pub name: String,
    /// The next sequence number it reads.
    pub position: u64,
    /// Records overwritten before it read them.
    pub missed: u64,
    /// Holes it passed: records whose writer died before publishing them.
    pub skipped: u64,
}

/// One record of a log, as a reader read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    seq: u64,
    time: u64,
    pid: u32,
    tid: u32,
    level: u8,
    message: Vec<u8>,
    fields: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Record {
    fn from_ref(r: RecordRef<'_>) -> Record {
        Record {
            seq: r.seq(),
            time: r.time_ns(),
            pid: r.pid(),
            tid: r.tid(),
            level: r.level(),
            message: r.message().to_vec(),
            fields: r.fields().map(|(k, v)| (k.to_vec(), v.to_vec())).collect(),
        }
    }

    /// Its sequence number: records of a log are numbered from 0 in the order their
    /// writers reserved them, which is the order readers read them.
    pub fn seq(&self) -> u64 {
        self.seq
    }
    /// When it was appended, in nanoseconds since the Unix epoch.
    pub fn time_ns(&self) -> u64 {
        self.time
    }
    /// The process id of its writer.
    pub fn pid(&self) -> u32 {
        self.pid
    }
    /// The thread id (Linux `gettid`) of its writer.
    pub fn tid(&self) -> u32 {
        self.tid
    }
    /// Its level, as the writer gave it (the log gives levels no meaning).
    pub fn level(&self) -> u8 {
        self.level
    }
    /// Its message.
    pub fn message(&self) -> &[u8] {
        &self.message
    }
    /// Its fields: (key, value) pairs, in the writer's order.
    pub fn fields(&self) -> &[(Vec<u8>, Vec<u8>)] {
        &self.fields
    }
}

/// Records read together ([`LogReader::read_batch`]): their payloads back to back in one
/// buffer that the batch keeps from one read to the next, so a reader that reuses its
/// batch allocates nothing per record.
///
/// ```
/// # let d = tempfile::tempdir().unwrap();
/// let store = shoal::Store::open(d.path().join("l.shoal"))?;
/// let log = store.log("app", &shoal::LogOptions::new(1024, 200))?;
/// let mut drain = log.reader("drain")?;
/// for i in 0..10u8 {
///     log.append_fields(3, b"tick", &[(b"i", &[b'0' + i])])?;
/// }
/// let mut batch = shoal::RecordBatch::new();
/// assert_eq!(drain.read_batch(&mut batch, 256)?, 10);
/// for (i, r) in batch.iter().enumerate() {
///     assert_eq!((r.seq(), r.message()), (i as u64, &b"tick"[..]));
///     assert_eq!(r.fields().next(), Some((&b"i"[..], &[b'0' + i as u8][..])));
/// }
/// assert_eq!(drain.read_batch(&mut batch, 256)?, 0);
/// # Ok::<(), shoal::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct RecordBatch {
    raw: RawBatch,
}

impl RecordBatch {
    /// An empty batch.
    pub fn new() -> RecordBatch {
        RecordBatch::default()
    }

    /// How many records it holds.
    pub fn len(&self) -> usize {
        self.raw.heads.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.raw.heads.is_empty()
    }

    /// Record `i`, in sequence order.
    pub fn get(&self, i: usize) -> Option<RecordRef<'_>> {
        let head = self.raw.heads.get(i)?;
        Some(RecordRef {
            head,
            payload: self.raw.payload(i),
        })
    }

    /// Its records, in sequence order.
    pub fn iter(&self) -> RecordBatchIter<'_> {
        RecordBatchIter { batch: self, i: 0 }
    }
}

impl<'a> IntoIterator for &'a RecordBatch {
    type Item = RecordRef<'a>;
    type IntoIter = RecordBatchIter<'a>;
    fn into_iter(self) -> RecordBatchIter<'a> {
        self.iter()
    }
}

/// The records of a [`RecordBatch`], in sequence order.
#[derive(Clone, Debug)]
pub struct RecordBatchIter<'a> {
    batch: &'a RecordBatch,
    i: usize,
}

impl<'a> Iterator for RecordBatchIter<'a> {
    type Item = RecordRef<'a>;
    fn next(&mut self) -> Option<RecordRef<'a>> {
        let r = self.batch.get(self.i)?;
        self.i += 1;
        Some(r)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.batch.len() - self.i;
        (n, Some(n))
    }
}

impl ExactSizeIterator for RecordBatchIter<'_> {}

/// One record of a [`RecordBatch`], borrowed from it.
#[derive(Clone, Copy, Debug)]
pub struct RecordRef<'a> {
    head: &'a RawHead,
    payload: &'a [u8],
}

impl<'a> RecordRef<'a> {
    /// Its sequence number ([`Record::seq`]).
    pub fn seq(&self) -> u64 {
        self.head.seq
    }
    /// When it was appended, in nanoseconds since the Unix epoch.
    pub fn time_ns(&self) -> u64 {
        self.head.time
    }
    /// The process id of its writer.
    pub fn pid(&self) -> u32 {
        self.head.pid
    }
    /// The thread id (Linux `gettid`) of its writer.
    pub fn tid(&self) -> u32 {
        self.head.tid
    }
    /// Its level, as the writer gave it.
    pub fn level(&self) -> u8 {
        self.head.level
    }
    /// Its message.
    pub fn message(&self) -> &'a [u8] {
        &self.payload[..self.head.msg_len as usize]
    }
    /// Its fields: (key, value) pairs, in the writer's order.
    pub fn fields(&self) -> RecordFields<'a> {
        RecordFields {
            rest: &self.payload[self.head.msg_len as usize..],
            left: self.head.fields as usize,
        }
    }
    /// An owned copy.
    pub fn to_record(&self) -> Record {
        Record::from_ref(*self)
    }
}

/// The fields of a [`RecordRef`]: (key, value) pairs, in the writer's order.
#[derive(Clone, Debug)]
pub struct RecordFields<'a> {
    rest: &'a [u8],
    left: usize,
}

impl<'a> Iterator for RecordFields<'a> {
    type Item = (&'a [u8], &'a [u8]);
    fn next(&mut self) -> Option<(&'a [u8], &'a [u8])> {
        if self.left == 0 {
            return None;
        }
        // The payload was checked to parse when it was read (`read::parse_fields`).
        let p = self.rest;
        let k = u32::from_le_bytes(p[..4].try_into().expect("4 bytes")) as usize;
        let v = u32::from_le_bytes(p[4..8].try_into().expect("4 bytes")) as usize;
        self.rest = &p[8 + k + v..];
        self.left -= 1;
        Some((&p[8..8 + k], &p[8 + k..8 + k + v]))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for RecordFields<'_> {}

struct Inner {
    sh: Arc<Shared>,
    lg: LogRef,
    name: String,
    timeout: Duration,
}

/// A log: a ring of records in the store file that every thread of every process may
/// append to without a lock or a system call, and that named readers drain in the order
/// the records were reserved.
///
/// An append reserves a sequence number with one atomic add on the ring's tail, writes
/// its record into the slot of that number and publishes it with a final store. A
/// reader reads records in sequence order and stops at the first one not yet published.
/// If its writer died before publishing it, the reader learns so from the store's
/// liveness locks (within milliseconds), passes it as a hole and counts it
/// ([`LogReader::skipped`]); a live writer, however slow, is waited for.
///
/// ```
/// # let d = tempfile::tempdir().unwrap();
/// let store = shoal::Store::open(d.path().join("l.shoal"))?;
/// let log = store.log("app", &shoal::LogOptions::new(1024, 200))?;
/// let mut drain = log.reader("drain")?;
/// log.append(3, b"started")?;
/// log.append_fields(4, b"request", &[(b"path", b"/a"), (b"ms", b"12")])?;
/// let r = drain.read()?.expect("a record");
/// assert_eq!((r.seq(), r.level(), r.message()), (0, 3, &b"started"[..]));
/// let r = drain.read()?.expect("another");
/// assert_eq!(r.fields()[0], (b"path".to_vec(), b"/a".to_vec()));
/// assert!(drain.read()?.is_none());
/// # Ok::<(), shoal::Error>(())
/// ```
#[derive(Clone)]
pub struct Log {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log")
            .field("name", &self.inner.name)
            .field("slots", &self.inner.lg.slots)
            .field("max_record", &self.inner.lg.max_record)
            .field("policy", &self.policy())
            .finish()
    }
}

impl Log {
    pub(crate) fn new(sh: Arc<Shared>, lg: LogRef, name: &str) -> Log {
        let timeout = sh.lock_timeout;
        Log {
            inner: Arc::new(Inner {
                sh,
                lg,
                name: name.into(),
                timeout,
            }),
        }
    }

    /// The log's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Records its ring holds.
    pub fn slots(&self) -> u64 {
        self.inner.lg.slots
    }

    /// The largest record, in bytes (its message, and for each field its key, its value
    /// and 8 bytes).
    pub fn max_record(&self) -> usize {
        self.inner.lg.max_record as usize
    }

    /// What an append does when the ring is full.
    pub fn policy(&self) -> FullPolicy {
        FullPolicy::of(self.inner.lg.policy)
    }

    /// Appends a record of `level` and `message`: its sequence number, or None if the
    /// ring was full and the log drops ([`FullPolicy::Drop`]). A record larger than
    /// [`Log::max_record`] fails with `InvalidArgument` and changes nothing.
    pub fn append(&self, level: u8, message: &[u8]) -> Result<Option<u64>> {
        self.append_timeout(level, message, &[], self.inner.timeout)
    }

    /// [`Log::append`] with fields: (key, value) pairs that a reader gets back apart.
    pub fn append_fields(
        &self,
        level: u8,
        message: &[u8],
        fields: &[(&[u8], &[u8])],
    ) -> Result<Option<u64>> {
        self.append_timeout(level, message, fields, self.inner.timeout)
    }

    /// [`Log::append_fields`] waiting at most `timeout` for room ([`FullPolicy::Wait`]),
    /// or, under [`FullPolicy::Overwrite`], for a writer still writing the slot a ring
    /// behind; then `Error::Timeout`.
    pub fn append_timeout(
        &self,
        level: u8,
        message: &[u8],
        fields: &[(&[u8], &[u8])],
        timeout: Duration,
    ) -> Result<Option<u64>> {
        let _call = crate::deadline::call();
        let (sh, lg) = (&*self.inner.sh, &self.inner.lg);
        let d = Draft {
            level,
            message,
            fields,
        };
        let len = d.payload_len();
        if len > lg.max_record
            || fields.len() as u64 > MAX_LOG_FIELDS
            || fields
                .iter()
                .any(|(k, v)| k.len() > u32::MAX as usize || v.len() > u32::MAX as usize)
        {
            return Err(kl::append::too_large(lg, &self.inner.name, len));
        }
        let t = crate::txn::thread_txn(&self.inner.sh)?;
        let section = crate::txn::Section::enter(sh, t);
        kl::append(sh, lg, t, &section, &d, timeout)
    }

    /// The reader `name`, created if the log has none by that name: a cursor kept in the
    /// store file, so that a reader opened again (by a restarted process) resumes where
    /// the last one stopped. A new reader starts at the oldest record the ring still
    /// holds. Handles on the same reader (in any process) share its cursor: each record
    /// goes to one of them. `StoreFull` if the log has its maximum of readers.
    pub fn reader(&self, name: &str) -> Result<LogReader> {
        let _call = crate::deadline::call();
        if name.is_empty() || name.len() > MAX_READER_NAME {
            return Err(Error::InvalidArgument(format!(
                "reader names are 1 to {MAX_READER_NAME} bytes"
            )));
        }
        let (sh, lg) = (&*self.inner.sh, &self.inner.lg);
        if !lg.alive(sh) {
            return Err(lg.dropped());
        }
        let t = crate::txn::thread_txn(&self.inner.sh)?;
        let mut tx = crate::txn::Op::new(sh, t);
        tx.timeout = self.inner.timeout;
        let lock = lg.hdr + LH_READERS_LOCK;
        tx.lock(lock)?;
        let r = (|| {
            if let Some(i) = self.find_reader(name) {
                return Ok(i);
            }
            let i = (0..lg.readers)
                .find(|i| sh.w(lg.reader(*i) + R_STATE).load(Acquire) & 0xff == 0)
                .ok_or_else(|| {
                    Error::StoreFull(format!(
                        "log {:?} has its maximum of {} readers",
                        self.inner.name, lg.readers
                    ))
                })?;
            let e = lg.reader(i);
            let tail = sh.w(lg.hdr + LH_TAIL).load(SeqCst);
            let start = sh
                .w(lg.hdr + LH_FLOOR)
                .load(SeqCst)
                .max(tail.saturating_sub(lg.slots))
                .min(tail);
            sh.w(e + R_CURSOR).store(start, Relaxed);
            sh.w(e + R_MISSED).store(0, Relaxed);
            sh.w(e + R_SKIPPED).store(0, Relaxed);
            sh.w(e + R_NAME_LEN).store(name.len() as u64, Relaxed);
            sh.r.write_bytes(e + R_NAME, name.as_bytes());
            let inc = (sh.w(e + R_STATE).load(Relaxed) >> 8) + 1;
            // The state last: a registration cut short leaves a free entry.
            sh.w(e + R_STATE).store(1 | inc << 8, SeqCst);
            Ok(i)
        })();
        tx.unlock(lock);
        let i = r?;
        Ok(LogReader {
            log: self.clone(),
            idx: i,
            rstate: sh.w(lg.reader(i) + R_STATE).load(Acquire),
            buf: RecordBatch::new(),
        })
    }

    fn find_reader(&self, name: &str) -> Option<u64> {
        let (sh, lg) = (&*self.inner.sh, &self.inner.lg);
        (0..lg.readers).find(|i| {
            let e = lg.reader(*i);
            sh.w(e + R_STATE).load(Acquire) & 0xff == 1
                && sh.w(e + R_NAME_LEN).load(Acquire) == name.len() as u64
                && sh.r.bytes_eq(e + R_NAME, name.as_bytes())
        })
    }

    /// Removes the reader `name` (its cursor is forgotten: under the wait and drop
    /// policies, writers no longer wait for it); returns whether it existed. Handles on it
    /// get `NotFound` from then on.
    pub fn remove_reader(&self, name: &str) -> Result<bool> {
        let _call = crate::deadline::call();
        let (sh, lg) = (&*self.inner.sh, &self.inner.lg);
        let t = crate::txn::thread_txn(&self.inner.sh)?;
        let mut tx = crate::txn::Op::new(sh, t);
        tx.timeout = self.inner.timeout;
        let lock = lg.hdr + LH_READERS_LOCK;
        tx.lock(lock)?;
        let found = self.find_reader(name);
        if let Some(i) = found {
            let e = lg.reader(i);
            let inc = (sh.w(e + R_STATE).load(Relaxed) >> 8) + 1;
            sh.w(e + R_STATE).store(inc << 8, SeqCst);
        }
        tx.unlock(lock);
        if found.is_some() && lg.policy == LP_WAIT {
            lg.wake_room(sh);
        }
        Ok(found.is_some())
    }

    /// Figures of the log and of each of its readers.
    pub fn stats(&self) -> Result<LogStats> {
        let (sh, lg) = (&*self.inner.sh, &self.inner.lg);
        if !lg.alive(sh) {
            return Err(lg.dropped());
        }
        let h = |o: u64| sh.w(lg.hdr + o).load(Acquire);
        let readers = (0..lg.readers)
            .filter(|i| sh.w(lg.reader(*i) + R_STATE).load(Acquire) & 0xff == 1)
            .map(|i| {
                let e = lg.reader(i);
                ReaderStats {
                    name: lg.reader_name(sh, i),
                    position: sh.w(e + R_CURSOR).load(Acquire),
                    missed: sh.w(e + R_MISSED).load(Acquire),
                    skipped: sh.w(e + R_SKIPPED).load(Acquire),
                }
            })
            .collect();
        Ok(LogStats {
            appended: h(LH_TAIL),
            dropped: h(LH_DROPPED),
            holes: h(LH_HOLES),
            readers,
        })
    }
}

/// A named reader of a [`Log`] ([`Log::reader`]): reads its records in sequence order,
/// each once, from a cursor kept in the store file.
pub struct LogReader {
    log: Log,
    idx: u64,
    rstate: u64,
    buf: RecordBatch,
}

impl std::fmt::Debug for LogReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogReader")
            .field("log", &self.log.inner.name)
            .field("position", &self.position())
            .finish()
    }
}

/// How long a sleeping reader sleeps at most before it looks again: a writer that died
/// after reserving wakes nobody, and its hole must cost the reader milliseconds.
const NAP: Duration = Duration::from_millis(5);

/// How many times a reader that found nothing looks again before it sleeps (each look a
/// few loads: some microseconds in all).
const SPIN_LOOKS: u32 = 200;

impl LogReader {
    fn entry(&self) -> u64 {
        self.log.inner.lg.reader(self.idx)
    }

    /// The next record, or None if every record reserved so far was read (or the next
    /// one is still being written by a live writer). Never waits. Records overwritten
    /// before this reader got to them are counted ([`LogReader::missed`]), and so are
    /// the holes of writers that died before publishing ([`LogReader::skipped`]).
    ///
    /// The cursor moves past a record as it is returned: a process killed between this
    /// call and its use of the record does not see it again.
    pub fn read(&mut self) -> Result<Option<Record>> {
        let _call = crate::deadline::call();
        let mut buf = std::mem::take(&mut self.buf);
        let r = self.read_raw(1, &mut buf);
        self.buf = buf;
        Ok(match r? {
            Next::Record => self.buf.get(0).map(Record::from_ref),
            _ => None,
        })
    }

    /// The next records, at most `max` (at least one), into `batch` (emptied first): as
    /// many as were published in a row from the cursor, in one pass that moves the cursor
    /// past all of them at once. How many it read; 0 as [`LogReader::read`]'s None. The
    /// way to drain a busy log: per record, no allocation and no atomic write.
    pub fn read_batch(&mut self, batch: &mut RecordBatch, max: usize) -> Result<usize> {
        let _call = crate::deadline::call();
        self.read_raw(max, batch)?;
        Ok(batch.len())
    }

    fn read_raw(&mut self, max: usize, batch: &mut RecordBatch) -> Result<Next> {
        let inner = &self.log.inner;
        let t = crate::txn::thread_txn(&inner.sh)?;
        // Reading moves the reader's cursor in the file: a write.
        let _section = crate::txn::Section::enter(&inner.sh, t);
        let e = self.entry();
        kl::read_next(&inner.sh, &inner.lg, t, e, self.rstate, max, &mut batch.raw)
    }

    /// The next record, waiting up to `timeout` for one to be published (a writer wakes
    /// a sleeping reader); None if none came.
    pub fn read_wait(&mut self, timeout: Duration) -> Result<Option<Record>> {
        let _call = crate::deadline::call();
        let mut buf = std::mem::take(&mut self.buf);
        let r = self.wait_raw(1, &mut buf, timeout);
        self.buf = buf;
        Ok(match r? {
            Next::Record => self.buf.get(0).map(Record::from_ref),
            _ => None,
        })
    }

    /// [`LogReader::read_batch`], waiting up to `timeout` for a first record to be
    /// published; 0 if none came.
    pub fn read_batch_wait(
        &mut self,
        batch: &mut RecordBatch,
        max: usize,
        timeout: Duration,
    ) -> Result<usize> {
        let _call = crate::deadline::call();
        self.wait_raw(max, batch, timeout)?;
        Ok(batch.len())
    }

    fn wait_raw(&mut self, max: usize, batch: &mut RecordBatch, timeout: Duration) -> Result<Next> {
        let until = Instant::now().checked_add(timeout);
        let (sh, lg) = (&*self.log.inner.sh.clone(), self.log.inner.lg);
        loop {
            let seen = kl::futex_seen(sh, lg.hdr + LH_WAKE);
            if let Next::Record = self.read_raw(max, batch)? {
                return Ok(Next::Record);
            }
            let left = match until {
                Some(u) => u.saturating_duration_since(Instant::now()),
                None => Duration::MAX,
            };
            if left.is_zero() {
                return Ok(Next::Empty);
            }
            // A busy log's next record is usually a writer's few hundred nanoseconds away:
            // looking again for a few microseconds spares that writer a futex wake (a
            // system call of a microsecond or more on a shared mapping).
            let mut spun = 0;
            while spun < SPIN_LOOKS && !self.ready(sh, &lg) {
                std::hint::spin_loop();
                spun += 1;
            }
            if spun < SPIN_LOOKS {
                continue;
            }
            let sleepers = sh.w(lg.hdr + LH_SLEEPERS);
            sleepers.fetch_add(1, SeqCst);
            // Look again now that writers can see us: a record published before they
            // could is not missed.
            if !self.ready(sh, &lg) {
                kl::sleep_on(sh, lg.hdr + LH_WAKE, seen, left.min(NAP));
            }
            let _ = sleepers.fetch_update(SeqCst, Relaxed, |v| v.checked_sub(1));
        }
    }

    /// Whether the slot at the cursor holds something to act on (a published record, a
    /// hole, a newer record): a cheap look before sleeping.
    fn ready(&self, sh: &Shared, lg: &LogRef) -> bool {
        let c = sh.w(self.entry() + R_CURSOR).load(SeqCst);
        if c >= sh.w(lg.hdr + LH_TAIL).load(SeqCst) {
            return false;
        }
        let st = sh.w(lg.slot(c) + S_STATE).load(SeqCst);
        st >> 2 > c || (st >> 2 == c && st & 3 >= RS_PUBLISHED)
    }

    /// The next sequence number this reader reads.
    pub fn position(&self) -> u64 {
        let sh = &self.log.inner.sh;
        sh.w(self.entry() + R_CURSOR).load(Acquire)
    }

    /// Records overwritten before this reader (under its name, since it was created) read
    /// them.
    pub fn missed(&self) -> u64 {
        let sh = &self.log.inner.sh;
        sh.w(self.entry() + R_MISSED).load(Acquire)
    }

    /// Holes this reader (under its name, since it was created) passed: records whose
    /// writer died before publishing them.
    pub fn skipped(&self) -> u64 {
        let sh = &self.log.inner.sh;
        sh.w(self.entry() + R_SKIPPED).load(Acquire)
    }

    /// The log it reads.
    pub fn log(&self) -> &Log {
        &self.log
    }
}
