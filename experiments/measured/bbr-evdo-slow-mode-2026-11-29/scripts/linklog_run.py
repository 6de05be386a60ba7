"""Usage: linklog_run.py SCENARIO OUT. `ccswitch run` with mm-link's downlink log of every
transfer kept (OUT/link-logs/NNNNNN.log: each packet's arrival at the link's queue, its
departure, the trace's delivery opportunities, ms). Run it as `ccswitch run` is run, alone under
the experiment lock, with CCSWITCH_BIN_DIR set:
    flock -x /tmp/ccswitch-experiment.lock env CCSWITCH_BIN_DIR=BINS .venv/bin/python linklog_run.py S OUT"""
import sys

from ccswitch.experiments.runner import Runner
from ccswitch.experiments.scenario import load_scenario

Runner(load_scenario(sys.argv[1]), sys.argv[2], link_logs=True).run()
