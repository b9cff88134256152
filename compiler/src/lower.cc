#include "lower.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

namespace npu::compiler {
namespace {

constexpr uint64_t kAlign = 64;
uint64_t align_up(uint64_t v, uint64_t a = kAlign) { return (v + a - 1) / a * a; }
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
void put_u32(std::vector<uint8_t>& blob, uint64_t at, uint32_t v) { std::memcpy(blob.data() + at, &v, 4); }

// `rows` consecutive scratchpad rows of `n` bytes from consecutive DRAM rows.
isa::Load rows_load(hw::Scratchpad sp, uint32_t base, uint32_t rows, uint32_t n) {
  isa::Load ld;
  ld.sp = sp;
  ld.sp_base = base;
  ld.x = static_cast<uint16_t>(rows);
  ld.x_stride = n;
  return ld;
}

// Integer weights (an int32-output layer's declared scale-1 codes, w − w_zp up to ±255) and
// zero-point multipliers (−zero point, up to 128) as int8 shares whose sum is exact: how
// many shares the widest value needs...
int32_t int8_sets_for(int64_t v) {
  return static_cast<int32_t>(v > 127 ? ceil_div(v, 127) : v < -128 ? ceil_div(-v, 128) : 1);
}
// ...and share `p` of v: v / sets, the remainder spread one by one (each share stays in
// −128..127 because |v| <= 127·sets, or >= −128·sets).
int8_t int8_share(int64_t v, int64_t sets, int64_t p) {
  const int64_t base = v / sets, rem = v - base * sets;
  return static_cast<int8_t>(base + (p < (rem < 0 ? -rem : rem) ? (rem < 0 ? -1 : 1) : 0));
}
// All shares of a zero-point multiplier (none for 0; 128 = 64 + 64).
std::vector<int32_t> int8_parts(int32_t v) {
  std::vector<int32_t> parts;
  const int32_t sets = v == 0 ? 0 : int8_sets_for(v);
  for (int32_t p = 0; p < sets; ++p) parts.push_back(int8_share(v, sets, p));
  return parts;
}

}  // namespace

std::vector<float> fc_weight_scales(const FcLayer& L) {
  if (!L.weight_scales.empty()) return L.weight_scales;
  std::vector<float> scales(static_cast<size_t>(L.N));
  for (int64_t j = 0; j < L.N; ++j) {
    float mx = 0;
    for (int64_t k = 0; k < L.K; ++k) mx = std::max(mx, std::fabs(L.weights[static_cast<size_t>(k * L.N + j)]));
    scales[static_cast<size_t>(j)] = mx > 0 ? mx / 127.0f : 1.0f;
  }
  return scales;
}

std::vector<float> conv_weight_scales(const ConvLayer& L) {
  if (!L.weight_scales.empty()) return L.weight_scales;
  // W is [Cout][C][taps] (Conv) or [C][Cout][taps] (ConvTranspose): a scale per output channel
  // over all its input channels and taps either way.
  const int64_t cin = L.transposed ? L.C : static_cast<int64_t>(L.weights.size()) / std::max<int64_t>(L.Cout, 1);
  const int64_t taps = L.transposed ? static_cast<int64_t>(L.weights.size()) / std::max<int64_t>(L.C * L.Cout, 1) : 1;
  std::vector<float> scales(static_cast<size_t>(L.Cout));
  for (int64_t c = 0; c < L.Cout; ++c) {
    float mx = 0;
    for (int64_t i = 0; i < cin; ++i)
      for (int64_t t = 0; t < taps; ++t)
        mx = std::max(mx, std::fabs(L.weights[static_cast<size_t>(L.transposed ? (i * L.Cout + c) * taps + t
                                                                                : c * cin + i)]));
    scales[static_cast<size_t>(c)] = mx > 0 ? mx / 127.0f : 1.0f;
  }
  return scales;
}

int8_t quantize_weight(float w, float scale, bool declared) {
  // Chosen scales keep the range symmetric (-127..127); declared ones reproduce the model's
  // codes, which may use -128.
  return static_cast<int8_t>(std::clamp(std::nearbyint(w / scale), declared ? -128.0f : -127.0f, 127.0f));
}

namespace {

// A fully-connected layer's constant weight tiles and parameter rows in the weights blob
// (FcLowering::pack).
struct FcPacking {
  uint64_t tiles_off = 0;   // (nb, set, kb) weight tiles; constant weights only
  uint64_t params_off = 0;  // 3 parameter rows (bias, multiplier, shift) per output block
  // Constant integer weights of an int32 output (declared scale 1) beyond int8 run as `sets`
  // int8 weight sets whose GEMMs accumulate (lower_conv_layer does the same per tap).
  int64_t sets = 1;
  int64_t KBW = 0;  // weight tiles per output block
};

// Scratchpad plan: ACT [input Mt*KB | output Mt | bias code | α rows], ACC [acc Mt | params
// 3*NB], WGT [B tiles | bias ones tile | β tiles] (FcLowering::plan).
struct FcPlan {
  bool spread;  // a one-element bias, spread over the accumulators by a GEMM of its code
  int64_t extra_tiles, alpha_rows;
  bool weights_fit;  // every output block's weight tiles at once
  int64_t Mt;        // rows of one M tile
  uint32_t A, Bout, C, P, S, T, Z, TB;
};

// lower_fc_layer's arguments and block counts, shared by its steps. Aggregate-initialised
// by lower_fc_layer, in member order.
struct FcLowering {
  using BK = image::BufferKind;

  Result<FcPacking> pack();
  Result<FcPlan> plan(const FcPacking& pk) const;
  void load_constants(const FcPacking& pk, const FcPlan& pl);
  void alpha_into_bias(const FcPacking& pk, const FcPlan& pl, int64_t nb, uint32_t wgt_tile);
  void load_weights(const FcPacking& pk, int64_t batch, int64_t nb_first, int64_t nb_count);
  void load_input_rows(const FcPlan& pl, uint64_t x_base, int64_t m0, int64_t mt);
  void emit_block(const FcPacking& pk, const FcPlan& pl, int64_t m0, int64_t mt, int64_t nb, uint64_t y_base);
  void start_accumulators(const FcPacking& pk, const FcPlan& pl, int64_t m0, int64_t mt, int64_t nb);
  void accumulate(const FcPacking& pk, const FcPlan& pl, int64_t mt, int64_t nb);
  void store_block(const FcPlan& pl, int64_t m0, int64_t mt, int64_t nb, uint64_t y_base);
  LayerFacts facts(const FcPacking& pk, const FcPlan& pl) const;

