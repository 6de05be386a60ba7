//! The datapath-independent half of a shim: the agent connection, the program table, each
//! flow's CCP [`CcpFlow`], and the agent deadline. Both datapaths (the kernel's struct_ops CC and
//! the ovs one at the bridge port) drive a [`Session`] from their event loops and implement
//! [`SessionDatapath`] for the three things only they can do: write a flow's directive, clear
//! it, and move the deadline after which the datapath ignores every directive.
//!
//! Agent liveness is that one deadline: while the agent is connected and has answered every
//! report within the timeout, the session keeps pushing it forward; otherwise it stops, and
//! once it lapses every flow falls back (the kernel runs its in-kernel algorithm, the ovs
//! passes everything unchanged). A lost connection drops the deadline at once and clears all
//! directives, so a returning agent never inherits stale windows; on reconnection the session
//! announces itself (READY) and every live flow (CREATE with its current window), so the new
//! agent takes all flows over.

use std::collections::{HashSet, VecDeque};
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use anyhow::Result;
use tracing::{debug, error, info, warn};

use crate::agent_link::{AgentAddr, AgentLink, FromAgent};
use ccswitch_protocol::lang::{reg_type, INFINITY};
use ccswitch_protocol::sid_table::SidTable;
use ccswitch_protocol::standard::report;
use ccswitch_protocol::wire::{Create, Measure, Msg, Ready};

use crate::program::{Program, RegisterSnapshot};
use crate::latency::LatencyHistogram;
use crate::program::fold::{self, FoldMode};
use crate::{CcpFlow, Primitives, ProgramTable, Step};

const RECONNECT_INTERVAL: Duration = Duration::from_millis(200);
/// The deadline is rewritten at most this often (one map update per period, not per ACK).
const DEADLINE_REFRESH: Duration = Duration::from_millis(20);
/// Requests of one flow the agent has not answered that are kept for timing; past it the
/// oldest is dropped and counted ([`AnswerLatency::untimed`]).
const MAX_AWAITING: usize = 256;

/// CLOCK_MONOTONIC now, nanoseconds: the clock of `bpf_ktime_get_ns`, hence of BPF record
/// timestamps and of the deadlines given to [`SessionDatapath::set_valid_until`].
pub fn monotonic_now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// What a datapath must do for the session.
pub trait SessionDatapath {
    /// Enforce `cwnd_bytes` (and a pacing rate, where the program set one and the datapath
    /// can pace) on flow `sid` from now on.
    fn set_directive(&mut self, sid: u32, cwnd_bytes: u32, rate_bytes_per_s: Option<u64>) -> Result<()>;
    /// Stop enforcing anything on `sid` (it may not have a directive).
    fn clear_directive(&mut self, sid: u32) -> Result<()>;
    /// The datapath ignores every directive once CLOCK_MONOTONIC passes `deadline_ns`;
    /// 0 revokes at once.
    fn set_valid_until(&mut self, deadline_ns: u64) -> Result<()>;
    /// Fold flow `sid`'s standard program in the datapath (`Some((mode, start_us))`, a new
    /// `start_us` restarting it) and deliver only its reports through
    /// [`Session::on_folded_report`], or stop (`None`) and deliver every ACK again. Returns
    /// whether the datapath folds; one that cannot keeps the default.
    fn set_fold(&mut self, _sid: u32, _fold: Option<(FoldMode, u64)>) -> Result<bool> {
        Ok(false)
    }
    /// Run flow `sid`'s program (any but the standard one) in the datapath from the given
    /// registers on (`Some`), delivering only its reports through [`Session::on_program_report`],
    /// or stop (`None`) and deliver every ACK again. Returns whether the datapath runs it; one
    /// that cannot (the program does not fit, no room) says why in its log and keeps the
    /// default, the session's interpreter.
    fn run_program(&mut self, _sid: u32, _run: Option<ProgramRun<'_>>) -> Result<bool> {
        Ok(false)
    }
    /// The agent set control registers (index, value) of a program the datapath runs.
    fn set_program_controls(&mut self, _sid: u32, _updates: &[(usize, u64)]) -> Result<()> {
        Ok(())
    }
    /// The agent set the window and/or the rate of a program the datapath runs: each part
    /// given applies once, then the program owns it again.
    fn set_program_window(&mut self, _sid: u32, _cwnd_bytes: Option<u32>, _rate: Option<u64>) -> Result<()> {
        Ok(())
    }
}

/// A program handed to the datapath mid-flow: the state the session's interpreter reached
/// (defaults, the agent's updates, `Micros`'s origin), which the datapath continues from.
pub struct ProgramRun<'a> {
    pub program: &'a Program,
    pub registers: RegisterSnapshot,
    /// When the program (re)started (µs, CLOCK_MONOTONIC): reports of an earlier start are stale.
    pub start_us: u64,
}

/// A flow as the agent learns it (CREATE).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowDesc {
    pub sid: u32,
    /// The sender (the end whose congestion control the agent runs).
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub mss: u32,
    pub init_cwnd_bytes: u32,
    /// The sender's least RTT when its congestion control began (the handshake's sample),
    /// µs, from a datapath in the sender's kernel; 0 if unknown. Appended to the flow's
    /// folded reports ([`report::SENDER_HANDSHAKE_RTT`]).
    pub handshake_rtt_us: u32,
}

