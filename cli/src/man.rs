//! `polld man --out DIR`: the manual pages. polld(8) and a page per subcommand come from
//! the command line's own declarations (clap_mangen); polld.toml(5) from the config
//! module's commented example and the `kern.polling.*` knobs' declarations.

use std::io;
use std::path::{Path, PathBuf};

use polld_core::{Kind, Poller};
use roff::{bold, italic, roman, Roff};

/// Writes polld(8), polld-SUBCOMMAND(8) for each subcommand (nested ones as
/// polld-bench-seeds(8)) and polld.toml(5) into `dir`; returns the files written.
pub fn write_pages(cmd: clap::Command, dir: &Path) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let mut written = Vec::new();
    command_pages(cmd, dir, &mut written)?;
    let config = dir.join("polld.toml.5");
    std::fs::write(&config, config_page())?;
    written.push(config);
    Ok(written)
}

fn command_pages(cmd: clap::Command, dir: &Path, written: &mut Vec<PathBuf>) -> io::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        command_pages(sub.clone(), dir, written)?;
    }
    written.push(clap_mangen::Man::new(cmd).section("8").generate_to(dir)?);
    Ok(())
}

/// polld.toml(5).
fn config_page() -> String {
    let mut page = Roff::new();
    page.control("TH", ["POLLD.TOML", "5"])
        .control("SH", ["NAME"])
        .text([roman("polld.toml - the configuration file of polld run")])
        .control("SH", ["SYNOPSIS"])
        .text([bold("polld run -c"), roman(" "), italic("FILE")])
        .control("SH", ["DESCRIPTION"])
        .text([
            roman(
                "A TOML file: the daemon's settings ([daemon]), knob values applied at start \
             ([knobs]), the interfaces with their backend, mode and addresses \
             ([[interfaces]]), and the router's or bridge's tables ([[routes]], \
             [[static_arp]], [arp], [icmp], [bridge], [[rules]]). Every key is optional \
             except each interface's name. A mistake is reported as FILE:LINE: the field, \
             what is wrong and the fix; ",
            ),
            bold("polld run --check -c"),
            roman(" "),
            italic("FILE"),
            roman(
                " checks a file without opening anything, and with --json prints the \
                 outcome as JSON.",
            ),
        ])
        .control("SH", ["FILE"])
        .text([roman("Every key, with what it does:")])
        .control("nf", [])
        .control("RS", ["4"]);
    for line in polld_runtime::config::annotated_example().lines() {
        page.text([roman(line)]);
    }
    page.control("RE", [])
        .control("fi", [])
        .control("SH", ["KNOBS"])
        .text([roman(
            "The scheduler's knobs, settable in [knobs] as \"kern.polling.NAME\" = VALUE, at \
             run time with polld ctl, and listed with their values by polld ctl -a \
             (which also shows the net.inet.ip.* and dev.IF.* entries):",
        )]);
    for r in Poller::default().readings(polld_core::poll::NODE) {
        if r.kind != Kind::Knob {
            continue;
        }
        page.control("TP", [])
            .text([bold(r.name())])
            .text([roman(format!("{} (default: {})", r.descr, r.value))]);
    }
    page.control("SH", ["SEE ALSO"]).text([roman(
        "polld(8), polld-run(8), polld-ctl(8), polld-ifconfig(8), polld-stat(8)",
    )]);
    page.render()
}
