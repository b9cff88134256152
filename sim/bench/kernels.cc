#include "kernels.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace npu::sim::bench {
namespace {

constexpr uint64_t kPage = hw::kPageBytes;

// splitmix64: a small deterministic generator (the kernels must not depend on <random>'s
// implementation-defined distributions).
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int8_t i8() { return static_cast<int8_t>(next() & 0xFF); }
  int32_t range(int32_t lo, int32_t hi) {  // [lo, hi]
    return lo + static_cast<int32_t>(next() % static_cast<uint64_t>(hi - lo + 1));
  }

 private:
  uint64_t s_;
};

void check_dim(uint32_t n) {
  if (n != 8 && n != 16 && n != 32)
    throw std::invalid_argument("array dim " + std::to_string(n) + " is not supported: use 8, 16 or 32");
}

std::vector<int8_t> random_bytes(Rng& rng, size_t n) {
  std::vector<int8_t> v(n);
  for (auto& b : v) b = rng.i8();
  return v;
}

// Three ACC rows per channel block (bias, multiplier, shift), N int32 lanes each, as bytes.
std::vector<int8_t> param_rows(const std::vector<int32_t>& bias, const std::vector<int32_t>& mult,
                               const std::vector<int32_t>& shift, uint32_t n) {
  const size_t blocks = bias.size() / n;
  std::vector<int32_t> rows(blocks * 3 * n);
  for (size_t b = 0; b < blocks; ++b)
    for (uint32_t k = 0; k < n; ++k) {
      rows[(3 * b + 0) * n + k] = bias[b * n + k];
      rows[(3 * b + 1) * n + k] = mult[b * n + k];
      rows[(3 * b + 2) * n + k] = shift[b * n + k];
    }
  std::vector<int8_t> bytes(rows.size() * 4);
  std::memcpy(bytes.data(), rows.data(), bytes.size());
  return bytes;
}

// REQUANT of architecture.md 1.4: round half toward +inf, zero point, clamp (low wins).
int8_t requant(int32_t v, int32_t m, uint32_t s, int8_t zp, int8_t lo, int8_t hi) {
  auto t = static_cast<uint64_t>(static_cast<int64_t>(v) * m);
  if (s > 0) t += uint64_t{1} << (s - 1);
  const int64_t u = (static_cast<int64_t>(t) >> s) + zp;
  return static_cast<int8_t>(u < lo ? lo : (u > hi ? hi : u));
}

uint16_t u16(uint64_t v) {
  if (v > 0xFFFF) throw std::logic_error("bench kernel: a 16-bit instruction field overflowed");
  return static_cast<uint16_t>(v);
}

isa::Words load(hw::Scratchpad sp, uint32_t va, uint32_t base, uint32_t x, uint32_t y, uint32_t z,
                uint32_t xs, uint32_t ys, uint32_t zs, isa::Tokens tokens, uint8_t pl = 0,
                uint8_t pr = 0, uint8_t pt = 0, uint8_t pb = 0) {
  isa::Load l;
  l.sp = sp;
  l.va = va;
  l.sp_base = base;
  l.x = u16(x);
  l.y = u16(y);
  l.z = u16(z);
  l.x_stride = xs;
  l.y_stride = ys;
  l.z_stride = zs;
  l.pad_l = pl;
  l.pad_r = pr;
  l.pad_t = pt;
  l.pad_b = pb;
  l.tokens = tokens;
  return isa::encode(l);
}

// A dense run of `rows` scratchpad rows of `row_bytes` bytes to or from consecutive DRAM.
isa::Words store_linear(uint32_t va, uint32_t base, uint32_t rows, uint32_t row_bytes, isa::Tokens tokens) {
  isa::Store s;
  s.sp = hw::Scratchpad::kAct;
  s.va = va;
  s.sp_base = base;
  s.x = u16(rows);
  s.x_stride = row_bytes;
  s.tokens = tokens;
  return isa::encode(s);
}

