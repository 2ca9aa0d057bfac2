//! The client side of the control socket: one request, one response, and errors that
//! tell the user what to do (start polld, use sudo, pass --socket); and the tools built on
//! that exchange, [`ctl`], [`ifconfig`] and [`netstat`] (with `polld arp`).

use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::proto::{Request, Response, MAX_REQUEST_BYTES};

pub mod ctl;
pub mod ifconfig;
pub mod netstat;
use crate::server::{ANSWER_TIMEOUT, PERMISSION_DENIED, READ_TIMEOUT};

/// Where `polld run` serves its control socket unless told otherwise.
pub const DEFAULT_SOCKET: &str = "/run/polld/polld.sock";

/// Answers longer than this are taken as a broken daemon, not read to the end.
const MAX_RESPONSE_BYTES: u64 = 64 * 1024 * 1024;

/// How long to wait for the answer: longer than the server's own limits, so that its
/// "did not answer in time" reaches the user instead of a bare timeout.
const RESPONSE_TIMEOUT: Duration =
    Duration::from_secs(READ_TIMEOUT.as_secs() + ANSWER_TIMEOUT.as_secs() + 5);

/// The `--socket` option every client command takes.
#[derive(clap::Args, Clone, Debug, PartialEq, Eq)]
pub struct SocketArg {
    /// The control socket of the running polld.
    #[arg(long, value_name = "PATH", env = "POLLD_SOCKET", default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
}

/// Why a request got no answer.
#[derive(Debug)]
pub enum ClientError {
    /// Nothing listens at the socket path (missing, or a stale file of a dead polld).
    NotRunning {
        socket: PathBuf,
        stale: bool,
    },
    /// The socket (or its directory) is root's.
    PermissionDenied,
    /// The daemon took too long.
    Timeout {
        socket: PathBuf,
    },
    /// The request is larger than the protocol allows.
    TooLarge {
        bytes: usize,
    },
    /// The daemon's answer was not a response line.
    BadResponse {
        socket: PathBuf,
        detail: String,
    },
    Io {
        socket: PathBuf,
        source: io::Error,
    },
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::NotRunning { socket, stale } => {
                write!(f, "no polld is running at {}", socket.display())?;
                if *stale {
                    write!(f, " (only a stale socket file is left there)")?;
                }
                write!(f, ": start one with `polld run -c FILE` (or pass --socket)")
            }
            ClientError::PermissionDenied => f.write_str(PERMISSION_DENIED),
            ClientError::Timeout { socket } => write!(
                f,
                "polld at {} did not answer within {} s",
                socket.display(),
                RESPONSE_TIMEOUT.as_secs()
            ),
            ClientError::TooLarge { bytes } => write!(
                f,
                "request too large ({bytes} bytes, limit {MAX_REQUEST_BYTES} bytes): \
                 split it into several"
            ),
            ClientError::BadResponse { socket, detail } => write!(
                f,
                "polld at {} sent an answer this client cannot read ({detail}): \
                 is it the same version?",
                socket.display()
            ),
            ClientError::Io { socket, source } => {
                write!(f, "talking to polld at {}: {source}", socket.display())
            }
        }
    }
}

impl std::error::Error for ClientError {}

