"""Profiling: Chrome trace-event JSON (chrome://tracing, Perfetto) of every request.

    with npu.runtime.profile("trace.json"):
        sess.run(x)

covers every session open during the block (and those created inside it); each request
shows as spans queue, copy-in, device (with its device cycles) and copy-out, one row per
request under one process per session device. A session can also write its own trace:
session.create(model, profile="trace.json") writes it when the session closes. One
profile() block at a time; a session with its own profile file is not in a profile() block's
trace.
"""

import json
import os
import threading
import time
import weakref

from . import _native
from .errors import InvalidInput

__all__ = ["profile"]

_lock = threading.Lock()
_live = weakref.WeakSet()  # every open _Runtime
_active = None  # the profile() block in progress


class _Runtime:
    """A native runtime and where its trace clock starts on time.monotonic's clock."""

    def __init__(self, device, label):
        self.native = _native.Runtime(device)
        self.label = label
        self.own_profile = None
        self.origin_us = time.monotonic_ns() // 1000 - self.native.clock_us()
        with _lock:
            _live.add(self)
            if _active is not None:
                _active._add(self)

    def start_own_profile(self, path):
        self.own_profile = path
        self.native.start_profiling()

    def end_own_profile(self):
        path, self.own_profile = self.own_profile, None
        if path is not None:
            _write(path, [(self, self.native.end_profiling())], self.origin_us)


def _write(path, traces, base_us):
    """Merges (runtime, trace JSON) pairs into one Chrome trace: each runtime's devices get
    their own processes, timestamps move onto one clock."""
    events = []
    for i, (rt, text) in enumerate(traces):
        trace = json.loads(text)
        shift = rt.origin_us - base_us
        for e in trace.get("traceEvents", []):
            e["pid"] = i * 100 + int(e.get("pid", 0))
            if e.get("ph") == "M" and e.get("name") == "process_name":
                e["args"]["name"] = f"{e['args']['name']} ({rt.label})"
            if "ts" in e:
                e["ts"] = e["ts"] + shift
            events.append(e)
    out = {"displayTimeUnit": "ms", "traceEvents": events}
    if hasattr(path, "write"):
        json.dump(out, path)
    else:
        with open(os.fspath(path), "w") as f:
            json.dump(out, f)


class profile:
    """Context manager writing the Chrome trace of the requests made inside it to `file` (a
    path or a text file object)."""

    def __init__(self, file="npu_trace.json"):
        self.file = file
        self._runtimes = []  # strong references: a session closed inside still reports
        self._base_us = 0

    def _add(self, rt):
        if rt.own_profile is None:
            rt.native.start_profiling()
            self._runtimes.append(rt)

    def __enter__(self):
        global _active
        with _lock:
            if _active is not None:
                raise InvalidInput("a profile() block is already active", "INVALID_ARGUMENT")
            _active = self
            self._base_us = time.monotonic_ns() // 1000
            for rt in list(_live):
                self._add(rt)
        return self

    def __exit__(self, *exc):
        global _active
        with _lock:
            _active = None
            runtimes, self._runtimes = self._runtimes, []
        traces = [(rt, rt.native.end_profiling()) for rt in runtimes]
        _write(self.file, traces, self._base_us)
        return False
