//! Tests that cannot run here skip, saying why: many need root (network namespaces, raw
//! sockets, BPF), some two CPUs (the flood on one, polld on the other) or what the machine
//! may lack (a VM guest's packages). Run by hand they skip; under CI a skip would hide that
//! they never ran, so when `POLLD_REQUIRE_ROOT` is set (`.ci/run` sets it) a test that
//! would skip fails instead, whatever it lacks.

/// The variable that turns a skip into a failure.
pub const REQUIRE_ROOT_VAR: &str = "POLLD_REQUIRE_ROOT";

/// True when the calling test may go on: `ok`. Otherwise prints that the test is skipped
/// and `why` (what it needs), and returns false, or panics when [`REQUIRE_ROOT_VAR`] is
/// set.
pub fn skip_unless(ok: bool, why: &str) -> bool {
    ok || decide_skip(why, std::env::var(REQUIRE_ROOT_VAR).ok().as_deref())
}

/// True when the calling test may go on: it runs as root (see [`skip_unless`]).
pub fn root_or_skip(why: &str) -> bool {
    let euid = rustix::process::geteuid().as_raw();
    skip_unless(euid == 0, &format!("{why} (uid {euid} is not root)"))
}

/// True when the machine has `n` CPUs or more for the calling test (see [`skip_unless`]);
/// `why` says what it runs on them.
pub fn cpus_or_skip(n: usize, why: &str) -> bool {
    let cpus = std::thread::available_parallelism().map_or(1, |c| c.get());
    skip_unless(
        cpus >= n,
        &format!("needs {n} CPUs ({why}), and this machine has {cpus}"),
    )
}

fn decide_skip(why: &str, require: Option<&str>) -> bool {
    match require {
        Some(v) if !v.is_empty() && v != "0" => panic!(
            "this test {why}, and {REQUIRE_ROOT_VAR}={v} forbids skipping it: run it where it \
             can run, or unset {REQUIRE_ROOT_VAR}"
        ),
        _ => {
            eprintln!("skipped: this test {why}");
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
    fn without_the_variable_a_test_skips() {
        assert!(!decide_skip("needs root", None));
        assert!(!decide_skip("needs root", Some("")));
        assert!(!decide_skip("needs root", Some("0")));
    }

    #[test]
    #[should_panic(expected = "forbids skipping it")]
    fn with_the_variable_a_test_that_would_skip_fails() {
        decide_skip("needs root", Some("1"));
    }

    #[test]
    fn a_test_that_can_run_neither_skips_nor_fails() {
        assert!(skip_unless(true, "needs nothing"));
        assert!(cpus_or_skip(1, "one thread"));
    }
}
