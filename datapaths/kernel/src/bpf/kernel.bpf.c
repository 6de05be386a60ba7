// SPDX-License-Identifier: GPL-2.0-only
/*
 * ccswitch: a CCP-style kernel datapath as a BPF struct_ops TCP congestion
 * control.
 *
 * Model
 * -----
 * The kernel keeps doing everything a TCP sender does (loss detection,
 * retransmission, SACK scoreboard, RACK, undo); this program only decides
 * snd_cwnd and sk_pacing_rate, and reports what it sees.
 *
 *  - A flow on the agent's standard program (every simple-API algorithm) is
 *    folded here: each ACK (cong_control) updates the program's report
 *    registers in the flow's state, and only its reports go into the ring
 *    buffer read by the userspace shim, which forwards them to the agent.
 *    Any other flow emits an ACK event with the CCP measurement primitives
 *    (see kernel.h for fields and units) on every ACK, for the shim's
 *    interpreter. Records go into one of two rings, the urgent lane (a flow
 *    created or closed, loss, timeout, ECN), which wakes the shim, and the
 *    routine lane, which wakes it only past a size or an age (see
 *    CCSW_WAKE_BYTES and routine_wake_flags).
 *  - The agent answers with directives (cwnd in bytes, pacing rate in
 *    bytes/s, the fold) that the shim stores into the `directives` array,
 *    mapped into its memory, in the slot of the flow id handed out at init.
 *  - A directive is obeyed only while the agent is known to be alive: the
 *    shim keeps pushing `config.agent_valid_until_ns` (CLOCK_MONOTONIC, the
 *    clock of bpf_ktime_get_ns) into the future. When that deadline has
 *    passed, or the flow has no directive yet, the flow is carried by an
 *    in-kernel FALLBACK algorithm (Reno or Cubic through the kernel's own
 *    kfuncs), starting from whatever cwnd the flow has: no flow stalls.
 *
 * Because we implement cong_control, the kernel skips its own cwnd
 * reduction (PRR), the end-of-recovery cwnd reset, cong_avoid and
 * tcp_update_pacing_rate for this socket. The fallback path therefore
 * re-does exactly those steps, in the same order, so that ccswitch with
 * no agent behaves like native reno/cubic (including the pacing rate that
 * TSO autosizing and TCP small queues read even without a pacing qdisc).
 *
 * State
 * -----
 * A flow's state (struct ccsw_flow_state, three cache lines) lives in the
 * entry of ccsw_flow_states at its directive slot (flow id % max flows),
 * which init claims for it and release gives back; a flow whose entry
 * another live flow holds keeps its state in socket storage instead. The
 * tail of icsk_ca_priv, past what Cubic's kfuncs own, says which, and holds
 * the flow id and slot (struct ccsw_ca_priv), so that an ACK finds both
 * the flow's state and its directive by address from the socket it is
 * processing: at 10k flows an ACK every few seconds each, every flow is
 * cold in cache, and socket storage's chain of pointers (the socket's
 * storage, its cache, the element, then the data) cost half of
 * cong_control's time, one miss after the other. The kernel zeroes
 * icsk_ca_priv when a socket switches congestion control (after our
 * release, before the next init), and the entry's owner is checked on
 * every lookup, so a stale tail finds nothing.
 *
 * Registration
 * ------------
 * The congestion control registers as non-restricted, as if it were listed
 * in net.ipv4.tcp_allowed_congestion_control, so any namespace may make it
 * its default. Besides sparing users a global sysctl, this closes a kernel
 * reference leak: tcp_set_default_congestion_control() takes a reference on
 * the congestion control (for BPF, on its struct_ops map) before refusing a
 * restricted one in a non-initial namespace with EPERM, and never drops it,
 * so a single refused sysctl kept the map and every program loaded until
 * reboot. Rewriting the allowed list without this name restricts it again
 * and reopens that leak (see the README).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "kernel.h"
#include "shim_channel.bpf.h"

char _license[] SEC("license") = "GPL";

/* Branch weights for clang's block placement: the ACK of a folded flow under a directive is
 * the common case, and the interpreter's, the fallback's and the event paths are placed out of
 * its way. Measured against the floor of `make bench` (ccsw_floor), 8 alternated rounds:
 * Cubic 0.86 [0.76, 0.95] of its cost without them, Reno 0.94 [0.84, 1.04]
 * (experiments/measured/bench-branch-hints-2026-11-27). */
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#define AF_INET 2
#define AF_INET6 10

/* include/net/tcp.h; accepted by bpf_tcp_ca_init_member (TCP_CONG_MASK). */
#define TCP_CONG_NON_RESTRICTED 0x1

#define USEC_PER_SEC 1000000ULL
#define TCP_INFINITE_SSTHRESH 0x7fffffff
#define MIN_CWND_PKTS 2
/* Segments of growth directive_cwnd_pkts counts on per ACK before it divides. */
#define GROWTH_SEGMENTS_COUNTED 4

/* ACK flags passed to cong_control (net/ipv4/tcp_input.c). */
#define FLAG_DATA_ACKED 0x04
#define FLAG_SYN_ACKED 0x10
#define FLAG_DATA_SACKED 0x20
#define FLAG_ECE 0x40
#define FLAG_SND_UNA_ADVANCED 0x400
#define FLAG_ACKED (FLAG_DATA_ACKED | FLAG_SYN_ACKED)
#define FLAG_FORWARD_PROGRESS (FLAG_ACKED | FLAG_DATA_SACKED)

/* Defaults; the loader sizes these maps from its options. */
#define RINGBUF_BYTES (4 << 20)
#define URGENT_RINGBUF_BYTES (1 << 20)
#define MAX_FLOWS 100000

extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;
extern void cubictcp_init(struct sock *sk) __ksym;
extern void cubictcp_cwnd_event(struct sock *sk, enum tcp_ca_event event) __ksym;
extern __u32 cubictcp_recalc_ssthresh(struct sock *sk) __ksym;
extern void cubictcp_state(struct sock *sk, __u8 new_state) __ksym;
extern void cubictcp_acked(struct sock *sk, const struct ack_sample *sample) __ksym;
extern void cubictcp_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;

/* A flow's state, in its entry of ccsw_flow_states or in socket storage (see
 * State above). An ACK of a folded flow touches its first two cache lines
 * only; the fallback's and the pacing emulation's rarer reads are in the
 * third. */
struct ccsw_flow_state {
	__u32 flow_id;        /* owner of an entry of ccsw_flow_states; 0 = free */
	__u32 rtt_us;         /* latest RTT sample (srtt until the first), as the shim carries it */
	__u8 was_timeout;     /* entered TCP_CA_Loss since the last ACK event */
	__u8 directed;        /* the last ACK applied a cwnd directive */
	__u8 paced;           /* we set SK_PACING_NEEDED for a pacing directive */
	__u8 ever_directed;   /* a directive has set cwnd on some ACK */
	__u8 fallback;        /* CCSW_FALLBACK_*, latched at init */
	__u8 loss_unreported; /* entered Recovery since the last ACK (see ack_losses) */
	__u8 prr_to_directive; /* this reduction began with the agent's loss window: PRR toward it (apply_directive_cwnd) */
	__u8 reduction_reported; /* this reduction's first loss was answered here and reported urgent (report_is_urgent) */
	struct ccsw_fold_state fold; /* its growth registers in the third cache line */
	__u32 prr_delivered;  /* PRR: packets delivered since entering CWR/Recovery */
	/* tcp_pacing_{ss,ca}_ratio of the flow's namespace, read once at init
	 * (a change of the sysctls applies to flows created after it; the
	 * sysctls allow at most 1000). */
	__u16 pacing_ss_ratio;
	__u16 pacing_ca_ratio;
	__u32 reordering_sysctl; /* tcp_reordering, read at init */
	__u32 reductions_entered; /* window reductions (CWR or Recovery) entered since the flow began, as reports carry it */
} __attribute__((aligned(64)));

_Static_assert(__builtin_offsetof(struct ccsw_flow_state, fold.chain_reported_bytes) == 128,
	       "a folded ACK's state is two cache lines; the growth registers start the third (growth_view)");
_Static_assert(__builtin_offsetof(struct ccsw_flow_state, fold.held_cwnd_bytes) / 64 == 1, "start_cold_lines reads the second line here");
_Static_assert(sizeof(struct ccsw_flow_state) == 192, "a flow's state is three cache lines");

/* Flows' states by directive slot (the loader sizes it as ccsw_directives).
 * Mmapable only because such an array's values start on a page, so that
 * each entry is three whole cache lines; nothing maps it. */
struct {
	CCSW_SHIM_ARRAY(struct ccsw_flow_state, MAX_FLOWS);
} ccsw_flow_states SEC(".maps");

/* The state of a flow whose entry of ccsw_flow_states another flow holds. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct ccsw_flow_state);
} ccsw_flow_state_spill SEC(".maps");

/* The routine lane: reports and ACK records that can wait for the shim's next pass. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, RINGBUF_BYTES);
} ccsw_events SEC(".maps");

/* The urgent lane: records the shim reads and forwards before anything else. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, URGENT_RINGBUF_BYTES);
} ccsw_urgent SEC(".maps");

/* Longest a routine record waits before one submitted after it wakes the shim
 * (set by the loader from --report-delay-us). */
