// The host-fallback hook: operators the compiler leaves on the host (HostSegment steps of
// images with value maps). A kernel is registered by ONNX op type; the kernel registered as
// "*" serves every op type without its own (e.g. a whole reference interpreter). A session
// whose model has a host step without a kernel fails to create with UNSUPPORTED naming the
// operator and the node.
//
// The runtime keeps a per-request environment of host values: the model inputs, the host
// constants, the values NPU segments write (dequantised out of their device views after the
// segment) and the values host kernels write. Before an NPU segment, the values it reads are
// quantised into their device views.
//
// Threading: registration is thread-safe (a session looks kernels up when it is created and
// when each host step runs). Kernels run on scheduler lane threads and must be reentrant:
// several requests may run the same kernel at once, each with its own tensors.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "npu/compiler/image.h"
#include "npu/compiler/tensor.h"
#include "npu/hal/status.h"

namespace npu::runtime {

struct HostOpContext {
  const compiler::ModelImage& image;
  // op_type, node_name, attrs (HostAttribute tables; npu/host_kernels/host_step.h decodes
  // them), num_outputs and opset.
  const image::HostSegment& segment;
  size_t step = 0;
  // One per segment input, in order; nullptr for an omitted optional input. Owned by the
  // runtime; valid during the call.
  std::vector<const Tensor*> inputs;
  // One per segment output, preset to zeros of the value's dtype and shape (from the image);
  // the kernel fills them (it may replace a tensor, e.g. for a data-dependent shape).
  std::vector<Tensor>* outputs = nullptr;
};

using HostKernel = std::function<Status(HostOpContext&)>;

// Registers (or, with an empty function, removes) the kernel of `op_type` ("*": the fallback).
void register_host_kernel(std::string op_type, HostKernel kernel);
// The kernel of `op_type`, else the "*" kernel, else an empty function.
HostKernel find_host_kernel(std::string_view op_type);

}  // namespace npu::runtime
