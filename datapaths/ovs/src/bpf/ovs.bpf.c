// SPDX-License-Identifier: GPL-2.0-only
/*
 * ccswitch ovs datapath: the port programs.
 *
 * Model
 * -----
 * Two TCX programs sit on the bridge port that faces an unmodified TCP server:
 *
 *  - ccsw_ingress (frames FROM the server): learns the server's handshake options and
 *    copies every frame carrying new data (end beyond the highest sequence seen, less a
 *    reordering allowance) whole into a slot of the frame slab, and hands userspace a small
 *    SEGMENT descriptor (slot, sequence, length) through the ring, so that userspace can
 *    retransmit the frame byte for byte from the slot it reads in place. Data further below,
 *    data that crossed the port before, and userspace's own injected copies (marked by
 *    ccsw_inject) are retransmissions: RESENT, without a frame.
 *  - ccsw_egress (frames TOWARD the server): creates flow entries from client SYNs, completes
 *    them on the client's ACK of the SYN-ACK, reports every ACK, and while userspace controls
 *    the flow lowers the advertised window to userspace's window, hides duplicate ACKs, and
 *    removes SACK blocks and ECE, so the server's own congestion control sees a loss-free
 *    path whose receiver window is the agent's congestion window.
 *
 * Directive is all-or-nothing per ACK and fails open: it applies only while a `directives` slot
 * is active, the global deadline (`config.valid_until_ns`, pushed forward by userspace while
 * the agent answers) lies ahead, and every byte the ACK leaves outstanding was copied (no
 * UNBUFFERED hole at or beyond it).
 * Otherwise every frame passes unchanged and the server's TCP recovers on its own.
 *
 * The frame slab
 * --------------
 * `slab` is an mmapable array of CCSW_FRAME_MAX-byte slots (AttachOptions.slab_slots), and
 * `slab_owner` (mmapable too) holds one word per slot (ccsw_slot_owner.flow_id): 0 when free,
 * else the flow id of the owner (never 0: see copy_segment). A slot changes hands in exactly
 * two ways, so the two sides never write the same word at the same time with different
 * intentions:
 *  - allocation, here only: an atomic compare-and-swap 0 -> owner on the slot's word, tried
 *    on at most CCSW_SLAB_PROBES slots. Only the winner of the swap writes the slot, so two
 *    CPUs can never fill the same slot; userspace never writes a word that is 0.
 *  - release, by userspace only (or here, when the record cannot be sent): a plain store of 0
 *    after its last read of the frame. A word that is not 0 is never written here.
 * The frame is written before the descriptor is submitted, and the ring's submit/consume pair
 * orders the two, so userspace never reads a slot before it is complete. Why not an index
 * ring (a free list): it needs a multi-producer, multi-consumer queue between CPUs in BPF;
 * per-slot words need one cmpxchg and no locks. The search: the first CCSW_SLAB_LINEAR probes
 * follow a rotating hint (an atomic counter), which nearly always finds a free slot at once,
 * since slots are given back roughly in the order they were taken (ACKs advance in sequence
 * order) and the hint comes back to a slot only a whole slab of frames later. But a server
 * sends a flow's window back to back, so the slots of one flow lie in runs, and a flow that
 * holds its window for long (a loss waiting for its timeout) leaves a run the hint must cross:
 * the remaining probes are therefore scattered over the whole slab (golden-ratio steps), and
 * the search fails only when the slab is nearly full (at a fraction p of slots in use, with
 * probability about p^(CCSW_SLAB_PROBES - CCSW_SLAB_LINEAR)), not when the hint meets one
 * busy run. A slab with no free slot
 * within the probes (counted in slab_full), like a full ring, leaves a hole in the copies:
 * the flow is UNBUFFERED up to `hole_end` (the highest end seen), uncontrolled until the
 * client acknowledges hole_end, so the server's own TCP recovers whatever of it is lost and
 * no byte is ever lost to the slab. Copies go on meanwhile: once the hole is acknowledged,
 * the copies from it on are complete again and the flow can be controlled again (the shim
 * rejoins it when its own buffer agrees). Only frames too large for a slot end copying for
 * good (UNCOPYABLE).
 *
 * Frames that cannot be parsed are counted and passed unchanged; nothing here ever drops a
 * frame except a duplicate ACK of a controlled flow. Headers are read with
 * bpf_skb_load_bytes into the stack, so non-linear skbs need no pull and every access is
 * bounded by construction.
 *
 * Window arithmetic is in the client's scaled units: the field that leaves is
 * min(original field, ceil(allowed bytes / 2^wscale)), never larger than what the client
 * sent, and at least 1 when anything is allowed (a zero window stays zero).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "ovs.h"
#include "shim_channel.bpf.h"

char _license[] SEC("license") = "GPL";

#define ETH_HLEN 14
#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define IP_MF_OFFSET 0x3fff
#define TCP_HLEN 20
#define TCP_OPT_MAX 40

#define TH_FIN 0x01
#define TH_SYN 0x02
#define TH_RST 0x04
#define TH_ACK 0x10
#define TH_ECE 0x40

#define TCPOPT_EOL 0
#define TCPOPT_NOP 1
#define TCPOPT_MSS 2
#define TCPOPT_WSCALE 3
#define TCPOPT_SACK_PERM 4
#define TCPOPT_SACK 5
#define TCPOPT_TS 8

#define WSCALE_MAX 14 /* RFC 7323 §2.3 */
#define DEFAULT_MSS_V4 536
#define DEFAULT_MSS_V6 1220
/* An ACK further behind the last forwarded one than this is not a reordered ACK. */
#define STALE_ACK_LIMIT (1u << 30)

/* The flow table (see struct ccsw_ovs_flow_slot). It never evicts: a SYN that finds no free
 * slot among its probes is refused (counted in table_full, and the flow stays with the
 * server's TCP) rather than a controlled flow silently dropped. Entries leave on FIN/RST and
 * on the shim's idle timeout. The shim maps it to read entries and to free slots. */
struct {
	CCSW_SHIM_ARRAY(struct ccsw_ovs_flow_slot, CCSW_FLOW_NEAR_MAX); /* AttachOptions::flow_regions(), set before load */
} flows SEC(".maps");

/* Slots of the near region of `flows` and of the far one after it (0: none), powers of two
 * (set by the loader with the map's size). */
const volatile __u32 ccsw_flow_near_slots = CCSW_FLOW_NEAR_MAX;
const volatile __u32 ccsw_flow_far_slots = 0;

/* One directive slot per slot of `flows`, at the same index: the flow in flow slot i reads
 * directives[i]. Its address is known from the key's probe, before the flow's slot comes
 * from memory (it was flow_id % --max-flows, the id read from the slot), and the directives
 * of a port's first ~10k flows lie within the near region's 1 MiB (they were spread over
 * 64 bytes * --max-flows). Egress took 828 ns a packet against 909 (5 of 5 alternated
 * pairs 0.86-0.94; ovs-directive-by-slot-2026-11-28); loading the directive explicitly
 * right after the probe gained nothing more, so the CPU overlaps the two misses already or
 * the gain is the smaller span. Flow ids are chosen so that flow_id % ccsw_flow_slots is the
 * flow's slot (see establish), which keeps the shim's side (DirectiveSlots: flow F in slot
 * F % slots) as it was. */
