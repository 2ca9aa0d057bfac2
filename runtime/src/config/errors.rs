//! Configuration errors as a user reads them: [`RunConfigError`] at file:line, all of a
//! file's in [`RunConfigErrors`], and serde's messages rewritten to name the field, what
//! was given, what is expected and the fix.

use std::fmt;
use std::path::PathBuf;

use polld_core::knobs::KnobError;

use super::keys::{DEVICE_KEYS, RUN_FILE_KEYS};
use super::locate::{field_line, key_line};
use super::{KnobSetting, RunConfig};

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

/// Every problem of a configuration file, in the order of its lines; never empty. A
/// mistake does not hide the next: each table, interface and knob is checked on its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunConfigErrors(Vec<RunConfigError>);

impl RunConfigErrors {
    /// `errors` in the order of their lines (`None` first: the file as a whole); `None`
    /// when there are none.
    pub fn new(mut errors: Vec<RunConfigError>) -> Option<RunConfigErrors> {
        errors.sort_by_key(|e| e.line);
        errors.dedup();
        (!errors.is_empty()).then_some(RunConfigErrors(errors))
    }

    pub fn iter(&self) -> std::slice::Iter<'_, RunConfigError> {
        self.0.iter()
    }

    pub fn into_vec(self) -> Vec<RunConfigError> {
        self.0
    }
}

impl From<RunConfigError> for RunConfigErrors {
    fn from(e: RunConfigError) -> RunConfigErrors {
        RunConfigErrors(vec![e])
    }
}

/// One problem a line.
impl fmt::Display for RunConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for RunConfigErrors {}

impl RunConfig {
    /// An error about a field such as `interfaces[1].queue`, at its line (or, for a field
    /// the file does not write, at the line of its table).
    pub fn error_at_field(&self, field: &str, message: String) -> RunConfigError {
        let line = self
            .source
            .parse::<toml_edit::ImDocument<String>>()
            .ok()
            .and_then(|doc| locate(&doc, &self.source, field));
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

    /// A `[knobs]` write the dataplane refused, at its line: the field, the problem and
    /// the fix; an unknown name with the nearest of `writable` (every writable name) or
    /// the writable names under its node.
    pub fn knob_error(
        &self,
        knob: &KnobSetting,
        e: &KnobError,
        writable: &[&str],
    ) -> RunConfigError {
        let name = &knob.name;
        let message = match e {
            KnobError::Unknown { .. } => {
                let (node, leaf) = name.rsplit_once('.').unwrap_or(("", name));
                let under: Vec<&str> = writable
                    .iter()
                    .copied()
                    .filter(|w| w.rsplit_once('.').is_some_and(|(n, _)| n == node))
                    .collect();
                // A leaf misspelt under its node, else a name misspelt anywhere.
                let leaves = under
                    .iter()
                    .filter_map(|w| w.rsplit_once('.').map(|(_, l)| l));
                let close = nearest(leaf, leaves)
                    .map(|l| format!("{node}.{l}"))
                    .or_else(|| {
                        let anywhere = under
                            .is_empty()
                            .then(|| nearest(name, writable.iter().copied()));
                        anywhere.flatten().map(str::to_string)
                    });
                let fix = match close {
                    Some(close) => format!("did you mean `{close}`?"),
                    None => match under.is_empty() {
                        true => "the writable knobs are listed in docs/knobs.md".to_string(),
                        false => format!("the knobs of {node} are {}", under.join(", ")),
                    },
                };
                format!("knobs.\"{name}\": there is no knob {name}; {fix}")
            }
            KnobError::ReadOnly { .. } => format!(
                "knobs.\"{name}\": {name} is read only (a counter or a state); remove it \
                 from [knobs]"
            ),
            KnobError::NotANumber {
                value, expected, ..
            } => format!("knobs.\"{name}\": {value:?} is not {expected}; write {expected}"),
            KnobError::Invalid { value, allowed, .. } => format!(
                "knobs.\"{name}\": {value} is out of range (allowed {allowed}); write a value \
                 in {allowed}"
            ),
        };
        RunConfigError {
            path: self.path.clone(),
            line: Some(knob.line),
            message,
        }
    }
}

/// The line of `field` in the file: its own, else its nearest table's or key's.
pub(super) fn locate(
    doc: &toml_edit::ImDocument<String>,
    source: &str,
    field: &str,
) -> Option<usize> {
    let last = field.rsplit('.').next().unwrap_or(field);
    let last = last.split('[').next().unwrap_or(last).trim_matches('"');
    field_line(doc, source, field).or_else(|| key_line(source, last))
}

/// The one of `candidates` nearest to `given`, if it is near enough to be what was meant:
/// the "did you mean" of every unknown key and knob.
pub(super) fn nearest<'a>(
    given: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|k| (strsim::levenshtein(k, given), k))
        .filter(|(d, k)| *d <= (k.len() / 3).max(2))
        .min()
        .map(|(_, k)| k)
}

