//! Why `polld run` could not start or stopped with an error.

use std::fmt;

use crate::caps;
use crate::config::RunConfigErrors;

/// Why `polld run` could not start or stopped with an error.
#[derive(Debug)]
pub enum RunError {
    /// Every mistake found in the configuration file, each at its line.
    Config(RunConfigErrors),
    Privileges(caps::MissingCaps),
    /// Anything else during set-up, with what was being done.
    Setup(String),
    Io(std::io::Error),
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Config(e) => write!(f, "{e}"),
            RunError::Privileges(e) => write!(f, "{e}"),
            RunError::Setup(s) => f.write_str(s),
            RunError::Io(e) => write!(f, "poll loop: {e}"),
        }
    }
}

impl std::error::Error for RunError {}
