// NumPy .npy files: byte-exact output for arrays whose NumPy bytes are known, round trips
// for every dtype and rank 0..3, the reader's tolerance for other writers' headers, every
// error naming the file, every proper prefix of a file rejected as truncated, file I/O.
#include "framework/io/npy.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::framework::io::npy_test {
namespace {

using ::testing::HasSubstr;

template <typename T>
NpyArray MakeArray(const Shape& shape, const std::vector<T>& values) {
  NpyArray array;
  array.dtype = DataTypeOf<T>();
  array.shape = shape;
  array.bytes.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(array.bytes.data(), values.data(), array.bytes.size());
  return array;
}

NpyArray MakeBools(const Shape& shape, const std::vector<uint8_t>& values) {
  NpyArray array;
  array.dtype = DataType::kBool;
  array.shape = shape;
  array.bytes = values;
  return array;
}

std::string Preamble(int major, uint32_t header_len) {
  std::string out("\x93NUMPY", 6);
  out.push_back(static_cast<char>(major));
  out.push_back('\0');
  const int length_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < length_bytes; ++i) out.push_back(static_cast<char>(header_len >> (8 * i)));
  return out;
}

// A file with `dict` as its header (padded to 64 as the spec asks) and `data` after it.
std::string NpyFile(absl::string_view dict, absl::string_view data, int major = 1) {
  const size_t prefix = major == 1 ? 10 : 12;
  std::string header(dict);
  header.append(63 - (prefix + header.size()) % 64, ' ');
  header.push_back('\n');
  return absl::StrCat(Preamble(major, header.size()), header, data);
}

// What numpy.save writes for np.arange(6, dtype='<f4').reshape(2, 3): version 1.0, header
// length 118 ('v'), the dict, spaces up to byte 127, '\n', then 0.0 .. 5.0 little-endian.
const std::string& GoldenF32Matrix() {
  static const std::string* const golden = new std::string(
      std::string("\x93NUMPY\x01\x00v\x00", 10) +
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" + std::string(58, ' ') + "\n" +
      std::string("\x00\x00\x00\x00\x00\x00\x80\x3f\x00\x00\x00\x40"
                  "\x00\x00\x40\x40\x00\x00\x80\x40\x00\x00\xa0\x40",
                  24));
  return *golden;
}

// ---------------------------------------------------------------------------------------
// Writing.

TEST(NpyWriteTest, F32MatrixMatchesNumPyByteForByte) {
  const NpyArray array = MakeArray<float>(Shape({2, 3}), {0, 1, 2, 3, 4, 5});
  const std::string bytes = SerializeNpy(array);
  ASSERT_EQ(GoldenF32Matrix().size(), 128u + 24u);
  EXPECT_EQ(bytes, GoldenF32Matrix());
}

TEST(NpyWriteTest, ScalarAndBoolMatchNumPyByteForByte) {
  // np.save(f, np.array(-1.5)): shape () and no room reserved for growth.
  EXPECT_EQ(SerializeNpy(MakeArray<double>(Shape(), {-1.5})),
            std::string("\x93NUMPY\x01\x00v\x00", 10) +
                "{'descr': '<f8', 'fortran_order': False, 'shape': (), }" + std::string(62, ' ') +
                "\n" + std::string("\0\0\0\0\0\0\xf8\xbf", 8));
  // np.save(f, np.array([[True, False, True]])).
  EXPECT_EQ(SerializeNpy(MakeBools(Shape({1, 3}), {1, 0, 1})),
            std::string("\x93NUMPY\x01\x00v\x00", 10) +
                "{'descr': '|b1', 'fortran_order': False, 'shape': (1, 3), }" +
                std::string(58, ' ') + "\n" + std::string("\x01\x00\x01", 3));
}

