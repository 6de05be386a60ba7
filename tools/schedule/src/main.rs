//! `ccswitch-schedule`: a path element whose one-way delay and random loss change on a
//! schedule (mahimahi's delay and loss shells are static).
//!
//! The harness sends the FORWARD traffic between the server's address and the clients to an
//! NFQUEUE (iptables, one queue number per run); this program receives each packet from the
//! kernel queue and either drops it (loss) or holds it and accepts it at its release time (see
//! `element.rs` for the model: per-direction FIFO, so a falling delay never reorders).
//! Downlink is traffic from `--server-ip`, uplink traffic towards it.
//!
//! One thread does everything, and sleeps in `epoll_wait` between events: the queue's netlink
//! socket (packets), a timerfd on CLOCK_MONOTONIC armed at the earliest due release (absolute
//! time, timer slack 1 ns), and a signalfd (SIGUSR1 starts the clock, SIGTERM/SIGINT stop).
//! No busy polling.
//!
//! It prints `ready` once bound to the queue. On SIGTERM/SIGINT it accepts every packet it
//! still holds at once (a shutdown never loses a byte), unbinds, writes the statistics file
//! (per step and direction: packets seen, dropped, hold applied; CPU cost per packet) and
//! exits 0.

mod element;
mod nfqueue;
mod schedule;
mod segments;

use std::io::Write;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Parser;
use serde_json::{json, Value};

use element::{Element, LossDraws, PacketDirection, PacketFate, DIRECTIONS};
use nfqueue::NfQueue;
use schedule::Schedule;

#[derive(Parser)]
#[command(name = "ccswitch-schedule", version, about)]
struct ScheduleCli {
    /// NFQUEUE number to bind (the iptables rules' --queue-num).
    #[arg(long)]
    queue: u16,
    /// The server's address: packets from it are downlink, packets to it uplink.
    #[arg(long)]
    server_ip: Ipv4Addr,
    /// The schedule, JSON: {"steps": [{"at_s": 0, "delay_ms": 20, "loss_downlink": 0, "loss_uplink": 0}, ...]}.
    #[arg(long)]
    schedule: PathBuf,
    /// Where to write the statistics (JSON) on exit.
    #[arg(long)]
    stats: PathBuf,
    /// Time 0 of the schedule is the first SIGUSR1 instead of the start (before it, the first step applies).
    #[arg(long)]
    start_on_sigusr1: bool,
    /// Seed of the loss draws.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Draw loss per packet in arrival order, or per TCP segment from its offset in its flow
    /// and its transmission (the same bytes lost whatever the order they are sent in).
    #[arg(long, value_enum, default_value_t = LossDrawsArg::Packet)]
    loss_draws: LossDrawsArg,
    /// Packets the kernel queue may hold (held packets count); past it the kernel accepts (fails open).
    #[arg(long, default_value_t = 1 << 20)]
    queue_maxlen: u32,
    /// Receive buffer of the netlink socket, MiB; past it the kernel accepts (fails open).
    #[arg(long, default_value_t = 64)]
    rcvbuf_mib: usize,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LossDrawsArg {
    Packet,
    Segment,
}

/// Bytes of each packet copied to us: the IPv4 header's addresses end at byte 20; per-segment
/// draws read the TCP header too.
fn copy_range(draws: LossDrawsArg) -> u32 {
    match draws {
        LossDrawsArg::Packet => 20,
        LossDrawsArg::Segment => segments::HEADER_BYTES,
    }
}

fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn check(ret: libc::c_int, what: &str) -> Result<libc::c_int> {
    if ret < 0 {
        return Err(std::io::Error::last_os_error()).context(what.to_string());
    }
    Ok(ret)
}

/// Counts beyond the element's per-step statistics.
#[derive(Default)]
struct Counters {
    not_ipv4: u64,
    released_at_shutdown: u64,
    socket_overruns: u64,
}

struct Loop {
    queue: NfQueue,
    element: Element,
    server_ip: [u8; 4],
    timer: OwnedFd,
    signals: OwnedFd,
    armed_ns: Option<u64>,
    counters: Counters,
    /// (packet id, accept) decided while receiving, reused between batches.
    verdicts: Vec<(u32, bool)>,
}

const TOKEN_QUEUE: u64 = 0;
const TOKEN_TIMER: u64 = 1;
const TOKEN_SIGNALS: u64 = 2;
/// Datagrams read in one go before due releases are looked at again.
const RECV_BATCH: usize = 256;

/// Downlink if the IPv4 source is the server, uplink otherwise (the iptables rules queue only
/// packets from or to it); None for what is not IPv4.
fn direction(payload: &[u8], server_ip: [u8; 4]) -> Option<PacketDirection> {
    if payload.len() < 20 || payload[0] >> 4 != 4 {
        return None;
    }
    Some(if payload[12..16] == server_ip {
        PacketDirection::Downlink
    } else {
        PacketDirection::Uplink
    })
}

impl Loop {
    /// Read what the queue socket holds (up to a batch), deciding each packet's fate; releases
    /// that fall due meanwhile go out between datagrams.
    fn receive(&mut self) -> Result<()> {
        // Verdicts decided inside the receive callback are sent after it (the socket is busy).
        let mut verdicts = std::mem::take(&mut self.verdicts);
        for _ in 0..RECV_BATCH {
            let server_ip = self.server_ip;
            let (element, counters) = (&mut self.element, &mut self.counters);
            let got =
                self.queue
                    .recv_nonblocking(|id, payload| match direction(payload, server_ip) {
                        None => {
                            counters.not_ipv4 += 1;
                            verdicts.push((id, true));
                        }
                        Some(dir) => {
                            if element.arrive(now_ns(), dir, id, payload) == PacketFate::Drop {
                                verdicts.push((id, false));
                            }
                        }
                    });
            let got = match got {
                Ok(got) => got,
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    // Our socket overflowed: those packets were accepted by the kernel (fail open).
                    self.counters.socket_overruns += 1;
                    true
                }
                Err(e) => return Err(e).context("receive from the queue"),
            };
            for (id, accept) in verdicts.drain(..) {
                self.queue.verdict(id, accept).context("verdict")?;
            }
            self.release_due()?;
            if !got {
                break;
            }
        }
        self.verdicts = verdicts;
        Ok(())
    }

