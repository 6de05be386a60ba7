# Where the port programs' time went in a system-wide profile: for each program, the share of
# its samples by the function on top of the stack (the program itself or what it called).
# usage: perf script -i perf-all.data -F comm,ip,sym > script.txt; python3 progs.py script.txt
import collections, sys

samples = open(sys.argv[1]).read().split('\n\n')
for prog in ('ccsw_egress', 'ccsw_ingress'):
    top, comm, n = collections.Counter(), collections.Counter(), 0
    for s in samples:
        lines = [l.strip() for l in s.strip().split('\n') if l.strip()]
        frames = [l.split(None, 1)[1].split('+')[0] if len(l.split(None, 1)) > 1 else '' for l in lines[1:]]
        if not any(prog in f for f in frames):
            continue
        n += 1
        top[frames[0]] += 1
        comm[lines[0].split()[0]] += 1
    print(f'{prog}: {n} samples, by process {dict(comm.most_common(5))}')
    for k, v in top.most_common(15):
        print(f'  {100 * v / n:5.1f}%  {k}')
