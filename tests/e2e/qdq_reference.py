#!/usr/bin/python3
"""A numpy evaluator of quantised ONNX models (QDQ and QOperator format): the reference that
the NPU's quantised outputs are compared with.

Why not onnxruntime: its CPU kernels for uint8 activations x int8 weights take a different
path on each CPU. On AVX2 without VNNI they multiply through vpmaddubsw, whose int16 pair sums
saturate (onnxruntime documents this and recommends reduce-range weights there), so the same
model gives different integers on different machines. A reference must be exact and the same
everywhere.

Semantics (the ONNX operator definitions):
- DequantizeLinear: (q - zero_point) * scale, per tensor or per axis.
- QuantizeLinear: saturate(round_half_to_even(x / scale) + zero_point), to the zero point's
  type (uint8 or int8).
- Conv, MatMul and Gemm whose activation and weight both come straight from DequantizeLinear
  (through Flatten/Reshape at most) accumulate the integer codes exactly: sum((x - zx)(w - zw)),
  plus the int32 bias codes when the bias's scale is the product of the two input scales (as
  quantize_static writes it), and only then multiply by the scales. This is the int32
  accumulation of QLinearConv/QLinearMatMul, which every integer kernel implements.
- QLinearConv/QLinearMatMul: the same exact accumulation, then
  saturate(round_half_to_even(acc * x_scale * w_scale / y_scale) + y_zero_point).
- Every other operator runs in float64 on the dequantised values (scripts/make_qdq.py's kernels).

Why the result does not depend on the CPU: the integer accumulations are sums of products of
small integers held in float64, exact below 2^53 in any summation order (BLAS, FMA or not);
the dequantised values are integers times a float32 scale, exact in float64, so sums of them
(GlobalAveragePool) are exact too; and every remaining operation is one correctly rounded
IEEE-754 operation per element. Only the rounding rule at the end differs from the NPU's, whose
requantisation rounds half toward +inf with a 32-bit multiplier.

    qdq_reference.py MODEL.onnx INPUT.npy OUTPUT.npy   writes the first output (float32)
    qdq_reference.py --self-test                        checks the evaluator on hand-computed cases
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "scripts"))
from make_qdq import attr, conv, float_node  # noqa: E402  (the float kernels, shared)

GEMM_OPS = ("Conv", "MatMul", "Gemm")
SHAPE_OPS = ("Flatten", "Reshape")


class Quantised:
    """A dequantised value's integer form: codes minus zero point (float64 integers) and its
    scale, broadcastable against the codes (per tensor: a scalar; per axis: shaped on `axis`)."""

    def __init__(self, ints, scale, axis=None):
        self.ints, self.scale, self.axis = ints, scale, axis

    def per_tensor(self):
        return np.ndim(self.scale) == 0


def axis_scale(scale, axis, ndim):
    """A per-axis scale vector shaped to broadcast along `axis` of an ndim-array."""
    if np.ndim(scale) == 0:
        return np.float64(scale)
    axis = axis % ndim
    return np.asarray(scale, np.float64).reshape([-1 if d == axis else 1 for d in range(ndim)])


def round_half_even(x):
    return np.round(x)  # numpy rounds halves to even, as ONNX's QuantizeLinear specifies


def saturate(q, dtype):
    info = np.iinfo(dtype)
    return np.clip(q, info.min, info.max).astype(dtype)


def weight_column_scale(wq, nd, operand_axis_of_columns):
    """The weight's scale per output column (a vector of N, or a scalar)."""
    if wq.per_tensor():
        return np.float64(wq.scale)
    if wq.axis % wq.ints.ndim != operand_axis_of_columns % wq.ints.ndim:
        raise SystemExit(f"qdq_reference: {nd.op_type} {nd.name}: per-axis weight scale on axis {wq.axis}, "
                         f"not on the output columns; not supported")
    return np.asarray(wq.scale, np.float64).reshape(-1)