struct {
	CCSW_SHIM_ARRAY(struct ccsw_ovs_directive_slot, CCSW_FLOW_NEAR_MAX); /* as `flows`, set before load */
} directives SEC(".maps");

/* Slots of `flows` and `directives` (near + far), and the generations a flow slot counts
 * through before its ids repeat (the most that keep generation * slots + index in 32 bits). */
const volatile __u32 ccsw_flow_slots = CCSW_FLOW_NEAR_MAX;
const volatile __u32 ccsw_flow_generations = 0xffffffffu / CCSW_FLOW_NEAR_MAX - 1;

/* The flows the table takes (--max-flows): its capacity, kept below its slots so that
 * probe sequences stay short. */
const volatile __u32 ccsw_max_flows = 65536;

struct {
	CCSW_SHIM_ARRAY(struct ccsw_ovs_config, 1); /* the shim stores the deadline directly */
} conf SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ccsw_ovs_cpu_stats);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20); /* AttachOptions.ring_bytes, set before load */
} events SEC(".maps");

/* The frame slab and its owner words (see the model above). */
struct {
	CCSW_SHIM_ARRAY(struct ccsw_ovs_frame_slot, 65536); /* AttachOptions.slab_slots, set before load */
} slab SEC(".maps");

struct {
	CCSW_SHIM_ARRAY(struct ccsw_slot_owner, 65536); /* AttachOptions.slab_slots, set before load */
} slab_owner SEC(".maps");

/* Entries of `slab` and `slab_owner` (set by the loader with the maps' size). */
const volatile __u32 ccsw_slab_slots = 65536;

/* Where the next slot search starts. */
__u32 slab_hint = 0;

#define COUNT(field)                                             \
	do {                                                     \
		__u32 zero_ = 0;                                 \
		struct ccsw_ovs_cpu_stats *s_ = bpf_map_lookup_elem(&stats, &zero_); \
		if (s_)                                          \
			s_->field++;                             \
	} while (0)

static __always_inline bool seq_after(__u32 a, __u32 b)
{
	return (__s32)(a - b) > 0;
}

/* The directive of the flow in flow slot `idx`, if the flow holds it. */
static __always_inline struct ccsw_ovs_directive_slot *directive_of(__u32 idx, __u32 flow_id)
{
	return ccsw_directive_in(&directives, idx, flow_id);
}

static __always_inline struct ccsw_ovs_config *get_config(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&conf, &zero);
}

static __always_inline bool key_eq(const struct ccsw_flow_key *a, const struct ccsw_flow_key *b)
{
	const __u64 *x = (const __u64 *)a, *y = (const __u64 *)b;

	return x[0] == y[0] && x[1] == y[1] && x[2] == y[2] && x[3] == y[3] && x[4] == y[4];
}

/* Probe i of a key whose hash is h (see struct ccsw_ovs_flow_slot): its index in `flows`. */
static __always_inline __u32 flow_probe(__u32 h, __u32 i)
{
	if (!ccsw_flow_far_slots || i < CCSW_FLOW_NEAR_PROBES)
		return (h + i) & (ccsw_flow_near_slots - 1);
	return ccsw_flow_near_slots + ((h + i - CCSW_FLOW_NEAR_PROBES) & (ccsw_flow_far_slots - 1));
}

/* The live slot of `key`, if the table has one, and its index in *idx. */
static __always_inline struct ccsw_ovs_flow_slot *flow_find(const struct ccsw_flow_key *key, __u32 *idx)
{
	__u32 h = ccsw_flow_hash(key);

	for (__u32 i = 0; i < CCSW_FLOW_PROBES; i++) {
		__u32 at = flow_probe(h, i);
		struct ccsw_ovs_flow_slot *s = bpf_map_lookup_elem(&flows, &at);

		if (s && s->used == CCSW_SLOT_LIVE && key_eq(&s->key, key)) {
			*idx = at;
			return s;
		}
	}
	return NULL;
}

/* Takes a free slot among `key`'s probes and writes the key in it: the caller fills the
 * entry, then makes it live. NULL when the table holds --max-flows entries or every probe
 * is taken. */
static __always_inline struct ccsw_ovs_flow_slot *flow_claim(const struct ccsw_flow_key *key)
{
	struct ccsw_ovs_config *cfg = get_config();
	__u32 h = ccsw_flow_hash(key);

	if (!cfg)
		return NULL;
	if (__sync_fetch_and_add(&cfg->live_flows, 1) >= ccsw_max_flows) {
		__sync_fetch_and_add(&cfg->live_flows, -1);
		return NULL;
	}

	for (__u32 i = 0; i < CCSW_FLOW_PROBES; i++) {
		__u32 at = flow_probe(h, i);
		struct ccsw_ovs_flow_slot *s = bpf_map_lookup_elem(&flows, &at);

		if (s && s->used == CCSW_SLOT_FREE &&
		    __sync_val_compare_and_swap(&s->used, CCSW_SLOT_FREE, CCSW_SLOT_CLAIMED) == CCSW_SLOT_FREE) {
			s->key = *key;
			return s;
		}
	}
	__sync_fetch_and_add(&cfg->live_flows, -1);
	return NULL;
}

/* Frees a live slot, once: here or by the shim (OvsDatapath::remove_flow), whichever wins. */
static __always_inline void flow_free(struct ccsw_ovs_flow_slot *s)
{
	struct ccsw_ovs_config *cfg = get_config();

	if (__sync_val_compare_and_swap(&s->used, CCSW_SLOT_LIVE, CCSW_SLOT_FREE) == CCSW_SLOT_LIVE && cfg)
		__sync_fetch_and_add(&cfg->live_flows, -1);
}

/* TCP options of one segment, walked by opt_step. The option bytes live here too, because
 * bpf_loop callbacks can only reach the caller's stack through their context pointer. */
struct opt_walk {
	__u8 opts[TCP_OPT_MAX];
	__u32 len;     /* option bytes in the header (doff*4 - 20) */
	__u32 pos;
	__u64 sack_mask; /* bit i: byte i belongs to a SACK option */
	struct ccsw_ovs_sack_block sack[CCSW_MAX_SACK];
	__u32 tsval;   /* with CCSW_O_TS */
	__u16 mss;
	__u8 wscale;
	__u8 present;  /* CCSW_O_* */
	__u8 nsack;
	__u8 bad;
	__u8 _pad[2];
};

struct pkt {
	struct ccsw_flow_key key;
	__u32 l4_off;
	__u32 seq;
	__u32 ack;
	__u32 payload_len;
	__u32 word12;  /* TCP header bytes 12..15 (offset, flags, window) as in the packet */
	__u16 window;  /* host order */
	__u8 flags;
	__u8 _pad;
	struct opt_walk o;
};

static __always_inline __u32 be32_at(const __u8 *b)
{
	return ((__u32)b[0] << 24) | ((__u32)b[1] << 16) | ((__u32)b[2] << 8) | b[3];
}

