//! `polld ctl --save`: the running knobs and modes written into the config file, with its
//! comments and order kept, and a write that fails part-way leaving the old file intact.

use std::path::Path;

use polld_control::daemon::{daemon_entry, DEFAULT_PREFIX};
use polld_control::save::{save, update_config, write_atomically, SaveError, StagedFile};
use polld_core::SysctlEntry;

const CONFIG: &str = r#"# fwd router: hand-written
[daemon]
socket = "/run/polld/polld.sock"   # the default

[knobs]
# more frames per tick than FreeBSD's 150
"kern.polling.burst_max" = 1000   # keep this comment
"kern.polling.user_frac" = 50

[[interfaces]]
name = "veth1"
backend = "af_xdp"
mode = "polling"    # rc.conf: ifconfig_veth1="... polling"
addresses = ["10.0.1.2/24"]

[[interfaces]]
name = "veth2"
addresses = ["10.0.2.1/24"]
"#;

fn entry(name: &str, value: &str, writable: bool) -> SysctlEntry {
    SysctlEntry {
        name: name.into(),
        value: value.into(),
        descr: String::new(),
        writable,
    }
}

/// A daemon's List of everything: `running` (writable name, value) over the defaults of
/// the freebsd profile.
fn entries(path: &Path, running: &[(&str, &str)]) -> Vec<SysctlEntry> {
    let defaults = [
        ("kern.polling.enable", "0"),
        ("kern.polling.hz", "1000"),
        ("kern.polling.controller", "classic"),
        ("kern.polling.user_frac", "50"),
        ("kern.polling.burst_max", "150"),
        ("kern.polling.each_burst", "5"),
        ("kern.polling.reg_frac", "20"),
        ("kern.polling.idle_poll", "0"),
        ("net.inet.ip.fastforwarding", "1"),
        ("dev.veth1.mode", "interrupt"),
        ("dev.veth1.rx_process_limit", "100"),
        ("dev.veth2.mode", "interrupt"),
        ("dev.veth2.rx_process_limit", "100"),
    ];
    let mut all: Vec<SysctlEntry> = defaults
        .iter()
        .map(|(name, default)| {
            let value = running
                .iter()
                .find(|(n, _)| n == name)
                .map_or(*default, |(_, v)| v);
            entry(name, value, true)
        })
        .collect();
    all.push(entry("kern.polling.burst", "17", false));
    all.push(entry("dev.veth1.rx_packets", "123", false));
    all.push(entry(
        daemon_entry::CONFIG,
        &path.display().to_string(),
        false,
    ));
    all.extend(
        defaults
            .iter()
            .map(|(name, default)| entry(&format!("{}{name}", DEFAULT_PREFIX), default, false)),
    );
    all
}

