//! `polld bench design`'s table: a line per figure, the knob's value beside each side's
//! figure, the ratio, and what was measured last (its width varies).

use std::io::Write;

use super::DesignReport;

/// A figure with as many decimals as its size needs.
fn figure(x: f64) -> String {
    match x.abs() {
        a if a >= 100.0 => format!("{x:.0}"),
        a if a >= 10.0 => format!("{x:.1}"),
        _ => format!("{x:.2}"),
    }
}

pub(super) fn write_text(report: &DesignReport, out: &mut dyn Write) {
    let _ = writeln!(
        out,
        "kern.polling knobs at polld's default and at the alternative, both in this run on the \
         TAP testbed (polld realtime on the fwd CPU, {} s windows after {} s of load)",
        report.window_secs, report.warm_up_secs
    );
    let _ = writeln!(
        out,
        "{:<18} {:>16} {:>16} {:>8}  measured",
        "setting", "default", "alternative", "ratio"
    );
    for r in &report.rows {
        let side = |value: &str, x: f64| format!("{value}: {}", figure(x));
        let _ = writeln!(
            out,
            "{:<18} {:>16} {:>16} {:>8}  {}",
            r.step.knob(),
            side(&r.default.value, r.default.figure),
            side(&r.alternative.value, r.alternative.figure),
            r.ratio.map_or("-".to_string(), |x| format!("{x:.2}")),
            r.measured
        );
    }
    let _ = writeln!(out, "ratio: the alternative's figure over the default's");
    crate::bench::write_conservation(report.conserved, out);
}

#[cfg(test)]
mod tests {
    use super::super::{DesignRow, Step};
    use super::*;

    #[test]
    fn a_row_is_the_alternative_over_the_default_and_prints_both_values() {
        let cpu = DesignRow::new(Step::QuietCycles, "polld CPU (%)".into(), [0.5, 2.0]);
        assert_eq!(cpu.setting, "kern.polling.quiet_cycles");
        assert_eq!(
            (cpu.default.value.as_str(), cpu.alternative.value.as_str()),
            ("100", "0")
        );
        assert_eq!(cpu.ratio, Some(4.0));
        let none = DesignRow::new(Step::AutoWindowTicks, "switches (count)".into(), [0.0, 3.0]);
        assert_eq!(none.ratio, None, "no ratio over a default of 0");
        let flood = DesignRow::new(
            Step::BurstMax,
            "delivered (frames/s)".into(),
            [401_234.4, 150_000.0],
        );
        assert_eq!(flood.alternative.value, "150");

        let report = DesignReport {
            warm_up_secs: 1.0,
            window_secs: 3.0,
            steps: vec![Step::QuietCycles, Step::BurstMax, Step::AutoWindowTicks],
            rows: vec![cpu, flood, none],
            conserved: true,
        };
        let mut text = Vec::new();
        write_text(&report, &mut text);
        let text = String::from_utf8(text).unwrap();
        for line in [
            "quiet_cycles              100: 0.50          0: 2.00     4.00  polld CPU (%)",
            "burst_max             20000: 401234      150: 150000     0.37  delivered (frames/s)",
            "auto_window_ticks           4: 0.00          1: 3.00        -  switches (count)",
            "conservation: held in every polld run",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
    }
}
