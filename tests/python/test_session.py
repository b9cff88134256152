"""Blocking sessions: the behaviours FuriosaAI's legacy test_session.py checks, on our models."""

import pathlib
import threading

import numpy as np
import pytest

import npu
from npu.runtime import errors, session
from npu.runtime.tensor import DataType, TensorArray

MLP_SUMMARY = """\
Inputs:
{0: TensorDesc(name="x", shape=(4, 64), dtype=FLOAT32, format=NC, size=1024, len=256)}
Outputs:
{0: TensorDesc(name="logits", shape=(4, 10), dtype=FLOAT32, format=NC, size=160, len=40)}"""


def test_summary(mlp_image, capsys):
    with session.create(mlp_image) as sess:
        assert sess.summary() == MLP_SUMMARY
        sess.print_summary()
        assert capsys.readouterr().out == MLP_SUMMARY + "\n"
        verbose = sess.summary(verbose=True)
        assert verbose.startswith(MLP_SUMMARY + "\n") and len(verbose) > len(MLP_SUMMARY) + 20
        assert '"inputs"' in sess.model_summary_json()


def test_introspection(mlp_image):
    with session.create(mlp_image) as sess:
        assert sess.input_num == 1 and sess.output_num == 1
        assert [d.name for d in sess.inputs()] == ["x"]
        assert [d.name for d in sess.outputs()] == ["logits"]
        assert sess.input(0).shape == (4, 64) and sess.input(0).dtype == DataType.FLOAT32
        assert sess.output(0).shape == (4, 10)
        with pytest.raises(IndexError):
            sess.input(1)


def test_run_forms_agree(mlp_image, x_mlp):
    with session.create(mlp_image) as sess:
        a = sess.run(x_mlp)
        b = sess.run([x_mlp])
        c = sess.run_with(["logits"], {"x": x_mlp})
        d = sess.run(TensorArray([a[0].__class__(sess.input(0), x_mlp)]))
        inputs = sess.allocate_inputs()
        inputs[0].copy_from(x_mlp)
        e = sess.run(inputs)
        assert isinstance(a, TensorArray) and len(a) == 1
        for r in (b, c, d, e):
            np.testing.assert_array_equal(a[0].numpy(), r[0].numpy())
        assert a[0].numpy().shape == (4, 10) and a[0].numpy().dtype == np.float32
        assert np.abs(a[0].numpy()).sum() > 0
        stats = sess.last_stats
        assert stats["device_cycles"] > 0 and stats["total_us"] > 0


def test_onnx_and_image_agree(mlp_onnx, mlp_image, x_mlp):
    """An ONNX model compiled on the fly, from a path or from bytes, equals its image."""
    with session.create(mlp_image) as s1, session.create(mlp_onnx) as s2, \
            session.create(pathlib.Path(mlp_onnx).read_bytes()) as s3, \
            session.create(pathlib.Path(mlp_image).read_bytes()) as s4:
        want = s1.run(x_mlp)[0].numpy()
        for s in (s2, s3, s4):
            np.testing.assert_array_equal(s.run(x_mlp)[0].numpy(), want)


def test_compile_options(mlp_onnx, data_dir, x_mlp):
    lines = []
    with session.create(mlp_onnx, calibration_method="percentile=99.9",
                        calibration=[x_mlp, x_mlp * 0.5], compile_progress=lines.append) as s:
        assert s.run(x_mlp)[0].numpy().shape == (4, 10)
    with session.create(mlp_onnx, compiler_config={"calibration_dir": str(data_dir / "calib")}):
        pass
    lines = []
    with session.create(mlp_onnx, calibration=[x_mlp], bias_correction=True, weight_rounding="gptq",
                        compile_progress=lines.append):
        pass
    assert sum(line.startswith("weight rounding:") for line in lines) == 1, lines
    with pytest.raises(errors.InvalidInput, match="weight_rounding"):
        session.create(mlp_onnx, weight_rounding="best")
    with pytest.raises(errors.InvalidInput, match="calibration"):
        session.create(mlp_onnx, calibration_method="median")
    with pytest.raises(errors.InvalidInput, match="unknown session option"):
        session.create(mlp_onnx, batch_sise=2)


def test_multi_input_run_with(data_dir):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 6, 40), dtype=np.float32)
    b = rng.standard_normal((40, 24), dtype=np.float32)
    with session.create(str(data_dir / "matmul_shared_b.onnx"), calibration=[[a, b]]) as sess:
        assert [d.name for d in sess.inputs()] == ["a", "b"]
        y1 = sess.run([a, b])[0].numpy()
        y2 = sess.run_with(["y"], {"b": b, "a": a})[0].numpy()
        np.testing.assert_array_equal(y1, y2)
        # Int8 quantisation of a float matmul: close to the float result.
        want = a @ b
        assert np.abs(y1 - want).max() < 0.05 * np.abs(want).max()
        with pytest.raises(errors.InvalidInput, match="missing input"):
            sess.run_with(["y"], {"a": a})
        with pytest.raises(errors.TensorNameNotFound, match="'c'"):
            sess.run_with(["y"], {"a": a, "b": b, "c": b})
        with pytest.raises(errors.TensorNameNotFound, match="'z'"):
            sess.run_with(["z"], {"a": a, "b": b})


