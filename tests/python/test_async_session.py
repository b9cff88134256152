"""Async sessions: the behaviours FuriosaAI's legacy test_async_session.py checks, on our
models, plus exactly-once completion, cancellation and context lifetimes."""

import gc
import os
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from npu.runtime import errors, session


def test_submit_and_recv_contexts(mlp_image, x_mlp):
    """50 submits: the contexts that come back are exactly that set."""
    with session.create(mlp_image) as sess:
        want = sess.run(x_mlp)[0].numpy()
    async_sess, queue = session.create_async(mlp_image, input_queue_size=8)
    with async_sess, queue:
        for i in range(50):
            async_sess.submit([x_mlp], context=i)
        seen = []
        for _ in range(50):
            ctx, outputs = queue.recv(timeout_ms=10000)
            seen.append(ctx)
            np.testing.assert_array_equal(outputs[0].numpy(), want)
        assert sorted(seen) == list(range(50))
        with pytest.raises(errors.QueueWaitTimeout):
            queue.recv(0)


def test_with_statement_closes_both(mlp_image, x_mlp):
    with session.create_async(mlp_image) as (async_sess, queue):
        async_sess.submit(x_mlp, "ctx")
        assert queue.recv(10000)[0] == "ctx"
    with pytest.raises(errors.SessionClosed):
        async_sess.submit(x_mlp)
    with pytest.raises(errors.SessionClosed):
        queue.recv(0)
    with pytest.raises(errors.SessionClosed):
        async_sess.inputs()


def test_recv_timeouts(mlp_image):
    async_sess, queue = session.create_async(mlp_image)
    with async_sess, queue:
        t0 = time.monotonic()
        with pytest.raises(errors.QueueWaitTimeout) as e:
            queue.recv(0)
        assert e.value.status == "DEADLINE_EXCEEDED"
        assert time.monotonic() - t0 < 0.05
        t0 = time.monotonic()
        with pytest.raises(errors.QueueWaitTimeout):
            queue.recv(100)
        assert 0.095 <= time.monotonic() - t0 < 1.0
        with pytest.raises(errors.QueueWaitTimeout):
            queue.recv(timeout=10)  # the legacy keyword
        assert queue.try_recv() is None


def test_terminated_after_submit_side_closes(mlp_image, x_mlp):
    async_sess, queue = session.create_async(mlp_image)
    for i in range(5):
        async_sess.submit(x_mlp, context=i)
    async_sess.close()
    with pytest.raises(errors.SessionClosed):
        async_sess.submit(x_mlp)
    # Close drains: the five still come back, then SessionTerminated.
    got = sorted(queue.recv(10000)[0] for _ in range(5))
    assert got == list(range(5))
    with pytest.raises(errors.SessionTerminated):
        queue.recv()
    with pytest.raises(errors.SessionTerminated):
        queue.recv(0)
    queue.close()
    with pytest.raises(errors.SessionClosed):
        queue.recv()


def test_iteration_ends_when_drained(mlp_image, x_mlp):
    async_sess, queue = session.create_async(mlp_image)
    for i in range(7):
        async_sess.submit([x_mlp], i)
    async_sess.close()
    assert sorted(ctx for ctx, _ in queue) == list(range(7))
    queue.close()


def test_closed_queue(mlp_image, x_mlp):
    async_sess, queue = session.create_async(mlp_image)
    async_sess.submit(x_mlp, "a")
    queue.close()
    queue.close()  # idempotent
    with pytest.raises(errors.SessionClosed):
        queue.recv()
    with pytest.raises(errors.SessionClosed):
        queue.recv(0)
    # Closing the queue closes the submit side too.
    with pytest.raises(errors.SessionClosed):
        async_sess.submit(x_mlp, "b")
    assert list(queue) == []
    async_sess.close()


def test_invalid_submit_keeps_no_context(mlp_image, x_mlp):
    ctx = object()
    base = sys.getrefcount(ctx)
    async_sess, queue = session.create_async(mlp_image)
    with async_sess, queue:
        with pytest.raises(errors.InvalidInput):
            async_sess.submit(x_mlp.astype(np.float64), ctx)
        with pytest.raises(errors.InvalidInput, match=r"\[4,1\]"):
            async_sess.submit(x_mlp[:, :1], ctx)
        with pytest.raises(errors.InvalidInput):
            async_sess.submit([x_mlp, x_mlp], ctx)
        assert sys.getrefcount(ctx) == base
        assert queue.outstanding == 0


def test_contexts_released_on_queue_close(mlp_image, x_mlp):
    """Closing the queue cancels what is pending and releases every context, with the GIL."""
    ctx = object()
    base = sys.getrefcount(ctx)
    async_sess, queue = session.create_async(mlp_image, input_queue_size=40, output_queue_size=0)
    for _ in range(40):
        async_sess.submit(x_mlp, ctx)
    assert sys.getrefcount(ctx) == base + 40
    queue.close()
    assert sys.getrefcount(ctx) == base
    async_sess.close()


def test_contexts_released_when_dropped(mlp_image, x_mlp):
    ctx = object()
    base = sys.getrefcount(ctx)
    async_sess, queue = session.create_async(mlp_image)
    for _ in range(10):
        async_sess.submit(x_mlp, ctx)
    del async_sess, queue
    gc.collect()
    assert sys.getrefcount(ctx) == base


