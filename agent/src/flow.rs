//! One flow under the agent's control: its algorithm (simple or full API) and what to tell
//! the datapath after each event.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Result};
use ccswitch_algorithms::{
    Algorithm, FlowControl, DatapathInfo, FlowState, Instance, Measurement, ProgramAlgorithm, Report, Reporting, SlowStart,
};
use ccswitch_protocol::wire;

use crate::program::{cwnd_rate_fields, CompiledProgram, SimpleProgram};
use crate::selector::features::Features;
use crate::selector::{DecisionKind, Selector};

/// Instantiate an algorithm from a spec: `NAME[:PARAM=VALUE,...]` from the library,
/// `py:MODULE:CLASS` for a Python class (simple API, or full API if it declares
/// `datapath_programs`), or `pyportus:FILE.py[:CLASS]` for an unmodified pyportus algorithm.
pub fn instantiate(spec: &str) -> Result<Instance> {
    if let Some(target) = spec.strip_prefix("pyportus:") {
        return crate::pyportus::load_pyportus(target).map(Instance::Full);
    }
    if let Some(target) = spec.strip_prefix("py:") {
        if let Some(full) = crate::pyportus::load_full_api(target)? {
            return Ok(Instance::Full(full));
        }
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

    /// The compiled program with this uid, if any (tests read answers with it).
    #[cfg(test)]
    pub fn by_uid(&self, uid: u32) -> Option<Arc<CompiledProgram>> {
        let cache = self.by_source.lock().expect("program cache poisoned");
        cache.values().find(|p| p.uid == uid).cloned()
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
    Full {
        algorithm: Box<dyn ProgramAlgorithm>,
        programs: Vec<Arc<CompiledProgram>>,
        current: usize,
        info: DatapathInfo,
        /// The flow's window as the agent last knew it: what the algorithm set, else what the
        /// program last reported of the datapath's `Cwnd`, else the initial window.
        cwnd_bytes: u64,
        /// The pacing rate the algorithm last set.
        rate_bytes_per_s: Option<u64>,
    },
}

pub struct FlowController {
    kind: Kind,
    mss_bytes: u32,
    pub reports: u64,
    /// Chooses this flow's algorithm when a policy is loaded (boxed: most flows have none,
    /// and a flow without one then costs a pointer, not the selector's window and state).
    selector: Option<Box<Selector>>,
    /// The algorithm an operator pinned this flow to; the selector stays quiet meanwhile.
    pinned: Option<String>,
    pub handovers: u32,
    /// The previous algorithm paced and the current one does not: the datapath's rate must
    /// be cleared with the next update.
    clear_rate: bool,
}

/// Why a flow changed algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandoverKind {
    /// The selector's first decision, once the feature window filled.
    Spatial,
    /// A later decision of the selector, past its hysteresis.
    Temporal,
    /// An operator's pin through the operator interface.
    Pinned,
}

impl HandoverKind {
    pub fn as_str(self) -> &'static str {
        match self {
            HandoverKind::Spatial => "spatial",
            HandoverKind::Temporal => "temporal",
            HandoverKind::Pinned => "pinned",
        }
    }
}

/// One change of a flow's algorithm, for the log and the events file.
#[derive(Clone, Debug)]
pub struct Handover {
    pub from: String,
    pub to: String,
    pub kind: HandoverKind,
    pub reason: String,
    pub features: Option<Features>,
    pub cwnd_bytes: u64,
    pub pacing_rate_bytes_per_s: Option<u64>,
}

/// What one report led to.
pub struct Reported {
    pub answer: Answer,
    /// The report decoded (for a full-API flow, as far as its program's source says what its
    /// fields measure: [`crate::program::ReportMeaning`]).
    pub measurement: Measurement,
    pub handover: Option<Handover>,
}

