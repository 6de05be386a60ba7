//! `ccswitch-loadgen`: the load of the scale benchmark (`ccswitch bench scale`).
//!
//! `serve` accepts connections and keeps every one of them sending as fast as its congestion
//! control lets it (edge-triggered epoll: a write until the socket buffer is full, the next
//! when it drains). `fetch` opens N long-lived connections to it, spread over a ramp, and reads
//! each at a fixed rate: a receiver that drains R bytes/s holds its sender to R by flow
//! control, so N flows produce N realistic ACK clocks without a link emulator per flow. At the
//! end it prints one JSON object: flows opened, failed, still receiving and closed early, bytes
//! read, the slowest flow's, and the flows whose bytes were not the ones sent.
//!
//! Integrity: every connection carries the same stream, byte `o` being `PATTERN[o % PERIOD]`
//! (pseudo-random bytes over a prime period, so no MSS-sized shift, loss, duplicate or
//! reordering of data goes unnoticed), and `fetch` compares every byte it reads with it.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use ccswitch_datapath_support::rng::SplitMix64;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "ccswitch-loadgen", version, about)]
struct LoadgenCli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Accept connections and send to each as fast as it takes, until killed.
    Serve {
        #[arg(long)]
        bind: SocketAddr,
        /// SO_SNDBUF of each connection, bytes (0: the kernel's autotuning). 100k flows
        /// must share net.ipv4.tcp_mem (2.2 GB here).
        #[arg(long, default_value_t = 0)]
        sndbuf: usize,
    },
    /// Open --flows connections to --connect and read each at --rate-bps for --seconds.
    Fetch {
        #[arg(long)]
        connect: SocketAddr,
        #[arg(long)]
        flows: usize,
        /// Bits per second each flow is read at.
        #[arg(long)]
        rate_bps: u64,
        /// How long to read once every flow is open.
        #[arg(long)]
        seconds: f64,
        /// Connections are opened evenly over this time.
        #[arg(long, default_value_t = 2000)]
        ramp_ms: u64,
        /// Period of the reading pass over all flows.
        #[arg(long, default_value_t = 20)]
        tick_ms: u64,
        /// SO_RCVBUF of each connection, bytes (0: the kernel's autotuning).
        #[arg(long, default_value_t = 65536)]
        rcvbuf: usize,
        /// A measurement window, from this long after the start (ms): the report then gives
        /// the goodput of every flow within it (the benchmark's window, past the ramp and the
        /// catch-up of flows that opened late).
        #[arg(long, requires = "window_ms")]
        window_from_ms: Option<u64>,
        /// Length of the measurement window (ms).
        #[arg(long, requires = "window_from_ms")]
        window_ms: Option<u64>,
    },
}

/// When the report's measurement window begins and how long it lasts, from the start.
#[derive(Clone, Copy)]
struct Window {
    from: Duration,
    length: Duration,
}

fn main() -> Result<()> {
    raise_fd_limit();
    match LoadgenCli::parse().cmd {
        Cmd::Serve { bind, sndbuf } => serve(bind, sndbuf),
        Cmd::Fetch { connect, flows, rate_bps, seconds, ramp_ms, tick_ms, rcvbuf, window_from_ms, window_ms } => {
            if flows == 0 || rate_bps == 0 || seconds <= 0.0 || tick_ms == 0 || window_ms == Some(0) {
                bail!("--flows, --rate-bps, --seconds, --tick-ms and --window-ms must be positive");
            }
            let window = window_from_ms.zip(window_ms).map(|(from, length)| Window {
                from: Duration::from_millis(from),
                length: Duration::from_millis(length),
            });
            let report = fetch(connect, flows, rate_bps, Duration::from_secs_f64(seconds), Duration::from_millis(ramp_ms), Duration::from_millis(tick_ms), rcvbuf, window)?;
            println!("{report}");
            Ok(())
        }
    }
}

/// A descriptor per flow: up to fs.nr_open where the hard limit may be raised (root outside
/// a container), else the hard limit (20k here: `ccswitch bench scale` then shares the flows
/// between several processes).
fn raise_fd_limit() {
    const WANTED: libc::rlim_t = 1 << 20;
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: valid pointers to an rlimit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return;
        }
        let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0);
        let raised = libc::rlimit { rlim_cur: WANTED.min(nr_open), rlim_max: WANTED.min(nr_open) };
        if raised.rlim_max > lim.rlim_max && libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
            return;
        }
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
}

struct Epoll(RawFd);

