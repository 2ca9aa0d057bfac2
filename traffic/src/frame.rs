//! The test frame: Ethernet/IPv4/UDP or Ethernet/IPv6/UDP with a payload that lets the
//! sink count and time it.
//!
//! Layout (offsets in bytes, network byte order), IPv4:
//!
//! ```text
//!  0  Ethernet: dst MAC, src MAC, ethertype 0x0800
//! 14  IPv4: 20 bytes, no options, DF, TTL 64, protocol UDP, header checksum
//! 34  UDP: ports, length, checksum 0 (allowed for IPv4)
//! 42  payload: magic u32 "pld1" | flow id u16 | sequence u64 | send time u32
//! 60  zero padding up to the frame size
//! ```
//!
//! IPv6 (no extension headers):
//!
//! ```text
//!  0  Ethernet: dst MAC, src MAC, ethertype 0x86dd
//! 14  IPv6: 40 bytes, traffic class and flow label 0, next header UDP, hop limit 64
//! 54  UDP: ports, length, checksum (required for IPv6, RFC 8200 8.1)
//! 62  payload: as for IPv4
//! 80  zero padding up to the frame size
//! ```
//!
//! The smallest IPv4 frame (60 bytes, 64 on the wire with the FCS) leaves 18 payload
//! bytes, so the send time carries the low 32 bits of CLOCK_MONOTONIC nanoseconds. The
//! sink subtracts modulo 2^32, which is exact for one-way latencies below 4.29 s. The
//! smallest IPv6 frame carries the same 18 bytes and is 80 bytes long
//! ([`smallest_frame`]), above the Ethernet minimum, so it needs no padding.
//!
//! The generator keeps one [`FlowTemplate`] per flow: headers and IPv4 checksum are
//! computed once, and each frame only patches sequence number and timestamp. The IPv4
//! UDP checksum is 0, so the payload is not covered by any checksum; the IPv6 UDP
//! checksum is kept as the sum of the template and each frame adds its 12 stamped bytes.
//!
//! At the end of a run the generator sends **end-of-run records** ([`end_of_run_frames`]),
//! with flow 0's headers, so that the sink can count what it never received (whole flows,
//! and the frames after the last one it saw):
//!
//! ```text
//! 42  payload: magic u32 "pldE" | generator start u64 (CLOCK_MONOTONIC ns) | flows u32 |
//!     first flow u16 | n u16 | n x (sequence numbers issued to that flow, u64)
//! ```

use std::fmt;
use std::net::IpAddr;

/// Smallest frame the generator builds (without FCS): the Ethernet minimum, which an
/// IPv4 frame fills; an IPv6 one needs more ([`smallest_frame`]).
pub const MIN_FRAME: usize = 60;
/// Largest frame the generator builds (without FCS): a 1500-byte IP MTU.
pub const MAX_FRAME: usize = 1514;
/// Identifies our frames: ASCII "pld1" (polld, format 1).
pub const MAGIC: u32 = u32::from_be_bytes(*b"pld1");
/// Identifies an end-of-run record: ASCII "pldE".
pub const END_MAGIC: u32 = u32::from_be_bytes(*b"pldE");
/// Flows per end-of-run record: as many issued counts as a 1514-byte IPv6 frame holds.
pub const END_FLOWS_PER_FRAME: usize = (MAX_FRAME - END_COUNTS_AT - (IP6_HEADER - IP_HEADER)) / 8;

const ETH_HEADER: usize = 14;
const IP_HEADER: usize = 20;
const IP6_HEADER: usize = 40;
const UDP_HEADER: usize = 8;
/// Where the payload's fields sit in an IPv4 frame; an IPv6 frame has them
/// `IP6_HEADER - IP_HEADER` bytes further on (see [`udp_at`]).
const PAYLOAD: usize = ETH_HEADER + IP_HEADER + UDP_HEADER;
const MAGIC_AT: usize = PAYLOAD;
const FLOW_AT: usize = PAYLOAD + 4;
const SEQ_AT: usize = PAYLOAD + 6;
const TIME_AT: usize = PAYLOAD + 14;
const PAYLOAD_END: usize = PAYLOAD + 18;
const END_START_AT: usize = PAYLOAD + 4;
const END_FLOWS_AT: usize = PAYLOAD + 12;
const END_FIRST_AT: usize = PAYLOAD + 16;
const END_LEN_AT: usize = PAYLOAD + 18;
const END_COUNTS_AT: usize = PAYLOAD + 20;

