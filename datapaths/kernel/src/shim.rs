//! The shim's event loop: BPF events in, CCP program evaluations, agent messages, and the
//! directives and agent deadline written back to the BPF maps.
//!
//! The loop is driven by events, not by a poll period. It sleeps until the urgent lane wakes
//! it (a flow created or closed, a window reduction's first loss, timeout, ECN), the routine
//! lane does (past a size or an age, see `kernel.h`), the agent answers, or its next timer
//! falls due (the agent deadline's refresh, and the tick of flows it evaluates itself, only
//! while there are such flows). Awake, it
//! 1. reads both lanes, forwards the urgent records at once (each after its own flow's
//!    earlier routine records, taken out of turn) in one write, and waits for the agent's
//!    answers to them, bounded, before anything else (an agent in this process answers each
//!    record's report as it is handled, before the next);
//! 2. applies the agent's answers;
//! 3. handles at most [`ROUTINE_CHUNK`] routine records and sends their reports, then looks
//!    at the urgent lane and the agent again before the next chunk;
//! 4. runs its timers.
//!
//! A wake-up costs 9–20 µs on the machines this runs on, far more than a syscall, so
//! routine records ride on the wake-ups that happen anyway.
//!
//! Everything that does not depend on the datapath (agent connection and liveness deadline,
//! programs, per-flow CCP state) is `ccswitch_ccp::session`, shared with the ovs shim;
//! here are only the kernel's events and maps. While the deadline lapses, every flow runs the
//! in-kernel fallback; the kernel's window is then the truth, so each ACK tells the flow's
//! program the window the kernel actually uses.

use std::collections::{HashMap, VecDeque};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use ccswitch_ccp::agent_link::AgentAddr;
use ccswitch_ccp::cli::{WindowEdge, WindowSignals};
use ccswitch_ccp::latency::LatencyHistogram;
use ccswitch_ccp::session::{process_cpu_time, AckInput, FlowDesc, ProgramRun, Session, SessionDatapath};
use ccswitch_ccp::Primitives;
use ccswitch_kernel::{monotonic_now_ns, AckSample, FoldMode, DirectiveSlotBusy, KernelDatapath, KernelEvent, KernelStats};
use tracing::{debug, info, warn};

/// Period of timer-driven program evaluation of the flows the shim evaluates itself (those
/// the kernel neither folds nor interprets), for flows whose ACKs stopped.
const TICK_INTERVAL: Duration = Duration::from_millis(10);
/// Routine records handled between two looks at the urgent lane and the agent's answers.
const ROUTINE_CHUNK: usize = 256;
/// Longest the shim waits for the agent's answers to urgent reports before it goes on with
/// routine records.
const URGENT_ANSWER_WAIT: Duration = Duration::from_millis(1);
/// Longest sleep without any timer due (signals interrupt it anyway).
const MAX_SLEEP: Duration = Duration::from_secs(1);
/// Overflows (directive slots held by other flows, a full ring) are logged at most this often.
const OVERFLOW_LOG_INTERVAL: Duration = Duration::from_secs(1);

/// The kernel datapath as the session sees it.
struct Maps<'a>(&'a KernelDatapath);

impl SessionDatapath for Maps<'_> {
    fn set_directive(&mut self, sid: u32, cwnd_bytes: u32, rate: Option<u64>) -> Result<()> {
        match self.0.set_directive(sid, Some(cwnd_bytes), rate) {
            // Counted by the datapath and logged by the shim once per interval: the flow
            // stays on the fallback, which is all a busy slot can offer it.
            Err(e) if e.is::<DirectiveSlotBusy>() => Ok(()),
            r => r,
        }
    }
    fn clear_directive(&mut self, sid: u32) -> Result<()> {
        self.0.clear_directive(sid)
    }
    fn set_valid_until(&mut self, deadline_ns: u64) -> Result<()> {
        self.0.set_agent_valid_until(deadline_ns)
    }
    fn set_fold(&mut self, sid: u32, fold: Option<(FoldMode, u64)>) -> Result<bool> {
        match self.0.set_fold(sid, fold) {
            Ok(()) => Ok(true),
            Err(e) if e.is::<DirectiveSlotBusy>() => Ok(false),
            Err(e) => Err(e),
        }
    }
    fn run_program(&mut self, sid: u32, run: Option<ProgramRun<'_>>) -> Result<bool> {
        match self.0.run_program(sid, run.as_ref()) {
            Err(e) if e.is::<DirectiveSlotBusy>() => Ok(false),
            r => r,
        }
    }
    fn set_program_controls(&mut self, sid: u32, updates: &[(usize, u64)]) -> Result<()> {
        self.0.set_program_controls(sid, updates);
        Ok(())
    }
    fn set_program_window(&mut self, sid: u32, cwnd_bytes: Option<u32>, rate: Option<u64>) -> Result<()> {
        self.0.set_program_window(sid, cwnd_bytes, rate)
    }
}