fn scratch(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("polld-save-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn non_default_knobs_and_modes_go_in_and_everything_else_stays_as_written() {
    let path = Path::new("/etc/polld/fwd.toml");
    let running = [
        ("kern.polling.burst_max", "1000"),
        ("kern.polling.user_frac", "30"),
        ("kern.polling.controller", "time"),
        ("dev.veth2.rx_process_limit", "64"),
        ("dev.veth1.mode", "interrupt"),
        ("dev.veth2.mode", "adaptive"),
    ];
    let (text, report) = update_config(path, CONFIG, &entries(path, &running)).unwrap();
    let expected = r#"# fwd router: hand-written
[daemon]
socket = "/run/polld/polld.sock"   # the default

[knobs]
# more frames per tick than FreeBSD's 150
"kern.polling.burst_max" = 1000   # keep this comment
"kern.polling.user_frac" = 30
"kern.polling.controller" = "time"
"dev.veth2.rx_process_limit" = 64

[[interfaces]]
name = "veth1"
backend = "af_xdp"
mode = "interrupt"    # rc.conf: ifconfig_veth1="... polling"
addresses = ["10.0.1.2/24"]

[[interfaces]]
name = "veth2"
addresses = ["10.0.2.1/24"]
mode = "adaptive"
"#;
    assert_eq!(text, expected);
    assert_eq!(
        report.knobs,
        [
            ("kern.polling.controller".to_string(), "time".to_string()),
            ("kern.polling.user_frac".into(), "30".into()),
            ("dev.veth2.rx_process_limit".into(), "64".into()),
        ]
    );
    assert_eq!(
        report.modes,
        [
            ("veth1".to_string(), "interrupt".to_string()),
            ("veth2".into(), "adaptive".into())
        ]
    );
    assert!(!report.reordered);
    // Saving again changes nothing.
    let (again, report) = update_config(path, &text, &entries(path, &running)).unwrap();
    assert_eq!(again, text);
    assert!(report.knobs.is_empty() && report.modes.is_empty());
}

#[test]
fn a_file_without_knobs_gets_a_knobs_table_only_when_something_differs() {
    let path = Path::new("/x.toml");
    let bare = "[[interfaces]]\nname = \"veth1\"\n\n[[interfaces]]\nname = \"veth2\"\n";
    let (text, _) = update_config(path, bare, &entries(path, &[])).unwrap();
    assert_eq!(text, bare);
    let (text, _) = update_config(
        path,
        bare,
        &entries(path, &[("kern.polling.idle_poll", "1")]),
    )
    .unwrap();
    let parsed: toml::Table = text.parse().unwrap();
    assert_eq!(
        parsed["knobs"]["kern.polling.idle_poll"].as_integer(),
        Some(1)
    );
    assert_eq!(parsed["interfaces"].as_array().unwrap().len(), 2);
}

/// `kern.polling.enable` only reflects the modes, and is applied after them at start: it
/// is never saved, and taken out of a file that sets it, so the saved modes hold.
#[test]
fn polling_enable_is_left_to_the_modes() {
    let path = Path::new("/x.toml");
    let text = "[knobs]\n\"kern.polling.enable\" = 1\n\n[[interfaces]]\nname = \"veth1\"\n\n[[interfaces]]\nname = \"veth2\"\n";
    let running = [
        ("kern.polling.enable", "1"),
        ("dev.veth1.mode", "polling"),
        ("dev.veth2.mode", "polling"),
    ];
    let (saved, report) = update_config(path, text, &entries(path, &running)).unwrap();
    assert_eq!(report.removed, ["kern.polling.enable"]);
    let parsed: toml::Table = saved.parse().unwrap();
    assert!(parsed.get("knobs").unwrap().as_table().unwrap().is_empty());
    for iface in parsed["interfaces"].as_array().unwrap() {
        assert_eq!(iface["mode"].as_str(), Some("polling"));
    }
    let (again, report) = update_config(path, &saved, &entries(path, &running)).unwrap();
    assert_eq!(again, saved);
    assert!(report.removed.is_empty() && report.knobs.is_empty());
}

#[test]
fn knobs_are_put_in_an_order_that_applies_as_running() {
    // On FreeBSD's profile (burst_max 150) each_burst 500 needs burst_max 1000 first; the
    // file has it the other way round.
    let path = Path::new("/x.toml");
    let text = "[knobs]\nprofile = \"freebsd\"\n\"kern.polling.each_burst\" = 5\n\n[[interfaces]]\nname = \"veth1\"\n\n[[interfaces]]\nname = \"veth2\"\n";
    let running = [
        ("kern.polling.burst_max", "1000"),
        ("kern.polling.each_burst", "500"),
    ];
    let (text, report) = update_config(path, text, &entries(path, &running)).unwrap();
    assert!(report.reordered);
    let burst_max = text.find("burst_max").unwrap();
    let each_burst = text.find("each_burst").unwrap();
    assert!(burst_max < each_burst, "{text}");
    // The profile the knobs apply over stays first.
    assert!(
        text.starts_with("[knobs]\nprofile = \"freebsd\"\n"),
        "{text}"
    );
}

#[test]
fn problems_are_named_and_nothing_is_written() {
    let path = Path::new("/x.toml");
    let err = update_config(
        path,
        "[[interfaces]]\nname = \"veth1\"\n",
        &entries(path, &[]),
    )
    .unwrap_err();
    assert!(matches!(err, SaveError::MissingInterface { .. }));
    assert!(err.to_string().contains("name = \"veth2\""), "{err}");
    let err = update_config(
        path,
        "knobs = 3\n[[interfaces]]\nname = \"veth1\"\n[[interfaces]]\nname = \"veth2\"\n",
        &entries(path, &[("kern.polling.idle_poll", "1")]),
    )
    .unwrap_err();
    assert!(err.to_string().contains("write it as [knobs]"), "{err}");
    let err = update_config(path, "[oops", &entries(path, &[])).unwrap_err();
    assert!(err.to_string().starts_with("cannot edit /x.toml"), "{err}");
    let no_path: Vec<SysctlEntry> = entries(path, &[])
        .into_iter()
        .filter(|e| e.name != daemon_entry::CONFIG)
        .collect();
    assert!(matches!(save(&no_path), Err(SaveError::NoConfigPath)));
}

#[test]
fn save_rewrites_the_file_in_place_keeping_its_mode() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("mode");
    let path = dir.join("fwd.toml");
    std::fs::write(&path, CONFIG).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    let report = save(&entries(
        &path,
        &[
            ("kern.polling.user_frac", "20"),
            ("dev.veth1.mode", "polling"),
        ],
    ))
    .unwrap();
    assert!(report.written);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"kern.polling.user_frac\" = 20"), "{text}");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
    // Only the file itself is in the directory: no temporary left.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_save_stopped_before_the_rename_leaves_the_old_file_and_no_temporary() {
    let dir = scratch("stop");
    let path = dir.join("fwd.toml");
    std::fs::write(&path, CONFIG).unwrap();
    {
        let mut staged = StagedFile::create(&path).unwrap();
        staged
            .write_all(b"[knobs]\n\"kern.polling.user_frac\" = ")
            .unwrap();
        // The failure: no commit.
    }
    assert_eq!(std::fs::read_to_string(&path).unwrap(), CONFIG);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    // A rename that fails (the target became a directory) leaves it and cleans up too.
    let target = dir.join("sub");
    std::fs::create_dir(&target).unwrap();
    std::fs::write(target.join("keep"), "x").unwrap();
    let err = write_atomically(&target, b"new").unwrap_err();
    assert!(err.to_string().contains("the file is unchanged"), "{err}");
    assert_eq!(std::fs::read_to_string(target.join("keep")).unwrap(), "x");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
    std::fs::remove_dir_all(&dir).unwrap();
}
