// hal::CommandBuffer: one recorded job, ready to submit to a context: an EXEC of
// [offset, offset + size) of a command-stream buffer, plus every buffer the instructions
// address (weights, activations, ...).
//
// Ownership: holds shared references to all of its buffers; a submission passes them to the
// fence, which holds them until the job has ended. Cheap to copy (shared references only).
// Threading: immutable after create(); safe to share between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "npu/hal/buffer.h"
#include "npu/hal/status.h"

namespace npu::hal {

class CommandBuffer final {
 public:
  // Validates (offset and size multiples of 32, size > 0, range inside `commands`, every
  // buffer on the same device as `commands`); INVALID_ARGUMENT otherwise.
  static Result<CommandBuffer> create(std::shared_ptr<Buffer> commands, uint64_t offset,
                                      uint64_t size, std::vector<std::shared_ptr<Buffer>> uses);

  const std::shared_ptr<Buffer>& commands() const { return commands_; }
  uint64_t offset() const { return offset_; }
  uint64_t size() const { return size_; }
  // Buffers the job reads or writes, excluding commands().
  std::span<const std::shared_ptr<Buffer>> uses() const { return uses_; }

 private:
  CommandBuffer() = default;
  std::shared_ptr<Buffer> commands_;
  uint64_t offset_ = 0;
  uint64_t size_ = 0;
  std::vector<std::shared_ptr<Buffer>> uses_;
};

}  // namespace npu::hal
