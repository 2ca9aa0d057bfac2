//! The control socket itself: permissions, refusals, robustness against bad clients,
//! and the life cycle of the socket file.

mod common;

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;

use common::{wait_for_request, Daemon, TestDir};
use polld_control::client::{request, ClientError};
use polld_control::proto::{IfStatus, Request, Response, MAX_REQUEST_BYTES};
use polld_control::server::{
    ControlError, ControlServer, Inbox, MAX_CONNECTIONS, PERMISSION_DENIED,
};
use rustix::process::{Gid, Uid};
use rustix::thread::{set_thread_gid, set_thread_groups, set_thread_uid};

/// Sends raw bytes as one client and returns everything the server wrote back.
fn raw_exchange(socket: &Path, bytes: &[u8]) -> String {
    let mut stream = UnixStream::connect(socket).unwrap();
    // The server may answer and close before reading it all: that is the point.
    let _ = stream.write_all(bytes);
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

fn error_message(answer: &str) -> String {
    assert!(answer.ends_with('\n'), "not one line: {answer:?}");
    match serde_json::from_str(answer).unwrap() {
        Response::Error { message } => message,
        other => panic!("expected an error, got {other:?}"),
    }
}

fn list(socket: &Path, prefix: &str) -> Response {
    request(
        socket,
        &Request::List {
            prefix: prefix.to_string(),
        },
    )
    .unwrap()
}

fn assert_serves(socket: &Path) {
    match list(socket, "kern.polling.hz") {
        Response::Entries { entries } => assert_eq!(entries[0].value, "1000"),
        other => panic!("expected entries, got {other:?}"),
    }
}

#[test]
fn the_socket_is_0600_in_a_0700_directory_it_creates_and_goes_away_on_drop() {
    let dir = TestDir::new();
    let socket = dir.path().join("run/polld/polld.sock");
    let (server, _inbox) = ControlServer::start(&socket).unwrap();
    let meta = std::fs::metadata(&socket).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(meta.uid(), rustix::process::geteuid().as_raw());
    for created in ["run", "run/polld"] {
        let mode = std::fs::metadata(dir.path().join(created))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700, "{created}");
    }
    drop(server);
    assert!(!socket.exists());
    let err = request(&socket, &Request::Interfaces).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "no polld is running at {}: start one with `polld run -c FILE` (or pass --socket)",
            socket.display()
        )
    );
}

/// Runs `request` on a thread that dropped to uid/gid 65534 (nobody) and returns what it
/// got: `client: <error>` or `daemon: <response>`. The raw set*id system calls change the
/// calling thread's credentials only, so the rest of the test process stays root.
fn request_as_nobody(socket: &Path) -> String {
    let socket = socket.to_path_buf();
    std::thread::spawn(move || {
        let nobody = (Uid::from_raw(65534), Gid::from_raw(65534));
        if set_thread_groups(&[]).is_err()
            || set_thread_gid(nobody.1).is_err()
            || set_thread_uid(nobody.0).is_err()
        {
            return "thread: cannot drop to uid 65534".to_string();
        }
        match request(&socket, &Request::Interfaces) {
            Ok(response) => format!("daemon: {response:?}"),
            Err(e) => format!("client: {e}"),
        }
    })
    .join()
    .unwrap()
}

