// libFuzzer target for the ONNX frontend up to the partition step: load_onnx (parse, checks,
// ONNX shape inference, input-shape overrides) and then partition() at array dim 16. The
// input is the model file's bytes (byte-level mutation: Debian has no libprotobuf-mutator),
// served from a memfd through /proc/self/fd; seed it with tests/data/*.onnx
// (scripts/fuzz-onnx does). Errors are correct outcomes; a crash, sanitizer report, abort or
// runaway allocation is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ir.h"
#include "memfd_file.h"
#include "partition.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const npu::fuzz::MemfdFile file(data, size);
  if (!file.ok()) return 0;
  auto graph = npu::compiler::load_onnx(file.path(), {});
  if (!graph.is_ok()) return 0;
  const auto steps = npu::compiler::partition(*graph, 16);
  volatile size_t sink = steps.size();
  (void)sink;
  return 0;
}
