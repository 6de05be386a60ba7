//! Leaving nothing loaded when the datapath goes.
//!
//! The kernel frees the struct_ops map, and with it every program, when its last reference
//! goes. Our file descriptors are only some of those references; the others are
//!  - every network namespace whose default congestion control is ours,
//!  - every TCP socket using it, listeners included,
//!  - the reference `tcp_set_default_congestion_control()` takes and never drops when it
//!    refuses a restricted congestion control with EPERM (a kernel bug). The BPF object
//!    registers non-restricted, so that refusal does not happen unless an operator rewrites
//!    `net.ipv4.tcp_allowed_congestion_control` without our name.
//!
//! Before the registration is destroyed, [`hand_back`] visits every network namespace it can
//! reach (those of all processes and those bound under `/run/netns`), moves the namespace's
//! default and each of its sockets on us to the built-in algorithm the fallback stands for,
//! and [`wait_unloaded`] then checks that the map and the programs are really gone.

use std::collections::HashSet;
use std::fs;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use libbpf_rs::{Iter, Link};

const DEFAULT_CC_SYSCTL: &str = "/proc/sys/net/ipv4/tcp_congestion_control";
/// Always allowed in every namespace (the kernel registers it non-restricted).
const LAST_RESORT_CC: &str = "reno";

/// What [`hand_back`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HandBack {
    /// Network namespaces visited.
    pub namespaces: usize,
    /// Namespaces whose default was ours and now is the built-in algorithm.
    pub defaults_reset: usize,
    /// Namespaces that could not be entered or iterated, with the reason.
    pub failures: Vec<String>,
}

/// One path per distinct network namespace: every process's `/proc/PID/ns/net` and every
/// file under `/run/netns`, deduplicated by the namespace's inode.
fn network_namespaces() -> Vec<PathBuf> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut consider = |p: PathBuf| {
        if let Ok(m) = fs::metadata(&p) {
            if seen.insert((m.dev(), m.ino())) {
                out.push(p);
            }
        }
    };
    consider(PathBuf::from("/proc/self/ns/net"));
    if let Ok(dir) = fs::read_dir("/run/netns") {
        for e in dir.flatten() {
            consider(e.path());
        }
    }
    if let Ok(dir) = fs::read_dir("/proc") {
        for e in dir.flatten() {
            if e.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
                consider(e.path().join("ns/net"));
            }
        }
    }
    out
}

/// In the current thread's namespace: resets the default if it is `cc_name`, then runs the
/// socket iterator. Returns whether the default was reset.
fn hand_back_here(cc_name: &str, builtin: &str, iter_link: &Link) -> Result<bool, String> {
    let current = fs::read_to_string(DEFAULT_CC_SYSCTL).map_err(|e| format!("reading the default: {e}"))?;
    let mut reset = false;
    if current.trim() == cc_name {
        // The built-in may be restricted in this namespace (cubic is, unless it is some
        // namespace's default or listed as allowed); reno never is.
        fs::write(DEFAULT_CC_SYSCTL, builtin)
            .or_else(|_| fs::write(DEFAULT_CC_SYSCTL, LAST_RESORT_CC))
            .map_err(|e| format!("resetting the default: {e}"))?;
        reset = true;
    }
    // Reading the iterator runs the program over every TCP socket of this namespace.
    let mut iter = Iter::new(iter_link).map_err(|e| format!("socket iterator: {e}"))?;
    let mut sink = Vec::new();
    iter.read_to_end(&mut sink).map_err(|e| format!("socket iterator: {e}"))?;
    Ok(reset)
}

/// Moves every namespace default and every socket on `cc_name` to `builtin`, in every
/// reachable namespace. Runs in a thread of its own, which alone changes namespace.
pub(crate) fn hand_back(cc_name: &str, builtin: &str, iter_link: &Link) -> HandBack {
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut report = HandBack::default();
            for ns in network_namespaces() {
                let entered = fs::File::open(&ns).map_err(|e| e.to_string()).and_then(|f| {
                    // SAFETY: plain syscall on a file descriptor we own; it changes only the
                    // network namespace of this thread, which ends with the scope.
                    match unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } {
                        0 => Ok(()),
                        _ => Err(std::io::Error::last_os_error().to_string()),
                    }
                });
                // A process that exited between listing and entering is not a failure.
                if entered.is_err() && !ns.exists() {
                    continue;
                }
                report.namespaces += 1;
                match entered.and_then(|()| hand_back_here(cc_name, builtin, iter_link)) {
                    Ok(reset) => report.defaults_reset += reset as usize,
                    Err(e) => report.failures.push(format!("{}: {e}", ns.display())),
                }
            }
            report
        })
        .join()
        .unwrap_or_else(|_| HandBack {
            failures: vec!["the hand-back thread panicked".into()],
            ..Default::default()
        })
    })
}

fn prog_exists(id: u32) -> bool {
    // SAFETY: returns a new fd or a negative error; the fd is closed at once.
    let fd = unsafe { libbpf_rs::libbpf_sys::bpf_prog_get_fd_by_id(id) };
    if fd >= 0 {
        unsafe { libc::close(fd) };
    }
    fd >= 0
}

fn map_exists(id: u32) -> bool {
    // SAFETY: as in prog_exists.
    let fd = unsafe { libbpf_rs::libbpf_sys::bpf_map_get_fd_by_id(id) };
    if fd >= 0 {
        unsafe { libc::close(fd) };
    }
    fd >= 0
}

/// Waits up to `limit` for the map and programs to be freed (the kernel frees them from a
/// work queue after RCU grace periods). Returns what is still loaded: `(map, prog ids)`.
pub(crate) fn wait_unloaded(map_id: Option<u32>, prog_ids: &[u32], limit: Duration) -> (Option<u32>, Vec<u32>) {
    let deadline = Instant::now() + limit;
    loop {
        let map = map_id.filter(|&id| map_exists(id));
        let progs: Vec<u32> = prog_ids.iter().copied().filter(|&id| prog_exists(id)).collect();
        if (map.is_none() && progs.is_empty()) || Instant::now() >= deadline {
            return (map, progs);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether `name` is a registered congestion control right now.
pub(crate) fn cc_registered(name: &str) -> bool {
    fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .map(|s| s.split_whitespace().any(|n| n == name))
        .unwrap_or(false)
}
