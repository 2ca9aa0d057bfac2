//! An interface split over several poll CPUs: its `queues` (AF_XDP) or `fanout`
//! (AF_PACKET) expanded into queue numbers, checked against its backend and other keys.

use super::errors::interface_error;
use super::keys::{DeviceKeys, QueueList};
use super::Backend;

/// The queues of an `[[interfaces]]` entry (`queues` on AF_XDP, `fanout` on AF_PACKET),
/// checked against its backend and its other keys; empty for a device polled whole. The
/// error names the field and the fix.
pub(super) fn queue_keys(
    i: usize,
    keys: &DeviceKeys,
    given: &toml::Table,
) -> Result<Vec<u32>, (String, String)> {
    let refuse = |key: &str, why: String| Err(interface_error(i, key, why));
    let several_taps = "a TAP here has one queue; for several CPUs use several TAPs, one \
                        [[interfaces]] entry each with its own `cpu`";
    if given.contains_key("queue") && keys.backend != Backend::AfXdp {
        let why = match keys.backend {
            Backend::Tap => "a TAP has one queue, and polld reads it whole".to_string(),
            _ => "AF_PACKET receives from every queue of the interface".to_string(),
        };
        return refuse(
            "queue",
            format!(
                "`queue` is the AF_XDP receive queue to open, and this interface is {}: {why}; \
                 remove `queue`, or use backend = \"af_xdp\" to poll one receive queue",
                keys.backend.name()
            ),
        );
    }
    let queues: Vec<u32> = match (&keys.queues, keys.fanout) {
        (Some(_), Some(_)) => {
            return refuse(
                "fanout",
                "`queues` (AF_XDP) and `fanout` (AF_PACKET) are two ways to split one \
                 interface; keep the one of its backend"
                    .to_string(),
            )
        }
        (None, None) => {
            if given.contains_key("cpus") {
                return refuse(
                    "cpus",
                    "`cpus` lists the CPU of each queue, and this interface has none; use \
                     `cpu = N`, or add `queues` (af_xdp) or `fanout` (af_packet)"
                        .to_string(),
                );
            }
            return Ok(Vec::new());
        }
        (None, Some(n)) => {
            match keys.backend {
                Backend::AfPacket => {}
                Backend::AfXdp => {
                    return refuse(
                        "fanout",
                        "fanout is AF_PACKET's PACKET_FANOUT; on backend af_xdp write \
                         `queues = N` (one socket per receive queue)"
                            .to_string(),
                    )
                }
                Backend::Tap => return refuse("fanout", several_taps.to_string()),
            }
            if n == 0 {
                return refuse(
                    "fanout",
                    "0 sockets; write fanout = 2 or more (one per poll CPU)".to_string(),
                );
            }
            (0..n).collect()
        }
        (Some(list), None) => {
            match keys.backend {
                Backend::AfXdp => {}
                Backend::AfPacket => {
                    return refuse(
                        "queues",
                        "backend af_packet has no per-queue sockets; write `fanout = N` to \
                         spread the interface over N sockets, or backend = \"af_xdp\""
                            .to_string(),
                    )
                }
                Backend::Tap => return refuse("queues", several_taps.to_string()),
            }
            let ids = match list {
                QueueList::Count(n) => (0..*n).collect(),
                QueueList::Ids(ids) => ids.clone(),
            };
            if ids.is_empty() {
                return refuse(
                    "queues",
                    "no queue listed; write e.g. queues = [0, 1] or queues = 2".to_string(),
                );
            }
            if let Some(q) = ids
                .iter()
                .enumerate()
                .find_map(|(k, q)| ids[..k].contains(q).then_some(q))
            {
                return refuse(
                    "queues",
                    format!("queue {q} is listed twice; list each once"),
                );
            }
            if given.contains_key("queue") {
                return refuse(
                    "queue",
                    "`queue` opens one receive queue and `queues` several; keep one of them"
                        .to_string(),
                );
            }
            ids
        }
    };
    if given.contains_key("cpu") {
        return refuse(
            "cpu",
            format!(
                "with `{}` each queue has its own CPU; write `cpus = [..]`, one per queue, or \
                 leave `cpu` out (round-robin)",
                keys.backend.queues_key()
            ),
        );
    }
    Ok(queues)
}
