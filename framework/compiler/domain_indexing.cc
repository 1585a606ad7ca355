#include "framework/compiler/domain_indexing.h"

#include "core/status.h"

namespace sluice::framework::compiler {

DomainIndexing MakeDomainIndexing(const Subgraph& g) {
  using Access = DomainIndexing::Access;
  DomainIndexing x;
  const int n_in = static_cast<int>(g.inputs.size());
  const int64_t size = g.domain.NumElements();
  x.access.resize(static_cast<size_t>(n_in));
  x.strides.resize(static_cast<size_t>(n_in));

  std::vector<int> strided;
  std::vector<Shape::Dims> full;  // per strided input: its strides into the uncollapsed domain
  for (int k = 0; k < n_in; ++k) {
    const int64_t elements = g.inputs[k].shape.NumElements();
    if (elements == 1) {
      x.access[k] = Access::kScalar;
    } else if (elements == size || size == 0) {
      x.access[k] = Access::kFlat;
    } else {
      x.access[k] = Access::kStrided;
      strided.push_back(k);
      full.push_back(BroadcastStrides(g.inputs[k].shape, g.domain));
    }
  }
  if (strided.empty()) return x;

  // Drop size-1 dims; merge dim d into the previous one when every strided input steps over
  // the previous one by exactly d's whole extent.
  std::vector<std::vector<int64_t>> collapsed(strided.size());
  for (int d = 0; d < g.domain.rank(); ++d) {
    const int64_t n = g.domain.dim(d);
    if (n == 1) continue;
    bool merge = !x.dims.empty();
    for (size_t s = 0; merge && s < strided.size(); ++s) {
      merge = collapsed[s].back() == full[s][d] * n;
    }
    if (merge) {
      x.dims.back() *= n;
      for (size_t s = 0; s < strided.size(); ++s) collapsed[s].back() = full[s][d];
    } else {
      x.dims.push_back(n);
      for (size_t s = 0; s < strided.size(); ++s) collapsed[s].push_back(full[s][d]);
    }
  }
  // A strided input has more than one element, so the domain has a dim above 1.
  SLUICE_CHECK(!x.dims.empty());
  x.divisors.assign(x.dims.size(), 1);
  for (int d = static_cast<int>(x.dims.size()) - 2; d >= 0; --d) {
    x.divisors[d] = x.divisors[d + 1] * x.dims[d + 1];
  }
  for (size_t s = 0; s < strided.size(); ++s) x.strides[strided[s]] = std::move(collapsed[s]);
  return x;
}

int64_t Coordinate(const DomainIndexing& indexing, int d, int64_t i) {
  const int64_t q = i / indexing.divisors[d];
  return d == 0 ? q : q % indexing.dims[d];
}

int64_t InputOffset(const DomainIndexing& indexing, int input, int64_t i) {
  switch (indexing.access[input]) {
    case DomainIndexing::Access::kScalar:
      return 0;
    case DomainIndexing::Access::kFlat:
      return i;
    case DomainIndexing::Access::kStrided:
      break;
  }
  int64_t offset = 0;
  const std::vector<int64_t>& strides = indexing.strides[input];
  for (int d = 0; d < static_cast<int>(strides.size()); ++d) {
    if (strides[d] != 0) offset += Coordinate(indexing, d, i) * strides[d];
  }
  return offset;
}

}  // namespace sluice::framework::compiler
