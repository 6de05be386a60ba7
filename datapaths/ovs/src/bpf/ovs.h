/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * ccswitch ovs datapath: layouts shared by the port programs (ovs.bpf.c) and their
 * Rust loader (src/abi.rs mirrors every struct here with #[repr(C)] and asserts the same
 * sizes at compile time).
 *
 * Only fixed-width types, every struct padded explicitly so that C and Rust agree without
 * relying on implicit padding. Multi-byte fields are in host byte order (ports, sequence
 * numbers); addresses are raw network-order bytes, IPv4 in bytes 0..3 of the 16.
 */
#ifndef CCSW_OVS_H
#define CCSW_OVS_H

#ifndef __VMLINUX_H__
#include <stdint.h>
typedef uint8_t __u8;
typedef uint16_t __u16;
typedef uint32_t __u32;
typedef uint64_t __u64;
#endif

#include "std_fold.bpf.h"

/* Largest frame a slab slot holds: a 1500-byte MTU frame plus its Ethernet header, rounded
 * up. Larger frames (GSO super-packets, jumbo MTU) make the flow UNBUFFERED. */
#define CCSW_FRAME_MAX 1536

/* Slots the ingress program tries before it declares the slab full: CCSW_SLAB_LINEAR from a
 * rotating hint, the rest scattered over the whole slab (see slab_alloc). With a fraction p
 * of the slab in use, a search fails with probability about p^56: at the 72% that 10k flows'
 * first windows took at the end of their ramp, 1e-8 a frame (p^24, with 32 probes, was 4e-4,
 * and a few flows fell back in most runs). The extra probes cost only when slots are busy. */
#define CCSW_SLAB_PROBES 64
#define CCSW_SLAB_LINEAR 8

/* Frames one run of the inject program sends (entries of `inject_frames`; the kernel runs
 * at most 256 frames per batch of a live-frames test run). */
#define CCSW_INJECT_BATCH 256

/* Routine records wake the shim only once this much waits in the ring. */
#define CCSW_WAKE_BYTES (64u << 10)
/* Data ending at most this far below the highest end seen is still copied (see ccsw_ingress). */
#define CCSW_REORDER_BYTES (64 * 1024)

/* The 4 bytes of XDP metadata ccsw_inject puts before every frame it sends ("ccsw"): the
 * ingress program tells the shim's own copies coming back past the port by them. Metadata
 * exists only inside the kernel, so no frame from the wire carries it. */
#define CCSW_INJECT_MARK 0x63637377u

/* Record kinds: the first byte of every ring-buffer record. */
#define CCSW_EV_ESTABLISHED 1
#define CCSW_EV_SEGMENT 2
#define CCSW_EV_RESENT 3
#define CCSW_EV_ACK 4
#define CCSW_EV_CLOSED 5
#define CCSW_EV_UNBUFFERED 6
#define CCSW_EV_FOLDED 7

/* struct ccsw_ovs_directive_slot.fold */
#define CCSW_FOLD_PER_RTT 1  /* fold the standard program's ACKs, a report per RTT */
#define CCSW_FOLD_PER_ACK 2  /* ... a report per ACK */
#define CCSW_FOLD_MODE 3
#define CCSW_FOLD_HOLD 4     /* the shim's sender model is recovering a loss: every ACK goes up */

/* struct ccsw_flow_key.family */
#define CCSW_FAMILY_V4 4
#define CCSW_FAMILY_V6 6

/* struct ccsw_ovs_flow_entry.state */
#define CCSW_ST_SYN_SEEN 1
#define CCSW_ST_SYNACK_SEEN 2
#define CCSW_ST_ESTABLISHED 3

/* struct ccsw_ovs_flow_entry.flags */
#define CCSW_F_UNBUFFERED (1u << 0) /* data up to hole_end was not all copied: uncontrolled until it is acknowledged */
#define CCSW_F_CLIENT_FIN (1u << 1)
#define CCSW_F_SERVER_FIN (1u << 2)
#define CCSW_F_HAVE_LAST (1u << 3) /* last_ack / last_win_* hold a forwarded ACK */
#define CCSW_F_LOSS_SEEN (1u << 4) /* the last ACK carried SACK blocks or did not move forward */
#define CCSW_F_UNCOPYABLE (1u << 5) /* its frames do not fit a slot: never copied, never controlled again */
#define CCSW_F_FOLD_REPORTED (1u << 6) /* the fold reported here under the program's current start */

