// Host kernels (cpu and sim) of the index family (ops/index_ops.cc). gather, slice and where
// move elements as bytes, so one kernel serves every dtype (registered per key dtype); their
// grads and erf compute in f32 or f64. The grads read X's (and Y's) shape only
// (vm::OpKernel::ReadsShapeOnly), so a forward input need not stay alive for them. Sums run
// in a fixed order: gather_grad adds slices in the order of Index, where_grad adds the
// elements of OutGrad in row-major order. gather checks every index before it writes: one
// out of range fails the op at run time, naming the index.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/cpu/host_kernel.h"
#include "ops/internal/index_operands.h"
#include "ops/internal/index_rules.h"
#include "ops/internal/op_families.h"

namespace sluice::ops::internal {
namespace {

constexpr DataType kEveryDtype[] = {DataType::kF32, DataType::kF64, DataType::kI32, DataType::kI64,
                                    DataType::kBool};

// Calls fn(j, offsets) for every element j of `shape` in row-major order, offsets[k] being
// the offset of that element under strides[k] (element units, any sign).
template <size_t N, typename Fn>
void ForEachOffset(const Shape& shape, const std::array<Shape::Dims, N>& strides, Fn fn) {
  const int rank = shape.rank();
  const int64_t n = shape.NumElements();
  Shape::Dims counter(rank, 0);
  std::array<int64_t, N> offsets{};
  for (int64_t j = 0; j < n; ++j) {
    fn(j, offsets);
    for (int d = rank - 1; d >= 0; --d) {
      for (size_t k = 0; k < N; ++k) offsets[k] += strides[k][d];
      if (++counter[d] < shape.dim(d)) break;
      for (size_t k = 0; k < N; ++k) offsets[k] -= strides[k][d] * shape.dim(d);
      counter[d] = 0;
    }
  }
}

// The indices of gather as positions along the axis, or the error naming the first one out
// of range.
template <typename I>
absl::Status ResolveIndices(absl::string_view op, const I* index, const index::GatherDims& d,
                            std::vector<int64_t>* rows) {
  rows->resize(static_cast<size_t>(d.count));
  for (int64_t k = 0; k < d.count; ++k) {
    const int64_t row = index::ResolveIndex(static_cast<int64_t>(index[k]), d.size);
    if (row < 0) {
      return OpError(op, index::BadIndexMessage(k, static_cast<int64_t>(index[k]), d.size, d.axis));
    }
    (*rows)[k] = row;
  }
  return absl::OkStatus();
}

absl::Status ResolveAnyIndices(absl::string_view op, const HostTensor& index,
                               const index::GatherDims& d, std::vector<int64_t>* rows) {
  if (index.dtype == DataType::kI32) return ResolveIndices(op, index.as<const int32_t>(), d, rows);
  return ResolveIndices(op, index.as<const int64_t>(), d, rows);
}

// ---- gather ----

class GatherKernel final : public HostKernel {
 public:
  explicit GatherKernel(DataType key) : HostKernel("gather"), key_(key) {}

 protected:
  absl::StatusOr<HostWork> Prepare(const HostArgs& a) const override {
    SLUICE_ASSIGN_OR_RETURN(index::GatherDims d,
                            index::CheckGatherOperands(name(), a, /*grad=*/false, key_));
    if (a.outputs[0].size == 0) return HostWork(nullptr);
    return HostWork([op = std::string(name()), d = std::move(d), x = a.inputs[0].as<const char>(),
                     index = a.inputs[1], out = a.outputs[0].as<char>(),
                     bytes = SizeOf(key_)]() -> absl::Status {
      std::vector<int64_t> rows;
      SLUICE_RETURN_IF_ERROR(ResolveAnyIndices(op, index, d, &rows));
      const size_t chunk = static_cast<size_t>(d.inner) * bytes;
      char* dst = out;
      for (int64_t o = 0; o < d.outer; ++o) {
        for (const int64_t row : rows) {
          std::memcpy(dst, x + (o * d.size + row) * chunk, chunk);
          dst += chunk;
        }
      }
      return absl::OkStatus();
    });
  }

