"""Tensor descriptors and tensors: the behaviours FuriosaAI's legacy test_tensor.py checks."""

import numpy as np
import pytest

from npu.runtime import errors, session
from npu.runtime.tensor import DataType, QuantizationParameter, Tensor, TensorArray, TensorDesc


def test_desc_of_mobilenet(mobilenet_onnx):
    with session.create(mobilenet_onnx) as sess:
        d = sess.input(0)
        assert isinstance(d, TensorDesc)
        assert d.name == "input"
        assert d.shape == (1, 3, 128, 128) and d.ndim == 4 and d.dim(1) == 3
        assert d.dtype == DataType.FLOAT32 and d.numpy_dtype == np.float32
        assert d.format == "NCHW" and [d.axis(i) for i in range(4)] == list("NCHW")
        assert d.length == 3 * 128 * 128 and d.size == 4 * d.length
        assert [d.stride(i) for i in range(4)] == [49152, 16384, 128, 1]
        # A float input: the compiler's calibrated range; the runtime quantises it into the
        # device view.
        q = d.quantization_parameter
        assert isinstance(q, QuantizationParameter) and q.scale > 0
        q = d.device_quantization_parameter
        assert isinstance(q, QuantizationParameter) and q.axis == -1 and q.scale > 0
        assert -128 <= q.zero_point <= 127
        o = sess.output(0)
        assert o.shape == (1, 100) and o.format == "NC" and o.stride(0) == 100
        assert repr(o) == ('TensorDesc(name="logits", shape=(1, 100), dtype=FLOAT32, '
                           'format=NC, size=400, len=100)')


def test_integer_input_quantisation(data_dir):
    """A uint8 input carries its own quantisation; its codes go in unconverted."""
    with session.create(str(data_dir / "integer_io_relu.onnx")) as sess:
        d = sess.input(0)
        assert d.dtype == DataType.UINT8 and d.numpy_dtype == np.uint8 and d.size == 16
        q = d.quantization_parameter
        assert q.axis == -1 and q.zero_point == 128 and q.scale == pytest.approx(0.1)
        x = (np.arange(16, dtype=np.uint8) * 10).reshape(2, 8)
        y = sess.run(x)[0].numpy()
        want = np.maximum(0, (x.astype(np.float32) - q.zero_point) * q.scale)
        np.testing.assert_allclose(y, want, atol=0.02)
        # Its own dtype or float32, nothing else.
        with pytest.raises(errors.InvalidInput, match="'x' expects uint8, got int8"):
            sess.run(x.astype(np.int8))


def test_per_axis_quantisation(data_dir):
    with session.create(str(data_dir / "dequantize_axis.onnx")) as sess:
        q = sess.input(0).quantization_parameter
        assert q.axis == 3 and len(q.scale) == 5 and len(q.zero_point) == 5
        assert q.zero_point == (0, -128, 127, 5, -7)


def test_tensor_and_tensor_array(mlp_image, x_mlp):
    with session.create(mlp_image) as sess:
        inputs = sess.allocate_inputs()
        assert isinstance(inputs, TensorArray) and len(inputs) == 1
        t = inputs[0]
        assert isinstance(t, Tensor) and t.desc == sess.input(0)
        assert t.shape == (4, 64) and t.dtype == DataType.FLOAT32
        assert not t.numpy().any()
        t.copy_from(x_mlp)
        np.testing.assert_array_equal(np.asarray(t), x_mlp)
        with pytest.raises(errors.InvalidInput, match="shape"):
            t.copy_from(np.zeros((4, 63), np.float32))
        out = sess.run(inputs)
        assert out[0].desc.name == "logits"
        arrays = out.numpy()
        assert len(arrays) == 1 and arrays[0] is out[0].numpy()  # no copies
        assert [a.shape for a in out.view()] == [(4, 10)]
        assert "TensorArray" in repr(out) and "logits" in repr(out)


def test_datatype():
    assert [d.name for d in DataType] == ["FLOAT32", "INT8", "UINT8", "INT32", "INT64"]
    assert DataType.from_numpy(np.int64) == DataType.INT64
    assert DataType.INT8.numpy_dtype == np.int8
    with pytest.raises(ValueError):
        DataType.from_numpy(np.float16)
