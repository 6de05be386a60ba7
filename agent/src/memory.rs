//! Per-destination memory: which algorithm the last flows to a destination ended on, so that
//! the next flow there starts on it (as Antelope and bpftune remember per destination).
//!
//! The model. Only flows under a policy take part. A destination is the flow's remote address
//! (the client: the datapaths run at the sender) masked to a prefix, /24 for IPv4 and /64 for
//! IPv6 by default; an IPv4-mapped IPv6 address counts as the IPv4 address it maps. Each
//! remembered prefix holds, per algorithm spec, an exponentially decayed count of flows that
//! ended on it: a flow's vote is worth 1 when it closes and halves every `half_life_s`.
//!
//! - **Voting.** A flow votes for the algorithm spec it runs when it closes (or when its
//!   datapath goes away) only if the selector made its first decision for it under the policy
//!   in force and no pin holds it: a flow that ended before any decision ran on `initial` (or
//!   on what the memory chose) without evidence of its own, and counting it would only echo the
//!   memory back; a pinned flow runs the operator's choice, not the path's.
//! - **Starting.** A new flow that neither a pin nor its datapath gives an algorithm starts on
//!   the prefix's top-scoring algorithm if that score is at least `min_score` and the current
//!   policy may choose that algorithm (it is `initial`, a rule's or the default); otherwise on
//!   the policy's `initial`. Ties go to the algorithm voted for first. The selector then decides
//!   as usual and may hand the flow over. With the default `min_score = 1`, a single vote falls
//!   below it as soon as it starts to decay, so a prefix needs two flows that agree within a
//!   half-life; `min_score = 0.5` trusts one flow for one half-life.
//! - **Decay is lazy**: an entry stores its scores as of its last update and is decayed when it
//!   is next touched (a start or a vote for its prefix); nothing ever walks the table on a timer
//!   (DESIGN.md item 8). Scores below [`FORGET_BELOW`] are dropped when touched, so a vote is
//!   forgotten after about seven half-lives.
//! - **Bounded**: at most `capacity` prefixes; a vote for a new prefix when the table is full
//!   evicts the least recently used one (starts and votes count as use). Lookups and votes are
//!   O(log capacity).
//!
//! Settings come from the policy file's `[memory]` table ([`MemorySettings`], read here and
//! called from the policy's loader so that its problems are reported with the file's others)
//! and apply to the next start or vote, so `load-policy` changes them at once. Entries keep the
//! prefix length they were made with: after a change of `prefix_v4`/`prefix_v6`, old entries no
//! longer match and age out. `ccswitch-agent --no-destination-memory` switches the memory off
//! whatever the policy says. The operator interface lists the table and clears all of it or the
//! prefixes inside one prefix.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use toml::Value;

/// Scores below this are forgotten when their entry is next touched (about 6.6 half-lives
/// after a single vote).
pub const FORGET_BELOW: f64 = 0.01;
/// Most prefixes a memory may be configured to hold.
pub const MAX_CAPACITY: usize = 1 << 20;
/// Longest half-life accepted: a year, in seconds.
pub const MAX_HALF_LIFE_S: f64 = 365.0 * 24.0 * 3600.0;

// ---- Settings ------------------------------------------------------------------------------

/// The policy file's `[memory]` table.
#[derive(Clone, Debug, PartialEq)]
pub struct MemorySettings {
    pub enabled: bool,
    /// Prefix length IPv4 destinations are grouped by, 0 to 32.
    pub prefix_v4: u8,
    /// Prefix length IPv6 destinations are grouped by, 0 to 128.
    pub prefix_v6: u8,
    /// Time for a vote to lose half its weight, seconds.
    pub half_life_s: f64,
    /// Least top score for a new flow to start on the remembered algorithm.
    pub min_score: f64,
    /// Most prefixes remembered.
    pub capacity: usize,
}

impl Default for MemorySettings {
    fn default() -> Self {
        Self { enabled: true, prefix_v4: 24, prefix_v6: 64, half_life_s: 600.0, min_score: 1.0, capacity: 4096 }
    }
}

/// The keys of `[memory]` (README.md, "Policy files", documents each).
pub const FIELDS: &[&str] = &["enabled", "prefix_v4", "prefix_v6", "half_life_s", "min_score", "capacity"];

impl MemorySettings {
    /// Read `[memory]` (absent: the defaults). Mistyped and unknown keys are added to
    /// `errors`, in the policy file's style, and the default kept; ranges are checked by
    /// [`check`](Self::check), after the spec's overrides.
    pub fn read(value: Option<&Value>, errors: &mut Vec<String>) -> Self {
        let mut settings = Self::default();
        let Some(value) = value else { return settings };
        let Value::Table(table) = value else {
            errors.push(format!("`memory` must be a table ([memory]), found {} {value}", value.type_str()));
            return settings;
        };
        for (key, value) in table {
            if let Err(e) = settings.set_value(key, value) {
                errors.push(format!("[memory] {e}"));
            }
        }
        settings
    }

