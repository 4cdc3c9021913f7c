#include "trainer/paged_kv.h"

#include <algorithm>

namespace verl::trainer {

KvBlockPool::KvBlockPool(int64_t num_blocks) : refs_(static_cast<size_t>(std::max<int64_t>(num_blocks, 1)), 0) {
  refs_[0] = 1;  // reserved
  for (int64_t b = num_blocks - 1; b >= 1; --b) free_.push_back(b);
}

std::vector<int64_t> KvBlockPool::allocate(int64_t n) {
  if (n > free_blocks()) return {};
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    out.push_back(free_.back());
    free_.pop_back();
    refs_[static_cast<size_t>(out.back())] = 1;
  }
  peak_used_ = std::max(peak_used_, used_blocks());
  return out;
}

void KvBlockPool::share(int64_t block) {
  TORCH_CHECK(block > 0 && block < num_blocks() && refs_[static_cast<size_t>(block)] > 0,
              "KvBlockPool: sharing block ", block, ", which is not allocated");
  ++refs_[static_cast<size_t>(block)];
}

void KvBlockPool::release(int64_t block) {
  TORCH_CHECK(block > 0 && block < num_blocks() && refs_[static_cast<size_t>(block)] > 0,
              "KvBlockPool: releasing block ", block, ", which is not allocated");
  if (--refs_[static_cast<size_t>(block)] == 0) free_.push_back(block);
}

void KvBlockPool::release(const std::vector<int64_t>& blocks) {
  for (auto b : blocks) release(b);
}

}  // namespace verl::trainer
