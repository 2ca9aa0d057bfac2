//! The guest agent: how the host runs commands in the guest.
//!
//! qemu joins a virtio-serial port named [`PORT_NAME`] in the guest to a unix socket on
//! the host (`agent.sock` in the guest's state directory). In the guest, init runs
//! `polld-lab testbed guest-agent` ([`serve`]), which reads one JSON [`Request`] a line,
//! runs its command with stdout and stderr in files under /tmp (so a command that leaves
//! a process in the background returns at once), and writes one JSON [`Response`] a
//! line. On the host, [`Client::exec`] sends a request and waits for the response with
//! the same id; a lock file keeps one client at a time.
//!
//! The agent serves one command at a time. While no host is connected a read on the
//! port returns end-of-file at once, so the agent then sleeps 100 ms between tries.

use std::fs::File;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::TestbedError;

/// The name of the virtio-serial port (`/sys/class/virtio-ports/*/name`).
pub const PORT_NAME: &str = "polld.agent";

/// A command for the guest.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Request {
    pub id: u64,
    pub argv: Vec<String>,
    /// Written to the command's standard input (empty: /dev/null).
    #[serde(default)]
    pub stdin: String,
    /// Killed (SIGKILL) after this many milliseconds.
    pub timeout_ms: u64,
}

/// What the command did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    pub id: u64,
    /// The exit status; none when killed by a signal or not started.
    pub status: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
    /// Why the command could not be started.
    pub error: Option<String>,
}

impl Response {
    /// The exit status a shell would report: the status, 128 + signal, or 127/126.
    pub fn exit_code(&self) -> i32 {
        match (self.status, self.signal, &self.error) {
            (Some(status), _, _) => status,
            (None, Some(signal), _) => 128 + signal,
            (None, None, Some(_)) => 127,
            (None, None, None) => 126,
        }
    }
}

/// The guest side: finds the port, then serves requests for ever.
pub fn serve() -> Result<(), TestbedError> {
    let device = find_port()?;
    let mut next_scratch = 0u64;
    loop {
        let port = File::options()
            .read(true)
            .write(true)
            .open(&device)
            .map_err(|e| TestbedError::Failed(format!("opening {}: {e}", device.display())))?;
        let mut writer = port
            .try_clone()
            .map_err(|e| TestbedError::Failed(format!("{}: {e}", device.display())))?;
        let mut reader = BufReader::new(port);
        let mut line = String::new();
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                // No host connected (or it left mid-line): wait for the next.
                Ok(0) => {
                    std::thread::sleep(Duration::from_millis(100));
                    line.clear();
                    continue;
                }
                Ok(_) if !line.ends_with('\n') => continue,
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
            let response = match serde_json::from_str::<Request>(&line) {
                Ok(request) => {
                    next_scratch += 1;
                    run(&request, next_scratch)
                }
                Err(e) => Response {
                    error: Some(format!("bad request {line:?}: {e}")),
                    ..Response::default()
                },
            };
            let mut text = serde_json::to_string(&response).unwrap_or_default();
            text.push('\n');
            // A host that left gets no answer; the next one asks again.
            let _ = writer.write_all(text.as_bytes());
        }
    }
}

/// `/dev/vportNpM` of the port named [`PORT_NAME`].
fn find_port() -> Result<PathBuf, TestbedError> {
    let dir = std::fs::read_dir("/sys/class/virtio-ports").map_err(|e| {
        TestbedError::Failed(format!(
            "no virtio-serial ports (/sys/class/virtio-ports: {e}): is virtio_console loaded?"
        ))
    })?;
    for entry in dir.flatten() {
        let name = std::fs::read_to_string(entry.path().join("name")).unwrap_or_default();
        if name.trim() == PORT_NAME {
            return Ok(Path::new("/dev").join(entry.file_name()));
        }
    }
    Err(TestbedError::Failed(format!(
        "no virtio-serial port named {PORT_NAME}"
    )))
}

/// Runs one request; never fails (a failure is in the response).
fn run(request: &Request, scratch: u64) -> Response {
    let mut response = Response {
        id: request.id,
        ..Response::default()
    };
    let Some((program, args)) = request.argv.split_first() else {
        response.error = Some("empty command".into());
        return response;
    };
    let out_path = format!("/tmp/.agent-{scratch}.out");
    let err_path = format!("/tmp/.agent-{scratch}.err");
    let files = File::create(&out_path).and_then(|o| Ok((o, File::create(&err_path)?)));
    let (out, err) = match files {
        Ok(files) => files,
        Err(e) => {
            response.error = Some(format!("cannot create {out_path}: {e}"));
            return response;
        }
    };
    let stdin = if request.stdin.is_empty() {
        Stdio::null()
    } else {
        Stdio::piped()
    };
    let spawned = Command::new(program)
        .args(args)
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .current_dir("/")
        .stdin(stdin)
        .stdout(out)
        .stderr(err)
        .spawn();
    match spawned {
        Err(e) => response.error = Some(format!("cannot run `{program}`: {e}")),
        Ok(mut child) => {
            if let Some(mut input) = child.stdin.take() {
                let _ = input.write_all(request.stdin.as_bytes());
            }
            let deadline = Instant::now() + Duration::from_millis(request.timeout_ms);
            let status = match wait_until(&mut child, deadline) {
                Ok(Some(status)) => Some(status),
                Ok(None) => {
                    response.timed_out = true;
                    let _ = child.kill();
                    child.wait().ok()
                }
                Err(_) => None,
            };
            use std::os::unix::process::ExitStatusExt;
            response.status = status.and_then(|s| s.code());
            response.signal = status.and_then(|s| s.signal());
        }
    }
    response.stdout = read_lossy(&out_path);
    response.stderr = read_lossy(&err_path);
    let _ = std::fs::remove_file(&out_path);
    let _ = std::fs::remove_file(&err_path);
    response
}

