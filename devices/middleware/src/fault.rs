//! A device that misbehaves on purpose, at seeded rates: a test tool for the reliability
//! tests (`[interfaces.fault]` in the `polld run` configuration), never for production.
//!
//! On receive, each frame the inner device hands up is, in this order of precedence,
//! dropped (never handed up), truncated (handed up cut short), corrupted (one byte
//! flipped), or handed up as is; any frame handed up may also be duplicated (handed up
//! twice). On transmit, a frame may be failed: accepted and not sent. Every effect is
//! counted, and the two that lose a frame enter conservation through [`HwStats`]: a
//! dropped receive as `rx_fault` (the dataplane's `drops.fault_injected`, like a ring
//! drop it never reaches `rx_packets`), a failed transmit as `tx_drops.fault`. Truncated
//! and corrupted frames are counted again by whatever the packet stage decides for them;
//! a duplicate is one more received frame.
//!
//! A device may also lose wakeups, as a NIC or driver that fails to raise its interrupt
//! does: when frames appear in a ring that was empty, the wakeup for them is lost at the
//! `wakeup_loss` rate, and the device then says its ring is empty ([`Device::rx_ready`],
//! which the dataplane asks before it runs a mode's work for a wakeup) until a receive
//! call looks at the ring (the wakeup watchdog's, `kern.polling.wakeup_watchdog_ms`, or
//! a poll). Like a NIC that raises no interrupt until its ring is serviced, it strands
//! the frames behind the lost wakeup and the ones after them. On a real device whose
//! wakeup is a readable fd the fd stays readable meanwhile, so the executor keeps waking
//! for it: a test tool's cost.

use std::fmt;

use polld_core::device::{Capabilities, Device, HwStats, Lending, TxDrop, TxFull, Wrapper};
use polld_core::rng::Rng;

/// Rates per mille (0 to 1000) of each fault, and the seed that makes a run repeatable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct FaultConfig {
    pub seed: u64,
    /// Received frames dropped before they are handed up.
    pub rx_drop: u16,
    /// Received frames cut to a random shorter length (at least one byte).
    pub rx_truncate: u16,
    /// Received frames with one random byte flipped.
    pub rx_corrupt: u16,
    /// Received frames handed up twice.
    pub rx_duplicate: u16,
    /// Frames accepted for transmission and not sent.
    pub tx_fail: u16,
    /// Wakeups lost: frames appearing in an empty ring are not reported by `rx_ready`
    /// until the next receive call.
    pub wakeup_loss: u16,
}

/// A rate outside 0..=1000.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadRate {
    pub field: &'static str,
    pub value: u16,
}

impl fmt::Display for BadRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "fault.{} = {}: a rate is per mille, use 0 to 1000",
            self.field, self.value
        )
    }
}

impl std::error::Error for BadRate {}

impl FaultConfig {
    fn rates(&self) -> [(&'static str, u16); 6] {
        [
            ("rx_drop", self.rx_drop),
            ("rx_truncate", self.rx_truncate),
            ("rx_corrupt", self.rx_corrupt),
            ("rx_duplicate", self.rx_duplicate),
            ("tx_fail", self.tx_fail),
            ("wakeup_loss", self.wakeup_loss),
        ]
    }

    /// Checks every rate is per mille; the error names the field.
    pub fn validate(&self) -> Result<(), BadRate> {
        match self.rates().into_iter().find(|&(_, v)| v > 1000) {
            Some((field, value)) => Err(BadRate { field, value }),
            None => Ok(()),
        }
    }
}

/// What a [`FaultInjector`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct FaultStats {
    pub rx_dropped: u64,
    pub rx_truncated: u64,
    pub rx_corrupted: u64,
    pub rx_duplicated: u64,
    pub tx_failed: u64,
    pub wakeups_lost: u64,
}

