// Helpers the ONNX import tests share: ModelBuilder makes ModelProtos with ONNX's protobuf
// classes; Runtime holds the standard op registry and one Executor; RunImported runs an
// imported program (its persistables written into a fresh scope first) and ImportAndRun
// imports and runs, failing the test on an error; value makers and ExpectFloats compare
// outputs with values the test computes.
#ifndef SLUICE_TESTS_FRAMEWORK_ONNX_TEST_UTIL_H_
#define SLUICE_TESTS_FRAMEWORK_ONNX_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/data_type.h"
#include "core/shape.h"
#include "framework/eager/context.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/host_tensor.h"
#include "framework/interpreter/scope.h"
#include "framework/io/scope_variables.h"
#include "framework/onnx/onnx_import.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"
#include "ops/op_registry.h"
#include "ops/standard_ops.h"
#include "tests/framework/program_test_util.h"

namespace sluice::framework::onnx::onnx_test {

using Dims = std::vector<int64_t>;

inline constexpr int32_t kFloat = ::onnx::TensorProto::FLOAT;
inline constexpr int32_t kInt32 = ::onnx::TensorProto::INT32;
inline constexpr int32_t kInt64 = ::onnx::TensorProto::INT64;
inline constexpr int32_t kBool = ::onnx::TensorProto::BOOL;

// ---------------------------------------------------------------------------------------
// Building models.

// One dimension of a declared shape: a size, a symbolic name (dim_param), or unknown.
struct Dim {
  Dim(int64_t v) : value(v) {}      // NOLINT(google-explicit-constructor): {2, "batch"} lists
  Dim(int v) : value(v) {}          // NOLINT(google-explicit-constructor)
  Dim(const char* p) : param(p) {}  // NOLINT(google-explicit-constructor)
  int64_t value = -1;               // -1 with no param: unknown
  std::string param;
};

inline void SetType(::onnx::ValueInfoProto* info, int32_t elem_type, const std::vector<Dim>& dims) {
  auto* tensor = info->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(elem_type);
  auto* shape = tensor->mutable_shape();
  for (const Dim& d : dims) {
    auto* dim = shape->add_dim();
    if (!d.param.empty()) {
      dim->set_dim_param(d.param);
    } else if (d.value >= 0) {
      dim->set_dim_value(d.value);
    }
  }
}

inline ::onnx::TensorProto FloatTensor(const std::string& name, const Dims& dims,
                                       const std::vector<float>& values) {
  ::onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(kFloat);
  for (int64_t d : dims) t.add_dims(d);
  for (float v : values) t.add_float_data(v);
  return t;
}

// The same as raw_data (little-endian bytes), the way exporters usually write it.
inline ::onnx::TensorProto RawFloatTensor(const std::string& name, const Dims& dims,
                                          const std::vector<float>& values) {
  ::onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(kFloat);
  for (int64_t d : dims) t.add_dims(d);
  t.set_raw_data(
      std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  return t;
}

inline ::onnx::TensorProto Int64Tensor(const std::string& name, const Dims& dims,
                                       const std::vector<int64_t>& values) {
  ::onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(kInt64);
  for (int64_t d : dims) t.add_dims(d);
  for (int64_t v : values) t.add_int64_data(v);
  return t;
}

class ModelBuilder {
 public:
  explicit ModelBuilder(int64_t opset = 13, int64_t ir_version = 8) {
    model_.set_ir_version(ir_version);
    model_.set_producer_name("onnx_import_test");
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    model_.mutable_graph()->set_name("test_graph");
  }

  ::onnx::ModelProto& model() { return model_; }
  ::onnx::GraphProto& graph() { return *model_.mutable_graph(); }

  void Input(const std::string& name, int32_t elem_type, const std::vector<Dim>& dims) {
    auto* info = graph().add_input();
    info->set_name(name);
    SetType(info, elem_type, dims);
  }
  void Output(const std::string& name, int32_t elem_type, const std::vector<Dim>& dims) {
    auto* info = graph().add_output();
    info->set_name(name);
    SetType(info, elem_type, dims);
  }
  void Initializer(::onnx::TensorProto tensor) { *graph().add_initializer() = std::move(tensor); }

  // A node named `name` (op type and name are what errors quote).
  ::onnx::NodeProto* Node(const std::string& op_type, const std::vector<std::string>& inputs,
                          const std::vector<std::string>& outputs, const std::string& name = "") {
    auto* node = graph().add_node();
    node->set_op_type(op_type);
    node->set_name(name.empty() ? absl::StrCat(op_type, "_", graph().node_size()) : name);
    for (const auto& in : inputs) node->add_input(in);
    for (const auto& out : outputs) node->add_output(out);
    return node;
  }

  std::string Bytes() const { return model_.SerializeAsString(); }

 private:
  ::onnx::ModelProto model_;
};

inline ::onnx::AttributeProto* NewAttr(::onnx::NodeProto* node, const std::string& name,
                                       ::onnx::AttributeProto::AttributeType type) {
  auto* attr = node->add_attribute();
  attr->set_name(name);
  attr->set_type(type);
  return attr;
}
inline void IntAttr(::onnx::NodeProto* node, const std::string& name, int64_t v) {
  NewAttr(node, name, ::onnx::AttributeProto::INT)->set_i(v);
}
inline void FloatAttr(::onnx::NodeProto* node, const std::string& name, float v) {
  NewAttr(node, name, ::onnx::AttributeProto::FLOAT)->set_f(v);
}
inline void IntsAttr(::onnx::NodeProto* node, const std::string& name, const Dims& v) {
  auto* attr = NewAttr(node, name, ::onnx::AttributeProto::INTS);
  for (int64_t x : v) attr->add_ints(x);
}
inline void TensorAttr(::onnx::NodeProto* node, const std::string& name, ::onnx::TensorProto t) {
  *NewAttr(node, name, ::onnx::AttributeProto::TENSOR)->mutable_t() = std::move(t);
}

// ---------------------------------------------------------------------------------------
// Importing and running.

class Runtime {
 public:
  static Runtime& Get() {
    static Runtime* runtime = new Runtime();
    return *runtime;
  }
  const ops::OpRegistry* registry() const { return &registry_; }
  Executor& executor() { return *executor_; }

 private:
  Runtime() {
    const absl::Status registered = ops::RegisterStandardOps(&registry_);
    EXPECT_TRUE(registered.ok()) << registered;
    context_ = program_test::NewContext();
    executor_ = std::make_unique<Executor>(&context_->registry(), context_->vm());
  }
  ops::OpRegistry registry_;
  std::unique_ptr<eager::Context> context_;
  std::unique_ptr<Executor> executor_;
};

inline absl::StatusOr<OnnxImport> Import(const ModelBuilder& m,
                                         const OnnxImportOptions& options = {}) {
  return ImportOnnxModel(m.Bytes(), Runtime::Get().registry(), options);
}

// Runs the imported program once: the persistables written into a fresh scope, `feeds` by
// ONNX input name; the fetches in OnnxImport::outputs order.
inline absl::StatusOr<std::vector<HostTensor>> RunImported(
    const OnnxImport& imported, const absl::flat_hash_map<std::string, HostTensor>& feeds) {
  Executor& executor = Runtime::Get().executor();
  Scope scope;
  for (const auto& [name, value] : imported.persistables) {
    const absl::Status written = io::WriteVariable(executor, &scope, name, value);
    if (!written.ok()) return written;
  }
  Feeds run_feeds;
  for (const OnnxValue& input : imported.inputs) {
    auto it = feeds.find(input.onnx_name);
    if (it == feeds.end()) {
      return absl::InvalidArgumentError(absl::StrCat("no feed for ", input.onnx_name));
    }
    run_feeds.emplace_back(input.var, it->second);
  }
  std::vector<std::string> fetches;
  for (const OnnxValue& output : imported.outputs) fetches.push_back(output.var);
  absl::StatusOr<RunResult> result = executor.Run(imported.program, run_feeds, fetches, &scope);
  if (!result.ok()) return result.status();
  return std::move(result->fetches);
}

// Imports and runs `m`, failing the test on an error.
inline std::vector<HostTensor> ImportAndRun(
    const ModelBuilder& m, const absl::flat_hash_map<std::string, HostTensor>& feeds,
    const OnnxImportOptions& options = {}) {
  absl::StatusOr<OnnxImport> imported = Import(m, options);
  EXPECT_TRUE(imported.ok()) << imported.status();
  if (!imported.ok()) return {};
  absl::StatusOr<std::vector<HostTensor>> out = RunImported(*imported, feeds);
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  EXPECT_EQ(out->size(), imported->outputs.size());
  return *std::move(out);
}

inline HostTensor F32(const std::vector<float>& v, const Dims& dims) {
  return HostTensor::FromVector(v, Shape(dims));
}
inline HostTensor I64(const std::vector<int64_t>& v, const Dims& dims) {
  return HostTensor::FromVector(v, Shape(dims));
}
inline HostTensor Bools(const std::vector<bool>& v, const Dims& dims) {
  HostTensor t{DataType::kBool, Shape(dims), {}};
  for (bool b : v) t.bytes.push_back(b ? 1 : 0);
  return t;
}
inline std::vector<bool> BoolValues(const HostTensor& t) {
  std::vector<bool> v;
  for (uint8_t b : t.bytes) v.push_back(b != 0);
  return v;
}

// n values from `start` by `step`.
inline std::vector<float> Ramp(int64_t n, float start = -1.0f, float step = 0.25f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i);
  return v;
}
// n values in [-2, 2) that are not in order (for softmax, reductions, matmul).
inline std::vector<float> Mixed(int64_t n, int seed = 1) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t s = 2654435761u * static_cast<uint32_t>(seed);
  for (int64_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    v[i] = static_cast<float>((s >> 8) % 4096) / 1024.0f - 2.0f;
  }
  return v;
}