static long opt_step(__u32 i, void *ctx)
{
	struct opt_walk *w = ctx;
	__u32 pos = w->pos;
	__u32 len;
	__u8 kind;

	if (pos >= w->len || pos >= TCP_OPT_MAX)
		return 1;
	kind = w->opts[pos];
	if (kind == TCPOPT_EOL)
		return 1;
	if (kind == TCPOPT_NOP) {
		w->pos = pos + 1;
		return 0;
	}
	if (pos + 1 >= w->len || pos + 1 >= TCP_OPT_MAX) {
		w->bad = 1;
		return 1;
	}
	len = w->opts[pos + 1];
	if (len < 2 || pos + len > w->len) {
		w->bad = 1;
		return 1;
	}
	switch (kind) {
	case TCPOPT_MSS:
		if (len == 4 && pos + 4 <= TCP_OPT_MAX) {
			w->mss = ((__u16)w->opts[pos + 2] << 8) | w->opts[pos + 3];
			w->present |= CCSW_O_MSS;
		}
		break;
	case TCPOPT_WSCALE:
		if (len == 3 && pos + 3 <= TCP_OPT_MAX) {
			w->wscale = w->opts[pos + 2];
			w->present |= CCSW_O_WSCALE;
		}
		break;
	case TCPOPT_SACK_PERM:
		if (len == 2)
			w->present |= CCSW_O_SACK;
		break;
	case TCPOPT_TS:
		if (len == 10 && pos + 10 <= TCP_OPT_MAX) {
			w->tsval = be32_at(&w->opts[pos + 2]);
			w->present |= CCSW_O_TS;
		}
		break;
	case TCPOPT_SACK:
		/* A SACK option never exceeds 34 bytes; the mask covers all of it whatever the
		 * number of blocks recorded, so stripping removes the option entirely. */
		w->sack_mask |= ((1ULL << len) - 1) << pos;
		for (int k = 0; k < CCSW_MAX_SACK; k++) {
			__u32 at = pos + 2 + 8 * k;
			__u8 n = w->nsack;

			if (at + 8 > pos + len || at + 8 > TCP_OPT_MAX || n >= CCSW_MAX_SACK)
				break;
			w->sack[n & (CCSW_MAX_SACK - 1)].start = be32_at(&w->opts[at]);
			w->sack[n & (CCSW_MAX_SACK - 1)].end = be32_at(&w->opts[at + 4]);
			w->nsack = n + 1;
		}
		break;
	}
	w->pos = pos + len;
	return 0;
}

/*
 * Parses Ethernet/IPv4|IPv6/TCP into `p`, with the key oriented server first.
 * Returns 1 for a TCP segment, 0 for anything that is not ours to look at (other protocols),
 * -1 for a malformed or truncated frame, or an IPv4 fragment.
 */
static __always_inline int parse(struct __sk_buff *skb, struct pkt *p, bool from_server)
{
	__u8 *src, *dst;
	__u8 th[TCP_HLEN];
	__u16 proto;
	__u32 l4_len, doff, ol;

	if (bpf_skb_load_bytes(skb, 12, &proto, 2) < 0)
		return -1;
	src = from_server ? p->key.server_addr : p->key.client_addr;
	dst = from_server ? p->key.client_addr : p->key.server_addr;
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr ip;
		__u32 ihl, tot;

		if (bpf_skb_load_bytes(skb, ETH_HLEN, &ip, sizeof(ip)) < 0)
			return -1;
		if (ip.version != 4 || ip.ihl < 5)
			return -1;
		if (ip.protocol != IPPROTO_TCP)
			return 0;
		if (ip.frag_off & bpf_htons(IP_MF_OFFSET))
			return -1;
		ihl = ip.ihl * 4;
		tot = bpf_ntohs(ip.tot_len);
		if (tot < ihl + TCP_HLEN || ETH_HLEN + tot > skb->len)
			return -1;
		p->key.family = CCSW_FAMILY_V4;
		__builtin_memcpy(src, &ip.saddr, 4);
		__builtin_memcpy(dst, &ip.daddr, 4);
		p->l4_off = ETH_HLEN + ihl;
		l4_len = tot - ihl;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr ip6;
		__u32 plen;

		if (bpf_skb_load_bytes(skb, ETH_HLEN, &ip6, sizeof(ip6)) < 0)
			return -1;
		if (ip6.version != 6)
			return -1;
		if (ip6.nexthdr != IPPROTO_TCP)
			return 0;
		plen = bpf_ntohs(ip6.payload_len);
		if (plen < TCP_HLEN || ETH_HLEN + sizeof(ip6) + plen > skb->len)
			return -1;
		p->key.family = CCSW_FAMILY_V6;
		__builtin_memcpy(src, &ip6.saddr, 16);
		__builtin_memcpy(dst, &ip6.daddr, 16);
		p->l4_off = ETH_HLEN + sizeof(ip6);
		l4_len = plen;
	} else {
		return 0;
	}

	if (bpf_skb_load_bytes(skb, p->l4_off, th, sizeof(th)) < 0)
		return -1;
	doff = (th[12] >> 4) * 4;
	if (doff < TCP_HLEN || doff > l4_len)
		return -1;
	if (from_server) {
		p->key.server_port = ((__u16)th[0] << 8) | th[1];
		p->key.client_port = ((__u16)th[2] << 8) | th[3];
	} else {
		p->key.client_port = ((__u16)th[0] << 8) | th[1];
		p->key.server_port = ((__u16)th[2] << 8) | th[3];
	}
	p->seq = be32_at(&th[4]);
	p->ack = be32_at(&th[8]);
	__builtin_memcpy(&p->word12, &th[12], 4);
	p->flags = th[13];
	p->window = ((__u16)th[14] << 8) | th[15];
	p->payload_len = l4_len - doff;

	ol = doff - TCP_HLEN;
	if (ol > TCP_OPT_MAX)
		return -1;
	p->o.len = ol;
	if (ol) {
		if (bpf_skb_load_bytes(skb, p->l4_off + TCP_HLEN, p->o.opts, ol) < 0)
			return -1;
		/* Past the handshake, Linux starts every segment's options with NOP, NOP and the
		 * timestamps, and most carry nothing else: read those directly, and walk only what
		 * follows (a walk step is a call: the walk took 6-9% of the port programs' time at
		 * 10k flows). */
		if (ol >= 12 && p->o.opts[0] == TCPOPT_NOP && p->o.opts[1] == TCPOPT_NOP && p->o.opts[2] == TCPOPT_TS &&
		    p->o.opts[3] == 10) {
			p->o.tsval = be32_at(&p->o.opts[4]);
			p->o.present |= CCSW_O_TS;
			p->o.pos = 12;
		}
		if (p->o.pos < ol)
			bpf_loop(TCP_OPT_MAX, opt_step, &p->o, 0);
		if (p->o.bad)
			return -1;
	}
	return 1;
}

/* The ring's wake-up state (see shim_channel.bpf.h). */
struct ccsw_wake_state wake = { .cons_pos = ~0ULL };

/* Routine records (segment descriptors, ACKs that only move forward) wait for the
 * shim's next pass, at most its --record-delay-us later; urgent ones (a flow
 * established or closed, a resent or unbuffered segment, the first ACK of a loss
 * episode (see on_ack), FIN or RST) and a ring holding CCSW_WAKE_BYTES are due a
 * wake-up (measured: 8 us each on these VMs, against about 1 us for the rest of an
 * egress run, at 1,000 flows), which ccsw_wake_flags forces only if the shim has read
 * the ring since the last one and that one is at least config.wake_gap_ns old
 * (--wake-gap-us): under loss at many flows, urgent ACKs come faster than the shim can
 * use separate wake-ups for. A record that forces nothing is read at the shim's next
 * pass, at most its record delay later, so no record ever waits longer than that. */
