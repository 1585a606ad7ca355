#include "framework/distributed/data_parallel.h"

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/op_schema.h"

namespace sluice::framework {

namespace {

constexpr int kNever = std::numeric_limits<int>::max();

std::string OpWhere(int index, const ir::OpDesc& op) {
  return absl::StrCat("data parallel: op #", index, " '", op.type, "'");
}

// Re-infers the shapes of block 0's variables forward from the (already changed) feeds:
// every op's outputs from its inputs, as the builder did with the whole batch.
absl::Status InferShapes(ir::BlockDesc& block, const ops::OpRegistry& registry) {
  for (int i = 0; i < static_cast<int>(block.ops().size()); ++i) {
    const ir::OpDesc& op = block.ops()[i];
    SLUICE_ASSIGN_OR_RETURN(const ops::OpSchema* schema, registry.FindSchema(op.type));
    vm::AttrMap attrs = op.attrs;
    SLUICE_RETURN_IF_ERROR(ir::TakeStreamAttr(attrs).status());
    SLUICE_ASSIGN_OR_RETURN(vm::AttrMap normalized, schema->NormalizeAttrs(attrs));
    std::vector<std::vector<ops::TensorMeta>> inputs;
    for (const ops::ArgDef& arg : schema->inputs()) {
      inputs.emplace_back();
      for (const std::string& name : op.Input(arg.name)) {
        const ir::VarDesc* var = block.FindVar(name);
        if (var == nullptr) {
          return absl::InvalidArgumentError(
              absl::StrCat(OpWhere(i, op), ": reads undefined variable '", name, "'"));
        }
        inputs.back().push_back({var->dtype, var->shape});
      }
    }
    std::vector<int> counts;
    for (const ops::ArgDef& arg : schema->outputs()) {
      counts.push_back(static_cast<int>(op.Output(arg.name).size()));
    }
    absl::StatusOr<std::vector<std::vector<ops::TensorMeta>>> outputs =
        schema->InferOutputs(inputs, normalized, counts);
    if (!outputs.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          OpWhere(i, op), " does not take the per-rank shapes: ", outputs.status().message()));
    }
    for (size_t s = 0; s < schema->outputs().size(); ++s) {
      const std::vector<std::string>& names = op.Output(schema->outputs()[s].name);
      for (size_t k = 0; k < names.size() && k < (*outputs)[s].size(); ++k) {
        ir::VarDesc* var = block.FindMutableVar(names[k]);
        if (var == nullptr) continue;
        const ops::TensorMeta& meta = (*outputs)[s][k];
        if (var->persistable && var->shape != meta.shape) {
          return absl::InvalidArgumentError(absl::StrCat(
              OpWhere(i, op), ": persistable '", var->name, "' would change shape from ",
              var->shape.ToString(), " to ", meta.shape.ToString(),
              " with the per-rank batch (a persistable cannot depend on the batch)"));
        }
        var->shape = meta.shape;
        var->dtype = meta.dtype;
      }
    }
  }
  return absl::OkStatus();
}

ir::OpDesc Collective(std::string type, const std::vector<std::string>& vars, vm::AttrMap attrs) {
  ir::OpDesc op;
  op.type = std::move(type);
  op.inputs = {{"X", vars}};
  op.outputs = {{"Out", vars}};
  op.attrs = std::move(attrs);
  return op;
}

vm::AttrMap MeanAttrs() {
  vm::AttrMap attrs;
  attrs.Set("reduce", std::string("mean"));
  return attrs;
}

}  // namespace

absl::StatusOr<HostTensor> ShardFeed(const std::string& name, const HostTensor& feed, int rank,
                                     int size) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat("data parallel: feed '", name, "': rank ", rank, " of a world of ", size));
  }
  if (feed.shape.rank() < 1 || feed.shape.dim(0) % size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data parallel: feed '", name, "' ", DataTypeName(feed.dtype), feed.shape.ToString(),
        " does not split into ", size, " equal parts along its first dimension"));
  }
  std::vector<int64_t> dims(feed.shape.dims().begin(), feed.shape.dims().end());
  const int64_t rows = dims[0] / size;
  const size_t row_bytes = dims[0] == 0 ? 0 : feed.bytes.size() / static_cast<size_t>(dims[0]);
  dims[0] = rows;
  HostTensor shard;
  shard.dtype = feed.dtype;
  shard.shape = Shape(dims);
  const size_t begin = static_cast<size_t>(rank * rows) * row_bytes;
  shard.bytes.assign(feed.bytes.begin() + begin,
                     feed.bytes.begin() + begin + static_cast<size_t>(rows) * row_bytes);
  return shard;
}

