//! What the config tests share: a valid file of two interfaces on one CPU, and the
//! parser as `polld run` calls it, its errors as text.

use std::path::Path;

use polld_runtime::config::RunConfig;

pub const GOOD: &str = r#"
[daemon]
socket = "/tmp/polld-test.sock"
cpu = 1

[knobs]
"kern.polling.user_frac" = 30
"net.inet.ip.fastforwarding" = 1
"kern.polling.controller" = "time"

[[interfaces]]
name = "veth1"
backend = "af_xdp"
mode = "polling"
queue = 0
mac = "02:00:00:00:01:02"
addresses = ["10.0.1.2/24"]

[[interfaces]]
name = "veth2"
mac = "02:00:00:00:02:01"
addresses = ["10.0.2.1/24"]

[[routes]]
prefix = "10.9.0.0/16"
gateway = "10.0.2.2"
"#;

pub fn parse(text: &str) -> Result<RunConfig, String> {
    RunConfig::parse(Path::new("fwd.toml"), text).map_err(|e| e.to_string())
}
