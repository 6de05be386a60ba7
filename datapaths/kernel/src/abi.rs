//! `#[repr(C)]` mirrors of `src/bpf/kernel.h`. Every size is asserted at
//! compile time (the C header asserts the same numbers with
//! `_Static_assert`), and the map value types are also checked against the
//! layouts libbpf-cargo generated from the BPF object's BTF.
//!
//! Naming: a mirror is its C struct's name without `ccsw_`, in CamelCase (`ccsw_create_event`
//! → [`CreateEvent`], `ccsw_kernel_ack_event` → [`KernelAckEvent`]). A C struct whose name the
//! ovs header also declares carries the datapath in its name, so no two mirrors share one.
//! The layouts of the standard program's fold, which both datapaths' programs share, are
//! mirrored once, in `ccswitch_datapath_support::std_fold`.

use std::mem::size_of;

use ccswitch_ccp::program::fold::FoldGrowth;
use ccswitch_datapath_support::mapped::OwnedSlot;
pub use ccswitch_datapath_support::pod::{as_bytes, from_bytes, Pod};
use ccswitch_datapath_support::std_fold::{StdAck, StdAggregation, StdRateSample, StdRegs, StdSampledFold};

pub const EV_CREATE: u32 = 1;
pub const EV_ACK: u32 = 2;
pub const EV_CLOSE: u32 = 3;
pub const EV_REPORT: u32 = 4;
pub const EV_VM_REPORT: u32 = 5;

pub const FOLD_OFF: u8 = 0;
pub const FOLD_PER_RTT: u8 = 1;
pub const FOLD_PER_ACK: u8 = 2;
pub const FOLD_VM: u8 = 3;
pub const GROWTH_STEP: u8 = 0;
pub const GROWTH_SLOW_START: u8 = 1;
pub const GROWTH_STEP_AT: u8 = 2;
pub const VM_SET_CWND: u32 = 1;
pub const VM_SET_RATE: u32 = 2;

pub const FALLBACK_RENO: u32 = 0;
pub const FALLBACK_CUBIC: u32 = 1;

