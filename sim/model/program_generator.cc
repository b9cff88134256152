#include "npu/sim/program_generator.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <random>
#include <sstream>

namespace npu::sim {
namespace {

constexpr uint32_t kPopPrev = 1u << 8, kPopNext = 1u << 9, kPushPrev = 1u << 10, kPushNext = 1u << 11;

class Generator {
 public:
  Generator(uint64_t seed, uint32_t n, const ProgramMemory& mem) : rng_(seed), n_(n), mem_(mem) {
    act_rows_ = static_cast<uint32_t>(hw::kActSpBytes / n);
    wgt_tiles_ = static_cast<uint32_t>(hw::kWgtSpBytes / (n * n));
    acc_rows_ = static_cast<uint32_t>(hw::kAccSpBytes / (4 * n));
  }

  GeneratedProgram run() {
    GeneratedProgram out;
    const uint32_t length = pick(4, 40);
    // One program in four aims at an error path, placed at a random point.
    const int error_kind = pick(0, 3) == 0 ? static_cast<int>(pick(1, 10)) : 0;
    const uint32_t error_at = pick(0, length - 1);
    for (uint32_t i = 0; i < length; ++i) {
      if (error_kind != 0 && i == error_at) {
        inject_error(error_kind, &out);
        continue;
      }
      switch (pick(0, 5)) {
        case 0: case 1: add(isa::Engine::kLoad, random_load()); break;
        case 2: add(isa::Engine::kCompute, random_gemm()); break;
        case 3: add(isa::Engine::kCompute, random_vec()); break;
        case 4: add(isa::Engine::kStore, random_store()); break;
        default: add(static_cast<isa::Engine>(pick(0, 2)), isa::encode(isa::Sync{})); fix_sync_engine(); break;
      }
    }
    out.instructions = std::move(words_);
    return out;
  }

 private:
  uint32_t pick(uint32_t lo, uint32_t hi) { return std::uniform_int_distribution<uint32_t>(lo, hi)(rng_); }
  bool chance(uint32_t one_in) { return pick(0, one_in - 1) == 0; }

  uint32_t data_addr(uint32_t span) {
    const uint32_t limit = ProgramMemory::kDataBytes > span ? ProgramMemory::kDataBytes - span : 0;
    return mem_.data_va + pick(0, limit);
  }

  isa::Words random_load() {
    isa::Load ld;
    ld.sp = static_cast<hw::Scratchpad>(pick(0, 2));
    ld.wide = ld.sp == hw::Scratchpad::kAct && chance(4);  // ISA 1.4: two ACT rows per step
    ld.row_elems = chance(3) ? pick(1, n_) : 0;
    ld.x = static_cast<uint16_t>(pick(1, 6));
    ld.y = static_cast<uint16_t>(pick(1, 4));
    ld.z = static_cast<uint16_t>(pick(1, 2));
    if (ld.sp == hw::Scratchpad::kAct && chance(2)) {
      ld.pad_l = static_cast<uint8_t>(pick(0, 2));
      ld.pad_r = static_cast<uint8_t>(pick(0, 2));
      ld.pad_t = static_cast<uint8_t>(pick(0, 2));
      ld.pad_b = static_cast<uint8_t>(pick(0, 2));
    }
    const uint32_t esize = ld.sp == hw::Scratchpad::kAcc ? 4 : ld.wide ? 2 : 1;
    ld.x_stride = pick(0, 3 * n_ * esize);
    ld.y_stride = pick(0, 64 * n_);
    ld.z_stride = pick(0, 256 * n_);
    const uint32_t span = (ld.x - 1) * ld.x_stride + (ld.y - 1) * ld.y_stride + (ld.z - 1) * ld.z_stride + n_ * esize;
    ld.va = data_addr(span);
    const uint32_t rows = ld.z * (ld.y + ld.pad_t + ld.pad_b) * (ld.x + ld.pad_l + ld.pad_r) * (ld.wide ? 2 : 1);
    const uint32_t limit = ld.sp == hw::Scratchpad::kAct ? act_rows_ : ld.sp == hw::Scratchpad::kWgt ? wgt_tiles_ * n_ : acc_rows_;
    // Mostly the low rows that the other instructions use; sometimes the top rows of the
    // scratchpad (where the compiler keeps a fused lookup table, beyond the ACC rows).
    ld.sp_base = chance(6) ? limit - rows - pick(0, std::min<uint32_t>(limit - rows, 16))
                           : pick(0, std::min<uint32_t>(limit - rows, 256));
    return isa::encode(ld);
  }

