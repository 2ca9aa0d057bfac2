//! The `polld stat` screen, laid out like `systat -vmstat`: a header, the poll thread's
//! CPU as bars (polld's device work, the kernel's receive work for polld's interfaces,
//! softirq, user, idle) with the kernel threads and what the split cannot know under
//! them, the scheduler's state, one row per interface, and the drops per second by reason.
//!
//! ```text
//! polld stat  pid 4242  CPU1 pinned  every 1.0 s                            q quits
//! config /etc/polld/fwd.toml
//!
//! CPU1 busy  92.0%   busy poll   0.0%   idle poll   0.0%   polld thread  41.0%
//!   device  41.5% |========================                                   |
//!   kern rx 30.0% |#################                                          |
//!   softirq  0.0% |                                                           |
//!   user    20.5% |>>>>>>>>>>>>                                               |
//!   idle     8.0% |-----                                                      |
//!                 0    10   20   30   40   50   60   70   80   90  100
//! kernel rx (netlink): napi/veth1-8193 (pid 812, CPU1)
//! ...
//! ```
//!
//! [`lines`] builds the screen as styled text for a width; [`draw`] renders it into a
//! ratatui frame (the live view) and [`to_text`] into plain text (`--once`).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};
use ratatui::Frame;

use crate::sample::Snapshot;

/// Columns before a bar's first cell: `  device  41.5% |`.
const BAR_LABEL: usize = 17;
/// Drop reasons listed per interface before `+N more`.
const MAX_REASONS: usize = 4;

fn bold() -> Style {
    Style::default().add_modifier(Modifier::BOLD)
}

/// What the live view shows besides the snapshot.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Status {
    /// The refresh interval, seconds.
    pub interval_s: f64,
    /// A problem to show on the last line (polld stopped answering, ...).
    pub problem: Option<String>,
}

/// A bar of `percent` (0..100) in `width` columns, drawn with `fill`.
fn bar(label: &str, percent: Option<f64>, fill: char, style: Style, width: usize) -> Line<'static> {
    let inner = width.saturating_sub(BAR_LABEL + 1);
    let filled = percent.map_or(0, |p| {
        ((p.clamp(0.0, 100.0) / 100.0) * inner as f64).round() as usize
    });
    let value = percent.map_or_else(|| "    -".to_string(), |p| format!("{p:5.1}"));
    Line::from(vec![
        Span::raw(format!("  {label:<7}{value}% |")),
        Span::styled(fill.to_string().repeat(filled), style),
        Span::raw(" ".repeat(inner - filled)),
        Span::raw("|"),
    ])
}

/// The tick marks under the bars, every 10 %: each number ends under the last cell
/// that percentage fills (0 under the opening `|`).
fn scale(width: usize) -> Line<'static> {
    let inner = width.saturating_sub(BAR_LABEL + 1);
    let mut marks = vec![' '; width];
    for tens in 0..=10 {
        let label = (tens * 10).to_string();
        let end = BAR_LABEL - 1 + tens * inner / 10;
        let start = (end + 1).saturating_sub(label.len());
        for (slot, c) in marks[start..=end].iter_mut().zip(label.chars()) {
            *slot = c;
        }
    }
    Line::from(marks.into_iter().collect::<String>().trim_end().to_string())
}

/// `text` broken at spaces into lines of at most `width` columns, the later ones indented.
fn wrapped(text: &str, width: usize, style: Style) -> Vec<Line<'static>> {
    const INDENT: &str = "      ";
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.trim().is_empty() && line.len() + 1 + word.len() > width {
            lines.push(Line::styled(std::mem::take(&mut line), style));
            line.push_str(INDENT);
        } else if !line.trim().is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    lines.push(Line::styled(line, style));
    lines
}

/// A rate as a whole number (never `-0`).
fn rate(r: f64) -> String {
    if r >= 0.5 {
        format!("{r:.0}")
    } else {
        "0".to_string()
    }
}

