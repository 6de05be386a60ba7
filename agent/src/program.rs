//! Datapath programs: compiling them with portus's compiler, and reading their reports.
//!
//! Every simple algorithm (one that reacts to measurements and sets a window or a rate) runs
//! over one standard program (`ccswitch_protocol::standard`, which declares its registers and
//! explains when it reports): the datapath folds each ACK into the report registers and
//! reports once per RTT, per ACK or every fixed period (chosen per flow by control
//! registers), and at once when a loss or a timeout is seen, so the algorithm answers
//! congestion within one report. Full-API algorithms bring their own programs. All programs
//! are compiled once and installed on every datapath that connects.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::{anyhow, ensure, Context, Result};
use ccswitch_algorithms::{GrowthStep, Measurement, Reporting, SenderReductions, SlowStart};
use ccswitch_protocol::lang::{reg_type, Implicit};
use ccswitch_protocol::standard::{self, control, report, NO_RTT_SAMPLE_US};
use ccswitch_protocol::wire;
use portus::lang::{self, Reg, Scope};

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
    /// What the report fields measure, as far as the source says.
    pub meaning: ReportMeaning,
}

impl CompiledProgram {
    pub fn compile(name: &str, source: &str) -> Result<Self> {
        let (bin, scope) = lang::compile(source.as_bytes(), &[])
            .map_err(|e| anyhow!("compiling datapath program {name:?}: {e}"))?;
        let (report_names, controls) = registers(source, &scope);
        let meaning = ReportMeaning::of(source, &report_names);
        // portus compiles; the message is ccswitch-protocol's, the one codec of the protocol.
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
            meaning,
        })
    }

    pub fn control_field(&self, name: &str, value: u64) -> Result<wire::UpdateField> {
        let (reg_type, reg_index) = self.control(name)?;
        Ok(wire::UpdateField { reg_type, reg_index, value })
    }

    /// Whether the program declares control register `name` (with or without `Control.`).
    pub fn has_control(&self, name: &str) -> bool {
        self.control(name).is_ok()
    }

    /// The control registers' names (without `Control.`), in no particular order.
    pub fn control_names(&self) -> impl Iterator<Item = &str> {
        self.controls.keys().map(String::as_str)
    }

    /// The register type and index of control register `name` (with or without `Control.`).
    fn control(&self, name: &str) -> Result<(u8, u32)> {
        self.controls
            .get(name.strip_prefix("Control.").unwrap_or(name))
            .copied()
            .ok_or_else(|| anyhow!("program {:?} has no control register {name:?}", self.name))
    }
}

/// Where a program's report carries what the events file's `report` lines show, read from
/// the program's source: a field assigned one datapath primitive (`(:= Report.x Flow.rtt_sample_us)`,
/// or folded from one, `(:= Report.acked (+ Report.acked Ack.bytes_acked))`) measures it,
/// whatever its name. Primitives counted in packets are converted with the flow's MSS.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReportMeaning {
    acked: Option<(usize, Unit)>,
    lost_packets: Option<usize>,
    timeout: Option<usize>,
    ecn_packets: Option<usize>,
    rtt_us: Option<usize>,
    in_flight: Option<(usize, Unit)>,
    delivery_rate: Option<usize>,
    now_us: Option<usize>,
    /// The datapath's window at the report (`Cwnd`).
    pub cwnd_bytes: Option<usize>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    Bytes,
    Packets,
}

