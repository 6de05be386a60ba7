//! The shim's event loop: BPF events in, CCP program evaluations, agent messages, and the
//! directives and agent deadline written back to the BPF maps.
//!
//! Agent liveness is one deadline in the BPF config: while the agent is connected and has
//! answered every report within the timeout, the shim keeps pushing the deadline forward;
//! otherwise it stops, and once it lapses every flow runs the in-kernel fallback. A lost
//! connection drops the deadline at once and clears all directives, so a returning agent
//! never inherits stale windows; on reconnection the shim announces itself (READY) and every
//! live flow (CREATE with its current window), so the new agent takes all flows over.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::TryRecvError;
use std::time::{Duration, Instant};

use anyhow::Result;
use ccswitch_ccp::wire::{Create, Measure, Msg, Ready};
use ccswitch_ccp::{Flow, Primitives, ProgramTable, Step};
use ccswitch_kernel::agent_link::{AgentAddr, AgentLink, FromAgent};
use ccswitch_kernel::{monotonic_now_ns, AckSample, Event, FlowInfo, KernelDatapath};
use tracing::{debug, error, info, warn};

/// Period of timer-driven program evaluation for flows whose ACKs stopped.
const TICK_INTERVAL: Duration = Duration::from_millis(10);
const RECONNECT_INTERVAL: Duration = Duration::from_millis(200);
/// The deadline is rewritten at most this often (one map update per period, not per ACK).
const DEADLINE_REFRESH: Duration = Duration::from_millis(20);

struct ShimFlow {
    ccp: Flow,
    info: FlowInfo,
    /// Latest RTT sample: libccp programs read 0 as "no sample" (infinite), so the last real
    /// sample is carried over ACKs that have none.
    rtt_us: u64,
}

#[derive(Default)]
struct Totals {
    acks: u64,
    reports: u64,
    directives: u64,
    agent_errors: u64,
    /// Messages from the agent, by type.
    installs: u64,
    change_progs: u64,
    update_fields: u64,
    /// Reports skipped because the agent's datagram queue stayed full.
    reports_dropped: u64,
}

pub struct Shim {
    datapath: KernelDatapath,
    agent_addr: AgentAddr,
    timeout: Duration,
    agent: Option<AgentLink>,
    programs: ProgramTable,
    flows: HashMap<u32, ShimFlow>,
    /// The first report the agent has not answered yet.
    unanswered_since: Option<Instant>,
    agent_healthy: bool,
    last_reconnect: Option<Instant>,
    last_refresh: Option<Instant>,
    last_tick: Instant,
    started: Instant,
    totals: Totals,
}

impl Shim {
    pub fn new(datapath: KernelDatapath, agent_addr: AgentAddr, timeout: Duration) -> Self {
        Self {
            datapath,
            agent_addr,
            timeout,
            agent: None,
            programs: ProgramTable::new(),
            flows: HashMap::new(),
            unanswered_since: None,
            agent_healthy: false,
            last_reconnect: None,
            last_refresh: None,
            last_tick: Instant::now(),
            started: Instant::now(),
            totals: Totals::default(),
        }
    }

    fn now_us(&self) -> u64 {
        monotonic_now_ns() / 1000
    }