/* struct ccsw_ovs_flow_entry.opts: options seen in each side's SYN */
#define CCSW_O_MSS (1u << 0)
#define CCSW_O_WSCALE (1u << 1)
#define CCSW_O_SACK (1u << 2)
#define CCSW_O_TS (1u << 3)
#define CCSW_O_CLIENT_SHIFT 0
#define CCSW_O_SERVER_SHIFT 4

/* struct ccsw_ovs_ack_event.verdict */
#define CCSW_VERDICT_PASSED 0
#define CCSW_VERDICT_REWRITTEN 1
#define CCSW_VERDICT_HIDDEN 2

/* struct ccsw_ovs_ack_event.flags */
#define CCSW_ACK_F_ECE (1u << 0)
#define CCSW_ACK_F_FIN (1u << 1)

/* struct ccsw_closed_event.reason */
#define CCSW_CLOSE_FIN 1
#define CCSW_CLOSE_RST 2

/* struct ccsw_unbuffered_event.reason */
#define CCSW_UNBUF_RING_FULL 1
#define CCSW_UNBUF_TOO_LARGE 2
#define CCSW_UNBUF_SLAB_FULL 3

#define CCSW_MAX_SACK 4

/* Key of the flow table: the connection, server side first. */
struct ccsw_flow_key {
	__u8 family; /* CCSW_FAMILY_V4 / _V6 */
	__u8 _pad0;
	__u16 server_port;
	__u16 client_port;
	__u16 _pad1;
	__u8 server_addr[16];
	__u8 client_addr[16];
};

/* Value of the flow table. */
struct ccsw_ovs_flow_entry {
	__u64 last_seen_ns;
	__u32 flow_id;     /* 0 until ESTABLISHED */
	__u32 client_isn;
	/* snd_nxt and seen_from share one aligned 64-bit word, which the ingress program changes
	 * by compare-and-swap (see seen_step in ovs.bpf.c). */
	__u32 snd_nxt;     /* highest end (seq + len + FIN) of server data seen */
	__u32 seen_from;    /* every byte from here to snd_nxt crossed the port before (see ccsw_ingress) */
	__u32 server_isn;
	__u32 server_fin_end; /* sequence after the server's FIN */
	__u32 last_ack;    /* acknowledgement number of the last ACK forwarded to the server */
	__u16 last_win_fwd;  /* window field of that ACK as forwarded */
	__u16 last_win_orig; /* its window field as the client sent it */
	__u16 client_mss;
	__u16 server_mss;
	__u8 client_wscale; /* as sent, capped at 14 */
	__u8 server_wscale;
	__u8 state;         /* CCSW_ST_* */
	__u8 flags;         /* CCSW_F_* */
	__u8 opts;          /* CCSW_O_* << CCSW_O_{CLIENT,SERVER}_SHIFT */
	__u8 _pad0[7];
	__u32 hole_end;     /* with CCSW_F_UNBUFFERED: snd_nxt when the last copy failed */
	__u32 acks_folded;  /* ACKs in fold.regs not yet sent up */
	/* The per-ACK fold of the standard program (see on_ack in ovs.bpf.c). */
	struct ccsw_std_fold fold;
	__u64 delivered;    /* bytes acknowledged since establishment */
	__u64 probe_ns;     /* when the timed segment crossed the port */
	__u64 probe_delivered; /* `delivered` then */
	__u32 probe_end;    /* end of the segment timed for an RTT sample (0: none) */
	__u32 rtt_us;       /* the latest RTT sample (0: none yet) */
};

