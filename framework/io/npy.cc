#include "framework/io/npy.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"

namespace sluice::framework::io {
namespace {

constexpr absl::string_view kMagic("\x93NUMPY", 6);
// Data starts at a multiple of this many bytes, so a reader can map it aligned.
constexpr size_t kAlignment = 64;
// NumPy leaves room after the dict for the first dimension to grow to this many digits, so
// an appending writer can rewrite the header in place; writing the same spaces keeps our
// files byte-identical to NumPy's.
constexpr size_t kGrowthDigits = 21;
constexpr size_t kMaxVersion1HeaderLen = 0xFFFF;

absl::string_view Descr(DataType dtype) {
  switch (dtype) {
    case DataType::kF32:
      return "<f4";
    case DataType::kF64:
      return "<f8";
    case DataType::kI32:
      return "<i4";
    case DataType::kI64:
      return "<i8";
    case DataType::kBool:
      return "|b1";
  }
  return "";
}

absl::StatusOr<DataType> DataTypeFromDescr(absl::string_view descr, absl::string_view what) {
  for (const DataType dtype :
       {DataType::kF32, DataType::kF64, DataType::kI32, DataType::kI64, DataType::kBool}) {
    if (descr == Descr(dtype)) return dtype;
  }
  if (!descr.empty() && descr[0] == '>') {
    return absl::InvalidArgumentError(absl::StrCat(what, ": big-endian dtype '", descr,
                                                   "' is not supported (only little-endian)"));
  }
  return absl::InvalidArgumentError(absl::StrCat(what, ": unsupported dtype '",
                                                 absl::CEscape(descr),
                                                 "' (supported: <f4, <f8, <i4, <i8, |b1)"));
}

// The byte count dtype × shape requires, or an error when it does not fit in int64.
absl::StatusOr<uint64_t> DataSize(DataType dtype, const Shape& shape, absl::string_view what) {
  // Shapes built directly (not through Shape::Make) may hold dimensions a reader rejects.
  if (absl::Status valid = Shape::Make(shape.dims()).status(); !valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", valid.message()));
  }
  const int64_t count = shape.NumElements();
  if (count > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(SizeOf(dtype))) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": shape ", shape.ToString(), " is too large"));
  }
  return static_cast<uint64_t>(count) * SizeOf(dtype);
}

absl::Status CheckBools(const NpyArray& array, absl::string_view what) {
  if (array.dtype != DataType::kBool) return absl::OkStatus();
  for (size_t i = 0; i < array.bytes.size(); ++i) {
    if (array.bytes[i] > 1) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": bool element ", i, " has byte value ",
                                                     array.bytes[i], " (expected 0 or 1)"));
    }
  }
  return absl::OkStatus();
}

struct Header {
  DataType dtype = DataType::kF32;
  Shape shape;
};

// Reads the header's Python dict literal: {'descr': STR, 'fortran_order': BOOL,
// 'shape': TUPLE} in any key order, with optional trailing comma, then only whitespace.
class HeaderParser {
 public:
  HeaderParser(absl::string_view text, absl::string_view what) : text_(text), what_(what) {}

  absl::StatusOr<Header> Parse() {
    Header header;
    bool has_descr = false;
    bool has_order = false;
    bool has_shape = false;
    SkipSpace();
    if (!Consume('{')) return Error("expected '{'");
    SkipSpace();
    while (!Consume('}')) {
      SLUICE_ASSIGN_OR_RETURN(const std::string key, ParseString("a key"));
      SkipSpace();
      if (!Consume(':')) return Error(absl::StrCat("expected ':' after key '", key, "'"));
      SkipSpace();
      if (key == "descr") {
        if (has_descr) return Error("key 'descr' appears twice");
        has_descr = true;
        if (Peek() == '[') {
          return absl::InvalidArgumentError(
              absl::StrCat(what_, ": structured dtypes are not supported"));
        }
        SLUICE_ASSIGN_OR_RETURN(const std::string descr, ParseString("the dtype string"));
        SLUICE_ASSIGN_OR_RETURN(header.dtype, DataTypeFromDescr(descr, what_));
      } else if (key == "fortran_order") {
        if (has_order) return Error("key 'fortran_order' appears twice");
        has_order = true;
        SLUICE_ASSIGN_OR_RETURN(const bool fortran_order, ParseBool());
        if (fortran_order) {
          return absl::InvalidArgumentError(
              absl::StrCat(what_,
                           ": fortran_order True (column-major) is not supported; save a C-order "
                           "array"));
        }
      } else if (key == "shape") {
        if (has_shape) return Error("key 'shape' appears twice");
        has_shape = true;
        SLUICE_ASSIGN_OR_RETURN(header.shape, ParseShape());
      } else {
        return Error(absl::StrCat("unexpected key '", absl::CEscape(key), "'"));
      }
      SkipSpace();
      if (Consume(',')) {
        SkipSpace();
      } else if (Peek() != '}') {
        return Error("expected ',' or '}'");
      }
    }
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected text after '}'");
    if (!has_descr) return Error("no 'descr' key");
    if (!has_order) return Error("no 'fortran_order' key");
    if (!has_shape) return Error("no 'shape' key");
    return header;
  }

