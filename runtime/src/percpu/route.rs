//! The main thread's answer to a control request: asked of the poll threads it concerns,
//! their answers merged (the rules are the module docs of [`super`]).

use polld_control::answer::{typed, under_prefix};
use polld_control::proto::{IfStatus, Request, Response, SetResult};
use polld_core::ifpoll::kern_name;
use polld_core::SysctlEntry;

use super::merge::{is_state, merge};
use super::{label, PollThread, Row};

/// Answers one control request by asking the poll threads (module docs).
pub(super) fn route(threads: &[PollThread], order: &[&str], req: Request) -> Response {
    match req {
        Request::List { prefix } => match merged_entries(threads) {
            Ok(mut entries) => {
                entries.retain(|e| under_prefix(&e.name, &prefix));
                Response::Entries { entries }
            }
            Err(answer) => answer,
        },
        // The merge works on names, so the snapshot is the merged list typed by the
        // declarations the names are instances of.
        Request::Snapshot => match merged_entries(threads) {
            Ok(entries) => Response::Snapshot {
                readings: typed(entries),
            },
            Err(answer) => answer,
        },
        Request::Set { assignments } => Response::Set {
            results: assignments
                .iter()
                .map(|(name, value)| set_one(threads, name, value))
                .collect(),
        },
        // Every poll thread holds the same tables (the file's, or the kernel's followed by
        // each): the first one's are shown.
        Request::Table { .. } => match threads.first() {
            Some(t) => t
                .requester
                .ask(req)
                .unwrap_or_else(|| no_answer(t.cpu, None)),
            None => Response::Error {
                message: "polld has no poll thread".to_string(),
            },
        },
        Request::Interfaces => {
            let mut rows = Vec::new();
            for t in threads {
                match t.requester.ask(Request::Interfaces) {
                    Some(Response::Interfaces { interfaces: mine }) => {
                        rows.extend(mine.into_iter().map(|s| label(&t.queues, (s, ()))))
                    }
                    other => return no_answer(t.cpu, other),
                }
            }
            let interfaces = in_order(rows, order, |_, _| {})
                .into_iter()
                .map(|(s, ())| s)
                .collect();
            Response::Interfaces { interfaces }
        }
    }
}

/// The rows of every poll thread in the config's order of `order`; an interface polled as
/// queues has a row of its totals (the counters summed, `add` for the `T`s), followed
/// by its queues' rows.
pub(super) fn in_order<T: Clone>(
    rows: Vec<Row<T>>,
    order: &[&str],
    add: impl Fn(&mut T, &T),
) -> Vec<(IfStatus, T)> {
    let mut ordered = Vec::new();
    for name in order {
        let mut mine: Vec<(IfStatus, T)> = rows
            .iter()
            .filter(|(i, _, _)| i == name)
            .map(|(_, s, t)| (s.clone(), t.clone()))
            .collect();
        if mine.iter().any(|(s, _)| s.name != *name) {
            mine.sort_by(|a, b| a.0.name.cmp(&b.0.name));
            let mut total = mine[0].clone();
            total.0.name = name.to_string();
            for (s, t) in &mine[1..] {
                add_counters(&mut total.0.counters, &s.counters);
                add(&mut total.1, t);
            }
            ordered.push(total);
        }
        ordered.extend(mine);
    }
    ordered
}

/// Adds `more` to `counters`, by name; a state (not a sum) keeps the first queue's value.
pub(super) fn add_counters(counters: &mut Vec<(String, u64)>, more: &[(String, u64)]) {
    for (name, n) in more {
        match counters.iter_mut().find(|(c, _)| c == name) {
            Some((_, sum)) if !is_state(name) => *sum += n,
            Some(_) => {}
            None => counters.push((name.clone(), *n)),
        }
    }
}

/// Every entry of every poll thread, merged (module docs); or the answer to give when a
/// thread does not answer.
pub(super) fn merged_entries(threads: &[PollThread]) -> Result<Vec<SysctlEntry>, Response> {
    let mut per_cpu = Vec::new();
    for t in threads {
        match t.requester.ask(Request::List {
            prefix: String::new(),
        }) {
            Some(Response::Entries { entries }) => per_cpu.push((t.cpu, &t.queues[..], entries)),
            other => return Err(no_answer(t.cpu, other)),
        }
    }
    Ok(merge(&per_cpu))
}

/// A poll thread's answer that is not the one asked for: its own error, or none.
pub(super) fn no_answer(cpu: usize, answer: Option<Response>) -> Response {
    match answer {
        Some(Response::Error { message }) => Response::Error { message },
        _ => Response::Error {
            message: format!("the poll thread of CPU {cpu} did not answer; try again"),
        },
    }
}

/// One write, on the CPU(s) it concerns (module docs).
pub(super) fn set_one(threads: &[PollThread], name: &str, value: &str) -> SetResult {
    let refused = |error: String| SetResult {
        name: name.to_string(),
        old: None,
        new: None,
        error: Some(error),
    };
    let ask = |t: &PollThread, name: &str| -> Result<SetResult, String> {
        let req = Request::Set {
            assignments: vec![(name.to_string(), value.to_string())],
        };
        match t.requester.ask(req) {
            Some(Response::Set { mut results }) if results.len() == 1 => Ok(results.remove(0)),
            _ => Err(format!(
                "{name}: the poll thread of CPU {} did not answer; try again",
                t.cpu
            )),
        }
    };
    if let Some((cpu, kern)) = kern_name(name) {
        let Some(t) = threads.iter().find(|t| t.cpu == cpu) else {
            let cpus: Vec<usize> = threads.iter().map(|t| t.cpu).collect();
            return refused(format!(
                "{name}: CPU {cpu} has no poll thread; the poll CPUs are {cpus:?} ([daemon] cpus)"
            ));
        };
        return match ask(t, &kern) {
            Ok(r) => SetResult {
                name: name.to_string(),
                error: r.error.map(|e| e.replace(&kern, name)),
                ..r
            },
            Err(e) => refused(e),
        };
    }
    // An interface's CPU, or each CPU with one of its queues.
    let owners: Vec<&PollThread> = match name.strip_prefix("dev.") {
        Some(rest) => threads
            .iter()
            .filter(|t| {
                t.interfaces
                    .iter()
                    .any(|i| rest.starts_with(&format!("{i}.")))
            })
            .collect(),
        None => Vec::new(),
    };
    let targets: Vec<&PollThread> = match owners.is_empty() {
        false => owners,
        true => threads.iter().collect(),
    };
    let mut first: Option<SetResult> = None;
    for t in targets {
        match ask(t, name) {
            Ok(r) => {
                let f = first.get_or_insert_with(|| r.clone());
                if f.error.is_none() && r.error.is_some() {
                    f.error = r.error;
                }
            }
            Err(e) => return refused(e),
        }
    }
    first.unwrap_or_else(|| refused(format!("{name}: no poll thread to write it")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_interfaces_total_sums_counters_but_not_states() {
        let queue = |rx: u64| {
            vec![
                ("rx".to_string(), rx),
                ("auto_polling".to_string(), 1),
                ("link".to_string(), 1),
            ]
        };
        let mut total = queue(5);
        add_counters(&mut total, &queue(7));
        assert_eq!(total, queue(12));
    }
}
