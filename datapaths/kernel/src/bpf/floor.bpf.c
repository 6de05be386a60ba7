// SPDX-License-Identifier: GPL-2.0-only
/*
 * ccsw_floor: the least a BPF congestion control can do on the hook ccswitch's
 * own program uses, as a floor for what `make bench` reports per ACK. Its
 * cong_control runs on every ACK, as ccswitch's does, and hands the window to
 * the kernel's Reno (kfuncs); on the ACKs of a window reduction (CWR,
 * Recovery), for which the kernel skips its own reduction under cong_control,
 * it holds the window at ssthresh. Nothing else: no maps, no records, no
 * agent. Its BPF time per ACK, measured in the same run and on the same path
 * as ccswitch's, is what this machine charges any such program: the cold
 * code and socket lines, the trampoline's clock reads (run_time_ns counts from
 * the program's entry to its exit).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;

#define TCP_CONG_NON_RESTRICTED 0x1

SEC("struct_ops")
void BPF_PROG(ccsw_floor_ack, struct sock *sk, __u32 ack, int flag, const struct rate_sample *rs)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	__u8 state = ((struct inet_connection_sock *)sk)->icsk_ca_state;

	if (state == TCP_CA_CWR || state == TCP_CA_Recovery) {
		if (tp->snd_cwnd > tp->snd_ssthresh)
			tp->snd_cwnd = tp->snd_ssthresh > 2 ? tp->snd_ssthresh : 2;
		return;
	}
	tcp_reno_cong_avoid(sk, ack, rs->acked_sacked);
}

SEC("struct_ops")
__u32 BPF_PROG(ccsw_floor_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(ccsw_floor_undo, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

/* Non-restricted, as ccswitch (see kernel.bpf.c): any namespace may make it its default. */
SEC(".struct_ops.link")
struct tcp_congestion_ops ccsw_floor = {
	.ssthresh = (void *)ccsw_floor_ssthresh,
	.cong_control = (void *)ccsw_floor_ack,
	.undo_cwnd = (void *)ccsw_floor_undo,
	.flags = TCP_CONG_NON_RESTRICTED,
	.name = "ccsw_floor",
};
