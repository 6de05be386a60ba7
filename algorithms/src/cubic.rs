//! CUBIC (RFC 9438; Linux `net/ipv4/tcp_cubic.c` defaults), with HyStart.
//!
//! After a congestion event the window follows a cubic function of the time since the
//! event, `W(t) = C·(t − K)³ + W_max`, where `W_max` is the window at the event and
//! `K = ∛(W_max·(1 − β)/C)` is the time at which the curve returns to it: concave while it
//! approaches `W_max`, convex as it probes beyond. Windows in the formula are in segments and
//! times in seconds. As in Linux, the target is taken one minimum RTT ahead, growth per ACK is
//! at most half a segment per segment acknowledged (1.5× per RTT), and a Reno-friendly
//! estimate `W_est` (RFC 9438 §4.3) keeps CUBIC at least as fast as Reno at short RTTs. Fast
//! convergence lowers `W_max` when a flow loses before regaining its previous maximum, so it
//! yields bandwidth to newcomers. `beta`, `c`, `fast_convergence` and `hystart` are
//! parameters (Linux's module parameters `beta`/1024, `bic_scale`/1024, `fast_convergence`,
//! `hystart`); the Reno-friendly increase `3(1 − β)/(1 + β)` follows β.
//!
//! **In whole segments, ACK by ACK, as Linux counts.** Linux's window, its curve target and
//! its Reno-friendly estimate are whole segments: the window gains one after `cnt` segments
//! acknowledged, `cnt = cwnd / (target − cwnd)` in integers, and the target's distance from
//! `W_max` is rounded down (so below `W_max` the target is rounded up). At 1% loss on a 50-ms
//! path, windows of 9-14 segments, these roundings decide when a window gains its next
//! segment: the exact curve made ccswitch's Cubic 3.6% slower than the kernel's with the
//! same drops, the roundings without the next rule 2.6% faster
//! (`experiments/measured/cubic-same-drops-trace-2026-11-28`). Linux also recomputes `cnt`
//! only when the window has moved or 32 ms have passed ([`CNT_REFRESH_US`]). A report's
//! acknowledged bytes are therefore replayed one segment at a time, the ACKs spread evenly
//! over the time since the previous report.
//!
//! **HyStart** (Ha & Rhee, "Taming the elephants", 2011; Linux's default `hystart_detect` =
//! ACK train | delay) leaves slow start (`ssthresh = cwnd`, no reduction) before the first
//! loss once the queue starts to build. Only the delay-increase detector is implemented, as
//! Linux does it:
//! - `delay_min` is CUBIC's own minimum RTT (reset on a timeout, like all of CUBIC's state;
//!   samples from the first second of a congestion-avoidance epoch are ignored, as Linux
//!   ignores them right after fast recovery);
//! - per round (a round ends once the data in flight at its start has been acknowledged,
//!   Linux's `end_seq`) the minimum RTT of the round's samples is tracked; an ACK is a
//!   sample once the window before it is at least 16 segments (`hystart_low_window`); the
//!   first 8 samples of a round (`HYSTART_MIN_SAMPLES`) are only collected, and the 9th is
//!   judged: slow start ends there if the round's minimum exceeds
//!   `delay_min + clamp(delay_min/8, 4 ms, 16 ms)`, with `ssthresh` = the window before
//!   that ACK (the round's first 8 ACKs having grown it in slow start).
//!
//! Linux compares with `delay_min` (the flow's minimum RTT), not with the previous round's
//! minimum as the HyStart paper and RFC 9406 (HyStart++) do; this follows Linux. A report
//! folds many ACKs, so Linux's per-ACK rules are replayed over it, one ACK per segment
//! acknowledged: slow start adds a segment per ACK, the window reaching 16 segments within
//! a report makes its later ACKs samples, and the exit window is the one at the round's 9th
//! sample, wherever the report boundaries fall. What a report cannot say is which of its
//! ACKs carried its minimum RTT: it is taken to be among the samples, so the round's
//! minimum is judged at the 9th sample as Linux judges its running minimum there.
//!
//! Slow start is pre-set in the datapath ([`FlowState::slow_start_preset`]), which grows the
//! window on every ACK as Linux does, and asks for a report per ACK while the window limits
//! the flow ([`FlowState::growth_reporting`]): Linux judges HyStart on every ACK, and a
//! report per RTT would end slow start a round late, the window grown on for that round. HyStart's rounds
//! last the window given at their start, not what the datapath had sent of it ([`Rounds`]).
//!
//! After a HyStart exit no loss has set `W_max` yet, and the curve from `K = 0` is flat; as
//! Linux (`cnt` at most 20 while `last_max_cwnd` is 0) congestion avoidance then grows the
//! window by at least 1/20 segment per segment acknowledged, 5% per RTT, until the first
//! congestion event (and again after a timeout, which resets `W_max`). Without it the window
//! stayed near the exit point for seconds on a T-Mobile UMTS trace (34 -> 42 segments in
//! 2.6 s where Linux's Cubic went 28 -> 63), and ccswitch's Cubic took 1.8-1.95x the
//! kernel's time there.
//!
//! The **ACK-train** detector is absent. It ends slow start when the train of closely spaced
//! ACKs (at most `hystart_ack_delta` = 2 ms apart) that starts a round lasts longer than half
//! the minimum RTT. Slow start's per-ACK reports carry each ACK's time, and a version judged on
//! them was tried: on this testbed the kernel's own detector never fired (in 48 transfers of
//! six paths `TcpExtTCPHystartTrainDetect` stayed 0), while ccswitch's changed some outcomes,
//! so it was not kept (`experiments/measured/cubic-ack-train-2026-11-27`). Exit relies on the
//! queue growing by `clamp(delay_min/8, 4 ms, 16 ms)`; on paths whose buffer is smaller than
//! that, slow start ends on loss, as with `hystart_detect = 2` in Linux.
//!
//! **Taking over** a running flow (MCC §3.1.1) starts a congestion-avoidance epoch as if the
//! inherited window were the last maximum and no reduction followed: `W_max = cwnd`, so
//! `K = 0` and the curve starts at its plateau, growing slowly (convexly) from the window the
//! flow has — the case RFC 9438 §4.10 gives for leaving slow start without a loss. The epoch
//! clock starts at the next acknowledgement, the Reno-friendly estimate starts at the window,
//! and HyStart is off (the flow is past slow start: `ssthresh = cwnd`). `delay_min` restarts;
//! until it has a sample the curve's one-RTT look-ahead uses the flow's minimum RTT.

use crate::{Algorithm, AlgorithmInfo, FlowState, GrowthStep, Make, Measurement, Param, Params, Reporting, SlowStart, WindowEvent};

pub const INFO: AlgorithmInfo = AlgorithmInfo {
    name: "cubic",
    summary: "CUBIC: window a cubic function of time since the last loss, HyStart slow-start exit",
    source: "RFC 9438; Ha & Rhee 2011 (HyStart); Linux net/ipv4/tcp_cubic.c (defaults)",
    params: &[
        Param {
            name: "beta",
            default: BETA,
            unit: "ratio",
            help: "multiplicative decrease",
        },
        Param {
            name: "c",
            default: C_SEGMENTS_PER_S3,
            unit: "segments/s^3",
            help: "cubic scaling constant",
        },
        Param {
            name: "fast_convergence",
            default: 1.0,
            unit: "bool",
            help: "lower W_max when losing below it",
        },
        Param {
            name: "hystart",
            default: 1.0,
            unit: "bool",
            help: "leave slow start on delay increase (HyStart)",
        },
    ],
    make: Make::Simple(|p| Box::new(Cubic::new(CubicConfig::from_params(p)))),
};

