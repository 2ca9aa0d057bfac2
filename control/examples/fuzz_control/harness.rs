//! The control-protocol fuzzer: request lines, mutated from a seed corpus or generated
//! from the knob names with random values, go through the server's parser
//! ([`parse_request`]) and, when they parse, through the daemon's answer over a
//! dataplane of simulated NICs. After every input:
//! - nothing panicked;
//! - the answer survives a JSON round trip (what the server sends, a client reads);
//! - a `set` has one result per assignment, and a refused one left the value as it was;
//! - a `list` holds only entries under its prefix.
//!
//! Every 10 000 inputs the simulation runs on for 1 ms of virtual time, and then every
//! interface's counters must add up and every writable value must be accepted when
//! written back (what `polld ctl` reads, `polld ctl --save` writes).

use crate::common::{answer, simulation};
use polld_control::answer::under_prefix;
use polld_control::proto::{parse_request, Request, Response};
use polld_sim::nic::Rng;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// What one run did.
#[derive(Clone, Copy, Debug, Default)]
pub struct Summary {
    pub inputs: u64,
    /// Inputs that parsed as a request and were answered.
    pub answered: u64,
    /// Assignments refused with an error message.
    pub refused: u64,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} inputs, {} answered, {} assignments refused",
            self.inputs, self.answered, self.refused
        )
    }
}

/// An input that broke an invariant: enough to replay it.
#[derive(Clone, Debug)]
pub struct Finding {
    pub seed: u64,
    pub iteration: u64,
    pub line: Vec<u8>,
    pub problem: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "seed {} iteration {}: {} (request line {:?})",
            self.seed,
            self.iteration,
            self.problem,
            String::from_utf8_lossy(&self.line)
        )
    }
}

const SEEDS: [&str; 8] = [
    r#"{"op":"list","prefix":""}"#,
    r#"{"op":"list","prefix":"kern.polling"}"#,
    r#"{"op":"list","prefix":"dev.sim0.mode"}"#,
    r#"{"op":"interfaces"}"#,
    r#"{"op":"set","assignments":[["kern.polling.user_frac","30"]]}"#,
    r#"{"op":"set","assignments":[["kern.polling.burst_max","1000"],["kern.polling.each_burst","50"]]}"#,
    r#"{"op":"set","assignments":[["dev.sim0.mode","polling"],["kern.polling.idle_poll","1"]]}"#,
    r#"{"op":"set","assignments":[["net.inet.ip.fastforwarding","0"],["kern.polling.hz","2000"]]}"#,
];

/// Values the generator writes: in range, at and past the edges, and not numbers.
const VALUES: [&str; 24] = [
    "0",
    "1",
    "-1",
    "2",
    "5",
    "10",
    "50",
    "99",
    "100",
    "1000",
    "20000",
    "20001",
    "4294967296",
    "18446744073709551616",
    "-9223372036854775809",
    "polling",
    "busy",
    "adaptive",
    "interrupt",
    "classic",
    "time",
    "",
    " 1",
    "1e3",
];

fn below(rng: &mut Rng, n: usize) -> usize {
    (rng.next_u64() % n.max(1) as u64) as usize
}

/// A `set` of one to four assignments of known names (sometimes damaged) to values
/// from [`VALUES`] (sometimes random bytes).
fn generated_set(rng: &mut Rng, names: &[String]) -> Vec<u8> {
    let assignments: Vec<(String, String)> = (0..1 + below(rng, 4))
        .map(|_| {
            let mut name = names[below(rng, names.len())].clone();
            if below(rng, 8) == 0 {
                let cut = below(rng, name.len() + 1);
                name.truncate(cut);
            }
            let value = if below(rng, 8) == 0 {
                (0..below(rng, 6))
                    .map(|_| char::from_u32(rng.next_u64() as u32 % 0x250).unwrap_or('?'))
                    .collect()
            } else {
                VALUES[below(rng, VALUES.len())].to_string()
            };
            (name, value)
        })
        .collect();
    serde_json::to_vec(&Request::Set { assignments }).expect("a request serializes")
}

