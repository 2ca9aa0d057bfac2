//! polld-control: runtime control of a running polld over a Unix socket.
//!
//! - [`proto`]: the messages (one JSON object per line each way);
pub mod proto;