  isa::Words random_store() {
    isa::Store st;
    st.sp = chance(3) ? hw::Scratchpad::kAcc : hw::Scratchpad::kAct;
    st.wide = st.sp == hw::Scratchpad::kAct && chance(4);
    st.row_elems = chance(3) ? pick(1, n_) : 0;
    st.x = static_cast<uint16_t>(pick(1, 6));
    st.y = static_cast<uint16_t>(pick(1, 3));
    const uint32_t esize = st.sp == hw::Scratchpad::kAcc ? 4 : st.wide ? 2 : 1;
    st.x_stride = pick(1, 3) * n_ * esize;  // rows do not overlap: the result is order-independent
    st.y_stride = st.x_stride * st.x;
    st.va = data_addr(st.y_stride * st.y + n_ * esize);
    st.sp_base = pick(0, 200);
    return isa::encode(st);
  }

  isa::Words random_gemm() {
    isa::Gemm g;
    g.clear = chance(2);
    g.wide = chance(4);  // ISA 1.4: int16 activation operands
    g.r = static_cast<uint16_t>(pick(1, 8));
    g.o = static_cast<uint16_t>(pick(1, 2));
    g.i = static_cast<uint16_t>(pick(1, 3));
    g.act = static_cast<uint16_t>(pick(0, 200));
    g.act_sr = static_cast<uint16_t>(pick(0, 2));
    g.act_si = static_cast<uint16_t>(pick(0, 16));
    g.act_so = static_cast<uint16_t>(pick(0, 32));
    g.wgt = static_cast<uint16_t>(pick(0, 8));
    g.wgt_si = static_cast<uint16_t>(pick(0, 2));
    g.wgt_so = static_cast<uint16_t>(pick(0, 4));
    g.acc = static_cast<uint16_t>(pick(0, 100));
    g.acc_sr = static_cast<uint16_t>(pick(0, 2));
    g.acc_si = static_cast<uint16_t>(pick(0, 1));
    g.acc_so = static_cast<uint16_t>(pick(0, 16));
    return isa::encode(g);
  }

  // REQUANT (ACC source) half of the time, else ADD or MUL (ACT sources a at src, b at aux);
  // one in three with the wrap bit (ISA 1.2), whose clamp bounds must be 0. One in seven is
  // a LUT instead, its table at low ACT rows or at the top of ACT (beyond the ACC rows), and
  // one in six of the rest a SOFTMAX (ISA 1.3), and one in four of what remains a window mode
  // (MAXPOOL, AVGPOOL, DWCONV).
  isa::Words random_vec() {
    if (chance(7)) return random_lut();
    if (chance(6)) return random_softmax();
    if (chance(4)) return random_window();
    const uint32_t kind = pick(0, 3);
    const auto mode = kind <= 1 ? hw::VecMode::kRequant : kind == 2 ? hw::VecMode::kAdd : hw::VecMode::kMul;
    isa::VecRequant v;
    v.bias = mode == hw::VecMode::kRequant && chance(2);
    v.wrap = chance(3);
    v.wide_dst = mode == hw::VecMode::kRequant && !v.wrap && chance(4);
    v.src = static_cast<uint16_t>(pick(0, 100));
    v.dst = static_cast<uint16_t>(pick(0, 200));
    v.param = static_cast<uint16_t>(pick(0, 120));
    v.r = static_cast<uint16_t>(pick(1, 8));
    v.o = static_cast<uint16_t>(pick(1, 2));
    v.zero_point = static_cast<int8_t>(pick(0, 255));
    v.src_sr = static_cast<uint16_t>(pick(0, 2));
    v.src_so = static_cast<uint16_t>(pick(0, 16));
    v.dst_sr = static_cast<uint16_t>(pick(0, 2));
    v.dst_so = static_cast<uint16_t>(pick(0, 16));
    v.clamp_lo = v.wrap ? 0 : static_cast<int8_t>(pick(0, 255));
    v.clamp_hi = v.wrap ? 0 : static_cast<int8_t>(pick(0, 255));
    isa::Words w = isa::encode(v);
    if (mode != hw::VecMode::kRequant) {
      w[0] = (w[0] & ~(0xFu << 16)) | (static_cast<uint32_t>(mode) << 16);
      w[6] |= pick(0, 200) << 16;  // aux: the b rows
    }
    return w;
  }

