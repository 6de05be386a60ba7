/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * The bounded interpreter of CCP datapath programs, for programs other than
 * the standard one (which kernel.bpf.c folds directly). Included by
 * kernel.bpf.c; layouts and limits in kernel.h.
 *
 * Semantics are libccp's machine.c, as the shim's Rust interpreter
 * (datapaths/ccp/src/program/exec.rs, the reference) implements them: u64
 * arithmetic; Add overflow, Sub underflow, Mul overflow (the wrapped product
 * below the left operand with a non-zero right one) and division by zero
 * abort the evaluation, keeping what was written before; Ewma wraps as C
 * does; a zero RTT sample reads as infinity. Expressions run in order: a
 * true condition runs its body, and the walk stops after an expression whose
 * flag is still set unless __shouldContinue is.
 *
 * The walk is one bpf_loop over single steps (start an expression, run one
 * instruction, move to the body or the next expression), so the verifier
 * sees each step once whatever the program's length. Operand indices are
 * masked to their bank: the loader only installs programs whose indices fit
 * (vm.rs), and a mask keeps every access in bounds regardless.
 */
#ifndef CCSWITCH_VM_BPF_H
#define CCSWITCH_VM_BPF_H

/* libccp's "+infinity", what a program reads for a missing RTT sample. */
#define CCSW_VM_INFINITY 0xffffffffULL
/* Primitive code of Flow.rtt_sample_us. */
#define CCSW_VM_PRIM_RTT 13
/* Ewma weights are tenths (libccp CCP_FRAC_DENOM). */
#define CCSW_VM_EWMA_DENOM 10
/* Most steps one evaluation can take: each expression's two ranges, each up
 * to every instruction, plus three transitions. */
#define CCSW_VM_MAX_STEPS (CCSW_VM_MAX_EXPRS * (2 * CCSW_VM_MAX_INSTRS + 3))

/* libccp op codes (ccp_priv.h). */
enum {
	VM_ADD, VM_BIND, VM_DEF, VM_DIV, VM_EQUIV, VM_EWMA, VM_GT, VM_IF, VM_LT,
	VM_MAX, VM_MAX_WRAP, VM_MIN, VM_MUL, VM_NOT_IF, VM_SUB,
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CCSW_VM_PROGRAMS);
	__type(key, __u32);
	__type(value, struct ccsw_vm_program);
} ccsw_vm_programs SEC(".maps");

/* Flows running a program here: their registers (struct ccsw_vm_flow). */
struct {
	CCSW_SHIM_ARRAY(struct ccsw_vm_flow, CCSW_VM_FLOWS); /* the shim writes starts and control updates directly */
} ccsw_vm_flows SEC(".maps");

struct vm_run {
	const struct ccsw_vm_program *p;
	struct ccsw_vm_regs *r;
	const __u64 *prims;   /* CCSW_VM_PRIMITIVES values, by code */
	__u64 now_us;
	__u32 expr;
	__u32 pc;
	__u32 end;
	__u32 in_body;        /* the range running is the expression's body */
	__u32 started;        /* the expression's condition range has been entered */
	__u32 error;
};

static __always_inline __u64 vm_read(const struct vm_run *x, __u32 kind, __u32 v)
{
	struct ccsw_vm_regs *r = x->r;
	__u64 p;

	switch (kind) {
	case CCSW_VM_IMMEDIATE:
		return v;
	case CCSW_VM_IMPLICIT:
		return r->implicit[v & (CCSW_VM_IMPLICIT_REGS - 1)];
	case CCSW_VM_LOCAL:
		return r->local[v & (CCSW_VM_LOCAL_REGS - 1)];
	case CCSW_VM_PRIMITIVE:
		p = x->prims[v & (CCSW_VM_PRIMITIVES - 1)];
		return v == CCSW_VM_PRIM_RTT && p == 0 ? CCSW_VM_INFINITY : p;
	case CCSW_VM_VOLATILE_REPORT:
	case CCSW_VM_REPORT:
		return r->report[v & (CCSW_VM_REPORT_REGS - 1)];
	case CCSW_VM_TMP:
		return r->tmp[v & (CCSW_VM_TMP_REGS - 1)];
	case CCSW_VM_CONTROL:
	case CCSW_VM_VOLATILE_CONTROL:
		return r->control[v & (CCSW_VM_CONTROL_REGS - 1)];
	}
	return 0;
}

/* Writing Micros moves its origin so that it reads `val` now. Immediates and
 * primitives are read-only (the loader refuses programs writing them). */
