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
    polld_dev::net_dev::counters(interface).map(|c| c.tx_dropped)
}