/// An error about key `key` of `[[interfaces]]` entry `i`: the field, and the message
/// naming it.
pub(super) fn interface_error(i: usize, key: &str, why: String) -> (String, String) {
    let field = format!("interfaces[{i}].{key}");
    let message = format!("{field}: {why}");
    (field, message)
}

/// `value` deserialized as a `T` found at `prefix` (`interfaces[0]`, or "" for the top),
/// with every mistake serde finds in it: each key serde refuses is reported (the field
/// path and the message [`described`] gives), taken out, and the rest deserialized again,
/// until it passes (the `T` is returned) or a required key is missing.
pub(super) fn typed_all<T: serde::de::DeserializeOwned>(
    mut value: toml::Value,
    prefix: &str,
) -> (Option<T>, Vec<(String, String)>) {
    let mut problems = Vec::new();
    let mut removed: Vec<String> = Vec::new();
    loop {
        let e = match serde_path_to_error::deserialize(value.clone()) {
            Ok(t) => return (Some(t), problems),
            Err(e) => e,
        };
        let inner = e.path().to_string();
        let path = match (prefix, inner.as_str()) {
            (p, ".") => p.to_string(),
            ("", i) => i.to_string(),
            (p, i) if i.starts_with('[') => format!("{p}{i}"),
            (p, i) => format!("{p}.{i}"),
        };
        let message = e.inner().message().to_string();
        if let Some(key) = message.strip_prefix("missing field ") {
            let key = key.trim_matches('`');
            let missing = match inner.as_str() {
                "." => key.to_string(),
                table => format!("{table}.{key}"),
            };
            // A key taken out for its own mistake is not missing as well, nor one a
            // misspelt key was already reported for.
            let meant = format!("did you mean `{key}`?");
            let suggested = problems.iter().any(|(_, m)| m.contains(&meant));
            if !removed.contains(&missing) && !suggested {
                problems.push((path.clone(), described(&path, &message)));
            }
            return (None, problems);
        }
        problems.push((path.clone(), described(&path, &message)));
        let segments: Vec<&serde_path_to_error::Segment> = e.path().iter().collect();
        let Some(last_key) = segments
            .iter()
            .rposition(|s| matches!(s, serde_path_to_error::Segment::Map { .. }))
        else {
            return (None, problems);
        };
        if !remove_key(&mut value, &segments[..=last_key]) {
            return (None, problems);
        }
        removed.push(relative_path(&segments[..=last_key]));
    }
}

/// `segments` written as serde_path_to_error writes a path: `interfaces[0].name`.
fn relative_path(segments: &[&serde_path_to_error::Segment]) -> String {
    let mut out = String::new();
    for segment in segments {
        match segment {
            serde_path_to_error::Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            other if out.is_empty() => out.push_str(&other.to_string()),
            other => out.push_str(&format!(".{other}")),
        }
    }
    out
}

