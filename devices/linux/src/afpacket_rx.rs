//! The TPACKET_V3 receive ring of the AF_PACKET device.
//!
//! The ring is `block_count` blocks of `block_size` bytes shared with the kernel. The
//! kernel fills one block at a time with variable-size frames and hands it to user space
//! (block status `TP_STATUS_USER`) when it is full or its retire timeout expires. We walk
//! the frames of the current block in order and give the block back (`TP_STATUS_KERNEL`)
//! only when all its frames were consumed; a block left half-read by a small budget is
//! resumed by the next `receive` from where it stopped.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::afpacket::{bind_packet_socket, packet_socket, AfPacketConfig, RingMapping};
use crate::error::OpenError;
use crate::iface::{self, IfName};
use crate::sys::{self, Level};

/// Where the reader stands inside the current (user-owned) block.
#[derive(Clone, Copy, Debug)]
struct BlockCursor {
    /// Offset of the next frame header from the block start.
    offset: usize,
    /// Frames of this block not yet handed out.
    remaining: u32,
}

pub(crate) struct RxRing {
    // Field order matters: the mapping must be unmapped before the socket is closed.
    ring: RingMapping,
    socket: OwnedFd,
    ifindex: u32,
    block_size: usize,
    block_count: usize,
    current_block: usize,
    cursor: Option<BlockCursor>,
    /// A VLAN-tagged frame with its tag put back (the kernel strips it into metadata).
    tagged: Vec<u8>,
}

impl RxRing {
    /// Creates the socket, sets up and maps the ring, then binds to the interface
    /// (binding last keeps frames of other interfaces out of the ring).
    pub(crate) fn open(name: &IfName, config: &AfPacketConfig) -> Result<RxRing, OpenError> {
        let socket = packet_socket(name, 0)?;
        let fd = socket.as_fd();
        let ifindex = iface::index(fd, name).ok_or_else(|| OpenError::InterfaceNotFound {
            interface: name.as_str().to_string(),
        })?;
        let os_error = |action, e| OpenError::from_os(name.as_str(), action, "CAP_NET_RAW", e);
        sys::set_option(
            fd,
            Level::Packet,
            libc::PACKET_VERSION,
            &(libc::tpacket_versions::TPACKET_V3 as i32),
        )
        .map_err(|e| os_error("select TPACKET_V3", e))?;
        // Our own transmissions would otherwise come back to us through the taps.
        sys::set_option(fd, Level::Packet, libc::PACKET_IGNORE_OUTGOING, &1i32)
            .map_err(|e| os_error("set PACKET_IGNORE_OUTGOING", e))?;

        // V3 frames have variable size; frame_size only has to pass the kernel's checks
        // (aligned, at most a block, and frame_nr consistent with it).
        let frame_size = 2048.min(config.block_size);
        let frames_per_block = config.block_size / frame_size;
        let request = libc::tpacket_req3 {
            tp_block_size: config.block_size as u32,
            tp_block_nr: config.block_count as u32,
            tp_frame_size: frame_size as u32,
            tp_frame_nr: (frames_per_block * config.block_count) as u32,
            tp_retire_blk_tov: config.retire_timeout_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        let ring_error = |source| OpenError::RingAllocation {
            interface: name.as_str().to_string(),
            ring: "receive",
            block_size: config.block_size,
            block_count: config.block_count,
            source,
        };
        sys::set_option(fd, Level::Packet, libc::PACKET_RX_RING, &request).map_err(ring_error)?;
        let ring =
            RingMapping::map(fd, config.block_size * config.block_count).map_err(ring_error)?;

        bind_packet_socket(fd, name, ifindex, (libc::ETH_P_ALL as u16).to_be())?;
        if let Some(group) = config.fanout_group {
            let fanout = u32::from(group) | (libc::PACKET_FANOUT_HASH << 16);
            sys::set_option(fd, Level::Packet, libc::PACKET_FANOUT, &fanout)
                .map_err(|e| os_error("join the PACKET_FANOUT group", e))?;
        }
        Ok(RxRing {
            ring,
            socket,
            ifindex,
            block_size: config.block_size,
            block_count: config.block_count,
            current_block: 0,
            cursor: None,
            tagged: Vec::new(),
        })
    }

    /// Joins a new PACKET_FANOUT group (hash mode) whose id the kernel picks; returns it.
    pub(crate) fn join_new_fanout_group(&self) -> io::Result<u16> {
        // Not in the libc crate's root: linux/if_packet.h.
        const PACKET_FANOUT_FLAG_UNIQUEID: u32 = 0x2000;
        let fd = self.socket();
        let request = (libc::PACKET_FANOUT_HASH | PACKET_FANOUT_FLAG_UNIQUEID) << 16;
        sys::set_option(fd, Level::Packet, libc::PACKET_FANOUT, &request)?;
        let mut value: u32 = 0;
        sys::get_option(fd, Level::Packet, libc::PACKET_FANOUT, &mut value)?;
        // The answer is id | type << 16 | flags << 24.
        Ok((value & 0xffff) as u16)
    }

    /// The index of the interface the ring is bound to.
    pub(crate) fn ifindex(&self) -> u32 {
        self.ifindex
    }

    pub(crate) fn socket(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }

    fn block(&self, index: usize) -> *mut libc::tpacket_block_desc {
        self.ring.at(index * self.block_size).cast()
    }

    fn block_status(&self, index: usize) -> &AtomicU32 {
        let block = self.block(index);
        // SAFETY: block_status is an aligned u32 inside the mapping, shared with the
        // kernel, which lives as long as `self`; all our accesses to it are atomic.
        unsafe { AtomicU32::from_ptr(std::ptr::addr_of_mut!((*block).hdr.bh1.block_status)) }
    }

    /// Whether the current block belongs to user space. Acquire pairs with the kernel's
    /// barrier before it flips the status, so the block's contents are visible.
    fn user_owns(&self, index: usize) -> bool {
        self.block_status(index).load(Ordering::Acquire) & libc::TP_STATUS_USER != 0
    }

    pub(crate) fn ready(&self) -> bool {
        self.cursor.is_some() || self.user_owns(self.current_block)
    }

    pub(crate) fn receive(&mut self, budget: usize, rx: &mut dyn FnMut(&mut [u8])) -> usize {
        let mut handed = 0;
        while handed < budget {
            let mut cursor = match self.cursor {
                Some(cursor) => cursor,
                None if self.user_owns(self.current_block) => {
                    // SAFETY: the block is ours (status USER, acquired above).
                    let header = unsafe { &(*self.block(self.current_block)).hdr.bh1 };
                    BlockCursor {
                        offset: header.offset_to_first_pkt as usize,
                        remaining: header.num_pkts,
                    }
                }
                None => break,
            };
            let block_start = self.current_block * self.block_size;
            while cursor.remaining > 0 && handed < budget {
                let frame = self.ring.at(block_start + cursor.offset);
                // SAFETY: the kernel wrote a tpacket3_hdr here, inside our block.
                let header = unsafe { &*frame.cast::<libc::tpacket3_hdr>() };
                let data_offset = cursor.offset + usize::from(header.tp_mac);
                let len = header.tp_snaplen as usize;
                debug_assert!(data_offset + len <= self.block_size);
                // SAFETY: the frame's bytes lie inside the block, which user space owns
                // until we release it; nothing else aliases them during the call.
                let data = unsafe {
                    std::slice::from_raw_parts_mut(self.ring.at(block_start + data_offset), len)
                };
                if header.tp_status & libc::TP_STATUS_VLAN_VALID != 0 && data.len() >= 12 {
                    // The tag was stripped into metadata (rx VLAN offload): put it back,
                    // so that the stage sees the frame as it was on the wire.
                    let tpid = if header.tp_status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
                        header.hv1.tp_vlan_tpid
                    } else {
                        0x8100
                    };
                    self.tagged.clear();
                    self.tagged.extend_from_slice(&data[..12]);
                    self.tagged.extend_from_slice(&tpid.to_be_bytes());
                    self.tagged
                        .extend_from_slice(&(header.hv1.tp_vlan_tci as u16).to_be_bytes());
                    self.tagged.extend_from_slice(&data[12..]);
                    rx(&mut self.tagged);
                } else {
                    rx(data);
                }
                handed += 1;
                cursor.remaining -= 1;
                cursor.offset += header.tp_next_offset as usize;
            }
            if cursor.remaining > 0 {
                self.cursor = Some(cursor);
                break;
            }
            self.release_current_block();
        }
        handed
    }

