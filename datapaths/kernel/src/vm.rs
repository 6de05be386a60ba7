//! Programs for the bounded interpreter in BPF (`bpf/vm.bpf.h`): a validated CCP program laid
//! out as `struct ccsw_vm_program`, or why it cannot run there. The interpreter's banks are
//! smaller than libccp's (32 report and 32 control registers, 128 instructions, 32
//! expressions, against 110, 110, 256 and 256), which every program of the agent and of
//! portus's algorithms fits; a program that does not runs in the shim's interpreter instead.

use ccswitch_ccp::program::{Program, Reg};
use thiserror::Error;

use crate::abi::{
    VmDefault, VmExpr, VmInstr, VmProgram, VM_CONTROL_REGS, VM_MAX_DEFAULTS, VM_MAX_EXPRS, VM_MAX_INSTRS,
    VM_REPORT_REGS,
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