    fn release_due(&mut self) -> Result<()> {
        let now = now_ns();
        while let Some(held) = self.element.pop_due(now) {
            self.queue
                .verdict(held.id, true)
                .context("accept verdict")?;
        }
        Ok(())
    }

    fn arm_timer(&mut self) -> Result<()> {
        let next = self.element.next_release_ns();
        if next == self.armed_ns {
            return Ok(());
        }
        // An all-zero it_value disarms; a release time is never 0 on CLOCK_MONOTONIC.
        let at = next.unwrap_or(0);
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (at / 1_000_000_000) as i64,
                tv_nsec: (at % 1_000_000_000) as i64,
            },
        };
        check(
            unsafe {
                libc::timerfd_settime(
                    self.timer.as_raw_fd(),
                    libc::TFD_TIMER_ABSTIME,
                    &spec,
                    std::ptr::null_mut(),
                )
            },
            "timerfd_settime",
        )?;
        self.armed_ns = next;
        Ok(())
    }

    /// Handle pending signals; true when asked to stop.
    fn signals(&mut self) -> Result<bool> {
        let mut stop = false;
        loop {
            let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
            let size = std::mem::size_of_val(&info);
            let n = unsafe {
                libc::read(
                    self.signals.as_raw_fd(),
                    &mut info as *mut _ as *mut libc::c_void,
                    size,
                )
            };
            if n != size as isize {
                break;
            }
            match info.ssi_signo as libc::c_int {
                libc::SIGUSR1 => self.element.start(now_ns()),
                _ => stop = true,
            }
        }
        Ok(stop)
    }

    fn run(&mut self) -> Result<()> {
        let epoll = unsafe {
            OwnedFd::from_raw_fd(check(
                libc::epoll_create1(libc::EPOLL_CLOEXEC),
                "epoll_create1",
            )?)
        };
        for (fd, token) in [
            (self.queue.as_raw_fd(), TOKEN_QUEUE),
            (self.timer.as_raw_fd(), TOKEN_TIMER),
            (self.signals.as_raw_fd(), TOKEN_SIGNALS),
        ] {
            add_to_epoll(epoll.as_raw_fd(), fd, token)?;
        }
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 8];
        loop {
            let n = unsafe {
                libc::epoll_wait(
                    epoll.as_raw_fd(),
                    events.as_mut_ptr(),
                    events.len() as i32,
                    -1,
                )
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e).context("epoll_wait");
            }
            let mut stop = false;
            for ev in &events[..n as usize] {
                match ev.u64 {
                    TOKEN_QUEUE => self.receive()?,
                    TOKEN_TIMER => {
                        let mut expirations = 0u64;
                        unsafe {
                            libc::read(
                                self.timer.as_raw_fd(),
                                &mut expirations as *mut u64 as *mut libc::c_void,
                                8,
                            )
                        };
                        // The fired timer is spent: re-arm even if the next due time is unchanged.
                        self.armed_ns = None;
                    }
                    _ => stop |= self.signals()?,
                }
            }
            if stop {
                return self.shut_down();
            }
            self.release_due()?;
            self.arm_timer()?;
        }
    }

    /// Accept everything: what is still held, and what waits in the socket.
    fn shut_down(&mut self) -> Result<()> {
        let held = self.element.pop_all(now_ns());
        self.counters.released_at_shutdown += held.len() as u64;
        for h in held {
            self.queue
                .verdict(h.id, true)
                .context("accept verdict at shutdown")?;
        }
        loop {
            let mut waiting = Vec::new();
            match self.queue.recv_nonblocking(|id, _| waiting.push(id)) {
                Ok(false) => break,
                Ok(true) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => continue,
                Err(e) => return Err(e).context("receive from the queue at shutdown"),
            }
            self.counters.released_at_shutdown += waiting.len() as u64;
            for id in waiting {
                self.queue
                    .verdict(id, true)
                    .context("accept verdict at shutdown")?;
            }
        }
        Ok(())
    }
}

