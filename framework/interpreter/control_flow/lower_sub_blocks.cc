#include "framework/interpreter/control_flow/lower_sub_blocks.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/interpreter/control_flow/loop_stages.h"
#include "framework/interpreter/placement.h"
#include "framework/ir/control_flow.h"
#include "vm/virtual_machine.h"

namespace sluice::framework::control_flow {
namespace {

// A pipelined loop's iterations in flight at most (each one holds a slot: frames and
// current values of its own).
constexpr int64_t kMaxInFlight = 16;

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

std::unique_ptr<vm::StepSequence> SubBlockLowering::Sequence(
    std::vector<PendingFrame::Call>& calls) const {
  auto steps = std::make_unique<vm::StepSequence>();
  steps->set_cancel_flag(cancel_);
  steps->set_ops_counter(ops_run_);
  for (PendingFrame::Call& call : calls) {
    steps->AddCall(*call.kernel, std::move(call.reads), std::move(call.writes),
                   std::move(call.attrs));
    if (call.origin != nullptr) steps->set_step_origin(steps->steps() - 1, call.origin);
  }
  steps->Close();
  return steps;
}

Frame SubBlockLowering::Finish(PendingFrame pending, absl::Span<vm::Blob* const> keep) const {
  Frame frame = std::move(pending.frame);
  if (release_temporaries_) ShareStorage(pending, frame, keep);
  frame.steps = Sequence(pending.calls);
  return frame;
}

Frame SubBlockLowering::FinishStaged(PendingFrame pending,
                                     const std::vector<int>& stage_of_call) const {
  std::vector<PendingFrame::Call> ordered;
  std::vector<int> stage;
  for (int s = 0; s < 3; ++s) {
    for (size_t c = 0; c < pending.calls.size(); ++c) {
      if (stage_of_call[c] != s) continue;
      ordered.push_back(std::move(pending.calls[c]));
      stage.push_back(s);
    }
  }
  pending.calls = std::move(ordered);
  Frame frame = std::move(pending.frame);
  if (release_temporaries_) ShareStorage(pending, frame, {});
  size_t begin = 0;
  for (int s = 0; s < 3; ++s) {
    size_t end = begin;
    while (end < stage.size() && stage[end] == s) ++end;
    std::vector<PendingFrame::Call> calls(std::make_move_iterator(pending.calls.begin() + begin),
                                          std::make_move_iterator(pending.calls.begin() + end));
    frame.stages.push_back(Sequence(calls));
    begin = end;
  }
  return frame;
}

void SubBlockLowering::ShareStorage(PendingFrame& pending, Frame& frame,
                                    absl::Span<vm::Blob* const> keep) {
  // Each own blob's live range in call order: from its first touch, which must be a write
  // (else it carries a value in, and is not shared), to its last. Blobs a nested control
  // step touches are not shared either: its frames were bound to them by pointer.
  struct Range {
    size_t first = SIZE_MAX, last = 0;
    bool shareable = true;
  };
  absl::flat_hash_map<vm::Blob*, Range> ranges;
  for (const vm::BlobRef& blob : frame.blobs) ranges.emplace(blob.get(), Range());
  for (vm::Blob* blob : keep) {
    if (auto it = ranges.find(blob); it != ranges.end()) it->second.shareable = false;
  }
  for (size_t c = 0; c < pending.calls.size(); ++c) {
    const PendingFrame::Call& call = pending.calls[c];
    const bool nested = call.kernel->logs_own_steps();
    for (const auto* list : {&call.reads, &call.writes}) {
      for (vm::Blob* blob : *list) {
        auto it = ranges.find(blob);
        if (it == ranges.end()) continue;
        Range& range = it->second;
        if (range.first == SIZE_MAX) {
          range.first = c;
          const bool written =
              std::find(call.writes.begin(), call.writes.end(), blob) != call.writes.end();
          const bool read =
              std::find(call.reads.begin(), call.reads.end(), blob) != call.reads.end();
          if (!written || read) range.shareable = false;
        }
        range.last = c;
        if (nested) range.shareable = false;
      }
    }
  }
  // Greedy, in order of first write: a blob takes the storage (the blob) of an earlier one
  // of its dtype and shape whose range ended before it starts.
  std::vector<vm::Blob*> order;
  for (const vm::BlobRef& blob : frame.blobs) {
    const Range& range = ranges.at(blob.get());
    if (range.shareable && range.first != SIZE_MAX) order.push_back(blob.get());
  }
  std::sort(order.begin(), order.end(),
            [&](vm::Blob* a, vm::Blob* b) { return ranges.at(a).first < ranges.at(b).first; });
  absl::flat_hash_map<vm::Blob*, vm::Blob*> replaced;  // blob -> the blob it shares
  std::vector<vm::Blob*> holders;                      // blobs that keep their storage
  for (vm::Blob* blob : order) {
    const Range& range = ranges.at(blob);
    vm::Blob* host = nullptr;
    for (vm::Blob* holder : holders) {
      if (holder->dtype() == blob->dtype() && holder->shape() == blob->shape() &&
          ranges.at(holder).last < range.first) {
        host = holder;
        break;
      }
    }
    if (host == nullptr) {
      holders.push_back(blob);
      continue;
    }
    replaced.emplace(blob, host);
    ranges.at(host).last = range.last;
  }
  if (replaced.empty()) return;
  auto rebind = [&](std::vector<vm::Blob*>& blobs) {
    for (vm::Blob*& blob : blobs) {
      if (auto it = replaced.find(blob); it != replaced.end()) blob = it->second;
    }
  };
  for (PendingFrame::Call& call : pending.calls) {
    rebind(call.reads);
    rebind(call.writes);
  }
  rebind(frame.results);
  std::erase_if(frame.blobs,
                [&](const vm::BlobRef& blob) { return replaced.contains(blob.get()); });
}

void SubBlockLowering::WriteYieldsInPlace(PendingFrame& pending,
                                          const std::vector<vm::Blob*>& next) {
  Frame& frame = pending.frame;
  for (size_t i = 0; i < next.size(); ++i) {
    vm::Blob* const yielded = frame.results[i];
    const bool own = std::any_of(frame.blobs.begin(), frame.blobs.end(),
                                 [&](const vm::BlobRef& blob) { return blob.get() == yielded; });
    if (!own || std::count(frame.results.begin(), frame.results.end(), yielded) != 1) continue;
    int writers = 0;
    bool nested = false;  // a nested control step's frames hold the blob by pointer
    for (const PendingFrame::Call& call : pending.calls) {
      const bool writes =
          std::find(call.writes.begin(), call.writes.end(), yielded) != call.writes.end();
      const bool reads =
          std::find(call.reads.begin(), call.reads.end(), yielded) != call.reads.end();
      writers += writes ? 1 : 0;
      if ((writes || reads) && call.kernel->logs_own_steps()) nested = true;
    }
    if (writers != 1 || nested) continue;
    for (PendingFrame::Call& call : pending.calls) {
      std::replace(call.reads.begin(), call.reads.end(), yielded, next[i]);
      std::replace(call.writes.begin(), call.writes.end(), yielded, next[i]);
    }
    frame.results[i] = next[i];
    std::erase_if(frame.blobs, [&](const vm::BlobRef& blob) { return blob.get() == yielded; });
  }
}

absl::StatusOr<std::unique_ptr<ControlStep>> SubBlockLowering::Build(int block, int index,
                                                                     const ir::OpDesc& op,
                                                                     const Bindings& bound,
                                                                     const LoopIteration* loop) {
  const std::string where = Where(block, index, op.type);
  if (op.type == ir::kCondOp) return BuildCond(where, op, bound, loop);
  return BuildWhile(where, op, bound, loop, block == 0);
}

absl::StatusOr<std::unique_ptr<ControlStep>> SubBlockLowering::BuildCond(
    const std::string& where, const ir::OpDesc& op, const Bindings& bound,
    const LoopIteration* loop) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<vm::Blob*> pred,
                          Bound(bound, op.Input(ir::kCondSlot), where));
  SLUICE_ASSIGN_OR_RETURN(std::vector<vm::Blob*> out, Bound(bound, op.Output(ir::kOutSlot), where));
  std::array<Frame, 2> branches;
  const absl::string_view attrs[2] = {ir::kTrueBlockAttr, ir::kFalseBlockAttr};
  for (int b = 0; b < 2; ++b) {
    SLUICE_ASSIGN_OR_RETURN(vm::BlockRef ref, op.attrs.GetBlock(attrs[b]));
    SLUICE_ASSIGN_OR_RETURN(PendingFrame branch,
                            LowerBlock(static_cast<int>(ref.index), bound, loop));
    const std::vector<vm::Blob*> yielded = branch.frame.results;
    SLUICE_RETURN_IF_ERROR(AddYieldCopies(branch, yielded, out));
    branches[b] = Finish(std::move(branch), {});
  }
  return ControlStep::Cond(where, pred[0], std::move(branches[0]), std::move(branches[1]));
}

