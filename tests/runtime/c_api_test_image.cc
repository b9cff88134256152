// Writes the hand-built identity image for the C API test (C cannot use FlatBuffers).
#include <fstream>

#include "image_builder.h"

extern "C" int npu_test_write_identity_image(const char* path) {
  const std::vector<uint8_t> bytes = npu::test::build_identity_image();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return out ? 0 : 1;
}
