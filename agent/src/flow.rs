//! One flow under the agent's control: its algorithm (simple or full API) and what to tell
//! the datapath after each event.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Result};
use ccswitch_algorithms::{
    Algorithm, FlowControl, FlowState, Instance, ProgramAlgorithm, Report, Reporting,
};
use ccswitch_ccp::wire;

use crate::program::{cwnd_rate_fields, CompiledProgram, SimpleProgram};

/// Instantiate an algorithm from a spec: `NAME[:PARAM=VALUE,...]` from the library, or
/// `py:MODULE:CLASS` for a Python algorithm.
pub fn instantiate(spec: &str) -> Result<Instance> {
    if let Some(target) = spec.strip_prefix("py:") {
        return crate::python::load(target).map(Instance::Simple);
    }
    Ok(ccswitch_algorithms::instantiate(spec)?)
}

/// Every program compiled so far, by source, shared by all datapath connections.
#[derive(Default)]
pub struct ProgramCache {
    by_source: Mutex<HashMap<String, Arc<CompiledProgram>>>,
}

impl ProgramCache {
    pub fn get(&self, name: &str, source: &str) -> Result<Arc<CompiledProgram>> {
        let mut cache = self.by_source.lock().expect("program cache poisoned");
        if let Some(p) = cache.get(source) {
            return Ok(Arc::clone(p));
        }
        let p = Arc::new(CompiledProgram::compile(name, source)?);
        cache.insert(source.to_string(), Arc::clone(&p));
        Ok(p)
    }
}

/// What to send the datapath for a flow: a program change (with its initial updates) or
/// updates to the running program.
#[derive(Debug, PartialEq)]
pub enum Answer {
    ChangeProgram { program: Arc<CompiledProgram>, updates: Vec<wire::UpdateField> },
    Update(Vec<wire::UpdateField>),
}

impl PartialEq for CompiledProgram {
    fn eq(&self, other: &Self) -> bool {
        self.uid == other.uid
    }
}

impl std::fmt::Debug for CompiledProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "program {} (uid {})", self.name, self.uid)
    }
}

enum Kind {
    Simple { algorithm: Box<dyn Algorithm>, state: FlowState, reporting: Reporting },
    Full { algorithm: Box<dyn ProgramAlgorithm>, programs: Vec<Arc<CompiledProgram>>, current: usize },
}

pub struct FlowController {
    kind: Kind,
    mss_bytes: u32,
    pub reports: u64,
}

impl FlowController {
    /// Set up a flow and compute what to install on the datapath first.
    pub fn new(
        instance: Instance,
        mss_bytes: u32,
        init_cwnd_bytes: u32,
        simple: &SimpleProgram,
        cache: &ProgramCache,
    ) -> Result<(Self, Answer)> {
        match instance {
            Instance::Simple(algorithm) => {
                let state = FlowState::new(mss_bytes, init_cwnd_bytes);
                let reporting = algorithm.reporting();
                let flow = Self {
                    kind: Kind::Simple { algorithm, state, reporting },
                    mss_bytes,
                    reports: 0,
                };
                let mut updates = flow.window_fields();
                if reporting != Reporting::PerRtt {
                    updates.extend(simple.reporting_fields(reporting));
                }
                let program = Arc::clone(&simple.program);
                Ok((flow, Answer::ChangeProgram { program, updates }))
            }
            Instance::Full(mut algorithm) => {
                let programs = algorithm
                    .programs()
                    .into_iter()
                    .map(|(name, source)| cache.get(name, &source))
                    .collect::<Result<Vec<_>>>()?;
                if programs.is_empty() {
                    return Err(anyhow!("{} declares no datapath program", algorithm.name()));
                }
                let mut ctl = Control::new(mss_bytes, &programs, 0);
                ctl.changed = true;
                algorithm.on_create(&mut ctl);
                let (current, answer) = ctl.answer(&programs)?;
                let flow = Self { kind: Kind::Full { algorithm, programs, current }, mss_bytes, reports: 0 };
                Ok((flow, answer))
            }
        }
    }

    pub fn name(&self) -> &str {
        match &self.kind {
            Kind::Simple { algorithm, .. } => algorithm.name(),
            Kind::Full { algorithm, .. } => algorithm.name(),
        }
    }