const volatile __u64 ccsw_report_delay_ns = 1000000;

struct {
	CCSW_SHIM_ARRAY(struct ccsw_kernel_directive_slot, MAX_FLOWS);
} ccsw_directives SEC(".maps");

/* Entries of ccsw_directives (set by the loader with the map's size). */
const volatile __u32 ccsw_max_flows = MAX_FLOWS;

struct {
	CCSW_SHIM_ARRAY(struct ccsw_kernel_config, 1); /* the shim stores the deadline directly */
} ccsw_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ccsw_kernel_cpu_stats);
} ccsw_stats SEC(".maps");

/* Last flow id handed out; ids start at 1 (0 = none). */
__u32 next_flow_id = 0;

static __always_inline struct tcp_sock *tcp_sk(struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline struct inet_connection_sock *inet_csk(struct sock *sk)
{
	return (struct inet_connection_sock *)sk;
}

/* What an ACK needs first, in the last bytes of icsk_ca_priv, past the part
 * Cubic's kfuncs own (struct bictcp), in the socket's cache line that also
 * starts struct tcp_sock: where the flow's state is (see State above),
 * whether its fallback is Cubic, so that cwnd_event, pkts_acked and ssthresh
 * know it without finding the state, and the small per-ACK caches of a
 * directed flow (meaningful only while it has a state). init sets it; the
 * kernel zeroes icsk_ca_priv when a socket changes congestion control. */
struct ccsw_ca_priv {
	__u32 flow_id;  /* 0: the socket has no state */
	__u32 slot;     /* the flow's directive slot, flow_id % ccsw_max_flows */
	/* The directive's window in whole packets (before the floor of
	 * MIN_CWND_PKTS): see count_cwnd_pkts. */
	struct ccsw_cwnd_pkts cwnd_dir;
	/* What the emulated pacing rate of a directed flow was last computed
	 * from (see emulate_pacing_rate). */
	__u32 pacing_cwnd;
	__u32 pacing_srtt_us;
	__u8 in_array;  /* the state is the slot's entry of ccsw_flow_states, else socket storage */
	__u8 cubic;     /* the fallback is Cubic */
	__u8 _pad[2];
};

#define CCSW_CA_PRIV_SIZE sizeof(((struct inet_connection_sock *)0)->icsk_ca_priv)
#define CCSW_CA_PRIV_OFFSET (CCSW_CA_PRIV_SIZE - sizeof(struct ccsw_ca_priv))
_Static_assert(sizeof(struct bictcp) <= CCSW_CA_PRIV_OFFSET, "Cubic's state leaves our tail of icsk_ca_priv free");

static __always_inline struct ccsw_ca_priv *ca_priv(struct sock *sk)
{
	return (struct ccsw_ca_priv *)((__u8 *)inet_csk(sk)->icsk_ca_priv + CCSW_CA_PRIV_OFFSET);
}

static __always_inline bool falls_back_to_cubic(struct sock *sk)
{
	return ca_priv(sk)->cubic != 0;
}

/* The socket's flow state, if it has one. */
static __always_inline struct ccsw_flow_state *flow_state(struct sock *sk)
{
	struct ccsw_ca_priv *ca = ca_priv(sk);
	__u32 flow_id = ca->flow_id, slot = ca->slot;
	struct ccsw_flow_state *st;

	if (!flow_id)
		return NULL;
	if (!ca->in_array)
		return bpf_sk_storage_get(&ccsw_flow_state_spill, sk, 0, 0);
	st = bpf_map_lookup_elem(&ccsw_flow_states, &slot);
	return st && st->flow_id == flow_id ? st : NULL;
}

/* Reads one word of the state's two hot lines and of the directive's line, one after the
 * other, before anything waits on one of them. At 10k flows an ACK finds all three cold
 * (each flow is ACKed every few seconds), and their addresses come from the socket alone:
 * read here, the three misses overlap. Read where the code first needs each, they followed
 * one another (a profile of cong_control stalled on the state's owner, then on the
 * directive's, then on the fold). The words read are checked again where they are used. */
static __always_inline void start_cold_lines(struct ccsw_ca_priv *ca)
{
	__u32 slot = ca->slot;
	struct ccsw_flow_state *st;
	__u32 *d;

	if (!ca->flow_id || !ca->in_array)
		return;
	d = bpf_map_lookup_elem(&ccsw_directives, &slot);
	st = bpf_map_lookup_elem(&ccsw_flow_states, &slot);
	if (d)
		(void)*(volatile __u32 *)d;
	if (st) {
		(void)*(volatile __u32 *)&st->flow_id;
		(void)*(volatile __u32 *)&st->fold.held_cwnd_bytes; /* the second line */
	}
}

/* A new flow's state, zeroed: its slot's entry of ccsw_flow_states if no
 * other flow holds it, else socket storage. */
static __always_inline struct ccsw_flow_state *new_flow_state(struct sock *sk, struct ccsw_ca_priv *ca)
{
	__u32 flow_id = __sync_fetch_and_add(&next_flow_id, 1) + 1;
	__u32 slot = ccsw_directive_slot(flow_id, ccsw_max_flows);
	struct ccsw_flow_state *st = bpf_map_lookup_elem(&ccsw_flow_states, &slot);
	__u8 in_array = 0;

	if (st && !st->flow_id && __sync_val_compare_and_swap(&st->flow_id, 0, flow_id) == 0) {
		__builtin_memset((__u8 *)st + sizeof(st->flow_id), 0, sizeof(*st) - sizeof(st->flow_id));
		in_array = 1;
	} else {
		st = bpf_sk_storage_get(&ccsw_flow_state_spill, sk, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!st)
			return NULL;
		st->flow_id = flow_id;
	}
	__builtin_memset(ca, 0, sizeof(*ca));
	ca->in_array = in_array;
	ca->flow_id = flow_id;
	ca->slot = slot;
	return st;
}

static __always_inline struct ccsw_kernel_cpu_stats *stats_slot(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&ccsw_stats, &zero);
}

static __always_inline struct ccsw_kernel_config *config_slot(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&ccsw_config, &zero);
}

/* The directive slot of a flow, if the flow holds it (see shim_channel.bpf.h). */
static __always_inline struct ccsw_kernel_directive_slot *directive_of(__u32 flow_id)
{
	return ccsw_directive_in(&ccsw_directives, ccsw_directive_slot(flow_id, ccsw_max_flows), flow_id);
}

/* Counters: the stats map is per CPU, so a counter bumped on every ACK is a
 * plain increment, not a locked one. It can lose a count only if another
 * program on the same CPU interrupts it between its load and its store (a
 * softirq's ACK preempting one processed in process context): statistics,
 * not accounting. Rare events (flows changing hands) stay atomic. */
#define COUNT(s, field) ((s)->field++)

static __always_inline void count_event(struct ccsw_kernel_cpu_stats *s, bool submitted)
{
	if (!s)
		return;
	if (submitted)
		COUNT(s, events);
	else
		COUNT(s, drops);
}

static __always_inline bool before(__u32 seq1, __u32 seq2)
{
	return (__s32)(seq1 - seq2) < 0;
}

static __always_inline __u32 packets_in_flight(const struct tcp_sock *tp)
{
	return tp->packets_out - (tp->sacked_out + tp->lost_out) + tp->retrans_out;
}

static __always_inline bool in_cwnd_reduction(__u8 ca_state)
{
	return ca_state == TCP_CA_CWR || ca_state == TCP_CA_Recovery;
}

static __always_inline __u32 tcp_jiffies32(void)
{
	return (__u32)bpf_jiffies64();
}

/* When the kernel took the ACK being processed: tcp_mstamp_refresh() reads the clock
 * (CLOCK_MONOTONIC, as bpf_ktime_get_ns) as it starts on each incoming segment, and keeps it
 * in ns and in us. cong_control reads both instead of asking for the clock again (a helper
 * call and a TSC read, about a twentieth of its time at 10k flows) and dividing by 1000. */
static __always_inline __u64 ack_time_ns(const struct tcp_sock *tp)
{
	return tp->tcp_clock_cache;
}

static __always_inline __u64 ack_time_us(const struct tcp_sock *tp)
{
	return tp->tcp_mstamp; /* ack_time_ns / 1000 */
}

/* The namespace's tcp_pacing_{ss,ca}_ratio sysctls (probe reads). */
static __always_inline void read_pacing_ratios(struct sock *sk, __u32 *ss, __u32 *ca)
{
	struct net *net = sk->__sk_common.skc_net.net;

	*ss = BPF_CORE_READ(net, ipv4.sysctl_tcp_pacing_ss_ratio);
	*ca = BPF_CORE_READ(net, ipv4.sysctl_tcp_pacing_ca_ratio);
}

/* tcp_update_pacing_rate(): 200% (slow start) or 120% of cwnd*mss/srtt,
 * using the namespace's tcp_pacing_{ss,ca}_ratio sysctls (as read at init
 * when the flow has state). Without a pacing directive the rate only sizes
 * TSO bursts and TCP small queues. The fallback recomputes it on every ACK,
 * as the kernel does; a directed flow (`lazy`) only when the window it uses
 * changed or srtt moved by more than 1/8 since the last time, so that its
 * ACKs do not divide. */
