"""Shared helpers of the Python test suite (run by ctest, see python/CMakeLists.txt)."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.dirname(HERE)
if PYDIR not in sys.path:
    sys.path.insert(0, PYDIR)

import ttft  # noqa: E402

MS = 1_000_000        # ns
S = 1_000_000_000     # ns
T0 = 1_000 * S        # an arbitrary explicit start time


def registry(**kw):
    kw.setdefault("max_inflight", 64)
    kw.setdefault("max_classes", 4)   # smaller registries: faster tests
    return ttft.Registry(**kw)
