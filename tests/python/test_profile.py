"""Profiling: npu.runtime.profile(file) and the session option profile=FILE write Chrome
trace-event JSON with each request's spans."""

import io
import json

import pytest

import npu
from npu.runtime import errors, session


def _spans(trace):
    assert isinstance(trace["traceEvents"], list)
    return [e for e in trace["traceEvents"] if e.get("ph") == "X"]


def _check_requests(spans, n):
    requests = {e["args"]["request"] for e in spans}
    assert len(requests) == n, requests
    names = {e["name"] for e in spans}
    assert {"queue", "copy-in", "device", "copy-out"} <= names, names
    device = [e for e in spans if e["name"] == "device"]
    assert all(e["args"].get("device_cycles", 0) > 0 for e in device)
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in spans)


def test_profile_block(tmp_path, mlp_image, x_mlp):
    path = tmp_path / "trace.json"
    before = session.create(mlp_image)  # open before the block: covered too
    before.run(x_mlp)  # not in the trace
    with npu.runtime.profile(str(path)):
        for _ in range(3):
            before.run(x_mlp)
        with session.create(mlp_image) as inside:  # opened and closed inside the block
            inside.run(x_mlp)
            inside.run(x_mlp)
        async_sess, queue = session.create_async(mlp_image)
        with async_sess, queue:
            async_sess.submit(x_mlp, 1)
            queue.recv(10000)
    before.run(x_mlp)  # after the block: not in the trace
    before.close()
    trace = json.loads(path.read_text())
    spans = _spans(trace)
    _check_requests(spans, 6)
    # One process per session device, named after the session kind.
    names = [e["args"]["name"] for e in trace["traceEvents"]
             if e.get("ph") == "M" and e.get("name") == "process_name"]
    assert len(names) == 3 and any("async session" in n for n in names)
    # One clock: the second session's spans come after the first three runs began.
    first = min(e["ts"] for e in spans if e["pid"] < 100)
    assert all(e["ts"] >= first for e in spans if 100 <= e["pid"] < 200)


def test_profile_to_file_object(mlp_image, x_mlp):
    buf = io.StringIO()
    with session.create(mlp_image) as sess:
        with npu.runtime.profile(buf):
            sess.run(x_mlp)
    _check_requests(_spans(json.loads(buf.getvalue())), 1)


def test_one_block_at_a_time():
    with npu.runtime.profile(io.StringIO()):
        with pytest.raises(errors.InvalidInput, match="already active"):
            with npu.runtime.profile(io.StringIO()):
                pass


def test_session_option(tmp_path, mlp_image, x_mlp):
    path = tmp_path / "own.json"
    with session.create(mlp_image, profile=str(path)) as sess:
        sess.run(x_mlp)
        sess.run(x_mlp)
        assert not path.exists()  # written when the session closes
    _check_requests(_spans(json.loads(path.read_text())), 2)
    path2 = tmp_path / "async.json"
    async_sess, queue = session.create_async(mlp_image, profile=str(path2))
    async_sess.submit(x_mlp)
    queue.recv(10000)
    async_sess.close()
    queue.close()
    _check_requests(_spans(json.loads(path2.read_text())), 1)
