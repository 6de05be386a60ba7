//! Datapath programs: compiling them with portus's compiler, and reading their reports.
//!
//! Every simple algorithm (one that reacts to measurements and sets a window or a rate) runs
//! over one standard program: the datapath folds each ACK into the report registers and
//! reports once per RTT, per ACK or every fixed period (chosen per flow by control
//! registers), and at once when a loss or a timeout is seen, so the algorithm answers
//! congestion within one report. Per RTT it reports only when a report can change a
//! decision: the window limits the flow (more than `Control.window_use_pct` % of it was in
//! flight before the ACK), the flow is paced, or ECN marked it; a flow held by its receiver
//! or its application reports every `Control.idle_report_us` instead (see
//! `ccswitch_ccp::program::standard`). Full-API algorithms bring their own programs. All programs
//! are compiled once and installed on every datapath that connects.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use ccswitch_algorithms::{Measurement, Reporting};
use ccswitch_ccp::wire;
use portus::lang::{self, Reg, Scope};

/// Initial value of the per-report minimum RTT: larger than any sample (µs); the compiler
/// accepts immediates below 2^31 only.
use ccswitch_ccp::program::standard::NO_RTT_SAMPLE_US;
/// The standard program's defaults for a flow its window does not limit (see
/// `ccswitch_ccp::program::standard`, which explains the report conditions).
use ccswitch_ccp::program::standard::{IDLE_REPORT_US, WINDOW_USE_PCT};

/// Register type of the implicit registers and the indices of `Cwnd` and `Rate` among them,
/// as portus's compiler numbers them.
const IMPLICIT_REG_TYPE: u8 = 2;
pub(crate) const CWND_REG_INDEX: u32 = 4;
pub(crate) const RATE_REG_INDEX: u32 = 5;
/// Register types of control registers (libccp's NONVOLATILE/VOLATILE_CONTROL_REG).
const NONVOLATILE_CONTROL_REG_TYPE: u8 = 0;
const VOLATILE_CONTROL_REG_TYPE: u8 = 8;

/// The per-RTT condition is two clauses because a condition may use at most 8 temporary
/// registers (libccp's MAX_TMP_REG); they report alike.
fn simple_source() -> String {
    format!(
        "(def (Report
            (volatile acked 0)
            (volatile lost 0)
            (volatile timeout false)
            (volatile ecn 0)
            (volatile rtt 0)
            (volatile minrtt {NO_RTT_SAMPLE_US})
            (volatile inflight 0)
            (volatile rate 0)
            (volatile now 0)
         )
         (Control.per_ack 0)
         (Control.period_us 0)
         (Control.window_use_pct {WINDOW_USE_PCT})
         (Control.idle_report_us {IDLE_REPORT_US})
         (Control.loss_cwnd 0)
        )
        (when true
            (:= Report.acked (+ Report.acked Ack.bytes_acked))
            (:= Report.lost (+ Report.lost Ack.lost_pkts_sample))
            (:= Report.timeout Flow.was_timeout)
            (:= Report.ecn (+ Report.ecn Ack.ecn_packets))
            (:= Report.rtt Flow.rtt_sample_us)
            (:= Report.minrtt (min Report.minrtt Flow.rtt_sample_us))
            (:= Report.inflight Flow.bytes_in_flight)
            (:= Report.rate (max Report.rate Flow.rate_incoming))
            (:= Report.now Ack.now)
            (fallthrough)
        )
        (when (&& (> Ack.lost_pkts_sample 0) (> Control.loss_cwnd 0))
            (:= Cwnd Control.loss_cwnd)
            (fallthrough)
        )
        (when (|| (|| Report.timeout (> Report.lost 0)) (> Control.per_ack 0))
            (report)
            (:= Micros 0)
        )
        (when (&& (> Control.period_us 0) (> Micros Control.period_us))
            (report)
            (:= Micros 0)
        )
        (when (&& (&& (== Control.period_us 0) (> Micros Flow.rtt_sample_us))
                  (|| (> Report.ecn 0) (> Rate 0)))
            (report)
            (:= Micros 0)
        )
        (when (&& (&& (== Control.period_us 0) (> Micros Flow.rtt_sample_us))
                  (> (* (+ Flow.bytes_in_flight Ack.bytes_acked) 100) (* Cwnd Control.window_use_pct)))
            (report)
            (:= Micros 0)
        )
        (when (&& (== Control.period_us 0) (> Micros Control.idle_report_us))
            (report)
            (:= Micros 0)
        )"
    )
}