static __always_inline void emulate_pacing_rate(struct sock *sk, struct ccsw_flow_state *st, bool lazy)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccsw_ca_priv *cp = ca_priv(sk);
	__u64 rate, ratio, cwnd = tp->snd_cwnd;
	__u32 ss, ca, srtt = tp->srtt_us, moved, key;
	bool slow_start = cwnd < tp->snd_ssthresh / 2;

	if (tp->packets_out > cwnd)
		cwnd = tp->packets_out;
	key = (__u32)cwnd | (slow_start ? 1u << 31 : 0); /* the window and which ratio */
	if (st && lazy && cp->pacing_cwnd == key) {
		moved = srtt > cp->pacing_srtt_us ? srtt - cp->pacing_srtt_us : cp->pacing_srtt_us - srtt;
		if (moved <= cp->pacing_srtt_us >> 3)
			return;
	}
	if (st) {
		ss = st->pacing_ss_ratio;
		ca = st->pacing_ca_ratio;
		cp->pacing_cwnd = key;
		cp->pacing_srtt_us = srtt;
	} else {
		read_pacing_ratios(sk, &ss, &ca);
	}
	ratio = slow_start ? ss : ca;
	rate = (__u64)tp->mss_cache * ((USEC_PER_SEC / 100) << 3);
	rate *= ratio;
	rate *= cwnd;
	if (srtt)
		rate /= (__u64)srtt;
	if (rate > sk->sk_max_pacing_rate)
		rate = sk->sk_max_pacing_rate;
	sk->sk_pacing_rate = rate;
}

static __always_inline __u32 read_reordering_sysctl(struct sock *sk)
{
	struct net *net = sk->__sk_common.skc_net.net;

	return BPF_CORE_READ(net, ipv4.sysctl_tcp_reordering);
}

/* tcp_may_raise_cwnd(), with the namespace's tcp_reordering as read at init
 * when the flow has state. */
static __always_inline bool may_raise_cwnd(struct sock *sk, struct ccsw_flow_state *st, int flag)
{
	__u32 reordering = st ? st->reordering_sysctl : read_reordering_sysctl(sk);

	if (tcp_sk(sk)->reordering > reordering)
		return flag & FLAG_FORWARD_PROGRESS;
	return flag & FLAG_DATA_ACKED;
}

/* tcp_cwnd_reduction(): proportional rate reduction (RFC 6937). The
 * kernel's tp->prr_delivered is read-only for BPF, so our count of
 * delivered packets lives in the flow's state (reset when a reduction
 * starts, see ccsw_set_state); tp->prr_out is kept by the kernel. */
static __always_inline void prr_cwnd_reduction(struct sock *sk, struct ccsw_flow_state *st, __u32 ssthresh,
					       int newly_acked_sacked, int newly_lost, int flag)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u32 in_flight = packets_in_flight(tp);
	int delta = (int)ssthresh - (int)in_flight;
	__u32 prior_cwnd = tp->prior_cwnd;
	int sndcnt;

	if (newly_acked_sacked <= 0 || !prior_cwnd)
		return;

	st->prr_delivered += newly_acked_sacked;
	if (delta < 0) {
		__u64 dividend = (__u64)ssthresh * st->prr_delivered + prior_cwnd - 1;

		sndcnt = (int)(dividend / prior_cwnd) - (int)tp->prr_out;
	} else {
		sndcnt = (int)st->prr_delivered - (int)tp->prr_out;
		if (sndcnt < newly_acked_sacked)
			sndcnt = newly_acked_sacked;
		if ((flag & FLAG_SND_UNA_ADVANCED) && !newly_lost)
			sndcnt++;
		if (sndcnt > delta)
			sndcnt = delta;
	}
	/* Force a fast retransmit upon entering fast recovery. */
	if (sndcnt < (tp->prr_out ? 0 : 1))
		sndcnt = tp->prr_out ? 0 : 1;
	/* Nothing in flight and nothing to send yet (a receiver holding its window
	 * shut) would leave a window of 0, which a later undo hands back to the
	 * kernel (WARN in tcp_snd_cwnd_set, seen at 100k flows read at 1 kbit/s). */
	tp->snd_cwnd = in_flight + sndcnt > 0 ? in_flight + sndcnt : 1;
}

/* The fallback algorithm for one ACK: what tcp_cong_control() does for a
 * classic (cong_avoid) congestion control. */
static __always_inline void fallback_on_ack(struct sock *sk, struct ccsw_flow_state *st,
					    __u32 fallback, __u32 ack, int flag,
					    const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u8 ca_state = inet_csk(sk)->icsk_ca_state;

	if (in_cwnd_reduction(ca_state)) {
		if (st)
			prr_cwnd_reduction(sk, st, tp->snd_ssthresh, rs->acked_sacked, rs->losses, flag);
		else if (tp->snd_cwnd > tp->snd_ssthresh)
			tp->snd_cwnd = tp->snd_ssthresh; /* no state: plain halving */
	} else if (may_raise_cwnd(sk, st, flag)) {
		if (fallback == CCSW_FALLBACK_CUBIC)
			cubictcp_cong_avoid(sk, ack, rs->acked_sacked);
		else
			tcp_reno_cong_avoid(sk, ack, rs->acked_sacked);
	}
}

#include "vm.bpf.h"

/* The program's growth registers (Control.chain_from, chain_acked, ss_high) and its ACK
 * epoch restart with it:
 * the first of fold_cwnd and fold_ack to see a new start resets them. Only a restart reads
 * their cache line here (the fold's own registers restart in ccsw_std_restart). */
static __always_inline void restart_growth(struct ccsw_fold_state *s, const struct ccsw_kernel_directive_slot *d)
{
	if (s->std.fold.start_us == d->fold_start_us || s->growth_start_us == d->fold_start_us)
		return;
	s->chain_reported_bytes = 0;
	s->chain_from_us = 0;
	s->ss_high_bytes = 0;
	s->growth_start_us = d->fold_start_us;
	__builtin_memset(&s->agg, 0, sizeof(s->agg));
}

/* After a report of the aggregation registers: Report.extra_acked starts over (the epoch's
 * are kept). */
static __always_inline void reported_aggregation(struct ccsw_fold_state *s)
{
	s->agg.extra_acked = 0;
}

/* Whether the program's chain counts from the report at Control.grow_from on this ACK, and
 * (*since) the bytes acknowledged since that report. The program anchors the chain on every
 * ACK whose latest report is that one (Micros counts from it) and sums on over later reports;
 * this fold anchors it at reports only (fold_ack), so an ACK whose latest report is the
 * anchor reads nothing from the chain's cache line. That is the program's chain as long as
 * Control.grow_from only moves forward and never past the latest report, as the agent's
 * answers set it (each from the latest report it has had). `micros_zero` and `acked` are the
 * program's Micros origin and Report.acked on this ACK. */
static __always_inline bool growth_view(const struct ccsw_fold_state *s, const struct ccsw_kernel_directive_slot *d,
					__u64 micros_zero, __u64 acked, __u64 *since)
{
	if ((__u32)micros_zero == d->grow_from_us) {
		*since = acked;
		return true;
	}
	*since = s->chain_reported_bytes + acked;
	return s->chain_from_us == d->grow_from_us;
}

/* The standard program's growth and loss clauses, in its order. A step (CCSW_GROWTH_STEP):
 * once more than Control.grow_after bytes have been acknowledged since the report at
 * Control.grow_from, Cwnd becomes Control.grow_cwnd, the agent's next step pre-set, plus
 * Control.grow_rate per CCSW_GROW_RATE_UNIT bytes acknowledged beyond grow_after (a multiply
 * and a shift: no ACK divides); CCSW_GROWTH_STEP_AT: grow_cwnd alone, on an ACK (at `now_us`)
 * later than Control.grow_not_before. Slow start
 * (CCSW_GROWTH_SLOW_START): Control.ss_high becomes Control.ss_cwnd plus the bytes
 * acknowledged since that report, at most its threshold (grow_after), if more; Cwnd rises to it. Loss:
 * an ACK that reveals a loss sets Cwnd to Control.loss_cwnd, or, once the step is earned, to
 * Control.grow_loss_cwnd (if set): the cut from the grown window; it and a timeout clear
 * ss_high. A window set holds, as the interpreter's Cwnd register would, until the shim
 * writes the agent's next window (cwnd_seq moves). `acked_bytes` is this ACK's, which the
 * program adds to Report.acked before these clauses; `cwnd_bytes` is the window the program
 * reads as Cwnd (snd_cwnd). Returns the window (bytes) for cong_control to apply; *set is the
 * window this ACK's clauses set. */
