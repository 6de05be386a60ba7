//! Heap bytes per flow of the kernel shim's session and of the agent, at steady state, counted
//! by a counting global allocator (deterministic: no resident-set or wall-clock reading).
//!
//! A steady-state flow runs the standard program, folded in the datapath: the shim sees its
//! reports, not its ACKs. Each scenario creates [`FLOWS`] flows through the real per-flow code
//! paths (CREATE, the agent's CHANGE_PROG, a few reports each answered) and reads the live heap
//! growth over the flow count:
//!
//! - `shim`: a [`Session`] whose agent (in this process) keeps nothing per flow and answers as
//!   the real one does, so the bytes are the session's own;
//! - `agent`: the agent's connection fed the messages a session sends, with no session;
//! - `in-process`: a session with the real agent in its process (`ccswitch-kernel
//!   --agent-in-process`), both sides: what the budget holds.
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
use ccswitch_agent::server::Agent;
use ccswitch_ccp::agent_link::{AgentAddr, InProcessAddr, InProcessAgent, InProcessConnection};
use ccswitch_ccp::program::fold::FoldMode;
use ccswitch_ccp::session::{FlowDesc, Session, SessionDatapath};
use ccswitch_protocol::lang::{reg_type, Implicit};
use ccswitch_protocol::standard::{self, control, report};
use ccswitch_protocol::wire::{self, ChangeProg, Create, Measure, Msg, Ready, UpdateField, UpdateFields};

/// Flows per scenario: as many as the scale experiment's, so that hash tables are as full as
/// they are there (100k entries occupy 131,072 buckets).
const FLOWS: u32 = 100_000;
/// Reports per flow after its creation.
const REPORTS_PER_FLOW: u32 = 3;
/// What shim and agent together may hold per flow (glibc footprint, bytes), 1.25 KiB. Issue 21's
/// target is 2 KiB per flow for BPF maps, shim and agent; the maps took 0.39 KiB per flow in
/// `experiments/measured/scale-kernel-2026-11-26`, and a resident set has some slack over the
/// heap. Measured here: 2,369 bytes before issue 21, 1,026 after.
const BUDGET_BYTES_PER_FLOW: f64 = 1280.0;
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
    fn now() -> Self {
        Self {
            bytes: LIVE_BYTES.with(Cell::get),
            footprint: FOOTPRINT_BYTES.with(Cell::get),
            allocations: ALLOCATIONS.with(Cell::get),
        }
    }
}

/// Heap growth per flow since `before`.
#[derive(Clone, Copy, Debug)]
struct PerFlow {
    bytes: f64,
    footprint: f64,
    allocations: f64,
}

