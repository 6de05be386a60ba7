//! The ovs shim's event loop: port records in, per-flow sender models
//! ([`SenderFlow`]), CCP evaluations and agent messages through the shared
//! [`Session`], and back out the per-flow `OvsDirective`, the agent deadline and retransmissions.
//!
//! A flow is under control (the egress program clamps its window and hides its loss signals)
//! only while the agent has commanded a window for it, it has not fallen back, and the
//! deadline the session keeps pushing forward lies in the future. Exactly then the shim
//! retransmits its losses: outside that, the server sees every duplicate ACK and SACK block
//! and recovers by itself, and a second sender would only add duplicates. The shim keeps
//! tracking segments either way, so control can resume with a complete buffer.
//!
//! A flow falls back when its data can no longer be protected (its buffer budget or the shared
//! one ran out, the BPF side could not copy a segment, or a segment went missing): its
//! directive is cleared and its buffer freed, and the server's own TCP carries it. The fallback
//! is counted with its reason and lasts until the cause clears: once the client has
//! acknowledged the hole, every byte outstanding is in the buffer again and the flow rejoins
//! control at the agent's window (the agent keeps the flow meanwhile). So does every flow the
//! agent's silence left to the server (counted as `agent_late`) once it answers again.
//!
//! The loop reads the agent's answers before each batch of port records and between chunks
//! of one, so an answer never waits behind a batch. No pass walks all flows: the timer wheel
//! holds each flow's next deadline (loss timers, idle expiry, and a program evaluation for a
//! flow whose ACKs stopped with data outstanding), and fires only flows that have one due.
//!
//! The frame slab is shared by budget: the window a flow is given is at most its share of
//! the slab ([`slab_share_bytes`]), so the server cannot make one flow take the slots others
//! need.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use ccswitch_ccp::agent_link::AgentAddr;
use ccswitch_ccp::cli::{WindowEdge, WindowSignals};
use ccswitch_ccp::latency::LatencyHistogram;
use ccswitch_ccp::session::{
    monotonic_now_ns, process_cpu_time, AckInput, AnswerLatency, FlowDesc, Session, SessionDatapath,
};
use serde_json::{json, Value};
use tracing::{debug, error, info, trace, warn};

use ccswitch_ovs::loader::{DirectiveSlotBusy, OvsDatapath};
use ccswitch_ccp::program::fold::{FoldMode, FoldReporting};
use ccswitch_ovs::events::{Ack, AckVerdict, FlowAddrs, FoldDirective, Folded, FrameSlot, OvsDirective, OvsEvent};
use ccswitch_ovs::fold::ShimFold;
use ccswitch_ovs::recovery::AckOutcome;
use ccswitch_datapath_support::wheel::TimerWheel;
use ccswitch_ovs::recovery::{BufferPool, FallbackReason, RecoveryConfig, SenderFlow, EXHAUSTION_REASONS};

/// Period of loss-detection timers (RACK reordering timeout, RTO).
const RECOVERY_TICK: Duration = Duration::from_millis(5);
/// Slots of the timer wheel, one per recovery tick: about 20 s a revolution, so the usual
/// deadlines (RTOs, the wait for a missing segment) are found in their first pass.
const TIMER_SLOTS: usize = 4096;
/// A flow with data outstanding whose ACKs stopped for this long has its program evaluated
/// (time-based report conditions fire), and again every this long until an ACK comes.
const CCP_TICK_NS: u64 = 10_000_000;
/// Port records handled between two reads of the agent's answers.
const RECORD_CHUNK: usize = 1024;
/// A flow's share of the frame slab is never below this many slots, the smallest window a
/// directive gives (`SenderFlow::directive`). Past `slots / (2 · MIN_SHARE_SLOTS)` flows the
/// shares add up to more than the slab: at 4 (the floor until 2026-11-26, for the three
/// duplicate ACKs of a fast retransmit, which SACK flows do not need: RACK marks a hole on
/// one later delivery) that was 8,192 flows of the default slab, and 10k flows found it full.
const MIN_SHARE_SLOTS: u64 = 2;
/// Period of the buffer-occupancy samples in the stats file.
const SAMPLE_INTERVAL: Duration = Duration::from_millis(100);
/// Occupancy samples kept at most (about 40 MB of JSON): later ones are counted, not kept.
const MAX_SAMPLES: usize = 1 << 20;
/// Initial window announced to the agent, in segments (RFC 6928).
const INIT_CWND_SEGMENTS: u32 = 10;

/// Flow ids are counters the port hands out: a multiplicative hash spreads them at a fraction
/// of SipHash's cost (SipHash was 6% of the shim's samples at 10k flows, one lookup or more
/// per record). Nothing outside the port chooses them.
#[derive(Default, Clone, Copy)]
struct FlowIdHasher(u64);

impl std::hash::Hasher for FlowIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = (self.0 ^ u64::from(n)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// The shim's tables keyed by flow id.
type FlowMap<V> = HashMap<u32, V, std::hash::BuildHasherDefault<FlowIdHasher>>;

/// What the shim needs from the port (the [`OvsDatapath`], or a stand-in in tests).
pub trait PortOps {
    fn set_directive(&self, flow_id: u32, directive: &OvsDirective) -> Result<()>;
    fn clear_directive(&self, flow_id: u32) -> Result<()>;
    fn set_valid_until(&self, deadline_ns: u64) -> Result<()>;
    fn remove_flow(&self, key: &FlowAddrs) -> Result<()>;
    /// Send the frame in a slab slot the shim owns toward the client again, at the next
    /// [`PortOps::flush_injections`] at the latest (the frame is copied now), its TCP
    /// timestamp value raised to `tsval_floor` if it is older
    /// ([`SenderFlow::tsval_floor`]).
    fn inject(&self, frame: &FrameSlot, tsval_floor: Option<u32>) -> Result<()>;
    /// Send the frames [`PortOps::inject`] staged; returns how many (lost if it fails).
    fn flush_injections(&self) -> Result<usize> {
        Ok(0)
    }
    /// The last ACK the port forwarded for flow `id` (from its flow entry), stamped when the
    /// port last saw the flow; None if there is none or the entry is not that flow's.
    fn last_ack(&self, _id: u32, _key: &FlowAddrs) -> Option<Ack> {
        None
    }
    /// Give slab slots back to the port program.
    fn free_frames(&self, slots: &[u32]);
    /// Slots of the frame slab.
    fn slab_slots(&self) -> usize;
}

impl PortOps for OvsDatapath {
    fn set_directive(&self, flow_id: u32, directive: &OvsDirective) -> Result<()> {
        OvsDatapath::set_directive(self, flow_id, directive)
    }
    fn clear_directive(&self, flow_id: u32) -> Result<()> {
        OvsDatapath::clear_directive(self, flow_id)
    }
    fn set_valid_until(&self, deadline_ns: u64) -> Result<()> {
        OvsDatapath::set_valid_until(self, deadline_ns)
    }
    fn remove_flow(&self, key: &FlowAddrs) -> Result<()> {
        OvsDatapath::remove_flow(self, key)
    }
    fn inject(&self, frame: &FrameSlot, tsval_floor: Option<u32>) -> Result<()> {
        OvsDatapath::queue_inject_slot(self, frame, tsval_floor)
    }
    fn flush_injections(&self) -> Result<usize> {
        OvsDatapath::flush_injections(self)
    }
    fn last_ack(&self, id: u32, key: &FlowAddrs) -> Option<Ack> {
        let e = self.flow(key).filter(|e| e.flow_id == id)?;
        let (ack, _, window) = e.last_forwarded?;
        Some(Ack {
            flow_id: id,
            ts_ns: e.last_seen_ns,
            ack,
            window_bytes: u32::from(window) << (e.client_wscale & 0xf),
            payload_len: 0,
            ece: false,
            fin: false,
            sack: Vec::new(),
            verdict: AckVerdict::Rewritten,
        })
    }
    fn free_frames(&self, slots: &[u32]) {
        OvsDatapath::free_frames(self, slots)
    }
    fn slab_slots(&self) -> usize {
        OvsDatapath::slab_slots(self)
    }
}

#[derive(Debug, Clone)]
pub struct ShimConfig {
    pub recovery: RecoveryConfig,
    pub total_buffer_bytes: u64,
    pub agent_timeout: Duration,
    /// Longest a routine record (a segment copy, an ACK that only moves forward) waits in
    /// the ring: the port programs wake the shim only for urgent ones.
    pub record_delay: Duration,
}

struct OvsFlow {
    key: FlowAddrs,
    sender: SenderFlow,
    /// The agent's latest window.
    cwnd: u32,
    /// The window written to the port: follows `cwnd` down at once, but up only by the bytes
    /// each ACK acknowledges, as slow start would. A window opened in one step lets the
    /// server send the whole increase back to back, a burst a droptail queue cannot absorb.
    enforced: u32,
    /// The port enforces `enforced` (and hides losses): from establishment at the initial
    /// window when the agent is answering, then the agent's windows, except while the flow
    /// has fallen back.
    active: bool,
    /// The directive last written, to skip identical map updates.
    written: Option<OvsDirective>,
    /// Listed in `OvsShim::changed` for the next occupancy sample.
    changed: bool,
    /// When the program is evaluated for want of ACKs (`u64::MAX`: nothing outstanding).
    ccp_tick_at: u64,
    /// The session folds the flow's standard program in the datapath: the port program
    /// folds the ACKs it can, the shim those it sees (see [`ccswitch_ovs::fold`]).
    fold: Option<ShimFold>,
    /// The program's window and rate (bytes/s, 0: not paced), as the session last set them:
    /// what a folded program reads as Cwnd and Rate.
    prog_cwnd: u32,
    prog_rate: u64,
}

/// A flow's place in the timer wheel, kept beside the flows rather than in them: the wheel
/// returns every flow whose deadline it was given, including the many whose deadline has
/// moved later since (a retransmission timer or a program tick stopped by the ACK of a
/// flight), and at 10k flows each [`OvsFlow`] the shim touched only to find that out was a
/// few cache misses (a quarter of the shim's time). This small table answers without them.
#[derive(Debug, Clone, Copy)]
struct FlowTimer {
    /// The deadline under which the flow waits in the wheel (`u64::MAX`: none); an expired
    /// entry with another deadline is stale.
    waits_at: u64,
    /// The flow's next deadline as of its last change (`after_change`): nothing happens to the
    /// flow before it, so an entry that expires earlier only waits again, until then.
    due_at: u64,
}

impl FlowTimer {
    const NONE: FlowTimer = FlowTimer { waits_at: u64::MAX, due_at: u64::MAX };
}

impl OvsFlow {
    /// The session evaluates the flow's program on ticks (`Session::tick_flow`): only while
    /// it does not fold it. A folded program's time-based reports are the port's, made on
    /// the flow's ACKs, so a tick would only cost a look at a flow cold in cache (at 10k
    /// flows with data outstanding, one every 10 ms each was most of the shim's timer work).
    fn ticked(&self) -> bool {
        self.fold.is_none()
    }
}

/// Where an ACK the shim follows comes from.
#[derive(Clone, Copy)]
enum AckFrom<'a> {
    /// An ACK record: the flow's program takes it in (interpreted, or folded here).
    Record,
    /// The registers the port folded, with the last ACK they folded.
    Folded(&'a Folded),
    /// The port's flow entry ([`OvsShim::catch_up_with_port`]): the port's registers count it.
    PortEntry,
}

/// Shim counters for the exit log and the stats file.
#[derive(Debug, Default, Clone)]
pub struct OvsTotals {
    pub flows: u64,
    pub segments_buffered: u64,
    pub retransmit_fast: u64,
    pub retransmit_rack: u64,
    pub retransmit_timeout: u64,
    pub timeouts: u64,
    pub inject_errors: u64,
    pub directive_writes: DirectiveWrites,
    pub idle_expired: u64,
    /// Flows that left control, by reason (each time they left).
    pub fallbacks: HashMap<&'static str, u64>,
    /// Flows that rejoined control after a fallback.
    pub rejoins: u64,
    /// Slab slots received in segment records and not yet given back.
    pub slots_held: u64,
    pub timer: TimerCounts,
    pub polls: PollCounts,
    /// Flow entries read from the port because a folded flow's retransmission timer expired,
    /// and the timeouts that averted (the port had forwarded an ACK of more data).
    pub port_entry_reads: u64,
    pub timeouts_averted: u64,
    /// ACKs reporting a duplicate the client received (D-SACK): unneeded retransmissions.
    pub dsacks: u64,
}

/// How the shim's waits for input ended: records in the ring (waiting already, or a port
/// program woke it: a wake-up costs that program an interrupt), or the record delay over.
#[derive(Debug, Default, Clone, Copy)]
pub struct PollCounts {
    pub ring_ready: u64,
    pub timed_out: u64,
}

/// Timer-wheel entries that expired, and those among them that found their flow due (the
/// rest had moved later or were stale, and cost no look at the flow).
#[derive(Debug, Default, Clone, Copy)]
pub struct TimerCounts {
    pub expired: u64,
    pub handled: u64,
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    t_s: f64,
    flow_id: u32,
    segments: usize,
    bytes: u64,
}

#[derive(Debug, Default, Clone, Copy)]
struct FlowMax {
    segments: usize,
    bytes: u64,
}

/// The session's view of the port: the agent's windows become port directives built from the flow's
/// scoreboard.
struct Ctl<'a, P: PortOps> {
    port: &'a P,
    flows: &'a mut FlowMap<OvsFlow>,
    writes: &'a mut DirectiveWrites,
}

