//! `polld ctl --save`: writes a running polld's knobs and interface modes back into the
//! config file it was started with (`polld.config`), so that a restart comes up the same.
//!
//! As FreeBSD keeps `sysctl.conf` and `rc.conf`:
//! - every writable knob whose running value differs from its default (`polld.default.*`)
//!   goes into `[knobs]`; a knob the file already sets is updated to the running value and
//!   kept even when that is the default, because the user wrote it there;
//! - each interface's mode goes into the `mode` key of its `[[interfaces]]` entry (an
//!   absent `mode` means `interrupt`, and stays absent while the mode is `interrupt`);
//! - `kern.polling.enable` is a view of those modes, applied after them at start: it is
//!   never saved, and removed from `[knobs]` if the file sets it, so that it cannot
//!   override the saved modes.
//!
//! The file is edited with `toml_edit`: comments, blank lines, key order and formatting of
//! everything not changed are kept, and so are the decorations of changed values. If the
//! file's order of `kern.polling.*` knobs would not reproduce the running values when
//! applied at start (`each_burst` is bounded by `burst_max`, `reg_frac` by `hz`), the
//! `[knobs]` keys are put in the daemon's listing order, which does.
//!
//! The new text is written atomically ([`StagedFile`]): a temporary file in the same
//! directory, fsync, rename over the old file, fsync of the directory. A failure at any
//! step before the rename leaves the old file as it was and removes the temporary one.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use polld_core::dataplane::{IfSettings, DEV_NODE, ENABLE};
use polld_core::knobs::PROFILE_KEY;
use polld_core::poll::NODE;
use polld_core::{Kind, Poller, Profile, Reading, SysctlEntry};
use serde::{Deserialize, Serialize};
use toml_edit::{DocumentMut, Item, Table, Value};

use crate::daemon::{daemon_entry, DEFAULT_PREFIX};
use crate::server::answer::typed;

/// What a save wrote (or found already there).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SaveReport {
    /// The config file.
    pub path: PathBuf,
    /// `[knobs]` entries added or changed: name and new value.
    pub knobs: Vec<(String, String)>,
    /// Interface modes changed: interface and mode.
    pub modes: Vec<(String, String)>,
    /// The `[knobs]` keys were put in the daemon's order so that they apply as running.
    pub reordered: bool,
    /// `[knobs]` entries removed because the saved modes hold them.
    #[serde(default)]
    pub removed: Vec<String>,
    /// The file was rewritten (false: it already held the running state).
    pub written: bool,
}

/// Why a save failed; the file is unchanged in every case.
#[derive(Debug)]
pub enum SaveError {
    /// The daemon does not report `polld.config` (another version of polld).
    NoConfigPath,
    /// The file is not valid TOML, or `[knobs]`/`[[interfaces]]` is not a table.
    Parse { path: PathBuf, message: String },
    /// An interface the daemon runs has no `[[interfaces]]` entry with its name.
    MissingInterface { path: PathBuf, ifname: String },
    /// The saved knobs would not apply as running, in any order.
    Unreproducible { path: PathBuf, message: String },
    /// Reading or writing the file failed; `action` says which step.
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

impl fmt::Display for SaveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SaveError::NoConfigPath => f.write_str(
                "this polld does not report its config file (polld.config): \
                 it is another version than this client; nothing saved",
            ),
            SaveError::Parse { path, message } => write!(
                f,
                "cannot edit {}: {message}; fix the file by hand, nothing was saved",
                path.display()
            ),
            SaveError::MissingInterface { path, ifname } => write!(
                f,
                "{} has no [[interfaces]] entry with name = {ifname:?}, which polld runs: \
                 was the file changed since polld started? nothing saved",
                path.display()
            ),
            SaveError::Unreproducible { path, message } => write!(
                f,
                "the knobs would not apply at start from {}: {message}; nothing saved",
                path.display()
            ),
            SaveError::Io {
                action,
                path,
                source,
            } => write!(
                f,
                "cannot {action} {}: {source}; the file is unchanged",
                path.display()
            ),
        }
    }
}

impl std::error::Error for SaveError {}

/// The running state to save, from a [`crate::proto::Request::List`] answer of everything,
/// typed by the entries' declarations: knobs are saved, counters and gauges are not.
struct Running {
    /// Knobs to persist (not interface modes), in the daemon's order: name and value.
    knobs: Vec<(String, String)>,
    /// Knobs at their defaults, in the daemon's order (updated if in the file).
    at_default: Vec<(String, String)>,
    /// Interface and mode, in the daemon's order.
    modes: Vec<(String, String)>,
}

