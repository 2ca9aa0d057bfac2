//! `polld man --out DIR` and `polld-lab man --out DIR`: the manual pages. polld(8) says
//! what polld is, its modes, signals, files, exit status, environment and examples;
//! polld-lab(8) what the lab holds; a page per subcommand (polld-SUBCOMMAND(8),
//! polld-lab-SUBCOMMAND(8)) comes from the command line's own declarations; polld.toml(5)
//! from the config modules' commented examples and every knob's declaration. Every page
//! is plain ASCII roff (`groff -man -ww -z` is silent on it).

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

use polld_core::Kind;
use roff::{bold, italic, roman, Inline, Roff};

/// `man --out DIR`, in both binaries.
#[derive(clap::Args)]
pub struct ManArgs {
    /// The directory to write them in (created if missing).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

impl ManArgs {
    /// Writes `pages` of `cmd` into the directory asked for and lists them on stdout.
    pub fn run(
        &self,
        pages: fn(clap::Command, &Path) -> io::Result<Vec<PathBuf>>,
        cmd: clap::Command,
    ) -> Result<(), String> {
        let files =
            pages(cmd, &self.out).map_err(|e| format!("man --out {}: {e}", self.out.display()))?;
        for f in files {
            println!("{}", f.display());
        }
        Ok(())
    }
}

/// Writes polld(8), polld-SUBCOMMAND(8) for each subcommand of `cmd` (polld's) and
/// polld.toml(5) into `dir`; returns the files written.
pub fn write_pages(cmd: clap::Command, dir: &Path) -> io::Result<Vec<PathBuf>> {
    write_set(cmd, dir, main_page, Some(config_page()))
}

/// Writes polld-lab(8) and polld-lab-SUBCOMMAND(8) for each subcommand of `cmd`
/// (polld-lab's; nested ones as polld-lab-bench-seeds(8)) into `dir`; returns the files
/// written.
pub fn write_lab_pages(cmd: clap::Command, dir: &Path) -> io::Result<Vec<PathBuf>> {
    write_set(cmd, dir, lab_page, None)
}

/// The page `main` makes of `cmd`, one per subcommand, and `config` as polld.toml(5).
fn write_set(
    cmd: clap::Command,
    dir: &Path,
    main: fn(&clap::Command) -> String,
    config: Option<String>,
) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let root = cmd.get_name().to_string();
    let mut written = Vec::new();
    let mut write = |name: String, page: String| -> io::Result<()> {
        let path = dir.join(name);
        std::fs::write(&path, ascii(&page))?;
        written.push(path);
        Ok(())
    };
    write(format!("{root}.8"), main(&cmd))?;
    for (name, sub) in subcommands(&cmd, &root) {
        write(
            format!("{}.8", name.replace(' ', "-")),
            command_page(&root, &name, &sub)?,
        )?;
    }
    if let Some(config) = config {
        write("polld.toml.5".into(), config)?;
    }
    Ok(written)
}

/// Every visible subcommand below `cmd`, depth first, with its full name (`polld bench
/// seeds`).
fn subcommands(cmd: &clap::Command, name: &str) -> Vec<(String, clap::Command)> {
    let mut all = Vec::new();
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let full = format!("{name} {}", sub.get_name());
        all.push((full.clone(), sub.clone()));
        all.extend(subcommands(sub, &full));
    }
    all
}

/// A page's title line and NAME section.
fn head(page: &mut Roff, title: &str, section: &str, name: &str, what: &str) {
    page.control(
        "TH",
        [title, section, "", "polld", "System Manager's Manual"],
    )
    .control("SH", ["NAME"])
    .text([roman(format!("{name} - {what}"))]);
}

/// A command's page head, NAME-SUBCOMMAND(8), and its SYNOPSIS: `name` is how it is
/// called (`polld bench seeds`).
fn command_head(page: &mut Roff, name: &str, what: &str, cmd: &clap::Command) {
    let title = name.replace(' ', "-");
    head(page, &title, "8", &title, what);
    page.control("SH", ["SYNOPSIS"]).text(synopsis(name, cmd));
}