/// The largest window a flow is given: its share of the frame slab. Each flow holds at most
/// its window of unacknowledged segments plus as much again SACKed above a hole (the egress
/// program widens the window by the SACKed bytes), one slot each; so with `flows` flows each
/// may take `slots / (2 · flows)` slots (never fewer than [`MIN_SHARE_SLOTS`]) and together
/// they cannot fill the slab. A slot holds one segment of at most `mss` payload bytes.
pub fn slab_share_bytes(slots: usize, flows: usize, mss: u32) -> u32 {
    let share = (slots as u64 / (2 * flows.max(1) as u64)).max(MIN_SHARE_SLOTS);
    u32::try_from(share * u64::from(mss)).unwrap_or(u32::MAX)
}

/// Headroom over `rate × min_rtt`, in segments (as BBR adds a few segments to its window for
/// delayed and stretched ACKs).
const RATE_WINDOW_HEADROOM_SEGMENTS: u64 = 3;

/// The window the port enforces. A port cannot pace, and a window alone lets the server
/// send it in bursts at line rate: an algorithm that paces (BBR's `cwnd_gain` of 2 counts on
/// pacing to keep the queue short) would keep a droptail queue full. So a pacing rate becomes
/// a window too, the bytes it delivers in one minimum round trip, and the smaller one holds.
fn enforced_window(cwnd: u32, rate: Option<u64>, min_rtt_ns: Option<u64>, mss: u32) -> u32 {
    let (Some(rate), Some(rtt)) = (rate.filter(|r| *r > 0), min_rtt_ns) else { return cwnd };
    let by_rate = (u128::from(rate) * u128::from(rtt) / 1_000_000_000) as u64
        + RATE_WINDOW_HEADROOM_SEGMENTS * u64::from(mss);
    cwnd.min(by_rate.min(u64::from(u32::MAX)) as u32)
}

/// Directives written to the port, and those refused because another live flow held the
/// flow's slot: on this port only a flow already gone from the flow table, whose slot a
/// newer flow took, is refused ([`OvsDatapath::set_directive`]; logged at most once per
/// second).
#[derive(Debug, Default, Clone, Copy)]
pub struct DirectiveWrites {
    pub written: u64,
    pub refused: u64,
}

fn write_directive<P: PortOps>(port: &P, sid: u32, f: &mut OvsFlow, flows: usize, writes: &mut DirectiveWrites) {
    let share = slab_share_bytes(port.slab_slots(), flows, f.sender.mss());
    let mut c = f.sender.directive(f.enforced.min(share));
    c.fold = f.fold.as_ref().map(|x| {
        let (per_ack, window_use_pct, idle_report_us) = match x.mode().reporting {
            FoldReporting::PerAck => (true, 0, 0),
            FoldReporting::PerRtt { window_use_pct, idle_report_us } => (false, window_use_pct, idle_report_us),
        };
        FoldDirective {
            per_ack,
            start_us: x.start_us(),
            window_use_pct,
            idle_report_us,
            cwnd_bytes: f.prog_cwnd,
            rate: f.prog_rate,
            micros_zero_us: x.reported_at_us().unwrap_or(0),
            hold: f.sender.needs_every_ack() || x.holds_ecn(),
        }
    });
    if f.written == Some(c) {
        return;
    }
    match port.set_directive(sid, &c) {
        Ok(()) => {
            writes.written += 1;
            f.written = Some(c);
        }
        Err(e) if e.is::<DirectiveSlotBusy>() => writes.refused += 1,
        Err(e) => error!(sid, error = %e, "cannot write the directive"),
    }
}

impl<P: PortOps> SessionDatapath for Ctl<'_, P> {
    fn set_directive(&mut self, sid: u32, cwnd_bytes: u32, rate: Option<u64>) -> Result<()> {
        let n = self.flows.len();
        let Some(f) = self.flows.get_mut(&sid) else { return Ok(()) };
        f.prog_cwnd = cwnd_bytes;
        f.prog_rate = rate.unwrap_or(0);
        f.cwnd = enforced_window(cwnd_bytes, rate, f.sender.min_rtt_ns(), f.sender.mss());
        if f.sender.fallback().is_some() {
            // Kept for when the flow rejoins.
            return Ok(());
        }
        if !f.active || f.cwnd < f.enforced {
            f.enforced = f.cwnd;
        }
        f.active = true;
        write_directive(self.port, sid, f, n, self.writes);
        Ok(())
    }
    fn clear_directive(&mut self, sid: u32) -> Result<()> {
        if let Some(f) = self.flows.get_mut(&sid) {
            f.active = false;
            f.written = None;
        }
        self.port.clear_directive(sid)
    }
    fn set_valid_until(&mut self, deadline_ns: u64) -> Result<()> {
        self.port.set_valid_until(deadline_ns)
    }
    fn set_fold(&mut self, sid: u32, fold: Option<(FoldMode, u64)>) -> Result<bool> {
        // The port programs do not keep the ACK epoch that measures aggregation: such a
        // flow's program runs in the session.
        let measures_aggregation = fold.is_some_and(|(mode, _)| mode.agg_rate != 0);
        let fold = fold.filter(|_| !measures_aggregation);
        let n = self.flows.len();
        let Some(f) = self.flows.get_mut(&sid) else { return Ok(false) };
        f.fold = match (f.fold.take(), fold) {
            (_, None) => None,
            (Some(mut old), Some((mode, start_us))) if old.start_us() == start_us => {
                old.set_mode(mode);
                Some(old)
            }
            (_, Some((mode, start_us))) => Some(ShimFold::new(start_us, mode)),
        };
        if f.ticked() && f.ccp_tick_at == u64::MAX && f.sender.bytes_in_flight() > 0 {
            // The program runs in the session again: ticked from now while ACKs stay away
            // (from the flow's next record, which puts it in the timer wheel).
            f.ccp_tick_at = monotonic_now_ns().saturating_add(CCP_TICK_NS);
        } else if !f.ticked() {
            f.ccp_tick_at = u64::MAX;
        }
        if f.active {
            write_directive(self.port, sid, f, n, self.writes);
        }
        Ok(!measures_aggregation)
    }
}

