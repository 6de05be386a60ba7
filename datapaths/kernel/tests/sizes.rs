//! Sizes come from the options, and a full directives array is visible: a flow whose slot
//! (flow id modulo max_flows) another live flow holds is refused with `DirectiveSlotBusy` and
//! counted, the others keep theirs, and a freed slot is reused. Needs root (loads the BPF
//! object).

use ccswitch_kernel::{FoldMode, KernelDatapath, DirectiveSlotBusy, LoadOptions};

fn load(max_flows: u32, ring_bytes: u32) -> anyhow::Result<KernelDatapath> {
    KernelDatapath::load(LoadOptions {
        cc_name: format!("ccsw_z{}", std::process::id() % 1_000_000),
        max_flows,
        ring_bytes,
        ..Default::default()
    })
}

#[test]
fn a_full_directives_map_refuses_new_flows_visibly() {
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root (CI runs as root)");
    let dp = load(2, 1 << 16).expect("load");
    assert_eq!(dp.max_flows(), 2);
    dp.set_directive(1, Some(20_000), None).unwrap();
    dp.set_fold(2, Some((FoldMode::PER_RTT, 5))).unwrap();
    let err = dp.set_directive(3, Some(20_000), None).unwrap_err();
    assert!(err.is::<DirectiveSlotBusy>(), "{err:#}");
    assert!(dp.set_fold(3, Some((FoldMode::PER_RTT, 5))).unwrap_err().is::<DirectiveSlotBusy>());
    assert_eq!(dp.directives_refused(), 2);
    // The flows that fit keep being updated; a freed slot takes the next flow.
    dp.set_directive(1, Some(30_000), Some(1_000_000)).unwrap();
    dp.set_directive(2, Some(30_000), None).unwrap();
    dp.clear_directive(1).unwrap();
    assert!(dp.directive(1).is_none());
    dp.set_directive(3, Some(20_000), None).unwrap();
    assert_eq!(dp.directives_refused(), 2);
    // Flow 3 took slot 1 afresh: its own window, no fold or rate of the flow before it.
    let d = dp.directive(3).unwrap();
    assert_eq!((d.flow_id, d.cwnd_bytes, d.pacing_rate, d.fold), (3, 20_000, 0, 0));
    let d = dp.directive(2).unwrap();
    assert_eq!((d.cwnd_bytes, d.fold, d.fold_start_us), (30_000, 1, 5), "a window leaves the fold as it was");
}

#[test]
fn bad_sizes_are_refused_before_loading() {
    for (max_flows, ring, want) in [(0, 1 << 16, "max_flows"), (10, 5000, "power of two"), (10, 2048, "power of two")] {
        let err = load(max_flows, ring).err().expect("refused").to_string();
        assert!(err.contains(want), "{max_flows}/{ring}: {err}");
    }
}
