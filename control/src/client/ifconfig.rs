//! `polld ifconfig`: a running polld's interfaces, like FreeBSD's ifconfig(8).
//!
//! ```text
//! polld ifconfig                      every interface: link, mode, backend, addresses,
//!                                     whether its receive work is in polld's budget, how
//!                                     its device interrupt is masked (busy polling), the
//!                                     device's own interrupts, counters
//! polld ifconfig veth1                one interface
//! polld ifconfig veth1 polling        dev.veth1.mode=polling (FreeBSD's `ifconfig em0 polling`)
//! polld ifconfig veth1 -polling       dev.veth1.mode=interrupt
//! polld ifconfig veth1 mode adaptive  any mode: interrupt, polling, adaptive, busy, auto
//! ```

use std::io::{self, Write};

use clap::Parser;
use polld_core::{IfCounters, Interface, Mode};

use crate::client::{exchange, print_json, unexpected, CtlError, SocketArg};
use crate::proto::{IfStatus, Request, Response};

/// Show a running polld's interfaces, or change an interface's mode, like ifconfig(8).
#[derive(Parser, Clone, Debug, PartialEq, Eq)]
#[command(name = "polld ifconfig")]
pub struct IfconfigArgs {
    /// The interface to show or change; every interface when absent.
    pub interface: Option<String>,
    /// `polling`, `-polling`, `auto`, or `mode interrupt|polling|adaptive|busy|auto`.
    #[arg(
        value_name = "ACTION",
        allow_hyphen_values = true,
        requires = "interface"
    )]
    pub actions: Vec<String>,
    /// Print machine-readable JSON: the interfaces (an array, or one object when an
    /// interface is named), or the results of a mode change.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub socket: SocketArg,
}

/// Counters shown together on one line, in this order; drops get their own line after
/// the first, and counters not named here a last one.
const COUNTER_LINES: [&[&str]; 3] = [
    &[
        IfCounters::RX_PACKETS.name,
        IfCounters::RX_BYTES.name,
        IfCounters::FORWARDED.name,
        IfCounters::LENT.name,
        IfCounters::LOCAL.name,
        IfCounters::CONSUMED.name,
        IfCounters::TO_KERNEL.name,
        IfCounters::QUEUED.name,
    ],
    &[
        IfCounters::TX_PACKETS.name,
        IfCounters::TX_BYTES.name,
        IfCounters::GENERATED.name,
        IfCounters::GENERATED_DROPPED.name,
    ],
    &[
        IfCounters::INTERRUPTS.name,
        IfCounters::WATCHDOG_FRAMES.name,
        IfCounters::POLLS.name,
        IfCounters::EMPTY_POLLS.name,
        IfCounters::TASKS.name,
        IfCounters::TX_WAITS.name,
        IfCounters::TX_READY_INTERRUPTS.name,
        IfCounters::AUTO_SWITCHES.name,
        Interface::<()>::AUTO_POLLING.name,
    ],
];

/// Runs `polld ifconfig`; mode changes print nothing unless `--json` is given.
pub fn run_ifconfig(args: &IfconfigArgs, out: &mut dyn Write) -> Result<(), CtlError> {
    let socket = &args.socket.socket;
    let interfaces = match exchange(socket, &Request::Interfaces)? {
        Response::Interfaces { interfaces } => interfaces,
        other => return Err(unexpected(&other)),
    };
    let Some(name) = &args.interface else {
        if args.json {
            return print_json(&interfaces, out);
        }
        for iface in &interfaces {
            print_interface(iface, out)?;
        }
        return Ok(());
    };
    let Some(iface) = interfaces.iter().find(|i| &i.name == name) else {
        let known: Vec<&str> = interfaces.iter().map(|i| i.name.as_str()).collect();
        return Err(CtlError::Usage(format!(
            "no interface '{name}' in polld; it has: {}",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        )));
    };
    if args.actions.is_empty() {
        return if args.json {
            print_json(iface, out)
        } else {
            print_interface(iface, out).map_err(CtlError::Output)
        };
    }
    let assignments = parse_actions(&args.actions)?
        .into_iter()
        .map(|mode| (format!("dev.{name}.mode"), mode.name().to_string()))
        .collect();
    let results = match exchange(socket, &Request::Set { assignments })? {
        Response::Set { results } => results,
        other => return Err(unexpected(&other)),
    };
    if args.json {
        print_json(&results, out)?;
    }
    match results.into_iter().find_map(|r| r.error) {
        Some(reason) => Err(CtlError::Daemon(reason)),
        None => Ok(()),
    }
}

