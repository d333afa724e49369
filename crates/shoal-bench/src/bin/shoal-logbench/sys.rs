//! The system calls the peers need (pipes, datagram sockets, inotify, O_APPEND writes),
//! each a thin wrapper that turns -1 into an error.

use std::io::{Error, Result};

fn check(r: isize) -> Result<usize> {
    if r < 0 {
        Err(Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

pub use shoal_bench::mono_ns;

/// A pipe, both ends inherited by children (no close-on-exec): (read end, write end).
pub fn pipe() -> Result<(i32, i32)> {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` has room for the two descriptors.
    check(unsafe { libc::pipe(fds.as_mut_ptr()) } as isize)?;
    Ok((fds[0], fds[1]))
}

/// A connected pair of Unix datagram sockets, inherited by children: (reader, writers).
pub fn dgram_pair() -> Result<(i32, i32)> {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` has room for the two descriptors.
    let r = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_DGRAM, 0, fds.as_mut_ptr()) };
    check(r as isize)?;
    Ok((fds[0], fds[1]))
}

/// Makes `recv` on `fd` give up after `ms` milliseconds, so that a reader can look
/// whether the writers are done.
pub fn recv_timeout(fd: i32, ms: i64) -> Result<()> {
    let tv = libc::timeval {
        tv_sec: 0,
        tv_usec: (ms * 1000) as libc::suseconds_t,
    };
    // SAFETY: `tv` is a valid timeval of the size given.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    check(r as isize).map(|_| ())
}

/// Opens `path` for writing with O_APPEND (created if missing): every write lands at the
/// end of the file, whole, whoever else writes.
pub fn open_append(path: &str) -> Result<i32> {
    let c = std::ffi::CString::new(path).map_err(Error::other)?;
    // SAFETY: `c` is a NUL-terminated path.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT | libc::O_CLOEXEC,
            0o600,
        )
    };
    check(fd as isize).map(|f| f as i32)
}

/// An inotify descriptor watching `path` for writes: a tailing reader sleeps on it.
pub fn watch_writes(path: &str) -> Result<i32> {
    let c = std::ffi::CString::new(path).map_err(Error::other)?;
    // SAFETY: no pointer arguments.
    let fd = check(unsafe { libc::inotify_init1(libc::IN_CLOEXEC) } as isize)? as i32;
    // SAFETY: `c` is a NUL-terminated path.
    check(unsafe { libc::inotify_add_watch(fd, c.as_ptr(), libc::IN_MODIFY) } as isize)?;
    Ok(fd)
}

/// Sleeps until `fd` is readable or `ms` milliseconds passed: whether it is readable.
pub fn wait_readable(fd: i32, ms: i32) -> Result<bool> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `p` is one valid pollfd.
    check(unsafe { libc::poll(&mut p, 1, ms) } as isize).map(|n| n > 0)
}

/// One write(2) of all of `buf`; a short write is an error (the peers promise whole lines).
pub fn write_all_once(fd: i32, buf: &[u8]) -> Result<()> {
    // SAFETY: `buf` is valid for `buf.len()` bytes.
    let n = check(unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) })?;
    if n != buf.len() {
        return Err(Error::other(format!("short write: {n} of {}", buf.len())));
    }
    Ok(())
}

/// One read(2) (or recv(2) on a socket) into `buf`: the bytes read; 0 at end of file.
/// `Ok(None)`: nothing yet (a receive timeout or a signal).
pub fn read_some(fd: i32, buf: &mut [u8]) -> Result<Option<usize>> {
    // SAFETY: `buf` is valid and writable for `buf.len()` bytes.
    let r = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    match check(r) {
        Ok(n) => Ok(Some(n)),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Closes `fd`.
pub fn close(fd: i32) {
    // SAFETY: the caller owns `fd` and does not use it again.
    unsafe { libc::close(fd) };
}

/// Sends SIGKILL to `pid`.
#[cfg(feature = "failpoints")]
pub fn kill9(pid: u32) {
    // SAFETY: no pointer arguments; `pid` is our own child, not yet reaped.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
}
