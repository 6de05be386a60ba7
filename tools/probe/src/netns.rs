//! Entering a network namespace for a while (to resolve and attach to its interfaces) and
//! listing its interfaces.
//!
//! `setns(CLONE_NEWNET)` changes the namespace of the calling thread only; the probe does all
//! its attaching from its main thread, and [`Entered`] puts the thread back in its own
//! namespace when dropped, on every path.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};

use anyhow::{bail, Context, Result};

/// An open handle on a network namespace.
pub struct Netns {
    file: File,
    /// How the user named it ("ccsw-srv-1", "pid 123").
    pub label: String,
}

impl Netns {
    /// A namespace created by `ip netns add NAME` (/run/netns/NAME).
    pub fn named(name: &str) -> Result<Netns> {
        if name.is_empty() || name.contains('/') {
            bail!("bad namespace name {name:?}");
        }
        let path = format!("/run/netns/{name}");
        let file = File::open(&path).map_err(|e| anyhow::anyhow!("no namespace {name:?} ({path}: {e})"))?;
        Ok(Netns { file, label: name.to_string() })
    }

    /// The network namespace of process `pid`.
    pub fn of_pid(pid: u32) -> Result<Netns> {
        let path = format!("/proc/{pid}/ns/net");
        let file = File::open(&path).map_err(|e| anyhow::anyhow!("no namespace for pid {pid} ({path}: {e})"))?;
        Ok(Netns { file, label: format!("pid {pid}") })
    }

    /// The calling thread's own namespace.
    pub fn current() -> Result<Netns> {
        let file = File::open("/proc/thread-self/ns/net").context("opening this thread's network namespace")?;
        Ok(Netns { file, label: "own".to_string() })
    }

    /// Moves the calling thread into this namespace until the guard is dropped.
    pub fn enter(&self) -> Result<Entered> {
        let home = Netns::current()?;
        setns(&self.file, &self.label)?;
        Ok(Entered { home })
    }
}

fn setns(file: &File, label: &str) -> Result<()> {
    // SAFETY: plain syscall on an fd we own.
    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        bail!("cannot enter network namespace {label}: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread is in another namespace; dropping this brings it home.
pub struct Entered {
    home: Netns,
}

impl Drop for Entered {
    fn drop(&mut self) {
        if let Err(e) = setns(&self.home.file, "own") {
            // Attaching elsewhere from the wrong namespace would be worse than stopping here.
            eprintln!("ccswitch-probe: {e:#}");
            std::process::abort();
        }
    }
}

/// Index of interface `name` in the calling thread's namespace.
pub fn ifindex(name: &str) -> Result<u32> {
    let c = CString::new(name).with_context(|| format!("bad interface name {name:?}"))?;
    // SAFETY: NUL-terminated string.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        bail!("no interface {name:?}: {}", std::io::Error::last_os_error());
    }
    Ok(idx)
}

/// (name, ifindex) of every interface of the calling thread's namespace that is not a
/// loopback device.
pub fn non_loopback_interfaces() -> Result<Vec<(String, u32)>> {
    // A socket created now belongs to the current namespace: it answers SIOCGIFFLAGS there.
    // SAFETY: plain syscall; the fd is owned at once.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        bail!("socket for interface flags: {}", std::io::Error::last_os_error());
    }
    let sock: OwnedFd = unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) };
    // SAFETY: if_nameindex returns a list terminated by a zero entry, freed below.
    let list = unsafe { libc::if_nameindex() };
    if list.is_null() {
        bail!("listing interfaces: {}", std::io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        // SAFETY: within the list up to its terminator.
        let entry = unsafe { &*list.add(i) };
        if entry.if_index == 0 || entry.if_name.is_null() {
            break;
        }
        i += 1;
        // SAFETY: NUL-terminated name owned by the list.
        let name_c = unsafe { CStr::from_ptr(entry.if_name) };
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        for (dst, src) in req.ifr_name.iter_mut().zip(name_c.to_bytes().iter().take(libc::IFNAMSIZ - 1)) {
            *dst = *src as libc::c_char;
        }
        // SAFETY: req is a valid ifreq for SIOCGIFFLAGS.
        let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) };
        let flags = if rc == 0 { i32::from(unsafe { req.ifr_ifru.ifru_flags }) } else { 0 };
        if flags & libc::IFF_LOOPBACK != 0 {
            continue;
        }
        out.push((name_c.to_string_lossy().into_owned(), entry.if_index));
    }
    // SAFETY: the list came from if_nameindex.
    unsafe { libc::if_freenameindex(list) };
    Ok(out)
}
