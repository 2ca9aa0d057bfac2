//! What the testbed's integration tests share: a prefix of their own, the root check,
//! bringing a testbed up, ping and the CPU count.

use std::process::Command;

use polld_testbed::{Layout, Role, Testbed, UpOptions};

/// A prefix no other test (or test process) uses.
pub fn prefix(tag: &str) -> String {
    format!("t{}{tag}-", std::process::id())
}

pub fn root() -> bool {
    polld_testsupport::root_or_skip("needs root for network namespaces")
}

pub fn up(tag: &str, options: UpOptions) -> Testbed {
    Testbed::up(&Layout::new(&prefix(tag)), &options).unwrap()
}

pub fn ping(testbed: &Testbed, from: Role, to: &str, count: &str) -> bool {
    Command::new("ip")
        .args(["netns", "exec", testbed.layout().ns(from)])
        .args(["ping", "-n", "-q", "-c", count, "-i", "0.2", "-W", "2", to])
        .output()
        .unwrap()
        .status
        .success()
}

pub fn two_cpus() -> bool {
    std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2
}
