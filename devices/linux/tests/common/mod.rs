//! Shared by the device integration tests.

/// Returns from a test early (saying so) unless we run as root, which namespaces, raw
/// sockets and BPF need. CI runs as root.
macro_rules! require_root {
    () => {
        if !polld_dev::netns::is_root() {
            eprintln!("skipped: needs root");
            return;
        }
    };
}
