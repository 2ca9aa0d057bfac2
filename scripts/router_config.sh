# Shared by the scripts that run polld on a testbed of their own (sourced, not run).
#
# The testbed's router config (as polld-testbed's polld_config writes it): polld's two
# interfaces IN and OUT (with `netns` keys on TAP) in MODE (default polling), the layout's MACs
# and addresses, static ARP; the generator's destination 10.0.2.100 gets UNOWNED_MAC (sink
# drops it unless it is sink's own, 02:00:00:00:02:02 on veth).
router_config() {
    local backend=$1 socket=$2 in_keys=$3 out_keys=$4 unowned_mac=$5 mode=${6:-polling}
    cat <<EOF
[daemon]
socket = "$socket"
cpu = 1

[knobs]
"kern.polling.burst_max" = 1000
"kern.polling.each_burst" = 50

[[interfaces]]
$in_keys
backend = "$backend"
mode = "$mode"
mac = "02:00:00:00:01:02"
addresses = ["10.0.1.2/24"]

[[interfaces]]
$out_keys
backend = "$backend"
mode = "$mode"
mac = "02:00:00:00:02:01"
addresses = ["10.0.2.1/24"]

[[static_arp]]
ip = "10.0.1.1"
mac = "02:00:00:00:01:01"

[[static_arp]]
ip = "10.0.2.2"
mac = "02:00:00:00:02:02"

[[static_arp]]
ip = "10.0.2.100"
mac = "$unowned_mac"
EOF
}
