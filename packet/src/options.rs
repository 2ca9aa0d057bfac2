//! IPv4 options (RFC 791 §3.1) as a router handles them (RFC 1812 §5.2.4, §5.3.13).
//!
//! - [`check`] walks the option list of a datagram to be forwarded, counts every kind and
//!   finds the malformed ones, with the offset of the octet at fault that an ICMP
//!   parameter problem points at. Its rules are Linux's `ip_options_compile` (the
//!   reference where the RFCs leave a choice): a length below 2 or past the header, a
//!   record route or timestamp pointer below its minimum, a pointer inside the option
//!   without room for a whole entry, a second record route, timestamp or source route, a
//!   router alert shorter than 4, and a timestamp overflow count that would pass 15.
//! - [`record`] does the forwarding router's part: record route and timestamp entries
//!   when there is room (RFC 791), the timestamp overflow count when there is not, the
//!   record route left as it is when full.
//! - [`blank_uncopied`] turns the options RFC 791 says not to copy into fragments after
//!   the first into NOPs, keeping the header length as Linux does.
//!
//! Source routes are refused (`source_route`), as by Linux's and FreeBSD's defaults
//! (`accept_source_route=0`, `net.inet.ip.sourceroute=0`); router alert, security,
//! NOP/EOL and unknown options pass through untouched.

use crate::wire::Ipv4Packet;
use serde::Serialize;
use std::net::Ipv4Addr;

/// Option types (the whole type octet: copied flag, class and number).
pub mod kind {
    pub const END_OF_LIST: u8 = 0;
    pub const NOP: u8 = 1;
    pub const RECORD_ROUTE: u8 = 7;
    pub const TIMESTAMP: u8 = 68;
    pub const SECURITY: u8 = 130;
    pub const LOOSE_SOURCE_ROUTE: u8 = 131;
    pub const STRICT_SOURCE_ROUTE: u8 = 137;
    pub const ROUTER_ALERT: u8 = 148;

    /// Whether RFC 791 has the option copied into every fragment.
    pub fn is_copied(kind: u8) -> bool {
        kind & 0x80 != 0
    }
}

/// Timestamp option flags (the low 4 bits of its fourth octet).
pub mod timestamp_flag {
    /// Timestamps only.
    pub const ONLY: u8 = 0;
    /// Each timestamp preceded by the recording router's address.
    pub const WITH_ADDRESS: u8 = 1;
    /// Timestamps only by the routers whose addresses the sender listed.
    pub const PRESPECIFIED: u8 = 3;
}

const IP: usize = Ipv4Packet::<&[u8]>::HEADER_LEN;

/// Options seen in datagrams to be forwarded, one count per option (`nop` per octet).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OptionCounters {
    /// Datagrams with at least one option octet.
    pub datagrams: u64,
    pub end_of_list: u64,
    pub nop: u64,
    /// Record route options; `record_route_full` of them had no room left.
    pub record_route: u64,
    pub record_route_full: u64,
    /// Timestamp options; `timestamp_overflow` of them had no room, so only their
    /// overflow count went up.
    pub timestamp: u64,
    pub timestamp_overflow: u64,
    pub router_alert: u64,
    /// Loose and strict source routes (refused).
    pub source_route: u64,
    /// Security and every other kind, passed through.
    pub other: u64,
    /// Option lists that do not parse (dropped as `ip_options`, parameter problem sent).
    pub malformed: u64,
}

/// The option list is malformed; `pointer` is the header offset of the octet at fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Malformed {
    pub pointer: usize,
}

/// What a well-formed option list asks of the router.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Checked {
    /// A loose or strict source route: not honoured.
    pub source_route: bool,
    /// A record route or timestamp option that [`record`] will change.
    pub records: bool,
}

/// One option: where it starts in the header, its type, its length (1 for EOL and NOP).
#[derive(Clone, Copy, Debug)]
struct Opt {
    at: usize,
    kind: u8,
    len: usize,
}

