//! Loading and registering the struct_ops congestion control, the maps between it and the
//! shim (directives, config, counters), reading its two lanes of records, and handing sockets back to
//! the built-in algorithm when it goes.

use std::mem::{ManuallyDrop, MaybeUninit};
use std::os::fd::{AsFd, RawFd};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use ccswitch_ccp::program::fold::{FoldMode, FoldReporting};
use ccswitch_datapath_support::mapped::{DirectiveSlots, MappedArray};
use ccswitch_datapath_support::object::SkeletonStorage;
use ccswitch_datapath_support::ring::EventRing;
use ccswitch_datapath_support::wait::{Waiter, Woken};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, OpenObject};

use crate::events::{decode, KernelEvent};
use crate::skel::{KernelSkel, KernelSkelBuilder};
use crate::{abi, teardown, vm};
use ccswitch_ccp::session::ProgramRun;

/// Name under which the congestion control registers by default.
pub const DEFAULT_CC_NAME: &str = "ccswitch";

/// In-kernel algorithm that carries a flow while no agent directive applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fallback {
    /// Reno via the kernel's `tcp_reno_*` kfuncs, with PRR during recovery.
    #[default]
    Reno,
    /// Cubic via the kernel's `cubictcp_*` kfuncs (state in icsk_ca_priv).
    Cubic,
}

impl Fallback {
    fn raw(self) -> u32 {
        match self {
            Fallback::Reno => abi::FALLBACK_RENO,
            Fallback::Cubic => abi::FALLBACK_CUBIC,
        }
    }

    /// The kernel's own congestion control of the same algorithm, which sockets and
    /// namespace defaults are handed back to when the datapath goes.
    pub fn builtin_name(self) -> &'static str {
        match self {
            Fallback::Reno => "reno",
            Fallback::Cubic => "cubic",
        }
    }
}

/// Options for [`KernelDatapath::load`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadOptions {
    /// Fallback algorithm for flows created from now on.
    pub fallback: Fallback,
    /// Congestion-control name to register (at most 15 bytes). Defaults to
    /// [`DEFAULT_CC_NAME`]; tests use unique names so that they can run
    /// beside a production instance.
    pub cc_name: String,
    /// Flows that can hold a directive at once (the directives map). Beyond
    /// it a flow stays on the fallback: [`KernelDatapath::set_directive`]
    /// fails with [`DirectiveSlotBusy`](crate::DirectiveSlotBusy). The BPF
    /// program keeps as many flows' states by slot (192 bytes each); a flow
    /// whose entry another live flow holds keeps its state in socket storage.
    pub max_flows: u32,
    /// Size of the routine lane's ring buffer, bytes: a power of two, at least a page. The
    /// urgent lane gets a quarter of it (at least a page). A full ring loses records
    /// (counted in [`KernelStats::ring_drops`]).
    pub ring_bytes: u32,
    /// Longest a routine record waits in its lane before the next one wakes the shim (the
    /// urgent lane always wakes it, and the report of a flow reporting per ACK arms a 1-ms
    /// timer).
    pub report_delay: Duration,
    /// Flows whose (non-standard) program the BPF interpreter can run at once;
    /// beyond it their programs run in the shim, as a logged warning says.
    pub max_vm_flows: u32,
    /// Run programs other than the standard one in the BPF interpreter
    /// ([`KernelDatapath::run_program`]); off, they run in the shim's interpreter.
    pub programs_in_kernel: bool,
}

/// Default [`LoadOptions::max_flows`].
pub const DEFAULT_MAX_FLOWS: u32 = 100_000;
/// Default [`LoadOptions::ring_bytes`].
pub const DEFAULT_RING_BYTES: u32 = 4 << 20;
/// Default [`LoadOptions::report_delay`].
pub const DEFAULT_REPORT_DELAY: Duration = Duration::from_millis(5);
/// Default [`LoadOptions::max_vm_flows`] (1.5 KB each).
pub const DEFAULT_MAX_VM_FLOWS: u32 = 4096;

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            fallback: Fallback::Reno,
            cc_name: DEFAULT_CC_NAME.to_string(),
            max_flows: DEFAULT_MAX_FLOWS,
            ring_bytes: DEFAULT_RING_BYTES,
            report_delay: DEFAULT_REPORT_DELAY,
            max_vm_flows: DEFAULT_MAX_VM_FLOWS,
            programs_in_kernel: true,
        }
    }
}

