#!/usr/bin/python3
"""Generates a MobileNetV3-style ONNX model (tests/data/mobilenet_v3ish.onnx).

Depthwise-separable inverted residual blocks, hard-swish, squeeze-and-excitation, global
average pooling and a 1x1-conv classifier, >= 10 M MACs, with fixed-seed weights whose
BatchNorm is already folded (as exporters do for inference).

    /usr/bin/python3 scripts/make_mobilenet.py [OUT_DIR]
    /usr/bin/python3 scripts/make_mobilenet.py --calib DIR   # only the calibration set

The calibration set (16 N(0,1) samples, fixed seed) is generated, not shipped.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RES = 128


class Builder:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.n, self.macs = [], [], 0, 0

    def name(self, base):
        self.n += 1
        return f"{base}_{self.n}"

    def const(self, base, arr):
        nm = self.name(base)
        self.inits.append(numpy_helper.from_array(arr.astype(np.float32), nm))
        return nm

    def conv(self, x, cin, cout, k, stride, hw, group=1, act=None):
        fan_in = (cin // group) * k * k
        w = self.rng.normal(0, np.sqrt(2.0 / fan_in), (cout, cin // group, k, k))
        b = self.rng.normal(0, 0.05, (cout,))
        out = self.name("conv")
        self.nodes.append(helper.make_node(
            "Conv", [x, self.const("w", w), self.const("b", b)], [out], name=out,
            kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4, group=group))
        ohw = (hw + 2 * (k // 2) - k) // stride + 1
        self.macs += ohw * ohw * cout * (cin // group) * k * k
        return self.act(out, act), ohw

    def act(self, x, kind):
        if kind is None:
            return x
        out = self.name(kind.lower())
        op = {"relu": "Relu", "hswish": "HardSwish", "hsigmoid": "HardSigmoid"}[kind]
        self.nodes.append(helper.make_node(op, [x], [out], name=out))
        return out

    def se(self, x, c, hw):
        squeeze = max(8, c // 4)
        pooled = self.name("gap")
        self.nodes.append(helper.make_node("GlobalAveragePool", [x], [pooled], name=pooled))
        h, _ = self.conv(pooled, c, squeeze, 1, 1, 1, act="relu")
        g, _ = self.conv(h, squeeze, c, 1, 1, 1, act="hsigmoid")
        out = self.name("se_scale")
        self.nodes.append(helper.make_node("Mul", [x, g], [out], name=out))
        self.macs += hw * hw * c
        return out

    def block(self, x, cin, exp, cout, k, stride, hw, act, se):
        h = x
        if exp != cin:
            h, _ = self.conv(h, cin, exp, 1, 1, hw, act=act)
        h, ohw = self.conv(h, exp, exp, k, stride, hw, group=exp, act=act)
        if se:
            h = self.se(h, exp, ohw)
        h, _ = self.conv(h, exp, cout, 1, 1, ohw)
        if stride == 1 and cin == cout:
            out = self.name("residual")
            self.nodes.append(helper.make_node("Add", [x, h], [out], name=out))
            h = out
        return h, ohw


def build():
    b = Builder(2026)
    x, hw = b.conv("input", 3, 16, 3, 2, RES, act="hswish")
    cfg = [  # cin, exp, cout, k, stride, act, se
        (16, 16, 16, 3, 2, "relu", True),
        (16, 64, 24, 3, 2, "relu", False),
        (24, 72, 24, 3, 1, "relu", False),
        (24, 96, 40, 5, 2, "hswish", True),
        (40, 240, 40, 5, 1, "hswish", True),
        (40, 120, 48, 5, 1, "hswish", True),
        (48, 144, 48, 5, 1, "hswish", True),
    ]
    for cin, exp, cout, k, s, act, se in cfg:
        x, hw = b.block(x, cin, exp, cout, k, s, hw, act, se)
    x, hw = b.conv(x, 48, 288, 1, 1, hw, act="hswish")
    pooled = b.name("gap")
    b.nodes.append(helper.make_node("GlobalAveragePool", [x], [pooled], name=pooled))
    x, _ = b.conv(pooled, 288, 512, 1, 1, 1, act="hswish")
    x, _ = b.conv(x, 512, 100, 1, 1, 1)
    b.nodes.append(helper.make_node("Flatten", [x], ["logits"], name="flatten"))
    graph = helper.make_graph(
        b.nodes, "mobilenet_v3ish",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, RES, RES])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 100])], b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)],
                              producer_name="npu make_mobilenet.py")
    onnx.checker.check_model(model)
    return model, b.macs


def write_calibration(calib, samples=16):
    rng = np.random.default_rng(1234)
    for s in range(samples):
        d = os.path.join(calib, f"sample_{s:02d}")
        os.makedirs(d, exist_ok=True)
        np.save(os.path.join(d, "input_0.npy"), rng.normal(0, 1, (1, 3, RES, RES)).astype(np.float32))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--calib":
        write_calibration(sys.argv[2])
        return
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data"
    os.makedirs(out, exist_ok=True)
    model, macs = build()
    assert macs >= 10_000_000, macs
    path = os.path.join(out, "mobilenet_v3ish.onnx")
    onnx.save(model, path)
    rng = np.random.default_rng(99)
    np.save(os.path.join(out, "mobilenet_input.npy"), rng.normal(0, 1, (1, 3, RES, RES)).astype(np.float32))
    print(f"wrote {path}: {len(model.graph.node)} nodes, {macs / 1e6:.1f} M MACs")


if __name__ == "__main__":
    main()
