//! Programs for the bounded interpreter in BPF (`bpf/vm.bpf.h`): a validated CCP program laid
//! out as `struct ccsw_vm_program`, or why it cannot run there. The interpreter's banks are
//! smaller than libccp's (32 report and 32 control registers, 192 instructions, 32
//! expressions, against 110, 110, 256 and 256), which every program of the agent and of
//! portus's algorithms fits; a program that does not runs in the shim's interpreter instead.
//! [`VmRuns`] hands flows' programs to the interpreter and keeps its program and flow tables.

use std::collections::{HashMap, HashSet};
use std::ptr::{read_volatile, write_volatile};
use std::sync::atomic::{fence, AtomicU32, Ordering};

use ccswitch_ccp::program::{Program, Reg, RegisterSnapshot};
use ccswitch_ccp::session::ProgramRun;
use ccswitch_datapath_support::mapped::MappedArray;
use thiserror::Error;
use tracing::warn;

use crate::abi::{
    VmBank, VmDefault, VmExpr, VmFlow, VmInstr, VmProgram, VmRegs, VM_CONTROL_REGS, VM_MAX_DEFAULTS, VM_MAX_EXPRS,
    VM_MAX_INSTRS, VM_PROGRAMS, VM_REPORT_REGS,
};

/// Why a program cannot run in the BPF interpreter.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum VmUnfit {
    #[error("{what}: {count} exceeds the BPF interpreter's {max}")]
    TooMany { what: &'static str, count: usize, max: usize },
    #[error("{bank} register {index} is beyond the BPF interpreter's {max}")]
    RegisterBeyondBank { bank: &'static str, index: usize, max: usize },
}

fn check(what: &'static str, count: usize, max: usize) -> Result<(), VmUnfit> {
    if count > max {
        return Err(VmUnfit::TooMany { what, count, max });
    }
    Ok(())
}

/// The operand as the interpreter reads it: libccp's type code and index or immediate value.
/// Tmp, local, implicit and primitive banks are libccp's own sizes; report and control are
/// checked against the interpreter's.
fn operand(reg: Reg) -> Result<(u8, u32), VmUnfit> {
    match reg {
        Reg::Report { index, .. } if usize::from(index) >= VM_REPORT_REGS => {
            Err(VmUnfit::RegisterBeyondBank { bank: "report", index: index.into(), max: VM_REPORT_REGS })
        }
        Reg::Control { index, .. } if usize::from(index) >= VM_CONTROL_REGS => {
            Err(VmUnfit::RegisterBeyondBank { bank: "control", index: index.into(), max: VM_CONTROL_REGS })
        }
        _ => {
            let r = reg.record();
            Ok((r.reg_type, r.value))
        }
    }
}

/// `prog` laid out for the interpreter's program map.
pub fn encode(prog: &Program) -> Result<VmProgram, VmUnfit> {
    let (instrs, exprs) = (prog.instructions(), prog.expressions());
    let defaults: Vec<(Reg, u64)> = prog.defaults().collect();
    check("instructions", instrs.len(), VM_MAX_INSTRS)?;
    check("expressions", exprs.len(), VM_MAX_EXPRS)?;
    check("defaults", defaults.len(), VM_MAX_DEFAULTS)?;
    let mut out = VmProgram {
        uid: prog.uid(),
        // Bounded by the checks above.
        n_instrs: instrs.len() as u16,
        n_exprs: exprs.len() as u16,
        n_defaults: defaults.len() as u16,
        n_report_fields: prog.num_report_fields() as u16,
        ..VmProgram::default()
    };
    for (slot, i) in out.instrs.iter_mut().zip(instrs) {
        let ((res_kind, res), (left_kind, left), (right_kind, right)) =
            (operand(i.res)?, operand(i.left)?, operand(i.right)?);
        *slot = VmInstr { op: i.op as u8, res_kind, left_kind, right_kind, res, left, right };
    }
    for (slot, e) in out.exprs.iter_mut().zip(exprs) {
        // Within the instruction list, so below VM_MAX_INSTRS.
        *slot = VmExpr {
            cond_start: e.cond.start as u16,
            cond_end: e.cond.end as u16,
            body_start: e.body.start as u16,
            body_end: e.body.end as u16,
        };
    }
    for (slot, &(reg, value)) in out.defaults.iter_mut().zip(&defaults) {
        let (kind, index) = operand(reg)?;
        *slot = VmDefault { kind: kind.into(), index, value };
    }
    Ok(out)
}

/// The flows the interpreter runs a program for: the program slots (`ccsw_vm_programs`,
/// shared by flows running the same program) and each flow's entry of the mapped
/// `ccsw_vm_flows`, written as `struct ccsw_vm_flow` describes.
pub(crate) struct VmRuns {
    entries: MappedArray<VmFlow>,
    /// Per program slot: the program there and how many flows run it.
    programs: Vec<Option<(VmProgram, usize)>>,
    /// Per flow: its entry and its program slot.
    by_flow: HashMap<u32, (usize, usize)>,
    free: Vec<usize>,
    /// Programs already warned about (by uid), so a refusal is logged once, not per flow.
    warned: HashSet<u32>,
}

/// Why a flow's program is left to the shim, as logged.
enum Refusal {
    Unfit(VmUnfit),
    NoProgramSlot,
    NoFlowEntry,
}

impl VmRuns {
    pub(crate) fn new(entries: MappedArray<VmFlow>) -> Self {
        let free = (0..entries.len()).rev().collect();
        Self { entries, programs: vec![None; VM_PROGRAMS], by_flow: HashMap::new(), free, warned: HashSet::new() }
    }

    /// Starts (or restarts) `flow_id`'s program from `run`'s registers: the program in a slot
    /// (installed with `install` when new), the registers in the bank BPF is not evaluating,
    /// then the bank flipped. Returns the flow's entry, or `None` (logged once per program)
    /// when the program is left to the shim.
    ///
    /// Two restarts of one flow within a single evaluation (microseconds) would write the
    /// bank that evaluation still uses; agents restart a flow's program at most once per
    /// report, so this is not guarded.
    pub(crate) fn start(
        &mut self,
        flow_id: u32,
        run: &ProgramRun<'_>,
        install: impl FnOnce(u32, &VmProgram) -> anyhow::Result<()>,
    ) -> anyhow::Result<Option<u32>> {
        let refused = |runs: &mut Self, why: Refusal| {
            if runs.warned.insert(run.program.uid()) {
                let why = match why {
                    Refusal::Unfit(e) => e.to_string(),
                    Refusal::NoProgramSlot => format!("all {VM_PROGRAMS} program slots run other programs"),
                    Refusal::NoFlowEntry => format!("all {} flow entries are taken (raise --max-vm-flows)", runs.entries.len()),
                };
                warn!(program = run.program.uid(), reason = %why, "program left to the shim's interpreter: its flows' ACKs cross to user space");
            }
            Ok(None)
        };
        let program = match encode(run.program) {
            Ok(p) => p,
            Err(e) => return refused(self, Refusal::Unfit(e)),
        };
        let regs = match registers(&run.registers) {
            Ok(r) => r,
            Err(e) => return refused(self, Refusal::Unfit(e)),
        };
        let previous = self.by_flow.get(&flow_id).copied();
        let slot = match self.programs.iter().position(|p| p.as_ref().is_some_and(|(q, _)| *q == program)) {
            Some(s) => s,
            None => {
                let in_use = |s: usize| previous.is_some_and(|(_, p)| p == s);
                let Some(s) = (0..VM_PROGRAMS).find(|&s| self.programs[s].as_ref().is_none_or(|(_, users)| *users == 0) && !in_use(s)) else {
                    return refused(self, Refusal::NoProgramSlot);
                };
                install(s as u32, &program)?;
                self.programs[s] = Some((program, 0));
                s
            }
        };
        let entry = match previous {
            Some((e, _)) => e,
            None => match self.free.pop() {
                Some(e) => e,
                None => return refused(self, Refusal::NoFlowEntry),
            },
        };
        if let Some((_, old)) = previous {
            self.release_program(old);
        }
        if let Some((_, users)) = self.programs[slot].as_mut() {
            *users += 1;
        }
        self.by_flow.insert(flow_id, (entry, slot));
        let p = self.entries.at(entry);
        let bank = VmBank { program: slot as u32, _pad0: 0, start_us: run.start_us, regs };
        // SAFETY: in bounds and aligned; BPF reads this memory concurrently, so every store is
        // volatile, and the order (bank, then the flip or the owner) is what it relies on.
        unsafe {
            if previous.is_some() {
                let next = 1 - ((*p).bank & 1);
                write_volatile(&raw mut (*p).banks[next as usize], bank);
                fence(Ordering::Release);
                write_volatile(&raw mut (*p).bank, next);
            } else {
                write_volatile(&raw mut (*p).flow_id, 0);
                fence(Ordering::Release);
                write_volatile(&raw mut (*p).bank, 0);
                write_volatile(&raw mut (*p).window_parts, 0);
                write_volatile(&raw mut (*p).rate, 0);
                write_volatile(&raw mut (*p).banks[0], bank);
                fence(Ordering::Release);
                write_volatile(&raw mut (*p).flow_id, flow_id);
            }
        }
        Ok(Some(entry as u32))
    }

    /// The agent set control registers of `flow_id`'s running program: plain stores into the
    /// bank BPF evaluates (an evaluation in progress sees each register before or after, as
    /// an update applied between two ACKs would). Registers beyond the bank are ones the
    /// program never reads (it would not fit otherwise), so they are left out.
    pub(crate) fn set_controls(&self, flow_id: u32, updates: &[(usize, u64)]) {
        let Some(&(entry, _)) = self.by_flow.get(&flow_id) else { return };
        let p = self.entries.at(entry);
        // SAFETY: in bounds and aligned; single aligned stores.
        unsafe {
            let bank = read_volatile(&raw const (*p).bank) & 1;
            for &(i, v) in updates.iter().filter(|(i, _)| *i < VM_CONTROL_REGS) {
                write_volatile(&raw mut (*p).banks[bank as usize].regs.control[i], v);
            }
        }
    }

    /// The agent set the window and/or the rate of `flow_id` (`VM_SET_*` in `parts`, the
    /// values already in its directive): BPF applies them once, on the next ACK, and takes
    /// the flags with an atomic exchange, so none set meanwhile is lost.
    pub(crate) fn flag_window(&self, flow_id: u32, parts: u32) -> bool {
        let Some(&(entry, _)) = self.by_flow.get(&flow_id) else { return false };
        // SAFETY: in bounds and 4-byte aligned; BPF only changes this word atomically too.
        let flags = unsafe { AtomicU32::from_ptr(&raw mut (*self.entries.at(entry)).window_parts) };
        flags.fetch_or(parts, Ordering::SeqCst);
        true
    }

    /// `flow_id` no longer runs a program here: its entry and program slot are freed.
    pub(crate) fn stop(&mut self, flow_id: u32) -> bool {
        let Some((entry, slot)) = self.by_flow.remove(&flow_id) else { return false };
        // SAFETY: in bounds and aligned.
        unsafe { write_volatile(&raw mut (*self.entries.at(entry)).flow_id, 0) };
        fence(Ordering::Release);
        self.release_program(slot);
        self.free.push(entry);
        true
    }

    fn release_program(&mut self, slot: usize) {
        if let Some((_, users)) = self.programs[slot].as_mut() {
            *users = users.saturating_sub(1);
        }
    }
}

/// The interpreter's register file from the shim's, or why it does not fit.
fn registers(s: &RegisterSnapshot) -> Result<VmRegs, VmUnfit> {
    let beyond = |bank: &'static str, v: &[u64], max: usize| match v.iter().skip(max).position(|&x| x != 0) {
        Some(i) => Err(VmUnfit::RegisterBeyondBank { bank, index: max + i, max }),
        None => Ok(()),
    };
    beyond("report", &s.report, VM_REPORT_REGS)?;
    beyond("control", &s.control, VM_CONTROL_REGS)?;
    let mut r = VmRegs::default();
    for (dst, src) in r.report.iter_mut().zip(&s.report) {
        *dst = *src;
    }
    for (dst, src) in r.control.iter_mut().zip(&s.control) {
        *dst = *src;
    }
    r.tmp = s.tmp;
    r.local = s.local;
    r.implicit[..s.implicit.len()].copy_from_slice(&s.implicit);
    r.micros_zero_us = s.micros_zero_us;
    Ok(r)
}
