//! The state file of one backup epoch, shared by every process of the store, and this
//! process's copier over it.
//!
//! Layout (little-endian words): at 0 a magic, at 8 the epoch (phase bits clear), at 16
//! the number of blocks `n` the copy covers (the store's `file_end` at the instant, in
//! [`BLOCK`]s), at 24 a failure mark (non-zero once a writer could not save a block), at
//! 32 non-zero if the backup allocated the whole data area before the instant; from
//! [`WORDS`] one word per block: 0 untouched, the owner word of the process copying it,
//! [`COPIED`] (a writer saved it here, at `data_off + b × BLOCK`, `data_off` being the
//! first multiple of [`BLOCK`] past the words), or [`DONE`] (in the backup's output).
//!
//! The file lives in `/dev/shm` (the store's directory where there is none) so that a
//! writer's copy is a copy from memory to memory. The backup allocates its data area
//! before it takes the epoch, while writers run freely ([`prepare`]): a writer's save is
//! then a copy into pages that exist, through a mapping (no page allocation, which the
//! kernel can take milliseconds to give, and no `pwrite`, which waits for the file's lock
//! while the walk punches a hole). The walk punches each run of blocks it has written out
//! out of the file, so the state file and the output together take about one store's
//! memory. Where the area could not be allocated, saves are `pwrite`s (a full `/dev/shm`
//! then fails the backup, where a fault through the mapping would raise `SIGBUS`).

use crate::error::{Error, Result};
use crate::format::*;
use crate::mem::copy::{BlockCopier, BLOCK};
use crate::mem::{How, Mapping, Region, SharedWord};
use crate::shared::{owner_alive_in, Shared};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::*};
use std::time::{Duration, Instant};

const MAGIC: u64 = u64::from_le_bytes(*b"SHOALBK1");
const S_MAGIC: u64 = 0;
const S_FAILED: u64 = 24;
/// Non-zero: the data area is allocated, and saves go through the mapping.
const S_ALLOCATED: u64 = 32;
/// Blocks the walk punches out of the state file at a time (1 MiB): fewer holds of the
/// file's lock than one a block.
const RELEASE_RUN: u64 = 16;
/// Offset of block 0's word.
const WORDS: u64 = 4096;
/// Block word: a writer saved the block in the state file.
const COPIED: u64 = 2;
/// Block word: the block is in the output.
const DONE: u64 = 4;

/// What a claim of a block found.
pub(super) enum Claim {
    /// The caller holds the block: nobody writes it until the caller marks it.
    Mine,
    /// A writer saved it in the state file first.
    Copied,
    /// It is in the output already.
    Done,
}

/// This process's view of one epoch's state file, over one mapping of the store.
pub(crate) struct Copier {
    file: File,
    /// The words, and the data area too if [`S_ALLOCATED`].
    map: Mapping,
    n: u64,
    data_off: u64,
    /// Saves go through `map` ([`S_ALLOCATED`]).
    mapped: bool,
    /// The store's mapping. The copier is registered for it only while the store's
    /// `Shared` lives (it forgets the registration before unmapping), and used only by
    /// writes to the store and by the backup, which hold the `Shared`.
    store: Region,
    g: Geometry,
    store_file: File,
    me: u64,
}

/// The directory of the state files: every process of a store must name the same one.
fn dir(sh: &Shared) -> PathBuf {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        return shm.to_owned();
    }
    sh.path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."))
        .to_owned()
}

/// The name shared by the state files of `sh`'s store: its device and inode.
pub(super) fn prefix(sh: &Shared) -> Result<String> {
    let md = sh.file.metadata().map_err(|e| Error::io(&sh.path, e))?;
    Ok(format!(".shoal-backup-{:x}-{:x}-", md.dev(), md.ino()))
}

/// The state file of epoch `e` (either phase).
pub(super) fn path(sh: &Shared, e: u64) -> Result<PathBuf> {
    Ok(dir(sh).join(format!("{}{:x}", prefix(sh)?, e >> 2)))
}

/// Removes the state files of `sh`'s store other than `keep`'s: left by backups that died.
pub(super) fn remove_stale(sh: &Shared, keep: &std::path::Path) {
    let (Ok(p), Ok(rd)) = (prefix(sh), std::fs::read_dir(dir(sh))) else {
        return;
    };
    for ent in rd.flatten() {
        if ent.file_name().to_string_lossy().starts_with(&p) && ent.path() != keep {
            let _ = std::fs::remove_file(ent.path());
        }
    }
}

fn data_off(n: u64) -> u64 {
    (WORDS + 8 * n).next_multiple_of(BLOCK)
}

/// A state file made ahead of its epoch ([`prepare`]).
pub(super) struct Prepared {
    file: File,
    /// Blocks its data area is laid out for.
    n: u64,
    /// Whether that whole area is allocated.
    allocated: bool,
}

