// npu-compile's pipeline: ONNX -> IR -> NPU layers -> calibration -> int8 quantisation ->
// command stream -> cycle prediction on the functional model -> verified model image.
#include "npu/compiler/compiler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>

#include "ir.h"
#include "npu/compiler/image.h"
#include "npu/sim/bare_metal.h"
#include "program.h"
#include "quantize.h"

namespace npu::compiler {
namespace {

constexpr uint64_t kAlign = 64;
uint64_t align_up(uint64_t v, uint64_t a = kAlign) { return (v + a - 1) / a * a; }
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A fully connected layer: y = act(x · W + b), the NPU's Gemm/MatMul form.
struct FcLayer {
  std::string name;
  std::string op;
  int input = -1;   // value index of x
  int output = -1;  // value index of y (after fused ops)
  int64_t M = 0, K = 0, N = 0;
  std::vector<float> weights;  // [K][N]
  std::vector<float> bias;     // [N]
  bool relu = false;
  std::vector<std::string> fused;  // names of nodes folded into this layer
};

std::vector<int> consumers(const Graph& g, int value) {
  std::vector<int> out;
  for (size_t n = 0; n < g.nodes.size(); ++n)
    for (int in : g.nodes[n].inputs)
      if (in == value) out.push_back(static_cast<int>(n));
  return out;
}

bool is_graph_output(const Graph& g, int value) {
  return std::find(g.outputs.begin(), g.outputs.end(), value) != g.outputs.end();
}

// Groups the graph into FC layers: Gemm/MatMul, then an optional constant Add (bias), then
// an optional Relu. Anything else is named in the error.
Result<std::vector<FcLayer>> extract_layers(const Graph& g) {
  std::vector<FcLayer> layers;
  std::set<size_t> used;
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    if (used.count(ni)) continue;
    const Node& n = g.nodes[ni];
    if (n.op != "Gemm" && n.op != "MatMul")
      return make_error(StatusCode::kUnsupported,
                        "operator " + n.op + " (node '" + n.name +
                            "') is not supported yet by this compiler: the NPU path takes Gemm/MatMul with bias and Relu");
    FcLayer L;
    L.name = n.name;
    L.op = n.op;
    L.input = n.inputs[0];
    const Value& x = g.value(L.input);
    if (n.inputs.size() < 2 || !g.is_constant(n.inputs[1]))
      return make_error(StatusCode::kUnsupported, n.label() + ": the weight operand B must be a constant initializer");
    const Tensor B = to_float(*g.value(n.inputs[1]).constant);
    if (B.shape.size() != 2) return make_error(StatusCode::kUnsupported, n.label() + ": B must be 2-D");
    if (x.shape.empty()) return make_error(StatusCode::kInvalidArgument, n.label() + ": input has no static shape");
    const bool tb = n.op == "Gemm" && n.attr_int("transB", 0) != 0;
    if (n.op == "Gemm" && n.attr_int("transA", 0) != 0)
      return make_error(StatusCode::kUnsupported, n.label() + ": transA=1 is not supported yet");
    const float alpha = n.op == "Gemm" ? n.attr_float("alpha", 1.0f) : 1.0f;
    L.K = tb ? B.shape[1] : B.shape[0];
    L.N = tb ? B.shape[0] : B.shape[1];
    if (x.shape.back() != L.K)
      return make_error(StatusCode::kInvalidArgument, n.label() + ": input " + shape_to_string(x.shape) +
                                                          " does not match weights " + shape_to_string(B.shape));
    L.M = 1;
    for (size_t d = 0; d + 1 < x.shape.size(); ++d) L.M *= x.shape[d];
    L.weights.resize(static_cast<size_t>(L.K * L.N));
    auto b = B.as<float>();
    for (int64_t k = 0; k < L.K; ++k)
      for (int64_t j = 0; j < L.N; ++j)
        L.weights[static_cast<size_t>(k * L.N + j)] = alpha * b[static_cast<size_t>(tb ? j * L.K + k : k * L.N + j)];
    L.bias.assign(static_cast<size_t>(L.N), 0.0f);
    if (n.op == "Gemm" && n.inputs.size() > 2 && n.inputs[2] >= 0) {
      if (!g.is_constant(n.inputs[2]))
        return make_error(StatusCode::kUnsupported, n.label() + ": bias C must be a constant");
      const Tensor C = to_float(*g.value(n.inputs[2]).constant);
      const float beta = n.attr_float("beta", 1.0f);
      if (C.element_count() == 1) {
        for (auto& v : L.bias) v = beta * C.as<float>()[0];
      } else if (C.element_count() == L.N) {
        for (int64_t j = 0; j < L.N; ++j) L.bias[static_cast<size_t>(j)] = beta * C.as<float>()[static_cast<size_t>(j)];
      } else {
        return make_error(StatusCode::kUnsupported, n.label() + ": bias must be per output channel");
      }
    }
    int out = n.outputs[0];
    // Fuse a following constant Add (bias) and Relu when this layer's output has no other use.
    auto fuse_next = [&](const std::string& op) -> const Node* {
      if (is_graph_output(g, out)) return nullptr;
      auto c = consumers(g, out);
      if (c.size() != 1) return nullptr;
      const Node& next = g.nodes[static_cast<size_t>(c[0])];
      if (next.op != op) return nullptr;
      used.insert(static_cast<size_t>(c[0]));
      return &next;
    };
    if (const Node* add = fuse_next("Add")) {
      const int other = add->inputs[0] == out ? add->inputs[1] : add->inputs[0];
      const Tensor c = g.is_constant(other) ? to_float(*g.value(other).constant) : Tensor{};
      if (!g.is_constant(other) || (c.element_count() != L.N && c.element_count() != 1))
        return make_error(StatusCode::kUnsupported,
                          "Add node '" + add->name + "' after " + n.label() + " is not a per-channel constant bias");
      for (int64_t j = 0; j < L.N; ++j)
        L.bias[static_cast<size_t>(j)] += c.as<float>()[static_cast<size_t>(c.element_count() == 1 ? 0 : j)];
      L.fused.push_back(add->name);
      out = add->outputs[0];
    }
    if (const Node* relu = fuse_next("Relu")) {
      L.relu = true;
      L.fused.push_back(relu->name);
      out = relu->outputs[0];
    }
    L.output = out;
    layers.push_back(std::move(L));
  }
  // Each layer must read a graph input or an earlier layer's output.
  std::set<int> available(g.inputs.begin(), g.inputs.end());
  for (const FcLayer& L : layers) {
    if (!available.count(L.input))
      return make_error(StatusCode::kUnsupported, "layer '" + L.name + "' reads '" + g.value(L.input).name +
                                                      "', which is not produced on the NPU path");
    available.insert(L.output);
  }
  for (int o : g.outputs)
    if (!available.count(o))
      return make_error(StatusCode::kUnsupported, "graph output '" + g.value(o).name + "' is not produced on the NPU path");
  return layers;
}

std::vector<std::vector<Tensor>> random_samples(const Graph& g, size_t count) {
  std::mt19937 rng(1234);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<std::vector<Tensor>> samples(count);
  for (auto& sample : samples)
    for (int in : g.inputs) {
      Tensor t = Tensor::zeros(DType::kF32, g.value(in).shape);
      for (auto& v : t.as<float>()) v = dist(rng);
      sample.push_back(std::move(t));
    }
  return samples;
}

struct Layout {
  std::map<int, uint64_t> offset;  // value -> byte offset in the activation buffer
  uint64_t bytes = 0;
};

void put_u32(std::vector<uint8_t>& blob, uint64_t at, uint32_t v) { std::memcpy(blob.data() + at, &v, 4); }

}  // namespace

