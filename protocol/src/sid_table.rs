//! Flows by CCP socket id, as both ends of the protocol keep them (a shim's session, the
//! agent's connection), found by indexing rather than hashing.
//!
//! Both ends look a flow up on every report. At 10k flows reporting about once a second each,
//! every lookup finds cold memory, and a hash table's costs one miss on its control bytes, one
//! on the entry, then one on the flow (with the other per-report lookups, 13% of the kernel
//! shim's samples through the delay shell, `experiments/measured/delay-shell-rates-2026-11-27`).
//! The datapaths hand out ids in sequence (the kernel program's counter, the ovs shim's), so
//! the live flows' ids span little more than their number, and an id's low bits find its slot
//! in a vector at least as long as the table holds (a power of two, as a hash table's buckets,
//! so it costs as much memory): one miss for the slot, one for the flow. An id
//! whose slot another flow held when it came (a long-lived flow among many newer ones) goes to
//! a hash table beside it, looked at only when it holds something, and moves into its slot on
//! a lookup that finds the slot free.

use std::collections::HashMap;

/// The fewest slots a table has (a power of two).
const MIN_SLOTS: usize = 64;

#[derive(Debug)]
pub struct SidTable<T> {
    /// A flow whose id's low bits (`sid & (slots.len() - 1)`) name its slot, with its id.
    slots: Vec<Option<(u32, Box<T>)>>,
    /// Flows whose slot another flow held when they were inserted.
    displaced: HashMap<u32, Box<T>>,
    len: usize,
}

impl<T> Default for SidTable<T> {
    fn default() -> Self {
        Self { slots: Vec::new(), displaced: HashMap::new(), len: 0 }
    }
}