static __always_inline void vm_write(struct ccsw_vm_regs *r, __u32 kind, __u32 v, __u64 val,
				     __u64 now_us)
{
	switch (kind) {
	case CCSW_VM_IMPLICIT:
		if (v == CCSW_VM_MICROS)
			r->micros_zero_us = now_us - val;
		r->implicit[v & (CCSW_VM_IMPLICIT_REGS - 1)] = val;
		break;
	case CCSW_VM_LOCAL:
		r->local[v & (CCSW_VM_LOCAL_REGS - 1)] = val;
		break;
	case CCSW_VM_VOLATILE_REPORT:
	case CCSW_VM_REPORT:
		r->report[v & (CCSW_VM_REPORT_REGS - 1)] = val;
		break;
	case CCSW_VM_TMP:
		r->tmp[v & (CCSW_VM_TMP_REGS - 1)] = val;
		break;
	case CCSW_VM_CONTROL:
	case CCSW_VM_VOLATILE_CONTROL:
		r->control[v & (CCSW_VM_CONTROL_REGS - 1)] = val;
		break;
	}
}

/* Distance walking up from l to r on the u32 circle (libccp dif32). */
static __always_inline __u32 vm_circular_distance(__u32 l, __u32 r)
{
	return r > l ? r - l : (0xffffffffU - l) + r;
}

static __always_inline int vm_exec(struct vm_run *x, const struct ccsw_vm_instr *in)
{
	__u64 a = vm_read(x, in->left_kind, in->left);
	__u64 b = vm_read(x, in->right_kind, in->right);
	__u64 res, old;
	__u32 a32, b32;

	switch (in->op) {
	case VM_ADD:
		res = a + b;
		if (res < a)
			return CCSW_VM_ADD_OVERFLOW;
		break;
	case VM_BIND:
		res = b;
		break;
	case VM_DIV:
		if (!b)
			return CCSW_VM_DIV_BY_ZERO;
		res = a / b;
		break;
	case VM_EQUIV:
		res = a == b;
		break;
	case VM_EWMA:
		old = vm_read(x, in->res_kind, in->res);
		res = old ? (a * old + (CCSW_VM_EWMA_DENOM - a) * b) / CCSW_VM_EWMA_DENOM : b;
		break;
	case VM_GT:
		res = a > b;
		break;
	case VM_IF:
		if (!a)
			return CCSW_VM_OK;
		res = b;
		break;
	case VM_LT:
		res = a < b;
		break;
	case VM_MAX:
		res = a > b ? a : b;
		break;
	case VM_MAX_WRAP:
		a32 = a;
		b32 = b;
		if (!a)
			res = b;
		else if (!b)
			res = a;
		else
			res = vm_circular_distance(b32, a32) < vm_circular_distance(a32, b32) ? a32 : b32;
		break;
	case VM_MIN:
		res = a < b ? a : b;
		break;
	case VM_MUL:
		res = a * b;
		if (res < a && b > 0)
			return CCSW_VM_MUL_OVERFLOW;
		break;
	case VM_NOT_IF:
		if (a)
			return CCSW_VM_OK;
		res = b;
		break;
	case VM_SUB:
		if (a < b)
			return CCSW_VM_SUB_UNDERFLOW;
		res = a - b;
		break;
	default: /* Def: applied at start and after reports, never executed */
		return CCSW_VM_OK;
	}
	vm_write(x->r, in->res_kind, in->res, res, x->now_us);
	return CCSW_VM_OK;
}

static long vm_step(__u64 i, void *ctx)
{
	struct vm_run *x = ctx;
	const struct ccsw_vm_program *p = x->p;
	const struct ccsw_vm_expr *e;
	__u64 *implicit = x->r->implicit;
	int err;

	if (x->expr >= p->n_exprs || x->expr >= CCSW_VM_MAX_EXPRS)
		return 1;
	e = &p->exprs[x->expr];
	if (!x->started) {
		x->started = 1;
		x->in_body = 0;
		x->pc = e->cond_start;
		x->end = e->cond_end;
		return 0;
	}
	if (x->pc < x->end) {
		if (x->pc >= CCSW_VM_MAX_INSTRS)
			return 1;
		err = vm_exec(x, &p->instrs[x->pc]);
		if (err) {
			x->error = err;
			return 1;
		}
		x->pc++;
		return 0;
	}
	if (!x->in_body && implicit[CCSW_VM_EXPR_FLAG]) {
		x->in_body = 1;
		x->pc = e->body_start;
		x->end = e->body_end;
		return 0;
	}
	if (implicit[CCSW_VM_EXPR_FLAG] && !implicit[CCSW_VM_SHOULD_FALLTHROUGH])
		return 1;
	x->expr++;
	x->started = 0;
	return 0;
}

struct vm_defaults {
	const struct ccsw_vm_program *p;
	struct ccsw_vm_regs *r;
	__u64 now_us;
	__u32 volatile_only;
};

