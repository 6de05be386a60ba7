//! The shim's connection to the agent: a writer half owned by the shim and a reader thread
//! that decodes messages into a channel. Reconnects are the shim's decision.
//!
//! Two transports carry the same CCP messages (see `ccswitch_ccp::wire`):
//!
//! - [`AgentAddr::Stream`]: a unix `SOCK_STREAM` socket the agent listens on (the ccswitch
//!   agent). Messages go back to back; their length field is the framing.
//! - [`AgentAddr::Portus`]: portus's own unix-socket IPC (`portus::start!("unix", ..)`, as
//!   used by upstream CCP algorithms such as `generic-cong-avoid`). The agent binds a
//!   `SOCK_DGRAM` socket at `DIR/AGENT` (portus: `/tmp/ccp/portus`), the datapath binds its
//!   own at `DIR/NAME`, and each datagram carries one or more whole messages. The agent
//!   learns the datapath from the source address of its datagrams and answers to it:
//!   portus 0.7 sends to `"/tmp/ccp/" + source address`, so the datapath's address must be
//!   the bare name ([`ReplyAddr::Relative`], bound from inside `DIR`); portus 0.9 sends to
//!   the source address verbatim, so an absolute path works ([`ReplyAddr::Absolute`]).
//!   The shim connects its socket to the agent's, so a send fails (and the shim
//!   re-announces itself) once the agent process that bound that path is gone, even if a
//!   new one has bound it since.

use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;

use crate::wire::{self, FrameReader, Msg, WireError, HEADER_LEN, MAX_MSG_LEN};

/// Where the agent is and how to talk to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentAddr {
    /// The agent listens on this unix stream socket.
    Stream(PathBuf),
    /// The agent speaks portus's unix datagram IPC.
    Portus(PortusAddr),
}

impl AgentAddr {
    /// The agent's socket path, for logs.
    pub fn agent_path(&self) -> PathBuf {
        match self {
            AgentAddr::Stream(p) => p.clone(),
            AgentAddr::Portus(p) => p.agent_path(),
        }
    }
}

/// How the datapath's own datagram address is written, which decides where a portus agent
/// sends its answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyAddr {
    /// The bare socket name, resolved inside `dir` (portus 0.7 prefixes `/tmp/ccp/`).
    Relative,
    /// The absolute path `dir/name` (portus 0.9 answers to the address verbatim).
    Absolute,
}

/// Sockets of portus's unix IPC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortusAddr {
    /// Directory holding both sockets (portus: `/tmp/ccp`).
    pub dir: PathBuf,
    /// The agent's socket name in `dir` (portus: `portus`).
    pub agent: String,
    /// The datapath's socket name in `dir`; the agent tells datapaths apart by it.
    pub name: String,
    pub reply_addr: ReplyAddr,
}

impl PortusAddr {
    /// What `portus::start!("unix", alg)` of portus 0.7 expects.
    pub fn portus_0_7(name: &str) -> Self {
        Self {
            dir: PathBuf::from("/tmp/ccp"),
            agent: "portus".into(),
            name: name.into(),
            reply_addr: ReplyAddr::Relative,
        }
    }

    pub fn agent_path(&self) -> PathBuf {
        self.dir.join(&self.agent)
    }

    pub fn own_path(&self) -> PathBuf {
        self.dir.join(&self.name)
    }
}

#[derive(Debug)]
pub enum FromAgent {
    Msg(Msg),
    /// A message that could not be decoded; the next one can still be read.
    Malformed(WireError),
    /// The connection is gone (closed, read error, or framing lost).
    Closed(String),
}

enum Out {
    Stream(UnixStream),
    Datagram {
        sock: UnixDatagram,
        own_path: PathBuf,
    },
}

pub struct AgentLink {
    out: Out,
    pub rx: Receiver<FromAgent>,
    /// Becomes readable whenever the reader thread has queued something, so the shim's
    /// event loop can wait on BPF events and agent messages at once.
    wake: UnixStream,
    /// Tells a datagram reader to stop (a stream reader stops when its socket is shut down).
    stop: Arc<AtomicBool>,
    /// Reports not sent because the agent's queue stayed full (datagram transport only).
    dropped_reports: u64,
    /// The last report found the agent's queue full: later reports do not wait for room
    /// until one gets through, so a stalled agent costs the shim one send timeout, not one
    /// per report.
    backlogged: bool,
}

/// A datagram send waits at most this long for room in the agent's queue (Linux keeps at
/// most `net.unix.max_dgram_qlen`, often 10, datagrams queued per socket).
const DATAGRAM_SEND_TIMEOUT: Duration = Duration::from_millis(50);
/// A datagram reader notices the stop flag within this period.
const DATAGRAM_READ_POLL: Duration = Duration::from_millis(100);

