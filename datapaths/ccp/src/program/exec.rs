//! The register file and the instruction semantics of libccp's `machine.c`.
//!
//! All arithmetic is on u64 and never panics. As in libccp, `Add` overflow, `Sub` underflow,
//! `Mul` overflow (detected as libccp does: `a*b` wrapped below `a` with `b > 0`) and division
//! by zero abort the evaluation with an [`ExecError`]; registers written before the faulting
//! instruction keep their values. `Ewma` wraps exactly as libccp's unchecked C arithmetic.

use thiserror::Error;

use ccswitch_protocol::lang::{
    Implicit, Op, Primitive, INFINITY, MAX_LOCAL_REGS, MAX_REPORT_REGS, MAX_TMP_REGS, NUM_IMPLICIT_REGS,
};

use super::{Expr, Instr, Program, Reg};

/// `Ewma` weights are tenths (libccp `CCP_FRAC_DENOM`): `(ewma w x)` is `(w·old + (10−w)·x)/10`.
const EWMA_DENOMINATOR: u64 = 10;

/// Per-ACK measurements a datapath hands to [`CcpFlow::on_ack`](super::CcpFlow::on_ack)
/// (libccp `struct ccp_primitives`, minus `snd_cwnd`/`snd_rate`, which the flow tracks itself).
/// The `Ack.*`, loss and timeout fields describe this ACK only; the `Flow.*` fields are the
/// latest value of a flow-wide quantity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Primitives {
    /// Newly acknowledged in-order bytes (`Ack.bytes_acked`).
    pub bytes_acked: u64,
    /// Newly acknowledged in-order packets (`Ack.packets_acked`).
    pub packets_acked: u64,
    /// Out-of-order (SACKed / duplicate-ACKed) bytes (`Ack.bytes_misordered`).
    pub bytes_misordered: u64,
    /// Out-of-order packets (`Ack.packets_misordered`).
    pub packets_misordered: u64,
    /// Bytes of ECN-marked packets (`Ack.ecn_bytes`).
    pub ecn_bytes: u64,
    /// ECN-marked packets (`Ack.ecn_packets`).
    pub ecn_packets: u64,
    /// Packets newly detected lost (`Ack.lost_pkts_sample`).
    pub lost_pkts_sample: u64,
    /// A retransmission timeout happened (`Flow.was_timeout`).
    pub was_timeout: bool,
    /// Latest RTT sample in µs, 0 if none (`Flow.rtt_sample_us`; programs read 0 as
    /// [`INFINITY`], as in libccp).
    pub rtt_sample_us: u64,
    /// Sending rate in bytes/s (`Flow.rate_outgoing`).
    pub rate_outgoing: u64,
    /// Delivery rate in bytes/s (`Flow.rate_incoming`).
    pub rate_incoming: u64,
    /// Bytes in flight (`Flow.bytes_in_flight`).
    pub bytes_in_flight: u64,
    /// Packets in flight (`Flow.packets_in_flight`).
    pub packets_in_flight: u64,
    /// Bytes queued but not yet sent (`Flow.bytes_pending`).
    pub bytes_pending: u64,
    /// Datapath clock in µs when this ACK was processed (`Ack.now`).
    pub now: u64,
}

impl Primitives {
    /// The primitives of a timer tick at `now_us`: no ACK arrived, so every per-ACK count
    /// (acked, misordered, ECN, lost, timeout) is 0 and `Flow.*` keep their latest values.
    /// A tick therefore never counts an ACK twice in a fold such as
    /// `(+ Report.acked Ack.bytes_acked)`.
    pub fn for_tick(&self, now_us: u64) -> Self {
        Self {
            rtt_sample_us: self.rtt_sample_us,
            rate_outgoing: self.rate_outgoing,
            rate_incoming: self.rate_incoming,
            bytes_in_flight: self.bytes_in_flight,
            packets_in_flight: self.packets_in_flight,
            bytes_pending: self.bytes_pending,
            now: now_us,
            ..Self::default()
        }
    }

