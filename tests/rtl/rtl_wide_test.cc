// Wide values (ISA 1.4, architecture.md 1.4.3) on the RTL, bit for bit: wide LOAD/STORE rows,
// wide GEMM operands, REQUANT/DWCONV/LUT with wide sources and destinations, their range checks
// and the illegal uses of the new bits. The expected values come from a small scalar reference
// of the spec's formulas here (the functional model learns wide rows separately; once it
// does, rtl_diff_test compares the two on random programs).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "npu/hw/isa.h"
#include "npu/sim/rtl_device.h"
#include "rtl_test_util.h"

namespace npu::rtltest {
namespace {

using sim::StopReason;

std::unique_ptr<sim::Device> make_rtl(const sim::DeviceConfig& c, std::span<std::byte> d) {
  return sim::make_rtl_device(c, d);
}

// --- Scalar reference (architecture.md 1.4, 1.4.3) -----------------------------------------

// rq(t): the rounding shift, 64-bit wrapping.
int64_t rq(int64_t t, int32_t shift) {
  const int s = shift & 63;
  if (s == 0) return t;
  const uint64_t sum = static_cast<uint64_t>(t) + (uint64_t{1} << (s - 1));
  return static_cast<int64_t>(sum) >> s;
}
// int32 wrapping add and multiply-accumulate.
int32_t wrap32(int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); }

int64_t clamp(int64_t t, int64_t lo, int64_t hi) { return t < lo ? lo : (t > hi ? hi : t); }
int64_t lo16(int8_t lo) { return 256 * int64_t{lo}; }
int64_t hi16(int8_t hi) { return 256 * int64_t{hi} + 255; }

// REQUANT of an int32 value v (bias already added): int8, or on the 8.8 grid with wide_dst.
int64_t requant(int32_t v, int32_t mul, int32_t shift, int8_t zp, int8_t lo, int8_t hi,
                bool wide_dst) {
  const int64_t t = rq(static_cast<int64_t>(static_cast<uint64_t>(int64_t{v}) *
                                            static_cast<uint64_t>(int64_t{mul})),
                       shift);
  if (wide_dst) return clamp(t + 256 * int64_t{zp}, lo16(lo), hi16(hi));
  return clamp(t + zp, lo, hi);
}

// The interpolated LUT of a wide source x over the 257-entry table T.
int64_t lut16(int16_t x, const std::vector<int16_t>& T, int8_t lo, int8_t hi, bool wide_dst) {
  const int i = (x >> 8) + 128, f = x & 255;
  const int32_t v = 256 * int32_t{T[i]} + (int32_t{T[i + 1]} - T[i]) * f;
  if (wide_dst) return clamp((v + (1 << 7)) >> 8, lo16(lo), hi16(hi));
  return clamp((v + (1 << 15)) >> 16, lo, hi);
}

int16_t i16_at(const std::vector<uint8_t>& bytes, size_t off) {
  return static_cast<int16_t>(bytes[off] | (bytes[off + 1] << 8));
}

class RtlWide : public ::testing::TestWithParam<uint32_t> {
 protected:
  RtlWide() : b(make_rtl, GetParam()), n(GetParam()) { b.setup_rings(); }

  static constexpr uint32_t kStageIn = kDataVa + 0x100000;
  static constexpr uint32_t kStageOut = kDataVa + 0x800000;

  // One job, which must finish without an error.
  void run(const std::vector<Instr>& prog) {
    ASSERT_EQ(b.run_program(prog, ++seq), StopReason::kIdle);
    ASSERT_EQ(b.dev().read_reg(reg::ERROR_CODE), 0u);
  }
  // One job that must stop with `code` (a fresh device each time: errors halt it).
  void expect_error(const Instr& i, hw::ErrorCode code, uint32_t addr = ~0u) {
    Bench t(make_rtl, n);
    t.setup_rings();
    EXPECT_EQ(t.run_program({i}), StopReason::kInterrupt) << std::hex << i.w[0];
    EXPECT_EQ(t.dev().read_reg(reg::ERROR_CODE), static_cast<uint32_t>(code))
        << std::hex << "w0 " << i.w[0] << " "
        << hw::error_name(static_cast<hw::ErrorCode>(t.dev().read_reg(reg::ERROR_CODE)));
    if (addr != ~0u) {
      EXPECT_EQ(t.dev().read_reg(reg::ERROR_ADDR), addr) << std::hex << i.w[0];
    }
  }

