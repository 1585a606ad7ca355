#include "ops/internal/schema_helpers.h"

#include "absl/strings/str_cat.h"

namespace sluice::ops::internal {

InferFn SameAsInput(int slot) {
  return [slot](const InferContext& ctx) -> absl::StatusOr<std::vector<std::vector<TensorMeta>>> {
    return Single(ctx.input(slot));
  };
}

absl::StatusOr<Shape> ShapeAttr(const InferContext& ctx, absl::string_view name) {
  absl::StatusOr<std::vector<int64_t>> dims = ctx.attrs().GetInts(name);
  if (!dims.ok()) return ctx.Error(dims.status().message());
  absl::StatusOr<Shape> shape = Shape::Make(*dims);
  if (!shape.ok()) {
    return ctx.Error(absl::StrCat("attribute '", name, "': ", shape.status().message()));
  }
  return shape;
}

absl::StatusOr<DataType> DtypeAttr(const InferContext& ctx, absl::string_view name) {
  absl::StatusOr<std::string> text = ctx.attrs().GetString(name);
  if (!text.ok()) return ctx.Error(text.status().message());
  absl::StatusOr<DataType> dtype = ParseDataType(*text);
  if (!dtype.ok()) {
    return ctx.Error(absl::StrCat("attribute '", name, "': ", dtype.status().message()));
  }
  return dtype;
}

std::string MetaText(const TensorMeta& m) {
  return absl::StrCat(DataTypeName(m.dtype), m.shape.ToString());
}

absl::Status RequireFloat(const InferContext& ctx, const TensorMeta& meta, absl::string_view what) {
  if (IsFloating(meta.dtype)) return absl::OkStatus();
  return ctx.Error(absl::StrCat(what, " is ", MetaText(meta), "; it must be f32 or f64"));
}

GradOpDesc GradOp(std::string type,
                  std::vector<std::pair<std::string, std::vector<std::string>>> inputs,
                  std::vector<std::pair<std::string, std::vector<std::string>>> outputs,
                  vm::AttrMap attrs) {
  GradOpDesc desc;
  desc.type = std::move(type);
  desc.inputs = std::move(inputs);
  desc.outputs = std::move(outputs);
  desc.attrs = std::move(attrs);
  return desc;
}

vm::AttrMap GradAttrs(const GradContext& g, std::initializer_list<const char*> names) {
  vm::AttrMap attrs;
  for (const char* name : names) {
    auto it = g.attrs().values().find(name);
    if (it != g.attrs().values().end()) attrs.Set(name, it->second);
  }
  return attrs;
}

}  // namespace sluice::ops::internal
