//! The instruction sequences of polld's XDP programs, each with its C equivalent.
//!
//! Map file descriptors are baked into the instructions (`ld_map_fd`), so each builder takes
//! the fd of the map the program uses.

use super::insn::{Helper, Insn, R0, R1, R10, R2, R3, R4, R6, R7};

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
/// Offsets in an Ethernet frame: ethertype, IPv4 destination, ARP target address.
const ETH_TYPE: i16 = 12;
const IPV4_DADDR: i16 = 14 + 16;
const ARP_TARGET_IP: i16 = 14 + 24;
/// A frame must hold this much for either address to be read: an ARP packet for IPv4.
const CLASSIFIED_LEN: i32 = 14 + 28;

/// Sends every frame to the AF_XDP socket bound to its receive queue:
///
/// ```c
/// int polld_redirect(struct xdp_md *ctx) {
///     /* XDP_PASS when no socket sits at that index: the kernel gets the frame. */
///     return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
/// }
/// ```
pub fn redirect_to_xsk(xsks_map_fd: i32) -> Vec<Insn> {
    let mut prog = vec![Insn::ldx_w(R2, R1, XDP_MD_RX_QUEUE_INDEX)];
    prog.extend(Insn::ld_map_fd(R1, xsks_map_fd));
    prog.extend([
        Insn::mov64_imm(R3, XDP_PASS),
        Insn::call(Helper::RedirectMap),
        Insn::exit(),
    ]);
    prog
}

/// Like [`redirect_to_xsk`], but IPv4 packets and ARP for one of the box's own addresses
/// (keys of the `local_addrs` hash map) go to the kernel, so the host stays reachable:
///
/// ```c
/// int polld_redirect_local(struct xdp_md *ctx) {
///     void *data = (void *)(long)ctx->data, *data_end = (void *)(long)ctx->data_end;
///     __u32 addr;
///     if (data + 42 > data_end)
///         goto redirect;
///     __u16 proto = *(__u16 *)(data + 12);
///     if (proto == htons(ETH_P_IP))
///         addr = *(__u32 *)(data + 14 + 16);          /* iph->daddr */
///     else if (proto == htons(ETH_P_ARP))
///         addr = *(__u32 *)(data + 14 + 24);          /* ARP target IPv4 address */
///     else
///         goto redirect;
///     if (bpf_map_lookup_elem(&local_addrs, &addr))
///         return XDP_PASS;
/// redirect:
///     return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
/// }
/// ```
pub fn redirect_to_xsk_except_local(xsks_map_fd: i32, local_addrs_map_fd: i32) -> Vec<Insn> {
    // Jump offsets count instructions after the jump; "-> redirect" is the first
    // instruction of the `redirect_to_xsk` tail appended below (index 22).
    let mut prog = vec![
        Insn::ldx_w(R2, R1, XDP_MD_DATA),      // 0
        Insn::ldx_w(R3, R1, XDP_MD_DATA_END),  // 1
        Insn::mov64_reg(R4, R2),               // 2
        Insn::add64_imm(R4, CLASSIFIED_LEN),   // 3
        Insn::jgt_reg(R4, R3, 17),             // 4: -> redirect
        Insn::ldx_h(R4, R2, ETH_TYPE),         // 5
        Insn::jne_imm(R4, ETH_P_IP_WIRE, 2),   // 6: -> 9
        Insn::ldx_w(R4, R2, IPV4_DADDR),       // 7
        Insn::ja(2),                           // 8: -> 11
        Insn::jne_imm(R4, ETH_P_ARP_WIRE, 12), // 9: -> redirect
        Insn::ldx_w(R4, R2, ARP_TARGET_IP),    // 10
        Insn::stx_w(R10, -4, R4),              // 11
        Insn::mov64_reg(R6, R1),               // 12: keep ctx across the call
        Insn::mov64_reg(R2, R10),              // 13
        Insn::add64_imm(R2, -4),               // 14
    ];
    prog.extend(Insn::ld_map_fd(R1, local_addrs_map_fd)); // 15, 16
    prog.extend([
        Insn::call(Helper::MapLookupElem), // 17
        Insn::mov64_reg(R1, R6),           // 18
        Insn::jeq_imm(R0, 0, 2),           // 19: -> redirect
        Insn::mov64_imm(R0, XDP_PASS),     // 20
        Insn::exit(),                      // 21
    ]);
    debug_assert_eq!(prog.len(), 22, "jump offsets above assume the tail at 22");
    prog.extend(redirect_to_xsk(xsks_map_fd));
    prog
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
