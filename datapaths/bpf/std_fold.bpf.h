/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * The fold of CCP's standard program (agent/src/program.rs), for BPF programs of any
 * datapath: ACK by ACK, its report registers are summed, minimised, maximised or replaced,
 * and a report is due on a timeout, a loss, every ACK in per-ACK mode, once the program's
 * Micros (time since the last report) passes the RTT on an ACK where the window binds (more
 * than window_use_pct % of Cwnd in flight before the ACK, or the flow is paced, or ECN
 * marked it since the last report), or once Micros passes idle_report_us; Micros then
 * restarts. The registers reset when the program (re)starts, which a datapath tells by a new
 * start time. Semantics are those of the shim's interpreter (datapaths/ccp/src/program,
 * ccswitch_ccp::CcpFlow), the reference: each datapath's fold test runs both on the same
 * ACKs and requires the same reports. (The program's loss clause, which sets Cwnd on a loss,
 * is the datapath's to apply: it owns the window.)
 *
 * The program's ACK-aggregation clauses (Control.agg_rate and the ACK epoch) fold apart, in
 * ccsw_std_fold_aggregation, on a state the caller keeps where only a flow that measures
 * aggregation reads it; the report's last three registers (Report.extra_acked and the epoch's)
 * come from there.
 *
 * The incoming rate comes in one of two forms. The ovs port programs measure it in bytes/s
 * (ccsw_std_ack.rate_incoming) and fold it with ccsw_std_fold_ack. The kernel's rate samples
 * are pairs (bytes delivered over an interval), and an ACK there must not divide (its budget
 * is well under a microsecond): it folds with ccsw_std_fold_sampled, which keeps the fastest
 * sample as its pair, compares pairs by cross-multiplication, and divides only to report.
 *
 * Layouts only fixed-width and explicitly padded; the Rust mirrors
 * (ccswitch_datapath_support::std_fold) assert their sizes. Used by the ovs port programs
 * (datapaths/ovs/src/bpf/ovs.bpf.c) and the kernel's congestion control
 * (datapaths/kernel/src/bpf/kernel.bpf.c).
 */
#ifndef CCSW_STD_FOLD_BPF_H
#define CCSW_STD_FOLD_BPF_H

/* The RTT the program reads before any sample: libccp's "+infinity". */
#define CCSW_STD_RTT_INFINITY 0xffffffffULL
/* The minimum-RTT register's reset value: above any sample (us). */
#define CCSW_STD_NO_RTT_SAMPLE_US ((1ULL << 31) - 1)

/* The standard program's report registers, in MEASURE order (ccswitch-ccp's
 * program::standard::report), but for the last three, which struct ccsw_std_aggregation
 * holds. */
struct ccsw_std_regs {
	__u64 acked;    /* bytes, summed */
	__u64 lost;     /* packets, summed */
	__u64 timeout;  /* 0/1: the latest ACK followed a timeout */
	__u64 ecn;      /* packets, summed */
	__u64 rtt;      /* us, latest (CCSW_STD_RTT_INFINITY before any sample) */
	__u64 minrtt;   /* us, minimum since the last report */
	__u64 inflight; /* bytes, latest */
	__u64 rate;     /* bytes/s, maximum of the incoming rate */
	__u64 now;      /* us, CLOCK_MONOTONIC of the latest ACK */
};

/* A flow's fold: its registers and the program's clock. */
struct ccsw_std_fold {
	struct ccsw_std_regs regs;
	__u64 micros_zero_us; /* origin of the program's Micros */
	__u64 start_us;       /* the program start these registers belong to */
};

/* One ACK as the standard program reads it. */
struct ccsw_std_ack {
	__u64 now_us;
	__u64 rate_incoming;   /* bytes/s, 0: no sample (always 0 for ccsw_std_fold_sampled) */
	__u64 pacing_rate;     /* Rate: the program's pacing rate, bytes/s (0: not paced) */
	__u32 bytes_acked;
	__u32 lost_packets;
	__u32 ecn_packets;
	__u32 was_timeout;
	__u32 rtt_us;          /* the flow's latest RTT sample, carried over; 0 = none yet */
	__u32 bytes_in_flight;
	__u32 cwnd_bytes;      /* Cwnd: the program's window on this ACK */
	__u32 agg_rate;        /* Control.agg_rate: bytes per 2^CCSW_STD_AGG_RATE_UNIT_SHIFT us, 0 = none */
};

