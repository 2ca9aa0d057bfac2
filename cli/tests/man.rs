//! `polld man --out DIR` writes a page per command and polld.toml(5), `polld-lab man` the
//! lab's; `polld completions SHELL` prints a completion script that knows the subcommands.

mod common;

use std::process::Command;

use common::{Dir, POLLD, POLLD_LAB};

fn polld(args: &[&str]) -> std::process::Output {
    Command::new(POLLD).args(args).output().unwrap()
}

/// The subcommands `polld --help` lists.
fn subcommands() -> Vec<String> {
    let help = String::from_utf8(polld(&["--help"]).stdout).unwrap();
    help.split("Commands:")
        .nth(1)
        .unwrap()
        .split("Options:")
        .next()
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| *w != "help")
        .map(str::to_string)
        .collect()
}

#[test]
fn man_writes_polld_8_a_page_per_subcommand_and_polld_toml_5() {
    let dir = Dir::new("man");
    let out = polld(&["man", "--out", dir.0.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let page = |name: &str| {
        std::fs::read_to_string(dir.0.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    let main = page("polld.8");
    assert!(main.contains(".TH polld 8"));
    // polld(8) reads as a FreeBSD page does: every section, not clap's one-liner.
    for section in [
        "DESCRIPTION",
        "MODES",
        "COMMANDS",
        "SIGNALS",
        "FILES",
        "EXIT STATUS",
        "ENVIRONMENT",
        "EXAMPLES",
        "SEE ALSO",
    ] {
        let heading = if section.contains(' ') {
            format!(".SH \"{section}\"\n")
        } else {
            format!(".SH {section}\n")
        };
        assert!(main.contains(&heading), "no {section} in polld.8");
    }
    for word in ["SIGHUP", "/run/polld/polld.sock", "RUST_LOG", "user_frac"] {
        assert!(main.contains(word), "{word} missing from polld.8");
    }
    let subs = subcommands();
    assert_eq!(
        subs,
        [
            "run",
            "ctl",
            "ifconfig",
            "netstat",
            "arp",
            "stat",
            "man",
            "completions"
        ],
        "the daemon's commands"
    );
    for sub in &subs {
        let text = page(&format!("polld-{sub}.8"));
        assert!(
            text.contains(&format!(".TH polld-{sub} 8")),
            "{sub}: {text}"
        );
    }
    // The synopsis names each option's argument.
    let run = page("polld-run.8");
    assert!(run.contains("\\-\\-check"));
    assert!(
        run.contains("\\fB\\-c|\\-\\-config\\fR \\fICONFIG\\fR"),
        "{run}"
    );
    // polld.toml(5): the commented file and each knob with its description and default.
    let toml = page("polld.toml.5");
    assert!(toml.contains(".TH POLLD.TOML 5"));
    for key in [
        "[[interfaces]]",
        "backend = \"af_xdp\"",
        "metrics_public",
        "[[routes]]",
        "[[static_arp]]",
        "[arp]",
        "[icmp]",
        "[bridge]",
        "[[rules]]",
    ] {
        assert!(toml.contains(key), "{key} missing from polld.toml.5");
    }
    // Every knob from its declaration, the router's and each interface's too.
    for knob in [
        "kern.polling.user_frac",
        "net.inet.ip.fastforwarding",
        "dev.IF.mode",
    ] {
        assert!(toml.contains(&format!("\\fB{knob}\\fR")), "{knob}");
    }
    assert!(toml.contains("Desired user fraction of cpu time. Default: 50."));
    // The files it wrote, one a line.
    let listed = String::from_utf8(out.stdout).unwrap();
    for file in listed.lines() {
        assert!(std::path::Path::new(file).starts_with(&dir.0), "{file}");
        assert!(std::path::Path::new(file).is_file(), "{file}");
    }
    for name in ["polld.8", "polld.toml.5", "polld-run.8", "polld-ctl.8"] {
        assert!(
            listed.lines().any(|l| l.ends_with(&format!("/{name}"))),
            "{listed}"
        );
    }
}

#[test]
fn the_lab_writes_polld_lab_8_and_a_page_per_subcommand() {
    let dir = Dir::new("labman");
    let out = Command::new(POLLD_LAB)
        .args(["man", "--out", dir.0.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let listed = String::from_utf8(out.stdout).unwrap();
    for name in [
        "polld-lab.8",
        "polld-lab-demo.8",
        "polld-lab-bench-seeds.8",
        "polld-lab-testbed-up.8",
        "polld-lab-gen.8",
    ] {
        let text = std::fs::read_to_string(dir.0.join(name)).unwrap();
        let title = name.trim_end_matches(".8");
        assert!(text.contains(&format!(".TH {title} 8")), "{name}: {text}");
        assert!(listed.lines().any(|l| l.ends_with(&format!("/{name}"))));
    }
    let main = std::fs::read_to_string(dir.0.join("polld-lab.8")).unwrap();
    assert!(main.contains("polld COMMAND runs"), "{main}");
}

#[test]
fn groff_reads_every_page_without_a_warning() {
    let dir = Dir::new("groff");
    assert!(polld(&["man", "--out", dir.0.to_str().unwrap()])
        .status
        .success());
    assert!(Command::new(POLLD_LAB)
        .args(["man", "--out", dir.0.to_str().unwrap()])
        .status()
        .unwrap()
        .success());
    for page in std::fs::read_dir(&dir.0).unwrap() {
        let page = page.unwrap().path();
        let out = Command::new("groff")
            .args(["-man", "-ww", "-z"])
            .arg(&page)
            .output()
            .expect("groff runs (Debian: groff-base)");
        let warnings = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && warnings.is_empty(),
            "{page:?}: {warnings}"
        );
    }
}

/// What bash completes for `polld WORDS...` (the last word being completed), with the
/// script `polld completions bash` prints loaded, and no polld running on `socket`.
fn bash_completes(words: &[&str]) -> Vec<String> {
    let dir = Dir::new("complete");
    let script = dir.0.join("polld.bash");
    std::fs::write(&script, polld(&["completions", "bash"]).stdout).unwrap();
    let bin = std::path::Path::new(POLLD).parent().unwrap();
    let line: Vec<String> = std::iter::once("polld")
        .chain(words.iter().copied())
        .map(|w| format!("'{w}'"))
        .collect();
    let program = format!(
        "source {script:?}; COMP_WORDS=({words}); COMP_CWORD={cword}; \
         COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}; \
         _polld_names polld \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; \
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        words = line.join(" "),
        cword = words.len(),
        line = line.join(" ").replace('\'', ""),
    );
    let out = Command::new("bash")
        .args(["-c", &program])
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env("POLLD_SOCKET", dir.0.join("none.sock"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_completes_knob_names_and_ifconfig_modes() {
    let knobs = bash_completes(&["ctl", "kern.polling.u"]);
    assert!(
        knobs.contains(&"kern.polling.user_frac".to_string()),
        "{knobs:?}"
    );
    assert!(
        knobs.iter().all(|k| k.starts_with("kern.polling.u")),
        "{knobs:?}"
    );
    let ip = bash_completes(&["ctl", "net.inet.ip.fast"]);
    assert_eq!(ip, ["net.inet.ip.fastforwarding"]);
    let modes = bash_completes(&["ifconfig", "lo", "mode", "b"]);
    assert_eq!(modes, ["busy"]);
    let actions = bash_completes(&["ifconfig", "lo", "-p"]);
    assert_eq!(actions, ["-polling"]);
    let ifs = bash_completes(&["ifconfig", "l"]);
    assert!(ifs.contains(&"lo".to_string()), "{ifs:?}");
    // Options are still clap's.
    let options = bash_completes(&["run", "--che"]);
    assert_eq!(options, ["--check"]);
}

#[test]
fn completions_print_a_script_that_knows_the_subcommands() {
    for shell in ["bash", "zsh", "fish"] {
        let out = polld(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {out:?}");
        let script = String::from_utf8(out.stdout).unwrap();
        for word in ["ifconfig", "ctl", "--check"] {
            assert!(script.contains(word), "{shell}: no {word}");
        }
    }
    let out = polld(&["completions", "tcsh"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("possible values"));
}
