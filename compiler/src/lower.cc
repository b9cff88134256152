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

}  // namespace

Result<LayerFacts> lower_fc_layer(const FcLayer& L, const QParams& qx, const QParams& qy, uint32_t N,
                                  uint32_t in_off, uint32_t out_off, std::vector<uint8_t>& weights,
                                  Program& prog) {
  const uint32_t act_rows = static_cast<uint32_t>(hw::kActSpBytes / N);
  const uint32_t acc_rows = static_cast<uint32_t>(hw::kAccSpBytes / (4 * N));
  const uint32_t wgt_tiles = static_cast<uint32_t>(hw::kWgtSpBytes / (N * N));
    const int64_t KB = ceil_div(L.K, N), NB = ceil_div(L.N, N);
    // Per-output-channel symmetric weights.
    std::vector<float> sw(static_cast<size_t>(L.N));
    std::vector<int8_t> wq(static_cast<size_t>(L.K * L.N));
    for (int64_t j = 0; j < L.N; ++j) {
      float mx = 0;
      for (int64_t k = 0; k < L.K; ++k) mx = std::max(mx, std::fabs(L.weights[static_cast<size_t>(k * L.N + j)]));
      sw[static_cast<size_t>(j)] = mx > 0 ? mx / 127.0f : 1.0f;
      for (int64_t k = 0; k < L.K; ++k)
        wq[static_cast<size_t>(k * L.N + j)] = static_cast<int8_t>(
            std::clamp(std::nearbyint(L.weights[static_cast<size_t>(k * L.N + j)] / sw[static_cast<size_t>(j)]), -127.0f, 127.0f));
    }
    const uint64_t tiles_off = align_up(weights.size());
    const uint64_t tile_bytes = uint64_t{N} * N;
    const uint64_t params_off = align_up(tiles_off + static_cast<uint64_t>(KB * NB) * tile_bytes);
    weights.resize(params_off + static_cast<uint64_t>(NB) * 3 * N * 4, 0);
    for (int64_t nb = 0; nb < NB; ++nb)
      for (int64_t kb = 0; kb < KB; ++kb)
        for (uint32_t k = 0; k < N; ++k)
          for (uint32_t c = 0; c < N; ++c) {
            const int64_t kk = kb * N + k, jj = nb * N + c;
            if (kk < L.K && jj < L.N)
              weights[tiles_off + static_cast<uint64_t>(nb * KB + kb) * tile_bytes + k * N + c] =
                  static_cast<uint8_t>(wq[static_cast<size_t>(kk * L.N + jj)]);
          }
    for (int64_t j = 0; j < L.N; ++j) {
      int64_t colsum = 0;
      for (int64_t k = 0; k < L.K; ++k) colsum += wq[static_cast<size_t>(k * L.N + j)];
      const double in_scale = static_cast<double>(qx.scale) * sw[static_cast<size_t>(j)];
      // The NPU multiplies raw x_q; the input zero point's contribution is folded into the bias.
      const int64_t bias_q = std::llround(L.bias[static_cast<size_t>(j)] / in_scale) - int64_t{qx.zero_point} * colsum;
      int32_t mult, shift;
      quantize_multiplier(in_scale / qy.scale, &mult, &shift);
      const uint64_t row = params_off + static_cast<uint64_t>(j / N) * 3 * N * 4;
      const uint64_t lane = static_cast<uint64_t>(j % N) * 4;
      put_u32(weights, row + lane, static_cast<uint32_t>(static_cast<int32_t>(std::clamp<int64_t>(bias_q, INT32_MIN, INT32_MAX))));
      put_u32(weights, row + N * 4 + lane, static_cast<uint32_t>(mult));
      put_u32(weights, row + 2 * N * 4 + lane, static_cast<uint32_t>(shift));
    }

    // Scratchpad plan: ACT [input Mt*KB | output Mt], ACC [acc Mt | params 3*NB], WGT tiles.
    const bool weights_fit = KB * NB <= wgt_tiles;
    if (KB > wgt_tiles || 3 * NB >= acc_rows)
      return make_error(StatusCode::kUnsupported, "layer '" + L.name + "' is too large for the scratchpads (K=" +
                                                      std::to_string(L.K) + ", N=" + std::to_string(L.N) + ")");
    const int64_t Mt = std::min<int64_t>({L.M, act_rows / (KB + 1), acc_rows - 3 * NB, 65535});
    const uint32_t A = 0, Bout = static_cast<uint32_t>(Mt * KB), C = 0, P = static_cast<uint32_t>(Mt);
    using BK = image::BufferKind;
    {
      isa::Load ld;
      ld.sp = hw::Scratchpad::kAcc;
      ld.sp_base = P;
      ld.x = static_cast<uint16_t>(3 * NB);
      ld.x_stride = 4 * N;
      prog.load(ld, BK::Weights, static_cast<uint32_t>(params_off));
    }
    auto load_weights = [&](int64_t nb_first, int64_t nb_count) {
      isa::Load ld;
      ld.sp = hw::Scratchpad::kWgt;
      ld.sp_base = 0;
      ld.x = static_cast<uint16_t>(KB * N);
      ld.x_stride = N;
      ld.y = static_cast<uint16_t>(nb_count);
      ld.y_stride = static_cast<uint32_t>(KB * tile_bytes);
      prog.load(ld, BK::Weights, static_cast<uint32_t>(tiles_off + static_cast<uint64_t>(nb_first * KB) * tile_bytes));
    };
    if (weights_fit) load_weights(0, NB);
    for (int64_t m0 = 0; m0 < L.M; m0 += Mt) {
      const int64_t mt = std::min(Mt, L.M - m0);
      const int64_t full_kb = L.K / N, tail = L.K % N;
      if (full_kb > 0) {
        isa::Load ld;
        ld.sp = hw::Scratchpad::kAct;
        ld.sp_base = A;
        ld.x = static_cast<uint16_t>(mt);
        ld.x_stride = static_cast<uint32_t>(L.K);
        ld.y = static_cast<uint16_t>(full_kb);
        ld.y_stride = N;
        prog.load(ld, BK::Activations, static_cast<uint32_t>(in_off + m0 * L.K));
      }
      if (tail > 0) {
        isa::Load ld;
        ld.sp = hw::Scratchpad::kAct;
        ld.row_elems = static_cast<uint32_t>(tail);
        ld.sp_base = static_cast<uint32_t>(A + full_kb * mt);
        ld.x = static_cast<uint16_t>(mt);
        ld.x_stride = static_cast<uint32_t>(L.K);
        prog.load(ld, BK::Activations, static_cast<uint32_t>(in_off + m0 * L.K + full_kb * N));
      }
      for (int64_t nb = 0; nb < NB; ++nb) {
        if (!weights_fit) load_weights(nb, 1);
        isa::Gemm gm;
        gm.clear = true;
        gm.act = static_cast<uint16_t>(A);
        gm.wgt = static_cast<uint16_t>(weights_fit ? nb * KB : 0);
        gm.acc = static_cast<uint16_t>(C);
        gm.r = static_cast<uint16_t>(mt);
        gm.i = static_cast<uint16_t>(KB);
        gm.act_si = static_cast<uint16_t>(mt);
        gm.act_sr = 1;
        gm.wgt_si = 1;
        gm.acc_sr = 1;
        prog.gemm(gm);
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
        prog.store(st, BK::Activations, static_cast<uint32_t>(out_off + m0 * L.N + nb * N));
      }
    }
  LayerFacts facts;
  facts.macs = static_cast<uint64_t>(L.M * KB * NB) * N * N;
  facts.scratchpad_bytes = static_cast<uint64_t>(Mt * (KB + 1)) * N + static_cast<uint64_t>(Mt + 3 * NB) * N * 4 +
                           static_cast<uint64_t>(weights_fit ? KB * NB : KB) * tile_bytes;
  return facts;
}

}  // namespace npu::compiler
