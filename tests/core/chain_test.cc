// Chain (core/intrusive_queue.h): the value type producers and pools pass instructions and
// slots around in. PushBack, Append and PopFront keep head, tail and size consistent.
#include <vector>

#include "core/intrusive_queue.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

struct Item {
  int value = 0;
  Item* next = nullptr;
};

std::vector<int> Drain(Chain<Item>& chain) {
  std::vector<int> values;
  while (!chain.empty()) {
    Item* item = chain.PopFront();
    EXPECT_EQ(item->next, nullptr);
    values.push_back(item->value);
  }
  return values;
}

TEST(ChainTest, PopFrontTakesTheOldestAndEmptiesTheChain) {
  Item items[3] = {{1}, {2}, {3}};
  Chain<Item> chain;
  for (Item& item : items) chain.PushBack(&item);
  ASSERT_EQ(chain.size, 3u);
  EXPECT_EQ(chain.PopFront(), &items[0]);
  EXPECT_EQ(chain.size, 2u);
  EXPECT_EQ(chain.head, &items[1]);
  EXPECT_EQ(chain.tail, &items[2]);
  EXPECT_EQ(Drain(chain), (std::vector<int>{2, 3}));
  EXPECT_EQ(chain.size, 0u);
  EXPECT_EQ(chain.tail, nullptr);
  // Usable again after it ran empty: the tail was cleared with the head.
  chain.PushBack(&items[2]);
  EXPECT_EQ(chain.head, &items[2]);
  EXPECT_EQ(chain.tail, &items[2]);
}

TEST(ChainTest, AppendKeepsOrderAndEmptiesTheOther) {
  Item items[4] = {{1}, {2}, {3}, {4}};
  Chain<Item> a, b;
  a.PushBack(&items[0]);
  a.PushBack(&items[1]);
  b.PushBack(&items[2]);
  b.PushBack(&items[3]);
  a.Append(std::move(b));
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(a.size, 4u);
  EXPECT_EQ(a.PopFront(), &items[0]);
  a.Append(Chain<Item>());  // an empty chain changes nothing
  EXPECT_EQ(Drain(a), (std::vector<int>{2, 3, 4}));
}

}  // namespace
}  // namespace sluice
