//! polld-control: runtime control of a running polld over a Unix socket.
//!
//! - [`proto`]: the messages (one JSON object per line each way);
//! - [`server`]: the socket server thread of `polld run` and the [`server::Inbox`] its
//!   poll thread answers from, without ever blocking;
//! - [`answer`]: how a daemon answers the requests from its [`polld_core::Dataplane`];
//! - [`client`]: one request/response exchange, with errors that say what to do;
//! - [`ctl`]: `polld ctl`, sysctl-like reads and writes of the knobs and counters;
//! - [`ifconfig`]: `polld ifconfig`, the interfaces and their modes;
//! - [`save`]: `polld ctl --save`, the running knobs and modes written back into the
//!   config file, atomically and keeping its comments;
//! - [`metrics`]: `GET /metrics` in the Prometheus text format, on its own thread.

#![forbid(unsafe_code)]

pub mod answer;
pub mod client;
pub mod ctl;
pub mod ifconfig;
pub mod metrics;
pub mod proto;
pub mod save;
pub mod server;
mod wait;