    fn set_value(&mut self, key: &str, value: &Value) -> Result<(), String> {
        let wrong = |expected: &str| format!("`{key}` must be {expected}, found {} {value}", value.type_str());
        let whole = |value: &Value| match value {
            Value::Integer(i) => Ok(*i),
            _ => Err(wrong("a whole number")),
        };
        let length = |i: i64| u8::try_from(i).map_err(|_| format!("{key} = {i}: must be a prefix length (0 to 32 for IPv4, 0 to 128 for IPv6)"));
        match key {
            "enabled" => match value {
                Value::Boolean(b) => self.enabled = *b,
                _ => return Err(wrong("true or false")),
            },
            "prefix_v4" => self.prefix_v4 = length(whole(value)?)?,
            "prefix_v6" => self.prefix_v6 = length(whole(value)?)?,
            "half_life_s" | "min_score" => {
                let x = match value {
                    Value::Integer(i) => *i as f64,
                    Value::Float(x) => *x,
                    _ => return Err(wrong("a number")),
                };
                if key == "half_life_s" {
                    self.half_life_s = x;
                } else {
                    self.min_score = x;
                }
            }
            "capacity" => {
                let i = whole(value)?;
                self.capacity = usize::try_from(i).map_err(|_| format!("capacity = {i}: must be between 1 and {MAX_CAPACITY}"))?;
            }
            _ => return Err(format!("unknown field `{key}` (allowed: {})", FIELDS.join(", "))),
        }
        Ok(())
    }

    /// Override one setting from a policy spec (`memory.KEY=VALUE`; `key` without `memory.`).
    pub fn set(&mut self, key: &str, text: &str) -> Result<(), String> {
        let value = match key {
            "enabled" => match text {
                "true" => Value::Boolean(true),
                "false" => Value::Boolean(false),
                _ => return Err(format!("{text:?} is not true or false")),
            },
            "prefix_v4" | "prefix_v6" | "capacity" => {
                Value::Integer(text.parse().map_err(|_| format!("{text:?} is not a whole number"))?)
            }
            "half_life_s" | "min_score" => Value::Float(text.parse().map_err(|_| format!("{text:?} is not a number"))?),
            _ => return Err(format!("no setting memory.{key}; memory settings: {}", FIELDS.join(", "))),
        };
        self.set_value(key, &value)
    }

    /// What is wrong with the values, each problem in the policy file's style.
    pub fn check(&self) -> Vec<String> {
        let mut errors = Vec::new();
        if self.prefix_v4 > 32 {
            errors.push(format!("[memory] prefix_v4 = {}: must be between 0 and 32", self.prefix_v4));
        }
        if self.prefix_v6 > 128 {
            errors.push(format!("[memory] prefix_v6 = {}: must be between 0 and 128", self.prefix_v6));
        }
        if !(self.half_life_s > 0.0 && self.half_life_s <= MAX_HALF_LIFE_S) {
            errors.push(format!("[memory] half_life_s = {}: must be above 0 and at most {MAX_HALF_LIFE_S} (a year)", self.half_life_s));
        }
        if !(self.min_score > 0.0 && self.min_score.is_finite()) {
            errors.push(format!("[memory] min_score = {}: must be a finite number above 0", self.min_score));
        }
        if !(1..=MAX_CAPACITY).contains(&self.capacity) {
            errors.push(format!("[memory] capacity = {}: must be between 1 and {MAX_CAPACITY}", self.capacity));
        }
        errors
    }

    fn half_life(&self) -> Duration {
        Duration::from_secs_f64(self.half_life_s)
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "enabled": self.enabled, "prefix_v4": self.prefix_v4, "prefix_v6": self.prefix_v6,
            "half_life_s": self.half_life_s, "min_score": self.min_score, "capacity": self.capacity,
        })
    }
}

impl fmt::Display for MemorySettings {
    /// One line for the policy's summary.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.enabled {
            return write!(f, "off");
        }
        write!(
            f,
            "by /{} (IPv4) and /{} (IPv6) destination prefix, half-life {} s, start at score >= {}, up to {} prefixes",
            self.prefix_v4, self.prefix_v6, self.half_life_s, self.min_score, self.capacity
        )
    }
}

// ---- Prefixes ------------------------------------------------------------------------------

/// A destination prefix: a network address (host bits zero) and its length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Prefix {
    pub network: IpAddr,
    pub len: u8,
}

impl Prefix {
    /// The prefix `addr` falls in under `settings` (IPv4-mapped IPv6 addresses as IPv4).
    pub fn of(addr: IpAddr, settings: &MemorySettings) -> Prefix {
        let addr = addr.to_canonical();
        let len = match addr {
            IpAddr::V4(_) => settings.prefix_v4.min(32),
            IpAddr::V6(_) => settings.prefix_v6.min(128),
        };
        Prefix { network: mask(addr, len), len }
    }

    /// Whether `self` lies inside `outer` (equal prefixes included).
    pub fn within(&self, outer: &Prefix) -> bool {
        self.network.is_ipv4() == outer.network.is_ipv4()
            && self.len >= outer.len
            && mask(self.network, outer.len) == outer.network
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.len)
    }
}

/// `addr` with every bit past `len` cleared (`len` at most the family's width).
fn mask(addr: IpAddr, len: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let m = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            IpAddr::V4((u32::from(a) & m).into())
        }
        IpAddr::V6(a) => {
            let m = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            IpAddr::V6((u128::from(a) & m).into())
        }
    }
}

