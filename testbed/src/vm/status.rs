//! What `polld testbed status` shows of a guest ([`GuestStatus`]): its recorded state,
//! whether qemu runs, and the guest's own counters of its NICs and their interrupts.

use std::time::Duration;

use serde::Serialize;

use super::state::{console_tail, guest_name, guest_state, GuestState};
use super::{exec, is_our_qemu};

/// What `polld testbed status` shows of a guest.
#[derive(Clone, Debug, Serialize)]
pub struct GuestStatus {
    pub name: String,
    #[serde(flatten)]
    pub state: GuestState,
    /// qemu runs.
    pub running: bool,
    /// The guest's `/proc/net/dev` lines of eth0 and eth1.
    pub net_dev: Vec<String>,
    /// The guest's `/proc/interrupts` lines of its virtio devices.
    pub interrupts: Vec<String>,
    /// Why the guest could not be asked.
    pub error: Option<String>,
}

/// The guest of `prefix`, if one was brought up; asks it for its counters.
pub fn guest_status(prefix: &str) -> Option<GuestStatus> {
    let state = guest_state(prefix)?;
    let running = is_our_qemu(prefix, state.pid);
    let mut status = GuestStatus {
        name: guest_name(prefix),
        state,
        running,
        net_dev: Vec::new(),
        interrupts: Vec::new(),
        error: None,
    };
    if !running {
        status.error = Some(format!(
            "qemu (pid {}) is not running; the console ends with:\n{}",
            status.state.pid,
            console_tail(prefix, 10)
        ));
        return Some(status);
    }
    let read = |path: &str| {
        exec(
            prefix,
            &["cat".into(), path.into()],
            "",
            Duration::from_secs(20),
        )
        .map(|r| r.stdout)
    };
    match read("/proc/net/dev").and_then(|dev| Ok((dev, read("/proc/interrupts")?))) {
        Ok((dev, interrupts)) => {
            let pick = |text: &str, word: &str| -> Vec<String> {
                text.lines()
                    .filter(|l| l.contains(word))
                    .map(|l| l.trim().to_string())
                    .collect()
            };
            status.net_dev = pick(&dev, "eth");
            status.interrupts = pick(&interrupts, "virtio");
        }
        Err(e) => status.error = Some(e.to_string()),
    }
    Some(status)
}

impl GuestStatus {
    /// The human-readable form, for `polld testbed status`.
    pub fn write_text(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        let s = &self.state;
        writeln!(
            out,
            "guest {}: {} (qemu pid {}, {}: {}), kernel {}, {} MiB, 1 vCPU",
            self.name,
            if self.running {
                "running"
            } else {
                "NOT running"
            },
            s.pid,
            s.accel,
            s.accel_reason,
            s.kernel,
            s.memory_mib
        )?;
        writeln!(
            out,
            "  initramfs {}  console {}",
            s.initramfs.display(),
            s.console_log.display()
        )?;
        for line in self.net_dev.iter().chain(&self.interrupts) {
            writeln!(out, "  {line}")?;
        }
        if let Some(error) = &self.error {
            writeln!(out, "  error: {error}")?;
        }
        Ok(())
    }
}
