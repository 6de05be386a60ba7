//! Heap bytes per flow of the kernel shim's session and of the agent in its process
//! (`ccswitch-kernel --agent-in-process`) at steady state, counted by a counting global
//! allocator: deterministic, no resident-set or wall-clock reading.
//!
//! A steady-state flow runs the standard program, folded in the datapath: the shim sees its
//! reports, not its ACKs. [`FLOWS`] flows go through the real per-flow code paths (CREATE, the
//! agent's CHANGE_PROG, a few reports each answered), and the live heap's growth over the flow
//! count is what they hold. The agent's part is the growth while it handles what the session
//! hands it; the rest is the session's.
//!
//! Besides the bytes asked for, each figure estimates glibc's footprint of them (a chunk is
//! the request plus an 8-byte header, rounded up to 16, at least 32), which is what a
//! process's resident set grows by. BPF maps are not counted here.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use ccswitch_agent::registry::Registry;
use ccswitch_agent::selector::policy::Policy;
use ccswitch_agent::server::Agent;
use ccswitch_ccp::agent_link::{AgentAddr, InProcessAddr, InProcessAgent, InProcessConnection};
use ccswitch_ccp::program::fold::FoldMode;
use ccswitch_ccp::session::{FlowDesc, Session, SessionDatapath};
use ccswitch_protocol::standard::report;

/// Flows per scenario: as many as the scale experiment's, so that hash tables are as full as
/// they are there (100k entries occupy 131,072 buckets).
const FLOWS: u32 = 100_000;
/// Reports per flow after its creation.
const REPORTS_PER_FLOW: u32 = 3;
/// Under a policy: enough for the selector's first decision (mystique's is after 8 samples, one
/// per report here) and its handover.
const REPORTS_PER_FLOW_UNDER_A_POLICY: u32 = 12;
/// What shim and agent together may hold per flow (glibc footprint, bytes), 1.25 KiB. Issue 21's
/// target is 2 KiB per flow for BPF maps, shim and agent; the maps took 0.39 KiB per flow in
/// `experiments/measured/scale-kernel-2026-11-26`, and a resident set has some slack over the
/// heap. Measured here: 2,369 bytes before issue 21, 978 after.
const BUDGET_BYTES_PER_FLOW: f64 = 1280.0;
/// The same under the mystique policy, whose selector keeps a window of 30 samples per flow:
/// 2.5 KiB (2,354 bytes measured, 2,642 before a sample took 32 bytes rather than 40).
const BUDGET_BYTES_PER_FLOW_UNDER_A_POLICY: f64 = 2560.0;
const MSS: u32 = 1448;
/// Reports handled between two flushes, as the kernel shim's routine chunk.
const CHUNK: u32 = 256;

// --- the counting allocator ---------------------------------------------------------------

/// Counts, per thread, the bytes live and glibc's estimated footprint of them; every scenario
/// runs on its test's thread, the agent in the shim's thread.
struct Counting;

thread_local! {
    static LIVE_BYTES: Cell<i64> = const { Cell::new(0) };
    static FOOTPRINT_BYTES: Cell<i64> = const { Cell::new(0) };
    static ALLOCATIONS: Cell<i64> = const { Cell::new(0) };
}

/// glibc malloc's chunk for a request of `size` bytes.
fn footprint(size: usize) -> i64 {
    ((size + 8 + 15) & !15).max(32) as i64
}

fn note(size: usize, sign: i64) {
    let _ = LIVE_BYTES.try_with(|c| c.set(c.get() + sign * size as i64));
    let _ = FOOTPRINT_BYTES.try_with(|c| c.set(c.get() + sign * footprint(size)));
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + sign));
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            note(layout.size(), 1);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            note(layout.size(), 1);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        note(layout.size(), -1);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            note(layout.size(), -1);
            note(new_size, 1);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// This thread's live heap.
#[derive(Clone, Copy)]
struct Heap {
    bytes: i64,
    footprint: i64,
    allocations: i64,
}

impl Heap {
    const ZERO: Heap = Heap { bytes: 0, footprint: 0, allocations: 0 };

    fn now() -> Self {
        Self {
            bytes: LIVE_BYTES.with(Cell::get),
            footprint: FOOTPRINT_BYTES.with(Cell::get),
            allocations: ALLOCATIONS.with(Cell::get),
        }
    }

