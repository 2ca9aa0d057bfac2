//! Per-CPU polling as DragonFly BSD does it (`sys/net/if_poll.c`, "ifpoll"; docs/algorithm.md
//! §8): which CPU polls which interface, and the `net.ifpoll.N.*` names.
//!
//! Every poll CPU runs its own [`crate::Poller`], the whole kern_poll machine with its own
//! tick, burst and `user_frac` accounting, over the interfaces assigned to it; the CPUs
//! share no state. This module holds the two pieces that are not a poller's own:
//!
//! - [`assign`]: an interface goes to the CPU its config names, else round-robin over the
//!   poll CPUs in the order the interfaces are listed;
//! - [`per_cpu_name`] / [`kern_name`]: each CPU's `kern.polling.*` entries under
//!   DragonFly's per-CPU names, `net.ifpoll.N.pollhz` for the tick rate and
//!   `net.ifpoll.N.rx.*` for the RX poller (`kern_load` is DragonFly's `kern_frac`).

/// At most this many poll CPUs (DragonFly's `IFPOLL_CTX_MAX`).
pub const IFPOLL_CPUS_MAX: usize = 32;

/// Why the interfaces could not be assigned to the poll CPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AssignError {
    /// More poll CPUs than [`IFPOLL_CPUS_MAX`].
    TooMany { cpus: usize },
    /// A CPU listed twice.
    Duplicate { cpu: usize },
    /// Interface `index` asks for a CPU that is not a poll CPU.
    NotAPollCpu {
        index: usize,
        cpu: usize,
        cpus: Vec<usize>,
    },
}

impl std::fmt::Display for AssignError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AssignError::TooMany { cpus } => write!(
                f,
                "{cpus} poll CPUs listed; at most {IFPOLL_CPUS_MAX} (DragonFly's IFPOLL_CTX_MAX)"
            ),
            AssignError::Duplicate { cpu } => {
                write!(f, "CPU {cpu} is listed twice; list each poll CPU once")
            }
            AssignError::NotAPollCpu { index, cpu, cpus } => write!(
                f,
                "interfaces[{index}].cpu = {cpu} is not a poll CPU; the poll CPUs are {cpus:?} \
                 ([daemon] cpus): add {cpu} there or pick one of them"
            ),
        }
    }
}

impl std::error::Error for AssignError {}

/// The poll CPU of each interface: `wanted[i]` if given (it must be in `cpus`), else the
/// next CPU of `cpus` round-robin, counting only the interfaces without a `cpu`.
pub fn assign(cpus: &[usize], wanted: &[Option<usize>]) -> Result<Vec<usize>, AssignError> {
    if cpus.len() > IFPOLL_CPUS_MAX {
        return Err(AssignError::TooMany { cpus: cpus.len() });
    }
    for (i, cpu) in cpus.iter().enumerate() {
        if cpus[..i].contains(cpu) {
            return Err(AssignError::Duplicate { cpu: *cpu });
        }
    }
    let mut next = 0;
    wanted
        .iter()
        .enumerate()
        .map(|(index, want)| match *want {
            Some(cpu) if cpus.contains(&cpu) => Ok(cpu),
            Some(cpu) => Err(AssignError::NotAPollCpu {
                index,
                cpu,
                cpus: cpus.to_vec(),
            }),
            None => {
                let cpu = cpus[next % cpus.len()];
                next += 1;
                Ok(cpu)
            }
        })
        .collect()
}

/// The prefix of every per-CPU entry.
pub const PREFIX: &str = "net.ifpoll.";

/// `kern.polling.X` of CPU `cpu`'s poller under its per-CPU name: `kern.polling.hz` is
/// `net.ifpoll.N.pollhz`, `kern.polling.kern_load` is `net.ifpoll.N.rx.kern_frac`, any
/// other `kern.polling.X` is `net.ifpoll.N.rx.X`. `None` for names outside
/// `kern.polling.`, and for `kern.polling.enable`, which switches interfaces, not a CPU.
pub fn per_cpu_name(cpu: usize, kern: &str) -> Option<String> {
    let leaf = kern.strip_prefix("kern.polling.")?;
    Some(match leaf {
        "enable" => return None,
        "hz" => format!("{PREFIX}{cpu}.pollhz"),
        "kern_load" => format!("{PREFIX}{cpu}.rx.kern_frac"),
        _ => format!("{PREFIX}{cpu}.rx.{leaf}"),
    })
}

/// The inverse of [`per_cpu_name`]: the CPU and the `kern.polling.*` name of a
/// `net.ifpoll.N.*` name; `None` if `name` is not one.
pub fn kern_name(name: &str) -> Option<(usize, String)> {
    let rest = name.strip_prefix(PREFIX)?;
    let (cpu, leaf) = rest.split_once('.')?;
    let cpu = cpu.parse().ok()?;
    let kern = match leaf {
        "pollhz" => "hz",
        "rx.kern_frac" => "kern_load",
        _ => leaf.strip_prefix("rx.").filter(|l| *l != "enable")?,
    };
    Some((cpu, format!("kern.polling.{kern}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_cpus_are_kept_and_the_rest_go_round_robin() {
        let cpus = [2, 5];
        let got = assign(&cpus, &[None, Some(2), None, None, Some(5)]).unwrap();
        assert_eq!(got, vec![2, 2, 5, 2, 5]);
    }

    #[test]
    fn a_cpu_outside_the_list_and_a_duplicate_are_refused() {
        let e = assign(&[0, 1], &[Some(3)]).unwrap_err();
        assert!(e.to_string().contains("interfaces[0].cpu = 3"), "{e}");
        assert!(e.to_string().contains("[0, 1]"), "{e}");
        let e = assign(&[1, 1], &[None]).unwrap_err();
        assert_eq!(e, AssignError::Duplicate { cpu: 1 });
        let many: Vec<usize> = (0..=IFPOLL_CPUS_MAX).collect();
        assert!(matches!(
            assign(&many, &[]),
            Err(AssignError::TooMany { .. })
        ));
    }

    #[test]
    fn names_map_both_ways_as_dragonfly_spells_them() {
        for (kern, per_cpu) in [
            ("kern.polling.hz", "net.ifpoll.3.pollhz"),
            ("kern.polling.user_frac", "net.ifpoll.3.rx.user_frac"),
            ("kern.polling.burst", "net.ifpoll.3.rx.burst"),
            ("kern.polling.kern_load", "net.ifpoll.3.rx.kern_frac"),
        ] {
            assert_eq!(per_cpu_name(3, kern).as_deref(), Some(per_cpu));
            assert_eq!(kern_name(per_cpu), Some((3, kern.to_string())));
        }
        assert_eq!(per_cpu_name(0, "kern.polling.enable"), None);
        assert_eq!(kern_name("net.ifpoll.0.rx.enable"), None);
        assert_eq!(kern_name("net.ifpoll.x.pollhz"), None);
        assert_eq!(kern_name("net.inet.ip.forwarding"), None);
    }
}