namespace {

// Splits each of `split_feeds` (but options.replicated_feeds) into `size` equal parts
// along its first dimension in `out`'s global block, and infers the shapes after them again.
absl::Status SplitFeeds(ir::ProgramDesc& out, const ops::OpRegistry& registry,
                        absl::Span<const std::string> split_feeds, int size,
                        const DataParallelOptions& options) {
  ir::BlockDesc& block = out.mutable_global_block();
  absl::flat_hash_set<std::string> replicated(options.replicated_feeds.begin(),
                                              options.replicated_feeds.end());
  bool reshaped = false;
  absl::flat_hash_set<std::string> split;
  for (const std::string& name : split_feeds) {
    if (replicated.contains(name)) continue;
    if (!split.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("data parallel: feed '", name, "' is listed twice"));
    }
    ir::VarDesc* var = block.FindMutableVar(name);
    if (var == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("data parallel: feed '", name, "' is not a variable of the program"));
    }
    if (var->shape.rank() < 1 || var->shape.dim(0) % size != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("data parallel: feed '", name, "' ", var->shape.ToString(),
                       " does not split into ", size, " equal parts along its first dimension"));
    }
    if (size == 1) continue;
    std::vector<int64_t> dims(var->shape.dims().begin(), var->shape.dims().end());
    dims[0] /= size;
    var->shape = Shape(dims);
    reshaped = true;
  }
  if (reshaped) {
    if (out.num_blocks() > 1) {
      return absl::UnimplementedError(
          "data parallel: split feeds in a program with control flow (sub-blocks) are not "
          "supported: their shapes would have to be inferred again inside the sub-blocks");
    }
    SLUICE_RETURN_IF_ERROR(InferShapes(block, registry));
  }

  return absl::OkStatus();
}

// Accesses by variable in a block's ops: the last writer, the first read after it, and
// whether a read comes before any write (a read by the writing op itself, an in-place
// update, counts as before the write).
struct Accesses {
  absl::flat_hash_map<std::string, int> last_write, first_read_after;
  absl::flat_hash_map<std::string, bool> read_before_write;
};
Accesses ScanAccesses(const std::vector<ir::OpDesc>& ops) {
  Accesses acc;
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    for (const std::string& name : ops[i].InputNames()) {
      auto w = acc.last_write.find(name);
      if (w == acc.last_write.end()) {
        acc.read_before_write.emplace(name, true);
      } else if (!acc.first_read_after.contains(name)) {
        acc.first_read_after[name] = i;
      }
    }
    for (const std::string& name : ops[i].OutputNames()) {
      acc.read_before_write.emplace(name, false);
      acc.last_write[name] = i;
      acc.first_read_after.erase(name);
    }
  }
  return acc;
}

}  // namespace