impl Epoll {
    fn new() -> Result<Self> {
        // SAFETY: plain syscall.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error()).context("epoll_create1");
        }
        Ok(Self(fd))
    }

    fn add(&self, fd: RawFd, events: u32, token: u64) -> Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: valid epoll fd and event.
        if unsafe { libc::epoll_ctl(self.0, libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
            return Err(std::io::Error::last_os_error()).context("epoll_ctl");
        }
        Ok(())
    }

    fn wait(&self, out: &mut [libc::epoll_event], timeout_ms: i32) -> usize {
        // SAFETY: `out` is valid for its length.
        let n = unsafe { libc::epoll_wait(self.0, out.as_mut_ptr(), out.len() as i32, timeout_ms) };
        n.max(0) as usize
    }
}

const LISTENER: u64 = u64::MAX;

/// A slow flow is read a segment at a time: reading every tick's few bytes would cost a
/// syscall per flow per tick (500k/s for 10k flows at 10 kbit/s, more CPU than the datapath
/// under test) and announce windows a few bytes wider, which receivers do not do.
const MIN_READ_BYTES: f64 = 1448.0;

/// Period of the stream's byte pattern: a prime, so that it shares no factor with any segment
/// or buffer size.
const PERIOD: usize = 65_521;
/// Largest write or read.
const CHUNK: usize = 256 * 1024;

/// The pattern over one period and then CHUNK more bytes, so that the bytes from any stream
/// offset on, up to CHUNK of them, are one slice: `&pattern[o % PERIOD..][..n]`.
fn pattern() -> Vec<u8> {
    let period = SplitMix64(0x9e37_79b9_7f4a_7c15).bytes(PERIOD);
    period.iter().cycle().take(PERIOD + CHUNK).copied().collect()
}

/// Accept-queue length asked of `listen` (the kernel caps it at `net.core.somaxconn`, which
/// the scale benchmark raises in the server's namespace). The standard library's 128 overflows
/// while thousands of connections open in a ramp: the kernel then drops their handshake's last
/// ACK and retries its SYN-ACK after 1, 2, 4... s, so flows sit connected at the client with
/// nothing to read for most of a short measurement.
const LISTEN_BACKLOG: libc::c_int = 65535;

fn listen(bind: SocketAddr) -> Result<TcpListener> {
    let (family, addr, len) = sockaddr(&bind);
    let fd = tcp_socket(family)?;
    set_option(fd.as_raw_fd(), libc::SO_REUSEADDR, 1 as libc::c_int);
    // SAFETY: plain syscalls on a descriptor owned here; `addr` is valid for `len`.
    unsafe {
        if libc::bind(fd.as_raw_fd(), (&addr as *const libc::sockaddr_storage).cast(), len) < 0 {
            return Err(std::io::Error::last_os_error()).with_context(|| format!("binding {bind}"));
        }
        if libc::listen(fd.as_raw_fd(), LISTEN_BACKLOG) < 0 {
            return Err(std::io::Error::last_os_error()).context("listen");
        }
    }
    Ok(TcpListener::from(fd))
}

/// A non-blocking TCP socket of `family`.
fn tcp_socket(family: libc::c_int) -> Result<OwnedFd> {
    // SAFETY: plain syscall; the descriptor is owned by the result from here on.
    let fd = unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()).context("socket");
    }
    // SAFETY: a fresh descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A SOL_SOCKET option, `value` of the option's C type (an int, a struct linger); best effort:
/// the kernel's default stays otherwise.
fn set_option<T: Copy>(fd: RawFd, name: libc::c_int, value: T) {
    // SAFETY: valid descriptor and a pointer to a value of the size given.
    unsafe {
        libc::setsockopt(fd, libc::SOL_SOCKET, name, (&value as *const T).cast(), std::mem::size_of::<T>() as libc::socklen_t);
    }
}

/// Closing the socket (a client gone, or this process stopped) resets the connection and frees
/// its send queue at once. A normal close would leave an orphan still sending what the queue
/// holds: behind a delay shell the clients' namespace is gone with their fetch, so nothing
/// answers. After 10k flows through the shell, 5,001 orphans held 2 GB of TCP memory
/// machine-wide for two minutes, under net.ipv4.tcp_mem pressure (the run restores the limit
/// it raised), and the next experiment's 2 MB transfers took 19.6 s instead of 0.95
/// (experiments/measured/scale-orphans-2026-11-29).
fn abort_on_close(fd: RawFd) {
    set_option(fd, libc::SO_LINGER, libc::linger { l_onoff: 1, l_linger: 0 });
}

