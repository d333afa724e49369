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
        Fail::Error(e.to_string())
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
