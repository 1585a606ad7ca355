#include "framework/builder/program.h"

#include <cctype>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/ir/control_flow.h"

namespace sluice::framework {
namespace {

struct GuardFrame {
  Program* main;
  Program* startup;
};

// The one piece of thread-local state (see ProgramGuard).
std::vector<GuardFrame>& GuardStack() {
  thread_local std::vector<GuardFrame> stack;
  return stack;
}

std::string MetaText(const ops::TensorMeta& m) {
  return absl::StrCat(DataTypeName(m.dtype), m.shape.ToString());
}

// "ParamOut" -> "param_out", "Out" -> "out".
std::string SnakeCase(absl::string_view slot) {
  std::string out;
  for (size_t i = 0; i < slot.size(); ++i) {
    const char c = slot[i];
    if (std::isupper(static_cast<unsigned char>(c))) {
      if (i > 0) out.push_back('_');
      out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// What both append paths decide before they touch the program.
struct PreparedOp {
  const ops::OpSchema* schema = nullptr;
  vm::AttrMap attrs;  // normalized, plus the stream attribute when given
  std::vector<std::vector<ops::TensorMeta>> outputs;
  ir::OpSlots inputs;  // names per slot; empty optional slots left out
};

// The block of `program` that has `name` (names are unique program-wide); -1 when none has.
int BlockOf(const ir::ProgramDesc& program, absl::string_view name) {
  for (int b = 0; b < program.num_blocks(); ++b) {
    if (program.block(b).HasVar(name)) return b;
  }
  return -1;
}

// `name` as seen from the program's current block; InvalidArgument starting with `where`
// when no block has it, or when it is a variable of a block the current one cannot see.
absl::StatusOr<const ir::VarDesc*> VisibleVar(const Program& program, const std::string& name,
                                              const std::string& where) {
  const int current = program.current_block();
  if (const ir::VarDesc* desc = ir::ResolveVar(program.desc(), current, name)) return desc;
  if (!program.HasVarAnywhere(name)) {
    return absl::InvalidArgumentError(absl::StrCat(where, " is not a variable of the program"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(where, " belongs to a block that block ", current,
                   " cannot see (a variable of another branch or loop body)"));
}

absl::StatusOr<PreparedOp> Prepare(Program& program, absl::string_view type,
                                   const std::vector<std::vector<Var>>& inputs,
                                   const vm::AttrMap& attrs, std::vector<int> output_counts) {
  PreparedOp prepared;
  absl::StatusOr<const ops::OpSchema*> schema = program.registry()->FindSchema(type);
  if (!schema.ok()) {
    return absl::NotFoundError(
        absl::StrCat("op '", type, "' is not registered (no schema in the program's registry)"));
  }
  prepared.schema = *schema;
  const std::vector<ops::ArgDef>& slots = prepared.schema->inputs();
  if (inputs.size() > slots.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("op '", type, "' has ", slots.size(), " input slot(s), got ", inputs.size()));
  }
  for (size_t s = inputs.size(); s < slots.size(); ++s) {
    if (!slots[s].optional) {
      return absl::InvalidArgumentError(absl::StrCat("op '", type, "': input '", slots[s].name,
                                                     "' is missing (got ", inputs.size(), " of ",
                                                     slots.size(), " input slots)"));
    }
  }

  std::vector<std::vector<ops::TensorMeta>> metas(slots.size());
  for (size_t s = 0; s < inputs.size(); ++s) {
    std::vector<std::string> names;
    for (size_t i = 0; i < inputs[s].size(); ++i) {
      const Var& var = inputs[s][i];
      const std::string where = absl::StrCat("op '", type, "': input '", slots[s].name, "'[", i,
                                             "] ('", var.name(), "')");
      if (!var.valid()) {
        return absl::InvalidArgumentError(absl::StrCat(where, " is an empty Var handle"));
      }
      if (var.program() != &program) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, " belongs to another Program than the one appended to"));
      }
      SLUICE_ASSIGN_OR_RETURN(const ir::VarDesc* desc, VisibleVar(program, var.name(), where));
      metas[s].push_back({desc->dtype, desc->shape});
      names.push_back(var.name());
    }
    if (!names.empty()) prepared.inputs.emplace_back(slots[s].name, std::move(names));
  }

  // The stream attribute is the interpreter's, not the schema's.
  vm::AttrMap schema_attrs = attrs;
  const bool has_stream = attrs.values().contains(kStreamAttr);
  absl::StatusOr<std::string> stream = ir::TakeStreamAttr(schema_attrs);
  if (!stream.ok() || (has_stream && stream->empty())) {
    return absl::InvalidArgumentError(
        absl::StrCat("op '", type, "': attribute '", kStreamAttr,
                     "' must be a stream name such as \"compute:1\""));
  }
  SLUICE_ASSIGN_OR_RETURN(prepared.attrs, prepared.schema->NormalizeAttrs(schema_attrs));
  SLUICE_ASSIGN_OR_RETURN(prepared.outputs, prepared.schema->InferOutputs(
                                                metas, prepared.attrs, std::move(output_counts)));
  if (has_stream) prepared.attrs.Set(std::string(kStreamAttr), *stream);
  return prepared;
}

}  // namespace

Program::Program(const ops::OpRegistry* registry) : registry_(registry) {}

std::string Program::UniqueName(absl::string_view prefix) {
  int64_t& counter = name_counters_[prefix];
  while (true) {
    std::string name = absl::StrCat(prefix, "_", counter++);
    if (!HasVarAnywhere(name)) return name;
  }
}

int Program::EnterNewBlock() {
  current_block_ = desc_.AppendBlock(current_block_);
  return current_block_;
}

void Program::LeaveBlock() {
  SLUICE_CHECK(current_block_ != 0);
  current_block_ = desc_.block(current_block_).parent_idx();
}

bool Program::HasVarAnywhere(absl::string_view name) const { return BlockOf(desc_, name) >= 0; }

ProgramGuard::ProgramGuard(Program& main, Program& startup) {
  GuardStack().push_back({&main, &startup});
}

ProgramGuard::~ProgramGuard() {
  SLUICE_CHECK(!GuardStack().empty());
  GuardStack().pop_back();
}

Program* CurrentMainProgram() {
  const std::vector<GuardFrame>& stack = GuardStack();
  return stack.empty() ? nullptr : stack.back().main;
}

Program* CurrentStartupProgram() {
  const std::vector<GuardFrame>& stack = GuardStack();
  return stack.empty() ? nullptr : stack.back().startup;
}

const ir::VarDesc& Var::desc() const {
  SLUICE_CHECK(program_ != nullptr);
  const int block = BlockOf(program_->desc(), name_);
  SLUICE_CHECK(block >= 0);
  return *program_->desc().block(block).FindVar(name_);
}

void Var::set_stop_gradient(bool stop) const {
  SLUICE_CHECK(program_ != nullptr);
  const int block = BlockOf(program_->desc(), name_);
  SLUICE_CHECK(block >= 0);
  program_->mutable_desc().mutable_block(block).FindMutableVar(name_)->stop_gradient = stop;
}

absl::StatusOr<Var> CreateVar(Program& program, ir::VarDesc desc) {
  std::string name = desc.name;
  const int block = BlockOf(program.desc(), name);
  if (block >= 0 && block != program.current_block()) {
    return absl::AlreadyExistsError(
        absl::StrCat("variable '", name, "' already exists in block ", block));
  }
  SLUICE_RETURN_IF_ERROR(program.mutable_desc()
                             .mutable_block(program.current_block())
                             .AddVar(std::move(desc))
                             .status());
  return Var(&program, std::move(name));
}

absl::StatusOr<Var> Data(absl::string_view name, Shape shape, DataType dtype) {
  Program* main = CurrentMainProgram();
  if (main == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("Data('", name, "'): no current main program (use a ProgramGuard)"));
  }
  if (main->current_block() != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("Data('", name, "'): feeds belong to the global block, and block ",
                     main->current_block(), " (a branch or loop body) is being built"));
  }
  if (main->HasVarAnywhere(name)) {
    return absl::AlreadyExistsError(
        absl::StrCat("Data('", name, "'): the main program already has a variable '", name, "'"));
  }
  ir::VarDesc desc;
  desc.name = std::string(name);
  desc.dtype = dtype;
  desc.shape = std::move(shape);
  desc.stop_gradient = true;
  return CreateVar(*main, std::move(desc));
}

