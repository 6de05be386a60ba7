//! The flow state shared by every algorithm, and the measurement it is fed.

/// What the datapath measured since the previous report.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Measurement {
    /// Datapath clock at the last ACK folded into this report, µs.
    pub now_us: u64,
    /// Bytes newly acknowledged (cumulatively or selectively).
    pub acked_bytes: u64,
    /// Packets newly marked lost.
    pub lost_packets: u64,
    /// The sender's retransmission timer fired.
    pub timeout: bool,
    /// ACKs that carried ECN-Echo, in packets.
    pub ecn_packets: u64,
    /// Latest RTT sample, µs (0: none yet).
    pub rtt_us: u64,
    /// Smallest RTT sample since the previous report, µs (0: none).
    pub min_rtt_us: u64,
    /// Bytes in flight at the last ACK.
    pub bytes_in_flight: u64,
    /// Delivery rate, bytes/s (0: no sample): the largest of the report's rate samples, which a
    /// datapath in the sender's kernel takes from Linux's (delivered over the longer of the
    /// send and ACK intervals).
    pub delivery_rate_bytes_per_s: u64,
    /// ACK aggregation: the most bytes an ACK epoch acknowledged beyond the rate the
    /// algorithm gave ([`crate::Algorithm::aggregation_rate`]), at most the window; 0 when it
    /// gave none.
    pub extra_acked_bytes: u64,
    /// The sender's TCP's window reductions, from a datapath inside the sender's kernel;
    /// `None` from one that cannot know.
    pub sender_reductions: Option<SenderReductions>,
    /// The sender's least RTT when the flow began (the handshake's sample), µs, from a
    /// datapath inside the sender's kernel; 0: unknown.
    pub handshake_rtt_us: u64,
}

/// What a datapath inside the sender's kernel tells of its TCP's window reductions (CWR or
/// Recovery: each `tcp_init_cwnd_reduction`, where Linux's own algorithms cut).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SenderReductions {
    /// Reductions entered since the flow began.
    pub entered: u64,
    /// Whether the sender was in one after the measurement's last ACK.
    pub in_reduction: bool,
}

/// State every algorithm reads and writes. Windows are in bytes, times in µs.
#[derive(Clone, Debug)]
pub struct FlowState {
    pub mss_bytes: u64,
    pub cwnd_bytes: u64,
    pub ssthresh_bytes: u64,
    /// Pacing rate to apply; `None` leaves pacing to the datapath.
    pub pacing_rate_bytes_per_s: Option<u64>,
    pub latest_rtt_us: u64,
    pub min_rtt_us: u64,
    /// Smoothed RTT (RFC 6298, gain 1/8).
    pub srtt_us: u64,
    pub max_delivery_rate_bytes_per_s: u64,
    pub now_us: u64,
    /// Bytes in flight at the last measurement.
    pub last_bytes_in_flight: u64,
    /// Bytes still to be acknowledged before the current recovery episode ends. As in
    /// NewReno (RFC 6582) and Linux's `high_seq`, an episode lasts until the data that was
    /// in flight when the loss was detected has been acknowledged; losses reported before
    /// then belong to the congestion event already answered (see
    /// [`new_congestion_event`](Self::new_congestion_event) for the count).
    recovery_bytes_left: u64,
    /// Of the latest measurement's acknowledged bytes, those that belonged to a recovery
    /// episode (the rest were acknowledged after it ended).
    recovery_acked_bytes: u64,
    /// The latest measurement began inside a recovery episode.
    measured_from_recovery: bool,
    /// Slow-starting back after a retransmission timeout (see
    /// [`regrowing_after_timeout`](Self::regrowing_after_timeout)).
    regrowing_after_timeout: bool,
    /// The window limited the flow at the latest measurement, as Linux judges it in slow
    /// start (see [`window_limited`](Self::window_limited)).
    window_limited: bool,
    /// Reductions the sender had entered at the latest measurement of a loss that said (as
    /// the kernel datapath counts them, in 32 bits; only a change matters).
    sender_reductions_at_loss: u32,
    /// If the latest measurement said: whether the sender entered a window reduction since the
    /// measurement before, and whether it is in one (see
    /// [`new_congestion_event`](Self::new_congestion_event)). Kept small: the agent holds a
    /// flow state per flow, 100k flows in 2 KiB each.
    sender_reduction: Option<(bool, bool)>,
}