inline int64_t NumElements(const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// A refused import: status `code`, and a message holding every one of `parts`.
inline void ExpectError(const absl::StatusOr<OnnxImport>& imported, absl::StatusCode code,
                        const std::vector<std::string>& parts) {
  ASSERT_FALSE(imported.ok()) << "imported, with " << imported->program.global_block().ops().size()
                              << " ops";
  EXPECT_EQ(imported.status().code(), code) << imported.status();
  for (const std::string& part : parts) {
    EXPECT_THAT(imported.status().message(), ::testing::HasSubstr(part));
  }
}

inline void ExpectFloats(const HostTensor& got, const std::vector<float>& want, const Dims& dims,
                         double tol = 1e-5) {
  ASSERT_EQ(got.dtype, DataType::kF32);
  EXPECT_EQ(got.shape, Shape(dims));
  const std::vector<float> v = got.ToVector<float>();
  ASSERT_EQ(v.size(), want.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == want[i]) continue;  // infinities included
    EXPECT_NEAR(v[i], want[i], tol * std::max(1.0, std::fabs(static_cast<double>(want[i]))))
        << "element " << i;
  }
}

}  // namespace sluice::framework::onnx::onnx_test

#endif  // SLUICE_TESTS_FRAMEWORK_ONNX_TEST_UTIL_H_
