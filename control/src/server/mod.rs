//! The control socket server of `polld run`.
//!
//! [`ControlServer::start`] binds the Unix stream socket and runs a thread that does all
//! the socket work: it accepts clients, checks their credentials, reads one request line
//! each and writes the answer back. The daemon's poll thread never touches a client: it
//! gets an [`Inbox`] whose eventfd ([`Inbox::wake_fd`]) it adds to its epoll set, and
//! [`Inbox::answer_pending`] answers the waiting requests without blocking. Other threads
//! of the daemon (the metrics server) ask through the same inbox with a [`Requester`].
//!
//! The server thread is one `poll(2)` loop over non-blocking sockets with a deadline per
//! connection, so a client that is slow, silent or malicious costs one of
//! [`MAX_CONNECTIONS`] slots for at most a few seconds and never delays the others.

use std::fmt;
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};
use rustix::io::Errno;
use rustix::net::{send, SendFlags, UCred};
use rustix::process::Uid;

use crate::proto::{parse_request, Request, Response, MAX_REQUEST_BYTES};
use inbox::{Envelope, ReplyTo};
use wait::{accept_events, next_connection, wait, AcceptPause};

pub mod answer;
mod inbox;
pub(crate) mod wait;

pub use inbox::{channel, EventFd, Inbox, Requester};

/// What a client whose uid is neither 0 nor the daemon's is told (and what the client
/// says when the socket's mode already refused it).
pub const PERMISSION_DENIED: &str =
    "permission denied: polld's control socket needs root (uid 0); run polld ctl with sudo";

/// How long a client has, from connecting, to send its request line.
pub const READ_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the daemon has to answer a request handed to the [`Inbox`].
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(3);
/// How long a client has to take its answer.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(2);
/// Clients served at once; more wait in the listen backlog.
pub const MAX_CONNECTIONS: usize = 16;

/// Why the control socket could not be set up.
#[derive(Debug)]
pub enum ControlError {
    /// Another polld answers on this path.
    InUse { path: PathBuf, pid: Option<i32> },
    /// Something that is not a socket is in the way.
    NotASocket { path: PathBuf },
    /// A system call failed; `action` says what was being done.
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

impl fmt::Display for ControlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ControlError::InUse { path, pid } => {
                write!(f, "another polld is serving {}", path.display())?;
                if let Some(pid) = pid {
                    write!(f, " (pid {pid})")?;
                }
                write!(f, ": stop it first, or give this one another --socket path")
            }
            ControlError::NotASocket { path } => write!(
                f,
                "{} exists and is not a socket: remove it or choose another --socket path",
                path.display()
            ),
            ControlError::Io {
                action,
                path,
                source,
            } => write!(f, "cannot {action} {}: {source}", path.display()),
        }
    }
}

impl std::error::Error for ControlError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ControlError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The credentials of the process at the other end of a Unix socket.
pub(crate) fn peer_cred(stream: &UnixStream) -> io::Result<UCred> {
    Ok(rustix::net::sockopt::socket_peercred(stream)?)
}

/// The running control socket; dropping it stops the server thread and removes the
/// socket file.
pub struct ControlServer {
    path: PathBuf,
    requester: Requester,
    /// Device and inode of the socket we bound, so that drop never removes a successor's.
    identity: (u64, u64),
    stop: Arc<EventFd>,
    thread: Option<JoinHandle<()>>,
}

