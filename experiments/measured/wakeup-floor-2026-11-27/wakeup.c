/* How long this machine takes to wake a sleeping thread: a waker thread on one CPU writes an
 * eventfd at random gaps, a sleeper thread on another CPU waits for it in epoll_wait, and the
 * latency is the time from just before the write to just after the wait returns
 * (CLOCK_MONOTONIC). The shim waits the same way for the kernel's urgent records.
 * Usage: wakeup SLEEPER_CPU WAKER_CPU SAMPLES MAX_GAP_US (a CPU of -1: not pinned)
 * Prints the latencies' percentiles in microseconds. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

static int efd, samples, max_gap_us, sleeper_cpu, waker_cpu;
static volatile uint64_t sent_ns;
static volatile int woken; /* samples the sleeper has taken: the waker writes again only after */
static uint64_t *lat_ns;

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + t.tv_nsec;
}

static void pin(int cpu)
{
	cpu_set_t s;
	if (cpu < 0)
		return; /* left to the scheduler, as the shim is by default */
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
}

static void *sleeper(void *arg)
{
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN }, out;
	uint64_t v;

	(void)arg;
	pin(sleeper_cpu);
	epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev);
	for (int i = 0; i < samples; i++) {
		while (epoll_wait(ep, &out, 1, -1) != 1)
			;
		lat_ns[i] = now_ns() - sent_ns;
		if (read(efd, &v, sizeof(v)) != sizeof(v))
			abort();
		__atomic_store_n(&woken, i + 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	pthread_t t;
	uint64_t one = 1;

	if (argc < 5) {
		fprintf(stderr, "usage: wakeup SLEEPER_CPU WAKER_CPU SAMPLES MAX_GAP_US\n");
		return 2;
	}
	sleeper_cpu = atoi(argv[1]);
	waker_cpu = atoi(argv[2]);
	samples = atoi(argv[3]);
	max_gap_us = atoi(argv[4]);
	lat_ns = calloc(samples, sizeof(*lat_ns));
	efd = eventfd(0, 0);
	pthread_create(&t, NULL, sleeper, NULL);
	pin(waker_cpu);
	srand(1);
	for (int i = 0; i < samples; i++) {
		/* A random gap, so that the sleeper is halted, as the shim is between records. */
		usleep(max_gap_us / 2 + rand() % (max_gap_us / 2 + 1));
		sent_ns = now_ns();
		if (write(efd, &one, sizeof(one)) != sizeof(one))
			abort();
		while (__atomic_load_n(&woken, __ATOMIC_ACQUIRE) != i + 1)
			usleep(50);
	}
	pthread_join(t, NULL);
	qsort(lat_ns, samples, sizeof(*lat_ns), cmp);
	printf("{\"samples\": %d, \"sleeper_cpu\": %d, \"waker_cpu\": %d, \"max_gap_us\": %d, "
	       "\"p50_us\": %.1f, \"p90_us\": %.1f, \"p99_us\": %.1f, \"p999_us\": %.1f, \"max_us\": %.1f}\n",
	       samples, sleeper_cpu, waker_cpu, max_gap_us, lat_ns[samples / 2] / 1e3, lat_ns[samples * 9 / 10] / 1e3,
	       lat_ns[samples * 99 / 100] / 1e3, lat_ns[samples * 999 / 1000] / 1e3, lat_ns[samples - 1] / 1e3);
	return 0;
}
