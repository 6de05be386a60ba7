//! The guard around Python algorithms: one Python callback can neither stall the agent nor
//! set a window the datapath should not apply.
//!
//! **Time.** Every callback runs on one Python worker thread ([`Worker`]); the agent's thread
//! hands it the job and waits at most the budget ([`budget`], `--python-budget-ms`, default
//! [`DEFAULT_BUDGET`]). The agent's thread never takes the GIL, so it never waits on it. A
//! callback that runs past the budget is abandoned for that report (the flow keeps its window,
//! the report is answered at once, `python_timeouts` counts it) and interrupted: an interrupter
//! thread takes the GIL and raises [`CallbackTimeout`] in the worker
//! (`PyThreadState_SetAsyncExc`), which ends a pure-Python loop at its next bytecode check, and
//! raises it again every [`INTERRUPT_RETRY`] while the callback runs on (one that catches it, or
//! one blocked in C code, which no exception reaches until it returns). While an abandoned
//! callback still runs, the reports of every Python flow are answered without calling Python
//! (`python_skipped`); Rust-algorithm flows never touch the worker.
//!
//! A flow whose callback ran over is **suspended**: its reports are answered with its window
//! kept, without calling Python, for [`FIRST_SUSPENSION`], doubling with each consecutive
//! overrun up to [`LONGEST_SUSPENSION`], and reset by a callback that returns in time. An
//! algorithm stuck in a loop would otherwise cost every other flow of the agent one budget per
//! report it gets; suspended, it costs them one budget per suspension (20 ms per 10 s once
//! the suspension has grown).
//!
//! Why 20 ms: a callback of the simple API takes 1–20 µs, so it is a thousand times a slow one,
//! and leaves room for what a sound callback sometimes does: its first exception's traceback
//! read from disk, a lazy import, a garbage collection, or the worker thread preempted on a
//! loaded machine (with 5 ms, one transfer of an always-raising algorithm in `tests/python/
//! test_run_failures.py` had 5 of its 27 reports answered without the callback, an overrun and
//! its suspension, on this 2-vCPU machine). An overrun is
//! costly beyond its report: the callback is interrupted half-way, so the algorithm's own
//! state may be torn. And 20 ms is 25× below the datapaths' default agent timeout (500 ms), so
//! an abandoned report is still answered long before any flow falls back.
//!
//! **Values.** A window or rate a callback sets is checked ([`check_window`], [`check_rate`]):
//! NaN, infinite, negative, zero, below 2 segments or beyond what TCP can express is refused.
//! The callback's whole effect on the flow is then discarded, as when it raises (the flow
//! keeps the window it had), and `python_bad_values` counts it.
//!
//! Exceptions, refusals, timeouts and skipped reports are counted per flow ([`PythonCounts`]),
//! claimed by the flow's connection after each of its calls ([`take_counts`]) for the events
//! file, and logged per flow in full a few times, then one line in [`LOG_EVERY`].
//!
//! The shape: [`FlowGuard::call`] runs one callback of one flow under the budget and turns
//! what it returned ([`Called`]) into the value to apply or nothing.

use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use tracing::{error, warn};

/// How long the agent waits for one callback by default (see the module's documentation).
pub const DEFAULT_BUDGET: Duration = Duration::from_millis(20);
/// How long a flow's callbacks are skipped after its first overrun; doubles with each
/// consecutive one.
pub const FIRST_SUSPENSION: Duration = Duration::from_millis(200);
pub const LONGEST_SUSPENSION: Duration = Duration::from_secs(10);
/// How long loading a Python algorithm (its import and constructor, once per flow) may take.
pub const LOAD_BUDGET: Duration = Duration::from_secs(5);
/// An abandoned callback still running is interrupted again this often.
pub const INTERRUPT_RETRY: Duration = Duration::from_millis(100);

/// The largest window TCP can express: a 16-bit window field scaled by at most 2^14 (RFC
/// 7323 §2.3). The ovs datapath enforces a window through that field, and no sender can use
/// more; a larger value is a unit or overflow mistake.
pub const MAX_WINDOW_BYTES: u64 = 65_535 << 14;
/// The smallest window, in segments: Linux's floor, and the kernel datapath's
/// (`MIN_CWND_PKTS`); below it a flow cannot get the ACK clock going after a loss.
pub const MIN_WINDOW_SEGMENTS: u64 = 2;
/// The fastest pacing rate taken: 1 TB/s (8 Tbit/s), a hundred times the fastest NIC; beyond
/// it a rate is a unit mistake (bits for bytes, µs for s) or an overflow.
pub const MAX_RATE_BYTES_PER_S: u64 = 1_000_000_000_000;