/// One ACK's measurements as the datapath computed them.
#[derive(Debug, Clone, Copy, Default)]
pub struct AckInput {
    /// Everything but `rtt_sample_us`, which the session fills in.
    pub prims: Primitives,
    /// This ACK's RTT sample, if it had one.
    pub rtt_sample_us: Option<u64>,
    /// Stand-in until the first sample (e.g. the kernel's srtt); 0 if unknown.
    pub srtt_us: u64,
    /// The window the datapath uses now, when it may differ from the agent's (a kernel
    /// fallback changed it); `None` when the datapath only ever uses the agent's window.
    pub datapath_cwnd_bytes: Option<u32>,
}

struct SessionFlow {
    ccp: CcpFlow,
    /// What a CREATE says of it besides its window (the sid and MSS are `ccp`'s).
    endpoints: WireEndpoints,
    /// Latest RTT sample: libccp programs read 0 as "no sample" (infinite), so the last real
    /// sample is carried over ACKs that have none.
    rtt_us: u64,
    /// [`FlowDesc::handshake_rtt_us`].
    handshake_rtt_us: u32,
    /// The datapath folds the flow's standard program: its mode and start (µs).
    fold: Option<(FoldMode, u64)>,
    /// The datapath runs the flow's (other) program: since when (µs).
    program_run: Option<u64>,
    /// What the agent has not answered yet, oldest first. The agent answers a CREATE and each
    /// report with one message for the flow, in order, so the next answer belongs to the front.
    awaiting: AwaitQueue,
}

/// A flow's unanswered requests, oldest first: the oldest in place, any later ones in a queue
/// allocated while there are any (at steady state most flows await nothing, and 100k flows
/// must fit their memory budget, which a queue's 32 bytes in place would break). A flow
/// nearly always awaits one answer at a time, so a report allocates nothing: with the queue
/// alone each report allocated it afresh, on memory gone cold at 10k flows (3% of the shim's
/// samples through the delay shell).
#[derive(Debug, Default)]
struct AwaitQueue {
    oldest: Option<Awaiting>,
    later: Option<Box<VecDeque<Awaiting>>>,
}

impl AwaitQueue {
    fn len(&self) -> usize {
        usize::from(self.oldest.is_some()) + self.later.as_ref().map_or(0, |l| l.len())
    }

    fn push_back(&mut self, a: Awaiting) {
        if self.oldest.is_none() {
            self.oldest = Some(a);
        } else {
            self.later.get_or_insert_default().push_back(a);
        }
    }

    fn pop_front(&mut self) -> Option<Awaiting> {
        let front = self.oldest.take();
        if let Some(later) = &mut self.later {
            self.oldest = later.pop_front();
            if later.is_empty() {
                self.later = None;
            }
        }
        front
    }

    fn iter(&self) -> impl Iterator<Item = &Awaiting> {
        self.oldest.iter().chain(self.later.iter().flat_map(|l| l.iter()))
    }

    /// Newest first.
    fn iter_mut_newest_first(&mut self) -> impl Iterator<Item = &mut Awaiting> {
        self.later.iter_mut().flat_map(|l| l.iter_mut().rev()).chain(self.oldest.iter_mut())
    }

    fn take_all(&mut self) -> impl Iterator<Item = Awaiting> {
        let AwaitQueue { oldest, later } = std::mem::take(self);
        oldest.into_iter().chain(later.into_iter().flat_map(|l| *l))
    }
}

/// A flow's addresses as CCP's CREATE carries them: IPv4 only, an IPv6 address is 0.
#[derive(Clone, Copy, Debug)]
struct WireEndpoints {
    src_ip: u32,
    dst_ip: u32,
    src_port: u16,
    dst_port: u16,
}

impl WireEndpoints {
    fn of(desc: &FlowDesc) -> Self {
        Self { src_ip: ipv4_u32(&desc.src), dst_ip: ipv4_u32(&desc.dst), src_port: desc.src.port(), dst_port: desc.dst.port() }
    }
}

/// A request of a flow the agent has yet to answer.
#[derive(Debug, Clone, Copy)]
enum Awaiting {
    /// Its CREATE (answered with the flow's program, not timed).
    Create,
    /// A report: when its ACK was processed (µs, CLOCK_MONOTONIC) and whether it was urgent
    /// (loss or timeout); for urgent ones, when the shim read it and when it left for the
    /// agent (0: not yet), the hops of [`AnswerLatency`].
    Report { at_us: u64, urgent: bool, read_us: u64, sent_us: u64 },
}

impl Awaiting {
    fn report(at_us: u64, urgent: bool) -> Self {
        let read_us = if urgent { monotonic_now_ns() / 1000 } else { 0 };
        Awaiting::Report { at_us, urgent, read_us, sent_us: 0 }
    }

    fn is_report(&self) -> bool {
        matches!(self, Awaiting::Report { .. })
    }

    fn is_urgent(&self) -> bool {
        matches!(self, Awaiting::Report { urgent: true, .. })
    }
}

impl SessionFlow {
    fn await_answer(&mut self, what: Awaiting, latency: &mut AnswerLatency) {
        if self.awaiting.len() >= MAX_AWAITING {
            if let Some(old) = self.awaiting.pop_front() {
                latency.forget(&old);
            }
        }
        if what.is_urgent() {
            latency.urgent_unanswered += 1;
        }
        self.awaiting.push_back(what);
    }