/// A compiled program: what to install and how to read and drive its registers.
pub struct CompiledProgram {
    pub name: String,
    pub uid: u32,
    /// INSTALL_EXPR message for socket id 0 (programs belong to a datapath, not a flow).
    pub install_message: Vec<u8>,
    /// Report register names (without the `Report.` prefix), by field index.
    pub report_names: Vec<String>,
    /// Control registers (without the `Control.` prefix): register type and index.
    controls: HashMap<String, (u8, u32)>,
}

impl CompiledProgram {
    pub fn compile(name: &str, source: &str) -> Result<Self> {
        let (bin, scope) = lang::compile(source.as_bytes(), &[])
            .map_err(|e| anyhow!("compiling datapath program {name:?}: {e}"))?;
        let (report_names, controls) = registers(source, &scope);
        // portus compiles; the message is ccswitch-ccp's, the one codec of the protocol.
        let records = bin.serialize().map_err(|e| anyhow!("program {name:?}: {e}"))?;
        let install = wire::InstallExpr::from_records(0, scope.program_uid, bin.events.len(), bin.instrs.len(), &records)
            .with_context(|| format!("program {name:?}: the compiler's records"))?;
        let install_message = wire::Msg::InstallExpr(install)
            .encode()
            .with_context(|| format!("program {name:?}: encoding the install message"))?;
        Ok(Self {
            name: name.to_string(),
            uid: scope.program_uid,
            install_message,
            report_names,
            controls,
        })
    }

    pub fn control_field(&self, name: &str, value: u64) -> Result<wire::UpdateField> {
        let (reg_type, reg_index) = *self
            .controls
            .get(name.strip_prefix("Control.").unwrap_or(name))
            .ok_or_else(|| anyhow!("program {:?} has no control register {name:?}", self.name))?;
        Ok(wire::UpdateField { reg_type, reg_index, value })
    }

    fn report_index(&self, name: &str) -> Result<usize> {
        self.report_names
            .iter()
            .position(|n| n == name)
            .ok_or_else(|| anyhow!("program {:?} has no report register {name}", self.name))
    }
}

/// Portus's scope cannot be listed, so look up every identifier of the source in it.
fn registers(source: &str, scope: &Scope) -> (Vec<String>, HashMap<String, (u8, u32)>) {
    let mut reports: Vec<(u8, String)> = Vec::new();
    let mut controls = HashMap::new();
    let tokens = source
        .split(|c: char| c.is_whitespace() || c == '(' || c == ')')
        .filter(|t| !t.is_empty());
    for token in tokens {
        let bare = token.rsplit('.').next().unwrap_or(token).to_string();
        for candidate in [format!("Report.{bare}"), format!("Control.{bare}")] {
            match scope.get(&candidate) {
                Some(Reg::Report(idx, _, _)) if !reports.iter().any(|(i, _)| i == idx) => {
                    reports.push((*idx, bare.clone()));
                }
                Some(Reg::Control(idx, _, volatile)) => {
                    let reg_type =
                        if *volatile { VOLATILE_CONTROL_REG_TYPE } else { NONVOLATILE_CONTROL_REG_TYPE };
                    controls.insert(bare.clone(), (reg_type, u32::from(*idx)));
                }
                _ => {}
            }
        }
    }
    reports.sort();
    let mut names = Vec::new();
    for (idx, name) in reports {
        let idx = usize::from(idx);
        if names.len() <= idx {
            names.resize(idx + 1, String::new());
        }
        names[idx] = name;
    }
    (names, controls)
}

/// Where each field of the standard program's report sits.
#[derive(Clone, Copy, Debug)]
struct ReportLayout {
    acked: usize,
    lost: usize,
    timeout: usize,
    ecn: usize,
    rtt: usize,
    minrtt: usize,
    inflight: usize,
    rate: usize,
    now: usize,
}

