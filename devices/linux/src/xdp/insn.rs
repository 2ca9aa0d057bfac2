//! A tiny typed builder for eBPF instructions, so that polld's XDP programs can be written
//! in Rust and loaded without clang or libbpf.
//!
//! Each constructor emits one `struct bpf_insn` (two for [`Insn::ld_map_fd`]); the names
//! follow the kernel's `BPF_*` macros in `include/linux/filter.h`, e.g.
//! [`Insn::ldx_w`] is `BPF_LDX_MEM(BPF_W, ...)`. Only the instructions polld's programs use
//! exist here.

/// An eBPF register, `r0` … `r10`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reg(u8);

/// Return value of calls and of the program.
pub const R0: Reg = Reg(0);
/// First argument; the program's context (`struct xdp_md *`) on entry.
pub const R1: Reg = Reg(1);
pub const R2: Reg = Reg(2);
pub const R3: Reg = Reg(3);
pub const R4: Reg = Reg(4);
/// Callee-saved: survives helper calls.
pub const R6: Reg = Reg(6);
/// Callee-saved: survives helper calls.
pub const R7: Reg = Reg(7);
/// Caller-saved scratch, like r1–r4.
pub const R5: Reg = Reg(5);
/// Read-only frame pointer (top of the 512-byte stack).
pub const R10: Reg = Reg(10);

/// Kernel helper functions (`enum bpf_func_id`).
#[derive(Clone, Copy, Debug)]
#[repr(i32)]
pub enum Helper {
    MapLookupElem = 1,
    RedirectMap = 51,
    XdpGetBuffLen = 188,
}

/// One encoded instruction, laid out as the kernel's `struct bpf_insn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Insn {
    code: u8,
    /// `dst_reg` in the low nibble, `src_reg` in the high nibble.
    regs: u8,
    off: i16,
    imm: i32,
}

// Instruction classes and fields (include/uapi/linux/bpf_common.h, bpf.h).
const BPF_LD: u8 = 0x00;
const BPF_LDX: u8 = 0x01;
const BPF_ST: u8 = 0x02;
const BPF_STX: u8 = 0x03;
const BPF_JMP: u8 = 0x05;
const BPF_ALU64: u8 = 0x07;
const BPF_W: u8 = 0x00;
const BPF_H: u8 = 0x08;
const BPF_B: u8 = 0x10;
const BPF_DW: u8 = 0x18;
const BPF_IMM: u8 = 0x00;
const BPF_MEM: u8 = 0x60;
const BPF_K: u8 = 0x00;
const BPF_X: u8 = 0x08;
const BPF_ADD: u8 = 0x00;
const BPF_MOV: u8 = 0xb0;
const BPF_JA: u8 = 0x00;
const BPF_JEQ: u8 = 0x10;
const BPF_JGT: u8 = 0x20;
const BPF_JNE: u8 = 0x50;
const BPF_JLT: u8 = 0xa0;
const BPF_CALL: u8 = 0x80;
const BPF_EXIT: u8 = 0x90;
/// `src_reg` of a 64-bit immediate load that holds a map file descriptor.
const BPF_PSEUDO_MAP_FD: u8 = 1;

impl Insn {
    fn new(code: u8, dst: Reg, src: Reg, off: i16, imm: i32) -> Insn {
        Insn {
            code,
            regs: (src.0 << 4) | dst.0,
            off,
            imm,
        }
    }

    /// `dst = imm`
    pub fn mov64_imm(dst: Reg, imm: i32) -> Insn {
        Insn::new(BPF_ALU64 | BPF_MOV | BPF_K, dst, R0, 0, imm)
    }

    /// `dst = src`
    pub fn mov64_reg(dst: Reg, src: Reg) -> Insn {
        Insn::new(BPF_ALU64 | BPF_MOV | BPF_X, dst, src, 0, 0)
    }

    /// `dst += imm`
    pub fn add64_imm(dst: Reg, imm: i32) -> Insn {
        Insn::new(BPF_ALU64 | BPF_ADD | BPF_K, dst, R0, 0, imm)
    }

    /// `dst += src`
    pub fn add64_reg(dst: Reg, src: Reg) -> Insn {
        Insn::new(BPF_ALU64 | BPF_ADD | BPF_X, dst, src, 0, 0)
    }

    /// `dst = *(u32 *)(src + off)`
    pub fn ldx_w(dst: Reg, src: Reg, off: i16) -> Insn {
        Insn::new(BPF_LDX | BPF_MEM | BPF_W, dst, src, off, 0)
    }

