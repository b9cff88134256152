// Minimal JSON writing helpers for summaries and traces.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>

namespace npu::runtime::json {

inline std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

inline std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// "[e0,e1,...]" with each element written by to_json(element). Appends piecewise: the
// `(i ? "," : "") + str` idiom trips GCC 12's -Wrestrict false positive at -O3.
template <typename Range, typename ToJson>
std::string array(const Range& elements, ToJson to_json) {
  std::string out = "[";
  bool first = true;
  for (const auto& e : elements) {
    if (!first) out += ',';
    first = false;
    out += to_json(e);
  }
  out += ']';
  return out;
}

}  // namespace npu::runtime::json