/* A slot of the flow table. `flows` is an array searched by open addressing, in two regions:
 * a near one of at most CCSW_FLOW_NEAR_MAX slots (4 MiB) and, for a table sized beyond it, a
 * far one of a power of two at least twice --max-flows. A key lives in one of its probes:
 * CCSW_FLOW_NEAR_PROBES consecutive slots of the near region from ccsw_flow_hash(key), then
 * CCSW_FLOW_FAR_PROBES consecutive slots of the far region (all CCSW_FLOW_PROBES in the near
 * one when there is no far one), in the first that was free when its SYN came.
 *
 * Why so: what an ACK pays to find its flow grows with the span of memory the flows are
 * spread over, not only with their number (page walks, most likely): at 1,000 flows the
 * egress program took 940 ns a packet with a 4-MiB table, 1,100 with one of 64 MiB and 1,120
 * with the hash map it replaced (ovs-flow-array-2026-11-28). The near region keeps the flows
 * of a port carrying up to about 10,000 (about 1% of them overflow at 10,000) within 4 MiB
 * whatever the port is sized for; beyond, the far region takes the rest. At 10k flows and a
 * port sized for 100k, egress went from 1,290 to 1,080 ns a packet in one batch.
 *
 * Nothing is moved on removal, so a search reads all the probes before it says "absent" (only
 * frames of flows the port does not track, and SYNs, pay that).
 * `used` moves FREE -> CLAIMED -> LIVE by compare-and-swap when the port's SYN creates the
 * entry (the key and entry are written while CLAIMED, so no search sees them half-written),
 * and LIVE -> FREE, by compare-and-swap too, when the port closes the flow or the shim forgets
 * it. */
#define CCSW_FLOW_NEAR_MAX 16384
#define CCSW_FLOW_NEAR_PROBES 8
#define CCSW_FLOW_FAR_PROBES 32
#define CCSW_FLOW_PROBES (CCSW_FLOW_NEAR_PROBES + CCSW_FLOW_FAR_PROBES)
#define CCSW_SLOT_FREE 0
#define CCSW_SLOT_CLAIMED 1
#define CCSW_SLOT_LIVE 2

struct ccsw_ovs_flow_slot {
	struct ccsw_flow_key key;
	__u32 used;  /* CCSW_SLOT_* */
	__u32 generation; /* of the slot's last flow id (see establish in ovs.bpf.c) */
	struct ccsw_ovs_flow_entry f;
	__u8 _pad1[24]; /* to whole cache lines */
};

/* Where a key's search starts (before the masks): the key's ten 32-bit words in host order,
 * multiplied in, then murmur3's finalizer. The shim computes the same (abi::flow_hash). */
static inline __u32 ccsw_flow_hash(const struct ccsw_flow_key *k)
{
	const __u32 *w = (const __u32 *)k;
	__u32 h = 0;

#pragma unroll
	for (int i = 0; i < (int)(sizeof(*k) / 4); i++)
		h = (h ^ w[i]) * 0x9E3779B1u;
	h ^= h >> 16;
	h *= 0x85EBCA6Bu;
	h ^= h >> 13;
	h *= 0xC2B2AE35u;
	h ^= h >> 16;
	return h;
}

/* A slot of the directives array, written by the shim only (see shim_channel.bpf.h: it
 * stores the fields in this order, the owner last): directives[i] belongs to the flow in
 * flow slot i, whose id is i modulo the slots. */
struct ccsw_ovs_directive_slot {
	__u32 flow_id;      /* owner; 0 = free */
	__u32 cwnd_bytes;
	__u32 sacked_bytes;
	__u32 sacked_una;
	__u32 active;
	__u32 fold_window_pct; /* Control.window_use_pct */
	__u64 fold_start_us; /* when the standard program (re)started: registers reset, Micros counts from here */
	__u64 fold_idle_us;  /* Control.idle_report_us */
	__u64 fold_rate;     /* the program's Rate, bytes/s (0: not paced) */
	__u64 fold_micros_zero_us; /* when the flow last reported under fold_start_us (Micros restarts), 0: not yet */
	__u32 fold_cwnd_bytes; /* the program's Cwnd (the agent's window, before the port's caps) */
	__u32 fold;          /* CCSW_FOLD_*: 0, the shim interprets every ACK; after the fields it makes the egress program read */
};

struct ccsw_ovs_config {
	__u64 valid_until_ns; /* CLOCK_MONOTONIC; the directives apply only while now < this (0: never) */
	__u32 copy_limit;     /* frames longer than this are not copied (0: CCSW_FRAME_MAX) */
	__u32 wake_gap_ns;    /* urgent records force a wake-up at most once per this (see wake_flags) */
	__u32 inject_count;   /* frames staged in inject_frames for the next inject run (shim) */
	__u32 inject_next;    /* the next of them the inject program sends (reset to 0 by the shim) */
	__u32 inject_ifindex; /* the port: ccsw_inject passes frames received anywhere else untouched */
	__u32 _pad0;
	__u8 _pad1[32];
	/* Its own cache line: every SYN and every close writes it, from either CPU, and the
	 * egress program reads the line above (valid_until_ns) on every ACK. */
	__u32 live_flows;     /* entries of the flow table, at most --max-flows (changed atomically, by both sides) */
	__u32 _pad2[15];
};

