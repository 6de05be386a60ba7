//! Handing a running flow over between algorithms (MCC §3.1.1) on the fake sender and its
//! modelled link, the way the agent hands a flow over (`FlowState::prepare_handover`, then the new
//! algorithm's `take_over`):
//! - the window survives every handover between the selector's algorithms (no collapse, no
//!   burst) and slow start does not restart;
//! - rate-based newcomers pace at window / RTT;
//! - MCC's Fig. 5 sequence (Cubic → BBR → Westwood on a 2 Mbit/s, 30 ms link with 4% loss):
//!   throughput in the 2 s after each handover is at least 80% of what the new algorithm
//!   achieves on its own on the same link.
//!
//! The link model is per round trip (one report per RTT, losses reported in the round they
//! happen, no retransmission timer), so these tests speak for the algorithms' window and rate
//! logic across a handover, not for the datapaths' timing.

use ccswitch_algorithms::testing::{FakeSender, Link, LinkLoss, LinkRound};
use ccswitch_algorithms::{simple, FlowState};

/// The algorithms the selector hands flows over between are these and BBR.
const WINDOW_BASED: [&str; 6] = ["cubic", "westwood", "hybla", "illinois", "reno", "vegas"];
/// A handover neither collapses nor inflates the window or what is sent beyond this ratio.
const SMOOTH: std::ops::RangeInclusive<f64> = 0.7..=1.3;
/// Rounds watched after a handover for a restarted slow start.
const ROUNDS_AFTER_SWITCH: u32 = 10;
/// Largest growth of the data sent from one round to the next once handed over: slow start
/// doubles it and BBR's startup multiplies it by 2.89; congestion avoidance and BBR's 1.25
/// probe (a little more in bytes, as its queue lengthens the RTT) stay below.
const MAX_ROUND_GROWTH: f64 = 1.5;

fn sender(name: &str, rtt_ms: u64) -> FakeSender {
    FakeSender::new(simple(name).unwrap(), 10, rtt_ms)
}

fn ratio(after: u64, before: u64) -> f64 {
    after as f64 / before as f64
}

/// 24 Mbit/s, 50 ms, a buffer of one BDP (≈ 104 segments each).
fn wide_link() -> Link {
    let link = Link::new(24, 50, 0);
    Link {
        buffer_bytes: link.bdp_bytes(),
        ..link
    }
}

/// Runs `name` on `link` past its start-up, then on to a moment in congestion avoidance
/// where the next round will not overflow the buffer if the window stays within ±30%: not
/// recovering, the last round lossless, the queue at most half the buffer. Returns the
/// sender and that last round.
fn in_avoidance(name: &str, link: &Link) -> (FakeSender, LinkRound) {
    let mut s = sender(name, link.base_rtt_us / 1000);
    for _ in 0..250 {
        s.round_on_link(link);
    }
    for _ in 0..1000 {
        let r = s.round_on_link(link);
        let calm = r.lost_packets == 0 && r.queue_bytes <= link.buffer_bytes / 2;
        if calm && !s.state.in_recovery() && (name == "bbr" || !s.state.in_slow_start()) {
            return (s, r);
        }
    }
    panic!("{name} never reached a calm moment in congestion avoidance on {link:?}");
}

/// What went wrong after a handover `from` → `to` in avoidance on `link`: the window on the
/// first report and the data sent in the first round must stay within [`SMOOTH`] of
/// `reference(window before, sent in the last round before)`; afterwards no slow start (for
/// window-based newcomers, whose ssthresh means something) and no round-to-round growth above
/// [`MAX_ROUND_GROWTH`].
fn handover_problems(
    from: &str,
    to: &str,
    link: &Link,
    reference: fn(u64, u64) -> u64,
) -> Vec<String> {
    let (mut s, before) = in_avoidance(from, link);
    let reference = reference(s.state.cwnd_bytes, before.sent_bytes);
    s.hand_over_to(simple(to).unwrap());
    let first = s.round_on_link(link);
    let mut problems = Vec::new();
    let window = ratio(s.state.cwnd_bytes, reference);
    if !SMOOTH.contains(&window) {
        problems.push(format!(
            "{from} -> {to}: window ×{window:.2} on the first report"
        ));
    }
    let sent = ratio(first.sent_bytes, reference);
    if !SMOOTH.contains(&sent) {
        problems.push(format!(
            "{from} -> {to}: sent ×{sent:.2} in the first round"
        ));
    }
    let mut previous = first.sent_bytes;
    for round in 1..=ROUNDS_AFTER_SWITCH {
        if to != "bbr" && s.state.in_slow_start() {
            problems.push(format!("{from} -> {to}: in slow start at round {round}"));
        }
        let r = s.round_on_link(link);
        let growth = ratio(r.sent_bytes, previous);
        if growth > MAX_ROUND_GROWTH {
            problems.push(format!(
                "{from} -> {to}: round {round} sent ×{growth:.2} the round before"
            ));
        }
        previous = r.sent_bytes;
    }
    problems
}

