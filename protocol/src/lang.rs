//! The datapath-program language as it travels: what the codes in INSTALL_EXPR's instruction
//! records and in UPDATE_FIELDS / CHANGE_PROG's update records mean (libccp `ccp_priv.h` and
//! `serialize.h`; portus `lang::serialize`, which numbers them alike).
//!
//! Registers, by wire type code ([`reg_type`]):
//!
//! | code | kind | count | access |
//! |------|------|-------|--------|
//! | 0 / 8 | control (non-volatile / volatile) | [`MAX_CONTROL_REGS`] | read/write; the agent may set them |
//! | 1 | immediate (the u32 operand itself) | — | read only |
//! | 2 | implicit ([`Implicit`]: `__eventFlag`, `__shouldContinue`, `__shouldReport`, `Micros`, `Cwnd`, `Rate`) | [`NUM_IMPLICIT_REGS`] | read/write; the agent may set `Cwnd` and `Rate` |
//! | 3 | local (`bind` of a fresh name) | [`MAX_LOCAL_REGS`] | read/write |
//! | 4 | primitive ([`Primitive`]: `Ack.*`, `Flow.*`) | [`NUM_PRIMITIVES`] | read only |
//! | 5 / 6 | report (volatile / non-volatile) | [`MAX_REPORT_REGS`] | read/write; sent in MEASURE |
//! | 7 | temporary (sub-expression results) | [`MAX_TMP_REGS`] | read/write |
//!
//! A control or report register's index is its place in the program's declaration (portus
//! numbers `Control.*` and `Report.*` in the order of the `def`); the other banks are fixed.

/// Report registers per flow, and so the most fields one MEASURE carries (libccp
/// `MAX_REPORT_REG`).
pub const MAX_REPORT_REGS: usize = 110;
/// Control registers per flow (libccp `MAX_CONTROL_REG`).
pub const MAX_CONTROL_REGS: usize = 110;
/// Temporary registers (libccp `MAX_TMP_REG`); portus would allow 16, libccp stores 8.
pub const MAX_TMP_REGS: usize = 8;
/// Local registers (libccp `MAX_LOCAL_REG`).
pub const MAX_LOCAL_REGS: usize = 8;
/// Implicit registers (libccp `MAX_IMPLICIT_REG`).
pub const NUM_IMPLICIT_REGS: usize = 6;
/// Measurement primitives (libccp `ACK_*`/`FLOW_*` codes 0..=14).
pub const NUM_PRIMITIVES: usize = 15;
/// libccp treats a `Def` default equal to this as "+infinity" and stores [`INFINITY`] instead.
pub const DEF_INFINITY_SENTINEL: u32 = 0x3fff_ffff;
/// libccp's "+infinity": `(u64)~0U`, i.e. `u32::MAX` widened (portus sends `+infinity` as it
/// too); also what a program reads for `Flow.rtt_sample_us` before any sample.
pub const INFINITY: u64 = u32::MAX as u64;
/// Installing a program with this uid first empties a datapath's program table: portus
/// numbers programs from 1, so uid 1 means a new agent took over (libccp's rule in
/// `ccp_read_msg`).
pub const FRESH_AGENT_PROGRAM_UID: u32 = 1;

/// Register type codes on the wire (libccp `ccp_priv.h`: `NONVOLATILE_CONTROL_REG`,
/// `IMMEDIATE_REG`, `IMPLICIT_REG`, `LOCAL_REG`, `PRIMITIVE_REG`, `VOLATILE_REPORT_REG`,
/// `NONVOLATILE_REPORT_REG`, `TMP_REG`, `VOLATILE_CONTROL_REG`; portus `Reg::Control`,
/// `Reg::ImmNum`/`ImmBool`, `Reg::Implicit`, `Reg::Local`, `Reg::Primitive`, `Reg::Report`,
/// `Reg::Tmp`).
pub mod reg_type {
    /// A control register kept across reports (portus `Control.name`, the default).
    pub const NONVOLATILE_CONTROL: u8 = 0;
    /// An immediate: the operand is the value itself.
    pub const IMMEDIATE: u8 = 1;
    /// One of the [`Implicit`](super::Implicit) registers; the operand is its index.
    pub const IMPLICIT: u8 = 2;
    /// A local register (`bind`).
    pub const LOCAL: u8 = 3;
    /// A [`Primitive`](super::Primitive): the operand is its code.
    pub const PRIMITIVE: u8 = 4;
    /// A report register reset to its default after each report (portus `(volatile name v)`).
    pub const VOLATILE_REPORT: u8 = 5;
    /// A report register kept across reports.
    pub const NONVOLATILE_REPORT: u8 = 6;
    /// A temporary (sub-expression result).
    pub const TMP: u8 = 7;
    /// A control register reset to its default after each report.
    pub const VOLATILE_CONTROL: u8 = 8;
}

numbered! {
/// Operations (libccp `ccp_priv.h` codes; portus `lang::serialize::serialize_op`).
pub enum Op: u8 {
    Add = 0,
    Bind = 1,
    Def = 2,
    Div = 3,
    Equiv = 4,
    Ewma = 5,
    Gt = 6,
    If = 7,
    Lt = 8,
    Max = 9,
    MaxWrap = 10,
    Min = 11,
    Mul = 12,
    NotIf = 13,
    Sub = 14,
}
}

numbered! {
/// Implicit registers, by index in the [`reg_type::IMPLICIT`] bank (libccp `EXPR_FLAG_REG`,
/// `SHOULD_FALLTHROUGH_REG`, `SHOULD_REPORT_REG`, `US_ELAPSED_REG`, `CWND_REG`, `RATE_REG`;
/// portus numbers them alike in its `Scope`).
pub enum Implicit: u8 {
    /// `__eventFlag`: the condition result of the current expression.
    ExprFlag = 0,
    /// `__shouldContinue`: set by `(fallthrough)`.
    ShouldFallthrough = 1,
    /// `__shouldReport`: set by `(report)`.
    ShouldReport = 2,
    /// `Micros`: µs since the program started or since `Micros` was last written.
    Micros = 3,
    /// `Cwnd`: congestion window in bytes; the agent sets it in UPDATE_FIELDS.
    Cwnd = 4,
    /// `Rate`: pacing rate in bytes/s; the agent sets it in UPDATE_FIELDS.
    Rate = 5,
}
}

numbered! {
/// Measurement primitives, by code in the [`reg_type::PRIMITIVE`] bank, numbered as
/// portus's `Scope` and libccp's `ccp_priv.h` (`ACK_BYTES_ACKED` … `FLOW_WAS_TIMEOUT`) do.
pub enum Primitive: u8 {
    BytesAcked = 0,
    BytesMisordered = 1,
    EcnBytes = 2,
    EcnPackets = 3,
    LostPktsSample = 4,
    Now = 5,
    PacketsAcked = 6,
    PacketsMisordered = 7,
    BytesInFlight = 8,
    BytesPending = 9,
    PacketsInFlight = 10,
    RateIncoming = 11,
    RateOutgoing = 12,
    RttSampleUs = 13,
    WasTimeout = 14,
}
}

// The banks hold exactly the registers named above.
const _: () = assert!(Implicit::Rate as usize + 1 == NUM_IMPLICIT_REGS);
const _: () = assert!(Primitive::WasTimeout as usize + 1 == NUM_PRIMITIVES);