impl<T> SidTable<T> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn slot_of(&self, sid: u32) -> usize {
        sid as usize & (self.slots.len() - 1)
    }

    pub fn get(&self, sid: u32) -> Option<&T> {
        if self.slots.is_empty() {
            return None;
        }
        match &self.slots[self.slot_of(sid)] {
            Some((id, flow)) if *id == sid => Some(flow),
            _ if self.displaced.is_empty() => None,
            _ => self.displaced.get(&sid).map(|f| &**f),
        }
    }

    pub fn get_mut(&mut self, sid: u32) -> Option<&mut T> {
        if self.slots.is_empty() {
            return None;
        }
        let slot = self.slot_of(sid);
        match &self.slots[slot] {
            Some((id, _)) if *id == sid => {}
            _ if self.displaced.is_empty() => return None,
            // Its slot's holder has left since: it moves in, to be found directly.
            None => self.slots[slot] = Some((sid, self.displaced.remove(&sid)?)),
            Some(_) => return self.displaced.get_mut(&sid).map(|f| &mut **f),
        }
        self.slots[slot].as_mut().map(|(_, f)| &mut **f)
    }

    /// Inserts `flow` as `sid`, returning the flow it replaces.
    pub fn insert(&mut self, sid: u32, flow: Box<T>) -> Option<Box<T>> {
        let old = self.remove(sid);
        if self.len + 1 > self.slots.len() {
            self.grow();
        }
        let slot = self.slot_of(sid);
        match &mut self.slots[slot] {
            free @ None => *free = Some((sid, flow)),
            Some(_) => {
                self.displaced.insert(sid, flow);
            }
        }
        self.len += 1;
        old
    }

    pub fn remove(&mut self, sid: u32) -> Option<Box<T>> {
        if self.slots.is_empty() {
            return None;
        }
        let slot = self.slot_of(sid);
        let removed = match &self.slots[slot] {
            Some((id, _)) if *id == sid => self.slots[slot].take().map(|(_, f)| f),
            _ => self.displaced.remove(&sid),
        };
        if removed.is_some() {
            self.len -= 1;
        }
        removed
    }

    /// Twice the slots (at least [`MIN_SLOTS`]); every flow placed again.
    fn grow(&mut self) {
        let n = (2 * self.slots.len()).max(MIN_SLOTS);
        let old_slots = std::mem::replace(&mut self.slots, (0..n).map(|_| None).collect());
        let old_displaced = std::mem::take(&mut self.displaced);
        for (sid, flow) in old_slots.into_iter().flatten().chain(old_displaced) {
            let slot = self.slot_of(sid);
            match &mut self.slots[slot] {
                free @ None => *free = Some((sid, flow)),
                Some(_) => {
                    self.displaced.insert(sid, flow);
                }
            }
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        let direct = self.slots.iter().flatten().map(|(id, f)| (*id, &**f));
        direct.chain(self.displaced.iter().map(|(id, f)| (*id, &**f)))
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut T)> {
        let direct = self.slots.iter_mut().flatten().map(|(id, f)| (*id, &mut **f));
        direct.chain(self.displaced.iter_mut().map(|(id, f)| (*id, &mut **f)))
    }

    pub fn sids(&self) -> impl Iterator<Item = u32> + '_ {
        self.iter().map(|(id, _)| id)
    }

    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.iter().map(|(_, f)| f)
    }

    /// Every flow, the table left empty (its slots kept).
    pub fn drain(&mut self) -> Vec<(u32, Box<T>)> {
        let mut all: Vec<(u32, Box<T>)> = self.slots.iter_mut().filter_map(Option::take).collect();
        all.extend(self.displaced.drain());
        self.len = 0;
        all
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_displaced_flow_is_found_and_moves_into_its_slot_once_the_holder_has_left() {
        let mut t = SidTable::new();
        assert_eq!(t.get(1), None);
        assert!(t.insert(1, Box::new("a")).is_none());
        let n = t.slots.len() as u32;
        assert!(t.insert(1 + n, Box::new("b")).is_none(), "same slot as 1");
        assert_eq!((t.get(1), t.get(1 + n), t.len()), (Some(&"a"), Some(&"b"), 2));
        assert_eq!(t.displaced.len(), 1);
        assert_eq!(t.remove(1).as_deref(), Some(&"a"));
        assert_eq!((t.get(1 + n), t.get(1), t.displaced.len()), (Some(&"b"), None, 1));
        assert_eq!(t.get_mut(1 + n).map(|f| *f), Some("b"));
        assert_eq!((t.displaced.len(), t.get(1 + n)), (0, Some(&"b")), "moved in");
        assert_eq!(t.insert(1 + n, Box::new("c")).as_deref(), Some(&"b"), "replaced");
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn sequential_ids_are_all_placed_directly() {
        let mut t = SidTable::new();
        for sid in 1..=10_000u32 {
            t.insert(sid, Box::new(sid));
        }
        for sid in 1..=5_000u32 {
            t.remove(sid);
        }
        for sid in 10_001..=15_000u32 {
            t.insert(sid, Box::new(sid));
        }
        assert_eq!((t.len(), t.displaced.len()), (10_000, 0));
        assert_eq!(t.slots.len(), 16_384);
    }

    proptest! {
        /// The table behaves as a map, whatever the ids.
        #[test]
        fn it_is_a_map(ops in proptest::collection::vec((any::<bool>(), 0u32..300, any::<u8>()), 0..400)) {
            let mut t = SidTable::new();
            let mut model = BTreeMap::new();
            for (insert, sid, v) in ops {
                // Ids far apart as well as close: the low bits collide often.
                let sid = if sid % 3 == 0 { sid << 20 } else { sid };
                if insert {
                    prop_assert_eq!(t.insert(sid, Box::new(v)).map(|b| *b), model.insert(sid, v));
                } else {
                    prop_assert_eq!(t.remove(sid).map(|b| *b), model.remove(&sid));
                }
                prop_assert_eq!(t.len(), model.len());
            }
            for (sid, v) in &model {
                prop_assert_eq!(t.get(*sid), Some(v));
                prop_assert!(t.get_mut(*sid).is_some());
            }
            let mut all: Vec<(u32, u8)> = t.iter().map(|(id, v)| (id, *v)).collect();
            all.sort();
            prop_assert_eq!(all, model.iter().map(|(k, v)| (*k, *v)).collect::<Vec<_>>());
            let drained = t.drain();
            prop_assert_eq!((drained.len(), t.len(), t.iter().count()), (model.len(), 0, 0));
        }
    }
}
