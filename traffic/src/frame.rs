//! The test frame: Ethernet/IPv4/UDP with a payload that lets the sink count and time it.
//!
//! Layout (offsets in bytes, network byte order):
//!
//! ```text
//!  0  Ethernet: dst MAC, src MAC, ethertype 0x0800
//! 14  IPv4: 20 bytes, no options, DF, TTL 64, protocol UDP, header checksum
//! 34  UDP: ports, length, checksum 0 (allowed for IPv4)
//! 42  payload: magic u32 "pld1" | flow id u16 | sequence u64 | send time u32
//! 60  zero padding up to the frame size
//! ```
//!
//! The smallest frame (60 bytes, 64 on the wire with the FCS) leaves 18 payload bytes,
//! so the send time carries the low 32 bits of CLOCK_MONOTONIC nanoseconds. The sink
//! subtracts modulo 2^32, which is exact for one-way latencies below 4.29 s.
//!
//! The generator keeps one [`FlowTemplate`] per flow: headers and IPv4 checksum are
//! computed once, and each frame only patches sequence number and timestamp (the UDP
//! checksum is 0, so the payload is not covered by any checksum).
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
use std::net::Ipv4Addr;

/// Smallest frame the generator builds (without FCS): the Ethernet minimum.
pub const MIN_FRAME: usize = 60;
/// Largest frame the generator builds (without FCS): a 1500-byte IP MTU.
pub const MAX_FRAME: usize = 1514;
/// Identifies our frames: ASCII "pld1" (polld, format 1).
pub const MAGIC: u32 = u32::from_be_bytes(*b"pld1");
/// Identifies an end-of-run record: ASCII "pldE".
pub const END_MAGIC: u32 = u32::from_be_bytes(*b"pldE");
/// Flows per end-of-run record: as many issued counts as a 1514-byte frame holds.
pub const END_FLOWS_PER_FRAME: usize = (MAX_FRAME - END_COUNTS_AT) / 8;

const ETH_HEADER: usize = 14;
const IP_HEADER: usize = 20;
const UDP_HEADER: usize = 8;
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

/// Parses `--size`: a whole number of bytes in the allowed range.
pub fn parse_frame_size(text: &str) -> Result<usize, String> {
    let size = text
        .parse()
        .map_err(|_| format!("frame size `{text}` is not a whole number of bytes"))?;
    check_frame_size(size)
}

/// The addresses of one flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowAddrs {
    pub src_mac: Mac,
    pub dst_mac: Mac,
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    pub src_port: u16,
    pub dst_port: u16,
}

/// A prebuilt frame for one flow; [`FlowTemplate::stamp`] fills in sequence and time.
#[derive(Clone, Debug)]
pub struct FlowTemplate {
    frame: Vec<u8>,
}

impl FlowTemplate {
    /// Builds the frame of flow `flow` with `size` bytes (checked by [`check_frame_size`]).
    pub fn new(addrs: &FlowAddrs, flow: u16, size: usize) -> Result<FlowTemplate, String> {
        let size = check_frame_size(size)?;
        let mut f = vec![0u8; size];
        f[0..6].copy_from_slice(&addrs.dst_mac.0);
        f[6..12].copy_from_slice(&addrs.src_mac.0);
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());

        let ip = &mut f[ETH_HEADER..ETH_HEADER + IP_HEADER];
        ip[0] = 0x45; // version 4, IHL 5
        ip[2..4].copy_from_slice(&((size - ETH_HEADER) as u16).to_be_bytes());
        ip[6] = 0x40; // DF: the identification field is then irrelevant (RFC 6864)
        ip[8] = 64; // TTL
        ip[9] = 17; // UDP
        ip[12..16].copy_from_slice(&addrs.src_ip.octets());
        ip[16..20].copy_from_slice(&addrs.dst_ip.octets());
        let checksum = ipv4_checksum(ip);
        ip[10..12].copy_from_slice(&checksum.to_be_bytes());

        let udp = &mut f[ETH_HEADER + IP_HEADER..PAYLOAD];
        udp[0..2].copy_from_slice(&addrs.src_port.to_be_bytes());
        udp[2..4].copy_from_slice(&addrs.dst_port.to_be_bytes());
        udp[4..6].copy_from_slice(&((size - ETH_HEADER - IP_HEADER) as u16).to_be_bytes());

