//! BBR v1 (Cardwell et al., "BBR: Congestion-Based Congestion Control", ACM Queue 14(5)
//! 2016 and CACM 60(2) 2017; defaults and state machine of Linux `net/ipv4/tcp_bbr.c`).
//!
//! BBR models the path by two numbers and ignores loss: the bottleneck bandwidth `btl_bw`, a
//! windowed maximum of delivery-rate samples over the last 10 rounds, and the propagation
//! delay `min_rtt`, a minimum of RTT samples that expires after 10 s. It paces at
//! `pacing_gain × btl_bw` (1% below, as Linux) and caps the data in flight at
//! `cwnd_gain × btl_bw × min_rtt` plus a small allowance for segmentation offload
//! (3 × the TSO burst, rounded up to an even number of segments, +2 while probing). The gains
//! depend on the mode:
//!
//! - **Startup**: pacing and cwnd gain `2/ln 2 ≈ 2.885`, the smallest gain that doubles the
//!   sending rate every round; the window grows by the bytes acknowledged. Startup ends once
//!   `btl_bw` has not grown by 25% for 3 rounds (the pipe is full).
//! - **Drain**: pacing gain `ln 2 / 2` (the inverse) until the data in flight is at most one
//!   BDP with the TSO allowance (Linux's `bbr_inflight(bw, 1)`), emptying the queue startup
//!   built.
//! - **ProbeBw**: pacing gain cycles through `[1.25, 0.75, 1, 1, 1, 1, 1, 1]`, each phase about
//!   one `min_rtt`: the 1.25 phase lasts until in flight reaches 1.25 BDP (or a loss), the
//!   0.75 phase ends early once in flight is down to one BDP. The cycle starts at a random
//!   phase other than the 0.75 one (seeded: `seed`). cwnd gain 2.
//! - **ProbeRtt**: when `min_rtt` has not been lowered for 10 s, the window drops to 4
//!   segments for max(200 ms, one round) once in flight has drained to that, to measure the
//!   propagation delay afresh; then the previous window is restored.
//!
//! Adaptation to this agent, which reports about once per RTT (and at once on loss):
//! - A round ends at the first report whose newest acknowledged segment was sent after the
//!   round began (the report's time less its RTT sample), as Linux's rounds of delivered data
//!   end, so a queue lengthens them ([`Bbr::update_round`]; `rounds_by_send_time=0`: one
//!   `min_rtt` of time). The report's delivery rate (the largest rate sample it saw) is the
//!   round's sample; a datapath in the sender's kernel takes Linux's own rate samples.
//! - `min_rtt` starts from the handshake's RTT sample where a datapath in the sender's kernel
//!   knows it, as Linux's starts from `tcp_min_rtt` ([`Bbr::update_min_rtt`]).
//! - Startup's window grows in the datapath on every ACK (pre-set, [`Algorithm::slow_start`]),
//!   by the bytes acknowledged up to the target, as Linux's does; the rate follows the reports.
//! - Losses leave the model untouched. The window follows Linux's loss response
//!   ([`Bbr::recover_or_restore`]): each lost segment off the window, packet conservation for
//!   the first round of a loss episode (one RTT here), the window before the episode back at
//!   its end; the episodes are [`FlowState`]'s, as for the loss-based algorithms.
//! - Linux's long-term bandwidth (policer) estimator runs per report
//!   ([`Bbr::lt_bw_sampling`]); reports carry no app-limited mark, so it never resets for an
//!   application's pauses, and app-limited samples enter the bandwidth filter like others.
//! - Linux's ACK-aggregation allowance (`bbr_ack_aggregation_cwnd`: the window grows by the
//!   bytes an ACK burst acknowledges beyond what the estimate predicts;
//!   `ack_aggregation=0` leaves it out): a burst is shorter than a round and a per-RTT
//!   report's sum hides it, so the datapath measures it ACK by ACK against the estimate the
//!   agent pre-sets ([`Algorithm::aggregation_rate`]) and each report carries its largest
//!   excess; BBR keeps Linux's maximum over two windows of 5 rounds, at most 100 ms of the
//!   estimate, once the pipe is full. On the EVDO trace the kernel's BBR holds 59-70 segments
//!   where this holds 34-36 without it at the same estimated rate
//!   (`experiments/measured/bbr-long-term-bw-2026-11-27`, §4). The ovs port programs cannot
//!   keep the ACK epoch, so there a BBR flow is not folded by the port.
//! - These three with the handshake's min_rtt and drain's end as Linux's match the kernel's
//!   BBR on the cellular traces, where each alone did not
//!   (`experiments/measured/bbr-combined-batch-2026-11-29`).
//! - A retransmission timeout sets the window to 4 segments (Linux restarts from one); it
//!   then grows by the bytes acknowledged, as always, and the window saved at the timeout
//!   returns once as many bytes as it holds have been acknowledged since (Linux restores it
//!   when loss recovery ends, once the data outstanding at the timeout is acknowledged).
//!   Until then BBR asks for a report per ACK, as Linux grows the window per ACK: once per
//!   RTT would wait one *stale* RTT, the segments retransmitted after a timeout carrying no
//!   RTT sample, with the last sample the one the outage inflated (seconds on a UMTS trace,
//!   the window at 4 segments all along). The model is kept; startup's plateau count
//!   restarts, as Linux resets `full_bw` on entering loss.
//! - In ProbeRtt, the 200 ms start once a report shows in flight ≤ 4 segments or one smoothed
//!   RTT after entering ProbeRtt, whichever first (a guard against a datapath whose in-flight
//!   figure lags). Its round is also over once more than what was in flight then has been
//!   acknowledged, and once the 200 ms have passed the saved window is pre-set for the ACK
//!   that ends it ([`Algorithm::growth_step`]): Linux restores it on that ACK, where an answer
//!   to its report waits for the ACK after.
//!
//! **Taking over** a running flow (MCC §3.1.1) starts BBR in its steady state, not in
//! Startup: a handover must not cost a startup burst (2.89× the rate) nor the drain after it.
//! - The model is seeded from what the flow shows at the handover: `btl_bw` = the rate it
//!   delivers, window / recent RTT ([`FlowState::handover_rate_bytes_per_s`]), `min_rtt` = the
//!   flow's minimum RTT (stamped now, so probe_rtt comes 10 s later unless a lower RTT is
//!   seen). Both filters then run as usual: new samples replace the seed as they come, and the
//!   seed leaves the bandwidth filter after `bw_window_rounds`.
//! - The flow is in ProbeBw at a unity-gain phase (drawn from the seeded generator among the
//!   six cruising phases, so flows handed over together by one policy change do not probe in
//!   step) and paces at the inherited rate exactly.
//! - The window is the inherited one. BBR's own target, `cwnd_gain × btl_bw × min_rtt`, is
//!   about twice that when the flow had no queue, and BBR grows towards its target by the
//!   bytes acknowledged — a doubled window on the first report. So until a round of samples
//!   taken wholly after the handover has ended, the window stays at most the inherited one; on
//!   a window-only datapath (which ignores pacing) the window is the only brake, and the
//!   seeded estimate has not been confirmed yet. A target below the inherited window (the
//!   predecessor kept a queue) lowers the window at once, as BBR always does.
//!
//! Before any RTT sample there is nothing to inherit, and BBR starts afresh in Startup.

use std::collections::VecDeque;
use std::f64::consts::LN_2;

use crate::{Algorithm, AlgorithmInfo, FlowState, GrowthStep, Make, Measurement, Param, Params, Reporting, SlowStart, WindowEvent};

pub const INFO: AlgorithmInfo = AlgorithmInfo {
    name: "bbr",
    summary: "BBR v1: pace at the max delivery rate, cap in-flight at 2 BDP; startup/drain/probe_bw/probe_rtt",
    source: "Cardwell et al., BBR: Congestion-Based Congestion Control, ACM Queue 14(5) 2016 / \
             CACM 60(2) 2017; Linux net/ipv4/tcp_bbr.c",
    params: &[
        Param { name: "high_gain", default: HIGH_GAIN, unit: "ratio", help: "startup pacing and cwnd gain (2/ln2); drain paces at its inverse" },
        Param { name: "cwnd_gain", default: CWND_GAIN, unit: "ratio", help: "window as a multiple of the estimated BDP in probe_bw" },
        Param { name: "bw_window_rounds", default: 10.0, unit: "rounds", help: "window of the max-bandwidth filter" },
        Param { name: "min_rtt_window_s", default: 10.0, unit: "s", help: "min_rtt expires (and probe_rtt runs) after this long without a lower sample" },
        Param { name: "probe_rtt_ms", default: 200.0, unit: "ms", help: "time held at 4 segments in probe_rtt" },
        Param { name: "seed", default: 1.0, unit: "integer", help: "seed of the random start phase of the probe_bw gain cycle" },
        Param { name: "pace", default: 1.0, unit: "0/1", help: "0: the rate stays inside the model and the datapath never paces (window only, what the ovs datapath can enforce); for measuring what pacing is worth" },
        Param { name: "startup_per_ack", default: 1.0, unit: "0/1", help: "1: a report per ACK in startup and drain, as Linux grows the window and the rate per ACK; 0: one per RTT" },
        Param { name: "startup_in_datapath", default: 1.0, unit: "0/1", help: "1: startup's window grows in the datapath on every ACK, as Linux's; 0: on the agent's answers only" },
        Param { name: "ack_aggregation", default: 1.0, unit: "0/1", help: "1: the window also allows for ACK aggregation, the bytes an ACK epoch acknowledges beyond the estimate, measured per ACK in the datapath (Linux's extra_acked: 5-round windowed max, at most 100 ms of the estimate); 0: left out" },
        Param { name: "lt_bw", default: 1.0, unit: "0/1", help: "1: Linux's long-term bandwidth estimator: two intervals of 4+ rounds that end in 20%+ loss at the same rate mean a policer, and the flow paces at that rate (gain 1) for 48 rounds; 0: left out" },
        Param { name: "rounds_by_send_time", default: 1.0, unit: "0/1", help: "1: a round ends at the first report whose newest acknowledged segment was sent after the round began (its time less its RTT sample), as Linux's rounds of delivered data end, so a queue lengthens them; 0: one min_rtt of time" },
        Param { name: "packet_conservation", default: 1.0, unit: "0/1", help: "1: a loss episode's first round sends one segment per segment delivered and the window before it returns at its end, as Linux's; 0: losses leave the window alone" },
    ],
    make: Make::Simple(|p| Box::new(Bbr::new(BbrConfig::from_params(p)))),
};

