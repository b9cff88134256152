// An SDK consumer in C++: the same program as consumer.c over the header-only wrapper
// npu/npu.hpp, linked against libnpu.so only.
//   consumer_cxx IMAGE [DEVICE]
#include <cmath>
#include <cstdio>
#include <vector>

#include "npu/npu.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: consumer_cxx IMAGE [DEVICE]\n");
    return 2;
  }
  try {
    npu::cxx::Runtime runtime(argc > 2 ? argv[2] : "sim");
    npu::cxx::Model model(argv[1]);
    npu::cxx::Session session(runtime, model);
    std::vector<npu::cxx::Tensor> inputs;
    for (size_t k = 0; k < model.input_count(); ++k) {
      npu_dtype_t dtype;
      int64_t shape[8];
      size_t rank = 0;
      npu::cxx::check(npu_model_input_info(model.get(), k, nullptr, &dtype, shape, 8, &rank));
      npu::cxx::Tensor t(dtype, std::vector<int64_t>(shape, shape + rank));
      float* x = t.mutable_data<float>();
      for (size_t i = 0; i < t.byte_size() / sizeof(float); ++i)
        x[i] = static_cast<float>(std::sin(static_cast<double>(i)) * 0.5);
      inputs.push_back(std::move(t));
    }
    std::vector<const npu::cxx::Tensor*> in;
    for (const auto& t : inputs) in.push_back(&t);
    const std::vector<npu::cxx::Tensor> out = session.run(in);
    for (size_t k = 0; k < out.size(); ++k) {
      std::printf("output %zu: ", k);
      const auto shape = out[k].shape();
      for (size_t d = 0; d < shape.size(); ++d)
        std::printf("%s%lld", d ? "x" : "", static_cast<long long>(shape[d]));
      const float* y = out[k].data<float>();
      for (size_t i = 0; i < out[k].byte_size() / sizeof(float); ++i) std::printf(" %.9g", y[i]);
      std::printf("\n");
    }
  } catch (const npu::cxx::Error& e) {
    std::fprintf(stderr, "consumer_cxx: %s\n", e.what());
    return 1;
  }
  return 0;
}