def integer_gemm(nd, xq, wq, bias, bias_q):
    """Conv/MatMul/Gemm on integer forms: exact accumulation, then the scales."""
    if not xq.per_tensor():
        raise SystemExit(f"qdq_reference: {nd.op_type} {nd.name}: per-axis activation scale; not supported")
    sx = np.float64(xq.scale)
    if nd.op_type == "Conv":
        acc = conv(xq.ints, wq.ints, None, nd)
        sw = weight_column_scale(wq, nd, 0)
        out_scale = sx * (sw.reshape(1, -1, 1, 1) if np.ndim(sw) else sw)
    elif nd.op_type == "MatMul":
        acc = xq.ints @ wq.ints
        out_scale = sx * weight_column_scale(wq, nd, -1)
    else:  # Gemm
        x = xq.ints.T if attr(nd, "transA", 0) else xq.ints
        trans_b = attr(nd, "transB", 0)
        w = wq.ints.T if trans_b else wq.ints
        acc = x @ w
        out_scale = sx * weight_column_scale(wq, nd, 0 if trans_b else 1) * attr(nd, "alpha", 1.0)
    if bias is None:
        return acc * out_scale
    bias_scale = np.broadcast_to(np.float32(np.asarray(out_scale).reshape(-1)), np.shape(bias_q.ints)) \
        if bias_q is not None else None
    if bias_q is not None and attr(nd, "beta", 1.0) == 1.0 and \
            np.array_equal(np.broadcast_to(np.float32(bias_q.scale), np.shape(bias_q.ints)), bias_scale):
        # Bias codes at the accumulator's scale (quantize_static's int32 bias): added to the sum.
        shape = (1, -1, 1, 1) if nd.op_type == "Conv" else (-1,)
        return (acc + bias_q.ints.reshape(shape)) * out_scale
    shape = (1, -1, 1, 1) if nd.op_type == "Conv" else np.shape(bias)
    return acc * out_scale + attr(nd, "beta", 1.0) * np.reshape(bias, shape)


def qlinear(nd, a):
    """QLinearConv / QLinearMatMul: exact accumulation, then requantisation to y's type."""
    if nd.op_type == "QLinearConv":
        x, sx, zx, w, sw, zw, sy, zy = a[:8]
        bias = a[8] if len(a) > 8 else None
        acc = conv(x - zx.astype(np.float64), w - axis_scale(zw, 0, w.ndim), None, nd)
        if bias is not None:
            acc = acc + bias.reshape(1, -1, 1, 1)
        multiplier = np.float64(sx) * axis_scale(sw, 1, 4) / np.float64(sy)
    else:
        x, sx, zx, w, sw, zw, sy, zy = a
        acc = (x - zx.astype(np.float64)) @ (w - axis_scale(zw, -1, w.ndim))
        multiplier = np.float64(sx) * np.asarray(sw, np.float64).reshape(-1) / np.float64(sy)
    return saturate(round_half_even(acc * multiplier) + zy.astype(np.float64), zy.dtype)


class Evaluator:
    """Runs every node of `model` in order; `run(x)` returns the graph outputs."""

    def __init__(self, model):
        self.model = model
        self.inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
        self.float_gemms = 0  # Conv/MatMul/Gemm evaluated in float (operands not quantised)

    def run(self, x):
        env = dict(self.inits)
        qforms = {}
        env[self.model.graph.input[0].name] = x
        for nd in self.model.graph.node:
            a = [env[i] if i else None for i in nd.input]
            op = nd.op_type
            if op == "DequantizeLinear":
                q, scale = a[0], a[1]
                zp = a[2] if len(a) > 2 and a[2] is not None else np.zeros((), q.dtype)
                axis = attr(nd, "axis", 1)
                ints = q.astype(np.float64) - axis_scale(zp, axis, q.ndim)
                qforms[nd.output[0]] = Quantised(ints, axis_scale(scale, axis, q.ndim), axis)
                y = ints * axis_scale(scale, axis, q.ndim)
            elif op == "QuantizeLinear":
                scale = a[1]
                zp = a[2] if len(a) > 2 and a[2] is not None else np.zeros((), np.uint8)
                axis = attr(nd, "axis", 1)
                y = saturate(round_half_even(a[0] / axis_scale(scale, axis, a[0].ndim)) +
                             axis_scale(zp, axis, a[0].ndim), zp.dtype)
            elif op in ("QLinearConv", "QLinearMatMul"):
                y = qlinear(nd, [v.astype(np.float64) if i in (0, 3) else v for i, v in enumerate(a)])
            elif op in GEMM_OPS and nd.input[0] in qforms and nd.input[1] in qforms:
                bias = a[2] if len(a) > 2 else None
                bias_q = qforms.get(nd.input[2]) if len(a) > 2 and nd.input[2] else None
                y = integer_gemm(nd, qforms[nd.input[0]], qforms[nd.input[1]], bias, bias_q)
            else:
                if op in GEMM_OPS:
                    self.float_gemms += 1
                y = float_node(nd, [v.astype(np.float64) if v is not None else None for v in a])
                if op in SHAPE_OPS and nd.input[0] in qforms:
                    src = qforms[nd.input[0]]
                    if src.per_tensor():
                        qforms[nd.output[0]] = Quantised(float_node(nd, [src.ints]), src.scale)
            env[nd.output[0]] = y
        return [env[o.name] for o in self.model.graph.output]


