// eager::Context::FromBlob: a blob of the context's VM becomes a tensor without a copy —
// ordered after the work another builder submitted on it, usable by later ops, its storage
// released when the tensor dies; a tensor's own blob gives back that tensor; null, lazy,
// released and foreign blobs are refused.
#include <memory>
#include <vector>

#include "framework/eager/context.h"
#include "framework/eager/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "vm/instructions_builder.h"
#include "vm/sync_checker.h"

namespace sluice::eager::eager_from_blob_test {
namespace {

using ::testing::HasSubstr;

const Device kSim0(DeviceType::kSim, 0);
const Shape kShape({64});

Context NewContext() {
  ContextOptions options;
  options.runtime.num_sim_devices = 1;
  options.runtime.enable_cuda = false;
  options.runtime.sim.max_jitter_us = 5;
  options.vm.check_sync = true;
  return Context::Create(options).value();
}

// A blob of `context`'s VM on sim:0 filled with `value` by a builder of its own, not waited
// for (the builder may still hold the fill back when this returns).
vm::BlobRef FilledBlob(Context& context, vm::InstructionsBuilder& builder, double value) {
  vm::Stream* stream = context.vm()->GetStream("sim:0").value();
  vm::BlobRef blob = context.vm()->NewBlob(stream, DataType::kF32, kShape).value();
  const vm::OpKernel* fill =
      context.registry().FindKernel("fill_constant", DeviceType::kSim, DataType::kF32).value();
  vm::AttrMap attrs;
  attrs.Set("shape", std::vector<int64_t>{64}).Set("value", value);
  EXPECT_TRUE(builder.Call(*fill, {}, {blob}, std::move(attrs), stream).ok());
  return blob;
}

TEST(ContextFromBlobTest, AdoptsABlobOfItsVmOrderedAfterItsProducer) {
  Context context = NewContext();
  vm::InstructionsBuilder builder(context.vm());
  const int64_t live = context.LiveTensors();
  for (int round = 0; round < 20; ++round) {
    vm::BlobRef blob = FilledBlob(context, builder, 2.0 + round);
    absl::StatusOr<Tensor> t = context.FromBlob(std::move(blob));
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->device(), kSim0);
    EXPECT_EQ(t->shape(), kShape);
    // An op right away: ordered after the fill the other builder submitted.
    absl::StatusOr<std::vector<Tensor>> sum = context.Call("add", {{*t}, {*t}});
    ASSERT_TRUE(sum.ok()) << sum.status();
    EXPECT_EQ((*sum)[0].ToVector<float>().value(), std::vector<float>(64, 2 * (2.0f + round)));
  }
  SLUICE_CHECK(context.Sync().ok());
  EXPECT_EQ(context.LiveTensors(), live);  // every adopted tensor died (its blob released)
  EXPECT_EQ(context.vm()->sync_checker()->violation_count(), 0)
      << context.vm()->sync_checker()->status();
}

TEST(ContextFromBlobTest, ATensorsOwnBlobGivesBackThatTensor) {
  Context context = NewContext();
  Tensor t = context.FromVector(std::vector<float>(64, 1.5f), kShape, kSim0).value();
  const int64_t live = context.LiveTensors();
  absl::StatusOr<Tensor> again = context.FromBlob(t.blob());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(context.LiveTensors(), live);  // the same tensor, not a second owner
  EXPECT_EQ(again->blob().get(), t.blob().get());
  t = Tensor();
  EXPECT_EQ(again->ToVector<float>().value(), std::vector<float>(64, 1.5f));
}

TEST(ContextFromBlobTest, RefusesNullLazyReleasedAndForeignBlobs) {
  Context context = NewContext();
  Context other = NewContext();
  auto refused = [&](vm::BlobRef blob, const char* what) {
    absl::StatusOr<Tensor> t = context.FromBlob(std::move(blob));
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << t.status();
    EXPECT_THAT(t.status().message(), HasSubstr(what));
  };
  refused(nullptr, "null blob");
  vm::Stream* stream = context.vm()->GetStream("sim:0").value();
  refused(context.vm()->NewLazyBlob(stream, DataType::kF32, kShape).value(), "lazy");
  vm::BlobRef released = context.vm()->NewBlob(stream, DataType::kF32, kShape).value();
  {
    vm::InstructionsBuilder builder(context.vm());
    SLUICE_CHECK(builder.Release(released).ok());
  }
  SLUICE_CHECK(context.Sync().ok());
  refused(released, "released");
  vm::InstructionsBuilder other_builder(other.vm());
  refused(FilledBlob(other, other_builder, 1.0), "another VM");
  Tensor foreign = other.FromVector(std::vector<float>(64, 1.0f), kShape, kSim0).value();
  refused(foreign.blob(), "another eager context");
}

}  // namespace
}  // namespace sluice::eager::eager_from_blob_test
