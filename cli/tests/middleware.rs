//! Honest devices under `polld run`, each test on a testbed of its own (root only; CI runs
//! as root): `--pcap` files are readable and hold exactly the frames the counters show,
//! `[interfaces.fault]` faults are counted by name with conservation exact, frames the
//! output device cannot send are its named transmit drops, and frames behind a lost wakeup
//! are found by the wakeup watchdog.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{assert_conserved, count, counter, gen, testbed, Dir, Polld};
use polld_testbed::{PolldSetup, Testbed};
use polld_testsupport::{eventually, Edit, FaultConfig};
use serde_json::Value;

/// The number of records of a classic pcap file, after checking its global header and
/// that the last record is whole.
fn pcap_records(path: &Path) -> u64 {
    let file = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let word = |at: usize| u32::from_ne_bytes(file[at..at + 4].try_into().unwrap());
    assert!(file.len() >= 24, "{}: no pcap header", path.display());
    assert_eq!(word(0), 0xa1b2_c3d4, "magic");
    assert_eq!(word(20), 1, "LINKTYPE_ETHERNET");
    let (mut at, mut records) = (24, 0);
    while at < file.len() {
        let (caught, orig) = (word(at + 8), word(at + 12));
        assert!(caught <= orig && caught <= 65_535, "record {records}");
        at += 16 + caught as usize;
        records += 1;
    }
    assert_eq!(at, file.len(), "{}: a cut record", path.display());
    records
}

/// polld routing in fwd on AF_PACKET in `mode`: its socket, the config path in `dir`, and
/// the config text (to be written there, edited or not).
fn router_config(tb: &Testbed, dir: &Dir, mode: &str) -> (PathBuf, PathBuf, String) {
    let socket = dir.0.join("polld.sock");
    let setup = PolldSetup {
        backend: "af_packet",
        mode,
        socket: &socket,
        cpu: None,
        realtime: false,
        knobs: &[],
    };
    let text = polld_testbed::polld_config(tb.layout(), &setup);
    (socket.clone(), dir.0.join("fwd.toml"), text)
}

#[test]
fn pcap_files_match_the_counters_and_faults_are_counted_with_conservation_exact() {
    require_root!();
    let tb = testbed("mw");
    let dir = Dir::new(&format!("{}-mw", tb.layout().prefix));
    let (socket, config, text) = router_config(&tb, &dir, "polling");
    // veth1 (from gen) misbehaves on receive, veth2 (to sink) on transmit.
    let rx_faults = FaultConfig {
        seed: 3,
        rx_drop: 50,
        rx_truncate: 50,
        rx_corrupt: 50,
        rx_duplicate: 50,
        ..FaultConfig::default()
    };
    let tx_faults = FaultConfig {
        seed: 4,
        tx_fail: 100,
        ..FaultConfig::default()
    };
    let text = Edit::of(&text)
        .fault("veth1", rx_faults)
        .fault("veth2", tx_faults)
        .to_toml();
    std::fs::write(&config, text).unwrap();
    let prefix = dir.0.join("cap");
    let prefix = prefix.to_str().unwrap();
    let polld = Polld::start_with(&tb, &config, &socket, &["--pcap", prefix]);

    let mut load = gen(&tb, "5k", 1);
    eventually("polld gen finishes", Duration::from_secs(20), || {
        load.0.try_wait().unwrap().is_some()
    });
    let interfaces: Vec<Value> = serde_json::from_str(&polld.stop()).unwrap();
    for iface in &interfaces {
        assert_conserved(iface);
        let name = iface["name"].as_str().unwrap();
        let records = pcap_records(Path::new(&format!("{prefix}.{name}.pcap")));
        assert_eq!(
            records,
            count(iface, "rx_packets") + count(iface, "tx_packets"),
            "{name}: pcap records = rx_packets + tx_packets: {iface}"
        );
    }
    let (veth1, veth2) = (&interfaces[0], &interfaces[1]);
    assert!(count(veth1, "rx_packets") > 500, "{veth1}");
    assert!(count(veth1, "drops.fault_injected") > 0, "{veth1}");
    // Cut or flipped frames fail the stage's checks, under their own names.
    let malformed: u64 = [
        "truncated",
        "bad_length",
        "bad_checksum",
        "bad_version",
        "bad_ihl",
    ]
    .iter()
    .map(|r| count(veth1, &format!("drops.{r}")))
    .sum();
    assert!(malformed > 0, "{veth1}");
    assert!(count(veth2, "tx_drops.fault") > 0, "{veth2}");
    assert!(count(veth2, "tx_drops.fault") < count(veth2, "tx_packets"));
}

/// Frames the output cannot send (its MTU shrank under polld) are transmit drops of the
/// output, by name: forwarded = tx_packets there, and every one is delivered or counted.
#[test]
fn frames_too_long_for_the_output_are_counted_on_it_by_name() {
    require_root!();
    let tb = testbed("mt");
    let dir = Dir::new(&format!("{}-mt", tb.layout().prefix));
    let (socket, config, text) = router_config(&tb, &dir, "interrupt");
    std::fs::write(&config, text).unwrap();
    let polld = Polld::start(&tb, &config, &socket);
    let layout = tb.layout();
    let shrink = std::process::Command::new("ip")
        .args([
            "-n",
            &layout.fwd_ns,
            "link",
            "set",
            &layout.veth2.name,
            "mtu",
            "1000",
        ])
        .status()
        .unwrap();
    assert!(shrink.success());
    let sent = tb
        .command_in(polld_testbed::Role::Gen, None, common::POLLD)
        .unwrap()
        .args([
            "gen", "veth0", "--size", "1400", "--count", "200", "--rate", "2k", "--json",
        ])
        .output()
        .unwrap();
    assert!(sent.status.success(), "{sent:?}");
    // After its 200 frames gen sends small end-of-run records, which fit the MTU.
    let summary = common::one_document("polld gen", &sent.stdout, &["end_records"]);
    let end_records = summary["end_records"].as_u64().expect("end_records");
    let interfaces: Vec<Value> = serde_json::from_str(&polld.stop()).unwrap();
    for iface in &interfaces {
        assert_conserved(iface);
    }
    let (veth1, veth2) = (&interfaces[0], &interfaces[1]);
    let forwarded = count(veth1, "forwarded");
    assert_eq!(
        forwarded + count(veth1, "drops.rx_ring_full"),
        200 + end_records,
        "{veth1}"
    );
    assert!(forwarded > end_records, "{veth1}");
    assert_eq!(count(veth2, "tx_packets"), forwarded, "{veth2}");
    assert_eq!(
        count(veth2, "tx_drops.too_long"),
        forwarded - end_records,
        "{veth2}"
    );
}