TEST(NpyWriteTest, ExactlyAlignedHeaderGetsAFullLineOfPadding) {
  // (0, 1, ..., 1) with 35 ones: the dict plus the 20 growth spaces plus '\n' ends exactly
  // on a 64-byte boundary, and NumPy then pads with 64 more spaces (header length 246).
  std::vector<int64_t> dims(36, 1);
  dims[0] = 0;
  NpyArray array;
  array.shape = Shape(dims);
  const std::string bytes = SerializeNpy(array);
  ASSERT_EQ(bytes.size(), 256u);
  EXPECT_EQ(static_cast<unsigned char>(bytes[8]) + 256 * static_cast<unsigned char>(bytes[9]), 246);
  // "1), }", 20 spaces of growth room, 64 of padding, '\n'; no data.
  EXPECT_EQ(bytes.substr(bytes.size() - 90), "1), }" + std::string(20 + 64, ' ') + "\n");
}

TEST(NpyWriteTest, HugeHeaderSwitchesToVersion2) {
  // 22,000 dimensions of 1 print as a tuple longer than a version 1.0 header can hold.
  NpyArray array = MakeArray<int32_t>(Shape(std::vector<int64_t>(22000, 1)), {42});
  const std::string bytes = SerializeNpy(array);
  EXPECT_EQ(bytes[6], '\x02');
  EXPECT_EQ((bytes.size() - 4) % 64, 0u);
  const absl::StatusOr<NpyArray> back = ParseNpy(bytes, "huge.npy");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == array);
}

TEST(NpyWriteTest, DataStartsAligned) {
  for (int rank = 0; rank <= 6; ++rank) {
    // A long first dimension (less growth room) and an empty second one (no data to hold).
    std::vector<int64_t> dims(rank, 3);
    if (rank > 0) dims[0] = 1234567;
    if (rank > 1) dims[1] = 0;
    const Shape shape(dims);
    const std::string bytes =
        SerializeNpy(MakeArray<int64_t>(shape, std::vector<int64_t>(shape.NumElements())));
    const size_t header_end =
        10 + static_cast<unsigned char>(bytes[8]) + 256 * static_cast<unsigned char>(bytes[9]);
    EXPECT_EQ(header_end % 64, 0u) << rank;
    EXPECT_EQ(bytes[header_end - 1], '\n') << rank;
  }
}

// ---------------------------------------------------------------------------------------
// Reading.

TEST(NpyReadTest, ParsesTheNumPyGolden) {
  const absl::StatusOr<NpyArray> array = ParseNpy(GoldenF32Matrix(), "golden.npy");
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->dtype, DataType::kF32);
  EXPECT_EQ(array->shape, Shape({2, 3}));
  std::vector<float> values(6);
  std::memcpy(values.data(), array->bytes.data(), 24);
  EXPECT_THAT(values, ::testing::ElementsAre(0, 1, 2, 3, 4, 5));
}

TEST(NpyReadTest, RoundTripEveryDtypeAndRank) {
  const std::vector<Shape> shapes = {Shape(),       Shape({5}),       Shape({0}),
                                     Shape({2, 3}), Shape({2, 1, 3}), Shape({3, 0, 2})};
  for (const Shape& shape : shapes) {
    const int64_t n = shape.NumElements();
    std::vector<float> f32(n);
    std::vector<double> f64(n);
    std::vector<int32_t> i32(n);
    std::vector<int64_t> i64(n);
    std::vector<uint8_t> bools(n);
    for (int64_t i = 0; i < n; ++i) {
      f32[i] = 0.25f * static_cast<float>(i) - 1.0f;
      f64[i] = 1e300 / static_cast<double>(i + 1);
      i32[i] = static_cast<int32_t>(-7 * i);
      i64[i] = (int64_t{1} << 40) * (i - 2);
      bools[i] = static_cast<uint8_t>(i % 2);
    }
    for (const NpyArray& array :
         {MakeArray(shape, f32), MakeArray(shape, f64), MakeArray(shape, i32),
          MakeArray(shape, i64), MakeBools(shape, bools)}) {
      const absl::StatusOr<NpyArray> back = ParseNpy(SerializeNpy(array), "a.npy");
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_TRUE(*back == array) << DataTypeName(array.dtype) << " " << shape.ToString();
    }
  }
}