/// Segments delivered past the end of a recovery episode's count within which a loss still
/// belongs to the episode (see `FlowState::new_congestion_event`): the retransmission that
/// ends it and one segment sent during recovery, delivered in place of a second hole.
const HOLE_FOUND_PAST_COUNT_SEGMENTS: u64 = 2;

/// What one measurement means for a loss-based window algorithm: the control flow every such
/// algorithm shares, decided by [`FlowState::classify`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowEvent {
    /// The retransmission timer fired; any recovery episode is over.
    Timeout,
    /// The first loss of a new congestion event; the flow is now recovering. `acked_bytes`
    /// were acknowledged before the loss was known: Linux grew the window on each of those
    /// ACKs before it took `ssthresh` from it, so the algorithm grows by them before it cuts.
    /// From [`FlowState::classify`], the bytes slow start did not take (it grew the window by
    /// the rest); from [`FlowState::congestion`], all of the report's.
    CongestionEvent { acked_bytes: u64 },
    /// Recovering, or nothing acknowledged beyond slow start: hold the window.
    Hold,
    /// Bytes acknowledged beyond what slow start used, to spend in congestion avoidance.
    Avoidance { acked_bytes: u64 },
}

/// A window never goes below two segments (as Linux's `tcp_reno_ssthresh`).
pub const MIN_CWND_SEGMENTS: u64 = 2;

impl FlowState {
    pub fn new(mss_bytes: u32, init_cwnd_bytes: u32) -> Self {
        let mss = u64::from(mss_bytes.max(1));
        Self {
            mss_bytes: mss,
            cwnd_bytes: u64::from(init_cwnd_bytes).max(MIN_CWND_SEGMENTS * mss),
            ssthresh_bytes: u64::MAX,
            pacing_rate_bytes_per_s: None,
            latest_rtt_us: 0,
            min_rtt_us: 0,
            srtt_us: 0,
            max_delivery_rate_bytes_per_s: 0,
            now_us: 0,
            last_bytes_in_flight: 0,
            recovery_bytes_left: 0,
            recovery_acked_bytes: 0,
            measured_from_recovery: false,
            regrowing_after_timeout: false,
            // A new flow sends its initial window at once.
            window_limited: true,
            sender_reductions_at_loss: 0,
            sender_reduction: None,
        }
    }

    /// Absorb the RTT and rate samples of a measurement (called before the algorithm).
    pub fn observe(&mut self, m: &Measurement) {
        self.now_us = self.now_us.max(m.now_us);
        if m.rtt_us > 0 {
            self.latest_rtt_us = m.rtt_us;
            self.srtt_us = if self.srtt_us == 0 {
                m.rtt_us
            } else {
                (7 * self.srtt_us + m.rtt_us) / 8
            };
        }
        let sample_min = if m.min_rtt_us > 0 { m.min_rtt_us } else { m.rtt_us };
        if sample_min > 0 && (self.min_rtt_us == 0 || sample_min < self.min_rtt_us) {
            self.min_rtt_us = sample_min;
        }
        self.max_delivery_rate_bytes_per_s =
            self.max_delivery_rate_bytes_per_s.max(m.delivery_rate_bytes_per_s);
        self.measured_from_recovery = self.recovery_bytes_left > 0;
        self.recovery_acked_bytes = self.recovery_bytes_left.min(m.acked_bytes);
        self.recovery_bytes_left -= self.recovery_acked_bytes;
        self.last_bytes_in_flight = m.bytes_in_flight;
        self.window_limited = 2 * (m.bytes_in_flight + m.acked_bytes) > self.cwnd_bytes;
        // The count starts at 0 with the flow. A loss began a reduction if the sender entered
        // one since the last loss: one entered without a loss (ECN's CWR, which the loss-based
        // algorithms here do not answer) is answered at the next loss, which Linux's
        // reduction takes in without a second cut. A sender out of its reduction has ended
        // the episode, however much of the count is left.
        self.sender_reduction = m.sender_reductions.map(|r| (r.entered as u32 != self.sender_reductions_at_loss, r.in_reduction));
        if let Some(r) = m.sender_reductions {
            if m.lost_packets > 0 {
                self.sender_reductions_at_loss = r.entered as u32;
            }
            if !r.in_reduction {
                self.recovery_bytes_left = 0;
            }
        }
    }