impl PerFlow {
    fn since(before: Heap, flows: u32) -> Self {
        let now = Heap::now();
        let per = |a: i64, b: i64| (a - b) as f64 / f64::from(flows);
        Self {
            bytes: per(now.bytes, before.bytes),
            footprint: per(now.footprint, before.footprint),
            allocations: per(now.allocations, before.allocations),
        }
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
struct Folding {
    starts: Vec<u64>,
}

impl SessionDatapath for Folding {
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

/// The real agent, in this process.
struct RealAgent(Arc<Agent>);

impl InProcessAgent for RealAgent {
    fn connect(&self) -> Box<dyn InProcessConnection> {
        Box::new(self.0.connect_in_process())
    }
}

fn real_agent() -> Arc<Agent> {
    Agent::new("cubic".into(), Arc::new(Registry::new(None)), None).unwrap()
}

/// An agent that keeps nothing per flow and answers as the real one does for a Cubic flow:
/// the standard program with a window and a loss window at CREATE, a window and a loss window
/// for each report.
struct StatelessAgent;

struct StatelessConnection {
    installed: bool,
}

impl InProcessAgent for StatelessAgent {
    fn connect(&self) -> Box<dyn InProcessConnection> {
        Box::new(StatelessConnection { installed: false })
    }
}

fn window_updates() -> Vec<UpdateField> {
    vec![
        UpdateField { reg_type: reg_type::IMPLICIT, reg_index: Implicit::Cwnd as u32, value: u64::from(20 * MSS) },
        UpdateField { reg_type: reg_type::NONVOLATILE_CONTROL, reg_index: control::LOSS_CWND as u32, value: u64::from(10 * MSS) },
    ]
}

impl InProcessConnection for StatelessConnection {
    fn exchange(&mut self, mut sent: &[u8], answers: &mut Vec<u8>) -> Result<(), String> {
        while !sent.is_empty() {
            let (msg, used) = wire::decode(sent).map_err(|e| e.to_string())?;
            sent = &sent[used..];
            let answer = match msg {
                Msg::Create(c) => {
                    if !self.installed {
                        answers.extend_from_slice(standard::INSTALL_MESSAGE);
                        self.installed = true;
                    }
                    Msg::ChangeProg(ChangeProg { sid: c.sid, program_uid: standard_uid(), updates: window_updates() })
                }
                Msg::Measure(m) if !m.fields.is_empty() => Msg::UpdateFields(UpdateFields { sid: m.sid, updates: window_updates() }),
                _ => continue,
            };
            answer.encode_into(answers).unwrap();
        }
        Ok(())
    }
}

fn standard_uid() -> u32 {
    match wire::decode(standard::INSTALL_MESSAGE).unwrap().0 {
        Msg::InstallExpr(i) => i.program_uid,
        _ => panic!("the standard program is an INSTALL_EXPR"),
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

// --- the scenarios --------------------------------------------------------------------------

/// `FLOWS` flows through a session whose agent is `agent`, at steady state: heap per flow.
fn session_scenario(agent: Arc<dyn InProcessAgent>) -> PerFlow {
    let mut dp = Folding { starts: vec![0; FLOWS as usize + 2] };
    let mut session = Session::new(AgentAddr::InProcess(InProcessAddr(agent)), Duration::from_secs(5));
    session.maybe_connect(&mut dp);
    assert!(session.connected());
    // One flow first, so that what every session and agent allocates once (the program
    // table, buffers) is not counted per flow.
    let init_cwnd_bytes = 10 * MSS;
    session.add_flow(&mut dp, FlowDesc { sid: FLOWS + 1, src: addr(80), dst: addr(1), mss: MSS, init_cwnd_bytes });
    session.flush(&mut dp);
    let before = Heap::now();
    for sid in 1..=FLOWS {
        session.add_flow(&mut dp, FlowDesc { sid, src: addr(80), dst: addr(40_000 + sid), mss: MSS, init_cwnd_bytes });
        if sid % CHUNK == 0 {
            session.flush(&mut dp);
        }
    }
    session.flush(&mut dp);
    for round in 0..REPORTS_PER_FLOW {
        for sid in 1..=FLOWS {
            let start = dp.starts[sid as usize];
            assert_ne!(start, 0, "flow {sid} is folded");
            session.on_folded_report(&mut dp, sid, start, report_fields(round), 20 * MSS);
            if sid % CHUNK == 0 {
                session.flush(&mut dp);
            }
        }
        session.flush(&mut dp);
    }
    assert_eq!(session.reports_awaiting_answer(), 0, "every report answered");
    assert_eq!(session.flow_count(), FLOWS as usize + 1);
    assert_eq!(session.ticked_flows(), 0, "every flow folded");
    let per_flow = PerFlow::since(before, FLOWS);
    drop(session);
    per_flow
}

/// The agent alone: its in-process connection fed what a session sends.
fn agent_scenario() -> PerFlow {
    let agent = real_agent();
    let mut conn = agent.connect_in_process();
    let mut sent = Vec::new();
    let mut answers = Vec::new();
    let mut exchange = |sent: &mut Vec<u8>, answers: &mut Vec<u8>| {
        conn.exchange(sent, answers).unwrap();
        sent.clear();
        answers.clear();
    };
    let create = |sid: u32| {
        Msg::Create(Create {
            sid,
            init_cwnd: 10 * MSS,
            mss: MSS,
            src_ip: 0x0a00_0001,
            src_port: 80,
            dst_ip: 0x0a00_0002 + (sid >> 16),
            dst_port: 40_000 + sid,
            cong_alg: String::new(),
        })
    };
    Msg::Ready(Ready { id: 1 }).encode_into(&mut sent).unwrap();
    create(FLOWS + 1).encode_into(&mut sent).unwrap();
    exchange(&mut sent, &mut answers);
    let uid = standard_uid();
    let before = Heap::now();
    for sid in 1..=FLOWS {
        create(sid).encode_into(&mut sent).unwrap();
        if sid % CHUNK == 0 {
            exchange(&mut sent, &mut answers);
        }
    }
    exchange(&mut sent, &mut answers);
    for round in 0..REPORTS_PER_FLOW {
        for sid in 1..=FLOWS {
            Msg::Measure(Measure { sid, program_uid: uid, fields: report_fields(round) }).encode_into(&mut sent).unwrap();
            if sid % CHUNK == 0 {
                exchange(&mut sent, &mut answers);
            }
        }
        exchange(&mut sent, &mut answers);
    }
    PerFlow::since(before, FLOWS)
}

/// One test, so that the scenarios run one after the other on one thread.
#[test]
fn shim_and_agent_hold_at_most_their_budget_per_flow_at_steady_state() {
    let shim = session_scenario(Arc::new(StatelessAgent));
    let agent = agent_scenario();
    let both = session_scenario(Arc::new(RealAgent(real_agent())));
    println!("per-flow heap at steady state, {FLOWS} flows, standard program folded, {REPORTS_PER_FLOW} reports each:");
    shim.print("shim");
    agent.print("agent");
    both.print("in-process");
    assert!(
        both.footprint <= BUDGET_BYTES_PER_FLOW,
        "shim and agent hold {:.0} bytes per flow, more than the budget of {BUDGET_BYTES_PER_FLOW}",
        both.footprint
    );
}
