//! nfnetlink_queue spoken over a raw netlink socket: bind one queue, receive its packets'
//! ids and first bytes, and give verdicts.
//!
//! Written here (rather than with a crate) so that a held packet costs only its id and
//! timestamps: no receive buffer stays alive per packet, and nothing is allocated per packet.
//! The queue is configured to copy only the first `copy_range` bytes (the IPv4 header is all
//! the element reads), to hold up to `maxlen` packets, and to fail open: when the kernel queue
//! is full or our socket's buffer overflows, the kernel accepts the packet instead of dropping
//! it, so an overloaded element lets packets through undelayed and never black-holes them.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const NETLINK_NETFILTER: libc::c_int = 12;
const NFNL_SUBSYS_QUEUE: u16 = 3;
const NFQNL_MSG_PACKET: u16 = 0;
const NFQNL_MSG_VERDICT: u16 = 1;
const NFQNL_MSG_CONFIG: u16 = 2;

const NFQA_PACKET_HDR: u16 = 1;
const NFQA_VERDICT_HDR: u16 = 2;
const NFQA_PAYLOAD: u16 = 10;

const NFQA_CFG_CMD: u16 = 1;
const NFQA_CFG_PARAMS: u16 = 2;
const NFQA_CFG_QUEUE_MAXLEN: u16 = 3;
const NFQA_CFG_MASK: u16 = 4;
const NFQA_CFG_FLAGS: u16 = 5;
const NFQNL_CFG_CMD_BIND: u8 = 1;
const NFQNL_CFG_CMD_UNBIND: u8 = 2;
const NFQNL_COPY_PACKET: u8 = 2;
const NFQA_CFG_F_FAIL_OPEN: u32 = 1;

const NF_DROP: u32 = 0;
const NF_ACCEPT: u32 = 1;

const NLMSG_HDRLEN: usize = 16;
const NFGENMSG_LEN: usize = 4;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLA_TYPE_MASK: u16 = 0x3fff;

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// One netlink message being built: header, nfgenmsg, then attributes.
struct Request {
    buf: Vec<u8>,
}

impl Request {
    fn new(msg_type: u16, flags: u16, queue: u16) -> Request {
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(&0u32.to_ne_bytes()); // length, set by finish()
        buf.extend_from_slice(&((NFNL_SUBSYS_QUEUE << 8) | msg_type).to_ne_bytes());
        buf.extend_from_slice(&(NLM_F_REQUEST | flags).to_ne_bytes());
        buf.extend_from_slice(&0u32.to_ne_bytes()); // sequence
        buf.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel
        buf.push(libc::AF_UNSPEC as u8); // nfgen_family
        buf.push(0); // NFNETLINK_V0
        buf.extend_from_slice(&queue.to_be_bytes()); // res_id
        Request { buf }
    }

    fn attr(mut self, attr_type: u16, payload: &[u8]) -> Request {
        let len = 4 + payload.len();
        self.buf.extend_from_slice(&(len as u16).to_ne_bytes());
        self.buf.extend_from_slice(&attr_type.to_ne_bytes());
        self.buf.extend_from_slice(payload);
        self.buf.resize(align4(self.buf.len()), 0);
        self
    }

    fn finish(mut self) -> Vec<u8> {
        let len = self.buf.len() as u32;
        self.buf[0..4].copy_from_slice(&len.to_ne_bytes());
        self.buf
    }
}

/// What one receive brought.
pub enum Received<'a> {
    /// A queued packet: the kernel's id and the first bytes of the packet (from the IP header).
    Packet { id: u32, payload: &'a [u8] },
    /// Something else (an acknowledgement, a message of another type).
    Other,
}

pub struct NfQueue {
    fd: OwnedFd,
    queue: u16,
    recv_buf: Vec<u8>,
}