  // One LUT in three reads wide rows through the interpolated table (ISA 1.4), and half of
  // those write wide rows.
  isa::Words random_lut() {
    isa::VecRequant v;
    v.src = static_cast<uint16_t>(pick(0, 100));
    v.dst = static_cast<uint16_t>(pick(0, 200));
    const bool wide_src = chance(3);
    v.wide_dst = wide_src && chance(2);
    const uint32_t table_rows = wide_src ? isa::wide_lut_rows(n_) : 256 / n_;
    v.param = static_cast<uint16_t>(chance(2) ? act_rows_ - table_rows - pick(0, 8) : pick(0, 120));
    random_loop(v, 8);
    isa::Words w = isa::encode(v);
    w[0] = (w[0] & ~(0xFu << 16)) | (static_cast<uint32_t>(hw::VecMode::kLut) << 16) |
           (wide_src ? isa::kVecWideSrcBit : 0u);
    return w;
  }

  // The (o, r) loop of a LUT or window-mode VEC: counts, strides, zero point and clamp.
  void random_loop(isa::VecRequant& v, uint32_t max_r) {
    v.r = static_cast<uint16_t>(pick(1, max_r));
    v.o = static_cast<uint16_t>(pick(1, 2));
    v.zero_point = static_cast<int8_t>(pick(0, 255));
    v.src_sr = static_cast<uint16_t>(pick(0, 2));
    v.src_so = static_cast<uint16_t>(pick(0, 16));
    v.dst_sr = static_cast<uint16_t>(pick(0, 2));
    v.dst_so = static_cast<uint16_t>(pick(0, 16));
    v.clamp_lo = static_cast<int8_t>(pick(0, 255));
    v.clamp_hi = static_cast<int8_t>(pick(0, 255));
  }

  // MAXPOOL, AVGPOOL or DWCONV (bias half of the time). Window rows of 1 to 2W + 3 elements
  // (W = vec_window_elems, ISA 1.3), so that rows narrower than W, exactly W, and several
  // groups with a partial last one all occur; rows between window rows (wys) from 0 (window
  // rows overlap) to past kw. DWCONV's weights at WGT rows aux .. aux + kh·kw − 1.
  isa::Words random_window() {
    const uint32_t kind = pick(0, 2);
    const auto mode = kind == 0 ? hw::VecMode::kMaxpool : kind == 1 ? hw::VecMode::kAvgpool : hw::VecMode::kDwconv;
    const uint32_t win = hw::kVecWindowElems;
    const uint32_t kw = chance(3) ? pick(1, 3) : pick(1, 2 * win + 3), kh = pick(1, 3), wys = pick(0, kw + 4);
    isa::VecRequant v;
    v.bias = mode == hw::VecMode::kDwconv && chance(2);
    // DWCONV over wide rows (ISA 1.4) one time in three, writing wide rows one time in three.
    const bool wide_src = mode == hw::VecMode::kDwconv && chance(3);
    v.wide_dst = mode == hw::VecMode::kDwconv && chance(3);
    v.src = static_cast<uint16_t>(pick(0, 100));
    v.dst = static_cast<uint16_t>(pick(0, 200));
    v.param = mode == hw::VecMode::kMaxpool ? 0 : static_cast<uint16_t>(pick(0, 120));
    random_loop(v, 6);
    isa::Words w = isa::encode(v);
    w[0] = (w[0] & ~(0xFu << 16)) | (static_cast<uint32_t>(mode) << 16) | (wide_src ? isa::kVecWideSrcBit : 0u);
    if (mode == hw::VecMode::kDwconv) w[6] |= pick(0, 4 * n_) << 16;  // aux: the weight rows
    w[7] = kw | (kh << 8) | (wys << 16);
    return w;
  }