/// Startup gain, 2/ln 2: doubles the delivery rate every round (Linux `bbr_high_gain`).
const HIGH_GAIN: f64 = 2.0 / LN_2;
/// Window gain in probe_bw (Linux `bbr_cwnd_gain`).
const CWND_GAIN: f64 = 2.0;
/// Pacing gains of the eight probe_bw phases (Linux `bbr_pacing_gain`).
const PROBE_BW_GAINS: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
/// The phase that drains what the 1.25 phase queued; a cycle never starts there.
const PROBE_BW_DRAIN_PHASE: usize = 1;
/// Pace this fraction below the estimate, to drain queues (Linux `bbr_pacing_margin_percent`).
const PACING_MARGIN: f64 = 0.01;
/// Startup goes on while the bandwidth grows by this factor per round...
const FULL_BW_GROWTH: f64 = 1.25;
/// ... and ends after this many rounds without such growth.
const FULL_BW_ROUNDS: u32 = 3;
/// ACK aggregation (Linux `bbr_extra_acked_win_rtts`, `bbr_extra_acked_max_us`): the
/// allowance is the largest excess of two windows of this many rounds...
const EXTRA_ACKED_WINDOW_ROUNDS: u32 = 5;
/// ... at most this long at the estimated rate.
const EXTRA_ACKED_MAX_US: u64 = 100_000;
/// Long-term bandwidth (Linux `bbr_lt_*`): an interval lasts at least this many rounds...
const LT_INTERVAL_MIN_ROUNDS: u32 = 4;
/// ... and ends on a loss once the interval lost at least this fraction of what it
/// delivered (Linux 50/256)...
const LT_LOSS_THRESH: f64 = 50.0 / 256.0;
/// ... and two intervals in a row whose rates differ by at most an eighth, or 4 kbit/s,
/// mean a policer...
const LT_BW_RATIO: f64 = 1.0 / 8.0;
const LT_BW_DIFF_BYTES_PER_S: u64 = 4000 / 8;
/// ... whose rate the flow then uses for this many rounds of probe_bw.
const LT_BW_MAX_ROUNDS: u32 = 48;
/// Smallest window, and the window of probe_rtt, segments (Linux `bbr_cwnd_min_target`).
const MIN_CWND_SEGMENTS: u64 = 4;
/// Startup grows the window regardless of the target until this much is delivered, segments
/// (Linux `TCP_INIT_CWND`).
const INIT_DELIVERED_SEGMENTS: u64 = 10;
/// Segments added to the window in the 1.25 phase, to reach 1.25 BDP in flight.
const PROBE_EXTRA_SEGMENTS: u64 = 2;
/// TSO burst: about 1 ms of data at the pacing rate (Linux `sk_pacing_shift` = 10)...
const TSO_RATE_SHIFT: u32 = 10;
/// ... at most a 64 KB GSO packet...
const TSO_MAX_BYTES: u64 = 65_536;
const TSO_MAX_SEGMENTS: u64 = 127;
/// ... and at least 2 segments, 1 below 1.2 Mbit/s (Linux `bbr_min_tso_rate`).
const TSO_MIN_RATE_BYTES_PER_S: u64 = 1_200_000 / 8;
/// The window allows this many TSO bursts beyond the BDP (Linux `bbr_quantization_budget`).
const TSO_BURSTS_IN_WINDOW: u64 = 3;
/// Pacing before any RTT sample assumes this RTT, µs (Linux uses 1 ms).
const DEFAULT_RTT_US: u64 = 1000;
/// The unity-gain phases of the probe_bw cycle, where a taken-over flow starts.
const PROBE_BW_CRUISE_PHASES: std::ops::Range<usize> = 2..8;
/// After a take-over the window is capped at the inherited one until this round has begun
/// (the first round to start after the handover has ended).
const HANDOVER_CAP_ROUNDS: u64 = 2;

#[derive(Clone, Copy, Debug)]
struct BbrConfig {
    high_gain: f64,
    cwnd_gain: f64,
    bw_window_rounds: u64,
    min_rtt_window_us: u64,
    probe_rtt_us: u64,
    seed: u64,
    startup_per_ack: bool,
    startup_in_datapath: bool,
    packet_conservation: bool,
    lt_bw: bool,
    ack_aggregation: bool,
    rounds_by_send_time: bool,
    pace: bool,
}