static __always_inline __u64 wake_flags(bool urgent)
{
	struct ccsw_ovs_config *cfg;

	if (!urgent && bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) < CCSW_WAKE_BYTES)
		return BPF_RB_NO_WAKEUP;
	cfg = get_config();
	return ccsw_wake_flags(&events, &wake, cfg ? cfg->wake_gap_ns : 0);
}

static __always_inline void emit_small(void *rec, __u32 size, bool urgent)
{
	if (bpf_ringbuf_output(&events, rec, size, wake_flags(urgent)) < 0)
		COUNT(ring_drops);
}

static __always_inline void head(struct ccsw_ev_head *h, __u8 kind, __u32 flow_id, __u64 now)
{
	h->kind = kind;
	h->flow_id = flow_id;
	h->ts_ns = now;
}

/* Frees the slot; userspace hears of it only if it had heard of the flow. */
static __always_inline void close_flow(struct ccsw_ovs_flow_slot *s, __u32 reason, __u64 now)
{
	struct ccsw_ovs_flow_entry *f = &s->f;

	if (f->state == CCSW_ST_ESTABLISHED) {
		struct ccsw_closed_event ev = {};

		head(&ev.h, CCSW_EV_CLOSED, f->flow_id, now);
		ev.reason = reason;
		emit_small(&ev, sizeof(ev), true);
		COUNT(closed);
	}
	flow_free(s);
}

static __always_inline __u8 capped_wscale(struct opt_walk *o)
{
	if (!(o->present & CCSW_O_WSCALE))
		return 0;
	if (o->wscale > WSCALE_MAX) {
		COUNT(wscale_capped);
		return WSCALE_MAX;
	}
	return o->wscale;
}

/* A copy failed: the data up to the highest end seen is not all in the slab. The first
 * failure of a run wakes the shim; later ones move the hole's end without waking it. Frames
 * too large for a slot will never fit: the flow is not copied again. */
static __always_inline void set_unbuffered(struct ccsw_ovs_flow_entry *f, __u32 reason, __u64 now)
{
	struct ccsw_unbuffered_event ev = {};
	bool first = !(f->flags & CCSW_F_UNBUFFERED);

	if (f->flags & CCSW_F_UNCOPYABLE)
		return;
	f->flags |= CCSW_F_UNBUFFERED;
	if (reason == CCSW_UNBUF_TOO_LARGE)
		f->flags |= CCSW_F_UNCOPYABLE;
	f->hole_end = f->snd_nxt;
	if (first)
		COUNT(unbuffered);
	head(&ev.h, CCSW_EV_UNBUFFERED, f->flow_id, now);
	ev.reason = reason;
	ev.hole_end = f->hole_end;
	emit_small(&ev, sizeof(ev), first);
}

/* Every byte below `ack` has been delivered: a hole at or below it no longer matters, and the
 * copies above it are complete (unless the frames never fit). Returns whether the flow is
 * still unbuffered. */
static __always_inline bool unbuffered_at(struct ccsw_ovs_flow_entry *f, __u32 ack)
{
	if (!(f->flags & CCSW_F_UNBUFFERED))
		return false;
	if ((f->flags & CCSW_F_UNCOPYABLE) || seq_after(f->hole_end, ack))
		return true;
	f->flags &= ~CCSW_F_UNBUFFERED;
	return false;
}

/* Takes a free slab slot for `owner`; returns its index, or -1 if none of the probed slots
 * is free (see the model above). */
static __always_inline __s64 slab_alloc(__u32 owner)
{
	struct ccsw_slot_owner *w;
	__u32 n = ccsw_slab_slots;
	__u32 start, idx;

	if (n == 0)
		return -1;
	start = __sync_fetch_and_add(&slab_hint, 1);
	for (__u32 i = 0; i < CCSW_SLAB_PROBES; i++) {
		if (i < CCSW_SLAB_LINEAR)
			idx = (start + i) % n;
		else
			idx = (start + i * 0x9E3779B1u) % n;
		w = bpf_map_lookup_elem(&slab_owner, &idx);
		if (!w)
			return -1;
		if (w->flow_id == 0 && __sync_val_compare_and_swap(&w->flow_id, 0, owner) == 0) {
			/* Past a busy run: the next searches start after this slot (a plain
			 * store; the hint is only a hint). */
			if (i)
				*(volatile __u32 *)&slab_hint = idx + 1;
			return idx;
		}
	}
	return -1;
}

static __always_inline void slab_free(__u32 idx)
{
	struct ccsw_slot_owner *w = bpf_map_lookup_elem(&slab_owner, &idx);

	if (w)
		*(volatile __u32 *)&w->flow_id = 0;
}

/* Whether the frame is one of the shim's copies, sent by ccsw_inject, which marks its XDP
 * metadata (the metadata travels with the frame into the skb the kernel builds from it). */
static __always_inline bool injected_copy(struct __sk_buff *skb)
{
	__u32 *mark = (void *)(long)skb->data_meta;

	if ((void *)(mark + 1) > (void *)(long)skb->data)
		return false;
	return *mark == CCSW_INJECT_MARK;
}

/* A retransmission, reported without its frame: the shim holds the frame already, or no
 * longer needs it. Urgent only beyond the reordering allowance (the server recovering on
 * its own); within it the record stands for a segment record, which is routine. */
static __always_inline void emit_resent(struct ccsw_ovs_flow_entry *f, struct pkt *p, __u32 len, bool urgent,
					__u64 now)
{
	struct ccsw_resent_event ev = {};

	/* Its ACK would time two sends (Karn). */
	f->probe_end = 0;
	head(&ev.h, CCSW_EV_RESENT, f->flow_id, now);
	ev.seq = p->seq;
	ev.len = len;
	if (p->o.present & CCSW_O_TS) {
		ev.tsval = p->o.tsval;
		ev.has_tsval = 1;
	}
	emit_small(&ev, sizeof(ev), urgent);
}

static __always_inline void copy_segment(struct __sk_buff *skb, struct ccsw_ovs_flow_entry *f,
					 struct pkt *p, __u32 len, __u64 now)
{
	struct ccsw_ovs_config *cfg = get_config();
	struct ccsw_segment_event *rec;
	struct ccsw_ovs_frame_slot *slot;
	__u32 limit = CCSW_FRAME_MAX;
	__u32 n = skb->len;
	__s64 got;
	__u32 idx;

