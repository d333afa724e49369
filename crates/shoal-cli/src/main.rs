//! `shoal`: the command-line tool for Shoal stores.
//!
//! Every subcommand is documented in its `--help`; `crates/shoal-cli/README.md` has the
//! overview, the exit statuses and the dump format.

#![warn(missing_docs)]

mod bench;
mod benchkeys;
mod cmds;
mod codec;
mod dump;
mod fail;
mod human;
mod logs;
mod logstat;
mod ordered;
mod qbench;
mod queues;
mod signal;
mod typed;
mod watch;

use clap::{Args, CommandFactory, Parser, Subcommand};
use fail::Fail;
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// The command line.
#[derive(Parser, Debug)]
#[command(
    name = "shoal",
    version,
    about = "Inspect, edit, dump, load, check, repair, compact, watch and benchmark Shoal stores",
    long_about = "Inspect, edit, dump, load, check, repair, compact, watch and benchmark Shoal stores.\n\n\
        A STORE is a path to a store file; a bare name (no '/') means /dev/shm/NAME.shoal.\n\n\
        Exit status: 0 on success; 1 for a negative answer (a missing key, an unsound \
        store); 2 for an error (bad arguments, bad input, a missing store or map, a refusal).",
    arg_required_else_help = true,
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
enum Cmd {
    /// Show a store's header facts, space use, maps and attached processes
    #[command(
        long_about = "Show a store's header facts (format version, file size, maximum size, chunk \
        size, creation time, table sizes), its space use (data, live, dead and free bytes, \
        chunks cleaned), each map (entries, live bytes, segments, splits, directory depth), \
        each ordered map (entries, 4 KiB pages, their bytes and bytes per entry), each queue \
        set, each log (slots, slot size, full policy, tail, dropped records, holes) with its \
        readers' cursors, the number of other processes attached to it now, and a hot backup \
        that is copying it (`backup` in --json: null, or its phase and txn slot)."
    )]
    Stat {
        /// The store (a bare name means /dev/shm/NAME.shoal)
        store: PathBuf,
        /// Print one JSON object instead of the table
        #[arg(long)]
        json: bool,
    },
    /// List the maps of a store, or the keys of one map
    #[command(
        long_about = "List the maps of a store (one name a line; ordered maps, then logs, last), or with MAP \
        the keys of that map (one a line, in no particular order; an ordered map's in key \
        order). Keys that are not printable UTF-8 are shown \
        with \\xNN escapes; use --hex or --base64 for exact output."
    )]
    Ls {
        /// The store (a bare name means /dev/shm/NAME.shoal)
        store: PathBuf,
        /// List this map's keys instead of the maps
        #[arg(value_parser = map_name)]
        map: Option<String>,
        /// Print at most this many lines
        #[arg(long, value_name = "N")]
        limit: Option<u64>,
        /// Long listing: maps with their entries and live bytes, logs with their tail and size; keys with their value sizes
        #[arg(short, long)]
        long: bool,
        #[command(flatten)]
        enc: EncArgs,
    },
    /// Print the value of a key (exit status 1 if the key is absent)
    #[command(
        long_about = "Print the value of KEY in MAP, followed by a newline. Exit status 1 (and a \
        message on stderr) if the key is absent. A value that is not UTF-8 text needs \
        --hex, --base64 or --raw."
    )]
    Get {
        /// The store (a bare name means /dev/shm/NAME.shoal)
        store: PathBuf,
        /// The map
        #[arg(value_parser = map_name)]
        map: String,
        /// The key (UTF-8 text unless --hex or --base64)
        key: OsString,
        #[command(flatten)]
        enc: EncArgs,
        /// Write the value's bytes exactly as they are, with no newline
        #[arg(long, conflicts_with_all = ["hex", "base64"])]
        raw: bool,
        /// Do not print the trailing newline
        #[arg(short = 'n', long)]
        no_newline: bool,
    },
    /// Set the value of a key (creating the store and the map if needed)
    #[command(
        long_about = "Set KEY in MAP to VALUE, inserting or replacing it. The store and the map are \
        created if they do not exist. Without VALUE, the value is read from standard input: \
        its exact bytes as text, or hex / base64 text (surrounding whitespace ignored)."
    )]
    Put {
        /// The store (a bare name means /dev/shm/NAME.shoal)
        store: PathBuf,
        /// The map
        #[arg(value_parser = map_name)]
        map: String,
        /// The key (UTF-8 text unless --hex or --base64)
        key: OsString,
        /// The value (UTF-8 text unless --hex or --base64); read from stdin if absent
        value: Option<OsString>,
        #[command(flatten)]
        enc: EncArgs,
    },
    /// Remove a key (exit status 1 if the key is absent)
    Del {
        /// The store (a bare name means /dev/shm/NAME.shoal)
        store: PathBuf,
        /// The map
        #[arg(value_parser = map_name)]
        map: String,
        /// The key (UTF-8 text unless --hex or --base64)
        key: OsString,
        #[command(flatten)]
        enc: EncArgs,
    },
    /// Write a store's (or one map's) entries to stdout as JSON Lines
    #[command(long_about = dump::DUMP_HELP)]
    Dump {
        /// The store (a bare name means /dev/shm/NAME.shoal)
        store: PathBuf,
        /// Dump only this map
        #[arg(value_parser = map_name)]
        map: Option<String>,
    },
    /// Load entries written by `shoal dump` (from stdin or FILE) into a store
    #[command(
        long_about = "Load entries in the format `shoal dump` writes (see `shoal dump --help`) \
        from FILE, or from standard input when FILE is absent or '-'. The store and maps are \
        created as needed; existing keys are overwritten, other entries are kept. Input \
        is processed line by line, never held whole in memory. A bad line stops the load \
        with its line number (the lines before it stay loaded)."
    )]
    Load {
        /// The store (a bare name means /dev/shm/NAME.shoal)
        store: PathBuf,
        /// The input file ('-' or absent: standard input)
        file: Option<PathBuf>,
    },
    /// Verify every invariant of a store (exit status 0 only when it is sound)
    #[command(
        long_about = "Verify every invariant of a store (see shoal::check) and print the report. \
        Exit status 0 when the store is sound, 1 when problems were found (or the file is too \
        damaged to open), 2 when it could not be checked. Run it on a quiet store: writes in \
        flight can look like problems."
    )]
    Check {
        /// The store (a bare name means /dev/shm/NAME.shoal)
        store: PathBuf,
    },
    /// Repair a damaged store: drop what cannot be trusted, rebuild the rest
    #[command(long_about = "Verify a store in full and repair it: entries whose \
        records cannot be trusted (torn by an OS crash after the last flush, failing their \
        checksums, pointing nowhere) are dropped, and everything else (locks, counters, \
        free space) is rebuilt from what remains. For a store that other subcommands refuse \
        after an OS crash, and for one that `shoal check` or a read reports as corrupt, \
        whether it was closed cleanly or not.\n\n\
        A file shorter than its header says (truncated) is salvaged: every entry that can \
        be read whole from what is left is copied into a new store, which replaces the \
        file; the truncated original is kept beside it as STORE.truncated. Maps with UIDs \
        get new UIDs there.\n\n\
        Prints what was found, each entry or part dropped (keys are not shown: they may be \
        damaged too) and what was rebuilt. The store must not be open anywhere else. \
        --dry-run repairs a private copy-on-write mapping instead, and prints what the \
        repair would do: the file is not changed, nothing is created.\n\n\
        Exit status: 0 when the store is sound afterwards (or, with --dry-run, needs no \
        repair); 1 when --dry-run found something to repair; 2 when the repair could not \
        be done (the store is in use, or too damaged).")]
    Repair {
        /// The store (a bare name means /dev/shm/NAME.shoal)
        store: PathBuf,
        /// Print what the repair would do, and change nothing
        #[arg(long)]
        dry_run: bool,
    },
    /// Copy a store into a new file (a consistent backup), also while it is in use
    #[command(
        long_about = "Copy a store into a new file FILE: a copy of every map of every \
        kind as of one instant, which passes `shoal check`; restoring it is a file copy \
        (or opening FILE where it lies).\n\n\
        When no process has the store open, the copy is byte for byte, and processes \
        that open the store during it wait until it is done. When the store is in use, \
        `shoal backup` opens it and makes a hot backup: readers and writers of every \
        process keep going, each writer held up briefly (it saves a 64 KiB block before \
        its first write to it); the copy holds every transaction committed at the \
        instant the backup starts and none after, and its first opener recovers it as \
        after a crash at that instant. A hot backup waits for the ordered-map write \
        transactions in flight when it starts (it gives up with an error after about \
        6 s), and needs a store made by this version (an older one must be closed \
        everywhere first).\n\n\
        FILE must not exist; it appears whole or not at all. Prints the bytes copied and \
        which kind of copy was made. Needs write access to the store."
    )]
    Backup {
        /// The store (a bare name means /dev/shm/NAME.shoal)
        store: PathBuf,
        /// The new file to write the copy into
        file: PathBuf,
    },
    /// Reclaim dead space now; print chunks freed and dead bytes before and after
    Compact {
        /// The store (a bare name means /dev/shm/NAME.shoal)
        store: PathBuf,
    },
    /// Delete a store file (refused while other processes have it open)
    #[command(
        long_about = "Delete a store file. Refused while other processes are attached to the store, \
        unless --force (they keep working on their mapping until they close it; new opens \
        create a new store). Files that are not Shoal stores are never deleted."
    )]
    Rm {
        /// The store (a bare name means /dev/shm/NAME.shoal)
        store: PathBuf,
        /// Delete even if other processes are attached, or the store is corrupt
        #[arg(short, long)]
        force: bool,
    },
    /// Multi-process benchmark: PUT, UPD, MIX, GET, GET_MANY and REMOVE phases; `queue`
    /// for queue sets
    #[command(long_about = bench::BENCH_HELP, args_conflicts_with_subcommands = true)]
    Bench(BenchCmd),
    /// Live view of a store, refreshed every second (Ctrl-C to quit)
    #[command(
        long_about = "Live view of a store, refreshed every --interval seconds until Ctrl-C (or \
        --iterations refreshes): file size, data, live, dead and free bytes, chunks cleaned, \
        attached processes, and per map its entries, live bytes, segments and splits.\n\n\
        Rates are derived from changes between refreshes: entries/s is the net change \
        of a map's entry count (inserts minus removes; reads and overwrites do not show), \
        splits/s the index growth. The screen is redrawn with plain ANSI codes when stdout \
        is a terminal; otherwise each refresh is printed after the previous one."
    )]
    Watch {
        /// The store (a bare name means /dev/shm/NAME.shoal)
        store: PathBuf,
        /// Seconds between refreshes
        #[arg(long, default_value_t = 1.0, value_name = "SECONDS")]
        interval: f64,
        /// Stop after this many refreshes (default: until Ctrl-C)
        #[arg(long, value_name = "N")]
        iterations: Option<u64>,
    },
    /// Read the logs of a store
    #[command(subcommand)]
    Log(LogCmd),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell)
    #[command(
        long_about = "Print a shell completion script on stdout. For example:\n  \
        bash: shoal completions bash > ~/.local/share/bash-completion/completions/shoal\n  \
        zsh:  shoal completions zsh > ~/.zfunc/_shoal   (with ~/.zfunc in $fpath)\n  \
        fish: shoal completions fish > ~/.config/fish/completions/shoal.fish"
    )]
    Completions {
        /// The shell
        shell: clap_complete::Shell,
    },
}