/// Refusals and errors logged in full per flow and kind, before one line per [`LOG_EVERY`].
pub const LOGGED_IN_FULL: u64 = 5;
pub const LOG_EVERY: u64 = 1000;

static BUDGET_NS: AtomicU64 = AtomicU64::new(DEFAULT_BUDGET.as_nanos() as u64);
/// Call Python on the agent's own thread, unguarded (`--python-unguarded`, for measuring
/// what the guard costs).
static UNGUARDED: AtomicBool = AtomicBool::new(false);

/// The time a callback gets (`--python-budget-ms`).
pub fn budget() -> Duration {
    Duration::from_nanos(BUDGET_NS.load(Ordering::Relaxed))
}

pub fn set_budget(budget: Duration) {
    BUDGET_NS.store(budget.as_nanos().clamp(1, u128::from(u64::MAX)) as u64, Ordering::Relaxed);
}

pub fn set_unguarded(unguarded: bool) {
    UNGUARDED.store(unguarded, Ordering::Relaxed);
}

// ---- values

/// A window a callback set, in bytes, if the datapath may apply it: a finite number from
/// [`MIN_WINDOW_SEGMENTS`] segments to [`MAX_WINDOW_BYTES`] (rounded to a byte).
pub fn check_window(bytes: f64, mss_bytes: u64) -> Result<u64, String> {
    window_within(bytes, mss_bytes, MIN_WINDOW_SEGMENTS)
}

/// A window a full-API callback set (`update_field("Cwnd", ...)`): as [`check_window`], but
/// from one segment, the window Linux and CCP's Reno set after a retransmission timeout. The
/// datapath's own program runs from there, and the datapaths raise a window below their
/// floor to it.
pub fn check_program_window(bytes: f64, mss_bytes: u64) -> Result<u64, String> {
    window_within(bytes, mss_bytes, 1)
}

fn window_within(bytes: f64, mss_bytes: u64, min_segments: u64) -> Result<u64, String> {
    let min = min_segments * mss_bytes.max(1);
    if bytes.is_finite() && bytes.round() >= min as f64 && bytes.round() <= MAX_WINDOW_BYTES as f64 {
        return Ok(bytes.round() as u64);
    }
    let segments = if min_segments == 1 { "1 segment".to_string() } else { format!("{min_segments} segments") };
    Err(format!(
        "cwnd = {bytes}: a window is a number of bytes from {segments} ({min}) to {MAX_WINDOW_BYTES} (the largest \
         TCP window)"
    ))
}

/// A pacing rate a callback set, bytes/s, if the datapath may apply it: a finite number from
/// one smallest window per second (slower, a flow waits out its retransmission timer between
/// windows) to [`MAX_RATE_BYTES_PER_S`]. Zero is refused too: `None` stops pacing.
pub fn check_rate(bytes_per_s: f64, mss_bytes: u64) -> Result<u64, String> {
    let min = MIN_WINDOW_SEGMENTS * mss_bytes.max(1);
    if bytes_per_s.is_finite() && bytes_per_s.round() >= min as f64 && bytes_per_s.round() <= MAX_RATE_BYTES_PER_S as f64 {
        return Ok(bytes_per_s.round() as u64);
    }
    Err(format!(
        "rate = {bytes_per_s}: a pacing rate is a number of bytes/s from {min} (2 segments per second) \
         to {MAX_RATE_BYTES_PER_S}, or None to stop pacing"
    ))
}

// ---- counts

/// What went wrong with a flow's callbacks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PythonCounts {
    /// Callbacks that raised (the events file's `on_report_errors`).
    pub errors: u64,
    /// Callbacks abandoned past the budget.
    pub timeouts: u64,
    /// Reports answered without calling Python: the flow was suspended after an overrun, or
    /// the worker still ran an abandoned callback (of this flow or another).
    pub skipped: u64,
    /// Callbacks whose window or rate was refused.
    pub bad_values: u64,
}

impl PythonCounts {
    pub fn is_zero(&self) -> bool {
        *self == Self::default()
    }
}