pub const ACK_F_RTT_VALID: u32 = 1 << 0;
pub const ACK_F_APP_LIMITED: u32 = 1 << 1;
pub const ACK_F_FALLBACK: u32 = 1 << 2;
pub const ACK_F_ECE: u32 = 1 << 3;
pub const ACK_F_RATE_VALID: u32 = 1 << 4;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct CreateEvent {
    pub kind: u32,
    pub flow_id: u32,
    pub ts_ns: u64,
    pub family: u16,
    pub src_port: u16,
    pub dst_port: u16,
    pub _pad0: u16,
    pub src_addr: [u8; 16],
    pub dst_addr: [u8; 16],
    pub mss: u32,
    pub init_cwnd_bytes: u32,
    pub handshake_rtt_us: u32,
    pub _pad1: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct KernelAckEvent {
    pub kind: u32,
    pub flow_id: u32,
    pub ts_ns: u64,
    pub bytes_acked: u32,
    pub packets_acked: u32,
    pub bytes_misordered: u32,
    pub packets_misordered: u32,
    pub ecn_bytes: u32,
    pub ecn_packets: u32,
    pub lost_pkts_sample: u32,
    pub was_timeout: u32,
    pub rtt_sample_us: u32,
    pub srtt_us: u32,
    pub rate_incoming: u64,
    pub rate_outgoing: u64,
    pub bytes_in_flight: u32,
    pub packets_in_flight: u32,
    pub bytes_pending: u32,
    pub snd_cwnd_bytes: u32,
    pub mss: u32,
    pub ca_state: u32,
    pub flags: u32,
    pub ssthresh: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct CloseEvent {
    pub kind: u32,
    pub flow_id: u32,
    pub ts_ns: u64,
}

/// `struct ccsw_fold_state`: a folded flow's fold (its rate kept as a sample pair), the
/// window its loss or growth clause set, and the program's growth registers.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct FoldState {
    pub std: StdSampledFold,
    pub held_cwnd_bytes: u32,
    pub held_cwnd_seq: u32,
    pub chain_reported_bytes: u64,
    pub chain_from_us: u32,
    pub ss_high_bytes: u32,
    pub growth_start_us: u64,
    pub agg: StdAggregation,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ReportEvent {
    pub kind: u32,
    pub flow_id: u32,
    pub ts_ns: u64,
    pub start_us: u64,
    pub regs: StdRegs,
    pub snd_cwnd_bytes: u32,
    pub reductions: u32,
    pub agg: StdAggregation,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct KernelFoldTest {
    pub state: FoldState,
    pub ack: StdAck,
    pub sample: StdRateSample,
    pub directive: KernelDirectiveSlot,
    pub reported: u32,
    pub cwnd_set: u32,
    pub report: StdRegs,
    pub cwnd_bytes: u32,
    pub _pad1: u32,
    pub report_agg: StdAggregation,
}

/// `struct ccsw_kernel_cwnd_pkts_test`: one window converted to whole packets by the code
/// cong_control runs (`count_cwnd_pkts`), from the cache its last conversion left.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelCwndPktsTest {
    pub cache_bytes: u32,
    pub cache_mss: u32,
    pub cache_pkts: u32,
    pub bytes: u32,
    pub mss: u32,
    pub pkts: u32,
}

/// Limits of the BPF interpreter (`CCSW_VM_*` in kernel.h).
pub const VM_MAX_INSTRS: usize = 192;
pub const VM_MAX_EXPRS: usize = 32;
pub const VM_REPORT_REGS: usize = 32;
pub const VM_CONTROL_REGS: usize = 32;
pub const VM_TMP_REGS: usize = 8;
pub const VM_LOCAL_REGS: usize = 8;
pub const VM_IMPLICIT_REGS: usize = 8;
pub const VM_PRIMITIVES: usize = 16;
pub const VM_MAX_DEFAULTS: usize = VM_REPORT_REGS + VM_CONTROL_REGS;
pub const VM_PROGRAMS: usize = 16;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VmInstr {
    pub op: u8,
    pub res_kind: u8,
    pub left_kind: u8,
    pub right_kind: u8,
    pub res: u32,
    pub left: u32,
    pub right: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VmExpr {
    pub cond_start: u16,
    pub cond_end: u16,
    pub body_start: u16,
    pub body_end: u16,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VmDefault {
    pub kind: u32,
    pub index: u32,
    pub value: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VmProgram {
    pub uid: u32,
    pub n_instrs: u16,
    pub n_exprs: u16,
    pub n_defaults: u16,
    pub n_report_fields: u16,
    pub _pad0: u32,
    pub instrs: [VmInstr; VM_MAX_INSTRS],
    pub exprs: [VmExpr; VM_MAX_EXPRS],
    pub defaults: [VmDefault; VM_MAX_DEFAULTS],
}

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VmRegs {
    pub report: [u64; VM_REPORT_REGS],
    pub control: [u64; VM_CONTROL_REGS],
    pub tmp: [u64; VM_TMP_REGS],
    pub local: [u64; VM_LOCAL_REGS],
    pub implicit: [u64; VM_IMPLICIT_REGS],
    pub micros_zero_us: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VmTest {
    pub regs: VmRegs,
    pub prims: [u64; VM_PRIMITIVES],
    pub now_us: u64,
    pub cwnd_bytes: u64,
    pub rate: u64,
    pub slot: u32,
    pub start: u32,
    pub error: u32,
    pub reported: u32,
    pub report: [u64; VM_REPORT_REGS],
}

/// All zeros, as the kernel starts a map entry (the arrays are too long for `derive`).
macro_rules! zeroed_default {
    ($($t:ty),*) => {$(
        impl Default for $t {
            fn default() -> Self {
                // SAFETY: integers and arrays of them only: all zeros is a valid value.
                unsafe { std::mem::zeroed() }
            }
        }
    )*};
}
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VmBank {
    pub program: u32,
    pub _pad0: u32,
    pub start_us: u64,
    pub regs: VmRegs,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VmFlow {
    pub flow_id: u32,
    pub bank: u32,
    pub window_parts: u32,
    pub _pad0: u32,
    pub rate: u64,
    pub banks: [VmBank; 2],
}

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VmReportEvent {
    pub kind: u32,
    pub flow_id: u32,
    pub ts_ns: u64,
    pub start_us: u64,
    pub program_uid: u32,
    pub n_fields: u32,
    pub snd_cwnd_bytes: u32,
    pub _pad0: u32,
    pub fields: [u64; VM_REPORT_REGS],
}

zeroed_default!(VmProgram, VmRegs, VmTest, VmReportEvent);

/// `struct ccsw_kernel_directive_slot`: one cache line, so that an ACK reads its directive
/// from one line of the (page-aligned, mmapable) array.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelDirectiveSlot {
    pub flow_id: u32,
    pub cwnd_bytes: u32,
    pub fold: u8,
    pub growth: u8,
    pub fold_window_pct: u16,
    /// The C union: `vm_slot` under [`FOLD_VM`], `agg_rate` (the program's
    /// `Control.agg_rate`) when the standard program is folded.
    pub vm_slot_or_agg_rate: u32,
    pub pacing_rate: u64,
    pub fold_start_us: u64,
    /// The C union: `grow_rate`, or under [`GROWTH_STEP_AT`] `grow_not_before_us` (the low 32
    /// bits of the program's `Control.grow_not_before`).
    pub grow_rate: u32,
    pub loss_cwnd_bytes: u32,
    pub fold_idle_us: u32,
    pub cwnd_seq: u32,
    pub grow_cwnd_bytes: u32,
    pub grow_after_bytes: u32,
    pub grow_from_us: u32,
    pub grow_loss_cwnd_bytes: u32,
}

/// Writes a fold's growth clauses into its directive: a step, or slow start (the agent never
/// pre-sets both: `fold_mode` does not fold a flow that has both). The fold compares the low 32
/// bits of `grow_from` and of `not_before_us` (the slot has no room for more).
pub fn set_growth(d: &mut KernelDirectiveSlot, growth: &FoldGrowth) {
    d.grow_from_us = growth.from_us as u32;
    if growth.slow_start_cwnd_bytes > 0 {
        d.growth = GROWTH_SLOW_START;
        d.grow_cwnd_bytes = growth.slow_start_cwnd_bytes;
        d.grow_after_bytes = growth.after_bytes;
        d.grow_loss_cwnd_bytes = 0;
        d.grow_rate = 0;
    } else {
        d.grow_cwnd_bytes = growth.cwnd_bytes;
        d.grow_after_bytes = growth.after_bytes;
        d.grow_loss_cwnd_bytes = growth.loss_cwnd_bytes;
        // fold_mode folds no step with both a rate and a time: the slot holds one of them.
        (d.growth, d.grow_rate) = match growth.not_before_us {
            0 => (GROWTH_STEP, growth.rate),
            at => (GROWTH_STEP_AT, at),
        };
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct KernelConfig {
    pub agent_valid_until_ns: u64,
    pub routine_read_by_ns: u64,
    pub fallback: u32,
    pub _pad0: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct KernelCpuStats {
    pub events: u64,
    pub drops: u64,
    pub flows_created: u64,
    pub flows_closed: u64,
    pub acks_directive: u64,
    pub acks_fallback: u64,
    pub acks_folded: u64,
    pub reports: u64,
    pub acks_fallback_awaiting: u64,
    pub acks_fallback_agent_late: u64,
    pub acks_vm: u64,
    pub vm_faults: u64,
    pub flows_directed: u64,
    pub flows_fell_back_agent_late: u64,
    pub flows_fell_back_no_directive: u64,
    pub flows_rejoined: u64,
    pub routine_timer_wakeups: u64,
}

const _: () = assert!(size_of::<CreateEvent>() == 72);
const _: () = assert!(size_of::<KernelAckEvent>() == 104);
const _: () = assert!(size_of::<CloseEvent>() == 16);
const _: () = assert!(size_of::<ReportEvent>() == 128);
const _: () = assert!(size_of::<FoldState>() == 160);
const _: () = assert!(size_of::<KernelFoldTest>() == 408);
const _: () = assert!(size_of::<KernelCwndPktsTest>() == 24);
const _: () = assert!(size_of::<KernelDirectiveSlot>() == 64);
const _: () = assert!(size_of::<VmInstr>() == 16);
const _: () = assert!(size_of::<VmProgram>() == 16 + 16 * VM_MAX_INSTRS + 8 * VM_MAX_EXPRS + 16 * VM_MAX_DEFAULTS);
const _: () = assert!(size_of::<VmRegs>() == 8 * (VM_REPORT_REGS + VM_CONTROL_REGS + VM_TMP_REGS + VM_LOCAL_REGS + VM_IMPLICIT_REGS + 1));
const _: () = assert!(size_of::<VmTest>() == size_of::<VmRegs>() + 8 * VM_PRIMITIVES + 24 + 16 + 8 * VM_REPORT_REGS);
const _: () = assert!(size_of::<KernelConfig>() == 24);
const _: () = assert!(size_of::<KernelCpuStats>() == 136);
const _: () = assert!(size_of::<VmFlow>() == 24 + 2 * (16 + size_of::<VmRegs>()));
const _: () = assert!(size_of::<VmReportEvent>() == 40 + 8 * VM_REPORT_REGS);
// The same layouts as seen through the BPF object's BTF.
const _: () = assert!(size_of::<KernelDirectiveSlot>() == size_of::<crate::skel::types::ccsw_kernel_directive_slot>());
const _: () = assert!(size_of::<KernelConfig>() == size_of::<crate::skel::types::ccsw_kernel_config>());
const _: () = assert!(size_of::<KernelCpuStats>() == size_of::<crate::skel::types::ccsw_kernel_cpu_stats>());
const _: () = assert!(size_of::<VmFlow>() == size_of::<crate::skel::types::ccsw_vm_flow>());
const _: () = assert!(size_of::<VmProgram>() == size_of::<crate::skel::types::ccsw_vm_program>());

// Plain-old-data: the ring buffer's records and the maps' values are read from and written
// as bytes (`from_bytes`, `as_bytes`).
unsafe impl Pod for CreateEvent {}
unsafe impl Pod for KernelAckEvent {}
unsafe impl Pod for CloseEvent {}
unsafe impl Pod for KernelDirectiveSlot {}
// The owner first, aligned, and cwnd_seq after the window it ends a loss's window for.
unsafe impl OwnedSlot for KernelDirectiveSlot {}
unsafe impl Pod for ReportEvent {}
unsafe impl Pod for KernelFoldTest {}
unsafe impl Pod for KernelCwndPktsTest {}
unsafe impl Pod for VmProgram {}
unsafe impl Pod for VmTest {}
unsafe impl Pod for VmFlow {}
unsafe impl Pod for VmReportEvent {}
unsafe impl Pod for KernelConfig {}
unsafe impl Pod for KernelCpuStats {}
