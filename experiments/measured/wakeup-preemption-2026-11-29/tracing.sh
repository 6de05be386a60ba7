#!/bin/sh
# tracing.sh on | off FILE: starts recording the scheduler's switches and wake-ups and the
# softirq and IRQ entries and exits of both CPUs (tracefs, 64 MiB per CPU); off stops it,
# writes the trace to FILE (xz) and gives the buffer back.
set -e
T=/sys/kernel/tracing
[ -e $T/trace ] || mount -t tracefs none $T
EVENTS="sched/sched_switch sched/sched_wakeup irq/softirq_entry irq/softirq_exit irq/irq_handler_entry irq/irq_handler_exit"
case $1 in
  on)
    echo 0 > $T/tracing_on
    echo > $T/trace
    echo 3 > $T/tracing_cpumask
    echo 65536 > $T/buffer_size_kb
    for e in $EVENTS; do echo 1 > $T/events/$e/enable; done
    echo 1 > $T/tracing_on ;;
  off)
    echo 0 > $T/tracing_on
    for e in $EVENTS; do echo 0 > $T/events/$e/enable; done
    xz -T1 < $T/trace > "$2"
    echo > $T/trace
    echo 1408 > $T/buffer_size_kb ;;
  *) echo "usage: tracing.sh on | off FILE" >&2; exit 2 ;;
esac