/// `shoal log`'s subcommands.
#[derive(Subcommand, Debug)]
enum LogCmd {
    /// Print a log's records, and with --follow the new ones as they come
    #[command(long_about = logs::TAIL_HELP)]
    Tail {
        /// The store (a bare name means /dev/shm/NAME.shoal)
        store: PathBuf,
        /// The log
        #[arg(value_parser = map_name)]
        log: String,
        /// Keep printing records as they are published, until Ctrl-C
        #[arg(short, long)]
        follow: bool,
        /// How records are printed
        #[arg(long, value_enum, default_value_t = logs::Format::Text)]
        format: logs::Format,
        /// Read as this named reader, from its cursor, moving it
        #[arg(long, value_name = "NAME")]
        reader: Option<String>,
    },
    /// Write a log's records to a file rotated by size, and the new ones as they come
    #[command(long_about = logs::DRAIN_HELP)]
    Drain {
        /// The store (a bare name means /dev/shm/NAME.shoal)
        store: PathBuf,
        /// The log
        #[arg(value_parser = map_name)]
        log: String,
        /// The file to write
        #[arg(long, value_name = "FILE")]
        to: PathBuf,
        /// Rotate the file before a line would take it past this many bytes (0: never)
        #[arg(long, value_name = "N", default_value_t = 0)]
        rotate_bytes: u64,
        /// How many rotated files to keep (FILE.1 ... FILE.K; 0: start FILE again)
        #[arg(long, value_name = "K", default_value_t = 5)]
        keep: usize,
        /// The named reader to read as, whose cursor is kept in the store
        #[arg(long, value_name = "NAME", default_value = "drain")]
        cursor: String,
        /// How records are written
        #[arg(long, value_enum, default_value_t = logs::Format::Text)]
        format: logs::Format,
    },
}

