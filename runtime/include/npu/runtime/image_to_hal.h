// The model image as the HAL sees it: the runtime owns the translation from the verified
// image (npu/compiler/image.h) to hal::ExecutableSpec (opaque command streams, relocations,
// buffer sizes), so the HAL never reads the image format.
// Thread-safe: pure functions of an immutable image.
#pragma once

#include <memory>

#include "npu/compiler/image.h"
#include "npu/hal/executable.h"

namespace npu::runtime {

// The HAL program of `image`; the spec keeps the image alive (its spans point into it).
hal::ExecutableSpec executable_spec(std::shared_ptr<const compiler::ModelImage> image);

// hal::Executable::load(device, executable_spec(image)).
Result<std::shared_ptr<hal::Executable>> load_executable(
    std::shared_ptr<hal::Device> device, std::shared_ptr<const compiler::ModelImage> image);

}  // namespace npu::runtime