/// Counters from the kernel side plus the shim's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KernelStats {
    /// Records submitted to the ring buffer.
    pub events: u64,
    /// Records lost because the ring buffer was full.
    pub ring_drops: u64,
    pub flows_created: u64,
    pub flows_closed: u64,
    /// ACKs on which an agent directive set cwnd.
    pub acks_directive: u64,
    /// ACKs on which the fallback algorithm set cwnd...
    pub acks_fallback: u64,
    /// ... of them, before the agent's first directive for the flow...
    pub acks_fallback_awaiting: u64,
    /// ... or past the agent's deadline (the rest: a directed flow without a directive now).
    pub acks_fallback_agent_late: u64,
    /// ACKs on which the kernel's interpreter ran a flow's program...
    pub acks_vm: u64,
    /// ... and evaluations a fault aborted.
    pub vm_faults: u64,
    /// Flows that got their first directive.
    pub flows_directed: u64,
    /// Directed flows that fell back: the agent's deadline passed...
    pub flows_fell_back_agent_late: u64,
    /// ... or their directive was gone.
    pub flows_fell_back_no_directive: u64,
    /// Fallen-back flows directed again.
    pub flows_rejoined: u64,
    /// ACKs folded in the kernel (no record to the shim).
    pub acks_folded: u64,
    /// Reports of folded flows.
    pub reports: u64,
    /// Wake-ups the routine lane's timer forced.
    pub routine_timer_wakeups: u64,
    /// Records userspace could not decode (unknown kind or wrong size).
    pub malformed: u64,
}

/// The id of one loaded struct_ops program (see `bpftool prog show id N`;
/// with `kernel.bpf_stats_enabled=1` its run_time_ns/run_cnt count).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgId {
    /// Program name, e.g. "ccsw_cong_control".
    pub name: String,
    pub id: u32,
}

/// CLOCK_MONOTONIC now, nanoseconds: the clock of `bpf_ktime_get_ns`,
/// hence of [`KernelDatapath::set_agent_valid_until`] deadlines.
pub use ccswitch_ccp::session::monotonic_now_ns;

/// The loaded and registered kernel datapath. Dropping it hands every
/// namespace default and every socket still on it back to the built-in
/// algorithm of the fallback (see `teardown.rs`), unregisters the congestion
/// control, unloads everything and warns if the kernel still holds any of it.
pub struct KernelDatapath {
    // Drop order (see Drop): the hand-back runs through `hand_back_link`,
    // then the registration goes, then the ring buffer, the skeleton and
    // the storage it points into.
    link: ManuallyDrop<Link>,
    hand_back_link: ManuallyDrop<Link>,
    /// The two lanes of records (see `kernel.h`).
    urgent: ManuallyDrop<EventRing<KernelEvent>>,
    routine: ManuallyDrop<EventRing<KernelEvent>>,
    /// Holds both lanes' descriptors: what the shim sleeps on.
    waiter: Waiter,
    skel: ManuallyDrop<KernelSkel<'static>>,
    fallback: Fallback,
    deadline_ns: std::cell::Cell<u64>,
    /// The config's `routine_read_by_ns` (see [`KernelDatapath::promise_routine_read`]).
    routine_read_by_ns: std::cell::Cell<u64>,
    report_delay: Duration,
    max_flows: u32,
    directives_refused: std::cell::Cell<u64>,
    /// The directives array and the config, mapped: writing them is a store, not a syscall.
    directives: DirectiveSlots<abi::KernelDirectiveSlot>,
    config: MappedArray<abi::KernelConfig>,
    /// Flows whose program the BPF interpreter runs.
    vm: std::cell::RefCell<vm::VmRuns>,
    programs_in_kernel: bool,
    cc_name: String,
    prog_ids: Vec<ProgId>,
    handed_back: bool,
    /// Last: freed after Drop has dropped the skeleton that borrows it.
    _object: SkeletonStorage,
}