    fn minus(self, other: Heap) -> Heap {
        Heap {
            bytes: self.bytes - other.bytes,
            footprint: self.footprint - other.footprint,
            allocations: self.allocations - other.allocations,
        }
    }

    fn plus(self, other: Heap) -> Heap {
        self.minus(Heap::ZERO.minus(other))
    }
}

thread_local! {
    /// The heap's growth while the agent handled messages, on this thread.
    static AGENT_GROWTH: Cell<Heap> = const { Cell::new(Heap::ZERO) };
}

/// Heap growth per flow.
#[derive(Clone, Copy, Debug)]
struct PerFlow {
    bytes: f64,
    footprint: f64,
    allocations: f64,
}

impl PerFlow {
    fn of(growth: Heap, flows: u32) -> Self {
        let per = |v: i64| v as f64 / f64::from(flows);
        Self { bytes: per(growth.bytes), footprint: per(growth.footprint), allocations: per(growth.allocations) }
    }

    fn print(&self, what: &str) {
        println!(
            "{what:>10}: {:7.1} bytes/flow asked, {:7.1} bytes/flow with malloc's chunks, {:4.1} allocations/flow",
            self.bytes, self.footprint, self.allocations
        );
    }
}

// --- the datapath and the agents ----------------------------------------------------------

/// A datapath that folds every standard program; it keeps each flow's fold start (the only
/// thing a report must carry back) in a table sized before counting starts.
struct FoldStarts {
    starts: Vec<u64>,
}

impl SessionDatapath for FoldStarts {
    fn set_directive(&mut self, _sid: u32, _cwnd: u32, _rate: Option<u64>) -> Result<()> {
        Ok(())
    }
    fn clear_directive(&mut self, _sid: u32) -> Result<()> {
        Ok(())
    }
    fn set_valid_until(&mut self, _deadline_ns: u64) -> Result<()> {
        Ok(())
    }
    fn set_fold(&mut self, sid: u32, fold: Option<(FoldMode, u64)>) -> Result<bool> {
        self.starts[sid as usize] = fold.map_or(0, |(_, start)| start);
        Ok(true)
    }
}

/// The agent, in this process, each of its connections counting the heap's growth while it
/// handles what the session hands it ([`AGENT_GROWTH`]).
struct CountedAgent(Arc<Agent>);

struct CountedConnection(Box<dyn InProcessConnection>);

impl InProcessAgent for CountedAgent {
    fn connect(&self) -> Box<dyn InProcessConnection> {
        Box::new(CountedConnection(Box::new(self.0.connect_in_process())))
    }
}

impl InProcessConnection for CountedConnection {
    fn exchange(&mut self, sent: &[u8], answers: &mut Vec<u8>) -> Result<(), String> {
        let before = Heap::now();
        let result = self.0.exchange(sent, answers);
        let growth = Heap::now().minus(before);
        AGENT_GROWTH.with(|g| g.set(g.get().plus(growth)));
        result
    }
}

fn addr(port: u32) -> SocketAddr {
    SocketAddr::from(([10, 0, (port >> 16) as u8, 1], port as u16))
}

/// A report of the standard program as the kernel folds it.
fn report_fields(round: u32) -> Vec<u64> {
    let mut fields = vec![0u64; report::COUNT];
    fields[report::ACKED] = u64::from(10 * MSS);
    fields[report::RTT] = 20_000;
    fields[report::MINRTT] = 19_000;
    fields[report::INFLIGHT] = u64::from(10 * MSS);
    fields[report::RATE] = 700_000;
    fields[report::NOW] = u64::from(round + 1) * 20_000;
    fields
}

// --- the scenario ----------------------------------------------------------------------------

