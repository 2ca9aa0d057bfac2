//! What the benches (`polld bench seeds`, `ramp`, `design`, `sweep`, `tables`) share: a
//! testbed of their own for the run, and their report printed as a table or as one JSON
//! document.

use std::io::Write;
use std::path::Path;

use serde::Serialize;

use crate::{Devices, Layout, Testbed, TestbedError, UpOptions, VmOptions};

fn failed(what: String) -> TestbedError {
    TestbedError::Failed(what)
}

/// Prints a bench's report to `out`: one JSON document with `json`, else `text`'s table.
pub(crate) fn print_report<R: Serialize>(
    report: &R,
    json: bool,
    out: &mut dyn Write,
    text: fn(&R, &mut dyn Write),
) {
    if json {
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(report).unwrap_or_default()
        );
    } else {
        text(report, out);
    }
}

/// The line under a bench's table that says whether conservation held in every polld run
/// of it.
pub(crate) fn write_conservation(conserved: bool, out: &mut dyn Write) {
    let _ = writeln!(
        out,
        "conservation: {}",
        if conserved {
            "held in every polld run"
        } else {
            "VIOLATED in some polld run"
        }
    );
}

/// Brings up a TAP testbed of `prefix` and a scratch directory, runs `body` on them with
/// the (gen, fwd) CPUs, then removes both, saying so as `polld bench {bench}: ...`.
pub(crate) fn on_own_tap_testbed<T>(
    bench: &str,
    prefix: &str,
    progress: &mut dyn Write,
    body: impl FnOnce(&Testbed, &Path, (usize, usize), &mut dyn Write) -> Result<T, TestbedError>,
) -> Result<T, TestbedError> {
    let vm = VmOptions::default();
    on_own_testbed(bench, prefix, Devices::Tap, &vm, progress, body)
}

/// [`on_own_tap_testbed`] on a testbed of `devices`: the guest of `Devices::Vm` runs
/// `vm`'s polld.
pub(crate) fn on_own_testbed<T>(
    bench: &str,
    prefix: &str,
    devices: Devices,
    vm: &VmOptions,
    progress: &mut dyn Write,
    body: impl FnOnce(&Testbed, &Path, (usize, usize), &mut dyn Write) -> Result<T, TestbedError>,
) -> Result<T, TestbedError> {
    let options = UpOptions::default();
    on_own_testbed_with(bench, prefix, devices, vm, &options, progress, body)
}

/// [`on_own_testbed`] brought up with `options` (the CPUs `body` is given are theirs).
pub(crate) fn on_own_testbed_with<T>(
    bench: &str,
    prefix: &str,
    devices: Devices,
    vm: &VmOptions,
    options: &UpOptions,
    progress: &mut dyn Write,
    body: impl FnOnce(&Testbed, &Path, (usize, usize), &mut dyn Write) -> Result<T, TestbedError>,
) -> Result<T, TestbedError> {
    let layout = Layout::with_devices(prefix, devices);
    let which = match devices {
        Devices::Tap => "the TAP testbed",
        Devices::Vm => "the VM testbed (a qemu guest between two TAPs)",
        Devices::Veth => "the veth testbed",
    };
    let _ = writeln!(
        progress,
        "polld bench {bench}: bringing up {which} {}, {}, {}",
        layout.gen_ns, layout.fwd_ns, layout.sink_ns
    );
    let tb = Testbed::up_vm(&layout, options, vm)?;
    let dir = std::env::temp_dir().join(format!("polld-bench-{bench}-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| failed(format!("creating {}: {e}", dir.display())))?;
    let result = body(&tb, &dir, (options.cpus.gen, options.cpus.fwd), progress);
    let _ = std::fs::remove_dir_all(&dir);
    drop(tb);
    let _ = writeln!(progress, "polld bench {bench}: testbed removed");
    result
}