pub struct OvsShim<P: PortOps> {
    port: P,
    session: Session,
    cfg: ShimConfig,
    pool: BufferPool,
    flows: FlowMap<OvsFlow>,
    totals: OvsTotals,
    started: Instant,
    started_ns: u64,
    samples: Vec<Sample>,
    samples_dropped: u64,
    max_by_flow: FlowMap<FlowMax>,
    /// Each flow's next loss-timer or idle deadline.
    timers: TimerWheel,
    /// Each flow's deadlines in the wheel.
    timer_of: FlowMap<FlowTimer>,
    /// Entries the wheel returned, kept to reuse the allocation.
    due: Vec<(u32, u64)>,
    /// Flows changed since the last occupancy sample.
    changed: Vec<u32>,
    /// Refused directives already logged, and when.
    refused_logged: (u64, Instant),
    /// SYNs the full flow table refused, as of the last line about them.
    table_full_logged: (u64, Instant),
    /// Fallbacks for want of room (slab, ring, buffer budgets) already logged, and when.
    exhaustion_logged: (u64, Instant),
    /// Flows fallen back, by reason, when the measurement window began.
    window_start_fallbacks: HashMap<&'static str, u64>,
    /// Rejoins when the measurement window began.
    window_start_rejoins: u64,
    /// The figures of the measurement window, taken when it ended.
    window: Option<Value>,
}

/// A handshake not completed after this long is dropped from a full flow table (a SYN is
/// retried after 1, 3 and 7 s).
const HALF_OPEN_TIMEOUT_NS: u64 = 10_000_000_000;

/// At most one line per this about exhausted resources and refused directives.
const LOG_INTERVAL: Duration = Duration::from_secs(1);

impl<P: PortOps> OvsShim<P> {
    pub fn new(port: P, agent_addr: AgentAddr, cfg: ShimConfig) -> Self {
        Self {
            port,
            session: Session::new(agent_addr, cfg.agent_timeout),
            pool: BufferPool::new(cfg.total_buffer_bytes),
            cfg,
            flows: FlowMap::default(),
            totals: OvsTotals::default(),
            started: Instant::now(),
            started_ns: monotonic_now_ns(),
            samples: Vec::new(),
            samples_dropped: 0,
            max_by_flow: FlowMap::default(),
            timers: TimerWheel::new(RECOVERY_TICK.as_nanos() as u64, TIMER_SLOTS, monotonic_now_ns()),
            timer_of: FlowMap::default(),
            due: Vec::new(),
            changed: Vec::new(),
            refused_logged: (0, Instant::now()),
            table_full_logged: (0, Instant::now()),
            // The first exhaustion is logged at the next pass, later ones once per interval.
            exhaustion_logged: (0, Instant::now().checked_sub(LOG_INTERVAL).unwrap_or_else(Instant::now)),
            window_start_fallbacks: HashMap::new(),
            window_start_rejoins: 0,
            window: None,
        }
    }

    /// A benchmark's measurement window began or ended: latency is measured afresh from its
    /// start, and at its end the window's figures are kept for the stats file.
    pub fn on_window(&mut self, edge: WindowEdge) {
        match edge {
            WindowEdge::Start => {
                self.session.start_measurement_window();
                self.window_start_fallbacks = self.totals.fallbacks.clone();
                self.window_start_rejoins = self.totals.rejoins;
            }
            WindowEdge::End => {
                let fallbacks: HashMap<&str, u64> = self
                    .totals
                    .fallbacks
                    .iter()
                    .map(|(k, v)| (*k, v - self.window_start_fallbacks.get(k).copied().unwrap_or(0)))
                    .filter(|(_, v)| *v > 0)
                    .collect();
                let lat = self.session.answer_latency();
                self.window = Some(json!({
                    "fallbacks": fallbacks,
                    "rejoins": self.totals.rejoins - self.window_start_rejoins,
                    "answer_latency_us": latency_json(lat),
                    "untimed": lat.untimed,
                    "awaiting": self.session.reports_awaiting_answer(),
                }));
                info!(window = %self.window.as_ref().expect("set"), "measurement window");
            }
        }
    }

    fn ctl(&mut self) -> (&mut Session, Ctl<'_, P>) {
        (
            &mut self.session,
            Ctl { port: &self.port, flows: &mut self.flows, writes: &mut self.totals.directive_writes },
        )
    }

    /// Send what is queued for the agent, connect to it if needed, apply its messages, keep
    /// the deadline fresh. The agent falling silent or going away leaves every protected flow
    /// to the server: counted as their fallback (`agent_late`); they rejoin when it answers.
    pub fn service_agent(&mut self) {
        let was_healthy = self.session.agent_healthy();
        let (session, mut ctl) = self.ctl();
        session.flush(&mut ctl);
        session.maybe_connect(&mut ctl);
        session.drain_agent(&mut ctl);
        session.refresh_deadline(&mut ctl);
        if was_healthy && !self.session.agent_healthy() {
            let n = self.flows.values().filter(|f| f.sender.fallback().is_none()).count() as u64;
            *self.totals.fallbacks.entry("agent_late").or_default() += n;
        }
    }

    /// Send the retransmissions staged since the last call: one run of the port's inject
    /// program for all of them.
    fn send_retransmissions(&mut self) {
        if let Err(e) = self.port.flush_injections() {
            // The segments stay marked as retransmitted: RACK or the timer finds them lost again.
            self.totals.inject_errors += 1;
            warn!(error = %e, "cannot inject the staged retransmissions");
        }
    }

    /// Send what the timers queued for the agent.
    fn flush_agent(&mut self) {
        let (session, mut ctl) = self.ctl();
        session.flush(&mut ctl);
    }

    /// The port enforces this flow's directive now.
    fn controlled(&self, f: &OvsFlow, now_ns: u64) -> bool {
        f.active && f.sender.fallback().is_none() && now_ns < self.session.valid_until_ns()
    }

    /// Write flow `id`'s directive if it is under control.
    fn write(&mut self, id: u32) {
        let n = self.flows.len();
        if let Some(f) = self.flows.get_mut(&id).filter(|f| f.active) {
            write_directive(&self.port, id, f, n, &mut self.totals.directive_writes);
        }
    }

    pub fn on_event(&mut self, ev: OvsEvent) {
        self.handle(ev);
        self.return_slots();
    }

    /// Give the slab slots the flows no longer need back to the port.
    fn return_slots(&mut self) {
        let slots = self.pool.freed();
        if !slots.is_empty() {
            self.totals.slots_held = self.totals.slots_held.saturating_sub(slots.len() as u64);
            self.port.free_frames(slots);
            self.pool.clear_freed();
        }
    }

    fn handle(&mut self, ev: OvsEvent) {
        if matches!(ev, OvsEvent::Segment(_)) {
            self.totals.slots_held += 1;
        }
        match &ev {
            OvsEvent::Segment(s) => trace!(flow = s.flow_id, ts = s.ts_ns, seq = s.seq, len = s.len, "segment"),
            OvsEvent::Resent(r) => trace!(flow = r.flow_id, ts = r.ts_ns, seq = r.seq, len = r.len, "resent"),
            OvsEvent::Ack(a) => trace!(flow = a.flow_id, ts = a.ts_ns, ack = a.ack, sack = ?a.sack, verdict = ?a.verdict, "ack"),
            _ => trace!(event = ?ev, "record"),
        }
        match ev {
            OvsEvent::Established(e) => {
                let id = e.flow_id;
                if let Some(mut old) = self.flows.remove(&id) {
                    // The BPF side reused the id: the old flow is gone.
                    old.sender.release(&mut self.pool);
                    let (session, mut ctl) = self.ctl();
                    session.remove_flow(&mut ctl, id);
                }
                debug!(flow = id, server = %e.key.server, client = %e.key.client, mss = e.mss, sack = e.sack, "flow established");
                let sender = SenderFlow::new(&e, self.cfg.recovery);
                let init_cwnd = INIT_CWND_SEGMENTS * u32::from(e.mss);
                self.totals.flows += 1;
                // Controlled from the first ACK, as a kernel datapath holds a new flow at its
                // initial window until the agent speaks: the agent's first window follows its
                // first report, a round trip later, and a loss in the first flight would
                // otherwise reach the server as SACKs and put its own TCP into recovery.
                let active = monotonic_now_ns() < self.session.valid_until_ns();
                let flow = OvsFlow {
                    key: e.key,
                    sender,
                    cwnd: init_cwnd,
                    enforced: init_cwnd,
                    active,
                    written: None,
                    changed: false,
                    ccp_tick_at: u64::MAX,
                    fold: None,
                    prog_cwnd: init_cwnd,
                    prog_rate: 0,
                };
                self.flows.insert(id, flow);
                self.timer_of.insert(id, FlowTimer::NONE);
                self.write(id);
                self.after_change(id, e.ts_ns);
                let desc = FlowDesc {
                    sid: id,
                    src: e.key.server,
                    dst: e.key.client,
                    mss: u32::from(e.mss),
                    init_cwnd_bytes: init_cwnd,
                    handshake_rtt_us: 0,
                };
                let (session, mut ctl) = self.ctl();
                session.add_flow(&mut ctl, desc);
            }
            OvsEvent::Segment(s) => {
                let id = s.flow_id;
                let Some(f) = self.flows.get_mut(&id) else {
                    // Not kept: the slot goes straight back.
                    self.pool.discard(s.frame);
                    return;
                };
                let ts_ns = s.ts_ns;
                if f.ccp_tick_at == u64::MAX && f.ticked() {
                    f.ccp_tick_at = ts_ns.saturating_add(CCP_TICK_NS);
                }
                match f.sender.on_segment(s, &mut self.pool) {
                    Some(reason) => self.fall_back(id, reason),
                    None => {
                        self.totals.segments_buffered += 1;
                        let m = self.max_by_flow.entry(id).or_default();
                        m.segments = m.segments.max(f.sender.buffered_segments());
                        m.bytes = m.bytes.max(f.sender.buffered_bytes());
                    }
                }
                self.after_change(id, ts_ns);
            }
            OvsEvent::Resent(r) => {
                let Some(f) = self.flows.get_mut(&r.flow_id) else { return };
                if let Some(reason) = f.sender.on_resent(&r, &mut self.pool) {
                    self.fall_back(r.flow_id, reason);
                }
                self.after_change(r.flow_id, r.ts_ns);
            }
            OvsEvent::Ack(a) => self.on_ack(&a, AckFrom::Record),
            OvsEvent::Folded(r) => {
                // The ACKs folded acknowledged up to r.ack: one stretched ACK for the sender
                // model (no loss signal: the port folds no ACK that carries one).
                let a = Ack {
                    flow_id: r.flow_id,
                    ts_ns: r.ts_ns,
                    ack: r.ack,
                    window_bytes: r.window_bytes,
                    payload_len: 0,
                    ece: false,
                    fin: false,
                    sack: Vec::new(),
                    verdict: AckVerdict::Rewritten,
                };
                self.on_ack(&a, AckFrom::Folded(&r));
            }
            OvsEvent::Closed { flow_id, reason, .. } => {
                let Some(mut f) = self.flows.remove(&flow_id) else { return };
                self.timer_of.remove(&flow_id);
                debug!(flow = flow_id, ?reason, "flow closed");
                f.sender.release(&mut self.pool);
                let (session, mut ctl) = self.ctl();
                session.remove_flow(&mut ctl, flow_id);
            }
            OvsEvent::Unbuffered { flow_id, reason, hole_end, ts_ns } => {
                let Some(f) = self.flows.get_mut(&flow_id) else { return };
                if let Some(reason) = f.sender.on_unbuffered(reason, hole_end, &mut self.pool) {
                    self.fall_back(flow_id, reason);
                }
                self.after_change(flow_id, ts_ns);
            }
        }
    }