fn window_before(cwnd_bytes: u64, _sent_bytes: u64) -> u64 {
    cwnd_bytes
}

fn sent_before(_cwnd_bytes: u64, sent_bytes: u64) -> u64 {
    sent_bytes
}

#[test]
fn handovers_between_window_algorithms_keep_the_window_and_what_is_sent() {
    let link = wide_link();
    let mut problems = Vec::new();
    for from in WINDOW_BASED {
        for to in WINDOW_BASED.into_iter().filter(|&to| to != from) {
            problems.extend(handover_problems(from, to, &link, window_before));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn handovers_to_bbr_keep_the_window_without_a_startup() {
    let link = wide_link();
    let mut problems = Vec::new();
    for from in WINDOW_BASED {
        let (mut s, _) = in_avoidance(from, &link);
        let cwnd = s.state.cwnd_bytes;
        s.hand_over_to(simple("bbr").unwrap());
        s.round_on_link(&link);
        let window = ratio(s.state.cwnd_bytes, cwnd);
        if !SMOOTH.contains(&window) {
            problems.push(format!(
                "{from} -> bbr: window ×{window:.2} on the first report"
            ));
        }
        let mut previous = s.round_on_link(&link).sent_bytes;
        for round in 2..=ROUNDS_AFTER_SWITCH {
            let sent = s.round_on_link(&link).sent_bytes;
            let growth = ratio(sent, previous);
            if growth > MAX_ROUND_GROWTH {
                problems.push(format!(
                    "{from} -> bbr: round {round} sent ×{growth:.2} the round before"
                ));
            }
            previous = sent;
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// Window / recent RTT (the smaller of the smoothed and the latest), bytes/s, computed here
/// independently of the library.
fn window_over_srtt(state: &FlowState) -> f64 {
    state.cwnd_bytes as f64 * 1e6 / state.srtt_us.min(state.latest_rtt_us) as f64
}

#[test]
fn rate_based_newcomers_pace_at_window_over_rtt() {
    let link = wide_link();
    for from in WINDOW_BASED {
        for to in ["bbr", "copa"] {
            let (mut s, _) = in_avoidance(from, &link);
            let want = window_over_srtt(&s.state);
            s.hand_over_to(simple(to).unwrap());
            let got = s
                .state
                .pacing_rate_bytes_per_s
                .expect("paces from the handover on") as f64;
            assert!(
                (got / want - 1.0).abs() <= 0.01,
                "{from} -> {to}: paces at {got:.0} B/s, window/srtt is {want:.0}"
            );
        }
        // Mystique's BBR cannot pace: it keeps the rate as a window, window × min RTT / srtt.
        let (mut s, _) = in_avoidance(from, &link);
        let want = window_over_srtt(&s.state) * s.state.min_rtt_us as f64 / 1e6;
        s.hand_over_to(simple("mystique-bbr").unwrap());
        assert_eq!(s.state.pacing_rate_bytes_per_s, None);
        let got = s.state.cwnd_bytes as f64;
        assert!(
            (got / want - 1.0).abs() <= 0.01,
            "{from} -> mystique-bbr: window {got}, want {want:.0}"
        );
    }
}

/// A paced predecessor's window is only a cap (BBR keeps 2 BDP and paces at 1 BDP per RTT):
/// what a window-based successor must inherit is what BBR had in flight.
#[test]
fn handovers_from_bbr_keep_what_it_had_in_flight() {
    let link = wide_link();
    let mut problems = Vec::new();
    for to in WINDOW_BASED {
        problems.extend(handover_problems("bbr", to, &link, sent_before));
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// Just after a loss, a window algorithm has halved its window and the queue is gone, but the
/// smoothed RTT (one sample per report, gain 1/8) still remembers the queue for several
/// round trips: window / srtt is then well below what the flow delivers.
#[test]
fn handovers_to_bbr_send_in_the_first_round_what_the_predecessor_sent() {
    let link = wide_link();
    let mut problems = Vec::new();
    for from in WINDOW_BASED {
        problems.extend(handover_problems(from, "bbr", &link, sent_before));
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// BBR drops its window to 4 segments for ~200 ms every 10 s (probe_rtt) and then restores
/// it; a handover in that moment must not leave the successor with those 4 segments.
#[test]
fn handovers_from_bbr_in_probe_rtt_inherit_the_window_before_it() {
    let link = wide_link();
    let probe_rtt_window = 4 * u64::from(ccswitch_algorithms::testing::TEST_MSS_BYTES);
    for to in WINDOW_BASED {
        let mut s = sender("bbr", link.base_rtt_us / 1000);
        let mut in_flight_before = 0;
        for _ in 0..100 {
            in_flight_before = s.round_on_link(&link).sent_bytes;
        }
        while s.state.cwnd_bytes > probe_rtt_window {
            in_flight_before = s.round_on_link(&link).sent_bytes;
        }
        s.hand_over_to(simple(to).unwrap());
        let window = ratio(s.state.cwnd_bytes, in_flight_before);
        assert!(
            SMOOTH.contains(&window),
            "bbr (probe_rtt) -> {to}: window ×{window:.2} of what BBR had in flight"
        );
    }
}

// --- MCC Fig. 5 -----------------------------------------------------------------------------

/// Run time before the first handover and between the handovers, ms.
const FIG5_PHASE_MS: u64 = 10_000;
/// Throughput is compared over this long after each handover, ms.
const FIG5_AFTER_SWITCH_MS: u64 = 2_000;
/// A steady state: this long alone on the link after this long a warm-up, ms.
const STEADY_MS: u64 = 60_000;
const WARM_UP_MS: u64 = 5_000;
/// The new algorithm keeps at least this share of its own steady throughput after a handover
/// (under random loss: on average over the loss patterns).
const FIG5_MIN_SHARE: f64 = 0.8;
/// Under random loss, after any one handover at least this share: a handover at the bottom of
/// the predecessor's sawtooth (Cubic at 2 segments after losses in a row, at 4% loss) leaves
/// BBR, which keeps the window without a startup, probing up from there for seconds.
const FIG5_MIN_SHARE_ANY: f64 = 0.5;
/// Loss patterns of the random-loss case.
const FIG5_SEEDS: u64 = 20;

/// 2 Mbit/s, 30 ms base RTT, a buffer of two BDPs (15 kB, about 10 packets), `loss`.
fn fig5_link(loss: LinkLoss) -> Link {
    let link = Link::new(2, 30, 0);
    Link {
        buffer_bytes: 2 * link.bdp_bytes(),
        ..link
    }
    .with_loss(loss)
}

/// Runs `ms` of link time; returns the goodput in bytes/s. Every round must send (a round
/// may deliver nothing: at 4% random loss both segments of a 2-segment window are lost in
/// about one round in 600).
fn goodput(s: &mut FakeSender, link: &Link, ms: u64) -> f64 {
    let (start, mut bytes) = (s.now_us, 0u64);
    while s.now_us < start + ms * 1000 {
        let r = s.round_on_link(link);
        assert!(r.sent_bytes > 0, "stalled at {} µs: {r:?}", s.now_us);
        bytes += r.delivered_bytes;
    }
    bytes as f64 * 1e6 / (s.now_us - start) as f64
}

fn steady_goodput(name: &str, link: &Link) -> f64 {
    let mut s = sender(name, link.base_rtt_us / 1000);
    goodput(&mut s, link, WARM_UP_MS);
    goodput(&mut s, link, STEADY_MS)
}

/// Cubic, then BBR, then Westwood; the goodput in the 2 s after each handover.
fn fig5_sequence(link: &Link) -> [(&'static str, f64); 2] {
    let mut s = sender("cubic", link.base_rtt_us / 1000);
    goodput(&mut s, link, FIG5_PHASE_MS);
    let mut after = [("bbr", 0.0), ("westwood", 0.0)];
    for (name, share) in after.iter_mut() {
        s.hand_over_to(simple(name).unwrap());
        *share = goodput(&mut s, link, FIG5_AFTER_SWITCH_MS);
        goodput(&mut s, link, FIG5_PHASE_MS - FIG5_AFTER_SWITCH_MS);
    }
    after
}

/// Each handover's share of the new algorithm's steady throughput in the 2 s after it, at
/// least `min_share`; returns the shares.
fn check_fig5(loss: LinkLoss, min_share: f64) -> Vec<(&'static str, f64)> {
    let link = fig5_link(loss);
    let capacity = link.bandwidth_bytes_per_s as f64;
    let mut shares = Vec::new();
    for (name, after) in fig5_sequence(&link) {
        let steady = steady_goodput(name, &link);
        println!(
            "{loss:?}: {name} after the handover {:.2} of the link, alone {:.2} (share {:.2})",
            after / capacity,
            steady / capacity,
            after / steady
        );
        assert!(
            after >= min_share * steady,
            "{loss:?}: {name} delivered {after:.0} B/s in the {FIG5_AFTER_SWITCH_MS} ms after \
             the handover, below {min_share} × its steady {steady:.0} B/s"
        );
        shares.push((name, after / steady));
    }
    shares
}

#[test]
fn fig5_handovers_keep_throughput_under_random_loss() {
    let mut shares: Vec<(&str, f64)> = Vec::new();
    for seed in 1..=FIG5_SEEDS {
        shares.extend(check_fig5(LinkLoss::Random { per_million: 40_000, seed }, FIG5_MIN_SHARE_ANY));
    }
    for name in ["bbr", "westwood"] {
        let of: Vec<f64> = shares.iter().filter(|(n, _)| *n == name).map(|(_, s)| *s).collect();
        let mean = of.iter().sum::<f64>() / of.len() as f64;
        assert!(mean >= FIG5_MIN_SHARE, "{name}: {mean:.2} of its steady throughput after a handover, on average");
    }
}

#[test]
fn fig5_handovers_keep_throughput_under_periodic_loss() {
    check_fig5(LinkLoss::EveryNth(25), FIG5_MIN_SHARE);
}
