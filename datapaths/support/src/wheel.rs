//! A hashed timer wheel: per-flow deadlines that cost nothing until they are due, so a shim
//! with 100k mostly idle flows does not walk all of them on every tick.
//!
//! The wheel only stores `(key, deadline)` entries; it never cancels one. A caller that moves
//! a key's deadline schedules it again and remembers, per key, the deadline it expects, then
//! ignores an expired entry whose deadline is not that one (a stale entry). Scheduling again
//! only when the new deadline is earlier than the remembered one keeps at most a few entries
//! per key: a deadline that moves later (a restarted retransmission timer) is found at the
//! old time and scheduled again from there.

/// Deadlines in nanoseconds on one monotonic clock, in slots of `granularity_ns`; a deadline
/// more than a revolution away waits in its slot and is passed over until it is due.
#[derive(Debug)]
pub struct TimerWheel {
    granularity_ns: u64,
    slots: Vec<Vec<(u32, u64)>>,
    /// Absolute slot number (time / granularity) that `expire` looks at first next time.
    cursor: u64,
    len: usize,
}

impl TimerWheel {
    /// A wheel of `slots` slots of `granularity_ns`, starting at `now_ns`.
    pub fn new(granularity_ns: u64, slots: usize, now_ns: u64) -> Self {
        assert!(
            granularity_ns > 0 && slots > 0,
            "a timer wheel needs slots of some length"
        );
        Self {
            granularity_ns,
            slots: vec![Vec::new(); slots],
            cursor: now_ns / granularity_ns,
            len: 0,
        }
    }

    /// Entries held, stale ones included.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Expire `key` at `deadline_ns` (a deadline already past expires at the next `expire`).
    pub fn schedule(&mut self, key: u32, deadline_ns: u64) {
        let slot = (deadline_ns / self.granularity_ns).max(self.cursor);
        let n = self.slots.len() as u64;
        self.slots[(slot % n) as usize].push((key, deadline_ns));
        self.len += 1;
    }

    /// Move every entry due at `now_ns` (deadline <= now) into `due`, in no particular order.
    /// Only the slots between the previous call and `now_ns` are visited (all of them once when
    /// more than a revolution has passed).
    pub fn expire(&mut self, now_ns: u64, due: &mut Vec<(u32, u64)>) {
        let now_slot = now_ns / self.granularity_ns;
        if now_slot < self.cursor {
            return;
        }
        let n = self.slots.len() as u64;
        let visits = (now_slot - self.cursor + 1).min(n);
        let before = due.len();
        for i in 0..visits {
            let slot = &mut self.slots[((self.cursor + i) % n) as usize];
            let mut j = 0;
            while j < slot.len() {
                if slot[j].1 <= now_ns {
                    due.push(slot.swap_remove(j));
                } else {
                    j += 1;
                }
            }
        }
        self.len -= due.len() - before;
        // The current slot may still hold entries due later within it: look again next time.
        self.cursor = now_slot;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    const MS: u64 = 1_000_000;

    #[test]
    fn entries_expire_once_at_their_deadline_and_not_before() {
        let mut w = TimerWheel::new(5 * MS, 8, 1000 * MS);
        w.schedule(1, 1003 * MS);
        w.schedule(2, 1012 * MS);
        w.schedule(3, 1000 * MS + 60 * MS); // more than a revolution (40 ms) ahead
        w.schedule(4, 10 * MS); // already past
        let mut due = Vec::new();
        w.expire(1002 * MS, &mut due);
        assert_eq!(due, vec![(4, 10 * MS)]);
        due.clear();
        w.expire(1003 * MS, &mut due);
        assert_eq!(due, vec![(1, 1003 * MS)]);
        due.clear();
        w.expire(1050 * MS, &mut due);
        assert_eq!(due, vec![(2, 1012 * MS)]);
        due.clear();
        w.expire(1059 * MS, &mut due);
        assert!(
            due.is_empty(),
            "a deadline a revolution ahead is passed over until due"
        );
        w.expire(1060 * MS, &mut due);
        assert_eq!(due, vec![(3, 1060 * MS)]);
        assert!(w.is_empty());
    }

    #[test]
    fn random_deadlines_expire_exactly_when_a_full_scan_would_find_them() {
        let mut rng = SplitMix64(7);
        let mut w = TimerWheel::new(5 * MS, 64, 0);
        let mut pending: Vec<(u32, u64)> = Vec::new();
        let mut now = 0;
        for step in 0..20_000u32 {
            if rng.below(3) == 0 {
                let deadline = now + rng.below(2_000) * MS / 3;
                w.schedule(step, deadline);
                pending.push((step, deadline));
            }
            now += rng.below(30) * MS / 7;
            let mut due = Vec::new();
            w.expire(now, &mut due);
            let mut expected: Vec<_> = pending.iter().copied().filter(|&(_, d)| d <= now).collect();
            pending.retain(|&(_, d)| d > now);
            due.sort_unstable();
            expected.sort_unstable();
            assert_eq!(due, expected, "at {now} ns");
            assert_eq!(w.len(), pending.len());
        }
    }
}