/// Multiplicative decrease (Linux `beta = 717/1024`).
const BETA: f64 = 717.0 / 1024.0;
/// Cubic scaling constant, segments/s³ (Linux `bic_scale = 41` ≈ 0.4).
const C_SEGMENTS_PER_S3: f64 = 0.4;
/// Accepted ranges of the parameters (β = 1 would never decrease, C = 0 never grow).
const BETA_RANGE: (f64, f64) = (0.01, 0.99);
const C_RANGE: (f64, f64) = (0.001, 100.0);
/// Linux never grows faster than one segment per two acknowledged (`cnt >= 2`).
const MIN_ACKED_PER_SEGMENT: u64 = 2;
/// Segments acknowledged per segment of growth at most, while no congestion event has set
/// `W_max` (Linux: `cnt` at most 20 while `last_max_cwnd` is 0, "increase cwnd 5% per RTT").
const ACKED_PER_SEGMENT_WITHOUT_W_MAX: u64 = 20;
/// Linux recomputes `cnt` while the window stands still only once `HZ/32` jiffies have
/// passed since it last did (`bictcp_update`: at `HZ` = 250, Debian's and this testbed's,
/// 8 jiffies of 4 ms).
const CNT_REFRESH_US: u64 = 32_000;
/// How many windows' worth of acknowledged bytes [`Cubic::growth_step`] searches for the next
/// whole segment before it pre-sets none (at the curve's plateau the step is far off, and the
/// next report comes first).
const STEP_SEARCH_WINDOWS: u64 = 2;
/// HyStart runs only from this window on, segments (`hystart_low_window`).
const HYSTART_LOW_WINDOW_SEGMENTS: u64 = 16;
/// Samples a round needs before its minimum RTT is judged (`HYSTART_MIN_SAMPLES`).
const HYSTART_MIN_SAMPLES: u64 = 8;
/// Bounds of the delay increase that ends slow start, µs (`HYSTART_DELAY_MIN/MAX`).
const HYSTART_DELAY_MIN_US: u64 = 4_000;
const HYSTART_DELAY_MAX_US: u64 = 16_000;
/// RTT samples are ignored this long after an epoch starts, µs (Linux: `HZ`, one second).
const SAMPLE_HOLDOFF_AFTER_EPOCH_US: u64 = 1_000_000;

/// CUBIC's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CubicConfig {
    pub beta: f64,
    pub c: f64,
    pub fast_convergence: bool,
    pub hystart: bool,
}

impl Default for CubicConfig {
    fn default() -> Self {
        Self {
            beta: BETA,
            c: C_SEGMENTS_PER_S3,
            fast_convergence: true,
            hystart: true,
        }
    }
}

impl CubicConfig {
    pub fn from_params(p: &Params) -> Self {
        Self {
            beta: p.get("beta").clamp(BETA_RANGE.0, BETA_RANGE.1),
            c: p.get("c").clamp(C_RANGE.0, C_RANGE.1),
            fast_convergence: p.flag("fast_convergence"),
            hystart: p.flag("hystart"),
        }
    }

    /// Linux's `beta_scale`: the Reno-friendly estimate gains a segment per
    /// `cwnd · beta_scale / 8` segments acknowledged, about `3(1 − β)/(1 + β)` segments per
    /// RTT (RFC 9438 §4.3); an integer, as Linux computes it (15 for the default β).
    fn reno_beta_scale(&self) -> u64 {
        ((8.0 * (1.0 + self.beta) / 3.0 / (1.0 - self.beta)).floor() as u64).max(1)
    }
}

/// Round tracking: a round ends once the data in flight when it began has been acknowledged
/// (Linux's `end_seq = snd_nxt`, `after(snd_una, end_seq)`).
///
/// Linux's slow start keeps its whole window in flight: at the ACK that starts a round,
/// `snd_nxt` is a window beyond `snd_una` as it was before that ACK. The datapath sends the
/// growth a directive allows only on the ACK after it arrives, so on a burst of ACKs what it
/// has in flight lags the window it was given (T-Mobile LTE: 53 segments in flight while the
/// window went 56 -> 82 within 5 ms, the 29 others sent 25 ms later); a round taken from
/// that flight ended that much early and was judged on the queue its own late burst built
/// (HyStart left slow start at 50-90 segments where Linux's Cubic left at 346). A round
/// therefore lasts the window the algorithm had given when it began, at least.
#[derive(Clone, Debug, Default)]
struct Rounds {
    acked_total_bytes: u64,
    round_end_bytes: u64,
    /// The current round is over; the next report starts a new one.
    ended: bool,
}

impl Rounds {
    /// Whether a new round starts with this report.
    fn starts_round(&self) -> bool {
        self.ended || self.acked_total_bytes == 0
    }

    /// Account a report. A round starting with it lasts what was in flight at its first ACK
    /// (Linux takes `end_seq` there): the window before it while the window limits the flow,
    /// else what it acknowledged and what remains in flight.
    fn after_report(&mut self, state: &FlowState, m: &Measurement) {
        if self.starts_round() {
            let in_flight = if state.window_limited() {
                state.cwnd_bytes
            } else {
                m.acked_bytes + m.bytes_in_flight
            };
            self.round_end_bytes = self.acked_total_bytes + in_flight;
        }
        self.acked_total_bytes += m.acked_bytes;
        self.ended = self.acked_total_bytes >= self.round_end_bytes;
    }
}

/// HyStart's delay-increase detector, Linux's per-ACK rules (`hystart_update`) replayed over
/// the ACKs a report folds, taken as one per segment acknowledged.
#[derive(Clone, Debug, Default)]
struct HyStart {
    /// Slow start has been ended by HyStart (until a timeout resets CUBIC).
    found: bool,
    rounds: Rounds,
    /// Minimum RTT of the current round, µs (0: no sample yet); Linux's `curr_rtt`.
    round_min_rtt_us: u64,
    /// Samples of the current round, counted up to [`HYSTART_MIN_SAMPLES`] (`sample_cnt`).
    round_samples: u64,
}

impl HyStart {
    fn threshold_us(delay_min_us: u64) -> u64 {
        delay_min_us + (delay_min_us / 8).clamp(HYSTART_DELAY_MIN_US, HYSTART_DELAY_MAX_US)
    }

    /// The window at which slow start ends within this report, if it does. The report's
    /// ACKs are replayed one per segment: slow start adds a segment on each; an ACK counts
    /// as a sample once the window before it is at least `hystart_low_window`; the first
    /// [`HYSTART_MIN_SAMPLES`] samples of a round are only collected, and the next one is
    /// judged: slow start ends there, with `ssthresh` = the window before that ACK, if the
    /// round's minimum RTT exceeds the threshold. The report's minimum RTT is taken to be
    /// among its samples (a report does not say which ACK carried it).
    fn exit_window(&mut self, state: &FlowState, delay_min_us: u64, sample_us: u64, acked_bytes: u64) -> Option<u64> {
        let mss = state.mss_bytes;
        let segments = acked_bytes.div_ceil(mss);
        let below_low_window =
            (HYSTART_LOW_WINDOW_SEGMENTS * mss).saturating_sub(state.cwnd_bytes).div_ceil(mss);
        if below_low_window >= segments {
            return None;
        }
        if self.round_min_rtt_us == 0 || sample_us < self.round_min_rtt_us {
            self.round_min_rtt_us = sample_us;
        }
        // Index among this report's ACKs of the round's first judged sample.
        let judged = below_low_window + HYSTART_MIN_SAMPLES.saturating_sub(self.round_samples);
        self.round_samples = (self.round_samples + segments - below_low_window).min(HYSTART_MIN_SAMPLES);
        if judged >= segments || self.round_min_rtt_us <= Self::threshold_us(delay_min_us) {
            return None;
        }
        let exit = state.cwnd_bytes + judged * mss;
        // Slow start reaching ssthresh first ends it without HyStart.
        if exit >= state.ssthresh_bytes {
            return None;
        }
        self.found = true;
        Some(exit)
    }

    fn start_round(&mut self) {
        self.round_min_rtt_us = 0;
        self.round_samples = 0;
    }
}

/// The window in whole segments, as Linux's `snd_cwnd` (and the datapath's window) counts it.
fn whole_segments(state: &FlowState) -> f64 {
    (state.cwnd_bytes / state.mss_bytes) as f64
}