// ---- The table -----------------------------------------------------------------------------

/// One remembered prefix.
#[derive(Clone, Debug)]
struct Entry {
    /// Decayed vote counts by algorithm spec, in the order first voted, as of `updated`.
    scores: Vec<(String, f64)>,
    updated: Instant,
    /// Position in the recency order.
    used: u64,
}

impl Entry {
    /// Bring the scores to `now` and drop those forgotten.
    fn decay(&mut self, now: Instant, half_life: Duration) {
        let elapsed = now.saturating_duration_since(self.updated);
        if elapsed.is_zero() {
            return;
        }
        let factor = decay_factor(elapsed, half_life);
        for (_, score) in &mut self.scores {
            *score *= factor;
        }
        self.scores.retain(|(_, s)| *s >= FORGET_BELOW);
        self.updated = now;
    }

    /// The top score and its algorithm (the first voted for on a tie).
    fn top(&self) -> Option<(&str, f64)> {
        self.scores
            .iter()
            .fold(None, |best: Option<(&str, f64)>, (a, s)| match best {
                Some((_, b)) if b >= *s => best,
                _ => Some((a.as_str(), *s)),
            })
    }
}

fn decay_factor(elapsed: Duration, half_life: Duration) -> f64 {
    0.5f64.powf(elapsed.as_secs_f64() / half_life.as_secs_f64())
}

/// What the memory holds for a destination at a flow's start.
#[derive(Clone, Debug, PartialEq)]
pub struct Recall {
    pub prefix: Prefix,
    /// The top-scoring algorithm, if any score is left.
    pub algorithm: Option<String>,
    pub score: f64,
}

/// A remembered prefix as the operator interface lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct MemorySnapshot {
    pub prefix: Prefix,
    /// Scores now, highest first.
    pub scores: Vec<(String, f64)>,
    /// Since the prefix's last vote or start.
    pub age: Duration,
}

/// The table of remembered prefixes, bounded and least-recently-used first out. Times are
/// passed in, so tests control the clock.
#[derive(Debug, Default)]
pub struct MemoryTable {
    entries: HashMap<Prefix, Entry>,
    /// Recency: use counter -> prefix; the first is the least recently used.
    order: BTreeMap<u64, Prefix>,
    uses: u64,
}

impl MemoryTable {
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Mark `prefix` used now; returns its new position.
    fn touch(&mut self, prefix: Prefix, old: Option<u64>) -> u64 {
        if let Some(old) = old {
            self.order.remove(&old);
        }
        self.uses += 1;
        self.order.insert(self.uses, prefix);
        self.uses
    }

    fn drop_entry(&mut self, prefix: &Prefix) -> bool {
        match self.entries.remove(prefix) {
            Some(e) => {
                self.order.remove(&e.used);
                true
            }
            None => false,
        }
    }

    /// What the memory says for a flow to `addr` starting now (decays and touches its entry).
    pub fn recall(&mut self, addr: IpAddr, settings: &MemorySettings, now: Instant) -> Recall {
        let prefix = Prefix::of(addr, settings);
        let Some(entry) = self.entries.get_mut(&prefix) else {
            return Recall { prefix, algorithm: None, score: 0.0 };
        };
        entry.decay(now, settings.half_life());
        if entry.scores.is_empty() {
            self.drop_entry(&prefix);
            return Recall { prefix, algorithm: None, score: 0.0 };
        }
        let (algorithm, score) = entry.top().map(|(a, s)| (Some(a.to_string()), s)).expect("scores not empty");
        let old = entry.used;
        let used = self.touch(prefix, Some(old));
        self.entries.get_mut(&prefix).expect("just found").used = used;
        Recall { prefix, algorithm, score }
    }

    /// A flow to `addr` ended on `algorithm` after a decision: add 1 to its score.
    pub fn vote(&mut self, addr: IpAddr, algorithm: &str, settings: &MemorySettings, now: Instant) -> Prefix {
        let prefix = Prefix::of(addr, settings);
        let old = match self.entries.get_mut(&prefix) {
            Some(entry) => {
                entry.decay(now, settings.half_life());
                match entry.scores.iter_mut().find(|(a, _)| a == algorithm) {
                    Some((_, s)) => *s += 1.0,
                    None => entry.scores.push((algorithm.to_string(), 1.0)),
                }
                Some(entry.used)
            }
            None => {
                while self.entries.len() >= settings.capacity.max(1) {
                    let (_, lru) = self.order.pop_first().expect("order lists every entry");
                    self.entries.remove(&lru);
                }
                let entry = Entry { scores: vec![(algorithm.to_string(), 1.0)], updated: now, used: 0 };
                self.entries.insert(prefix, entry);
                None
            }
        };
        let used = self.touch(prefix, old);
        self.entries.get_mut(&prefix).expect("present").used = used;
        prefix
    }

