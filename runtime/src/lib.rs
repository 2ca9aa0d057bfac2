//! polld-runtime: `polld run`, the dataplane on real devices in real time.
//!
//! - [`config`]: the TOML file, validated, with errors at file:line;
//! - [`daemon`]: set-up in privilege order, then the executor, then the final counters;
//! - [`error`]: why `polld run` could not start or stopped;
//! - [`check`]: what `run` checks before opening anything, and `run --check`;
//! - [`executor`]: the poll thread (ticks, interrupts, status, control, signals);
//! - [`lateness`]: how late the tick timer wakes the poll thread;
//! - [`netstat`]: the router's routes and neighbours, a page at a time (`polld netstat -rn`,
//!   `polld arp -an`);
//! - [`idle`]: idle polling's own thread at idle priority;
//! - [`reload`]: SIGHUP, the config file's modes and knobs applied anew;
//! - [`percpu`]: `[daemon] cpus`, one poll thread per CPU and the control requests routed
//!   to them (DragonFly's ifpoll);
//! - [`rx_work`]: where the interfaces' receive work runs, and the kernel's share of it;
//! - [`device_irqs`]: the devices' own receive interrupts, from `/proc/interrupts`;
//! - [`caps`]: capability checks and the drop after set-up;
//! - [`reference`]: the knob and metrics reference pages, from the declarations;
//! - [`sys`]: epoll, timerfd, signalfd and scheduling wrappers.

#![forbid(unsafe_code)]

pub mod caps;
pub mod check;
pub mod config;
pub mod daemon;
pub mod device_irqs;
pub mod error;
pub mod executor;
pub mod idle;
pub mod lateness;
pub mod netstat;
pub mod notify;
pub mod percpu;
pub mod queues;
pub mod reference;
pub mod reload;
pub mod rx_work;
pub mod sys;
pub mod tables;

pub use daemon::{run, RunArgs, RunError};