absl::StatusOr<std::vector<std::vector<Var>>> AppendOp(Program& program, absl::string_view type,
                                                       const std::vector<std::vector<Var>>& inputs,
                                                       vm::AttrMap attrs,
                                                       std::vector<int> output_counts) {
  SLUICE_ASSIGN_OR_RETURN(PreparedOp prepared,
                          Prepare(program, type, inputs, attrs, std::move(output_counts)));
  const std::vector<ops::ArgDef>& slots = prepared.schema->outputs();

  // Pick the names first: nothing is added unless every output can be.
  std::vector<std::vector<std::string>> names;
  bool free = false;
  while (!free) {
    const std::string base = program.UniqueName(type);
    names.assign(slots.size(), {});
    free = true;
    for (size_t s = 0; s < slots.size(); ++s) {
      const std::string slot = SnakeCase(slots[s].name);
      for (size_t i = 0; i < prepared.outputs[s].size(); ++i) {
        std::string name = slots[s].variadic ? absl::StrCat(base, ".", slot, "_", i)
                                             : absl::StrCat(base, ".", slot);
        free = free && !program.HasVarAnywhere(name);
        names[s].push_back(std::move(name));
      }
    }
  }

  ir::OpDesc op;
  op.type = std::string(type);
  op.inputs = std::move(prepared.inputs);
  op.attrs = std::move(prepared.attrs);
  std::vector<std::vector<Var>> outputs(slots.size());
  for (size_t s = 0; s < slots.size(); ++s) {
    for (size_t i = 0; i < names[s].size(); ++i) {
      ir::VarDesc desc;
      desc.name = names[s][i];
      desc.dtype = prepared.outputs[s][i].dtype;
      desc.shape = prepared.outputs[s][i].shape;
      SLUICE_ASSIGN_OR_RETURN(Var var, CreateVar(program, std::move(desc)));
      outputs[s].push_back(std::move(var));
    }
    if (!names[s].empty()) op.outputs.emplace_back(slots[s].name, std::move(names[s]));
  }
  program.mutable_desc().mutable_block(program.current_block()).AppendOp(std::move(op));
  return outputs;
}