    /// Every prefix with its scores decayed to `now` (forgotten scores and empty prefixes
    /// left out), ordered by prefix. Reads only.
    pub fn list(&self, settings: &MemorySettings, now: Instant) -> Vec<MemorySnapshot> {
        let half_life = settings.half_life();
        let mut out: Vec<MemorySnapshot> = self
            .entries
            .iter()
            .filter_map(|(prefix, e)| {
                let age = now.saturating_duration_since(e.updated);
                let factor = decay_factor(age, half_life);
                let mut scores: Vec<(String, f64)> = e
                    .scores
                    .iter()
                    .map(|(a, s)| (a.clone(), s * factor))
                    .filter(|(_, s)| *s >= FORGET_BELOW)
                    .collect();
                scores.sort_by(|a, b| b.1.total_cmp(&a.1));
                (!scores.is_empty()).then_some(MemorySnapshot { prefix: *prefix, scores, age })
            })
            .collect();
        out.sort_by_key(|s| s.prefix);
        out
    }

    /// Forget every prefix (`None`) or every prefix inside `within`; returns those forgotten.
    pub fn clear(&mut self, within: Option<&Prefix>) -> Vec<Prefix> {
        let mut gone: Vec<Prefix> =
            self.entries.keys().filter(|p| within.is_none_or(|w| p.within(w))).copied().collect();
        gone.sort();
        for p in &gone {
            self.drop_entry(p);
        }
        gone
    }
}

// ---- A flow's start ------------------------------------------------------------------------

/// Where a new flow's algorithm came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartFrom {
    /// An operator's pin.
    Pinned,
    /// The datapath asked for a known algorithm.
    Datapath,
    /// The destination memory.
    Memory,
    /// The policy's `initial`.
    Initial,
    /// No policy: `--algorithm`.
    Algorithm,
}

impl StartFrom {
    pub fn as_str(self) -> &'static str {
        match self {
            StartFrom::Pinned => "pinned",
            StartFrom::Datapath => "datapath",
            StartFrom::Memory => "memory",
            StartFrom::Initial => "initial",
            StartFrom::Algorithm => "algorithm",
        }
    }
}

/// A new flow's algorithm and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Start {
    pub from: StartFrom,
    pub spec: String,
    /// One line: why this algorithm.
    pub reason: String,
    /// What the memory held for the flow's destination, when it was consulted.
    pub recall: Option<Recall>,
}

impl Start {
    /// A start without the memory.
    pub fn plain(from: StartFrom, spec: &str, reason: impl Into<String>) -> Start {
        Start { from, spec: spec.to_string(), reason: reason.into(), recall: None }
    }

    /// For the events file: `start`, `start_reason` and, when consulted, `memory`
    /// (`prefix`, `algorithm` or null, `score`).
    pub fn to_json(&self) -> serde_json::Value {
        let memory = self.recall.as_ref().map(|r| {
            serde_json::json!({"prefix": r.prefix.to_string(), "algorithm": r.algorithm, "score": r.score})
        });
        serde_json::json!({"start": self.from.as_str(), "start_reason": self.reason, "memory": memory})
    }
}

/// Choose between the remembered algorithm and the policy's `initial`. `choosable` says
/// whether the policy may choose a spec.
pub fn choose(recall: Recall, settings: &MemorySettings, initial: &str, choosable: impl Fn(&str) -> bool) -> Start {
    let prefix = recall.prefix;
    let (from, spec, reason) = match recall.algorithm.as_deref() {
        None => (StartFrom::Initial, initial, format!("nothing remembered for {prefix}")),
        Some(a) if recall.score < settings.min_score => (
            StartFrom::Initial,
            initial,
            // Rounded down, so that a score just below the threshold does not print as equal.
            format!("{prefix} remembers {a} with score {:.2}, below min_score {}", (recall.score * 100.0).floor() / 100.0, settings.min_score),
        ),
        Some(a) if !choosable(a) => (
            StartFrom::Initial,
            initial,
            format!("{prefix} remembers {a} (score {:.2}), which the policy does not choose", recall.score),
        ),
        Some(a) => (
            StartFrom::Memory,
            a,
            format!("{prefix} remembers {a} with score {:.2} (min_score {})", recall.score, settings.min_score),
        ),
    };
    Start { from, spec: spec.to_string(), reason, recall: Some(recall) }
}

// ---- Shared by the agent's threads ---------------------------------------------------------

/// The agent's memory: the table and the agent's own off switch, shared by the datapath threads
/// (a start at CREATE, a vote at close) and the operator interface. Each call holds the lock
/// for one table operation.
#[derive(Debug, Default)]
pub struct DestinationMemory {
    table: Mutex<MemoryTable>,
    /// `--no-destination-memory`.
    off: AtomicBool,
}

/// Whether the memory works under a policy's settings, and why not.
pub fn state(off_by_agent: bool, settings: Option<&MemorySettings>) -> Result<(), &'static str> {
    match settings {
        _ if off_by_agent => Err("switched off by the agent's --no-destination-memory"),
        None => Err("no policy is loaded (flows start on --algorithm)"),
        Some(s) if !s.enabled => Err("switched off by the policy ([memory] enabled = false)"),
        Some(_) => Ok(()),
    }
}

impl DestinationMemory {
    /// `--no-destination-memory`: no starts from the memory and no votes, whatever the policy.
    pub fn switch_off(&self) {
        self.off.store(true, Ordering::Relaxed);
    }