  // SOFTMAX over whatever the ACC rows of its table hold (random int32 entries: segment sums
  // of either sign, so both the division and its q = 0 case run, and products that wrap),
  // segments of 1..6 rows with any tail, sometimes in place (dst = src).
  isa::Words random_softmax() {
    isa::VecSoftmax v;
    v.src = static_cast<uint16_t>(pick(0, 100));
    v.dst = chance(4) ? v.src : static_cast<uint16_t>(pick(0, 200));
    v.table = static_cast<uint16_t>(chance(4) ? acc_rows_ - 256 / n_ - pick(0, 8) : pick(0, 120));
    v.r = static_cast<uint16_t>(pick(1, 6));
    v.o = static_cast<uint16_t>(pick(1, 3));
    v.zero_point = static_cast<int8_t>(pick(0, 255));
    v.src_sr = static_cast<uint16_t>(pick(0, 2));
    v.src_so = static_cast<uint16_t>(pick(0, 8));
    v.dst_sr = v.dst == v.src && chance(2) ? v.src_sr : static_cast<uint16_t>(pick(0, 2));
    v.dst_so = v.dst == v.src && chance(2) ? v.src_so : static_cast<uint16_t>(pick(0, 8));
    v.clamp_lo = chance(2) ? -128 : static_cast<int8_t>(pick(0, 255));
    v.clamp_hi = chance(2) ? 127 : static_cast<int8_t>(pick(0, 255));
    v.shift = static_cast<uint8_t>(chance(2) ? pick(40, 63) : pick(0, 63));
    v.tail = static_cast<uint8_t>(pick(0, n_));
    return isa::encode(v);
  }

  // LOAD/STORE wide outside ACT; VEC wide_src outside DWCONV and LUT, wide_dst outside
  // REQUANT, DWCONV and a wide-source LUT, or either with wrap.
  isa::Words illegal_wide() {
    switch (pick(0, 3)) {
      case 0: {
        isa::Load ld;
        ld.sp = chance(2) ? hw::Scratchpad::kWgt : hw::Scratchpad::kAcc;
        ld.wide = true;
        ld.va = mem_.data_va;
        isa::Words w = isa::encode(ld);
        if (chance(2)) w[0] = (w[0] & ~0xFFu) | static_cast<uint32_t>(hw::Opcode::kStore);
        return w;
      }
      case 1: {  // wide_src in REQUANT, ADD, MUL, MAXPOOL or AVGPOOL
        isa::Words w = isa::encode(isa::VecRequant{});
        const uint32_t mode = std::array<uint32_t, 5>{0, 2, 3, 4, 5}[pick(0, 4)];
        w[0] = (w[0] & ~(0xFu << 16)) | (mode << 16) | isa::kVecWideSrcBit;
        if (mode >= 4) w[7] = 1u | (1u << 8);  // a legal 1x1 window
        if (mode == 4) w[2] &= 0xFFFF0000u;     // MAXPOOL has no P
        return w;
      }
      case 2: {  // wide_dst in a LUT with an int8 source
        isa::Words w = isa::encode(isa::VecRequant{});
        w[0] = (w[0] & ~(0xFu << 16)) | (static_cast<uint32_t>(hw::VecMode::kLut) << 16) | isa::kVecWideDstBit;
        return w;
      }
      default: {  // wide_dst with wrap
        isa::VecRequant v;
        v.wrap = true;
        v.clamp_lo = v.clamp_hi = 0;
        v.wide_dst = true;
        return isa::encode(v);
      }
    }
  }

