//! Loading the probe's programs, attaching them, and reading back what they measured.
//!
//! The packet programs attach with TCX links owned by [`Probe`] (as the ovs datapath's do): no
//! qdisc is created or removed, another program or clsact filter on the same device keeps
//! running (the probe's programs return `TCX_NEXT`), and the links go when the probe drops
//! them, or when its process dies however it dies, so nothing is ever left attached. The
//! egress program goes last in its device's chain (closest to the wire on the way out), the
//! ingress program first (closest to the wire on the way in).

use std::io::Read;
use std::cell::RefCell;
use std::mem::{size_of, MaybeUninit};
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::rc::Rc;

use anyhow::{bail, Context, Result};
use ccswitch_datapath_support::object::SkeletonStorage;
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{AsRawLibbpf, Link, MapCore, MapFlags, OpenObject, RingBuffer, RingBufferBuilder};

use crate::abi::{self, as_bytes, from_bytes};
use crate::netns::{self, Netns};
use crate::skel::{ProbeSkel, ProbeSkelBuilder};

/// Return value of the packet programs: pass the packet on, unchanged, to what comes next.
pub const RET_NEXT: i32 = -1;

/// Sizes of the maps; the defaults suit one transfer of a few flows.
#[derive(Debug, Clone)]
pub struct ProbeOptions {
    /// (server address, server port) pairs whose data segments are measured.
    pub endpoints: Vec<(Ipv4Addr, u16)>,
    /// Ring buffer bytes (a power of two, at least a page): 32 bytes per record. A full ring
    /// loses records (counted, `ring_dropped`).
    pub ring_bytes: u32,
    /// Stamps of segments in flight, over all flows (LRU: the oldest go first).
    pub max_in_flight: u32,
    /// Flows counted (and TCP_INFO snapshots kept).
    pub max_flows: u32,
}

pub const DEFAULT_RING_BYTES: u32 = 16 << 20;
pub const DEFAULT_MAX_IN_FLIGHT: u32 = 1 << 18;
pub const DEFAULT_MAX_FLOWS: u32 = 1 << 14;

impl ProbeOptions {
    pub fn new(endpoints: Vec<(Ipv4Addr, u16)>) -> Self {
        ProbeOptions {
            endpoints,
            ring_bytes: DEFAULT_RING_BYTES,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            max_flows: DEFAULT_MAX_FLOWS,
        }
    }
}

/// Which packet program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    /// The server's egress: stamps.
    Egress,
    /// The client's ingress: matches and records.
    Ingress,
}

/// Kernel run-time statistics of one program (counted only while statistics are enabled,
/// see [`Probe::enable_run_time_stats`]).
#[derive(Debug, Clone, serde::Serialize)]
pub struct ProbeProgStats {
    pub name: String,
    pub run_cnt: u64,
    pub run_time_ns: u64,
}

/// Records drained from the ring, as raw 24-byte records, and the count of records whose
/// size was not 24 (never expected).
#[derive(Default)]
struct Drained {
    bytes: Vec<u8>,
    malformed: u64,
}

/// The loaded probe. Dropping it detaches everything it attached.
pub struct Probe {
    // Field order is drop order: links (detaching) first, then the ring, the skeleton and
    // last the storage the skeleton borrows.
    links: Vec<Link>,
    attached: Vec<String>,
    ring: RingBuffer<'static>,
    drained: Rc<RefCell<Drained>>,
    skel: ProbeSkel<'static>,
    stats_fd: Option<OwnedFd>,
    _object: SkeletonStorage,
}

