// SPDX-License-Identifier: GPL-2.0-only
/*
 * ccswitch-probe: per-packet timestamps at both ends of an emulated path.
 *
 * Model
 * -----
 * A server sends a flow's data through its veth; the segments cross the emulated path
 * (mahimahi's delay, loss, link and queue) and arrive in the client's innermost mahimahi
 * namespace. Three programs measure what happened to each data segment on the way:
 *
 *  - probe_egress (TCX egress of each server veth): every IPv4/TCP segment with payload from a
 *    configured (server address, server port) is stamped: for each segment end (the sequence
 *    number just past a segment's payload) the time it left goes into `probe_segments`, an LRU
 *    hash. With TSO/GSO one skb is a super-packet of gso_segs segments of gso_size payload
 *    bytes that the device cuts up later: each of its (at most PROBE_MAX_GSO_SEGS) segment ends
 *    is stamped, the last one at the payload's end. A retransmission overwrites the stamp of its
 *    segment end, so the delay measured is the delivered copy's.
 *  - probe_ingress (TCX ingress of the client namespace's interfaces): each data segment that
 *    arrives looks up (and deletes) the stamp of its segment end, and becomes one ring record:
 *    arrival time, one-way delay, flow, payload bytes, and whether a stamp matched. Records are
 *    submitted without a wake-up (BPF_RB_NO_WAKEUP): on this kind of VM a wake-up costs
 *    9-20 us, so user space polls the ring on a timer instead.
 *  - probe_set_state (tp_btf sock/inet_sock_set_state): when a server socket of a measured
 *    endpoint changes state after it was established, its own counters (retransmissions, RTT,
 *    delivered, ...) are copied into `probe_tcp_infos`; the latest snapshot wins. These are the
 *    kernel's TCP_INFO figures, so native congestion controls have them too.
 *
 * Flows are named by (server address, server port, client port), which mahimahi's NAT keeps
 * (it rewrites only the client's address), and numbered 1, 2, 3, ... in order of first sight:
 * that number is the `flow` of the records and of the JSON. Per-flow counters
 * (`probe_flows`) count segments and payload bytes at both ends, so their difference is what
 * the path dropped.
 *
 * Headers are read with bpf_skb_load_bytes_relative from the network header, which works on
 * Ethernet devices (veth) and on mahimahi's TUN devices (no link-layer header) alike. Both
 * packet programs only read: they return TCX_NEXT (TC_ACT_UNSPEC), which passes the packet
 * unchanged on to whatever program or filter comes next, rather than TC_ACT_OK, which would
 * end the chain and skip them.
 *
 * Limits: IPv4 only; a BIG TCP super-packet (IP total length 0, beyond 64 KiB) is ignored;
 * a stamp evicted from the full LRU map before its segment arrives counts as unmatched.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_tracing.h>
#include "probe.h"

char _license[] SEC("license") = "GPL";

#define ETH_P_IP 0x0800
#define IP_MF 0x2000
#define IP_OFFSET 0x1fff

/* Sizes are set by the loader before loading (ProbeOptions). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct probe_endpoint);
	__type(value, __u8);
} probe_endpoints SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1 << 17);
	__type(key, struct probe_segment_key);
	__type(value, __u64);
} probe_segments SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 14);
	__type(key, struct probe_flow_key);
	__type(value, struct probe_flow);
} probe_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 14);
	__type(key, struct probe_flow_key);
	__type(value, struct probe_tcp_info);
} probe_tcp_infos SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24);
} probe_records SEC(".maps");

struct probe_counters probe_counters;
/* The last flow number handed out. */
__u32 probe_last_flow;

/* A data segment (or GSO super-packet) of a measured endpoint. */
struct data_segment {
	struct probe_flow_key flow;
	__u32 seq;     /* first payload byte, host order */
	__u32 payload; /* bytes */
};

/* 0 and `seg` filled if the skb is IPv4/TCP from a measured endpoint with payload; else -1. */
static __always_inline int parse_data_segment(struct __sk_buff *skb, struct data_segment *seg)
{
	struct iphdr ip;
	struct tcphdr th;

	if (skb->protocol != bpf_htons(ETH_P_IP))
		return -1;
	if (bpf_skb_load_bytes_relative(skb, 0, &ip, sizeof(ip), BPF_HDR_START_NET) < 0)
		return -1;
	if (ip.version != 4 || ip.ihl < 5 || ip.protocol != IPPROTO_TCP)
		return -1;
	if (ip.frag_off & bpf_htons(IP_MF | IP_OFFSET))
		return -1;
	__u32 ip_hlen = ip.ihl * 4;
	if (bpf_skb_load_bytes_relative(skb, ip_hlen, &th, sizeof(th), BPF_HDR_START_NET) < 0)
		return -1;
	struct probe_endpoint ep = { .ip = ip.saddr, .port = th.source };
	if (!bpf_map_lookup_elem(&probe_endpoints, &ep))
		return -1;
	__u32 total = bpf_ntohs(ip.tot_len);
	__u32 headers = ip_hlen + th.doff * 4;
	if (total <= headers)
		return -1; /* pure ACK, SYN, FIN without data, or BIG TCP */
	seg->flow.server_ip = ip.saddr;
	seg->flow.server_port = th.source;
	seg->flow.client_port = th.dest;
	seg->seq = bpf_ntohl(th.seq);
	seg->payload = total - headers;
	return 0;
}

