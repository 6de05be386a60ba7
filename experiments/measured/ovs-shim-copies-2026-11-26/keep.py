# Copies the figures of each run that summarize.py reads from /tmp/ovs-shim-copies-runs into
# runs/ here: scale.json, the shim's stats file without its buffer samples and per-flow
# maxima (counted instead), and the counter snapshots. usage: python3 keep.py RUN...
import json, os, shutil, sys

SRC = '/tmp/ovs-shim-copies-runs'
HERE = os.path.dirname(os.path.abspath(__file__))
for run in sys.argv[1:]:
    src, dst = os.path.join(SRC, run), os.path.join(HERE, 'runs', run)
    os.makedirs(dst, exist_ok=True)
    for name in os.listdir(src):
        if name.endswith('.txt') or name == 'scale.json':
            shutil.copy(os.path.join(src, name), dst)
    st = json.load(open(os.path.join(src, 'logs/ovs/001-scale.json')))
    buf = st.get('buffer', {})
    for key in ('samples', 'max_per_flow'):
        if isinstance(buf.get(key), list):
            buf[key] = f'{len(buf[key])} entries, left out'
    json.dump(st, open(os.path.join(dst, 'shim-stats.json'), 'w'), indent=1)