impl Drop for KernelDatapath {
    fn drop(&mut self) {
        let (report, moved) = self.hand_back();
        if report.defaults_reset > 0 || moved > 0 {
            tracing::info!(
                cc = %self.cc_name, to = self.fallback.builtin_name(), sockets = moved,
                namespace_defaults = report.defaults_reset, namespaces = report.namespaces,
                "handed back to the built-in algorithm"
            );
        }
        for failure in &report.failures {
            tracing::warn!(cc = %self.cc_name, "hand-back: {failure}");
        }
        let map_id = self.struct_ops_map_id().ok();
        let prog_ids: Vec<u32> = self.prog_ids.iter().map(|p| p.id).collect();
        // SAFETY: each field is dropped exactly once, in dependency order; `_object`, which
        // the skeleton borrows, goes after this function.
        unsafe {
            ManuallyDrop::drop(&mut self.link);
            ManuallyDrop::drop(&mut self.hand_back_link);
            ManuallyDrop::drop(&mut self.urgent);
            ManuallyDrop::drop(&mut self.routine);
            ManuallyDrop::drop(&mut self.skel);
        }
        let (map_left, progs_left) = teardown::wait_unloaded(map_id, &prog_ids, UNLOAD_WAIT);
        if map_left.is_some() || !progs_left.is_empty() {
            tracing::warn!(
                cc = %self.cc_name, map_id = ?map_left, prog_ids = ?progs_left,
                "still loaded after unregistering: held by a socket or namespace default that \
                 appeared during the hand-back, or by the reference the kernel leaks when it \
                 refuses this congestion control to a namespace (after \
                 net.ipv4.tcp_allowed_congestion_control was rewritten without it); the first \
                 goes when the socket closes, the second only at reboot"
            );
        }
    }
}

/// How long dropping the datapath waits for the kernel to free the map and programs (it
/// does so from a work queue, after RCU grace periods).
const UNLOAD_WAIT: Duration = Duration::from_secs(3);

pub use crate::teardown::HandBack;

impl KernelDatapath {
    /// Loads the BPF object, writes the config (agent deadline 0: every
    /// flow starts in fallback) and registers the congestion control.
    /// Needs root (CAP_BPF + CAP_NET_ADMIN).
    pub fn load(opts: LoadOptions) -> Result<KernelDatapath> {
        let page = 4096;
        if !opts.ring_bytes.is_power_of_two() || opts.ring_bytes < page {
            bail!("ring buffer size must be a power of two of at least {page} bytes: {}", opts.ring_bytes);
        }
        if opts.max_flows == 0 || opts.max_vm_flows == 0 {
            bail!("max_flows and max_vm_flows must be at least 1");
        }
        if opts.cc_name.is_empty() || opts.cc_name.len() > 15 {
            bail!(
                "congestion control name must be 1..=15 bytes: {:?}",
                opts.cc_name
            );
        }
        let object = SkeletonStorage::new();
        // SAFETY: what borrows it either goes into the datapath, which drops it first, or is
        // dropped inside load_into when that fails.
        let storage = unsafe { object.open_into() };
        let (skel, link, hand_back_link, (urgent, routine, waiter), prog_ids, directives, config, vm_flows) =
            Self::load_into(storage, &opts)?;
        Ok(KernelDatapath {
            link: ManuallyDrop::new(link),
            hand_back_link: ManuallyDrop::new(hand_back_link),
            urgent: ManuallyDrop::new(urgent),
            routine: ManuallyDrop::new(routine),
            waiter,
            skel: ManuallyDrop::new(skel),
            fallback: opts.fallback,
            deadline_ns: std::cell::Cell::new(0),
            routine_read_by_ns: std::cell::Cell::new(0),
            report_delay: opts.report_delay,
            max_flows: opts.max_flows,
            directives_refused: std::cell::Cell::new(0),
            directives,
            config,
            vm: std::cell::RefCell::new(vm::VmRuns::new(vm_flows)),
            programs_in_kernel: opts.programs_in_kernel,
            cc_name: opts.cc_name,
            prog_ids,
            handed_back: false,
            _object: object,
        })
    }