/* The flow's counters, created (with the next flow number) on first sight; NULL if the map is
 * full. */
static __always_inline struct probe_flow *flow_entry(const struct probe_flow_key *key)
{
	struct probe_flow *f = bpf_map_lookup_elem(&probe_flows, key);
	if (f)
		return f;
	struct probe_flow fresh = {};
	fresh.flow = __sync_fetch_and_add(&probe_last_flow, 1) + 1;
	/* Another CPU may insert the same flow first: then its entry (and number) stands and this
	 * number is skipped. */
	bpf_map_update_elem(&probe_flows, key, &fresh, BPF_NOEXIST);
	f = bpf_map_lookup_elem(&probe_flows, key);
	if (!f)
		__sync_fetch_and_add(&probe_counters.flows_lost, 1);
	return f;
}

/* Number of segments in the skb (1 unless it is a GSO packet) and their payload size. */
static __always_inline __u32 segment_count(struct __sk_buff *skb, __u32 payload, __u32 *seg_size)
{
	__u32 segs = skb->gso_segs, size = skb->gso_size;
	if (segs <= 1 || size == 0 || size >= payload) {
		*seg_size = payload;
		return 1;
	}
	*seg_size = size;
	return (payload + size - 1) / size;
}

/* The walk over the segments of one skb, with bpf_loop (the verifier checks the body once,
 * not once per segment). */
struct segment_walk {
	struct probe_segment_key key;
	struct probe_record rec; /* ingress: the record of the current segment */
	__u64 now;
	__u32 seq;
	__u32 payload;
	__u32 seg_size;
	__u32 segs;
	__u32 offset; /* end of the previous segment, relative to seq */
	__u32 unmatched;
};

/* Advances `w` to segment k's end; returns that segment's payload bytes. */
static __always_inline __u32 next_segment_end(struct segment_walk *w, __u64 k)
{
	__u32 start = w->offset;
	__u32 end = start + w->seg_size;
	if (end > w->payload || k + 1 == w->segs)
		end = w->payload;
	w->offset = end;
	w->key.seq_end = w->seq + end;
	return end - start;
}

static long stamp_segment(__u64 k, void *ctx)
{
	struct segment_walk *w = ctx;
	next_segment_end(w, k);
	if (bpf_map_update_elem(&probe_segments, &w->key, &w->now, BPF_ANY) < 0)
		__sync_fetch_and_add(&probe_counters.stamps_lost, 1);
	return 0;
}

static long match_segment(__u64 k, void *ctx)
{
	struct segment_walk *w = ctx;
	w->rec.bytes = next_segment_end(w, k);
	w->rec.owd_us = 0;
	w->rec.flags = 0;
	__u64 *sent = bpf_map_lookup_elem(&probe_segments, &w->key);
	if (sent) {
		__u64 t = *sent;
		w->rec.owd_us = w->now > t ? (w->now - t) / 1000 : 0;
		w->rec.flags = PROBE_MATCHED;
		bpf_map_delete_elem(&probe_segments, &w->key);
	} else {
		w->unmatched++;
	}
	if (bpf_ringbuf_output(&probe_records, &w->rec, sizeof(w->rec), BPF_RB_NO_WAKEUP) < 0)
		__sync_fetch_and_add(&probe_counters.ring_dropped, 1);
	else
		__sync_fetch_and_add(&probe_counters.records, 1);
	return 0;
}

static __always_inline void start_walk(struct segment_walk *w, struct __sk_buff *skb,
				       const struct data_segment *seg, __u64 now)
{
	w->key.flow = seg->flow;
	w->now = now;
	w->seq = seg->seq;
	w->payload = seg->payload;
	w->segs = segment_count(skb, seg->payload, &w->seg_size);
}

