//! Per-flow datapath state: the running program, its registers, and the window and rate the
//! program commands.
//!
//! Evaluation is driven by the datapath (libccp `ccp_invoke`): [`CcpFlow::on_ack`] on every ACK,
//! and [`CcpFlow::on_tick`] from a timer when ACKs stop. libccp itself has no timer, so a program
//! waiting for `(> Micros …)` would stall on an idle or ACK-starved flow; a tick runs the same
//! evaluation with the latest flow-wide measurements and zero per-ACK counts (see
//! [`Primitives::for_tick`]), so time-based conditions fire and nothing is counted twice.
//! `Micros` is the clock (the `now_us` argument, µs, any monotonic origin) minus the time the
//! program started, and writing `Micros` (e.g. `(:= Micros 0)`) restarts it, as in libccp.
//!
//! Agent messages are applied at once rather than staged for the next ACK as libccp must (it
//! receives them outside the flow's context); since a `CcpFlow` is borrowed exclusively, the
//! effect is the same and CHANGE_PROG is atomic with respect to evaluation.

use std::sync::Arc;

use super::exec::{run_expressions, Registers};
use ccswitch_protocol::lang::{reg_type, Implicit, MAX_CONTROL_REGS};
use ccswitch_protocol::wire::{Measure, Msg, UpdateField};

use super::{ExecError, Primitives, Program, ProgramError, ProgramTable};

/// What the datapath must do after an evaluation or an agent message.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Step {
    /// A MEASURE to send to the agent.
    pub report: Option<Measure>,
    /// New congestion window in bytes, present only when it changed.
    pub cwnd_bytes: Option<u32>,
    /// New pacing rate in bytes/s, present only when it changed.
    pub rate_bytes_per_s: Option<u64>,
    /// The evaluation stopped on an arithmetic fault; nothing was applied or reported
    /// (libccp returns the error from `state_machine` before `set_cwnd` and the report).
    pub error: Option<ExecError>,
}

/// A validated register update.
enum Update {
    Control(usize, u64),
    Cwnd(u64),
    Rate(u64),
}

/// One connection's CCP state (libccp `ccp_connection` + `ccp_priv_state`).
#[derive(Clone, Debug)]
pub struct CcpFlow {
    sid: u32,
    mss: u32,
    cwnd_bytes: u32,
    rate_bytes_per_s: u64,
    program: Option<Arc<Program>>,
    regs: Registers,
    /// The last ACK's measurements, for [`on_tick`](Self::on_tick); allocated at the first
    /// ACK, which a flow the datapath folds or runs never brings here.
    last_prims: Option<Box<Primitives>>,
}

impl CcpFlow {
    /// A flow with no program yet (it runs nothing until a CHANGE_PROG) and the datapath's
    /// initial window; rate 0 means "not paced".
    pub fn new(sid: u32, init_cwnd_bytes: u32, mss: u32) -> Self {
        Self {
            sid,
            mss,
            cwnd_bytes: init_cwnd_bytes,
            rate_bytes_per_s: 0,
            program: None,
            regs: Registers::new(),
            last_prims: None,
        }
    }

    pub fn sid(&self) -> u32 {
        self.sid
    }

    pub fn mss(&self) -> u32 {
        self.mss
    }

    /// The window the flow last commanded (or was told about by [`sync_datapath`](Self::sync_datapath)).
    pub fn cwnd_bytes(&self) -> u32 {
        self.cwnd_bytes
    }

    pub fn rate_bytes_per_s(&self) -> u64 {
        self.rate_bytes_per_s
    }

    pub fn program(&self) -> Option<&Program> {
        self.program.as_deref()
    }

    /// Its registers now (for a datapath that runs the program from here on).
    pub fn registers(&self) -> super::RegisterSnapshot {
        self.regs.snapshot()
    }

    /// Control register `index` (0 beyond the register file).
    pub fn control(&self, index: usize) -> u64 {
        self.regs.control(index)
    }

    pub fn program_uid(&self) -> Option<u32> {
        self.program.as_ref().map(|p| p.uid())
    }

    /// Tells the flow the window and rate the datapath actually uses, e.g. after a fallback
    /// changed them (libccp reads `snd_cwnd`/`snd_rate` into `Cwnd`/`Rate` before each run).
    pub fn sync_datapath(&mut self, cwnd_bytes: u32, rate_bytes_per_s: u64) {
        self.cwnd_bytes = cwnd_bytes;
        self.rate_bytes_per_s = rate_bytes_per_s;
    }

    /// Applies an UPDATE_FIELDS or CHANGE_PROG addressed to this flow; CHANGE_PROG looks the
    /// program up in `programs`. Other message types are refused.
    pub fn handle(
        &mut self,
        msg: &Msg,
        programs: &ProgramTable,
        now_us: u64,
    ) -> Result<Step, ProgramError> {
        match msg {
            Msg::UpdateFields(m) => self.update_fields(&m.updates),
            Msg::ChangeProg(m) => {
                let prog = programs
                    .get(m.program_uid)
                    .ok_or(ProgramError::UnknownProgram(m.program_uid))?;
                self.change_program(prog, &m.updates, now_us)
            }
            other => Err(ProgramError::NotForFlow(other.msg_type())),
        }
    }