/// The SYNOPSIS line of `cmd`, called as `name`: every option with its argument.
fn synopsis(name: &str, cmd: &clap::Command) -> Vec<Inline> {
    let mut line = vec![bold(name)];
    for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        if matches!(arg.get_id().as_str(), "help" | "version") {
            continue;
        }
        line.push(roman(" "));
        let value = arg
            .get_value_names()
            .map(|names| names.join(" "))
            .unwrap_or_else(|| arg.get_id().as_str().to_uppercase());
        let takes_value = arg.get_action().takes_values();
        let repeats = matches!(
            arg.get_action(),
            clap::ArgAction::Count | clap::ArgAction::Append
        ) || arg.get_num_args().is_some_and(|n| n.max_values() > 1);
        let required = arg.is_required_set();
        if !required {
            line.push(roman("["));
        }
        if arg.is_positional() {
            line.push(italic(value));
        } else {
            line.push(bold(flags(arg).join("|")));
            if takes_value {
                line.push(roman(" "));
                line.push(italic(value));
            }
        }
        if !required {
            line.push(roman("]"));
        }
        if repeats {
            line.push(roman("..."));
        }
    }
    if cmd.has_subcommands() {
        line.push(roman(" "));
        line.push(italic("COMMAND"));
    }
    line
}

/// An option's spellings: `-c` and `--config`.
fn flags(arg: &clap::Arg) -> Vec<String> {
    arg.get_short()
        .map(|s| format!("-{s}"))
        .into_iter()
        .chain(arg.get_long().map(|l| format!("--{l}")))
        .collect()
}

/// ROOT-SUBCOMMAND(8): the command's declarations, as clap_mangen renders them, under a
/// synopsis that names every option's argument.
fn command_page(root: &str, name: &str, cmd: &clap::Command) -> io::Result<String> {
    let man = clap_mangen::Man::new(cmd.clone());
    let about = cmd.get_about().map(|a| a.to_string()).unwrap_or_default();
    let mut page = Roff::new();
    command_head(&mut page, name, &about, cmd);
    if let Some(long) = cmd.get_long_about().filter(|l| l.to_string() != about) {
        page.control("SH", ["DESCRIPTION"])
            .text([roman(long.to_string())]);
    }
    let mut out = page.render().into_bytes();
    man.render_options_section(&mut out)?;
    if cmd.has_subcommands() {
        man.render_subcommands_section(&mut out)?;
    }
    let mut page = Roff::new();
    let see_also = if root == "polld" {
        "polld(8), polld.toml(5)"
    } else {
        "polld-lab(8), polld(8)"
    };
    page.control("SH", ["SEE ALSO"]).text([roman(see_also)]);
    let mut text = String::from_utf8(out).expect("roff is text");
    text.push_str(&page.to_roff());
    Ok(text)
}