    fn read(&self, p: Primitive) -> u64 {
        match p {
            Primitive::BytesAcked => self.bytes_acked,
            Primitive::BytesMisordered => self.bytes_misordered,
            Primitive::EcnBytes => self.ecn_bytes,
            Primitive::EcnPackets => self.ecn_packets,
            Primitive::LostPktsSample => self.lost_pkts_sample,
            Primitive::Now => self.now,
            Primitive::PacketsAcked => self.packets_acked,
            Primitive::PacketsMisordered => self.packets_misordered,
            Primitive::BytesInFlight => self.bytes_in_flight,
            Primitive::BytesPending => self.bytes_pending,
            Primitive::PacketsInFlight => self.packets_in_flight,
            Primitive::RateIncoming => self.rate_incoming,
            Primitive::RateOutgoing => self.rate_outgoing,
            Primitive::RttSampleUs if self.rtt_sample_us == 0 => INFINITY,
            Primitive::RttSampleUs => self.rtt_sample_us,
            Primitive::WasTimeout => u64::from(self.was_timeout),
        }
    }
}

/// An instruction fault that aborted an evaluation (libccp `LIBCCP_*_INT_OVERFLOW`,
/// `LIBCCP_DIV_BY_ZERO`). `instr` is the index of the faulting instruction.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum ExecError {
    #[error("instruction {instr}: addition overflow")]
    AddOverflow { instr: usize },
    #[error("instruction {instr}: subtraction underflow")]
    SubUnderflow { instr: usize },
    #[error("instruction {instr}: multiplication overflow")]
    MulOverflow { instr: usize },
    #[error("instruction {instr}: division by zero")]
    DivByZero { instr: usize },
}

/// One flow's registers (libccp `struct register_file`) and the origin of `Micros`.
#[derive(Clone, Debug)]
pub(crate) struct Registers {
    /// Report and control registers, as many as used so far (reads beyond are 0, a write
    /// grows the file): a flow costs what its program uses, not libccp's fixed 110 + 110.
    report: Vec<u64>,
    control: Vec<u64>,
    /// The temporary and local registers, allocated at the first write (all 0 until then): a
    /// flow whose program the datapath folds or runs never evaluates here and never needs them.
    scratch: Option<Box<Scratch>>,
    implicit: [u64; NUM_IMPLICIT_REGS],
    /// Clock reading (µs) at which `Micros` was 0.
    micros_zero_us: u64,
}

/// The registers an evaluation computes with (libccp's temporaries and `bind` locals).
#[derive(Clone, Debug, Default)]
struct Scratch {
    tmp: [u64; MAX_TMP_REGS],
    local: [u64; MAX_LOCAL_REGS],
}

/// A copy of a flow's registers, for a datapath that takes the evaluation over (the kernel's
/// interpreter starts from exactly the state this one reached). Banks hold what the flow
/// used: a register beyond `report`/`control` reads 0.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegisterSnapshot {
    pub report: Vec<u64>,
    pub control: Vec<u64>,
    pub tmp: [u64; MAX_TMP_REGS],
    pub local: [u64; MAX_LOCAL_REGS],
    /// By [`Implicit`] index.
    pub implicit: [u64; NUM_IMPLICIT_REGS],
    /// Clock reading (µs) at which `Micros` was 0.
    pub micros_zero_us: u64,
}

/// `regs[index] = v`, growing `regs` with zeros to reach `index` (validated indices stay
/// below the register bank's size).
fn set_grown(regs: &mut Vec<u64>, index: usize, v: u64) {
    if index >= regs.len() {
        regs.resize(index + 1, 0);
    }
    regs[index] = v;
}

impl Registers {
    pub(crate) fn new() -> Self {
        Self {
            report: Vec::new(),
            control: Vec::new(),
            scratch: None,
            implicit: [0; NUM_IMPLICIT_REGS],
            micros_zero_us: 0,
        }
    }

    pub(crate) fn snapshot(&self) -> RegisterSnapshot {
        let scratch = self.scratch.as_deref().cloned().unwrap_or_default();
        RegisterSnapshot {
            report: self.report.clone(),
            control: self.control.clone(),
            tmp: scratch.tmp,
            local: scratch.local,
            implicit: self.implicit,
            micros_zero_us: self.micros_zero_us,
        }
    }

