//! polld-stat: `polld stat`, a live terminal view of a running polld in the spirit of
//! FreeBSD's `systat -vmstat`.
//!
//! ```text
//! polld stat                  live view, refreshed every second; q or Esc quits
//! polld stat -w 2             every 2 s
//! polld stat --once           one screen as plain text (rates over one interval)
//! polld stat --json           one snapshot as JSON, for scripts
//! ```
//!
//! It reads the daemon over its control socket (`--socket`, `POLLD_SOCKET`): every entry
//! of a List, including the daemon's `polld.*` time accounts, twice an interval apart.
//! - [`sample`]: the readings and what is computed from two of them ([`Snapshot`]);
//! - [`screen`]: the layout, for the terminal (ratatui, crossterm) and as plain text.

#![forbid(unsafe_code)]

pub mod sample;
pub mod screen;

use std::fmt;
use std::io::{self, IsTerminal, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use polld_control::client::SocketArg;

pub use sample::{Sample, SampleError, Snapshot};
pub use screen::Status;

/// Width of `--once` output when standard output is not a terminal.
const DEFAULT_WIDTH: u16 = 80;

/// `polld stat` options.
#[derive(clap::Args, Clone, Debug, PartialEq)]
pub struct StatArgs {
    /// Refresh every SECS seconds (the interval rates are computed over).
    #[arg(short = 'w', value_name = "SECS", default_value_t = 1.0, value_parser = parse_interval)]
    pub wait: f64,
    /// Print one screen as plain text and exit.
    #[arg(long, conflicts_with = "json")]
    pub once: bool,
    /// Print one snapshot as JSON and exit.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub socket: SocketArg,
}

fn parse_interval(text: &str) -> Result<f64, String> {
    let secs: f64 = text
        .parse()
        .map_err(|_| format!("'{text}' is not a number of seconds; write e.g. -w 1 or -w 0.5"))?;
    if !(0.1..=3600.0).contains(&secs) {
        return Err(format!("-w {text}: use 0.1 to 3600 seconds"));
    }
    Ok(secs)
}

/// Why `polld stat` stopped.
#[derive(Debug)]
pub enum StatError {
    /// No answer from polld (not running, permission, ...): the message says what to do.
    Sample(SampleError),
    /// polld was restarted between the two samples of `--once`/`--json`.
    Restarted,
    /// The live view needs a terminal (standard input and output) and has none.
    NoTerminal,
    /// The terminal could not be set up or drawn on.
    Terminal(io::Error),
    /// Writing the output failed.
    Output(io::Error),
}

impl fmt::Display for StatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StatError::Sample(e) => e.fmt(f),
            StatError::Restarted => {
                f.write_str("polld restarted during the interval; run polld stat again")
            }
            StatError::NoTerminal => f.write_str(
                "the live view needs a terminal for its input and output; \
                 use `polld stat --once` (one screen as text) or `polld stat --json`",
            ),
            StatError::Terminal(e) => write!(f, "terminal: {e}"),
            StatError::Output(e) => write!(f, "cannot write the output: {e}"),
        }
    }
}

impl std::error::Error for StatError {}

/// Runs `polld stat`: the live view on a terminal, or one `--once`/`--json` snapshot on
/// `out`.
pub fn run_stat(args: &StatArgs, out: &mut dyn Write) -> Result<(), StatError> {
    let socket = &args.socket.socket;
    let wants_live_view = !(args.once || args.json);
    let has_terminal = io::stdout().is_terminal() && io::stdin().is_terminal();
    if wants_live_view && !has_terminal {
        return Err(StatError::NoTerminal);
    }
    let interval = Duration::from_secs_f64(args.wait);
    let first = Sample::take(socket).map_err(StatError::Sample)?;
    let status = Status {
        interval_s: args.wait,
        problem: None,
    };
    if args.once || args.json {
        std::thread::sleep(interval);
        let second = Sample::take(socket).map_err(StatError::Sample)?;
        if second.pid() != first.pid() {
            return Err(StatError::Restarted);
        }
        let snapshot = Snapshot::between(&first, &second);
        let text = if args.json {
            serde_json::to_string_pretty(&snapshot).map_err(|e| StatError::Output(e.into()))? + "\n"
        } else {
            let width = if io::stdout().is_terminal() {
                crossterm::terminal::size().map_or(DEFAULT_WIDTH, |(w, _)| w)
            } else {
                DEFAULT_WIDTH
            };
            screen::to_text(&snapshot, &status, width)
        };
        return out.write_all(text.as_bytes()).map_err(StatError::Output);
    }
    live(socket, first, status, interval)
}

/// Restores the terminal when the live view ends, however it ends.
struct RestoreTerminal;

impl Drop for RestoreTerminal {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

fn quits(event: &Event) -> bool {
    let Event::Key(key) = event else {
        return false;
    };
    key.kind == KeyEventKind::Press
        && (matches!(
            key.code,
            KeyCode::Char('q') | KeyCode::Char('Q') | KeyCode::Esc
        ) || (key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL)))
}

/// The live view: redraws every `interval` until q, Esc or Ctrl-C. When polld stops
/// answering it says so on the screen and keeps trying; when it restarts the rates start
/// over.
fn live(
    socket: &Path,
    mut previous: Sample,
    mut status: Status,
    interval: Duration,
) -> Result<(), StatError> {
    // `try_init` also restores the terminal on a panic.
    let mut terminal = ratatui::try_init().map_err(StatError::Terminal)?;
    let _restore = RestoreTerminal;
    let mut snapshot: Option<Snapshot> = None;
    let mut next = Instant::now() + interval;
    loop {
        terminal
            .draw(|frame| screen::draw(frame, snapshot.as_ref(), &status))
            .map_err(StatError::Terminal)?;
        let wait = next.saturating_duration_since(Instant::now());
        if event::poll(wait).map_err(StatError::Terminal)? {
            if quits(&event::read().map_err(StatError::Terminal)?) {
                return Ok(());
            }
            // Another key or a resize: redraw, keep the same deadline.
            continue;
        }
        next += interval;
        match Sample::take(socket) {
            Ok(sample) if sample.pid() != previous.pid() => {
                status.problem = Some(format!(
                    "polld restarted (pid {}): measuring again",
                    sample.pid()
                ));
                snapshot = None;
                previous = sample;
            }
            Ok(sample) => {
                snapshot = Some(Snapshot::between(&previous, &sample));
                status.problem = None;
                previous = sample;
            }
            Err(e) => {
                status.problem = Some(format!(
                    "{e}; retrying every {:.1} s",
                    interval.as_secs_f64()
                ))
            }
        }
    }
}