	if (cfg && cfg->copy_limit && cfg->copy_limit < CCSW_FRAME_MAX)
		limit = cfg->copy_limit;
	if (n > limit || skb->gso_segs > 1) {
		set_unbuffered(f, CCSW_UNBUF_TOO_LARGE, now);
		return;
	}
	/* The record first: a slot is never taken that could not be handed over. */
	rec = bpf_ringbuf_reserve(&events, sizeof(*rec), 0);
	if (!rec) {
		COUNT(ring_drops);
		set_unbuffered(f, CCSW_UNBUF_RING_FULL, now);
		return;
	}
	got = slab_alloc(f->flow_id ? f->flow_id : 1);
	if (got < 0) {
		bpf_ringbuf_discard(rec, 0);
		COUNT(slab_full);
		set_unbuffered(f, CCSW_UNBUF_SLAB_FULL, now);
		return;
	}
	idx = (__u32)got;
	slot = bpf_map_lookup_elem(&slab, &idx);
	n &= 0x7ff;
	if (!slot || n == 0 || n > CCSW_FRAME_MAX || bpf_skb_load_bytes(skb, 0, slot->frame, n) < 0) {
		slab_free(idx);
		bpf_ringbuf_discard(rec, 0);
		set_unbuffered(f, CCSW_UNBUF_TOO_LARGE, now);
		return;
	}
	head(&rec->h, CCSW_EV_SEGMENT, f->flow_id, now);
	__builtin_memset(rec->h._pad0, 0, sizeof(rec->h._pad0));
	rec->seq = p->seq;
	rec->len = len;
	rec->frame_len = n;
	rec->fin = !!(p->flags & TH_FIN);
	rec->has_tsval = !!(p->o.present & CCSW_O_TS);
	rec->slot = idx;
	rec->tsval = p->o.tsval;
	rec->_pad0 = 0;
	bpf_ringbuf_submit(rec, wake_flags(false));
	COUNT(segments);
}

/* What a server frame [seq, end) is to the data that crossed the port, and the range after
 * it. `range` holds snd_nxt (low word) and seen_from (high word): every byte from seen_from
 * to snd_nxt crossed before (copied, or in the hole of a failed copy, which the shim does
 * not keep either), so a frame within it is the server's retransmission, which the shim
 * would only discard. seen_from moves down over a late original that joins the range, and up
 * to a frame that leaves a gap below it, and stays within CCSW_REORDER_BYTES of snd_nxt so
 * that sequence numbers never wrap past it. */
#define SEEN_BELOW 0 /* ends CCSW_REORDER_BYTES or more below snd_nxt: a retransmission */
#define SEEN_AGAIN 1 /* within the range: a retransmission */
#define SEEN_NEW 2   /* ends beyond snd_nxt */
#define SEEN_LATE 3  /* below snd_nxt, not all crossed: a late original, perhaps */
#define SEEN_TRIES 4 /* compare-and-swap attempts; past them the last decision stands, unwritten */

static __always_inline int seen_step(__u64 range, __u32 seq, __u32 end, __u64 *next)
{
	__u32 nxt = (__u32)range, from = (__u32)(range >> 32);
	int kind;

	*next = range;
	if (!seq_after(end, nxt - CCSW_REORDER_BYTES))
		return SEEN_BELOW;
	if (seq_after(end, nxt)) {
		if (seq_after(seq, nxt))
			from = seq;
		nxt = end;
		kind = SEEN_NEW;
	} else if (!seq_after(from, seq)) {
		return SEEN_AGAIN;
	} else {
		if (!seq_after(from, end))
			from = seq;
		kind = SEEN_LATE;
	}
	if (seq_after(nxt - CCSW_REORDER_BYTES, from))
		from = nxt - CCSW_REORDER_BYTES;
	*next = (__u64)from << 32 | nxt;
	return kind;
}

SEC("tcx/ingress")
int ccsw_ingress(struct __sk_buff *skb)
{
	struct ccsw_ovs_flow_slot *s;
	struct ccsw_ovs_flow_entry *f;
	struct pkt p;
	__u32 len, end, idx;
	__u64 now, seen, next = 0, *range;
	int r, kind = SEEN_BELOW;

	COUNT(packets);
	__builtin_memset(&p, 0, sizeof(p));
	r = parse(skb, &p, true);
	if (r < 0)
		COUNT(malformed);
	if (r <= 0)
		return TCX_NEXT;
	s = flow_find(&p.key, &idx);
	if (!s)
		return TCX_NEXT;
	f = &s->f;
	now = bpf_ktime_get_ns();
	if (p.flags & TH_RST) {
		close_flow(s, CCSW_CLOSE_RST, now);
		return TCX_NEXT;
	}
	f->last_seen_ns = now;

	if ((p.flags & (TH_SYN | TH_ACK)) == (TH_SYN | TH_ACK)) {
		if (f->state == CCSW_ST_SYN_SEEN || f->state == CCSW_ST_SYNACK_SEEN) {
			f->server_isn = p.seq;
			f->snd_nxt = p.seq + 1;
			f->seen_from = p.seq + 1;
			f->server_mss = p.o.mss;
			f->server_wscale = capped_wscale(&p.o);
			f->opts = (f->opts & 0x0f) | (p.o.present << CCSW_O_SERVER_SHIFT);
			f->state = CCSW_ST_SYNACK_SEEN;
		}
		return TCX_NEXT;
	}
	if (f->state != CCSW_ST_ESTABLISHED)
		return TCX_NEXT;

	len = p.payload_len + ((p.flags & TH_FIN) ? 1 : 0);
	if (len == 0)
		return TCX_NEXT;
	end = p.seq + len;
	if (p.flags & TH_FIN) {
		f->flags |= CCSW_F_SERVER_FIN;
		f->server_fin_end = end;
	}
	/* The shim's own copy coming back: the shim holds its frame. It goes up without one, so
	 * that the shim learns when the copy crossed the port. */
	if (injected_copy(skb)) {
		emit_resent(f, &p, len, false, now);
		COUNT(copies_seen);
		return TCX_NEXT;
	}
	/* Frames the server sends from two CPUs can cross the port out of order, so data just
	 * below the highest end may be new to userspace too: copy it as well, and let userspace
	 * tell late originals from retransmissions. Except data that crossed before (see
	 * seen_step). snd_nxt and seen_from change together, by compare-and-swap of the word
	 * that holds both: frames of one flow handled on two CPUs at once could otherwise leave
	 * seen_from too low, and a late original taken for a retransmission is a hole the shim
	 * cannot fill (the flow fell back, reason `gap`, about once in 80 runs of 10k flows). */
	range = (__u64 *)&f->snd_nxt;
	seen = *(volatile __u64 *)range;
	for (int i = 0; i < SEEN_TRIES; i++) {
		__u64 was;

		kind = seen_step(seen, p.seq, end, &next);
		if (next == seen)
			break;
		was = __sync_val_compare_and_swap(range, seen, next);
		if (was == seen)
			break;
		seen = was; /* another CPU moved the range: decide again */
	}
	if (kind == SEEN_BELOW || kind == SEEN_AGAIN) {
		/* The server's retransmission; below the allowance, one the shim must hear of now. */
		emit_resent(f, &p, len, kind == SEEN_BELOW, now);
		COUNT(resent);
		return TCX_NEXT;
	}
	/* Time a new segment for the fold's RTT and rate, unless one is timed. */
	if (kind == SEEN_NEW && !f->probe_end) {
		f->probe_end = end ? end : 1;
		f->probe_ns = now;
		f->probe_delivered = f->delivered;
	}
	if (!(f->flags & CCSW_F_UNCOPYABLE))
		copy_segment(skb, f, &p, len, now);
	return TCX_NEXT;
}

