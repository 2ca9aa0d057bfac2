//! The interface's own transmit-drop counter, as the kernel reports it.
//!
//! Some drops never reach the sending socket: with AF_XDP in copy mode a frame the veth
//! ring has no room for is completed as if sent, and veth counts it only in its
//! `tx_dropped`. The generator reads that counter at every report so that such frames
//! still show up. It reads `/proc/thread-self/net/dev`, which belongs to the network
//! namespace of the calling thread (after `--netns`), unlike `/sys/class/net`.

/// The `tx_dropped` counter of `interface` in the calling thread's namespace, or `None`
/// if the interface is not listed.
pub fn tx_dropped(interface: &str) -> Option<u64> {
    let table = std::fs::read_to_string("/proc/thread-self/net/dev").ok()?;
    tx_dropped_in(&table, interface)
}

/// The transmit `drop` column of `interface` in a `/proc/net/dev` table.
fn tx_dropped_in(table: &str, interface: &str) -> Option<u64> {
    // After "name:": 8 receive columns, then tx bytes, packets, errs, drop.
    const TX_DROP_COLUMN: usize = 11;
    table.lines().find_map(|line| {
        let (name, columns) = line.split_once(':')?;
        if name.trim() != interface {
            return None;
        }
        columns.split_whitespace().nth(TX_DROP_COLUMN)?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    3193      29    0    0    0     0          0         0     3193      29    0    0    0     0       0          0
    bg: 0 0 0 0 0 0 0 0 60000 1000 0 17 0 0 0 0
";

    #[test]
    fn the_transmit_drop_column_of_the_named_interface_is_read() {
        assert_eq!(tx_dropped_in(TABLE, "bg"), Some(17));
        assert_eq!(tx_dropped_in(TABLE, "lo"), Some(0));
        assert_eq!(tx_dropped_in(TABLE, "b"), None);
        assert_eq!(tx_dropped_in(TABLE, "Inter-"), None);
    }

    #[test]
    fn loopback_is_listed_in_this_namespace() {
        assert!(tx_dropped("lo").is_some());
    }
}