/// A MAC address, parsed from and printed as `02:00:00:00:01:01`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mac(pub [u8; 6]);

impl std::str::FromStr for Mac {
    type Err = String;

    fn from_str(text: &str) -> Result<Mac, String> {
        let bad = || {
            format!("`{text}` is not a MAC address (expected six hex bytes like 02:00:00:00:01:01)")
        };
        let mut bytes = [0u8; 6];
        let mut parts = text.split(':');
        for byte in &mut bytes {
            let part = parts.next().ok_or_else(bad)?;
            if part.is_empty() || part.len() > 2 {
                return Err(bad());
            }
            *byte = u8::from_str_radix(part, 16).map_err(|_| bad())?;
        }
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(Mac(bytes))
    }
}

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

/// Checks a frame size against [`MIN_FRAME`]..=[`MAX_FRAME`].
pub fn check_frame_size(size: usize) -> Result<usize, String> {
    if (MIN_FRAME..=MAX_FRAME).contains(&size) {
        Ok(size)
    } else {
        Err(format!(
            "frame size {size} is out of range: use {MIN_FRAME}..={MAX_FRAME} bytes \
             (without the 4-byte FCS; 60 is 64 on the wire)"
        ))
    }
}

/// The smallest frame (without FCS) carrying the payload stamp over `ip`'s family:
/// 60 bytes for IPv4 (the Ethernet minimum), 14 + 40 + 8 + 18 = 80 for IPv6.
pub fn smallest_frame(ip: IpAddr) -> usize {
    match ip {
        IpAddr::V4(_) => MIN_FRAME,
        IpAddr::V6(_) => ETH_HEADER + IP6_HEADER + UDP_HEADER + (PAYLOAD_END - PAYLOAD),
    }
}

/// Where the UDP header starts in a frame of `ip`'s family.
fn udp_at(ip: IpAddr) -> usize {
    ETH_HEADER
        + match ip {
            IpAddr::V4(_) => IP_HEADER,
            IpAddr::V6(_) => IP6_HEADER,
        }
}

/// Parses `--size`: a whole number of bytes in the allowed range.
pub fn parse_frame_size(text: &str) -> Result<usize, String> {
    let size = text
        .parse()
        .map_err(|_| format!("frame size `{text}` is not a whole number of bytes"))?;
    check_frame_size(size)
}

/// The addresses of one flow; both IP addresses are of one family, which the frame
/// takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowAddrs {
    pub src_mac: Mac,
    pub dst_mac: Mac,
    pub src_ip: IpAddr,
    pub dst_ip: IpAddr,
    pub src_port: u16,
    pub dst_port: u16,
}

/// A prebuilt frame for one flow; [`FlowTemplate::stamp`] fills in sequence and time.
#[derive(Clone, Debug)]
pub struct FlowTemplate {
    frame: Vec<u8>,
    /// Where the payload's fields start: [`PAYLOAD`] plus the offset of the family.
    shift: usize,
    /// IPv6 only: the UDP checksum's one's-complement sum over the pseudo-header and the
    /// segment with sequence and time zero.
    udp_sum: Option<u32>,
}