impl FlowController {
    /// Set up a flow and compute what to install on the datapath first.
    pub fn new(
        instance: Instance,
        info: DatapathInfo,
        simple: &SimpleProgram,
        cache: &ProgramCache,
    ) -> Result<(Self, Answer)> {
        let blank = |kind| Self {
            kind,
            mss_bytes: info.mss_bytes,
            reports: 0,
            selector: None,
            pinned: None,
            handovers: 0,
            clear_rate: false,
        };
        match instance {
            Instance::Simple(algorithm) => {
                let state = FlowState::new(info.mss_bytes, info.init_cwnd_bytes);
                let reporting = algorithm.reporting();
                let flow = blank(Kind::Simple { algorithm, state, reporting });
                let mut updates = flow.window_fields(simple);
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
                    .map(|(name, source)| cache.get(&name, &source))
                    .collect::<Result<Vec<_>>>()?;
                if programs.is_empty() {
                    return Err(anyhow!("{} declares no datapath program", algorithm.name()));
                }
                let mut ctl = Control::new(info, &programs, 0);
                ctl.changed = true;
                algorithm.on_create(&mut ctl);
                let cwnd_bytes = ctl.cwnd_bytes.map_or(u64::from(info.init_cwnd_bytes), u64::from);
                let rate_bytes_per_s = ctl.rate_bytes_per_s;
                let (current, answer) = ctl.answer(&programs)?;
                let kind = Kind::Full { algorithm, programs, current, info, cwnd_bytes, rate_bytes_per_s };
                Ok((blank(kind), answer))
            }
        }
    }

    /// Let `selector` choose this flow's algorithm from now on (simple-API flows only: the
    /// selector reads the standard program's reports).
    pub fn set_selector(&mut self, selector: Selector) {
        if matches!(self.kind, Kind::Simple { .. }) {
            self.selector = Some(Box::new(selector));
        }
    }

    pub fn selector_mut(&mut self) -> Option<&mut Selector> {
        self.selector.as_deref_mut()
    }

    /// The algorithm spec this flow votes for in the destination memory when it ends: the one
    /// it runs, if the selector made its first decision under the policy in force and no pin
    /// holds the flow (see crate::memory).
    pub fn memory_vote(&self) -> Option<&str> {
        let selector = self.selector.as_ref().filter(|s| s.decided() && self.pinned.is_none())?;
        Some(selector.current_algorithm())
    }

    pub fn features(&self) -> Option<Features> {
        self.selector.as_deref().map(Selector::features)
    }

    /// Pin the flow to `spec` (handing over now if it runs something else), or unpin it with
    /// `None`, handing it back to the selector.
    pub fn pin(&mut self, spec: Option<&str>) -> Result<Option<Handover>> {
        if self.pinned.as_deref() == spec {
            return Ok(None);
        }
        self.pinned = spec.map(str::to_string);
        let Some(spec) = spec else {
            // Unpinned: the selector decides afresh, as if its policy had just been loaded.
            if let Some(sel) = self.selector.as_mut() {
                sel.set_policy(Arc::clone(sel.policy()));
            }
            return Ok(None);
        };
        let reason = format!("pinned to {spec} through the operator interface");
        self.hand_over_to(spec, HandoverKind::Pinned, reason, None)
    }