    /// The program whose reports this flow expects.
    pub fn program_uid(&self, simple: &SimpleProgram) -> u32 {
        match &self.kind {
            Kind::Simple { .. } => simple.program.uid,
            Kind::Full { programs, current, .. } => programs[*current].uid,
        }
    }

    pub fn cwnd_bytes(&self) -> Option<u64> {
        match &self.kind {
            Kind::Simple { state, .. } => Some(state.cwnd_bytes),
            Kind::Full { .. } => None,
        }
    }

    fn window_fields(&self) -> Vec<wire::UpdateField> {
        match &self.kind {
            Kind::Simple { state, .. } => cwnd_rate_fields(
                Some(state.cwnd_bytes.min(u64::from(u32::MAX)) as u32),
                state.pacing_rate_bytes_per_s,
            ),
            Kind::Full { .. } => Vec::new(),
        }
    }

    /// React to a report's fields. Always answers: an answered report is how the datapath
    /// knows the agent is alive (one unanswered past its timeout means fallback).
    pub fn on_report(&mut self, fields: &[u64], simple: &SimpleProgram) -> Result<Answer> {
        self.reports += 1;
        match &mut self.kind {
            Kind::Simple { algorithm, state, reporting } => {
                let m = simple
                    .measurement(fields)
                    .ok_or_else(|| anyhow!("report with {} fields, too few", fields.len()))?;
                state.observe(&m);
                algorithm.on_measurement(state, &m);
                let wanted = algorithm.reporting();
                let changed_reporting = wanted != *reporting;
                *reporting = wanted;
                let mut updates = self.window_fields();
                if changed_reporting {
                    updates.extend(simple.reporting_fields(wanted));
                }
                Ok(Answer::Update(updates))
            }
            Kind::Full { algorithm, programs, current } => {
                let program = &programs[*current];
                let report = Report { program: &program.name, names: &program.report_names, values: fields };
                let mut ctl = Control::new(self.mss_bytes, programs, *current);
                algorithm.on_report(&mut ctl, &report);
                let (next, answer) = ctl.answer(programs)?;
                *current = next;
                Ok(answer)
            }
        }
    }
}

/// What a full-API algorithm asked for during one callback.
struct Control<'a> {
    mss_bytes: u32,
    programs: &'a [Arc<CompiledProgram>],
    program: usize,
    changed: bool,
    cwnd_bytes: Option<u32>,
    rate_bytes_per_s: Option<u64>,
    controls: Vec<(String, u64)>,
    error: Option<String>,
}

impl<'a> Control<'a> {
    fn new(mss_bytes: u32, programs: &'a [Arc<CompiledProgram>], program: usize) -> Self {
        Self {
            mss_bytes,
            programs,
            program,
            changed: false,
            cwnd_bytes: None,
            rate_bytes_per_s: None,
            controls: Vec::new(),
            error: None,
        }
    }

    fn answer(self, programs: &[Arc<CompiledProgram>]) -> Result<(usize, Answer)> {
        if let Some(e) = self.error {
            return Err(anyhow!(e));
        }
        let program = &programs[self.program];
        let mut updates = cwnd_rate_fields(self.cwnd_bytes, self.rate_bytes_per_s);
        for (name, value) in &self.controls {
            updates.push(program.control_field(name, *value)?);
        }
        let answer = if self.changed {
            Answer::ChangeProgram { program: Arc::clone(program), updates }
        } else {
            Answer::Update(updates)
        };
        Ok((self.program, answer))
    }
}

impl FlowControl for Control<'_> {
    fn mss_bytes(&self) -> u32 {
        self.mss_bytes
    }

    fn program(&self) -> &str {
        &self.programs[self.program].name
    }

    fn change_program(&mut self, name: &str) {
        match self.programs.iter().position(|p| p.name == name) {
            Some(i) => {
                self.program = i;
                self.changed = true;
                // Control registers set before the change belonged to the old program.
                self.controls.clear();
            }
            None => self.error = Some(format!("the algorithm has no program {name:?}")),
        }
    }

    fn set_cwnd(&mut self, bytes: u32) {
        self.cwnd_bytes = Some(bytes);
    }

    fn set_rate(&mut self, bytes_per_s: u64) {
        self.rate_bytes_per_s = Some(bytes_per_s);
    }

    fn set_control(&mut self, name: &str, value: u64) {
        self.controls.retain(|(n, _)| n != name);
        self.controls.push((name.to_string(), value));
    }
}
