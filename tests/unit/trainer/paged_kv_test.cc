// The paged KV cache's block pool: its accounting of free, shared and reserved blocks.
#include "trainer/paged_kv.h"

#include <gtest/gtest.h>


namespace verl::trainer {
namespace {

TEST(KvBlockPool, HandsOutEveryBlockButTheReservedOneAndTakesSharedBlocksBackAtTheLastOwner) {
  KvBlockPool pool(5);
  EXPECT_EQ(pool.free_blocks(), 4);
  auto a = pool.allocate(3);
  ASSERT_EQ(a.size(), 3u);
  for (auto b : a) EXPECT_NE(b, 0);
  EXPECT_TRUE(pool.allocate(2).empty()) << "only one block is left";
  EXPECT_EQ(pool.free_blocks(), 1) << "a refused request takes nothing";
  pool.share(a[0]);
  pool.release(a[0]);
  EXPECT_EQ(pool.free_blocks(), 1) << "the block still has an owner";
  pool.release(a[0]);
  EXPECT_EQ(pool.free_blocks(), 2);
  EXPECT_EQ(pool.peak_used(), 3);
  EXPECT_THROW(pool.release(a[0]), c10::Error) << "a double free is caught";
  EXPECT_THROW(pool.release(0), c10::Error) << "the reserved block is never freed";
  auto b = pool.allocate(2);
  EXPECT_EQ(b.size(), 2u);
  EXPECT_EQ(pool.used_blocks(), 4);
}

}  // namespace
}  // namespace verl::trainer