impl ControlServer {
    /// Binds the control socket at `path` (mode 0600; missing parent directories are
    /// created with mode 0700) and starts the server thread. A socket file left by a
    /// dead polld is replaced; a live one is refused.
    pub fn start(path: &Path) -> Result<(ControlServer, Inbox), ControlError> {
        let io_err = |action, source| ControlError::Io {
            action,
            path: path.to_path_buf(),
            source,
        };
        prepare_path(path)?;
        let listener =
            UnixListener::bind(path).map_err(|e| io_err("bind the control socket", e))?;
        // Between bind and chmod the socket has the umask's mode; a client that connects
        // in that window is still refused by the credential check on every connection.
        let setup = || -> Result<_, ControlError> {
            fs::set_permissions(path, fs::Permissions::from_mode(0o600))
                .map_err(|e| io_err("set mode 0600 on", e))?;
            let meta = fs::symlink_metadata(path).map_err(|e| io_err("inspect", e))?;
            listener
                .set_nonblocking(true)
                .map_err(|e| io_err("make non-blocking", e))?;
            let eventfd = || {
                EventFd::new()
                    .map(Arc::new)
                    .map_err(|e| io_err("create an eventfd for", e))
            };
            Ok((meta, eventfd()?, eventfd()?, eventfd()?))
        };
        let (meta, stop, requests_wake, replies_wake) = match setup() {
            Ok(parts) => parts,
            Err(e) => {
                let _ = fs::remove_file(path);
                return Err(e);
            }
        };
        let (requests_tx, requests_rx) = mpsc::channel();
        let (replies_tx, replies_rx) = mpsc::channel();
        let requester = Requester {
            requests: requests_tx.clone(),
            requests_wake: requests_wake.clone(),
        };
        let server = Server {
            listener,
            stop: stop.clone(),
            requests: requests_tx,
            requests_wake: requests_wake.clone(),
            replies: replies_rx,
            replies_wake: replies_wake.clone(),
            euid: rustix::process::geteuid(),
            conns: Vec::new(),
            next_id: 0,
            accept_pause: AcceptPause::default(),
        };
        let thread = std::thread::Builder::new()
            .name("polld-control".into())
            .spawn(move || server.run());
        let thread = match thread {
            Ok(t) => t,
            Err(e) => {
                let _ = fs::remove_file(path);
                return Err(io_err("start the server thread for", e));
            }
        };
        let control = ControlServer {
            path: path.to_path_buf(),
            requester,
            identity: (meta.dev(), meta.ino()),
            stop,
            thread: Some(thread),
        };
        let inbox = Inbox {
            requests: requests_rx,
            requests_wake,
            replies: replies_tx,
            replies_wake,
        };
        Ok((control, inbox))
    }

    /// The server thread, for a caller that sets its scheduling (`None` once stopped).
    pub fn thread(&self) -> Option<libc::pthread_t> {
        use std::os::unix::thread::JoinHandleExt;
        self.thread.as_ref().map(|t| t.as_pthread_t())
    }

    /// Where the socket is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A way for other threads of the daemon to ask the poll thread.
    pub fn requester(&self) -> Requester {
        self.requester.clone()
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.stop.signal();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        if let Ok(meta) = fs::symlink_metadata(&self.path) {
            if (meta.dev(), meta.ino()) == self.identity {
                let _ = fs::remove_file(&self.path);
            }
        }
    }
}

/// Creates the parent directory if missing; clears a stale socket; refuses a live one.
fn prepare_path(path: &Path) -> Result<(), ControlError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        if !parent.exists() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
                .map_err(|source| ControlError::Io {
                    action: "create the directory of",
                    path: path.to_path_buf(),
                    source,
                })?;
        }
    }
    if check_socket_path(path)? == SocketPath::Stale {
        fs::remove_file(path).map_err(|source| ControlError::Io {
            action: "remove the stale socket",
            path: path.to_path_buf(),
            source,
        })?;
    }
    Ok(())
}

/// What is at a control socket path that a new server may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SocketPath {
    Free,
    /// A socket left by a dead polld: the server replaces it.
    Stale,
}

/// Whether a server could take the control socket `path`, changing nothing: a live
/// polld there, or a file that is not a socket, is an error.
pub fn check_socket_path(path: &Path) -> Result<SocketPath, ControlError> {
    let io_err = |action, source| ControlError::Io {
        action,
        path: path.to_path_buf(),
        source,
    };
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(SocketPath::Free),
        Err(e) => return Err(io_err("inspect", e)),
    };
    if !meta.file_type().is_socket() {
        return Err(ControlError::NotASocket {
            path: path.to_path_buf(),
        });
    }
    match UnixStream::connect(path) {
        Ok(stream) => Err(ControlError::InUse {
            path: path.to_path_buf(),
            pid: peer_cred(&stream).ok().map(|c| c.pid.as_raw_pid()),
        }),
        Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => Ok(SocketPath::Stale),
        Err(e) => Err(io_err("probe the existing socket", e)),
    }
}

