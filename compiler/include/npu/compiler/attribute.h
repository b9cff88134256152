// An ONNX node attribute as the compiler's IR carries it: the host kernels' type
// (npu/host_kernels/attribute.h), so IR nodes hand their attributes to the kernels as they are.
#pragma once

#include "npu/host_kernels/attribute.h"

namespace npu::compiler {

using Attribute = host::Attribute;

}  // namespace npu::compiler
