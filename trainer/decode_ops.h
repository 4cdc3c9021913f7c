// The slot engine's decode-step operations on device tensors (no autograd: inference only).
// On CUDA with a bf16 / fp16 compute dtype each is one kernel of trainer/decode_kernels.cu;
// elsewhere (the CPU, fp32, shapes a kernel does not take) the same math in torch ops, which is
// the reference the kernels are tested against (tests/unit/trainer/decode_ops_test.cc):
// - paged_decode_attention: one query position per sequence against its cached keys/values
//   through the block table (trainer/paged_kv.h); the kernel reads each sequence's blocks up to
//   its length; the torch form gathers the blocks into a [b, kv_heads, width, d] view and masks;
// - add_rms_norm: the residual add and the RMSNorm that follows it, rounded once to the
//   compute dtype (the residual stream stays fp32);
// - rope_qkv_to_cache: RoPE on the q and k of one fused qkv row per sequence, and k and v
//   written to the sequence's cache row;
// - silu_and_mul: SwiGLU's silu(gate) * up from the fused gate_up output.
#pragma once

#include <cstdint>

#include <torch/torch.h>

namespace verl::trainer {

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

// x fp32 [rows, n]: x += add (when defined; any dtype), then rmsnorm(x) * w (fp32 [n]) in `dtype`.
torch::Tensor add_rms_norm(torch::Tensor& x, const torch::Tensor& add, const torch::Tensor& w, double eps,
                           torch::Dtype dtype);

// qkv [b, (h + 2 kvh) d]; cos / sin fp32 [positions, d] (rotate-half RoPE tables); pos [b]
// int64: each row's position; write_row [b] int64: each row's row of the caches viewed
// [rows, kvh, d]. Writes k (rotated) and v there and returns q rotated [b, h, d], all in qkv's dtype.
torch::Tensor rope_qkv_to_cache(const torch::Tensor& qkv, const torch::Tensor& cos, const torch::Tensor& sin,
                                const torch::Tensor& pos, const torch::Tensor& write_row, torch::Tensor& k_cache,
                                torch::Tensor& v_cache, int64_t h, int64_t kvh, int64_t d);

// gu [rows, 2n] -> silu(gu[:, :n]) * gu[:, n:] [rows, n] in gu's dtype.
torch::Tensor silu_and_mul(const torch::Tensor& gu);

// Whether the kernels run for tensors of this device and dtype (the CUDA build, bf16 / fp16).
bool decode_kernels_for(const torch::Device& device, torch::Dtype dtype);

}  // namespace verl::trainer
