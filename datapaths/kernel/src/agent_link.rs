//! The shim's connection to the agent: a writer half owned by the shim and a reader thread
//! that decodes frames into a channel. Reconnects are the shim's decision.

use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::mpsc::{channel, Receiver};

use anyhow::Result;
use ccswitch_ccp::wire::{self, FrameReader, Msg, WireError};

pub enum FromAgent {
    Msg(Msg),
    /// A message that could not be decoded; the next one can still be read.
    Malformed(WireError),
    /// The connection is gone (closed, read error, or framing lost).
    Closed(String),
}

pub struct AgentLink {
    out: UnixStream,
    pub rx: Receiver<FromAgent>,
    /// Becomes readable whenever the reader thread has queued something, so the shim's
    /// event loop can wait on BPF events and agent messages at once.
    wake: UnixStream,
}

impl AgentLink {
    pub fn connect(socket: &Path) -> std::io::Result<Self> {
        let out = UnixStream::connect(socket)?;
        let mut input = out.try_clone()?;
        let (tx, rx) = channel();
        let (wake, mut waker) = UnixStream::pair()?;
        wake.set_nonblocking(true)?;
        waker.set_nonblocking(true)?;
        std::thread::Builder::new().name("agent-reader".into()).spawn(move || {
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
                            if tx.send(item).is_err() {
                                return;
                            }
                            // A full wake socket already holds a pending wake-up.
                            let _ = waker.write(&[1]);
                        }
                        Ok(None) => break None,
                        Err(e) => break Some(format!("framing lost: {e}")),
                    }
                };
                if let Some(reason) = lost {
                    break reason;
                }
            };
            let _ = tx.send(FromAgent::Closed(reason));
            let _ = waker.write(&[1]);
        })?;
        Ok(Self { out, rx, wake })
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
        self.out.write_all(&msg.encode()?)?;
        Ok(())
    }

    pub fn shutdown(&self) {
        let _ = self.out.shutdown(std::net::Shutdown::Both);
    }
}