impl AgentLink {
    pub fn connect(addr: &AgentAddr) -> std::io::Result<Self> {
        match addr {
            AgentAddr::Stream(path) => Self::connect_stream(path),
            AgentAddr::Portus(p) => Self::connect_portus(p),
        }
    }

    fn connect_stream(socket: &Path) -> std::io::Result<Self> {
        let out = UnixStream::connect(socket)?;
        let mut input = out.try_clone()?;
        let (tx, rx) = channel();
        let (wake, mut waker) = wake_pair()?;
        std::thread::Builder::new()
            .name("agent-reader".into())
            .spawn(move || {
                let mut frames = FrameReader::new();
                let mut buf = vec![0u8; 64 * 1024];
                let reason = loop {
                    let n = match input.read(&mut buf) {
                        Ok(0) => break "agent closed the connection".to_string(),
                        Ok(n) => n,
                        Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                        Err(e) => break format!("read error: {e}"),
                    };
                    frames.push(&buf[..n]);
                    let lost = loop {
                        match frames.next_frame() {
                            Ok(Some(frame)) => {
                                let item = match wire::decode(&frame) {
                                    Ok((msg, _)) => FromAgent::Msg(msg),
                                    Err(e) => FromAgent::Malformed(e),
                                };
                                if !forward(&tx, &mut waker, item) {
                                    return;
                                }
                            }
                            Ok(None) => break None,
                            Err(e) => break Some(format!("framing lost: {e}")),
                        }
                    };
                    if let Some(reason) = lost {
                        break reason;
                    }
                };
                forward(&tx, &mut waker, FromAgent::Closed(reason));
            })?;
        Ok(Self {
            out: Out::Stream(out),
            rx,
            wake,
            stop: Arc::new(AtomicBool::new(false)),
            dropped_reports: 0,
            backlogged: false,
        })
    }

    fn connect_portus(p: &PortusAddr) -> std::io::Result<Self> {
        std::fs::create_dir_all(&p.dir)?;
        let own_path = p.own_path();
        let agent_path = p.agent_path();
        let sock = match p.reply_addr {
            ReplyAddr::Absolute => {
                remove_stale(&own_path)?;
                UnixDatagram::bind(&own_path)?
            }
            ReplyAddr::Relative => bind_relative(&p.dir, &p.name)?,
        };
        // From here on the socket file is ours: remove it again if the agent is not there.
        let connected = sock.connect(&agent_path).and_then(|()| {
            sock.set_write_timeout(Some(DATAGRAM_SEND_TIMEOUT))?;
            sock.set_read_timeout(Some(DATAGRAM_READ_POLL))?;
            sock.try_clone()
        });
        let input = match connected {
            Ok(input) => input,
            Err(e) => {
                let _ = std::fs::remove_file(&own_path);
                return Err(e);
            }
        };
        let (tx, rx) = channel();
        let (wake, mut waker) = wake_pair()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop_r = Arc::clone(&stop);
        let spawned = std::thread::Builder::new()
            .name("agent-reader".into())
            .spawn(move || {
                let mut buf = vec![0u8; MAX_MSG_LEN + 1];
                let reason = loop {
                    if stop_r.load(Ordering::Relaxed) {
                        return;
                    }
                    // A connected datagram socket only receives from its peer, the agent.
                    let n = match input.recv(&mut buf) {
                        Ok(n) => n,
                        Err(e)
                            if matches!(
                                e.kind(),
                                ErrorKind::Interrupted
                                    | ErrorKind::WouldBlock
                                    | ErrorKind::TimedOut
                            ) =>
                        {
                            continue
                        }
                        Err(e) => break format!("receive error: {e}"),
                    };
                    if stop_r.load(Ordering::Relaxed) {
                        return;
                    }
                    if n == 0 {
                        // Empty datagrams carry nothing; a shut-down socket also reads 0.
                        continue;
                    }
                    if n > MAX_MSG_LEN {
                        // Truncated by the buffer: no CCP message is that long.
                        let e = WireError::LengthAboveMax { len: n };
                        if !forward(&tx, &mut waker, FromAgent::Malformed(e)) {
                            return;
                        }
                        continue;
                    }
                    for item in decode_datagram(&buf[..n]) {
                        if !forward(&tx, &mut waker, item) {
                            return;
                        }
                    }
                };
                forward(&tx, &mut waker, FromAgent::Closed(reason));
            });
        if let Err(e) = spawned {
            let _ = std::fs::remove_file(&own_path);
            return Err(e);
        }
        Ok(Self {
            out: Out::Datagram { sock, own_path },
            rx,
            wake,
            stop,
            dropped_reports: 0,
            backlogged: false,
        })
    }