impl std::ops::AddAssign for PythonCounts {
    fn add_assign(&mut self, o: Self) {
        self.errors += o.errors;
        self.timeouts += o.timeouts;
        self.skipped += o.skipped;
        self.bad_values += o.bad_values;
    }
}

thread_local! {
    /// Counted on this thread and not yet claimed by [`take_counts`].
    static UNCLAIMED: Cell<PythonCounts> = const { Cell::new(PythonCounts { errors: 0, timeouts: 0, skipped: 0, bad_values: 0 }) };
}

/// What the callbacks run from this thread counted since the previous call. The agent handles
/// a flow's report on the datapath's thread and takes these right after, with no other
/// algorithm call in between, so what it takes here after a report belongs to that report's
/// flow.
pub fn take_counts() -> PythonCounts {
    UNCLAIMED.with(|c| c.replace(PythonCounts::default()))
}

pub(crate) fn count(add: PythonCounts) {
    UNCLAIMED.with(|c| {
        let mut n = c.get();
        n += add;
        c.set(n);
    });
}

/// How the `n`th event of one kind of a flow (1-based) is logged.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum LogAs {
    /// In full (with a traceback, where there is one).
    Full,
    /// In full, and a line saying that further ones are suppressed but for one in [`LOG_EVERY`].
    FullThenThinned,
    /// One line with the count so far.
    Count,
    /// Not at all (still counted).
    Quiet,
}

pub(crate) fn log_as(n: u64) -> LogAs {
    match n {
        _ if n < LOGGED_IN_FULL => LogAs::Full,
        _ if n == LOGGED_IN_FULL => LogAs::FullThenThinned,
        _ if n % LOG_EVERY == 0 => LogAs::Count,
        _ => LogAs::Quiet,
    }
}

/// Log the `n`th event of one `kind` of a flow's `callback` (1-based) as [`log_as`] says: `full` (whose
/// first line says what happened; a traceback may follow, so the count goes before it) the
/// first few times, then `count` once per [`LOG_EVERY`]. `field` is the events file's name
/// for the count.
fn log_thinned(
    who: &dyn fmt::Display,
    callback: &str,
    n: u64,
    kind: &str,
    field: &str,
    full: impl FnOnce() -> String,
    count: impl FnOnce() -> String,
) {
    let how = log_as(n);
    match how {
        LogAs::Full | LogAs::FullThenThinned => {
            let text = full();
            let (first, rest) = text.split_once('\n').map_or((text.as_str(), None), |(f, r)| (f, Some(r)));
            match rest {
                Some(rest) => error!("{who}: {first} ({kind} {n} of this flow)\n{rest}"),
                None => error!("{who}: {first} ({kind} {n} of this flow)"),
            }
        }
        LogAs::Count => error!("{who}: {} ({kind} {n} of this flow)", count()),
        LogAs::Quiet => {}
    }
    if how == LogAs::FullThenThinned {
        error!(
            "{who}: further {callback} {kind}s of this flow suppressed (one line per {LOG_EVERY}; every one is counted in \
             the events file as {field})"
        );
    }
}

/// What a callback's job reports back, from the first value it set that the guard refused
/// (if any: the call is discarded even if the algorithm caught the ValueError), what the
/// callback returned or raised, and what to apply if all went well.
pub fn outcome<T, R>(py: Python<'_>, refused: Option<String>, result: PyResult<T>, apply: impl FnOnce(T) -> R) -> Called<R> {
    match (refused, result) {
        (Some(why), Err(e)) => Called::Refused(format!("{why}\n{}", crate::python::describe(py, &e))),
        (Some(why), Ok(_)) => {
            Called::Refused(format!("{why} (the algorithm caught the ValueError; the call is discarded all the same)"))
        }
        (None, Err(e)) => Called::Raised(crate::python::describe(py, &e)),
        (None, Ok(t)) => Called::Returned(apply(t)),
    }
}

// ---- one flow

/// What a callback's job reports back from the worker.
pub enum Called<R> {
    /// It returned, and what it set is fine.
    Returned(R),
    /// It raised: the exception with its traceback.
    Raised(String),
    /// It set a value [`check_window`] or [`check_rate`] refuses: why.
    Refused(String),
}

/// One flow's side of the guard: its counts and its suspension.
#[derive(Default)]
pub struct FlowGuard {
    counts: PythonCounts,
    overruns_in_a_row: u32,
    suspended_until: Option<Instant>,
}

