//! Datapath programs: validation of INSTALL_EXPR and the per-flow interpreter.
//!
//! A CCP datapath program (compiled by `portus::lang`) is a list of instructions and a list of
//! expressions. The instructions start with a preamble of `Def`s giving the default value of
//! each report and control register; each expression (`when` clause) names a range of
//! instructions computing its condition into the implicit `__eventFlag` register and a range
//! forming its body. On every ACK the datapath evaluates the expressions in order (see
//! [`CcpFlow::on_ack`]): a true condition runs its body and stops the walk unless the body set
//! `__shouldContinue` (`(fallthrough)`); afterwards a non-zero `Cwnd`/`Rate` is applied and, if
//! `__shouldReport` was set, the report registers go to the agent in a MEASURE and the volatile
//! ones return to their defaults.
//!
//! The codes and register banks are the protocol's (`ccswitch_protocol::lang`, with a table of
//! the banks); the standard program's layout is `ccswitch_protocol::standard`, and [`fold`] tells
//! whether a flow runs it in a mode a kernel can fold.
//!
//! [`Program::from_install`] rejects what libccp would misexecute or silently ignore: unknown
//! op or register codes, indices beyond their banks (libccp reads them out of bounds), writes
//! to immediates or primitives, expressions whose ranges leave the instruction list, `Def`s
//! outside the preamble or with a non-immediate default. Programs are shared by all flows of a
//! datapath through a bounded [`ProgramTable`], as in libccp.

mod exec;
pub mod fold;
mod flow;

use std::sync::Arc;

use thiserror::Error;

use ccswitch_protocol::lang::{
    reg_type, Implicit, Op, Primitive, DEF_INFINITY_SENTINEL, FRESH_AGENT_PROGRAM_UID, INFINITY, MAX_CONTROL_REGS,
    MAX_LOCAL_REGS, MAX_REPORT_REGS, MAX_TMP_REGS,
};
use ccswitch_protocol::wire::{InstallExpr, InstrRecord, MsgType, RegRecord, MAX_EXPRESSIONS, MAX_INSTRUCTIONS};

pub use exec::{ExecError, Primitives, RegisterSnapshot};
pub use flow::{CcpFlow, Step};

/// Programs a datapath keeps installed (the `max_programs` libccp's datapaths configure, 10 in
/// its reference test datapath).
pub const MAX_PROGRAMS: usize = 10;

/// A validated register operand; indices are within their bank.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reg {
    Control {
        index: u8,
        volatile: bool,
    },
    /// An immediate operand, zero-extended from its 32-bit wire form.
    Immediate(u32),
    Implicit(Implicit),
    Local(u8),
    Primitive(Primitive),
    Report {
        index: u8,
        volatile: bool,
    },
    Tmp(u8),
}

impl Reg {
    /// The operand as libccp's wire form has it: its type code and its index (or, for an
    /// immediate, its value).
    pub fn record(self) -> RegRecord {
        use reg_type::*;
        let (reg_type, value) = match self {
            Reg::Control { index, volatile } => (if volatile { VOLATILE_CONTROL } else { NONVOLATILE_CONTROL }, u32::from(index)),
            Reg::Immediate(v) => (IMMEDIATE, v),
            Reg::Implicit(r) => (IMPLICIT, r as u32),
            Reg::Local(i) => (LOCAL, u32::from(i)),
            Reg::Primitive(p) => (PRIMITIVE, p as u32),
            Reg::Report { index, volatile } => (if volatile { VOLATILE_REPORT } else { NONVOLATILE_REPORT }, u32::from(index)),
            Reg::Tmp(i) => (TMP, u32::from(i)),
        };
        RegRecord { reg_type, value }
    }

    fn is_writable(self) -> bool {
        !matches!(self, Reg::Immediate(_) | Reg::Primitive(_))
    }
}

/// A validated instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Instr {
    pub op: Op,
    pub res: Reg,
    pub left: Reg,
    pub right: Reg,
}

/// A validated expression: both ranges lie within the instruction list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expr {
    pub cond: std::ops::Range<usize>,
    pub body: std::ops::Range<usize>,
}

/// A default from the `Def` preamble: where it goes and its value (infinity already mapped).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct DefValue {
    reg: Reg,
    value: u64,
}

/// A validated datapath program, ready to run on any flow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    uid: u32,
    exprs: Vec<Expr>,
    instrs: Vec<Instr>,
    defaults: Vec<DefValue>,
    num_report_fields: usize,
    /// It is the standard program ([`fold::is_standard`]), decided once at install: the
    /// comparison walks every instruction, and a shim asks after every report (7.6% of the ovs
    /// shim's time at 10k flows when it compared each time).
    standard: bool,
}