    /// `dst = *(u16 *)(src + off)`
    pub fn ldx_h(dst: Reg, src: Reg, off: i16) -> Insn {
        Insn::new(BPF_LDX | BPF_MEM | BPF_H, dst, src, off, 0)
    }

    /// `dst = *(u8 *)(src + off)`
    pub fn ldx_b(dst: Reg, src: Reg, off: i16) -> Insn {
        Insn::new(BPF_LDX | BPF_MEM | BPF_B, dst, src, off, 0)
    }

    /// `dst = *(u64 *)(src + off)`
    pub fn ldx_dw(dst: Reg, src: Reg, off: i16) -> Insn {
        Insn::new(BPF_LDX | BPF_MEM | BPF_DW, dst, src, off, 0)
    }

    /// `*(u64 *)(dst + off) = src`
    pub fn stx_dw(dst: Reg, off: i16, src: Reg) -> Insn {
        Insn::new(BPF_STX | BPF_MEM | BPF_DW, dst, src, off, 0)
    }

    /// `*(u32 *)(dst + off) = imm`
    pub fn st_w(dst: Reg, off: i16, imm: i32) -> Insn {
        Insn::new(BPF_ST | BPF_MEM | BPF_W, dst, R0, off, imm)
    }

    /// `dst = &map` — the two-slot 64-bit load the verifier rewrites into a map pointer.
    pub fn ld_map_fd(dst: Reg, map_fd: i32) -> [Insn; 2] {
        [
            Insn::new(
                BPF_LD | BPF_DW | BPF_IMM,
                dst,
                Reg(BPF_PSEUDO_MAP_FD),
                0,
                map_fd,
            ),
            Insn::new(0, R0, R0, 0, 0),
        ]
    }

    /// `if dst == imm goto pc + 1 + off`
    pub fn jeq_imm(dst: Reg, imm: i32, off: i16) -> Insn {
        Insn::new(BPF_JMP | BPF_JEQ | BPF_K, dst, R0, off, imm)
    }

    /// `if dst != imm goto pc + 1 + off`
    pub fn jne_imm(dst: Reg, imm: i32, off: i16) -> Insn {
        Insn::new(BPF_JMP | BPF_JNE | BPF_K, dst, R0, off, imm)
    }

    /// `if dst < imm goto pc + 1 + off` (unsigned)
    pub fn jlt_imm(dst: Reg, imm: i32, off: i16) -> Insn {
        Insn::new(BPF_JMP | BPF_JLT | BPF_K, dst, R0, off, imm)
    }

    /// `if dst > src goto pc + 1 + off` (unsigned)
    pub fn jgt_reg(dst: Reg, src: Reg, off: i16) -> Insn {
        Insn::new(BPF_JMP | BPF_JGT | BPF_X, dst, src, off, 0)
    }

    /// `goto pc + 1 + off`
    pub fn ja(off: i16) -> Insn {
        Insn::new(BPF_JMP | BPF_JA, R0, R0, off, 0)
    }

    /// `r0 = helper(r1, r2, r3, r4, r5)`; clobbers r1–r5.
    pub fn call(helper: Helper) -> Insn {
        Insn::new(BPF_JMP | BPF_CALL, R0, R0, 0, helper as i32)
    }

    /// `return r0`
    pub fn exit() -> Insn {
        Insn::new(BPF_JMP | BPF_EXIT, R0, R0, 0, 0)
    }
}

/// A place in a program that jumps name ([`Asm::jump`]) before it is placed
/// ([`Asm::place`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Label(usize);

/// A program written with labels: each jump names its target, and [`Asm::finish`] writes
/// the instruction counts the kernel wants, so that an edit cannot leave one stale.
#[derive(Debug, Default)]
pub struct Asm {
    insns: Vec<Insn>,
    /// Each label's instruction index, once placed.
    places: Vec<Option<usize>>,
    /// The jumps to patch: instruction index and target.
    jumps: Vec<(usize, Label)>,
}

impl Asm {
    /// A label to jump to, placed later.
    pub fn label(&mut self) -> Label {
        self.places.push(None);
        Label(self.places.len() - 1)
    }

    /// `label` names the next instruction.
    pub fn place(&mut self, label: Label) {
        self.places[label.0] = Some(self.insns.len());
    }

    pub fn push(&mut self, insns: impl IntoIterator<Item = Insn>) {
        self.insns.extend(insns);
    }

