// StressProgram: a random eager program for `sluice stress` — tensors placed on cpu and sim
// devices, elementwise and copy ops on random streams — plus the sequential host reference
// that says what every tensor must hold at the end.
#ifndef SLUICE_STRESS_STRESS_PROGRAM_H_
#define SLUICE_STRESS_STRESS_PROGRAM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/stream_id.h"

namespace sluice::stress {

struct StressShape {
  int sim_devices = 2;    // devices sim:0 .. sim:(n-1), plus cpu
  int streams = 4;        // streams per sim device (compute:0 .. compute:k-1)
  int tensors = 8;        // tensors per program
  int ops = 40;           // ops per program
  int64_t elements = 64;  // floats per tensor
};

struct StressOp {
  enum class Kind { kFill, kAdd, kMul, kScale, kCopy };
  Kind kind = Kind::kFill;
  StreamKey stream;    // where it runs (on the output tensor's device)
  int a = -1, b = -1;  // input tensors (-1: unused)
  int y = -1;          // output tensor
  float value = 0;     // fill value / scale alpha
  float beta = 0;      // scale beta
  const char* KernelName() const;
};

struct StressProgram {
  std::vector<StreamKey> tensor_home;  // tensor i lives on tensor_home[i].device, first used there
  std::vector<StressOp> ops;
};

// Deterministic in `seed`. Every tensor is filled first; then random ops. Elementwise ops
// take operands on their own device; copies may cross devices.
StressProgram GenerateStressProgram(const StressShape& shape, uint64_t seed);

// Runs `program` sequentially on the host: the expected final contents of each tensor.
std::vector<std::vector<float>> RunStressReference(const StressProgram& program, int64_t elements);

}  // namespace sluice::stress

#endif  // SLUICE_STRESS_STRESS_PROGRAM_H_
