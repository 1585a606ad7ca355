#include "stress/stress_reference.h"

#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/ir/control_flow.h"

namespace sluice::stress {
namespace {

namespace ir = framework::ir;
using framework::HostTensor;

// A value: f32 elements, or bool ones stored as 0 / 1.
struct Tensor {
  DataType dtype = DataType::kF32;
  Shape shape;
  std::vector<float> v;
};

// Variable names are unique program-wide (the builder's rule), so one map serves every
// block: a sub-block's run overwrites its own variables, never an ancestor's.
class Evaluator {
 public:
  explicit Evaluator(const ir::ProgramDesc& program) : program_(program) {}

  absl::Status Feed(const std::string& name, const HostTensor& t) {
    Tensor value{t.dtype, t.shape, std::vector<float>(static_cast<size_t>(t.shape.NumElements()))};
    if (t.dtype == DataType::kF32) {
      std::memcpy(value.v.data(), t.bytes.data(), value.v.size() * sizeof(float));
    } else if (t.dtype == DataType::kBool) {
      for (size_t i = 0; i < value.v.size(); ++i) value.v[i] = t.bytes[i] != 0 ? 1.0f : 0.0f;
    } else {
      return absl::UnimplementedError(
          absl::StrCat("feed '", name, "': dtype ", DataTypeName(t.dtype), " is not f32 or bool"));
    }
    env_[name] = std::move(value);
    return absl::OkStatus();
  }

  absl::StatusOr<HostTensor> Fetch(const std::string& name) const {
    SLUICE_ASSIGN_OR_RETURN(const Tensor* t, Get(name, "fetch"));
    HostTensor out{t->dtype, t->shape, {}};
    if (t->dtype == DataType::kF32) {
      out.bytes.resize(t->v.size() * sizeof(float));
      if (!t->v.empty()) std::memcpy(out.bytes.data(), t->v.data(), out.bytes.size());
    } else {
      for (float x : t->v) out.bytes.push_back(x != 0 ? 1 : 0);
    }
    return out;
  }

  absl::Status RunBlock(int block) {
    const std::vector<ir::OpDesc>& ops = program_.block(block).ops();
    for (size_t i = 0; i < ops.size(); ++i) {
      const std::string where = absl::StrCat("block ", block, " op #", i, " '", ops[i].type, "'");
      SLUICE_RETURN_IF_ERROR(RunOp(block, ops[i], where));
    }
    return absl::OkStatus();
  }

 private:
  absl::StatusOr<const Tensor*> Get(const std::string& name, const std::string& where) const {
    auto it = env_.find(name);
    if (it == env_.end()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": '", name, "' has no value"));
    }
    return &it->second;
  }

