// Counter-based random numbers for the random ops: element i of a tensor is a pure function
// of (seed, i), so a seed gives the same tensor on cpu, sim and cuda, however the work is
// split. SplitMix64 finalizer over the counter; 53-bit uniform doubles; Box-Muller for
// normals (element i uses counters 2i and 2i+1).
#ifndef SLUICE_OPS_INTERNAL_COUNTER_RNG_H_
#define SLUICE_OPS_INTERNAL_COUNTER_RNG_H_

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define SLUICE_HOST_DEVICE __host__ __device__
#else
#define SLUICE_HOST_DEVICE
#endif

namespace sluice::ops::internal {

SLUICE_HOST_DEVICE inline uint64_t CounterHash(uint64_t seed, uint64_t counter) {
  uint64_t z =
      seed * 0x9E3779B97F4A7C15ull + counter * 0xD1B54A32D192ED03ull + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1).
SLUICE_HOST_DEVICE inline double CounterUniform(uint64_t seed, uint64_t counter) {
  return static_cast<double>(CounterHash(seed, counter) >> 11) * 0x1.0p-53;
}

// Standard normal.
SLUICE_HOST_DEVICE inline double CounterNormal(uint64_t seed, uint64_t i) {
  const double u1 = 1.0 - CounterUniform(seed, 2 * i);  // (0, 1]: log is finite
  const double u2 = CounterUniform(seed, 2 * i + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace sluice::ops::internal

#endif  // SLUICE_OPS_INTERNAL_COUNTER_RNG_H_