impl FlowTemplate {
    /// Builds the frame of flow `flow` with `size` bytes: [`check_frame_size`], and at
    /// least [`smallest_frame`] of the family. The addresses must be of one family.
    pub fn new(addrs: &FlowAddrs, flow: u16, size: usize) -> Result<FlowTemplate, String> {
        let size = check_frame_size(size)?;
        let smallest = smallest_frame(addrs.dst_ip);
        if size < smallest {
            return Err(format!(
                "frame size {size} is too small for UDP over IPv6 with the 18-byte stamp: \
                 use {smallest}..={MAX_FRAME} bytes"
            ));
        }
        let mut f = vec![0u8; size];
        f[0..6].copy_from_slice(&addrs.dst_mac.0);
        f[6..12].copy_from_slice(&addrs.src_mac.0);
        let udp = udp_at(addrs.dst_ip);
        match (addrs.src_ip, addrs.dst_ip) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => {
                f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
                let ip = &mut f[ETH_HEADER..udp];
                ip[0] = 0x45; // version 4, IHL 5
                ip[2..4].copy_from_slice(&((size - ETH_HEADER) as u16).to_be_bytes());
                ip[6] = 0x40; // DF: the identification field is then irrelevant (RFC 6864)
                ip[8] = 64; // TTL
                ip[9] = 17; // UDP
                ip[12..16].copy_from_slice(&src.octets());
                ip[16..20].copy_from_slice(&dst.octets());
                let checksum = ipv4_checksum(ip);
                ip[10..12].copy_from_slice(&checksum.to_be_bytes());
            }
            (IpAddr::V6(src), IpAddr::V6(dst)) => {
                f[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
                let ip = &mut f[ETH_HEADER..udp];
                ip[0] = 0x60; // version 6, traffic class and flow label 0
                ip[4..6].copy_from_slice(&((size - udp) as u16).to_be_bytes());
                ip[6] = 17; // next header UDP
                ip[7] = 64; // hop limit
                ip[8..24].copy_from_slice(&src.octets());
                ip[24..40].copy_from_slice(&dst.octets());
            }
            (src, dst) => {
                return Err(format!(
                    "source {src} and destination {dst} are of different families: \
                     give both as IPv4 or both as IPv6"
                ))
            }
        }
        let shift = udp + UDP_HEADER - PAYLOAD;
        f[udp..udp + 2].copy_from_slice(&addrs.src_port.to_be_bytes());
        f[udp + 2..udp + 4].copy_from_slice(&addrs.dst_port.to_be_bytes());
        f[udp + 4..udp + 6].copy_from_slice(&((size - udp) as u16).to_be_bytes());
        f[shift + MAGIC_AT..shift + FLOW_AT].copy_from_slice(&MAGIC.to_be_bytes());
        f[shift + FLOW_AT..shift + SEQ_AT].copy_from_slice(&flow.to_be_bytes());
        let udp_sum = addrs.dst_ip.is_ipv6().then(|| udp6_sum(&f));
        Ok(FlowTemplate {
            frame: f,
            shift,
            udp_sum,
        })
    }

    /// Writes the sequence number and send time (CLOCK_MONOTONIC ns), and for IPv6 the
    /// UDP checksum, and returns the frame.
    pub fn stamp(&mut self, seq: u64, sent_ns: u64) -> &[u8] {
        let (seq_at, end) = (self.shift + SEQ_AT, self.shift + PAYLOAD_END);
        self.frame[seq_at..seq_at + 8].copy_from_slice(&seq.to_be_bytes());
        self.frame[seq_at + 8..end].copy_from_slice(&(sent_ns as u32).to_be_bytes());
        if let Some(sum) = self.udp_sum {
            let checksum = finish_udp6_checksum(sum + ones_sum(&self.frame[seq_at..end]));
            let at = ETH_HEADER + IP6_HEADER + 6;
            self.frame[at..at + 2].copy_from_slice(&checksum.to_be_bytes());
        }
        &self.frame
    }
}

/// The one's-complement sum (not yet folded) of `bytes` as big-endian 16-bit words, the
/// last one padded with zero.
fn ones_sum(bytes: &[u8]) -> u32 {
    bytes
        .chunks(2)
        .map(|w| u32::from(w[0]) << 8 | w.get(1).copied().map_or(0, u32::from))
        .sum()
}

/// The UDP checksum's sum over an IPv6 frame's pseudo-header (addresses, UDP length,
/// next header) and its UDP segment, with the checksum field read as it stands.
fn udp6_sum(frame: &[u8]) -> u32 {
    let udp = ETH_HEADER + IP6_HEADER;
    let length = (frame.len() - udp) as u32;
    ones_sum(&frame[ETH_HEADER + 8..udp]) + length + 17 + ones_sum(&frame[udp..])
}

/// Folds and complements a UDP sum; a result of 0 is sent as 0xffff (RFC 768), since 0
/// would mean "no checksum", which IPv6 forbids.
fn finish_udp6_checksum(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    match !(sum as u16) {
        0 => 0xffff,
        checksum => checksum,
    }
}

