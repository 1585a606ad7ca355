#include "framework/interpreter/control_flow/lower_sub_blocks.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/ir/control_flow.h"
#include "ops/op_schema.h"

namespace sluice::framework::control_flow {
namespace {

std::string Where(int block, int index, const std::string& type) {
  return absl::StrCat("block ", block, " op #", index, " '", type, "'");
}

// The blobs `names` are bound to; InvalidArgument naming the op and the name otherwise.
absl::StatusOr<std::vector<vm::Blob*>> Bound(const Bindings& bound,
                                             const std::vector<std::string>& names,
                                             const std::string& where) {
  std::vector<vm::Blob*> blobs;
  for (const std::string& name : names) {
    auto it = bound.find(name);
    if (it == bound.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": '", name, "' is not a variable visible here"));
    }
    blobs.push_back(it->second);
  }
  return blobs;
}

}  // namespace

std::unique_ptr<vm::StepSequence> SubBlockLowering::NewSteps() const {
  auto steps = std::make_unique<vm::StepSequence>();
  steps->set_cancel_flag(cancel_);
  steps->set_ops_counter(ops_run_);
  return steps;
}

absl::StatusOr<std::unique_ptr<ControlStep>> SubBlockLowering::Build(int block, int index,
                                                                     const ir::OpDesc& op,
                                                                     const Bindings& bound) {
  const std::string where = Where(block, index, op.type);
  if (op.type == ir::kCondOp) return BuildCond(where, op, bound);
  return BuildWhile(where, op, bound);
}

absl::StatusOr<std::unique_ptr<ControlStep>> SubBlockLowering::BuildCond(const std::string& where,
                                                                         const ir::OpDesc& op,
                                                                         const Bindings& bound) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<vm::Blob*> pred,
                          Bound(bound, op.Input(ir::kCondSlot), where));
  SLUICE_ASSIGN_OR_RETURN(std::vector<vm::Blob*> out, Bound(bound, op.Output(ir::kOutSlot), where));
  std::array<Frame, 2> branches;
  const absl::string_view attrs[2] = {ir::kTrueBlockAttr, ir::kFalseBlockAttr};
  for (int b = 0; b < 2; ++b) {
    SLUICE_ASSIGN_OR_RETURN(vm::BlockRef ref, op.attrs.GetBlock(attrs[b]));
    SLUICE_ASSIGN_OR_RETURN(branches[b], LowerBlock(static_cast<int>(ref.index), bound));
    for (size_t i = 0; i < out.size(); ++i) {
      SLUICE_RETURN_IF_ERROR(AddCopy(*branches[b].steps, branches[b].results[i], out[i]));
    }
    branches[b].steps->Close();
  }
  return ControlStep::Cond(where, pred[0], std::move(branches[0]), std::move(branches[1]));
}

absl::StatusOr<std::unique_ptr<ControlStep>> SubBlockLowering::BuildWhile(const std::string& where,
                                                                          const ir::OpDesc& op,
                                                                          const Bindings& bound) {
  const std::vector<std::string>& names = op.Output(ir::kOutSlot);
  SLUICE_ASSIGN_OR_RETURN(std::vector<vm::Blob*> x,
                          Bound(bound, op.Input(ir::kLoopVarsSlot), where));
  SLUICE_ASSIGN_OR_RETURN(std::vector<vm::Blob*> out, Bound(bound, names, where));
  SLUICE_ASSIGN_OR_RETURN(vm::BlockRef check, op.attrs.GetBlock(ir::kCondBlockAttr));
  SLUICE_ASSIGN_OR_RETURN(vm::BlockRef body, op.attrs.GetBlock(ir::kBodyBlockAttr));
  ControlStep::Loop loop;
  if (absl::StatusOr<int64_t> max = op.attrs.GetInt(ir::kMaxIterationsAttr); max.ok()) {
    loop.max_iterations = *max;
  }
  loop.cancel = cancel_;
  std::array<std::vector<vm::Blob*>, 2> current;
  for (int p = 0; p < 2; ++p) {
    for (size_t i = 0; i < out.size(); ++i) {
      SLUICE_ASSIGN_OR_RETURN(vm::BlobRef blob,
                              vm_.NewLazyBlob(stream_, out[i]->dtype(), out[i]->shape(),
                                              absl::StrCat(names[i], "@iter", p)));
      current[p].push_back(blob.get());
      loop.current.push_back(std::move(blob));
    }
  }
  SLUICE_ASSIGN_OR_RETURN(loop.entry, CopyFrame(x, current[0]));
  for (int p = 0; p < 2; ++p) {
    Bindings inside = bound;
    for (size_t i = 0; i < names.size(); ++i) inside[names[i]] = current[p][i];
    SLUICE_ASSIGN_OR_RETURN(loop.check[p], LowerBlock(static_cast<int>(check.index), inside));
    loop.check[p].steps->Close();
    SLUICE_ASSIGN_OR_RETURN(loop.body[p], LowerBlock(static_cast<int>(body.index), inside));
    for (size_t i = 0; i < out.size(); ++i) {
      SLUICE_RETURN_IF_ERROR(
          AddCopy(*loop.body[p].steps, loop.body[p].results[i], current[1 - p][i]));
    }
    loop.body[p].steps->Close();
    SLUICE_ASSIGN_OR_RETURN(loop.exit[p], CopyFrame(current[p], out));
  }
  return ControlStep::While(where, std::move(loop));
}