/* When the program reports (its control registers). */
struct ccsw_std_reporting {
	__u64 idle_report_us;  /* Control.idle_report_us */
	__u32 window_use_pct;  /* Control.window_use_pct */
	__u32 per_ack;         /* Control.per_ack != 0 */
};

/* The program's last three report registers, in MEASURE order: Report.extra_acked and the
 * ACK epoch (Report.agg_epoch_us, agg_epoch_acked, which no report resets). The program's local
 * agg_expected is not kept: the fold recomputes it on every ACK that reads it. */
struct ccsw_std_aggregation {
	__u64 extra_acked;
	__u64 epoch_us;
	__u64 epoch_acked;
};

/* A delivery-rate sample as measured: `bytes` delivered over `interval_us`. */
struct ccsw_std_rate_sample {
	__u64 bytes;
	__u64 interval_us; /* 0: no sample */
};

/* A flow's fold whose rate samples are pairs (ccsw_std_fold_sampled): regs.rate stays 0
 * until a report fills it from the fastest sample. */
struct ccsw_std_sampled_fold {
	struct ccsw_std_fold fold;
	struct ccsw_std_rate_sample fastest; /* since the last report */
};

_Static_assert(sizeof(struct ccsw_std_regs) == 72, "std regs");
_Static_assert(sizeof(struct ccsw_std_fold) == 88, "std fold");
_Static_assert(sizeof(struct ccsw_std_ack) == 56, "std ack");
_Static_assert(sizeof(struct ccsw_std_reporting) == 16, "std reporting");
_Static_assert(sizeof(struct ccsw_std_rate_sample) == 16, "std rate sample");
_Static_assert(sizeof(struct ccsw_std_sampled_fold) == 104, "std sampled fold");
_Static_assert(sizeof(struct ccsw_std_aggregation) == 24, "std aggregation");

/* ccswitch_protocol::standard::AGG_RATE_UNIT_US, as a shift, and AGG_EPOCH_MAX_US. */
#define CCSW_STD_AGG_RATE_UNIT_SHIFT 20
#define CCSW_STD_AGG_EPOCH_MAX_US (1ULL << 30)

static __always_inline void ccsw_std_reset(struct ccsw_std_regs *r)
{
	__builtin_memset(r, 0, sizeof(*r));
	r->minrtt = CCSW_STD_NO_RTT_SAMPLE_US;
}

/* The registers belong to the program started at `start_us`: if they do not, they restart
 * with it (reset, Micros counting from its start). Returns true when they restarted. */
static __always_inline bool ccsw_std_restart(struct ccsw_std_fold *s, __u64 start_us)
{
	if (s->start_us == start_us)
		return false;
	ccsw_std_reset(&s->regs);
	s->micros_zero_us = start_us;
	s->start_us = start_us;
	return true;
}

/* One ACK through the program started at `start_us`, reporting as `m` says. Returns true
 * when it reports: the registers then hold the report, and the caller resets them
 * (ccsw_std_reset) once copied. */
static __always_inline bool ccsw_std_fold_ack(struct ccsw_std_fold *s, const struct ccsw_std_ack *a,
					      __u64 start_us, const struct ccsw_std_reporting *m)
{
	struct ccsw_std_regs *r = &s->regs;
	__u64 rtt = a->rtt_us ? a->rtt_us : CCSW_STD_RTT_INFINITY;
	__u64 micros;
	bool binds;

	ccsw_std_restart(s, start_us);
	r->acked += a->bytes_acked;
	r->lost += a->lost_packets;
	r->timeout = a->was_timeout ? 1 : 0;
	r->ecn += a->ecn_packets;
	r->rtt = rtt;
	if (rtt < r->minrtt)
		r->minrtt = rtt;
	r->inflight = a->bytes_in_flight;
	if (a->rate_incoming > r->rate)
		r->rate = a->rate_incoming;
	r->now = a->now_us;
	micros = a->now_us - s->micros_zero_us;
	binds = r->ecn > 0 || a->pacing_rate > 0 ||
		((__u64)a->bytes_in_flight + a->bytes_acked) * 100 > (__u64)a->cwnd_bytes * m->window_use_pct;
	if (r->timeout || r->lost > 0 || m->per_ack || (micros > rtt && binds) || micros > m->idle_report_us) {
		s->micros_zero_us = a->now_us;
		return true;
	}
	return false;
}