  const FcLayer& L;
  const QParams& qx;
  const QParams& qy;
  const uint32_t N;
  std::vector<uint8_t>& weights;
  Program& prog;
  const DynamicOperands& dyn;
  const bool dynamic;
  const int64_t KB, NB;
  const uint64_t tile_bytes;
  const std::vector<int32_t> alpha_parts, beta_parts;  // α = −zx, β = −zw as int8 shares
  const int64_t zero_point_product;
  const bool alpha_in_bias;  // α·Σ_k b_kn joins the bias rows (alpha_into_bias)
};

// Quantises the constant weights into tiles and writes the parameter rows; produces their
// offsets and the number of integer weight sets.
Result<FcPacking> FcLowering::pack() {
  FcPacking pk;
  // Per-output-channel weight scales: symmetric int8 of constant weights (or the scales a QDQ
  // model declares), or the dynamic B's one per-tensor scale with alpha folded in.
  std::vector<double> sw(static_cast<size_t>(L.N), static_cast<double>(L.alpha) * dyn.qw.scale);
  std::vector<int32_t> wq;
  if (!dynamic) {
    const std::vector<float> scales = fc_weight_scales(L);
    wq.resize(static_cast<size_t>(L.K * L.N));
    for (int64_t j = 0; j < L.N; ++j) {
      sw[static_cast<size_t>(j)] = scales[static_cast<size_t>(j)];
      for (int64_t k = 0; k < L.K; ++k) {
        const float w = L.weights[static_cast<size_t>(k * L.N + j)], scale = scales[static_cast<size_t>(j)];
        int32_t& q = wq[static_cast<size_t>(k * L.N + j)];
        q = quantize_weight(w, scale, !L.weight_scales.empty());
        if (!L.int32_output) continue;
        const float v = w / scale;
        if (v != std::nearbyint(v) || std::fabs(v) > 65536.0f)
          return make_error(StatusCode::kInternal, "layer '" + L.name + "': weight " + std::to_string(w) +
                                                       " is not an integer code at its scale; its int32 output would be wrong");
        q = static_cast<int32_t>(v);
        pk.sets = std::max<int64_t>(pk.sets, int8_sets_for(q));
      }
    }
    const int64_t sets = pk.sets;
    pk.tiles_off = align_up(weights.size());
    weights.resize(pk.tiles_off + static_cast<uint64_t>(KB * NB * sets) * tile_bytes, 0);
    for (int64_t nb = 0; nb < NB; ++nb)
      for (int64_t p = 0; p < sets; ++p)
        for (int64_t kb = 0; kb < KB; ++kb)
          for (uint32_t k = 0; k < N; ++k)
            for (uint32_t c = 0; c < N; ++c) {
              const int64_t kk = kb * N + k, jj = nb * N + c;
              if (kk < L.K && jj < L.N)
                weights[pk.tiles_off + static_cast<uint64_t>((nb * sets + p) * KB + kb) * tile_bytes + k * N + c] =
                    static_cast<uint8_t>(int8_share(wq[static_cast<size_t>(kk * L.N + jj)], sets, p));
            }
  }
  pk.KBW = KB * pk.sets;
  pk.params_off = align_up(weights.size());
  weights.resize(pk.params_off + static_cast<uint64_t>(NB) * 3 * N * 4, 0);
  for (int64_t j = 0; j < L.N; ++j) {
    int64_t colsum = 0;
    if (!dynamic)
      for (int64_t k = 0; k < L.K; ++k) colsum += wq[static_cast<size_t>(k * L.N + j)];
    const double in_scale = static_cast<double>(qx.scale) * sw[static_cast<size_t>(j)];
    // The NPU multiplies raw x_q; the input zero point's contribution is folded into the bias
    // (a dynamic B has a symmetric x: no fold needed).
    const int64_t bias_q = std::llround(L.bias[static_cast<size_t>(j)] / in_scale) - int64_t{qx.zero_point} * colsum +
                           L.K * zero_point_product;
    int32_t mult, shift;
    quantize_multiplier(in_scale / qy.scale, &mult, &shift);
    const uint64_t row = pk.params_off + static_cast<uint64_t>(j / N) * 3 * N * 4;
    const uint64_t lane = static_cast<uint64_t>(j % N) * 4;
    put_u32(weights, row + lane, static_cast<uint32_t>(static_cast<int32_t>(std::clamp<int64_t>(bias_q, INT32_MIN, INT32_MAX))));
    put_u32(weights, row + N * 4 + lane, static_cast<uint32_t>(mult));
    put_u32(weights, row + 2 * N * 4 + lane, static_cast<uint32_t>(shift));
  }
  return pk;
}

// The scratchpad plan: M tile height and the base row of every operand, or the error when
// one output block does not fit.
Result<FcPlan> FcLowering::plan(const FcPacking& pk) const {
  const uint32_t act_rows = static_cast<uint32_t>(hw::kActSpBytes / N);
  const uint32_t acc_rows = static_cast<uint32_t>(hw::kAccSpBytes / (4 * N));
  const uint32_t wgt_tiles = static_cast<uint32_t>(hw::kWgtSpBytes / (N * N));
  const int64_t KBW = pk.KBW;
  FcPlan pl;
  // A one-element bias takes one more ACT row (its code) and one more WGT tile (the ones row).
  pl.spread = L.bias_input >= 0 && L.bias_scalar;
  const bool spread = pl.spread;
  pl.extra_tiles = (spread ? 1 : 0) + static_cast<int64_t>(beta_parts.size());
  pl.alpha_rows = KB * static_cast<int64_t>(alpha_parts.size());
  pl.weights_fit = KBW * NB + pl.extra_tiles <= wgt_tiles;
  if (KBW + pl.extra_tiles > wgt_tiles || 3 * NB >= acc_rows || (spread ? 1 : 0) + pl.alpha_rows + KB + 1 > act_rows)
    return make_error(StatusCode::kUnsupported, "layer '" + L.name + "' is too large for the scratchpads (K=" +
                                                    std::to_string(L.K) + ", N=" + std::to_string(L.N) + ")");
  pl.Mt = std::min<int64_t>({L.M, (act_rows - (spread ? 1 : 0) - pl.alpha_rows) / (KB + 1), acc_rows - 3 * NB, 65535});
  pl.A = 0;
  pl.Bout = static_cast<uint32_t>(pl.Mt * KB);
  pl.C = 0;
  pl.P = static_cast<uint32_t>(pl.Mt);
  pl.S = static_cast<uint32_t>(pl.Mt * (KB + 1));
  pl.T = static_cast<uint32_t>(pl.weights_fit ? KBW * NB : KBW);
  pl.Z = pl.S + (spread ? 1 : 0);
  pl.TB = pl.T + (spread ? 1 : 0);
  return pl;
}

// Writes and LOADs the layer-wide constants: the α rows, the β tiles, the bias ones tile and
// code of a one-element bias, then the parameter rows.
void FcLowering::load_constants(const FcPacking& pk, const FcPlan& pl) {
  if (!alpha_parts.empty()) {
    // Rows (part p, block kb): α_p in the block's valid K lanes (B's tile rows beyond K are stale).
    const uint64_t rows = align_up(weights.size());
    weights.resize(rows + static_cast<uint64_t>(pl.alpha_rows) * N, 0);
    for (size_t p = 0; p < alpha_parts.size(); ++p)
      for (int64_t kb = 0; kb < KB; ++kb)
        for (int64_t k = 0; k < std::min<int64_t>(N, L.K - kb * N); ++k)
          weights[rows + (p * static_cast<uint64_t>(KB) + static_cast<uint64_t>(kb)) * N + static_cast<uint64_t>(k)] =
              static_cast<uint8_t>(static_cast<int8_t>(alpha_parts[p]));
    prog.load(rows_load(hw::Scratchpad::kAct, pl.Z, static_cast<uint32_t>(pl.alpha_rows), N), BK::Weights,
              static_cast<uint32_t>(rows));
  }
  if (!beta_parts.empty()) {
    const uint64_t tiles = align_up(weights.size());
    weights.resize(tiles + beta_parts.size() * tile_bytes, 0);
    for (size_t p = 0; p < beta_parts.size(); ++p)
      std::fill_n(weights.begin() + static_cast<std::ptrdiff_t>(tiles + p * tile_bytes), tile_bytes,
                  static_cast<uint8_t>(static_cast<int8_t>(beta_parts[p])));
    prog.load(rows_load(hw::Scratchpad::kWgt, pl.TB * N, static_cast<uint32_t>(beta_parts.size() * N), N), BK::Weights,
              static_cast<uint32_t>(tiles));
  }
  if (pl.spread) {
    const uint64_t tile = align_up(weights.size());
    weights.resize(tile + tile_bytes, 0);
    const int32_t row_value = std::min(dyn.bias_spread, 127);
    for (uint32_t n = 0; n < N; ++n) weights[tile + n] = static_cast<uint8_t>(static_cast<int8_t>(row_value));
    isa::Load wl;
    wl.sp = hw::Scratchpad::kWgt;
    wl.sp_base = pl.T * N;
    wl.x = static_cast<uint16_t>(N);
    wl.x_stride = N;
    prog.load(wl, BK::Weights, static_cast<uint32_t>(tile));
    isa::Load cl;
    cl.sp = hw::Scratchpad::kAct;
    cl.sp_base = pl.S;
    cl.row_elems = 1;
    cl.x = 1;
    prog.load(cl, BK::Activations, dyn.bias_off);
  }
  load_acc_rows(prog, pl.P, 3 * NB, N, static_cast<uint32_t>(pk.params_off));
}

// With a requantisation, α·Σ_k b_kn is the same for every row: it joins block nb's bias
// row (REQUANT adds it to every row) by one GEMM row per B (reloaded with the constant
// bias first), not a GEMM over all rows. An int32 output has no bias row to carry it.
void FcLowering::alpha_into_bias(const FcPacking& pk, const FcPlan& pl, int64_t nb, uint32_t wgt_tile) {
  load_acc_rows(prog, static_cast<uint32_t>(pl.P + 3 * nb), 1, N,
                static_cast<uint32_t>(pk.params_off + static_cast<uint64_t>(nb) * 3 * N * 4));
  for (size_t p = 0; p < alpha_parts.size(); ++p) {
    isa::Gemm ag;
    ag.act = static_cast<uint16_t>(pl.Z + p * static_cast<uint64_t>(KB));
    ag.wgt = static_cast<uint16_t>(wgt_tile);
    ag.acc = static_cast<uint16_t>(pl.P + 3 * nb);
    ag.i = static_cast<uint16_t>(KB);
    ag.act_si = 1;
    ag.wgt_si = 1;
    prog.gemm(ag);
  }
}

// Weight tiles (nb, kb) at WGT tile nb·KB + kb (or 0 when they do not all fit).
void FcLowering::load_weights(const FcPacking& pk, int64_t batch, int64_t nb_first, int64_t nb_count) {
  if (!dynamic) {
    isa::Load ld;
    ld.sp = hw::Scratchpad::kWgt;
    ld.sp_base = 0;
    ld.x = static_cast<uint16_t>(pk.KBW * N);
    ld.x_stride = N;
    ld.y = static_cast<uint16_t>(nb_count);
    ld.y_stride = static_cast<uint32_t>(pk.KBW * tile_bytes);
    prog.load(ld, BK::Weights, static_cast<uint32_t>(pk.tiles_off + static_cast<uint64_t>(nb_first * pk.KBW) * tile_bytes));
    return;
  }
  // Dynamic B: row k of block nb is the DRAM row B[k][nb·N ..]; rows K..KB·N-1 of the last
  // tile keep stale bytes, which meet the zero lanes the input's tail LOAD fills in.
  for (int64_t nb = nb_first; nb < nb_first + nb_count; ++nb) {
    isa::Load ld;
    ld.sp = hw::Scratchpad::kWgt;
    ld.row_elems = static_cast<uint32_t>(std::min<int64_t>(N, L.N - nb * N));
    ld.sp_base = static_cast<uint32_t>((nb - nb_first) * KB * N);
    ld.x = static_cast<uint16_t>(L.K);
    ld.x_stride = dyn.w_k_stride;
    prog.load(ld, BK::Activations,
              static_cast<uint32_t>(dyn.w_off + static_cast<uint64_t>(batch) * dyn.w_batch_stride + nb * N));
  }
}

// LOADs rows [m0, m0 + mt) of x as KB blocks of mt rows at ACT row A: the full K blocks,
// then the tail block.
void FcLowering::load_input_rows(const FcPlan& pl, uint64_t x_base, int64_t m0, int64_t mt) {
  const int64_t full_kb = L.K / N, tail = L.K % N;
  if (full_kb > 0) {
    isa::Load ld;
    ld.sp = hw::Scratchpad::kAct;
    ld.sp_base = pl.A;
    ld.x = static_cast<uint16_t>(mt);
    ld.x_stride = static_cast<uint32_t>(L.K);
    ld.y = static_cast<uint16_t>(full_kb);
    ld.y_stride = N;
    prog.load(ld, BK::Activations, static_cast<uint32_t>(x_base + m0 * L.K));
  }
  if (tail > 0) {
    isa::Load ld;
    ld.sp = hw::Scratchpad::kAct;
    ld.row_elems = static_cast<uint32_t>(tail);
    ld.sp_base = static_cast<uint32_t>(pl.A + full_kb * mt);
    ld.x = static_cast<uint16_t>(mt);
    ld.x_stride = static_cast<uint32_t>(L.K);
    prog.load(ld, BK::Activations, static_cast<uint32_t>(x_base + m0 * L.K + full_kb * N));
  }
}

// Output block nb of M tile [m0, m0 + mt): the accumulators' start (bias), the GEMMs, then
// an int32 ACC STORE or a REQUANT and its STORE.
void FcLowering::emit_block(const FcPacking& pk, const FcPlan& pl, int64_t m0, int64_t mt, int64_t nb,
                            uint64_t y_base) {
  start_accumulators(pk, pl, m0, mt, nb);
  accumulate(pk, pl, mt, nb);
  store_block(pl, m0, mt, nb, y_base);
}

// The accumulators' start for block nb: the spread bias, the constant bias rows of an int32
// output, or the run-time bias rows (none: the first GEMM clears them).
void FcLowering::start_accumulators(const FcPacking& pk, const FcPlan& pl, int64_t m0, int64_t mt, int64_t nb) {
  const uint32_t C = pl.C, S = pl.S, T = pl.T;
  const bool preload_bias = L.bias_input >= 0;
  if (pl.spread) {
    // Every accumulator lane of rows [C, C + mt) starts at the bias: code c (lane 0 of
    // ACT row S, repeated by act stride r = 0) times the tile's ones row k.
    isa::Gemm sg;
    sg.clear = true;
    sg.act = static_cast<uint16_t>(S);
    sg.wgt = static_cast<uint16_t>(T);
    sg.acc = static_cast<uint16_t>(C);
    sg.r = static_cast<uint16_t>(mt);
    sg.act_sr = 0;
    sg.acc_sr = 1;
    sg.i = static_cast<uint16_t>(std::max(1, dyn.bias_spread / 127));  // i strides 0: repeats
    prog.gemm(sg);
  } else if (L.int32_output) {
    // No requantisation follows: the accumulators start from the constant bias row
    // (zero-point terms included), repeated by the X stride 0.
    repeat_acc_row(prog, C, mt, static_cast<uint32_t>(pk.params_off + static_cast<uint64_t>(nb) * 3 * N * 4));
  } else if (preload_bias) {
    // The accumulators start from the int32 bias rows (one row for every m when the bias
    // is a vector); the GEMM then accumulates onto them.
    isa::Load ld;
    ld.sp = hw::Scratchpad::kAcc;
    ld.row_elems = static_cast<uint32_t>(std::min<int64_t>(N, L.N - nb * N));
    ld.sp_base = C;
    ld.x = static_cast<uint16_t>(mt);
    ld.x_stride = dyn.bias_m_stride;
    prog.load(ld, BK::Activations,
              static_cast<uint32_t>(dyn.bias_off + static_cast<uint64_t>(m0) * dyn.bias_m_stride + nb * N * 4));
  }
}

// Block nb's GEMMs onto its accumulators: x against every weight set, then the α and β
// zero-point GEMMs of a dynamic B.
void FcLowering::accumulate(const FcPacking& pk, const FcPlan& pl, int64_t mt, int64_t nb) {
  const uint32_t A = pl.A, C = pl.C, Z = pl.Z, TB = pl.TB;
  const bool preload_bias = L.bias_input >= 0;
  isa::Gemm gm;
  gm.clear = !preload_bias && !L.int32_output;
  gm.act = static_cast<uint16_t>(A);
  gm.wgt = static_cast<uint16_t>(pl.weights_fit ? nb * pk.KBW : 0);
  gm.acc = static_cast<uint16_t>(C);
  gm.r = static_cast<uint16_t>(mt);
  gm.i = static_cast<uint16_t>(KB);
  gm.act_si = static_cast<uint16_t>(mt);
  gm.act_sr = 1;
  gm.wgt_si = 1;
  gm.acc_sr = 1;
  prog.gemm(gm);
  for (int64_t p = 1; p < pk.sets; ++p) {  // the other integer weight sets
    isa::Gemm pg = gm;
    pg.clear = false;
    pg.wgt = static_cast<uint16_t>(gm.wgt + p * KB);
    prog.gemm(pg);
  }
  for (size_t p = 0; p < (alpha_in_bias ? 0 : alpha_parts.size()); ++p) {
    // α·Σ_k b_kn into every row: the α rows of part p (act stride r = 0) against B's tiles.
    isa::Gemm ag = gm;
    ag.clear = false;
    ag.act = static_cast<uint16_t>(Z + p * static_cast<uint64_t>(KB));
    ag.act_si = 1;
    ag.act_sr = 0;
    prog.gemm(ag);
  }
  for (size_t p = 0; p < beta_parts.size(); ++p) {
    // β·Σ_k x_mk: x against the β tile of part p, the same tile for every K block.
    isa::Gemm bg = gm;
    bg.clear = false;
    bg.wgt = static_cast<uint16_t>(TB + p);
    bg.wgt_si = 0;
    prog.gemm(bg);
  }
}

// Block nb's rows leave: an int32 ACC STORE, or a REQUANT into ACT and its STORE.
void FcLowering::store_block(const FcPlan& pl, int64_t m0, int64_t mt, int64_t nb, uint64_t y_base) {
  const uint32_t Bout = pl.Bout, C = pl.C, P = pl.P;
  if (L.int32_output) {
    isa::Store st;
    st.sp = hw::Scratchpad::kAcc;
    st.row_elems = static_cast<uint32_t>(std::min<int64_t>(N, L.N - nb * N));
    st.sp_base = C;
    st.x = static_cast<uint16_t>(mt);
    st.x_stride = static_cast<uint32_t>(L.N * 4);
    prog.store(st, BK::Activations, static_cast<uint32_t>(y_base + static_cast<uint64_t>(m0 * L.N + nb * N) * 4));
    return;
  }
  isa::VecRequant vq;
  vq.bias = true;
  vq.src = static_cast<uint16_t>(C);
  vq.dst = static_cast<uint16_t>(Bout);
  vq.param = static_cast<uint16_t>(P + 3 * nb);
  vq.r = static_cast<uint16_t>(mt);
  vq.src_sr = 1;
  vq.dst_sr = 1;
  vq.zero_point = static_cast<int8_t>(qy.zero_point);
  vq.clamp_lo = static_cast<int8_t>(L.relu ? std::max(-128, qy.zero_point) : -128);
  vq.clamp_hi = 127;
  prog.vec(vq);
  isa::Store st;
  st.sp = hw::Scratchpad::kAct;
  st.row_elems = static_cast<uint32_t>(std::min<int64_t>(N, L.N - nb * N));
  st.sp_base = Bout;
  st.x = static_cast<uint16_t>(mt);
  st.x_stride = static_cast<uint32_t>(L.N);
  prog.store(st, BK::Activations, static_cast<uint32_t>(y_base + m0 * L.N + nb * N));
}

// The layer's MAC count, note and scratchpad footprint.
LayerFacts FcLowering::facts(const FcPacking& pk, const FcPlan& pl) const {
  LayerFacts facts;
  const int64_t sets = pk.sets, KBW = pk.KBW, Mt = pl.Mt;
  const bool weights_fit = pl.weights_fit;
  const int64_t m_tiles = ceil_div(L.M, Mt);
  facts.macs = static_cast<uint64_t>(L.batches * L.M * KB * NB) * N * N *
                   (static_cast<uint64_t>(sets) + (alpha_in_bias ? 0 : alpha_parts.size()) + beta_parts.size()) +
               (alpha_in_bias ? static_cast<uint64_t>(L.batches * (weights_fit ? 1 : m_tiles) * KB * NB) * N * N *
                                    alpha_parts.size()
                              : 0);
  if (sets > 1)
    facts.note = "integer weights beyond int8 run as " + std::to_string(sets) + " int8 weight sets (" +
                 std::to_string(sets) + "x the GEMMs)";
  facts.scratchpad_bytes = static_cast<uint64_t>(Mt * (KB + 1) + (pl.spread ? 1 : 0) + pl.alpha_rows) * N +
                           static_cast<uint64_t>(Mt + 3 * NB) * N * 4 +
                           static_cast<uint64_t>((weights_fit ? KBW * NB : KBW) + pl.extra_tiles) * tile_bytes;
  return facts;
}

}  // namespace

Result<LayerFacts> lower_fc_layer(const FcLayer& L, const QParams& qx, const QParams& qy, uint32_t N,
                                  uint32_t in_off, uint32_t out_off, std::vector<uint8_t>& weights,
                                  Program& prog, const DynamicOperands& dyn) {
  const bool dynamic = L.weight_input >= 0;
  if (L.int32_output && (L.relu || L.bias_input >= 0))
    return make_error(StatusCode::kInternal, "layer '" + L.name + "': an int32 output takes no fused Relu or run-time bias");
  // Zero points of a dynamic B and its x (both codes, any zero point):
  //   Σ_k (x_k − zx)(b_kn − zw) = Σ_k x_k·b_kn + α·Σ_k b_kn + β·Σ_k x_k + K·α·β,  α = −zx, β = −zw.
  // α·Σ_k b_kn is a GEMM of constant rows (α in the K valid lanes) against B's own tiles, β·Σ_k x_k
  // a GEMM of x against a tile of β everywhere (x's lanes beyond K are zero), both accumulating
  // onto the product; K·α·β joins the constant bias. α, β of 128 run as two int8 halves.
  // Constant weights need none of this: their column sums fold zx into the bias.
  std::vector<int32_t> alpha_parts = dynamic ? int8_parts(-qx.zero_point) : std::vector<int32_t>{};
  std::vector<int32_t> beta_parts = dynamic ? int8_parts(-dyn.qw.zero_point) : std::vector<int32_t>{};
  const bool alpha_in_bias = !L.int32_output && !alpha_parts.empty();
  FcLowering fc{L, qx, qy, N, weights, prog, dyn, dynamic, ceil_div(L.K, N), ceil_div(L.N, N), uint64_t{N} * N,
                std::move(alpha_parts), std::move(beta_parts),
                dynamic ? int64_t{qx.zero_point} * dyn.qw.zero_point : 0, alpha_in_bias};
  NPU_ASSIGN_OR_RETURN(const FcPacking pk, fc.pack());
  NPU_ASSIGN_OR_RETURN(const FcPlan pl, fc.plan(pk));
  fc.load_constants(pk, pl);
  for (int64_t batch = 0; batch < L.batches; ++batch) {
    const uint64_t x_base = in_off + static_cast<uint64_t>(batch * L.M * L.K);
    const uint64_t out_elem = L.int32_output ? 4 : 1;
    const uint64_t y_base = out_off + static_cast<uint64_t>(batch * L.M * L.N) * out_elem;
    if (pl.weights_fit && (dynamic || batch == 0)) fc.load_weights(pk, batch, 0, fc.NB);
    if (pl.weights_fit && alpha_in_bias)
      for (int64_t nb = 0; nb < fc.NB; ++nb) fc.alpha_into_bias(pk, pl, nb, static_cast<uint32_t>(nb * pk.KBW));
    for (int64_t m0 = 0; m0 < L.M; m0 += pl.Mt) {
      const int64_t mt = std::min(pl.Mt, L.M - m0);
      fc.load_input_rows(pl, x_base, m0, mt);
      for (int64_t nb = 0; nb < fc.NB; ++nb) {
        if (!pl.weights_fit) fc.load_weights(pk, batch, nb, 1);
        if (!pl.weights_fit && alpha_in_bias) fc.alpha_into_bias(pk, pl, nb, 0);
        fc.emit_block(pk, pl, m0, mt, nb, y_base);
      }
    }
  }
  return fc.facts(pk, pl);
}

namespace {

int8_t quantize_bound(float v, const QParams& q, int8_t fallback) {
  if (!std::isfinite(v)) return fallback;
  return static_cast<int8_t>(std::clamp(std::nearbyint(v / q.scale) + static_cast<float>(q.zero_point), -128.0f, 127.0f));
}

}  // namespace

// Dynamic conv weights, stored [KH][KW][C][Cout] in DRAM: tile (nb, t, cb) row k is the row
// W[t][cb·N + k][nb·N ..], loaded to WGT tile ((nb − nb_first)·taps + t)·CB + cb. Rows of
// padded input channels are cleared from the zero row at `zero_row` of the weights (the
// input's padding lanes may hold stale bytes).
static void load_dynamic_conv_tiles(int64_t C, int64_t Cout, int64_t taps, int64_t nb_first, int64_t nb_count, uint32_t w_off,
                             uint32_t zero_row, uint32_t N, Program& prog) {
  const int64_t Cp = padded_channels(C, N);
  for (int64_t nb = nb_first; nb < nb_first + nb_count; ++nb)
    for (int64_t t = 0; t < taps; ++t) {
      const uint32_t base = static_cast<uint32_t>(((nb - nb_first) * taps + t) * Cp);
      isa::Load ld;
      ld.sp = hw::Scratchpad::kWgt;
      ld.row_elems = static_cast<uint32_t>(std::min<int64_t>(N, Cout - nb * N));
      ld.sp_base = base;
      ld.x = static_cast<uint16_t>(C);
      ld.x_stride = static_cast<uint32_t>(Cout);
      prog.load(ld, image::BufferKind::Activations, static_cast<uint32_t>(w_off + (t * C) * Cout + nb * N));
      if (C < Cp) {
        isa::Load zero;
        zero.sp = hw::Scratchpad::kWgt;
        zero.sp_base = static_cast<uint32_t>(base + C);
        zero.x = static_cast<uint16_t>(Cp - C);
        zero.x_stride = 0;
        prog.load(zero, image::BufferKind::Weights, zero_row);
      }
    }
}

static Result<LayerFacts> lower_tap_gemm_conv(const ConvLayer& L, const QParams& qx, const QParams& qy_out, uint32_t N,
                                              uint32_t in_off, uint32_t out_off, std::vector<uint8_t>& weights,
                                              Program& prog, const DynamicOperands& dyn,
                                              const std::optional<QParams>& q_lut_input);
namespace {
isa::Words vec_mode(isa::VecRequant v, hw::VecMode mode, uint32_t aux, uint32_t kw, uint32_t kh, uint32_t wys);
}  // namespace

// A dynamic conv bias (int32 [Cout]) replaces the bias row of each output block's parameter
// rows (block nb at ACC row param_base + 3·nb).
static void load_dynamic_bias_rows(int64_t Cout, uint32_t param_base, uint32_t bias_off, uint32_t N, Program& prog) {
  for (int64_t nb = 0; nb < ceil_div(Cout, N); ++nb) {
    isa::Load ld;
    ld.sp = hw::Scratchpad::kAcc;
    ld.row_elems = static_cast<uint32_t>(std::min<int64_t>(N, Cout - nb * N));
    ld.sp_base = static_cast<uint32_t>(param_base + 3 * nb);
    ld.x = 1;
    prog.load(ld, image::BufferKind::Activations, static_cast<uint32_t>(bias_off + nb * N * 4));
  }
}

// Constant conv weights: `rows_per_nb` WGT rows per output block, blocks consecutive in the
// weights from w_off; loads blocks [nb_first, nb_first + nb_count) to WGT row 0 on.
static void load_weight_rows(uint64_t w_off, uint64_t rows_per_nb, int64_t nb_first, int64_t nb_count, uint32_t N,
                             Program& prog) {
  isa::Load ld;
  ld.sp = hw::Scratchpad::kWgt;
  ld.x = static_cast<uint16_t>(rows_per_nb);
  ld.x_stride = N;
  ld.y = static_cast<uint16_t>(nb_count);
  ld.y_stride = static_cast<uint32_t>(rows_per_nb * N);
  prog.load(ld, image::BufferKind::Weights, static_cast<uint32_t>(w_off + static_cast<uint64_t>(nb_first) * rows_per_nb * N));
}

uint32_t fused_lut_rows(const ConvLayer& L, uint32_t N, bool wide_input) {
  return L.lut_input < 0 ? 0 : wide_input ? isa::wide_lut_rows(N) : 256 / N;
}

bool conv_fits_wide(const ConvLayer& L, uint32_t N) {
  const int64_t CB = ceil_div(L.C, N), Wp = L.W + L.pad_l + L.pad_r;
  const int64_t rows = CB * L.KH * Wp * 2 + L.OW * 2 + fused_lut_rows(L, N, true);
  return rows <= static_cast<int64_t>(hw::kActSpBytes / N);
}

Result<QParams> load_fused_lut(const ConvLayer& L, const QParams& qy, const std::optional<QParams>& q_lut_input,
                               uint32_t N, std::vector<uint8_t>& weights, Program& prog, bool wide_input) {
  if (L.lut_input < 0) return qy;
  if (!q_lut_input || !L.lut_fn)
    return make_error(StatusCode::kInternal, "conv '" + L.name + "': a fused lookup table needs its input's quantisation");
  const QParams& qm = *q_lut_input;
  const uint32_t rows = fused_lut_rows(L, N, wide_input);
  const uint64_t table_off = align_up(weights.size());
  weights.resize(table_off + uint64_t{rows} * N, 0);
  if (wide_input) {
    // Entry e is the function at the int8 code e − 128 of the input grid (the wide input
    // 256·(e − 128)), on the 8.8 grid of the output: the device interpolates between them.
    for (uint32_t e = 0; e < isa::kWideLutEntries; ++e) {
      const float y = L.lut_fn(qm.scale * static_cast<float>(static_cast<int32_t>(e) - 128 - qm.zero_point));
      const double code = std::nearbyint(256.0 * (static_cast<double>(y) / qy.scale + qy.zero_point));
      const auto t = static_cast<int16_t>(std::clamp(code, -32768.0, 32767.0));
      std::memcpy(weights.data() + table_off + 2 * e, &t, 2);  // little-endian
    }
  } else {
    for (int q = -128; q < 128; ++q)
      weights[table_off + static_cast<uint64_t>(q + 128)] =
          static_cast<uint8_t>(quantize_value(L.lut_fn(qm.scale * static_cast<float>(q - qm.zero_point)), qy));
  }
  const uint32_t top = static_cast<uint32_t>(hw::kActSpBytes / N) - rows;
  isa::Load ld;
  ld.sp = hw::Scratchpad::kAct;
  ld.sp_base = top;
  ld.x = static_cast<uint16_t>(rows);
  ld.x_stride = N;
  prog.load(ld, image::BufferKind::Weights, static_cast<uint32_t>(table_off));
  return qm;
}

void apply_fused_lut(const ConvLayer& L, uint32_t N, uint32_t base, int64_t rows, Program& prog, bool wide_input,
                     bool wide_output) {
  if (L.lut_input < 0) return;
  const uint32_t top = static_cast<uint32_t>(hw::kActSpBytes / N) - fused_lut_rows(L, N, wide_input);
  // In place: output row r (at base + r, or base + 2r when wide) never overwrites the source
  // of a later row (base + 2r' with r' > r).
  isa::VecRequant v{.wide_dst = wide_output, .src = static_cast<uint16_t>(base), .dst = static_cast<uint16_t>(base),
                    .param = static_cast<uint16_t>(top), .r = static_cast<uint16_t>(rows),
                    .src_sr = static_cast<uint16_t>(wide_input ? 2 : 1), .dst_sr = static_cast<uint16_t>(wide_output ? 2 : 1)};
  isa::Words w = vec_mode(v, hw::VecMode::kLut, 0, 0, 0, 0);
  if (wide_input) w[0] |= isa::kVecWideSrcBit;
  prog.vec_words(w);
}

namespace {

// Which taps of one kernel axis fall inside the image, for one class of output positions.
struct TapRange {
  int64_t lo, hi;
  bool operator==(const TapRange&) const = default;
};

// The distinct tap ranges of `out` output positions along one axis (*kinds) and each
// position's class (*of).
void tap_range_classes(int64_t out, int64_t stride, int64_t pad, int64_t in, int64_t k, std::vector<TapRange>* kinds,
                       std::vector<int>* of) {
  for (int64_t o = 0; o < out; ++o) {
    const TapRange r{std::max<int64_t>(0, pad - o * stride), std::min<int64_t>(k, in + pad - o * stride)};
    auto it = std::find(kinds->begin(), kinds->end(), r);
    if (it == kinds->end()) it = kinds->insert(kinds->end(), r);
    of->push_back(static_cast<int>(it - kinds->begin()));
  }
}

// A regular or depthwise conv's weights and parameter rows as packed into the weights blob
// (ConvLowering::pack).
struct ConvPacking {
  uint64_t w_off = 0;  // weight tiles or depthwise rows (a dynamic W: one zero row)
  uint64_t p_off = 0;  // 3 parameter rows (bias, multiplier, shift) per parameter block
  int64_t sets = 1;    // int8 weight sets of an int32 output's integer weights
  int64_t wtaps = 0;   // weight tiles per (output block, input block)
  bool border_bias = false, fill_padding = false;
  // Tap-validity classes of the output rows and columns (one each without border biases).
  std::vector<TapRange> row_kinds, col_kinds;
  std::vector<int> row_kind, col_kind;
  int64_t regions = 1;       // row classes × column classes
  int64_t param_blocks = 0;  // regions × blocks, 3 ACC rows each
  int64_t zero_block = -1;   // a block of zero parameter rows (wide padding fills), or -1

