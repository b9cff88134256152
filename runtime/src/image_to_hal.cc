// Model image -> hal::ExecutableSpec.
#include "npu/runtime/image_to_hal.h"

namespace npu::runtime {
namespace {

hal::BindingKind binding_of(image::BufferKind kind) {
  switch (kind) {
    case image::BufferKind::Weights: return hal::BindingKind::kWeights;
    case image::BufferKind::Activations: return hal::BindingKind::kActivations;
    case image::BufferKind::Commands: return hal::BindingKind::kCommands;
  }
  // The image verifier refuses other values; an out-of-range binding fails in instantiate().
  return static_cast<hal::BindingKind>(kind);
}

}  // namespace

hal::ExecutableSpec executable_spec(std::shared_ptr<const compiler::ModelImage> image) {
  const image::Model& m = image->model();
  hal::ExecutableSpec spec;
  spec.origin = image->origin();
  spec.hw_fingerprint = m.hw_fingerprint();
  spec.array_dim = m.array_dim();
  spec.isa_version = m.isa_version();
  if (m.weights()) spec.weights = {m.weights()->data(), m.weights()->size()};
  spec.activation_bytes = m.activation_bytes();
  for (const image::Step* step : *m.steps()) {
    hal::StepSpec s;
    if (const auto* npu = step->segment_as_NpuSegment()) {
      s.kind = hal::StepKind::kNpu;
      s.commands = {npu->commands()->data(), npu->commands()->size()};
      if (npu->relocations())
        for (const image::Relocation* r : *npu->relocations())
          s.relocations.push_back({r->cmd_offset(), binding_of(r->buffer()), r->offset()});
      s.macs = npu->macs();
      s.predicted_cycles = npu->predicted_cycles();
    } else {
      const auto* host = step->segment_as_HostSegment();
      s.kind = hal::StepKind::kHost;
      s.op_type = host->op_type() ? host->op_type()->str() : "";
      s.node_name = host->node_name() ? host->node_name()->str() : "";
    }
    spec.steps.push_back(std::move(s));
  }
  spec.owner = std::move(image);
  return spec;
}

Result<std::shared_ptr<hal::Executable>> load_executable(
    std::shared_ptr<hal::Device> device, std::shared_ptr<const compiler::ModelImage> image) {
  if (!image) return make_error(StatusCode::kInvalidArgument, "load_executable needs an image");
  return hal::Executable::load(std::move(device), executable_spec(std::move(image)));
}

}  // namespace npu::runtime
