//! The full authoring API: an algorithm that brings its own CCP datapath programs.
//!
//! Programs are written in CCP's datapath language (as portus's `lang`): `(def (Report ...)
//! (Control.NAME init))` declares report and control registers, `(when COND ...)` clauses fold
//! ACKs into them, set `Cwnd` and `Rate`, and `(report)` sends the report registers to the
//! agent. The agent compiles every program of every registered full-API algorithm once and
//! installs them on each datapath that connects; the algorithm then picks a flow's program,
//! reads its reports by register name and writes its control registers.

/// What the datapath said of a flow when it was created (CCP's CREATE message; portus's
/// `DatapathInfo`). Addresses are IPv4 as integers in network order (`Ipv4Addr::from`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DatapathInfo {
    /// The flow's id on its datapath.
    pub sid: u32,
    pub mss_bytes: u32,
    pub init_cwnd_bytes: u32,
    pub src_ip: u32,
    pub src_port: u16,
    pub dst_ip: u32,
    pub dst_port: u16,
}

/// The datapath-side handle of one flow, as a full-API algorithm sees it. Changes are sent to
/// the datapath together after the callback returns: as one CHANGE_PROG if the program
/// changed, else as one UPDATE_FIELDS.
pub trait FlowControl {
    fn mss_bytes(&self) -> u32;
    /// What the datapath said of the flow when it was created.
    fn info(&self) -> DatapathInfo;
    /// The program the flow runs (or will run once this callback's changes are sent).
    fn program(&self) -> &str;
    /// Handover the flow to another of the algorithm's programs. Its registers start fresh.
    fn change_program(&mut self, name: &str);
    fn set_cwnd(&mut self, bytes: u32);
    fn set_rate(&mut self, bytes_per_s: u64);
    /// Set a control register (`Control.NAME`, given without the prefix) of the flow's program.
    fn set_control(&mut self, name: &str, value: u64);
}

/// One report of a full-API program: its report registers by name.
pub struct Report<'a> {
    pub program: &'a str,
    pub names: &'a [String],
    pub values: &'a [u64],
}

impl Report<'_> {
    /// A report register by name, with or without the `Report.` prefix.
    pub fn get(&self, name: &str) -> Option<u64> {
        let name = name.strip_prefix("Report.").unwrap_or(name);
        self.names.iter().position(|n| n == name).and_then(|i| self.values.get(i).copied())
    }
}

/// A full-API algorithm.
pub trait ProgramAlgorithm: Send {
    fn name(&self) -> &str;
    /// The programs, as (name, source). The first is the one a new flow starts with.
    fn programs(&self) -> Vec<(String, String)>;
    /// A new flow: set its initial window, rate or control registers.
    fn on_create(&mut self, flow: &mut dyn FlowControl);
    fn on_report(&mut self, flow: &mut dyn FlowControl, report: &Report);
}
