//! `polld man --out DIR` writes a page per command and polld.toml(5); `polld completions
//! SHELL` prints a completion script that knows the subcommands.

mod common;

use std::process::Command;

use common::{Dir, POLLD};

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
    assert!(page("polld.8").contains(".TH polld 8"));
    let subs = subcommands();
    assert!(subs.len() >= 10, "{subs:?}");
    for sub in &subs {
        let text = page(&format!("polld-{sub}.8"));
        assert!(
            text.contains(&format!(".TH polld-{sub} 8")),
            "{sub}: {text}"
        );
    }
    assert!(page("polld-run.8").contains("\\-\\-check"));
    assert!(page("polld-bench-seeds.8").contains(".TH polld-bench-seeds 8"));
    // polld.toml(5): the commented file and each knob with its description and default.
    let toml = page("polld.toml.5");
    assert!(toml.contains(".TH POLLD.TOML 5"));
    for key in [
        "[[interfaces]]",
        "backend = \"af_xdp\"",
        "metrics_public",
        "[[routes]]",
    ] {
        assert!(toml.contains(key), "{key} missing from polld.toml.5");
    }
    assert!(toml.contains("kern.polling.user_frac"));
    assert!(toml.contains("Desired user fraction of cpu time (default: "));
    // The files it wrote, one a line.
    let listed = String::from_utf8(out.stdout).unwrap();
    for file in listed.lines() {
        assert!(std::path::Path::new(file).starts_with(&dir.0), "{file}");
        assert!(std::path::Path::new(file).is_file(), "{file}");
    }
    for name in [
        "polld.8",
        "polld.toml.5",
        "polld-run.8",
        "polld-testbed-up.8",
    ] {
        assert!(
            listed.lines().any(|l| l.ends_with(&format!("/{name}"))),
            "{listed}"
        );
    }
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
