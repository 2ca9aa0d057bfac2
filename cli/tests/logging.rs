//! polld's messages go through `log`: on stderr as `polld: MESSAGE`, the level chosen by
//! `-v`/`-q` or else RUST_LOG; errors keep their wording.

mod common;

use std::process::Command;

use common::{Dir, POLLD};

/// `polld ARGS` with RUST_LOG set to `rust_log` (or unset); its stderr.
fn stderr_of(args: &[&str], rust_log: Option<&str>) -> String {
    let mut cmd = Command::new(POLLD);
    cmd.args(args).env_remove("RUST_LOG");
    if let Some(spec) = rust_log {
        cmd.env("RUST_LOG", spec);
    }
    String::from_utf8(cmd.output().unwrap().stderr).unwrap()
}

const SIM: [&str; 3] = ["sim", "--duration-ms", "20"];
/// The info line `polld sim` ends with.
const INFO: &str = "polld: (simulated in ";

#[test]
fn info_is_shown_by_default_and_minus_q_or_rust_log_hide_it() {
    assert!(stderr_of(&SIM, None).starts_with(INFO));
    assert_eq!(stderr_of(&["-q", "sim", "--duration-ms", "20"], None), "");
    assert_eq!(stderr_of(&SIM, Some("warn")), "");
    // -v and -q win over RUST_LOG.
    assert!(stderr_of(&["sim", "-v", "--duration-ms", "20"], Some("warn")).contains(INFO));
    assert_eq!(
        stderr_of(&["sim", "-q", "--duration-ms", "20"], Some("info")),
        ""
    );
}

#[test]
fn errors_keep_their_wording_on_stderr_even_with_minus_qq() {
    let dir = Dir::new("logging");
    let path = dir.0.join("polld.toml");
    std::fs::write(&path, "[[interfaces]]\nname = \"x0\"\ncpu = -1\n").unwrap();
    let path = path.to_str().unwrap();
    let expected = format!(
        "polld: {path}:3: interfaces[0].cpu: -1 is not a CPU number; write one of the CPUs \
         polld may run on: 0, 1, ...\n"
    );
    for quiet in [&[][..], &["-qq"]] {
        let args = [quiet, &["run", "--check", "-c", path]].concat();
        assert_eq!(stderr_of(&args, None), expected, "{args:?}");
    }
    let ctl = stderr_of(
        &["-qq", "ctl", "--socket", "/nonexistent/polld.sock", "-a"],
        None,
    );
    assert!(ctl.starts_with("polld ctl: "), "{ctl}");
}

/// `polld ARGS` with stderr on a file whose `DEVICE:INODE` is (or is not) the
/// `JOURNAL_STREAM` systemd would set; what it wrote there.
fn journal_stderr_of(args: &[&str], same_stream: bool) -> String {
    use std::os::unix::fs::MetadataExt;
    let dir = Dir::new("journal");
    let path = dir.0.join("stderr");
    let file = std::fs::File::create(&path).unwrap();
    let meta = file.metadata().unwrap();
    let ino = if same_stream {
        meta.ino()
    } else {
        meta.ino() + 1
    };
    let out = Command::new(POLLD)
        .args(args)
        .env_remove("RUST_LOG")
        .env("JOURNAL_STREAM", format!("{}:{ino}", meta.dev()))
        .stderr(file)
        .output()
        .unwrap();
    assert!(out.stderr.is_empty());
    std::fs::read_to_string(&path).unwrap()
}

#[test]
fn on_the_journal_each_line_carries_its_priority_and_elsewhere_none() {
    // Info is <6>, an error <3>, as sd-daemon(3) prefixes them.
    assert!(journal_stderr_of(&SIM, true).starts_with(&format!("<6>{INFO}")));
    let err = journal_stderr_of(&["ctl", "--socket", "/nonexistent/polld.sock", "-a"], true);
    assert!(err.starts_with("<3>polld ctl: "), "{err}");
    // A JOURNAL_STREAM that is not stderr (a child of a unit, its stderr redirected).
    assert!(journal_stderr_of(&SIM, false).starts_with(INFO));
}