/* Counters, one slot per CPU; same order as loader::Stats. */
struct ccsw_ovs_cpu_stats {
	__u64 packets;
	__u64 malformed;
	__u64 syns;
	__u64 established;
	__u64 closed;
	__u64 segments;
	__u64 resent;
	__u64 acks;
	__u64 acks_rewritten;
	__u64 dupacks_hidden;
	__u64 sack_stripped;
	__u64 ece_cleared;
	__u64 out_of_window;
	__u64 wscale_capped;
	__u64 ring_drops;
	__u64 unbuffered;
	__u64 dupacks_opened; /* duplicate ACKs forwarded because the clamp opened the window */
	__u64 slab_full;      /* frames not copied: no free slab slot within CCSW_SLAB_PROBES */
	__u64 table_full;     /* SYNs of flows the full flow table could not take (never controlled) */
	__u64 acks_folded;    /* ACKs folded here instead of sent up */
	__u64 folded_reports; /* reports of the fold (FOLDED records with `reported`) */
	__u64 copies_seen;    /* the shim's injected copies seen coming back (not copied again) */
};

/* Common head of every record. */
struct ccsw_ev_head {
	__u8 kind;
	__u8 _pad0[3];
	__u32 flow_id;
	__u64 ts_ns; /* bpf_ktime_get_ns when the frame crossed the port */
};

struct ccsw_established_event {
	struct ccsw_ev_head h;
	struct ccsw_flow_key key;
	__u16 mss;
	__u8 client_wscale;
	__u8 server_wscale;
	__u8 sack;
	__u8 timestamps;
	__u8 _pad0[2];
	__u32 server_isn;
	__u32 client_isn;
};

/* New server data: the frame itself is in slab slot `slot`, which the shim now owns (it
 * gives the slot back by zeroing slab_owner[slot] once it no longer needs the frame). */
struct ccsw_segment_event {
	struct ccsw_ev_head h;
	__u32 seq;
	__u32 len;       /* payload bytes + 1 for a FIN */
	__u16 frame_len; /* valid bytes in the slot */
	__u8 fin;
	__u8 has_tsval;
	__u32 slot;
	__u32 tsval;     /* its TCP timestamp value, with has_tsval (see ccsw_resent_event) */
	__u32 _pad0;
};

/* A value of slab_owner: one per slab slot. Array values are 8-byte aligned, so the word
 * is padded to the stride the shim sees in its mapping. */
struct ccsw_slot_owner {
	__u32 flow_id; /* 0: free */
	__u32 _pad0;
};

/* A value of the slab (BPF_F_MMAPABLE array; the shim maps it and only reads it). */
struct ccsw_ovs_frame_slot {
	__u8 frame[CCSW_FRAME_MAX];
};

/* A frame staged for re-injection (BPF_F_MMAPABLE array `inject_frames`, written by the
 * shim, read by ccsw_inject). */
struct ccsw_inject_frame {
	__u32 len;
	__u32 _pad0;
	__u8 frame[CCSW_FRAME_MAX];
};

/* Server data at or below the highest end seen: the server's own retransmission, or the
 * shim's copy coming back past the port. `tsval` is its TCP timestamp (with `has_tsval`):
 * the server's clock as the client last saw it, which a copy the shim sends later must not
 * be behind (the client's PAWS check drops it). */
struct ccsw_resent_event {
	struct ccsw_ev_head h;
	__u32 seq;
	__u32 len;
	__u32 tsval;
	__u8 has_tsval;
	__u8 _pad0[3];
};

struct ccsw_ovs_sack_block {
	__u32 start;
	__u32 end;
};