def test_invalid_inputs(mlp_image, x_mlp):
    with session.create(mlp_image) as sess:
        with pytest.raises(errors.InvalidInput, match="'x' expects float32, got float64"):
            sess.run(x_mlp.astype(np.float64))
        with pytest.raises(errors.InvalidInput, match="int32"):
            sess.run(x_mlp.astype(np.int32))
        with pytest.raises(errors.InvalidInput, match=r"\[4,63\]") as e:
            sess.run(x_mlp[:, :63])
        assert e.value.status == "INVALID_ARGUMENT"
        with pytest.raises(errors.InvalidInput, match="1 input"):
            sess.run([x_mlp, x_mlp])
        with pytest.raises(errors.InvalidInput, match="1 input"):
            sess.run([])
        with pytest.raises(errors.InvalidInput, match="numpy array"):
            sess.run([[1.0, 2.0]])
        with pytest.raises(errors.InvalidInput):
            sess.run("x")
        # Not C-contiguous: accepted (copied), same result.
        wide = np.zeros((4, 128), np.float32)
        wide[:, ::2] = x_mlp
        np.testing.assert_array_equal(sess.run(wide[:, ::2])[0].numpy(),
                                      sess.run(x_mlp)[0].numpy())
        # The session still works after the errors.
        assert sess.run(x_mlp)[0].numpy().shape == (4, 10)


def test_errors_carry_status():
    with pytest.raises(errors.NotFound) as e:
        session.create("/nonexistent/model.onnx")
    assert isinstance(e.value, errors.FuriosaError)
    with pytest.raises(errors.InvalidModel) as e:
        session.create(b"NPUI" * 64)
    assert e.value.status in ("CORRUPT_DATA",)
    with pytest.raises(errors.NotFound, match="no-such-device"):
        session.create(b"x", device="no-such-device")


def test_closed(mlp_image, x_mlp):
    sess = session.create(mlp_image)
    sess.run(x_mlp)
    sess.close()
    sess.close()  # idempotent
    for call in (lambda: sess.run(x_mlp), lambda: sess.run_with(["logits"], {"x": x_mlp}),
                 sess.inputs, sess.outputs, lambda: sess.input(0), lambda: sess.input_num,
                 sess.summary):
        with pytest.raises(errors.SessionClosed):
            call()
    with session.create(mlp_image) as s2:
        pass
    with pytest.raises(errors.SessionClosed):
        s2.run(x_mlp)


def test_outputs_own_their_memory(mlp_image, x_mlp):
    sess = session.create(mlp_image)
    a = sess.run(x_mlp)[0].numpy()
    b = sess.run(x_mlp)[0].numpy()
    assert not np.shares_memory(a, b)
    assert a.flags.writeable and a.flags.c_contiguous
    want = a.copy()
    sess.close()
    del sess
    np.testing.assert_array_equal(a, want)  # outlives the session
    a += 1  # writable in place
    np.testing.assert_array_equal(a, want + 1)


def test_python_thread_progresses_during_run(mobilenet_onnx):
    """run() releases the GIL: another thread runs Python code while a run is in progress.
    The counter gives the GIL up after every step (sleep(0)), so it can only count while the
    runner is inside run() if run() does not hold the GIL."""
    sess = session.create(mobilenet_onnx)
    x = np.random.default_rng(0).standard_normal((1, 3, 128, 128), dtype=np.float32)
    sess.run(x)
    in_run = threading.Event()
    done = threading.Event()
    during = [0]

    def counter():
        while not done.is_set():
            if in_run.is_set():
                during[0] += 1
            import time
            time.sleep(0)

    import sys
    old = sys.getswitchinterval()
    sys.setswitchinterval(5.0)  # no forced switches: only voluntary GIL releases count
    t = threading.Thread(target=counter)
    t.start()
    try:
        # Until the counter has stepped 10 times inside run(), at most 500 runs: if run() held
        # the GIL it would never step there, while on a loaded machine (ctest -j2 on 2 cores)
        # a short run can end before the counter's thread is scheduled at all.
        runs = 0
        while during[0] < 10 and runs < 500:
            in_run.set()
            sess.run(x)
            in_run.clear()
            runs += 1
    finally:
        done.set()
        t.join()
        sys.setswitchinterval(old)
        sess.close()
    print(f"counter steps while run() was in progress: {during[0]} over {runs} runs")
    assert during[0] >= 10


def test_version():
    assert npu.__version__ and npu.runtime.__version__
