//! The lab's commands in `polld`'s namespace: `polld demo`, `polld bench seeds`, ... run
//! `polld-lab` installed beside polld, as `git foo` runs `git-foo`, so that one name
//! serves the box and the lab. The daemon knows only the names in [`COMMANDS`]; polld-lab
//! checks them against its own declarations (its unit test).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

/// The lab's binary, installed in the same directory as polld.
pub const BINARY: &str = "polld-lab";

/// The commands polld-lab has.
pub const COMMANDS: [&str; 6] = ["sim", "gen", "sink", "testbed", "demo", "bench"];

/// Whether `name` is one of the lab's commands.
pub fn is_command(name: &str) -> bool {
    COMMANDS.contains(&name)
}

/// polld-lab beside the executable `exe`.
pub fn beside(exe: &Path) -> PathBuf {
    exe.with_file_name(BINARY)
}

/// Replaces this process with polld-lab beside `exe`, given `args` (this command line
/// after its program name) and shown as `polld` in its usage lines. Returns only if that
/// fails, with the message that says why and what to do.
pub fn exec(exe: &Path, args: impl IntoIterator<Item = OsString>, command: &str) -> String {
    let lab = beside(exe);
    let err = std::process::Command::new(&lab)
        .arg0("polld")
        .args(args)
        .exec();
    if err.kind() == std::io::ErrorKind::NotFound {
        format!(
            "`polld {command}` is a lab command, in {BINARY}, which is not installed beside {}: \
             install it there (`cargo install --locked --path cli --bin {BINARY}` from the \
             source tree, or `cargo build --release` and run target/release/polld)",
            exe.display()
        )
    } else {
        format!("`polld {command}`: cannot run {}: {err}", lab.display())
    }
}
