//! Seed 000's table — Interrupt against Polling on Rizzo's 2002 testbed — on virtual time.
//!
//! The testbed was a 750 MHz Athlon with 100 Mbit/s cards on one 33 MHz PCI bus; a
//! full-speed stream of minimum-size frames is 148,810 frames/s. The costs below are
//! *chosen* (not measured) so the simulation has the shape of Rizzo's figures: per-frame
//! driver work dominates (PCI reads), an interrupt costs a few microseconds, and fast
//! forwarding is cheap next to the driver. They are printed with the table.
//!
//! Polling runs use Rizzo's 2002 settings: HZ=1000, `idle_poll=1`, `user_frac=50`.
//! Interrupt lines have fixed priorities (as on an 8259 PIC): input cards are numbered first,
//! so under overload their receive interrupts outrank the output cards' transmit-complete
//! interrupts — the transmit starvation of Mogul & Ramakrishnan.

use polld_core::knobs::PROFILE_KEY;
use polld_core::Mode;

use crate::cpu::{CpuCosts, UserTask};
use crate::nic::{Arrivals, DriverCosts, NicConfig};
use crate::scenario::{Report, Scenario};

/// 100 Mbit/s line rate in minimum-size frames.
pub const LINE_PPS: f64 = 148_810.0;

/// The driver costs of the model (per frame unless said otherwise), in ns.
pub const DRIVER: DriverCosts = DriverCosts {
    call_ns: 300,
    rx_ns: 3_100,
    tx_ns: 500,
    reclaim_ns: 100,
};

/// The CPU costs of the model, in ns.
pub const CPU: CpuCosts = CpuCosts {
    intr_ns: 2_000,
    tick_ns: 1_000,
    fwd_ns: 800,
    local_ns: 300,
    enqueue_ns: 1_800,
    switch_ns: 1_000,
    gen_ns: 4_500,
};

/// One row of the table.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    pub test: &'static str,
    /// What the seed reports, as printed there.
    pub seed_interrupt: &'static str,
    pub seed_polling: &'static str,
    /// The metric this row compares, and its unit.
    pub metric: &'static str,
    pub interrupt: f64,
    pub polling: f64,
}

/// The whole reproduction: rows and the runs behind them.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Table {
    pub simulated_s_per_run: f64,
    pub driver_costs: DriverCosts,
    pub cpu_costs: CpuCosts,
    pub rows: Vec<Row>,
    pub runs: Vec<Report>,
}

fn nic(name: &str, pps: f64, route: Option<&str>) -> NicConfig {
    let mut n = NicConfig::new(
        name,
        if pps > 0.0 {
            Arrivals::Constant { pps }
        } else {
            Arrivals::None
        },
    );
    n.line_pps = LINE_PPS;
    n.costs = DRIVER;
    n.route = route.map(str::to_string);
    n
}

fn scenario(
    name: String,
    mode: Mode,
    ff: bool,
    nics: Vec<NicConfig>,
    user: UserTask,
    ms: f64,
) -> Scenario {
    let mut knobs = std::collections::BTreeMap::new();
    let mut put = |k: &str, v: &str| {
        knobs.insert(k.to_string(), toml::Value::String(v.to_string()));
    };
    // The seed's box ran FreeBSD's defaults (burst_max 150, each_burst 5, classic).
    put(PROFILE_KEY, "freebsd");
    put("kern.polling.hz", "1000");
    put("kern.polling.user_frac", "50");
    put(
        "kern.polling.idle_poll",
        if mode == Mode::Polling { "1" } else { "0" },
    );
    put("net.inet.ip.fastforwarding", if ff { "1" } else { "0" });
    Scenario {
        name,
        duration_ms: ms,
        seed: 1,
        user,
        knobs,
        costs: CPU,
        nics: nics
            .into_iter()
            .map(|mut n| {
                n.mode = mode;
                n
            })
            .collect(),
    }
}

/// `streams` full-speed streams, input card i forwarding to output card streams + i.
fn forwarding(streams: usize) -> Vec<NicConfig> {
    let outs: Vec<String> = (0..streams).map(|i| format!("out{i}")).collect();
    let mut nics: Vec<NicConfig> = (0..streams)
        .map(|i| nic(&format!("in{i}"), LINE_PPS, Some(&outs[i])))
        .collect();
    nics.extend(outs.iter().map(|o| nic(o, 0.0, None)));
    nics
}