 private:
  const DataType key_;
};

// XGrad = 0, then XGrad[o, Index[k], i] += OutGrad[o, k, i] for k in order.
template <typename T>
class GatherGradKernel final : public HostKernel {
 public:
  GatherGradKernel() : HostKernel("gather_grad") {}
  bool ReadsShapeOnly(int input) const override { return input == 0; }

 protected:
  absl::StatusOr<HostWork> Prepare(const HostArgs& a) const override {
    SLUICE_ASSIGN_OR_RETURN(index::GatherDims d,
                            index::CheckGatherOperands(name(), a, /*grad=*/true, DataTypeOf<T>()));
    if (a.outputs[0].size == 0) return HostWork(nullptr);
    return HostWork([op = std::string(name()), d = std::move(d), index = a.inputs[1],
                     g = a.inputs[2].as<const T>(), dx = a.outputs[0].as<T>(),
                     n = a.outputs[0].size]() -> absl::Status {
      std::vector<int64_t> rows;
      SLUICE_RETURN_IF_ERROR(ResolveAnyIndices(op, index, d, &rows));
      std::fill(dx, dx + n, T(0));
      const T* src = g;
      for (int64_t o = 0; o < d.outer; ++o) {
        for (const int64_t row : rows) {
          T* dst = dx + (o * d.size + row) * d.inner;
          for (int64_t i = 0; i < d.inner; ++i) dst[i] += src[i];
          src += d.inner;
        }
      }
      return absl::OkStatus();
    });
  }
};

// ---- slice ----

// Out's strides into X (step times X's stride per dim) and the offset of Out's first element.
struct SliceWalk {
  Shape::Dims strides;
  int64_t base = 0;
};
SliceWalk MakeSliceWalk(const Shape& x, const index::SliceDims& d) {
  SliceWalk w;
  const Shape::Dims x_strides = x.Strides();
  w.strides.resize(x.rank());
  for (int i = 0; i < x.rank(); ++i) {
    w.strides[i] = d.step[i] * x_strides[i];
    w.base += d.first[i] * x_strides[i];
  }
  return w;
}

template <typename E>
void CopySliced(const E* x, E* out, const Shape& out_shape, const SliceWalk& w, bool backward) {
  ForEachOffset<1>(out_shape, {w.strides}, [&](int64_t j, const std::array<int64_t, 1>& off) {
    if (backward) {
      out[w.base + off[0]] = x[j];
    } else {
      out[j] = x[w.base + off[0]];
    }
  });
}

// By element size: slice moves bytes.
void CopySlicedBytes(const void* x, void* out, size_t bytes, const Shape& out_shape,
                     const SliceWalk& w) {
  switch (bytes) {
    case 1:
      return CopySliced(static_cast<const uint8_t*>(x), static_cast<uint8_t*>(out), out_shape, w,
                        false);
    case 4:
      return CopySliced(static_cast<const uint32_t*>(x), static_cast<uint32_t*>(out), out_shape, w,
                        false);
    default:
      return CopySliced(static_cast<const uint64_t*>(x), static_cast<uint64_t*>(out), out_shape, w,
                        false);
  }
}

class SliceKernel final : public HostKernel {
 public:
  explicit SliceKernel(DataType key) : HostKernel("slice"), key_(key) {}

 protected:
  absl::StatusOr<HostWork> Prepare(const HostArgs& a) const override {
    SLUICE_ASSIGN_OR_RETURN(index::SliceDims d,
                            index::CheckSliceOperands(name(), a, /*grad=*/false, key_));
    if (a.outputs[0].size == 0) return HostWork(nullptr);
    return HostWork([w = MakeSliceWalk(*a.inputs[0].shape, d), out_shape = d.out,
                     x = a.inputs[0].data, out = a.outputs[0].data, bytes = SizeOf(key_)] {
      CopySlicedBytes(x, out, bytes, out_shape, w);
      return absl::OkStatus();
    });
  }

 private:
  const DataType key_;
};

// XGrad = 0, then OutGrad written back to the elements slice read (each one at most once).
template <typename T>
class SliceGradKernel final : public HostKernel {
 public:
  SliceGradKernel() : HostKernel("slice_grad") {}
  bool ReadsShapeOnly(int input) const override { return input == 0; }