/// What a generator run issued, as its end-of-run records carry it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndOfRun {
    /// When the generator started (CLOCK_MONOTONIC ns).
    pub gen_start_ns: u64,
    /// How many flows the run had.
    pub flows: u32,
    /// The first flow this record covers.
    pub first: u16,
    /// Per flow from `first`: how many sequence numbers were issued (0..n), including
    /// numbers skipped on purpose (`--inject-gap`).
    pub issued: Vec<u64>,
}

/// The end-of-run records of a run whose flow `first_flow + i` was issued `issued[i]`
/// sequence numbers, addressed like the run's first flow (`addrs`) so that they take its
/// path.
pub fn end_of_run_frames(
    addrs: &FlowAddrs,
    gen_start_ns: u64,
    first_flow: u16,
    issued: &[u64],
) -> Vec<Vec<u8>> {
    issued
        .chunks(END_FLOWS_PER_FRAME)
        .enumerate()
        .map(|(k, counts)| {
            let smallest = smallest_frame(addrs.dst_ip);
            let shift = udp_at(addrs.dst_ip) + UDP_HEADER - PAYLOAD;
            let size = (shift + END_COUNTS_AT + 8 * counts.len()).max(smallest);
            let mut f = FlowTemplate::new(addrs, 0, size)
                .expect("end-of-run records fit in the family's sizes up to MAX_FRAME")
                .frame;
            let at = |field: usize| shift + field;
            f[at(MAGIC_AT)..at(END_START_AT)].copy_from_slice(&END_MAGIC.to_be_bytes());
            f[at(END_START_AT)..at(END_FLOWS_AT)].copy_from_slice(&gen_start_ns.to_be_bytes());
            f[at(END_FLOWS_AT)..at(END_FIRST_AT)]
                .copy_from_slice(&(issued.len() as u32).to_be_bytes());
            let first = first_flow + (k * END_FLOWS_PER_FRAME) as u16;
            f[at(END_FIRST_AT)..at(END_LEN_AT)].copy_from_slice(&first.to_be_bytes());
            f[at(END_LEN_AT)..at(END_COUNTS_AT)]
                .copy_from_slice(&(counts.len() as u16).to_be_bytes());
            for (i, n) in counts.iter().enumerate() {
                let at = at(END_COUNTS_AT) + 8 * i;
                f[at..at + 8].copy_from_slice(&n.to_be_bytes());
            }
            if addrs.dst_ip.is_ipv6() {
                let checksum = finish_udp6_checksum(udp6_sum(&f));
                let at = ETH_HEADER + IP6_HEADER + 6;
                f[at..at + 2].copy_from_slice(&checksum.to_be_bytes());
            }
            f
        })
        .collect()
}

/// Where the payload starts in an IPv4/UDP frame (any IHL) or an IPv6/UDP frame (UDP
/// right after the fixed header); `None` for anything else or a frame too short for
/// the 18-byte stamp.
fn payload_at(frame: &[u8]) -> Option<usize> {
    let at = match (frame.get(12..14)?, *frame.get(ETH_HEADER)? >> 4) {
        ([0x08, 0x00], 4) => {
            let ihl = usize::from(frame[ETH_HEADER] & 0x0f) * 4;
            if ihl < IP_HEADER || *frame.get(ETH_HEADER + 9)? != 17 {
                return None;
            }
            ETH_HEADER + ihl + UDP_HEADER
        }
        ([0x86, 0xdd], 6) if *frame.get(ETH_HEADER + 6)? == 17 => {
            ETH_HEADER + IP6_HEADER + UDP_HEADER
        }
        _ => return None,
    };
    (frame.len() >= at + (PAYLOAD_END - PAYLOAD)).then_some(at)
}

/// Reads an end-of-run record ([`parse`] said [`Parsed::EndOfRun`]); `None` if it is
/// truncated.
pub fn parse_end_of_run(frame: &[u8]) -> Option<EndOfRun> {
    let payload = frame.get(payload_at(frame)?..)?;
    let be = |at: usize, len: usize| {
        let at = at - PAYLOAD;
        payload
            .get(at..at + len)
            .map(|b| b.iter().fold(0u64, |acc, &b| acc << 8 | u64::from(b)))
    };
    let n = be(END_LEN_AT, 2)? as usize;
    Some(EndOfRun {
        gen_start_ns: be(END_START_AT, 8)?,
        flows: be(END_FLOWS_AT, 4)? as u32,
        first: be(END_FIRST_AT, 2)? as u16,
        issued: (0..n)
            .map(|i| be(END_COUNTS_AT + 8 * i, 8))
            .collect::<Option<Vec<_>>>()?,
    })
}

