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
