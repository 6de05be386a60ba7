//! The shim's event loop: BPF events in, CCP program evaluations, agent messages, and the
//! directives and agent deadline written back to the BPF maps.
//!
//! Everything that does not depend on the datapath (agent connection and liveness deadline,
//! programs, per-flow CCP state) is `ccswitch_ccp::session`, shared with the ovs shim;
//! here are only the kernel's events and maps. While the deadline lapses, every flow runs the
//! in-kernel fallback; the kernel's window is then the truth, so each ACK tells the flow's
//! program the window the kernel actually uses.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use ccswitch_ccp::agent_link::AgentAddr;
use ccswitch_ccp::cli::{WindowEdge, WindowSignals};
use ccswitch_ccp::latency::LatencyHistogram;
use ccswitch_ccp::session::{process_cpu_time, AckInput, FlowDesc, ProgramRun, Session, SessionDatapath};
use ccswitch_ccp::Primitives;
use ccswitch_kernel::{monotonic_now_ns, AckSample, FoldMode, KernelDatapath, KernelDirectiveSlotBusy, KernelEvent, KernelStats};
use tracing::{debug, info, warn};

/// Period of timer-driven program evaluation for flows whose ACKs stopped.
const TICK_INTERVAL: Duration = Duration::from_millis(10);
/// Overflows (directive slots held by other flows, a full ring) are logged at most this often.
const OVERFLOW_LOG_INTERVAL: Duration = Duration::from_secs(1);

/// The kernel datapath as the session sees it.
struct Maps<'a>(&'a KernelDatapath);

impl SessionDatapath for Maps<'_> {
    fn set_directive(&mut self, sid: u32, cwnd_bytes: u32, rate: Option<u64>) -> Result<()> {
        match self.0.set_directive(sid, Some(cwnd_bytes), rate) {
            // Counted by the datapath and logged by the shim once per interval: the flow
            // stays on the fallback, which is all a busy slot can offer it.
            Err(e) if e.is::<KernelDirectiveSlotBusy>() => Ok(()),
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
            Err(e) if e.is::<KernelDirectiveSlotBusy>() => Ok(false),
            Err(e) => Err(e),
        }
    }
    fn run_program(&mut self, sid: u32, run: Option<ProgramRun<'_>>) -> Result<bool> {
        match self.0.run_program(sid, run.as_ref()) {
            Err(e) if e.is::<KernelDirectiveSlotBusy>() => Ok(false),
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
    /// How long a non-urgent record may wait in the ring (the BPF program submits those
    /// without waking the shim).
    report_delay: Duration,
    last_tick: Instant,
    started: Instant,
    /// Refused directives and lost ring records already logged, and when.
    overflow_logged: (u64, u64, Instant),
    /// The datapath's counters when the measurement window began.
    window_start: Option<KernelStats>,
}

impl KernelShim {
    pub fn new(datapath: KernelDatapath, agent_addr: AgentAddr, timeout: Duration, report_delay: Duration) -> Self {
        Self {
            datapath,
            session: Session::new(agent_addr, timeout),
            report_delay,
            last_tick: Instant::now(),
            started: Instant::now(),
            overflow_logged: (0, 0, Instant::now()),
            window_start: None,
        }
    }

    pub fn run(&mut self, stop: &AtomicBool, window: &WindowSignals) -> Result<()> {
        let mut events = Vec::new();
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
            // Records that did not wake us wait at most report_delay.
            let wait = if self.session.flow_count() > 0 { self.report_delay.min(TICK_INTERVAL) } else { TICK_INTERVAL };
            self.wait_for_input(wait);
            self.datapath.poll(Duration::ZERO, |ev| events.push(ev))?;
            for ev in events.drain(..) {
                self.on_event(ev);
            }
            // The reports of one ring-buffer drain leave in one write.
            self.session.flush(&mut Maps(&self.datapath));
            self.session.drain_agent(&mut Maps(&self.datapath));
            if self.last_tick.elapsed() >= TICK_INTERVAL {
                self.last_tick = Instant::now();
                self.session.tick(&mut Maps(&self.datapath), monotonic_now_ns() / 1000);
                self.session.flush(&mut Maps(&self.datapath));
            }
            self.session.refresh_deadline(&mut Maps(&self.datapath));
            self.log_overflow();
        }
        info!("stopping");
        Ok(())
    }

    /// Sleep until BPF events or agent messages arrive, or `timeout` passes.
    fn wait_for_input(&self, timeout: Duration) {
        let mut fds = vec![libc::pollfd { fd: self.datapath.events_fd(), events: libc::POLLIN, revents: 0 }];
        if let Some(fd) = self.session.agent_fd() {
            fds.push(libc::pollfd { fd, events: libc::POLLIN, revents: 0 });
        }
        // ppoll: sub-millisecond timeouts (--report-delay-us).
        let ts = libc::timespec { tv_sec: timeout.as_secs() as libc::time_t, tv_nsec: timeout.subsec_nanos() as libc::c_long };
        // SAFETY: `fds` is a valid array of pollfd and `ts` a valid timespec for the call.
        unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, &ts, std::ptr::null()) };
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
            ring_drops = stats.ring_drops, directives_refused = self.datapath.directives_refused(),
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
            urgent_read_p99_us = q(&lat.urgent_read, 0.99), untimed = lat.untimed,
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
                };
                self.session.add_flow(&mut maps, desc);
            }
            KernelEvent::Ack(ack) => {
                let input = ack_input(&ack);
                self.session.on_ack(&mut maps, ack.flow_id, input);
            }
            KernelEvent::Report(r) => {
                self.session.on_folded_report(&mut maps, r.flow_id, r.start_us, r.fields, r.snd_cwnd_bytes)
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
            KernelEvent::Closed { flow_id } => self.session.remove_flow(&mut maps, flow_id),
        }
    }
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