TEST(NpyReadTest, AcceptsOtherWritersHeaders) {
  const std::string data("\x01\x00\x00\x00\x02\x00\x00\x00", 8);
  struct Case {
    const char* dict;
    Shape shape;
  };
  for (const Case& c : {
           Case{"{'shape': (2,), 'fortran_order': False, 'descr': '<i4'}", Shape({2})},
           Case{"{\"descr\": \"<i4\", \"fortran_order\": False, \"shape\": (2,)}", Shape({2})},
           Case{"{'descr':'<i4','fortran_order':False,'shape':(2L,),}", Shape({2})},
           Case{"  {  'descr' : '<i4' ,\n 'fortran_order' : False , 'shape' : ( 1 , 2 ) }  ",
                Shape({1, 2})},
           Case{"{'descr': '<i4', 'fortran_order': False, 'shape': (2, 1, 1,), }",
                Shape({2, 1, 1})},
       }) {
    const absl::StatusOr<NpyArray> array = ParseNpy(NpyFile(c.dict, data), "other.npy");
    ASSERT_TRUE(array.ok()) << c.dict << ": " << array.status();
    EXPECT_EQ(array->dtype, DataType::kI32);
    EXPECT_EQ(array->shape, c.shape) << c.dict;
  }
  // Older NumPy padded to 16 bytes and a header need not end in '\n'.
  const std::string dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }";
  const absl::StatusOr<NpyArray> unpadded =
      ParseNpy(absl::StrCat(Preamble(1, dict.size()), dict, data), "old.npy");
  ASSERT_TRUE(unpadded.ok()) << unpadded.status();
  EXPECT_EQ(unpadded->shape, Shape({2}));
}

TEST(NpyReadTest, ReadsVersion2) {
  const std::string file = NpyFile("{'descr': '<f8', 'fortran_order': False, 'shape': (), }",
                                   std::string("\0\0\0\0\0\0\xf0\x3f", 8), /*major=*/2);
  const absl::StatusOr<NpyArray> array = ParseNpy(file, "v2.npy");
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->dtype, DataType::kF64);
  EXPECT_EQ(array->shape.rank(), 0);
  double value;
  std::memcpy(&value, array->bytes.data(), 8);
  EXPECT_EQ(value, 1.0);
}

// ---------------------------------------------------------------------------------------
// Errors.

struct BadFile {
  const char* what;
  std::string bytes;
  absl::StatusCode code;
  std::vector<std::string> message_parts;
};

std::string WithByte(std::string bytes, size_t pos, char value) {
  bytes[pos] = value;
  return bytes;
}

std::string Dict(absl::string_view descr, absl::string_view order, absl::string_view shape) {
  return absl::StrCat("{'descr': '", descr, "', 'fortran_order': ", order, ", 'shape': ", shape,
                      ", }");
}

