//! `GET /metrics`: a running polld's knobs and counters in the Prometheus text exposition
//! format (version 0.0.4), served by a small HTTP/1.x server on its own thread.
//!
//! The server never touches the dataplane: each scrape asks the poll thread through the
//! control [`Requester`] for a [`Request::Snapshot`], the entries `polld ctl -a` lists but
//! typed, and [`exposition_of`] renames them the Prometheus way; [`scrape`] adds what every
//! exporter serves about itself, the build ([`BUILD`]) and the process ([`ProcessStats`]),
//! which the metrics thread reads from `/proc` itself. Only `GET` and `HEAD` of
//! `/metrics` are served: another path is 404, another method 405, a malformed request
//! 400, and 503 when the poll thread does not answer.
//!
//! The server is one `poll(2)` loop over non-blocking connections, each answered once and
//! closed. A client that is slow, silent or malicious costs one of [`MAX_CLIENTS`] slots
//! and at most [`MAX_REQUEST_BYTES`] of buffer, for at most [`CLIENT_TIMEOUT`] per phase;
//! when every slot is taken, a new client closes the one that has waited longest without
//! sending its whole request. So idle connections, however many, never keep a scrape
//! waiting.

use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};

use polld_core::Reading;

use crate::proto::{Request, Response};
use crate::server::wait::{accept_events, next_connection, wait, AcceptPause};
use crate::server::{EventFd, Requester};

mod exporter;
mod exposition;
pub use exporter::{Build, ProcessStats, BUILD, VERSION};
pub use exposition::{exposition, exposition_of, CONTENT_TYPE};

/// What `GET /metrics` answers: the entries of a snapshot ([`exposition_of`]), then
/// [`BUILD`] and the process (`process` `None`, when `/proc` could not be read, declares
/// the process families without samples).
pub fn scrape(readings: &[Reading], process: Option<&ProcessStats>) -> String {
    let mut families = exposition::families_of(readings);
    exporter::add(&mut families, &BUILD, process);
    families.render()
}

/// How long a client has to send its request, and then to take the answer.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);
/// Requests (request line and headers) are refused above this size.
pub const MAX_REQUEST_BYTES: usize = 8 * 1024;
/// Clients served at once; a new one beyond this closes the longest-waiting one that has
/// not sent its whole request yet.
pub const MAX_CLIENTS: usize = 64;
/// What is read and dropped after the answer, at most, while the client closes.
const MAX_DISCARD_BYTES: usize = 1024 * 1024;

/// Why the metrics server could not start.
#[derive(Debug)]
pub struct MetricsError {
    pub addr: SocketAddr,
    pub source: io::Error,
}

impl std::fmt::Display for MetricsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cannot serve metrics on {}: {}; choose another [daemon] metrics address",
            self.addr, self.source
        )
    }
}

impl std::error::Error for MetricsError {}