    #[allow(clippy::type_complexity)]
    fn load_into(
        storage: &'static mut MaybeUninit<OpenObject>,
        opts: &LoadOptions,
    ) -> Result<(
        KernelSkel<'static>,
        Link,
        Link,
        (EventRing<KernelEvent>, EventRing<KernelEvent>, Waiter),
        Vec<ProgId>,
        DirectiveSlots<abi::KernelDirectiveSlot>,
        MappedArray<abi::KernelConfig>,
        MappedArray<abi::VmFlow>,
    )> {
        let mut open = KernelSkelBuilder::default()
            .open(storage)
            .context("opening the ccswitch BPF object")?;
        {
            let ops = open.struct_ops.ccswitch_mut();
            ops.name = [0; 16];
            for (dst, src) in ops.name.iter_mut().zip(opts.cc_name.bytes()) {
                *dst = src as _;
            }
            if opts.fallback == Fallback::Reno {
                // Only Cubic's fallback reads these events; leaving them out spares every ACK
                // (pkts_acked) and every send after idle (cwnd_event) a call into BPF.
                ops.pkts_acked = std::ptr::null_mut();
                ops.cwnd_event = std::ptr::null_mut();
                open.progs.ccsw_pkts_acked.set_autoload(false);
                open.progs.ccsw_cwnd_event.set_autoload(false);
            }
            open.maps.ccsw_directives.set_max_entries(opts.max_flows).context("sizing the directives map")?;
            open.maps.ccsw_flow_states.set_max_entries(opts.max_flows).context("sizing the flow states map")?;
            open.maps.ccsw_events.set_max_entries(opts.ring_bytes).context("sizing the routine lane")?;
            open.maps.ccsw_urgent.set_max_entries((opts.ring_bytes / 4).max(4096)).context("sizing the urgent lane")?;
            open.maps.ccsw_vm_flows.set_max_entries(opts.max_vm_flows).context("sizing the interpreter's flow map")?;
            let names = open.maps.rodata_data.as_deref_mut().context("BPF object without .rodata")?;
            names.ccsw_max_flows = opts.max_flows;
            names.ccsw_report_delay_ns = opts.report_delay.as_nanos().try_into().unwrap_or(u64::MAX);
            for (dst, src) in names.ccsw_cc_name.iter_mut().zip(opts.cc_name.bytes()) {
                *dst = src as _;
            }
        }
        let mut skel = open
            .load()
            .context("loading the ccswitch BPF programs (verifier or kfunc availability)")?;

        let cfg = abi::KernelConfig {
            agent_valid_until_ns: 0,
            routine_read_by_ns: 0,
            fallback: opts.fallback.raw(),
            _pad0: 0,
        };
        skel.maps
            .ccsw_config
            .update(&0u32.to_ne_bytes(), abi::as_bytes(&cfg), MapFlags::ANY)
            .context("writing the config map")?;

        let p = &skel.progs;
        let mut prog_ids = Vec::new();
        for prog in [
            &p.ccsw_init,
            &p.ccsw_cong_control,
            &p.ccsw_ssthresh,
            &p.ccsw_undo_cwnd,
            &p.ccsw_set_state,
            &p.ccsw_cwnd_event,
            &p.ccsw_pkts_acked,
            &p.ccsw_release,
            &p.ccsw_hand_back,
            &p.ccsw_fold_test,
            &p.ccsw_cwnd_pkts_test,
            &p.ccsw_vm_test,
        ] {
            if !prog.autoload() {
                continue; // left out for this fallback
            }
            let id = libbpf_rs::Program::id_from_fd(prog.as_fd()).context("program id")?;
            prog_ids.push(ProgId {
                name: prog.name().to_string_lossy().into_owned(),
                id,
            });
        }

        let (urgent, routine) = (EventRing::new(&skel.maps.ccsw_urgent, decode)?, EventRing::new(&skel.maps.ccsw_events, decode)?);
        let waiter = Waiter::new(&[urgent.epoll_fd(), routine.epoll_fd()]).context("waiting on the lanes")?;
        let lanes = (urgent, routine, waiter);

        let hand_back_link = skel.progs.ccsw_hand_back.attach().context("attaching the socket iterator")?;
        if teardown::cc_registered(&opts.cc_name) {
            bail!(
                "congestion control {:?} is already registered (another ccswitch-kernel?); \
                 choose another --cc-name",
                opts.cc_name
            );
        }
        // Sockets and namespace defaults can still be on a killed predecessor of the same
        // name, holding its programs loaded: hand them back before registering anew.
        let builtin = opts.fallback.builtin_name();
        let (report, moved) = Self::hand_back_with(&mut skel, &hand_back_link, &opts.cc_name, builtin);
        if report.defaults_reset > 0 || moved > 0 {
            tracing::info!(
                cc = %opts.cc_name, to = builtin, sockets = moved, namespace_defaults = report.defaults_reset,
                "handed back what a previous, killed instance left behind"
            );
        }

        let link = skel
            .maps
            .ccswitch
            .attach_struct_ops()
            .with_context(|| format!("registering congestion control {:?}", opts.cc_name))?;
        let directives = MappedArray::new(skel.maps.ccsw_directives.as_fd(), opts.max_flows as usize)
            .context("mapping the directives array")?;
        let config = MappedArray::new(skel.maps.ccsw_config.as_fd(), 1).context("mapping the config")?;
        let directives = DirectiveSlots::new(directives);
        let vm_flows = MappedArray::new(skel.maps.ccsw_vm_flows.as_fd(), opts.max_vm_flows as usize)
            .context("mapping the interpreter's flow map")?;
        Ok((skel, link, hand_back_link, lanes, prog_ids, directives, config, vm_flows))
    }

