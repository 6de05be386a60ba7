/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * How a datapath's BPF program and its userspace shim talk, for the BPF programs of both
 * datapaths (kernel.bpf.c, ovs.bpf.c); include after <bpf/bpf_helpers.h>.
 *
 * Down, the shim directs the program through arrays it maps into its memory (BPF_F_MMAPABLE)
 * and writes with plain stores, no syscall (CCSW_SHIM_ARRAY): a deadline in a one-entry
 * config, and one directive slot per flow. Flow F's directive is slot F % slots while the
 * slot's owner, the first __u32 of the value, is F. The shim (ccswitch_datapath_support::
 * mapped::DirectiveSlots) writes a slot's fields before its owner when it takes the slot, and
 * the owner first when it gives it back, so a program that reads the slot through
 * ccsw_directive_in never applies a half-written slot to a flow; a slot whose owner changes
 * under a packet is applied to no flow.
 *
 * Up, records go through ring buffers, and a record wakes the shim only when it must: a
 * wake-up is an inter-processor interrupt (irq_work), dearer than the rest of a program's run
 * together (8 us each on these VMs, against about 1 us). Each datapath decides which of its
 * records are due a wake-up (urgent ones, or a ring filled past a size or holding a record
 * past an age); ccsw_wake_flags then forces one only if the shim has read the ring since
 * the last forced wake-up (its consumer position moved: until it reads, it is awake or about
 * to be, and will see this record too), and, if the datapath asks for a gap, only once the
 * last is that old. The wake state is a racy hint: two CPUs may both wake, which costs a
 * wake-up and nothing else.
 */
#ifndef CCSW_SHIM_CHANNEL_BPF_H
#define CCSW_SHIM_CHANNEL_BPF_H

/* The body of an array map of `entries` values of `value_type` that the shim maps into its
 * memory (to write, or to read in place): struct { CCSW_SHIM_ARRAY(struct x, n); } name
 * SEC(".maps"); */
#define CCSW_SHIM_ARRAY(value_type, entries)        \
	__uint(type, BPF_MAP_TYPE_ARRAY);           \
	__uint(map_flags, BPF_F_MMAPABLE);          \
	__uint(max_entries, entries);               \
	__type(key, __u32);                         \
	__type(value, value_type)

/* The directive slot of flow_id among `slots`. */
static __always_inline __u32 ccsw_directive_slot(__u32 flow_id, __u32 slots)
{
	return slots ? flow_id % slots : 0;
}

/* Slot `slot` of the directives array `map`, if flow_id holds it (its first __u32). */
static __always_inline void *ccsw_directive_in(void *map, __u32 slot, __u32 flow_id)
{
	__u32 *owner = bpf_map_lookup_elem(map, &slot);

	return owner && *owner == flow_id ? owner : NULL;
}

/* Where a ring's consumer stood, and when, at the last wake-up forced for it. */
struct ccsw_wake_state {
	__u64 cons_pos; /* initialise to ~0ULL: no wake-up yet */
	__u64 at_ns;
};

/* The flags to submit a record with that is due a wake-up, into `ring` (see above): a
 * wake-up at most once per `gap_ns` (0: no gap). */
static __always_inline __u64 ccsw_wake_flags(void *ring, struct ccsw_wake_state *w, __u64 gap_ns)
{
	__u64 cons = bpf_ringbuf_query(ring, BPF_RB_CONS_POS), now = 0;

	if (cons == w->cons_pos)
		return BPF_RB_NO_WAKEUP;
	if (gap_ns) {
		now = bpf_ktime_get_ns();
		if (now - w->at_ns < gap_ns)
			return BPF_RB_NO_WAKEUP;
	}
	w->cons_pos = cons;
	w->at_ns = now;
	return BPF_RB_FORCE_WAKEUP;
}

#endif
