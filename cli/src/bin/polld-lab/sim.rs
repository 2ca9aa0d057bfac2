//! `polld sim`: scenarios on virtual time, from flags, a TOML file, or built in.

use clap::Args;
use polld_core::Mode;
use polld_sim::{rizzo, smp, Arrivals, NicConfig, Scenario, UserTask};

#[derive(Args)]
pub struct SimArgs {
    /// A built-in scenario: `rizzo` (Rizzo 2002's table, Interrupt vs Polling; docs/sources.md),
    /// or `scaling` (--pps in all over 1 to 16 CPUs, one poller each; the cost model printed).
    #[arg(long, conflicts_with = "file")]
    scenario: Option<String>,
    /// A scenario file (TOML); see polld-sim's scenario module for the format.
    #[arg(long, short = 'f')]
    file: Option<String>,
    /// Without a file: offered load per input NIC, frames per second.
    #[arg(long, default_value_t = 100_000.0)]
    pps: f64,
    /// Without a file: arrival process (constant, poisson).
    #[arg(long, default_value = "constant")]
    arrivals: String,
    /// Without a file: number of input NICs, each forwarding to its own output NIC.
    #[arg(long, default_value_t = 1)]
    streams: usize,
    /// Without a file: mode of every NIC (interrupt, polling, adaptive, busy, auto).
    #[arg(long, default_value = "polling")]
    mode: String,
    /// Without a file: run a CPU-bound user task beside the dataplane.
    #[arg(long)]
    user: bool,
    /// Sysctl assignments, e.g. kern.polling.user_frac=30 (repeatable).
    #[arg(long = "set", value_name = "NAME=VALUE")]
    set: Vec<String>,
    /// Run the scenario on this many virtual CPUs, each with its own copy of it and its own
    /// poller; `--set net.ifpoll.N.NAME=V` sets CPU N's `kern.polling.NAME`.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=polld_core::ifpoll::IFPOLL_CPUS_MAX as u64))]
    cpus: u64,
    /// `--scenario scaling`: each CPU's user_frac.
    #[arg(long, default_value_t = 50)]
    user_frac: u32,
    /// Simulated duration in milliseconds (a built-in scenario: per run).
    #[arg(long, default_value_t = 1000.0)]
    duration_ms: f64,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(a: SimArgs) -> Result<(), String> {
    let started = std::time::Instant::now();
    if a.scenario.as_deref() == Some("scaling") {
        let table = smp::scaling(a.pps, a.user_frac, a.duration_ms)?;
        let note = format!("{} CPUs simulated", smp::SCALING_CPUS.iter().sum::<usize>());
        return print(a.json, &table, &table.render(), &note, started);
    }
    if let Some(name) = &a.scenario {
        if name != "rizzo" {
            return Err(format!(
                "unknown scenario '{name}': the built-in ones are `rizzo` and `scaling`"
            ));
        }
        if !a.set.is_empty() {
            return Err(
                "--set does not apply to --scenario rizzo: its settings are the seed's; \
                        run your own with --file or the scenario flags"
                    .into(),
            );
        }
        let table = rizzo::table(a.duration_ms)?;
        let note = format!("{} runs simulated", table.runs.len());
        return print(a.json, &table, &table.render(), &note, started);
    }
    let scenario = match &a.file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read scenario file {path}: {e}"))?;
            Scenario::from_toml(path, &text)?
        }
        None => from_flags(&a)?,
    };
    scenario.validate()?;
    let mut cpus = vec![scenario; a.cpus as usize];
    for assignment in &a.set {
        let (k, v) = assignment
            .split_once('=')
            .ok_or_else(|| format!("--set {assignment}: expected NAME=VALUE"))?;
        smp::set_knob(&mut cpus, k, v)?;
    }
    if let [one] = &cpus[..] {
        one.validate()?;
        let report = one.run()?;
        return print(a.json, &report, &report.table(), "simulated", started);
    }
    let reports = smp::run(&cpus)?;
    let text: String = reports.cpus.iter().map(|r| r.table()).collect();
    let note = format!("{} CPUs simulated", cpus.len());
    print(a.json, &reports, &text, &note, started)
}

/// Prints JSON for scripts or the text for people, with the real time it took on stderr.
fn print(
    json: bool,
    value: &impl serde::Serialize,
    text: &str,
    what: &str,
    started: std::time::Instant,
) -> Result<(), String> {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(value).map_err(|e| e.to_string())?
        );
    } else {
        print!("{text}");
        log::info!(
            "({what} in {:.2} s of real time)",
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

fn from_flags(a: &SimArgs) -> Result<Scenario, String> {
    let mode: Mode = a.mode.parse()?;
    let arrivals = match a.arrivals.as_str() {
        "constant" => Arrivals::Constant { pps: a.pps },
        "poisson" => Arrivals::Poisson { pps: a.pps },
        other => return Err(format!("--arrivals {other}: use constant or poisson")),
    };
    if a.streams == 0 || a.streams > 64 {
        return Err("--streams must be 1..=64".into());
    }
    let mut nics = Vec::new();
    for i in 0..a.streams {
        let mut n = NicConfig::new(&format!("sim{i}"), arrivals);
        n.route = Some(format!("sim{}", a.streams + i));
        n.mode = mode;
        nics.push(n);
    }
    for i in 0..a.streams {
        let mut n = NicConfig::new(&format!("sim{}", a.streams + i), Arrivals::None);
        n.mode = mode;
        nics.push(n);
    }
    Ok(Scenario {
        name: format!("{} x {} pps, {}", a.streams, a.pps, mode.name()),
        duration_ms: a.duration_ms,
        seed: 1,
        user: if a.user {
            UserTask::Spin
        } else {
            UserTask::None
        },
        knobs: Default::default(),
        costs: Default::default(),
        nics,
    })
}
