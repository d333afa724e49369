//! The backup itself: it takes the epoch, waits for the write sections in flight, stores
//! the instant, then walks the blocks, writing each to the output as it was at the
//! instant (from the store if nobody wrote it since, else from the writer's saved copy).

use super::epoch;
use super::state::{self, Copier};
use crate::error::{Error, Result};
use crate::format::*;
use crate::mem::copy::BLOCK;
use crate::shared::Shared;
use std::fs::File;
use std::sync::atomic::Ordering::*;
use std::time::{Duration, Instant};

/// How long the preparation waits for the write sections in flight before it gives the
/// epoch up for a while (so that a program whose open write transaction waits for another
/// thread's write cannot deadlock with it).
const PREPARE_LIMIT: Duration = Duration::from_secs(2);
/// Preparations tried before the backup fails with [`Error::Timeout`].
const PREPARE_TRIES: u32 = 3;

/// Copies the store mapped by `sh`, as of one instant, into `out` (an empty file), from
/// the calling thread, whose txn slot is `t`. Returns the bytes the copy spans.
pub(crate) fn run(sh: &Shared, t: u64, out: &File) -> Result<u64> {
    if !sh.g.backup {
        return Err(Error::InvalidArgument(format!(
            "{} was created by an older version of Shoal, whose writers know no hot \
             backup: close it everywhere and use Store::backup_idle",
            sh.path.display()
        )));
    }
    if epoch::depth(sh, t) > 0 {
        return Err(Error::InvalidArgument(
            "a backup cannot run inside a write of its own thread (an open ordered write \
             transaction)"
                .into(),
        ));
    }
    let gen = txn_owner_parts(sh.owner_word.load(Relaxed)).1;
    // Every backup its own epoch: a process still joined to the last one (whose blocks
    // are all written out) must see this one as new, and join it. Numbered per process
    // (26 bits: they come back after 67 M backups of one process).
    static NUMBER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let number = NUMBER.fetch_add(1, Relaxed) & ((1 << 26) - 1);
    let prep = backup_epoch(EPOCH_PREPARING, t, gen, number);
    let active = backup_epoch(EPOCH_ACTIVE, t, gen, number);
    // The state file's memory is allocated now, while writers run, not once they wait
    // for the instant (seconds for a large store).
    let pre = state::prepare(sh, sh.file_end());
    let mut tries = 0;
    loop {
        take(sh, prep)?;
        crate::rt::failpoint!("backup.epoch_start");
        if drained(sh, t) {
            break;
        }
        epoch::end(sh, prep);
        tries += 1;
        if tries == PREPARE_TRIES {
            return Err(Error::Timeout(PREPARE_LIMIT * PREPARE_TRIES));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let path = match state::path(sh, active) {
        Ok(p) => p,
        Err(e) => {
            epoch::end(sh, prep);
            return Err(e);
        }
    };
    state::remove_stale(sh, &path);
    let r = copy(sh, prep, active, out, pre);
    epoch::end(sh, prep);
    epoch::end(sh, active);
    let _ = std::fs::remove_file(&path);
    r
}

/// Stores epoch `prep` in the header, once no live backup holds it (waiting for one, up
/// to the store's lock timeout).
fn take(sh: &Shared, prep: u64) -> Result<()> {
    let start = Instant::now();
    let w = sh.w(H_BACKUP);
    loop {
        let cur = w.load(SeqCst);
        if cur == 0 {
            if w.compare_exchange(0, prep, SeqCst, Relaxed).is_ok() {
                return Ok(());
            }
            continue;
        }
        if !epoch::owner_alive(sh, cur) {
            epoch::end(sh, cur);
            continue;
        }
        if start.elapsed() > sh.lock_timeout {
            return Err(Error::Timeout(start.elapsed()));
        }
        epoch::wait(sh, cur, Duration::from_millis(5));
    }
}

/// Waits until no txn slot but `t` has a live write section open, [`PREPARE_LIMIT`] at
/// most. Sections entering meanwhile see the epoch preparing and wait at their entry.
fn drained(sh: &Shared, t: u64) -> bool {
    let until = Instant::now() + PREPARE_LIMIT;
    let slots = (0..sh.g.n_txn).filter(|&u| u != t).map(Ok);
    let procs = (0..sh.g.n_proc).map(Err);
    for who in slots.chain(procs) {
        let open = || match who {
            Ok(u) => epoch::in_section(sh, u),
            Err(p) => epoch::process_in_section(sh, p),
        };
        let mut spins = 0u32;
        while open() {
            if Instant::now() > until {
                return false;
            }
            spins += 1;
            if spins < 100 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }
    true
}

/// From the drained preparation `prep` on: the state file, the instant, the walk.
fn copy(
    sh: &Shared,
    prep: u64,
    active: u64,
    out: &File,
    pre: Option<state::Prepared>,
) -> Result<u64> {
    let limit = sh.file_end();
    let c = Copier::create(sh, active, limit, pre)?;
    if sh
        .w(H_BACKUP)
        .compare_exchange(prep, active, SeqCst, Relaxed)
        .is_err()
    {
        return Err(cancelled());
    }
    epoch::wake(sh);
    let mut buf = Vec::with_capacity(BLOCK as usize);
    for b in 0..c.blocks() {
        crate::rt::failpoint!("backup.claim");
        c.write_out(b, out, &mut buf, |bytes| {
            if b == 0 {
                // The copy's header: no backup runs in it.
                let at = H_BACKUP as usize;
                bytes[at..at + 8].fill(0);
            }
        })
        .map_err(|e| Error::io(&sh.path, e))?;
        if b % 64 == 63 && sh.w(H_BACKUP).load(Acquire) != active {
            return Err(cancelled());
        }
    }
    out.set_len(c.limit()).map_err(|e| Error::io(&sh.path, e))?;
    if c.failed() {
        return Err(Error::StoreFull(
            "a writer could not save a block for the backup (no room for its state file)".into(),
        ));
    }
    crate::rt::failpoint!("backup.epoch_end");
    if !epoch::end(sh, active) {
        return Err(cancelled());
    }
    Ok(c.limit())
}

/// The epoch was ended under the walk: by a writer that could not join it (it could not
/// open or map the state file), or that waited too long for it.
fn cancelled() -> Error {
    Error::InvalidArgument(
        "the backup was cancelled by a writer that could not copy blocks for it".into(),
    )
}