absl::StatusOr<std::unique_ptr<ControlStep>> SubBlockLowering::BuildWhile(
    const std::string& where, const ir::OpDesc& op, const Bindings& bound,
    const LoopIteration* enclosing, bool global_block) {
  int64_t parallel = 1;
  if (absl::StatusOr<int64_t> p = op.attrs.GetInt(ir::kParallelIterationsAttr); p.ok()) {
    parallel = *p;
  }
  // Iterations overlap only where other lanes can run them: a loop of block 0 on a cpu
  // stream, in a block lowered to lanes over more than one stream (the interpreter gives
  // a run counter only then).
  if (parallel > 1 && global_block && run_number_ != nullptr &&
      vm::VirtualMachine::RunsOnHost(*stream_)) {
    const int in_flight = static_cast<int>(std::min<int64_t>(parallel, kMaxInFlight));
    SLUICE_ASSIGN_OR_RETURN(std::optional<LoopFrames> pipelined,
                            BuildLoopFrames(where, op, bound, enclosing, in_flight));
    if (pipelined.has_value()) return ControlStep::While(where, std::move(*pipelined));
  }
  SLUICE_ASSIGN_OR_RETURN(std::optional<LoopFrames> loop,
                          BuildLoopFrames(where, op, bound, enclosing, 0));
  return ControlStep::While(where, std::move(*loop));
}

