//! The shim's connection to the agent, driven from the shim's own event loop: the loop waits
//! on [`AgentLink::fd`] beside the datapath's fd, [`AgentLink::receive`] reads what the agent
//! sent without waiting, [`AgentLink::queue`] encodes a message and [`AgentLink::flush`] sends
//! everything queued. A batch costs one read and one write however many messages it holds,
//! and no other thread is involved, so a report and its answer cost two wake-ups (shim's
//! write → agent, agent's write → shim). Reconnects are the shim's decision.
//!
//! Two transports carry the same CCP messages (see `ccswitch_protocol::wire`):
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
//!   new one has bound it since. The datapath sends one message per datagram (portus 0.7
//!   receives into 1 KB), so here a flush is one `send` per message.
//! - [`AgentAddr::InProcess`]: an agent living in the shim's own process ([`InProcessAgent`],
//!   the ccswitch agent's controllers). A flush hands the queued messages to the agent's
//!   connection on the caller's thread, which answers into a buffer before it returns: no
//!   socket, no syscall, no other thread woken. The answers are read by the next
//!   [`AgentLink::receive`]; [`AgentLink::answers_waiting`] says there are some, so the
//!   caller can take them in the same turn of its loop. The messages are the same CCP
//!   messages, encoded and decoded as over a socket, so both sides keep one code path.

use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ccswitch_protocol::wire::{self, FrameReader, Msg, MsgType, WireError, HEADER_LEN, MAX_MSG_LEN, READ_CHUNK};

/// Where the agent is and how to talk to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentAddr {
    /// The agent listens on this unix stream socket.
    Stream(PathBuf),
    /// The agent speaks portus's unix datagram IPC.
    Portus(PortusAddr),
    /// The agent runs in this process.
    InProcess(InProcessAddr),
}

impl AgentAddr {
    /// The agent's socket path, for logs (`in-process` for an agent in this process).
    pub fn agent_path(&self) -> PathBuf {
        match self {
            AgentAddr::Stream(p) => p.clone(),
            AgentAddr::Portus(p) => p.agent_path(),
            AgentAddr::InProcess(_) => PathBuf::from("in-process"),
        }
    }
}

/// An agent in the shim's process: [`connect`](InProcessAgent::connect) is what connecting
/// to its socket is for an agent in another process, a fresh connection with no flows and no
/// programs (the session announces READY and its flows on it, as on any connection).
pub trait InProcessAgent: Send + Sync {
    fn connect(&self) -> Box<dyn InProcessConnection>;
}

/// One datapath's connection to an agent in this process.
pub trait InProcessConnection: Send {
    /// Hands the agent `sent`, whole CCP messages back to back as they would be written to
    /// its socket, and appends to `answers` everything the agent answers to them, before it
    /// returns. An error means the connection is unusable (the datapath then treats the
    /// agent as gone, falls back, and connects afresh later); it says why.
    fn exchange(&mut self, sent: &[u8], answers: &mut Vec<u8>) -> Result<(), String>;
}

/// [`AgentAddr::InProcess`]: the agent, shared. Two addresses are equal when they name the
/// same agent.
#[derive(Clone)]
pub struct InProcessAddr(pub Arc<dyn InProcessAgent>);

impl std::fmt::Debug for InProcessAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InProcessAddr")
    }
}

impl PartialEq for InProcessAddr {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for InProcessAddr {}

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

/// A stream socket as the link uses it: non-blocking reads and writes, and an fd to wait on.
/// A `UnixStream` in non-blocking mode, or a [`Counted`] one in tests.
pub trait StreamSocket: Read + Write + AsRawFd + Send {}

impl<T: Read + Write + AsRawFd + Send> StreamSocket for T {}

enum Conn {
    Stream(Box<dyn StreamSocket>),
    Datagram {
        sock: UnixDatagram,
        own_path: PathBuf,
        /// One received datagram.
        buf: Vec<u8>,
    },
    InProcess {
        conn: Box<dyn InProcessConnection>,
        /// What the agent answered and the link has not handed out yet.
        answers: Vec<u8>,
    },
}

pub struct AgentLink {
    conn: Conn,
    /// Stream transport: bytes received and not yet taken as messages.
    frames: FrameReader,
    /// Messages queued and not yet sent, encoded back to back.
    queued: Vec<u8>,
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

impl AgentLink {
    pub fn connect(addr: &AgentAddr) -> std::io::Result<Self> {
        match addr {
            AgentAddr::Stream(path) => {
                let sock = UnixStream::connect(path)?;
                sock.set_nonblocking(true)?;
                Ok(Self::from_stream(Box::new(sock)))
            }
            AgentAddr::Portus(p) => Self::connect_portus(p),
            AgentAddr::InProcess(agent) => Ok(Self::in_process(agent.0.connect())),
        }
    }