/// Waits for `child` to exit until `deadline` (`None`: still running then), asleep on its
/// pidfd: the agent takes no CPU from what a command measures in the guest.
fn wait_until(child: &mut Child, deadline: Instant) -> std::io::Result<Option<ExitStatus>> {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    use rustix::process::{pidfd_open, Pid, PidfdFlags};
    let pidfd = pidfd_open(Pid::from_child(child), PidfdFlags::empty())?;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        let timeout = Timespec {
            tv_sec: left.as_secs() as i64,
            tv_nsec: i64::from(left.subsec_nanos()),
        };
        match poll(&mut [PollFd::new(&pidfd, PollFlags::IN)], Some(&timeout)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

fn read_lossy(path: &str) -> String {
    let mut bytes = Vec::new();
    let _ = File::open(path).and_then(|mut f| f.read_to_end(&mut bytes));
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The host side: one connection to the agent's socket, held under its lock.
pub struct Client {
    stream: BufReader<UnixStream>,
    _lock: File,
    next_id: u64,
}

impl Client {
    /// Connects to the agent's socket `socket`, waiting for `lock` (other clients).
    pub fn connect(socket: &Path, lock: &Path) -> Result<Client, TestbedError> {
        let lock_file = File::create(lock)
            .map_err(|e| TestbedError::Failed(format!("cannot open {}: {e}", lock.display())))?;
        if let Err(e) = rustix::fs::flock(&lock_file, rustix::fs::FlockOperation::LockExclusive) {
            return Err(TestbedError::Failed(format!(
                "cannot lock {}: {}",
                lock.display(),
                std::io::Error::from(e)
            )));
        }
        let stream = UnixStream::connect(socket).map_err(|e| {
            TestbedError::Failed(format!(
                "cannot reach the guest's agent at {}: {e}; is the guest up (`polld testbed status`)?",
                socket.display()
            ))
        })?;
        // Unique ids per connection, so an answer to an earlier client is never taken
        // for ours.
        let next_id = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        Ok(Client {
            stream: BufReader::new(stream),
            _lock: lock_file,
            next_id,
        })
    }

    /// Runs `argv` in the guest with `stdin`; the guest kills the command at `timeout`,
    /// and the client gives up 30 s later.
    pub fn exec(
        &mut self,
        argv: &[String],
        stdin: &str,
        timeout: Duration,
    ) -> Result<Response, TestbedError> {
        self.request(argv, stdin, timeout, timeout + Duration::from_secs(30))
    }

    /// [`Client::exec`], giving up after `answer_within`.
    pub fn request(
        &mut self,
        argv: &[String],
        stdin: &str,
        timeout: Duration,
        answer_within: Duration,
    ) -> Result<Response, TestbedError> {
        self.next_id += 1;
        let request = Request {
            id: self.next_id,
            argv: argv.to_vec(),
            stdin: stdin.to_string(),
            timeout_ms: timeout.as_millis() as u64,
        };
        let mut line = serde_json::to_string(&request)
            .map_err(|e| TestbedError::Failed(format!("encoding the request: {e}")))?;
        line.push('\n');
        let io =
            |e: std::io::Error| TestbedError::Failed(format!("talking to the guest agent: {e}"));
        self.stream
            .get_mut()
            .write_all(line.as_bytes())
            .map_err(io)?;
        let give_up = Instant::now() + answer_within;
        loop {
            let left = give_up.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(TestbedError::Failed(format!(
                    "the guest agent did not answer `{}` within {} s",
                    argv.join(" "),
                    answer_within.as_secs()
                )));
            }
            self.stream
                .get_mut()
                .set_read_timeout(Some(left))
                .map_err(io)?;
            let mut answer = String::new();
            match self.stream.read_line(&mut answer) {
                Ok(0) => {
                    return Err(TestbedError::Failed(
                        "the guest agent's socket closed: has the guest stopped?".into(),
                    ))
                }
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    continue
                }
                Err(e) => return Err(io(e)),
            }
            if let Ok(response) = serde_json::from_str::<Response>(&answer) {
                if response.id == request.id {
                    return Ok(response);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_runs_with_its_input_output_and_status() {
        let request = Request {
            id: 7,
            argv: ["sh", "-c", "read x; echo out $x; echo err >&2; exit 3"]
                .map(String::from)
                .to_vec(),
            stdin: "hi\n".into(),
            timeout_ms: 10_000,
        };
        let response = run(&request, u64::from(std::process::id()) << 20);
        assert_eq!(response.id, 7);
        assert_eq!(response.stdout, "out hi\n");
        assert_eq!(response.stderr, "err\n");
        assert_eq!((response.status, response.exit_code()), (Some(3), 3));
    }

    #[test]
    fn a_command_past_its_timeout_is_killed_and_a_missing_one_named() {
        let slow = Request {
            id: 1,
            argv: ["sleep", "5"].map(String::from).to_vec(),
            stdin: String::new(),
            timeout_ms: 50,
        };
        let response = run(&slow, (u64::from(std::process::id()) << 20) + 1);
        assert!(response.timed_out);
        assert_eq!(response.exit_code(), 128 + libc::SIGKILL);
        let missing = Request {
            argv: vec!["polld-no-such-program".into()],
            ..slow
        };
        let response = run(&missing, (u64::from(std::process::id()) << 20) + 2);
        assert_eq!(response.exit_code(), 127);
        assert!(response.error.unwrap().contains("polld-no-such-program"));
    }
}