impl FlowGuard {
    pub fn counts(&self) -> PythonCounts {
        self.counts
    }

    /// Run `job` (one callback of this flow, named `callback` in the log; `who` names the
    /// flow's algorithm) on the Python worker, waiting at most the budget: what it returned if
    /// it returned in time with values that pass, else `None` (the caller keeps the flow as it
    /// was) with the reason counted and logged.
    pub fn call<R: Send + 'static>(
        &mut self,
        who: &dyn fmt::Display,
        callback: &str,
        job: impl FnOnce(Python<'_>) -> Called<R> + Send + 'static,
    ) -> Option<R> {
        if UNGUARDED.load(Ordering::Relaxed) {
            return self.returned(who, callback, Python::with_gil(job));
        }
        let now = Instant::now();
        if self.suspended_until.is_some_and(|until| now < until) {
            self.add(PythonCounts { skipped: 1, ..Default::default() });
            return None;
        }
        match worker().run(budget(), job) {
            Ran::Returned(called) => {
                self.overruns_in_a_row = 0;
                self.suspended_until = None;
                self.returned(who, callback, called)
            }
            Ran::Skipped => {
                self.add(PythonCounts { skipped: 1, ..Default::default() });
                None
            }
            Ran::TimedOut => {
                self.add(PythonCounts { timeouts: 1, ..Default::default() });
                let suspension = FIRST_SUSPENSION
                    .saturating_mul(1 << self.overruns_in_a_row.min(16))
                    .min(LONGEST_SUSPENSION);
                self.overruns_in_a_row += 1;
                self.suspended_until = Some(Instant::now() + suspension);
                let budget_ms = budget().as_secs_f64() * 1e3;
                log_thinned(
                    who,
                    callback,
                    self.counts.timeouts,
                    "timeout",
                    "python_timeouts",
                    || {
                        format!(
                            "{callback} ran past its {budget_ms} ms budget; abandoned for this report (the flow \
                             keeps its window), interrupted, and its reports skipped for {} ms",
                            suspension.as_millis()
                        )
                    },
                    || format!("{callback} keeps running past its budget"),
                );
                None
            }
        }
    }

    fn returned<R>(&mut self, who: &dyn fmt::Display, callback: &str, called: Called<R>) -> Option<R> {
        match called {
            Called::Returned(r) => return Some(r),
            Called::Raised(traceback) => {
                self.add(PythonCounts { errors: 1, ..Default::default() });
                log_thinned(
                    who,
                    callback,
                    self.counts.errors,
                    "error",
                    "on_report_errors",
                    || format!("{callback} raised; the flow keeps its window\n{traceback}"),
                    || format!("{callback} keeps raising; the flow keeps its window: {}", traceback.lines().last().unwrap_or_default()),
                );
            }
            Called::Refused(why) => {
                self.add(PythonCounts { bad_values: 1, ..Default::default() });
                log_thinned(
                    who,
                    callback,
                    self.counts.bad_values,
                    "refusal",
                    "python_bad_values",
                    || {
                        format!(
                            "{callback} set a value the agent refuses; the call is discarded and the flow keeps \
                             its window\n{why}"
                        )
                    },
                    || {
                        format!(
                            "{callback} keeps setting refused values; the flow keeps its window: {}",
                            why.lines().next().unwrap_or_default()
                        )
                    },
                );
            }
        }
        None
    }

    fn add(&mut self, add: PythonCounts) {
        self.counts += add;
        count(add);
    }
}

/// Run `load` (the import and construction of `what`) on the worker within [`LOAD_BUDGET`].
pub fn load<R: Send + 'static>(what: &str, load: impl FnOnce(Python<'_>) -> R + Send + 'static) -> anyhow::Result<R> {
    if UNGUARDED.load(Ordering::Relaxed) {
        return Ok(Python::with_gil(load));
    }
    #[cfg(not(test))]
    let budget = LOAD_BUDGET;
    #[cfg(test)]
    let budget = tests::LOAD_BUDGET_IN_TESTS;
    match worker().run(budget, load) {
        Ran::Returned(r) => Ok(r),
        Ran::TimedOut => Err(anyhow::anyhow!(
            "{what}: still loading (import and constructor) after {} s: abandoned and interrupted",
            budget.as_secs_f64()
        )),
        Ran::Skipped => Err(anyhow::anyhow!(
            "{what}: cannot load now: the Python interpreter is still busy with a callback that ran past its budget"
        )),
    }
}

