// The paged KV cache's parts, as vLLM builds its own: the cache of a layer is a pool of blocks
// [num_blocks, block_size, kv_heads, head_dim]; a sequence owns a row of a block table (its
// blocks in position order), so it holds only the blocks its length needs, and sequences that
// share a prompt share the blocks the prompt fills.
// - KvBlockPool: the host-side allocator of block ids, with reference counts (shared blocks).
//   Block 0 is never handed out: free slots' table rows point at it, so a decode step may write
//   there without touching a live sequence.
// - paged_decode_attention: one query position per sequence against its cached keys/values
//   through the block table. On CUDA (bf16 / fp16, head_dim 64 or 128, up to 8 query heads per
//   kv head) one kernel reads each sequence's blocks up to its length; elsewhere the blocks are
//   gathered into a [b, kv_heads, width, d] view and attended with a mask (the reference the
//   kernel is tested against).
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

// q [b, h, d] (one position per sequence), k_cache / v_cache [num_blocks, block_size, kvh, d],
// block_table [>= b, max_blocks] int64 (row i: sequence i's blocks), lengths [b] int64: the
// number of cached positions sequence i attends (positions 0..lengths[i]-1, or the last `window`
// of them when window > 0). Returns [b, h, d] in q's dtype: softmax(q k^T * scale) v per head,
// the query heads of a kv head sharing it (grouped-query attention).
torch::Tensor paged_decode_attention(const torch::Tensor& q, const torch::Tensor& k_cache, const torch::Tensor& v_cache,
                                     const torch::Tensor& block_table, const torch::Tensor& lengths, int64_t window,
                                     double scale);

// The same through the gather-and-mask form on any device (what runs where the kernel does not).
torch::Tensor paged_decode_attention_reference(const torch::Tensor& q, const torch::Tensor& k_cache,
                                               const torch::Tensor& v_cache, const torch::Tensor& block_table,
                                               const torch::Tensor& lengths, int64_t window, double scale);

// Whether paged_decode_attention runs its CUDA kernel for these shapes and dtype.
bool paged_decode_kernel_supports(const torch::Tensor& q, const torch::Tensor& k_cache);

}  // namespace verl::trainer
