// Host-step attributes <-> the image's HostAttribute tables.
#include "npu/host_kernels/host_step.h"

namespace npu::host {
namespace {

using image::AttributeKind;
using Kind = Attribute::Kind;

AttributeKind to_image(Kind k) {
  switch (k) {
    case Kind::kInt: return AttributeKind::Int;
    case Kind::kFloat: return AttributeKind::Float;
    case Kind::kInts: return AttributeKind::Ints;
    case Kind::kFloats: return AttributeKind::Floats;
    case Kind::kString: return AttributeKind::String;
    case Kind::kStrings: return AttributeKind::Strings;
    case Kind::kTensor: return AttributeKind::Tensor;
    case Kind::kOther: break;
  }
  return AttributeKind::Other;
}

Status corrupt(const image::HostSegment& seg, const std::string& what) {
  return make_error(StatusCode::kCorruptData,
                    "host step " + std::string(seg.op_type() ? seg.op_type()->str() : "?") +
                        " '" + (seg.node_name() ? seg.node_name()->str() : "") + "': " + what +
                        "; recompile the model with npu-compile");
}

}  // namespace

flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<image::HostAttribute>>>
encode_attributes(flatbuffers::FlatBufferBuilder& fb, const HostOpAttrs& attrs) {
  std::vector<flatbuffers::Offset<image::HostAttribute>> out;
  for (const auto& [name, a] : attrs) {
    auto n = fb.CreateString(name);
    auto ints = a.kind == Kind::kInts ? fb.CreateVector(a.ints) : 0;
    auto floats = a.kind == Kind::kFloats ? fb.CreateVector(a.floats) : 0;
    auto s = a.kind == Kind::kString || a.kind == Kind::kOther ? fb.CreateString(a.s) : 0;
    auto strings = a.kind == Kind::kStrings ? fb.CreateVectorOfStrings(a.strings) : 0;
    auto shape = a.kind == Kind::kTensor ? fb.CreateVector(a.t.shape) : 0;
    auto data = a.kind == Kind::kTensor ? fb.CreateVector(a.t.data) : 0;
    image::HostAttributeBuilder b(fb);
    b.add_name(n);
    b.add_kind(to_image(a.kind));
    if (a.kind == Kind::kInt) b.add_i(a.i);
    if (a.kind == Kind::kFloat) b.add_f(a.f);
    if (!ints.IsNull()) b.add_ints(ints);
    if (!floats.IsNull()) b.add_floats(floats);
    if (!s.IsNull()) b.add_s(s);
    if (!strings.IsNull()) b.add_strings(strings);
    if (a.kind == Kind::kTensor) {
      b.add_tensor_dtype(static_cast<image::DType>(a.t.dtype));
      b.add_tensor_shape(shape);
      b.add_tensor_data(data);
    }
    out.push_back(b.Finish());
  }
  return fb.CreateVector(out);
}

Result<HostOpAttrs> decode_attributes(const image::HostSegment& seg) {
  HostOpAttrs attrs;
  if (!seg.attrs()) return attrs;
  for (const image::HostAttribute* a : *seg.attrs()) {
    if (!a->name()) return corrupt(seg, "an attribute without a name");
    Attribute v;
    switch (a->kind()) {
      case AttributeKind::Int:
        v.kind = Kind::kInt;
        v.i = a->i();
        break;
      case AttributeKind::Float:
        v.kind = Kind::kFloat;
        v.f = a->f();
        break;
      case AttributeKind::Ints:
        v.kind = Kind::kInts;
        if (a->ints()) v.ints.assign(a->ints()->begin(), a->ints()->end());
        break;
      case AttributeKind::Floats:
        v.kind = Kind::kFloats;
        if (a->floats()) v.floats.assign(a->floats()->begin(), a->floats()->end());
        break;
      case AttributeKind::String:
      case AttributeKind::Other:
        v.kind = a->kind() == AttributeKind::String ? Kind::kString : Kind::kOther;
        if (a->s()) v.s = a->s()->str();
        break;
      case AttributeKind::Strings:
        v.kind = Kind::kStrings;
        if (a->strings())
          for (const auto* s : *a->strings()) v.strings.push_back(s ? s->str() : std::string());
        break;
      case AttributeKind::Tensor: {
        v.kind = Kind::kTensor;
        const auto dtype = static_cast<uint8_t>(a->tensor_dtype());
        if (dtype > static_cast<uint8_t>(DType::kI64))
          return corrupt(seg, "attribute '" + a->name()->str() + "' has an unknown dtype");
        v.t.dtype = static_cast<DType>(dtype);
        if (a->tensor_shape()) v.t.shape.assign(a->tensor_shape()->begin(), a->tensor_shape()->end());
        if (a->tensor_data()) v.t.data.assign(a->tensor_data()->begin(), a->tensor_data()->end());
        // ModelImage verified the size; checked again because a kernel indexes by the shape.
        int64_t n = 1;
        for (int64_t d : v.t.shape) {
          if (d < 0 || (d > 0 && n > (int64_t{1} << 40) / d))
            return corrupt(seg, "attribute '" + a->name()->str() + "' has a bad tensor shape");
          n *= d;
        }
        if (static_cast<uint64_t>(n) * dtype_size(v.t.dtype) != v.t.data.size())
          return corrupt(seg, "attribute '" + a->name()->str() + "' has a tensor of the wrong size");
        break;
      }
      default:
        return corrupt(seg, "attribute '" + a->name()->str() + "' has an unknown kind");
    }
    attrs[a->name()->str()] = std::move(v);
  }
  return attrs;
}

Result<std::vector<Tensor>> run_host_step(const image::HostSegment& seg,
                                          const std::vector<const Tensor*>& inputs) {
  NPU_ASSIGN_OR_RETURN(HostOpAttrs attrs, decode_attributes(seg));
  return run_host_op(seg.op_type() ? seg.op_type()->str() : std::string(),
                     seg.node_name() ? seg.node_name()->str() : std::string(), seg.opset(), attrs,
                     inputs, seg.num_outputs());
}

}  // namespace npu::host