/// One to four byte-level mutations of a seed line.
fn mutated(rng: &mut Rng) -> Vec<u8> {
    let mut line = SEEDS[below(rng, SEEDS.len())].as_bytes().to_vec();
    for _ in 0..1 + below(rng, 4) {
        let at = below(rng, line.len() + 1);
        match below(rng, 6) {
            0 if at < line.len() => line[at] = rng.next_u64() as u8,
            1 if at < line.len() => {
                line.remove(at);
            }
            2 => line.insert(at, b"\"{}[],:0-.e\\u"[below(rng, 13)]),
            3 => line.truncate(at),
            4 => {
                let end = (at + below(rng, 16)).min(line.len());
                let chunk = line[at..end].to_vec();
                line.splice(at..at, chunk);
            }
            _ => line.insert(at, rng.next_u64() as u8),
        }
    }
    line
}

fn check_response(request: &Request, response: &Response) -> Result<u64, String> {
    let text = serde_json::to_string(response).map_err(|e| format!("serialize: {e}"))?;
    let back: Response = serde_json::from_str(&text).map_err(|e| format!("re-parse: {e}"))?;
    if &back != response {
        return Err("the answer does not survive a JSON round trip".into());
    }
    match (request, response) {
        (Request::Set { assignments }, Response::Set { results }) => {
            if results.len() != assignments.len() {
                return Err(format!(
                    "{} results for {} assignments",
                    results.len(),
                    assignments.len()
                ));
            }
            let mut refused = 0;
            for r in results {
                if r.error.is_some() {
                    refused += 1;
                    if r.old != r.new {
                        return Err(format!(
                            "refused write of {} changed it: {:?} -> {:?}",
                            r.name, r.old, r.new
                        ));
                    }
                }
            }
            Ok(refused)
        }
        (Request::List { prefix }, Response::Entries { entries }) => {
            match entries.iter().find(|e| !under_prefix(&e.name, prefix)) {
                Some(e) => Err(format!("{} listed under {prefix:?}", e.name)),
                None => Ok(0),
            }
        }
        (Request::Interfaces, Response::Interfaces { .. }) => Ok(0),
        _ => Err(format!("answer {response:?} to {request:?}")),
    }
}

/// Feeds `iterations` request lines, calling `progress` every 100 000; stops at the
/// first finding.
pub fn run(
    seed: u64,
    iterations: u64,
    progress: &mut dyn FnMut(&Summary),
) -> Result<Summary, Finding> {
    let mut sim = simulation();
    let mut now = sim.now();
    let names: Vec<String> = sim
        .dataplane()
        .sysctl_entries("")
        .into_iter()
        .map(|e| e.name)
        .collect();
    let mut rng = Rng::new(seed);
    let mut summary = Summary::default();
    for iteration in 0..iterations {
        let line = match below(&mut rng, 4) {
            0 => generated_set(&mut rng, &names),
            _ => mutated(&mut rng),
        };
        let finding = |problem: String| Finding {
            seed,
            iteration,
            line: line.clone(),
            problem,
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let request = parse_request(&line).ok()?;
            let response = answer(&mut sim, request.clone());
            Some((request, response))
        }))
        .map_err(|_| finding("panic".into()))?;
        summary.inputs += 1;
        if let Some((request, response)) = outcome {
            summary.answered += 1;
            summary.refused += check_response(&request, &response).map_err(&finding)?;
        }
        if (iteration + 1) % 10_000 == 0 {
            now += 1_000_000;
            catch_unwind(AssertUnwindSafe(|| sim.run_until(now)))
                .map_err(|_| finding("panic while running the simulation".into()))?;
            let dp = sim.dataplane_mut();
            for iface in dp.interfaces() {
                if iface.counters().unaccounted() != 0 {
                    return Err(finding(format!(
                        "{} unaccounted frames",
                        iface.counters().unaccounted()
                    )));
                }
            }
            for entry in dp.sysctl_entries("").into_iter().filter(|e| e.writable) {
                if let Err(e) = dp.sysctl_set(&entry.name, &entry.value) {
                    return Err(finding(format!(
                        "{}={} reads but does not write back: {e}",
                        entry.name, entry.value
                    )));
                }
            }
        }
        if (iteration + 1) % 100_000 == 0 {
            progress(&summary);
        }
    }
    Ok(summary)
}
