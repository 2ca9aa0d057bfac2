//! ipfw-style allow/deny rules on the IPv4 and IPv6 5-tuple: ordered, first match wins, a
//! default action when none matches, and a hit counter per rule.
//!
//! A prefix matches addresses of its own family; `any` (a prefix of length 0) matches
//! both. `proto = "icmp"` matches ICMP in IPv4 and ICMPv6 in IPv6.
//!
//! Ports are known only for TCP and UDP packets that carry the start of their transport
//! header (not for non-first fragments, which polld does not reassemble): a rule with a
//! port condition never matches a packet whose ports are unknown, exactly like ipfw.

use crate::net::{IpNet, Ipv4Net};
use crate::wire::ipv4::protocol;
use crate::wire::ipv6::{next_header, Chain};
use crate::wire::{Ipv4Packet, Ipv6Packet};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// What a rule does with the packets it matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    #[default]
    Allow,
    Deny,
}

/// The protocol a rule matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Proto {
    #[default]
    Any,
    Tcp,
    Udp,
    Icmp,
}

impl Proto {
    fn matches(self, number: u8) -> bool {
        match self {
            Proto::Any => true,
            Proto::Tcp => number == protocol::TCP,
            Proto::Udp => number == protocol::UDP,
            Proto::Icmp => number == protocol::ICMP || number == next_header::ICMPV6,
        }
    }

    /// Whether packets of this protocol have ports a rule can test.
    pub fn has_ports(self) -> bool {
        matches!(self, Proto::Tcp | Proto::Udp)
    }
}

/// An inclusive port range, written `22` or `1024-65535` (a bare TOML integer works too).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortRange {
    pub first: u16,
    pub last: u16,
}

impl PortRange {
    pub fn contains(self, port: u16) -> bool {
        (self.first..=self.last).contains(&port)
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

impl FromStr for PortRange {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("invalid port range {s:?}: write a port (22) or a range (1024-65535)");
        let (first, last) = s.split_once('-').unwrap_or((s, s));
        let first: u16 = first.trim().parse().map_err(|_| bad())?;
        let last: u16 = last.trim().parse().map_err(|_| bad())?;
        if first > last {
            return Err(format!(
                "invalid port range {s:?}: the first port is above the last; write {last}-{first}"
            ));
        }
        Ok(PortRange { first, last })
    }
}

impl Serialize for PortRange {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PortRange {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Text {
            Number(u64),
            Range(String),
        }
        let text = match Text::deserialize(d)? {
            Text::Number(n) => n.to_string(),
            Text::Range(s) => s,
        };
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// One rule. Omitted fields match everything.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub action: Action,
    #[serde(default)]
    pub proto: Proto,
    #[serde(default = "any_net")]
    pub src: IpNet,
    #[serde(default = "any_net")]
    pub dst: IpNet,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src_ports: Option<PortRange>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_ports: Option<PortRange>,
}

fn any_net() -> IpNet {
    IpNet::V4(Ipv4Net::ANY)
}

/// Whether a rule's prefix matches `ip`: `any` (length 0) matches either family.
fn net_matches(net: IpNet, ip: IpAddr) -> bool {
    net.prefix_len() == 0 || net.contains(ip)
}

/// The fields rules look at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FiveTuple {
    pub protocol: u8,
    pub src: IpAddr,
    pub dst: IpAddr,
    /// Source and destination port, when the packet carries them.
    pub ports: Option<(u16, u16)>,
}

impl FiveTuple {
    /// Reads the tuple of a checked IPv4 packet.
    pub fn of<T: AsRef<[u8]>>(packet: &Ipv4Packet<T>) -> FiveTuple {
        let proto = packet.protocol();
        let payload = packet.payload();
        let ports = match packet.frag_offset() {
            0 => ports(proto, payload),
            _ => None,
        };
        FiveTuple {
            protocol: proto,
            src: packet.src_addr().into(),
            dst: packet.dst_addr().into(),
            ports,
        }
    }

    /// Reads the tuple of a checked IPv6 packet whose extension headers were walked:
    /// the protocol is the upper layer's, the ports are known when the packet carries
    /// the start of its TCP or UDP header.
    pub fn of_ipv6<T: AsRef<[u8]>>(packet: &Ipv6Packet<T>, chain: &Chain) -> FiveTuple {
        let proto = chain.protocol;
        let ports = chain
            .upper_offset
            .and_then(|at| ports(proto, &packet.payload()[at..]));
        FiveTuple {
            protocol: proto,
            src: packet.src_addr().into(),
            dst: packet.dst_addr().into(),
            ports,
        }
    }
}

/// The ports of a TCP or UDP header starting `upper`, read straight from its first four
/// bytes: a first fragment's UDP length covers the whole datagram, so a checked UDP view
/// would refuse it. (IPv6 numbers TCP and UDP as IPv4 does.)
fn ports(proto: u8, upper: &[u8]) -> Option<(u16, u16)> {
    match upper {
        [a, b, c, d, ..] if proto == protocol::TCP || proto == protocol::UDP => {
            Some((u16::from_be_bytes([*a, *b]), u16::from_be_bytes([*c, *d])))
        }
        _ => None,
    }
}

impl Rule {
    pub fn matches(&self, t: &FiveTuple) -> bool {
        let port_ok = |range: Option<PortRange>, pick: fn((u16, u16)) -> u16| match range {
            None => true,
            Some(range) => t.ports.is_some_and(|p| range.contains(pick(p))),
        };
        self.proto.matches(t.protocol)
            && net_matches(self.src, t.src)
            && net_matches(self.dst, t.dst)
            && port_ok(self.src_ports, |p| p.0)
            && port_ok(self.dst_ports, |p| p.1)
    }
}

/// Hit counters: one per rule, in rule order, and one for the default action.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RuleHits {
    pub rules: Vec<u64>,
    pub default: u64,
}

