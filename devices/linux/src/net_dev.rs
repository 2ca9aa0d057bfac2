//! An interface's kernel counters as `/proc/net/dev` lists them.
//!
//! [`PATH`] belongs to the network namespace of the calling thread (after a `setns`),
//! unlike `/sys/class/net`, which shows the namespace that mounted sysfs; a file opened
//! there stays bound to that namespace, whoever reads it later. The kernel fills it from
//! the same statistics as `ip -s link`, except that its receive `drop` column also counts
//! the device's missed frames (`rx_missed_errors`, 0 on veth and TAP).

/// The calling thread's namespace's `/proc/net/dev`.
pub const PATH: &str = "/proc/thread-self/net/dev";

/// One interface's line of `/proc/net/dev`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetDevCounters {
    pub rx_bytes: u64,
    pub rx_packets: u64,
    pub rx_dropped: u64,
    pub tx_bytes: u64,
    pub tx_packets: u64,
    pub tx_dropped: u64,
}

/// `interface`'s counters in a `/proc/net/dev` table, or `None` if it is not listed.
/// A line is `name:` then eight receive columns (bytes packets errs drop fifo frame
/// compressed multicast) and eight transmit columns (bytes packets errs drop fifo colls
/// carrier compressed).
pub fn counters_in(table: &str, interface: &str) -> Option<NetDevCounters> {
    let columns = table.lines().find_map(|line| {
        let (name, columns) = line.split_once(':')?;
        (name.trim() == interface).then_some(columns)
    })?;
    let n: Vec<u64> = columns
        .split_whitespace()
        .map(|c| c.parse().ok())
        .collect::<Option<_>>()?;
    (n.len() == 16).then(|| NetDevCounters {
        rx_bytes: n[0],
        rx_packets: n[1],
        rx_dropped: n[3],
        tx_bytes: n[8],
        tx_packets: n[9],
        tx_dropped: n[11],
    })
}

/// `interface`'s counters in the calling thread's namespace, or `None` if it has none.
pub fn counters(interface: &str) -> Option<NetDevCounters> {
    counters_in(&std::fs::read_to_string(PATH).ok()?, interface)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    3193      29    0    0    0     0          0         0     3193      29    0    0    0     0       0          0
  tap0: 1200000   20000    0    7    0     0          0         0 60000000  1000000    0   42    0     0       0          0
    bg: 0 0 0 0 0 0 0 0 60000 1000 0 17 0 0 0 0
";

    #[test]
    fn the_named_interfaces_line_is_read_column_by_column() {
        assert_eq!(
            counters_in(TABLE, "tap0"),
            Some(NetDevCounters {
                rx_bytes: 1_200_000,
                rx_packets: 20_000,
                rx_dropped: 7,
                tx_bytes: 60_000_000,
                tx_packets: 1_000_000,
                tx_dropped: 42,
            })
        );
        assert_eq!(counters_in(TABLE, "bg").map(|c| c.tx_dropped), Some(17));
        assert_eq!(counters_in(TABLE, "lo").map(|c| c.rx_packets), Some(29));
        assert_eq!(counters_in(TABLE, "b"), None);
        assert_eq!(counters_in(TABLE, "tap"), None);
        assert_eq!(counters_in(TABLE, "Inter-"), None);
        assert_eq!(counters_in("  cut: 1 2 3\n", "cut"), None);
    }

    #[test]
    fn loopback_is_listed_in_this_namespace() {
        assert!(counters("lo").is_some());
    }
}