#[test]
fn a_non_root_client_is_refused_with_the_clear_message() {
    polld_testsupport::require_root!("needs root to fork a child that drops to uid 65534");
    let daemon = Daemon::start();
    // The socket's mode stops nobody at connect; the client says why.
    assert_eq!(
        request_as_nobody(&daemon.socket),
        format!("client: {PERMISSION_DENIED}")
    );
    // With the mode opened up, the server's credential check refuses it.
    std::fs::set_permissions(&daemon.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let got = request_as_nobody(&daemon.socket);
    assert_eq!(
        got,
        format!(
            "daemon: {:?}",
            Response::Error {
                message: PERMISSION_DENIED.to_string()
            }
        )
    );
    assert_serves(&daemon.socket);
}

#[test]
fn an_oversize_request_is_refused_and_the_next_client_is_served() {
    let daemon = Daemon::start();
    // A valid request padded with blanks to exactly the limit, newline included, passes.
    let request = br#"{"op":"list","prefix":"kern.polling.hz"}"#;
    let mut at_limit = request.to_vec();
    at_limit.resize(MAX_REQUEST_BYTES - 1, b' ');
    at_limit.push(b'\n');
    let answer = raw_exchange(&daemon.socket, &at_limit);
    assert!(answer.starts_with(r#"{"result":"entries""#), "{answer}");
    // One byte more does not, with or without a newline.
    at_limit.insert(0, b' ');
    let refused = "request too large (limit 65536 bytes)";
    assert_eq!(
        error_message(&raw_exchange(&daemon.socket, &at_limit)),
        refused
    );
    assert_eq!(
        error_message(&raw_exchange(&daemon.socket, &vec![b'x'; 70 * 1024])),
        refused
    );
    assert_serves(&daemon.socket);
}

#[test]
fn malformed_requests_get_an_error_naming_the_problem() {
    let daemon = Daemon::start();
    let message = error_message(&raw_exchange(&daemon.socket, b"hello\n"));
    assert!(
        message.starts_with("invalid request: expected value"),
        "{message}"
    );
    let message = error_message(&raw_exchange(&daemon.socket, b"{\"op\":\"frobnicate\"}\n"));
    assert!(
        message
            .contains("unknown variant `frobnicate`, expected one of `list`, `set`, `interfaces`"),
        "{message}"
    );
    let message = error_message(&raw_exchange(&daemon.socket, b"{\"op\":\"list\"}\n"));
    assert!(message.contains("missing field `prefix`"), "{message}");
    // A request without its newline, from a client that shut down its side, counts.
    let mut stream = UnixStream::connect(&daemon.socket).unwrap();
    stream.write_all(br#"{"op":"interfaces"}"#).unwrap();
    stream.shutdown(std::net::Shutdown::Write).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with(r#"{"result":"interfaces""#), "{answer}");
    assert_serves(&daemon.socket);
}

#[test]
fn a_silent_client_does_not_hold_up_the_others_and_is_timed_out() {
    let daemon = Daemon::start();
    let mut silent = UnixStream::connect(&daemon.socket).unwrap();
    let mut half = UnixStream::connect(&daemon.socket).unwrap();
    half.write_all(br#"{"op":"li"#).unwrap();
    assert_serves(&daemon.socket);
    // Served while the silent ones still wait for their timeout (2 s).
    silent.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let pending = silent.read(&mut byte).unwrap_err();
    assert_eq!(pending.kind(), std::io::ErrorKind::WouldBlock);
    silent.set_nonblocking(false).unwrap();
    for stream in [&mut silent, &mut half] {
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        assert_eq!(error_message(&answer), "no request line within 2 s");
    }
}

#[test]
fn a_daemon_that_does_not_answer_is_reported() {
    let dir = TestDir::new();
    // The inbox is kept but nobody answers it.
    let (_server, _inbox) = ControlServer::start(&dir.socket()).unwrap();
    match request(&dir.socket(), &Request::Interfaces).unwrap() {
        Response::Error { message } => {
            assert!(
                message.starts_with("polld did not answer in time"),
                "{message}"
            )
        }
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn a_stale_socket_file_is_replaced() {
    let dir = TestDir::new();
    let socket = dir.socket();
    // A dead polld's socket: the file stays, nobody listens.
    drop(UnixListener::bind(&socket).unwrap());
    let err = request(&socket, &Request::Interfaces).unwrap_err();
    assert!(
        matches!(err, ClientError::NotRunning { stale: true, .. }),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("only a stale socket file is left there"),
        "{err}"
    );
    let (_server, inbox) = ControlServer::start(&socket).unwrap();
    let empty = Response::Interfaces {
        interfaces: Vec::new(),
    };
    let (seen, got) = answer_one_by_hand(&inbox, &socket, empty.clone());
    assert_eq!(seen, Request::Interfaces);
    assert_eq!(got, empty);
}

/// Has a client thread send `Interfaces` and answers it by hand from this thread, as
/// the runtime's poll loop would: returns what the inbox delivered and what the client
/// got back.
fn answer_one_by_hand(inbox: &Inbox, socket: &Path, response: Response) -> (Request, Response) {
    let asker = std::thread::spawn({
        let socket = socket.to_path_buf();
        move || request(&socket, &Request::Interfaces).unwrap()
    });
    let mut seen = Vec::new();
    while seen.is_empty() {
        wait_for_request(inbox, 1000);
        inbox.answer_pending(&mut |req| {
            seen.push(req);
            response.clone()
        });
    }
    assert_eq!(seen.len(), 1);
    (seen.remove(0), asker.join().unwrap())
}

#[test]
fn answer_pending_returns_at_once_when_nothing_waits() {
    let dir = TestDir::new();
    let (_server, inbox) = ControlServer::start(&dir.socket()).unwrap();
    inbox.answer_pending(&mut |req| panic!("nothing was asked, got {req:?}"));
}

#[test]
fn an_answer_larger_than_the_socket_buffer_arrives_whole() {
    let dir = TestDir::new();
    let (_server, inbox) = ControlServer::start(&dir.socket()).unwrap();
    let interface = IfStatus {
        name: "veth0".to_string(),
        backend: "af_packet".to_string(),
        mode: "polling".to_string(),
        link: "up".to_string(),
        mac: None,
        addresses: Vec::new(),
        tables: None,
        counters: (0..64).map(|i| (format!("counter_{i}"), i)).collect(),
        rx_work: None,
        umem: None,
        busy_poll: None,
        device_interrupts: None,
    };
    // About 4 MB, far above the default Unix socket buffer.
    let big = Response::Interfaces {
        interfaces: vec![interface; 2000],
    };
    let (_, got) = answer_one_by_hand(&inbox, &dir.socket(), big.clone());
    assert_eq!(got, big);
}

#[test]
fn clients_beyond_the_connection_limit_wait_their_turn() {
    let daemon = Daemon::start();
    let silent: Vec<UnixStream> = (0..MAX_CONNECTIONS)
        .map(|_| UnixStream::connect(&daemon.socket).unwrap())
        .collect();
    // Served once the silent ones time out and free their slots.
    assert_serves(&daemon.socket);
    drop(silent);
}

#[test]
fn dropping_the_server_closes_its_clients_and_removes_the_socket() {
    let dir = TestDir::new();
    let (server, _inbox) = ControlServer::start(&dir.socket()).unwrap();
    let mut waiting = UnixStream::connect(dir.socket()).unwrap();
    waiting.write_all(b"{\"op\":\"interfaces\"}\n").unwrap();
    drop(server);
    assert!(!dir.socket().exists());
    // Closed without an answer: EOF, or a reset when its request was still unread.
    waiting
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let mut answer = String::new();
    match waiting.read_to_string(&mut answer) {
        Ok(_) => assert_eq!(answer, ""),
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset),
    }
}

#[test]
fn a_second_server_on_a_live_socket_is_refused() {
    let daemon = Daemon::start();
    let err = ControlServer::start(&daemon.socket).err().unwrap();
    assert!(matches!(err, ControlError::InUse { .. }));
    assert_eq!(
        err.to_string(),
        format!(
            "another polld is serving {} (pid {}): stop it first, or give this one another --socket path",
            daemon.socket.display(),
            std::process::id()
        )
    );
    assert_serves(&daemon.socket);
}

#[test]
fn something_else_in_the_way_is_left_alone() {
    let dir = TestDir::new();
    std::fs::write(dir.socket(), "precious").unwrap();
    let err = ControlServer::start(&dir.socket()).err().unwrap();
    assert!(
        err.to_string()
            .ends_with("exists and is not a socket: remove it or choose another --socket path"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(dir.socket()).unwrap(), "precious");
}