pub struct KernelShim {
    datapath: KernelDatapath,
    session: Session,
    /// Routine records read and not yet handled, in their lane's order; `None` where one was
    /// handled out of turn, before an urgent record of its flow.
    backlog: VecDeque<Option<KernelEvent>>,
    /// Urgent records being handled (kept for its allocation).
    urgent: Vec<KernelEvent>,
    /// Reports read from the urgent lane (loss, timeout, ECN as the kernel judged them).
    urgent_lane_reports: u64,
    last_tick: Instant,
    started: Instant,
    /// Refused directives and lost ring records already logged, and when.
    overflow_logged: (u64, u64, Instant),
    /// The datapath's counters when the measurement window began.
    window_start: Option<KernelStats>,
    /// When a pass last read routine records (CLOCK_MONOTONIC ns, 0: never), and what the
    /// shim has promised the kernel (see [`routine_promise`]).
    routine_read_ns: u64,
    routine_promised_ns: u64,
}

/// What the shim promises the kernel after a pass: to read the routine lane of its own accord
/// by a time (`KernelDatapath::promise_routine_read`), so that no routine record wakes it for
/// its age (a wake-up from BPF is a self-IPI on the ACK's path, dear on these VMs). It promises
/// while its passes keep finding routine records (one did within the last two report delays),
/// and then sleeps at most a delay at a time; the promise runs two delays ahead, so a pass late
/// by less than a delay keeps it, and is renewed once less than a delay is left. Once the
/// records stop it is withdrawn (0), and their age wakes the shim again. `None`: it stands.
fn routine_promise(now_ns: u64, delay_ns: u64, routine_read_ns: u64, promised_ns: u64) -> Option<u64> {
    let active = routine_read_ns != 0 && now_ns.saturating_sub(routine_read_ns) <= 2 * delay_ns;
    if active {
        (promised_ns < now_ns + delay_ns).then_some(now_ns + 2 * delay_ns)
    } else {
        (promised_ns != 0).then_some(0)
    }
}

impl KernelShim {
    pub fn new(datapath: KernelDatapath, agent_addr: AgentAddr, timeout: Duration) -> Self {
        Self {
            datapath,
            session: Session::new(agent_addr, timeout),
            backlog: VecDeque::new(),
            urgent: Vec::new(),
            urgent_lane_reports: 0,
            last_tick: Instant::now(),
            started: Instant::now(),
            overflow_logged: (0, 0, Instant::now()),
            window_start: None,
            routine_read_ns: 0,
            routine_promised_ns: 0,
        }
    }

    pub fn run(&mut self, stop: &AtomicBool, window: &WindowSignals) -> Result<()> {
        while !stop.load(Ordering::Relaxed) {
            match window.take() {
                Some(WindowEdge::Start) => {
                    self.session.start_measurement_window();
                    self.window_start = Some(self.datapath.stats());
                }
                Some(WindowEdge::End) => self.log_window(),
                None => {}
            }
            self.session.maybe_connect(&mut Maps(&self.datapath));
            self.forward_urgent()?;
            self.session.drain_agent(&mut Maps(&self.datapath));
            self.handle_routine_chunk();
            if self.session.ticked_flows() > 0 && self.last_tick.elapsed() >= TICK_INTERVAL {
                self.last_tick = Instant::now();
                self.session.tick(&mut Maps(&self.datapath), monotonic_now_ns() / 1000);
                self.session.flush(&mut Maps(&self.datapath));
            }
            self.session.refresh_deadline(&mut Maps(&self.datapath));
            self.log_overflow();
            self.keep_routine_promise();
            if self.backlog.is_empty() {
                self.sleep();
            }
        }
        info!("stopping");
        Ok(())
    }

