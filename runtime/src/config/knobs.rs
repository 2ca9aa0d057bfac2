//! Reading `[knobs]`: each knob's name and value checked on its own (a quoted number, a
//! boolean, an unquoted dotted name, `[[knobs]]` each named with its fix), the profile
//! they apply over, and a `dev.IF.mode` knob that contradicts IF's `mode`.

use polld_core::knobs::PROFILE_KEY;
use polld_core::{Mode, Profile};

use super::locate::key_line;
use super::parse::{kind_of, Interfaces, Report};
use super::KnobSetting;

impl Report<'_> {
    /// `[knobs]` as a table: `[[knobs]]` (a list of tables) is refused, its tables read
    /// as one so that their knobs are checked too.
    pub(super) fn knobs_table(&mut self, value: toml::Value) -> toml::Table {
        match value {
            toml::Value::Table(t) => t,
            toml::Value::Array(items) => {
                self.at_field(
                    "knobs",
                    "knobs: [[knobs]] makes a list of tables, and [knobs] is one table of \
                     \"NAME\" = VALUE; write the header with single brackets: [knobs]"
                        .to_string(),
                );
                items
                    .into_iter()
                    .filter_map(|v| match v {
                        toml::Value::Table(t) => Some(t),
                        _ => None,
                    })
                    .flatten()
                    .collect()
            }
            other => {
                self.at_field(
                    "knobs",
                    format!(
                        "knobs: {} is not a table; write the header [knobs] on a line of its \
                         own, then one \"NAME\" = VALUE a line",
                        kind_of(&other)
                    ),
                );
                toml::Table::new()
            }
        }
    }

    /// The profile and the knob writes of `[knobs]`, in file order; each value that is
    /// not a number or a word, and each dotted name TOML read as tables, reported.
    pub(super) fn knobs(&mut self, table: toml::Table) -> (Profile, Vec<KnobSetting>) {
        let mut profile = Profile::default();
        let mut knobs = Vec::new();
        let mut flat = Vec::new();
        flatten(String::new(), toml::Value::Table(table), false, &mut flat);
        for (name, value, dotted) in flat {
            let line = key_line(self.source, &name);
            let field = format!("knobs.\"{name}\"");
            if dotted {
                let shown = match &value {
                    toml::Value::String(s) => format!("{s:?}"),
                    v => v.to_string(),
                };
                self.at_line(
                    line,
                    format!(
                        "{field}: the name is not quoted, so TOML reads its dots as tables; \
                         quote the dotted name: \"{name}\" = {shown}"
                    ),
                );
                continue;
            }
            if name == PROFILE_KEY {
                match value.as_str().and_then(Profile::named) {
                    Some(p) => profile = p,
                    None => {
                        let names: Vec<String> = Profile::ALL
                            .iter()
                            .map(|p| format!("\"{}\"", p.name()))
                            .collect();
                        self.at_line(
                            line,
                            format!(
                                "knobs.profile: {value} is not a profile; write profile = {}",
                                names.join(" or ")
                            ),
                        );
                    }
                }
                continue;
            }
            match knob_value(&name, &value) {
                Ok(value) => knobs.push(KnobSetting {
                    line: line.unwrap_or(0),
                    name,
                    value,
                }),
                Err(why) => self.at_line(line, format!("{field}: {why}")),
            }
        }
        // Apply in file order, as a user reading the file expects.
        knobs.sort_by_key(|k| k.line);
        (profile, knobs)
    }

    /// A `dev.IF.mode` knob that says otherwise than the `mode` of IF's entry.
    pub(super) fn mode_knobs(&mut self, interfaces: &Interfaces, knobs: &[KnobSetting]) {
        for k in knobs {
            let Some(ifname) = k
                .name
                .strip_prefix("dev.")
                .and_then(|rest| rest.strip_suffix(".mode"))
            else {
                continue;
            };
            let Some(d) = interfaces
                .devices
                .iter()
                .find(|d| d.name == ifname && interfaces.explicit_mode[d.entry])
            else {
                continue;
            };
            // A word that is no mode is refused by the knob itself.
            if k.value.parse::<Mode>().is_ok_and(|mode| mode != d.mode) {
                self.at_line(
                    Some(k.line),
                    format!(
                        "knobs.\"{}\": {:?} contradicts interfaces[{}].mode = \"{}\", and the \
                         knob is applied after it; keep one: remove the knob, or set the mode \
                         in [[interfaces]] only",
                        k.name,
                        k.value,
                        d.entry,
                        d.mode.name()
                    ),
                );
            }
        }
    }
}

/// The names and values of `[knobs]`, with whether a name was written unquoted with
/// dots (TOML then reads `kern.polling.hz = 1` as nested tables).
fn flatten(
    name: String,
    value: toml::Value,
    nested: bool,
    out: &mut Vec<(String, toml::Value, bool)>,
) {
    match value {
        toml::Value::Table(t) => {
            let inner = !name.is_empty();
            for (k, v) in t {
                let full = match inner {
                    true => format!("{name}.{k}"),
                    false => k,
                };
                flatten(full, v, inner, out);
            }
        }
        v => out.push((name, v, nested)),
    }
}

/// A `[knobs]` value as the knob takes it: an integer, or a word; anything else refused
/// with why and the fix.
fn knob_value(name: &str, value: &toml::Value) -> Result<String, String> {
    match value {
        toml::Value::Integer(n) => Ok(n.to_string()),
        toml::Value::String(s) if s.trim().parse::<i64>().is_ok() => Err(format!(
            "{s:?} is a string, and a number knob takes an integer; write it without quotes: \
             \"{name}\" = {}",
            s.trim()
        )),
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Float(f) => Err(format!(
            "{f} is fractional, and a knob takes an integer; write a whole number, e.g. \
             \"{name}\" = {}",
            f.round()
        )),
        toml::Value::Boolean(b) => Err(format!(
            "{b} is a boolean, and a knob takes an integer or a word; write \"{name}\" = {} \
             for {b}",
            u8::from(*b)
        )),
        other => Err(format!(
            "{} is not a number or a word; write e.g. \"{name}\" = 50",
            kind_of(other)
        )),
    }
}