/// The standard program of the simple API.
pub struct SimpleProgram {
    pub program: Arc<CompiledProgram>,
    layout: ReportLayout,
}

impl SimpleProgram {
    pub fn compile() -> Result<Self> {
        let program = CompiledProgram::compile("simple", &simple_source())?;
        let i = |name| program.report_index(name);
        let layout = ReportLayout {
            acked: i("acked")?,
            lost: i("lost")?,
            timeout: i("timeout")?,
            ecn: i("ecn")?,
            rtt: i("rtt")?,
            minrtt: i("minrtt")?,
            inflight: i("inflight")?,
            rate: i("rate")?,
            now: i("now")?,
        };
        Ok(Self { program: Arc::new(program), layout })
    }

    /// Decode a report of this program; `None` if it has too few fields.
    pub fn measurement(&self, fields: &[u64]) -> Option<Measurement> {
        if fields.len() < self.program.report_names.len() {
            return None;
        }
        let l = &self.layout;
        let minrtt = fields[l.minrtt];
        Some(Measurement {
            now_us: fields[l.now],
            acked_bytes: fields[l.acked],
            lost_packets: fields[l.lost],
            timeout: fields[l.timeout] != 0,
            ecn_packets: fields[l.ecn],
            rtt_us: fields[l.rtt],
            min_rtt_us: if minrtt >= NO_RTT_SAMPLE_US { 0 } else { minrtt },
            bytes_in_flight: fields[l.inflight],
            delivery_rate_bytes_per_s: fields[l.rate],
        })
    }

    /// The control register that pre-sets the window a loss applies at once (0: none).
    pub fn loss_cwnd_field(&self, bytes: u64) -> wire::UpdateField {
        self.program.control_field("loss_cwnd", bytes).expect("declared above")
    }

    /// The control registers that select a reporting mode.
    pub fn reporting_fields(&self, reporting: Reporting) -> Vec<wire::UpdateField> {
        let (per_ack, period_us) = match reporting {
            Reporting::PerRtt => (0, 0),
            Reporting::PerAck => (1, 0),
            Reporting::EveryMicros(us) => (0, us.max(1)),
        };
        [("per_ack", per_ack), ("period_us", period_us)]
            .into_iter()
            .map(|(name, v)| self.program.control_field(name, v).expect("declared above"))
            .collect()
    }
}

