//! The ARP cache: IPv4 next hop → MAC, bounded and aging, with static entries and
//! per-next-hop rate limiting of the requests polld sends.
//!
//! A learned entry is usable for `max_age`. Once it is older than half that, each use
//! asks for a refresh request (at most one per `retry` interval), so that an active next
//! hop is re-resolved before it expires instead of losing packets at expiry. A miss
//! creates an *incomplete* entry that remembers when the last request went out: while the
//! next hop stays unresolved, at most one request per `retry` interval is sent for it.

use crate::fasthash::FastMap;
use crate::table::{AgingMap, TableStats};
use crate::wire::MacAddr;
use std::net::Ipv4Addr;

#[derive(Clone, Copy, Debug)]
enum ArpEntry {
    Resolved {
        mac: MacAddr,
        last_request_ns: Option<u64>,
    },
    Incomplete {
        last_request_ns: u64,
    },
}

/// The outcome of resolving a next hop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resolution {
    /// The next hop's MAC, if known and fresh.
    pub mac: Option<MacAddr>,
    /// Whether the caller should broadcast an ARP request for the next hop now.
    pub send_request: bool,
}

#[derive(Clone, Debug)]
pub struct ArpCache {
    learned: AgingMap<Ipv4Addr, ArpEntry>,
    statics: FastMap<Ipv4Addr, MacAddr>,
    retry_ns: u64,
}

impl ArpCache {
    /// `capacity` bounds the learned and incomplete entries (statics are extra).
    pub fn new(capacity: usize, max_age_ns: u64, retry_ns: u64) -> Self {
        ArpCache {
            learned: AgingMap::new(capacity, max_age_ns),
            statics: FastMap::default(),
            retry_ns,
        }
    }

    /// A permanent entry that learning never overrides.
    pub fn add_static(&mut self, ip: Ipv4Addr, mac: MacAddr) {
        self.statics.insert(ip, mac);
    }

    /// Removes the permanent entry for `ip`, returning its MAC.
    pub fn remove_static(&mut self, ip: Ipv4Addr) -> Option<MacAddr> {
        self.statics.remove(&ip)
    }

    /// Removes every permanent entry.
    pub fn clear_statics(&mut self) {
        self.statics.clear();
    }

    /// Resolves `ip` for a packet to forward at `now_ns`.
    pub fn resolve(&mut self, ip: Ipv4Addr, now_ns: u64) -> Resolution {
        if let Some(&mac) = self.statics.get(&ip) {
            return Resolution {
                mac: Some(mac),
                send_request: false,
            };
        }
        let max_age = self.learned.max_age_ns();
        let retry = self.retry_ns;
        let due = |last: Option<u64>| match last {
            None => true,
            Some(t) => now_ns.saturating_sub(t) >= retry,
        };
        let last_request = match self.learned.get_any_mut(&ip) {
            Some(entry) => match &mut entry.value {
                ArpEntry::Resolved {
                    mac,
                    last_request_ns,
                } => {
                    let age = now_ns.saturating_sub(entry.refreshed_ns);
                    if age <= max_age {
                        let send = age > max_age / 2 && due(*last_request_ns);
                        if send {
                            *last_request_ns = Some(now_ns);
                        }
                        return Resolution {
                            mac: Some(*mac),
                            send_request: send,
                        };
                    }
                    *last_request_ns
                }
                ArpEntry::Incomplete { last_request_ns } => {
                    let send = due(Some(*last_request_ns));
                    if send {
                        *last_request_ns = now_ns;
                    }
                    return Resolution {
                        mac: None,
                        send_request: send,
                    };
                }
            },
            None => None,
        };
        // A miss, or an entry that aged out: wait for a new answer.
        let send = due(last_request);
        let last_request_ns = if send {
            now_ns
        } else {
            last_request.unwrap_or(now_ns)
        };
        self.learned
            .insert(ip, ArpEntry::Incomplete { last_request_ns }, now_ns);
        Resolution {
            mac: None,
            send_request: send,
        }
    }