    /// Reads both lanes and handles the urgent records, each after the routine records its
    /// flow made before it, then sends what they caused in one write and waits (bounded) for
    /// the answers; again until the urgent lane is empty. Every other routine record read
    /// joins the backlog.
    fn forward_urgent(&mut self) -> Result<()> {
        loop {
            let mut urgent = std::mem::take(&mut self.urgent);
            let backlog = &mut self.backlog;
            let before = backlog.len();
            self.datapath.read_lanes(|e| urgent.push(e), |e| backlog.push_back(Some(e)))?;
            // `urgent` was empty: every pass hands it back drained.
            self.urgent_lane_reports += urgent.iter().filter(|e| matches!(e, KernelEvent::Report(_))).count() as u64;
            if self.backlog.len() > before {
                self.routine_read_ns = monotonic_now_ns();
            }
            if urgent.is_empty() {
                self.urgent = urgent;
                return Ok(());
            }
            let mut latest: HashMap<u32, u64> = HashMap::with_capacity(urgent.len());
            for e in &urgent {
                let t = latest.entry(e.flow_id()).or_insert(0);
                *t = (*t).max(e.ts_ns());
            }
            for slot in self.backlog.iter_mut() {
                let before = slot.as_ref().is_some_and(|e| latest.get(&e.flow_id()).is_some_and(|&t| e.ts_ns() <= t));
                if before {
                    urgent.extend(slot.take());
                }
            }
            // A flow's records in the order it made them (the sort is stable).
            urgent.sort_by_key(KernelEvent::ts_ns);
            // An agent in this process answers within a flush, which then costs a call: each
            // record's report is answered before the next record is handled, rather than all
            // of them after the whole batch.
            let answer_each = self.session.agent_in_process();
            for e in urgent.drain(..) {
                self.on_event(e);
                if answer_each {
                    self.session.flush(&mut Maps(&self.datapath));
                }
            }
            self.urgent = urgent;
            self.session.flush(&mut Maps(&self.datapath));
            self.await_urgent_answers();
        }
    }

    /// Until the agent has answered every urgent report, at most [`URGENT_ANSWER_WAIT`], or
    /// the urgent lane has more: apply the agent's answers as they come.
    fn await_urgent_answers(&mut self) {
        let until = Instant::now() + URGENT_ANSWER_WAIT;
        while self.session.urgent_unanswered() > 0 {
            let Some(agent) = self.session.agent_fd() else { return };
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            let ready = wait_readable(&[self.datapath.urgent_fd(), agent], left);
            self.session.drain_agent(&mut Maps(&self.datapath));
            if ready[0] {
                return;
            }
        }
    }

    /// Handles at most [`ROUTINE_CHUNK`] routine records of the backlog and sends what they caused.
    fn handle_routine_chunk(&mut self) {
        let mut handled = 0;
        while handled < ROUTINE_CHUNK {
            match self.backlog.pop_front() {
                Some(Some(e)) => {
                    self.on_event(e);
                    handled += 1;
                }
                Some(None) => {}
                None => break,
            }
        }
        if handled > 0 {
            self.session.flush(&mut Maps(&self.datapath));
        }
    }

    /// Sleeps until a lane wakes the shim, the agent sends something, or the next timer.
    fn sleep(&self) {
        let mut next = self.session.next_timer();
        if self.session.ticked_flows() > 0 {
            let tick = self.last_tick + TICK_INTERVAL;
            next = Some(next.map_or(tick, |t| t.min(tick)));
        }
        let mut timeout = next.map_or(MAX_SLEEP, |t| t.saturating_duration_since(Instant::now()).min(MAX_SLEEP));
        if self.routine_promised_ns != 0 {
            timeout = timeout.min(self.datapath.report_delay());
        }
        self.datapath.wait(self.session.agent_fd(), timeout);
    }

    fn keep_routine_promise(&mut self) {
        let delay_ns = self.datapath.report_delay().as_nanos() as u64;
        if let Some(by) = routine_promise(monotonic_now_ns(), delay_ns, self.routine_read_ns, self.routine_promised_ns) {
            self.routine_promised_ns = by;
            self.datapath.promise_routine_read(by);
        }
    }