  // Scratchpad contents in and out through narrow LOADs and STOREs (n bytes per row).
  void put(hw::Scratchpad sp, uint32_t row, const void* bytes, size_t size) {
    const uint32_t rb = sp == hw::Scratchpad::kAcc ? 4 * n : n;
    ASSERT_EQ(size % rb, 0u);
    b.write(kStageIn, bytes, size);
    run({load({.sp = sp, .va = kStageIn, .sp_row = row, .x = static_cast<uint32_t>(size / rb),
               .xs = rb})});
  }
  void put_act(uint32_t row, const std::vector<uint8_t>& bytes) {
    put(hw::Scratchpad::kAct, row, bytes.data(), bytes.size());
  }
  std::vector<uint8_t> get_act(uint32_t row, uint32_t rows) {
    run({store({.va = kStageOut, .sp_row = row, .x = rows, .xs = n})});
    std::vector<uint8_t> out(size_t{rows} * n);
    b.read(kStageOut, out.data(), out.size());
    return out;
  }
  std::vector<int32_t> get_acc(uint32_t row, uint32_t rows) {
    run({store({.sp = hw::Scratchpad::kAcc, .va = kStageOut, .sp_row = row, .x = rows,
                .xs = 4 * n})});
    std::vector<int32_t> out(size_t{rows} * n);
    b.read(kStageOut, out.data(), out.size() * 4);
    return out;
  }
  std::vector<uint8_t> random_bytes(size_t size) {
    std::vector<uint8_t> v(size);
    for (auto& x : v) x = static_cast<uint8_t>(rng());
    return v;
  }
  // Per-lane REQUANT/DWCONV parameters in ACC rows p .. p + 2.
  void put_params(uint32_t p, const std::vector<int32_t>& bias, const std::vector<int32_t>& mul,
                  const std::vector<int32_t>& shift) {
    std::vector<int32_t> par(bias);
    par.insert(par.end(), mul.begin(), mul.end());
    par.insert(par.end(), shift.begin(), shift.end());
    put(hw::Scratchpad::kAcc, p, par.data(), par.size() * 4);
  }

