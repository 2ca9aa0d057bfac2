//! What the testbed tests share: the root check, a unique testbed, a scratch directory and
//! a running `polld run` in fwd.

// Each test binary uses its own part of this module.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use polld_dev::netns::{in_netns, veth_pair, Netns, VethEnd};
use polld_testbed::ledger::{Ledger, Sent, StreamTrail};
use polld_testbed::{Devices, Layout, PolldSetup, Role, Testbed, UpOptions};
use polld_testsupport::{eventually, ConfigFile, Interface};
use rustix::process::{Pid, Signal};
use serde_json::Value;

/// Sends `signal` to `child`, a process we started (not reaped yet, so its pid is still
/// its own).
pub fn signal(child: &Child, signal: Signal) {
    let _ = rustix::process::kill_process(Pid::from_child(child), signal);
}

/// The daemon; it runs polld-lab, built beside it, for the lab's commands.
pub const POLLD: &str = env!("CARGO_BIN_EXE_polld");
/// The lab.
pub const POLLD_LAB: &str = env!("CARGO_BIN_EXE_polld-lab");

/// Skips the calling test, saying why, unless it runs as root (a failure under CI).
#[macro_export]
macro_rules! require_root {
    () => {
        polld_testsupport::require_root!("needs root to create network namespaces")
    };
}

/// Whether the machine has the two CPUs a flood test needs (the flood on CPU0, polld on
/// CPU1); says that the test skips if not, or fails under CI.
pub fn two_cpus() -> bool {
    polld_testsupport::skip::cpus_or_skip(2, "the flood on CPU0, polld on CPU1")
}

/// `stdout`, what `what` printed with `--json`, as the one JSON document it must be (all of
/// it: nothing before or after), with each of `keys` at its top level, or in each of its
/// elements when it is an array.
pub fn one_document(what: &str, stdout: &[u8], keys: &[&str]) -> Value {
    let text = String::from_utf8_lossy(stdout);
    let document: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{what} --json: not one JSON document ({e}):\n{text}"));
    let objects = match &document {
        Value::Array(elements) => elements.iter().collect(),
        object => vec![object],
    };
    for object in objects {
        for key in keys {
            assert!(
                object.get(key).is_some(),
                "{what} --json: no {key:?} in {object}"
            );
        }
    }
    document
}

/// A veth testbed whose namespaces are unique to this process and `tag`; torn down on
/// drop, also when the test fails.
pub fn testbed(tag: &str) -> Testbed {
    testbed_of(tag, Devices::Veth)
}

/// A testbed of `devices`, unique as [`testbed`].
pub fn testbed_of(tag: &str, devices: Devices) -> Testbed {
    testbed_with(tag, devices, &UpOptions::default())
}

/// A testbed of `devices` brought up with `options`, unique as [`testbed`].
pub fn testbed_with(tag: &str, devices: Devices, options: &UpOptions) -> Testbed {
    let prefix = format!("pt{}{tag}", std::process::id() % 10_000);
    let layout = Layout::with_devices(&prefix, devices);
    Testbed::up(&layout, options).expect("testbed up")
}

/// `ip ARGS`, which must succeed; its standard output.
pub fn ip(args: &[&str]) -> String {
    polld_dev::netns::ip(args).unwrap_or_else(|e| panic!("{e}"))
}

/// `ip -n NS ARGS`, which must succeed; its standard output.
pub fn ip_in(ns: &str, args: &[&str]) -> String {
    ip(&[&["-n", ns], args].concat())
}

/// A scratch directory, removed on drop.
pub struct Dir(pub PathBuf);