    /// Switches to `prog` at `now_us`: registers reset to the program's defaults, `Micros`
    /// restarts, then `updates` apply. Cwnd and rate carry over unless an update sets them.
    /// All updates are checked first; on error nothing changes.
    pub fn change_program(
        &mut self,
        prog: Arc<Program>,
        updates: &[UpdateField],
        now_us: u64,
    ) -> Result<Step, ProgramError> {
        validate_updates(updates)?;
        self.regs.start_program(&prog, now_us);
        self.program = Some(prog);
        Ok(self.apply_updates(updates))
    }

    /// Sets control registers, `Cwnd` or `Rate` (the only fields libccp lets the agent set).
    /// All updates are checked first; on error nothing changes.
    pub fn update_fields(&mut self, updates: &[UpdateField]) -> Result<Step, ProgramError> {
        validate_updates(updates)?;
        Ok(self.apply_updates(updates))
    }

    /// Runs the program for one ACK.
    pub fn on_ack(&mut self, prims: &Primitives, now_us: u64) -> Step {
        match &mut self.last_prims {
            Some(last) => **last = *prims,
            None => self.last_prims = Some(Box::new(*prims)),
        }
        self.evaluate(prims, now_us)
    }

    /// Runs the program from a timer, with [`Primitives::for_tick`] of the last ACK's.
    pub fn on_tick(&mut self, now_us: u64) -> Step {
        let prims = self.last_prims.as_deref().copied().unwrap_or_default().for_tick(now_us);
        self.evaluate(&prims, now_us)
    }

    fn evaluate(&mut self, prims: &Primitives, now_us: u64) -> Step {
        let Some(prog) = self.program.clone() else {
            return Step::default();
        };
        self.regs
            .set_implicit(Implicit::Cwnd, u64::from(self.cwnd_bytes));
        self.regs
            .set_implicit(Implicit::Rate, self.rate_bytes_per_s);
        self.regs.begin_evaluation(now_us);
        if let Err(e) = run_expressions(&prog, &mut self.regs, prims, now_us) {
            return Step {
                error: Some(e),
                ..Step::default()
            };
        }
        let mut step = Step {
            cwnd_bytes: self.command_cwnd(self.regs.implicit(Implicit::Cwnd)),
            rate_bytes_per_s: self.command_rate(self.regs.implicit(Implicit::Rate)),
            ..Step::default()
        };
        if self.regs.implicit(Implicit::ShouldReport) != 0 {
            step.report = Some(Measure {
                sid: self.sid,
                program_uid: prog.uid(),
                fields: self.regs.report_fields(prog.num_report_fields()),
            });
            self.regs.reset_volatile(&prog);
        }
        step
    }

    /// Applies updates [`validate_updates`] accepted.
    fn apply_updates(&mut self, updates: &[UpdateField]) -> Step {
        let mut step = Step::default();
        for u in updates {
            match update(u).expect("validated") {
                Update::Control(i, v) => self.regs.set_control(i, v),
                Update::Cwnd(v) => {
                    self.regs.set_implicit(Implicit::Cwnd, v);
                    // The agent's window is a command even when it equals the datapath's (as
                    // libccp calls set_cwnd for it): the datapath may hold no directive yet,
                    // and a flow whose first answer keeps its initial window must still come
                    // under the agent's control then, not at its first change.
                    if v > 0 {
                        self.command_cwnd(v);
                        step.cwnd_bytes = Some(self.cwnd_bytes);
                    }
                }
                Update::Rate(v) => {
                    self.regs.set_implicit(Implicit::Rate, v);
                    step.rate_bytes_per_s = self.command_rate(v).or(step.rate_bytes_per_s);
                }
            }
        }
        step
    }

    /// Adopts a window from the `Cwnd` register: 0 means "leave it" (libccp only calls
    /// `set_cwnd` for a positive value); values above u32 saturate (libccp would truncate).
    fn command_cwnd(&mut self, v: u64) -> Option<u32> {
        let cwnd = u32::try_from(v).unwrap_or(u32::MAX);
        if cwnd == 0 || cwnd == self.cwnd_bytes {
            return None;
        }
        self.cwnd_bytes = cwnd;
        Some(cwnd)
    }

    /// Adopts a rate from the `Rate` register; 0 means "leave it", as in libccp.
    fn command_rate(&mut self, v: u64) -> Option<u64> {
        if v == 0 || v == self.rate_bytes_per_s {
            return None;
        }
        self.rate_bytes_per_s = v;
        Some(v)
    }
}

/// Accepts updates of control registers (volatile or not) and of the implicit `Cwnd` and `Rate`
/// (libccp `stage_update`, which also ignores other implicit registers and does not bound the
/// control index; both are refused here). Checked whole before any applies, and read again as
/// they apply rather than collected: an answer's vector of checked updates was an allocation
/// per report.
fn validate_updates(updates: &[UpdateField]) -> Result<(), ProgramError> {
    updates.iter().try_for_each(|u| update(u).map(|_| ()))
}

fn update(u: &UpdateField) -> Result<Update, ProgramError> {
    let index = u.reg_index as usize;
    match u.reg_type {
        reg_type::NONVOLATILE_CONTROL | reg_type::VOLATILE_CONTROL if index < MAX_CONTROL_REGS => {
            Ok(Update::Control(index, u.value))
        }
        reg_type::IMPLICIT if index == Implicit::Cwnd as usize => Ok(Update::Cwnd(u.value)),
        reg_type::IMPLICIT if index == Implicit::Rate as usize => Ok(Update::Rate(u.value)),
        _ => Err(ProgramError::BadUpdate { reg_type: u.reg_type, index: u.reg_index }),
    }
}