  void fix_sync_engine() {
    isa::Words& w = words_.back();
    w[0] = (w[0] & ~(3u << 16)) | (static_cast<uint32_t>(engines_.back()) << 16);
  }

  // Orders every cross-engine pair through tokens (race-free), relaying LOAD<->STORE
  // through a COMPUTE SYNC; sometimes adds a balanced extra token pair. The programs never
  // write the page table (it lies below every allocation and is not mapped) or the command
  // buffer (read-only), and ProgramMemory's allocations never alias a physical page, so none
  // of the cases architecture.md 1.4 leaves undefined with overlapping engines occurs.
  void add(isa::Engine engine, isa::Words w) {
    if (!words_.empty() && engines_.back() != engine) link(engine, w);
    words_.push_back(w);
    engines_.push_back(engine);
  }

  void link(isa::Engine engine, isa::Words& w) {
    using E = isa::Engine;
    isa::Words& p = words_.back();
    const E prev = engines_.back();
    if (prev == E::kLoad && engine == E::kCompute) { p[0] |= kPushNext; w[0] |= kPopPrev; return; }
    if (prev == E::kCompute && engine == E::kLoad) { p[0] |= kPushPrev; w[0] |= kPopNext; return; }
    if (prev == E::kCompute && engine == E::kStore) { p[0] |= kPushNext; w[0] |= kPopPrev; return; }
    if (prev == E::kStore && engine == E::kCompute) { p[0] |= kPushPrev; w[0] |= kPopNext; return; }
    isa::Words relay = isa::encode(isa::Sync{E::kCompute, {}});
    if (prev == E::kStore) {
      p[0] |= kPushPrev;
      relay[0] |= kPopNext | kPushPrev;
      w[0] |= kPopNext;
    } else {
      p[0] |= kPushNext;
      relay[0] |= kPopPrev | kPushNext;
      w[0] |= kPopPrev;
    }
    words_.push_back(relay);
    engines_.push_back(E::kCompute);
  }

