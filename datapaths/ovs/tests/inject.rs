//! Live re-injection through a real bridge: a server and a client in their own network
//! namespaces, joined by a Linux bridge or by an Open vSwitch bridge (userspace datapath, own
//! ovsdb-server/ovs-vswitchd with private directories). The port programs are attached to the
//! server's port; a data frame the server sent is stored from its SEGMENT record and injected
//! again. The test checks that
//!  - the identical frame (checksum completed) arrives in the client namespace,
//!  - the client's TCP accepted it as a valid duplicate: its next ACK carries a D-SACK block
//!    for exactly that range (so the checksum was right),
//!  - the ingress program saw it again: as a SEGMENT record with the same range, since it lies
//!    within the reordering allowance below the highest sequence (userspace tells it apart).
//!
//! Needs root. Everything created is removed by a guard, also when an assertion fails.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ccswitch_ovs::loader::{complete_tcp_checksum, raise_tcp_tsval, AttachOptions, OvsDatapath};
use ccswitch_ovs::events::{OvsEvent, Segment};

fn sh(args: &[&str]) -> Result<(), String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{args:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn must(args: &[&str]) {
    sh(args).unwrap_or_else(|e| panic!("{e}"))
}

/// Namespaces, links, bridge and OVS daemons of one test; removed on drop.
struct Topology {
    tag: String,
    srv_ns: String,
    cli_ns: String,
    srv_port: String,
    cli_port: String,
    bridge: String,
    ovs: Option<Ovs>,
}

struct Ovs {
    dir: PathBuf,
    pids: Vec<i32>,
}

impl Ovs {
    fn env(&self) -> [(&'static str, PathBuf); 3] {
        [
            ("OVS_RUNDIR", self.dir.clone()),
            ("OVS_LOGDIR", self.dir.clone()),
            ("OVS_DBDIR", self.dir.clone()),
        ]
    }
    fn run(&self, args: &[&str]) {
        let out = Command::new(args[0])
            .args(&args[1..])
            .envs(self.env())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    fn start(dir: PathBuf) -> Ovs {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut ovs = Ovs {
            dir,
            pids: Vec::new(),
        };
        let d = ovs.dir.display().to_string();
        ovs.run(&[
            "ovsdb-tool",
            "create",
            &format!("{d}/conf.db"),
            "/usr/share/openvswitch/vswitch.ovsschema",
        ]);
        ovs.run(&[
            "ovsdb-server",
            &format!("{d}/conf.db"),
            &format!("--remote=punix:{d}/db.sock"),
            "--pidfile",
            "--log-file",
            "--detach",
        ]);
        ovs.pids.push(ovs.pid("ovsdb-server"));
        ovs.run(&["ovs-vsctl", "--no-wait", "init"]);
        ovs.run(&[
            "ovs-vswitchd",
            &format!("unix:{d}/db.sock"),
            "--pidfile",
            "--log-file",
            "--detach",
        ]);
        ovs.pids.push(ovs.pid("ovs-vswitchd"));
        ovs
    }
    fn pid(&self, daemon: &str) -> i32 {
        let p = self.dir.join(format!("{daemon}.pid"));
        std::fs::read_to_string(&p).unwrap().trim().parse().unwrap()
    }
}

impl Drop for Ovs {
    fn drop(&mut self) {
        for &pid in self.pids.iter().rev() {
            // SAFETY: signalling a process this test started, by its PID.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        for &pid in &self.pids {
            while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
                // The daemons detached (their parent is init), so they are reaped elsewhere;
                // a zombie entry has no command line any more.
                if std::fs::read(format!("/proc/{pid}/cmdline"))
                    .map(|c| c.is_empty())
                    .unwrap_or(true)
                {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Topology {
    /// srv netns (10.X.0.1) and cli netns (10.X.0.2), each with a veth into the bridge.
    fn new(kind: char, subnet: u8, ovs: bool) -> Topology {
        let pid = std::process::id();
        let tag = format!("{kind}{pid}");
        let mut t = Topology {
            srv_ns: format!("ccswi-s{tag}"),
            cli_ns: format!("ccswi-c{tag}"),
            srv_port: format!("cs{tag}s"),
            cli_port: format!("cs{tag}c"),
            bridge: format!("cs{tag}b"),
            tag,
            ovs: None,
        };
        must(&["ip", "netns", "add", &t.srv_ns]);
        must(&["ip", "netns", "add", &t.cli_ns]);
        for (port, ns, ip) in [(&t.srv_port, &t.srv_ns, 1), (&t.cli_port, &t.cli_ns, 2)] {
            must(&[
                "ip", "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns,
            ]);
            must(&[
                "ip",
                "-n",
                ns,
                "addr",
                "add",
                &format!("10.{subnet}.0.{ip}/24"),
                "dev",
                "eth0",
            ]);
            must(&["ip", "-n", ns, "link", "set", "eth0", "up"]);
            must(&["ip", "-n", ns, "link", "set", "lo", "up"]);
            must(&["ip", "link", "set", port, "up"]);
            if ovs {
                // The userspace datapath does not complete checksums (ENVIRONMENT.md).
                must(&[
                    "ip", "netns", "exec", ns, "ethtool", "-K", "eth0", "tx", "off",
                ]);
            }
        }
        if ovs {
            let o = Ovs::start(std::env::temp_dir().join(format!("ccswitch-inject-{}", t.tag)));
            o.run(&[
                "ovs-vsctl",
                "add-br",
                &t.bridge,
                "--",
                "set",
                "bridge",
                &t.bridge,
                "datapath_type=netdev",
            ]);
            o.run(&["ovs-vsctl", "add-port", &t.bridge, &t.srv_port]);
            o.run(&["ovs-vsctl", "add-port", &t.bridge, &t.cli_port]);
            t.ovs = Some(o);
        } else {
            must(&["ip", "link", "add", &t.bridge, "type", "bridge"]);
            must(&["ip", "link", "set", &t.bridge, "up"]);
            must(&["ip", "link", "set", &t.srv_port, "master", &t.bridge]);
            must(&["ip", "link", "set", &t.cli_port, "master", &t.bridge]);
        }
        t
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        if let Some(o) = &self.ovs {
            let _ = Command::new("ovs-vsctl")
                .args(["--timeout=5", "del-br", &self.bridge])
                .envs(o.env())
                .output();
        }
        self.ovs = None;
        let _ = sh(&["ip", "link", "del", &self.srv_port]);
        let _ = sh(&["ip", "link", "del", &self.cli_port]);
        let _ = sh(&["ip", "link", "del", &self.bridge]);
        let _ = sh(&["ip", "netns", "del", &self.srv_ns]);
        let _ = sh(&["ip", "netns", "del", &self.cli_ns]);
    }
}

fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> JoinHandle<T> {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let fd = File::open(&path).unwrap();
        // SAFETY: setns on this thread only, with a namespace fd we opened.
        assert_eq!(
            unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) },
            0,
            "setns {path}"
        );
        f()
    })
}

/// A packet socket on `eth0` of `ns` (the socket stays bound to that namespace's device).
fn capture_socket(ns: &str) -> OwnedFd {
    in_netns(ns, || {
        // SAFETY: plain socket calls; the fd is owned by the returned OwnedFd.
        unsafe {
            let fd = libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW,
                (libc::ETH_P_ALL as u16).to_be() as i32,
            );
            assert!(fd >= 0);
            let owned = OwnedFd::from_raw_fd(fd);
            let mut sll: libc::sockaddr_ll = std::mem::zeroed();
            sll.sll_family = libc::AF_PACKET as u16;
            sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
            sll.sll_ifindex = libc::if_nametoindex(c"eth0".as_ptr()) as i32;
            let rc = libc::bind(
                fd,
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of_val(&sll) as u32,
            );
            assert_eq!(rc, 0);
            let tv = libc::timeval {
                tv_sec: 0,
                tv_usec: 200_000,
            };
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                16,
            );
            owned
        }
    })
    .join()
    .unwrap()
}

/// The 4 bytes of the TCP timestamp value of an Ethernet/IPv4/TCP frame (options walked).
fn timestamp_value(frame: &[u8]) -> &[u8] {
    let l4 = 14 + usize::from(frame[14] & 0xf) * 4;
    let doff = usize::from(frame[l4 + 12] >> 4) * 4;
    let mut i = l4 + 20;
    while i < l4 + doff {
        match frame[i] {
            1 => i += 1,
            8 => return &frame[i + 2..i + 6],
            _ => i += usize::from(frame[i + 1]).max(1),
        }
    }
    panic!("no timestamp option");
}

fn recv_frame(fd: &OwnedFd) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 65536];
    // SAFETY: buffer valid for its length.
    let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    (n > 0).then(|| {
        buf.truncate(n as usize);
        buf
    })
}

