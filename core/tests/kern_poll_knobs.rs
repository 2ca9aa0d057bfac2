//! Knob writes (docs/algorithm.md §9, behaviour 11): FreeBSD's ranges and refusals, and
//! every consequence of a write, knob by knob (`polld_core::poll::knob_write`).

use polld_core::{KnobError, Knobs, Poller};

// 11. Sysctl validation, with FreeBSD's ranges and the burst_max/each_burst quirk.
#[test]
fn knob_writes_are_validated_like_freebsd() {
    let mut p = Poller::new(Knobs::freebsd());
    let before = p.knobs().clone();
    let bad = [
        ("kern.polling.user_frac", "100"),
        ("kern.polling.user_frac", "-1"),
        ("kern.polling.reg_frac", "0"),
        ("kern.polling.reg_frac", "1001"),
        ("kern.polling.burst_max", "9"),
        ("kern.polling.burst_max", "20001"),
        ("kern.polling.each_burst", "0"),
        ("kern.polling.each_burst", "151"),
        ("kern.polling.hz", "99"),
        ("kern.polling.hz", "20001"),
        ("kern.polling.user_frac", "fifty"),
        ("kern.polling.controller", "pid"),
    ];
    for (name, value) in bad {
        let err = p.set_knob(name, value).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(name) && msg.contains(value), "{msg}");
        assert!(msg.contains("nothing changed"), "{msg}");
    }
    assert_eq!(p.knobs(), &before, "rejected writes change nothing");
    let msg = p
        .set_knob("kern.polling.user_frac", "100")
        .unwrap_err()
        .to_string();
    assert!(msg.contains("0..99"), "names the range: {msg}");

    assert!(matches!(
        p.set_knob("kern.polling.burst", "10"),
        Err(KnobError::ReadOnly { .. })
    ));
    assert!(matches!(
        p.set_knob("kern.polling.handlers", "1"),
        Err(KnobError::ReadOnly { .. })
    ));
    assert!(matches!(
        p.set_knob("kern.polling.bogus", "1"),
        Err(KnobError::Unknown { .. })
    ));

    p.set_knob("kern.polling.burst_max", "100").unwrap();
    p.set_knob("kern.polling.each_burst", "60").unwrap();
    p.set_knob("kern.polling.burst_max", "50").unwrap();
    assert_eq!(
        p.knobs().each_burst,
        10,
        "quirk: each_burst falls to 10, not burst_max"
    );
    p.set_knob("kern.polling.user_frac", "0").unwrap();
    p.set_knob("kern.polling.user_frac", "99").unwrap();
    p.set_knob("kern.polling.hz", "20000").unwrap();
    p.set_knob("kern.polling.reg_frac", "20000").unwrap();
    assert!(
        p.set_knob("kern.polling.hz", "1000").is_err(),
        "hz below reg_frac"
    );
    // polld's knob bounded by hz too: every knob keeps a value it would accept again.
    p.set_knob("kern.polling.reg_frac", "20").unwrap();
    p.set_knob("kern.polling.auto_window_ticks", "1000")
        .unwrap();
    let err = p
        .set_knob("kern.polling.hz", "100")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("auto_window_ticks (1000); lower auto_window_ticks first"),
        "{err}"
    );
    assert_eq!(p.knobs().hz, 20000);
}