def test_cancel_exactly_once(mlp_image, x_mlp):
    """Every request completes once: cancelled ones with RequestCancelled carrying their
    context, the others normally; no context is kept afterwards."""
    ctx = [object() for _ in range(30)]
    bases = [sys.getrefcount(c) for c in ctx]
    async_sess, queue = session.create_async(mlp_image, input_queue_size=30, output_queue_size=0)
    ids = [async_sess.submit(x_mlp, c) for c in ctx]
    cancelled = {i for i in range(0, 30, 3) if async_sess.cancel(ids[i])}
    assert async_sess.cancel(2**63) is False
    async_sess.close()
    seen, failed = [], set()
    while True:
        try:
            c, _ = queue.recv(10000)
            seen.append(c)
        except errors.RequestCancelled as e:
            assert e.status == "CANCELLED" and e.request_id in ids
            seen.append(e.context)
            failed.add(ctx.index(e.context))
            del e
        except errors.SessionTerminated:
            break
    assert sorted(map(id, seen)) == sorted(map(id, ctx))
    # A request the device had already started may still finish normally.
    assert failed <= cancelled
    print(f"cancel() accepted for {len(cancelled)} of 10, {len(failed)} completed cancelled")
    del c, seen
    queue.close()
    assert [sys.getrefcount(c) for c in ctx] == bases


def test_submit_blocks_only_while_full(mlp_image, x_mlp):
    async_sess, queue = session.create_async(mlp_image, input_queue_size=4, output_queue_size=0)
    with async_sess, queue:
        for i in range(4):
            async_sess.submit(x_mlp, i)
        # Full: a submit with a timeout gives up with DeviceBusy.
        t0 = time.monotonic()
        with pytest.raises(errors.DeviceBusy):
            async_sess.submit(x_mlp, 99, timeout=0.1)
        assert time.monotonic() - t0 >= 0.09
        # A blocked submit proceeds once a completion is received.
        done = threading.Event()
        threading.Thread(target=lambda: (async_sess.submit(x_mlp, 4), done.set())).start()
        assert not done.wait(0.2)
        queue.recv(10000)
        assert done.wait(10)
        got = sorted(queue.recv(10000)[0] for _ in range(4))
        assert len(got) == 4 and 99 not in got


def _interrupted(code):
    """Runs `code` (which prints 'ready' before it blocks) and sends it SIGINT: True when it
    printed 'interrupted' within 2 s."""
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                         env=os.environ)
    assert p.stdout.readline().strip() == "ready"
    time.sleep(0.3)
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=10)
    return "interrupted" in out and time.monotonic() - t0 < 2.0


def test_recv_wakes_for_ctrl_c(mlp_image):
    """recv() without a timeout returns to Python for SIGINT (KeyboardInterrupt)."""
    assert _interrupted(
        "from npu.runtime import session\n"
        f"s, q = session.create_async({mlp_image!r})\n"
        "print('ready', flush=True)\n"
        "try:\n    q.recv()\nexcept KeyboardInterrupt:\n    print('interrupted', flush=True)\n")


def test_blocked_submit_wakes_for_ctrl_c(mlp_image):
    """So does a submit() blocked on a full queue."""
    assert _interrupted(
        "import numpy as np\nfrom npu.runtime import session\n"
        f"s, q = session.create_async({mlp_image!r}, input_queue_size=2, output_queue_size=0)\n"
        "x = np.zeros((4, 64), np.float32)\ns.submit(x)\ns.submit(x)\n"
        "print('ready', flush=True)\n"
        "try:\n    s.submit(x)\nexcept KeyboardInterrupt:\n    print('interrupted', flush=True)\n")


def _c_figure(image, total, in_flight):
    """The same workload from C through the C API (tests/runtime/c_api_async_bench.c)."""
    exe = os.environ.get("NPU_C_API_BENCH")
    if not exe or not os.path.exists(exe):
        return None
    out = subprocess.run([exe, image, str(total), str(in_flight)], capture_output=True,
                         text=True, check=True, env=dict(os.environ, NPU_LOG="quiet")).stdout
    m = re.search(r"([\d.]+) requests/s", out)
    return float(m.group(1)) if m else None


def _throughput(image, x, total, in_flight):
    """`total` requests with `in_flight` outstanding: checks that each context comes back
    once and returns the report line (Python and, for comparison, C requests/s)."""
    async_sess, queue = session.create_async(image, input_queue_size=in_flight,
                                             output_queue_size=0)
    seen = bytearray(total)
    errors_seen = []

    def submitter():
        try:
            for i in range(total):
                async_sess.submit(x, i)
        except Exception as e:  # pragma: no cover - reported below
            errors_seen.append(e)
        finally:
            async_sess.close()

    t0 = time.perf_counter()
    t = threading.Thread(target=submitter)
    t.start()
    n = 0
    for ctx, outputs in queue:
        seen[ctx] += 1
        n += 1
    elapsed = time.perf_counter() - t0
    t.join()
    queue.close()
    assert not errors_seen
    assert n == total and all(v == 1 for v in seen)
    py_rate = total / elapsed
    c_rate = _c_figure(image, total, in_flight)
    line = (f"python: {total} requests of {os.path.basename(image)}, {in_flight} in flight: "
            f"{py_rate:.0f} requests/s")
    if c_rate:
        line += f"; C API (same model and load): {c_rate:.0f} requests/s " \
                f"(python/C = {py_rate / c_rate:.2f})"
    print(line)
    with open(os.environ.get("NPU_PY_THROUGHPUT_FILE", os.devnull), "a") as f:
        f.write(line + "\n")
    return line


def test_10k_requests_16_in_flight(mlp_image, x_mlp):
    """10,000 requests with 16 in flight: none lost, each context back once; throughput
    against the same workload driven from C (a small model: the binding's overhead shows)."""
    _throughput(mlp_image, x_mlp, 10000, 16)


def test_mobilenet_requests_16_in_flight(mobilenet_image):
    """The same on the MobileNet-style model, where the device's work dominates."""
    x = np.random.default_rng(0).standard_normal((1, 3, 128, 128), dtype=np.float32)
    _throughput(mobilenet_image, x, 500, 16)