impl Running {
    fn from_entries(entries: &[SysctlEntry]) -> Running {
        let readings: Vec<Reading> = typed(entries.iter().cloned());
        let default_of = |name: &str| {
            readings
                .iter()
                .find(|r| {
                    r.name()
                        .strip_prefix(DEFAULT_PREFIX)
                        .is_some_and(|n| n == name)
                })
                .map(|r| r.value.to_string())
        };
        let mut running = Running {
            knobs: Vec::new(),
            at_default: Vec::new(),
            modes: Vec::new(),
        };
        for r in readings.iter().filter(|r| r.kind == Kind::Knob) {
            let (name, value) = (r.name(), r.value.to_string());
            if name == ENABLE {
                continue;
            }
            match r
                .node
                .strip_prefix(DEV_NODE)
                .and_then(|n| n.strip_prefix('.'))
            {
                Some(ifname) if r.leaf == IfSettings::MODE.name => {
                    running.modes.push((ifname.into(), value))
                }
                _ if default_of(&name).as_ref() == Some(&value) => {
                    running.at_default.push((name, value))
                }
                _ => running.knobs.push((name, value)),
            }
        }
        running
    }

    /// Where `name` comes in the daemon's listing (for ordering `[knobs]`).
    /// Where `name` goes in `[knobs]`: the profile first, then the knobs in the running
    /// order, then the rest.
    fn rank(&self, name: &str) -> usize {
        if name == PROFILE_KEY {
            return 0;
        }
        self.knobs
            .iter()
            .chain(&self.at_default)
            .position(|(n, _)| n == name)
            .map_or(usize::MAX, |i| i + 1)
    }
}

/// How a config value reads as a knob value (`true` is 1, as `polld run` reads it).
fn knob_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.value().clone()),
        Value::Integer(n) => Some(n.value().to_string()),
        Value::Boolean(b) => Some((*b.value() as u8).to_string()),
        _ => None,
    }
}

/// The TOML value for a knob: an integer when it is one, else a string.
fn knob_value(text: &str) -> Value {
    match text.parse::<i64>() {
        Ok(n) => Value::from(n),
        Err(_) => Value::from(text),
    }
}

/// Sets `table[key]` to `value`, keeping the old value's comments and spacing.
fn set_keeping_decor(table: &mut Table, key: &str, mut value: Value) {
    if let Some(old) = table.get(key).and_then(Item::as_value) {
        *value.decor_mut() = old.decor().clone();
    }
    table.insert(key, Item::Value(value));
}

/// Applies the file's `kern.polling.*` knobs in its order to a fresh poller on the file's
/// profile and says which one does not end as running, if any.
fn check_apply_order(knobs: &Table, running: &Running) -> Result<(), String> {
    let profile = knobs
        .get(PROFILE_KEY)
        .and_then(Item::as_str)
        .and_then(Profile::named)
        .unwrap_or_default();
    let mut poller = Poller::new(profile.knobs());
    let mut applied = Vec::new();
    for (name, item) in knobs.iter() {
        let (Some(short), Some(value)) = (
            name.strip_prefix(NODE)
                .and_then(|rest| rest.strip_prefix('.')),
            item.as_value().and_then(knob_text),
        ) else {
            continue;
        };
        poller
            .set_knob(name, &value)
            .map_err(|e| format!("{name} = {value}: {e}"))?;
        applied.push((name.to_string(), short.to_string()));
    }
    for (name, short) in applied {
        let now = poller.get(&short).unwrap_or_default();
        let wanted = running
            .knobs
            .iter()
            .chain(&running.at_default)
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str());
        if let Some(wanted) = wanted.filter(|w| *w != now) {
            return Err(format!(
                "{name} would be {now} instead of {wanted} after the later knobs"
            ));
        }
    }
    Ok(())
}

/// Edits the config `text` (of the file at `path`) to hold the running state in
/// `entries`. Returns the new text and what changed; the text is unchanged when the file
/// already holds that state.
pub fn update_config(
    path: &Path,
    text: &str,
    entries: &[SysctlEntry],
) -> Result<(String, SaveReport), SaveError> {
    let parse_err = |message: String| SaveError::Parse {
        path: path.to_path_buf(),
        message,
    };
    let mut doc: DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| parse_err(e.message().to_string()))?;
    let running = Running::from_entries(entries);
    let mut report = SaveReport {
        path: path.to_path_buf(),
        ..SaveReport::default()
    };

    let interfaces = doc
        .get_mut("interfaces")
        .and_then(Item::as_array_of_tables_mut)
        .ok_or_else(|| parse_err("it has no [[interfaces]] entries".to_string()))?;
    for (ifname, mode) in &running.modes {
        let (ifname, mode) = (ifname.as_str(), mode.as_str());
        let entry = interfaces
            .iter_mut()
            .find(|t| t.get("name").and_then(Item::as_str) == Some(ifname))
            .ok_or_else(|| SaveError::MissingInterface {
                path: path.to_path_buf(),
                ifname: ifname.to_string(),
            })?;
        let in_file = entry
            .get("mode")
            .and_then(Item::as_str)
            .unwrap_or("interrupt");
        if in_file != mode {
            set_keeping_decor(entry, "mode", Value::from(mode));
            report.modes.push((ifname.to_string(), mode.to_string()));
        }
    }

    let in_file = doc.get("knobs").is_some();
    let knobs = doc
        .entry("knobs")
        .or_insert_with(|| Item::Table(Table::new()))
        .as_table_mut()
        .ok_or_else(|| parse_err("knobs is not a table; write it as [knobs]".to_string()))?;
    let update = |knobs: &mut Table, name: &str, value: &str, report: &mut SaveReport| {
        let current = knobs.get(name).and_then(Item::as_value).and_then(knob_text);
        if current.as_deref() != Some(value) {
            set_keeping_decor(knobs, name, knob_value(value));
            report.knobs.push((name.to_string(), value.to_string()));
        }
    };
    if knobs.remove(ENABLE).is_some() {
        report.removed.push(ENABLE.to_string());
    }
    for (name, value) in &running.knobs {
        update(knobs, name, value, &mut report);
    }
    for (name, value) in &running.at_default {
        if knobs.contains_key(name) {
            update(knobs, name, value, &mut report);
        }
    }
    if check_apply_order(knobs, &running).is_err() {
        knobs.sort_values_by(|a, _, b, _| running.rank(a).cmp(&running.rank(b)));
        report.reordered = true;
        check_apply_order(knobs, &running).map_err(|message| SaveError::Unreproducible {
            path: path.to_path_buf(),
            message,
        })?;
    }
    let empty_new_table = !in_file && knobs.is_empty();
    if empty_new_table {
        doc.remove("knobs");
    }
    let changed = !report.knobs.is_empty()
        || !report.modes.is_empty()
        || !report.removed.is_empty()
        || report.reordered;
    let text = if changed {
        doc.to_string()
    } else {
        text.to_string()
    };
    Ok((text, report))
}