    /// A report leaves for the agent: timed when the agent answers it; an urgent one is also
    /// timed when it is sent (at the next flush).
    fn await_report(&mut self, at_us: u64, urgent: bool, latency: &mut AnswerLatency, unsent_urgent: &mut Vec<u32>) {
        self.await_answer(Awaiting::report(at_us, urgent), latency);
        if urgent {
            unsent_urgent.push(self.ccp.sid());
        }
    }

    /// The agent will not answer what the flow awaits (it went away, or the flow did).
    fn forget_awaited(&mut self, latency: &mut AnswerLatency) {
        for a in self.awaiting.take_all() {
            latency.forget(&a);
        }
    }

    /// The agent's answer to the oldest request, if the flow awaits one.
    fn take_answered(&mut self) -> Option<Awaiting> {
        self.awaiting.pop_front()
    }
}

/// Report → directive latencies since the measurement window began: every answered report,
/// and the urgent ones, and the urgent ones by hop: report → read by the shim
/// (`urgent_read`), read → sent to the agent (`urgent_queued`), sent → answer read
/// (`urgent_agent`: both wake-ups of the round trip and the agent's work). Every report is
/// timed: each flow keeps a queue of the reports the agent has not answered.
#[derive(Clone, Debug, Default)]
pub struct AnswerLatency {
    pub all: LatencyHistogram,
    pub urgent: LatencyHistogram,
    pub urgent_read: LatencyHistogram,
    pub urgent_queued: LatencyHistogram,
    pub urgent_agent: LatencyHistogram,
    /// Reports never timed: dropped from a flow's full queue, or still unanswered when their
    /// flow closed or the agent went away.
    pub untimed: u64,
    /// Urgent reports the agent has yet to answer (not a window figure: kept across windows).
    urgent_unanswered: usize,
}

impl AnswerLatency {
    /// An awaited answer that will not come.
    fn forget(&mut self, a: &Awaiting) {
        if a.is_report() {
            self.untimed += 1;
        }
        if a.is_urgent() {
            self.urgent_unanswered -= 1;
        }
    }

    /// The agent answered `a` at `now_us`.
    fn answered(&mut self, a: &Awaiting, now_us: u64) {
        let Awaiting::Report { at_us, urgent, read_us, sent_us } = *a else { return };
        let us = now_us.saturating_sub(at_us);
        self.all.record(us);
        if urgent {
            self.urgent_unanswered -= 1;
            self.urgent.record(us);
            self.urgent_read.record(read_us.saturating_sub(at_us));
            if sent_us > 0 {
                self.urgent_queued.record(sent_us.saturating_sub(read_us));
                self.urgent_agent.record(now_us.saturating_sub(sent_us));
            }
        }
    }
}

/// Counters for the shim's exit log.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SessionTotals {
    pub acks: u64,
    pub reports: u64,
    pub directives: u64,
    pub agent_errors: u64,
    /// Messages from the agent, by type.
    pub installs: u64,
    pub change_progs: u64,
    pub update_fields: u64,
    /// Reports skipped because the agent's datagram queue stayed full (links closed so far).
    pub reports_dropped: u64,
}

pub struct Session {
    agent_addr: AgentAddr,
    timeout: Duration,
    agent: Option<AgentLink>,
    programs: ProgramTable,
    /// Boxed: a slot then costs a pointer, not a flow (131,072 slots for 100k flows).
    flows: SidTable<SessionFlow>,
    /// The flows the timer evaluates: those the datapath does not fold (a folded flow costs
    /// the timer nothing).
    ticked: HashSet<u32>,
    /// The first report the agent has not answered yet.
    unanswered_since: Option<Instant>,
    agent_healthy: bool,
    last_reconnect: Option<Instant>,
    last_refresh: Option<Instant>,
    /// The deadline last written (0: revoked or never set).
    valid_until_ns: u64,
    totals: SessionTotals,
    /// What the agent sent, between its receipt and its handling (kept for its allocation).
    inbox: Vec<FromAgent>,
    /// The fields of the last report sent, kept for their allocation (a folded report's are
    /// copied in: each report allocated them afresh, on memory gone cold at 10k flows).
    report_fields: Vec<u64>,
    latency: AnswerLatency,
    /// Flows with urgent reports queued and not yet sent (to time their sending).
    unsent_urgent: Vec<u32>,
}

impl Session {
    pub fn new(agent_addr: AgentAddr, timeout: Duration) -> Self {
        Self {
            agent_addr,
            timeout,
            agent: None,
            programs: ProgramTable::new(),
            flows: SidTable::new(),
            ticked: HashSet::new(),
            unanswered_since: None,
            agent_healthy: false,
            last_reconnect: None,
            last_refresh: None,
            valid_until_ns: 0,
            totals: SessionTotals::default(),
            inbox: Vec::new(),
            report_fields: Vec::new(),
            latency: AnswerLatency::default(),
            unsent_urgent: Vec::new(),
        }
    }

    /// Readable when the agent has sent something (poll it beside the datapath's fd, then
    /// call [`drain_agent`](Self::drain_agent)). `None` without an agent, and with an agent
    /// in this process, whose answers [`flush`](Self::flush) applies before it returns.
    pub fn agent_fd(&self) -> Option<RawFd> {
        self.agent.as_ref().and_then(AgentLink::fd)
    }

