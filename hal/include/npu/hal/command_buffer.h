// hal::CommandBuffer: one recorded job, ready to submit to a context: an EXEC of
// [offset, offset + size) of a command-stream buffer, plus every buffer the instructions
// address (weights, activations, ...).
//
// Ownership: holds shared references to all of its buffers, in one shared, immutable record; a
// submission passes that record to the fence, which holds it until the job has ended. Copying
// shares the record (one reference count, no allocation).
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

  // Null only for a moved-from command buffer.
  const std::shared_ptr<Buffer>& commands() const { return record_ ? record_->commands : kNone; }
  uint64_t offset() const { return offset_; }
  uint64_t size() const { return size_; }
  // Buffers the job reads or writes, excluding commands().
  std::span<const std::shared_ptr<Buffer>> uses() const {
    return record_ ? std::span<const std::shared_ptr<Buffer>>(record_->uses)
                   : std::span<const std::shared_ptr<Buffer>>();
  }
  // Keeps commands() and every buffer of uses() alive while held (a fence holds it).
  std::shared_ptr<const void> keep_alive() const { return record_; }

 private:
  struct Record {
    std::shared_ptr<Buffer> commands;
    std::vector<std::shared_ptr<Buffer>> uses;
  };
  CommandBuffer() = default;
  static inline const std::shared_ptr<Buffer> kNone;
  std::shared_ptr<const Record> record_;
  uint64_t offset_ = 0;
  uint64_t size_ = 0;
};

}  // namespace npu::hal