    pub(crate) fn implicit(&self, r: Implicit) -> u64 {
        self.implicit[r as usize]
    }

    pub(crate) fn set_implicit(&mut self, r: Implicit, v: u64) {
        self.implicit[r as usize] = v;
    }

    pub(crate) fn control(&self, index: usize) -> u64 {
        self.control.get(index).copied().unwrap_or(0)
    }

    pub(crate) fn set_control(&mut self, index: usize, v: u64) {
        set_grown(&mut self.control, index, v);
    }

    /// Fresh registers for `prog` started at `now_us`: everything 0, then every `Def` default,
    /// `Micros` counting from now (libccp `reset_state` + `init_register_state` + `reset_time`;
    /// zeroing first additionally hides the previous program's leftovers).
    pub(crate) fn start_program(&mut self, prog: &Program, now_us: u64) {
        *self = Self::new();
        // The banks as large as the defaults reach, at once: grown one register at a time
        // they would reserve up to twice that.
        let (mut report, mut control) = (0, 0);
        for d in &prog.defaults {
            match d.reg {
                Reg::Report { index, .. } => report = report.max(usize::from(index) + 1),
                Reg::Control { index, .. } => control = control.max(usize::from(index) + 1),
                _ => {}
            }
        }
        self.report.reserve_exact(report);
        self.control.reserve_exact(control);
        for d in &prog.defaults {
            self.write(d.reg, d.value, now_us);
        }
        self.micros_zero_us = now_us;
    }

    /// After a report: volatile report and control registers back to their defaults
    /// (libccp `reset_state`).
    pub(crate) fn reset_volatile(&mut self, prog: &Program) {
        for d in &prog.defaults {
            if matches!(
                d.reg,
                Reg::Report { volatile: true, .. } | Reg::Control { volatile: true, .. }
            ) {
                self.write(d.reg, d.value, 0);
            }
        }
    }

    /// The MEASURE fields: report registers `0..n` (libccp `num_to_return`).
    pub(crate) fn report_fields(&self, n: usize) -> Vec<u64> {
        (0..n.min(MAX_REPORT_REGS)).map(|i| self.report.get(i).copied().unwrap_or(0)).collect()
    }

    /// Starts an evaluation at `now_us`: clears the per-evaluation flags and updates `Micros`
    /// (libccp `reset_impl_registers` and the `US_ELAPSED_REG` update in `state_machine`).
    pub(crate) fn begin_evaluation(&mut self, now_us: u64) {
        self.set_implicit(Implicit::ExprFlag, 0);
        self.set_implicit(Implicit::ShouldFallthrough, 0);
        self.set_implicit(Implicit::ShouldReport, 0);
        self.set_implicit(Implicit::Micros, now_us.wrapping_sub(self.micros_zero_us));
    }

    fn read(&self, reg: Reg, prims: &Primitives) -> u64 {
        match reg {
            Reg::Immediate(v) => u64::from(v),
            Reg::Report { index, .. } => self.report.get(usize::from(index)).copied().unwrap_or(0),
            Reg::Control { index, .. } => self.control.get(usize::from(index)).copied().unwrap_or(0),
            Reg::Tmp(i) => self.scratch.as_ref().map_or(0, |s| s.tmp[usize::from(i)]),
            Reg::Local(i) => self.scratch.as_ref().map_or(0, |s| s.local[usize::from(i)]),
            Reg::Implicit(r) => self.implicit(r),
            Reg::Primitive(p) => prims.read(p),
        }
    }

    /// Writes a register; writing `Micros` moves its origin so that it reads `v` now.
    /// Read-only registers are excluded by validation and ignored here.
    fn write(&mut self, reg: Reg, v: u64, now_us: u64) {
        match reg {
            Reg::Report { index, .. } => set_grown(&mut self.report, usize::from(index), v),
            Reg::Control { index, .. } => set_grown(&mut self.control, usize::from(index), v),
            Reg::Tmp(i) => self.scratch.get_or_insert_default().tmp[usize::from(i)] = v,
            Reg::Local(i) => self.scratch.get_or_insert_default().local[usize::from(i)] = v,
            Reg::Implicit(Implicit::Micros) => {
                self.micros_zero_us = now_us.wrapping_sub(v);
                self.set_implicit(Implicit::Micros, v);
            }
            Reg::Implicit(r) => self.set_implicit(r, v),
            Reg::Immediate(_) | Reg::Primitive(_) => {}
        }
    }
}