impl NfQueue {
    /// Bind queue `queue` (fails with EBUSY if another process holds it) and configure it.
    pub fn bind(
        queue: u16,
        copy_range: u32,
        maxlen: u32,
        rcvbuf_bytes: usize,
    ) -> io::Result<NfQueue> {
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                NETLINK_NETFILTER,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as u16;
        if unsafe {
            libc::bind(
                raw,
                &addr as *const _ as *const libc::sockaddr,
                std::mem::size_of_val(&addr) as u32,
            )
        } < 0
        {
            return Err(io::Error::last_os_error());
        }
        // A large receive buffer absorbs bursts; past it the kernel fails open (see above).
        // SO_RCVBUFFORCE (root) ignores net.core.rmem_max.
        let size = rcvbuf_bytes as libc::c_int;
        unsafe {
            libc::setsockopt(
                raw,
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                &size as *const _ as *const libc::c_void,
                4,
            );
        }
        let mut q = NfQueue {
            fd,
            queue,
            recv_buf: vec![0; 65536 + 4096],
        };
        q.configure(
            Request::new(NFQNL_MSG_CONFIG, NLM_F_ACK, queue)
                .attr(NFQA_CFG_CMD, &[NFQNL_CFG_CMD_BIND, 0, 0, 0]),
        )
        .map_err(|e| io::Error::new(e.kind(), format!("bind queue {queue}: {e}")))?;
        let mut params = copy_range.to_be_bytes().to_vec();
        params.push(NFQNL_COPY_PACKET);
        q.configure(
            Request::new(NFQNL_MSG_CONFIG, NLM_F_ACK, queue).attr(NFQA_CFG_PARAMS, &params),
        )?;
        q.configure(
            Request::new(NFQNL_MSG_CONFIG, NLM_F_ACK, queue)
                .attr(NFQA_CFG_QUEUE_MAXLEN, &maxlen.to_be_bytes()),
        )?;
        q.configure(
            Request::new(NFQNL_MSG_CONFIG, NLM_F_ACK, queue)
                .attr(NFQA_CFG_MASK, &NFQA_CFG_F_FAIL_OPEN.to_be_bytes())
                .attr(NFQA_CFG_FLAGS, &NFQA_CFG_F_FAIL_OPEN.to_be_bytes()),
        )?;
        Ok(q)
    }