    /// Moves every namespace default and every socket on this congestion control to the
    /// built-in algorithm of the fallback, once (see `teardown.rs`). Returns what was done and
    /// the number of sockets moved.
    fn hand_back(&mut self) -> (HandBack, u64) {
        if std::mem::replace(&mut self.handed_back, true) {
            return (HandBack::default(), 0);
        }
        let builtin = self.fallback.builtin_name();
        Self::hand_back_with(&mut self.skel, &self.hand_back_link, &self.cc_name, builtin)
    }

    fn hand_back_with(skel: &mut KernelSkel<'_>, iter_link: &Link, cc_name: &str, builtin: &str) -> (HandBack, u64) {
        let Some(bss) = skel.maps.bss_data.as_deref_mut() else {
            return (HandBack { failures: vec!["BPF object without .bss".into()], ..Default::default() }, 0);
        };
        bss.ccsw_handback_cc = [0; 16];
        for (dst, src) in bss.ccsw_handback_cc.iter_mut().zip(builtin.bytes()) {
            *dst = src as _;
        }
        let before = bss.ccsw_handed_back;
        let report = teardown::hand_back(cc_name, builtin, iter_link);
        // The programs update the counter through the same memory-mapped page.
        let after = unsafe { std::ptr::read_volatile(&bss.ccsw_handed_back) };
        (report, after - before)
    }

    /// Name of the registered congestion control.
    pub fn cc_name(&self) -> &str {
        &self.cc_name
    }

    /// Waits up to `timeout` for a wake-up from either lane, then hands every available
    /// record to `f`, in time order. A zero timeout only drains.
    pub fn poll(&mut self, timeout: Duration, f: impl FnMut(KernelEvent)) -> Result<()> {
        if !timeout.is_zero() {
            self.wait(None, timeout);
        }
        let mut events = Vec::new();
        let mut routine = Vec::new();
        self.read_lanes(|e| events.push(e), |e| routine.push(e))?;
        events.append(&mut routine);
        events.sort_by_key(KernelEvent::ts_ns);
        events.into_iter().for_each(f);
        Ok(())
    }

    /// Reads both lanes without waiting, handing urgent records to `urgent` and routine ones
    /// to `routine`, each in its lane's order. What is read holds every record that came
    /// before any record read, of the same flow: every urgent record made before a routine
    /// one read (its flow's CREATE, for one), every routine record made before an urgent
    /// one read (the ACKs before a loss). A flow's records made one after the other, their
    /// times order them across the lanes.
    pub fn read_lanes(&mut self, mut urgent: impl FnMut(KernelEvent), mut routine: impl FnMut(KernelEvent)) -> Result<()> {
        // A routine read, then urgent reads each followed by a routine read until an urgent
        // read finds nothing: that last one follows every routine read.
        self.routine.poll(Duration::ZERO, &mut routine)?;
        loop {
            let mut found = false;
            self.urgent.poll(Duration::ZERO, |e| {
                found = true;
                urgent(e)
            })?;
            if !found {
                return Ok(());
            }
            self.routine.poll(Duration::ZERO, &mut routine)?;
        }
    }

    /// Sleeps until a lane wakes the shim, `extra` is readable, or `timeout` passes.
    pub fn wait(&self, extra: Option<RawFd>, timeout: Duration) -> Woken {
        self.waiter.wait(extra, timeout)
    }

    /// The urgent lane's file descriptor (an epoll fd), readable when it woke the shim.
    pub fn urgent_fd(&self) -> RawFd {
        self.urgent.epoll_fd()
    }