/// Runs every row in both modes, `ms` of virtual time each.
pub fn table(ms: f64) -> Result<Table, String> {
    type Build = fn() -> (Vec<NicConfig>, UserTask, bool);
    let tests: [(&str, &str, &str, &str, Build); 6] = [
        ("Transmit", "138Kpps", "148Kpps", "generated pps", || {
            (
                vec![nic("out0", 0.0, None)],
                UserTask::Generator { nic: 0 },
                true,
            )
        }),
        ("Rx CPU load", "100%", "40%", "CPU busy %", || {
            (vec![nic("in0", LINE_PPS, None)], UserTask::None, true)
        }),
        (
            "Forwarding 1 stream",
            "143Kpps",
            "148Kpps",
            "delivered pps",
            || (forwarding(1), UserTask::None, true),
        ),
        (
            "Forwarding 1 stream, no fast forwarding",
            "110 pps",
            "148Kpps",
            "delivered pps",
            || (forwarding(1), UserTask::None, false),
        ),
        (
            "Forwarding 2 streams",
            "0",
            "180Kpps",
            "delivered pps",
            || (forwarding(2), UserTask::None, true),
        ),
        (
            "Forwarding 4 streams",
            "0",
            "185Kpps",
            "delivered pps",
            || (forwarding(4), UserTask::None, true),
        ),
    ];
    let mut rows = Vec::new();
    let mut runs = Vec::new();
    for (test, seed_i, seed_p, metric, build) in tests {
        let mut values = [0.0; 2];
        for (k, mode) in [Mode::Interrupt, Mode::Polling].into_iter().enumerate() {
            let (nics, user, ff) = build();
            // Rx CPU load is read without idle polling, which would show 100 % busy.
            let mut s = scenario(
                format!("{test} ({})", mode.name()),
                mode,
                ff,
                nics,
                user,
                ms,
            );
            if test == "Rx CPU load" {
                s.knobs.insert(
                    "kern.polling.idle_poll".into(),
                    toml::Value::String("0".into()),
                );
            }
            let r = s.run()?;
            values[k] = match metric {
                "generated pps" => r.generated_pps,
                "CPU busy %" => 100.0 - r.cpu_pct.idle,
                _ => r.delivered_pps,
            };
            runs.push(r);
        }
        rows.push(Row {
            test,
            seed_interrupt: seed_i,
            seed_polling: seed_p,
            metric,
            interrupt: values[0],
            polling: values[1],
        });
    }
    Ok(Table {
        simulated_s_per_run: ms / 1e3,
        driver_costs: DRIVER,
        cpu_costs: CPU,
        rows,
        runs,
    })
}

impl Table {
    /// The table as text, beside the seed's figures, with the costs it assumed.
    pub fn render(&self) -> String {
        use std::fmt::Write;
        let mut o = String::new();
        let _ = writeln!(
            o,
            "Seed 000 (Rizzo 2002, 750 MHz Athlon, 100 Mbit/s) reproduced on SIMULATED time: {:.1} s per run",
            self.simulated_s_per_run
        );
        let _ = writeln!(
            o,
            "{:<42} {:>12} {:>12} | {:>10} {:>10}",
            "Test", "Interrupt", "Polling", "seed intr", "seed poll"
        );
        for r in &self.rows {
            let fmt = |v: f64| {
                if r.metric == "CPU busy %" {
                    format!("{v:.0}%")
                } else if v >= 1000.0 {
                    format!("{:.0}Kpps", v / 1e3)
                } else {
                    format!("{v:.0} pps")
                }
            };
            let _ = writeln!(
                o,
                "{:<42} {:>12} {:>12} | {:>10} {:>10}",
                r.test,
                fmt(r.interrupt),
                fmt(r.polling),
                r.seed_interrupt,
                r.seed_polling
            );
        }
        let d = &self.driver_costs;
        let c = &self.cpu_costs;
        let _ = writeln!(
            o,
            "cost model (ns, chosen to give the seed's shape): driver call {} rx {} tx {} reclaim {}; \
             interrupt {} tick {} forward {} local {} enqueue {} switch {} generator {}",
            d.call_ns, d.rx_ns, d.tx_ns, d.reclaim_ns, c.intr_ns, c.tick_ns, c.fwd_ns, c.local_ns,
            c.enqueue_ns, c.switch_ns, c.gen_ns
        );
        let _ = writeln!(
            o,
            "polling: HZ=1000 user_frac=50 idle_poll=1 burst_max=150 each_burst=5 (Rx CPU load without idle_poll)"
        );
        o
    }
}
