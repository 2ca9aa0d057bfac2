//! Transmit-ready lines that rise on a wakeup only ([`polld_core::TxReadyLine::WakeupOnly`]):
//! which of the events an executor's epoll reports for them are rises.
//!
//! An AF_XDP socket in copy mode polls writable whenever its tx ring is at most half full,
//! though the device behind it is still full, and each kick that sends wakes it
//! (`xsk_generic_xmit` wakes the socket after sending); the wakeup that matters comes when
//! the device has taken frames. So what such a fd reports before the executor sleeps is
//! its level when added, or a wakeup the executor's own sends caused, not the output
//! taking frames: the work that just ran saw the output itself. [`WakeupOnlyLines`] is the
//! rule an executor that waits in epoll follows for them: after work ran, the next wait
//! with nothing due looks without sleeping, and the lines that look finds are dropped;
//! only a wakeup while the thread sleeps (or while work is due) raises the line. The
//! output may also have taken frames just before the look, and that wakeup is dropped
//! with the others: so a sleep after a look that dropped a line lasts at most
//! [`WATCHDOG_MS`], and the lines rise when it ends with nothing reported.

/// The longest sleep after a look that dropped a wakeup-only line (ms).
pub const WATCHDOG_MS: i32 = 1;

/// Which transmit-ready events of wakeup-only lines are rises, for one executor's waits.
#[derive(Clone, Copy, Debug, Default)]
pub struct WakeupOnlyLines {
    /// The last wait was that look, and nothing ran since.
    looked: bool,
    /// A look dropped a line, and no line rose since.
    suspect: bool,
    /// The last wait was a bounded sleep for that.
    bounded: bool,
}

impl WakeupOnlyLines {
    /// The next wait's timeout in ms (0: just look; [`WATCHDOG_MS`]: sleep after a look
    /// that dropped a line; -1: sleep), given whether work is due and whether a
    /// wakeup-only line is waited for.
    pub fn timeout(&mut self, busy: bool, waiting: bool) -> i32 {
        let look = !busy && waiting && !self.looked;
        // Work due says nothing of the line: only an output no longer waited for ends it.
        self.suspect &= waiting || busy;
        self.bounded = !busy && !look && self.suspect;
        self.looked = look;
        if busy || look {
            0
        } else if self.bounded {
            WATCHDOG_MS
        } else {
            -1
        }
    }

    /// The look dropped a line it reported.
    pub fn dropped(&mut self) {
        self.suspect = true;
    }

    /// Whether the last wait was a bounded sleep and nothing woke it: the lines rise.
    pub fn watchdog_expired(&mut self) -> bool {
        self.suspect &= !self.bounded;
        self.bounded
    }

    /// Whether a wakeup-only line the last wait reported is a rise.
    pub fn rose(&mut self) -> bool {
        self.suspect &= self.looked;
        !self.looked
    }

    /// Work ran: it may have woken the fds itself.
    pub fn ran(&mut self) {
        self.looked = false;
    }
}