SEC("tcx/egress")
int probe_egress(struct __sk_buff *skb)
{
	struct data_segment seg;
	if (parse_data_segment(skb, &seg) < 0)
		return TCX_NEXT;
	__u64 now = bpf_ktime_get_ns();
	struct probe_flow *f = flow_entry(&seg.flow);
	if (!f)
		return TCX_NEXT;
	if (!f->first_sent_ns)
		f->first_sent_ns = now;

	struct segment_walk w = {};
	start_walk(&w, skb, &seg, now);
	__u32 stamped = w.segs < PROBE_MAX_GSO_SEGS ? w.segs : PROBE_MAX_GSO_SEGS;
	bpf_loop(stamped, stamp_segment, &w, 0);
	if (w.segs > stamped)
		__sync_fetch_and_add(&probe_counters.stamps_lost, w.segs - stamped);
	__sync_fetch_and_add(&f->segments_sent, w.segs);
	__sync_fetch_and_add(&f->bytes_sent, seg.payload);
	return TCX_NEXT;
}

SEC("tcx/ingress")
int probe_ingress(struct __sk_buff *skb)
{
	struct data_segment seg;
	if (parse_data_segment(skb, &seg) < 0)
		return TCX_NEXT;
	__u64 now = bpf_ktime_get_ns();
	struct probe_flow *f = flow_entry(&seg.flow);
	if (!f)
		return TCX_NEXT;

	/* One segment normally (mahimahi's TUN devices do no GRO); a GRO packet on another kind of
	 * device is taken apart into the segments the sender stamped. */
	struct segment_walk w = {};
	start_walk(&w, skb, &seg, now);
	w.rec.t_ns = now;
	w.rec.flow = f->flow;
	__u32 walked = w.segs < PROBE_MAX_GSO_SEGS ? w.segs : PROBE_MAX_GSO_SEGS;
	bpf_loop(walked, match_segment, &w, 0);
	__sync_fetch_and_add(&f->segments_received, w.segs);
	__sync_fetch_and_add(&f->bytes_received, seg.payload);
	if (w.unmatched)
		__sync_fetch_and_add(&f->unmatched, w.unmatched);
	f->last_received_ns = now;
	return TCX_NEXT;
}

/* States a socket can leave without ever having been established. */
static __always_inline int before_established(int state)
{
	return state == TCP_LISTEN || state == TCP_SYN_SENT || state == TCP_SYN_RECV ||
	       state == TCP_NEW_SYN_RECV;
}

/* Copies the kernel's counters of a measured server socket into probe_tcp_infos (the latest
 * snapshot of a flow wins). */
static __always_inline void snapshot(const struct sock *sk, int state)
{
	struct probe_endpoint ep = {
		.ip = sk->__sk_common.skc_rcv_saddr,
		.port = bpf_htons(sk->__sk_common.skc_num),
	};
	if (!bpf_map_lookup_elem(&probe_endpoints, &ep))
		return;
	struct tcp_sock *tp = bpf_skc_to_tcp_sock((void *)sk);
	if (!tp)
		return;
	struct probe_flow_key key = {
		.server_ip = ep.ip,
		.server_port = ep.port,
		.client_port = sk->__sk_common.skc_dport,
	};
	struct probe_tcp_info info = {
		.state = state,
		.total_retrans = tp->total_retrans,
		.bytes_retrans = tp->bytes_retrans,
		.srtt_us = tp->srtt_us >> 3,
		.min_rtt_us = tp->rtt_min.s[0].v,
		.data_segs_out = tp->data_segs_out,
		.delivered = tp->delivered,
		.bytes_acked = tp->bytes_acked,
		.snapshot_ns = bpf_ktime_get_ns(),
	};
	bpf_map_update_elem(&probe_tcp_infos, &key, &info, BPF_ANY);
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(probe_set_state, const struct sock *sk, const int oldstate, const int newstate)
{
	if (newstate == TCP_ESTABLISHED)
		return 0;
	if (before_established(oldstate) && newstate != TCP_CLOSE)
		return 0;
	snapshot(sk, newstate);
	return 0;
}

/*
 * A server socket whose last state change came before its last retransmission (nginx closes
 * as soon as the response is in the send buffer, so FIN_WAIT1 comes early; the client's ACK of
 * the FIN may die with the mahimahi shells) would keep a stale snapshot. At stop, user space
 * runs this iterator in each server namespace: every measured socket still alive is snapshot
 * with its counters as they are then, which, the transfer being over, are final.
 */
SEC("iter/tcp")
int probe_live_sockets(struct bpf_iter__tcp *ctx)
{
	struct sock_common *skc = ctx->sk_common;
	if (!skc)
		return 0;
	int state = skc->skc_state;
	if (state == TCP_LISTEN || state == TCP_TIME_WAIT || state == TCP_NEW_SYN_RECV)
		return 0;
	snapshot((const struct sock *)skc, state);
	return 0;
}