/// Sections of polld(8), in order: a heading and its paragraphs (a `TP` item is a
/// paragraph whose first line, before a newline, is its tag).
const MAIN_SECTIONS: &[(&str, &[&str])] = &[
    (
        "DESCRIPTION",
        &[
            "polld is device polling for Linux user-space packet processing: FreeBSD's \
             polling(4) scheduler (kern_poll.c), with its kern.polling.* knobs and counters, \
             driving AF_XDP, AF_PACKET and TAP interfaces and forwarding IPv4 between them. \
             Instead of taking an interrupt per batch of frames, polld polls its interfaces \
             at every tick of kern.polling.hz with a bounded burst, and a control loop adapts \
             that burst so that device work never takes more than 100 - \
             kern.polling.user_frac percent of the poll CPU. Under a flood an \
             interrupt-driven box livelocks when it queues received frames for a \
             lower-priority input stage (net.inet.ip.fastforwarding=0); a polling box keeps \
             forwarding at its peak and leaves user_frac of the CPU to everything else.",
            "polld run is the daemon. polld ctl reads and writes its knobs and counters as \
             sysctl(8) does, polld ifconfig shows its interfaces and changes their modes as \
             ifconfig(8) does, polld netstat -rn and polld arp -an show the routes and \
             neighbours its router holds as netstat(1) and arp(8) do, and polld stat \
             shows the CPU split and the rates as systat -vmstat does.",
            "The lab is a second binary, polld-lab, which this one does not contain: the \
             simulator (sim), the traffic generator and sink (gen, sink), the testbed of \
             network namespaces and guests (testbed), the demos (demo) and the benchmarks \
             (bench). polld COMMAND runs polld-lab COMMAND when polld-lab is installed in the \
             same directory as polld; see polld-lab(8).",
        ],
    ),
    (
        "MODES",
        &[
            "Each interface runs in one mode, set in the file (mode = ...) or at run time \
             (polld ifconfig IF polling, -polling, auto, mode busy ...):",
            "interrupt\nThe interface wakes polld per batch of frames, and polld handles \
             them to completion. With net.inet.ip.fastforwarding=0 it livelocks under a \
             flood.",
            "polling\nPolled at every tick with the adaptive burst; its interrupt stays off.",
            "adaptive\nem(4)'s bounded task: an interrupt masks the device and queues a run \
             of at most dev.IF.rx_process_limit frames, requeued while work remains.",
            "busy\nPolled in a loop, as DPDK does: the lowest latency, a whole CPU.",
            "auto\nInterrupts while their work fits under 100 - user_frac of the CPU; \
             polling when it would not; back to interrupts after \
             kern.polling.auto_empty_polls empty polls.",
        ],
    ),
    (
        "SIGNALS",
        &[
            "SIGHUP\nRead the configuration file again and apply its interfaces' modes and \
             its [knobs]. A knob the file does not set goes back to its default, so a \
             value written with polld ctl and not saved (polld ctl --save) is undone. The \
             interfaces themselves, their addresses, the routes and [daemon] change only \
             with a restart; a reload names what it did not apply. A file with a mistake \
             is refused as a whole and polld goes on as it was. polld ctl reload sends \
             SIGHUP and waits for the outcome (polld.reloads, polld.reload_failures, \
             polld.reload_ok, polld.reload_error), failing with the file's mistakes when it is refused.",
            "SIGINT, SIGTERM\nStop: polld drains its queues, prints every interface's \
             counters (as JSON with --json) and exits.",
        ],
    ),
    (
        "FILES",
        &[
            "/etc/polld/polld.toml\nThe configuration file the systemd unit runs with; see \
             polld.toml(5).",
            "/run/polld/polld.sock\nThe control socket polld ctl, ifconfig, netstat, arp and \
             stat talk to (polld run --socket, [daemon] socket, POLLD_SOCKET).",
            "/run/polld/irq-deferral.PID\nThe NAPI settings polld changed on a device and \
             restores at its exit, or at its next start after a crash.",
        ],
    ),
    (
        "EXIT STATUS",
        &[
            "0\nSuccess: polld run stopped by SIGINT or SIGTERM, a check that found no \
             mistake, a polld ctl whose every name was known and every write accepted.",
            "1\nAn error, said on standard error: a mistake in the file (with the file, \
             the line, the field and the fix), a missing capability, an interface that \
             cannot be opened, no polld answering on the control socket, an unknown name \
             or a refused write.",
        ],
    ),
    (
        "ENVIRONMENT",
        &[
            "RUST_LOG\nThe log level when neither -v nor -q is given (error, warn, info, \
             debug, trace; per module as in RUST_LOG=polld_runtime=debug); default info.",
            "POLLD_SOCKET\nThe control socket of polld ctl, ifconfig, netstat, arp and stat.",
            "NOTIFY_SOCKET\nSet by systemd for a Type=notify unit: polld sends READY=1 once \
             its interfaces are open and its control socket answers, and RELOADING=1 \
             (with MONOTONIC_USEC) before a reload and READY=1 after it.",
            "WATCHDOG_USEC, WATCHDOG_PID\nSet by systemd for WatchdogSec=: unless \
             WATCHDOG_PID names another process, polld sends WATCHDOG=1 every half \
             WATCHDOG_USEC while every poll thread makes progress; a stuck poll thread \
             stops it, and systemd restarts polld. Its poll threads pass at least every \
             200 ms, so WatchdogSec= must be above 0.4 s.",
            "JOURNAL_STREAM\nSet by systemd: when it names standard error, each log line \
             starts with its syslog priority, so journalctl -p filters by level.",
        ],
    ),
];

