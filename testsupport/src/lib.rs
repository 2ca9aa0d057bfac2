//! What polld's tests share across crates.
//!
//! Many integration tests need root (network namespaces, raw sockets, BPF). Run by hand as
//! a user they skip, saying so; under CI a skip would hide that they never ran, so when
//! `POLLD_REQUIRE_ROOT` is set (`.ci/run` sets it) a test that would skip fails instead.

#![forbid(unsafe_code)]

/// The variable that turns a root test's skip into a failure.
pub const REQUIRE_ROOT_VAR: &str = "POLLD_REQUIRE_ROOT";

/// True when the calling test may go on: it runs as root. Otherwise prints that the test
/// is skipped and why, and returns false, or panics when [`REQUIRE_ROOT_VAR`] is set.
pub fn root_or_skip(why: &str) -> bool {
    let euid = rustix::process::geteuid().as_raw();
    if euid == 0 {
        return true;
    }
    decide_skip(euid, why, std::env::var(REQUIRE_ROOT_VAR).ok().as_deref())
}

fn decide_skip(euid: u32, why: &str, require: Option<&str>) -> bool {
    match require {
        Some(v) if !v.is_empty() && v != "0" => panic!(
            "this test {why} but runs as uid {euid}, and {REQUIRE_ROOT_VAR}={v} forbids \
             skipping it: run the tests as root, or unset {REQUIRE_ROOT_VAR}"
        ),
        _ => {
            eprintln!("skipped: this test {why} (uid {euid} is not root)");
            false
        }
    }
}

/// Returns from the calling test unless it runs as root (see [`root_or_skip`]).
#[macro_export]
macro_rules! require_root {
    ($why:expr) => {
        if !$crate::root_or_skip($why) {
            return;
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_the_variable_a_non_root_test_skips() {
        assert!(!decide_skip(1000, "needs root", None));
        assert!(!decide_skip(1000, "needs root", Some("")));
        assert!(!decide_skip(1000, "needs root", Some("0")));
    }

    #[test]
    #[should_panic(expected = "forbids skipping it")]
    fn with_the_variable_a_non_root_test_fails() {
        decide_skip(1000, "needs root", Some("1"));
    }
}
