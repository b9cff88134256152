// An ONNX node attribute as the host kernels, the compiler's IR and the model image's host
// steps carry it. Plain value type; no validation (kernels check the kinds they read).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "npu/compiler/tensor.h"

namespace npu::host {

struct Attribute {
  // kOther: a type the IR does not carry (graphs, sparse tensors, tensors of an unsupported
  // element type); `s` then says what it was, for error messages.
  enum class Kind {
    kInt,
    kFloat,
    kInts,
    kFloats,
    kString,
    kStrings,
    kTensor,
    kOther
  } kind = Kind::kInt;
  int64_t i = 0;
  float f = 0;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::string s;
  std::vector<std::string> strings;
  Tensor t;
};

using HostOpAttrs = std::map<std::string, Attribute>;

}  // namespace npu::host