    pub fn run(&mut self, stop: &AtomicBool) -> Result<()> {
        let mut events = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            self.maybe_connect();
            self.wait_for_input(TICK_INTERVAL);
            self.datapath.poll(Duration::ZERO, |ev| events.push(ev))?;
            for ev in events.drain(..) {
                self.on_event(ev);
            }
            self.drain_agent();
            if self.last_tick.elapsed() >= TICK_INTERVAL {
                self.last_tick = Instant::now();
                self.tick();
            }
            self.refresh_deadline();
        }
        info!("stopping");
        Ok(())
    }

    /// Sleep until BPF events or agent messages arrive, or `timeout` passes.
    fn wait_for_input(&self, timeout: Duration) {
        let mut fds = vec![libc::pollfd { fd: self.datapath.events_fd(), events: libc::POLLIN, revents: 0 }];
        if let Some(link) = &self.agent {
            fds.push(libc::pollfd { fd: link.wake_fd(), events: libc::POLLIN, revents: 0 });
        }
        // SAFETY: `fds` is a valid array of pollfd for the duration of the call.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout.as_millis() as i32) };
    }

    pub fn log_totals(&self) {
        let cpu = process_cpu_time();
        let per_10k = |t: Duration| {
            if self.totals.acks == 0 { 0.0 } else { t.as_secs_f64() * 1e3 * 1e4 / self.totals.acks as f64 }
        };
        let stats = self.datapath.stats();
        info!(
            acks = self.totals.acks, reports = self.totals.reports,
            directives = self.totals.directives, agent_errors = self.totals.agent_errors,
            installs = self.totals.installs, change_progs = self.totals.change_progs,
            update_fields = self.totals.update_fields,
            reports_dropped = self.totals.reports_dropped
                + self.agent.as_ref().map_or(0, |l| l.dropped_reports()),
            acks_directive = stats.acks_directive, acks_fallback = stats.acks_fallback,
            ring_drops = stats.ring_drops, cpu_ms = cpu.as_secs_f64() * 1e3,
            cpu_ms_per_10k_acks = per_10k(cpu), uptime_s = self.started.elapsed().as_secs_f64(),
            "shim totals"
        );
    }

    // --- agent connection -------------------------------------------------------------

    fn maybe_connect(&mut self) {
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
        self.agent = Some(link);
        self.unanswered_since = None;
        self.send(&Msg::Ready(Ready { id: std::process::id() }));
        let mut ids: Vec<u32> = self.flows.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            // The new agent starts the flow afresh from the window the kernel has now.
            let flow = self.flows.get_mut(&id).expect("listed");
            let cwnd = flow.ccp.cwnd_bytes();
            flow.ccp = Flow::new(id, cwnd, flow.info.mss);
            let create = create_msg(&flow.info, cwnd);
            self.send(&create);
        }
    }

    fn disconnect(&mut self, reason: &str) {
        if let Some(link) = self.agent.take() {
            self.totals.reports_dropped += link.dropped_reports();
            link.shutdown();
        }
        warn!(reason, flows = self.flows.len(), "agent lost: flows fall back to the kernel");
        self.programs = ProgramTable::new();
        self.agent_healthy = false;
        self.unanswered_since = None;
        if let Err(e) = self.datapath.set_agent_valid_until(0) {
            error!(error = %e, "cannot revoke the agent deadline");
        }
        for id in self.flows.keys() {
            let _ = self.datapath.clear_directive(*id);
        }
    }

    fn send(&mut self, msg: &Msg) {
        let Some(link) = self.agent.as_mut() else { return };
        if let Err(e) = link.send(msg) {
            self.disconnect(&format!("send failed: {e}"));
        }
    }

    fn drain_agent(&mut self) {
        if let Some(link) = &self.agent {
            link.clear_wake();
        }
        loop {
            let item = match self.agent.as_ref().map(|a| a.rx.try_recv()) {
                Some(Ok(item)) => item,
                Some(Err(TryRecvError::Empty)) | None => return,
                Some(Err(TryRecvError::Disconnected)) => {
                    return self.disconnect("reader stopped");
                }
            };
            match item {
                FromAgent::Msg(msg) => {
                    self.unanswered_since = None;
                    self.on_agent_message(msg);
                }
                FromAgent::Malformed(e) => {
                    self.totals.agent_errors += 1;
                    error!(error = %e, "rejected a malformed message from the agent");
                }
                FromAgent::Closed(reason) => return self.disconnect(&reason),
            }
        }
    }

    fn on_agent_message(&mut self, msg: Msg) {
        let now_us = self.now_us();
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
                let Some(flow) = self.flows.get_mut(&sid) else {
                    return debug!(sid, "message for a flow that is gone");
                };
                match flow.ccp.handle(&msg, &self.programs, now_us) {
                    Ok(step) => self.apply(sid, step),
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

    /// Keep the BPF deadline ahead of now while the agent is connected and answering.
    fn refresh_deadline(&mut self) {
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
        if let Err(e) = self.datapath.set_agent_valid_until(deadline) {
            error!(error = %e, "cannot extend the agent deadline");
        }
    }

    // --- datapath events --------------------------------------------------------------

    fn on_event(&mut self, ev: Event) {
        match ev {
            Event::Created(info) => {
                let id = info.flow_id;
                debug!(flow = id, src = %info.src, dst = %info.dst, mss = info.mss, "flow created");
                let create = create_msg(&info, info.init_cwnd_bytes);
                let ccp = Flow::new(id, info.init_cwnd_bytes, info.mss);
                self.flows.insert(id, ShimFlow { ccp, info, rtt_us: 0 });
                self.send(&create);
            }
            Event::Ack(ack) => self.on_ack(ack),
            Event::Closed { flow_id } => {
                if self.flows.remove(&flow_id).is_some() {
                    debug!(flow = flow_id, "flow closed");
                    // libccp signals a closed flow with a MEASURE of no fields.
                    let close = Msg::Measure(Measure { sid: flow_id, program_uid: 0, fields: vec![] });
                    self.send(&close);
                }
                let _ = self.datapath.clear_directive(flow_id);
            }
        }
    }

    fn on_ack(&mut self, ack: AckSample) {
        self.totals.acks += 1;
        let Some(flow) = self.flows.get_mut(&ack.flow_id) else { return };
        if let Some(rtt) = ack.rtt_sample_us {
            flow.rtt_us = u64::from(rtt);
        } else if flow.rtt_us == 0 {
            flow.rtt_us = u64::from(ack.srtt_us);
        }
        let prims = Primitives {
            bytes_acked: u64::from(ack.bytes_acked),
            packets_acked: u64::from(ack.packets_acked),
            bytes_misordered: u64::from(ack.bytes_misordered),
            packets_misordered: u64::from(ack.packets_misordered),
            ecn_bytes: u64::from(ack.ecn_bytes),
            ecn_packets: u64::from(ack.ecn_packets),
            lost_pkts_sample: u64::from(ack.lost_pkts_sample),
            was_timeout: ack.was_timeout,
            rtt_sample_us: flow.rtt_us,
            rate_outgoing: ack.rate_outgoing,
            rate_incoming: ack.rate_incoming,
            bytes_in_flight: u64::from(ack.bytes_in_flight),
            packets_in_flight: u64::from(ack.packets_in_flight),
            bytes_pending: u64::from(ack.bytes_pending),
            now: ack.ts_ns / 1000,
        };
        // The kernel's window is the truth (it may come from the fallback), as libccp reads
        // snd_cwnd into Cwnd before each evaluation.
        let rate = flow.ccp.rate_bytes_per_s();
        flow.ccp.sync_datapath(ack.snd_cwnd_bytes, rate);
        let step = flow.ccp.on_ack(&prims, prims.now);
        self.apply(ack.flow_id, step);
    }

    fn tick(&mut self) {
        let now_us = self.now_us();
        let ids: Vec<u32> = self.flows.keys().copied().collect();
        for id in ids {
            let step = self.flows.get_mut(&id).expect("listed").ccp.on_tick(now_us);
            self.apply(id, step);
        }
    }

    /// Carry out what an evaluation or an agent message decided.
    fn apply(&mut self, sid: u32, step: Step) {
        if let Some(e) = step.error {
            warn!(sid, error = %e, "datapath program fault: evaluation discarded");
        }
        if step.cwnd_bytes.is_some() || step.rate_bytes_per_s.is_some() {
            let Some(flow) = self.flows.get(&sid) else { return };
            let rate = flow.ccp.rate_bytes_per_s();
            let cwnd = flow.ccp.cwnd_bytes();
            self.totals.directives += 1;
            if let Err(e) = self.datapath.set_directive(sid, Some(cwnd), (rate > 0).then_some(rate)) {
                error!(sid, error = %e, "cannot write the directive");
            }
        }
        if let Some(report) = step.report {
            if self.agent.is_some() {
                self.totals.reports += 1;
                self.unanswered_since.get_or_insert_with(Instant::now);
                self.send(&Msg::Measure(report));
            }
        }
    }
}

fn ipv4_u32(addr: &SocketAddr) -> u32 {
    match addr {
        SocketAddr::V4(a) => u32::from(*a.ip()),
        // CCP's CREATE carries IPv4 addresses only; IPv6 flows are announced without one.
        SocketAddr::V6(_) => 0,
    }
}

fn create_msg(info: &FlowInfo, cwnd_bytes: u32) -> Msg {
    Msg::Create(Create {
        sid: info.flow_id,
        init_cwnd: cwnd_bytes,
        mss: info.mss,
        src_ip: ipv4_u32(&info.src),
        src_port: u32::from(info.src.port()),
        dst_ip: ipv4_u32(&info.dst),
        dst_port: u32::from(info.dst.port()),
        cong_alg: String::new(),
    })
}

/// CPU time (user + system) this process has used.
fn process_cpu_time() -> Duration {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we own.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}
