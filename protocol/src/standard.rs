//! The standard program: the one datapath program every simple-API algorithm runs. The agent
//! compiles [`source`] and installs it on every datapath; its per-ACK fold is fixed (sums,
//! minimum, maximum, latest values, a report per RTT or per ACK and at once on loss or
//! timeout), so a datapath that can fold in the kernel recognises it and runs that fold there
//! instead of interpreting it per ACK in user space. Its registers are declared here once:
//! the report registers ([`report`], in MEASURE order), the control registers ([`control`])
//! and their defaults; the source's `def` is built from them, the agent checks that its
//! compiler numbered them so, and the shims read reports and set controls by these indices.
//!
//! Reports only when a report can change a decision. A report per RTT lets the algorithm move
//! the window; that matters only while the window is what holds the flow back. The program
//! reports once the RTT has passed only on an ACK where the window limits the flow: before
//! the ACK, more than `Control.window_use_pct` % of `Cwnd` was in flight
//! (`Flow.bytes_in_flight + Ack.bytes_acked`; 50 % by default, the kernel's own test in slow
//! start, `tcp_is_cwnd_limited`: `cwnd < 2 * max_packets_out`, and a margin below the full
//! window for TSO deferral in congestion avoidance), or the flow is paced (`Rate > 0`: its
//! rate is the decision, and a pacing-limited flow keeps well under its window, BBR's at half
//! of it), or ECN marked it in the interval. A flow held by its receiver's window or by its
//! application does not qualify and reports only on loss or timeout (at once, as always) or
//! every `Control.idle_report_us` (1 s by default). Why 1 s: it is TCP's own horizon for an
//! unused window (RFC 6298's initial RTO; RFC 2861 revalidates a window unused for an RTO),
//! long enough that 10k receiver-held flows cost 10k reports/s rather than one per ACK, short
//! enough that the agent's RTT and rate estimates, its features and its liveness view stay
//! fresh. A flow whose window starts to bind again reports on its first such ACK once the RTT
//! has passed, so the interval never delays a decision that matters.
//!
//! A loss is answered on the ACK that reveals it. The agent pre-sets, with each answer, the
//! window its algorithm would choose on a loss (`Control.loss_cwnd`: while the flow recovers,
//! the window it holds; 0 if its algorithm does not cut); an ACK that reveals a loss sets
//! `Cwnd` to it, and the report that loss triggers reaches the agent, whose answer refines the
//! window. Until that answer, further losses set the same window again, never a lower one.
//!
//! Growth is answered on the ACK that earns it, too. A window grown once per report lags the
//! kernel's own, which grows on the very ACK that completes a window's worth of credit: the
//! agent's next window reaches the datapath on the ACK after its report, which, when the
//! report came on the last ACK of a round, is the next round's first, so each step of
//! congestion avoidance came a round late and the flow sent one segment less in each (at 1%
//! loss on a 50-ms path, Reno's window grew by 0.67 segments per RTT where the kernel's grew by
//! 0.95, and transfers took 1.2 times as long). So the agent pre-sets, with each answer, the
//! next step its algorithm would take: `Control.grow_cwnd` (0 for none) once more than
//! `Control.grow_after` bytes have been acknowledged since the report it answers, the one at
//! `Control.grow_from` (its `Report.now`, or 0 for the program's start). The step's window
//! holds until the agent's next window, which the report after it brings. A loss once the
//! step is earned cuts from the grown window, as Linux's cut follows the growth of the ACKs
//! before it:
//! `Control.grow_loss_cwnd` then replaces `Control.loss_cwnd`. A step may wait on time too:
//! with `Control.grow_not_before` set, only an ACK later than that `Ack.now` applies it (BBR
//! leaves probe_rtt on the first ACK once both its round and its 200 ms are over; a step
//! that counts bytes alone, pre-set after the round but before the 200 ms, would apply early,
//! and one answered from the report of the ACK past the 200 ms applies an ACK late, on the
//! T-Mobile UMTS trace 0.12-0.14 s, `experiments/measured/bbr-probe-rtt-exit-2026-11-29`).
//! The grown loss window does not wait (no algorithm pre-sets both).
//!
//! Past the step, the window grows on at the algorithm's rate (`Control.grow_rate`, bytes of
//! window per [`GROW_RATE_UNIT`] bytes acknowledged; 0 for none): Cwnd becomes `grow_cwnd`
//! plus the bytes acknowledged beyond `grow_after` times that rate. A single step lags where
//! ACKs come in bursts. On the T-Mobile UMTS trace a window's ACKs come within a millisecond,
//! 60-220 ms apart; the report goes on a burst's first ACK and the agent's answer, with its
//! next step, after the burst, so a burst's ACKs earned one step, taken at the next burst's
//! start, where Linux's Cubic grows a segment every `cnt` ACKs all through the burst
//! (`tcp_cong_avoid_ai`): the window ran 1-3 segments behind the kernel's own and transfers
//! took 1.09 times as long (`experiments/measured/umts-cubic-trace-2026-11-28`). A loss past
//! the step still cuts to `grow_loss_cwnd`, the cut from the step's window; the agent's answer
//! to its report refines it.
//!
//! A step outlives the reports its answer has not caught up with: the program counts the
//! bytes acknowledged since the report at `Control.grow_from` across later reports
//! (`Control.chain_from` and `Control.chain_acked`, which the program keeps: anchored on every
//! ACK whose latest report is that one, then summed on), so a step counted from a report still
//! applies once earned, until the agent's answer to a later report arrives. Reports come on
//! the first ACK of a round's burst and the answer a millisecond or more later, while the
//! burst's other ACKs arrive: a step those ACKs earned was void until the report after, a
//! round late (at 1% loss on a 50-ms path, 9% of Reno's steps came 4 or more segments past
//! the ACK that earned them, the kernel's Reno's never more than 3). The chain starts at the
//! program's start (`chain_from` 0), so growth pre-set before any report counts from there. A
//! report of a loss or a timeout breaks it (`chain_from` 1, a time no report has): the agent's
//! answer to that report decides the window.
//!
//! Slow start is folded the same way. Linux grows the window on every ACK by what it
//! acknowledges; a window grown once per report lags it, whether the reports come once per
//! RTT (each round then grew by the round before it, 1.6 times a round, not 2) or on every
//! ACK (each ACK's growth then waits for the agent's answer, and a 2 MB transfer on a 300-ms
//! path took 1.07-1.12 times the kernel's time). So the agent pre-sets, while its algorithm
//! slow-starts, the window at the report it answers (`Control.ss_cwnd`, 0 for none) and the
//! threshold (in `Control.grow_after`, which a step's count would hold: the agent pre-sets a
//! step or slow start, never both): on every ACK whose bytes since that report the chain
//! counts, the window becomes `ss_cwnd` plus those bytes, at most the threshold, never less
//! than it already was in this slow start (`Control.ss_high`, which the program keeps and
//! clears on a loss or a timeout): an answer that has not yet caught up with the latest
//! reports does not take back the growth of their ACKs. (Slow start ends otherwise only at
//! its threshold, which `ss_high` never passes, or on a HyStart exit, after which only a loss
//! or a timeout starts it again; a flow that stopped and then resumes slow start while its
//! window did not bind has an agent's window that grew at least as much.)
//!
//! ACK aggregation is measured per ACK, as Linux's BBR measures it (`bbr_update_ack_aggregation`),
//! for an algorithm whose window allows for ACKs that arrive in bursts. A report per RTT sums a
//! round's ACKs, where what was acknowledged is about the rate times the round; the burst
//! within it shows only ACK by ACK. So the agent pre-sets its bandwidth estimate
//! (`Control.agg_rate`, 0 for none) and the program keeps an ACK epoch: on every ACK that
//! acknowledges bytes, the epoch restarts if it has acknowledged no more than the rate
//! delivers over it (`Report.agg_epoch_us` and `agg_epoch_acked`, which no report resets, and
//! the local `agg_expected`, the bytes the rate delivers over the epoch so far, over at most
//! [`AGG_EPOCH_MAX_US`]), and the excess over the rate, at most `Cwnd`, is the report's
//! `Report.extra_acked` if larger. The algorithm keeps its windowed maximum across reports.
//!
//! `standard_program.bin` ([`INSTALL_MESSAGE`]) is the agent's INSTALL_EXPR of it, which the
//! shims decode to recognise the program; the agent's tests check that what it compiles is
//! this message (`CCSWITCH_BLESS=1` rewrites the file after a deliberate change of the
//! program).

