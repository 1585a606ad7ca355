// DomainIndexing: where a compiled subgraph (subgraph.h) reads each input for flat index i of
// its domain, decided when the code is generated so that the generated code holds only
// constants. A back end prints it (framework/compiler/cuda/cuda_source.h); InputOffset is the
// same arithmetic on the host, the reference the generated expressions are tested against.
//
// Inputs read with numpy broadcasting: an input of one element is read at 0; one with the
// domain's element count (the same dims up to size-1 ones, so the same row-major order) at i;
// any other through coordinates of a collapsed domain: size-1 dimensions dropped, and adjacent
// dimensions merged wherever every such input is contiguous across them (as the host kernels'
// BroadcastPlan does), so [4,1] against [3,4,5] is two coordinates, not three.
//
// Value type; thread-compatible.
#ifndef SLUICE_FRAMEWORK_COMPILER_DOMAIN_INDEXING_H_
#define SLUICE_FRAMEWORK_COMPILER_DOMAIN_INDEXING_H_

#include <cstdint>
#include <vector>

#include "framework/compiler/subgraph.h"

namespace sluice::framework::compiler {

struct DomainIndexing {
  enum class Access : uint8_t {
    kScalar,   // offset 0
    kFlat,     // offset i
    kStrided,  // offset sum over d of coordinate(d) * strides[input][d]
  };

  // The collapsed domain, outermost first; empty when no input is kStrided. Coordinate d of i
  // is i / divisors[d] % dims[d], where divisors[d] is the product of the dims after d (for
  // d == 0 the modulo is left out: i is below the element count).
  std::vector<int64_t> dims;
  std::vector<int64_t> divisors;
  std::vector<Access> access;                 // per input
  std::vector<std::vector<int64_t>> strides;  // per input; per collapsed dim when kStrided
};

// Requires g.Validate() to hold. A domain without elements reads nothing: its inputs are
// kScalar or kFlat.
DomainIndexing MakeDomainIndexing(const Subgraph& g);

// The offset of element i of the domain in `input` (0 <= i < the domain's element count).
int64_t InputOffset(const DomainIndexing& indexing, int input, int64_t i);

// Coordinate d of flat index i (the generated code's c<d>).
int64_t Coordinate(const DomainIndexing& indexing, int d, int64_t i);

}  // namespace sluice::framework::compiler

#endif  // SLUICE_FRAMEWORK_COMPILER_DOMAIN_INDEXING_H_