isa::Tokens tok(bool pop_prev, bool pop_next, bool push_prev, bool push_next) {
  isa::Tokens t;
  t.pop_prev = pop_prev;
  t.pop_next = pop_next;
  t.push_prev = push_prev;
  t.push_next = push_next;
  return t;
}

// Tokens of the last instruction of a run, merged with those of its first.
void add_tokens(isa::Words& w, const isa::Tokens& t) { w[0] |= isa::token_bits(t); }

}  // namespace

isa::Words encode_vec(const VecOp& op) {
  return {isa::op(hw::Opcode::kVec) | isa::token_bits(op.tokens) |
              (static_cast<uint32_t>(op.mode) << 16) | (op.bias ? 1u << 20 : 0u),
          isa::pack16(op.src, op.dst),
          isa::pack16(op.param, op.r),
          isa::pack16(op.o, static_cast<uint8_t>(op.zero_point)),
          isa::pack16(op.src_so, op.src_sr),
          isa::pack16(op.dst_so, op.dst_sr),
          static_cast<uint32_t>(static_cast<uint8_t>(op.clamp_lo)) |
              (static_cast<uint32_t>(static_cast<uint8_t>(op.clamp_hi)) << 8) |
              (static_cast<uint32_t>(op.aux) << 16),
          static_cast<uint32_t>(op.kw) | (static_cast<uint32_t>(op.kh) << 8) |
              (static_cast<uint32_t>(op.wys) << 16)};
}