/// The INSTALL_EXPR message of the standard program (program uid as the agent compiled it).
pub const INSTALL_MESSAGE: &[u8] = include_bytes!("standard_program.bin");

/// Report registers (all but the ACK epoch's volatile: a report restores their defaults), by
/// index, which is their place in a MEASURE.
pub mod report {
    /// Bytes acknowledged, summed (`Ack.bytes_acked`).
    pub const ACKED: usize = 0;
    /// Packets lost, summed (`Ack.lost_pkts_sample`).
    pub const LOST: usize = 1;
    /// 1 if the latest ACK followed a timeout (`Flow.was_timeout`).
    pub const TIMEOUT: usize = 2;
    /// ECN-marked packets, summed (`Ack.ecn_packets`).
    pub const ECN: usize = 3;
    /// The latest RTT sample, µs (`Flow.rtt_sample_us`; libccp's infinity before any).
    pub const RTT: usize = 4;
    /// The least RTT sample, µs; [`NO_RTT_SAMPLE_US`](super::NO_RTT_SAMPLE_US) if none.
    pub const MINRTT: usize = 5;
    /// Bytes in flight at the latest ACK (`Flow.bytes_in_flight`).
    pub const INFLIGHT: usize = 6;
    /// The greatest delivery rate, bytes/s (`Flow.rate_incoming`).
    pub const RATE: usize = 7;
    /// The latest ACK's time, µs (`Ack.now`).
    pub const NOW: usize = 8;
    /// The most bytes an ACK epoch had acknowledged beyond what the agent's rate
    /// ([`AGG_RATE`](super::control::AGG_RATE)) predicts, at most `Cwnd` (0 without a rate).
    pub const EXTRA_ACKED: usize = 9;
    /// Kept across reports, set by the program: when the current ACK epoch started
    /// (`Ack.now`, µs). A report register only because the program has no control register
    /// left (portus numbers at most 16).
    pub const AGG_EPOCH_US: usize = 10;
    /// Kept across reports, set by the program: the bytes acknowledged in the current ACK
    /// epoch.
    pub const AGG_EPOCH_ACKED: usize = 11;
    /// Fields in a report.
    pub const COUNT: usize = 12;
    /// Each register's name in the program (`Report.<name>`), by index.
    pub const NAMES: [&str; COUNT] = [
        "acked",
        "lost",
        "timeout",
        "ecn",
        "rtt",
        "minrtt",
        "inflight",
        "rate",
        "now",
        "extra_acked",
        "agg_epoch_us",
        "agg_epoch_acked",
    ];
    /// Not a register: the first of the fields a datapath inside the sender's kernel appends to
    /// each report of the program, after its registers. It counts the window reductions (CWR
    /// or Recovery, each `tcp_init_cwnd_reduction`, where Linux's own algorithms cut) the
    /// sender's TCP has entered since the flow began. A count that moved tells the agent that
    /// a loss it reports began a reduction there; one that did not, that the loss came inside
    /// one Linux's algorithms do not answer again (the agent's congestion events follow them:
    /// `FlowState::new_congestion_event`). A count, not a flag, so that a report the datapath
    /// could not queue loses nothing. Agents that read fields by name (portus) never see these
    /// fields; a datapath that does not know (the ovs shim) appends none.
    pub const SENDER_REDUCTIONS: usize = COUNT;
    /// Appended after [`SENDER_REDUCTIONS`]: 1 if the sender was in a window reduction after
    /// the report's last ACK, else 0.
    pub const SENDER_IN_REDUCTION: usize = COUNT + 1;
    /// Appended after [`SENDER_IN_REDUCTION`]: the sender's least RTT when its congestion
    /// control began (`tcp_min_rtt` at `init`: the handshake's sample), µs, 0 if it had none.
    /// Linux's BBR starts its min_rtt from it (`bbr_init`); the first data ACKs' samples can
    /// be longer, by the initial window's queue on a slow link.
    pub const SENDER_HANDSHAKE_RTT: usize = COUNT + 2;
    /// Whether a report restores the register's default (all but the ACK epoch's).
    pub const fn volatile(index: usize) -> bool {
        index != AGG_EPOCH_US && index != AGG_EPOCH_ACKED
    }
}