 private:
  absl::Status Error(absl::string_view why) const {
    return absl::InvalidArgumentError(
        absl::StrCat(what_, ": malformed header: ", why, " at offset ", pos_, " of '",
                     absl::CEscape(text_.substr(0, 120)), text_.size() > 120 ? "..." : "", "'"));
  }

  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }

  bool Consume(char c) {
    if (pos_ == text_.size() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }

  bool ConsumeWord(absl::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  // A quoted string without escapes (none of the values the format defines need them).
  absl::StatusOr<std::string> ParseString(absl::string_view role) {
    const char quote = Peek();
    if (quote != '\'' && quote != '"') return Error(absl::StrCat("expected ", role, " in quotes"));
    const size_t end = text_.find(quote, pos_ + 1);
    if (end == absl::string_view::npos) return Error("unterminated string");
    std::string value(text_.substr(pos_ + 1, end - pos_ - 1));
    if (value.find('\\') != std::string::npos) return Error("escapes in strings are not supported");
    pos_ = end + 1;
    return value;
  }

  absl::StatusOr<bool> ParseBool() {
    if (ConsumeWord("True")) return true;
    if (ConsumeWord("False")) return false;
    return Error("expected True or False for 'fortran_order'");
  }

  absl::StatusOr<int64_t> ParseDim() {
    const size_t start = pos_;
    uint64_t value = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      value = value * 10 + static_cast<uint64_t>(text_[pos_] - '0');
      if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Error("dimension too large");
      }
      ++pos_;
    }
    if (pos_ == start) return Error("expected a non-negative integer dimension");
    Consume('L');  // Python 2 long literals, as old writers produced
    return static_cast<int64_t>(value);
  }

  absl::StatusOr<Shape> ParseShape() {
    if (!Consume('(')) return Error("expected '(' to open the shape tuple");
    std::vector<int64_t> dims;
    SkipSpace();
    while (!Consume(')')) {
      SLUICE_ASSIGN_OR_RETURN(const int64_t dim, ParseDim());
      dims.push_back(dim);
      SkipSpace();
      if (Consume(',')) {
        SkipSpace();
      } else if (Peek() != ')') {
        return Error("expected ',' or ')' in the shape tuple");
      }
    }
    absl::StatusOr<Shape> shape = Shape::Make(dims);
    if (!shape.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(what_, ": ", shape.status().message()));
    }
    return shape;
  }

  absl::string_view text_;
  absl::string_view what_;
  size_t pos_ = 0;
};

uint32_t ReadLittleEndian(absl::string_view bytes) {
  uint32_t value = 0;
  for (size_t i = bytes.size(); i > 0; --i) {
    value = (value << 8) | static_cast<unsigned char>(bytes[i - 1]);
  }
  return value;
}

// Python's repr of a tuple of ints: (), (3,), (2, 3).
std::string ShapeRepr(const Shape& shape) {
  if (shape.rank() == 1) return absl::StrCat("(", shape.dim(0), ",)");
  return absl::StrCat("(", absl::StrJoin(shape.dims(), ", "), ")");
}

}  // namespace

