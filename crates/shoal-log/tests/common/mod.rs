//! What the adapter tests share: writer processes (this test binary run again, running one
//! ignored test), killed if the test fails before it waited for them.

use std::path::Path;
use std::process::{Command, Stdio};

/// Runs the ignored test `child` of this binary as writer process `id` of the store at
/// `path` (given to it as `SHOAL_LOG_PATH` and `SHOAL_LOG_WRITER`).
pub fn spawn_writer(child: &str, path: &Path, id: u64) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            child,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SHOAL_LOG_PATH", path)
        .env("SHOAL_LOG_WRITER", id.to_string())
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

/// The writer processes, killed if the test fails before it waited for them: a writer
/// waiting for room in a ring nobody reads any more must not outlive the test.
pub struct Kids(pub Vec<std::process::Child>);

impl Drop for Kids {
    fn drop(&mut self) {
        for k in &mut self.0 {
            let _ = k.kill();
            let _ = k.wait();
        }
    }
}
