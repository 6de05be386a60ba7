/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * ccswitch kernel datapath: layouts shared by the BPF program
 * (kernel.bpf.c) and its Rust loader (src/abi.rs mirrors every struct
 * here with #[repr(C)] and asserts the sizes at compile time).
 *
 * Only fixed-width types; every struct is padded explicitly so that the
 * C and Rust layouts are identical without relying on implicit padding.
 * All multi-byte fields are in host byte order (ports included).
 */
#ifndef CCSWITCH_KERNEL_H
#define CCSWITCH_KERNEL_H

#ifndef __VMLINUX_H__
#include <stdint.h>
typedef uint8_t __u8;
typedef uint16_t __u16;
typedef uint32_t __u32;
typedef uint64_t __u64;
typedef int32_t __s32;
#endif

#include "std_fold.bpf.h"

/* Event kinds: the first 4 bytes of every ring-buffer record. */
#define CCSW_EV_CREATE 1
#define CCSW_EV_ACK 2
#define CCSW_EV_CLOSE 3
#define CCSW_EV_REPORT 4
#define CCSW_EV_VM_REPORT 5

/* struct ccsw_kernel_directive_slot.fold: the flow runs the agent's standard program, and
 * this program folds its ACKs and emits only its reports. */
#define CCSW_FOLD_OFF 0
#define CCSW_FOLD_PER_RTT 1 /* at once on loss or timeout; per RTT while the window binds, else per fold_idle_us */
#define CCSW_FOLD_PER_ACK 2 /* a report on every ACK */
/* Any other program, run by the interpreter (vm.bpf.h) on the registers of
 * struct ccsw_vm_flow directive.vm_slot. */
#define CCSW_FOLD_VM 3

/* Records travel in two ring buffers. The urgent lane (a flow created or
 * closed, loss, timeout, ECN) wakes the shim at once; the routine lane wakes
 * it only when this much is waiting there or its oldest record has waited
 * --report-delay-us, and is otherwise read whenever the shim is awake. Every
 * record's first 16 bytes are its kind, flow id and CLOCK_MONOTONIC time
 * (ns): the shim keeps each flow's records in time order across the lanes. */
#define CCSW_WAKE_BYTES (64u << 10)

/* Fallback algorithms (struct ccsw_kernel_config.fallback). */
#define CCSW_FALLBACK_RENO 0
#define CCSW_FALLBACK_CUBIC 1

/* struct ccsw_kernel_ack_event.flags */
#define CCSW_ACK_F_RTT_VALID (1u << 0)   /* rtt_sample_us holds a sample   */
#define CCSW_ACK_F_APP_LIMITED (1u << 1) /* rate sample was app-limited    */
#define CCSW_ACK_F_FALLBACK (1u << 2)    /* cwnd set by fallback algorithm */
#define CCSW_ACK_F_ECE (1u << 3)         /* this ACK carried ECE           */
#define CCSW_ACK_F_RATE_VALID (1u << 4)  /* rate_incoming/outgoing valid   */

/* Emitted by init(): a flow now uses ccswitch. */
struct ccsw_create_event {
	__u32 kind;            /* CCSW_EV_CREATE */
	__u32 flow_id;
	__u64 ts_ns;           /* bpf_ktime_get_ns (CLOCK_MONOTONIC) */
	__u16 family;          /* AF_INET (2) or AF_INET6 (10) */
	__u16 src_port;        /* local port, host order */
	__u16 dst_port;        /* remote port, host order */
	__u16 _pad0;
	__u8 src_addr[16];     /* local address; IPv4 uses bytes 0..3 */
	__u8 dst_addr[16];     /* remote address; IPv4 uses bytes 0..3 */
	__u32 mss;             /* bytes (tp->mss_cache) */
	__u32 init_cwnd_bytes; /* snd_cwnd * mss at init */
	__u32 handshake_rtt_us; /* tcp_min_rtt at init: the handshake's RTT sample; 0 if none */
	__u32 _pad1;
};

/* Emitted by cong_control() on every ACK. */
struct ccsw_kernel_ack_event {
	__u32 kind;                /* CCSW_EV_ACK */
	__u32 flow_id;
	__u64 ts_ns;               /* when the kernel took the ACK (tcp_clock_cache, CLOCK_MONOTONIC) */
	__u32 bytes_acked;         /* rs->acked_sacked * mss: newly delivered (cum. ACK + SACK) */
	__u32 packets_acked;       /* rs->acked_sacked */
	__u32 bytes_misordered;    /* packets_misordered * mss */
	__u32 packets_misordered;  /* tp->sacked_out: SACKed, not yet cumulatively ACKed (level) */
	__u32 ecn_bytes;           /* ecn_packets * mss */
	__u32 ecn_packets;         /* acked_sacked if the ACK carried ECE, else 0 */
	__u32 lost_pkts_sample;    /* rs->losses: packets newly marked lost by this ACK */
	__u32 was_timeout;         /* 1 if the flow entered TCP_CA_Loss (RTO) since the last ACK event */
	__u32 rtt_sample_us;       /* rs->rtt_us if >= 0 (see CCSW_ACK_F_RTT_VALID) */
	__u32 srtt_us;             /* smoothed RTT, us (tp->srtt_us >> 3) */
	__u64 rate_incoming;       /* bytes/s: delivered*mss / rcv_interval_us (0 = no sample) */
	__u64 rate_outgoing;       /* bytes/s: delivered*mss / snd_interval_us (0 = no sample) */
	__u32 bytes_in_flight;     /* packets_in_flight * mss */
	__u32 packets_in_flight;   /* packets_out - sacked_out - lost_out + retrans_out */
	__u32 bytes_pending;       /* write_seq - snd_nxt: queued by the app, not yet sent */
	__u32 snd_cwnd_bytes;      /* snd_cwnd * mss after this ACK was processed */
	__u32 mss;                 /* bytes */
	__u32 ca_state;            /* icsk_ca_state (TCP_CA_Open=0 .. TCP_CA_Loss=4) */
	__u32 flags;               /* CCSW_ACK_F_* */
	__u32 ssthresh;            /* packets */
};

/* Emitted by release(): the flow left ccswitch (closed or switched CC). */
struct ccsw_close_event {
	__u32 kind;    /* CCSW_EV_CLOSE */
	__u32 flow_id;
	__u64 ts_ns;
};

/* A folded flow's part of its state (struct ccsw_flow_state in kernel.bpf.c): the standard
 * program's fold (std_fold.bpf.h, its rate kept as the fastest sample's pair so that no ACK
 * divides), its loss and growth clauses, and, apart (the third cache line, read only by a
 * flow in slow start, a step counted across reports, a loss or a restart), the program's
 * Control.chain_from, chain_acked and ss_high (see growth_view), and its ACK epoch and
 * Report.extra_acked (read only by a flow that measures ACK aggregation, and a restart). */
struct ccsw_fold_state {
	struct ccsw_std_sampled_fold std;
	__u32 held_cwnd_bytes; /* the window the program's loss or growth clause set, 0 = none ... */
	__u32 held_cwnd_seq;   /* ... in force while the directive's cwnd_seq is still this */
	__u64 chain_reported_bytes; /* Control.chain_acked less this report's Report.acked */
	__u32 chain_from_us;   /* Control.chain_from (truncated as grow_from_us): 0 the start, 1 none */
	__u32 ss_high_bytes;   /* Control.ss_high */
	__u64 growth_start_us; /* the fold_start_us these and agg belong to */
	struct ccsw_std_aggregation agg;
};

/* Emitted instead of ACK events while a flow is folded: one report of the
 * standard program. */
struct ccsw_report_event {
	__u32 kind;            /* CCSW_EV_REPORT */
	__u32 flow_id;
	__u64 ts_ns;
	__u64 start_us;        /* the fold_start_us it was folded under */
	struct ccsw_std_regs regs;
	__u32 snd_cwnd_bytes;  /* after this ACK */
	__u32 reductions;      /* window reductions the sender's TCP entered since the flow began << 1 | in one now */
	struct ccsw_std_aggregation agg; /* the report registers regs does not hold */
};

/* A slot of the directives array, written by the shim only (see
 * shim_channel.bpf.h: it stores the fields in this order, flow_id last).
 * Padded to one cache line: the array is mmapable, so its values start on a
 * page and every slot is one whole line, which an ACK at 10k flows finds
 * cold (56 bytes packed put six slots in eight across two lines). */
struct ccsw_kernel_directive_slot {
	__u32 flow_id;         /* owner; 0 = free */
	__u32 cwnd_bytes;      /* 0 = no cwnd directive */
	__u8 fold;             /* CCSW_FOLD_* */
	__u8 growth;           /* folded: CCSW_GROWTH_*, what the grow_* fields hold */
	__u16 fold_window_pct; /* CCSW_FOLD_PER_RTT: the program's Control.window_use_pct (saturated: 65,535 % never binds) */
	union {
		__u32 vm_slot;  /* CCSW_FOLD_VM: the flow's entry of ccsw_vm_flows */
		__u32 agg_rate; /* folded: the program's Control.agg_rate (0 = none) */
	};
	__u64 pacing_rate;     /* bytes/s, 0 = no pacing directive */
	__u64 fold_start_us;   /* when the standard program (re)started: registers reset, Micros counts from here */
	union {
		__u32 grow_rate;           /* CCSW_GROWTH_STEP: Control.grow_rate, bytes of window per CCSW_GROW_RATE_UNIT acknowledged past the step */
		__u32 grow_not_before_us;  /* CCSW_GROWTH_STEP_AT: Control.grow_not_before's low 32 bits (the step has no rate then) */
	};
	__u32 loss_cwnd_bytes; /* folded: the program's Control.loss_cwnd, the window an ACK that reveals a loss sets (0 = none) */
	__u32 fold_idle_us;    /* CCSW_FOLD_PER_RTT: the program's Control.idle_report_us (at most 2^32-1: 71 min) */
	__u32 cwnd_seq;        /* moves with every window the shim writes: a loss's window holds until it does (stored after the window) */
	/* folded: the program's growth clauses. CCSW_GROWTH_STEP: Control.grow_cwnd (0 = none),
	 * grow_after (and grow_rate above); CCSW_GROWTH_SLOW_START: Control.ss_cwnd, and
	 * grow_after, which holds slow start's threshold then. Either counted from
	 * Control.grow_from (its low 32 bits: compared with those of the fold's Micros origin). */
	__u32 grow_cwnd_bytes;
	__u32 grow_after_bytes;
	__u32 grow_from_us;
	__u32 grow_loss_cwnd_bytes; /* CCSW_GROWTH_STEP: Control.grow_loss_cwnd, a loss's window once the step is earned (0 = loss_cwnd_bytes) */
};

/* struct ccsw_kernel_directive_slot.growth: the agent pre-sets a step of growth or slow
 * start, never both (ccswitch_ccp's fold_mode refuses to fold a flow that has both). */
#define CCSW_GROWTH_STEP 0
#define CCSW_GROWTH_SLOW_START 1
/* A step without a rate past it that applies only on an ACK later than grow_not_before_us
 * (Control.grow_not_before), compared by the low 32 bits' signed difference: exact while the
 * ACK comes within 35 minutes of that time, and the agent sets it from its latest report. */
#define CCSW_GROWTH_STEP_AT 2
/* ccswitch_protocol::standard::GROW_RATE_UNIT, as a shift. */
#define CCSW_GROW_RATE_SHIFT 30

/* Context of the fold's test program (BPF_PROG_TEST_RUN): one ACK through
 * the same fold as cong_control, under `directive` (its fold, fold_start_us
 * and fold parameters); state and report come back in it. */
struct ccsw_kernel_fold_test {
	struct ccsw_fold_state state;
	struct ccsw_std_ack ack;       /* rate_incoming 0: the rate comes as `sample` */
	struct ccsw_std_rate_sample sample; /* the ACK's delivery-rate sample */
	struct ccsw_kernel_directive_slot directive;
	__u32 reported;        /* out: 1 if this ACK reported */
	__u32 cwnd_set;        /* out: the window this ACK's loss or growth clause set, 0 = none */
	struct ccsw_std_regs report; /* out: the report */
	__u32 cwnd_bytes;      /* out: the window cong_control applies after this ACK */
	__u32 _pad1;
	struct ccsw_std_aggregation report_agg; /* out: the report's last three registers */
};

/* A directive's window in whole packets, cached per flow (directive_cwnd_pkts). */
struct ccsw_cwnd_pkts {
	__u32 bytes;  /* the window last converted */
	__u32 mss;    /* with this MSS */
	__u32 pkts;   /* bytes / mss */
};

/* One conversion of directive_cwnd_pkts, for the test that checks it against
 * a division (BPF_PROG_TEST_RUN). */
struct ccsw_kernel_cwnd_pkts_test {
	struct ccsw_cwnd_pkts cache;
	__u32 bytes;
	__u32 mss;
	__u32 pkts;    /* out */
};

/* ---- The bounded interpreter (vm.bpf.h): CCP programs other than the
 * standard one, with libccp's semantics (the shim's Rust interpreter,
 * datapaths/ccp/src/program/exec.rs, is the reference). A program that
 * needs more than these limits runs in the shim instead. */
#define CCSW_VM_MAX_INSTRS 192
#define CCSW_VM_MAX_EXPRS 32
#define CCSW_VM_REPORT_REGS 32
#define CCSW_VM_CONTROL_REGS 32
#define CCSW_VM_TMP_REGS 8      /* libccp MAX_TMP_REG */
#define CCSW_VM_LOCAL_REGS 8    /* libccp MAX_LOCAL_REG */
#define CCSW_VM_IMPLICIT_REGS 8 /* 6 used (libccp's), padded to a power of two */
#define CCSW_VM_PRIMITIVES 16   /* 15 used (libccp's ACK_* and FLOW_*) */
#define CCSW_VM_MAX_DEFAULTS (CCSW_VM_REPORT_REGS + CCSW_VM_CONTROL_REGS)
#define CCSW_VM_PROGRAMS 16     /* installed programs (map entries) */
#define CCSW_VM_FLOWS 4096      /* default entries of ccsw_vm_flows (the loader sizes it) */

/* Register kinds: libccp's wire type codes (ccp_priv.h). */
#define CCSW_VM_CONTROL 0
#define CCSW_VM_IMMEDIATE 1
#define CCSW_VM_IMPLICIT 2
#define CCSW_VM_LOCAL 3
#define CCSW_VM_PRIMITIVE 4
#define CCSW_VM_VOLATILE_REPORT 5
#define CCSW_VM_REPORT 6
#define CCSW_VM_TMP 7
#define CCSW_VM_VOLATILE_CONTROL 8

/* Implicit registers (libccp EXPR_FLAG_REG ... RATE_REG). */
#define CCSW_VM_EXPR_FLAG 0
#define CCSW_VM_SHOULD_FALLTHROUGH 1
#define CCSW_VM_SHOULD_REPORT 2
#define CCSW_VM_MICROS 3
#define CCSW_VM_CWND 4
#define CCSW_VM_RATE 5

/* Evaluation faults (struct ccsw_vm_test.error), as the reference's ExecError. */
#define CCSW_VM_OK 0
#define CCSW_VM_ADD_OVERFLOW 1
#define CCSW_VM_SUB_UNDERFLOW 2
#define CCSW_VM_MUL_OVERFLOW 3
#define CCSW_VM_DIV_BY_ZERO 4

/* Operand: a register kind and its index, or the immediate itself. */
struct ccsw_vm_instr {
	__u8 op;              /* libccp's op code (Op in the reference) */
	__u8 res_kind;
	__u8 left_kind;
	__u8 right_kind;
	__u32 res;
	__u32 left;
	__u32 right;
};

struct ccsw_vm_expr {
	__u16 cond_start;
	__u16 cond_end;       /* exclusive */
	__u16 body_start;
	__u16 body_end;
};

struct ccsw_vm_default {
	__u32 kind;           /* a report or control kind */
	__u32 index;
	__u64 value;
};

/* One installed program (map ccsw_vm_programs, by slot). */
struct ccsw_vm_program {
	__u32 uid;
	__u16 n_instrs;
	__u16 n_exprs;
	__u16 n_defaults;
	__u16 n_report_fields;
	__u32 _pad0;
	struct ccsw_vm_instr instrs[CCSW_VM_MAX_INSTRS];
	struct ccsw_vm_expr exprs[CCSW_VM_MAX_EXPRS];
	struct ccsw_vm_default defaults[CCSW_VM_MAX_DEFAULTS];
};

/* One flow's registers (libccp struct register_file). */
struct ccsw_vm_regs {
	__u64 report[CCSW_VM_REPORT_REGS];
	__u64 control[CCSW_VM_CONTROL_REGS];
	__u64 tmp[CCSW_VM_TMP_REGS];
	__u64 local[CCSW_VM_LOCAL_REGS];
	__u64 implicit[CCSW_VM_IMPLICIT_REGS];
	__u64 micros_zero_us; /* clock reading at which Micros was 0 */
};

/* One flow's program state for the interpreter (BPF_F_MMAPABLE array
 * ccsw_vm_flows). The shim starts a program by writing the bank BPF is not
 * evaluating (registers as its own interpreter has them after the start and
 * the agent's updates), then flipping `bank`: an evaluation in progress
 * finishes on the old bank, the next one runs the new. The agent's control
 * updates are plain stores into the running bank's registers; its window and
 * rate come through the directive and apply once, on the next ACK, each time
 * the shim flags them in `window_parts`. */
struct ccsw_vm_bank {
	__u32 program;         /* slot in ccsw_vm_programs */
	__u32 _pad0;
	__u64 start_us;        /* the program start these registers belong to */
	struct ccsw_vm_regs regs;
};

/* struct ccsw_vm_flow.window_parts: what of the directive the agent set. */
#define CCSW_VM_SET_CWND 1
#define CCSW_VM_SET_RATE 2

struct ccsw_vm_flow {
	__u32 flow_id;         /* owner; 0 = free */
	__u32 bank;            /* the bank BPF evaluates (0 or 1) */
	__u32 window_parts;    /* CCSW_VM_SET_*: the shim ORs them in after writing the directive, BPF takes them atomically */
	__u32 _pad0;
	__u64 rate;            /* the program's latest rate, bytes/s (0: not paced) */
	struct ccsw_vm_bank banks[2];
};

/* A report of a program the interpreter runs: its report registers. */
struct ccsw_vm_report_event {
	__u32 kind;            /* CCSW_EV_VM_REPORT */
	__u32 flow_id;
	__u64 ts_ns;
	__u64 start_us;        /* the bank's start_us: reports of an earlier start are stale */
	__u32 program_uid;
	__u32 n_fields;
	__u32 snd_cwnd_bytes;  /* after this ACK */
	__u32 _pad0;
	__u64 fields[CCSW_VM_REPORT_REGS];
};

/* The interpreter's test entry (map ccsw_vm_scratch, run by ccsw_vm_test):
 * one evaluation of the program in slot `slot`, as on an ACK; registers and
 * outcome come back in it. */
struct ccsw_vm_test {
	struct ccsw_vm_regs regs;
	__u64 prims[CCSW_VM_PRIMITIVES]; /* by libccp's primitive code */
	__u64 now_us;
	__u64 cwnd_bytes;     /* in: the flow's window; out: the program's */
	__u64 rate;           /* in: the flow's rate; out: the program's */
	__u32 slot;
	__u32 start;          /* in: 1 = start the program first (defaults, Micros) */
	__u32 error;          /* out: CCSW_VM_* fault, or CCSW_VM_OK */
	__u32 reported;       /* out: 1 when the program reported */
	__u64 report[CCSW_VM_REPORT_REGS]; /* out: the report's fields */
};

/* The single entry of the config array map. */
struct ccsw_kernel_config {
	__u64 agent_valid_until_ns; /* CLOCK_MONOTONIC deadline; past it => fallback */
	/* The shim reads the routine lane by then of its own accord (CLOCK_MONOTONIC; 0: no
	 * promise): until then no routine record is due a wake-up for its age. */
	__u64 routine_read_by_ns;
	__u32 fallback;             /* CCSW_FALLBACK_* for flows created from now on */
	__u32 _pad0;
};

/* Per-CPU counters (stats map, 1 entry, PERCPU_ARRAY). */
struct ccsw_kernel_cpu_stats {
	__u64 events;          /* ring-buffer records submitted */
	__u64 drops;           /* records lost because the ring buffer was full */
	__u64 flows_created;
	__u64 flows_closed;
	__u64 acks_directive;  /* ACKs on which a directive set cwnd */
	__u64 acks_fallback;   /* ACKs on which the fallback algorithm ran */
	__u64 acks_folded;     /* ACKs folded here instead of sent to the shim */
	__u64 reports;         /* reports of folded flows */
	/* Of acks_fallback: the agent had not directed the flow yet (a new flow's
	 * first round trip), or the agent's deadline had passed. The rest had been
	 * directed before and had no directive now (removed, or its slot lost). */
	__u64 acks_fallback_awaiting;
	__u64 acks_fallback_agent_late;
	__u64 acks_vm;         /* ACKs the interpreter evaluated a program on */
	__u64 vm_faults;       /* of them, evaluations a fault aborted */
	/* Flows, counted on a change of hands (never per ACK): a flow's first
	 * directive; a directed flow falling back because the agent's deadline
	 * passed, or because its directive was gone; a fallen-back flow directed
	 * again. */
	__u64 flows_directed;
	__u64 flows_fell_back_agent_late;
	__u64 flows_fell_back_no_directive;
	__u64 flows_rejoined;
	/* Wake-ups the routine lane's timer forced (at most one per --report-delay-us). */
	__u64 routine_timer_wakeups;
};

/* The Rust mirror (src/abi.rs) asserts the same sizes. */
_Static_assert(sizeof(struct ccsw_create_event) == 72, "create event layout");
_Static_assert(sizeof(struct ccsw_kernel_ack_event) == 104, "ack event layout");
_Static_assert(sizeof(struct ccsw_close_event) == 16, "close event layout");
_Static_assert(sizeof(struct ccsw_report_event) == 128, "report event layout");
_Static_assert(sizeof(struct ccsw_fold_state) == 160, "fold state layout");
_Static_assert(sizeof(struct ccsw_kernel_fold_test) == 408, "fold test layout");
_Static_assert(sizeof(struct ccsw_kernel_cwnd_pkts_test) == 24, "packet conversion test layout");
_Static_assert(sizeof(struct ccsw_kernel_directive_slot) == 64, "a directive slot is one cache line");
_Static_assert(__builtin_offsetof(struct ccsw_kernel_directive_slot, flow_id) == 0, "a directive slot's owner is its first word (shim_channel.bpf.h)");
_Static_assert(sizeof(struct ccsw_vm_instr) == 16, "vm instruction layout");
_Static_assert(sizeof(struct ccsw_vm_program) == 16 + 16 * CCSW_VM_MAX_INSTRS + 8 * CCSW_VM_MAX_EXPRS + 16 * CCSW_VM_MAX_DEFAULTS, "vm program layout");
_Static_assert(sizeof(struct ccsw_vm_regs) == 8 * (CCSW_VM_REPORT_REGS + CCSW_VM_CONTROL_REGS + CCSW_VM_TMP_REGS + CCSW_VM_LOCAL_REGS + CCSW_VM_IMPLICIT_REGS + 1), "vm registers layout");
_Static_assert(sizeof(struct ccsw_vm_test) == sizeof(struct ccsw_vm_regs) + 8 * CCSW_VM_PRIMITIVES + 24 + 16 + 8 * CCSW_VM_REPORT_REGS, "vm test layout");
_Static_assert(sizeof(struct ccsw_vm_flow) == 24 + 2 * (16 + sizeof(struct ccsw_vm_regs)), "vm flow layout");
_Static_assert(sizeof(struct ccsw_vm_report_event) == 40 + 8 * CCSW_VM_REPORT_REGS, "vm report layout");
_Static_assert(sizeof(struct ccsw_kernel_config) == 24, "config layout");
_Static_assert(sizeof(struct ccsw_kernel_cpu_stats) == 136, "stats layout");

#endif /* CCSWITCH_KERNEL_H */