    /// An ACK the port sent up, or (`folded`) the registers the port folded, with the last
    /// ACK they folded as `a`.
    fn on_ack(&mut self, a: &Ack, from: AckFrom) {
        let id = a.flow_id;
        let Some(f) = self.flows.get_mut(&id) else { return };
        let out = match from {
            AckFrom::PortEntry => match f.sender.on_port_ack(a, &mut self.pool) {
                Some(out) => out,
                None => return,
            },
            AckFrom::Record | AckFrom::Folded(_) => f.sender.on_ack(a, &mut self.pool),
        };
        self.totals.dsacks += u64::from(out.dsack);
        let rejoined = f.sender.try_rejoin();
        match from {
            AckFrom::Record => self.program_on_ack(id, &out, None),
            AckFrom::Folded(r) => self.program_on_ack(id, &out, Some(r)),
            // The port's registers count it: they go up later.
            AckFrom::PortEntry => {}
        }
        let Some(f) = self.flows.get_mut(&id) else { return };
        f.ccp_tick_at = if f.sender.bytes_in_flight() > 0 && f.ticked() { a.ts_ns.saturating_add(CCP_TICK_NS) } else { u64::MAX };
        if rejoined {
            // The server's own TCP ran the flow meanwhile: the window starts where its data
            // in flight stands (never closing on it) and follows the agent's from there.
            f.active = true;
            let in_flight = u32::try_from(f.sender.bytes_in_flight()).unwrap_or(u32::MAX);
            f.enforced = f.cwnd.max(in_flight);
            self.totals.rejoins += 1;
            debug!(flow = id, "flow rejoins control");
            self.write(id);
        } else if f.sender.fallback().is_none() {
            let grown = f.enforced < f.cwnd && out.prims.bytes_acked > 0;
            if grown {
                let step = u32::try_from(out.prims.bytes_acked).unwrap_or(u32::MAX);
                f.enforced = f.cwnd.min(f.enforced.saturating_add(step));
            }
            if out.scoreboard_changed || grown {
                self.write(id);
            }
            self.retransmit(id, a.ts_ns.max(monotonic_now_ns()));
        }
        self.after_change(id, a.ts_ns);
    }

    /// The port folds flow `id`'s ACKs and hands them up only now and then (a report, half a
    /// window or everything acknowledged): before its retransmission timer declares the head
    /// lost, follow the last ACK the port forwarded, read from its flow entry. A timeout on
    /// data the client has acknowledged would retransmit for nothing and hold the flow's
    /// ACKs in user space until that is over (the previous build timed out ~7k times a second
    /// at 10k flows). A flow with a loss to recover is held already: the port folds nothing.
    fn catch_up_with_port(&mut self, id: u32, now_ns: u64) {
        let Some(f) = self.flows.get(&id) else { return };
        if f.fold.is_none() || f.sender.needs_every_ack() || !f.sender.rto_due(now_ns) {
            return;
        }
        self.totals.port_entry_reads += 1;
        let Some(a) = self.port.last_ack(id, &f.key) else { return };
        let before = f.sender.snd_una();
        self.on_ack(&a, AckFrom::PortEntry);
        if self.flows.get(&id).is_some_and(|f| f.sender.snd_una() != before) {
            self.totals.timeouts_averted += 1;
        }
    }

    /// The flow's program on one ACK: interpreted by the session, or, while the session
    /// folds it in the datapath, folded here on the registers the port folded.
    fn program_on_ack(&mut self, id: u32, out: &AckOutcome, folded: Option<&Folded>) {
        let Some(f) = self.flows.get_mut(&id) else { return };
        let (step, start_us) = match (f.fold.as_mut(), folded) {
            (Some(fold), Some(r)) => (fold.merge(r), fold.start_us()),
            (Some(fold), None) => (fold.fold_ack(&out.prims, f.prog_cwnd, f.prog_rate), fold.start_us()),
            // Folded under a fold that has since stopped: the interpreter restarts without them.
            (None, Some(_)) => return,
            (None, None) => {
                let input = AckInput {
                    prims: out.prims,
                    rtt_sample_us: out.rtt_sample_us,
                    srtt_us: f.sender.srtt_ns() / 1000,
                    // The port enforces the agent's window and nothing else.
                    datapath_cwnd_bytes: None,
                };
                let (session, mut ctl) = self.ctl();
                session.on_ack(&mut ctl, id, input);
                return;
            }
        };
        // The program's slow start (Cwnd never below its window), then its loss clause (the
        // window the agent pre-set for a loss, at once).
        let set = step.loss_cwnd.or(step.slow_start_cwnd.filter(|&w| w > f.prog_cwnd));
        if let Some(cwnd) = set {
            let rate = (f.prog_rate > 0).then_some(f.prog_rate);
            let (_, mut ctl) = self.ctl();
            if let Err(e) = ctl.set_directive(id, cwnd, rate) {
                error!(flow = id, error = %e, "cannot apply the program's window");
            }
        }
        if let Some(fields) = step.report {
            // The window the program now holds (the agent's, or the loss clause's).
            let cwnd = self.flows.get(&id).map_or(0, |f| f.prog_cwnd);
            let (session, mut ctl) = self.ctl();
            // The shim is not in the sender's kernel: it knows no reductions of the server's TCP.
            session.on_folded_report(&mut ctl, id, start_us, &fields, cwnd, None);
            // Micros restarted here: the port must know (its next report counts from now).
            self.write(id);
        }
    }

    /// After anything happened to a flow: put it in the timer wheel at its next deadline if
    /// that is earlier than the one it waits under (a later one is found at the old time and
    /// moved on from there), and list it for the next occupancy sample.
    fn after_change(&mut self, id: u32, now_ns: u64) {
        let Some(f) = self.flows.get_mut(&id) else { return };
        let at = f.sender.next_timer_ns(now_ns).min(f.ccp_tick_at);
        let t = self.timer_of.entry(id).or_insert(FlowTimer::NONE);
        t.due_at = at;
        if at < t.waits_at {
            self.timers.schedule(id, at);
            t.waits_at = at;
        }
        if !f.changed {
            f.changed = true;
            self.changed.push(id);
        }
    }

    fn retransmit(&mut self, id: u32, now_ns: u64) {
        let Some(f) = self.flows.get(&id) else { return };
        if f.sender.pending_retransmissions() == 0 || !self.controlled(f, now_ns) {
            return;
        }
        let port = &self.port;
        let mut errors = 0;
        let f = self.flows.get_mut(&id).expect("present");
        let tsval_floor = f.sender.tsval_floor();
        let done = f.sender.retransmit(now_ns, |frame| match port.inject(frame, tsval_floor) {
            Ok(()) => true,
            Err(e) => {
                if errors == 0 {
                    warn!(flow = id, error = %e, "cannot inject a retransmission");
                }
                errors += 1;
                false
            }
        });
        self.totals.inject_errors += errors;
        self.totals.retransmit_fast += done.fast;
        self.totals.retransmit_rack += done.rack;
        self.totals.retransmit_timeout += done.timeout;
    }

    /// Flow `id`'s sender model just fell back for `reason` (its buffer is freed): leave
    /// the flow to the server's TCP until it rejoins. The agent keeps the flow.
    fn fall_back(&mut self, id: u32, reason: FallbackReason) {
        let Some(f) = self.flows.get_mut(&id) else { return };
        f.active = false;
        f.written = None;
        f.ccp_tick_at = u64::MAX;
        *self.totals.fallbacks.entry(reason.name()).or_default() += 1;
        // Resources running out are logged once per interval (log_exhaustion), never per flow.
        if reason.is_exhaustion() {
            debug!(flow = id, reason = reason.name(), "flow falls back to the server's own TCP");
        } else {
            info!(flow = id, reason = reason.name(), "flow falls back to the server's own TCP");
        }
        if let Err(e) = self.port.clear_directive(id) {
            error!(flow = id, error = %e, "cannot clear the directive");
        }
    }

