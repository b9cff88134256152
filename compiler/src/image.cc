// Model-image loading: the integrity trailer (CRC-32) first, then the FlatBuffers verifier, then
// every range the runtime relies on.
#include "npu/compiler/image.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "npu/compiler/tensor.h"
#include "npu/hal/file.h"
#include "npu/hw/config.h"

namespace npu::compiler {
namespace {

constexpr uint64_t kMaxBufferBytes = 1ull << 31;  // half the 32-bit NPU address space
constexpr char kTrailerMagic[4] = {'N', 'P', 'U', 'C'};

uint32_t crc32_of(std::span<const uint8_t> bytes) {
  return static_cast<uint32_t>(::crc32_z(::crc32_z(0, nullptr, 0), bytes.data(), bytes.size()));
}

uint32_t get_u32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int b = 0; b < 4; ++b) out.push_back(static_cast<uint8_t>(v >> (8 * b)));
}

bool has_trailer_magic(std::span<const uint8_t> bytes) {
  return bytes.size() >= kImageTrailerBytes &&
         std::memcmp(bytes.data() + bytes.size() - kImageTrailerBytes, kTrailerMagic, 4) == 0;
}

Status corrupt(const std::string& origin, const std::string& what) {
  return make_error(StatusCode::kCorruptData,
                    origin + ": invalid model image (" + what + "); recompile it with npu-compile");
}

// "" when a host step's attribute is usable: named, of a known kind, a tensor's data exactly
// its dtype times its shape; else why not.
std::string check_host_attribute(const image::HostAttribute& a) {
  if (!a.name()) return "without a name";
  const std::string name = std::string("'").append(a.name()->str()).append("'");
  if (static_cast<uint8_t>(a.kind()) > static_cast<uint8_t>(image::AttributeKind::Other))
    return name + " of an unknown kind";
  if (a.kind() != image::AttributeKind::Tensor) return "";
  if (static_cast<uint8_t>(a.tensor_dtype()) > static_cast<uint8_t>(DType::kI64))
    return name + " with an unknown tensor dtype";
  uint64_t n = 1;
  if (a.tensor_shape())
    for (int64_t d : *a.tensor_shape()) {
      if (d < 0 || (d > 0 && n > (uint64_t{1} << 40) / static_cast<uint64_t>(d)))
        return name + " with a bad tensor shape";
      n *= static_cast<uint64_t>(d);
    }
  const uint64_t bytes = a.tensor_data() ? a.tensor_data()->size() : 0;
  if (n * dtype_size(static_cast<DType>(a.tensor_dtype())) != bytes)
    return name + " whose tensor data does not match its shape";
  return "";
}

// The integrity trailer, checked before anything reads the FlatBuffer. Returns the
// FlatBuffer's length.
Result<size_t> check_trailer(const std::string& origin, std::span<const uint8_t> bytes) {
  if (!has_trailer_magic(bytes)) {
    if (!looks_like_image(bytes))
      return corrupt(
          origin, "missing the NPUI file identifier; is this an ONNX file or a truncated image?");
    // No trailer: an image from before version 2 (say so, reading only its version through
    // the verifier, which is safe on any bytes), else a damaged or truncated one.
    flatbuffers::Verifier verifier(bytes.data(), bytes.size());
    if (image::VerifyModelBuffer(verifier) &&
        image::GetModel(bytes.data())->schema_version() < kImageSchemaVersion)
      return make_error(StatusCode::kIncompatible,
                        origin + ": image schema version " +
                            std::to_string(image::GetModel(bytes.data())->schema_version()) +
                            " has no checksum; this runtime reads version " +
                            std::to_string(kImageSchemaVersion) +
                            ": recompile the model with npu-compile");
    return corrupt(origin, "no integrity trailer: the file is truncated or damaged");
  }
  const uint8_t* t = bytes.data() + bytes.size() - kImageTrailerBytes;
  const size_t length = get_u32(t + 4);
  if (length != bytes.size() - kImageTrailerBytes)
    return corrupt(
        origin, "its trailer gives " + std::to_string(length) + " bytes, the file holds " +
                    std::to_string(bytes.size() - kImageTrailerBytes) + ": truncated or damaged");
  const uint32_t stored = get_u32(t + 8), computed = crc32_of(bytes.first(bytes.size() - 4));
  if (stored != computed) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "checksum mismatch: stored CRC-32 0x%08x, computed 0x%08x",
                  stored, computed);
    return corrupt(origin, std::string(buf) + ": the file is damaged");
  }
  return length;
}

size_t image_dtype_size(image::DType dtype) {
  switch (dtype) {
    case image::DType::I8: case image::DType::U8: return 1;
    case image::DType::F32: case image::DType::I32: return 4;
    case image::DType::I64: return 8;
    case image::DType::I16: return 2;
  }
  return 0;
}