def self_test():
    """Hand-computed cases: exact accumulation, int32 bias codes, round-half-even ties,
    saturation, per-channel weight scales, and the QOperator form."""
    f = TensorProto.FLOAT

    def model(nodes, inits, in_shape, out_shape):
        g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", f, in_shape)],
                              [helper.make_tensor_value_info("y", f, out_shape)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])

    # x = [3, 5] (codes 13, 15 at zero point 10, scale 0.5); W = [[2, -1], [4, 1]] per column
    # scales 0.25 and 1; bias codes [1, -2] at scale 0.5*[0.25, 1].
    # acc = [3*2 + 5*4 + 1, 3*(-1) + 5*1 - 2] = [27, 0]; y_float = [27*0.125, 0] = [3.375, 0].
    # Q at scale 0.75, zero point 128: 3.375/0.75 = 4.5 -> 4 (half to even) + 128 = 132; 0 -> 128.
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
        helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], axis=1),
        helper.make_node("DequantizeLinear", ["bq", "bs"], ["bd"], axis=0),
        helper.make_node("MatMul", ["xd", "wd"], ["m"]),
        helper.make_node("Add", ["m", "bd"], ["a"]),
        helper.make_node("QuantizeLinear", ["a", "ys", "yz"], ["yq"]),
        helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"]),
    ]
    inits = {"xs": np.float32(0.5), "xz": np.uint8(10), "wq": np.array([[2, -1], [4, 1]], np.int8),
             "ws": np.array([0.25, 1], np.float32), "wz": np.zeros(2, np.int8),
             "bq": np.array([1, -2], np.int32), "bs": np.array([0.125, 0.5], np.float32),
             "ys": np.float32(0.75), "yz": np.uint8(128)}
    (y,) = Evaluator(model(nodes, inits, [1, 2], [1, 2])).run(np.array([[1.5, 2.5]], np.float32))
    # MatMul then a float Add of the dequantised bias: [3.25, 1] + [0.125, -1], the same values.
    expect = (np.array([[132, 128]]) - 128) * 0.75
    assert np.array_equal(y, expect), f"MatMul+Add: {y} != {expect}"

    # Gemm with the int32 bias codes folded into the accumulator, and saturation at 255.
    nodes[4:6] = [helper.make_node("Gemm", ["xd", "wd", "bd"], ["a"])]
    (y,) = Evaluator(model(nodes, inits, [1, 2], [1, 2])).run(np.array([[1.5, 2.5]], np.float32))
    assert np.array_equal(y, expect), f"Gemm: {y} != {expect}"
    (y,) = Evaluator(model(nodes, inits, [1, 2], [1, 2])).run(np.array([[500.0, 500.0]], np.float32))
    # x saturates to code 255 (245 steps): acc + bias = [1471, -2] -> [183.875, -1] / 0.75
    # -> [245.2 -> 373, saturated to 255; -1.33 -> -1 + 128].
    expect = (np.array([[255, 128 + round(-1 / 0.75)]]) - 128) * 0.75
    assert np.array_equal(y, expect), f"Gemm saturation: {y} != {expect}"

    # QLinearMatMul (no bias): acc [26, 2] * 0.5*[0.25, 1]/0.75 = [4.33, 1.33] -> [4, 1] + 128;
    # at y_scale 0.25: [26*0.125/0.25, 2*0.5/0.25] = [13, 4] + 128.
    q_nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node("QLinearMatMul", ["xq", "xs", "xz", "wq", "ws", "wz", "ys", "yz"], ["yq"]),
        helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"]),
    ]
    for ys, codes in ((0.75, [132, 129]), (0.25, [141, 132])):
        inits["ys"] = np.float32(ys)
        (y,) = Evaluator(model(q_nodes, inits, [1, 2], [1, 2])).run(np.array([[1.5, 2.5]], np.float32))
        expect = (np.array([codes]) - 128) * ys
        assert np.allclose(y, expect, rtol=0, atol=1e-12), f"QLinearMatMul y_scale {ys}: {y} != {expect}"

    # Round half to even in QuantizeLinear: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -0.5 -> 0, -1.5 -> -2.
    ev = Evaluator(model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
                          helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])],
                         {"s": np.float32(1), "z": np.int8(0)}, [5], [5]))
    (y,) = ev.run(np.array([0.5, 1.5, 2.5, -0.5, -1.5], np.float32))
    assert np.array_equal(y, [0, 2, 2, 0, -2]), f"round half to even: {y}"

    # Exactness: a 4096-term integer sum near 2^26 in a different order gives the same bits.
    rng = np.random.default_rng(1)
    a = rng.integers(-255, 256, (1, 4096)).astype(np.float64)
    b = rng.integers(-128, 128, (4096, 1)).astype(np.float64)
    assert (a @ b)[0, 0] == float(np.dot(a[0, ::-1].astype(np.int64), b[::-1, 0].astype(np.int64)))
    print("qdq_reference self-test: 7 hand-computed cases passed")
    print("PASS")


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    model_path, inp, out = sys.argv[1:]
    (y, *_) = Evaluator(onnx.load(model_path)).run(np.load(inp))
    np.save(out, y.astype(np.float32))


if __name__ == "__main__":
    main()
