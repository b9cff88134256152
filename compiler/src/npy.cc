// .npy reader and writer (NumPy format versions 1.0 to 3.0).
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <string_view>

#include "npu/compiler/tensor.h"
#include "npu/hal/file.h"

namespace npu {
namespace {

Status npy_error(const std::string& path, const std::string& what) {
  return make_error(StatusCode::kInvalidArgument,
                    path + ": not a readable .npy file (" + what +
                        "); write it with numpy.save() from a C-contiguous array");
}

}  // namespace

Result<Tensor> read_npy(const std::string& path) {
  NPU_ASSIGN_OR_RETURN(const std::vector<uint8_t> raw,
                       read_file(path, kMaxTensorFileBytes, ".npy"));
  const std::string_view bytes(reinterpret_cast<const char*>(raw.data()), raw.size());
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    return npy_error(path, "missing \\x93NUMPY magic");
  const auto major = static_cast<uint8_t>(bytes[6]);
  size_t header_len, header_start;
  if (major == 1) {
    header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return npy_error(path, "truncated header");
    uint32_t len;
    std::memcpy(&len, bytes.data() + 8, 4);
    header_len = len;
    header_start = 12;
  } else {
    return npy_error(path, "unsupported format version " + std::to_string(major));
  }
  if (header_start + header_len > bytes.size()) return npy_error(path, "truncated header");
  const std::string header(bytes.substr(header_start, header_len));
  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'descr'\\s*:\\s*'([^']*)'")))
    return npy_error(path, "no descr in header");
  const std::string descr = m[1];
  if (std::regex_search(header, m, std::regex("'fortran_order'\\s*:\\s*True")))
    return npy_error(path, "Fortran order is not supported");
  if (!std::regex_search(header, m, std::regex("'shape'\\s*:\\s*\\(([^)]*)\\)")))
    return npy_error(path, "no shape in header");
  Tensor t;
  {
    std::string dims = m[1];
    std::stringstream ss(dims);
    std::string item;
    while (std::getline(ss, item, ',')) {
      if (item.find_first_not_of(" \t") == std::string::npos) continue;
      try {
        const long long d = std::stoll(item);
        if (d < 0) return npy_error(path, "negative dimension");
        t.shape.push_back(d);
      } catch (...) {
        return npy_error(path, "bad shape '" + dims + "'");
      }
    }
  }
  bool is_f64 = false;
  if (descr == "<f4") t.dtype = DType::kF32;
  else if (descr == "<f8") { t.dtype = DType::kF32; is_f64 = true; }
  else if (descr == "|i1" || descr == "<i1") t.dtype = DType::kI8;
  else if (descr == "|u1" || descr == "<u1") t.dtype = DType::kU8;
  else if (descr == "<i4") t.dtype = DType::kI32;
  else if (descr == "<i8") t.dtype = DType::kI64;
  else
    return npy_error(path, "dtype '" + descr + "' is not supported (use float32, int8, uint8, int32 or int64)");
  const int64_t count = t.element_count();
  const size_t esize = is_f64 ? 8 : dtype_size(t.dtype);
  const size_t data_start = header_start + header_len;
  if (count < 0 || static_cast<size_t>(count) > (bytes.size() - data_start) / esize ||
      bytes.size() - data_start != static_cast<size_t>(count) * esize)
    return npy_error(path, "data size does not match shape " + shape_to_string(t.shape));
  t.data.resize(static_cast<size_t>(count) * dtype_size(t.dtype));
  if (is_f64) {
    auto dst = t.as<float>();
    for (int64_t i = 0; i < count; ++i) {
      double v;
      std::memcpy(&v, bytes.data() + data_start + static_cast<size_t>(i) * 8, 8);
      dst[static_cast<size_t>(i)] = static_cast<float>(v);
    }
  } else {
    std::memcpy(t.data.data(), bytes.data() + data_start, t.data.size());
  }
  return t;
}

Status write_npy(const std::string& path, const Tensor& t) {
  std::string descr;
  switch (t.dtype) {
    case DType::kF32: descr = "<f4"; break;
    case DType::kI8: descr = "|i1"; break;
    case DType::kU8: descr = "|u1"; break;
    case DType::kI32: descr = "<i4"; break;
    case DType::kI64: descr = "<i8"; break;
    case DType::kI16: descr = "<i2"; break;
  }
  std::string shape = "(";
  for (size_t i = 0; i < t.shape.size(); ++i) shape += std::to_string(t.shape[i]) + ",";
  if (t.shape.size() > 1) shape.pop_back();
  shape += ")";
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) return make_error(StatusCode::kInvalidArgument, path + ": cannot create file (check the directory exists and is writable)");
  out.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(header.size());
  out.put(static_cast<char>(len & 0xFF));
  out.put(static_cast<char>(len >> 8));
  out << header;
  out.write(reinterpret_cast<const char*>(t.data.data()), static_cast<std::streamsize>(t.data.size()));
  if (!out) return make_error(StatusCode::kInvalidArgument, path + ": write failed (disk full?)");
  return Status::ok();
}

}  // namespace npu
