//! Why a write of an entry was refused, and the parsing and range checks every
//! declaration's validation shares. A refusal names the entry, the value and what it
//! allows.

use std::fmt;

/// Why a write of an entry (a knob) was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KnobError {
    /// No such knob.
    Unknown { name: String },
    /// The knob can be read but not written.
    ReadOnly { name: String },
    /// Not a number (or not one of the allowed words).
    NotANumber {
        name: String,
        value: String,
        expected: String,
    },
    /// Out of range.
    Invalid {
        name: String,
        value: String,
        allowed: String,
    },
}

impl fmt::Display for KnobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KnobError::Unknown { name } => write!(
                f,
                "unknown oid '{name}': list the knobs with `polld ctl -a`"
            ),
            KnobError::ReadOnly { name } => {
                write!(f, "oid '{name}' is read only; nothing changed")
            }
            KnobError::NotANumber {
                name,
                value,
                expected,
            } => write!(
                f,
                "{name}: invalid value '{value}', expected {expected}; nothing changed"
            ),
            KnobError::Invalid {
                name,
                value,
                allowed,
            } => write!(
                f,
                "{name}: {value} is out of range (allowed {allowed}); nothing changed"
            ),
        }
    }
}

impl std::error::Error for KnobError {}

/// Parses an integer value written to entry `name`, naming it on failure.
pub fn parse_int(name: &str, value: &str) -> Result<i64, KnobError> {
    value
        .trim()
        .parse::<i64>()
        .map_err(|_| KnobError::NotANumber {
            name: name.to_string(),
            value: value.to_string(),
            expected: "an integer".to_string(),
        })
}

/// Checks `lo..=hi`, returning the value or an error naming the knob and the range.
pub fn within(name: &str, v: i64, lo: i64, hi: i64) -> Result<i64, KnobError> {
    if v < lo || v > hi {
        return Err(KnobError::Invalid {
            name: name.to_string(),
            value: v.to_string(),
            allowed: format!("{lo}..{hi}"),
        });
    }
    Ok(v)
}

/// [`within`] for a u32 knob (every bound passed is within u32).
pub fn in_range(name: &str, v: i64, lo: i64, hi: i64) -> Result<u32, KnobError> {
    within(name, v, lo, hi).map(|v| v as u32)
}