/// A state file made ahead of its epoch: unnamed (the kernel removes it if the backup
/// dies before naming it), its data area allocated for a copy of `limit` bytes if memory
/// allows. `None` where the directory has no unnamed files: [`Copier::create`] then makes
/// a named file without allocating it.
pub(super) fn prepare(sh: &Shared, limit: u64) -> Option<Prepared> {
    let file = crate::sys::create_unnamed(&dir(sh), 0o600).ok()??;
    let n = limit.div_ceil(BLOCK);
    file.set_len(data_off(n) + n * BLOCK).ok()?;
    let allocated = crate::sys::allocate(&file, data_off(n), n * BLOCK).is_ok();
    Some(Prepared { file, n, allocated })
}

impl Copier {
    /// Makes epoch `e`'s state file for a copy of the first `limit` bytes of the store (a
    /// multiple of [`BLOCK`]: `file_end` is a chunk boundary), from `pre` (see
    /// [`prepare`]) if there is one.
    pub(super) fn create(sh: &Shared, e: u64, limit: u64, pre: Option<Prepared>) -> Result<Copier> {
        let p = path(sh, e)?;
        let n = limit.div_ceil(BLOCK);
        let fail = |x| Error::io(&p, x);
        let (file, allocated) = match pre {
            Some(Prepared {
                file,
                n: n0,
                allocated,
            }) => {
                file.set_len(data_off(n) + n * BLOCK).map_err(fail)?;
                // Writers wait for the instant now: only the blocks the store grew by since
                // `prepare` are allocated here (a walk over the whole area would take
                // seconds). A grown block map moves the data area: saves go by `pwrite`.
                let allocated = allocated
                    && data_off(n) == data_off(n0)
                    && (n <= n0
                        || crate::sys::allocate(&file, data_off(n) + n0 * BLOCK, (n - n0) * BLOCK)
                            .is_ok());
                crate::sys::link_unnamed(&file, &p).map_err(fail)?;
                (file, allocated)
            }
            None => {
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .custom_flags(libc::O_CLOEXEC)
                    .open(&p)
                    .map_err(fail)?;
                file.set_len(data_off(n) + n * BLOCK).map_err(fail)?;
                (file, false)
            }
        };
        // Magic, epoch, blocks, failure mark, allocated (S_MAGIC .. S_ALLOCATED).
        let mut h = [0u8; S_ALLOCATED as usize + 8];
        for (i, v) in [MAGIC, e & !3, n, 0, allocated as u64].iter().enumerate() {
            h[8 * i..8 * i + 8].copy_from_slice(&v.to_le_bytes());
        }
        file.write_all_at(&h, S_MAGIC).map_err(fail)?;
        Self::with_file(sh, file, n, allocated)
    }

    /// Opens epoch `e`'s state file, made by the backup before it stored the epoch.
    pub(super) fn open(sh: &Shared, e: u64) -> Result<Copier> {
        let p = path(sh, e)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(&p)
            .map_err(|x| Error::io(&p, x))?;
        let mut h = [0u8; S_ALLOCATED as usize + 8];
        file.read_exact_at(&mut h, S_MAGIC)
            .map_err(|x| Error::io(&p, x))?;
        let word = |i: usize| u64::from_le_bytes(h[8 * i..8 * i + 8].try_into().expect("8"));
        let n = word(2);
        let size = file.metadata().map_err(|x| Error::io(&p, x))?.len();
        if word(0) != MAGIC || word(1) != e & !3 || size < data_off(n) {
            return Err(Error::InvalidArgument(format!(
                "{} is not the state file of this backup",
                p.display()
            )));
        }
        Self::with_file(sh, file, n, word(S_ALLOCATED as usize / 8) != 0)
    }

    fn with_file(sh: &Shared, file: File, n: u64, mapped: bool) -> Result<Copier> {
        let len = if mapped {
            data_off(n) + n * BLOCK
        } else {
            data_off(n)
        };
        let map = Mapping::map(&file, len, How::Shared).map_err(|x| Error::io(&sh.path, x))?;
        let store_file = sh.file.try_clone().map_err(|x| Error::io(&sh.path, x))?;
        Ok(Copier {
            file,
            map,
            n,
            data_off: data_off(n),
            mapped,
            store: sh.r.local(),
            g: sh.g,
            store_file,
            me: sh.owner_word.load(Relaxed),
        })
    }

    /// Bytes of the store the copy covers.
    pub(super) fn limit(&self) -> u64 {
        self.n * BLOCK
    }

    /// Blocks the copy covers.
    pub(super) fn blocks(&self) -> u64 {
        self.n
    }