 protected:
  absl::StatusOr<HostWork> Prepare(const HostArgs& a) const override {
    SLUICE_ASSIGN_OR_RETURN(index::SliceDims d,
                            index::CheckSliceOperands(name(), a, /*grad=*/true, DataTypeOf<T>()));
    if (a.outputs[0].size == 0) return HostWork(nullptr);
    return HostWork([w = MakeSliceWalk(*a.inputs[0].shape, d), out_shape = d.out,
                     g = a.inputs[1].as<const T>(), dx = a.outputs[0].as<T>(),
                     n = a.outputs[0].size] {
      std::fill(dx, dx + n, T(0));
      CopySliced(g, dx, out_shape, w, /*backward=*/true);
      return absl::OkStatus();
    });
  }
};

// ---- where ----

// The strides of Cond, X and Y read under `shape` (their broadcast).
std::array<Shape::Dims, 3> WhereStrides(const Shape& cond, const Shape& x, const Shape& y,
                                        const Shape& shape) {
  return {BroadcastStrides(cond, shape), BroadcastStrides(x, shape), BroadcastStrides(y, shape)};
}

template <typename E>
void Select(const uint8_t* cond, const E* x, const E* y, E* out, const Shape& shape,
            const std::array<Shape::Dims, 3>& strides) {
  ForEachOffset<3>(shape, strides, [&](int64_t j, const std::array<int64_t, 3>& off) {
    out[j] = cond[off[0]] != 0 ? x[off[1]] : y[off[2]];
  });
}

// Cond, X, Y -> Out, registered under Cond's bool; X and Y any dtype (moved as bytes).
class WhereKernel final : public HostKernel {
 public:
  WhereKernel() : HostKernel("where") {}

 protected:
  absl::StatusOr<HostWork> Prepare(const HostArgs& a) const override {
    SLUICE_ASSIGN_OR_RETURN(Shape shape, index::CheckWhereOperands(name(), a));
    if (a.outputs[0].size == 0) return HostWork(nullptr);
    return HostWork(
        [strides = WhereStrides(*a.inputs[0].shape, *a.inputs[1].shape, *a.inputs[2].shape, shape),
         shape, c = a.inputs[0].as<const uint8_t>(), x = a.inputs[1].data, y = a.inputs[2].data,
         out = a.outputs[0].data, bytes = SizeOf(a.inputs[1].dtype)] {
          switch (bytes) {
            case 1:
              Select(c, static_cast<const uint8_t*>(x), static_cast<const uint8_t*>(y),
                     static_cast<uint8_t*>(out), shape, strides);
              break;
            case 4:
              Select(c, static_cast<const uint32_t*>(x), static_cast<const uint32_t*>(y),
                     static_cast<uint32_t*>(out), shape, strides);
              break;
            default:
              Select(c, static_cast<const uint64_t*>(x), static_cast<const uint64_t*>(y),
                     static_cast<uint64_t*>(out), shape, strides);
              break;
          }
          return absl::OkStatus();
        });
  }
};

// OutGrad, Cond, X, Y -> XGrad, YGrad: zeros, then each element of OutGrad added to the
// gradient of the input where picked it, in row-major order.
template <typename T>
class WhereGradKernel final : public HostKernel {
 public:
  WhereGradKernel() : HostKernel("where_grad") {}
  bool ReadsShapeOnly(int input) const override { return input == 2 || input == 3; }

 protected:
  absl::StatusOr<HostWork> Prepare(const HostArgs& a) const override {
    SLUICE_ASSIGN_OR_RETURN(Shape shape, index::CheckWhereGradOperands(name(), a, DataTypeOf<T>()));
    if (a.outputs[0].size == 0 && a.outputs[1].size == 0) return HostWork(nullptr);
    return HostWork(
        [strides = WhereStrides(*a.inputs[1].shape, *a.inputs[2].shape, *a.inputs[3].shape, shape),
         shape, g = a.inputs[0].as<const T>(), c = a.inputs[1].as<const uint8_t>(),
         dx = a.outputs[0].as<T>(), dy = a.outputs[1].as<T>(), nx = a.outputs[0].size,
         ny = a.outputs[1].size] {
          std::fill(dx, dx + nx, T(0));
          std::fill(dy, dy + ny, T(0));
          ForEachOffset<3>(shape, strides, [&](int64_t j, const std::array<int64_t, 3>& off) {
            if (c[off[0]] != 0) {
              dx[off[1]] += g[j];
            } else {
              dy[off[2]] += g[j];
            }
          });
          return absl::OkStatus();
        });
  }
};

// ---- erf ----

// 2 / sqrt(pi), the derivative of erf at 0.
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;

template <typename T>
class ErfKernel final : public HostKernel {
 public:
  ErfKernel() : HostKernel("erf") {}

