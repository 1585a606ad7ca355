// DomainIndexing: the access kind of each input, the collapsed domain, and InputOffset against
// the plain numpy reference (unflattened coordinates times BroadcastStrides) for every element
// of random broadcasts.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "framework/compiler/domain_indexing.h"

namespace sluice::framework::compiler::compiler_domain_indexing_test {
namespace {

using Access = DomainIndexing::Access;

Subgraph Graph(Shape domain, std::vector<Shape> inputs) {
  Subgraph g;
  g.domain = domain;
  for (Shape& shape : inputs) g.inputs.push_back({DataType::kF32, shape});
  ExprNode copy;
  copy.op = ExprOp::kCopy;
  copy.args[0] = 0;
  g.nodes.push_back(copy);
  g.outputs.push_back(static_cast<int>(g.inputs.size()));
  return g;
}

// The offset of element i of `to` in `from`, broadcast: numpy's definition.
int64_t ReferenceOffset(const Shape& from, const Shape& to, int64_t i) {
  const Shape::Dims strides = BroadcastStrides(from, to);
  int64_t offset = 0;
  for (int d = to.rank() - 1; d >= 0; --d) {
    offset += i % to.dim(d) * strides[d];
    i /= to.dim(d);
  }
  return offset;
}

void ExpectMatchesReference(const Subgraph& g) {
  const DomainIndexing x = MakeDomainIndexing(g);
  ASSERT_TRUE(g.Validate().ok()) << g.ToText();
  for (size_t k = 0; k < g.inputs.size(); ++k) {
    for (int64_t i = 0; i < g.domain.NumElements(); ++i) {
      ASSERT_EQ(InputOffset(x, static_cast<int>(k), i),
                ReferenceOffset(g.inputs[k].shape, g.domain, i))
          << "input " << k << " element " << i << " of " << g.ToText();
    }
  }
}

TEST(DomainIndexingTest, AccessKinds) {
  const Subgraph g = Graph({3, 4, 5}, {{3, 4, 5}, {1}, {}, {1, 1, 1}, {4, 5}, {1, 4, 5}, {4, 1}});
  const DomainIndexing x = MakeDomainIndexing(g);
  EXPECT_EQ(x.access,
            (std::vector<Access>{Access::kFlat, Access::kScalar, Access::kScalar, Access::kScalar,
                                 Access::kStrided, Access::kStrided, Access::kStrided}));
  ExpectMatchesReference(g);
}

TEST(DomainIndexingTest, SameShapesNeedNoCoordinates) {
  const DomainIndexing x = MakeDomainIndexing(Graph({3, 4, 5}, {{3, 4, 5}, {1, 3, 4, 5}}));
  EXPECT_TRUE(x.dims.empty());
  EXPECT_EQ(x.access[1], Access::kFlat);
}

TEST(DomainIndexingTest, CollapsesDimsAllStridedInputsAreContiguousAcross) {
  // [4, 5] against [3, 4, 5]: the inner two dims are one run of 20.
  DomainIndexing x = MakeDomainIndexing(Graph({3, 4, 5}, {{4, 5}}));
  EXPECT_EQ(x.dims, (std::vector<int64_t>{3, 20}));
  EXPECT_EQ(x.divisors, (std::vector<int64_t>{20, 1}));
  EXPECT_EQ(x.strides[0], (std::vector<int64_t>{0, 1}));
  // [5] and [4, 1]: neither merge is contiguous for both.
  x = MakeDomainIndexing(Graph({3, 4, 5}, {{5}, {4, 1}}));
  EXPECT_EQ(x.dims, (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(x.strides[0], (std::vector<int64_t>{0, 0, 1}));
  EXPECT_EQ(x.strides[1], (std::vector<int64_t>{0, 1, 0}));
  // [5] alone: the outer dims 3 and 4 are both broadcast, so they merge into 12.
  x = MakeDomainIndexing(Graph({3, 4, 5}, {{5}}));
  EXPECT_EQ(x.dims, (std::vector<int64_t>{12, 5}));
  // Size-1 domain dims disappear.
  x = MakeDomainIndexing(Graph({3, 1, 5}, {{3, 1, 1}}));
  EXPECT_EQ(x.dims, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(x.strides[0], (std::vector<int64_t>{1, 0}));
}

TEST(DomainIndexingTest, ScalarAndEmptyDomains) {
  DomainIndexing x = MakeDomainIndexing(Graph({}, {{}, {1}}));
  EXPECT_EQ(x.access, (std::vector<Access>{Access::kScalar, Access::kScalar}));
  x = MakeDomainIndexing(Graph({3, 0, 5}, {{3, 0, 5}, {5}, {1}}));
  EXPECT_EQ(x.access, (std::vector<Access>{Access::kFlat, Access::kFlat, Access::kScalar}));
  EXPECT_TRUE(x.dims.empty());
}

TEST(DomainIndexingTest, RandomBroadcastsMatchNumpy) {
  std::mt19937 rng(7);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int64_t> domain(static_cast<size_t>(uniform(0, 5)));
    for (int64_t& d : domain) d = uniform(1, 4);
    std::vector<Shape> inputs;
    for (int k = uniform(1, 4); k > 0; --k) {
      const int rank = uniform(0, static_cast<int>(domain.size()));
      std::vector<int64_t> dims(domain.end() - rank, domain.end());
      for (int64_t& d : dims) {
        if (uniform(0, 2) == 0) d = 1;
      }
      if (uniform(0, 4) == 0) dims.insert(dims.begin(), 1);  // a leading 1 past the rank
      if (dims.size() > domain.size()) dims.erase(dims.begin());
      inputs.emplace_back(dims);
    }
    ExpectMatchesReference(Graph(Shape(domain), inputs));
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace sluice::framework::compiler::compiler_domain_indexing_test