absl::StatusOr<std::optional<LoopFrames>> SubBlockLowering::BuildLoopFrames(
    const std::string& where, const ir::OpDesc& op, const Bindings& bound,
    const LoopIteration* enclosing, int in_flight) {
  const std::vector<std::string>& names = op.Output(ir::kOutSlot);
  SLUICE_ASSIGN_OR_RETURN(std::vector<vm::Blob*> x,
                          Bound(bound, op.Input(ir::kLoopVarsSlot), where));
  SLUICE_ASSIGN_OR_RETURN(std::vector<vm::Blob*> out, Bound(bound, names, where));
  SLUICE_ASSIGN_OR_RETURN(vm::BlockRef check, op.attrs.GetBlock(ir::kCondBlockAttr));
  SLUICE_ASSIGN_OR_RETURN(vm::BlockRef body, op.attrs.GetBlock(ir::kBodyBlockAttr));
  LoopFrames loop;
  if (absl::StatusOr<int64_t> max = op.attrs.GetInt(ir::kMaxIterationsAttr); max.ok()) {
    loop.max_iterations = *max;
  }
  loop.cancel = cancel_;
  loop.in_flight = in_flight;
  loop.run_number = run_number_;
  const int slots = in_flight > 0 ? in_flight + 1 : 2;
  std::vector<std::vector<vm::Blob*>> current(static_cast<size_t>(slots));
  for (int p = 0; p < slots; ++p) {
    for (size_t i = 0; i < out.size(); ++i) {
      SLUICE_ASSIGN_OR_RETURN(vm::BlobRef blob,
                              vm_.NewLazyBlob(stream_, out[i]->dtype(), out[i]->shape(),
                                              absl::StrCat(names[i], "@iter", p)));
      current[p].push_back(blob.get());
      loop.current.push_back(std::move(blob));
    }
    loop.iterations.push_back(std::make_unique<LoopIteration>(where, enclosing));
  }
  SLUICE_ASSIGN_OR_RETURN(loop.entry, CopyFrame(x, current[0]));
  // Pipelined: the stage of each body call, from slot 0 (every slot lowers the same calls
  // in the same order, over blobs of its own).
  std::vector<int> stage_of_call;
  for (int p = 0; p < slots; ++p) {
    const std::vector<vm::Blob*>& next = current[(p + 1) % slots];
    const LoopIteration* iteration = loop.iterations[static_cast<size_t>(p)].get();
    Bindings inside = bound;
    for (size_t i = 0; i < names.size(); ++i) inside[names[i]] = current[p][i];
    SLUICE_ASSIGN_OR_RETURN(PendingFrame check_frame,
                            LowerBlock(static_cast<int>(check.index), inside, iteration));
    // Which loop variables the condition reads (a pipelined loop's driver stage).
    std::vector<bool> check_reads(names.size(), false);
    if (in_flight > 0 && p == 0) {
      for (size_t i = 0; i < names.size(); ++i) {
        for (const PendingFrame::Call& call : check_frame.calls) {
          if (std::find(call.reads.begin(), call.reads.end(), current[p][i]) != call.reads.end()) {
            check_reads[i] = true;
          }
        }
        if (check_frame.frame.results[0] == current[p][i]) check_reads[i] = true;
      }
    }
    // The predicate is read after the frame ran: kept.
    const std::vector<vm::Blob*> predicate = check_frame.frame.results;
    loop.check.push_back(Finish(std::move(check_frame), predicate));
    SLUICE_ASSIGN_OR_RETURN(PendingFrame body_frame,
                            LowerBlock(static_cast<int>(body.index), inside, iteration));
    WriteYieldsInPlace(body_frame, next);
    // The body reads slot p and writes slot p + 1: no yield reads a value its copies
    // overwrite, and the copies keep their order.
    const std::vector<vm::Blob*> yielded = body_frame.frame.results;
    SLUICE_RETURN_IF_ERROR(AddYieldCopies(body_frame, yielded, next));
    if (in_flight > 0) {
      if (p == 0) {
        std::vector<StageCall> calls;
        for (const PendingFrame::Call& call : body_frame.calls) {
          calls.push_back({call.reads, call.writes, call.random});
        }
        LoopStages stages = SplitLoopBody(calls, current[p], next, check_reads);
        if (stages.stage.empty()) return std::optional<LoopFrames>();
        stage_of_call = std::move(stages.stage);
      }
      if (stage_of_call.size() != body_frame.calls.size()) {
        return absl::InternalError(absl::StrCat(where, ": slot ", p, " lowered ",
                                                body_frame.calls.size(), " body calls, slot 0 ",
                                                stage_of_call.size()));
      }
      loop.body.push_back(FinishStaged(std::move(body_frame), stage_of_call));
    } else {
      loop.body.push_back(Finish(std::move(body_frame), {}));
    }
    SLUICE_ASSIGN_OR_RETURN(Frame exit, CopyFrame(current[p], out));
    loop.exit.push_back(std::move(exit));
  }
  return std::optional<LoopFrames>(std::move(loop));
}

