// What a node mapping (node_table.h) sees while the importer turns one ONNX node into
// Sluice ops: the node's inputs as program variables or folded constants, its attributes
// with their defaults, and where to put its outputs. The importer's state (GraphState) is
// the ONNX value name -> variable map and the constants; it lives for one import.
//
// Thread-compatible: one import, one thread.
#ifndef SLUICE_FRAMEWORK_ONNX_INTERNAL_NODE_CONTEXT_H_
#define SLUICE_FRAMEWORK_ONNX_INTERNAL_NODE_CONTEXT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "framework/builder/program.h"
#include "framework/builder/value.h"
#include "framework/interpreter/host_tensor.h"
#include "onnx/onnx_pb.h"

namespace sluice::framework::onnx::internal {

// The program under construction and what each ONNX value name stands for.
class GraphState {
 public:
  explicit GraphState(Program* program) : program_(program) {}

  Program& program() { return *program_; }

  // A variable name for ONNX name `onnx_name`: the name with characters the program format
  // or a file name cannot hold replaced by '_', suffixed "_N" when the program has it.
  std::string VarNameFor(absl::string_view onnx_name);

  // `onnx_name` is held by `var` (a graph input or an op's output).
  void BindVar(const std::string& onnx_name, Var var) {
    bound_vars_.insert(var.name());
    vars_[onnx_name] = std::move(var);
  }
  // Whether variable `var_name` already stands for an ONNX value (a feed, a persistable or
  // a node's output), so that a node yielding it again needs a copy.
  bool IsBoundVar(const std::string& var_name) const { return bound_vars_.contains(var_name); }
  // `onnx_name` is a constant (an initializer or a Constant node's output); it becomes a
  // persistable variable the first time an op reads it as a tensor.
  void BindConstant(const std::string& onnx_name, HostTensor value) {
    constants_[onnx_name] = std::move(value);
  }

  // `onnx_name` is a graph input fed at run time (errors that want a constant say so).
  void MarkGraphInput(const std::string& onnx_name) { graph_inputs_.insert(onnx_name); }
  bool IsGraphInput(absl::string_view onnx_name) const { return graph_inputs_.contains(onnx_name); }

  // Null when `onnx_name` is not a constant.
  const HostTensor* Constant(absl::string_view onnx_name) const;
  bool Has(absl::string_view onnx_name) const {
    return vars_.contains(onnx_name) || constants_.contains(onnx_name);
  }
  // The variable holding `onnx_name`, making a constant a persistable variable of the global
  // block first (also from inside a subgraph: sub-blocks read it as a capture).
  // NotFound naming the value when nothing defines it (yet).
  absl::StatusOr<Var> VarOf(const std::string& onnx_name);

  // ONNX's inferred static shapes by value name, where its shape inference ran (null
  // otherwise); not owned.
  void set_inferred_shapes(const absl::flat_hash_map<std::string, Shape>* shapes) {
    inferred_shapes_ = shapes;
  }
  const absl::flat_hash_map<std::string, Shape>* inferred_shapes() const {
    return inferred_shapes_;
  }

  // The persistables made so far, with their values, in creation order.
  std::vector<std::pair<std::string, HostTensor>>& persistables() { return persistables_; }

 private:
  Program* program_;
  absl::flat_hash_map<std::string, Var> vars_;
  absl::flat_hash_map<std::string, HostTensor> constants_;
  absl::flat_hash_set<std::string> bound_vars_;
  absl::flat_hash_set<std::string> graph_inputs_;
  const absl::flat_hash_map<std::string, Shape>* inferred_shapes_ = nullptr;
  std::vector<std::pair<std::string, HostTensor>> persistables_;
};

// One node's view. Errors from here name the node, its op type and the opset.
class NodeContext {
 public:
  NodeContext(const ::onnx::NodeProto& node, int64_t opset, GraphState* state)
      : node_(node), opset_(opset), state_(state) {}

  const ::onnx::NodeProto& node() const { return node_; }
  int64_t opset() const { return opset_; }
  GraphState& state() { return *state_; }

  // "node 'NAME' (TYPE, opset N)": how errors name the node.
  std::string Describe() const;
  // InvalidArgument "Describe(): reason".
  absl::Status Error(absl::string_view reason) const;

  // Inputs: ONNX marks an absent optional input with an empty name.
  int num_inputs() const { return node_.input_size(); }
  bool HasInput(int i) const { return i < node_.input_size() && !node_.input(i).empty(); }
  // Input i as a program variable; InvalidArgument when absent.
  absl::StatusOr<Value> Input(int i);
  // Every input, in order (each must be present).
  absl::StatusOr<std::vector<Value>> Inputs();
  // Input i's constant value; InvalidArgument naming the input when it is absent or not a
  // constant (an initializer or a Constant node's output), saying that `why` needs one.
  absl::StatusOr<const HostTensor*> ConstantInput(int i, absl::string_view why) const;
  // A constant integer input's values (INT64 or INT32).
  absl::StatusOr<std::vector<int64_t>> ConstantInts(int i, absl::string_view why) const;
  // A constant input holding one number (any shape of one element), as a double.
  absl::StatusOr<double> ConstantScalar(int i, absl::string_view why) const;

  // Attributes, by name; the defaults stand for absent ones. A present attribute of the
  // wrong type is InvalidArgument naming it.
  bool HasAttr(absl::string_view name) const { return FindAttr(name) != nullptr; }
  absl::StatusOr<int64_t> IntAttr(absl::string_view name, int64_t fallback) const;
  // An INT attribute that is a flag: 0 or 1 (anything else is InvalidArgument naming it, as
  // ONNX's own shape inference reads some flags as `== 1` and others as `!= 0`).
  absl::StatusOr<bool> FlagAttr(absl::string_view name, bool fallback) const;
  absl::StatusOr<double> FloatAttr(absl::string_view name, double fallback) const;
  absl::StatusOr<std::string> StringAttr(absl::string_view name, std::string fallback) const;
  absl::StatusOr<std::vector<int64_t>> IntsAttr(absl::string_view name,
                                                std::vector<int64_t> fallback) const;
  const ::onnx::AttributeProto* FindAttr(absl::string_view name) const;
  // InvalidArgument naming every attribute of the node that is not in `known`.
  absl::Status OnlyAttrs(std::initializer_list<absl::string_view> known) const;

  // Outputs: a node may leave trailing (or, marked empty, any) outputs unused.
  int num_outputs() const { return node_.output_size(); }
  bool WantsOutput(int i) const { return i < node_.output_size() && !node_.output(i).empty(); }
  // Output i is `value`'s variable, renamed to the output's ONNX name (VarNameFor).
  absl::Status SetOutput(int i, const Value& value);
  // Output i is a constant (Constant nodes, folded shape arithmetic).
  void SetConstantOutput(int i, HostTensor value);

 private:
  const ::onnx::NodeProto& node_;
  int64_t opset_;
  GraphState* state_;
};

}  // namespace sluice::framework::onnx::internal

#endif  // SLUICE_FRAMEWORK_ONNX_INTERNAL_NODE_CONTEXT_H_
