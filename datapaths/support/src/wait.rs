//! Sleeping until a shim has work: one epoll instance holds the descriptors a shim always
//! waits on, registered once. `ppoll` looked up, registered, polled and unregistered each of
//! them on every call, polling libbpf's ring-buffer epoll descriptors nested inside it: in a
//! profile of the kernel shim at 8k reports a second, 59 of its 159 samples in `ppoll`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// What woke a [`Waiter`]: nothing (the timeout, or a signal), its descriptors, the extra one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Woken {
    /// One of the descriptors the waiter holds is readable.
    pub held: bool,
    /// The extra descriptor of this wait is readable.
    pub extra: bool,
}

pub struct Waiter {
    epoll: OwnedFd,
}

impl Waiter {
    /// A waiter that wakes when any of `fds` is readable.
    pub fn new(fds: &[RawFd]) -> io::Result<Self> {
        // SAFETY: plain system call; a descriptor it returns is ours alone.
        let epoll = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epoll < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `epoll` was just created and is owned by nothing else.
        let epoll = unsafe { OwnedFd::from_raw_fd(epoll) };
        for &fd in fds {
            let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: fd as u64 };
            // SAFETY: valid epoll descriptor and event for the call.
            if unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(Self { epoll })
    }

    /// Sleeps until a held descriptor is readable, `extra` is (a descriptor that comes and
    /// goes, such as an agent's socket, polled beside the waiter rather than held by it, so
    /// that a closed descriptor's number reused by another file is never waited on in its
    /// place), or `timeout` passes.
    pub fn wait(&self, extra: Option<RawFd>, timeout: Duration) -> Woken {
        let ts = libc::timespec {
            tv_sec: timeout.as_secs().min(i64::MAX as u64) as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        match extra {
            None => Woken { held: self.wait_held(&ts), extra: false },
            Some(fd) => {
                let mut fds = [self.epoll.as_raw_fd(), fd].map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 });
                // SAFETY: `fds` is a valid array of pollfd and `ts` a valid timespec.
                unsafe { libc::ppoll(fds.as_mut_ptr(), 2, &ts, std::ptr::null()) };
                Woken { held: fds[0].revents != 0, extra: fds[1].revents != 0 }
            }
        }
    }

    /// `epoll_pwait2` (a timeout in nanoseconds: the shims' record delays are below a
    /// millisecond); on a kernel without it, `epoll_wait` rounded up to the millisecond.
    fn wait_held(&self, ts: &libc::timespec) -> bool {
        // One event says that something is readable; the caller reads every lane anyway.
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: valid epoll descriptor, one writable event, a valid timespec, no signal mask.
        let n = unsafe {
            libc::syscall(libc::SYS_epoll_pwait2, self.epoll.as_raw_fd(), &mut ev, 1, ts, std::ptr::null::<libc::sigset_t>(), 0)
        };
        if n >= 0 {
            return n > 0;
        }
        if io::Error::last_os_error().raw_os_error() != Some(libc::ENOSYS) {
            return false; // a signal: the caller looks at its flags
        }
        let ms = (ts.tv_sec as i64 * 1000 + (ts.tv_nsec as i64 + 999_999) / 1_000_000).min(i64::from(i32::MAX)) as i32;
        // SAFETY: valid epoll descriptor and one writable event.
        unsafe { libc::epoll_wait(self.epoll.as_raw_fd(), &mut ev, 1, ms) > 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn pipe() -> (OwnedFd, OwnedFd) {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: both were just created and are owned by nothing else.
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    }

    fn write_one(fd: &OwnedFd) {
        // SAFETY: one byte from a valid buffer to a pipe's write end.
        assert_eq!(unsafe { libc::write(fd.as_raw_fd(), b"x".as_ptr().cast(), 1) }, 1);
    }

    #[test]
    fn wakes_for_a_held_or_the_extra_descriptor_and_times_out_below_a_millisecond() {
        let ((held_r, held_w), (other_r, other_w), (extra_r, extra_w)) = (pipe(), pipe(), pipe());
        let waiter = Waiter::new(&[held_r.as_raw_fd(), other_r.as_raw_fd()]).unwrap();

        let t0 = Instant::now();
        assert_eq!(waiter.wait(None, Duration::from_micros(300)), Woken::default());
        let slept = t0.elapsed();
        assert!(slept >= Duration::from_micros(300), "slept {slept:?}: the timeout is kept to the microsecond");
        assert_eq!(waiter.wait(Some(extra_r.as_raw_fd()), Duration::from_micros(300)), Woken::default());

        write_one(&other_w);
        assert_eq!(waiter.wait(None, Duration::from_secs(10)), Woken { held: true, extra: false });
        assert_eq!(waiter.wait(Some(extra_r.as_raw_fd()), Duration::from_secs(10)), Woken { held: true, extra: false });
        write_one(&extra_w);
        assert_eq!(waiter.wait(Some(extra_r.as_raw_fd()), Duration::from_secs(10)), Woken { held: true, extra: true });
        drop((held_w, held_r));
        assert_eq!(waiter.wait(None, Duration::ZERO), Woken { held: true, extra: false }, "the other stays readable");
    }
}