// A value's host-side description: name, dtype and a bounded static shape.
Status check_desc(const std::string& origin, const image::IoBinding* io, const std::string& where,
                  uint64_t* out_elements) {
  if (!io || !io->desc() || !io->desc()->name() || !io->desc()->shape())
    return corrupt(origin, where + " lacks a name or shape");
  // (I16 is a device view's dtype only: a wide value, ISA 1.4; no tensor the user sees has it.)
  if (image_dtype_size(io->desc()->dtype()) == 0 || io->desc()->dtype() == image::DType::I16)
    return corrupt(origin, where + " has an unknown dtype");
  uint64_t elements = 1;
  for (int64_t d : *io->desc()->shape()) {
    if (d < 0 || d > (1 << 24)) return corrupt(origin, where + " has an out-of-range dimension");
    elements *= static_cast<uint64_t>(d);
    if (elements > (1ull << 28)) return corrupt(origin, where + " is too large");
  }
  *out_elements = elements;
  return Status::ok();
}

// A device view's quantisation: per tensor (axis -1, one scale and zero point) or per axis
// (axis in [0, rank), one scale and zero point per index of that dimension); scales positive
// and finite.
Status check_quant(const std::string& origin, const image::Quant* q, const flatbuffers::Vector<int64_t>* shape,
                   const std::string& where) {
  if (!q || !q->scale() || !q->zero_point() || q->scale()->size() == 0)
    return corrupt(origin, where + " has no quantisation");
  const int32_t axis = q->axis();
  if (axis == -1) {
    if (q->scale()->size() != 1 || q->zero_point()->size() != 1)
      return corrupt(origin, where + " has a per-tensor quantisation with " + std::to_string(q->scale()->size()) +
                                 " scales and " + std::to_string(q->zero_point()->size()) + " zero points");
  } else {
    if (axis < 0 || static_cast<uint32_t>(axis) >= shape->size())
      return corrupt(origin, where + " has a per-axis quantisation along axis " + std::to_string(axis) +
                                 ", outside its rank " + std::to_string(shape->size()));
    const int64_t dim = shape->Get(static_cast<uint32_t>(axis));
    if (static_cast<int64_t>(q->scale()->size()) != dim || static_cast<int64_t>(q->zero_point()->size()) != dim)
      return corrupt(origin, where + " has " + std::to_string(q->scale()->size()) + " scales and " +
                                 std::to_string(q->zero_point()->size()) + " zero points along axis " +
                                 std::to_string(axis) + " of size " + std::to_string(dim));
  }
  for (float s : *q->scale())
    if (!(s > 0.0f) || !std::isfinite(s)) return corrupt(origin, where + " has a scale that is not positive and finite");
  return Status::ok();
}

Status check_view(const std::string& origin, const image::IoBinding* io, uint64_t act_bytes,
                  const char* kind, size_t index) {
  const std::string where = std::string(kind) + " " + std::to_string(index);
  uint64_t unused = 0;
  NPU_RETURN_IF_ERROR(check_desc(origin, io, where, &unused));
  if (!io->device()) return Status::ok();  // a value only the host touches
  const auto* shape = io->desc()->shape();
  const auto* view = io->device();
  if (!view->strides() || view->strides()->size() != shape->size())
    return corrupt(origin, where + " has strides that do not match its shape");
  if (view->buffer() != image::BufferKind::Activations)
    return corrupt(origin, where + " does not live in the activation buffer");
  if (view->dtype() != image::DType::I8 && view->dtype() != image::DType::I32 && view->dtype() != image::DType::I16)
    return corrupt(origin, where + " has an unsupported device dtype");
  NPU_RETURN_IF_ERROR(check_quant(origin, view->quant(), shape, where));
  uint64_t last = view->offset();
  uint64_t elements = 1;
  for (uint32_t d = 0; d < shape->size(); ++d) {
    const int64_t extent = shape->Get(d);
    const int64_t stride = view->strides()->Get(d);
    if (extent < 0 || extent > (1 << 24) || stride < 0 || stride > (1ll << 31))
      return corrupt(origin, where + " has an out-of-range dimension or stride");
    elements *= static_cast<uint64_t>(extent);
    if (elements > (1ull << 28)) return corrupt(origin, where + " is too large");
    if (extent > 0) last += static_cast<uint64_t>(extent - 1) * static_cast<uint64_t>(stride);
  }
  // An empty tensor (a zero dimension) covers no bytes; its offset must still lie inside
  // the buffer.
  if (elements == 0) {
    if (view->offset() > act_bytes) return corrupt(origin, where + " starts past the activation buffer");
    return Status::ok();
  }
  const uint64_t esize = view->dtype() == image::DType::I32 ? 4 : view->dtype() == image::DType::I16 ? 2 : 1;
  // int32 views (biases in accumulator units) are read as whole ACC lanes: 4-byte aligned.
  if (esize == 4) {
    bool aligned = view->offset() % 4 == 0;
    for (uint32_t d = 0; d < shape->size(); ++d) aligned = aligned && view->strides()->Get(d) % 4 == 0;
    if (!aligned) return corrupt(origin, where + " is an int32 view that is not 4-byte aligned");
  }
  if (last + esize > act_bytes)
    return corrupt(origin, where + " reaches past the activation buffer");
  return Status::ok();
}

}  // namespace