    /// A jump instruction (built with any offset) whose target is `to`.
    pub fn jump(&mut self, jump: Insn, to: Label) {
        self.jumps.push((self.insns.len(), to));
        self.insns.push(jump);
    }

    /// The instructions, every jump pointing at its label.
    ///
    /// # Panics
    /// When a label jumped to was never placed: a mistake in the program's builder.
    pub fn finish(mut self) -> Vec<Insn> {
        for (at, to) in self.jumps {
            let target = self.places[to.0].expect("every label jumped to is placed");
            self.insns[at].off = (target as isize - at as isize - 1) as i16;
        }
        self.insns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Expected bytes follow `struct bpf_insn` (code, dst | src << 4, off, imm; little endian).
    #[test]
    fn encodings_match_the_kernel_layout() {
        let bytes = |insn: Insn| -> [u8; 8] {
            let mut out = [0u8; 8];
            out[0] = insn.code;
            out[1] = insn.regs;
            out[2..4].copy_from_slice(&insn.off.to_le_bytes());
            out[4..8].copy_from_slice(&insn.imm.to_le_bytes());
            out
        };
        let [map_lo, map_hi] = Insn::ld_map_fd(R1, 7);
        let cases = [
            // r0 = 1
            (Insn::mov64_imm(R0, 1), [0xb7, 0x00, 0, 0, 1, 0, 0, 0]),
            // r2 = *(u32 *)(r1 + 16)
            (Insn::ldx_w(R2, R1, 16), [0x61, 0x12, 16, 0, 0, 0, 0, 0]),
            // *(u32 *)(r10 - 4) = 0
            (Insn::st_w(R10, -4, 0), [0x62, 0x0a, 0xfc, 0xff, 0, 0, 0, 0]),
            // *(u64 *)(r0 + 8) = r1
            (Insn::stx_dw(R0, 8, R1), [0x7b, 0x10, 8, 0, 0, 0, 0, 0]),
            // r3 = *(u16 *)(r2 + 12)
            (Insn::ldx_h(R3, R2, 12), [0x69, 0x23, 12, 0, 0, 0, 0, 0]),
            // r5 = *(u8 *)(r2 + 38)
            (Insn::ldx_b(R5, R2, 38), [0x71, 0x25, 38, 0, 0, 0, 0, 0]),
            // if r4 > r3 goto +9; if r3 != 8 goto +2; goto +1
            (Insn::jgt_reg(R4, R3, 9), [0x2d, 0x34, 9, 0, 0, 0, 0, 0]),
            (Insn::jne_imm(R3, 8, 2), [0x55, 0x03, 2, 0, 8, 0, 0, 0]),
            (Insn::ja(1), [0x05, 0, 1, 0, 0, 0, 0, 0]),
            // if r0 == 0 goto +3; if r5 < 5 goto +1
            (Insn::jeq_imm(R0, 0, 3), [0x15, 0x00, 3, 0, 0, 0, 0, 0]),
            (Insn::jlt_imm(R5, 5, 1), [0xa5, 0x05, 1, 0, 5, 0, 0, 0]),
            // call 51; exit
            (
                Insn::call(Helper::RedirectMap),
                [0x85, 0, 0, 0, 51, 0, 0, 0],
            ),
            (Insn::exit(), [0x95, 0, 0, 0, 0, 0, 0, 0]),
            // r1 = map fd 7 (ld_imm64 with src = BPF_PSEUDO_MAP_FD)
            (map_lo, [0x18, 0x11, 0, 0, 7, 0, 0, 0]),
            (map_hi, [0; 8]),
        ];
        for (insn, expected) in cases {
            assert_eq!(bytes(insn), expected, "{insn:?}");
        }
        assert_eq!(std::mem::size_of::<Insn>(), 8);
    }

    #[test]
    fn labels_become_instruction_counts_forward_and_back() {
        let mut asm = Asm::default();
        let (top, end) = (asm.label(), asm.label());
        asm.place(top);
        asm.jump(Insn::jeq_imm(R0, 0, 0), end); // 0: -> 3
        asm.push([Insn::mov64_imm(R0, 1)]); // 1
        asm.jump(Insn::ja(0), top); // 2: -> 0
        asm.place(end);
        asm.push([Insn::exit()]); // 3
        let prog = asm.finish();
        assert_eq!(prog[0], Insn::jeq_imm(R0, 0, 2));
        assert_eq!(prog[2], Insn::ja(-3));
    }
}