/// Control registers (all non-volatile), by index.
pub mod control {
    /// Non-zero: report on every ACK.
    pub const PER_ACK: usize = 0;
    /// Non-zero: report every this many µs instead of once per RTT.
    pub const PERIOD_US: usize = 1;
    /// Per RTT, report only if more than this % of the window was in flight before the ACK
    /// (or the flow is paced, or ECN marked it).
    pub const WINDOW_USE_PCT: usize = 2;
    /// Otherwise report every this many µs (and on loss or timeout).
    pub const IDLE_REPORT_US: usize = 3;
    /// Non-zero: the window (bytes) to set on an ACK that reveals a loss, pre-set by the
    /// agent so that the loss is answered at once; its answer to the loss's report refines it.
    pub const LOSS_CWND: usize = 4;
    /// Non-zero: the window (bytes) to set once more than [`GROW_AFTER`] bytes have been
    /// acknowledged since the report at [`GROW_FROM`], with no report since: the agent's next
    /// step of growth, pre-set so that it applies on the ACK that earns it.
    pub const GROW_CWND: usize = 5;
    /// Bytes acknowledged since that report past which [`GROW_CWND`] applies; in slow start
    /// ([`SS_CWND`] set, no step), the threshold slow start grows the window to (bytes).
    pub const GROW_AFTER: usize = 6;
    /// The `Report.now` (µs) of the report the growth is counted from.
    pub const GROW_FROM: usize = 7;
    /// Non-zero: the window a loss sets instead of [`LOSS_CWND`] once the step of growth has
    /// been earned (the algorithm's cut from the grown window).
    pub const GROW_LOSS_CWND: usize = 8;
    /// Set by the program, not the agent: the `Report.now` of the report [`CHAIN_ACKED`]
    /// counts from (0: the program's start), taken from [`GROW_FROM`] on an ACK whose latest
    /// report is that one; 1 (no report's time) after a report of a loss or a timeout.
    pub const CHAIN_FROM: usize = 9;
    /// Set by the program: the bytes acknowledged since the report at [`CHAIN_FROM`], over
    /// the reports since.
    pub const CHAIN_ACKED: usize = 10;
    /// Non-zero: slow start, pre-set. The window at the report at [`GROW_FROM`] (the agent's
    /// answer to it); the window becomes this plus the bytes acknowledged since, at most
    /// [`GROW_AFTER`].
    pub const SS_CWND: usize = 11;
    /// With a step: past it, the window grows by this many bytes per
    /// [`GROW_RATE_UNIT`](super::GROW_RATE_UNIT) bytes acknowledged beyond [`GROW_AFTER`]
    /// (the algorithm's rate of growth; 0: the step only).
    pub const GROW_RATE: usize = 12;
    /// Set by the program: the largest window this slow start has set, below which it does
    /// not let the window fall while [`SS_CWND`] is set; 0 on a loss or a timeout.
    pub const SS_HIGH: usize = 13;
    /// Non-zero: the rate (bytes per [`AGG_RATE_UNIT_US`](super::AGG_RATE_UNIT_US) µs) the
    /// program measures ACK aggregation against (`Report.extra_acked`), the algorithm's
    /// bandwidth estimate, pre-set by the agent.
    pub const AGG_RATE: usize = 14;
    /// Non-zero: the step ([`GROW_CWND`]) applies only on an ACK later than this `Ack.now`
    /// (µs), however much has been acknowledged: an algorithm whose next step waits on time as
    /// well as bytes (BBR's probe_rtt ends on the first ACK once both its round and its 200 ms
    /// are over).
    pub const GROW_NOT_BEFORE: usize = 15;
    /// Control registers of the program: portus numbers at most 16, so what the program keeps
    /// only within an ACK (the bytes the rate delivers over the ACK epoch) is a local,
    /// `agg_expected`, not a control register.
    pub const COUNT: usize = 16;
    /// Each register's name in the program (`Control.<name>`), by index.
    pub const NAMES: [&str; COUNT] = [
        "per_ack",
        "period_us",
        "window_use_pct",
        "idle_report_us",
        "loss_cwnd",
        "grow_cwnd",
        "grow_after",
        "grow_from",
        "grow_loss_cwnd",
        "chain_from",
        "chain_acked",
        "ss_cwnd",
        "grow_rate",
        "ss_high",
        "agg_rate",
        "grow_not_before",
    ];
}