TEST(NpyErrorTest, EveryErrorNamesTheFileAndTheProblem) {
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  const auto kDataLoss = absl::StatusCode::kDataLoss;
  const std::string four(16, '\0');
  const std::vector<BadFile> cases = {
      {"bad magic",
       "PK\x03\x04 a zip file, not an array",
       kInvalid,
       {"x.npy: not a .npy file (bad magic 'PK"}},
      {"bad magic short", "\x93NUMQ", kInvalid, {"x.npy: not a .npy file"}},
      {"empty", "", kDataLoss, {"x.npy: file is 0 bytes"}},
      {"magic only", "\x93NUM", kDataLoss, {"x.npy: file is 4 bytes"}},
      {"version 3",
       WithByte(NpyFile(Dict("<f4", "False", "(4,)"), four), 6, 3),
       kInvalid,
       {"x.npy: unsupported .npy version 3.0 (this build reads 1.0 and 2.0)"}},
      {"version 1.1",
       WithByte(NpyFile(Dict("<f4", "False", "(4,)"), four), 7, 1),
       kInvalid,
       {"x.npy: unsupported .npy version 1.1"}},
      {"cut in length",
       Preamble(2, 100).substr(0, 10),
       kDataLoss,
       {"x.npy: file is 10 bytes, truncated in the header length"}},
      {"header cut",
       Preamble(1, 118) + "{'descr'",
       kDataLoss,
       {"x.npy: header of 118 bytes is cut off after 8"}},
      {"unknown dtype",
       NpyFile(Dict("<f2", "False", "(4,)"), four),
       kInvalid,
       {"x.npy: unsupported dtype '<f2' (supported: <f4, <f8, <i4, <i8, |b1)"}},
      {"unsigned dtype",
       NpyFile(Dict("|u1", "False", "(4,)"), four),
       kInvalid,
       {"x.npy: unsupported dtype '|u1'"}},
      {"big endian",
       NpyFile(Dict(">f4", "False", "(4,)"), four),
       kInvalid,
       {"x.npy: big-endian dtype '>f4' is not supported"}},
      {"structured",
       NpyFile("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4,)}", four),
       kInvalid,
       {"x.npy: structured dtypes are not supported"}},
      {"fortran order",
       NpyFile(Dict("<f4", "True", "(2, 2)"), four),
       kInvalid,
       {"x.npy: fortran_order True"}},
      {"missing key",
       NpyFile("{'descr': '<f4', 'shape': (4,)}", four),
       kInvalid,
       {"x.npy: malformed header: no 'fortran_order' key"}},
      {"unknown key",
       NpyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'x': 1}", four),
       kInvalid,
       {"x.npy: malformed header: unexpected key 'x'"}},
      {"duplicate key",
       NpyFile("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
               "'shape': (4,)}",
               four),
       kInvalid,
       {"x.npy: malformed header: key 'descr' appears twice"}},
      {"not a dict",
       NpyFile("['<f4', False, (4,)]", four),
       kInvalid,
       {"x.npy: malformed header: expected '{'"}},
      {"missing colon",
       NpyFile("{'descr' '<f4'}", four),
       kInvalid,
       {"x.npy: malformed header: expected ':' after key 'descr'"}},
      {"missing comma",
       NpyFile("{'descr': '<f4' 'fortran_order': False}", four),
       kInvalid,
       {"x.npy: malformed header: expected ',' or '}'"}},
      {"unterminated string",
       NpyFile("{'descr: <f4}", four),
       kInvalid,
       {"x.npy: malformed header: unterminated string"}},
      {"bad bool",
       NpyFile(Dict("<f4", "0", "(4,)"), four),
       kInvalid,
       {"x.npy: malformed header: expected True or False"}},
      {"negative dim",
       NpyFile(Dict("<f4", "False", "(-4,)"), four),
       kInvalid,
       {"x.npy: malformed header: expected a non-negative integer dimension"}},
      {"shape not a tuple",
       NpyFile(Dict("<f4", "False", "[4]"), four),
       kInvalid,
       {"x.npy: malformed header: expected '(' to open the shape tuple"}},
      {"huge dim",
       NpyFile(Dict("<f4", "False", "(99999999999999999999,)"), ""),
       kInvalid,
       {"x.npy: malformed header: dimension too large"}},
      {"too many elements",
       NpyFile(Dict("<f4", "False", "(4294967296, 4294967296)"), ""),
       kInvalid,
       {"x.npy: ", "too many elements"}},
      {"byte count overflows",
       NpyFile(Dict("<f8", "False", "(4611686018427387904,)"), ""),
       kInvalid,
       {"x.npy: shape [4611686018427387904] is too large"}},
      {"text after dict",
       NpyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (4,)} x", four),
       kInvalid,
       {"x.npy: malformed header: unexpected text after '}'"}},
      {"truncated data",
       NpyFile(Dict("<f4", "False", "(4, 4)"), std::string(12, '\0')),
       kDataLoss,
       {"x.npy: expected 64 bytes of data, found 12"}},
      {"trailing data",
       NpyFile(Dict("<f4", "False", "(4,)"), std::string(20, '\0')),
       kInvalid,
       {"x.npy: expected 16 bytes of data, found 20 (trailing bytes)"}},
      {"bool byte 2",
       NpyFile(Dict("|b1", "False", "(3,)"), std::string("\x01\x02\x00", 3)),
       kInvalid,
       {"x.npy: bool element 1 has byte value 2 (expected 0 or 1)"}},
  };
  for (const BadFile& c : cases) {
    const absl::StatusOr<NpyArray> array = ParseNpy(c.bytes, "x.npy");
    ASSERT_FALSE(array.ok()) << c.what;
    EXPECT_EQ(array.status().code(), c.code) << c.what << ": " << array.status();
    for (const std::string& part : c.message_parts) {
      EXPECT_THAT(std::string(array.status().message()), HasSubstr(part)) << c.what;
    }
  }
}