/* The program's ACK-aggregation clauses, for an ACK that acknowledged bytes under a rate
 * (a->agg_rate, a->bytes_acked not 0): the epoch restarts once it has acknowledged no more
 * than the rate delivers over it (its time capped at CCSW_STD_AGG_EPOCH_MAX_US, the
 * program's min), and the excess, at most Cwnd, raises Report.extra_acked. The state restarts
 * (zeroed) with the program, and extra_acked with each report. */
static __always_inline void ccsw_std_fold_aggregation(struct ccsw_std_aggregation *g, const struct ccsw_std_ack *a)
{
	__u64 elapsed = a->now_us - g->epoch_us;
	__u64 expected, extra;

	if (elapsed > CCSW_STD_AGG_EPOCH_MAX_US)
		elapsed = CCSW_STD_AGG_EPOCH_MAX_US;
	expected = ((__u64)a->agg_rate * elapsed) >> CCSW_STD_AGG_RATE_UNIT_SHIFT;
	if (g->epoch_acked <= expected) {
		g->epoch_us = a->now_us;
		g->epoch_acked = 0;
		expected = 0;
	}
	g->epoch_acked += a->bytes_acked;
	extra = g->epoch_acked - expected;
	if (extra > a->cwnd_bytes)
		extra = a->cwnd_bytes;
	if (extra > g->extra_acked)
		g->extra_acked = extra;
}

#define CCSW_STD_USEC_PER_SEC 1000000ULL

/* Keeps the fastest sample, bytes over interval_us, without dividing: a/b > c/d as
 * a*d > c*b, exact while both byte counts are below 2^32 (intervals are u32), which covers
 * every real sample; larger ones take the divisions. */
static __always_inline void ccsw_std_max_rate(struct ccsw_std_rate_sample *m, __u64 bytes, __u32 interval_us)
{
	if (!interval_us || !bytes)
		return;
	if (!m->interval_us) {
		m->bytes = bytes;
		m->interval_us = interval_us;
		return;
	}
	if ((bytes | m->bytes) >> 32) {
		if (bytes * CCSW_STD_USEC_PER_SEC / interval_us <= m->bytes * CCSW_STD_USEC_PER_SEC / m->interval_us)
			return;
	} else if (bytes * m->interval_us <= m->bytes * interval_us) {
		return;
	}
	m->bytes = bytes;
	m->interval_us = interval_us;
}

/* The registers and the fastest sample start over (after a report has been copied). */
static __always_inline void ccsw_std_reset_sampled(struct ccsw_std_sampled_fold *s)
{
	ccsw_std_reset(&s->fold.regs);
	s->fastest.bytes = 0;
	s->fastest.interval_us = 0;
}

/* ccsw_std_fold_ack for an ACK whose incoming rate is the sample `bytes` over `interval_us`
 * (0: none; a->rate_incoming is 0): no division unless it reports, when regs.rate gets the
 * fastest sample's rate in bytes/s. The caller resets with ccsw_std_reset_sampled. */
static __always_inline bool ccsw_std_fold_sampled(struct ccsw_std_sampled_fold *s, const struct ccsw_std_ack *a,
						  __u64 bytes, __u32 interval_us, __u64 start_us,
						  const struct ccsw_std_reporting *m)
{
	if (s->fold.start_us != start_us) {
		s->fastest.bytes = 0;
		s->fastest.interval_us = 0;
	}
	ccsw_std_max_rate(&s->fastest, bytes, interval_us);
	if (!ccsw_std_fold_ack(&s->fold, a, start_us, m))
		return false;
	if (s->fastest.interval_us)
		s->fold.regs.rate = s->fastest.bytes * CCSW_STD_USEC_PER_SEC / s->fastest.interval_us;
	return true;
}

#endif
