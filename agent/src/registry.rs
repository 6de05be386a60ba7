//! The agent's view of its flows for the operator interface, and the operator's pins.
//!
//! Every datapath thread owns its flows; the registry holds a copy of what the operator
//! interface shows about each (endpoints, algorithm, features, counters), refreshed once per
//! report, plus the state the operator sets: pins and the policy.
//!
//! A pin holds flows to one algorithm, overriding the policy. It targets a flow, a port or an
//! address prefix; for a given flow the most specific pin applies:
//!
//! 1. a pin on the flow itself;
//! 2. a pin on the server's port (the flow's source port, since the datapath runs at the
//!    sender), then one on the client's port;
//! 3. the longest prefix containing the client's address (the destination), then the
//!    longest containing the server's. An IPv4 prefix also matches IPv4-mapped IPv6
//!    addresses.
//!
//! Flows do not get told about changes: every pin, unpin and policy change bumps a
//! generation counter, and a flow re-reads its pin and the policy when, at a report, the
//! generation differs from the one it last saw. Reading the generation is one atomic load.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use anyhow::{anyhow, bail, Result};
use ccswitch_algorithms::Instance;

use crate::selector::features::Features;
use crate::memory::DestinationMemory;
use crate::selector::policy::Policy;

/// A flow, as the agent names it: its datapath (1, 2, ... in connection order) and the
/// datapath's socket id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowId {
    pub datapath: u64,
    pub sid: u32,
}

impl fmt::Display for FlowId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.datapath, self.sid)
    }
}

/// A flow's addresses; src/sport are the sender's (server's) side.
#[derive(Clone, Copy, Debug)]
pub struct Endpoints {
    pub src: IpAddr,
    pub sport: u16,
    pub dst: IpAddr,
    pub dport: u16,
}

/// What the operator interface shows about one flow.
#[derive(Clone, Debug)]
pub struct FlowSnapshot {
    pub key: FlowId,
    pub endpoints: Endpoints,
    pub algorithm: String,
    /// The algorithm the flow's most specific pin names, if any pin applies.
    pub pinned: Option<String>,
    pub features: Option<Features>,
    pub reports: u64,
    pub handovers: u32,
    pub cwnd_bytes: Option<u64>,
}

/// What a pin applies to.
#[derive(Clone, Debug, PartialEq)]
pub enum PinTarget {
    Flow(FlowId),
    Port(u16),
    /// A network address (host bits zero) and its prefix length.
    Prefix(IpAddr, u8),
}

impl PinTarget {
    /// Parse `ADDRESS/LENGTH` or a single address (a /32 or /128 prefix). Host bits must be
    /// zero, so that a typo such as 10.1.2.3/8 is caught rather than silently widened.
    pub fn parse_prefix(text: &str) -> Result<PinTarget> {
        let text = text.trim();
        let (addr_text, len_text) = match text.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (text, None),
        };
        let addr: IpAddr = addr_text.parse().map_err(|_| {
            anyhow!("bad prefix {text:?}: {addr_text:?} is not an IPv4 or IPv6 address")
        })?;
        let max = max_prefix_len(addr);
        let len = match len_text {
            None => max,
            Some(l) => l.parse::<u8>().ok().filter(|&l| l <= max).ok_or_else(|| {
                anyhow!("bad prefix {text:?}: the length must be a number from 0 to {max}")
            })?,
        };
        let network = mask(addr, len);
        if network != addr {
            bail!("bad prefix {text:?}: host bits are set (the network is {network}/{len})");
        }
        Ok(PinTarget::Prefix(addr, len))
    }

    /// Whether the target covers a flow (regardless of more specific pins).
    fn matches(&self, key: FlowId, endpoints: &Endpoints) -> bool {
        match *self {
            PinTarget::Flow(k) => k == key,
            PinTarget::Port(p) => endpoints.sport == p || endpoints.dport == p,
            PinTarget::Prefix(net, len) => {
                in_prefix(endpoints.dst, net, len) || in_prefix(endpoints.src, net, len)
            }
        }
    }
}

