//! The loss response an algorithm pre-sets ([`Algorithm::window_on_loss`]) is the window its
//! next report would set if it said "a packet was lost" and acknowledged nothing: the
//! datapath applies it on the ACK that reveals a loss, before the report reaches the agent,
//! so it must be the algorithm's own answer, not a guess. Checked on every round of a flow
//! over a modelled link with a small buffer (slow start, losses, recoveries, avoidance) by
//! replaying the same rounds on a fresh sender and reporting one loss.

use ccswitch_algorithms::testing::FakeSender;
use ccswitch_algorithms::simple;

/// The algorithms that answer loss with a cut they can state in advance.
const PRESET: [&str; 5] = ["reno", "cubic", "hybla", "illinois", "vegas"];
/// Those that pre-set nothing: BBR and Copa do not cut on a loss report, and Westwood's cut
/// is its bandwidth estimate, which the loss report's own rate sample updates.
const NONE: [&str; 3] = ["bbr", "copa", "westwood"];
const ROUNDS: usize = 60;

fn run(name: &str, rounds: usize) -> FakeSender {
    FakeSender::after_rounds_on_a_lossy_link(simple(name).unwrap(), rounds)
}

#[test]
fn the_preset_loss_window_is_the_algorithms_answer_to_a_loss_report() {
    for name in PRESET {
        let (mut preset, mut recovering) = (0, 0);
        for k in 1..=ROUNDS {
            let flow = run(name, k);
            let said = flow.algorithm.window_on_loss(&flow.state);
            let mut replay = run(name, k);
            let before = replay.state.cwnd_bytes;
            replay.lose(1);
            let after = replay.state.cwnd_bytes;
            match said {
                Some(w) => {
                    preset += 1;
                    assert_eq!(w, after, "{name}, round {k}: pre-set {w}, the loss report set {after}");
                    assert!(w < before, "{name}, round {k}: a pre-set loss window must be a cut");
                }
                None => {
                    recovering += 1;
                    assert!(flow.state.in_recovery(), "{name}, round {k}: no pre-set outside a recovery");
                    assert!(after >= before, "{name}, round {k}: no pre-set, yet the loss report cut {before} to {after}");
                }
            }
        }
        assert!(preset > 10, "{name}: {preset} rounds with a pre-set window");
        eprintln!("{name}: {preset} rounds pre-set, {recovering} recovering");
    }
}

#[test]
fn bbr_copa_and_westwood_preset_nothing() {
    for name in NONE {
        for k in [1, 10, ROUNDS] {
            let flow = run(name, k);
            assert_eq!(flow.algorithm.window_on_loss(&flow.state), None, "{name}, round {k}");
        }
    }
}