impl Probe {
    /// Loads the programs and fills the endpoint set; nothing is attached yet.
    pub fn load(opts: &ProbeOptions) -> Result<Probe> {
        if !opts.ring_bytes.is_power_of_two() || opts.ring_bytes < 4096 {
            bail!("ring size must be a power of two of at least 4096 bytes: {}", opts.ring_bytes);
        }
        if opts.endpoints.is_empty() {
            bail!("no server endpoint to measure (give --server-ip and --ports)");
        }
        if opts.max_in_flight == 0 || opts.max_flows == 0 {
            bail!("max_in_flight and max_flows must be at least 1");
        }
        let object = SkeletonStorage::new();
        // SAFETY: what borrows it either goes into the probe, declared before it, or is
        // dropped inside load_into when that fails.
        let storage = unsafe { object.open_into() };
        let (skel, ring, drained) = Self::load_into(storage, opts)?;
        Ok(Probe { links: Vec::new(), attached: Vec::new(), ring, drained, skel, stats_fd: None, _object: object })
    }

    #[allow(clippy::type_complexity)]
    fn load_into(
        storage: &'static mut MaybeUninit<OpenObject>,
        opts: &ProbeOptions,
    ) -> Result<(ProbeSkel<'static>, RingBuffer<'static>, Rc<RefCell<Drained>>)> {
        let mut open = ProbeSkelBuilder::default().open(storage).context("opening the probe's BPF object")?;
        let m = &mut open.maps;
        m.probe_records.set_max_entries(opts.ring_bytes).context("sizing the ring buffer")?;
        m.probe_segments.set_max_entries(opts.max_in_flight).context("sizing the stamp map")?;
        m.probe_flows.set_max_entries(opts.max_flows).context("sizing the flow map")?;
        m.probe_tcp_infos.set_max_entries(opts.max_flows).context("sizing the TCP_INFO map")?;
        m.probe_endpoints
            .set_max_entries(opts.endpoints.len().max(1) as u32)
            .context("sizing the endpoint set")?;
        let skel = open.load().context("loading the probe's BPF programs (verifier)")?;
        for (ip, port) in &opts.endpoints {
            let ep = abi::ProbeEndpoint { ip: u32::from(*ip).to_be(), port: port.to_be(), _pad: 0 };
            skel.maps
                .probe_endpoints
                .update(as_bytes(&ep), &[1u8], MapFlags::ANY)
                .with_context(|| format!("adding endpoint {ip}:{port}"))?;
        }
        let drained = Rc::new(RefCell::new(Drained::default()));
        let sink = drained.clone();
        let mut builder = RingBufferBuilder::new();
        builder
            .add(&skel.maps.probe_records, move |data: &[u8]| {
                let mut d = sink.borrow_mut();
                if data.len() == size_of::<abi::ProbeRecord>() {
                    d.bytes.extend_from_slice(data);
                } else {
                    d.malformed += 1;
                }
                0
            })
            .context("ring buffer")?;
        let ring = builder.build().context("ring buffer")?;
        Ok((skel, ring, drained))
    }

    /// Attaches `hook`'s program to interface `dev` of namespace `ns` (the probe's own
    /// namespace when `None`). The error names the device and the namespace.
    pub fn attach(&mut self, hook: Hook, ns: Option<&Netns>, dev: &str) -> Result<()> {
        let what = match hook {
            Hook::Egress => "egress",
            Hook::Ingress => "ingress",
        };
        let place = match ns {
            Some(ns) => format!("{dev} in {}", ns.label),
            None => dev.to_string(),
        };
        let _entered = ns.map(|ns| ns.enter()).transpose().with_context(|| format!("cannot attach {what} on {place}"))?;
        let idx = netns::ifindex(dev).with_context(|| format!("cannot attach {what} on {place}"))?;
        self.attach_index(hook, idx).with_context(|| format!("cannot attach {what} on {place}"))
    }

    /// Attaches the ingress program to every interface of `ns` but loopback; returns their
    /// names (an error when there is none).
    pub fn attach_ingress_everywhere(&mut self, ns: &Netns) -> Result<Vec<String>> {
        let _entered = ns.enter()?;
        let devs = netns::non_loopback_interfaces().with_context(|| format!("listing the interfaces of {}", ns.label))?;
        if devs.is_empty() {
            bail!("no interface but loopback in the network namespace of {}", ns.label);
        }
        for (name, idx) in &devs {
            self.attach_index(Hook::Ingress, *idx)
                .with_context(|| format!("cannot attach ingress on {name} in {}", ns.label))?;
        }
        Ok(devs.into_iter().map(|(n, _)| n).collect())
    }