  // Calls emit(r0, r1, c0, c1, region) for every rectangle of output rows [r0, r1) within
  // [oy0, oy0 + oh) and columns [c0, c1) whose pixels share one tap-validity class.
  template <class Emit>
  void for_each_region(int64_t OW, int64_t oy0, int64_t oh, const Emit& emit) const {
    for (int64_t r0 = oy0; r0 < oy0 + oh;) {
      int64_t r1 = r0 + 1;
      while (r1 < oy0 + oh && row_kind[static_cast<size_t>(r1)] == row_kind[static_cast<size_t>(r0)]) ++r1;
      for (int64_t c0 = 0; c0 < OW;) {
        int64_t c1 = c0 + 1;
        while (c1 < OW && col_kind[static_cast<size_t>(c1)] == col_kind[static_cast<size_t>(c0)]) ++c1;
        emit(r0, r1, c0, c1,
             row_kind[static_cast<size_t>(r0)] * static_cast<int64_t>(col_kinds.size()) + col_kind[static_cast<size_t>(c0)]);
        c0 = c1;
      }
      r0 = r1;
    }
  }
};

// A conv's output-row tiling and scratchpad layout (ConvLowering::plan).
struct ConvTiling {
  uint32_t P = 0;            // parameter rows at the bottom of ACC
  uint32_t Cacc = 0;         // ACC rows of the parameter rows; the accumulators follow
  int64_t OHt = 0;           // output rows per tile
  int64_t copies = 1;        // input tiles and output blocks alternating in ACT
  int64_t in_tile_rows = 0;  // ACT rows of one input tile (all channel blocks)
  bool weights_fit = false;  // every block's weights in WGT at once
};

// One output-row tile: its output rows, the input rows it reads and where they sit.
struct ConvTile {
  int64_t b, oy0, oh;
  int64_t iy0, iy1;      // input rows read, before padding
  int64_t ptile, pbtile;  // padding rows above and below them
  int64_t Hp;            // padded input rows
  uint32_t A, C0;        // ACT row of the input tile, ACC row of the accumulators
};

// lower_conv_layer's arguments and block geometry, shared by its steps. Aggregate-initialised
// by lower_conv_layer, in member order.
struct ConvLowering {
  using BK = image::BufferKind;

  Result<ConvPacking> pack(const std::vector<float>& sw);
  Result<int64_t> integer_weight_sets(const std::vector<float>& sw) const;
  void put_weight_codes(const ConvPacking& pk, const std::vector<float>& sw, std::vector<int64_t>& wsum,
                        std::vector<int32_t>& wq_all);
  void border_classes(ConvPacking& pk) const;
  void put_param_rows(const ConvPacking& pk, const std::vector<float>& sw, const std::vector<int64_t>& wsum,
                      const std::vector<int32_t>& wq_all);
  Result<ConvTiling> plan(const ConvPacking& pk) const;
  void load_weights(const ConvPacking& pk, int64_t nb_first, int64_t nb_count);
  ConvTile tile(const ConvTiling& tp, int64_t b, int64_t oy0, int64_t tile_index) const;
  void emit_tile(const ConvPacking& pk, const ConvTiling& tp, const ConvTile& t, int64_t& block_index, LayerFacts& facts);
  void load_blocks(const ConvPacking& pk, const ConvTiling& tp, const ConvTile& t, int64_t z0, int64_t zc);
  void dwconv_block(const ConvPacking& pk, const ConvTiling& tp, const ConvTile& t, int64_t nb, uint32_t B);
  void gemm_block(const ConvPacking& pk, const ConvTiling& tp, const ConvTile& t, int64_t nb);
  void store_acc_block(const ConvTile& t, int64_t nb, int64_t cout_n);
  void requant_block(const ConvPacking& pk, const ConvTiling& tp, const ConvTile& t, int64_t nb, uint32_t B);
  int64_t in_rows_for(int64_t oh) const { return (oh - 1) * L.stride_h + L.KH; }
  // Wide values (ISA 1.4): ACT rows per input element, whether REQUANT/DWCONV write wide rows
  // (the stored output, or a fused table's input) and ACT rows per element of those.
  int64_t wi() const { return widths.in ? 2 : 1; }
  bool mid_wide() const { return L.lut_input >= 0 ? widths.lut_input : widths.out; }
  int64_t wm() const { return mid_wide() ? 2 : 1; }

  const ConvLayer& L;
  const QParams& qx;
  const QParams& qy;  // the requantisation target (a fused table's input)
  const uint32_t N;
  const uint32_t in_off, out_off;
  std::vector<uint8_t>& weights;
  Program& prog;
  const DynamicOperands& dyn;
  const bool dynamic;
  const uint32_t act_rows;  // below a fused table
  const int64_t CB, NB, taps, Cp, Coutp, Wp;
  const int8_t lo, hi;  // the fused activation's bounds as codes
  const ConvWidths widths;
};

// Packs the weight codes and the parameter rows into the weights blob; produces their layout.
Result<ConvPacking> ConvLowering::pack(const std::vector<float>& sw) {
  ConvPacking pk;
  // Weights: regular conv as N×N tiles ordered (nb, tap, cb); depthwise as rows of N lanes
  // ordered (cb, tap). Then 3 parameter rows (bias, multiplier, shift) per output block.
  pk.w_off = align_up(weights.size());
  const uint64_t tile_bytes = uint64_t{N} * N;
  // A dynamic W needs no tiles here, only one zero row (rows of padded input channels are
  // cleared from it: the input's padding lanes may hold stale bytes).
  NPU_ASSIGN_OR_RETURN(pk.sets, integer_weight_sets(sw));
  pk.wtaps = taps * pk.sets;
  const uint64_t w_bytes = dynamic       ? N
                           : L.depthwise ? static_cast<uint64_t>(CB * taps) * N
                                         : static_cast<uint64_t>(NB * pk.wtaps * CB) * tile_bytes;
  pk.p_off = align_up(pk.w_off + w_bytes);
  weights.resize(pk.p_off + static_cast<uint64_t>(NB) * 3 * N * 4, 0);
  std::vector<int64_t> wsum(static_cast<size_t>(L.Cout), 0);
  // Padding is the real zero only when the input zero point is 0. Otherwise a regular conv
  // gives its border pixels their own biases (below), and a depthwise conv overwrites the
  // padding rows of each input tile with the zero point (`fill_padding`), so that one DWCONV
  // with one bias covers a whole tile: Σ over all taps of (x − zx)·w with x = zx in the
  // padding is the same int32 as Σ over the valid taps, exactly.
  const bool padded = L.pad_t || L.pad_l || L.pad_b || L.pad_r;
  pk.border_bias = !L.depthwise && padded && qx.zero_point != 0;
  pk.fill_padding = L.depthwise && padded && qx.zero_point != 0;
  const int64_t cin_per_out = L.depthwise ? 1 : L.C;
  std::vector<int32_t> wq_all(pk.border_bias ? static_cast<size_t>(L.Cout * cin_per_out * taps) : 0);
  put_weight_codes(pk, sw, wsum, wq_all);
  border_classes(pk);
  pk.param_blocks = pk.regions * (L.depthwise ? CB : NB);  // 3 ACC rows each
  // Wide padding rows are written by a REQUANT whose multiplier is 0 (it then writes exactly
  // its refined zero point): one more block of zero parameter rows after the others.
  if (pk.fill_padding && widths.in) pk.zero_block = pk.param_blocks++;
  weights.resize(pk.p_off + static_cast<uint64_t>(pk.param_blocks) * 3 * N * 4, 0);
  put_param_rows(pk, sw, wsum, wq_all);
  return pk;
}

// The number of int8 weight sets (1 unless an int32 output's integer weights exceed int8),
// or the error for a weight that is no integer code.
Result<int64_t> ConvLowering::integer_weight_sets(const std::vector<float>& sw) const {
  // An int32 output has exact integer weights (declared scale 1, w − w_zp): values beyond
  // int8 run as `sets` weight sets whose GEMMs accumulate, like extra taps over the same input
  // rows. Every other conv has one set of int8 codes.
  int64_t sets = 1;
  if (L.int32_output)
    for (size_t i = 0; i < L.weights.size(); ++i) {
      const float v = L.weights[i] / sw[i / (L.weights.size() / static_cast<size_t>(L.Cout))];
      if (v != std::nearbyint(v) || std::fabs(v) > 65536.0f)
        return make_error(StatusCode::kInternal, "conv '" + L.name + "': weight " + std::to_string(L.weights[i]) +
                                                     " is not an integer code at its scale; its int32 output would be wrong");
      sets = std::max<int64_t>(sets, int8_sets_for(static_cast<int64_t>(v)));
    }
  return sets;
}

// Kernel-sum rounding of one depthwise kernel (`taps` unrounded codes w/s in r): nearest codes,
// then while their sum is more than half a code from the unrounded sum, the tap rounded
// furthest in the excess's direction moves one code back (never a tap at ±127). Edge
// detectors (kernels summing to about 0, as PP-OCRv4 rec's stem) otherwise gain a DC response
// that nearest rounding gives every pixel of a flat region (docs/architecture.md 3.1).
std::vector<int32_t> kernel_sum_codes(const std::vector<double>& r) {
  std::vector<int32_t> q(r.size());
  double excess = 0;
  for (size_t t = 0; t < r.size(); ++t) {
    q[t] = static_cast<int32_t>(std::clamp(std::nearbyint(r[t]), -127.0, 127.0));
    excess += q[t] - r[t];
  }
  while (std::fabs(excess) > 0.5) {
    const int32_t d = excess > 0 ? 1 : -1;
    size_t best = r.size();
    double best_cost = -INFINITY;
    for (size_t t = 0; t < r.size(); ++t)
      if (std::abs(q[t]) < 127 && (q[t] - r[t]) * d > best_cost) {
        best_cost = (q[t] - r[t]) * d;
        best = t;
      }
    if (best == r.size()) break;
    q[best] -= d;
    excess -= d;
  }
  return q;
}

// Writes the constant weight codes (tiles, or depthwise rows); sums each output channel's
// codes into wsum and, with border biases, keeps every code in wq_all. A depthwise conv that
// reads a wide input rounds each kernel by its sum (kernel_sum_codes): with 16-bit
// activations the weights' DC error is what is left (PP-OCRv4 rec: 36 -> 39 of 40 lines,
// 20.6 -> 29.0 dB; measured in 3.1).
void ConvLowering::put_weight_codes(const ConvPacking& pk, const std::vector<float>& sw, std::vector<int64_t>& wsum,
                                    std::vector<int32_t>& wq_all) {
  const uint64_t w_off = pk.w_off, tile_bytes = uint64_t{N} * N;
  const int64_t sets = pk.sets, wtaps = pk.wtaps, cin_per_out = L.depthwise ? 1 : L.C;
  const bool by_sum = L.depthwise && widths.in && !L.int32_output && L.weight_scales.empty();
  std::vector<int32_t> kernel;
  // (A dynamic W has a symmetric input, so neither tiles nor border biases are needed here.)
  for (int64_t co = 0; co < (dynamic ? 0 : L.Cout); ++co) {
    const float s = sw[static_cast<size_t>(co)];
    if (by_sum) {
      std::vector<double> r(static_cast<size_t>(taps));
      for (int64_t t = 0; t < taps; ++t) r[static_cast<size_t>(t)] = L.weights[static_cast<size_t>(co * taps + t)] / s;
      kernel = kernel_sum_codes(r);
    }
    for (int64_t ci = 0; ci < (L.depthwise ? 1 : L.C); ++ci)
      for (int64_t t = 0; t < taps; ++t) {
        const float w = L.weights[static_cast<size_t>((co * (L.depthwise ? 1 : L.C) + ci) * taps + t)];
        const int32_t q = by_sum          ? kernel[static_cast<size_t>(t)]
                          : L.int32_output ? static_cast<int32_t>(std::nearbyint(w / s))
                                           : quantize_weight(w, s, !L.weight_scales.empty());
        wsum[static_cast<size_t>(co)] += q;
        if (pk.border_bias) wq_all[static_cast<size_t>((co * cin_per_out + ci) * taps + t)] = q;
        if (L.depthwise) {
          weights[w_off + static_cast<uint64_t>((co / N) * taps + t) * N + static_cast<uint64_t>(co % N)] =
              static_cast<uint8_t>(q);
          continue;
        }
        const int64_t nb = co / N, cb = ci / N;
        for (int64_t p = 0; p < sets; ++p)  // set p is weight tap p·taps + t
          weights[w_off + static_cast<uint64_t>((nb * wtaps + p * taps + t) * CB + cb) * tile_bytes +
                  static_cast<uint64_t>(ci % N) * N + static_cast<uint64_t>(co % N)] =
              static_cast<uint8_t>(int8_share(q, sets, p));
      }
  }
}

// The tap-validity classes of the output rows and columns, and the region count.
void ConvLowering::border_classes(ConvPacking& pk) const {
  // Border biases: the DMA pads with 0, but the real zero is the input zero point. Output
  // pixels are grouped by which taps fall inside the image (row class × column class); each
  // group gets a bias that subtracts zx·Σ(valid taps' weights), so padding counts as real zero.
  if (pk.border_bias) {
    tap_range_classes(L.OH, L.stride_h, L.pad_t, L.H, L.KH, &pk.row_kinds, &pk.row_kind);
    tap_range_classes(L.OW, L.stride_w, L.pad_l, L.W, L.KW, &pk.col_kinds, &pk.col_kind);
  } else {
    pk.row_kinds = {{0, L.KH}};
    pk.col_kinds = {{0, L.KW}};
    pk.row_kind.assign(static_cast<size_t>(L.OH), 0);  // one rectangle: the whole tile
    pk.col_kind.assign(static_cast<size_t>(L.OW), 0);
  }
  pk.regions = static_cast<int64_t>(pk.row_kinds.size() * pk.col_kinds.size());
}

// Writes the parameter rows (bias, multiplier, shift) of every region and block.
void ConvLowering::put_param_rows(const ConvPacking& pk, const std::vector<float>& sw, const std::vector<int64_t>& wsum,
                                  const std::vector<int32_t>& wq_all) {
  const uint64_t p_off = pk.p_off;
  const int64_t cin_per_out = L.depthwise ? 1 : L.C;
  const auto& row_kinds = pk.row_kinds;
  const auto& col_kinds = pk.col_kinds;
  for (int64_t co = 0; co < L.Cout; ++co) {
    const double in_scale = static_cast<double>(qx.scale) * sw[static_cast<size_t>(co)];
    int32_t mult, shift;
    // A wide destination has 256 codes per step of qy's grid (the device adds 256·zp).
    quantize_multiplier(in_scale / qy.scale * (mid_wide() ? 256.0 : 1.0), &mult, &shift);
    if (pk.border_bias) {
      for (size_t rk = 0; rk < row_kinds.size(); ++rk)
        for (size_t ck = 0; ck < col_kinds.size(); ++ck) {
          int64_t valid = 0;
          for (int64_t ci = 0; ci < cin_per_out; ++ci)
            for (int64_t ky = row_kinds[rk].lo; ky < row_kinds[rk].hi; ++ky)
              for (int64_t kx = col_kinds[ck].lo; kx < col_kinds[ck].hi; ++kx)
                valid += wq_all[static_cast<size_t>((co * cin_per_out + ci) * taps + ky * L.KW + kx)];
          const int64_t bias_q = std::llround(L.bias[static_cast<size_t>(co)] / in_scale) - int64_t{qx.zero_point} * valid;
          const int64_t block = static_cast<int64_t>(rk * col_kinds.size() + ck) * (L.depthwise ? CB : NB) + co / N;
          const uint64_t row = p_off + static_cast<uint64_t>(block) * 3 * N * 4, lane = static_cast<uint64_t>(co % N) * 4;
          put_u32(weights, row + lane, static_cast<uint32_t>(static_cast<int32_t>(std::clamp<int64_t>(bias_q, INT32_MIN, INT32_MAX))));
          put_u32(weights, row + N * 4 + lane, static_cast<uint32_t>(mult));
          put_u32(weights, row + 2 * N * 4 + lane, static_cast<uint32_t>(shift));
        }
      continue;
    }
    const int64_t bias_q = std::llround(L.bias[static_cast<size_t>(co)] / in_scale) -
                           int64_t{qx.zero_point} * wsum[static_cast<size_t>(co)];
    const uint64_t row = p_off + static_cast<uint64_t>(co / N) * 3 * N * 4, lane = static_cast<uint64_t>(co % N) * 4;
    put_u32(weights, row + lane, static_cast<uint32_t>(static_cast<int32_t>(std::clamp<int64_t>(bias_q, INT32_MIN, INT32_MAX))));
    put_u32(weights, row + N * 4 + lane, static_cast<uint32_t>(mult));
    put_u32(weights, row + 2 * N * 4 + lane, static_cast<uint32_t>(shift));
  }
}

// The output-row tile height, the ACT double buffering and whether all weights fit WGT, or
// the error for a conv that does not fit the scratchpads.
Result<ConvTiling> ConvLowering::plan(const ConvPacking& pk) const {
  const uint32_t acc_rows = static_cast<uint32_t>(hw::kAccSpBytes / (4 * N));
  const uint32_t wgt_rows = static_cast<uint32_t>(hw::kWgtSpBytes / N);
  ConvTiling tp;
  // Output-row tiles: the padded input rows of a tile (all channel blocks) plus the tile's
  // output rows must fit the ACT scratchpad, its accumulators the ACC scratchpad.
  tp.P = 0;  // parameter rows at the bottom of ACC
  tp.Cacc = static_cast<uint32_t>(3 * pk.param_blocks);
  const uint32_t Cacc = tp.Cacc;
  if (Cacc > acc_rows)
    return make_error(StatusCode::kUnsupported, "conv '" + L.name + "' needs more parameter rows than the accumulator scratchpad holds");
  int64_t OHt = L.OH;
  const int64_t acc_needed_per_row = L.depthwise ? 0 : L.OW;  // DWCONV needs no accumulators
  // `copies` input tiles and output blocks in ACT (accumulators are COMPUTE's alone: one set).
  auto fits = [&](int64_t oh, int64_t copies) {
    return copies * (CB * in_rows_for(oh) * Wp * wi() + oh * L.OW * wm()) <= act_rows &&
           oh * acc_needed_per_row + Cacc <= acc_rows && oh * L.OW <= 65535;
  };
  while (OHt > 1 && !fits(OHt, 1)) --OHt;
  if (!fits(OHt, 1))
    return make_error(StatusCode::kUnsupported, "conv '" + L.name + "' does not fit the scratchpads even one output row at a time");
  // Double buffering: two input tiles and two output blocks alternate in ACT, so that the LOAD
  // of the next tile and the STORE of an output block run while COMPUTE works on the current
  // ones (program.h orders every reuse by tokens). Tiles of equal height; one set when two do
  // not fit.
  tp.copies = 1;
  if (fits(1, 2)) {
    int64_t oh2 = std::min(OHt, L.OH);
    while (oh2 > 1 && !fits(oh2, 2)) --oh2;
    const int64_t tiles = ceil_div(L.OH, oh2);
    OHt = ceil_div(L.OH, tiles);
    tp.copies = 2;
  }
  tp.OHt = OHt;
  tp.in_tile_rows = CB * in_rows_for(OHt) * Wp * wi();
  const int64_t wtaps = pk.wtaps;
  tp.weights_fit = L.depthwise ? CB * taps <= wgt_rows : static_cast<uint64_t>(NB * wtaps * CB) * N <= wgt_rows;
  if (!tp.weights_fit && !L.depthwise && static_cast<uint64_t>(wtaps * CB) * N > wgt_rows)
    return make_error(StatusCode::kUnsupported, "conv '" + L.name + "' has more weights per output block than the weight scratchpad holds");
  if (!tp.weights_fit && L.depthwise)
    return make_error(StatusCode::kUnsupported, "depthwise conv '" + L.name + "' has too many taps for the weight scratchpad");
  return tp;
}

// LOADs the weights of output blocks [nb_first, nb_first + nb_count) to WGT row 0 on.
void ConvLowering::load_weights(const ConvPacking& pk, int64_t nb_first, int64_t nb_count) {
  if (dynamic) {
    load_dynamic_conv_tiles(L.C, L.Cout, taps, nb_first, nb_count, dyn.w_off, static_cast<uint32_t>(pk.w_off), N, prog);
    return;
  }
  const uint64_t rows_per_nb = L.depthwise ? static_cast<uint64_t>(taps) : static_cast<uint64_t>(pk.wtaps * CB) * N;
  load_weight_rows(pk.w_off, rows_per_nb, nb_first, nb_count, N, prog);
}

// The geometry of the output-row tile from oy0 on in batch b (the tile_index-th tile).
ConvTile ConvLowering::tile(const ConvTiling& tp, int64_t b, int64_t oy0, int64_t tile_index) const {
  ConvTile t;
  t.b = b;
  t.oy0 = oy0;
  t.oh = std::min(tp.OHt, L.OH - oy0);
  // Input rows this tile reads, before padding: [iy0, iy1].
  const int64_t first = oy0 * L.stride_h - L.pad_t, last = (oy0 + t.oh - 1) * L.stride_h - L.pad_t + L.KH - 1;
  t.iy0 = std::max<int64_t>(first, 0);
  t.iy1 = std::min<int64_t>(last, L.H - 1);
  t.ptile = t.iy0 - first;
  t.pbtile = last - t.iy1;
  t.Hp = t.ptile + (t.iy1 - t.iy0 + 1) + t.pbtile;
  t.A = static_cast<uint32_t>((tile_index % tp.copies) * tp.in_tile_rows);
  t.C0 = tp.Cacc;
  return t;
}

// The instructions of one tile: its input LOAD (per block for a depthwise conv), then for
// every output block the DWCONV, or the GEMMs and the REQUANT (or int32 ACC STORE), then the
// fused table and the STORE.
void ConvLowering::emit_tile(const ConvPacking& pk, const ConvTiling& tp, const ConvTile& t, int64_t& block_index,
                             LayerFacts& facts) {
  if (!L.depthwise) load_blocks(pk, tp, t, 0, CB);
  for (int64_t nb = 0; nb < NB; ++nb, ++block_index) {
    const int64_t cout_n = std::min<int64_t>(N, L.Cout - nb * N);
    const auto B = static_cast<uint32_t>(tp.copies * tp.in_tile_rows + (block_index % tp.copies) * tp.OHt * L.OW * wm());
    if (L.depthwise) {
      load_blocks(pk, tp, t, nb, 1);
      dwconv_block(pk, tp, t, nb, B);
      facts.macs += static_cast<uint64_t>(t.oh * L.OW * taps) * N;
    } else {
      if (!tp.weights_fit) load_weights(pk, nb, 1);
      gemm_block(pk, tp, t, nb);
      facts.macs += static_cast<uint64_t>(t.oh * L.OW * pk.wtaps * CB) * N * N;
      if (L.int32_output) {
        store_acc_block(t, nb, cout_n);
        continue;
      }
      requant_block(pk, tp, t, nb, B);
    }
    apply_fused_lut(L, N, B, t.oh * L.OW, prog, widths.lut_input, widths.out);
    const int64_t eo = widths.out ? 2 : 1;
    store_pixel_rows(prog, B, cout_n, L.OW, t.oh, Coutp,
                     static_cast<uint32_t>(out_off + (((t.b * L.OH + t.oy0) * L.OW) * Coutp + nb * N) * eo), widths.out);
  }
}

// Input blocks [z0, z0 + zc) of the tile: one LOAD, then (fill_padding) their padding
// rows at the zero point. A depthwise conv loads each block just before its DWCONV
// (emit_tile): its blocks are independent, so the DWCONV of block nb waits only for that
// block's LOAD while the LOAD engine runs ahead with the next ones.
void ConvLowering::load_blocks(const ConvPacking& pk, const ConvTiling& tp, const ConvTile& t, int64_t z0, int64_t zc) {
  const int64_t Hp = t.Hp, ptile = t.ptile, pbtile = t.pbtile;
  const uint32_t P = tp.P;
  const int64_t w = wi();  // ACT rows per element and DRAM bytes per element
  const uint32_t base = static_cast<uint32_t>(t.A + z0 * Hp * Wp * w);
  isa::Load ld;
  ld.wide = widths.in;
  ld.sp = hw::Scratchpad::kAct;
  ld.sp_base = base;
  ld.x = static_cast<uint16_t>(L.W);
  ld.x_stride = static_cast<uint32_t>(Cp * w);
  ld.y = static_cast<uint16_t>(t.iy1 - t.iy0 + 1);
  ld.y_stride = static_cast<uint32_t>(L.W * Cp * w);
  ld.z = static_cast<uint16_t>(zc);
  ld.z_stride = static_cast<uint32_t>(N * w);
  ld.pad_l = static_cast<uint8_t>(L.pad_l);
  ld.pad_r = static_cast<uint8_t>(L.pad_r);
  ld.pad_t = static_cast<uint8_t>(ptile);
  ld.pad_b = static_cast<uint8_t>(pbtile);
  prog.load(ld, BK::Activations, static_cast<uint32_t>(in_off + (((t.b * L.H + t.iy0) * L.W) * Cp + z0 * N) * w));
  if (!pk.fill_padding) return;
  // The LOAD zero-filled the padding rows; they become zx. A REQUANT whose clamp bounds
  // are both zx writes zx whatever it computes (it reads parameter row P, with zero
  // strides). The blocks are zc·Hp lines of Wp rows: the left and right padding columns
  // of every line, then the top and bottom padding lines of every channel plane.
  // Wide rows: the zero parameter block (multiplier 0) makes the REQUANT write exactly
  // 256·zx, which the refined clamp bounds [256·zx, 256·zx + 255] keep.
  const uint32_t fill_param = widths.in ? static_cast<uint32_t>(P + 3 * pk.zero_block) : P;
  auto fill = [&](uint32_t dst, int64_t o, int64_t dst_so, int64_t r) {
    if (o == 0 || r == 0) return;
    isa::VecRequant vq;
    vq.wide_dst = widths.in;
    vq.src = static_cast<uint16_t>(P);
    vq.param = static_cast<uint16_t>(fill_param);
    vq.dst = static_cast<uint16_t>(dst);
    vq.o = static_cast<uint16_t>(o);
    vq.dst_so = static_cast<uint16_t>(dst_so * w);
    vq.r = static_cast<uint16_t>(r);
    vq.dst_sr = static_cast<uint16_t>(w);
    const auto zx = static_cast<int8_t>(widths.in ? qx.zero_point / 256 : qx.zero_point);  // the int8 field
    vq.zero_point = widths.in ? zx : int8_t{0};
    vq.clamp_lo = vq.clamp_hi = zx;
    prog.vec(vq);
  };
  fill(base, zc * Hp, Wp, L.pad_l);
  fill(static_cast<uint32_t>(base + (L.pad_l + L.W) * w), zc * Hp, Wp, L.pad_r);
  fill(base, zc, Hp * Wp, ptile * Wp);
  fill(static_cast<uint32_t>(base + (Hp - pbtile) * Wp * w), zc, Hp * Wp, pbtile * Wp);
}

// DWCONV of block nb into ACT rows from B, one instruction per region of the tile.
void ConvLowering::dwconv_block(const ConvPacking& pk, const ConvTiling& tp, const ConvTile& t, int64_t nb, uint32_t B) {
  const int64_t oy0 = t.oy0, Hp = t.Hp;
  const uint32_t A = t.A, P = tp.P;
  // DWCONV reads ACT directly: channel block nb of the input is output block nb. With
  // the padding at the zero point (or a zero point of 0) every output pixel has the
  // same bias: one instruction per tile and block.
  pk.for_each_region(L.OW, oy0, t.oh, [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1, int64_t region) {
      const int64_t local = r0 - oy0, a = wi(), m = wm();  // ACT rows per input / output element
      const isa::VecRequant base{
          .bias = true,
          .wide_dst = mid_wide(),
          .src = static_cast<uint16_t>(A + (nb * Hp * Wp + local * L.stride_h * Wp + c0 * L.stride_w) * a),
          .dst = static_cast<uint16_t>(B + (local * L.OW + c0) * m),
          .param = static_cast<uint16_t>(P + 3 * (region * CB + nb)),
          .r = static_cast<uint16_t>(c1 - c0), .o = static_cast<uint16_t>(r1 - r0),
          .zero_point = static_cast<int8_t>(qy.zero_point),
          .src_so = static_cast<uint16_t>(L.stride_h * Wp * a), .src_sr = static_cast<uint16_t>(L.stride_w * a),
          .dst_so = static_cast<uint16_t>(L.OW * m), .dst_sr = static_cast<uint16_t>(m), .clamp_lo = lo, .clamp_hi = hi};
      isa::Words w = isa::encode(base);
      w[0] = (w[0] & ~(0xFu << 16)) | (static_cast<uint32_t>(hw::VecMode::kDwconv) << 16) |
             (widths.in ? isa::kVecWideSrcBit : 0u);
      w[6] |= static_cast<uint32_t>(nb * taps) << 16;
      w[7] = static_cast<uint32_t>(L.KW) | (static_cast<uint32_t>(L.KH) << 8) | (static_cast<uint32_t>(Wp * a) << 16);
      prog.vec_words(w);
  });
}

// The accumulators of block nb: an int32 output's bias preload, then one GEMM per weight tap.
void ConvLowering::gemm_block(const ConvPacking& pk, const ConvTiling& tp, const ConvTile& t, int64_t nb) {
  const int64_t oy0 = t.oy0, oh = t.oh, wtaps = pk.wtaps;
  const uint32_t C0 = t.C0;
  if (L.int32_output) {
    // Each accumulator row starts from its region's bias row (X stride 0 repeats it);
    // rows of one rectangle are consecutive only across whole output rows.
    auto preload = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1, int64_t region) {
      const uint32_t bias_row = static_cast<uint32_t>(pk.p_off + static_cast<uint64_t>(region * NB + nb) * 3 * N * 4);
      const int64_t runs = c0 == 0 && c1 == L.OW ? 1 : r1 - r0;
      const int64_t run_rows = runs == 1 ? (r1 - r0) * L.OW : c1 - c0;
      for (int64_t k = 0; k < runs; ++k)
        repeat_acc_row(prog, static_cast<uint32_t>(C0 + (r0 - oy0 + k) * L.OW + c0), run_rows, bias_row);
    };
    if (pk.border_bias) pk.for_each_region(L.OW, oy0, oh, preload);
    else preload(oy0, oy0 + oh, 0, L.OW, 0);
  }
  const int64_t wbase = (tp.weights_fit ? nb : 0) * wtaps * CB;
  for (int64_t wt = 0; wt < wtaps; ++wt) {
    const int64_t tap = wt % taps;  // weight tap wt reads the input rows of tap `tap`
    const int64_t a = wi();  // ACT rows per input element
    isa::Gemm gm;
    gm.clear = wt == 0 && !L.int32_output;
    gm.wide = widths.in;
    gm.act = static_cast<uint16_t>(t.A + ((tap / L.KW) * Wp + (tap % L.KW)) * a);
    gm.wgt = static_cast<uint16_t>(wbase + wt * CB);
    gm.acc = static_cast<uint16_t>(C0);
    gm.o = static_cast<uint16_t>(oh);
    gm.act_so = static_cast<uint16_t>(L.stride_h * Wp * a);
    gm.acc_so = static_cast<uint16_t>(L.OW);
    gm.i = static_cast<uint16_t>(CB);
    gm.act_si = static_cast<uint16_t>(t.Hp * Wp * a);
    gm.wgt_si = 1;
    gm.r = static_cast<uint16_t>(L.OW);
    gm.act_sr = static_cast<uint16_t>(L.stride_w * a);
    gm.acc_sr = 1;
    prog.gemm(gm);
  }
}

// An int32 output's block nb, stored straight from the accumulators.
void ConvLowering::store_acc_block(const ConvTile& t, int64_t nb, int64_t cout_n) {
  isa::Store st;
  st.sp = hw::Scratchpad::kAcc;
  st.row_elems = static_cast<uint32_t>(cout_n);
  st.sp_base = t.C0;
  st.x = static_cast<uint16_t>(L.OW);
  st.x_stride = static_cast<uint32_t>(Coutp * 4);
  st.y = static_cast<uint16_t>(t.oh);
  st.y_stride = static_cast<uint32_t>(L.OW * Coutp * 4);
  prog.store(st, BK::Activations,
             static_cast<uint32_t>(out_off + static_cast<uint64_t>(((t.b * L.OH + t.oy0) * L.OW) * Coutp + nb * N) * 4));
}

// REQUANT of block nb's accumulators into ACT rows from B (one per region with border biases).
void ConvLowering::requant_block(const ConvPacking& pk, const ConvTiling& tp, const ConvTile& t, int64_t nb, uint32_t B) {
  const int64_t oy0 = t.oy0, oh = t.oh;
  const uint32_t vec_src = t.C0, P = tp.P;
  const int64_t m = wm();  // ACT rows per output element
  isa::VecRequant vq;
  vq.bias = true;
  vq.wide_dst = mid_wide();
  vq.src = static_cast<uint16_t>(vec_src);
  vq.dst = static_cast<uint16_t>(B);
  vq.param = static_cast<uint16_t>(P + 3 * nb);
  vq.r = static_cast<uint16_t>(oh * L.OW);
  vq.src_sr = 1;
  vq.dst_sr = static_cast<uint16_t>(m);
  vq.zero_point = static_cast<int8_t>(qy.zero_point);
  vq.clamp_lo = lo;
  vq.clamp_hi = hi;
  if (!pk.border_bias) {
    prog.vec(vq);
    return;
  }
  // One REQUANT per rectangle of output pixels sharing a tap-validity class.
  pk.for_each_region(L.OW, oy0, oh, [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1, int64_t region) {
      const int64_t at = (r0 - oy0) * L.OW + c0;
      isa::VecRequant part = vq;
      part.src = static_cast<uint16_t>(vec_src + at);
      part.dst = static_cast<uint16_t>(B + at * m);
      part.param = static_cast<uint16_t>(P + 3 * (region * NB + nb));
      part.o = static_cast<uint16_t>(r1 - r0);
      part.src_so = static_cast<uint16_t>(L.OW);
      part.dst_so = static_cast<uint16_t>(L.OW * m);
      part.r = static_cast<uint16_t>(c1 - c0);
      prog.vec(part);
  });
}

}  // namespace

