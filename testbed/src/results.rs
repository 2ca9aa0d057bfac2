//! Results pages: what a demo or a bench printed, as a Markdown page that says how to get
//! it again.
//!
//! `polld demo --results FILE` and `polld bench seeds|ramp|design|sweep|tables --results
//! FILE` write one. The page holds the command as it was typed, the machine (CPU model and count), the
//! kernel, the commit the polld that ran was built from (`-dirty` when the checkout it was
//! built in differs from that commit in more than results pages and plots) and the date,
//! then the output itself and the plots the run wrote. The pages under `docs/results/`
//! are written this way and nothing else edits them: a figure there is what a run
//! printed.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use crate::TestbedError;

/// The machine a run measured on.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Machine {
    pub cpu_model: String,
    pub cpus: usize,
    pub kernel: String,
}

impl Machine {
    /// This machine, from `/proc`.
    pub fn this() -> Machine {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|info| {
                info.lines()
                    .find_map(|l| l.strip_prefix("model name"))
                    .and_then(|rest| rest.split_once(':'))
                    .map(|(_, model)| model.trim().to_string())
            })
            .unwrap_or_else(|| "unknown CPU".to_string());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|k| k.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        Machine {
            cpu_model,
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            kernel,
        }
    }
}

/// Everything a results page says about where its figures came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Provenance {
    /// The command line, as `polld ...`.
    pub command: String,
    pub machine: Machine,
    /// The commit polld was built from, `-dirty` as [`commit_of`] says, or `unknown`.
    pub commit: String,
    /// UTC, `2026-11-27 18:40 UTC`.
    pub date: String,
}

impl Provenance {
    /// This run's: the process's own arguments, this machine, the build's checkout, now.
    pub fn of_this_run() -> Provenance {
        let mut words = std::env::args();
        let program = words.next().map_or_else(
            || "polld".to_string(),
            |p| {
                Path::new(&p)
                    .file_name()
                    .map_or(p.clone(), |n| n.to_string_lossy().into_owned())
            },
        );
        let command = std::iter::once(program)
            .chain(words.map(|w| shell_word(&w)))
            .collect::<Vec<_>>()
            .join(" ");
        Provenance {
            command,
            machine: Machine::this(),
            commit: commit_of(
                Path::new(env!("CARGO_MANIFEST_DIR")),
                polld_control::metrics::BUILD.commit,
            ),
            date: utc_now(),
        }
    }
}

/// `word` as a shell would need it typed.
fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./=,:@%+".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The short commit polld was built from (its build records it), with `-dirty` when the
/// checkout holding `dir` differs from that commit in anything but results pages and
/// plots (which a run writes): uncommitted changes the build may have had, or commits
/// since; `unknown` when the build was not made in a checkout, or without git.
fn commit_of(dir: &Path, built: &str) -> String {
    if built == "unknown" || built.is_empty() {
        return "unknown".to_string();
    }
    let short = &built[..built.len().min(10)];
    let same = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["diff", "--quiet", built, "--", ":(top)"])
        .args(RUN_OUTPUT.iter().map(|p| format!(":(top,exclude){p}")))
        .status();
    match same.map(|s| s.code()) {
        Ok(Some(0)) => short.to_string(),
        Ok(Some(1)) => format!("{short}-dirty"),
        _ => "unknown".to_string(),
    }
}

/// What runs write into a checkout, left out of `-dirty`.
const RUN_OUTPUT: [&str; 2] = ["docs/results", "docs/img"];

/// Now, in UTC to the minute.
fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rest / 3600,
        rest % 3600 / 60
    )
}

/// The proleptic Gregorian date `days` after 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// A results page: a title, where its figures came from, what the run printed, its plots.
pub struct Page<'a> {
    pub title: &'a str,
    pub provenance: Provenance,
    /// What the run printed, as it printed it.
    pub output: &'a str,
    /// The plots the run wrote.
    pub images: &'a [PathBuf],
}

impl Page<'_> {
    /// The page as Markdown; images are linked relative to `dir`, where the page goes.
    pub fn render(&self, dir: &Path) -> String {
        let p = &self.provenance;
        let mut md = String::new();
        let _ = writeln!(md, "# {}\n", self.title);
        let _ = writeln!(
            md,
            "Written by the run below; run the command again to measure your own machine \
             (compare figures only within one run).\n"
        );
        let _ = writeln!(md, "| | |\n|---|---|");
        let _ = writeln!(md, "| command | `{}` |", p.command);
        let _ = writeln!(
            md,
            "| machine | {} CPUs, {} |",
            p.machine.cpus, p.machine.cpu_model
        );
        let _ = writeln!(md, "| kernel | {} |", p.machine.kernel);
        let _ = writeln!(md, "| polld commit | {} |", p.commit);
        let _ = writeln!(md, "| date | {} |\n", p.date);
        let _ = writeln!(md, "```\n{}\n```", self.output.trim_end());
        for image in self.images {
            let link = relative_to(image, dir);
            let name = image
                .file_stem()
                .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
            let _ = writeln!(md, "\n![{name}]({})", link.display());
        }
        md
    }

    /// Writes the page to `path`, creating its directory.
    pub fn write(&self, path: &Path) -> Result<(), TestbedError> {
        let dir = path.parent().unwrap_or(Path::new("."));
        let failed = |e: io::Error| {
            TestbedError::Failed(format!("writing the results page {}: {e}", path.display()))
        };
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir).map_err(failed)?;
        }
        std::fs::write(path, self.render(dir)).map_err(failed)
    }
}