/// Evaluates the expressions of `prog` in order (libccp `state_machine` loop): a true condition
/// runs its body; the walk stops after an expression whose flag is still set and which did not
/// set `__shouldContinue` (the flags are not cleared between expressions, as in libccp).
pub(crate) fn run_expressions(
    prog: &Program,
    regs: &mut Registers,
    prims: &Primitives,
    now_us: u64,
) -> Result<(), ExecError> {
    for Expr { cond, body } in &prog.exprs {
        run_range(prog, cond.clone(), regs, prims, now_us)?;
        if regs.implicit(Implicit::ExprFlag) != 0 {
            run_range(prog, body.clone(), regs, prims, now_us)?;
        }
        if regs.implicit(Implicit::ExprFlag) != 0 && regs.implicit(Implicit::ShouldFallthrough) == 0
        {
            break;
        }
    }
    Ok(())
}

fn run_range(
    prog: &Program,
    range: std::ops::Range<usize>,
    regs: &mut Registers,
    prims: &Primitives,
    now_us: u64,
) -> Result<(), ExecError> {
    for idx in range {
        execute(&prog.instrs[idx], idx, regs, prims, now_us)?;
    }
    Ok(())
}

fn execute(
    instr: &Instr,
    idx: usize,
    regs: &mut Registers,
    prims: &Primitives,
    now_us: u64,
) -> Result<(), ExecError> {
    let a = regs.read(instr.left, prims);
    let b = regs.read(instr.right, prims);
    let result = match instr.op {
        Op::Add => Some(
            a.checked_add(b)
                .ok_or(ExecError::AddOverflow { instr: idx })?,
        ),
        Op::Sub => Some(
            a.checked_sub(b)
                .ok_or(ExecError::SubUnderflow { instr: idx })?,
        ),
        Op::Mul => Some(mul_libccp(a, b).ok_or(ExecError::MulOverflow { instr: idx })?),
        Op::Div => Some(
            a.checked_div(b)
                .ok_or(ExecError::DivByZero { instr: idx })?,
        ),
        Op::Equiv => Some(u64::from(a == b)),
        Op::Gt => Some(u64::from(a > b)),
        Op::Lt => Some(u64::from(a < b)),
        Op::Max => Some(a.max(b)),
        Op::Min => Some(a.min(b)),
        Op::MaxWrap => Some(max_wrap(a, b)),
        Op::Ewma => Some(ewma(a, regs.read(instr.res, prims), b)),
        Op::If => (a != 0).then_some(b),
        Op::NotIf => (a == 0).then_some(b),
        Op::Bind => Some(b),
        // Defaults are applied at program start and after reports, never executed.
        Op::Def => None,
    };
    if let Some(v) = result {
        regs.write(instr.res, v, now_us);
    }
    Ok(())
}

/// libccp's multiplication: the wrapped product, refused only when it wrapped below `a`
/// (so some overflows pass, wrapped, exactly as in libccp).
fn mul_libccp(a: u64, b: u64) -> Option<u64> {
    let r = a.wrapping_mul(b);
    if r < a && b > 0 {
        None
    } else {
        Some(r)
    }
}

/// libccp `myewma64(weight, old, new)`: `new` if there is no history yet, else
/// `(weight·old + (10−weight)·new) / 10`, with C's wrapping u64 arithmetic.
fn ewma(weight: u64, old: u64, new: u64) -> u64 {
    if old == 0 {
        return new;
    }
    let old_part = weight.wrapping_mul(old);
    let new_part = EWMA_DENOMINATOR.wrapping_sub(weight).wrapping_mul(new);
    old_part.wrapping_add(new_part) / EWMA_DENOMINATOR
}