    /// Attaches by interface index in the calling thread's namespace.
    fn attach_index(&mut self, hook: Hook, ifindex: u32) -> Result<()> {
        let (prog, flags) = match hook {
            Hook::Egress => (self.skel.progs.probe_egress.as_libbpf_object(), libbpf_sys::BPF_F_AFTER),
            Hook::Ingress => (self.skel.progs.probe_ingress.as_libbpf_object(), libbpf_sys::BPF_F_BEFORE),
        };
        let opts = libbpf_sys::bpf_tcx_opts {
            sz: size_of::<libbpf_sys::bpf_tcx_opts>() as _,
            flags,
            ..Default::default()
        };
        // SAFETY: the program belongs to the loaded skeleton, which outlives the link.
        let link = unsafe { libbpf_sys::bpf_program__attach_tcx(prog.as_ptr(), ifindex as i32, &opts) };
        let Some(link) = NonNull::new(link) else {
            bail!("TCX attach: {}", std::io::Error::last_os_error());
        };
        // SAFETY: libbpf handed over ownership of the link.
        self.links.push(unsafe { Link::from_ptr(link) });
        self.attached.push(format!("{hook:?}@{ifindex}"));
        Ok(())
    }

    /// Attaches the TCP state-change tracepoint (TCP_INFO snapshots).
    pub fn attach_tcp_state(&mut self) -> Result<()> {
        let link = self
            .skel
            .progs
            .probe_set_state
            .attach()
            .context("cannot attach the tracepoint sock/inet_sock_set_state")?;
        self.links.push(link);
        Ok(())
    }

    /// Snapshots the TCP_INFO of every measured server socket still alive in namespace `ns`
    /// (the `iter/tcp` program; a TCP iterator walks the sockets of the namespace it is
    /// created in).
    pub fn snapshot_live_sockets(&mut self, ns: Option<&Netns>) -> Result<()> {
        let _entered = ns.map(|ns| ns.enter()).transpose()?;
        let link = self.skel.progs.probe_live_sockets.attach().context("attaching the TCP socket iterator")?;
        let mut iter = libbpf_rs::Iter::new(&link).context("creating the TCP socket iterator")?;
        let mut sink = Vec::new();
        iter.read_to_end(&mut sink).context("running the TCP socket iterator")?;
        Ok(())
    }

    /// Detaches every program (idempotent). The maps stay readable.
    pub fn detach(&mut self) {
        self.links.clear();
    }

    /// Enables the kernel's run-time statistics of BPF programs while the probe lives (a
    /// host-wide switch, held by a file descriptor: it costs every program two clock reads).
    pub fn enable_run_time_stats(&mut self) -> Result<()> {
        // SAFETY: plain syscall wrapper: an fd we own or a negative errno.
        let fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
        if fd < 0 {
            bail!("enabling BPF run-time statistics: {}", std::io::Error::from_raw_os_error(-fd));
        }
        // SAFETY: fresh fd owned by nobody else.
        self.stats_fd = Some(unsafe { OwnedFd::from_raw_fd(fd) });
        Ok(())
    }