/// `polld gen` in gen: `count` frames at `rate`, waited for; the frames polld will see
/// from it (its end-of-run records included).
fn send(tb: &Testbed, count: u32, rate: &str) -> u64 {
    let sent = tb
        .command_in(polld_testbed::Role::Gen, None, common::POLLD)
        .unwrap()
        .args(["gen", "veth0", "--json", "--rate", rate])
        .args(["--count", &count.to_string()])
        .output()
        .unwrap();
    assert!(sent.status.success(), "{sent:?}");
    let summary = common::one_document("polld gen", &sent.stdout, &["end_records"]);
    u64::from(count) + summary["end_records"].as_u64().expect("end_records")
}

/// On a veth pair (AF_PACKET) whose receive side loses 1 wakeup in 100, in each mode that
/// waits for wakeups: with the watchdog on (`kern.polling.wakeup_watchdog_ms`, its
/// default) no frame stays in the ring, the watchdog counting the frames it found; with
/// it off the frames behind a lost wakeup stay there (the control: the fault does strand
/// frames on this device), until turning it on again serves them. A frame is either
/// forwarded or, if it came while the ring was full of frames waiting for the watchdog,
/// dropped by the kernel at the ring and counted there (`drops.rx_ring_full`). polld has
/// no per-frame wait figure, so how long a frame waited is not asserted.
///
/// In auto mode only the first part holds on this device: a lost wakeup here leaves the
/// socket readable, so the poll thread keeps waking for it, auto counts that CPU as
/// interrupt work, and the overload switches the interface to polling, whose polls find
/// the frames, mostly before the watchdog does (devices/middleware/src/fault.rs). The
/// watchdog in auto mode is shown on virtual time (devices/sim/tests/watchdog.rs).
#[test]
fn frames_behind_lost_wakeups_are_found_by_the_watchdog() {
    require_root!();
    let tb = testbed("wd");
    for (seed, mode) in (1..).zip(["interrupt", "adaptive", "auto"]) {
        let dir = Dir::new(&format!("{}-wd-{mode}", tb.layout().prefix));
        let (socket, config, text) = router_config(&tb, &dir, mode);
        let lossy = FaultConfig {
            seed,
            wakeup_loss: 10,
            ..FaultConfig::default()
        };
        std::fs::write(&config, Edit::of(&text).fault("veth1", lossy).to_toml()).unwrap();
        let polld = Polld::start(&tb, &config, &socket);

        let mut sent = send(&tb, 1000, "500");
        eventually(
            &format!("{mode}, watchdog on: no frame left in the ring"),
            Duration::from_secs(20),
            || waiting(&polld, sent) == 0,
        );
        if mode != "auto" {
            strand_then_serve(&tb, &polld, mode, &mut sent);
        }

        let interfaces: Vec<Value> = serde_json::from_str(&polld.stop()).unwrap();
        for iface in &interfaces {
            assert_conserved(iface);
        }
        let out = count(&interfaces[0], "forwarded") + count(&interfaces[0], "drops.rx_ring_full");
        assert_eq!(out, sent, "{mode}");
    }
}

/// Frames sent to veth1 that are neither forwarded nor dropped at the ring: in the ring.
fn waiting(polld: &Polld, sent: u64) -> u64 {
    let out =
        counter(polld, "dev.veth1.forwarded") + counter(polld, "dev.veth1.drops.rx_ring_full");
    sent.checked_sub(out).expect("more frames out than sent")
}

/// After a batch the watchdog served: it found frames; then, the watchdog off, frames
/// until a wakeup is lost and some stay in the ring; the watchdog on again serves them.
fn strand_then_serve(tb: &Testbed, polld: &Polld, mode: &str, sent: &mut u64) {
    let watchdog = "kern.polling.wakeup_watchdog_ms";
    let found = || counter(polld, "dev.veth1.watchdog_frames");
    let watched = found();
    assert!(watched > 0, "{mode}: no wakeup lost while it watched");

    polld.ok(&["ctl", &format!("{watchdog}=0")]);
    // Until a wakeup is lost: 1 in 100, so nearly always in the first batch.
    for _ in 0..5 {
        *sent += send(tb, 1000, "500");
        if waiting(polld, *sent) > 0 {
            break;
        }
    }
    let stranded = waiting(polld, *sent);
    assert!(stranded > 0, "{mode}, watchdog off: no frame stranded");
    assert_eq!(found(), watched, "{mode}: the watchdog looked while off");

    polld.ok(&["ctl", &format!("{watchdog}=100")]);
    eventually(
        &format!("{mode}: the watchdog serves the {stranded} stranded frames"),
        Duration::from_secs(20),
        || waiting(polld, *sent) == 0,
    );
    assert!(found() > watched, "{mode}");
}
