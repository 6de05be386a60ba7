//! The shim's portus transport (`--agent-ipc portus-unix`) against stand-in agents that
//! address their answers the way portus 0.7 and 0.9 do (`src/ipc/unix.rs` of each: 0.7 sends
//! to `"/tmp/ccp/" + source address`, 0.9 to the source address as given). Needs no root
//! and no BPF: only the link is exercised. Each test uses its own socket directory.

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use ccswitch_protocol::wire::{self, Measure, Msg, Ready, UpdateField, UpdateFields};
use ccswitch_ccp::agent_link::{AgentAddr, AgentLink, FromAgent, PortusAddr, ReplyAddr};

static SEQ: AtomicU32 = AtomicU32::new(0);

struct Dir(PathBuf);

impl Dir {
    fn new() -> Dir {
        let p = std::env::temp_dir().join(format!(
            "ccsw-pipc-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn addr(dir: &Path, reply_addr: ReplyAddr) -> PortusAddr {
    PortusAddr {
        dir: dir.to_path_buf(),
        agent: "portus".into(),
        name: "dp".into(),
        reply_addr,
    }
}

/// A stand-in agent bound where portus binds, answering as the given portus version does.
struct FakePortusAgent {
    sock: UnixDatagram,
    dir: PathBuf,
    reply_addr: ReplyAddr,
}

impl FakePortusAgent {
    fn bind(dir: &Path, reply_addr: ReplyAddr) -> FakePortusAgent {
        let path = dir.join("portus");
        let _ = std::fs::remove_file(&path);
        let sock = UnixDatagram::bind(&path).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        FakePortusAgent {
            sock,
            dir: dir.to_path_buf(),
            reply_addr,
        }
    }

    /// One datagram and the address it came from, as portus's `recv` reports it.
    fn recv(&self) -> (Vec<u8>, PathBuf) {
        let mut buf = vec![0u8; 1024]; // portus 0.7's receive buffer
        let (n, from) = self.sock.recv_from(&mut buf).unwrap();
        buf.truncate(n);
        (
            buf,
            from.as_pathname()
                .expect("datapath address is a path")
                .to_path_buf(),
        )
    }

    fn reply(&self, to: &Path, bytes: &[u8]) -> std::io::Result<usize> {
        match self.reply_addr {
            // portus 0.7: format!("/tmp/ccp/{}", to), with our directory in place of /tmp/ccp.
            ReplyAddr::Relative => self
                .sock
                .send_to(bytes, format!("{}/{}", self.dir.display(), to.display())),
            ReplyAddr::Absolute => self.sock.send_to(bytes, to),
        }
    }
}

fn update(sid: u32, cwnd: u64) -> Msg {
    Msg::UpdateFields(UpdateFields {
        sid,
        updates: vec![UpdateField {
            reg_type: 2,
            reg_index: 0,
            value: cwnd,
        }],
    })
}

fn send(link: &mut AgentLink, msg: &Msg) -> std::io::Result<()> {
    link.queue(msg).unwrap();
    link.flush()
}

/// The next `n` things the link receives, waiting on its fd as a shim's loop does.
fn next(link: &mut AgentLink, n: usize) -> Vec<FromAgent> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut got = Vec::new();
    while got.len() < n {
        assert!(Instant::now() < deadline, "{n} messages from the agent, got {got:?}");
        let mut pfd = libc::pollfd { fd: link.fd().expect("a socket"), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd for the duration of the call.
        unsafe { libc::poll(&mut pfd, 1, 100) };
        link.receive(&mut got);
    }
    assert_eq!(got.len(), n, "{got:?}");
    got
}

fn round_trip(reply_addr: ReplyAddr) {
    let dir = Dir::new();
    let agent = FakePortusAgent::bind(&dir.0, reply_addr);
    let cwd = std::env::current_dir().unwrap();
    let mut link = AgentLink::connect(&AgentAddr::Portus(addr(&dir.0, reply_addr))).unwrap();
    assert_eq!(
        std::env::current_dir().unwrap(),
        cwd,
        "binding must not move the process's cwd"
    );

    send(&mut link, &Msg::Ready(Ready { id: 7 })).unwrap();
    let (bytes, from) = agent.recv();
    assert_eq!(wire::decode(&bytes).unwrap().0, Msg::Ready(Ready { id: 7 }));
    match reply_addr {
        ReplyAddr::Relative => assert_eq!(from, PathBuf::from("dp")),
        ReplyAddr::Absolute => assert_eq!(from, dir.0.join("dp")),
    }

    // One message per datagram, and two in one datagram.
    agent
        .reply(&from, &update(1, 10_000).encode().unwrap())
        .unwrap();
    let mut two = update(2, 20_000).encode().unwrap();
    two.extend(update(3, 30_000).encode().unwrap());
    agent.reply(&from, &two).unwrap();
    let got = next(&mut link, 3);
    for (got, want) in got.into_iter().zip([update(1, 10_000), update(2, 20_000), update(3, 30_000)]) {
        match got {
            FromAgent::Msg(m) => assert_eq!(m, want),
            other => panic!("expected {want:?}, got {other:?}"),
        }
    }

    // A bad message is reported; the next datagram still arrives.
    agent.reply(&from, &[9, 0, 8, 0, 0, 0, 0, 0]).unwrap();
    assert!(matches!(&next(&mut link, 1)[..], [FromAgent::Malformed(_)]));
    agent
        .reply(&from, &update(4, 40_000).encode().unwrap())
        .unwrap();
    assert!(matches!(&next(&mut link, 1)[..], [FromAgent::Msg(m)] if *m == update(4, 40_000)));

    // Reports and flow closes travel as single datagrams the agent can parse.
    let report = Msg::Measure(Measure {
        sid: 4,
        program_uid: 2,
        fields: vec![1, 2, 3],
    });
    send(&mut link, &report).unwrap();
    assert_eq!(wire::decode(&agent.recv().0).unwrap().0, report);

    // Messages queued together still leave one per datagram.
    link.queue(&report).unwrap();
    link.queue(&Msg::Ready(Ready { id: 8 })).unwrap();
    link.flush().unwrap();
    let (bytes, _) = agent.recv();
    assert_eq!(wire::decode(&bytes).unwrap(), (report.clone(), bytes.len()));
    assert_eq!(wire::decode(&agent.recv().0).unwrap().0, Msg::Ready(Ready { id: 8 }));

    drop(link);
    assert!(
        !dir.0.join("dp").exists(),
        "the datapath's socket is removed when the link goes"
    );
}

#[test]
fn portus_0_7_addressing() {
    round_trip(ReplyAddr::Relative);
}

#[test]
fn portus_0_9_addressing() {
    round_trip(ReplyAddr::Absolute);
}

#[test]
fn no_agent_means_no_link_and_no_leftover_socket() {
    let dir = Dir::new();
    let a = AgentAddr::Portus(addr(&dir.0, ReplyAddr::Relative));
    assert!(AgentLink::connect(&a).is_err(), "nothing bound at portus");
    assert!(!dir.0.join("dp").exists());
    // A stale socket file of a dead agent refuses the connection too.
    drop(FakePortusAgent::bind(&dir.0, ReplyAddr::Relative));
    assert!(dir.0.join("portus").exists());
    assert!(AgentLink::connect(&a).is_err(), "stale agent socket");
    assert!(!dir.0.join("dp").exists());
}

#[test]
fn a_restarted_agent_breaks_the_link_so_the_shim_re_announces() {
    let dir = Dir::new();
    let first = FakePortusAgent::bind(&dir.0, ReplyAddr::Relative);
    let mut link =
        AgentLink::connect(&AgentAddr::Portus(addr(&dir.0, ReplyAddr::Relative))).unwrap();
    send(&mut link, &Msg::Ready(Ready { id: 1 })).unwrap();
    first.recv();
    // The agent dies and a new one binds the same path (portus unlinks, then binds).
    drop(first);
    let second = FakePortusAgent::bind(&dir.0, ReplyAddr::Relative);
    let report = Msg::Measure(Measure {
        sid: 1,
        program_uid: 1,
        fields: vec![1],
    });
    assert!(
        send(&mut link, &report).is_err(),
        "send to the dead agent must fail"
    );
    drop(link);
    // Reconnecting reaches the new agent.
    let mut link =
        AgentLink::connect(&AgentAddr::Portus(addr(&dir.0, ReplyAddr::Relative))).unwrap();
    send(&mut link, &Msg::Ready(Ready { id: 2 })).unwrap();
    assert_eq!(
        wire::decode(&second.recv().0).unwrap().0,
        Msg::Ready(Ready { id: 2 })
    );
    std::thread::sleep(Duration::from_millis(50));
    let mut got = Vec::new();
    link.receive(&mut got);
    assert!(got.is_empty(), "{got:?}");
}

#[test]
fn a_stalled_agent_costs_reports_not_the_link() {
    let dir = Dir::new();
    let _agent = FakePortusAgent::bind(&dir.0, ReplyAddr::Relative); // never reads
    let mut link =
        AgentLink::connect(&AgentAddr::Portus(addr(&dir.0, ReplyAddr::Relative))).unwrap();
    let report = Msg::Measure(Measure {
        sid: 1,
        program_uid: 1,
        fields: vec![1, 2],
    });
    for _ in 0..100 {
        send(&mut link, &report)
            .expect("a report to a full queue is skipped, not an error");
    }
    assert!(link.dropped_reports() > 0 && link.dropped_reports() < 100);
    // A message that must arrive cannot be skipped: the link reports the failure.
    assert!(send(&mut link, &Msg::Ready(Ready { id: 1 })).is_err());
}
