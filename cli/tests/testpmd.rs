//! DPDK testpmd as the forward bench drives it (root only; `polld_testbed::testpmd`): a
//! testpmd that cannot start says why in EAL's words, and, where `dpdk-testpmd` is
//! installed (Debian `dpdk-dev`, not on CI), it forwards frames to sink with every frame
//! accounted for.

mod common;

use std::os::unix::fs::PermissionsExt;

use common::{gen, testbed, two_cpus, Dir};
use polld_testbed::testpmd::{program, Testpmd};

#[test]
fn a_testpmd_that_cannot_start_says_why_in_eals_words() {
    require_root!();
    let tb = testbed("tf");
    let dir = Dir::new("testpmd-fails");
    // What testpmd prints when EAL cannot start, then its exit.
    let fake = dir.0.join("dpdk-testpmd");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'EAL: Detected CPU lcores: 2'\n\
         echo 'EAL: Error - exiting with code: 1' >&2\n\
         echo '  Cause: Creation of mbuf pool for socket 0 failed: Cannot allocate memory' >&2\n\
         exit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let Err(e) = Testpmd::start(&tb, &fake, 0, "af_xdp") else {
        panic!("a testpmd that exited at once was taken as forwarding");
    };
    let message = e.to_string();
    assert!(
        message.contains("dpdk-testpmd (af_xdp) exited"),
        "{message}"
    );
    assert!(
        message
            .contains("Cause: Creation of mbuf pool for socket 0 failed: Cannot allocate memory"),
        "{message}"
    );
}

#[test]
fn testpmd_forwards_to_sink_and_accounts_for_every_frame() {
    require_root!();
    let Ok(testpmd) = program() else {
        eprintln!("skipped: dpdk-testpmd is not installed (Debian: dpdk-dev)");
        return;
    };
    if !two_cpus() {
        return;
    }
    let tb = testbed("tp");
    for backend in ["af_xdp", "af_packet"] {
        let running = Testpmd::start(&tb, &testpmd, 1, backend).unwrap();
        let mut flow = gen(&tb, "10k", 1);
        flow.0.wait().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        let counters = running.finish(&tb).unwrap();
        assert!(counters.balanced(), "{backend}: {counters}");
        // 10 kpps for 1 s: a forwarder sharing CPU1 with the kernel's receive threads
        // delivers most of it even on a busy machine.
        assert!(counters.delivered >= 5_000, "{backend}: {counters}");
    }
}