    /// Replace the running algorithm by `spec`, migrating the flow's state (MCC §3.1.1): the
    /// new algorithm inherits the window (a rate-based one paces at window / recent RTT) and
    /// starts its own variables fresh. The change reaches the datapath in the next answer, one
    /// UPDATE_FIELDS message, so no ACK is ever handled under half of it. `None` if the flow
    /// already runs `spec`.
    pub fn hand_over_to(
        &mut self,
        spec: &str,
        kind: HandoverKind,
        reason: String,
        features: Option<Features>,
    ) -> Result<Option<Handover>> {
        let Kind::Simple { algorithm, state, .. } = &mut self.kind else {
            return Err(anyhow!("{} brings its own datapath program and cannot be handed over", self.name()));
        };
        let mut next = match instantiate(spec)? {
            Instance::Simple(a) => a,
            Instance::Full(a) => {
                return Err(anyhow!("{} brings its own datapath program; only simple-API algorithms can be handed over to", a.name()))
            }
        };
        if next.name() == algorithm.name() && !spec.contains(':') {
            if let Some(sel) = self.selector.as_mut() {
                sel.note_handover(spec, state.now_us);
            }
            return Ok(None);
        }
        let paced = state.pacing_rate_bytes_per_s.is_some();
        algorithm.hand_over(state);
        state.prepare_handover();
        next.take_over(state);
        self.clear_rate = paced && state.pacing_rate_bytes_per_s.is_none();
        let from = std::mem::replace(algorithm, next);
        self.handovers += 1;
        if let Some(sel) = self.selector.as_mut() {
            sel.note_handover(spec, state.now_us);
        }
        Ok(Some(Handover {
            from: from.name().to_string(),
            to: algorithm.name().to_string(),
            kind,
            reason,
            features,
            cwnd_bytes: state.cwnd_bytes,
            pacing_rate_bytes_per_s: state.pacing_rate_bytes_per_s,
        }))
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
            Kind::Full { cwnd_bytes, .. } => Some(*cwnd_bytes),
        }
    }

    pub fn pacing_rate_bytes_per_s(&self) -> Option<u64> {
        match &self.kind {
            Kind::Simple { state, .. } => state.pacing_rate_bytes_per_s,
            Kind::Full { rate_bytes_per_s, .. } => *rate_bytes_per_s,
        }
    }

    /// The window, the rate, the window to apply at once on a loss (0: none), which the
    /// datapath applies on the ACK that reveals a loss, before this flow's next report
    /// arrives ([`Algorithm::window_on_loss`]), and the next step of growth, which it applies
    /// on the ACK that earns it ([`Algorithm::growth_step`]), or slow start, which it applies
    /// on every ACK ([`Algorithm::slow_start`]).
    fn window_fields(&self, simple: &SimpleProgram) -> Vec<wire::UpdateField> {
        match &self.kind {
            Kind::Simple { algorithm, state, .. } => {
                let mut fields = cwnd_rate_fields(
                    Some(state.cwnd_bytes.min(u64::from(u32::MAX)) as u32),
                    // A rate of 0 tells the datapath to stop pacing.
                    state.pacing_rate_bytes_per_s.or(self.clear_rate.then_some(0)),
                );
                // While an algorithm that cuts on loss recovers, it pre-sets no cut, and the
                // window it holds is pre-set instead. A reduction the sender's kernel enters
                // before the agent learns that the last one ended (a report later) then begins
                // with the agent's window, so the datapath reaches the cut of the agent's answer
                // by PRR, as the kernel's own algorithms reach theirs, instead of setting it at
                // once under the data in flight (experiments/measured/reno-recovery-trace-2026-11-28).
                // Whether it cuts is asked of a copy of the state out of recovery, so only while
                // it recovers, not on every answer of an algorithm that never cuts (BBR).
                let on_loss = algorithm
                    .window_on_loss(state)
                    .or_else(|| {
                        let cuts = || algorithm.window_on_loss(&state.after_growth(state.cwnd_bytes)).is_some();
                        (state.in_recovery() && cuts()).then_some(state.cwnd_bytes)
                    })
                    .map_or(0, |w| w.clamp(1, u64::from(u32::MAX)));
                fields.push(simple.loss_cwnd_field(on_loss));
                fields.push(simple.aggregation_rate_field(algorithm.aggregation_rate(state).filter(|&r| r > 0)));
                // Counted from the latest report (before the first, `now_us` 0: from the
                // program's start). A window beyond 32 bits is not one the datapaths carry: no
                // step, no slow start (whose threshold saturates).
                let slow_start = algorithm
                    .slow_start(state)
                    .filter(|s| s.cwnd_bytes <= u64::from(u32::MAX))
                    .map(|s| SlowStart { until_bytes: s.until_bytes.min(u64::from(u32::MAX)), ..s });
                let step = algorithm
                    .growth_step(state)
                    .filter(|g| g.cwnd_bytes <= u64::from(u32::MAX) && slow_start.is_none());
                let on_loss_grown = step
                    .and_then(|g| algorithm.window_on_loss(&state.after_growth(g.cwnd_bytes)))
                    .map_or(0, |w| w.clamp(1, u64::from(u32::MAX)));
                fields.extend(simple.growth_fields(step, state.now_us, on_loss_grown, slow_start));
                fields
            }
            Kind::Full { .. } => Vec::new(),
        }
    }

    /// React to a report's fields. Always answers: an answered report is how the datapath
    /// knows the agent is alive (one unanswered past its timeout means fallback). The running
    /// algorithm handles the report first; then the selector, if any and unless the flow is
    /// pinned, may hand the flow to another algorithm, whose window the answer carries.
    pub fn on_report(&mut self, fields: &[u64], simple: &SimpleProgram) -> Result<Reported> {
        self.reports += 1;
        match &mut self.kind {
            Kind::Simple { algorithm, state, .. } => {
                let m = simple
                    .measurement(fields)
                    .ok_or_else(|| anyhow!("report with {} fields, too few", fields.len()))?;
                state.observe(&m);
                algorithm.on_report(state, &m);
                // A pinned flow's selector keeps measuring (its features stay current for the
                // operator interface) but its decisions are not acted on.
                let decision = self
                    .selector
                    .as_mut()
                    .and_then(|sel| sel.on_report(&m, u64::from(self.mss_bytes)))
                    .filter(|_| self.pinned.is_none());
                let handover = match decision {
                    Some(d) => {
                        let kind = match d.kind {
                            DecisionKind::Spatial => HandoverKind::Spatial,
                            DecisionKind::Temporal => HandoverKind::Temporal,
                        };
                        self.hand_over_to(&d.algorithm, kind, d.reason, Some(d.features))?
                    }
                    None => None,
                };
                let answer = self.simple_answer(simple);
                self.clear_rate = false;
                Ok(Reported { answer, measurement: m, handover })
            }
            Kind::Full { algorithm, programs, current, info, cwnd_bytes, rate_bytes_per_s } => {
                let program = &programs[*current];
                // What the events file shows of the report, as a simple-API flow's.
                let m = program.meaning.measurement(fields, u64::from(info.mss_bytes));
                if let Some(at) = program.meaning.cwnd_bytes {
                    *cwnd_bytes = fields.get(at).copied().unwrap_or(*cwnd_bytes);
                }
                let report = Report { program: &program.name, names: &program.report_names, values: fields };
                let mut ctl = Control::new(*info, programs, *current);
                algorithm.on_report(&mut ctl, &report);
                *cwnd_bytes = ctl.cwnd_bytes.map_or(*cwnd_bytes, u64::from);
                *rate_bytes_per_s = ctl.rate_bytes_per_s.or(*rate_bytes_per_s);
                let (next, answer) = ctl.answer(programs)?;
                *current = next;
                Ok(Reported { answer, measurement: m, handover: None })
            }
        }
    }

    /// The window, the rate and, if the algorithm now wants another, the reporting mode.
    fn simple_answer(&mut self, simple: &SimpleProgram) -> Answer {
        let mut updates = self.window_fields(simple);
        if let Kind::Simple { algorithm, reporting, .. } = &mut self.kind {
            let wanted = algorithm.reporting();
            if wanted != *reporting {
                *reporting = wanted;
                updates.extend(simple.reporting_fields(wanted));
            }
        }
        Answer::Update(updates)
    }
}