// ---------------------------------------------------------------------------------------------
// conv 3x3, 64 -> 64, 56x56, stride 1, pad 1.
//
// ACT input tile (th + 2 input rows, pixel-major, channel block minor, left/right padding
// pixels included): row = in + (z * Wp + xp) * CB + ib. One GEMM per (output block o, kernel
// row ky) covers the tile: O walks output rows (act stride Wp*CB), I walks (kx, ib) together
// (kx*CB + ib is one unit-stride index in this layout, so 3*CB weight tiles per GEMM), R walks
// the 56 output pixels of a row (act stride CB). Each weight tile stays for R = 56 rows. Taps
// that fall on the top/bottom padding rows are skipped by trimming O (ky = 1, which never
// falls outside, goes first and clears the accumulators).
Kernel make_conv3x3(uint32_t n, uint64_t seed) {
  check_dim(n);
  constexpr uint32_t H = 56, W = 56, C = 64, Wp = W + 2, TH = 8;
  const uint32_t CB = C / n;  // channel blocks (input and output)
  const int8_t zp = -3, lo = -128, hi = 127;
  Rng rng(seed * 3 + 1);
  Kernel k;
  k.name = "conv3x3_64x64_56x56";
  k.description = "conv 3x3 64->64 on 56x56, stride 1, pad 1, int8, implicit GEMM";
  k.array_dim = n;
  k.macs = uint64_t{H} * W * C * C * 9;
  const std::vector<int8_t> input = random_bytes(rng, size_t{H} * W * C);
  const std::vector<int8_t> wlog = random_bytes(rng, size_t{9} * C * C);  // [ky][kx][ci][co]
  std::vector<int32_t> bias(C), mult(C), shift(C);
  for (uint32_t c = 0; c < C; ++c) {
    bias[c] = rng.range(-20000, 20000);
    mult[c] = rng.range(1 << 20, 1 << 21);
    shift[c] = rng.range(31, 32);
  }
  // Weight tiles: tile (o, ky, kx, ib) = o*9*CB + (ky*3 + kx)*CB + ib; row k = input channel
  // ib*N + k; lane j = output channel o*N + j.
  std::vector<int8_t> packed(wlog.size());
  for (uint32_t o = 0; o < CB; ++o)
    for (uint32_t tap = 0; tap < 9; ++tap)
      for (uint32_t ib = 0; ib < CB; ++ib)
        for (uint32_t r = 0; r < n; ++r)
          for (uint32_t j = 0; j < n; ++j) {
            const size_t tile = size_t{o} * 9 * CB + tap * CB + ib;
            packed[(tile * n + r) * n + j] = wlog[(size_t{tap} * C + ib * n + r) * C + o * n + j];
          }
  k.inputs = {input, packed, param_rows(bias, mult, shift, n)};
  k.output_bytes = size_t{H} * W * C;

  // Scalar reference.
  k.expected.resize(k.output_bytes);
  std::vector<int32_t> acc(C);
  for (uint32_t y = 0; y < H; ++y)
    for (uint32_t x = 0; x < W; ++x) {
      std::fill(acc.begin(), acc.end(), 0);
      for (uint32_t ky = 0; ky < 3; ++ky)
        for (uint32_t kx = 0; kx < 3; ++kx) {
          const int iy = static_cast<int>(y + ky) - 1, ix = static_cast<int>(x + kx) - 1;
          if (iy < 0 || iy >= static_cast<int>(H) || ix < 0 || ix >= static_cast<int>(W)) continue;
          const int8_t* px = &input[(static_cast<size_t>(iy) * W + static_cast<size_t>(ix)) * C];
          for (uint32_t ci = 0; ci < C; ++ci) {
            const int32_t a = px[ci];
            const int8_t* wr = &wlog[((size_t{ky} * 3 + kx) * C + ci) * C];
            for (uint32_t co = 0; co < C; ++co) acc[co] += a * wr[co];
          }
        }
      for (uint32_t co = 0; co < C; ++co)
        k.expected[(size_t{y} * W + x) * C + co] =
            requant(static_cast<int32_t>(static_cast<uint32_t>(acc[co]) + static_cast<uint32_t>(bias[co])),
                    mult[co], static_cast<uint32_t>(shift[co]), zp, lo, hi);
    }

  k.emit = [=](const std::vector<uint32_t>& in, uint32_t out_va) {
    const uint32_t in_va = in[0], w_va = in[1], p_va = in[2];
    const uint32_t tiles = (H + TH - 1) / TH;
    const uint32_t in_rows = (TH + 2) * Wp * CB;  // per input buffer
    const uint32_t out_rows = TH * W * CB;        // per output buffer (ACT) and per ACC buffer
    auto in_buf = [&](uint32_t t) { return (t % 2) * in_rows; };
    auto out_buf = [&](uint32_t t) { return 2 * in_rows + (t % 2) * out_rows; };
    auto acc_buf = [&](uint32_t t) { return 3 * CB + (t % 2) * out_rows; };
    std::vector<isa::Words> p;
    p.push_back(load(hw::Scratchpad::kAcc, p_va, 0, 3 * CB, 1, 1, 4 * n, 0, 0, {}));
    p.push_back(load(hw::Scratchpad::kWgt, w_va, 0, 9 * CB * CB * n, 1, 1, n, 0, 0, {}));
    auto load_tile = [&](uint32_t t) {
      const uint32_t y0 = t * TH, y1 = std::min(H, y0 + TH);
      const uint32_t iy0 = y0 == 0 ? 0 : y0 - 1, iy1 = std::min(H, y1 + 1);
      const uint32_t z0 = iy0 + 1 - y0;  // buffer row 0 holds input row y0 - 1
      // X = channel blocks, Y = pixels (padded left/right by the Y padding), Z = input rows.
      p.push_back(load(hw::Scratchpad::kAct, in_va + iy0 * W * C, in_buf(t) + z0 * Wp * CB, CB, W,
                       iy1 - iy0, n, C, W * C, tok(false, t >= 2, false, true), 0, 0, 1, 1));
    };
    load_tile(0);
    for (uint32_t t = 0; t < tiles; ++t) {
      if (t + 1 < tiles) load_tile(t + 1);
      const uint32_t y0 = t * TH, y1 = std::min(H, y0 + TH);
      bool first = true;
      for (uint32_t o = 0; o < CB; ++o)
        for (uint32_t ky : {1u, 0u, 2u}) {
          const uint32_t oy0 = std::max<uint32_t>(y0, ky == 0 ? 1 : 0);
          const uint32_t oy1 = std::min<uint32_t>(y1, ky == 2 ? H - 1 : H);
          isa::Gemm g;
          g.clear = ky == 1;
          g.act = u16(in_buf(t) + (oy0 - y0 + ky) * Wp * CB);
          g.wgt = u16(o * 9 * CB + ky * 3 * CB);
          g.acc = u16(acc_buf(t) + (oy0 - y0) * W * CB + o);
          g.o = u16(oy1 - oy0);
          g.i = u16(3 * CB);
          g.r = u16(W);
          g.act_so = u16(Wp * CB);
          g.act_si = 1;
          g.act_sr = u16(CB);
          g.acc_so = u16(W * CB);
          g.acc_si = 0;
          g.acc_sr = u16(CB);
          g.wgt_so = 0;
          g.wgt_si = 1;
          g.tokens = tok(first, false, false, false);
          first = false;
          p.push_back(isa::encode(g));
        }
      if (t + 2 < tiles) add_tokens(p.back(), tok(false, false, true, false));  // input buffer free
      for (uint32_t o = 0; o < CB; ++o) {
        VecOp v;
        v.bias = true;
        v.src = u16(acc_buf(t) + o);
        v.dst = u16(out_buf(t) + o);
        v.param = u16(3 * o);
        v.r = u16((y1 - y0) * W);
        v.src_sr = u16(CB);
        v.dst_sr = u16(CB);
        v.zero_point = zp;
        v.clamp_lo = lo;
        v.clamp_hi = hi;
        v.tokens = tok(false, o == 0 && t >= 2, false, o + 1 == CB);
        p.push_back(encode_vec(v));
      }
      p.push_back(store_linear(out_va + y0 * W * C, out_buf(t), (y1 - y0) * W * CB, n,
                               tok(true, false, t + 2 < tiles, false)));
    }
    return p;
  };
  return k;
}