    /// Records that `ip` is at `mac`. With `create` false only an existing entry
    /// (resolved or incomplete) is updated: RFC 826's merge rule for ARP packets that
    /// are not addressed to us. Static entries are never changed.
    pub fn learn(&mut self, ip: Ipv4Addr, mac: MacAddr, now_ns: u64, create: bool) {
        if self.statics.contains_key(&ip) {
            return;
        }
        let resolved = ArpEntry::Resolved {
            mac,
            last_request_ns: None,
        };
        match self.learned.get_any_mut(&ip) {
            Some(entry) => {
                entry.value = resolved;
                entry.refreshed_ns = now_ns;
            }
            None if create => self.learned.insert(ip, resolved, now_ns),
            None => {}
        }
    }

    /// The MAC `ip` resolves to at `now_ns`, without side effects.
    pub fn lookup(&self, ip: Ipv4Addr, now_ns: u64) -> Option<MacAddr> {
        if let Some(&mac) = self.statics.get(&ip) {
            return Some(mac);
        }
        match self.learned.get(&ip, now_ns)? {
            (ArpEntry::Resolved { mac, .. }, _) => Some(*mac),
            (ArpEntry::Incomplete { .. }, _) => None,
        }
    }

    /// The entries with a MAC at `now_ns`, each with whether it is static: the static
    /// ones, then the learned ones still fresh (not those still resolving).
    pub fn entries(&self, now_ns: u64) -> impl Iterator<Item = (Ipv4Addr, MacAddr, bool)> + '_ {
        let learned = self
            .learned
            .live(now_ns)
            .filter_map(|(&ip, entry)| match entry {
                ArpEntry::Resolved { mac, .. } => Some((ip, *mac, false)),
                ArpEntry::Incomplete { .. } => None,
            });
        self.statics
            .iter()
            .map(|(&ip, &mac)| (ip, mac, true))
            .chain(learned)
    }

    pub fn stats(&self) -> TableStats {
        self.learned.stats_with(self.statics.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;
    const GW: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);
    const MAC: MacAddr = MacAddr([2, 0, 0, 0, 2, 2]);

    fn cache(capacity: usize) -> ArpCache {
        ArpCache::new(capacity, 60 * SEC, SEC)
    }

    #[test]
    fn miss_requests_once_per_retry_interval() {
        let mut c = cache(8);
        let r = |c: &mut ArpCache, t| c.resolve(GW, t);
        assert_eq!(
            r(&mut c, 0),
            Resolution {
                mac: None,
                send_request: true
            }
        );
        assert_eq!(
            r(&mut c, SEC / 2),
            Resolution {
                mac: None,
                send_request: false
            }
        );
        assert_eq!(
            r(&mut c, SEC),
            Resolution {
                mac: None,
                send_request: true
            }
        );
        c.learn(GW, MAC, SEC + 1, false); // an incomplete entry accepts the answer
        assert_eq!(
            r(&mut c, 2 * SEC),
            Resolution {
                mac: Some(MAC),
                send_request: false
            }
        );
    }

    #[test]
    fn unsolicited_is_not_created_without_create() {
        let mut c = cache(8);
        c.learn(GW, MAC, 0, false);
        assert_eq!(c.lookup(GW, 0), None);
        c.learn(GW, MAC, 0, true);
        assert_eq!(c.lookup(GW, 0), Some(MAC));
    }

    #[test]
    fn refresh_before_expiry_then_expire() {
        let mut c = cache(8);
        c.learn(GW, MAC, 0, true);
        let young = c.resolve(GW, 10 * SEC);
        assert_eq!(
            young,
            Resolution {
                mac: Some(MAC),
                send_request: false
            }
        );
        let old = c.resolve(GW, 31 * SEC);
        assert_eq!(
            old,
            Resolution {
                mac: Some(MAC),
                send_request: true
            }
        );
        assert!(
            !c.resolve(GW, 31 * SEC).send_request,
            "refresh is rate-limited"
        );
        assert_eq!(c.lookup(GW, 61 * SEC), None);
        // Expired: unusable; the last request went out 30 s ago, so ask again now.
        assert_eq!(
            c.resolve(GW, 61 * SEC),
            Resolution {
                mac: None,
                send_request: true
            }
        );
        assert_eq!(
            c.resolve(GW, 61 * SEC + 1),
            Resolution {
                mac: None,
                send_request: false
            }
        );
    }
}