    /// Send a configuration request and wait for its acknowledgement (packets that arrive in
    /// between cannot: nothing is routed to the queue before the bind is acknowledged, and the
    /// harness adds its iptables rules only after `ready`).
    fn configure(&mut self, req: Request) -> io::Result<()> {
        self.send(&req.finish())?;
        loop {
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    self.recv_buf.as_mut_ptr() as *mut libc::c_void,
                    self.recv_buf.len(),
                    0,
                )
            };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            let buf = &self.recv_buf[..n as usize];
            if buf.len() >= NLMSG_HDRLEN + 4 && u16::from_ne_bytes([buf[4], buf[5]]) == NLMSG_ERROR
            {
                let errno = i32::from_ne_bytes(buf[16..20].try_into().unwrap());
                return if errno == 0 {
                    Ok(())
                } else {
                    Err(io::Error::from_raw_os_error(-errno))
                };
            }
        }
    }

    fn send(&self, msg: &[u8]) -> io::Result<()> {
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as u16;
        let n = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                msg.as_ptr() as *const libc::c_void,
                msg.len(),
                0,
                &addr as *const _ as *const libc::sockaddr,
                std::mem::size_of_val(&addr) as u32,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Receive one datagram without blocking and hand each packet in it to `on_packet`.
    /// Returns Ok(false) when nothing was waiting (EAGAIN).
    pub fn recv_nonblocking(&mut self, mut on_packet: impl FnMut(u32, &[u8])) -> io::Result<bool> {
        let n = unsafe {
            libc::recv(
                self.fd.as_raw_fd(),
                self.recv_buf.as_mut_ptr() as *mut libc::c_void,
                self.recv_buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::WouldBlock {
                Ok(false)
            } else {
                Err(e)
            };
        }
        let mut buf = &self.recv_buf[..n as usize];
        while buf.len() >= NLMSG_HDRLEN {
            let len = u32::from_ne_bytes(buf[0..4].try_into().unwrap()) as usize;
            if len < NLMSG_HDRLEN || len > buf.len() {
                break;
            }
            if let Received::Packet { id, payload } = parse_message(&buf[..len]) {
                on_packet(id, payload);
            }
            buf = &buf[align4(len).min(buf.len())..];
        }
        Ok(true)
    }

    /// ACCEPT (`accept`) or DROP the packet `id`.
    pub fn verdict(&mut self, id: u32, accept: bool) -> io::Result<()> {
        self.send(&verdict_message(self.queue, id, accept))
    }

    pub fn unbind(&mut self) -> io::Result<()> {
        self.configure(
            Request::new(NFQNL_MSG_CONFIG, NLM_F_ACK, self.queue)
                .attr(NFQA_CFG_CMD, &[NFQNL_CFG_CMD_UNBIND, 0, 0, 0]),
        )
    }
}

impl AsRawFd for NfQueue {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// A verdict on packet `id` of `queue`: one 32-byte message laid out on the stack (no
/// allocation per packet); the same bytes as `Request` builds.
fn verdict_message(queue: u16, id: u32, accept: bool) -> [u8; 32] {
    let mut msg = [0u8; NLMSG_HDRLEN + NFGENMSG_LEN + 4 + 8];
    msg[0..4].copy_from_slice(&32u32.to_ne_bytes());
    msg[4..6].copy_from_slice(&((NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_VERDICT).to_ne_bytes());
    msg[6..8].copy_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    msg[16] = libc::AF_UNSPEC as u8;
    msg[18..20].copy_from_slice(&queue.to_be_bytes());
    msg[20..22].copy_from_slice(&12u16.to_ne_bytes()); // attribute length: 4 + 8
    msg[22..24].copy_from_slice(&NFQA_VERDICT_HDR.to_ne_bytes());
    msg[24..28].copy_from_slice(&(if accept { NF_ACCEPT } else { NF_DROP }).to_be_bytes());
    msg[28..32].copy_from_slice(&id.to_be_bytes());
    msg
}

/// Parse one netlink message of the queue subsystem.
fn parse_message(msg: &[u8]) -> Received<'_> {
    let msg_type = u16::from_ne_bytes([msg[4], msg[5]]);
    if msg_type != (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET
        || msg.len() < NLMSG_HDRLEN + NFGENMSG_LEN
    {
        return Received::Other;
    }
    let mut attrs = &msg[NLMSG_HDRLEN + NFGENMSG_LEN..];
    let (mut id, mut payload) = (None, &[][..]);
    while attrs.len() >= 4 {
        let len = u16::from_ne_bytes([attrs[0], attrs[1]]) as usize;
        let attr_type = u16::from_ne_bytes([attrs[2], attrs[3]]) & NLA_TYPE_MASK;
        if len < 4 || len > attrs.len() {
            break;
        }
        let value = &attrs[4..len];
        match attr_type {
            NFQA_PACKET_HDR if value.len() >= 4 => {
                id = Some(u32::from_be_bytes(value[0..4].try_into().unwrap()))
            }
            NFQA_PAYLOAD => payload = value,
            _ => {}
        }
        attrs = &attrs[align4(len).min(attrs.len())..];
    }
    match id {
        Some(id) => Received::Packet { id, payload },
        None => Received::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_is_the_same_message_as_the_generic_builder_makes() {
        // The verdict is hand-laid for speed; the builder is the readable reference.
        let expected = Request::new(NFQNL_MSG_VERDICT, 0, 7)
            .attr(NFQA_VERDICT_HDR, &[0, 0, 0, 1, 0, 0, 0, 42])
            .finish();
        assert_eq!(verdict_message(7, 42, true).to_vec(), expected);
    }

    #[test]
    fn a_packet_message_yields_its_id_and_payload() {
        let mut req = Request::new(NFQNL_MSG_PACKET, 0, 5);
        req = req.attr(NFQA_PACKET_HDR, &[0, 0, 1, 2, 0x08, 0x00, 2]);
        req = req.attr(NFQA_PAYLOAD, &[0x45, 0, 0, 28, 9]);
        let bytes = req.finish();
        assert_eq!(bytes.len() % 4, 0);
        match parse_message(&bytes) {
            Received::Packet { id, payload } => {
                assert_eq!(id, 0x0102);
                assert_eq!(payload, &[0x45, 0, 0, 28, 9]);
            }
            Received::Other => panic!("not parsed as a packet"),
        }
    }
}