impl Dir {
    pub fn new(tag: &str) -> Dir {
        let dir = std::env::temp_dir().join(format!("polld-test-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `polld bench <bench> --quick --json` on a testbed of its own (namespaces named
/// from `tag`), writing its plots in a scratch directory; returns the directory (alive while
/// the plots are read), the JSON report and the progress lines (stderr). Fails the test if
/// the bench fails.
pub fn quick_bench(bench: &str, tag: &str) -> (Dir, Value, String) {
    quick_bench_retrying(bench, tag, &[])
}

/// [`quick_bench`], run again (three runs at most) while a run fails saying one of
/// `retry_on`: a verdict that depends on how hard this machine's generator floods in one
/// run (or on another process on the poll CPU), but that must hold in one of three runs in
/// a row.
pub fn quick_bench_retrying(bench: &str, tag: &str, retry_on: &[&str]) -> (Dir, Value, String) {
    let dir = Dir::new(&format!("bench-{bench}"));
    let prefix = format!("pt{}{tag}", std::process::id() % 10_000);
    let run = || {
        Command::new(POLLD)
            .args([
                "bench", bench, "--quick", "--json", "--prefix", &prefix, "--out",
            ])
            .arg(&dir.0)
            .output()
            .unwrap_or_else(|e| panic!("run polld bench {bench}: {e}"))
    };
    let mut out = run();
    let mut stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    for _ in 1..3 {
        let Some(verdict) = retry_on
            .iter()
            .find(|v| !out.status.success() && stderr.contains(*v))
        else {
            break;
        };
        eprintln!("polld bench {bench}: {verdict}; running it again:\n{stderr}");
        out = run();
        stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    }
    assert!(
        out.status.success(),
        "polld bench {bench} failed:\n{stderr}"
    );
    let report = one_document(&format!("polld bench {bench}"), &out.stdout, &[]);
    (dir, report, stderr)
}

/// Writes `fwd.toml` in `dir`: the testbed's router config with `backend` and `mode` on
/// both interfaces, the poll thread on `cpu` (any if `None`), `realtime`, `knobs`, and the
/// control socket `polld.sock` in `dir`. Returns the config's path and the socket.
pub fn router_config(
    tb: &Testbed,
    dir: &Dir,
    backend: &str,
    mode: &str,
    cpu: Option<usize>,
    realtime: bool,
    knobs: &[(&str, &str)],
) -> (PathBuf, PathBuf) {
    let socket = dir.0.join("polld.sock");
    let path = dir.0.join("fwd.toml");
    let setup = PolldSetup {
        backend,
        mode,
        socket: &socket,
        cpu,
        realtime,
        knobs,
    };
    std::fs::write(&path, polld_testbed::polld_config(tb.layout(), &setup)).unwrap();
    (path, socket)
}

/// A running `polld run --json -c CONFIG` in the testbed's fwd namespace; killed on drop
/// if still running.
pub struct Polld {
    child: Option<Child>,
    pub socket: PathBuf,
}

impl Polld {
    /// Starts polld in the testbed's fwd namespace and waits until its control socket
    /// exists.
    pub fn start(tb: &Testbed, config: &Path, socket: &Path) -> Polld {
        Polld::start_in(&tb.layout().fwd_ns, config, socket, &[])
    }

    /// Starts polld with more `polld run` options (`--pcap PREFIX`).
    pub fn start_with(tb: &Testbed, config: &Path, socket: &Path, extra: &[&str]) -> Polld {
        Polld::start_in(&tb.layout().fwd_ns, config, socket, extra)
    }

    /// Starts polld in namespace `netns`, with more `polld run` options `extra`, and waits
    /// until its control socket exists.
    pub fn start_in(netns: &str, config: &Path, socket: &Path, extra: &[&str]) -> Polld {
        let child = Command::new(POLLD)
            .args(["run", "--json", "-c"])
            .arg(config)
            .args(["--netns", netns])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start polld");
        let polld = Polld {
            child: Some(child),
            socket: socket.to_path_buf(),
        };
        eventually(
            "polld starts: its control socket exists",
            Duration::from_secs(20),
            || socket.exists(),
        );
        polld
    }

    /// The process, to signal it ([`signal`]).
    pub fn child(&self) -> &Child {
        self.child.as_ref().unwrap()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// SIGKILL, as a crash would end it; waits for it to be gone.
    pub fn kill(mut self) {
        let mut child = self.child.take().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// `polld ARGS` against this daemon's socket.
    pub fn run(&self, args: &[&str]) -> Output {
        Command::new(POLLD)
            .args(args)
            .env("POLLD_SOCKET", &self.socket)
            .output()
            .unwrap()
    }

    /// `polld ARGS`, which must succeed; its standard output.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(out.status.success(), "polld {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    /// SIGINT; waits for exit 0 and returns what polld printed (the final counters).
    pub fn stop(self) -> String {
        self.stop_with_log().0
    }

    /// [`Polld::stop`], with what polld logged (its standard error) beside.
    pub fn stop_with_log(mut self) -> (String, String) {
        let mut child = self.child.take().unwrap();
        signal(&child, Signal::INT);
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("polld did not stop on SIGINT");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut stdout = String::new();
        let mut stderr = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut stdout)
            .unwrap();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        assert!(status.success(), "polld exit {status}: {stderr}");
        (stdout, stderr)
    }
}

impl Drop for Polld {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// polld routing in fwd with `backend` and `mode` on both interfaces, and the directory
/// holding its config and socket.
pub fn start_router(tb: &Testbed, backend: &str, mode: &str) -> (Dir, Polld) {
    let dir = Dir::new(&format!("{}-{backend}-{mode}", tb.layout().prefix));
    let socket = dir.0.join("polld.sock");
    let config = dir.0.join("fwd.toml");
    std::fs::write(
        &config,
        polld_testbed::polld_config(
            tb.layout(),
            &PolldSetup {
                backend,
                mode,
                socket: &socket,
                cpu: None,
                realtime: false,
                knobs: &[],
            },
        ),
    )
    .unwrap();
    let polld = Polld::start(tb, &config, &socket);
    (dir, polld)
}

/// `polld ctl --json NAMES`: name → value.
pub fn values(polld: &Polld, names: &[&str]) -> Vec<(String, String)> {
    let mut args = vec!["ctl", "--json"];
    args.extend_from_slice(names);
    let v: Value = serde_json::from_str(&polld.ok(&args)).unwrap();
    v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["value"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

pub fn counter(polld: &Polld, name: &str) -> u64 {
    values(polld, &[name])[0].1.parse().unwrap()
}

/// Stops polld and checks conservation on every interface; returns the final interfaces.
pub fn stop(polld: Polld) -> Vec<Value> {
    let interfaces: Vec<Value> = serde_json::from_str(&polld.stop()).unwrap();
    for iface in &interfaces {
        assert_conserved(iface);
    }
    interfaces
}

/// Pings sink from gen; returns the replies received.
pub fn ping(tb: &Testbed, n: u32) -> u32 {
    let out = tb
        .command_in(Role::Gen, None, "ping")
        .unwrap()
        .args(["-c", &n.to_string(), "-i", "0.2", "-W", "1", "-q"])
        .arg(tb.layout().veth3.addr.to_string())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.split(',')
        .find_map(|part| part.trim().strip_suffix(" received"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Pings until the first reply (ARP resolved on both sides), for at most `secs`.
pub fn warm_up(tb: &Testbed) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while ping(tb, 1) == 0 {
        assert!(Instant::now() < deadline, "no ping reply through polld");
    }
}

/// An iperf3 client in gen against a one-off server in sink; returns its JSON report.
pub fn iperf3(tb: &Testbed, port: u16, secs: u32, udp: bool) -> Value {
    let mut server = tb
        .command_in(Role::Sink, None, "iperf3")
        .unwrap()
        .args(["-s", "-1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    eventually(
        &format!("iperf3 -s listens on port {port} in sink"),
        Duration::from_secs(10),
        || {
            let listening = tb
                .command_in(Role::Sink, None, "ss")
                .unwrap()
                .args(["-Hltn", &format!("sport = :{port}")])
                .output()
                .unwrap();
            !listening.stdout.is_empty()
        },
    );
    let mut args = vec![
        "-c".to_string(),
        tb.layout().veth3.addr.to_string(),
        "-p".into(),
        port.to_string(),
        "-t".into(),
        secs.to_string(),
        "-J".into(),
    ];
    if udp {
        args.extend(["-u".into(), "-b".into(), "50M".into()]);
    }
    let out = tb
        .command_in(Role::Gen, None, "iperf3")
        .unwrap()
        .args(&args)
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert!(
        out.status.success() && report["error"].is_null(),
        "iperf3 {}: {}",
        if udp { "UDP" } else { "TCP" },
        String::from_utf8_lossy(&out.stdout)
    );
    report
}

/// Ping (5 replies out of 5), an iperf3 TCP run of 2 s (over 1 MB) and a UDP one (under
/// 5 % lost) from gen to sink through polld; `port` and the next one are used.
pub fn ping_tcp_udp(tb: &Testbed, port: u16, what: &str) {
    warm_up(tb);
    assert_eq!(ping(tb, 5), 5, "{what}: ping");
    let tcp = iperf3(tb, port, 2, false);
    assert!(tcp_bytes(&tcp) > 1_000_000, "{what}: TCP {tcp}");
    let udp = iperf3(tb, port + 1, 2, true);
    let lost = udp["end"]["sum"]["lost_percent"].as_f64().unwrap();
    assert!(lost < 5.0, "{what}: UDP lost {lost} %");
}

pub fn tcp_bytes(report: &Value) -> u64 {
    report["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0)
}

/// A child killed (by its pid) on drop.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `polld gen` in gen on the gen CPU (on gen's veth0, or its TAP) at `rate` for `secs`.
fn gen_command(tb: &Testbed, rate: &str, secs: u32) -> Command {
    let mut command = tb
        .command_in(Role::Gen, Some(UpOptions::default().cpus.gen), POLLD)
        .unwrap();
    command
        .args([
            "gen",
            &tb.layout().veth0.name,
            "-i",
            "0",
            "--json",
            "--rate",
            rate,
        ])
        .args(["--duration", &secs.to_string()]);
    command
}

/// `polld gen` in gen on the gen CPU at `rate` for `secs`, in the background.
pub fn gen(tb: &Testbed, rate: &str, secs: u32) -> Running {
    let child = gen_command(tb, rate, secs)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Running(child)
}

/// `polld gen` as [`gen`], waited for, inside the testbed stream's end-to-end ledger:
/// returns the ledger under way and what gen sent, the frames still on the way drained.
/// Stop polld after it, and check with [`assert_ledger`].
pub fn gen_ledgered(tb: &Testbed, rate: &str, secs: u32) -> (StreamTrail, Sent) {
    let trail = StreamTrail::start(tb.layout())
        .unwrap()
        .expect("the forwarder runs on this host");
    let out = gen_command(tb, rate, secs).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "polld gen: {out:?}");
    let summary = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<Value>(l).ok())
        .unwrap_or_else(|| panic!("polld gen printed no summary: {stdout}"));
    let sent = Sent::of(&summary);
    trail.drain(sent).unwrap();
    (trail, sent)
}

/// Asserts that every frame gen sent is delivered or named on its hop, against polld's
/// final `interfaces`; returns the ledger.
pub fn assert_ledger(trail: &StreamTrail, sent: Sent, interfaces: &[Value]) -> Ledger {
    let ledger = trail
        .ledger(sent, &Value::Array(interfaces.to_vec()))
        .unwrap();
    assert!(ledger.balanced(), "end to end: {ledger}");
    ledger
}

/// A counter of one interface of `polld run --json`'s final report (0 when absent).
pub fn count(iface: &Value, name: &str) -> u64 {
    iface["counters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c[0] == name)
        .map_or(0, |c| c[1].as_u64().unwrap())
}

/// Asserts that every frame one interface of `polld run --json`'s final report received
/// is accounted for ([`polld_testbed::entries::unaccounted`]).
pub fn assert_conserved(iface: &Value) {
    assert_eq!(
        polld_testbed::entries::unaccounted(iface),
        Some(0),
        "conservation: {iface}"
    );
}

/// A config of polld on two TAPs it creates (or, with --check, would): tap0 in mode
/// `mode` (10.82.1.1/24) and tap1 in interrupt mode (10.82.2.1/24), `knobs` in order, the
/// control socket at `socket`.
pub fn two_taps(socket: &Path, mode: &str, knobs: &[(&str, i64)]) -> String {
    let file = knobs
        .iter()
        .fold(ConfigFile::new().socket(socket), |f, (name, value)| {
            f.knob(name, *value)
        });
    file.interface(
        Interface::new("tap0")
            .backend("tap")
            .mode(mode)
            .mac("02:00:00:00:01:01")
            .address("10.82.1.1/24"),
    )
    .interface(
        Interface::new("tap1")
            .backend("tap")
            .mac("02:00:00:00:02:01")
            .address("10.82.2.1/24"),
    )
    .to_toml()
}

/// Whether a TCP connection from `peer` to `at` on `host` carries a line both ways.
pub fn tcp_connects(host: &Netns, peer: &Netns, at: SocketAddr) -> bool {
    let listener = in_netns(host.name(), move || TcpListener::bind(at))
        .unwrap()
        .unwrap();
    // Left blocked in accept when no connection comes; it ends with the test.
    std::thread::spawn(move || -> std::io::Result<()> {
        let (mut conn, _) = listener.accept()?;
        let mut line = [0u8; 5];
        conn.read_exact(&mut line)?;
        conn.write_all(&line)
    });
    let echoed = in_netns(peer.name(), move || -> std::io::Result<[u8; 5]> {
        let mut conn = TcpStream::connect_timeout(&at, Duration::from_secs(3))?;
        conn.set_read_timeout(Some(Duration::from_secs(3)))?;
        conn.write_all(b"hello")?;
        let mut line = [0u8; 5];
        conn.read_exact(&mut line)?;
        Ok(line)
    })
    .unwrap();
    echoed.is_ok_and(|line| &line == b"hello")
}

/// Three namespaces of the calling test's own in a line, gen — fwd — sink, joined by veth
/// pairs gen `a0` (10.0.1.2/24) — fwd `r0` (10.0.1.1/24) and fwd `r1` (10.0.2.1/24) — sink
/// `b0` (10.0.2.2/24), all up; deleted on drop.
pub struct Line {
    pub gen: Netns,
    pub fwd: Netns,
    pub sink: Netns,
}

impl Line {
    /// The namespaces' names start with `tag`; `sysctls` are written in each before the
    /// links exist; `macs` are those of `a0`, `r0`, `r1` and `b0`.
    pub fn create(tag: &str, sysctls: &[&str], macs: [&str; 4]) -> Line {
        let ns = |role: &str| Netns::create(&format!("{tag}{role}")).unwrap();
        let line = Line {
            gen: ns("g"),
            fwd: ns("f"),
            sink: ns("s"),
        };
        for ns in [&line.gen, &line.fwd, &line.sink] {
            for sysctl in sysctls {
                ns.sysctl(sysctl).unwrap();
            }
        }
        let end = |ns, name, mac, addr| VethEnd {
            ns,
            name,
            mac,
            addr: Some(addr),
        };
        veth_pair(
            end(&line.gen, "a0", macs[0], "10.0.1.2/24"),
            end(&line.fwd, "r0", macs[1], "10.0.1.1/24"),
        )
        .unwrap();
        veth_pair(
            end(&line.fwd, "r1", macs[2], "10.0.2.1/24"),
            end(&line.sink, "b0", macs[3], "10.0.2.2/24"),
        )
        .unwrap();
        line
    }
}
