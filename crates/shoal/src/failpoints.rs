//! Fault injection for tests (only with the `failpoints` feature).
//!
//! Every multi-step mutation has named fail points between its steps. A test process
//! calls [`setup`] and configures points through the `FAILPOINTS` environment variable,
//! e.g. `FAILPOINTS="write.committed=1*sleep(2000)"`, or with [`kill_at`] makes one abort
//! the process (as SIGKILL would) the n-th time it is reached. [`NAMES`] lists them all.

/// Every fail point in the engine, in the order a write reaches them. Three more points are
/// not steps of a mutation and not listed: `snapshot.optimistic` (see [`force_return`]);
/// `store.flush`, reached at every flush (`sync_writes`, `Store::flush`), which the batch
/// test counts with [`counter`]; and `reclaim.proc_unlocked`, reached when a process
/// found the slot of a dead process still marked attached and is about to mark it free,
/// where `tests/liveness.rs` lets another process attach to that slot.
pub const NAMES: &[&str] = &[
    "append.written",
    "append.bumped",
    "alloc.grown",
    "alloc.committed",
    "alloc.applied",
    "alloc.merge_committed",
    "alloc.merged",
    "alloc.released_marked",
    "alloc.release_slice",
    "write.locked",
    "write.committed",
    "write.half_applied",
    "write.applied",
    "inplace.committed",
    "inplace.half_applied",
    "split.doubled",
    "split.building",
    "split.built",
    "split.published",
    "split.removing",
    "split.done",
    "fixed.locked",
    "fixed.cell_written",
    "fixed.committed",
    "fixed.half_applied",
    "fixed.applied",
    "fixed.displacing",
    "fixed.displaced",
    "fixed.add_counted",
    "fixed.add_applied",
    "fixed.split.building",
    "fixed.split.built",
    "fixed.split.published",
    "fixed.split.removing",
    "fixed.split.done",
    "fixed.move.copying",
    "fixed.move.copied",
    "fixed.move.published",
    "fixed.move.removing",
    "fixed.move.done",
    "uid.dir_allocated",
    "uid.block_allocated",
    "uid.taken",
    "clean.victim",
    "clean.moved",
    "clean.freeing",
    "recover.claimed",
    "recover.replayed",
];

/// The fail points of queue sets, in the order a move reaches them: every step of a push,
/// a pull, a move between queues and a sweep of a dead holder's elements. Their own crash
/// driver, `crates/shoal/tests/queue_crash.rs`, reaches them all (the map workload of the
/// driver of [`NAMES`] has no queues).
pub const QUEUE_NAMES: &[&str] = &[
    "queue.push.locked",
    "queue.push.committed",
    "queue.push.half_applied",
    "queue.push.applied",
    "queue.pull.locked",
    "queue.pull.committed",
    "queue.pull.half_applied",
    "queue.pull.applied",
    "queue.move.locked",
    "queue.move.committed",
    "queue.sweep.locked",
    "queue.sweep.returned",
];

/// The fail points of logs, in the order an append reaches them: every step between
/// announcing itself and leaving the writer table, and a reader's turning a dead
/// writer's slot into a hole. Their own crash driver, `crates/shoal/tests/log_crash.rs`,
/// reaches them all.
pub const LOG_NAMES: &[&str] = &[
    "log.reserving",
    "log.reserved",
    "log.claimed",
    "log.half_written",
    "log.written",
    "log.published",
    "log.hole",
];

/// The fail points of ordered maps, in the order a write transaction reaches them: the
/// creation of a map, then every step of a commit. Their crash driver,
/// `crates/shoal/tests/ordered_crash.rs`, reaches them all.
pub const ORDERED_NAMES: &[&str] = &[
    "ordered.create.cataloged",
    "ordered.commit.pages_written",
    "ordered.commit.table_cleared",
    "ordered.commit.table_written",
    "ordered.commit.published",
];

/// The fail points of a hot backup, in the order it reaches them: its epoch stored as
/// preparing, each block's claim by the walk, and the walk done before the epoch ends.
/// Their driver is `crates/shoal-torture/tests/backup_storm.rs`.
pub const BACKUP_NAMES: &[&str] = &["backup.epoch_start", "backup.claim", "backup.epoch_end"];

/// The fail points of a multi-key transaction's commit, in the order it reaches them:
/// all segment locks held, one write planned (of several), the plan built (new keys'
/// cells written), the redo list committed, its bucket headers made odd and UID versions
/// busy (no value byte changed yet, in place or not), half of it applied, all of it
/// applied. Their crash driver is
/// `crates/shoal/tests/txn.rs` (`crash_at_every_transaction_fail_point`). One more point
/// is not a step of a mutation and not listed: `txn.snapshot_read`, reached by a snapshot
/// read between its reads and its re-check.
pub const TXN_NAMES: &[&str] = &[
    "txn.locked",
    "txn.op_planned",
    "txn.planned",
    "txn.committed",
    "txn.marked",
    "txn.half_applied",
    "txn.applied",
];

/// Reads `FAILPOINTS` from the environment. Call once, early, in the test process.
pub fn setup() {
    std::mem::forget(fail::FailScenario::setup());
}

/// Makes fail point `name` abort the process the `hit`-th time (1 = first) it is
/// reached: a crash at exactly that step, as SIGKILL would cause (no unwinding, no
/// destructors, locks and intents left as they are).
pub fn kill_at(name: &str, hit: u64) -> Result<(), String> {
    let seen = std::sync::atomic::AtomicU64::new(0);
    fail::cfg_callback(name, move || {
        if seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == hit {
            std::process::abort();
        }
    })
}

/// Counts the times fail point `name` is reached from now on (without changing what it
/// does otherwise): the crash tests' census of how often a workload reaches each point.
pub fn counter(name: &str) -> Result<std::sync::Arc<std::sync::atomic::AtomicU64>, String> {
    let n = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let c = n.clone();
    fail::cfg_callback(name, move || {
        c.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    })?;
    Ok(n)
}

/// Runs `f` every time fail point `name` is reached, in the thread that reaches it (with
/// whatever locks and intents that step holds): the fuzz seeds' snapshots of a store
/// mid-write. [`clear`] undoes it.
pub fn callback(name: &str, f: impl Fn() + Send + Sync + 'static) -> Result<(), String> {
    fail::cfg_callback(name, f)
}

/// Makes fail point `name` do nothing again.
pub fn clear(name: &str) {
    fail::remove(name);
}

/// Makes fail point `name` return early every time it is reached, where the engine gives
/// it a way to (`snapshot.optimistic`: an optimistic iteration copy fails, so iteration
/// takes the segment lock). Not in [`NAMES`]: no mutation stops there.
pub fn force_return(name: &str) -> Result<(), String> {
    fail::cfg(name, "return")
}