/// Why a program, message or update was refused.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ProgramError {
    #[error("{what}: {count} exceeds the limit of {max}")]
    TooMany {
        what: &'static str,
        count: usize,
        max: usize,
    },
    #[error("instruction {instr}: unknown op code {code}")]
    UnknownOp { instr: usize, code: u8 },
    #[error("instruction {instr}: unknown register type {reg_type}")]
    UnknownRegType { instr: usize, reg_type: u8 },
    #[error("instruction {instr}: register type {reg_type} index {index} out of range")]
    RegIndexOutOfRange {
        instr: usize,
        reg_type: u8,
        index: u32,
    },
    #[error("instruction {instr}: result register {reg:?} is read-only")]
    ReadOnlyResult { instr: usize, reg: Reg },
    #[error("instruction {instr}: {reason}")]
    BadDef { instr: usize, reason: &'static str },
    #[error("expression {expr}: instructions {start}+{len} exceed the {num_instrs} instructions")]
    ExpressionOutOfRange {
        expr: usize,
        start: u32,
        len: u32,
        num_instrs: usize,
    },
    #[error("program table is full ({MAX_PROGRAMS} programs)")]
    ProgramTableFull,
    #[error("no installed program has uid {0}")]
    UnknownProgram(u32),
    #[error("update of register type {reg_type} index {index} is not allowed")]
    BadUpdate { reg_type: u8, index: u32 },
    #[error("{0:?} messages are not handled by a flow")]
    NotForFlow(MsgType),
}

impl Program {
    /// Validates an INSTALL_EXPR.
    pub fn from_install(msg: &InstallExpr) -> Result<Self, ProgramError> {
        let mut prog = Self::decode(msg)?;
        prog.standard = fold::same_as_standard(&prog);
        Ok(prog)
    }

