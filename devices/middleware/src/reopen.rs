//! Reopening an interface that went away, off the poll thread.
//!
//! A device's status check only reports: an interface deleted, replaced by a new one of
//! the same name, or cut off with its namespace is [`LinkState::Gone`]. Opening the new
//! one is slow (on AF_XDP a BPF load, a UMEM mmap, bind retries up to ~2 s), so the poll
//! thread never does it. [`Reopening`] wraps each real device (innermost, under the
//! middleware): when its device reports `Gone` it asks the [`Reopener`]'s helper thread
//! to open a new one, and goes on reporting `Gone` meanwhile; the helper hands the new
//! device over, and the poll thread swaps it in at a later status check, between two
//! frames. The old device's counters are carried over, so the interface's totals (and
//! conservation) go on across the swap. A failed attempt (the interface is not back yet)
//! is retried at the next status check that finds the device gone.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};

use polld_core::{Device, HwStats, LinkState, Wrapper};

/// A device opened on the helper thread, to be handed to the poll thread.
pub type Opened = Box<dyn Device + Send>;

/// Opens the interface anew, as at start (in the same namespace, with the same config);
/// fails, saying why, while it is not back.
pub type Opener = Box<dyn Fn() -> Result<Opened, String> + Send + Sync>;

/// What the helper thread left for one interface: a new device, or why it could not.
type Mailbox = Arc<Mutex<Option<Result<Opened, String>>>>;

/// One request to the helper thread.
struct Job {
    opener: Arc<Opener>,
    mailbox: Mailbox,
}

/// The helper thread that opens devices; it ends when the last [`Reopening`] is dropped.
pub struct Reopener {
    jobs: Sender<Job>,
    /// The requests, until [`Reopener::start`] hands them to the helper thread.
    requests: Option<Receiver<Job>>,
}

impl Reopener {
    /// A reopener whose requests wait until [`Reopener::start`].
    pub fn new() -> Reopener {
        let (jobs, requests) = channel::<Job>();
        Reopener {
            jobs,
            requests: Some(requests),
        }
    }

    /// Starts the helper thread. It inherits the calling thread's namespace and
    /// capabilities: start it after set-up dropped what reopening does not need.
    pub fn start(&mut self) -> std::io::Result<()> {
        let Some(requests) = self.requests.take() else {
            return Ok(());
        };
        std::thread::Builder::new()
            .name("polld-reopen".into())
            .spawn(move || {
                for job in requests {
                    let opened = (job.opener)();
                    *job.mailbox.lock().unwrap_or_else(|e| e.into_inner()) = Some(opened);
                }
            })?;
        Ok(())
    }

    /// Wraps `dev`, which `opener` opens again once it is gone.
    pub fn wrap(&self, dev: Box<dyn Device>, opener: Opener) -> Reopening {
        Reopening {
            current: dev,
            opener: Arc::new(opener),
            jobs: self.jobs.clone(),
            mailbox: Mailbox::default(),
            requested: false,
            last_error: None,
            carried: HwStats::default(),
            armed: true,
        }
    }
}

/// A device that is replaced by a new one, opened by the [`Reopener`], once it is gone.
/// Everything else passes through to the current device, its loans included: loans never
/// outlive a receive batch, and the device is swapped only at a status check, between
/// batches.
pub struct Reopening {
    current: Box<dyn Device>,
    opener: Arc<Opener>,
    jobs: Sender<Job>,
    mailbox: Mailbox,
    /// A reopen was asked for and its result not yet taken.
    requested: bool,
    /// The last failure logged, so that a retry failing the same way is not logged again.
    last_error: Option<String>,
    /// The counters of the devices this one replaced, added to the current one's.
    carried: HwStats,
    /// Whether the dataplane has the interrupt armed: the new device starts that way.
    armed: bool,
}

impl Default for Reopener {
    fn default() -> Self {
        Reopener::new()
    }
}

impl Reopening {
    /// Swaps in the device the helper opened, if it has one ready (never waits).
    fn take_reopened(&mut self) {
        let Ok(mut mailbox) = self.mailbox.try_lock() else {
            return;
        };
        let Some(result) = mailbox.take() else {
            return;
        };
        drop(mailbox);
        self.requested = false;
        match result {
            Ok(mut dev) => {
                self.carried = sum(self.carried, self.current.hw_stats());
                dev.set_interrupt(self.armed);
                self.current = dev;
                self.last_error = None;
                log::info!(
                    "{}: reopened on the interface that now has its name",
                    self.current.name()
                );
            }
            Err(e) => {
                if self.last_error.as_ref() != Some(&e) {
                    log::warn!(
                        "{}: not reopened yet ({e}); trying again at each status check",
                        self.current.name()
                    );
                }
                self.last_error = Some(e);
            }
        }
    }
}