/// The EXAMPLES section of polld(8): what each line does, then the line.
const EXAMPLES: &[(&str, &str)] = &[
    (
        "Check a file:",
        "polld run --check -c /etc/polld/polld.toml",
    ),
    ("Run the daemon:", "polld run -c /etc/polld/polld.toml"),
    (
        "Check a changed file beside the running daemon, then apply it:",
        "polld run --check -c /etc/polld/polld.toml",
    ),
    ("", "polld ctl reload"),
    (
        "Poll an interface, and back to interrupts:",
        "polld ifconfig eth1 polling",
    ),
    ("", "polld ifconfig eth1 -polling"),
    (
        "The scheduler's knobs and counters:",
        "polld ctl kern.polling",
    ),
    (
        "Leave 70 % of the CPU to everything else, and keep it in the file:",
        "polld ctl --save kern.polling.user_frac=70",
    ),
    ("Watch the CPU split and the rates:", "polld stat"),
    (
        "The routes and neighbours the router holds:",
        "polld netstat -rn",
    ),
    ("", "polld arp -an"),
];

/// polld(8).
fn main_page(cmd: &clap::Command) -> String {
    let mut page = Roff::new();
    command_head(
        &mut page,
        "polld",
        "device polling for Linux user-space packet processing",
        cmd,
    );
    for (heading, paragraphs) in &MAIN_SECTIONS[..2] {
        section(&mut page, heading, paragraphs);
    }
    commands_and_options(&mut page, cmd);
    for (heading, paragraphs) in &MAIN_SECTIONS[2..] {
        section(&mut page, heading, paragraphs);
    }
    examples(&mut page, EXAMPLES);
    page.control("SH", ["SEE ALSO"]).text([roman(format!(
        "polld.toml(5), {}, polld-lab(8), ip(8), sysctl(8), systemd.service(5), and \
         FreeBSD's polling(4)",
        subcommands(cmd, "polld")
            .iter()
            .map(|(name, _)| format!("{}(8)", name.replace(' ', "-")))
            .collect::<Vec<_>>()
            .join(", ")
    ))]);
    page.render()
}

/// The COMMANDS section (each subcommand of `cmd`, with its page) and the OPTIONS section.
fn commands_and_options(page: &mut Roff, cmd: &clap::Command) {
    page.control("SH", ["COMMANDS"]);
    for (name, sub) in subcommands(cmd, cmd.get_name()) {
        let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
        page.control("TP", [])
            .text([bold(name.clone())])
            .text([roman(format!(
                "{}. See {}(8).",
                about.trim_end_matches('.'),
                name.replace(' ', "-")
            ))]);
    }
    page.control("SH", ["OPTIONS"]);
    for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
        page.control("TP", [])
            .text([bold(flags(arg).join(", "))])
            .text([roman(help)]);
    }
}

/// polld-lab(8).
fn lab_page(cmd: &clap::Command) -> String {
    let mut page = Roff::new();
    command_head(
        &mut page,
        "polld-lab",
        "polld's lab: simulator, traffic, testbed, demos and benchmarks",
        cmd,
    );
    section(
        &mut page,
        "DESCRIPTION",
        &[
            "polld-lab holds what measures and demonstrates polld and what a production box \
             does not need: the simulated NIC on virtual time, the traffic generator and \
             sink, the testbed of network namespaces, TAPs and qemu guests (with the \
             guest's agent), the demos and the benchmarks. It runs the daemon as polld from \
             its own directory, so the two are installed side by side; polld COMMAND runs \
             polld-lab COMMAND for each of its commands but man. The testbed, the demos and \
             the benchmarks need root: they create network namespaces.",
        ],
    );
    commands_and_options(&mut page, cmd);
    examples(
        &mut page,
        &[
            (
                "Forward a flood through polld, interrupt mode against polling:",
                "polld-lab demo",
            ),
            (
                "The seeds' experiments, with plots:",
                "polld-lab bench seeds --out plots",
            ),
        ],
    );
    page.control("SH", ["SEE ALSO"])
        .text([roman("polld(8), polld.toml(5), ip-netns(8), qemu(1)")]);
    page.render()
}

/// The EXAMPLES section: what each line does (empty: the line goes with the one before),
/// then the line.
fn examples(page: &mut Roff, lines: &[(&str, &str)]) {
    page.control("SH", ["EXAMPLES"]);
    for (what, line) in lines {
        if !what.is_empty() {
            page.control("PP", []).text([roman(*what)]);
        }
        page.control("RS", ["4"])
            .text([bold(*line)])
            .control("RE", []);
    }
}

