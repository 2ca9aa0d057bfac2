//! The instruction sequences of polld's XDP programs, each with its C equivalent.
//!
//! Map file descriptors are baked into the instructions (`ld_map_fd`), so each builder takes
//! the fd of the map the program uses.

use super::insn::{Asm, Helper, Insn, Label, Reg, R0, R1, R10, R2, R3, R4, R5, R6, R7};

/// XDP verdicts (`enum xdp_action`).
const XDP_DROP: i32 = 1;
const XDP_PASS: i32 = 2;

/// Offsets in `struct xdp_md`.
const XDP_MD_DATA: i16 = 0;
const XDP_MD_DATA_END: i16 = 4;
const XDP_MD_RX_QUEUE_INDEX: i16 = 16;

/// Ethertypes as a 16-bit load from the wire reads them on a little-endian CPU.
const ETH_P_IP_WIRE: i32 = u16::from_be(0x0800) as i32;
const ETH_P_ARP_WIRE: i32 = u16::from_be(0x0806) as i32;
const ETH_P_IPV6_WIRE: i32 = u16::from_be(0x86dd) as i32;
/// Offsets in an Ethernet frame: the ethertype; the IPv4 destination; the ARP target
/// IPv4 address; the IPv6 next header, destination, and the first byte after the fixed
/// header (an ICMPv6 message's type when the next header is ICMPv6).
const ETH_TYPE: i16 = 12;
const ETH_HEADER: i32 = 14;
const IPV4_DADDR: i16 = 14 + 16;
const ARP_TARGET_IP: i16 = 14 + 24;
const IPV6_NEXT_HEADER: i16 = 14 + 6;
const IPV6_DADDR: i16 = 14 + 24;
const IPV6_PAYLOAD: i16 = 14 + 40;
/// `IPPROTO_ICMPV6`.
const ICMPV6: i32 = 58;
/// ICMPv6 router solicitation: the first of the five neighbour discovery messages
/// (router solicitation and advertisement, neighbour solicitation and advertisement,
/// redirect: types 133 to 137, RFC 4861).
const ND_FIRST_TYPE: i32 = 133;
const ND_TYPES: i32 = 5;

/// Sends every frame to the AF_XDP socket bound to its receive queue:
///
/// ```c
/// int polld_redirect(struct xdp_md *ctx) {
///     /* XDP_PASS when no socket sits at that index: the kernel gets the frame. */
///     return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
/// }
/// ```
pub fn redirect_to_xsk(xsks_map_fd: i32) -> Vec<Insn> {
    redirect_tail(R1, xsks_map_fd).to_vec()
}

/// `return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS)`, the context in
/// `ctx`.
fn redirect_tail(ctx: Reg, xsks_map_fd: i32) -> [Insn; 6] {
    let [map_lo, map_hi] = Insn::ld_map_fd(R1, xsks_map_fd);
    [
        Insn::ldx_w(R2, ctx, XDP_MD_RX_QUEUE_INDEX),
        map_lo,
        map_hi,
        Insn::mov64_imm(R3, XDP_PASS),
        Insn::call(Helper::RedirectMap),
        Insn::exit(),
    ]
}