// Block `desc` as the passes see it: its own variables are temporaries; every other name
// in `bound` comes from an enclosing block and is read-only here (a write to it is refused,
// as a write to a fed variable is).
VarTable SubBlockLowering::ViewOf(const ir::BlockDesc& desc, const Bindings& bound,
                                  const ProgramBindings* top) const {
  VarTable vars;
  auto add = [&](const std::string& name, VarKind kind, DataType dtype, const Shape& shape) {
    vars.index_of.emplace(name, vars.size());
    vars.slots.push_back({name, kind, device_, dtype, shape, nullptr, false});
  };
  for (const ir::VarDesc& var : desc.vars()) {
    VarKind kind = VarKind::kTemp;
    if (top != nullptr && top->feeds.contains(var.name)) kind = VarKind::kFeed;
    if (top != nullptr && top->persistables.contains(var.name)) kind = VarKind::kPersistable;
    add(var.name, kind, var.dtype, var.shape);
  }
  for (const auto& [name, blob] : bound) {
    if (!desc.HasVar(name)) add(name, VarKind::kFeed, blob->dtype(), blob->shape());
  }
  return vars;
}

absl::StatusOr<SubBlockLowering::PendingFrame> SubBlockLowering::LowerBlock(
    int block, Bindings bound, const LoopIteration* loop, const ProgramBindings* top,
    const std::vector<std::string>* results) {
  const ir::BlockDesc& desc = program_.block(block);
  VarTable vars = ViewOf(desc, bound, top);
  // The passes block 0 goes through: schemas, attributes, inference against the declared
  // variables, kernels for the device; control-flow ops resolve to their outer reads.
  absl::StatusOr<PlacedBlock> placed =
      ResolveAndPlace(program_, desc, registry_, device_, vars, {});
  if (!placed.ok()) {
    return absl::Status(placed.status().code(),
                        absl::StrCat("block ", block, " ", placed.status().message()));
  }
  PendingFrame pending;
  Frame& frame = pending.frame;
  for (const ir::VarDesc& var : desc.vars()) {
    if (top != nullptr && (top->feeds.contains(var.name) || top->persistables.contains(var.name))) {
      continue;  // the caller's blob, already in `bound`
    }
    SLUICE_ASSIGN_OR_RETURN(vm::BlobRef blob,
                            vm_.NewLazyBlob(stream_, var.dtype, var.shape, var.name));
    bound[var.name] = blob.get();
    frame.blobs.push_back(std::move(blob));
  }
  for (const OpFunc& func : placed->funcs) {
    const std::string where = Where(block, func.source, func.type);
    auto names = [&vars](const std::vector<int>& slots) {
      std::vector<std::string> out;
      for (int v : slots) out.push_back(vars.slots[static_cast<size_t>(v)].name);
      return out;
    };
    SLUICE_ASSIGN_OR_RETURN(std::vector<vm::Blob*> reads, Bound(bound, names(func.inputs), where));
    SLUICE_ASSIGN_OR_RETURN(std::vector<vm::Blob*> writes,
                            Bound(bound, names(func.outputs), where));
    frame.origins.push_back(std::make_unique<StepOrigin>(where, loop));
    if (func.schema != nullptr) {
      pending.calls.push_back({func.kernel, std::move(reads), std::move(writes), func.attrs,
                               frame.origins.back().get(), func.random});
    } else {
      const ir::OpDesc& op = desc.ops()[static_cast<size_t>(func.source)];
      SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<ControlStep> nested,
                              Build(block, func.source, op, bound, loop));
      // Its sub-blocks may draw random numbers: a pipelined loop keeps it in order.
      pending.calls.push_back({nested.get(), std::move(reads), std::move(writes), nullptr,
                               frame.origins.back().get(), /*random=*/true});
      frame.nested.push_back(std::move(nested));
    }
  }
  if (results != nullptr) {
    SLUICE_ASSIGN_OR_RETURN(frame.results, Bound(bound, *results, absl::StrCat("block ", block)));
    return pending;
  }
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::string> yielded, ir::YieldedNames(program_, block));
  SLUICE_ASSIGN_OR_RETURN(frame.results, Bound(bound, yielded, absl::StrCat("block ", block)));
  return pending;
}

