//! One declaration per sysctl entry: the Rust counterpart of FreeBSD's `SYSCTL_UINT` /
//! `SYSCTL_PROC` written next to the variable it exports (docs/algorithm.md).
//!
//! Every entry polld lists, serves at `/metrics`, shows in `polld stat` and documents in
//! docs/ is declared once, as an [`Oid`] constant: its name under its node, its
//! description, its [`Kind`] (a knob you write, a counter that only grows, a gauge that
//! goes up and down), how to read it, for a knob how to validate and store a write, and
//! how `/metrics` serves it ([`Metric`]). Two macros write them, so that a name is
//! written once:
//! - [`crate::sysctl_struct!`] declares a struct whose fields are entries, each field with its
//!   default and its oid on one line;
//! - [`crate::sysctl_oids!`] declares entries computed from a value (a table's length, a view of
//!   other state, a time account), and for a node of fixed name a module of their full
//!   names (`polld.work_ns`), the constants the tools read them by.
//!
//! Both collect the oids in a list, in declaration order. A set of entries with one leaf
//! per key (`drops.<reason>`) is declared once as a [`Family`].
//!
//! Oids name an entry relative to a *node*, never absolutely: the same table hangs under
//! `kern.polling`, under `net.ifpoll.0.rx`, or under `dev.veth1`, so per-interface and
//! per-CPU names need nothing but the node's name. Listing ([`read`]), writing ([`write()`]),
//! the control socket's typed snapshot ([`Reading`]), the Prometheus names and types and
//! `polld ctl --save` all go through these declarations.

use std::fmt;

use serde::{Deserialize, Serialize};

mod error;

pub use error::{in_range, parse_int, within, KnobError};

/// What an entry is, for people and for Prometheus.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Writable: a setting (a gauge to Prometheus).
    Knob,
    /// Read-only, only ever grows: events since start.
    Counter,
    /// Read-only, goes up and down: a level or a state.
    Gauge,
}

/// An entry's value: a number, or a word such as `classic` or `polling`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Value {
    Int(i64),
    Word(String),
}

impl Value {
    /// The number, if it is one.
    pub fn int(&self) -> Option<i64> {
        match self {
            Value::Int(n) => Some(*n),
            Value::Word(_) => None,
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(n) => n.fmt(f),
            Value::Word(w) => f.write_str(w),
        }
    }
}

impl From<i64> for Value {
    fn from(n: i64) -> Value {
        Value::Int(n)
    }
}

impl From<u32> for Value {
    fn from(n: u32) -> Value {
        Value::Int(n.into())
    }
}

impl From<u64> for Value {
    /// Counters in ns reach i64::MAX after 292 years; saturate rather than wrap.
    fn from(n: u64) -> Value {
        Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }
}

impl From<usize> for Value {
    fn from(n: usize) -> Value {
        Value::from(n as u64)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Int(b.into())
    }
}

impl From<&str> for Value {
    fn from(w: &str) -> Value {
        Value::Word(w.to_string())
    }
}

impl From<String> for Value {
    fn from(w: String) -> Value {
        Value::Word(w)
    }
}

/// How a knob takes a write. Every refusal names the entry and what it allows, and
/// changes nothing.
pub enum Write<T> {
    ReadOnly,
    /// An integer within `range(current)` (inclusive; a bound may depend on another knob).
    Int {
        range: fn(&T) -> (i64, i64),
        store: fn(&mut T, i64),
    },
    /// One of `words`, stored by its index.
    Word {
        words: &'static [&'static str],
        store: fn(&mut T, usize),
    },
    /// A handler of its own (`SYSCTL_PROC`): gets the full name and the text written;
    /// `allowed` says for people what it takes.
    Proc {
        handler: fn(&mut T, &str, &str) -> Result<(), KnobError>,
        allowed: fn(&T) -> String,
    },
}

