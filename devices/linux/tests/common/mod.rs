//! Shared by the device integration tests.

/// Returns from a test early (saying so) unless we run as root, which namespaces, raw
/// sockets and BPF need; under CI (`POLLD_REQUIRE_ROOT`) that is a failure instead.
macro_rules! require_root {
    () => {
        polld_testsupport::require_root!("needs root for namespaces, raw sockets and BPF")
    };
}
