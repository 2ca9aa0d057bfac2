//! Where polld's messages go: the `log` records of every crate, on stderr, each line
//! `polld: MESSAGE` (`polld testbed: ...` for the testbed's), as they always read.
//! `-v`/`-vv` show debug/trace records, `-q`/`-qq` keep only warnings/errors; without
//! either, `RUST_LOG` (env_logger's syntax, e.g. `RUST_LOG=polld_runtime=debug`)
//! chooses, and its default is info.
//!
//! When stderr is the journal (systemd sets `JOURNAL_STREAM` to the `DEVICE:INODE` of the
//! stream it connected, and stderr is that stream), each line starts with its syslog
//! priority as `sd-daemon(3)` defines it (`<3>` error, `<4>` warning, `<6>` info, `<7>`
//! debug and trace), so that `journalctl -p warning -u polld` filters by level.

use std::io::Write;

use log::{Level, LevelFilter};

/// `-v` and `-q`, which both binaries take before their command.
#[derive(clap::Args)]
pub struct Verbosity {
    /// Say more (-v: debug, -vv: trace); overrides RUST_LOG.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Say less (-q: warnings and errors, -qq: errors); overrides RUST_LOG.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    quiet: u8,
}

impl Verbosity {
    /// Installs the logger at the level these ask for.
    pub fn init(&self) {
        init(level(self.verbose, self.quiet));
    }
}

/// A command's exit status: success, or its error logged and failure.
pub fn exit_code(result: Result<(), String>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            log::error!("{e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The level `-v` and `-q` ask for, counted; `None` when neither is given.
fn level(verbose: u8, quiet: u8) -> Option<LevelFilter> {
    let steps = i16::from(verbose) - i16::from(quiet);
    (verbose > 0 || quiet > 0).then_some(match steps {
        i16::MIN..=-2 => LevelFilter::Error,
        -1 => LevelFilter::Warn,
        0 => LevelFilter::Info,
        1 => LevelFilter::Debug,
        _ => LevelFilter::Trace,
    })
}

/// Installs the logger: `level` if given, else `RUST_LOG`, else info.
fn init(level: Option<LevelFilter>) {
    let mut builder =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"));
    if let Some(level) = level {
        builder.filter_level(level);
    }
    let journal = stderr_is_journal(std::env::var("JOURNAL_STREAM").ok().as_deref());
    builder
        .format(move |out, record| {
            if journal {
                write!(out, "<{}>", priority(record.level()))?;
            }
            writeln!(out, "{}: {}", label(record.target()), record.args())
        })
        .init();
}

/// Whether stderr is the stream `journal_stream` (`JOURNAL_STREAM`'s `DEVICE:INODE`) names.
fn stderr_is_journal(journal_stream: Option<&str>) -> bool {
    let Some((dev, ino)) = journal_stream.and_then(|s| s.split_once(':')) else {
        return false;
    };
    let (Ok(dev), Ok(ino)) = (dev.parse::<u64>(), ino.parse::<u64>()) else {
        return false;
    };
    let Ok(stderr) = rustix::fs::fstat(std::io::stderr()) else {
        return false;
    };
    stderr.st_dev == dev && stderr.st_ino == ino
}

/// A record's syslog priority (sd-daemon(3)'s `SD_ERR` ... `SD_DEBUG`).
fn priority(level: Level) -> u8 {
    match level {
        Level::Error => 3,
        Level::Warn => 4,
        Level::Info => 6,
        Level::Debug | Level::Trace => 7,
    }
}

/// The name a record's line starts with: an explicit target (`polld ctl`) as it is, the
/// testbed's modules as `polld testbed`, every other module as `polld`.
fn label(target: &str) -> &str {
    if target.contains(' ') {
        target
    } else if target.starts_with("polld_testbed") {
        "polld testbed"
    } else {
        "polld"
    }
}