    /// Installs (or replaces) the directive of `flow_id`: a congestion
    /// window in bytes (converted to max(cwnd/mss, 2) packets, clamped to
    /// snd_cwnd_clamp) and/or a pacing rate in bytes/s (TCP internal
    /// pacing). `None` leaves that part to the fallback algorithm. Each call
    /// moves the directive's `cwnd_seq`, which ends a window set by a loss in
    /// the fold (see [`set_fold`](Self::set_fold)).
    pub fn set_directive(
        &self,
        flow_id: u32,
        cwnd_bytes: Option<u32>,
        pacing_rate: Option<u64>,
    ) -> Result<()> {
        self.update_directive(flow_id, |d| {
            d.cwnd_bytes = cwnd_bytes.unwrap_or(0);
            d.pacing_rate = pacing_rate.unwrap_or(0);
            d.cwnd_seq = d.cwnd_seq.wrapping_add(1);
        })
        .with_context(|| format!("setting the directive of flow {flow_id}"))
    }

    /// The agent set the window and/or the rate of `flow_id`, whose program the interpreter
    /// runs: the interpreter applies each part given once, on the next ACK (the program owns
    /// them in between).
    pub fn set_program_window(&self, flow_id: u32, cwnd_bytes: Option<u32>, pacing_rate: Option<u64>) -> Result<()> {
        self.update_directive(flow_id, |d| {
            if let Some(c) = cwnd_bytes {
                d.cwnd_bytes = c;
                d.cwnd_seq = d.cwnd_seq.wrapping_add(1);
            }
            if let Some(r) = pacing_rate {
                d.pacing_rate = r;
            }
        })
        .with_context(|| format!("setting the window of flow {flow_id}'s program"))?;
        let parts = if cwnd_bytes.is_some() { abi::VM_SET_CWND } else { 0 } | if pacing_rate.is_some() { abi::VM_SET_RATE } else { 0 };
        self.vm.borrow().flag_window(flow_id, parts);
        Ok(())
    }

    /// Runs `flow_id`'s program (any but the standard one) in the BPF interpreter from
    /// `run`'s registers (`Some`): its ACKs no longer reach the shim, only the program's
    /// reports ([`KernelEvent::ProgramReport`]). Returns false when [`LoadOptions::programs_in_kernel`]
    /// is off, and, having logged why once per program, when the program does not fit the
    /// interpreter or its tables are full: the flow then stays with the shim's interpreter. `None` stops and sends every ACK again.
    /// Like a window, it applies only while the agent deadline holds.
    pub fn run_program(&self, flow_id: u32, run: Option<&ProgramRun<'_>>) -> Result<bool> {
        let Some(run) = run else {
            if self.vm.borrow_mut().stop(flow_id) {
                self.update_directive(flow_id, |d| {
                    if d.fold == abi::FOLD_VM {
                        d.fold = abi::FOLD_OFF;
                    }
                })?;
            }
            return Ok(false);
        };
        if !self.programs_in_kernel {
            return Ok(false);
        }
        let install = |slot: u32, p: &abi::VmProgram| self.install_vm_program(slot, p);
        let Some(entry) = self.vm.borrow_mut().start(flow_id, run, install)? else {
            self.run_program(flow_id, None)?;
            return Ok(false);
        };
        let started = self.update_directive(flow_id, |d| {
            d.fold = abi::FOLD_VM;
            d.vm_slot_or_agg_rate = entry;
            d.fold_start_us = run.start_us;
        });
        if let Err(e) = started {
            self.vm.borrow_mut().stop(flow_id);
            return Err(e.context(format!("running the program of flow {flow_id}")));
        }
        Ok(true)
    }

    /// The agent set control registers (index, value) of `flow_id`'s running program.
    pub fn set_program_controls(&self, flow_id: u32, updates: &[(usize, u64)]) {
        self.vm.borrow().set_controls(flow_id, updates);
    }

