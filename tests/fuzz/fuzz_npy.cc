// Fuzz target: the .npy reader (framework/io/npy.h). What it accepts must serialize and read
// back equal; what it refuses must be refused with InvalidArgument or DataLoss naming the file.
#include <cstddef>
#include <cstdint>
#include <string>

#include "framework/io/npy.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using sluice::framework::io::NpyArray;
  namespace fuzz = sluice::fuzz;
  absl::StatusOr<NpyArray> array =
      sluice::framework::io::ParseNpy(fuzz::AsText(data, size), "x.npy");
  if (!array.ok()) {
    fuzz::CheckInputError(array.status(), "ParseNpy");
    fuzz::Check(array.status().message().find("x.npy") != absl::string_view::npos,
                "ParseNpy's error does not name the file: " + array.status().ToString());
    return 0;
  }
  const std::string bytes = sluice::framework::io::SerializeNpy(*array);
  absl::StatusOr<NpyArray> again = sluice::framework::io::ParseNpy(bytes, "again.npy");
  fuzz::Check(again.ok(), "SerializeNpy's output does not parse: " + again.status().ToString());
  fuzz::Check(*again == *array, "the array read back differs from the one written");
  fuzz::Check(sluice::framework::io::SerializeNpy(*again) == bytes,
              "serializing the array read back gives other bytes");
  return 0;
}
