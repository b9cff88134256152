"""Shared fixtures of the npu Python tests (run by ctest as python.*, with PYTHONPATH set to
build/python and NPU_TEST_DATA to tests/data)."""

import os
import pathlib

import numpy as np
import pytest

# Subprocesses run elsewhere (cwd): a relative PYTHONPATH=build/python must still work.
os.environ["PYTHONPATH"] = os.pathsep.join(
    os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)

DATA = pathlib.Path(os.environ.get("NPU_TEST_DATA",
                                   pathlib.Path(__file__).resolve().parents[1] / "data"))


@pytest.fixture(scope="session")
def data_dir():
    return DATA


@pytest.fixture(scope="session")
def mlp_onnx():
    return str(DATA / "mlp.onnx")


@pytest.fixture(scope="session")
def mobilenet_onnx():
    return str(DATA / "mobilenet_v3ish.onnx")


@pytest.fixture(scope="session")
def mlp_image(tmp_path_factory, mlp_onnx):
    """mlp.onnx compiled once (through the package's own compile path) to an image file."""
    return _compile(tmp_path_factory, mlp_onnx, "mlp.npuimg")


def _compile(tmp_path_factory, onnx, name):
    from npu.runtime import _native
    from npu.runtime.profiler import _Runtime
    array_dim = _Runtime("sim", "fixture").native.device_info(0)["array_dim"]
    image = _native.compile_onnx(b"", path=onnx, array_dim=array_dim)
    path = tmp_path_factory.mktemp("images") / name
    path.write_bytes(image)
    return str(path)


@pytest.fixture(scope="session")
def mobilenet_image(tmp_path_factory, mobilenet_onnx):
    return _compile(tmp_path_factory, mobilenet_onnx, "mobilenet.npuimg")


@pytest.fixture
def x_mlp():
    return np.random.default_rng(0).standard_normal((4, 64), dtype=np.float32)