    /// Folds the standard program for `flow_id` in the kernel (`Some`): its ACKs no longer
    /// reach the shim, only the program's reports ([`KernelEvent::Report`]). A new `start_us` (µs,
    /// CLOCK_MONOTONIC) restarts the program: registers reset, `Micros` counts from it.
    /// `None` sends every ACK again. Like a window, it applies only while the agent deadline
    /// holds. The mode's `loss_cwnd_bytes` (the program's `Control.loss_cwnd`) is the window
    /// an ACK that reveals a loss sets at once, and its `growth` the step an ACK sets once
    /// enough has been acknowledged, or the slow start it grows on every ACK; either holds
    /// until the next window is written.
    pub fn set_fold(&self, flow_id: u32, fold: Option<(FoldMode, u64)>) -> Result<()> {
        if fold.is_some() {
            self.vm.borrow_mut().stop(flow_id);
        }
        self.update_directive(flow_id, |d| match fold {
            Some((mode, start_us)) => {
                match mode.reporting {
                    FoldReporting::PerRtt { window_use_pct, idle_report_us } => {
                        d.fold = abi::FOLD_PER_RTT;
                        // Past 65,535 % the window never binds.
                        d.fold_window_pct = u16::try_from(window_use_pct).unwrap_or(u16::MAX);
                        // Past 71 minutes is never, for a report interval.
                        d.fold_idle_us = u32::try_from(idle_report_us).unwrap_or(u32::MAX);
                    }
                    FoldReporting::PerAck => d.fold = abi::FOLD_PER_ACK,
                }
                d.fold_start_us = start_us;
                d.loss_cwnd_bytes = mode.loss_cwnd_bytes;
                d.vm_slot_or_agg_rate = mode.agg_rate;
                abi::set_growth(d, &mode.growth);
            }
            None => {
                d.fold = abi::FOLD_OFF;
                d.fold_start_us = 0;
                d.loss_cwnd_bytes = 0;
                d.grow_cwnd_bytes = 0;
                d.vm_slot_or_agg_rate = 0;
            }
        })
        .with_context(|| format!("setting the fold of flow {flow_id}"))
    }

    fn update_directive(&self, flow_id: u32, change: impl FnOnce(&mut abi::KernelDirectiveSlot)) -> Result<()> {
        self.directives.update(flow_id, change).map_err(|busy| {
            self.directives_refused.set(self.directives_refused.get() + 1);
            busy.into()
        })
    }

    /// Removes the directive of `flow_id` (the flow returns to fallback).
    /// Removing a directive that does not exist is not an error.
    pub fn clear_directive(&self, flow_id: u32) -> Result<()> {
        self.directives.clear(flow_id);
        self.vm.borrow_mut().stop(flow_id);
        Ok(())
    }

    /// The directive `flow_id` holds now, if any.
    pub fn directive(&self, flow_id: u32) -> Option<abi::KernelDirectiveSlot> {
        self.directives.get(flow_id)
    }

    /// Sets the CLOCK_MONOTONIC deadline (ns, see [`monotonic_now_ns`])
    /// until which directives are obeyed. The shim pushes it forward while
    /// the agent is alive; 0 forces every flow into fallback.
    pub fn set_agent_valid_until(&self, deadline_ns_monotonic: u64) -> Result<()> {
        self.deadline_ns.set(deadline_ns_monotonic);
        self.write_config();
        Ok(())
    }

    /// The shim's promise to read the routine lane of its own accord by `by_ns`
    /// (CLOCK_MONOTONIC; 0 withdraws it): until then the kernel wakes it for no routine
    /// record's age, only for a full lane (see `routine_wake_flags` in kernel.bpf.c).
    pub fn promise_routine_read(&self, by_ns: u64) {
        self.routine_read_by_ns.set(by_ns);
        self.write_config();
    }

    /// The age past which a routine record is due a wake-up (`LoadOptions::report_delay`).
    pub fn report_delay(&self) -> Duration {
        self.report_delay
    }

    fn write_config(&self) {
        self.config.write(0, abi::KernelConfig {
            agent_valid_until_ns: self.deadline_ns.get(),
            routine_read_by_ns: self.routine_read_by_ns.get(),
            fallback: self.fallback.raw(),
            _pad0: 0,
        });
    }

    /// Directives (and folds) refused because another live flow held the flow's slot.
    pub fn directives_refused(&self) -> u64 {
        self.directives_refused.get()
    }

    /// Flows that can hold a directive at once.
    pub fn max_flows(&self) -> u32 {
        self.max_flows
    }