Result<LayerFacts> lower_conv_layer(const ConvLayer& L, const QParams& qx, const QParams& qy_out, uint32_t N,
                                    uint32_t in_off, uint32_t out_off, std::vector<uint8_t>& weights,
                                    Program& prog, const DynamicOperands& dyn, std::optional<QParams> q_lut_input,
                                    ConvWidths widths) {
  if (L.transposed || L.three_d) {
    if (widths.in || widths.out || widths.lut_input)
      return make_error(StatusCode::kInternal, "conv '" + L.name + "': wide values are not lowered for ConvTranspose or 3-D convs");
    return lower_tap_gemm_conv(L, qx, qy_out, N, in_off, out_off, weights, prog, dyn, q_lut_input);
  }
  if (L.lut_input < 0) widths.lut_input = false;
  if (L.int32_output && (widths.out || widths.lut_input))
    return make_error(StatusCode::kInternal, "conv '" + L.name + "': an int32 output has no wide form");
  const uint32_t act_rows = static_cast<uint32_t>(hw::kActSpBytes / N) - fused_lut_rows(L, N, widths.lut_input);
  NPU_ASSIGN_OR_RETURN(const QParams qy, load_fused_lut(L, qy_out, q_lut_input, N, weights, prog, widths.lut_input));
  const int64_t CB = ceil_div(L.C, N), NB = ceil_div(L.Cout, N), taps = L.KH * L.KW;
  const bool dynamic = L.weight_input >= 0;
  const std::vector<float> sw = dynamic ? std::vector<float>(static_cast<size_t>(L.Cout), dyn.qw.scale)
                                        : conv_weight_scales(L);
  // int32 output (ConvInteger): the accumulators start from the bias (border regions
  // included) loaded from the weights and leave through an ACC STORE, no requantisation.
  if (L.int32_output && (L.depthwise || dynamic || L.bias_input >= 0))
    return make_error(StatusCode::kInternal, "conv '" + L.name + "': an int32 output needs a regular conv with constant weights");
  // A wide input holds codes of the 8.8 refinement of its grid: the arithmetic (multipliers,
  // zero-point biases) uses that grid; the padding fills give the int8 zero point, which the
  // device refines.
  const QParams qx_codes = widths.in ? QParams{qx.scale / 256.0f, qx.zero_point * 256} : qx;
  ConvLowering cv{L, qx_codes, qy, N, in_off, out_off, weights, prog, dyn, dynamic, act_rows,
                  CB, NB, taps, CB * N, NB * N, L.W + L.pad_l + L.pad_r,
                  quantize_bound(L.act_lo, qy, -128), quantize_bound(L.act_hi, qy, 127), widths};
  NPU_ASSIGN_OR_RETURN(const ConvPacking pk, cv.pack(sw));
  NPU_ASSIGN_OR_RETURN(const ConvTiling tp, cv.plan(pk));
  load_acc_rows(prog, tp.P, 3 * pk.param_blocks, N, static_cast<uint32_t>(pk.p_off));
  if (L.bias_input >= 0) load_dynamic_bias_rows(L.Cout, tp.P, dyn.bias_off, N, prog);
  if (tp.weights_fit) cv.load_weights(pk, 0, L.depthwise ? CB : NB);
  LayerFacts facts;
  int64_t tile_index = 0, block_index = 0;
  for (int64_t b = 0; b < L.batch; ++b)
    for (int64_t oy0 = 0; oy0 < L.OH; oy0 += tp.OHt, ++tile_index)
      cv.emit_tile(pk, tp, cv.tile(tp, b, oy0, tile_index), block_index, facts);
  const uint64_t tile_bytes = uint64_t{N} * N;
  facts.scratchpad_bytes = static_cast<uint64_t>(tp.copies * (CB * cv.in_rows_for(tp.OHt) * cv.Wp * cv.wi() +
                                                             tp.OHt * L.OW * cv.wm())) * N +
                           static_cast<uint64_t>(tp.OHt * L.OW + tp.Cacc) * N * 4 +
                           (L.depthwise ? static_cast<uint64_t>(CB * taps) * N
                                        : static_cast<uint64_t>(NB * pk.wtaps * CB) * tile_bytes);
  if (pk.sets > 1)
    facts.note = "integer weights beyond int8 run as " + std::to_string(pk.sets) + " int8 weight sets (" +
                 std::to_string(pk.sets) + "x the GEMMs)";
  return facts;
}

void load_acc_rows(Program& prog, uint32_t acc_row, int64_t rows, uint32_t N, uint32_t offset) {
  isa::Load ld;
  ld.sp = hw::Scratchpad::kAcc;
  ld.sp_base = acc_row;
  ld.x = static_cast<uint16_t>(rows);
  ld.x_stride = 4 * N;
  prog.load(ld, image::BufferKind::Weights, offset);
}

void repeat_acc_row(Program& prog, uint32_t acc_row, int64_t rows, uint32_t offset) {
  isa::Load ld;
  ld.sp = hw::Scratchpad::kAcc;
  ld.sp_base = acc_row;
  ld.x = static_cast<uint16_t>(rows);
  ld.x_stride = 0;
  prog.load(ld, image::BufferKind::Weights, offset);
}

void store_pixel_rows(Program& prog, uint32_t sp_base, int64_t row_elems, int64_t OW, int64_t rows,
                      int64_t cp, uint32_t offset, bool wide) {
  const int64_t es = wide ? 2 : 1;  // a wide row: two ACT rows, two bytes per element in DRAM
  isa::Store st;
  st.wide = wide;
  st.sp = hw::Scratchpad::kAct;
  st.row_elems = static_cast<uint32_t>(row_elems);
  st.sp_base = sp_base;
  st.x = static_cast<uint16_t>(OW);
  st.x_stride = static_cast<uint32_t>(cp * es);
  st.y = static_cast<uint16_t>(rows);
  st.y_stride = static_cast<uint32_t>(OW * cp * es);
  prog.store(st, image::BufferKind::Activations, offset);
}

uint64_t device_bytes(const std::vector<int64_t>& shape, uint32_t n) {
  if (shape.size() == 4) return static_cast<uint64_t>(shape[0] * shape[2] * shape[3] * padded_channels(shape[1], n));
  uint64_t bytes = 1;
  for (int64_t d : shape) bytes *= static_cast<uint64_t>(d);
  return bytes;
}