/// The modes the actions ask for, in order.
fn parse_actions(words: &[String]) -> Result<Vec<Mode>, CtlError> {
    let usage = |what: String| {
        CtlError::Usage(format!(
            "{what}: use polling, -polling, auto, or mode interrupt|polling|adaptive|busy|auto"
        ))
    };
    let mut modes = Vec::new();
    let mut words = words.iter();
    while let Some(word) = words.next() {
        modes.push(match word.as_str() {
            "polling" => Mode::Polling,
            "-polling" => Mode::Interrupt,
            "auto" => Mode::Auto,
            "mode" => {
                let Some(mode) = words.next() else {
                    return Err(usage("`mode` needs a mode".to_string()));
                };
                mode.parse()
                    .map_err(|_| usage(format!("unknown mode '{mode}'")))?
            }
            other => return Err(usage(format!("unknown action '{other}'"))),
        });
    }
    Ok(modes)
}

fn print_interface(iface: &IfStatus, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "{}: link {} mode {} backend {}",
        iface.name, iface.link, iface.mode, iface.backend
    )?;
    if let Some(mac) = &iface.mac {
        writeln!(out, "\tether {mac}")?;
    }
    if let Some(rx) = &iface.rx_work {
        if rx.in_budget {
            writeln!(out, "\trx work in polld's budget: {}", rx.runs_in)?;
        } else {
            writeln!(out, "\trx work NOT in polld's budget: {}", rx.runs_in)?;
            if let Some(why) = &rx.why_not {
                writeln!(out, "\t\t({why})")?;
            }
        }
    }
    if let Some(busy) = &iface.busy_poll {
        writeln!(out, "\tbusy polling {}: {}", busy.path, busy.detail)?;
    }
    if let Some(irqs) = &iface.device_interrupts {
        let rate = irqs.per_s.map(|r| format!(" ({r}/s)")).unwrap_or_default();
        writeln!(
            out,
            "\tdevice interrupts {}{rate}: {}",
            irqs.total,
            irqs.vectors.join(", ")
        )?;
    }
    match iface.umem.as_deref() {
        Some("own") => writeln!(out, "\tumem own: forwarded frames are copied")?,
        Some(umem) => writeln!(
            out,
            "\tumem {umem}: frames forwarded between them are not copied"
        )?,
        None => {}
    }
    for address in &iface.addresses {
        let family = if address.contains(':') {
            "inet6"
        } else {
            "inet"
        };
        writeln!(out, "\t{family} {address}")?;
    }
    if let Some(tables) = &iface.tables {
        writeln!(out, "\ttables {tables}")?;
    }
    let count = |name: &str| iface.counters.iter().find(|(n, _)| n == name).map(|c| c.1);
    for (line_no, names) in COUNTER_LINES.iter().enumerate() {
        let shown: Vec<String> = names
            .iter()
            .filter_map(|&n| count(n).map(|v| format!("{n} {v}")))
            .collect();
        if !shown.is_empty() {
            writeln!(out, "\t{}", shown.join(" "))?;
        }
        match line_no {
            0 => print_drops(iface, "drops", out)?,
            // Transmit drops are rare: shown only when there are some.
            1 if tx_dropped(iface) => print_drops(iface, "tx_drops", out)?,
            _ => {}
        }
    }
    let others: Vec<String> = iface
        .counters
        .iter()
        .filter(|(n, _)| {
            !n.starts_with("drops.")
                && !n.starts_with("tx_drops.")
                && !COUNTER_LINES.iter().any(|l| l.contains(&n.as_str()))
        })
        .map(|(n, v)| format!("{n} {v}"))
        .collect();
    if !others.is_empty() {
        writeln!(out, "\t{}", others.join(" "))?;
    }
    Ok(())
}

fn tx_dropped(iface: &IfStatus) -> bool {
    iface
        .counters
        .iter()
        .any(|(n, v)| n.starts_with("tx_drops.") && *v > 0)
}

