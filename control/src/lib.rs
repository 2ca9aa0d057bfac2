//! polld-control: runtime control of a running polld over a Unix socket, and its
//! metrics over HTTP. One folder per side of the socket:
//!
//! - [`proto`]: the messages both sides exchange (one JSON object per line each way);
//! - [`daemon`]: the daemon's own `polld.*` entries, declared once, and their names;
//! - [`server`]: the daemon's side. The socket server thread of `polld run`, the
//!   [`server::Inbox`] its poll thread answers from without ever blocking, and
//!   [`server::answer`], how the daemon answers from its [`polld_core::Dataplane`];
//! - [`client`]: the user's side. One request/response exchange, with errors that say
//!   what to do, and the tools built on it: [`client::ctl`] (`polld ctl`, sysctl-like
//!   reads and writes of the knobs and counters), [`client::ifconfig`]
//!   (`polld ifconfig`, the interfaces and their modes) and [`client::netstat`]
//!   (`polld netstat -rn` and `polld arp -an`, the router's routes and neighbours);
//! - [`save`]: the TOML editor behind `polld ctl --save`, the running knobs and modes
//!   written back into the config file, atomically and keeping its comments;
//! - [`metrics`]: `GET /metrics`, an HTTP server on its own thread and the Prometheus text
//!   format it serves: the entries, then the build and the process as every exporter
//!   serves them (the commit comes from `build.rs`).

#![forbid(unsafe_code)]

pub mod client;
pub mod daemon;
pub mod metrics;
pub mod proto;
pub mod save;
pub mod server;

// The paths the other crates name them by.
pub use client::{ctl, ifconfig, netstat};
pub use server::answer;
