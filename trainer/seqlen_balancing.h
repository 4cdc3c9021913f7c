// Micro-batches by a token budget (verl's use_dynamic_bsz: verl/utils/seqlen_balancing.py).
// Instead of a fixed number of rows, a batch is cut into the fewest micro-batches whose
// average holds at most max_token_len real tokens, and rows are assigned to them by the
// Karmarkar-Karp largest-differencing method so that their workloads (verl's FLOP estimate
// 24576 * len + len^2) are balanced. Callers select those rows, run them, and put per-row
// results back in the original order (restore_order).
// Pure functions on row lengths; no torch, thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace verl::trainer {

// verl's calculate_workload: a 7B-calibrated proxy of a sequence's forward FLOPs.
int64_t sequence_workload(int64_t seqlen);

// Partitions the indices of `values` into k non-empty sets of near-equal sums (verl's
// karmarkar_karp with equal_size=false, then get_seqlen_balanced_partitions' check and sort):
// each set's indices ascending. Requires 1 <= k <= values.size().
std::vector<std::vector<int64_t>> karmarkar_karp(const std::vector<int64_t>& values, int64_t k);

// How many micro-batches a token budget gives: ceil(total / max_token_len), at most one per
// row, at least min_micro_batches (the count other data-parallel ranks need, so that every
// rank runs the same number: verl's same_micro_num_in_dp).
int64_t count_micro_batches(const std::vector<int64_t>& seq_lens, int64_t max_token_len,
                            int64_t min_micro_batches = 0);

// verl's rearrange_micro_batches: the row indices of each micro-batch, heaviest first then
// interleaved (verl's use_dynamic_bsz_balance order). Throws verl::Error (invalid config)
// naming budget_key and the row when a row alone exceeds max_token_len (verl asserts the same).
std::vector<std::vector<int64_t>> rearrange_micro_batches(const std::vector<int64_t>& seq_lens,
                                                          int64_t max_token_len, const std::string& budget_key,
                                                          int64_t min_micro_batches = 0);

// The permutation that puts rows computed in the order of `partitions` (concatenated) back in
// their original order: result[original row] = position in the concatenation.
std::vector<int64_t> restore_order(const std::vector<std::vector<int64_t>>& partitions);

}  // namespace verl::trainer