    /// Whether the window limited the flow at the latest measurement: in flight before its
    /// ACKs (in flight after them plus what they acknowledged) more than half the window.
    /// This is Linux's test in slow start (`tcp_is_cwnd_limited`: `cwnd < 2 *
    /// max_packets_out`), where a flow the application or the receiver holds back stops
    /// growing its window.
    pub fn window_limited(&self) -> bool {
        self.window_limited
    }

    /// Hand the flow to another algorithm: it keeps the window, does not restart slow start
    /// (ssthresh = window) and sets its own pacing, if any. A paced predecessor's window is
    /// only a cap (BBR keeps two BDPs and paces one per RTT): what it keeps in flight, and so
    /// the window a successor inherits, is its rate × the recent RTT. A recovery episode in
    /// progress stays in progress, so a loss already answered is not answered twice.
    pub fn prepare_handover(&mut self) {
        if let (Some(rate), Some(rtt_us)) = (self.pacing_rate_bytes_per_s, self.recent_rtt_us()) {
            let paced_bytes = (u128::from(rate) * u128::from(rtt_us) / 1_000_000) as u64;
            self.cwnd_bytes = self.cwnd_bytes.min(paced_bytes).max(self.min_cwnd_bytes());
        }
        self.ssthresh_bytes = self.cwnd_bytes.max(self.min_cwnd_bytes());
        self.pacing_rate_bytes_per_s = None;
        self.regrowing_after_timeout = false;
    }

    /// The rate a rate-based algorithm inherits: window / recent RTT; `None` before any RTT
    /// sample.
    pub fn handover_rate_bytes_per_s(&self) -> Option<u64> {
        let rtt_us = self.recent_rtt_us()?;
        Some((u128::from(self.cwnd_bytes) * 1_000_000 / u128::from(rtt_us)) as u64)
    }

    /// The RTT the current window sees: the smaller of the smoothed and the latest RTT. The
    /// smoothed RTT moves once per report, so after a loss has drained the queue it remembers
    /// the queue for several round trips; the latest sample alone may be one delayed ACK.
    fn recent_rtt_us(&self) -> Option<u64> {
        match (self.srtt_us, self.latest_rtt_us) {
            (0, 0) => (self.min_rtt_us > 0).then_some(self.min_rtt_us),
            (0, rtt) | (rtt, 0) => Some(rtt),
            (srtt, latest) => Some(srtt.min(latest)),
        }
    }

    pub fn in_slow_start(&self) -> bool {
        self.cwnd_bytes < self.ssthresh_bytes
    }

    pub fn min_cwnd_bytes(&self) -> u64 {
        MIN_CWND_SEGMENTS * self.mss_bytes
    }

    /// Classify a measurement (after [`observe`](Self::observe)): a timeout first, then a new
    /// congestion event, then a hold while recovering; otherwise slow start takes what it
    /// may of the acknowledged bytes (growing the window here) and the rest is returned for
    /// congestion avoidance.
    ///
    /// A report that reveals a loss is sent on the ACK that marks it, so the bytes it
    /// acknowledges arrived before the loss was known. Linux grew the window on each of those
    /// ACKs (in slow start by one segment per segment) before `tcp_init_cwnd_reduction` took
    /// `ssthresh` from it, and the datapath's fallback, which carries slow start between
    /// reports, did the same: so slow start takes them here too before the event is
    /// answered, and hands the rest to the algorithm's avoidance with the event
    /// ([`WindowEvent::CongestionEvent`]); the reduction starts from the window the flow
    /// really had, not the one of the previous report (on T-Mobile LTE: 321 segments at the
    /// last report, 453 at the loss; halving the former put the flow at 160 where Linux's
    /// Reno was at 226).
    ///
    /// The bytes of a report that ends a recovery episode count only as far as they were
    /// acknowledged after it ended: Linux spends the ACKs of a recovery on its proportional
    /// rate reduction, not on growth (`tcp_cong_control` calls `cong_avoid` only outside
    /// CWR and Recovery), so the window that recovery leaves starts avoidance with no credit.
    pub fn classify(&mut self, m: &Measurement) -> WindowEvent {
        if let Some(mut event) = self.congestion(m) {
            if let WindowEvent::CongestionEvent { acked_bytes } = &mut event {
                if self.in_slow_start() {
                    *acked_bytes = self.slow_start(*acked_bytes);
                }
            }
            self.regrowing_after_timeout = event == WindowEvent::Timeout;
            return event;
        }
        let mut acked_bytes = self.acked_after_recovery(m);
        if self.in_slow_start() {
            acked_bytes = self.slow_start(acked_bytes);
        }
        if !self.in_slow_start() {
            self.regrowing_after_timeout = false;
        }
        if acked_bytes == 0 {
            return WindowEvent::Hold;
        }
        WindowEvent::Avoidance { acked_bytes }
    }