fn inject_through(kind: char, subnet: u8, ovs: bool) {
    let topo = Topology::new(kind, subnet, ovs);
    let mut dp = OvsDatapath::attach(AttachOptions {
        ifname: topo.srv_port.clone(),
        max_flows: 1024,
        ring_bytes: 1 << 22,
        slab_slots: 1024,
    })
    .expect("attach");
    let server: SocketAddr = format!("10.{subnet}.0.1:5001").parse().unwrap();
    let payload: Vec<u8> = (0..1000u32).map(|i| (i * 13 + 1) as u8).collect();

    let (ready_tx, ready_rx) = mpsc::channel();
    let (srv_done_tx, srv_done_rx) = mpsc::channel::<()>();
    let (cli_done_tx, cli_done_rx) = mpsc::channel::<()>();
    let data = payload.clone();
    let srv = in_netns(&topo.srv_ns, move || {
        let l = TcpListener::bind(server).unwrap();
        ready_tx.send(()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        s.write_all(&data).unwrap();
        let _ = srv_done_rx.recv_timeout(Duration::from_secs(30));
    });
    ready_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("listener");
    let n = payload.len();
    let cli = in_netns(&topo.cli_ns, move || {
        let mut s = TcpStream::connect_timeout(&server, Duration::from_secs(10)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut got = vec![0u8; n];
        s.read_exact(&mut got).unwrap();
        let _ = cli_done_rx.recv_timeout(Duration::from_secs(30));
        got
    });

    // Wait for the server's data segment.
    let mut seg: Option<Segment> = None;
    let mut established = false;
    let deadline = Instant::now() + Duration::from_secs(15);
    while seg.is_none() && Instant::now() < deadline {
        dp.poll(Duration::from_millis(100), |e| match e {
            OvsEvent::Established(_) => established = true,
            OvsEvent::Segment(s) if s.len as usize == n => seg = Some(s),
            _ => {}
        })
        .unwrap();
    }
    assert!(established, "ESTABLISHED record");
    let seg = seg.expect("SEGMENT record with the server's data");
    let stored = dp.frame(&seg.frame).expect("the frame in its slab slot").to_vec();
    assert!(
        stored.ends_with(&payload),
        "the stored frame carries the payload"
    );

    let cap = capture_socket(&topo.cli_ns);
    // Let the client's ACK of the original pass before injecting.
    std::thread::sleep(Duration::from_millis(200));
    while recv_frame(&cap).is_some() {}
    let before = dp.stats();

    dp.inject_slot(&seg.frame).expect("inject");

    let mut expected = stored.clone();
    assert!(complete_tcp_checksum(&mut expected));
    let mut arrived = false;
    let deadline = Instant::now() + Duration::from_secs(5);
    while !arrived && Instant::now() < deadline {
        if let Some(f) = recv_frame(&cap) {
            arrived = f == expected;
        }
    }
    assert!(
        arrived,
        "the injected frame reached the client namespace unchanged"
    );
    // A batch: three copies staged, then sent by one run of the inject program, their
    // timestamp raised to a value the server's clock has passed since (as after a
    // retransmission of its own): the client takes them (the D-SACK below), PAWS passes.
    let floor = u32::from_be_bytes(timestamp_value(&stored).try_into().unwrap()).wrapping_add(100);
    let mut expected = stored.clone();
    assert!(raise_tcp_tsval(&mut expected, floor), "the server's frame carries timestamps");
    assert!(complete_tcp_checksum(&mut expected));
    for _ in 0..3 {
        dp.queue_inject_slot(&seg.frame, Some(floor)).expect("stage");
    }
    assert_eq!(dp.flush_injections().expect("inject the batch"), 3);
    assert_eq!(dp.flush_injections().expect("nothing staged"), 0);
    let mut copies = 0;
    let deadline = Instant::now() + Duration::from_secs(5);
    while copies < 3 && Instant::now() < deadline {
        if let Some(f) = recv_frame(&cap) {
            copies += usize::from(f == expected);
        }
    }
    assert_eq!(copies, 3, "every frame of the batch reached the client namespace, its timestamp raised");

    let mut seen_again = false;
    let mut dsack = false;
    let deadline = Instant::now() + Duration::from_secs(5);
    while (!seen_again || !dsack) && Instant::now() < deadline {
        dp.poll(Duration::from_millis(100), |e| match e {
            OvsEvent::Resent(r) => {
                seen_again |= (r.flow_id, r.seq, r.len) == (seg.flow_id, seg.seq, seg.len);
            }
            OvsEvent::Ack(a) => {
                let end = seg.seq.wrapping_add(seg.len);
                dsack |= a
                    .sack
                    .first()
                    .is_some_and(|b| b.start == seg.seq && b.end == end);
            }
            _ => {}
        })
        .unwrap();
    }
    assert!(seen_again, "the ingress program saw the injected frame again, and reported it without its frame");
    assert!(
        dsack,
        "the client's TCP accepted the duplicate (D-SACK for its range)"
    );
    let after = dp.stats();
    // The mark ccsw_inject leaves in the frames' metadata reached the ingress program: no
    // copy went into the slab again.
    assert_eq!(
        (after.copies_seen, after.segments),
        (before.copies_seen + 4, before.segments),
        "the ingress program knew all four copies as the shim's"
    );

    let stats = dp.prog_stats();
    assert_eq!(stats.len(), 2);
    assert!(
        stats
            .iter()
            .all(|p| p.name.starts_with("ccsw_") && p.run_cnt > 0),
        "{stats:?}"
    );

    srv_done_tx.send(()).unwrap();
    cli_done_tx.send(()).unwrap();
    srv.join().unwrap();
    assert_eq!(cli.join().unwrap(), payload);

    // Dropping the datapath detaches everything: nothing of ours stays on the port.
    drop(dp);
    assert_eq!(
        ccswitch_ovs::loader::detach_port(&topo.srv_port).unwrap(),
        0
    );
    drop(topo);
}

#[test]
fn inject_through_linux_bridge() {
    inject_through('l', 231, false);
}

#[test]
fn inject_through_open_vswitch() {
    inject_through('o', 232, true);
}

#[test]
fn detach_port_removes_programs_of_another_owner() {
    let topo = Topology::new('d', 233, false);
    let dp = OvsDatapath::attach(AttachOptions {
        ifname: topo.srv_port.clone(),
        max_flows: 64,
        ring_bytes: 1 << 16,
        slab_slots: 64,
    })
    .expect("attach");
    assert_eq!(
        ccswitch_ovs::loader::detach_port(&topo.srv_port).unwrap(),
        2
    );
    assert_eq!(
        ccswitch_ovs::loader::detach_port(&topo.srv_port).unwrap(),
        0
    );
    drop(dp);
}
