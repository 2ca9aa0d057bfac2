//! What the testbed tests share: the root check.

/// Skips the calling test, saying why, unless it runs as root.
#[macro_export]
macro_rules! require_root {
    () => {
        if !polld_dev::netns::is_root() {
            eprintln!("skipped: needs root to create network namespaces");
            return;
        }
    };
}
