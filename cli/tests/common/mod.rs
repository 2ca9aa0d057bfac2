//! What the testbed tests share: the root check, a unique testbed, a scratch directory and
//! a running `polld run` in fwd.

// Each test binary uses its own part of this module.
#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use polld_testbed::{Layout, Role, Testbed, UpOptions};

pub const POLLD: &str = env!("CARGO_BIN_EXE_polld");

/// Skips the calling test, saying why, unless it runs as root (a failure under CI).
#[macro_export]
macro_rules! require_root {
    () => {
        polld_testsupport::require_root!("needs root to create network namespaces")
    };
}

/// A testbed whose namespaces are unique to this process and `tag`; torn down on drop,
/// also when the test fails.
pub fn testbed(tag: &str) -> Testbed {
    let prefix = format!("pt{}{tag}", std::process::id() % 10_000);
    Testbed::up(&Layout::new(&prefix), &UpOptions::default()).expect("testbed up")
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

/// A running `polld run --json -c CONFIG` in the testbed's fwd namespace; killed on drop
/// if still running.
pub struct Polld {
    child: Option<Child>,
    pub socket: PathBuf,
}

impl Polld {
    /// Starts polld and waits until its control socket exists.
    pub fn start(tb: &Testbed, config: &Path, socket: &Path) -> Polld {
        let child = Command::new(POLLD)
            .args(["run", "--json", "-c"])
            .arg(config)
            .args(["--netns", &tb.layout().fwd_ns])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start polld");
        let polld = Polld {
            child: Some(child),
            socket: socket.to_path_buf(),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !socket.exists() {
            assert!(Instant::now() < deadline, "polld did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        polld
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
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
    pub fn stop(mut self) -> String {
        let mut child = self.child.take().unwrap();
        // SAFETY: signals a child we started, by its pid.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
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
        stdout
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

/// A child killed (by its pid) on drop.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `polld gen` in gen on the gen CPU at `rate` for `secs`, in the background.
pub fn gen(tb: &Testbed, rate: &str, secs: u32) -> Running {
    let child = tb
        .command_in(Role::Gen, Some(UpOptions::default().cpus.gen), POLLD)
        .unwrap()
        .args(["gen", "veth0", "-i", "0", "--rate", rate])
        .args(["--duration", &secs.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Running(child)
}