    /// The bytes of `m` (after [`observe`](Self::observe)) acknowledged outside a recovery
    /// episode: those an algorithm may spend on growth.
    pub fn acked_after_recovery(&self, m: &Measurement) -> u64 {
        m.acked_bytes.saturating_sub(self.recovery_acked_bytes)
    }

    /// Whether the flow is slow-starting back to `ssthresh` after a retransmission timeout
    /// (set by [`classify`](Self::classify)); see [`growth_reporting`](Self::growth_reporting).
    pub fn regrowing_after_timeout(&self) -> bool {
        self.regrowing_after_timeout
    }

    /// The reporting a window algorithm that judges each ACK's RTT in slow start (Cubic's
    /// HyStart) needs: a report per ACK while Linux grows the window on every ACK by a
    /// segment per segment acknowledged, else once per RTT. That is slow start while the
    /// window limits the flow ([`window_limited`](Self::window_limited)), and slow-starting
    /// back after a timeout: once per RTT would then be once per *stale* RTT, as the segments
    /// retransmitted after a timeout carry no RTT sample (Karn), and the last sample is the
    /// one inflated by the outage that caused the timeout (on a T-Mobile UMTS trace the
    /// timeout's report carried a 5.8-s sample, and the next reports came 1.1 and 3.9 s
    /// later). The growth itself is the datapath's
    /// ([`slow_start_preset`](Self::slow_start_preset)).
    pub fn growth_reporting(&self) -> crate::Reporting {
        if self.regrowing_after_timeout || (self.in_slow_start() && self.window_limited) {
            crate::Reporting::PerAck
        } else {
            crate::Reporting::PerRtt
        }
    }

    /// The slow start a window algorithm built on [`classify`](Self::classify) pre-sets in the
    /// datapath ([`crate::Algorithm::slow_start`]): in slow start, unless recovering, while
    /// the window limits the flow (Linux grows it only then) or after a timeout.
    pub fn slow_start_preset(&self) -> Option<crate::SlowStart> {
        (self.in_slow_start() && !self.in_recovery() && (self.window_limited || self.regrowing_after_timeout))
            .then_some(crate::SlowStart { cwnd_bytes: self.cwnd_bytes, until_bytes: self.ssthresh_bytes })
    }

    /// The congestion part of [`classify`](Self::classify), for algorithms with their own
    /// slow start: a timeout, a new congestion event or a hold while recovering; `None` when
    /// all the acknowledged bytes are the algorithm's to spend.
    pub fn congestion(&mut self, m: &Measurement) -> Option<WindowEvent> {
        if m.timeout {
            self.recovery_bytes_left = 0;
            return Some(WindowEvent::Timeout);
        }
        if m.lost_packets > 0 && self.new_congestion_event(m) {
            // The bytes of an episode that ended within the measurement are no credit.
            return Some(WindowEvent::CongestionEvent { acked_bytes: self.acked_after_recovery(m) });
        }
        if self.in_recovery() {
            return Some(WindowEvent::Hold);
        }
        None
    }