absl::StatusOr<Frame> SubBlockLowering::LowerBlock(int block, Bindings bound) {
  Frame frame;
  frame.steps = NewSteps();
  const ir::BlockDesc& desc = program_.block(block);
  for (const ir::VarDesc& var : desc.vars()) {
    SLUICE_ASSIGN_OR_RETURN(vm::BlobRef blob,
                            vm_.NewLazyBlob(stream_, var.dtype, var.shape, var.name));
    bound[var.name] = blob.get();
    frame.blobs.push_back(std::move(blob));
  }
  const std::vector<ir::OpDesc>& ops = desc.ops();
  for (int k = 0; k < static_cast<int>(ops.size()); ++k) {
    if (ops[k].type == ir::kYieldOp) {
      SLUICE_ASSIGN_OR_RETURN(frame.results, Bound(bound, ops[k].Input(ir::kLoopVarsSlot),
                                                   Where(block, k, ops[k].type)));
      continue;
    }
    SLUICE_RETURN_IF_ERROR(LowerOp(block, k, ops[k], bound, frame));
  }
  return frame;
}

absl::Status SubBlockLowering::LowerOp(int block, int index, const ir::OpDesc& op,
                                       const Bindings& bound, Frame& frame) {
  const std::string where = Where(block, index, op.type);
  if (ir::IsControlFlowOp(op)) {
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<ControlStep> nested, Build(block, index, op, bound));
    SLUICE_ASSIGN_OR_RETURN(std::vector<vm::Blob*> reads,
                            Bound(bound, ir::OuterReads(program_, op), where));
    SLUICE_ASSIGN_OR_RETURN(std::vector<vm::Blob*> writes,
                            Bound(bound, op.Output(ir::kOutSlot), where));
    frame.steps->AddCall(*nested, reads, writes, nullptr);
    frame.nested.push_back(std::move(nested));
    return absl::OkStatus();
  }
  absl::StatusOr<const ops::OpSchema*> schema = registry_.FindSchema(op.type);
  if (!schema.ok())
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", schema.status().message()));
  vm::AttrMap given = op.attrs;
  given.Erase(ir::kStreamAttr);
  absl::StatusOr<vm::AttrMap> attrs = (*schema)->NormalizeAttrs(given);
  if (!attrs.ok())
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", attrs.status().message()));
  std::vector<vm::Blob*> inputs, outputs;
  for (const ops::ArgDef& arg : (*schema)->inputs()) {
    SLUICE_ASSIGN_OR_RETURN(std::vector<vm::Blob*> blobs, Bound(bound, op.Input(arg.name), where));
    inputs.insert(inputs.end(), blobs.begin(), blobs.end());
  }
  for (const ops::ArgDef& arg : (*schema)->outputs()) {
    SLUICE_ASSIGN_OR_RETURN(std::vector<vm::Blob*> blobs, Bound(bound, op.Output(arg.name), where));
    outputs.insert(outputs.end(), blobs.begin(), blobs.end());
  }
  const DataType key = !inputs.empty()    ? inputs.front()->dtype()
                       : !outputs.empty() ? outputs.front()->dtype()
                                          : DataType::kF32;
  absl::StatusOr<const vm::OpKernel*> kernel = registry_.FindKernel(op.type, DeviceType::kCpu, key);
  if (!kernel.ok())
    return absl::NotFoundError(absl::StrCat(where, ": ", kernel.status().message()));
  std::shared_ptr<const vm::AttrMap> shared;
  if (!attrs->empty()) shared = std::make_shared<const vm::AttrMap>(*std::move(attrs));
  frame.steps->AddCall(**kernel, inputs, outputs, std::move(shared));
  return absl::OkStatus();
}

absl::Status SubBlockLowering::AddCopy(vm::StepSequence& steps, vm::Blob* from, vm::Blob* to) {
  if (from == to) return absl::OkStatus();
  SLUICE_ASSIGN_OR_RETURN(const vm::OpKernel* assign,
                          registry_.FindKernel("assign", DeviceType::kCpu, from->dtype()));
  steps.AddCall(*assign, {from}, {to}, nullptr);
  return absl::OkStatus();
}

absl::StatusOr<Frame> SubBlockLowering::CopyFrame(const std::vector<vm::Blob*>& from,
                                                  const std::vector<vm::Blob*>& to) {
  Frame frame;
  frame.steps = NewSteps();
  for (size_t i = 0; i < from.size(); ++i) {
    SLUICE_RETURN_IF_ERROR(AddCopy(*frame.steps, from[i], to[i]));
  }
  frame.steps->Close();
  return frame;
}

}  // namespace sluice::framework::control_flow