fn add_to_epoll(epoll: RawFd, fd: RawFd, token: u64) -> Result<()> {
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: token,
    };
    check(
        unsafe { libc::epoll_ctl(epoll, libc::EPOLL_CTL_ADD, fd, &mut ev) },
        "epoll_ctl",
    )?;
    Ok(())
}

fn cpu_seconds() -> (f64, f64) {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let secs = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (secs(ru.ru_utime), secs(ru.ru_stime))
}

fn stats_json(cli: &ScheduleCli, lp: &Loop, started_ns: u64) -> Value {
    let e = &lp.element;
    let dir_json = |s: &element::DirectionStats| {
        let hold = s
            .hold_ms()
            .map(|(mean, min, max)| json!({"mean": mean, "min": min, "max": max}));
        json!({"packets_seen": s.packets_seen, "dropped": s.dropped, "released": s.released,
               "not_drawn": s.not_drawn, "first_sends_dropped": s.first_sends_dropped, "hold_ms": hold})
    };
    let steps: Vec<Value> = e
        .schedule
        .steps
        .iter()
        .zip(&e.stats)
        .map(|(step, stats)| {
            json!({
                "at_s": step.at_s, "delay_ms": step.delay_ms,
                "loss_downlink": step.loss_downlink, "loss_uplink": step.loss_uplink,
                "downlink": dir_json(&stats[PacketDirection::Downlink as usize]),
                "uplink": dir_json(&stats[PacketDirection::Uplink as usize]),
            })
        })
        .collect();
    let packets: u64 = e
        .stats
        .iter()
        .flat_map(|s| DIRECTIONS.map(|d| s[d as usize].packets_seen))
        .sum::<u64>()
        + lp.counters.not_ipv4;
    let (user_s, system_s) = cpu_seconds();
    let per_packet = |s: f64| {
        if packets > 0 {
            Some(s * 1e6 / packets as f64)
        } else {
            None
        }
    };
    json!({
        "queue": cli.queue,
        "server_ip": cli.server_ip.to_string(),
        "seed": cli.seed,
        "loss_draws": match cli.loss_draws {
            LossDrawsArg::Packet => "packet",
            LossDrawsArg::Segment => "segment",
        },
        "clock_started": e.started(),
        "ran_s": (now_ns() - started_ns) as f64 / 1e9,
        "steps": steps,
        "packets_before_start": {"downlink": e.before_start[0], "uplink": e.before_start[1]},
        "packets": packets,
        "not_ipv4": lp.counters.not_ipv4,
        "released_at_shutdown": lp.counters.released_at_shutdown,
        "socket_overruns": lp.counters.socket_overruns,
        "cpu_s": {"user": user_s, "system": system_s},
        "user_cpu_us_per_packet": per_packet(user_s),
        "cpu_us_per_packet": per_packet(user_s + system_s),
    })
}

