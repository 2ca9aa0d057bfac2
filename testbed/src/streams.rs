//! More input streams on the TAP testbed, for seed 000's "Forwarding 2 streams" and "4
//! streams" rows (several input cards, each forwarding to its own output card).
//!
//! Stream `k` (k ≥ 1; stream 0 is the testbed's own tap0 -> tap1) adds a persistent TAP
//! `tap{2k}` in gen and `tap{2k+1}` in sink, on networks `10.0.{2k+1}.0/24` (gen's side)
//! and `10.0.{2k+2}.0/24` (sink's side), with MACs and addresses numbered as the testbed's
//! (`02:00:00:00:<link>:<host>`): gen's end is `.1`, polld plays `.2` on the input and `.1`
//! on the output, sink's end is `.2`. `polld gen` sends to `10.0.{2k+2}.100`, which polld
//! resolves by static ARP to a MAC nobody has, so sink's kernel drops the frames before IP,
//! as it does the testbed's own stream. The TAPs live in the testbed's namespaces and go
//! with them.

use std::fmt::Write;
use std::net::Ipv4Addr;

use crate::sys;
use crate::{Layout, Testbed, TestbedError};

/// One more stream: its index `k` (1, 2, 3 for 2 to 4 streams).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtraStream {
    k: u8,
}

impl ExtraStream {
    /// Streams 1..n, to add to the testbed's own for `n` streams in all (at most 4).
    pub fn for_total(n: usize) -> Vec<ExtraStream> {
        (1..n.min(4) as u8).map(|k| ExtraStream { k }).collect()
    }

    /// The input network's third byte.
    fn input_link(self) -> u8 {
        2 * self.k + 1
    }

    /// The output network's third byte.
    fn output_link(self) -> u8 {
        2 * self.k + 2
    }

    /// The TAP in gen that polld reads.
    pub fn input(self) -> String {
        format!("tap{}", 2 * self.k)
    }

    /// The TAP in sink that polld writes.
    pub fn output(self) -> String {
        format!("tap{}", 2 * self.k + 1)
    }

    /// Creates both TAPs (persistent, addressed, up, no transmit offloads) in the
    /// testbed's gen and sink namespaces.
    pub fn create(self, tb: &Testbed) -> Result<(), TestbedError> {
        let layout = tb.layout();
        let ends = [
            (&layout.gen_ns, self.input(), self.input_link()),
            (&layout.sink_ns, self.output(), self.output_link()),
        ];
        for (ns, name, link) in ends {
            let host = if name == self.input() { 1 } else { 2 };
            let mac = format!("02:00:00:00:{link:02x}:{host:02x}");
            let cidr = format!("10.0.{link}.{host}/24");
            sys::ip_in(ns, &["tuntap", "add", "dev", &name, "mode", "tap"])?;
            sys::ip_in(ns, &["link", "set", &name, "address", &mac])?;
            sys::ip_in(ns, &["addr", "add", &cidr, "dev", &name])?;
            sys::ip_in(ns, &["link", "set", &name, "up"])?;
            sys::exec_in(ns, "ethtool", &["-K", &name, "tx", "off"])?;
        }
        Ok(())
    }

    /// The `[[interfaces]]` and `[[static_arp]]` entries of this stream in polld's
    /// config, both interfaces in `mode`.
    pub fn config(self, layout: &Layout, mode: &str) -> String {
        let mut c = String::new();
        let ends = [
            (&layout.gen_ns, self.input(), self.input_link(), 2),
            (&layout.sink_ns, self.output(), self.output_link(), 1),
        ];
        for (ns, name, link, host) in ends {
            let _ = writeln!(
                c,
                "\n[[interfaces]]\nname = {name:?}\nnetns = {ns:?}\nbackend = \"tap\"\nmode = {mode:?}\nmac = \"02:00:00:00:{link:02x}:{host:02x}\"\naddresses = [\"10.0.{link}.{host}/24\"]"
            );
        }
        let (i, o) = (self.input_link(), self.output_link());
        for (ip, mac) in [
            (format!("10.0.{i}.1"), format!("02:00:00:00:{i:02x}:01")),
            (format!("10.0.{o}.2"), format!("02:00:00:00:{o:02x}:02")),
            (format!("10.0.{o}.100"), format!("02:00:00:00:{o:02x}:64")),
        ] {
            let _ = writeln!(c, "\n[[static_arp]]\nip = {ip:?}\nmac = {mac:?}");
        }
        c
    }

    /// `polld gen` arguments that address this stream's frames.
    pub fn gen_args(self) -> Vec<String> {
        let o = self.output_link();
        self.gen_args_to(Ipv4Addr::new(10, 0, o, 100))
    }

    /// `polld gen` arguments that send into this stream's input towards `dst_ip`: its own
    /// output's, or another stream's to merge the two inputs into one output.
    pub fn gen_args_to(self, dst_ip: Ipv4Addr) -> Vec<String> {
        let i = self.input_link();
        vec![
            self.input(),
            "--src-mac".into(),
            format!("02:00:00:00:{i:02x}:01"),
            "--dst-mac".into(),
            format!("02:00:00:00:{i:02x}:02"),
            "--src-ip".into(),
            format!("10.0.{i}.1"),
            "--dst-ip".into(),
            dst_ip.to_string(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_numbered_after_the_testbeds_own() {
        assert!(ExtraStream::for_total(1).is_empty());
        let s = ExtraStream::for_total(4);
        assert_eq!(s.len(), 3);
        assert_eq!(
            (s[0].input(), s[0].output()),
            ("tap2".into(), "tap3".into())
        );
        assert_eq!(
            (s[2].input(), s[2].output()),
            ("tap6".into(), "tap7".into())
        );
        let args = s[0].gen_args().join(" ");
        assert_eq!(
            args,
            "tap2 --src-mac 02:00:00:00:03:01 --dst-mac 02:00:00:00:03:02 --src-ip 10.0.3.1 --dst-ip 10.0.4.100"
        );
    }
}
