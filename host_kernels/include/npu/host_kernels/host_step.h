// Host steps of a model image (HostSegment, compiler/schema/model_image.fbs): their
// attributes in the image's own FlatBuffers (HostAttribute), written by the compiler and read
// by the runtime, and running one on the host kernels.
// Images are untrusted: ModelImage::from_bytes has verified every HostAttribute (kinds,
// tensor sizes) before a step reaches decode_attributes, which checks again and never reads
// out of bounds.
#pragma once

#include <vector>

#include "model_image_generated.h"
#include "npu/host_kernels/host_ops.h"

namespace npu::host {

// The attributes of a host step as the image stores them (sorted by name).
flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<image::HostAttribute>>>
encode_attributes(flatbuffers::FlatBufferBuilder& fb, const HostOpAttrs& attrs);

// The attributes of `segment`. CORRUPT_DATA (with "recompile") for an attribute the
// verifier should have refused.
Result<HostOpAttrs> decode_attributes(const image::HostSegment& segment);

// Runs `segment` on the host kernels: its op type, node name, opset, attributes and output
// count, with `inputs` as in run_host_op.
Result<std::vector<Tensor>> run_host_step(const image::HostSegment& segment,
                                          const std::vector<const Tensor*>& inputs);

}  // namespace npu::host