    /// Gives the fully consumed current block back to the kernel and moves on.
    fn release_current_block(&mut self) {
        // Release: our reads of the block happen before the kernel may refill it.
        self.block_status(self.current_block)
            .store(libc::TP_STATUS_KERNEL, Ordering::Release);
        self.current_block = (self.current_block + 1) % self.block_count;
        self.cursor = None;
    }

    /// Frames delivered into the ring and not yet handed out.
    pub(crate) fn unread_frames(&self) -> u64 {
        let mut unread = self.cursor.map_or(0, |c| u64::from(c.remaining));
        let first = if self.cursor.is_some() { 1 } else { 0 };
        for step in first..self.block_count {
            let index = (self.current_block + step) % self.block_count;
            if !self.user_owns(index) {
                break;
            }
            // SAFETY: the block is ours (status USER).
            unread += u64::from(unsafe { (*self.block(index)).hdr.bh1.num_pkts });
        }
        unread
    }

    /// Frames the kernel dropped because the ring was full since the last call
    /// (PACKET_STATISTICS resets on read).
    pub(crate) fn take_ring_drops(&self) -> io::Result<u64> {
        let mut stats = libc::tpacket_stats_v3 {
            tp_packets: 0,
            tp_drops: 0,
            tp_freeze_q_cnt: 0,
        };
        sys::get_option(
            self.socket(),
            Level::Packet,
            libc::PACKET_STATISTICS,
            &mut stats,
        )?;
        Ok(u64::from(stats.tp_drops))
    }

    /// Reads and discards the socket's pending error (SO_ERROR).
    pub(crate) fn clear_socket_error(&self) {
        let _ = rustix::net::sockopt::socket_error(self.socket());
    }
}
