//! Where polld's messages go: the `log` records of every crate, on stderr, each line
//! `polld: MESSAGE` (`polld testbed: ...` for the testbed's), as they always read.
//! `-v`/`-vv` show debug/trace records, `-q`/`-qq` keep only warnings/errors; without
//! either, `RUST_LOG` (env_logger's syntax, e.g. `RUST_LOG=polld_runtime=debug`)
//! chooses, and its default is info.

use std::io::Write;

use log::LevelFilter;

/// The level `-v` and `-q` ask for, counted; `None` when neither is given.
pub fn level(verbose: u8, quiet: u8) -> Option<LevelFilter> {
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
pub fn init(level: Option<LevelFilter>) {
    let mut builder =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"));
    if let Some(level) = level {
        builder.filter_level(level);
    }
    builder
        .format(|out, record| writeln!(out, "{}: {}", label(record.target()), record.args()))
        .init();
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