    /// Loss timers, idle expiry, retransmissions and program evaluations of the flows whose
    /// deadline has come (the timer wheel's): a flow with nothing outstanding costs nothing here.
    pub fn recovery_tick(&mut self, now_ns: u64) {
        let mut due = std::mem::take(&mut self.due);
        self.timers.expire(now_ns, &mut due);
        for (id, deadline) in due.drain(..) {
            self.totals.timer.expired += 1;
            let Some(t) = self.timer_of.get_mut(&id) else { continue };
            if t.waits_at != deadline {
                continue; // moved earlier since, and already handled then
            }
            if t.due_at > now_ns {
                // Moved later since: wait again until then, without touching the flow.
                t.waits_at = t.due_at;
                self.timers.schedule(id, t.due_at);
                continue;
            }
            t.waits_at = u64::MAX;
            let Some(f) = self.flows.get_mut(&id) else { continue };
            self.totals.timer.handled += 1;
            if f.sender.is_idle(now_ns) {
                let mut f = self.flows.remove(&id).expect("listed");
                self.timer_of.remove(&id);
                self.totals.idle_expired += 1;
                debug!(flow = id, "flow idle: forgotten");
                f.sender.release(&mut self.pool);
                if let Err(e) = self.port.remove_flow(&f.key) {
                    debug!(flow = id, error = %e, "cannot remove the flow entry");
                }
                let (session, mut ctl) = self.ctl();
                session.remove_flow(&mut ctl, id);
                continue;
            }
            if now_ns >= f.ccp_tick_at {
                // Data outstanding and no ACK for a while: evaluate the program now, and
                // again a tick later while that lasts.
                f.ccp_tick_at = if f.sender.bytes_in_flight() > 0 && f.sender.fallback().is_none() && f.ticked() {
                    now_ns.saturating_add(CCP_TICK_NS)
                } else {
                    u64::MAX
                };
                let (session, mut ctl) = self.ctl();
                session.tick_flow(&mut ctl, id, now_ns / 1000);
            }
            self.catch_up_with_port(id, now_ns);
            let Some(f) = self.flows.get_mut(&id) else { continue };
            let tick = f.sender.on_tick(now_ns, &mut self.pool);
            if let Some(reason) = tick.fell_back {
                self.fall_back(id, reason);
            } else {
                if tick.timed_out {
                    self.totals.timeouts += 1;
                }
                // Losses the timers found: the port stops folding the flow's ACKs (the hold).
                self.write(id);
                self.retransmit(id, now_ns);
            }
            self.after_change(id, now_ns);
        }
        self.due = due;
        self.return_slots();
    }

    /// Directives refused since the last line, at most one line per second: never per packet.
    fn log_refused(&mut self) {
        let (logged, at) = self.refused_logged;
        let refused = self.totals.directive_writes.refused;
        if refused > logged && at.elapsed() >= LOG_INTERVAL {
            warn!(refused = refused - logged, "directives refused: their flows had left the port's flow table, whose slot a newer flow holds");
            self.refused_logged = (refused, Instant::now());
        }
    }

    /// Flows left to the server's TCP because a resource ran out (the frame slab, the ring,
    /// a buffer budget) since the last line, at most one line per interval: never per packet.
    fn log_exhaustion(&mut self) {
        let (logged, at) = self.exhaustion_logged;
        let by = |r: &str| self.totals.fallbacks.get(r).copied().unwrap_or(0);
        let total: u64 = EXHAUSTION_REASONS.iter().map(|r| by(r.name())).sum();
        if total > logged && at.elapsed() >= LOG_INTERVAL {
            warn!(
                flows = total - logged, slab_full = by("slab_full"), ring_full = by("ring_full"),
                flow_budget = by("flow_budget"), global_budget = by("global_budget"),
                "flows left to the server's TCP for want of room (totals so far; raise --slab-slots, --ring-bytes or the buffer budgets)"
            );
            self.exhaustion_logged = (total, Instant::now());
        }
    }

    /// Record the buffer occupancy of every protected flow that changed since the last
    /// sample (an untouched flow's occupancy is its last sample's: idle flows cost nothing).
    pub fn sample(&mut self, now_ns: u64) {
        let t_s = now_ns.saturating_sub(self.started_ns) as f64 / 1e9;
        let mut ids = std::mem::take(&mut self.changed);
        ids.sort_unstable();
        ids.dedup(); // an id reused by a new flow may be listed twice
        for id in ids.drain(..) {
            let Some(f) = self.flows.get_mut(&id) else { continue };
            f.changed = false;
            let s = &f.sender;
            if s.fallback().is_some() {
                continue;
            }
            if self.samples.len() >= MAX_SAMPLES {
                self.samples_dropped += 1;
                continue;
            }
            self.samples.push(Sample { t_s, flow_id: id, segments: s.buffered_segments(), bytes: s.buffered_bytes() });
        }
        self.changed = ids;
    }

    fn totals_json(&self) -> Value {
        let t = &self.totals;
        let s = self.session.totals();
        json!({
            "flows": t.flows,
            "acks": s.acks,
            "reports": s.reports,
            "directives": s.directives,
            "agent_errors": s.agent_errors,
            "installs": s.installs,
            "change_progs": s.change_progs,
            "update_fields": s.update_fields,
            "reports_dropped": s.reports_dropped,
            "directive_writes": t.directive_writes.written,
            "directives_refused": t.directive_writes.refused,
            "segments_buffered": t.segments_buffered,
            "retransmissions": {
                "fast": t.retransmit_fast,
                "rack": t.retransmit_rack,
                "timeout": t.retransmit_timeout,
                "total": t.retransmit_fast + t.retransmit_rack + t.retransmit_timeout,
            },
            "timeouts": t.timeouts,
            "timer_entries_expired": t.timer.expired,
            "timer_entries_handled": t.timer.handled,
            "polls_ring_ready": t.polls.ring_ready,
            "polls_timed_out": t.polls.timed_out,
            "port_entry_reads": t.port_entry_reads,
            "timeouts_averted": t.timeouts_averted,
            "dsacks": t.dsacks,
            "inject_errors": t.inject_errors,
            "idle_expired": t.idle_expired,
            "fallbacks": t.fallbacks,
            "rejoins": t.rejoins,
            "buffered_bytes_now": self.pool.used(),
            "slots_held_now": t.slots_held,
            "answer_latency_us": latency_json(self.session.answer_latency()),
        })
    }

    pub fn log_totals(&self) {
        let t = &self.totals;
        let s = self.session.totals();
        let cpu = process_cpu_time();
        let fallbacks: u64 = t.fallbacks.values().sum();
        info!(
            flows = t.flows, acks = s.acks, reports = s.reports, directives = s.directives,
            agent_errors = s.agent_errors, reports_dropped = s.reports_dropped,
            directive_writes = t.directive_writes.written, directives_refused = t.directive_writes.refused,
            segments_buffered = t.segments_buffered,
            retransmit_fast = t.retransmit_fast, retransmit_rack = t.retransmit_rack,
            retransmit_timeout = t.retransmit_timeout, timeouts = t.timeouts,
            inject_errors = t.inject_errors, fallbacks, rejoins = t.rejoins, idle_expired = t.idle_expired,
            cpu_ms = cpu.as_secs_f64() * 1e3, uptime_s = self.started.elapsed().as_secs_f64(),
            "shim totals"
        );
    }

    /// The shim's part of the stats file.
    pub fn stats_json(&self) -> Value {
        let samples: Vec<Value> = self
            .samples
            .iter()
            .map(|s| json!({"t_s": s.t_s, "flow_id": s.flow_id, "segments": s.segments, "bytes": s.bytes}))
            .collect();
        let mut ids: Vec<&u32> = self.max_by_flow.keys().collect();
        ids.sort_unstable();
        let max: Vec<Value> = ids
            .into_iter()
            .map(|id| {
                let m = self.max_by_flow[id];
                json!({"flow_id": id, "segments": m.segments, "bytes": m.bytes})
            })
            .collect();
        json!({
            "shim": self.totals_json(),
            "window": self.window,
            "shim_cpu_ms": process_cpu_time().as_secs_f64() * 1e3,
            "uptime_s": self.started.elapsed().as_secs_f64(),
            "buffer": {
                "sample_interval_ms": SAMPLE_INTERVAL.as_millis() as u64,
                "samples": samples,
                "samples_dropped": self.samples_dropped,
                "max_per_flow": max,
            },
        })
    }
}

/// Report → directive latency quantiles (µs), all answers and urgent ones.
fn latency_json(lat: &AnswerLatency) -> Value {
    let q = |h: &LatencyHistogram| {
        json!({
            "count": h.count(),
            "p50": h.quantile(0.5),
            "p99": h.quantile(0.99),
            "p999": h.quantile(0.999),
        })
    };
    json!({ "all": q(&lat.all), "urgent": q(&lat.urgent) })
}

