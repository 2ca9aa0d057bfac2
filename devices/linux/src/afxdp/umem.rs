//! A UMEM: the memory an AF_XDP socket's frames live in (mapped on huge pages), its
//! registration with the kernel, and how its frames are split between the sockets bound
//! to it.

use std::io;
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use polld_core::PoolId;
use rustix::mm::{Advice, MapFlags, ProtFlags};
use xdpilone::Umem;

use super::AfXdpConfig;
use crate::xdp::{self, XdpError};

/// Anonymous memory backing a UMEM, unmapped on drop.
pub(super) struct UmemArea {
    /// The mapping as made (unmapped on drop).
    map: NonNull<u8>,
    map_len: usize,
    /// The UMEM inside it: `len` bytes from `base`, aligned to a huge page.
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is owned by one `UmemFrames`; each of its frames belongs to exactly
// one party at a time (a socket's lists, a ring, the kernel, the spare list), and only the
// party that owns a frame touches its bytes.
unsafe impl Send for UmemArea {}
// SAFETY: as above: shared references only hand out frames their caller owns.
unsafe impl Sync for UmemArea {}

/// Transparent huge pages on x86-64.
const HUGE_PAGE: usize = 2 << 20;

impl UmemArea {
    /// Maps `len` bytes aligned to a huge page and asks for transparent huge pages. Frames
    /// lie 2 or 4 KiB apart, so with 4 KiB pages a batch of frames touches as many pages
    /// (each TLB miss a two-level page walk in a guest); with 2 MiB ones the default 8 MiB
    /// UMEM takes four entries. Without THP (`never`, or no huge page free) the advice is
    /// ignored and the area is made of small pages, as before.
    pub(super) fn new(len: usize) -> io::Result<UmemArea> {
        let map_len = len + HUGE_PAGE;
        // SAFETY: a fresh private anonymous mapping, at an address the kernel picks: no
        // memory we use changes.
        let ptr = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                map_len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE,
            )
        }?;
        let map = NonNull::new(ptr.cast::<u8>()).expect("mmap never returns NULL on success");
        let skip = (HUGE_PAGE - map.as_ptr() as usize % HUGE_PAGE) % HUGE_PAGE;
        // `skip` < HUGE_PAGE, and the mapping is `len + HUGE_PAGE` long.
        let base = NonNull::new(map.as_ptr().wrapping_add(skip)).expect("inside the mapping");
        let area = UmemArea {
            map,
            map_len,
            base,
            len,
        };
        // MADV_HUGEPAGE failing (THP compiled out) only leaves small pages. The pages are
        // faulted in now, by a write where MADV_POPULATE_WRITE is older than the kernel.
        // SAFETY: advice on our own fresh mapping, then writing its bytes (`len` from
        // `base` lie inside it), which nothing references yet.
        unsafe {
            let _ = rustix::mm::madvise(base.as_ptr().cast(), len, Advice::LinuxHugepage);
            if rustix::mm::madvise(base.as_ptr().cast(), len, Advice::LinuxPopulateWrite).is_err() {
                std::ptr::write_bytes(base.as_ptr(), 0, len);
            }
        }
        Ok(area)
    }

    pub(super) fn as_slice_ptr(&self) -> NonNull<[u8]> {
        NonNull::slice_from_raw_parts(self.base, self.len)
    }

    /// Asks the CPU to start loading the cache line at `addr` (a hint: an address outside
    /// the UMEM is ignored, and nothing is read or written).
    pub(super) fn prefetch(&self, addr: u64) {
        match usize::try_from(addr) {
            Ok(offset) if offset < self.len => {
                // `wrapping_add` stays in bounds here and needs no unsafe; a prefetch
                // never faults.
                crate::prefetch::read(self.base.as_ptr().wrapping_add(offset));
            }
            _ => {}
        }
    }

    /// The bytes `[addr, addr + len)` of the UMEM, or `None` if they do not fit.
    ///
    /// # Safety
    /// No other live reference may cover these bytes, and the kernel must not own the frame
    /// (it is in the rx ring, or in the free list of transmit frames): the caller owns it.
    #[allow(clippy::mut_from_ref)]
    pub(super) unsafe fn frame_mut(&self, addr: u64, len: usize) -> Option<&mut [u8]> {
        let start = usize::try_from(addr).ok()?;
        if start.checked_add(len)? > self.len {
            return None;
        }
        // SAFETY: in bounds (checked above); exclusivity is the caller's promise.
        Some(unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr().add(start), len) })
    }
}