/// The running metrics server; dropping it stops its thread.
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<EventFd>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Listens on `addr` and serves `/metrics` from what `requester` gets from the poll
    /// thread.
    pub fn start(addr: SocketAddr, requester: Requester) -> Result<MetricsServer, MetricsError> {
        let fail = |source| MetricsError { addr, source };
        let listener = TcpListener::bind(addr).map_err(fail)?;
        listener.set_nonblocking(true).map_err(fail)?;
        let addr = listener.local_addr().map_err(fail)?;
        let stop = Arc::new(EventFd::new().map_err(fail)?);
        let server = Server {
            listener,
            stop: stop.clone(),
            requester,
            clients: Vec::new(),
            accept_pause: AcceptPause::default(),
        };
        let thread = std::thread::Builder::new()
            .name("polld-metrics".into())
            .spawn(move || server.run())
            .map_err(fail)?;
        Ok(MetricsServer {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// The address it listens on (the port is the real one when 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.signal();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Where a client is in its one exchange.
enum Phase {
    /// Collecting the request line and headers (at most [`MAX_REQUEST_BYTES`]).
    Reading(Vec<u8>),
    /// Sending the answer.
    Writing { out: Vec<u8>, sent: usize },
    /// Answer sent and write side shut down: discarding what the client still sends until
    /// it closes. Closing with unread input would reset the connection, possibly before
    /// the client read the answer.
    Draining { discarded: usize },
    /// Finished; closed at the end of the loop iteration.
    Done,
}

struct Client {
    stream: TcpStream,
    phase: Phase,
    /// When the current phase gives up.
    deadline: Instant,
    accepted: Instant,
}

impl Client {
    /// Reads what the client sent so far; answers once the head is complete, too large,
    /// or cut short by the client.
    fn read_request(&mut self, requester: &Requester) {
        let Phase::Reading(head) = &mut self.phase else {
            return;
        };
        let mut chunk = [0u8; 1024];
        loop {
            let room = (MAX_REQUEST_BYTES + 1).saturating_sub(head.len());
            let n = match self.stream.read(&mut chunk[..room.min(1024)]) {
                Ok(0) if head.is_empty() => {
                    self.phase = Phase::Done;
                    return;
                }
                Ok(0) => {
                    let text = String::from_utf8_lossy(head).into_owned();
                    self.answer(&text, plain("400 Bad Request", "incomplete request\n"));
                    return;
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.phase = Phase::Done;
                    return;
                }
            };
            head.extend_from_slice(&chunk[..n]);
            let complete =
                head.windows(4).any(|w| w == b"\r\n\r\n") || head.windows(2).any(|w| w == b"\n\n");
            if complete {
                let text = String::from_utf8_lossy(head).into_owned();
                let answer = respond(&text, requester);
                self.answer(&text, answer);
                return;
            }
            if head.len() > MAX_REQUEST_BYTES {
                self.answer("", plain("431 Request Header Fields Too Large", ""));
                return;
            }
        }
    }

    /// Switches to writing `answer` (without its body when `request` is a HEAD).
    fn answer(&mut self, request: &str, (status, headers, body): Answer) {
        let mut out = format!(
            "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
            body.len()
        );
        for (name, value) in headers {
            let _ = write!(out, "{name}: {value}\r\n");
        }
        out.push_str("\r\n");
        if !request.starts_with("HEAD ") {
            out.push_str(&body);
        }
        self.phase = Phase::Writing {
            out: out.into_bytes(),
            sent: 0,
        };
        self.deadline = Instant::now() + CLIENT_TIMEOUT;
    }

    /// Sends as much of the answer as the socket takes; once all of it went out, shuts
    /// down the write side so the client sees the end, and drains.
    fn write_answer(&mut self) {
        let Phase::Writing { out, sent } = &mut self.phase else {
            return;
        };
        while *sent < out.len() {
            match self.stream.write(&out[*sent..]) {
                Ok(n) => *sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.phase = Phase::Done;
                    return;
                }
            }
        }
        self.phase = match self.stream.shutdown(std::net::Shutdown::Write) {
            Ok(()) => Phase::Draining { discarded: 0 },
            Err(_) => Phase::Done,
        };
        self.deadline = Instant::now() + CLIENT_TIMEOUT;
    }

    /// Reads and drops input until the client closes its side, or sent too much.
    fn drain(&mut self) {
        let Phase::Draining { discarded } = &mut self.phase else {
            return;
        };
        let mut chunk = [0u8; 4096];
        while *discarded < MAX_DISCARD_BYTES {
            match self.stream.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => *discarded += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        self.phase = Phase::Done;
    }

    /// What to wait for on its socket, if anything.
    fn events(&self) -> PollFlags {
        match self.phase {
            Phase::Reading(_) | Phase::Draining { .. } => PollFlags::IN,
            Phase::Writing { .. } => PollFlags::OUT,
            Phase::Done => PollFlags::empty(),
        }
    }
}

/// The metrics thread's state.
struct Server {
    listener: TcpListener,
    stop: Arc<EventFd>,
    requester: Requester,
    clients: Vec<Client>,
    accept_pause: AcceptPause,
}

impl Server {
    fn run(mut self) {
        loop {
            let accepting = !self.accept_pause.active();
            let mut fds = vec![
                PollFd::new(&*self.stop, PollFlags::IN),
                PollFd::new(&self.listener, accept_events(accepting)),
            ];
            fds.extend(
                self.clients
                    .iter()
                    .map(|c| PollFd::new(&c.stream, c.events())),
            );
            let deadlines = self.clients.iter().map(|c| c.deadline);
            let Some(ready) = wait(&mut fds, deadlines.chain(self.accept_pause.deadline())) else {
                continue;
            };
            if ready[0] {
                return;
            }
            for (&ready, client) in ready[2..].iter().zip(&mut self.clients) {
                if !ready {
                    continue;
                }
                match client.phase {
                    Phase::Reading(_) => client.read_request(&self.requester),
                    Phase::Writing { .. } => client.write_answer(),
                    Phase::Draining { .. } => client.drain(),
                    Phase::Done => {}
                }
            }
            self.expire(Instant::now());
            self.clients.retain(|c| !matches!(c.phase, Phase::Done));
            if ready[1] {
                self.accept();
            }
        }
    }

    /// Takes every waiting connection; beyond [`MAX_CLIENTS`], each new one closes the
    /// longest-waiting client still sending its request (or, if none is, the oldest).
    fn accept(&mut self) {
        let listener = &self.listener;
        while let Some(stream) = next_connection(
            || listener.accept().map(|(stream, _)| stream),
            |stream| stream.set_nonblocking(true),
            &mut self.accept_pause,
        ) {
            if self.clients.len() >= MAX_CLIENTS {
                let reading = |c: &&Client| matches!(c.phase, Phase::Reading(_));
                let oldest = |clients: &[Client], only_reading: bool| {
                    clients
                        .iter()
                        .enumerate()
                        .filter(|(_, c)| !only_reading || reading(c))
                        .min_by_key(|(_, c)| c.accepted)
                        .map(|(i, _)| i)
                };
                if let Some(i) =
                    oldest(&self.clients, true).or_else(|| oldest(&self.clients, false))
                {
                    self.clients.swap_remove(i);
                }
            }
            let now = Instant::now();
            self.clients.push(Client {
                stream,
                phase: Phase::Reading(Vec::new()),
                deadline: now + CLIENT_TIMEOUT,
                accepted: now,
            });
        }
    }

    /// A client past its deadline: told 408 while it still owed its request, else closed.
    fn expire(&mut self, now: Instant) {
        for client in self.clients.iter_mut().filter(|c| c.deadline <= now) {
            match client.phase {
                Phase::Reading(_) => client.answer(
                    "",
                    plain("408 Request Timeout", "no complete request in time\n"),
                ),
                Phase::Writing { .. } | Phase::Draining { .. } | Phase::Done => {
                    client.phase = Phase::Done
                }
            }
        }
    }
}

/// A status line, extra headers and a body.
type Answer = (&'static str, Vec<(&'static str, &'static str)>, String);

/// An answer with no extra header.
fn plain(status: &'static str, body: &str) -> Answer {
    (status, Vec::new(), body.to_string())
}

/// The answer to a complete request head.
fn respond(head: &str, requester: &Requester) -> Answer {
    let mut words = head.lines().next().unwrap_or("").split_whitespace();
    let (Some(method), Some(target), Some(version), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return plain("400 Bad Request", "malformed request line\n");
    };
    if !version.starts_with("HTTP/1.") {
        return plain("400 Bad Request", "only HTTP/1.x is served\n");
    }
    let path = target.split('?').next().unwrap_or(target);
    if path != "/metrics" {
        return plain("404 Not Found", "polld serves only /metrics\n");
    }
    if method != "GET" && method != "HEAD" {
        return (
            "405 Method Not Allowed",
            vec![("Allow", "GET, HEAD")],
            "use GET /metrics\n".into(),
        );
    }
    match requester.ask(Request::Snapshot) {
        Some(Response::Snapshot { readings }) => (
            "200 OK",
            vec![("Content-Type", CONTENT_TYPE)],
            scrape(&readings, ProcessStats::read().ok().as_ref()),
        ),
        _ => plain(
            "503 Service Unavailable",
            "polld's poll thread did not answer\n",
        ),
    }
}
