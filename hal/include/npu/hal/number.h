// Strict parsing of unsigned numbers from command lines and text files: decimal or 0x hex,
// the whole text, no sign, no wrap-around ("-1" is not 2^64 - 1). Header-only.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace npu {

// The value of `text` when it is a number from 0 to `max`, else nullopt.
inline std::optional<uint64_t> parse_uint(std::string_view text, uint64_t max = UINT64_MAX) {
  uint64_t base = 10;
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    base = 16;
    text.remove_prefix(2);
  }
  if (text.empty()) return std::nullopt;
  uint64_t v = 0;
  for (char c : text) {
    uint64_t digit;
    if (c >= '0' && c <= '9')
      digit = static_cast<uint64_t>(c - '0');
    else if (base == 16 && c >= 'a' && c <= 'f')
      digit = static_cast<uint64_t>(c - 'a' + 10);
    else if (base == 16 && c >= 'A' && c <= 'F')
      digit = static_cast<uint64_t>(c - 'A' + 10);
    else
      return std::nullopt;
    if (v > (max - digit) / base) return std::nullopt;
    v = v * base + digit;
  }
  return v;
}

}  // namespace npu