static __always_inline __u32 fold_cwnd(struct ccsw_fold_state *s, const struct ccsw_kernel_directive_slot *d,
				       __u32 acked_bytes, __u32 lost_packets, bool timeout, __u32 cwnd_bytes, __u64 now_us,
				       __u32 *set)
{
	bool slow_start = d->growth == CCSW_GROWTH_SLOW_START && d->grow_cwnd_bytes;
	bool timed = d->growth == CCSW_GROWTH_STEP_AT;
	bool earned = false;

	*set = 0;
	if (s->held_cwnd_bytes && s->held_cwnd_seq != d->cwnd_seq)
		s->held_cwnd_bytes = 0;
	restart_growth(s, d);
	if (slow_start || ((d->growth == CCSW_GROWTH_STEP || timed) && (d->grow_cwnd_bytes || d->grow_loss_cwnd_bytes))) {
		/* The registers as the clauses read them: restarted with the program if they belong
		 * to an earlier start (ccsw_std_restart, which the fold runs after this). Both
		 * sides are read first (volatile): a select between two fields' addresses is a
		 * modified context pointer, which the verifier refuses in the test program. */
		bool current = s->std.fold.start_us == d->fold_start_us;
		__u64 folded = *(volatile __u64 *)&s->std.fold.regs.acked;
		__u64 folded_zero = *(volatile __u64 *)&s->std.fold.micros_zero_us;
		__u64 acked = (current ? folded : 0) + acked_bytes;
		__u64 micros_zero = current ? folded_zero : d->fold_start_us;
		__u64 since;
		bool counts = growth_view(s, d, micros_zero, acked, &since);
		if (slow_start) {
			__u64 grown = (__u64)d->grow_cwnd_bytes + since;
			__u32 high = s->ss_high_bytes;

			if (grown > d->grow_after_bytes)
				grown = d->grow_after_bytes;
			if (counts && grown > high) {
				high = grown;
				s->ss_high_bytes = high;
			}
			/* Cwnd as the shim's interpreter would read it: the agent's window once it
			 * has been written since a clause last set one (libccp sets it as the answer
			 * arrives; snd_cwnd here still has the window before it). */
			if (high > (!s->held_cwnd_bytes && d->cwnd_bytes ? d->cwnd_bytes : cwnd_bytes))
				*set = high;
		} else {
			earned = counts && since > d->grow_after_bytes;
			if (earned && d->grow_cwnd_bytes && timed) {
				if ((__s32)((__u32)now_us - d->grow_not_before_us) > 0)
					*set = d->grow_cwnd_bytes;
			} else if (earned && d->grow_cwnd_bytes) {
				/* Within 64 bits for 16 GiB past the step (the shim folds no rate
				 * above one unit); the agent answers long before. */
				__u64 grown = (__u64)d->grow_cwnd_bytes +
					      (((since - d->grow_after_bytes) * d->grow_rate) >> CCSW_GROW_RATE_SHIFT);

				*set = grown > 0xffffffffULL ? 0xffffffffU : (__u32)grown;
			}
		}
	}
	if (lost_packets && d->loss_cwnd_bytes)
		*set = d->loss_cwnd_bytes;
	/* As the program, which has no temporary register left to test grow_cwnd here. */
	if (lost_packets && earned && d->grow_loss_cwnd_bytes)
		*set = d->grow_loss_cwnd_bytes;
	if ((lost_packets || timeout) && s->ss_high_bytes)
		s->ss_high_bytes = 0;
	if (*set) {
		s->held_cwnd_bytes = *set;
		s->held_cwnd_seq = d->cwnd_seq;
	}
	return s->held_cwnd_bytes ? s->held_cwnd_bytes : d->cwnd_bytes;
}

/* One ACK through the standard program (std_fold.bpf.h), reporting as the directive says:
 * per ACK, or (CCSW_FOLD_PER_RTT) on a loss or timeout, per RTT while the window binds
 * (fold_window_pct) and every fold_idle_us. The ACK's delivery-rate sample is the pair
 * `sample`, so that no ACK divides. Returns true when it reports: the registers then hold
 * the report, with the aggregation registers (s->agg), and the caller resets them
 * (ccsw_std_reset_sampled, reported_aggregation) once copied. A report
 * moves the chain (growth_view): anchored at it if its ACK's latest report was the one at
 * Control.grow_from, summed on otherwise, broken by a loss or a timeout (1, no report's time). */
static __always_inline bool fold_ack(struct ccsw_fold_state *s, const struct ccsw_std_ack *a,
				     const struct ccsw_std_rate_sample *sample, const struct ccsw_kernel_directive_slot *d)
{
	struct ccsw_std_reporting m = {
		.idle_report_us = d->fold_idle_us,
		.window_use_pct = d->fold_window_pct,
		.per_ack = d->fold == CCSW_FOLD_PER_ACK,
	};
	struct ccsw_std_regs *r = &s->std.fold.regs;
	bool anchored;

	restart_growth(s, d);
	if (a->agg_rate && a->bytes_acked)
		ccsw_std_fold_aggregation(&s->agg, a);
	/* The Micros origin before this ACK's report moves it. */
	anchored = (__u32)(s->std.fold.start_us == d->fold_start_us ? s->std.fold.micros_zero_us : d->fold_start_us) ==
		   d->grow_from_us;
	if (!ccsw_std_fold_sampled(&s->std, a, sample->bytes, sample->interval_us, d->fold_start_us, &m))
		return false;
	if (anchored) {
		s->chain_from_us = d->grow_from_us;
		s->chain_reported_bytes = r->acked;
	} else {
		s->chain_reported_bytes += r->acked;
	}
	if (r->timeout || r->lost > 0)
		s->chain_from_us = 1; /* no report's time: the chain is broken */
	return true;
}

/* The flow's RTT as the standard program reads it: the latest sample, or
 * srtt until the first (the shim's session carries it the same way). */
static __always_inline void carry_rtt(struct tcp_sock *tp, struct ccsw_flow_state *st,
				      const struct rate_sample *rs)
{
	if (rs->rtt_us >= 0)
		st->rtt_us = (__u32)rs->rtt_us;
	else if (!st->rtt_us)
		st->rtt_us = tp->srtt_us >> 3;
}

/* The packets this ACK reports lost: those it marked (rs->losses), and at least one if the
 * flow entered Recovery since the last ACK without an ACK marking any. RACK marks losses from
 * its reordering timer too (tcp_rack_reo_timeout), and enters Recovery there; the ACKs after
 * it mark nothing new, so without this a folded flow reported such a loss only once a later
 * ACK marked another (on a T-Mobile UMTS trace 0.35 s later, the window unreduced all along,
 * where the kernel's own Cubic reduces on entering Recovery). */
static __always_inline __u32 ack_losses(struct ccsw_flow_state *st, const struct rate_sample *rs)
{
	__u32 lost = rs->losses > 0 ? rs->losses : 0;

	if (st->loss_unreported) {
		st->loss_unreported = 0;
		if (!lost)
			lost = 1;
	}
	return lost;
}

/* The routine lane's wake-up state, and when its oldest unread record was submitted: racy
 * hints (two CPUs may both wake, which costs only a wake-up). */
struct ccsw_wake_state routine_wake = { .cons_pos = ~0ULL };
__u64 routine_oldest_ns = 0;

#ifndef CLOCK_MONOTONIC
#define CLOCK_MONOTONIC 1 /* <linux/time.h>, which vmlinux.h does not carry */
#endif

/* Wakes the shim for prompt routine records (see routine_wake_flags): armed by the first
 * that finds it unarmed, it fires PROMPT_DELAY_NS later, but no sooner than
 * PROMPT_WAKE_GAP_NS after the last wake-up it forced, so that many flows in slow start
 * arm it, and wake the shim, at most once per gap. */
#define PROMPT_DELAY_NS 1000000ULL
#define PROMPT_WAKE_GAP_NS 5000000ULL

struct ccsw_routine_timer {
	struct bpf_timer timer;
	__u64 woke_ns; /* the last wake-up the timer forced */
	__u32 armed;
	__u32 initialised;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ccsw_routine_timer);
} ccsw_routine_timer SEC(".maps");

/* The timer fired: wake the shim if routine records wait and it has read the lane since the
 * last forced wake-up (otherwise it is awake, or about to be, and reads them anyway). A
 * wake-up needs a committed record; a discarded one wakes the reader and is skipped by it. */
static int routine_timer_fired(void *map, int *key, struct ccsw_routine_timer *t)
{
	struct ccsw_kernel_cpu_stats *s;
	__u32 zero = 0;
	void *rec;

	t->armed = 0;
	if (!bpf_ringbuf_query(&ccsw_events, BPF_RB_AVAIL_DATA))
		return 0;
	if (ccsw_wake_flags(&ccsw_events, &routine_wake, 0) != BPF_RB_FORCE_WAKEUP)
		return 0;
	rec = bpf_ringbuf_reserve(&ccsw_events, 8, 0);
	if (rec) {
		bpf_ringbuf_discard(rec, BPF_RB_FORCE_WAKEUP);
		t->woke_ns = bpf_ktime_get_ns();
		s = bpf_map_lookup_elem(&ccsw_stats, &zero);
		if (s)
			s->routine_timer_wakeups++;
	}
	return 0;
}