// ---------------------------------------------------------------------------------------------
// matmul 256x256x256: C = requant(A . B), per-tensor multiplier and shift.
// M is tiled by 64 rows (A tile and the output double-buffered); all of B stays in WGT.
// One GEMM per tile: O walks output column blocks, I the K blocks, R the 64 rows.
Kernel make_matmul(uint32_t n, uint64_t seed) {
  check_dim(n);
  constexpr uint32_t M = 256, K = 256, NN = 256, TM = 64;
  const uint32_t KB = K / n, NB = NN / n;
  const int8_t zp = 0, lo = -128, hi = 127;
  Rng rng(seed * 3 + 2);
  Kernel k;
  k.name = "matmul_256x256x256";
  k.description = "matmul 256x256x256 int8 -> int32 -> requant int8";
  k.array_dim = n;
  k.macs = uint64_t{M} * K * NN;
  const std::vector<int8_t> a = random_bytes(rng, size_t{M} * K);
  const std::vector<int8_t> b = random_bytes(rng, size_t{K} * NN);
  const int32_t m = rng.range(1 << 20, 1 << 21), s = 31;
  std::vector<int8_t> packed(b.size());  // tile (nb, kb) = nb*KB + kb; row r = k index; lane j
  for (uint32_t nb = 0; nb < NB; ++nb)
    for (uint32_t kb = 0; kb < KB; ++kb)
      for (uint32_t r = 0; r < n; ++r)
        for (uint32_t j = 0; j < n; ++j)
          packed[((size_t{nb} * KB + kb) * n + r) * n + j] = b[(size_t{kb} * n + r) * NN + nb * n + j];
  std::vector<int32_t> zeros(n, 0), mults(n, m), shifts(n, s);
  k.inputs = {a, packed, param_rows(zeros, mults, shifts, n)};
  k.output_bytes = size_t{M} * NN;
  k.expected.resize(k.output_bytes);
  std::vector<int32_t> acc(NN);
  for (uint32_t i = 0; i < M; ++i) {
    std::fill(acc.begin(), acc.end(), 0);
    for (uint32_t kk = 0; kk < K; ++kk) {
      const int32_t av = a[size_t{i} * K + kk];
      const int8_t* br = &b[size_t{kk} * NN];
      for (uint32_t j = 0; j < NN; ++j) acc[j] += av * br[j];
    }
    for (uint32_t j = 0; j < NN; ++j) k.expected[size_t{i} * NN + j] = requant(acc[j], m, s, zp, lo, hi);
  }

  k.emit = [=](const std::vector<uint32_t>& in, uint32_t out_va) {
    const uint32_t a_va = in[0], b_va = in[1], p_va = in[2];
    const uint32_t tiles = M / TM;
    const uint32_t a_rows = TM * KB, c_rows = TM * NB;
    auto a_buf = [&](uint32_t t) { return (t % 2) * a_rows; };
    auto out_buf = [&](uint32_t t) { return 2 * a_rows + (t % 2) * c_rows; };
    auto acc_buf = [&](uint32_t t) { return 3 + (t % 2) * c_rows; };
    std::vector<isa::Words> p;
    p.push_back(load(hw::Scratchpad::kAcc, p_va, 0, 3, 1, 1, 4 * n, 0, 0, {}));
    p.push_back(load(hw::Scratchpad::kWgt, b_va, 0, NB * KB * n, 1, 1, n, 0, 0, {}));
    auto load_tile = [&](uint32_t t) {
      p.push_back(load(hw::Scratchpad::kAct, a_va + t * TM * K, a_buf(t), a_rows, 1, 1, n, 0, 0,
                       tok(false, t >= 2, false, true)));
    };
    load_tile(0);
    for (uint32_t t = 0; t < tiles; ++t) {
      if (t + 1 < tiles) load_tile(t + 1);
      isa::Gemm g;
      g.clear = true;
      g.act = u16(a_buf(t));
      g.wgt = 0;
      g.acc = u16(acc_buf(t));
      g.o = u16(NB);
      g.i = u16(KB);
      g.r = u16(TM);
      g.act_so = 0;
      g.act_si = 1;
      g.act_sr = u16(KB);
      g.acc_so = 1;
      g.acc_si = 0;
      g.acc_sr = u16(NB);
      g.wgt_so = u16(KB);
      g.wgt_si = 1;
      g.tokens = tok(true, false, t + 2 < tiles, false);
      p.push_back(isa::encode(g));
      VecOp v;
      v.src = u16(acc_buf(t));
      v.dst = u16(out_buf(t));
      v.param = 0;
      v.r = u16(c_rows);
      v.src_sr = 1;
      v.dst_sr = 1;
      v.zero_point = zp;
      v.clamp_lo = lo;
      v.clamp_hi = hi;
      v.tokens = tok(false, t >= 2, false, true);
      p.push_back(encode_vec(v));
      p.push_back(store_linear(out_va + t * TM * NN, out_buf(t), c_rows, n, tok(true, false, t + 2 < tiles, false)));
    }
    return p;
  };
  return k;
}