/// Distance walking up from `left` to `right` on the u32 circle (libccp `dif32`).
fn circular_distance(left: u32, right: u32) -> u32 {
    if right > left {
        right - left
    } else {
        (u32::MAX - left) + right
    }
}

/// libccp `mymax64_wrap`: the later of two 32-bit sequence numbers, treating 0 as "unset".
fn max_wrap(a: u64, b: u64) -> u64 {
    if a == 0 {
        return b;
    }
    if b == 0 {
        return a;
    }
    let (a32, b32) = (a as u32, b as u32);
    if circular_distance(b32, a32) < circular_distance(a32, b32) {
        u64::from(a32)
    } else {
        u64::from(b32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ewma_matches_libccp() {
        assert_eq!(ewma(2, 0, 500), 500);
        assert_eq!(ewma(2, 100, 200), (2 * 100 + 8 * 200) / 10);
        // weight above 10: libccp's (10 - a) wraps; so do we, without panicking.
        assert_eq!(
            ewma(11, 5, 3),
            55u64.wrapping_add(3u64.wrapping_mul(u64::MAX)) / 10
        );
    }

    #[test]
    fn max_wrap_handles_sequence_wraparound() {
        assert_eq!(max_wrap(10, 20), 20);
        assert_eq!(max_wrap(20, 10), 20);
        assert_eq!(max_wrap(0, 7), 7);
        assert_eq!(max_wrap(7, 0), 7);
        assert_eq!(max_wrap(u64::from(u32::MAX - 5), 3), 3);
        assert_eq!(max_wrap(3, u64::from(u32::MAX - 5)), 3);
    }

    #[test]
    fn mul_overflow_detection_is_libccps() {
        assert_eq!(mul_libccp(3, 4), Some(12));
        assert_eq!(mul_libccp(u64::MAX, 2), None);
        // 2^32 · 2^32 wraps to 0 < 2^32: refused.
        assert_eq!(mul_libccp(1 << 32, 1 << 32), None);
        // 2^63+1 · 3 wraps to 2^63+3 ≥ a: libccp lets the wrapped value through.
        assert_eq!(mul_libccp((1 << 63) + 1, 3), Some((1u64 << 63) + 3));
    }

    #[test]
    fn rtt_zero_reads_as_infinity() {
        let p = Primitives::default();
        assert_eq!(p.read(Primitive::RttSampleUs), INFINITY);
    }

    /// A flow's registers cost what its program uses: the standard program's 12 report and 16
    /// control registers (336 bytes with the registers' own; the five that count growth
    /// across reports and pre-set slow start took it past 256, the four that measure ACK
    /// aggregation past 296), not libccp's fixed 110 + 110
    /// (1.9 KB per flow before), and no temporaries until an evaluation writes one.
    #[test]
    fn a_flow_costs_what_its_program_uses() {
        use ccswitch_protocol::standard::{control, report};
        let prog = crate::program::fold::tests_program();
        let mut regs = Registers::new();
        regs.start_program(&prog, 0);
        assert_eq!((regs.report.len(), regs.control.len()), (report::COUNT, control::COUNT));
        assert_eq!((regs.report.capacity(), regs.control.capacity()), (report::COUNT, control::COUNT));
        assert!(regs.scratch.is_none());
        let bytes = std::mem::size_of::<Registers>() + 8 * (regs.report.capacity() + regs.control.capacity());
        assert!(bytes <= 336, "{bytes} bytes");
        // Temporaries and locals read 0 until written, then hold what was written.
        assert_eq!(regs.read(Reg::Tmp(3), &Primitives::default()), 0);
        regs.write(Reg::Local(2), 9, 0);
        assert_eq!((regs.read(Reg::Local(2), &Primitives::default()), regs.read(Reg::Tmp(3), &Primitives::default())), (9, 0));
        assert_eq!(regs.snapshot().local[2], 9);
        // An update of a register the program does not use still lands, as in libccp.
        regs.set_control(40, 7);
        assert_eq!((regs.control(40), regs.control(39), regs.control(200)), (7, 0, 0));
    }
}