static __always_inline void arm_routine_timer(__u64 now_ns)
{
	__u32 zero = 0;
	struct ccsw_routine_timer *t = bpf_map_lookup_elem(&ccsw_routine_timer, &zero);
	__u64 at;

	if (!t || t->armed)
		return;
	t->armed = 1;
	if (!t->initialised) {
		bpf_timer_init(&t->timer, &ccsw_routine_timer, CLOCK_MONOTONIC);
		bpf_timer_set_callback(&t->timer, routine_timer_fired);
		t->initialised = 1;
	}
	at = now_ns + PROMPT_DELAY_NS;
	if (at < t->woke_ns + PROMPT_WAKE_GAP_NS)
		at = t->woke_ns + PROMPT_WAKE_GAP_NS;
	bpf_timer_start(&t->timer, at, BPF_F_TIMER_ABS);
}

/* Records travel in two lanes (see shim_channel.bpf.h for why wake-ups are rationed).
 *
 * Urgent records (lane_reserve(true, ..)) are submitted adaptively: the
 * kernel wakes the shim only if it had read everything before the record, so
 * a burst of urgent records costs one wake-up, and the shim reads the whole
 * lane each time it wakes.
 *
 * A routine record is due a wake-up only when CCSW_WAKE_BYTES wait in its lane
 * or the lane's oldest record has waited ccsw_report_delay_ns, and then not while
 * the shim has promised to read the lane of its own accord (config
 * routine_read_by_ns: it does so while routine records keep coming, by a timer of
 * its own); otherwise it is read when the shim is awake anyway (an urgent record,
 * the agent's answers, its own timers). A wake-up from here is an irq_work, a
 * self-IPI whose MSR write traps to the hypervisor on these VMs: at 10k flows x
 * 100 kbit/s the record's submit, mostly that write, was 38% of cong_control's
 * time clean and 60% at 1% loss
 * (experiments/measured/kernel-bpf-loss-profile-2026-11-28); the shim's own timer
 * takes the wake-ups for age off the ACK's path (routine-promise-2026-11-28).
 * FORCE, not adaptive: records submitted without a wake-up are waiting before
 * it (ccsw_wake_flags forces none while the shim has not read the lane since
 * the last). `size` is the record's: the lane was empty before it when nothing
 * else waits (the kernel adds an 8-byte header and rounds to 8 bytes).
 *
 * The age is tested when a later record is submitted, which at many flows is
 * soon. A prompt record (the report of a flow reporting per ACK: slow start,
 * where each answer grows the window within the round's burst of ACKs) also
 * arms the routine timer, since a lone flow's report may be the last record
 * for a round trip: its answer then waited up to the shim's own 20-ms timer,
 * after the burst, and slow start lost rounds (a 2 MB transfer at RTT 300 ms
 * took 1.19 times the kernel's Cubic). Only prompt records arm it: arming
 * reprograms the CPU's timer device, a trap to the hypervisor on these VMs
 * that, armed by every routine record, cost cong_control ~70% more at 10k flows
 * (949 against 552 ns per ACK, experiments/measured/scale-final-2026-11-26). */
static __always_inline __u64 routine_wake_flags(__u64 now, __u64 size, bool prompt)
{
	__u64 avail = bpf_ringbuf_query(&ccsw_events, BPF_RB_AVAIL_DATA);
	struct ccsw_kernel_config *cfg;

	if (avail <= ((size + 8 + 7) & ~7ULL))
		routine_oldest_ns = now;
	if (avail >= CCSW_WAKE_BYTES)
		return ccsw_wake_flags(&ccsw_events, &routine_wake, 0);
	cfg = config_slot();
	if (now - routine_oldest_ns < ccsw_report_delay_ns || (cfg && now < cfg->routine_read_by_ns)) {
		if (prompt)
			arm_routine_timer(now);
		return BPF_RB_NO_WAKEUP;
	}
	return ccsw_wake_flags(&ccsw_events, &routine_wake, 0);
}

/* Room for a record of `size` bytes (a constant) in its lane. */
#define lane_reserve(urgent, size) \
	((urgent) ? bpf_ringbuf_reserve(&ccsw_urgent, (size), 0) : bpf_ringbuf_reserve(&ccsw_events, (size), 0))

/* Submit a record reserved with lane_reserve(urgent, sizeof(*e)) at `now`; a routine
 * one that is `prompt` arms the routine timer. */
#define lane_submit(e, urgent, now, prompt) \
	bpf_ringbuf_submit((e), (urgent) ? 0 : routine_wake_flags((now), sizeof(*(e)), (prompt)))

/* Whether a folded flow's report goes in the urgent lane, which wakes the shim at once: a
 * timeout, ECN, or a loss, but not a later loss of a window reduction whose first one the
 * agent's pre-set window (Control.loss_cwnd) already answered here and an urgent report
 * already told the agent of. The algorithms that pre-set a cut make one per reduction and
 * pre-set no further cut while they recover, so those reports cannot change a decision, and each
 * urgent wake-up costs the ACK that submits it a trapped self-IPI on these VMs, about 15 us
 * (experiments/measured/urgent-wakeup-cost-2026-11-28): a lone Reno flow's slow-start
 * overshoot reported ~90 losses a transfer, nearly half of cong_control's time in make
 * bench (bench-reno-profile-2026-11-28). They go in the routine lane, read within the report
 * delay. A flow whose algorithm pre-sets no cut (BBR) reports every loss urgently.
 * `*first` is whether this report would be the reduction's first, answered here. */
static __always_inline bool report_is_urgent(struct sock *sk, const struct ccsw_flow_state *st,
					     const struct ccsw_std_regs *regs,
					     const struct ccsw_kernel_directive_slot *d, bool *first)
{
	*first = false;
	if (regs->timeout || regs->ecn)
		return true;
	if (!regs->lost)
		return false;
	if (st->reduction_reported)
		return false;
	*first = d->loss_cwnd_bytes && in_cwnd_reduction(inet_csk(sk)->icsk_ca_state);
	return true;
}

/* A folded flow's ACK: no record unless the standard program reports. */
static __always_inline void fold_and_report(struct sock *sk, struct ccsw_flow_state *st, int flag,
					    const struct rate_sample *rs, __u32 lost, __u64 now,
					    const struct ccsw_kernel_directive_slot *d, struct ccsw_kernel_cpu_stats *s)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccsw_report_event *e;
	struct ccsw_std_regs *regs;
	struct ccsw_std_ack a = {};
	struct ccsw_std_rate_sample sample = {};
	__u32 mss = tp->mss_cache;
	bool urgent, first_of_reduction;

	a.now_us = ack_time_us(tp);
	/* Linux's rate sample, over the longer of the send and ACK intervals (tcp_rate_gen): the
	 * ACK interval alone overstates the rate after an ACK burst, and BBR's filter keeps the
	 * largest sample. */
	if (rs->delivered > 0 && rs->interval_us > 0) {
		sample.bytes = (__u64)rs->delivered * mss;
		sample.interval_us = rs->interval_us;
	}
	a.bytes_acked = rs->acked_sacked * mss;
	a.lost_packets = lost;
	a.ecn_packets = (flag & FLAG_ECE) ? rs->acked_sacked : 0;
	a.was_timeout = st->was_timeout;
	a.rtt_us = st->rtt_us;
	a.bytes_in_flight = packets_in_flight(tp) * mss;
	a.cwnd_bytes = tp->snd_cwnd * mss;
	a.pacing_rate = d->pacing_rate;
	a.agg_rate = d->agg_rate;
	st->was_timeout = 0;
	if (s)
		COUNT(s, acks_folded);
	if (likely(!fold_ack(&st->fold, &a, &sample, d)))
		return;

	regs = &st->fold.std.fold.regs;
	urgent = report_is_urgent(sk, st, regs, d, &first_of_reduction);
	e = lane_reserve(urgent, sizeof(*e));
	if (e) {
		if (first_of_reduction)
			st->reduction_reported = 1;
		e->kind = CCSW_EV_REPORT;
		e->flow_id = st->flow_id;
		e->ts_ns = now;
		e->start_us = st->fold.std.fold.start_us;
		e->regs = *regs;
		e->snd_cwnd_bytes = tp->snd_cwnd * mss;
		e->reductions = st->reductions_entered << 1 | in_cwnd_reduction(inet_csk(sk)->icsk_ca_state);
		e->agg = st->fold.agg;
		lane_submit(e, urgent, now, d->fold == CCSW_FOLD_PER_ACK);
		if (s)
			COUNT(s, reports);
	}
	/* A report the ring could not take is lost, as a dropped ACK event
	 * would be; the registers start over either way. */
	count_event(s, e != NULL);
	ccsw_std_reset_sampled(&st->fold.std);
	reported_aggregation(&st->fold);
}

/* A window in whole packets, bytes / mss, without a division on the ACKs of a
 * slow start: folded there, the window grows on every ACK by the bytes it
 * acknowledges, a few segments at most, so the quotient is counted on from the
 * last one. A window that fell, a new MSS or a larger step divides (rare). */
static __always_inline __u32 count_cwnd_pkts(struct ccsw_cwnd_pkts *c, __u32 bytes, __u32 mss)
{
	__u32 pkts = c->pkts;

	if (mss != c->mss || bytes < c->bytes) {
		pkts = bytes / mss;
	} else if (bytes != c->bytes) {
		__u32 left = bytes - pkts * mss;
		int i;

		for (i = 0; i < GROWTH_SEGMENTS_COUNTED && left >= mss; i++) {
			pkts++;
			left -= mss;
		}
		if (left >= mss)
			pkts = bytes / mss;
	}
	c->bytes = bytes;
	c->mss = mss;
	c->pkts = pkts;
	return pkts;
}