// ---------------------------------------------------------------------------------------------
// depthwise 3x3 on 112x112x32, stride 1, pad 1 (VEC mode DWCONV), per-channel bias + requant.
// ACT input tile: channel-block-major planes of (TH + 2) x (W + 2) padded pixels, so the
// window walks kx with stride 1 and ky with stride Wp; LOAD's padding makes all four borders.
Kernel make_depthwise3x3(uint32_t n, uint64_t seed) {
  check_dim(n);
  constexpr uint32_t H = 112, W = 112, C = 32, Wp = W + 2, TH = 16;
  const uint32_t CB = C / n;
  const int8_t zp = 5, lo = -128, hi = 127;
  Rng rng(seed * 3 + 3);
  Kernel k;
  k.name = "depthwise3x3_112x112x32";
  k.description = "depthwise 3x3 on 112x112x32, stride 1, pad 1, int8, VEC DWCONV";
  k.array_dim = n;
  k.macs = uint64_t{H} * W * C * 9;
  k.uses_vec_dwconv = true;
  const std::vector<int8_t> input = random_bytes(rng, size_t{H} * W * C);
  const std::vector<int8_t> wlog = random_bytes(rng, size_t{9} * C);  // [ky][kx][c]
  std::vector<int32_t> bias(C), mult(C), shift(C);
  for (uint32_t c = 0; c < C; ++c) {
    bias[c] = rng.range(-5000, 5000);
    mult[c] = rng.range(1 << 22, 1 << 23);
    shift[c] = 30;
  }
  std::vector<int8_t> packed(wlog.size());  // WGT row = cb*9 + tap, lane j = channel cb*N + j
  for (uint32_t cb = 0; cb < CB; ++cb)
    for (uint32_t tap = 0; tap < 9; ++tap)
      for (uint32_t j = 0; j < n; ++j) packed[(size_t{cb} * 9 + tap) * n + j] = wlog[size_t{tap} * C + cb * n + j];
  k.inputs = {input, packed, param_rows(bias, mult, shift, n)};
  k.output_bytes = size_t{H} * W * C;
  k.expected.resize(k.output_bytes);
  for (uint32_t y = 0; y < H; ++y)
    for (uint32_t x = 0; x < W; ++x)
      for (uint32_t c = 0; c < C; ++c) {
        int32_t acc = 0;
        for (uint32_t ky = 0; ky < 3; ++ky)
          for (uint32_t kx = 0; kx < 3; ++kx) {
            const int iy = static_cast<int>(y + ky) - 1, ix = static_cast<int>(x + kx) - 1;
            if (iy < 0 || iy >= static_cast<int>(H) || ix < 0 || ix >= static_cast<int>(W)) continue;
            acc += int32_t{input[(static_cast<size_t>(iy) * W + static_cast<size_t>(ix)) * C + c]} *
                   wlog[(size_t{ky} * 3 + kx) * C + c];
          }
        k.expected[(size_t{y} * W + x) * C + c] =
            requant(acc + bias[c], mult[c], static_cast<uint32_t>(shift[c]), zp, lo, hi);
      }

  k.emit = [=](const std::vector<uint32_t>& in, uint32_t out_va) {
    const uint32_t in_va = in[0], w_va = in[1], p_va = in[2];
    const uint32_t tiles = H / TH;
    const uint32_t plane = (TH + 2) * Wp;
    const uint32_t in_rows = CB * plane, out_rows = TH * W * CB;
    auto in_buf = [&](uint32_t t) { return (t % 2) * in_rows; };
    auto out_buf = [&](uint32_t t) { return 2 * in_rows + (t % 2) * out_rows; };
    std::vector<isa::Words> p;
    p.push_back(load(hw::Scratchpad::kAcc, p_va, 0, 3 * CB, 1, 1, 4 * n, 0, 0, {}));
    p.push_back(load(hw::Scratchpad::kWgt, w_va, 0, 9 * CB, 1, 1, n, 0, 0, {}));
    auto load_tile = [&](uint32_t t) {
      const uint32_t y0 = t * TH, y1 = y0 + TH;
      const uint32_t iy0 = y0 == 0 ? 0 : y0 - 1, iy1 = std::min(H, y1 + 1);
      // X = pixels (padded left/right), Y = input rows (padded at the image edges), Z = blocks.
      p.push_back(load(hw::Scratchpad::kAct, in_va + iy0 * W * C, in_buf(t), W, iy1 - iy0, CB, C, W * C, n,
                       tok(false, t >= 2, false, true), 1, 1, y0 == 0 ? 1 : 0, y1 == H ? 1 : 0));
    };
    load_tile(0);
    for (uint32_t t = 0; t < tiles; ++t) {
      if (t + 1 < tiles) load_tile(t + 1);
      for (uint32_t cb = 0; cb < CB; ++cb) {
        VecOp v;
        v.mode = hw::VecMode::kDwconv;
        v.bias = true;
        v.src = u16(in_buf(t) + cb * plane);
        v.dst = u16(out_buf(t) + cb);
        v.param = u16(3 * cb);
        v.o = u16(TH);
        v.r = u16(W);
        v.src_so = u16(Wp);
        v.src_sr = 1;
        v.dst_so = u16(W * CB);
        v.dst_sr = u16(CB);
        v.zero_point = zp;
        v.clamp_lo = lo;
        v.clamp_hi = hi;
        v.aux = u16(cb * 9);
        v.kw = 3;
        v.kh = 3;
        v.wys = u16(Wp);
        const bool last = cb + 1 == CB;
        v.tokens = tok(cb == 0, cb == 0 && t >= 2, last && t + 2 < tiles, last);
        p.push_back(encode_vec(v));
      }
      p.push_back(store_linear(out_va + t * TH * W * C, out_buf(t), out_rows, n,
                               tok(true, false, t + 2 < tiles, false)));
    }
    return p;
  };
  return k;
}