    pub fn connected(&self) -> bool {
        self.agent.is_some()
    }

    /// The agent is in this process: a [`flush`](Self::flush) costs a call, not a syscall
    /// and two wake-ups, and returns with the answers applied.
    pub fn agent_in_process(&self) -> bool {
        self.agent.as_ref().is_some_and(|link| link.fd().is_none())
    }

    /// Connected and answering (as of the last [`refresh_deadline`](Self::refresh_deadline)).
    pub fn agent_healthy(&self) -> bool {
        self.agent_healthy
    }

    /// The deadline last given to the datapath (CLOCK_MONOTONIC ns; 0 = revoked): until then
    /// the datapath enforces directives.
    pub fn valid_until_ns(&self) -> u64 {
        self.valid_until_ns
    }

    pub fn totals(&self) -> SessionTotals {
        let mut t = self.totals;
        t.reports_dropped += self.agent.as_ref().map_or(0, |l| l.dropped_reports());
        t
    }

    /// How long the agent took to answer reports, from the reporting ACK to its answer's
    /// arrival (the first answer after each report).
    pub fn answer_latency(&self) -> &AnswerLatency {
        &self.latency
    }

    /// Begin a measurement window: latencies from now on only (a report sent before and
    /// answered after is timed, as it is answered in the window).
    pub fn start_measurement_window(&mut self) {
        self.latency = AnswerLatency { urgent_unanswered: self.latency.urgent_unanswered, ..AnswerLatency::default() };
        info!(flows = self.flows.len(), "measurement window started");
    }

    /// Requests of all flows the agent has not answered yet.
    pub fn reports_awaiting_answer(&self) -> usize {
        self.flows.values().map(|f| f.awaiting.iter().filter(|a| a.is_report()).count()).sum()
    }

    /// Urgent reports sent (or queued) that the agent has not answered yet.
    pub fn urgent_unanswered(&self) -> usize {
        self.latency.urgent_unanswered
    }

    pub fn flow_count(&self) -> usize {
        self.flows.len()
    }

    /// Flows the timer must evaluate ([`tick`](Self::tick)): those the datapath neither folds
    /// nor runs the program of.
    pub fn ticked_flows(&self) -> usize {
        self.ticked.len()
    }

    /// When the session next has timer work ([`maybe_connect`](Self::maybe_connect) or
    /// [`refresh_deadline`](Self::refresh_deadline)); `None` while it has none (the agent is
    /// silent: the deadline lapses by itself).
    pub fn next_timer(&self) -> Option<Instant> {
        match (&self.agent, self.last_reconnect, self.last_refresh) {
            (None, Some(at), _) => Some(at + RECONNECT_INTERVAL),
            (None, None, _) => Some(Instant::now()),
            (Some(_), _, Some(at)) if self.unanswered_since.is_none_or(|t| t.elapsed() < self.timeout) => {
                Some(at + DEADLINE_REFRESH)
            }
            (Some(_), _, None) => Some(Instant::now()),
            (Some(_), _, Some(_)) => None,
        }
    }

    /// The window flow `sid` commands now.
    pub fn cwnd_bytes(&self, sid: u32) -> Option<u32> {
        self.flows.get(sid).map(|f| f.ccp.cwnd_bytes())
    }

    // --- agent connection -------------------------------------------------------------

    /// Connect if disconnected (at most every 200 ms), announcing READY and every flow.
    pub fn maybe_connect(&mut self, dp: &mut impl SessionDatapath) {
        if self.agent.is_some()
            || self.last_reconnect.is_some_and(|t| t.elapsed() < RECONNECT_INTERVAL)
        {
            return;
        }
        self.last_reconnect = Some(Instant::now());
        let Ok(link) = AgentLink::connect(&self.agent_addr) else { return };
        info!(
            socket = %self.agent_addr.agent_path().display(), flows = self.flows.len(),
            "connected to the agent"
        );
        self.attach(dp, link);
    }

    /// Take the agent over `link` (connected by the caller): announce READY and every flow.
    pub fn attach(&mut self, dp: &mut impl SessionDatapath, link: AgentLink) {
        self.agent = Some(link);
        self.unanswered_since = None;
        self.send(dp, &Msg::Ready(Ready { id: std::process::id() }));
        let mut ids: Vec<u32> = self.flows.sids().collect();
        ids.sort_unstable();
        for id in ids {
            // The new agent starts the flow afresh from the window the datapath has now.
            let flow = self.flows.get_mut(id).expect("listed");
            let cwnd = flow.ccp.cwnd_bytes();
            flow.ccp = CcpFlow::new(id, cwnd, flow.ccp.mss());
            flow.fold = None;
            flow.program_run = None;
            flow.forget_awaited(&mut self.latency);
            flow.await_answer(Awaiting::Create, &mut self.latency);
            self.ticked.insert(id);
            let create = create_msg(id, &flow.endpoints, cwnd, flow.ccp.mss());
            self.send(dp, &create);
        }
        self.flush(dp);
    }