    /// Run counts and times of the two packet programs and the tracepoint.
    pub fn prog_stats(&self) -> Vec<ProbeProgStats> {
        let p = &self.skel.progs;
        [&p.probe_egress, &p.probe_ingress, &p.probe_set_state]
            .iter()
            .filter_map(|prog| {
                // SAFETY: zeroed bpf_prog_info is valid; the kernel fills at most `len` bytes.
                let mut info: libbpf_sys::bpf_prog_info = unsafe { std::mem::zeroed() };
                let mut len = size_of::<libbpf_sys::bpf_prog_info>() as u32;
                let rc = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(prog.as_fd().as_raw_fd(), &mut info, &mut len) };
                (rc == 0).then(|| ProbeProgStats {
                    name: prog.name().to_string_lossy().into_owned(),
                    run_cnt: info.run_cnt,
                    run_time_ns: info.run_time_ns,
                })
            })
            .collect()
    }

    /// Consumes every record in the ring and hands their bytes (24 per record, in ring
    /// order) to `out`; returns the number of records.
    pub fn drain(&mut self, out: &mut impl FnMut(&[u8]) -> Result<()>) -> Result<u64> {
        let rc = self.ring.consume_raw();
        if rc < 0 {
            bail!("reading the ring buffer: {}", std::io::Error::from_raw_os_error(-rc));
        }
        let bytes = std::mem::take(&mut self.drained.borrow_mut().bytes);
        out(&bytes)?;
        Ok((bytes.len() / size_of::<abi::ProbeRecord>()) as u64)
    }

    /// Ring records of a size other than 24 bytes (none, unless the two sides disagree).
    pub fn malformed(&self) -> u64 {
        self.drained.borrow().malformed
    }

    /// Every flow seen, in flow-number order.
    pub fn flows(&self) -> Vec<(abi::ProbeFlowKey, abi::ProbeFlow)> {
        let map = &self.skel.maps.probe_flows;
        let mut out: Vec<_> = map
            .keys()
            .filter_map(|k| {
                let key = from_bytes::<abi::ProbeFlowKey>(&k)?;
                let v = map.lookup(&k, MapFlags::ANY).ok()??;
                Some((key, from_bytes::<abi::ProbeFlow>(&v)?))
            })
            .collect();
        out.sort_by_key(|(_, f)| f.flow);
        out
    }

    /// The latest TCP_INFO snapshot of a flow's server socket, if it left ESTABLISHED.
    pub fn tcp_info(&self, key: &abi::ProbeFlowKey) -> Option<abi::ProbeTcpInfo> {
        let v = self.skel.maps.probe_tcp_infos.lookup(as_bytes(key), MapFlags::ANY).ok()??;
        from_bytes(&v)
    }

    /// The programs' own counters.
    pub fn counters(&self) -> abi::ProbeCounters {
        self.skel.maps.bss_data.as_deref().map(|b| {
            // SAFETY: the programs update these through the same mapped page.
            let c = unsafe { std::ptr::read_volatile(&b.probe_counters) };
            abi::ProbeCounters {
                records: c.records,
                ring_dropped: c.ring_dropped,
                stamps_lost: c.stamps_lost,
                flows_lost: c.flows_lost,
            }
        })
        .unwrap_or_default()
    }

    /// Runs one packet program on an Ethernet `frame` with BPF_PROG_TEST_RUN, against the
    /// real maps; `gso_segs` > 1 with `gso_size` makes it a GSO packet. Returns the
    /// program's return value.
    pub fn test_run(&self, hook: Hook, frame: &[u8], gso_segs: u32, gso_size: u32) -> Result<i32> {
        const GSO_SEGS_OFF: usize = 164; // offsetof(struct __sk_buff, gso_segs)
        const GSO_SIZE_OFF: usize = 176; // offsetof(struct __sk_buff, gso_size)
        let mut ctx = [0u8; GSO_SIZE_OFF + 4];
        ctx[GSO_SEGS_OFF..GSO_SEGS_OFF + 4].copy_from_slice(&gso_segs.to_ne_bytes());
        ctx[GSO_SIZE_OFF..].copy_from_slice(&gso_size.to_ne_bytes());
        let mut out = vec![0u8; frame.len() + 256];
        let prog = match hook {
            Hook::Egress => &self.skel.progs.probe_egress,
            Hook::Ingress => &self.skel.progs.probe_ingress,
        };
        let input = libbpf_rs::ProgramInput {
            context_in: Some(&mut ctx[..]),
            data_in: Some(frame),
            data_out: Some(&mut out[..]),
            repeat: 1,
            ..Default::default()
        };
        let res = prog.test_run(input).context("BPF_PROG_TEST_RUN")?;
        Ok(res.return_value as i32)
    }
}
