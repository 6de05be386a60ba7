//! `ccswitch-probe`: attach, print `ready`, record until told to stop, write the files.
//!
//! ```text
//! ccswitch-probe --server-ip SIP [--server-ip SIP2 ...] --ports 8080,8081 \
//!                --sender NS:DEV [--sender NS2:DEV2 ...] --receiver-pid PID \
//!                --packets OUT.packets.bin --flows OUT.flows.json [--bpf-stats]
//! ```
//! Every (server address, port) pair is measured. The egress program goes on each sender's
//! DEV inside namespace NS, the ingress program on every non-loopback interface of the network
//! namespace of PID, the TCP state tracepoint host-wide. Then `ready` is printed on its own line.
//! The probe runs until SIGTERM, SIGINT or end of input on stdin, appending the ring's records
//! to the packets file every `--poll-ms`; then it detaches, drains the ring, writes the flows
//! file and exits 0. A setup failure prints one line naming what failed and exits 1, with
//! nothing left attached.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Parser;

use ccswitch_probe::loader::{self, Hook, ProbeOptions, Probe};
use ccswitch_probe::netns::Netns;
use ccswitch_probe::output::{FlowSummary, FlowsFile, FLOWS_FILE_VERSION};
use ccswitch_probe::monotonic_now_ns;

#[derive(Debug, Parser)]
#[command(name = "ccswitch-probe", about = "One-way delay of every delivered data segment, per flow, and the servers' TCP_INFO")]
struct Args {
    /// Server IPv4 address(es) whose segments are measured (repeat or separate with commas).
    #[arg(long = "server-ip", required = true, value_delimiter = ',')]
    server_ips: Vec<Ipv4Addr>,
    /// Server TCP ports (comma-separated, or repeated).
    #[arg(long, required = true, value_delimiter = ',')]
    ports: Vec<u16>,
    /// NS:DEV, a server namespace and its device toward the client (repeatable).
    #[arg(long = "sender", required = true)]
    senders: Vec<String>,
    /// A process in the client's innermost mahimahi namespace.
    #[arg(long)]
    receiver_pid: u32,
    /// Where the 24-byte packet records go.
    #[arg(long)]
    packets: PathBuf,
    /// Where the per-flow summary (JSON) goes.
    #[arg(long)]
    flows: PathBuf,
    /// Enable the kernel's BPF run-time statistics while running and write the programs'
    /// run counts and times to the flows file (costs every BPF program on the host a little).
    #[arg(long)]
    bpf_stats: bool,
    /// Milliseconds between reads of the ring buffer.
    #[arg(long, default_value_t = 50)]
    poll_ms: u64,
    /// Ring buffer bytes (power of two).
    #[arg(long, default_value_t = loader::DEFAULT_RING_BYTES)]
    ring_bytes: u32,
}

fn main() {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) if !e.use_stderr() => {
            // --help / --version
            let _ = e.print();
            std::process::exit(0);
        }
        Err(e) => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("bad arguments");
            eprintln!("ccswitch-probe: {first} (see --help)");
            std::process::exit(1);
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let mut recording = match setup(&args, &stop) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ccswitch-probe: {}", one_line(&e));
            std::process::exit(1);
        }
    };
    if let Err(e) = recording.run(&args, &stop) {
        eprintln!("ccswitch-probe: {}", one_line(&e));
        std::process::exit(1);
    }
}

/// The error and its causes on one line.
fn one_line(e: &anyhow::Error) -> String {
    e.chain().map(|c| c.to_string().replace('\n', " ")).collect::<Vec<_>>().join(": ")
}

struct Recording {
    probe: Probe,
    /// the server namespaces, for the TCP_INFO of their sockets still open at the end
    senders: Vec<(Netns, String)>,
    packets: BufWriter<File>,
    started_ns: u64,
    records: u64,
}

fn parse_sender(s: &str) -> Result<(String, String)> {
    match s.split_once(':') {
        Some((ns, dev)) if !ns.is_empty() && !dev.is_empty() => Ok((ns.to_string(), dev.to_string())),
        _ => bail!("bad --sender {s:?}: expected NAMESPACE:DEVICE"),
    }
}