/// `path` as seen from `dir` (both taken from the current directory when relative).
fn relative_to(path: &Path, dir: &Path) -> PathBuf {
    let absolute = |p: &Path| {
        let p = if p.is_absolute() {
            p.to_path_buf()
        } else {
            std::env::current_dir().unwrap_or_default().join(p)
        };
        p.components()
            .filter(|c| !matches!(c, Component::CurDir))
            .map(|c| c.as_os_str().to_os_string())
            .collect::<Vec<_>>()
    };
    let (to, from) = (absolute(path), absolute(dir));
    let common = to.iter().zip(&from).take_while(|(a, b)| a == b).count();
    let mut rel = PathBuf::new();
    for _ in common..from.len() {
        rel.push("..");
    }
    for c in &to[common..] {
        rel.push(c);
    }
    rel
}

/// `--results FILE`, for the demo and each bench.
#[derive(clap::Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct ResultsArg {
    /// Also write what the run prints, with its command, machine, kernel, commit and date,
    /// as a Markdown results page (docs/results/ holds the project's).
    #[arg(long, value_name = "FILE")]
    pub results: Option<PathBuf>,
}

impl ResultsArg {
    /// Runs `run` with its output going to `out`; with `--results`, then writes what it
    /// printed and the plots it returns as a page titled `title`.
    pub fn record<T>(
        &self,
        title: &str,
        out: &mut dyn Write,
        run: impl FnOnce(&mut dyn Write) -> Result<(T, Vec<PathBuf>), TestbedError>,
    ) -> Result<T, TestbedError> {
        let Some(path) = &self.results else {
            return run(out).map(|(t, _)| t);
        };
        let provenance = Provenance::of_this_run();
        let mut tee = Tee::new(out);
        let (t, images) = run(&mut tee)?;
        let output = tee.text();
        Page {
            title,
            provenance,
            output: &output,
            images: &images,
        }
        .write(path)?;
        Ok(t)
    }
}

/// A writer that passes everything on to `inner` and keeps a copy: the output a results
/// page quotes.
pub struct Tee<'a> {
    inner: &'a mut dyn Write,
    pub copy: Vec<u8>,
}

impl<'a> Tee<'a> {
    pub fn new(inner: &'a mut dyn Write) -> Tee<'a> {
        Tee {
            inner,
            copy: Vec::new(),
        }
    }

    /// What went through, as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.copy).into_owned()
    }
}

impl Write for Tee<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.copy.extend_from_slice(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_since_the_epoch_become_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(59), (1970, 3, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_784), (2026, 11, 27));
    }

    #[test]
    fn a_page_says_where_its_figures_came_from_and_links_its_plots() {
        let page = Page {
            title: "polld demo",
            provenance: Provenance {
                command: "polld demo --results docs/results/demo.md".into(),
                machine: Machine {
                    cpu_model: "Test CPU".into(),
                    cpus: 2,
                    kernel: "6.18.0".into(),
                },
                commit: "0123456789".into(),
                date: "2026-11-27 18:40 UTC".into(),
            },
            output: "mode  delivered/s\npolling  700000\n",
            images: &[PathBuf::from("/r/docs/img/seeds/livelock-curve.svg")],
        };
        let md = page.render(Path::new("/r/docs/results"));
        assert!(md.starts_with("# polld demo\n"), "{md}");
        for line in [
            "| command | `polld demo --results docs/results/demo.md` |",
            "| machine | 2 CPUs, Test CPU |",
            "| kernel | 6.18.0 |",
            "| polld commit | 0123456789 |",
            "| date | 2026-11-27 18:40 UTC |",
            "```\nmode  delivered/s\npolling  700000\n```",
            "![livelock-curve](../img/seeds/livelock-curve.svg)",
        ] {
            assert!(md.contains(line), "missing {line:?} in\n{md}");
        }
    }

    #[test]
    fn the_commit_is_the_builds_dirty_when_the_code_differs_but_not_for_results() {
        let dir = std::env::temp_dir().join(format!("polld-results-git-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("docs/results")).unwrap();
        let git = |args: &[&str]| {
            let out = Command::new("git")
                .arg("-C")
                .arg(&dir)
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .args(args)
                .output()
                .expect("git runs");
            assert!(out.status.success(), "git {args:?}: {out:?}");
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        };
        git(&["init", "-q"]);
        std::fs::write(dir.join("code.rs"), "one").unwrap();
        std::fs::write(dir.join("docs/results/demo.md"), "old").unwrap();
        git(&["add", "."]);
        git(&["commit", "-qm", "built"]);
        let built = git(&["rev-parse", "HEAD"]);
        let sub = dir.join("docs");
        assert_eq!(commit_of(&sub, &built), built[..10]);
        // A run rewrites its page: still the build's code.
        std::fs::write(dir.join("docs/results/demo.md"), "new").unwrap();
        assert_eq!(commit_of(&sub, &built), built[..10]);
        // The code moved on from the build.
        std::fs::write(dir.join("code.rs"), "two").unwrap();
        assert_eq!(commit_of(&sub, &built), format!("{}-dirty", &built[..10]));
        assert_eq!(commit_of(&sub, "unknown"), "unknown");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn words_a_shell_would_split_are_quoted() {
        assert_eq!(shell_word("--rate"), "--rate");
        assert_eq!(shell_word("10.0.1.1/24"), "10.0.1.1/24");
        assert_eq!(shell_word("a b"), "'a b'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
    }

    #[test]
    fn the_tee_passes_everything_on_and_keeps_a_copy() {
        let mut sink = Vec::new();
        let mut tee = Tee::new(&mut sink);
        write!(tee, "one {}", 2).unwrap();
        assert_eq!(tee.text(), "one 2");
        drop(tee);
        assert_eq!(sink, b"one 2");
    }
}