/// An ordered rule list with its counters.
#[derive(Clone, Debug)]
pub struct RuleSet {
    rules: Vec<Rule>,
    default_action: Action,
    hits: RuleHits,
}

impl RuleSet {
    pub fn new(rules: Vec<Rule>, default_action: Action) -> Self {
        let hits = RuleHits {
            rules: vec![0; rules.len()],
            default: 0,
        };
        RuleSet {
            rules,
            default_action,
            hits,
        }
    }

    /// Whether every packet passes without looking (no rules, default allow).
    pub fn allows_everything(&self) -> bool {
        self.rules.is_empty() && self.default_action == Action::Allow
    }

    /// The action of the first matching rule (or the default), counting the hit.
    pub fn evaluate(&mut self, t: &FiveTuple) -> Action {
        match self.rules.iter().position(|r| r.matches(t)) {
            Some(i) => {
                self.hits.rules[i] += 1;
                self.rules[i].action
            }
            None => {
                self.hits.default += 1;
                self.default_action
            }
        }
    }

    pub fn hits(&self) -> &RuleHits {
        &self.hits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tuple(protocol: u8, src: [u8; 4], dst: [u8; 4], ports: Option<(u16, u16)>) -> FiveTuple {
        FiveTuple {
            protocol,
            src: std::net::Ipv4Addr::from(src).into(),
            dst: std::net::Ipv4Addr::from(dst).into(),
            ports,
        }
    }

    fn rule(action: Action, proto: Proto, dst: &str, dst_ports: Option<&str>) -> Rule {
        Rule {
            action,
            proto,
            src: any_net(),
            dst: dst.parse().unwrap(),
            src_ports: None,
            dst_ports: dst_ports.map(|p| p.parse().unwrap()),
        }
    }

    #[test]
    fn first_match_wins_and_counts() {
        let mut set = RuleSet::new(
            vec![
                rule(Action::Allow, Proto::Tcp, "10.0.2.0/24", Some("22")),
                rule(Action::Deny, Proto::Tcp, "10.0.2.0/24", None),
                rule(Action::Allow, Proto::Any, "10.0.0.0/8", None),
            ],
            Action::Deny,
        );
        let ssh = tuple(
            protocol::TCP,
            [10, 0, 1, 2],
            [10, 0, 2, 2],
            Some((40000, 22)),
        );
        let http = tuple(
            protocol::TCP,
            [10, 0, 1, 2],
            [10, 0, 2, 2],
            Some((40000, 80)),
        );
        let udp = tuple(protocol::UDP, [10, 0, 1, 2], [10, 0, 2, 2], Some((5, 80)));
        let outside = tuple(
            protocol::UDP,
            [10, 0, 1, 2],
            [192, 168, 0, 1],
            Some((5, 80)),
        );
        assert_eq!(set.evaluate(&ssh), Action::Allow);
        assert_eq!(set.evaluate(&http), Action::Deny);
        assert_eq!(set.evaluate(&http), Action::Deny);
        assert_eq!(set.evaluate(&udp), Action::Allow);
        assert_eq!(set.evaluate(&outside), Action::Deny);
        assert_eq!(set.hits().rules, vec![1, 2, 1]);
        assert_eq!(set.hits().default, 1);
    }

    #[test]
    fn port_rule_skips_packets_without_ports() {
        let mut set = RuleSet::new(
            vec![rule(Action::Deny, Proto::Udp, "any", Some("53"))],
            Action::Allow,
        );
        let fragment = tuple(protocol::UDP, [10, 0, 1, 2], [10, 0, 2, 2], None);
        assert_eq!(set.evaluate(&fragment), Action::Allow);
        let dns = tuple(protocol::UDP, [10, 0, 1, 2], [10, 0, 2, 2], Some((999, 53)));
        assert_eq!(set.evaluate(&dns), Action::Deny);
        assert_eq!(set.hits().rules, vec![1]);
        assert_eq!(set.hits().default, 1);
    }

    #[test]
    fn prefixes_match_their_family_and_any_matches_both() {
        let mut set = RuleSet::new(
            vec![
                rule(Action::Deny, Proto::Icmp, "2001:db8:9::/48", None),
                rule(Action::Deny, Proto::Udp, "10.0.0.0/8", None),
                rule(Action::Allow, Proto::Any, "any", None),
            ],
            Action::Deny,
        );
        let v6 = |proto, dst: &str| FiveTuple {
            protocol: proto,
            src: "2001:db8:1::2".parse().unwrap(),
            dst: dst.parse().unwrap(),
            ports: None,
        };
        assert_eq!(set.evaluate(&v6(58, "2001:db8:9::1")), Action::Deny);
        assert_eq!(set.evaluate(&v6(58, "2001:db8:8::1")), Action::Allow);
        assert_eq!(set.evaluate(&v6(17, "::ffff:10.0.0.1")), Action::Allow);
        assert_eq!(set.hits().rules, vec![1, 0, 2]);
    }

    #[test]
    fn port_ranges_parse() {
        assert_eq!(
            "22".parse::<PortRange>().unwrap(),
            PortRange {
                first: 22,
                last: 22
            }
        );
        assert_eq!(
            "1024-65535".parse::<PortRange>().unwrap(),
            PortRange {
                first: 1024,
                last: 65535
            }
        );
        assert!("80-22"
            .parse::<PortRange>()
            .unwrap_err()
            .contains("write 22-80"));
        assert!("http".parse::<PortRange>().is_err());
    }
}