absl::StatusOr<NpyArray> ParseNpy(absl::string_view data, absl::string_view what) {
  if (data.substr(0, kMagic.size()) != kMagic.substr(0, std::min(data.size(), kMagic.size()))) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": not a .npy file (bad magic '",
                                                   absl::CEscape(data.substr(0, kMagic.size())),
                                                   "')"));
  }
  if (data.size() < kMagic.size() + 2) {
    return absl::DataLossError(
        absl::StrCat(what, ": file is ", data.size(), " bytes, truncated before the version"));
  }
  const int major = static_cast<unsigned char>(data[6]);
  const int minor = static_cast<unsigned char>(data[7]);
  if ((major != 1 && major != 2) || minor != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": unsupported .npy version ", major, ".",
                                                   minor, " (this build reads 1.0 and 2.0)"));
  }
  const size_t length_bytes = major == 1 ? 2 : 4;
  const size_t prefix = kMagic.size() + 2 + length_bytes;
  if (data.size() < prefix) {
    return absl::DataLossError(
        absl::StrCat(what, ": file is ", data.size(), " bytes, truncated in the header length"));
  }
  const size_t header_len = ReadLittleEndian(data.substr(8, length_bytes));
  if (data.size() - prefix < header_len) {
    return absl::DataLossError(absl::StrCat(what, ": header of ", header_len,
                                            " bytes is cut off after ", data.size() - prefix));
  }
  SLUICE_ASSIGN_OR_RETURN(const Header header,
                          HeaderParser(data.substr(prefix, header_len), what).Parse());
  SLUICE_ASSIGN_OR_RETURN(const uint64_t expected, DataSize(header.dtype, header.shape, what));
  const absl::string_view body = data.substr(prefix + header_len);
  if (body.size() != expected) {
    const std::string message =
        absl::StrCat(what, ": expected ", expected, " bytes of data, found ", body.size());
    if (body.size() < expected) return absl::DataLossError(message);
    return absl::InvalidArgumentError(absl::StrCat(message, " (trailing bytes)"));
  }
  NpyArray array;
  array.dtype = header.dtype;
  array.shape = header.shape;
  array.bytes.assign(body.begin(), body.end());
  SLUICE_RETURN_IF_ERROR(CheckBools(array, what));
  return array;
}

std::string SerializeNpy(const NpyArray& array) {
  const absl::StatusOr<uint64_t> size = DataSize(array.dtype, array.shape, "array");
  SLUICE_CHECK(size.ok() && *size == array.bytes.size());
  std::string dict =
      absl::StrCat("{'descr': '", Descr(array.dtype),
                   "', 'fortran_order': False, 'shape': ", ShapeRepr(array.shape), ", }");
  if (array.shape.rank() > 0) {
    const size_t digits = absl::StrCat(array.shape.dim(0)).size();
    dict.append(kGrowthDigits - std::min(digits, kGrowthDigits), ' ');
  }
  // The header is the dict, padding, then '\n'; the padding is never empty (an exactly
  // aligned dict gets a full 64 spaces), as NumPy does it.
  const auto header_len = [&](size_t prefix) {
    const size_t unpadded = prefix + dict.size() + 1;
    return dict.size() + 1 + (kAlignment - unpadded % kAlignment);
  };
  int major = 1;
  size_t length_bytes = 2;
  size_t len = header_len(kMagic.size() + 2 + length_bytes);
  if (len > kMaxVersion1HeaderLen) {
    major = 2;
    length_bytes = 4;
    len = header_len(kMagic.size() + 2 + length_bytes);
  }
  std::string out(kMagic);
  out.push_back(static_cast<char>(major));
  out.push_back('\0');
  for (size_t i = 0; i < length_bytes; ++i)
    out.push_back(static_cast<char>((len >> (8 * i)) & 0xFF));
  out.append(dict);
  out.append(len - dict.size() - 1, ' ');
  out.push_back('\n');
  out.append(array.bytes.begin(), array.bytes.end());
  return out;
}

absl::StatusOr<NpyArray> ReadNpy(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot open"));
  std::string data;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) data.append(buffer, n);
  const int err = std::ferror(file) ? errno : 0;
  std::fclose(file);
  if (err != 0) return absl::ErrnoToStatus(err, absl::StrCat(path, ": read failed"));
  return ParseNpy(data, path);
}

absl::Status WriteNpy(const std::string& path, const NpyArray& array) {
  SLUICE_ASSIGN_OR_RETURN(const uint64_t expected, DataSize(array.dtype, array.shape, path));
  if (array.bytes.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": a ", DataTypeName(array.dtype), " array of shape ", array.shape.ToString(),
        " needs ", expected, " bytes, the array holds ", array.bytes.size()));
  }
  SLUICE_RETURN_IF_ERROR(CheckBools(array, path));
  const std::string data = SerializeNpy(array);
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot open for writing"));
  }
  int err = std::fwrite(data.data(), 1, data.size(), file) == data.size() ? 0 : errno;
  // fclose flushes, so a full disk may only show here.
  if (std::fclose(file) != 0 && err == 0) err = errno;
  if (err != 0) return absl::ErrnoToStatus(err, absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

}  // namespace sluice::framework::io
