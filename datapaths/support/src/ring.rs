//! A BPF ring buffer drained into a queue of decoded events.
//!
//! libbpf hands each record to a callback while it consumes the ring; the callback decodes
//! it into the datapath's event type and queues it, and [`EventRing::poll`] then hands the
//! queue to the caller in ring order. Records that do not decode are counted, not queued.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use libbpf_rs::{MapCore, RingBuffer, RingBufferBuilder};

struct Pending<E> {
    queue: VecDeque<E>,
    malformed: u64,
}

/// One ring-buffer map and the events decoded from it, not yet delivered.
pub struct EventRing<E: 'static> {
    ring: RingBuffer<'static>,
    pending: Rc<RefCell<Pending<E>>>,
}

impl<E: 'static> EventRing<E> {
    /// Drains the ring-buffer `map`, decoding each record with `decode` (`None`: malformed).
    pub fn new(map: &dyn MapCore, decode: fn(&[u8]) -> Option<E>) -> Result<Self> {
        let pending = Rc::new(RefCell::new(Pending { queue: VecDeque::new(), malformed: 0 }));
        let sink = pending.clone();
        let mut builder = RingBufferBuilder::new();
        builder
            .add(map, move |data: &[u8]| {
                let mut p = sink.borrow_mut();
                match decode(data) {
                    Some(ev) => p.queue.push_back(ev),
                    None => p.malformed += 1,
                }
                0
            })
            .context("ring buffer")?;
        let ring = builder.build().context("ring buffer")?;
        Ok(Self { ring, pending })
    }

    /// Waits up to `timeout` for events, then hands every available event to `f` in
    /// ring-buffer order. A zero timeout only drains, with no system call: the shims drain
    /// each lane up to three times per wake-up, and an `epoll_wait` that cannot wait added
    /// nothing that reading the ring does not find.
    pub fn poll(&mut self, timeout: Duration, mut f: impl FnMut(E)) -> Result<()> {
        // Deliver leftovers first (f may not have been called for them if a
        // previous call returned early).
        self.drain(&mut f);
        if !timeout.is_zero() {
            let rc = self.ring.poll_raw(timeout);
            if rc < 0 && rc != -libc::EINTR {
                bail!("ring buffer poll failed: {}", std::io::Error::from_raw_os_error(-rc));
            }
        }
        // Records submitted without a wake-up (the programs wake the shim only for urgent
        // ones) do not make the ring's fd readable: read whatever is there.
        let rc = self.ring.consume_raw();
        if rc < 0 {
            bail!("ring buffer consume failed: {}", std::io::Error::from_raw_os_error(-rc));
        }
        self.drain(&mut f);
        Ok(())
    }

    fn drain(&self, f: &mut impl FnMut(E)) {
        loop {
            let ev = self.pending.borrow_mut().queue.pop_front();
            match ev {
                Some(ev) => f(ev),
                None => break,
            }
        }
    }

    /// The ring buffer's epoll fd, readable when records are pending (for integration into
    /// an event loop).
    pub fn epoll_fd(&self) -> RawFd {
        self.ring.epoll_fd()
    }

    /// Records that could not be decoded (unknown kind or wrong size).
    pub fn malformed(&self) -> u64 {
        self.pending.borrow().malformed
    }
}