impl fmt::Display for PinTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PinTarget::Flow(k) => write!(f, "flow {k}"),
            PinTarget::Port(p) => write!(f, "port {p}"),
            PinTarget::Prefix(a, l) => write!(f, "prefix {a}/{l}"),
        }
    }
}

fn max_prefix_len(addr: IpAddr) -> u8 {
    match addr {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

/// The address with all bits past `len` cleared.
fn mask(addr: IpAddr, len: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let bits = u32::from(a);
            let m = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            IpAddr::V4((bits & m).into())
        }
        IpAddr::V6(a) => {
            let bits = u128::from(a);
            let m = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            IpAddr::V6((bits & m).into())
        }
    }
}

fn in_prefix(addr: IpAddr, net: IpAddr, len: u8) -> bool {
    let addr = addr.to_canonical();
    addr.is_ipv4() == net.is_ipv4() && mask(addr, len) == net
}

/// The registry's copy of one flow, shared with the connection that serves it: the connection
/// updates it after each report through its own handle, not by a lookup in the registry's
/// table (a lookup of a cold table per report was 5% of the kernel shim with its agent at
/// 10k flows).
pub struct FlowRecord {
    pub endpoints: Endpoints,
    state: Mutex<RecordState>,
}

/// What changes in a [`FlowRecord`]. A record of each flow is kept, so what is rare is boxed
/// and what is shared is shared: the algorithm's name is one of the [`Names`].
struct RecordState {
    algorithm: Arc<str>,
    /// Its selector's features, for flows that have a selector.
    features: Option<Box<Features>>,
    reports: u64,
    handovers: u32,
    cwnd_bytes: Option<u64>,
}

impl FlowRecord {
    fn state(&self) -> MutexGuard<'_, RecordState> {
        self.state.lock().expect("registry record poisoned")
    }
}

/// The names of the algorithms flows run, each held once however many flows run it.
#[derive(Default)]
struct Names(HashSet<Arc<str>>);

impl Names {
    fn get(&mut self, name: &str) -> Arc<str> {
        if let Some(shared) = self.0.get(name) {
            return Arc::clone(shared);
        }
        let shared: Arc<str> = Arc::from(name);
        self.0.insert(Arc::clone(&shared));
        shared
    }
}

/// The operator's pins, one per target; a new pin on a target replaces the old one.
#[derive(Default)]
struct Pins {
    flows: HashMap<FlowId, String>,
    ports: HashMap<u16, String>,
    prefixes: Vec<(IpAddr, u8, String)>,
}

impl Pins {
    fn insert(&mut self, target: PinTarget, algorithm: &str) {
        let algorithm = algorithm.to_string();
        match target {
            PinTarget::Flow(k) => {
                self.flows.insert(k, algorithm);
            }
            PinTarget::Port(p) => {
                self.ports.insert(p, algorithm);
            }
            PinTarget::Prefix(net, len) => {
                match self.prefixes.iter_mut().find(|(n, l, _)| (*n, *l) == (net, len)) {
                    Some(pin) => pin.2 = algorithm,
                    None => self.prefixes.push((net, len, algorithm)),
                }
            }
        }
    }

    fn remove(&mut self, target: &PinTarget) -> Option<String> {
        match *target {
            PinTarget::Flow(k) => self.flows.remove(&k),
            PinTarget::Port(p) => self.ports.remove(&p),
            PinTarget::Prefix(net, len) => {
                let i = self.prefixes.iter().position(|(n, l, _)| (*n, *l) == (net, len))?;
                Some(self.prefixes.remove(i).2)
            }
        }
    }

