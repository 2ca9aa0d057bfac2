//! Shared fixtures: a scratch directory and a test daemon, a real [`ControlServer`] whose
//! requests an answerer thread serves from a real `Dataplane` over simulated NICs.

#![allow(dead_code)] // each test file uses its own subset

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use clap::Parser;
use polld_control::answer;
use polld_control::ctl::{run_ctl, CtlArgs};
use polld_control::ifconfig::{run_ifconfig, IfconfigArgs};
use polld_control::proto::{Request, Response};
use polld_control::server::{ControlServer, Inbox, Requester};
use polld_core::Poller;
use polld_sim::{Arrivals, CpuCosts, NicConfig, Sim, UserTask};
use rustix::event::{poll, PollFd, PollFlags, Timespec};

/// A fresh directory (mode 0755, so that a test child running as nobody can reach a
/// socket inside), removed on drop.
pub struct TestDir(PathBuf);

impl TestDir {
    pub fn new() -> TestDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("polld-control-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        TestDir(dir)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
    pub fn socket(&self) -> PathBuf {
        self.0.join("polld.sock")
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The simulated NICs: sim0 takes 1 Mpps, more than the virtual CPU handles in
/// interrupt mode and than sim1's line rate, and forwards them to sim1 (so that it
/// counts drops for two reasons); sim1 takes 10 kpps for the box, and in interrupt
/// mode gets starved by sim0's flood (the receive livelock).
pub const INTERFACES: [&str; 2] = ["sim0", "sim1"];

pub fn simulation() -> Sim {
    let nics = vec![
        NicConfig::new(INTERFACES[0], Arrivals::Constant { pps: 1_000_000.0 }),
        NicConfig::new(INTERFACES[1], Arrivals::Constant { pps: 10_000.0 }),
    ];
    let mut sim = Sim::new(
        Poller::default(),
        nics,
        vec![Some(1), None],
        CpuCosts::default(),
        UserTask::None,
        7,
    );
    // 5 ms of virtual time, so that the counters are not all zero.
    sim.run_until(5_000_000);
    sim
}

/// How the test daemon answers: the way `polld run` does, from the dataplane.
pub fn answer(sim: &mut Sim, request: Request) -> Response {
    let dp = sim.dataplane_mut();
    match request {
        Request::List { prefix } => answer::list(dp, None, &prefix),
        Request::Set { assignments } => answer::set(dp, &assignments),
        Request::Snapshot => answer::snapshot(dp, None),
        Request::Interfaces => Response::Interfaces {
            interfaces: (0..dp.interfaces().len())
                .map(|i| {
                    let mac = format!("02:00:00:00:00:0{i}");
                    let addresses = vec![format!("10.0.{i}.1/24"), format!("fd00:{i}::1/64")];
                    answer::interface_status(dp, i, "sim", Some(mac), addresses)
                })
                .collect(),
        },
        // The simulated dataplane's stage is not polld's router.
        Request::Table { .. } => Response::Error {
            message: "the test daemon holds no routes".to_string(),
        },
    }
}

/// Waits up to `timeout_ms` for a request to reach `inbox` (its eventfd to be readable).
pub fn wait_for_request(inbox: &Inbox, timeout_ms: i64) {
    let timeout = Timespec {
        tv_sec: timeout_ms / 1000,
        tv_nsec: timeout_ms % 1000 * 1_000_000,
    };
    let _ = poll(&mut [PollFd::new(inbox, PollFlags::IN)], Some(&timeout));
}

/// Waits on the inbox's eventfd like the runtime's epoll loop does, and answers.
fn answer_loop(inbox: Inbox, stop: Arc<AtomicBool>) {
    // Sim holds an Rc clock: it lives on this thread only, as the dataplane does on
    // the poll thread.
    let mut sim = simulation();
    while !stop.load(Ordering::Relaxed) {
        wait_for_request(&inbox, 20);
        inbox.answer_pending(&mut |request| answer(&mut sim, request));
    }
}

/// A control server with a daemon answering behind it.
pub struct Daemon {
    pub dir: TestDir,
    pub socket: PathBuf,
    server: Option<ControlServer>,
    stop: Arc<AtomicBool>,
    answerer: Option<JoinHandle<()>>,
}

impl Daemon {
    pub fn start() -> Daemon {
        let dir = TestDir::new();
        let socket = dir.socket();
        let (server, inbox) = ControlServer::start(&socket).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let answerer = std::thread::spawn(move || answer_loop(inbox, flag));
        Daemon {
            dir,
            socket,
            server: Some(server),
            stop,
            answerer: Some(answerer),
        }
    }

    /// Asks the answerer from inside the "daemon", as the metrics server does.
    pub fn requester(&self) -> Requester {
        self.server.as_ref().unwrap().requester()
    }

    /// `polld ctl ARGS --socket <ours>`: (exit status, stdout, stderr), or the error.
    pub fn ctl(&self, args: &[&str]) -> Result<(i32, String, String), String> {
        let argv = ["polld ctl", "--socket", self.socket.to_str().unwrap()];
        let parsed = CtlArgs::try_parse_from(argv.iter().chain(args)).map_err(|e| e.to_string())?;
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let status = run_ctl(&parsed, &mut out, &mut err).map_err(|e| e.to_string())?;
        Ok((
            status,
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        ))
    }

    /// `polld ctl ARGS` that must succeed: its stdout.
    pub fn ctl_ok(&self, args: &[&str]) -> String {
        let (status, out, err) = self.ctl(args).unwrap();
        assert_eq!(status, 0, "polld ctl {args:?} failed: {err}");
        assert_eq!(err, "");
        out
    }

    /// `polld ifconfig ARGS --socket <ours>`: stdout, or the error.
    pub fn ifconfig(&self, args: &[&str]) -> Result<String, String> {
        let argv = ["polld ifconfig", "--socket", self.socket.to_str().unwrap()];
        let parsed =
            IfconfigArgs::try_parse_from(argv.iter().chain(args)).map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        run_ifconfig(&parsed, &mut out).map_err(|e| e.to_string())?;
        Ok(String::from_utf8(out).unwrap())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        drop(self.server.take());
        self.stop.store(true, Ordering::Relaxed);
        if let Some(answerer) = self.answerer.take() {
            let _ = answerer.join();
        }
    }
}