namespace {

// m ~= multiplier * 2^-shift for several multipliers sharing one shift (VEC ADD's m0/m1).
int32_t shared_shift(double largest) {
  int e = 0;
  std::frexp(largest, &e);
  return std::clamp(31 - e, 0, 63);
}

// One ACC parameter row (lanes m0, m1, s, za, zb) appended to the weights blob.
uint64_t put_scalar_params(std::vector<uint8_t>& weights, uint32_t n, int32_t m0, int32_t m1, int32_t s, int32_t za,
                           int32_t zb) {
  const uint64_t off = align_up(weights.size());
  weights.resize(off + uint64_t{n} * 4, 0);
  put_u32(weights, off, static_cast<uint32_t>(m0));
  put_u32(weights, off + 4, static_cast<uint32_t>(m1));
  put_u32(weights, off + 8, static_cast<uint32_t>(s));
  put_u32(weights, off + 12, static_cast<uint32_t>(za));
  put_u32(weights, off + 16, static_cast<uint32_t>(zb));
  return off;
}

// Loads `count` consecutive parameter rows written by put_scalar_params (the first at weight
// byte `first`) into ACC rows 0 .. count − 1.
void load_scalar_params(Program& prog, uint32_t N, uint64_t first, uint32_t count) {
  isa::Load pl;
  pl.sp = hw::Scratchpad::kAcc;
  pl.x = static_cast<uint16_t>(count);
  pl.x_stride = static_cast<uint32_t>(align_up(4 * N));  // put_scalar_params aligns each row
  prog.load(pl, image::BufferKind::Weights, static_cast<uint32_t>(first));
}

isa::Words vec_mode(isa::VecRequant v, hw::VecMode mode, uint32_t aux, uint32_t kw, uint32_t kh, uint32_t wys) {
  isa::Words w = isa::encode(v);
  w[0] = (w[0] & ~(0xFu << 16)) | (static_cast<uint32_t>(mode) << 16);
  w[6] |= aux << 16;
  w[7] = (kw & 0xFF) | ((kh & 0xFF) << 8) | (wys << 16);
  return w;
}

}  // namespace

namespace {

// Pooling: a class of output positions along one axis whose windows clip the same taps.
struct Taps {
  int64_t lo, hi, padded;  // valid taps [lo, hi); taps inside the padded extent
  bool operator==(const Taps&) const = default;
};

// The distinct tap classes of `out` output positions along one axis (*kinds) and each
// position's class (*of).
void tap_classes(int64_t out, int64_t stride, int64_t pad_lo, int64_t pad_hi, int64_t in, int64_t k, int64_t dil,
                 std::vector<Taps>* kinds, std::vector<int>* of) {
  // Taps t of output o read start + t·dil; valid while inside [0, in) (or the padded extent).
  auto below = [dil](int64_t start, int64_t end) { return end <= start ? 0 : (end - 1 - start) / dil + 1; };
  for (int64_t o = 0; o < out; ++o) {
    const int64_t start = o * stride - pad_lo;
    const Taps t{start < 0 ? (-start + dil - 1) / dil : 0, std::min(k, below(start, in)),
                 std::min(k, below(start, in + pad_hi))};
    auto it = std::find(kinds->begin(), kinds->end(), t);
    if (it == kinds->end()) it = kinds->insert(kinds->end(), t);
    of->push_back(static_cast<int>(it - kinds->begin()));
  }
}

// An average's divisor over a window of depth, row and column classes d, r, c. The window
// is separable, so its tap count is the product of the per-axis counts.
int64_t pool_divisor(const EltLayer& L, const Taps& d, const Taps& r, const Taps& c) {
  return L.count_include_pad ? d.padded * r.padded * c.padded : (d.hi - d.lo) * (r.hi - r.lo) * (c.hi - c.lo);
}

// A pooling layer's geometry (EltLowering::pool_plan): planes, tap classes per axis, the
// averages' divisors, the column phases of a dilated MaxPool.
struct PoolPlan {
  bool dense_rows, avg;
  int64_t Nb, C, ODd, H, W, OH, OW, CB, pixel, plane_in, plane_out;
  std::vector<Taps> depth_kinds, row_kinds, col_kinds;
  std::vector<int> depth_kind, row_kind, col_kind;
  int64_t fmax;        // most input slices one output slice reads
  int64_t plane_rows;  // scratchpad rows of the input plane(s); output plane rows start here
  std::vector<int64_t> divisors;  // AveragePool: one parameter row each
  hw::VecMode mode;
  // Column phases: phase p holds columns p, p + dw, ... (cnt[p] of them) plane-major, from
  // scratchpad row fv·base[p] (fv interleaved slices of H·cnt[p] rows each).
  int64_t phases;
  std::vector<int64_t> cnt, base;
};

// lower_elt_layer's arguments, shared by its per-family lowerings (one member function per
// operator family). The binary family (Add, Mul, PRelu, Div) shares its b operand and the
// steps below `binary`. Aggregate-initialised by lower_elt_layer, in member order.
struct EltLowering {
  using BK = image::BufferKind;
  using Kind = EltLayer::Kind;
  // `compute` leaves the result of rows A (a) and B (b) in A; C is free scratch.
  using Compute = std::function<void(uint32_t A, uint32_t B, uint32_t C, uint32_t rows)>;

  Result<LayerFacts> repack();
  Result<LayerFacts> lut();
  Result<LayerFacts> binary();
  Result<LayerFacts> clip();
  Result<LayerFacts> resize();
  Result<LayerFacts> pool();
  Result<PoolPlan> pool_plan();
  void pool_slice(const PoolPlan& P, int64_t b, int64_t cb, int64_t od);

  Result<LayerFacts> integer_divide();
  Result<LayerFacts> divide();
  Result<LayerFacts> integer_arith();
  Result<LayerFacts> prelu();
  void run_binary(uint32_t reserved, uint32_t regions, const Compute& compute);
  void binary_last_axis(uint32_t reserved, uint32_t regions, uint64_t capacity, const Compute& compute);
  void binary_rows(uint32_t reserved, uint32_t regions, uint64_t capacity, const Compute& compute);
  void binary_channels(uint32_t reserved, uint32_t regions, uint64_t capacity, const Compute& compute);
  void vec_binary_clamped(hw::VecMode mode, uint32_t P, uint32_t src, uint32_t aux, uint32_t dst, uint32_t rows,
                          int8_t zp, int8_t lo, int8_t hi, bool wrap);
  void vec_binary(hw::VecMode mode, uint32_t P, uint32_t src, uint32_t aux, uint32_t dst, uint32_t rows,
                  const QParams& out, bool wrap = false);
  uint64_t add_params(const QParams& qa, const QParams& qbb, double sign, const QParams& out);
  uint64_t mul_params(const QParams& qa, const QParams& qbb, const QParams& out);
  void load_params(uint64_t first, uint32_t count) { load_scalar_params(prog, N, first, count); }
  void store_rows(uint32_t base, uint32_t rows, uint64_t dram);

  const EltLayer& L;
  const std::vector<std::vector<int64_t>>& in_shapes;
  const std::vector<int64_t>& out_shape;
  const std::vector<QParams>& qin;
  const QParams& qy;
  const std::vector<uint32_t>& in_off;
  const uint32_t out_off;
  const uint32_t N;
  std::vector<uint8_t>& weights;
  Program& prog;
  const uint32_t act_rows;
  const QParams qx;
  // The binary family's b operand: where its rows are and their quantisation (binary()).
  BK b_buffer = BK::Activations;
  uint64_t b_off = 0;
  QParams qb;
};

void EltLowering::store_rows(uint32_t base, uint32_t rows, uint64_t dram) {
    isa::Store st;
    st.sp = hw::Scratchpad::kAct;
    st.sp_base = base;
    st.x = static_cast<uint16_t>(rows);
    st.x_stride = N;
    prog.store(st, BK::Activations, static_cast<uint32_t>(dram));
}

Result<LayerFacts> EltLowering::repack() {
  LayerFacts facts;
  // [B,C,1,1] (CB rows of N lanes per batch) <-> dense [B,C]: per batch, the full blocks and
  // the tail block move as rows; a LOAD of fewer lanes zero-fills the padding lanes.
  const bool to_dense = in_shapes[0].size() == 4;
  const int64_t B = out_shape[0], C = out_shape[1], full = C / N, tail = C % N, CB = full + (tail ? 1 : 0);
  if (CB > act_rows)
    return make_error(StatusCode::kUnsupported, "'" + L.name + "': " + std::to_string(C) + " channels do not fit the scratchpad");
  for (int64_t b = 0; b < B; ++b) {
    const uint64_t padded = static_cast<uint64_t>(b * CB) * N, dense = static_cast<uint64_t>(b * C);
    if (to_dense) {
      prog.load(rows_load(hw::Scratchpad::kAct, 0, static_cast<uint32_t>(CB), N), BK::Activations,
                static_cast<uint32_t>(in_off[0] + padded));
    } else {
      if (full) prog.load(rows_load(hw::Scratchpad::kAct, 0, static_cast<uint32_t>(full), N), BK::Activations,
                          static_cast<uint32_t>(in_off[0] + dense));
      if (tail) {
        isa::Load ld = rows_load(hw::Scratchpad::kAct, static_cast<uint32_t>(full), 1, N);
        ld.row_elems = static_cast<uint32_t>(tail);
        prog.load(ld, BK::Activations, static_cast<uint32_t>(in_off[0] + dense + full * N));
      }
    }
    if (!to_dense) {
      store_rows(0, static_cast<uint32_t>(CB), out_off + padded);
      continue;
    }
    if (full) store_rows(0, static_cast<uint32_t>(full), out_off + dense);
    if (tail) {
      isa::Store st;
      st.sp = hw::Scratchpad::kAct;
      st.sp_base = static_cast<uint32_t>(full);
      st.x = 1;
      st.row_elems = static_cast<uint32_t>(tail);
      prog.store(st, BK::Activations, static_cast<uint32_t>(out_off + dense + full * N));
    }
  }
  return facts;
}

Result<LayerFacts> EltLowering::lut() {
  LayerFacts facts;
  const uint64_t table_off = align_up(weights.size());
  weights.resize(table_off + 256, 0);
  for (int q = -128; q < 128; ++q)
    weights[table_off + static_cast<uint64_t>(q + 128)] =
        static_cast<uint8_t>(quantize_value(L.fn(qx.scale * static_cast<float>(q - qx.zero_point)), qy));
  const uint32_t T = 0, D = 256 / N;
  prog.load(rows_load(hw::Scratchpad::kAct, T, 256 / N, N), BK::Weights, static_cast<uint32_t>(table_off));
  const uint64_t rows = (device_bytes(out_shape, N) + N - 1) / N;
  // Chunks alternate between two regions, so that the LOAD of chunk k+1 and the STORE of
  // chunk k−1 overlap the lookup of chunk k (the token footprints order the rest); a
  // tensor that fits one region stays one chunk.
  const uint64_t region = std::min<uint64_t>((act_rows - D) / 2, 65535);
  const uint64_t chunk = rows <= std::min<uint64_t>(act_rows - D, 65535)
                             ? rows
                             : std::min<uint64_t>(region, std::max<uint64_t>(1024, ceil_div(static_cast<int64_t>(rows), 8)));
  for (uint64_t r0 = 0, k = 0; r0 < rows; r0 += chunk, ++k) {
    const auto n = static_cast<uint32_t>(std::min(chunk, rows - r0));
    const auto base = static_cast<uint32_t>(D + (k % 2) * chunk);
    prog.load(rows_load(hw::Scratchpad::kAct, base, n, N), BK::Activations, static_cast<uint32_t>(in_off[0] + r0 * N));
    isa::VecRequant v{.src = static_cast<uint16_t>(base), .dst = static_cast<uint16_t>(base), .param = static_cast<uint16_t>(T),
                      .r = static_cast<uint16_t>(n), .src_sr = 1, .dst_sr = 1};
    prog.vec_words(vec_mode(v, hw::VecMode::kLut, 0, 0, 0, 0));
    store_rows(base, n, out_off + r0 * N);
  }
  return facts;
}

// Binary element-wise work: rows of a go to scratchpad region A, the matching (possibly
// broadcast) rows of b to region B, `compute` leaves the result in A (region C is free
// scratch), and A is stored. `reserved` rows at the bottom of ACT hold lookup tables.
Result<LayerFacts> EltLowering::binary() {
  LayerFacts facts;
  b_buffer = L.const_b.empty() ? BK::Activations : BK::Weights;
  b_off = L.const_b.empty() ? in_off[1] : 0;
  qb = L.const_b.empty() ? qin[1] : QParams{};
  if (!L.const_b.empty()) {
    // A constant b (PRelu slopes per channel): symmetric int8 rows of the weights.
    float mx = 0;
    for (float v : L.const_b) mx = std::max(mx, std::fabs(v));
    qb = QParams{mx > 0 ? mx / 127.0f : 1.0f, 0};
    b_off = align_up(weights.size());
    weights.resize(b_off + static_cast<uint64_t>(padded_channels(static_cast<int64_t>(L.const_b.size()), N)), 0);
    for (size_t i = 0; i < L.const_b.size(); ++i) weights[b_off + i] = static_cast<uint8_t>(quantize_value(L.const_b[i], qb));
  }
  if (L.kind == Kind::kDiv && L.wrap) return integer_divide();
  if (L.kind == Kind::kDiv) return divide();
  if (L.wrap) return integer_arith();
  if (L.kind == Kind::kPRelu) return prelu();
    load_params(L.kind == Kind::kAdd ? add_params(qx, qb, L.b_sign, qy) : mul_params(qx, qb, qy), 1);
    const auto mode = L.kind == Kind::kAdd ? hw::VecMode::kAdd : hw::VecMode::kMul;
    run_binary(0, 2, [&](uint32_t A, uint32_t B, uint32_t, uint32_t rows) { vec_binary(mode, 0, A, B, A, rows, qy); });
    return facts;
}

void EltLowering::run_binary(uint32_t reserved, uint32_t regions, const Compute& compute) {
  const uint64_t capacity = std::min<uint64_t>((act_rows - reserved) / regions, 65535);
  if (L.broadcast_last) binary_last_axis(reserved, regions, capacity, compute);
  else if (!L.broadcast_channels) binary_rows(reserved, regions, capacity, compute);
  else binary_channels(reserved, regions, capacity, compute);
}

void EltLowering::binary_last_axis(uint32_t reserved, uint32_t regions, uint64_t capacity, const Compute& compute) {
  // a is M rows of L elements; each row goes to the scratchpad as LB blocks of up to N
  // (block-major), and b's one row is replicated over the M rows by a stride-0 LOAD.
  const int64_t Lr = in_shapes[0].back(), LB = ceil_div(Lr, N);
  int64_t M = 1;
  for (size_t d = 0; d + 1 < in_shapes[0].size(); ++d) M *= in_shapes[0][d];
  // Two alternating sets of regions when the tensor needs more than one chunk (and a
  // half still holds a row): chunk k+1's LOADs and chunk k−1's STOREs overlap chunk k's
  // VEC work.
  const bool two_sets = M * LB > static_cast<int64_t>(capacity) && static_cast<int64_t>(capacity / 2) >= LB;
  const int64_t Mt = std::max<int64_t>(1, static_cast<int64_t>(two_sets ? capacity / 2 : capacity) / LB);
  const int64_t full = Lr / N, tail = Lr % N;
  // Moves rows [m0, m0 + mt) between DRAM (row stride `m_stride`) and scratchpad `base`.
  auto blocks = [&](bool store, BK buffer, uint32_t base, uint64_t dram, int64_t mt, uint32_t m_stride) {
    for (int part = 0; part < 2; ++part) {
      const int64_t count = part == 0 ? full : (tail > 0 ? 1 : 0);
      if (count == 0) continue;
      const uint32_t sp = static_cast<uint32_t>(base + (part == 0 ? 0 : full * mt));
      const uint64_t at = dram + static_cast<uint64_t>(part == 0 ? 0 : full * N);
      const uint32_t elems = part == 0 ? 0 : static_cast<uint32_t>(tail);
      if (store) {
        isa::Store st;
        st.sp = hw::Scratchpad::kAct;
        st.sp_base = sp;
        st.row_elems = elems;
        st.x = static_cast<uint16_t>(mt);
        st.x_stride = m_stride;
        st.y = static_cast<uint16_t>(count);
        st.y_stride = N;
        prog.store(st, BK::Activations, static_cast<uint32_t>(at));
      } else {
        isa::Load ld = rows_load(hw::Scratchpad::kAct, sp, static_cast<uint32_t>(mt), m_stride);
        ld.row_elems = elems;
        ld.y = static_cast<uint16_t>(count);
        ld.y_stride = N;
        prog.load(ld, buffer, static_cast<uint32_t>(at));
      }
    }
  };
  for (int64_t row0 = 0, k = 0; row0 < M; row0 += Mt, ++k) {
    const int64_t mt = std::min(Mt, M - row0);
    const auto rows = static_cast<uint32_t>(mt * LB);
    const uint32_t A = static_cast<uint32_t>(reserved + (two_sets ? (k % 2) * regions * Mt * LB : 0));
    const uint32_t B = A + rows, C = B + rows;
    blocks(false, BK::Activations, A, in_off[0] + static_cast<uint64_t>(row0 * Lr), mt, static_cast<uint32_t>(Lr));
    blocks(false, b_buffer, B, b_off, mt, 0);
    compute(A, B, C, rows);
    blocks(true, BK::Activations, A, out_off + static_cast<uint64_t>(row0 * Lr), mt, static_cast<uint32_t>(Lr));
  }
}

void EltLowering::binary_rows(uint32_t reserved, uint32_t regions, uint64_t capacity, const Compute& compute) {
  auto load_b = [&](uint32_t base, uint32_t rows, uint32_t stride, uint64_t at) {
    prog.load(rows_load(hw::Scratchpad::kAct, base, rows, stride), b_buffer, static_cast<uint32_t>(at));
  };
  const uint64_t rows = (device_bytes(out_shape, N) + N - 1) / N;
  const bool two_sets = rows > capacity;  // alternating sets, as above
  const uint64_t chunk = two_sets ? capacity / 2 : capacity;
  for (uint64_t r0 = 0, k = 0; r0 < rows; r0 += chunk, ++k) {
    const auto n = static_cast<uint32_t>(std::min(chunk, rows - r0));
    const uint32_t A = static_cast<uint32_t>(reserved + (two_sets ? (k % 2) * regions * chunk : 0));
    const uint32_t B = A + n, C = B + n;
    prog.load(rows_load(hw::Scratchpad::kAct, A, n, N), BK::Activations, static_cast<uint32_t>(in_off[0] + r0 * N));
    load_b(B, n, N, b_off + r0 * N);
    compute(A, B, C, n);
    store_rows(A, n, out_off + r0 * N);
  }
}

void EltLowering::binary_channels(uint32_t reserved, uint32_t regions, uint64_t capacity, const Compute& compute) {
  // b = one row block per channel block: its CB rows are replicated over each pixel by a
  // stride-0 LOAD (per image when b has a batch dimension).
  const auto& a = in_shapes[0];
  const int64_t CB = (a[1] + N - 1) / N, Cp = CB * N, pixels = a[2] * a[3];
  const bool two_sets = a[0] * pixels * CB > static_cast<int64_t>(capacity) && static_cast<int64_t>(capacity / 2) >= CB;
  const int64_t chunk_px = std::max<int64_t>(1, static_cast<int64_t>(two_sets ? capacity / 2 : capacity) / CB);
  int64_t k = 0;  // chunk index: alternating sets, as above
  for (int64_t b = 0; b < a[0]; ++b)
    for (int64_t p0 = 0; p0 < pixels; p0 += chunk_px, ++k) {
      const int64_t np = std::min(chunk_px, pixels - p0);
      const auto n = static_cast<uint32_t>(np * CB);
      const uint32_t A = static_cast<uint32_t>(reserved + (two_sets ? (k % 2) * regions * chunk_px * CB : 0));
      const uint32_t B = A + n, C = B + n;
      const uint64_t at = static_cast<uint64_t>((b * pixels + p0) * Cp);
      prog.load(rows_load(hw::Scratchpad::kAct, A, n, N), BK::Activations, static_cast<uint32_t>(in_off[0] + at));
      isa::Load ld = rows_load(hw::Scratchpad::kAct, B, static_cast<uint32_t>(CB), N);
      ld.y = static_cast<uint16_t>(np);
      ld.y_stride = 0;
      prog.load(ld, b_buffer, static_cast<uint32_t>(b_off + (L.b_per_image ? b * Cp : 0)));
      compute(A, B, C, n);
      store_rows(A, n, out_off + at);
    }
}