/// The IPv4 header checksum of `header` with its checksum field taken as zero.
pub fn ipv4_checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for (i, word) in header.chunks(2).enumerate() {
        if i == 5 {
            continue; // the checksum field itself
        }
        let hi = u32::from(word[0]) << 8;
        let lo = word.get(1).copied().map_or(0, u32::from);
        sum += hi | lo;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// What the sink learns from one received frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// One of ours, intact.
    Ours {
        flow: u16,
        seq: u64,
        /// Low 32 bits of the send time in CLOCK_MONOTONIC ns.
        sent_ns_low: u32,
    },
    /// A generator's end-of-run record ([`parse_end_of_run`] reads it).
    EndOfRun,
    /// Carries our magic but its IPv4 header checksum is wrong (a broken forwarder).
    BadChecksum,
    /// Not a frame of ours: other ethertype, protocol, too short, or no magic.
    Foreign,
}

/// Classifies a received frame. Accepts any IHL and TTL or hop limit, so forwarded
/// frames parse too. IPv6 has no header checksum, so an IPv6 frame is never
/// [`Parsed::BadChecksum`].
pub fn parse(frame: &[u8]) -> Parsed {
    let Some(payload) = payload_at(frame) else {
        return Parsed::Foreign;
    };
    let field =
        |at: usize, len: usize| &frame[payload + at - PAYLOAD..payload + at - PAYLOAD + len];
    let end_of_run = field(MAGIC_AT, 4) == END_MAGIC.to_be_bytes();
    if field(MAGIC_AT, 4) != MAGIC.to_be_bytes() && !end_of_run {
        return Parsed::Foreign;
    }
    if frame[12..14] == [0x08, 0x00] {
        let header = &frame[ETH_HEADER..payload - UDP_HEADER];
        if ipv4_checksum(header) != u16::from_be_bytes([header[10], header[11]]) {
            return Parsed::BadChecksum;
        }
    }
    if end_of_run {
        return Parsed::EndOfRun;
    }
    let be = |bytes: &[u8]| bytes.iter().fold(0u64, |acc, &b| acc << 8 | u64::from(b));
    Parsed::Ours {
        flow: be(field(FLOW_AT, 2)) as u16,
        seq: be(field(SEQ_AT, 8)),
        sent_ns_low: be(field(TIME_AT, 4)) as u32,
    }
}

