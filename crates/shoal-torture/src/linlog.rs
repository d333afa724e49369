//! The history log of the transaction kill storms (`shoal-ordered-worker`,
//! `shoal-txn-worker`), read by the Porcupine checker (`tools/linearizability`,
//! `lincheck -ordered` and `lincheck -txn`).

/// A history log: a file of [`LOG_CAP`] bytes (sparse: tmpfs stores only what is
/// written) mapped shared, so a line is logged by copying it into memory, with no system
/// call (a kill then lands inside a transaction far more often than inside the logging).
/// Each line's text is stored before its newline, in program order: a SIGKILL (delivered
/// at an instruction boundary; every store before it reaches the file) can leave only a
/// last line without its newline, which the checker ignores. The rest of the file is
/// zero bytes (truncated away at a normal exit).
///
/// Any failure (creating, mapping, a full log) ends the process with status 3.
pub struct Lin {
    base: *mut u8,
    pos: usize,
    f: std::fs::File,
}

/// The size a log is mapped with.
pub const LOG_CAP: usize = 1 << 28;

fn fail(what: String) -> ! {
    eprintln!("{what}");
    std::process::exit(3);
}

impl Lin {
    /// Creates (or truncates) the log at `path` and maps it.
    pub fn create(path: &std::path::Path) -> Lin {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(path)
            .and_then(|f| f.set_len(LOG_CAP as u64).map(|()| f))
            .unwrap_or_else(|e| fail(format!("log {}: {e}", path.display())));
        use std::os::fd::AsRawFd;
        // SAFETY: a fresh shared mapping of the whole file, which we keep open; nothing
        // else in this process touches it.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                LOG_CAP,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            fail(format!("mmap the log: {}", std::io::Error::last_os_error()));
        }
        Lin {
            base: base.cast(),
            pos: 0,
            f,
        }
    }

    /// Logs the line `KIND NOW WHAT`, NOW being [`crate::now_ns`].
    pub fn line(&mut self, kind: char, what: &str) {
        let line = format!("{kind} {} {what}", crate::now_ns());
        let b = line.as_bytes();
        if self.pos + b.len() + 1 > LOG_CAP {
            fail("the log is full".into());
        }
        // SAFETY: in bounds (checked above) of our private use of the mapping.
        unsafe {
            std::ptr::copy_nonoverlapping(b.as_ptr(), self.base.add(self.pos), b.len());
            std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
            std::ptr::write_volatile(self.base.add(self.pos + b.len()), b'\n');
        }
        self.pos += b.len() + 1;
    }

    /// At a normal exit: cuts the file to what was written.
    pub fn finish(&self) {
        if let Err(e) = self.f.set_len(self.pos as u64) {
            fail(format!("truncate the log: {e}"));
        }
    }
}

/// Writes `path`: the last consistent read of every key (`0..vals.len()`, whose values
/// were `vals`), called at `call` and returned at `ret` (CLOCK_MONOTONIC ns), as a
/// history of its own, so that the checker sees the state the storm left.
pub fn write_final_read(path: &std::path::Path, call: u64, ret: u64, vals: &[u64]) {
    let keys: Vec<String> = (0..vals.len()).map(|k| k.to_string()).collect();
    let shown: Vec<String> = vals.iter().map(u64::to_string).collect();
    let text = format!(
        "W {call} 99 0 {}\nC {call} read {}\nR {ret} {}\n",
        std::process::id(),
        keys.join(","),
        shown.join(",")
    );
    std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// Runs the Porcupine checker `lincheck -KIND` (`txn` or `ordered`) over the histories in
/// `dir`, of `init.len()` keys whose values were `init` when they began.
pub fn run_lincheck(
    lincheck: &std::path::Path,
    kind: &str,
    init: &[u64],
    dir: &std::path::Path,
) -> std::process::Output {
    let init: Vec<String> = init.iter().map(u64::to_string).collect();
    std::process::Command::new(lincheck)
        .arg(format!("-{kind}"))
        .args(["-timeout", "5m", "-keys"])
        .arg(init.len().to_string())
        .arg("-init")
        .arg(init.join(","))
        .arg(dir)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", lincheck.display()))
}

/// The counts of a passed check: its line `lincheck: KIND: totals: NAME=N ...`.
pub struct LinTotals {
    text: String,
    kind: String,
}

impl LinTotals {
    /// The count `name` (`ops`, `moved`, `read`, ...); 0 if the line does not give it.
    pub fn get(&self, name: &str) -> u64 {
        let prefix = format!("lincheck: {}: totals: ", self.kind);
        self.text
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .and_then(|t| {
                t.split_whitespace()
                    .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            })
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }
}

/// Checks a storm round's histories in `dir` with [`run_lincheck`]: panics, naming `who`
/// and `what` was checked and showing the checker's output, unless they are strictly
/// serializable; returns what the check counted.
pub fn lincheck_round(
    lincheck: &std::path::Path,
    kind: &str,
    init: &[u64],
    dir: &std::path::Path,
    who: &str,
    what: &str,
) -> LinTotals {
    let out = run_lincheck(lincheck, kind, init, dir);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{who}: {what} history is not strictly serializable (or the check failed); the \
         histories and their visualization kept in {}:\n{text}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    LinTotals {
        text,
        kind: kind.to_string(),
    }
}
