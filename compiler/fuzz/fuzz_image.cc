// libFuzzer target for ModelImage::from_bytes. An accepted image must be safe to walk the
// way the runtime walks it: every I/O binding and view, every step, every relocation's
// target word, every host constant. Any crash or sanitizer report is a loader bug.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "npu/compiler/image.h"

namespace {

uint64_t touch_binding(const npu::image::IoBinding* io) {
  uint64_t h = 0;
  if (!io) return h;
  if (io->desc() && io->desc()->shape())
    for (int64_t d : *io->desc()->shape()) h += static_cast<uint64_t>(d);
  if (io->device()) {
    h += io->device()->offset();
    if (io->device()->strides())
      for (int64_t s : *io->device()->strides()) h ^= static_cast<uint64_t>(s);
    if (io->device()->quant() && io->device()->quant()->scale()) h += io->device()->quant()->scale()->size();
  }
  return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An even size (every sealed image of the corpus): the FlatBuffer before its trailer, sealed
  // again, so that mutations reach the FlatBuffers verifier and the range checks behind the
  // checksum. An odd size: the bytes as they are (the trailer and checksum checks).
  std::vector<uint8_t> bytes(data, data + size);
  if (size % 2 == 0) {
    const size_t body = size >= npu::compiler::kImageTrailerBytes && std::memcmp(data + size - npu::compiler::kImageTrailerBytes, "NPUC", 4) == 0
                            ? size - npu::compiler::kImageTrailerBytes
                            : size;
    bytes = npu::compiler::seal_image({data, body});
  }
  auto image = npu::compiler::ModelImage::from_bytes(std::move(bytes), "fuzz");
  if (!image.is_ok()) return 0;
  const npu::image::Model& m = (*image)->model();
  volatile uint64_t sink = 0;
  for (const auto* io : *m.inputs()) sink = sink + touch_binding(io);
  for (const auto* io : *m.outputs()) sink = sink + touch_binding(io);
  if (m.host_values())
    for (const auto* io : *m.host_values()) sink = sink + touch_binding(io);
  for (const auto* step : *m.steps()) {
    if (const auto* seg = step->segment_as_NpuSegment()) {
      const auto* cmds = seg->commands();
      if (seg->relocations())
        for (const auto* r : *seg->relocations()) {
          uint32_t word;
          std::memcpy(&word, cmds->data() + r->cmd_offset(), 4);  // the loader promised it is inside
          sink = sink + word + r->offset();
        }
    } else if (const auto* host = step->segment_as_HostSegment()) {
      sink = sink + host->inputs()->size() + host->outputs()->size();
    }
  }
  if (m.host_constants())
    for (const auto* c : *m.host_constants()) sink = sink + c->data()->size();
  return 0;
}