/// Default of `Control.window_use_pct`.
pub const WINDOW_USE_PCT: u64 = 50;
/// Default of `Control.idle_report_us`.
pub const IDLE_REPORT_US: u64 = 1_000_000;

/// The time unit of `Control.agg_rate`, µs: a power of two, so that the program's division by
/// it is a shift in the datapaths' folds.
pub const AGG_RATE_UNIT_US: u64 = 1 << 20;

/// The longest ACK epoch the rate's expected count grows over, µs (about 18 minutes): an
/// epoch older than that expects no more, which keeps the product within 64 bits for any
/// rate the agent sets (at most 2^32 bytes per unit), and is below 2^31, the largest
/// immediate portus's compiler takes. Linux caps nothing; capping at one unit of time (as
/// this program did) stuck an epoch for good once it had kept pace with the rate for a
/// second: it then expected no more while its ACKs went on, never restarted, and reported
/// the window as aggregation on every report. On the T-Mobile UMTS trace that held one of
/// four transfers' allowance at its cap from 4.6 s to the end of the trace's outage (18.7 s)
/// (`experiments/measured/bbr-combined-batch-2026-11-29`, `stuck.py`).
pub const AGG_EPOCH_MAX_US: u64 = 1 << 30;

/// The unit of `Control.grow_rate`: bytes acknowledged, a power of two so that the program's
/// division by it is a shift in the kernel's fold, and below 2^31, the largest immediate
/// portus's compiler takes. A rate of at most one unit (a byte of window per byte
/// acknowledged, slow start's) keeps the product within 64 bits for 16 GiB acknowledged past
/// a step, far more than a flow acknowledges between two of the agent's answers.
pub const GROW_RATE_UNIT: u64 = 1 << 30;

