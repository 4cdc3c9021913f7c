#include "trainer/host_memory.h"

#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <torch/torch.h>

namespace verl::trainer {
namespace {

// The trainer tests run on the CPU with the policy run_trainer applies there: applied at start-up
// for the whole binary, not only for the tests in this file.
const bool kApplied = keep_freed_host_memory();

#if defined(__GLIBC__)
TEST(HostMemory, LargeBlocksComeFromTheHeapAndFreedOnesAreReused) {
  ASSERT_TRUE(kApplied);
  EXPECT_TRUE(keep_freed_host_memory()) << "idempotent";
  const auto before = mallinfo2();
  constexpr size_t kBig = size_t{256} << 20;  // a [430, 151936] float32 logits chunk
  auto* p = static_cast<char*>(std::malloc(kBig));
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, kBig);
  const auto held = mallinfo2();
  EXPECT_EQ(held.hblkhd, before.hblkhd) << "a 256 MiB block was mmapped";
  std::free(p);
  const auto after_free = mallinfo2();
  // (The heap may have held the block already, freed by an earlier test: only "not smaller".)
  EXPECT_GE(after_free.arena, held.arena) << "the freed block was handed back to the kernel";
  // A tensor of the same size reuses it: the heap does not grow again.
  auto t = torch::empty({static_cast<int64_t>(kBig / 4)}, torch::kFloat32);
  t.fill_(1.0f);
  EXPECT_EQ(mallinfo2().arena, after_free.arena);
}
#endif

}  // namespace
}  // namespace verl::trainer