absl::StatusOr<ir::ProgramDesc> MakeDataParallel(const ir::ProgramDesc& program,
                                                 const ops::OpRegistry& registry,
                                                 absl::Span<const std::string> split_feeds,
                                                 int size, const DataParallelOptions& options,
                                                 DataParallelStats* stats) {
  if (size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("data parallel: world size ", size));
  }
  DataParallelStats local;
  ir::ProgramDesc out = program;
  ir::BlockDesc& block = out.mutable_global_block();
  SLUICE_RETURN_IF_ERROR(SplitFeeds(out, registry, split_feeds, size, options));

  const std::vector<ir::OpDesc>& ops = block.ops();
  Accesses acc = ScanAccesses(ops);
  absl::flat_hash_map<std::string, int>& last_write = acc.last_write;
  const absl::flat_hash_map<std::string, int>& first_read_after = acc.first_read_after;
  const absl::flat_hash_map<std::string, bool>& read_before_write = acc.read_before_write;

  // Gradient buckets, in the order their gradients are produced.
  struct Grad {
    std::string name;
    int writer;
    int reader;
    DataType dtype;
    int64_t bytes;
  };
  std::vector<Grad> grads;
  for (const ir::VarDesc& var : block.vars()) {
    if (!var.is_parameter) continue;
    const std::string grad = var.name + "@GRAD";
    const ir::VarDesc* g = block.FindVar(grad);
    auto w = last_write.find(grad);
    if (g == nullptr || w == last_write.end()) continue;
    auto r = first_read_after.find(grad);
    grads.push_back({grad, w->second, r == first_read_after.end() ? kNever : r->second, g->dtype,
                     g->shape.NumElements() * static_cast<int64_t>(SizeOf(g->dtype))});
  }
  std::stable_sort(grads.begin(), grads.end(),
                   [](const Grad& a, const Grad& b) { return a.writer < b.writer; });
  // insert_after[i]: collectives to insert right after op i (-1: before every op).
  std::map<int, std::vector<ir::OpDesc>> insert_after;
  std::vector<std::string> bucket;
  int bucket_writer = -1, bucket_reader = kNever;
  int64_t bucket_bytes = 0;
  DataType bucket_dtype = DataType::kF32;
  auto close = [&] {
    if (bucket.empty()) return;
    insert_after[bucket_writer].push_back(Collective("all_reduce", bucket, MeanAttrs()));
    ++local.buckets;
    bucket.clear();
    bucket_writer = -1;
    bucket_reader = kNever;
    bucket_bytes = 0;
  };
  for (const Grad& g : grads) {
    // Joining must keep the all_reduce (after the latest writer) before every member's
    // first reader, in one dtype.
    if (!bucket.empty() && (g.writer >= bucket_reader || g.reader <= g.writer ||
                            g.dtype != bucket_dtype || bucket_bytes >= options.bucket_bytes)) {
      close();
    }
    bucket.push_back(g.name);
    bucket_writer = std::max(bucket_writer, g.writer);
    bucket_reader = std::min(bucket_reader, g.reader);
    bucket_dtype = g.dtype;
    bucket_bytes += g.bytes;
    ++local.gradients;
    local.gradient_bytes += g.bytes;
  }
  close();

  // Persistables initialized here: broadcast from rank 0 after their last writer.
  for (const ir::VarDesc& var : block.vars()) {
    auto rb = read_before_write.find(var.name);
    if (!var.persistable || rb == read_before_write.end() || rb->second) continue;
    vm::AttrMap attrs;
    attrs.Set("root", int64_t{0});
    insert_after[last_write[var.name]].push_back(Collective("broadcast", {var.name}, attrs));
    ++local.broadcasts;
  }

  std::vector<ir::OpDesc> rewritten;
  rewritten.reserve(ops.size() + insert_after.size());
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    rewritten.push_back(ops[i]);
    auto it = insert_after.find(i);
    if (it != insert_after.end()) {
      for (ir::OpDesc& op : it->second) rewritten.push_back(std::move(op));
    }
  }
  for (const std::string& name : options.averaged) {
    if (last_write.contains(name))
      rewritten.push_back(Collective("all_reduce", {name}, MeanAttrs()));
  }
  block.mutable_ops() = std::move(rewritten);
  if (stats != nullptr) *stats = local;
  return out;
}

namespace {

class DataParallelTransform final : public ProgramTransform {
 public:
  DataParallelTransform(const ops::OpRegistry* registry, int rank, int size,
                        DataParallelOptions options)
      : registry_(registry), rank_(rank), size_(size), options_(std::move(options)) {}

  absl::StatusOr<ir::ProgramDesc> Rewrite(const ir::ProgramDesc& program,
                                          absl::Span<const std::string> host_feeds) const override {
    // MakeDataParallel leaves options.replicated_feeds whole.
    return MakeDataParallel(program, *registry_, host_feeds, size_, options_);
  }

  absl::StatusOr<Feeds> MapFeeds(const Feeds& feeds, const BlobFeeds& device_feeds) const override {
    if (!device_feeds.empty()) {
      return absl::UnimplementedError(
          "data parallel: device-resident feeds are not split across ranks; feed host tensors");
    }
    Feeds shards;
    shards.reserve(feeds.size());
    for (const auto& [name, value] : feeds) {
      if (absl::c_linear_search(options_.replicated_feeds, name)) {
        shards.emplace_back(name, value);
        continue;
      }
      SLUICE_ASSIGN_OR_RETURN(HostTensor shard, ShardFeed(name, value, rank_, size_));
      shards.emplace_back(name, std::move(shard));
    }
    return shards;
  }

 private:
  const ops::OpRegistry* const registry_;
  const int rank_;
  const int size_;
  const DataParallelOptions options_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<const ProgramTransform>> MakeDataParallelTransform(
    const ops::OpRegistry* registry, int rank, int size, DataParallelOptions options) {
  if (registry == nullptr) return absl::InvalidArgumentError("data parallel: no op registry");
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat("data parallel: rank ", rank, " is not one of ", size, " ranks"));
  }
  return std::shared_ptr<const ProgramTransform>(
      std::make_shared<DataParallelTransform>(registry, rank, size, std::move(options)));
}

}  // namespace sluice::framework