/// Where a connection is in its one exchange.
enum Phase {
    /// Collecting the request line.
    Reading(Vec<u8>),
    /// The request is with the poll thread.
    Waiting,
    /// Sending the answer line.
    Writing { out: Vec<u8>, sent: usize },
    /// Answer sent and write side shut down: discarding what the client still sends
    /// until it closes. Closing with unread input would make the client's read fail
    /// with ECONNRESET, possibly before it read the answer.
    Draining,
    /// Finished; closed at the end of the loop iteration.
    Done,
}

struct Conn {
    id: u64,
    stream: UnixStream,
    phase: Phase,
    /// When the current phase gives up.
    deadline: Instant,
}

impl Conn {
    fn reply(&mut self, response: &Response) {
        let mut out = serde_json::to_vec(response).unwrap_or_else(|e| {
            format!(r#"{{"result":"error","message":"cannot encode the answer: {e}"}}"#)
                .into_bytes()
        });
        out.push(b'\n');
        self.phase = Phase::Writing { out, sent: 0 };
        self.deadline = Instant::now() + WRITE_TIMEOUT;
    }

    fn refuse(&mut self, message: String) {
        self.reply(&Response::Error { message });
    }

    /// Reads what the client sent so far; returns the request once its line is complete.
    /// Refusals (too large, malformed) switch the connection to writing the error.
    fn read_request(&mut self) -> Option<Request> {
        let Phase::Reading(buf) = &mut self.phase else {
            return None;
        };
        let mut chunk = [0u8; 4096];
        let line_end = loop {
            match self.stream.read(&mut chunk) {
                Ok(0) if buf.is_empty() => {
                    self.phase = Phase::Done;
                    return None;
                }
                // The client shut down its side without a newline: take what it sent.
                Ok(0) => break buf.len(),
                Ok(n) => {
                    let start = buf.len();
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(pos) = buf[start..].iter().position(|&b| b == b'\n') {
                        break start + pos;
                    }
                    if buf.len() >= MAX_REQUEST_BYTES {
                        break buf.len();
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return None,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.phase = Phase::Done;
                    return None;
                }
            }
        };
        match parse_request(&buf[..line_end]) {
            Ok(request) => Some(request),
            Err(message) => {
                self.refuse(message);
                None
            }
        }
    }

    /// Sends as much of the answer as the socket takes; once all of it went out, shuts
    /// down the write side so the client sees the end, and drains.
    fn write_answer(&mut self) {
        let Phase::Writing { out, sent } = &mut self.phase else {
            return;
        };
        while *sent < out.len() {
            let rest = &out[*sent..];
            // MSG_NOSIGNAL: a client that hung up must not kill the daemon with SIGPIPE.
            match send(
                &self.stream,
                rest,
                SendFlags::NOSIGNAL | SendFlags::DONTWAIT,
            ) {
                Ok(n) => *sent += n,
                Err(Errno::WOULDBLOCK) => return,
                Err(Errno::INTR) => continue,
                Err(_) => {
                    self.phase = Phase::Done;
                    return;
                }
            }
        }
        self.phase = match self.stream.shutdown(std::net::Shutdown::Write) {
            Ok(()) => Phase::Draining,
            Err(_) => Phase::Done,
        };
        self.deadline = Instant::now() + WRITE_TIMEOUT;
    }

    /// Reads and drops input until the client closes its side.
    fn drain(&mut self) {
        let mut chunk = [0u8; 4096];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        self.phase = Phase::Done;
    }
}

/// The server thread's state.
struct Server {
    listener: UnixListener,
    stop: Arc<EventFd>,
    requests: Sender<Envelope>,
    requests_wake: Arc<EventFd>,
    replies: Receiver<(u64, Response)>,
    replies_wake: Arc<EventFd>,
    euid: Uid,
    conns: Vec<Conn>,
    next_id: u64,
    accept_pause: AcceptPause,
}

impl Server {
    fn run(mut self) {
        loop {
            let accepting = self.conns.len() < MAX_CONNECTIONS && !self.accept_pause.active();
            let mut fds = vec![
                PollFd::new(&*self.stop, PollFlags::IN),
                PollFd::new(&*self.replies_wake, PollFlags::IN),
                PollFd::new(&self.listener, accept_events(accepting)),
            ];
            // Which connection each further pollfd belongs to.
            let mut watched = Vec::new();
            for (i, conn) in self.conns.iter().enumerate() {
                let events = match conn.phase {
                    Phase::Reading(_) | Phase::Draining => PollFlags::IN,
                    Phase::Writing { .. } => PollFlags::OUT,
                    Phase::Waiting | Phase::Done => continue,
                };
                fds.push(PollFd::new(&conn.stream, events));
                watched.push(i);
            }
            let deadlines = self
                .conns
                .iter()
                .filter(|c| !matches!(c.phase, Phase::Done))
                .map(|c| c.deadline);
            let Some(ready) = wait(&mut fds, deadlines.chain(self.accept_pause.deadline())) else {
                continue;
            };
            if ready[0] {
                return;
            }
            if ready[1] {
                self.take_replies();
            }
            for (&ready, &i) in ready[3..].iter().zip(&watched) {
                if ready {
                    self.progress(i);
                }
            }
            if ready[2] {
                self.accept();
            }
            self.expire(Instant::now());
            self.conns.retain(|c| !matches!(c.phase, Phase::Done));
        }
    }

    fn accept(&mut self) {
        while self.conns.len() < MAX_CONNECTIONS {
            let listener = &self.listener;
            let Some(stream) = next_connection(
                || listener.accept().map(|(stream, _)| stream),
                |stream| stream.set_nonblocking(true),
                &mut self.accept_pause,
            ) else {
                return;
            };
            let mut conn = Conn {
                id: self.next_id,
                stream,
                phase: Phase::Reading(Vec::new()),
                deadline: Instant::now() + READ_TIMEOUT,
            };
            self.next_id += 1;
            match peer_cred(&conn.stream) {
                Ok(cred) if cred.uid.is_root() || cred.uid == self.euid => {}
                Ok(_) => conn.refuse(PERMISSION_DENIED.to_string()),
                Err(e) => conn.refuse(format!("cannot read the client's credentials: {e}")),
            }
            self.conns.push(conn);
        }
    }

    fn progress(&mut self, i: usize) {
        let conn = &mut self.conns[i];
        match conn.phase {
            Phase::Reading(_) => {
                if let Some(request) = conn.read_request() {
                    let envelope = Envelope {
                        reply_to: ReplyTo::Connection(conn.id),
                        request,
                    };
                    if self.requests.send(envelope).is_ok() {
                        conn.phase = Phase::Waiting;
                        conn.deadline = Instant::now() + ANSWER_TIMEOUT;
                        self.requests_wake.signal();
                    } else {
                        conn.refuse("polld is shutting down".to_string());
                    }
                }
            }
            Phase::Writing { .. } => conn.write_answer(),
            Phase::Draining => conn.drain(),
            Phase::Waiting | Phase::Done => {}
        }
    }

    fn take_replies(&mut self) {
        self.replies_wake.clear();
        while let Ok((id, response)) = self.replies.try_recv() {
            // A connection that timed out meanwhile was already told so.
            let waiting = self
                .conns
                .iter_mut()
                .find(|c| c.id == id && matches!(c.phase, Phase::Waiting));
            if let Some(conn) = waiting {
                conn.reply(&response);
            }
        }
    }

    fn expire(&mut self, now: Instant) {
        for conn in self.conns.iter_mut().filter(|c| c.deadline <= now) {
            match conn.phase {
                Phase::Reading(_) => conn.refuse(format!(
                    "no request line within {} s",
                    READ_TIMEOUT.as_secs()
                )),
                Phase::Waiting => conn.refuse(format!(
                    "polld did not answer in time ({} s): its poll thread may be stuck",
                    ANSWER_TIMEOUT.as_secs()
                )),
                Phase::Writing { .. } | Phase::Draining | Phase::Done => conn.phase = Phase::Done,
            }
        }
    }
}