// ---------------------------------------------------------------------------------------------
std::vector<std::string> kernel_short_names() { return {"conv", "matmul", "depthwise"}; }

Kernel make_kernel(std::string_view name, uint32_t array_dim, uint64_t seed) {
  if (name == "conv") return make_conv3x3(array_dim, seed);
  if (name == "matmul") return make_matmul(array_dim, seed);
  if (name == "depthwise") return make_depthwise3x3(array_dim, seed);
  throw std::invalid_argument("unknown kernel '" + std::string(name) + "': use conv, matmul or depthwise");
}

namespace {
uint64_t pages(uint64_t bytes) { return (std::max<uint64_t>(bytes, 1) + kPage - 1) / kPage * kPage; }
}  // namespace

uint64_t dram_bytes_needed(const Kernel& kernel) {
  uint64_t bytes = BareMetal::kRingBase + BareMetal::kRingBytes;
  for (const auto& in : kernel.inputs) bytes += pages(in.size());
  bytes += pages(kernel.output_bytes);
  bytes += pages(kernel.emit({0, 0, 0, 0}, 0).size() * hw::kInstructionBytes);
  return bytes;
}

Placement place(const Kernel& kernel, BareMetal& bm) {
  Placement pl;
  for (const auto& in : kernel.inputs) {
    const uint32_t va = bm.allocate(in.size(), /*writable=*/false);
    std::memcpy(bm.view(va, in.size()).data(), in.data(), in.size());
    pl.input_vas.push_back(va);
  }
  pl.output_va = bm.allocate(kernel.output_bytes, /*writable=*/true);
  std::memset(bm.view(pl.output_va, kernel.output_bytes).data(), 0, kernel.output_bytes);
  const std::vector<isa::Words> program = kernel.emit(pl.input_vas, pl.output_va);
  pl.instructions = program.size();
  pl.cmd_bytes = static_cast<uint32_t>(program.size() * hw::kInstructionBytes);
  pl.cmd_va = bm.allocate(pl.cmd_bytes, /*writable=*/false);
  std::memcpy(bm.view(pl.cmd_va, pl.cmd_bytes).data(), program.data(), pl.cmd_bytes);
  return pl;
}

std::span<const int8_t> output_of(BareMetal& bm, const Placement& placement, const Kernel& kernel) {
  auto bytes = bm.view(placement.output_va, kernel.output_bytes);
  return {reinterpret_cast<const int8_t*>(bytes.data()), bytes.size()};
}

int64_t first_difference(std::span<const int8_t> a, std::span<const int8_t> b) {
  if (a.size() != b.size()) return static_cast<int64_t>(std::min(a.size(), b.size()));
  const auto it = std::mismatch(a.begin(), a.end(), b.begin()).first;
  return it == a.end() ? -1 : static_cast<int64_t>(it - a.begin());
}

}  // namespace npu::sim::bench
