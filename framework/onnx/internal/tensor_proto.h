// Conversions between ONNX's protobuf messages and Sluice's value types: tensor data types,
// TensorProto constants (initializers, Constant nodes) to HostTensors, and the declared
// shapes of graph inputs. Private to framework/onnx/.
//
// Functions only; pure and thread-safe.
#ifndef SLUICE_FRAMEWORK_ONNX_INTERNAL_TENSOR_PROTO_H_
#define SLUICE_FRAMEWORK_ONNX_INTERNAL_TENSOR_PROTO_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "core/data_type.h"
#include "framework/interpreter/host_tensor.h"
#include "framework/onnx/onnx_import_options.h"
#include "onnx/onnx_pb.h"

namespace sluice::framework::onnx::internal {

// ONNX's name for TensorProto data type `type` ("FLOAT", "FLOAT16", ...; "type N" for a code
// this ONNX does not know).
std::string OnnxTypeName(int32_t type);

// The Sluice dtype of ONNX data type `type`: FLOAT, DOUBLE, INT32, INT64 and BOOL map;
// anything else is InvalidArgument naming the type and `what` (the tensor or value).
absl::StatusOr<DataType> DtypeOfOnnxType(int32_t type, const std::string& what);
// The ONNX data type of `dtype`.
int32_t OnnxTypeOfDtype(DataType dtype);

// The tensor's value. Reads raw_data (little-endian) or the typed repeated fields.
// InvalidArgument naming the tensor for an unsupported data type, data stored outside the
// model (external data), a negative dimension, or a byte or element count that does not
// match the dimensions.
absl::StatusOr<HostTensor> HostTensorOfProto(const ::onnx::TensorProto& tensor);

// The static shape of graph input `info`: each dimension is its dim_value, or for a
// dim_param its size in `options.dim_sizes`, or the whole shape from
// `options.input_shapes`. InvalidArgument naming the input and dimension, and how to give
// its size, when a dimension is unknown; InvalidArgument when the value is not a tensor.
absl::StatusOr<Shape> InputShape(const ::onnx::ValueInfoProto& info,
                                 const OnnxImportOptions& options);

// OK when `value` can stand for graph input `info` (OnnxImportOptions::constant_inputs): its
// dtype is the input's, its rank the declared one's and each fixed dimension agrees;
// InvalidArgument naming the input otherwise.
absl::Status CheckConstantInput(const ::onnx::ValueInfoProto& info, const HostTensor& value);

// The value's declared shape when every dimension is a number; false otherwise (no type,
// no shape, or a symbolic dimension).
bool StaticShapeOf(const ::onnx::ValueInfoProto& info, Shape* shape);

}  // namespace sluice::framework::onnx::internal

#endif  // SLUICE_FRAMEWORK_ONNX_INTERNAL_TENSOR_PROTO_H_
