// The paged KV cache's parts, as vLLM builds its own: the cache of a layer is a pool of blocks
// [num_blocks, block_size, kv_heads, head_dim]; a sequence owns a row of a block table (its
// blocks in position order), so it holds only the blocks its length needs, and sequences that
// share a prompt share the blocks the prompt fills.
// - KvBlockPool: the host-side allocator of block ids, with reference counts (shared blocks).
//   Block 0 is never handed out: free slots' table rows point at it, so a decode step may write
//   there without touching a live sequence.
// Attention through the block table is trainer/decode_ops.h's paged_decode_attention.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

namespace verl::trainer {

class KvBlockPool {
 public:
  explicit KvBlockPool(int64_t num_blocks = 0);

  int64_t num_blocks() const { return static_cast<int64_t>(refs_.size()); }
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  int64_t used_blocks() const { return num_blocks() - 1 - free_blocks(); }
  int64_t peak_used() const { return peak_used_; }

  // n new blocks (reference count 1), or an empty vector when fewer than n are free.
  std::vector<int64_t> allocate(int64_t n);
  void share(int64_t block);    // one more owner
  void release(int64_t block);  // one owner fewer; free at zero
  void release(const std::vector<int64_t>& blocks);

 private:
  std::vector<int32_t> refs_;   // by block id; refs_[0] is the reserved block
  std::vector<int64_t> free_;   // a stack: the last freed block is handed out first
  int64_t peak_used_ = 0;
};

// Blocks of `block_size` positions that `positions` positions need.
inline int64_t blocks_for(int64_t positions, int64_t block_size) { return (positions + block_size - 1) / block_size; }

}  // namespace verl::trainer
