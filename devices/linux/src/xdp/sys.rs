//! The raw `bpf(2)` system call: the handful of commands polld needs to create maps, load
//! XDP programs and attach them through a `bpf_link`, with no libbpf.
//!
//! Each command takes its own prefix of `union bpf_attr` (include/uapi/linux/bpf.h). We pass
//! exactly that prefix and its size; the kernel zero-fills the rest of the union.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use super::insn::Insn;

const BPF_MAP_CREATE: libc::c_int = 0;
const BPF_MAP_LOOKUP_ELEM: libc::c_int = 1;
const BPF_MAP_UPDATE_ELEM: libc::c_int = 2;
const BPF_MAP_DELETE_ELEM: libc::c_int = 3;
const BPF_PROG_LOAD: libc::c_int = 5;
const BPF_LINK_CREATE: libc::c_int = 28;

pub const BPF_MAP_TYPE_HASH: u32 = 1;
pub const BPF_MAP_TYPE_PERCPU_ARRAY: u32 = 6;
pub const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `enum bpf_attach_type` value of an XDP attachment.
const BPF_XDP: u32 = 37;
/// `BPF_ANY`: create or overwrite a map element.
const BPF_ANY: u64 = 0;

/// `XDP_FLAGS_SKB_MODE`: generic XDP, run from the network stack on an skb.
pub const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
/// `XDP_FLAGS_DRV_MODE`: native XDP, run by the driver before an skb exists.
pub const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// Object names are at most 15 characters plus the terminating NUL (`BPF_OBJ_NAME_LEN`).
fn object_name(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    let len = name.len().min(15);
    out[..len].copy_from_slice(&name.as_bytes()[..len]);
    out
}

fn bpf<T>(cmd: libc::c_int, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a properly laid out prefix of `union bpf_attr` for `cmd`, valid for
    // its whole size; pointers inside it reference buffers the caller keeps alive.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T as *mut libc::c_void,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// [`bpf`] for a command that creates an object: its new file descriptor.
fn bpf_new_fd<T>(cmd: libc::c_int, attr: &mut T) -> io::Result<OwnedFd> {
    let fd = bpf(cmd, attr)? as libc::c_int;
    // SAFETY: a command that creates an object returns a new descriptor, owned by nobody
    // else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[repr(C)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

/// `BPF_MAP_CREATE`: a map with `key_size`-byte keys (4 for queue numbers, CPU-array
/// slots and IPv4 addresses, 16 for IPv6 addresses).
pub fn map_create(
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    name: &str,
) -> io::Result<OwnedFd> {
    let mut attr = MapCreateAttr {
        map_type,
        key_size,
        value_size,
        max_entries,
        map_flags: 0,
        inner_map_fd: 0,
        numa_node: 0,
        map_name: object_name(name),
    };
    bpf_new_fd(BPF_MAP_CREATE, &mut attr)
}

#[repr(C)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// `key` must be the map's key size: the kernel reads exactly that many bytes from it.
fn map_elem(
    cmd: libc::c_int,
    map: BorrowedFd<'_>,
    key: &[u8],
    value: *mut u8,
    flags: u64,
) -> io::Result<()> {
    let mut attr = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        _pad: 0,
        key: key.as_ptr() as u64,
        value: value as u64,
        flags,
    };
    bpf(cmd, &mut attr).map(drop)
}

/// `BPF_MAP_UPDATE_ELEM` with `BPF_ANY`: `map[key] = value`, `key` as many bytes as
/// the map's keys.
pub fn map_update(map: BorrowedFd<'_>, key: &[u8], value: &[u8]) -> io::Result<()> {
    // The kernel only reads through `value` for an update.
    map_elem(
        BPF_MAP_UPDATE_ELEM,
        map,
        key,
        value.as_ptr() as *mut u8,
        BPF_ANY,
    )
}

/// `BPF_MAP_DELETE_ELEM`: removes `map[key]` (`ENOENT` when it is not there).
pub fn map_delete(map: BorrowedFd<'_>, key: &[u8]) -> io::Result<()> {
    map_elem(BPF_MAP_DELETE_ELEM, map, key, std::ptr::null_mut(), 0)
}

/// `BPF_MAP_LOOKUP_ELEM`: copies `map[key]` (a 4-byte key) into `value`, which must be
/// the value size (times the number of possible CPUs for a per-CPU map).
pub fn map_lookup(map: BorrowedFd<'_>, key: u32, value: &mut [u8]) -> io::Result<()> {
    map_elem(
        BPF_MAP_LOOKUP_ELEM,
        map,
        &key.to_ne_bytes(),
        value.as_mut_ptr(),
        0,
    )
}

#[repr(C)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// `BPF_PROG_LOAD` of an XDP program. With `log`, the verifier writes its log there
/// (log level 1), which is how a rejection is explained.
pub fn prog_load(insns: &[Insn], name: &str, log: Option<&mut [u8]>) -> io::Result<OwnedFd> {
    const LICENSE: &std::ffi::CStr = c"Dual BSD/GPL";
    let (log_level, log_size, log_buf) = match log {
        Some(buf) => (1, buf.len() as u32, buf.as_mut_ptr() as u64),
        None => (0, 0, 0),
    };
    let mut attr = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_XDP,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: LICENSE.as_ptr() as u64,
        log_level,
        log_size,
        log_buf,
        kern_version: 0,
        prog_flags: 0,
        prog_name: object_name(name),
        prog_ifindex: 0,
        expected_attach_type: BPF_XDP,
    };
    bpf_new_fd(BPF_PROG_LOAD, &mut attr)
}

#[repr(C)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

/// `BPF_LINK_CREATE` of an XDP program on an interface. The program stays attached exactly
/// as long as the returned link fd is open, so it is detached when the process exits or
/// crashes. `flags` selects the mode ([`XDP_FLAGS_DRV_MODE`] or [`XDP_FLAGS_SKB_MODE`]).
pub fn link_create(prog: BorrowedFd<'_>, ifindex: u32, flags: u32) -> io::Result<OwnedFd> {
    let mut attr = LinkCreateAttr {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type: BPF_XDP,
        flags,
    };
    bpf_new_fd(BPF_LINK_CREATE, &mut attr)
}