  // VEC ADD/MUL of rows a (at `src`) and b (at `aux`) into `dst`, with the parameter row P;
  // `wrap`: the result's low byte instead of the clamp (whose bounds are then 0).
  // The general form: output zero point `zp` and clamp [lo, hi] as given.
void EltLowering::vec_binary_clamped(hw::VecMode mode, uint32_t P, uint32_t src, uint32_t aux, uint32_t dst,
                                     uint32_t rows, int8_t zp, int8_t lo, int8_t hi, bool wrap) {
  isa::VecRequant v{.wrap = wrap, .src = static_cast<uint16_t>(src), .dst = static_cast<uint16_t>(dst),
                    .param = static_cast<uint16_t>(P), .r = static_cast<uint16_t>(rows), .zero_point = zp,
                    .src_sr = 1, .dst_sr = 1, .clamp_lo = lo, .clamp_hi = hi};
  prog.vec_words(vec_mode(v, mode, aux, 0, 0, 0));
}

void EltLowering::vec_binary(hw::VecMode mode, uint32_t P, uint32_t src, uint32_t aux, uint32_t dst, uint32_t rows,
                             const QParams& out, bool wrap) {
  vec_binary_clamped(mode, P, src, aux, dst, rows, static_cast<int8_t>(out.zero_point),
                     static_cast<int8_t>(wrap ? 0 : -128), static_cast<int8_t>(wrap ? 0 : 127), wrap);
}

  // Parameter rows for a + sign·b and a·b (VEC ADD/MUL, shared shift), consecutive in ACC.
uint64_t EltLowering::add_params(const QParams& qa, const QParams& qbb, double sign, const QParams& out) {
  const double ma = qa.scale / static_cast<double>(out.scale), mb = sign * qbb.scale / static_cast<double>(out.scale);
  const int32_t sh = shared_shift(std::max(std::fabs(ma), std::fabs(mb)));
  return put_scalar_params(weights, N, static_cast<int32_t>(std::llround(std::ldexp(ma, sh))),
                           static_cast<int32_t>(std::llround(std::ldexp(mb, sh))), sh, qa.zero_point, qbb.zero_point);
}

uint64_t EltLowering::mul_params(const QParams& qa, const QParams& qbb, const QParams& out) {
  const double m = static_cast<double>(qa.scale) * qbb.scale / out.scale;
  const int32_t sh = shared_shift(m);
  return put_scalar_params(weights, N, static_cast<int32_t>(std::llround(std::ldexp(m, sh))), 0, sh, qa.zero_point,
                           qbb.zero_point);
}

Result<LayerFacts> EltLowering::integer_divide() {
  LayerFacts facts;
  // ONNX uint8 Div (truncating) on codes of scale 1, zero point −128 (bind_integer_io):
  // restoring division, one quotient bit per step from bit 7 down, all on the VEC unit
  // with exact 64-bit intermediates (no reciprocal, so no rounding):
  //   c = [r ≥ b·2^i]   ADD  r·1 + b·(−2^i), zp 1, clamp [0, 1]
  //   p = c·b·2^i       MUL  (c − 0)(b + 128)·2^i, ≤ r ≤ 255 whenever c = 1
  //   r = r − p         ADD
  //   q = q + c·2^i     ADD  (step 7 ignores q's stale rows: multiplier 0)
  // A zero divisor yields quotient 255 and leaves the remainder (every step subtracts 0).
  if (qx.scale != 1.0f || qb.scale != 1.0f || qy.scale != 1.0f || qx.zero_point != -128 ||
      qb.zero_point != -128 || qy.zero_point != -128)
    return make_error(StatusCode::kInternal, "integer Div '" + L.name + "' needs uint8 codes of scale 1");
  // Parameter rows: [0] copy, then per step i = 7..0: compare, product, q update; [25] r update.
  const uint64_t first = put_scalar_params(weights, N, 1, 0, 0, -128, 0);
  for (int i = 7; i >= 0; --i) {
    put_scalar_params(weights, N, 1, -(1 << i), 0, -128, -128);
    put_scalar_params(weights, N, 1 << i, 0, 0, 0, -128);
    put_scalar_params(weights, N, i == 7 ? 0 : 1, 1 << i, 0, -128, 0);
  }
  put_scalar_params(weights, N, 1, -1, 0, -128, -128);
  load_params(first, 26);
  auto vec = [&](hw::VecMode mode, uint32_t P, uint32_t src, uint32_t aux, uint32_t dst, uint32_t rows, int8_t zp,
                 int8_t lo, int8_t hi) { vec_binary_clamped(mode, P, src, aux, dst, rows, zp, lo, hi, false); };
  // Regions: A dividend, then quotient (stored); B divisor; C the bit c; D remainder; E c·b·2^i.
  run_binary(0, 5, [&](uint32_t A, uint32_t B, uint32_t C, uint32_t rows) {
    const uint32_t D = C + rows, E = D + rows;
    vec(hw::VecMode::kAdd, 0, A, A, D, rows, -128, -128, 127);  // r = a
    for (uint32_t step = 0; step < 8; ++step) {
      const uint32_t P = 1 + 3 * step;
      vec(hw::VecMode::kAdd, P, D, B, C, rows, 1, 0, 1);
      vec(hw::VecMode::kMul, P + 1, C, B, E, rows, -128, -128, 127);
      vec(hw::VecMode::kAdd, 25, D, E, D, rows, -128, -128, 127);
      vec(hw::VecMode::kAdd, P + 2, A, C, A, rows, -128, -128, 127);
    }
  });
  return facts;
}

Result<LayerFacts> EltLowering::divide() {
  LayerFacts facts;
  // 1/y over y's codes (clamped to y's calibrated range, which keeps one sign), then
  // x · (1/y) by VEC MUL; the table runs in place on the divisor rows.
  const QParams qr = activation_qparams(std::min(1.0f / L.divisor_lo, 1.0f / L.divisor_hi),
                                        std::max(1.0f / L.divisor_lo, 1.0f / L.divisor_hi));
  const uint64_t table = align_up(weights.size());
  weights.resize(table + 256, 0);
  for (int q = -128; q < 128; ++q) {
    const float y = std::clamp(qb.scale * static_cast<float>(q - qb.zero_point), L.divisor_lo, L.divisor_hi);
    weights[table + static_cast<uint64_t>(q + 128)] = static_cast<uint8_t>(quantize_value(1.0f / y, qr));
  }
  const uint32_t table_rows = 256 / N;
  prog.load(rows_load(hw::Scratchpad::kAct, 0, table_rows, N), BK::Weights, static_cast<uint32_t>(table));
  load_params(mul_params(qx, qr, qy), 1);
  run_binary(table_rows, 2, [&](uint32_t A, uint32_t B, uint32_t, uint32_t rows) {
    isa::VecRequant v{.src = static_cast<uint16_t>(B), .dst = static_cast<uint16_t>(B), .param = 0,
                      .r = static_cast<uint16_t>(rows), .src_sr = 1, .dst_sr = 1};
    prog.vec_words(vec_mode(v, hw::VecMode::kLut, 0, 0, 0, 0));
    vec_binary(hw::VecMode::kMul, 0, A, B, A, rows, qy);
  });
  return facts;
}

Result<LayerFacts> EltLowering::integer_arith() {
  LayerFacts facts;
  // ONNX integer Add/Sub/Mul on codes of scale 1 (bind_integer_io): with multipliers ±1
  // and no shift, t = (a − za) ± (b − zb) or (a − za)·(b − zb) is the exact integer
  // result (a code minus its zero point is the user's integer), and the wrapped low byte
  // of t + zp is the result's code modulo 2^8, as ONNX wraps.
  if (qx.scale != 1.0f || qb.scale != 1.0f || qy.scale != 1.0f)
    return make_error(StatusCode::kInternal, "integer " + L.op + " '" + L.name + "' needs codes of scale 1");
  const bool add = L.kind == Kind::kAdd;
  load_params(put_scalar_params(weights, N, 1, add ? (L.b_sign < 0 ? -1 : 1) : 0, 0, qx.zero_point, qb.zero_point), 1);
  run_binary(0, 2, [&](uint32_t A, uint32_t B, uint32_t, uint32_t rows) {
    vec_binary(add ? hw::VecMode::kAdd : hw::VecMode::kMul, 0, A, B, A, rows, qy, true);
  });
  return facts;
}

Result<LayerFacts> EltLowering::prelu() {
  LayerFacts facts;
  // PRelu(x, a) = max(x, 0) + a·min(x, 0): two lookup tables split x into its positive part
  // r and negative part n, VEC MUL forms p = a·n, VEC ADD y = r + p. The intermediates are
  // quantised over the calibrated ranges of x and a (else what their int8 codes reach).
  auto real = [](const QParams& q, int code) { return q.scale * static_cast<float>(code - q.zero_point); };
  const float x_lo = std::min(L.x_range ? std::max(L.x_range->first, real(qx, -128)) : real(qx, -128), 0.0f);
  const float x_hi = std::max(L.x_range ? std::min(L.x_range->second, real(qx, 127)) : real(qx, 127), 0.0f);
  const float a_lo = L.b_range ? std::max(L.b_range->first, real(qb, -128)) : real(qb, -128);
  const float a_hi = L.b_range ? std::min(L.b_range->second, real(qb, 127)) : real(qb, 127);
  const QParams qn = activation_qparams(x_lo, 0.0f), qr = activation_qparams(0.0f, x_hi);
  const QParams qp = activation_qparams(std::min({x_lo * a_lo, x_lo * a_hi, 0.0f}), std::max({x_lo * a_lo, x_lo * a_hi, 0.0f}));
  const uint32_t table_rows = 256 / N;
  const uint64_t tables = align_up(weights.size());
  weights.resize(tables + 512, 0);
  for (int q = -128; q < 128; ++q) {
    const float v = real(qx, q);
    weights[tables + static_cast<uint64_t>(q + 128)] = static_cast<uint8_t>(quantize_value(std::min(v, 0.0f), qn));
    weights[tables + 256 + static_cast<uint64_t>(q + 128)] = static_cast<uint8_t>(quantize_value(std::max(v, 0.0f), qr));
  }
  prog.load(rows_load(hw::Scratchpad::kAct, 0, 2 * table_rows, N), BK::Weights, static_cast<uint32_t>(tables));
  const uint64_t first = mul_params(qn, qb, qp);
  add_params(qr, qp, 1.0, qy);
  load_params(first, 2);
  run_binary(2 * table_rows, 3, [&](uint32_t A, uint32_t B, uint32_t C, uint32_t rows) {
    auto lut = [&](uint32_t table, uint32_t src, uint32_t dst) {
      isa::VecRequant v{.src = static_cast<uint16_t>(src), .dst = static_cast<uint16_t>(dst),
                        .param = static_cast<uint16_t>(table), .r = static_cast<uint16_t>(rows), .src_sr = 1, .dst_sr = 1};
      prog.vec_words(vec_mode(v, hw::VecMode::kLut, 0, 0, 0, 0));
    };
    lut(table_rows, A, C);                            // r = max(x, 0)
    lut(0, A, A);                                     // n = min(x, 0)
    vec_binary(hw::VecMode::kMul, 0, A, B, A, rows, qp);  // p = a·n
    vec_binary(hw::VecMode::kAdd, 1, C, A, A, rows, qy);  // y = r + p
  });
  return facts;
}

Result<LayerFacts> EltLowering::clip() {
  LayerFacts facts;
  // Clip with run-time bounds. A bound's one int8 code (quantised like x, so codes compare
  // like reals) is spread over all lanes and rows by a GEMM against a tile whose row 0 is
  // all ones (act stride r = 0 repeats the one input row), then REQUANT by 1 writes the
  // rows back to ACT. max(x, lo) is a VEC MAXPOOL over the 2-row window {x row, lo row};
  // min(y, hi) = NOT max(NOT y, NOT hi), where NOT q = −1 − q is an exact, decreasing
  // int8 lookup table. Constant bounds are the last instruction's clamp.
  const uint32_t acc_rows = static_cast<uint32_t>(hw::kAccSpBytes / (4 * N));
  const uint32_t table_rows = 256 / N;
  const uint64_t rows = (device_bytes(out_shape, N) + N - 1) / N;
  const bool has_lo = L.lo_input >= 0, has_hi = L.hi_input >= 0;
  // ACT: NOT table | bound source rows (2) | x chunk A | lo rows | hi rows.
  const uint32_t S = table_rows, A = S + 2;
  const uint64_t chunk = std::min<uint64_t>({(act_rows - A) / 3, acc_rows - 3, 65535, rows});
  const uint32_t LO = static_cast<uint32_t>(A + chunk), HI = static_cast<uint32_t>(LO + chunk);
  const uint64_t blob = align_up(weights.size());
  weights.resize(blob + 256 + uint64_t{N} * N + 3 * uint64_t{N} * 4, 0);
  for (int q = -128; q < 128; ++q) weights[blob + static_cast<uint64_t>(q + 128)] = static_cast<uint8_t>(static_cast<int8_t>(-1 - q));
  const uint64_t ones = blob + 256, params = ones + uint64_t{N} * N;
  for (uint32_t n = 0; n < N; ++n) weights[ones + n] = 1;  // tile row 0
  put_u32(weights, params + uint64_t{N} * 4, 1);              // REQUANT: bias 0, multiplier 1, shift 0
  for (uint32_t n = 1; n < N; ++n) put_u32(weights, params + uint64_t{N} * 4 + n * 4, 1);
  prog.load(rows_load(hw::Scratchpad::kAct, 0, table_rows, N), BK::Weights, static_cast<uint32_t>(blob));
  prog.load(rows_load(hw::Scratchpad::kWgt, 0, N, N), BK::Weights, static_cast<uint32_t>(ones));
  {
    isa::Load pl = rows_load(hw::Scratchpad::kAcc, 0, 3, 4 * N);
    prog.load(pl, BK::Weights, static_cast<uint32_t>(params));
  }
  auto lut_not = [&](uint32_t src, uint32_t dst, uint32_t n, int8_t lo, int8_t hi) {
    isa::VecRequant v{.src = static_cast<uint16_t>(src), .dst = static_cast<uint16_t>(dst), .param = 0,
                      .r = static_cast<uint16_t>(n), .src_sr = 1, .dst_sr = 1, .clamp_lo = lo, .clamp_hi = hi};
    prog.vec_words(vec_mode(v, hw::VecMode::kLut, 0, 0, 0, 0));
  };
  auto spread = [&](uint32_t source_row, uint64_t dram, uint32_t dst) {
    isa::Load ld = rows_load(hw::Scratchpad::kAct, source_row, 1, N);
    ld.row_elems = 1;
    prog.load(ld, BK::Activations, static_cast<uint32_t>(dram));
    isa::Gemm gm;
    gm.clear = true;
    gm.act = static_cast<uint16_t>(source_row);
    gm.acc = 3;
    gm.r = static_cast<uint16_t>(chunk);
    gm.act_sr = 0;
    gm.acc_sr = 1;
    prog.gemm(gm);
    prog.vec(isa::VecRequant{.src = 3, .dst = static_cast<uint16_t>(dst), .param = 0,
                             .r = static_cast<uint16_t>(chunk), .src_sr = 1, .dst_sr = 1});
  };
  size_t next = 1;
  if (has_lo) spread(S, in_off[next++], LO);
  if (has_hi) {
    spread(S + 1, in_off[next++], HI);
    lut_not(HI, HI, static_cast<uint32_t>(chunk), -128, 127);
  }
  const int8_t lo_c = quantize_bound(L.clip_lo, qy, -128), hi_c = quantize_bound(L.clip_hi, qy, 127);
  auto maxpool2 = [&](uint32_t src, uint32_t other, uint32_t dst, uint32_t n, int8_t lo, int8_t hi) {
    isa::VecRequant v{.src = static_cast<uint16_t>(src), .dst = static_cast<uint16_t>(dst), .param = 0,
                      .r = static_cast<uint16_t>(n), .src_sr = 1, .dst_sr = 1, .clamp_lo = lo, .clamp_hi = hi};
    prog.vec_words(vec_mode(v, hw::VecMode::kMaxpool, 0, 1, 2, other - src));
  };
  for (uint64_t r0 = 0; r0 < rows; r0 += chunk) {
    const auto n = static_cast<uint32_t>(std::min(chunk, rows - r0));
    prog.load(rows_load(hw::Scratchpad::kAct, A, n, N), BK::Activations, static_cast<uint32_t>(in_off[0] + r0 * N));
    // In place in A (each VEC row reads only its own rows); the window's second row lies
    // above A (wys > 0).
    if (has_lo) maxpool2(A, LO, A, n, has_hi ? -128 : lo_c, has_hi ? 127 : hi_c);
    if (has_hi) {
      lut_not(A, A, n, -128, 127);
      maxpool2(A, HI, A, n, -128, 127);
      lut_not(A, A, n, lo_c, hi_c);
    }
    store_rows(A, n, out_off + r0 * N);
  }
  facts.scratchpad_bytes = static_cast<uint64_t>(HI + chunk) * N + static_cast<uint64_t>(3 + chunk) * N * 4 + uint64_t{N} * N;
  return facts;
}

Result<LayerFacts> EltLowering::resize() {
  LayerFacts facts;
  // Nearest resize, per channel block and output row: LOAD gathers the distinct input
  // pixels the row uses (runs of equal column step are one LOAD), STOREs scatter them to
  // the output pixels (runs where the gathered row advances by one and the output column
  // by a constant step are one STORE: an ×2 upsample is two STOREs per row). Output rows
  // that repeat the previous input row reuse the gathered pixels.
  const auto& x = in_shapes[0];
  const int64_t Nb = x[0], C = x[1], H = x[2], W = x[3], OH = out_shape[2], OW = out_shape[3];
  const int64_t Cp = padded_channels(C, N);
  std::vector<int64_t> cols = L.src_cols;
  std::sort(cols.begin(), cols.end());
  cols.erase(std::unique(cols.begin(), cols.end()), cols.end());
  std::vector<int64_t> pos(static_cast<size_t>(OW));
  for (int64_t ox = 0; ox < OW; ++ox)
    pos[static_cast<size_t>(ox)] = std::lower_bound(cols.begin(), cols.end(), L.src_cols[static_cast<size_t>(ox)]) - cols.begin();
  struct Run {
    int64_t first, count, step;  // LOAD: first index into cols; STORE: first output column
  };
  std::vector<Run> loads, stores;
  for (size_t j = 0; j < cols.size();) {
    const int64_t step = j + 1 < cols.size() ? cols[j + 1] - cols[j] : 1;
    size_t k = j + 1;
    while (k < cols.size() && cols[k] - cols[k - 1] == step) ++k;
    loads.push_back({static_cast<int64_t>(j), static_cast<int64_t>(k - j), step});
    j = k;
  }
  std::vector<bool> covered(static_cast<size_t>(OW), false);
  for (int64_t ox0 = 0; ox0 < OW; ++ox0) {
    if (covered[static_cast<size_t>(ox0)]) continue;
    int64_t step = 0;
    for (int64_t o = ox0 + 1; o < OW && step == 0; ++o)
      if (!covered[static_cast<size_t>(o)] && pos[static_cast<size_t>(o)] == pos[static_cast<size_t>(ox0)] + 1) step = o - ox0;
    int64_t count = 1;
    while (step > 0 && ox0 + count * step < OW && !covered[static_cast<size_t>(ox0 + count * step)] &&
           pos[static_cast<size_t>(ox0 + count * step)] == pos[static_cast<size_t>(ox0)] + count)
      ++count;
    for (int64_t k = 0; k < count; ++k) covered[static_cast<size_t>(ox0 + k * std::max<int64_t>(step, 1))] = true;
    stores.push_back({ox0, count, std::max<int64_t>(step, 1)});
  }
  const int64_t CB = Cp / N;
  for (int64_t b = 0; b < Nb; ++b)
    for (int64_t cb = 0; cb < CB; ++cb) {
      const auto elems = static_cast<uint32_t>(std::min<int64_t>(N, C - cb * N));
      for (int64_t oy = 0; oy < OH; ++oy) {
        const int64_t iy = L.src_rows[static_cast<size_t>(oy)];
        if (oy == 0 || iy != L.src_rows[static_cast<size_t>(oy - 1)])
          for (const Run& r : loads) {
            isa::Load ld = rows_load(hw::Scratchpad::kAct, static_cast<uint32_t>(r.first), static_cast<uint32_t>(r.count),
                                     static_cast<uint32_t>(r.step * Cp));
            ld.row_elems = elems == N ? 0 : elems;
            prog.load(ld, BK::Activations,
                      static_cast<uint32_t>(in_off[0] + ((b * H + iy) * W + cols[static_cast<size_t>(r.first)]) * Cp + cb * N));
          }
        for (const Run& r : stores) {
          isa::Store st;
          st.sp = hw::Scratchpad::kAct;
          st.sp_base = static_cast<uint32_t>(pos[static_cast<size_t>(r.first)]);
          st.row_elems = elems == N ? 0 : elems;
          st.x = static_cast<uint16_t>(r.count);
          st.x_stride = static_cast<uint32_t>(r.step * Cp);
          prog.store(st, BK::Activations, static_cast<uint32_t>(out_off + ((b * OH + oy) * OW + r.first) * Cp + cb * N));
        }
      }
    }
  facts.scratchpad_bytes = static_cast<uint64_t>(cols.size()) * N;
  return facts;
}

Result<LayerFacts> EltLowering::pool() {
  LayerFacts facts;
  // Pooling: each channel block's plane is loaded plane-major (row = y·W + x) so that a
  // window is kh rows of kw consecutive scratchpad rows. A 1-D pool of a dense [N, C, L]
  // value is the same with the channels as plane rows (H = C, W = L) and one element per
  // scratchpad row (lane 0). Padding is never materialised: output pixels are grouped into
  // rectangles whose windows clip the same taps (row class × column class), and each
  // rectangle is one VEC instruction over its clipped window; an average divides by its own
  // tap count (or by the taps inside the padded extent with count_include_pad). A MaxPool
  // dilated by dw along W loads the plane as dw column phases (x mod dw), each plane-major,
  // so that a dilated window row is again consecutive scratchpad rows; one instruction per
  // output column then (consecutive columns change phase). Vertical dilation is the window's
  // row step.
  // A 3-D pool of a dense [N, C, D, H, W] value (one element per row, a plane per (n, c)
  // pair) works per output depth slice: the window's valid input slices (fv of them) are
  // loaded interleaved by image row (row = (y·fv + j)·W + x, one LOAD: z walks y, y walks the
  // slices), so that for an AveragePool the rows × depth window is again kh·fv rows with the
  // step of one image row: one VEC instruction and one rounding, as in 2-D. A MaxPool first
  // reduces the fv slices to one plane (max is exact in any order), then pools it in 2-D
  // (which also serves vertical dilation).
  NPU_ASSIGN_OR_RETURN(const PoolPlan P, pool_plan());
  for (int64_t b = 0; b < P.Nb; ++b)
    for (int64_t cb = 0; cb < P.CB; ++cb)
      for (int64_t od = 0; od < P.ODd; ++od) pool_slice(P, b, cb, od);
  facts.scratchpad_bytes = static_cast<uint64_t>(P.plane_rows + P.OH * P.OW) * N + P.divisors.size() * N * 4;
  return facts;
}

// The geometry, its checks, and the averages' parameter rows (loaded once for all planes).
Result<PoolPlan> EltLowering::pool_plan() {
  const auto& x = in_shapes[0];
  const size_t rank = x.size();
  const bool one_d = rank == 3, three_d = rank == 5, dense_rows = rank != 4;
  const int64_t Nb = three_d ? x[0] * x[1] : x[0], C = rank == 4 ? x[1] : 1;
  const int64_t Dd = three_d ? x[2] : 1, ODd = three_d ? out_shape[2] : 1;
  const int64_t H = one_d ? x[1] : x[rank - 2], W = x[rank - 1];
  const int64_t OH = one_d ? out_shape[1] : out_shape[rank - 2], OW = out_shape[rank - 1];
  const int64_t CB = (C + N - 1) / N, pixel = dense_rows ? 1 : CB * N;
  const int64_t plane_in = Dd * H * W * pixel, plane_out = ODd * OH * OW * pixel;
  std::vector<Taps> depth_kinds, row_kinds, col_kinds;
  std::vector<int> depth_kind, row_kind, col_kind;
  tap_classes(ODd, L.sd, L.pad_f, L.pad_k, Dd, L.kd, L.dd, &depth_kinds, &depth_kind);
  tap_classes(OH, L.sh, L.pad_t, L.pad_b, H, L.kh, L.dh, &row_kinds, &row_kind);
  tap_classes(OW, L.sw, L.pad_l, L.pad_r, W, L.kw, L.dw, &col_kinds, &col_kind);
  for (const auto* kinds : {&depth_kinds, &row_kinds, &col_kinds})
    for (const Taps& t : *kinds)
      if (t.hi <= t.lo)
        return make_error(StatusCode::kUnsupported, "pooling '" + L.name + "' has a window without input pixels");
  const bool avg = L.kind != Kind::kMaxPool;
  int64_t fmax = 1;  // most input slices one output slice reads
  for (const Taps& t : depth_kinds) fmax = std::max(fmax, t.hi - t.lo);
  const int64_t reduced = !avg && fmax > 1 ? H * W : 0;  // MaxPool: the slices' maximum
  const int64_t plane_rows = fmax * H * W + reduced;
  if (plane_rows + OH * OW > act_rows || fmax * H * W > 65535)
    return make_error(StatusCode::kUnsupported, "pooling '" + L.name + "': one channel plane does not fit the scratchpad");
  for (const Taps& r : row_kinds)
    if (avg && (r.hi - r.lo) * fmax > 255)
      return make_error(StatusCode::kUnsupported, "pooling '" + L.name + "': the window spans more than 255 rows × slices");
  // Average pools: one parameter row per distinct divisor.
  std::vector<int64_t> divisors;
  if (avg) {
    for (const Taps& d : depth_kinds)
      for (const Taps& r : row_kinds)
        for (const Taps& c : col_kinds)
          if (std::find(divisors.begin(), divisors.end(), pool_divisor(L, d, r, c)) == divisors.end())
            divisors.push_back(pool_divisor(L, d, r, c));
    const uint64_t p_off = align_up(weights.size());
    for (int64_t d : divisors) {
      const double m = static_cast<double>(qx.scale) / (static_cast<double>(qy.scale) * static_cast<double>(d));
      const int32_t sh = shared_shift(m);
      put_scalar_params(weights, N, static_cast<int32_t>(std::llround(std::ldexp(m, sh))), 0, sh, qx.zero_point, 0);
    }
    load_scalar_params(prog, N, p_off, static_cast<uint32_t>(divisors.size()));
  }
  const auto mode = avg ? hw::VecMode::kAvgpool : hw::VecMode::kMaxpool;
  const int64_t phases = std::min<int64_t>(L.dw, W);
  std::vector<int64_t> cnt(static_cast<size_t>(phases)), base(static_cast<size_t>(phases));
  for (int64_t p = 0, row = 0; p < phases; ++p) {
    cnt[static_cast<size_t>(p)] = (W - p + L.dw - 1) / L.dw;
    base[static_cast<size_t>(p)] = row;
    row += H * cnt[static_cast<size_t>(p)];
  }
  return PoolPlan{.dense_rows = dense_rows, .avg = avg, .Nb = Nb, .C = C, .ODd = ODd, .H = H, .W = W, .OH = OH,
                  .OW = OW, .CB = CB, .pixel = pixel, .plane_in = plane_in, .plane_out = plane_out,
                  .depth_kinds = std::move(depth_kinds), .row_kinds = std::move(row_kinds),
                  .col_kinds = std::move(col_kinds), .depth_kind = std::move(depth_kind),
                  .row_kind = std::move(row_kind), .col_kind = std::move(col_kind), .fmax = fmax,
                  .plane_rows = plane_rows, .divisors = std::move(divisors), .mode = mode, .phases = phases,
                  .cnt = std::move(cnt), .base = std::move(base)};
}

// One output plane: batch (or batch × channel) b, channel block cb, output depth slice od.
void EltLowering::pool_slice(const PoolPlan& P, int64_t b, int64_t cb, int64_t od) {
  const bool dense_rows = P.dense_rows, avg = P.avg;
  const int64_t C = P.C, H = P.H, W = P.W, OH = P.OH, OW = P.OW, pixel = P.pixel, plane_in = P.plane_in,
                plane_out = P.plane_out, fmax = P.fmax, phases = P.phases;
  const std::vector<Taps>& depth_kinds = P.depth_kinds;
  const std::vector<Taps>& row_kinds = P.row_kinds;
  const std::vector<Taps>& col_kinds = P.col_kinds;
  const std::vector<int>& depth_kind = P.depth_kind;
  const std::vector<int>& row_kind = P.row_kind;
  const std::vector<int>& col_kind = P.col_kind;
  const std::vector<int64_t>& divisors = P.divisors;
  const std::vector<int64_t>& cnt = P.cnt;
  const std::vector<int64_t>& base = P.base;
  const auto mode = P.mode;
  const uint32_t D = static_cast<uint32_t>(P.plane_rows);  // output plane rows start here
  const auto elems = static_cast<uint32_t>(dense_rows ? 1 : std::min<int64_t>(N, C - cb * N));
  const Taps& dk = depth_kinds[static_cast<size_t>(depth_kind[static_cast<size_t>(od)])];
  const int64_t fv = dk.hi - dk.lo, first_slice = od * L.sd - L.pad_f + dk.lo * L.dd;
  for (int64_t p = 0; p < phases; ++p) {
    isa::Load ld;
    ld.sp = hw::Scratchpad::kAct;
    ld.sp_base = static_cast<uint32_t>(fv * base[static_cast<size_t>(p)]);
    ld.row_elems = elems == N ? 0 : elems;
    ld.x = static_cast<uint16_t>(cnt[static_cast<size_t>(p)]);
    ld.x_stride = static_cast<uint32_t>(L.dw * pixel);
    if (fv == 1) {
      ld.y = static_cast<uint16_t>(H);
      ld.y_stride = static_cast<uint32_t>(W * pixel);
    } else {
      ld.z = static_cast<uint16_t>(H);
      ld.z_stride = static_cast<uint32_t>(W * pixel);
      ld.y = static_cast<uint16_t>(fv);
      ld.y_stride = static_cast<uint32_t>(L.dd * H * W * pixel);
    }
    prog.load(ld, BK::Activations,
              static_cast<uint32_t>(in_off[0] + b * plane_in + first_slice * H * W * pixel + p * pixel + cb * N));
  }
  // Where the 2-D windows read: the loaded plane(s), fv slices interleaved (AveragePool),
  // or the MaxPool's reduced plane.
  int64_t slices = fv, plane = 0;
  if (!avg && fv > 1) {
    for (int64_t p = 0; p < phases; ++p) {
      const int64_t c = cnt[static_cast<size_t>(p)];
      isa::VecRequant v{.src = static_cast<uint16_t>(fv * base[static_cast<size_t>(p)]),
                        .dst = static_cast<uint16_t>(fmax * H * W + base[static_cast<size_t>(p)]),
                        .param = 0, .r = static_cast<uint16_t>(c), .o = static_cast<uint16_t>(H),
                        .zero_point = 0, .src_so = static_cast<uint16_t>(fv * c), .src_sr = 1,
                        .dst_so = static_cast<uint16_t>(c), .dst_sr = 1};
      prog.vec_words(vec_mode(v, mode, 0, 1, static_cast<uint32_t>(fv), static_cast<uint32_t>(c)));
    }
    slices = 1;
    plane = fmax * H * W;
  }
  for (int64_t r0 = 0; r0 < OH;) {
    int64_t r1 = r0 + 1;
    while (r1 < OH && row_kind[static_cast<size_t>(r1)] == row_kind[static_cast<size_t>(r0)]) ++r1;
    const Taps& rk = row_kinds[static_cast<size_t>(row_kind[static_cast<size_t>(r0)])];
    for (int64_t c0 = 0; c0 < OW;) {
      int64_t c1 = c0 + 1;
      while (L.dw == 1 && c1 < OW && col_kind[static_cast<size_t>(c1)] == col_kind[static_cast<size_t>(c0)]) ++c1;
      const Taps& ck = col_kinds[static_cast<size_t>(col_kind[static_cast<size_t>(c0)])];
      const int64_t y = r0 * L.sh - L.pad_t + rk.lo * L.dh, xx = c0 * L.sw - L.pad_l + ck.lo * L.dw;
      const int64_t p = xx % L.dw, stride_rows = cnt[static_cast<size_t>(p)];
      const int64_t param =
          avg ? std::find(divisors.begin(), divisors.end(), pool_divisor(L, dk, rk, ck)) - divisors.begin() : 0;
      isa::VecRequant v{
          .src = static_cast<uint16_t>(plane + slices * base[static_cast<size_t>(p)] + y * slices * stride_rows +
                                       xx / L.dw),
          .dst = static_cast<uint16_t>(D + r0 * OW + c0), .param = static_cast<uint16_t>(param),
          .r = static_cast<uint16_t>(c1 - c0), .o = static_cast<uint16_t>(r1 - r0),
          .zero_point = static_cast<int8_t>(avg ? qy.zero_point : 0),
          .src_so = static_cast<uint16_t>(L.sh * slices * stride_rows), .src_sr = static_cast<uint16_t>(L.sw),
          .dst_so = static_cast<uint16_t>(OW), .dst_sr = 1};
      // Window rows: kh image rows (step dh rows), each the `slices` interleaved slices
      // (AveragePool has no dilation, so with slices > 1 the step is one plane row).
      prog.vec_words(vec_mode(v, mode, 0, static_cast<uint32_t>(ck.hi - ck.lo),
                              static_cast<uint32_t>((rk.hi - rk.lo) * slices),
                              static_cast<uint32_t>((slices > 1 ? 1 : L.dh) * stride_rows)));
      c0 = c1;
    }
    r0 = r1;
  }
  isa::Store st;
  st.sp = hw::Scratchpad::kAct;
  st.sp_base = D;
  st.row_elems = elems == N ? 0 : elems;
  st.x = static_cast<uint16_t>(OW);
  st.x_stride = static_cast<uint32_t>(pixel);
  st.y = static_cast<uint16_t>(OH);
  st.y_stride = static_cast<uint32_t>(OW * pixel);
  prog.store(st, BK::Activations, static_cast<uint32_t>(out_off + b * plane_out + od * OH * OW * pixel + cb * N));
}

}  // namespace

