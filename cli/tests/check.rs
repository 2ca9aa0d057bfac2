//! `polld run --check` catches what `polld run` would refuse, opens nothing, and says
//! what it did not check (root only; CI runs as root).

mod common;

use std::path::Path;
use std::process::Command;

use common::{testbed, Dir, POLLD};
use polld_testbed::{PolldSetup, Testbed};

/// The testbed's polld config on `backend`, with `edit` applied to its text.
fn config(tb: &Testbed, socket: &Path, backend: &str, edit: impl Fn(String) -> String) -> String {
    edit(polld_testbed::polld_config(
        tb.layout(),
        &PolldSetup {
            backend,
            mode: "polling",
            socket,
            cpu: None,
            realtime: false,
            knobs: &[],
        },
    ))
}

/// `polld run --check -c PATH [--netns NS]`: success and stdout, or failure and stderr.
fn check(path: &Path, netns: Option<&str>) -> (bool, String) {
    let mut cmd = Command::new(POLLD);
    cmd.args(["run", "--check", "-c"]).arg(path);
    if let Some(ns) = netns {
        cmd.args(["--netns", ns]);
    }
    let out = cmd.output().unwrap();
    let text = if out.status.success() {
        out.stdout
    } else {
        out.stderr
    };
    (out.status.success(), String::from_utf8(text).unwrap())
}

/// A change to the config text.
type Edit = Box<dyn Fn(String) -> String>;

#[test]
fn check_refuses_what_run_would_and_opens_nothing() {
    require_root!();
    let tb = testbed("c");
    let fwd = tb.layout().fwd_ns.clone();
    let dir = Dir::new("check");
    let socket = dir.0.join("polld.sock");
    let path = dir.0.join("fwd.toml");
    let write = |backend: &str, edit: &dyn Fn(String) -> String| {
        std::fs::write(&path, config(&tb, &socket, backend, edit)).unwrap()
    };

    // A good config passes, says what it checked and what not, and opens nothing.
    write("af_xdp", &|c| c);
    let (ok, out) = check(&path, Some(&fwd));
    assert!(ok, "{out}");
    assert!(
        out.contains(&format!("exists in network namespace `{fwd}`")),
        "{out}"
    );
    assert!(
        out.contains("queue(s) 0 of veth1's 1 receive queue(s)"),
        "{out}"
    );
    assert!(
        out.contains("not checked") && out.contains("XDP program"),
        "{out}"
    );
    assert!(!socket.exists(), "--check created the control socket");
    let link = Command::new("ip")
        .args(["-n", &fwd, "link", "show", "dev", "veth1"])
        .output()
        .unwrap();
    let link = String::from_utf8_lossy(&link.stdout);
    assert!(
        !link.contains("xdp"),
        "--check attached an XDP program: {link}"
    );

    let cpus = std::thread::available_parallelism().unwrap().get();
    let bad_cpu = cpus + 5;
    let cases: Vec<(&str, Edit, String)> = vec![
        (
            "af_packet",
            Box::new(|c| c.replacen("[[interfaces]]", "[knobs]\n\"kern.polling.user_frac\" = 100\n\n[[interfaces]]", 1)),
            "knobs.\"kern.polling.user_frac\": 100 is out of range (allowed 0..99); write a value in 0..99".into(),
        ),
        (
            "af_packet",
            Box::new(|c| c.replacen("[[interfaces]]", "[knobs]\n\"kern.polling.nonsense\" = 1\n\n[[interfaces]]", 1)),
            "knobs.\"kern.polling.nonsense\": there is no knob kern.polling.nonsense; the knobs of kern.polling are".into(),
        ),
        (
            "af_packet",
            Box::new(move |c| c.replacen("[daemon]", &format!("[daemon]\ncpu = {bad_cpu}"), 1)),
            format!("daemon.cpu: CPU {bad_cpu}: "),
        ),
        (
            "af_xdp",
            Box::new(|c| c.replacen("mode = \"polling\"", "mode = \"polling\"\nqueue = 5", 1)),
            "interfaces[0].queue: veth1 has 1 receive queue(s), 0..0".into(),
        ),
        (
            "af_xdp",
            Box::new(|c| {
                c.replacen("[daemon]\n", "[daemon]\ncpus = [0, 1]\n", 1)
                    .replacen("mode = \"polling\"", "mode = \"polling\"\nqueues = [0, 1]", 1)
            }),
            "interfaces[0].queues: veth1 has 1 receive queue(s), 0..0, and queue 1 is not one".into(),
        ),
        (
            "af_packet",
            Box::new(|c| c.replacen("name = \"veth2\"", "name = \"nosuch0\"", 1)),
            format!("interfaces[1].name: there is no interface \"nosuch0\" in network namespace `{fwd}`"),
        ),
        (
            "af_packet",
            Box::new(|c| c.replacen("name = \"veth2\"", "name = \"veth2\"\nnetns = \"polld-no-such-ns\"", 1)),
            "interfaces[1].netns: there is no network namespace \"polld-no-such-ns\"".into(),
        ),
        (
            "af_packet",
            Box::new({
                let fwd = fwd.clone();
                move |c| c.replacen("name = \"veth2\"", &format!("name = \"nosuch1\"\nnetns = \"{fwd}\""), 1)
            }),
            format!("interfaces[1].name: there is no interface \"nosuch1\" in network namespace `{fwd}`; check `netns`"),
        ),
    ];
    for (backend, edit, says) in &cases {
        write(backend, edit.as_ref());
        let (ok, err) = check(&path, Some(&fwd));
        assert!(
            !ok && err.contains(says.as_str()),
            "expected {says:?}, got: {err}"
        );
        assert!(err.contains("fwd.toml:"), "no file and line: {err}");
    }

    // A forgotten --netns: the interfaces are not in the host's namespace, whether the
    // MAC is given or taken from the interface.
    write("af_packet", &|c| c);
    let (ok, err) = check(&path, None);
    assert!(
        !ok && err.contains("there is no interface \"veth1\" in the host's network namespace"),
        "{err}"
    );
    assert!(err.contains("--netns"), "{err}");
    let own_macs = [&tb.layout().veth1.mac, &tb.layout().veth2.mac].map(|m| format!("mac = {m:?}"));
    let without_macs = |c: String| {
        c.lines()
            .filter(|l| !own_macs.iter().any(|m| m == l))
            .collect::<Vec<_>>()
            .join("\n")
    };
    write("af_packet", &without_macs);
    let (ok, err) = check(&path, None);
    assert!(
        !ok && err.contains("there is no interface \"veth1\" in the host's network namespace"),
        "{err}"
    );
    assert!(!err.contains("mac: missing"), "{err}");
}