 protected:
  absl::StatusOr<HostWork> Prepare(const HostArgs& a) const override {
    SLUICE_RETURN_IF_ERROR(index::CheckErfOperands(name(), a, /*grad=*/false, DataTypeOf<T>()));
    const int64_t n = a.outputs[0].size;
    if (n == 0) return HostWork(nullptr);
    return HostWork([x = a.inputs[0].as<const T>(), out = a.outputs[0].as<T>(), n] {
      for (int64_t i = 0; i < n; ++i) out[i] = std::erf(x[i]);
      return absl::OkStatus();
    });
  }
};

template <typename T>
class ErfGradKernel final : public HostKernel {
 public:
  ErfGradKernel() : HostKernel("erf_grad") {}

 protected:
  absl::StatusOr<HostWork> Prepare(const HostArgs& a) const override {
    SLUICE_RETURN_IF_ERROR(index::CheckErfOperands(name(), a, /*grad=*/true, DataTypeOf<T>()));
    const int64_t n = a.outputs[0].size;
    if (n == 0) return HostWork(nullptr);
    return HostWork([x = a.inputs[0].as<const T>(), g = a.inputs[1].as<const T>(),
                     dx = a.outputs[0].as<T>(), n] {
      for (int64_t i = 0; i < n; ++i) {
        dx[i] = T(kTwoOverSqrtPi) * std::exp(-(x[i] * x[i])) * g[i];
      }
      return absl::OkStatus();
    });
  }
};

absl::Status RegisterHost(OpRegistry* registry, absl::string_view op, DataType dtype,
                          std::shared_ptr<const vm::OpKernel> kernel) {
  return registry->RegisterKernel(op, {DeviceType::kCpu, DeviceType::kSim}, dtype,
                                  std::move(kernel));
}

// Registers Kernel<T> under `op` for f32 and f64.
template <template <typename> class Kernel>
absl::Status RegisterFloatKernels(OpRegistry* registry, absl::string_view op) {
  SLUICE_RETURN_IF_ERROR(
      RegisterHost(registry, op, DataType::kF32, std::make_shared<Kernel<float>>()));
  return RegisterHost(registry, op, DataType::kF64, std::make_shared<Kernel<double>>());
}

}  // namespace

absl::Status RegisterIndexHostKernels(OpRegistry* registry) {
  for (DataType dtype : kEveryDtype) {
    SLUICE_RETURN_IF_ERROR(
        RegisterHost(registry, "gather", dtype, std::make_shared<GatherKernel>(dtype)));
    SLUICE_RETURN_IF_ERROR(
        RegisterHost(registry, "slice", dtype, std::make_shared<SliceKernel>(dtype)));
  }
  SLUICE_RETURN_IF_ERROR(
      RegisterHost(registry, "where", DataType::kBool, std::make_shared<WhereKernel>()));
  SLUICE_RETURN_IF_ERROR(RegisterFloatKernels<GatherGradKernel>(registry, "gather_grad"));
  SLUICE_RETURN_IF_ERROR(RegisterFloatKernels<SliceGradKernel>(registry, "slice_grad"));
  SLUICE_RETURN_IF_ERROR(RegisterFloatKernels<WhereGradKernel>(registry, "where_grad"));
  SLUICE_RETURN_IF_ERROR(RegisterFloatKernels<ErfKernel>(registry, "erf"));
  return RegisterFloatKernels<ErfGradKernel>(registry, "erf_grad");
}

}  // namespace sluice::ops::internal
