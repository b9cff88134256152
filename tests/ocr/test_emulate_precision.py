"""emulate_precision.py's own steps on small synthetic inputs (no models, no onnxruntime):
kernel-sum codes, the report's value rows, activation inputs and the inserted grid nodes."""
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emulate_precision as ep  # noqa: E402


def test_kernel_sum_codes_keep_each_kernel_sum_within_half_a_code():
    rng = np.random.default_rng(1)
    r = rng.uniform(-127, 127, size=(64, 9))
    r[:, 0] = 127.0  # the tap that sets the scale
    q = ep.kernel_sum_codes(r)
    assert np.all(np.abs(q.sum(axis=1) - r.sum(axis=1)) <= 0.5 + 1e-9)
    assert np.all(np.abs(q - r) < 1.5)  # every tap on one of its two neighbouring codes
    assert np.all(q[:, 0] == 127)
    assert np.all(q == np.round(q)) and np.abs(q).max() <= 127
    nearest = np.round(r)
    # the fewest taps move: at most as many as whole codes of excess
    moved = (q != nearest).sum(axis=1)
    assert np.all(moved <= np.ceil(np.abs((nearest - r).sum(axis=1)) - 0.5) + 1e-9)


def test_kernel_sum_codes_fix_an_edge_detector():
    # PP-OCRv4 rec's first depthwise kernel: taps up to ±5.98 that sum to 0.0028
    w = np.array([[0.436, -2.079, 0.411, -1.914, -3.915, -1.622, 1.485, 5.975, 1.225]])
    s = np.abs(w).max() / 127
    assert abs((np.round(w / s) * s).sum() - w.sum()) > 0.04
    assert abs((ep.kernel_sum_codes(w / s) * s).sum() - w.sum()) <= 0.5 * s


def test_report_rows_are_parsed(tmp_path):
    report = tmp_path / "report.txt"
    report.write_text(
        "#    value   layer (op)   on    SQNR dB\n"
        "in   x       (model input)        57.7\n"
        "0    a.1     p2o.Conv.0 (Conv)    npu      30.1     27.5\n"
        "1    b.2     p2o.Mul.3 (Chain(Mul,Sigmoid,Mul))    npu      9.1\n"
        "2    c.3     p2o.Mul.4 (Chain(Mul,Sigmoid,... npu      9.1\n"
        "3    d.4     p2o.Transpose.0 (Transpose)        host     9.1\n")
    assert ep.report_values(str(report)) == [("a.1", "p2o.Conv.0", "Conv"),
                                             ("b.2", "p2o.Mul.3", "Chain(Mul,Sigmoid,Mul)"),
                                             ("c.3", "p2o.Mul.4", "Chain(Mul,Sigmoid,...")]


def _model(nodes, inputs, outputs, opset=13):
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info(i, onnx.TensorProto.FLOAT, [4]) for i in inputs],
                          [helper.make_tensor_value_info(o, onnx.TensorProto.FLOAT, [4]) for o in outputs])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _run(model, feeds):
    """A numpy interpreter for the few operators these graphs use (Debian's python3-onnx 1.12
    has no reference evaluator)."""
    env = dict(feeds)
    ops = {"Neg": np.negative, "Div": np.divide, "Add": np.add, "Sub": np.subtract,
           "Mul": np.multiply, "Floor": np.floor}
    for n in model.graph.node:
        if n.op_type == "Constant":
            env[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
        elif n.op_type == "Clip":
            attrs = {a.name: a.f for a in n.attribute}
            lo = env[n.input[1]] if len(n.input) > 1 else attrs["min"]
            hi = env[n.input[2]] if len(n.input) > 2 else attrs["max"]
            env[n.output[0]] = np.clip(env[n.input[0]], lo, hi)
        else:
            env[n.output[0]] = ops[n.op_type](*(env[i] for i in n.input))
    return env[model.graph.output[0].name]


def test_activation_inputs_find_hard_swish_relu_and_sigmoid():
    three = helper.make_node("Constant", [], ["three"], value=numpy_helper.from_array(np.array(3, np.float32), "three"))
    nodes = [helper.make_node("Neg", ["i"], ["x"]), three, helper.make_node("Add", ["x", "three"], ["x3"]),
             helper.make_node("Clip", ["x3"], ["c"]), helper.make_node("Mul", ["x", "c"], ["hs"]),
             helper.make_node("Relu", ["hs"], ["r"]), helper.make_node("Sigmoid", ["r"], ["y"])]
    assert ep.activation_inputs(_model(nodes, ["i"], ["y"])) == {"x": "HardSwish", "hs": "Relu", "r": "Sigmoid"}
    # a graph input is not a value the device computes
    assert "x" not in ep.activation_inputs(_model(nodes[1:], ["x"], ["y"]))


def test_fake_quantise_rounds_onto_the_grid_with_an_integer_zero_point():
    for opset in (9, 13):
        m = _model([helper.make_node("Neg", ["x"], ["v"]), helper.make_node("Neg", ["v"], ["y"])], ["x"], ["y"], opset)
        ep.fake_quantise(m, {"v": (-1.0, 3.0, 2)})  # 4 levels: step 4/3, zero point 1 (value 0 exact)
        onnx.checker.check_model(m)
        assert [n.op_type for n in m.graph.node].count("Floor") == 1
        x = np.array([1.0, -0.4, -5.0, 0.0, -1.9], np.float32)  # v = -x
        y = _run(m, {"x": x})
        step = 4 / 3
        # v: -1 -> code 0 (-1.33), 0.4 -> 1 (0), 5 -> 3 (clipped: 2.67), 0 -> 1 (0), 1.9 -> 2 (1.33)
        expect = -np.array([-1, 0, 2, 0, 1], np.float32) * step
        assert np.allclose(y, expect, atol=1e-6), (opset, y, expect)