/// UPDATE_FIELDS entries that set the window and, if given, the pacing rate.
pub fn cwnd_rate_fields(cwnd_bytes: Option<u32>, rate_bytes_per_s: Option<u64>) -> Vec<wire::UpdateField> {
    let implicit = |reg_index, value| wire::UpdateField { reg_type: IMPLICIT_REG_TYPE, reg_index, value };
    let mut fields = Vec::new();
    if let Some(cwnd) = cwnd_bytes {
        fields.push(implicit(CWND_REG_INDEX, u64::from(cwnd)));
    }
    if let Some(rate) = rate_bytes_per_s {
        fields.push(implicit(RATE_REG_INDEX, rate));
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiles_and_lays_out_every_field() {
        let p = SimpleProgram::compile().unwrap();
        assert_eq!(p.program.report_names.len(), 9);
        let mut fields = vec![0u64; 9];
        fields[p.layout.acked] = 14480;
        fields[p.layout.lost] = 2;
        fields[p.layout.minrtt] = NO_RTT_SAMPLE_US;
        let m = p.measurement(&fields).unwrap();
        assert_eq!((m.acked_bytes, m.lost_packets, m.min_rtt_us), (14480, 2, 0));
        assert!(p.measurement(&fields[..3]).is_none());
    }

    #[test]
    fn reporting_modes_set_the_control_registers() {
        let p = SimpleProgram::compile().unwrap();
        let values =
            |r| p.reporting_fields(r).iter().map(|f| f.value).collect::<Vec<_>>();
        assert_eq!(values(Reporting::PerRtt), vec![0, 0]);
        assert_eq!(values(Reporting::PerAck), vec![1, 0]);
        assert_eq!(values(Reporting::EveryMicros(20_000)), vec![0, 20_000]);
        let fields = p.reporting_fields(Reporting::PerAck);
        assert!(fields.iter().all(|f| f.reg_type == NONVOLATILE_CONTROL_REG_TYPE));
        assert_ne!(fields[0].reg_index, fields[1].reg_index);
    }

    /// Datapaths recognise the standard program by the copy in ccswitch-ccp and fold it with
    /// that register layout; this program must be that one.
    #[test]
    fn the_standard_program_is_the_one_datapaths_fold() {
        use ccswitch_ccp::program::standard::{self, control, report};
        let p = SimpleProgram::compile().unwrap();
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../datapaths/ccp/src/program/standard_program.bin");
        if std::env::var_os("CCSWITCH_BLESS").is_some() {
            std::fs::write(path, &p.program.install_message).unwrap();
        }
        let (msg, _) = wire::decode(&p.program.install_message).unwrap();
        let wire::Msg::InstallExpr(install) = msg else { panic!("an INSTALL_EXPR") };
        let program = ccswitch_ccp::Program::from_install(&install).unwrap();
        assert!(
            standard::is_standard(&program),
            "the agent's standard program differs from {path}; after a deliberate change, rerun this test with CCSWITCH_BLESS=1 and rebuild"
        );
        let l = p.layout;
        assert_eq!(
            [l.acked, l.lost, l.timeout, l.ecn, l.rtt, l.minrtt, l.inflight, l.rate, l.now],
            [report::ACKED, report::LOST, report::TIMEOUT, report::ECN, report::RTT, report::MINRTT, report::INFLIGHT, report::RATE, report::NOW]
        );
        assert_eq!(p.program.report_names.len(), report::COUNT);
        let index = |name| p.program.controls[name];
        assert_eq!(index("per_ack"), (NONVOLATILE_CONTROL_REG_TYPE, control::PER_ACK as u32));
        assert_eq!(index("period_us"), (NONVOLATILE_CONTROL_REG_TYPE, control::PERIOD_US as u32));
        assert_eq!(index("window_use_pct"), (NONVOLATILE_CONTROL_REG_TYPE, control::WINDOW_USE_PCT as u32));
        assert_eq!(index("idle_report_us"), (NONVOLATILE_CONTROL_REG_TYPE, control::IDLE_REPORT_US as u32));
        assert_eq!(index("loss_cwnd"), (NONVOLATILE_CONTROL_REG_TYPE, control::LOSS_CWND as u32));
    }

    /// The install messages the agent encodes with ccswitch-ccp are byte for byte what
    /// portus's own codec makes of the same programs.
    #[test]
    fn install_messages_are_portus_compatible() {
        let mut sources = vec![("simple".to_string(), simple_source())];
        for info in ccswitch_algorithms::ALGORITHMS {
            if let ccswitch_algorithms::Instance::Full(a) = ccswitch_algorithms::instantiate(info.name).unwrap() {
                sources.extend(a.programs().into_iter().map(|(n, src)| (n.to_string(), src)));
            }
        }
        for (name, source) in sources {
            let ours = CompiledProgram::compile(&name, &source).unwrap();
            let (bin, scope) = lang::compile(source.as_bytes(), &[]).unwrap();
            let msg = portus::serialize::install::Msg {
                sid: 0,
                program_uid: scope.program_uid,
                num_events: bin.events.len() as u32,
                num_instrs: bin.instrs.len() as u32,
                instrs: bin,
            };
            let mut theirs = portus::serialize::serialize(&msg).unwrap();
            // Each compile numbers its program anew: compare with our uid.
            theirs[8..12].copy_from_slice(&ours.uid.to_le_bytes());
            assert_eq!(ours.install_message, theirs, "{name}");
        }
    }

    #[test]
    fn every_full_api_program_compiles() {
        for info in ccswitch_algorithms::ALGORITHMS {
            if let ccswitch_algorithms::Instance::Full(a) = ccswitch_algorithms::instantiate(info.name).unwrap() {
                for (name, source) in a.programs() {
                    let p = CompiledProgram::compile(name, &source).unwrap();
                    assert!(!p.report_names.is_empty(), "{}: {name} reports", info.name);
                }
            }
        }
    }
}