fn main() -> std::process::ExitCode {
    // One line naming what failed (the harness shows it), no backtrace.
    match run(ScheduleCli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ccswitch-schedule: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: ScheduleCli) -> Result<()> {
    let text = std::fs::read_to_string(&cli.schedule)
        .with_context(|| format!("read schedule {}", cli.schedule.display()))?;
    let schedule = Schedule::parse(&text)
        .map_err(|e| anyhow::anyhow!("schedule {}: {e}", cli.schedule.display()))?;
    if let Some(dir) = cli.stats.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.is_dir() {
            bail!(
                "--stats {}: directory {} does not exist",
                cli.stats.display(),
                dir.display()
            );
        }
    }

    // Signals arrive through the signalfd only: block them before anything else.
    let mut mask: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigemptyset(&mut mask);
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGUSR1] {
            libc::sigaddset(&mut mask, sig);
        }
        check(
            libc::pthread_sigmask(libc::SIG_BLOCK, &mask, std::ptr::null_mut()),
            "block signals",
        )?;
    }
    let signals = unsafe {
        OwnedFd::from_raw_fd(check(
            libc::signalfd(-1, &mask, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC),
            "signalfd",
        )?)
    };
    let timer = unsafe {
        OwnedFd::from_raw_fd(check(
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            ),
            "timerfd_create",
        )?)
    };
    // Releases are due at exact times: do not let the kernel coalesce our wake-ups (default slack 50 us).
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };

    let queue = NfQueue::bind(
        cli.queue,
        copy_range(cli.loss_draws),
        cli.queue_maxlen,
        cli.rcvbuf_mib << 20,
    )
    .with_context(|| {
        format!(
            "bind NFQUEUE {} (EBUSY: another process holds that queue number; EPERM: needs root)",
            cli.queue
        )
    })?;
    let started_ns = now_ns();
    let mut lp = Loop {
        queue,
        element: Element::new(
            schedule,
            match cli.loss_draws {
                LossDrawsArg::Packet => LossDraws::per_packet(cli.seed),
                LossDrawsArg::Segment => LossDraws::per_segment(cli.seed),
            },
        ),
        server_ip: cli.server_ip.octets(),
        timer,
        signals,
        armed_ns: None,
        counters: Counters::default(),
        verdicts: Vec::with_capacity(64),
    };
    if !cli.start_on_sigusr1 {
        lp.element.start(started_ns);
    }
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "ready")?;
        out.flush()?;
    }
    lp.run()?;
    if let Err(e) = lp.queue.unbind() {
        eprintln!("ccswitch-schedule: unbind queue {}: {e}", cli.queue);
    }
    let stats = stats_json(&cli, &lp, started_ns);
    let tmp = cli.stats.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(&stats)? + "\n")
        .with_context(|| format!("write {}", tmp.display()))?;
    std::fs::rename(&tmp, &cli.stats).with_context(|| format!("write {}", cli.stats.display()))?;
    Ok(())
}