TEST(NpyErrorTest, EveryProperPrefixIsDataLoss) {
  const std::string file = GoldenF32Matrix();
  for (size_t n = 0; n < file.size(); ++n) {
    const absl::StatusOr<NpyArray> array = ParseNpy(file.substr(0, n), "cut.npy");
    ASSERT_FALSE(array.ok()) << n;
    EXPECT_EQ(array.status().code(), absl::StatusCode::kDataLoss) << n << ": " << array.status();
    EXPECT_THAT(std::string(array.status().message()), HasSubstr("cut.npy: ")) << n;
  }
}

TEST(NpyErrorTest, CorruptedHeaderBytesNeverCrash) {
  const std::string file = GoldenF32Matrix();
  for (size_t i = 0; i < 128; ++i) {
    for (const char c : {'\0', ' ', '\'', ',', '(', ')', '{', '}', ':', '9', '\xff'}) {
      std::string corrupt = file;
      corrupt[i] = c;
      const absl::StatusOr<NpyArray> array = ParseNpy(corrupt, "bad.npy");
      if (!array.ok()) {
        EXPECT_THAT(std::string(array.status().message()), HasSubstr("bad.npy: ")) << i;
      }
    }
  }
}

TEST(NpyErrorTest, SerializeRequiresMatchingByteCount) {
  NpyArray array = MakeArray<float>(Shape({2, 2}), {1, 2, 3});
  EXPECT_DEATH(SerializeNpy(array), "SLUICE_CHECK");
}

// ---------------------------------------------------------------------------------------
// Files.

std::string TempPath(absl::string_view name) {
  return absl::StrCat(::testing::TempDir(), "/npy_test_", name);
}

TEST(NpyFileTest, WriteThenRead) {
  const std::string path = TempPath("matrix.npy");
  const NpyArray array = MakeArray<int64_t>(Shape({3, 1, 2}), {1, -2, 3, -4, 5, -6});
  ASSERT_TRUE(WriteNpy(path, array).ok());
  absl::StatusOr<NpyArray> back = ReadNpy(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == array);
  // Writing again replaces the file.
  const NpyArray scalar = MakeArray<float>(Shape(), {7.0f});
  ASSERT_TRUE(WriteNpy(path, scalar).ok());
  back = ReadNpy(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == scalar);
  std::remove(path.c_str());
}

TEST(NpyFileTest, ReadErrorsNameThePath) {
  const std::string missing = TempPath("missing.npy");
  absl::StatusOr<NpyArray> array = ReadNpy(missing);
  EXPECT_EQ(array.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(array.status().message()), HasSubstr(missing));

  const std::string path = TempPath("short.npy");
  const std::string bytes = GoldenF32Matrix().substr(0, 140);
  std::FILE* file = std::fopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  std::fwrite(bytes.data(), 1, bytes.size(), file);
  std::fclose(file);
  array = ReadNpy(path);
  EXPECT_EQ(array.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(array.status().message(), absl::StrCat(path, ": expected 24 bytes of data, found 12"));
  std::remove(path.c_str());
}

TEST(NpyFileTest, WriteErrorsNameThePath) {
  const std::string path = TempPath("wrong_size.npy");
  absl::Status status = WriteNpy(path, MakeArray<float>(Shape({2, 2}), {1, 2, 3}));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr(path));
  EXPECT_THAT(std::string(status.message()), HasSubstr("needs 16 bytes, the array holds 12"));

  status = WriteNpy(path, MakeBools(Shape({2}), {1, 7}));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("bool element 1 has byte value 7"));

  NpyArray overflowing;
  overflowing.shape = Shape({0, int64_t{1} << 40, int64_t{1} << 40});
  status = WriteNpy(path, overflowing);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("too many elements"));

  const std::string no_dir = TempPath("no_such_dir/a.npy");
  status = WriteNpy(no_dir, MakeArray<float>(Shape(), {1}));
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()), HasSubstr(no_dir));
}

}  // namespace
}  // namespace sluice::framework::io::npy_test