  void inject_error(int kind, GeneratedProgram* out) {
    switch (kind) {
      case 1:  // illegal opcode
        out->expected_error = "ILLEGAL_INSTRUCTION";
        words_.push_back({pick(6, 255), 0, 0, 0, 0, 0, 0, 0});
        break;
      case 2: {  // reserved field set
        out->expected_error = "ILLEGAL_INSTRUCTION";
        isa::Words w = random_gemm();
        w[0] |= 1u << pick(18, 31);  // (bit 17 is GEMM's wide bit, ISA 1.4)
        words_.push_back(w);
        break;
      }
      case 3: {  // scratchpad range
        out->expected_error = "SP_RANGE";
        isa::Gemm g;
        g.acc = static_cast<uint16_t>(acc_rows_ - 1);
        g.r = 2;
        g.acc_sr = 1;
        words_.push_back(isa::encode(g));
        break;
      }
      case 4: {  // page fault: load from the hole, or store to the read-only page
        out->expected_error = "PAGE_FAULT";
        if (chance(2)) {
          isa::Load ld;
          ld.va = mem_.hole_va + pick(0, 60000);
          words_.push_back(isa::encode(ld));
        } else {
          isa::Store st;
          st.va = mem_.readonly_va + pick(0, 60000);
          words_.push_back(isa::encode(st));
        }
        break;
      }
      case 5: {  // token deadlock: pop a channel nobody pushed
        out->expected_error = "TOKEN_DEADLOCK";
        isa::Sync s{isa::Engine::kCompute, {.pop_prev = true}};
        words_.push_back(isa::encode(s));
        break;
      }
      case 6:  // bad ring entry
        out->expected_error = "BAD_RING_ENTRY";
        out->misaligned_exec = true;
        break;
      case 8: {  // wrap where it is illegal: with a clamp bound set, or in a pooling mode
        out->expected_error = "ILLEGAL_INSTRUCTION";
        isa::VecRequant v;
        v.wrap = true;
        v.clamp_lo = v.clamp_hi = 0;
        isa::Words w = isa::encode(v);
        if (chance(2)) {
          w[6] |= pick(1, 0xFFFF);
        } else {
          w[0] = (w[0] & ~(0xFu << 16)) | (static_cast<uint32_t>(hw::VecMode::kAvgpool) << 16);
          w[7] = 1u | (1u << 8);  // a legal 1x1 window
        }
        words_.push_back(w);
        break;
      }
      case 9: {  // SOFTMAX with a field it may not use: tail > N, aux, bias, or w7 bit 6
        out->expected_error = "ILLEGAL_INSTRUCTION";
        isa::Words w = isa::encode(isa::VecSoftmax{});
        switch (pick(0, 3)) {
          case 0: w[7] |= std::min<uint32_t>(pick(n_ + 1, 255), 255) << 8; break;
          case 1: w[6] |= pick(1, 0xFFFF) << 16; break;
          case 2: w[0] |= 1u << 20; break;
          default: w[7] |= 1u << 6; break;
        }
        words_.push_back(w);
        break;
      }
      case 10:  // a wide bit where ISA 1.4 does not allow it
        out->expected_error = "ILLEGAL_INSTRUCTION";
        words_.push_back(illegal_wide());
        break;
      default: {  // token legality: LOAD may not use prev
        out->expected_error = "ILLEGAL_INSTRUCTION";
        isa::Load ld;
        ld.va = mem_.data_va;
        isa::Words w = isa::encode(ld);
        w[0] |= kPushPrev;
        words_.push_back(w);
        break;
      }
    }
    engines_.push_back(isa::Engine::kCompute);
  }

  std::mt19937_64 rng_;
  uint32_t n_;
  ProgramMemory mem_;
  uint32_t act_rows_, wgt_tiles_, acc_rows_;
  std::vector<isa::Words> words_;
  std::vector<isa::Engine> engines_;
};

}  // namespace

ProgramMemory ProgramMemory::create(BareMetal& bm, uint64_t seed) {
  ProgramMemory m;
  m.data_va = bm.allocate(kDataBytes, true);
  m.readonly_va = bm.allocate(65536, false);
  m.hole_va = bm.allocate(65536, true);
  bm.unmap(m.hole_va, 65536);
  m.cmd_va = bm.allocate(kCmdBytes, false);
  std::mt19937_64 rng(seed ^ 0x9E3779B97F4A7C15ull);
  auto data = bm.view(m.data_va, kDataBytes);
  for (size_t i = 0; i < data.size(); i += 8) {
    const uint64_t v = rng();
    std::memcpy(data.data() + i, &v, 8);
  }
  return m;
}

GeneratedProgram generate_program(uint64_t seed, uint32_t array_dim, const ProgramMemory& memory) {
  return Generator(seed, array_dim, memory).run();
}

std::string disassemble(const isa::Words& w) {
  std::ostringstream s;
  static const char* names[] = {"NOP", "LOAD", "STORE", "GEMM", "VEC", "SYNC"};
  const uint32_t op = w[0] & 0xFF;
  s << (op < 6 ? names[op] : "ILLEGAL");
  if (w[0] & kPopPrev) s << " pop_prev";
  if (w[0] & kPopNext) s << " pop_next";
  if (w[0] & kPushPrev) s << " push_prev";
  if (w[0] & kPushNext) s << " push_next";
  s << std::hex;
  for (uint32_t word : w) s << " " << word;
  return s.str();
}

}  // namespace npu::sim