    /// Ok if the memory works under `settings` (the policy's), else why not.
    pub fn state(&self, settings: Option<&MemorySettings>) -> Result<(), &'static str> {
        state(self.off.load(Ordering::Relaxed), settings)
    }

    fn table(&self) -> MutexGuard<'_, MemoryTable> {
        self.table.lock().expect("destination memory poisoned")
    }

    /// The algorithm a policy flow to `addr` starts on: the remembered one or `initial`.
    pub fn start(&self, addr: IpAddr, settings: &MemorySettings, initial: &str, choosable: impl Fn(&str) -> bool) -> Start {
        if let Err(why) = self.state(Some(settings)) {
            return Start::plain(StartFrom::Initial, initial, format!("destination memory {why}"));
        }
        let recall = self.table().recall(addr, settings, Instant::now());
        choose(recall, settings, initial, choosable)
    }

    /// A flow to `addr` ended on `algorithm` after a decision. `None` if the memory is off.
    pub fn vote(&self, addr: IpAddr, algorithm: &str, settings: &MemorySettings) -> Option<Prefix> {
        self.state(Some(settings)).ok()?;
        Some(self.table().vote(addr, algorithm, settings, Instant::now()))
    }

    pub fn list(&self, settings: &MemorySettings) -> Vec<MemorySnapshot> {
        self.table().list(settings, Instant::now())
    }

    pub fn clear(&self, within: Option<&Prefix>) -> Vec<Prefix> {
        self.table().clear(within)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    fn addr(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn prefix(s: &str) -> Prefix {
        let (a, l) = s.split_once('/').unwrap();
        Prefix { network: addr(a), len: l.parse().unwrap() }
    }

    fn settings() -> MemorySettings {
        MemorySettings::default()
    }

    fn read(text: &str) -> (MemorySettings, Vec<String>) {
        let table: toml::Table = toml::from_str(text).unwrap();
        let mut errors = Vec::new();
        let s = MemorySettings::read(table.get("memory"), &mut errors);
        errors.extend(s.check());
        (s, errors)
    }

    #[test]
    fn destinations_are_grouped_by_their_prefix_in_each_family() {
        let s = settings();
        assert_eq!(Prefix::of(addr("10.1.2.3"), &s), prefix("10.1.2.0/24"));
        assert_eq!(Prefix::of(addr("10.1.2.255"), &s), prefix("10.1.2.0/24"));
        assert_ne!(Prefix::of(addr("10.1.3.1"), &s), prefix("10.1.2.0/24"));
        assert_eq!(Prefix::of(addr("2001:db8:1:2:aa::1"), &s), prefix("2001:db8:1:2::/64"));
        assert_eq!(Prefix::of(addr("::ffff:10.1.2.3"), &s), prefix("10.1.2.0/24"), "v4-mapped is v4");
        assert_eq!(Prefix::of(addr("::a01:203"), &s), prefix("::/64"), "v4-compatible is not v4-mapped");
        let s = MemorySettings { prefix_v4: 0, prefix_v6: 128, ..settings() };
        assert_eq!(Prefix::of(addr("203.0.113.9"), &s), prefix("0.0.0.0/0"));
        assert_eq!(Prefix::of(addr("2001:db8::9"), &s), prefix("2001:db8::9/128"));
        let s = MemorySettings { prefix_v4: 32, prefix_v6: 0, ..settings() };
        assert_eq!(Prefix::of(addr("203.0.113.9"), &s), prefix("203.0.113.9/32"));
        assert_eq!(Prefix::of(addr("2001:db8::9"), &s), prefix("::/0"));
        assert_eq!(prefix("10.1.2.0/24").to_string(), "10.1.2.0/24");
    }

    #[test]
    fn a_prefix_lies_within_itself_and_wider_prefixes_of_its_family_only() {
        let p = prefix("10.1.2.0/24");
        assert!(p.within(&p));
        assert!(p.within(&prefix("10.0.0.0/8")));
        assert!(p.within(&prefix("0.0.0.0/0")));
        assert!(!p.within(&prefix("10.1.2.0/25")), "narrower");
        assert!(!p.within(&prefix("10.2.0.0/16")));
        assert!(!p.within(&prefix("::/0")), "other family");
    }

    #[test]
    fn votes_decay_by_half_every_half_life() {
        let s = MemorySettings { half_life_s: 600.0, ..settings() };
        let t0 = Instant::now();
        let mut m = MemoryTable::default();
        m.vote(addr("10.1.2.3"), "bbr", &s, t0);
        m.vote(addr("10.1.2.4"), "bbr", &s, t0);
        let r = m.recall(addr("10.1.2.99"), &s, t0);
        assert_eq!((r.algorithm.as_deref(), r.score), (Some("bbr"), 2.0));
        let r = m.recall(addr("10.1.2.99"), &s, t0 + 10 * MIN);
        assert!((r.score - 1.0).abs() < 1e-9, "one half-life: {}", r.score);
        let r = m.recall(addr("10.1.2.99"), &s, t0 + 30 * MIN);
        assert!((r.score - 0.25).abs() < 1e-9, "three half-lives: {}", r.score);
        // Decay is applied at each touch from the last one: the same as in one step.
        let r = m.recall(addr("10.1.2.99"), &s, t0 + 30 * MIN);
        assert!((r.score - 0.25).abs() < 1e-9, "no time passed: {}", r.score);
        // A vote adds 1 to the decayed score.
        m.vote(addr("10.1.2.5"), "bbr", &s, t0 + 40 * MIN);
        let r = m.recall(addr("10.1.2.5"), &s, t0 + 40 * MIN);
        assert!((r.score - 1.125).abs() < 1e-9, "{}", r.score);
    }

    #[test]
    fn a_vote_is_forgotten_after_about_seven_half_lives() {
        let s = MemorySettings { half_life_s: 1.0, ..settings() };
        let t0 = Instant::now();
        let mut m = MemoryTable::default();
        m.vote(addr("10.0.0.1"), "cubic", &s, t0);
        assert_eq!(m.list(&s, t0 + Duration::from_secs(6)).len(), 1, "0.5^6 = 0.016 is kept");
        assert!(m.list(&s, t0 + Duration::from_secs(7)).is_empty(), "0.5^7 = 0.008 is not listed");
        assert_eq!(m.len(), 1, "listing changes nothing");
        let r = m.recall(addr("10.0.0.1"), &s, t0 + Duration::from_secs(7));
        assert_eq!((r.algorithm, r.score), (None, 0.0));
        assert_eq!(m.len(), 0, "a touched entry with nothing left is dropped");
    }

    #[test]
    fn the_top_score_decides_and_ties_go_to_the_first_voted() {
        let s = settings();
        let t0 = Instant::now();
        let mut m = MemoryTable::default();
        m.vote(addr("10.0.0.1"), "cubic", &s, t0);
        m.vote(addr("10.0.0.1"), "bbr", &s, t0);
        assert_eq!(m.recall(addr("10.0.0.1"), &s, t0).algorithm.as_deref(), Some("cubic"), "tie");
        m.vote(addr("10.0.0.2"), "bbr", &s, t0);
        let r = m.recall(addr("10.0.0.1"), &s, t0);
        assert_eq!((r.algorithm.as_deref(), r.score), (Some("bbr"), 2.0));
        let listed = m.list(&s, t0);
        assert_eq!(listed[0].scores, [("bbr".to_string(), 2.0), ("cubic".to_string(), 1.0)], "highest first");
    }

    #[test]
    fn a_flow_starts_on_memory_only_at_or_above_the_threshold_and_if_the_policy_chooses_it() {
        let s = MemorySettings { min_score: 1.0, half_life_s: 600.0, ..settings() };
        let any = |_: &str| true;
        let recall = |algorithm: Option<&str>, score: f64| Recall {
            prefix: prefix("10.1.2.0/24"),
            algorithm: algorithm.map(str::to_string),
            score,
        };
        let start = choose(recall(Some("bbr"), 1.0), &s, "cubic", any);
        assert_eq!((start.from, start.spec.as_str()), (StartFrom::Memory, "bbr"));
        assert_eq!(start.reason, "10.1.2.0/24 remembers bbr with score 1.00 (min_score 1)");
        let start = choose(recall(Some("bbr"), 0.999), &s, "cubic", any);
        assert_eq!((start.from, start.spec.as_str()), (StartFrom::Initial, "cubic"));
        assert_eq!(start.reason, "10.1.2.0/24 remembers bbr with score 0.99, below min_score 1");
        let start = choose(recall(None, 0.0), &s, "cubic", any);
        assert_eq!((start.from, start.reason.as_str()), (StartFrom::Initial, "nothing remembered for 10.1.2.0/24"));
        let start = choose(recall(Some("vegas"), 3.0), &s, "cubic", |a| a != "vegas");
        assert_eq!((start.from, start.spec.as_str()), (StartFrom::Initial, "cubic"));
        assert!(start.reason.contains("which the policy does not choose"), "{}", start.reason);
        let json = choose(recall(Some("bbr"), 2.0), &s, "cubic", any).to_json();
        assert_eq!(json["start"], "memory");
        assert_eq!(json["memory"]["prefix"], "10.1.2.0/24");
        assert_eq!(json["memory"]["score"], 2.0);
        let plain = Start::plain(StartFrom::Pinned, "vegas", "pinned").to_json();
        assert!(plain["memory"].is_null());
        // A single vote is 1.0 only at its own instant: the default needs two agreeing flows.
        let t0 = Instant::now();
        let mut m = MemoryTable::default();
        m.vote(addr("10.1.2.3"), "bbr", &s, t0);
        let one = m.recall(addr("10.1.2.3"), &s, t0 + Duration::from_millis(1));
        assert_eq!(choose(one, &s, "cubic", any).from, StartFrom::Initial);
        m.vote(addr("10.1.2.3"), "bbr", &s, t0 + Duration::from_millis(2));
        let two = m.recall(addr("10.1.2.3"), &s, t0 + 9 * MIN);
        assert_eq!(choose(two, &s, "cubic", any).from, StartFrom::Memory);
    }

    #[test]
    fn the_table_holds_capacity_prefixes_and_evicts_the_least_recently_used() {
        let s = MemorySettings { capacity: 3, ..settings() };
        let t0 = Instant::now();
        let mut m = MemoryTable::default();
        for net in ["10.0.1.1", "10.0.2.1", "10.0.3.1"] {
            m.vote(addr(net), "bbr", &s, t0);
        }
        // A start for 10.0.1.0/24 uses it: 10.0.2.0/24 is now the least recently used.
        assert!(m.recall(addr("10.0.1.9"), &s, t0).algorithm.is_some());
        m.vote(addr("10.0.4.1"), "cubic", &s, t0);
        let listed: Vec<String> = m.list(&s, t0).iter().map(|e| e.prefix.to_string()).collect();
        assert_eq!(listed, ["10.0.1.0/24", "10.0.3.0/24", "10.0.4.0/24"]);
        // A vote for a remembered prefix evicts nothing.
        m.vote(addr("10.0.3.7"), "cubic", &s, t0);
        assert_eq!(m.len(), 3);
        // A start for an unknown prefix remembers nothing new.
        assert_eq!(m.recall(addr("10.9.9.9"), &s, t0).algorithm, None);
        assert_eq!(m.len(), 3);
        // A smaller capacity applies at the next new prefix: down to it, oldest first.
        let small = MemorySettings { capacity: 1, ..s };
        m.vote(addr("10.0.5.1"), "reno", &small, t0);
        let listed: Vec<String> = m.list(&s, t0).iter().map(|e| e.prefix.to_string()).collect();
        assert_eq!(listed, ["10.0.5.0/24"]);
        assert_eq!(m.order.len(), 1, "the recency order holds exactly the entries");
    }

    #[test]
    fn clearing_forgets_everything_or_the_prefixes_inside_one() {
        let s = settings();
        let t0 = Instant::now();
        let mut m = MemoryTable::default();
        for a in ["10.1.2.3", "10.1.3.3", "10.2.0.1", "2001:db8::1"] {
            m.vote(addr(a), "bbr", &s, t0);
        }
        assert_eq!(m.clear(Some(&prefix("10.1.0.0/16"))), [prefix("10.1.2.0/24"), prefix("10.1.3.0/24")]);
        assert_eq!(m.clear(Some(&prefix("10.1.0.0/16"))), []);
        assert_eq!(m.clear(Some(&prefix("10.2.0.1/32"))), [], "an address inside a prefix does not cover it");
        assert_eq!(m.clear(None), [prefix("10.2.0.0/24"), prefix("2001:db8::/64")]);
        assert_eq!((m.len(), m.order.len()), (0, 0));
    }

    #[test]
    fn ages_are_since_the_last_touch() {
        let s = settings();
        let t0 = Instant::now();
        let mut m = MemoryTable::default();
        m.vote(addr("10.0.0.1"), "bbr", &s, t0);
        assert_eq!(m.list(&s, t0 + MIN)[0].age, MIN);
        m.recall(addr("10.0.0.1"), &s, t0 + 2 * MIN);
        assert_eq!(m.list(&s, t0 + 3 * MIN)[0].age, MIN);
    }

    #[test]
    fn settings_default_and_read_from_memory_table() {
        assert_eq!(read("").0, MemorySettings::default());
        let (s, errors) = read(
            "[memory]\nenabled = false\nprefix_v4 = 16\nprefix_v6 = 48\nhalf_life_s = 30\nmin_score = 0.5\ncapacity = 10\n",
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            s,
            MemorySettings { enabled: false, prefix_v4: 16, prefix_v6: 48, half_life_s: 30.0, min_score: 0.5, capacity: 10 }
        );
        assert_eq!(s.to_string(), "off");
        assert_eq!(
            MemorySettings::default().to_string(),
            "by /24 (IPv4) and /64 (IPv6) destination prefix, half-life 600 s, start at score >= 1, up to 4096 prefixes"
        );
    }

    #[test]
    fn every_bad_memory_setting_is_reported() {
        let (_, errors) = read(
            "[memory]\nenabled = 1\nprefix_v4 = 33\nprefix_v6 = 300\nhalf_life_s = 0\nmin_score = -1\ncapacity = 0\ncolour = 1\n",
        );
        for part in [
            "[memory] `enabled` must be true or false, found integer 1",
            "[memory] prefix_v4 = 33: must be between 0 and 32",
            "[memory] prefix_v6 = 300: must be a prefix length",
            "[memory] half_life_s = 0: must be above 0",
            "[memory] min_score = -1: must be a finite number above 0",
            "[memory] capacity = 0: must be between 1 and 1048576",
            "[memory] unknown field `colour` (allowed: enabled, prefix_v4, prefix_v6, half_life_s, min_score, capacity)",
        ] {
            assert!(errors.iter().any(|e| e == part || e.starts_with(part)), "{errors:#?} lacks {part:?}");
        }
        assert_eq!(errors.len(), 7, "{errors:#?}");
        let (_, errors) = read("memory = 3\n");
        assert_eq!(errors, ["`memory` must be a table ([memory]), found integer 3"]);
        let (_, errors) = read("[memory]\nhalf_life_s = \"10m\"\ncapacity = -4\n");
        assert!(errors.contains(&"[memory] `half_life_s` must be a number, found string \"10m\"".to_string()), "{errors:?}");
        assert!(errors.contains(&"[memory] capacity = -4: must be between 1 and 1048576".to_string()), "{errors:?}");
    }

    #[test]
    fn settings_are_overridden_one_by_one() {
        let mut s = settings();
        s.set("enabled", "false").unwrap();
        s.set("prefix_v4", "20").unwrap();
        s.set("half_life_s", "1.5").unwrap();
        s.set("capacity", "8").unwrap();
        assert_eq!((s.enabled, s.prefix_v4, s.half_life_s, s.capacity), (false, 20, 1.5, 8));
        assert_eq!(s.set("enabled", "no").unwrap_err(), "\"no\" is not true or false");
        assert_eq!(s.set("prefix_v6", "x").unwrap_err(), "\"x\" is not a whole number");
        assert!(s.set("size", "1").unwrap_err().starts_with("no setting memory.size;"));
        s.set("prefix_v4", "40").unwrap();
        assert_eq!(s.check(), ["[memory] prefix_v4 = 40: must be between 0 and 32"], "ranges are checked after overrides");
    }

    #[test]
    fn the_memory_switched_off_by_the_agent_neither_starts_nor_votes() {
        let s = settings();
        let m = DestinationMemory::default();
        for _ in 0..2 {
            assert!(m.vote(addr("10.0.0.1"), "bbr", &s).is_some());
        }
        assert_eq!(m.start(addr("10.0.0.2"), &s, "cubic", |_| true).from, StartFrom::Memory);
        let off = MemorySettings { enabled: false, ..settings() };
        let start = m.start(addr("10.0.0.2"), &off, "cubic", |_| true);
        assert_eq!((start.from, start.reason.as_str()), (StartFrom::Initial, "destination memory switched off by the policy ([memory] enabled = false)"));
        assert!(m.vote(addr("10.0.0.1"), "bbr", &off).is_none());
        m.switch_off();
        let start = m.start(addr("10.0.0.2"), &s, "cubic", |_| true);
        assert_eq!((start.from, start.spec.as_str()), (StartFrom::Initial, "cubic"));
        assert!(start.reason.contains("--no-destination-memory"), "{}", start.reason);
        assert!(m.vote(addr("10.0.0.1"), "bbr", &s).is_none());
        assert_eq!(m.state(None), Err("switched off by the agent's --no-destination-memory"));
        assert_eq!(m.list(&s).len(), 1, "what was remembered is still listed");
        assert_eq!(state(false, None), Err("no policy is loaded (flows start on --algorithm)"));
    }

    #[test]
    fn a_policy_reports_memory_problems_with_its_others_and_overrides_them_from_the_spec() {
        use crate::selector::policy::Policy;
        let base = "name = \"m\"\ninitial = \"cubic\"\n[window]\nkind = \"first\"\nsamples = 2\n[[rule]]\nuse = \"bbr\"\n";
        let p = Policy::parse(base, "m.toml").unwrap();
        assert_eq!(p.memory(), &MemorySettings::default(), "no [memory]: the defaults, on");
        assert!(p.to_string().contains("  memory: by /24 (IPv4)"), "{p}");
        assert_eq!(p.to_json()["memory"]["half_life_s"], 600.0);
        let bad = base.replace("initial = \"cubic\"", "initial = \"nope\"") + "[memory]\nprefix_v4 = 40\nsize = 3\n";
        let e = format!("{:#}", Policy::parse(&bad, "m.toml").unwrap_err());
        assert!(e.starts_with("policy m.toml: 3 problems:\n"), "{e}");
        for part in ["initial = \"nope\"", "[memory] prefix_v4 = 40: must be between 0 and 32", "[memory] unknown field `size`"] {
            assert!(e.contains(part), "{e:?} lacks {part:?}");
        }
        let dir = std::env::temp_dir().join(format!("ccswitch-memory-spec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("m.toml");
        std::fs::write(&file, base).unwrap();
        let spec = format!("{}:memory.enabled=false,memory.min_score=0.5", file.display());
        let p = Policy::load(&spec).unwrap();
        assert_eq!((p.memory().enabled, p.memory().min_score), (false, 0.5));
        assert!(p.to_string().contains("  memory: off"), "{p}");
        let e = format!("{:#}", Policy::load(&format!("{}:memory.capacity=0", file.display())).unwrap_err());
        assert!(e.contains("[memory] capacity = 0: must be between 1"), "{e}");
        let e = format!("{:#}", Policy::load(&format!("{}:memory.size=1", file.display())).unwrap_err());
        assert!(e.contains("no setting memory.size"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_readme_documents_every_memory_setting() {
        let readme = include_str!("../../README.md");
        let start = readme.find("### Policy files").expect("README.md has a \"### Policy files\" section");
        let section = &readme[start..];
        let section = &section[..section[4..].find("\n### ").map_or(section.len(), |i| i + 4)];
        assert!(section.contains("[memory]"), "README's policy section lacks [memory]");
        for field in FIELDS {
            assert!(section.contains(&format!("\n{field} = ")), "README's policy section does not document [memory] {field}");
            assert!(section.contains(&format!("`memory.{field}`")), "README's policy section does not list memory.{field}");
        }
    }
}