static long vm_default_step(__u64 i, void *ctx)
{
	struct vm_defaults *c = ctx;
	const struct ccsw_vm_default *d;

	if (i >= c->p->n_defaults || i >= CCSW_VM_MAX_DEFAULTS)
		return 1;
	d = &c->p->defaults[i];
	if (!c->volatile_only || d->kind == CCSW_VM_VOLATILE_REPORT || d->kind == CCSW_VM_VOLATILE_CONTROL)
		vm_write(c->r, d->kind, d->index, d->value, c->now_us);
	return 0;
}

/* The program (re)starts at now_us: every register 0, then the defaults,
 * Micros counting from now (libccp reset_state, init_register_state,
 * reset_time). */
static __always_inline void vm_start(const struct ccsw_vm_program *p, struct ccsw_vm_regs *r,
				     __u64 now_us)
{
	struct vm_defaults c = { .p = p, .r = r, .now_us = now_us, .volatile_only = 0 };

	__builtin_memset(r, 0, sizeof(*r));
	bpf_loop(CCSW_VM_MAX_DEFAULTS, vm_default_step, &c, 0);
	r->micros_zero_us = now_us;
}

/* After a report: volatile registers back to their defaults. */
static __always_inline void vm_reset_volatile(const struct ccsw_vm_program *p,
					      struct ccsw_vm_regs *r)
{
	struct vm_defaults c = { .p = p, .r = r, .volatile_only = 1 };

	bpf_loop(CCSW_VM_MAX_DEFAULTS, vm_default_step, &c, 0);
}

/* One evaluation (an ACK, or a tick with zero per-ACK counts): Cwnd and Rate
 * read the flow's, the per-evaluation flags clear, Micros updates, then the
 * expressions run. Returns a CCSW_VM_* fault, or CCSW_VM_OK; the caller
 * applies Cwnd, Rate and the report only when OK, as libccp does. */
static __always_inline __u32 vm_evaluate(const struct ccsw_vm_program *p, struct ccsw_vm_regs *r,
					 const __u64 *prims, __u64 now_us, __u64 cwnd_bytes,
					 __u64 rate)
{
	struct vm_run x = { .p = p, .r = r, .prims = prims, .now_us = now_us };

	r->implicit[CCSW_VM_CWND] = cwnd_bytes;
	r->implicit[CCSW_VM_RATE] = rate;
	r->implicit[CCSW_VM_EXPR_FLAG] = 0;
	r->implicit[CCSW_VM_SHOULD_FALLTHROUGH] = 0;
	r->implicit[CCSW_VM_SHOULD_REPORT] = 0;
	r->implicit[CCSW_VM_MICROS] = now_us - r->micros_zero_us;
	bpf_loop(CCSW_VM_MAX_STEPS, vm_step, &x, 0);
	return x.error;
}

/* The interpreter's test interface: user space writes one struct ccsw_vm_test
 * here, runs ccsw_vm_test (BPF_PROG_TEST_RUN) and reads it back. Map memory,
 * because the verifier lets pointers into it carry offsets, which a syscall
 * program's context does not allow. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ccsw_vm_test);
} ccsw_vm_scratch SEC(".maps");

/* One evaluation of program `slot` on the registers and primitives in the
 * scratch entry, for the test that compares this interpreter with the
 * shim's; `start` only starts the program at now_us. */
SEC("syscall")
int ccsw_vm_test(void *ctx)
{
	__u32 zero = 0, slot;
	struct ccsw_vm_test *t = bpf_map_lookup_elem(&ccsw_vm_scratch, &zero);
	struct ccsw_vm_program *p;
	__u64 cwnd, rate;

	if (!t)
		return 1;
	slot = t->slot;
	p = bpf_map_lookup_elem(&ccsw_vm_programs, &slot);
	if (!p)
		return 1;
	t->reported = 0;
	t->error = CCSW_VM_OK;
	if (t->start) {
		vm_start(p, &t->regs, t->now_us);
		return 0;
	}
	t->error = vm_evaluate(p, &t->regs, t->prims, t->now_us, t->cwnd_bytes, t->rate);
	if (t->error != CCSW_VM_OK)
		return 0;
	cwnd = t->regs.implicit[CCSW_VM_CWND];
	rate = t->regs.implicit[CCSW_VM_RATE];
	if (cwnd)
		t->cwnd_bytes = cwnd > 0xffffffffULL ? 0xffffffffULL : cwnd;
	if (rate)
		t->rate = rate;
	if (t->regs.implicit[CCSW_VM_SHOULD_REPORT]) {
		__builtin_memcpy(t->report, t->regs.report, sizeof(t->report));
		vm_reset_volatile(p, &t->regs);
		t->reported = 1;
	}
	return 0;
}

#endif /* CCSWITCH_VM_BPF_H */