    fn disconnect(&mut self, dp: &mut impl SessionDatapath, reason: &str) {
        if let Some(link) = self.agent.take() {
            self.totals.reports_dropped += link.dropped_reports();
        }
        warn!(reason, flows = self.flows.len(), "agent lost: flows fall back");
        self.programs = ProgramTable::new();
        self.agent_healthy = false;
        self.unanswered_since = None;
        self.valid_until_ns = 0;
        if let Err(e) = dp.set_valid_until(0) {
            error!(error = %e, "cannot revoke the agent deadline");
        }
        for (id, flow) in self.flows.iter_mut() {
            // Clearing the directive ends a fold or a program run too.
            flow.fold = None;
            flow.program_run = None;
            flow.forget_awaited(&mut self.latency);
            self.ticked.insert(id);
            let _ = dp.clear_directive(id);
        }
    }

    /// Queue `msg` for the next [`flush`](Self::flush).
    fn send(&mut self, dp: &mut impl SessionDatapath, msg: &Msg) {
        let Some(link) = self.agent.as_mut() else { return };
        if let Err(e) = link.queue(msg) {
            self.disconnect(dp, &format!("send failed: {e}"));
        }
    }

    /// Send every message queued since the last flush, in one write. Shims call it after
    /// each batch of datapath events and each tick. An agent in this process answers before
    /// the send returns: its answers are applied here, at once.
    pub fn flush(&mut self, dp: &mut impl SessionDatapath) {
        let Some(link) = self.agent.as_mut() else { return };
        // Urgent reports leave now: an agent in this process answers within the send, so
        // "sent" is stamped before it, and "sent → answered" is the agent's own work.
        let sent_us = if self.unsent_urgent.is_empty() { 0 } else { monotonic_now_ns() / 1000 };
        if let Err(e) = link.flush() {
            return self.disconnect(dp, &format!("send failed: {e}"));
        }
        let answered = link.answers_waiting();
        self.stamp_sent_urgent(sent_us);
        if answered {
            self.drain_agent(dp);
        }
    }

    /// Urgent reports queued before the flush at `sent_us` left for the agent then.
    fn stamp_sent_urgent(&mut self, now_us: u64) {
        for sid in self.unsent_urgent.drain(..) {
            let Some(flow) = self.flows.get_mut(sid) else { continue };
            for a in flow.awaiting.iter_mut_newest_first() {
                match a {
                    Awaiting::Report { urgent: true, sent_us: sent @ 0, .. } => *sent = now_us,
                    Awaiting::Report { sent_us, .. } if *sent_us > 0 => break,
                    _ => {}
                }
            }
        }
    }

    /// Apply every message the agent has sent (read without waiting), then send what they
    /// caused.
    pub fn drain_agent(&mut self, dp: &mut impl SessionDatapath) {
        let Some(link) = self.agent.as_mut() else { return };
        let mut inbox = std::mem::take(&mut self.inbox);
        link.receive(&mut inbox);
        for item in inbox.drain(..) {
            if self.agent.is_none() {
                break;
            }
            match item {
                FromAgent::Msg(msg) => {
                    self.unanswered_since = None;
                    self.on_agent_message(dp, msg);
                }
                FromAgent::Malformed(e) => {
                    self.totals.agent_errors += 1;
                    error!(error = %e, "rejected a malformed message from the agent");
                }
                FromAgent::Closed(reason) => self.disconnect(dp, &reason),
            }
        }
        self.inbox = inbox;
        self.flush(dp);
    }

    fn on_agent_message(&mut self, dp: &mut impl SessionDatapath, msg: Msg) {
        let now_us = monotonic_now_ns() / 1000;
        match &msg {
            Msg::InstallExpr(_) => self.totals.installs += 1,
            Msg::ChangeProg(_) => self.totals.change_progs += 1,
            Msg::UpdateFields(_) => self.totals.update_fields += 1,
            _ => {}
        }
        match &msg {
            Msg::InstallExpr(install) => match self.programs.install_msg(install) {
                Ok(uid) => debug!(program = uid, "program installed"),
                Err(e) => {
                    self.totals.agent_errors += 1;
                    error!(program = install.program_uid, error = %e, "rejected a program");
                }
            },
            Msg::UpdateFields(_) | Msg::ChangeProg(_) => {
                let sid = msg.sid();
                let Some(flow) = self.flows.get_mut(sid) else {
                    return debug!(sid, "message for a flow that is gone");
                };
                if let Some(a) = flow.take_answered() {
                    self.latency.answered(&a, now_us);
                }
                match flow.ccp.handle(&msg, &self.programs, now_us) {
                    Ok(step) => {
                        // The datapath takes the program first, so that a window the message
                        // set reaches the program the datapath now runs.
                        let restarted = matches!(msg, Msg::ChangeProg(_));
                        self.sync_fold(dp, sid, restarted, now_us);
                        self.sync_program_run(dp, sid, restarted, &msg, now_us);
                        self.apply(dp, sid, step);
                    }
                    Err(e) => {
                        self.totals.agent_errors += 1;
                        error!(sid, error = %e, "rejected an agent message");
                    }
                }
            }
            other => {
                self.totals.agent_errors += 1;
                warn!(msg = ?other.msg_type(), "unexpected message from the agent");
            }
        }
    }