absl::StatusOr<Frame> SubBlockLowering::BuildProgram(const ProgramBindings& top,
                                                     const std::vector<std::string>& outputs) {
  const ir::BlockDesc& desc = program_.block(0);
  Bindings bound;
  for (const Bindings* group : {&top.feeds, &top.persistables}) {
    for (const auto& [name, blob] : *group) {
      const ir::VarDesc* declared = desc.FindVar(name);
      if (declared == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("block 0 has no variable '", name, "' to bind"));
      }
      const ir::VarDesc& var = *declared;
      if (blob->dtype() != var.dtype || blob->shape() != var.shape) {
        return absl::InvalidArgumentError(
            absl::StrCat("variable '", name, "' is declared ", DataTypeName(var.dtype), " ",
                         var.shape.ToString(), " but is bound to a ", DataTypeName(blob->dtype()),
                         " ", blob->shape().ToString(), " blob"));
      }
      bound[name] = blob;
    }
  }
  SLUICE_ASSIGN_OR_RETURN(PendingFrame pending,
                          LowerBlock(0, std::move(bound), nullptr, &top, &outputs));
  const std::vector<vm::Blob*> keep = pending.frame.results;
  return Finish(std::move(pending), keep);
}

absl::Status SubBlockLowering::AddCopy(PendingFrame& pending, vm::Blob* from, vm::Blob* to) const {
  if (from == to) return absl::OkStatus();
  SLUICE_ASSIGN_OR_RETURN(const vm::OpKernel* assign,
                          registry_.FindKernel("assign", device_.type(), from->dtype()));
  pending.calls.push_back({assign, {from}, {to}, nullptr, nullptr});
  return absl::OkStatus();
}

