// OnnxImportOptions: how an ONNX import sizes, or fixes, what the model leaves open
// (onnx_import.h).
// Value type.
#ifndef SLUICE_FRAMEWORK_ONNX_ONNX_IMPORT_OPTIONS_H_
#define SLUICE_FRAMEWORK_ONNX_ONNX_IMPORT_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "framework/interpreter/host_tensor.h"

namespace sluice::framework::onnx {

struct OnnxImportOptions {
  // Sizes for symbolic dimensions, by the dimension's name (its dim_param, e.g. "batch").
  absl::flat_hash_map<std::string, int64_t> dim_sizes;
  // Whole shapes for graph inputs, by ONNX input name; they replace the model's (each given
  // dimension must agree with a fixed one the model states).
  absl::flat_hash_map<std::string, std::vector<int64_t>> input_shapes;
  // Graph inputs taken as constants with these values, by ONNX input name: they are not
  // fed, and an op that takes such an input as an attribute (Reshape's shape, a Reduce's
  // axes, Clip's bounds, ...) folds it. A static engine specializes on them, as TensorRT does
  // on shape tensors; a caller feeding other values imports again. The value's dtype must
  // be the input's and each dimension the model fixes must agree.
  absl::flat_hash_map<std::string, HostTensor> constant_inputs;
};

}  // namespace sluice::framework::onnx

#endif  // SLUICE_FRAMEWORK_ONNX_ONNX_IMPORT_OPTIONS_H_