    /// Keep the deadline ahead of now while the agent is connected and answering.
    pub fn refresh_deadline(&mut self, dp: &mut impl SessionDatapath) {
        let healthy = self.agent.is_some()
            && self.unanswered_since.is_none_or(|t| t.elapsed() < self.timeout);
        if healthy != self.agent_healthy {
            if healthy {
                info!("agent answering: flows under its control");
            } else if self.agent.is_some() {
                warn!(timeout_ms = self.timeout.as_millis() as u64, "agent silent: flows fall back");
            }
            self.agent_healthy = healthy;
        }
        if !healthy || self.last_refresh.is_some_and(|t| t.elapsed() < DEADLINE_REFRESH) {
            return;
        }
        self.last_refresh = Some(Instant::now());
        let deadline = monotonic_now_ns() + self.timeout.as_nanos() as u64;
        match dp.set_valid_until(deadline) {
            Ok(()) => self.valid_until_ns = deadline,
            Err(e) => error!(error = %e, "cannot extend the agent deadline"),
        }
    }

    // --- flows ------------------------------------------------------------------------

    /// A new flow: announce it to the agent (if connected).
    pub fn add_flow(&mut self, dp: &mut impl SessionDatapath, desc: FlowDesc) {
        let endpoints = WireEndpoints::of(&desc);
        let create = create_msg(desc.sid, &endpoints, desc.init_cwnd_bytes, desc.mss);
        let ccp = CcpFlow::new(desc.sid, desc.init_cwnd_bytes, desc.mss);
        self.ticked.insert(desc.sid);
        let mut flow = SessionFlow {
            ccp,
            endpoints,
            rtt_us: 0,
            handshake_rtt_us: desc.handshake_rtt_us,
            fold: None,
            program_run: None,
            awaiting: AwaitQueue::default(),
        };
        if self.agent.is_some() {
            flow.await_answer(Awaiting::Create, &mut self.latency);
        }
        self.flows.insert(desc.sid, Box::new(flow));
        self.send(dp, &create);
    }

    /// The flow is gone (or leaves CCP for good): tell the agent and clear its directive.
    pub fn remove_flow(&mut self, dp: &mut impl SessionDatapath, sid: u32) {
        self.ticked.remove(&sid);
        if let Some(mut flow) = self.flows.remove(sid) {
            flow.forget_awaited(&mut self.latency);
            debug!(flow = sid, "flow closed");
            // libccp signals a closed flow with a MEASURE of no fields.
            let close = Msg::Measure(Measure { sid, program_uid: 0, fields: vec![] });
            self.send(dp, &close);
        }
        let _ = dp.clear_directive(sid);
    }

    /// Run flow `sid`'s program for one ACK and carry out the result.
    pub fn on_ack(&mut self, dp: &mut impl SessionDatapath, sid: u32, input: AckInput) {
        self.totals.acks += 1;
        let Some(flow) = self.flows.get_mut(sid) else { return };
        if let Some(rtt) = input.rtt_sample_us {
            flow.rtt_us = rtt;
        } else if flow.rtt_us == 0 {
            flow.rtt_us = input.srtt_us;
        }
        let prims = Primitives { rtt_sample_us: flow.rtt_us, ..input.prims };
        if let Some(cwnd) = input.datapath_cwnd_bytes {
            // The datapath's window is the truth (it may come from a fallback), as libccp
            // reads snd_cwnd into Cwnd before each evaluation.
            let rate = flow.ccp.rate_bytes_per_s();
            flow.ccp.sync_datapath(cwnd, rate);
        }
        let step = flow.ccp.on_ack(&prims, prims.now);
        if step.report.is_some() && self.agent.is_some() {
            let urgent = prims.lost_pkts_sample > 0 || prims.was_timeout;
            flow.await_report(prims.now, urgent, &mut self.latency, &mut self.unsent_urgent);
        }
        self.apply(dp, sid, step);
    }

    /// Timer-driven evaluation of every flow the datapath does not fold (for flows whose ACKs
    /// stopped).
    pub fn tick(&mut self, dp: &mut impl SessionDatapath, now_us: u64) {
        let ids: Vec<u32> = self.ticked.iter().copied().collect();
        for id in ids {
            self.tick_flow(dp, id, now_us);
        }
    }

    /// Timer-driven evaluation of flow `sid` alone, if the datapath does not fold it: for a
    /// shim that keeps its own per-flow deadlines rather than ticking every flow.
    pub fn tick_flow(&mut self, dp: &mut impl SessionDatapath, sid: u32, now_us: u64) {
        if !self.ticked.contains(&sid) {
            return;
        }
        let step = self.flows.get_mut(sid).expect("ticked flows are listed").ccp.on_tick(now_us);
        self.apply(dp, sid, step);
    }

    /// Start, change or stop folding `sid` in the datapath after an agent message changed its
    /// program (`restarted`: at `now_us`, when its registers reset) or its control registers.
    fn sync_fold(&mut self, dp: &mut impl SessionDatapath, sid: u32, restarted: bool, now_us: u64) {
        let Some(flow) = self.flows.get_mut(sid) else { return };
        // The datapath knows a restart only by a new start time, so two restarts within one
        // µs (two CHANGE_PROGs in one batch of agent messages) must not share it.
        let want = fold::fold_mode(&flow.ccp).map(|mode| match flow.fold {
            Some((_, start_us)) if !restarted => (mode, start_us),
            Some((_, start_us)) if start_us >= now_us => (mode, start_us + 1),
            _ => (mode, now_us),
        });
        if want == flow.fold {
            return;
        }
        match dp.set_fold(sid, want) {
            Ok(folds) => flow.fold = want.filter(|_| folds),
            Err(e) => {
                error!(sid, error = %e, "cannot change the fold: the flow's ACKs stay in user space");
                flow.fold = None;
                let _ = dp.set_fold(sid, None);
            }
        }
        if flow.fold.is_some() {
            self.ticked.remove(&sid);
        } else {
            self.ticked.insert(sid);
        }
    }