/* A directive's window in packets, within the floor and the socket's clamp. */
static __always_inline __u32 directive_cwnd_pkts(struct tcp_sock *tp, struct ccsw_ca_priv *ca, __u32 bytes)
{
	__u32 cwnd = count_cwnd_pkts(&ca->cwnd_dir, bytes, tp->mss_cache ? tp->mss_cache : 1);

	if (cwnd < MIN_CWND_PKTS)
		cwnd = MIN_CWND_PKTS;
	if (cwnd > tp->snd_cwnd_clamp)
		cwnd = tp->snd_cwnd_clamp;
	return cwnd;
}

/* Applies the agent's window (bytes). In a reduction that began with the agent's loss
 * window (prr_to_directive), while more than that window is in flight, the window is reached
 * as the kernel's own loss-based algorithms reach their ssthresh: by proportional rate
 * reduction, which sends the retransmission at once and about one segment for every two
 * delivered. Set at once, the window halved under the data still in flight would hold the
 * retransmission until SACKs had brought that below it, most of a round later, and recovery
 * took two rounds where the kernel's Reno took one (1% loss, 50 ms: 97 against 57 ms per
 * episode). Once in flight is below it, PRR's slow-start bound regrows to it as Linux does,
 * by what each ACK delivers and a segment more. Set at once there, after a slow start that
 * overflowed a 100-packet queue, the window sent a burst into the queue that had just
 * overflowed: 2 MB at RTT 50 ms retransmitted 222 segments a transfer against the kernel's
 * Cubic's 165 and took 1.9% longer; with the regrowth, 164 against 161 and 0.1%
 * (experiments/measured/prr-regrowth-2026-11-28).
 *
 * A reduction can begin before the agent knows the last one ended: its pre-set loss window
 * is then the window it holds, no cut, and the cut comes in its answer to the loss's report.
 * Until then the reduction goes toward the kernel's own ssthresh, as the kernel's Reno
 * would. Holding the window instead let the loss's ACK send the few segments the window
 * allowed beyond those in flight into the queue that had just overflowed, and one was lost:
 * a third reduction a round later in 4 of 15 Reno transfers on make bench's path, where
 * the kernel's Reno had none (experiments/measured/kernel-reductions-2026-11-28). */
static __always_inline void apply_directive_cwnd(struct sock *sk, struct ccsw_ca_priv *ca, struct ccsw_flow_state *st,
						 __u32 bytes, const struct rate_sample *rs, __u32 lost, int flag)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u32 cwnd = directive_cwnd_pkts(tp, ca, bytes);

	if (st->prr_to_directive && in_cwnd_reduction(inet_csk(sk)->icsk_ca_state)) {
		__u32 target = cwnd < tp->prior_cwnd ? cwnd : tp->snd_ssthresh;

		if (target < tp->prior_cwnd) {
			prr_cwnd_reduction(sk, st, target, rs->acked_sacked, lost, flag);
			return;
		}
	}
	tp->snd_cwnd = cwnd;
}

static __always_inline void set_cwnd_bytes(struct tcp_sock *tp, __u64 bytes)
{
	__u32 mss = tp->mss_cache ? tp->mss_cache : 1;
	__u64 cwnd = bytes / mss;

	if (cwnd < MIN_CWND_PKTS)
		cwnd = MIN_CWND_PKTS;
	if (cwnd > tp->snd_cwnd_clamp)
		cwnd = tp->snd_cwnd_clamp;
	tp->snd_cwnd = cwnd;
}

/* The flow's entry of ccsw_vm_flows, if its directive runs a program there
 * and the entry is still its own. */
static __always_inline struct ccsw_vm_flow *vm_flow_of(const struct ccsw_kernel_directive_slot *d, __u32 flow_id)
{
	__u32 slot = d->vm_slot;
	struct ccsw_vm_flow *vf;

	if (likely(d->fold != CCSW_FOLD_VM))
		return NULL;
	vf = bpf_map_lookup_elem(&ccsw_vm_flows, &slot);
	return vf && vf->flow_id == flow_id ? vf : NULL;
}

/* An ACK of a flow whose program the interpreter runs: the primitives the
 * shim's session would give its interpreter for this ACK's record, one
 * evaluation, then its window, rate and report, as libccp applies them. */
static __always_inline void vm_on_ack(struct sock *sk, struct ccsw_flow_state *st, int flag,
				      const struct rate_sample *rs, __u32 lost, __u64 now,
				      const struct ccsw_kernel_directive_slot *d, struct ccsw_vm_flow *vf,
				      struct ccsw_kernel_cpu_stats *s)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccsw_vm_bank *b = &vf->banks[vf->bank & 1];
	struct ccsw_vm_report_event *e;
	struct ccsw_vm_program *p;
	__u64 prims[CCSW_VM_PRIMITIVES] = {};
	__u32 mss = tp->mss_cache ? tp->mss_cache : 1;
	__u32 acked = rs->acked_sacked, in_flight = packets_in_flight(tp), pending, pslot = b->program;
	__s32 delivered = rs->delivered;
	__u64 bytes_delivered, cwnd, rate;
	__u32 parts;
	bool urgent;

	p = bpf_map_lookup_elem(&ccsw_vm_programs, &pslot);
	if (!p)
		return;
	/* The agent set the window or the rate (UPDATE_FIELDS, CHANGE_PROG): once. */
	parts = vf->window_parts ? __sync_fetch_and_and(&vf->window_parts, 0) : 0;
	if ((parts & CCSW_VM_SET_CWND) && d->cwnd_bytes)
		set_cwnd_bytes(tp, d->cwnd_bytes);
	if ((parts & CCSW_VM_SET_RATE) && d->pacing_rate)
		vf->rate = d->pacing_rate;
	prims[0] = (__u64)acked * mss;             /* Ack.bytes_acked */
	prims[1] = (__u64)tp->sacked_out * mss;    /* Ack.bytes_misordered */
	if (flag & FLAG_ECE) {
		prims[2] = (__u64)acked * mss;     /* Ack.ecn_bytes */
		prims[3] = acked;                  /* Ack.ecn_packets */
	}
	prims[4] = lost;                           /* Ack.lost_pkts_sample */
	prims[5] = ack_time_us(tp);                /* Ack.now */
	prims[6] = acked;                          /* Ack.packets_acked */
	prims[7] = tp->sacked_out;                 /* Ack.packets_misordered */
	prims[8] = (__u64)in_flight * mss;         /* Flow.bytes_in_flight */
	pending = tp->write_seq - tp->snd_nxt;
	prims[9] = (__s32)pending > 0 ? pending : 0; /* Flow.bytes_pending */
	prims[10] = in_flight;                     /* Flow.packets_in_flight */
	if (delivered > 0) {
		bytes_delivered = (__u64)delivered * mss * USEC_PER_SEC;
		if (rs->rcv_interval_us > 0)
			prims[11] = bytes_delivered / rs->rcv_interval_us; /* Flow.rate_incoming */
		if (rs->snd_interval_us > 0)
			prims[12] = bytes_delivered / rs->snd_interval_us; /* Flow.rate_outgoing */
	}
	prims[13] = st->rtt_us;                    /* Flow.rtt_sample_us */
	prims[14] = st->was_timeout;               /* Flow.was_timeout */
	st->was_timeout = 0;

	if (s)
		COUNT(s, acks_vm);
	if (vm_evaluate(p, &b->regs, prims, prims[5], (__u64)tp->snd_cwnd * mss, vf->rate) != CCSW_VM_OK) {
		if (s)
			__sync_fetch_and_add(&s->vm_faults, 1);
		return; /* libccp applies nothing of a faulted evaluation */
	}
	cwnd = b->regs.implicit[CCSW_VM_CWND];
	rate = b->regs.implicit[CCSW_VM_RATE];
	if (cwnd)
		set_cwnd_bytes(tp, cwnd);
	if (rate)
		vf->rate = rate;
	if (vf->rate) {
		sk->sk_pacing_rate = vf->rate < sk->sk_max_pacing_rate ? vf->rate : sk->sk_max_pacing_rate;
		sk->sk_pacing_status = SK_PACING_NEEDED;
		st->paced = 1;
	}
	if (!b->regs.implicit[CCSW_VM_SHOULD_REPORT])
		return;
	urgent = prims[4] || prims[14] || (flag & FLAG_ECE);
	e = lane_reserve(urgent, sizeof(*e));
	if (e) {
		e->kind = CCSW_EV_VM_REPORT;
		e->flow_id = st->flow_id;
		e->ts_ns = now;
		e->start_us = b->start_us;
		e->program_uid = p->uid;
		e->n_fields = p->n_report_fields < CCSW_VM_REPORT_REGS ? p->n_report_fields : CCSW_VM_REPORT_REGS;
		e->snd_cwnd_bytes = tp->snd_cwnd * mss;
		e->_pad0 = 0;
		__builtin_memcpy(e->fields, b->regs.report, sizeof(e->fields));
		lane_submit(e, urgent, now, false);
		if (s)
			COUNT(s, reports);
	}
	count_event(s, e != NULL);
	vm_reset_volatile(p, &b->regs);
}

