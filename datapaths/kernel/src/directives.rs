//! The directives array mapped into the shim: flow F's directive lives in slot F % max_flows
//! while the slot's `flow_id` is F. A store writes the fields before `flow_id` when it takes
//! a slot, and clears `flow_id` before anything else when it gives one back, so the BPF
//! program never applies a half-written slot to a flow; a slot whose owner changes under an
//! ACK is applied to no flow.

use std::ptr::write_volatile;
use std::sync::atomic::{fence, Ordering};

use ccswitch_datapath_support::mapped::MappedArray;

use crate::abi::RawKernelDirective;

/// The directives array: one slot per flow (see `ccswitch_datapath_support::mapped`).
pub(crate) struct DirectiveSlots(pub(crate) MappedArray<RawKernelDirective>);

impl DirectiveSlots {
    fn slot_of(&self, flow_id: u32) -> usize {
        flow_id as usize % self.0.len()
    }

    /// Changes `flow_id`'s directive, taking its slot if free; `Err(holder)` if another flow
    /// holds it.
    pub(crate) fn update(&self, flow_id: u32, change: impl FnOnce(&mut RawKernelDirective)) -> Result<(), u32> {
        let i = self.slot_of(flow_id);
        let cur = self.0.read(i);
        if cur.flow_id != 0 && cur.flow_id != flow_id {
            return Err(cur.flow_id);
        }
        let mut d = if cur.flow_id == flow_id { cur } else { RawKernelDirective::default() };
        change(&mut d);
        let p = self.0.at(i);
        // SAFETY: in bounds; each field store is a single aligned store.
        unsafe {
            write_volatile(&raw mut (*p).cwnd_bytes, d.cwnd_bytes);
            write_volatile(&raw mut (*p).fold, d.fold);
            write_volatile(&raw mut (*p).vm_slot, d.vm_slot);
            write_volatile(&raw mut (*p).pacing_rate, d.pacing_rate);
            write_volatile(&raw mut (*p).fold_start_us, d.fold_start_us);
            write_volatile(&raw mut (*p).fold_window_pct, d.fold_window_pct);
            write_volatile(&raw mut (*p).loss_cwnd_bytes, d.loss_cwnd_bytes);
            write_volatile(&raw mut (*p).fold_idle_us, d.fold_idle_us);
            // After the window: a window that moves cwnd_seq ends a loss's window, and BPF
            // must not end it in favour of the window before.
            fence(Ordering::Release);
            write_volatile(&raw mut (*p).cwnd_seq, d.cwnd_seq);
            fence(Ordering::Release);
            write_volatile(&raw mut (*p).flow_id, flow_id);
        }
        Ok(())
    }

    /// Gives `flow_id`'s slot back (if it holds it).
    pub(crate) fn clear(&self, flow_id: u32) {
        let i = self.slot_of(flow_id);
        if self.0.read(i).flow_id == flow_id {
            // SAFETY: in bounds, aligned.
            unsafe { write_volatile(&raw mut (*self.0.at(i)).flow_id, 0) };
            fence(Ordering::Release);
        }
    }

    /// `flow_id`'s directive, if it holds its slot.
    pub(crate) fn get(&self, flow_id: u32) -> Option<RawKernelDirective> {
        let d = self.0.read(self.slot_of(flow_id));
        (d.flow_id == flow_id).then_some(d)
    }
}