    /// Start, restart or stop running `sid`'s program in the datapath after an agent message
    /// (`restarted`: a CHANGE_PROG at `now_us`; `msg`: the message, whose control registers a
    /// running program gets). A standard program is folded instead (`sync_fold`).
    fn sync_program_run(
        &mut self,
        dp: &mut impl SessionDatapath,
        sid: u32,
        restarted: bool,
        msg: &Msg,
        now_us: u64,
    ) {
        let Some(flow) = self.flows.get_mut(sid) else { return };
        let wanted = flow.fold.is_none() && flow.ccp.program().is_some_and(|p| !fold::is_standard(p));
        if !wanted {
            if flow.program_run.take().is_some() {
                if let Err(e) = dp.run_program(sid, None) {
                    error!(sid, error = %e, "cannot stop the datapath's run of the program");
                }
                if flow.fold.is_none() {
                    self.ticked.insert(sid);
                }
            }
            return;
        }
        if flow.program_run.is_some() && !restarted {
            // Only here: a folded flow's answers (nearly all) need not collect them.
            let controls = control_updates(msg);
            if !controls.is_empty() {
                if let Err(e) = dp.set_program_controls(sid, &controls) {
                    error!(sid, error = %e, "cannot set the program's control registers in the datapath");
                }
            }
            return;
        }
        let program = flow.ccp.program().expect("wanted");
        let run = ProgramRun { program, registers: flow.ccp.registers(), start_us: now_us };
        flow.program_run = match dp.run_program(sid, Some(run)) {
            Ok(true) => Some(now_us),
            Ok(false) => None,
            Err(e) => {
                error!(sid, error = %e, "cannot run the program in the datapath: its ACKs stay in user space");
                let _ = dp.run_program(sid, None);
                None
            }
        };
        if flow.program_run.is_some() {
            self.ticked.remove(&sid);
        } else {
            self.ticked.insert(sid);
        }
    }

    /// A report of a program the datapath runs (see [`SessionDatapath::run_program`]), sent
    /// to the agent as the program's MEASURE. A report from a run that has since restarted or
    /// stopped, or of another program, is dropped. `reported_us` is when its ACK was processed,
    /// `datapath_cwnd_bytes` the window after it.
    pub fn on_program_report(
        &mut self,
        dp: &mut impl SessionDatapath,
        sid: u32,
        start_us: u64,
        program_uid: u32,
        fields: Vec<u64>,
        reported_us: u64,
        datapath_cwnd_bytes: u32,
    ) {
        let Some(flow) = self.flows.get_mut(sid) else { return };
        if flow.program_run != Some(start_us) || flow.ccp.program_uid() != Some(program_uid) {
            return debug!(sid, "report of an earlier program run dropped");
        }
        let rate = flow.ccp.rate_bytes_per_s();
        flow.ccp.sync_datapath(datapath_cwnd_bytes, rate);
        if self.agent.is_some() {
            flow.await_report(reported_us, false, &mut self.latency, &mut self.unsent_urgent);
        }
        let report = Measure { sid, program_uid, fields };
        self.apply(dp, sid, Step { report: Some(report), ..Step::default() });
    }

    /// A report of a flow whose standard program the datapath folds: sent to the agent as
    /// the program's MEASURE. `start_us` is the fold it was folded under; a report from
    /// before the program last restarted or stopped folding is dropped, as the interpreter
    /// would have reset those registers. `datapath_cwnd_bytes` is the window after the
    /// reporting ACK; `sender_reductions`, from a datapath in the sender's kernel (the window
    /// reductions its TCP entered, and whether it is in one), is appended to the fields
    /// ([`report::SENDER_REDUCTIONS`]), and after it the flow's handshake RTT
    /// ([`report::SENDER_HANDSHAKE_RTT`]).
    pub fn on_folded_report(
        &mut self,
        dp: &mut impl SessionDatapath,
        sid: u32,
        start_us: u64,
        fields: &[u64],
        datapath_cwnd_bytes: u32,
        sender_reductions: Option<(u32, bool)>,
    ) {
        let Some(flow) = self.flows.get_mut(sid) else { return };
        let (Some((_, fold_start)), Some(uid)) = (flow.fold, flow.ccp.program_uid()) else { return };
        if fold_start != start_us {
            return debug!(sid, "report of an earlier fold dropped");
        }
        let rtt = fields.get(report::RTT).copied().unwrap_or(0);
        if rtt != 0 && rtt < INFINITY {
            flow.rtt_us = rtt;
        }
        let rate = flow.ccp.rate_bytes_per_s();
        flow.ccp.sync_datapath(datapath_cwnd_bytes, rate);
        let field = |i| fields.get(i).copied().unwrap_or(0);
        let urgent = field(report::LOST) > 0 || field(report::TIMEOUT) != 0;
        if self.agent.is_some() {
            flow.await_report(field(report::NOW), urgent, &mut self.latency, &mut self.unsent_urgent);
        }
        let mut copied = std::mem::take(&mut self.report_fields);
        copied.clear();
        copied.extend_from_slice(fields);
        if let Some((entered, in_reduction)) = sender_reductions {
            copied.extend([u64::from(entered), u64::from(in_reduction), u64::from(flow.handshake_rtt_us)]);
        }
        let report = Measure { sid, program_uid: uid, fields: copied };
        self.apply(dp, sid, Step { report: Some(report), ..Step::default() });
    }