impl<T> Write<T> {
    /// Validates `value` for the entry `name` (full) of `of` and stores it, or refuses it
    /// naming the entry and what it allows.
    pub fn apply(&self, of: &mut T, name: &str, value: &str) -> Result<(), KnobError> {
        match self {
            Write::ReadOnly => Err(KnobError::ReadOnly {
                name: name.to_string(),
            }),
            Write::Int { range, store } => {
                let (lo, hi) = range(of);
                let v = within(name, parse_int(name, value)?, lo, hi)?;
                store(of, v);
                Ok(())
            }
            Write::Word { words, store } => {
                let i = words
                    .iter()
                    .position(|w| *w == value.trim())
                    .ok_or_else(|| {
                        let quoted: Vec<String> = words.iter().map(|w| format!("`{w}`")).collect();
                        KnobError::NotANumber {
                            name: name.to_string(),
                            value: value.to_string(),
                            expected: quoted.join(" or "),
                        }
                    })?;
                store(of, i);
                Ok(())
            }
            Write::Proc { handler, .. } => handler(of, name, value),
        }
    }

    /// What a write may give, for people: `0 to 99`, `classic or time`; `None` for a
    /// read-only entry.
    pub fn allowed(&self, of: &T) -> Option<String> {
        match self {
            Write::Int { range, .. } => Some(match range(of) {
                (i64::MIN, i64::MAX) => "any integer".to_string(),
                (lo, hi) => format!("{lo} to {hi}"),
            }),
            Write::Word { words, .. } => Some(words.join(" or ")),
            Write::Proc { allowed, .. } => Some(allowed(of)),
            Write::ReadOnly => None,
        }
    }
}

/// How `/metrics` serves an entry, beyond what its node and [`Kind`] say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Named by its node's rule (`dev.IF.rx_packets` is
    /// `polld_interface_rx_packets_total{interface="IF"}`); a word is one sample labelled
    /// `value="word"`.
    ByNode,
    /// Named by its node's rule; a word is one sample labelled `label="word"`.
    Labelled(&'static str),
    /// A gauge of its own name.
    Named(&'static str),
    /// A time in ns, served in seconds as the counter `name`, with its own `help`.
    Seconds {
        name: &'static str,
        help: &'static str,
    },
    /// Not served (a path, a process id, a clock).
    Hidden,
}

/// One entry of a `T`, named relative to the node `T` hangs under.
pub struct Oid<T> {
    /// The name under the node: `burst_max`.
    pub name: &'static str,
    pub descr: &'static str,
    pub kind: Kind,
    pub get: fn(&T) -> Value,
    pub write: Write<T>,
    pub metric: Metric,
}

impl<T> Oid<T> {
    /// The oid named `leaf` among `oids`.
    pub fn find_leaf<'o>(oids: &'o [Oid<T>], leaf: &str) -> Option<&'o Oid<T>> {
        oids.iter().find(|oid| oid.name == leaf)
    }
}

/// A set of read-only entries with one leaf per key, `<name>.<key>`: the drops by reason
/// (`dev.IF.drops.no_route`), declared once for all its keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Family {
    /// The leaves' common head: `drops`.
    pub name: &'static str,
    pub descr: &'static str,
    pub kind: Kind,
    /// The label `/metrics` gives the key: `reason`.
    pub label: &'static str,
}

impl Family {
    /// The entry of key `key` under `node`.
    pub fn reading(&self, node: &str, key: &str, value: impl Into<Value>) -> Reading {
        Reading {
            node: node.to_string(),
            leaf: format!("{}.{key}", self.name),
            kind: self.kind,
            value: value.into(),
            descr: self.descr.to_string(),
            allowed: None,
        }
    }

    /// The key of `leaf` if it is one of this family's: `no_route` of `drops.no_route`.
    pub fn key<'l>(&self, leaf: &'l str) -> Option<&'l str> {
        leaf.strip_prefix(self.name)?.strip_prefix('.')
    }
}

