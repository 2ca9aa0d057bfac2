//! How requests cross from the threads that receive them (the socket server, the metrics
//! server) to the poll thread that answers them, and back: an [`Inbox`] the poll thread
//! drains without ever blocking, the [`Requester`] other threads of the daemon ask it
//! with, and the [`EventFd`] doorbell each side rings.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::Arc;

use rustix::event::EventfdFlags;

use super::ANSWER_TIMEOUT;
use crate::proto::{Request, Response};

/// A non-blocking eventfd used as a doorbell between threads (also the idle poller's, in
/// polld-runtime).
pub struct EventFd(OwnedFd);

impl EventFd {
    pub fn new() -> io::Result<EventFd> {
        let flags = EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC;
        Ok(EventFd(rustix::event::eventfd(0, flags)?))
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }

    /// Makes the fd readable. The write can only fail when the counter is about to
    /// overflow, and then the fd is readable already.
    pub fn signal(&self) {
        let _ = rustix::io::write(&self.0, &1u64.to_ne_bytes());
    }

    /// Resets the fd to not readable. EAGAIN (nothing signalled) is the expected failure.
    pub fn clear(&self) {
        self.take();
    }

    /// Resets the fd to not readable; whether it had been signalled.
    pub fn take(&self) -> bool {
        let mut count = [0u8; 8];
        rustix::io::read(&self.0, &mut count).is_ok_and(|n| n == 8)
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

/// Where the answer to a request goes.
pub(super) enum ReplyTo {
    /// A socket connection of the server thread, by its id.
    Connection(u64),
    /// A [`Requester`] waiting on its own channel.
    Channel(SyncSender<Response>),
}

/// A request on its way to the poll thread, and where its answer goes.
pub(super) struct Envelope {
    pub(super) reply_to: ReplyTo,
    pub(super) request: Request,
}

/// The poll thread's side of the control socket.
pub struct Inbox {
    pub(super) requests: Receiver<Envelope>,
    pub(super) requests_wake: Arc<EventFd>,
    pub(super) replies: Sender<(u64, Response)>,
    pub(super) replies_wake: Arc<EventFd>,
}

/// The eventfd of [`Inbox::wake_fd`].
impl AsFd for Inbox {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.requests_wake.as_fd()
    }
}

impl Inbox {
    /// An eventfd that is readable while requests wait: add it to the poll thread's
    /// epoll set and call [`Inbox::answer_pending`] when it fires.
    pub fn wake_fd(&self) -> BorrowedFd<'_> {
        self.requests_wake.fd()
    }

    /// Answers every waiting request with `answer` and hands the answers back to the
    /// server thread. Never blocks: it only reads an eventfd and moves messages.
    pub fn answer_pending(&self, answer: &mut dyn FnMut(Request) -> Response) {
        // Cleared before draining: a request queued after this point signals again.
        self.requests_wake.clear();
        let mut answered = false;
        while let Ok(envelope) = self.requests.try_recv() {
            let response = answer(envelope.request);
            // The server or the requester may have stopped meanwhile; then nobody waits.
            match envelope.reply_to {
                ReplyTo::Connection(id) => {
                    let _ = self.replies.send((id, response));
                    answered = true;
                }
                ReplyTo::Channel(reply) => {
                    let _ = reply.try_send(response);
                }
            }
        }
        if answered {
            self.replies_wake.signal();
        }
    }
}

/// An [`Inbox`] with no socket behind it, and the [`Requester`] that asks it: how a
/// daemon with several poll threads hands each its share of a request.
pub fn channel() -> io::Result<(Requester, Inbox)> {
    let requests_wake = Arc::new(EventFd::new()?);
    let (requests_tx, requests_rx) = mpsc::channel();
    // Requests from a Requester are answered on their own channel; this side is unused.
    let (replies_tx, _) = mpsc::channel();
    let requester = Requester {
        requests: requests_tx,
        requests_wake: requests_wake.clone(),
    };
    let inbox = Inbox {
        requests: requests_rx,
        requests_wake,
        replies: replies_tx,
        replies_wake: Arc::new(EventFd::new()?),
    };
    Ok((requester, inbox))
}

/// Asks the poll thread through its [`Inbox`] from another thread of the daemon (the
/// metrics server), the way the socket server does for its clients.
#[derive(Clone)]
pub struct Requester {
    pub(super) requests: Sender<Envelope>,
    pub(super) requests_wake: Arc<EventFd>,
}

impl Requester {
    /// Hands `request` to the poll thread and waits up to [`ANSWER_TIMEOUT`] for its
    /// answer; `None` when the poll thread is gone or did not answer in time.
    pub fn ask(&self, request: Request) -> Option<Response> {
        let (reply, answer) = mpsc::sync_channel(1);
        let envelope = Envelope {
            reply_to: ReplyTo::Channel(reply),
            request,
        };
        self.requests.send(envelope).ok()?;
        self.requests_wake.signal();
        answer.recv_timeout(ANSWER_TIMEOUT).ok()
    }
}
