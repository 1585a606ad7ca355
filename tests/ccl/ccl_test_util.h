// Helpers shared by the collective tests: the world (30 s timeout), contexts made once per
// process, and host values every rank generates deterministically from (rank, index, salt),
// so that each rank can compute what any collective must give.
//
// Every test of the binary runs on every rank in the same order, and contexts are created
// on first use, so every rank creates the same contexts at the same point (creating a
// context is collective). Tests keep their control flow rank-independent around
// collectives: a rank that skipped one would leave the others waiting until the timeout.
#ifndef SLUICE_TESTS_CCL_CCL_TEST_UTIL_H_
#define SLUICE_TESTS_CCL_CCL_TEST_UTIL_H_

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/data_type.h"
#include "core/device.h"
#include "core/shape.h"
#include "ep/ccl/collective.h"
#include "ep/ccl/world.h"
#include "framework/eager/collectives.h"
#include "framework/eager/context.h"
#include "framework/eager/tensor.h"

namespace sluice::ccltest {

using eager::ReduceOp;

// The process's world: MPI under mpirun, else this process alone.
inline std::shared_ptr<ep::ccl::World> TestWorld() {
  ep::ccl::WorldOptions options;
  options.timeout = absl::Seconds(30);
  absl::StatusOr<std::shared_ptr<ep::ccl::World>> world = ep::ccl::World::FromEnvironment(options);
  if (!world.ok()) {
    std::fprintf(stderr, "no world: %s\n", world.status().ToString().c_str());
    std::abort();
  }
  return *world;
}

inline eager::Context NewContext(bool check_sync, int max_jitter_us = 0) {
  eager::ContextOptions options;
  options.runtime.world = TestWorld();
  options.runtime.enable_cuda = false;
  options.runtime.num_sim_devices = 2;
  options.runtime.sim.max_jitter_us = max_jitter_us;
  options.runtime.sim.seed = 7;
  options.vm.check_sync = check_sync;
  absl::StatusOr<eager::Context> ctx = eager::Context::Create(options);
  if (!ctx.ok()) {
    std::fprintf(stderr, "no context: %s\n", ctx.status().ToString().c_str());
    std::abort();
  }
  return *ctx;
}

// One context per purpose, made on first use and kept for the process (every rank makes
// them in the same order because every rank runs the same tests in the same order).
inline eager::Context& OpsContext() {
  static eager::Context* const ctx = new eager::Context(NewContext(/*check_sync=*/false));
  return *ctx;
}
inline eager::Context& CheckedContext() {
  static eager::Context* const ctx =
      new eager::Context(NewContext(/*check_sync=*/true, /*max_jitter_us=*/20));
  return *ctx;
}
inline eager::Context& ErrorsContext() {
  static eager::Context* const ctx = new eager::Context(NewContext(/*check_sync=*/false));
  return *ctx;
}
inline eager::Context& GradContext() {
  static eager::Context* const ctx = new eager::Context(NewContext(/*check_sync=*/true));
  return *ctx;
}

inline Device Dev(const char* name) { return Device::Parse(name).value(); }

// The host element type of a dtype (bool as one byte, as tensors store it).
template <DataType D>
struct ElemOf;
template <>
struct ElemOf<DataType::kF32> {
  using type = float;
};
template <>
struct ElemOf<DataType::kF64> {
  using type = double;
};
template <>
struct ElemOf<DataType::kI32> {
  using type = int32_t;
};
template <>
struct ElemOf<DataType::kI64> {
  using type = int64_t;
};
template <>
struct ElemOf<DataType::kBool> {
  using type = uint8_t;
};

// Calls f(tag) with tag an std::integral_constant<DataType, dtype>.
template <typename F>
void VisitDtype(DataType dtype, F&& f) {
  switch (dtype) {
    case DataType::kF32:
      f(std::integral_constant<DataType, DataType::kF32>());
      break;
    case DataType::kF64:
      f(std::integral_constant<DataType, DataType::kF64>());
      break;
    case DataType::kI32:
      f(std::integral_constant<DataType, DataType::kI32>());
      break;
    case DataType::kI64:
      f(std::integral_constant<DataType, DataType::kI64>());
      break;
    case DataType::kBool:
      f(std::integral_constant<DataType, DataType::kBool>());
      break;
  }
}

inline uint64_t Mix(int rank, int64_t i, int salt) {
  uint64_t h = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;
  h ^= static_cast<uint64_t>(rank + 1) * 0xC2B2AE3D27D4EB4Full;
  h ^= static_cast<uint64_t>(salt + 1) * 0x165667B19E3779F9ull;
  h ^= h >> 31;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 29;
  return h;
}

// Element i of rank `rank`'s data: a small integer in [-6, 6] (so sums of a few ranks are
// exact in every dtype), or for bool true two times in three.
template <typename T>
T Value(int rank, int64_t i, int salt) {
  const uint64_t h = Mix(rank, i, salt);
  if constexpr (std::is_same_v<T, uint8_t>) {
    return static_cast<uint8_t>(h % 3 != 0);
  } else {
    return static_cast<T>(static_cast<int64_t>(h % 13) - 6);
  }
}

template <typename T>
std::vector<T> Values(int rank, int64_t count, int salt) {
  std::vector<T> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = Value<T>(rank, i, salt);
  return v;
}

// One reduction step as a collective does it. On bool (bytes 0 and 1), sum and max are a
// logical or and min a logical and.
template <typename T>
T Combine(ReduceOp op, T a, T b) {
  if constexpr (std::is_same_v<T, uint8_t>) {
    return op == ReduceOp::kMin ? static_cast<uint8_t>(a && b) : static_cast<uint8_t>(a || b);
  } else {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kMean:
        return static_cast<T>(a + b);
      case ReduceOp::kMax:
        return std::max(a, b);
      case ReduceOp::kMin:
        return std::min(a, b);
    }
    return a;
  }
}

