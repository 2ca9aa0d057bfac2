//! Seed 001's screens: `polld stat --once` before and after `polld ifconfig tap0
//! polling`, and the figures read from them.

use std::time::Duration;

use super::plan::{DEFAULT_USER_FRAC, FREEBSD};
use super::report::Screen;
use super::steps::Bench;
use crate::share::{ShareTrial, TrialRun};
use crate::TestbedError;

fn failed(what: String) -> TestbedError {
    TestbedError::Failed(what)
}

impl Bench<'_> {
    /// Seed 001: `polld stat --once` before and after `polld ifconfig tap0 polling`.
    pub(super) fn screens(&mut self) -> Result<(), TestbedError> {
        self.say(
            "screens: interrupt mode, polld gen at 100k, then polld ifconfig tap0 polling ...",
        );
        let trial = ShareTrial {
            rate: Some("100k"),
            competitor: false,
            knobs: &FREEBSD,
            warm_up: 0.0,
            // gen runs this much longer than the warm-up: both screens fit.
            window: 8.0,
            ..self.flood_trial("interrupt", DEFAULT_USER_FRAC)
        };
        let run = TrialRun::start(self.tb, self.polld, self.dir, self.cpus, &trial)?;
        std::thread::sleep(Duration::from_secs_f64(0.5));
        let before = run.sample()?;
        let interrupt = self.screen(&run, "interrupt")?;
        for iface in [&self.tb.layout().veth1.name, &self.tb.layout().veth2.name] {
            self.polld_command(&run, &["ifconfig", iface, "polling"])?;
        }
        std::thread::sleep(Duration::from_secs_f64(0.5));
        let polling = self.screen(&run, "polling")?;
        let after = run.sample()?;
        let row = run.finish(&before, &after)?;
        self.book("screens", row.conserved);
        self.report.screens = vec![interrupt, polling];
        Ok(())
    }

    /// Runs `polld COMMAND --socket S ARGS` and returns its standard output. (The socket
    /// comes first: `ifconfig` takes everything after the interface as its actions.)
    fn polld_command(&self, run: &TrialRun, args: &[&str]) -> Result<String, TestbedError> {
        let out = std::process::Command::new(self.polld)
            .arg(args[0])
            .arg("--socket")
            .arg(run.socket())
            .args(&args[1..])
            .output()
            .map_err(|e| failed(format!("polld {}: {e}", args.join(" "))))?;
        if !out.status.success() {
            return Err(failed(format!(
                "polld {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn screen(&mut self, run: &TrialRun, mode: &str) -> Result<Screen, TestbedError> {
        let text = self.polld_command(run, &["stat", "--once", "-w", "1"])?;
        let tap0 = &self.tb.layout().veth1.name;
        let (interrupts_per_sec, idle_percent, polld_thread_percent) = parse_screen(&text, tap0)
            .ok_or_else(|| {
                failed(format!(
                    "polld stat --once: no {tap0} row, idle bar or polld thread figure in\n{text}"
                ))
            })?;
        self.say(&format!(
            "screens: {mode}: {tap0} {interrupts_per_sec:.0} interrupts/s, idle {idle_percent:.1} %, polld thread {polld_thread_percent:.1} %"
        ));
        Ok(Screen {
            mode: mode.into(),
            interrupts_per_sec,
            idle_percent,
            polld_thread_percent,
            text,
        })
    }
}

/// tap0's interrupts/s, the idle percent and polld's thread percent from a
/// `polld stat --once` screen.
fn parse_screen(text: &str, iface: &str) -> Option<(f64, f64, f64)> {
    // The interface table's columns are right-aligned under their headings: polld's own
    // wakeups are the figure that ends where `intr/s` ends.
    let header = text.lines().find(|l| l.starts_with("interface "))?;
    let end = header.find(" intr/s")? + " intr/s".len();
    let intr = text.lines().find_map(|l| {
        if l.split_whitespace().next() != Some(iface) || l.len() < end {
            return None;
        }
        l[..end].split_whitespace().last()?.parse::<f64>().ok()
    })?;
    let idle = text
        .lines()
        .find_map(|l| leading_percent(l.trim_start().strip_prefix("idle ")?))?;
    let thread = text
        .lines()
        .find_map(|l| leading_percent(l.split_once("polld thread")?.1))?;
    Some((intr, idle, thread))
}

/// The `NN.N%` figure `text` begins with, after blanks.
fn leading_percent(text: &str) -> Option<f64> {
    text.split_whitespace()
        .next()?
        .strip_suffix('%')?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_screen_gives_tap0s_interrupts_and_the_idle_share() {
        // As `polld stat` prints it: the device's own interrupts (`-` on a TAP) before
        // polld's wakeups.
        let screen = "CPU1 busy 40.0%   polld thread  27.0%\n  idle    61.5% |====   |\ninterface mode      link dev irq/s   intr/s  polls/s  in pkt/s\ntap0      interrupt up           -     7133        0    100001\ntap1      interrupt up           -        0        0         0\n";
        assert_eq!(parse_screen(screen, "tap0"), Some((7133.0, 61.5, 27.0)));
        assert_eq!(parse_screen(screen, "tap9"), None);
    }
}