impl Drop for UmemArea {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping created in `new`; the rings that referenced it
        // were dropped before (field order in `AfXdp`, the last member of a shared UMEM).
        let _ = unsafe { rustix::mm::munmap(self.map.as_ptr().cast(), self.map_len) };
    }
}

/// Distinguishes the UMEMs of this process, as the pools devices lend frames from.
static NEXT_POOL: AtomicU64 = AtomicU64::new(1);

/// xdpilone's handle of a registered UMEM, kept to bind more sockets to it.
pub(super) struct Registration(pub(super) Umem);

// SAFETY: the handle holds the address of the area `UmemFrames` owns and the UMEM socket's
// fd; it is used only under the group's mutex, to create and bind sockets.
unsafe impl Send for Registration {}

/// One UMEM: its memory, its registration with the kernel (made when the first socket
/// binds, in that socket's namespace), and for a shared one the frames its members hand
/// each other.
pub(super) struct UmemFrames {
    pub(super) pool: PoolId,
    /// Whether the members lend frames to each other ([`SharedUmem`]).
    pub(super) shared: bool,
    /// Frame size and ring sizes, the same for every member.
    pub(super) sizes: AfXdpConfig,
    /// Sockets it has room for.
    pub(super) members: u32,
    pub(super) group: Mutex<Group>,
    // Last: unmapped after the registration above lets go of it.
    pub(super) area: UmemArea,
}

/// What the members of one UMEM share, behind its mutex.
pub(super) struct Group {
    pub(super) registration: Option<Registration>,
    pub(super) joined: u32,
    /// Receive frames the member that sent them returned, for any member's fill ring.
    pub(super) spare: Vec<u64>,
}

impl UmemFrames {
    pub(super) fn new(
        members: u32,
        shared: bool,
        sizes: &AfXdpConfig,
    ) -> xdp::Result<Arc<UmemFrames>> {
        sizes.validate()?;
        let len = members as usize
            * Self::frames_per_member(shared, sizes) as usize
            * sizes.frame_size as usize;
        let area = UmemArea::new(len)
            .map_err(|e| XdpError::os(format!("allocating an AF_XDP UMEM of {len} bytes"), e))?;
        Ok(Arc::new(UmemFrames {
            pool: PoolId(NEXT_POOL.fetch_add(1, Ordering::Relaxed)),
            shared,
            sizes: sizes.clone(),
            members,
            group: Mutex::new(Group {
                registration: None,
                joined: 0,
                spare: Vec::new(),
            }),
            area,
        }))
    }

    /// Receive frames, own transmit frames, and in a shared UMEM as many spare frames.
    pub(super) fn frames_per_member(shared: bool, sizes: &AfXdpConfig) -> u32 {
        sizes.rx_frames + sizes.tx_frames * if shared { 2 } else { 1 }
    }

    pub(super) fn group(&self) -> std::sync::MutexGuard<'_, Group> {
        // Nothing panics while holding it; a poisoned lock still holds consistent lists.
        self.group.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Member `index`'s receive frames and transmit frames (addresses), and its spare ones.
    pub(super) fn region(&self, index: u32) -> (Vec<u64>, Range<u64>, Range<u64>) {
        let (rx, tx) = (
            u64::from(self.sizes.rx_frames),
            u64::from(self.sizes.tx_frames),
        );
        let size = u64::from(self.sizes.frame_size);
        let first = u64::from(index) * u64::from(Self::frames_per_member(self.shared, &self.sizes));
        let at = |frame: u64| frame * size;
        let receive = (first..first + rx).map(at).collect();
        let transmit = at(first + rx)..at(first + rx + tx);
        let spare = if self.shared {
            at(first + rx + tx)..at(first + rx + 2 * tx)
        } else {
            0..0
        };
        (receive, transmit, spare)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_umem_area_starts_on_a_huge_page_and_all_its_bytes_are_usable() {
        let len = 3 * HUGE_PAGE + 4096;
        let area = UmemArea::new(len).expect("an anonymous mapping");
        assert_eq!(area.base.as_ptr() as usize % HUGE_PAGE, 0);
        let map_end = area.map.as_ptr() as usize + area.map_len;
        assert!(area.base.as_ptr() as usize + len <= map_end);
        // SAFETY: nothing else references the fresh area.
        let last = unsafe { area.frame_mut(len as u64 - 1, 1) }.expect("the last byte");
        last[0] = 7;
        // SAFETY: nothing else references the area, and the byte past its end is refused.
        assert!(unsafe { area.frame_mut(len as u64, 1) }.is_none());
    }
}
