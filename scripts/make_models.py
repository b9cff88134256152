#!/usr/bin/python3
"""Generates the small ONNX models that ship with the repository.

Run with Debian's python3 (python3-onnx, python3-numpy):
    /usr/bin/python3 scripts/make_models.py tests/data

gemm_relu.onnx   Gemm [4,64]x[64,32] + bias, then Relu (the walking skeleton's model)
mlp.onnx         the demo: MatMul+Add+Relu [4,64]->[64,32], then Gemm [32,10] (transB)
movement.onnx    data movement and dynamic operands: Gemm, Transpose, MatMul of two
                 activations, Concat of three differently quantised values
dynamic_conv.onnx    Conv whose W and B are graph inputs (pads 1, stride 2), then Relu
cnn_ops.onnx     ConvTranspose (stride 2), padded MaxPool/AveragePool, Resize nearest x2, Conv 1x1,
                 PRelu with per-channel slopes, Flatten of an NHWC value (a DMA copy)
runtime_operands.onnx  Clip whose min/max are scalar graph inputs, PRelu with a slope input [40],
                 Div by Sigmoid(slope) (a run-time divisor of one sign)
qdq_param_inputs.onnx  QuantizeLinear -> DequantizeLinear [2,32] whose scale and zero point are
                 graph inputs, then Relu
integer_io_relu.onnx / integer_io_sqrt.onnx  uint8 codes [2,8] -> DequantizeLinear (0.1, 128) ->
                 Relu (NPU) / Sqrt (host) -> float
gemm_scalar_bias.onnx  Gemm [5,40]x[40,20] whose one-element bias C (shape []) is an input, beta 20
deconv1d.onnx    1-D ConvTranspose [1,20,9] -> [1,18,18] (stride 2, pads 1/0, constant W): NHWC with H = 1
dilated_pool.onnx  MaxPool 3x3, dilations [2,3], pads [1,2,1,2], strides [1,2] on [1,20,11,13]
pool3d_max.onnx  MaxPool 3-D [3,2,3], strides [2,1,2], pads [1,0,1,1,1,0], dilations [1,2,1] on [2,3,9,8,11]
pool3d_avg.onnx  AveragePool 3-D [2,3,3], strides [2,2,1], pads [1,1,0,0,1,1] on [1,3,7,9,10]
pool3d_avg_ceil.onnx  AveragePool 3-D [3,2,2], strides [2,2,2], pads [1,0,1,1,1,0], count_include_pad,
                 ceil_mode on [1,2,8,7,9]
deconv3d.onnx    3-D ConvTranspose [1,20,3,4,5] -> [1,6,7,9,10] (strides 2, pads [1,0,1,0,1,0],
                 output_padding [1,1,1], constant W [20,6,3,3,2] and bias)
deconv3d_dynamic.onnx  3-D ConvTranspose [1,20,3,4,5] -> [1,6,4,7,8] with W [20,6,2,3,3] a graph input,
                 strides [1,2,1], dilations [2,1,2], pads [0,1,0,1,1,1]
conv3d.onnx      3-D Conv [1,5,6,7,8] -> [1,7,3,6,4] (W [7,5,3,2,3] constant, bias, strides [2,1,2],
                 pads [1,0,1,1,1,0], dilations [1,2,1])
conv3d_dynamic.onnx  3-D Conv [1,20,4,5,6] -> [1,18,4,5,6] with W [18,20,3,3,3] a graph input,
                 auto_pad SAME_UPPER
empty_reshape.onnx  Reshape of an empty [0,3,4] tensor to [3,4,0] (allowzero), then Relu
quantize_axis.onnx  QuantizeLinear [2,3,4,5] -> uint8, per-axis (axis 1) scales and zero points
dequantize_axis.onnx  DequantizeLinear int8 [2,3,4,5] -> float, per-axis (axis -1) scales and zero points
matmul_shared_b.onnx  MatMul [2,6,40] x [40,24] with B a graph input (one B for both batches)
big_transpose.onnx  Transpose [300,200] then Relu: 60000 element rows, more than one scratchpad load
reshape_shape_input.onnx  Reshape [2,3,4] whose shape operand is a graph input (int64)
dynamic_gemm.onnx    Gemm with A, B (transB) and a matrix C as graph inputs, alpha 0.5, beta 2
exporter_patterns.onnx  blocks as Paddle2ONNX and PyTorch spell them (opset 11): Conv, then
                 Mul(constant, y) + constant (PP-LCNet's learnable affine, constant first), hard-swish
                 as x*Clip(x+3,0,6)/6 and another affine; depthwise Conv with a per-channel Mul/Add;
                 squeeze-and-excitation (GlobalAveragePool, 1x1 Convs, HardSigmoid, Mul by [1,C,1,1]);
                 ConvTranspose k2 s2, a separate bias Add, BatchNormalization, Relu; SiLU x*Sigmoid(x)
                 and GELU x*(1+Erf(x/sqrt(2)))/2. [1,8,12,12] -> [1,8,24,24]
deconv_head.onnx  PP-OCR's upsampling head, larger than the scratchpads hold at once (output-row
                 bands): ConvTranspose k3 s2 pads 1 output_padding 1 [1,20,36,36] -> [1,16,72,72]
                 (overlapping taps across band edges), BatchNormalization, Relu, ConvTranspose k2 s2
                 -> [1,1,144,144], Sigmoid
layernorm_block.onnx  a transformer block's LayerNorm as Paddle2ONNX writes it, behind a Reshape whose
                 shape a Shape/Slice/Concat chain computes (shape inference leaves it unknown; it folds
                 after calibration): [1,40,48] -> Reshape -> ReduceMean, Sub, Pow 2, ReduceMean, Add eps,
                 Sqrt, Div, Mul gamma, Add beta -> MatMul [48,32] + bias -> [1,40,32]
slice_channels.onnx  Slice as exporters use it, as strided copies: channels [2:9] of [1,12,6,10], Relu,
                 the last 5 channels (negative start), Concat, then every second column from 1 (steps),
                 times 0.25 (a Mul by a positive constant: a rescaled view) -> [1,12,6,5]
attention_block.onnx  a self-attention block as Paddle2ONNX writes PP-OCRv4's (SVTR), opset 13: x [1,12,24]
                 -> MatMul qkv [24,72] + bias -> Reshape [1,12,3,2,12] -> Transpose (2,0,3,1,4) ->
                 Slice/Squeeze q, k, v [1,2,12,12], q times d^-1/2, k Transposed -> MatMul q.k^T ->
                 Softmax (last axis) -> MatMul .v -> Transpose (0,2,1,3) -> Reshape [1,12,24] ->
                 MatMul [24,40] + bias -> Softmax over 40 classes -> [1,12,40] (run-time MatMuls, 4-D
                 values stored dense, VEC SOFTMAX with tails at every array dim)
Weights come from a fixed seed, so the files are reproducible.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save(model, path):
    onnx.checker.check_model(model)
    onnx.save(model, path)
    print(f"wrote {path}")


def gemm_relu(rng):
    w = rng.normal(0, 0.2, (64, 32)).astype(np.float32)
    b = rng.normal(0, 0.1, (32,)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["y0"], name="fc"),
         helper.make_node("Relu", ["y0"], ["y"], name="relu")],
        "gemm_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 32])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             producer_name="npu make_models.py")


def mlp(rng):
    w1 = rng.normal(0, 0.2, (64, 32)).astype(np.float32)
    b1 = rng.normal(0, 0.1, (32,)).astype(np.float32)
    w2 = rng.normal(0, 0.3, (10, 32)).astype(np.float32)  # Gemm with transB=1
    b2 = rng.normal(0, 0.1, (10,)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["h0"], name="fc1"),
         helper.make_node("Add", ["h0", "b1"], ["h1"], name="fc1_bias"),
         helper.make_node("Relu", ["h1"], ["h"], name="relu1"),
         helper.make_node("Gemm", ["h", "w2", "b2"], ["logits"], name="fc2", transB=1)],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [4, 10])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
         numpy_helper.from_array(w2, "w2"), numpy_helper.from_array(b2, "b2")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             producer_name="npu make_models.py")


def convnet(rng):
    """Conv 3x3 (3->16, pad 1) + Relu, depthwise 3x3 stride 2 + Clip(0,6), conv 1x1 16->24."""
    w1 = rng.normal(0, 0.3, (16, 3, 3, 3)).astype(np.float32)
    b1 = rng.normal(0, 0.1, (16,)).astype(np.float32)
    w2 = rng.normal(0, 0.3, (16, 1, 3, 3)).astype(np.float32)
    b2 = rng.normal(0, 0.1, (16,)).astype(np.float32)
    w3 = rng.normal(0, 0.2, (24, 16, 1, 1)).astype(np.float32)
    b3 = rng.normal(0, 0.1, (24,)).astype(np.float32)
    lo = numpy_helper.from_array(np.array(0, np.float32), "lo")
    hi = numpy_helper.from_array(np.array(6, np.float32), "hi")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
         helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="dw2", group=16, pads=[1, 1, 1, 1],
                          strides=[2, 2]),
         helper.make_node("Clip", ["c2", "lo", "hi"], ["r2"], name="relu6"),
         helper.make_node("Conv", ["r2", "w3", "b3"], ["y"], name="pw3")],
        "convnet",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 24, 8, 8])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
         numpy_helper.from_array(w2, "w2"), numpy_helper.from_array(b2, "b2"),
         numpy_helper.from_array(w3, "w3"), numpy_helper.from_array(b3, "b3"), lo, hi])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             producer_name="npu make_models.py")


def movement(rng):
    """a = Gemm(x) [4,24]; m = a · Transpose(a) [4,4]; y = Concat(m, a, x) on axis 1 [4,48]."""
    w = rng.normal(0, 0.3, (20, 24)).astype(np.float32)
    b = rng.normal(0, 0.1, (24,)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["a"], name="fc"),
         helper.make_node("Transpose", ["a"], ["t"], name="transpose", perm=[1, 0]),
         helper.make_node("MatMul", ["a", "t"], ["m"], name="gram"),
         helper.make_node("Concat", ["m", "a", "x"], ["y"], name="concat", axis=1)],
        "movement",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 20])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 48])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             producer_name="npu make_models.py")


def dynamic_conv():
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1], strides=[2, 2]),
         helper.make_node("Relu", ["c"], ["y"], name="relu")],
        "dynamic_conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 20, 9, 9]),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, [24, 20, 3, 3]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [24])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 24, 5, 5])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             producer_name="npu make_models.py")


def dynamic_gemm():
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["a", "b", "c"], ["y"], name="gemm", transB=1, alpha=0.5, beta=2.0)],
        "dynamic_gemm",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [5, 40]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [20, 40]),
         helper.make_tensor_value_info("c", TensorProto.FLOAT, [5, 20])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5, 20])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             producer_name="npu make_models.py")


def reshape_shape_input():
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")],
        "reshape_shape_input",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             producer_name="npu make_models.py")


def cnn_ops(rng):
    wt = rng.normal(0, 0.2, (20, 18, 3, 3)).astype(np.float32)
    bt = rng.normal(0, 0.1, (18,)).astype(np.float32)
    w1 = rng.normal(0, 0.3, (4, 18, 1, 1)).astype(np.float32)
    b1 = rng.normal(0, 0.1, (4,)).astype(np.float32)
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    slope = numpy_helper.from_array(np.array([0.1, -0.2, 0.3, 0.05], np.float32).reshape(4, 1, 1), "slope")
    graph = helper.make_graph(
        [helper.make_node("ConvTranspose", ["x", "wt", "bt"], ["up"], name="deconv", strides=[2, 2],
                          pads=[1, 1, 1, 1], output_padding=[1, 1]),
         helper.make_node("MaxPool", ["up"], ["mp"], name="maxpool", kernel_shape=[3, 3], strides=[2, 2],
                          pads=[1, 1, 1, 1]),
         helper.make_node("AveragePool", ["mp"], ["ap"], name="avgpool", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
         helper.make_node("Resize", ["ap", "", "scales"], ["rs"], name="resize", mode="nearest"),
         helper.make_node("Conv", ["rs", "w1", "b1"], ["c1"], name="conv1x1"),
         helper.make_node("PRelu", ["c1", "slope"], ["pr"], name="prelu"),
         helper.make_node("Flatten", ["pr"], ["y"], name="flatten")],
        "cnn_ops",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 20, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1024])],
        [numpy_helper.from_array(wt, "wt"), numpy_helper.from_array(bt, "bt"), numpy_helper.from_array(w1, "w1"),
         numpy_helper.from_array(b1, "b1"), scales, slope])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             producer_name="npu make_models.py")


def runtime_operands():
    graph = helper.make_graph(
        [helper.make_node("Clip", ["x", "lo", "hi"], ["c"], name="clip"),
         helper.make_node("PRelu", ["c", "slope"], ["p"], name="prelu"),
         helper.make_node("Sigmoid", ["slope"], ["s"], name="sigmoid"),
         helper.make_node("Div", ["p", "s"], ["y"], name="div")],
        "runtime_operands",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 40]),
         helper.make_tensor_value_info("lo", TensorProto.FLOAT, []),
         helper.make_tensor_value_info("hi", TensorProto.FLOAT, []),
         helper.make_tensor_value_info("slope", TensorProto.FLOAT, [40])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 40])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             producer_name="npu make_models.py")


def big_transpose():
    graph = helper.make_graph(
        [helper.make_node("Transpose", ["x"], ["t"], name="transpose", perm=[1, 0]),
         helper.make_node("Relu", ["t"], ["y"], name="relu")],
        "big_transpose",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [300, 200])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [200, 300])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             producer_name="npu make_models.py")


def gemm_scalar_bias():
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["a", "b", "c"], ["y"], name="gemm", beta=20.0)],
        "gemm_scalar_bias",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [5, 40]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [40, 20]),
         helper.make_tensor_value_info("c", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5, 20])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             producer_name="npu make_models.py")


def deconv1d(rng):
    w = rng.normal(0, 0.2, (20, 18, 3)).astype(np.float32)
    b = rng.normal(0, 0.1, (18,)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], name="deconv1d", strides=[2], pads=[1, 0])],
        "deconv1d",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 20, 9])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 18, 18])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             producer_name="npu make_models.py")


def dilated_pool():
    graph = helper.make_graph(
        [helper.make_node("MaxPool", ["x"], ["y"], name="maxpool", kernel_shape=[3, 3], dilations=[2, 3],
                          pads=[1, 2, 1, 2], strides=[1, 2])],
        "dilated_pool",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 20, 11, 13])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 20, 9, 6])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             producer_name="npu make_models.py")


def pool_output(size, kernel, stride, pad_begin, pad_end, dilation=1, ceil_mode=False):
    span = size + pad_begin + pad_end - ((kernel - 1) * dilation + 1)
    return (-(-span // stride) if ceil_mode else span // stride) + 1


def pool3d(op, name, x_shape, kernel, strides, pads, dilations=(1, 1, 1), **attrs):
    y_shape = list(x_shape[:2]) + [
        pool_output(x_shape[2 + d], kernel[d], strides[d], pads[d], pads[d + 3], dilations[d],
                    attrs.get("ceil_mode", 0) == 1) for d in range(3)]
    if op == "MaxPool":
        attrs["dilations"] = list(dilations)
    graph = helper.make_graph(
        [helper.make_node(op, ["x"], ["y"], name=name, kernel_shape=list(kernel), strides=list(strides),
                          pads=list(pads), **attrs)],
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             producer_name="npu make_models.py")


def deconv3d(rng):
    w = rng.normal(0, 0.2, (20, 6, 3, 3, 2)).astype(np.float32)
    b = rng.normal(0, 0.1, (6,)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], name="deconv3d", strides=[2, 2, 2],
                          pads=[1, 0, 1, 0, 1, 0], output_padding=[1, 1, 1])],
        "deconv3d",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 20, 3, 4, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 7, 9, 10])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             producer_name="npu make_models.py")


def deconv3d_dynamic():
    graph = helper.make_graph(
        [helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="deconv3d_dynamic", strides=[1, 2, 1],
                          dilations=[2, 1, 2], pads=[0, 1, 0, 1, 1, 1])],
        "deconv3d_dynamic",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 20, 3, 4, 5]),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, [20, 6, 2, 3, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 4, 7, 8])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             producer_name="npu make_models.py")


def conv3d(rng):
    w = rng.normal(0, 0.2, (7, 5, 3, 2, 3)).astype(np.float32)
    b = rng.normal(0, 0.1, (7,)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv3d", strides=[2, 1, 2],
                          pads=[1, 0, 1, 1, 1, 0], dilations=[1, 2, 1])],
        "conv3d",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 5, 6, 7, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 7, 3, 6, 4])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             producer_name="npu make_models.py")


def conv3d_dynamic():
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="conv3d_dynamic", auto_pad="SAME_UPPER")],
        "conv3d_dynamic",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 20, 4, 5, 6]),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, [18, 20, 3, 3, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 18, 4, 5, 6])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             producer_name="npu make_models.py")


def empty_reshape():
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["r"], name="reshape", allowzero=1),
         helper.make_node("Relu", ["r"], ["y"], name="relu")],
        "empty_reshape",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [0, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4, 0])],
        [helper.make_tensor("shape", TensorProto.INT64, [3], [3, 4, 0])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)],
                             producer_name="npu make_models.py")


def quantize_axis():
    graph = helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "scale", "zero_point"], ["y"], name="quantize", axis=1)],
        "quantize_axis",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 5])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [2, 3, 4, 5])],
        [helper.make_tensor("scale", TensorProto.FLOAT, [3], [0.02, 0.5, 0.125]),
         helper.make_tensor("zero_point", TensorProto.UINT8, [3], [0, 128, 250])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             producer_name="npu make_models.py")


def dequantize_axis():
    graph = helper.make_graph(
        [helper.make_node("DequantizeLinear", ["x", "scale", "zero_point"], ["y"], name="dequantize", axis=-1)],
        "dequantize_axis",
        [helper.make_tensor_value_info("x", TensorProto.INT8, [2, 3, 4, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4, 5])],
        [helper.make_tensor("scale", TensorProto.FLOAT, [5], [0.1, 0.25, 1.5, 0.003, 2.0]),
         helper.make_tensor("zero_point", TensorProto.INT8, [5], [0, -128, 127, 5, -7])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             producer_name="npu make_models.py")


def matmul_shared_b():
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["y"], name="matmul")],
        "matmul_shared_b",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 6, 40]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [40, 24])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6, 24])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             producer_name="npu make_models.py")


def qdq_param_inputs():
    graph = helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "scale", "zero_point"], ["x_q"], name="quantize"),
         helper.make_node("DequantizeLinear", ["x_q", "scale", "zero_point"], ["x_dq"], name="dequantize"),
         helper.make_node("Relu", ["x_dq"], ["y"], name="relu")],
        "qdq_param_inputs",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 32]),
         helper.make_tensor_value_info("scale", TensorProto.FLOAT, []),
         helper.make_tensor_value_info("zero_point", TensorProto.INT8, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 32])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             producer_name="npu make_models.py")


def integer_io(op):
    graph = helper.make_graph(
        [helper.make_node("DequantizeLinear", ["x", "scale", "zero_point"], ["x_dq"], name="dequantize"),
         helper.make_node(op, ["x_dq"], ["y"], name=op.lower())],
        "integer_io_" + op.lower(),
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor("scale", TensorProto.FLOAT, [], [0.1]),
         helper.make_tensor("zero_point", TensorProto.UINT8, [], [128])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             producer_name="npu make_models.py")


def exporter_patterns(rng):
    def c(name, value):
        return numpy_helper.from_array(np.asarray(value, np.float32), name)

    inits = [c("w0", rng.normal(0, 0.3, (16, 8, 3, 3))), c("b0", rng.normal(0, 0.1, (16,))),
             c("a0", [0.9]), c("c0", [0.3]), c("three", 3.0), c("zero", 0.0), c("six", 6.0),
             c("a1", [0.6]), c("c1", [-0.2]),
             c("w1", rng.normal(0, 0.4, (16, 1, 3, 3))), c("b1", rng.normal(0, 0.1, (16,))),
             c("s1", rng.uniform(0.5, 1.5, (1, 16, 1, 1))), c("t1", rng.normal(0, 0.2, (16, 1, 1))),
             c("wse0", rng.normal(0, 0.4, (4, 16, 1, 1))), c("bse0", rng.normal(0, 0.1, (4,))),
             c("wse1", rng.normal(0, 0.4, (16, 4, 1, 1))), c("bse1", rng.normal(0, 0.1, (16,))),
             c("wt", rng.normal(0, 0.3, (16, 8, 2, 2))), c("bt", rng.normal(0, 0.1, (1, 8, 1, 1))),
             c("bn_scale", rng.uniform(0.5, 2, (8,))), c("bn_bias", rng.normal(0, 0.2, (8,))),
             c("bn_mean", rng.normal(0, 0.2, (8,))), c("bn_var", rng.uniform(0.05, 0.5, (8,))),
             c("sqrt2", [1.4142135]), c("one", [1.0]), c("half", [0.5])]
    n = helper.make_node
    graph = helper.make_graph(
        [n("Conv", ["x", "w0", "b0"], ["y0"], name="conv0", pads=[1, 1, 1, 1]),
         n("Mul", ["a0", "y0"], ["m0"], name="affine0_mul"), n("Add", ["m0", "c0"], ["t0"], name="affine0_add"),
         n("Add", ["t0", "three"], ["hs_a"], name="hs_add"), n("Clip", ["hs_a", "zero", "six"], ["hs_c"], name="hs_clip"),
         n("Mul", ["t0", "hs_c"], ["hs_m"], name="hs_mul"), n("Div", ["hs_m", "six"], ["hs"], name="hs_div"),
         n("Mul", ["a1", "hs"], ["m1"], name="affine1_mul"), n("Add", ["m1", "c1"], ["t1x"], name="affine1_add"),
         n("Conv", ["t1x", "w1", "b1"], ["y1"], name="dwconv", group=16, pads=[1, 1, 1, 1]),
         n("Mul", ["y1", "s1"], ["m2"], name="channel_mul"), n("Add", ["m2", "t1"], ["t2"], name="channel_add"),
         n("GlobalAveragePool", ["t2"], ["se_g"], name="se_pool"),
         n("Conv", ["se_g", "wse0", "bse0"], ["se_0"], name="se_conv0"), n("Relu", ["se_0"], ["se_r"], name="se_relu"),
         n("Conv", ["se_r", "wse1", "bse1"], ["se_1"], name="se_conv1"),
         n("HardSigmoid", ["se_1"], ["se_s"], name="se_gate", alpha=0.2, beta=0.5),
         n("Mul", ["t2", "se_s"], ["se"], name="se_mul"),
         n("ConvTranspose", ["se", "wt"], ["up"], name="deconv", strides=[2, 2], kernel_shape=[2, 2]),
         n("Add", ["up", "bt"], ["ub"], name="deconv_bias"),
         n("BatchNormalization", ["ub", "bn_scale", "bn_bias", "bn_mean", "bn_var"], ["bn"], name="bn"),
         n("Relu", ["bn"], ["r"], name="relu"),
         n("Sigmoid", ["r"], ["sg"], name="silu_sigmoid"), n("Mul", ["r", "sg"], ["silu"], name="silu_mul"),
         n("Div", ["silu", "sqrt2"], ["gd"], name="gelu_div"), n("Erf", ["gd"], ["ge"], name="gelu_erf"),
         n("Add", ["ge", "one"], ["g1"], name="gelu_add"), n("Mul", ["silu", "g1"], ["gm"], name="gelu_mul"),
         n("Mul", ["gm", "half"], ["y"], name="gelu_half")],
        "exporter_patterns",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 12, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 24, 24])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)],
                             producer_name="npu make_models.py")


def deconv_head(rng):
    def c(name, a):
        return numpy_helper.from_array(np.asarray(a, np.float32), name)
    inits = [c("w0", rng.normal(0, 0.15, (20, 16, 3, 3))), c("b0", rng.normal(0, 0.1, (16,))),
             c("bn_scale", rng.uniform(0.5, 2, (16,))), c("bn_bias", rng.normal(0, 0.2, (16,))),
             c("bn_mean", rng.normal(0, 0.2, (16,))), c("bn_var", rng.uniform(0.05, 0.5, (16,))),
             c("w1", rng.normal(0, 0.3, (16, 1, 2, 2)))]
    n = helper.make_node
    graph = helper.make_graph(
        [n("ConvTranspose", ["x", "w0", "b0"], ["up0"], name="deconv0", strides=[2, 2], kernel_shape=[3, 3],
           pads=[1, 1, 1, 1], output_padding=[1, 1]),
         n("BatchNormalization", ["up0", "bn_scale", "bn_bias", "bn_mean", "bn_var"], ["bn"], name="bn"),
         n("Relu", ["bn"], ["r"], name="relu"),
         n("ConvTranspose", ["r", "w1"], ["up1"], name="deconv1", strides=[2, 2], kernel_shape=[2, 2]),
         n("Sigmoid", ["up1"], ["y"], name="sigmoid")],
        "deconv_head",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 20, 36, 36])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 144, 144])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             producer_name="npu make_models.py")


def layernorm_block(rng):
    def c(name, a, dtype=np.float32):
        return numpy_helper.from_array(np.asarray(a, dtype), name)
    inits = [c("gamma", rng.uniform(0.5, 1.5, (48,))), c("beta", rng.normal(0, 0.2, (48,))),
             c("eps", [1e-6]), c("two", [2.0]), c("w", rng.normal(0, 0.2, (48, 32))), c("b", rng.normal(0, 0.1, (32,))),
             c("start0", [0], np.int64), c("end1", [1], np.int64), c("start2", [2], np.int64),
             c("end3", [3], np.int64), c("minus1", [-1], np.int64)]
    n = helper.make_node
    graph = helper.make_graph(
        [n("Shape", ["x"], ["xs"], name="shape0"),
         n("Slice", ["xs", "start0", "end1"], ["batch"], name="slice0"),
         n("Slice", ["xs", "start2", "end3"], ["chan"], name="slice1"),
         n("Concat", ["batch", "minus1", "chan"], ["s0"], name="concat0", axis=0),
         n("Reshape", ["x", "s0"], ["t"], name="reshape0"),
         # The second chain reads t, whose shape only the calibration run knows.
         n("Shape", ["t"], ["ts"], name="shape1"),
         n("Slice", ["ts", "start0", "end1"], ["tb"], name="slice2"),
         n("Slice", ["ts", "start2", "end3"], ["tc"], name="slice3"),
         n("Concat", ["tb", "minus1", "tc"], ["s1"], name="concat1", axis=0),
         n("Reshape", ["t", "s1"], ["u"], name="reshape1"),
         n("ReduceMean", ["u"], ["mean"], name="ln_mean", axes=[-1]),
         n("Sub", ["u", "mean"], ["d"], name="ln_sub"),
         n("Pow", ["d", "two"], ["d2"], name="ln_pow"),
         n("ReduceMean", ["d2"], ["var"], name="ln_var", axes=[-1]),
         n("Add", ["var", "eps"], ["ve"], name="ln_eps"),
         n("Sqrt", ["ve"], ["sd"], name="ln_sqrt"),
         n("Div", ["d", "sd"], ["nrm"], name="ln_div"),
         n("Mul", ["nrm", "gamma"], ["sc"], name="ln_gamma"),
         n("Add", ["sc", "beta"], ["ln"], name="ln_beta"),
         n("MatMul", ["ln", "w"], ["mm"], name="fc"),
         n("Add", ["mm", "b"], ["y"], name="fc_bias")],
        "layernorm_block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 40, 48])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 40, 32])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             producer_name="npu make_models.py")


def slice_channels():
    def c(name, a):
        return numpy_helper.from_array(np.asarray(a, np.int64), name)
    inits = [c("s_a", [2]), c("e_a", [9]), c("ax1", [1]), c("s_b", [-5]), c("e_b", [2**62]),
             c("s_c", [1]), c("e_c", [10]), c("ax3", [3]), c("st2", [2]),
             numpy_helper.from_array(np.asarray([0.25], np.float32), "quarter")]
    n = helper.make_node
    graph = helper.make_graph(
        [n("Slice", ["x", "s_a", "e_a", "ax1"], ["a"], name="slice_a"),
         n("Relu", ["a"], ["ra"], name="relu"),
         n("Slice", ["x", "s_b", "e_b", "ax1"], ["b"], name="slice_b"),
         n("Concat", ["ra", "b"], ["cat"], name="concat", axis=1),
         n("Slice", ["cat", "s_c", "e_c", "ax3", "st2"], ["cols"], name="slice_cols"),
         n("Mul", ["cols", "quarter"], ["y"], name="scale")],
        "slice_channels",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 12, 6, 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 12, 6, 5])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             producer_name="npu make_models.py")


def attention_block(rng):
    T, C, H = 12, 24, 2
    D = C // H
    def c(name, a, dtype=np.float32):
        return numpy_helper.from_array(np.asarray(a, dtype), name)
    inits = [c("wqkv", rng.normal(0, 0.15, (C, 3 * C))), c("bqkv", rng.normal(0, 0.1, (3 * C,))),
             c("wo", rng.normal(0, 0.25, (C, 40))), c("bo", rng.normal(0, 0.1, (40,))),
             c("shape5", [1, T, 3, H, D], np.int64), c("shape3", [1, T, C], np.int64),
             c("ax0", [0], np.int64), c("s0", [0], np.int64), c("s1", [1], np.int64), c("s2", [2], np.int64),
             c("s3", [3], np.int64), c("scale", [D ** -0.5])]
    n = helper.make_node
    nodes = [n("MatMul", ["x", "wqkv"], ["qkv0"], name="qkv"),
             n("Add", ["qkv0", "bqkv"], ["qkv1"], name="qkv_bias"),
             n("Reshape", ["qkv1", "shape5"], ["qkv5"], name="split_heads"),
             n("Transpose", ["qkv5"], ["qkvt"], name="heads_first", perm=[2, 0, 3, 1, 4])]
    for k, name in enumerate("qkv"):
        nodes += [n("Slice", ["qkvt", f"s{k}", f"s{k + 1}", "ax0"], [f"{name}5"], name=f"slice_{name}"),
                  n("Squeeze", [f"{name}5", "ax0"], [name], name=f"squeeze_{name}")]
    nodes += [n("Mul", ["q", "scale"], ["qs"], name="q_scale"),
              n("Transpose", ["k"], ["kt"], name="k_transpose", perm=[0, 1, 3, 2]),
              n("MatMul", ["qs", "kt"], ["scores"], name="q_kt"),
              n("Softmax", ["scores"], ["attn"], name="attn_softmax", axis=-1),
              n("MatMul", ["attn", "v"], ["ctx"], name="attn_v"),
              n("Transpose", ["ctx"], ["ctxt"], name="heads_last", perm=[0, 2, 1, 3]),
              n("Reshape", ["ctxt", "shape3"], ["ctx3"], name="merge_heads"),
              n("MatMul", ["ctx3", "wo"], ["logits0"], name="out_proj"),
              n("Add", ["logits0", "bo"], ["logits"], name="out_bias"),
              n("Softmax", ["logits"], ["y"], name="class_softmax", axis=-1)]
    graph = helper.make_graph(
        nodes, "attention_block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, T, C])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, T, 40])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             producer_name="npu make_models.py")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data"
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(2026)
    save(gemm_relu(rng), os.path.join(out, "gemm_relu.onnx"))
    save(mlp(rng), os.path.join(out, "mlp.onnx"))
    save(convnet(np.random.default_rng(7)), os.path.join(out, "convnet.onnx"))
    save(movement(np.random.default_rng(11)), os.path.join(out, "movement.onnx"))
    save(cnn_ops(np.random.default_rng(12)), os.path.join(out, "cnn_ops.onnx"))
    save(dynamic_conv(), os.path.join(out, "dynamic_conv.onnx"))
    save(runtime_operands(), os.path.join(out, "runtime_operands.onnx"))
    save(big_transpose(), os.path.join(out, "big_transpose.onnx"))
    save(gemm_scalar_bias(), os.path.join(out, "gemm_scalar_bias.onnx"))
    save(deconv1d(np.random.default_rng(13)), os.path.join(out, "deconv1d.onnx"))
    save(dilated_pool(), os.path.join(out, "dilated_pool.onnx"))
    save(matmul_shared_b(), os.path.join(out, "matmul_shared_b.onnx"))
    save(pool3d("MaxPool", "pool3d_max", [2, 3, 9, 8, 11], [3, 2, 3], [2, 1, 2], [1, 0, 1, 1, 1, 0], [1, 2, 1]),
         os.path.join(out, "pool3d_max.onnx"))
    save(pool3d("AveragePool", "pool3d_avg", [1, 3, 7, 9, 10], [2, 3, 3], [2, 2, 1], [1, 1, 0, 0, 1, 1]),
         os.path.join(out, "pool3d_avg.onnx"))
    save(pool3d("AveragePool", "pool3d_avg_ceil", [1, 2, 8, 7, 9], [3, 2, 2], [2, 2, 2], [1, 0, 1, 1, 1, 0],
                count_include_pad=1, ceil_mode=1),
         os.path.join(out, "pool3d_avg_ceil.onnx"))
    save(deconv3d(np.random.default_rng(14)), os.path.join(out, "deconv3d.onnx"))
    save(deconv3d_dynamic(), os.path.join(out, "deconv3d_dynamic.onnx"))
    save(conv3d(np.random.default_rng(15)), os.path.join(out, "conv3d.onnx"))
    save(conv3d_dynamic(), os.path.join(out, "conv3d_dynamic.onnx"))
    save(empty_reshape(), os.path.join(out, "empty_reshape.onnx"))
    save(quantize_axis(), os.path.join(out, "quantize_axis.onnx"))
    save(dequantize_axis(), os.path.join(out, "dequantize_axis.onnx"))
    save(dynamic_gemm(), os.path.join(out, "dynamic_gemm.onnx"))
    save(reshape_shape_input(), os.path.join(out, "reshape_shape_input.onnx"))
    save(qdq_param_inputs(), os.path.join(out, "qdq_param_inputs.onnx"))
    save(integer_io("Relu"), os.path.join(out, "integer_io_relu.onnx"))
    save(integer_io("Sqrt"), os.path.join(out, "integer_io_sqrt.onnx"))
    save(exporter_patterns(np.random.default_rng(16)), os.path.join(out, "exporter_patterns.onnx"))
    save(deconv_head(np.random.default_rng(17)), os.path.join(out, "deconv_head.onnx"))
    save(layernorm_block(np.random.default_rng(18)), os.path.join(out, "layernorm_block.onnx"))
    save(slice_channels(), os.path.join(out, "slice_channels.onnx"))
    save(attention_block(np.random.default_rng(19)), os.path.join(out, "attention_block.onnx"))
    np.save(os.path.join(out, "convnet_input.npy"),
            np.random.default_rng(8).normal(0, 1, (1, 3, 16, 16)).astype(np.float32))
    # A calibration set and a test input for the demo and the tests.
    calib = os.path.join(out, "calib")
    for s in range(8):
        d = os.path.join(calib, f"sample_{s:02d}")
        os.makedirs(d, exist_ok=True)
        np.save(os.path.join(d, "input_0.npy"), rng.normal(0, 1, (4, 64)).astype(np.float32))
    np.save(os.path.join(out, "input_0.npy"), rng.normal(0, 1, (4, 64)).astype(np.float32))
    print(f"wrote {calib}/ (8 samples) and {out}/input_0.npy")


if __name__ == "__main__":
    main()