    fn most_specific(&self, key: FlowId, e: &Endpoints) -> Option<&str> {
        if let Some(a) = self.flows.get(&key) {
            return Some(a);
        }
        if let Some(a) = self.ports.get(&e.sport).or_else(|| self.ports.get(&e.dport)) {
            return Some(a);
        }
        // The client's address wins a tie: the path to the client is what a pin by
        // prefix is usually about.
        match (self.longest_prefix(e.dst), self.longest_prefix(e.src)) {
            (Some(d), Some(s)) if s.0 > d.0 => Some(s.1),
            (Some(d), _) => Some(d.1),
            (None, s) => s.map(|(_, a)| a),
        }
    }

    /// The longest prefix pin containing `addr`: its length and algorithm.
    fn longest_prefix(&self, addr: IpAddr) -> Option<(u8, &str)> {
        self.prefixes
            .iter()
            .filter(|(net, len, _)| in_prefix(addr, *net, *len))
            .max_by_key(|(_, len, _)| *len)
            .map(|(_, len, a)| (*len, a.as_str()))
    }

    /// Every pin, flows first, then ports and prefixes in ascending order.
    fn all(&self) -> Vec<(PinTarget, String)> {
        let mut flows: Vec<_> = self.flows.iter().map(|(k, a)| (*k, a.clone())).collect();
        flows.sort_by_key(|(k, _)| (k.datapath, k.sid));
        let mut ports: Vec<_> = self.ports.iter().map(|(p, a)| (*p, a.clone())).collect();
        ports.sort();
        let mut prefixes = self.prefixes.clone();
        prefixes.sort_by_key(|(net, len, _)| (*net, *len));
        flows
            .into_iter()
            .map(|(k, a)| (PinTarget::Flow(k), a))
            .chain(ports.into_iter().map(|(p, a)| (PinTarget::Port(p), a)))
            .chain(prefixes.into_iter().map(|(n, l, a)| (PinTarget::Prefix(n, l), a)))
            .collect()
    }
}

/// Flows, pins and the policy, shared by the datapath threads and the operator interface.
/// Lock order: `flows`, then `pins` or a record's state; a record's state, then `names`.
pub struct Registry {
    flows: Mutex<HashMap<FlowId, Arc<FlowRecord>>>,
    /// The algorithm names of `flows`' records.
    names: Mutex<Names>,
    pins: Mutex<Pins>,
    policy: RwLock<Option<Arc<Policy>>>,
    generation: AtomicU64,
    /// Which algorithm flows to each destination prefix ended on (crate::memory).
    memory: DestinationMemory,
}

impl Registry {
    pub fn new(policy: Option<Arc<Policy>>) -> Self {
        Self {
            flows: Mutex::new(HashMap::new()),
            names: Mutex::new(Names::default()),
            pins: Mutex::new(Pins::default()),
            policy: RwLock::new(policy),
            generation: AtomicU64::new(0),
            memory: DestinationMemory::default(),
        }
    }

    /// The per-destination memory, used under a policy (its settings are the policy's).
    pub fn memory(&self) -> &DestinationMemory {
        &self.memory
    }

    /// A new flow (at CREATE), running `algorithm`: its record, for [`update`](Self::update).
    pub fn register(&self, key: FlowId, endpoints: Endpoints, algorithm: &str) -> Arc<FlowRecord> {
        let state = RecordState {
            algorithm: self.name(algorithm),
            features: None,
            reports: 0,
            handovers: 0,
            cwnd_bytes: None,
        };
        let record = Arc::new(FlowRecord { endpoints, state: Mutex::new(state) });
        self.flows().insert(key, Arc::clone(&record));
        record
    }

    /// The flow's state after a report, in the record [`register`](Self::register) gave. A
    /// record removed since is updated unseen.
    pub fn update(
        &self,
        record: &FlowRecord,
        algorithm: &str,
        features: Option<Features>,
        reports: u64,
        handovers: u32,
        cwnd_bytes: Option<u64>,
    ) {
        let mut state = record.state();
        if *state.algorithm != *algorithm {
            state.algorithm = self.name(algorithm);
        }
        match (&mut state.features, features) {
            (Some(held), Some(f)) => **held = f,
            (held, f) => *held = f.map(Box::new),
        }
        state.reports = reports;
        state.handovers = handovers;
        state.cwnd_bytes = cwnd_bytes;
    }