/// Two devices' running totals, added.
fn sum(a: HwStats, b: HwStats) -> HwStats {
    // Destructured, so that a new counter cannot be left out.
    let HwStats {
        rx_ring_full,
        rx_no_buffer,
        rx_fault,
        mut tx_drops,
    } = a;
    tx_drops.add_all(&b.tx_drops);
    HwStats {
        rx_ring_full: rx_ring_full + b.rx_ring_full,
        rx_no_buffer: rx_no_buffer + b.rx_no_buffer,
        rx_fault: rx_fault + b.rx_fault,
        tx_drops,
    }
}

impl Wrapper for Reopening {
    type Inner = dyn Device;

    fn inner(&self) -> &Self::Inner {
        &*self.current
    }
    fn inner_mut(&mut self) -> &mut Self::Inner {
        &mut *self.current
    }

    /// The current device's status; a device gone asks for a new one, and a new one
    /// ready is swapped in first (and with it, its capabilities: the dataplane reads
    /// them again after each status check).
    fn check_status(this: &mut Self) -> LinkState {
        this.take_reopened();
        let state = this.current.check_status();
        if state == LinkState::Gone && !this.requested {
            let job = Job {
                opener: this.opener.clone(),
                mailbox: this.mailbox.clone(),
            };
            // The helper only ends once every sender is gone, so this cannot fail.
            this.requested = this.jobs.send(job).is_ok();
        }
        state
    }

    fn set_interrupt(this: &mut Self, armed: bool) {
        this.armed = armed;
        this.current.set_interrupt(armed)
    }
    fn hw_stats(this: &mut Self) -> HwStats {
        sum(this.carried, this.current.hw_stats())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use polld_core::{TxDrop, TxFull};
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    use std::time::{Duration, Instant};

    /// A device whose link the test sets, with a transmit-drop total.
    struct Fake {
        name: &'static str,
        link: Arc<Mutex<LinkState>>,
        too_long: u64,
    }

    impl Device for Fake {
        fn name(&self) -> &str {
            self.name
        }
        fn receive(&mut self, _budget: usize, _rx: &mut dyn FnMut(&mut [u8])) -> usize {
            0
        }
        fn rx_ready(&mut self) -> bool {
            false
        }
        fn send(&mut self, _frame: &[u8]) -> Result<(), TxFull> {
            Ok(())
        }
        fn flush(&mut self) {}
        fn check_status(&mut self) -> LinkState {
            *self.link.lock().unwrap()
        }
        fn set_interrupt(&mut self, _armed: bool) {}
        fn hw_stats(&mut self) -> HwStats {
            let mut stats = HwStats::default();
            stats.tx_drops.add(TxDrop::TooLong, self.too_long);
            stats
        }
    }

    #[test]
    fn a_gone_device_is_reopened_by_the_helper_while_status_checks_return_at_once() {
        let mut reopener = Reopener::new();
        reopener.start().unwrap();
        let old_link = Arc::new(Mutex::new(LinkState::Up));
        let old = Fake {
            name: "eth9",
            link: old_link.clone(),
            too_long: 5,
        };
        // The opener takes 300 ms (an AF_XDP bind retrying) and fails the first time: the
        // interface is not back yet.
        let attempts = Arc::new(AtomicU32::new(0));
        let release = Arc::new(AtomicBool::new(false));
        let (a, r) = (attempts.clone(), release.clone());
        let opener: Opener = Box::new(move || {
            a.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(300));
            if !r.load(Ordering::SeqCst) {
                return Err("no interface eth9".into());
            }
            Ok(Box::new(Fake {
                name: "eth9",
                link: Arc::new(Mutex::new(LinkState::Up)),
                too_long: 2,
            }) as Opened)
        });
        let mut dev = reopener.wrap(Box::new(old), opener);
        assert_eq!(dev.check_status(), LinkState::Up);
        assert_eq!(attempts.load(Ordering::SeqCst), 0, "nothing to reopen");

        *old_link.lock().unwrap() = LinkState::Gone;
        // Every check returns at once while the helper works: the poll thread goes on.
        let checks_until = |want: LinkState, dev: &mut Reopening| {
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut checks = 0u32;
            loop {
                let start = Instant::now();
                let state = dev.check_status();
                assert!(
                    start.elapsed() < Duration::from_millis(50),
                    "a check waited"
                );
                checks += 1;
                if state == want {
                    return checks;
                }
                assert!(Instant::now() < deadline, "never {want:?}");
                std::thread::sleep(Duration::from_millis(1));
            }
        };
        // The first attempt fails; the checks go on and ask again.
        let deadline = Instant::now() + Duration::from_secs(10);
        while attempts.load(Ordering::SeqCst) < 2 {
            assert_eq!(dev.check_status(), LinkState::Gone);
            assert!(Instant::now() < deadline, "no second attempt");
            std::thread::sleep(Duration::from_millis(1));
        }
        release.store(true, Ordering::SeqCst);
        let checks = checks_until(LinkState::Up, &mut dev);
        assert!(checks > 10, "only {checks} checks ran during the reopen");
        // The old device's drops are carried over: the totals only grow.
        assert_eq!(dev.hw_stats().tx_drops.get(TxDrop::TooLong), 5 + 2);
    }
}