/// One-way latency from the low 32 bits of the send time, modulo 2^32 ns.
pub fn latency_ns(sent_ns_low: u32, received_ns: u64) -> u64 {
    u64::from((received_ns as u32).wrapping_sub(sent_ns_low))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs() -> FlowAddrs {
        FlowAddrs {
            src_mac: "02:00:00:00:01:01".parse().unwrap(),
            dst_mac: "02:00:00:00:01:02".parse().unwrap(),
            src_ip: [10, 0, 1, 1].into(),
            dst_ip: [10, 0, 2, 100].into(),
            src_port: 9,
            dst_port: 9,
        }
    }

    #[test]
    fn a_stamped_frame_parses_back_to_its_flow_sequence_and_time() {
        for size in [MIN_FRAME, 128, MAX_FRAME] {
            let mut t = FlowTemplate::new(&addrs(), 7, size).unwrap();
            let frame = t
                .stamp(0x0102_0304_0506_0708, 0xdead_0000_beef_cafe)
                .to_vec();
            assert_eq!(frame.len(), size);
            assert_eq!(
                parse(&frame),
                Parsed::Ours {
                    flow: 7,
                    seq: 0x0102_0304_0506_0708,
                    sent_ns_low: 0xbeef_cafe
                }
            );
        }
    }

    #[test]
    fn headers_match_a_known_good_frame() {
        let mut t = FlowTemplate::new(&addrs(), 0, 60).unwrap();
        let f = t.stamp(0, 0);
        assert_eq!(&f[0..14], &[2, 0, 0, 0, 1, 2, 2, 0, 0, 0, 1, 1, 8, 0]);
        // 10.0.1.1 -> 10.0.2.100, total length 46, DF, TTL 64, UDP. Checksum by hand:
        // 0x4500+0x002e+0x4000+0x4011+0x0a00+0x0101+0x0a00+0x0264 = 0xdca4 (no carry),
        // complemented 0x235b.
        assert_eq!(
            &f[14..34],
            &[0x45, 0, 0, 46, 0, 0, 0x40, 0, 64, 17, 0x23, 0x5b, 10, 0, 1, 1, 10, 0, 2, 100]
        );
        assert_eq!(&f[34..42], &[0, 9, 0, 9, 0, 26, 0, 0]);
    }

    #[test]
    fn sizes_outside_the_ethernet_range_are_refused_with_the_range() {
        for size in [0, 59, 1515, 9000] {
            let err = FlowTemplate::new(&addrs(), 0, size).unwrap_err();
            assert!(err.contains("60..=1514"), "{err}");
        }
        assert_eq!(parse_frame_size("1514"), Ok(1514));
        assert!(parse_frame_size("59").unwrap_err().contains("60..=1514"));
        assert!(parse_frame_size("64B")
            .unwrap_err()
            .contains("whole number"));
    }

    #[test]
    fn a_forwarded_frame_with_lower_ttl_and_fixed_checksum_is_still_ours() {
        let mut t = FlowTemplate::new(&addrs(), 3, 60).unwrap();
        let mut f = t.stamp(5, 9).to_vec();
        f[22] -= 1;
        let sum = ipv4_checksum(&f[14..34]);
        f[24..26].copy_from_slice(&sum.to_be_bytes());
        assert!(matches!(
            parse(&f),
            Parsed::Ours {
                flow: 3,
                seq: 5,
                ..
            }
        ));
        f[22] -= 1; // TTL changed without fixing the checksum
        assert_eq!(parse(&f), Parsed::BadChecksum);
    }

    #[test]
    fn frames_without_our_magic_are_foreign() {
        let mut t = FlowTemplate::new(&addrs(), 0, 60).unwrap();
        let good = t.stamp(1, 1).to_vec();
        let mut no_magic = good.clone();
        no_magic[42] ^= 1;
        let mut arp = good.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let mut tcp = good.clone();
        tcp[23] = 6;
        for frame in [&no_magic[..], &arp, &tcp, &good[..50], &[]] {
            assert_eq!(parse(frame), Parsed::Foreign);
        }
    }

    #[test]
    fn end_of_run_records_carry_every_flows_count_across_frames() {
        let issued: Vec<u64> = (0..400).map(|i| i * 1000 + 7).collect();
        let frames = end_of_run_frames(&addrs(), 0x1234_5678_9abc, 0, &issued);
        assert_eq!(frames.len(), 3, "{END_FLOWS_PER_FRAME} flows per frame");
        let mut read = Vec::new();
        for f in &frames {
            assert!(f.len() >= MIN_FRAME && f.len() <= MAX_FRAME);
            assert_eq!(parse(f), Parsed::EndOfRun);
            let e = parse_end_of_run(f).unwrap();
            assert_eq!((e.gen_start_ns, e.flows), (0x1234_5678_9abc, 400));
            assert_eq!(usize::from(e.first), read.len());
            read.extend(e.issued);
        }
        assert_eq!(read, issued);
        let one = end_of_run_frames(&addrs(), 1, 0, &[5]);
        assert_eq!(one[0].len(), 70);
        assert_eq!(parse_end_of_run(&one[0][..MIN_FRAME]), None, "truncated");
    }

    fn addrs6() -> FlowAddrs {
        FlowAddrs {
            src_ip: "2001:db8:1::1".parse().unwrap(),
            dst_ip: "2001:db8:2::100".parse().unwrap(),
            ..addrs()
        }
    }

    /// The UDP checksum of an IPv6 frame verifies: the sum over pseudo-header and
    /// segment, checksum included, folds to 0xffff.
    fn udp6_checksum_verifies(frame: &[u8]) -> bool {
        finish_udp6_checksum(udp6_sum(frame)) == 0xffff
    }

    #[test]
    fn an_ipv6_frame_has_its_headers_stamp_and_a_valid_udp_checksum() {
        assert_eq!(smallest_frame(addrs6().dst_ip), 80);
        let mut t = FlowTemplate::new(&addrs6(), 7, 80).unwrap();
        for (seq, time) in [
            (0, 0),
            (0x0102_0304_0506_0708, 0xdead_0000_beef_cafe),
            (5, 9),
        ] {
            let f = t.stamp(seq, time).to_vec();
            assert_eq!(f.len(), 80);
            assert_eq!(&f[12..14], &[0x86, 0xdd]);
            // version 6, payload length 26, next header UDP, hop limit 64
            assert_eq!(&f[14..22], &[0x60, 0, 0, 0, 0, 26, 17, 64]);
            assert_eq!(
                &f[22..38],
                &"2001:db8:1::1"
                    .parse::<std::net::Ipv6Addr>()
                    .unwrap()
                    .octets()
            );
            assert_eq!(&f[54..60], &[0, 9, 0, 9, 0, 26]);
            assert!(udp6_checksum_verifies(&f), "seq {seq}: {f:02x?}");
            assert_eq!(
                parse(&f),
                Parsed::Ours {
                    flow: 7,
                    seq,
                    sent_ns_low: time as u32
                }
            );
        }
        let mut big = FlowTemplate::new(&addrs6(), 1, MAX_FRAME).unwrap();
        assert!(udp6_checksum_verifies(big.stamp(3, 4)));
        let mut hop = t.stamp(1, 2).to_vec();
        hop[21] = 1; // a forwarder lowered the hop limit: still ours
        assert!(matches!(
            parse(&hop),
            Parsed::Ours {
                flow: 7,
                seq: 1,
                ..
            }
        ));
    }

    #[test]
    fn ipv6_frames_below_80_bytes_or_mixed_families_are_refused() {
        let err = FlowTemplate::new(&addrs6(), 0, 79).unwrap_err();
        assert!(err.contains("80..=1514"), "{err}");
        let mixed = FlowAddrs {
            src_ip: [10, 0, 1, 1].into(),
            ..addrs6()
        };
        let err = FlowTemplate::new(&mixed, 0, 80).unwrap_err();
        assert!(err.contains("different families"), "{err}");
        let mut t = FlowTemplate::new(&addrs6(), 0, 80).unwrap();
        let good = t.stamp(1, 1).to_vec();
        let mut extension = good.clone();
        extension[20] = 0; // a hop-by-hop header, which the generator never sends
        for frame in [&extension[..], &good[..79]] {
            assert_eq!(parse(frame), Parsed::Foreign);
        }
    }

    #[test]
    fn ipv6_end_of_run_records_carry_the_counts_and_a_valid_checksum() {
        let issued: Vec<u64> = (0..400).map(|i| i * 3 + 1).collect();
        let frames = end_of_run_frames(&addrs6(), 77, 0, &issued);
        let mut read = Vec::new();
        for f in &frames {
            assert!(f.len() >= 80 && f.len() <= MAX_FRAME, "{}", f.len());
            assert!(udp6_checksum_verifies(f));
            assert_eq!(parse(f), Parsed::EndOfRun);
            read.extend(parse_end_of_run(f).unwrap().issued);
        }
        assert_eq!(read, issued);
        assert_eq!(end_of_run_frames(&addrs6(), 1, 0, &[5])[0].len(), 90);
    }

    #[test]
    fn latency_is_exact_across_the_32_bit_wrap() {
        assert_eq!(latency_ns(0xffff_fff0, 0x1_0000_0010), 0x20);
        assert_eq!(latency_ns(100, 5_000_000_100), 5_000_000_000 % (1 << 32));
    }

    #[test]
    fn macs_parse_and_print_and_bad_ones_are_explained() {
        let mac: Mac = "02:0a:00:00:01:ff".parse().unwrap();
        assert_eq!(mac.to_string(), "02:0a:00:00:01:ff");
        for bad in [
            "",
            "02:00:00:00:01",
            "02:00:00:00:01:02:03",
            "02:00:00:00:01:zz",
            "002:0:0:0:0:0",
        ] {
            let err = bad.parse::<Mac>().unwrap_err();
            assert!(err.contains("MAC address"), "{err}");
        }
    }
}