    /// A link to an agent in this process, over one of its connections.
    pub fn in_process(conn: Box<dyn InProcessConnection>) -> Self {
        Self::new(Conn::InProcess { conn, answers: Vec::new() })
    }

    /// A link over a connected stream socket in non-blocking mode.
    pub fn from_stream(sock: Box<dyn StreamSocket>) -> Self {
        Self::new(Conn::Stream(sock))
    }

    fn new(conn: Conn) -> Self {
        Self { conn, frames: FrameReader::new(), queued: Vec::new(), dropped_reports: 0, backlogged: false }
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
        let connected = sock
            .connect(&agent_path)
            .and_then(|()| sock.set_write_timeout(Some(DATAGRAM_SEND_TIMEOUT)));
        if let Err(e) = connected {
            let _ = std::fs::remove_file(&own_path);
            return Err(e);
        }
        Ok(Self::new(Conn::Datagram { sock, own_path, buf: vec![0u8; MAX_MSG_LEN + 1] }))
    }

    /// Readable when the agent has sent something (poll it beside the datapath's fd); `None`
    /// for an agent in this process, which answers within [`flush`](Self::flush).
    pub fn fd(&self) -> Option<RawFd> {
        match &self.conn {
            Conn::Stream(s) => Some(s.as_raw_fd()),
            Conn::Datagram { sock, .. } => Some(sock.as_raw_fd()),
            Conn::InProcess { .. } => None,
        }
    }

    /// The agent's answers are waiting to be [`receive`](Self::receive)d: an agent in this
    /// process answered the last [`flush`](Self::flush).
    pub fn answers_waiting(&self) -> bool {
        matches!(&self.conn, Conn::InProcess { answers, .. } if !answers.is_empty())
    }

    /// Appends what the agent has sent to `out`, without waiting: one read for everything
    /// that is there (stream), one receive per datagram. A [`FromAgent::Closed`] ends the link.
    pub fn receive(&mut self, out: &mut Vec<FromAgent>) {
        match &mut self.conn {
            Conn::Stream(sock) => loop {
                if !take_frames(&mut self.frames, out) {
                    return;
                }
                match self.frames.read_from(sock) {
                    Ok(0) => return out.push(FromAgent::Closed("agent closed the connection".into())),
                    // Less than offered: the socket is empty.
                    Ok(n) if n < READ_CHUNK => {
                        take_frames(&mut self.frames, out);
                        return;
                    }
                    Ok(_) => {}
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                    Err(e) => return out.push(FromAgent::Closed(format!("read error: {e}"))),
                }
            },
            Conn::Datagram { sock, buf, .. } => loop {
                // A connected datagram socket only receives from its peer, the agent.
                let n = match recv_dontwait(sock, buf) {
                    // Empty datagrams carry nothing; poll reports the next one at once.
                    Ok(0) => return,
                    Ok(n) => n,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                    Err(e) => return out.push(FromAgent::Closed(format!("receive error: {e}"))),
                };
                if n > MAX_MSG_LEN {
                    // Truncated by the buffer: no CCP message is that long.
                    out.push(FromAgent::Malformed(WireError::LengthAboveMax { len: n }));
                    continue;
                }
                decode_datagram(&buf[..n], out);
            },
            Conn::InProcess { answers, .. } => {
                // Framed as if read from a stream: the same checks, the same errors.
                self.frames.push(answers);
                answers.clear();
                take_frames(&mut self.frames, out);
            }
        }
    }

    /// Encodes `msg` behind the messages already queued; [`flush`](Self::flush) sends them.
    pub fn queue(&mut self, msg: &Msg) -> Result<(), WireError> {
        msg.encode_into(&mut self.queued).map(drop)
    }

    /// Sends every queued message: over a stream in one write (more only if the socket
    /// buffer fills), over datagrams one send each. An error means the link is lost.
    pub fn flush(&mut self) -> std::io::Result<()> {
        let result = match &mut self.conn {
            Conn::Stream(sock) => write_stream(sock.as_mut(), &self.queued, &mut self.frames),
            Conn::Datagram { sock, .. } => {
                let mut rest = &self.queued[..];
                let mut result = Ok(());
                while let Ok(hdr) = wire::peek_header(rest) {
                    let (frame, next) = rest.split_at(hdr.len);
                    rest = next;
                    let report = hdr.msg_type == MsgType::Measure as u16 && hdr.len > MEASURE_CLOSE_LEN;
                    if let Err(e) = send_datagram(sock, frame, report, &mut self.backlogged, &mut self.dropped_reports) {
                        result = Err(e);
                        break;
                    }
                }
                result
            }
            Conn::InProcess { conn, answers } if !self.queued.is_empty() => {
                conn.exchange(&self.queued, answers).map_err(|why| std::io::Error::new(ErrorKind::BrokenPipe, why))
            }
            Conn::InProcess { .. } => Ok(()),
        };
        self.queued.clear();
        result
    }

