//! Forwarding without a user-space copy on the veth testbed (root only; CI runs as root):
//! with `[daemon] af_xdp_shared_umem = true` veth1 and veth2 share one UMEM, every frame
//! veth1 forwards leaves veth2 as the buffer it arrived in (`lent`), and every frame is
//! accounted for; with `false` each has its own and frames are copied; with a fault
//! injector wrapping veth1 (which then copies) nothing is shared; on a backend other than
//! AF_XDP the setting is refused with the reason.

mod common;

use std::path::Path;
use std::process::Command;

use common::{count, router_config, stop, testbed, Dir, Polld, POLLD};
use polld_testbed::Testbed;
use polld_testsupport::{Edit, FaultConfig};

/// `fwd.toml` for `backend` in polling mode, with `af_xdp_shared_umem = shared`.
fn config(
    tb: &Testbed,
    dir: &Dir,
    backend: &str,
    shared: bool,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let (path, socket) = router_config(tb, dir, backend, "polling", None, false, &[]);
    let text = Edit::of(&std::fs::read_to_string(&path).unwrap())
        .daemon("af_xdp_shared_umem", shared)
        .to_toml();
    assert!(text.contains("af_xdp_shared_umem"), "{text}");
    std::fs::write(&path, text).unwrap();
    (path, socket)
}

/// Runs polld on `path` under 2 s of traffic; returns `polld ifconfig veth1` and the
/// final counters of veth1 (conservation checked on both interfaces, and end to end).
fn forward(tb: &Testbed, path: &Path, socket: &Path) -> (String, serde_json::Value) {
    let polld = Polld::start(tb, path, socket);
    let ifconfig = polld.ok(&["ifconfig", "veth1"]);
    let (trail, sent) = common::gen_ledgered(tb, "50k", 2);
    let interfaces = stop(polld);
    common::assert_ledger(&trail, sent, &interfaces);
    let veth1 = interfaces
        .into_iter()
        .find(|i| i["name"] == "veth1")
        .unwrap();
    (ifconfig, veth1)
}

#[test]
fn a_shared_umem_forwards_without_a_copy_and_accounts_for_every_frame() {
    require_root!();
    let tb = testbed("su");
    let dir = Dir::new("shared-umem");

    // Refused where there is nothing to share, naming the interfaces and the fix.
    let (path, _) = config(&tb, &dir, "af_packet", true);
    let out = Command::new(POLLD)
        .args(["run", "--check", "-c"])
        .arg(&path)
        .args(["--netns", &tb.layout().fwd_ns])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("af_xdp_shared_umem")
            && err.contains("veth1 is af_packet")
            && err.contains("backend = \"af_xdp\""),
        "{err}"
    );

    let (path, socket) = config(&tb, &dir, "af_xdp", true);
    let (ifconfig, veth1) = forward(&tb, &path, &socket);
    assert!(ifconfig.contains("umem shared with veth2"), "{ifconfig}");
    let forwarded = count(&veth1, "forwarded");
    assert!(forwarded > 10_000, "{veth1}");
    assert_eq!(
        count(&veth1, "lent"),
        forwarded,
        "every frame lent: {veth1}"
    );

    let (path, socket) = config(&tb, &dir, "af_xdp", false);
    let (ifconfig, veth1) = forward(&tb, &path, &socket);
    assert!(ifconfig.contains("umem own"), "{ifconfig}");
    assert!(count(&veth1, "forwarded") > 10_000, "{veth1}");
    assert_eq!(count(&veth1, "lent"), 0, "{veth1}");

    // A fault injector wraps veth1, and a wrapper copies: veth2 alone could lend, so no
    // UMEM is shared and each interface has its own.
    let (path, socket) = config(&tb, &dir, "af_xdp", true);
    let fault = FaultConfig {
        seed: 1,
        ..FaultConfig::default()
    };
    let text = Edit::of(&std::fs::read_to_string(&path).unwrap())
        .fault("veth1", fault)
        .to_toml();
    std::fs::write(&path, text).unwrap();
    let polld = Polld::start(&tb, &path, &socket);
    let ifconfig = polld.ok(&["ifconfig"]);
    stop(polld);
    assert_eq!(ifconfig.matches("umem own").count(), 2, "{ifconfig}");
    assert!(!ifconfig.contains("umem shared"), "{ifconfig}");
}
