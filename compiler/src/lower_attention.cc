#include "lower_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace npu::compiler {
namespace {

using BK = image::BufferKind;
constexpr uint64_t kAlign = 64;
uint64_t align_up(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// Table entries are K·exp(σ·(i − 255)) with K = 2^30: the sum of a segment stays far inside
// int64 and e·floor(2^62 / S) <= 2^62 (S >= e), so the product never wraps.
constexpr double kTablePeak = 1073741824.0;

// The byte stride between consecutive logical rows when the leading dimensions are
// row-major over one such stride and the last axis is contiguous; -1 otherwise.
int64_t row_stride(const std::vector<int64_t>& shape, const std::vector<int64_t>& st) {
  const size_t k = shape.size();
  if (st.back() != 1) return -1;
  int64_t rs = shape.back(), prod = 1;
  bool first = true;
  for (size_t d = k - 1; d-- > 0;) {
    if (shape[d] == 1) {
      prod *= 1;
      continue;
    }
    if (first) {
      rs = st[d];
      first = false;
    } else if (st[d] != rs * prod) {
      return -1;
    }
    prod *= shape[d];
  }
  return rs;
}

// A LOAD or STORE (they share these fields) of `count` logical rows `rs` bytes apart, each as
// x scratchpad rows of N elements (row_elems valid, 0 = N) from scratchpad row sp_base on.
template <typename Move>
Move row_move(uint32_t row_elems, uint32_t sp_base, int64_t x, uint32_t N, int64_t count, int64_t rs) {
  Move m;
  m.row_elems = row_elems;
  m.sp_base = sp_base;
  m.x = static_cast<uint16_t>(x);
  m.x_stride = N;
  m.y = static_cast<uint16_t>(count);
  m.y_stride = static_cast<uint32_t>(rs);
  return m;
}

}  // namespace

QParams softmax_output_qparams(float hi, bool symmetric) {
  const double top = std::isfinite(hi) && hi > 0 ? std::min<double>(hi, 1.0) : 1.0;
  const double codes = symmetric ? 128.0 : 256.0;  // codes above the zero point (the last one may clip)
  int k = static_cast<int>(std::floor(std::log2(codes / top)));
  k = std::clamp(k, 0, 62);
  return QParams{std::ldexp(1.0f, -k), symmetric ? 0 : -128};
}

Result<LayerFacts> lower_softmax(const std::vector<int64_t>& shape, uint32_t in_off,
                                 const std::vector<int64_t>& in_strides, uint32_t out_off,
                                 const std::vector<int64_t>& out_strides, const QParams& qin,
                                 const QParams& qout, uint32_t N, std::vector<uint8_t>& weights,
                                 Program& prog) {
  LayerFacts facts;
  if (shape.empty()) return make_error(StatusCode::kInternal, "Softmax of a scalar reached the lowering");
  const int64_t L = shape.back();
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < shape.size(); ++d) rows *= shape[d];
  if (rows == 0 || L == 0) return facts;
  const int64_t rs_in = rows > 1 ? row_stride(shape, in_strides) : L;
  const int64_t rs_out = rows > 1 ? row_stride(shape, out_strides) : L;
  if (rs_in < L || rs_out < L)
    return make_error(StatusCode::kInternal, "Softmax operands are not rows along the last axis (partition admits only dense layouts)");
  const int64_t B = (L + N - 1) / N, tail = L - (B - 1) * N;
  const auto act_rows = static_cast<int64_t>(hw::kActSpBytes / N);
  if (B > act_rows || B > 65535)
    return make_error(StatusCode::kUnsupported, "Softmax over " + std::to_string(L) +
                                                    " elements does not fit the ACT scratchpad; run it on the host");
  // The output grid is 2^-k: the instruction's shift is 62 - k.
  int exp2 = 0;
  const float mant = std::frexp(qout.scale, &exp2);
  const int k = 1 - exp2;
  if (mant != 0.5f || k < 0 || k > 62)
    return make_error(StatusCode::kInternal, "Softmax output scale is not a power of two (softmax_output_qparams)");
  // The exponential table: entry i is K·exp(σ·(i − 255)), i − 255 = x − max in codes.
  const uint64_t table_off = align_up(weights.size());
  weights.resize(table_off + 256 * 4, 0);
  for (int i = 0; i < 256; ++i) {
    const auto e = static_cast<int32_t>(std::llround(kTablePeak * std::exp(static_cast<double>(qin.scale) * (i - 255))));
    std::memcpy(weights.data() + table_off + 4 * i, &e, 4);
  }
  load_acc_rows(prog, 0, 256 / N, N, static_cast<uint32_t>(table_off));
  const int64_t chunk = std::min<int64_t>({rows, act_rows / B, 65535});
  auto move = [&](bool store, int64_t r0, int64_t count, int64_t x, uint32_t row_elems, uint32_t sp_base,
                  int64_t col0) {
    const int64_t rs = store ? rs_out : rs_in;
    const uint32_t off = static_cast<uint32_t>((store ? out_off : in_off) + r0 * rs + col0);
    if (store) prog.store(row_move<isa::Store>(row_elems, sp_base, x, N, count, rs), BK::Activations, off);
    else prog.load(row_move<isa::Load>(row_elems, sp_base, x, N, count, rs), BK::Activations, off);
  };
  // Rows of a logical row move as B rows of N elements; where the last of them would run past
  // the tensor (the last logical row) or write beyond the row (an output with gaps between
  // rows), it moves split: B - 1 full rows and the tail. Elsewhere the last row's extra lanes
  // read the next row (ignored: they are beyond the segment's tail) or write bytes of the next
  // output row that its own STORE, later on the same engine, writes again.
  auto move_rows = [&](bool store, int64_t r0, int64_t count, bool last_chunk) {
    const bool gaps = store ? rs_out != L : false;
    int64_t whole = count;
    if (tail < N) whole = gaps ? 0 : (last_chunk ? count - 1 : count);
    if (whole > 0) move(store, r0, whole, B, 0, 0, 0);
    for (int64_t r = whole; r < count; ++r) {
      const auto base = static_cast<uint32_t>(r * B);
      if (B > 1) move(store, r0 + r, 1, B - 1, 0, base, 0);
      move(store, r0 + r, 1, 1, static_cast<uint32_t>(tail), base + static_cast<uint32_t>(B - 1), (B - 1) * N);
    }
  };
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int64_t count = std::min(chunk, rows - r0);
    const bool last_chunk = r0 + count == rows;
    move_rows(false, r0, count, last_chunk);
    isa::VecSoftmax v;
    v.src = v.dst = 0;
    v.table = 0;
    v.r = static_cast<uint16_t>(B);
    v.o = static_cast<uint16_t>(count);
    v.src_so = v.dst_so = static_cast<uint16_t>(B);
    v.src_sr = v.dst_sr = 1;
    v.zero_point = static_cast<int8_t>(qout.zero_point);
    v.shift = static_cast<uint8_t>(62 - k);
    v.tail = static_cast<uint8_t>(tail == N ? 0 : tail);
    prog.vec_words(isa::encode(v));
    move_rows(true, r0, count, last_chunk);
  }
  facts.scratchpad_bytes = static_cast<uint64_t>(chunk * B) * N + 256 * 4;
  return facts;
}

}  // namespace npu::compiler