absl::Status AppendOpInto(Program& program, absl::string_view type,
                          const std::vector<std::vector<Var>>& inputs,
                          const std::vector<std::vector<Var>>& outputs, vm::AttrMap attrs) {
  std::vector<int> counts;
  for (const std::vector<Var>& slot : outputs) counts.push_back(static_cast<int>(slot.size()));
  SLUICE_ASSIGN_OR_RETURN(PreparedOp prepared,
                          Prepare(program, type, inputs, attrs, std::move(counts)));
  const std::vector<ops::ArgDef>& slots = prepared.schema->outputs();
  if (outputs.size() != slots.size()) {
    return absl::InvalidArgumentError(absl::StrCat("op '", type, "' has ", slots.size(),
                                                   " output slot(s), got ", outputs.size()));
  }
  ir::OpDesc op;
  op.type = std::string(type);
  op.inputs = std::move(prepared.inputs);
  op.attrs = std::move(prepared.attrs);
  for (size_t s = 0; s < slots.size(); ++s) {
    std::vector<std::string> names;
    for (size_t i = 0; i < outputs[s].size(); ++i) {
      const Var& var = outputs[s][i];
      const std::string where = absl::StrCat("op '", type, "': output '", slots[s].name, "'[", i,
                                             "] ('", var.name(), "')");
      if (var.program() != &program) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, var.valid() ? " belongs to another Program" : " is an empty Var handle"));
      }
      SLUICE_ASSIGN_OR_RETURN(const ir::VarDesc* desc, VisibleVar(program, var.name(), where));
      if (program.current_block() != 0 &&
          program.desc().block(program.current_block()).FindVar(var.name()) == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat(where,
                         " is a variable of an enclosing block; ops inside a cond branch "
                         "or loop body write only their own block's variables"));
      }
      const ops::TensorMeta have{desc->dtype, desc->shape};
      const ops::TensorMeta& want = prepared.outputs[s][i];
      if (!(have == want)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, " is ", MetaText(have), " but the op produces ", MetaText(want)));
      }
      names.push_back(var.name());
    }
    if (!names.empty()) op.outputs.emplace_back(slots[s].name, std::move(names));
  }
  program.mutable_desc().mutable_block(program.current_block()).AppendOp(std::move(op));
  return absl::OkStatus();
}

}  // namespace sluice::framework
