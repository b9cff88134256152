// A fuzz input as a file for readers that take a path: a memfd holding the bytes, named by
// /proc/self/fd/N (nothing touches the disk). Closed when it goes out of scope.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace npu::fuzz {

class MemfdFile final {
 public:
  MemfdFile(const uint8_t* data, size_t size) : fd_(memfd_create("fuzz-input", 0)) {
    size_t done = 0;
    while (fd_ >= 0 && done < size) {
      const ssize_t n = write(fd_, data + done, size - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    ok_ = fd_ >= 0 && done == size;
  }
  ~MemfdFile() {
    if (fd_ >= 0) close(fd_);
  }
  MemfdFile(const MemfdFile&) = delete;
  MemfdFile& operator=(const MemfdFile&) = delete;

  bool ok() const { return ok_; }
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
  bool ok_ = false;
};

}  // namespace npu::fuzz
