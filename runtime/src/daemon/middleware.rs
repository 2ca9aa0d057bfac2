//! The middleware devices `polld run` wraps an opened device in: the fault injector of
//! `[interfaces.fault]`, and the pcap writer of `--pcap`.

use std::io::Write;
use std::path::PathBuf;

use polld_core::Device;
use polld_middleware::{FaultInjector, PcapWriter};

use crate::config::DeviceConfig;

/// Wraps an opened device in the middleware asked for: the fault injector of
/// `[interfaces.fault]`, then the pcap writer of `--pcap` (outermost, so the file holds
/// the frames the dataplane saw and counted).
pub(crate) fn wrap_device(
    mut dev: Box<dyn Device>,
    d: &DeviceConfig,
    pcap: Option<&str>,
) -> Result<Box<dyn Device>, String> {
    if let Some(fault) = d.fault {
        dev = Box::new(FaultInjector::new(dev, fault).map_err(|e| format!("{}: {e}", d.name))?);
    }
    if let Some(prefix) = pcap {
        let path = PathBuf::from(format!("{prefix}.{}.pcap", d.name));
        let file = std::fs::File::create(&path).map_err(|e| {
            format!(
                "--pcap: cannot create {}: {e}; give a PREFIX in a writable directory",
                path.display()
            )
        })?;
        let out = PcapFile {
            path: path.clone(),
            file: std::io::BufWriter::new(file),
        };
        let wall_clock = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |t| t.as_nanos() as u64)
        };
        let writer = PcapWriter::new(dev, out, Box::new(wall_clock))
            .map_err(|e| format!("--pcap: cannot write {}: {e}", path.display()))?;
        dev = Box::new(writer);
    }
    Ok(dev)
}

/// A `--pcap` file: says on stderr when a write fails (the recording stops there, the
/// forwarding goes on).
pub(crate) struct PcapFile {
    path: PathBuf,
    file: std::io::BufWriter<std::fs::File>,
}

impl PcapFile {
    fn report<T>(&self, result: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(e) = &result {
            log::error!(
                "--pcap {}: {e}; the recording of this interface stops here",
                self.path.display()
            );
        }
        result
    }
}

impl Write for PcapFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let result = self.file.write(buf);
        self.report(result)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        let result = self.file.flush();
        self.report(result)
    }
}