bool looks_like_image(std::span<const uint8_t> bytes) {
  return (bytes.size() >= 8 && image::ModelBufferHasIdentifier(bytes.data())) ||
         has_trailer_magic(bytes);
}

std::vector<uint8_t> seal_image(std::span<const uint8_t> flatbuffer) {
  std::vector<uint8_t> out(flatbuffer.begin(), flatbuffer.end());
  out.insert(out.end(), std::begin(kTrailerMagic), std::end(kTrailerMagic));
  put_u32(out, static_cast<uint32_t>(flatbuffer.size()));
  put_u32(out, crc32_of(out));
  return out;
}

Result<std::shared_ptr<const ModelImage>> ModelImage::from_bytes(std::vector<uint8_t> bytes,
                                                                 std::string origin) {
  NPU_ASSIGN_OR_RETURN(const size_t length, check_trailer(origin, bytes));
  if (length < 8 || !image::ModelBufferHasIdentifier(bytes.data()))
    return corrupt(origin, "missing the NPUI file identifier");
  flatbuffers::Verifier verifier(bytes.data(), length);
  if (!image::VerifyModelBuffer(verifier))
    return corrupt(origin, "FlatBuffers verification failed");
  const image::Model* m = image::GetModel(bytes.data());
  if (m->schema_version() != kImageSchemaVersion)
    return make_error(StatusCode::kIncompatible,
                      origin + ": image schema version " + std::to_string(m->schema_version()) +
                          ", this runtime reads version " + std::to_string(kImageSchemaVersion) +
                          "; recompile the model with this npu-compile");
  if ((m->isa_version() >> 16) != hw::kIsaVersionMajor)
    return make_error(StatusCode::kIncompatible,
                      origin + ": image targets ISA major version " +
                          std::to_string(m->isa_version() >> 16) + ", this stack is version " +
                          std::to_string(hw::kIsaVersionMajor));
  if (std::find(hw::kSupportedArrayDims.begin(), hw::kSupportedArrayDims.end(), m->array_dim()) ==
      hw::kSupportedArrayDims.end())
    return corrupt(origin, "unsupported array dim " + std::to_string(m->array_dim()));
  const uint64_t act_bytes = m->activation_bytes();
  if (act_bytes == 0 || act_bytes > kMaxBufferBytes) return corrupt(origin, "bad activation size");
  const uint64_t weight_bytes = m->weights() ? m->weights()->size() : 0;
  // A model may have no inputs (its outputs are constants); it always has outputs.
  if (!m->inputs() || !m->outputs() || m->outputs()->size() == 0) return corrupt(origin, "no outputs");
  for (uint32_t i = 0; i < m->inputs()->size(); ++i)
    NPU_RETURN_IF_ERROR(check_view(origin, m->inputs()->Get(i), act_bytes, "input", i));
  for (uint32_t i = 0; i < m->outputs()->size(); ++i)
    NPU_RETURN_IF_ERROR(check_view(origin, m->outputs()->Get(i), act_bytes, "output", i));
  if (!m->steps()) return corrupt(origin, "no steps");
  const uint32_t host_values = m->host_values() ? m->host_values()->size() : 0;
  for (uint32_t v = 0; v < host_values; ++v)
    NPU_RETURN_IF_ERROR(check_view(origin, m->host_values()->Get(v), act_bytes, "value", v));
  auto has_view = [&](uint32_t v) { return v < host_values && m->host_values()->Get(v)->device() != nullptr; };
  const bool mapped = m->input_values() && m->output_values();
  if (mapped) {
    if (m->input_values()->size() != m->inputs()->size() || m->output_values()->size() != m->outputs()->size())
      return corrupt(origin, "input/output value maps do not match the inputs and outputs");
    for (uint32_t v : *m->input_values())
      if (v >= host_values) return corrupt(origin, "an input maps to an unknown value");
    for (uint32_t v : *m->output_values())
      if (v >= host_values) return corrupt(origin, "an output maps to an unknown value");
  } else {
    // Without value maps the outputs can only come from NPU steps.
    if (m->steps()->size() == 0) return corrupt(origin, "no steps and no value maps");
    for (const image::IoBinding* io : *m->inputs())
      if (!io->device()) return corrupt(origin, "an input has neither a device view nor a value map");
    for (const image::IoBinding* io : *m->outputs())
      if (!io->device()) return corrupt(origin, "an output has neither a device view nor a value map");
  }
  if (m->host_constants()) {
    for (const image::HostConstant* c : *m->host_constants()) {
      if (!c || c->value() >= host_values || !c->data())
        return corrupt(origin, "a host constant names an unknown value");
      const image::IoBinding* io = m->host_values()->Get(c->value());
      uint64_t elements = 0;
      NPU_RETURN_IF_ERROR(check_desc(origin, io, "constant " + std::to_string(c->value()), &elements));
      if (c->data()->size() != elements * image_dtype_size(io->desc()->dtype()))
        return corrupt(origin, "host constant " + io->desc()->name()->str() + " has the wrong size");
    }
  }
  if (m->specialized_inputs()) {
    for (const image::SpecializedInput* si : *m->specialized_inputs()) {
      if (!si || si->input() >= m->inputs()->size() || !si->data())
        return corrupt(origin, "a specialised input names an unknown input");
      const image::IoBinding* io = m->inputs()->Get(si->input());
      uint64_t elements = 0;
      NPU_RETURN_IF_ERROR(check_desc(origin, io, "specialised input " + std::to_string(si->input()), &elements));
      if (si->data()->size() != elements * image_dtype_size(io->desc()->dtype()))
        return corrupt(origin, "specialised input " + io->desc()->name()->str() + " has the wrong size");
    }
  }
  for (uint32_t s = 0; s < m->steps()->size(); ++s) {
    const image::Step* step = m->steps()->Get(s);
    const std::string where = "step " + std::to_string(s);
    if (!step) return corrupt(origin, where + " is empty");
    if (const auto* npu = step->segment_as_NpuSegment()) {
      const auto* cmds = npu->commands();
      if (!cmds || cmds->size() == 0 || cmds->size() % hw::kInstructionBytes != 0 ||
          cmds->size() > kMaxBufferBytes)
        return corrupt(origin, where + " has a command stream that is empty or not a multiple of 32 bytes");
      if (npu->relocations()) {
        for (const image::Relocation* r : *npu->relocations()) {
          if (r->cmd_offset() % 4 != 0 || uint64_t{r->cmd_offset()} + 4 > cmds->size())
            return corrupt(origin, where + " has a relocation outside its command stream");
          uint64_t target_size = 0;
          switch (r->buffer()) {
            case image::BufferKind::Weights: target_size = weight_bytes; break;
            case image::BufferKind::Activations: target_size = act_bytes; break;
            case image::BufferKind::Commands: target_size = cmds->size(); break;
            default: return corrupt(origin, where + " has a relocation to an unknown buffer");
          }
          if (r->offset() >= target_size)
            return corrupt(origin, where + " has a relocation pointing past its buffer");
        }
      }
      for (const auto* list : {npu->inputs(), npu->outputs()})
        if (list)
          for (uint32_t v : *list)
            if (!has_view(v)) return corrupt(origin, where + " exchanges a value without a device view");
    } else if (const auto* host = step->segment_as_HostSegment()) {
      if (!host->op_type() || !host->inputs() || !host->outputs())
        return corrupt(origin, where + " is a host step without op type, inputs or outputs");
      if (!mapped) return corrupt(origin, where + " is a host step in an image without value maps");
      for (uint32_t v : *host->inputs())  // UINT32_MAX marks an omitted optional input
        if (v >= host_values && v != UINT32_MAX) return corrupt(origin, where + " reads an unknown host value");
      for (uint32_t v : *host->outputs())
        if (v >= host_values) return corrupt(origin, where + " writes an unknown host value");
      if (host->attrs())
        for (const image::HostAttribute* a : *host->attrs())
          if (std::string why = check_host_attribute(*a); !why.empty())
            return corrupt(origin, where + " has an attribute " + why);
    } else {
      return corrupt(origin, where + " has an unknown segment type");
    }
  }
  auto image = std::shared_ptr<ModelImage>(new ModelImage());
  image->bytes_ = std::move(bytes);
  image->origin_ = std::move(origin);
  image->model_ = image::GetModel(image->bytes_.data());
  return std::shared_ptr<const ModelImage>(std::move(image));
}

Result<std::shared_ptr<const ModelImage>> ModelImage::from_file(const std::string& path) {
  NPU_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes,
                       read_file(path, kMaxModelFileBytes, "model image"));
  return from_bytes(std::move(bytes), path);
}

}  // namespace npu::compiler