absl::Status SubBlockLowering::AddYieldCopies(PendingFrame& pending,
                                              const std::vector<vm::Blob*>& from,
                                              const std::vector<vm::Blob*>& to) const {
  struct Move {
    vm::Blob* from;
    vm::Blob* to;
  };
  // A destination named twice takes its last yield (every yield is read first); a value
  // copied onto itself is already in place.
  std::vector<Move> moves;
  for (size_t i = to.size(); i-- > 0;) {
    const bool later =
        std::any_of(moves.begin(), moves.end(), [&](const Move& m) { return m.to == to[i]; });
    if (!later && from[i] != to[i]) moves.push_back({from[i], to[i]});
  }
  std::reverse(moves.begin(), moves.end());
  auto still_read = [&moves](const vm::Blob* blob) {
    return std::any_of(moves.begin(), moves.end(), [&](const Move& m) { return m.from == blob; });
  };
  while (!moves.empty()) {
    // First the copies whose destination no pending copy reads (in yield order among them).
    auto ready =
        std::find_if(moves.begin(), moves.end(), [&](const Move& m) { return !still_read(m.to); });
    if (ready != moves.end()) {
      SLUICE_RETURN_IF_ERROR(AddCopy(pending, ready->from, ready->to));
      moves.erase(ready);
      continue;
    }
    // Every pending destination is still to be read: the copies form cycles. One
    // destination's value goes to a temporary of the frame, which its readers read
    // instead; that breaks one cycle.
    vm::Blob* const saved = moves.front().to;
    SLUICE_ASSIGN_OR_RETURN(vm::BlobRef temp,
                            vm_.NewLazyBlob(stream_, saved->dtype(), saved->shape(),
                                            absl::StrCat(saved->name(), "@yield")));
    SLUICE_RETURN_IF_ERROR(AddCopy(pending, saved, temp.get()));
    for (Move& m : moves) {
      if (m.from == saved) m.from = temp.get();
    }
    pending.frame.blobs.push_back(std::move(temp));
  }
  return absl::OkStatus();
}

absl::StatusOr<Frame> SubBlockLowering::CopyFrame(const std::vector<vm::Blob*>& from,
                                                  const std::vector<vm::Blob*>& to) const {
  PendingFrame pending;
  for (size_t i = 0; i < from.size(); ++i) SLUICE_RETURN_IF_ERROR(AddCopy(pending, from[i], to[i]));
  return Finish(std::move(pending), {});
}

}  // namespace sluice::framework::control_flow