/// A new version of a file, written beside it and put in its place by [`StagedFile::commit`].
/// Dropped without a commit, it removes itself and the old file stays as it was.
pub struct StagedFile {
    target: PathBuf,
    temp: PathBuf,
    file: File,
    /// Renamed into place: nothing to clean up.
    committed: bool,
}

impl StagedFile {
    /// Creates the temporary file next to `target`, with `target`'s mode and owner.
    pub fn create(target: &Path) -> Result<StagedFile, SaveError> {
        let io_err = |action, source| SaveError::Io {
            action,
            path: target.to_path_buf(),
            source,
        };
        let meta = fs::metadata(target).map_err(|e| io_err("inspect", e))?;
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let temp = target.with_file_name(format!(".{name}.polld-save-{}", std::process::id()));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(meta.mode() & 0o7777)
            .open(&temp)
            .map_err(|e| io_err("create a temporary file beside", e))?;
        let staged = StagedFile {
            target: target.to_path_buf(),
            temp,
            file,
            committed: false,
        };
        // The umask may have narrowed the mode; the owner matters when root saves a
        // user's file. Failing to set the owner leaves it ours, which still works.
        staged
            .file
            .set_permissions(fs::Permissions::from_mode(meta.mode() & 0o7777))
            .map_err(|e| io_err("set the mode of the temporary file for", e))?;
        let _ = std::os::unix::fs::fchown(&staged.file, Some(meta.uid()), Some(meta.gid()));
        Ok(staged)
    }

    /// Appends `bytes` to the new version.
    pub fn write_all(&mut self, bytes: &[u8]) -> Result<(), SaveError> {
        self.file.write_all(bytes).map_err(|source| SaveError::Io {
            action: "write the new version of",
            path: self.target.clone(),
            source,
        })
    }

    /// Flushes the new version to disk and renames it over the target, then flushes the
    /// directory so that the rename itself survives a crash.
    pub fn commit(mut self) -> Result<(), SaveError> {
        let io_err = |action, path: &Path, source| SaveError::Io {
            action,
            path: path.to_path_buf(),
            source,
        };
        self.file
            .sync_all()
            .map_err(|e| io_err("flush the new version of", &self.target, e))?;
        fs::rename(&self.temp, &self.target)
            .map_err(|e| io_err("put the new version in place of", &self.target, e))?;
        self.committed = true;
        if let Some(dir) = self.target.parent().filter(|d| !d.as_os_str().is_empty()) {
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| io_err("flush the directory of", &self.target, e))?;
        }
        Ok(())
    }
}

impl Drop for StagedFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_file(&self.temp);
        }
    }
}

/// Replaces the file at `path` with `contents`, atomically.
pub fn write_atomically(path: &Path, contents: &[u8]) -> Result<(), SaveError> {
    let mut staged = StagedFile::create(path)?;
    staged.write_all(contents)?;
    staged.commit()
}

/// Saves the running state in `entries` (a List of everything) into the config file the
/// daemon reports.
pub fn save(entries: &[SysctlEntry]) -> Result<SaveReport, SaveError> {
    let path = entries
        .iter()
        .find(|e| e.name == daemon_entry::CONFIG)
        .map(|e| PathBuf::from(&e.value))
        .ok_or(SaveError::NoConfigPath)?;
    let text = fs::read_to_string(&path).map_err(|source| SaveError::Io {
        action: "read",
        path: path.clone(),
        source,
    })?;
    let (new_text, mut report) = update_config(&path, &text, entries)?;
    if new_text != text {
        write_atomically(&path, new_text.as_bytes())?;
        report.written = true;
    }
    Ok(report)
}
