#include "framework/onnx/internal/tensor_proto.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"

namespace sluice::framework::onnx::internal {
namespace {

using ::onnx::TensorProto;

// Copies `n` elements of a repeated field into `out` as T.
template <typename T, typename Field>
void CopyField(const Field& field, int64_t n, HostTensor* out) {
  out->bytes.resize(static_cast<size_t>(n) * sizeof(T));
  for (int64_t i = 0; i < n; ++i) {
    const T value = static_cast<T>(field.Get(static_cast<int>(i)));
    std::memcpy(out->bytes.data() + i * sizeof(T), &value, sizeof(T));
  }
}

int64_t FieldSize(const TensorProto& tensor) {
  switch (tensor.data_type()) {
    case TensorProto::FLOAT:
      return tensor.float_data_size();
    case TensorProto::DOUBLE:
      return tensor.double_data_size();
    case TensorProto::INT64:
      return tensor.int64_data_size();
    default:
      return tensor.int32_data_size();  // INT32, BOOL
  }
}

// OK when `dims` fits graph input `info`'s declared shape (which it has): the same rank, and
// each dimension the model fixes equal. InvalidArgument naming the input, `what` the dims
// are, and the first disagreement otherwise.
absl::Status CheckAgainstDeclared(const ::onnx::ValueInfoProto& info,
                                  absl::Span<const int64_t> dims, absl::string_view what) {
  const auto& declared = info.type().tensor_type().shape().dim();
  const std::string prefix =
      absl::StrCat("graph input '", info.name(), "': ", what, " [", absl::StrJoin(dims, ","), "]");
  if (static_cast<int>(dims.size()) != declared.size()) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, " has rank ", dims.size(),
                                                   ", the model's has rank ", declared.size()));
  }
  for (int i = 0; i < declared.size(); ++i) {
    if (declared[i].has_dim_value() && declared[i].dim_value() != dims[i]) {
      return absl::InvalidArgumentError(absl::StrCat(prefix, " has ", dims[i], " in dimension ", i,
                                                     " where the model fixes ",
                                                     declared[i].dim_value()));
    }
  }
  return absl::OkStatus();
}

std::string TensorWhat(const TensorProto& tensor) {
  return tensor.name().empty() ? std::string("a constant tensor")
                               : absl::StrCat("tensor '", tensor.name(), "'");
}

}  // namespace

std::string OnnxTypeName(int32_t type) {
  if (!TensorProto::DataType_IsValid(type)) return absl::StrCat("type ", type);
  return TensorProto::DataType_Name(static_cast<TensorProto::DataType>(type));
}

absl::StatusOr<DataType> DtypeOfOnnxType(int32_t type, const std::string& what) {
  switch (type) {
    case TensorProto::FLOAT:
      return DataType::kF32;
    case TensorProto::DOUBLE:
      return DataType::kF64;
    case TensorProto::INT32:
      return DataType::kI32;
    case TensorProto::INT64:
      return DataType::kI64;
    case TensorProto::BOOL:
      return DataType::kBool;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(what, " has data type ", OnnxTypeName(type),
                       ", which Sluice does not have (it has FLOAT, DOUBLE, INT32, INT64 "
                       "and BOOL)"));
  }
}

int32_t OnnxTypeOfDtype(DataType dtype) {
  switch (dtype) {
    case DataType::kF32:
      return TensorProto::FLOAT;
    case DataType::kF64:
      return TensorProto::DOUBLE;
    case DataType::kI32:
      return TensorProto::INT32;
    case DataType::kI64:
      return TensorProto::INT64;
    case DataType::kBool:
      return TensorProto::BOOL;
  }
  return TensorProto::UNDEFINED;
}