/// Like [`redirect_to_xsk`], but what polld never forwards goes to the kernel, so that
/// the host stays reachable on the interface and keeps its neighbours: IPv4 packets and
/// ARP for an address in `local4` (the box's addresses and broadcasts, keyed by their
/// 4 bytes as on the wire), IPv4 multicast, IPv6 packets for an address in `local6`
/// (16 bytes), IPv6 multicast, ICMPv6 neighbour discovery whatever its destination, and
/// every ethertype but IPv4, ARP and IPv6 (VLAN tags included). A frame too short for
/// the header its ethertype announces goes to the socket, which counts it by reason.
///
/// ```c
/// int polld_redirect_local(struct xdp_md *ctx) {
///     void *data = (void *)(long)ctx->data, *data_end = (void *)(long)ctx->data_end;
///     if (data + 14 > data_end)
///         goto redirect;
///     switch (*(__u16 *)(data + 12)) {
///     case htons(ETH_P_IP):
///         if (data + 14 + 20 > data_end)
///             goto redirect;
///         if (*(__u8 *)(data + 14 + 16) - 224 < 16)      /* 224.0.0.0/4 */
///             return XDP_PASS;
///         if (bpf_map_lookup_elem(&local4, data + 14 + 16))
///             return XDP_PASS;
///         goto redirect;
///     case htons(ETH_P_ARP):
///         if (data + 14 + 28 > data_end)
///             goto redirect;
///         if (bpf_map_lookup_elem(&local4, data + 14 + 24))   /* target address */
///             return XDP_PASS;
///         goto redirect;
///     case htons(ETH_P_IPV6):
///         if (data + 14 + 40 > data_end)
///             goto redirect;
///         if (*(__u8 *)(data + 14 + 24) == 0xff)          /* ff00::/8 */
///             return XDP_PASS;
///         if (*(__u8 *)(data + 14 + 6) == IPPROTO_ICMPV6 && data + 14 + 41 <= data_end
///             && *(__u8 *)(data + 14 + 40) - 133 < 5)     /* RS, RA, NS, NA, redirect */
///             return XDP_PASS;
///         if (bpf_map_lookup_elem(&local6, data + 14 + 24))
///             return XDP_PASS;
///         goto redirect;
///     default:
///         return XDP_PASS;
///     }
/// redirect:
///     return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
/// }
/// ```
///
/// The map keys point into the frame itself, after the bounds check that covers them.
pub fn redirect_to_xsk_except_local(xsks_map_fd: i32, local4_fd: i32, local6_fd: i32) -> Vec<Insn> {
    let mut a = Asm::default();
    let [redirect, pass, ipv4, arp, ipv6, lookup4, own6] = [(); 7].map(|()| a.label());
    // The frame's bounds: `data + len > data_end` jumps to `redirect`.
    let short = |a: &mut Asm, len: i32, to: Label| {
        a.push([Insn::mov64_reg(R4, R2), Insn::add64_imm(R4, len)]);
        a.jump(Insn::jgt_reg(R4, R3, 0), to);
    };
    let lookup = |a: &mut Asm, map_fd: i32| {
        a.push(Insn::ld_map_fd(R1, map_fd));
        a.push([Insn::call(Helper::MapLookupElem)]);
        a.jump(Insn::jne_imm(R0, 0, 0), pass);
        a.jump(Insn::ja(0), redirect);
    };
    a.push([
        Insn::mov64_reg(R6, R1), // ctx, kept across the calls
        Insn::ldx_w(R2, R1, XDP_MD_DATA),
        Insn::ldx_w(R3, R1, XDP_MD_DATA_END),
    ]);
    short(&mut a, ETH_HEADER, redirect);
    a.push([Insn::ldx_h(R5, R2, ETH_TYPE)]);
    a.jump(Insn::jeq_imm(R5, ETH_P_IP_WIRE, 0), ipv4);
    a.jump(Insn::jeq_imm(R5, ETH_P_ARP_WIRE, 0), arp);
    a.jump(Insn::jeq_imm(R5, ETH_P_IPV6_WIRE, 0), ipv6);
    a.jump(Insn::ja(0), pass);

    a.place(ipv4);
    short(&mut a, ETH_HEADER + 20, redirect);
    a.push([Insn::ldx_b(R5, R2, IPV4_DADDR), Insn::add64_imm(R5, -224)]);
    a.jump(Insn::jlt_imm(R5, 16, 0), pass);
    a.push([Insn::add64_imm(R2, i32::from(IPV4_DADDR))]);
    a.jump(Insn::ja(0), lookup4);

    a.place(arp);
    short(&mut a, ETH_HEADER + 28, redirect);
    a.push([Insn::add64_imm(R2, i32::from(ARP_TARGET_IP))]);
    a.place(lookup4);
    lookup(&mut a, local4_fd);

    a.place(ipv6);
    short(&mut a, ETH_HEADER + 40, redirect);
    a.push([Insn::ldx_b(R5, R2, IPV6_DADDR)]);
    a.jump(Insn::jeq_imm(R5, 0xff, 0), pass);
    a.push([Insn::ldx_b(R5, R2, IPV6_NEXT_HEADER)]);
    a.jump(Insn::jne_imm(R5, ICMPV6, 0), own6);
    short(&mut a, ETH_HEADER + 41, own6);
    a.push([
        Insn::ldx_b(R5, R2, IPV6_PAYLOAD),
        Insn::add64_imm(R5, -ND_FIRST_TYPE),
    ]);
    a.jump(Insn::jlt_imm(R5, ND_TYPES, 0), pass);
    a.place(own6);
    a.push([Insn::add64_imm(R2, i32::from(IPV6_DADDR))]);
    lookup(&mut a, local6_fd);

    a.place(pass);
    a.push([Insn::mov64_imm(R0, XDP_PASS), Insn::exit()]);
    a.place(redirect);
    a.push(redirect_tail(R6, xsks_map_fd));
    a.finish()
}

/// Counts frames and bytes in a one-entry per-CPU array, then drops the frame:
///
/// ```c
/// struct counts { __u64 packets, bytes; };
/// int polld_count(struct xdp_md *ctx) {
///     __u64 len = bpf_xdp_get_buff_len(ctx);   /* whole frame, fragments included */
///     __u32 key = 0;
///     struct counts *c = bpf_map_lookup_elem(&counters, &key);
///     if (c) {          /* always true for an array; the verifier needs the check */
///         c->packets += 1;
///         c->bytes += len;
///     }
///     return XDP_DROP;
/// }
/// ```
///
/// Per-CPU values need no atomics: an XDP program never migrates while it runs.
/// The length comes from the helper rather than `data_end - data` because subtracting
/// packet pointers needs CAP_PERFMON, which polld does not otherwise require.
pub fn count_and_drop(counters_map_fd: i32) -> Vec<Insn> {
    let mut prog = vec![
        Insn::call(Helper::XdpGetBuffLen),
        Insn::mov64_reg(R7, R0),
        Insn::st_w(R10, -4, 0),
        Insn::mov64_reg(R2, R10),
        Insn::add64_imm(R2, -4),
    ];
    prog.extend(Insn::ld_map_fd(R1, counters_map_fd));
    prog.extend([
        Insn::call(Helper::MapLookupElem),
        Insn::jeq_imm(R0, 0, 6),
        Insn::ldx_dw(R6, R0, 0),
        Insn::add64_imm(R6, 1),
        Insn::stx_dw(R0, 0, R6),
        Insn::ldx_dw(R6, R0, 8),
        Insn::add64_reg(R6, R7),
        Insn::stx_dw(R0, 8, R6),
        Insn::mov64_imm(R0, XDP_DROP),
        Insn::exit(),
    ]);
    prog
}
