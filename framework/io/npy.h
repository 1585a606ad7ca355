// NumPy `.npy` files: one dense array per file, as `numpy.save` writes and `numpy.load`
// reads them, so parameters, feeds and expected outputs move between Sluice and Python
// without a conversion step. Depends on core only (DataType, Shape).
//
// The format (NumPy's "npy" format, versions 1.0 and 2.0):
//
//   bytes 0-5   magic: "\x93NUMPY"
//   byte  6     major version (1 or 2); byte 7: minor version (0)
//   then        HEADER_LEN: little-endian uint16 in version 1.0, uint32 in version 2.0
//   then        HEADER_LEN bytes of ASCII: a Python dict literal with exactly the keys
//               'descr' (the dtype string, e.g. '<f4'), 'fortran_order' (True or False) and
//               'shape' (a tuple of ints: `()` for a scalar, `(3,)`, `(2, 3)`), padded with
//               spaces and ending in '\n' so that the data starts at a multiple of 64 bytes
//   then        the elements in C (row-major) order, NumElements × element size bytes.
//
// Reading accepts versions 1.0 and 2.0, keys in any order, either quote style, any
// whitespace and padding, and the 'L' suffix old writers put on ints. Supported dtypes
// (the types DataType has): '<f4' f32, '<f8' f64, '<i4' i32, '<i8' i64, '|b1' bool. Only
// little-endian data and C order: a big-endian dtype or fortran_order True is rejected,
// not converted. A bool element must be 0 or 1.
//
// Writing produces the bytes NumPy 2 writes for the same array: version 1.0 (2.0 only when
// the header would not fit in 65535 bytes), keys in sorted order, the spare spaces NumPy
// reserves after the dict for growing the first dimension in place, then padding to 64.
//
// Every error names the file (the `what` argument) and the problem; a file shorter than its
// header or data says is DataLoss, anything else malformed is InvalidArgument.
//
// Functions only; thread-safe (no shared state).
#ifndef SLUICE_FRAMEWORK_IO_NPY_H_
#define SLUICE_FRAMEWORK_IO_NPY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data_type.h"
#include "core/shape.h"

namespace sluice::framework::io {

// One array: `bytes` holds shape.NumElements() × SizeOf(dtype) bytes in C order, each
// element little-endian (bool: one byte, 0 or 1). Value type; thread-compatible.
struct NpyArray {
  DataType dtype = DataType::kF32;
  Shape shape;
  std::vector<uint8_t> bytes;

  friend bool operator==(const NpyArray& a, const NpyArray& b) {
    return a.dtype == b.dtype && a.shape == b.shape && a.bytes == b.bytes;
  }
};

// Parses the contents of a .npy file. `what` names it in error messages ("x.npy: ...").
absl::StatusOr<NpyArray> ParseNpy(absl::string_view data, absl::string_view what);

// Reads and parses the file at `path` (errors name the path; NotFound when it is missing).
absl::StatusOr<NpyArray> ReadNpy(const std::string& path);

// The .npy bytes for `array`. Requires array.bytes.size() to match dtype and shape (a
// programmer error otherwise: it aborts); WriteNpy checks instead.
std::string SerializeNpy(const NpyArray& array);

// Writes `array` to `path`, replacing the file. InvalidArgument (naming the path) when the
// byte count does not match dtype and shape or a bool byte is not 0 or 1.
absl::Status WriteNpy(const std::string& path, const NpyArray& array);

}  // namespace sluice::framework::io

#endif  // SLUICE_FRAMEWORK_IO_NPY_H_