fn setup(args: &Args, stop: &Arc<AtomicBool>) -> Result<Recording> {
    let senders = args.senders.iter().map(|s| parse_sender(s)).collect::<Result<Vec<_>>>()?;
    let mut endpoints = Vec::new();
    for ip in &args.server_ips {
        for port in &args.ports {
            if !endpoints.contains(&(*ip, *port)) {
                endpoints.push((*ip, *port));
            }
        }
    }
    if args.poll_ms == 0 {
        bail!("--poll-ms must be at least 1");
    }
    // Everything that can fail without touching the kernel comes first.
    let sender_ns = senders
        .iter()
        .map(|(ns, dev)| Ok((Netns::named(ns).with_context(|| format!("cannot attach egress on {dev} in {ns}"))?, dev.clone())))
        .collect::<Result<Vec<_>>>()?;
    let receiver_ns = Netns::of_pid(args.receiver_pid)?;
    let packets = File::create(&args.packets).with_context(|| format!("cannot create {}", args.packets.display()))?;

    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone()).context("installing the signal handlers")?;
    }
    let mut opts = ProbeOptions::new(endpoints);
    opts.ring_bytes = args.ring_bytes;
    // Dropping the probe on any error below detaches whatever was attached already.
    let mut probe = Probe::load(&opts)?;
    if args.bpf_stats {
        probe.enable_run_time_stats()?;
    }
    for (ns, dev) in &sender_ns {
        probe.attach(Hook::Egress, Some(ns), dev)?;
    }
    probe.attach_ingress_everywhere(&receiver_ns)?;
    probe.attach_tcp_state()?;

    let started_ns = monotonic_now_ns();
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready").and_then(|_| out.flush()).context("writing ready to stdout")?;

    // End of input on stdin also stops the probe (the harness closes the pipe, or dies).
    let eof = stop.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 256];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
        eof.store(true, Ordering::SeqCst);
    });
    Ok(Recording { probe, senders: sender_ns, packets: BufWriter::with_capacity(1 << 20, packets), started_ns, records: 0 })
}

impl Recording {
    fn run(&mut self, args: &Args, stop: &AtomicBool) -> Result<()> {
        let poll = Duration::from_millis(args.poll_ms);
        while !stop.load(Ordering::SeqCst) {
            std::thread::sleep(poll);
            self.drain(args)?;
        }
        let stopped_ns = monotonic_now_ns();
        for (ns, _) in &self.senders {
            if let Err(e) = self.probe.snapshot_live_sockets(Some(ns)) {
                eprintln!("ccswitch-probe: TCP_INFO of the sockets still open in {}: {e:#}", ns.label);
            }
        }
        // Detach first, so that the last drain sees every record ever submitted.
        self.probe.detach();
        self.drain(args)?;
        self.packets.flush().with_context(|| format!("writing {}", args.packets.display()))?;
        let counters = self.probe.counters();
        let flows = self
            .probe
            .flows()
            .iter()
            .map(|(key, f)| FlowSummary::new(key, f, self.probe.tcp_info(key)))
            .collect();
        let file = FlowsFile {
            version: FLOWS_FILE_VERSION,
            clock: "CLOCK_MONOTONIC",
            started_ns: self.started_ns,
            stopped_ns,
            ring_records: self.records,
            ring_dropped: counters.ring_dropped,
            stamps_lost: counters.stamps_lost,
            flows_lost: counters.flows_lost,
            flows,
            programs: args.bpf_stats.then(|| self.probe.prog_stats()),
        };
        file.write(&args.flows)?;
        if self.probe.malformed() > 0 {
            eprintln!("ccswitch-probe: {} ring records of the wrong size were skipped", self.probe.malformed());
        }
        Ok(())
    }

    fn drain(&mut self, args: &Args) -> Result<()> {
        let packets = &mut self.packets;
        // The records are little-endian on the machines this runs on (x86-64, arm64): they are
        // written as the kernel laid them out.
        self.records += self.probe.drain(&mut |bytes| {
            packets.write_all(bytes).with_context(|| format!("writing {}", args.packets.display()))
        })?;
        Ok(())
    }
}

#[cfg(not(target_endian = "little"))]
compile_error!("the packet records are written as laid out in memory, which must be little-endian");
