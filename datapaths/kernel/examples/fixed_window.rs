//! Loads the kernel datapath and pins every new flow to a fixed window.
//!
//! ```text
//! fixed_window [--cwnd BYTES] [--pacing BYTES_PER_S] [--fallback reno|cubic]
//!              [--name CC_NAME] [--seconds N]
//! ```
//! For every CREATE event it installs the directive (cwnd, optional pacing
//! rate) and keeps the agent deadline 500 ms ahead of now, so when this
//! process dies the flows drop to the fallback algorithm within 500 ms.
//! Prints one line per second: events/s by kind, ring drops, last cwnd.
//! Without --cwnd and --pacing it only observes (flows stay in fallback).
//! Prints "ready <cc_name>" once the congestion control is registered.

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use ccswitch_kernel::{monotonic_now_ns, Fallback, KernelDatapath, KernelEvent, LoadOptions};

const DEADLINE_AHEAD_NS: u64 = 500_000_000;

fn main() -> Result<()> {
    let mut cwnd: Option<u32> = None;
    let mut pacing: Option<u64> = None;
    let mut opts = LoadOptions::default();
    let mut seconds: Option<u64> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "--cwnd" => cwnd = Some(val()?.parse().context("--cwnd")?),
            "--pacing" => pacing = Some(val()?.parse().context("--pacing")?),
            "--name" => opts.cc_name = val()?,
            "--seconds" => seconds = Some(val()?.parse().context("--seconds")?),
            "--fallback" => {
                opts.fallback = match val()?.as_str() {
                    "reno" => Fallback::Reno,
                    "cubic" => Fallback::Cubic,
                    other => bail!("unknown fallback {other}"),
                }
            }
            "-h" | "--help" => {
                println!("fixed_window [--cwnd BYTES] [--pacing BYTES_PER_S] [--fallback reno|cubic] [--name CC] [--seconds N]");
                return Ok(());
            }
            other => bail!("unknown argument {other}"),
        }
    }
    if cwnd.is_none() && pacing.is_none() {
        eprintln!("no --cwnd/--pacing: observing only, every flow stays in fallback");
    }

    let mut dp = KernelDatapath::load(opts)?;
    dp.set_agent_valid_until(monotonic_now_ns() + DEADLINE_AHEAD_NS)?;
    println!("ready {}", dp.cc_name());
    for p in dp.prog_ids() {
        println!("prog {} id {}", p.name, p.id);
    }
    std::io::stdout().flush()?;

    let start = Instant::now();
    let mut last_report = Instant::now();
    let (mut creates, mut acks, mut closes) = (0u64, 0u64, 0u64);
    let mut last_cwnd = 0u32;
    loop {
        if seconds.is_some_and(|s| start.elapsed() >= Duration::from_secs(s)) {
            break;
        }
        dp.set_agent_valid_until(monotonic_now_ns() + DEADLINE_AHEAD_NS)?;
        let mut new_flows = Vec::new();
        let mut gone = Vec::new();
        dp.poll(Duration::from_millis(50), |ev| match ev {
            KernelEvent::Created(f) => {
                creates += 1;
                println!(
                    "created flow {} {} -> {} mss {}",
                    f.flow_id, f.src, f.dst, f.mss
                );
                new_flows.push(f.flow_id);
            }
            KernelEvent::Ack(a) => {
                acks += 1;
                last_cwnd = a.snd_cwnd_bytes;
            }
            // Only flows whose program the kernel runs report; this one runs none.
            KernelEvent::Report(_) | KernelEvent::ProgramReport(_) => {}
            KernelEvent::Closed { flow_id, .. } => {
                closes += 1;
                println!("closed flow {flow_id}");
                gone.push(flow_id);
            }
        })?;
        if cwnd.is_some() || pacing.is_some() {
            for id in new_flows {
                dp.set_directive(id, cwnd, pacing)?;
            }
        }
        for id in gone {
            dp.clear_directive(id)?;
        }
        let dt = last_report.elapsed();
        if dt >= Duration::from_secs(1) {
            let s = dp.stats();
            let per = |n: u64| n as f64 / dt.as_secs_f64();
            println!(
                "events/s: create {:.0} ack {:.0} close {:.0} | ring drops {} | acks directive {} fallback {} | last cwnd {} B",
                per(creates),
                per(acks),
                per(closes),
                s.ring_drops,
                s.acks_directive,
                s.acks_fallback,
                last_cwnd
            );
            std::io::stdout().flush()?;
            creates = 0;
            acks = 0;
            closes = 0;
            last_report = Instant::now();
        }
    }
    Ok(())
}