Result<std::vector<std::vector<Tensor>>> read_calibration_dir(const std::string& dir, size_t num_inputs) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return make_error(StatusCode::kNotFound, "--calib " + dir + ": not a directory");
  std::vector<fs::path> subdirs;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory()) subdirs.push_back(e.path());
  std::sort(subdirs.begin(), subdirs.end());
  if (subdirs.empty())
    return make_error(StatusCode::kInvalidArgument,
                      "--calib " + dir + ": no sample folders; expected one subfolder per sample holding input_<k>.npy");
  std::vector<std::vector<Tensor>> samples;
  for (const auto& sd : subdirs) {
    std::vector<Tensor> sample;
    for (size_t k = 0; k < num_inputs; ++k) {
      NPU_ASSIGN_OR_RETURN(Tensor t, read_npy((sd / ("input_" + std::to_string(k) + ".npy")).string()));
      sample.push_back(to_float(t));
    }
    samples.push_back(std::move(sample));
  }
  return samples;
}

Result<std::vector<uint8_t>> compile_onnx_file(const std::string& onnx_path, const CompileOptions& options) {
  auto say = [&](const std::string& s) {
    if (options.progress) options.progress(s);
  };
  const uint32_t N = options.array_dim;
  if (std::find(hw::kSupportedArrayDims.begin(), hw::kSupportedArrayDims.end(), N) == hw::kSupportedArrayDims.end())
    return make_error(StatusCode::kInvalidArgument, "array dim " + std::to_string(N) + " is not one of 8, 16, 32");
  say("loading " + onnx_path);
  NPU_ASSIGN_OR_RETURN(Graph g, load_onnx(onnx_path, options.input_shapes));
  NPU_ASSIGN_OR_RETURN(std::vector<FcLayer> layers, extract_layers(g));
  say("graph: " + std::to_string(g.nodes.size()) + " nodes -> " + std::to_string(layers.size()) + " NPU layer(s), 0 host operators");

  // Calibration.
  std::vector<std::vector<Tensor>> samples = options.calibration;
  if (samples.empty() && !options.calibration_dir.empty()) {
    NPU_ASSIGN_OR_RETURN(samples, read_calibration_dir(options.calibration_dir, g.inputs.size()));
  }
  if (samples.empty()) {
    samples = random_samples(g, 8);
    say("warning: no calibration data; calibrating on 8 deterministic N(0,1) samples. Pass --calib DIR for accuracy on real data");
  }
  std::map<int, std::pair<float, float>> ranges;
  for (size_t s = 0; s < samples.size(); ++s) {
    for (size_t i = 0; i < g.inputs.size(); ++i)
      if (samples[s].size() != g.inputs.size() || samples[s][i].shape != g.value(g.inputs[i]).shape)
        return make_error(StatusCode::kInvalidArgument,
                          "calibration sample " + std::to_string(s) + ": input " + std::to_string(i) + " ('" +
                              g.value(g.inputs[i]).name + "') must have shape " +
                              shape_to_string(g.value(g.inputs[i]).shape));
    NPU_ASSIGN_OR_RETURN(auto env, run_reference(g, samples[s]));
    for (size_t v = 0; v < env.size(); ++v) {
      if (env[v].data.empty() || env[v].dtype != DType::kF32) continue;
      auto vals = env[v].as<float>();
      auto [mn, mx] = std::minmax_element(vals.begin(), vals.end());
      auto it = ranges.find(static_cast<int>(v));
      if (it == ranges.end()) ranges[static_cast<int>(v)] = {*mn, *mx};
      else it->second = {std::min(it->second.first, *mn), std::max(it->second.second, *mx)};
    }
  }
  say("calibrated on " + std::to_string(samples.size()) + " sample(s)");
  std::map<int, QParams> qp;
  for (int in : g.inputs) qp[in] = activation_qparams(ranges[in].first, ranges[in].second);
  for (const FcLayer& L : layers) qp[L.output] = activation_qparams(ranges[L.output].first, ranges[L.output].second);

  // Activation buffer: every graph input and layer output, dense int8 row-major.
  Layout act;
  auto place = [&](int v, uint64_t bytes) {
    if (act.offset.count(v)) return;
    act.offset[v] = act.bytes;
    act.bytes = align_up(act.bytes + bytes);
  };
  for (int in : g.inputs) place(in, static_cast<uint64_t>(Tensor::zeros(DType::kI8, g.value(in).shape).element_count()));
  for (const FcLayer& L : layers) place(L.output, static_cast<uint64_t>(L.M * L.N));

  // Weights, per layer: N×N tiles (nb-major, then kb), then 3 param rows per output block.
  std::vector<uint8_t> weights;
  Program prog;
  std::vector<uint32_t> layer_end;  // instruction count after each layer
  std::vector<std::pair<uint64_t, uint64_t>> layer_macs_sp;
  const uint32_t act_rows = static_cast<uint32_t>(hw::kActSpBytes / N);
  const uint32_t acc_rows = static_cast<uint32_t>(hw::kAccSpBytes / (4 * N));
  const uint32_t wgt_tiles = static_cast<uint32_t>(hw::kWgtSpBytes / (N * N));
  for (const FcLayer& L : layers) {
    const int64_t KB = ceil_div(L.K, N), NB = ceil_div(L.N, N);
    const QParams qx = qp[L.input], qy = qp[L.output];
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
    const uint32_t in_off = static_cast<uint32_t>(act.offset[L.input]);
    const uint32_t out_off = static_cast<uint32_t>(act.offset[L.output]);
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
    layer_end.push_back(prog.size());
    layer_macs_sp.push_back({static_cast<uint64_t>(ceil_div(L.M, 1) * KB * NB) * N * N,
                             static_cast<uint64_t>(Mt * (KB + 1)) * N + static_cast<uint64_t>(Mt + 3 * NB) * N * 4 +
                                 static_cast<uint64_t>(weights_fit ? KB * NB : KB) * tile_bytes});
  }
  if (weights.empty()) weights.resize(kAlign, 0);

  // Serialise the command stream.
  std::vector<uint8_t> commands(static_cast<size_t>(prog.size()) * hw::kInstructionBytes);
  for (uint32_t i = 0; i < prog.size(); ++i)
    std::memcpy(commands.data() + static_cast<size_t>(i) * hw::kInstructionBytes, prog.words()[i].data(), hw::kInstructionBytes);

  // Predict cycles: run the stream on the functional model with zero data.
  say("predicting cycles on the functional model (" + std::to_string(prog.size()) + " instructions)");
  std::vector<uint64_t> layer_cycles(layers.size(), 0);
  uint64_t total_cycles = 0;
  {
    sim::BareMetal bm(align_up(weights.size(), 1 << 16) + align_up(act.bytes, 1 << 16) +
                      align_up(commands.size(), 1 << 16) + (1u << 20));
    sim::DeviceConfig dc;
    dc.array_dim = N;
    auto dev = sim::make_functional_device(dc, bm.dram());
    const uint32_t wva = bm.allocate(weights.size(), false);
    const uint32_t ava = bm.allocate(act.bytes, true);
    const uint32_t cva = bm.allocate(commands.size(), false);
    std::memcpy(bm.view(wva, weights.size()).data(), weights.data(), weights.size());
    auto cmd_view = bm.view(cva, commands.size());
    std::memcpy(cmd_view.data(), commands.data(), commands.size());
    for (const auto& r : prog.relocations()) {
      const uint32_t base = r.buffer == image::BufferKind::Weights ? wva : ava;
      const uint32_t v = base + r.offset;
      std::memcpy(cmd_view.data() + r.instr * hw::kInstructionBytes + r.word * 4, &v, 4);
    }
    std::vector<uint64_t> instr_cycle(prog.size(), 0);
    dev->set_trace([&](const sim::TraceEvent& ev) { instr_cycle[ev.cmd_offset / hw::kInstructionBytes] = ev.cycle; });
    const uint64_t start = dev->cycle();
    auto res = bm.run(*dev, cva, static_cast<uint32_t>(commands.size()));
    if (!res.completed)
      return make_error(StatusCode::kInternal,
                        "the generated command stream faulted on the functional model (" +
                            std::string(hw::error_name(static_cast<hw::ErrorCode>(res.error_code))) + " at instruction " +
                            std::to_string(res.error_instr / hw::kInstructionBytes) + "); please report this bug");
    total_cycles = res.cycles;
    uint64_t prev = start;
    for (size_t l = 0; l < layers.size(); ++l) {
      const uint64_t end = instr_cycle[layer_end[l] - 1];
      layer_cycles[l] = end - prev;
      prev = end;
    }
  }

  // Build the image.
  flatbuffers::FlatBufferBuilder fb(1 << 16);
  auto quant = [&](const QParams& q) {
    return image::CreateQuant(fb, fb.CreateVector(std::vector<float>{q.scale}),
                              fb.CreateVector(std::vector<int32_t>{q.zero_point}), -1);
  };
  auto binding = [&](int v) {
    const Value& val = g.value(v);
    std::vector<int64_t> strides(val.shape.size(), 1);
    for (size_t d = val.shape.size(); d-- > 1;) strides[d - 1] = strides[d] * val.shape[d];
    const QParams q = qp[v];
    auto desc = image::CreateTensorDesc(fb, fb.CreateString(val.name), image::DType::F32, fb.CreateVector(val.shape),
                                        fb.CreateString(val.shape.size() == 2 ? "NC" : "ND"), quant(q));
    auto view = image::CreateDeviceView(fb, image::BufferKind::Activations, act.offset[v], fb.CreateVector(strides),
                                        image::DType::I8, quant(q));
    return image::CreateIoBinding(fb, desc, view);
  };
  std::vector<flatbuffers::Offset<image::IoBinding>> ins, outs;
  for (int v : g.inputs) ins.push_back(binding(v));
  for (int v : g.outputs) outs.push_back(binding(v));
  std::vector<image::Relocation> relocs;
  for (const auto& r : prog.relocations())
    relocs.emplace_back(r.instr * hw::kInstructionBytes + r.word * 4, r.buffer, r.offset);
  std::vector<flatbuffers::Offset<image::LayerInfo>> infos;
  uint64_t total_macs = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    total_macs += layer_macs_sp[l].first;
    infos.push_back(image::CreateLayerInfo(fb, fb.CreateString(layers[l].name), fb.CreateString(layers[l].op),
                                           layer_macs_sp[l].first, layer_cycles[l], layer_macs_sp[l].second));
  }
  fb.ForceVectorAlignment(commands.size(), 1, 32);
  auto cmd_vec = fb.CreateVector(commands);
  auto seg = image::CreateNpuSegment(fb, cmd_vec, fb.CreateVectorOfStructs(relocs), total_cycles, total_macs,
                                     fb.CreateVector(infos));
  std::vector<flatbuffers::Offset<image::Step>> steps{image::CreateStep(fb, image::Segment::NpuSegment, seg.Union())};
  fb.ForceVectorAlignment(weights.size(), 1, 64);
  auto wvec = fb.CreateVector(weights);
  auto model = image::CreateModel(fb, kImageSchemaVersion, hw::fingerprint_for_dim(N), N, hw::kIsaVersion,
                                  fb.CreateString("npu-compile 0.1.0"),
                                  fb.CreateString(std::filesystem::path(onnx_path).filename().string()),
                                  fb.CreateVector(ins), fb.CreateVector(outs), wvec, act.bytes, fb.CreateVector(steps));
  image::FinishModelBuffer(fb, model);
  std::vector<uint8_t> bytes(fb.GetBufferPointer(), fb.GetBufferPointer() + fb.GetSize());
  // Verify what we wrote exactly as the runtime will.
  NPU_RETURN_IF_ERROR(ModelImage::from_bytes(bytes, onnx_path).status());
  say("image: " + std::to_string(bytes.size()) + " bytes, " + std::to_string(prog.size()) + " instructions, " +
      std::to_string(total_macs) + " MACs, " + std::to_string(total_cycles) + " predicted cycles");
  return bytes;
}

}  // namespace npu::compiler
