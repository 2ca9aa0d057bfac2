//! The seeds' own figures, beside which polld's are printed.

/// Rizzo 2002, 750 MHz Athlon, 100 Mbit cards, minimum-size frames (148 kpps a stream):
/// (test, interrupt, polling, unit).
pub(super) const TABLE: [(&str, &str, &str); 6] = [
    ("Transmit", "138 kpps", "148 kpps"),
    ("Rx CPU load", "100 %", "40 %"),
    ("Forwarding 1 stream", "143 kpps", "148 kpps"),
    (
        "Forwarding 1 stream, no fast forwarding",
        "110 pps",
        "148 kpps",
    ),
    ("Forwarding 2 streams", "0", "180 kpps"),
    ("Forwarding 4 streams", "0", "185 kpps"),
];
/// Rizzo 2002 on the curve: without fast forwarding, interrupts sustain at most
/// 120 kpps, "above that load the forwarding speed rapidly decays to almost 0".
pub(super) const CURVE: &str = "interrupts without fast forwarding: at most 120 kpps, then decaying to almost 0 (110 pps at 148 kpps offered); polling: 148 kpps, \"roughly remains there when the incoming traffic increases\"";
/// The polling how-to's systat screens (em3 at about 7 kpps of interrupts).
pub(super) const SCREENS: &str =
    "interrupts: em3 7133/s, 21.5 % Intr, 76.6 % idle; polling: em3 0/s, 0.8 % Intr, 96.2 % idle";
/// The nixCraft tutorial, over a 10 Mbit/s metro Ethernet link: (mode, Mbit/s, CPU load).
// 6.28 is the tutorial's Mbit/s, not 2π.
#[allow(clippy::approx_constant)]
pub(super) const TCP: [(&str, f64, f64); 2] = [("interrupt", 6.28, 73.0), ("polling", 8.87, 34.0)];
/// Seed 004 (em(4)'s 2006 commit): fast forwarding in kpps with the ithread handler and
/// with the fast interrupt and its bounded task, (interrupt, adaptive).
pub(super) const ADAPTIVE_KPPS: (f64, f64) = (570.0, 750.0);

/// Seed 004's figure for a configuration of its table: the commit measured fast
/// forwarding, and for the rest says only that the design removed over-saturation
/// livelocks.
pub(super) fn adaptive(mode: &str, fastforwarding: bool) -> String {
    match (mode, fastforwarding) {
        ("interrupt", true) => format!("~{:.0} kpps", ADAPTIVE_KPPS.0),
        ("interrupt", false) => "livelocks over saturation".into(),
        (_, true) => format!("~{:.0} kpps", ADAPTIVE_KPPS.1),
        (_, false) => "no livelock".into(),
    }
}
