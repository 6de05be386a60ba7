//! The standard program's ACK-aggregation clauses, run by the interpreter (the reference both
//! datapaths' folds are checked against): an ACK epoch ends once its ACKs fall behind the
//! rate, however long it has kept pace before, as Linux's `bbr_update_ack_aggregation` ends it.

use std::sync::Arc;

use ccswitch_ccp::program::Program;
use ccswitch_ccp::{CcpFlow, Primitives};
use ccswitch_protocol::lang::reg_type;
use ccswitch_protocol::standard::{self, control, report, AGG_RATE_UNIT_US};
use ccswitch_protocol::wire::{self, Msg, UpdateField};

const MSS: u64 = 1448;
const CWND: u64 = 100 * MSS;
/// The rate the agent pre-sets, bytes/s: one segment per 1.448 ms.
const RATE: u64 = 1_000_000;

fn standard_program() -> Arc<Program> {
    let Msg::InstallExpr(install) = wire::decode(standard::INSTALL_MESSAGE).unwrap().0 else { panic!("an INSTALL_EXPR") };
    Arc::new(Program::from_install(&install).unwrap())
}

fn control(index: usize, value: u64) -> UpdateField {
    UpdateField { reg_type: reg_type::NONVOLATILE_CONTROL, reg_index: index as u32, value }
}

/// Each ACK's `Report.extra_acked` (reports per ACK), for `count` ACKs of one segment each,
/// `gap_us` apart, from `*now_us`.
fn acks(flow: &mut CcpFlow, now_us: &mut u64, gap_us: u64, count: u64) -> Vec<u64> {
    let mut extra = Vec::new();
    for _ in 0..count {
        *now_us += gap_us;
        let ack = Primitives { bytes_acked: MSS, packets_acked: 1, rtt_sample_us: 50_000, bytes_in_flight: CWND, now: *now_us, ..Primitives::default() };
        let step = flow.on_ack(&ack, *now_us);
        assert!(step.error.is_none(), "{:?}", step.error);
        extra.push(step.report.expect("a report per ACK").fields[report::EXTRA_ACKED]);
    }
    extra
}

#[test]
fn an_epoch_that_kept_pace_with_the_rate_for_seconds_ends_when_its_acks_fall_behind() {
    let start_us = 1_000_000;
    let mut flow = CcpFlow::new(1, CWND as u32, MSS as u32);
    let agg_rate = RATE * AGG_RATE_UNIT_US / 1_000_000;
    flow.change_program(standard_program(), &[control(control::PER_ACK, 1), control(control::AGG_RATE, agg_rate)], start_us)
        .unwrap();
    let mut now_us = start_us;
    let gap_us = MSS * 1_000_000 / RATE;
    // A burst of 20 segments at once: the epoch's excess.
    let burst = acks(&mut flow, &mut now_us, 0, 20);
    assert_eq!(burst[19], 20 * MSS);
    // Then three seconds at exactly the rate: the epoch goes on, about 20 segments ahead.
    let paced = acks(&mut flow, &mut now_us, gap_us, 3_000_000 / gap_us);
    assert!(paced.iter().all(|&x| x >= 18 * MSS), "kept pace: {:?}", &paced[paced.len() - 3..]);
    // Then a second at half the rate: the rate catches up with the epoch within 60 ms, and
    // a new epoch starts at the ACK that finds it behind.
    let slower = acks(&mut flow, &mut now_us, 2 * gap_us, 1_000_000 / (2 * gap_us));
    let tail = &slower[slower.len() / 2..];
    assert!(tail.iter().all(|&x| x <= MSS), "the epoch restarted: {:?}", &tail[..5]);
}