/// A section of plain paragraphs and tagged items.
fn section(page: &mut Roff, heading: &str, paragraphs: &[&str]) {
    page.control("SH", [heading]);
    for p in paragraphs {
        match p.split_once('\n') {
            Some((tag, text)) => page.control("TP", []).text([bold(tag)]).text([roman(text)]),
            None => page.control("PP", []).text([roman(*p)]),
        };
    }
}

/// polld.toml(5): every table with its keys, from the config modules' commented
/// examples, and every knob from its declaration.
fn config_page() -> String {
    let mut page = Roff::new();
    head(
        &mut page,
        "POLLD.TOML",
        "5",
        "polld.toml",
        "the configuration file of polld run",
    );
    page.control("SH", ["SYNOPSIS"])
        .text([bold("polld run -c"), roman(" "), italic("FILE")])
        .control("SH", ["DESCRIPTION"])
        .text([
            roman(
                "A TOML file: the daemon's settings ([daemon]), knob values applied at start \
                 ([knobs]), the interfaces with their backend, mode and addresses \
                 ([[interfaces]]), and the router's or bridge's tables ([[routes]], \
                 [[static_arp]], [arp], [icmp], [bridge], [[rules]]). Every key is optional \
                 except each interface's name. A mistake is reported as FILE:LINE: the \
                 field, what is wrong and the fix; ",
            ),
            bold("polld run --check -c"),
            roman(" "),
            italic("FILE"),
            roman(
                " checks a file without opening anything, and with --json prints the \
                 outcome as JSON; beside a running polld it skips what that polld holds \
                 (its control socket and metrics address) and says so. SIGHUP or polld ctl \
                 reload applies the file's modes and knobs to a running \
                 polld; the interfaces, their addresses, the tables and [daemon] change \
                 only with a restart.",
            ),
        ]);
    for (heading, intro, example) in [
        (
            "THE DAEMON, THE KNOBS AND THE INTERFACES",
            "Every key of [daemon], [knobs] and [[interfaces]], with what it does:",
            polld_runtime::config::annotated_example(),
        ),
        (
            "THE PACKET STAGE",
            "The router's (or bridge's) tables sit at the top level of the same file, \
             beside [[interfaces]], whose entries also take the keys below. Every key, \
             with every optional table at its default:",
            polld_packet::config::annotated_example(),
        ),
    ] {
        page.control("SH", [heading])
            .text([roman(intro)])
            .control("nf", [])
            .control("RS", ["4"]);
        for line in example.lines() {
            page.text([roman(line)]);
        }
        page.control("RE", []).control("fi", []);
    }
    page.control("SH", ["KNOBS"]).text([roman(
        "Every knob, settable under [knobs] as \"NAME\" = VALUE (quoted, since the name has \
         dots), at run time with polld ctl NAME=VALUE, and listed with its value by polld \
         ctl -a. dev.IF.* are each interface's, under its name (dev.eth1.mode). A value \
         outside what a knob allows is refused with the allowed values.",
    )]);
    for r in polld_runtime::reference::declared_entries()
        .iter()
        .filter(|r| r.kind == Kind::Knob)
    {
        let mut text = format!("{}. Default: {}.", r.descr.trim_end_matches('.'), r.value);
        if let Some(allowed) = &r.allowed {
            let _ = write!(text, " Allowed: {allowed}.");
        }
        page.control("TP", [])
            .text([bold(r.name())])
            .text([roman(text)]);
    }
    page.control("SH", ["FILES"])
        .text([roman(
            "/etc/polld/polld.toml, where the systemd unit reads it; examples/ in the source \
             has complete files.",
        )])
        .control("SH", ["SEE ALSO"])
        .text([roman(
            "polld(8), polld-run(8), polld-ctl(8), polld-ifconfig(8), polld-netstat(8), \
             polld-arp(8), polld-stat(8)",
        )]);
    page.render()
}

/// `page` with every character outside ASCII written as groff's `\[uXXXX]`, so that
/// groff reads it the same in any locale and warns of nothing.
fn ascii(page: &str) -> String {
    let mut out = String::with_capacity(page.len());
    for c in page.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let _ = write!(out, "\\[u{:04X}]", c as u32);
        }
    }
    out
}