#[derive(Clone, Debug)]
pub struct Cubic {
    config: CubicConfig,
    /// Window before the last reduction, segments (0: no congestion event yet).
    w_max_segments: f64,
    /// Start of the current congestion-avoidance epoch, µs.
    epoch_start_us: Option<u64>,
    /// Time for the curve to regain `origin_segments`, seconds.
    k_s: f64,
    /// Whole segments, as Linux's `bic_origin_point`.
    origin_segments: u64,
    /// Linux's Reno-friendly estimate (`tcp_cwnd`, whole segments) and the segments
    /// acknowledged toward its next segment (`ack_cnt`).
    reno_segments: u64,
    reno_acked_segments: u64,
    /// Segments acknowledged toward the window's next segment (Linux's `snd_cwnd_cnt`).
    growth_acked_segments: u64,
    /// Bytes acknowledged short of a whole segment, carried to the next report.
    acked_carry_bytes: u64,
    /// Linux's `cnt`, and the window and time it was computed for (`last_cwnd`,
    /// `last_time`; a window of 0 forces the next ACK to recompute it).
    cnt: u64,
    cnt_cwnd_segments: u64,
    cnt_at_us: u64,
    /// When the latest report came, µs (its ACKs are spread over the time since).
    last_report_us: u64,
    /// CUBIC's minimum RTT, µs (0: none yet); Linux's `delay_min`.
    delay_min_us: u64,
    hystart: HyStart,
    /// A report per ACK while slow start grows the window, else once per RTT
    /// ([`FlowState::growth_reporting`]).
    reporting: Reporting,
}

impl Default for Cubic {
    fn default() -> Self {
        Self::new(CubicConfig::default())
    }
}

impl Cubic {
    pub fn new(config: CubicConfig) -> Self {
        Self {
            config,
            w_max_segments: 0.0,
            epoch_start_us: None,
            k_s: 0.0,
            origin_segments: 0,
            reno_segments: 0,
            reno_acked_segments: 0,
            growth_acked_segments: 0,
            acked_carry_bytes: 0,
            cnt: MIN_ACKED_PER_SEGMENT,
            cnt_cwnd_segments: 0,
            cnt_at_us: 0,
            last_report_us: 0,
            delay_min_us: 0,
            hystart: HyStart::default(),
            // A new flow slow-starts with its initial window in flight.
            reporting: Reporting::PerAck,
        }
    }

    /// Linux's `pkts_acked`: the report's RTT samples update `delay_min` and feed HyStart.
    fn on_rtt_samples(&mut self, state: &mut FlowState, m: &Measurement) {
        let starts_round = self.hystart.rounds.starts_round();
        self.hystart.rounds.after_report(state, m);
        if starts_round {
            self.hystart.start_round();
        }
        let sample_us = if m.min_rtt_us > 0 {
            m.min_rtt_us
        } else {
            m.rtt_us
        };
        if m.acked_bytes == 0 || sample_us == 0 {
            return;
        }
        if let Some(epoch) = self.epoch_start_us {
            if state.now_us.saturating_sub(epoch) < SAMPLE_HOLDOFF_AFTER_EPOCH_US {
                return;
            }
        }
        if self.delay_min_us == 0 || sample_us < self.delay_min_us {
            self.delay_min_us = sample_us;
        }
        if !self.config.hystart || self.hystart.found || !state.in_slow_start() {
            return;
        }
        // ssthresh only: slow start then grows the window to it with the report's first
        // ACKs (`FlowState::classify`), and the rest of the report is congestion avoidance.
        if let Some(exit) = self.hystart.exit_window(state, self.delay_min_us, sample_us, m.acked_bytes) {
            state.ssthresh_bytes = exit;
        }
    }

    /// Linux's `cubictcp_recalc_ssthresh`, in whole segments as Linux's window is: the
    /// growth toward the next segment (`snd_cwnd_cnt`, which `tcp_init_cwnd_reduction`
    /// clears) does not count, and `W_max` and the reduced window are rounded down.
    fn on_congestion_event(&mut self, state: &mut FlowState) {
        let beta = self.config.beta;
        let cwnd = whole_segments(state);
        self.epoch_start_us = None;
        self.growth_acked_segments = 0;
        self.acked_carry_bytes = 0;
        self.cnt_cwnd_segments = 0;
        self.w_max_segments = if self.config.fast_convergence && cwnd < self.w_max_segments {
            (cwnd * (1.0 + beta) / 2.0).floor()
        } else {
            cwnd
        };
        state.ssthresh_bytes = self.reduced_window(state);
    }

    /// `max(⌊cwnd·β⌋, 2)` segments of the window's whole segments, bytes. At 1% loss on a
    /// 50-ms path, where the window swings between about 9 and 14 segments, the fractions
    /// Linux drops are 0.85 segment per reduction: kept, they made ccswitch's Cubic 10%
    /// faster than the kernel's.
    fn reduced_window(&self, state: &FlowState) -> u64 {
        let segments = (whole_segments(state) * self.config.beta).floor() as u64;
        (segments * state.mss_bytes).max(state.min_cwnd_bytes())
    }

    /// Linux's epoch start (`bictcp_update` with `epoch_start == 0`), on the first
    /// acknowledgement in congestion avoidance after a reduction, at `now_us`; that ACK is
    /// the first the Reno-friendly estimate counts.
    fn start_epoch(&mut self, now_us: u64, cwnd: u64) {
        self.epoch_start_us = Some(now_us);
        self.reno_segments = cwnd;
        self.reno_acked_segments = 1;
        let w_max = self.w_max_segments as u64;
        if cwnd < w_max {
            self.k_s = ((w_max - cwnd) as f64 / self.config.c).cbrt();
            self.origin_segments = w_max;
        } else {
            self.k_s = 0.0;
            self.origin_segments = cwnd;
        }
    }

    /// The cubic curve one minimum RTT after `now_us`, whole segments as Linux's
    /// `bic_target`: the curve's distance from its origin is rounded down, so below the
    /// origin the target is rounded up. (Right after a reduction from 14 segments to 9, the
    /// target is 9.3 segments: Linux's 10 grows the window a segment in the first RTT, where
    /// 9.3 took ccswitch's Cubic 2.4 RTTs to reach its next whole segment.)
    fn target_segments(&self, state: &FlowState, now_us: u64) -> u64 {
        let epoch = self.epoch_start_us.unwrap_or(now_us);
        let delay_min_us = if self.delay_min_us > 0 {
            self.delay_min_us
        } else {
            state.min_rtt_us
        };
        let t_s = (now_us.saturating_sub(epoch) + delay_min_us) as f64 / 1e6;
        let distance = (self.config.c * (t_s - self.k_s).abs().powi(3)).min(1e12) as u64;
        if t_s < self.k_s {
            self.origin_segments.saturating_sub(distance)
        } else {
            self.origin_segments + distance
        }
    }

    /// An ACK of one segment in congestion avoidance at `ack_us`: Linux's `bictcp_update`
    /// and `tcp_cong_avoid_ai`. As Linux, `cnt` (segments acknowledged per segment of
    /// growth) is recomputed from the curve and the Reno-friendly estimate only when the
    /// window has changed since, or [`CNT_REFRESH_US`] later; in between the estimate only
    /// counts ACKs.
    fn avoid_one_segment(&mut self, state: &FlowState, cwnd: &mut u64, ack_us: u64) {
        if self.epoch_start_us.is_none() {
            self.start_epoch(ack_us, *cwnd);
        } else {
            self.reno_acked_segments += 1;
            if self.cnt_cwnd_segments == *cwnd && ack_us.saturating_sub(self.cnt_at_us) < CNT_REFRESH_US {
                self.grow(cwnd);
                return;
            }
        }
        self.cnt_cwnd_segments = *cwnd;
        self.cnt_at_us = ack_us;
        let target = self.target_segments(state, ack_us);
        let mut cnt = if target > *cwnd {
            *cwnd / (target - *cwnd)
        } else {
            100 * *cwnd
        };
        if self.w_max_segments == 0.0 {
            cnt = cnt.min(ACKED_PER_SEGMENT_WITHOUT_W_MAX);
        }
        let per_reno_segment = *cwnd * self.config.reno_beta_scale() / 8;
        if per_reno_segment > 0 && self.reno_acked_segments > per_reno_segment {
            let n = self.reno_acked_segments / per_reno_segment;
            self.reno_acked_segments -= n * per_reno_segment;
            self.reno_segments += n;
        }
        if self.reno_segments > *cwnd {
            cnt = cnt.min(*cwnd / (self.reno_segments - *cwnd));
        }
        self.cnt = cnt.max(MIN_ACKED_PER_SEGMENT);
        self.grow(cwnd);
    }