/// The options of `header` (IHL bytes), in order, stopping after end-of-list.
fn walk(header: &[u8]) -> impl Iterator<Item = Result<Opt, Malformed>> + '_ {
    let mut at = IP;
    let mut done = false;
    std::iter::from_fn(move || {
        if done || at >= header.len() {
            return None;
        }
        let kind = header[at];
        let opt = match kind {
            kind::END_OF_LIST | kind::NOP => Opt { at, kind, len: 1 },
            _ => {
                let len = header.get(at + 1).map_or(0, |&l| usize::from(l));
                if len < 2 || at + len > header.len() {
                    done = true;
                    return Some(Err(Malformed { pointer: at }));
                }
                Opt { at, kind, len }
            }
        };
        done = kind == kind::END_OF_LIST;
        at += opt.len;
        Some(Ok(opt))
    })
}

/// Checks the option list of `header` (the IPv4 header, options included) and counts
/// its options.
pub fn check(header: &[u8], counters: &mut OptionCounters) -> Result<Checked, Malformed> {
    counters.datagrams += 1;
    let result = check_list(header, counters);
    if result.is_err() {
        counters.malformed += 1;
    }
    result
}

fn check_list(header: &[u8], counters: &mut OptionCounters) -> Result<Checked, Malformed> {
    let mut checked = Checked::default();
    let (mut record_route, mut timestamp) = (false, false);
    for opt in walk(header) {
        let Opt { at, kind, len } = opt?;
        let o = &header[at..at + len];
        let fault = |offset: usize| {
            Err(Malformed {
                pointer: at + offset,
            })
        };
        let once = |seen: &mut bool| std::mem::replace(seen, true);
        match kind {
            kind::END_OF_LIST => counters.end_of_list += 1,
            kind::NOP => counters.nop += 1,
            kind::RECORD_ROUTE => {
                counters.record_route += 1;
                if once(&mut record_route) {
                    return fault(0);
                }
                if len < 3 {
                    return fault(1);
                }
                let pointer = usize::from(o[2]);
                if pointer < 4 {
                    return fault(2);
                }
                if pointer <= len {
                    if pointer + 3 > len {
                        return fault(2);
                    }
                    checked.records = true;
                } else {
                    counters.record_route_full += 1;
                }
            }
            kind::TIMESTAMP => {
                counters.timestamp += 1;
                if once(&mut timestamp) {
                    return fault(0);
                }
                if len < 4 {
                    return fault(1);
                }
                let (pointer, flag) = (usize::from(o[2]), o[3] & 0x0F);
                if pointer < 5 {
                    return fault(2);
                }
                if pointer <= len {
                    let entry = match flag {
                        timestamp_flag::ONLY => 4,
                        timestamp_flag::WITH_ADDRESS | timestamp_flag::PRESPECIFIED => 8,
                        // Flags RFC 791 does not define pass through, as in Linux.
                        _ => 4,
                    };
                    if pointer + entry - 1 > len {
                        return fault(2);
                    }
                    checked.records = true;
                } else if flag != timestamp_flag::PRESPECIFIED {
                    // RFC 791: the overflow count itself must not overflow.
                    if o[3] >> 4 == 15 {
                        return fault(3);
                    }
                    counters.timestamp_overflow += 1;
                    checked.records = true;
                }
            }
            kind::ROUTER_ALERT => {
                counters.router_alert += 1;
                if len < 4 {
                    return fault(1);
                }
            }
            kind::LOOSE_SOURCE_ROUTE | kind::STRICT_SOURCE_ROUTE => {
                counters.source_route += 1;
                if checked.source_route {
                    return fault(0);
                }
                if len < 3 {
                    return fault(1);
                }
                if o[2] < 4 {
                    return fault(2);
                }
                checked.source_route = true;
            }
            _ => counters.other += 1,
        }
    }
    Ok(checked)
}

