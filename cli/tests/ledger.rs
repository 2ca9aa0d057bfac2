//! End-to-end conservation on real traffic (root only): a flood from `polld gen` through
//! polld on the veth testbed overflows veth1's 256-slot ring, and the kernel counts those
//! frames in veth0's `tx_dropped` in gen, where polld never sees them. The row's ledger
//! balances, with that hop booked.

mod common;

use common::{testbed, Dir, POLLD};
use polld_testbed::demo::{measure, Forwarder, Load, Trial};
use polld_testbed::{IpFamily, UpOptions};

#[test]
fn a_flood_balances_with_the_frames_veth1s_ring_dropped_in_gen_booked() {
    require_root!();
    if !polld_testsupport::skip::cpus_or_skip(2, "gen on CPU0, polld on CPU1") {
        return;
    }
    let tb = testbed("lg");
    let dir = Dir::new("ledger");
    let trial = Trial {
        label: "flood".to_string(),
        forwarder: Forwarder::Polld {
            backend: "af_xdp",
            mode: "polling",
            knobs: &[],
        },
        load: Load::Frames {
            rate: "unlimited",
            sink: true,
            family: IpFamily::Ipv4,
        },
        duration: 2.0,
    };
    let polld = std::path::Path::new(POLLD);
    let row = measure(&tb, &UpOptions::default(), polld, &dir.0, &trial).expect("flood trial");
    let ledger = row.ledger.clone().expect("polld forwarded gen's frames");
    eprintln!("{ledger}");
    assert!(ledger.balanced(), "{ledger}");
    assert_eq!(row.conserved, Some(true), "{row:?}");
    let veth0 = &tb.layout().veth0.name;
    assert!(
        ledger
            .lost
            .iter()
            .any(|(hop, n)| hop.starts_with(&format!("{veth0}: ")) && *n > 0),
        "gen sent faster than veth1's ring drains, yet {veth0} dropped nothing: {ledger}"
    );
}