fn serve(bind: SocketAddr, sndbuf: usize) -> Result<()> {
    let listener = listen(bind)?;
    let epoll = Epoll::new()?;
    epoll.add(listener.as_raw_fd(), libc::EPOLLIN as u32, LISTENER)?;
    let pattern = pattern();
    // Each connection and the stream offset it has sent up to.
    let mut conns: Vec<Option<(TcpStream, usize)>> = Vec::new();
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    loop {
        let n = epoll.wait(&mut events, 1000);
        for ev in &events[..n] {
            let token = ev.u64;
            if token == LISTENER {
                while let Ok((s, _)) = listener.accept() {
                    s.set_nonblocking(true)?;
                    abort_on_close(s.as_raw_fd());
                    if sndbuf > 0 {
                        set_option(s.as_raw_fd(), libc::SO_SNDBUF, sndbuf as libc::c_int);
                    }
                    epoll.add(s.as_raw_fd(), (libc::EPOLLOUT | libc::EPOLLET) as u32, conns.len() as u64)?;
                    conns.push(Some((s, 0)));
                }
                continue;
            }
            let slot = &mut conns[token as usize];
            let Some((s, sent)) = slot.as_mut() else { continue };
            loop {
                match s.write(&pattern[*sent % PERIOD..][..CHUNK]) {
                    Ok(0) => break,
                    Ok(n) => *sent += n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(_) => {
                        *slot = None; // closed by the client: dropped, deregistered
                        break;
                    }
                }
            }
        }
    }
}

struct FetchFlow {
    stream: TcpStream,
    budget: f64,
    bytes: u64,
    open: bool,
    /// A byte read differed from the one sent.
    corrupt: bool,
}

