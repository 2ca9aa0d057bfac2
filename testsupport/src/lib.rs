//! What polld's tests share across crates:
//! - [`skip`]: a test that cannot run here (not root, one CPU, no guest packages) skips
//!   saying why, and fails instead under CI;
//! - [`eventually`](mod@eventually): wait for a condition with a deadline and a message
//!   naming what never came, instead of a sleep;
//! - [`config`]: `polld run` config files built by key, serialised as TOML, or a file
//!   written elsewhere changed by key;
//! - [`device`]: [`TestDevice`], a device in memory the test fills, reads back and makes
//!   fail.
//!
//! The conservation check is the dataplane's own ([`polld_core::IfCounters::unaccounted`],
//! and on counters by name `unaccounted_named`), not a test's copy.

#![forbid(unsafe_code)]

pub mod config;
pub mod device;
pub mod eventually;
pub mod skip;

pub use config::{ConfigFile, Edit, Interface};
pub use device::TestDevice;
pub use eventually::eventually;
pub use polld_middleware::FaultConfig;
pub use skip::{root_or_skip, skip_unless, REQUIRE_ROOT_VAR};