/// Takes out the key the path `segments` ends with (a map key); whether it was there.
fn remove_key(value: &mut toml::Value, segments: &[&serde_path_to_error::Segment]) -> bool {
    use serde_path_to_error::Segment;
    let Some((last, parents)) = segments.split_last() else {
        return false;
    };
    let mut at = value;
    for segment in parents {
        let next = match (segment, at) {
            (Segment::Map { key }, toml::Value::Table(t)) => t.get_mut(key),
            (Segment::Seq { index }, toml::Value::Array(a)) => a.get_mut(*index),
            _ => None,
        };
        let Some(next) = next else { return false };
        at = next;
    }
    match (last, at) {
        (Segment::Map { key }, toml::Value::Table(t)) => t.remove(key).is_some(),
        _ => false,
    }
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
        let nearest = nearest(key, valid.iter().map(String::as_str))
            .map(|k| format!("did you mean `{k}`? "))
            .unwrap_or_default();
        let field = match table {
            "" => key.to_string(),
            t => format!("{t}.{key}"),
        };
        return format!(
            "{field}: unknown key `{key}` {place}; {nearest}the valid keys are {}",
            valid.join(", ")
        );
    }
    if let Some(key) = message.strip_prefix("missing field ") {
        let key = key.trim_matches('`');
        let what = match key {
            "name" => "name = \"IFNAME\", the interface this entry is for".to_string(),
            k => format!("{k} = ..."),
        };
        let field = match path {
            "" | "." => key.to_string(),
            p => format!("{p}.{key}"),
        };
        return format!("{field}: `{key}` is missing; add {what}");
    }
    let leaf = path.rsplit('.').next().unwrap_or(path);
    let (leaf, element) = match leaf.split_once('[') {
        Some((k, _)) => (k, true),
        None => (leaf, false),
    };
    // What the key takes, and how to write it.
    let expectation = match (leaf, element) {
        ("cpu", _) | ("cpus", true) => Some((
            "a CPU number",
            "write one of the CPUs polld may run on: 0, 1, ...",
        )),
        ("cpus", false) => Some(("a list of CPU numbers", "write e.g. cpus = [0, 1]")),
        ("queue", _) | ("queues", true) => Some(("a receive queue number", "write 0, 1, ...")),
        ("queues", false) => Some((
            "a queue count or a list of queue numbers",
            "write queues = 2 or queues = [0, 1]",
        )),
        ("fanout", _) => Some(("a number of sockets", "write 2 or more")),
        ("mtu", _) => Some(("an MTU from 68 to 65535", "use 1500 for Ethernet")),
        _ => None,
    };
    let given = ["invalid value: ", "invalid type: "]
        .iter()
        .find_map(|p| message.strip_prefix(p))
        .and_then(|rest| rest.split_once(", expected "));
    match (given, expectation) {
        (Some((value, expected)), expectation) => {
            let table_for_list = value == "map" && expected == "a sequence";
            let string = value.starts_with("string");
            // `integer `-1``, `string "x"`: the value as written.
            let value = match value.split_once(['`', '"']) {
                Some((_, v)) if value.contains('`') => v.trim_end_matches('`').to_string(),
                Some((kind, _)) => value[kind.len()..].to_string(),
                None => value.to_string(),
            };
            let quoted_number = string && value.trim_matches('"').parse::<i64>().is_ok();
            let (expected, fix) = match expectation {
                Some((expected, fix)) => (expected.to_string(), fix.to_string()),
                None => {
                    let expected = plain_type(expected);
                    let fix = format!("write {expected}");
                    (expected, fix)
                }
            };
            let fix = if table_for_list {
                format!(
                    "a list of tables is written [[{leaf}]] (double brackets), once before \
                     each entry"
                )
            } else if quoted_number {
                "write the number without quotes".to_string()
            } else if expected == "a boolean" {
                "write true or false, without quotes".to_string()
            } else {
                fix
            };
            at(format!("{value} is not {expected}; {fix}"))
        }
        // An untagged enum (`queues`) says only that nothing matched.
        (None, Some((expected, fix))) if message.starts_with("data did not match") => {
            at(format!("not {expected}; {fix}"))
        }
        _ if message.contains("; ") => at(message.to_string()),
        _ if message.contains("address syntax") => at(format!(
            "{message}; write an IP address, e.g. \"10.0.2.2\" or \"2001:db8::2\""
        )),
        _ => match message.split_once(", expected ") {
            Some((problem, choices)) => at(format!("{problem}; write {choices}")),
            None => at(format!(
                "{message}; see docs/config.md for what `{leaf}` takes"
            )),
        },
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
        "a boolean" | "bool" => return "a boolean".to_string(),
        other => return other.to_string(),
    };
    format!("a whole number from 0 to {max}")
}