fn fetch(
    to: SocketAddr,
    n: usize,
    rate_bps: u64,
    duration: Duration,
    ramp: Duration,
    tick: Duration,
    rcvbuf: usize,
    window: Option<Window>,
) -> Result<serde_json::Value> {
    let bytes_per_s = rate_bps as f64 / 8.0;
    let mut flows: Vec<FetchFlow> = Vec::with_capacity(n);
    let mut errors: Vec<String> = Vec::new();
    let mut failed = 0usize;
    let mut buf = vec![0u8; CHUNK];
    let pattern = pattern();
    let start = Instant::now();
    let mut last = start;
    let mut steady: Option<Instant> = None;
    let mut steady_bytes = 0u64;
    // Each flow's bytes when the window began, and when; then the window's figures.
    let mut window_start: Option<(Instant, Vec<u64>)> = None;
    let mut window_report = serde_json::Value::Null;
    loop {
        let now = Instant::now();
        if let Some(w) = window {
            let since = now - start;
            if window_start.is_none() && since >= w.from {
                window_start = Some((now, flows.iter().map(|f| f.bytes).collect()));
            } else if window_report.is_null() && since >= w.from + w.length {
                if let Some((t0, bytes0)) = &window_start {
                    window_report = window_figures(&flows, bytes0, (now - *t0).as_secs_f64(), rate_bps);
                }
            }
        }
        // Open the connections the ramp has reached by now.
        let due = if ramp.is_zero() { n } else { ((now - start).as_secs_f64() / ramp.as_secs_f64() * n as f64).ceil() as usize };
        while flows.len() + failed < due.min(n) {
            match open(to, rcvbuf) {
                Ok(stream) => flows.push(FetchFlow { stream, budget: 0.0, bytes: 0, open: true, corrupt: false }),
                Err(e) => {
                    failed += 1;
                    if errors.len() < 5 {
                        errors.push(format!("connect: {e}"));
                    }
                }
            }
        }
        if steady.is_none() && flows.len() + failed == n {
            steady = Some(now);
            steady_bytes = flows.iter().map(|f| f.bytes).sum();
        }
        if steady.is_some_and(|t| now - t >= duration) && (window.is_none() || !window_report.is_null()) {
            break;
        }
        let dt = (now - last).as_secs_f64();
        last = now;
        for f in flows.iter_mut().filter(|f| f.open) {
            // At most two ticks (or two reads) of budget: a flow that fell behind does not burst.
            let cap = (2.0 * bytes_per_s * tick.as_secs_f64().max(dt)).max(2.0 * MIN_READ_BYTES);
            f.budget = (f.budget + bytes_per_s * dt).min(cap);
            while f.budget >= MIN_READ_BYTES {
                let want = (f.budget as usize).min(buf.len());
                match f.stream.read(&mut buf[..want]) {
                    Ok(0) => {
                        f.open = false;
                        break;
                    }
                    Ok(got) => {
                        let expected = &pattern[(f.bytes % PERIOD as u64) as usize..][..got];
                        if !f.corrupt && buf[..got] != *expected {
                            f.corrupt = true;
                            if errors.len() < 5 {
                                let at = buf[..got].iter().zip(expected).position(|(a, b)| a != b).unwrap_or(0);
                                errors.push(format!("corrupt: a flow's byte {} differs from the one sent", f.bytes + at as u64));
                            }
                        }
                        f.budget -= got as f64;
                        f.bytes += got as u64;
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => {
                        f.open = false;
                        if errors.len() < 5 {
                            errors.push(format!("read: {e}"));
                        }
                        break;
                    }
                }
            }
        }
        std::thread::sleep(tick.saturating_sub(now.elapsed()));
    }
    let total: u64 = flows.iter().map(|f| f.bytes).sum();
    let seconds = steady.map_or(0.0, |t| t.elapsed().as_secs_f64());
    let closed = flows.iter().filter(|f| !f.open).count();
    let receiving = flows.iter().filter(|f| f.open && f.bytes > 0).count();
    // Open to the end without a byte: never accepted, or never sent to.
    let silent = flows.iter().filter(|f| f.open && f.bytes == 0).count();
    Ok(serde_json::json!({
        "flows": n,
        "opened": flows.len(),
        "receiving": receiving,
        "silent": silent,
        "failed": failed,
        "closed_early": closed,
        "seconds": seconds,
        "bytes": total,
        "steady_bits_per_s": if seconds > 0.0 { (total - steady_bytes) as f64 * 8.0 / seconds } else { 0.0 },
        "min_flow_bytes": flows.iter().map(|f| f.bytes).min().unwrap_or(0),
        "flows_checked": flows.iter().filter(|f| f.bytes > 0).count(),
        "corrupt": flows.iter().filter(|f| f.corrupt).count(),
        "errors": errors,
        "window": window_report,
    }))
}

/// A non-blocking connect with the receive buffer set first (so that the window scale the
/// SYN offers fits it); reads return WouldBlock until the connection is up.
fn open(to: SocketAddr, rcvbuf: usize) -> Result<TcpStream> {
    let (family, addr, len) = sockaddr(&to);
    let fd = tcp_socket(family)?;
    if rcvbuf > 0 {
        set_option(fd.as_raw_fd(), libc::SO_RCVBUF, rcvbuf as libc::c_int);
    }
    // SAFETY: plain syscall on a descriptor owned here; `addr` is valid for `len`.
    if unsafe { libc::connect(fd.as_raw_fd(), (&addr as *const libc::sockaddr_storage).cast(), len) } < 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINPROGRESS) {
            return Err(e).context("connect");
        }
    }
    Ok(TcpStream::from(fd))
}

fn sockaddr(to: &SocketAddr) -> (libc::c_int, libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    match to {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from(*a.ip()).to_be() },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_in fits in sockaddr_storage.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin) };
            (libc::AF_INET, ss, std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t)
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: 0,
                sin6_addr: libc::in6_addr { s6_addr: a.ip().octets() },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_in6 fits in sockaddr_storage.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin6) };
            (libc::AF_INET6, ss, std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t)
        }
    }
}

/// Goodput within the measurement window: the total, and how it spread over the flows open at
/// its start (those opened later are not counted: their first seconds are a ramp).
fn window_figures(flows: &[FetchFlow], bytes0: &[u64], seconds: f64, rate_bps: u64) -> serde_json::Value {
    let mut rates: Vec<f64> = flows
        .iter()
        .zip(bytes0)
        .map(|(f, b0)| (f.bytes - b0) as f64 * 8.0 / seconds)
        .collect();
    rates.sort_by(f64::total_cmp);
    let q = |p: f64| rates.get(((rates.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or(0.0);
    serde_json::json!({
        "seconds": seconds,
        "flows": rates.len(),
        "bits_per_s": rates.iter().sum::<f64>(),
        "flow_bps_p1": q(0.01),
        "flow_bps_p10": q(0.10),
        "flow_bps_p50": q(0.5),
        "flows_below_half_rate": rates.iter().filter(|r| **r < rate_bps as f64 / 2.0).count(),
    })
}