/// What a full-API algorithm asked for during one callback.
struct Control<'a> {
    info: DatapathInfo,
    programs: &'a [Arc<CompiledProgram>],
    program: usize,
    changed: bool,
    cwnd_bytes: Option<u32>,
    rate_bytes_per_s: Option<u64>,
    controls: Vec<(String, u64)>,
    error: Option<String>,
}

impl<'a> Control<'a> {
    fn new(info: DatapathInfo, programs: &'a [Arc<CompiledProgram>], program: usize) -> Self {
        Self {
            info,
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
        self.info.mss_bytes
    }

    fn info(&self) -> DatapathInfo {
        self.info
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

#[cfg(test)]
mod tests {
    use ccswitch_protocol::lang::{reg_type, Implicit};
    use ccswitch_protocol::standard::{control, report};

    use super::*;
    use crate::selector::policy::Policy;

    const MSS: u32 = 1448;

    fn info() -> DatapathInfo {
        DatapathInfo { mss_bytes: MSS, init_cwnd_bytes: 10 * MSS, ..DatapathInfo::default() }
    }

    struct Fixture {
        simple: SimpleProgram,
        cache: ProgramCache,
        now_us: u64,
    }

    impl Fixture {
        fn new() -> Self {
            Self { simple: SimpleProgram::compile().unwrap(), cache: ProgramCache::default(), now_us: 0 }
        }

        fn flow(&self, spec: &str) -> FlowController {
            let (flow, _) =
                FlowController::new(instantiate(spec).unwrap(), info(), &self.simple, &self.cache).unwrap();
            flow
        }

        /// One report of the standard program: an RTT of ACKs, `lost` packets lost.
        fn report(&mut self, flow: &mut FlowController, acked_segments: u64, rtt_ms: u64, lost: u64) -> Reported {
            self.now_us += rtt_ms * 1000;
            let mut fields = [0u64; report::COUNT];
            fields[report::ACKED] = acked_segments * u64::from(MSS);
            fields[report::LOST] = lost;
            fields[report::RTT] = rtt_ms * 1000;
            fields[report::MINRTT] = rtt_ms * 1000;
            fields[report::INFLIGHT] = acked_segments * u64::from(MSS);
            fields[report::RATE] = acked_segments * u64::from(MSS) * 1000 / rtt_ms;
            fields[report::NOW] = self.now_us;
            flow.on_report(&fields, &self.simple).unwrap()
        }
    }

    /// The value an update answer gives the implicit register `reg`, if it sets it.
    fn field(answer: &Answer, reg: Implicit) -> Option<u64> {
        let Answer::Update(updates) = answer else { panic!("a handover must not change the program: {answer:?}") };
        updates.iter().find(|u| u.reg_type == reg_type::IMPLICIT && u.reg_index == reg as u32).map(|u| u.value)
    }

    #[test]
    fn a_handover_keeps_the_window_and_clears_the_pacing_of_a_rate_based_predecessor() {
        let mut fx = Fixture::new();
        let mut flow = fx.flow("bbr");
        for _ in 0..40 {
            fx.report(&mut flow, 30, 50, 0);
        }
        assert!(flow.pacing_rate_bytes_per_s().is_some(), "bbr paces");
        // BBR's window is a cap; what it keeps in flight is its rate × the RTT (50 ms here).
        let paced = flow.pacing_rate_bytes_per_s().unwrap() * 50 / 1000;
        let before = flow.cwnd_bytes().unwrap().min(paced);
        let s = flow.hand_over_to("cubic", HandoverKind::Pinned, "test".into(), None).unwrap().unwrap();
        assert_eq!((s.from.as_str(), s.to.as_str()), ("bbr", "cubic"));
        assert!(s.cwnd_bytes.abs_diff(before) <= 1, "inherits {} of {before}", s.cwnd_bytes);
        let r = fx.report(&mut flow, 30, 50, 0);
        let cwnd = field(&r.answer, Implicit::Cwnd).unwrap();
        assert!(cwnd >= before && cwnd <= before + 2 * u64::from(MSS), "window inherited: {before} -> {cwnd}");
        assert_eq!(field(&r.answer, Implicit::Rate), Some(0), "the datapath stops pacing in the same update");
        let r = fx.report(&mut flow, 30, 50, 0);
        assert_eq!(field(&r.answer, Implicit::Rate), None, "cleared once");
    }

    /// Every answer pre-sets the window the datapath applies at once on a loss: the
    /// algorithm's cut while none is under way, the window it holds while it recovers, none
    /// for BBR.
    #[test]
    fn every_answer_presets_the_window_of_a_loss() {
        let loss_cwnd = |answer: &Answer| {
            let (Answer::Update(updates) | Answer::ChangeProgram { updates, .. }) = answer;
            let mut it = updates.iter().filter(|u| u.reg_type == reg_type::NONVOLATILE_CONTROL && u.reg_index == control::LOSS_CWND as u32);
            let value = it.next().expect("every answer carries Control.loss_cwnd").value;
            assert!(it.next().is_none());
            value
        };
        let mut fx = Fixture::new();
        let (_, created) = FlowController::new(instantiate("reno").unwrap(), info(), &fx.simple, &fx.cache).unwrap();
        assert_eq!(loss_cwnd(&created), u64::from(5 * MSS), "half the initial window");
        let mut flow = fx.flow("reno");
        let r = fx.report(&mut flow, 10, 50, 0);
        let cwnd = field(&r.answer, Implicit::Cwnd).unwrap();
        assert_eq!(loss_cwnd(&r.answer), cwnd / 2);
        // A loss report that acknowledges nothing cuts as pre-set (one that acknowledges
        // bytes in slow start halves the window they grew, a refinement).
        let r = fx.report(&mut flow, 0, 50, 1);
        assert_eq!(field(&r.answer, Implicit::Cwnd), Some(cwnd / 2), "the loss's report cuts as pre-set");
        assert_eq!(loss_cwnd(&r.answer), cwnd / 2, "recovering: a further loss keeps the window");
        let mut bbr = fx.flow("bbr");
        let r = fx.report(&mut bbr, 10, 50, 1);
        assert_eq!(loss_cwnd(&r.answer), 0);
    }

    #[test]
    fn a_rate_based_newcomer_paces_at_window_over_rtt() {
        let mut fx = Fixture::new();
        let mut flow = fx.flow("cubic");
        for _ in 0..20 {
            fx.report(&mut flow, 20, 40, 0);
        }
        let cwnd = flow.cwnd_bytes().unwrap();
        let s = flow.hand_over_to("bbr", HandoverKind::Pinned, "test".into(), None).unwrap().unwrap();
        let expected = cwnd as f64 * 1e6 / 40_000.0;
        let rate = s.pacing_rate_bytes_per_s.expect("bbr paces from the handover on") as f64;
        assert!((rate / expected - 1.0).abs() < 0.01, "rate {rate} vs window/RTT {expected}");
        assert_eq!(flow.handovers, 1);
        assert!(flow.hand_over_to("bbr", HandoverKind::Pinned, "again".into(), None).unwrap().is_none());
    }

    #[test]
    fn the_selector_hands_over_once_its_rule_matches_and_says_why() {
        let mut fx = Fixture::new();
        let policy = Policy::parse(
            "name = \"t\"\ninitial = \"cubic\"\n[window]\nkind = \"sliding\"\nsamples = 2\n\
             [decide]\nspatial = true\ntemporal = true\n[hysteresis]\nmin_dwell_ms = 0\nagreeing = 1\n\
             [[rule]]\nwhen = \"elapsed_s < 1\"\nuse = \"cubic\"\n[[rule]]\nuse = \"westwood\"\n",
            "test",
        )
        .unwrap();
        let mut flow = fx.flow("cubic");
        flow.set_selector(Selector::new(Arc::new(policy)));
        let mut handovers = Vec::new();
        for _ in 0..40 {
            let r = fx.report(&mut flow, 20, 50, 0);
            handovers.extend(r.handover);
        }
        assert_eq!(handovers.len(), 1, "{handovers:?}");
        let s = &handovers[0];
        assert_eq!((s.from.as_str(), s.to.as_str()), ("cubic", "westwood"));
        assert!(s.reason.contains("rule 2"), "{}", s.reason);
        assert!(s.features.unwrap().elapsed_s >= 1.0);
        assert_eq!(flow.name(), "westwood");
    }

    #[test]
    fn a_pinned_flow_ignores_the_selector_until_unpinned() {
        let mut fx = Fixture::new();
        let mut flow = fx.flow("cubic");
        flow.set_selector(Selector::new(Arc::new(Policy::load("mystique").unwrap())));
        let s = flow.pin(Some("vegas")).unwrap().unwrap();
        assert_eq!((s.to.as_str(), s.kind), ("vegas", HandoverKind::Pinned));
        for _ in 0..60 {
            assert!(fx.report(&mut flow, 20, 80, 0).handover.is_none(), "pinned flows stay put");
        }
        assert!(flow.features().unwrap().samples > 0, "features still measured while pinned");
        assert!(flow.pin(None).unwrap().is_none());
        let decided: Vec<_> = (0..60).filter_map(|_| fx.report(&mut flow, 20, 80, 0).handover).collect();
        assert_eq!(decided.first().map(|s| s.to.as_str()), Some("hybla"), "no loss: mystique picks hybla");
    }

    #[test]
    fn algorithms_with_their_own_program_cannot_be_handed_over_to_or_from() {
        let fx = Fixture::new();
        let mut flow = fx.flow("cubic");
        let e = flow.hand_over_to("reno-datapath", HandoverKind::Pinned, String::new(), None).unwrap_err();
        assert!(e.to_string().contains("own datapath program"), "{e}");
        let mut full = fx.flow("reno-datapath");
        assert!(full.hand_over_to("cubic", HandoverKind::Pinned, String::new(), None).is_err());
        assert!(flow.hand_over_to("nonesuch", HandoverKind::Pinned, String::new(), None).is_err());
    }
}