    /// `tcp_cong_avoid_ai` for one segment acknowledged.
    fn grow(&mut self, cwnd: &mut u64) {
        if self.growth_acked_segments >= self.cnt {
            self.growth_acked_segments = 0;
            *cwnd += 1;
        }
        self.growth_acked_segments += 1;
        if self.growth_acked_segments >= self.cnt {
            *cwnd += self.growth_acked_segments / self.cnt;
            self.growth_acked_segments %= self.cnt;
        }
    }

    /// The report's acknowledged bytes as ACKs of one segment each, spread evenly over the
    /// time since the previous report (bytes short of a segment carry to the next report),
    /// the window in whole segments as Linux's. (A fraction of a segment that slow start or
    /// a predecessor left in the window stays, so that the window never falls below the
    /// `ssthresh` taken from it.)
    fn congestion_avoidance(&mut self, state: &mut FlowState, acked_bytes: u64) {
        let mss = state.mss_bytes;
        let mut cwnd = state.cwnd_bytes / mss;
        let acked = self.acked_carry_bytes + acked_bytes;
        self.acked_carry_bytes = acked % mss;
        let segments = acked / mss;
        // A report comes about once per RTT in avoidance; one after a longer silence (a flow
        // the application held back) says nothing of when its ACKs came: the last two RTTs.
        let from_us = if self.last_report_us == 0 {
            state.now_us
        } else {
            self.last_report_us.clamp(state.now_us.saturating_sub(2 * state.min_rtt_us), state.now_us)
        };
        let span_us = state.now_us - from_us;
        for i in 1..=segments {
            self.avoid_one_segment(state, &mut cwnd, from_us + span_us * i / segments);
        }
        state.cwnd_bytes = cwnd * mss + state.cwnd_bytes % mss;
    }

    /// The bytes that [`congestion_avoidance`](Self::congestion_avoidance) needs to bring the
    /// window to `next_bytes`, each segment at the time it is expected
    /// ([`FlowState::expected_report_us`]; `None`: not within [`STEP_SEARCH_WINDOWS`]
    /// windows): a first guess for [`Cubic::growth_step`], exact unless the report's
    /// classification takes some of the bytes.
    fn avoidance_bytes_for(&self, state: &FlowState, next_bytes: u64) -> Option<u64> {
        let mss = state.mss_bytes;
        let mut trial = self.clone();
        let mut cwnd = state.cwnd_bytes / mss;
        for segments in 1..=STEP_SEARCH_WINDOWS * cwnd.max(1) {
            trial.avoid_one_segment(state, &mut cwnd, state.expected_report_us(segments * mss));
            if cwnd * mss >= next_bytes {
                return Some((segments * mss).saturating_sub(self.acked_carry_bytes));
            }
        }
        None
    }
}

impl Algorithm for Cubic {
    fn name(&self) -> &str {
        INFO.name
    }

    fn take_over(&mut self, state: &mut FlowState) {
        *self = Self::new(self.config);
        self.w_max_segments = whole_segments(state);
        self.hystart.found = true;
        self.reporting = state.growth_reporting();
    }

    fn on_report(&mut self, state: &mut FlowState, m: &Measurement) {
        self.on_rtt_samples(state, m);
        match state.classify(m) {
            WindowEvent::Timeout => {
                // tcp_enter_loss: ssthresh from the current window, then all of cubic's state
                // (HyStart and delay_min included) is reset.
                self.on_congestion_event(state);
                *self = Self::new(self.config);
                state.cwnd_bytes = state.min_cwnd_bytes();
            }
            WindowEvent::CongestionEvent { acked_bytes } => {
                // The report's ACKs arrived before the loss was known, and Linux grew the
                // window on each of them before `ssthresh` was taken from it: what slow start
                // (in `classify`) did not take, avoidance does. Per-RTT reports in avoidance
                // otherwise cut from the window of the previous report, up to an RTT's growth
                // (5% before the first loss) below Linux's.
                if acked_bytes > 0 {
                    self.congestion_avoidance(state, acked_bytes);
                }
                self.on_congestion_event(state);
                state.cwnd_bytes = state.ssthresh_bytes;
            }
            WindowEvent::Hold => {}
            WindowEvent::Avoidance { acked_bytes } => self.congestion_avoidance(state, acked_bytes),
        }
        self.last_report_us = state.now_us;
        self.reporting = state.growth_reporting();
    }

    fn reporting(&self) -> Reporting {
        self.reporting
    }

    fn window_on_loss(&self, state: &FlowState) -> Option<u64> {
        (!state.in_recovery()).then(|| self.reduced_window(state))
    }

    fn slow_start(&self, state: &FlowState) -> Option<SlowStart> {
        state.slow_start_preset()
    }