absl::StatusOr<HostTensor> HostTensorOfProto(const TensorProto& tensor) {
  const std::string what = TensorWhat(tensor);
  if (tensor.data_location() == TensorProto::EXTERNAL || tensor.external_data_size() > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what,
                     " keeps its data outside the model file (external data), which the importer "
                     "does not read; save the model with its tensors inside"));
  }
  HostTensor out;
  SLUICE_ASSIGN_OR_RETURN(out.dtype, DtypeOfOnnxType(tensor.data_type(), what));
  std::vector<int64_t> dims(tensor.dims().begin(), tensor.dims().end());
  absl::StatusOr<Shape> shape = Shape::Make(dims);
  if (!shape.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " has dimensions [", absl::StrJoin(dims, ","), "]: ", shape.status().message()));
  }
  out.shape = *std::move(shape);
  const int64_t n = out.shape.NumElements();
  const size_t bytes = static_cast<size_t>(n) * SizeOf(out.dtype);
  if (tensor.has_raw_data()) {
    if (tensor.raw_data().size() != bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " holds ", tensor.raw_data().size(),
                       " bytes of data; its dimensions and type need ", bytes));
    }
    out.bytes.assign(tensor.raw_data().begin(), tensor.raw_data().end());
    return out;
  }
  if (FieldSize(tensor) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " holds ", FieldSize(tensor), " values; its dimensions need ", n));
  }
  switch (out.dtype) {
    case DataType::kF32:
      CopyField<float>(tensor.float_data(), n, &out);
      break;
    case DataType::kF64:
      CopyField<double>(tensor.double_data(), n, &out);
      break;
    case DataType::kI32:
      CopyField<int32_t>(tensor.int32_data(), n, &out);
      break;
    case DataType::kI64:
      CopyField<int64_t>(tensor.int64_data(), n, &out);
      break;
    case DataType::kBool:
      CopyField<bool>(tensor.int32_data(), n, &out);
      break;
  }
  return out;
}

absl::Status CheckConstantInput(const ::onnx::ValueInfoProto& info, const HostTensor& value) {
  const std::string what = absl::StrCat("graph input '", info.name(), "'");
  if (!info.type().has_tensor_type()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is not a tensor"));
  }
  SLUICE_ASSIGN_OR_RETURN(DataType dtype,
                          DtypeOfOnnxType(info.type().tensor_type().elem_type(), what));
  if (dtype != value.dtype) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is ", DataTypeName(dtype),
                                                   "; the constant given for it is ",
                                                   DataTypeName(value.dtype)));
  }
  if (!info.type().tensor_type().has_shape()) return absl::OkStatus();
  return CheckAgainstDeclared(info, value.shape.dims(), "the constant given for it");
  return absl::OkStatus();
}

bool StaticShapeOf(const ::onnx::ValueInfoProto& info, Shape* shape) {
  if (!info.type().has_tensor_type() || !info.type().tensor_type().has_shape()) return false;
  std::vector<int64_t> dims;
  for (const auto& dim : info.type().tensor_type().shape().dim()) {
    if (!dim.has_dim_value() || dim.dim_value() < 0) return false;
    dims.push_back(dim.dim_value());
  }
  *shape = Shape(dims);
  return true;
}

absl::StatusOr<Shape> InputShape(const ::onnx::ValueInfoProto& info,
                                 const OnnxImportOptions& options) {
  const std::string& name = info.name();
  if (!info.type().has_tensor_type()) {
    return absl::InvalidArgumentError(
        absl::StrCat("graph input '", name,
                     "' is not a tensor (sequences, maps and optional "
                     "values are not imported)"));
  }
  const auto& tensor_type = info.type().tensor_type();
  auto given = options.input_shapes.find(name);
  if (!tensor_type.has_shape()) {
    if (given != options.input_shapes.end()) return Shape(given->second);
    return absl::InvalidArgumentError(
        absl::StrCat("graph input '", name, "' has no shape in the model: give it (--input-shape ",
                     name, "=D0,D1,...; OnnxImportOptions::input_shapes)"));
  }
  const auto& model_dims = tensor_type.shape().dim();
  if (given != options.input_shapes.end()) {
    SLUICE_RETURN_IF_ERROR(CheckAgainstDeclared(info, given->second, "the given shape"));
    return Shape(given->second);
  }
  std::vector<int64_t> dims;
  for (int i = 0; i < model_dims.size(); ++i) {
    const auto& dim = model_dims[i];
    if (dim.has_dim_value()) {
      dims.push_back(dim.dim_value());
      continue;
    }
    if (dim.has_dim_param()) {
      auto size = options.dim_sizes.find(dim.dim_param());
      if (size != options.dim_sizes.end()) {
        dims.push_back(size->second);
        continue;
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "graph input '", name, "' dimension ", i, " is symbolic ('", dim.dim_param(),
          "'); Sluice programs are static: give its size (dim_sizes; --dim ", dim.dim_param(),
          "=N in sluice) or the input's shape (input_shapes; "
          "--input-shape ",
          name, "=D0,D1,... in sluice)"));
    }
    return absl::InvalidArgumentError(absl::StrCat("graph input '", name, "' dimension ", i,
                                                   " is unknown; Sluice programs are static: "
                                                   "give the input's shape (input_shapes; "
                                                   "--input-shape ",
                                                   name, "=D0,D1,... in sluice)"));
  }
  return Shape::Make(dims);
}

}  // namespace sluice::framework::onnx::internal
