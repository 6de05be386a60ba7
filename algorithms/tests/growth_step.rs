//! The step of growth an algorithm pre-sets ([`Algorithm::growth_step`]) is what its next
//! report would do: the datapath applies it on the ACK that brings the bytes acknowledged
//! since the latest report past `after_bytes`, before that report reaches the agent, so the
//! window must be the algorithm's own answer to a report of `after_bytes + 1`, and a report of
//! `after_bytes` must not grow it by a whole segment yet (the datapath's window is whole
//! segments). Both reports come when the datapath would send them, a window per RTT after the
//! latest (`FlowState::expected_report_us`): Cubic's answer moves with time. Checked on every
//! round of a flow over a modelled link with a small buffer (slow start, losses, recoveries,
//! avoidance) by replaying the same rounds.

use ccswitch_algorithms::simple;
use ccswitch_algorithms::testing::FakeSender;

/// The algorithms that pre-set their next whole segment of congestion avoidance.
const STEPPING: [&str; 2] = ["reno", "cubic"];
/// The others pre-set nothing (BBR: only in probe_rtt, which these rounds do not reach).
const NONE: [&str; 6] = ["hybla", "illinois", "vegas", "bbr", "copa", "westwood"];
const ROUNDS: usize = 60;

fn run(name: &str, rounds: usize) -> FakeSender {
    FakeSender::after_rounds_on_a_lossy_link(simple(name).unwrap(), rounds)
}

#[test]
fn the_preset_step_is_the_algorithms_answer_to_the_bytes_that_earn_it() {
    for name in STEPPING {
        let (mut preset, mut none, mut recovering) = (0, 0, 0);
        for k in 1..=ROUNDS {
            let flow = run(name, k);
            let before = flow.state.cwnd_bytes;
            let Some(step) = flow.algorithm.growth_step(&flow.state) else {
                none += 1;
                // Reno always has a next segment to earn; Cubic's curve may not reach one
                // within the windows' worth it searches (at its plateau, or below the curve).
                assert!(name != "reno" || flow.state.in_slow_start(), "{name}, round {k}: no step pre-set outside slow start");
                continue;
            };
            preset += 1;
            recovering += u32::from(flow.state.in_recovery());
            assert!(step.cwnd_bytes > before, "{name}, round {k}: a step must grow the window");
            let mss = flow.state.mss_bytes;
            // Reports at the time the datapath would send them, a window per RTT on.
            let mut short = run(name, k);
            short.now_us = flow.state.expected_report_us(step.after_bytes);
            short.ack_bytes(step.after_bytes);
            assert_eq!(
                short.state.cwnd_bytes / mss,
                before / mss,
                "{name}, round {k}: {} bytes must not earn the step",
                step.after_bytes
            );
            let mut earned = run(name, k);
            earned.now_us = flow.state.expected_report_us(step.after_bytes + 1);
            earned.ack_bytes(step.after_bytes + 1);
            assert_eq!(earned.state.cwnd_bytes, step.cwnd_bytes, "{name}, round {k}: {step:?}");
        }
        assert!(preset > 10, "{name}: {preset} rounds with a pre-set step");
        assert!(recovering > 2, "{name}: {recovering} rounds pre-set while recovering");
        eprintln!("{name}: {preset} rounds pre-set ({recovering} recovering), {none} without");
    }
}

#[test]
fn the_others_preset_no_step() {
    for name in NONE {
        for k in [1, 10, 30, ROUNDS] {
            let flow = run(name, k);
            assert_eq!(flow.algorithm.growth_step(&flow.state), None, "{name}, round {k}");
        }
    }
}
