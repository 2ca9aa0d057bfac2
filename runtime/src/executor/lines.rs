//! Which of the devices' fds are in the poll thread's epoll set: each interface's
//! interrupt while the dataplane has it armed, and an output's transmit-ready line while
//! interrupt work waits for it; the interrupt lines read from the devices instead while
//! the thread has work without sleeping; and which transmit-ready events are rises.

use std::os::fd::{AsRawFd, BorrowedFd, RawFd};

use polld_core::{LinkState, TxReadyLine};

use super::{PollThread, RealDataplane, TOKEN_IF, TOKEN_TX};
use crate::sys::{now_ns, Epoll};
use polld_core::dataplane::EVENTS_EVERY_NS;

/// The numbers of the fds an interface has in the epoll set, by [`Line`].
pub(super) type Watched = [Option<RawFd>; 2];

/// What the executor waits on for an interface, each through an fd of its device.
#[derive(Clone, Copy)]
pub(super) enum Line {
    /// Its interrupt: the fd readable, level-triggered.
    Interrupt = 0,
    /// Its transmit-ready line: the fd woken writable, edge-triggered.
    TxReady = 1,
}

impl Line {
    const BOTH: [Line; 2] = [Line::Interrupt, Line::TxReady];

    /// The device's fd for this line, armed or not.
    fn fd(self, dp: &RealDataplane, i: usize) -> Option<BorrowedFd<'_>> {
        let caps = dp.capabilities(i);
        match self {
            Line::Interrupt => caps.interrupt_fd,
            Line::TxReady => caps.tx_ready_fd(),
        }
    }

    /// The fd to wait on for interface `i` now, if any: while the line is armed and the
    /// link is up.
    pub(super) fn wanted(self, dp: &RealDataplane, i: usize) -> Option<BorrowedFd<'_>> {
        let armed = match self {
            Line::Interrupt => dp.interrupt_armed(i) || dp.wakeup_armed(i),
            Line::TxReady => dp.tx_ready_armed(i),
        };
        self.fd(dp, i)
            .filter(|_| armed && dp.link(i) == LinkState::Up)
    }

    fn add(self, epoll: &Epoll, fd: BorrowedFd<'_>, i: usize) -> std::io::Result<()> {
        match self {
            Line::Interrupt => epoll.add(fd, TOKEN_IF + i as u64),
            Line::TxReady => epoll.add_writable_edge(fd, TOKEN_TX + i as u64),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Line::Interrupt => "interrupt",
            Line::TxReady => "transmit-ready line",
        }
    }

    /// What serves the interface when its line cannot be waited on.
    fn fallback(self) -> &'static str {
        match self {
            Line::Interrupt => "it is served by status checks only",
            Line::TxReady => "what waits for it resumes at status checks",
        }
    }
}

/// Takes the fd numbered `watched` out of the epoll set, if the device still lends that
/// number (`current`); a number it no longer lends was closed with the device that lent
/// it, and its file left the set then.
fn unwatch(epoll: &Epoll, watched: &mut Option<RawFd>, current: Option<BorrowedFd<'_>>) {
    let Some(old) = watched.take() else {
        return;
    };
    if let Some(fd) = current.filter(|fd| fd.as_raw_fd() == old) {
        epoll.remove(fd);
    }
}

/// Whether output `o`'s transmit-ready line rises on a wakeup only.
fn wakeup_only(dp: &RealDataplane, o: usize) -> bool {
    matches!(
        dp.capabilities(o).tx_ready,
        Some(TxReadyLine::WakeupOnly(_))
    )
}

impl PollThread {
    /// Waits on exactly the interrupts the dataplane has armed (unless they are read from
    /// the devices), and on the transmit-ready lines interrupt work waits for.
    pub(super) fn sync_lines(&mut self, dp: &RealDataplane) {
        for i in 0..self.watched.len() {
            for line in Line::BOTH {
                let want = line
                    .wanted(dp, i)
                    .filter(|_| !(self.lines_read && matches!(line, Line::Interrupt)));
                let watched = &mut self.watched[i][line as usize];
                if want.map(|fd| fd.as_raw_fd()) == *watched {
                    continue;
                }
                unwatch(&self.epoll, watched, line.fd(dp, i));
                let Some(fd) = want else {
                    continue;
                };
                match line.add(&self.epoll, fd, i) {
                    Ok(()) => *watched = Some(fd.as_raw_fd()),
                    Err(e) => log::warn!(
                        "{}: cannot wait for its {} ({e}); {}",
                        dp.interfaces()[i].dev().name(),
                        line.name(),
                        line.fallback()
                    ),
                }
            }
        }
    }

    /// Takes interface `i`'s fds out of the epoll set, to wait on them afresh: a status
    /// check may have swapped in a reopened device, whose fds may reuse the old numbers,
    /// which a comparison cannot tell.
    pub(super) fn unwatch_all(&mut self, dp: &RealDataplane, i: usize) {
        for line in Line::BOTH {
            unwatch(
                &self.epoll,
                &mut self.watched[i][line as usize],
                line.fd(dp, i),
            );
        }
    }

    /// Once the thread has had work for [`EVENTS_EVERY_NS`] without sleeping, it reads
    /// the armed interrupt lines from the devices ([`polld_core::Device::rx_ready`]) at
    /// each read of its events, and takes their fds out of the epoll set until it next
    /// sleeps. An fd waited on costs whoever fills it a wakeup callback per frame (a TAP's
    /// writer, on its own CPU), where a device raises its interrupt for free: under a
    /// flood that is the generator's CPU paying for an interrupt nobody sleeps on.
    pub(super) fn choose_line_reading(&mut self, busy: bool) {
        if !busy {
            self.busy_since = None;
            self.lines_read = false;
            return;
        }
        let now = now_ns();
        let since = *self.busy_since.get_or_insert(now);
        self.lines_read = now.saturating_sub(since) >= EVENTS_EVERY_NS;
    }

