//! The dataplane of a poll thread: its interfaces opened (each wrapped in the reopener
//! and the middleware asked for), the packet stage, the modes and knobs of the config
//! applied once each, in order.

use polld_core::poll::KnobHook;
use polld_core::{Dataplane, Device, Poller};
use polld_dev::busy_poll::BusyPoll;
use polld_middleware::reopen::Opener;
use polld_middleware::Reopener;
use polld_packet::Stage;

use crate::config::{DeviceConfig, RunConfig, RunConfigErrors};
use crate::error::RunError;
use crate::executor::{IfInfo, RealDataplane};
use crate::queues::QueueGroups;

use super::busy_poll::{busy_poll_of, knob_hook};
use super::middleware::wrap_device;
use super::open::{device_irqs, namespace_of, open_device, Opening};
use super::umem::{shared_umem, umem_line};

/// What opens interface `d` again once it went away, on the reopen thread; a queue of an
/// interface with several reopens through their group.
pub(crate) fn opener(d: &DeviceConfig, busy: &BusyPoll, groups: &QueueGroups) -> Opener {
    if let Some((group, k)) = groups.of(d) {
        return Box::new(move || group.take(k).map(|(dev, _)| dev));
    }
    let (d, busy) = (d.clone(), busy.clone());
    Box::new(move || {
        let netns = namespace_of(&d).map_err(|e| e.to_string())?;
        // The other members of a shared UMEM may still hold frames lent to the socket
        // this one replaces, so it gets a UMEM of its own.
        open_device(&d, netns, &busy, Opening::Again, None).map(|(dev, _)| dev)
    })
}

/// Opens `config`'s interfaces and builds the dataplane on them; also the writable values
/// before the config was applied, what `polld ifconfig` shows of each interface, and the
/// reopener of the interfaces, to start once capabilities are dropped
/// ([`place_poll_thread`]). A queue of an interface with several comes from `groups`.
pub(crate) fn open_dataplane(
    config: &RunConfig,
    pcap: Option<&str>,
    groups: &QueueGroups,
) -> Result<(RealDataplane, Defaults, Vec<IfInfo>, Reopener), RunError> {
    let mut devices: Vec<Box<dyn Device>> = Vec::new();
    let mut rx_owners = Vec::new();
    let mut irqs = Vec::new();
    let reopener = Reopener::new();
    let (umem, umem_names) = shared_umem(config, pcap)?;
    for d in &config.devices {
        let i = d.entry;
        let fail = |key: &str, e: String| {
            RunError::Config(
                config
                    .error_at_field(
                        &format!("interfaces[{i}].{key}"),
                        format!("interfaces[{i}] ({}, {}): {e}", d.name, d.backend.name()),
                    )
                    .into(),
            )
        };
        // Only the interfaces the UMEM was sized for bind to it; the rest copy into their own.
        let member = umem.as_ref().filter(|_| umem_names.contains(&d.name));
        let netns = namespace_of(d).map_err(|e| fail("netns", e.to_string()))?;
        irqs.push(device_irqs(d, &netns));
        let busy = busy_poll_of(config);
        let (dev, rx_owner) = match groups.of(d) {
            Some((group, k)) => group.take(k).map_err(|e| fail("name", e))?,
            None => {
                open_device(d, netns, &busy, Opening::Start, member).map_err(|e| fail("name", e))?
            }
        };
        let dev = Box::new(reopener.wrap(dev, opener(d, &busy, groups)));
        let dev = wrap_device(dev, d, pcap).map_err(RunError::Setup)?;
        devices.push(dev);
        rx_owners.push(rx_owner);
    }
    // The knobs the file writes reach the AF_XDP sockets through the hook: the devices
    // were opened with the profile's settings.
    let busy: Vec<BusyPoll> = rx_owners
        .iter()
        .filter_map(|o| o.busy_poll().cloned())
        .collect();
    let hook = knob_hook(busy, config.daemon.irq_deferral);
    let (dp, defaults) = build_dataplane(config, devices, Some(hook))?;
    let info: Vec<IfInfo> = config
        .devices
        .iter()
        .zip(&config.packet.interfaces)
        .zip(rx_owners.into_iter().zip(irqs))
        .map(|((d, ifc), (rx_owner, irqs))| IfInfo {
            name: d.name.clone(),
            backend: d.backend.name().to_string(),
            rx_owner,
            irqs,
            umem: umem_line(d, &umem_names),
            mac: ifc.mac.map(|m| m.to_string()),
            addresses: ifc.addresses.iter().map(|a| a.to_string()).collect(),
        })
        .collect();
    Ok((dp, defaults, info, reopener))
}

/// Each writable entry and its value before the config was applied.
pub(crate) type Defaults = Vec<(String, String)>;

/// The packet stage and the dataplane on `devices`, with the config's modes and knobs
/// applied in order, each knob once; also the writable values before they were applied
/// (the defaults). `knob_hook`, registered on the poller before any knob is written, is
/// told of every knob write from then on.
pub(crate) fn build_dataplane<D: Device>(
    config: &RunConfig,
    devices: Vec<D>,
    knob_hook: Option<KnobHook>,
) -> Result<(Dataplane<D, Stage>, Defaults), RunError> {
    let names: Vec<&str> = config.devices.iter().map(|d| d.name.as_str()).collect();
    let mut stage = Stage::new(&config.packet, &names)
        .map_err(|e| RunError::Setup(format!("{}: {e}", config.path.display())))?;
    // IP timestamp options want milliseconds since midnight UT; the stage's clock is
    // the monotonic one.
    if let Ok(since_epoch) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        let wall_ns = since_epoch.as_nanos() as u64;
        stage.set_utc_offset(wall_ns.wrapping_sub(polld_dev::clock::monotonic_ns()));
    }
    let mut poller = Poller::new(config.profile.knobs());
    if let Some(hook) = knob_hook {
        poller.on_knob_write(hook);
    }
    let mut dp = Dataplane::new(poller, devices, stage);
    let defaults = polld_control::answer::writable_values(&dp);
    for (i, d) in config.devices.iter().enumerate() {
        dp.set_mode(i, d.mode)
            .map_err(|e| RunError::Setup(format!("{}: {}: {e}", config.path.display(), d.name)))?;
    }
    let writable: Vec<&str> = defaults.iter().map(|(name, _)| name.as_str()).collect();
    let refused: Vec<_> = config
        .knobs
        .iter()
        .filter_map(|knob| {
            let e = dp.sysctl_set(&knob.name, &knob.value).err()?;
            Some(config.knob_error(knob, &e, &writable))
        })
        .collect();
    if let Some(errors) = RunConfigErrors::new(refused) {
        return Err(RunError::Config(errors));
    }
    Ok((dp, defaults))
}