  Bench b;
  uint32_t n;
  uint32_t seq = 0;
  std::mt19937 rng{14};
};

Instr wide(Instr i, uint32_t bits) {
  i.w[0] |= bits;
  return i;
}
Instr vec_mode(hw::VecMode mode, const VecArgs& a, uint32_t aux = 0, uint32_t window = 0) {
  Instr i = vec(a);
  i.w[0] |= static_cast<uint32_t>(mode) << 16;
  i.w[6] |= aux << 16;
  i.w[7] = window;
  return i;
}

// A wide LOAD writes two rows per (z, y, x), zero padding pairs and zero-fills a pair past
// 2·row_elems bytes; a wide STORE writes 2·row_elems bytes of each pair.
TEST_P(RtlWide, LoadStoreRows) {
  const uint32_t X = 3, Y = 2, re = n - 3, xs = 2 * n + 6, ys = 200, base = 100;
  const uint32_t Xp = X + 1, Yp = Y + 1;              // pad left 1, top 1
  const uint32_t pairs = Xp * Yp;
  put_act(base, std::vector<uint8_t>((2 * pairs + 2) * n, 0xEE));
  const std::vector<uint8_t> src = random_bytes(1024);
  b.write(kDataVa, src.data(), src.size());
  const uint64_t rd0 = b.counter(hw::Counter::kDmaRdBytes);
  run({wide(load({.va = kDataVa, .sp_row = base, .x = X, .y = Y, .xs = xs, .ys = ys, .pad_l = 1,
                  .pad_t = 1, .row_elems = re}),
            isa::kDmaWideBit)});
  EXPECT_EQ(b.counter(hw::Counter::kDmaRdBytes) - rd0, uint64_t{X} * Y * 2 * re);

  std::vector<uint8_t> want(size_t{2 * pairs + 2} * n, 0xEE);
  for (uint32_t y = 0; y < Yp; ++y) {
    for (uint32_t x = 0; x < Xp; ++x) {
      uint8_t* pair = &want[size_t{2 * (y * Xp + x)} * n];
      std::fill(pair, pair + 2 * n, 0);
      if (y == 0 || x == 0) continue;
      std::memcpy(pair, &src[(y - 1) * ys + (x - 1) * xs], 2 * re);
    }
  }
  EXPECT_EQ(get_act(base, 2 * pairs + 2), want);

  // Back to DRAM with misaligned rows (odd stride) over a pre-filled buffer.
  const uint32_t dst = kDataVa + 0x4000, dxs = 2 * re + 1, dys = Xp * dxs + 5;
  std::vector<uint8_t> dram(4096, 0x55);
  b.write(dst, dram.data(), dram.size());
  const uint64_t wr0 = b.counter(hw::Counter::kDmaWrBytes);
  run({wide(store({.va = dst, .sp_row = base, .x = Xp, .y = Yp, .xs = dxs, .ys = dys,
                   .row_elems = re}),
            isa::kDmaWideBit)});
  EXPECT_EQ(b.counter(hw::Counter::kDmaWrBytes) - wr0, uint64_t{pairs} * 2 * re);
  for (uint32_t y = 0; y < Yp; ++y)
    for (uint32_t x = 0; x < Xp; ++x)
      std::memcpy(&dram[y * dys + x * dxs], &want[size_t{2 * (y * Xp + x)} * n], 2 * re);
  std::vector<uint8_t> got(dram.size());
  b.read(dst, got.data(), got.size());
  EXPECT_EQ(got, dram);
}

// GEMM with wide activation operands: p[n] = Σ_k a16[k]·W[k][n], accumulated over I blocks.
TEST_P(RtlWide, Gemm) {
  const uint32_t R = 3, I = 2, act = 1, asr = 2, asi = 2 * R + 1, acc = 40;
  const uint32_t act_rows = act + (I - 1) * asi + (R - 1) * asr + 2;
  std::vector<uint8_t> a = random_bytes(size_t{act_rows} * n);
  // Extremes of int16 in the first operand row.
  a[act * n + 0] = 0x00, a[act * n + 1] = 0x80;  // -32768
  a[act * n + 2] = 0xFF, a[act * n + 3] = 0x7F;  // 32767
  put_act(0, a);
  std::vector<uint8_t> w = random_bytes(size_t{I} * n * n);
  w[0] = 0x80;                                   // -128 against -32768
  put(hw::Scratchpad::kWgt, 0, w.data(), w.size());
  run({wide(gemm({.act = act, .wgt = 0, .acc = acc, .r = R, .i = I, .asi = asi, .asr = asr,
                  .csr = 1, .wsi = 1, .clear = true}),
            isa::kGemmWideBit)});
  std::vector<int32_t> want(size_t{R} * n, 0);
  for (uint32_t i = 0; i < I; ++i)
    for (uint32_t r = 0; r < R; ++r)
      for (uint32_t c = 0; c < n; ++c) {
        int64_t s = want[r * n + c];
        for (uint32_t k = 0; k < n; ++k)
          s += int64_t{i16_at(a, size_t{act + i * asi + r * asr} * n + 2 * k)} *
               static_cast<int8_t>(w[(i * n + k) * n + c]);
        want[r * n + c] = wrap32(s);
      }
  EXPECT_EQ(get_acc(acc, R), want);
}

// REQUANT with wide_dst: u = rq(t) + 256·zp clamped to [256·low, 256·high + 255].
TEST_P(RtlWide, RequantWideDst) {
  const uint32_t R = 4, O = 2, src = 10, P = 60, dst = 301, dsr = 2, dso = 2 * R + 3;
  std::vector<int32_t> x(size_t{O} * R * n), bias(n), mul(n), shift(n);
  for (auto& v : x) v = static_cast<int32_t>(rng() % 200001) - 100000;
  x[0] = INT32_MAX;  // + bias wraps
  for (uint32_t c = 0; c < n; ++c) {
    bias[c] = static_cast<int32_t>(rng() % 2001) - 1000;
    mul[c] = static_cast<int32_t>(rng() % (1u << 10)) + 1;
    shift[c] = static_cast<int32_t>(10 + rng() % 5) | (c == 1 ? 64 : 0);  // & 63
  }
  bias[0] = 7;
  put(hw::Scratchpad::kAcc, src, x.data(), x.size() * 4);
  put_params(P, bias, mul, shift);
  for (const int8_t zp : {int8_t{-3}, int8_t{0}}) {
    const int8_t lo = zp == 0 ? int8_t{0} : int8_t{-100}, hi = 90;  // zp 0: ReLU
    put_act(dst - 1, std::vector<uint8_t>(size_t{O} * dso * n + 2 * n, 0xEE));
    run({wide(vec({.src = src, .dst = dst, .param = P, .r = R, .o = O, .zp = zp, .lo = lo,
                   .hi = hi, .sso = R, .ssr = 1, .dso = dso, .dsr = dsr, .bias = true}),
              isa::kVecWideDstBit)});
    std::vector<uint8_t> got = get_act(dst - 1, O * dso + 2);
    std::vector<uint8_t> want(got.size(), 0xEE);
    bool low = false, high = false;
    for (uint32_t o = 0; o < O; ++o)
      for (uint32_t r = 0; r < R; ++r)
        for (uint32_t c = 0; c < n; ++c) {
          const int32_t v = wrap32(int64_t{x[(o * R + r) * n + c]} + bias[c]);
          const int64_t u = requant(v, mul[c], shift[c], zp, lo, hi, true);
          low |= u == lo16(lo);
          high |= u == hi16(hi);
          const size_t off = size_t{1 + o * dso + r * dsr} * n + 2 * c;
          want[off] = static_cast<uint8_t>(u);
          want[off + 1] = static_cast<uint8_t>(u >> 8);
        }
    EXPECT_TRUE(low && high) << "the data should reach both clamps";
    EXPECT_EQ(got, want) << "zp " << int{zp};
  }
}

// LUT with a wide source: the interpolated 257-entry table, to int8 or (wide_dst) to int16,
// including the last interval (x near 32767) and x = -32768. The table is read before any
// result is written (dst = P overwrites it).
TEST_P(RtlWide, LutWideSrc) {
  const uint32_t trows = isa::wide_lut_rows(n), P = 2000, src = 501, R = 5, O = 2;
  std::vector<int16_t> T(257);
  for (auto& t : T) t = static_cast<int16_t>(rng());
  T[0] = -32768, T[1] = 32767, T[255] = -32768, T[256] = 32767, T[128] = 0, T[129] = 5;
  std::vector<uint8_t> table(size_t{trows} * n, 0);
  std::memcpy(table.data(), T.data(), 514);
  std::vector<uint8_t> xs = random_bytes(size_t{src + 2 * R * O + 1} * n);
  const int16_t special[] = {32767, 32766, 32512, 32513, -32768, -32767, -32513, -1, 0, 1,
                             255, 256, -256, -255, 127, 128};
  for (size_t k = 0; k < std::size(special); ++k) {
    xs[src * n + 2 * k] = static_cast<uint8_t>(special[k]);
    xs[src * n + 2 * k + 1] = static_cast<uint8_t>(special[k] >> 8);
  }
  put_act(0, xs);
  struct Case {
    bool wide_dst;
    int8_t lo, hi;
    uint32_t dst;
  };
  for (const Case& cs : {Case{false, -128, 127, 3000}, Case{false, -50, 60, 3000},
                         Case{true, -128, 127, 3000}, Case{true, -100, 90, 3000},
                         Case{true, -128, 127, P}}) {
    SCOPED_TRACE(testing::Message() << "wide_dst " << cs.wide_dst << " lo " << int{cs.lo}
                                    << " hi " << int{cs.hi} << " dst " << cs.dst);
    put_act(P, table);
    const uint32_t dw = cs.wide_dst ? 2 : 1, dsr = dw + 1, dso = R * dsr;
    const uint32_t out_rows = O * dso;
    if (cs.dst != P) put_act(cs.dst, std::vector<uint8_t>(size_t{out_rows} * n, 0xEE));
    std::vector<uint8_t> want = get_act(cs.dst, out_rows);
    run({wide(vec_mode(hw::VecMode::kLut, {.src = src, .dst = cs.dst, .param = P, .r = R,
                                           .o = O, .lo = cs.lo, .hi = cs.hi, .sso = 2 * R,
                                           .ssr = 2, .dso = dso, .dsr = dsr}),
              isa::kVecWideSrcBit | (cs.wide_dst ? isa::kVecWideDstBit : 0u))});
    for (uint32_t o = 0; o < O; ++o)
      for (uint32_t r = 0; r < R; ++r)
        for (uint32_t c = 0; c < n; ++c) {
          const int16_t x = i16_at(xs, size_t{src + o * 2 * R + 2 * r} * n + 2 * c);
          const int64_t u = lut16(x, T, cs.lo, cs.hi, cs.wide_dst);
          const size_t off = size_t{o * dso + r * dsr} * n + dw * c;
          want[off] = static_cast<uint8_t>(u);
          if (cs.wide_dst) want[off + 1] = static_cast<uint8_t>(u >> 8);
        }
    EXPECT_EQ(get_act(cs.dst, out_rows), want);
  }
}

// DWCONV with a wide source (window element (ky, kx) is the wide row at
// src + o·sso + r·ssr + ky·wys + 2·kx), to int8 and to a wide destination, with windows
// narrower than, as wide as and wider than the W wide elements read per cycle.
TEST_P(RtlWide, DwconvWideSrc) {
  const uint32_t win16 = hw::kVecWindowElems;
  const uint32_t R = 3, O = 2, kh = 2, src = 3, P = 80, aux = 40, dst = 4000;
  std::vector<int32_t> bias(n), mul(n), shift(n);
  for (uint32_t c = 0; c < n; ++c) {
    bias[c] = static_cast<int32_t>(rng() % 200001) - 100000;
    mul[c] = static_cast<int32_t>(rng() % (1u << 12)) + 1;
    shift[c] = static_cast<int32_t>(18 + rng() % 6);
  }
  put_params(P, bias, mul, shift);
  for (const uint32_t kw : {2u, win16, win16 + 3}) {
    for (const bool wide_dst : {false, true}) {
      SCOPED_TRACE(testing::Message() << "kw " << kw << " wide_dst " << wide_dst);
      const uint32_t wys = 2 * kw + 1, ssr = 2, sso = R * ssr + kh * wys;
      const uint32_t src_rows = src + (O - 1) * sso + (R - 1) * ssr + (kh - 1) * wys +
                                2 * (kw - 1) + 2;
      std::vector<uint8_t> xs = random_bytes(size_t{src_rows} * n);
      xs[src * n] = 0x00, xs[src * n + 1] = 0x80;  // -32768
      put_act(0, xs);
      std::vector<uint8_t> w = random_bytes(size_t{kh} * kw * n);
      put(hw::Scratchpad::kWgt, aux, w.data(), w.size());
      const uint32_t dw = wide_dst ? 2 : 1, dsr = dw, dso = R * dsr + 1;
      const int8_t zp = 2, lo = -100, hi = 100;
      put_act(dst, std::vector<uint8_t>(size_t{O} * dso * n, 0xEE));
      run({wide(vec_mode(hw::VecMode::kDwconv,
                         {.src = src, .dst = dst, .param = P, .r = R, .o = O, .zp = zp,
                          .lo = lo, .hi = hi, .sso = sso, .ssr = ssr, .dso = dso, .dsr = dsr,
                          .bias = true},
                         aux, kw | (kh << 8) | (wys << 16)),
                isa::kVecWideSrcBit | (wide_dst ? isa::kVecWideDstBit : 0u))});
      std::vector<uint8_t> want(size_t{O} * dso * n, 0xEE);
      for (uint32_t o = 0; o < O; ++o)
        for (uint32_t r = 0; r < R; ++r)
          for (uint32_t c = 0; c < n; ++c) {
            int64_t t = bias[c];
            for (uint32_t ky = 0; ky < kh; ++ky)
              for (uint32_t kx = 0; kx < kw; ++kx) {
                const uint32_t row = src + o * sso + r * ssr + ky * wys + 2 * kx;
                t += int64_t{i16_at(xs, size_t{row} * n + 2 * c)} *
                     static_cast<int8_t>(w[(ky * kw + kx) * n + c]);
              }
            const int64_t u = requant(wrap32(t), mul[c], shift[c], zp, lo, hi, wide_dst);
            const size_t off = size_t{o * dso + r * dsr} * n + dw * c;
            want[off] = static_cast<uint8_t>(u);
            if (wide_dst) want[off + 1] = static_cast<uint8_t>(u >> 8);
          }
      EXPECT_EQ(get_act(dst, O * dso), want);
    }
  }
}

// The new bits are ILLEGAL_INSTRUCTION wherever 1.4.3 does not allow them.
TEST_P(RtlWide, IllegalWideBits) {
  using isa::kDmaWideBit, isa::kGemmWideBit, isa::kVecWideSrcBit,
      isa::kVecWideDstBit;
  const auto vm = [](hw::VecMode m, uint32_t bits, uint32_t window = 0, bool wrap = false) {
    Instr i = vec_mode(m, {.param = m == hw::VecMode::kMaxpool ? 0u : 4u,
                           .lo = wrap ? int8_t{0} : int8_t{-128},
                           .hi = wrap ? int8_t{0} : int8_t{127}, .wrap = wrap},
                       0, window);
    i.w[0] |= bits;
    return i;
  };
  std::vector<Instr> bads = {
      wide(load({.sp = hw::Scratchpad::kWgt}), kDmaWideBit),
      wide(load({.sp = hw::Scratchpad::kAcc}), kDmaWideBit),
      wide(store({.sp = hw::Scratchpad::kWgt}), kDmaWideBit),
      wide(store({.sp = hw::Scratchpad::kAcc}), kDmaWideBit),
      wide(load({}), 1u << 19),
      wide(gemm({}), 1u << 18),
      vm(hw::VecMode::kRequant, kVecWideSrcBit),
      vm(hw::VecMode::kRequant, kVecWideDstBit, 0, true),   // with wrap
      vm(hw::VecMode::kLut, kVecWideDstBit),                // wide_dst without wide_src
      vm(hw::VecMode::kAdd, kVecWideSrcBit),
      vm(hw::VecMode::kAdd, kVecWideDstBit),
      vm(hw::VecMode::kMul, kVecWideSrcBit),
      vm(hw::VecMode::kMul, kVecWideDstBit),
      vm(hw::VecMode::kMaxpool, kVecWideSrcBit, 0x0101),
      vm(hw::VecMode::kMaxpool, kVecWideDstBit, 0x0101),
      vm(hw::VecMode::kAvgpool, kVecWideSrcBit, 0x0101),
      vm(hw::VecMode::kAvgpool, kVecWideDstBit, 0x0101),
      vm(hw::VecMode::kSoftmax, kVecWideSrcBit),
      vm(hw::VecMode::kSoftmax, kVecWideDstBit),
      vm(hw::VecMode::kRequant, 1u << 24),
  };
  for (const Instr& i : bads) expect_error(i, hw::ErrorCode::kIllegalInstruction);
  // Their legal relatives run.
  std::vector<uint8_t> table(size_t{isa::wide_lut_rows(n)} * n, 0);
  put_act(4, table);
  run({wide(load({.va = kDataVa}), kDmaWideBit), wide(store({.va = kDataVa + 0x1000}), kDmaWideBit),
       wide(gemm({}), kGemmWideBit), vm(hw::VecMode::kRequant, kVecWideDstBit),
       vm(hw::VecMode::kLut, kVecWideSrcBit), vm(hw::VecMode::kLut, kVecWideSrcBit | kVecWideDstBit),
       vm(hw::VecMode::kDwconv, kVecWideSrcBit, 0x0101),
       vm(hw::VecMode::kDwconv, kVecWideDstBit, 0x0101),
       vm(hw::VecMode::kDwconv, kVecWideSrcBit | kVecWideDstBit, 0x0101)});
}

// Ranges cover both rows of every wide row: SP_RANGE names the second row.
TEST_P(RtlWide, RangeChecksCoverBothRows) {
  const uint32_t rows = hw::kActSpBytes / n, trows = isa::wide_lut_rows(n);
  using isa::kDmaWideBit, isa::kGemmWideBit, isa::kVecWideSrcBit,
      isa::kVecWideDstBit;
  const auto sp_range = [&](const Instr& i, uint32_t addr) {
    expect_error(i, hw::ErrorCode::kSpRange, addr);
  };
  sp_range(wide(load({.sp_row = rows - 1}), kDmaWideBit), rows);
  sp_range(wide(load({.sp_row = rows - 4, .x = 2, .pad_l = 1}), kDmaWideBit), rows + 1);
  sp_range(wide(store({.sp_row = rows - 1}), kDmaWideBit), rows);
  sp_range(wide(gemm({.act = rows - 1}), kGemmWideBit), rows);
  sp_range(wide(vec({.dst = rows - 1, .param = 4}), kVecWideDstBit), rows);
  Instr lut = vec_mode(hw::VecMode::kLut, {.src = rows - 1, .param = 4});
  sp_range(wide(lut, kVecWideSrcBit), rows);
  lut = vec_mode(hw::VecMode::kLut, {.src = 0, .param = rows - trows + 1});
  sp_range(wide(lut, kVecWideSrcBit), rows);
  // DWCONV: src + (kh-1)·wys + 2·(kw-1) + 1 = rows.
  Instr dw = vec_mode(hw::VecMode::kDwconv, {.src = rows - 1 - 3 - 2 * 2, .param = 4}, 0,
                      3 | (2u << 8) | (3u << 16));
  sp_range(wide(dw, kVecWideSrcBit), rows);
  // ... and in range one row lower.
  Bench t(make_rtl, n);
  t.setup_rings();
  dw.w[1] -= 1;
  lut = vec_mode(hw::VecMode::kLut, {.src = 0, .param = rows - trows});
  EXPECT_EQ(t.run_program({wide(load({.sp_row = rows - 2}), kDmaWideBit),
                           wide(gemm({.act = rows - 2}), kGemmWideBit), wide(dw, kVecWideSrcBit),
                           wide(lut, kVecWideSrcBit)}),
            StopReason::kIdle);
  EXPECT_EQ(t.dev().read_reg(reg::ERROR_CODE), 0u);
}

INSTANTIATE_TEST_SUITE_P(Dims, RtlWide, ::testing::ValuesIn(sim::rtl_supported_array_dims()),
                         // (std::string("N") +: GCC 12 at -O3 reports a bogus -Wrestrict for "N" + string)
                         [](const auto& param_info) { return std::string("N") + std::to_string(param_info.param); });

}  // namespace
}  // namespace npu::rtltest