impl OvsShim<OvsDatapath> {
    pub fn run(&mut self, stop: &AtomicBool, window: &WindowSignals) -> Result<()> {
        let mut events = Vec::new();
        let mut last_recovery = Instant::now();
        let mut last_sample = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            if let Some(edge) = window.take() {
                self.on_window(edge);
            }
            let wait = if self.flows.is_empty() { RECOVERY_TICK } else { self.cfg.record_delay.min(RECOVERY_TICK) };
            self.wait_for_input(wait);
            // The agent's answers first: they never wait behind a batch of records.
            self.service_agent();
            self.port.poll(Duration::ZERO, |ev| events.push(ev))?;
            // Every record older than this has been read. Loss timers judge by it, not by the
            // time after processing: records that arrived meanwhile (an ACK that delivers the
            // segment in question) have not been seen yet, and a busy shim would otherwise
            // declare losses that are only its own backlog.
            let drained_ns = monotonic_now_ns();
            for (i, ev) in events.drain(..).enumerate() {
                self.on_event(ev);
                if (i + 1) % RECORD_CHUNK == 0 {
                    // A long batch: send its retransmissions and reports so far and apply
                    // the answers waiting.
                    self.send_retransmissions();
                    self.service_agent();
                }
            }
            // The timers' retransmissions go in the same inject run as the records': a run
            // costs a page pool's setup and teardown whatever it carries.
            if last_recovery.elapsed() >= RECOVERY_TICK {
                last_recovery = Instant::now();
                self.recovery_tick(drained_ns);
            }
            self.send_retransmissions();
            self.flush_agent();
            if last_sample.elapsed() >= SAMPLE_INTERVAL {
                last_sample = Instant::now();
                self.sample(monotonic_now_ns());
                self.log_refused();
                self.log_exhaustion();
                self.log_table_full();
            }
            self.flush_agent();
        }
        // Records still in the ring name slab slots: take them in, so that the slots the port
        // holds at exit are exactly those the shim holds (the stats file compares the two).
        self.port.poll(Duration::ZERO, |ev| events.push(ev))?;
        for ev in events.drain(..) {
            self.on_event(ev);
        }
        self.send_retransmissions();
        self.log_exhaustion();
        info!("stopping");
        Ok(())
    }

    /// New flows the full flow table refused since the last line, at most one line per
    /// interval: never per packet. A table that refused flows is also cleared of handshakes
    /// that never completed.
    fn log_table_full(&mut self) {
        let (logged, at) = self.table_full_logged;
        if at.elapsed() < LOG_INTERVAL {
            return;
        }
        let refused = self.port.stats().table_full;
        if refused > logged {
            let expired = self.port.expire_half_open(HALF_OPEN_TIMEOUT_NS, monotonic_now_ns());
            warn!(
                flows = refused - logged, total = refused, half_open_expired = expired,
                "new flows refused by the full flow table: left to the server's TCP (raise --max-flows)"
            );
            self.table_full_logged = (refused, Instant::now());
        }
    }

    /// Sleep until port records or agent messages arrive, or `timeout` passes (counted).
    fn wait_for_input(&mut self, timeout: Duration) {
        let woken = self.port.wait(self.session.agent_fd(), timeout);
        if woken.held {
            self.totals.polls.ring_ready += 1;
        } else if !woken.extra {
            self.totals.polls.timed_out += 1;
        }
    }

    /// The whole stats file: the port's counters and program run times, then the shim's.
    pub fn stats_file_json(&self) -> Value {
        let st = self.port.stats();
        let progs: Vec<Value> = self
            .port
            .prog_stats()
            .into_iter()
            .map(|p| {
                let avg = if p.run_cnt == 0 { 0.0 } else { p.run_time_ns as f64 / p.run_cnt as f64 };
                json!({"name": p.name, "id": p.id, "run_cnt": p.run_cnt, "run_time_ns": p.run_time_ns, "avg_ns": avg})
            })
            .collect();
        let mut v = self.stats_json();
        v["datapath"] = json!({
            "packets": st.packets, "malformed": st.malformed, "syns": st.syns,
            "established": st.established, "closed": st.closed, "segments": st.segments,
            "resent": st.resent, "acks": st.acks, "acks_rewritten": st.acks_rewritten,
            "dupacks_hidden": st.dupacks_hidden, "dupacks_opened": st.dupacks_opened, "sack_stripped": st.sack_stripped,
            "ece_cleared": st.ece_cleared, "out_of_window": st.out_of_window,
            "wscale_capped": st.wscale_capped, "ring_drops": st.ring_drops,
            "unbuffered": st.unbuffered, "slab_full": st.slab_full, "table_full": st.table_full,
            "acks_folded": st.acks_folded, "folded_reports": st.folded_reports, "copies_seen": st.copies_seen,
            "records_malformed": self.port.records_malformed(),
            "slab_slots": self.port.slab_slots(), "slab_in_use": self.port.slab_in_use(),
        });
        v["prog_stats"] = Value::Array(progs);
        v
    }
}


#[cfg(test)]
impl<P: PortOps> OvsShim<P> {
    fn port(&self) -> &P {
        &self.port
    }

    fn totals(&self) -> &OvsTotals {
        &self.totals
    }

    fn buffered_bytes(&self) -> u64 {
        self.pool.used()
    }
}

#[cfg(test)]
mod tests {
    //! The shim against a stand-in port and a stand-in agent on a unix stream socket: the
    //! wiring between records, the sender model, the session and the port's maps.

    use std::cell::RefCell;
    use std::io::{Read, Write};
    use std::os::unix::net::{UnixListener, UnixStream};
    use std::path::PathBuf;
    use std::sync::atomic::AtomicU32;
    use std::sync::mpsc::{channel, Receiver};

    use ccswitch_protocol::lang::{reg_type, Implicit};
    use ccswitch_protocol::wire::{self, ChangeProg, FrameReader, Msg, UpdateField, UpdateFields};
    use ccswitch_ovs::events::{AckVerdict, Established, Resent, SackBlock, Segment};

    use super::*;

    #[derive(Default)]
    struct FakePort {
        directives: RefCell<HashMap<u32, OvsDirective>>,
        cleared: RefCell<Vec<u32>>,
        valid_until: RefCell<u64>,
        removed: RefCell<Vec<FlowAddrs>>,
        injected: RefCell<Vec<FrameSlot>>,
        /// The timestamp floor of each injection, in order.
        tsval_floors: RefCell<Vec<Option<u32>>>,
        freed: RefCell<Vec<u32>>,
        /// The last ACK forwarded, by flow, as the port's flow entries would show it.
        last_acks: RefCell<HashMap<u32, Ack>>,
    }

    impl PortOps for FakePort {
        fn set_directive(&self, id: u32, c: &OvsDirective) -> Result<()> {
            self.directives.borrow_mut().insert(id, *c);
            Ok(())
        }
        fn clear_directive(&self, id: u32) -> Result<()> {
            self.directives.borrow_mut().remove(&id);
            self.cleared.borrow_mut().push(id);
            Ok(())
        }
        fn set_valid_until(&self, deadline_ns: u64) -> Result<()> {
            *self.valid_until.borrow_mut() = deadline_ns;
            Ok(())
        }
        fn remove_flow(&self, key: &FlowAddrs) -> Result<()> {
            self.removed.borrow_mut().push(*key);
            Ok(())
        }
        fn inject(&self, frame: &FrameSlot, tsval_floor: Option<u32>) -> Result<()> {
            self.injected.borrow_mut().push(*frame);
            self.tsval_floors.borrow_mut().push(tsval_floor);
            Ok(())
        }
        fn free_frames(&self, slots: &[u32]) {
            self.freed.borrow_mut().extend_from_slice(slots);
        }
        fn last_ack(&self, id: u32, _key: &FlowAddrs) -> Option<Ack> {
            self.last_acks.borrow().get(&id).cloned()
        }
        fn slab_slots(&self) -> usize {
            1 << 20
        }
    }

    struct FakeAgent {
        path: PathBuf,
        rx: Receiver<Msg>,
        out: UnixStream,
    }

    impl Drop for FakeAgent {
        fn drop(&mut self) {
            let _ = self.out.shutdown(std::net::Shutdown::Both);
            let _ = std::fs::remove_file(&self.path);
        }
    }

    impl FakeAgent {
        fn next(&self) -> Msg {
            self.rx.recv_timeout(Duration::from_secs(5)).expect("a message from the shim")
        }
        fn send(&mut self, msg: &Msg) {
            self.out.write_all(&msg.encode().unwrap()).unwrap();
        }
        fn set_cwnd(&mut self, sid: u32, cwnd: u64) {
            let update = UpdateField { reg_type: reg_type::IMPLICIT, reg_index: Implicit::Cwnd as u32, value: cwnd };
            self.send(&Msg::UpdateFields(UpdateFields { sid, updates: vec![update] }));
        }
    }

    static SEQ: AtomicU32 = AtomicU32::new(0);

    fn socket_path() -> PathBuf {
        std::env::temp_dir().join(format!("ccsw-shim-{}-{}.sock", std::process::id(), SEQ.fetch_add(1, Ordering::SeqCst)))
    }