    /// Overflows since the last interval, one line each: never per packet.
    fn log_overflow(&mut self) {
        let (refused_logged, drops_logged, at) = self.overflow_logged;
        if at.elapsed() < OVERFLOW_LOG_INTERVAL {
            return;
        }
        let refused = self.datapath.directives_refused();
        let drops = self.datapath.stats().ring_drops;
        if refused > refused_logged {
            warn!(
                refused = refused - refused_logged, max_flows = self.datapath.max_flows(),
                "directive slots held by other flows: these flows stay on the in-kernel fallback (raise --max-flows)"
            );
        }
        if drops > drops_logged {
            warn!(lost = drops - drops_logged, "ring buffer full: records lost (raise --ring-bytes)");
        }
        self.overflow_logged = (refused, drops, Instant::now());
    }

    pub fn log_totals(&self) {
        let t = self.session.totals();
        let cpu = process_cpu_time();
        let stats = self.datapath.stats();
        // ACKs the shim interpreted plus those the kernel folded.
        let acks = t.acks + stats.acks_folded;
        let per_10k = |d: Duration| {
            if acks == 0 { 0.0 } else { d.as_secs_f64() * 1e3 * 1e4 / acks as f64 }
        };
        info!(
            acks, acks_interpreted = t.acks, reports = t.reports, directives = t.directives,
            agent_errors = t.agent_errors, installs = t.installs, change_progs = t.change_progs,
            update_fields = t.update_fields, reports_dropped = t.reports_dropped,
            acks_directive = stats.acks_directive, acks_fallback = stats.acks_fallback,
            acks_fallback_awaiting = stats.acks_fallback_awaiting,
            acks_fallback_agent_late = stats.acks_fallback_agent_late,
            acks_interpreted_in_kernel = stats.acks_vm, kernel_program_faults = stats.vm_faults,
            acks_folded = stats.acks_folded, folded_reports = stats.reports,
            ring_drops = stats.ring_drops, routine_timer_wakeups = stats.routine_timer_wakeups,
            urgent_lane_reports = self.urgent_lane_reports,
            directives_refused = self.datapath.directives_refused(),
            cpu_ms = cpu.as_secs_f64() * 1e3,
            cpu_ms_per_10k_acks = per_10k(cpu), uptime_s = self.started.elapsed().as_secs_f64(),
            "shim totals"
        );
        self.log_latency();
    }

    /// Report → directive latency since the window began (or since the start).
    fn log_latency(&self) {
        let lat = self.session.answer_latency();
        let q = |h: &LatencyHistogram, p| h.quantile(p).unwrap_or(0);
        info!(
            answers = lat.all.count(), p50_us = q(&lat.all, 0.5), p99_us = q(&lat.all, 0.99),
            p999_us = q(&lat.all, 0.999), urgent = lat.urgent.count(),
            urgent_p50_us = q(&lat.urgent, 0.5), urgent_p99_us = q(&lat.urgent, 0.99),
            urgent_p999_us = q(&lat.urgent, 0.999), urgent_read_p50_us = q(&lat.urgent_read, 0.5),
            urgent_read_p99_us = q(&lat.urgent_read, 0.99),
            urgent_queued_p50_us = q(&lat.urgent_queued, 0.5), urgent_queued_p99_us = q(&lat.urgent_queued, 0.99),
            urgent_agent_p50_us = q(&lat.urgent_agent, 0.5), urgent_agent_p99_us = q(&lat.urgent_agent, 0.99),
            untimed = lat.untimed,
            awaiting = self.session.reports_awaiting_answer(),
            "report to directive latency"
        );
    }

    /// The end of a measurement window: flows that changed hands in it, by reason, and the
    /// latency of the reports answered in it.
    fn log_window(&self) {
        let (now, start) = (self.datapath.stats(), self.window_start.unwrap_or_default());
        info!(
            flows_directed = now.flows_directed - start.flows_directed,
            flows_fell_back_agent_late = now.flows_fell_back_agent_late - start.flows_fell_back_agent_late,
            flows_fell_back_no_directive = now.flows_fell_back_no_directive - start.flows_fell_back_no_directive,
            flows_rejoined = now.flows_rejoined - start.flows_rejoined,
            "measurement window flows"
        );
        self.log_latency();
    }