/// The command line of one benchmark worker process, `shoal bench-worker ...`, which
/// `shoal bench` starts. It is kept out of [`Cli`] so that help and completions do not
/// offer it.
#[derive(Parser, Debug)]
#[command(name = "shoal bench-worker", hide = true)]
struct WorkerCli {
    #[command(flatten)]
    args: bench::WorkerArgs,
}

/// `shoal bench`: the map benchmark, or with a subcommand another one.
#[derive(Args, Debug)]
pub struct BenchCmd {
    #[command(subcommand)]
    what: Option<BenchWhat>,
    #[command(flatten)]
    maps: bench::BenchArgs,
}

/// The benchmarks other than the maps'.
#[derive(Subcommand, Debug)]
enum BenchWhat {
    /// Queue sets against iceoryx2, a pipe, an eventfd and a Unix socket: throughput and
    /// one-way latency between two processes
    #[command(long_about = qbench::HELP)]
    Queue(qbench::QueueArgs),
}

/// The command line of one side of a queue benchmark measure, `shoal bench-queue-worker
/// ...`, which `shoal bench queue` starts; kept out of [`Cli`] like [`WorkerCli`].
#[derive(Parser, Debug)]
#[command(name = "shoal bench-queue-worker", hide = true)]
struct QueueWorkerCli {
    #[command(flatten)]
    args: qbench::worker::WorkerArgs,
}

