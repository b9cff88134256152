#include "quantize.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace npu::compiler {

QParams activation_qparams(float lo, float hi) {
  lo = std::min(lo, 0.0f);
  hi = std::max(hi, 0.0f);
  if (hi - lo < 1e-6f) hi = lo + 1e-6f;  // a constant-zero tensor still needs a valid scale
  QParams q;
  q.scale = (hi - lo) / 255.0f;
  q.zero_point = static_cast<int32_t>(std::clamp(std::nearbyint(-128.0f - lo / q.scale), -128.0f, 127.0f));
  return q;
}

void quantize_multiplier(double m, int32_t* multiplier, int32_t* shift) {
  if (!(m > 0)) {
    *multiplier = 0;
    *shift = 0;
    return;
  }
  int exponent = 0;
  const double fraction = std::frexp(m, &exponent);  // m = fraction * 2^exponent, fraction in [0.5, 1)
  int64_t q = std::llround(fraction * static_cast<double>(1ll << 31));
  if (q == (1ll << 31)) {
    q /= 2;
    ++exponent;
  }
  int s = 31 - exponent;
  if (s > 63) {  // tiny multipliers: give up precision rather than exceed the shift field
    q >>= std::min(s - 63, 62);
    s = 63;
  }
  if (s < 0) {  // huge multipliers saturate
    q = std::min<int64_t>(q << std::min(-s, 31), std::numeric_limits<int32_t>::max());
    s = 0;
  }
  *multiplier = static_cast<int32_t>(q);
  *shift = s;
}

int8_t quantize_value(float x, const QParams& q) {
  const float v = std::nearbyint(x / q.scale) + static_cast<float>(q.zero_point);
  return static_cast<int8_t>(std::clamp(v, -128.0f, 127.0f));
}

}  // namespace npu::compiler