    /// Kernel counters (summed over CPUs) and the shim's decode errors.
    pub fn stats(&self) -> KernelStats {
        let mut s = KernelStats {
            malformed: self.urgent.malformed() + self.routine.malformed(),
            ..KernelStats::default()
        };
        if let Ok(Some(per_cpu)) = self
            .skel
            .maps
            .ccsw_stats
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
        {
            for bytes in per_cpu {
                if let Some(c) = abi::from_bytes::<abi::KernelCpuStats>(&bytes) {
                    s.events += c.events;
                    s.ring_drops += c.drops;
                    s.flows_created += c.flows_created;
                    s.flows_closed += c.flows_closed;
                    s.acks_directive += c.acks_directive;
                    s.acks_fallback += c.acks_fallback;
                    s.acks_fallback_awaiting += c.acks_fallback_awaiting;
                    s.acks_fallback_agent_late += c.acks_fallback_agent_late;
                    s.acks_vm += c.acks_vm;
                    s.vm_faults += c.vm_faults;
                    s.flows_directed += c.flows_directed;
                    s.flows_fell_back_agent_late += c.flows_fell_back_agent_late;
                    s.flows_fell_back_no_directive += c.flows_fell_back_no_directive;
                    s.flows_rejoined += c.flows_rejoined;
                    s.acks_folded += c.acks_folded;
                    s.reports += c.reports;
                    s.routine_timer_wakeups += c.routine_timer_wakeups;
                }
            }
        }
        s
    }

    /// Ids of the loaded struct_ops programs.
    pub fn prog_ids(&self) -> &[ProgId] {
        &self.prog_ids
    }

    /// Id of the struct_ops map (`bpftool struct_ops show`).
    pub fn struct_ops_map_id(&self) -> Result<u32> {
        Ok(self
            .skel
            .maps
            .ccswitch
            .info()
            .context("struct_ops map info")?
            .info
            .id)
    }

    /// Runs one ACK through the kernel's fold of the standard program (the
    /// code cong_control runs), for tests against the shim's interpreter.
    pub fn run_fold(&self, t: &mut abi::KernelFoldTest) -> Result<()> {
        let mut ctx = abi::as_bytes(t).to_vec();
        let input = libbpf_rs::ProgramInput { context_in: Some(&mut ctx), ..Default::default() };
        self.skel.progs.ccsw_fold_test.test_run(input).context("running the fold test program")?;
        *t = abi::from_bytes(&ctx).context("fold test context")?;
        Ok(())
    }

    /// Converts one window to whole packets as cong_control does, from the cache in `t`
    /// (which it updates), for tests against a division.
    pub fn run_cwnd_pkts(&self, t: &mut abi::KernelCwndPktsTest) -> Result<()> {
        let mut ctx = abi::as_bytes(t).to_vec();
        let input = libbpf_rs::ProgramInput { context_in: Some(&mut ctx), ..Default::default() };
        self.skel.progs.ccsw_cwnd_pkts_test.test_run(input).context("running the packet conversion test program")?;
        *t = abi::from_bytes(&ctx).context("packet conversion test context")?;
        Ok(())
    }

    /// Puts a program in slot `slot` of the BPF interpreter's program map.
    pub fn install_vm_program(&self, slot: u32, prog: &abi::VmProgram) -> Result<()> {
        if slot as usize >= abi::VM_PROGRAMS {
            bail!("interpreter program slot {slot}: there are {}", abi::VM_PROGRAMS);
        }
        self.skel
            .maps
            .ccsw_vm_programs
            .update(&slot.to_ne_bytes(), abi::as_bytes(prog), MapFlags::ANY)
            .context("installing an interpreter program")
    }

    /// Runs one evaluation (or start, with `t.start`) of the BPF interpreter on `t`, for
    /// tests against the shim's interpreter.
    pub fn run_vm(&self, t: &mut abi::VmTest) -> Result<()> {
        let scratch = &self.skel.maps.ccsw_vm_scratch;
        scratch.update(&0u32.to_ne_bytes(), abi::as_bytes(t), MapFlags::ANY).context("writing the interpreter test entry")?;
        let out = self.skel.progs.ccsw_vm_test.test_run(libbpf_rs::ProgramInput::default()).context("running the interpreter test program")?;
        if out.return_value != 0 {
            bail!("the interpreter test program found no program in slot {} ({})", t.slot, out.return_value);
        }
        let bytes = scratch.lookup(&0u32.to_ne_bytes(), MapFlags::ANY)?.context("the interpreter test entry")?;
        *t = abi::from_bytes(&bytes).context("interpreter test entry")?;
        Ok(())
    }

}