/// What the session and the agent hold per flow once `FLOWS` flows are at steady state after
/// `reports` reports each (the agent under `policy`, if given, else on Cubic), and the resident
/// set's growth per flow meanwhile (bytes).
fn steady_state(policy: Option<&str>, reports: u32) -> (PerFlow, PerFlow, f64) {
    let policy = policy.map(|name| Arc::new(Policy::load(name).unwrap()));
    let under_a_policy = policy.is_some();
    let registry = Arc::new(Registry::new(policy));
    let agent = Agent::new("cubic".into(), Arc::clone(&registry), None).unwrap();
    let mut dp = FoldStarts { starts: vec![0; FLOWS as usize + 2] };
    let addr_of_agent = AgentAddr::InProcess(InProcessAddr(Arc::new(CountedAgent(agent))));
    let mut session = Session::new(addr_of_agent, Duration::from_secs(5));
    session.maybe_connect(&mut dp);
    assert!(session.connected());
    // One flow first, so that what every session and agent allocates once (the program
    // table, buffers) is not counted per flow.
    let init_cwnd_bytes = 10 * MSS;
    session.add_flow(&mut dp, FlowDesc { sid: FLOWS + 1, src: addr(80), dst: addr(1), mss: MSS, init_cwnd_bytes, handshake_rtt_us: 0 });
    session.flush(&mut dp);
    let rss_before = resident_kib();
    let before = Heap::now();
    let agent_before = AGENT_GROWTH.with(Cell::get);
    for sid in 1..=FLOWS {
        session.add_flow(&mut dp, FlowDesc { sid, src: addr(80), dst: addr(40_000 + sid), mss: MSS, init_cwnd_bytes, handshake_rtt_us: 0 });
        if sid % CHUNK == 0 {
            session.flush(&mut dp);
        }
    }
    session.flush(&mut dp);
    for round in 0..reports {
        for sid in 1..=FLOWS {
            let start = dp.starts[sid as usize];
            assert_ne!(start, 0, "flow {sid} is folded");
            session.on_folded_report(&mut dp, sid, start, &report_fields(round), 20 * MSS, None);
            if sid % CHUNK == 0 {
                session.flush(&mut dp);
            }
        }
        session.flush(&mut dp);
    }
    assert_eq!(session.reports_awaiting_answer(), 0, "every report answered");
    assert_eq!(session.flow_count(), FLOWS as usize + 1);
    assert_eq!(session.ticked_flows(), 0, "every flow folded");
    let agent = AGENT_GROWTH.with(Cell::get).minus(agent_before);
    let shim = Heap::now().minus(before).minus(agent);
    let resident = (resident_kib() - rss_before) as f64 * 1024.0 / f64::from(FLOWS);
    if under_a_policy {
        let handed_over = registry.list().iter().filter(|f| f.handovers == 1).count();
        assert_eq!(handed_over, FLOWS as usize, "the selector decided for every flow that reported");
    }
    (PerFlow::of(shim, FLOWS), PerFlow::of(agent, FLOWS), resident)
}

/// Shim and agent's figures, printed; their sum.
fn report(what: &str, reports: u32, shim: PerFlow, agent: PerFlow) -> PerFlow {
    let both = PerFlow {
        bytes: shim.bytes + agent.bytes,
        footprint: shim.footprint + agent.footprint,
        allocations: shim.allocations + agent.allocations,
    };
    println!("per-flow heap at steady state, {what}, {FLOWS} flows, standard program folded, {reports} reports each:");
    shim.print("shim");
    agent.print("agent");
    both.print("both");
    both
}

/// One test, so that the scenarios run one after the other, the first in a fresh process.
#[test]
fn shim_and_agent_hold_at_most_their_budget_per_flow_at_steady_state() {
    let (shim, agent, resident) = steady_state(None, REPORTS_PER_FLOW);
    let both = report("cubic", REPORTS_PER_FLOW, shim, agent);
    // A cross-check of the footprint's estimate, not held to the budget (the process's
    // resident set also holds what was freed and glibc kept, hence only in a fresh process).
    println!("{:>10}: {resident:7.1} bytes/flow of the process's resident set", "resident");
    assert!(
        both.footprint <= BUDGET_BYTES_PER_FLOW,
        "shim and agent hold {:.0} bytes per flow, more than the budget of {BUDGET_BYTES_PER_FLOW}",
        both.footprint
    );

    let (shim, agent, _) = steady_state(Some("mystique"), REPORTS_PER_FLOW_UNDER_A_POLICY);
    let both = report("mystique policy", REPORTS_PER_FLOW_UNDER_A_POLICY, shim, agent);
    assert!(
        both.footprint <= BUDGET_BYTES_PER_FLOW_UNDER_A_POLICY,
        "under a policy, shim and agent hold {:.0} bytes per flow, more than the budget of {BUDGET_BYTES_PER_FLOW_UNDER_A_POLICY}",
        both.footprint
    );
}

/// This process's resident set (`VmRSS`), KiB.
fn resident_kib() -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("a VmRSS line");
    line.split_whitespace().nth(1).and_then(|kib| kib.parse().ok()).expect("VmRSS in KiB")
}
