//! Why a device could not be opened, with the interface named and the fix spelled out.
//!
//! Every backend's constructor returns [`OpenError`]; its `Display` text is meant to be
//! shown to the operator as is ("interface veth9 not found; list interfaces with `ip link`").

use std::fmt;
use std::io;

/// A device open (or reopen) failure.
#[derive(Debug)]
pub enum OpenError {
    /// No interface of that name exists in the current network namespace.
    InterfaceNotFound { interface: String },
    /// The name cannot be an interface name (empty, too long, or with forbidden bytes).
    InvalidName {
        interface: String,
        reason: &'static str,
    },
    /// The kernel refused for lack of privilege; `capability` is the one that is missing.
    Permission {
        interface: String,
        action: &'static str,
        capability: &'static str,
    },
    /// The kernel could not allocate or map a packet ring of this geometry.
    RingAllocation {
        interface: String,
        ring: &'static str,
        block_size: usize,
        block_count: usize,
        source: io::Error,
    },
    /// A configuration value the kernel would reject, caught before asking it.
    InvalidConfig { interface: String, detail: String },
    /// `/dev/net/tun` does not exist.
    TunMissing,
    /// No network namespace of that name (`ip netns list` does not show it).
    NamespaceNotFound { namespace: String },
    /// Any other system call failure, naming the call.
    Os {
        interface: String,
        action: &'static str,
        source: io::Error,
    },
}

impl OpenError {
    /// Maps a failed system call to the most helpful variant: EPERM/EACCES become
    /// [`OpenError::Permission`] naming `capability`, ENODEV becomes
    /// [`OpenError::InterfaceNotFound`], anything else [`OpenError::Os`].
    pub(crate) fn from_os(
        interface: &str,
        action: &'static str,
        capability: &'static str,
        source: io::Error,
    ) -> OpenError {
        let interface = interface.to_string();
        match source.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => OpenError::Permission {
                interface,
                action,
                capability,
            },
            Some(libc::ENODEV) | Some(libc::ENXIO) => OpenError::InterfaceNotFound { interface },
            _ => OpenError::Os {
                interface,
                action,
                source,
            },
        }
    }
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::InterfaceNotFound { interface } => write!(
                f,
                "interface {interface} not found; list interfaces with `ip link`"
            ),
            OpenError::InvalidName { interface, reason } => {
                write!(f, "`{interface}` is not a valid interface name: {reason}")
            }
            OpenError::Permission {
                interface,
                action,
                capability,
            } => write!(
                f,
                "cannot {action} for {interface}: permission denied (needs {capability}: \
                 run as root or grant it with `setcap {}+ep <binary>`)",
                capability.to_ascii_lowercase()
            ),
            OpenError::RingAllocation {
                interface,
                ring,
                block_size,
                block_count,
                source,
            } => write!(
                f,
                "cannot allocate the {ring} ring for {interface} ({block_count} blocks x \
                 {block_size} bytes = {} KiB): {source}; use fewer or smaller blocks",
                block_count * block_size / 1024
            ),
            OpenError::InvalidConfig { interface, detail } => {
                write!(f, "invalid device configuration for {interface}: {detail}")
            }
            OpenError::NamespaceNotFound { namespace } => write!(
                f,
                "network namespace {namespace:?} not found; list them with `ip netns list`, \
                 or create it with `ip netns add {namespace}`"
            ),
            OpenError::TunMissing => f.write_str(
                "/dev/net/tun not found: the kernel needs TUN/TAP support (CONFIG_TUN); \
                 in a container, pass the device in (`--device /dev/net/tun`)",
            ),
            OpenError::Os {
                interface,
                action,
                source,
            } => write!(f, "cannot {action} for {interface}: {source}"),
        }
    }
}

impl std::error::Error for OpenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OpenError::RingAllocation { source, .. } | OpenError::Os { source, .. } => Some(source),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permission_errors_name_the_capability_and_the_interface() {
        let err = OpenError::from_os(
            "veth1",
            "open an AF_PACKET socket",
            "CAP_NET_RAW",
            io::Error::from_raw_os_error(libc::EPERM),
        );
        let text = err.to_string();
        assert!(
            text.contains("veth1") && text.contains("CAP_NET_RAW"),
            "{text}"
        );
        assert!(text.contains("setcap cap_net_raw+ep"), "{text}");
    }

    #[test]
    fn enodev_means_the_interface_is_missing() {
        let err = OpenError::from_os(
            "veth9",
            "bind",
            "CAP_NET_RAW",
            io::Error::from_raw_os_error(libc::ENODEV),
        );
        assert_eq!(
            err.to_string(),
            "interface veth9 not found; list interfaces with `ip link`"
        );
    }

    #[test]
    fn ring_allocation_errors_give_the_geometry() {
        let err = OpenError::RingAllocation {
            interface: "veth1".into(),
            ring: "receive",
            block_size: 65536,
            block_count: 64,
            source: io::Error::from_raw_os_error(libc::ENOMEM),
        };
        let text = err.to_string();
        assert!(
            text.contains("64 blocks x 65536 bytes = 4096 KiB"),
            "{text}"
        );
    }
}