    /// Whether a writer failed to save a block (the copy is then not the instant's).
    pub(super) fn failed(&self) -> bool {
        self.slot(S_FAILED).load(Acquire) != 0
    }

    // The state file's words are written by the backup's processes only, and a copy of
    // the store never holds them: no hook.
    fn slot(&self, off: u64) -> &AtomicU64 {
        &SharedWord::as_atomics(self.map.words(off, 1))[0]
    }

    fn word(&self, b: u64) -> &AtomicU64 {
        self.slot(WORDS + 8 * b)
    }

    fn alive(&self, owner: u64) -> bool {
        owner_alive_in(&self.store, &self.g, &self.store_file, self.me, owner)
    }

    /// Takes block `b` for the caller, or finds it saved: waits while another live process
    /// copies it, and takes it over from a dead one (whose copy was never marked done, and
    /// before whose mark nobody wrote the block).
    pub(super) fn claim(&self, b: u64) -> Claim {
        let w = self.word(b);
        let mut spins = 0u32;
        // Read only once the block is found claimed: a claim of a block already saved or
        // written out (nearly every call) is one load, no clock.
        let mut looked: Option<Instant> = None;
        loop {
            let v = w.load(Acquire);
            match v {
                COPIED => return Claim::Copied,
                DONE => return Claim::Done,
                0 => {
                    if w.compare_exchange(0, self.me, AcqRel, Acquire).is_ok() {
                        return Claim::Mine;
                    }
                    continue;
                }
                _ => {}
            }
            // A live copier takes microseconds: spin, then nap; look at its liveness
            // every few milliseconds only (a system call).
            let since = *looked.get_or_insert_with(Instant::now);
            if since.elapsed() > Duration::from_millis(5) {
                looked = Some(Instant::now());
                if !self.alive(v) && w.compare_exchange(v, self.me, AcqRel, Acquire).is_ok() {
                    return Claim::Mine;
                }
            }
            spins += 1;
            if spins < 200 {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(Duration::from_micros(20));
            }
        }
    }

    /// Marks block `b`, claimed by the caller, as `v`.
    fn mark(&self, b: u64, v: u64) {
        self.word(b).store(v, Release);
    }

    /// The bytes of block `b` as the store holds them now.
    fn read_store(&self, b: u64, buf: &mut Vec<u8>) {
        buf.resize(BLOCK as usize, 0);
        self.store.read_bytes(b * BLOCK, buf);
    }

    /// Writes block `b` into `out` at its place: from the store (the caller claimed it)
    /// or from the state file (a writer saved it), skipping blocks of zeros (the output
    /// is sparse). `patch` edits the block's bytes before they are written.
    pub(super) fn write_out(
        &self,
        b: u64,
        out: &File,
        buf: &mut Vec<u8>,
        patch: impl FnOnce(&mut [u8]),
    ) -> std::io::Result<()> {
        let r = (|| {
            match self.claim(b) {
                Claim::Done => return Ok(()),
                Claim::Mine => self.read_store(b, buf),
                Claim::Copied => {
                    buf.resize(BLOCK as usize, 0);
                    self.file.read_exact_at(buf, self.data_off + b * BLOCK)?;
                }
            }
            patch(buf);
            if buf.iter().any(|&x| x != 0) {
                out.write_all_at(buf, b * BLOCK)?;
            }
            Ok(())
        })();
        // Done even on an error: the backup fails then, and no writer may wait for it.
        self.mark(b, DONE);
        // The walk goes in order: the run ending here is all done, and no writer saves a
        // done block, so its room in the state file goes back to the system.
        if b % RELEASE_RUN == RELEASE_RUN - 1 || b + 1 == self.n {
            let first = b - b % RELEASE_RUN;
            let _ = crate::sys::release(
                &self.file,
                self.data_off + first * BLOCK,
                (b + 1 - first) * BLOCK,
            );
        }
        r
    }
}

impl BlockCopier for Copier {
    fn before_write(&self, b: u64) {
        if b >= self.n {
            return; // grown past the instant: not in the copy
        }
        if let Claim::Mine = self.claim(b) {
            let mut buf = Vec::new();
            self.read_store(b, &mut buf);
            if self.mapped {
                // Pages that exist (allocated before the instant, punched only once the
                // walk has written the block out): no fault here can raise SIGBUS.
                self.map.write_block(self.data_off + b * BLOCK, &buf);
            } else if self
                .file
                .write_all_at(&buf, self.data_off + b * BLOCK)
                .is_err()
            {
                // No room in /dev/shm, say: the copy cannot be the instant's. The write
                // goes on (a store never fails for its backup); the backup fails.
                self.slot(S_FAILED).store(1, Release);
            }
            self.mark(b, COPIED);
        }
    }
}
