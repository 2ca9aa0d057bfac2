//! Configuration errors as a user reads them: [`RunConfigError`] at file:line, and
//! serde's messages rewritten to name the field, what was given, what is expected and
//! the fix.

use std::fmt;
use std::path::PathBuf;

use super::keys::{DEVICE_KEYS, RUN_FILE_KEYS};
use super::locate::{field_line, key_line};
use super::RunConfig;

/// A configuration problem, with its place in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunConfigError {
    pub path: PathBuf,
    /// 1-based; `None` when the problem is not on one line (a missing table).
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for RunConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.path.display(), self.message),
            None => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

impl std::error::Error for RunConfigError {}

impl RunConfigError {
    /// The message in its parts, as the messages are written: the field at fault (before
    /// the first `: `, when it is a field path), what is wrong, and the fix (after the
    /// first `; `).
    pub fn parts(&self) -> (Option<&str>, &str, Option<&str>) {
        let (field, rest) = match self.message.split_once(": ") {
            Some((field, rest)) if !field.contains(' ') => (Some(field), rest),
            _ => (None, self.message.as_str()),
        };
        match rest.split_once("; ") {
            Some((problem, fix)) => (field, problem, Some(fix)),
            None => (field, rest, None),
        }
    }
}

impl RunConfig {
    /// An error about a field such as `interfaces[1].queue`, at its line.
    pub fn error_at_field(&self, field: &str, message: String) -> RunConfigError {
        let line = self
            .source
            .parse::<toml_edit::ImDocument<String>>()
            .ok()
            .and_then(|doc| field_line(&doc, &self.source, field));
        RunConfigError {
            path: self.path.clone(),
            line,
            message,
        }
    }

    /// An error about the key `key` of this file, at its line.
    pub fn error_at_key(&self, key: &str, message: String) -> RunConfigError {
        RunConfigError {
            path: self.path.clone(),
            line: key_line(&self.source, key),
            message,
        }
    }
}

/// An error about key `key` of `[[interfaces]]` entry `i`: the field, and the message
/// naming it.
pub(super) fn interface_error(i: usize, key: &str, why: String) -> (String, String) {
    let field = format!("interfaces[{i}].{key}");
    let message = format!("{field}: {why}");
    (field, message)
}

/// `value` deserialized as a `T` found at `prefix` (`interfaces[0]`, or "" for the top):
/// on error, the field path and the message [`described`] gives.
pub(super) fn typed<T: serde::de::DeserializeOwned>(
    value: toml::Value,
    prefix: &str,
) -> Result<T, (String, String)> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let inner = e.path().to_string();
        let path = match (prefix, inner.as_str()) {
            (p, ".") => p.to_string(),
            ("", i) => i.to_string(),
            (p, i) if i.starts_with('[') => format!("{p}{i}"),
            (p, i) => format!("{p}.{i}"),
        };
        let message = described(&path, e.into_inner().message());
        (path, message)
    })
}

/// A serde error at `path` (`interfaces[0].cpu`) as a user reads it: the field, what was
/// given and what is expected; an unknown key with the valid keys of its table and the
/// nearest one; a missing key with what to add.
pub(super) fn described(path: &str, message: &str) -> String {
    let at = |text: String| match path {
        "" | "." => text,
        p => format!("{p}: {text}"),
    };
    let quoted = |text: &str| -> Vec<String> {
        text.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    };
    if let Some(rest) = message.strip_prefix("unknown field ") {
        let (key, expected) = rest.split_once(", expected").unwrap_or((rest, ""));
        let key = key.trim_matches('`');
        // serde puts an unknown key in the path of the table that has it.
        let table = path
            .strip_suffix(key)
            .map(|t| t.trim_end_matches('.'))
            .unwrap_or(path);
        // The keys serde lists are one part's; the other part of the table reads the rest.
        let others: &[&str] = match table.strip_prefix("interfaces[") {
            _ if table.is_empty() => &RUN_FILE_KEYS,
            Some(rest) if rest.ends_with(']') && !rest.contains('.') => &DEVICE_KEYS,
            _ => &[],
        };
        let mut valid = quoted(expected);
        valid.extend(others.iter().map(|k| k.to_string()));
        valid.sort();
        valid.dedup();
        let place = match table {
            "" => "at the top of the file".to_string(),
            t => format!("in {t}"),
        };
        let nearest = valid
            .iter()
            .map(|k| (strsim::levenshtein(k, key), k))
            .filter(|(d, k)| *d <= (k.len() / 3).max(2))
            .min()
            .map(|(_, k)| format!("did you mean `{k}`? "))
            .unwrap_or_default();
        return format!(
            "unknown key `{key}` {place}; {nearest}the valid keys are {}",
            valid.join(", ")
        );
    }
    if let Some(key) = message.strip_prefix("missing field ") {
        let key = key.trim_matches('`');
        let what = match key {
            "name" => "name = \"IFNAME\", the interface this entry is for".to_string(),
            k => format!("{k} = ..."),
        };
        return at(format!("`{key}` is missing; add {what}"));
    }
    let leaf = path.rsplit('.').next().unwrap_or(path);
    let (leaf, element) = match leaf.split_once('[') {
        Some((k, _)) => (k, true),
        None => (leaf, false),
    };
    let expectation = match (leaf, element) {
        ("cpu", _) | ("cpus", true) => Some("a CPU number (0, 1, ...: a CPU polld may run on)"),
        ("cpus", false) => Some("a list of CPU numbers, e.g. [0, 1]"),
        ("queue", _) | ("queues", true) => Some("a receive queue number (0, 1, ...)"),
        ("queues", false) => {
            Some("a queue count or a list of queue numbers (queues = 2 or [0, 1])")
        }
        ("fanout", _) => Some("a number of sockets (2 or more)"),
        ("mtu", _) => Some("an MTU from 68 to 65535"),
        _ => None,
    };
    let given = ["invalid value: ", "invalid type: "]
        .iter()
        .find_map(|p| message.strip_prefix(p))
        .and_then(|rest| rest.split_once(", expected "));
    match (given, expectation) {
        (Some((value, expected)), expectation) => {
            // `integer `-1``, `string "x"`: the value as written.
            let value = match value.split_once(['`', '"']) {
                Some((_, v)) if value.contains('`') => v.trim_end_matches('`').to_string(),
                Some((kind, _)) => value[kind.len()..].to_string(),
                None => value.to_string(),
            };
            let expected = expectation
                .map(str::to_string)
                .unwrap_or_else(|| plain_type(expected));
            at(format!("{value} is not {expected}"))
        }
        // An untagged enum (`queues`) says only that nothing matched.
        (None, Some(expected)) if message.starts_with("data did not match") => {
            at(format!("not {expected}"))
        }
        _ => at(message.to_string()),
    }
}

/// A serde expectation in words: `u16` as "a whole number from 0 to 65535".
fn plain_type(expected: &str) -> String {
    let max = match expected {
        "u8" => u64::from(u8::MAX),
        "u16" => u64::from(u16::MAX),
        "u32" => u64::from(u32::MAX),
        "u64" | "usize" => return "a whole number, 0 or more".to_string(),
        "i64" | "i32" => return "a whole number".to_string(),
        "a sequence" => return "a list [..]".to_string(),
        other => return other.to_string(),
    };
    format!("a whole number from 0 to {max}")
}