/// The whole screen as lines of at most `width` columns, fitted to `height` rows: when
/// the interfaces do not fit, the last rows say how many were left out.
pub fn lines(snapshot: &Snapshot, status: &Status, width: u16, height: u16) -> Vec<Line<'static>> {
    let width = usize::from(width.max(40));
    let s = snapshot;
    let cpu_name = match (s.cpu.pinned, s.cpu.cpu) {
        (true, Some(c)) => format!("CPU{c}"),
        _ => format!("{} CPUs", s.cpu.cpus),
    };
    let mut out = Vec::new();

    let placement = match (s.cpu.pinned, s.cpu.cpu) {
        (true, _) => "pinned".to_string(),
        (false, Some(c)) => format!("(not pinned, last ran on CPU{c})"),
        (false, None) => "(not pinned)".to_string(),
    };
    let title = format!(
        "polld stat  pid {}  {cpu_name} {placement}  every {:.1} s",
        s.pid, status.interval_s
    );
    let hint = "q quits";
    let gap = width.saturating_sub(title.len() + hint.len()).max(2);
    out.push(Line::from(vec![
        Span::styled(title, bold()),
        Span::raw(" ".repeat(gap)),
        Span::raw(hint),
    ]));
    out.push(Line::from(format!("config {}", s.config)));
    out.push(Line::from(""));

    let busy = s
        .cpu
        .busy
        .map_or_else(|| "    -".to_string(), |b| format!("{b:5.1}"));
    out.push(Line::from(vec![
        Span::styled(format!("{cpu_name} busy {busy}%"), bold()),
        Span::raw(format!(
            "   busy poll {:5.1}%   idle poll {:5.1}%   polld thread {}%",
            s.cpu.busy_poll,
            s.cpu.idle_poll,
            s.cpu
                .polld_thread
                .map_or_else(|| "    -".to_string(), |t| format!("{t:5.1}"))
        )),
    ]));
    out.push(bar(
        "device",
        Some(s.cpu.device),
        '=',
        Style::default()
            .fg(Color::Cyan)
            .add_modifier(Modifier::BOLD),
        width,
    ));
    out.push(bar(
        "kern rx",
        Some(s.cpu.kernel_rx),
        '#',
        Style::default().fg(Color::Magenta),
        width,
    ));
    out.push(bar(
        "softirq",
        s.cpu.softirq,
        '~',
        Style::default().fg(Color::Blue),
        width,
    ));
    out.push(bar(
        "user",
        s.cpu.user,
        '>',
        Style::default().fg(Color::Yellow),
        width,
    ));
    out.push(bar(
        "idle",
        s.cpu.idle,
        '-',
        Style::default().fg(Color::DarkGray),
        width,
    ));
    out.push(scale(width));
    let threads = if s.cpu.kernel_rx_threads.is_empty() {
        "no kernel receive thread (TAP, busy polling, or softirq)"
    } else {
        s.cpu.kernel_rx_threads.as_str()
    };
    let found_by = match s.cpu.kernel_rx_found_by.as_str() {
        "" => String::new(),
        by => format!(" ({by})"),
    };
    out.extend(wrapped(
        &format!("kernel rx{found_by}: {threads}"),
        width,
        Style::default(),
    ));
    for note in &s.cpu.notes {
        out.extend(wrapped(
            &format!("note: {note}"),
            width,
            Style::default().fg(Color::DarkGray),
        ));
    }
    out.push(Line::from(""));

    let k = &s.scheduler;
    out.push(Line::from(vec![
        Span::styled("polling  ", bold()),
        Span::raw(format!(
            "burst {}/{}  each_burst {}  residual_burst {}  phase {}",
            k.burst, k.burst_max, k.each_burst, k.residual_burst, k.phase
        )),
    ]));
    // A slowed tick (kern.polling.stride): it polls hz / stride times a second.
    let slowed = match k.stride {
        0 | 1 => String::new(),
        n => format!("  stride {n}"),
    };
    out.push(Line::from(format!(
        "         lost_polls {} ({}/s)  stalled {}  user_frac {}  hz {}{slowed}",
        k.lost_polls,
        rate(k.lost_polls_per_s),
        k.stalled,
        k.user_frac,
        k.hz
    )));
    out.push(Line::from(format!(
        "         handlers {}  idle_poll {}  kern_load {}%  controller {}",
        k.handlers, k.idle_poll, k.kern_load, k.controller
    )));
    out.push(Line::from(""));
    if !s.per_cpu.is_empty() {
        out.push(Line::styled(
            format!(
                "{:<6} {:>6} {:>9} {:>9} {:>10} {:>3} {:>7} {:>8} {:>8}",
                "ifpoll",
                "pollhz",
                "user_frac",
                "kern_frac",
                "burst/max",
                "ifs",
                "lost/s",
                "device%",
                "thread%"
            ),
            bold(),
        ));
        for c in &s.per_cpu {
            let k = &c.scheduler;
            out.push(Line::from(format!(
                "{:<6} {:>6} {:>9} {:>9} {:>10} {:>3} {:>7} {:>8.1} {:>8.1}",
                format!("CPU{}", c.cpu),
                k.hz,
                k.user_frac,
                k.kern_load,
                format!("{}/{}", k.burst, k.burst_max),
                k.handlers,
                rate(k.lost_polls_per_s),
                c.device,
                c.polld_thread
            )));
        }
        out.push(Line::from(""));
    }

    let name_w = s
        .interfaces
        .iter()
        .map(|i| i.name.len())
        .max()
        .unwrap_or(0)
        .clamp(9, 16);
    out.push(Line::styled(
        format!(
            "{:<name_w$} {:<9} {:<4} {:>9} {:>8} {:>8} {:>9} {:>9} {:>7}",
            "interface",
            "mode",
            "link",
            "dev irq/s",
            "intr/s",
            "polls/s",
            "in pkt/s",
            "out pkt/s",
            "drops/s"
        ),
        bold(),
    ));
    let rows: Vec<Line<'static>> = s
        .interfaces
        .iter()
        .map(|i| {
            Line::from(format!(
                "{:<name_w$} {:<9} {:<4} {:>9} {:>8} {:>8} {:>9} {:>9} {:>7}",
                i.name,
                i.mode,
                i.link,
                i.device_interrupts_per_s.map_or("-".to_string(), rate),
                rate(i.interrupts_per_s),
                rate(i.polls_per_s),
                rate(i.rx_pps),
                rate(i.tx_pps),
                rate(i.drops_per_s)
            ))
        })
        .collect();
    let drops: Vec<Line<'static>> = s
        .interfaces
        .iter()
        .filter(|i| !i.drops_by_reason.is_empty())
        .map(|i| {
            let mut text = format!("{:<name_w$}", i.name);
            for (reason, r) in i.drops_by_reason.iter().take(MAX_REASONS) {
                text.push_str(&format!("  {reason} {}", rate(*r)));
            }
            let more = i.drops_by_reason.len().saturating_sub(MAX_REASONS);
            if more > 0 {
                text.push_str(&format!("  +{more} more"));
            }
            Line::from(text)
        })
        .collect();

    // Shown only when a device lost wakeups: the frames the watchdog found in its ring.
    let found: Vec<Line<'static>> = s
        .interfaces
        .iter()
        .filter(|i| i.watchdog_frames > 0)
        .map(|i| {
            Line::from(format!(
                "{:<name_w$}  {}/s, {} since start",
                i.name,
                rate(i.watchdog_frames_per_s),
                i.watchdog_frames
            ))
        })
        .collect();

    // What is left below the fixed part: the interface rows first, then the drops and
    // the watchdog's finds.
    let footer = usize::from(status.problem.is_some());
    let room = usize::from(height).saturating_sub(out.len() + footer);
    let found_block = if found.is_empty() { 0 } else { 2 + found.len() };
    let drops_block = 2 + drops.len().max(1) + found_block;
    let shown_rows = if rows.len() + drops_block <= room {
        rows.len()
    } else {
        room.saturating_sub(3).min(rows.len())
    };
    let hidden = rows.len() - shown_rows;
    out.extend(rows.into_iter().take(shown_rows));
    if hidden > 0 {
        out.push(Line::from(format!(
            "... {hidden} more interfaces (a taller terminal shows them)"
        )));
    }
    // Stranded frames are rarer than drops and say a device misbehaves: above the drops,
    // so that they show on the smallest screen.
    if !found.is_empty() {
        out.push(Line::from(""));
        out.push(Line::styled(
            "frames found by the watchdog (lost wakeups)",
            bold(),
        ));
        out.extend(found);
    }
    out.push(Line::from(""));
    out.push(Line::styled("drops/s by reason", bold()));
    if drops.is_empty() {
        out.push(Line::from("none"));
    } else {
        out.extend(drops);
    }
    out.truncate(usize::from(height).saturating_sub(footer));
    if let Some(problem) = &status.problem {
        out.push(Line::styled(
            problem.clone(),
            Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
        ));
    }
    out
}