    /// An INSTALL_EXPR validated, not yet compared with the standard program.
    fn decode(msg: &InstallExpr) -> Result<Self, ProgramError> {
        check_count("expressions", msg.expressions.len(), MAX_EXPRESSIONS)?;
        check_count("instructions", msg.instructions.len(), MAX_INSTRUCTIONS)?;
        let instrs = msg
            .instructions
            .iter()
            .enumerate()
            .map(|(i, rec)| decode_instr(i, rec))
            .collect::<Result<Vec<_>, _>>()?;
        let exprs = msg
            .expressions
            .iter()
            .enumerate()
            .map(|(e, rec)| {
                Ok(Expr {
                    cond: instr_range(e, rec.cond_start, rec.num_cond, instrs.len())?,
                    body: instr_range(e, rec.body_start, rec.num_body, instrs.len())?,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let defaults = preamble_defaults(&instrs)?;
        let num_report_fields = defaults
            .iter()
            .filter(|d| matches!(d.reg, Reg::Report { .. }))
            .count();
        check_count("report fields", num_report_fields, MAX_REPORT_REGS)?;
        Ok(Self {
            uid: msg.program_uid,
            exprs,
            instrs,
            defaults,
            num_report_fields,
            standard: false,
        })
    }

    pub fn uid(&self) -> u32 {
        self.uid
    }

    pub fn instructions(&self) -> &[Instr] {
        &self.instrs
    }

    pub fn expressions(&self) -> &[Expr] {
        &self.exprs
    }

    /// The `Def` preamble's defaults: each report or control register with its value (what
    /// a start sets and a report restores for the volatile ones).
    pub fn defaults(&self) -> impl Iterator<Item = (Reg, u64)> + '_ {
        self.defaults.iter().map(|d| (d.reg, d.value))
    }

    /// Fields in this program's MEASURE: report registers `0..n`, where `n` counts the report
    /// `Def`s (libccp `num_to_return`).
    pub fn num_report_fields(&self) -> usize {
        self.num_report_fields
    }
}

fn check_count(what: &'static str, count: usize, max: usize) -> Result<(), ProgramError> {
    if count > max {
        return Err(ProgramError::TooMany { what, count, max });
    }
    Ok(())
}

fn instr_range(
    expr: usize,
    start: u32,
    len: u32,
    num_instrs: usize,
) -> Result<std::ops::Range<usize>, ProgramError> {
    let (s, l) = (start as usize, len as usize);
    match s.checked_add(l) {
        Some(end) if end <= num_instrs => Ok(s..end),
        _ => Err(ProgramError::ExpressionOutOfRange {
            expr,
            start,
            len,
            num_instrs,
        }),
    }
}

fn decode_instr(instr: usize, rec: &InstrRecord) -> Result<Instr, ProgramError> {
    let op = Op::from_code(u32::from(rec.op)).ok_or(ProgramError::UnknownOp {
        instr,
        code: rec.op,
    })?;
    let res = decode_reg(instr, rec.res)?;
    if !res.is_writable() {
        return Err(ProgramError::ReadOnlyResult { instr, reg: res });
    }
    Ok(Instr {
        op,
        res,
        left: decode_reg(instr, rec.left)?,
        right: decode_reg(instr, rec.right)?,
    })
}

fn decode_reg(instr: usize, rec: RegRecord) -> Result<Reg, ProgramError> {
    use reg_type::*;
    let RegRecord { reg_type, value } = rec;
    let out_of_range = ProgramError::RegIndexOutOfRange {
        instr,
        reg_type,
        index: value,
    };
    let bank_index = |max: usize| -> Result<u8, ProgramError> {
        if (value as usize) < max {
            Ok(value as u8)
        } else {
            Err(out_of_range.clone())
        }
    };
    Ok(match reg_type {
        IMMEDIATE => Reg::Immediate(value),
        NONVOLATILE_CONTROL | VOLATILE_CONTROL => Reg::Control {
            index: bank_index(MAX_CONTROL_REGS)?,
            volatile: reg_type == VOLATILE_CONTROL,
        },
        NONVOLATILE_REPORT | VOLATILE_REPORT => Reg::Report {
            index: bank_index(MAX_REPORT_REGS)?,
            volatile: reg_type == VOLATILE_REPORT,
        },
        TMP => Reg::Tmp(bank_index(MAX_TMP_REGS)?),
        LOCAL => Reg::Local(bank_index(MAX_LOCAL_REGS)?),
        IMPLICIT => Reg::Implicit(Implicit::from_code(value).ok_or(out_of_range)?),
        PRIMITIVE => Reg::Primitive(Primitive::from_code(value).ok_or(out_of_range)?),
        _ => return Err(ProgramError::UnknownRegType { instr, reg_type }),
    })
}

/// Collects the `Def` preamble. libccp only honours `Def`s before the first other instruction
/// and only for report/control targets with an immediate default; anything else is refused.
fn preamble_defaults(instrs: &[Instr]) -> Result<Vec<DefValue>, ProgramError> {
    let preamble_len = instrs.iter().take_while(|i| i.op == Op::Def).count();
    if let Some(pos) = instrs[preamble_len..].iter().position(|i| i.op == Op::Def) {
        return Err(ProgramError::BadDef {
            instr: preamble_len + pos,
            reason: "Def after the preamble",
        });
    }
    instrs[..preamble_len]
        .iter()
        .enumerate()
        .map(|(i, def)| {
            if !matches!(def.left, Reg::Report { .. } | Reg::Control { .. }) {
                return Err(ProgramError::BadDef {
                    instr: i,
                    reason: "Def target is not a report or control register",
                });
            }
            let Reg::Immediate(v) = def.right else {
                return Err(ProgramError::BadDef {
                    instr: i,
                    reason: "Def default is not immediate",
                });
            };
            let value = if v == DEF_INFINITY_SENTINEL {
                INFINITY
            } else {
                u64::from(v)
            };
            Ok(DefValue {
                reg: def.left,
                value,
            })
        })
        .collect()
}

/// The datapath-wide table of installed programs (libccp `datapath->programs`), bounded by
/// [`MAX_PROGRAMS`]. Flows hold their running program by `Arc`, so replacing or clearing table
/// entries never disturbs a running flow; it only affects later CHANGE_PROGs.
#[derive(Debug, Default)]
pub struct ProgramTable {
    programs: Vec<Arc<Program>>,
}

impl ProgramTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// Validates and installs an INSTALL_EXPR; returns the program uid.
    pub fn install_msg(&mut self, msg: &InstallExpr) -> Result<u32, ProgramError> {
        let prog = Program::from_install(msg)?;
        let uid = prog.uid();
        self.install(prog)?;
        Ok(uid)
    }

    /// Installs a program. Uid [`FRESH_AGENT_PROGRAM_UID`] first empties the table (libccp);
    /// an already installed uid is replaced; otherwise a full table is an error.
    pub fn install(&mut self, prog: Program) -> Result<(), ProgramError> {
        if prog.uid() == FRESH_AGENT_PROGRAM_UID {
            self.programs.clear();
        }
        let prog = Arc::new(prog);
        if let Some(slot) = self.programs.iter_mut().find(|p| p.uid() == prog.uid()) {
            *slot = prog;
        } else if self.programs.len() < MAX_PROGRAMS {
            self.programs.push(prog);
        } else {
            return Err(ProgramError::ProgramTableFull);
        }
        Ok(())
    }

    pub fn get(&self, uid: u32) -> Option<Arc<Program>> {
        self.programs.iter().find(|p| p.uid() == uid).cloned()
    }

    pub fn len(&self) -> usize {
        self.programs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.programs.is_empty()
    }
}
