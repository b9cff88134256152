// Tap folding for convolutions with few input channels (lower.h: conv_folds_taps).
//
// The regular lowering gives every (pixel, channel block) its own scratchpad row, so a
// 3×3 conv over C = 3 channels runs 9 GEMM taps of N lanes of which 3 are real. Here the
// input is dense NHWC (C channels per pixel, no padding lanes), so the KW pixels a horizontal
// tap row reads are KW·C contiguous bytes: one LOAD row with row_elems = KW·C holds them all,
// and the conv becomes KH GEMM taps of one (KW·C)-row weight tile each.
//
// Horizontal padding cannot be a LOAD's padding (that pads whole rows, not lanes), so output
// columns are grouped by which horizontal taps fall inside the image (TapRange lo..hi). A
// column group loads pixels x0+lo .. x0+hi-1 into lanes 0 .. (hi-lo)·C-1 (the LOAD zero-fills
// the rest) and uses its own weight tiles, whose rows are the taps lo..hi-1; taps outside the
// image therefore contribute exactly 0. Vertical padding is the LOAD's zero rows. Both are
// the value 0, so for a non-zero input zero point every (row group × column group) rectangle
// of output pixels gets a bias that subtracts zx·Σ(valid taps' weights): exact for any zx.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

#include "lower.h"