impl ReportMeaning {
    fn of(source: &str, report_names: &[String]) -> Self {
        let spaced = source.replace('(', " ( ").replace(')', " ) ");
        let tokens: Vec<&str> = spaced.split_whitespace().collect();
        let mut primitive_of: HashMap<usize, &str> = HashMap::new();
        for at in 0..tokens.len().saturating_sub(3) {
            if tokens[at] != ":=" {
                continue;
            }
            let field = tokens[at + 1].strip_prefix("Report.").and_then(|n| report_names.iter().position(|r| r == n));
            let Some(field) = field else { continue };
            // The expression: one token, or a parenthesised form.
            let mut depth = 0i32;
            let mut primitives = Vec::new();
            for t in &tokens[at + 2..] {
                match *t {
                    "(" => depth += 1,
                    ")" => depth -= 1,
                    t if t.starts_with("Ack.") || t.starts_with("Flow.") || t == "Cwnd" => primitives.push(t),
                    _ => {}
                }
                if depth <= 0 {
                    break;
                }
            }
            if let [one] = primitives[..] {
                primitive_of.entry(field).or_insert(one);
            }
        }
        let find = |wanted: &str| primitive_of.iter().filter(|(_, p)| **p == wanted).map(|(f, _)| *f).min();
        let either = |bytes: &str, packets: &str| {
            find(bytes).map(|f| (f, Unit::Bytes)).or_else(|| find(packets).map(|f| (f, Unit::Packets)))
        };
        Self {
            acked: either("Ack.bytes_acked", "Ack.packets_acked"),
            lost_packets: find("Ack.lost_pkts_sample"),
            timeout: find("Flow.was_timeout"),
            ecn_packets: find("Ack.ecn_packets"),
            rtt_us: find("Flow.rtt_sample_us"),
            in_flight: either("Flow.bytes_in_flight", "Flow.packets_in_flight"),
            delivery_rate: find("Flow.rate_incoming").or_else(|| find("Flow.rate_outgoing")),
            now_us: find("Ack.now"),
            cwnd_bytes: find("Cwnd"),
        }
    }