// The reduction over ranks 0..size-1 of Values(rank, count, salt). A mean is the sum
// divided by the number of ranks in the element type (integers round toward zero).
template <typename T>
std::vector<T> Reduction(ReduceOp op, int size, int64_t count, int salt) {
  std::vector<T> acc = Values<T>(0, count, salt);
  for (int r = 1; r < size; ++r) {
    const std::vector<T> v = Values<T>(r, count, salt);
    for (size_t i = 0; i < acc.size(); ++i) acc[i] = Combine(op, acc[i], v[i]);
  }
  if constexpr (!std::is_same_v<T, uint8_t>) {
    if (op == ReduceOp::kMean) {
      for (T& x : acc) x = static_cast<T>(x / size);
    }
  }
  return acc;
}

template <typename T>
absl::Span<const uint8_t> AsBytes(const std::vector<T>& v) {
  return absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(T));
}

template <typename T>
absl::StatusOr<eager::Tensor> MakeTensor(eager::Context& ctx, DataType dtype,
                                         const std::vector<T>& values, const Shape& shape,
                                         Device device) {
  return ctx.FromBytes(dtype, shape, AsBytes(values), device);
}

// The tensor's contents as T (bool as bytes).
template <typename T>
absl::StatusOr<std::vector<T>> Read(const eager::Tensor& t) {
  absl::StatusOr<std::vector<uint8_t>> bytes = t.ToBytes();
  if (!bytes.ok()) return bytes.status();
  std::vector<T> v(bytes->size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), bytes->data(), bytes->size());
  return v;
}

// Empty when equal, else a description of the size difference or the first differing
// elements (at most a few, with the count of all).
template <typename T>
std::string Diff(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) {
    return absl::StrCat("got ", got.size(), " elements, want ", want.size());
  }
  std::string text;
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i]) continue;
    if (++bad <= 4) {
      using P = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
      absl::StrAppend(&text, " [", i, "] got ", static_cast<P>(got[i]), " want ",
                      static_cast<P>(want[i]), ";");
    }
  }
  if (bad == 0) return "";
  return absl::StrCat(bad, " of ", got.size(), " elements differ:", text);
}

}  // namespace sluice::ccltest

#endif  // SLUICE_TESTS_CCL_CCL_TEST_UTIL_H_