    fn on_event(&mut self, ev: KernelEvent) {
        let mut maps = Maps(&self.datapath);
        match ev {
            KernelEvent::Created(info) => {
                debug!(flow = info.flow_id, src = %info.src, dst = %info.dst, mss = info.mss, "flow created");
                let desc = FlowDesc {
                    sid: info.flow_id,
                    src: info.src,
                    dst: info.dst,
                    mss: info.mss,
                    init_cwnd_bytes: info.init_cwnd_bytes,
                    handshake_rtt_us: info.handshake_rtt_us,
                };
                self.session.add_flow(&mut maps, desc);
            }
            KernelEvent::Ack(ack) => {
                let input = ack_input(&ack);
                self.session.on_ack(&mut maps, ack.flow_id, input);
            }
            KernelEvent::Report(r) => {
                self.session.on_folded_report(&mut maps, r.flow_id, r.start_us, &r.fields, r.snd_cwnd_bytes, Some(r.reductions))
            }
            KernelEvent::ProgramReport(r) => self.session.on_program_report(
                &mut maps,
                r.flow_id,
                r.start_us,
                r.program_uid,
                r.fields,
                r.ts_ns / 1000,
                r.snd_cwnd_bytes,
            ),
            KernelEvent::Closed { flow_id, .. } => self.session.remove_flow(&mut maps, flow_id),
        }
    }
}

/// Waits until one of `fds` is readable or `timeout` passes (a signal ends it too); which are.
fn wait_readable<const N: usize>(fds: &[RawFd; N], timeout: Duration) -> [bool; N] {
    let mut pfds = fds.map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 });
    let ts = libc::timespec { tv_sec: timeout.as_secs() as libc::time_t, tv_nsec: timeout.subsec_nanos() as libc::c_long };
    // SAFETY: `pfds` is a valid array of pollfd and `ts` a valid timespec for the call.
    unsafe { libc::ppoll(pfds.as_mut_ptr(), N as libc::nfds_t, &ts, std::ptr::null()) };
    pfds.map(|p| p.revents != 0)
}

fn ack_input(ack: &AckSample) -> AckInput {
    AckInput {
        prims: Primitives {
            bytes_acked: u64::from(ack.bytes_acked),
            packets_acked: u64::from(ack.packets_acked),
            bytes_misordered: u64::from(ack.bytes_misordered),
            packets_misordered: u64::from(ack.packets_misordered),
            ecn_bytes: u64::from(ack.ecn_bytes),
            ecn_packets: u64::from(ack.ecn_packets),
            lost_pkts_sample: u64::from(ack.lost_pkts_sample),
            was_timeout: ack.was_timeout,
            rtt_sample_us: 0,
            rate_outgoing: ack.rate_outgoing,
            rate_incoming: ack.rate_incoming,
            bytes_in_flight: u64::from(ack.bytes_in_flight),
            packets_in_flight: u64::from(ack.packets_in_flight),
            bytes_pending: u64::from(ack.bytes_pending),
            now: ack.ts_ns / 1000,
        },
        rtt_sample_us: ack.rtt_sample_us.map(u64::from),
        srtt_us: u64::from(ack.srtt_us),
        datapath_cwnd_bytes: Some(ack.snd_cwnd_bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::routine_promise;

    const MS: u64 = 1_000_000;

    #[test]
    fn the_shim_promises_to_read_the_routine_lane_while_its_records_keep_coming() {
        // never read any: nothing promised, nothing to withdraw
        assert_eq!(routine_promise(100 * MS, 5 * MS, 0, 0), None);
        // a pass read some: two delays ahead
        assert_eq!(routine_promise(100 * MS, 5 * MS, 100 * MS, 0), Some(110 * MS));
        // more than a delay left: it stands (no store into the config)
        assert_eq!(routine_promise(104 * MS, 5 * MS, 104 * MS, 110 * MS), None);
        // less than a delay left: renewed
        assert_eq!(routine_promise(106 * MS, 5 * MS, 106 * MS, 110 * MS), Some(116 * MS));
        // a pass that found none right after one that did keeps it (records still come)
        assert_eq!(routine_promise(112 * MS, 5 * MS, 106 * MS, 116 * MS), Some(122 * MS));
        // none for more than two delays: withdrawn, once
        assert_eq!(routine_promise(117 * MS, 5 * MS, 106 * MS, 122 * MS), Some(0));
        assert_eq!(routine_promise(130 * MS, 5 * MS, 106 * MS, 0), None);
    }
}
