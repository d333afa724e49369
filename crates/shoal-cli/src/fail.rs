//! How a subcommand fails: one line on stderr and an exit status.

use std::io;
use std::process::ExitCode;

/// Exit status of a negative answer (missing key, unsound store).
pub const EXIT_NO: u8 = 1;
/// Exit status of an error.
pub const EXIT_ERROR: u8 = 2;

/// Why a subcommand did not succeed.
#[derive(Debug)]
pub enum Fail {
    /// A negative answer: the message is printed, the exit status is 1.
    No(String),
    /// A negative answer already reported on stdout: exit status 1, nothing more printed.
    NoQuiet,
    /// An error: the message is printed, the exit status is 2.
    Error(String),
    /// Stdout was closed under us (`shoal dump | head`): stop quietly.
    BrokenPipe,
}

impl Fail {
    /// An error with this message.
    pub fn err(msg: impl Into<String>) -> Fail {
        Fail::Error(msg.into())
    }
}

impl From<io::Error> for Fail {
    fn from(e: io::Error) -> Fail {
        if e.kind() == io::ErrorKind::BrokenPipe {
            Fail::BrokenPipe
        } else {
            Fail::Error(e.to_string())
        }
    }
}

impl From<shoal::Error> for Fail {
    fn from(e: shoal::Error) -> Fail {
        Fail::Error(message(&e))
    }
}

/// The message of an engine error in this tool's words: where the engine's own text
/// names a Rust call (`Store::fixed_map`, `Store::repair`, ...), the command that does it
/// instead, or none when no command does.
pub fn message(e: &shoal::Error) -> String {
    use shoal::{Error as E, MapKind};
    match e {
        E::WrongMapKind {
            name,
            found: found @ MapKind::Fixed { .. },
            wanted: MapKind::Variable { .. },
        } => format!(
            "map {name:?} is a {found}: get, put, del and ls MAP work on variable-size maps \
             only (dump shows every kind)"
        ),
        E::WrongMapKind {
            name,
            found: found @ MapKind::QueueSet { .. },
            ..
        } => format!("{name:?} is a {found}, not a map: stat and watch show its queues"),
        E::WrongMapKind {
            name,
            found,
            wanted,
        } => format!("map {name:?} is a {found}, not a {wanted}"),
        E::NoUids { name } => format!("map {name:?} has no UIDs"),
        E::NeedsRepair { path, what } => format!(
            "corrupt store {}: {what}; run: shoal repair {} (it drops the entries that cannot \
             be trusted)",
            path.display(),
            shell_word(&path.display().to_string())
        ),
        e => e.to_string(),
    }
}

/// `s` as one word for a POSIX shell (so that the command in a message can be pasted): as
/// it is when it needs no quoting, otherwise in double quotes.
fn shell_word(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+,:@%".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        s.to_string()
    } else {
        let mut q = String::from("\"");
        for c in s.chars() {
            if matches!(c, '"' | '\\' | '$' | '`') {
                q.push('\\');
            }
            q.push(c);
        }
        q.push('"');
        q
    }
}

/// Prints the failure, if any, and gives the exit status.
pub fn finish(r: Result<(), Fail>) -> ExitCode {
    match r {
        Ok(()) | Err(Fail::BrokenPipe) => ExitCode::SUCCESS,
        Err(Fail::NoQuiet) => ExitCode::from(EXIT_NO),
        Err(Fail::No(m)) => {
            eprintln!("shoal: {m}");
            ExitCode::from(EXIT_NO)
        }
        Err(Fail::Error(m)) => {
            eprintln!("shoal: {m}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// Reports a command-line error from clap in one line (help and version go out as usual).
pub fn clap_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::from(EXIT_ERROR)
        }
        _ => {
            // The message is the first paragraph (some span lines: the missing arguments).
            let text = e.render().to_string();
            let para: Vec<&str> = text
                .lines()
                .skip_while(|l| l.trim().is_empty())
                .take_while(|l| !l.trim().is_empty())
                .map(str::trim)
                .collect();
            let msg = para.join(" ");
            let msg = msg.strip_prefix("error: ").unwrap_or(&msg);
            let msg = if msg.is_empty() { "bad arguments" } else { msg };
            eprintln!("shoal: {msg} (see 'shoal --help')");
            ExitCode::from(EXIT_ERROR)
        }
    }
}
