#include "npu/hal/command_buffer.h"

#include "npu/hw/config.h"

namespace npu::hal {

Result<CommandBuffer> CommandBuffer::create(std::shared_ptr<Buffer> commands, uint64_t offset,
                                            uint64_t size,
                                            std::vector<std::shared_ptr<Buffer>> uses) {
  if (!commands) return make_error(StatusCode::kInvalidArgument, "command buffer without commands");
  if (size == 0 || size % hw::kInstructionBytes != 0 || offset % hw::kInstructionBytes != 0)
    return make_error(StatusCode::kInvalidArgument,
                      "command range at " + std::to_string(offset) + " of " +
                          std::to_string(size) + " bytes is empty or not a multiple of 32 bytes");
  if (offset > commands->size() || size > commands->size() - offset)
    return make_error(StatusCode::kInvalidArgument,
                      "command range reaches past its buffer of " +
                          std::to_string(commands->size()) + " bytes");
  for (const auto& b : uses) {
    if (!b) return make_error(StatusCode::kInvalidArgument, "command buffer uses a null buffer");
    if (&b->device() != &commands->device())
      return make_error(StatusCode::kInvalidArgument,
                        "command buffer uses a buffer of another device");
  }
  CommandBuffer cb;
  cb.record_ = std::make_shared<const Record>(Record{std::move(commands), std::move(uses)});
  cb.offset_ = offset;
  cb.size_ = size;
  return cb;
}

}  // namespace npu::hal