/// The minimum-RTT register's default: above any sample (µs); portus's compiler accepts
/// immediates below 2^31 only.
pub const NO_RTT_SAMPLE_US: u64 = (1 << 31) - 1;

/// A report register's default, as the source writes it.
fn report_default(index: usize) -> String {
    match index {
        report::TIMEOUT => "false".into(),
        report::MINRTT => NO_RTT_SAMPLE_US.to_string(),
        _ => "0".into(),
    }
}

/// A control register's default.
fn control_default(index: usize) -> u64 {
    match index {
        control::WINDOW_USE_PCT => WINDOW_USE_PCT,
        control::IDLE_REPORT_US => IDLE_REPORT_US,
        _ => 0,
    }
}

/// The program in portus's language. Its `def` declares the registers in index order, which is
/// how portus numbers them. The per-RTT condition is two clauses because a condition may use
/// at most 8 temporary registers (libccp's `MAX_TMP_REG`); they report alike. For the same
/// reason the grown loss clause does not test `Control.grow_cwnd` (the agent sets
/// `grow_loss_cwnd` only with a step).
pub fn source() -> String {
    let reports: String =
        report::NAMES
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let volatile = if report::volatile(i) { "volatile " } else { "" };
                format!("\n    ({volatile}{name} {})", report_default(i))
            })
            .collect();
    let controls: String =
        control::NAMES.iter().enumerate().map(|(i, name)| format!("\n  (Control.{name} {})", control_default(i))).collect();
    let unit = AGG_RATE_UNIT_US;
    let epoch_max = AGG_EPOCH_MAX_US;
    let grow_unit = GROW_RATE_UNIT;
    format!(
        "(def (Report{reports}
  ){controls}
)
(when true
    (:= Report.acked (+ Report.acked Ack.bytes_acked))
    (:= Report.lost (+ Report.lost Ack.lost_pkts_sample))
    (:= Report.timeout Flow.was_timeout)
    (:= Report.ecn (+ Report.ecn Ack.ecn_packets))
    (:= Report.rtt Flow.rtt_sample_us)
    (:= Report.minrtt (min Report.minrtt Flow.rtt_sample_us))
    (:= Report.inflight Flow.bytes_in_flight)
    (:= Report.rate (max Report.rate Flow.rate_incoming))
    (:= Report.now Ack.now)
    (:= Control.chain_acked (+ Control.chain_acked Ack.bytes_acked))
    (fallthrough)
)
(when (== Micros (- Ack.now Control.grow_from))
    (:= Control.chain_from Control.grow_from)
    (:= Control.chain_acked Report.acked)
    (fallthrough)
)
(when (&& (&& (> Control.grow_cwnd 0) (> Ack.now Control.grow_not_before))
          (&& (== Control.chain_from Control.grow_from) (> Control.chain_acked Control.grow_after)))
    (:= Cwnd (+ Control.grow_cwnd (/ (* (- Control.chain_acked Control.grow_after) Control.grow_rate) {grow_unit})))
    (fallthrough)
)
(when (&& (> Control.ss_cwnd 0) (== Control.chain_from Control.grow_from))
    (:= Control.ss_high (max Control.ss_high (min Control.grow_after (+ Control.ss_cwnd Control.chain_acked))))
    (fallthrough)
)
(when (&& (> Control.ss_cwnd 0) (> Control.ss_high Cwnd))
    (:= Cwnd Control.ss_high)
    (fallthrough)
)
(when (&& (> Ack.lost_pkts_sample 0) (> Control.loss_cwnd 0))
    (:= Cwnd Control.loss_cwnd)
    (fallthrough)
)
(when (&& (&& (> Ack.lost_pkts_sample 0) (> Control.grow_loss_cwnd 0))
          (&& (== Control.chain_from Control.grow_from) (> Control.chain_acked Control.grow_after)))
    (:= Cwnd Control.grow_loss_cwnd)
    (fallthrough)
)
(when (|| Report.timeout (> Ack.lost_pkts_sample 0))
    (:= Control.ss_high 0)
    (fallthrough)
)
(when (&& (> Control.agg_rate 0) (> Ack.bytes_acked 0))
    (:= agg_expected (/ (* Control.agg_rate (min (- Ack.now Report.agg_epoch_us) {epoch_max})) {unit}))
    (fallthrough)
)
(when (&& (&& (> Control.agg_rate 0) (> Ack.bytes_acked 0)) (> (+ agg_expected 1) Report.agg_epoch_acked))
    (:= Report.agg_epoch_us Ack.now)
    (:= Report.agg_epoch_acked 0)
    (:= agg_expected 0)
    (fallthrough)
)
(when (&& (> Control.agg_rate 0) (> Ack.bytes_acked 0))
    (:= Report.agg_epoch_acked (+ Report.agg_epoch_acked Ack.bytes_acked))
    (:= Report.extra_acked (max Report.extra_acked (min Cwnd (- Report.agg_epoch_acked agg_expected))))
    (fallthrough)
)
(when (|| Report.timeout (> Report.lost 0))
    (:= Control.chain_from 1)
    (report)
    (:= Micros 0)
)
(when (> Control.per_ack 0)
    (report)
    (:= Micros 0)
)
(when (&& (> Control.period_us 0) (> Micros Control.period_us))
    (report)
    (:= Micros 0)
)
(when (&& (&& (== Control.period_us 0) (> Micros Flow.rtt_sample_us))
          (|| (> Report.ecn 0) (> Rate 0)))
    (report)
    (:= Micros 0)
)
(when (&& (&& (== Control.period_us 0) (> Micros Flow.rtt_sample_us))
          (> (* (+ Flow.bytes_in_flight Ack.bytes_acked) 100) (* Cwnd Control.window_use_pct)))
    (report)
    (:= Micros 0)
)
(when (&& (== Control.period_us 0) (> Micros Control.idle_report_us))
    (report)
    (:= Micros 0)
)"
    )
}

