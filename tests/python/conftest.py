import os
import sys

# Let the pure-Python tests run from a source checkout without installing the package.
_PY = os.path.join(os.path.dirname(__file__), "..", "..", "python")
if os.path.isdir(_PY) and os.path.abspath(_PY) not in map(os.path.abspath, sys.path):
    sys.path.insert(0, os.path.abspath(_PY))

# The harness runs the agent in the kernel shim's process by default (daemons.AGENT_TRANSPORTS).
# Most live tests were written against the agent as a process of its own and assert on that
# layout (an agent log per start, an agent killed or frozen while the shim carries on, a proxy
# between the two): they run on the socket unless the environment names a transport. The tests
# of the in-process transport name it explicitly.
os.environ.setdefault("CCSWITCH_AGENT_TRANSPORT", "socket")