/// One entry read, typed: what the control socket's snapshot carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reading {
    /// The node it hangs under: `kern.polling`, `dev.veth1`, `net.ifpoll.0.rx`.
    pub node: String,
    /// Its name under the node: `burst_max`, `drops.ttl_exceeded`.
    pub leaf: String,
    pub kind: Kind,
    pub value: Value,
    pub descr: String,
    /// For a knob, what a write may give ([`Write::allowed`]), as it stands now (a bound
    /// may depend on another knob).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed: Option<String>,
}

impl Reading {
    /// The full name, `node.leaf`.
    pub fn name(&self) -> String {
        format!("{}.{}", self.node, self.leaf)
    }
}

/// One entry as text, as `polld ctl -a` lists it: full name, value, description, and
/// whether it can be written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SysctlEntry {
    pub name: String,
    pub value: String,
    pub descr: String,
    pub writable: bool,
}

impl From<Reading> for SysctlEntry {
    fn from(r: Reading) -> SysctlEntry {
        SysctlEntry {
            name: r.name(),
            value: r.value.to_string(),
            descr: r.descr,
            writable: r.kind == Kind::Knob,
        }
    }
}

/// Every entry of `of` under `node`, in declaration order.
pub fn read<'a, T>(
    node: &'a str,
    of: &'a T,
    oids: &'a [Oid<T>],
) -> impl Iterator<Item = Reading> + 'a {
    oids.iter().map(move |oid| Reading {
        node: node.to_string(),
        leaf: oid.name.to_string(),
        kind: oid.kind,
        value: (oid.get)(of),
        descr: oid.descr.to_string(),
        allowed: oid.write.allowed(of),
    })
}

/// The oid `name` (full, `node.leaf`) refers to, if it is one of `oids` under `node`.
pub fn find<'o, T>(node: &str, oids: &'o [Oid<T>], name: &str) -> Option<&'o Oid<T>> {
    let leaf = name.strip_prefix(node)?.strip_prefix('.')?;
    Oid::find_leaf(oids, leaf)
}

/// Writes `name` (full, `node.leaf`) of `of`: `None` when no oid of `oids` has that name,
/// else the write's outcome (a read-only entry is refused as such).
pub fn write<T>(
    node: &str,
    of: &mut T,
    oids: &[Oid<T>],
    name: &str,
    value: &str,
) -> Option<Result<(), KnobError>> {
    let oid = find(node, oids, name)?;
    Some(oid.write.apply(of, name, value))
}

/// Declares a struct of sysctl entries: each field with its default, the name of its oid
/// constant, its kind, description and (for a knob) how it takes writes, on one line. A
/// field with only a default (a table of counters by reason, say) has no oid of its own.
///
/// ```ignore
/// sysctl_struct! {
///     pub struct Knobs {
///         /// `kern.polling.user_frac`: percent of each tick left to other work.
///         user_frac: u32 = 50, USER_FRAC: Knob "Desired user fraction of cpu time",
///             Write::Int { range: |_| (0, 99), store: |k, v| k.user_frac = v as u32 };
///     }
/// }
/// ```
///
/// gives `Knobs { pub user_frac: u32 }`, its `Default` (50), `Knobs::USER_FRAC` (the oid
/// `user_frac`) and `Knobs::OIDS` (every oid, in field order).
#[macro_export]
macro_rules! sysctl_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $(
                $(#[$fmeta:meta])*
                $field:ident: $ty:ty = $default:expr
                $(, $oid:ident: $kind:ident $descr:literal $(, $write:expr)?)?;
            )*
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl Default for $name {
            fn default() -> Self {
                $name { $( $field: $default, )* }
            }
        }

        impl $name {
            $($(
                #[doc = $descr]
                pub const $oid: $crate::sysctl::Oid<$name> = $crate::sysctl::Oid {
                    name: stringify!($field),
                    descr: $descr,
                    kind: $crate::sysctl::Kind::$kind,
                    get: |s: &$name| $crate::sysctl::Value::from(s.$field),
                    write: $crate::sysctl_struct!(@write $($write)?),
                    metric: $crate::sysctl::Metric::ByNode,
                };
            )?)*
            /// Every entry of the struct, in field order.
            pub const OIDS: &'static [$crate::sysctl::Oid<$name>] = &[$($( $name::$oid, )?)*];
        }
    };
    (@write) => { $crate::sysctl::Write::ReadOnly };
    (@write $write:expr) => { $write };
}