    /// Carry out what an evaluation or an agent message decided.
    fn apply(&mut self, dp: &mut impl SessionDatapath, sid: u32, step: Step) {
        if let Some(e) = step.error {
            warn!(sid, error = %e, "datapath program fault: evaluation discarded");
        }
        if step.cwnd_bytes.is_some() || step.rate_bytes_per_s.is_some() {
            let Some(flow) = self.flows.get(sid) else { return };
            if flow.program_run.is_some() {
                self.totals.directives += 1;
                if let Err(e) = dp.set_program_window(sid, step.cwnd_bytes, step.rate_bytes_per_s) {
                    error!(sid, error = %e, "cannot set the window of the program the datapath runs");
                }
            } else {
                let rate = flow.ccp.rate_bytes_per_s();
                let cwnd = flow.ccp.cwnd_bytes();
                self.totals.directives += 1;
                if let Err(e) = dp.set_directive(sid, cwnd, (rate > 0).then_some(rate)) {
                    error!(sid, error = %e, "cannot write the directive");
                }
            }
        }
        if let Some(report) = step.report {
            if self.agent.is_some() {
                self.totals.reports += 1;
                self.unanswered_since.get_or_insert_with(Instant::now);
                let msg = Msg::Measure(report);
                self.send(dp, &msg);
                if let Msg::Measure(sent) = msg {
                    self.report_fields = sent.fields;
                }
            }
        }
    }
}

/// The control registers an UPDATE_FIELDS or CHANGE_PROG sets, as (index, value).
fn control_updates(msg: &Msg) -> Vec<(usize, u64)> {
    let updates = match msg {
        Msg::UpdateFields(m) => &m.updates,
        Msg::ChangeProg(m) => &m.updates,
        _ => return Vec::new(),
    };
    let mut controls = Vec::with_capacity(updates.len()); // a filter's collect grows by reallocation
    controls.extend(
        updates
            .iter()
            .filter(|u| matches!(u.reg_type, reg_type::NONVOLATILE_CONTROL | reg_type::VOLATILE_CONTROL))
            .map(|u| (u.reg_index as usize, u.value)),
    );
    controls
}

fn ipv4_u32(addr: &SocketAddr) -> u32 {
    match addr {
        SocketAddr::V4(a) => u32::from(*a.ip()),
        // CCP's CREATE carries IPv4 addresses only; IPv6 flows are announced without one.
        SocketAddr::V6(_) => 0,
    }
}

fn create_msg(sid: u32, endpoints: &WireEndpoints, cwnd_bytes: u32, mss: u32) -> Msg {
    Msg::Create(Create {
        sid,
        init_cwnd: cwnd_bytes,
        mss,
        src_ip: endpoints.src_ip,
        src_port: u32::from(endpoints.src_port),
        dst_ip: endpoints.dst_ip,
        dst_port: u32::from(endpoints.dst_port),
        cong_alg: String::new(),
    })
}

/// CPU time (user + system) this process has used.
pub fn process_cpu_time() -> Duration {
    // SAFETY: an all-zero rusage is a valid value; getrusage writes into the struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(at_us: u64) -> Awaiting {
        Awaiting::Report { at_us, urgent: false, read_us: 0, sent_us: 0 }
    }

    fn at(a: Option<Awaiting>) -> Option<u64> {
        match a? {
            Awaiting::Report { at_us, .. } => Some(at_us),
            Awaiting::Create => None,
        }
    }

    #[test]
    fn awaited_answers_leave_oldest_first_and_an_emptied_queue_holds_no_allocation() {
        let mut q = AwaitQueue::default();
        q.push_back(Awaiting::Create);
        for t in 1..=3 {
            q.push_back(report(t));
        }
        assert_eq!(q.len(), 4);
        let newest_first: Vec<_> = q.iter_mut_newest_first().map(|a| at(Some(*a))).collect();
        assert_eq!(newest_first, [Some(3), Some(2), Some(1), None]);
        assert!(matches!(q.pop_front(), Some(Awaiting::Create)));
        assert_eq!(at(q.pop_front()), Some(1));
        q.push_back(report(4));
        assert_eq!(q.iter().filter(|a| a.is_report()).count(), 3);
        assert_eq!([at(q.pop_front()), at(q.pop_front()), at(q.pop_front())], [Some(2), Some(3), Some(4)]);
        assert!(q.pop_front().is_none() && q.len() == 0);
        assert!(q.later.is_none(), "what 100k idle flows would hold");
        q.push_back(report(5));
        assert_eq!((q.later.is_none(), q.take_all().count(), q.len()), (true, 1, 0), "one awaited: nothing allocated");
    }
}
