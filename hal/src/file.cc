#include "npu/hal/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace npu {
namespace {

std::string mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// Checks an opened (or stat-ed) file; `st` from stat/fstat.
Status check_stat(const std::string& path, const struct stat& st, uint64_t max_bytes,
                  std::string_view what) {
  const std::string want(what);
  if (S_ISDIR(st.st_mode))
    return make_error(StatusCode::kInvalidArgument,
                      path + ": is a directory; give the " + want + " file itself");
  if (!S_ISREG(st.st_mode))
    return make_error(
        StatusCode::kInvalidArgument,
        path + ": not a regular file (a device, pipe or socket); give a " + want + " file");
  if (st.st_size == 0)
    return make_error(StatusCode::kInvalidArgument,
                      path + ": empty file; give a " + want + " file");
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    return make_error(StatusCode::kInvalidArgument, path + ": " + std::to_string(st.st_size) +
                                                        " bytes, more than the " + mib(max_bytes) +
                                                        " limit for a " + want + " file");
  return Status::ok();
}

Status open_error(const std::string& path, int err, std::string_view what) {
  if (err == ENOENT || err == ENOTDIR)
    return make_error(StatusCode::kNotFound,
                      path + ": no such file; give a " + std::string(what) + " file");
  if (err == EACCES || err == EPERM)
    return make_error(StatusCode::kPermissionDenied,
                      path + ": permission denied; check its permissions");
  return make_error(StatusCode::kInvalidArgument,
                    path + ": cannot open (" + std::strerror(err) + ")");
}

}  // namespace

Status check_input_file(const std::string& path, uint64_t max_bytes, std::string_view what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return open_error(path, errno, what);
  return check_stat(path, st, max_bytes, what);
}

Result<std::vector<uint8_t>> read_file(const std::string& path, uint64_t max_bytes,
                                       std::string_view what) {
  // O_NONBLOCK: opening a FIFO without a writer must not hang before fstat refuses it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return open_error(path, errno, what);
  struct stat st {};
  Status status =
      ::fstat(fd, &st) == 0 ? check_stat(path, st, max_bytes, what) : open_error(path, errno, what);
  std::vector<uint8_t> bytes;
  if (status.is_ok()) {
    bytes.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    // The file may change under us: read what fstat promised, no more.
    while (got < bytes.size()) {
      const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        status = make_error(StatusCode::kInvalidArgument,
                            path + ": read failed (" + std::strerror(errno) + ")");
        break;
      }
      if (n == 0) {
        status = make_error(StatusCode::kInvalidArgument, path + ": shrank while being read");
        break;
      }
      got += static_cast<size_t>(n);
    }
  }
  ::close(fd);
  if (!status.is_ok()) return status;
  return bytes;
}

}  // namespace npu