Result<LayerFacts> lower_elt_layer(const EltLayer& L, const std::vector<std::vector<int64_t>>& in_shapes,
                                   const std::vector<int64_t>& out_shape, const std::vector<QParams>& qin,
                                   const QParams& qy, const std::vector<uint32_t>& in_off, uint32_t out_off,
                                   uint32_t N, std::vector<uint8_t>& weights, Program& prog) {
  using Kind = EltLayer::Kind;
  if (L.kind == Kind::kView) return LayerFacts{};  // the output aliases the input's bytes
  EltLowering lower{L, in_shapes, out_shape, qin, qy, in_off, out_off, N, weights,
                    prog, static_cast<uint32_t>(hw::kActSpBytes / N), qin[0]};
  switch (L.kind) {
    case Kind::kRepack: return lower.repack();
    case Kind::kLut: return lower.lut();
    case Kind::kAdd:
    case Kind::kMul:
    case Kind::kPRelu:
    case Kind::kDiv: return lower.binary();
    case Kind::kClip: return lower.clip();
    case Kind::kResize: return lower.resize();
    default: return lower.pool();  // MaxPool, AveragePool (what the chain of ifs left to the end)
  }
}

Result<LayerFacts> lower_copy(const std::vector<int64_t>& shape, uint32_t src_off, std::vector<int64_t> src_strides,
                              uint32_t dst_off, std::vector<int64_t> dst_strides, const QParams& qin,
                              const QParams& qout, uint32_t N, std::vector<uint8_t>& weights, Program& prog) {
  using BK = image::BufferKind;
  LayerFacts facts;
  struct Dim {
    int64_t extent, src, dst;
  };
  std::vector<Dim> dims;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] <= 0) return facts;  // nothing to move
    if (shape[d] > 1) dims.push_back({shape[d], src_strides[d], dst_strides[d]});
  }
  // Walk the destination in its memory order; merge dimensions that are one run on both sides.
  std::stable_sort(dims.begin(), dims.end(), [](const Dim& a, const Dim& b) { return a.dst > b.dst; });
  std::vector<Dim> merged;
  for (const Dim& d : dims) {
    if (!merged.empty() && merged.back().src == d.src * d.extent && merged.back().dst == d.dst * d.extent) {
      merged.back() = {merged.back().extent * d.extent, d.src, d.dst};
    } else {
      merged.push_back(d);
    }
  }
  if (merged.empty()) merged.push_back({1, 1, 1});
  // Rows: the innermost dimension when it is contiguous on both sides (split into N-element
  // pieces), else single elements.
  std::vector<Dim> loops(merged.begin(), merged.end());  // outermost first
  int64_t run = 1;
  if (loops.back().src == 1 && loops.back().dst == 1) {
    run = loops.back().extent;
    loops.pop_back();
  }
  const bool requant = qin.scale != qout.scale || qin.zero_point != qout.zero_point;
  const uint32_t act_rows = static_cast<uint32_t>(hw::kActSpBytes / N);
  uint32_t table_rows = 0;
  uint64_t table_off = 0;
  if (requant) {
    table_off = align_up(weights.size());
    weights.resize(table_off + 256, 0);
    for (int q = -128; q < 128; ++q)
      weights[table_off + static_cast<uint64_t>(q + 128)] =
          static_cast<uint8_t>(quantize_value(qin.scale * static_cast<float>(q - qin.zero_point), qout));
    table_rows = 256 / N;
    isa::Load tl;
    tl.sp = hw::Scratchpad::kAct;
    tl.x = static_cast<uint16_t>(table_rows);
    tl.x_stride = N;
    prog.load(tl, BK::Weights, static_cast<uint32_t>(table_off));
  }
  const uint32_t base = table_rows, capacity = std::min<uint32_t>(act_rows - table_rows, 65535);
  // One LOAD/STORE pair moves up to three loop dimensions (x innermost); outer dimensions
  // and oversized counts become more instructions.
  // Rows one instruction moves must fit the scratchpad: inner dimensions are taken while
  // their rows fit, and the outermost of them is split (`step`) when it does not.
  std::vector<Dim> inner;  // up to 3, innermost first
  int64_t inner_rows = 1;  // rows of the inner dimensions below the outermost one
  while (!loops.empty() && inner.size() < 3) {
    const Dim d = loops.back();
    inner.push_back(d);
    loops.pop_back();
    if (inner_rows * d.extent > static_cast<int64_t>(capacity)) break;
    if (!loops.empty() && inner.size() < 3) inner_rows *= d.extent;
  }
  if (inner.empty()) inner.push_back({1, 0, 0});
  const int64_t pieces = ceil_div(run, N);
  auto emit = [&](uint64_t src, uint64_t dst, uint32_t row_elems, int64_t outer_count) {
    // outer_count: how many of the outermost inner dimension this pair moves.
    isa::Load ld;
    ld.sp = hw::Scratchpad::kAct;
    ld.sp_base = base;
    ld.row_elems = row_elems == N ? 0 : row_elems;
    isa::Store st;
    st.sp = hw::Scratchpad::kAct;
    st.sp_base = base;
    st.row_elems = ld.row_elems;
    const size_t last = inner.size() - 1;
    auto set = [&](size_t k, int64_t count, int64_t sstride, int64_t dstride) {
      const auto c = static_cast<uint16_t>(count);
      if (k == 0) { ld.x = st.x = c; ld.x_stride = static_cast<uint32_t>(sstride); st.x_stride = static_cast<uint32_t>(dstride); }
      if (k == 1) { ld.y = st.y = c; ld.y_stride = static_cast<uint32_t>(sstride); st.y_stride = static_cast<uint32_t>(dstride); }
      if (k == 2) { ld.z = st.z = c; ld.z_stride = static_cast<uint32_t>(sstride); st.z_stride = static_cast<uint32_t>(dstride); }
    };
    for (size_t k = 0; k < inner.size(); ++k)
      set(k, k == last ? outer_count : inner[k].extent, inner[k].src, inner[k].dst);
    prog.load(ld, BK::Activations, static_cast<uint32_t>(src));
    const auto rows = static_cast<uint32_t>(inner_rows * outer_count);
    if (requant) {
      isa::VecRequant v{.src = static_cast<uint16_t>(base), .dst = static_cast<uint16_t>(base), .param = 0,
                        .r = static_cast<uint16_t>(rows), .src_sr = 1, .dst_sr = 1};
      prog.vec_words(vec_mode(v, hw::VecMode::kLut, 0, 0, 0, 0));
    }
    prog.store(st, BK::Activations, static_cast<uint32_t>(dst));
  };
  const int64_t step = std::max<int64_t>(1, capacity / inner_rows);
  // Remaining outer loops, odometer style.
  std::vector<int64_t> idx(loops.size(), 0);
  for (bool more = true; more;) {
    uint64_t src = src_off, dst = dst_off;
    for (size_t k = 0; k < loops.size(); ++k) {
      src += static_cast<uint64_t>(idx[k] * loops[k].src);
      dst += static_cast<uint64_t>(idx[k] * loops[k].dst);
    }
    const Dim& top = inner.back();
    for (int64_t o = 0; o < top.extent; o += step) {
      const int64_t count = std::min(step, top.extent - o);
      for (int64_t p = 0; p < pieces; ++p) {
        const auto elems = static_cast<uint32_t>(std::min<int64_t>(N, run - p * N));
        emit(src + static_cast<uint64_t>(o * top.src + p * N), dst + static_cast<uint64_t>(o * top.dst + p * N), elems,
             count);
      }
    }
    more = false;
    for (size_t k = loops.size(); k-- > 0;) {
      if (++idx[k] < loops[k].extent) {
        more = true;
        break;
      }
      idx[k] = 0;
    }
  }
  facts.scratchpad_bytes = static_cast<uint64_t>(inner_rows * std::min(step, inner.back().extent) + table_rows) * N;
  if (run == 1) {
    int64_t elements = 1;
    for (int64_t d : shape) elements *= d;
    if (elements > 1)
      facts.note = "element-granular DMA copy: " + std::to_string(elements) +
                   " rows of one element each (no dimension is contiguous on both sides)";
  }
  return facts;
}