/// Wraps a device and injects the faults of a [`FaultConfig`].
pub struct FaultInjector<D> {
    inner: D,
    config: FaultConfig,
    rng: Rng,
    stats: FaultStats,
    /// What the last `rx_ready` found in the inner ring: frames appearing after it found
    /// none are a new wakeup.
    was_ready: bool,
    /// The last wakeup was lost: `rx_ready` says false until a receive call.
    hiding: bool,
}

impl<D: Device> FaultInjector<D> {
    pub fn new(inner: D, config: FaultConfig) -> Result<FaultInjector<D>, BadRate> {
        config.validate()?;
        Ok(FaultInjector {
            inner,
            config,
            rng: Rng::new(config.seed),
            stats: FaultStats::default(),
            was_ready: false,
            hiding: false,
        })
    }

    pub fn stats(&self) -> FaultStats {
        self.stats
    }

    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The wrapped device, for what the [`Device`] trait does not reach.
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }
}

/// Whether a fault at `per_mille` strikes this time.
fn strikes(rng: &mut Rng, per_mille: u16) -> bool {
    per_mille > 0 && rng.below(1000) < u64::from(per_mille)
}

impl<D: Device> Wrapper for FaultInjector<D> {
    type Inner = D;

    fn inner(&self) -> &D {
        &self.inner
    }
    fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// The inner device's, but for its pool: the injector forwards by copy (below).
    fn capabilities(this: &Self) -> Capabilities<'_> {
        let mut caps = this.inner.capabilities();
        caps.pool = None;
        caps
    }

    /// None: a lent frame would skip the faults, and a duplicate has no buffer of its own
    /// to lend.
    fn lending(_this: &mut Self) -> Option<&mut dyn Lending> {
        None
    }

    /// Returns the frames handed up, duplicates included, so it may exceed `budget` by
    /// the duplicates; dropped frames are not handed up and not returned.
    fn receive(this: &mut Self, budget: usize, rx: &mut dyn FnMut(&mut [u8])) -> usize {
        let FaultInjector {
            inner,
            config,
            rng,
            stats,
            hiding,
            ..
        } = this;
        // The ring was looked at: what a lost wakeup hid is seen from now on.
        *hiding = false;
        let mut handed = 0;
        inner.receive(budget, &mut |frame: &mut [u8]| {
            if strikes(rng, config.rx_drop) {
                stats.rx_dropped += 1;
                return;
            }
            let mut len = frame.len();
            if len > 1 && strikes(rng, config.rx_truncate) {
                len = 1 + rng.below(len as u64 - 1) as usize;
                stats.rx_truncated += 1;
            } else if len > 0 && strikes(rng, config.rx_corrupt) {
                let at = rng.below(len as u64) as usize;
                frame[at] ^= 0xff;
                stats.rx_corrupted += 1;
            }
            // The stage may rewrite the frame in place: the duplicate is a copy of it
            // as received.
            let duplicate = strikes(rng, config.rx_duplicate).then(|| frame[..len].to_vec());
            rx(&mut frame[..len]);
            handed += 1;
            if let Some(mut copy) = duplicate {
                stats.rx_duplicated += 1;
                rx(&mut copy);
                handed += 1;
            }
        });
        handed
    }

    /// The inner device's, but false while the wakeup for the frames it holds was lost.
    fn rx_ready(this: &mut Self) -> bool {
        let ready = this.inner.rx_ready();
        if ready && !this.was_ready && strikes(&mut this.rng, this.config.wakeup_loss) {
            this.stats.wakeups_lost += 1;
            this.hiding = true;
        }
        this.was_ready = ready;
        if !ready {
            this.hiding = false;
        }
        ready && !this.hiding
    }

    fn send(this: &mut Self, frame: &[u8]) -> Result<(), TxFull> {
        if strikes(&mut this.rng, this.config.tx_fail) {
            this.stats.tx_failed += 1;
            return Ok(());
        }
        this.inner.send(frame)
    }

    fn hw_stats(this: &mut Self) -> HwStats {
        let mut stats = this.inner.hw_stats();
        stats.rx_fault += this.stats.rx_dropped;
        stats.tx_drops.add(TxDrop::Fault, this.stats.tx_failed);
        stats
    }
}