    /// A report of the program as a measurement (what the source does not say reads 0).
    pub fn measurement(&self, fields: &[u64], mss_bytes: u64) -> Measurement {
        let at = |i: Option<usize>| i.and_then(|i| fields.get(i).copied()).unwrap_or(0);
        let sized = |f: Option<(usize, Unit)>| match f {
            Some((i, Unit::Bytes)) => at(Some(i)),
            Some((i, Unit::Packets)) => at(Some(i)).saturating_mul(mss_bytes),
            None => 0,
        };
        Measurement {
            now_us: at(self.now_us),
            acked_bytes: sized(self.acked),
            lost_packets: at(self.lost_packets),
            timeout: at(self.timeout) != 0,
            ecn_packets: at(self.ecn_packets),
            rtt_us: at(self.rtt_us),
            min_rtt_us: 0,
            bytes_in_flight: sized(self.in_flight),
            delivery_rate_bytes_per_s: at(self.delivery_rate),
            extra_acked_bytes: 0,
            sender_reductions: None,
            handshake_rtt_us: 0,
        }
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
                    let code = if *volatile { reg_type::VOLATILE_CONTROL } else { reg_type::NONVOLATILE_CONTROL };
                    controls.insert(bare.clone(), (code, u32::from(*idx)));
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

/// The standard program of the simple API.
pub struct SimpleProgram {
    pub program: Arc<CompiledProgram>,
}

impl SimpleProgram {
    /// Compiles the standard program and checks that portus numbered its registers as the
    /// protocol declares them, the indices the datapaths fold and read.
    pub fn compile() -> Result<Self> {
        let program = CompiledProgram::compile("simple", &standard::source())?;
        ensure!(
            program.report_names == report::NAMES,
            "the standard program reports {:?}, not {:?}",
            program.report_names,
            report::NAMES
        );
        for (index, name) in control::NAMES.iter().enumerate() {
            let (code, at) = program.control(name)?;
            ensure!(
                (code, at) == (reg_type::NONVOLATILE_CONTROL, index as u32),
                "the standard program's Control.{name} is register ({code}, {at}), not control {index}"
            );
        }
        Ok(Self { program: Arc::new(program) })
    }

    /// Decode a report of this program (its registers, and what a datapath appended); `None` if it
    /// has too few fields.
    pub fn measurement(&self, fields: &[u64]) -> Option<Measurement> {
        let registers = fields.get(..report::COUNT)?;
        let minrtt = registers[report::MINRTT];
        Some(Measurement {
            now_us: registers[report::NOW],
            acked_bytes: registers[report::ACKED],
            lost_packets: registers[report::LOST],
            timeout: registers[report::TIMEOUT] != 0,
            ecn_packets: registers[report::ECN],
            rtt_us: registers[report::RTT],
            min_rtt_us: if minrtt >= NO_RTT_SAMPLE_US { 0 } else { minrtt },
            bytes_in_flight: registers[report::INFLIGHT],
            delivery_rate_bytes_per_s: registers[report::RATE],
            extra_acked_bytes: registers[report::EXTRA_ACKED],
            sender_reductions: match fields.get(report::SENDER_REDUCTIONS..=report::SENDER_IN_REDUCTION) {
                Some(&[entered, in_reduction]) => Some(SenderReductions { entered, in_reduction: in_reduction != 0 }),
                _ => None,
            },
            handshake_rtt_us: fields.get(report::SENDER_HANDSHAKE_RTT).copied().unwrap_or(0),
        })
    }

    /// The control register that pre-sets the window a loss applies at once (0: none).
    pub fn loss_cwnd_field(&self, bytes: u64) -> wire::UpdateField {
        control_field(control::LOSS_CWND, bytes)
    }

    /// The control register that sets the rate ACK aggregation is measured against (`None`:
    /// not measured), in the program's unit, which the datapaths carry in 32 bits (up to
    /// 4 GB/s; a faster rate is measured as that); a rate that rounds to 0 as the least.
    pub fn aggregation_rate_field(&self, bytes_per_s: Option<u64>) -> wire::UpdateField {
        let per_unit = bytes_per_s.map_or(0, |r| {
            (u128::from(r) * u128::from(standard::AGG_RATE_UNIT_US) / 1_000_000).clamp(1, u128::from(u32::MAX)) as u64
        });
        control_field(control::AGG_RATE, per_unit)
    }

    /// The control registers that pre-set the growth the datapath applies on the ACKs after
    /// the report at `from_us` (its `Report.now`): the next step (`None`: no step), its rate
    /// past it and the time before which it waits, and the window a loss sets once it is earned (0: none), or slow start
    /// (`None`: none), which wins (its threshold takes the step's byte count).
    pub fn growth_fields(
        &self,
        step: Option<GrowthStep>,
        from_us: u64,
        loss_cwnd_bytes: u64,
        slow_start: Option<SlowStart>,
    ) -> [wire::UpdateField; 7] {
        let (mut after, cwnd, rate, not_before) =
            step.map_or((0, 0, 0, 0), |g| (g.after_bytes, g.cwnd_bytes, grow_rate(g.acked_per_byte), g.not_before_us));
        let ss_cwnd = slow_start.map_or(0, |s| {
            after = s.until_bytes;
            s.cwnd_bytes
        });
        let stepping = |v| if ss_cwnd == 0 { v } else { 0 };
        [
            control_field(control::GROW_CWND, stepping(cwnd)),
            control_field(control::GROW_AFTER, after),
            control_field(control::GROW_FROM, from_us),
            control_field(control::GROW_LOSS_CWND, stepping(loss_cwnd_bytes)),
            control_field(control::SS_CWND, ss_cwnd),
            control_field(control::GROW_RATE, stepping(rate)),
            control_field(control::GROW_NOT_BEFORE, stepping(not_before)),
        ]
    }

    /// The control registers that select a reporting mode.
    pub fn reporting_fields(&self, reporting: Reporting) -> Vec<wire::UpdateField> {
        let (per_ack, period_us) = match reporting {
            Reporting::PerRtt => (0, 0),
            Reporting::PerAck => (1, 0),
            Reporting::EveryMicros(us) => (0, us.max(1)),
        };
        vec![control_field(control::PER_ACK, per_ack), control_field(control::PERIOD_US, period_us)]
    }
}

/// `Control.grow_rate` for a step's rate past it, a byte of window per `acked_per_byte`
/// acknowledged (0: none), rounded up, so that the window gains its segment on the ACK that
/// brings `acked_per_byte` segments (Linux's `cnt`), not on the one after; at most one byte per
/// byte, slow start's rate, which keeps the program's product within 64 bits.
fn grow_rate(acked_per_byte: u64) -> u64 {
    match acked_per_byte {
        0 => 0,
        n => standard::GROW_RATE_UNIT.div_ceil(n),
    }
}

/// An update of the standard program's control register `index`.
fn control_field(index: usize, value: u64) -> wire::UpdateField {
    wire::UpdateField { reg_type: reg_type::NONVOLATILE_CONTROL, reg_index: index as u32, value }
}

/// The most UPDATE_FIELDS entries an answer to a report carries: the window, the rate, the
/// loss window, the aggregation rate and [`SimpleProgram::growth_fields`].
const ANSWER_FIELDS: usize = 11;

/// UPDATE_FIELDS entries that set the window and, if given, the pacing rate.
pub fn cwnd_rate_fields(cwnd_bytes: Option<u32>, rate_bytes_per_s: Option<u64>) -> Vec<wire::UpdateField> {
    let implicit = |reg: Implicit, value| wire::UpdateField { reg_type: reg_type::IMPLICIT, reg_index: reg as u32, value };
    // Room for the rest of a simple algorithm's answer (FlowController::window_fields: the loss
    // window, the aggregation rate and seven growth fields), so that it never reallocates.
    let mut fields = Vec::with_capacity(ANSWER_FIELDS);
    if let Some(cwnd) = cwnd_bytes {
        fields.push(implicit(Implicit::Cwnd, u64::from(cwnd)));
    }
    if let Some(rate) = rate_bytes_per_s {
        fields.push(implicit(Implicit::Rate, rate));
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_programs_report_fields_are_read_by_what_they_are_assigned_whatever_their_names() {
        let source = "
            (def (Report (volatile got 0) (volatile gone 0) (volatile rto false) (volatile sample 0)
                         (volatile pkts 0) (volatile window 0) (volatile when 0) (volatile speed 0) (volatile other 0)))
            (when true
                (:= Report.got (+ Report.got Ack.bytes_acked))
                (:= Report.gone (+ Report.gone Ack.lost_pkts_sample))
                (:= Report.rto Flow.was_timeout)
                (:= Report.sample Flow.rtt_sample_us)
                (:= Report.pkts Flow.packets_in_flight)
                (:= Report.window Cwnd)
                (:= Report.when Ack.now)
                (:= Report.speed (max Report.speed Flow.rate_incoming))
                (:= Report.other (+ Flow.rtt_sample_us Flow.bytes_in_flight))
                (fallthrough))
            (when (> Micros Flow.rtt_sample_us) (report) (:= Report.got 0) (:= Micros 0))";
        let p = CompiledProgram::compile("renamed", source).unwrap();
        let at = |name: &str| p.report_names.iter().position(|n| n == name).unwrap();
        let mut fields = vec![0u64; p.report_names.len()];
        for (name, value) in [("got", 2896), ("gone", 2), ("rto", 1), ("sample", 40_000), ("pkts", 3), ("window", 14480),
                              ("when", 77), ("speed", 125_000), ("other", 999)] {
            fields[at(name)] = value;
        }
        let m = p.meaning.measurement(&fields, 1448);
        assert_eq!(
            m,
            Measurement {
                now_us: 77,
                acked_bytes: 2896,
                lost_packets: 2,
                timeout: true,
                ecn_packets: 0,
                rtt_us: 40_000,
                min_rtt_us: 0,
                bytes_in_flight: 3 * 1448,
                delivery_rate_bytes_per_s: 125_000,
                extra_acked_bytes: 0,
                sender_reductions: None,
                handshake_rtt_us: 0,
            }
        );
        assert_eq!(p.meaning.cwnd_bytes, Some(at("window")));
    }

    #[test]
    fn compiles_and_lays_out_every_field() {
        let p = SimpleProgram::compile().unwrap();
        let mut fields = vec![0u64; report::COUNT];
        fields[report::ACKED] = 14480;
        fields[report::LOST] = 2;
        fields[report::MINRTT] = NO_RTT_SAMPLE_US;
        let m = p.measurement(&fields).unwrap();
        assert_eq!((m.acked_bytes, m.lost_packets, m.min_rtt_us, m.sender_reductions), (14480, 2, 0, None));
        assert!(p.measurement(&fields[..3]).is_none());
        fields.push(3);
        assert_eq!(p.measurement(&fields).unwrap().sender_reductions, None, "both fields or none");
        fields.push(1);
        assert_eq!(
            p.measurement(&fields).unwrap().sender_reductions,
            Some(SenderReductions { entered: 3, in_reduction: true }),
            "what the sender's kernel appended"
        );
        assert_eq!(p.measurement(&fields).unwrap().handshake_rtt_us, 0, "none appended");
        fields.push(52_400);
        assert_eq!(p.measurement(&fields).unwrap().handshake_rtt_us, 52_400);
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
        assert!(fields.iter().all(|f| f.reg_type == reg_type::NONVOLATILE_CONTROL));
        assert_ne!(fields[0].reg_index, fields[1].reg_index);
    }

    /// A step sets its window, count and rate past it (a byte per `cnt` acknowledged, rounded
    /// up so the segment comes on the `cnt`-th); slow start puts its threshold where a step's
    /// count goes and no step.
    #[test]
    fn growth_fields_preset_a_step_and_its_rate_or_slow_start() {
        let p = SimpleProgram::compile().unwrap();
        let by_index = |fields: [wire::UpdateField; 7]| {
            let mut v = [0u64; control::COUNT];
            for f in fields {
                assert_eq!(f.reg_type, reg_type::NONVOLATILE_CONTROL);
                v[f.reg_index as usize] = f.value;
            }
            v
        };
        let step = GrowthStep { after_bytes: 4_000, cwnd_bytes: 30_000, acked_per_byte: 20, not_before_us: 0 };
        let v = by_index(p.growth_fields(Some(step), 77, 21_000, None));
        assert_eq!(
            (v[control::GROW_CWND], v[control::GROW_AFTER], v[control::GROW_FROM], v[control::GROW_LOSS_CWND], v[control::SS_CWND]),
            (30_000, 4_000, 77, 21_000, 0)
        );
        assert_eq!(v[control::GROW_RATE], 53_687_092, "2^30 / 20, rounded up");
        assert_eq!((20 * 1448 * v[control::GROW_RATE]) >> 30, 1448, "a segment after 20");
        let v = by_index(p.growth_fields(Some(GrowthStep { acked_per_byte: 0, ..step }), 77, 0, None));
        assert_eq!(v[control::GROW_RATE], 0, "the step only");
        assert_eq!(v[control::GROW_NOT_BEFORE], 0, "no time to wait for");
        let v = by_index(p.growth_fields(Some(GrowthStep { not_before_us: 90, ..step }), 77, 0, None));
        assert_eq!((v[control::GROW_CWND], v[control::GROW_NOT_BEFORE]), (30_000, 90));
        let slow_start = SlowStart { cwnd_bytes: 14_480, until_bytes: 90_000 };
        let v = by_index(p.growth_fields(None, 77, 0, Some(slow_start)));
        assert_eq!((v[control::SS_CWND], v[control::GROW_AFTER], v[control::GROW_CWND], v[control::GROW_RATE], v[control::GROW_NOT_BEFORE]), (14_480, 90_000, 0, 0, 0));
    }

    /// Datapaths recognise the standard program by the INSTALL_EXPR the protocol crate keeps
    /// (`standard::INSTALL_MESSAGE`) and fold it with its register layout; what the agent
    /// compiles must be that message, whatever uid it was given.
    #[test]
    fn the_standard_program_is_the_one_datapaths_fold() {
        let p = SimpleProgram::compile().unwrap();
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../protocol/src/standard_program.bin");
        if std::env::var_os("CCSWITCH_BLESS").is_some() {
            std::fs::write(path, &p.program.install_message).unwrap();
        }
        // The header (type, length, socket id), then the program uid, then the program.
        let without_uid = |m: &[u8]| [&m[..wire::HEADER_LEN], &m[wire::HEADER_LEN + 4..]].concat();
        assert!(
            without_uid(&p.program.install_message) == without_uid(standard::INSTALL_MESSAGE),
            "the agent's standard program differs from {path}; after a deliberate change, rerun this test with CCSWITCH_BLESS=1 and rebuild"
        );
    }

    /// The install messages the agent encodes with ccswitch-protocol are byte for byte what
    /// portus's own codec makes of the same programs.
    #[test]
    fn install_messages_are_portus_compatible() {
        let mut sources = vec![("simple".to_string(), standard::source())];
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
                    let p = CompiledProgram::compile(&name, &source).unwrap();
                    assert!(!p.report_names.is_empty(), "{}: {name} reports", info.name);
                }
            }
        }
    }
}