/// How keys and values are written on the command line and printed.
#[derive(Args, Debug, Clone, Copy)]
pub struct EncArgs {
    /// Keys and values are hexadecimal, in and out
    #[arg(long, conflicts_with = "base64")]
    hex: bool,
    /// Keys and values are base64 (standard alphabet), in and out
    #[arg(long)]
    base64: bool,
}

impl EncArgs {
    fn encoding(self) -> codec::Encoding {
        if self.hex {
            codec::Encoding::Hex
        } else if self.base64 {
            codec::Encoding::Base64
        } else {
            codec::Encoding::Text
        }
    }
}

/// A map name as the library accepts it, checked when the command line is read: before
/// anything is opened or created (`shoal put x "" k v` must not leave a new store behind).
fn map_name(s: &str) -> Result<String, String> {
    if s.is_empty() || s.len() > shoal::MAX_NAME_LEN {
        Err(format!(
            "map names are 1 to {} bytes of UTF-8",
            shoal::MAX_NAME_LEN
        ))
    } else {
        Ok(s.to_string())
    }
}

fn run(cli: Cli) -> Result<(), Fail> {
    match cli.cmd {
        Cmd::Stat { store, json } => cmds::stat(&store, json),
        Cmd::Ls {
            store,
            map,
            limit,
            long,
            enc,
        } => cmds::ls(&store, map.as_deref(), limit, long, enc.encoding()),
        Cmd::Get {
            store,
            map,
            key,
            enc,
            raw,
            no_newline,
        } => cmds::get(&store, &map, &key, enc.encoding(), raw, no_newline),
        Cmd::Put {
            store,
            map,
            key,
            value,
            enc,
        } => cmds::put(&store, &map, &key, value.as_deref(), enc.encoding()),
        Cmd::Del {
            store,
            map,
            key,
            enc,
        } => cmds::del(&store, &map, &key, enc.encoding()),
        Cmd::Dump { store, map } => dump::dump(&store, map.as_deref()),
        Cmd::Load { store, file } => dump::load(&store, file.as_deref()),
        Cmd::Check { store } => cmds::check(&store),
        Cmd::Repair { store, dry_run } => cmds::repair(&store, dry_run),
        Cmd::Compact { store } => cmds::compact(&store),
        Cmd::Backup { store, file } => cmds::backup(&store, &file),
        Cmd::Rm { store, force } => cmds::rm(&store, force),
        Cmd::Bench(BenchCmd {
            what: Some(BenchWhat::Queue(a)),
            ..
        }) => qbench::run(a),
        Cmd::Bench(BenchCmd { maps, .. }) => bench::run(maps),
        Cmd::Watch {
            store,
            interval,
            iterations,
        } => watch::watch(&store, interval, iterations),
        Cmd::Log(LogCmd::Tail {
            store,
            log,
            follow,
            format,
            reader,
        }) => logs::tail(&store, &log, follow, format, reader.as_deref()),
        Cmd::Log(LogCmd::Drain {
            store,
            log,
            to,
            rotate_bytes,
            keep,
            cursor,
            format,
        }) => logs::drain(&store, &log, &to, rotate_bytes, keep, &cursor, format),
        Cmd::Completions { shell } => {
            let mut out = std::io::stdout().lock();
            clap_complete::generate(shell, &mut Cli::command(), "shoal", &mut out);
            out.flush()?;
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    // Bugs aside, nothing panics; if something does, say so in one line, no backtrace.
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown".into());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!("shoal: internal error (a bug): {msg}{at}");
    }));
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == bench::WORKER_SUBCOMMAND)
    {
        let args = std::env::args_os().skip(1);
        return match WorkerCli::try_parse_from(args) {
            Ok(w) => fail::finish(bench::worker(w.args)),
            Err(e) => fail::clap_error(e),
        };
    }
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == qbench::WORKER_SUBCOMMAND)
    {
        let args = std::env::args_os().skip(1);
        return match QueueWorkerCli::try_parse_from(args) {
            Ok(w) => fail::finish(qbench::worker::worker(w.args)),
            Err(e) => fail::clap_error(e),
        };
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return fail::clap_error(e),
    };
    match std::panic::catch_unwind(|| run(cli)) {
        Ok(r) => fail::finish(r),
        Err(_) => ExitCode::from(70),
    }
}