/// Sends `req` to the polld serving `socket` and returns its response (which may be a
/// [`Response::Error`]: the daemon refused the request as a whole).
pub fn request(socket: &Path, req: &Request) -> Result<Response, ClientError> {
    let mut line = serde_json::to_vec(req).map_err(|e| ClientError::BadResponse {
        socket: socket.to_path_buf(),
        detail: format!("cannot encode the request: {e}"),
    })?;
    line.push(b'\n');
    if line.len() > MAX_REQUEST_BYTES {
        return Err(ClientError::TooLarge { bytes: line.len() });
    }
    let io_err = |source: io::Error| match source.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => ClientError::Timeout {
            socket: socket.to_path_buf(),
        },
        _ => ClientError::Io {
            socket: socket.to_path_buf(),
            source,
        },
    };
    let mut stream = UnixStream::connect(socket).map_err(|e| connect_error(socket, e))?;
    stream
        .set_read_timeout(Some(RESPONSE_TIMEOUT))
        .map_err(io_err)?;
    stream
        .set_write_timeout(Some(RESPONSE_TIMEOUT))
        .map_err(io_err)?;
    // A server that refuses us (credentials) answers without reading: its answer is
    // still there to read after our write failed.
    let written = stream.write_all(&line);
    let mut answer = Vec::new();
    BufReader::new(stream.take(MAX_RESPONSE_BYTES))
        .read_until(b'\n', &mut answer)
        .map_err(io_err)?;
    if answer.is_empty() {
        written.map_err(io_err)?;
        return Err(ClientError::BadResponse {
            socket: socket.to_path_buf(),
            detail: "it closed the connection without answering".to_string(),
        });
    }
    serde_json::from_slice(&answer).map_err(|e| ClientError::BadResponse {
        socket: socket.to_path_buf(),
        detail: e.to_string(),
    })
}

fn connect_error(socket: &Path, e: io::Error) -> ClientError {
    match e.raw_os_error() {
        Some(libc::ENOENT) => ClientError::NotRunning {
            socket: socket.to_path_buf(),
            stale: false,
        },
        Some(libc::ECONNREFUSED) => ClientError::NotRunning {
            socket: socket.to_path_buf(),
            stale: true,
        },
        Some(libc::EACCES) | Some(libc::EPERM) => ClientError::PermissionDenied,
        _ => ClientError::Io {
            socket: socket.to_path_buf(),
            source: e,
        },
    }
}

/// Why `polld ctl` or `polld ifconfig` failed as a whole.
#[derive(Debug)]
pub enum CtlError {
    Client(ClientError),
    /// The daemon refused the request.
    Daemon(String),
    /// The daemon answered a different kind of response than asked for.
    Unexpected(String),
    /// The command line asks for something that does not exist.
    Usage(String),
    /// Writing the output failed (a closed pipe).
    Output(io::Error),
}

impl fmt::Display for CtlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CtlError::Client(e) => e.fmt(f),
            CtlError::Daemon(message) => write!(f, "polld refused the request: {message}"),
            CtlError::Unexpected(what) => write!(
                f,
                "polld answered {what}: is it the same version as this client?"
            ),
            CtlError::Usage(message) => f.write_str(message),
            CtlError::Output(e) => write!(f, "cannot write the output: {e}"),
        }
    }
}

impl std::error::Error for CtlError {}

impl From<ClientError> for CtlError {
    fn from(e: ClientError) -> CtlError {
        CtlError::Client(e)
    }
}

impl From<io::Error> for CtlError {
    fn from(e: io::Error) -> CtlError {
        CtlError::Output(e)
    }
}

/// Sends `req` and turns a refusal of the whole request into an error.
pub(crate) fn exchange(socket: &Path, req: &Request) -> Result<Response, CtlError> {
    match request(socket, req)? {
        Response::Error { message } => Err(CtlError::Daemon(message)),
        response => Ok(response),
    }
}

/// Prints `value` as one pretty JSON document and a newline (`--json`).
pub(crate) fn print_json<T: serde::Serialize + ?Sized>(
    value: &T,
    out: &mut dyn Write,
) -> Result<(), CtlError> {
    serde_json::to_writer_pretty(&mut *out, value).map_err(|e| CtlError::Output(e.into()))?;
    writeln!(out)?;
    Ok(())
}

/// Names the kind of an unexpected response for [`CtlError::Unexpected`].
pub(crate) fn unexpected(response: &Response) -> CtlError {
    let kind = match response {
        Response::Entries { .. } => "a list of entries",
        Response::Set { .. } => "set results",
        Response::Interfaces { .. } => "a list of interfaces",
        Response::Snapshot { .. } => "a typed snapshot",
        Response::Table { .. } => "a page of a table",
        Response::Error { .. } => "an error",
    };
    CtlError::Unexpected(kind.to_string())
}