/// `<kind> N: reason n, ...` with the non-zero reasons by name (kind: `drops` of received
/// frames, `tx_drops` of frames the device accepted for transmission).
fn print_drops(iface: &IfStatus, kind: &str, out: &mut dyn Write) -> io::Result<()> {
    let prefix = format!("{kind}.");
    let drops: Vec<(&str, u64)> = iface
        .counters
        .iter()
        .filter_map(|(n, v)| n.strip_prefix(prefix.as_str()).map(|reason| (reason, *v)))
        .collect();
    let total: u64 = drops.iter().map(|d| d.1).sum();
    let reasons: Vec<String> = drops
        .iter()
        .filter(|d| d.1 > 0)
        .map(|(reason, v)| format!("{reason} {v}"))
        .collect();
    if reasons.is_empty() {
        writeln!(out, "\t{kind} {total}")
    } else {
        writeln!(out, "\t{kind} {total}: {}", reasons.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{BusyPollLine, DeviceInterrupts, RxWork};

    fn shown(rx_work: Option<RxWork>) -> String {
        print(IfStatus {
            rx_work,
            ..status()
        })
    }

    fn print(iface: IfStatus) -> String {
        let mut out = Vec::new();
        print_interface(&iface, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn status() -> IfStatus {
        IfStatus {
            name: "veth1".into(),
            backend: "af_xdp".into(),
            mode: "polling".into(),
            link: "up".into(),
            mac: None,
            addresses: Vec::new(),
            tables: None,
            counters: Vec::new(),
            rx_work: None,
            umem: None,
            busy_poll: None,
            device_interrupts: None,
        }
    }

    #[test]
    fn the_addresses_and_where_the_tables_come_from() {
        let text = print(IfStatus {
            addresses: vec!["10.0.1.1/24".into(), "2001:db8::1/64".into()],
            tables: Some("kernel".into()),
            ..status()
        });
        assert!(
            text.contains("\tinet 10.0.1.1/24\n\tinet6 2001:db8::1/64\n\ttables kernel\n"),
            "{text}"
        );
    }

    #[test]
    fn busy_polling_says_its_path_and_the_device_its_own_interrupts() {
        let text = print(IfStatus {
            busy_poll: Some(BusyPollLine {
                path: "sysfs per-device".into(),
                napi_id: Some(8193),
                detail: "preferred busy polling of NAPI 8193, budget 5".into(),
            }),
            device_interrupts: Some(DeviceInterrupts {
                vectors: vec!["virtio0-input.0".into()],
                total: 14475,
                per_s: Some(3),
            }),
            counters: vec![("interrupts".into(), 12)],
            ..status()
        });
        assert_eq!(
            text,
            "veth1: link up mode polling backend af_xdp\n\
             \tbusy polling sysfs per-device: preferred busy polling of NAPI 8193, budget 5\n\
             \tdevice interrupts 14475 (3/s): virtio0-input.0\n\
             \tdrops 0\n\
             \tinterrupts 12\n"
        );
        // Before the daemon's second sample there is no rate.
        let first = print(IfStatus {
            device_interrupts: Some(DeviceInterrupts {
                vectors: vec!["eth0-TxRx-0".into(), "eth0".into()],
                total: 7,
                per_s: None,
            }),
            ..status()
        });
        assert!(
            first.contains("\tdevice interrupts 7: eth0-TxRx-0, eth0\n"),
            "{first}"
        );
    }

    #[test]
    fn receive_work_says_whether_it_is_in_polld_s_budget_and_where_it_runs() {
        let outside = shown(Some(RxWork {
            in_budget: false,
            runs_in: "napi/veth1-8193 (pid 812, CPU1)".into(),
            why_not: Some("no preferred busy polling: the socket has no NAPI id".into()),
        }));
        assert_eq!(
            outside,
            "veth1: link up mode polling backend af_xdp\n\
             \trx work NOT in polld's budget: napi/veth1-8193 (pid 812, CPU1)\n\
             \t\t(no preferred busy polling: the socket has no NAPI id)\n\
             \tdrops 0\n"
        );
        let inside = shown(Some(RxWork {
            in_budget: true,
            runs_in: "polld's read() of the TAP".into(),
            why_not: None,
        }));
        assert!(inside.contains("\trx work in polld's budget: polld's read() of the TAP\n"));
        // An older daemon says nothing about it, and nothing is shown.
        assert!(!shown(None).contains("rx work"));
    }
}