namespace {

// The positions p in [0, count) a tap walks whose partner p·stride + offset lies in
// [0, limit): [first, last] (last < first when there is none).
void tap_reach(int64_t count, int64_t limit, int64_t stride, int64_t offset, int64_t* first, int64_t* last) {
  *first = offset >= 0 ? 0 : ceil_div(-offset, stride);
  *last = std::min(count - 1, limit - 1 - offset < 0 ? -1 : (limit - 1 - offset) / stride);
}

// One band of output rows [oy0, oy1) and the input rows [iy0, iy1) its taps read.
struct TapBand {
  int64_t oy0 = 0, oy1 = 0, iy0 = 0, iy1 = 0;
};

// Whether the taps of a ConvTranspose hit every output coordinate of one axis exactly once
// (o = i·stride + t·dil − pad over inputs i and taps t): kernel = stride with dilation 1 and
// no output padding beyond the end padding, as in PP-OCRv4 det's 2×2 stride-2 upsampling
// head. Then every accumulator row receives one tap's products, so that tap's GEMM can clear
// it and the stride-0 LOAD that zeroes the accumulators (4 beats per row at N = 16, more
// LOAD cycles than the GEMMs take) is not needed; the int32 sums are the same.
bool taps_cover_once(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t dil, int64_t pad) {
  if (out <= 0 || out > (int64_t{1} << 20)) return false;
  std::vector<uint8_t> hits(static_cast<size_t>(out), 0);
  for (int64_t i = 0; i < in; ++i)
    for (int64_t t = 0; t < k; ++t) {
      const int64_t o = i * stride + t * dil - pad;
      if (o >= 0 && o < out && ++hits[static_cast<size_t>(o)] > 1) return false;
    }
  return std::all_of(hits.begin(), hits.end(), [](uint8_t h) { return h == 1; });
}

// How lower_tap_gemm_conv cuts a layer into output-row bands: every band's input rows
// (CB blocks) and output rows fit one ACT set, its accumulators one ACC set; two sets each
// when they fit (double buffering). A 3-D layer is one band (its depth taps read every slice).
struct TapBandPlan {
  std::vector<TapBand> bands;
  int64_t in_rows = 0, out_rows = 0;  // the largest band's ACT input rows and output pixels
  uint32_t act_set_rows = 0;
  bool double_buffered = false;
};

// The input rows [iy0, iy1) that output rows [oy0, oy1) need.
TapBand band_inputs(const ConvLayer& L, int64_t oy0, int64_t oy1) {
  TapBand b{oy0, oy1, 0, 0};
  const int64_t span = (L.KH - 1) * L.dil_h;
  if (L.transposed) {  // oy = iy·s + ky·d − pad
    b.iy0 = std::max<int64_t>(0, ceil_div(std::max<int64_t>(0, oy0 + L.pad_t - span), L.stride_h));
    b.iy1 = std::min(L.H, (oy1 - 1 + L.pad_t) / L.stride_h + 1);
  } else {  // iy = oy·s + ky·d − pad
    b.iy0 = std::clamp<int64_t>(oy0 * L.stride_h - L.pad_t, 0, L.H);
    b.iy1 = std::clamp<int64_t>((oy1 - 1) * L.stride_h + span - L.pad_t + 1, 0, L.H);
  }
  if (b.iy1 <= b.iy0) b.iy1 = std::min(L.H, b.iy0 + 1);  // a band no tap reaches still loads one row
  return b;
}

Result<TapBandPlan> plan_tap_bands(const ConvLayer& L, uint32_t N, uint32_t act_rows, uint32_t acc_rows) {
  const int64_t CB = ceil_div(L.C, N);
  const std::string what = (L.transposed ? "ConvTranspose '" : "Conv '") + L.name + "'";
  auto fits = [&](int64_t in_rows, int64_t out_rows, int64_t sets) {
    return sets * (in_rows + out_rows) <= act_rows && sets * out_rows <= acc_rows && in_rows <= 65535 &&
           out_rows <= 65535;
  };
  auto plan_with = [&](int64_t band_h) {
    TapBandPlan plan;
    for (int64_t oy0 = 0; oy0 < L.OH; oy0 += band_h) {
      TapBand b = L.three_d ? TapBand{0, L.OH, 0, L.H} : band_inputs(L, oy0, std::min(L.OH, oy0 + band_h));
      plan.in_rows = std::max(plan.in_rows, CB * L.D * (b.iy1 - b.iy0) * L.W);
      plan.out_rows = std::max(plan.out_rows, (b.oy1 - b.oy0) * L.OW);
      plan.bands.push_back(b);
    }
    return plan;
  };
  if (L.three_d) {
    TapBandPlan plan = plan_with(L.OH);
    if (!fits(plan.in_rows, plan.out_rows, 1) || L.D * L.H * L.W > 65535 || L.D * L.H > 65535)
      return make_error(StatusCode::kUnsupported, what + " does not fit the scratchpads");
    plan.act_set_rows = static_cast<uint32_t>(plan.in_rows + plan.out_rows);
    return plan;
  }
  // The whole output when it fits; else the tallest bands that fit twice (double-buffered),
  // else once.
  {
    TapBandPlan whole = plan_with(L.OH);
    if (fits(whole.in_rows, whole.out_rows, 1)) {
      whole.act_set_rows = static_cast<uint32_t>(whole.in_rows + whole.out_rows);
      return whole;
    }
  }
  for (int64_t sets : {2, 1}) {
    for (int64_t band_h = L.OH; band_h >= 1; band_h = band_h > 8 ? band_h - band_h / 8 : band_h - 1) {
      TapBandPlan plan = plan_with(band_h);
      if (sets == 2 && plan.bands.size() < 2) continue;
      if (!fits(plan.in_rows, plan.out_rows, sets)) continue;
      plan.double_buffered = sets == 2;
      plan.act_set_rows = static_cast<uint32_t>(plan.in_rows + plan.out_rows);
      return plan;
    }
  }
  return make_error(StatusCode::kUnsupported, what + " does not fit the scratchpads even one output row at a time");
}

}  // namespace

// ConvTranspose (and 3-D Conv) as one GEMM per tap over whole rectangles of pixels. For
// ConvTranspose every tap (ky, kx) multiplies all input pixels by the tap's weights and
// adds the products into the accumulator rows of the output pixels they land on (iy·s +
// ky·d − pad, ix·s + kx·d − pad; act stride 1, acc stride s), clipped to the output, so
// overlapping taps accumulate. A Conv's tap instead reads the input pixel oy·s + ky·d − pad
// of every output pixel it reaches (act stride s, acc stride 1); taps in the padding are
// skipped. Either way the accumulators start at zero and the input is symmetric (zero point
// 0), so no border-dependent zero-point correction exists.
// A 3-D layer is the sum over kernel depth of 2-D ones: output slice od accumulates, for
// every depth tap kd whose input slice (ConvTranspose: id = (od + pad − kd·d) / s when whole;
// Conv: id = od·s + kd·d − pad) is inside the input, the 2-D taps of slice id with the
// weights of (kd, ky, kx); then REQUANT and STORE of that slice (a ConvTranspose slice no
// tap reaches is the bias alone). NDHWC input slices are consecutive image rows, so the
// whole input loads as one image D·H rows high.
static Result<LayerFacts> lower_tap_gemm_conv(const ConvLayer& L, const QParams& qx, const QParams& qy_out, uint32_t N,
                                              uint32_t in_off, uint32_t out_off, std::vector<uint8_t>& weights,
                                              Program& prog, const DynamicOperands& dyn,
                                              const std::optional<QParams>& q_lut_input) {
  using BK = image::BufferKind;
  const uint32_t act_rows = static_cast<uint32_t>(hw::kActSpBytes / N) - fused_lut_rows(L, N);
  NPU_ASSIGN_OR_RETURN(const QParams qy, load_fused_lut(L, qy_out, q_lut_input, N, weights, prog));
  const uint32_t acc_rows = static_cast<uint32_t>(hw::kAccSpBytes / (4 * N));
  const uint32_t wgt_rows = static_cast<uint32_t>(hw::kWgtSpBytes / N);
  const int64_t CB = ceil_div(L.C, N), NB = ceil_div(L.Cout, N), taps = L.KD * L.KH * L.KW, taps_2d = L.KH * L.KW;
  const int64_t Cp = CB * N, Coutp = NB * N;
  const bool dynamic = L.weight_input >= 0;
  const std::string what = (L.transposed ? "ConvTranspose '" : "Conv '") + L.name + "'";
  if (qx.zero_point != 0) return make_error(StatusCode::kInternal, what + " needs a symmetric input");
  // W is [C][Cout][taps] (ConvTranspose) or [Cout][C][taps] (Conv).
  auto weight = [&](int64_t c, int64_t m, int64_t t) {
    return L.weights[static_cast<size_t>((L.transposed ? c * L.Cout + m : m * L.C + c) * taps + t)];
  };
  // Per-output-channel scales over (c, tap), always max|w|/127: declared scales of a QDQ
  // model are not used here (conv_weight_scales returns them).
  std::vector<float> sw(static_cast<size_t>(L.Cout), dyn.qw.scale);
  if (!dynamic)
    for (int64_t m = 0; m < L.Cout; ++m) {
      float mx = 0;
      for (int64_t c = 0; c < L.C; ++c)
        for (int64_t t = 0; t < taps; ++t) mx = std::max(mx, std::fabs(weight(c, m, t)));
      sw[static_cast<size_t>(m)] = mx > 0 ? mx / 127.0f : 1.0f;
    }
  const uint64_t tile_bytes = uint64_t{N} * N;
  const uint64_t zero_off = align_up(weights.size());  // one int32 row of zeros (also an int8 zero row)
  weights.resize(zero_off + uint64_t{N} * 4, 0);
  const uint64_t w_off = align_up(weights.size());
  if (!dynamic) {
    weights.resize(w_off + static_cast<uint64_t>(NB * taps * CB) * tile_bytes, 0);
    for (int64_t c = 0; c < L.C; ++c)
      for (int64_t m = 0; m < L.Cout; ++m)
        for (int64_t t = 0; t < taps; ++t)
          weights[w_off + static_cast<uint64_t>(((m / N) * taps + t) * CB + c / N) * tile_bytes +
                  static_cast<uint64_t>(c % N) * N + static_cast<uint64_t>(m % N)] =
              static_cast<uint8_t>(quantize_weight(weight(c, m, t), sw[static_cast<size_t>(m)], false));
  }
  const uint64_t p_off = align_up(weights.size());
  weights.resize(p_off + static_cast<uint64_t>(NB) * 3 * N * 4, 0);
  for (int64_t m = 0; m < L.Cout; ++m) {
    const double in_scale = static_cast<double>(qx.scale) * sw[static_cast<size_t>(m)];
    int32_t mult, shift;
    quantize_multiplier(in_scale / qy.scale, &mult, &shift);
    const uint64_t row = p_off + static_cast<uint64_t>(m / N) * 3 * N * 4, lane = static_cast<uint64_t>(m % N) * 4;
    const int64_t bias_q = std::llround(L.bias[static_cast<size_t>(m)] / in_scale);
    put_u32(weights, row + lane, static_cast<uint32_t>(static_cast<int32_t>(std::clamp<int64_t>(bias_q, INT32_MIN, INT32_MAX))));
    put_u32(weights, row + N * 4 + lane, static_cast<uint32_t>(mult));
    put_u32(weights, row + 2 * N * 4 + lane, static_cast<uint32_t>(shift));
  }
  const auto lo = quantize_bound(L.act_lo, qy, -128), hi = quantize_bound(L.act_hi, qy, 127);
  // ACT: per band set, the input rows (CB blocks) then the output rows; ACC: parameters, then
  // one accumulator row per output pixel of a band (per set).
  const int64_t slice_rows = L.H * L.W;
  const uint32_t Cacc = static_cast<uint32_t>(3 * NB);
  const bool weights_fit = static_cast<uint64_t>(NB * taps * CB) * N <= wgt_rows;
  if (static_cast<uint64_t>(taps * CB) * N > wgt_rows)
    return make_error(StatusCode::kUnsupported, what + " has more weights per output block than the weight scratchpad holds");
  NPU_ASSIGN_OR_RETURN(const TapBandPlan plan, plan_tap_bands(L, N, act_rows, acc_rows - Cacc));
  load_acc_rows(prog, 0, Cacc, N, static_cast<uint32_t>(p_off));
  if (L.bias_input >= 0) load_dynamic_bias_rows(L.Cout, 0, dyn.bias_off, N, prog);
  auto load_weights = [&](int64_t nb_first, int64_t nb_count) {
    if (dynamic) {
      load_dynamic_conv_tiles(L.C, L.Cout, taps, nb_first, nb_count, dyn.w_off, static_cast<uint32_t>(zero_off), N, prog);
      return;
    }
    load_weight_rows(w_off, static_cast<uint64_t>(taps * CB) * N, nb_first, nb_count, N, prog);
  };
  if (weights_fit) load_weights(0, NB);
  const bool clear_by_tap = L.transposed && !L.three_d &&
                            taps_cover_once(L.H, L.OH, L.KH, L.stride_h, L.dil_h, L.pad_t) &&
                            taps_cover_once(L.W, L.OW, L.KW, L.stride_w, L.dil_w, L.pad_l);
  LayerFacts facts;
  for (int64_t b = 0; b < L.batch; ++b)
    for (size_t k = 0; k < plan.bands.size(); ++k) {
      const TapBand& band = plan.bands[k];
      // Double-buffered when two sets fit: band k+1's LOAD overlaps band k's GEMMs, its
      // STOREs the next band's.
      const uint32_t set = plan.double_buffered ? static_cast<uint32_t>(k % 2) : 0;
      const uint32_t A_in = set * plan.act_set_rows, A_out = A_in + static_cast<uint32_t>(plan.in_rows);
      const uint32_t C_out = Cacc + set * static_cast<uint32_t>(plan.out_rows);
      const int64_t band_in_h = band.iy1 - band.iy0, band_h = band.oy1 - band.oy0;
      const int64_t in_slice = L.D * band_in_h * L.W;  // rows of one input-channel block
      isa::Load ld;
      ld.sp = hw::Scratchpad::kAct;
      ld.sp_base = A_in;
      ld.x = static_cast<uint16_t>(L.W);
      ld.x_stride = static_cast<uint32_t>(Cp);
      ld.y = static_cast<uint16_t>(L.D * band_in_h);
      ld.y_stride = static_cast<uint32_t>(L.W * Cp);
      ld.z = static_cast<uint16_t>(CB);
      ld.z_stride = N;
      prog.load(ld, BK::Activations,
                static_cast<uint32_t>(in_off + (b * L.D * slice_rows + band.iy0 * L.W) * Cp));
      for (int64_t nb = 0; nb < NB; ++nb) {
        if (!weights_fit) load_weights(nb, 1);
        const int64_t wbase = (weights_fit ? nb : 0) * taps * CB;
        for (int64_t od = 0; od < L.OD; ++od) {
          const int64_t band_out_rows = band_h * L.OW;
          // Accumulators start at zero: a stride-0 LOAD of a zero row, or each row's one tap clears it.
          if (!clear_by_tap) repeat_acc_row(prog, C_out, band_out_rows, static_cast<uint32_t>(zero_off));
          for (int64_t t = 0; t < taps; ++t) {
            const int64_t kd = t / taps_2d, ky = t % taps_2d / L.KW, kx = t % L.KW;
            // ConvTranspose: od = id·s + kd·d − pad; Conv: id = od·s + kd·d − pad.
            const int64_t from = L.transposed ? od + L.pad_f - kd * L.dil_d : od * L.stride_d + kd * L.dil_d - L.pad_f;
            if (from < 0 || (L.transposed && from % L.stride_d != 0)) continue;
            const int64_t id = L.transposed ? from / L.stride_d : from;
            if (id >= L.D) continue;
            // Offsets within the band: a walked row p (input rows for ConvTranspose, output
            // rows for Conv) meets partner row p·s + y_off.
            const int64_t y_off = L.transposed ? band.iy0 * L.stride_h + ky * L.dil_h - L.pad_t - band.oy0
                                               : band.oy0 * L.stride_h + ky * L.dil_h - L.pad_t - band.iy0;
            const int64_t x_off = kx * L.dil_w - L.pad_l;
            int64_t y0, y1, x0, x1;
            tap_reach(L.transposed ? band_in_h : band_h, L.transposed ? band_h : band_in_h, L.stride_h, y_off, &y0, &y1);
            tap_reach(L.transposed ? L.W : L.OW, L.transposed ? L.OW : L.W, L.stride_w, x_off, &x0, &x1);
            if (y1 < y0 || x1 < x0) continue;  // this tap meets no pixel pair in this band
            const int64_t partner = (y0 * L.stride_h + y_off) * (L.transposed ? L.OW : L.W) + x0 * L.stride_w + x_off;
            const int64_t walked = y0 * (L.transposed ? L.W : L.OW) + x0;
            isa::Gemm gm;
            gm.clear = clear_by_tap;
            gm.act = static_cast<uint16_t>(A_in + id * band_in_h * L.W + (L.transposed ? walked : partner));
            gm.wgt = static_cast<uint16_t>(wbase + t * CB);
            gm.acc = static_cast<uint16_t>(C_out + (L.transposed ? partner : walked));
            gm.o = static_cast<uint16_t>(y1 - y0 + 1);
            gm.act_so = static_cast<uint16_t>(L.transposed ? L.W : L.stride_h * L.W);
            gm.acc_so = static_cast<uint16_t>(L.transposed ? L.stride_h * L.OW : L.OW);
            gm.i = static_cast<uint16_t>(CB);
            gm.act_si = static_cast<uint16_t>(in_slice);
            gm.wgt_si = 1;
            gm.acc_si = 0;  // input-channel blocks accumulate into the same rows
            gm.r = static_cast<uint16_t>(x1 - x0 + 1);
            gm.act_sr = static_cast<uint16_t>(L.transposed ? 1 : L.stride_w);
            gm.acc_sr = static_cast<uint16_t>(L.transposed ? L.stride_w : 1);
            prog.gemm(gm);
            facts.macs += static_cast<uint64_t>((y1 - y0 + 1) * (x1 - x0 + 1) * CB) * N * N;
          }
          isa::VecRequant vq;
          vq.bias = true;
          vq.src = static_cast<uint16_t>(C_out);
          vq.dst = static_cast<uint16_t>(A_out);
          vq.param = static_cast<uint16_t>(3 * nb);
          vq.r = static_cast<uint16_t>(band_out_rows);
          vq.src_sr = 1;
          vq.dst_sr = 1;
          vq.zero_point = static_cast<int8_t>(qy.zero_point);
          vq.clamp_lo = lo;
          vq.clamp_hi = hi;
          prog.vec(vq);
          apply_fused_lut(L, N, A_out, band_out_rows, prog);
          store_pixel_rows(prog, A_out, std::min<int64_t>(N, L.Cout - nb * N), L.OW, band_h, Coutp,
                           static_cast<uint32_t>(out_off + ((b * L.OD + od) * L.OH * L.OW + band.oy0 * L.OW) * Coutp + nb * N));
        }
      }
    }
  const uint64_t sets = plan.double_buffered ? 2 : 1;
  facts.scratchpad_bytes = sets * (static_cast<uint64_t>(plan.in_rows + plan.out_rows) * N +
                                   static_cast<uint64_t>(plan.out_rows) * N * 4) +
                           uint64_t{Cacc} * N * 4 +
                           static_cast<uint64_t>(weights_fit ? NB * taps * CB : taps * CB) * tile_bytes;
  return facts;
}

}  // namespace npu::compiler