static __always_inline void emit_ack(struct sock *sk, struct ccsw_flow_state *st, int flag,
				     const struct rate_sample *rs, __u32 lost, __u64 now, bool fell_back,
				     struct ccsw_kernel_cpu_stats *s)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccsw_kernel_ack_event *e;
	__u32 mss = tp->mss_cache;
	__u32 acked = rs->acked_sacked;
	__u32 in_flight = packets_in_flight(tp);
	__u32 flags = 0;
	long rtt_us = rs->rtt_us;
	__s32 delivered = rs->delivered;
	__u64 bytes_delivered;
	__u32 pending;
	/* Urgent on loss, timeout or ECN, as folded reports are. */
	bool urgent = lost > 0 || st->was_timeout || (flag & FLAG_ECE);

	e = lane_reserve(urgent, sizeof(*e));
	if (!e) {
		count_event(s, false);
		return; /* keep was_timeout for the next event */
	}

	e->kind = CCSW_EV_ACK;
	e->flow_id = st->flow_id;
	e->ts_ns = now;
	e->packets_acked = acked;
	e->bytes_acked = acked * mss;
	e->packets_misordered = tp->sacked_out;
	e->bytes_misordered = tp->sacked_out * mss;
	if (flag & FLAG_ECE) {
		flags |= CCSW_ACK_F_ECE;
		e->ecn_packets = acked;
		e->ecn_bytes = acked * mss;
	} else {
		e->ecn_packets = 0;
		e->ecn_bytes = 0;
	}
	e->lost_pkts_sample = lost;
	e->was_timeout = st->was_timeout;
	st->was_timeout = 0;
	if (rtt_us >= 0) {
		flags |= CCSW_ACK_F_RTT_VALID;
		e->rtt_sample_us = (__u32)rtt_us;
	} else {
		e->rtt_sample_us = 0;
	}
	e->srtt_us = tp->srtt_us >> 3;
	e->rate_incoming = 0;
	e->rate_outgoing = 0;
	if (delivered > 0) {
		bytes_delivered = (__u64)delivered * mss * USEC_PER_SEC;
		if (rs->rcv_interval_us > 0)
			e->rate_incoming = bytes_delivered / rs->rcv_interval_us;
		if (rs->snd_interval_us > 0)
			e->rate_outgoing = bytes_delivered / rs->snd_interval_us;
		if (rs->rcv_interval_us > 0 && rs->snd_interval_us > 0)
			flags |= CCSW_ACK_F_RATE_VALID;
	}
	if (rs->is_app_limited)
		flags |= CCSW_ACK_F_APP_LIMITED;
	if (fell_back)
		flags |= CCSW_ACK_F_FALLBACK;
	e->packets_in_flight = in_flight;
	e->bytes_in_flight = in_flight * mss;
	pending = tp->write_seq - tp->snd_nxt;
	e->bytes_pending = (__s32)pending > 0 ? pending : 0;
	e->snd_cwnd_bytes = tp->snd_cwnd * mss;
	e->mss = mss;
	e->ca_state = inet_csk(sk)->icsk_ca_state;
	e->flags = flags;
	e->ssthresh = tp->snd_ssthresh;

	lane_submit(e, urgent, now, false);
	count_event(s, true);
}

SEC("struct_ops")
void BPF_PROG(ccsw_init, struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccsw_kernel_config *cfg = config_slot();
	struct ccsw_create_event *e;
	struct ccsw_flow_state *st;
	struct ccsw_ca_priv *ca = ca_priv(sk);
	struct ccsw_kernel_cpu_stats *s = stats_slot();
	__u32 fallback = cfg ? cfg->fallback : CCSW_FALLBACK_RENO;
	__u32 ss_ratio, ca_ratio;
	__u16 family;

	if (fallback != CCSW_FALLBACK_CUBIC)
		fallback = CCSW_FALLBACK_RENO;

	/* A socket initialised again without a release keeps its flow. */
	st = flow_state(sk);
	if (!st)
		st = new_flow_state(sk, ca);
	ca->cubic = st && fallback == CCSW_FALLBACK_CUBIC;
	if (!st)
		/* No state: no flow id, no events, plain Reno fallback. */
		goto pacing;

	st->fallback = fallback;
	st->prr_delivered = 0;
	st->was_timeout = 0;
	st->loss_unreported = 0;
	st->prr_to_directive = 0;
	st->reduction_reported = 0;
	st->directed = 0;
	st->paced = 0;
	st->rtt_us = 0;
	__builtin_memset(&ca->cwnd_dir, 0, sizeof(ca->cwnd_dir));
	ca->pacing_cwnd = 0;
	read_pacing_ratios(sk, &ss_ratio, &ca_ratio);
	st->pacing_ss_ratio = ss_ratio;
	st->pacing_ca_ratio = ca_ratio;
	st->reordering_sysctl = read_reordering_sysctl(sk);
	__builtin_memset(&st->fold, 0, sizeof(st->fold));

	if (fallback == CCSW_FALLBACK_CUBIC)
		cubictcp_init(sk);

	if (s)
		__sync_fetch_and_add(&s->flows_created, 1);

	e = lane_reserve(true, sizeof(*e)); /* urgent: a new flow */
	if (!e) {
		count_event(s, false);
		goto pacing;
	}
	family = sk->__sk_common.skc_family;
	e->kind = CCSW_EV_CREATE;
	e->flow_id = st->flow_id;
	e->ts_ns = bpf_ktime_get_ns();
	e->family = family;
	e->src_port = sk->__sk_common.skc_num;
	e->dst_port = bpf_ntohs(sk->__sk_common.skc_dport);
	e->_pad0 = 0;
	__builtin_memset(e->src_addr, 0, sizeof(e->src_addr));
	__builtin_memset(e->dst_addr, 0, sizeof(e->dst_addr));
	if (family == AF_INET6) {
		BPF_CORE_READ_INTO(&e->src_addr, sk, __sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8);
		BPF_CORE_READ_INTO(&e->dst_addr, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr8);
	} else {
		__u32 saddr = sk->__sk_common.skc_rcv_saddr;
		__u32 daddr = sk->__sk_common.skc_daddr;

		__builtin_memcpy(e->src_addr, &saddr, 4);
		__builtin_memcpy(e->dst_addr, &daddr, 4);
	}
	e->mss = tp->mss_cache;
	e->init_cwnd_bytes = tp->snd_cwnd * tp->mss_cache;
	/* Linux's BBR starts its min_rtt here (bbr_init); ~0U: no sample yet. */
	e->handshake_rtt_us = tp->rtt_min.s[0].v == ~0U ? 0 : tp->rtt_min.s[0].v;
	e->_pad1 = 0;
	lane_submit(e, true, 0, false);
	count_event(s, true);

pacing:
	/* For a passive open the kernel skips its tcp_update_pacing_rate()
	 * when cong_control is set; do it here once an RTT is known. */
	if (tp->srtt_us)
		emulate_pacing_rate(sk, st, false);
}

SEC("struct_ops")
void BPF_PROG(ccsw_cong_control, struct sock *sk, __u32 ack, int flag,
	      const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccsw_ca_priv *ca = ca_priv(sk);
	struct ccsw_flow_state *st;
	struct ccsw_kernel_directive_slot *d = NULL;
	struct ccsw_vm_flow *vf = NULL;
	struct ccsw_kernel_config *cfg;
	struct ccsw_kernel_cpu_stats *s;
	__u64 now = ack_time_ns(tp);
	__u32 fallback = CCSW_FALLBACK_RENO, lost = 0;
	bool directed = false, agent_live = false;

	start_cold_lines(ca);
	s = stats_slot(); /* the one statistics lookup of an ACK */
	st = flow_state(sk);
	if (st) {
		fallback = st->fallback;
		lost = ack_losses(st, rs);
		cfg = config_slot();
		agent_live = cfg && now < cfg->agent_valid_until_ns;
		if (agent_live)
			d = ccsw_directive_in(&ccsw_directives, ca->slot, ca->flow_id);
	}

	if (d && st)
		vf = vm_flow_of(d, st->flow_id);
	if (unlikely(vf)) {
		directed = true; /* the program sets the window below, once the RTT is carried */
	} else if (likely(d && d->cwnd_bytes && st)) {
		__u32 cwnd_set, bytes = fold_cwnd(&st->fold, d, rs->acked_sacked * tp->mss_cache, lost, st->was_timeout,
						   tp->snd_cwnd * tp->mss_cache, ack_time_us(tp), &cwnd_set);

		if (lost && d->loss_cwnd_bytes && in_cwnd_reduction(inet_csk(sk)->icsk_ca_state))
			st->prr_to_directive = 1;
		apply_directive_cwnd(sk, ca, st, bytes, rs, lost, flag);
		directed = true;
	} else {
		if (st && st->directed) {
			/* Hand-over from the agent: the fallback starts from the
			 * cwnd the agent left (and the kernel's ssthresh). */
			tp->snd_cwnd_cnt = 0;
			if (fallback == CCSW_FALLBACK_CUBIC)
				cubictcp_init(sk);
		}
		fallback_on_ack(sk, st, fallback, ack, flag, rs);
	}

	if (unlikely(vf)) {
		/* paced by the program (vm_on_ack) */
	} else if (d && d->pacing_rate) {
		__u64 rate = d->pacing_rate;

		if (rate > sk->sk_max_pacing_rate)
			rate = sk->sk_max_pacing_rate;
		sk->sk_pacing_rate = rate;
		sk->sk_pacing_status = SK_PACING_NEEDED;
		if (st)
			st->paced = 1;
	} else {
		if (st && st->paced) {
			sk->sk_pacing_status = SK_PACING_NONE;
			st->paced = 0;
		}
		emulate_pacing_rate(sk, st, directed);
	}

	if (s) {
		if (directed) {
			COUNT(s, acks_directive);
		} else {
			COUNT(s, acks_fallback);
			if (!agent_live)
				COUNT(s, acks_fallback_agent_late);
			else if (st && !st->ever_directed)
				COUNT(s, acks_fallback_awaiting);
		}
	}

	if (unlikely(st && s && directed != st->directed)) {
		if (!directed)
			__sync_fetch_and_add(agent_live ? &s->flows_fell_back_no_directive
							: &s->flows_fell_back_agent_late, 1);
		else if (st->ever_directed)
			__sync_fetch_and_add(&s->flows_rejoined, 1);
		else
			__sync_fetch_and_add(&s->flows_directed, 1);
	}
	if (st) {
		st->directed = directed;
		if (directed)
			st->ever_directed = 1;
		carry_rtt(tp, st, rs);
		if (unlikely(vf))
			vm_on_ack(sk, st, flag, rs, lost, now, d, vf, s);
		else if (likely(d && d->fold != CCSW_FOLD_OFF))
			fold_and_report(sk, st, flag, rs, lost, now, d, s);
		else
			emit_ack(sk, st, flag, rs, lost, now, !directed, s);
	}
}