namespace npu::compiler {
namespace {

struct TapRange {
  int64_t lo, hi;  // taps [lo, hi) of the kernel fall inside the image
  bool operator==(const TapRange&) const = default;
};

// Output positions 0..out-1 grouped by their valid tap range; groups are contiguous runs
// because both ends of the range are monotone in the position.
struct TapGroups {
  std::vector<TapRange> kinds;
  std::vector<int64_t> first;  // first output position of each group; first.back() == out
};

TapGroups tap_groups(int64_t out, int64_t stride, int64_t pad, int64_t in, int64_t k) {
  TapGroups g;
  for (int64_t o = 0; o < out; ++o) {
    const TapRange r{std::max<int64_t>(0, pad - o * stride), std::min<int64_t>(k, in + pad - o * stride)};
    if (g.kinds.empty() || !(g.kinds.back() == r)) {
      g.kinds.push_back(r);
      g.first.push_back(o);
    }
  }
  g.first.push_back(out);
  return g;
}

uint64_t align64(uint64_t v) { return (v + 63) / 64 * 64; }
void put_i32(std::vector<uint8_t>& blob, uint64_t at, int64_t v) {
  const auto w = static_cast<int32_t>(std::clamp<int64_t>(v, INT32_MIN, INT32_MAX));
  std::memcpy(blob.data() + at, &w, 4);
}

}  // namespace

bool conv_folds_taps(const ConvLayer& L, uint32_t N) {
  // Dynamic weights, ConvTranspose and 3-D convolutions have their own lowerings (lower.cc).
  // An int32 output (lower_conv_layer stores the accumulators) is not folded either.
  if (L.depthwise || L.transposed || L.three_d || L.weight_input >= 0 || L.int32_output || L.KW < 2 ||
      L.C * L.KW > N)
    return false;
  if (L.pad_t > 15 || L.pad_b > 15) return false;  // LOAD padding fields are 4 bits
  // Every output column must read at least one input pixel (a LOAD row moves >= 1 element).
  for (const TapRange& r : tap_groups(L.OW, L.stride_w, L.pad_l, L.W, L.KW).kinds)
    if (r.hi <= r.lo) return false;
  return true;
}

Result<LayerFacts> lower_conv_folded(const ConvLayer& L, const QParams& qx, const QParams& qy_out, uint32_t N,
                                     uint32_t in_off, uint32_t out_off, std::vector<uint8_t>& weights,
                                     Program& prog, std::optional<QParams> q_lut_input, ConvWidths widths) {
  using BK = image::BufferKind;
  if (!conv_folds_taps(L, N))
    return make_error(StatusCode::kInternal, "conv '" + L.name + "' was laid out for tap folding but does not fold");
  if (widths.in)
    return make_error(StatusCode::kInternal, "conv '" + L.name + "': a tap-folding conv reads dense int8 input");
  if (L.lut_input < 0) widths.lut_input = false;
  // Wide rows (ISA 1.4) written by the REQUANT: the stored output, or a fused table's input.
  const bool mid_wide = L.lut_input >= 0 ? widths.lut_input : widths.out;
  const int64_t wm = mid_wide ? 2 : 1, eo = widths.out ? 2 : 1;
  const uint32_t act_rows = static_cast<uint32_t>(hw::kActSpBytes / N) - fused_lut_rows(L, N, widths.lut_input);
  NPU_ASSIGN_OR_RETURN(const QParams qy, load_fused_lut(L, qy_out, q_lut_input, N, weights, prog, widths.lut_input));
  const uint32_t acc_rows = static_cast<uint32_t>(hw::kAccSpBytes / (4 * N));
  const uint32_t wgt_tiles = static_cast<uint32_t>(hw::kWgtSpBytes / (uint64_t{N} * N));
  const int64_t NB = (L.Cout + N - 1) / N, Coutp = NB * N, taps = L.KH * L.KW;
  const TapGroups cols = tap_groups(L.OW, L.stride_w, L.pad_l, L.W, L.KW);
  const int64_t K = static_cast<int64_t>(cols.kinds.size());
  const bool padded = L.pad_t || L.pad_l || L.pad_b || L.pad_r;
  const bool border_bias = padded && qx.zero_point != 0;
  const TapGroups rows = border_bias ? tap_groups(L.OH, L.stride_h, L.pad_t, L.H, L.KH)
                                     : TapGroups{{{0, L.KH}}, {0, L.OH}};
  const int64_t R = static_cast<int64_t>(rows.kinds.size());

  // Weights: tile (nb, column group k, ky) holds row (kx - lo)·C + ci, column co % N.
  const std::vector<float> sw = conv_weight_scales(L);
  std::vector<int8_t> wq(static_cast<size_t>(L.Cout * L.C * taps));
  for (size_t i = 0; i < wq.size(); ++i)
    wq[i] = quantize_weight(L.weights[i], sw[i / static_cast<size_t>(L.C * taps)], !L.weight_scales.empty());
  auto wq_at = [&](int64_t co, int64_t ci, int64_t ky, int64_t kx) {
    return wq[static_cast<size_t>(((co * L.C + ci) * L.KH + ky) * L.KW + kx)];
  };
  const uint64_t tile_bytes = uint64_t{N} * N;
  const int64_t tiles_per_nb = K * L.KH;
  const uint64_t w_off = align64(weights.size());
  const uint64_t p_off = align64(w_off + static_cast<uint64_t>(NB * tiles_per_nb) * tile_bytes);
  const int64_t param_blocks = R * K * NB;  // 3 ACC rows (bias, multiplier, shift) each
  weights.resize(p_off + static_cast<uint64_t>(param_blocks) * 3 * N * 4, 0);
  for (int64_t co = 0; co < L.Cout; ++co)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t ky = 0; ky < L.KH; ++ky)
        for (int64_t kx = cols.kinds[static_cast<size_t>(k)].lo; kx < cols.kinds[static_cast<size_t>(k)].hi; ++kx)
          for (int64_t ci = 0; ci < L.C; ++ci) {
            const int64_t tile = (co / N) * tiles_per_nb + k * L.KH + ky;
            const int64_t row = (kx - cols.kinds[static_cast<size_t>(k)].lo) * L.C + ci;
            weights[w_off + static_cast<uint64_t>(tile) * tile_bytes + static_cast<uint64_t>(row) * N +
                    static_cast<uint64_t>(co % N)] = static_cast<uint8_t>(wq_at(co, ci, ky, kx));
          }
  // Parameters per (row group r, column group k, nb); without border biases every group
  // gets the same bias, but the layout stays one block per (r, k, nb).
  for (int64_t co = 0; co < L.Cout; ++co) {
    const double in_scale = static_cast<double>(qx.scale) * sw[static_cast<size_t>(co)];
    int32_t mult, shift;
    quantize_multiplier(in_scale / qy.scale * (mid_wide ? 256.0 : 1.0), &mult, &shift);  // 8.8 codes when wide
    const int64_t bias_real = std::llround(L.bias[static_cast<size_t>(co)] / in_scale);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t k = 0; k < K; ++k) {
        // The NPU multiplies raw x_q; zx times the taps that read real pixels is folded in.
        int64_t valid = 0;
        const TapRange ry = rows.kinds[static_cast<size_t>(r)], rx = cols.kinds[static_cast<size_t>(k)];
        for (int64_t ci = 0; ci < L.C; ++ci)
          for (int64_t ky = border_bias ? ry.lo : 0; ky < (border_bias ? ry.hi : L.KH); ++ky)
            for (int64_t kx = border_bias ? rx.lo : 0; kx < (border_bias ? rx.hi : L.KW); ++kx) valid += wq_at(co, ci, ky, kx);
        const uint64_t at = p_off + static_cast<uint64_t>((r * K + k) * NB + co / N) * 3 * N * 4 +
                            static_cast<uint64_t>(co % N) * 4;
        put_i32(weights, at, bias_real - int64_t{qx.zero_point} * valid);
        put_i32(weights, at + N * 4, mult);
        put_i32(weights, at + 2 * N * 4, shift);
      }
  }
  const int8_t lo = std::isfinite(L.act_lo) ? quantize_value(L.act_lo, qy) : int8_t{-128};
  const int8_t hi = std::isfinite(L.act_hi) ? quantize_value(L.act_hi, qy) : int8_t{127};

  // Output-row tiles: ACT holds (padded input rows) × OW folded rows plus the tile's output
  // rows; ACC the tile's accumulators after the parameter rows.
  const uint32_t P = 0, Cacc = static_cast<uint32_t>(3 * param_blocks);
  auto in_rows_for = [&](int64_t oh) { return (oh - 1) * L.stride_h + L.KH; };
  auto fits = [&](int64_t oh) {
    return in_rows_for(oh) * L.OW + oh * L.OW * wm <= act_rows && oh * L.OW + Cacc <= acc_rows && oh * L.OW <= 65535;
  };
  if (Cacc >= acc_rows)
    return make_error(StatusCode::kUnsupported, "conv '" + L.name + "' needs more parameter rows than the accumulator scratchpad holds");
  int64_t OHt = L.OH;
  while (OHt > 1 && !fits(OHt)) --OHt;
  if (!fits(OHt))
    return make_error(StatusCode::kUnsupported, "conv '" + L.name + "' does not fit the scratchpads even one output row at a time");
  if (tiles_per_nb > wgt_tiles)
    return make_error(StatusCode::kUnsupported, "conv '" + L.name + "' has more weight tiles per output block than the weight scratchpad holds");
  const bool weights_fit = NB * tiles_per_nb <= wgt_tiles;
  load_acc_rows(prog, P, Cacc, N, static_cast<uint32_t>(p_off));
  auto load_weights = [&](int64_t nb_first, int64_t nb_count) {
    isa::Load ld;
    ld.sp = hw::Scratchpad::kWgt;
    ld.x = static_cast<uint16_t>(nb_count * tiles_per_nb * N);
    ld.x_stride = N;
    prog.load(ld, BK::Weights, static_cast<uint32_t>(w_off + static_cast<uint64_t>(nb_first * tiles_per_nb) * tile_bytes));
  };
  if (weights_fit) load_weights(0, NB);

  LayerFacts facts;
  const int64_t pixel = L.C, line = L.W * L.C;  // dense NHWC byte strides
  for (int64_t b = 0; b < L.batch; ++b)
    for (int64_t oy0 = 0; oy0 < L.OH; oy0 += OHt) {
      const int64_t oh = std::min(OHt, L.OH - oy0);
      const int64_t first = oy0 * L.stride_h - L.pad_t, last = (oy0 + oh - 1) * L.stride_h - L.pad_t + L.KH - 1;
      const int64_t iy0 = std::max<int64_t>(first, 0), iy1 = std::min<int64_t>(last, L.H - 1);
      const int64_t Hp = last - first + 1;
      const uint32_t B = static_cast<uint32_t>(Hp * L.OW), C0 = Cacc;
      // Column group k occupies ACT rows [Hp·first_col, Hp·end_col): row (y, x - first_col).
      for (int64_t k = 0; k < K; ++k) {
        const int64_t c0 = cols.first[static_cast<size_t>(k)], nc = cols.first[static_cast<size_t>(k) + 1] - c0;
        const TapRange rx = cols.kinds[static_cast<size_t>(k)];
        isa::Load ld;
        ld.sp = hw::Scratchpad::kAct;
        ld.sp_base = static_cast<uint32_t>(Hp * c0);
        ld.row_elems = static_cast<uint32_t>((rx.hi - rx.lo) * L.C);
        ld.x = static_cast<uint16_t>(nc);
        ld.x_stride = static_cast<uint32_t>(L.stride_w * pixel);
        ld.y = static_cast<uint16_t>(iy1 - iy0 + 1);
        ld.y_stride = static_cast<uint32_t>(line);
        ld.pad_t = static_cast<uint8_t>(iy0 - first);
        ld.pad_b = static_cast<uint8_t>(last - iy1);
        const int64_t x0 = c0 * L.stride_w - L.pad_l + rx.lo;
        prog.load(ld, BK::Activations, static_cast<uint32_t>(in_off + ((b * L.H + iy0) * L.W + x0) * pixel));
      }
      for (int64_t nb = 0; nb < NB; ++nb) {
        if (!weights_fit) load_weights(nb, 1);
        for (int64_t k = 0; k < K; ++k) {
          const int64_t c0 = cols.first[static_cast<size_t>(k)], nc = cols.first[static_cast<size_t>(k) + 1] - c0;
          // A GEMM costs about (O·I − 1)·max(R, N) cycles, so r streams the longer of the
          // group's output rows and columns (a border group is often one column wide).
          const bool rows_stream = oh > nc;
          const int64_t act_row = L.stride_h * nc, acc_row = L.OW;  // steps per output row
          isa::Gemm gm;
          gm.clear = true;  // i walks the KH tap rows: the first one clears
          gm.act = static_cast<uint16_t>(Hp * c0);
          gm.wgt = static_cast<uint16_t>(((weights_fit ? nb : 0) * K + k) * L.KH);
          gm.acc = static_cast<uint16_t>(C0 + c0);
          gm.o = static_cast<uint16_t>(rows_stream ? nc : oh);
          gm.r = static_cast<uint16_t>(rows_stream ? oh : nc);
          gm.act_so = static_cast<uint16_t>(rows_stream ? 1 : act_row);
          gm.act_sr = static_cast<uint16_t>(rows_stream ? act_row : 1);
          gm.acc_so = static_cast<uint16_t>(rows_stream ? 1 : acc_row);
          gm.acc_sr = static_cast<uint16_t>(rows_stream ? acc_row : 1);
          gm.i = static_cast<uint16_t>(L.KH);
          gm.act_si = static_cast<uint16_t>(nc);
          gm.wgt_si = 1;
          prog.gemm(gm);
          facts.macs += static_cast<uint64_t>(oh * nc * L.KH) * N * N;
        }
        // One REQUANT per rectangle of output pixels sharing a (row group, column group).
        for (int64_t r = 0; r < R; ++r) {
          const int64_t r0 = std::max(rows.first[static_cast<size_t>(r)], oy0);
          const int64_t r1 = std::min(rows.first[static_cast<size_t>(r) + 1], oy0 + oh);
          if (r0 >= r1) continue;
          for (int64_t k = 0; k < K; ++k) {
            const int64_t c0 = cols.first[static_cast<size_t>(k)], c1 = cols.first[static_cast<size_t>(k) + 1];
            const int64_t at = (r0 - oy0) * L.OW + c0;
            isa::VecRequant vq;
            vq.bias = true;
            vq.wide_dst = mid_wide;
            vq.src = static_cast<uint16_t>(C0 + at);
            vq.dst = static_cast<uint16_t>(B + at * wm);
            vq.param = static_cast<uint16_t>(P + 3 * ((r * K + k) * NB + nb));
            vq.o = static_cast<uint16_t>(r1 - r0);
            vq.src_so = static_cast<uint16_t>(L.OW);
            vq.dst_so = static_cast<uint16_t>(L.OW * wm);
            vq.r = static_cast<uint16_t>(c1 - c0);
            vq.src_sr = 1;
            vq.dst_sr = static_cast<uint16_t>(wm);
            vq.zero_point = static_cast<int8_t>(qy.zero_point);
            vq.clamp_lo = lo;
            vq.clamp_hi = hi;
            prog.vec(vq);
          }
        }
        apply_fused_lut(L, N, B, oh * L.OW, prog, widths.lut_input, widths.out);
        store_pixel_rows(prog, B, std::min<int64_t>(N, L.Cout - nb * N), L.OW, oh, Coutp,
                         static_cast<uint32_t>(out_off + (((b * L.OH + oy0) * L.OW) * Coutp + nb * N) * eo), widths.out);
      }
    }
  facts.scratchpad_bytes = static_cast<uint64_t>(in_rows_for(OHt) * L.OW + OHt * L.OW * wm) * N +
                           static_cast<uint64_t>(OHt * L.OW + Cacc) * N * 4 +
                           static_cast<uint64_t>(weights_fit ? NB * tiles_per_nb : tiles_per_nb) * tile_bytes;
  return facts;
}

}  // namespace npu::compiler
