//! The control protocol: a client sends one [`Request`] as a single line of JSON and reads
//! one [`Response`] line back. The daemon's poll thread answers; the socket server only
//! carries the messages, so nothing here touches the packet path.

use polld_core::{Reading, SysctlEntry};
use serde::{Deserialize, Serialize};

/// Requests are refused above this many bytes (one line, newline included).
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;

/// Parses one request line (without its newline) as the server does; the error is the
/// message the client gets back.
pub fn parse_request(line: &[u8]) -> Result<Request, String> {
    // The limit counts the newline.
    if line.len() + 1 > MAX_REQUEST_BYTES {
        return Err(format!(
            "request too large (limit {MAX_REQUEST_BYTES} bytes)"
        ));
    }
    serde_json::from_slice::<Request>(line).map_err(|e| {
        format!(
            "invalid request: {e}; send one JSON object on one line, \
             e.g. {{\"op\":\"list\",\"prefix\":\"kern.polling\"}}"
        )
    })
}

/// What a client asks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Every entry whose name is `prefix` or lies under it (`""` lists everything).
    List { prefix: String },
    /// Writes `name=value` pairs in order, like `sysctl a=1 b=2`: each is validated on
    /// its own, and a refused one changes nothing and does not stop the others.
    Set { assignments: Vec<(String, String)> },
    /// Every interface with its mode, link, addresses and counters (`polld ifconfig`).
    Interfaces,
    /// Every entry typed, with its node, kind and value (`polld stat`, `/metrics`): what
    /// [`Request::List`] gives as text, read without parsing names.
    Snapshot,
    /// A page of one of the router's tables (`polld netstat -rn`, `polld arp -an`): at
    /// most `limit` (capped at [`MAX_TABLE_PAGE`]) of its entries from the `from`th on.
    Table {
        table: TableName,
        from: u64,
        limit: u64,
    },
}

/// The most entries a [`Request::Table`] answer carries: the poll thread copies one page
/// between two pieces of work, so a table of a million routes is read in pages that
/// each cost it little, never all at once.
pub const MAX_TABLE_PAGE: u64 = 4096;

/// One of the router's tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TableName {
    /// The IPv4 routes.
    Inet,
    /// The IPv6 routes.
    Inet6,
    /// The IPv4 and IPv6 neighbours (ARP and neighbour entries).
    Neighbours,
}

/// A page of a router's table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TablePage {
    /// Where the router's tables come from: `kernel` or `file`.
    pub source: String,
    /// The entries the table holds now (a multipath route is one, with a row per next
    /// hop).
    pub total: u64,
    /// Where the next page starts; absent after the last. The entries are in the
    /// table's own order, which holds while the table does not change: a listing read
    /// while it changes may miss or repeat an entry changed meanwhile.
    pub next: Option<u64>,
    /// The last change of the kernel's tables polld applied, Unix seconds (absent with
    /// `tables = "file"`).
    pub updated_s: Option<u64>,
    pub rows: Vec<TableRow>,
}

/// One row of a table, in netstat's columns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableRow {
    /// A route's prefix, or a neighbour's address.
    pub destination: String,
    /// A route's gateway (`link#N` for a connected network, `-` for a route that
    /// forwards nothing), or a neighbour's MAC.
    pub gateway: String,
    /// netstat's flags: `U` up, `G` gateway, `H` host, `S` static (from the file), `B`
    /// blackhole, `R` reject (unreachable, prohibit), `K` the kernel's (out of an
    /// interface polld does not poll); a neighbour's `permanent` or empty.
    pub flags: String,
    /// The output interface (`-` when none of polld's).
    pub netif: String,
    /// A multipath route's next hop's share of the flows (absent for a single path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u16>,
}

/// The outcome of one assignment of a [`Request::Set`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetResult {
    pub name: String,
    /// The value before the write (absent when the name is unknown).
    pub old: Option<String>,
    /// The value after the write (equal to `old` when refused).
    pub new: Option<String>,
    /// Why the write was refused, naming the knob and the fix.
    pub error: Option<String>,
}

/// One interface as `polld ifconfig` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IfStatus {
    pub name: String,
    /// `af_packet`, `af_xdp` or `tap`.
    pub backend: String,
    /// `interrupt`, `polling`, `adaptive` or `busy`.
    pub mode: String,
    /// `up`, `down` or `gone`.
    pub link: String,
    pub mac: Option<String>,
    /// Addresses with prefix length, `10.0.1.1/24`: the router's now.
    pub addresses: Vec<String>,
    /// Where the router's tables come from: `kernel` or `file` (absent for the bridge
    /// and from older daemons).
    #[serde(default)]
    pub tables: Option<String>,
    /// Counter name and value, in display order (rx_packets, forwarded, drops.*, ...).
    pub counters: Vec<(String, u64)>,
    /// Whether its receive work runs inside polld's budget (absent from older daemons).
    #[serde(default)]
    pub rx_work: Option<RxWork>,
    /// AF_XDP: whose UMEM its socket uses: `shared with veth2` (forwarded frames leave
    /// without a user-space copy) or `own` (absent from older daemons and other backends).
    #[serde(default)]
    pub umem: Option<String>,
    /// AF_XDP: its preferred busy polling (absent from older daemons and other backends).
    #[serde(default)]
    pub busy_poll: Option<BusyPollLine>,
    /// The device's own receive interrupts, from `/proc/interrupts` (absent for a virtual
    /// device, which has none, and from older daemons).
    #[serde(default)]
    pub device_interrupts: Option<DeviceInterrupts>,
}

/// How an interface's device interrupt is kept masked while polld polls it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BusyPollLine {
    /// `netlink per-NAPI`, `sysfs per-device`, `off` (the interface does not poll) or
    /// `unavailable` (`detail` says why and the fix).
    pub path: String,
    pub napi_id: Option<u32>,
    pub detail: String,
}

/// A device's receive interrupts: its vectors in `/proc/interrupts` and their count.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceInterrupts {
    /// `virtio0-input.0`, `eth0-TxRx-0`, ...
    pub vectors: Vec<String>,
    /// Since boot, all CPUs.
    pub total: u64,
    /// Over the daemon's last second of sampling (absent before the second sample).
    pub per_s: Option<u64>,
}

/// Where an interface's receive work runs (the work a frame costs before polld sees it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RxWork {
    /// In polld's thread, so bounded by `kern.polling.user_frac`: TAP reads, AF_XDP under
    /// preferred busy polling.
    pub in_budget: bool,
    /// Where it runs: `polld's read() of the TAP`, `napi/veth1-8193 (pid 812, CPU1)`, ...
    pub runs_in: String,
    /// Why polld cannot take it in, when it does not.
    pub why_not: Option<String>,
}

/// The daemon's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Response {
    Entries {
        entries: Vec<SysctlEntry>,
    },
    Set {
        results: Vec<SetResult>,
    },
    Interfaces {
        interfaces: Vec<IfStatus>,
    },
    Snapshot {
        readings: Vec<Reading>,
    },
    Table {
        page: TablePage,
    },
    /// The request was refused as a whole (malformed, too large, not permitted).
    Error {
        message: String,
    },
}