/* Client SYN: the only place entries are created. */
static __always_inline void on_syn(struct pkt *p, __u64 now)
{
	__u32 idx;
	struct ccsw_ovs_flow_slot *s = flow_find(&p->key, &idx);
	struct ccsw_ovs_flow_entry nf = {};

	COUNT(syns);
	if (s && s->f.state == CCSW_ST_ESTABLISHED) {
		if (s->f.client_isn == p->seq)
			return; /* a late duplicate of this connection's SYN */
		/* The 4-tuple is being reused: the old connection is gone. */
		close_flow(s, CCSW_CLOSE_RST, now);
		s = NULL;
	}
	nf.last_seen_ns = now;
	nf.client_isn = p->seq;
	nf.client_mss = p->o.mss;
	nf.client_wscale = capped_wscale(&p->o);
	nf.opts = p->o.present << CCSW_O_CLIENT_SHIFT;
	nf.state = CCSW_ST_SYN_SEEN;
	if (s) { /* the SYN of a handshake not completed, again: it starts over */
		s->f = nf;
		return;
	}
	/* Two CPUs that claim for the same SYN at once make two entries; searches find the
	 * first, and the other is freed as half-open (the shim's expire_half_open). SYNs of one
	 * connection come a retransmission timeout apart, so this needs a duplicated frame. */
	s = flow_claim(&p->key);
	if (!s) {
		COUNT(table_full);
		return;
	}
	s->f = nf;
	__sync_val_compare_and_swap(&s->used, CCSW_SLOT_CLAIMED, CCSW_SLOT_LIVE);
}

/* The client acknowledged the SYN-ACK of the flow in flow slot `idx`: it gets its id, which
 * names its slot (flow_id % ccsw_flow_slots == idx: see `directives`) and the slot's
 * generation, so that the next flow in the slot gets another. */
static __always_inline void establish(struct ccsw_ovs_flow_slot *s, __u32 idx, struct pkt *p, __u64 now)
{
	struct ccsw_ovs_flow_entry *f = &s->f;
	__u32 gen = s->generation + 1;
	struct ccsw_established_event ev = {};
	__u8 copts = (f->opts >> CCSW_O_CLIENT_SHIFT) & 0xf;
	__u8 sopts = (f->opts >> CCSW_O_SERVER_SHIFT) & 0xf;
	__u16 dflt = p->key.family == CCSW_FAMILY_V4 ? DEFAULT_MSS_V4 : DEFAULT_MSS_V6;
	__u16 cmss = (copts & CCSW_O_MSS) ? f->client_mss : dflt;
	__u16 smss = (sopts & CCSW_O_MSS) ? f->server_mss : dflt;
	bool ws = (copts & CCSW_O_WSCALE) && (sopts & CCSW_O_WSCALE);

	if (gen > ccsw_flow_generations)
		gen = 1;
	s->generation = gen;
	f->flow_id = gen * ccsw_flow_slots + idx; /* never 0: gen >= 1 */
	f->state = CCSW_ST_ESTABLISHED;
	/* Without both options, neither side scales (RFC 7323 §2.2). */
	if (!ws) {
		f->client_wscale = 0;
		f->server_wscale = 0;
	}
	head(&ev.h, CCSW_EV_ESTABLISHED, f->flow_id, now);
	ev.key = p->key;
	ev.mss = cmss < smss ? cmss : smss;
	ev.client_wscale = f->client_wscale;
	ev.server_wscale = f->server_wscale;
	ev.sack = (copts & sopts & CCSW_O_SACK) ? 1 : 0;
	ev.timestamps = (copts & sopts & CCSW_O_TS) ? 1 : 0;
	ev.server_isn = f->server_isn;
	ev.client_isn = f->client_isn;
	emit_small(&ev, sizeof(ev), true);
	COUNT(established);
}

static __always_inline void remember(struct ccsw_ovs_flow_entry *f, __u32 ack, __u16 fwd, __u16 orig)
{
	if ((f->flags & CCSW_F_HAVE_LAST) && seq_after(f->last_ack, ack))
		return; /* a reordered, older ACK: keep the newest as the reference */
	f->last_ack = ack;
	f->last_win_fwd = fwd;
	f->last_win_orig = orig;
	f->flags |= CCSW_F_HAVE_LAST;
}

/* Rewrites window, ECE and SACK options in place; returns whether anything changed. */
static __always_inline bool rewrite(struct __sk_buff *skb, struct pkt *p, __u16 win)
{
	__u32 csum_off = p->l4_off + 16;
	__u8 w[4];
	__u32 new_word;
	bool changed = false;

	__builtin_memcpy(w, &p->word12, 4);
	if (w[1] & TH_ECE)
		COUNT(ece_cleared);
	w[1] &= ~TH_ECE;
	w[2] = win >> 8;
	w[3] = win & 0xff;
	__builtin_memcpy(&new_word, w, 4);
	if (new_word != p->word12) {
		bpf_skb_store_bytes(skb, p->l4_off + 12, &new_word, 4, 0);
		bpf_l4_csum_replace(skb, csum_off, p->word12, new_word, 4);
		changed = true;
	}
	if (p->o.sack_mask) {
		__u8 nops[TCP_OPT_MAX];
		__u32 ol = p->o.len;
		__s64 diff;

		__builtin_memcpy(nops, p->o.opts, TCP_OPT_MAX);
#pragma unroll
		for (int j = 0; j < TCP_OPT_MAX; j++)
			if (p->o.sack_mask & (1ULL << j))
				nops[j] = TCPOPT_NOP;
		if (ol < 4 || ol > TCP_OPT_MAX)
			return changed;
		diff = bpf_csum_diff((__be32 *)p->o.opts, ol, (__be32 *)nops, ol, 0);
		if (diff < 0)
			return changed;
		bpf_skb_store_bytes(skb, p->l4_off + TCP_HLEN, nops, ol, 0);
		bpf_l4_csum_replace(skb, csum_off, 0, diff, 0);
		COUNT(sack_stripped);
		changed = true;
	}
	return changed;
}

/* The standard program's per-ACK fold, for a flow whose directive asks for it (the agent
 * runs the standard program and the shim has no loss to recover: CCSW_FOLD_HOLD clear).
 *
 * What is folded here and what goes up: the shim's sender model needs an ACK itself only
 * when it carries a loss signal or ends a flow, or while the shim recovers a loss. An ACK
 * that only moves forward (or updates the window) is folded: its measurements (bytes
 * acknowledged, bytes in flight, the latest RTT sample, the incoming rate) go into the
 * registers, and nothing goes up unless the program reports. A report goes up as a FOLDED
 * record with the last acknowledgement number, from which the shim releases the buffer as
 * from one stretched ACK. Any other ACK goes up as before, preceded by the registers
 * folded so far (a FOLDED record that does not report), which the shim folds that ACK on.
 *
 * Measurements: one segment at a time is timed (probe_end, from its crossing of the port
 * to the ACK that covers it; a retransmission cancels it), as Linux times one segment per
 * window without timestamps. Its sample is also the rate sample: bytes acknowledged over
 * that interval. Bytes in flight are snd_nxt - ack. */
/* The ACK being folded and its reporting: egress already uses nearly all of the stack. */
struct fold_scratch {
	struct ccsw_std_ack ack;
	struct ccsw_std_reporting reporting;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fold_scratch);
} fold_scratch SEC(".maps");