    /// Reports skipped because the agent did not drain its queue in time.
    pub fn dropped_reports(&self) -> u64 {
        self.dropped_reports
    }
}

impl Drop for AgentLink {
    fn drop(&mut self) {
        if let Conn::Datagram { own_path, .. } = &self.conn {
            let _ = std::fs::remove_file(own_path);
        }
    }
}

/// Length of libccp's "flow closed" MEASURE (no fields), which must arrive; longer MEASUREs
/// are reports, which may be skipped.
const MEASURE_CLOSE_LEN: usize = HEADER_LEN + 8;

/// Moves every complete frame into `out`; false once the framing is lost (then `out` ends
/// with [`FromAgent::Closed`]).
fn take_frames(frames: &mut FrameReader, out: &mut Vec<FromAgent>) -> bool {
    loop {
        match frames.next_frame() {
            Ok(Some(frame)) => out.push(match wire::decode(frame) {
                Ok((msg, _)) => FromAgent::Msg(msg),
                Err(e) => FromAgent::Malformed(e),
            }),
            Ok(None) => return true,
            Err(e) => {
                out.push(FromAgent::Closed(format!("framing lost: {e}")));
                return false;
            }
        }
    }
}

/// Writes all of `bytes` to a non-blocking stream. While the socket is full, whatever the
/// agent sends meanwhile is read into `frames`: the agent may itself be blocked writing to
/// us, and would otherwise never drain our messages.
fn write_stream(sock: &mut dyn StreamSocket, mut bytes: &[u8], frames: &mut FrameReader) -> std::io::Result<()> {
    while !bytes.is_empty() {
        match sock.write(bytes) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                let mut pfd = libc::pollfd { fd: sock.as_raw_fd(), events: libc::POLLIN | libc::POLLOUT, revents: 0 };
                // SAFETY: one valid pollfd for the duration of the call.
                unsafe { libc::poll(&mut pfd, 1, -1) };
                if pfd.revents & libc::POLLIN != 0 {
                    match frames.read_from(sock) {
                        Ok(0) => return Err(std::io::Error::new(ErrorKind::ConnectionAborted, "agent closed the connection")),
                        Ok(_) => {}
                        Err(e) if matches!(e.kind(), ErrorKind::Interrupted | ErrorKind::WouldBlock) => {}
                        Err(e) => return Err(e),
                    }
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn send_datagram(
    sock: &UnixDatagram,
    frame: &[u8],
    report: bool,
    backlogged: &mut bool,
    dropped_reports: &mut u64,
) -> std::io::Result<()> {
    let sent = if report && *backlogged { send_dontwait(sock, frame) } else { sock.send(frame) };
    match sent {
        Ok(_) => *backlogged = false,
        // The agent's queue stayed full: a report can be skipped (the next one carries
        // fresher values); anything else must arrive or the link is lost.
        Err(e) if report && matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            *dropped_reports += 1;
            *backlogged = true;
        }
        Err(e) => return Err(e),
    }
    Ok(())
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

/// Receive one datagram without waiting.
fn recv_dontwait(sock: &UnixDatagram, buf: &mut [u8]) -> std::io::Result<usize> {
    // SAFETY: the pointer and length describe `buf`, valid and writable for the call.
    let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
    if n < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// A socket that counts its `read` and `write` calls (each one syscall), for tests that
/// check how messages are batched.
pub struct Counted<S> {
    pub inner: S,
    pub reads: Arc<AtomicU64>,
    pub writes: Arc<AtomicU64>,
}

impl<S> Counted<S> {
    pub fn new(inner: S) -> Self {
        Self { inner, reads: Arc::default(), writes: Arc::default() }
    }
}

impl<S: Read> Read for Counted<S> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.inner.read(buf)
    }
}

impl<S: Write> Write for Counted<S> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.inner.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl<S: AsRawFd> AsRawFd for Counted<S> {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

/// Split one datagram into messages. A message that does not decode is reported and
/// skipped when its header still gives a usable length; otherwise the rest of the datagram
/// is dropped (the next datagram starts afresh, so nothing else is lost).
pub fn decode_datagram(mut buf: &[u8], out: &mut Vec<FromAgent>) {
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