/* The fold of cong_control on one ACK given in the context, for the test
 * that compares it with the shim's interpreter (BPF_PROG_TEST_RUN). */
SEC("syscall")
int ccsw_fold_test(struct ccsw_kernel_fold_test *t)
{
	t->cwnd_bytes = fold_cwnd(&t->state, &t->directive, t->ack.bytes_acked, t->ack.lost_packets, t->ack.was_timeout,
				  t->ack.cwnd_bytes, t->ack.now_us, &t->cwnd_set);
	/* The program reads the window its clauses set, as cong_control's fold reads snd_cwnd
	 * after applying it. */
	if (t->cwnd_set)
		t->ack.cwnd_bytes = t->cwnd_set;
	t->ack.agg_rate = t->directive.agg_rate;
	t->reported = fold_ack(&t->state, &t->ack, &t->sample, &t->directive);
	t->report = t->state.std.fold.regs;
	t->report_agg = t->state.agg;
	if (t->reported) {
		ccsw_std_reset_sampled(&t->state.std);
		reported_aggregation(&t->state);
	}
	return 0;
}

SEC("syscall")
int ccsw_cwnd_pkts_test(struct ccsw_kernel_cwnd_pkts_test *t)
{
	t->pkts = count_cwnd_pkts(&t->cache, t->bytes, t->mss ? t->mss : 1);
	return 0;
}

SEC("struct_ops")
__u32 BPF_PROG(ccsw_ssthresh, struct sock *sk)
{
	if (falls_back_to_cubic(sk))
		return cubictcp_recalc_ssthresh(sk);
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(ccsw_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC("struct_ops")
void BPF_PROG(ccsw_set_state, struct sock *sk, __u8 new_state)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccsw_flow_state *st = flow_state(sk);
	__u8 old_state = inet_csk(sk)->icsk_ca_state; /* not yet updated */

	if (!st)
		return;

	if (new_state == TCP_CA_Loss)
		st->was_timeout = 1;
	if (new_state == TCP_CA_Recovery && old_state != TCP_CA_Recovery)
		st->loss_unreported = 1;

	/* tcp_init_cwnd_reduction() has just run: restart PRR accounting; a new reduction's
	 * first loss report is urgent again, and tells the agent that the kernel cut here (a
	 * loss inside a running reduction is one Linux's own algorithms do not answer). */
	if (in_cwnd_reduction(new_state) && !in_cwnd_reduction(old_state)) {
		st->prr_delivered = 0;
		st->reduction_reported = 0;
		st->reductions_entered++;
	}
	if (!in_cwnd_reduction(new_state))
		st->prr_to_directive = 0;

	/* tcp_end_cwnd_reduction(), which the kernel skips for cong_control
	 * congestion controls: leaving CWR/Recovery for Open/Disorder resets
	 * cwnd to ssthresh unless the reduction was undone (undo clears
	 * undo_marker first). Not under a directive: the agent owns cwnd. */
	if (in_cwnd_reduction(old_state) && !in_cwnd_reduction(new_state) &&
	    new_state != TCP_CA_Loss && !st->directed) {
		if (tp->snd_ssthresh < TCP_INFINITE_SSTHRESH &&
		    (old_state == TCP_CA_CWR || tp->undo_marker))
			tp->snd_cwnd = tp->snd_ssthresh;
	}

	if (st->fallback == CCSW_FALLBACK_CUBIC)
		cubictcp_state(sk, new_state);
}

SEC("struct_ops")
void BPF_PROG(ccsw_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	if (falls_back_to_cubic(sk))
		cubictcp_cwnd_event(sk, ev);
}

SEC("struct_ops")
void BPF_PROG(ccsw_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	if (falls_back_to_cubic(sk))
		cubictcp_acked(sk, sample);
}

SEC("struct_ops")
void BPF_PROG(ccsw_release, struct sock *sk)
{
	struct ccsw_ca_priv *ca = ca_priv(sk);
	struct ccsw_flow_state *st = flow_state(sk);
	struct ccsw_close_event *e;
	struct ccsw_kernel_directive_slot *d;
	struct ccsw_kernel_cpu_stats *s = stats_slot();
	__u32 flow_id;

	if (!st)
		return;
	flow_id = st->flow_id;

	e = lane_reserve(true, sizeof(*e)); /* urgent: a flow gone */
	if (e) {
		e->kind = CCSW_EV_CLOSE;
		e->flow_id = flow_id;
		e->ts_ns = bpf_ktime_get_ns();
		lane_submit(e, true, 0, false);
		count_event(s, true);
	} else {
		count_event(s, false);
	}
	if (s)
		__sync_fetch_and_add(&s->flows_closed, 1);

	d = directive_of(flow_id);
	if (d)
		d->flow_id = 0;
	/* Give the state back: the entry to the next flow of its slot. */
	if (ca->in_array)
		st->flow_id = 0;
	else
		bpf_sk_storage_delete(&ccsw_flow_state_spill, sk);
	ca->flow_id = 0;
	ca->cubic = 0;
}

/* Hand-back (teardown.rs): the loader fills our name before load and the
 * built-in name before each run of the iterator. */
#define SOL_TCP 6
#define TCP_CONGESTION 13
#define CC_NAME_MAX 16

const volatile char ccsw_cc_name[CC_NAME_MAX];
/* "reno" or "cubic": the built-in counterpart of the fallback. */
char ccsw_handback_cc[CC_NAME_MAX];
__u64 ccsw_handed_back;

/*
 * Run once per network namespace when the shim exits: every full TCP socket
 * of that namespace still on this congestion control moves to the built-in
 * algorithm its fallback stands for (our release runs, then theirs init; the
 * window carries over). A socket left on us would hold the struct_ops map,
 * and with it every program, until it closed.
 */
SEC("iter/tcp")
int ccsw_hand_back(struct bpf_iter__tcp *ctx)
{
	struct sock_common *skc = ctx->sk_common;
	struct tcp_sock *tp;
	char cur[CC_NAME_MAX];
	int i;

	if (!skc)
		return 0;
	tp = bpf_skc_to_tcp_sock(skc);
	if (!tp)
		return 0;
	if (bpf_getsockopt(tp, SOL_TCP, TCP_CONGESTION, cur, sizeof(cur)))
		return 0;
	for (i = 0; i < CC_NAME_MAX; i++) {
		if (cur[i] != ccsw_cc_name[i])
			return 0;
		if (!cur[i])
			break;
	}
	if (!bpf_setsockopt(tp, SOL_TCP, TCP_CONGESTION, (void *)ccsw_handback_cc,
			    sizeof(ccsw_handback_cc)))
		__sync_fetch_and_add(&ccsw_handed_back, 1);
	return 0;
}

SEC(".struct_ops.link")
struct tcp_congestion_ops ccswitch = {
	.init = (void *)ccsw_init,
	.release = (void *)ccsw_release,
	.ssthresh = (void *)ccsw_ssthresh,
	.cong_control = (void *)ccsw_cong_control,
	.undo_cwnd = (void *)ccsw_undo_cwnd,
	.set_state = (void *)ccsw_set_state,
	.cwnd_event = (void *)ccsw_cwnd_event,
	.pkts_acked = (void *)ccsw_pkts_acked,
	.flags = TCP_CONG_NON_RESTRICTED,
	.name = "ccswitch",
};