static __always_inline bool fold_routine_ack(struct ccsw_ovs_flow_entry *f, const struct ccsw_ovs_directive_slot *ctl,
					__u32 ack, __u32 prev_ack, __u64 rate)
{
	__u64 now = f->last_seen_ns; /* this ACK's time (ccsw_egress) */
	__u32 zero = 0;
	struct fold_scratch *x = bpf_map_lookup_elem(&fold_scratch, &zero);
	struct ccsw_std_ack *a;
	__u32 acked = seq_after(ack, prev_ack) ? ack - prev_ack : 0;
	__u64 zero_us;
	bool reported;

	if (!x)
		return false;
	a = &x->ack;
	if (ccsw_std_restart(&f->fold, ctl->fold_start_us)) {
		f->acks_folded = 0; /* the registers restarted with the program */
		f->flags &= ~CCSW_F_FOLD_REPORTED;
	}
	/* Micros restarts at the latest report under this start, the shim's (on an ACK it
	 * folded) or the port's, and at the start until there is one. Reports follow each
	 * other in time, but the start is no report: the session stamps it when the agent's
	 * restart arrives, which can be after the time of ACKs still folded under it, so it is
	 * not compared with them. (A directive rewritten while this reads it may pair a new
	 * start with the last report under the old one: that moves one report earlier.) */
	zero_us = ctl->fold_micros_zero_us;
	if (zero_us && (!(f->flags & CCSW_F_FOLD_REPORTED) || zero_us > f->fold.micros_zero_us))
		f->fold.micros_zero_us = zero_us;
	a->rate_incoming = rate;
	a->pacing_rate = ctl->fold_rate;
	a->now_us = now / 1000;
	a->bytes_acked = acked;
	a->lost_packets = 0;
	a->ecn_packets = 0;
	a->was_timeout = 0;
	a->rtt_us = f->rtt_us;
	/* In flight after the ACK: the program adds the ACK's bytes for "before". */
	a->bytes_in_flight = seq_after(f->snd_nxt, ack) ? f->snd_nxt - ack : 0;
	a->cwnd_bytes = ctl->fold_cwnd_bytes;
	a->agg_rate = 0; /* the shim folds no flow that measures ACK aggregation */
	x->reporting.idle_report_us = ctl->fold_idle_us;
	x->reporting.window_use_pct = ctl->fold_window_pct;
	x->reporting.per_ack = (ctl->fold & CCSW_FOLD_MODE) == CCSW_FOLD_PER_ACK;
	f->acks_folded++;
	COUNT(acks_folded);
	reported = ccsw_std_fold_ack(&f->fold, a, ctl->fold_start_us, &x->reporting);
	if (reported)
		f->flags |= CCSW_F_FOLD_REPORTED;
	return reported;
}

/* The registers folded for the flow go up (its report, or handed over before an ACK the
 * shim folds itself) and start over. */
static __always_inline void emit_folded(struct ccsw_ovs_flow_entry *f, __u32 ack, __u32 window_bytes,
					bool reported, __u64 now)
{
	struct ccsw_folded_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (e) {
		head(&e->h, CCSW_EV_FOLDED, f->flow_id, now);
		__builtin_memset(e->h._pad0, 0, sizeof(e->h._pad0));
		e->start_us = f->fold.start_us;
		e->ack = ack;
		e->window_bytes = window_bytes;
		e->acks = f->acks_folded;
		e->reported = reported;
		__builtin_memset(e->_pad0, 0, sizeof(e->_pad0));
		e->regs = f->fold.regs;
		bpf_ringbuf_submit(e, wake_flags(false));
		if (reported)
			COUNT(folded_reports);
	} else {
		COUNT(ring_drops);
	}
	ccsw_std_reset(&f->fold.regs);
	f->acks_folded = 0;
}

/* The ACK record (built in a frame of its own: the egress program's stack is nearly full). */
static __always_inline void emit_ack(struct ccsw_ovs_flow_entry *f, struct pkt *p, __u8 verdict, bool urgent, __u64 now)
{
	struct ccsw_ovs_ack_event ev = {};

	head(&ev.h, CCSW_EV_ACK, f->flow_id, now);
	ev.ack = p->ack;
	ev.window_bytes = (__u32)p->window << (f->client_wscale & 0xf);
	ev.payload_len = p->payload_len;
	ev.flags = ((p->flags & TH_ECE) ? CCSW_ACK_F_ECE : 0) | ((p->flags & TH_FIN) ? CCSW_ACK_F_FIN : 0);
	ev.nsack = p->o.nsack;
	__builtin_memcpy(ev.sack, p->o.sack, sizeof(ev.sack));
	ev.verdict = verdict;
	emit_small(&ev, sizeof(ev), urgent);
}

static __always_inline int on_ack(struct __sk_buff *skb, struct ccsw_ovs_flow_entry *f, __u32 idx, struct pkt *p,
				  __u64 now)
{
	struct ccsw_ovs_config *cfg = get_config();
	struct ccsw_ovs_directive_slot *ctl;
	__u8 verdict = CCSW_VERDICT_PASSED;
	__u8 ws = f->client_wscale & 0xf;
	__u16 orig = p->window;
	__u16 win;
	__u64 allowed, units;
	bool controlled, dup, urgent, loss, routine;
	__u64 rate = 0;
	__u32 prev_ack = f->last_ack;
	bool have_prev = f->flags & CCSW_F_HAVE_LAST;
	int ret = TCX_NEXT;

	COUNT(acks);
	/* The start of a loss episode (SACK blocks, or a duplicate ACK, after one that was
	 * neither) and the end of a flow (FIN/RST) reach the shim at once. The rest of an
	 * episode's ACKs wait for its next pass, at most its record delay later: one lost
	 * segment brings an ACK for every segment after it, and a wake-up for each would cost
	 * more than all the rest of the program (see wake_flags). A window update (the same
	 * acknowledgement with another window, what a receiver-limited flow sends each time its
	 * application reads) is routine: it is no sign of loss. */
	loss = p->o.nsack || ((f->flags & CCSW_F_HAVE_LAST) && p->ack == f->last_ack &&
			      p->payload_len == 0 && orig == f->last_win_orig);
	urgent = (p->flags & (TH_FIN | TH_RST | TH_SYN)) || (loss && !(f->flags & CCSW_F_LOSS_SEEN));
	if (loss != !!(f->flags & CCSW_F_LOSS_SEEN)) /* written on a change only */
		f->flags ^= CCSW_F_LOSS_SEEN;
	/* Delivery and the timed segment, for the fold (see fold_routine_ack). */
	if (have_prev && seq_after(p->ack, prev_ack) && !seq_after(p->ack, f->snd_nxt))
		f->delivered += p->ack - prev_ack;
	if (f->probe_end && !seq_after(f->probe_end, p->ack) && !seq_after(p->ack, f->snd_nxt)) {
		__u64 dt = now - f->probe_ns;

		if (dt >= 1000 && dt < (1ULL << 42)) {
			f->rtt_us = (__u32)(dt / 1000);
			rate = (f->delivered - f->probe_delivered) * 1000000000ULL / dt;
		}
		f->probe_end = 0;
	}

	ctl = directive_of(idx, f->flow_id);
	controlled = !unbuffered_at(f, p->ack) && ctl && ctl->active && cfg &&
		     now < cfg->valid_until_ns;
	if (!controlled) {
		remember(f, p->ack, orig, orig);
		goto out;
	}
	if (seq_after(p->ack, f->snd_nxt) ||
	    ((f->flags & CCSW_F_HAVE_LAST) && seq_after(f->last_ack, p->ack) &&
	     f->last_ack - p->ack > STALE_ACK_LIMIT)) {
		COUNT(out_of_window);
		goto out;
	}

	allowed = (__u64)ctl->cwnd_bytes + (p->ack == ctl->sacked_una ? ctl->sacked_bytes : 0);
	units = (allowed + (1ULL << ws) - 1) >> ws;
	if (units > 0xffff)
		units = 0xffff;
	win = orig < units ? orig : (__u16)units;

	dup = (f->flags & CCSW_F_HAVE_LAST) && p->ack == f->last_ack && p->payload_len == 0 &&
	      !(p->flags & (TH_SYN | TH_FIN | TH_RST)) && orig == f->last_win_orig;
	if (dup && win <= f->last_win_fwd) {
		/* The server would count it as a duplicate ACK (same ack, same window). */
		verdict = CCSW_VERDICT_HIDDEN;
		COUNT(dupacks_hidden);
		ret = TCX_DROP;
		goto out;
	}
	/* A duplicate whose window grew (SACKed bytes widen the clamp) reaches the server as a
	 * window update, which it does not count as a duplicate. */
	if (dup)
		COUNT(dupacks_opened);
	if (rewrite(skb, p, win)) {
		verdict = CCSW_VERDICT_REWRITTEN;
		COUNT(acks_rewritten);
	}
	remember(f, p->ack, win, orig);
	/* Folded: an ACK that moves forward or only updates the window, while the shim
	 * recovers nothing (see fold_routine_ack). */
	routine = (ctl->fold & CCSW_FOLD_MODE) && !(ctl->fold & CCSW_FOLD_HOLD) && !loss && !urgent &&
		  have_prev && !seq_after(prev_ack, p->ack) && !(p->flags & TH_ECE);
	if (routine) {
		if (fold_routine_ack(f, ctl, p->ack, prev_ack, rate))
			emit_folded(f, p->ack, (__u32)orig << ws, true, now);
		else if (f->fold.regs.acked * 2 >= ctl->cwnd_bytes || p->ack == f->snd_nxt)
			/* Half a window acknowledged since the shim last heard, or all it sent:
			 * the shim frees those segments' slots from this record and stops its
			 * retransmission timer (a flow that reports only every idle interval would
			 * otherwise hold its acknowledged frames, and time out on data delivered). */
			emit_folded(f, p->ack, (__u32)orig << ws, false, now);
		return ret;
	}
out:
	if (f->acks_folded)
		emit_folded(f, f->last_ack, (__u32)f->last_win_orig << ws, false, now);
	emit_ack(f, p, verdict, urgent, now);
	return ret;
}