/// Declares entries computed from a value of `T` rather than stored in a field: each with
/// the name of its oid constant, its leaf, kind, description and how it is read, then, as
/// needed, how it takes writes (`write`, else read-only) and how `/metrics` serves it
/// (`metric`, else [`Metric::ByNode`]). The oids are collected in the list named after
/// the type (documented by the comment above `impl`), in order. Given `names MODULE under "node"`, also a module of their full
/// names, for entries whose node has a fixed name.
///
/// ```ignore
/// sysctl_oids! {
///     impl DaemonStatus: OIDS, names daemon_entry under "polld" {
///         /// Time in device work, in ns.
///         WORK_NS = "work_ns": Counter "Time in device work, ns", |d| Value::from(d.work_ns),
///             metric Metric::Seconds { name: "polld_device_work_seconds_total", help: "..." };
///     }
/// }
/// ```
///
/// gives `DaemonStatus::WORK_NS` (the oid `work_ns`), `DaemonStatus::OIDS`, and
/// `daemon_entry::WORK_NS == "polld.work_ns"`, `daemon_entry::NODE == "polld"`. A generic
/// type names its parameters after its name: `impl Dataplane<D: Device, S: PacketStage>`.
#[macro_export]
macro_rules! sysctl_oids {
    (
        $(#[$lmeta:meta])*
        impl $t:ident $(<$($g:ident $(: $bound:path)?),*>)? : $list:ident,
            names $names:ident under $node:literal {
            $(
                $(#[$meta:meta])*
                $oid:ident = $name:literal: $kind:ident $descr:literal, $get:expr
                    $(, write $write:expr)? $(, metric $metric:expr)?;
            )*
        }
    ) => {
        $crate::sysctl_oids! {
            $(#[$lmeta])*
            impl $t $(<$($g $(: $bound)?),*>)? : $list {
                $(
                    $(#[$meta])*
                    $oid = $name: $kind $descr, $get $(, write $write)? $(, metric $metric)?;
                )*
            }
        }

        #[doc = concat!("The full names of the entries under `", $node, "`.")]
        pub mod $names {
            /// The node these entries hang under.
            pub const NODE: &str = $node;
            $(
                #[doc = concat!("`", $node, ".", $name, "`: ", $descr)]
                pub const $oid: &str = concat!($node, ".", $name);
            )*
        }
    };
    (
        $(#[$lmeta:meta])*
        impl $t:ident $(<$($g:ident $(: $bound:path)?),*>)? : $list:ident {
            $(
                $(#[$meta:meta])*
                $oid:ident = $name:literal: $kind:ident $descr:literal, $get:expr
                    $(, write $write:expr)? $(, metric $metric:expr)?;
            )*
        }
    ) => {
        impl $(<$($g $(: $bound)?),*>)? $t $(<$($g),*>)? {
            $(
                $(#[$meta])*
                pub const $oid: $crate::sysctl::Oid<Self> = $crate::sysctl::Oid {
                    name: $name,
                    descr: $descr,
                    kind: $crate::sysctl::Kind::$kind,
                    get: $get,
                    write: $crate::sysctl_struct!(@write $($write)?),
                    metric: $crate::sysctl_oids!(@metric $($metric)?),
                };
            )*
            $(#[$lmeta])*
            pub const $list: [$crate::sysctl::Oid<Self>; 0 $(+ $crate::sysctl_oids!(@one $oid))*] =
                [$(Self::$oid,)*];
        }
    };
    (@one $oid:ident) => { 1 };
    (@metric) => { $crate::sysctl::Metric::ByNode };
    (@metric $metric:expr) => { $metric };
}
