// libFuzzer target for the .npy reader (read_npy). The input is the file's bytes, served
// from a memfd through /proc/self/fd so that nothing touches the disk. A file the reader
// accepts must hold exactly the bytes its dtype and shape say; any crash, sanitizer report
// or runaway allocation (-rss_limit_mb, -malloc_limit_mb) is a reader bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "memfd_file.h"
#include "npu/compiler/tensor.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const npu::fuzz::MemfdFile file(data, size);
  if (!file.ok()) return 0;
  auto t = npu::read_npy(file.path());
  if (!t.is_ok()) return 0;
  if (t->element_count() < 0 ||
      t->data.size() != static_cast<size_t>(t->element_count()) * npu::dtype_size(t->dtype))
    __builtin_trap();
  return 0;
}