SEC("tcx/egress")
int ccsw_egress(struct __sk_buff *skb)
{
	struct ccsw_ovs_flow_slot *s;
	struct ccsw_ovs_flow_entry *f;
	struct pkt p;
	__u64 now;
	__u32 idx;
	int r, ret;

	COUNT(packets);
	__builtin_memset(&p, 0, sizeof(p));
	r = parse(skb, &p, false);
	if (r < 0)
		COUNT(malformed);
	if (r <= 0)
		return TCX_NEXT;
	now = bpf_ktime_get_ns();
	if ((p.flags & (TH_SYN | TH_ACK | TH_RST)) == TH_SYN) {
		on_syn(&p, now);
		return TCX_NEXT;
	}
	s = flow_find(&p.key, &idx);
	if (!s)
		return TCX_NEXT;
	f = &s->f;
	if (p.flags & TH_RST) {
		close_flow(s, CCSW_CLOSE_RST, now);
		return TCX_NEXT;
	}
	f->last_seen_ns = now;
	if (!(p.flags & TH_ACK))
		return TCX_NEXT;
	if (f->state == CCSW_ST_SYNACK_SEEN && !(p.flags & TH_SYN) && p.ack == f->server_isn + 1)
		establish(s, idx, &p, now);
	if (f->state != CCSW_ST_ESTABLISHED)
		return TCX_NEXT;
	if (p.flags & TH_FIN)
		f->flags |= CCSW_F_CLIENT_FIN;

	ret = on_ack(skb, f, idx, &p, now);

	if ((f->flags & (CCSW_F_CLIENT_FIN | CCSW_F_SERVER_FIN)) ==
		    (CCSW_F_CLIENT_FIN | CCSW_F_SERVER_FIN) &&
	    !seq_after(f->server_fin_end, p.ack))
		close_flow(s, CCSW_CLOSE_FIN, now);
	return ret;
}

/* The fold of on_ack on one ACK given in the context, for the test that compares it with
 * the shim's interpreter (BPF_PROG_TEST_RUN). */
SEC("syscall")
int ccsw_fold_test(struct ccsw_ovs_fold_test *t)
{
	t->reported = ccsw_std_fold_ack(&t->state, &t->ack, t->start_us, &t->reporting);
	t->report = t->state.regs;
	if (t->reported)
		ccsw_std_reset(&t->state.regs);
	return 0;
}

/* Frames staged by the shim for ccsw_inject: entries 0..config.inject_count. */
struct {
	CCSW_SHIM_ARRAY(struct ccsw_inject_frame, CCSW_INJECT_BATCH);
} inject_frames SEC(".maps");

/* Re-injection: run with BPF_PROG_TEST_RUN in live-frames mode, a frame that passes is
 * received by the kernel as if it had arrived on the given device (see loader.rs). One run
 * sends a whole batch: it repeats the program inject_count times, and each repetition turns
 * its page into the next staged frame (config.inject_next, which the shim zeroes before the
 * run; the repetitions of one run follow each other on one CPU). A run costs the kernel a
 * page pool and a memory model registration (tens of us on these VMs), so one per
 * retransmission was most of the shim's time under loss.
 *
 * The loader also attaches this program to the loopback device of its namespace (generic
 * XDP), where it passes every frame untouched (they did not arrive "on" the port): a
 * test run adds its program to the kernel's XDP dispatcher and removes it afterwards, and
 * each change waits for an RCU grace period (synchronize_rcu, measured: the shim spent most
 * of its wall time there), unless the program is already in it, attached to a device. */
SEC("xdp")
int ccsw_inject(struct xdp_md *ctx)
{
	struct ccsw_ovs_config *cfg = get_config();
	struct ccsw_inject_frame *fr;
	__u32 i, len;
	int have;

	if (!cfg || ctx->ingress_ifindex != cfg->inject_ifindex)
		return XDP_PASS;
	i = cfg->inject_next;
	if (i >= cfg->inject_count)
		return XDP_DROP;
	cfg->inject_next = i + 1;
	fr = bpf_map_lookup_elem(&inject_frames, &i);
	if (!fr)
		return XDP_DROP;
	len = fr->len;
	if (len < ETH_HLEN || len > CCSW_FRAME_MAX)
		return XDP_DROP;
	have = (int)(ctx->data_end - ctx->data);
	if (have != (int)len && bpf_xdp_adjust_tail(ctx, (int)len - have) < 0)
		return XDP_DROP;
	if (bpf_xdp_store_bytes(ctx, 0, fr->frame, len) < 0)
		return XDP_DROP;
	/* The mark the ingress program knows the shim's copies by (a copy without it is only
	 * copied into the slab again, and discarded by the shim). */
	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(__u32)) == 0) {
		__u32 *mark = (void *)(long)ctx->data_meta;

		if ((void *)(mark + 1) <= (void *)(long)ctx->data)
			*mark = CCSW_INJECT_MARK;
	}
	return XDP_PASS;
}