    /// Whether a loss of `lost_packets` reported now starts a new congestion event. If it
    /// does, the flow enters recovery until the data outstanding now has been acknowledged,
    /// counted as Linux's Recovery ends: on the ACK that takes `snd_una` past `high_seq`
    /// (`snd_nxt` at the loss), which its `cong_avoid` already counts as growth. What is
    /// still to be delivered of that data is what is in flight (the report's, taken on the
    /// ACK that marked the loss, before the retransmission) and the lost segments; the last
    /// retransmission delivered ends recovery, so its segment is not counted. Counting the
    /// whole window instead (SACKed segments included) ended recovery a few segments late in
    /// every episode: at 1% loss on a 50-ms path the first step of avoidance came after 1.29
    /// windows delivered past the kernel's end of Recovery, against Linux's own Reno's 0.82,
    /// and avoidance grew 0.89 segments per RTT against 0.94.
    ///
    /// A loss reported by a measurement that ran the count out with no more than
    /// [`HOLE_FOUND_PAST_COUNT_SEGMENTS`] segments beyond it belongs to the episode too, and
    /// extends it until that loss's retransmission is delivered (what is in flight now, and
    /// the lost segments but the last): the count takes every byte delivered, and the segments sent during
    /// recovery, delivered in place of an old one that was lost too, run it out while that
    /// segment is still missing, so the loss revealed on the next ACKs is one of the old
    /// data, which Linux's Recovery waits for (`snd_una` has not passed `high_seq`).
    /// Answered as a new event, such losses cut the window twice where Linux cuts once: with
    /// the same drops at 1% loss on a 50-ms path, ccswitch's Cubic cut 74 times where the
    /// kernel's entered Recovery 70 times (a second cut 55 ms after the first, 2 segments
    /// delivered past the count) and took 1.047 times as long. A measurement that delivered
    /// more past the count (a round of new data) reports a new event.
    ///
    /// A datapath inside the sender's kernel says which it is
    /// ([`Measurement::sender_reductions`]): the loss is a new event exactly when the kernel
    /// entered a window reduction since the last measurement, as Linux's own algorithms cut
    /// only then (`tcp_init_cwnd_reduction`). A loss inside the kernel's running reduction
    /// extends an episode whose count ran out, whatever was delivered past it; the episode
    /// ends when the kernel's does ([`observe`](Self::observe)). A loss outside any reduction
    /// (in the Loss state of a timeout) is neither. The count alone
    /// erred on Reno's slow-start overshoot over a 200-packet queue
    /// (`experiments/measured/reno-recovery-trace-2026-11-28`): a retransmission lost again
    /// kept the kernel in one Recovery for 600 ms while the SACKs ran the count out, and the
    /// agent cut a second time inside it.
    fn new_congestion_event(&mut self, m: &Measurement) -> bool {
        let (new_event, in_reduction) = match self.sender_reduction {
            Some((began, in_reduction)) => (began, in_reduction),
            None if self.recovery_bytes_left > 0 => return false,
            None => {
                let past_count = self.acked_after_recovery(m);
                (!self.measured_from_recovery || past_count > HOLE_FOUND_PAST_COUNT_SEGMENTS * self.mss_bytes, true)
            }
        };
        if new_event || (self.recovery_bytes_left == 0 && in_reduction) {
            let undelivered_lost = m.lost_packets.saturating_sub(1) * self.mss_bytes;
            self.recovery_bytes_left = (self.last_bytes_in_flight + undelivered_lost).max(1);
        }
        new_event
    }

    /// The state once a pre-set step of growth ([`crate::Algorithm::growth_step`]) has been
    /// earned: the window `cwnd_bytes`, and any recovery over (a step counts its bytes first).
    pub fn after_growth(&self, cwnd_bytes: u64) -> FlowState {
        FlowState {
            cwnd_bytes,
            recovery_bytes_left: 0,
            recovery_acked_bytes: 0,
            measured_from_recovery: false,
            ..self.clone()
        }
    }

    /// When `acked_bytes` more will have been acknowledged, at a window per RTT (the smoothed
    /// RTT, else the latest, else the minimum): the time of a report of them, for an
    /// algorithm whose answer moves with time and that pre-sets a step of growth
    /// ([`crate::Algorithm::growth_step`]) for the ACK that earns it.
    pub fn expected_report_us(&self, acked_bytes: u64) -> u64 {
        let rtt_us = [self.srtt_us, self.latest_rtt_us, self.min_rtt_us].into_iter().find(|&r| r > 0).unwrap_or(0);
        let elapsed = u128::from(acked_bytes) * u128::from(rtt_us) / u128::from(self.cwnd_bytes.max(self.mss_bytes).max(1));
        self.now_us + elapsed.min(u128::from(u32::MAX)) as u64
    }

    /// Bytes still to be acknowledged before the current recovery episode ends (0: none).
    pub fn recovery_bytes_left(&self) -> u64 {
        self.recovery_bytes_left
    }

    /// Whether the flow is recovering from a congestion event: like Linux, which does not
    /// call `cong_avoid` in Recovery, algorithms hold their window until recovery ends.
    pub fn in_recovery(&self) -> bool {
        self.recovery_bytes_left > 0
    }

    /// Slow-start growth: one byte per byte acknowledged, up to ssthresh. Returns the bytes
    /// acknowledged that slow start did not use (to be spent in congestion avoidance).
    fn slow_start(&mut self, acked_bytes: u64) -> u64 {
        let room = self.ssthresh_bytes.saturating_sub(self.cwnd_bytes);
        let used = acked_bytes.min(room);
        self.cwnd_bytes += used;
        acked_bytes - used
    }
}