  absl::StatusOr<const Tensor*> In(const ir::OpDesc& op, absl::string_view slot, size_t k,
                                   const std::string& where) const {
    const std::vector<std::string>& names = op.Input(slot);
    if (k >= names.size()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": no input ", slot, "[", k, "]"));
    }
    return Get(names[k], where);
  }

  // The declared dtype and shape of `name` as seen from `block`.
  absl::StatusOr<Tensor> Declared(int block, const std::string& name,
                                  const std::string& where) const {
    const ir::VarDesc* var = ir::ResolveVar(program_, block, name);
    if (var == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": '", name, "' is not declared"));
    }
    if (var->dtype != DataType::kF32 && var->dtype != DataType::kBool) {
      return absl::UnimplementedError(
          absl::StrCat(where, ": '", name, "' is ", DataTypeName(var->dtype)));
    }
    return Tensor{var->dtype, var->shape,
                  std::vector<float>(static_cast<size_t>(var->shape.NumElements()))};
  }

  // Out = f(X, Y) elementwise; the operands have one size, or one of them a single element.
  template <typename F>
  absl::Status Binary(int block, const ir::OpDesc& op, const std::string& where, F f) {
    SLUICE_ASSIGN_OR_RETURN(const Tensor* x, In(op, "X", 0, where));
    SLUICE_ASSIGN_OR_RETURN(const Tensor* y, In(op, "Y", 0, where));
    SLUICE_ASSIGN_OR_RETURN(Tensor out, Declared(block, op.Output("Out")[0], where));
    const size_t n = out.v.size();
    const bool x_ok = x->v.size() == n || x->v.size() == 1;
    const bool y_ok = y->v.size() == n || y->v.size() == 1;
    if (!x_ok || !y_ok) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": operands ", x->shape.ToString(),
                                                     " and ", y->shape.ToString(),
                                                     " are not equal or a scalar"));
    }
    for (size_t i = 0; i < n; ++i) {
      out.v[i] = f(x->v[x->v.size() == 1 ? 0 : i], y->v[y->v.size() == 1 ? 0 : i]);
    }
    env_[op.Output("Out")[0]] = std::move(out);
    return absl::OkStatus();
  }

  template <typename F>
  absl::Status Unary(int block, const ir::OpDesc& op, const std::string& where, F f) {
    SLUICE_ASSIGN_OR_RETURN(const Tensor* x, In(op, "X", 0, where));
    SLUICE_ASSIGN_OR_RETURN(Tensor out, Declared(block, op.Output("Out")[0], where));
    if (x->v.size() != out.v.size()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": X and Out differ in size"));
    }
    for (size_t i = 0; i < out.v.size(); ++i) out.v[i] = f(x->v[i]);
    env_[op.Output("Out")[0]] = std::move(out);
    return absl::OkStatus();
  }

  absl::StatusOr<float> FloatAttr(const ir::OpDesc& op, absl::string_view name) const {
    SLUICE_ASSIGN_OR_RETURN(const double value, op.attrs.GetFloat(name));
    return static_cast<float>(value);
  }

  absl::Status RunOp(int block, const ir::OpDesc& op, const std::string& where) {
    const std::string& type = op.type;
    if (type == ir::kYieldOp) return absl::OkStatus();  // its caller reads the names
    if (type == ir::kCondOp) return RunCond(op, where);
    if (type == ir::kWhileOp) return RunWhile(op, where);
    if (type == "fill_constant") {
      SLUICE_ASSIGN_OR_RETURN(Tensor out, Declared(block, op.Output("Out")[0], where));
      SLUICE_ASSIGN_OR_RETURN(const float value, FloatAttr(op, "value"));
      for (float& x : out.v) x = out.dtype == DataType::kBool ? (value != 0 ? 1.0f : 0.0f) : value;
      env_[op.Output("Out")[0]] = std::move(out);
      return absl::OkStatus();
    }
    if (type == "add") return Binary(block, op, where, [](float x, float y) { return x + y; });
    if (type == "sub") return Binary(block, op, where, [](float x, float y) { return x - y; });
    if (type == "mul") return Binary(block, op, where, [](float x, float y) { return x * y; });
    if (type == "max") {
      return Binary(block, op, where, [](float x, float y) { return x >= y ? x : y; });
    }
    if (type == "min") {
      return Binary(block, op, where, [](float x, float y) { return x <= y ? x : y; });
    }
    if (type == "less_than") {
      return Binary(block, op, where, [](float x, float y) { return x < y ? 1.0f : 0.0f; });
    }
    if (type == "less_equal") {
      return Binary(block, op, where, [](float x, float y) { return x <= y ? 1.0f : 0.0f; });
    }
    if (type == "greater_than") {
      return Binary(block, op, where, [](float x, float y) { return x > y ? 1.0f : 0.0f; });
    }
    if (type == "greater_equal") {
      return Binary(block, op, where, [](float x, float y) { return x >= y ? 1.0f : 0.0f; });
    }
    if (type == "logical_and") {
      return Binary(block, op, where,
                    [](float x, float y) { return x != 0 && y != 0 ? 1.0f : 0.0f; });
    }
    if (type == "logical_or") {
      return Binary(block, op, where,
                    [](float x, float y) { return x != 0 || y != 0 ? 1.0f : 0.0f; });
    }
    if (type == "logical_not") {
      return Unary(block, op, where, [](float x) { return x != 0 ? 0.0f : 1.0f; });
    }
    if (type == "relu") return Unary(block, op, where, [](float x) { return x < 0 ? 0.0f : x; });
    if (type == "scale") {
      SLUICE_ASSIGN_OR_RETURN(const float s, FloatAttr(op, "scale"));
      SLUICE_ASSIGN_OR_RETURN(const float b, FloatAttr(op, "bias"));
      return Unary(block, op, where, [s, b](float x) { return s * x + b; });
    }
    if (type == "increment") {
      SLUICE_ASSIGN_OR_RETURN(const float step, FloatAttr(op, "value"));
      return Unary(block, op, where, [step](float x) { return x + step; });
    }
    if (type == "reshape") return Unary(block, op, where, [](float x) { return x; });
    if (type == "split") return RunSplit(block, op, where);
    return absl::UnimplementedError(absl::StrCat(where, ": not in the reference's op subset"));
  }

  absl::Status RunSplit(int block, const ir::OpDesc& op, const std::string& where) {
    SLUICE_ASSIGN_OR_RETURN(const Tensor* x, In(op, "X", 0, where));
    SLUICE_ASSIGN_OR_RETURN(const int64_t axis, op.attrs.GetInt("axis"));
    if (x->shape.rank() != 1 || axis != 0) {
      return absl::UnimplementedError(absl::StrCat(where, ": only rank 1 along axis 0"));
    }
    const Tensor source = *x;  // a copy: adding the pieces to env_ may move its values
    size_t offset = 0;
    for (const std::string& name : op.Output("Out")) {
      SLUICE_ASSIGN_OR_RETURN(Tensor out, Declared(block, name, where));
      if (offset + out.v.size() > source.v.size()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": pieces exceed X"));
      }
      std::copy(source.v.begin() + offset, source.v.begin() + offset + out.v.size(), out.v.begin());
      offset += out.v.size();
      env_[name] = std::move(out);
    }
    return absl::OkStatus();
  }

  // The values block `block` yields, copied (the caller may overwrite their names next).
  absl::StatusOr<std::vector<Tensor>> Yields(int block, const std::string& where) const {
    SLUICE_ASSIGN_OR_RETURN(const std::vector<std::string> names,
                            ir::YieldedNames(program_, block));
    std::vector<Tensor> values;
    for (const std::string& name : names) {
      SLUICE_ASSIGN_OR_RETURN(const Tensor* t, Get(name, where));
      values.push_back(*t);
    }
    return values;
  }

  absl::Status RunCond(const ir::OpDesc& op, const std::string& where) {
    SLUICE_ASSIGN_OR_RETURN(const Tensor* pred, In(op, ir::kCondSlot, 0, where));
    const bool taken = pred->v.at(0) != 0;
    SLUICE_ASSIGN_OR_RETURN(const vm::BlockRef branch,
                            op.attrs.GetBlock(taken ? ir::kTrueBlockAttr : ir::kFalseBlockAttr));
    SLUICE_RETURN_IF_ERROR(RunBlock(static_cast<int>(branch.index)));
    SLUICE_ASSIGN_OR_RETURN(std::vector<Tensor> values,
                            Yields(static_cast<int>(branch.index), where));
    const std::vector<std::string>& outs = op.Output(ir::kOutSlot);
    for (size_t i = 0; i < outs.size() && i < values.size(); ++i) {
      env_[outs[i]] = std::move(values[i]);
    }
    return absl::OkStatus();
  }

  absl::Status RunWhile(const ir::OpDesc& op, const std::string& where) {
    SLUICE_ASSIGN_OR_RETURN(const vm::BlockRef cond_block, op.attrs.GetBlock(ir::kCondBlockAttr));
    SLUICE_ASSIGN_OR_RETURN(const vm::BlockRef body_block, op.attrs.GetBlock(ir::kBodyBlockAttr));
    const absl::StatusOr<int64_t> max_iterations = op.attrs.GetInt(ir::kMaxIterationsAttr);
    const std::vector<std::string>& xs = op.Input(ir::kLoopVarsSlot);
    const std::vector<std::string>& outs = op.Output(ir::kOutSlot);
    for (size_t i = 0; i < outs.size(); ++i) {
      SLUICE_ASSIGN_OR_RETURN(const Tensor* x, Get(xs.at(i), where));
      Tensor initial = *x;  // before env_[] may insert and move the values
      env_[outs[i]] = std::move(initial);
    }
    const int c = static_cast<int>(cond_block.index);
    const int b = static_cast<int>(body_block.index);
    for (int64_t iteration = 0;; ++iteration) {
      SLUICE_RETURN_IF_ERROR(RunBlock(c));
      SLUICE_ASSIGN_OR_RETURN(std::vector<Tensor> go, Yields(c, where));
      if (go.empty() || go[0].v.empty() || go[0].v[0] == 0) break;
      if (max_iterations.ok() && iteration >= *max_iterations) {
        return absl::ResourceExhaustedError(
            absl::StrCat(where, ": more than ", *max_iterations, " iterations"));
      }
      SLUICE_RETURN_IF_ERROR(RunBlock(b));
      SLUICE_ASSIGN_OR_RETURN(std::vector<Tensor> next, Yields(b, where));
      for (size_t i = 0; i < outs.size() && i < next.size(); ++i)
        env_[outs[i]] = std::move(next[i]);
    }
    return absl::OkStatus();
  }

  const ir::ProgramDesc& program_;
  absl::flat_hash_map<std::string, Tensor> env_;
};

}  // namespace

absl::StatusOr<std::vector<HostTensor>> EvaluateReference(const ir::ProgramDesc& program,
                                                          const framework::Feeds& feeds,
                                                          const std::vector<std::string>& fetches) {
  Evaluator evaluator(program);
  for (const auto& [name, value] : feeds) SLUICE_RETURN_IF_ERROR(evaluator.Feed(name, value));
  SLUICE_RETURN_IF_ERROR(evaluator.RunBlock(0));
  std::vector<HostTensor> out;
  for (const std::string& name : fetches) {
    SLUICE_ASSIGN_OR_RETURN(HostTensor t, evaluator.Fetch(name));
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace sluice::stress
