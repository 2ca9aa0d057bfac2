//! Cache prefetch hints for frames the kernel wrote into memory polld maps (the AF_XDP
//! UMEM). A hint only: no load happens, so a bad address cannot fault, and on other
//! architectures it does nothing.

/// Starts loading the cache line holding `ptr` into every cache level, for reading.
#[inline(always)]
pub(crate) fn read(ptr: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 is a hint; it reads nothing architecturally and never faults,
    // whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(ptr.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ptr;
}