    /// A flow closed (or its datapath went away). Its own pin goes with it: socket ids are
    /// reused, and a later flow with the same id is another flow.
    /// Returns its endpoints, if it was registered.
    pub fn remove(&self, key: FlowId) -> Option<Endpoints> {
        let mut flows = self.flows();
        let removed = flows.remove(&key);
        // Under the flows lock, as in `pin`, so a pin cannot land on a flow just removed.
        let had_pin = self.pins_lock().flows.remove(&key).is_some();
        drop(flows);
        if had_pin {
            self.bump();
        }
        removed.map(|r| r.endpoints)
    }

    /// Every flow, ordered by datapath and socket id.
    pub fn list(&self) -> Vec<FlowSnapshot> {
        let mut out: Vec<FlowSnapshot> = self
            .flows()
            .iter()
            .map(|(key, e)| {
                let state = e.state();
                FlowSnapshot {
                    key: *key,
                    endpoints: e.endpoints,
                    algorithm: state.algorithm.to_string(),
                    pinned: None,
                    features: state.features.as_deref().copied(),
                    reports: state.reports,
                    handovers: state.handovers,
                    cwnd_bytes: state.cwnd_bytes,
                }
            })
            .collect();
        let pins = self.pins_lock();
        for flow in &mut out {
            flow.pinned = pins.most_specific(flow.key, &flow.endpoints).map(str::to_string);
        }
        out.sort_by_key(|f| (f.key.datapath, f.key.sid));
        out
    }

    /// Pin `target` to `algorithm` (a simple algorithm spec), replacing an earlier pin on the
    /// same target. A flow target must be a current flow. Returns how many current flows the
    /// target covers (more specific pins may still override it for some of them).
    pub fn pin(&self, target: PinTarget, algorithm: &str) -> Result<usize> {
        check_simple(algorithm)?;
        // Lock order: flows, then pins.
        let flows = self.flows();
        if let PinTarget::Flow(key) = target {
            if !flows.contains_key(&key) {
                bail!("no flow {key} (datapath {}, socket id {})", key.datapath, key.sid);
            }
        }
        let matched = flows.iter().filter(|(k, e)| target.matches(**k, &e.endpoints)).count();
        self.pins_lock().insert(target, algorithm);
        drop(flows);
        self.bump();
        Ok(matched)
    }

    /// Remove the pin on `target`. Returns how many current flows it covered.
    pub fn unpin(&self, target: &PinTarget) -> Result<usize> {
        if self.pins_lock().remove(target).is_none() {
            bail!("no pin on {target}");
        }
        self.bump();
        Ok(self.count_matching(target))
    }

    /// Every pin with its algorithm, flows first, then ports, then prefixes.
    pub fn pins(&self) -> Vec<(PinTarget, String)> {
        self.pins_lock().all()
    }

    /// How many current flows `target` covers.
    pub fn count_matching(&self, target: &PinTarget) -> usize {
        self.flows().iter().filter(|(k, e)| target.matches(**k, &e.endpoints)).count()
    }

    /// The algorithm the most specific pin covering the flow names, if any.
    pub fn pinned_for(&self, key: FlowId, endpoints: &Endpoints) -> Option<String> {
        self.pins_lock().most_specific(key, endpoints).map(str::to_string)
    }

    pub fn policy(&self) -> Option<Arc<Policy>> {
        self.policy.read().expect("registry policy poisoned").clone()
    }

    pub fn set_policy(&self, policy: Arc<Policy>) {
        *self.policy.write().expect("registry policy poisoned") = Some(policy);
        self.bump();
    }

