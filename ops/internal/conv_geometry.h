// Geometry of the 2-D convolution and pooling ops (ops/conv_ops.cc): their attributes read
// and checked, the output size, and the window arithmetic. The schemas' inference, the host
// kernels (ops/cpu/conv_kernels.cc) and the cuda kernels (ops/cuda/conv_op_kernels.cc) all
// use these rules, so every path accepts exactly the same operands and names the same
// culprit. Errors are InvalidArgument messages without the "op '...': " prefix; the caller
// adds it (InferContext::Error, OpError).
//
// Stateless functions; any thread.
#ifndef SLUICE_OPS_INTERNAL_CONV_GEOMETRY_H_
#define SLUICE_OPS_INTERNAL_CONV_GEOMETRY_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "core/shape.h"
#include "ops/op_schema.h"
#include "vm/attrs.h"

namespace sluice::ops::internal::conv {

// One spatial axis of a sliding window: output position o reads input positions
// Start(o) + t * dilation for t in [0, kernel), those outside [0, in) being padding.
struct WindowAxis {
  int64_t in = 0;      // the input's size along the axis
  int64_t kernel = 1;  // taps
  int64_t stride = 1;
  int64_t pad_begin = 0;  // top or left
  int64_t pad_end = 0;    // bottom or right
  int64_t dilation = 1;
  int64_t out = 0;  // the output's size along the axis

  int64_t Start(int64_t o) const { return o * stride - pad_begin; }
  // The taps of position o that fall inside the input (`include_pad` false) or inside the
  // padded extent [-pad_begin, in + pad_end) (true): an average pool's divisor along this
  // axis.
  int64_t Taps(int64_t o, bool include_pad) const;
};

// conv2d: X [n, c, h, w], W [m, c / groups, kh, kw] -> Out [n, m, oh, ow].
struct Conv2dDims {
  int64_t n = 0;
  int64_t c = 0;
  int64_t m = 0;
  int64_t groups = 1;
  WindowAxis h;
  WindowAxis w;
  Shape out;

  int64_t c_per_group() const { return c / groups; }
  int64_t m_per_group() const { return m / groups; }
};

// The pools: X [n, c, h, w] -> Out [n, c, oh, ow].
struct Pool2dDims {
  int64_t n = 0;
  int64_t c = 0;
  WindowAxis h;
  WindowAxis w;
  bool count_include_pad = false;  // average pools only
  Shape out;
};

// conv2d's operands and attributes: X and W f32 or f64 of one dtype, rank 4; strides (2
// positive ints), pads (4 non-negative ints: top, left, bottom, right), dilations (2
// positive ints), groups (positive, dividing both X's channels and W's output channels, W's
// dim 1 being X's channels / groups). The dilated kernel must fit the padded input.
absl::StatusOr<Conv2dDims> Conv2dShapes(const TensorMeta& x, const TensorMeta& w,
                                        const vm::AttrMap& attrs);

// max_pool2d's (`average` false) and avg_pool2d's operand and attributes: X f32 or f64, rank
// 4; kernel (2 positive ints); strides (empty: the kernel, else 2 positive ints); pads (4
// non-negative ints, each smaller than the kernel along its axis, as ONNX Runtime requires);
// dilations (2 positive ints); ceil_mode (0/1: the output size rounds up, a window that would
// start in the end padding being dropped); count_include_pad (0/1, average pools only).
absl::StatusOr<Pool2dDims> Pool2dShapes(const TensorMeta& x, const vm::AttrMap& attrs,
                                        bool average);

}  // namespace sluice::ops::internal::conv

#endif  // SLUICE_OPS_INTERNAL_CONV_GEOMETRY_H_
