//! The instruction sequences of polld's XDP programs, each with its C equivalent.
//!
//! Map file descriptors are baked into the instructions (`ld_map_fd`), so each builder takes
//! the fd of the map the program uses.

use super::insn::{Helper, Insn, R0, R1, R10, R2, R3, R6, R7};

/// XDP verdicts (`enum xdp_action`).
const XDP_DROP: i32 = 1;
const XDP_PASS: i32 = 2;

/// Offset of `rx_queue_index` in `struct xdp_md`.
const XDP_MD_RX_QUEUE_INDEX: i16 = 16;

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

/// Drops every frame, at the earliest point the kernel offers:
///
/// ```c
/// int polld_drop(struct xdp_md *ctx) { return XDP_DROP; }
/// ```
pub fn drop_all() -> Vec<Insn> {
    vec![Insn::mov64_imm(R0, XDP_DROP), Insn::exit()]
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