    /// Raises the armed interrupt lines whose device has frames (while `lines_read`).
    pub(super) fn read_lines(&mut self, dp: &mut RealDataplane) {
        for i in 0..self.watched.len() {
            if Line::Interrupt.wanted(dp, i).is_some() && dp.interface_mut(i).dev_mut().rx_ready() {
                dp.interrupt_line(i, true);
            }
        }
    }

    /// The outputs whose transmit-ready fd is in the epoll set and rises on a wakeup only.
    fn wakeup_only_outputs<'a>(
        &'a self,
        dp: &'a RealDataplane,
    ) -> impl Iterator<Item = usize> + 'a {
        (0..self.watched.len()).filter(move |&o| {
            self.watched[o][Line::TxReady as usize].is_some() && wakeup_only(dp, o)
        })
    }

    /// Whether the epoll set holds the transmit-ready fd of an output whose line rises on
    /// a wakeup only.
    pub(super) fn waits_for_wakeup_only_line(&self, dp: &RealDataplane) -> bool {
        self.wakeup_only_outputs(dp).next().is_some()
    }

    /// Raises the lines of the outputs whose transmit-ready fd rises on a wakeup only.
    pub(super) fn raise_wakeup_only_lines(&mut self, dp: &mut RealDataplane) {
        let outputs: Vec<usize> = self.wakeup_only_outputs(dp).collect();
        for o in outputs {
            dp.tx_ready_line(o, true);
        }
    }

    /// Output `o`'s transmit-ready fd was reported: a rise, unless the line rises on a
    /// wakeup only and this was none ([`polld_dev::tx_wakeup`]).
    pub(super) fn tx_ready_event(&mut self, dp: &mut RealDataplane, o: usize) {
        if !wakeup_only(dp, o) || self.wakeup_only.rose() {
            dp.tx_ready_line(o, true);
        } else {
            self.wakeup_only.dropped();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use polld_dev::tx_wakeup::{WakeupOnlyLines, WATCHDOG_MS};
    use rustix::pipe::PipeFlags;
    use std::os::fd::{AsFd, OwnedFd};

    /// A pipe's write end stands in for an AF_XDP socket in copy mode: writable (so
    /// reported when added), and woken writable when the reader drains a full pipe, as the
    /// socket is when veth's peer frees what it sent.
    fn pipe() -> (OwnedFd, OwnedFd) {
        rustix::pipe::pipe_with(PipeFlags::NONBLOCK | PipeFlags::CLOEXEC)
            .unwrap_or_else(|e| panic!("pipe2: {}", std::io::Error::from(e)))
    }

    /// Fills the pipe, then empties it: one wakeup of the write end.
    fn wake_writer(read: &OwnedFd, write: &OwnedFd) {
        let buf = [0u8; 4096];
        while rustix::io::write(write, &buf).is_ok_and(|n| n > 0) {}
        let mut sink = [0u8; 4096];
        while rustix::io::read(read, &mut sink).is_ok_and(|n| n > 0) {}
    }

    const TOKEN: u64 = 7;

    #[test]
    fn a_wakeup_only_line_rises_on_a_wakeup_while_asleep_not_on_its_level_or_own_work() {
        let (read, write) = pipe();
        let mut epoll = Epoll::new().unwrap();
        let mut ready = Vec::new();
        let mut lines = WakeupOnlyLines::default();
        // A cycle ran and armed the line: the fd joins the set, writable.
        lines.ran();
        epoll.add_writable_edge(write.as_fd(), TOKEN).unwrap();
        assert_eq!(lines.timeout(false, true), 0, "must look before sleeping");
        epoll.wait(0, &mut ready).unwrap();
        assert_eq!(ready, [TOKEN], "the kernel reports the level when added");
        assert!(!lines.rose(), "the level when added is no rise");
        // Nothing ran: now it sleeps, and the level is not reported again.
        assert_eq!(lines.timeout(false, true), -1);
        epoll.wait(50, &mut ready).unwrap();
        assert!(ready.is_empty(), "reported again: {ready:?}");
        // The output takes frames while the thread sleeps: that wakeup is a rise.
        wake_writer(&read, &write);
        epoll.wait(1000, &mut ready).unwrap();
        assert_eq!(ready, [TOKEN]);
        assert!(lines.rose());
        // A cycle ran and its own sends woke the fd: the look before sleeping drops it.
        lines.ran();
        wake_writer(&read, &write);
        assert_eq!(lines.timeout(false, true), 0);
        epoll.wait(0, &mut ready).unwrap();
        assert_eq!(ready, [TOKEN]);
        assert!(!lines.rose(), "a wakeup from polld's own work is no rise");
        lines.dropped();
        // The sleep after a look that dropped a line is bounded: the output may have taken
        // frames just before the look. Nothing woke it: the line rises.
        assert_eq!(lines.timeout(false, true), WATCHDOG_MS);
        epoll.wait(WATCHDOG_MS, &mut ready).unwrap();
        assert!(ready.is_empty(), "{ready:?}");
        assert!(lines.watchdog_expired());
        // After a look that dropped nothing, the sleep is not bounded.
        lines.ran();
        assert_eq!(lines.timeout(false, true), 0);
        assert_eq!(lines.timeout(false, true), -1);
        assert!(!lines.watchdog_expired());
        // While work is due every wait just looks, and what it reports counts.
        assert_eq!(lines.timeout(true, true), 0);
        assert!(lines.rose());
        // Without such a line waited for, nothing changes: no look before sleeping.
        lines.ran();
        assert_eq!(lines.timeout(false, false), -1);
        assert!(lines.rose());
    }
}