// ---- the worker

/// pyo3 0.22's macro tests a `gil-refs` feature this crate does not declare.
#[allow(unexpected_cfgs)]
mod exception {
    pyo3::create_exception!(
        ccswitch.agent,
        CallbackTimeout,
        pyo3::exceptions::PyBaseException,
        "Raised in a Python algorithm's callback that ran past its time budget (a BaseException, \
         so that `except Exception` does not swallow it)."
    );
}
pub use exception::CallbackTimeout;

/// What became of a job handed to the worker.
pub enum Ran<R> {
    Returned(R),
    /// Still running at the deadline: abandoned and interrupted.
    TimedOut,
    /// Never started: the worker was running an abandoned job, or did not get to it in time.
    Skipped,
}

type Job = Box<dyn FnOnce(Python<'_>) + Send>;

/// The thread that runs Python callbacks, and the one that interrupts them.
pub struct Worker {
    shared: Arc<Shared>,
}

struct Shared {
    slot: Mutex<Handoff>,
    /// The worker waits here for a job.
    job_posted: Condvar,
    /// Submitters wait here for their job's end, or for the worker to be free.
    job_done: Condvar,
    /// The interrupter waits here for an abandoned job.
    abandoned: Condvar,
    /// Sequence number of the last job posted and of the last one finished, for waits
    /// that spin before they sleep.
    posted: AtomicU64,
    done: AtomicU64,
    /// Threads asleep on `job_posted` / `job_done` (a notification costs a system call only
    /// when someone sleeps).
    worker_asleep: AtomicBool,
    submitters_asleep: AtomicU64,
    /// The worker's Python thread id (`threading.get_ident()`), 0 until it started.
    python_thread: AtomicU64,
}

#[derive(Default)]
struct Handoff {
    next_seq: u64,
    pending: Option<(u64, Job)>,
    running: Option<u64>,
    /// The running job whose submitter gave up on it.
    abandoned: Option<u64>,
    /// The running job in which the interrupter raised [`CallbackTimeout`].
    interrupted: Option<u64>,
}

/// A worker spins this long for the next job before it sleeps: the reports of one batch come
/// back to back, and a sleeping thread takes 10-20 µs to wake on these machines.
const WORKER_SPIN: Duration = Duration::from_micros(50);
/// A submitter spins this long for its job's end before it sleeps (a callback of the simple
/// API takes 1-20 µs; the submitter would have spent that time running it itself).
const SUBMITTER_SPIN: Duration = Duration::from_micros(200);
/// Of a spin, this long on the CPU before yielding between checks: a hand-off between two
/// running threads takes well under a µs, and a yield is a system call that costs more than
/// a callback (~1 µs); past it, yielding lets the other thread have this very CPU on a busy
/// machine.
const BUSY_SPIN: Duration = Duration::from_micros(5);

/// Wait until `ready()` or `until`, spinning ([`BUSY_SPIN`] on the CPU, then yielding).
fn spin_until(until: Instant, ready: impl Fn() -> bool) -> bool {
    let busy_until = Instant::now() + BUSY_SPIN;
    loop {
        if ready() {
            return true;
        }
        let now = Instant::now();
        if now >= until {
            return false;
        }
        if now < busy_until {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// The process's Python worker, started at its first use.
pub fn worker() -> &'static Worker {
    static WORKER: OnceLock<Worker> = OnceLock::new();
    WORKER.get_or_init(|| Worker::start().expect("cannot start the Python worker thread"))
}

impl Worker {
    pub fn start() -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            slot: Mutex::new(Handoff { next_seq: 1, ..Default::default() }),
            job_posted: Condvar::new(),
            job_done: Condvar::new(),
            abandoned: Condvar::new(),
            posted: AtomicU64::new(0),
            done: AtomicU64::new(0),
            worker_asleep: AtomicBool::new(false),
            submitters_asleep: AtomicU64::new(0),
            python_thread: AtomicU64::new(0),
        });
        let s = Arc::clone(&shared);
        std::thread::Builder::new().name("python".into()).spawn(move || s.serve())?;
        let s = Arc::clone(&shared);
        std::thread::Builder::new().name("python-interrupt".into()).spawn(move || s.interrupt_overruns())?;
        Ok(Self { shared })
    }

    /// Run `job` on the worker, waiting at most `budget` for it (from now, the wait for a free
    /// worker included).
    pub fn run<R: Send + 'static>(&self, budget: Duration, job: impl FnOnce(Python<'_>) -> R + Send + 'static) -> Ran<R> {
        let deadline = Instant::now() + budget;
        let result: Arc<Mutex<Option<R>>> = Arc::new(Mutex::new(None));
        let out = Arc::clone(&result);
        let job: Job = Box::new(move |py| {
            let r = job(py);
            *out.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
        });
        let s = &*self.shared;
        let Some(seq) = s.post(job, deadline) else { return Ran::Skipped };
        if !s.wait_done(seq, deadline) {
            let mut slot = s.lock();
            if s.done.load(Ordering::Acquire) < seq {
                if slot.pending.as_ref().is_some_and(|(p, _)| *p == seq) {
                    // The worker never got to it: withdrawn, nothing to interrupt.
                    slot.pending = None;
                    return Ran::Skipped;
                }
                slot.abandoned = Some(seq);
                drop(slot);
                s.abandoned.notify_one();
                return Ran::TimedOut;
            }
        }
        let r = result.lock().unwrap_or_else(|e| e.into_inner()).take();
        r.map_or(Ran::Skipped, Ran::Returned)
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Handoff> {
        self.slot.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Post `job` once the worker is free; `None` if it runs an abandoned job or stays busy
    /// past the deadline.
    fn post(&self, job: Job, deadline: Instant) -> Option<u64> {
        let mut slot = self.lock();
        loop {
            if slot.abandoned.is_some() {
                return None;
            }
            if slot.pending.is_none() && slot.running.is_none() {
                break;
            }
            // Another datapath thread's job: wait for it, within this job's budget.
            let left = deadline.checked_duration_since(Instant::now())?;
            self.submitters_asleep.fetch_add(1, Ordering::SeqCst);
            slot = self.job_done.wait_timeout(slot, left).unwrap_or_else(|e| e.into_inner()).0;
            self.submitters_asleep.fetch_sub(1, Ordering::SeqCst);
        }
        let seq = slot.next_seq;
        slot.next_seq += 1;
        slot.pending = Some((seq, job));
        self.posted.store(seq, Ordering::Release);
        drop(slot);
        if self.worker_asleep.load(Ordering::SeqCst) {
            self.job_posted.notify_one();
        }
        Some(seq)
    }

    /// Whether job `seq` finished by the deadline.
    fn wait_done(&self, seq: u64, deadline: Instant) -> bool {
        if spin_until((Instant::now() + SUBMITTER_SPIN).min(deadline), || self.done.load(Ordering::Acquire) >= seq) {
            return true;
        }
        let mut slot = self.lock();
        while self.done.load(Ordering::Acquire) < seq {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else { return false };
            self.submitters_asleep.fetch_add(1, Ordering::SeqCst);
            slot = self.job_done.wait_timeout(slot, left).unwrap_or_else(|e| e.into_inner()).0;
            self.submitters_asleep.fetch_sub(1, Ordering::SeqCst);
        }
        true
    }

    /// The worker thread: run jobs, one at a time. It holds the GIL while it runs a job and
    /// while it spins for the next (back-to-back jobs, a batch of reports, then cost no
    /// release and retake of the GIL), and lets it go when it sleeps. No other thread of the
    /// agent needs the GIL meanwhile: the interrupter takes it only for a running job.
    fn serve(&self) {
        Python::with_gil(|py| {
            let ident = py
                .import_bound("threading")
                .and_then(|t| t.getattr("get_ident")?.call0()?.extract::<u64>())
                .expect("threading.get_ident()");
            self.python_thread.store(ident, Ordering::Release);
            loop {
                let next = self.posted_soon().or_else(|| Some(py.allow_threads(|| self.next_job())));
                let (seq, job) = next.expect("a job");
                // A job that panics must not take the worker with it; its submitter sees no result.
                if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(py))).is_err() {
                    error!("a Python callback's job panicked");
                }
                self.finish(py, seq);
            }
        })
    }

    /// The next job if one is posted within [`WORKER_SPIN`].
    fn posted_soon(&self) -> Option<(u64, Job)> {
        let done = self.done.load(Ordering::Acquire);
        if !spin_until(Instant::now() + WORKER_SPIN, || self.posted.load(Ordering::Acquire) > done) {
            return None;
        }
        let mut slot = self.lock();
        let (seq, job) = slot.pending.take()?;
        slot.running = Some(seq);
        Some((seq, job))
    }

    /// The next job, sleeping until one is posted.
    fn next_job(&self) -> (u64, Job) {
        let mut slot = self.lock();
        loop {
            if let Some((seq, job)) = slot.pending.take() {
                slot.running = Some(seq);
                return (seq, job);
            }
            self.worker_asleep.store(true, Ordering::SeqCst);
            slot = self.job_posted.wait(slot).unwrap_or_else(|e| e.into_inner());
            self.worker_asleep.store(false, Ordering::SeqCst);
        }
    }

    /// Job `seq` ended (with the GIL held, so that no interruption can land in between).
    fn finish(&self, _py: Python<'_>, seq: u64) {
        let mut slot = self.lock();
        slot.running = None;
        if slot.abandoned == Some(seq) {
            slot.abandoned = None;
        }
        if slot.interrupted == Some(seq) {
            // An interruption raised but not yet delivered (the callback returned first) must
            // not land in the next job.
            slot.interrupted = None;
            let ident = self.python_thread.load(Ordering::Acquire);
            // SAFETY: the GIL is held; a null exception clears the thread's pending one.
            unsafe { pyo3::ffi::PyThreadState_SetAsyncExc(ident as _, std::ptr::null_mut()) };
        }
        self.done.store(seq, Ordering::Release);
        drop(slot);
        if self.submitters_asleep.load(Ordering::SeqCst) > 0 {
            self.job_done.notify_all();
        }
    }

    /// The interrupter thread: raise [`CallbackTimeout`] in every abandoned job until it ends.
    fn interrupt_overruns(&self) {
        let mut slot = self.lock();
        loop {
            let Some(seq) = slot.abandoned else {
                slot = self.abandoned.wait(slot).unwrap_or_else(|e| e.into_inner());
                continue;
            };
            drop(slot);
            // The GIL first, then the slot: the worker takes them in that order too. The GIL
            // may take a switch interval (5 ms) to come, or forever if the callback is blocked
            // in C code holding it; only this thread waits.
            Python::with_gil(|py| {
                let mut slot = self.lock();
                if slot.abandoned == Some(seq) && slot.running == Some(seq) {
                    let ident = self.python_thread.load(Ordering::Acquire);
                    let exc = py.get_type_bound::<CallbackTimeout>();
                    // SAFETY: the GIL is held; `exc` is a live type object (the call takes a
                    // new reference of its own).
                    let found = unsafe { pyo3::ffi::PyThreadState_SetAsyncExc(ident as _, exc.as_ptr()) };
                    if found != 1 {
                        warn!(found, "cannot interrupt the Python worker thread");
                    }
                    slot.interrupted = Some(seq);
                }
            });
            slot = self.lock();
            if slot.abandoned == Some(seq) {
                slot = self.abandoned.wait_timeout(slot, INTERRUPT_RETRY).unwrap_or_else(|e| e.into_inner()).0;
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Loading takes a few ms in tests; one that loops is abandoned sooner than in the agent.
    pub(crate) const LOAD_BUDGET_IN_TESTS: Duration = Duration::from_millis(500);

    /// Tests that run Python take this lock: one whose callback hogs the interpreter would
    /// push another's past its budget.
    /// They also get a generous budget, so that a loaded machine cannot abandon a test's
    /// ordinary callbacks (tests of the budget set their own).
    pub(crate) fn python_tests_one_at_a_time() -> MutexGuard<'static, ()> {
        static LOCK: Mutex<()> = Mutex::new(());
        let held = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        set_budget(Duration::from_secs(2));
        held
    }

    fn run_code(py: Python<'_>, code: &str) -> PyResult<()> {
        py.run_bound(code, None, None)
    }

    #[test]
    fn windows_and_rates_outside_what_tcp_can_use_are_refused() {
        let mss = 1448;
        assert_eq!(check_window(2896.0, mss), Ok(2896));
        assert_eq!(check_window(14480.4, mss), Ok(14480));
        assert_eq!(check_window(MAX_WINDOW_BYTES as f64, mss), Ok(MAX_WINDOW_BYTES));
        for bad in [-5.0, 0.0, 1.0, 2895.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, MAX_WINDOW_BYTES as f64 + 1.0, 1e30] {
            let e = check_window(bad, mss).unwrap_err();
            assert!(e.contains("2 segments (2896)"), "{bad}: {e}");
        }
        assert_eq!(check_rate(2896.0, mss), Ok(2896));
        assert_eq!(check_rate(1.25e9, mss), Ok(1_250_000_000));
        for bad in [0.0, -1.0, 100.0, f64::NAN, f64::INFINITY, 2e12] {
            assert!(check_rate(bad, mss).unwrap_err().contains("None to stop pacing"), "{bad}");
        }
    }

    #[test]
    fn a_job_that_returns_in_time_gives_its_value() {
        let _one = python_tests_one_at_a_time();
        let w = Worker::start().unwrap();
        for i in 0..100u64 {
            match w.run(Duration::from_secs(5), move |py| py.eval_bound(&format!("{i} * 2"), None, None).unwrap().extract::<u64>().unwrap()) {
                Ran::Returned(v) => assert_eq!(v, i * 2),
                _ => panic!("job {i} did not return"),
            }
        }
    }

    #[test]
    fn a_pure_python_loop_is_abandoned_at_the_budget_interrupted_and_the_worker_serves_again() {
        let _one = python_tests_one_at_a_time();
        let w = Worker::start().unwrap();
        let started = Instant::now();
        let outcome = w.run(Duration::from_millis(20), |py| run_code(py, "while True:\n    pass\n"));
        let waited = started.elapsed();
        assert!(matches!(outcome, Ran::TimedOut));
        assert!(waited >= Duration::from_millis(20), "{waited:?}");
        // The interruption ends the loop; until then jobs are skipped, never queued behind it.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut skipped = 0;
        loop {
            match w.run(Duration::from_millis(200), |py| run_code(py, "x = 1")) {
                Ran::Returned(r) => {
                    r.expect("no interruption lands in the next job");
                    break;
                }
                Ran::Skipped => skipped += 1,
                Ran::TimedOut => panic!("a trivial job timed out"),
            }
            assert!(Instant::now() < deadline, "the loop was never interrupted");
            std::thread::sleep(Duration::from_millis(1));
        }
        // Many quick jobs afterwards: none sees a stray CallbackTimeout.
        for _ in 0..200 {
            assert!(matches!(w.run(Duration::from_secs(5), |py| run_code(py, "y = [i for i in range(10)]")), Ran::Returned(Ok(()))));
        }
        eprintln!("skipped while the loop was being interrupted: {skipped}");
    }

    #[test]
    fn a_loop_that_swallows_the_interruption_is_interrupted_again() {
        let _one = python_tests_one_at_a_time();
        let w = Worker::start().unwrap();
        let code = "caught = 0\nwhile True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        caught += 1\n        if caught == 3:\n            break\n";
        assert!(matches!(w.run(Duration::from_millis(10), move |py| run_code(py, code)), Ran::TimedOut));
        let deadline = Instant::now() + Duration::from_secs(10);
        while !matches!(w.run(Duration::from_millis(100), |_| ()), Ran::Returned(())) {
            assert!(Instant::now() < deadline, "the third interruption never came");
            std::thread::sleep(Duration::from_millis(5));
        }
        Python::with_gil(|py| {
            let caught: u64 = py.eval_bound("caught", None, None).unwrap().extract().unwrap();
            assert_eq!(caught, 3);
        });
    }

    #[test]
    fn a_callback_blocked_in_c_code_skips_every_job_meanwhile_and_the_caller_never_waits_on_the_gil() {
        let _one = python_tests_one_at_a_time();
        let w = Worker::start().unwrap();
        // time.sleep releases the GIL but no exception reaches it until it returns.
        assert!(matches!(w.run(Duration::from_millis(10), |py| run_code(py, "import time\ntime.sleep(0.5)")), Ran::TimedOut));
        let started = Instant::now();
        for _ in 0..100 {
            assert!(matches!(w.run(Duration::from_millis(10), |_| ()), Ran::Skipped));
        }
        assert!(started.elapsed() < Duration::from_millis(400), "skipping does not wait: {:?}", started.elapsed());
        let deadline = Instant::now() + Duration::from_secs(10);
        while !matches!(w.run(Duration::from_millis(100), |_| ()), Ran::Returned(())) {
            assert!(Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