struct ccsw_ovs_ack_event {
	struct ccsw_ev_head h;
	__u32 ack;
	__u32 window_bytes; /* original field << client_wscale */
	__u32 payload_len;
	__u8 flags;         /* CCSW_ACK_F_* */
	__u8 verdict;       /* CCSW_VERDICT_* */
	__u8 nsack;         /* valid entries in sack[] */
	__u8 _pad0;
	struct ccsw_ovs_sack_block sack[CCSW_MAX_SACK];
};

/* The standard program's registers folded here for a flow: its report (`reported`), or
 * handed over to the shim before an ACK the shim must see itself (which it folds on). */
struct ccsw_folded_event {
	struct ccsw_ev_head h;
	__u64 start_us;      /* the fold_start_us the registers belong to */
	__u32 ack;           /* the last folded ACK's acknowledgement number */
	__u32 window_bytes;  /* its window as the client sent it, scaled */
	__u32 acks;          /* ACKs folded in these registers */
	__u8 reported;
	__u8 _pad0[3];
	struct ccsw_std_regs regs;
};

/* Context of the fold's test program (BPF_PROG_TEST_RUN): one ACK through the fold
 * on_ack runs; state and report come back in it. */
struct ccsw_ovs_fold_test {
	struct ccsw_std_fold state;
	struct ccsw_std_ack ack;
	struct ccsw_std_reporting reporting;
	__u64 start_us;
	__u32 reported;            /* out: 1 if this ACK reported */
	__u32 _pad0;
	struct ccsw_std_regs report; /* out: the report */
};

struct ccsw_closed_event {
	struct ccsw_ev_head h;
	__u32 reason; /* CCSW_CLOSE_* */
	__u32 _pad0;
};

/* A frame could not be copied: the data up to hole_end is not all in the slab, so the flow
 * is uncontrolled until the client acknowledges hole_end (sent on every failed copy, waking
 * the shim on the first of a run). */
struct ccsw_unbuffered_event {
	struct ccsw_ev_head h;
	__u32 reason; /* CCSW_UNBUF_* */
	__u32 hole_end;
};

_Static_assert(sizeof(struct ccsw_flow_key) == 40, "flow key");
_Static_assert(sizeof(struct ccsw_ovs_flow_entry) == 184, "flow");
_Static_assert(__builtin_offsetof(struct ccsw_ovs_flow_slot, f.snd_nxt) % 8 == 0 &&
	       __builtin_offsetof(struct ccsw_ovs_flow_entry, seen_from) ==
		       __builtin_offsetof(struct ccsw_ovs_flow_entry, snd_nxt) + 4,
	       "snd_nxt and seen_from: one aligned word, snd_nxt its low half");
_Static_assert(sizeof(struct ccsw_ovs_flow_slot) == 256, "flow slot");
_Static_assert(sizeof(struct ccsw_ovs_directive_slot) == 64, "directive");
_Static_assert(__builtin_offsetof(struct ccsw_ovs_directive_slot, flow_id) == 0, "a directive slot's owner is its first word (shim_channel.bpf.h)");
_Static_assert(sizeof(struct ccsw_ovs_config) == 128 && __builtin_offsetof(struct ccsw_ovs_config, live_flows) == 64, "config");
_Static_assert(sizeof(struct ccsw_inject_frame) == 8 + CCSW_FRAME_MAX, "inject frame");
_Static_assert(sizeof(struct ccsw_ovs_cpu_stats) == 176, "stats");
_Static_assert(sizeof(struct ccsw_ev_head) == 16, "head");
_Static_assert(sizeof(struct ccsw_established_event) == 72, "established");
_Static_assert(sizeof(struct ccsw_segment_event) == 40, "segment");
_Static_assert(sizeof(struct ccsw_ovs_frame_slot) == CCSW_FRAME_MAX, "frame slot");
_Static_assert(sizeof(struct ccsw_slot_owner) == 8, "slot owner");
_Static_assert(sizeof(struct ccsw_resent_event) == 32, "resent");
_Static_assert(sizeof(struct ccsw_ovs_ack_event) == 64, "ack");
_Static_assert(sizeof(struct ccsw_closed_event) == 24, "closed");
_Static_assert(sizeof(struct ccsw_folded_event) == 112, "folded");
_Static_assert(sizeof(struct ccsw_ovs_fold_test) == 248, "fold test");
_Static_assert(sizeof(struct ccsw_unbuffered_event) == 24, "unbuffered");

#endif