    pub fn wake_fd(&self) -> RawFd {
        self.wake.as_raw_fd()
    }

    /// Consume pending wake-ups (call before draining the channel).
    pub fn clear_wake(&self) {
        let mut buf = [0u8; 256];
        while matches!((&self.wake).read(&mut buf), Ok(n) if n > 0) {}
    }

    pub fn send(&mut self, msg: &Msg) -> Result<()> {
        let bytes = msg.encode()?;
        match &mut self.out {
            Out::Stream(s) => s.write_all(&bytes)?,
            Out::Datagram { sock, .. } => {
                let report = matches!(msg, Msg::Measure(m) if !m.fields.is_empty());
                let sent = if report && self.backlogged {
                    send_dontwait(sock, &bytes)
                } else {
                    sock.send(&bytes)
                };
                match sent {
                    Ok(_) => self.backlogged = false,
                    // The agent's queue stayed full: a report can be skipped (the next one
                    // carries fresher values); anything else must arrive or the link is lost.
                    Err(e)
                        if report
                            && matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
                    {
                        self.dropped_reports += 1;
                        self.backlogged = true;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok(())
    }

    /// Reports skipped because the agent did not drain its queue in time.
    pub fn dropped_reports(&self) -> u64 {
        self.dropped_reports
    }

    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::Relaxed);
        match &self.out {
            Out::Stream(s) => {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
            Out::Datagram { sock, .. } => {
                let _ = sock.shutdown(std::net::Shutdown::Both);
            }
        }
    }
}

impl Drop for AgentLink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Out::Datagram { own_path, .. } = &self.out {
            let _ = std::fs::remove_file(own_path);
        }
    }
}

/// Send one datagram on a connected socket without waiting for room.
fn send_dontwait(sock: &UnixDatagram, bytes: &[u8]) -> std::io::Result<usize> {
    // SAFETY: the pointer and length describe `bytes`, valid for the call.
    let n = unsafe {
        libc::send(
            sock.as_raw_fd(),
            bytes.as_ptr().cast(),
            bytes.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    if n < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Queue one item for the shim and wake it; false once the shim has dropped the link.
fn forward(tx: &Sender<FromAgent>, waker: &mut UnixStream, item: FromAgent) -> bool {
    if tx.send(item).is_err() {
        return false;
    }
    // A full wake socket already holds a pending wake-up.
    let _ = waker.write(&[1]);
    true
}

fn wake_pair() -> std::io::Result<(UnixStream, UnixStream)> {
    let (wake, waker) = UnixStream::pair()?;
    wake.set_nonblocking(true)?;
    waker.set_nonblocking(true)?;
    Ok((wake, waker))
}

/// Split one datagram into messages. A message that does not decode is reported and
/// skipped when its header still gives a usable length; otherwise the rest of the datagram
/// is dropped (the next datagram starts afresh, so nothing else is lost).
pub fn decode_datagram(mut buf: &[u8]) -> Vec<FromAgent> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        match wire::decode(buf) {
            Ok((msg, used)) => {
                out.push(FromAgent::Msg(msg));
                buf = &buf[used..];
            }
            Err(e) => {
                out.push(FromAgent::Malformed(e));
                match wire::peek_header(buf) {
                    Ok(h) if h.len >= HEADER_LEN && h.len <= buf.len() => {
                        buf = &buf[h.len..];
                    }
                    _ => break,
                }
            }
        }
    }
    out
}

fn remove_stale(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Bind a datagram socket to the relative address `name`, resolved inside `dir`, without
/// touching the working directory of the rest of the process: a helper thread takes its own
/// copy of the filesystem context (`unshare(CLONE_FS)`) and binds from inside `dir`.
fn bind_relative(dir: &Path, name: &str) -> std::io::Result<UnixDatagram> {
    if name.is_empty() || name.contains('/') {
        return Err(std::io::Error::new(
            ErrorKind::InvalidInput,
            "socket name must be a bare file name",
        ));
    }
    let (dir, name) = (dir.to_path_buf(), name.to_string());
    std::thread::Builder::new()
        .name("portus-bind".into())
        .spawn(move || {
            // SAFETY: unshare(CLONE_FS) only detaches this thread's cwd/root/umask.
            if unsafe { libc::unshare(libc::CLONE_FS) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            std::env::set_current_dir(&dir)?;
            remove_stale(Path::new(&name))?;
            UnixDatagram::bind(&name)
        })?
        .join()
        .map_err(|_| std::io::Error::other("bind thread panicked"))?
}