        f[MAGIC_AT..FLOW_AT].copy_from_slice(&MAGIC.to_be_bytes());
        f[FLOW_AT..SEQ_AT].copy_from_slice(&flow.to_be_bytes());
        Ok(FlowTemplate { frame: f })
    }

    /// Writes the sequence number and send time (CLOCK_MONOTONIC ns) and returns the frame.
    pub fn stamp(&mut self, seq: u64, sent_ns: u64) -> &[u8] {
        self.frame[SEQ_AT..TIME_AT].copy_from_slice(&seq.to_be_bytes());
        self.frame[TIME_AT..PAYLOAD_END].copy_from_slice(&(sent_ns as u32).to_be_bytes());
        &self.frame
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

/// The end-of-run records of a run whose flow `i` was issued `issued[i]` sequence
/// numbers, addressed like flow 0 (`addrs`) so that they take its path.
pub fn end_of_run_frames(addrs: &FlowAddrs, gen_start_ns: u64, issued: &[u64]) -> Vec<Vec<u8>> {
    issued
        .chunks(END_FLOWS_PER_FRAME)
        .enumerate()
        .map(|(k, counts)| {
            let size = (END_COUNTS_AT + 8 * counts.len()).max(MIN_FRAME);
            let mut f = FlowTemplate::new(addrs, 0, size)
                .expect("end-of-run records fit in MIN_FRAME..=MAX_FRAME")
                .frame;
            f[MAGIC_AT..END_START_AT].copy_from_slice(&END_MAGIC.to_be_bytes());
            f[END_START_AT..END_FLOWS_AT].copy_from_slice(&gen_start_ns.to_be_bytes());
            f[END_FLOWS_AT..END_FIRST_AT].copy_from_slice(&(issued.len() as u32).to_be_bytes());
            let first = (k * END_FLOWS_PER_FRAME) as u16;
            f[END_FIRST_AT..END_LEN_AT].copy_from_slice(&first.to_be_bytes());
            f[END_LEN_AT..END_COUNTS_AT].copy_from_slice(&(counts.len() as u16).to_be_bytes());
            for (i, n) in counts.iter().enumerate() {
                let at = END_COUNTS_AT + 8 * i;
                f[at..at + 8].copy_from_slice(&n.to_be_bytes());
            }
            f
        })
        .collect()
}

/// Reads an end-of-run record ([`parse`] said [`Parsed::EndOfRun`]); `None` if it is
/// truncated.
pub fn parse_end_of_run(frame: &[u8]) -> Option<EndOfRun> {
    let ihl = usize::from(*frame.get(ETH_HEADER)? & 0x0f) * 4;
    let payload = frame.get(ETH_HEADER + ihl + UDP_HEADER..)?;
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

/// Classifies a received frame. Accepts any IHL and TTL, so forwarded frames parse too.
pub fn parse(frame: &[u8]) -> Parsed {
    if frame.len() < ETH_HEADER + IP_HEADER || frame[12..14] != [0x08, 0x00] {
        return Parsed::Foreign;
    }
    let ihl = usize::from(frame[ETH_HEADER] & 0x0f) * 4;
    let payload = ETH_HEADER + ihl + UDP_HEADER;
    if frame[ETH_HEADER] >> 4 != 4
        || ihl < IP_HEADER
        || frame[ETH_HEADER + 9] != 17
        || frame.len() < payload + (PAYLOAD_END - PAYLOAD)
    {
        return Parsed::Foreign;
    }
    let field =
        |at: usize, len: usize| &frame[payload + at - PAYLOAD..payload + at - PAYLOAD + len];
    let end_of_run = field(MAGIC_AT, 4) == END_MAGIC.to_be_bytes();
    if field(MAGIC_AT, 4) != MAGIC.to_be_bytes() && !end_of_run {
        return Parsed::Foreign;
    }
    let header = &frame[ETH_HEADER..ETH_HEADER + ihl];
    if ipv4_checksum(header) != u16::from_be_bytes([header[10], header[11]]) {
        return Parsed::BadChecksum;
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
            src_ip: Ipv4Addr::new(10, 0, 1, 1),
            dst_ip: Ipv4Addr::new(10, 0, 2, 100),
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
        let frames = end_of_run_frames(&addrs(), 0x1234_5678_9abc, &issued);
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
        let one = end_of_run_frames(&addrs(), 1, &[5]);
        assert_eq!(one[0].len(), 70);
        assert_eq!(parse_end_of_run(&one[0][..MIN_FRAME]), None, "truncated");
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
