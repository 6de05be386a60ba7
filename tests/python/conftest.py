import os
import sys

# Let the pure-Python tests run from a source checkout without installing the package.
_PY = os.path.join(os.path.dirname(__file__), "..", "..", "python")
if os.path.isdir(_PY) and os.path.abspath(_PY) not in map(os.path.abspath, sys.path):
    sys.path.insert(0, os.path.abspath(_PY))