/// What a router records in the options it processes. RFC 791 leaves open which of
/// its addresses a router records; these are Linux's choices.
#[derive(Clone, Copy, Debug)]
pub struct Recorder<'a> {
    /// Record route: the address of the interface the datagram leaves by (as RFC 1812
    /// §5.2.4 has it).
    pub out_addr: Ipv4Addr,
    /// Timestamp with address: the address of the interface it came in by, on the
    /// sender's network.
    pub in_addr: Ipv4Addr,
    /// This router's addresses (prespecified timestamps name them).
    pub own: &'a [Ipv4Addr],
    /// The timestamp to write (RFC 791: milliseconds since midnight UT, or any value
    /// with the high-order bit set).
    pub timestamp: u32,
}

/// Adds this router's record route and timestamp entries to `header`, which [`check`]
/// passed. The header checksum is left to the caller.
pub fn record(header: &mut [u8], by: &Recorder<'_>) {
    let opts: Vec<Opt> = walk(header).filter_map(Result::ok).collect();
    for Opt { at, kind, len } in opts {
        let o = &mut header[at..at + len];
        let pointer = usize::from(o.get(2).copied().unwrap_or(0));
        match kind {
            kind::RECORD_ROUTE if pointer + 3 <= len => {
                o[pointer - 1..pointer + 3].copy_from_slice(&by.out_addr.octets());
                o[2] += 4;
            }
            kind::TIMESTAMP => {
                let flag = o[3] & 0x0F;
                let time = by.timestamp.to_be_bytes();
                match flag {
                    // Full: one more router could not stamp (never past 15: `check`).
                    _ if pointer > len
                        && flag != timestamp_flag::PRESPECIFIED
                        && o[3] >> 4 < 15 =>
                    {
                        o[3] += 0x10;
                    }
                    timestamp_flag::ONLY if pointer + 3 <= len => {
                        o[pointer - 1..pointer + 3].copy_from_slice(&time);
                        o[2] += 4;
                    }
                    timestamp_flag::WITH_ADDRESS if pointer + 7 <= len => {
                        o[pointer - 1..pointer + 3].copy_from_slice(&by.in_addr.octets());
                        o[pointer + 3..pointer + 7].copy_from_slice(&time);
                        o[2] += 8;
                    }
                    timestamp_flag::PRESPECIFIED if pointer + 7 <= len => {
                        let listed = Ipv4Addr::new(
                            o[pointer - 1],
                            o[pointer],
                            o[pointer + 1],
                            o[pointer + 2],
                        );
                        if by.own.contains(&listed) {
                            o[pointer + 3..pointer + 7].copy_from_slice(&time);
                            o[2] += 8;
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
}

/// Replaces the options not copied into fragments after the first (RFC 791: copied flag
/// clear) by NOPs, so that every fragment has the first one's header length.
pub fn blank_uncopied(header: &mut [u8]) {
    let opts: Vec<Opt> = walk(header).map_while(Result::ok).collect();
    for Opt { at, kind, len } in opts {
        if kind != kind::NOP && kind != kind::END_OF_LIST && !kind::is_copied(kind) {
            header[at..at + len].fill(kind::NOP);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(options: &[u8]) -> Vec<u8> {
        let mut h = vec![0u8; IP];
        h.extend_from_slice(options);
        h
    }

    fn checked(options: &[u8]) -> Result<Checked, Malformed> {
        check(&header(options), &mut OptionCounters::default())
    }

    const OUT: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 1);

    fn recorded(options: &[u8]) -> Vec<u8> {
        let mut h = header(options);
        assert!(checked(options).is_ok(), "{options:?}");
        let by = Recorder {
            out_addr: OUT,
            in_addr: Ipv4Addr::new(10, 0, 1, 1),
            own: &[Ipv4Addr::new(10, 0, 1, 1)],
            timestamp: 0x0102_0304,
        };
        record(&mut h, &by);
        h[IP..].to_vec()
    }

    #[test]
    fn malformed_lists_point_at_the_fault() {
        let cases: [(&[u8], usize); 9] = [
            (&[7], IP),                           // no length octet
            (&[7, 1, 0, 0], IP),                  // length below 2
            (&[148, 8, 0, 0], IP),                // length past the header
            (&[7, 2, 1, 1], IP + 1),              // record route without a pointer
            (&[7, 7, 3, 0, 0, 0, 0, 0], IP + 2),  // pointer below 4
            (&[7, 6, 4, 0, 0, 0, 0, 0], IP + 2),  // room for less than an address
            (&[68, 8, 5, 1, 0, 0, 0, 0], IP + 2), // address + time needs 8 bytes
            (&[148, 2, 1, 1], IP + 1),            // router alert shorter than 4
            (&[7, 3, 4, 7, 3, 4, 0, 0], IP + 3),  // a second record route
        ];
        for (options, pointer) in cases {
            assert_eq!(checked(options), Err(Malformed { pointer }), "{options:?}");
        }
        // Full, and the overflow count at 15: it cannot count one more.
        assert_eq!(
            checked(&[68, 4, 5, 0xF0]),
            Err(Malformed { pointer: IP + 3 })
        );
    }

    #[test]
    fn kinds_are_counted() {
        let mut c = OptionCounters::default();
        let options = [1, 148, 4, 0, 0, 130, 3, 0, 7, 3, 4, 68, 4, 5, 0x10, 0, 0, 0];
        let found = check(&header(&options), &mut c).unwrap();
        assert!(!found.source_route);
        assert!(found.records, "the full timestamp's overflow count changes");
        assert_eq!(
            (c.datagrams, c.nop, c.router_alert, c.other, c.record_route),
            (1, 1, 1, 1, 1)
        );
        assert_eq!(c.record_route_full, 1);
        assert_eq!((c.timestamp, c.timestamp_overflow), (1, 1));
        assert_eq!(c.end_of_list, 1, "the walk stops at end-of-list");
    }

    #[test]
    fn record_route_adds_the_output_address_until_full() {
        let out = recorded(&[7, 11, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(out, [7, 11, 8, 10, 0, 2, 1, 0, 0, 0, 0, 0]);
        let out = recorded(&[7, 7, 8, 9, 9, 9, 9, 0]);
        assert_eq!(out, [7, 7, 8, 9, 9, 9, 9, 0], "full: untouched");
    }

    #[test]
    fn timestamp_in_its_three_forms() {
        let only = recorded(&[68, 8, 5, 0, 0, 0, 0, 0]);
        assert_eq!(only, [68, 8, 9, 0, 1, 2, 3, 4]);
        let with_address = recorded(&[68, 12, 5, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(with_address, [68, 12, 13, 1, 10, 0, 1, 1, 1, 2, 3, 4]);
        let mine = recorded(&[68, 12, 5, 3, 10, 0, 1, 1, 0, 0, 0, 0]);
        assert_eq!(mine, [68, 12, 13, 3, 10, 0, 1, 1, 1, 2, 3, 4]);
        let theirs = recorded(&[68, 12, 5, 3, 10, 0, 9, 9, 0, 0, 0, 0]);
        assert_eq!(theirs, [68, 12, 5, 3, 10, 0, 9, 9, 0, 0, 0, 0]);
        let full = recorded(&[68, 8, 9, 0x21, 0, 0, 0, 0]);
        assert_eq!(full, [68, 8, 9, 0x31, 0, 0, 0, 0], "overflow count 2 → 3");
    }

    #[test]
    fn uncopied_options_become_nops() {
        let mut h = header(&[148, 4, 0, 0, 7, 3, 4, 130, 3, 0, 1, 0]);
        blank_uncopied(&mut h);
        assert_eq!(h[IP..], [148, 4, 0, 0, 1, 1, 1, 130, 3, 0, 1, 0]);
    }
}