impl BbrConfig {
    fn from_params(p: &Params) -> Self {
        Self {
            high_gain: p.get("high_gain").max(1.0),
            cwnd_gain: p.get("cwnd_gain").max(0.1),
            bw_window_rounds: p.get("bw_window_rounds").max(1.0) as u64,
            min_rtt_window_us: (p.get("min_rtt_window_s").max(0.0) * 1e6) as u64,
            probe_rtt_us: (p.get("probe_rtt_ms").max(0.0) * 1e3) as u64,
            seed: p.get("seed").abs() as u64,
            startup_per_ack: p.get("startup_per_ack") != 0.0,
            startup_in_datapath: p.get("startup_in_datapath") != 0.0,
            packet_conservation: p.get("packet_conservation") != 0.0,
            lt_bw: p.get("lt_bw") != 0.0,
            ack_aggregation: p.get("ack_aggregation") != 0.0,
            rounds_by_send_time: p.get("rounds_by_send_time") != 0.0,
            pace: p.get("pace") != 0.0,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Startup,
    Drain,
    ProbeBw,
    ProbeRtt,
}

/// Maximum of the samples of the last `window` rounds: a deque of (round, value) with values
/// decreasing from front to back, so the front is the maximum.
#[derive(Clone, Debug, Default)]
struct WindowedMax {
    samples: VecDeque<(u64, u64)>,
}

impl WindowedMax {
    fn update(&mut self, round: u64, value: u64, window: u64) {
        while self.samples.back().is_some_and(|&(_, v)| v <= value) {
            self.samples.pop_back();
        }
        self.samples.push_back((round, value));
        while self
            .samples
            .front()
            .is_some_and(|&(r, _)| r + window <= round)
        {
            self.samples.pop_front();
        }
    }

    fn get(&self) -> u64 {
        self.samples.front().map_or(0, |&(_, v)| v)
    }
}

/// The ACK-aggregation allowance's state (Linux's `extra_acked*` fields): the largest excess
/// in each of two windows of rounds, the current one, and rounds into it.
#[derive(Clone, Debug, Default)]
struct ExtraAcked {
    bytes: [u64; 2],
    current: usize,
    rounds: u32,
}

/// The long-term bandwidth estimator's state (Linux's `lt_*` fields).
#[derive(Clone, Debug, Default)]
struct LongTermBw {
    /// An interval is open (it opens at the first loss).
    sampling: bool,
    /// A policer was found: `bw` is its rate, in use for `rounds` so far.
    in_use: bool,
    /// The previous interval's rate, or the policer's, bytes/s (0: none).
    bw: u64,
    /// Rounds since the interval began (or since the policer's rate came in use).
    rounds: u32,
    /// Where the interval began: time, and the bytes delivered and lost by then.
    start_us: u64,
    start_delivered: u64,
    start_lost: u64,
}

#[derive(Clone, Debug)]
pub struct Bbr {
    cfg: BbrConfig,
    mode: Mode,
    pacing_gain: f64,
    cwnd_gain: f64,
    /// Rounds seen so far, and when the current one began (µs).
    round_count: u64,
    round_start_us: Option<u64>,
    /// Bottleneck bandwidth filter, bytes/s.
    btl_bw: WindowedMax,
    /// Propagation delay estimate (0: none yet) and when it was last set, µs.
    min_rtt_us: u64,
    min_rtt_stamp_us: u64,
    /// Startup's plateau detection.
    full_bw: u64,
    full_bw_count: u32,
    full_bw_reached: bool,
    /// probe_bw gain cycle.
    cycle_index: usize,
    cycle_start_us: u64,
    rng: u64,
    /// probe_rtt: when it began, when it may end, whether a round has passed since then.
    probe_rtt_entered_us: u64,
    probe_rtt_done_us: Option<u64>,
    probe_rtt_round_done: bool,
    /// Bytes still to be acknowledged before probe_rtt's round is over: those in flight when
    /// it began, less those acknowledged since.
    probe_rtt_round_left: u64,
    /// Window before probe_rtt or a loss episode, restored after it.
    prior_cwnd: u64,
    /// Whether the flow was in a loss episode at the previous report.
    recovering: bool,
    /// While the first round of a loss episode lasts: when the episode began, µs.
    conservation_from_us: Option<u64>,
    /// Window before a retransmission timeout, restored after it.
    cwnd_before_timeout: Option<u64>,
    /// Bytes acknowledged since the latest retransmission timeout: the saved window returns
    /// once they cover it (Linux: once the data outstanding at the timeout is acknowledged
    /// and the flow leaves TCP_CA_Loss).
    acked_since_timeout: u64,
    delivered_bytes: u64,
    /// Bytes reported lost so far.
    lost_bytes: u64,
    lt: LongTermBw,
    extra_acked: ExtraAcked,
    /// The window the flow started with (the target before the model has samples).
    init_cwnd: Option<u64>,
    pacing_initialised: bool,
    /// After a take-over: the inherited window, a cap until round `HANDOVER_CAP_ROUNDS`.
    handover_cwnd_cap: Option<u64>,
    /// With `pace = 0`: the model's pacing rate, kept out of the flow state the datapath reads.
    unpublished_rate: Option<u64>,
}

impl Default for Bbr {
    fn default() -> Self {
        Self::new(BbrConfig::from_params(&Params::defaults(INFO.params)))
    }
}

impl Bbr {
    fn new(cfg: BbrConfig) -> Self {
        Self {
            cfg,
            mode: Mode::Startup,
            pacing_gain: cfg.high_gain,
            cwnd_gain: cfg.high_gain,
            round_count: 0,
            round_start_us: None,
            btl_bw: WindowedMax::default(),
            min_rtt_us: 0,
            min_rtt_stamp_us: 0,
            full_bw: 0,
            full_bw_count: 0,
            full_bw_reached: false,
            cycle_index: 0,
            cycle_start_us: 0,
            rng: cfg.seed,
            probe_rtt_entered_us: 0,
            probe_rtt_done_us: None,
            probe_rtt_round_done: false,
            probe_rtt_round_left: 0,
            prior_cwnd: 0,
            recovering: false,
            conservation_from_us: None,
            cwnd_before_timeout: None,
            acked_since_timeout: 0,
            delivered_bytes: 0,
            lost_bytes: 0,
            lt: LongTermBw::default(),
            extra_acked: ExtraAcked::default(),
            init_cwnd: None,
            pacing_initialised: false,
            handover_cwnd_cap: None,
            unpublished_rate: None,
        }
    }

    /// With `pace = 0`, runs `update` on the model's own rate and takes the rate back out of
    /// the flow state before the datapath sees it.
    fn unpaced(&mut self, state: &mut FlowState, update: impl FnOnce(&mut Self, &mut FlowState)) {
        if self.cfg.pace {
            return update(self, state);
        }
        state.pacing_rate_bytes_per_s = self.unpublished_rate;
        update(self, state);
        self.unpublished_rate = state.pacing_rate_bytes_per_s.take();
    }

    fn max_bw(&self) -> u64 {
        self.btl_bw.get()
    }

    /// The rate the flow paces at and sizes its window by: a policer's while the long-term
    /// estimator has found one, else `btl_bw` (Linux `bbr_bw`). The state machine's tests
    /// (startup's plateau, drain, the probe_bw phases) keep reading `btl_bw`, as Linux's.
    fn bw(&self) -> u64 {
        if self.lt.in_use {
            self.lt.bw
        } else {
            self.max_bw()
        }
    }

    /// Linux's `bbr_update_ack_aggregation`, from the datapath's per-ACK measure: a report's
    /// largest excess enters the current window, which restarts every 5 rounds.
    fn update_ack_aggregation(&mut self, m: &Measurement, round_start: bool) {
        let e = &mut self.extra_acked;
        if round_start {
            e.rounds += 1;
            if e.rounds >= EXTRA_ACKED_WINDOW_ROUNDS {
                e.rounds = 0;
                e.current ^= 1;
                e.bytes[e.current] = 0;
            }
        }
        e.bytes[e.current] = e.bytes[e.current].max(m.extra_acked_bytes);
    }

    /// Linux's `bbr_ack_aggregation_cwnd`: the window's allowance for ACK aggregation.
    fn ack_aggregation_bytes(&self) -> u64 {
        if !self.cfg.ack_aggregation || !self.full_bw_reached {
            return 0;
        }
        let cap = self.bw() * EXTRA_ACKED_MAX_US / 1_000_000;
        self.extra_acked.bytes[0].max(self.extra_acked.bytes[1]).min(cap)
    }

    /// `gain × btl_bw × min_rtt`, bytes (0 while the model has no samples).
    fn bdp_bytes(&self, gain: f64) -> f64 {
        self.bdp_bytes_at(self.max_bw(), gain)
    }

    /// `gain × bw × min_rtt`, bytes.
    fn bdp_bytes_at(&self, bw: u64, gain: f64) -> f64 {
        gain * bw as f64 * self.min_rtt_us as f64 / 1e6
    }

    /// Whether this report ends the current round (and starts the next): one `min_rtt` after
    /// it began or, with `rounds_by_send_time`, at the first report whose newest acknowledged
    /// segment was sent after it began (now less the report's RTT sample). Linux ends a round
    /// at the first ACK of data sent after the round began (`prior_delivered` ≥
    /// `next_rtt_delivered`); behind a queue that is one RTT as it is, not as it was empty.
    fn update_round(&mut self, now_us: u64, rtt_us: u64) -> bool {
        let ends = match self.round_start_us {
            None => true,
            Some(start) if self.cfg.rounds_by_send_time && rtt_us > 0 => sent_since(now_us, rtt_us, start),
            Some(start) => now_us > start && now_us - start >= self.min_rtt_us,
        };
        if ends {
            self.round_count += 1;
            self.round_start_us = Some(now_us);
        }
        ends
    }

    /// Linux's `bbr_lt_bw_sampling`, per report. A token-bucket policer lets a burst through,
    /// then drops what exceeds its rate: seen from the sender, intervals that end in heavy
    /// loss and deliver at one rate. An interval opens at a loss and closes at a loss at
    /// least 4 rounds later (given up after 16) once a fifth of what it delivered was lost;
    /// two closed in a row at rates within an eighth of each other make their mean the rate
    /// the flow paces at (gain 1) and sizes its window by, for 48 rounds of probe_bw, then
    /// the gain cycle starts afresh. On the T-Mobile LTE trace behind a 100-packet queue the
    /// kernel's BBR takes this for a policer in most transfers (`ss`: the estimate falls
    /// from ~28 to ~18 Mbit/s, gain 1, for the transfer's last seconds), where ccswitch's
    /// without it went on at the full estimate and finished in 0.895 of the kernel's time
    /// (experiments/measured/bbr-long-term-bw-2026-11-27).
    fn lt_bw_sampling(&mut self, now_us: u64, lost: bool, round_start: bool) {
        if !self.cfg.lt_bw {
            return;
        }
        if self.lt.in_use {
            if self.mode == Mode::ProbeBw && round_start {
                self.lt.rounds += 1;
                if self.lt.rounds >= LT_BW_MAX_ROUNDS {
                    self.reset_lt_bw(now_us);
                    self.enter_probe_bw(now_us);
                }
            }
            return;
        }
        if !self.lt.sampling {
            if !lost {
                return;
            }
            self.start_lt_interval(now_us);
            self.lt.sampling = true;
        }
        if round_start {
            self.lt.rounds += 1;
        }
        if self.lt.rounds < LT_INTERVAL_MIN_ROUNDS {
            return;
        }
        if self.lt.rounds > 4 * LT_INTERVAL_MIN_ROUNDS {
            self.reset_lt_bw(now_us);
            return;
        }
        if !lost {
            return;
        }
        let delivered = self.delivered_bytes - self.lt.start_delivered;
        let lost_bytes = self.lost_bytes - self.lt.start_lost;
        let elapsed_us = now_us.saturating_sub(self.lt.start_us);
        if delivered == 0 || (lost_bytes as f64) < LT_LOSS_THRESH * delivered as f64 || elapsed_us < 1000 {
            return;
        }
        let bw = (delivered as u128 * 1_000_000 / elapsed_us as u128) as u64;
        if self.lt.bw > 0 {
            let diff = bw.abs_diff(self.lt.bw);
            if diff as f64 <= LT_BW_RATIO * self.lt.bw as f64 || diff <= LT_BW_DIFF_BYTES_PER_S {
                self.lt.bw = (bw + self.lt.bw) / 2;
                self.lt.in_use = true;
                self.lt.rounds = 0;
                return;
            }
        }
        self.lt.bw = bw;
        self.start_lt_interval(now_us);
    }

    fn start_lt_interval(&mut self, now_us: u64) {
        self.lt.start_us = now_us;
        self.lt.start_delivered = self.delivered_bytes;
        self.lt.start_lost = self.lost_bytes;
        self.lt.rounds = 0;
    }

    fn reset_lt_bw(&mut self, now_us: u64) {
        self.lt = LongTermBw::default();
        self.start_lt_interval(now_us);
    }

    fn update_bw(&mut self, m: &Measurement) {
        if m.delivery_rate_bytes_per_s > 0 {
            self.btl_bw.update(
                self.round_count,
                m.delivery_rate_bytes_per_s,
                self.cfg.bw_window_rounds,
            );
        }
    }

    /// A small pseudo-random generator (SplitMix64), so runs are reproducible from `seed`.
    fn next_random(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn enter_probe_bw(&mut self, now_us: u64) {
        self.mode = Mode::ProbeBw;
        // Any phase but the draining one, uniformly.
        let r = (self.next_random() % (PROBE_BW_GAINS.len() as u64 - 1)) as usize;
        self.cycle_index = if r < PROBE_BW_DRAIN_PHASE { r } else { r + 1 };
        self.cycle_start_us = now_us;
    }

    fn is_next_cycle_phase(&self, now_us: u64, m: &Measurement) -> bool {
        let full_length = now_us.saturating_sub(self.cycle_start_us) >= self.min_rtt_us;
        let gain = PROBE_BW_GAINS[self.cycle_index];
        let in_flight = m.bytes_in_flight as f64;
        if gain > 1.0 {
            // Probe until the extra data is really in flight (or the path drops it).
            full_length && (m.lost_packets > 0 || in_flight >= self.bdp_bytes(gain))
        } else if gain < 1.0 {
            // Drain until the queue is gone, at most one round.
            full_length || in_flight <= self.bdp_bytes(1.0)
        } else {
            full_length
        }
    }

    fn update_cycle_phase(&mut self, now_us: u64, m: &Measurement) {
        if self.mode == Mode::ProbeBw && self.is_next_cycle_phase(now_us, m) {
            self.cycle_index = (self.cycle_index + 1) % PROBE_BW_GAINS.len();
            self.cycle_start_us = now_us;
        }
    }

    fn check_full_bw_reached(&mut self, round_start: bool) {
        if self.full_bw_reached || !round_start {
            return;
        }
        let bw = self.max_bw();
        if bw as f64 >= self.full_bw as f64 * FULL_BW_GROWTH {
            self.full_bw = bw;
            self.full_bw_count = 0;
            return;
        }
        self.full_bw_count += 1;
        self.full_bw_reached = self.full_bw_count >= FULL_BW_ROUNDS;
    }

    fn check_drain(&mut self, state: &mut FlowState, m: &Measurement) {
        let entering = self.mode == Mode::Startup && self.full_bw_reached;
        if !entering && self.mode != Mode::Drain {
            return;
        }
        // Linux's bbr_inflight(bw, 1): the BDP with the quantization budget. Without the
        // budget, drain waited for a few segments more to leave; in a slow stretch of the EVDO
        // trace that kept it at drain's pacing for seconds where Linux's left within 0.2 s.
        let drained = self.quantized_bytes(state, self.bdp_bytes(1.0));
        if entering {
            self.mode = Mode::Drain;
            state.ssthresh_bytes = drained.max(state.min_cwnd_bytes());
        }
        if self.mode == Mode::Drain && m.bytes_in_flight <= drained {
            self.enter_probe_bw(state.now_us);
        }
    }

    fn update_min_rtt(&mut self, state: &mut FlowState, m: &Measurement, round_start: bool) {
        let now = state.now_us;
        let mut sample = if m.min_rtt_us > 0 {
            m.min_rtt_us
        } else {
            m.rtt_us
        };
        // Linux's BBR starts from the handshake's RTT (bbr_init: tcp_min_rtt). The first data
        // ACKs' samples include the initial window's queue on a slow link: on the EVDO trace
        // 75 ms against 60, and startup's window was a quarter larger than the kernel's, enough
        // to overflow a 60-packet queue the kernel's stays inside.
        if self.min_rtt_us == 0 && m.handshake_rtt_us > 0 && (sample == 0 || m.handshake_rtt_us < sample) {
            sample = m.handshake_rtt_us;
        }
        let expired =
            self.min_rtt_us > 0 && now > self.min_rtt_stamp_us + self.cfg.min_rtt_window_us;
        if sample > 0 && (self.min_rtt_us == 0 || sample < self.min_rtt_us || expired) {
            self.min_rtt_us = sample;
            self.min_rtt_stamp_us = now;
        }
        if expired && self.mode != Mode::ProbeRtt {
            self.save_cwnd(state.cwnd_bytes);
            self.mode = Mode::ProbeRtt;
            self.probe_rtt_entered_us = now;
            self.probe_rtt_done_us = None;
        }
        if self.mode == Mode::ProbeRtt {
            self.probe_rtt(state, m, round_start);
        }
    }

    fn probe_rtt(&mut self, state: &mut FlowState, m: &Measurement, round_start: bool) {
        let now = state.now_us;
        match self.probe_rtt_done_us {
            None => {
                let drained = m.bytes_in_flight <= MIN_CWND_SEGMENTS * state.mss_bytes;
                let waited = now >= self.probe_rtt_entered_us + state.srtt_us.max(self.min_rtt_us);
                if drained || waited {
                    self.probe_rtt_done_us = Some(now + self.cfg.probe_rtt_us);
                    self.probe_rtt_round_done = false;
                    self.probe_rtt_round_left = m.bytes_in_flight;
                    self.round_start_us = Some(now);
                }
            }
            Some(done) => {
                // Over by bytes as the datapath's pre-set step counts them (growth_step), so
                // that the agent exits where the datapath already has.
                let past_round = m.acked_bytes > self.probe_rtt_round_left;
                self.probe_rtt_round_left = self.probe_rtt_round_left.saturating_sub(m.acked_bytes);
                self.probe_rtt_round_done |= round_start || past_round;
                if self.probe_rtt_round_done && now > done {
                    self.min_rtt_stamp_us = now;
                    state.cwnd_bytes = state.cwnd_bytes.max(self.prior_cwnd);
                    if self.full_bw_reached {
                        self.enter_probe_bw(now);
                    } else {
                        self.mode = Mode::Startup;
                    }
                }
            }
        }
    }

    fn update_gains(&mut self) {
        (self.pacing_gain, self.cwnd_gain) = match self.mode {
            Mode::Startup => (self.cfg.high_gain, self.cfg.high_gain),
            Mode::Drain => (1.0 / self.cfg.high_gain, self.cfg.high_gain),
            Mode::ProbeBw if self.lt.in_use => (1.0, self.cfg.cwnd_gain),
            Mode::ProbeBw => (PROBE_BW_GAINS[self.cycle_index], self.cfg.cwnd_gain),
            Mode::ProbeRtt => (1.0, 1.0),
        };
    }

    /// Linux's `bbr_set_pacing_rate`: until the flow's first RTT sample, and once at it, the
    /// window per RTT at the startup gain (`bbr_init_pacing_rate_from_rtt`); then the gain
    /// times the bandwidth estimate, which before the pipe is full only ever raises the rate.
    /// The first report's sample is the initial window's first ACK, one segment per RTT:
    /// taken as the rate (as this did until 2026-11-27), it paced the next round at a tenth
    /// of the initial window's rate, and the 2-segment bursts it sent were spaced 37 ms apart
    /// at RTT 50 ms until the next ACK brought the agent's higher rate, a round later.
    fn set_pacing_rate(&mut self, state: &mut FlowState) {
        if !self.pacing_initialised {
            let rtt_us = if state.srtt_us > 0 { state.srtt_us } else { DEFAULT_RTT_US };
            let rate = self.cfg.high_gain * state.cwnd_bytes as f64 * 1e6 / rtt_us as f64;
            state.pacing_rate_bytes_per_s = Some(Self::with_margin(rate));
            self.pacing_initialised = state.srtt_us > 0;
        }
        let bw = self.bw();
        if bw == 0 {
            return;
        }
        let rate = Self::with_margin(self.pacing_gain * bw as f64);
        if self.full_bw_reached || state.pacing_rate_bytes_per_s.is_none_or(|r| rate > r) {
            state.pacing_rate_bytes_per_s = Some(rate);
        }
    }

    /// Linux's `bbr_set_cwnd_to_recover_or_restore`, per report: each loss takes its segment
    /// off the window; a new loss episode (entering Recovery) saves the window and cuts it
    /// to what is in flight plus what the report delivered, and for its first round
    /// ([`Bbr::round_over_since`]) the window does not grow: one segment
    /// sent per segment delivered. At the episode's end the saved window returns. Returns
    /// whether the window is conservation's (no growth then). Where startup overflows the
    /// queue (2 MB, RTT 150 ms, 300 packets), ccswitch's BBR without it took 0.963 of the
    /// kernel's time, with it 0.991 (`experiments/measured/bbr-loss-response-2026-11-27`).
    ///
    /// Linux keeps the window at least in flight plus delivered through that round, which
    /// there is at most the window less the losses: its in flight never exceeds the window
    /// it set the ACK before. The datapath's does, by what it sent under the agent's window
    /// before (and grew in startup, [`Algorithm::slow_start`]) while the answer travelled.
    /// Followed, that held the window up: on the 2 MB path at RTT 50 it fell 314 -> 248 in a
    /// burst of 112 losses, where Linux's fell 316 -> 202
    /// (`experiments/measured/bbr-startup-losses-2026-11-29`). So in flight counts up to
    /// the agent's own window only.
    fn recover_or_restore(&mut self, state: &mut FlowState, m: &Measurement, new_episode: bool) -> bool {
        if !self.cfg.packet_conservation {
            return false;
        }
        let mss = state.mss_bytes;
        let mut cwnd = state.cwnd_bytes.saturating_sub(m.lost_packets * mss).max(mss);
        let recovering = state.in_recovery();
        if new_episode {
            // Linux saves it from ssthresh, on entering Recovery.
            self.save_cwnd(state.cwnd_bytes);
            self.conservation_from_us = Some(state.now_us);
            cwnd = cwnd.min(m.bytes_in_flight + m.acked_bytes);
        } else if self.recovering && !recovering {
            cwnd = cwnd.max(self.prior_cwnd);
            self.conservation_from_us = None;
        }
        self.recovering = recovering;
        if self.conservation_from_us.is_some_and(|from| self.round_over_since(state, m, from)) {
            self.conservation_from_us = None;
        }
        state.cwnd_bytes = cwnd;
        self.conservation_from_us.is_some()
    }

    fn with_margin(rate: f64) -> u64 {
        ((rate * (1.0 - PACING_MARGIN)) as u64).max(1)
    }

    /// Segments in one TSO burst at the current pacing rate.
    fn tso_segments(state: &FlowState) -> u64 {
        let rate = state.pacing_rate_bytes_per_s.unwrap_or(0);
        let min = if rate < TSO_MIN_RATE_BYTES_PER_S {
            1
        } else {
            2
        };
        ((rate >> TSO_RATE_SHIFT).min(TSO_MAX_BYTES) / state.mss_bytes).clamp(min, TSO_MAX_SEGMENTS)
    }

    /// The window for the current gain: the BDP share plus room for TSO bursts.
    fn target_cwnd(&self, state: &FlowState, init_cwnd: u64) -> u64 {
        if self.bw() == 0 || self.min_rtt_us == 0 {
            return init_cwnd;
        }
        let bdp = self.bdp_bytes_at(self.bw(), self.cwnd_gain) + self.ack_aggregation_bytes() as f64;
        self.quantized_bytes(state, bdp)
    }

    /// Linux's `bbr_quantization_budget`: `bytes` in whole segments plus room for TSO bursts,
    /// even, and 2 more in ProbeBw's first phase.
    fn quantized_bytes(&self, state: &FlowState, bytes: f64) -> u64 {
        let mss = state.mss_bytes;
        let mut segments = (bytes / mss as f64).ceil() as u64 + TSO_BURSTS_IN_WINDOW * Self::tso_segments(state);
        segments = segments.div_ceil(2) * 2;
        if self.mode == Mode::ProbeBw && self.cycle_index == 0 {
            segments += PROBE_EXTRA_SEGMENTS;
        }
        segments * mss
    }

    fn set_cwnd(&mut self, state: &mut FlowState, m: &Measurement, init_cwnd: u64) {
        let mss = state.mss_bytes;
        let min_cwnd = MIN_CWND_SEGMENTS * mss;
        let target = self.target_cwnd(state, init_cwnd);
        let mut cwnd = state.cwnd_bytes;
        if m.acked_bytes > 0 {
            if self.full_bw_reached {
                cwnd = (cwnd + m.acked_bytes).min(target);
            } else if cwnd < target || self.delivered_bytes < INIT_DELIVERED_SEGMENTS * mss {
                cwnd += m.acked_bytes;
            }
        }
        if let Some(cap) = self.handover_cwnd_cap {
            if self.round_count < HANDOVER_CAP_ROUNDS {
                cwnd = cwnd.min(cap);
            } else {
                self.handover_cwnd_cap = None;
            }
        }
        cwnd = cwnd.max(min_cwnd);
        if self.mode == Mode::ProbeRtt {
            cwnd = cwnd.min(min_cwnd);
        }
        state.cwnd_bytes = cwnd;
    }

    /// Start in probe_bw at a cruising phase with the model seeded from the flow (see the
    /// header); nothing to seed from before the flow's first RTT sample.
    fn seed_from(&mut self, state: &mut FlowState) {
        let Some(rate) = state.handover_rate_bytes_per_s() else {
            return;
        };
        let now = state.now_us;
        self.btl_bw.update(self.round_count, rate, self.cfg.bw_window_rounds);
        self.min_rtt_us = state.min_rtt_us;
        self.min_rtt_stamp_us = now;
        self.round_start_us = Some(now);
        self.full_bw = rate;
        self.full_bw_reached = true;
        self.mode = Mode::ProbeBw;
        let phases = PROBE_BW_CRUISE_PHASES;
        self.cycle_index = phases.start + (self.next_random() % phases.len() as u64) as usize;
        self.cycle_start_us = now;
        self.update_gains();
        self.init_cwnd = Some(state.cwnd_bytes);
        self.prior_cwnd = state.cwnd_bytes;
        self.handover_cwnd_cap = Some(state.cwnd_bytes);
        self.pacing_initialised = true;
        state.pacing_rate_bytes_per_s = Some(rate.max(1));
    }

    /// Whether a round begun at `from_us` is over at this report: with `rounds_by_send_time`,
    /// once the newest segment it acknowledges was sent after `from_us` (now less its RTT
    /// sample), as Linux ends the round a loss episode starts (`next_rtt_delivered`); else one
    /// smoothed RTT (at least `min_rtt`) after it. After a burst of losses the queue has
    /// drained and the RTT is back near `min_rtt`, where the smoothed one still carries the
    /// queue before: on the T-Mobile LTE trace conservation held the window one report (~60
    /// ms) longer than the kernel's BBR in each loss episode
    /// (`experiments/measured/bbr-lte-diagnosis-2026-11-29`).
    fn round_over_since(&self, state: &FlowState, m: &Measurement, from_us: u64) -> bool {
        if self.cfg.rounds_by_send_time && m.rtt_us > 0 {
            sent_since(state.now_us, m.rtt_us, from_us)
        } else {
            state.now_us >= from_us + state.srtt_us.max(self.min_rtt_us)
        }
    }

    /// Linux's `bbr_save_cwnd`: the window to return to after probe_rtt or a loss episode.
    /// Once a loss episode, a timeout's regrowth or probe_rtt has lowered the window, the
    /// saved one is kept if larger: probe_rtt entered while a timeout's window regrew (an
    /// outage expires `min_rtt`) had saved the 4 segments the timeout left, and gave them back.
    fn save_cwnd(&mut self, cwnd: u64) {
        let lowered = self.recovering || self.cwnd_before_timeout.is_some() || self.mode == Mode::ProbeRtt;
        self.prior_cwnd = if lowered { self.prior_cwnd.max(cwnd) } else { cwnd };
    }

    fn on_timeout(&mut self, state: &mut FlowState) {
        self.save_cwnd(state.cwnd_bytes);
        self.acked_since_timeout = 0;
        self.recovering = false;
        self.conservation_from_us = None;
        if self.cwnd_before_timeout.is_none() {
            self.cwnd_before_timeout = Some(state.cwnd_bytes);
        }
        // All that was in flight is lost: the next ACK acknowledges data sent after
        // probe_rtt's round began, which ends it (Linux's prior_delivered of a retransmission).
        self.probe_rtt_round_left = 0;
        state.cwnd_bytes = MIN_CWND_SEGMENTS * state.mss_bytes;
        self.full_bw = 0;
    }

    /// The window of the report that ends probe_rtt having acknowledged `acked_bytes`: the
    /// saved window back, then the mode's growth toward its target, as [`Bbr::measure`] sets
    /// them (the report's other samples aside).
    fn probe_rtt_exit_cwnd(&self, state: &FlowState, acked_bytes: u64) -> u64 {
        let (mut bbr, mut state) = (self.clone(), state.clone());
        let init_cwnd = bbr.init_cwnd.unwrap_or(state.cwnd_bytes);
        state.cwnd_bytes = state.cwnd_bytes.max(bbr.prior_cwnd);
        if bbr.full_bw_reached {
            bbr.enter_probe_bw(state.now_us);
        } else {
            bbr.mode = Mode::Startup;
        }
        bbr.update_gains();
        let m = Measurement { acked_bytes, ..Default::default() };
        bbr.unpaced(&mut state, |bbr, state| {
            bbr.set_pacing_rate(state);
            bbr.set_cwnd(state, &m, init_cwnd);
        });
        state.cwnd_bytes
    }
}

/// Whether the newest segment acknowledged at `now_us`, with an RTT sample of `rtt_us`, was sent
/// at or after `from_us`: how Linux's BBR tells that a round begun at `from_us` is over
/// (`prior_delivered` ≥ `next_rtt_delivered`), read from the report's clock and RTT.
fn sent_since(now_us: u64, rtt_us: u64, from_us: u64) -> bool {
    now_us > from_us && now_us - from_us >= rtt_us
}

impl Algorithm for Bbr {
    fn name(&self) -> &str {
        INFO.name
    }

    /// Per RTT, or with `startup_per_ack` per ACK in Startup and Drain: Linux grows the
    /// window and raises the pacing rate on every ACK while the rate doubles each round, and
    /// leaves Drain on the ACK that brings in flight down to one BDP, where a report per round
    /// lags both by up to a round (2 MB at 300 ms RTT: 3.58 s per RTT, 2.95-2.98 s per ACK,
    /// native 2.93 s). The selector's features take one RTT sample per round trip, so they do
    /// not depend on this choice.
    fn reporting(&self) -> Reporting {
        if self.cwnd_before_timeout.is_some() {
            return Reporting::PerAck;
        }
        match self.mode {
            Mode::Startup | Mode::Drain if self.cfg.startup_per_ack => Reporting::PerAck,
            _ => Reporting::PerRtt,
        }
    }

    /// Startup's window, pre-set in the datapath: until the pipe is full, Linux grows the
    /// window by every byte acknowledged while it is below the target (and regardless of it
    /// until 10 segments are delivered), on each ACK. With reports per ACK the agent's answer
    /// does the same a shim wake-up later (up to 5 ms of a startup round at 24 Mbit/s, ACKs
    /// meanwhile growing nothing); pre-set, the window grows on the ACK itself and the answer
    /// carries the same window. The rate still follows the reports. Not after a timeout
    /// (the saved window returns in one step) nor under a handover's cap.
    fn slow_start(&self, state: &FlowState) -> Option<SlowStart> {
        if !self.cfg.startup_in_datapath
            || self.mode != Mode::Startup
            || self.full_bw_reached
            || self.cwnd_before_timeout.is_some()
            || self.handover_cwnd_cap.is_some()
            || self.conservation_from_us.is_some()
        {
            return None;
        }
        let mss = state.mss_bytes;
        let init_cwnd = self.init_cwnd.unwrap_or(state.cwnd_bytes);
        let init_left = (INIT_DELIVERED_SEGMENTS * mss).saturating_sub(self.delivered_bytes);
        let until_bytes = self.target_cwnd(state, init_cwnd).max(state.cwnd_bytes + init_left);
        Some(SlowStart { cwnd_bytes: state.cwnd_bytes, until_bytes })
    }

    /// probe_rtt's end, pre-set in the datapath: Linux's saved window returns on the first
    /// ACK once both probe_rtt's round and its 200 ms are over, so the step waits on both, its
    /// round's bytes (counted from what was in flight when the round began; none once the round
    /// is over) and the 200 ms (`not_before_us`). Answered from a report instead, the window
    /// rose only on the ACK after the answer: on the UMTS trace, where probe_rtt's round ends
    /// with the first ACK after an outage, 4 segments were in flight and that ACK came 0.65 s
    /// later (`experiments/measured/bbr-conservation-batch-2026-11-29`, §5); where the round
    /// ended in the burst after the outage before the 200 ms had passed, a step that counted
    /// bytes alone could not be pre-set, and the exit came an ACK late, 0.12-0.14 s
    /// (`experiments/measured/bbr-probe-rtt-exit-2026-11-29`, §3).
    fn growth_step(&self, state: &FlowState) -> Option<GrowthStep> {
        let done = self.probe_rtt_done_us?;
        if self.mode != Mode::ProbeRtt {
            return None;
        }
        let after_bytes = if self.probe_rtt_round_done { 0 } else { self.probe_rtt_round_left };
        let not_before_us = if state.now_us > done { 0 } else { done };
        let cwnd_bytes = self.probe_rtt_exit_cwnd(state, after_bytes + 1);
        (cwnd_bytes > state.cwnd_bytes).then_some(GrowthStep { after_bytes, cwnd_bytes, acked_per_byte: 0, not_before_us })
    }

    /// With `ack_aggregation`: the estimate the window's allowance is measured against, as
    /// Linux measures it against `bbr_bw`.
    fn aggregation_rate(&self, _state: &FlowState) -> Option<u64> {
        (self.cfg.ack_aggregation && self.bw() > 0).then(|| self.bw())
    }

    fn hand_over(&mut self, state: &mut FlowState) {
        if self.mode == Mode::ProbeRtt {
            state.cwnd_bytes = state.cwnd_bytes.max(self.prior_cwnd);
        }
    }

    fn take_over(&mut self, state: &mut FlowState) {
        *self = Self::new(self.cfg);
        self.unpaced(state, |bbr, state| bbr.seed_from(state));
    }

    fn on_report(&mut self, state: &mut FlowState, m: &Measurement) {
        self.unpaced(state, |bbr, state| bbr.measure(state, m));
    }
}

impl Bbr {
    fn measure(&mut self, state: &mut FlowState, m: &Measurement) {
        let init_cwnd = *self.init_cwnd.get_or_insert(state.cwnd_bytes);
        let new_episode = self.cfg.packet_conservation
            && matches!(state.congestion(m), Some(WindowEvent::CongestionEvent { .. }));
        if m.timeout {
            self.lost_bytes += m.lost_packets * state.mss_bytes;
            self.on_timeout(state);
            // Linux: a timeout ends a round, with a loss, for the long-term estimator.
            self.lt_bw_sampling(state.now_us, true, true);
            return;
        }
        let restore = self.cwnd_before_timeout.filter(|&saved| {
            self.acked_since_timeout += m.acked_bytes;
            self.acked_since_timeout >= saved
        });
        let now = state.now_us;
        self.delivered_bytes += m.acked_bytes;
        self.lost_bytes += m.lost_packets * state.mss_bytes;
        let round_start = self.update_round(now, m.rtt_us);
        self.lt_bw_sampling(now, m.lost_packets > 0, round_start);
        self.update_bw(m);
        self.update_ack_aggregation(m, round_start);
        self.update_cycle_phase(now, m);
        self.check_full_bw_reached(round_start);
        self.check_drain(state, m);
        self.update_min_rtt(state, m, round_start);
        self.update_gains();
        self.set_pacing_rate(state);
        if !self.recover_or_restore(state, m, new_episode) {
            self.set_cwnd(state, m, init_cwnd);
        }
        if let Some(saved) = restore {
            // In probe_rtt the window stays at 4 segments and the saved one returns after it.
            if self.mode == Mode::ProbeRtt {
                self.prior_cwnd = self.prior_cwnd.max(saved);
            } else {
                state.cwnd_bytes = state.cwnd_bytes.max(saved);
            }
            self.cwnd_before_timeout = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::testing::{FakeSender, Link, LinkRound};

    /// Lets a test look inside the algorithm a [`FakeSender`] drives.
    struct SharedBbr(Arc<Mutex<Bbr>>);

    impl Algorithm for SharedBbr {
        fn name(&self) -> &str {
            INFO.name
        }
        fn on_report(&mut self, state: &mut FlowState, m: &Measurement) {
            self.0.lock().unwrap().on_report(state, m);
        }
        fn take_over(&mut self, state: &mut FlowState) {
            self.0.lock().unwrap().take_over(state);
        }
        fn reporting(&self) -> Reporting {
            self.0.lock().unwrap().reporting()
        }
        fn slow_start(&self, state: &FlowState) -> Option<SlowStart> {
            self.0.lock().unwrap().slow_start(state)
        }
        fn aggregation_rate(&self, state: &FlowState) -> Option<u64> {
            self.0.lock().unwrap().aggregation_rate(state)
        }
    }

    fn bbr(spec: &str) -> Bbr {
        Bbr::new(BbrConfig::from_params(&Params::parse(&INFO, spec).unwrap()))
    }

    fn sender(spec: &str, rtt_ms: u64) -> (FakeSender, Arc<Mutex<Bbr>>) {
        let shared = Arc::new(Mutex::new(bbr(spec)));
        let s = FakeSender::new(Box::new(SharedBbr(shared.clone())), 10, rtt_ms);
        (s, shared)
    }

    const BW: u64 = 3_000_000; // 24 Mbit/s
    const RTT_MS: u64 = 50;
    const BDP: u64 = BW * RTT_MS / 1000; // 150 000 bytes

    /// One report `dt_ms` after the previous one: `in_flight` bytes were in flight and are
    /// acknowledged, at delivery rate `rate`.
    fn report_after(s: &mut FakeSender, dt_ms: u64, in_flight: u64, rate: u64, lost: u64) {
        report_acked(s, dt_ms, in_flight, in_flight, rate, lost);
    }

    /// One report `dt_ms` after the previous one acknowledging `acked` bytes, with `lost`
    /// packets lost and `in_flight` bytes in flight after it.
    fn report_acked(s: &mut FakeSender, dt_ms: u64, acked: u64, in_flight: u64, rate: u64, lost: u64) {
        report_measured(s, dt_ms, Measurement { acked_bytes: acked, lost_packets: lost, bytes_in_flight: in_flight, delivery_rate_bytes_per_s: rate, ..Default::default() });
    }

    /// One report `dt_ms` after the previous one, of `m` at the sender's time and RTT.
    fn report_measured(s: &mut FakeSender, dt_ms: u64, m: Measurement) {
        s.advance_ms(dt_ms);
        let m = Measurement { now_us: s.now_us, rtt_us: s.rtt_us, min_rtt_us: s.rtt_us, ..m };
        s.state.observe(&m);
        s.algorithm.on_report(&mut s.state, &m);
    }

    fn report(s: &mut FakeSender, in_flight: u64, rate: u64) {
        let rtt_ms = s.rtt_us / 1000;
        report_after(s, rtt_ms, in_flight, rate, 0);
    }

    /// A flow in probe_bw on a 24 Mbit/s, 50 ms path, driven by explicit reports.
    fn in_probe_bw(spec: &str) -> (FakeSender, Arc<Mutex<Bbr>>) {
        let (mut s, b) = sender(spec, RTT_MS);
        loop {
            let mode = b.lock().unwrap().mode;
            match mode {
                Mode::Startup => {
                    let cwnd = s.state.cwnd_bytes;
                    report(&mut s, cwnd, BW);
                }
                Mode::Drain => report(&mut s, BDP, BW),
                Mode::ProbeBw => return (s, b),
                Mode::ProbeRtt => unreachable!(),
            }
        }
    }

    fn pacing_gain_of(s: &FakeSender) -> f64 {
        let rate = s.state.pacing_rate_bytes_per_s.unwrap() as f64;
        (rate / (BW as f64 * (1.0 - PACING_MARGIN)) * 100.0).round() / 100.0
    }

    /// Bytes the link delivers in a round (what does not overflow its queue).
    fn delivered(link: &Link, r: &LinkRound) -> u64 {
        r.sent_bytes.min(link.bdp_bytes() + link.buffer_bytes)
    }

    /// Runs `rounds` rounds; returns the link utilisation over them.
    fn utilisation(
        s: &mut FakeSender,
        link: &Link,
        rounds: usize,
        mut between: impl FnMut(&mut FakeSender),
    ) -> f64 {
        let (mut bytes, mut time_us) = (0u64, 0u64);
        for _ in 0..rounds {
            let r = s.round_on_link(link);
            bytes += delivered(link, &r);
            time_us += r.rtt_us;
            between(s);
        }
        bytes as f64 / (link.bandwidth_bytes_per_s as f64 * time_us as f64 / 1e6)
    }

    /// Reno ran the flow at `segments` in avoidance at RTT `rtt_ms` on a 50 ms path; then BBR
    /// takes over.
    fn taken_over(segments: u32, rtt_ms: u64) -> (FakeSender, Arc<Mutex<Bbr>>) {
        let mut s = FakeSender::new(crate::simple("reno").unwrap(), segments, RTT_MS);
        s.ack_segments(0);
        s.set_rtt_ms(rtt_ms);
        for _ in 0..100 {
            s.ack_segments(0); // the smoothed RTT settles at rtt_ms
        }
        s.state.ssthresh_bytes = s.state.cwnd_bytes;
        let shared = Arc::new(Mutex::new(bbr("")));
        s.hand_over_to(Box::new(SharedBbr(shared.clone())));
        (s, shared)
    }

    #[test]
    fn take_over_cruises_at_the_inherited_rate_in_probe_bw() {
        let (s, b) = taken_over(80, RTT_MS);
        let rate = 80 * s.mss() * 1_000_000 / (RTT_MS * 1000);
        assert_eq!(s.state.pacing_rate_bytes_per_s, Some(rate));
        assert_eq!(s.cwnd_segments(), 80.0);
        let b = b.lock().unwrap();
        assert_eq!(b.mode, Mode::ProbeBw);
        assert!(PROBE_BW_CRUISE_PHASES.contains(&b.cycle_index));
        assert_eq!(PROBE_BW_GAINS[b.cycle_index], 1.0);
        assert_eq!((b.max_bw(), b.min_rtt_us), (rate, RTT_MS * 1000));
    }

    #[test]
    fn take_over_holds_the_window_for_a_round_and_never_bursts() {
        let link = Link::new(24, 50, BDP); // BDP ≈ 104 segments; the flow inherits 80
        let (mut s, b) = taken_over(80, RTT_MS);
        let inherited = s.state.cwnd_bytes;
        let first = s.round_on_link(&link);
        assert_eq!(first.sent_bytes, inherited, "the inherited rate for one RTT");
        assert_eq!(s.state.cwnd_bytes, inherited, "BDP × 2 would double it");
        s.round_on_link(&link);
        assert!(s.state.cwnd_bytes > inherited, "the cap ends with the next round");
        let mut previous = first.sent_bytes;
        for round in 0..40 {
            let r = s.round_on_link(&link);
            let mode = b.lock().unwrap().mode;
            assert!(matches!(mode, Mode::ProbeBw), "round {round}: {mode:?}");
            assert!(
                r.sent_bytes as f64 <= 1.26 * previous as f64 + 2.0 * s.mss() as f64,
                "round {round}: {} after {previous} bytes: faster than a 1.25 probe",
                r.sent_bytes
            );
            previous = r.sent_bytes;
        }
        // It found the spare 30%: the link is full.
        assert!(previous as f64 >= 0.9 * BDP as f64, "in flight {previous}");
    }

    #[test]
    fn take_over_does_not_keep_a_queue_the_predecessor_built() {
        // 400 segments at 200 ms RTT on a 50 ms path: 2 segments/ms, a 100-segment BDP.
        let (mut s, _) = taken_over(400, 200);
        let mss = s.mss();
        report(&mut s, 400 * mss, 2 * mss * 1000);
        // cwnd_gain × BDP (rounded up) + three TSO bursts (+ 2 if the report started a probe).
        let target_segments = 2 * 101 + 3 * 2 + PROBE_EXTRA_SEGMENTS;
        assert!(
            s.cwnd_segments() <= target_segments as f64,
            "{} segments",
            s.cwnd_segments()
        );
    }

    #[test]
    fn take_over_before_any_rtt_sample_starts_afresh() {
        let mut s = FakeSender::new(crate::simple("cubic").unwrap(), 10, RTT_MS);
        let shared = Arc::new(Mutex::new(bbr("")));
        s.hand_over_to(Box::new(SharedBbr(shared.clone())));
        assert_eq!(shared.lock().unwrap().mode, Mode::Startup);
        assert_eq!(s.state.pacing_rate_bytes_per_s, None);
    }

    #[test]
    fn startup_doubles_then_leaves_three_rounds_into_the_plateau() {
        let link = Link::new(24, 50, BDP);
        let (mut s, b) = sender("", 50);
        let mut rounds = Vec::new();
        while b.lock().unwrap().mode == Mode::Startup {
            rounds.push((s.round_on_link(&link), s.delivery_rate_bytes_per_s));
            assert!(rounds.len() < 20, "startup never ended");
        }
        for w in rounds[..4].windows(2) {
            assert_eq!(
                w[1].0.sent_bytes,
                2 * w[0].0.sent_bytes,
                "startup doubles per round"
            );
        }
        // The pipe is full from the first round delivering at the link rate; the estimate
        // then stops growing by 25%, and startup ends at the third such round.
        let first_full = rounds.iter().position(|&(_, rate)| rate == BW).unwrap();
        assert_eq!(rounds.len() - 1, first_full + FULL_BW_ROUNDS as usize);
        assert_eq!(b.lock().unwrap().mode, Mode::Drain);
        let p = s.state.pacing_rate_bytes_per_s.unwrap() as f64;
        assert!(
            (p - BW as f64 * 0.99 / HIGH_GAIN).abs() < 1000.0,
            "drain paces at 1/high_gain: {p}"
        );
    }

    /// Linux's `bbr_check_drain`: drain ends once in flight is at most `bbr_inflight(bw, 1)`,
    /// the BDP with the quantization budget, not the BDP alone.
    #[test]
    fn drain_ends_within_the_bdp_and_its_quantization_budget() {
        let after_drain_report = |in_flight: &dyn Fn(&Bbr, &FlowState) -> u64| {
            let (mut s, b) = sender("", RTT_MS);
            while b.lock().unwrap().mode == Mode::Startup {
                report(&mut s, 3 * BDP, BW);
            }
            let bytes = in_flight(&b.lock().unwrap(), &s.state);
            report(&mut s, bytes, BW);
            let mode = b.lock().unwrap().mode;
            mode
        };
        let drained = |b: &Bbr, s: &FlowState| b.quantized_bytes(s, b.bdp_bytes(1.0));
        assert_eq!(after_drain_report(&|_, s| BDP + 2 * s.mss_bytes), Mode::ProbeBw, "inside the budget");
        assert_eq!(after_drain_report(&|b, s| drained(b, s)), Mode::ProbeBw);
        assert_eq!(after_drain_report(&|b, s| drained(b, s) + 2 * s.mss_bytes), Mode::Drain);
    }

    #[test]
    fn drain_empties_the_queue_then_probe_bw_keeps_it_small() {
        let link = Link::new(24, 50, BDP);
        let (mut s, b) = sender("", 50);
        let mut startup_queue = 0;
        while b.lock().unwrap().mode == Mode::Startup {
            startup_queue = startup_queue.max(s.round_on_link(&link).queue_bytes);
        }
        assert!(
            startup_queue >= BDP / 2,
            "startup overshoots: queue {startup_queue}"
        );
        let mut drain_rounds = 0;
        while b.lock().unwrap().mode == Mode::Drain {
            let r = s.round_on_link(&link);
            drain_rounds += 1;
            assert!(drain_rounds <= 3, "drain takes a round or two");
            if b.lock().unwrap().mode == Mode::ProbeBw {
                assert!(
                    r.sent_bytes <= BDP,
                    "in flight {} > BDP at the end of drain",
                    r.sent_bytes
                );
                assert_eq!(r.queue_bytes, 0);
            }
        }
        let mut queue_sum = 0;
        for _ in 0..100 {
            queue_sum += s.round_on_link(&link).queue_bytes;
        }
        assert!(
            queue_sum / 100 <= BDP / 5,
            "mean queue in probe_bw {} bytes",
            queue_sum / 100
        );
    }

    #[test]
    fn probe_bw_cycles_through_the_eight_gains() {
        let (mut s, b) = in_probe_bw("");
        let start = b.lock().unwrap().cycle_index;
        assert_ne!(start, PROBE_BW_DRAIN_PHASE);
        let mut gains = vec![pacing_gain_of(&s)];
        for _ in 0..15 {
            report(&mut s, BDP * 13 / 10, BW);
            gains.push(pacing_gain_of(&s));
        }
        let expected: Vec<f64> = (0..16).map(|i| PROBE_BW_GAINS[(start + i) % 8]).collect();
        assert_eq!(gains, expected);
    }

    #[test]
    fn probe_phase_waits_for_in_flight_and_drain_phase_ends_early() {
        let (mut s, b) = in_probe_bw("");
        while b.lock().unwrap().cycle_index != 0 {
            report(&mut s, BDP, BW);
        }
        assert_eq!(pacing_gain_of(&s), 1.25);
        report_after(&mut s, 10, BDP * 12 / 10, BW, 1);
        assert_eq!(pacing_gain_of(&s), 1.25, "a phase lasts at least a min_rtt");
        for _ in 0..3 {
            report(&mut s, BDP * 12 / 10, BW);
            assert_eq!(pacing_gain_of(&s), 1.25, "1.25 until 1.25 BDP is in flight");
        }
        report_after(&mut s, 10, BDP * 12 / 10, BW, 1);
        assert_eq!(pacing_gain_of(&s), 0.75, "or until a loss");
        report_after(&mut s, 10, BDP * 11 / 10, BW, 0);
        assert_eq!(pacing_gain_of(&s), 0.75);
        report_after(&mut s, 10, BDP, BW, 0);
        assert_eq!(
            pacing_gain_of(&s),
            1.0,
            "the drain phase ends once in flight is one BDP"
        );
    }

    #[test]
    fn start_phase_is_random_but_never_the_drain_phase() {
        let starts: Vec<usize> = (0..40)
            .map(|seed| {
                in_probe_bw(&format!("seed={seed}"))
                    .1
                    .lock()
                    .unwrap()
                    .cycle_index
            })
            .collect();
        assert!(!starts.contains(&PROBE_BW_DRAIN_PHASE));
        for phase in [0, 2, 7] {
            assert!(
                starts.contains(&phase),
                "phase {phase} never drawn: {starts:?}"
            );
        }
        let again: Vec<usize> = (0..40)
            .map(|seed| {
                in_probe_bw(&format!("seed={seed}"))
                    .1
                    .lock()
                    .unwrap()
                    .cycle_index
            })
            .collect();
        assert_eq!(starts, again, "deterministic for a given seed");
    }

    #[test]
    fn window_is_cwnd_gain_bdp_plus_tso_allowance() {
        for (spec, bdp_segments) in [("", 208), ("cwnd_gain=1.5", 156)] {
            let (mut s, b) = in_probe_bw(spec);
            while b.lock().unwrap().cycle_index != 2 {
                report(&mut s, BDP * 13 / 10, BW);
            }
            report(&mut s, BDP, BW); // a gain-1 phase
                                     // 2 segments per TSO burst at 24 Mbit/s, three bursts.
            assert_eq!(s.cwnd_segments(), (bdp_segments + 6) as f64, "{spec}");
        }
    }

    #[test]
    fn probe_rtt_after_ten_seconds_without_a_lower_rtt() {
        let (mut s, b) = in_probe_bw("");
        let stamp = b.lock().unwrap().min_rtt_stamp_us;
        let mut prior = s.state.cwnd_bytes;
        while b.lock().unwrap().mode != Mode::ProbeRtt {
            prior = s.state.cwnd_bytes;
            report(&mut s, BDP, BW);
        }
        let entered = s.now_us;
        assert!(
            entered > stamp + 10_000_000 && entered <= stamp + 10_050_000,
            "entered at {entered}"
        );
        assert_eq!(s.cwnd_segments(), 4.0);
        while b.lock().unwrap().mode == Mode::ProbeRtt {
            assert_eq!(s.cwnd_segments(), 4.0);
            let cwnd = s.state.cwnd_bytes;
            report(&mut s, cwnd, BW);
        }
        // Drained in one round, then 200 ms and a round at 4 segments.
        assert!(
            s.now_us - entered >= 50_000 + 200_000,
            "probe_rtt lasted {} µs",
            s.now_us - entered
        );
        assert!(
            s.now_us - entered <= 350_000,
            "probe_rtt lasted {} µs",
            s.now_us - entered
        );
        assert_eq!(b.lock().unwrap().mode, Mode::ProbeBw);
        assert!(
            s.state.cwnd_bytes >= prior * 9 / 10,
            "window restored: {} < {prior}",
            s.state.cwnd_bytes
        );
        // The estimate counts as fresh again: no probe_rtt for another 10 s.
        let left = s.now_us;
        while b.lock().unwrap().mode != Mode::ProbeRtt {
            report(&mut s, BDP, BW);
        }
        assert!(s.now_us - left > 10_000_000);
    }

    #[test]
    fn a_lower_rtt_postpones_probe_rtt() {
        let (mut s, b) = in_probe_bw("");
        for _ in 0..100 {
            report(&mut s, BDP, BW); // 5 s
        }
        s.set_rtt_ms(49);
        report(&mut s, BDP, BW);
        let lowered = s.now_us;
        s.set_rtt_ms(50);
        while b.lock().unwrap().mode != Mode::ProbeRtt {
            report(&mut s, BDP, BW);
        }
        assert!(s.now_us > lowered + 10_000_000);
        assert_eq!(
            b.lock().unwrap().min_rtt_us,
            50_000,
            "the expired estimate takes the current sample"
        );
    }

    #[test]
    fn bandwidth_filter_forgets_a_higher_rate_after_ten_rounds() {
        let (mut s, b) = sender("", 50);
        let fast = Link::new(24, 50, BDP);
        for _ in 0..100 {
            s.round_on_link(&fast);
        }
        assert_eq!(b.lock().unwrap().mode, Mode::ProbeBw);
        let slow = Link::new(12, 50, BDP);
        for round in 1..=10 {
            s.round_on_link(&slow);
            let bw = b.lock().unwrap().max_bw();
            if round < 10 {
                assert!(bw > 2_900_000, "round {round}: the old max holds ({bw})");
            } else {
                assert_eq!(bw, 1_500_000, "round {round}: only new samples left");
            }
        }
        assert!(s.state.pacing_rate_bytes_per_s.unwrap() <= 1_500_000 * 125 / 100);
        let u = utilisation(&mut s, &slow, 100, |_| {});
        assert!(u > 0.9, "utilisation of the slower link {u}");
    }

    /// A policer at half the path's rate, dropping a quarter of what it delivers: two 4-round
    /// intervals at its rate make the flow pace there at gain 1 (the bandwidth filter still
    /// holds the path's rate), and after 48 rounds the gain cycle starts afresh. Without the
    /// estimator the flow goes on probing at the filter's rate.
    #[test]
    fn two_lossy_intervals_at_one_rate_are_paced_at_as_a_policer_s_for_48_rounds() {
        const POLICED: u64 = BW / 2;
        let policed_round = |s: &mut FakeSender| {
            let acked = POLICED * RTT_MS / 1000;
            report_acked(s, RTT_MS, acked, BDP, POLICED, acked / 4 / 1448);
        };
        for (spec, estimator) in [("", true), ("lt_bw=0", false)] {
            let (mut s, b) = in_probe_bw(spec);
            // The first loss opens an interval (its report's round is the interval's first),
            // the fourth round closes it (its rate is kept) and the eighth the second, at the
            // same rate: a policer.
            for round in 1..=8 {
                policed_round(&mut s);
                let bbr = b.lock().unwrap();
                assert_eq!(bbr.lt.in_use, estimator && round == 8, "{spec:?} round {round}");
                assert!(bbr.max_bw() > 2_900_000, "round {round}: the filter still holds the path's rate");
            }
            let rate = s.state.pacing_rate_bytes_per_s.unwrap();
            if !estimator {
                assert!(rate > POLICED * 2 * 3 / 4, "{spec:?}: paced at the filter's rate, {rate}");
                continue;
            }
            let lt_bw = b.lock().unwrap().lt.bw;
            assert!(lt_bw.abs_diff(POLICED) < POLICED / 50, "policer's rate {lt_bw}");
            assert_eq!(rate, Bbr::with_margin(lt_bw as f64), "gain 1 at the policer's rate");
            assert_eq!(b.lock().unwrap().pacing_gain, 1.0);
            for round in 1..=48 {
                policed_round(&mut s);
                assert_eq!(b.lock().unwrap().lt.in_use, round < 48, "round {round} of the policer's rate");
            }
            let bbr = b.lock().unwrap();
            assert_eq!(bbr.mode, Mode::ProbeBw);
            assert_eq!(bbr.pacing_gain, PROBE_BW_GAINS[bbr.cycle_index]);
        }
    }

    /// Reports of losses alone (nothing delivered) leave the model and the rate alone, and
    /// take the lost segments off the window, as Linux's `cwnd - rs->losses`, and no more.
    #[test]
    fn loss_changes_neither_model_nor_rate_and_takes_the_lost_segments_off_the_window() {
        let (mut s, b) = in_probe_bw("");
        for _ in 0..5 {
            report(&mut s, BDP, BW);
        }
        let (rate, cwnd, bw) = (
            s.state.pacing_rate_bytes_per_s,
            s.state.cwnd_bytes,
            b.lock().unwrap().max_bw(),
        );
        s.lose(1);
        s.lose(20);
        assert_eq!(s.state.pacing_rate_bytes_per_s, rate);
        assert_eq!(s.state.cwnd_bytes, cwnd - 21 * s.mss());
        assert_eq!(b.lock().unwrap().max_bw(), bw);
    }

    /// Linux's loss response (`bbr_set_cwnd_to_recover_or_restore`): the window cut to in
    /// flight plus delivered at the episode's start, losses off it and no growth for a
    /// round, growth after the round, and the window before the episode back at its end.
    #[test]
    fn a_loss_episode_conserves_packets_for_a_round_then_restores_the_window() {
        let episode = |spec: &str| {
            let (mut s, _) = in_probe_bw(spec);
            for _ in 0..5 {
                report(&mut s, BDP, BW);
            }
            let before = s.state.cwnd_bytes;
            let mss = s.mss();
            let ack = |s: &mut FakeSender, dt_ms: u64, acked: u64, lost: u64, in_flight: u64| {
                report_acked(s, dt_ms, acked * mss, in_flight * mss, BW, lost);
                s.state.cwnd_bytes / mss
            };
            let during = [
                ack(&mut s, 5, 2, 3, 60), // the loss: cut to 60 in flight plus 2 delivered
                // in flight plus delivered past the window (sent under the window before,
                // as the answer travelled): not followed, nothing grows
                ack(&mut s, 10, 4, 0, 61),
                ack(&mut s, 10, 2, 1, 55), // a loss takes its segment off
                ack(&mut s, 50, 30, 0, 60), // the round is over: growth by the bytes delivered
            ];
            let after = ack(&mut s, 10, 40, 0, 60); // the episode's 62 segments are delivered
            (before / mss, during, after)
        };
        let (before, during, after) = episode("");
        assert!(before > 100, "{before}");
        assert_eq!(during, [62, 62, 61, 91]);
        assert!(after >= before - 2, "the window before the episode returns: {after} against {before}");
        let (before, during, after) = episode("packet_conservation=0");
        assert!(during.iter().all(|&w| w >= before - 2) && after >= before - 2, "{during:?} {after} {before}");
    }

    /// Conservation's round ends as Linux's does, at the first report of data sent after the
    /// episode began, not a smoothed RTT later: behind a queue that the losses then drain, the
    /// smoothed RTT still carries the queue.
    #[test]
    fn conservation_ends_with_the_first_report_of_data_sent_after_the_loss() {
        let conserving_after = |spec: &str| {
            let (mut s, _) = in_probe_bw(spec);
            let mss = s.mss();
            s.rtt_us = 4 * RTT_MS * 1000; // a queue of three RTTs: the smoothed RTT follows
            for _ in 0..20 {
                report(&mut s, BDP, BW);
            }
            report_acked(&mut s, 5, 2 * mss, 60 * mss, BW, 3); // the loss
            s.rtt_us = RTT_MS * 1000; // the queue drained
            report_acked(&mut s, RTT_MS + 10, 30 * mss, 60 * mss, BW, 0);
            s.state.cwnd_bytes / mss
        };
        assert_eq!(conserving_after(""), 62 + 30, "the round is over: growth by the bytes delivered");
        assert_eq!(conserving_after("rounds_by_send_time=0"), 62, "a smoothed RTT (200 ms) not yet past");
    }

    #[test]
    fn timeout_drops_to_four_segments_then_restores() {
        let (mut s, _) = in_probe_bw("");
        report(&mut s, BDP, BW);
        let (cwnd, rate) = (s.state.cwnd_bytes, s.state.pacing_rate_bytes_per_s);
        assert_eq!(s.reporting(), Reporting::PerRtt);
        s.timeout();
        assert_eq!(s.cwnd_segments(), 4.0);
        assert_eq!(s.reporting(), Reporting::PerAck, "the next ACK must not wait a stale RTT");
        s.timeout();
        assert_eq!(s.cwnd_segments(), 4.0);
        assert_eq!(
            s.state.pacing_rate_bytes_per_s, rate,
            "the model survives a timeout"
        );
        let mss = s.mss();
        report_after(&mut s, 1, 4 * mss, BW, 0);
        assert_eq!(s.cwnd_segments(), 8.0, "grows by the bytes acknowledged, as in Linux's loss state");
        assert_eq!(s.reporting(), Reporting::PerAck);
        while s.reporting() == Reporting::PerAck {
            let acked = s.state.cwnd_bytes;
            report_after(&mut s, 1, acked, BW, 0);
        }
        assert!(
            s.state.cwnd_bytes >= cwnd - 2 * s.mss(),
            "restored once the window's worth of data is acknowledged: {} vs {cwnd}",
            s.state.cwnd_bytes
        );
        assert_eq!(s.reporting(), Reporting::PerRtt, "restored: once per RTT again");
    }

    /// An outage: a timeout, then RTT samples so far above `min_rtt` for ten seconds that it
    /// expires and probe_rtt begins while the window regrows from the timeout's 4 segments.
    /// Linux keeps the window saved at the timeout (`bbr_save_cwnd` in Loss takes the max), so
    /// probe_rtt ends with it, not with 4 segments.
    #[test]
    fn probe_rtt_during_a_timeout_s_regrowth_gives_back_the_window_before_the_timeout() {
        let (mut s, b) = in_probe_bw("");
        for _ in 0..5 {
            report(&mut s, BDP, BW);
        }
        let before = s.state.cwnd_bytes;
        let mss = s.mss();
        s.timeout();
        s.set_rtt_ms(2_000);
        let mut reports = 0;
        while b.lock().unwrap().mode != Mode::ProbeRtt {
            report_after(&mut s, 1_000, 2 * mss, BW / 10, 0);
            reports += 1;
            assert!(reports < 15, "min_rtt never expired");
        }
        assert!(s.state.cwnd_bytes < before / 4, "probe_rtt holds the window low");
        while b.lock().unwrap().mode == Mode::ProbeRtt {
            report_after(&mut s, 100, 2 * mss, BW / 10, 0);
            reports += 1;
            assert!(reports < 60, "probe_rtt never ended");
        }
        assert!(
            s.state.cwnd_bytes >= before - 2 * mss,
            "the window before the timeout returns: {} against {before}",
            s.state.cwnd_bytes
        );
    }

    /// probe_rtt's end is pre-set for the first ACK once both its round and its 200 ms are
    /// over: before the 200 ms pass, waiting on them; then on the round alone, counted in
    /// bytes from what was in flight when the round began; after a timeout (an outage), for
    /// the next ACK. The report of that ACK ends probe_rtt in the agent too, at the pre-set
    /// window or above it.
    #[test]
    fn probe_rtt_s_end_is_preset_for_the_ack_that_ends_its_round() {
        let (mut s, b) = in_probe_bw("");
        let mss = s.mss();
        let mut prior = s.state.cwnd_bytes;
        while b.lock().unwrap().mode != Mode::ProbeRtt {
            prior = s.state.cwnd_bytes;
            report(&mut s, BDP, BW);
        }
        let step = |s: &FakeSender| b.lock().unwrap().growth_step(&s.state);
        // Drained: the 200 ms begin, with 4 segments in flight; the step waits for them too.
        report_acked(&mut s, 50, BDP, 4 * mss, BW, 0);
        let done = b.lock().unwrap().probe_rtt_done_us.expect("the 200 ms begin");
        let waiting = step(&s).expect("a step that waits on the 200 ms");
        assert_eq!((waiting.after_bytes, waiting.not_before_us), (4 * mss, done));
        // An outage: reports a long RTT apart acknowledge little, and the round goes on.
        s.set_rtt_ms(2_000);
        report_acked(&mut s, 250, 0, 4 * mss, BW / 10, 0);
        let first = step(&s).expect("a step once the 200 ms have passed");
        assert_eq!((first.after_bytes, first.not_before_us), (4 * mss, 0));
        assert!(first.cwnd_bytes >= prior * 9 / 10, "{first:?}, saved {prior}");
        report_acked(&mut s, 100, mss, 3 * mss, BW / 10, 0);
        assert_eq!(step(&s).map(|g| g.after_bytes), Some(3 * mss), "counted from the round's start");
        assert_eq!(b.lock().unwrap().mode, Mode::ProbeRtt);
        s.timeout();
        let preset = step(&s).expect("a step after the timeout");
        assert_eq!(preset.after_bytes, 0, "the next ACK ends the round");
        report_acked(&mut s, 650, mss, 0, BW / 10, 0);
        assert_eq!(b.lock().unwrap().mode, Mode::ProbeBw);
        assert!(s.state.cwnd_bytes >= preset.cwnd_bytes, "{} against the pre-set {preset:?}", s.state.cwnd_bytes);
        assert_eq!(step(&s), None, "nothing pre-set outside probe_rtt");
    }

    /// A round that ends before probe_rtt's 200 ms have passed (the burst of ACKs after an
    /// outage) leaves the step waiting on the time alone: the first ACK after it ends
    /// probe_rtt, in the datapath and in the agent.
    #[test]
    fn a_round_over_before_the_200_ms_leaves_the_step_waiting_on_them() {
        let (mut s, b) = in_probe_bw("");
        let mss = s.mss();
        while b.lock().unwrap().mode != Mode::ProbeRtt {
            report(&mut s, BDP, BW);
        }
        let step = |s: &FakeSender| b.lock().unwrap().growth_step(&s.state);
        report_acked(&mut s, 50, BDP, 4 * mss, BW, 0);
        let done = b.lock().unwrap().probe_rtt_done_us.expect("the 200 ms begin");
        report_acked(&mut s, 60, 5 * mss, 4 * mss, BW, 0);
        assert!(b.lock().unwrap().probe_rtt_round_done, "the round's bytes are in");
        assert_eq!(b.lock().unwrap().mode, Mode::ProbeRtt, "the 200 ms are not");
        let waiting = step(&s).expect("a step that waits on the 200 ms alone");
        assert_eq!((waiting.after_bytes, waiting.not_before_us), (0, done));
        report_acked(&mut s, 150, mss, 4 * mss, BW, 0);
        assert!(s.state.now_us > done);
        assert_eq!(b.lock().unwrap().mode, Mode::ProbeBw);
        assert!(s.state.cwnd_bytes >= waiting.cwnd_bytes, "{} against the pre-set {waiting:?}", s.state.cwnd_bytes);
    }

    #[test]
    fn params_set_startup_gain_and_filter_window() {
        let (mut s, b) = sender(
            "high_gain=2,bw_window_rounds=3,probe_rtt_ms=300,min_rtt_window_s=5",
            50,
        );
        let mss = s.mss();
        report(&mut s, 10 * mss, 300_000);
        assert_eq!(
            s.state.pacing_rate_bytes_per_s,
            Some((2.0 * 300_000.0 * 0.99) as u64)
        );
        let b = b.lock().unwrap();
        assert_eq!(
            (
                b.cfg.bw_window_rounds,
                b.cfg.probe_rtt_us,
                b.cfg.min_rtt_window_us
            ),
            (3, 300_000, 5_000_000)
        );
    }

    #[test]
    fn full_utilisation_on_a_clean_link() {
        let link = Link::new(24, 50, BDP);
        let mut s = FakeSender::new(crate::simple("bbr").unwrap(), 10, 50);
        utilisation(&mut s, &link, 40, |_| {});
        // 25 s, including two probe_rtt episodes.
        let u = utilisation(&mut s, &link, 500, |_| {});
        assert!(u > 0.93, "utilisation {u}");
    }

    #[test]
    fn utilisation_stays_high_under_random_loss() {
        let link = Link::new(24, 50, BDP);
        let (mut s, b) = sender("", 50);
        let mut lcg: u64 = 12345;
        let mut random_losses = move |s: &mut FakeSender| {
            // About 2% of the ~100 segments per round, in 0-4 loss reports per round.
            for _ in 0..4 {
                lcg = lcg
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                if (lcg >> 33).is_multiple_of(2) {
                    let bw = b.lock().unwrap().max_bw();
                    s.lose(1 + (lcg >> 40) % 2);
                    assert_eq!(
                        b.lock().unwrap().max_bw(),
                        bw,
                        "a loss leaves the model alone"
                    );
                }
            }
        };
        utilisation(&mut s, &link, 40, &mut random_losses);
        let u = utilisation(&mut s, &link, 500, &mut random_losses);
        assert!(u > 0.93, "utilisation {u}");
    }

    #[test]
    fn pace_0_keeps_the_rate_from_the_datapath() {
        let (mut unpaced, model) = sender("pace=0", 50);
        let link = Link::new(24, 50, 200_000);
        for _ in 0..60 {
            unpaced.round_on_link(&link);
            assert_eq!(unpaced.state.pacing_rate_bytes_per_s, None);
        }
        let model = model.lock().unwrap();
        // The model still runs on its rate, past Startup.
        assert!(model.full_bw_reached, "{model:?}");
        assert!(model.unpublished_rate.is_some_and(|r| r > 0), "{:?}", model.unpublished_rate);
    }

    #[test]
    fn startup_paces_the_initial_window_at_the_startup_gain_until_samples_beat_it() {
        let (mut s, _) = sender("", RTT_MS);
        let initial = |cwnd: u64| (HIGH_GAIN * cwnd as f64 / 0.05 * (1.0 - PACING_MARGIN)) as u64;
        let mss = s.mss();
        // The initial window's first ACK: one segment per RTT, a tenth of the window's rate.
        report_after(&mut s, RTT_MS, mss, mss * 20, 0);
        let at_init = s.state.pacing_rate_bytes_per_s.unwrap();
        assert_eq!(at_init, initial(10 * mss), "the window per RTT at the startup gain, not the first sample");
        report_after(&mut s, 1, mss, mss * 40, 0);
        assert_eq!(s.state.pacing_rate_bytes_per_s, Some(at_init), "a sample below it does not lower it");
        report_after(&mut s, 1, mss, BW, 0);
        let raised = s.state.pacing_rate_bytes_per_s.unwrap();
        assert_eq!(raised, (HIGH_GAIN * BW as f64 * (1.0 - PACING_MARGIN)) as u64, "a sample above it raises it");
    }

    #[test]
    fn startup_pre_sets_its_growth_up_to_the_target_and_nothing_after() {
        let (mut s, b) = sender("", RTT_MS);
        let mss = s.mss();
        let preset = |s: &FakeSender| s.algorithm.slow_start(&s.state);
        assert_eq!(
            preset(&s),
            Some(SlowStart { cwnd_bytes: 10 * mss, until_bytes: 20 * mss }),
            "before a sample: grow by the first 10 segments delivered, as Linux"
        );
        let cwnd = s.state.cwnd_bytes;
        report(&mut s, cwnd, BW / 8);
        let p = preset(&s).unwrap();
        assert_eq!(p.cwnd_bytes, 20 * mss);
        let target = b.lock().unwrap().target_cwnd(&s.state, 10 * mss);
        assert_eq!(p.until_bytes, target, "then up to startup's target");
        assert!(target > p.cwnd_bytes);
        while b.lock().unwrap().mode == Mode::Startup {
            let cwnd = s.state.cwnd_bytes;
            report(&mut s, cwnd, BW);
        }
        assert_eq!(preset(&s), None, "drain and after: the agent's window");
        let mut timed_out = bbr("");
        timed_out.cwnd_before_timeout = Some(20 * mss);
        assert_eq!(timed_out.slow_start(&s.state), None, "after a timeout the saved window returns at once");
        assert_eq!(bbr("startup_in_datapath=0").slow_start(&s.state), None);
    }

    #[test]
    fn min_rtt_starts_from_the_handshake_when_the_kernel_measured_one() {
        let first = |handshake_ms: u64| {
            let (mut s, b) = sender("", 75);
            let m = Measurement { acked_bytes: 1448, bytes_in_flight: 9 * 1448, handshake_rtt_us: handshake_ms * 1000, ..Default::default() };
            report_measured(&mut s, 75, m);
            let min_rtt_us = b.lock().unwrap().min_rtt_us;
            min_rtt_us
        };
        assert_eq!(first(60), 60_000, "the handshake's sample, shorter than the first data ACK's");
        assert_eq!(first(0), 75_000, "none measured: the first report's");
        assert_eq!(first(90), 75_000, "the first report's, shorter");
        // Only the first: later reports follow their own samples, as Linux's filter does.
        let (mut s, b) = sender("", 75);
        report_measured(&mut s, 75, Measurement { acked_bytes: 1448, ..Default::default() });
        report_measured(&mut s, 75, Measurement { acked_bytes: 1448, handshake_rtt_us: 60_000, ..Default::default() });
        assert_eq!(b.lock().unwrap().min_rtt_us, 75_000);
    }

    #[test]
    fn behind_a_queue_a_round_by_send_time_lasts_the_rtt_not_the_min_rtt() {
        let rounds_in = |spec: &str| {
            let (mut s, b) = in_probe_bw(spec);
            s.set_rtt_ms(4 * RTT_MS); // a queue of three empty RTTs
            let before = b.lock().unwrap().round_count;
            for _ in 0..16 {
                report_after(&mut s, RTT_MS, BDP, BW, 0);
            }
            let after = b.lock().unwrap().round_count;
            after - before
        };
        assert_eq!(rounds_in("rounds_by_send_time=0"), 16, "one round per min_rtt of time");
        assert_eq!(rounds_in(""), 4, "one round per RTT sample");
    }

    #[test]
    fn reports_per_ack_in_startup_and_drain_unless_told_not_to() {
        let per_rtt = bbr("startup_per_ack=0");
        assert_eq!(per_rtt.reporting(), Reporting::PerRtt);
        let mut per_ack = bbr("");
        assert_eq!(per_ack.reporting(), Reporting::PerAck);
        per_ack.mode = Mode::Drain;
        assert_eq!(per_ack.reporting(), Reporting::PerAck);
        per_ack.mode = Mode::ProbeBw;
        assert_eq!(per_ack.reporting(), Reporting::PerRtt);
    }

    /// The datapath measures against the estimate and the window allows for the largest excess
    /// of the last 5-10 rounds, at most 100 ms of the estimate; with `ack_aggregation=0` neither.
    #[test]
    fn ack_aggregation_widens_the_window_by_the_measured_excess_for_up_to_ten_rounds() {
        let (mut plain, _) = in_probe_bw("ack_aggregation=0");
        let (mut aggregated, b) = in_probe_bw("");
        assert_eq!(plain.algorithm.aggregation_rate(&plain.state), None);
        let bw = b.lock().unwrap().bw();
        assert_eq!(aggregated.algorithm.aggregation_rate(&aggregated.state), Some(bw));
        let round = |s: &mut FakeSender, extra: u64| {
            let m = Measurement { acked_bytes: BDP, bytes_in_flight: BDP, delivery_rate_bytes_per_s: BW, extra_acked_bytes: extra, ..Default::default() };
            report_measured(s, RTT_MS, m);
        };
        let burst = 40 * 1448;
        let cap = bw * 100 / 1000;
        for (extra, allowance) in [(burst, burst), (10 * cap, cap)] {
            for _ in 0..3 {
                round(&mut plain, extra);
                round(&mut aggregated, extra);
            }
            let widened = aggregated.state.cwnd_bytes - plain.state.cwnd_bytes;
            assert!(widened.abs_diff(allowance) <= 2 * 1448, "window {widened} wider, allowance {allowance}");
        }
        // No excess for 10 rounds: both windows of 5 rounds have forgotten it.
        for _ in 0..10 {
            round(&mut plain, 0);
            round(&mut aggregated, 0);
        }
        assert_eq!(aggregated.state.cwnd_bytes, plain.state.cwnd_bytes);
    }
}