/// The screen shown before the first interval is complete.
pub fn waiting(status: &Status) -> Vec<Line<'static>> {
    let mut out = vec![
        Line::styled("polld stat", bold()),
        Line::from(format!(
            "measuring the first {:.1} s interval ... (q quits)",
            status.interval_s
        )),
    ];
    if let Some(problem) = &status.problem {
        out.push(Line::styled(
            problem.clone(),
            Style::default().fg(Color::Red),
        ));
    }
    out
}

/// Draws the live view into `frame`.
pub fn draw(frame: &mut Frame, snapshot: Option<&Snapshot>, status: &Status) {
    let area = frame.area();
    let text = match snapshot {
        Some(s) => lines(s, status, area.width, area.height),
        None => waiting(status),
    };
    frame.render_widget(Paragraph::new(text), area);
}

/// The screen as plain text, `width` columns wide, with every line (`--once`).
pub fn to_text(snapshot: &Snapshot, status: &Status, width: u16) -> String {
    let text = lines(snapshot, status, width, u16::MAX);
    let area = Rect::new(0, 0, width.max(40), text.len() as u16);
    let mut buffer = Buffer::empty(area);
    Paragraph::new(text).render(area, &mut buffer);
    buffer_text(&buffer)
}

/// The characters of `buffer`, one line per row, trailing blanks trimmed.
pub fn buffer_text(buffer: &Buffer) -> String {
    let area = buffer.area;
    let mut text = String::new();
    for y in area.top()..area.bottom() {
        let row: String = (area.left()..area.right())
            .map(|x| buffer[(x, y)].symbol())
            .collect();
        text.push_str(row.trim_end());
        text.push('\n');
    }
    text
}