    /// A shim connected to a fresh stand-in agent (READY already read).
    fn connected(cfg: ShimConfig) -> (OvsShim<FakePort>, FakeAgent) {
        let path = socket_path();
        let listener = UnixListener::bind(&path).unwrap();
        let mut shim = OvsShim::new(FakePort::default(), AgentAddr::Stream(path.clone()), cfg);
        shim.service_agent();
        let (stream, _) = listener.accept().unwrap();
        let mut input = stream.try_clone().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut frames = FrameReader::new();
            let mut buf = vec![0u8; 65536];
            while let Ok(n) = input.read(&mut buf) {
                if n == 0 {
                    return;
                }
                frames.push(&buf[..n]);
                while let Ok(Some(f)) = frames.next_frame() {
                    if tx.send(wire::decode(&f).unwrap().0).is_err() {
                        return;
                    }
                }
            }
        });
        let agent = FakeAgent { path, rx, out: stream };
        assert!(matches!(agent.next(), Msg::Ready(_)));
        (shim, agent)
    }

    fn cfg() -> ShimConfig {
        ShimConfig {
            recovery: RecoveryConfig::default(),
            total_buffer_bytes: 1 << 30,
            agent_timeout: Duration::from_millis(500),
            record_delay: Duration::from_millis(1),
        }
    }

    const ISN: u32 = u32::MAX - 1500;
    const MSS: u32 = 1000;

    fn key() -> FlowAddrs {
        FlowAddrs { server: "10.0.0.1:80".parse().unwrap(), client: "10.0.0.2:40000".parse().unwrap() }
    }

    fn established(id: u32) -> OvsEvent {
        OvsEvent::Established(Established {
            flow_id: id,
            ts_ns: monotonic_now_ns(),
            key: key(),
            mss: MSS as u16,
            client_wscale: 7,
            server_wscale: 7,
            sack: true,
            timestamps: true,
            server_isn: ISN,
            client_isn: 5,
        })
    }

    fn raw(n: u32) -> u32 {
        ISN.wrapping_add(1 + (n - 1) * MSS)
    }

    /// Segment n of flow `id`, in slab slot 1000·id + n.
    fn segment(id: u32, n: u32) -> OvsEvent {
        let frame = FrameSlot { index: slot(id, n), len: 54 + MSS };
        OvsEvent::Segment(Segment { flow_id: id, ts_ns: monotonic_now_ns(), seq: raw(n), len: MSS, fin: false, frame, tsval: None })
    }

    fn slot(id: u32, n: u32) -> u32 {
        1000 * id + n
    }

    /// Slots given back to the port, sorted.
    fn freed(shim: &OvsShim<FakePort>) -> Vec<u32> {
        let mut v = shim.port().freed.borrow().clone();
        v.sort_unstable();
        v
    }

    /// Acknowledges segments 1..=upto, SACKs segments a..=b.
    fn ack(id: u32, upto: u32, sack: &[(u32, u32)]) -> OvsEvent {
        OvsEvent::Ack(Ack {
            flow_id: id,
            ts_ns: monotonic_now_ns(),
            ack: raw(upto + 1),
            window_bytes: 1 << 20,
            payload_len: 0,
            ece: false,
            fin: false,
            sack: sack.iter().map(|&(a, b)| SackBlock { start: raw(a), end: raw(b + 1) }).collect(),
            verdict: AckVerdict::Hidden,
        })
    }

    /// Service the agent until `cond` holds.
    fn until(shim: &mut OvsShim<FakePort>, mut cond: impl FnMut(&OvsShim<FakePort>) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !cond(shim) {
            assert!(Instant::now() < deadline, "condition not reached");
            shim.service_agent();
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn injected_ids(shim: &OvsShim<FakePort>) -> Vec<u32> {
        shim.port().injected.borrow().iter().map(|f| f.index % 1000).collect()
    }

    #[test]
    fn a_pacing_rate_becomes_a_window_over_the_minimum_rtt() {
        let mss = 1448;
        // 3 MB/s over 50 ms is 150 kB, plus three segments of headroom.
        assert_eq!(enforced_window(1_000_000, Some(3_000_000), Some(50_000_000), mss), 150_000 + 3 * mss);
        // The agent's window is smaller: it holds.
        assert_eq!(enforced_window(100_000, Some(3_000_000), Some(50_000_000), mss), 100_000);
        // No rate, or no RTT sample yet: the window alone.
        assert_eq!(enforced_window(1_000_000, None, Some(50_000_000), mss), 1_000_000);
        assert_eq!(enforced_window(1_000_000, Some(0), Some(50_000_000), mss), 1_000_000);
        assert_eq!(enforced_window(1_000_000, Some(3_000_000), None, mss), 1_000_000);
    }

    #[test]
    fn a_controlled_flow_gets_the_agents_window_and_its_losses_retransmitted() {
        let (mut shim, mut agent) = connected(cfg());
        shim.on_event(established(3));
        shim.service_agent();
        let Msg::Create(c) = agent.next() else { panic!("expected CREATE") };
        assert_eq!((c.sid, c.init_cwnd, c.mss, c.src_port, c.dst_port), (3, 10 * MSS, MSS, 80, 40000));
        let ctl = shim.port().directives.borrow()[&3];
        assert_eq!(ctl, OvsDirective { cwnd_bytes: 10 * MSS, sacked_bytes: 0, sacked_una: raw(1), active: true, fold: None }, "held at the initial window before the agent decides");
        assert!(*shim.port().valid_until.borrow() > monotonic_now_ns());

        for n in 1..=5 {
            shim.on_event(segment(3, n));
        }
        assert_eq!(shim.buffered_bytes(), 5 * 1054);
        // Segment 2 is missing, three segments above it arrived: lost at once, and hidden from
        // the server although the agent has not spoken yet.
        shim.on_event(ack(3, 1, &[(3, 5)]));
        assert_eq!(injected_ids(&shim), vec![2]);
        let t = shim.totals();
        assert_eq!((t.retransmit_fast + t.retransmit_rack, t.retransmit_timeout), (1, 0));
        let ctl = shim.port().directives.borrow()[&3];
        assert_eq!((ctl.sacked_bytes, ctl.sacked_una, ctl.cwnd_bytes), (3 * MSS, raw(2), 10 * MSS));

        // A smaller window from the agent holds at once.
        agent.set_cwnd(3, 5_000);
        until(&mut shim, |s| s.port().directives.borrow()[&3].cwnd_bytes == 5_000);
        assert_eq!(freed(&shim), vec![slot(3, 1)], "segment 1 is acknowledged");
        shim.on_event(ack(3, 5, &[]));
        assert_eq!(shim.buffered_bytes(), 0);
        assert_eq!(freed(&shim), (1..=5).map(|n| slot(3, n)).collect::<Vec<_>>(), "every slot back once acknowledged");
        assert_eq!(shim.port().directives.borrow()[&3].sacked_bytes, 0);

        shim.on_event(OvsEvent::Closed { flow_id: 3, ts_ns: monotonic_now_ns(), reason: ccswitch_ovs::events::CloseReason::Fin });
        shim.service_agent();
        let Msg::Measure(m) = agent.next() else { panic!("expected the closing MEASURE") };
        assert_eq!((m.sid, m.fields.len()), (3, 0));
        assert!(!shim.port().directives.borrow().contains_key(&3));
    }

    #[test]
    fn a_retransmitted_copy_is_not_older_than_the_servers_own_retransmissions() {
        let (mut shim, _agent) = connected(cfg());
        shim.on_event(established(3));
        shim.service_agent();
        for n in 1..=5 {
            shim.on_event(segment(3, n));
        }
        // The server retransmits segment 1 itself (a tail-loss probe), stamped 9,000: the
        // client may echo that from now on, and would drop an older copy (PAWS).
        shim.on_event(OvsEvent::Resent(Resent { flow_id: 3, ts_ns: monotonic_now_ns(), seq: raw(1), len: MSS, tsval: Some(9_000) }));
        shim.on_event(ack(3, 1, &[(3, 5)]));
        assert_eq!(injected_ids(&shim), vec![2]);
        assert_eq!(*shim.port().tsval_floors.borrow(), vec![Some(9_000)]);
    }

    /// Flow 7 established, its agent running the standard program: the session folds it in
    /// the datapath. Returns the program's uid too.
    fn folded_flow() -> (OvsShim<FakePort>, FakeAgent, u32) {
        use ccswitch_protocol::standard;
        let (mut shim, mut agent) = connected(cfg());
        shim.on_event(established(7));
        shim.service_agent();
        agent.next();
        agent.out.write_all(standard::INSTALL_MESSAGE).unwrap();
        let (Msg::InstallExpr(install), _) = wire::decode(standard::INSTALL_MESSAGE).unwrap() else { panic!("an INSTALL_EXPR") };
        agent.send(&Msg::ChangeProg(ChangeProg { sid: 7, program_uid: install.program_uid, updates: vec![] }));
        until(&mut shim, |s| s.port().directives.borrow().get(&7).is_some_and(|d| d.fold.is_some()));
        (shim, agent, install.program_uid)
    }

    #[test]
    fn a_folded_flow_gets_its_reports_from_the_port_and_its_buffer_freed_by_them() {
        use ccswitch_protocol::standard;
        use ccswitch_ovs::events::Folded;
        let (mut shim, agent, program_uid) = folded_flow();
        let fold = shim.port().directives.borrow()[&7].fold.unwrap();
        assert!(!fold.per_ack && !fold.hold);
        for n in 1..=3 {
            shim.on_event(segment(7, n));
        }
        // The port folded two ACKs and reports: the buffer is freed up to its acknowledgement
        // number, and the report goes to the agent as the program's MEASURE.
        let mut fields = [0u64; standard::report::COUNT];
        fields[standard::report::ACKED] = 2 * u64::from(MSS);
        fields[standard::report::NOW] = fold.start_us + 10;
        shim.on_event(OvsEvent::Folded(Folded {
            flow_id: 7, ts_ns: monotonic_now_ns(), start_us: fold.start_us, ack: raw(3), window_bytes: 1 << 20,
            acks: 2, reported: true, fields,
        }));
        assert_eq!(freed(&shim), vec![slot(7, 1), slot(7, 2)]);
        // Segment 3 is outstanding, but the port makes the program's time-based reports: the
        // flow waits in the timer wheel for its retransmission timer, not for program ticks.
        assert_eq!(shim.flows[&7].ccp_tick_at, u64::MAX);
        assert!(shim.timer_of[&7].due_at >= monotonic_now_ns() + 5_000_000, "{:?}", shim.timer_of[&7]);
        shim.flush_agent();
        let Msg::Measure(m) = agent.next() else { panic!("expected the folded report") };
        assert_eq!((m.sid, m.program_uid, m.fields), (7, program_uid, fields.to_vec()));
        // Segment 3 missing, 4 SACKed: a loss to recover, so the port must send every ACK
        // up (the hold) until it is over.
        shim.on_event(segment(7, 4));
        shim.on_event(ack(7, 2, &[(4, 4)]));
        assert!(shim.port().directives.borrow()[&7].fold.unwrap().hold);
        shim.on_event(ack(7, 4, &[]));
        assert!(!shim.port().directives.borrow()[&7].fold.unwrap().hold);
        assert_eq!(shim.buffered_bytes(), 0);
    }

    /// The port programs cannot keep the ACK epoch that measures aggregation: a flow whose
    /// agent sets `Control.agg_rate` runs in the session, and is folded again once it clears.
    #[test]
    fn a_flow_that_measures_ack_aggregation_is_not_folded_by_the_port() {
        use ccswitch_protocol::standard::control;
        let (mut shim, mut agent, _) = folded_flow();
        let agg_rate = |value| UpdateField { reg_type: reg_type::NONVOLATILE_CONTROL, reg_index: control::AGG_RATE as u32, value };
        agent.send(&Msg::UpdateFields(UpdateFields { sid: 7, updates: vec![agg_rate(3_000_000)] }));
        until(&mut shim, |s| s.port().directives.borrow().get(&7).is_some_and(|d| d.fold.is_none()));
        assert!(shim.flows[&7].fold.is_none());
        agent.send(&Msg::UpdateFields(UpdateFields { sid: 7, updates: vec![agg_rate(0)] }));
        until(&mut shim, |s| s.port().directives.borrow().get(&7).is_some_and(|d| d.fold.is_some()));
    }

    /// The port folds a flow's ACKs and hands up none for a while: when the shim's
    /// retransmission timer expires, the ACK the port last forwarded (its flow entry) frees
    /// what it acknowledged instead of a timeout; only data it did not acknowledge times out.
    #[test]
    fn a_folded_flows_timer_follows_the_ports_last_ack_before_it_times_out() {
        let (mut shim, _agent, _) = folded_flow();
        for n in 1..=3 {
            shim.on_event(segment(7, n));
        }
        // The client acknowledged segments 1 and 2, folded by the port: nothing came up.
        let later = monotonic_now_ns() + 1_500_000_000; // past the initial RTO (1 s)
        let OvsEvent::Ack(mut a) = ack(7, 2, &[]) else { unreachable!() };
        a.ts_ns = later - 1_000_000;
        shim.port().last_acks.borrow_mut().insert(7, a);
        shim.recovery_tick(later);
        assert_eq!(freed(&shim), vec![slot(7, 1), slot(7, 2)]);
        assert_eq!((shim.totals().timeouts, shim.totals().timeouts_averted), (0, 1));
        assert!(shim.port().injected.borrow().is_empty(), "nothing retransmitted");
        // Segment 3 stays unacknowledged: its own timer expires, and the port has nothing newer.
        shim.recovery_tick(later + 10_000_000_000);
        assert_eq!((shim.totals().timeouts, shim.totals().timeouts_averted), (1, 1));
        assert_eq!(shim.flows[&7].sender.lost_bytes(), u64::from(MSS), "segment 3 is lost");
    }

    #[test]
    fn an_exhausted_flow_budget_falls_back_until_the_hole_is_acknowledged() {
        let mut c = cfg();
        c.recovery.flow_buffer_bytes = 3 * 1054;
        let (mut shim, mut agent) = connected(c);
        shim.on_event(established(4));
        shim.service_agent();
        agent.next();
        agent.set_cwnd(4, 20_000);
        until(&mut shim, |s| s.port().directives.borrow().contains_key(&4));
        for n in 1..=4 {
            shim.on_event(segment(4, n));
        }
        assert_eq!(shim.totals().fallbacks.get("flow_budget"), Some(&1));
        assert!(shim.port().cleared.borrow().contains(&4));
        assert!(!shim.port().directives.borrow().contains_key(&4));
        assert_eq!(shim.buffered_bytes(), 0);
        assert_eq!(freed(&shim), (1..=4).map(|n| slot(4, n)).collect::<Vec<_>>(), "the refused segment's slot and the buffer's");
        // The agent keeps the flow, and its window for when the flow rejoins.
        agent.set_cwnd(4, 30_000);
        for _ in 0..20 {
            shim.service_agent();
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(!shim.port().directives.borrow().contains_key(&4), "not while segment 4 is unacknowledged");
        // The buffer starts again after the hole; losses below it are the server's.
        shim.on_event(segment(4, 5));
        shim.on_event(ack(4, 1, &[(3, 5)]));
        assert!(shim.port().injected.borrow().is_empty());
        assert!(!shim.port().directives.borrow().contains_key(&4));
        // The hole acknowledged, every byte outstanding is buffered: control resumes at the
        // agent's window.
        shim.on_event(ack(4, 4, &[]));
        assert_eq!(shim.totals().rejoins, 1);
        assert_eq!(shim.port().directives.borrow()[&4].cwnd_bytes, 30_000);
        assert_eq!(shim.buffered_bytes(), 1054);
        assert_eq!(shim.totals().fallbacks.get("flow_budget"), Some(&1), "counted once");
    }

    #[test]
    fn a_flow_that_found_the_slab_full_rejoins_once_the_slab_frees_and_retransmits_its_own_bytes() {
        let (mut shim, mut agent) = connected(cfg());
        shim.on_event(established(20));
        shim.service_agent();
        agent.next();
        agent.set_cwnd(20, 5_000);
        until(&mut shim, |s| s.port().directives.borrow().get(&20).is_some_and(|d| d.cwnd_bytes == 5_000));
        for n in 1..=3 {
            shim.on_event(segment(20, n));
        }
        // Segment 4 found no slot: the port reports the hole up to its end.
        shim.on_event(OvsEvent::Unbuffered { flow_id: 20, ts_ns: monotonic_now_ns(), reason: ccswitch_ovs::events::UnbufferedReason::SlabFull, hole_end: raw(5) });
        assert_eq!(shim.totals().fallbacks.get("slab_full"), Some(&1));
        assert!(!shim.port().directives.borrow().contains_key(&20));
        assert_eq!(freed(&shim), (1..=3).map(|n| slot(20, n)).collect::<Vec<_>>(), "its slots go back to the slab");
        // The slab has room again: later segments are copied and kept.
        for n in 5..=9 {
            shim.on_event(segment(20, n));
        }
        assert_eq!(shim.buffered_bytes(), 5 * 1054);
        shim.on_event(ack(20, 3, &[]));
        assert!(!shim.port().directives.borrow().contains_key(&20), "segment 4 is not buffered: still the server's");
        shim.on_event(ack(20, 4, &[]));
        assert_eq!(shim.totals().rejoins, 1);
        let d = shim.port().directives.borrow()[&20];
        assert!(d.active && d.sacked_una == raw(5));
        // Segment 5 lost under control: the shim retransmits it from its own slot.
        shim.on_event(ack(20, 4, &[(6, 9)]));
        assert_eq!(*shim.port().injected.borrow(), vec![FrameSlot { index: slot(20, 5), len: 54 + MSS }]);
        shim.on_event(ack(20, 9, &[]));
        assert_eq!(shim.buffered_bytes(), 0);
        let mut all = freed(&shim);
        all.dedup();
        assert_eq!(all, [1, 2, 3, 5, 6, 7, 8, 9].iter().map(|&n| slot(20, n)).collect::<Vec<_>>(), "every slot back once");
        assert_eq!(shim.totals().slots_held, 0);
    }

    #[test]
    fn slots_of_segments_nobody_keeps_go_straight_back_and_a_closed_flow_returns_its_buffer() {
        let mut shim = OvsShim::new(FakePort::default(), AgentAddr::Stream(socket_path()), cfg());
        shim.on_event(segment(11, 1));
        assert_eq!(freed(&shim), vec![slot(11, 1)], "a flow the shim does not know");
        shim.on_event(established(12));
        for n in 1..=3 {
            shim.on_event(segment(12, n));
        }
        // Segment 2 again (the BPF side saw a higher end first): not new, not kept.
        shim.on_event(OvsEvent::Segment(Segment {
            flow_id: 12, ts_ns: monotonic_now_ns(), seq: raw(2), len: MSS, fin: false,
            frame: FrameSlot { index: 12_999, len: 54 + MSS }, tsval: None,
        }));
        assert_eq!(freed(&shim), vec![slot(11, 1), 12_999]);
        shim.on_event(OvsEvent::Unbuffered { flow_id: 12, ts_ns: monotonic_now_ns(), reason: ccswitch_ovs::events::UnbufferedReason::SlabFull, hole_end: raw(4) });
        assert_eq!(shim.totals().fallbacks.get("slab_full"), Some(&1));
        assert_eq!(freed(&shim), vec![slot(11, 1), slot(12, 1), slot(12, 2), slot(12, 3), 12_999]);
        assert_eq!(shim.buffered_bytes(), 0);
        shim.on_event(segment(12, 4));
        assert!(!freed(&shim).contains(&slot(12, 4)), "a fallen-back flow keeps buffering after its hole");
        shim.on_event(OvsEvent::Closed { flow_id: 12, ts_ns: monotonic_now_ns(), reason: ccswitch_ovs::events::CloseReason::Fin });
        assert!(freed(&shim).contains(&slot(12, 4)));
        assert_eq!(shim.totals().slots_held, 0, "every slot received went back");
    }

    #[test]
    fn without_an_agent_losses_are_left_to_the_server() {
        let mut shim = OvsShim::new(FakePort::default(), AgentAddr::Stream(socket_path()), cfg());
        shim.service_agent();
        shim.on_event(established(5));
        for n in 1..=5 {
            shim.on_event(segment(5, n));
        }
        shim.on_event(ack(5, 1, &[(3, 5)]));
        shim.recovery_tick(monotonic_now_ns());
        assert!(shim.port().injected.borrow().is_empty());
        assert!(shim.port().directives.borrow().is_empty());
        // Still tracked: the buffer follows the ACKs.
        assert_eq!(shim.buffered_bytes(), 4 * 1054);
    }

    #[test]
    fn an_idle_flow_is_forgotten() {
        let mut c = cfg();
        c.recovery.idle_timeout_ns = 1_000_000_000;
        let mut shim = OvsShim::new(FakePort::default(), AgentAddr::Stream(socket_path()), c);
        shim.on_event(established(6));
        shim.on_event(segment(6, 1));
        shim.recovery_tick(monotonic_now_ns());
        assert!(shim.port().removed.borrow().is_empty());
        shim.recovery_tick(monotonic_now_ns() + 2_000_000_000);
        assert_eq!(*shim.port().removed.borrow(), vec![key()]);
        assert_eq!(shim.buffered_bytes(), 0);
        assert_eq!(freed(&shim), vec![slot(6, 1)]);
        assert_eq!(shim.totals().idle_expired, 1);
    }

    #[test]
    fn only_flows_that_changed_are_sampled_and_a_flow_with_nothing_outstanding_leaves_the_wheel() {
        let mut shim = OvsShim::new(FakePort::default(), AgentAddr::Stream(socket_path()), cfg());
        for id in [8, 9] {
            shim.on_event(established(id));
            shim.on_event(segment(id, 1));
        }
        shim.sample(monotonic_now_ns());
        let flows = |shim: &OvsShim<FakePort>, from: usize| -> Vec<u32> { shim.samples[from..].iter().map(|s| s.flow_id).collect() };
        assert_eq!(flows(&shim, 0), vec![8, 9]);
        shim.on_event(ack(8, 1, &[]));
        shim.sample(monotonic_now_ns());
        assert_eq!(flows(&shim, 2), vec![8], "flow 9 did not change");
        assert_eq!(shim.samples[2].segments, 0);
        shim.sample(monotonic_now_ns());
        assert_eq!(shim.samples.len(), 3, "nothing changed");
        // Flow 8 has nothing outstanding: past its RTO only flow 9's timer fires, and flow 8
        // waits for its idle deadline alone.
        shim.recovery_tick(monotonic_now_ns() + 1_500_000_000);
        assert_eq!(shim.totals().timeouts, 1);
        let waiting: Vec<u64> = [8, 9].iter().map(|id| shim.timer_of[id].waits_at).collect();
        assert!(waiting[0] > monotonic_now_ns() + 100_000_000_000, "flow 8 waits for its idle expiry: {waiting:?}");
    }
}
