#include "npu/runtime/model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

#include <nlohmann/json.hpp>

namespace npu::runtime {
namespace {

DType from_image(image::DType d) {
  switch (d) {
    case image::DType::F32: return DType::kF32;
    case image::DType::I8: return DType::kI8;
    case image::DType::U8: return DType::kU8;
    case image::DType::I32: return DType::kI32;
    case image::DType::I64: return DType::kI64;
    case image::DType::I16: return DType::kI16;
  }
  return DType::kF32;
}

QuantInfo quant_from(const image::Quant* q) {
  QuantInfo out;
  if (!q) return out;
  if (q->scale()) out.scale.assign(q->scale()->begin(), q->scale()->end());
  if (q->zero_point()) out.zero_point.assign(q->zero_point()->begin(), q->zero_point()->end());
  out.axis = q->axis();
  return out;
}

TensorInfo info_from(const image::IoBinding& io) {
  TensorInfo t;
  const image::TensorDesc& d = *io.desc();
  t.name = d.name()->str();
  t.dtype = from_image(d.dtype());
  t.shape.assign(d.shape()->begin(), d.shape()->end());
  t.layout = d.layout() ? d.layout()->str() : "";
  if (d.quant()) t.quant = quant_from(d.quant());
  if (!io.device()) {
    t.on_device = false;
    return t;
  }
  const image::DeviceView& v = *io.device();
  t.device_dtype = from_image(v.dtype());
  t.device_offset = v.offset();
  t.device_strides.assign(v.strides()->begin(), v.strides()->end());
  t.device_quant = quant_from(v.quant());
  return t;
}

std::string quant_text(const QuantInfo& q) {
  std::ostringstream os;
  if (q.scale.size() == 1) {
    os << "scale " << q.scale[0] << " zp " << (q.zero_point.empty() ? 0 : q.zero_point[0]);
  } else {
    os << "per-axis " << q.axis << " (" << q.scale.size() << " scales)";
  }
  return os.str();
}

nlohmann::json tensor_json(const TensorInfo& t) {
  nlohmann::json j = {{"name", t.name},
                      {"dtype", dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"layout", t.layout},
                      {"device", nullptr}};
  if (!t.on_device) return j;
  // A non-finite scale (never produced by the compiler) is written as null, as JSON requires.
  nlohmann::json scales = nlohmann::json::array();
  for (double v : t.device_quant.scale) scales.push_back(std::isfinite(v) ? nlohmann::json(v) : nullptr);
  j["device"] = {{"dtype", dtype_name(t.device_dtype)},
                 {"offset", t.device_offset},
                 {"strides", t.device_strides},
                 {"scale", std::move(scales)},
                 {"zero_point", t.device_quant.zero_point},
                 {"axis", t.device_quant.axis}};
  return j;
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

int64_t TensorInfo::element_count() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorInfo::to_string() const {
  return name + ": " + std::string(dtype_name(dtype)) + shape_to_string(shape) +
         (layout.empty() ? "" : " " + layout) +
         (on_device ? " (device " + std::string(dtype_name(device_dtype)) + " " +
                          quant_text(device_quant) + ")"
                    : " (host)");
}

Result<std::shared_ptr<const Model>> Model::load_file(const std::string& path) {
  NPU_ASSIGN_OR_RETURN(auto image, compiler::ModelImage::from_file(path));
  return from_image(std::move(image));
}

Result<std::shared_ptr<const Model>> Model::from_bytes(std::vector<uint8_t> bytes,
                                                       std::string origin) {
  NPU_ASSIGN_OR_RETURN(auto image,
                       compiler::ModelImage::from_bytes(std::move(bytes), std::move(origin)));
  return from_image(std::move(image));
}

Result<std::shared_ptr<const Model>> Model::from_image(
    std::shared_ptr<const compiler::ModelImage> image) {
  if (!image) return make_error(StatusCode::kInvalidArgument, "Model::from_image: null image");
  auto model = std::shared_ptr<Model>(new Model());
  const image::Model& m = image->model();
  for (const image::IoBinding* io : *m.inputs()) model->inputs_.push_back(info_from(*io));
  for (const image::IoBinding* io : *m.outputs()) model->outputs_.push_back(info_from(*io));
  if (m.input_values() && m.output_values()) {
    model->mapped_ = true;
    if (m.host_values())
      for (const image::IoBinding* io : *m.host_values()) model->values_.push_back(info_from(*io));
    model->input_values_.assign(m.input_values()->begin(), m.input_values()->end());
    model->output_values_.assign(m.output_values()->begin(), m.output_values()->end());
    if (m.host_constants()) {
      for (const image::HostConstant* c : *m.host_constants()) {
        const TensorInfo& info = model->values_[c->value()];  // verified index and size
        Tensor t = Tensor::zeros(info.dtype, info.shape);
        std::memcpy(t.data.data(), c->data()->data(), std::min<size_t>(t.data.size(), c->data()->size()));
        model->constants_.emplace_back(c->value(), std::move(t));
      }
    }
  }
  if (m.specialized_inputs()) {
    for (const image::SpecializedInput* si : *m.specialized_inputs()) {
      const TensorInfo& info = model->inputs_[si->input()];  // verified index and size
      Tensor t = Tensor::zeros(info.dtype, info.shape);
      std::memcpy(t.data.data(), si->data()->data(), std::min<size_t>(t.data.size(), si->data()->size()));
      model->specialized_.emplace_back(si->input(), std::move(t));
    }
  }
  for (const image::Step* step : *m.steps()) {
    if (const auto* npu = step->segment_as_NpuSegment()) {
      ++model->npu_steps_;
      model->macs_ += npu->macs();
      model->predicted_cycles_ += npu->predicted_cycles();
    } else {
      ++model->host_steps_;
    }
  }
  model->image_ = std::move(image);
  return std::shared_ptr<const Model>(std::move(model));
}

uint32_t Model::array_dim() const { return image_->model().array_dim(); }
uint64_t Model::hw_fingerprint() const { return image_->model().hw_fingerprint(); }

std::string Model::summary() const {
  const image::Model& m = image_->model();
  std::ostringstream os;
  os << "model " << origin() << "\n";
  os << "  producer " << (m.producer() ? m.producer()->str() : "?") << ", source "
     << (m.source() ? m.source()->str() : "?") << "\n";
  os << "  hardware: array " << array_dim() << "x" << array_dim() << ", fingerprint "
     << hex(hw_fingerprint()) << ", ISA " << (m.isa_version() >> 16) << "."
     << (m.isa_version() & 0xFFFF) << "\n";
  os << "  steps: " << npu_steps_ << " NPU, " << host_steps_ << " host; activations "
     << m.activation_bytes() << " B, weights " << (m.weights() ? m.weights()->size() : 0)
     << " B\n";
  os << "  MACs per inference " << macs_ << ", predicted cycles " << predicted_cycles_ << "\n";
  os << "  inputs:\n";
  for (size_t i = 0; i < inputs_.size(); ++i) os << "    " << i << " " << inputs_[i].to_string() << "\n";
  os << "  outputs:\n";
  for (size_t i = 0; i < outputs_.size(); ++i)
    os << "    " << i << " " << outputs_[i].to_string() << "\n";
  size_t s = 0;
  for (const image::Step* step : *m.steps()) {
    if (const auto* npu = step->segment_as_NpuSegment()) {
      os << "  step " << s << ": NPU, " << npu->commands()->size() / 32 << " instructions\n";
      if (npu->layers())
        for (const image::LayerInfo* l : *npu->layers())
          os << "    " << (l->name() ? l->name()->str() : "?") << " ("
             << (l->op_type() ? l->op_type()->str() : "?") << "): " << l->macs() << " MACs, "
             << l->predicted_cycles() << " cycles\n";
    } else if (const auto* host = step->segment_as_HostSegment()) {
      os << "  step " << s << ": host " << host->op_type()->str() << " (node "
         << (host->node_name() ? host->node_name()->str() : "?") << ")\n";
    }
    ++s;
  }
  return os.str();
}

std::string Model::summary_json() const {
  const image::Model& m = image_->model();
  nlohmann::json j = {{"origin", origin()},
                      {"producer", m.producer() ? m.producer()->str() : ""},
                      {"source", m.source() ? m.source()->str() : ""},
                      {"array_dim", array_dim()},
                      {"hw_fingerprint", hex(hw_fingerprint())},
                      {"npu_steps", npu_steps_},
                      {"host_steps", host_steps_},
                      {"activation_bytes", m.activation_bytes()},
                      {"weight_bytes", m.weights() ? m.weights()->size() : 0},
                      {"macs", macs_},
                      {"predicted_cycles", predicted_cycles_},
                      {"inputs", nlohmann::json::array()},
                      {"outputs", nlohmann::json::array()},
                      {"layers", nlohmann::json::array()}};
  for (const TensorInfo& t : inputs_) j["inputs"].push_back(tensor_json(t));
  for (const TensorInfo& t : outputs_) j["outputs"].push_back(tensor_json(t));
  for (const image::Step* step : *m.steps()) {
    const auto* npu = step->segment_as_NpuSegment();
    if (!npu || !npu->layers()) continue;
    for (const image::LayerInfo* l : *npu->layers()) {
      j["layers"].push_back({{"name", l->name() ? l->name()->str() : ""},
                             {"op_type", l->op_type() ? l->op_type()->str() : ""},
                             {"macs", l->macs()},
                             {"predicted_cycles", l->predicted_cycles()}});
    }
  }
  return j.dump();
}

}  // namespace npu::runtime