    /// Changes with every pin, unpin and policy change.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn bump(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    fn flows(&self) -> MutexGuard<'_, HashMap<FlowId, Arc<FlowRecord>>> {
        self.flows.lock().expect("registry flows poisoned")
    }

    /// `algorithm`'s name as the records hold it.
    fn name(&self, algorithm: &str) -> Arc<str> {
        self.names.lock().expect("registry names poisoned").get(algorithm)
    }

    fn pins_lock(&self) -> MutexGuard<'_, Pins> {
        self.pins.lock().expect("registry pins poisoned")
    }
}

/// Pins name simple algorithms only: a pinned flow is handed over live, which the full API's
/// own datapath programs do not support.
fn check_simple(spec: &str) -> Result<()> {
    match crate::flow::instantiate(spec)
        .map_err(|e| anyhow!("algorithm {spec:?}: {e:#}"))?
    {
        Instance::Simple(_) => Ok(()),
        Instance::Full(a) => bail!(
            "algorithm {spec:?}: {} uses the full API (its own datapath programs); only simple \
             algorithms can be pinned, since a pinned flow is handed over to another algorithm while it runs",
            a.name()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SERVER_PORT: u16 = 80;
    const CLIENT_PORT: u16 = 40_000;

    fn endpoints(src: &str, sport: u16, dst: &str, dport: u16) -> Endpoints {
        Endpoints { src: src.parse().unwrap(), sport, dst: dst.parse().unwrap(), dport }
    }

    fn key(datapath: u64, sid: u32) -> FlowId {
        FlowId { datapath, sid }
    }

    fn prefix(text: &str) -> PinTarget {
        PinTarget::parse_prefix(text).unwrap()
    }

    /// The record `register` gave for `k`.
    fn record(r: &Registry, k: FlowId) -> Arc<FlowRecord> {
        Arc::clone(&r.flows()[&k])
    }

    /// A registry with one flow 1:1 from server 192.168.1.1:80 to client 10.1.2.3:40000.
    fn one_flow() -> (Registry, FlowId, Endpoints) {
        let r = Registry::new(None);
        let (k, e) = (key(1, 1), endpoints("192.168.1.1", SERVER_PORT, "10.1.2.3", CLIENT_PORT));
        r.register(k, e, "reno");
        (r, k, e)
    }

    #[test]
    fn prefixes_parse_in_both_families_and_single_addresses_are_host_prefixes() {
        assert_eq!(prefix("10.0.0.0/8"), PinTarget::Prefix("10.0.0.0".parse().unwrap(), 8));
        assert_eq!(prefix(" 2001:db8::/32 "), PinTarget::Prefix("2001:db8::".parse().unwrap(), 32));
        assert_eq!(prefix("10.1.2.3"), PinTarget::Prefix("10.1.2.3".parse().unwrap(), 32));
        assert_eq!(prefix("::1"), PinTarget::Prefix("::1".parse().unwrap(), 128));
        assert_eq!(prefix("0.0.0.0/0"), PinTarget::Prefix("0.0.0.0".parse().unwrap(), 0));
    }

    #[test]
    fn bad_prefixes_say_what_is_wrong() {
        let err = |t: &str| PinTarget::parse_prefix(t).unwrap_err().to_string();
        assert!(err("10.1.2.3/8").contains("host bits are set (the network is 10.0.0.0/8)"), "{}", err("10.1.2.3/8"));
        assert!(err("10.0.0.0/33").contains("from 0 to 32"));
        assert!(err("2001:db8::/129").contains("from 0 to 128"));
        assert!(err("10.0.0.0/x").contains("from 0 to 32"));
        assert!(err("ten/8").contains("\"ten\" is not an IPv4 or IPv6 address"));
        assert!(err("").contains("is not an IPv4 or IPv6 address"));
    }

    #[test]
    fn prefixes_match_their_own_family_and_v4_mapped_addresses() {
        let net = "10.0.0.0".parse().unwrap();
        assert!(in_prefix("10.255.0.1".parse().unwrap(), net, 8));
        assert!(!in_prefix("11.0.0.1".parse().unwrap(), net, 8));
        assert!(in_prefix("::ffff:10.9.9.9".parse().unwrap(), net, 8));
        assert!(!in_prefix("::a00:1".parse().unwrap(), net, 8), "v4-compatible is not v4-mapped");
        let net6 = "2001:db8::".parse().unwrap();
        assert!(in_prefix("2001:db8:1::5".parse().unwrap(), net6, 32));
        assert!(!in_prefix("2001:db9::5".parse().unwrap(), net6, 32));
        assert!(!in_prefix("10.0.0.1".parse().unwrap(), net6, 0), "a v6 /0 does not cover v4");
        assert!(in_prefix("203.0.113.9".parse().unwrap(), "0.0.0.0".parse().unwrap(), 0));
    }

    #[test]
    fn the_most_specific_pin_wins_flow_then_port_then_longest_prefix() {
        let (r, k, e) = one_flow();
        assert_eq!(r.pinned_for(k, &e), None);
        r.pin(prefix("10.0.0.0/8"), "cubic").unwrap();
        assert_eq!(r.pinned_for(k, &e).as_deref(), Some("cubic"));
        r.pin(prefix("10.1.0.0/16"), "vegas").unwrap();
        assert_eq!(r.pinned_for(k, &e).as_deref(), Some("vegas"), "longer prefix");
        r.pin(PinTarget::Port(CLIENT_PORT), "westwood").unwrap();
        assert_eq!(r.pinned_for(k, &e).as_deref(), Some("westwood"), "port beats prefix");
        r.pin(PinTarget::Port(SERVER_PORT), "hybla").unwrap();
        assert_eq!(r.pinned_for(k, &e).as_deref(), Some("hybla"), "server port beats client port");
        r.pin(PinTarget::Flow(k), "bbr").unwrap();
        assert_eq!(r.pinned_for(k, &e).as_deref(), Some("bbr"), "flow beats everything");
        r.unpin(&PinTarget::Flow(k)).unwrap();
        r.unpin(&PinTarget::Port(SERVER_PORT)).unwrap();
        r.unpin(&PinTarget::Port(CLIENT_PORT)).unwrap();
        assert_eq!(r.pinned_for(k, &e).as_deref(), Some("vegas"));
        // Another flow, not covered by any pin.
        let other = endpoints("192.168.1.1", 443, "172.16.0.1", 50_000);
        assert_eq!(r.pinned_for(key(1, 2), &other), None);
    }

    #[test]
    fn prefixes_cover_either_address_and_the_client_wins_a_tie() {
        let (r, k, e) = one_flow();
        r.pin(prefix("192.168.0.0/16"), "cubic").unwrap();
        assert_eq!(r.pinned_for(k, &e).as_deref(), Some("cubic"), "the server's address");
        r.pin(prefix("10.0.0.0/16"), "vegas").unwrap();
        assert_eq!(r.pinned_for(k, &e).as_deref(), Some("cubic"), "10.0/16 does not hold 10.1.2.3");
        r.pin(prefix("10.1.0.0/16"), "bbr").unwrap();
        assert_eq!(r.pinned_for(k, &e).as_deref(), Some("bbr"), "equal lengths: the client's");
        r.pin(prefix("192.168.1.0/24"), "hybla").unwrap();
        assert_eq!(r.pinned_for(k, &e).as_deref(), Some("hybla"), "a longer one on the server's");
    }

    #[test]
    fn a_new_pin_on_a_target_replaces_the_old_one() {
        let (r, k, e) = one_flow();
        r.pin(prefix("10.0.0.0/8"), "cubic").unwrap();
        r.pin(prefix("10.0.0.0/8"), "bbr").unwrap();
        r.pin(PinTarget::Port(7), "cubic").unwrap();
        r.pin(PinTarget::Port(7), "vegas").unwrap();
        assert_eq!(r.pinned_for(k, &e).as_deref(), Some("bbr"));
        assert_eq!(
            r.pins(),
            vec![(PinTarget::Port(7), "vegas".to_string()), (prefix("10.0.0.0/8"), "bbr".to_string())]
        );
    }

    #[test]
    fn pin_and_unpin_count_the_flows_their_target_covers() {
        let (r, _, _) = one_flow();
        r.register(key(2, 9), endpoints("192.168.1.1", SERVER_PORT, "10.7.0.1", 40_001), "reno");
        r.register(key(2, 10), endpoints("192.168.1.1", 8080, "172.16.0.1", 40_002), "reno");
        assert_eq!(r.pin(PinTarget::Port(SERVER_PORT), "bbr").unwrap(), 2);
        assert_eq!(r.pin(prefix("10.0.0.0/8"), "cubic").unwrap(), 2);
        assert_eq!(r.pin(prefix("2001:db8::/32"), "cubic").unwrap(), 0);
        assert_eq!(r.pin(PinTarget::Flow(key(2, 10)), "vegas").unwrap(), 1);
        assert_eq!(r.unpin(&PinTarget::Port(SERVER_PORT)).unwrap(), 2);
        assert_eq!(r.count_matching(&prefix("0.0.0.0/0")), 3);
    }

    #[test]
    fn unpinning_what_is_not_pinned_is_an_error() {
        let (r, k, _) = one_flow();
        let err = r.unpin(&PinTarget::Port(80)).unwrap_err().to_string();
        assert_eq!(err, "no pin on port 80");
        let err = r.unpin(&prefix("10.0.0.0/8")).unwrap_err().to_string();
        assert_eq!(err, "no pin on prefix 10.0.0.0/8");
        r.pin(prefix("10.0.0.0/8"), "bbr").unwrap();
        assert!(r.unpin(&prefix("10.0.0.0/16")).is_err(), "only the exact prefix");
        assert!(r.unpin(&PinTarget::Flow(k)).unwrap_err().to_string().contains("no pin on flow 1:1"));
        r.unpin(&prefix("10.0.0.0/8")).unwrap();
        assert!(r.unpin(&prefix("10.0.0.0/8")).is_err(), "already gone");
    }

    #[test]
    fn pins_name_known_simple_algorithms_and_current_flows() {
        let (r, _, _) = one_flow();
        let err = format!("{:#}", r.pin(PinTarget::Port(80), "nosuch").unwrap_err());
        assert!(err.contains("\"nosuch\"") && err.contains("cubic"), "{err}");
        let err = format!("{:#}", r.pin(PinTarget::Port(80), "cubic:nosuch=1").unwrap_err());
        assert!(err.contains("nosuch"), "{err}");
        let err = format!("{:#}", r.pin(PinTarget::Port(80), "reno-datapath").unwrap_err());
        assert!(err.contains("only simple algorithms can be pinned"), "{err}");
        let err = r.pin(PinTarget::Flow(key(1, 2)), "bbr").unwrap_err().to_string();
        assert_eq!(err, "no flow 1:2 (datapath 1, socket id 2)");
        assert!(r.pins().is_empty(), "failed pins leave nothing behind");
        r.pin(PinTarget::Port(80), "cubic:beta=0.8").unwrap();
    }

    #[test]
    fn every_change_of_pins_or_policy_bumps_the_generation() {
        let (r, k, e) = one_flow();
        let g0 = r.generation();
        r.update(&record(&r, k), "cubic", None, 3, 1, Some(14_480));
        assert_eq!(r.generation(), g0, "reports do not");
        r.pin(PinTarget::Port(80), "bbr").unwrap();
        let g1 = r.generation();
        assert!(g1 > g0);
        assert!(r.pin(PinTarget::Port(80), "nosuch").is_err());
        assert!(r.unpin(&PinTarget::Port(81)).is_err());
        assert_eq!(r.generation(), g1, "failed requests do not");
        r.unpin(&PinTarget::Port(80)).unwrap();
        let g2 = r.generation();
        assert!(g2 > g1);
        r.set_policy(Arc::new(Policy::load("mystique").unwrap()));
        let g3 = r.generation();
        assert!(g3 > g2);
        assert_eq!(r.policy().unwrap().name(), "mystique");
        r.pin(PinTarget::Flow(k), "bbr").unwrap();
        assert_eq!(r.pinned_for(k, &e).as_deref(), Some("bbr"));
        let g4 = r.generation();
        assert_eq!(r.remove(k).map(|removed| removed.dst), Some(e.dst), "the flow's endpoints");
        assert!(r.generation() > g4, "a flow pin dropped with its flow");
        assert!(r.remove(k).is_none());
        assert!(r.pins().is_empty());
        assert_eq!(r.pinned_for(k, &e), None, "a later flow with the same id starts unpinned");
    }

    #[test]
    fn list_shows_each_flow_with_its_latest_report_and_pin() {
        let (r, k, _) = one_flow();
        r.register(key(1, 0), endpoints("192.168.1.1", 443, "172.16.0.1", 40_002), "cubic");
        let listed = r.list();
        assert_eq!(listed.iter().map(|f| f.key).collect::<Vec<_>>(), vec![key(1, 0), k]);
        assert_eq!((listed[1].reports, listed[1].cwnd_bytes, listed[1].pinned.clone()), (0, None, None));
        r.update(&record(&r, k), "bbr", None, 12, 2, Some(29_000));
        r.pin(PinTarget::Port(80), "hybla").unwrap();
        let f = r.list().into_iter().find(|f| f.key == k).unwrap();
        assert_eq!(f.algorithm, "bbr");
        assert_eq!((f.reports, f.handovers, f.cwnd_bytes), (12, 2, Some(29_000)));
        assert_eq!(f.pinned.as_deref(), Some("hybla"));
        assert_eq!(f.endpoints.dport, CLIENT_PORT);
        let removed = record(&r, k);
        r.remove(k);
        assert_eq!(r.list().iter().map(|f| f.key).collect::<Vec<_>>(), vec![key(1, 0)]);
        r.update(&removed, "cubic", None, 13, 2, None);
        assert_eq!(r.list().iter().map(|f| f.key).collect::<Vec<_>>(), vec![key(1, 0)], "an update after its flow is gone does not bring it back");
    }

    /// Records hold an algorithm's name once for all flows, and features only where a
    /// selector measured some, kept until it stops.
    #[test]
    fn records_share_algorithm_names_and_keep_features_only_where_measured() {
        let (r, k, _) = one_flow();
        let other = key(1, 2);
        r.register(other, endpoints("192.168.1.1", SERVER_PORT, "10.1.2.4", CLIENT_PORT), "reno");
        let name = |key| Arc::clone(&record(&r, key).state().algorithm);
        assert!(Arc::ptr_eq(&name(k), &name(other)));
        r.update(&record(&r, other), "cubic", None, 1, 1, None);
        r.update(&record(&r, k), "cubic", None, 1, 1, None);
        assert!(Arc::ptr_eq(&name(k), &name(other)));
        assert_eq!(&*name(k), "cubic");
        let features = Features { samples: 3, ..Features::default() };
        r.update(&record(&r, k), "cubic", Some(features), 2, 1, None);
        r.update(&record(&r, k), "cubic", Some(Features { samples: 4, ..features }), 3, 1, None);
        let listed = r.list();
        assert_eq!(listed.iter().map(|f| f.features.map(|f| f.samples)).collect::<Vec<_>>(), vec![Some(4), None]);
        r.update(&record(&r, k), "cubic", None, 4, 1, None);
        assert!(r.list().iter().all(|f| f.features.is_none()));
    }
}