    /// Reporting once per RTT outside slow start: the window of the next whole segment, once
    /// the fewest bytes that earn it are acknowledged, found by answering trial reports of
    /// those bytes at the time they are expected, a window per RTT after the latest report
    /// ([`FlowState::expected_report_us`]): the curve moves with time, and Linux looks at it
    /// again only after the window moved or 32 ms passed, so a trial at the latest report's
    /// time found no step in most rounds on the curve's plateau.
    fn growth_step(&self, state: &FlowState) -> Option<GrowthStep> {
        if self.reporting != Reporting::PerRtt || state.in_slow_start() {
            return None;
        }
        let mss = state.mss_bytes;
        let next = (state.cwnd_bytes / mss + 1) * mss;
        // The window a report of `acked_bytes` would set, and Linux's `cnt` then.
        let answer = |acked_bytes: u64| {
            let (mut cubic, mut trial) = (self.clone(), state.clone());
            // With the latest RTT sample, as the next report will carry one (CUBIC's curve
            // starts from its minimum RTT).
            let m = Measurement {
                now_us: state.expected_report_us(acked_bytes),
                acked_bytes,
                bytes_in_flight: state.last_bytes_in_flight,
                rtt_us: state.latest_rtt_us,
                min_rtt_us: state.min_rtt_us,
                ..Measurement::default()
            };
            trial.observe(&m);
            cubic.on_report(&mut trial, &m);
            (trial.cwnd_bytes, cubic.cnt)
        };
        // Past the step, a segment per `cnt` acknowledged: the `cnt` that earned it, which
        // Linux recomputes for the grown window on the next ACK, little different within the
        // round before the agent's next answer replaces the step.
        let step = |acked_bytes: u64| {
            let (cwnd_bytes, cnt) = answer(acked_bytes);
            GrowthStep { after_bytes: acked_bytes - 1, cwnd_bytes, acked_per_byte: cnt, not_before_us: 0 }
        };
        // The recovery's bytes first (no credit), then at most STEP_SEARCH_WINDOWS windows'
        // worth: at the curve's plateau the step is far off, and the next report comes first.
        let recovery = state.recovery_bytes_left();
        let (mut lo, mut hi) = (0, recovery + STEP_SEARCH_WINDOWS * state.cwnd_bytes.max(mss));
        // The curve's growth per byte now gives the answer, or close to it (the Reno-friendly
        // estimate can only add), in two trial reports instead of a search's twenty: the
        // agent computes this on every report of every flow in avoidance.
        if let Some(guess) = self.avoidance_bytes_for(state, next).map(|b| recovery + b).filter(|&g| g > lo && g < hi) {
            let stepped = step(guess);
            if stepped.cwnd_bytes >= next {
                if answer(guess - 1).0 < next {
                    return Some(stepped);
                }
                hi = guess;
            } else {
                lo = guess;
            }
        }
        if answer(hi).0 < next {
            return None;
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if answer(mid).0 >= next {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        Some(step(hi))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{FakeSender, Link};

    /// Reno-friendly increase for the default β.
    const ALPHA_AIMD: f64 = 3.0 * (1.0 - BETA) / (1.0 + BETA);

    fn sender_after_loss_at(w_max_segments: u32, rtt_ms: u64) -> FakeSender {
        let mut s = FakeSender::new(Box::new(Cubic::default()), w_max_segments, rtt_ms);
        s.ack_segments(0);
        s.lose(1);
        s
    }

    #[test]
    fn loss_reduces_to_beta() {
        let s = sender_after_loss_at(100, 100);
        assert_eq!(s.state.cwnd_bytes, 70 * s.mss(), "⌊100 · 717/1024⌋ = 70 segments");
        assert_eq!(s.state.ssthresh_bytes, s.state.cwnd_bytes);
    }

    /// Linux's window is whole segments: at a reduction the growth toward the next one
    /// (`snd_cwnd_cnt`) is dropped and `cubictcp_recalc_ssthresh` rounds `cwnd·717/1024`
    /// down; `W_max` is whole segments too (`last_max_cwnd`). The datapath sends whole
    /// segments of the window, so an exact product would leave the flow about 0.85 segment
    /// above Linux's after each reduction at 1% loss (windows of 9-14 segments).
    #[test]
    fn a_reduction_takes_whole_segments_and_rounds_down_as_linux() {
        let mut s = spec_sender("cubic", 13, 50);
        s.ack_segments(0);
        s.state.cwnd_bytes += s.mss() * 9 / 10; // 13.9 segments: growth toward the 14th
        assert_eq!(s.algorithm.window_on_loss(&s.state), Some(9 * s.mss()), "⌊13 · 717/1024⌋");
        s.lose(1);
        assert_eq!(s.state.cwnd_bytes, 9 * s.mss());
        assert_eq!(s.state.ssthresh_bytes, 9 * s.mss());
        s.ack_segments(14); // recovery over
        s.state.cwnd_bytes = 11 * s.mss() + 700;
        s.lose(1); // below W_max = 13: fast convergence
        assert_eq!(s.state.cwnd_bytes, 7 * s.mss(), "⌊11 · 717/1024⌋");
        s.ack_segments(12);
        assert_eq!(s.algorithm.window_on_loss(&s.state), Some(4 * s.mss()), "⌊7 · 717/1024⌋ = 4");
        s.state.cwnd_bytes = 2 * s.mss() + 1000;
        assert_eq!(s.algorithm.window_on_loss(&s.state), Some(2 * s.mss()), "never below 2 segments");
    }

    /// Linux's curve target is whole segments, its distance below the origin rounded down:
    /// after a reduction from 14 segments to 9 on a 50-ms path the curve is 9.32 segments one
    /// RTT ahead, and Linux's target is 14 − ⌊4.68⌋ = 10, so the window gains its 10th
    /// segment after 9 acknowledged (`cnt` = 9 / (10 − 9)). Trailing the exact curve, as
    /// ccswitch's Cubic did, the 10th came 2.4 RTTs after recovery instead of 1.0, after
    /// every reduction: 2-5% less window at 1% loss (`cubic-same-drops-trace-2026-11-28`).
    #[test]
    fn after_a_reduction_the_first_segment_comes_as_linux_rounds_the_curve() {
        let mut s = spec_sender("cubic", 14, 50);
        s.ack_segments(0);
        s.lose(1);
        assert_eq!(s.cwnd_segments(), 9.0);
        s.ack_segments(14); // the recovery's data: recovery over
        assert!(!s.state.in_recovery());
        let whole = |s: &FakeSender| s.state.cwnd_bytes / s.mss();
        let epoch_cwnd = whole(&s);
        let mut acked = 0;
        while whole(&s) == epoch_cwnd {
            s.advance_ms(5);
            s.ack_segments(1);
            acked += 1;
            assert!(acked <= 20, "no growth in 20 segments");
        }
        assert_eq!((epoch_cwnd, acked), (9, 9), "the 10th segment after 9 acknowledged");
        assert_eq!(s.cwnd_segments(), 10.0);
    }

    #[test]
    fn window_follows_the_cubic_curve_after_a_loss() {
        let rtt_ms = 100;
        let mut s = sender_after_loss_at(200, rtt_ms);
        let w_max = 200.0;
        let k_s = (w_max * (1.0 - BETA) / C_SEGMENTS_PER_S3).cbrt();
        let loss_at_s = s.now_us as f64 / 1e6;
        // Check the curve over its concave part, its plateau and its convex part.
        for _ in 0..90 {
            s.ack_round();
            let t = s.now_us as f64 / 1e6 - loss_at_s + rtt_ms as f64 / 1e3;
            let expected = (C_SEGMENTS_PER_S3 * (t - k_s).powi(3) + w_max).min(1.5 * w_max);
            let got = s.cwnd_segments();
            assert!(
                (got - expected).abs() <= 0.06 * expected + 2.0,
                "t={t:.2}s: cwnd {got:.1} segments, W(t) = {expected:.1}"
            );
        }
        assert!(s.cwnd_segments() > w_max, "probes beyond W_max once t > K");
    }

    #[test]
    fn plateau_near_w_max_at_k() {
        // A large window, so the Reno-friendly estimate stays below the curve.
        let rtt_ms = 100;
        let mut s = sender_after_loss_at(1000, rtt_ms);
        let k_s = (1000.0 * (1.0 - BETA) / C_SEGMENTS_PER_S3).cbrt();
        while (s.now_us as f64) / 1e6 + 2.0 * rtt_ms as f64 / 1e3 < k_s {
            s.ack_round();
        }
        let w = s.cwnd_segments();
        assert!(
            (990.0..=1001.0).contains(&w),
            "at t = K the window is back near W_max, got {w}"
        );
    }

    #[test]
    fn fast_convergence_lowers_w_max() {
        let rtt_ms = 100;
        let mut s = sender_after_loss_at(1000, rtt_ms);
        s.ack_segments(1000); // the window in flight at the first loss: recovery ends
        let cwnd_at_loss = s.cwnd_segments();
        s.lose(1); // lost again at about 700 segments, below the previous maximum of 1000
        assert!((s.cwnd_segments() - cwnd_at_loss * BETA).abs() < 1.0);
        let lowered_w_max = cwnd_at_loss * (1.0 + BETA) / 2.0;
        let k_s = ((lowered_w_max - s.cwnd_segments()) / C_SEGMENTS_PER_S3).cbrt();
        let start = s.now_us;
        while ((s.now_us - start) as f64) / 1e6 + 2.0 * rtt_ms as f64 / 1e3 < k_s {
            s.ack_round();
        }
        let plateau = s.cwnd_segments();
        assert!(
            (lowered_w_max - 8.0..=lowered_w_max + 1.0).contains(&plateau),
            "plateau at the lowered W_max {lowered_w_max:.1}, got {plateau:.1}"
        );
    }

    /// Rounds of 1 ms from `s`'s state: the Reno-friendly growth per round, segments.
    /// Linux recomputes `cnt` at most every 32 ms while the window stands still, so the
    /// window trails the estimate by up to 32 ms of its growth: the rate is taken over a
    /// second, after 100 ms.
    fn reno_friendly_per_round(s: &mut FakeSender) -> f64 {
        for _ in 0..100 {
            s.ack_round();
        }
        let start = s.cwnd_segments();
        for _ in 0..1000 {
            s.ack_round();
        }
        (s.cwnd_segments() - start) / 1000.0
    }

    /// Linux's `bictcp_update` returns at once while the window is the one it last computed
    /// `cnt` for and less than `HZ/32` has passed: after a loss at 100 segments on a 1-ms
    /// path the curve's target is 71 segments (100 − ⌊29.6⌋) for seconds, which the first
    /// round reaches; from there the curve gives nothing (`cnt` = 7,100), and the
    /// Reno-friendly estimate, ahead from the second round on, is looked at again only 32 ms
    /// after the window last moved.
    #[test]
    fn cnt_is_recomputed_only_when_the_window_moved_or_32_ms_passed() {
        let mut s = sender_after_loss_at(100, 1);
        s.ack_segments(100); // the recovery's data: recovery over
        assert_eq!(s.cwnd_segments(), 70.0);
        s.ack_round();
        assert_eq!(s.cwnd_segments(), 71.0);
        for round in 2..=31 {
            s.ack_round();
            assert_eq!(s.cwnd_segments(), 71.0, "round {round}");
        }
        for _ in 0..3 {
            s.ack_round();
        }
        assert!(s.cwnd_segments() > 75.0, "{} segments", s.cwnd_segments());
    }

    #[test]
    fn reno_friendly_at_short_rtt() {
        // At 1 ms RTT the cubic curve is nearly flat; W_est grows ALPHA_AIMD segments per RTT.
        let mut s = sender_after_loss_at(100, 1);
        let per_round = reno_friendly_per_round(&mut s);
        assert!(
            (per_round - ALPHA_AIMD).abs() < 0.1,
            "grows like Reno with β = 0.7: {per_round:.3} segments per RTT, want {ALPHA_AIMD:.3}"
        );
    }

    #[test]
    fn timeout_resets_to_minimum_window() {
        let mut s = sender_after_loss_at(100, 50);
        s.ack_round();
        s.timeout();
        assert_eq!(s.cwnd_segments(), 2.0);
        assert!(s.state.in_slow_start());
    }

    /// Linux slow-starts back after a timeout on every ACK; a report per RTT would wait for
    /// the stale RTT sample of the outage (retransmissions carry none).
    #[test]
    fn after_a_timeout_the_window_regrows_with_a_report_per_ack() {
        let mut s = sender_after_loss_at(100, 50);
        s.ack_round();
        assert_eq!(s.reporting(), Reporting::PerRtt);
        s.timeout();
        assert_eq!(s.reporting(), Reporting::PerAck);
        let ssthresh = s.state.ssthresh_bytes;
        let mut reports = 0;
        while s.state.cwnd_bytes < ssthresh {
            s.ack_segments(1);
            reports += 1;
            assert!(reports < 200, "slow start reaches ssthresh");
        }
        assert_eq!(s.reporting(), Reporting::PerRtt, "once per RTT from ssthresh on");
    }

    /// Linux grows the window on every ACK of slow start; a report per RTT would hold the
    /// growth of the ACKs after each report for a round trip. A report per ACK then, while
    /// the window limits the flow (Linux's slow start: `cwnd < 2 * max_packets_out`), once
    /// per RTT from the first congestion event on.
    #[test]
    fn slow_start_reports_per_ack_while_the_window_limits_the_flow() {
        let mut s = spec_sender("cubic", 10, 50);
        assert_eq!(s.reporting(), Reporting::PerAck, "a new flow slow-starts, its window in flight");
        for expected in 11..=14 {
            s.ack_segments(1);
            assert_eq!(s.cwnd_segments(), expected as f64);
            assert_eq!(s.reporting(), Reporting::PerAck);
        }
        s.ack_segments_held_back(2, 2); // 4 of 14 segments in flight before these ACKs
        assert_eq!(s.reporting(), Reporting::PerRtt, "held back by the application");
        s.ack_segments_held_back(2, 8); // 10 of 16
        assert_eq!(s.reporting(), Reporting::PerAck);
        s.lose(1);
        assert_eq!(s.reporting(), Reporting::PerRtt, "avoidance grows per RTT");
    }

    /// A loss report folds the ACKs since the previous report, which Linux spent on growth
    /// one by one before the loss marked on the last of them: in avoidance, the window the
    /// reduction starts from has that growth (`W_max` too), not the previous report's window.
    #[test]
    fn a_loss_report_grows_the_window_for_its_acks_before_the_reduction() {
        let after_recovery = || {
            let mut s = spec_sender("cubic", 1000, 100);
            s.ack_segments(0);
            s.lose(1);
            s.ack_segments(1000); // recovery over: W_max = 1000, cwnd 700
            s.advance_ms(100);
            s
        };
        let (mut one_report, mut two_reports) = (after_recovery(), after_recovery());
        assert_eq!(one_report.cwnd_segments(), 700.0);
        two_reports.ack_segments(600); // the growth of 600 ACKs, then the loss in a report of its own
        let grown = two_reports.cwnd_segments().floor();
        assert!(grown >= 705.0, "the ACKs grew the window: {grown}");
        two_reports.lose(1);
        one_report.ack_and_lose(600, 1); // the same ACKs, the last marking the loss: one report
        assert_eq!(one_report.state.cwnd_bytes, two_reports.state.cwnd_bytes);
        assert_eq!(one_report.cwnd_segments(), (grown * BETA).floor(), "⌊{grown} · 717/1024⌋");
    }

    // --- Taking over a running flow -------------------------------------------------------

    /// A flow that another algorithm ran up to `segments` segments, handed to a fresh CUBIC.
    fn taken_over_at(segments: u32, rtt_ms: u64) -> FakeSender {
        let mut s = FakeSender::new(crate::simple("reno").unwrap(), segments, rtt_ms);
        s.ack_segments(0);
        s.hand_over_to(Box::new(Cubic::default()));
        s
    }

    #[test]
    fn take_over_starts_an_epoch_at_the_plateau_of_the_inherited_window() {
        let rtt_ms = 100;
        let mut s = taken_over_at(200, rtt_ms);
        assert_eq!(s.cwnd_segments(), 200.0);
        assert!(!s.state.in_slow_start());
        // K = 0 and W_max = 200: W(t) = 200 + C·t³, t counted from the first ACK after the
        // handover plus the one-RTT look-ahead; the Reno-friendly estimate starts at 200 too
        // and leads while t³ is small.
        s.ack_round();
        let epoch_s = s.now_us as f64 / 1e6;
        for round in 2..=40 {
            s.ack_round();
            let t = s.now_us as f64 / 1e6 - epoch_s + rtt_ms as f64 / 1e3;
            let cubic = 200.0 + C_SEGMENTS_PER_S3 * t.powi(3);
            let reno_friendly = 200.0 + ALPHA_AIMD * f64::from(round);
            let expected = cubic.max(reno_friendly);
            let got = s.cwnd_segments();
            assert!(
                (got - expected).abs() <= 0.02 * expected + 2.0,
                "t={t:.2}s: cwnd {got:.1} segments, want max({cubic:.1}, {reno_friendly:.1})"
            );
        }
    }

    #[test]
    fn take_over_does_not_restart_slow_start_or_hystart() {
        let mut s = taken_over_at(40, 50);
        s.set_rtt_ms(80); // far above the HyStart threshold: must not matter
        for _ in 0..5 {
            s.ack_round();
            assert!(!s.state.in_slow_start());
        }
        // Convex growth from the plateau: a few segments in 5 rounds, not a doubling.
        assert!((40.0..46.0).contains(&s.cwnd_segments()), "{}", s.cwnd_segments());
    }

    #[test]
    fn a_loss_below_the_inherited_window_triggers_fast_convergence() {
        let mut s = taken_over_at(1000, 100);
        s.lose(1); // at W = W_max = 1000: no fast convergence
        assert_eq!(s.state.cwnd_bytes, 700 * s.mss(), "⌊1000 · 717/1024⌋");

        // Lost at 900 segments, below the inherited maximum: W_max = 900·(1 + β)/2.
        let mut s = taken_over_at(1000, 100);
        s.state.cwnd_bytes = 900 * s.mss();
        s.lose(1);
        s.ack_segments(1000); // recovery over
        let plateau = 900.0 * (1.0 + BETA) / 2.0;
        let k_s = ((plateau - s.cwnd_segments()) / C_SEGMENTS_PER_S3).cbrt();
        let start = s.now_us;
        while ((s.now_us - start) as f64) / 1e6 + 0.2 < k_s {
            s.ack_round();
        }
        assert!(
            (plateau - 8.0..=plateau + 1.0).contains(&s.cwnd_segments()),
            "plateau at {plateau:.1}, got {:.1}",
            s.cwnd_segments()
        );
    }

    // --- Parameters -------------------------------------------------------------------

    fn spec_sender(spec: &str, init_cwnd: u32, rtt_ms: u64) -> FakeSender {
        FakeSender::new(crate::simple(spec).unwrap(), init_cwnd, rtt_ms)
    }

    #[test]
    fn beta_param_sets_the_reduction() {
        for beta in [0.5, 0.8] {
            let mut s = spec_sender(&format!("cubic:beta={beta}"), 100, 100);
            s.ack_segments(0);
            s.lose(1);
            assert_eq!(
                s.state.cwnd_bytes,
                (100.0 * s.mss() as f64 * beta) as u64,
                "beta {beta}"
            );
            assert_eq!(s.state.ssthresh_bytes, s.state.cwnd_bytes);
        }
    }

    #[test]
    fn beta_param_sets_the_reno_friendly_rate() {
        // β = 0.5: W_est grows 3·0.5/1.5 = 1 segment per RTT, Reno's rate.
        let mut s = spec_sender("cubic:beta=0.5", 100, 1);
        s.ack_segments(0);
        s.lose(1);
        let per_round = reno_friendly_per_round(&mut s);
        assert!(
            (per_round - 1.0).abs() < 0.1,
            "{per_round:.3} segments per RTT, want 1"
        );
    }

    /// Seconds from a loss at `w_max` segments until the window is back within 1% of it.
    fn seconds_to_regain(spec: &str, w_max: u32) -> f64 {
        let mut s = spec_sender(spec, w_max, 100);
        s.ack_segments(0);
        s.lose(1);
        let start = s.now_us;
        while s.cwnd_segments() < 0.99 * f64::from(w_max) {
            s.ack_round();
        }
        (s.now_us - start) as f64 / 1e6
    }

    #[test]
    fn c_param_sets_the_time_to_regain_w_max() {
        for c in [0.1, 0.4, 1.6] {
            let w_max = 1000.0;
            // The target reaches 0.99·W_max where the curve is less than 0.01·W_max + 1
            // segments below W_max (Linux rounds the curve's distance down), at
            // t = K − ∛((0.01·W_max + 1)/C). The epoch starts when recovery ends (two 100 ms
            // rounds after the loss) and the target is one RTT ahead.
            let k_s = (w_max * (1.0 - BETA) / c).cbrt();
            let want_s = 0.2 + k_s - ((0.01 * w_max + 1.0) / c).cbrt() - 0.1;
            let t = seconds_to_regain(&format!("cubic:c={c}"), 1000);
            assert!(
                (want_s - 0.1..=want_s + 0.15).contains(&t),
                "c = {c}: regained after {t:.2}s, want {want_s:.2}s (within one round)"
            );
        }
    }

    #[test]
    fn without_fast_convergence_w_max_is_the_window_at_loss() {
        let rtt_ms = 100;
        let mut s = spec_sender("cubic:fast_convergence=0", 1000, rtt_ms);
        s.ack_segments(0);
        s.lose(1);
        s.ack_segments(1000);
        let cwnd_at_loss = s.cwnd_segments();
        s.lose(1);
        let k_s = ((cwnd_at_loss - s.cwnd_segments()) / C_SEGMENTS_PER_S3).cbrt();
        let start = s.now_us;
        while ((s.now_us - start) as f64) / 1e6 + 2.0 * rtt_ms as f64 / 1e3 < k_s {
            s.ack_round();
        }
        let plateau = s.cwnd_segments();
        assert!(
            (cwnd_at_loss - 8.0..=cwnd_at_loss + 1.0).contains(&plateau),
            "plateau at the window of the last loss {cwnd_at_loss:.1}, got {plateau:.1}"
        );
    }

    // --- HyStart ----------------------------------------------------------------------

    /// 24 Mbit/s, 50 ms: BDP = 150 kB ≈ 104 segments; a 4-BDP buffer.
    fn deep_buffered_link() -> Link {
        let link = Link::new(24, 50, 0);
        Link {
            buffer_bytes: 4 * link.bdp_bytes(),
            ..link
        }
    }

    #[test]
    fn hystart_leaves_slow_start_on_delay_increase_before_any_loss() {
        let link = deep_buffered_link();
        let bdp = link.bdp_bytes() as f64;
        let mut s = spec_sender("cubic", 10, 50);
        let mut exit = None;
        for _ in 0..20 {
            let round = s.round_on_link(&link);
            assert_eq!(
                round.lost_packets, 0,
                "HyStart leaves slow start before the buffer overflows"
            );
            if !s.state.in_slow_start() {
                exit = Some(round);
                break;
            }
        }
        let round = exit.expect("HyStart ended slow start");
        // The round that ended it had a queue above the threshold clamp(50/8, 4, 16) = 6.25 ms.
        let queue_delay_us = round.rtt_us - link.base_rtt_us;
        assert!(
            queue_delay_us > 6_250,
            "exit on a delay increase, queue delay {queue_delay_us} µs"
        );
        // ssthresh = cwnd at the round's ninth sample (the window it was sent with plus the
        // eight segments slow start added before), no reduction: about BDP plus a small
        // queue, not 2×BDP.
        assert_eq!(s.state.ssthresh_bytes, round.sent_bytes + 8 * s.mss());
        let cwnd = s.state.cwnd_bytes as f64;
        assert!(
            cwnd > bdp && cwnd < 1.7 * bdp,
            "cwnd {:.2} BDP at exit",
            cwnd / bdp
        );
        assert!((round.queue_bytes as f64) < 0.6 * bdp);
        // Congestion avoidance from there, before any loss: 5% per RTT (Linux's cnt = 20
        // while W_max is unknown), well within the 4-BDP buffer.
        for _ in 0..10 {
            let before = s.cwnd_segments();
            let r = s.round_on_link(&link);
            assert_eq!(r.lost_packets, 0);
            let growth = s.cwnd_segments() / before;
            assert!((1.045..1.07).contains(&growth), "grew x{growth:.3} in a round");
        }
    }

    #[test]
    fn hystart_waits_for_sixteen_segments() {
        let mut s = spec_sender("cubic", 4, 50);
        s.ack_round(); // 8 segments, delay_min = 50 ms
        s.set_rtt_ms(100); // far above the threshold of 56.25 ms
        s.ack_round(); // sent with 8 segments: below hystart_low_window
        assert!(s.state.in_slow_start(), "no exit below 16 segments");
        assert_eq!(s.cwnd_segments(), 16.0);
        s.ack_round(); // sent with 16 segments
        assert!(
            !s.state.in_slow_start(),
            "exit once the window reaches 16 segments"
        );
        // Linux: the round's first 8 ACKs are collected (16 -> 24), the 9th is judged.
        assert_eq!(s.state.ssthresh_bytes, 24 * s.mss());
    }

    #[test]
    fn hystart_ignores_delay_below_threshold() {
        // delay_min 50 ms: the threshold is 56.25 ms; 56 ms is not enough.
        let mut s = spec_sender("cubic", 16, 50);
        s.ack_round();
        s.set_rtt_ms(56);
        for _ in 0..3 {
            s.ack_round();
        }
        assert!(s.state.in_slow_start());
        assert_eq!(s.cwnd_segments(), 256.0);
        s.set_rtt_ms(57);
        s.ack_round();
        assert!(!s.state.in_slow_start());
    }

    /// Linux's `hystart_update` per ACK, replayed over reports: with delay_min 50 ms and a
    /// 100 ms RTT from the second round on, Linux (one segment per ACK) sees round 2 (sent
    /// with 12 segments) take the window 12 -> 16 with ACKs 1-4 (below
    /// `hystart_low_window`: no samples) and collect samples 1-8 with ACKs 5-12, none
    /// judged; round 3 (24 segments) collects 8 samples (24 -> 32) and judges the 9th:
    /// ssthresh = 32, and from that 9th on the round's 16 segments grow the window in
    /// congestion avoidance. However the round's ACKs are split into reports, the exit is the same.
    #[test]
    fn hystart_exit_is_where_linux_judges_the_ninth_sample_of_a_round() {
        let through_round_two = || {
            let mut s = spec_sender("cubic", 6, 50);
            s.ack_round(); // 6 -> 12, delay_min 50 ms
            s.set_rtt_ms(100);
            s.ack_round(); // 12 -> 24: 8 samples, none judged
            assert!(s.state.in_slow_start());
            assert_eq!(s.cwnd_segments(), 24.0);
            s
        };
        let mut one_report = through_round_two();
        one_report.advance_ms(100);
        one_report.ack_segments(24);
        let mut split = through_round_two();
        split.advance_ms(50);
        split.ack_segments(5); // 5 samples collected, slow start 24 -> 29
        assert!(split.state.in_slow_start());
        split.advance_ms(50);
        split.ack_segments(19); // the 3rd of these is the round's 9th sample
        for s in [&one_report, &split] {
            assert_eq!(s.state.ssthresh_bytes, 32 * s.mss());
            let cwnd = s.cwnd_segments();
            // 16 segments in avoidance: 16 of the 20 that earn a segment (Linux's cnt = 20
            // before any loss); the 33rd comes with the 4th segment acknowledged next.
            assert_eq!(cwnd, 32.0);
            assert_eq!(s.algorithm.growth_step(&s.state).map(|g| g.after_bytes), Some(4 * s.mss() - 1));
            // And past the 33rd, a segment per 20 acknowledged, until the agent's next answer.
            assert_eq!(s.algorithm.growth_step(&s.state).map(|g| g.acked_per_byte), Some(20));
        }
    }

    /// Linux's HyStart rounds end once `snd_nxt` as it was at the round's start is
    /// acknowledged, and Linux's slow start has its whole window in flight then. The datapath
    /// sends the growth of a directive only on a later ACK, so what it has in flight may lag
    /// the window; the rounds, and so the exit, must not depend on that lag. Here a round
    /// (32 segments sent) begins with one low RTT sample and goes on at twice `delay_min`:
    /// Linux's minimum for that round stays low, and slow start ends only in the next round,
    /// at its ninth sample (64 + 8 segments).
    #[test]
    fn hystart_rounds_last_the_window_whatever_the_datapath_has_sent_of_it() {
        let exit_window = |lagging: bool| {
            let mut s = spec_sender("cubic", 16, 50);
            let ack = |s: &mut FakeSender, rtt_ms: u64| {
                s.set_rtt_ms(rtt_ms);
                s.advance_ms(1);
                let window = s.cwnd_segments() as u64;
                let in_flight = if lagging { window * 6 / 10 } else { window - 1 };
                s.ack_segments_held_back(1, in_flight);
                if s.state.in_slow_start() {
                    assert_eq!(s.reporting(), Reporting::PerAck, "slow start reports per ACK");
                }
            };
            for _ in 0..16 {
                ack(&mut s, 50); // round 1: 16 -> 32 segments, delay_min 50 ms
            }
            ack(&mut s, 50); // round 2 (32 segments sent): one low sample, then
            for _ in 0..31 {
                ack(&mut s, 100);
            }
            assert!(s.state.in_slow_start(), "round 2's minimum is 50 ms: no exit (lagging: {lagging})");
            while s.state.in_slow_start() {
                ack(&mut s, 100);
            }
            s.state.ssthresh_bytes / s.mss()
        };
        assert_eq!(exit_window(false), 72);
        assert_eq!(exit_window(true), 72);
    }

    /// Linux's `bictcp_update`: while no congestion event has set `last_max_cwnd` (after a
    /// HyStart exit, or after a timeout reset CUBIC), `cnt` is at most 20: at least 5%
    /// growth per RTT, however flat the curve from `K = 0` is. After a loss the curve rules.
    #[test]
    fn before_any_loss_avoidance_grows_five_percent_per_rtt() {
        let rtt_ms = 200;
        let mut s = spec_sender("cubic", 16, rtt_ms);
        s.ack_round(); // 16 -> 32, delay_min 200 ms
        s.set_rtt_ms(250);
        s.ack_round(); // exit at 32 + 8 = 40
        assert_eq!(s.state.ssthresh_bytes, 40 * s.mss());
        // cubic: C·t³ < 1 segment per RTT here; Reno-friendly: 0.53 per RTT. A round of
        // 40-60 whole segments grows by 2 or 3 of them.
        let before = s.cwnd_segments();
        for _ in 0..10 {
            s.ack_round();
        }
        let growth = (s.cwnd_segments() / before).powf(0.1);
        assert!((1.045..1.056).contains(&growth), "grew x{growth:.4} per round");
        let at_loss = s.cwnd_segments();
        s.lose(1);
        s.ack_segments(at_loss as u64); // recovery ends
        // On the curve's plateau near W_max (t = K) growth is far below 5% per RTT.
        let k_s = (at_loss * (1.0 - BETA) / C_SEGMENTS_PER_S3).cbrt();
        let start = s.now_us;
        while ((s.now_us - start) as f64) / 1e6 + 2.0 * 0.25 < k_s {
            s.ack_round();
        }
        let before = s.cwnd_segments();
        s.ack_round();
        let growth = s.cwnd_segments() / before;
        assert!(growth < 1.02, "after a loss the cubic curve rules: x{growth:.4}");

        // A timeout resets CUBIC (W_max too): avoidance from ssthresh grows 5% per RTT again.
        s.timeout();
        while s.state.in_slow_start() {
            s.ack_round();
        }
        let before = s.cwnd_segments();
        for _ in 0..10 {
            s.ack_round();
        }
        let growth = (s.cwnd_segments() / before).powf(0.1);
        assert!((1.045..1.056).contains(&growth), "grew x{growth:.4} per round after a timeout");
    }

    #[test]
    fn without_hystart_slow_start_runs_until_loss() {
        let link = deep_buffered_link();
        let bdp = link.bdp_bytes() as f64;
        let mut s = spec_sender("cubic:hystart=0", 10, 50);
        let lossy = loop {
            assert!(s.state.in_slow_start(), "only a loss ends slow start");
            let round = s.round_on_link(&link);
            if round.lost_packets > 0 {
                break round;
            }
        };
        assert!(
            lossy.sent_bytes as f64 > 4.0 * bdp,
            "slow start overflowed the 4-BDP buffer"
        );
        assert!(!s.state.in_slow_start());
    }

    #[test]
    fn timeout_resets_hystart_and_delay_min() {
        let mut s = spec_sender("cubic", 16, 100);
        s.ack_round(); // 32 segments
        s.set_rtt_ms(50);
        s.ack_round(); // 64 segments, delay_min 50 ms
        s.set_rtt_ms(100);
        s.ack_round(); // exit at 64 + 8 segments (the round's ninth sample)
        assert_eq!(s.state.ssthresh_bytes, 72 * s.mss());
        s.timeout(); // ssthresh 0.7 × ~73 ≈ 51 segments, window 2

        // With delay_min still 50 ms, 80 ms would end slow start at 16 segments; it was
        // reset, so 80 ms is the new minimum and slow start runs on.
        s.set_rtt_ms(80);
        for _ in 0..4 {
            s.ack_round();
        }
        assert_eq!(s.cwnd_segments(), 32.0);
        assert!(s.state.in_slow_start());
        // HyStart is armed again: 100 ms > 80 + 10 ms ends slow start below ssthresh, at
        // the round's ninth sample.
        s.set_rtt_ms(100);
        s.ack_round();
        assert_eq!(s.state.ssthresh_bytes, 40 * s.mss());
    }

    // --- Over a link ------------------------------------------------------------------

    #[test]
    fn fills_a_one_bdp_buffered_link() {
        let link = Link::new(24, 50, 0);
        let link = Link {
            buffer_bytes: link.bdp_bytes(),
            ..link
        };
        let mut s = spec_sender("cubic", 10, 50);
        let (mut delivered, mut elapsed_us) = (0u64, 0u64);
        for i in 0..400 {
            let r = s.round_on_link(&link);
            if i >= 100 {
                let queued = r.sent_bytes.saturating_sub(link.bdp_bytes());
                delivered += r.sent_bytes - queued.saturating_sub(link.buffer_bytes);
                elapsed_us += r.rtt_us;
            }
        }
        let rate = delivered as f64 * 1e6 / elapsed_us as f64;
        let utilisation = rate / link.bandwidth_bytes_per_s as f64;
        assert!(utilisation >= 0.8, "utilisation {utilisation:.2}");
    }
}
