// hal::Buffer: a device buffer object (BO) with a permanent CPU mapping.
//
// Ownership: reference-counted (shared_ptr). A Buffer keeps its device alive; a submitted job
// keeps every buffer it uses alive until its fence has signalled (see fence.h), so dropping the
// last user reference while a job runs is safe: the BO is released when the job has ended.
// Contents: sync_to_device / sync_from_device do the cache maintenance a real device needs and
// must bracket device use. On a coherent device (DeviceInfo::coherent: the simulators) they
// only check their range.
// Threading: the object is thread-safe; the bytes are not synchronised: do not write a buffer
// the device may be reading (inputs are owned by one request at a time).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "npu/hal/device.h"
#include "npu/hal/status.h"

namespace npu::hal {

class Buffer {
 public:
  virtual ~Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // NPU virtual address of the first byte; fixed for the buffer's life.
  virtual uint64_t device_address() const = 0;
  // Usable bytes (the requested size rounded up to the page size).
  virtual uint64_t size() const = 0;
  virtual BufferUsage usage() const = 0;
  // The CPU mapping of all size() bytes; valid for the buffer's life.
  virtual std::span<std::byte> host() = 0;
  virtual std::span<const std::byte> host() const = 0;

  // Cache maintenance over [offset, offset + size); INVALID_ARGUMENT outside the buffer.
  virtual Status sync_to_device(uint64_t offset, uint64_t size) = 0;
  virtual Status sync_from_device(uint64_t offset, uint64_t size) = 0;

  // Backend identity of the BO (the driver handle); used by command buffers.
  virtual uint32_t handle() const = 0;
  // The device that owns it.
  virtual Device& device() const = 0;

 protected:
  Buffer() = default;
};

}  // namespace npu::hal
